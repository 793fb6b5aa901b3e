/* ext_ring.c — one external's shared-memory rings on the owner (owner_ring.h): the
 * doorbell (an eventfd read through the reactor), one pass over the one-way queue and the
 * request slots per wake-up, the sink that turns the handlers' replies into completions,
 * and the teardown. Nothing read from the region is trusted: fx_ring_take_* copy a frame
 * out before it is checked, the slot table of what is being served is the owner's own,
 * and bad contents close the external like a malformed frame on its socket. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"
#include "owner_ring.h"
#include "ring.h"

struct owner_ring {
    fx_io_t io;          /* the doorbell read */
    uint64_t efd_val;
    bool read_inflight, closed;
    int refs;            /* the external's + the doorbell read in flight + a pass running */
    fx_reactor_t *r;
    uint64_t *poll_last_ns; /* polled (ring_poll_us > 0): the owner's time of the last ring work */
    fx_hist_t *wait;        /* the owner's ring_wait: a request's post (by the client) to its take */
    fx_conn_t *conn;     /* the sink conn the requests are fed into */
    fx_conn_t *sock;     /* the external's socket: notifications */
    int efd;
    void *base;
    uint64_t ow_head;    /* one-way bytes consumed: the owner's counter, published to the region */
    uint64_t seq[FX_RING_SLOTS]; /* per slot: the request being served (0: none) */
    uint64_t posted_seen;        /* the header's `posted` at the last look at the slots */
    uint64_t next_seq;
    uint8_t buf[FX_RING_SLOT_CAP]; /* the private copy of the frame being fed */
};

static void oring_unref(owner_ring_t *g)
{
    if (--g->refs) return;
    fx_conn_unref(g->conn);
    fx_conn_unref(g->sock);
    fx_ring_unmap(g->base);
    close(g->efd);
    fx_free(g);
}

/* The sink: each reply to a request being served goes into its slot; replies to nothing
 * (late, duplicate) are dropped; other frames (PUBLISHED) go out on the socket. */
static void oring_sink(void *arg, const uint8_t *frames, size_t len)
{
    owner_ring_t *g = arg;
    size_t off = 0;
    while (len - off >= FX_FRAME_HEADER_BYTES) {
        fx_frame_header_t h;
        if (fx_frame_header_decode(frames + off, UINT32_MAX, &h) != FLUXON_OK ||
            len - off < FX_FRAME_HEADER_BYTES + (size_t)h.body_len)
            break; /* our own frames: cannot happen */
        size_t total = FX_FRAME_HEADER_BYTES + (size_t)h.body_len;
        const uint8_t *f = frames + off;
        off += total;
        if (!(h.flags & FX_FLAG_RESPONSE)) {
            if (!fx_conn_is_open(g->sock)) continue;
            /* a PUBLISHED ends the wait on a put's future: the caller's next request
             * follows it as it follows a reply (below) */
            if (g->poll_last_ns) *g->poll_last_ns = fx_now_ns();
            fx_conn_send_bytes(g->sock, &h, f + FX_FRAME_HEADER_BYTES);
            continue;
        }
        uint32_t i = (uint32_t)(h.req_id & 0xffff);
        if (g->closed || i >= FX_RING_SLOTS || !g->seq[i] || g->seq[i] != h.req_id >> 16) {
            FX_DEBUG("ring %s: reply %llu (%s) to no request dropped", fx_conn_desc(g->conn),
                     (unsigned long long)h.req_id, fx_msg_name(h.type));
            continue;
        }
        g->seq[i] = 0;
        /* the caller's next request follows its reply, not its request: a polled owner
         * polls from the reply on (one that waited on the master or a peer past the window
         * had parked, and the next call paid the doorbell and a wake-up) */
        if (g->poll_last_ns) *g->poll_last_ns = fx_now_ns();
        if (fx_ring_complete(g->base, i, f, total)) continue;
        /* the client sends on the ring only what it bounds below the slot; say so if not */
        FX_ERROR("ring %s: the %u-byte reply to %s does not fit a ring slot (%u bytes)", fx_conn_desc(g->conn),
                 (unsigned)total, fx_msg_name(h.type), FX_RING_SLOT_CAP);
        char msg[160];
        int n = snprintf(msg, sizeof msg, "the reply (%u bytes) does not fit a ring slot (%u bytes)", (unsigned)total,
                         FX_RING_SLOT_CAP);
        fx_body_error_t e = {{msg, (uint32_t)n}};
        uint8_t eb[FX_FRAME_HEADER_BYTES + 256];
        fx_frame_header_t eh = {FX_FRAME_MAGIC, h.type, FX_FLAG_RESPONSE, (uint32_t)fx_body_error_size(&e),
                                FLUXON_ERR_INTERNAL, h.req_id};
        fx_frame_header_encode(&eh, eb);
        fx_body_error_encode(&e, eb + FX_FRAME_HEADER_BYTES);
        fx_ring_complete(g->base, i, eb, FX_FRAME_HEADER_BYTES + eh.body_len);
    }
}

static void oring_protocol_error(owner_ring_t *g, const char *why)
{
    FX_ERROR("protocol error from %s on its ring: %s; closing the connection", fx_conn_desc(g->conn), why);
    fx_conn_close(g->conn, FLUXON_ERR_PROTOCOL);
}

static bool oring_feed(void *arg, const uint8_t *frame, size_t len)
{
    owner_ring_t *g = arg;
    fx_conn_feed(g->conn, frame, len);
    return fx_conn_is_open(g->conn);
}

/* One pass: the one-way queue, then every slot not being served. True if it found work. */
static bool oring_pass(owner_ring_t *g)
{
    fx_ring_hdr_t *hdr = g->base;
    const char *why = "";
    if (!fx_conn_is_open(g->conn)) return false;
    int64_t fed = fx_ring_drain_oneway(g->base, &g->ow_head, g->buf, oring_feed, g, &why);
    if (fed < 0) {
        oring_protocol_error(g, why);
        return false;
    }
    bool work = fed > 0;
    if (!fx_conn_is_open(g->conn)) return work;
    /* the slots only when the client posted since the last look: read before the slots,
     * so a request whose raise this load saw has its REQ visible below, and one raised
     * after it moves `posted` again for the next pass (a client that never raises it is
     * only never served) */
    uint64_t posted = __atomic_load_n(&hdr->posted, __ATOMIC_SEQ_CST);
    if (posted == g->posted_seen) return work;
    g->posted_seen = posted;
    for (uint32_t i = 0; i < FX_RING_SLOTS && fx_conn_is_open(g->conn); i++) {
        if (g->seq[i]) continue; /* being served */
        if (__atomic_load_n(&fx_ring_slot(g->base, i)->state, __ATOMIC_ACQUIRE) != FX_RING_REQ) continue;
        /* a one-way message the client queued before this request goes first: a RELEASE,
         * then the get_start that needs the room it frees (queued after the drain above, it
         * was served after the get_start: a BUSY miss, the client's pinned bytes not yet
         * released). The client queues it before it posts the request; this sees both. */
        fed = fx_ring_drain_oneway(g->base, &g->ow_head, g->buf, oring_feed, g, &why);
        if (fed < 0) {
            oring_protocol_error(g, why);
            return work;
        }
        work |= fed > 0;
        if (!fx_conn_is_open(g->conn)) return work;
        int64_t n = fx_ring_take_slot(g->base, i, g->buf, &why);
        if (n < 0) {
            oring_protocol_error(g, why);
            return work;
        }
        if (n == 0) continue;
        work = true;
        /* the client's stamp is not trusted: a wait past 60 s (or a stamp ahead) is not one */
        uint64_t post = __atomic_load_n(&fx_ring_slot(g->base, i)->post_ns, __ATOMIC_RELAXED), now = fx_now_ns();
        if (g->wait && post && post <= now && now - post < 60000000000ull) fx_hist_observe(g->wait, now - post);
        g->next_seq = (g->next_seq + 1) & 0xffffffffffffull; /* 48 bits: req_id = seq << 16 | slot */
        if (!g->next_seq) g->next_seq = 1;
        g->seq[i] = g->next_seq;
        uint64_t req_id = g->seq[i] << 16 | i;
        memcpy(g->buf + 16, &req_id, sizeof req_id); /* the reply finds its slot by it */
        fx_conn_feed(g->conn, g->buf, (size_t)n);
    }
    return work;
}

static void oring_arm_read(owner_ring_t *g);

static void oring_on_efd(fx_reactor_t *r, fx_io_t *io, int res, uint32_t flags)
{
    owner_ring_t *g = FX_CONTAINER_OF(io, owner_ring_t, io);
    g->read_inflight = false;
    if (!g->closed) {
        if (res < 0 && res != -EAGAIN && res != -EINTR && res != -ECANCELED)
            FX_WARN("ring %s: doorbell read failed: %s", fx_conn_desc(g->conn), strerror(-res));
        fx_ring_hdr_t *hdr = g->base;
        g->refs++;
        __atomic_store_n(&hdr->armed, 0, __ATOMIC_SEQ_CST);
        oring_pass(g);
        /* armed before the last look: a request published after it rings the doorbell.
         * Polled or not: the poller disarms it while it polls (fx_oring_poll) and arms it
         * again when it stops, and may see the time below only after its window ended */
        __atomic_store_n(&hdr->armed, 1, __ATOMIC_SEQ_CST);
        oring_pass(g);
        if (g->poll_last_ns) *g->poll_last_ns = fx_now_ns(); /* poll from now on */
        if (!g->closed) oring_arm_read(g);
        oring_unref(g);
    }
    oring_unref(g); /* the read's */
}

static void oring_arm_read(owner_ring_t *g)
{
    struct io_uring_sqe *sqe = fx_reactor_sqe(g->r, &g->io);
    io_uring_prep_read(sqe, g->efd, &g->efd_val, sizeof g->efd_val, 0);
    g->read_inflight = true;
    g->refs++;
}

FX_INTERNAL owner_ring_t *fx_oring_new(fx_owner_t *o, fx_conn_t *sock, const fx_conn_ops_t *ops, void *ud,
                                       int *memfd_p, int *efd_p)
{
    owner_ring_t *g = fx_calloc(1, sizeof *g);
    if (!g) return NULL;
    if (fx_ring_create(o->generation, memfd_p, &g->efd, &g->base) != FLUXON_OK) {
        fx_free(g);
        return NULL;
    }
    g->conn = fx_conn_new_sink(o->r, ops, ud, o->cfg.max_frame_bytes, fx_conn_desc(sock), oring_sink, g);
    if (!g->conn) {
        close(*memfd_p);
        close(g->efd);
        fx_ring_unmap(g->base);
        fx_free(g);
        return NULL;
    }
    fx_conn_ref(g->conn); /* ours, past its close */
    g->r = o->r;
    g->sock = sock;
    fx_conn_ref(sock);
    g->io.cb = oring_on_efd;
    g->refs = 1;
    *efd_p = g->efd;
    return g;
}

FX_INTERNAL fx_conn_t *fx_oring_conn(const owner_ring_t *g) { return g->conn; }

FX_INTERNAL void fx_oring_set_polled(owner_ring_t *g, uint64_t *last_ns) { g->poll_last_ns = last_ns; }
FX_INTERNAL void fx_oring_set_wait_hist(owner_ring_t *g, fx_hist_t *h) { g->wait = h; }

/* A pass with the doorbell disarmed (callers skip the eventfd write while it is polled),
 * or, parking, a pass after arming it: a request published after that look rings. */
static bool oring_poll_pass(owner_ring_t *g, uint32_t armed)
{
    if (g->closed) return false;
    fx_ring_hdr_t *hdr = g->base;
    if (__atomic_load_n(&hdr->armed, __ATOMIC_RELAXED) != armed) __atomic_store_n(&hdr->armed, armed, __ATOMIC_SEQ_CST);
    g->refs++;
    bool work = oring_pass(g);
    oring_unref(g);
    return work;
}

FX_INTERNAL bool fx_oring_poll(owner_ring_t *g) { return oring_poll_pass(g, 0); }
FX_INTERNAL bool fx_oring_park(owner_ring_t *g) { return oring_poll_pass(g, 1); }

FX_INTERNAL void fx_oring_start(owner_ring_t *g)
{
    if (!g->closed && !g->read_inflight) oring_arm_read(g);
}

FX_INTERNAL void fx_oring_close(owner_ring_t *g)
{
    if (!g || g->closed) return;
    g->closed = true;
    fx_conn_close(g->conn, FLUXON_ERR_CANCELLED);
    if (g->read_inflight) {
        struct io_uring_sqe *sqe = fx_reactor_sqe(g->r, NULL);
        io_uring_prep_cancel64(sqe, (__u64)(uintptr_t)&g->io, 0);
    }
    oring_unref(g);
}
