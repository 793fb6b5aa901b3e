/* test_replay.c — the main job end to end: `fluxon demo` replays a 300-request slice of
 * the real trace through the hostless API (embedded master + owners, worker threads) and
 * must produce zero checksum failures, zero errors, counters back to baseline (R1), and
 * the prefix-hit ratio of the reference simulator: exactly with one worker, within 0.5
 * percentage point with two workers or two owners (which must show remote hits). */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>

#include "cli_trace.h"
#include "helpers.h"

static char *dir;
static void fini(void)
{
    th_rmtree(dir);
    free(dir);
    dir = NULL;
}

static const char *trace_path(void)
{
    const char *e = getenv("FLUXON_TRACE");
    if (e && *e) return e;
    return access("data/conversation_trace.jsonl", R_OK) == 0 ? "data/conversation_trace.jsonl"
                                                              : "../shared/data/conversation_trace.jsonl";
}

/* Runs the demo and returns its summary.json parsed (caller frees). */
static cJSON *run_demo(const char *extra)
{
    dir = th_tmpdir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 300 %s demo --trace %s --requests 300 --out %s %s > %s/out.txt 2>&1",
             th_fluxon_bin(), trace_path(), dir, extra, dir);
    int st = system(cmd);
    char path[512];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    FILE *f = fopen(path, "r");
    char out[8192] = "";
    if (f) {
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = 0;
        fclose(f);
    }
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "demo %s failed:\n%s", extra, out);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    f = fopen(path, "r");
    cr_assert_not_null(f, "no summary.json:\n%s", out);
    static char js[1 << 16];
    size_t n = fread(js, 1, sizeof js - 1, f);
    js[n] = 0;
    fclose(f);
    cJSON *doc = cJSON_Parse(js);
    cr_assert_not_null(doc);
    return doc;
}

static double num(cJSON *d, const char *k)
{
    cJSON *v = cJSON_GetObjectItem(d, k);
    cr_assert(cJSON_IsNumber(v) || cJSON_IsBool(v), "summary.json lacks %s", k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : v->valuedouble;
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

static void common_checks(cJSON *d)
{
    cr_assert_eq(num(d, "requests"), 300);
    cr_assert_eq(num(d, "checksum_failures"), 0, "D1: every restored byte verified");
    cr_assert_eq(num(d, "errors"), 0);
    cr_assert_eq(num(d, "baseline_ok"), 1, "R1: counters back to baseline");
    cr_assert_gt(num(d, "requests_per_s"), 0);
}

Test(replay, one_worker_matches_the_reference_exactly, .fini = fini, .timeout = 300)
{
    cJSON *d = run_demo("--workers 1");
    common_checks(d);
    double ref = reference_ratio();
    cr_assert_float_eq(num(d, "prefix_hit_ratio"), ref, 1e-12, "ratio %f, reference %f",
                       num(d, "prefix_hit_ratio"), ref);
    cr_assert_eq(num(d, "lookups"), 8490);
    cJSON_Delete(d);
}

Test(replay, two_workers_within_half_a_point, .fini = fini, .timeout = 300)
{
    cJSON *d = run_demo("--workers 2");
    common_checks(d);
    double ref = reference_ratio();
    cr_assert_leq(fabs(num(d, "prefix_hit_ratio") - ref), 0.005, "ratio %f, reference %f",
                  num(d, "prefix_hit_ratio"), ref);
    cJSON_Delete(d);
}

Test(replay, two_owners_within_half_a_point_with_remote_hits, .fini = fini, .timeout = 300)
{
    cJSON *d = run_demo("--owners 2 --workers 1");
    common_checks(d);
    double ref = reference_ratio();
    cr_assert_leq(fabs(num(d, "prefix_hit_ratio") - ref), 0.005, "ratio %f, reference %f",
                  num(d, "prefix_hit_ratio"), ref);
    cr_assert_gt(num(d, "remote_hits"), 0, "hits served by the other owner over UCX");
    cJSON_Delete(d);
}
