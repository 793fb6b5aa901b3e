/* client.h — internals of the external client shared by its API files: the command a
 * caller thread posts to the client's reactor and waits for. */
#ifndef FX_CLIENT_H
#define FX_CLIENT_H

#include <semaphore.h>

#include "config.h"
#include "conn.h"
#include "reactor.h"
#include "segment.h"

#include <pthread.h>

struct fluxon_client {
    fx_config_t cfg;
    fx_reactor_t *r;
    pthread_t thread;
    fx_conn_t *conn; /* reactor thread only; NULL once the owner is gone */
    fx_segment_t *seg;
    char owner_node_id[FX_ID_MAX];
    uint64_t owner_generation;
    uint32_t handle_ttl_ms; /* the owner's: handles older than this are gone there */
    bool owner_lost; /* written by the reactor, read by callers */
    uint64_t requests, errors, timeouts; /* atomics */
    void *kv; /* client_kv.c: plan/handle registry, futures */
};

typedef struct fx_client_call {
    void (*run)(void *call); /* runs on the reactor; must complete the call exactly once */
    fluxon_client *cl;
    sem_t done;
    int status;
    int refs;    /* caller + reactor; the last one frees */
    bool posted; /* false: never reached the reactor, the caller frees it alone */
} fx_client_call_t;

/* Posts call->run and waits up to timeout_ms + 1 s. Returns the call's status, or
 * FLUXON_ERR_TIMEOUT / FLUXON_ERR_UNAVAILABLE / FLUXON_ERR_NOMEM; when call->posted is
 * false afterwards, the reactor never saw it and the caller frees it directly. */
FX_INTERNAL int fx_client_call(fluxon_client *cl, fx_client_call_t *call);
FX_INTERNAL void fx_client_call_done(fx_client_call_t *call, int status);
FX_INTERNAL bool fx_client_call_release(fx_client_call_t *call);
FX_INTERNAL fx_conn_t *fx_client_conn(fluxon_client *cl);
FX_INTERNAL const fx_config_t *fx_client_config(const fluxon_client *cl);
FX_INTERNAL fx_segment_t *fx_client_segment(const fluxon_client *cl);

/* client_kv.c */
FX_INTERNAL int fx_client_kv_init(fluxon_client *cl);
FX_INTERNAL void fx_client_kv_fini(fluxon_client *cl);
/* reactor thread: an owner notification (PUBLISHED); true if handled */
FX_INTERNAL bool fx_client_kv_notification(fluxon_client *cl, const fx_frame_header_t *h,
                                           const uint8_t *body, fx_arena_t *arena);
FX_INTERNAL void fx_client_kv_owner_lost(fluxon_client *cl);

#endif
