/* cli_hot.c — `hot`: the hostless hot path in steady state against a running owner
 * (cli_hot.h). Unlike bench-hostless (a master and two owners in the benchmark's own
 * process), the owner here is its own process, as next to an inference engine. */
#include "cli_util.h" /* first: it defines _GNU_SOURCE */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_hot.h"

typedef struct hot_series {
    const char *name;
    uint64_t *ns;
    long n;
} hot_series_t;

static int hot_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void hot_print(hot_series_t *s)
{
    if (!s->n) return;
    qsort(s->ns, (size_t)s->n, sizeof *s->ns, hot_cmp);
    printf("  %-28s n=%-6ld p50 %9.1f us   p90 %9.1f us   p99 %9.1f us\n", s->name, s->n, s->ns[s->n / 2] / 1e3,
           s->ns[s->n * 9 / 10] / 1e3, s->ns[s->n * 99 / 100] / 1e3);
}

static long hot_arg(const char *name, const char *v, long lo, long hi)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        fprintf(stderr, "fluxon: hot: %s %s must be an integer in %ld..%ld\n", name, v, lo, hi);
        return -1;
    }
    return x;
}

/* Puts keys[0..n) with value_len bytes each (fill: a byte per batch), commits and waits
 * for the publish; ns[0]: put_start, ns[1]: put_commit (local-ready). st: n statuses (the
 * caller's). A key the owner turned down (no space, no master) aborts the plan: the first
 * refusal is returned and *refused counts them. */
static int hot_put(fluxon_client *c, const char *const *keys, long n, long vlen, int fill, int *st, long *refused,
                   uint64_t ns[2])
{
    fluxon_plan *plan = NULL;
    fluxon_future *f = NULL;
    uint64_t t0 = fx_cli_now_ns();
    int rc = fluxon_local_fast_put_start(c, keys, (size_t)n, (uint64_t)vlen, NULL, &plan, st);
    uint64_t t1 = fx_cli_now_ns();
    if (rc != FLUXON_OK) return rc;
    *refused = 0;
    for (long i = 0; i < n; i++)
        if (st[i] != FLUXON_OK && (*refused)++ == 0) rc = st[i];
    if (rc != FLUXON_OK) {
        fluxon_put_abort(c, plan);
        return rc;
    }
    for (long i = 0; i < n; i++) memset((void *)(uintptr_t)plan->value_ptrs[i], fill, (size_t)vlen);
    uint64_t t2 = fx_cli_now_ns();
    rc = fluxon_local_fast_put_commit(c, plan, &f);
    ns[0] = t1 - t0;
    ns[1] = fx_cli_now_ns() - t2;
    if (rc != FLUXON_OK) return rc;
    rc = fluxon_future_wait(f, fx_cli_timeout_ms);
    fluxon_future_free(f);
    return rc;
}

/* Deletes keys[0..n); stops at the first that timed out or found the owner or the master
 * gone (each of the others would wait as long: 64 keys x timeout_ms), saying how many it
 * left in note[] (printed after the run's own failure, which comes first), and makes that
 * status the run's (*rc, *failed) unless the run already failed */
static void hot_delete(fluxon_client *c, const char *const *keys, long n, int *rc_p, const char **failed_p,
                       char *note, size_t cap)
{
    for (long i = 0; i < n; i++) {
        int rc = fluxon_delete(c, keys[i]);
        if (rc == FLUXON_ERR_TIMEOUT || rc == FLUXON_ERR_UNAVAILABLE) {
            if (!note[0])
                snprintf(note, cap, "fluxon: hot: deleting its keys stopped at %s: %s (%ld of %ld left)\n", keys[i],
                         fluxon_status_string(rc), n - i, n);
            if (*rc_p == FLUXON_OK) *rc_p = rc, *failed_p = "a delete";
            return;
        }
    }
}

/* Why a restore of the batch just put missed a key: the owner's hot tier next to the batch. */
static void hot_miss_note(fluxon_client *c, const fluxon_get_start_result *r, long batch, long vlen, long it,
                          char *note, size_t cap)
{
    char *js = NULL;
    unsigned long long hot = 0;
    if (fx_cli_json_call(c, fluxon_client_stats, 1 << 16, &js) == FLUXON_OK) {
        const char *p = strstr(js, "\"hot_capacity_bytes\":");
        if (p) hot = strtoull(p + strlen("\"hot_capacity_bytes\":"), NULL, 10);
    }
    free(js);
    unsigned long long need = (unsigned long long)batch * (unsigned long long)vlen;
    int n = snprintf(note, cap, "fluxon: hot: restore %ld missed key %lld of the %ld just put: %s", it + 1,
                     (long long)r->first_miss_index, batch, fluxon_status_string(r->miss_status));
    if (r->miss_status == FLUXON_ERR_BUSY && n > 0 && (size_t)n < cap)
        snprintf(note + n, cap - (size_t)n, " (this client would pin more than its share of the owner, "
                 "client_limits.max_pinned_bytes: ¾ of the hot tier by default; --batch %ld x --value-len %ld = %llu "
                 "bytes a restore); lower --batch or --value-len\n", batch, vlen, need);
    else if (r->miss_status == FLUXON_ERR_NOT_FOUND && n > 0 && (size_t)n < cap && hot && need > hot / 2)
        snprintf(note + n, cap - (size_t)n, " (evicted: the batch, --batch %ld x --value-len %ld = %llu bytes, is %llu %% of "
                 "the owner's hot tier (hot_capacity_bytes %llu), whose eviction keeps room for the puts to come; "
                 "lower --batch or --value-len)\n", batch, vlen, need, need * 100 / hot, hot);
    else if (n > 0 && (size_t)n < cap)
        snprintf(note + n, cap - (size_t)n, "\n");
}

int fx_cli_hot(fluxon_client *c, int argc, char **argv)
{
    long batch = 64, vlen = 65536, iters = 2000;
    for (int i = 0; i < argc; i++) {
        long *dst = !strcmp(argv[i], "--batch") ? &batch : !strcmp(argv[i], "--value-len") ? &vlen
                                                         : !strcmp(argv[i], "--iters")   ? &iters : NULL;
        if (!dst) {
            fprintf(stderr, "fluxon: hot: unknown argument %s (--batch N, --value-len B, --iters N)\n", argv[i]);
            return 2;
        }
        if (i + 1 == argc || !strncmp(argv[i + 1], "--", 2)) {
            fprintf(stderr, "fluxon: hot: %s needs a value\n", argv[i]);
            return 2;
        }
        long hi = dst == &batch ? 4096 : dst == &vlen ? (64l << 20) : 10000000;
        if (dst == &vlen) { /* a size: the units `fluxon demo --value-len` and the configs take */
            uint64_t v = 0;
            if (fx_cli_parse_u64("hot", argv[i], argv[i + 1], 1, (uint64_t)hi, 1, &v) != 0) return 2;
            vlen = (long)v;
        } else if ((*dst = hot_arg(argv[i], argv[i + 1], 1, hi)) < 0) {
            return 2;
        }
        i++;
    }
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    char (*names)[64] = malloc((size_t)batch * 64);
    const char **keys = malloc((size_t)batch * sizeof *keys);
    int *st = malloc((size_t)batch * sizeof *st);
    long refused = 0;
    hot_series_t get = {"get_start+get_transfer", calloc((size_t)iters, 8), 0},
                 put = {"put_start+commit", calloc((size_t)iters, 8), 0},
                 start = {"  of which put_start", calloc((size_t)iters, 8), 0},
                 commit = {"  of which put_commit", calloc((size_t)iters, 8), 0};
    int rc = names && keys && st && get.ns && put.ns && start.ns && commit.ns ? FLUXON_OK : FLUXON_ERR_NOMEM;
    const char *failed = "memory";
    long pid = (long)getpid();
    for (long i = 0; rc == FLUXON_OK && i < batch; i++) {
        snprintf(names[i], 64, "hot:%ld:r:%ld", pid, i);
        keys[i] = names[i];
    }
    uint64_t ns[2];
    char note[512] = "";
    if (rc == FLUXON_OK && (rc = hot_put(c, keys, batch, vlen, 1, st, &refused, ns)) != FLUXON_OK) failed = "the first put";
    /* restores of the same batch */
    for (long it = 0; rc == FLUXON_OK && it < iters; it++) {
        fluxon_get_handle *h = NULL;
        fluxon_get_start_result r;
        fluxon_plan *rp = NULL;
        uint64_t t0 = fx_cli_now_ns();
        rc = fluxon_get_start(c, keys, (size_t)batch, 1, NULL, 0, &h, &r);
        if (rc == FLUXON_OK && !r.all_hit) {
            fluxon_cancel_get_transfer(c, h);
            rc = FLUXON_ERR_NOT_FOUND;
            hot_miss_note(c, &r, batch, vlen, it, note, sizeof note);
        }
        if (rc == FLUXON_OK) rc = fluxon_get_transfer(c, h, 0, &rp);
        get.ns[get.n++] = fx_cli_now_ns() - t0;
        if (rc == FLUXON_OK) fluxon_release_views(c, rp);
        else failed = "a restore";
    }
    /* the first batch, unless its put failed: a plan is stored whole or not at all */
    if (names && keys && strcmp(failed, "the first put") != 0) hot_delete(c, keys, batch, &rc, &failed, note, sizeof note);
    /* fresh batches */
    for (long it = 0; rc == FLUXON_OK && it < iters; it++) {
        for (long i = 0; i < batch; i++) snprintf(names[i], 64, "hot:%ld:p%ld:%ld", pid, it, i);
        if ((rc = hot_put(c, keys, batch, vlen, (int)it, st, &refused, ns)) != FLUXON_OK) {
            failed = "a put";
        } else {
            start.ns[start.n++] = ns[0];
            commit.ns[commit.n++] = ns[1];
            put.ns[put.n++] = ns[0] + ns[1];
        }
        hot_delete(c, keys, batch, &rc, &failed, note, sizeof note);
    }
    if (rc == FLUXON_OK) {
        printf("fluxon hot: batch %ld x %ld bytes, %ld rounds, against the owner of this client\n", batch, vlen, iters);
        hot_print(&get);
        hot_print(&put);
        hot_print(&start);
        hot_print(&commit);
    } else {
        fprintf(stderr, "fluxon: hot: %s failed: %s", failed, fluxon_status_string(rc));
        if (refused) fprintf(stderr, " (the owner turned down %ld of %ld keys)", refused, batch);
        else if (rc == FLUXON_ERR_WRONG_HANDLE)
            fprintf(stderr, " (the plan is no longer live: the owner releases one not committed within its "
                            "put_plan_ttl_ms)");
        fputc('\n', stderr);
        fx_cli_explain_unavailable(c, "hot", rc); /* why the owner is unavailable, as put, get and ping say */
        fputs(note, stderr);
    }
    free(names);
    free(keys);
    free(st);
    free(get.ns);
    free(put.ns);
    free(start.ns);
    free(commit.ns);
    /* the exit statuses of put/get/del: a refused argument (a value larger than the
     * owner's reserve.grant_bytes) is a usage error */
    return rc == FLUXON_OK ? 0 : rc == FLUXON_ERR_INVALID_ARGUMENT ? 2 : 1;
}
