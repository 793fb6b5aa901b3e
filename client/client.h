/* client.h — internals of the external client shared by its API files: the command a
 * caller thread posts to the client's reactor and waits for. */
#ifndef FX_CLIENT_H
#define FX_CLIENT_H

#include <semaphore.h>

#include "config.h"
#include "hmap.h"
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
    /* Requests go out directly from the calling thread (no hand-off to the reactor);
     * the reactor only receives. io_lock keeps frames whole on the socket; the client
     * holds a reference on the conn so the fd stays open (not reused) until close. */
    pthread_mutex_t io_lock;
    int sock;
    fx_conn_t *conn_keep;
    pthread_mutex_t pend_lock; /* guards pending */
    fx_hmap_t *pending;        /* req_id -> struct ck_rpc (sync calls awaiting their response) */
    uint64_t next_req_id;      /* atomic */
};

FX_INTERNAL fx_conn_t *fx_client_conn(fluxon_client *cl);
FX_INTERNAL const fx_config_t *fx_client_config(const fluxon_client *cl);
FX_INTERNAL fx_segment_t *fx_client_segment(const fluxon_client *cl);

/* client_kv.c */
/* Sends type with body (body_len bytes, taken over: freed by the call) and waits for the
 * answer; *resp_p (fx_free) receives the response body, also an error body. Returns the
 * response status, or FLUXON_ERR_TIMEOUT / UNAVAILABLE / NOMEM. Any thread. */
FX_INTERNAL int fx_client_rpc(fluxon_client *cl, uint16_t type, uint8_t *body, uint32_t body_len,
                              uint8_t **resp_p, uint32_t *resp_len_p);
/* Writes one frame on the socket from the calling thread (bounded by timeout_ms). */
FX_INTERNAL int fx_client_write(fluxon_client *cl, const fx_frame_header_t *h, const void *body);
FX_INTERNAL int fx_client_kv_init(fluxon_client *cl);
FX_INTERNAL void fx_client_kv_fini(fluxon_client *cl);
/* reactor thread: an owner notification (PUBLISHED); true if handled */
FX_INTERNAL bool fx_client_kv_notification(fluxon_client *cl, const fx_frame_header_t *h,
                                           const uint8_t *body, fx_arena_t *arena);
FX_INTERNAL void fx_client_kv_owner_lost(fluxon_client *cl);
/* reactor thread: the response to a request a caller wrote directly */
FX_INTERNAL void fx_client_kv_on_response(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                          fx_arena_t *arena);

#endif
