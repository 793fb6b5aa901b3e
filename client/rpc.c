/* rpc.c — the client's request path: a request is encoded and written on the caller's
 * thread, its response arrives on the client's reactor and wakes the caller through the
 * pending table; one-way frames (release, consume) are queued to the reactor. Every other
 * client file talks to the owner through fx_client_call / fx_client_send_oneway. */
#include <errno.h>
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

FX_INTERNAL int fx_client_rpc_init(fluxon_client *cl)
{
    fx_client_rpc_t *s = &cl->rpc;
    s->sock = -1;
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

FX_INTERNAL void fx_client_on_response(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                       fx_arena_t *arena)
{
    fluxon_client *cl = fx_conn_ud(c);
    crpc_t *r = crpc_pending_take(cl, h->req_id);
    if (!r) {
        FX_DEBUG("late response %llu (%s) dropped", (unsigned long long)h->req_id, fx_msg_name(h->type));
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

/* Writes one frame on the socket from the calling thread (bounded by timeout_ms). */
static int crpc_write(fluxon_client *cl, const fx_frame_header_t *h, const void *body)
{
    uint8_t hb[FX_FRAME_HEADER_BYTES];
    fx_frame_header_encode(h, hb);
    struct iovec iov[2] = {{hb, sizeof hb}, {(void *)body, h->body_len}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = h->body_len ? 2 : 1};
    uint64_t deadline = fx_now_ms() + cl->cfg.timeout_ms;
    int rc = FLUXON_OK;
    pthread_mutex_lock(&cl->rpc.io_lock);
    while (msg.msg_iovlen) {
        ssize_t n = sendmsg(cl->rpc.sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            uint64_t now = fx_now_ms();
            if (now >= deadline) {
                rc = FLUXON_ERR_TIMEOUT;
                break;
            }
            struct pollfd p = {cl->rpc.sock, POLLOUT, 0};
            poll(&p, 1, (int)(deadline - now));
            continue;
        }
        if (n < 0) {
            rc = FLUXON_ERR_UNAVAILABLE;
            break;
        }
        size_t left = (size_t)n; /* advance past what went out */
        while (msg.msg_iovlen && left >= msg.msg_iov[0].iov_len) {
            left -= msg.msg_iov[0].iov_len;
            msg.msg_iov++;
            msg.msg_iovlen--;
        }
        if (msg.msg_iovlen) {
            msg.msg_iov[0].iov_base = (uint8_t *)msg.msg_iov[0].iov_base + left;
            msg.msg_iov[0].iov_len -= left;
        }
    }
    pthread_mutex_unlock(&cl->rpc.io_lock);
    return rc;
}

/* One-way frames (release, consume) are handed to the reactor, which writes them in
 * order: the caller pays a queue push instead of a socket write. Only the order among
 * one-way frames matters (consume before release of the same plan), and it holds. */
typedef struct crpc_oneway {
    fluxon_client *cl;
    fx_frame_header_t h;
    uint8_t *body;
} crpc_oneway_t;

static void crpc_oneway_send(void *arg)
{
    crpc_oneway_t *w = arg;
    if (!__atomic_load_n(&w->cl->owner_lost, __ATOMIC_ACQUIRE)) crpc_write(w->cl, &w->h, w->body);
    fx_free(w->body);
    fx_free(w);
}

static bool crpc_refuse(fluxon_client *cl, uint8_t *req)
{
    __atomic_add_fetch(&cl->requests, 1, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&cl->owner_lost, __ATOMIC_ACQUIRE)) return false;
    fx_free(req);
    __atomic_add_fetch(&cl->errors, 1, __ATOMIC_RELAXED);
    return true;
}

FX_INTERNAL void fx_client_send_oneway(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t len)
{
    if (!req || crpc_refuse(cl, req)) return;
    crpc_oneway_t *w = fx_malloc(sizeof *w);
    if (!w) {
        fx_free(req);
        return;
    }
    *w = (crpc_oneway_t){cl, {FX_FRAME_MAGIC, type, 0, len, 0, 0}, req};
    if (fx_reactor_post(cl->r, crpc_oneway_send, w) != FLUXON_OK) {
        fx_free(req);
        fx_free(w);
    }
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

FX_INTERNAL int fx_client_call(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t req_len,
                               fx_client_hook_fn hook, void *hook_ctx, uint8_t **resp_p, uint32_t *resp_len_p)
{
    if (resp_p) *resp_p = NULL;
    if (resp_len_p) *resp_len_p = 0;
    if (!req) return FLUXON_ERR_NOMEM;
    if (crpc_refuse(cl, req)) return FLUXON_ERR_UNAVAILABLE;
    crpc_t *r = fx_calloc(1, sizeof *r);
    if (!r) {
        fx_free(req);
        return FLUXON_ERR_NOMEM;
    }
    r->refs = 2;
    sem_init(&r->done, 0, 0);
    r->hook = hook;
    r->hook_ctx = hook_ctx;
    r->id = __atomic_add_fetch(&cl->rpc.next_req_id, 1, __ATOMIC_RELAXED) | (1ull << 62);
    pthread_mutex_lock(&cl->rpc.pend_lock);
    int rc = fx_hmap_put(cl->rpc.pending, &r->id, sizeof r->id, r, NULL);
    pthread_mutex_unlock(&cl->rpc.pend_lock);
    if (rc != FLUXON_OK) {
        fx_free(req);
        sem_destroy(&r->done);
        fx_free(r);
        return rc;
    }
    fx_frame_header_t h = {FX_FRAME_MAGIC, type, 0, req_len, 0, r->id};
    rc = crpc_write(cl, &h, req);
    fx_free(req);
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
        int lvl = rc == FLUXON_ERR_INVALID_ARGUMENT || rc == FLUXON_ERR_PROTOCOL || rc == FLUXON_ERR_INTERNAL ||
                          rc == FLUXON_ERR_LEASE_EXPIRED
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
    fx_free(resp);
    return rc;
}
