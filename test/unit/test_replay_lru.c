/* test_replay_lru.c — the trace replay under capacity (issue 7): `fluxon demo` on the first
 * 2,000 requests of the real trace with each owner sized for 2,000 values (one block = one
 * value, groups of one) must evict like an LRU: its prefix-hit ratio within ±1 percentage
 * point of the reference LRU simulator (blocks of a request touched in order, then
 * inserted), zero checksum failures, zero errors, counters and eviction debt back to
 * baseline. */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>

#include "cli_simulate.h"
#include "config.h"
#include "cli_trace.h"
#include "replayfix.h"

Test(replay_lru, capacity_2000_blocks_matches_the_reference_lru, .fini = fini, .timeout = 300)
{
    static char out[8192];
    cJSON *d = run_demo("--requests 2000 --capacity-blocks 2000 --workers 1 --eviction-policy lru", out, sizeof out);
    fx_cli_trace t;
    char err[256];
    cr_assert_eq(fx_cli_trace_load(trace_path(), 2000, 0, &t, err, sizeof err), 0, "%s", err);
    fx_cli_sim_result lru, unlimited;
    cr_assert_eq(fx_cli_sim_run(&t, 2000, 2000, 1, &lru), 0);
    cr_assert_eq(fx_cli_sim_run(&t, 2000, 0, 1, &unlimited), 0);
    fx_cli_trace_free(&t);
    double ratio = num(d, "prefix_hit_ratio");
    cr_log_info("prefix hits %.4f, reference LRU %.4f, unlimited %.4f", ratio, lru.ratio, unlimited.ratio);
    cr_assert_eq(num(d, "requests"), 2000);
    cr_assert_eq(num(d, "checksum_failures"), 0, "D1: every restored byte verified");
    cr_assert_eq(num(d, "errors"), 0, "%s", out);
    cr_assert_eq(num(d, "baseline_ok"), 1, "R1 and eviction debt back to baseline");
    cr_assert_leq(fabs(ratio - lru.ratio), 0.01, "ratio %f, reference LRU %f\n%s", ratio, lru.ratio, out);
    cr_assert_lt(lru.ratio, unlimited.ratio, "capacity matters on this slice");
    cJSON *o0 = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "owners"), 0);
    cr_assert_not_null(o0);
    cr_assert_gt(num(o0, "evictions"), 0, "the owner evicted");
    cr_assert_eq(num(o0, "eviction_debt"), 0);
    cr_assert_eq(num(o0, "hot_capacity_bytes"), 2000 * 4096.0, "the hot tier holds exactly 2000 values");
    cr_assert_leq(num(o0, "hot_bytes"), 2000 * 4096.0);
    cJSON_Delete(d);
}

/* Issue 15: every policy's simulator is the owner's own code (cache/evict_policy.c); its lru
 * is exactly the reference LRU, and each better policy beats it on this slice. */
Test(replay_lru, the_policy_simulators_include_each_policy, .timeout = 120)
{
    fx_cli_trace t;
    char err[256];
    cr_assert_eq(fx_cli_trace_load(trace_path(), 2000, 0, &t, err, sizeof err), 0, "%s", err);
    fx_cli_sim_result ref;
    cr_assert_eq(fx_cli_sim_run(&t, 0, 2000, 1, &ref), 0);
    fx_cli_psim_result lru, s3, slru;
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "lru", 0, 0, 0, &lru), 0);
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "s3fifo", 0, 0, 0, &s3), 0);
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "slru", 0, 0, 0, &slru), 0);
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "lfu", 0, 0, 0, &slru), -1, "an unknown policy is refused");
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "slru", 0, 0, 0, &slru), 0);
    cr_log_info("2,000 requests at 2,000 blocks: reference LRU %.4f, lru %.4f, s3fifo %.4f, slru %.4f", ref.ratio,
                lru.ratio, s3.ratio, slru.ratio);
    cr_assert_eq(lru.prefix_hits, ref.prefix_hits, "the policy code's lru is the reference LRU, hit for hit");
    cr_assert_eq(lru.lookups, ref.lookups);
    cr_assert_gt(s3.ratio, lru.ratio + 0.015, "s3fifo beats lru by more than 1.5 pp here");
    fx_cli_trace_free(&t);
}

/* Issue 42: the simulator over a subset of the requests (one tenant's, `fluxon demo
 * --tenants`): all of them in order is the whole run, hit for hit; every other request plays
 * those alone (a request's lookups are its blocks); an index past the trace is refused. */
Test(replay_lru, the_simulator_plays_a_subset_of_the_requests, .timeout = 120)
{
    fx_cli_trace t;
    char err[256];
    cr_assert_eq(fx_cli_trace_load(trace_path(), 2000, 0, &t, err, sizeof err), 0, "%s", err);
    static size_t all[2000], even[1000];
    uint64_t even_lookups = 0;
    for (size_t i = 0; i < t.n_reqs; i++) {
        all[i] = i;
        if (i % 2 == 0) {
            even[i / 2] = i;
            even_lookups += t.reqs[i].n_blocks;
        }
    }
    fx_cli_psim_result whole, sub, part;
    cr_assert_eq(fx_cli_psim_run(&t, 0, 1000, "s3fifo", 0, 0, 0, &whole), 0);
    cr_assert_eq(fx_cli_psim_run_reqs(&t, all, t.n_reqs, 1000, "s3fifo", &sub), 0);
    cr_assert_eq(sub.prefix_hits, whole.prefix_hits);
    cr_assert_eq(sub.lookups, whole.lookups);
    cr_assert_eq(sub.evictions, whole.evictions);
    cr_assert_eq(fx_cli_psim_run_reqs(&t, even, (t.n_reqs + 1) / 2, 1000, "s3fifo", &part), 0);
    cr_assert_eq(part.requests, (t.n_reqs + 1) / 2);
    cr_assert_eq(part.lookups, even_lookups);
    cr_assert_lt(part.prefix_hits, whole.prefix_hits, "half the requests share fewer prefixes");
    size_t bad[2] = {0, t.n_reqs};
    cr_assert_eq(fx_cli_psim_run_reqs(&t, bad, 2, 1000, "s3fifo", &part), -1, "an index past the trace");
    fx_cli_trace_free(&t);
}

/* Issue 15: the replay with the default policy (s3fifo) evicts as its simulator does: the
 * prefix-hit ratio within ±0.5 pp, zero checksum failures, counters back to baseline. */
Test(replay_lru, s3fifo_replay_matches_its_simulator, .fini = fini, .timeout = 300)
{
    static char out[8192];
    cJSON *d = run_demo("--requests 2000 --capacity-blocks 2000 --workers 1 --eviction-policy s3fifo", out, sizeof out);
    double ratio = num(d, "prefix_hit_ratio"), sim = num(d, "reference_policy_prefix_hit_ratio");
    double lru = num(d, "reference_lru_prefix_hit_ratio");
    cr_log_info("s3fifo replay %.4f, its simulator %.4f, reference LRU %.4f", ratio, sim, lru);
    cr_assert_eq(num(d, "checksum_failures"), 0, "D1: every restored byte verified");
    cr_assert_eq(num(d, "errors"), 0, "%s", out);
    cr_assert_eq(num(d, "baseline_ok"), 1, "R1 and eviction debt back to baseline");
    cr_assert_leq(fabs(ratio - sim), 0.005, "replay %f, simulator %f\n%s", ratio, sim, out);
    cr_assert_gt(ratio, lru, "better than LRU on this slice");
    cJSON_Delete(d);
}

/* Issue 38: the simulator's CPU tier. With an lru hot tier of 2,000 blocks and a CPU tier
 * of as many, every admission rule restores more than the hot tier alone; "all" copies every
 * evicted block, second_touch fewer, and the CPU tier is really read. */
Test(replay_lru, the_simulator_models_a_cpu_tier, .timeout = 120)
{
    fx_cli_trace t;
    char err[256];
    cr_assert_eq(fx_cli_trace_load(trace_path(), 4000, 0, &t, err, sizeof err), 0, "%s", err);
    fx_cli_psim_result alone, all, st;
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "lru", 0, 0, 0, &alone), 0);
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "lru", 2000, FX_WB_ADMIT_ALL, 0, &all), 0);
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "lru", 2000, FX_WB_ADMIT_SECOND_TOUCH, 0, &st), 0);
    cr_log_info("lru 2,000 + CPU 2,000: alone %.4f, all %.4f (%llu copies), second_touch %.4f (%llu copies)",
                alone.ratio, all.ratio, (unsigned long long)all.copies, st.ratio, (unsigned long long)st.copies);
    cr_assert_eq(alone.copies + alone.cpu_hits, 0, "no CPU tier, no copies");
    cr_assert_eq(all.copies, all.evictions, "all: every victim copied");
    cr_assert_lt(st.copies, all.copies / 2, "second_touch copies fewer than half");
    cr_assert_gt(all.ratio, alone.ratio + 0.02);
    cr_assert_gt(st.ratio, alone.ratio + 0.02);
    cr_assert_gt(st.cpu_hits, 0);
    /* the prefix-depth rule copies only a chain's first blocks: fewer copies than "all" at
     * the same admission, and the deeper the limit the more it copies */
    fx_cli_psim_result d8, d32;
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "lru", 2000, FX_WB_ADMIT_ALL, 8, &d8), 0);
    cr_assert_eq(fx_cli_psim_run(&t, 0, 2000, "lru", 2000, FX_WB_ADMIT_ALL, 32, &d32), 0);
    cr_assert_lt(d8.copies, d32.copies);
    cr_assert_lt(d32.copies, all.copies);
    cr_assert_gt(d8.ratio, alone.ratio, "the first 8 blocks of each chain still restore");
    fx_cli_trace_free(&t);
}
