/* test_capacity.c — an owner serves any mix of value sizes (issue 15): an idle grant is
 * re-carved for another size at once and goes back to the master after
 * reserve.idle_grant_return_ms; a claim whose size no grant serves retires the coldest
 * grant of another size (its values evicted whole) instead of failing; NO_SPACE comes
 * only when everything is held, fast, and the owner's log names why. Embedded master and
 * one owner, plain puts through the public API, every byte checked. */
#include <criterion/criterion.h>
#include <math.h>

#include "kvfix.h"

TestSuite(capacity, .fini = kf_down, .timeout = 120);
static void (*const cap_unused)(int) __attribute__((unused)) = kf_up; /* kvfix's 2-owner start */

/* master + one owner "ownA" of segment bytes; extra: more owner members */
static void cap_up(const char *segment, const char *extra)
{
    kf_dir = th_tmpdir();
    cr_assert_eq(fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\","
                                   "\"listen\":\"127.0.0.1:0\",\"log_level\":\"error\"}", &kf_master), FLUXON_OK);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"owner\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"node_id\":\"ownA\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s/ownA/s.sock\",\"segment_bytes\":\"%s\","
             "\"log_level\":\"error\"%s}",
             fluxon_node_port(kf_master), kf_dir, segment, extra ? extra : "");
    cr_assert_eq(fluxon_node_start(cfg, &kf_owner[0]), FLUXON_OK, "%s", cfg);
}

static uint64_t seed_of(const char *key, uint64_t len)
{
    uint64_t h = 1469598103934665603ull ^ len;
    for (const char *p = key; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

static uint8_t *cap_buf;

static int put_len(fluxon_client *c, const char *key, uint64_t len)
{
    kf_fill(cap_buf, len, seed_of(key, len));
    fluxon_put_options o = {.local_first = 1};
    return fluxon_put(c, key, cap_buf, len, &o);
}

/* 1: present with its bytes, 0: absent; fails the test on wrong bytes (D1) */
static int check_len(fluxon_client *c, const char *key, uint64_t len)
{
    fluxon_holder *h = NULL;
    int rc = fluxon_get(c, key, &h);
    if (rc == FLUXON_ERR_NOT_FOUND) return 0;
    cr_assert_eq(rc, FLUXON_OK, "get %s: %s", key, fluxon_status_string(rc));
    cr_assert_eq(fluxon_holder_len(h), len, "%s length", key);
    cr_assert(kf_check(fluxon_holder_data(h), len, seed_of(key, len)), "D1: bytes of %s", key);
    fluxon_holder_release(h);
    return 1;
}

static void cap_setup(size_t max_len)
{
    cap_buf = malloc(max_len);
    cr_assert_not_null(cap_buf);
}

/* The first sequence: a 256 MiB owner (16 grants of 16 MiB) stores 4096·N bytes
 * for N = 1..15, then 64 KiB and 68 KiB succeed (was NO_SPACE with 491,520 bytes used, one
 * size per grant, 15/15 taken): small sizes get sub-grants of one 1 MiB chunk, so the
 * seventeen sizes take two master grants and nothing is evicted. */
Test(capacity, fifteen_sizes_then_two_more_all_succeed)
{
    cap_up("256MiB", NULL);
    cap_setup(68 << 10);
    fluxon_client *c = kf_client(0);
    char k[32];
    for (int n = 1; n <= 15; n++) {
        snprintf(k, sizeof k, "f-%d", n);
        cr_assert_eq(put_len(c, k, 4096ull * n), FLUXON_OK, "put of %d bytes", 4096 * n);
    }
    cr_assert_eq(put_len(c, "f-64k", 64 << 10), FLUXON_OK, "64 KiB after 15 sizes");
    cr_assert_eq(put_len(c, "f-68k", 68 << 10), FLUXON_OK, "68 KiB after 16 sizes");
    cr_assert_eq(check_len(c, "f-64k", 64 << 10), 1);
    cr_assert_eq(check_len(c, "f-68k", 68 << 10), 1);
    for (int n = 1; n <= 15; n++) {
        snprintf(k, sizeof k, "f-%d", n);
        cr_assert_eq(check_len(c, k, 4096ull * n), 1, "%s kept", k);
    }
    cr_log_info("17 small sizes: %lld master grants, %lld slot-pool grants", kf_stat(c, "master_grants"),
                kf_stat(c, "grants"));
    cr_assert_eq(kf_stat(c, "master_grants"), 2, "seventeen one-chunk sub-grants in two master grants");
    cr_assert_eq(kf_stat(c, "evictions"), 0);
    fluxon_client_close(c);
    free(cap_buf);
}

/* The same with sizes of which one value takes more than half a grant (8 MiB + 4 KiB·i:
 * nine 1 MiB chunks of a 16 MiB grant each; issue 44: a size of its own gets the chunks
 * its value needs, no more), in a 240 MiB owner of 15 grants: 15 sizes take the 15 grants; two more sizes (9 MiB and 9 MiB
 * + 4 KiB, ten chunks) retire the coldest grants of other sizes (their values evicted
 * whole) and re-carve them. */
Test(capacity, fifteen_whole_grant_sizes_then_two_more_retire_the_coldest)
{
    cap_up("240MiB", ",\"reserve\":{\"grant_bytes\":\"16MiB\"}");
    cap_setup(10 << 20);
    fluxon_client *c = kf_client(0);
    char k[32];
    for (int n = 0; n < 15; n++) {
        snprintf(k, sizeof k, "w-%d", n);
        cr_assert_eq(put_len(c, k, (8ull << 20) + 4096ull * n), FLUXON_OK, "put %d", n);
    }
    cr_assert_eq(kf_stat(c, "master_grants"), 15, "one whole grant per size, all taken");
    cr_assert_eq(put_len(c, "w-a", 9ull << 20), FLUXON_OK, "a 16th size");
    cr_assert_eq(put_len(c, "w-b", (9ull << 20) + 4096), FLUXON_OK, "a 17th size");
    cr_assert_eq(check_len(c, "w-a", 9ull << 20), 1);
    cr_assert_eq(check_len(c, "w-b", (9ull << 20) + 4096), 1);
    int kept = 0;
    for (int n = 0; n < 15; n++) {
        snprintf(k, sizeof k, "w-%d", n);
        kept += check_len(c, k, (8ull << 20) + 4096ull * n);
    }
    cr_log_info("15 whole-grant sizes then two more: %d of 15 kept, %lld retired", kept, kf_stat(c, "grants_retired"));
    cr_assert_eq(kept, 13, "exactly the two coldest sizes made room");
    cr_assert_eq(check_len(c, "w-0", 8ull << 20), 0, "the coldest (first) value went");
    cr_assert_eq(check_len(c, "w-1", (8ull << 20) + 4096), 0);
    cr_assert_eq(kf_stat(c, "grants_retired"), 2);
    fluxon_client_close(c);
    free(cap_buf);
}

/* The second sequence: a 60 MiB owner (15 grants of 4 MiB) filled by 1 MiB values
 * (more than it holds: older ones are evicted), then 64 KiB puts succeed; every key
 * deleted, 64 KiB and a 4 KiB hostless put succeed at once (idle grants re-carved), and
 * idle grants go back to the master after the grace. */
Test(capacity, one_mib_fill_then_small_puts_then_delete_all)
{
    cap_up("60MiB", ",\"reserve\":{\"grant_bytes\":\"4MiB\",\"idle_grant_return_ms\":300}");
    cap_setup(1 << 20);
    fluxon_client *c = kf_client(0);
    char k[32];
    for (int i = 0; i < 80; i++) {
        snprintf(k, sizeof k, "m-%d", i);
        cr_assert_eq(put_len(c, k, 1 << 20), FLUXON_OK, "1 MiB put %d", i);
    }
    cr_assert_eq(kf_stat(c, "master_grants"), 15);
    cr_assert_gt(kf_stat(c, "evictions"), 0, "more than fits: the oldest went");
    double t0 = th_now_s();
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "s-%d", i);
        cr_assert_eq(put_len(c, k, 64 << 10), FLUXON_OK, "64 KiB put %d after the 1 MiB fill", i);
    }
    cr_log_info("20 puts of 64 KiB after the fill: %.3f s", th_now_s() - t0);
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "s-%d", i);
        cr_assert_eq(check_len(c, k, 64 << 10), 1);
    }
    for (int i = 0; i < 80; i++) {
        snprintf(k, sizeof k, "m-%d", i);
        int rc = fluxon_delete(c, k);
        cr_assert(rc == FLUXON_OK || rc == FLUXON_ERR_NOT_FOUND, "delete %s: %s", k, fluxon_status_string(rc));
    }
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "s-%d", i);
        cr_assert_eq(fluxon_delete(c, k), FLUXON_OK);
    }
    cr_assert(kf_wait_stat(c, "used_bytes", 0, 5000), "every slot free after the deletes");
    /* at once, before the grace: idle grants of another size are re-carved */
    cr_assert_eq(put_len(c, "after-64k", 64 << 10), FLUXON_OK);
    const char *hk = "after-4k";
    fluxon_plan *plan = NULL;
    int st = -1;
    cr_assert_eq(fluxon_local_fast_put_start(c, &hk, 1, 4096, NULL, &plan, &st), FLUXON_OK);
    cr_assert_eq(st, FLUXON_OK, "4 KiB hostless put after delete-all: %s", fluxon_status_string(st));
    kf_fill((uint8_t *)(uintptr_t)plan->value_ptrs[0], 4096, seed_of(hk, 4096));
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(c, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 5000), FLUXON_OK);
    fluxon_future_free(f);
    cr_assert_eq(check_len(c, hk, 4096), 1);
    /* idle grants go back: only grants holding the two live values stay — one when both
     * sizes were carved from the same grant, two when grants went back while the deletes
     * ran (a slow machine) and the two sizes were carved from different ones */
    double end = th_now_s() + 5.0;
    long long held = kf_stat(c, "master_grants");
    while (held > 2 && th_now_s() < end) {
        th_sleep_ms(10);
        held = kf_stat(c, "master_grants");
    }
    cr_assert(held == 1 || held == 2, "idle grants returned (grants %lld)", held);
    cr_assert(kf_wait_stat(c, "grants_returned", 15 - held, 5000), "every other grant returned (%lld returned, %lld held)",
              kf_stat(c, "grants_returned"), held);
    cr_assert_eq(kf_stat(c, "grants_returning"), 0, "every return confirmed by the master");
    /* and the room serves again: a fresh fill of another size */
    for (int i = 0; i < 30; i++) {
        snprintf(k, sizeof k, "r-%d", i);
        cr_assert_eq(put_len(c, k, 512 << 10), FLUXON_OK, "512 KiB put %d after the returns", i);
    }
    cr_assert_eq(check_len(c, "after-64k", 64 << 10), 1);
    fluxon_client_close(c);
    free(cap_buf);
}

/* A second 100 MiB value does not evict the first while the hot tier is far from full. */
Test(capacity, a_second_large_value_keeps_the_first)
{
    cap_up("1GiB", ",\"reserve\":{\"grant_bytes\":\"256MiB\"}");
    cap_setup(100 << 20);
    fluxon_client *c = kf_client(0);
    cr_assert_eq(put_len(c, "big-1", 100 << 20), FLUXON_OK);
    cr_assert_eq(put_len(c, "big-2", 100 << 20), FLUXON_OK);
    cr_assert_eq(check_len(c, "big-1", 100 << 20), 1, "the first 100 MiB value stays");
    cr_assert_eq(check_len(c, "big-2", 100 << 20), 1);
    cr_assert_eq(kf_stat(c, "evictions"), 0);
    fluxon_client_close(c);
    free(cap_buf);
}

/* A segment configured for N grants (segment_bytes = N x reserve.grant_bytes) holds N:
 * the header page is mapped on top of segment_bytes, not taken out of the last grant
 * (64 MiB with 16 MiB grants held 3: max_grants 3, a 45.6 MiB hot tier, the 4th value of
 * 15 MiB evicted the first). Four 15 MiB values take a grant each and all stay. */
Test(capacity, a_segment_of_n_grants_is_granted_n)
{
    cap_up("64MiB", ",\"reserve\":{\"grant_bytes\":\"16MiB\"}");
    cap_setup(15 << 20);
    fluxon_client *c = kf_client(0);
    cr_assert_eq(kf_stat(c, "max_grants"), 4, "64 MiB / 16 MiB");
    cr_assert_eq(kf_stat(c, "segment_bytes"), (64 << 20) + 4096, "segment_bytes plus the header page");
    char k[32];
    for (int n = 0; n < 4; n++) {
        snprintf(k, sizeof k, "g-%d", n);
        cr_assert_eq(put_len(c, k, 15 << 20), FLUXON_OK, "put %d", n);
    }
    cr_assert_eq(kf_stat(c, "master_grants"), 4, "every grant the segment was configured for");
    for (int n = 0; n < 4; n++) {
        snprintf(k, sizeof k, "g-%d", n);
        cr_assert_eq(check_len(c, k, 15 << 20), 1, "%s stays", k);
    }
    cr_assert_eq(kf_stat(c, "evictions"), 0);
    fluxon_client_close(c);
    free(cap_buf);
}

/* Everything held: NO_SPACE within the stuck bound (far below the caller's timeout). */
Test(capacity, all_held_answers_no_space_fast)
{
    cap_up("60MiB", ",\"reserve\":{\"grant_bytes\":\"4MiB\"},\"hot_capacity_bytes\":\"60MiB\","
                    "\"client_limits\":{\"max_pinned_bytes\":\"1GiB\"}");
    cap_setup(1 << 20);
    fluxon_client *c = kf_client(0);
    char k[32];
    fluxon_holder *h[60];
    int n = 0;
    for (int i = 0; i < 60; i++) { /* 15 grants x 4 slots of 1 MiB, every one held */
        snprintf(k, sizeof k, "h-%d", i);
        cr_assert_eq(put_len(c, k, 1 << 20), FLUXON_OK, "put %d", i);
        cr_assert_eq(fluxon_get(c, k, &h[n]), FLUXON_OK);
        n++;
    }
    double t0 = th_now_s();
    int rc = put_len(c, "h-small", 8192);
    double took = th_now_s() - t0;
    cr_assert_eq(rc, FLUXON_ERR_NO_SPACE, "all held: %s", fluxon_status_string(rc));
    cr_assert_lt(took, 4.0, "answered in %.2f s, below the 5 s timeout (at once: claims_no_space_fast)", took);
    cr_assert_gt(kf_stat(c, "claims_no_space_fast"), 0);
    for (int i = 0; i < n; i++) fluxon_holder_release(h[i]);
    cr_assert_eq(put_len(c, "h-small", 8192), FLUXON_OK, "released: room again");
    fluxon_client_close(c);
    free(cap_buf);
}

/* 20 sizes from 4 KiB to 8 MiB, random order, 10x the segment written: no put fails while
 * nothing is held; the payload held at steady state is reported (utilization). */
Test(capacity, random_mix_of_twenty_sizes_never_fails, .timeout = 240)
{
    cap_up("128MiB", ",\"reserve\":{\"grant_bytes\":\"8MiB\"}");
    cap_setup(8 << 20);
    fluxon_client *c = kf_client(0);
    uint64_t sizes[20];
    for (int i = 0; i < 20; i++) { /* log-spaced, not page aligned (but the largest) */
        double x = 4096.0 * pow(2048.0, i / 19.0);
        sizes[i] = i == 19 ? (8u << 20) : (uint64_t)x + (uint64_t)(i * 37);
    }
    enum { MAXK = 4096 };
    static uint64_t lens[MAXK];
    uint64_t rng = 0x9e3779b97f4a7c15ull, written = 0, target = 10ull * (128 << 20);
    int nk = 0, fails = 0;
    double util_sum = 0;
    int util_n = 0;
    char k[32];
    while (written < target && nk < MAXK) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t len = sizes[rng % 20];
        snprintf(k, sizeof k, "x-%d", nk);
        int rc = put_len(c, k, len);
        if (rc != FLUXON_OK) {
            fails++;
            th_note("put %d of %llu bytes: %s", nk, (unsigned long long)len, fluxon_status_string(rc));
        }
        lens[nk++] = len;
        written += len;
        if (written > 3ull * (128 << 20) && nk % 100 == 0) { /* steady state: payload held / segment */
            uint64_t held = 0;
            for (int i = 0; i < nk; i++) {
                snprintf(k, sizeof k, "x-%d", i);
                const char *kp = k;
                size_t ex = 0;
                if (fluxon_batch_exists(c, &kp, 1, &ex) == FLUXON_OK && ex) held += lens[i];
            }
            util_sum += (double)held / (128 << 20);
            util_n++;
        }
    }
    cr_assert_eq(fails, 0, "no put fails while nothing is held");
    int present = 0;
    for (int i = nk - 20; i < nk; i++) {
        snprintf(k, sizeof k, "x-%d", i);
        present += check_len(c, k, lens[i]);
    }
    cr_assert_gt(present, 0);
    cr_log_info("random mix: %d puts, %.2f GiB written, payload utilization at steady state %.1f %% of the "
                "segment (%d samples), %lld re-carved, %lld retired, %lld evictions",
                nk, written / (double)(1 << 30), util_n ? 100 * util_sum / util_n : 0.0, util_n,
                kf_stat(c, "grants_recarved"), kf_stat(c, "grants_retired"), kf_stat(c, "evictions"));
    fluxon_client_close(c);
    free(cap_buf);
}

/* Fragmentation: values of a random mix of 20 sizes (4 KiB..8 MiB) are put and held until
 * the first NO_SPACE; payload bytes / segment bytes at that point is reported: 80.0 %
 * (187 values over 15 grants of 16 MiB cut into 1 MiB chunks, issue 44; 72.4 % before; 15.6 %, 30 values, with
 * one size per whole grant). The rest is tails (a sub-grant holds whole slots only), the
 * half-empty last sub-grant of each size, and a size that needs a free run of its chunk
 * count. Released, the room serves again. */
Test(capacity, mixed_sizes_held_until_the_first_no_space, .timeout = 240)
{
    cap_up("256MiB", ",\"hot_capacity_bytes\":\"256MiB\",\"client_limits\":{\"max_pinned_bytes\":\"1GiB\"}");
    cap_setup(8 << 20);
    fluxon_client *c = kf_client(0);
    uint64_t sizes[20];
    for (int i = 0; i < 20; i++) sizes[i] = i == 19 ? (8u << 20) : (uint64_t)(4096.0 * pow(2048.0, i / 19.0)) + i * 37;
    enum { MAXH = 4096 };
    static fluxon_holder *h[MAXH];
    uint64_t rng = 0x2545F4914F6CDD1Dull, payload = 0;
    int n = 0, rc = FLUXON_OK;
    char k[32];
    while (n < MAXH) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t len = sizes[rng % 20];
        snprintf(k, sizeof k, "y-%d", n);
        rc = put_len(c, k, len);
        if (rc != FLUXON_OK) break;
        cr_assert_eq(fluxon_get(c, k, &h[n]), FLUXON_OK, "hold %s", k);
        payload += len;
        n++;
    }
    cr_assert_eq(rc, FLUXON_ERR_NO_SPACE, "ends with NO_SPACE: %s", fluxon_status_string(rc));
    double util = (double)payload / (256 << 20);
    cr_log_info("mixed sizes held: first NO_SPACE after %d values, payload %.1f MiB = %.1f %% of the 256 MiB "
                "segment (%lld grants of 16 MiB, %lld re-carved)", n, payload / 1048576.0, 100 * util,
                kf_stat(c, "master_grants"), kf_stat(c, "grants_recarved"));
    cr_assert_gt(util, 0.6, "utilization %.3f", util);
    for (int i = 0; i < n; i++) fluxon_holder_release(h[i]);
    cr_assert_eq(put_len(c, "y-after", 8 << 20), FLUXON_OK, "released: room again");
    fluxon_client_close(c);
    free(cap_buf);
}

/* A GRANT_RETURN whose answer is lost (test fault: the master's reply dropped) is sent
 * again with the same grants; the master, which already freed them, answers OK (it frees
 * only grants it records: the repeat frees nothing twice); the room serves later grants. */
Test(capacity, a_lost_grant_return_answer_is_resent_and_frees_nothing_twice)
{
    cap_up("64MiB", ",\"reserve\":{\"idle_grant_return_ms\":200},\"master_timeout_ms\":500,"
                    "\"test\":{\"fault_message\":\"GRANT_RETURN\",\"fault\":\"drop\",\"fault_count\":1}");
    cap_setup(1 << 20);
    fluxon_client *c = kf_client(0);
    char k[32];
    for (int i = 0; i < 40; i++) { /* 10 master grants of 4 MiB */
        snprintf(k, sizeof k, "g-%d", i);
        cr_assert_eq(put_len(c, k, 1 << 20), FLUXON_OK);
    }
    long long held = kf_stat(c, "master_grants");
    cr_assert_geq(held, 10);
    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof k, "g-%d", i);
        cr_assert_eq(fluxon_delete(c, k), FLUXON_OK);
    }
    cr_assert(kf_wait_stat(c, "master_grants", 0, 5000), "every idle grant handed back");
    cr_assert(kf_wait_stat(c, "grants_returning", 0, 8000), "the return was confirmed after its resend");
    cr_assert_eq(kf_stat(c, "grants_returned"), held);
    for (int i = 0; i < 60; i++) { /* the whole segment again: nothing leaked at the master */
        snprintf(k, sizeof k, "h-%d", i);
        cr_assert_eq(put_len(c, k, 1 << 20), FLUXON_OK, "put %d after the returns", i);
    }
    cr_assert_eq(kf_stat(c, "master_grants"), 15, "the master hands out all 15 grants again");
    fluxon_client_close(c);
    free(cap_buf);
}

/* R3: a value within the grant but larger than the owner's hot tier was acknowledged OK and
 * evicted at once (never readable). It is refused at put_start, naming the hot tier (the
 * log); so is an atomic group whose values together exceed it. A value that fits stays. */
Test(capacity, a_value_larger_than_the_hot_tier_is_refused_not_acked_then_evicted)
{
    cap_up("72MiB", ",\"reserve\":{\"grant_bytes\":\"8MiB\"},\"hot_capacity_bytes\":\"4MiB\"");
    cap_setup(6 << 20);
    fluxon_client *c = kf_client(0);
    int rc = put_len(c, "over-hot", 6 << 20);
    cr_assert_eq(rc, FLUXON_ERR_INVALID_ARGUMENT, "6 MiB into a 4 MiB hot tier: %s", fluxon_status_string(rc));
    cr_assert_eq(check_len(c, "over-hot", 6 << 20), 0);
    cr_assert_eq(put_len(c, "fits", 3 << 20), FLUXON_OK);
    cr_assert_eq(check_len(c, "fits", 3 << 20), 1, "a value within the hot tier stays readable");
    /* an atomic group of two 3 MiB values: 6 MiB together */
    const char *keys[2] = {"grp-a", "grp-b"};
    uint32_t groups[1] = {2};
    fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_ATOMIC_GROUPS, .atomic_group_lens = groups, .n_atomic_groups = 1};
    fluxon_plan *plan = NULL;
    cr_assert_eq(fluxon_local_fast_put_start(c, keys, 2, 3 << 20, &o, &plan, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    /* two single values of 3 MiB in one batch are fine (each fits; the older may go) */
    int st[2];
    cr_assert_eq(fluxon_local_fast_put_start(c, keys, 2, 3 << 20, NULL, &plan, st), FLUXON_OK);
    cr_assert_eq(fluxon_put_abort(c, plan), FLUXON_OK);
    cr_assert_eq(check_len(c, "fits", 3 << 20), 1);
    fluxon_client_close(c);
    free(cap_buf);
}

/* 1: key present (without reading it) */
static int cap_exists(fluxon_client *c, const char *key)
{
    size_t ex = 0;
    cr_assert_eq(fluxon_batch_exists(c, &key, 1, &ex), FLUXON_OK);
    return ex != 0;
}

/* Issue 44 R2: after a fill of never-read 64 KiB values put in batches (their chain tails
 * admitted as the first victims), 1 MiB puts under the default policy take room from the
 * cold 64 KiB values: the newest 1 MiB values stay (they were only 12-16 slots, evicting
 * each other, while ~86 % of the hot tier kept 64 KiB values nobody read) and the hot
 * tier stays full. */
static void cap_cold_batch_fill(const char *extra)
{
    cap_up("128MiB", extra);
    cap_setup(1 << 20);
    fluxon_client *c = kf_client(0);
    enum { B = 8, FILL = 2400, BIG = 150 };
    char kb[B][32];
    const char *keys[B];
    const void *src[B];
    uint64_t lens[B];
    int st[B];
    static uint8_t small[B][64 << 10];
    for (int i = 0; i < FILL; i += B) {
        for (int j = 0; j < B; j++) {
            snprintf(kb[j], sizeof kb[j], "s64-%d", i + j);
            keys[j] = kb[j];
            kf_fill(small[j], 64 << 10, seed_of(kb[j], 64 << 10));
            src[j] = small[j];
            lens[j] = 64 << 10;
        }
        cr_assert_eq(fluxon_batch_put_from(c, keys, B, src, lens, NULL, st), FLUXON_OK);
        for (int j = 0; j < B; j++) cr_assert_eq(st[j], FLUXON_OK, "fill %s: %s", kb[j], fluxon_status_string(st[j]));
    }
    char k[32];
    for (int i = 0; i < BIG; i++) {
        snprintf(k, sizeof k, "m1-%d", i);
        cr_assert_eq(put_len(c, k, 1 << 20), FLUXON_OK, "1 MiB put %d", i);
    }
    int present = 0, small_left = 0;
    for (int i = BIG - 100; i < BIG; i++) {
        snprintf(k, sizeof k, "m1-%d", i);
        present += cap_exists(c, k);
    }
    for (int i = 0; i < FILL; i++) {
        snprintf(k, sizeof k, "s64-%d", i);
        small_left += cap_exists(c, k);
    }
    long long hot = kf_stat(c, "hot_bytes"), cap = kf_stat(c, "hot_capacity_bytes");
    cr_log_info("R2: %d of the last 100 1 MiB values present, %d of %d 64 KiB values left, hot tier %.1f %% "
                "full, %lld retired, %lld re-carved", present, small_left, FILL, 100.0 * hot / cap,
                kf_stat(c, "grants_retired"), kf_stat(c, "grants_recarved"));
    long long rounds = kf_stat(c, "evict_rounds"), walked = kf_stat(c, "evict_walked");
    cr_log_info("R2/P4: %lld eviction rounds looked at %lld values (%.1f a round)", rounds, walked,
                rounds ? (double)walked / rounds : 0.0);
    cr_assert_leq(walked, 64 * rounds + 64, "P4: a round looks at a bounded number of values, not the hot tier");
    cr_assert_geq(present, 80, "the newest 1 MiB values stay (%d of 100)", present);
    cr_assert_geq(hot, cap * 8 / 10, "the hot tier stays full (%lld of %lld bytes)", hot, cap);
    for (int i = BIG - 5; i < BIG; i++) {
        snprintf(k, sizeof k, "m1-%d", i);
        cr_assert_eq(check_len(c, k, 1 << 20), 1, "%s readable", k);
    }
    fluxon_client_close(c);
    free(cap_buf);
}

/* R3 with the default ratio: a segment that holds one 8 MiB grant has a 0.95 x 8 MiB hot
 * tier; a value of the whole grant is refused, one below the hot tier stays. */
Test(capacity, a_whole_grant_value_over_the_ratio_hot_tier_is_refused)
{
    cap_up("12MiB", ",\"reserve\":{\"grant_bytes\":\"8MiB\"}");
    cap_setup(8 << 20);
    fluxon_client *c = kf_client(0);
    int rc = put_len(c, "whole", 8 << 20);
    cr_assert_eq(rc, FLUXON_ERR_INVALID_ARGUMENT, "8 MiB into a 7.6 MiB hot tier: %s", fluxon_status_string(rc));
    cr_assert_eq(check_len(c, "whole", 8 << 20), 0);
    cr_assert_eq(put_len(c, "seven", 7 << 20), FLUXON_OK);
    cr_assert_eq(check_len(c, "seven", 7 << 20), 1);
    fluxon_client_close(c);
    free(cap_buf);
}

Test(capacity, one_mib_puts_take_room_from_a_cold_batch_fill) { cap_cold_batch_fill(NULL); }

Test(capacity, one_mib_puts_take_room_from_a_cold_batch_fill_slru)
{
    cap_cold_batch_fill(",\"eviction_policy\":\"slru\"");
}

/* Issue 44 R2: 1,000 puts of random lengths from 4 KiB to 8 MiB (every one its own slot
 * size) under the default policy: the hot tier stays nearly full (it sat at 35 %: each
 * new size found no room it could take from the other sizes' cold values). */
Test(capacity, random_lengths_keep_the_hot_tier_full, .timeout = 240)
{
    cap_up("256MiB", NULL);
    cap_setup(8 << 20);
    fluxon_client *c = kf_client(0);
    uint64_t rng = 0x853c49e6748fea9bull;
    double fill_sum = 0;
    int fill_n = 0, fails = 0;
    char k[32];
    long long cap = kf_stat(c, "hot_capacity_bytes");
    for (int i = 0; i < 1000; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t len = 4096 + rng % ((8u << 20) - 4096 + 1);
        snprintf(k, sizeof k, "rl-%d", i);
        int rc = put_len(c, k, len);
        if (rc != FLUXON_OK) fails++;
        if (i >= 500 && i % 25 == 0) {
            fill_sum += (double)kf_stat(c, "hot_bytes") / cap;
            fill_n++;
        }
    }
    double fill = fill_sum / fill_n;
    cr_log_info("R2 random lengths: hot tier %.1f %% full on average over the last 500 puts, %d failed, %lld "
                "retired, %lld re-carved, %lld evictions", 100 * fill, fails, kf_stat(c, "grants_retired"),
                kf_stat(c, "grants_recarved"), kf_stat(c, "evictions"));
    cr_assert_eq(fails, 0);
    cr_assert_geq(fill, 0.8, "the hot tier stays full (%.1f %%)", 100 * fill);
    fluxon_client_close(c);
    free(cap_buf);
}

/* Issue 44 P2: a get batch of 64 keys held by another owner, on an owner whose pool has no
 * free slot (its grants all taken by its own values), queues one claim per key; each queued claim used to re-serve every queued claim,
 * each scanning every grant for free chunks and an idle sub-grant (O(Q^2 G)). Now a claim
 * behind one of its size is only appended, and a scan runs only when chunks or an idle
 * sub-grant exist: the walks over the grants stay O(batch). */
Test(capacity, a_fetch_batch_on_a_full_pool_scans_the_grants_a_bounded_number_of_times)
{
    const char *extra[] = {",\"hot_capacity_ratio\":1", NULL};
    kf_up_ex(2, NULL, extra);
    cap_setup(64 << 10);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    char k[32];
    enum { FAR = 64 };
    static char far[FAR][32];
    const char *fk[FAR];
    for (int i = 0; i < FAR; i++) {
        snprintf(far[i], sizeof far[i], "far-%d", i);
        fk[i] = far[i];
        cr_assert_eq(put_len(b, far[i], 64 << 10), FLUXON_OK);
    }
    for (int i = 0; i < 1200; i++) { /* A's pool full of its own values */
        snprintf(k, sizeof k, "near-%d", i);
        cr_assert_eq(put_len(a, k, 64 << 10), FLUXON_OK, "near put %d", i);
    }
    long long scans0 = kf_stat(a, "claim_scans"), waits0 = kf_stat(a, "claim_waits");
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    cr_assert_eq(fluxon_get_start(a, fk, FAR, 1, NULL, 0, &h, &r), FLUXON_OK);
    long long scans = kf_stat(a, "claim_scans") - scans0, waits = kf_stat(a, "claim_waits") - waits0;
    cr_log_info("P2: %d fetched keys (%llu transferable), %lld claims waited, %lld grant scans", FAR,
                (unsigned long long)r.transferable_len, waits, scans);
    cr_assert_leq(scans, 4 * FAR, "grant scans stay O(batch): %lld", scans);
    cr_assert_gt(r.transferable_len, 0);
    cr_assert_eq(fluxon_cancel_get_transfer(a, h), FLUXON_OK);
    fluxon_client_close(a);
    fluxon_client_close(b);
    free(cap_buf);
}

/* Sizes in turns: each turn writes twice the segment in one size, so the sub-grants of the
 * sizes before are retired, drained and their chunks carved again for the next size, ten
 * times over five sizes: no put fails and each turn's last value is kept. (Session 29's
 * stall, a drain cursor of a sub-grant id outliving it, needs that id retired again before
 * the next drain round; this sequence did not make that happen on the code before the fix.) */
Test(capacity, sizes_in_turns_retire_the_same_chunks_again_and_never_fail, .timeout = 240)
{
    cap_up("32MiB", ",\"reserve\":{\"grant_bytes\":\"8MiB\"}");
    static const uint64_t sizes[] = {300u << 10, 1536u << 10, 700u << 10, 96u << 10, 2560u << 10};
    enum { TURNS = 10 };
    cap_setup(2560u << 10);
    fluxon_client *c = kf_client(0);
    char k[32];
    int nk = 0, fails = 0;
    for (int t = 0; t < TURNS; t++) {
        uint64_t len = sizes[t % 5], written = 0;
        int first = nk;
        while (written < 2ull * (32u << 20)) {
            snprintf(k, sizeof k, "t%d-%d", t, nk);
            int rc = put_len(c, k, len);
            if (rc != FLUXON_OK && fails++ < 5)
                th_note("turn %d put %d of %llu bytes: %s", t, nk, (unsigned long long)len, fluxon_status_string(rc));
            nk++;
            written += len;
        }
        snprintf(k, sizeof k, "t%d-%d", t, nk - 1); /* the turn's last value is held, byte for byte */
        cr_assert_eq(check_len(c, k, len), 1, "turn %d (%d values of %llu bytes from %d): its last value is kept", t,
                     nk - first, (unsigned long long)len, first);
    }
    cr_assert_eq(fails, 0, "no put fails while nothing is held (%d of %d failed)", fails, nk);
    cr_assert_gt(kf_stat(c, "grants_retired"), TURNS / 2, "the turns retired sub-grants of the size before");
    fluxon_client_close(c);
    free(cap_buf);
}
