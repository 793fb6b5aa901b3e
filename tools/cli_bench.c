/* cli_bench.c — `fluxon bench-hostless` and `fluxon bench-kv`: latency and throughput
 * of the public API on an embedded cluster (master + two owners in this process, one
 * client per owner). Figures, not pass/fail: p50/p99 per call and keys/s or ops/s.
 * CLI-side code: public API only. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_bench.h"
#include "cli_util.h"
#include "fluxon.h"

typedef struct bn_series {
    const char *name;
    double *v;
    size_t n, cap;
} bn_series_t;

static double bn_now_us(void)
{
    return (double)fx_cli_now_ns() / 1e3;
}

static void bn_add(bn_series_t *s, double us)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = us;
}

static int bn_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bn_print(const bn_series_t *s)
{
    if (!s->n) return;
    qsort(s->v, s->n, sizeof *s->v, bn_cmp);
    printf("  %-28s n=%-6zu p50 %9.1f us   p99 %9.1f us\n", s->name, s->n, s->v[s->n / 2],
           s->v[(size_t)((s->n - 1) * 0.99)]);
}

/* bn_up's segment for values of value_len (3 slots a value, whole grants of >= 64 MiB) and
 * its grant. */
static uint64_t bn_segment_bytes(uint64_t value_len, uint64_t values, uint64_t *grant_p)
{
    uint64_t slot = (value_len + 4095) / 4096 * 4096;
    uint64_t grant = slot * 64;
    while (grant < (64ull << 20)) grant += slot * 64;
    if (grant_p) *grant_p = grant;
    return ((slot * values * 3) / grant + 2) * grant; /* the header page is on top */
}

/* $TMPDIR when it is a plain path (it goes into a JSON config and an rm command), else /tmp */
static const char *bn_tmpdir(size_t max)
{
    const char *t = getenv("TMPDIR");
    if (!t || !*t || t[0] != '/' || strlen(t) > max) return "/tmp";
    for (const char *p = t; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/._-", *p)))
            return "/tmp";
    return t;
}

typedef struct bn_cluster {
    char dir[64];
    fluxon_node *master, *owner[2];
    fluxon_client *client[2];
} bn_cluster_t;

static int bn_up(bn_cluster_t *c, uint64_t value_len, size_t values)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s/fluxon-bench-XXXXXX", bn_tmpdir(sizeof c->dir - 24));
    if (!mkdtemp(c->dir)) return FLUXON_ERR_INTERNAL;
    int rc = fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"bench\",\"listen\":\"127.0.0.1:0\","
                               "\"log_level\":\"warn\"}", &c->master);
    if (rc) return rc;
    uint64_t grant, seg = bn_segment_bytes(value_len, values, &grant);
    for (int i = 0; i < 2; i++) {
        char cfg[1024];
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"owner\",\"cluster_id\":\"bench\",\"node_id\":\"bench-%d\",\"master\":\"127.0.0.1:%u\","
                 "\"socket\":\"%s/o%d/s.sock\",\"segment_bytes\":%llu,\"reserve\":{\"grant_bytes\":%llu},"
                 "\"start_timeout_ms\":120000,\"log_level\":\"warn\"}", i, fluxon_node_port(c->master), c->dir, i, (unsigned long long)seg,
                 (unsigned long long)grant);
        if ((rc = fluxon_node_start(cfg, &c->owner[i]))) return rc;
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"external\",\"cluster_id\":\"bench\",\"socket\":\"%s/o%d/s.sock\",\"log_level\":\"warn\"}",
                 c->dir, i);
        if ((rc = fluxon_client_open(cfg, &c->client[i]))) return rc;
    }
    return FLUXON_OK;
}

static void bn_down(bn_cluster_t *c)
{
    for (int i = 0; i < 2; i++) fluxon_client_close(c->client[i]);
    for (int i = 0; i < 2; i++) fluxon_node_stop(c->owner[i]);
    fluxon_node_stop(c->master);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
    if (system(cmd)) {}
}

/* A benchmark's options: each "--name VALUE" in min..max (units: a size); an unknown option,
 * a missing value or one out of range is a usage error (2), named. */
typedef struct bn_opt {
    const char *name;
    uint64_t min, max;
    int units;
    long *val; /* in: the default; out: the value given */
} bn_opt_t;

static int bn_args(const char *who, int argc, char **argv, const bn_opt_t *o, size_t n)
{
    for (int i = 1; i < argc; i++) {
        size_t k = 0;
        while (k < n && strcmp(argv[i], o[k].name)) k++;
        if (k == n) {
            fprintf(stderr, "fluxon %s: unknown option %s (options:", who, argv[i]);
            for (k = 0; k < n; k++) fprintf(stderr, " %s N", o[k].name);
            fprintf(stderr, ")\n");
            return 2;
        }
        if (i + 1 == argc) {
            fprintf(stderr, "fluxon %s: %s needs a value (%llu..%llu)\n", who, argv[i], (unsigned long long)o[k].min,
                    (unsigned long long)o[k].max);
            return 2;
        }
        uint64_t v;
        if (fx_cli_parse_u64(who, o[k].name, argv[++i], o[k].min, o[k].max, o[k].units, &v)) return 2;
        *o[k].val = (long)v;
    }
    return 0;
}

/* The two owners' segments (bn_up) must fit in 90 % of this host's memory, as the demo's:
 * refused before any is made, naming the options (before, a large --count ran until killed,
 * and a large --value-len failed as "cluster did not start" blaming segment_bytes). */
static int bn_fits(const char *who, uint64_t value_len, uint64_t values, const char *count_opt)
{
    uint64_t need = 2 * bn_segment_bytes(value_len, values, NULL); /* options' ranges: no overflow */
    uint64_t ram = fx_cli_host_ram();
    if (!ram || need <= ram / 10 * 9) return 0;
    fprintf(stderr, "fluxon %s: --value-len %llu x %s %llu needs %.1f GiB of segments (two owners, 3 slots a "
            "value), more than 90 %% of this host's %.1f GiB of memory\n", who, (unsigned long long)value_len,
            count_opt, (unsigned long long)values, (double)need / (1u << 30), (double)ram / (1u << 30));
    return 2;
}


/* One hostless round: put a batch through owner 0, restore it locally, through owner 1
 * (remote the first time), and a batch of misses. */
int fx_cli_bench_hostless(int argc, char **argv)
{
    long batch = 64, vlen = 4718592, iters = 20;
    const bn_opt_t opts[] = {{"--batch", 1, 4096, 0, &batch}, {"--value-len", 1, 1ull << 30, 1, &vlen},
                             {"--iters", 1, 1000000, 0, &iters}};
    int arc = bn_args("bench-hostless", argc, argv, opts, sizeof opts / sizeof *opts);
    if (arc || (arc = bn_fits("bench-hostless", (uint64_t)vlen, (uint64_t)batch * 2, "--batch x 2"))) return arc;
    bn_cluster_t c;
    int rc = bn_up(&c, (uint64_t)vlen, (size_t)batch * 2);
    if (rc) {
        fprintf(stderr, "fluxon bench-hostless: cluster did not start: %s\n", fluxon_status_string(rc));
        bn_down(&c);
        return 1;
    }
    /* steady state: the owners' and the clients' segment prefault threads are done */
    if (fx_cli_wait_prefault(c.owner, 2, c.client, 2, 120000, NULL) != 0)
        fprintf(stderr, "fluxon bench-hostless: the segment prefault did not end within 120 s; measuring anyway\n");
    bn_series_t s_ps = {.name = "put_start"}, s_pc = {.name = "put_commit (local-ready)"}, s_fut = {.name = "future (global)"},
                s_gl = {.name = "get_start all-local"}, s_gm = {.name = "get_start all-miss"}, s_gr = {.name = "get_start remote"},
                s_gt = {.name = "get_transfer"}, s_rv = {.name = "release_views"}, s_cyc = {.name = "local get_start+transfer"},
                s_put = {.name = "local put_start+commit"};
    char (*keys)[64] = malloc((size_t)batch * 64), (*miss)[64] = malloc((size_t)batch * 64);
    const char **kp = malloc((size_t)batch * sizeof *kp), **mp = malloc((size_t)batch * sizeof *mp);
    double bytes_remote = 0, t_remote = 0, keys_done = 0, t_keys = 0;
    int errors = 0;
    for (long it = 0; it < iters && !errors; it++) {
        for (long i = 0; i < batch; i++) {
            snprintf(keys[i], 64, "bench-%ld-%ld", it, i);
            snprintf(miss[i], 64, "absent-%ld-%ld", it, i);
            kp[i] = keys[i];
            mp[i] = miss[i];
        }
        fluxon_plan *plan = NULL;
        double t0 = bn_now_us();
        rc = fluxon_local_fast_put_start(c.client[0], kp, (size_t)batch, (uint64_t)vlen, NULL, &plan, NULL);
        double t1 = bn_now_us();
        if (rc) { errors++; break; }
        for (long i = 0; i < batch; i++) memset((void *)(uintptr_t)plan->value_ptrs[i], (int)(it + i), (size_t)vlen);
        fluxon_future *f = NULL;
        double t2 = bn_now_us();
        rc = fluxon_local_fast_put_commit(c.client[0], plan, &f);
        double t3 = bn_now_us();
        if (rc || fluxon_future_wait(f, 30000) != FLUXON_OK) { errors++; fluxon_future_free(f); break; }
        double t4 = bn_now_us();
        fluxon_future_free(f);
        bn_add(&s_ps, t1 - t0);
        bn_add(&s_pc, t3 - t2);
        bn_add(&s_fut, t4 - t2);
        bn_add(&s_put, (t1 - t0) + (t3 - t2));
        keys_done += (double)batch;
        t_keys += (t1 - t0) + (t3 - t2);
        /* all-local restore */
        fluxon_get_handle *h;
        fluxon_get_start_result r;
        fluxon_plan *rp;
        t0 = bn_now_us();
        rc = fluxon_get_start(c.client[0], kp, (size_t)batch, 1, NULL, 0, &h, &r);
        t1 = bn_now_us();
        if (rc || !r.all_hit) { errors++; break; }
        rc = fluxon_get_transfer(c.client[0], h, 0, &rp);
        t2 = bn_now_us();
        if (rc) { errors++; break; }
        fluxon_release_views(c.client[0], rp);
        t3 = bn_now_us();
        bn_add(&s_gl, t1 - t0);
        bn_add(&s_gt, t2 - t1);
        bn_add(&s_rv, t3 - t2);
        bn_add(&s_cyc, t2 - t0);
        /* remote restore through owner 1 (UCX) */
        t0 = bn_now_us();
        rc = fluxon_get_start(c.client[1], kp, (size_t)batch, 1, NULL, 0, &h, &r);
        t1 = bn_now_us();
        if (rc || !r.all_hit) { errors++; break; }
        fluxon_get_transfer(c.client[1], h, 0, &rp);
        fluxon_release_views(c.client[1], rp);
        bn_add(&s_gr, t1 - t0);
        bytes_remote += (double)batch * (double)vlen;
        t_remote += t1 - t0;
        /* all miss */
        t0 = bn_now_us();
        rc = fluxon_get_start(c.client[0], mp, (size_t)batch, 1, NULL, 0, &h, &r);
        t1 = bn_now_us();
        if (rc || r.raw_prefix_hit_len) { errors++; break; }
        fluxon_cancel_get_transfer(c.client[0], h);
        bn_add(&s_gm, t1 - t0);
        /* free the owners' memory for the next round */
        for (long i = 0; i < batch; i++) fluxon_delete(c.client[0], kp[i]);
    }
    printf("fluxon bench-hostless: batch %ld x %ld bytes, %ld rounds, master + 2 owners in one process%s\n", batch,
           vlen, iters, errors ? " (STOPPED ON ERROR)" : "");
    bn_series_t *all[] = {&s_ps, &s_pc, &s_fut, &s_put, &s_gl, &s_gt, &s_rv, &s_cyc, &s_gm, &s_gr};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) bn_print(all[i]);
    if (t_keys > 0) printf("  local put keys/s: %.0f (put_start+commit)\n", keys_done / (t_keys / 1e6));
    if (t_remote > 0) printf("  remote restore: %.2f GB/s (get_start incl. UCX fetch, 1 GB = 1e9 B)\n", bytes_remote / (t_remote * 1e3));
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]->v);
    free(keys);
    free(miss);
    free(kp);
    free(mp);
    bn_down(&c);
    return errors ? 1 : 0;
}

/* Plain KV ops/s: puts kept on the writer's owner (local_first) and placed by the master
 * (the default: a random owner of the two), then gets of the local_first keys, local and
 * through the other owner. */
int fx_cli_bench_kv(int argc, char **argv)
{
    long vlen = 4096, n = 2000;
    const bn_opt_t opts[] = {{"--value-len", 1, 1ull << 30, 1, &vlen}, {"--count", 1, 10000000, 0, &n}};
    int arc = bn_args("bench-kv", argc, argv, opts, sizeof opts / sizeof *opts);
    if (arc || (arc = bn_fits("bench-kv", (uint64_t)vlen, (uint64_t)n, "--count"))) return arc;
    bn_cluster_t c;
    int rc = bn_up(&c, (uint64_t)vlen, (size_t)n); /* 3n slots per owner: room for both sets */
    if (rc) {
        fprintf(stderr, "fluxon bench-kv: cluster did not start: %s\n", fluxon_status_string(rc));
        bn_down(&c);
        return 1;
    }
    char *val = malloc((size_t)vlen);
    memset(val, 7, (size_t)vlen);
    char key[64];
    int errors = 0;
    fluxon_put_options lf = {.field_mask = FLUXON_PUT_OPT_LOCAL_FIRST, .local_first = 1};
    double tp = bn_now_us();
    for (long i = 0; i < n && !errors; i++) {
        snprintf(key, sizeof key, "placed-%ld", i);
        errors += fluxon_put(c.client[0], key, val, (uint64_t)vlen, NULL) != FLUXON_OK;
    }
    double t3 = 0, t0 = bn_now_us();
    for (long i = 0; i < n && !errors; i++) {
        snprintf(key, sizeof key, "kv-%ld", i);
        errors += fluxon_put(c.client[0], key, val, (uint64_t)vlen, &lf) != FLUXON_OK;
    }
    double t1 = bn_now_us();
    /* the same puts pinned for a minute (issue 42: what a pin costs; pins keep values here) */
    fluxon_put_options pin = {.field_mask = FLUXON_PUT_OPT_PIN_TTL, .pin_ttl_ms = 60000};
    for (long i = 0; i < n && !errors; i++) {
        snprintf(key, sizeof key, "pin-%ld", i);
        errors += fluxon_put(c.client[0], key, val, (uint64_t)vlen, &pin) != FLUXON_OK;
    }
    double t1p = bn_now_us(), pinned_s = (t1p - t1) / 1e6;
    t1 = t1p;
    for (long i = 0; i < n && !errors; i++) { /* the writer's owner: local */
        snprintf(key, sizeof key, "kv-%ld", i);
        fluxon_holder *h = NULL;
        errors += fluxon_get(c.client[0], key, &h) != FLUXON_OK;
        fluxon_holder_release(h);
    }
    double t2 = bn_now_us();
    for (int pass = 0; pass < 2 && !errors; pass++) { /* the other owner: remote, then its replica */
        for (long i = 0; i < n && !errors; i++) {
            snprintf(key, sizeof key, "kv-%ld", i);
            fluxon_holder *h = NULL;
            errors += fluxon_get(c.client[1], key, &h) != FLUXON_OK;
            fluxon_holder_release(h);
        }
        if (pass == 0) t3 = bn_now_us();
    }
    double t4 = bn_now_us();
    double gb = (double)n * (double)vlen / 1e9;
    printf("fluxon bench-kv: %ld values of %ld bytes, one client thread per owner%s\n", n, vlen,
           errors ? " (ERRORS)" : "");
    printf("  put (placed, published)   %9.0f ops/s  %6.2f GB/s (random of 2 owners: about half pushed over UCX)\n",
           n / ((t0 - tp) / 1e6), gb / ((t0 - tp) / 1e6));
    printf("  put (local_first)         %9.0f ops/s  %6.2f GB/s\n", n / ((t1 - pinned_s * 1e6 - t0) / 1e6),
           gb / ((t1 - pinned_s * 1e6 - t0) / 1e6));
    printf("  put (pinned 60 s)         %9.0f ops/s  %6.2f GB/s (local, pin_ttl_ms)\n", n / pinned_s, gb / pinned_s);
    printf("  get (local)               %9.0f ops/s  %6.2f GB/s (zero-copy: a holder on shared memory)\n",
           n / ((t2 - t1) / 1e6), gb / ((t2 - t1) / 1e6));
    printf("  get (remote, UCX copy)    %9.0f ops/s  %6.2f GB/s\n", n / ((t3 - t2) / 1e6), gb / ((t3 - t2) / 1e6));
    printf("  get (remote, replica)     %9.0f ops/s\n", n / ((t4 - t3) / 1e6));
    free(val);
    bn_down(&c);
    return errors ? 1 : 0;
}

/* The batch copy API next to the hostless C path doing the same copies: put_start +
 * memcpy from the caller's buffers + commit + publication, get_start + transfer + memcpy
 * into the caller's buffers + release; GB/s of value bytes (1 GB = 1e9 B), local owner. */
typedef struct bn_bufs {
    const char **kp;
    char (*keys)[64];
    const void **src;
    void **dst;
    uint64_t *lens;
    int *st;
} bn_bufs_t;

static int bn_hostless_copy_round(fluxon_client *c, bn_bufs_t *b, long batch, long vlen, double *put_us, double *get_us)
{
    fluxon_plan *plan = NULL;
    fluxon_future *f = NULL;
    double t0 = bn_now_us();
    if (fluxon_local_fast_put_start(c, b->kp, (size_t)batch, (uint64_t)vlen, NULL, &plan, b->st)) return 1;
    for (long i = 0; i < batch; i++) memcpy((void *)(uintptr_t)plan->value_ptrs[i], b->src[i], (size_t)vlen);
    if (fluxon_local_fast_put_commit(c, plan, &f)) return 1;
    int rc = fluxon_future_wait(f, 30000);
    fluxon_future_free(f);
    double t1 = bn_now_us();
    fluxon_get_handle *h;
    fluxon_get_start_result r;
    if (rc || fluxon_get_start(c, b->kp, (size_t)batch, 1, NULL, 0, &h, &r) || !r.all_hit) return 1;
    if (fluxon_get_transfer(c, h, 0, &plan)) return 1;
    for (long i = 0; i < batch; i++) memcpy(b->dst[i], (const void *)(uintptr_t)plan->value_ptrs[i], (size_t)vlen);
    fluxon_release_views(c, plan);
    double t2 = bn_now_us();
    *put_us += t1 - t0;
    *get_us += t2 - t1;
    return 0;
}

static int bn_batch_round(fluxon_client *c, bn_bufs_t *b, long batch, double *put_us, double *get_us)
{
    double t0 = bn_now_us();
    if (fluxon_batch_put_from(c, b->kp, (size_t)batch, b->src, b->lens, NULL, b->st) || b->st[0]) return 1;
    double t1 = bn_now_us();
    size_t nr = 0;
    if (fluxon_batch_get_into(c, b->kp, (size_t)batch, b->dst, b->lens, 1, NULL, 0, b->st, NULL, &nr) ||
        nr != (size_t)batch)
        return 1;
    double t2 = bn_now_us();
    *put_us += t1 - t0;
    *get_us += t2 - t1;
    return 0;
}

int fx_cli_bench_batch(int argc, char **argv)
{
    long batch = 64, vlen = 1048576, iters = 20;
    const bn_opt_t opts[] = {{"--batch", 1, 4096, 0, &batch}, {"--value-len", 1, 1ull << 30, 1, &vlen},
                             {"--iters", 1, 1000000, 0, &iters}};
    int arc = bn_args("bench-batch", argc, argv, opts, sizeof opts / sizeof *opts);
    if (arc || (arc = bn_fits("bench-batch", (uint64_t)vlen, (uint64_t)batch * 2, "--batch x 2"))) return arc;
    bn_cluster_t c;
    int rc = bn_up(&c, (uint64_t)vlen, (size_t)batch * 2);
    if (rc) {
        fprintf(stderr, "fluxon bench-batch: cluster did not start: %s\n", fluxon_status_string(rc));
        bn_down(&c);
        return 1;
    }
    bn_bufs_t b = {malloc((size_t)batch * sizeof(char *)), malloc((size_t)batch * 64),
                   malloc((size_t)batch * sizeof(void *)), malloc((size_t)batch * sizeof(void *)),
                   malloc((size_t)batch * sizeof(uint64_t)), malloc((size_t)batch * sizeof(int))};
    for (long i = 0; i < batch; i++) {
        b.src[i] = malloc((size_t)vlen);
        b.dst[i] = malloc((size_t)vlen);
        memset((void *)b.src[i], (int)i, (size_t)vlen);
        memset(b.dst[i], 0, (size_t)vlen); /* touched: no page faults in the timed copies */
        b.lens[i] = (uint64_t)vlen;
        b.kp[i] = b.keys[i];
    }
    double hp = 0, hg = 0, bp = 0, bg = 0;
    int errors = 0;
    for (long it = 0; it < iters * 2 && !errors; it++) {
        for (long i = 0; i < batch; i++) snprintf(b.keys[i], 64, "bb-%ld-%ld", it, i);
        /* alternate the two paths so both see the same segment state */
        errors += (it & 1) ? bn_batch_round(c.client[0], &b, batch, &bp, &bg)
                           : bn_hostless_copy_round(c.client[0], &b, batch, vlen, &hp, &hg);
        for (long i = 0; i < batch; i++) fluxon_delete(c.client[0], b.kp[i]);
    }
    double gb = (double)iters * (double)batch * (double)vlen / 1e9;
    printf("fluxon bench-batch: batch %ld x %ld bytes, %ld rounds per path, one owner, copies in the caller's thread%s\n",
           batch, vlen, iters, errors ? " (STOPPED ON ERROR)" : "");
    if (!errors) {
        printf("  put   hostless C (put_start+memcpy+commit+wait) %7.2f GB/s   batch_put_from %7.2f GB/s\n",
               gb / (hp / 1e6), gb / (bp / 1e6));
        printf("  get   hostless C (get_start+transfer+memcpy+release) %7.2f GB/s   batch_get_into %7.2f GB/s\n",
               gb / (hg / 1e6), gb / (bg / 1e6));
        printf("  per batch: hostless put %.1f us, batch put %.1f us, hostless get %.1f us, batch get %.1f us\n",
               hp / iters, bp / iters, hg / iters, bg / iters);
    }
    for (long i = 0; i < batch; i++) {
        free((void *)b.src[i]);
        free(b.dst[i]);
    }
    free(b.kp);
    free(b.keys);
    free(b.src);
    free(b.dst);
    free(b.lens);
    free(b.st);
    bn_down(&c);
    return errors ? 1 : 0;
}
