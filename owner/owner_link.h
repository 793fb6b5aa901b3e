/* owner_link.h — the owner's link to the master (master_link.c): connect with backoff,
 * HELLO, REGISTER, heartbeats, and forwarding externals' requests to the master. The
 * modules above learn of (re)registration and loss through hooks. */
#ifndef FX_OWNER_LINK_H
#define FX_OWNER_LINK_H

#include "owner_int.h"
#include "jsonbuf.h"

typedef struct fx_olink_hooks {
    /* fills the UCX address/rkey and the grants held into a REGISTER about to go */
    void (*registering)(fx_owner_t *o, fx_body_register_t *reg);
    /* registered; master_changed: a new master generation (its routes are gone); forgotten:
     * the master had forgotten this owner (L1: dead past its grace; what it holds is stale) */
    /* again: registered anew with the master it was registered with (a lost connection) */
    void (*registered)(fx_owner_t *o, bool master_changed, bool forgotten, bool again);
    void (*lost)(fx_owner_t *o); /* the connection went away (a reconnect is scheduled) */
    void (*started)(fx_owner_t *o, int status); /* first registration, or a permanent refusal */
    /* a request from the master other than CLUSTER_INFO: true when served */
    bool (*request)(fx_owner_t *o, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena);
    /* the owners this one has pushes to that may still land (every heartbeat, W2) */
    fx_strv_t (*unsettled)(fx_owner_t *o);
    /* the owners the master says are alive (CLUSTER_INFO) */
    void (*alive)(fx_owner_t *o, const fx_olink_owners_t *l);
} fx_olink_hooks_t;

FX_INTERNAL int fx_olink_init(fx_owner_t *o, const fx_olink_hooks_t *hooks);
FX_INTERNAL void fx_olink_start(fx_owner_t *o);    /* connects (and keeps reconnecting) */
FX_INTERNAL void fx_olink_shutdown(fx_owner_t *o); /* stops timers, closes the connection */
FX_INTERNAL void fx_olink_fini(fx_owner_t *o);
/* The master's per-key answer to a batch (statuses): status as the call ended, or
 * FLUXON_ERR_PROTOCOL (logged, naming what) when it was OK but its statuses do not decode
 * or are not n; *st holds them when OK (else none). */
FX_INTERNAL int fx_olink_statuses(int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena,
                                  size_t n, const char *what, fx_body_statuses_t *st);
/* The master connection when registered, else NULL. */
FX_INTERNAL fx_conn_t *fx_olink_conn(fx_owner_t *o);
/* Owners alive as the master last said (CLUSTER_INFO); -1 unknown. */
/* The registered master's dead_owner_grace_ms (0: not registered, or not told). */
FX_INTERNAL uint32_t fx_olink_dead_grace_ms(fx_owner_t *o);
/* The generation of the master this owner is registered with now (0: none). */
FX_INTERNAL uint64_t fx_olink_master_generation(fx_owner_t *o);
FX_INTERNAL int64_t fx_olink_owners_alive(fx_owner_t *o);
/* The only owner there ever was (with this owner): a local miss is a miss everywhere. */
FX_INTERNAL bool fx_olink_alone(fx_owner_t *o);
/* Issue 38: every copy of a key on a remote_cache owner is one this owner made (at the first
 * CLUSTER_INFO no remote_cache owner held replicas, and no other owner that takes puts has
 * been announced since): together with elsewhere.c's record of what it copied, a local miss
 * of a key it never copied is held nowhere (a remote_cache owner's own clients' puts are
 * not seen: they would be missed, never served wrong). */
FX_INTERNAL bool fx_olink_copies_mine(fx_owner_t *o);
/* Forwards an external's request to the master and relays the answer. */
FX_INTERNAL void fx_olink_forward(fx_owner_t *o, fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body);
/* fx_olink_forward whose OK or error answer (h's req_id already the external's) goes to
 * relay, which sends what the external gets; tag (<= FX_TENANT_NAME_MAX + 2 bytes) is
 * copied and handed to it (issue 42: LIST answers of a tenant, tenant.c). */
typedef void (*fx_olink_relay_fn)(fx_conn_t *ext, const fx_frame_header_t *rh, const uint8_t *body,
                                  fx_arena_t *arena, const char *tag, size_t tag_len);
FX_INTERNAL void fx_olink_forward_relay(fx_owner_t *o, fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                        fx_olink_relay_fn relay, const char *tag, size_t tag_len);
FX_INTERNAL void fx_olink_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
