/* rpc.c — the client's request path: a request is encoded and written on the caller's
 * thread, its response arrives on the client's reactor and wakes the caller through the
 * pending table; one-way frames (release, consume) are queued to the reactor. Every other
 * client file talks to the owner through fx_client_call / fx_client_send_oneway. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "client.h"
#include "log.h"

typedef struct crpc {
    int refs; /* atomic: the caller + the pending map */
    sem_t done;
    int status;
    uint64_t id;
    fx_client_hook_fn hook; /* runs on the reactor before the caller wakes */
    void *hook_ctx;
    uint8_t *resp;
    uint32_t resp_len;
} crpc_t;

static void crpc_out_free_all(fx_client_rpc_t *s);

FX_INTERNAL int fx_client_rpc_init(fluxon_client *cl)
{
    fx_client_rpc_t *s = &cl->rpc;
    s->sock = -1;
    fx_timer_init(&s->flush_timer);
    if (fx_hmap_create(64, &s->pending) != FLUXON_OK) return FLUXON_ERR_NOMEM;
    pthread_mutex_init(&s->io_lock, NULL);
    pthread_mutex_init(&s->pend_lock, NULL);
    return FLUXON_OK;
}

FX_INTERNAL void fx_client_rpc_attach(fluxon_client *cl, fx_conn_t *conn)
{
    cl->rpc.sock = fx_conn_fd(conn);
    cl->rpc.conn_keep = conn;
    fx_conn_ref(conn); /* the fd stays ours until close: callers write to it */
}

FX_INTERNAL void fx_client_rpc_fini(fluxon_client *cl)
{
    fx_client_rpc_t *s = &cl->rpc;
    if (!s->pending) return;
    crpc_out_free_all(s);
    if (s->conn_keep) fx_conn_unref(s->conn_keep); /* closes the socket */
    fx_hmap_destroy(s->pending);
    pthread_mutex_destroy(&s->io_lock);
    pthread_mutex_destroy(&s->pend_lock);
    s->pending = NULL;
}

static void crpc_unref(crpc_t *r)
{
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        sem_destroy(&r->done);
        fx_free(r->resp);
        fx_free(r);
    }
}

static crpc_t *crpc_pending_take(fluxon_client *cl, uint64_t id)
{
    void *v = NULL;
    pthread_mutex_lock(&cl->rpc.pend_lock);
    fx_hmap_del(cl->rpc.pending, &id, sizeof id, &v);
    pthread_mutex_unlock(&cl->rpc.pend_lock);
    return v;
}

static void crpc_finish(fluxon_client *cl, crpc_t *r, int status)
{
    if (r->hook) r->hook(cl, r->hook_ctx, status, r->resp, r->resp_len);
    r->status = status;
    sem_post(&r->done);
    crpc_unref(r);
}

/* An answer whose caller gave up (timeout) may still have reserved something at the owner
 * for it: a get handle with its pins, a prepared put plan. Nobody will consume them, so
 * they are handed back at once (one-way) instead of staying until this client closes. */
static void crpc_late(fluxon_client *cl, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    if (fx_msg_validate(h, body, arena) != FLUXON_OK) return; /* ring replies come unvalidated */
    uint8_t *req = NULL;
    uint32_t len = 0;
    uint16_t type = 0;
    if (h->status == FLUXON_OK && h->type == FX_MSG_GET_START) {
        fx_body_get_start_ack_t a;
        if (fx_body_get_start_ack_decode(body, h->body_len, &a, arena) != FLUXON_OK || !a.handle_id) return;
        fx_body_handle_consume_t hc = {a.handle_id, 0};
        FX_CLIENT_ENCODE(handle_consume, &hc, req, len);
        type = FX_MSG_HANDLE_CONSUME;
    } else if (h->status == FLUXON_OK && h->type == FX_MSG_PUT_START) {
        fx_body_put_start_ack_t a;
        if (fx_body_put_start_ack_decode(body, h->body_len, &a, arena) != FLUXON_OK || !a.plan_id) return;
        fx_body_plan_ref_t pr = {a.plan_id};
        FX_CLIENT_ENCODE(plan_ref, &pr, req, len);
        type = FX_MSG_PUT_ABORT; /* its answer (req_id 0) is dropped like any unknown one */
    } else {
        return;
    }
    FX_WARN("the answer to a %s arrived after its caller gave up (timeout_ms %u): handing back what it reserved",
            fx_msg_name(h->type), cl->cfg.timeout_ms);
    fx_client_send_oneway(cl, type, req, len);
}

FX_INTERNAL void fx_client_late_answer(fluxon_client *cl, const fx_frame_header_t *h, const uint8_t *body)
{
    fx_arena_t arena = {0};
    crpc_late(cl, h, body, &arena);
    fx_arena_free(&arena);
}

FX_INTERNAL void fx_client_on_response(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                       fx_arena_t *arena)
{
    fluxon_client *cl = fx_conn_ud(c);
    crpc_t *r = crpc_pending_take(cl, h->req_id);
    if (!r) {
        FX_DEBUG("late response %llu (%s)", (unsigned long long)h->req_id, fx_msg_name(h->type));
        crpc_late(cl, h, body, arena);
        return;
    }
    int status = h->status;
    if (h->body_len) {
        r->resp = fx_malloc(h->body_len);
        if (r->resp) {
            memcpy(r->resp, body, h->body_len);
            r->resp_len = h->body_len;
        } else if (status == FLUXON_OK) {
            status = FLUXON_ERR_NOMEM;
        }
    }
    crpc_finish(cl, r, status);
}

FX_INTERNAL void fx_client_rpc_fail_all(fluxon_client *cl)
{
    for (;;) {
        crpc_t *r = NULL;
        pthread_mutex_lock(&cl->rpc.pend_lock);
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        const char *k;
        size_t kl;
        void *v;
        if (fx_hmap_iter_next(cl->rpc.pending, &it, &k, &kl, &v)) {
            fx_hmap_del(cl->rpc.pending, k, kl, NULL);
            r = v;
        }
        pthread_mutex_unlock(&cl->rpc.pend_lock);
        if (!r) return;
        crpc_finish(cl, r, FLUXON_ERR_UNAVAILABLE);
    }
}

/* ---- the out-queue (see fx_client_rpc_t) ---- */
typedef struct crpc_out {
    struct crpc_out *next;
    uint8_t hdr[FX_FRAME_HEADER_BYTES];
    uint8_t *body;
    uint32_t len;
} crpc_out_t;

static void crpc_out_free_all(fx_client_rpc_t *s)
{
    while (s->out_head) {
        crpc_out_t *o = s->out_head;
        s->out_head = o->next;
        fx_free(o->body);
        fx_free(o);
    }
    s->out_tail = NULL;
    s->out_off = 0;
}

/* Under io_lock: writes queued frames until the socket would block. FLUXON_OK (maybe
 * with frames left), or FLUXON_ERR_UNAVAILABLE once a write failed (the connection is
 * shut down: the reactor sees it close). Never waits. */
static int crpc_flush_locked(fluxon_client *cl)
{
    fx_client_rpc_t *s = &cl->rpc;
    while (s->out_head && !s->dead) {
        crpc_out_t *o = s->out_head;
        size_t total = FX_FRAME_HEADER_BYTES + (size_t)o->len, off = s->out_off;
        struct iovec iov[2];
        int n_iov = 0;
        if (off < FX_FRAME_HEADER_BYTES) iov[n_iov++] = (struct iovec){o->hdr + off, FX_FRAME_HEADER_BYTES - off};
        size_t boff = off > FX_FRAME_HEADER_BYTES ? off - FX_FRAME_HEADER_BYTES : 0;
        if (o->len) iov[n_iov++] = (struct iovec){o->body + boff, o->len - boff};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n_iov};
        ssize_t n = sendmsg(s->sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return FLUXON_OK;
        if (n < 0) {
            FX_WARN("write to owner %s failed: %m; the connection is closed", cl->owner_node_id);
            s->dead = true;
            shutdown(s->sock, SHUT_RDWR);
            crpc_out_free_all(s);
            break;
        }
        s->out_off += (size_t)n;
        if (s->out_off < total) continue;
        s->out_head = o->next;
        if (!s->out_head) s->out_tail = NULL;
        s->out_off = 0;
        s->out_done++;
        fx_free(o->body);
        fx_free(o);
    }
    return s->dead ? FLUXON_ERR_UNAVAILABLE : FLUXON_OK;
}

static void crpc_flush_timer(fx_reactor_t *r, fx_timer_t *t);

/* Reactor: writes what the socket takes; while frames are left, retries every
 * millisecond (never waits on the socket: the reactor keeps receiving). */
static void crpc_reactor_flush(fluxon_client *cl)
{
    __atomic_store_n(&cl->rpc.flush_armed, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&cl->rpc.io_lock);
    crpc_flush_locked(cl);
    bool left = cl->rpc.out_head != NULL;
    pthread_mutex_unlock(&cl->rpc.io_lock);
    if (left && !__atomic_exchange_n(&cl->rpc.flush_armed, 1, __ATOMIC_ACQ_REL))
        fx_timer_arm(cl->r, &cl->rpc.flush_timer, 1, crpc_flush_timer);
}

static void crpc_flush_timer(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    crpc_reactor_flush((fluxon_client *)((char *)t - offsetof(fluxon_client, rpc.flush_timer)));
}

static void crpc_flush_task(void *arg) { crpc_reactor_flush(arg); }

/* Frames wait on the queue: the reactor writes them (unless a flush is already posted
 * or armed), so a frame never waits for the next caller. */
static void crpc_kick(fluxon_client *cl)
{
    if (__atomic_exchange_n(&cl->rpc.flush_armed, 1, __ATOMIC_ACQ_REL)) return;
    if (fx_reactor_post(cl->r, crpc_flush_task, cl) != FLUXON_OK)
        __atomic_store_n(&cl->rpc.flush_armed, 0, __ATOMIC_RELEASE);
}

/* Queues one frame (body taken over); with write_now, writes what the socket takes at
 * once (else the reactor does). *seq_p receives its place in the queue. */
static int crpc_enqueue(fluxon_client *cl, const fx_frame_header_t *h, uint8_t *body, bool write_now,
                        uint64_t *seq_p)
{
    body = fx_client_buf_own(body, h->body_len); /* the queue outlives the call */
    crpc_out_t *o = body ? fx_calloc(1, sizeof *o) : NULL;
    if (!o) {
        fx_free(body);
        return FLUXON_ERR_NOMEM;
    }
    fx_frame_header_encode(h, o->hdr);
    o->body = body;
    o->len = h->body_len;
    fx_client_rpc_t *s = &cl->rpc;
    pthread_mutex_lock(&s->io_lock);
    int rc = FLUXON_ERR_UNAVAILABLE;
    if (!s->dead) {
        if (s->out_tail) s->out_tail->next = o;
        else s->out_head = o;
        s->out_tail = o;
        *seq_p = ++s->out_seq;
        o = NULL;
        rc = write_now ? crpc_flush_locked(cl) : FLUXON_OK;
    }
    bool left = s->out_head != NULL;
    pthread_mutex_unlock(&s->io_lock);
    if (o) {
        fx_free(o->body);
        fx_free(o);
    }
    if (left) crpc_kick(cl);
    return rc;
}

/* Writes one frame (body taken over) from the calling thread: waits, never holding
 * io_lock, up to timeout_ms for it to be fully on the socket. On FLUXON_ERR_TIMEOUT the
 * frame stays queued and is finished later: the stream never holds half a frame
 * followed by another one. */
static int crpc_write(fluxon_client *cl, const fx_frame_header_t *h, uint8_t *body)
{
    uint64_t deadline = fx_now_ms() + cl->cfg.timeout_ms, seq = 0;
    int rc = crpc_enqueue(cl, h, body, true, &seq);
    for (;;) {
        if (rc != FLUXON_OK) return rc;
        pthread_mutex_lock(&cl->rpc.io_lock);
        rc = crpc_flush_locked(cl);
        bool done = cl->rpc.out_done >= seq;
        pthread_mutex_unlock(&cl->rpc.io_lock);
        if (rc != FLUXON_OK || done) return rc;
        uint64_t now = fx_now_ms();
        if (now >= deadline) return FLUXON_ERR_TIMEOUT;
        struct pollfd p = {cl->rpc.sock, POLLOUT, 0};
        poll(&p, 1, (int)FX_MIN(deadline - now, 10u));
    }
}

/* A request the owner would refuse by closing the connection (a body over its
 * max_frame_bytes) is refused here instead, naming the limit: the client stays usable. */
static int crpc_check_size(fluxon_client *cl, uint16_t type, uint32_t len)
{
    if (len <= cl->cfg.max_frame_bytes) return FLUXON_OK;
    FX_WARN("%s: the request encodes to %u bytes, over the frame limit of %llu bytes (config field "
            "\"max_frame_bytes\" of the client and its owner): split the batch",
            fx_msg_name(type), len, (unsigned long long)cl->cfg.max_frame_bytes);
    return FLUXON_ERR_INVALID_ARGUMENT;
}

/* Counts the request; refuses it (req freed, *rc_p set) when it is too large or the
 * owner is gone. */
static bool crpc_refuse(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t len, int *rc_p)
{
    __atomic_add_fetch(&cl->requests, 1, __ATOMIC_RELAXED);
    int rc = crpc_check_size(cl, type, len);
    if (rc == FLUXON_OK && __atomic_load_n(&cl->owner_lost, __ATOMIC_ACQUIRE)) rc = FLUXON_ERR_UNAVAILABLE;
    if (rc == FLUXON_OK) return false;
    fx_client_buf_free(req);
    __atomic_add_fetch(&cl->errors, 1, __ATOMIC_RELAXED);
    *rc_p = rc;
    return true;
}

/* One-way frames (release, consume) join the out-queue and the reactor writes them: the
 * caller pays a queue push, never a socket write or a wait; the reactor never waits on
 * the socket either; their order (consume before release of the same plan) is the
 * queue's. */
FX_INTERNAL void fx_client_send_oneway(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t len)
{
    int rc;
    fx_client_last_msg_clear();
    if (!req || crpc_refuse(cl, type, req, len, &rc)) return;
    if (fx_client_ring_oneway(cl, type, req, len, true) > 0) {
        fx_client_buf_free(req);
        return;
    }
    fx_client_ring_barrier(cl); /* what the ring holds goes first */
    fx_frame_header_t h = {FX_FRAME_MAGIC, type, 0, len, 0, 0};
    uint64_t seq;
    crpc_enqueue(cl, &h, req, false, &seq);
}

/* A hint (PREFETCH): queued without a wait, or dropped. FLUXON_OK: queued (ring or socket
 * out-queue); FLUXON_ERR_BUSY: the ring's one-way queue is full now (the owner is behind):
 * dropped; the errors of crpc_refuse (too large for a frame, the owner gone). Takes req. */
FX_INTERNAL int fx_client_send_hint(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t len)
{
    int rc;
    fx_client_last_msg_clear();
    if (!req) return FLUXON_ERR_NOMEM;
    if (crpc_refuse(cl, type, req, len, &rc)) return rc;
    int q = fx_client_ring_oneway(cl, type, req, len, false);
    if (q != 0) {
        fx_client_buf_free(req);
        return q > 0 ? FLUXON_OK : FLUXON_ERR_BUSY;
    }
    fx_frame_header_t h = {FX_FRAME_MAGIC, type, 0, len, 0, 0}; /* no barrier: a hint has no order */
    uint64_t seq;
    crpc_enqueue(cl, &h, req, false, &seq);
    return FLUXON_OK;
}

/* Waits for r's answer; on timeout withdraws it (the reactor will not touch it then). */
static int crpc_wait(fluxon_client *cl, crpc_t *r)
{
    if (fx_sem_wait_ms(&r->done, cl->cfg.timeout_ms)) return r->status;
    if (crpc_pending_take(cl, r->id) == r) {
        __atomic_add_fetch(&cl->timeouts, 1, __ATOMIC_RELAXED);
        crpc_unref(r);
        return FLUXON_ERR_TIMEOUT;
    }
    while (sem_wait(&r->done) != 0 && errno == EINTR) {} /* being answered right now */
    return r->status;
}

/* The owner's (or master's) reason for the calling thread's last call it refused
 * (fluxon_last_error_message, common/status.c); cleared when a call starts. */
FX_INTERNAL void fx_client_last_msg_clear(void) { fx_last_msg_clear(); }

FX_INTERNAL void fx_client_last_msg_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fx_last_msg_vset(fmt, ap);
    va_end(ap);
}

FX_INTERNAL int fx_client_refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fx_last_msg_vset(fmt, ap);
    va_end(ap);
    FX_WARN("%s", fluxon_last_error_message());
    return FLUXON_ERR_INVALID_ARGUMENT;
}

FX_INTERNAL int fx_client_call(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t req_len,
                               fx_client_hook_fn hook, void *hook_ctx, uint8_t **resp_p, uint32_t *resp_len_p)
{
    if (resp_p) *resp_p = NULL;
    if (resp_len_p) *resp_len_p = 0;
    fx_last_msg_clear();
    if (!req) return FLUXON_ERR_NOMEM;
    int rc;
    if (crpc_refuse(cl, type, req, req_len, &rc)) return rc;
    if (fx_client_ring_call(cl, type, req, req_len, hook, hook_ctx, resp_p, resp_len_p, &rc)) {
        fx_client_buf_free(req);
        if (rc < 0) __atomic_add_fetch(&cl->errors, 1, __ATOMIC_RELAXED);
        return rc;
    }
    fx_client_ring_barrier(cl); /* the ring's one-way frames go first (FIFO as on the socket) */
    crpc_t *r = fx_calloc(1, sizeof *r);
    if (!r) {
        fx_client_buf_free(req);
        return FLUXON_ERR_NOMEM;
    }
    r->refs = 2;
    sem_init(&r->done, 0, 0);
    r->hook = hook;
    r->hook_ctx = hook_ctx;
    r->id = __atomic_add_fetch(&cl->rpc.next_req_id, 1, __ATOMIC_RELAXED) | (1ull << 62);
    pthread_mutex_lock(&cl->rpc.pend_lock);
    rc = fx_hmap_put(cl->rpc.pending, &r->id, sizeof r->id, r, NULL);
    pthread_mutex_unlock(&cl->rpc.pend_lock);
    if (rc != FLUXON_OK) {
        fx_client_buf_free(req);
        sem_destroy(&r->done);
        fx_free(r);
        return rc;
    }
    fx_frame_header_t h = {FX_FRAME_MAGIC, type, 0, req_len, 0, r->id};
    rc = crpc_write(cl, &h, req); /* takes req */
    if (rc == FLUXON_OK) {
        rc = crpc_wait(cl, r);
    } else if (crpc_pending_take(cl, r->id) == r) {
        crpc_unref(r);
    } else {
        while (sem_wait(&r->done) != 0 && errno == EINTR) {}
    }
    if (resp_p) {
        *resp_p = r->resp;
        *resp_len_p = r->resp_len;
        r->resp = NULL;
    }
    if (rc < 0) __atomic_add_fetch(&cl->errors, 1, __ATOMIC_RELAXED);
    crpc_unref(r);
    return rc;
}

FX_INTERNAL void fx_client_log_error(const char *what, int rc, const uint8_t *resp, uint32_t len)
{
    if (rc >= 0 || !resp) return;
    fx_body_error_t e;
    fx_arena_t a = {0};
    if (fx_body_error_decode(resp, len, &e, &a) == FLUXON_OK && e.message.len) {
        fx_client_last_msg_set("%.*s", (int)e.message.len, e.message.p);
        int lvl = rc == FLUXON_ERR_INVALID_ARGUMENT || rc == FLUXON_ERR_PROTOCOL || rc == FLUXON_ERR_INTERNAL ||
                          rc == FLUXON_ERR_LEASE_EXPIRED || rc == FLUXON_ERR_UNKNOWN_OUTCOME
                      ? FX_LOG_WARN
                      : FX_LOG_DEBUG;
        if (fx_log_get_level() <= lvl)
            fx_log(lvl, "%s: %s: %.*s", what, fluxon_status_string(rc), (int)e.message.len, e.message.p);
    }
    fx_arena_free(&a);
}

FX_INTERNAL int fx_client_call_decode(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t len,
                                      const char *what, fx_client_decode_fn decode, void *arg)
{
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    int rc = fx_client_call(cl, type, req, len, NULL, NULL, &resp, &rlen);
    fx_client_log_error(what, rc, resp, rlen);
    if (rc == FLUXON_OK && decode) rc = decode(resp, rlen, arg);
    fx_client_buf_free(resp);
    return rc;
}
