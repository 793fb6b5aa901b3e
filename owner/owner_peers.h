/* owner_peers.h — the owner's UCX side (peers.c): context, the segment's registration
 * (address + rkey for REGISTER), progress on the reactor, and connections to other owners. */
#ifndef FX_OWNER_PEERS_H
#define FX_OWNER_PEERS_H

#include "owner_int.h"
#include "ucx_dp.h"

FX_INTERNAL int fx_opeers_init(fx_owner_t *o);     /* after the segment exists */
FX_INTERNAL void fx_opeers_shutdown(fx_owner_t *o); /* stops watching the UCX fd (reactor drains) */
FX_INTERNAL void fx_opeers_fini(fx_owner_t *o);     /* transfers in flight complete CANCELLED */
FX_INTERNAL fx_ucx_t *fx_opeers_ucx(fx_owner_t *o);
/* After a transfer on fx_opeers_ucx: when it finished at once (a mapped peer segment), its
 * callback runs on the loop's next turn rather than at the next UCX progress (peers.c). */
FX_INTERNAL void fx_opeers_soon(fx_owner_t *o);
FX_INTERNAL void fx_opeers_info(fx_owner_t *o, fx_str_t *address, fx_str_t *rkey);
/* The connection to owner node_id of that generation (reconnects a restarted or failed one;
 * NULL, nothing tried, for a generation whose process this owner saw exit: peers_exited). */
FX_INTERNAL fx_ucx_peer_t *fx_opeers_get(fx_owner_t *o, fx_str_t node_id, uint64_t generation, fx_str_t address,
                                         fx_str_t rkey, uint64_t base);

/* fx_ucx_transfer(PUT) into owner target's segment, counted unsettled until UCX retired
 * it (also after a timeout was reported: its bytes may still land) — issue 44 W2. Same
 * contract as fx_ucx_transfer (peer NULL: FLUXON_ERR_UNAVAILABLE). */
FX_INTERNAL int fx_opeers_push(fx_owner_t *o, const char *target, fx_ucx_peer_t *peer, const fx_ucx_range_t *ranges,
                               size_t n, fx_ucx_done_cb cb, void *arg);
/* The owners this one has unsettled pushes to: views valid until the next fx_opeers_push
 * or a push settles (send them at once). */
FX_INTERNAL fx_strv_t fx_opeers_unsettled(fx_owner_t *o);
/* True when the peer node_id is connected at generation (its transfers go to that process). */
FX_INTERNAL bool fx_opeers_live(fx_owner_t *o, const char *node_id, uint64_t generation);
/* The UCX peer of node_id while it is connected at generation (else NULL, nothing made);
 * *mapped (may be NULL): its segment is mapped here (transfers with it are memcpy). */
FX_INTERNAL fx_ucx_peer_t *fx_opeers_find(fx_owner_t *o, const char *node_id, uint64_t generation, bool *mapped);
/* The master's list of the owners alive (CLUSTER_INFO). A peer whose UCX transports cannot
 * detect its death (shared memory, ucx_tls) is dead when the same master listed it before
 * and no longer does, or lists its node id with another generation (a new process): its UCX
 * peer fails at once, so the transfers to it end now instead of at their timeout, and the
 * next transfer to the owner connects afresh. A new master's first lists (owners register
 * one by one) fail nothing; peers whose UCX detects failures (tcp, RDMA) are left to it.
 * An owner that takes puts (not remote_cache) maps the segments of the listed owners of its
 * host at once (peer_segments "map"), rather than at their first transfer: the mapping and
 * its prefault run before the write-backs and gets that copy through it. */
FX_INTERNAL void fx_opeers_alive(fx_owner_t *o, const fx_olink_owners_t *l);
FX_INTERNAL void fx_opeers_metrics(fx_owner_t *o, fx_ometrics_t *m);

/* peer_map.c: owners on one host map each other's segment (issue 38). fx_opm_rkey: this
 * owner's REGISTER rkey, the UCX one (len bytes) then its segment's descriptor (none with
 * peer_segments "ucx"); *out is fx_malloc'd. fx_opm_ucx_len: the UCX part of a peer's rkey.
 * fx_opm_attach: the peer's segment mapped here when it runs on this host and namespace and
 * its header names node_id and generation, with a pidfd of its process (readable once it
 * exits); NULL otherwise (UCX then; logged once). */
FX_INTERNAL int fx_opm_rkey(fx_owner_t *o, const void *ucx_rkey, size_t len, void **out, size_t *out_len);
FX_INTERNAL size_t fx_opm_ucx_len(fx_str_t rkey);
/* True when rkey describes the segment of an owner of this host and namespaces at
 * generation, and this owner maps such segments (peer_segments "map"): fx_opm_attach may map it. */
FX_INTERNAL bool fx_opm_here(fx_owner_t *o, uint64_t generation, fx_str_t rkey);
FX_INTERNAL fx_segment_t *fx_opm_attach(fx_owner_t *o, const char *node_id, uint64_t generation, fx_str_t rkey,
                                        int *pidfd_p); /* *pidfd_p: the peer process's pidfd, -1 on NULL */

#endif
