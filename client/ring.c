/* ring.c — the client's side of the shared-memory rings with its owner (issue 18; layout
 * in transport/ring.h). A call takes a free slot, writes its request frame there, rings
 * the owner's doorbell only when the owner sleeps, and waits on the slot's state word
 * (a short spin, then a futex): the owner writes the reply in place and wakes exactly
 * this caller. No socket syscall and no client reactor on the request path. One-way
 * frames (consume, release) join the region's one-way queue, which the owner serves
 * before the requests of the same pass: the FIFO order the socket gave. What does not fit
 * a slot (large batches, large replies) takes the socket as before, after the one-way
 * queue has drained (fx_client_ring_barrier). */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "ring.h"

/* How long a caller polls its slot's state word before sleeping on it, in microseconds
 * (env FLUXON_RING_SPIN_US overrides, 0..1000000, for every call). By default on a host
 * with CRING_SPIN_MIN_CPUS CPUs, for every call; on a smaller one only for a call that
 * found the owner polling (its doorbell disarmed): an owner that sleeps must be woken
 * first, and there a spinning caller takes the core the owner needs (measured on 2 vCPUs
 * without owner polling: no spin get_start p50 ~20 us, a few us of spin ~40 us), while
 * a polling owner answers in a few us (session 13, 2 vCPUs, the owner polling 50 us by
 * default, 3 interleaved runs: `hot` batch 64 get_start+get_transfer p50 18.4 us without
 * a spin, 5.8 us with 50 us of spin). A bound in time, not in polls: a PAUSE costs 10 to
 * 150 cycles depending on the CPU. */
#define CRING_SPIN_US 50
#define CRING_SPIN_MAX_US 1000000
#define CRING_SPIN_MIN_CPUS 8
#if defined(__x86_64__) || defined(__i386__)
#define CRING_PAUSE() __builtin_ia32_pause()
#else
#define CRING_PAUSE() __asm__ __volatile__("" ::: "memory")
#endif
#define CRING_NOT_SENT 1 /* cring_wait: timed out before the owner took the request */

struct cring {
    void *base;
    int efd;
    int lost; /* atomic: the owner is gone (its socket closed) */
    uint64_t spin_ns;        /* how long a caller polls its slot's state word before sleeping on it */
    uint64_t spin_parked_ns; /* the same when the call had to ring the doorbell (the owner slept) */
    pthread_mutex_t lock; /* guards the free list and the abandoned slots */
    pthread_cond_t cond;  /* a slot was freed (CLOCK_MONOTONIC) */
    uint32_t free_list[FX_RING_SLOTS], n_free, n_abandoned;
    bool abandoned[FX_RING_SLOTS]; /* its caller timed out; freed once its reply is in */
    pthread_mutex_t ow_lock; /* guards the one-way queue's tail */
    uint64_t ow_tail;
};

/* FLUXON_RING_SPIN_US for every call, or the defaults for this host's CPU count: the
 * spin after a call that found the owner polling, and after one that rang its doorbell */
FX_INTERNAL void fx_client_ring_spin_us(uint64_t *polled_us, uint64_t *parked_us)
{
    const char *sp = getenv("FLUXON_RING_SPIN_US");
    char *end = NULL;
    unsigned long long v = sp && *sp ? strtoull(sp, &end, 10) : 0;
    if (sp && *sp && (*end || *sp == '-' || !(*sp >= '0' && *sp <= '9') || v > CRING_SPIN_MAX_US)) {
        FX_WARN("FLUXON_RING_SPIN_US=%s is not an integer in 0..%u (microseconds): ignored (the default)", sp,
                CRING_SPIN_MAX_US);
        sp = NULL;
    }
    if (!sp || !*sp) {
        *polled_us = CRING_SPIN_US;
        *parked_us = sysconf(_SC_NPROCESSORS_ONLN) >= CRING_SPIN_MIN_CPUS ? CRING_SPIN_US : 0;
        return;
    }
    *polled_us = *parked_us = v;
}

FX_INTERNAL int fx_client_ring_attach(fluxon_client *cl, int memfd, int efd)
{
    void *base = NULL;
    int rc = fx_ring_map(memfd, cl->owner_generation, &base);
    close(memfd);
    if (rc != FLUXON_OK) {
        close(efd);
        FX_WARN("the rings of owner %s cannot be mapped (%s): using the socket", cl->owner_node_id,
                fluxon_status_string(rc));
        return rc;
    }
    struct cring *g = fx_calloc(1, sizeof *g);
    if (!g || fx_cond_init_monotonic(&g->cond) != 0) {
        fx_free(g);
        fx_ring_unmap(base);
        close(efd);
        return FLUXON_ERR_NOMEM;
    }
    g->base = base;
    g->efd = efd;
    uint64_t polled_us, parked_us;
    fx_client_ring_spin_us(&polled_us, &parked_us);
    g->spin_ns = polled_us * 1000ull;
    g->spin_parked_ns = parked_us * 1000ull;
    pthread_mutex_init(&g->lock, NULL);
    pthread_mutex_init(&g->ow_lock, NULL);
    for (uint32_t i = 0; i < FX_RING_SLOTS; i++) g->free_list[i] = FX_RING_SLOTS - 1 - i;
    g->n_free = FX_RING_SLOTS;
    g->ow_tail = __atomic_load_n(&((fx_ring_hdr_t *)base)->ow_tail, __ATOMIC_ACQUIRE);
    cl->ring = g;
    return FLUXON_OK;
}

FX_INTERNAL void fx_client_ring_fini(fluxon_client *cl)
{
    struct cring *g = cl->ring;
    if (!g) return;
    cl->ring = NULL;
    fx_ring_unmap(g->base);
    close(g->efd);
    pthread_mutex_destroy(&g->lock);
    pthread_mutex_destroy(&g->ow_lock);
    pthread_cond_destroy(&g->cond);
    fx_free(g);
}

/* Wakes the owner when it sleeps (it set armed before its last look at the region).
 * False when it was polling: the doorbell was disarmed (or another caller rang it just
 * now and the owner is waking up, polling from then on). */
static bool cring_doorbell(struct cring *g)
{
    fx_ring_hdr_t *h = g->base;
    /* a load first: while the owner polls, the line stays shared (no write, no bounce) */
    if (!__atomic_load_n(&h->armed, __ATOMIC_SEQ_CST) || !__atomic_exchange_n(&h->armed, 0, __ATOMIC_SEQ_CST))
        return false;
    uint64_t one = 1;
    ssize_t w = write(g->efd, &one, sizeof one);
    (void)w; /* EAGAIN: the counter is saturated, the owner is woken anyway */
    return true;
}

/* ---- slots ---- */
/* Frees the abandoned slots whose late reply is in; the replies go to rpc.c's late
 * handling (what they reserved is handed back). Under g->lock; the late handling runs
 * after it is released (it may push one-way frames). */
static size_t cring_reap_locked(struct cring *g, uint8_t **late, size_t cap)
{
    size_t n = 0;
    for (uint32_t i = 0; i < FX_RING_SLOTS && g->n_abandoned && n < cap; i++) {
        if (!g->abandoned[i]) continue;
        fx_ring_slot_t *s = fx_ring_slot(g->base, i);
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != FX_RING_DONE) continue;
        uint32_t len = __atomic_load_n(&s->resp_len, __ATOMIC_RELAXED);
        if (len >= FX_FRAME_HEADER_BYTES && len <= FX_RING_SLOT_CAP && (late[n] = fx_malloc(len + 4))) {
            memcpy(late[n] + 4, fx_ring_slot_data(g->base, i), len);
            memcpy(late[n], &len, 4);
            n++;
        }
        g->abandoned[i] = false;
        g->n_abandoned--;
        __atomic_store_n(&s->state, FX_RING_FREE, __ATOMIC_RELAXED);
        g->free_list[g->n_free++] = i;
    }
    return n;
}

static void cring_late(fluxon_client *cl, uint8_t **late, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint32_t len;
        memcpy(&len, late[k], 4);
        fx_frame_header_t h;
        if (fx_frame_header_decode(late[k] + 4, FX_RING_SLOT_CAP, &h) == FLUXON_OK &&
            FX_FRAME_HEADER_BYTES + (uint64_t)h.body_len == len)
            fx_client_late_answer(cl, &h, late[k] + 4 + FX_FRAME_HEADER_BYTES);
        fx_free(late[k]);
    }
}

FX_INTERNAL void fx_client_ring_sweep(fluxon_client *cl)
{
    struct cring *g = cl->ring;
    if (!g) return;
    uint8_t *late[FX_RING_SLOTS];
    pthread_mutex_lock(&g->lock);
    size_t n = cring_reap_locked(g, late, FX_RING_SLOTS);
    if (n) pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    cring_late(cl, late, n);
}

/* A free slot, waiting up to deadline_ns for one; UINT32_MAX on timeout or owner lost. */
static uint32_t cring_slot_get(fluxon_client *cl, struct cring *g, uint64_t deadline_ns)
{
    uint8_t *late[FX_RING_SLOTS];
    size_t n_late = 0;
    uint32_t i = UINT32_MAX;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        if (!g->n_free && g->n_abandoned) n_late += cring_reap_locked(g, late + n_late, FX_RING_SLOTS - n_late);
        if (g->n_free) {
            i = g->free_list[--g->n_free];
            break;
        }
        uint64_t now = fx_now_ns();
        if (now >= deadline_ns || __atomic_load_n(&g->lost, __ATOMIC_ACQUIRE)) break;
        uint64_t wait_ms = FX_MIN((deadline_ns - now) / 1000000u + 1, 5u); /* abandoned slots are re-polled */
        struct timespec ts = fx_deadline_ts((uint32_t)wait_ms);
        pthread_cond_timedwait(&g->cond, &g->lock, &ts);
    }
    pthread_mutex_unlock(&g->lock);
    cring_late(cl, late, n_late);
    return i;
}

static void cring_slot_put(struct cring *g, uint32_t i, bool abandoned)
{
    pthread_mutex_lock(&g->lock);
    if (abandoned) {
        g->abandoned[i] = true;
        g->n_abandoned++;
    } else {
        __atomic_store_n(&fx_ring_slot(g->base, i)->state, FX_RING_FREE, __ATOMIC_RELAXED);
        g->free_list[g->n_free++] = i;
        pthread_cond_signal(&g->cond);
    }
    pthread_mutex_unlock(&g->lock);
}

/* The largest reply a request of this type and size can get, or 0 when the type does not
 * travel on the ring (replies of unbounded size: stats, nodes, lists). An error reply is
 * at most ~600 bytes. */
static uint64_t cring_reply_bound(uint16_t type, const uint8_t *req, uint32_t len)
{
    /* get_start, put_start and pin bodies begin with the keys: a u32 count (little-endian) */
    uint64_t n_keys = len >= 4 ? (uint64_t)req[0] | (uint64_t)req[1] << 8 | (uint64_t)req[2] << 16 |
                                     (uint64_t)req[3] << 24
                               : 0;
    switch (type) {
    case FX_MSG_PING:
    case FX_MSG_PUT_COMMIT:
    case FX_MSG_PUT_ABORT:
    case FX_MSG_EXISTS:
    case FX_MSG_DELETE:
    case FX_MSG_LEASE_GRANT:
    case FX_MSG_PUT_INLINE: return 1024;
    /* the acks: 3 u64 per transferable key (get), 2 per key (put), plus fixed fields */
    case FX_MSG_GET_START: return 1024 + n_keys * 24;
    case FX_MSG_PUT_START: return 1024 + n_keys * 16;
    case FX_MSG_PIN: return 1024 + n_keys * 8; /* a status per key (its body begins with the keys too) */
    default: return 0;
    }
}

/* Waits for slot i's reply until deadline_ns. FLUXON_OK: the reply is in; TIMEOUT: the
 * slot was abandoned (the owner may still answer: the reply is then reaped);
 * UNAVAILABLE: the owner is gone. */
static int cring_wait(struct cring *g, uint32_t i, uint64_t spin_ns, uint64_t deadline_ns)
{
    fx_ring_slot_t *s = fx_ring_slot(g->base, i);
    if (spin_ns) { /* the clock read once every 32 polls */
        uint64_t until = fx_now_ns() + spin_ns;
        for (uint32_t k = 1;; k++) {
            if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == FX_RING_DONE) return FLUXON_OK;
            CRING_PAUSE();
            if (!(k & 31)) { /* and a thread this spin would keep waiting (the owner) runs now */
                if (fx_now_ns() >= until) break;
                sched_yield();
            }
        }
    }
    __atomic_store_n(&s->waiters, 1, __ATOMIC_SEQ_CST);
    for (;;) {
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_SEQ_CST);
        if (st == FX_RING_DONE) return FLUXON_OK;
        uint64_t now = fx_now_ns();
        bool lost = __atomic_load_n(&g->lost, __ATOMIC_ACQUIRE);
        if (now >= deadline_ns || lost) {
            int rc = lost ? FLUXON_ERR_UNAVAILABLE : FLUXON_ERR_TIMEOUT;
            /* not taken yet: never served, the slot is free again; taken: the owner
             * answers later and the reply is reaped (what it reserved handed back) */
            uint32_t exp = FX_RING_REQ;
            if (__atomic_compare_exchange_n(&s->state, &exp, FX_RING_FREE, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
                return rc == FLUXON_ERR_TIMEOUT ? CRING_NOT_SENT : rc;
            exp = FX_RING_TAKEN;
            if (__atomic_compare_exchange_n(&s->state, &exp, FX_RING_ABANDONED, false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST))
                return rc;
            continue; /* answered just now */
        }
        fx_ring_futex_wait(&s->state, st, FX_MIN(deadline_ns - now, 100000000ull));
    }
}

FX_INTERNAL bool fx_client_ring_call(fluxon_client *cl, uint16_t type, const uint8_t *req, uint32_t len,
                                     fx_client_hook_fn hook, void *hook_ctx, uint8_t **resp_p, uint32_t *resp_len_p,
                                     int *rc_p)
{
    struct cring *g = cl->ring;
    uint64_t bound = cring_reply_bound(type, req, len);
    if (!g || !bound || bound > FX_RING_SLOT_CAP || FX_FRAME_HEADER_BYTES + (uint64_t)len > FX_RING_SLOT_CAP)
        return false;
    uint64_t deadline = fx_now_ns() + (uint64_t)cl->cfg.timeout_ms * 1000000ull;
    uint32_t i = cring_slot_get(cl, g, deadline);
    if (i == UINT32_MAX) {
        *rc_p = __atomic_load_n(&g->lost, __ATOMIC_ACQUIRE) ? FLUXON_ERR_UNAVAILABLE : FLUXON_ERR_TIMEOUT;
        if (*rc_p == FLUXON_ERR_TIMEOUT) __atomic_add_fetch(&cl->timeouts, 1, __ATOMIC_RELAXED);
        return true; /* nothing was sent */
    }
    fx_ring_slot_t *s = fx_ring_slot(g->base, i);
    uint8_t *d = fx_ring_slot_data(g->base, i);
    fx_frame_header_t h = {FX_FRAME_MAGIC, type, 0, len, 0, i + 1};
    fx_frame_header_encode(&h, d);
    if (len) memcpy(d + FX_FRAME_HEADER_BYTES, req, len);
    s->req_len = FX_FRAME_HEADER_BYTES + len;
    s->waiters = 0;
    s->post_ns = fx_now_ns(); /* the owner's ring_wait: how long requests wait for its reactor */
    __atomic_store_n(&s->state, FX_RING_REQ, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&((fx_ring_hdr_t *)g->base)->posted, 1, __ATOMIC_SEQ_CST); /* after REQ: ring.h */
    bool rang = cring_doorbell(g);
    int rc = cring_wait(g, i, rang ? g->spin_parked_ns : g->spin_ns, deadline);
    if (rc != FLUXON_OK) {
        if (rc != FLUXON_ERR_UNAVAILABLE) __atomic_add_fetch(&cl->timeouts, 1, __ATOMIC_RELAXED);
        cring_slot_put(g, i, rc != CRING_NOT_SENT);
        *rc_p = rc == CRING_NOT_SENT ? FLUXON_ERR_TIMEOUT : rc;
        return true;
    }
    uint32_t rlen = __atomic_load_n(&s->resp_len, __ATOMIC_RELAXED);
    fx_frame_header_t rh;
    rc = FLUXON_ERR_PROTOCOL;
    if (rlen >= FX_FRAME_HEADER_BYTES && rlen <= FX_RING_SLOT_CAP &&
        fx_frame_header_decode(d, FX_RING_SLOT_CAP, &rh) == FLUXON_OK &&
        FX_FRAME_HEADER_BYTES + (uint64_t)rh.body_len == rlen && rh.type == type) {
        rc = rh.status;
        uint8_t *body = NULL;
        if (rh.body_len && !(body = fx_client_buf(FX_CLIENT_RESP, rh.body_len)))
            rc = rc == FLUXON_OK ? FLUXON_ERR_NOMEM : rc;
        if (body) memcpy(body, d + FX_FRAME_HEADER_BYTES, rh.body_len);
        if (hook) hook(cl, hook_ctx, rc, body, body ? rh.body_len : 0);
        if (resp_p) {
            *resp_p = body;
            *resp_len_p = body ? rh.body_len : 0;
        } else {
            fx_client_buf_free(body);
        }
    }
    cring_slot_put(g, i, false);
    *rc_p = rc;
    return true;
}

/* ---- one-way queue ---- */
FX_INTERNAL int fx_client_ring_oneway(fluxon_client *cl, uint16_t type, const uint8_t *req, uint32_t len,
                                      bool may_wait)
{
    struct cring *g = cl->ring;
    uint64_t flen = FX_FRAME_HEADER_BYTES + (uint64_t)len, rec = (8 + flen + 7) & ~7ull;
    if (!g || flen > FX_RING_SLOT_CAP ||
        (type != FX_MSG_HANDLE_CONSUME && type != FX_MSG_RELEASE && type != FX_MSG_PREFETCH) ||
        __atomic_load_n(&g->lost, __ATOMIC_ACQUIRE))
        return 0;
    fx_ring_hdr_t *h = g->base;
    uint8_t *q = fx_ring_oneway(g->base);
    uint64_t deadline = fx_now_ms() + cl->cfg.timeout_ms;
    pthread_mutex_lock(&g->ow_lock);
    for (;;) {
        uint64_t head = __atomic_load_n(&h->ow_head, __ATOMIC_ACQUIRE), off = g->ow_tail % FX_RING_ONEWAY_BYTES;
        uint64_t room = FX_RING_ONEWAY_BYTES - off, need = rec + (rec > room ? room : 0);
        if (g->ow_tail + need - head <= FX_RING_ONEWAY_BYTES) {
            if (rec > room) {
                uint32_t wrap = FX_RING_WRAP;
                memcpy(q + off, &wrap, sizeof wrap);
                g->ow_tail += room;
                off = 0;
            }
            uint32_t l32 = (uint32_t)flen;
            memcpy(q + off, &l32, sizeof l32);
            fx_frame_header_t fh = {FX_FRAME_MAGIC, type, 0, len, 0, 0};
            fx_frame_header_encode(&fh, q + off + 8);
            if (len) memcpy(q + off + 8 + FX_FRAME_HEADER_BYTES, req, len);
            g->ow_tail += rec;
            __atomic_store_n(&h->ow_tail, g->ow_tail, __ATOMIC_SEQ_CST);
            break;
        }
        cring_doorbell(g); /* full: the owner drains it */
        if (!may_wait) { /* a hint (PREFETCH): dropped, never a wait */
            pthread_mutex_unlock(&g->ow_lock);
            return -1;
        }
        if (fx_now_ms() >= deadline || __atomic_load_n(&g->lost, __ATOMIC_ACQUIRE)) {
            pthread_mutex_unlock(&g->ow_lock);
            FX_WARN("the one-way queue to owner %s stayed full for %u ms (timeout_ms): %s goes on the socket",
                    cl->owner_node_id, cl->cfg.timeout_ms, fx_msg_name(type));
            return 0;
        }
        usleep(50);
    }
    pthread_mutex_unlock(&g->ow_lock);
    cring_doorbell(g);
    return 1;
}

FX_INTERNAL void fx_client_ring_barrier(fluxon_client *cl)
{
    struct cring *g = cl->ring;
    if (!g) return;
    fx_ring_hdr_t *h = g->base;
    pthread_mutex_lock(&g->ow_lock);
    uint64_t tail = g->ow_tail;
    pthread_mutex_unlock(&g->ow_lock);
    uint64_t deadline = fx_now_ms() + cl->cfg.timeout_ms;
    while ((int64_t)(__atomic_load_n(&h->ow_head, __ATOMIC_ACQUIRE) - tail) < 0 &&
           !__atomic_load_n(&g->lost, __ATOMIC_ACQUIRE) && fx_now_ms() < deadline) {
        cring_doorbell(g);
        usleep(20);
    }
}

FX_INTERNAL void fx_client_ring_lost(fluxon_client *cl)
{
    struct cring *g = cl->ring;
    if (!g) return;
    __atomic_store_n(&g->lost, 1, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < FX_RING_SLOTS; i++) fx_ring_futex_wake(&fx_ring_slot(g->base, i)->state, INT32_MAX);
    pthread_mutex_lock(&g->lock);
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}
