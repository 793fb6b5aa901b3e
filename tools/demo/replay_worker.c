/* replay_worker.c — the workers of `fluxon demo`: threads of this process, each with its
 * own fluxon_client, playing requests as an engine would (get_start → get_transfer →
 * restore + verify → release_views; missed suffix → local_fast_put_start → fill →
 * commit → future to the collector), plus the progress line and the stall watchdog. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli_util.h"
#include "replay.h"

volatile sig_atomic_t rp_interrupted;

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
    uint64_t t0 = fx_cli_now_ns();
    int rc = fluxon_get_transfer(c, h, 0, &plan);
    rp_samples_push(&w->lat[RP_C_GET_TRANSFER], fx_cli_now_ns() - t0);
    if (rc != FLUXON_OK) {
        rp_worker_error(w, req, "get_transfer", rc);
        if (rc == FLUXON_ERR_INVALID_ARGUMENT) { /* the handle is still ours (§8) */
            t0 = fx_cli_now_ns();
            int crc = fluxon_cancel_get_transfer(c, h);
            rp_samples_push(&w->lat[RP_C_CANCEL], fx_cli_now_ns() - t0);
            if (crc != FLUXON_OK) rp_worker_error(w, req, "cancel_get_transfer", crc);
        }
        return 0;
    }
    uint64_t n = plan->count;
    if (n != transferable) {
        rp_worker_error(w, req, "get_transfer: plan count differs from transferable_len", 0);
        if (n > transferable) n = transferable;
    }
    uint64_t good = 0, tc = fx_cli_now_ns();
    const uint64_t *lens = fluxon_plan_value_lens(c, plan);
    for (uint64_t j = 0; j < n; j++) {
        const void *src = (const void *)(uintptr_t)plan->value_ptrs[j];
        if (!src) {
            rp_worker_error(w, req, "get_transfer: NULL value pointer in the read plan", 0);
            break;
        }
        if (!lens || lens[j] != vlen) { /* stored by another run (--config): never read past it */
            uint64_t nm = atomic_fetch_add_explicit(&r->length_mismatches, 1, memory_order_relaxed);
            if (!lens) rp_worker_error(w, req, "fluxon_plan_value_lens: NULL for a live read plan", 0);
            else if (nm < RP_MAX_LOGGED_ERRORS)
                fprintf(stderr, "\nfluxon demo: request %zu: %s holds a %llu-byte value, not --value-len %llu: "
                        "another run stored this key (use another --key-prefix); restored up to it\n", req,
                        w->keys[j], (unsigned long long)lens[j], (unsigned long long)vlen);
            good -= good % ((uint64_t)r->o.group_pages * r->o.tp); /* whole groups: the rest is put again */
            break;
        }
        unsigned char *dst = w->kv + j * vlen;
        memcpy(dst, src, vlen);
        int64_t off = fx_cli_value_check(dst, vlen, w->keys[j], w->klen[j]);
        if (off >= 0) {
            uint64_t nf = atomic_fetch_add_explicit(&r->checksum_failures, 1, memory_order_relaxed);
            if (nf < RP_MAX_LOGGED_ERRORS) {
                char whose[FX_CLI_KEY_MAX + 128] = "", where[160] = "";
                if (nf < 3) rp_whose_bytes(r, dst, vlen, whose, sizeof whose); /* walks the trace: the first few */
                fluxon_segment_info si;
                size_t ns = 0;
                if (fluxon_wait_local_segments_ready(c, 0, &si, 1, &ns) == FLUXON_OK && ns == 1 &&
                    (uintptr_t)src >= (uintptr_t)si.read_ptr && (uintptr_t)src - (uintptr_t)si.read_ptr < si.len)
                    snprintf(where, sizeof where, " (read at byte %llu of owner %s's segment, generation %llu)",
                             (unsigned long long)((uintptr_t)src - (uintptr_t)si.read_ptr), si.node_id,
                             (unsigned long long)si.generation);
                fprintf(stderr, "\nfluxon demo: request %zu: CHECKSUM FAILURE on %s at byte %lld%s%s%s\n", req,
                        w->keys[j], (long long)off, where, whose[0] ? ": " : "", whose);
            }
        }
        good++;
    }
    t0 = fx_cli_now_ns();
    w->check_ns += t0 - tc;
    rc = fluxon_release_views(c, plan);
    rp_samples_push(&w->lat[RP_C_RELEASE], fx_cli_now_ns() - t0);
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
    uint64_t t0 = fx_cli_now_ns();
    int rc = fluxon_local_fast_put_start(c, w->keys + first, n, o->value_len, &opts, &plan, w->kstatus);
    uint64_t dt = fx_cli_now_ns() - t0;
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
    uint64_t tf = fx_cli_now_ns();
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
    w->fill_ns += fx_cli_now_ns() - tf;
    if (accepted == 0) { /* nothing to publish: give the plan back */
        t0 = fx_cli_now_ns();
        rc = fluxon_put_abort(c, plan);
        rp_samples_push(&w->lat[RP_C_PUT_ABORT], fx_cli_now_ns() - t0);
        if (rc != FLUXON_OK) rp_worker_error(w, req, "put_abort", rc);
        return;
    }
    fluxon_future *fut = NULL;
    t0 = fx_cli_now_ns();
    rc = fluxon_local_fast_put_commit(c, plan, &fut);
    uint64_t t1 = fx_cli_now_ns();
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
    uint64_t t_req = fx_cli_now_ns();
    rec->pages = (uint32_t)np;
    rec->tenant = w->tenant;
    if (np > 0 && rp_build_keys(w, q) == 0) {
        size_t ng = rp_groups(w, 0, np);
        fluxon_get_handle *h = NULL;
        fluxon_get_start_result res;
        memset(&res, 0, sizeof res);
        uint64_t t0 = fx_cli_now_ns();
        int rc = fluxon_get_start(w->client, w->keys, nk, 1, w->glens, ng, &h, &res);
        uint64_t dt = fx_cli_now_ns() - t0;
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
                t0 = fx_cli_now_ns();
                int crc = fluxon_cancel_get_transfer(w->client, h);
                rp_samples_push(&w->lat[RP_C_CANCEL], fx_cli_now_ns() - t0);
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
    uint64_t t_end = fx_cli_now_ns();
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
        uint64_t now = fx_cli_now_ns();
        if (now >= due) return 0;
        uint64_t left_ms = (due - now) / 1000000ull;
        if (left_ms >= 100) {
            fx_cli_sleep_ms(100);
        } else {
            struct timespec ts2 = {.tv_sec = 0, .tv_nsec = (long)(due - now)};
            nanosleep(&ts2, NULL);
        }
    }
}

/* --prefetch: names request idx's keys to the worker's owner, which reads back now what its
 * disk tier holds (the keys are built again for the request played next). A refusal is
 * counted, never an error of the run: it is a hint. */
static void rp_prefetch(rp_worker *w, size_t idx)
{
    rp_run *r = w->run;
    const fx_cli_trace_req *q = &r->trace.reqs[idx];
    size_t nk = q->n_blocks * r->o.tp;
    if (!nk || rp_build_keys(w, q) != 0) return;
    if (fluxon_prefetch(w->client, w->keys, nk) == FLUXON_OK) w->prefetches++;
    else w->prefetch_refused++;
}

static void *rp_worker_main(void *arg)
{
    rp_worker *w = arg;
    rp_run *r = w->run;
    char name[16];
    snprintf(name, sizeof name, "fx-worker-%u", w->id);
    (void)prctl(PR_SET_NAME, name, 0, 0, 0); /* top -H, perf --sort comm */
    struct timespec c0, c1;
    int cpu_ok = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0) == 0;
    for (;;) {
        if (atomic_load_explicit(&r->stop, memory_order_relaxed) || rp_interrupted) break;
        size_t req = atomic_fetch_add_explicit(&r->next_req, 1, memory_order_relaxed);
        if (req >= r->n_req) break;
        if (rp_pace(r, req)) break;
        if (r->o.prefetch && req + r->o.prefetch < r->n_req) rp_prefetch(w, req + r->o.prefetch);
        atomic_store_explicit(&w->busy_since_ns, fx_cli_now_ns(), memory_order_relaxed);
        rp_play(w, req);
        w->requests++;
        /* when its last request ended: not when it next found none left (a worker
         * descheduled in between on a loaded host stretched the replay's time) */
        w->t_exit_ns = fx_cli_now_ns();
        atomic_store_explicit(&w->busy_since_ns, 0, memory_order_relaxed);
    }
    if (cpu_ok && clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1) == 0)
        w->cpu_ns = (uint64_t)((c1.tv_sec - c0.tv_sec) * 1000000000ll + (c1.tv_nsec - c0.tv_nsec));
    return NULL;
}

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

/* Progress: on a terminal a line rewritten 4 times a second; off a terminal (a log, a
 * pipe) a line every RP_PROGRESS_LOG_S s of a long run, worded apart from the summary's
 * lines (scripts read those). Detects a stalled run. Returns when every worker is done, or
 * once r->stop is set (interrupted, or a request ran past RP_STALL_MS). */
#define RP_PROGRESS_LOG_S 10u
static void rp_wait_run(rp_run *r)
{
    int tty = isatty(2);
    uint64_t last_print = 0;
    for (;;) {
        fx_cli_sleep_ms(50);
        uint64_t done = atomic_load_explicit(&r->done, memory_order_acquire), now = fx_cli_now_ns();
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
        } else if (!tty && !finished && now - r->t_start_ns >= (uint64_t)RP_PROGRESS_LOG_S * 1000000000ull &&
                   now - last_print >= (uint64_t)RP_PROGRESS_LOG_S * 1000000000ull) {
            last_print = now;
            double secs = (double)(now - r->t_start_ns) / 1e9;
            uint64_t lk = atomic_load_explicit(&r->lookups, memory_order_relaxed),
                     ht = atomic_load_explicit(&r->hits, memory_order_relaxed);
            fprintf(stderr, "[demo] after %.0f s: %llu of %zu requests done (%.0f a second), hits %.2f %% of lookups, "
                    "%llu errors, %llu bad checksums so far\n",
                    secs, (unsigned long long)done, r->n_req, secs > 0 ? (double)done / secs : 0.0,
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

/* Opens worker w's client (on a thread of its own: see rp_workers_open). */
typedef struct rp_opener {
    rp_worker *w;
    const char *cfg;
    char tcfg[1024]; /* --tenants: the owner's external config with the worker's tenant */
    pthread_t thread;
    int started, rc;
} rp_opener;

static void *rp_open_main(void *arg)
{
    rp_opener *op = arg;
    op->rc = fluxon_client_open(op->cfg, &op->w->client);
    return NULL;
}

/* Every worker's client, opened in parallel: opening maps the owner's segment and faults
 * its page tables in (prefault_segment), ~0.5 s per GiB per client here, which the replay
 * must not pay on its first puts; W workers × K owners open in the time of the slowest
 * instead of the sum (issue 18). */
int rp_workers_open(rp_run *r)
{
    r->n_workers = r->o.workers * r->n_owners;
    r->workers = calloc(r->n_workers, sizeof *r->workers);
    rp_opener *ops = calloc(r->n_workers ? r->n_workers : 1, sizeof *ops);
    int ex = r->workers && ops ? 0 : 1;
    for (unsigned i = 0; !ex && i < r->n_workers; i++) {
        rp_worker *w = &r->workers[i];
        if (rp_worker_init(w, r, i, i % r->n_owners)) ex = 1;
        ops[i] = (rp_opener){.w = w, .cfg = r->cl.ext_cfg[w->owner], .rc = FLUXON_ERR_INTERNAL};
        if (!ex && r->o.tenants) { /* issue 42: the owner's k-th worker is tenant k mod T */
            const char *base = r->cl.ext_cfg[w->owner];
            w->tenant = (i / r->n_owners) % r->o.tenants;
            snprintf(ops[i].tcfg, sizeof ops[i].tcfg, "%.*s,\"tenant\":\"t%u\",\"tenant_token\":\"demo-t%u\"}",
                     (int)strlen(base) - 1, base, w->tenant, w->tenant);
            ops[i].cfg = ops[i].tcfg;
        }
        if (!ex) ops[i].started = pthread_create(&ops[i].thread, NULL, rp_open_main, &ops[i]) == 0;
        if (!ex && !ops[i].started) rp_open_main(&ops[i]); /* no thread: open it here */
    }
    for (unsigned i = 0; ops && r->workers && i < r->n_workers; i++) {
        if (ops[i].started) pthread_join(ops[i].thread, NULL);
        if (ex || ops[i].rc == FLUXON_OK) continue;
        fprintf(stderr, "fluxon demo: worker %u: cannot open a client on owner %u: %s\n", i, r->workers[i].owner,
                fluxon_status_string(ops[i].rc));
        ex = ops[i].rc == FLUXON_ERR_CONFIG ? RP_EXIT_USAGE : 1;
    }
    free(ops);
    return ex;
}

void rp_workers_close(rp_run *r)
{
    for (unsigned i = 0; r->workers && i < r->n_workers; i++) {
        fluxon_client_close(r->workers[i].client);
        rp_worker_free(&r->workers[i]);
    }
    free(r->workers);
    r->workers = NULL;
}

/* joins every started worker within RP_JOIN_MS each; -1 when one is still running */
static int rp_join_workers(rp_run *r)
{
    int leaked = 0;
    for (unsigned i = 0; i < r->n_workers; i++) {
        rp_worker *w = &r->workers[i];
        if (!w->started) continue;
        if (fx_cli_join_ms(w->thread, RP_JOIN_MS) != 0) {
            fprintf(stderr, "fluxon demo: worker %u did not finish within %d s; its client is left open\n", i,
                    RP_JOIN_MS / 1000);
            leaked = 1;
            continue;
        }
        w->started = 0;
        w->joined = 1;
    }
    return leaked ? -1 : 0;
}

int rp_run_workers(rp_run *r)
{
    struct rusage ru0, ru1;
    int ru_ok = getrusage(RUSAGE_SELF, &ru0) == 0;
    r->t_start_ns = fx_cli_now_ns();
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
    int leaked = rp_join_workers(r);
    /* the replay ends with its last request (a worker's t_exit_ns), not when rp_wait_run's 50 ms step next
     * looks (that added 0-50 ms to a ~1 s run); a worker not joined ends it now */
    uint64_t end = 0;
    int running = 0;
    for (unsigned i = 0; i < r->n_workers; i++)
        if (r->workers[i].joined) {
            if (r->workers[i].requests && r->workers[i].t_exit_ns > end) end = r->workers[i].t_exit_ns;
        } else if (r->workers[i].started) {
            running = 1;
        }
    r->t_end_ns = end && !running ? end : fx_cli_now_ns();
    if (ru_ok && getrusage(RUSAGE_SELF, &ru1) == 0) { /* every thread: master, owners, clients, workers */
        r->cpu_user_s = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                        (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6;
        r->cpu_sys_s = (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                       (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
        r->minor_faults = (uint64_t)(ru1.ru_minflt - ru0.ru_minflt);
    }
    /* every future is collected (or given up after RP_FUTURE_TIMEOUT_MS) */
    if (rp_collector_close(&r->col) != 0) {
        fprintf(stderr, "fluxon demo: the future collector did not finish\n");
        leaked = -1;
    }
    return leaked;
}
