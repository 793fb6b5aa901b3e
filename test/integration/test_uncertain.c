/* test_uncertain.c — the owner under uncertain master outcomes (issue 13): a callback that
 * outlives a reactor turn must find its entries by identity (offset + slot use), an entry
 * invalidated while its PUT_DONE is uncertain is marked, not freed, and an uncertain EVICT
 * or GET_DONE keeps the copy hidden and retries the same identity. Each scenario drops
 * one master answer with the owner's "test" fault section. */
#include <criterion/criterion.h>

#include "kvfix.h"

TestSuite(uncertain, .fini = kf_down, .timeout = 120);
static void (*const un_unused)(int) __attribute__((unused)) = kf_up; /* kvfix's 2-owner start */
static int (*const un_unused2)(const uint8_t *, size_t, uint64_t) __attribute__((unused)) = kf_check;

#define UVLEN 64

static fluxon_plan *un_put_start(fluxon_client *c, const char **keys, size_t n, uint64_t seed)
{
    fluxon_plan *plan = NULL;
    int st[1024];
    cr_assert_leq(n, 1024);
    cr_assert_eq(fluxon_local_fast_put_start(c, keys, n, UVLEN, NULL, &plan, st), FLUXON_OK);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(st[i], FLUXON_OK, "key %s: %s", keys[i], fluxon_status_string(st[i]));
        kf_fill((uint8_t *)(uintptr_t)plan->value_ptrs[i], UVLEN, seed + i);
    }
    return plan;
}

static fluxon_future *un_put(fluxon_client *c, const char **keys, size_t n, uint64_t seed)
{
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(c, un_put_start(c, keys, n, seed), &f), FLUXON_OK);
    return f;
}

static int un_exists(fluxon_client *c, const char *key)
{
    size_t n = 0;
    return fluxon_batch_exists(c, &key, 1, &n) == FLUXON_OK && n == 1;
}

/* A client of owner X ('A', 'B': the embedded ones) waiting at most timeout_ms per call. */
static fluxon_client *un_client(char owner, unsigned timeout_ms)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"external\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"socket\":\"%s/own%c/s.sock\","
             "\"timeout_ms\":%u,\"log_level\":\"error\"}", kf_dir, owner, timeout_ms);
    fluxon_client *c = NULL;
    cr_assert_eq(fluxon_client_open(cfg, &c), FLUXON_OK);
    return c;
}

/* B1: PUT_DONE's answer is lost (the master applied it); while the owner waits to retry,
 * the key is deleted (INVALIDATE of the still-PENDING entry) and a batch of other keys is
 * put here (new entries, maybe in the old entry's memory). The retry gets the master's
 * cached OK: it must not touch what the invalidated entry's pointer now holds. Deleting
 * the other keys then empties the local index. */
Test(uncertain, an_invalidate_during_an_uncertain_put_done_frees_nothing_the_plan_still_names)
{
    enum { N = 600 };
    const char *fault = ",\"master_timeout_ms\":3000,\"test\":{\"fault_message\":\"PUT_DONE\",\"fault\":\"drop\","
                        "\"fault_count\":1}";
    const char *extra[2] = {fault, NULL};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    const char *k1 = "b1-victim";
    fluxon_future *f1 = un_put(a, &k1, 1, 7); /* its PUT_DONE answer is dropped */
    double end = th_now_s() + 5;
    while (!un_exists(b, k1) && th_now_s() < end) th_sleep_ms(5); /* the master has the route */
    cr_assert(un_exists(b, k1), "the master applied the first PUT_DONE");
    cr_assert_eq(fluxon_delete(b, k1), FLUXON_OK);
    cr_assert(kf_wait_stat(a, "invalidations", 1, 3000), "INVALIDATE reached owner A");
    static char names[N][24];
    static const char *ks[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "b1-other-%04d", i);
        ks[i] = names[i];
    }
    fluxon_future *f2 = un_put(a, ks, N, 100);
    cr_assert_eq(fluxon_future_wait(f2, 10000), FLUXON_OK);
    fluxon_future_free(f2);
    cr_assert_eq(kf_stat(a, "put_done_retries"), 0, "the others were published before the retry");
    cr_assert_eq(fluxon_future_wait(f1, 10000), FLUXON_OK, "the retry got the master's answer");
    fluxon_future_free(f1);
    cr_assert_eq(kf_stat(a, "put_done_retries"), 1);
    for (int i = 0; i < N; i++) cr_assert_eq(fluxon_delete(b, ks[i]), FLUXON_OK);
    cr_assert(kf_wait_stat(a, "index_keys", 0, 5000), "every deleted key left owner A's index (left: %lld)",
              kf_stat(a, "index_keys"));
    cr_assert(kf_wait_stat(a, "slots_pending", 0, 3000));
    cr_assert_eq(kf_stat(a, "slots_committed"), 0);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

#define EVLEN 8192 /* one 8 KiB slot per value */

/* master + owner A holding exactly cap values of EVLEN; extra: more owner fields */
static void un_evict_up(unsigned cap, const char *extra)
{
    kf_dir = th_tmpdir();
    cr_assert_eq(fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\","
                                   "\"listen\":\"127.0.0.1:0\",\"log_level\":\"error\"}", &kf_master), FLUXON_OK);
    char cfg[1024];
    unsigned long long bytes = (unsigned long long)cap * EVLEN;
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"owner\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"node_id\":\"ownA\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s/ownA/s.sock\",\"segment_bytes\":%llu,"
             "\"reserve\":{\"grant_bytes\":%llu,\"expected\":{\"value_len\":%d,\"payload_capacity_bytes\":%llu}},"
             "\"hot_capacity_bytes\":%llu,\"log_level\":\"error\"%s}",
             fluxon_node_port(kf_master), kf_dir, 4096 + bytes, bytes, EVLEN, bytes, bytes, extra);
    cr_assert_eq(fluxon_node_start(cfg, &kf_owner[0]), FLUXON_OK, "%s", cfg);
}

/* put_start of one EVLEN key: its status; published when OK */
static int un_put_evlen(fluxon_client *c, const char *key)
{
    fluxon_plan *plan = NULL;
    int st = -1;
    cr_assert_eq(fluxon_local_fast_put_start(c, &key, 1, EVLEN, NULL, &plan, &st), FLUXON_OK);
    if (st != FLUXON_OK) {
        if (plan) fluxon_put_abort(c, plan);
        return st;
    }
    kf_fill((uint8_t *)(uintptr_t)plan->value_ptrs[0], EVLEN, 5);
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(c, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    return FLUXON_OK;
}

static int un_hits(fluxon_client *c, const char *key)
{
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    cr_assert_eq(fluxon_get_start(c, &key, 1, 1, NULL, 0, &h, &r), FLUXON_OK);
    if (r.transferable_len) {
        fluxon_plan *p = NULL;
        cr_assert_eq(fluxon_get_transfer(c, h, 0, &p), FLUXON_OK);
        cr_assert_eq(fluxon_release_views(c, p), FLUXON_OK);
    } else {
        cr_assert_eq(fluxon_cancel_get_transfer(c, h), FLUXON_OK);
    }
    return r.raw_prefix_hit_len == 1;
}

/* B4: the owner is full; a fifth put makes it evict the coldest value, and the master's
 * answer to that EVICT is lost (the master did drop the replica). The waiting claim gives
 * up first (claim_timeout_ms 100), so nothing asks for eviction again. The owner must not
 * put the value back in its index (the master no longer routes it: a local get would serve
 * what fluxon_delete calls NOT_FOUND): it keeps it hidden and sends the same EVICT again,
 * which the master answers STALE. */
Test(uncertain, an_unanswered_evict_keeps_its_values_hidden_and_resends_the_same_identities)
{
    un_evict_up(4, ",\"master_timeout_ms\":400,\"claim_timeout_ms\":100,"
                   "\"test\":{\"fault_message\":\"EVICT\",\"fault\":\"drop\",\"fault_count\":1}");
    fluxon_client *c = kf_client(0);
    const char *k[4] = {"ev-0", "ev-1", "ev-2", "ev-3"};
    for (int i = 0; i < 4; i++) cr_assert_eq(un_put_evlen(c, k[i]), FLUXON_OK);
    cr_assert_eq(un_put_evlen(c, "ev-4"), FLUXON_ERR_NO_SPACE, "the claim gave up before the EVICT's answer");
    double end = th_now_s() + 10;
    while (th_now_s() < end && kf_stat(c, "evictions") == 0 && kf_stat(c, "restored") == 0) th_sleep_ms(10);
    cr_assert_eq(kf_stat(c, "restored"), 0, "an EVICT of unknown outcome never restores its values");
    cr_assert_eq(kf_stat(c, "evictions"), 1, "the same EVICT was sent again and answered");
    cr_assert_geq(kf_stat(c, "evict_resends"), 1);
    cr_assert_eq(un_hits(c, "ev-0"), 0, "the evicted value is not served here");
    cr_assert_eq(fluxon_delete(c, "ev-0"), FLUXON_ERR_NOT_FOUND, "and the master does not route it");
    for (int i = 1; i < 4; i++) cr_assert(un_hits(c, k[i]), "%s still here", k[i]);
    cr_assert(kf_wait_stat(c, "eviction_debt", 0, 3000));
    cr_assert(kf_wait_stat(c, "holders", 0, 3000));
    cr_assert_eq(kf_stat(c, "slots_pending"), 0);
    fluxon_client_close(c);
}

/* B3: owner B copies a value from A and asks the master to record the copy as a replica
 * (GET_DONE); the master does, but its answer is lost. B must not free the copy (the
 * master's route names it: another owner could read the slot after reuse): it keeps it
 * hidden, sends the same GET_DONE again, and serves it once the master answers. */
Test(uncertain, an_unanswered_get_done_keeps_the_copy_hidden_and_resends_it)
{
    const char *extra[2] = {NULL, ",\"master_timeout_ms\":600,"
                                  "\"test\":{\"fault_message\":\"GET_DONE\",\"fault\":\"drop\",\"fault_count\":1}"};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    const char *k = "b3-key";
    fluxon_future *f = un_put(a, &k, 1, 33);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    cr_assert_eq(fluxon_get_start(b, &k, 1, 1, NULL, 0, &h, &r), FLUXON_OK);
    cr_assert_eq(r.raw_prefix_hit_len, 1, "served once the resent GET_DONE was answered (miss_status %d)",
                 r.miss_status);
    fluxon_plan *p = NULL;
    cr_assert_eq(fluxon_get_transfer(b, h, 0, &p), FLUXON_OK);
    cr_assert(kf_check((const uint8_t *)(uintptr_t)p->value_ptrs[0], UVLEN, 33), "D1: byte-exact");
    cr_assert_eq(fluxon_release_views(b, p), FLUXON_OK);
    cr_assert_geq(kf_stat(b, "get_done_resends"), 1);
    cr_assert_eq(kf_stat(b, "remote_hits"), 1);
    cr_assert_eq(kf_stat(b, "slots_committed"), 1, "B holds the replica the master recorded");
    cr_assert(un_hits(b, k), "the replica is local now");
    cr_assert(kf_wait_stat(b, "holders", 0, 3000));
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* B14: a master answer whose parallel arrays do not match (version skew, a master bug; the
 * "truncate" fault drops the put_ms/put_ver columns) never makes the owner read past them.
 * A malformed PUT_DONE answer is an unknown outcome: the batch is retried with the same
 * id and published from the master's next answer. */
Test(uncertain, a_put_done_answer_missing_its_version_columns_is_retried_not_read)
{
    const char *extra[1] = {",\"master_timeout_ms\":2000,"
                            "\"test\":{\"fault_message\":\"PUT_DONE\",\"fault\":\"truncate\",\"fault_count\":1}"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *a = kf_client(0);
    const char *k = "b14-put";
    fluxon_future *f = un_put(a, &k, 1, 14);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    cr_assert_eq(kf_stat(a, "put_done_retries"), 1, "the malformed answer was an unknown outcome");
    cr_assert_eq(kf_stat(a, "slots_committed"), 1);
    cr_assert(un_hits(a, k));
    fluxon_client_close(a);
}

/* B14: an INVALIDATE without its version columns is refused whole (logged, counted). */
Test(uncertain, an_invalidate_missing_its_version_columns_is_ignored_not_read)
{
    const char *extra[2] = {",\"test\":{\"fault_message\":\"INVALIDATE\",\"fault\":\"truncate\",\"fault_count\":1}",
                            NULL};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    const char *k[2] = {"b14-inv-0", "b14-inv-1"};
    fluxon_future *f = un_put(a, k, 2, 15);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    cr_assert_eq(fluxon_delete(b, k[0]), FLUXON_OK);
    cr_assert(kf_wait_stat(a, "invalidations_malformed", 1, 3000), "the malformed INVALIDATE was refused");
    cr_assert_eq(kf_stat(a, "invalidations"), 0);
    cr_assert_eq(fluxon_delete(b, k[1]), FLUXON_OK); /* the next one is well-formed */
    cr_assert(kf_wait_stat(a, "invalidations", 1, 3000));
    cr_assert_eq(un_hits(a, k[1]), 0);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* Item 11: the owner's answer to put_start arrives after the client gave up (the owner
 * takes the request up 800 ms late, a test fault standing for a stalled owner; the
 * client's timeout_ms is 300). The client hands the late plan back at once (PUT_ABORT):
 * the key can be written again without waiting for the owner's put_plan_ttl_ms (20 s by
 * default) or the client's exit. (A late GRANT no longer makes a late answer: the owner
 * ends a claim at 9/10 of the caller's timeout, grant_ceiling's test.) */
Test(uncertain, a_put_plan_answered_after_the_client_gave_up_is_handed_back)
{
    const char *extra[1] = {",\"test\":{\"fault_message\":\"PUT_START\",\"fault\":\"delay_request\","
                            "\"fault_ms\":800,\"fault_count\":1}"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *a = un_client('A', 300);
    const char *k = "i11-key";
    fluxon_plan *plan = NULL;
    int st = -1;
    cr_assert_eq(fluxon_local_fast_put_start(a, &k, 1, UVLEN, NULL, &plan, &st), FLUXON_ERR_TIMEOUT);
    cr_assert(kf_wait_stat(a, "puts_aborted", 1, 5000), "the late plan was handed back");
    cr_assert_eq(kf_stat(a, "slots_prepared"), 0);
    cr_assert_eq(kf_stat(a, "puts_inflight"), 0);
    cr_assert_eq(fluxon_local_fast_put_start(a, &k, 1, UVLEN, NULL, &plan, &st), FLUXON_OK);
    cr_assert_eq(st, FLUXON_OK, "the key can be written again: %s", fluxon_status_string(st));
    kf_fill((uint8_t *)(uintptr_t)plan->value_ptrs[0], UVLEN, 11);
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(a, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 5000), FLUXON_OK);
    fluxon_future_free(f);
    cr_assert_eq(kf_stat(a, "put_plans_expired"), 0);
    fluxon_client_close(a);
}

/* A late heartbeat answer is no lost link: with heartbeats every 100 ms, the master's
 * first three answers arrive 600 ms late; the owner waits master_timeout_ms for each
 * (it used to give up after 3 intervals, drop the working link and refuse puts with
 * UNAVAILABLE until it was back: the restart suite's rare failure on a loaded machine). */
Test(uncertain, a_late_heartbeat_answer_keeps_the_master_link)
{
    const char *extra[1] = {",\"heartbeat_interval_ms\":100,"
                            "\"test\":{\"fault_message\":\"HEARTBEAT\",\"fault\":\"delay\",\"fault_ms\":600,"
                            "\"fault_count\":3}"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *a = kf_client(0);
    /* 15 heartbeats sent: 1.5 s, well past the delayed answers (at most 0.3 + 0.6 s) */
    cr_assert(kf_wait_stat(a, "heartbeats_sent", 15, 20000), "15 heartbeats within 20 s");
    cr_assert_eq(kf_stat(a, "heartbeat_failures"), 0, "no heartbeat given up on");
    const char *k = "hb-key";
    fluxon_plan *plan = NULL;
    int st = -1;
    cr_assert_eq(fluxon_local_fast_put_start(a, &k, 1, UVLEN, NULL, &plan, &st), FLUXON_OK);
    cr_assert_eq(st, FLUXON_OK, "%s", fluxon_status_string(st));
    cr_assert_eq(fluxon_put_abort(a, plan), FLUXON_OK);
    fluxon_client_close(a);
}

/* Heartbeats rarer than the master's timeout (its REGISTER answer says it) would have the
 * master declare the owner dead between two of them, for good: the owner heartbeats at
 * a third of that timeout instead (and warns). */
Test(uncertain, heartbeats_rarer_than_the_masters_timeout_are_brought_below_it)
{
    const char *extra[1] = {",\"heartbeat_interval_ms\":86400000"};
    kf_up_ex(1, ",\"heartbeat_timeout_ms\":600", extra);
    fluxon_client *a = kf_client(0);
    cr_assert(kf_wait_stat(a, "heartbeats_sent", 6, 10000), "a heartbeat every 200 ms, not every day");
    cr_assert_eq(kf_stat(a, "heartbeat_failures"), 0);
    cr_assert_eq(kf_stat(a, "owners_alive"), 1, "the master never declared the owner dead");
    fluxon_client_close(a);
}

/* Item 11, the owner's own bound: an engine that got its put plan but never commits nor
 * aborts it (hung, or a bug) does not hold the key until it exits: the owner expires the
 * plan after put_plan_ttl_ms and the key can be written again. Issue 44 W5: the plan's
 * slot is not reused meanwhile (the stalled engine may still write through its
 * value_ptrs): it stays prepared until the client names the plan again (its commit is
 * refused WRONG_HANDLE and the slot goes) or disconnects. */
Test(uncertain, a_put_plan_nobody_commits_expires_on_the_owner)
{
    const char *extra[1] = {",\"put_plan_ttl_ms\":700"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(0);
    const char *k = "i11-orphan";
    fluxon_plan *orphan = NULL, *plan = NULL;
    int st = -1;
    cr_assert_eq(fluxon_local_fast_put_start(a, &k, 1, UVLEN, NULL, &orphan, &st), FLUXON_OK);
    cr_assert_eq(st, FLUXON_OK);
    cr_assert_eq(fluxon_local_fast_put_start(b, &k, 1, UVLEN, NULL, &plan, &st), FLUXON_OK);
    cr_assert_eq(st, FLUXON_ERR_KEY_BEING_WRITTEN, "the prepared plan holds the key");
    cr_assert_eq(fluxon_put_abort(b, plan), FLUXON_OK);
    cr_assert(kf_wait_stat(a, "put_plans_expired", 1, 5000), "the owner expired the plan");
    cr_assert_eq(kf_stat(a, "slots_prepared"), 1, "W5: the expired plan's slot is not reused while its client lives");
    cr_assert_eq(fluxon_local_fast_put_start(b, &k, 1, UVLEN, NULL, &plan, &st), FLUXON_OK);
    cr_assert_eq(st, FLUXON_OK, "the key can be written again: %s", fluxon_status_string(st));
    cr_assert_neq(plan->value_ptrs[0], orphan->value_ptrs[0], "another slot than the expired plan's");
    cr_assert_eq(fluxon_put_abort(b, plan), FLUXON_OK);
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(a, orphan, &f), FLUXON_ERR_WRONG_HANDLE, "the expired plan is not published");
    cr_assert(kf_wait_stat(a, "slots_prepared", 0, 5000), "naming it again released its slot");
    fluxon_client_close(b);
    fluxon_client_close(a);
}

/* B5: a read plan holds its pins until release_views, whatever the timing. The owner reads
 * the consume of get_transfer late (a stalled owner: test fault delay_request on
 * HANDLE_CONSUME, 1 s) while the handle's TTL is 400 ms. The owner must not have released
 * the pins meanwhile: once it has read the consume, the plan's four values are still held
 * (and byte-exact); only release_views frees them. */
Test(uncertain, a_consume_the_owner_reads_late_still_holds_the_read_plan)
{
    const char *extra[1] = {",\"handle_ttl_ms\":400,\"test\":{\"fault_message\":\"HANDLE_CONSUME\","
                            "\"fault\":\"delay_request\",\"fault_ms\":1000,\"fault_count\":1}"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *c = kf_client(0);
    const char *keys[4] = {"b5-0", "b5-1", "b5-2", "b5-3"};
    fluxon_future *f = un_put(c, keys, 4, 50);
    cr_assert_eq(fluxon_future_wait(f, 5000), FLUXON_OK);
    fluxon_future_free(f);
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    cr_assert_eq(fluxon_get_start(c, keys, 4, 1, NULL, 0, &h, &r), FLUXON_OK);
    cr_assert_eq(r.transferable_len, 4);
    fluxon_plan *plan = NULL;
    cr_assert_eq(fluxon_get_transfer(c, h, 0, &plan), FLUXON_OK, "transferred well within the TTL");
    cr_assert(kf_wait_stat(c, "handles_open", 0, 5000), "the owner read the late consume");
    cr_assert_eq(kf_stat(c, "holders"), 4, "the read plan's pins survived the late consume");
    for (int i = 0; i < 4; i++)
        cr_assert(kf_check((const uint8_t *)(uintptr_t)plan->value_ptrs[i], UVLEN, 50 + (uint64_t)i), "value %d", i);
    cr_assert_eq(fluxon_release_views(c, plan), FLUXON_OK);
    cr_assert(kf_wait_stat(c, "holders", 0, 3000), "release_views frees them");
    fluxon_client_close(c);
}

/* ---- raw protocol: what the public API can never send ---- */
#include <sys/socket.h>
#include <unistd.h>

#include "hello.h"
#include "msg.h"
#include "unix.h"

static int un_read_full(int s, void *buf, size_t len)
{
    size_t got = 0;
    double end = th_now_s() + 5;
    while (got < len && th_now_s() < end) { /* bounded in time */
        ssize_t r = recv(s, (uint8_t *)buf + got, len - got, MSG_DONTWAIT);
        if (r > 0) got += (size_t)r;
        else if (r == 0) return -1;
        else th_sleep_ms(2);
    }
    return got == len ? 0 : -1;
}

/* An external that speaks the wire protocol itself: connected and past HELLO. */
static int un_raw_external(int owner)
{
    char path[512], cfgjson[1024], err[256];
    snprintf(path, sizeof path, "%s/own%c/s.sock", kf_dir, 'A' + owner);
    snprintf(cfgjson, sizeof cfgjson, "{\"role\":\"external\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\","
             "\"socket\":\"%s\"}", path);
    fx_config_t cfg;
    cr_assert_eq(fx_config_parse(cfgjson, &cfg, err, sizeof err), FLUXON_OK, "%s", err);
    int s = -1;
    cr_assert_eq(fx_unix_connect(path, 2000, &s), FLUXON_OK);
    fx_body_hello_t hb;
    fx_hello_fill(&cfg, FX_ROLE_EXTERNAL, "raw", 1, &hb);
    uint8_t out[1024];
    size_t bl = fx_body_hello_size(&hb);
    fx_frame_header_t h = {FX_FRAME_MAGIC, FX_MSG_HELLO, 0, (uint32_t)bl, 0, 1};
    fx_frame_header_encode(&h, out);
    fx_body_hello_encode(&hb, out + FX_FRAME_HEADER_BYTES);
    cr_assert_eq(send(s, out, FX_FRAME_HEADER_BYTES + bl, MSG_NOSIGNAL), (ssize_t)(FX_FRAME_HEADER_BYTES + bl));
    int seg = -1;
    size_t got = 0;
    cr_assert_eq(fx_unix_recv_fd(s, &seg, out, FX_FRAME_HEADER_BYTES, &got, 2000), FLUXON_OK);
    close(seg);
    fx_frame_header_t rh;
    cr_assert_eq(un_read_full(s, out + got, FX_FRAME_HEADER_BYTES - got), 0);
    cr_assert_eq(fx_frame_header_decode(out, sizeof out, &rh), FLUXON_OK);
    cr_assert_eq(rh.status, FLUXON_OK);
    cr_assert_eq(un_read_full(s, out, rh.body_len), 0); /* the ack's body */
    return s;
}

/* Item 18: get_start's atomic-group lengths are u64 on the wire; {2^64 - 1, 2} for one key
 * wraps to 1 when summed. The owner refuses it, naming the group, like every other layer. */
Test(uncertain, a_get_start_whose_group_lengths_wrap_is_refused)
{
    kf_up(1);
    int s = un_raw_external(0);
    fx_str_t key = fx_str_c("g18");
    uint64_t lens[2] = {UINT64_MAX, 2};
    fx_body_get_start_t g = {{&key, 1}, {lens, 2}, 1, 0};
    uint8_t out[1024];
    size_t bl = fx_body_get_start_size(&g);
    fx_frame_header_t h = {FX_FRAME_MAGIC, FX_MSG_GET_START, 0, (uint32_t)bl, 0, 2};
    fx_frame_header_encode(&h, out);
    fx_body_get_start_encode(&g, out + FX_FRAME_HEADER_BYTES);
    cr_assert_eq(send(s, out, FX_FRAME_HEADER_BYTES + bl, MSG_NOSIGNAL), (ssize_t)(FX_FRAME_HEADER_BYTES + bl));
    fx_frame_header_t rh;
    cr_assert_eq(un_read_full(s, out, FX_FRAME_HEADER_BYTES), 0);
    cr_assert_eq(fx_frame_header_decode(out, sizeof out, &rh), FLUXON_OK);
    cr_assert_eq(rh.req_id, 2);
    cr_assert_eq(rh.status, FLUXON_ERR_INVALID_ARGUMENT, "refused (status %d)", rh.status);
    cr_assert_eq(un_read_full(s, out, rh.body_len), 0);
    fx_body_error_t e;
    fx_arena_t arena = {0};
    cr_assert_eq(fx_body_error_decode(out, rh.body_len, &e, &arena), FLUXON_OK);
    char msg[256];
    fx_str_copy(e.message, msg, sizeof msg);
    cr_assert(strstr(msg, "atomic group"), "the message names the group: %s", msg);
    fx_arena_free(&arena);
    close(s);
}

/* A client that gave up on an answer (its timeout_ms passed) cleans up what the late answer
 * reserved: the owner reads this get_start 1.5 s late (test fault delay_request), the
 * client waits 1 s and returns TIMEOUT; when the answer arrives the client cancels its
 * handle at once, so no pin stays behind while the client lives on. */
Test(uncertain, a_get_start_answered_after_the_client_gave_up_leaves_no_pins)
{
    const char *extra[1] = {",\"test\":{\"fault_message\":\"GET_START\",\"fault\":\"delay_request\","
                            "\"fault_ms\":1500,\"fault_count\":1}"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *c = kf_client(0), *w = NULL;
    w = un_client('A', 1000);
    const char *keys[2] = {"late-0", "late-1"};
    fluxon_future *f = un_put(c, keys, 2, 70);
    cr_assert_eq(fluxon_future_wait(f, 5000), FLUXON_OK);
    fluxon_future_free(f);
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    cr_assert_eq(fluxon_get_start(w, keys, 2, 1, NULL, 0, &h, &r), FLUXON_ERR_TIMEOUT);
    cr_assert(kf_wait_stat(c, "handles_opened", 1, 5000), "the owner answered late");
    cr_assert(kf_wait_stat(c, "handles_open", 0, 3000), "the late answer's handle was cancelled");
    cr_assert(kf_wait_stat(c, "holders", 0, 3000), "no pins left");
    fluxon_client_close(w);
    fluxon_client_close(c);
}

/* Server waits below the caller's (item 11) on the read path: the only copy of a value is
 * on owner P, a separate process that stops (SIGSTOP) before owner A fetches it. A reader
 * on A whose client waits timeout_ms 2000 gets A's answer — a miss that says TIMEOUT —
 * before it gives up, instead of FLUXON_ERR_TIMEOUT while A's transfer waits its own 30 s. */
static pid_t un_proc = -1;

static void un_proc_down(void)
{
    if (un_proc > 0) {
        kill(un_proc, SIGCONT);
        th_stop(un_proc, SIGTERM, 3000);
    }
    un_proc = -1;
    kf_down();
}

/* Starts owner P in a process of its own (un_proc: SIGSTOP) with more config members
 * extra, waits until it serves and is registered; returns a client of it. */
static fluxon_client *un_owner_p(const char *extra)
{
    char cfg[1024], sock[256];
    snprintf(sock, sizeof sock, "%s/ownP/s.sock", kf_dir);
    un_proc = kf_owner_proc("ownP", sock, "32MiB", "warn", extra);
    cr_assert(th_wait_path(sock, 10000), "owner P serves");
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"external\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"socket\":\"%s\","
             "\"timeout_ms\":5000,\"log_level\":\"error\"}", sock);
    fluxon_client *p = NULL;
    cr_assert_eq(fluxon_client_open(cfg, &p), FLUXON_OK);
    cr_assert(th_wait_registered(p, 10000), "owner P registered with the master within 10 s");
    return p;
}

Test(uncertain, a_fetch_from_a_stalled_owner_ends_before_the_readers_timeout, .fini = un_proc_down)
{
    /* UCX (tcp), as from an owner on another host: through P's mapped segment (same host)
     * the copy would not need P at all */
    const char *extra[1] = {",\"peer_segments\":\"ucx\""};
    kf_up_ex(1, NULL, extra);
    fluxon_client *p = un_owner_p(""), *a = NULL; /* owner P in a process of its own; a client of it */
    const char *k = "stalled-0";
    fluxon_future *f = un_put(p, &k, 1, 90);
    cr_assert_eq(fluxon_future_wait(f, 5000), FLUXON_OK);
    fluxon_future_free(f);
    fluxon_client_close(p);
    a = un_client('A', 2000);
    cr_assert_eq(kill(un_proc, SIGSTOP), 0);
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    double t0 = th_now_s();
    int rc = fluxon_get_start(a, &k, 1, 1, NULL, 0, &h, &r);
    double took = th_now_s() - t0;
    cr_assert_eq(rc, FLUXON_OK, "owner A answered (%s after %.2f s)", fluxon_status_string(rc), took);
    cr_assert_eq(r.transferable_len, 0);
    cr_assert(r.miss_status == FLUXON_ERR_TIMEOUT || r.miss_status == FLUXON_ERR_UNAVAILABLE, "miss says why: %s",
              fluxon_status_string(r.miss_status));
    cr_assert_lt(took, 3.0, "within the reader's 2 s (%.2f s; an answer at all proves it came first)", took);
    cr_assert_eq(fluxon_cancel_get_transfer(a, h), FLUXON_OK);
    fluxon_client_close(a);
}

/* A stopped source, read from (the fetch tests below): owner A (a_extra) and owner P in a
 * process of its own (p_extra; it beats every 200 ms against the master's 3000 ms timeout:
 * no false death under ASan) hold ks[0..1] from P; A's reader (a 20 s wait) reads ks[0]
 * from P (A connects to P), P is stopped, and the reader asks for ks[1]: its answer in *r,
 * the seconds it took returned; *a_p the reader (open), *h the handle to cancel. */
static double un_read_from_stopped(const char *a_extra, const char *p_extra, const char *ks[2], uint64_t seed,
                                   fluxon_client **a_p, fluxon_get_handle **h, fluxon_get_start_result *r)
{
    const char *extra[1] = {a_extra};
    kf_up_ex(1, ",\"heartbeat_timeout_ms\":3000", extra);
    char pcfg[160];
    snprintf(pcfg, sizeof pcfg, "%s,\"heartbeat_interval_ms\":200", p_extra);
    fluxon_client *p = un_owner_p(pcfg);
    fluxon_future *f = un_put(p, ks, 2, seed);
    cr_assert_eq(fluxon_future_wait(f, 5000), FLUXON_OK);
    fluxon_future_free(f);
    fluxon_client_close(p);
    fluxon_client *a = *a_p = un_client('A', 20000);
    cr_assert_eq(fluxon_get_start(a, &ks[0], 1, 1, NULL, 0, h, r), FLUXON_OK);
    cr_assert_eq(r->transferable_len, 1, "the first value comes from P");
    cr_assert_eq(fluxon_cancel_get_transfer(a, *h), FLUXON_OK);
    cr_assert_eq(kill(un_proc, SIGSTOP), 0);
    double t0 = th_now_s();
    int rc = fluxon_get_start(a, &ks[1], 1, 1, NULL, 0, h, r);
    double took = th_now_s() - t0;
    cr_assert_eq(rc, FLUXON_OK, "owner A answered (%s after %.2f s)", fluxon_status_string(rc), took);
    cr_assert_lt(took, 10.0, "ended by the master's word, not the 18 s bound (%.2f s)", took);
    return took;
}

/* Over shared memory (ucx_tls "sm,self") UCX cannot tell a peer died: a fetch from a
 * stopped owner P waited its whole bound, 9/10 of the reader's 20 s. Now A fails its UCX
 * peer for P as soon as the master no longer lists P (heartbeat_timeout_ms 3000), and the
 * reader is answered (a miss that says why) within a few seconds. */
Test(uncertain, a_fetch_over_shared_memory_ends_when_the_master_declares_its_source_dead, .fini = un_proc_down)
{
    const char *ks[2] = {"shm-0", "shm-1"};
    fluxon_client *a = NULL;
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    double took = un_read_from_stopped(",\"ucx_tls\":\"sm,self\"", ",\"ucx_tls\":\"sm,self\"", ks, 95, &a, &h, &r);
    /* UCX may read a stopped process's memory one-sided (shared memory, CMA: no progress
     * of P needed): the copy then lands (seen on a loaded VM). Otherwise the read waits on
     * P, and the master's word ends it. */
    if (r.transferable_len == 0) cr_assert_geq(kf_stat(a, "peers_failed_dead"), 1);
    else th_note("the read from the stopped P completed one-sided (%.2f s)", took);
    cr_assert_eq(fluxon_cancel_get_transfer(a, h), FLUXON_OK);
    fluxon_client_close(a);
}

/* The same over TCP (UCX with PEER error handling, as between hosts): UCX learns of a peer's
 * death from its connection, which a stopped (hung) process keeps open — the kernel still
 * answers for it. A fetch from a stopped owner P waited 9/10 of the reader's 20 s (and a
 * CPU owner's copies read so stalled an engine ~27 s: found by a fault test of the tiers,
 * session 58). A fails its UCX peer for P when the master no longer lists P, whatever UCX
 * can detect. */
Test(uncertain, a_fetch_over_tcp_ends_when_the_master_declares_its_stopped_source_dead, .fini = un_proc_down)
{
    const char *ks[2] = {"tcp-0", "tcp-1"};
    fluxon_client *a = NULL;
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    (void)un_read_from_stopped(",\"peer_segments\":\"ucx\"", "", ks, 96, &a, &h, &r);
    cr_assert_eq(r.transferable_len, 0, "a stopped process cannot serve a read over TCP");
    cr_assert(r.miss_status == FLUXON_ERR_TIMEOUT || r.miss_status == FLUXON_ERR_UNAVAILABLE, "miss says why: %s",
              fluxon_status_string(r.miss_status));
    cr_assert_geq(kf_stat(a, "peers_failed_dead"), 1);
    cr_assert_eq(fluxon_cancel_get_transfer(a, h), FLUXON_OK);
    /* P resumes: the master lists it again (same process), and A's next fetch from it
     * connects afresh and reads the value */
    cr_assert_eq(kill(un_proc, SIGCONT), 0);
    cr_assert(kf_wait_stat(a, "owners_alive", 2, 10000), "the master lists P again");
    cr_assert_eq(fluxon_get_start(a, &ks[1], 1, 1, NULL, 0, &h, &r), FLUXON_OK);
    cr_assert_eq(r.transferable_len, 1, "read from P again (%s)", fluxon_status_string(r.miss_status));
    cr_assert_eq(fluxon_cancel_get_transfer(a, h), FLUXON_OK);
    fluxon_client_close(a);
}

/* L3 (issue 44): a master that does not answer a GET_DONE (held back 6 s by a test fault on
 * owner B, as a hung master would) no longer holds B's readers past their own wait: the
 * reader's get_start (client timeout_ms 2000) is answered by B — a miss that says
 * TIMEOUT — while the copy stays hidden; once the master answers, B keeps the copy as a
 * replica. The old code kept the reader waiting for the master: the client gave up
 * (FLUXON_ERR_TIMEOUT) and B's get stayed in flight until the answer came. */
Test(uncertain, readers_of_a_copy_the_master_does_not_confirm_are_answered_by_their_deadline)
{
    const char *extra[2] = {NULL, ",\"test\":{\"fault_message\":\"GET_DONE\",\"fault\":\"delay_request\","
                                  "\"fault_ms\":6000,\"fault_count\":1}"};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = kf_client(0), *b = NULL, *b2 = kf_client(1);
    const char *k = "l3-key";
    fluxon_future *f = un_put(a, &k, 1, 44);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    b = un_client('B', 2000);
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    double t0 = th_now_s();
    int rc = fluxon_get_start(b, &k, 1, 1, NULL, 0, &h, &r);
    double took = th_now_s() - t0;
    cr_assert_eq(rc, FLUXON_OK, "owner B answered within the reader's wait (%s after %.2f s)",
                 fluxon_status_string(rc), took);
    cr_assert_eq(r.raw_prefix_hit_len, 0);
    cr_assert_eq(r.miss_status, FLUXON_ERR_TIMEOUT, "the miss says why: %s", fluxon_status_string(r.miss_status));
    cr_assert_eq(fluxon_cancel_get_transfer(b, h), FLUXON_OK);
    cr_assert_eq(kf_stat(b2, "get_done_readers_timed_out"), 1);
    cr_assert_eq(kf_stat(b2, "gets_inflight"), 0, "nothing of the get waits for the master");
    /* the held GET_DONE goes; the master records the copy, B indexes it */
    cr_assert(kf_wait_stat(b2, "slots_committed", 1, 15000), "B keeps the copy the master recorded");
    cr_assert(un_hits(b2, k), "the replica is local now");
    cr_assert_eq(kf_stat(b2, "remote_hits"), 0, "nobody was served by that fetch");
    fluxon_client_close(b);
    fluxon_client_close(b2);
    fluxon_client_close(a);
}

/* L3 (issue 44), the put side: a PUT_DONE the master does not answer (held back 6 s by a
 * test fault, as a hung master would) no longer holds an inline put past its caller's wait:
 * the client (timeout_ms 2000) hears UNKNOWN_OUTCOME from the owner, and the value is
 * published with the same batch id once the master answers. The old code left the caller
 * to give up on its own (FLUXON_ERR_TIMEOUT). */
Test(uncertain, an_inline_put_the_master_does_not_confirm_is_answered_unknown_by_its_deadline)
{
    const char *extra[2] = {",\"test\":{\"fault_message\":\"PUT_DONE\",\"fault\":\"delay_request\","
                            "\"fault_ms\":6000,\"fault_count\":1}", NULL};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = NULL, *a2 = kf_client(0), *b = kf_client(1);
    a = un_client('A', 2000);
    uint8_t v[4096];
    kf_fill(v, sizeof v, 61);
    double t0 = th_now_s();
    int rc = fluxon_put(a, "l3-put", v, sizeof v, NULL);
    double took = th_now_s() - t0;
    cr_assert_eq(rc, FLUXON_ERR_UNKNOWN_OUTCOME, "the owner answered within the caller's wait (%s after %.2f s)",
                 fluxon_status_string(rc), took);
    cr_assert_eq(kf_stat(a2, "put_inline_answered_uncertain"), 1);
    cr_assert(un_hits(a2, "l3-put"), "readable on its owner meanwhile");
    double end = th_now_s() + 15;
    while (!un_exists(b, "l3-put") && th_now_s() < end) th_sleep_ms(50);
    cr_assert(un_exists(b, "l3-put"), "published with the same batch once the master answered");
    cr_assert(kf_wait_stat(a2, "puts_inflight", 0, 3000), "the plan ended");
    fluxon_client_close(a);
    fluxon_client_close(a2);
    fluxon_client_close(b);
}
