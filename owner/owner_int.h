/* owner_int.h — the owner's state shared by owner.c (lifecycle, master link, external
 * handshake) and owner_kv.c (slots, local index, puts, gets, holders, UCX). Reactor
 * thread only. */
#ifndef FX_OWNER_INT_H
#define FX_OWNER_INT_H

#include "owner.h"
#include "segment.h"

enum { OM_DOWN, OM_CONNECTING, OM_HELLO, OM_REGISTERING, OM_READY };

typedef struct owner_ext {
    struct owner_ext *prev, *next;
    fx_owner_t *o;
    fx_conn_t *conn;
    bool hello_ok;
    char node_id[FX_ID_MAX];
    struct owner_holder *holders; /* pins this external holds (released when it goes) */
    struct owner_plan *plans;     /* put plans not yet committed */
    struct owner_handle *handles; /* get handles not yet consumed */
} owner_ext_t;

struct fx_owner {
    fx_reactor_t *r;
    fx_config_t cfg;
    uint64_t generation;
    fx_segment_t *seg;
    int listen_fd;
    fx_acceptor_t *acceptor;
    owner_ext_t *exts;
    size_t n_exts;
    /* master link */
    int mstate;
    fx_conn_t *mconn;
    int connect_fd;
    fx_connect_op_t connect_op;
    bool connect_inflight;
    fx_timer_t reconnect_timer, heartbeat_timer;
    uint32_t backoff_ms;
    uint64_t master_generation;
    uint32_t reconnects;
    /* start */
    fx_ready_fn ready;
    void *ready_arg;
    bool ready_sent, shutting_down;
    /* counters */
    uint64_t requests, forwarded, errors, heartbeats_sent, heartbeat_failures;
    void *kv; /* owner_kv.c's state */
};

/* owner_kv.c entry points */
FX_INTERNAL int fx_owner_kv_init(fx_owner_t *o);      /* after the segment exists */
FX_INTERNAL void fx_owner_kv_shutdown(fx_owner_t *o); /* before the reactor drains */
FX_INTERNAL void fx_owner_kv_fini(fx_owner_t *o);
/* UCX worker address and packed rkey for REGISTER (owned by the kv state). */
FX_INTERNAL void fx_owner_kv_ucx_info(fx_owner_t *o, fx_str_t *address, fx_str_t *rkey);
FX_INTERNAL void fx_owner_kv_master_ready(fx_owner_t *o);   /* (re)registered */
FX_INTERNAL void fx_owner_kv_master_changed(fx_owner_t *o); /* a new master generation */
FX_INTERNAL void fx_owner_kv_grants(fx_owner_t *o, fx_u64v_t *ids, fx_u64v_t *offsets);
FX_INTERNAL void fx_owner_kv_master_lost(fx_owner_t *o);
FX_INTERNAL void fx_owner_kv_ext_closed(fx_owner_t *o, owner_ext_t *e);
FX_INTERNAL bool fx_owner_kv_ext_request(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h,
                                         const uint8_t *body, fx_arena_t *arena);
FX_INTERNAL bool fx_owner_kv_master_request(fx_owner_t *o, const fx_frame_header_t *h,
                                            const uint8_t *body, fx_arena_t *arena);
FX_INTERNAL size_t fx_owner_kv_stats_json(fx_owner_t *o, char *buf, size_t cap);
/* forwards an external's request to the master and relays the answer (owner.c) */
FX_INTERNAL void fx_owner_forward(fx_owner_t *o, fx_conn_t *c, const fx_frame_header_t *h,
                                  const uint8_t *body);

#endif
