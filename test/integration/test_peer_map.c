/* test_peer_map.c — owners of one host copy through each other's mapped segment (issue 38,
 * owner/peer_map.c): a get from another owner of this process and the write-backs to a CPU
 * owner in a process of its own move byte-exact values by memcpy (peer_map_transfers, no UCX
 * transfer); an owner maps the segments of this host's owners when the master lists them,
 * before any transfer, and faults them in then; "peer_segments":"ucx" keeps them on UCX; a
 * peer whose process exits is unmapped at once (its pidfd: its memory is not kept alive here). */
#include <criterion/criterion.h>
#include <signal.h>

#include "kvfix.h"

#define VLEN (16 * 1024)

static pid_t pm_proc = -1; /* a CPU owner in a process of its own */

static void down(void)
{
    if (pm_proc > 0) {
        th_stop(pm_proc, SIGTERM, 5000);
        pm_proc = -1;
    }
    kf_down();
}

TestSuite(peer_map, .fini = down, .timeout = 120);

static uint64_t seed_of(const char *key)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *q = key; *q; q++) h = (h ^ (uint8_t)*q) * 1099511628211ull;
    return h;
}

static void put_n(fluxon_client *c, const char *pfx, int n)
{
    static uint8_t buf[VLEN];
    char key[64];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s-%d", pfx, i);
        kf_fill(buf, VLEN, seed_of(key));
        int rc = fluxon_put(c, key, buf, VLEN, NULL);
        cr_assert_eq(rc, FLUXON_OK, "put %s: %s", key, fluxon_status_string(rc));
    }
}

/* How many of pfx-[0, n) read back byte-exact (a miss or wrong bytes: not counted). */
static int get_n(fluxon_client *c, const char *pfx, int n)
{
    char key[64];
    int ok = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s-%d", pfx, i);
        fluxon_holder *h = NULL;
        if (fluxon_get(c, key, &h) != FLUXON_OK) continue;
        ok += fluxon_holder_len(h) == VLEN && kf_check(fluxon_holder_data(h), VLEN, seed_of(key));
        fluxon_holder_release(h);
    }
    return ok;
}

Test(peer_map, a_get_from_an_owner_of_this_host_copies_through_its_mapped_segment)
{
    kf_up(2);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    /* the master's CLUSTER_INFO lists each owner to the other: each maps the other's segment
     * then and faults it in, before any transfer needs it */
    cr_assert(kf_wait_stat(b, "peers_mapped", 1, 10000), "B maps A's segment once the master lists A");
    cr_assert(kf_wait_stat(a, "peers_mapped", 1, 10000), "A maps B's segment once the master lists B");
    cr_assert_eq(kf_stat(b, "peers_mapped_listed"), 1, "mapped when listed, not by a transfer");
    cr_assert_eq(kf_stat(b, "peer_map_transfers"), 0, "no transfer yet");
    cr_assert(kf_wait_stat(b, "peers_prefaulting", 0, 10000), "the mapping's prefault ends");
    put_n(a, "pm", 16);
    cr_assert_eq(get_n(b, "pm", 16), 16, "B copies A's values byte-exact");
    cr_assert_eq(kf_stat(b, "peers_mapped"), 1, "A's segment is mapped in B");
    cr_assert_geq(kf_stat(b, "peer_map_transfers"), 1);
    /* the master may place some of A's puts in B's segment: A pushed those through its
     * mapping of B, B copied the others through its mapping of A */
    long long bytes = kf_stat(a, "peer_map_bytes") + kf_stat(b, "peer_map_bytes");
    cr_assert_geq(bytes, 16 * VLEN, "every value came through a mapping (%lld bytes)", bytes);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

Test(peer_map, peer_segments_ucx_keeps_the_copies_on_ucx)
{
    static const char *const extra[] = {NULL, ",\"peer_segments\":\"ucx\""};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    put_n(a, "pu", 16);
    cr_assert_eq(get_n(b, "pu", 16), 16, "B copies A's values byte-exact over UCX");
    cr_assert_eq(kf_stat(b, "peers_mapped"), 0);
    cr_assert_eq(kf_stat(a, "peers_mapped"), 0, "A (peer_segments map) does not map B, whose rkey describes no segment");
    cr_assert_eq(kf_stat(b, "peers_mapped_listed"), 0);
    cr_assert_eq(kf_stat(b, "peer_map_transfers"), 0);
    fluxon_client_close(a);
    fluxon_client_close(b);
    kf_owner_refused(2, ",\"peer_segments\":\"shm\"", "peer_segments is map or ucx");
}

/* Waits (bounded) until c's owner has no write-back queued or in flight: a batch's slices
 * are counted as they are posted, its values when its push ends, so the two counters agree
 * only between batches. Without puts no new task comes. */
static int repl_idle(fluxon_client *c, int timeout_ms)
{
    double end = th_now_s() + th_wait_bound_s(timeout_ms);
    while (th_now_s() < end) {
        if (kf_stat(c, "repl_queued") == 0 && kf_stat(c, "repl_inflight") == 0) return 1;
        th_sleep_ms(10);
    }
    return 0;
}

Test(peer_map, write_backs_to_a_cpu_owner_of_this_host_go_through_its_mapping_until_it_dies)
{
    static const char *const extra[] = {",\"hot_capacity_bytes\":\"1MiB\",\"writeback_watermark\":0.5,"
                                        "\"writeback_admission\":\"all\""};
    kf_up_ex(1, ",\"heartbeat_timeout_ms\":1500", extra);
    char sock[512];
    snprintf(sock, sizeof sock, "%s/ownC.sock", kf_dir);
    pm_proc = kf_owner_proc("ownC", sock, "72MiB", "error", ",\"node_role\":\"remote_cache\"");
    fluxon_client *a = kf_client(0);
    char pfx[16];
    int rounds = 0;
    double end = th_now_s() + th_wait_bound_s(20000);
    /* 16 values a round through a hot tier of 64: once C is registered, the coldest are
     * written back to it */
    while (kf_stat(a, "repl_completed") == 0 && th_now_s() < end) {
        snprintf(pfx, sizeof pfx, "w%d", rounds++);
        put_n(a, pfx, 16);
    }
    cr_assert_gt(kf_stat(a, "repl_completed"), 0, "C holds copies after %d rounds", rounds);
    /* counted from here, once A has mapped C's segment and no write-back is queued or in
     * flight: batches before C registered failed without a push, and one pushed before
     * the mapping goes over UCX, all its values in one slice; a batch in flight has its
     * slices counted and not yet its values (this test failed 2-9 times in 60 on "two
     * values at most" when it counted from the start or from a moment of no batch) */
    cr_assert(kf_wait_stat(a, "peers_mapped", 1, 10000), "A maps C's segment once the master lists C");
    cr_assert(repl_idle(a, 10000), "the write-backs made so far end");
    long long slices0 = kf_stat(a, "repl_push_slices"), batches0 = kf_stat(a, "repl_batches"),
              keys0 = kf_stat(a, "repl_pushed_keys");
    for (int r = 0; r < 12; r++) { /* the first rounds leave A's memory: demoted to C */
        snprintf(pfx, sizeof pfx, "x%d", r);
        put_n(a, pfx, 16);
    }
    cr_assert_eq(kf_stat(a, "peers_mapped"), 1, "C's segment is mapped in A");
    cr_assert(repl_idle(a, 10000), "the rounds' write-backs end");
    long long pushed = kf_stat(a, "peer_map_transfers");
    cr_assert_gt(pushed, 0, "the write-backs were copies through the mapping");
    /* a batch's push copies 32 KiB (two values) a reactor turn, the rings polled between */
    long long slices = kf_stat(a, "repl_push_slices") - slices0, batches = kf_stat(a, "repl_batches") - batches0;
    cr_assert_gt(slices, batches, "the pushes went in slices (%lld slices, %lld batches)", slices, batches);
    long long keys = kf_stat(a, "repl_pushed_keys") - keys0;
    cr_assert_gt(keys, 0, "values were pushed through the mapping");
    cr_assert_geq(slices * 2, keys, "a slice carries two values at most (%lld slices, %lld values)", slices, keys);
    int back = 0;
    for (int r = 0; r < rounds; r++) {
        snprintf(pfx, sizeof pfx, "w%d", r);
        back += get_n(a, pfx, 16);
    }
    cr_assert_gt(kf_stat(a, "evict_copied"), 0, "values left A with their copy on C");
    cr_assert_gt(back, 0, "values demoted to C read back byte-exact");
    cr_assert_eq(kill(pm_proc, SIGKILL), 0);
    double t0 = th_now_s();
    cr_assert(kf_wait_stat(a, "peers_mapped", 0, 15000), "C's segment is unmapped once C exits");
    cr_assert_eq(kf_stat(a, "peers_exited"), 1, "seen by C's pidfd, not by the master (heartbeat_timeout_ms 1500)");
    cr_log_info("C unmapped %.3f s after its kill", th_now_s() - t0);
    waitpid(pm_proc, NULL, 0);
    pm_proc = -1;
    put_n(a, "after", 16); /* A goes on alone */
    cr_assert_eq(get_n(a, "after", 16), 16);
    fluxon_client_close(a);
}

Test(peer_map, a_restarted_owner_of_this_host_is_mapped_again_when_the_master_lists_it)
{
    kf_up_ex(1, ",\"heartbeat_timeout_ms\":1500", NULL);
    char sock[512];
    snprintf(sock, sizeof sock, "%s/ownC.sock", kf_dir);
    pm_proc = kf_owner_proc("ownC", sock, "32MiB", "error", ",\"node_role\":\"remote_cache\"");
    fluxon_client *a = kf_client(0);
    cr_assert(kf_wait_stat(a, "peers_mapped", 1, 15000), "A maps C's segment once the master lists C");
    cr_assert_eq(kf_stat(a, "peers_mapped_listed"), 1);
    cr_assert(kf_wait_stat(a, "peers_prefaulting", 0, 15000), "the mapping's prefault ends");
    cr_assert_eq(kf_stat(a, "peer_map_transfers"), 0, "nothing was copied: mapped when listed");
    cr_assert_eq(kill(pm_proc, SIGKILL), 0);
    waitpid(pm_proc, NULL, 0);
    pm_proc = -1;
    cr_assert(kf_wait_stat(a, "peers_mapped", 0, 15000), "C's segment is unmapped once C exits");
    snprintf(sock, sizeof sock, "%s/ownC2.sock", kf_dir);
    pm_proc = kf_owner_proc("ownC", sock, "32MiB", "error", ",\"node_role\":\"remote_cache\"");
    cr_assert(kf_wait_stat(a, "peers_mapped", 1, 15000), "the new C (a new generation) is mapped when listed");
    cr_assert_eq(kf_stat(a, "peers_mapped_listed"), 2);
    cr_assert_eq(kf_stat(a, "peer_map_transfers"), 0);
    fluxon_client_close(a);
}
