/* test_remote.c — remote capacity (issue 16): replica tasks to remote_cache owners, strict
 * targets, reads served by a CPU owner, write-back before eviction and single-copy
 * demotion, counters that reconcile. Owners A, B are GPU owners, C (when present) a
 * remote_cache owner (no workers, no clients of its own). */
#include <criterion/criterion.h>

#include "kvfix.h"

#define KIB 1024ull
#define VLEN (16 * KIB)

static pid_t rm_proc = -1; /* a CPU owner in a process of its own (SIGSTOP) */

static void down(void)
{
    if (rm_proc > 0) {
        kill(rm_proc, SIGCONT);
        th_stop(rm_proc, SIGTERM, 5000);
        rm_proc = -1;
    }
    kf_down();
}

TestSuite(remote, .fini = down, .timeout = 120);

static long long master_stat(fluxon_client *c, const char *name)
{
    static char buf[1 << 16];
    size_t len = 0;
    cr_assert_eq(fluxon_client_master_stats(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *doc = cJSON_Parse(buf);
    cr_assert_not_null(doc, "%s", buf);
    cJSON *v = cJSON_GetObjectItem(doc, name);
    cr_assert(cJSON_IsNumber(v), "%s missing in %s", name, buf);
    long long r = (long long)cJSON_GetNumberValue(v);
    cJSON_Delete(doc);
    return r;
}

static int wait_master_stat(fluxon_client *c, const char *name, long long want, int timeout_ms)
{
    double end = th_now_s() + timeout_ms / 1000.0;
    while (th_now_s() < end) {
        if (master_stat(c, name) == want) return 1;
        th_sleep_ms(10);
    }
    return 0;
}

/* No replica task queued or in flight (R1), within timeout_ms. */
static int repl_idle(fluxon_client *c, int timeout_ms)
{
    double end = th_now_s() + timeout_ms / 1000.0;
    do {
        if (kf_stat(c, "repl_queued") == 0 && kf_stat(c, "repl_inflight") == 0) return 1;
        th_sleep_ms(10);
    } while (th_now_s() < end);
    return 0;
}

/* Eviction over: c's owner holds at most hot_bytes in its hot tier and no replica task is
 * queued or in flight, within timeout_ms. (A moment with no task is not enough: eviction
 * queues its write-backs round by round while the hot tier is over its capacity.) */
static int evict_settled(fluxon_client *c, long long hot_bytes, int timeout_ms)
{
    double end = th_now_s() + timeout_ms / 1000.0;
    do {
        if (kf_stat(c, "hot_bytes") <= hot_bytes && kf_stat(c, "repl_queued") == 0 &&
            kf_stat(c, "repl_inflight") == 0)
            return 1;
        th_sleep_ms(10);
    } while (th_now_s() < end);
    return 0;
}

/* One stats document of c's owner: no task queued or in flight, and every task ended
 * once: tasks (eager + write-back) = completed + already + obsolete + failed by cause. */
static int repl_settled_once(fluxon_client *c, char *why, size_t cap)
{
    static char buf[1 << 16];
    size_t len = 0;
    if (fluxon_client_stats(c, buf, sizeof buf, &len) != FLUXON_OK) return 0;
    cJSON *doc = cJSON_Parse(buf), *own = cJSON_GetObjectItem(doc, "owner");
    static const char *const ends[] = {"repl_completed", "repl_already", "repl_obsolete", "repl_failed_no_space",
                                       "repl_failed_busy", "repl_failed_stale", "repl_failed_transfer",
                                       "repl_failed_master", "repl_failed_queue_full"};
    long long v[4] = {0}, sum = 0;
    const char *const names[] = {"repl_queued", "repl_inflight", "repl_tasks_eager", "repl_tasks_writeback"};
    for (int i = 0; i < 4; i++) v[i] = (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(own, names[i]));
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
        sum += (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(own, ends[i]));
    cJSON_Delete(doc);
    snprintf(why, cap, "queued %lld, in flight %lld, tasks %lld + %lld, ended %lld", v[0], v[1], v[2], v[3], sum);
    return v[0] == 0 && v[1] == 0 && v[2] + v[3] == sum;
}

static int repl_settled(fluxon_client *c, int timeout_ms, char *why, size_t cap)
{
    double end = th_now_s() + timeout_ms / 1000.0;
    do {
        if (repl_settled_once(c, why, cap)) return 1;
        th_sleep_ms(10);
    } while (th_now_s() < end);
    return 0;
}

/* placed_bytes of owner node_id in the master's node table (-1: not listed) */
static long long placed_bytes(fluxon_client *c, const char *node_id)
{
    char buf[8192];
    size_t len = 0;
    cr_assert_eq(fluxon_client_cluster_nodes(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *doc = cJSON_Parse(buf), *n;
    long long r = -1;
    cJSON_ArrayForEach(n, doc)
    {
        cJSON *id = cJSON_GetObjectItem(n, "node_id");
        if (cJSON_IsString(id) && !strcmp(id->valuestring, node_id))
            r = (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(n, "placed_bytes"));
    }
    cJSON_Delete(doc);
    return r;
}

/* Starts C, a remote_cache owner of segment_bytes seg in a process of its own (rm_proc:
 * SIGSTOP), waits until the master lists it; returns a client of owner A. */
static fluxon_client *cpu_owner_proc(const char *seg)
{
    char sock[512];
    snprintf(sock, sizeof sock, "%s/ownC.sock", kf_dir);
    rm_proc = kf_owner_proc("ownC", sock, seg, "error", ",\"node_role\":\"remote_cache\"");
    fluxon_client *a = kf_client(0);
    double end = th_now_s() + 20;
    while (placed_bytes(a, "ownC") < 0 && th_now_s() < end) th_sleep_ms(10);
    cr_assert_geq(placed_bytes(a, "ownC"), 0, "C registered");
    return a;
}

static void keyname(char *buf, size_t cap, const char *pfx, int i) { snprintf(buf, cap, "%s-%04d", pfx, i); }
static uint64_t seed_of(const char *pfx, int i)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *q = pfx; *q; q++) h = (h ^ (uint8_t)*q) * 1099511628211ull;
    return h + (uint64_t)i * 131;
}

/* A hostless put of pfx-[0, n) in groups of glen; returns once published. */
static void put_groups(fluxon_client *c, const char *pfx, int n, uint32_t glen, int make_replica,
                       const uint8_t *mask)
{
    char names[64][48];
    const char *keys[64];
    uint32_t groups[64];
    cr_assert_leq(n, 64);
    for (int i = 0; i < n; i++) {
        keyname(names[i], 48, pfx, i);
        keys[i] = names[i];
    }
    for (int g = 0; g < n / (int)glen; g++) groups[g] = glen;
    fluxon_put_options o = {0};
    o.field_mask = FLUXON_PUT_OPT_MAKE_REPLICA_TASK | FLUXON_PUT_OPT_ATOMIC_GROUPS |
                   (mask ? FLUXON_PUT_OPT_REPLICA_MASK : 0);
    o.make_replica_task = make_replica;
    o.make_replica_task_mask = mask;
    o.atomic_group_lens = groups;
    o.n_atomic_groups = (size_t)n / glen;
    fluxon_plan *plan = NULL;
    int st[64];
    cr_assert_eq(fluxon_local_fast_put_start(c, keys, (size_t)n, VLEN, &o, &plan, st), FLUXON_OK);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(st[i], FLUXON_OK, "key %d: %s", i, fluxon_status_string(st[i]));
        kf_fill((uint8_t *)(uintptr_t)plan->value_ptrs[i], VLEN, seed_of(pfx, i));
    }
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(c, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
}

/* get_start over pfx-[0, n) in groups of glen; returns the transferable length after
 * checking every transferred value byte-exact. */
static uint64_t get_check(fluxon_client *c, const char *pfx, int n, uint32_t glen)
{
    char names[64][48];
    const char *keys[64];
    uint32_t groups[64];
    for (int i = 0; i < n; i++) {
        keyname(names[i], 48, pfx, i);
        keys[i] = names[i];
    }
    for (int g = 0; g < n / (int)glen; g++) groups[g] = glen;
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    cr_assert_eq(fluxon_get_start(c, keys, (size_t)n, 1, groups, (size_t)n / glen, &h, &r), FLUXON_OK);
    cr_assert_eq(r.transferable_len % glen, 0, "atomic groups are never cut");
    fluxon_plan *p = NULL;
    if (!r.transferable_len) {
        cr_assert_eq(fluxon_cancel_get_transfer(c, h), FLUXON_OK);
        return 0;
    }
    cr_assert_eq(fluxon_get_transfer(c, h, 0, &p), FLUXON_OK);
    for (uint64_t i = 0; i < p->count; i++)
        cr_assert(kf_check((const uint8_t *)(uintptr_t)p->value_ptrs[i], VLEN, seed_of(pfx, (int)i)),
                  "%s value %llu byte-exact", pfx, (unsigned long long)i);
    cr_assert_eq(fluxon_release_views(c, p), FLUXON_OK);
    return r.transferable_len;
}

static const char *const gpu_gpu_cpu[] = {NULL, NULL, ",\"node_role\":\"remote_cache\""};

/* Eager replica tasks: one per group, all to the CPU owner; the writer stops, and a client
 * on the other GPU owner restores every value byte-exact from the CPU owner. */
Test(remote, eager_replicas_survive_writer)
{
    kf_up_ex(3, NULL, gpu_gpu_cpu);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    put_groups(a, "ea", 16, 4, 1, NULL);
    cr_assert(wait_master_stat(a, "append_keys_completed", 16, 10000), "16 replicas appended");
    cr_assert_eq(master_stat(a, "target_replicas_remote_cache"), 16);
    cr_assert_eq(master_stat(a, "target_replicas_gpu_owner"), 0, "never a GPU owner");
    cr_assert_eq(master_stat(a, "append_started"), 1, "the 4 groups' tasks share one APPEND_START (issue 38)");
    cr_assert(kf_wait_stat(a, "repl_completed", 4, 5000));
    cr_assert_eq(kf_stat(a, "repl_tasks_eager"), 4);
    cr_assert(repl_idle(a, 5000), "R1: no task in flight");
    cr_assert_eq(master_stat(a, "append_inflight"), 0, "R1: no append in flight at the master");
    fluxon_client_close(a);
    fluxon_node_stop(kf_owner[0]); /* the writer goes: its primaries with it */
    kf_owner[0] = NULL;
    long long cpu0 = master_stat(b, "hits_cpu_owner");
    cr_assert_eq(get_check(b, "ea", 16, 4), 16, "every replicated value restores from the CPU owner");
    cr_assert_eq(master_stat(b, "hits_cpu_owner") - cpu0, 16, "hits counted on the CPU tier");
    fluxon_client_close(b);
}

/* Issue 38: with prefetch_from_owners, a PREFETCH copies ahead what a CPU owner holds: B
 * names 16 keys only C has (A, their writer, is gone) and one held nowhere; B looks them
 * up in one LOOKUP, copies the 16 (published, kept), and the gets then find them in B's
 * memory, byte-exact, without a LOOKUP of their own. A, without the field, looks nothing
 * up for a prefetch. */
Test(remote, a_prefetch_copies_what_a_cpu_owner_holds_before_the_get)
{
    static const char *const extra[] = {NULL, ",\"prefetch_from_owners\":true", ",\"node_role\":\"remote_cache\""};
    kf_up_ex(3, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    put_groups(a, "pf", 16, 4, 1, NULL);
    cr_assert(wait_master_stat(a, "append_keys_completed", 16, 10000), "16 replicas appended to C");
    const char *nowhere[1] = {"pf-nowhere"};
    cr_assert_eq(fluxon_prefetch(a, nowhere, 1), FLUXON_OK);
    cr_assert(kf_wait_stat(a, "prefetch_requests", 1, 5000));
    cr_assert_eq(kf_stat(a, "prefetch_lookups"), 0, "off by default: no LOOKUP for a prefetch");
    fluxon_client_close(a);
    fluxon_node_stop(kf_owner[0]); /* the writer goes: only C holds the values */
    kf_owner[0] = NULL;
    char names[17][48];
    const char *keys[17];
    for (int i = 0; i < 16; i++) {
        keyname(names[i], 48, "pf", i);
        keys[i] = names[i];
    }
    keys[16] = "pf-nowhere";
    long long cpu0 = master_stat(b, "hits_cpu_owner"), batches0 = kf_stat(b, "lookup_batches");
    cr_assert_eq(fluxon_prefetch(b, keys, 17), FLUXON_OK);
    cr_assert(kf_wait_stat(b, "prefetch_copies", 16, 10000), "the 16 values were copied ahead (%lld)",
              kf_stat(b, "prefetch_copies"));
    cr_assert_eq(kf_stat(b, "prefetch_lookups"), 17);
    cr_assert_eq(kf_stat(b, "lookup_batches") - batches0, 1, "one LOOKUP for the whole prefetch");
    cr_assert_eq(master_stat(b, "hits_cpu_owner") - cpu0, 16);
    cr_assert(kf_wait_stat(b, "gets_inflight", 0, 10000), "the copies ended");
    cr_assert(kf_wait_stat(b, "slots_committed", 16, 10000), "the copies are B's replicas");
    cr_assert_eq(get_check(b, "pf", 16, 4), 16, "every value restores, byte-exact");
    cr_assert_eq(kf_stat(b, "lookup_batches") - batches0, 1, "the get asked the master nothing");
    cr_assert_eq(kf_stat(b, "remote_hits"), 0, "served from B's memory");
    cr_assert_eq(kf_stat(b, "prefetch_temp_skipped"), 0);
    fluxon_client_close(b);
}

/* Issue 38: a copy of a value on a CPU owner (an appended range, which the master hands
 * out again only range_reuse_delay_ms after it frees it) is read as soon as it lands: B's
 * GET_DONE is held back 3 s (test fault), yet B's reader is served at once, byte-exact, and
 * the copy becomes B's replica once the master answers. The old code made the reader wait
 * for that answer. */
Test(remote, a_copy_from_a_cpu_owner_is_read_before_its_get_done_is_answered)
{
    static const char *const extra[] = {
        NULL, ",\"test\":{\"fault_message\":\"GET_DONE\",\"fault\":\"delay_request\",\"fault_ms\":3000,\"fault_count\":0}",
        ",\"node_role\":\"remote_cache\""};
    kf_up_ex(3, ",\"range_reuse_delay_ms\":1000", extra); /* a loaded machine's copy ends within it */
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    put_groups(a, "rb", 8, 2, 1, NULL);
    cr_assert(wait_master_stat(a, "append_keys_completed", 8, 10000), "8 replicas appended");
    fluxon_client_close(a);
    fluxon_node_stop(kf_owner[0]); /* the writer goes: B can only copy from the CPU owner */
    kf_owner[0] = NULL;
    double t0 = th_now_s();
    cr_assert_eq(get_check(b, "rb", 8, 2), 8, "every value restores from the CPU owner");
    double took = th_now_s() - t0;
    cr_assert_lt(took, 2.0, "served before the held GET_DONE (3 s) was answered: %.2f s", took);
    cr_assert_eq(kf_stat(b, "read_before_get_done"), 8);
    cr_assert_gt(master_stat(b, "lookup_early_reads"), 0);
    cr_assert(kf_wait_stat(b, "slots_committed", 8, 15000), "B's copies become replicas once the master answers");
    cr_assert_eq(kf_stat(b, "cpu_hits"), 8, "each counted once, as from a CPU owner");
    cr_assert_eq(kf_stat(b, "remote_hits"), 0, "none from a GPU owner");
    fluxon_client_close(b);
}

/* Issue 42: a pinned value is never evicted, so eviction never writes it back; with
 * write-back on, pinning it queues its copy to the CPU owner at once. The writer then goes,
 * and every pinned value restores from the CPU owner, byte-exact. The old code made no copy
 * (nothing appended: the values were lost with their owner). */
Test(remote, a_pinned_value_is_copied_to_the_cpu_owner_at_once)
{
    static const char *const extra[] = {",\"writeback_watermark\":0.9", NULL, ",\"node_role\":\"remote_cache\""};
    kf_up_ex(3, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    static uint8_t v[VLEN];
    char key[32];
    fluxon_put_options po = {.field_mask = FLUXON_PUT_OPT_PIN_TTL, .pin_ttl_ms = 60000};
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "pinned-%d", i);
        kf_fill(v, VLEN, 900 + (uint64_t)i);
        cr_assert_eq(fluxon_put(a, key, v, VLEN, &po), FLUXON_OK);
    }
    cr_assert_eq(kf_stat(a, "pins_applied"), 4);
    cr_assert(wait_master_stat(a, "append_keys_completed", 4, 10000), "the 4 pinned values copied");
    cr_assert_eq(kf_stat(a, "pins_written_back"), 4);
    cr_assert_eq(kf_stat(a, "evictions"), 0, "copied without being evicted");
    fluxon_client_close(a);
    fluxon_node_stop(kf_owner[0]); /* the writer goes */
    kf_owner[0] = NULL;
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "pinned-%d", i);
        fluxon_holder *h = NULL;
        cr_assert_eq(fluxon_get(b, key, &h), FLUXON_OK, "%s restores from the CPU owner", key);
        cr_assert(kf_check(fluxon_holder_data(h), VLEN, 900 + (uint64_t)i), "%s byte-exact", key);
        fluxon_holder_release(h);
    }
    fluxon_client_close(b);
}

/* A CPU owner full of placed values still takes copies. Write-through puts fill B (a
 * remote_cache owner) with values the master placed there; then four pinned values on A are
 * copied to B all the same: placed values on a replica target join the master's FIFO of
 * target replicas, and the oldest go to make room. The old code listed only appended
 * copies there, so with B full of placed values every copy failed NO_SPACE, for good
 * (nothing else ever drops a placed value on B). And the first copies into the full B are
 * not refused while the room dropped for them is in the master's reuse delay: the master
 * answers BUSY and the owner asks again (a new user saw 0 of 64 pinned values copied). */
Test(remote, a_cpu_owner_full_of_placed_values_still_takes_copies)
{
    static const char *const extra[] = {",\"writeback_watermark\":0.9", ",\"node_role\":\"remote_cache\""};
    kf_up_ex(2, NULL, extra); /* the default reuse delay: a dropped range comes back 4 ms later */
    fluxon_client *a = kf_client(0);
    /* 256 KiB values, then values of the pinned ones' size, until one no longer fits B
     * (placed on A: write-through falls back to the writer's owner) */
    enum { BIG = 256 * 1024, N_MAX = 1400 };
    static uint8_t v[BIG];
    static bool on_b[N_MAX];
    char key[32];
    fluxon_put_options wt = {.field_mask = FLUXON_PUT_OPT_WRITE_THROUGH, .write_through = 1};
    long long full = placed_bytes(a, "ownB");
    int n = 0, n_b = 0;
    for (bool small = false; n < N_MAX; n++) {
        uint64_t len = small ? VLEN : BIG;
        snprintf(key, sizeof key, "placed-%d", n);
        kf_fill(v, len, 5000 + (uint64_t)n);
        cr_assert_eq(fluxon_put(a, key, v, len, &wt), FLUXON_OK, "%s", key);
        long long now = placed_bytes(a, "ownB");
        on_b[n] = now > full;
        n_b += on_b[n];
        full = now;
        if (!on_b[n] && small) break;
        small = small || !on_b[n];
    }
    cr_assert_lt(n, N_MAX);
    n++;
    /* all but one grant (8 MiB) of B's 72 MiB, less the header page */
    cr_assert_geq(full, 64ll * 1048576 - VLEN - 4096, "B is full of placed values: %lld bytes", full);
    cr_assert_eq(master_stat(a, "target_cold_listed"), n_b, "every placed value on B (%d) is listed for dropping", n_b);
    fluxon_put_options po = {.field_mask = FLUXON_PUT_OPT_PIN_TTL, .pin_ttl_ms = 60000};
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "pinned-%d", i);
        kf_fill(v, VLEN, 900 + (uint64_t)i);
        cr_assert_eq(fluxon_put(a, key, v, VLEN, &po), FLUXON_OK);
    }
    cr_assert_eq(kf_stat(a, "pins_written_back"), 4);
    cr_assert(wait_master_stat(a, "append_keys_completed", 4, 10000), "the 4 pinned values copied to the full B");
    cr_assert_eq(kf_stat(a, "repl_failed_no_space"), 0, "no copy refused for room");
    cr_assert_eq(kf_stat(a, "repl_failed_busy"), 0, "none given up while its room came back");
    cr_assert_gt(master_stat(a, "append_rejected_room_coming"), 0, "the room was on its way back: BUSY, retried");
    long long dropped = master_stat(a, "target_cold_dropped");
    cr_assert_gt(dropped, 0, "B's oldest placed values made the room");
    /* the oldest placed values on B went (they miss), every other one reads back byte-exact;
     * A's own first (reading B's values copies them to A, whose hot tier then evicts) */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0, b_seen = 0; i < n; i++) {
            if (on_b[i] != (pass == 1)) continue;
            snprintf(key, sizeof key, "placed-%d", i);
            fluxon_holder *h = NULL;
            int rc = fluxon_get(a, key, &h);
            if (on_b[i] && b_seen++ < dropped) {
                cr_assert_eq(rc, FLUXON_ERR_NOT_FOUND, "%s (among B's %lld oldest): %s", key, dropped,
                             fluxon_status_string(rc));
                continue;
            }
            cr_assert_eq(rc, FLUXON_OK, "%s (on %s): %s", key, on_b[i] ? "B" : "A", fluxon_status_string(rc));
            cr_assert(kf_check(fluxon_holder_data(h), fluxon_holder_len(h), 5000 + (uint64_t)i), "%s byte-exact", key);
            fluxon_holder_release(h);
        }
    fluxon_client_close(a);
}

/* ucx_tls (issue 38): owners on one host may move values over shared memory. With
 * "sm,self" B reads A's values (UCX posix/sysv: no tcp), byte-exact; a transport UCX does
 * not know stops the owner at start (the field reaches UCX). */
Test(remote, owners_on_one_host_may_use_shared_memory)
{
    static const char *const extra[] = {",\"ucx_tls\":\"sm,self\"", ",\"ucx_tls\":\"sm,self\""};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    put_groups(a, "sm", 8, 2, 0, NULL);
    cr_assert_eq(get_check(b, "sm", 8, 2), 8, "B copies A's values over shared memory, byte-exact");
    cr_assert_eq(kf_stat(b, "remote_hits"), 8);
    fluxon_client_close(a);
    fluxon_client_close(b);
    kf_owner_refused(2, ",\"ucx_tls\":\"no_such_transport\"", "an owner with a transport UCX does not know");
}

/* A write-back queue that stopped moving (the CPU owner stopped: its pushes wait for their
 * timeout) no longer makes every eviction round walk the whole write-back window looking
 * for copied values: once the queue is full and no copy ended for 100 ms, victims go in the
 * policy's order without their copy. A new user measured 3,100 values walked per eviction
 * and puts 3x slower with a dead CPU owner. */
Test(remote, evictions_do_not_walk_the_window_while_copies_are_stuck, .timeout = 180)
{
    /* UCX, as to a CPU owner on another host: through C's mapped segment (same host) a
     * stopped C would take its copies all the same */
    const char *const extra[] = {",\"hot_capacity_bytes\":\"16MiB\",\"writeback_watermark\":0.5,"
                                 "\"writeback_admission\":\"all\",\"peer_segments\":\"ucx\""};
    kf_up_ex(1, ",\"inflight_ttl_ms\":60000", extra);
    fluxon_client *a = cpu_owner_proc("256MiB"); /* C in a process of its own, registered; a client of A */
    char pfx[16];
    for (int r = 0; r < 40; r++) { /* copies flow while C runs */
        snprintf(pfx, sizeof pfx, "w%d", r);
        put_groups(a, pfx, 64, 1, 0, NULL);
    }
    /* the copies are made in the background: C holds some once one ended (bounded; CI once
     * looked before the first had) */
    double until = th_now_s() + th_wait_bound_s(10000);
    while (kf_stat(a, "repl_completed") == 0 && th_now_s() < until) th_sleep_ms(10);
    cr_assert_gt(kf_stat(a, "repl_completed"), 0, "C holds copies");
    cr_assert_eq(kill(rm_proc, SIGSTOP), 0);
    long long w0 = kf_stat(a, "evict_walked"), e0 = kf_stat(a, "evictions");
    double worst = 0;
    for (int r = 0; r < 400; r++) { /* 25,600 values of 16 KiB through a hot tier of 1,024 */
        snprintf(pfx, sizeof pfx, "s%d", r);
        double t0 = th_now_s();
        put_groups(a, pfx, 64, 1, 0, NULL);
        double dt = th_now_s() - t0;
        if (dt > worst) worst = dt;
    }
    long long walked = kf_stat(a, "evict_walked") - w0, evicted = kf_stat(a, "evictions") - e0;
    cr_log_info("C stopped: %lld values walked for %lld evictions, %lld rounds stuck, slowest put %.3f s", walked,
                evicted, kf_stat(a, "evict_wb_stuck_rounds"), worst);
    cr_assert_gt(kf_stat(a, "evict_wb_stuck_rounds"), 0, "the stuck queue was seen");
    /* 7.9 per eviction before (the window of 512 values walked every round), 3.1 now */
    cr_assert_lt(walked, 5 * evicted, "%lld values walked for %lld evictions", walked, evicted);
    cr_assert_lt(worst, 3.0, "the slowest put took %.3f s with C stopped", worst);
    cr_assert_eq(get_check(a, "s399", 64, 1), 64, "the newest values are readable");
    cr_assert_eq(kill(rm_proc, SIGCONT), 0);
    char why[256];
    cr_assert(repl_settled(a, 90000, why, sizeof why), "R1: write-backs over after C resumed: %s", why);
    fluxon_client_close(a);
}

/* Strict targets: no remote_cache owner = NO_SPACE, never another GPU owner; the local
 * primary stays readable. */
Test(remote, no_target_is_no_space)
{
    kf_up(2);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    put_groups(a, "nt", 8, 2, 1, NULL);
    cr_assert(kf_wait_stat(a, "repl_failed_no_space", 4, 5000), "4 groups: NO_SPACE");
    cr_assert_eq(master_stat(a, "append_rejected_no_target"), 4);
    cr_assert_eq(master_stat(a, "target_replicas_gpu_owner"), 0);
    cr_assert_eq(kf_stat(a, "repl_completed"), 0);
    cr_assert_eq(get_check(a, "nt", 8, 2), 8, "the local primary stays");
    cr_assert_eq(get_check(b, "nt", 8, 2), 8, "and is read by others from the GPU owner");
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* The mask is per group: only marked groups get a task; without make_replica_task none. */
Test(remote, mask_and_flag)
{
    kf_up_ex(3, NULL, gpu_gpu_cpu);
    fluxon_client *a = kf_client(0);
    uint8_t mask[8] = {1, 1, 0, 0, 1, 1, 0, 0};
    put_groups(a, "mk", 8, 2, 1, mask);
    cr_assert(wait_master_stat(a, "append_keys_completed", 4, 5000), "2 groups of 2 appended");
    put_groups(a, "nf", 8, 2, 0, NULL);
    cr_assert(kf_wait_stat(a, "repl_completed", 2, 5000));
    cr_assert_eq(kf_stat(a, "repl_tasks_eager"), 2, "no task without make_replica_task");
    fluxon_client_close(a);
}

/* replica_target_roles is validated: unknown roles and duplicates name the field. */
Test(remote, target_roles_config)
{
    fluxon_node *m = NULL;
    const char *bad[] = {"[\"cpu\"]", "[]", "[\"remote_cache\",\"remote_cache\"]", "\"remote_cache\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg, "{\"role\":\"master\",\"cluster_id\":\"kv\",\"listen\":\"127.0.0.1:0\","
                 "\"log_level\":\"off\",\"replica_target_roles\":%s}", bad[i]);
        cr_assert_eq(fluxon_node_start(cfg, &m), FLUXON_ERR_CONFIG, "%s", cfg);
    }
    cr_assert_eq(fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"kv\",\"listen\":\"127.0.0.1:0\","
                                   "\"log_level\":\"off\",\"replica_target_roles\":[\"gpu_owner\",\"remote_cache\"]}",
                                   &m), FLUXON_OK);
    fluxon_node_stop(m);
}

/* A (a GPU owner of 64 hot values) copies every value colder than half of them, and claims
 * may wait for copies (else a slow copy is a drop); B a GPU owner; C a CPU owner. */
static const char *const wb_all[] = {",\"hot_capacity_bytes\":\"1MiB\",\"writeback_watermark\":0.5,"
                                     "\"writeback_admission\":\"all\",\"writeback_max_stall_ms\":20000", NULL,
                                     ",\"node_role\":\"remote_cache\""};

/* Write-back before eviction, then single-copy demotion: A's hot tier holds 64 values and
 * writes back what is colder than half of it; 160 values later every one is still
 * restorable (from the CPU owner when A dropped its copy), nothing was dropped, and the
 * counters reconcile: tasks = completed + already + failed + obsolete, evictions = demoted
 * (+ 0 dropped), replicas only on the remote_cache owner. */
Test(remote, writeback_then_demotion)
{
    kf_up_ex(3, NULL, wb_all);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    char pfx[16];
    for (int r = 0; r < 10; r++) {
        snprintf(pfx, sizeof pfx, "wb%d", r);
        put_groups(a, pfx, 16, 4, 0, NULL);
    }
    cr_assert(repl_idle(a, 10000), "R1: write-backs over");
    double end = th_now_s() + 10; /* eviction runs once the write-backs it waited for are over */
    while (kf_stat(a, "hot_bytes") > kf_stat(a, "hot_capacity_bytes") && th_now_s() < end) th_sleep_ms(10);
    cr_assert_leq(kf_stat(a, "hot_bytes"), kf_stat(a, "hot_capacity_bytes"), "A's hot tier back under its capacity");
    cr_assert_gt(kf_stat(a, "evictions"), 0, "A evicted");
    cr_assert(kf_wait_stat(a, "eviction_debt", 0, 5000));
    cr_assert_eq(master_stat(a, "evict_dropped"), 0, "nothing dropped while the CPU owner has room");
    cr_assert_eq(master_stat(a, "evict_demoted"), master_stat(a, "evicted_replicas"), "every eviction is a demotion");
    cr_assert_eq(master_stat(a, "target_replicas_gpu_owner"), 0);
    /* the evictions may have queued more write-backs: read the counters from one stats
     * document once none is queued or in flight (reading them one by one while copies end
     * under load did not add up) */
    char why[200];
    cr_assert(repl_settled(a, 10000, why, sizeof why), "tasks = completed + already + failed + obsolete: %s", why);
    cr_assert_gt(kf_stat(a, "repl_tasks_writeback"), 0);
    cr_assert_eq(master_stat(a, "append_keys_completed"), master_stat(a, "target_replicas_remote_cache"));
    cr_assert_eq(master_stat(a, "append_inflight"), 0, "R1");
    for (int r = 0; r < 10; r++) {
        snprintf(pfx, sizeof pfx, "wb%d", r);
        cr_assert_eq(get_check(b, pfx, 16, 4), 16, "%s restorable", pfx);
    }
    cr_assert_gt(master_stat(b, "hits_cpu_owner"), 0, "some hits from the CPU owner");
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* A puts wb<from>..wb<to - 1> (16 values in groups of 4 each; the first the coldest), then
 * waits until its write-backs are settled and its evictions answered. */
static void put_wb_settled(fluxon_client *a, int from, int to)
{
    char pfx[16], why[200];
    for (int r = from; r < to; r++) {
        snprintf(pfx, sizeof pfx, "wb%d", r);
        put_groups(a, pfx, 16, 4, 0, NULL);
    }
    cr_assert(repl_settled(a, 10000, why, sizeof why), "%s", why);
    cr_assert(kf_wait_stat(a, "eviction_debt", 0, 5000));
}

/* A value A fetches back from the CPU owner (a second time: the first read-back serves its
 * readers only, session 56) keeps its copy there (target_copy_after_fetch
 * "keep", the default): the LOOKUP says so (FX_GET_SRC_KEPT), so A makes no write-back task
 * for it when it gets cold again (counted repl_kept_after_fetch; before, each cost a task and
 * an APPEND_START answered "already"), and when A evicts it the master moves the CPU owner's
 * copy to the tail of that owner's cold FIFO (target_refreshed_at_evict), as the "already"
 * did. The copy still serves another owner byte-exact. (Before session 33 the fetch dropped
 * the CPU copy and the next write-back copied the value in full again.) */
Test(remote, a_value_fetched_back_keeps_its_cpu_copy_and_is_not_copied_again)
{
    kf_up_ex(3, ",\"range_reuse_delay_ms\":1000", wb_all); /* A's record is read within 499 ms of an answer */
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    char why[200];
    put_wb_settled(a, 0, 10); /* wb0 first: the coldest, demoted to the CPU owner */
    long long cpu0 = kf_stat(a, "cpu_hits"), gpu0 = kf_stat(a, "remote_hits"), wb0 = kf_stat(a, "wb_reads");
    long long lk0 = kf_stat(a, "lookup_batches");
    (void)master_stat(a, "generation"); /* an answer from the master: A's record's rule holds for 499 ms */
    cr_assert_eq(get_check(a, "wb0", 16, 4), 16, "wb0 restored on A");
    /* A wrote them back: it reads them by its record, without a LOOKUP (wbmap.c), and counts
     * them by their source's kind (fluxon_owner_fetch_hits_total{source="cpu_owner"}; before,
     * every fetch was counted as from a GPU owner) */
    cr_assert_eq(kf_stat(a, "wb_reads") - wb0, 16, "read by A's record of its write-backs");
    cr_assert_eq(kf_stat(a, "lookup_batches"), lk0, "no LOOKUP");
    cr_assert_eq(kf_stat(a, "cpu_hits") - cpu0, 16, "from the CPU owner");
    cr_assert_eq(kf_stat(a, "remote_hits"), gpu0, "none from a GPU owner");
    cr_assert_eq(master_stat(a, "target_promoted_away"), 0, "the CPU owner keeps its copies of wb0");
    /* that first read served its readers only (session 56); the second promotes */
    cr_assert_eq(kf_stat(a, "wb_temp"), 16, "a first read-back, for its readers only: no replica on A");
    (void)master_stat(a, "generation");
    cr_assert_eq(get_check(a, "wb0", 16, 4), 16, "wb0 restored on A again");
    cr_assert_eq(kf_stat(a, "cpu_hits") - cpu0, 32, "from the CPU owner again");
    cr_assert(repl_settled(a, 10000, why, sizeof why), "%s", why);
    cr_assert(kf_wait_stat(a, "repl_kept_after_fetch", 16, 5000), "wb0's 16 copies need no write-back (%lld)",
              kf_stat(a, "repl_kept_after_fetch")); /* published after get_check's views were released */
    long long already0 = kf_stat(a, "repl_already"), appended0 = master_stat(a, "append_keys_completed");
    long long refreshed0 = master_stat(a, "target_refreshed_at_evict");
    put_wb_settled(a, 10, 20); /* wb0, fetched back, gets cold on A again */
    cr_assert_eq(kf_stat(a, "repl_already"), already0, "no write-back of wb0 again: none found its copy (already)");
    cr_assert_eq(master_stat(a, "target_promoted_away"), 0, "the CPU owner still keeps its copies of wb0");
    cr_assert_geq(master_stat(a, "target_refreshed_at_evict") - refreshed0, 16,
                  "A evicted wb0 again: its CPU copies moved to the cold FIFO's tail");
    /* every key copied since is one of wb10..wb19's (at most 160): none of wb0's again */
    cr_assert_leq(master_stat(a, "append_keys_completed") - appended0, 160);
    cr_assert_eq(get_check(b, "wb0", 16, 4), 16, "the kept copies serve B byte-exact");
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* A value fetched back (twice: promoted) and then HIT on A gets hot again, so its next write-back would copy it
 * anew (the CPU owner may have dropped the copy meanwhile). A's record of its write-backs
 * (wbmap.c) still names the copy, so no task is made (repl_kept_recorded; before, each such
 * value cost a task and an APPEND_START answered "already"): A evicts it as a demotion, the
 * master moves the CPU copy to its FIFO's young end, and the copy serves B byte-exact. */
Test(remote, a_value_hit_after_its_write_back_is_not_written_back_again_while_its_copy_is_recorded)
{
    kf_up_ex(3, ",\"range_reuse_delay_ms\":1000", wb_all); /* A's record is read within 499 ms of an answer */
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    char why[200];
    put_wb_settled(a, 0, 10); /* wb0 first: the coldest, demoted to the CPU owner */
    (void)master_stat(a, "generation"); /* an answer from the master: A's record's rule holds for 499 ms */
    cr_assert_eq(get_check(a, "wb0", 16, 4), 16, "wb0 restored on A (for its readers only: a first read-back)");
    (void)master_stat(a, "generation");
    cr_assert_eq(get_check(a, "wb0", 16, 4), 16, "wb0 restored on A again: promoted");
    cr_assert(repl_settled(a, 10000, why, sizeof why), "%s", why);
    /* the fetched copies are published (and marked kept) after get_check's views were released */
    cr_assert(kf_wait_stat(a, "repl_kept_after_fetch", 16, 5000), "wb0's copies are kept: no write-back (kept %lld)",
              kf_stat(a, "repl_kept_after_fetch"));
    cr_assert_eq(kf_stat(a, "repl_kept_recorded"), 0, "nothing was hit after its write-back yet");
    long long hits0 = kf_stat(a, "local_hits");
    cr_assert_eq(get_check(a, "wb0", 16, 4), 16, "wb0 hit on A: hot again");
    cr_assert_geq(kf_stat(a, "local_hits") - hits0, 16, "the second get hit A's own copies");
    long long already0 = kf_stat(a, "repl_already"), appended0 = master_stat(a, "append_keys_completed");
    long long refreshed0 = master_stat(a, "target_refreshed_at_evict"), demoted0 = master_stat(a, "evict_demoted");
    put_wb_settled(a, 10, 20); /* wb0 gets cold on A again */
    cr_assert_eq(kf_stat(a, "repl_kept_recorded"), 16, "wb0's 16 copies were found in A's record");
    cr_assert_eq(kf_stat(a, "repl_already"), already0, "no task found a copy at the master (already)");
    cr_assert_leq(master_stat(a, "append_keys_completed") - appended0, 160, "only wb10..wb19 were copied");
    cr_assert_geq(master_stat(a, "target_refreshed_at_evict") - refreshed0, 16,
                  "A evicted wb0 again: its CPU copies moved to the cold FIFO's young end");
    cr_assert_geq(master_stat(a, "evict_demoted") - demoted0, 16, "wb0's evictions were demotions");
    cr_assert_eq(master_stat(a, "evict_dropped"), 0, "nothing dropped");
    cr_assert_eq(get_check(b, "wb0", 16, 4), 16, "the recorded copies serve B byte-exact");
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* Session 56: the first read-back of a copy A wrote back, by A's record, serves the get's
 * readers only, as a first read-back from disk does (issue 39): no GET_DONE, no replica left
 * on A (the next get reads the CPU owner again), and the master is told in a TOUCH, which
 * makes the copies young in the CPU owner's FIFO (as the eviction of a promoted replica did:
 * without it the copy aged from where it was and the trace replay lost hits). The second
 * read promotes. Every read is byte-exact, and the copies still serve B. */
Test(remote, a_first_read_back_serves_its_readers_only_and_keeps_its_copy_young)
{
    kf_up_ex(3, ",\"range_reuse_delay_ms\":1000", wb_all); /* A's record is read within 499 ms of an answer */
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    char why[200];
    put_wb_settled(a, 0, 10); /* wb0 first: the coldest, demoted to the CPU owner, the oldest copies there */
    long long cpu0 = kf_stat(a, "cpu_hits"), temp0 = kf_stat(a, "wb_temp"), kept0 = kf_stat(a, "repl_kept_after_fetch");
    long long touched0 = master_stat(a, "target_touched"), young0 = master_stat(a, "target_refreshed_at_read");
    long long stale0 = master_stat(a, "target_touch_stale");
    (void)master_stat(a, "generation"); /* an answer from the master: A's record's rule holds for 499 ms */
    cr_assert_eq(get_check(a, "wb0", 16, 4), 16, "wb0 restored on A, byte-exact");
    cr_assert_eq(kf_stat(a, "cpu_hits") - cpu0, 16, "from the CPU owner");
    cr_assert_eq(kf_stat(a, "wb_temp") - temp0, 16, "served to its readers only");
    cr_assert(wait_master_stat(a, "target_touched", touched0 + 16, 5000), "the master was told of the 16 reads");
    cr_assert_eq(kf_stat(a, "wb_touched"), master_stat(a, "target_touched"), "every key sent was handled");
    cr_assert_eq(master_stat(a, "target_refreshed_at_read") - young0, 16, "the oldest copies there made young");
    cr_assert_eq(master_stat(a, "target_touch_stale"), stale0, "each of that version");
    cr_assert_eq(kf_stat(a, "wb_touch_lost"), 0);
    cr_assert(repl_settled(a, 10000, why, sizeof why), "%s", why);
    cr_assert_eq(kf_stat(a, "repl_kept_after_fetch"), kept0, "no replica on A: nothing published");
    (void)master_stat(a, "generation");
    cr_assert_eq(get_check(a, "wb0", 16, 4), 16, "wb0 restored on A again, byte-exact");
    cr_assert_eq(kf_stat(a, "cpu_hits") - cpu0, 32, "from the CPU owner again: A kept nothing");
    cr_assert_eq(kf_stat(a, "wb_temp") - temp0, 16, "a second read-back is no first one");
    cr_assert(kf_wait_stat(a, "repl_kept_after_fetch", kept0 + 16, 5000), "promoted (kept %lld)",
              kf_stat(a, "repl_kept_after_fetch"));
    long long local0 = kf_stat(a, "local_hits");
    cr_assert_eq(get_check(a, "wb0", 16, 4), 16, "the third get hits A's promoted copies");
    cr_assert_geq(kf_stat(a, "local_hits") - local0, 16);
    cr_assert_eq(get_check(b, "wb0", 16, 4), 16, "the CPU owner's copies serve B byte-exact");
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* A failed push keeps the local primary and is counted by cause; the other task completes.
 * W4: the failed push may still land (UCX may hold its requests, the target may not have
 * read them yet), so the target's ranges stay allocated until the append's TTL — never
 * handed to the next append at once — and go then. (The old code freed them at once.) */
Test(remote, failed_push_is_counted)
{
    const char *const extra[] = {",\"test\":{\"fail_transfers\":1}", NULL, ",\"node_role\":\"remote_cache\""};
    kf_up_ex(3, ",\"inflight_ttl_ms\":8000", extra);
    fluxon_client *a = kf_client(0);
    double t0 = th_now_s();
    put_groups(a, "fp", 4, 4, 1, NULL); /* 2 puts of one group (one batch each): the first push fails */
    cr_assert(kf_wait_stat(a, "repl_failed_transfer", 1, 5000), "the first push failed");
    put_groups(a, "fq", 4, 4, 1, NULL);
    cr_assert(kf_wait_stat(a, "repl_completed", 1, 5000), "the second completed");
    cr_assert(repl_idle(a, 5000), "R1");
    long long failed = kf_stat(a, "repl_failed_transfer"), done = kf_stat(a, "repl_completed");
    cr_assert_eq(failed, 1, "one task failed: transfer");
    cr_assert_eq(done, 1, "the other completed");
    cr_assert_eq(kf_stat(a, "repl_tasks_eager"), failed + done);
    wait_master_stat(a, "append_keys_failed_transfer", 4, 5000);
    cr_assert_eq(master_stat(a, "append_keys_failed_transfer"), 4);
    cr_assert_eq(master_stat(a, "append_keys_completed"), 4);
    cr_assert_eq(master_stat(a, "append_inflight"), 0, "R1");
    cr_assert_eq(master_stat(a, "append_keys_abandoned"), 4, "W4: the failed push was abandoned, not undone");
    cr_assert_lt(th_now_s() - t0, 8.0, "checked within the append's TTL");
    cr_assert_eq(placed_bytes(a, "ownC"), (long long)(8 * VLEN), "W4: the failed push's ranges are kept");
    double end = th_now_s() + 20; /* the TTL (8 s) is over by then */
    while (placed_bytes(a, "ownC") != (long long)(4 * VLEN) && th_now_s() < end) th_sleep_ms(50);
    cr_assert_eq(placed_bytes(a, "ownC"), (long long)(4 * VLEN), "the failed push's ranges go at the TTL");
    cr_assert_eq(master_stat(a, "append_keys_expired"), 0, "answered already: not counted again");
    cr_assert_eq(get_check(a, "fp", 4, 4), 4, "the local primaries stay");
    cr_assert_eq(get_check(a, "fq", 4, 4), 4);
    fluxon_client_close(a);
}

/* Issue 38: a put never waits for a write-back. A's CPU owner C runs in a process of its own;
 * once C is stopped (SIGSTOP) its copies can never finish, yet every later put of A is
 * served at once: the values that needed room went without their copy (counted as dropped
 * while copying or behind, or failed once the master gave up on C). Before, a claim waited
 * for the copy of its victim: the puts stalled until the push timed out (tens of seconds). */
Test(remote, put_never_waits_for_a_stopped_cpu_owner)
{
    const char *const extra[] = {",\"hot_capacity_bytes\":\"1MiB\",\"writeback_watermark\":0.5,"
                                 "\"writeback_admission\":\"all\",\"peer_segments\":\"ucx\""}; /* as between hosts */
    kf_up_ex(1, ",\"inflight_ttl_ms\":60000", extra);
    fluxon_client *a = cpu_owner_proc("72MiB"); /* C in a process of its own, registered; a client of A */
    char pfx[16];
    for (int r = 0; r < 8; r++) { /* 128 values through a hot tier of 64 values: C gets copies */
        snprintf(pfx, sizeof pfx, "ok%d", r);
        put_groups(a, pfx, 16, 4, 0, NULL);
    }
    cr_assert(repl_idle(a, 20000), "write-backs over while C runs");
    cr_assert_gt(kf_stat(a, "repl_completed"), 0, "C holds copies");
    {
        static char js[1 << 16];
        size_t len = 0;
        cr_assert_eq(fluxon_client_stats(a, js, sizeof js, &len), FLUXON_OK);
        cr_assert(strstr(js, "\"eviction_policy_lru\":true"), "lru: the default with write-back on");
    }
    cr_assert_eq(kill(rm_proc, SIGSTOP), 0);
    double worst = 0;
    for (int r = 0; r < 300; r++) { /* 4,800 values more (the pool holds 4,096): none may wait for C */
        snprintf(pfx, sizeof pfx, "st%d", r);
        double t0 = th_now_s();
        put_groups(a, pfx, 16, 4, 0, NULL);
        double dt = th_now_s() - t0;
        if (dt > worst) worst = dt;
    }
    cr_assert_lt(worst, 3.0, "the slowest put took %.3f s with C stopped", worst);
    long long dropped = kf_stat(a, "evict_dropped_copying") + kf_stat(a, "evict_dropped_behind") +
                        kf_stat(a, "evict_dropped_failed");
    cr_assert_gt(dropped, 0, "values went without their copy: dropped %lld", dropped);
    cr_assert_eq(get_check(a, "st299", 16, 4), 16, "the newest values are readable");
    cr_assert_eq(kill(rm_proc, SIGCONT), 0);
    /* everything converges: every task ends (the stopped pushes finish or time out), and the
     * counters reconcile */
    char why[256];
    cr_assert(repl_settled(a, 60000, why, sizeof why), "R1: write-backs over after C resumed: %s", why);
    cr_assert(wait_master_stat(a, "append_inflight", 0, 60000), "R1 at the master");
    fluxon_client_close(a);
}

/* writeback_admission and writeback_max_stall_ms are validated, naming the field. */
Test(remote, writeback_config)
{
    fluxon_node *m = NULL;
    const char *bad[] = {"\"writeback_admission\":\"twice\"", "\"writeback_admission\":2",
                         "\"writeback_max_stall_ms\":-1", "\"writeback_max_stall_ms\":60001",
                         "\"writeback_max_stall_ms\":1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg, "{\"role\":\"owner\",\"cluster_id\":\"kv\",\"master\":\"127.0.0.1:1\","
                 "\"socket\":\"/nonexistent/s.sock\",\"log_level\":\"off\",%s}", bad[i]);
        cr_assert_eq(fluxon_node_start(cfg, &m), FLUXON_ERR_CONFIG, "%s", cfg);
    }
}

/* Issue 38: while A is the only owner that takes puts and every copy on the CPU owner C is
 * one A made, a miss of a key A never copied is settled without a LOOKUP; a key A wrote back
 * is still looked up and restored from C; once another GPU owner is announced, every miss
 * asks the master again. */
Test(remote, misses_of_keys_never_copied_skip_the_master)
{
    const char *const extra[] = {",\"hot_capacity_bytes\":\"1MiB\",\"writeback_watermark\":0.5,"
                                 "\"writeback_admission\":\"all\",\"writeback_max_stall_ms\":20000",
                                 ",\"node_role\":\"remote_cache\""};
    kf_up_ex(2, ",\"range_reuse_delay_ms\":1000", extra);
    fluxon_client *a = kf_client(0);
    char pfx[16];
    for (int r = 0; r < 8; r++) { /* 128 values through a hot tier of 64: the oldest live on C only */
        snprintf(pfx, sizeof pfx, "nc%d", r);
        put_groups(a, pfx, 16, 4, 0, NULL);
    }
    cr_assert(repl_idle(a, 20000), "write-backs over");
    cr_assert_gt(kf_stat(a, "copies_recorded"), 0);
    long long batches = kf_stat(a, "lookup_batches"), settled = kf_stat(a, "misses_settled_locally");
    cr_assert_eq(get_check(a, "never", 8, 4), 0, "keys never put: a miss");
    cr_assert_eq(kf_stat(a, "lookup_batches"), batches, "no LOOKUP for a key A never copied");
    cr_assert_gt(kf_stat(a, "misses_settled_locally"), settled);
    long long cpu0 = kf_stat(a, "cpu_hits"), wb0 = kf_stat(a, "wb_reads");
    (void)master_stat(a, "generation"); /* an answer from the master: A's record's rule holds for 499 ms */
    cr_assert_eq(get_check(a, "nc0", 16, 4), 16, "the values only C holds are found and restored byte-exact");
    cr_assert_eq(kf_stat(a, "cpu_hits") - cpu0, 16, "from C");
    cr_assert_eq(kf_stat(a, "wb_reads") - wb0, 16, "by A's record of what it wrote back (no LOOKUP)");
    /* another GPU owner: its puts and copies are not in A's record */
    char cfg[1024];
    kf_owner_cfg(cfg, sizeof cfg, 2, NULL);
    cr_assert_eq(fluxon_node_start(cfg, &kf_owner[2]), FLUXON_OK);
    double end = th_now_s() + 20;
    while (kf_stat(a, "owners_alive") < 3 && th_now_s() < end) th_sleep_ms(10);
    cr_assert_eq(kf_stat(a, "owners_alive"), 3, "A heard of B");
    batches = kf_stat(a, "lookup_batches");
    cr_assert_eq(get_check(a, "never2", 8, 4), 0);
    cr_assert_gt(kf_stat(a, "lookup_batches"), batches, "with another GPU owner, a miss asks the master");
    fluxon_client_close(a);
}

/* A GPU owner that joins while the CPU owner already holds copies (another GPU owner's, gone
 * since) never settles a miss itself: it finds those copies through the master. */
Test(remote, an_owner_that_joins_after_copies_asks_the_master)
{
    const char *const extra[] = {",\"hot_capacity_bytes\":\"1MiB\",\"writeback_watermark\":0.5,"
                                 "\"writeback_admission\":\"all\",\"writeback_max_stall_ms\":20000",
                                 ",\"node_role\":\"remote_cache\""};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = kf_client(0);
    char pfx[16];
    for (int r = 0; r < 8; r++) {
        snprintf(pfx, sizeof pfx, "jo%d", r);
        put_groups(a, pfx, 16, 4, 0, NULL);
    }
    cr_assert(repl_idle(a, 20000), "write-backs over");
    cr_assert_gt(placed_bytes(a, "ownB"), 0, "C holds copies");
    fluxon_client_close(a);
    fluxon_node_stop(kf_owner[0]); /* A goes, its copies on C stay */
    kf_owner[0] = NULL;
    char cfg[1024];
    kf_owner_cfg(cfg, sizeof cfg, 2, NULL); /* D: a new GPU owner */
    cr_assert_eq(fluxon_node_start(cfg, &kf_owner[2]), FLUXON_OK);
    fluxon_client *d = kf_client(2);
    cr_assert(th_wait_registered(d, 20000));
    long long batches = kf_stat(d, "lookup_batches");
    cr_assert_eq(get_check(d, "jo0", 16, 4), 16, "A's copies on C are found through the master");
    cr_assert_gt(kf_stat(d, "lookup_batches"), batches);
    cr_assert_eq(kf_stat(d, "misses_settled_locally"), 0, "D never settles a miss itself");
    fluxon_client_close(d);
}

/* Issue 38 (wbmap.c): A reads the values it wrote back to C by its own record, without a
 * LOOKUP, while C is small enough that the master keeps dropping C's oldest copies and
 * handing their ranges to new ones (default reuse delay, 4 ms). Each dropped copy is
 * FORGOTTEN by A before its range can be handed out again, so every value a get transfers
 * is byte-exact (get_check) — a record of a range that now holds another value would read
 * that value's bytes. */
Test(remote, a_copy_the_master_dropped_is_never_read_by_its_record, .timeout = 120)
{
    static const char *const extra[] = {",\"hot_capacity_bytes\":\"1MiB\",\"writeback_watermark\":0.5,"
                                        "\"writeback_admission\":\"all\",\"writeback_max_stall_ms\":20000"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *a = cpu_owner_proc("16MiB"); /* C: 8 MiB of copies past its grant, 512 values */
    char pfx[16], old[16];
    uint64_t restored = 0;
    for (int r = 0; r < 40; r++) { /* 2,560 values of 16 KiB through a hot tier of 64 */
        snprintf(pfx, sizeof pfx, "dr%d", r);
        put_groups(a, pfx, 64, 4, 0, NULL);
        for (int back = 2; back <= 12 && back <= r; back += 5) { /* on C, or dropped from it */
            snprintf(old, sizeof old, "dr%d", r - back);
            /* an answer from the master just before: the record's rule then allows a read (a
             * first read-back sends no GET_DONE whose answer would keep A's link this fresh) */
            (void)master_stat(a, "generation");
            restored += get_check(a, old, 64, 4); /* the transferable prefix, each value byte-exact */
        }
    }
    cr_assert(repl_idle(a, 20000), "write-backs over");
    cr_assert_gt(restored, 0, "values restored");
    cr_assert_gt(kf_stat(a, "wb_reads"), 0, "some read by A's record (no LOOKUP)");
    cr_assert_gt(master_stat(a, "forget_copies"), 0, "the master dropped copies A wrote and told A");
    cr_assert_gt(kf_stat(a, "wb_records_forgotten"), 0, "A forgot them");
    cr_assert_leq(kf_stat(a, "wb_records"), 512 + 64, "A's record holds about what C holds");
    fluxon_client_close(a);
}

/* Issue 38 (elsewhere.c): a key whose copy the master dropped (C full: its oldest go, and A
 * is told by FORGET) is held nowhere, so A settles a miss of it without a LOOKUP; the key
 * copied again (put anew, then written back) is restored from C byte-exact, not settled. */
Test(remote, a_miss_of_a_key_whose_copy_was_dropped_skips_the_master, .timeout = 120)
{
    static const char *const extra[] = {",\"hot_capacity_bytes\":\"1MiB\",\"writeback_watermark\":0.5,"
                                        "\"writeback_admission\":\"all\",\"writeback_max_stall_ms\":20000"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *a = cpu_owner_proc("16MiB"); /* C: 512 values past its grant */
    char pfx[16];
    for (int r = 0; r < 24; r++) { /* 1,536 values through a hot tier of 64: C drops the oldest */
        snprintf(pfx, sizeof pfx, "dk%d", r);
        put_groups(a, pfx, 64, 4, 0, NULL);
    }
    cr_assert(evict_settled(a, 1 << 20, 20000), "A is back under its hot tier's 1 MiB");
    cr_assert_gt(kf_stat(a, "wb_records_forgotten"), 0, "C dropped copies of A's and A was told");
    cr_assert_gt(kf_stat(a, "copies_dropped_known"), 0, "A keeps their keys");
    long long batches = kf_stat(a, "lookup_batches"), dropped = kf_stat(a, "misses_settled_dropped");
    cr_assert_eq(get_check(a, "dk0", 64, 4), 0, "copied, then dropped from C: a miss");
    cr_assert_eq(kf_stat(a, "lookup_batches"), batches, "no LOOKUP for a key whose copy was dropped");
    cr_assert_eq(kf_stat(a, "misses_settled_dropped"), dropped + 1);
    put_groups(a, "dk0", 64, 4, 0, NULL); /* put again, then pushed out of A: copied again */
    for (int r = 24; r < 26; r++) {
        snprintf(pfx, sizeof pfx, "dk%d", r);
        put_groups(a, pfx, 64, 4, 0, NULL);
    }
    cr_assert(evict_settled(a, 1 << 20, 20000), "A is back under its hot tier's 1 MiB");
    long long cpu0 = kf_stat(a, "cpu_hits");
    (void)master_stat(a, "generation"); /* an answer from the master: A's record's rule holds */
    cr_assert_eq(get_check(a, "dk0", 32, 4), 32, "copied again: restored from C, byte-exact"); /* pins: 48 */
    cr_assert_eq(kf_stat(a, "cpu_hits") - cpu0, 32, "from C");
    cr_assert_eq(kf_stat(a, "misses_settled_dropped"), dropped + 1, "not settled as dropped");
    fluxon_client_close(a);
}

/* Issue 38 (wbmap.c): a write-back's APPEND_DONE answer dispatched late (a test fault holds
 * it 300 ms, as the message chaos may) comes after the FORGET of the very copies it confirms:
 * the keys were deleted meanwhile. A keeps no record of them, and a get after the delete
 * misses. Before, A recorded the dropped copies on the late answer and served the deleted
 * values by its record (a fault pass with response chaos read other keys' bytes that way). */
Test(remote, a_late_append_answer_makes_no_record)
{
    static const char *const extra[] = {
        ",\"test\":{\"fault_message\":\"APPEND_DONE\",\"fault\":\"delay\",\"fault_ms\":300,\"fault_count\":1}", NULL,
        ",\"node_role\":\"remote_cache\""};
    kf_up_ex(3, ",\"range_reuse_delay_ms\":1000", extra);
    fluxon_client *a = kf_client(0);
    put_groups(a, "la", 4, 4, 1, NULL); /* an eager replica task: appended at once */
    cr_assert(wait_master_stat(a, "append_keys_completed", 4, 10000), "the master keeps the copies");
    char key[48];
    for (int i = 0; i < 4; i++) { /* while A's APPEND_DONE answer is held */
        keyname(key, sizeof key, "la", i);
        cr_assert_eq(fluxon_delete(a, key), FLUXON_OK);
    }
    cr_assert(repl_idle(a, 10000), "the held answer came");
    cr_assert_eq(kf_stat(a, "repl_completed"), 1, "the task completed");
    cr_assert_eq(kf_stat(a, "wb_records"), 0, "no record of copies dropped before the answer came");
    (void)master_stat(a, "generation"); /* an answer from the master: a record would be read now */
    cr_assert_eq(get_check(a, "la", 4, 4), 0, "deleted: a miss");
    fluxon_client_close(a);
}
