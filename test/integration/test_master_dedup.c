/* test_master_dedup.c — PUT_DONE batch dedup (T1) over the owner's whole retry horizon
 * (issue 13 item 2): a retry of a batch whose first answer was lost must never be applied
 * again, however many other batches the master published meanwhile (a deleted key must
 * not come back; an older value must not replace a newer one under a fresh put_id), and
 * once the master has forgotten a batch's answer it refuses the batch instead of applying
 * it twice. An embedded master spoken to over TCP as fake owners (mkvfix.h); the "lost"
 * answer is simply an answer the fake owner ignores before it retries. */
#include "mkvfix.h"
#include "mkv.h"

static fluxon_node *master;
static tc_t c1 = {.fd = -1}, c2 = {.fd = -1};

static void start_master(uint32_t master_timeout_ms)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"master\",\"cluster_id\":\"t\",\"listen\":\"127.0.0.1:0\",\"heartbeat_timeout_ms\":60000,"
             "\"master_timeout_ms\":%u,\"log_level\":\"error\"}", master_timeout_ms);
    cr_assert_eq(fluxon_node_start(cfg, &master), FLUXON_OK);
    mkv_port = fluxon_node_port(master);
    cr_assert_gt(mkv_port, 0);
}

static void setup(void) { start_master(5000); }
static void setup_short(void) { start_master(10); } /* acks are kept 60 x 10 ms = 600 ms */

static void teardown(void)
{
    t_close(&c1);
    t_close(&c2);
    fluxon_node_stop(master);
    master = NULL;
    mkv_free_kept();
}

/* n other single-key batches from c (ids first_batch.., keys "o<i>" at offsets in the
 * second half of the segment, replacing each other every 64 keys) */
static void other_batches(tc_t *c, uint64_t first_batch, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "o%u", i % 64);
        t_put1(c, first_batch + i, key, SEG / 2 + (uint64_t)(i % 64) * 4096, 100, 0, NULL, NULL);
    }
}

/* master stats (CLUSTER_NODES' sibling MASTER_STATS) member `name` */
static long long stat_of(tc_t *c, const char *name)
{
    fx_body_empty_t e = {};
    fx_body_json_t j;
    cr_assert_eq(T_CALL(c, MASTER_STATS, empty, &e, json, &j), FLUXON_OK, "%s", last_err);
    char pat[64], *doc = strndup(j.json.p, j.json.len);
    snprintf(pat, sizeof pat, "\"%s\":", name);
    char *at = strstr(doc, pat);
    cr_assert(at, "master stats lack %s: %s", name, doc);
    long long v = atoll(at + strlen(pat));
    free(doc);
    return v;
}

static void delete_key(tc_t *c, const char *key)
{
    fx_body_key_t b = {fx_str_c(key)};
    fx_body_empty_t e;
    cr_assert_eq(T_CALL(c, DELETE, key, &b, empty, &e), FLUXON_OK, "delete %s: %s", key, last_err);
}

TestSuite(master_dedup, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(master_dedup_short, .init = setup_short, .fini = teardown, .timeout = 60);

/* PUT_DONE(k) applied, its answer lost; > 1,024 other batches; k deleted; the retry lands:
 * it gets the first answer and k stays deleted. */
Test(master_dedup, late_retry_does_not_resurrect_a_deleted_key)
{
    t_owner(&c1, "n1", 100);
    const char *k = "k";
    uint64_t off = 4096;
    fx_body_put_done_ack_t first, again;
    cr_assert_eq(t_put(&c1, 1, &k, &off, 1, 100, 0, 0, NULL, 0, &first), FLUXON_OK, "%s", last_err);
    cr_assert_eq(first.statuses.v[0], ST(FLUXON_OK)); /* ... and this answer is "lost" */
    other_batches(&c1, 2, 1100);
    delete_key(&c1, k);
    fx_body_invalidate_t inv;
    cr_assert(t_invalidate(&c1, &inv, 1000), "the delete invalidates n1's replica");
    cr_assert_eq(t_put(&c1, 1, &k, &off, 1, 100, 0, 0, NULL, 0, &again), FLUXON_OK, "%s", last_err);
    cr_assert(again.statuses.v[0] == first.statuses.v[0] && again.put_ms.v[0] == first.put_ms.v[0] &&
                  again.put_ver.v[0] == first.put_ver.v[0],
              "the retry gets the first answer");
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c1, k, &la), ST(FLUXON_ERR_NOT_FOUND), "the deleted key came back");
    cr_assert_eq(stat_of(&c1, "put_dedup"), 1);
}

/* PUT_DONE(k -> n1) applied, its answer lost; n2 publishes a newer k; > 1,024 batches; the
 * retry lands: k stays n2's newer value (no lost update under a fresh put_id). */
Test(master_dedup, late_retry_does_not_overwrite_a_newer_value)
{
    t_owner(&c1, "n1", 100);
    t_owner(&c2, "n2", 200);
    const char *k = "k";
    uint64_t off1 = 4096, off2 = 8192, ms2, ver2;
    fx_body_put_done_ack_t first, again;
    cr_assert_eq(t_put(&c1, 1, &k, &off1, 1, 100, 0, 0, NULL, 0, &first), FLUXON_OK, "%s", last_err);
    t_put1(&c2, 1, k, off2, 100, 0, &ms2, &ver2);
    cr_assert(put_id_lt(first.put_ms.v[0], first.put_ver.v[0], ms2, ver2));
    fx_body_invalidate_t inv;
    cr_assert(t_invalidate(&c1, &inv, 1000), "n2's put invalidates n1's replica");
    other_batches(&c1, 2, 1100);
    cr_assert_eq(t_put(&c1, 1, &k, &off1, 1, 100, 0, 0, NULL, 0, &again), FLUXON_OK, "%s", last_err);
    cr_assert(again.put_ms.v[0] == first.put_ms.v[0] && again.put_ver.v[0] == first.put_ver.v[0],
              "the retry gets the first answer, not a fresh put_id");
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c2, k, &la), ST(FLUXON_OK));
    cr_assert(la.put_ms.v[0] == ms2 && la.put_ver.v[0] == ver2, "the older value replaced the newer one");
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == off2);
    cr_assert_not(t_invalidate(&c2, &inv, 200), "n2's replica must not be invalidated");
}

/* The owner's retry horizon spans reconnects: a retry sent after the owner reconnected
 * with the same generation still gets the first answer. */
Test(master_dedup, a_retry_after_a_same_generation_reconnect_gets_the_first_answer)
{
    t_owner(&c1, "n1", 100);
    const char *k = "k";
    uint64_t off = 4096;
    fx_body_put_done_ack_t first, again;
    cr_assert_eq(t_put(&c1, 1, &k, &off, 1, 100, 0, 0, NULL, 0, &first), FLUXON_OK, "%s", last_err);
    t_close(&c1); /* the answer is lost with the connection */
    t_owner(&c1, "n1", 100);
    delete_key(&c1, k);
    cr_assert_eq(t_put(&c1, 1, &k, &off, 1, 100, 0, 0, NULL, 0, &again), FLUXON_OK, "%s", last_err);
    cr_assert(again.put_ms.v[0] == first.put_ms.v[0] && again.put_ver.v[0] == first.put_ver.v[0]);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c1, k, &la), ST(FLUXON_ERR_NOT_FOUND), "the deleted key came back");
}

/* Past the time the master keeps answers (60 x master_timeout_ms), a retry of a forgotten
 * batch is refused (STALE, nothing applied) while new batches are still applied. */
Test(master_dedup_short, a_forgotten_batch_is_refused_not_applied_twice)
{
    t_owner(&c1, "n1", 100);
    const char *k = "k";
    uint64_t off = 4096;
    fx_body_put_done_ack_t first, again;
    cr_assert_eq(t_put(&c1, 5, &k, &off, 1, 100, 0, 0, NULL, 0, &first), FLUXON_OK, "%s", last_err);
    cr_assert_eq(first.statuses.v[0], ST(FLUXON_OK));
    delete_key(&c1, k);
    double end = th_now_s() + 10;
    while (stat_of(&c1, "put_dedup_forgotten") < 1 && th_now_s() < end) th_sleep_ms(20);
    cr_assert_eq(stat_of(&c1, "put_dedup_forgotten"), 1, "the answer of batch 5 was not forgotten within 10 s");
    cr_assert_eq(stat_of(&c1, "put_dedup_acks"), 0);
    cr_assert_eq(t_put(&c1, 5, &k, &off, 1, 100, 0, 0, NULL, 0, &again), FLUXON_ERR_STALE);
    cr_assert(strstr(last_err, "batch 5") && strstr(last_err, "n1"), "%s", last_err);
    cr_assert_eq(t_put(&c1, 3, &k, &off, 1, 100, 0, 0, NULL, 0, &again), FLUXON_ERR_STALE,
                 "every batch id up to the forgotten one is refused");
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c1, k, &la), ST(FLUXON_ERR_NOT_FOUND), "the deleted key came back");
    cr_assert_eq(stat_of(&c1, "put_done_too_old"), 2);
    t_put1(&c1, 6, k, off, 100, 0, NULL, NULL); /* a new batch is applied */
    cr_assert_eq(t_lookup1(&c1, k, &la), ST(FLUXON_OK));
    /* a new generation starts over: its batch ids are its own */
    t_close(&c1);
    t_owner(&c1, "n1", 101);
    t_put1(&c1, 1, "k1", off, 100, 0, NULL, NULL);
}

/* The memory bound, driven directly (no reactor): past MKV_DEDUP_MAX_BYTES of answers for
 * one owner the oldest go, and every batch id up to the highest one dropped is refused
 * while the kept ones are still answered. */
Test(master_dedup_direct, the_memory_bound_drops_the_oldest_and_raises_the_watermark)
{
    fx_master_t m;
    memset(&m, 0, sizeof m);
    cr_assert_eq(fx_master_kv_init(&m), FLUXON_OK);
    master_node_t n;
    memset(&n, 0, sizeof n);
    strcpy(n.node_id, "d1");
    n.generation = 5;
    n.segment_bytes = SEG;
    n.grant_bytes = GRANT;
    cr_assert_eq(fx_master_kv_node_registered(&m, &n, 0), FLUXON_OK);
    size_t each = MKV_DEDUP_MAX_BYTES / 4 - 128; /* 4 answers fit (with their overhead), a 5th does not */
    for (uint64_t id = 10; id < 15; id++) {
        uint8_t *body = calloc(1, each);
        cr_assert(fx_mkv_dedup_remember(m.kv, &n, id, body, each));
    }
    const uint8_t *b;
    size_t len;
    cr_assert_eq(fx_mkv_dedup_check(m.kv, &n, 10, &b, &len), MKV_DEDUP_FORGOTTEN);
    cr_assert_eq(fx_mkv_dedup_check(m.kv, &n, 3, &b, &len), MKV_DEDUP_FORGOTTEN, "below the watermark");
    cr_assert_eq(fx_mkv_dedup_watermark(&n), 10);
    for (uint64_t id = 11; id < 15; id++) {
        cr_assert_eq(fx_mkv_dedup_check(m.kv, &n, id, &b, &len), MKV_DEDUP_ANSWERED, "batch %llu", (unsigned long long)id);
        cr_assert_eq(len, each);
    }
    cr_assert_eq(fx_mkv_dedup_check(m.kv, &n, 15, &b, &len), MKV_DEDUP_NEW);
    mkv_t *s = m.kv;
    cr_assert_eq(s->c.put_dedup_forgotten, 1);
    cr_assert_eq(s->dedup_acks, 4);
    /* a new generation starts over */
    n.generation = 6;
    cr_assert_eq(fx_master_kv_node_registered(&m, &n, 5), FLUXON_OK);
    cr_assert_eq(fx_mkv_dedup_check(m.kv, &n, 10, &b, &len), MKV_DEDUP_NEW);
    cr_assert_eq(s->dedup_acks, 0);
    fx_master_kv_fini(&m);
    fx_master_kv_node_free(&m, &n);
}
