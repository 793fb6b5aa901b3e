/* test_replay.c — the main job end to end: `fluxon demo` replays a 300-request slice of
 * the real trace through the hostless API (embedded master + owners, worker threads) and
 * must produce zero checksum failures, zero errors, counters back to baseline (R1), and
 * the prefix-hit ratio of the reference simulator: exactly with one worker, within 0.5
 * percentage point with two workers or two owners (which must show remote hits). */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>

#include "cli_trace.h"
#include "replayfix.h"

/* Runs the demo on the first 300 requests and returns its summary.json parsed. */
static cJSON *run_slice(const char *extra)
{
    static char out[8192], args[256];
    snprintf(args, sizeof args, "--requests 300 %s", extra);
    return run_demo(args, out, sizeof out);
}

/* The reference: unlimited capacity, trace order, the first 300 requests. */
static double reference_ratio(void)
{
    fx_cli_trace t;
    char err[256];
    cr_assert_eq(fx_cli_trace_load(trace_path(), 300, 0, &t, err, sizeof err), 0, "%s", err);
    fx_cli_sim_result r;
    cr_assert_eq(fx_cli_sim_run(&t, 300, 0, 1, &r), 0);
    fx_cli_trace_free(&t);
    return r.ratio;
}

/* The time of the last request's end (s since the run started): the last row of
 * timeseries.csv, whose first column is that for a run shorter than 60 s. */
static double last_done_s(void)
{
    char path[512], line[512], last[512] = "";
    snprintf(path, sizeof path, "%s/timeseries.csv", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no timeseries.csv");
    while (fgets(line, sizeof line, f)) snprintf(last, sizeof last, "%s", line);
    fclose(f);
    return strtod(last, NULL);
}

static void common_checks(cJSON *d)
{
    cr_assert_eq(num(d, "requests"), 300);
    cr_assert_eq(num(d, "checksum_failures"), 0, "D1: every restored byte verified");
    cr_assert_eq(num(d, "errors"), 0);
    cr_assert_eq(num(d, "baseline_ok"), 1, "R1: counters back to baseline");
    cr_assert_gt(num(d, "requests_per_s"), 0);
    /* the engine's own work is measured: values written (every run backs up misses) and
     * restored ones checked (hits), each within the run's time on some worker */
    cr_assert_gt(num(d, "engine_fill_s"), 0);
    cr_assert_gt(num(d, "engine_check_s"), 0);
    cr_assert_lt(num(d, "engine_fill_s") + num(d, "engine_check_s"), 64 * num(d, "elapsed_s"), "a sane figure");
    /* the process's CPU over the replay: the engine's work at least, and no more than
     * every CPU of the host for the run's time (plus the join's 50 ms step) */
    double cpu = num(d, "cpu_user_s") + num(d, "cpu_sys_s");
    cr_assert_geq(cpu, 0.5 * (num(d, "engine_fill_s") + num(d, "engine_check_s")), "cpu %f s", cpu);
    cr_assert_leq(cpu, (num(d, "elapsed_s") + 0.1) * (double)sysconf(_SC_NPROCESSORS_ONLN) + 0.05, "cpu %f s", cpu);
    cr_assert_gt(num(d, "worker_cpu_s"), 0);
    cr_assert_leq(num(d, "worker_cpu_s"), cpu + 0.01, "the workers' threads are part of the process");
    /* the replay's time ends with its last request (requests_per_s counts nothing else),
     * not at the progress loop's next 50 ms step */
    double end = last_done_s();
    cr_assert_geq(num(d, "elapsed_s"), end - 0.0015, "elapsed %f s, last request done at %f s", num(d, "elapsed_s"), end);
    cr_assert_lt(num(d, "elapsed_s"), end + 0.005, "elapsed %f s, last request done at %f s", num(d, "elapsed_s"), end);
}

Test(replay, one_worker_matches_the_reference_exactly, .fini = fini, .timeout = 300)
{
    cJSON *d = run_slice("--workers 1");
    common_checks(d);
    double ref = reference_ratio();
    cr_assert_float_eq(num(d, "prefix_hit_ratio"), ref, 1e-12, "ratio %f, reference %f",
                       num(d, "prefix_hit_ratio"), ref);
    cr_assert_eq(num(d, "lookups"), 8490);
    cJSON_Delete(d);
}

Test(replay, two_workers_within_half_a_point, .fini = fini, .timeout = 300)
{
    cJSON *d = run_slice("--workers 2");
    common_checks(d);
    double ref = reference_ratio();
    cr_assert_leq(fabs(num(d, "prefix_hit_ratio") - ref), 0.005, "ratio %f, reference %f",
                  num(d, "prefix_hit_ratio"), ref);
    cJSON_Delete(d);
}

Test(replay, two_owners_within_half_a_point_with_remote_hits, .fini = fini, .timeout = 300)
{
    cJSON *d = run_slice("--owners 2 --workers 1");
    common_checks(d);
    double ref = reference_ratio();
    cr_assert_leq(fabs(num(d, "prefix_hit_ratio") - ref), 0.005, "ratio %f, reference %f",
                  num(d, "prefix_hit_ratio"), ref);
    cr_assert_gt(num(d, "remote_hits"), 0, "hits served by the other owner over UCX");
    cJSON_Delete(d);
}

/* Correctness hunt (a checksum failure once seen in test_netns): two GPU owners of 200 pages
 * each writing cold groups back to a CPU owner of 200 pages, 4 workers per owner. A durable
 * fetch whose GET_DONE the master accepted while a worker's local put of the same key was
 * still publishing used to free its slot although the master routed the copy there: the slot
 * took other values while readers on the other owner kept copying the key from it (their
 * GET_DONE accepted: the replica was recorded), so one hot key read as another key's bytes
 * from then on. Before the fix 4 runs of 6 failed (hundreds of checksum failures each);
 * three runs here. */
Test(replay, tight_writeback_cluster_serves_only_each_keys_own_bytes, .fini = fini, .timeout = 300)
{
    for (int run = 0; run < 3; run++) {
        static char out[8192];
        cJSON *d = run_demo("--requests 3000 --owners 2 --workers 4 --capacity-blocks 200 --cpu-owners 1 "
                            "--cpu-capacity-blocks 200 --writeback-watermark 0.5", out, sizeof out);
        cr_assert_eq(num(d, "checksum_failures"), 0, "run %d: every restored byte is the key's own", run);
        cr_assert_eq(num(d, "errors"), 0);
        cr_assert_eq(num(d, "baseline_ok"), 1, "R1: counters back to baseline");
        cJSON_Delete(d);
        fini();
    }
}

/* --tenants 2 (issue 42): the workers split into two tenants, each with half the hot tier as
 * its quota; every request is counted for one tenant, hits per tenant add up, and the run
 * passes (no errors, no checksum failure, nothing skipped: the quota makes room from each
 * tenant's own values). */
Test(replay, two_tenants_with_quotas_count_hits_per_tenant, .fini = fini, .timeout = 300)
{
    cJSON *d = run_slice("--workers 2 --tenants 2 --capacity-blocks 2000");
    cr_assert_eq(num(d, "errors"), 0);
    cr_assert_eq(num(d, "checksum_failures"), 0);
    cr_assert_eq(num(d, "skipped_backups"), 0, "a put of a tenant under 1000 pages always fits its quota");
    cJSON *ta = cJSON_GetObjectItem(d, "tenants");
    cr_assert(cJSON_IsArray(ta) && cJSON_GetArraySize(ta) == 2);
    double req = 0, look = 0, hits = 0;
    for (int k = 0; k < 2; k++) {
        cJSON *e = cJSON_GetArrayItem(ta, k);
        cr_assert_eq(num(e, "quota_pages"), 1000);
        cr_assert_gt(num(e, "requests"), 0, "tenant %d played requests", k);
        req += num(e, "requests");
        look += num(e, "lookups");
        hits += num(e, "prefix_hits");
    }
    cr_assert_eq(req, num(d, "requests"));
    cr_assert_eq(look, num(d, "lookups"));
    cr_assert_eq(hits, num(d, "prefix_hits"));
    cJSON_Delete(d);
}
