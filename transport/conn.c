/* conn.c — framed connections, rpc correlation, connect/accept on io_uring (conn.h).
 * Lifetime: a conn holds one reference while open and one per in-flight operation;
 * fx_conn_close shuts the socket down so in-flight operations complete, and the
 * memory goes when the last reference drops. */
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "chaos.h"
#include "config.h"
#include "log.h"
#include "prof.h"

#define CONN_RPC_BUCKETS 64u

typedef struct conn_rpc {
    struct conn_rpc *next;
    fx_conn_t *conn;
    uint64_t id;
    fx_timer_t timer;
    fx_rpc_cb cb;
    void *arg;
    uint64_t reg_ns; /* registered (fx_now_ns): before the request was sent */
} conn_rpc_t;

struct fx_conn {
    fx_reactor_t *r;
    int fd;
    const fx_conn_ops_t *ops;
    void *ud;
    char desc[96];
    uint64_t max_frame;
    bool open;
    bool closing; /* close once the send buffers drained */
    int closing_status;
    uint32_t refs;
    /* receive */
    fx_io_t recv_io;
    uint8_t *in;
    size_t in_len, in_cap;
    /* send: `a` is being sent by the kernel, `b` collects new frames meanwhile */
    fx_io_t send_io;
    bool send_inflight;
    uint8_t *out_a, *out_b;
    size_t a_len, a_off, a_cap, b_len, b_cap, reserved;
    fx_arena_t arena;
    /* test-only fault injection on responses */
    uint16_t fault_type;
    int fault_kind;
    uint32_t fault_ms, fault_left;
    bool fault_all;
    struct conn_delayed *delayed;
    fx_chaos_t *chaos; /* test-only message chaos (chaos.h), NULL = off */
    fx_reply_counts_t *replies; /* fx_conn_count_replies: the role's table, or NULL */
    /* rpc */
    uint64_t next_req_id;
    size_t n_pending;
    uint64_t answered_ns; /* the latest registration of a call whose answer was dispatched */
    uint32_t late;        /* > 0 while a frame held back by a test fault or chaos is dispatched */
    conn_rpc_t *buckets[CONN_RPC_BUCKETS];
    /* a sink conn (fd -1): fed by fx_conn_feed, sends go to sink */
    fx_conn_sink_fn sink;
    void *sink_arg;
    bool is_sink;
};

static void conn_recv_submit(fx_conn_t *c);
typedef struct conn_delayed {
    struct conn_delayed *next;
    fx_timer_t timer;
    fx_conn_t *c;
    bool chaos; /* delayed by the message chaos: dispatched as received (request or response) */
    fx_frame_header_t h;
    uint8_t body[];
} conn_delayed_t;
static void conn_on_recv(fx_reactor_t *r, fx_io_t *io, int res, uint32_t flags);
static void conn_on_send(fx_reactor_t *r, fx_io_t *io, int res, uint32_t flags);

FX_INTERNAL void fx_conn_ref(fx_conn_t *c) { c->refs++; }

FX_INTERNAL void fx_conn_unref(fx_conn_t *c)
{
    FX_ASSERT(c->refs > 0);
    if (--c->refs) return;
    FX_ASSERT(!c->open && c->n_pending == 0);
    if (c->fd >= 0) close(c->fd);
    fx_free(c->in);
    fx_free(c->out_a);
    fx_free(c->out_b);
    fx_arena_free(&c->arena);
    fx_free(c);
}

FX_INTERNAL bool fx_conn_is_open(const fx_conn_t *c) { return c->open; }
FX_INTERNAL void *fx_conn_ud(const fx_conn_t *c) { return c->ud; }
FX_INTERNAL void fx_conn_set_ud(fx_conn_t *c, void *ud) { c->ud = ud; }
FX_INTERNAL int fx_conn_fd(const fx_conn_t *c) { return c->fd; }
FX_INTERNAL const char *fx_conn_desc(const fx_conn_t *c) { return c->desc; }
FX_INTERNAL void fx_conn_set_desc(fx_conn_t *c, const char *desc) { fx_strlcpy(c->desc, desc, sizeof c->desc); }
FX_INTERNAL size_t fx_rpc_pending(const fx_conn_t *c) { return c->n_pending; }
FX_INTERNAL uint64_t fx_rpc_answered_ns(const fx_conn_t *c) { return c ? c->answered_ns : 0; }
FX_INTERNAL bool fx_conn_dispatching_late(const fx_conn_t *c) { return c && c->late; }

/* ---- rpc table ---- */
static conn_rpc_t *conn_rpc_take(fx_conn_t *c, uint64_t id)
{
    conn_rpc_t **pp = &c->buckets[id % CONN_RPC_BUCKETS];
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            conn_rpc_t *e = *pp;
            *pp = e->next;
            c->n_pending--;
            fx_timer_disarm(c->r, &e->timer);
            return e;
        }
    }
    return NULL;
}

static void conn_rpc_on_timeout(fx_reactor_t *r, fx_timer_t *t)
{
    conn_rpc_t *e = FX_CONTAINER_OF(t, conn_rpc_t, timer);
    fx_conn_t *c = e->conn;
    conn_rpc_t *taken = conn_rpc_take(c, e->id);
    FX_ASSERT(taken == e);
    FX_DEBUG("rpc %llu to %s timed out", (unsigned long long)e->id, c->desc);
    e->cb(e->arg, FLUXON_ERR_TIMEOUT, NULL, NULL, NULL);
    fx_free(e);
}

FX_INTERNAL uint64_t fx_rpc_register(fx_conn_t *c, uint32_t timeout_ms, fx_rpc_cb cb, void *arg)
{
    if (!c->open) return 0;
    conn_rpc_t *e = fx_calloc(1, sizeof *e);
    if (!e) return 0;
    e->conn = c;
    e->id = ++c->next_req_id;
    e->cb = cb;
    e->arg = arg;
    e->reg_ns = fx_now_ns();
    fx_timer_init(&e->timer);
    fx_timer_arm(c->r, &e->timer, timeout_ms, conn_rpc_on_timeout);
    conn_rpc_t **b = &c->buckets[e->id % CONN_RPC_BUCKETS];
    e->next = *b;
    *b = e;
    c->n_pending++;
    return e->id;
}

FX_INTERNAL void fx_rpc_forget(fx_conn_t *c, uint64_t req_id)
{
    conn_rpc_t *e = conn_rpc_take(c, req_id);
    fx_free(e);
}

static void conn_rpc_fail_all(fx_conn_t *c)
{
    for (unsigned i = 0; i < CONN_RPC_BUCKETS; i++) {
        while (c->buckets[i]) {
            conn_rpc_t *e = conn_rpc_take(c, c->buckets[i]->id);
            e->cb(e->arg, FLUXON_ERR_UNAVAILABLE, NULL, NULL, NULL);
            fx_free(e);
        }
    }
}

/* ---- lifecycle ---- */
FX_INTERNAL fx_conn_t *fx_conn_new(fx_reactor_t *r, int fd, const fx_conn_ops_t *ops, void *ud,
                                   uint64_t max_frame_bytes, const char *desc)
{
    fx_conn_t *c = fx_calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->r = r;
    c->fd = fd;
    c->ops = ops;
    c->ud = ud;
    c->max_frame = max_frame_bytes ? max_frame_bytes : (64ull << 20);
    c->open = true;
    c->refs = 1;
    fx_strlcpy(c->desc, desc ? desc : "peer", sizeof c->desc);
    c->recv_io.cb = conn_on_recv;
    c->send_io.cb = conn_on_send;
    conn_recv_submit(c);
    return c;
}

FX_INTERNAL void fx_conn_close(fx_conn_t *c, int status)
{
    if (!c->open) return;
    c->open = false;
    if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR); /* completes in-flight recv/send */
    fx_conn_ref(c);
    while (c->delayed) { /* test-only delayed responses die with the connection */
        struct conn_delayed *d = c->delayed;
        c->delayed = d->next;
        fx_timer_disarm(c->r, &d->timer);
        fx_free(d);
        fx_conn_unref(c);
    }
    conn_rpc_fail_all(c);
    if (c->ops->on_close) c->ops->on_close(c, status);
    fx_conn_unref(c); /* the temporary ref */
    fx_conn_unref(c); /* the open ref */
}

/* ---- send ---- */
static void conn_send_submit(fx_conn_t *c)
{
    struct io_uring_sqe *sqe = fx_reactor_sqe(c->r, &c->send_io);
    io_uring_prep_send(sqe, c->fd, c->out_a + c->a_off, c->a_len - c->a_off, MSG_NOSIGNAL);
    c->send_inflight = true;
    fx_conn_ref(c);
}

static void conn_flush(fx_conn_t *c)
{
    if (c->send_inflight || !c->b_len || !c->open) return;
    if (c->is_sink) { /* no socket: the frames go to the sink at once */
        if (c->sink) c->sink(c->sink_arg, c->out_b, c->b_len);
        c->b_len = 0;
        return;
    }
    uint8_t *t = c->out_a;
    size_t tc = c->a_cap;
    c->out_a = c->out_b;
    c->a_cap = c->b_cap;
    c->a_len = c->b_len;
    c->a_off = 0;
    c->out_b = t;
    c->b_cap = tc;
    c->b_len = 0;
    conn_send_submit(c);
}

static void conn_on_send(fx_reactor_t *r, fx_io_t *io, int res, uint32_t flags)
{
    fx_conn_t *c = FX_CONTAINER_OF(io, fx_conn_t, send_io);
    c->send_inflight = false;
    if (res < 0) {
        if (c->open) FX_WARN("send to %s failed: %s", c->desc, strerror(-res));
        fx_conn_close(c, FLUXON_ERR_UNAVAILABLE);
    } else if (c->open) {
        c->a_off += (size_t)res;
        if (c->a_off < c->a_len) {
            conn_send_submit(c);
        } else {
            c->a_len = c->a_off = 0;
            conn_flush(c);
            if (c->closing && !c->send_inflight) fx_conn_close(c, c->closing_status);
        }
    }
    fx_conn_unref(c);
}

FX_INTERNAL uint8_t *fx_conn_reserve(fx_conn_t *c, size_t body_len)
{
    if (!c->open) return NULL;
    size_t need = c->b_len + FX_FRAME_HEADER_BYTES + body_len;
    if (need > c->b_cap) {
        size_t nc = FX_MAX(need, c->b_cap * 2);
        nc = FX_MAX(nc, 4096);
        uint8_t *nb = fx_realloc(c->out_b, nc);
        if (!nb) return NULL;
        c->out_b = nb;
        c->b_cap = nc;
    }
    c->reserved = FX_FRAME_HEADER_BYTES + body_len;
    return c->out_b + c->b_len;
}

FX_INTERNAL void fx_conn_count_replies(fx_conn_t *c, fx_reply_counts_t *t) { c->replies = t; }

FX_INTERNAL void fx_conn_commit(fx_conn_t *c)
{
    if (c->replies && c->reserved >= FX_FRAME_HEADER_BYTES) {
        fx_frame_header_t h;
        if (fx_frame_header_decode(c->out_b + c->b_len, UINT64_MAX, &h) == FLUXON_OK && (h.flags & FX_FLAG_RESPONSE) &&
            h.type < FX_REPLY_TYPES && h.status <= 0 && -h.status < FX_REPLY_STATUSES)
            c->replies->n[h.type][-h.status]++;
    }
    c->b_len += c->reserved;
    c->reserved = 0;
    conn_flush(c);
}

FX_INTERNAL void fx_conn_close_after_flush(fx_conn_t *c, int status)
{
    if (!c->open || c->closing) return;
    c->closing = true;
    c->closing_status = status;
    if (c->fd >= 0) shutdown(c->fd, SHUT_RD); /* no more requests; what is queued still goes out */
    if (!c->send_inflight && !c->b_len) fx_conn_close(c, status);
}

FX_INTERNAL int fx_conn_send_bytes(fx_conn_t *c, const fx_frame_header_t *h, const void *body)
{
    uint8_t *o = fx_conn_reserve(c, h->body_len);
    if (!o) return FLUXON_ERR_UNAVAILABLE;
    fx_frame_header_encode(h, o);
    if (h->body_len) memcpy(o + FX_FRAME_HEADER_BYTES, body, h->body_len);
    fx_conn_commit(c);
    return FLUXON_OK;
}

FX_INTERNAL int fx_conn_reply_error(fx_conn_t *c, const fx_frame_header_t *h, int status,
                                    const char *fmt, ...)
{
    char msg[1024]; /* a NO_SPACE names what holds the space: the master's placed values, pins */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fx_body_error_t e = {fx_str_c(msg)};
    return FX_CONN_SEND(c, h->type, FX_FLAG_RESPONSE, status, h->req_id, error, &e);
}

/* ---- receive ---- */
static void conn_recv_submit(fx_conn_t *c)
{
    if (c->in_cap - c->in_len < 4096) {
        size_t nc = FX_MAX(c->in_cap * 2, c->in_len + 16384);
        uint8_t *nb = fx_realloc(c->in, nc);
        if (!nb) {
            FX_ERROR("conn %s: out of memory for the receive buffer", c->desc);
            fx_conn_close(c, FLUXON_ERR_NOMEM);
            return;
        }
        c->in = nb;
        c->in_cap = nc;
    }
    struct io_uring_sqe *sqe = fx_reactor_sqe(c->r, &c->recv_io);
    io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    fx_conn_ref(c);
}

static void conn_protocol_error(fx_conn_t *c, const char *what, const fx_frame_header_t *h)
{
    FX_ERROR("protocol error from %s: %s (type %u, flags 0x%x, body %u bytes); closing the connection",
             c->desc, what, h ? h->type : 0, h ? h->flags : 0, h ? h->body_len : 0);
    fx_conn_close(c, FLUXON_ERR_PROTOCOL);
}

/* ---- fault injection (tests) ---- */

static void conn_deliver(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body)
{
    conn_rpc_t *e = conn_rpc_take(c, h->req_id);
    if (!e) {
        FX_DEBUG("late or duplicate response %llu (%s) from %s dropped", (unsigned long long)h->req_id,
                 fx_msg_name(h->type), c->desc);
        return;
    }
    if (e->reg_ns > c->answered_ns) c->answered_ns = e->reg_ns;
    e->cb(e->arg, h->status, h, body, &c->arena);
    fx_arena_reset(&c->arena);
    fx_free(e);
}

/* A validated frame to its rpc callback, on_response or on_request (the arena holds its
 * decoded arrays; the caller resets it). */
static void conn_dispatch(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body)
{
    uint64_t t0 = fx_prof_start(); /* FLUXON_PROFILE: the time each message type takes */
    if (h->flags & FX_FLAG_RESPONSE) {
        conn_rpc_t *e = conn_rpc_take(c, h->req_id);
        if (e) {
            fx_rpc_cb cb = e->cb;
            if (e->reg_ns > c->answered_ns) c->answered_ns = e->reg_ns;
            cb(e->arg, h->status, h, body, &c->arena);
            fx_free(e);
            fx_prof_add((const void *)cb, fx_msg_name(h->type), t0);
        } else if (c->ops->on_response) {
            c->ops->on_response(c, h, body, &c->arena);
        } else {
            FX_DEBUG("late or unknown response %llu (%s) from %s dropped", (unsigned long long)h->req_id,
                     fx_msg_name(h->type), c->desc);
        }
    } else if (c->ops->on_request) {
        void (*on_request)(fx_conn_t *, const fx_frame_header_t *, const uint8_t *, fx_arena_t *) = c->ops->on_request;
        on_request(c, h, body, &c->arena); /* c may be closed by it, not freed (the caller holds it) */
        fx_prof_add((const void *)on_request, fx_msg_name(h->type), t0);
    }
}

static void conn_on_delayed(fx_reactor_t *r, fx_timer_t *t)
{
    conn_delayed_t *d = FX_CONTAINER_OF(t, conn_delayed_t, timer);
    for (conn_delayed_t **pp = &d->c->delayed; *pp; pp = &(*pp)->next)
        if (*pp == d) {
            *pp = d->next;
            break;
        }
    if (d->c->open && !(d->chaos && d->c->closing)) {
        fx_arena_reset(&d->c->arena);
        if (fx_msg_validate(&d->h, d->body, &d->c->arena) == FLUXON_OK) {
            d->c->late++; /* frames received after it were dispatched before it */
            if (d->chaos) conn_dispatch(d->c, &d->h, d->body);
            else conn_deliver(d->c, &d->h, d->body);
            d->c->late--;
        }
        fx_arena_reset(&d->c->arena);
    }
    fx_conn_unref(d->c);
    fx_free(d);
}

/* Holds a copy of the frame back ms, then delivers it (chaos: dispatches it); false when
 * out of memory (the frame is handled now). */
static bool conn_hold(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, uint32_t ms, bool chaos)
{
    conn_delayed_t *d = fx_malloc(sizeof *d + h->body_len);
    if (!d) return false;
    d->c = c;
    d->chaos = chaos;
    d->h = *h;
    memcpy(d->body, body, h->body_len);
    fx_conn_ref(c);
    d->next = c->delayed;
    c->delayed = d;
    fx_timer_init(&d->timer);
    fx_timer_arm(c->r, &d->timer, ms, conn_on_delayed);
    return true;
}

/* Returns true when the frame was consumed by the fault (delayed or dropped). */
static bool conn_fault(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body)
{
    if (!c->fault_all) c->fault_left--;
    FX_WARN("test fault: %s response %llu from %s %s", fx_msg_name(h->type), (unsigned long long)h->req_id, c->desc,
            c->fault_kind == FX_FAULT_DROP ? "dropped" : c->fault_kind == FX_FAULT_DELAY ? "delayed" : "duplicated");
    if (c->fault_kind == FX_FAULT_DROP) return true;
    if (c->fault_kind == FX_FAULT_DUPLICATE) {
        conn_deliver(c, h, body);
        return false; /* the parse loop delivers it a second time: must be ignored */
    }
    return conn_hold(c, h, body, c->fault_ms, false);
}

/* Message chaos (chaos.h): returns true when the frame was consumed (dropped or held back);
 * a duplicated frame is dispatched once here and once more by the caller. */
static bool conn_chaos(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body)
{
    uint32_t ms = 0;
    int k = fx_chaos_pick(c->chaos, h, &ms);
    if (k == FX_CHAOS_PASS) return false;
    FX_DEBUG("test chaos: %s %s %llu from %s %s", fx_msg_name(h->type), h->flags & FX_FLAG_RESPONSE ? "response" : "request",
             (unsigned long long)h->req_id, c->desc,
             k == FX_CHAOS_DROP ? "dropped" : k == FX_CHAOS_DELAY ? "delayed" : "duplicated");
    if (k == FX_CHAOS_DROP) return true;
    if (k == FX_CHAOS_DELAY) return conn_hold(c, h, body, ms, true);
    conn_dispatch(c, h, body);
    fx_arena_reset(&c->arena);
    return !c->open || c->closing; /* else the caller dispatches it again */
}

FX_INTERNAL void fx_conn_set_chaos(fx_conn_t *c, fx_chaos_t *ch) { c->chaos = ch; }

FX_INTERNAL void fx_conn_set_fault(fx_conn_t *c, uint16_t type, int kind, uint32_t ms, uint32_t count)
{
    c->fault_type = type;
    c->fault_kind = kind;
    c->fault_ms = ms;
    c->fault_left = count;
    c->fault_all = count == 0;
}

static void conn_parse(fx_conn_t *c)
{
    size_t off = 0;
    while (c->open && !c->closing && c->in_len - off >= FX_FRAME_HEADER_BYTES) {
        fx_frame_header_t h;
        int rc = fx_frame_header_decode(c->in + off, c->max_frame, &h);
        if (rc != FLUXON_OK) {
            conn_protocol_error(c, h.magic != FX_FRAME_MAGIC ? "bad magic"
                                   : h.body_len > c->max_frame ? "frame larger than max_frame_bytes"
                                                               : "unknown flags", &h);
            return;
        }
        size_t total = FX_FRAME_HEADER_BYTES + (size_t)h.body_len;
        if (c->in_len - off < total) {
            if (total > c->in_cap) {
                /* grow now so the next recv can hold the whole frame */
                memmove(c->in, c->in + off, c->in_len - off);
                c->in_len -= off;
                off = 0;
                uint8_t *nb = fx_realloc(c->in, total + 4096);
                if (!nb) {
                    FX_ERROR("conn %s: out of memory for a %zu-byte frame", c->desc, total);
                    fx_conn_close(c, FLUXON_ERR_NOMEM);
                    return;
                }
                c->in = nb;
                c->in_cap = total + 4096;
            }
            break;
        }
        const uint8_t *body = c->in + off + FX_FRAME_HEADER_BYTES;
        if (!fx_msg_known(h.type)) {
            conn_protocol_error(c, "unknown message type", &h);
            return;
        }
        if (fx_msg_validate(&h, body, &c->arena) != FLUXON_OK) {
            fx_arena_reset(&c->arena);
            conn_protocol_error(c, "malformed body", &h);
            return;
        }
        if ((h.flags & FX_FLAG_RESPONSE) && c->fault_kind && h.type == c->fault_type &&
            (c->fault_all || c->fault_left > 0) && conn_fault(c, &h, body)) {
            fx_arena_reset(&c->arena);
            off += total;
            continue;
        }
        if (c->chaos && conn_chaos(c, &h, body)) {
            fx_arena_reset(&c->arena);
            off += total;
            continue;
        }
        conn_dispatch(c, &h, body);
        fx_arena_reset(&c->arena);
        off += total;
    }
    if (off && c->open) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
}

static void conn_on_recv(fx_reactor_t *r, fx_io_t *io, int res, uint32_t flags)
{
    fx_conn_t *c = FX_CONTAINER_OF(io, fx_conn_t, recv_io);
    if (!c->open) {
        /* closed: nothing to do */
    } else if (c->closing) {
        if (res <= 0 && !c->send_inflight) fx_conn_close(c, c->closing_status);
        else if (res > 0) conn_recv_submit(c); /* discard until the peer or flush ends it */
    } else if (res == 0) {
        FX_DEBUG("%s closed the connection", c->desc);
        fx_conn_close(c, FLUXON_ERR_UNAVAILABLE);
    } else if (res < 0) {
        if (res != -ECONNRESET) FX_WARN("recv from %s failed: %s", c->desc, strerror(-res));
        fx_conn_close(c, FLUXON_ERR_UNAVAILABLE);
    } else {
        c->in_len += (size_t)res;
        conn_parse(c);
        if (c->open) conn_recv_submit(c);
    }
    fx_conn_unref(c);
}

/* ---- sink conns (no socket) ---- */
FX_INTERNAL fx_conn_t *fx_conn_new_sink(fx_reactor_t *r, const fx_conn_ops_t *ops, void *ud,
                                        uint64_t max_frame_bytes, const char *desc,
                                        fx_conn_sink_fn sink, void *sink_arg)
{
    fx_conn_t *c = fx_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->r = r;
    c->fd = -1;
    c->ops = ops;
    c->ud = ud;
    c->max_frame = max_frame_bytes ? max_frame_bytes : (64ull << 20);
    c->open = true;
    c->refs = 1;
    c->is_sink = true;
    c->sink = sink;
    c->sink_arg = sink_arg;
    fx_strlcpy(c->desc, desc ? desc : "peer", sizeof c->desc);
    return c;
}

FX_INTERNAL void fx_conn_feed(fx_conn_t *c, const uint8_t *data, size_t len)
{
    if (!c->is_sink || !c->open || c->closing || !len) return;
    if (c->in_cap - c->in_len < len) {
        size_t nc = FX_MAX(c->in_cap * 2, c->in_len + len);
        uint8_t *nb = fx_realloc(c->in, nc);
        if (!nb) {
            fx_conn_close(c, FLUXON_ERR_NOMEM);
            return;
        }
        c->in = nb;
        c->in_cap = nc;
    }
    memcpy(c->in + c->in_len, data, len);
    c->in_len += len;
    fx_conn_ref(c); /* the handlers may close c */
    conn_parse(c);
    fx_conn_unref(c);
}

/* ---- sockets ---- */
static int conn_resolve(const char *host, uint16_t port, struct sockaddr_in *a)
{
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

FX_INTERNAL int fx_tcp_listen(const char *host, uint16_t port, int *fd_p, uint16_t *bound_port_p)
{
    struct sockaddr_in a;
    if (conn_resolve(host, port, &a) != 0) {
        FX_ERROR("listen: %s is not an IPv4 address", host);
        return FLUXON_ERR_CONFIG;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        FX_ERROR("listen: socket failed: %m");
        return FLUXON_ERR_INTERNAL;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        FX_ERROR("listen: bind to %s:%u failed: %s", host, port, strerror(e));
        close(fd);
        errno = e; /* the caller tells a taken or foreign address (its config) from the rest */
        return FLUXON_ERR_UNAVAILABLE;
    }
    if (listen(fd, 512) != 0) {
        FX_ERROR("listen: listen on %s:%u failed: %m", host, port);
        close(fd);
        return FLUXON_ERR_UNAVAILABLE;
    }
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    if (bound_port_p) *bound_port_p = ntohs(a.sin_port);
    *fd_p = fd;
    return FLUXON_OK;
}

FX_INTERNAL int fx_tcp_socket(const char *host, uint16_t port, int *fd_p, void *sockaddr_out,
                              uint32_t *addrlen_p)
{
    struct sockaddr_in a;
    if (conn_resolve(host, port, &a) != 0) return FLUXON_ERR_CONFIG;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        FX_ERROR("socket failed: %m");
        return FLUXON_ERR_INTERNAL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memcpy(sockaddr_out, &a, sizeof a);
    *addrlen_p = sizeof a;
    *fd_p = fd;
    return FLUXON_OK;
}

static void conn_on_connect(fx_reactor_t *r, fx_io_t *io, int res, uint32_t flags)
{
    fx_connect_op_t *op = FX_CONTAINER_OF(io, fx_connect_op_t, io);
    op->cb(op, res);
}

FX_INTERNAL void fx_connect_start(fx_reactor_t *r, fx_connect_op_t *op, int fd, uint32_t timeout_ms)
{
    op->io.cb = conn_on_connect;
    struct io_uring_sqe *sqe = fx_reactor_sqe(r, &op->io);
    io_uring_prep_connect(sqe, fd, (struct sockaddr *)op->addr, op->addrlen);
    sqe->flags |= IOSQE_IO_LINK;
    op->ts.tv_sec = timeout_ms / 1000;
    op->ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000ll;
    struct io_uring_sqe *t = fx_reactor_sqe(r, NULL);
    io_uring_prep_link_timeout(t, &op->ts, 0);
}

struct fx_acceptor {
    fx_io_t io;
    int fd;
    bool stopping;
    void (*cb)(void *, int);
    void *arg;
};

static void conn_accept_submit(fx_reactor_t *r, fx_acceptor_t *a)
{
    struct io_uring_sqe *sqe = fx_reactor_sqe(r, &a->io);
    io_uring_prep_accept(sqe, a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

static void conn_on_accept(fx_reactor_t *r, fx_io_t *io, int res, uint32_t flags)
{
    fx_acceptor_t *a = FX_CONTAINER_OF(io, fx_acceptor_t, io);
    if (a->stopping) {
        if (res >= 0) close(res);
        fx_free(a);
        return;
    }
    if (res >= 0 || (res != -EINTR && res != -EAGAIN && res != -ECONNABORTED)) a->cb(a->arg, res);
    if (!a->stopping) conn_accept_submit(r, a);
    else fx_free(a); /* cb stopped us: no op in flight any more */
}

FX_INTERNAL int fx_acceptor_start(fx_reactor_t *r, int listen_fd, void (*cb)(void *, int), void *arg,
                                  fx_acceptor_t **a_p)
{
    fx_acceptor_t *a = fx_calloc(1, sizeof *a);
    if (!a) return FLUXON_ERR_NOMEM;
    a->io.cb = conn_on_accept;
    a->fd = listen_fd;
    a->cb = cb;
    a->arg = arg;
    conn_accept_submit(r, a);
    *a_p = a;
    return FLUXON_OK;
}

FX_INTERNAL void fx_acceptor_stop(fx_reactor_t *r, fx_acceptor_t *a)
{
    if (!a || a->stopping) return;
    a->stopping = true;
    struct io_uring_sqe *sqe = fx_reactor_sqe(r, NULL);
    io_uring_prep_cancel64(sqe, (__u64)(uintptr_t)&a->io, 0);
}

#undef CONN_RPC_BUCKETS
