/* cli_replay.c — `fluxon demo`: plays an inference engine over a Mooncake trace through
 * the hostless API (get_start → get_transfer → restore + verify → release_views; missed
 * suffix → local_fast_put_start → fill → commit → future). Workers are threads of this
 * process, each with its own fluxon_client; static helpers are rp_*. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli_replay.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_trace.h"
#include "fluxon.h"

#define RP_EXIT_USAGE 2
#define RP_MAX_OWNERS 16
#define RP_MAX_WORKERS_PER_OWNER 64
#define RP_FUTURES_MAX 256          /* committed futures not yet collected (bounds fds) */
#define RP_FUTURE_TIMEOUT_MS 30000  /* a future pending longer is counted timed out */
#define RP_STALL_MS 120000          /* one request running this long: stop the run */
#define RP_JOIN_MS 60000            /* bound on joining a worker or the collector */
#define RP_BASELINE_MS 5000         /* counters must be back to baseline within this */
#define RP_STATS_CAP (64u << 10)
#define RP_NSTATUS 20               /* index -status for FLUXON_OK..-18, 19 = other */
#define RP_MAX_LOGGED_ERRORS 10

/* the options of every backup put (both reject flags are always on for this path) */
#define RP_PUT_FIELDS \
    (FLUXON_PUT_OPT_REJECT_IF_INFLIGHT | FLUXON_PUT_OPT_REJECT_IF_EXIST | FLUXON_PUT_OPT_ATOMIC_GROUPS)

enum rp_call {
    RP_C_GET_START, RP_C_GET_TRANSFER, RP_C_RELEASE, RP_C_CANCEL, RP_C_PUT_START,
    RP_C_PUT_COMMIT, RP_C_PUT_ABORT, RP_C_FUTURE, RP_C_REQUEST, RP_NCALLS
};
static const char *const rp_call_names[RP_NCALLS] = {
    "get_start", "get_transfer", "release_views", "cancel_get_transfer", "put_start",
    "put_commit", "put_abort", "future", "request"};

static volatile sig_atomic_t rp_interrupted;

typedef struct rp_opts {
    const char *trace;
    size_t requests;          /* 0 = all */
    uint64_t value_len;
    unsigned workers, owners, tp, group_pages;
    double speed;             /* 0 = as fast as possible */
    const char *out_dir;
    int skip_bad_lines;
    uint64_t capacity_blocks; /* 0 = size for the run */
    const char *configs[RP_MAX_OWNERS];
    unsigned n_configs;
    const char *key_prefix;
} rp_opts;

typedef struct rp_samples {
    uint64_t *v;              /* nanoseconds */
    size_t n, cap;
} rp_samples;

/* One per request, written by the worker that played it. */
typedef struct rp_reqrec {
    uint64_t t_done_ns;       /* since the run started */
    uint64_t lat_ns, get_start_ns, put_start_ns;
    uint32_t pages, hits;
    uint64_t bytes_restored, bytes_written;
    int done;
} rp_reqrec;

typedef struct rp_fut {
    fluxon_future *f;
    uint64_t t_commit_ns;
    struct rp_fut *next;
} rp_fut;

/* Collects committed futures off the workers' path: polls their fds and records the
 * completion latency; a future pending past RP_FUTURE_TIMEOUT_MS is given up. */
typedef struct rp_collector {
    pthread_mutex_t mu;
    pthread_cond_t cv_space, cv_work;
    rp_fut *head, *tail;      /* guarded by mu: handed over by workers */
    size_t inflight;          /* guarded by mu: queued + held by the collector */
    int closing;              /* guarded by mu: no more futures will come */
    pthread_t thread;
    int started;
    /* collector thread only; read after it is joined */
    rp_samples lat;
    uint64_t completed, failed, timed_out;
    uint64_t refused;         /* batches refused at publish (KEY_EXISTS ...): skipped */
    uint64_t fail_by[RP_NSTATUS], refused_by[RP_NSTATUS];
} rp_collector;

struct rp_run;

typedef struct rp_worker {
    struct rp_run *run;
    unsigned id, owner;
    fluxon_client *client;
    pthread_t thread;
    int started, joined;
    _Atomic uint64_t busy_since_ns; /* start of the request in play, 0 between requests */
    /* scratch sized for the largest request */
    size_t max_keys;
    uint64_t *page_hash;
    char *keybuf;             /* max_keys × FX_CLI_KEY_MAX */
    const char **keys;
    size_t *klen;
    uint32_t *glens;
    int *kstatus;
    unsigned char *kv;        /* the simulated GPU KV buffer: max_keys × value_len */
    /* results, read after the worker is joined */
    rp_samples lat[RP_NCALLS];
    uint64_t errors_by[RP_NSTATUS], skipped_by[RP_NSTATUS];
    uint64_t raw_hits, contract_violations;
} rp_worker;

typedef struct rp_owner_stats {
    uint64_t remote_hits_before, remote_hits_after;
    int remote_hits_known;
    uint64_t handles_open, slots_prepared, gets_inflight, puts_inflight;
    uint64_t before[4];       /* the same four before the run (0 on a fresh cluster) */
    /* capacity eviction (issue 7), after the run; ev_known: the owner reports them */
    uint64_t evictions, evicted_bytes, cohorts, busy_retries, restored, eviction_debt, hot_bytes,
        hot_capacity_bytes, claim_waits, claim_timeouts;
    int ev_known;
    unsigned absent_mask;     /* bit i: baseline key i absent from the stats */
    int stats_ok;
} rp_owner_stats;

typedef struct rp_run {
    rp_opts o;
    fx_cli_trace trace;
    size_t n_req;
    rp_reqrec *recs;
    uint64_t ref_hits, ref_lookups, distinct_pages;
    uint64_t lru_ref_hits;    /* the reference LRU of capacity_blocks pages (when given) */
    rp_worker *workers;
    unsigned n_workers, n_owners;
    rp_collector col;
    uint64_t t_start_ns, t_end_ns;
    _Atomic size_t next_req;
    _Atomic int stop;
    /* progress, relaxed: exact totals are summed from the workers at the end */
    _Atomic uint64_t done, lookups, hits, errors, checksum_failures, skipped,
        bytes_restored, bytes_written;
    _Atomic unsigned logged_errors;
    rp_owner_stats owners[RP_MAX_OWNERS];
    uint64_t segment_bytes, grant_bytes;
} rp_run;

static const char *const rp_baseline_keys[4] = {"handles_open", "slots_prepared",
                                                "gets_inflight", "puts_inflight"};

/* ---------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------- */

static uint64_t rp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void rp_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int rp_status_index(int st)
{
    return st <= 0 && st > -(RP_NSTATUS - 1) ? -st : RP_NSTATUS - 1;
}

static void rp_samples_push(rp_samples *s, uint64_t ns)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1024;
        uint64_t *nv = realloc(s->v, nc * sizeof *nv);
        if (!nv) return; /* a lost sample only thins the percentiles */
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = ns;
}

static int rp_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* nearest-rank percentile of sorted v[n], p in [0, 100]; 0 when empty */
static uint64_t rp_pct(const uint64_t *v, size_t n, double p)
{
    if (n == 0) return 0;
    double r = ceil(p / 100.0 * (double)n);
    size_t i = r < 1 ? 0 : (size_t)r - 1;
    return v[i < n ? i : n - 1];
}

static int rp_is_capacity_outcome(int st)
{
    return st == FLUXON_ERR_NO_SPACE || st == FLUXON_ERR_KEY_EXISTS ||
           st == FLUXON_ERR_KEY_BEING_WRITTEN || st == FLUXON_ERR_GROUP_REJECTED;
}

static void rp_log_error(rp_run *r, size_t req, const char *what, int st)
{
    atomic_fetch_add_explicit(&r->errors, 1, memory_order_relaxed);
    unsigned n = atomic_fetch_add_explicit(&r->logged_errors, 1, memory_order_relaxed);
    if (n < RP_MAX_LOGGED_ERRORS)
        fprintf(stderr, "\nfluxon demo: request %zu (trace line %zu): %s: %s\n", req,
                r->trace.reqs[req].line, what, st ? fluxon_status_string(st) : "contract violation");
    else if (n == RP_MAX_LOGGED_ERRORS)
        fprintf(stderr, "\nfluxon demo: more errors; counts in the summary\n");
}

static void rp_worker_error(rp_worker *w, size_t req, const char *what, int st)
{
    if (st == 0) w->contract_violations++;
    else w->errors_by[rp_status_index(st)]++;
    rp_log_error(w->run, req, what, st);
}

/* ---------------------------------------------------------------------------------
 * Future collector
 * ------------------------------------------------------------------------------- */

/* Hands a committed future to the collector; waits (bounded steps) while
 * RP_FUTURES_MAX are in flight. The collector bounds each future's life, so the
 * wait ends. */
static void rp_collector_add(rp_collector *c, fluxon_future *f, uint64_t t_commit_ns)
{
    rp_fut *e = malloc(sizeof *e);
    if (!e) { /* no memory to track it: wait for it here, bounded */
        fluxon_future_wait(f, RP_FUTURE_TIMEOUT_MS);
        fluxon_future_free(f);
        return;
    }
    *e = (rp_fut){.f = f, .t_commit_ns = t_commit_ns};
    pthread_mutex_lock(&c->mu);
    while (c->inflight >= RP_FUTURES_MAX) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 100000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&c->cv_space, &c->mu, &dl);
    }
    if (c->tail) c->tail->next = e;
    else c->head = e;
    c->tail = e;
    c->inflight++;
    pthread_cond_signal(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
}

static void rp_collector_done(rp_collector *c, rp_fut *e, int st, uint64_t now)
{
    if (st == FLUXON_OK) {
        c->completed++;
        rp_samples_push(&c->lat, now - e->t_commit_ns);
    } else if (rp_is_capacity_outcome(st)) {
        /* a global conflict found when the master published (another owner put the
         * same key first): a skipped backup, as when put_start refuses it */
        c->refused++;
        c->refused_by[rp_status_index(st)]++;
    } else {
        c->failed++;
        c->fail_by[rp_status_index(st)]++;
    }
    fluxon_future_free(e->f);
    free(e);
}

static void *rp_collector_main(void *arg)
{
    rp_collector *c = arg;
    rp_fut *pend[RP_FUTURES_MAX];
    struct pollfd pfd[RP_FUTURES_MAX];
    size_t n = 0;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        if (n == 0 && !c->head && !c->closing) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_nsec += 50000000L;
            if (dl.tv_nsec >= 1000000000L) {
                dl.tv_sec++;
                dl.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&c->cv_work, &c->mu, &dl);
        }
        while (c->head && n < RP_FUTURES_MAX) {
            rp_fut *e = c->head;
            c->head = e->next;
            if (!c->head) c->tail = NULL;
            e->next = NULL;
            pend[n++] = e;
        }
        int closing = c->closing && !c->head;
        pthread_mutex_unlock(&c->mu);
        if (n == 0) {
            if (closing) break;
            continue;
        }
        size_t np = 0, no_fd = 0;
        for (size_t i = 0; i < n; i++) {
            int fd = fluxon_future_fd(pend[i]->f);
            if (fd < 0) {
                no_fd++;
                continue;
            }
            pfd[np++] = (struct pollfd){.fd = fd, .events = POLLIN};
        }
        /* futures without an fd are polled every millisecond */
        if (np) poll(pfd, np, no_fd ? 1 : 20);
        else rp_sleep_ms(1);
        uint64_t now = rp_now_ns();
        size_t removed = 0, k = 0;
        for (size_t i = 0; i < n; i++) {
            int st = fluxon_future_poll(pend[i]->f);
            if (st != FLUXON_IN_PROGRESS) {
                rp_collector_done(c, pend[i], st, now);
                removed++;
            } else if (now - pend[i]->t_commit_ns > (uint64_t)RP_FUTURE_TIMEOUT_MS * 1000000ull) {
                c->timed_out++;
                fluxon_future_free(pend[i]->f);
                free(pend[i]);
                removed++;
            } else {
                pend[k++] = pend[i];
            }
        }
        n = k;
        if (removed) {
            pthread_mutex_lock(&c->mu);
            c->inflight -= removed;
            pthread_cond_broadcast(&c->cv_space);
            pthread_mutex_unlock(&c->mu);
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------
 * One request, as an engine plays it
 * ------------------------------------------------------------------------------- */

/* Builds the keys of pages [0, np) (page-major, TP ranks inside a page); 0 or -1. */
static int rp_build_keys(rp_worker *w, const fx_cli_trace_req *q)
{
    const rp_opts *o = &w->run->o;
    fx_cli_chain_hashes(q->blocks, q->n_blocks, w->page_hash);
    for (size_t p = 0; p < q->n_blocks; p++)
        for (unsigned rk = 0; rk < o->tp; rk++) {
            size_t k = p * o->tp + rk;
            char *buf = w->keybuf + k * FX_CLI_KEY_MAX;
            int len = fx_cli_page_key(buf, FX_CLI_KEY_MAX, o->key_prefix, w->page_hash[p], rk, o->tp);
            if (len < 0) return -1;
            w->keys[k] = buf;
            w->klen[k] = (size_t)len;
        }
    return 0;
}

/* Group lengths (in keys) for pages [first_page, np): G pages × T ranks, last shorter. */
static size_t rp_groups(rp_worker *w, size_t first_page, size_t np)
{
    const rp_opts *o = &w->run->o;
    size_t ng = 0;
    for (size_t p = first_page; p < np; p += o->group_pages) {
        size_t pages = np - p < o->group_pages ? np - p : o->group_pages;
        w->glens[ng++] = (uint32_t)(pages * o->tp);
    }
    return ng;
}

/* Restores the transferable prefix; returns the number of keys consumed. */
static uint64_t rp_restore(rp_worker *w, size_t req, fluxon_get_handle *h, uint64_t transferable,
                           rp_reqrec *rec)
{
    rp_run *r = w->run;
    fluxon_client *c = w->client;
    uint64_t vlen = r->o.value_len;
    fluxon_plan *plan = NULL;
    uint64_t t0 = rp_now_ns();
    int rc = fluxon_get_transfer(c, h, 0, &plan);
    rp_samples_push(&w->lat[RP_C_GET_TRANSFER], rp_now_ns() - t0);
    if (rc != FLUXON_OK) {
        rp_worker_error(w, req, "get_transfer", rc);
        if (rc == FLUXON_ERR_INVALID_ARGUMENT) { /* the handle is still ours (§8) */
            t0 = rp_now_ns();
            int crc = fluxon_cancel_get_transfer(c, h);
            rp_samples_push(&w->lat[RP_C_CANCEL], rp_now_ns() - t0);
            if (crc != FLUXON_OK) rp_worker_error(w, req, "cancel_get_transfer", crc);
        }
        return 0;
    }
    uint64_t n = plan->count;
    if (n != transferable) {
        rp_worker_error(w, req, "get_transfer: plan count differs from transferable_len", 0);
        if (n > transferable) n = transferable;
    }
    uint64_t good = 0;
    for (uint64_t j = 0; j < n; j++) {
        const void *src = (const void *)(uintptr_t)plan->value_ptrs[j];
        if (!src) {
            rp_worker_error(w, req, "get_transfer: NULL value pointer in the read plan", 0);
            break;
        }
        unsigned char *dst = w->kv + j * vlen;
        memcpy(dst, src, vlen);
        int64_t off = fx_cli_value_check(dst, vlen, w->keys[j], w->klen[j]);
        if (off >= 0) {
            uint64_t nf = atomic_fetch_add_explicit(&r->checksum_failures, 1, memory_order_relaxed);
            if (nf < RP_MAX_LOGGED_ERRORS)
                fprintf(stderr, "\nfluxon demo: request %zu: CHECKSUM FAILURE on %s at byte %lld\n", req,
                        w->keys[j], (long long)off);
        }
        good++;
    }
    t0 = rp_now_ns();
    rc = fluxon_release_views(c, plan);
    rp_samples_push(&w->lat[RP_C_RELEASE], rp_now_ns() - t0);
    if (rc != FLUXON_OK) rp_worker_error(w, req, "release_views", rc);
    rec->bytes_restored = good * vlen;
    return good;
}

/* Writes keys [first, nk) back as a fast local put; counts refused keys as skipped. */
static void rp_backup(rp_worker *w, size_t req, size_t first_page, size_t np, rp_reqrec *rec)
{
    rp_run *r = w->run;
    const rp_opts *o = &r->o;
    fluxon_client *c = w->client;
    size_t first = first_page * o->tp, n = np * o->tp - first;
    size_t ng = rp_groups(w, first_page, np);
    fluxon_put_options opts = {.field_mask = RP_PUT_FIELDS,
                               .reject_if_inflight_same_key = 1,
                               .reject_if_exist_same_key = 1,
                               .atomic_group_lens = w->glens,
                               .n_atomic_groups = ng};
    for (size_t i = 0; i < n; i++) w->kstatus[i] = FLUXON_IN_PROGRESS; /* = not reported */
    fluxon_plan *plan = NULL;
    uint64_t t0 = rp_now_ns();
    int rc = fluxon_local_fast_put_start(c, w->keys + first, n, o->value_len, &opts, &plan, w->kstatus);
    uint64_t dt = rp_now_ns() - t0;
    rp_samples_push(&w->lat[RP_C_PUT_START], dt);
    rec->put_start_ns = dt;
    if (rc != FLUXON_OK) {
        if (rp_is_capacity_outcome(rc)) {
            w->skipped_by[rp_status_index(rc)] += n;
            atomic_fetch_add_explicit(&r->skipped, n, memory_order_relaxed);
        } else {
            rp_worker_error(w, req, "local_fast_put_start", rc);
        }
        return;
    }
    size_t accepted = 0, cnt = plan->count < n ? (size_t)plan->count : n;
    if (plan->count != n) rp_worker_error(w, req, "local_fast_put_start: plan count differs from n_keys", 0);
    for (size_t i = 0; i < cnt; i++) {
        void *dst = (void *)(uintptr_t)plan->value_ptrs[i];
        if (dst) {
            fx_cli_value_fill(dst, o->value_len, w->keys[first + i], w->klen[first + i]);
            accepted++;
            continue;
        }
        int st = w->kstatus[i];
        if (rp_is_capacity_outcome(st)) {
            w->skipped_by[rp_status_index(st)]++;
            atomic_fetch_add_explicit(&r->skipped, 1, memory_order_relaxed);
        } else {
            rp_worker_error(w, req, "local_fast_put_start: key refused without a capacity status",
                            st == FLUXON_OK || st == FLUXON_IN_PROGRESS ? 0 : st);
        }
    }
    if (accepted == 0) { /* nothing to publish: give the plan back */
        t0 = rp_now_ns();
        rc = fluxon_put_abort(c, plan);
        rp_samples_push(&w->lat[RP_C_PUT_ABORT], rp_now_ns() - t0);
        if (rc != FLUXON_OK) rp_worker_error(w, req, "put_abort", rc);
        return;
    }
    fluxon_future *fut = NULL;
    t0 = rp_now_ns();
    rc = fluxon_local_fast_put_commit(c, plan, &fut);
    uint64_t t1 = rp_now_ns();
    rp_samples_push(&w->lat[RP_C_PUT_COMMIT], t1 - t0);
    if (rc != FLUXON_OK) {
        rp_worker_error(w, req, "local_fast_put_commit", rc);
        /* plans are checked against the client's registry (§8): aborting one the failed
         * commit already consumed is refused, not undefined */
        int arc = fluxon_put_abort(c, plan);
        if (arc != FLUXON_OK && arc != FLUXON_ERR_WRONG_HANDLE) rp_worker_error(w, req, "put_abort", arc);
        return;
    }
    rec->bytes_written = accepted * o->value_len;
    if (fut) rp_collector_add(&r->col, fut, t1);
}

static void rp_play(rp_worker *w, size_t req)
{
    rp_run *r = w->run;
    const rp_opts *o = &r->o;
    const fx_cli_trace_req *q = &r->trace.reqs[req];
    rp_reqrec *rec = &r->recs[req];
    size_t np = q->n_blocks, nk = np * o->tp;
    uint64_t t_req = rp_now_ns();
    rec->pages = (uint32_t)np;
    if (np > 0 && rp_build_keys(w, q) == 0) {
        size_t ng = rp_groups(w, 0, np);
        fluxon_get_handle *h = NULL;
        fluxon_get_start_result res;
        memset(&res, 0, sizeof res);
        uint64_t t0 = rp_now_ns();
        int rc = fluxon_get_start(w->client, w->keys, nk, 1, w->glens, ng, &h, &res);
        uint64_t dt = rp_now_ns() - t0;
        rp_samples_push(&w->lat[RP_C_GET_START], dt);
        rec->get_start_ns = dt;
        uint64_t consumed = 0;
        if (rc != FLUXON_OK) {
            rp_worker_error(w, req, "get_start", rc);
        } else {
            uint64_t tl = res.transferable_len, gk = (uint64_t)o->group_pages * o->tp;
            if (tl > nk || res.raw_prefix_hit_len > nk || tl > res.raw_prefix_hit_len ||
                (tl != nk && tl % gk != 0)) {
                rp_worker_error(w, req, "get_start: transferable_len not on a group boundary", 0);
                if (tl > nk) tl = nk;
                tl -= tl % o->tp;
            }
            w->raw_hits += res.raw_prefix_hit_len / o->tp;
            if (tl > 0 && h) {
                consumed = rp_restore(w, req, h, tl, rec);
            } else if (h) {
                t0 = rp_now_ns();
                int crc = fluxon_cancel_get_transfer(w->client, h);
                rp_samples_push(&w->lat[RP_C_CANCEL], rp_now_ns() - t0);
                if (crc != FLUXON_OK) rp_worker_error(w, req, "cancel_get_transfer", crc);
            }
        }
        size_t hit_pages = (size_t)(consumed / o->tp);
        rec->hits = (uint32_t)hit_pages;
        /* the engine computed the rest and backs it up: from the first page not
         * restored (a group boundary) to the end */
        if (hit_pages < np) rp_backup(w, req, hit_pages, np, rec);
    } else if (np > 0) {
        rp_worker_error(w, req, "key does not fit FX_CLI_KEY_MAX (--key-prefix too long)", FLUXON_ERR_INVALID_ARGUMENT);
    }
    uint64_t t_end = rp_now_ns();
    rec->lat_ns = t_end - t_req;
    rec->t_done_ns = t_end - r->t_start_ns;
    rec->done = 1;
    rp_samples_push(&w->lat[RP_C_REQUEST], t_end - t_req);
    atomic_fetch_add_explicit(&r->lookups, np, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->hits, rec->hits, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->bytes_restored, rec->bytes_restored, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->bytes_written, rec->bytes_written, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->done, 1, memory_order_release);
}

/* Waits until request req's time at --speed X; returns -1 when the run stops. */
static int rp_pace(rp_run *r, size_t req)
{
    if (r->o.speed <= 0) return 0;
    uint64_t ts0 = r->trace.reqs[0].timestamp_ms, ts = r->trace.reqs[req].timestamp_ms;
    if (ts <= ts0) return 0;
    uint64_t due = r->t_start_ns + (uint64_t)((double)(ts - ts0) * 1e6 / r->o.speed);
    for (;;) {
        if (atomic_load_explicit(&r->stop, memory_order_relaxed) || rp_interrupted) return -1;
        uint64_t now = rp_now_ns();
        if (now >= due) return 0;
        uint64_t left_ms = (due - now) / 1000000ull;
        if (left_ms >= 100) {
            rp_sleep_ms(100);
        } else {
            struct timespec ts2 = {.tv_sec = 0, .tv_nsec = (long)(due - now)};
            nanosleep(&ts2, NULL);
        }
    }
}

static void *rp_worker_main(void *arg)
{
    rp_worker *w = arg;
    rp_run *r = w->run;
    for (;;) {
        if (atomic_load_explicit(&r->stop, memory_order_relaxed) || rp_interrupted) break;
        size_t req = atomic_fetch_add_explicit(&r->next_req, 1, memory_order_relaxed);
        if (req >= r->n_req) break;
        if (rp_pace(r, req)) break;
        atomic_store_explicit(&w->busy_since_ns, rp_now_ns(), memory_order_relaxed);
        rp_play(w, req);
        atomic_store_explicit(&w->busy_since_ns, 0, memory_order_relaxed);
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------
 * Owner counters (fluxon_client_stats)
 * ------------------------------------------------------------------------------- */

/* The number under key: in "owner" first, then anywhere (depth-first). */
static const cJSON *rp_json_find(const cJSON *node, const char *key)
{
    if (!node || !(cJSON_IsObject(node) || cJSON_IsArray(node))) return NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, node)
    {
        if (it->string && strcmp(it->string, key) == 0 && cJSON_IsNumber(it)) return it;
    }
    cJSON_ArrayForEach(it, node)
    {
        const cJSON *f = rp_json_find(it, key);
        if (f) return f;
    }
    return NULL;
}

static int rp_stat_u64(const cJSON *doc, const char *key, uint64_t *out)
{
    const cJSON *v = rp_json_find(cJSON_GetObjectItemCaseSensitive(doc, "owner"), key);
    if (!v) v = rp_json_find(doc, key);
    if (!v) {
        *out = 0;
        return 0;
    }
    *out = v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
    return 1;
}

static cJSON *rp_client_stats(fluxon_client *c)
{
    size_t cap = RP_STATS_CAP, len = 0;
    char *buf = malloc(cap);
    int rc = buf ? fluxon_client_stats(c, buf, cap, &len) : FLUXON_ERR_NOMEM;
    if (rc == FLUXON_ERR_INVALID_ARGUMENT && buf && len >= cap) {
        char *nb = realloc(buf, len + 1);
        if (nb) {
            buf = nb;
            rc = fluxon_client_stats(c, buf, len + 1, &len);
        }
    }
    cJSON *doc = rc == FLUXON_OK ? cJSON_Parse(buf) : NULL;
    if (rc != FLUXON_OK) fprintf(stderr, "fluxon demo: fluxon_client_stats: %s\n", fluxon_status_string(rc));
    free(buf);
    return doc;
}

/* The first worker of owner k carries that owner's stats queries. */
static fluxon_client *rp_owner_client(rp_run *r, unsigned k)
{
    for (unsigned i = 0; i < r->n_workers; i++)
        if (r->workers[i].owner == k && r->workers[i].client) return r->workers[i].client;
    return NULL;
}

static void rp_stats_before(rp_run *r)
{
    for (unsigned k = 0; k < r->n_owners; k++) {
        cJSON *doc = rp_client_stats(rp_owner_client(r, k));
        rp_owner_stats *s = &r->owners[k];
        if (doc) {
            s->remote_hits_known = rp_stat_u64(doc, "remote_hits", &s->remote_hits_before);
            for (int i = 0; i < 4; i++) rp_stat_u64(doc, rp_baseline_keys[i], &s->before[i]);
        }
        cJSON_Delete(doc);
    }
}

/* R1: polls every owner's counters until all four are back to their values before the
 * run (0 on the embedded cluster) or RP_BASELINE_MS passed. */
static int rp_stats_after(rp_run *r)
{
    uint64_t deadline = rp_now_ns() + (uint64_t)RP_BASELINE_MS * 1000000ull;
    int ok;
    do {
        ok = 1;
        for (unsigned k = 0; k < r->n_owners; k++) {
            rp_owner_stats *s = &r->owners[k];
            cJSON *doc = rp_client_stats(rp_owner_client(r, k));
            s->stats_ok = doc != NULL;
            if (!doc) {
                ok = 0;
                continue;
            }
            uint64_t *vals[4] = {&s->handles_open, &s->slots_prepared, &s->gets_inflight, &s->puts_inflight};
            s->absent_mask = 0;
            for (int i = 0; i < 4; i++) {
                if (!rp_stat_u64(doc, rp_baseline_keys[i], vals[i])) s->absent_mask |= 1u << i;
                if (*vals[i] > s->before[i]) ok = 0;
            }
            uint64_t rh = 0;
            int known = rp_stat_u64(doc, "remote_hits", &rh);
            s->remote_hits_known = s->remote_hits_known && known;
            s->remote_hits_after = rh;
            static const char *const evk[10] = {"evictions", "evicted_bytes", "cohorts", "busy_retries",
                                                "restored", "eviction_debt", "hot_bytes", "hot_capacity_bytes",
                                                "claim_waits", "claim_timeouts"};
            uint64_t *evv[10] = {&s->evictions, &s->evicted_bytes, &s->cohorts, &s->busy_retries, &s->restored,
                                 &s->eviction_debt, &s->hot_bytes, &s->hot_capacity_bytes, &s->claim_waits,
                                 &s->claim_timeouts};
            s->ev_known = 1;
            for (int i = 0; i < 10; i++) s->ev_known &= rp_stat_u64(doc, evk[i], evv[i]);
            if (s->eviction_debt) ok = 0; /* selected for eviction, not yet freed */
            cJSON_Delete(doc);
        }
        if (ok) break;
        rp_sleep_ms(100);
    } while (rp_now_ns() < deadline);
    return ok;
}

/* ---------------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------------- */

static void rp_usage(FILE *f)
{
    fprintf(f,
            "usage: fluxon demo [--trace FILE] [--requests N] [--value-len BYTES] [--workers N]\n"
            "                   [--owners K] [--tp T] [--group-pages G] [--speed X] [--out DIR]\n"
            "                   [--skip-bad-lines] [--capacity-blocks N] [--config FILE]...\n"
            "                   [--key-prefix P]\n"
            "Replays a Mooncake JSONL trace through the hostless API as an inference engine:\n"
            "per request get_start over its page keys, restore and verify the transferable\n"
            "prefix, then local_fast_put_start/commit of the missed suffix.\n"
            "  --trace FILE         trace [$FLUXON_TRACE, else data/conversation_trace.jsonl]\n"
            "  --requests N         only the first N requests [all]\n"
            "  --value-len BYTES    bytes per value (one page of one TP rank) [4096]\n"
            "  --workers N          worker threads per owner, each its own client [2]\n"
            "  --owners K           embedded owners [1]\n"
            "  --tp T               TP ranks: T keys per page, restored together [1]\n"
            "  --group-pages G      pages per atomic group [1]\n"
            "  --speed X            replay timestamps X times faster; 0 = flat out [0]\n"
            "  --out DIR            write summary.json, timeseries.csv, latency_cdf.csv\n"
            "  --skip-bad-lines     skip and count malformed trace lines\n"
            "  --capacity-blocks N  size each embedded owner for N pages [the whole run]\n"
            "  --config FILE        join a cluster: external config of one owner (repeatable)\n"
            "  --key-prefix P       key namespace [demo]\n"
            "Exit: 0 passed (no errors or checksum failures, counters back to baseline),\n"
            "1 runtime failure, 2 usage error.\n");
}

static int rp_parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "fluxon demo: %s %s: must be an integer in %llu..%llu\n", opt, s,
                (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

static int rp_parse_opts(int argc, char **argv, rp_opts *o, int *help)
{
    memset(o, 0, sizeof *o);
    o->value_len = 4096;
    o->workers = 2;
    o->tp = 1;
    o->group_pages = 1;
    o->key_prefix = "demo";
    const char *env = getenv("FLUXON_TRACE");
    /* the copy in the repository first, then the shared data directory beside it */
    o->trace = env && *env ? env
               : access("data/conversation_trace.jsonl", R_OK) == 0 ? "data/conversation_trace.jsonl"
                                                                    : "../shared/data/conversation_trace.jsonl";
    int owners_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char name[64];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            *help = 1;
            return 0;
        }
        if (!strcmp(name, "--skip-bad-lines")) {
            if (val) goto bad_flag;
            o->skip_bad_lines = 1;
            continue;
        }
        static const char *const with_value[] = {"--trace", "--requests", "--value-len", "--workers",
                                                 "--owners", "--tp", "--group-pages", "--speed",
                                                 "--out", "--capacity-blocks", "--config", "--key-prefix"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) known |= !strcmp(name, with_value[k]);
        if (!known) {
            fprintf(stderr, "fluxon demo: unknown argument %s (see fluxon demo --help)\n", a);
            return -1;
        }
        if (!val) {
            if (i + 1 >= argc) {
                fprintf(stderr, "fluxon demo: %s needs a value\n", name);
                return -1;
            }
            val = argv[++i];
        }
        uint64_t v = 0;
        if (!strcmp(name, "--trace")) {
            o->trace = val;
        } else if (!strcmp(name, "--out")) {
            o->out_dir = val;
        } else if (!strcmp(name, "--key-prefix")) {
            if (!*val || strlen(val) > 128) {
                fprintf(stderr, "fluxon demo: --key-prefix must be 1..128 bytes\n");
                return -1;
            }
            o->key_prefix = val;
        } else if (!strcmp(name, "--config")) {
            if (o->n_configs == RP_MAX_OWNERS) {
                fprintf(stderr, "fluxon demo: at most %d --config files\n", RP_MAX_OWNERS);
                return -1;
            }
            o->configs[o->n_configs++] = val;
        } else if (!strcmp(name, "--speed")) {
            char *end;
            errno = 0;
            double d = strtod(val, &end);
            if (!*val || *end || errno || !(d >= 0) || d > 1e9) {
                fprintf(stderr, "fluxon demo: --speed %s: must be a number >= 0 (0 = as fast as possible)\n", val);
                return -1;
            }
            o->speed = d;
        } else if (!strcmp(name, "--requests")) {
            if (rp_parse_u64(name, val, 0, 1ull << 40, &v)) return -1;
            o->requests = (size_t)v;
        } else if (!strcmp(name, "--value-len")) {
            if (rp_parse_u64(name, val, 1, 1ull << 30, &v)) return -1;
            o->value_len = v;
        } else if (!strcmp(name, "--workers")) {
            if (rp_parse_u64(name, val, 1, RP_MAX_WORKERS_PER_OWNER, &v)) return -1;
            o->workers = (unsigned)v;
        } else if (!strcmp(name, "--owners")) {
            if (rp_parse_u64(name, val, 1, RP_MAX_OWNERS, &v)) return -1;
            o->owners = (unsigned)v;
            owners_set = 1;
        } else if (!strcmp(name, "--tp")) {
            if (rp_parse_u64(name, val, 1, 64, &v)) return -1;
            o->tp = (unsigned)v;
        } else if (!strcmp(name, "--group-pages")) {
            if (rp_parse_u64(name, val, 1, 1u << 20, &v)) return -1;
            o->group_pages = (unsigned)v;
        } else if (!strcmp(name, "--capacity-blocks")) {
            if (rp_parse_u64(name, val, 1, 1ull << 40, &v)) return -1;
            o->capacity_blocks = v;
        }
        continue;
    bad_flag:
        fprintf(stderr, "fluxon demo: %s takes no value\n", name);
        return -1;
    }
    if (o->n_configs) {
        if (owners_set && o->owners != o->n_configs) {
            fprintf(stderr, "fluxon demo: --owners %u but %u --config files (one per owner)\n", o->owners,
                    o->n_configs);
            return -1;
        }
        if (o->capacity_blocks) {
            fprintf(stderr, "fluxon demo: --capacity-blocks sizes the embedded owners; not with --config\n");
            return -1;
        }
        o->owners = o->n_configs;
    } else if (!owners_set) {
        o->owners = 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------
 * Embedded cluster
 * ------------------------------------------------------------------------------- */

#define RP_CLUSTER_ID "fluxon-demo"
#define RP_TOKEN "demo-token"

/* Segment and grant for one owner (ARCHITECTURE §6: slot = align_up(max(value_len,
 * 4096), 4096), grants hold whole slots, the segment a 4096-byte header + grants).
 * Whole-run sizing: every distinct page of the slice × T values + 25 % + one spare grant,
 * per owner, because with K owners an owner may hold its own puts and the copies it
 * fetched from the others. --capacity-blocks N: N pages × T values, rounded up to whole
 * grants (at most one grant more). */
static void rp_size_owner(const rp_opts *o, uint64_t distinct_pages, uint64_t *seg_p, uint64_t *grant_p)
{
    uint64_t slot = (o->value_len < 4096 ? 4096 : o->value_len + 4095) / 4096 * 4096;
    uint64_t values = (o->capacity_blocks ? o->capacity_blocks : distinct_pages) * o->tp;
    if (!o->capacity_blocks) values += values / 4 + 64;
    uint64_t max_spg = (512ull << 20) / slot ? (512ull << 20) / slot : 1;
    uint64_t spg = o->capacity_blocks ? values : values / 8;
    if (!o->capacity_blocks && spg < 16) spg = 16;
    if (spg > max_spg) spg = max_spg;
    if (spg == 0) spg = 1;
    uint64_t grants = (values + spg - 1) / spg + (o->capacity_blocks ? 0 : 1);
    *grant_p = spg * slot;
    *seg_p = 4096 + grants * spg * slot;
}

static int rp_start_cluster(rp_run *r, fluxon_node **master, fluxon_node **owners, char *dir,
                            char socks[][160])
{
    int rc = fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"" RP_CLUSTER_ID "\",\"cluster_token\":\"" RP_TOKEN
                               "\",\"listen\":\"127.0.0.1:0\",\"log_level\":\"warn\"}",
                               master);
    if (rc != FLUXON_OK) {
        fprintf(stderr, "fluxon demo: master did not start: %s\n", fluxon_status_string(rc));
        return rc;
    }
    rp_size_owner(&r->o, r->distinct_pages, &r->segment_bytes, &r->grant_bytes);
    /* --capacity-blocks N: at most, and once full exactly, N pages × T values stay
     * resident: the expected capacity (§6: prewarmed, a hard cap) holds them and the hot
     * tier's watermark is exactly their slots, so the owner evicts its coldest values to
     * make room (issue 7) */
    char capacity[256] = "";
    if (r->o.capacity_blocks) {
        uint64_t slot = (r->o.value_len < 4096 ? 4096 : r->o.value_len + 4095) / 4096 * 4096;
        uint64_t payload = r->o.capacity_blocks * r->o.tp * slot;
        snprintf(capacity, sizeof capacity,
                 ",\"expected\":{\"value_len\":%llu,\"payload_capacity_bytes\":%llu}},\"hot_capacity_bytes\":%llu",
                 (unsigned long long)r->o.value_len, (unsigned long long)payload, (unsigned long long)payload);
    } else {
        snprintf(capacity, sizeof capacity, "}");
    }
    for (unsigned k = 0; k < r->n_owners; k++) {
        char cfg[1024];
        snprintf(socks[k], 160, "%s/owner%u.sock", dir, k);
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"owner\",\"cluster_id\":\"" RP_CLUSTER_ID "\",\"cluster_token\":\"" RP_TOKEN "\","
                 "\"node_id\":\"demo-owner-%u\",\"master\":\"127.0.0.1:%u\",\"socket\":\"%s\","
                 "\"segment_bytes\":%llu,\"reserve\":{\"grant_bytes\":%llu%s,\"log_level\":\"warn\","
                 "\"start_timeout_ms\":120000}", /* a multi-GiB segment is faulted in at start */
                 k, fluxon_node_port(*master), socks[k], (unsigned long long)r->segment_bytes,
                 (unsigned long long)r->grant_bytes, capacity);
        rc = fluxon_node_start(cfg, &owners[k]);
        if (rc != FLUXON_OK) {
            fprintf(stderr, "fluxon demo: owner %u did not start: %s (segment_bytes %llu, grant_bytes %llu)\n", k,
                    fluxon_status_string(rc), (unsigned long long)r->segment_bytes,
                    (unsigned long long)r->grant_bytes);
            return rc;
        }
    }
    return FLUXON_OK;
}

static char *rp_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fluxon demo: cannot read config %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, len = 0, n;
    do {
        if (len + 4096 + 1 > cap) {
            if (cap >= (16u << 20)) {
                fprintf(stderr, "fluxon demo: config %s is too large\n", path);
                free(buf);
                fclose(f);
                return NULL;
            }
            char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
    } while (n > 0);
    fclose(f);
    buf[len] = 0;
    return buf;
}

/* ---------------------------------------------------------------------------------
 * Workers
 * ------------------------------------------------------------------------------- */

static int rp_worker_init(rp_worker *w, rp_run *r, unsigned id, unsigned owner)
{
    memset(w, 0, sizeof *w);
    w->run = r;
    w->id = id;
    w->owner = owner;
    size_t mk = (r->trace.max_blocks ? r->trace.max_blocks : 1) * r->o.tp;
    w->max_keys = mk;
    w->page_hash = malloc((r->trace.max_blocks ? r->trace.max_blocks : 1) * sizeof *w->page_hash);
    w->keybuf = malloc(mk * FX_CLI_KEY_MAX);
    w->keys = malloc(mk * sizeof *w->keys);
    w->klen = malloc(mk * sizeof *w->klen);
    w->glens = malloc(mk * sizeof *w->glens);
    w->kstatus = malloc(mk * sizeof *w->kstatus);
    w->kv = malloc(mk * r->o.value_len);
    if (!w->page_hash || !w->keybuf || !w->keys || !w->klen || !w->glens || !w->kstatus || !w->kv) {
        fprintf(stderr, "fluxon demo: out of memory for worker %u (%zu keys of %llu bytes)\n", id, mk,
                (unsigned long long)r->o.value_len);
        return -1;
    }
    return 0;
}

static void rp_worker_free(rp_worker *w)
{
    free(w->page_hash);
    free(w->keybuf);
    free(w->keys);
    free(w->klen);
    free(w->glens);
    free(w->kstatus);
    free(w->kv);
    for (int i = 0; i < RP_NCALLS; i++) free(w->lat[i].v);
}

static int rp_timedjoin(pthread_t t, unsigned ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    return pthread_timedjoin_np(t, NULL, &dl);
}

static void rp_on_signal(int sig)
{
    (void)sig;
    rp_interrupted = 1;
}

/* Progress on a terminal; detects a stalled run. Returns when every worker is done, or
 * once r->stop is set (interrupted, or a request ran past RP_STALL_MS). */
static void rp_wait_run(rp_run *r)
{
    int tty = isatty(2);
    uint64_t last_print = 0;
    for (;;) {
        rp_sleep_ms(50);
        uint64_t done = atomic_load_explicit(&r->done, memory_order_acquire), now = rp_now_ns();
        int finished = 1;
        for (unsigned i = 0; i < r->n_workers; i++)
            if (r->workers[i].started && pthread_tryjoin_np(r->workers[i].thread, NULL) == EBUSY) finished = 0;
            else if (r->workers[i].started) r->workers[i].started = 0, r->workers[i].joined = 1;
        if (tty && (now - last_print > 250000000ull || finished)) {
            last_print = now;
            double secs = (double)(now - r->t_start_ns) / 1e9;
            uint64_t lk = atomic_load_explicit(&r->lookups, memory_order_relaxed),
                     ht = atomic_load_explicit(&r->hits, memory_order_relaxed);
            fprintf(stderr, "\r[demo] %llu/%zu requests  %.0f req/s  prefix hits %.2f %%  errors %llu  checksum failures %llu   ",
                    (unsigned long long)done, r->n_req, secs > 0 ? (double)done / secs : 0.0,
                    lk ? 100.0 * (double)ht / (double)lk : 0.0,
                    (unsigned long long)atomic_load_explicit(&r->errors, memory_order_relaxed),
                    (unsigned long long)atomic_load_explicit(&r->checksum_failures, memory_order_relaxed));
        }
        if (finished) break;
        if (rp_interrupted && !atomic_load(&r->stop)) {
            fprintf(stderr, "\nfluxon demo: interrupted; finishing the requests in flight\n");
            atomic_store(&r->stop, 1);
        }
        for (unsigned i = 0; i < r->n_workers; i++) {
            uint64_t since = atomic_load_explicit(&r->workers[i].busy_since_ns, memory_order_relaxed);
            if (since && now > since && now - since > (uint64_t)RP_STALL_MS * 1000000ull && !atomic_load(&r->stop)) {
                fprintf(stderr, "\nfluxon demo: worker %u has been in one request for %d s; stopping the run\n", i,
                        RP_STALL_MS / 1000);
                atomic_fetch_add(&r->errors, 1);
                atomic_store(&r->stop, 1);
            }
        }
        if (atomic_load(&r->stop)) break; /* interrupted or stalled: the joins below are bounded */
    }
    if (tty) fputc('\n', stderr);
}

/* ---------------------------------------------------------------------------------
 * Reports
 * ------------------------------------------------------------------------------- */

typedef struct rp_totals {
    uint64_t requests, lookups, hits, raw_hits, remote_hits, checksum_failures, errors, skipped;
    uint64_t bytes_restored, bytes_written, contract_violations;
    uint64_t skipped_batches; /* futures refused at publish (batches, not keys) */
    uint64_t errors_by[RP_NSTATUS], skipped_by[RP_NSTATUS];
    rp_samples lat[RP_NCALLS];    /* merged and sorted */
    double secs, req_per_s, ratio, ref_ratio, lru_ref_ratio;
    int baseline_ok, remote_known;
    long peak_rss_kib;
} rp_totals;

static const char *rp_status_name(int idx)
{
    return idx == RP_NSTATUS - 1 ? "other" : fluxon_status_string(-idx);
}

static void rp_merge(rp_run *r, rp_totals *t, int baseline_ok)
{
    memset(t, 0, sizeof *t);
    for (unsigned i = 0; i < r->n_workers; i++) {
        rp_worker *w = &r->workers[i];
        t->raw_hits += w->raw_hits;
        t->contract_violations += w->contract_violations;
        for (int s = 0; s < RP_NSTATUS; s++) {
            t->errors_by[s] += w->errors_by[s];
            t->skipped_by[s] += w->skipped_by[s];
        }
        for (int c = 0; c < RP_NCALLS; c++)
            for (size_t k = 0; k < w->lat[c].n; k++) rp_samples_push(&t->lat[c], w->lat[c].v[k]);
    }
    for (size_t k = 0; k < r->col.lat.n; k++) rp_samples_push(&t->lat[RP_C_FUTURE], r->col.lat.v[k]);
    for (int s = 0; s < RP_NSTATUS; s++) t->errors_by[s] += r->col.fail_by[s];
    t->errors_by[rp_status_index(FLUXON_ERR_TIMEOUT)] += r->col.timed_out;
    for (int c = 0; c < RP_NCALLS; c++)
        if (t->lat[c].n) qsort(t->lat[c].v, t->lat[c].n, sizeof(uint64_t), rp_cmp_u64);
    for (size_t i = 0; i < r->n_req; i++) {
        const rp_reqrec *q = &r->recs[i];
        if (!q->done) continue;
        t->requests++;
        t->lookups += q->pages;
        t->hits += q->hits;
        t->bytes_restored += q->bytes_restored;
        t->bytes_written += q->bytes_written;
    }
    for (int s = 0; s < RP_NSTATUS; s++) t->skipped += t->skipped_by[s];
    t->skipped_batches = r->col.refused;
    t->checksum_failures = atomic_load(&r->checksum_failures);
    /* every counted error: statuses, contract violations, future failures/timeouts,
     * stalls (counted in r->errors only) */
    t->errors = atomic_load(&r->errors) + r->col.failed + r->col.timed_out;
    t->remote_known = 1;
    for (unsigned k = 0; k < r->n_owners; k++) {
        const rp_owner_stats *s = &r->owners[k];
        if (!s->remote_hits_known) t->remote_known = 0;
        else if (s->remote_hits_after > s->remote_hits_before)
            t->remote_hits += (s->remote_hits_after - s->remote_hits_before) / r->o.tp; /* keys → pages */
    }
    t->secs = (double)(r->t_end_ns - r->t_start_ns) / 1e9;
    t->req_per_s = t->secs > 0 ? (double)t->requests / t->secs : 0;
    t->ratio = t->lookups ? (double)t->hits / (double)t->lookups : 0;
    t->ref_ratio = r->ref_lookups ? (double)r->ref_hits / (double)r->ref_lookups : 0;
    t->lru_ref_ratio = r->ref_lookups ? (double)r->lru_ref_hits / (double)r->ref_lookups : 0;
    t->baseline_ok = baseline_ok;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) t->peak_rss_kib = ru.ru_maxrss;
}

static void rp_totals_free(rp_totals *t)
{
    for (int c = 0; c < RP_NCALLS; c++) free(t->lat[c].v);
}

static void rp_print_summary(const rp_run *r, const rp_totals *t)
{
    const rp_opts *o = &r->o;
    printf("fluxon %s demo: %s, %llu requests, value_len %llu, tp %u, %u page(s)/group, %u owner(s) x %u worker thread(s), speed %s\n",
           fluxon_version(), o->trace, (unsigned long long)t->requests, (unsigned long long)o->value_len, o->tp,
           o->group_pages, r->n_owners, o->workers, o->speed > 0 ? "paced" : "max");
    if (o->speed > 0) printf("  paced at %gx the trace's timestamps\n", o->speed);
    if (!o->n_configs)
        printf("  embedded cluster: segment %llu bytes, grant %llu bytes per owner\n",
               (unsigned long long)r->segment_bytes, (unsigned long long)r->grant_bytes);
    if (r->trace.skipped_lines)
        printf("  skipped %zu malformed trace line(s), first at line %zu\n", r->trace.skipped_lines,
               r->trace.first_skipped_line);
    printf("requests          %llu in %.2f s = %.1f requests/s\n", (unsigned long long)t->requests, t->secs,
           t->req_per_s);
    double rem = t->lookups ? 100.0 * (double)t->remote_hits / (double)t->lookups : 0;
    printf("block lookups     %llu; prefix hits %llu = %.2f %% (local %.2f %%, remote %.2f %%%s); raw %llu\n",
           (unsigned long long)t->lookups, (unsigned long long)t->hits, 100 * t->ratio, 100 * t->ratio - rem, rem,
           t->remote_known ? "" : ", remote_hits not reported by the owners", (unsigned long long)t->raw_hits);
    printf("reference         %.2f %% prefix hits (unlimited capacity, trace order, same keys)\n", 100 * t->ref_ratio);
    if (o->capacity_blocks)
        printf("reference LRU     %.2f %% prefix hits (LRU of %llu pages, trace order, same keys)\n",
               100 * t->lru_ref_ratio, (unsigned long long)o->capacity_blocks);
    for (unsigned k = 0; k < r->n_owners; k++) {
        const rp_owner_stats *s = &r->owners[k];
        if (!s->ev_known || (!s->evictions && !s->claim_waits && !s->busy_retries)) continue;
        printf("eviction          owner %u: %llu values (%.1f MiB) in %llu cohorts, busy retries %llu, restored %llu, "
               "claims waited %llu (timed out %llu), debt %llu; hot tier %.1f of %.1f MiB\n",
               k, (unsigned long long)s->evictions, (double)s->evicted_bytes / 1048576.0,
               (unsigned long long)s->cohorts, (unsigned long long)s->busy_retries, (unsigned long long)s->restored,
               (unsigned long long)s->claim_waits, (unsigned long long)s->claim_timeouts,
               (unsigned long long)s->eviction_debt, (double)s->hot_bytes / 1048576.0,
               (double)s->hot_capacity_bytes / 1048576.0);
    }
    printf("bytes             restored %.1f MiB, written %.1f MiB\n", (double)t->bytes_restored / 1048576.0,
           (double)t->bytes_written / 1048576.0);
    printf("skipped backups   %llu", (unsigned long long)t->skipped);
    for (int s = 0; s < RP_NSTATUS; s++)
        if (t->skipped_by[s]) printf("  %s %llu", rp_status_name(s), (unsigned long long)t->skipped_by[s]);
    if (t->skipped_batches) printf("  + %llu batch(es) refused at publish", (unsigned long long)t->skipped_batches);
    printf("\nchecksum failures %llu\nerrors            %llu", (unsigned long long)t->checksum_failures,
           (unsigned long long)t->errors);
    for (int s = 0; s < RP_NSTATUS; s++)
        if (t->errors_by[s]) printf("  %s %llu", rp_status_name(s), (unsigned long long)t->errors_by[s]);
    if (t->contract_violations) printf("  contract violations %llu", (unsigned long long)t->contract_violations);
    printf("\nfutures           completed %llu, refused at publish %llu (skipped backups), failed %llu, timed out %llu\n",
           (unsigned long long)r->col.completed, (unsigned long long)r->col.refused, (unsigned long long)r->col.failed,
           (unsigned long long)r->col.timed_out);
    printf("latency (us)      %-20s %9s %9s %9s %9s %9s\n", "call", "n", "p50", "p90", "p99", "max");
    for (int c = 0; c < RP_NCALLS; c++) {
        const rp_samples *s = &t->lat[c];
        if (!s->n) continue;
        printf("                  %-20s %9zu %9.1f %9.1f %9.1f %9.1f\n", rp_call_names[c], s->n,
               rp_pct(s->v, s->n, 50) / 1e3, rp_pct(s->v, s->n, 90) / 1e3, rp_pct(s->v, s->n, 99) / 1e3,
               s->v[s->n - 1] / 1e3);
    }
    printf("baseline (R1)     %s", t->baseline_ok ? "ok" : "NOT REACHED");
    for (unsigned k = 0; k < r->n_owners; k++) {
        const rp_owner_stats *s = &r->owners[k];
        if (!s->stats_ok) {
            printf("; owner %u: stats unavailable", k);
            continue;
        }
        printf("; owner %u: handles_open %llu slots_prepared %llu gets_inflight %llu puts_inflight %llu", k,
               (unsigned long long)s->handles_open, (unsigned long long)s->slots_prepared,
               (unsigned long long)s->gets_inflight, (unsigned long long)s->puts_inflight);
        if (s->absent_mask) {
            printf(" (absent, read as 0:");
            for (int i = 0; i < 4; i++)
                if (s->absent_mask & (1u << i)) printf(" %s", rp_baseline_keys[i]);
            printf(")");
        }
    }
    printf("\npeak RSS          %.1f MiB (one process: nodes, clients and workers)\n", t->peak_rss_kib / 1024.0);
}

static int rp_mkdirs(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return -1;
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static FILE *rp_open_out(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "fluxon demo: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

static int rp_write_summary_json(const rp_run *r, const rp_totals *t)
{
    const rp_opts *o = &r->o;
    cJSON *j = cJSON_CreateObject();
    if (!j) return -1;
    cJSON_AddNumberToObject(j, "requests", (double)t->requests);
    cJSON_AddNumberToObject(j, "lookups", (double)t->lookups);
    cJSON_AddNumberToObject(j, "prefix_hits", (double)t->hits);
    cJSON_AddNumberToObject(j, "raw_prefix_hits", (double)t->raw_hits);
    cJSON_AddNumberToObject(j, "prefix_hit_ratio", t->ratio);
    cJSON_AddNumberToObject(j, "reference_prefix_hit_ratio", t->ref_ratio);
    if (o->capacity_blocks) cJSON_AddNumberToObject(j, "reference_lru_prefix_hit_ratio", t->lru_ref_ratio);
    cJSON_AddNumberToObject(j, "local_hits", (double)(t->hits > t->remote_hits ? t->hits - t->remote_hits : 0));
    cJSON_AddNumberToObject(j, "remote_hits", (double)t->remote_hits);
    cJSON_AddBoolToObject(j, "remote_hits_reported", t->remote_known);
    cJSON_AddNumberToObject(j, "checksum_failures", (double)t->checksum_failures);
    cJSON_AddNumberToObject(j, "errors", (double)t->errors);
    cJSON_AddNumberToObject(j, "contract_violations", (double)t->contract_violations);
    cJSON_AddNumberToObject(j, "skipped_backups", (double)t->skipped);
    cJSON_AddNumberToObject(j, "skipped_backup_batches", (double)t->skipped_batches);
    cJSON_AddNumberToObject(j, "bytes_restored", (double)t->bytes_restored);
    cJSON_AddNumberToObject(j, "bytes_written", (double)t->bytes_written);
    cJSON_AddNumberToObject(j, "elapsed_s", t->secs);
    cJSON_AddNumberToObject(j, "requests_per_s", t->req_per_s);
    cJSON_AddBoolToObject(j, "baseline_ok", t->baseline_ok);
    cJSON_AddNumberToObject(j, "peak_rss_kib", (double)t->peak_rss_kib);
    cJSON_AddNumberToObject(j, "futures_completed", (double)r->col.completed);
    cJSON_AddNumberToObject(j, "futures_refused", (double)r->col.refused);
    cJSON_AddNumberToObject(j, "futures_failed", (double)r->col.failed);
    cJSON_AddNumberToObject(j, "futures_timed_out", (double)r->col.timed_out);
    cJSON_AddNumberToObject(j, "skipped_trace_lines", (double)r->trace.skipped_lines);
    cJSON *eb = cJSON_AddObjectToObject(j, "errors_by_status");
    cJSON *sb = cJSON_AddObjectToObject(j, "skipped_by_status");
    for (int s = 0; s < RP_NSTATUS; s++) {
        if (t->errors_by[s]) cJSON_AddNumberToObject(eb, rp_status_name(s), (double)t->errors_by[s]);
        if (t->skipped_by[s] || r->col.refused_by[s])
            cJSON_AddNumberToObject(sb, rp_status_name(s), (double)(t->skipped_by[s] + r->col.refused_by[s]));
    }
    for (int c = 0; c < RP_NCALLS; c++) {
        const rp_samples *s = &t->lat[c];
        char k[64];
        snprintf(k, sizeof k, "%s_n", rp_call_names[c]);
        cJSON_AddNumberToObject(j, k, (double)s->n);
        static const double ps[3] = {50, 90, 99};
        for (int i = 0; i < 3; i++) {
            snprintf(k, sizeof k, "%s_p%.0f_us", rp_call_names[c], ps[i]);
            cJSON_AddNumberToObject(j, k, rp_pct(s->v, s->n, ps[i]) / 1e3);
        }
        snprintf(k, sizeof k, "%s_max_us", rp_call_names[c]);
        cJSON_AddNumberToObject(j, k, s->n ? s->v[s->n - 1] / 1e3 : 0);
    }
    cJSON *owners = cJSON_AddArrayToObject(j, "owners");
    cJSON *notes = cJSON_AddArrayToObject(j, "notes");
    for (unsigned k = 0; k < r->n_owners; k++) {
        const rp_owner_stats *s = &r->owners[k];
        cJSON *ob = cJSON_CreateObject();
        cJSON_AddBoolToObject(ob, "stats_ok", s->stats_ok);
        cJSON_AddNumberToObject(ob, "handles_open", (double)s->handles_open);
        cJSON_AddNumberToObject(ob, "slots_prepared", (double)s->slots_prepared);
        cJSON_AddNumberToObject(ob, "gets_inflight", (double)s->gets_inflight);
        cJSON_AddNumberToObject(ob, "puts_inflight", (double)s->puts_inflight);
        cJSON_AddNumberToObject(ob, "remote_hit_keys", (double)(s->remote_hits_after - (s->remote_hits_after >= s->remote_hits_before ? s->remote_hits_before : s->remote_hits_after)));
        if (s->ev_known) {
            cJSON_AddNumberToObject(ob, "evictions", (double)s->evictions);
            cJSON_AddNumberToObject(ob, "evicted_bytes", (double)s->evicted_bytes);
            cJSON_AddNumberToObject(ob, "cohorts", (double)s->cohorts);
            cJSON_AddNumberToObject(ob, "busy_retries", (double)s->busy_retries);
            cJSON_AddNumberToObject(ob, "restored", (double)s->restored);
            cJSON_AddNumberToObject(ob, "eviction_debt", (double)s->eviction_debt);
            cJSON_AddNumberToObject(ob, "hot_bytes", (double)s->hot_bytes);
            cJSON_AddNumberToObject(ob, "hot_capacity_bytes", (double)s->hot_capacity_bytes);
            cJSON_AddNumberToObject(ob, "claim_waits", (double)s->claim_waits);
            cJSON_AddNumberToObject(ob, "claim_timeouts", (double)s->claim_timeouts);
        }
        cJSON_AddItemToArray(owners, ob);
        char note[160];
        for (int i = 0; i < 4; i++)
            if (s->absent_mask & (1u << i)) {
                snprintf(note, sizeof note, "owner %u: stats key \"%s\" absent, read as 0", k, rp_baseline_keys[i]);
                cJSON_AddItemToArray(notes, cJSON_CreateString(note));
            }
        if (!s->remote_hits_known) {
            snprintf(note, sizeof note, "owner %u: stats key \"remote_hits\" absent, remote hits read as 0", k);
            cJSON_AddItemToArray(notes, cJSON_CreateString(note));
        }
    }
    cJSON *cfg = cJSON_AddObjectToObject(j, "config");
    cJSON_AddStringToObject(cfg, "trace", o->trace);
    cJSON_AddNumberToObject(cfg, "requests", (double)r->n_req);
    cJSON_AddNumberToObject(cfg, "value_len", (double)o->value_len);
    cJSON_AddNumberToObject(cfg, "workers_per_owner", o->workers);
    cJSON_AddNumberToObject(cfg, "owners", r->n_owners);
    cJSON_AddNumberToObject(cfg, "tp", o->tp);
    cJSON_AddNumberToObject(cfg, "group_pages", o->group_pages);
    cJSON_AddNumberToObject(cfg, "speed", o->speed);
    cJSON_AddStringToObject(cfg, "key_prefix", o->key_prefix);
    cJSON_AddStringToObject(cfg, "workers_are", "threads, one fluxon_client each");
    cJSON_AddBoolToObject(cfg, "embedded", o->n_configs == 0);
    cJSON_AddNumberToObject(cfg, "segment_bytes", (double)r->segment_bytes);
    cJSON_AddNumberToObject(cfg, "grant_bytes", (double)r->grant_bytes);
    cJSON_AddNumberToObject(cfg, "capacity_blocks", (double)o->capacity_blocks);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return -1;
    FILE *f = rp_open_out(o->out_dir, "summary.json");
    int rc = -1;
    if (f) {
        rc = fprintf(f, "%s\n", text) < 0 ? -1 : 0;
        if (fclose(f) != 0) rc = -1;
    }
    free(text);
    return rc;
}

/* Per second of the run (by completion time): requests, lookups, hits, hit ratio of the
 * second and cumulative, request latency p50/p99, get_start and put_start p50, bytes. */
static int rp_write_timeseries(const rp_run *r)
{
    uint64_t secs = 0;
    for (size_t i = 0; i < r->n_req; i++)
        if (r->recs[i].done && r->recs[i].t_done_ns / 1000000000ull + 1 > secs)
            secs = r->recs[i].t_done_ns / 1000000000ull + 1;
    size_t *cnt = calloc(secs + 1, sizeof *cnt), *start = calloc(secs + 2, sizeof *start);
    size_t *order = malloc((r->n_req ? r->n_req : 1) * sizeof *order);
    uint64_t *a = malloc((r->n_req ? r->n_req : 1) * sizeof *a), *b = malloc((r->n_req ? r->n_req : 1) * sizeof *b),
             *c = malloc((r->n_req ? r->n_req : 1) * sizeof *c);
    FILE *f = NULL;
    int rc = -1;
    if (!cnt || !start || !order || !a || !b || !c) goto out;
    for (size_t i = 0; i < r->n_req; i++)
        if (r->recs[i].done) cnt[r->recs[i].t_done_ns / 1000000000ull]++;
    for (uint64_t s = 0; s < secs; s++) start[s + 1] = start[s] + cnt[s];
    memset(cnt, 0, (secs + 1) * sizeof *cnt);
    for (size_t i = 0; i < r->n_req; i++)
        if (r->recs[i].done) {
            uint64_t s = r->recs[i].t_done_ns / 1000000000ull;
            order[start[s] + cnt[s]++] = i;
        }
    if (!(f = rp_open_out(r->o.out_dir, "timeseries.csv"))) goto out;
    fprintf(f, "second,requests,lookups,prefix_hits,hit_ratio,cum_hit_ratio,request_p50_us,request_p99_us,"
               "get_start_p50_us,put_start_p50_us,bytes_restored,bytes_written\n");
    uint64_t cum_l = 0, cum_h = 0;
    for (uint64_t s = 0; s < secs; s++) {
        uint64_t lk = 0, ht = 0, br = 0, bw = 0;
        size_t n = cnt[s], nb = 0, nc = 0;
        for (size_t k = 0; k < n; k++) {
            const rp_reqrec *q = &r->recs[order[start[s] + k]];
            lk += q->pages;
            ht += q->hits;
            br += q->bytes_restored;
            bw += q->bytes_written;
            a[k] = q->lat_ns;
            if (q->get_start_ns) b[nb++] = q->get_start_ns;
            if (q->put_start_ns) c[nc++] = q->put_start_ns;
        }
        qsort(a, n, sizeof *a, rp_cmp_u64);
        qsort(b, nb, sizeof *b, rp_cmp_u64);
        qsort(c, nc, sizeof *c, rp_cmp_u64);
        cum_l += lk;
        cum_h += ht;
        fprintf(f, "%llu,%zu,%llu,%llu,%.6f,%.6f,%.1f,%.1f,%.1f,%.1f,%llu,%llu\n", (unsigned long long)s, n,
                (unsigned long long)lk, (unsigned long long)ht, lk ? (double)ht / (double)lk : 0.0,
                cum_l ? (double)cum_h / (double)cum_l : 0.0, rp_pct(a, n, 50) / 1e3, rp_pct(a, n, 99) / 1e3,
                rp_pct(b, nb, 50) / 1e3, rp_pct(c, nc, 50) / 1e3, (unsigned long long)br, (unsigned long long)bw);
    }
    rc = 0;
out:
    if (f && fclose(f) != 0) rc = -1;
    free(cnt);
    free(start);
    free(order);
    free(a);
    free(b);
    free(c);
    return rc;
}

/* latency_cdf.csv: percentile, then each call's latency there in µs (empty: no calls) */
static int rp_write_cdf(const rp_run *r, const rp_totals *t)
{
    FILE *f = rp_open_out(r->o.out_dir, "latency_cdf.csv");
    if (!f) return -1;
    fprintf(f, "percentile");
    for (int c = 0; c < RP_NCALLS; c++) fprintf(f, ",%s_us", rp_call_names[c]);
    fputc('\n', f);
    static const double tail[] = {99.5, 99.9, 99.99, 100};
    for (int i = 0; i <= 99 + 4; i++) {
        double p = i <= 99 ? (double)i : tail[i - 100];
        fprintf(f, "%g", p);
        for (int c = 0; c < RP_NCALLS; c++) {
            if (t->lat[c].n) fprintf(f, ",%.1f", rp_pct(t->lat[c].v, t->lat[c].n, p) / 1e3);
            else fputc(',', f);
        }
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------------- */

int fx_cli_replay_main(int argc, char **argv)
{
    int help = 0;
    rp_run *r = calloc(1, sizeof *r);
    if (!r) return 1;
    if (rp_parse_opts(argc, argv, &r->o, &help)) {
        free(r);
        return RP_EXIT_USAGE;
    }
    if (help) {
        rp_usage(stdout);
        free(r);
        return 0;
    }
    rp_opts *o = &r->o;
    int ex = 1, cluster_up = 0, col_inited = 0;
    fluxon_node *master = NULL, *owners[RP_MAX_OWNERS] = {0};
    char dir[] = "/tmp/fluxon-demo-XXXXXX", socks[RP_MAX_OWNERS][160];
    char *ext_cfg[RP_MAX_OWNERS] = {0};
    int dir_made = 0, leaked = 0;
    struct sigaction sa = {.sa_handler = rp_on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);

    /* trace and reference */
    char err[512];
    if (fx_cli_trace_load(o->trace, o->requests, o->skip_bad_lines, &r->trace, err, sizeof err)) {
        fprintf(stderr, "fluxon demo: %s\n", err);
        if (strstr(err, ": cannot open: ")) fprintf(stderr, "fluxon demo: pass --trace FILE (or set FLUXON_TRACE)\n");
        free(r);
        return RP_EXIT_USAGE;
    }
    r->n_req = r->trace.n_reqs;
    if (r->n_req == 0) {
        fprintf(stderr, "fluxon demo: %s holds no request\n", o->trace);
        ex = RP_EXIT_USAGE;
        goto out_trace;
    }
    fx_cli_sim_result ref;
    if (fx_cli_sim_run(&r->trace, 0, 0, 1, &ref)) {
        fprintf(stderr, "fluxon demo: out of memory for the reference simulator\n");
        goto out_trace;
    }
    r->ref_hits = ref.prefix_hits;
    r->ref_lookups = ref.lookups;
    r->distinct_pages = ref.inserted;
    if (o->capacity_blocks) {
        fx_cli_sim_result lref;
        if (fx_cli_sim_run(&r->trace, 0, o->capacity_blocks, 1, &lref)) {
            fprintf(stderr, "fluxon demo: out of memory for the reference simulator\n");
            goto out_trace;
        }
        r->lru_ref_hits = lref.prefix_hits;
    }
    r->recs = calloc(r->n_req, sizeof *r->recs);
    if (!r->recs) goto out_trace;
    if (o->out_dir && rp_mkdirs(o->out_dir)) {
        fprintf(stderr, "fluxon demo: cannot create --out %s: %s\n", o->out_dir, strerror(errno));
        ex = RP_EXIT_USAGE;
        goto out_trace;
    }
    { /* futures hold fds: allow as many as the hard limit */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }

    /* cluster: embedded, or the owners named by --config */
    r->n_owners = o->owners;
    if (o->n_configs) {
        for (unsigned k = 0; k < o->n_configs; k++)
            if (!(ext_cfg[k] = rp_read_text(o->configs[k]))) {
                ex = RP_EXIT_USAGE;
                goto out_cluster;
            }
    } else {
        if (!mkdtemp(dir)) {
            fprintf(stderr, "fluxon demo: mkdtemp: %s\n", strerror(errno));
            goto out_trace;
        }
        dir_made = 1;
        cluster_up = 1;
        if (rp_start_cluster(r, &master, owners, dir, socks) != FLUXON_OK) goto out_cluster;
        for (unsigned k = 0; k < r->n_owners; k++) {
            char cfg[512];
            snprintf(cfg, sizeof cfg,
                     "{\"role\":\"external\",\"cluster_id\":\"" RP_CLUSTER_ID "\",\"cluster_token\":\"" RP_TOKEN
                     "\",\"socket\":\"%s\",\"log_level\":\"warn\"}",
                     socks[k]);
            if (!(ext_cfg[k] = strdup(cfg))) goto out_cluster;
        }
    }

    /* workers: N per owner, each with its own client */
    r->n_workers = o->workers * r->n_owners;
    r->workers = calloc(r->n_workers, sizeof *r->workers);
    if (!r->workers) goto out_cluster;
    for (unsigned i = 0; i < r->n_workers; i++) {
        rp_worker *w = &r->workers[i];
        if (rp_worker_init(w, r, i, i % r->n_owners)) goto out_workers;
        int rc = fluxon_client_open(ext_cfg[w->owner], &w->client);
        if (rc != FLUXON_OK) {
            fprintf(stderr, "fluxon demo: worker %u: cannot open a client on owner %u: %s\n", i, w->owner,
                    fluxon_status_string(rc));
            ex = rc == FLUXON_ERR_CONFIG ? RP_EXIT_USAGE : 1;
            goto out_workers;
        }
    }
    rp_stats_before(r);
    pthread_mutex_init(&r->col.mu, NULL);
    pthread_cond_init(&r->col.cv_space, NULL);
    pthread_cond_init(&r->col.cv_work, NULL);
    col_inited = 1;
    if (pthread_create(&r->col.thread, NULL, rp_collector_main, &r->col) != 0) {
        fprintf(stderr, "fluxon demo: cannot start the future collector\n");
        goto out_workers;
    }
    r->col.started = 1;

    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    r->t_start_ns = rp_now_ns();
    for (unsigned i = 0; i < r->n_workers; i++) {
        if (pthread_create(&r->workers[i].thread, NULL, rp_worker_main, &r->workers[i]) != 0) {
            fprintf(stderr, "fluxon demo: cannot start worker %u\n", i);
            atomic_store(&r->stop, 1);
            atomic_fetch_add(&r->errors, 1);
            break;
        }
        r->workers[i].started = 1;
    }
    rp_wait_run(r);
    for (unsigned i = 0; i < r->n_workers; i++) {
        rp_worker *w = &r->workers[i];
        if (!w->started) continue;
        if (rp_timedjoin(w->thread, RP_JOIN_MS) != 0) {
            fprintf(stderr, "fluxon demo: worker %u did not finish within %d s; its client is left open\n", i,
                    RP_JOIN_MS / 1000);
            leaked = 1;
            continue;
        }
        w->started = 0;
        w->joined = 1;
    }
    r->t_end_ns = rp_now_ns();
    /* every future is collected (or given up after RP_FUTURE_TIMEOUT_MS) */
    pthread_mutex_lock(&r->col.mu);
    r->col.closing = 1;
    pthread_cond_signal(&r->col.cv_work);
    pthread_mutex_unlock(&r->col.mu);
    if (rp_timedjoin(r->col.thread, RP_FUTURE_TIMEOUT_MS + RP_JOIN_MS) != 0) {
        fprintf(stderr, "fluxon demo: the future collector did not finish\n");
        leaked = 1;
    } else {
        r->col.started = 0;
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);

    if (!leaked) {
        int baseline_ok = rp_stats_after(r);
        rp_totals t;
        rp_merge(r, &t, baseline_ok);
        rp_print_summary(r, &t);
        fflush(stdout);
        int wrc = 0;
        if (o->out_dir) wrc = rp_write_summary_json(r, &t) | rp_write_timeseries(r) | rp_write_cdf(r, &t);
        if (wrc) fprintf(stderr, "fluxon demo: could not write every file in %s\n", o->out_dir);
        ex = t.errors == 0 && t.checksum_failures == 0 && baseline_ok && !wrc && !rp_interrupted &&
                     t.requests == r->n_req
                 ? 0
                 : 1;
        rp_totals_free(&t);
    }

out_workers:
    if (leaked) {
        /* a thread still uses its client: do not close or free anything it may touch */
        fprintf(stderr, "fluxon demo: exiting without cleanup after a hung worker\n");
        fflush(NULL);
        _exit(1);
    }
    if (r->col.started) { /* only on a start failure: no worker ran */
        pthread_mutex_lock(&r->col.mu);
        r->col.closing = 1;
        pthread_cond_signal(&r->col.cv_work);
        pthread_mutex_unlock(&r->col.mu);
        rp_timedjoin(r->col.thread, RP_FUTURE_TIMEOUT_MS + RP_JOIN_MS);
    }
    if (col_inited) {
        pthread_mutex_destroy(&r->col.mu);
        pthread_cond_destroy(&r->col.cv_space);
        pthread_cond_destroy(&r->col.cv_work);
    }
    free(r->col.lat.v);
    for (unsigned i = 0; r->workers && i < r->n_workers; i++) {
        fluxon_client_close(r->workers[i].client);
        rp_worker_free(&r->workers[i]);
    }
    free(r->workers);
out_cluster:
    for (unsigned k = 0; k < RP_MAX_OWNERS; k++) free(ext_cfg[k]);
    if (cluster_up) {
        for (unsigned k = r->n_owners; k-- > 0;) fluxon_node_stop(owners[k]);
        fluxon_node_stop(master);
        for (unsigned k = 0; k < r->n_owners; k++) unlink(socks[k]); /* normally gone already */
    }
    if (dir_made) rmdir(dir);
out_trace:
    free(r->recs);
    fx_cli_trace_free(&r->trace);
    free(r);
    return ex;
}

