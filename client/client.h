/* client.h — client/: the external client every engine embeds. Internals shared by its
 * files, in layer order: client.c (open/close, handshake, segment, ping/stats/nodes),
 * rpc.c (the request path: pending table, socket writes, one-way queue), future.c
 * (futures), hostless.c (plans and get handles), kv.c (plain KV on top); scratch.c (the
 * calling thread's buffers) and ring.c (the shared-memory rings) below rpc.c. */
#ifndef FX_CLIENT_H
#define FX_CLIENT_H

#include <pthread.h>
#include <semaphore.h>

#include "config.h"
#include "conn.h"
#include "hmap.h"
#include "reactor.h"
#include "registry.h"
#include "prefault.h"
#include "segment.h"

/* rpc.c's state: requests go out from the calling thread (no hand-off to the reactor);
 * the reactor receives. Every frame, request or one-way, joins one ordered out-queue and
 * is written without blocking under io_lock: a frame is always finished before the next
 * one starts (a caller that times out leaves its frame to be finished by the next writer
 * or the reactor's flush timer), and nobody ever sleeps holding io_lock. The client holds
 * a reference on the conn so the fd stays open (not reused) until close. */
struct crpc_out;
#define FX_CLIENT_ORPHANS 256
typedef struct fx_client_rpc {
    pthread_mutex_t io_lock;   /* guards the out-queue and the socket writes */
    struct crpc_out *out_head, *out_tail;
    size_t out_off;            /* bytes of the head frame already on the socket */
    uint64_t out_seq, out_done; /* frames queued / fully written so far */
    bool dead;                 /* a write failed: nothing more goes out */
    fx_timer_t flush_timer;    /* reactor: retries while frames are left */
    int flush_armed;           /* atomic: a flush is posted or armed */
    int sock;
    fx_conn_t *conn_keep;
    pthread_mutex_t pend_lock; /* guards pending */
    fx_hmap_t *pending;        /* req_id -> struct crpc (sync calls awaiting their response) */
    uint64_t next_req_id;      /* atomic */
} fx_client_rpc_t;

struct fluxon_client {
    fx_config_t cfg;
    fx_reactor_t *r;
    pthread_t thread;
    fx_conn_t *conn; /* reactor thread only; NULL once the owner is gone */
    fx_segment_t *seg;
    char owner_node_id[FX_ID_MAX];
    uint64_t owner_generation;
    uint32_t handle_ttl_ms; /* the owner's config: this client cancels handles unconsumed by then */
    fx_timer_t handle_timer; /* reactor: sweeps expired handles (hostless.c) */
    bool owner_lost; /* written by the reactor, read by callers */
    uint64_t requests, errors, timeouts, handles_expired; /* atomics */
    fx_client_rpc_t rpc;     /* rpc.c */
    fx_hmap_t *futures;      /* future.c, under futures_lock: future id -> fluxon_future */
    struct {                 /* future.c, under futures_lock: PUBLISHED for no armed future */
        uint64_t id;         /* (a commit whose answer was lost), kept for a retried commit */
        int status;
        uint64_t *kst;       /* NULL, or n_kst per-key statuses (fx_malloc'd) */
        uint32_t n_kst;
    } orphans[FX_CLIENT_ORPHANS];
    unsigned orphan_next;
    fx_plan_reg_t *plans;    /* hostless.c: live plans and get handles */
    struct cring *ring;      /* ring.c (issue 18): shared-memory rings with the owner, NULL: socket only */
    pthread_mutex_t futures_lock; /* future.c: futures and orphans (armed by callers on the ring path) */
    void (*close_hook)(void *arg); /* an upper layer's undo at close (cuda/register.c) */
    void *close_hook_arg;
    fx_prefault_t prefault;  /* faults the owner's segment into this mapping (prefault_segment) */
};

/* ---- client.c ---- */
/* One hook an upper layer (cuda/register.c) sets to undo its work at fluxon_client_close,
 * before the segment is unmapped; fn NULL clears it. *arg_p: the current arg (NULL: none).
 * The caller serialises set/get against each other (not against close: the API contract
 * already forbids using a client during its close). */
FX_INTERNAL void fx_client_set_close_hook(fluxon_client *cl, void (*fn)(void *arg), void *arg);
FX_INTERNAL void *fx_client_close_hook_arg(const fluxon_client *cl);

/* ---- rpc.c ---- */
FX_INTERNAL int fx_client_rpc_init(fluxon_client *cl);
FX_INTERNAL void fx_client_rpc_fini(fluxon_client *cl);
/* The socket callers write to (called once the reactor owns the conn). */
FX_INTERNAL void fx_client_rpc_attach(fluxon_client *cl, fx_conn_t *conn);
/* Runs on the reactor with the response (any status) before the caller wakes. */
typedef void (*fx_client_hook_fn)(fluxon_client *cl, void *ctx, int status, const uint8_t *body, uint32_t len);
/* Sends type with body (len bytes, taken over: given back by the call, fx_client_buf_free;
 * NULL = NOMEM) and waits up to timeout_ms for the answer; *resp_p (fx_client_buf_free;
 * may be NULL) receives the response body, also an error body. Returns the response status, or FLUXON_ERR_TIMEOUT /
 * UNAVAILABLE / NOMEM. Any thread. */
FX_INTERNAL int fx_client_call(fluxon_client *cl, uint16_t type, uint8_t *body, uint32_t len,
                               fx_client_hook_fn hook, void *ctx, uint8_t **resp_p, uint32_t *resp_len_p);
/* The common case: fx_client_call, the error reply logged under `what`, then on OK
 * decode(resp, len, arg) (may be NULL), the response freed. */
typedef int (*fx_client_decode_fn)(const uint8_t *body, uint32_t len, void *arg);
FX_INTERNAL int fx_client_call_decode(fluxon_client *cl, uint16_t type, uint8_t *body, uint32_t len,
                                      const char *what, fx_client_decode_fn decode, void *arg);
/* One-way (release, consume): queued to the reactor, which writes them in order. */
FX_INTERNAL void fx_client_send_oneway(fluxon_client *cl, uint16_t type, uint8_t *body, uint32_t len);
FX_INTERNAL int fx_client_send_hint(fluxon_client *cl, uint16_t type, uint8_t *body, uint32_t len);
/* Logs an error reply's message (bad input at warn level, ordinary outcomes at debug). */
FX_INTERNAL void fx_client_log_error(const char *what, int rc, const uint8_t *resp, uint32_t len);
/* A reply whose caller gave up (body not yet validated): what it reserved is handed back. */
FX_INTERNAL void fx_client_late_answer(fluxon_client *cl, const fx_frame_header_t *h, const uint8_t *body);
/* reactor thread: the response to a request a caller wrote directly */
FX_INTERNAL void fx_client_on_response(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                       fx_arena_t *arena);
/* reactor thread: the owner is gone; every waiting caller gets UNAVAILABLE */
FX_INTERNAL void fx_client_rpc_fail_all(fluxon_client *cl);

/* Encodes a message body for fx_client_call into the thread's request buffer when it is
 * free, else a heap one (fx_client_buf; NULL on NOMEM). */
#define FX_CLIENT_ENCODE(bodykind, bp, out_buf, out_len)                 \
    do {                                                                \
        out_len = (uint32_t)fx_body_##bodykind##_size(bp);              \
        out_buf = fx_client_buf(FX_CLIENT_REQ, (size_t)out_len + 8);    \
        if (out_buf) fx_body_##bodykind##_encode((bp), out_buf);        \
    } while (0)

/* ---- scratch.c: the calling thread's buffers (no heap allocation per call) ---- */
enum { FX_CLIENT_REQ = 0, FX_CLIENT_RESP = 1 };
/* n bytes: the thread's request or response buffer when it is free (lent until
 * fx_client_buf_free), else the heap; NULL on NOMEM. */
FX_INTERNAL uint8_t *fx_client_buf(int which, size_t n);
/* Gives back a buffer from fx_client_buf, or fx_free's anything else (NULL: no-op). Only
 * on the thread that got it. */
FX_INTERNAL void fx_client_buf_free(void *p);
/* p itself when it is heap memory, else a heap copy of its n bytes (p given back): for
 * a body that outlives the call (the socket's out-queue). NULL on NOMEM (p given back). */
FX_INTERNAL uint8_t *fx_client_buf_own(uint8_t *p, size_t n);
/* The thread's decode arena when it is free, else *fallback (zeroed); give it back with
 * fx_client_arena_done (reset and kept, or freed). */
FX_INTERNAL fx_arena_t *fx_client_arena(fx_arena_t *fallback);
FX_INTERNAL void fx_client_arena_done(fx_arena_t *a);

/* ---- ring.c (issue 18): the shared-memory rings with the owner ---- */
/* Maps the rings (memfd and efd taken over); FLUXON_OK, else the client stays on the socket. */
FX_INTERNAL int fx_client_ring_attach(fluxon_client *cl, int memfd, int efd);
FX_INTERNAL void fx_client_ring_fini(fluxon_client *cl);
/* A request through a ring slot: false when it does not travel on the ring (no rings, a
 * type whose reply is unbounded, too large: the caller uses the socket); true with the
 * outcome in *rc_p as fx_client_call returns it (req is not taken over). */
FX_INTERNAL bool fx_client_ring_call(fluxon_client *cl, uint16_t type, const uint8_t *req, uint32_t len,
                                     fx_client_hook_fn hook, void *hook_ctx, uint8_t **resp_p, uint32_t *resp_len_p,
                                     int *rc_p);
/* A one-way frame through the ring's one-way queue; false: use the socket. */
/* 1: queued on the ring's one-way queue; 0: not (no ring, too large, the owner gone, or the
 * queue stayed full for timeout_ms): the socket takes it; -1 (may_wait false): the queue
 * is full now, nothing queued. */
FX_INTERNAL int fx_client_ring_oneway(fluxon_client *cl, uint16_t type, const uint8_t *req, uint32_t len,
                                      bool may_wait);
/* Before anything goes on the socket: waits (up to timeout_ms) until the owner consumed
 * the one-way frames queued on the ring so far (their order before what follows). */
FX_INTERNAL void fx_client_ring_barrier(fluxon_client *cl);
/* The caller's spin before it sleeps on its slot, in microseconds: after a call that found
 * the owner polling, and after one that rang its doorbell (FLUXON_RING_SPIN_US sets both;
 * by default, or when it is not an integer in 0..1000000 (warned), 50 and, on hosts with
 * fewer than 8 CPUs, 0). */
FX_INTERNAL void fx_client_ring_spin_us(uint64_t *polled_us, uint64_t *parked_us);
/* reactor thread: the owner is gone; every caller waiting on a slot gets UNAVAILABLE */
FX_INTERNAL void fx_client_ring_lost(fluxon_client *cl);
/* Reaps the late replies of callers that timed out (what they reserved is handed back). */
FX_INTERNAL void fx_client_ring_sweep(fluxon_client *cl);

/* ---- future.c ---- */
FX_INTERNAL int fx_client_futures_init(fluxon_client *cl);
FX_INTERNAL void fx_client_futures_fini(fluxon_client *cl);
/* A new future (one reference, the caller's); NULL on NOMEM. */
FX_INTERNAL fluxon_future *fx_future_new(fluxon_client *cl);
/* Before arming: f is the outcome of a put plan of n keys, key i accepted at put_start
 * when accepted[i] (a plan's value_ptrs). NOMEM: f reports its status only. */
FX_INTERNAL int fx_future_keys(fluxon_future *f, const uint64_t *accepted, size_t n);
FX_INTERNAL void fx_future_complete(fluxon_future *f, int status);
/* Any thread: f completes when the owner's PUBLISHED for future_id arrives (or at once
 * if it arrived before, unclaimed: the answer to a commit was lost) */
FX_INTERNAL void fx_future_arm(fluxon_client *cl, fluxon_future *f, uint64_t future_id);
/* reactor thread: an owner notification (PUBLISHED); true if handled */
FX_INTERNAL bool fx_client_futures_notification(fluxon_client *cl, const fx_frame_header_t *h,
                                                const uint8_t *body, fx_arena_t *arena);
/* reactor thread: the owner is gone; every armed future completes UNAVAILABLE */
FX_INTERNAL void fx_client_futures_fail_all(fluxon_client *cl);

/* ---- hostless.c (used by kv.c) ---- */
FX_INTERNAL int fx_client_ready(fluxon_client *cl);
FX_INTERNAL bool fx_client_key_ok(const char *k);
/* Checks keys[0..n) (1..1000000 keys of 1..FLUXON_MAX_KEY_BYTES) and views them as
 * fx_str_t: into stack[FX_CLIENT_STACK_KEYS] when they fit (batches of up to 64 keys
 * allocate nothing), else a heap array; release with fx_client_keys_done(*out, stack). */
#define FX_CLIENT_STACK_KEYS 64
/* fluxon_last_error_message's thread-local reason, emptied as a call starts (rpc.c). */
FX_INTERNAL void fx_client_last_msg_clear(void);
/* ... or set by the client itself where it refuses with a reason (a rejected config). */
FX_INTERNAL void fx_client_last_msg_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The client refuses this call's arguments: the reason is logged (warn) and becomes
 * fluxon_last_error_message. Returns FLUXON_ERR_INVALID_ARGUMENT. */
FX_INTERNAL int fx_client_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
FX_INTERNAL int fx_client_keys(const char *const *keys, size_t n, fx_str_t *stack, fx_str_t **out);
FX_INTERNAL void fx_client_keys_done(fx_str_t *kv, const fx_str_t *stack);
/* The scalar put options (flags, lease, preferred sub-cluster, pin TTL) on top of *flags_p. */
FX_INTERNAL int fx_client_put_scalars(const fluxon_put_options *opts, uint64_t *flags_p, uint64_t *lease_p,
                                      const char **preferred_p, uint32_t *pin_ttl_p);
FX_INTERNAL int fx_client_put_start(fluxon_client *cl, const char *const *keys, size_t n, uint64_t value_len,
                                    const fluxon_put_options *opts, uint64_t forced_flags, fluxon_plan **plan_p,
                                    int *key_status);
/* One-way: the owner keeps the handle's first `consume` pins and releases the rest. */
FX_INTERNAL void fx_client_consume(fluxon_client *cl, uint64_t handle_id, uint64_t consume);
/* Cancels every get handle unconsumed past handle_ttl_ms (the reactor runs it
 * periodically; the owner never expires handles itself). Any thread. */
FX_INTERNAL void fx_client_handles_expire(fluxon_client *cl);
/* One-way: the owner drops these holders. */
FX_INTERNAL void fx_client_release_ids(fluxon_client *cl, const uint64_t *ids, size_t n);

#endif
