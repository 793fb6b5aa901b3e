/* replay_report.c — the results of `fluxon demo`: latency samples, the totals merged from
 * the workers and the collector, the printed summary, and with --out summary.json (cJSON),
 * timeseries.csv (per second, or per 1/60 of the requests when shorter than 60 s) and
 * latency_cdf.csv. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "replay.h"

void rp_samples_push(rp_samples *s, uint64_t ns)
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
uint64_t rp_pct(const uint64_t *v, size_t n, double p)
{
    if (n == 0) return 0;
    double r = ceil(p / 100.0 * (double)n);
    size_t i = r < 1 ? 0 : (size_t)r - 1;
    return v[i < n ? i : n - 1];
}

typedef struct rp_totals {
    uint64_t requests, lookups, hits, raw_hits, remote_hits, checksum_failures, length_mismatches, errors, skipped;
    uint64_t bytes_restored, bytes_written, contract_violations;
    uint64_t skipped_batches; /* futures refused at publish (batches, not keys) */
    uint64_t fill_ns, check_ns; /* the workers' own value work (rp_worker) */
    uint64_t worker_cpu_ns;     /* the workers' threads' CPU time */
    uint64_t errors_by[RP_NSTATUS], skipped_by[RP_NSTATUS];
    rp_samples lat[RP_NCALLS];    /* merged and sorted */
    double secs, req_per_s, ratio, ref_ratio, lru_ref_ratio, policy_ref_ratio;
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
        t->fill_ns += w->fill_ns;
        t->check_ns += w->check_ns;
        t->worker_cpu_ns += w->cpu_ns;
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
    t->length_mismatches = atomic_load(&r->length_mismatches);
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
    t->policy_ref_ratio = r->ref_lookups ? (double)r->policy_ref_hits / (double)r->ref_lookups : 0;
    t->baseline_ok = baseline_ok;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) t->peak_rss_kib = ru.ru_maxrss;
}

static void rp_totals_free(rp_totals *t)
{
    for (int c = 0; c < RP_NCALLS; c++) free(t->lat[c].v);
}

/* The mean of a call's samples in us: what the call adds to a worker's time, tails included. */
static double rp_mean_us(const rp_samples *s)
{
    double sum = 0;
    for (size_t k = 0; k < s->n; k++) sum += (double)s->v[k];
    return s->n ? sum / (double)s->n / 1e3 : 0;
}

static void rp_print_summary(const rp_run *r, const rp_totals *t)
{
    const rp_opts *o = &r->o;
    printf("fluxon %s demo: %s, %llu requests, value_len %llu, tp %u, %u page(s)/group, %u owner(s) x %u worker thread(s), speed %s\n",
           fluxon_version(), o->trace, (unsigned long long)t->requests, (unsigned long long)o->value_len, o->tp,
           o->group_pages, r->n_owners, o->workers, o->speed > 0 ? "paced" : "max");
    if (o->speed > 0) printf("  paced at %gx the trace's timestamps\n", o->speed);
    if (!o->n_configs)
        printf("  embedded cluster: segment_bytes %llu = %llu grant(s) of %llu bytes per owner (plus its 4096-byte "
               "header page)%s\n", (unsigned long long)r->segment_bytes,
               (unsigned long long)(r->grant_bytes ? r->segment_bytes / r->grant_bytes : 0),
               (unsigned long long)r->grant_bytes,
               o->capacity_blocks ? "; the hot tier is --capacity-blocks, the rest headroom for puts in flight" : "");
    if (r->t_setup_ns && r->t_start_ns >= r->t_opened_ns && r->t_opened_ns >= r->t_open_ns &&
        r->t_open_ns >= r->t_setup_ns)
        printf("  before the replay: %.2f s (cluster %.2f s; clients %.2f s: each maps its owner's segment and "
               "starts faulting its page tables in; then %.2f s until the owners' and the clients' prefault was done)\n",
               (double)(r->t_start_ns - r->t_setup_ns) / 1e9, (double)(r->t_open_ns - r->t_setup_ns) / 1e9,
               (double)(r->t_opened_ns - r->t_open_ns) / 1e9, (double)(r->t_start_ns - r->t_opened_ns) / 1e9);
    if (r->trace.skipped_lines)
        printf("  skipped %zu malformed trace line(s), first at line %zu\n", r->trace.skipped_lines,
               r->trace.first_skipped_line);
    printf("requests          %llu in %.2f s = %.1f requests/s\n", (unsigned long long)t->requests, t->secs,
           t->req_per_s);
    if (rp_interrupted) /* the workers stop at a signal before the waiter can say it */
        printf("interrupted       by a signal after %llu of %zu requests: the figures below cover those, the "
               "references the whole trace (exit 1)\n", (unsigned long long)t->requests, r->n_req);
    double rem = t->lookups ? 100.0 * (double)t->remote_hits / (double)t->lookups : 0;
    printf("block lookups     %llu; prefix hits %llu = %.2f %% (local %.2f %%, remote %.2f %%%s); raw %llu\n",
           (unsigned long long)t->lookups, (unsigned long long)t->hits, 100 * t->ratio, 100 * t->ratio - rem, rem,
           t->remote_known ? "" : ", remote_hits not reported by the owners", (unsigned long long)t->raw_hits);
    printf("reference         %.2f %% prefix hits (unlimited capacity, trace order, same keys)\n", 100 * t->ref_ratio);
    if (o->capacity_blocks)
        printf("reference LRU     %.2f %% prefix hits (LRU of %llu pages, trace order, same keys)\n",
               100 * t->lru_ref_ratio, (unsigned long long)o->capacity_blocks);
    if (o->capacity_blocks)
        printf("policy simulator  %.2f %% prefix hits (%s, its own code offline, one block = one value)\n",
               100 * t->policy_ref_ratio, o->eviction_policy);
    rp_tenants_print(r);
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
    uint64_t twice = t->skipped_batches, lost = 0; /* stored once elsewhere, or not stored at all */
    for (int s = 0; s < RP_NSTATUS; s++) {
        const char *nm = rp_status_name(s);
        if (!strcmp(nm, "FLUXON_ERR_KEY_EXISTS") || !strcmp(nm, "FLUXON_ERR_KEY_BEING_WRITTEN")) twice += t->skipped_by[s];
        else lost += t->skipped_by[s];
    }
    if (twice) printf("  (%s: pages another worker was storing at that moment or had stored: stored once)",
                    lost ? "KEY_EXISTS, KEY_BEING_WRITTEN and batches refused at publish" : "all");
    if (lost) printf("  (%s not stored: no room for them, or their atomic group was refused whole; later misses)",
                     twice ? "the others were" : "pages");
    printf("\nchecksum failures %llu", (unsigned long long)t->checksum_failures);
    if (t->length_mismatches)
        printf("\nlength mismatches %llu (values another run stored with another --value-len under these keys: "
               "not read; use another --key-prefix)", (unsigned long long)t->length_mismatches);
    printf("\nerrors            %llu", (unsigned long long)t->errors);
    for (int s = 0; s < RP_NSTATUS; s++)
        if (t->errors_by[s]) printf("  %s %llu", rp_status_name(s), (unsigned long long)t->errors_by[s]);
    if (t->contract_violations) printf("  contract violations %llu", (unsigned long long)t->contract_violations);
    printf("\nfutures           completed %llu, refused at publish %llu (skipped backups), failed %llu, timed out %llu\n",
           (unsigned long long)r->col.completed, (unsigned long long)r->col.refused, (unsigned long long)r->col.failed,
           (unsigned long long)r->col.timed_out);
    printf("latency (us)      %-20s %9s %9s %9s %9s %9s %9s\n", "call", "n", "p50", "p90", "p99", "max", "mean");
    for (int c = 0; c < RP_NCALLS; c++) {
        const rp_samples *s = &t->lat[c];
        if (!s->n) continue;
        printf("                  %-20s %9zu %9.1f %9.1f %9.1f %9.1f %9.1f\n", rp_call_names[c], s->n,
               rp_pct(s->v, s->n, 50) / 1e3, rp_pct(s->v, s->n, 90) / 1e3, rp_pct(s->v, s->n, 99) / 1e3,
               s->v[s->n - 1] / 1e3, rp_mean_us(s));
    }
    rp_owner_side_print(r); /* the owners' side of those calls */
    if (t->requests && t->secs > 0) {
        double fill = (double)t->fill_ns / 1e3 / (double)t->requests, chk = (double)t->check_ns / 1e3 / (double)t->requests;
        printf("engine work       %.1f us per request writing values, %.1f us copying and checking restored ones "
               "(the engine's side, as in Mooncake's replay): %.0f %% of the workers' time\n", fill, chk,
               100.0 * (double)(t->fill_ns + t->check_ns) / 1e9 / (t->secs * r->n_workers));
        printf("cpu               %.2f s of process CPU in the replay (user %.2f, sys %.2f: %s) = %.1f us per "
               "request, of which the workers' threads %.1f us (engine work included)\n",
               r->cpu_user_s + r->cpu_sys_s, r->cpu_user_s, r->cpu_sys_s,
               r->cl.embedded ? "master, owners, clients and workers together"
                              : "clients and workers; the --config cluster's nodes run elsewhere",
               (r->cpu_user_s + r->cpu_sys_s) * 1e6 / (double)t->requests,
               (double)t->worker_cpu_ns / 1e3 / (double)t->requests);
        printf("page faults       %llu minor in the replay = %.1f per request (first touches of memory the "
               "heaps and tables grow into)\n",
               (unsigned long long)r->minor_faults, (double)r->minor_faults / (double)t->requests);
    }
    printf("baseline (R1)     %s", t->baseline_ok ? "ok: nothing left in flight (handles, plans, pinned pages, puts)"
                                                  : "NOT REACHED: something was left in flight");
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
            for (int i = 0; i < RP_NBASELINE; i++)
                if (s->absent_mask & (1u << i)) printf(" %s", rp_baseline_fields[i].key);
            printf(")");
        }
    }
    printf("\npeak RSS          %.1f MiB (one process: nodes, clients and workers)\n", t->peak_rss_kib / 1024.0);
    if (r->cl.embedded && r->segment_bytes) {
        /* each worker's client maps its owner's segment too, and RSS counts shared pages
         * once per mapping: the memory in use counts each segment once */
        double seg = (double)r->segment_bytes * r->n_owners / 1048576.0;
        double dup = (double)r->segment_bytes * r->n_workers / 1048576.0;
        printf("memory in use     about %.0f MiB: RSS counts the %.0f MiB of segments once per mapping (the owners "
               "and %u worker clients)\n", t->peak_rss_kib / 1024.0 - dup > seg ? t->peak_rss_kib / 1024.0 - dup : seg,
               seg, r->n_workers);
    }
}

int rp_mkdirs(const char *dir)
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

/* the run's totals, as flat keys; errors and skipped backups by status */
static void rp_json_totals(cJSON *j, const rp_run *r, const rp_totals *t)
{
    cJSON_AddNumberToObject(j, "requests", (double)t->requests);
    cJSON_AddNumberToObject(j, "lookups", (double)t->lookups);
    cJSON_AddNumberToObject(j, "prefix_hits", (double)t->hits);
    cJSON_AddNumberToObject(j, "raw_prefix_hits", (double)t->raw_hits);
    cJSON_AddNumberToObject(j, "prefix_hit_ratio", t->ratio);
    rp_tenants_json(j, r); /* issue 42: per tenant */
    cJSON_AddNumberToObject(j, "reference_prefix_hit_ratio", t->ref_ratio);
    if (r->o.capacity_blocks) cJSON_AddNumberToObject(j, "reference_lru_prefix_hit_ratio", t->lru_ref_ratio);
    if (r->o.capacity_blocks) cJSON_AddNumberToObject(j, "reference_policy_prefix_hit_ratio", t->policy_ref_ratio);
    cJSON_AddStringToObject(j, "eviction_policy", r->o.eviction_policy);
    cJSON_AddNumberToObject(j, "local_hits", (double)(t->hits > t->remote_hits ? t->hits - t->remote_hits : 0));
    cJSON_AddNumberToObject(j, "remote_hits", (double)t->remote_hits);
    cJSON_AddBoolToObject(j, "remote_hits_reported", t->remote_known);
    cJSON_AddNumberToObject(j, "checksum_failures", (double)t->checksum_failures);
    cJSON_AddNumberToObject(j, "length_mismatches", (double)t->length_mismatches);
    cJSON_AddNumberToObject(j, "errors", (double)t->errors);
    cJSON_AddNumberToObject(j, "contract_violations", (double)t->contract_violations);
    cJSON_AddNumberToObject(j, "skipped_backups", (double)t->skipped);
    cJSON_AddNumberToObject(j, "skipped_backup_batches", (double)t->skipped_batches);
    cJSON_AddNumberToObject(j, "bytes_restored", (double)t->bytes_restored);
    cJSON_AddNumberToObject(j, "bytes_written", (double)t->bytes_written);
    cJSON_AddNumberToObject(j, "elapsed_s", t->secs);
    cJSON_AddNumberToObject(j, "requests_per_s", t->req_per_s);
    cJSON_AddNumberToObject(j, "engine_fill_s", (double)t->fill_ns / 1e9);
    cJSON_AddNumberToObject(j, "engine_check_s", (double)t->check_ns / 1e9);
    cJSON_AddNumberToObject(j, "cpu_user_s", r->cpu_user_s);
    cJSON_AddNumberToObject(j, "minor_faults", (double)r->minor_faults);
    cJSON_AddNumberToObject(j, "cpu_sys_s", r->cpu_sys_s);
    cJSON_AddNumberToObject(j, "worker_cpu_s", (double)t->worker_cpu_ns / 1e9);
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
}

/* <call>_n, <call>_p50_us, _p90_us, _p99_us, _max_us, _mean_us for every call */
static void rp_json_latency(cJSON *j, const rp_totals *t)
{
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
        snprintf(k, sizeof k, "%s_mean_us", rp_call_names[c]);
        cJSON_AddNumberToObject(j, k, rp_mean_us(s));
    }
}

/* replay_owner.c's means: the owners' ring wait and answer times */
static void rp_json_owner_side(cJSON *j, const rp_run *r)
{
    cJSON_AddNumberToObject(j, "owner_ring_wait_mean_us", r->owner_ring_wait_us);
    cJSON_AddNumberToObject(j, "owner_get_start_mean_us", r->owner_get_start_us);
    cJSON_AddNumberToObject(j, "owner_put_start_mean_us", r->owner_put_start_us);
}

static cJSON *rp_json_owner(const rp_run *r, unsigned k)
{
    const rp_owner_stats *s = &r->owners[k];
    cJSON *ob = cJSON_CreateObject();
    if (!ob) return NULL;
    uint64_t played = 0; /* by this owner's workers: who takes which request is a race */
    for (unsigned i = 0; i < r->n_workers; i++)
        if (r->workers[i].owner == k) played += r->workers[i].requests;
    cJSON_AddNumberToObject(ob, "requests", (double)played);
    cJSON_AddBoolToObject(ob, "stats_ok", s->stats_ok);
    for (int i = 0; i < RP_NBASELINE; i++)
        cJSON_AddNumberToObject(ob, rp_baseline_fields[i].key, (double)rp_stat_get(s, &rp_baseline_fields[i]));
    cJSON_AddNumberToObject(ob, "remote_hit_keys", (double)(s->remote_hits_after - (s->remote_hits_after >= s->remote_hits_before ? s->remote_hits_before : s->remote_hits_after)));
    for (int i = 0; s->ev_known && i < RP_NEVICTION; i++)
        cJSON_AddNumberToObject(ob, rp_eviction_fields[i].key, (double)rp_stat_get(s, &rp_eviction_fields[i]));
    return ob;
}

/* "owners": one object each; "notes": the stats keys an owner did not report */
static void rp_json_owners(cJSON *j, const rp_run *r)
{
    cJSON *owners = cJSON_AddArrayToObject(j, "owners");
    cJSON *notes = cJSON_AddArrayToObject(j, "notes");
    for (unsigned k = 0; k < r->n_owners; k++) {
        const rp_owner_stats *s = &r->owners[k];
        cJSON_AddItemToArray(owners, rp_json_owner(r, k));
        char note[160];
        for (int i = 0; i < RP_NBASELINE; i++)
            if (s->absent_mask & (1u << i)) {
                snprintf(note, sizeof note, "owner %u: stats key \"%s\" absent, read as 0", k, rp_baseline_fields[i].key);
                cJSON_AddItemToArray(notes, cJSON_CreateString(note));
            }
        if (!s->remote_hits_known) {
            snprintf(note, sizeof note, "owner %u: stats key \"remote_hits\" absent, remote hits read as 0", k);
            cJSON_AddItemToArray(notes, cJSON_CreateString(note));
        }
    }
}

static void rp_json_config(cJSON *j, const rp_run *r)
{
    const rp_opts *o = &r->o;
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
}

/* j: the object the tier reports filled ("remote_capacity", "disk"; NULL: out of
 * memory), freed here. */
static int rp_write_summary_json(const rp_run *r, const rp_totals *t, cJSON *j)
{
    if (!j) return -1;
    rp_json_totals(j, r, t);
    rp_json_latency(j, t);
    rp_json_owner_side(j, r);
    rp_json_owners(j, r);
    rp_json_config(j, r);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return -1;
    FILE *f = rp_open_out(r->o.out_dir, "summary.json");
    int rc = -1;
    if (f) {
        rc = fprintf(f, "%s\n", text) < 0 ? -1 : 0;
        if (fclose(f) != 0) rc = -1;
    }
    free(text);
    return rc;
}

/* One row of timeseries.csv over the requests idx[0..n) (a, b, c: scratch of n). */
static void rp_ts_row(FILE *f, const rp_run *r, const size_t *idx, size_t n, const char *x, uint64_t *cum_l,
                      uint64_t *cum_h, uint64_t *a, uint64_t *b, uint64_t *c)
{
    uint64_t lk = 0, ht = 0, br = 0, bw = 0;
    size_t nb = 0, nc = 0;
    for (size_t k = 0; k < n; k++) {
        const rp_reqrec *q = &r->recs[idx[k]];
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
    *cum_l += lk;
    *cum_h += ht;
    fprintf(f, "%s,%zu,%llu,%llu,%.6f,%.6f,%.1f,%.1f,%.1f,%.1f,%llu,%llu\n", x, n, (unsigned long long)lk,
            (unsigned long long)ht, lk ? (double)ht / (double)lk : 0.0, *cum_l ? (double)*cum_h / (double)*cum_l : 0.0,
            rp_pct(a, n, 50) / 1e3, rp_pct(a, n, 99) / 1e3, rp_pct(b, nb, 50) / 1e3, rp_pct(c, nc, 50) / 1e3,
            (unsigned long long)br, (unsigned long long)bw);
}

typedef struct rp_tdone {
    uint64_t t;
    size_t i;
} rp_tdone;

static int rp_cmp_tdone(const void *x, const void *y)
{
    const rp_tdone *p = x, *q = y;
    return p->t < q->t ? -1 : p->t > q->t ? 1 : (p->i > q->i) - (p->i < q->i);
}

/* By completion time: requests, lookups, hits, hit ratio of the row and cumulative,
 * request latency p50/p99, get_start and put_start p50, bytes. A run of at least
 * RP_TS_ROWS seconds has a row per second ("second" = that second); a shorter one is
 * sampled by request count instead — RP_TS_ROWS rows of equal requests, "second" = when
 * the row's last request completed (fractional) — so a 4 s run still draws a curve. */
#define RP_TS_ROWS 60
static int rp_write_timeseries(const rp_run *r)
{
    size_t nd = 0, cap = r->n_req ? r->n_req : 1;
    rp_tdone *d = malloc(cap * sizeof *d);
    size_t *idx = malloc(cap * sizeof *idx);
    uint64_t *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b), *c = malloc(cap * sizeof *c);
    FILE *f = NULL;
    int rc = -1;
    if (!d || !idx || !a || !b || !c) goto out;
    for (size_t i = 0; i < r->n_req; i++)
        if (r->recs[i].done) d[nd++] = (rp_tdone){r->recs[i].t_done_ns, i};
    qsort(d, nd, sizeof *d, rp_cmp_tdone);
    for (size_t k = 0; k < nd; k++) idx[k] = d[k].i;
    if (!(f = rp_open_out(r->o.out_dir, "timeseries.csv"))) goto out;
    fprintf(f, "second,requests,lookups,prefix_hits,hit_ratio,cum_hit_ratio,request_p50_us,request_p99_us,"
               "get_start_p50_us,put_start_p50_us,bytes_restored,bytes_written\n");
    uint64_t cum_l = 0, cum_h = 0, secs = nd ? d[nd - 1].t / 1000000000ull + 1 : 0;
    char x[32];
    if (secs >= RP_TS_ROWS) { /* a row per second, empty seconds included */
        size_t k = 0;
        for (uint64_t sec = 0; sec < secs; sec++) {
            size_t k0 = k;
            while (k < nd && d[k].t / 1000000000ull == sec) k++;
            snprintf(x, sizeof x, "%llu", (unsigned long long)sec);
            rp_ts_row(f, r, idx + k0, k - k0, x, &cum_l, &cum_h, a, b, c);
        }
    } else { /* RP_TS_ROWS rows of (about) equal request counts */
        size_t per = nd / RP_TS_ROWS + (nd % RP_TS_ROWS != 0);
        for (size_t k0 = 0; per && k0 < nd; k0 += per) {
            size_t n = per < nd - k0 ? per : nd - k0;
            snprintf(x, sizeof x, "%.3f", (double)d[k0 + n - 1].t / 1e9);
            rp_ts_row(f, r, idx + k0, n, x, &cum_l, &cum_h, a, b, c);
        }
    }
    rc = 0;
out:
    if (f && fclose(f) != 0) rc = -1;
    free(d);
    free(idx);
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

int rp_report(rp_run *r)
{
    const rp_opts *o = &r->o;
    int baseline_ok = rp_stats_after(r);
    rp_tenants_tally(r);
    rp_totals t;
    rp_merge(r, &t, baseline_ok);
    rp_owner_side_collect(r);
    rp_print_summary(r, &t);
    cJSON *summary = o->out_dir ? cJSON_CreateObject() : NULL;
    int remote_rc = rp_remote_report(r, summary); /* issue 16: --cpu-owners */
    remote_rc |= rp_disk_report(r, summary);      /* issue 39: --disk-dir */
    fflush(stdout);
    int wrc = 0;
    if (o->out_dir) wrc = rp_write_summary_json(r, &t, summary) | rp_write_timeseries(r) | rp_write_cdf(r, &t);
    if (wrc) fprintf(stderr, "fluxon demo: could not write every file in %s\n", o->out_dir);
    int ex = t.errors == 0 && t.checksum_failures == 0 && t.length_mismatches == 0 && baseline_ok && !wrc && !rp_interrupted && !remote_rc &&
                     t.requests == r->n_req
                 ? 0
                 : 1;
    rp_totals_free(&t);
    return ex;
}
