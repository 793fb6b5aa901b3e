/* master_kv_aux.h — two helpers of master_kv.c, kept in their own file so that file stays
 * small: the lease table (lease id -> deadline, number of routes bound to it) and the
 * INVALIDATE batcher (collects "this replica is no longer routed" per owner during one
 * request, then sends ONE one-way INVALIDATE per owner). Reactor thread only, no locks. */
#ifndef FX_MASTER_KV_AUX_H
#define FX_MASTER_KV_AUX_H

#include "master_int.h"

/* ---- leases ---- */
typedef struct fx_lease_table fx_lease_table_t;

/* Returns FLUXON_OK and *t_p, or FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_lease_table_create(fx_lease_table_t **t_p);
FX_INTERNAL void fx_lease_table_destroy(fx_lease_table_t *t); /* NULL is a no-op */
/* Creates a lease (ids count up from 1) that expires at deadline_ms (fx_now_ms clock).
 * Returns FLUXON_OK and *id_p, or FLUXON_ERR_NOMEM (nothing changed). */
FX_INTERNAL int fx_lease_grant(fx_lease_table_t *t, uint64_t deadline_ms, uint64_t *id_p);
/* True when lease id exists and its deadline is after now_ms (id 0: false). */
FX_INTERNAL bool fx_lease_live(const fx_lease_table_t *t, uint64_t id, uint64_t now_ms);
/* True when lease id is still in the table (live, or expired but not yet collected). */
FX_INTERNAL bool fx_lease_exists(const fx_lease_table_t *t, uint64_t id);
/* Counts a route bound to (delta +1) or unbound from (delta -1) lease id; unknown ids
 * are ignored. */
FX_INTERNAL void fx_lease_bind(fx_lease_table_t *t, uint64_t id, int delta);
/* Removes every lease whose deadline is <= now_ms. Returns how many; *routes_p gets the
 * number of routes still bound to them (0: no route needs to be looked at). */
FX_INTERNAL size_t fx_lease_expire(fx_lease_table_t *t, uint64_t now_ms, uint64_t *routes_p);
FX_INTERNAL size_t fx_lease_count(const fx_lease_table_t *t);

/* ---- INVALIDATE batches ---- */
typedef struct fx_mkv_inv_ent {
    master_node_t *node;
    uint64_t offset, put_ms, put_ver;
    size_t koff; /* key bytes at keys + koff */
    uint32_t klen;
    bool sent;
} fx_mkv_inv_ent_t;

/* Zero-initialise ({0}); every add copies the key, so keys may be freed right after. */
typedef struct fx_mkv_inv {
    fx_mkv_inv_ent_t *e;
    size_t n, cap;
    char *keys;
    size_t kused, kcap;
    size_t lost; /* entries dropped for lack of memory (logged at flush) */
} fx_mkv_inv_t;

/* Queues: replica (node, offset) of key, version (put_ms, put_ver), is no longer routed. */
FX_INTERNAL void fx_mkv_inv_add(fx_mkv_inv_t *v, master_node_t *node, const char *key, size_t klen,
                                uint64_t offset, uint64_t put_ms, uint64_t put_ver);
/* Sends one INVALIDATE (req_id 0) per queued node that is connected (split only when a
 * body would pass ~1 MiB), adds the replicas sent to *replicas_p and the messages to
 * *msgs_p, and frees the queue (v is zeroed, reusable). */
FX_INTERNAL void fx_mkv_inv_flush(fx_mkv_inv_t *v, uint64_t *replicas_p, uint64_t *msgs_p);

#endif
