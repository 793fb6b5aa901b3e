/* ucx_dp.c — the owner<->owner UCX data plane (contract in ucx_dp.h): batched GET/PUT of
 * byte ranges over RMA (native lanes) or active-message rendezvous (tcp), completions
 * deferred to the caller's progress, bounded failure handling and teardown. This file:
 * context and worker, memory registration, peers (mechanism choice, failure, close),
 * timeouts, progress and teardown; transfers are in ucx_xfer.c, the AM target side in
 * ucx_am.c (ucx_int.h). */
#include "ucx_int.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include <ucs/debug/log_def.h>

/* Mechanism choice, measured with fx_ucx_bench on the 2-core dev VM (UCX 1.13.1, two
 * processes, 64 ranges x 4,718,592 B, median of 5 per run, 8-9 runs, GB = 1e9 B; the VM
 * was shared with other builds, load 1.4-7, so single runs vary 3-10x):
 *   tcp       AM  GET 0.56-3.07 (median 1.30)  PUT 0.61-3.01 (median 0.94)
 *             RMA GET 0.25-1.08 (median 0.80)  PUT 0.26-0.94 (median 0.50)
 *             AM/RMA within a run: GET 1.1-3.4x (median 1.6), PUT 1.1-3.8x (median 2.7)
 *             (ucx_perftest in the same runs: ucp_get 0.3-0.9, ucp_put_bw 0.04,
 *             ucp_am_bw 0.8-4.2)
 *   shm (cma) AM  GET 2.7-8.5 (median 5.6)  PUT 2.5-8.2 (median 6.3)
 *             RMA GET 0.4-9.5 (median 5.1)  PUT 0.2-8.0 (median 4.4): user RMA cannot
 *             use cma (emulated over the FIFO, every fragment needs both processes
 *             scheduled) and collapses below 1 GB/s in 3 runs of 8; rendezvous over cma
 *             is one process_vm_readv per range and never fell below 2.4
 *   posix,sysv,self  RMA GET median 9.1, PUT 7.2;  AM GET 8.4, PUT 8.7: a tie, so the
 *             RMA baseline stays.
 * UCX 1.13 emulates RMA on tcp in software (bcopy fragments copied on both sides);
 * rendezvous moves the bytes zero-copy through the socket. ucxdp_detect_mech encodes the
 * resulting policy. */

#define UCXDP_PROGRESS_ROUNDS 256
#define UCXDP_NS_PER_MS 1000000ull
/* A force close normally completes in one progress; give up waiting after this. */
#define UCXDP_CLOSE_WAIT_NS (2000ull * UCXDP_NS_PER_MS)
/* After a timeout force-closed the peer, requests should retire at once; if UCX still
 * holds some after this grace the callback is delivered anyway (the transfer's memory
 * is kept until UCX lets go of it). */
#define UCXDP_ORPHAN_GRACE_NS (1000ull * UCXDP_NS_PER_MS)
#define UCXDP_DESTROY_WAIT_NS (1000ull * UCXDP_NS_PER_MS)



FX_INTERNAL int fx_ucx_status_map(int ucs_status)
{
    return ucxdp_map((ucs_status_t)ucs_status);
}

/* ---- peers ---------------------------------------------------------------------- */

static void ucxdp_peer_shutdown(fx_ucx_peer_t *p)
{
    fx_ucx_t *u = p->u;
    if (p->closing) return;
    p->closing = 1;
    FX_ASSERT(p->status != FLUXON_OK);
    /* Awaited AM replies will never come now; requests are retired by the close. */
    fx_ucxdp_xfer_fail_peer(u, p);
    if (p->refs == 0 && p->rkey) { /* else once the last request retired (reap) */
        ucp_rkey_destroy(p->rkey);
        p->rkey = NULL;
    }
    /* An idle, healthy peer is closed gracefully (flush), so its side sees an orderly
     * disconnect rather than a transport error; bounded by UCXDP_CLOSE_WAIT_NS. Anything
     * else is forced: no round trip to a peer that may be dead or stuck, and outstanding
     * requests complete with UCS_ERR_CANCELED (PEER mode; in NONE mode UCX 1.13 leaves
     * them pending, which the orphan path below covers). */
    bool graceful = p->status == FLUXON_ERR_CANCELLED && p->refs == 0;
    ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = graceful ? 0 : UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t r = p->ep ? ucp_ep_close_nbx(p->ep, &cp) : NULL; /* a mapped peer may have none */
    p->ep = NULL;
    if (UCS_PTR_IS_PTR(r)) {
        p->close_req = r;
        p->close_deadline_ns = fx_now_ns() + UCXDP_CLOSE_WAIT_NS;
    } else if (UCS_PTR_IS_ERR(r)) {
        FX_DEBUG("ucx: endpoint close: %s", ucs_status_string(UCS_PTR_STATUS(r)));
    }
}

static void ucxdp_ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    fx_ucx_peer_t *p = arg;
    if (p->status == FLUXON_OK) {
        /* an idle peer that went away (its owner stopped) loses nothing: debug; one with
         * transfers in flight fails them, and each failure is reported where it lands */
        if (p->refs) FX_WARN("ucx: peer failed with %zu transfers in flight: %s", p->refs, ucs_status_string(st));
        else FX_DEBUG("ucx: idle peer went away: %s", ucs_status_string(st));
        p->status = FLUXON_ERR_UNAVAILABLE;
    }
    /* Closing the ep inside UCX's own callback is not allowed; reap does it. */
    p->u->need_reap = true;
}

static void ucxdp_peer_free(fx_ucx_peer_t *p)
{
    fx_ucx_t *u = p->u;
    if (p->prev) p->prev->next = p->next; else u->peers = p->next;
    if (p->next) p->next->prev = p->prev;
    fx_free(p->lazy_addr);
    fx_free(p->lazy_rkey);
    fx_free(p);
}

/* Retires what a closing peer still holds; frees it once nothing refers to it. */
static void ucxdp_peer_retire(fx_ucx_peer_t *p, uint64_t now)
{
    if (!p->closing) return;
    if (p->close_req) {
        if (ucp_request_check_status(p->close_req) != UCS_INPROGRESS) {
            ucp_request_free(p->close_req);
            p->close_req = NULL;
        } else if (now >= p->close_deadline_ns) {
            /* Abandon: UCX releases the request when it completes (or at destroy). */
            FX_WARN("ucx: endpoint close did not complete in %llu ms; abandoned",
                    (unsigned long long)(UCXDP_CLOSE_WAIT_NS / UCXDP_NS_PER_MS));
            ucp_request_free(p->close_req);
            p->close_req = NULL;
        }
    }
    if (p->refs == 0 && p->rkey) {
        ucp_rkey_destroy(p->rkey);
        p->rkey = NULL;
    }
    if (p->user_closed && !p->close_req && p->refs == 0) ucxdp_peer_free(p);
}

static void ucxdp_mem_release(fx_ucx_mem_t *m)
{
    ucs_status_t st = ucp_mem_unmap(m->u->ctx, m->memh);
    if (st != UCS_OK) FX_ERROR("ucx: ucp_mem_unmap: %s", ucs_status_string(st));
    fx_free(m);
}

static unsigned ucxdp_reap(fx_ucx_t *u)
{
    unsigned n = 0;
    uint64_t now = fx_now_ns();
    u->need_reap = false;
    ucxdp_xfer_t *nx;
    for (ucxdp_xfer_t *x = u->live_head; x; x = nx) { /* posting may finish x (unlinked) */
        nx = x->next;
        if (x->test_post_ns && now >= x->test_post_ns) {
            fx_ucxdp_xfer_post_late(x);
            n++;
        }
    }
    for (ucxdp_xfer_t *x = u->live_head; x; x = x->next) {
        if (!x->timed_out && now >= x->deadline_ns) {
            x->timed_out = 1;
            if (x->status == FLUXON_OK) x->status = FLUXON_ERR_TIMEOUT;
            if (x->peer->status == FLUXON_OK) FX_WARN("ucx: transfer of %zu ranges timed out; failing its peer", x->n);
            else FX_INFO("ucx: transfer of %zu ranges to a failed peer ends now (outcome unknown)", x->n);
            /* A stuck endpoint is not trusted again: fail and force-close it. */
            if (x->peer->status == FLUXON_OK) x->peer->status = FLUXON_ERR_UNAVAILABLE;
            if (!x->peer->err_peer) {
                /* Without PEER error handling a force close does not retire requests
                 * (UCX 1.13): report now; the ep is gone, so nothing lands later. */
                x->early = 1;
                fx_ucxdp_xfer_queue(u, x);
            }
            n++;
        } else if (x->timed_out && !x->early && now >= x->deadline_ns + UCXDP_ORPHAN_GRACE_NS) {
            FX_WARN("ucx: timed-out transfer still held by UCX; reporting it anyway");
            x->early = 1;
            fx_ucxdp_xfer_queue(u, x);
            n++;
        }
    }
    /* Shutdowns may complete requests synchronously (finishing transfers), so no
     * transfer list is being walked here. */
    for (fx_ucx_peer_t *p = u->peers; p; p = p->next) {
        if (p->status != FLUXON_OK && !p->closing) {
            ucxdp_peer_shutdown(p);
            n++;
        }
    }
    fx_ucx_peer_t *np;
    for (fx_ucx_peer_t *p = u->peers; p; p = np) {
        np = p->next;
        ucxdp_peer_retire(p, now);
    }
    fx_ucx_mem_t **pm = &u->dead_mems;
    while (*pm) {
        fx_ucx_mem_t *m = *pm;
        if (fx_ucxdp_memh_in_use(u, m->memh)) {
            pm = &m->next;
            continue;
        }
        *pm = m->next;
        ucxdp_mem_release(m);
    }
    return n;
}

/* ---- public API ----------------------------------------------------------------- */

static int ucxdp_map_init(ucs_status_t st)
{
    switch (st) {
    case UCS_ERR_NO_DEVICE:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_UNSUPPORTED:
    case UCS_ERR_UNREACHABLE:
        return FLUXON_ERR_UNAVAILABLE;
    case UCS_ERR_NO_MEMORY:
        return FLUXON_ERR_NOMEM;
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_NO_ELEM:
        return FLUXON_ERR_CONFIG;
    default:
        return FLUXON_ERR_INTERNAL;
    }
}

/* UCX 1.13 shared-memory transports cannot detect a dead peer, so PEER error handling
 * would make every shm-only endpoint unreachable. */
static bool ucxdp_tls_shm_only(const char *tls)
{
    static const char *const shm[] = {"posix", "sysv", "self", "cma", "knem", "xpmem",
                                       "shm", "sm", "mm"};
    if (!tls || !*tls) return false;
    const char *s = tls;
    while (*s) {
        size_t l = strcspn(s, ",");
        bool known = false;
        for (size_t i = 0; i < FX_ARRAY_LEN(shm); i++)
            if (l == strlen(shm[i]) && strncmp(s, shm[i], l) == 0) known = true;
        if (l && !known) return false;
        s += l;
        if (*s == ',') s++;
    }
    return true;
}

/* UCX's own log lines go through Fluxon's log, with Fluxon's format, context and level
 * threshold. UCX reports every transport-level event of a peer that died or went away
 * (shmat of a removed segment, a refused connect, an endpoint timeout) as an ERROR of its
 * own; Fluxon reports the outcome once, in its words (a failed fetch says why), so those
 * are debug here. UCX FATAL stays an error; any other UCX error or warning is a warning. */
/* Set on the thread destroying a worker whose stuck transfers it already reported. */
static __thread bool t_ucxdp_leaks_reported;

static bool ucxdp_log_is_peer_noise(const char *msg)
{
    if (t_ucxdp_leaks_reported && (strstr(msg, "was not returned to mpool") || strstr(msg, "were not flushed")))
        return true;
    static const char *const noise[] = {"shmat", "connect(", "refused", "Endpoint timeout", "timed out",
                                        "Connection reset", "Broken pipe", "unreachable", "peer",
                                        "Input/output error", "remote"};
    for (size_t i = 0; i < FX_ARRAY_LEN(noise); i++)
        if (strstr(msg, noise[i])) return true;
    return false;
}

static ucs_log_func_rc_t ucxdp_log_handler(const char *file, unsigned line, const char *function,
                                           ucs_log_level_t level, const ucs_log_component_config_t *comp,
                                           const char *message, va_list ap)
{
    char msg[768];
    va_list aq;
    va_copy(aq, ap);
    vsnprintf(msg, sizeof msg, message, aq);
    va_end(aq);
    int fl = level <= UCS_LOG_LEVEL_FATAL ? FX_LOG_ERROR
             : level <= UCS_LOG_LEVEL_WARN ? (ucxdp_log_is_peer_noise(msg) ? FX_LOG_DEBUG : FX_LOG_WARN)
                                           : FX_LOG_DEBUG;
    if (fl >= fx_log_get_level()) {
        const char *base = file ? strrchr(file, '/') : NULL;
        fx_log(fl, "ucx %s: %s (%s:%u)", level <= UCS_LOG_LEVEL_ERROR ? "error" : level <= UCS_LOG_LEVEL_WARN
                   ? "warning" : "info", msg, base ? base + 1 : file ? file : "?", line);
    }
    return UCS_LOG_FUNC_RC_STOP; /* not printed again by UCX's default handler */
}

static void ucxdp_log_route(void) { ucs_log_push_handler(ucxdp_log_handler); }

FX_INTERNAL int fx_ucx_create(const char *tls, fx_ucx_t **u_p)
{
    static pthread_once_t log_once = PTHREAD_ONCE_INIT;
    pthread_once(&log_once, ucxdp_log_route);
    if (!u_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_ucx_t *u = fx_calloc(1, sizeof *u);
    if (!u) return FLUXON_ERR_NOMEM;
    u->efd = -1;
    u->timeout_ns = FX_UCX_DEFAULT_TIMEOUT_MS * UCXDP_NS_PER_MS;
    u->shm_only = ucxdp_tls_shm_only(tls);

    int rc;
    const char *what = "ucp_config_read";
    ucp_config_t *cfg = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st == UCS_OK && tls) {
        what = "ucp_config_modify(TLS)";
        st = ucp_config_modify(cfg, "TLS", tls);
    }
    if (st != UCS_OK) {
        rc = st == UCS_ERR_NO_MEMORY ? FLUXON_ERR_NOMEM : FLUXON_ERR_CONFIG;
        goto fail;
    }
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
    };
    what = "ucp_init";
    st = ucp_init(&params, cfg, &u->ctx);
    ucp_config_release(cfg);
    cfg = NULL;
    if (st != UCS_OK) {
        u->ctx = NULL;
        rc = ucxdp_map_init(st);
        goto fail;
    }
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    what = "ucp_worker_create";
    st = ucp_worker_create(u->ctx, &wp, &u->worker);
    if (st != UCS_OK) {
        u->worker = NULL;
        rc = ucxdp_map_init(st);
        goto fail;
    }
    what = "ucp_worker_get_efd";
    st = ucp_worker_get_efd(u->worker, &u->efd);
    if (st == UCS_OK) {
        what = "ucp_worker_get_address";
        st = ucp_worker_get_address(u->worker, &u->addr, &u->addr_len);
    }
    if (st == UCS_OK) {
        what = "ucp_worker_set_am_recv_handler";
        st = fx_ucxdp_target_init(u);
        if (st == UCS_OK) st = fx_ucxdp_xfer_init(u);
    }
    if (st != UCS_OK) {
        rc = ucxdp_map_init(st);
        goto fail;
    }
    FX_DEBUG("ucx: data plane up (tls %s, error handling %s)", tls ? tls : "default",
             u->shm_only ? "none" : "peer");
    *u_p = u;
    return FLUXON_OK;

fail:
    FX_ERROR("ucx: %s failed (tls %s): %s", what, tls ? tls : "default",
             ucs_status_string(st));
    if (cfg) ucp_config_release(cfg);
    if (u->addr) ucp_worker_release_address(u->worker, u->addr);
    if (u->worker) ucp_worker_destroy(u->worker);
    if (u->ctx) ucp_cleanup(u->ctx);
    fx_free(u);
    return rc;
}

FX_INTERNAL void fx_ucx_destroy(fx_ucx_t *u)
{
    if (!u) return;
    u->destroying = true;
    size_t held = 0;
    for (fx_ucx_peer_t *p = u->peers; p; p = p->next) {
        if (p->closing) continue;
        if (p->status == FLUXON_OK) p->status = FLUXON_ERR_CANCELLED;
        ucxdp_peer_shutdown(p);
    }
    /* Let UCX retire cancelled requests so callbacks report real statuses; bounded. */
    uint64_t end = fx_now_ns() + UCXDP_DESTROY_WAIT_NS;
    for (;;) {
        unsigned k = ucp_worker_progress(u->worker);
        bool busy = false; /* transfers already reported as stuck are not waited for */
        for (ucxdp_xfer_t *x = u->live_head; x && !busy; x = x->next) busy = !x->early;
        for (fx_ucx_peer_t *p = u->peers; p && !busy; p = p->next) busy = p->close_req != NULL;
        if (!busy || fx_now_ns() >= end) break;
        for (fx_ucx_peer_t *p = u->peers; p; p = p->next) {
            if (p->close_req && ucp_request_check_status(p->close_req) != UCS_INPROGRESS) {
                ucp_request_free(p->close_req);
                p->close_req = NULL;
            }
        }
        if (!k) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    fx_ucxdp_xfer_drain(u);
    for (ucxdp_xfer_t *x = u->live_head; x; x = x->next) {
        fx_ucx_done_cb cb = x->cb;
        x->cb = NULL;
        u->in_cb = x; /* not retired: a callback may hold its buffers until below */
        if (cb) cb(x->arg, x->status != FLUXON_OK ? x->status : FLUXON_ERR_CANCELLED);
        u->in_cb = NULL;
    }
    for (fx_ucx_peer_t *p = u->peers; p; p = p->next) {
        if (p->close_req) ucp_request_free(p->close_req);
        p->close_req = NULL;
        /* An rkey may only go once its requests retired; a stuck one is left to the
         * worker's teardown rather than freed under UCX's feet. */
        if (p->rkey && p->refs == 0) ucp_rkey_destroy(p->rkey);
        else if (p->rkey) held += p->refs;
        p->rkey = NULL;
    }
    if (held)
        FX_WARN("ucx: destroy: %zu transfers still held by UCX (a stuck peer): their requests and rkey are left "
                "to UCX's teardown", held);
    ucp_worker_release_address(u->worker, u->addr);
    /* May still complete requests (their transfers and peers are alive until below). UCX
     * then lists every request and rkey of the stuck transfers it frees: details of the
     * event just reported, so at debug level (t_ucxdp_leaks_reported). */
    t_ucxdp_leaks_reported = held > 0;
    ucp_worker_destroy(u->worker);
    /* The worker is gone: nothing writes or reads a transfer's buffers any more, so held
     * callbacks (fx_ucx_hold_until_retired) run now. */
    while (u->live_head) {
        ucxdp_xfer_t *x = u->live_head;
        fx_ucxdp_xfer_unlink(u, x);
        if (!x->queued) fx_ucxdp_xfer_retire(u, x);
    }
    while (u->q_head) {
        ucxdp_xfer_t *x = u->q_head;
        u->q_head = x->qnext;
        fx_ucxdp_xfer_retire(u, x);
    }
    fx_ucxdp_target_fini(u);
    while (u->peers) ucxdp_peer_free(u->peers);
    while (u->mems) fx_ucx_mem_unmap(u->mems); /* no live transfers left: immediate */
    while (u->dead_mems) {
        fx_ucx_mem_t *m = u->dead_mems;
        u->dead_mems = m->next;
        ucxdp_mem_release(m);
    }
    ucp_cleanup(u->ctx);
    t_ucxdp_leaks_reported = false;
    fx_free(u);
}

FX_INTERNAL int fx_ucx_efd(const fx_ucx_t *u)
{
    return u ? u->efd : -1;
}

FX_INTERNAL int fx_ucx_arm(fx_ucx_t *u)
{
    if (!u) return FLUXON_ERR_INVALID_ARGUMENT;
    if (u->q_head || u->need_reap) return 0;
    ucs_status_t st = ucp_worker_arm(u->worker);
    if (st == UCS_OK) return 1;
    if (st == UCS_ERR_BUSY) return 0;
    FX_ERROR("ucx: ucp_worker_arm: %s", ucs_status_string(st));
    return FLUXON_ERR_INTERNAL;
}

FX_INTERNAL unsigned fx_ucx_progress(fx_ucx_t *u)
{
    if (!u) return 0;
    unsigned n = 0;
    for (int i = 0; i < UCXDP_PROGRESS_ROUNDS; i++) {
        unsigned k = ucp_worker_progress(u->worker);
        if (!k) break;
        n += k;
    }
    n += ucxdp_reap(u);
    n += fx_ucxdp_xfer_drain(u);
    return n;
}

FX_INTERNAL bool fx_ucx_completions_queued(const fx_ucx_t *u) { return u && u->q_head; }

FX_INTERNAL int fx_ucx_next_timeout_ms(const fx_ucx_t *u)
{
    if (!u) return -1;
    if (u->q_head || u->need_reap) return 0;
    uint64_t best = UINT64_MAX;
    for (const ucxdp_xfer_t *x = u->live_head; x; x = x->next) {
        uint64_t d = x->timed_out ? (x->early ? UINT64_MAX : x->deadline_ns + UCXDP_ORPHAN_GRACE_NS)
                                  : x->deadline_ns;
        best = FX_MIN(best, d);
        if (x->test_post_ns) best = FX_MIN(best, x->test_post_ns);
    }
    for (const fx_ucx_peer_t *p = u->peers; p; p = p->next)
        if (p->close_req) best = FX_MIN(best, p->close_deadline_ns);
    if (best == UINT64_MAX) return -1;
    uint64_t now = fx_now_ns();
    if (best <= now) return 0;
    uint64_t ms = (best - now + UCXDP_NS_PER_MS - 1) / UCXDP_NS_PER_MS;
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

FX_INTERNAL void fx_ucx_set_timeout_ms(fx_ucx_t *u, uint32_t ms)
{
    if (u) u->timeout_ns = (uint64_t)(ms ? ms : FX_UCX_DEFAULT_TIMEOUT_MS) * UCXDP_NS_PER_MS;
}

FX_INTERNAL bool fx_ucx_hold_until_retired(fx_ucx_t *u, const void *xfer_arg, fx_ucx_retired_cb fn, void *arg)
{
    ucxdp_xfer_t *x = u ? u->in_cb : NULL;
    if (!x || !fn || x->hold_fn || x->arg != xfer_arg) return false;
    x->hold_fn = fn;
    x->hold_arg = arg;
    u->held++;
    return true;
}

FX_INTERNAL size_t fx_ucx_held(const fx_ucx_t *u) { return u ? u->held : 0; }

FX_INTERNAL void fx_ucx_test_late_gets(fx_ucx_t *u, uint32_t n, uint32_t ms)
{
    if (!u) return;
    u->test_late_n = n;
    u->test_late_ms = ms;
}

FX_INTERNAL void fx_ucx_test_late_puts(fx_ucx_t *u, uint32_t n, uint32_t ms)
{
    if (!u) return;
    u->test_late_puts_n = n;
    if (n) u->test_late_ms = ms;
}

FX_INTERNAL void fx_ucx_set_mech(fx_ucx_t *u, fx_ucx_mech_t mech)
{
    if (u) u->mech = mech;
}

FX_INTERNAL int fx_ucx_worker_address(fx_ucx_t *u, const void **addr_p, size_t *len_p)
{
    if (!u || !addr_p || !len_p) return FLUXON_ERR_INVALID_ARGUMENT;
    *addr_p = u->addr;
    *len_p = u->addr_len;
    return FLUXON_OK;
}

FX_INTERNAL int fx_ucx_mem_map(fx_ucx_t *u, void *base, uint64_t len, fx_ucx_mem_t **m_p)
{
    if (!u || !base || !len || !m_p || (uint64_t)(uintptr_t)base + len < len)
        return FLUXON_ERR_INVALID_ARGUMENT;
    fx_ucx_mem_t *m = fx_calloc(1, sizeof *m);
    if (!m) return FLUXON_ERR_NOMEM;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = base,
        .length = len,
    };
    ucs_status_t st = ucp_mem_map(u->ctx, &mp, &m->memh);
    if (st != UCS_OK) {
        FX_ERROR("ucx: ucp_mem_map of %llu bytes: %s", (unsigned long long)len,
                 ucs_status_string(st));
        fx_free(m);
        return st == UCS_ERR_NO_MEMORY ? FLUXON_ERR_NOMEM : FLUXON_ERR_INTERNAL;
    }
    m->u = u;
    m->base = (uint64_t)(uintptr_t)base;
    m->len = len;
    m->next = u->mems;
    if (u->mems) u->mems->prev = m;
    u->mems = m;
    *m_p = m;
    return FLUXON_OK;
}

FX_INTERNAL int fx_ucx_rkey_pack(fx_ucx_mem_t *m, void **buf_p, size_t *len_p)
{
    if (!m || !buf_p || !len_p) return FLUXON_ERR_INVALID_ARGUMENT;
    void *buf = NULL;
    size_t len = 0;
    ucs_status_t st = ucp_rkey_pack(m->u->ctx, m->memh, &buf, &len);
    if (st != UCS_OK) {
        FX_ERROR("ucx: ucp_rkey_pack: %s", ucs_status_string(st));
        return st == UCS_ERR_NO_MEMORY ? FLUXON_ERR_NOMEM : FLUXON_ERR_INTERNAL;
    }
    *buf_p = buf;
    *len_p = len;
    return FLUXON_OK;
}

FX_INTERNAL void fx_ucx_buf_free(void *buf)
{
    if (buf) ucp_rkey_buffer_release(buf);
}

FX_INTERNAL void fx_ucx_mem_unmap(fx_ucx_mem_t *m)
{
    if (!m) return;
    fx_ucx_t *u = m->u;
    if (m->prev) m->prev->next = m->next; else u->mems = m->next;
    if (m->next) m->next->prev = m->prev;
    m->prev = NULL;
    /* Requests that UCX has not retired yet (cancelled transfers of a peer closed just
     * before) may still name the registration: release it once they are gone. The
     * region already stops being a valid AM target here. */
    if (fx_ucxdp_memh_in_use(u, m->memh)) {
        m->next = u->dead_mems;
        u->dead_mems = m;
        return;
    }
    ucxdp_mem_release(m);
}

/* UCX 1.13 has no ucp_ep_query, so the endpoint dump is read: each "lane[N]:  K:tl/dev
 * ... flags" line names a lane's transport, and "rma_bw#" marks a zero-copy rendezvous
 * lane. Policy (see the measurements at the top of this file):
 *  - an RDMA lane (rc*, dc*): RMA, native one-sided zero-copy;
 *  - a zero-copy rendezvous lane (cma, knem, xpmem) or tcp: AM. User RMA on memory the
 *    application registered cannot use cma in UCX 1.13 (its RMA lanes are the posix/sysv
 *    ones, usable only for memory UCX allocated), so it is emulated; rendezvous is not;
 *  - otherwise (posix/sysv/self only): RMA, whose emulation over the shm FIFO beats
 *    rendezvous pipelined over the same FIFO. */
static fx_ucx_mech_t ucxdp_detect_mech(ucp_ep_h ep)
{
    char *buf = NULL;
    size_t sz = 0;
    FILE *f = open_memstream(&buf, &sz);
    if (!f) return FX_UCX_MECH_RMA;
    ucp_ep_print_info(ep, f);
    fclose(f);
    bool rdma = false, am_better = false;
    char *next;
    for (char *line = buf; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *c = strstr(line, "lane[");
        if (!c || !(c = strchr(c, ':'))) continue;
        c += strspn(c + 1, " ") + 1;
        c += strspn(c, "0123456789");
        if (*c == ':') c++;
        size_t tl = strcspn(c, "/ ");
        if (tl >= 2 && (strncmp(c, "rc", 2) == 0 || strncmp(c, "dc", 2) == 0)) rdma = true;
        if ((tl == 3 && strncmp(c, "tcp", 3) == 0) || strstr(c, " rma_bw#")) am_better = true;
    }
    free(buf); /* open_memstream allocates with libc malloc */
    return rdma || !am_better ? FX_UCX_MECH_RMA : FX_UCX_MECH_AM;
}

/* p's endpoint (error handling PEER, else NONE where only that reaches it) and rkey. On an
 * error p->ep is NULL when the endpoint could not be made, else the rkey is missing. */
static int ucxdp_peer_open(fx_ucx_peer_t *p, const void *worker_addr, const void *rkey_buf, size_t rkey_len)
{
    fx_ucx_t *u = p->u;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = worker_addr,
        .err_mode = p->err_peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
        .err_handler = {.cb = ucxdp_ep_err_cb, .arg = p},
    };
    ucs_status_t st = ucp_ep_create(u->worker, &ep, &p->ep);
    if (st == UCS_ERR_UNREACHABLE && p->err_peer) {
        /* Only transports without failure detection reach it (shm in UCX 1.13). */
        FX_INFO("ucx: peer reachable only without peer failure handling; relying on "
                "transfer timeouts");
        p->err_peer = 0;
        ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
        st = ucp_ep_create(u->worker, &ep, &p->ep);
    }
    if (st != UCS_OK) {
        FX_ERROR("ucx: ucp_ep_create: %s", ucs_status_string(st));
        p->ep = NULL;
        return st == UCS_ERR_UNREACHABLE ? FLUXON_ERR_UNAVAILABLE : ucxdp_map_init(st);
    }
    st = ucp_ep_rkey_unpack(p->ep, rkey_buf, &p->rkey);
    if (st != UCS_OK) {
        FX_ERROR("ucx: ucp_ep_rkey_unpack (%zu bytes): %s", rkey_len, ucs_status_string(st));
        p->rkey = NULL;
        return st == UCS_ERR_NO_MEMORY ? FLUXON_ERR_NOMEM : FLUXON_ERR_PROTOCOL;
    }
    p->mech = (uint8_t)(u->mech != FX_UCX_MECH_AUTO ? u->mech : ucxdp_detect_mech(p->ep));
    return FLUXON_OK;
}

static fx_ucx_peer_t *ucxdp_peer_new(fx_ucx_t *u, uint64_t remote_base)
{
    fx_ucx_peer_t *p = fx_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->u = u;
    p->remote_base = remote_base;
    p->err_peer = !u->shm_only;
    return p;
}

static void ucxdp_peer_link(fx_ucx_peer_t *p)
{
    fx_ucx_t *u = p->u;
    p->next = u->peers;
    if (u->peers) u->peers->prev = p;
    u->peers = p;
}

FX_INTERNAL int fx_ucx_peer_connect(fx_ucx_t *u, const void *worker_addr, size_t addr_len,
                                    const void *rkey_buf, size_t rkey_len,
                                    uint64_t remote_base, fx_ucx_peer_t **p_p)
{
    if (!u || !worker_addr || !addr_len || !rkey_buf || !rkey_len || !p_p)
        return FLUXON_ERR_INVALID_ARGUMENT;
    if (u->destroying) return FLUXON_ERR_CANCELLED;
    fx_ucx_peer_t *p = ucxdp_peer_new(u, remote_base);
    if (!p) return FLUXON_ERR_NOMEM;
    int rc = ucxdp_peer_open(p, worker_addr, rkey_buf, rkey_len);
    if (!p->ep) {
        fx_free(p);
        return rc;
    }
    ucxdp_peer_link(p);
    if (rc != FLUXON_OK) { /* the rkey */
        p->status = FLUXON_ERR_PROTOCOL;
        p->user_closed = 1;
        ucxdp_peer_shutdown(p);
        ucxdp_peer_retire(p, fx_now_ns());
        return rc;
    }
    FX_DEBUG("ucx: peer connected (mechanism %s, error handling %s)",
             fx_ucx_peer_mech_name(p), p->err_peer ? "peer" : "none");
    *p_p = p;
    return FLUXON_OK;
}

FX_INTERNAL int fx_ucx_peer_connect_mapped(fx_ucx_t *u, const void *worker_addr, size_t addr_len,
                                           const void *rkey_buf, size_t rkey_len, uint64_t remote_base,
                                           void *local, uint64_t local_len, fx_ucx_peer_t **p_p)
{
    if (!u || !worker_addr || !addr_len || !rkey_buf || !rkey_len || !local || !local_len || !p_p)
        return FLUXON_ERR_INVALID_ARGUMENT;
    if (u->destroying) return FLUXON_ERR_CANCELLED;
    fx_ucx_peer_t *p = ucxdp_peer_new(u, remote_base);
    if (!p) return FLUXON_ERR_NOMEM;
    p->lazy_addr = fx_malloc(addr_len);
    p->lazy_rkey = fx_malloc(rkey_len);
    if (!p->lazy_addr || !p->lazy_rkey) {
        fx_free(p->lazy_addr);
        fx_free(p->lazy_rkey);
        fx_free(p);
        return FLUXON_ERR_NOMEM;
    }
    memcpy(p->lazy_addr, worker_addr, addr_len);
    memcpy(p->lazy_rkey, rkey_buf, rkey_len);
    p->lazy_rkey_len = rkey_len;
    p->local = local;
    p->local_len = local_len;
    ucxdp_peer_link(p);
    *p_p = p;
    return FLUXON_OK;
}

FX_INTERNAL int fx_ucxdp_peer_open_lazy(fx_ucx_peer_t *p)
{
    if (p->ep) return FLUXON_OK;
    if (!p->lazy_addr) return FLUXON_ERR_UNAVAILABLE;
    int rc = ucxdp_peer_open(p, p->lazy_addr, p->lazy_rkey, p->lazy_rkey_len);
    if (rc != FLUXON_OK && p->status == FLUXON_OK) /* the next transfer to its owner connects afresh */
        p->status = rc == FLUXON_ERR_NOMEM ? FLUXON_ERR_UNAVAILABLE : rc;
    return rc;
}

FX_INTERNAL size_t fx_ucx_peer_fail(fx_ucx_peer_t *p)
{
    if (!p || p->status != FLUXON_OK) return 0;
    fx_ucx_t *u = p->u;
    uint64_t now = fx_now_ns();
    size_t n = 0;
    for (ucxdp_xfer_t *x = u->live_head; x; x = x->next)
        if (x->peer == p && !x->timed_out) {
            x->deadline_ns = FX_MIN(x->deadline_ns, now); /* the reap reports them as timed out */
            n++;
        }
    p->status = FLUXON_ERR_UNAVAILABLE;
    u->need_reap = true;
    return n;
}

FX_INTERNAL void fx_ucx_peer_close(fx_ucx_peer_t *p)
{
    if (!p || p->user_closed) return;
    p->user_closed = 1;
    if (!p->closing) {
        if (p->status == FLUXON_OK) p->status = FLUXON_ERR_CANCELLED;
        ucxdp_peer_shutdown(p);
    }
    ucxdp_peer_retire(p, fx_now_ns());
}

FX_INTERNAL int fx_ucx_peer_status(const fx_ucx_peer_t *p)
{
    return p ? p->status : FLUXON_ERR_INVALID_ARGUMENT;
}

FX_INTERNAL const char *fx_ucx_peer_mech_name(const fx_ucx_peer_t *p)
{
    return p && p->local ? "local" : p && p->mech == FX_UCX_MECH_AM ? "am" : "rma";
}

#undef UCXDP_PROGRESS_ROUNDS
#undef UCXDP_NS_PER_MS
#undef UCXDP_CLOSE_WAIT_NS
#undef UCXDP_ORPHAN_GRACE_NS
#undef UCXDP_DESTROY_WAIT_NS
