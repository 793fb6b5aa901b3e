/* test_master_kv.c — the master's KV state through the real plumbing: an embedded master
 * (fluxon_node_start) spoken to over blocking TCP sockets with the frame codec, as owners
 * "n1"/"n2" would: grants, batch publication (dedup, convergence, whole-group rejection),
 * invalidations, lookups, durable replicas, deletes, EXISTS, leases, LIST paging,
 * malformed requests, one-way requests, dead owners and new generations. */
#include "mkvfix.h"

static fluxon_node *master;
static tc_t c1 = {.fd = -1}, c2 = {.fd = -1}, c3 = {.fd = -1};

static void setup(void)
{
    cr_assert_eq(fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"t\",\"listen\":\"127.0.0.1:0\","
                                   "\"heartbeat_timeout_ms\":60000,\"log_level\":\"error\"}", &master),
                 FLUXON_OK);
    mkv_port = fluxon_node_port(master);
    cr_assert_gt(mkv_port, 0);
}

static void teardown(void)
{
    t_close(&c1);
    t_close(&c2);
    t_close(&c3);
    fluxon_node_stop(master);
    master = NULL;
    mkv_free_kept();
}

/* ---- tests ---- */
TestSuite(master_kv, .init = setup, .fini = teardown, .timeout = 60);

Test(master_kv, grant_until_no_space_and_bad_grants)
{
    t_owner(&c1, "n1", 100);
    fx_body_grant_t g = {4096, 3};
    fx_body_grant_ack_t ack;
    uint64_t seen[16];
    size_t nseen = 0;
    cr_assert_eq(T_CALL(&c1, GRANT, grant, &g, grant_ack, &ack), FLUXON_OK, "%s", last_err);
    cr_assert_eq(ack.grant_ids.n, 3);
    cr_assert_eq(ack.offsets.n, 3);
    for (uint32_t i = 0; i < 3; i++) {
        cr_assert_eq(ack.grant_ids.v[i], i + 1);
        seen[nseen++] = ack.offsets.v[i];
    }
    /* ask for more than fit: partial success */
    g.count = 64;
    cr_assert_eq(T_CALL(&c1, GRANT, grant, &g, grant_ack, &ack), FLUXON_OK, "%s", last_err);
    cr_assert_eq(ack.grant_ids.n, 4, "floor((64MiB-4096)/8MiB) = 7 grants in all");
    for (uint32_t i = 0; i < 4; i++) {
        cr_assert_eq(ack.grant_ids.v[i], 4 + i);
        seen[nseen++] = ack.offsets.v[i];
    }
    for (size_t i = 0; i < nseen; i++) {
        cr_assert_geq(seen[i], 4096);
        cr_assert_eq(seen[i] % 4096, 0);
        cr_assert_leq(seen[i] + GRANT, SEG);
        for (size_t j = 0; j < i; j++)
            cr_assert(seen[i] + GRANT <= seen[j] || seen[j] + GRANT <= seen[i], "grants overlap");
    }
    g.count = 1;
    cr_assert_eq(T_CALL(&c1, GRANT, grant, &g, grant_ack, &ack), FLUXON_ERR_NO_SPACE);
    cr_assert(strstr(last_err, "n1") && strstr(last_err, "8388608"), "%s", last_err);
    /* bad arguments */
    fx_body_grant_t bad[] = {{0, 1}, {GRANT + 1, 1}, {4096, 0}, {4096, 65}};
    for (size_t i = 0; i < FX_ARRAY_LEN(bad); i++)
        cr_assert_eq(T_CALL(&c1, GRANT, grant, &bad[i], grant_ack, &ack), FLUXON_ERR_INVALID_ARGUMENT, "case %zu", i);
    /* not registered: refused */
    t_hello(&c2, "x1");
    cr_assert_eq(T_CALL(&c2, GRANT, grant, &g, grant_ack, &ack), FLUXON_ERR_INVALID_ARGUMENT);
}

Test(master_kv, put_done_batch_ids_and_retry)
{
    t_owner(&c1, "n1", 100);
    const char *keys[] = {"k0", "k1", "k2", "k3"};
    uint64_t offs[] = {4096, 8192, 12288, 16384};
    fx_body_put_done_ack_t a1, a2;
    cr_assert_eq(t_put(&c1, 7, keys, offs, 4, 100, 0, 0, NULL, 0, &a1), FLUXON_OK, "%s", last_err);
    for (uint32_t i = 0; i < 4; i++) {
        cr_assert_eq(a1.statuses.v[i], ST(FLUXON_OK));
        cr_assert_gt(a1.put_ms.v[i], 0);
        if (i) cr_assert(put_id_lt(a1.put_ms.v[i - 1], a1.put_ver.v[i - 1], a1.put_ms.v[i], a1.put_ver.v[i]),
                         "put ids must strictly increase");
    }
    /* a retry of the same batch gets the identical ack and applies nothing */
    cr_assert_eq(t_put(&c1, 7, keys, offs, 4, 100, 0, 0, NULL, 0, &a2), FLUXON_OK);
    for (uint32_t i = 0; i < 4; i++)
        cr_assert(a2.statuses.v[i] == a1.statuses.v[i] && a2.put_ms.v[i] == a1.put_ms.v[i] &&
                  a2.put_ver.v[i] == a1.put_ver.v[i]);
    fx_body_invalidate_t inv;
    cr_assert_not(t_invalidate(&c1, &inv, 200), "a retried batch must not replace anything");
    fx_body_lookup_ack_t la;
    t_lookup(&c1, keys, 4, &la);
    for (uint32_t i = 0; i < 4; i++) {
        cr_assert_eq(la.statuses.v[i], ST(FLUXON_OK));
        cr_assert_eq(la.put_ms.v[i], a1.put_ms.v[i]);
        cr_assert_eq(la.put_ver.v[i], a1.put_ver.v[i]);
        cr_assert_eq(la.offsets.v[i], offs[i]);
        cr_assert_eq(la.value_lens.v[i], 100);
    }
    cr_assert_eq(la.src_node_ids.n, 1, "sources are deduplicated");
    cr_assert(str_is(la.src_node_ids.v[0], "n1"));
    cr_assert_eq(la.src_generations.v[0], 100);
    cr_assert_eq(la.src_bases.v[0], 0x7f0000000000ull);
    /* a new batch publishing the same (node, offset, value_len) converges (T2): same put_id */
    fx_body_put_done_ack_t a3;
    cr_assert_eq(t_put(&c1, 8, keys, offs, 2, 100, FX_PUT_REJECT_IF_EXIST, 0, NULL, 0, &a3), FLUXON_OK);
    for (uint32_t i = 0; i < 2; i++) {
        cr_assert_eq(a3.statuses.v[i], ST(FLUXON_OK));
        cr_assert(a3.put_ms.v[i] == a1.put_ms.v[i] && a3.put_ver.v[i] == a1.put_ver.v[i]);
    }
    /* a later batch gets larger put ids than every earlier one (global generator) */
    uint64_t ms, ver;
    t_put1(&c1, 9, "later", 20480, 100, 0, &ms, &ver);
    cr_assert(put_id_lt(a1.put_ms.v[3], a1.put_ver.v[3], ms, ver));
    cr_assert_not(t_invalidate(&c1, &inv, 100));
    /* k0 is replaced by a newer batch; a late retry of batch 7 must not bring back its k0 */
    uint64_t ms10, ver10;
    t_put1(&c1, 10, "k0", 24576, 100, 0, &ms10, &ver10);
    cr_assert(t_invalidate(&c1, &inv, 2000));
    cr_assert(inv.keys.n == 1 && inv.offsets.v[0] == 4096);
    cr_assert_eq(t_put(&c1, 7, keys, offs, 4, 100, 0, 0, NULL, 0, &a2), FLUXON_OK);
    for (uint32_t i = 0; i < 4; i++)
        cr_assert(a2.statuses.v[i] == a1.statuses.v[i] && a2.put_ms.v[i] == a1.put_ms.v[i] &&
                  a2.put_ver.v[i] == a1.put_ver.v[i], "the remembered ack, not a new outcome");
    cr_assert_eq(t_lookup1(&c1, "k0", &la), ST(FLUXON_OK));
    cr_assert(la.offsets.v[0] == 24576 && la.put_ms.v[0] == ms10 && la.put_ver.v[0] == ver10);
    cr_assert_not(t_invalidate(&c1, &inv, 100), "nothing re-applied");
}

Test(master_kv, reject_if_exist_rejects_the_group_whole)
{
    t_owner(&c1, "n1", 100);
    uint64_t ms, ver;
    t_put1(&c1, 1, "a", 4096, 64, 0, &ms, &ver);
    const char *keys[] = {"x", "a", "y", "z"};
    uint64_t offs[] = {8192, 12288, 16384, 20480};
    uint64_t groups[] = {3, 1};
    fx_body_put_done_ack_t ack;
    cr_assert_eq(t_put(&c1, 2, keys, offs, 4, 64, FX_PUT_REJECT_IF_EXIST, 0, groups, 2, &ack), FLUXON_OK);
    cr_assert_eq(ack.statuses.v[0], ST(FLUXON_ERR_GROUP_REJECTED));
    cr_assert_eq(ack.statuses.v[1], ST(FLUXON_ERR_KEY_EXISTS));
    cr_assert_eq(ack.statuses.v[2], ST(FLUXON_ERR_GROUP_REJECTED));
    cr_assert_eq(ack.statuses.v[3], ST(FLUXON_OK));
    fx_body_lookup_ack_t la;
    const char *q[] = {"x", "a", "y", "z"};
    t_lookup(&c1, q, 4, &la);
    cr_assert_eq(la.statuses.v[0], ST(FLUXON_ERR_NOT_FOUND));
    cr_assert_eq(la.statuses.v[1], ST(FLUXON_OK));
    cr_assert(la.put_ms.v[1] == ms && la.put_ver.v[1] == ver && la.offsets.v[1] == 4096, "a keeps its version");
    cr_assert_eq(la.statuses.v[2], ST(FLUXON_ERR_NOT_FOUND));
    cr_assert_eq(la.statuses.v[3], ST(FLUXON_OK));
    /* without group_lens every key is its own group */
    cr_assert_eq(t_put(&c1, 3, keys, offs, 3, 64, FX_PUT_REJECT_IF_EXIST, 0, NULL, 0, &ack), FLUXON_OK);
    cr_assert_eq(ack.statuses.v[0], ST(FLUXON_OK));
    cr_assert_eq(ack.statuses.v[1], ST(FLUXON_ERR_KEY_EXISTS));
    cr_assert_eq(ack.statuses.v[2], ST(FLUXON_OK));
    fx_body_invalidate_t inv;
    cr_assert_not(t_invalidate(&c1, &inv, 100), "nothing was replaced");
}

Test(master_kv, replacement_invalidates_the_old_replica)
{
    t_owner(&c1, "n1", 100);
    uint64_t ms1, ver1, ms2, ver2;
    t_put1(&c1, 1, "k", 4096, 100, 0, &ms1, &ver1);
    t_put1(&c1, 2, "k", 8192, 100, 0, &ms2, &ver2);
    cr_assert(put_id_lt(ms1, ver1, ms2, ver2));
    fx_body_invalidate_t inv;
    cr_assert(t_invalidate(&c1, &inv, 2000), "the replaced version must be invalidated");
    cr_assert_eq(inv.keys.n, 1);
    cr_assert(inv.offsets.n == 1 && inv.put_ms.n == 1 && inv.put_ver.n == 1);
    cr_assert(str_is(inv.keys.v[0], "k"));
    cr_assert_eq(inv.offsets.v[0], 4096);
    cr_assert(inv.put_ms.v[0] == ms1 && inv.put_ver.v[0] == ver1);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c1, "k", &la), ST(FLUXON_OK));
    cr_assert(la.offsets.v[0] == 8192 && la.put_ms.v[0] == ms2 && la.put_ver.v[0] == ver2);
    /* a batch replacing several keys sends ONE INVALIDATE */
    const char *keys[] = {"k", "m"};
    uint64_t o1[] = {12288, 16384}, o2[] = {20480, 24576};
    fx_body_put_done_ack_t ack;
    cr_assert_eq(t_put(&c1, 3, keys + 1, o1 + 1, 1, 100, 0, 0, NULL, 0, &ack), FLUXON_OK);
    cr_assert_eq(t_put(&c1, 4, keys, o2, 2, 100, 0, 0, NULL, 0, &ack), FLUXON_OK);
    cr_assert(t_invalidate(&c1, &inv, 2000));
    cr_assert_eq(inv.keys.n, 2);
    cr_assert(str_is(inv.keys.v[0], "k") && inv.offsets.v[0] == 8192);
    cr_assert(str_is(inv.keys.v[1], "m") && inv.offsets.v[1] == 16384);
    cr_assert_not(t_invalidate(&c1, &inv, 100));
}

Test(master_kv, lookup_get_done_and_replicas)
{
    t_owner(&c1, "n1", 100);
    t_owner(&c2, "n2", 200);
    uint64_t ms, ver;
    t_put1(&c1, 1, "g", 40960, 100, 0, &ms, &ver);
    fx_body_lookup_ack_t la;
    const char *q[] = {"g", "missing", ""};
    t_lookup(&c2, q, 3, &la);
    cr_assert_eq(la.statuses.v[0], ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n1"));
    cr_assert(la.offsets.v[0] == 40960 && la.value_lens.v[0] == 100 && la.put_ms.v[0] == ms &&
              la.put_ver.v[0] == ver);
    cr_assert_eq(la.statuses.v[1], ST(FLUXON_ERR_NOT_FOUND));
    cr_assert_eq(la.statuses.v[2], ST(FLUXON_ERR_NOT_FOUND));
    /* n2 took a durable replica: OK; wrong version / unknown key: STALE */
    const char *gk[] = {"g", "g", "nokey"};
    uint64_t goffs[] = {8192, 12288, 16384}, gms[] = {ms, ms, ms}, gver[] = {ver, ver + 1, ver};
    uint64_t glens[] = {100, 100, 100}, gsrc[] = {40960, 40960, 40960};
    fx_body_get_done_t gd = {t_keys(gk, 3), {goffs, 3}, {gms, 3}, {gver, 3}, {glens, 3},
                             {"n1", 2}, 100, {gsrc, 3}, {NULL, 0}, {NULL, 0}};
    fx_body_statuses_t gs;
    cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &gd, statuses, &gs), FLUXON_OK, "%s", last_err);
    cr_assert_eq(gs.statuses.n, 3);
    cr_assert_eq(gs.statuses.v[0], ST(FLUXON_OK));
    cr_assert_eq(gs.statuses.v[1], ST(FLUXON_ERR_STALE));
    cr_assert_eq(gs.statuses.v[2], ST(FLUXON_ERR_STALE));
    /* the same replica again: OK, not duplicated */
    gd.keys.n = gd.offsets.n = gd.put_ms.n = gd.put_ver.n = gd.value_lens.n = gd.src_offsets.n = 1;
    cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &gd, statuses, &gs), FLUXON_OK);
    cr_assert_eq(gs.statuses.v[0], ST(FLUXON_OK));
    /* each requester is pointed at its own copy first (ReuseReplica: no transfer) */
    cr_assert_eq(t_lookup1(&c1, "g", &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n1") && la.offsets.v[0] == 40960);
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE);
    cr_assert_eq(t_lookup1(&c2, "g", &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == 8192);
    cr_assert_eq(la.src_generations.v[la.src.v[0]], 200);
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE);
    /* at most 4 replicas */
    uint64_t more[] = {20480, 24576, 28672};
    for (int i = 0; i < 3; i++) {
        fx_body_get_done_t g1 = {t_keys(gk, 1), {&more[i], 1}, {&ms, 1}, {&ver, 1}, {glens, 1},
                                 {"n1", 2}, 100, {gsrc, 1}, {NULL, 0}, {NULL, 0}};
        cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &g1, statuses, &gs), FLUXON_OK);
        cr_assert_eq(gs.statuses.v[0], i < 2 ? ST(FLUXON_OK) : ST(FLUXON_ERR_NO_SPACE), "replica %d", i);
    }
    /* the refused one is counted (owners racing for a popular key: not a warning) */
    static char mbuf[1 << 18];
    size_t mlen = 0;
    cr_assert_eq(fluxon_node_metrics(master, mbuf, sizeof mbuf, &mlen), FLUXON_OK);
    const char *full = strstr(mbuf, "\nfluxon_master_get_done_full_total{node=\"master\"} ");
    cr_assert_not_null(full, "no get_done_full in the master's metrics");
    cr_assert_eq(atoll(strchr(full, '}') + 2), 1, "%.120s", full);
    /* mismatched arrays: INVALID_ARGUMENT */
    fx_body_get_done_t badg = {t_keys(gk, 2), {goffs, 1}, {gms, 2}, {gver, 2}, {glens, 2}, {"n1", 2}, 100, {gsrc, 2}, {NULL, 0}, {NULL, 0}};
    cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &badg, statuses, &gs), FLUXON_ERR_INVALID_ARGUMENT);
    /* replacing g invalidates every replica, each on its own node */
    t_put1(&c1, 2, "g", 45056, 100, 0, NULL, NULL);
    fx_body_invalidate_t inv;
    cr_assert(t_invalidate(&c1, &inv, 2000));
    cr_assert(inv.keys.n == 1 && inv.offsets.v[0] == 40960 && inv.put_ms.v[0] == ms && inv.put_ver.v[0] == ver);
    cr_assert(t_invalidate(&c2, &inv, 2000));
    cr_assert_eq(inv.keys.n, 3, "n2's three replicas in one message");
    cr_assert(inv.offsets.v[0] == 8192 && inv.offsets.v[1] == 20480 && inv.offsets.v[2] == 24576);
    /* a get_done of the replaced version is stale now */
    gd.keys.n = gd.offsets.n = gd.put_ms.n = gd.put_ver.n = gd.value_lens.n = gd.src_offsets.n = 1;
    goffs[0] = 32768;
    cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &gd, statuses, &gs), FLUXON_OK);
    cr_assert_eq(gs.statuses.v[0], ST(FLUXON_ERR_STALE));
}

Test(master_kv, delete_then_not_found)
{
    t_owner(&c1, "n1", 100);
    t_put1(&c1, 1, "d", 4096, 10, 0, NULL, NULL);
    fx_body_key_t k = {fx_str_c("d")};
    fx_body_empty_t e;
    cr_assert_eq(T_CALL(&c1, DELETE, key, &k, empty, &e), FLUXON_OK, "%s", last_err);
    fx_body_invalidate_t inv;
    cr_assert(t_invalidate(&c1, &inv, 2000));
    cr_assert(inv.keys.n == 1 && str_is(inv.keys.v[0], "d") && inv.offsets.v[0] == 4096);
    cr_assert_eq(T_CALL(&c1, DELETE, key, &k, empty, &e), FLUXON_ERR_NOT_FOUND);
    cr_assert(strstr(last_err, "key not found: d"), "%s", last_err);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c1, "d", &la), ST(FLUXON_ERR_NOT_FOUND));
    fx_body_list_t l = {fx_str_c(""), fx_str_c(""), 0};
    fx_body_keys_t lk;
    cr_assert_eq(T_CALL(&c1, LIST, list, &l, keys, &lk), FLUXON_OK);
    cr_assert_eq(lk.keys.n, 0, "deleted keys leave the prefix index");
    /* from a peer that never registered (an external) */
    t_put1(&c1, 2, "d2", 4096, 10, 0, NULL, NULL);
    t_hello(&c2, "ext");
    k.key = fx_str_c("d2");
    cr_assert_eq(T_CALL(&c2, DELETE, key, &k, empty, &e), FLUXON_OK);
    cr_assert(t_invalidate(&c1, &inv, 2000));
    k.key = fx_str_c("");
    cr_assert_eq(T_CALL(&c2, DELETE, key, &k, empty, &e), FLUXON_ERR_INVALID_ARGUMENT);
}

Test(master_kv, exists_counts_leading_hits)
{
    t_owner(&c1, "n1", 100);
    const char *keys[] = {"a", "b", "c"};
    uint64_t offs[] = {4096, 8192, 12288};
    fx_body_put_done_ack_t ack;
    cr_assert_eq(t_put(&c1, 1, keys, offs, 3, 10, 0, 0, NULL, 0, &ack), FLUXON_OK);
    const char *q1[] = {"a", "b", "zz", "c"}, *q2[] = {"a", "b", "c"}, *q3[] = {"zz", "a"};
    struct {
        const char *const *k;
        uint32_t n;
        uint64_t want;
    } cases[] = {{q1, 4, 2}, {q2, 3, 3}, {q3, 2, 0}, {q1, 0, 0}};
    for (size_t i = 0; i < FX_ARRAY_LEN(cases); i++) {
        fx_body_keys_t b = {t_keys(cases[i].k, cases[i].n)};
        fx_body_count_t cnt;
        cr_assert_eq(T_CALL(&c1, EXISTS, keys, &b, count, &cnt), FLUXON_OK);
        cr_assert_eq(cnt.count, cases[i].want, "case %zu: %llu", i, (unsigned long long)cnt.count);
    }
}

Test(master_kv, lease_expiry_deletes_the_route)
{
    t_owner(&c1, "n1", 100);
    fx_body_lease_t lb = {200};
    fx_body_lease_ack_t la1, la2;
    cr_assert_eq(T_CALL(&c1, LEASE_GRANT, lease, &lb, lease_ack, &la1), FLUXON_OK);
    cr_assert_eq(la1.lease_id, 1);
    lb.ttl_ms = 60000;
    cr_assert_eq(T_CALL(&c1, LEASE_GRANT, lease, &lb, lease_ack, &la2), FLUXON_OK);
    cr_assert_eq(la2.lease_id, 2);
    t_put1(&c1, 1, "leased", 4096, 10, la1.lease_id, NULL, NULL);
    t_put1(&c1, 2, "kept", 8192, 10, la2.lease_id, NULL, NULL);
    t_put1(&c1, 3, "plain", 12288, 10, 0, NULL, NULL);
    fx_body_lookup_ack_t lk;
    cr_assert_eq(t_lookup1(&c1, "leased", &lk), ST(FLUXON_OK));
    th_sleep_ms(300);
    cr_assert_eq(t_lookup1(&c1, "leased", &lk), ST(FLUXON_ERR_NOT_FOUND));
    cr_assert_eq(t_lookup1(&c1, "kept", &lk), ST(FLUXON_OK));
    cr_assert_eq(t_lookup1(&c1, "plain", &lk), ST(FLUXON_OK));
    fx_body_invalidate_t inv;
    cr_assert(t_invalidate(&c1, &inv, 2000), "expiry invalidates the replica");
    cr_assert(inv.keys.n == 1 && str_is(inv.keys.v[0], "leased") && inv.offsets.v[0] == 4096);
    /* an expired or unknown lease: LEASE_EXPIRED, nothing installed */
    const char *keys[] = {"l1", "l2"};
    uint64_t offs[] = {16384, 20480};
    fx_body_put_done_ack_t ack;
    cr_assert_eq(t_put(&c1, 4, keys, offs, 2, 10, 0, la1.lease_id, NULL, 0, &ack), FLUXON_OK);
    cr_assert(ack.statuses.v[0] == ST(FLUXON_ERR_LEASE_EXPIRED) && ack.statuses.v[1] == ST(FLUXON_ERR_LEASE_EXPIRED));
    cr_assert_eq(t_put(&c1, 5, keys, offs, 2, 10, 0, 999, NULL, 0, &ack), FLUXON_OK);
    cr_assert_eq(ack.statuses.v[0], ST(FLUXON_ERR_LEASE_EXPIRED));
    cr_assert_eq(t_lookup1(&c1, "l1", &lk), ST(FLUXON_ERR_NOT_FOUND));
    /* bad ttl */
    fx_body_lease_t bad[] = {{0}, {86400001}};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(T_CALL(&c1, LEASE_GRANT, lease, &bad[i], lease_ack, &la1), FLUXON_ERR_INVALID_ARGUMENT);
    /* the timer alone deletes expired routes (no request touches them) */
    lb.ttl_ms = 50;
    cr_assert_eq(T_CALL(&c1, LEASE_GRANT, lease, &lb, lease_ack, &la1), FLUXON_OK);
    t_put1(&c1, 6, "short", 24576, 10, la1.lease_id, NULL, NULL);
    cr_assert(t_invalidate(&c1, &inv, 2000), "the lease timer invalidates on its own");
    cr_assert(inv.keys.n == 1 && str_is(inv.keys.v[0], "short"));
}

Test(master_kv, list_by_prefix_with_paging)
{
    t_owner(&c1, "n1", 100);
    const char *keys[] = {"p/c", "p/a", "q/x", "p/e", "p/b", "p/d", "p"};
    uint64_t offs[7];
    for (int i = 0; i < 7; i++) offs[i] = 4096ull * (i + 1);
    fx_body_put_done_ack_t ack;
    cr_assert_eq(t_put(&c1, 1, keys, offs, 7, 10, 0, 0, NULL, 0, &ack), FLUXON_OK);
    const char *want[] = {"p/a", "p/b", "p/c", "p/d", "p/e"};
    char after[16] = "";
    size_t got = 0;
    for (int page = 0; page < 4; page++) {
        fx_body_list_t l = {fx_str_c("p/"), fx_str_c(after), 2};
        fx_body_keys_t lk;
        cr_assert_eq(T_CALL(&c1, LIST, list, &l, keys, &lk), FLUXON_OK, "%s", last_err);
        cr_assert_eq(lk.keys.n, page < 2 ? 2 : page == 2 ? 1 : 0, "page %d: %u keys", page, lk.keys.n);
        for (uint32_t i = 0; i < lk.keys.n; i++) {
            cr_assert(str_is(lk.keys.v[i], want[got]), "page %d key %u", page, i);
            got++;
        }
        if (lk.keys.n) fx_str_copy(lk.keys.v[lk.keys.n - 1], after, sizeof after);
    }
    cr_assert_eq(got, 5);
    fx_body_list_t all = {fx_str_c(""), fx_str_c(""), 0};
    fx_body_keys_t lk;
    cr_assert_eq(T_CALL(&c1, LIST, list, &all, keys, &lk), FLUXON_OK);
    cr_assert_eq(lk.keys.n, 7);
    cr_assert(str_is(lk.keys.v[0], "p") && str_is(lk.keys.v[1], "p/a") && str_is(lk.keys.v[6], "q/x"));
    all.limit = 100000; /* clamped, not refused */
    cr_assert_eq(T_CALL(&c1, LIST, list, &all, keys, &lk), FLUXON_OK);
    cr_assert_eq(lk.keys.n, 7);
}

Test(master_kv, malformed_put_done_changes_nothing)
{
    t_owner(&c1, "n1", 100);
    char longkey[1100];
    memset(longkey, 'x', sizeof longkey - 1);
    longkey[1025] = '\0';
    const char *keys[] = {"m1", "m2"}, *lk[] = {"m1", longkey}, *ek[] = {"m1", ""};
    uint64_t offs[] = {4096, 8192}, offs_out[] = {4096, SEG - 4096}, offs_low[] = {0, 8192};
    uint64_t g_short[] = {1}, g_zero[] = {0, 2}, g_long[] = {2, 1};
    fx_body_put_done_ack_t ack;
    struct {
        const char *const *k;
        const uint64_t *o;
        uint32_t nk, no;
        uint64_t vlen;
        const uint64_t *g;
        uint32_t ng;
    } cases[] = {
        {keys, offs, 2, 1, 10, NULL, 0},      /* keys vs offsets */
        {keys, offs, 2, 2, 0, NULL, 0},       /* value_len 0 */
        {keys, offs, 2, 2, 10, g_short, 1},   /* groups sum to 1 */
        {keys, offs, 2, 2, 10, g_zero, 2},    /* empty group */
        {keys, offs, 2, 2, 10, g_long, 2},    /* groups sum past n */
        {lk, offs, 2, 2, 10, NULL, 0},        /* key of 1025 bytes */
        {ek, offs, 2, 2, 10, NULL, 0},        /* empty key */
        {keys, offs_out, 2, 2, 8192, NULL, 0}, /* past the segment end */
        {keys, offs_low, 2, 2, 10, NULL, 0},  /* inside the header page */
        {keys, offs, 0, 0, 10, NULL, 0},      /* empty batch */
        {keys, offs, 2, 2, SEG + 1, NULL, 0}, /* value larger than the segment */
    };
    for (size_t i = 0; i < FX_ARRAY_LEN(cases); i++) {
        fx_body_put_done_t b = {100 + i, cases[i].vlen, 0, 0, t_keys(cases[i].k, cases[i].nk),
                                {cases[i].o, cases[i].no}, {cases[i].g, cases[i].ng}, 0};
        cr_assert_eq(T_CALL(&c1, PUT_DONE, put_done, &b, put_done_ack, &ack), FLUXON_ERR_INVALID_ARGUMENT,
                     "case %zu", i);
        cr_assert(last_err[0], "case %zu has a message", i);
    }
    fx_body_list_t l = {fx_str_c(""), fx_str_c(""), 0};
    fx_body_keys_t lks;
    cr_assert_eq(T_CALL(&c1, LIST, list, &l, keys, &lks), FLUXON_OK);
    cr_assert_eq(lks.keys.n, 0, "nothing installed");
    /* a malformed batch is not remembered: the same batch id, well-formed, applies */
    cr_assert_eq(t_put(&c1, 100, keys, offs, 2, 10, 0, 0, NULL, 0, &ack), FLUXON_OK);
    cr_assert(ack.statuses.v[0] == ST(FLUXON_OK) && ack.statuses.v[1] == ST(FLUXON_OK));
    /* an unregistered peer cannot publish */
    t_hello(&c2, "x1");
    cr_assert_eq(t_put(&c2, 1, keys, offs, 2, 10, 0, 0, NULL, 0, &ack), FLUXON_ERR_INVALID_ARGUMENT);
    /* a truncated body is a protocol error: the connection is closed, the master serves on */
    fx_body_key_t kb = {fx_str_c("m1")};
    uint8_t *enc;
    size_t len;
    T_ENCODE(key, &kb, enc, len);
    t_send(&c2, FX_MSG_DELETE, 99, enc, len - 1);
    free(enc);
    tframe_t f;
    cr_assert_not(t_recv_frame(&c2, &f, 2000), "the master closes a connection that sent a malformed frame");
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c1, "m1", &la), ST(FLUXON_OK));
}

Test(master_kv, one_way_requests_get_no_reply)
{
    t_owner(&c1, "n1", 100);
    t_put1(&c1, 1, "o", 4096, 10, 0, NULL, NULL);
    const char *k = "o";
    fx_body_lookup_t lb = {t_keys(&k, 1)};
    T_SEND_ONEWAY(&c1, LOOKUP, lookup, &lb);
    fx_body_key_t kb = {fx_str_c("absent")};
    T_SEND_ONEWAY(&c1, DELETE, key, &kb); /* an error too stays silent */
    fx_body_grant_t gb = {0, 0};
    T_SEND_ONEWAY(&c1, GRANT, grant, &gb);
    /* the next frame is the answer to the next call (t_call_raw fails on any other) */
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c1, "o", &la), ST(FLUXON_OK));
    cr_assert_eq(c1.n_stash, 0);
}

Test(master_kv, dead_owner_replicas_are_hidden_then_back)
{
    t_owner(&c1, "n1", 100);
    t_owner(&c2, "n2", 200);
    t_put1(&c1, 1, "k", 4096, 10, 0, NULL, NULL);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c2, "k", &la), ST(FLUXON_OK));
    t_close(&c1); /* connection lost: n1 declared dead */
    uint64_t st = ST(FLUXON_OK);
    for (int i = 0; i < 200 && st == ST(FLUXON_OK); i++) {
        st = t_lookup1(&c2, "k", &la);
        if (st == ST(FLUXON_OK)) th_sleep_ms(10);
    }
    cr_assert_eq(st, ST(FLUXON_ERR_NOT_FOUND), "a dead owner's replica is never returned");
    fx_body_keys_t eb = {t_keys((const char *[]){"k"}, 1)};
    fx_body_count_t cnt;
    cr_assert_eq(T_CALL(&c2, EXISTS, keys, &eb, count, &cnt), FLUXON_OK);
    cr_assert_eq(cnt.count, 0);
    /* the same process (generation) reconnects: its replicas are routed again */
    t_owner(&c1, "n1", 100);
    cr_assert_eq(t_lookup1(&c2, "k", &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n1"));
}

/* Found by the chaos run (issue 17): an INVALIDATE for an owner whose connection was down
 * was dropped, so the owner, back with the same generation, kept serving the replaced
 * version (and its slot). It is held and sent when the owner reconnects; a new generation
 * (a restarted process, its memory copies gone) gets none of those (of its disk records it
 * does: test_disk_dead). */
Test(master_kv, invalidations_made_while_an_owner_was_away_reach_it_when_it_reconnects)
{
    t_owner(&c1, "n1", 100);
    t_owner(&c2, "n2", 200);
    uint64_t ms1, ver1;
    t_put1(&c1, 1, "k", 4096, 10, 0, &ms1, &ver1);
    t_put1(&c1, 2, "j", 8192, 10, 0, NULL, NULL);
    t_close(&c1); /* the connection drops; the process lives on */
    fx_body_lookup_ack_t la;
    uint64_t st = ST(FLUXON_OK);
    for (int i = 0; i < 200 && st == ST(FLUXON_OK); i++) { /* the master notices the close */
        st = t_lookup1(&c2, "k", &la);
        if (st == ST(FLUXON_OK)) th_sleep_ms(10);
    }
    cr_assert_eq(st, ST(FLUXON_ERR_NOT_FOUND));
    t_put1(&c2, 1, "k", 4096, 10, 0, NULL, NULL); /* replaces n1's version while it is away */
    t_owner(&c1, "n1", 100);
    fx_body_invalidate_t inv;
    cr_assert(t_invalidate(&c1, &inv, 2000), "the invalidation made while n1 was away reaches it");
    cr_assert(inv.keys.n == 1 && str_is(inv.keys.v[0], "k") && inv.offsets.v[0] == 4096);
    cr_assert(inv.put_ms.v[0] == ms1 && inv.put_ver.v[0] == ver1);
    cr_assert_not(t_invalidate(&c1, &inv, 100), "once");
    /* away again, and back as a new process: nothing held for the old one's copies */
    t_close(&c1);
    st = ST(FLUXON_OK);
    for (int i = 0; i < 200 && st == ST(FLUXON_OK); i++) {
        st = t_lookup1(&c2, "j", &la);
        if (st == ST(FLUXON_OK)) th_sleep_ms(10);
    }
    t_put1(&c2, 2, "j", 8192, 10, 0, NULL, NULL);
    t_owner(&c1, "n1", 101);
    cr_assert_not(t_invalidate(&c1, &inv, 200), "a new generation is told nothing of the old one's copies");
}

Test(master_kv, new_generation_drops_old_routes)
{
    t_owner(&c1, "n1", 100);
    t_owner(&c2, "n2", 200);
    fx_body_grant_t g = {4096, 2};
    fx_body_grant_ack_t ga;
    cr_assert_eq(T_CALL(&c1, GRANT, grant, &g, grant_ack, &ga), FLUXON_OK);
    t_put1(&c1, 1, "old", 4096, 10, 0, NULL, NULL);
    t_put1(&c1, 2, "shared", 8192, 10, 0, NULL, NULL);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c2, "shared", &la), ST(FLUXON_OK));
    uint64_t ms = la.put_ms.v[0], ver = la.put_ver.v[0], off = 12288, len10 = 10, soff = 8192;
    const char *sk = "shared";
    fx_body_get_done_t gd = {t_keys(&sk, 1), {&off, 1}, {&ms, 1}, {&ver, 1}, {&len10, 1}, {"n1", 2}, 100, {&soff, 1}, {NULL, 0}, {NULL, 0}};
    fx_body_statuses_t gs;
    cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &gd, statuses, &gs), FLUXON_OK);
    cr_assert_eq(gs.statuses.v[0], ST(FLUXON_OK));
    /* while the old process is alive, a second one with its node_id is refused */
    t_hello(&c3, "n1");
    fx_body_register_t rb = {fx_str_c("n1"), 101, FX_NODE_GPU_OWNER, SEG, 0x7f0000000000ull, {NULL, 0}, {NULL, 0}, GRANT, {NULL, 0}, {NULL, 0}, {NULL, 0}, 0,
                             {NULL, 0}, {NULL, 0}, {NULL, 0}, 0};
    fx_body_register_ack_t rack;
    cr_assert_eq(T_CALL(&c3, REGISTER, register, &rb, register_ack, &rack), FLUXON_ERR_BUSY);
    t_close(&c3);
    /* n1 restarts: the old process is gone (its connection closed), a new generation */
    t_close(&c1);
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) { /* the master notices the close asynchronously */
        t_hello(&c3, "n1");
        ok = T_CALL(&c3, REGISTER, register, &rb, register_ack, &rack) == FLUXON_OK;
        if (!ok) {
            t_close(&c3);
            th_sleep_ms(10);
        }
    }
    cr_assert(ok, "the restarted owner registers once the old connection is gone");
    cr_assert_eq(t_lookup1(&c2, "old", &la), ST(FLUXON_ERR_NOT_FOUND));
    cr_assert_eq(t_lookup1(&c3, "old", &la), ST(FLUXON_ERR_NOT_FOUND));
    /* a route with a replica elsewhere survives, served by that replica */
    cr_assert_eq(t_lookup1(&c3, "shared", &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == 12288);
    fx_body_list_t l = {fx_str_c(""), fx_str_c(""), 0};
    fx_body_keys_t lk;
    cr_assert_eq(T_CALL(&c3, LIST, list, &l, keys, &lk), FLUXON_OK);
    cr_assert_eq(lk.keys.n, 1);
    cr_assert(str_is(lk.keys.v[0], "shared"));
    /* the allocator and grant ids start over; batch ids of the old generation are forgotten */
    g.count = 64;
    cr_assert_eq(T_CALL(&c3, GRANT, grant, &g, grant_ack, &ga), FLUXON_OK);
    cr_assert_eq(ga.grant_ids.n, 7);
    cr_assert_eq(ga.grant_ids.v[0], 1);
    uint64_t ms2, ver2;
    t_put1(&c3, 1, "old", 4096, 10, 0, &ms2, &ver2);
    cr_assert_eq(t_lookup1(&c2, "old", &la), ST(FLUXON_OK));
    cr_assert_eq(la.src_generations.v[la.src.v[0]], 101);
    /* the old connection was closed by the master */
    tframe_t f;
    cr_assert_not(t_recv_frame(&c1, &f, 2000));
}

/* The entry points master.c calls, driven directly (no reactor needed for these). */
Test(master_kv_direct, stats_json_and_node_state)
{
    fx_master_t m;
    memset(&m, 0, sizeof m);
    cr_assert_eq(fx_master_kv_init(&m), FLUXON_OK);
    /* the KV rows of the catalog, rendered as the master-stats document (issue 19) */
    fx_master_snap_t *snap = calloc(1, fx_master_snap_size());
    cr_assert_not_null(snap);
    fx_master_kv_metrics(&m, &snap->m);
    char buf[16384];
    size_t len = fx_master_stats_json(snap, buf, sizeof buf);
    cr_assert_eq(len, strlen(buf));
    cr_assert(buf[0] == '{' && buf[len - 1] == '}', "one document: %s", buf);
    cr_assert(strstr(buf, "\"routes\":0") && strstr(buf, "\"replicas\":0") && strstr(buf, "\"puts\":0") &&
              strstr(buf, "\"lookups\":0") && strstr(buf, "\"invalidations_sent\":0") && strstr(buf, "\"leases\":0"),
              "%s", buf);
    char small[16];
    len = fx_master_stats_json(snap, small, sizeof small);
    cr_assert_eq(len, 0, "a document that does not fit is refused");
    cr_assert_lt(strlen(small), sizeof small, "and the buffer stays terminated");
    free(snap);

    master_node_t n;
    memset(&n, 0, sizeof n);
    strcpy(n.node_id, "d1");
    n.generation = 5;
    n.segment_bytes = SEG;
    n.grant_bytes = GRANT;
    cr_assert_eq(fx_master_kv_node_registered(&m, &n, 0), FLUXON_OK);
    cr_assert(n.alloc && n.kv);
    cr_assert_eq(n.next_grant_id, 1);
    void *alloc = n.alloc;
    cr_assert_eq(fx_master_kv_node_registered(&m, &n, 5), FLUXON_OK, "reconnect keeps the allocator");
    cr_assert_eq(n.alloc, alloc);
    n.generation = 6;
    cr_assert_eq(fx_master_kv_node_registered(&m, &n, 5), FLUXON_OK);
    cr_assert(n.alloc && n.kv);
    fx_master_kv_node_dead(&m, &n);
    master_node_t tiny;
    memset(&tiny, 0, sizeof tiny);
    strcpy(tiny.node_id, "d2");
    tiny.generation = 1;
    tiny.segment_bytes = 4096;
    cr_assert_eq(fx_master_kv_node_registered(&m, &tiny, 0), FLUXON_OK, "no payload range: no grants, no error");
    cr_assert_null(tiny.alloc);
    fx_master_kv_fini(&m);
    cr_assert_null(m.kv);
    fx_master_kv_node_free(&m, &n);
    fx_master_kv_node_free(&m, &tiny);
    cr_assert(!n.alloc && !n.kv);
}

/* Random (codec-valid) KV requests with inconsistent arrays and odd values: every one is
 * answered, ASan/UBSan stay quiet, and the master keeps serving. */
static uint64_t fz_state = 0x9e3779b97f4a7c15ull;
static uint64_t fz(uint64_t mod)
{
    fz_state ^= fz_state << 13;
    fz_state ^= fz_state >> 7;
    fz_state ^= fz_state << 17;
    return mod ? fz_state % mod : fz_state;
}

static fx_strv_t fz_keys(uint32_t n)
{
    fx_str_t *v = fx_arena_alloc(&arena, (n ? n : 1) * sizeof *v);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = fz(8) == 0 ? (uint32_t)fz(1100) : (uint32_t)fz(4);
        char *p = fx_arena_alloc(&arena, len + 1);
        for (uint32_t j = 0; j < len; j++) p[j] = (char)('a' + fz(3));
        v[i] = (fx_str_t){p, len};
    }
    return (fx_strv_t){v, n};
}

static fx_u64v_t fz_u64(uint32_t n, uint64_t mod)
{
    uint64_t *v = fx_arena_alloc(&arena, (n ? n : 1) * 8);
    for (uint32_t i = 0; i < n; i++) v[i] = fz(5) == 0 ? fz(0) : fz(mod);
    return (fx_u64v_t){v, n};
}

Test(master_kv, random_requests_never_break_the_master)
{
    t_owner(&c1, "n1", 100);
    t_owner(&c2, "n2", 200);
    fx_body_lease_t lb = {30};
    fx_body_lease_ack_t lack;
    cr_assert_eq(T_CALL(&c1, LEASE_GRANT, lease, &lb, lease_ack, &lack), FLUXON_OK);
    for (int it = 0; it < 600; it++) {
        tc_t *c = fz(2) ? &c1 : &c2;
        uint32_t n = (uint32_t)fz(6);
        switch (fz(5)) {
        case 0: {
            fx_body_put_done_t b = {fz(8), fz(4) ? 1 + fz(70000) : fz(0), fz(16), fz(3) ? 0 : fz(4),
                                    fz_keys(n), fz_u64(fz(4) ? n : (uint32_t)fz(6), SEG + 8192),
                                    fz_u64(fz(3) ? 0 : (uint32_t)fz(4), 4), 0};
            fx_body_put_done_ack_t a;
            (void)T_CALL(c, PUT_DONE, put_done, &b, put_done_ack, &a);
            break;
        }
        case 1: {
            fx_body_lookup_t b = {fz_keys(n)};
            fx_body_lookup_ack_t a;
            cr_assert_eq(T_CALL(c, LOOKUP, lookup, &b, lookup_ack, &a), FLUXON_OK);
            break;
        }
        case 2: {
            fx_body_get_done_t b = {fz_keys(n), fz_u64(fz(4) ? n : (uint32_t)fz(6), SEG), fz_u64(n, 4),
                                    fz_u64(fz(4) ? n : (uint32_t)fz(6), 3), fz_u64(n, 70000), {"n1", 2},
                                    fz(200), fz_u64(fz(4) ? n : (uint32_t)fz(6), SEG), {NULL, 0}, {NULL, 0}};
            fx_body_statuses_t a;
            (void)T_CALL(c, GET_DONE, get_done, &b, statuses, &a);
            break;
        }
        case 3: {
            fx_body_key_t b = {fz_keys(1).v[0]};
            fx_body_empty_t a;
            (void)T_CALL(c, DELETE, key, &b, empty, &a);
            break;
        }
        default: {
            fx_body_list_t b = {fz_keys(1).v[0], fz_keys(1).v[0], (uint32_t)fz(4)};
            fx_body_keys_t a;
            cr_assert_eq(T_CALL(c, LIST, list, &b, keys, &a), FLUXON_OK);
            fx_body_keys_t e = {fz_keys(n)};
            fx_body_count_t cnt;
            cr_assert_eq(T_CALL(c, EXISTS, keys, &e, count, &cnt), FLUXON_OK);
            cr_assert_leq(cnt.count, n);
        }
        }
        c->n_stash = 0; /* invalidations are expected here; not checked */
    }
    t_put1(&c1, 1u << 20, "still-serving", 4096, 10, 0, NULL, NULL);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&c2, "still-serving", &la), ST(FLUXON_OK));
}

Test(master_kv, get_done_requires_the_source_replica_to_still_exist)
{
    t_owner(&c1, "n1", 100);
    t_owner(&c2, "n2", 200);
    uint64_t ms, ver;
    t_put1(&c1, 1, "v", 40960, 100, 0, &ms, &ver);
    const char *k = "v";
    uint64_t off = 8192, len = 100, wrong_src = 45056, right_src = 40960;
    fx_body_statuses_t gs;
    /* a copy claiming another source offset, or another source generation: STALE (D1) */
    fx_body_get_done_t gd = {t_keys(&k, 1), {&off, 1}, {&ms, 1}, {&ver, 1}, {&len, 1}, {"n1", 2}, 100, {&wrong_src, 1}, {NULL, 0}, {NULL, 0}};
    cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &gd, statuses, &gs), FLUXON_OK);
    cr_assert_eq(gs.statuses.v[0], ST(FLUXON_ERR_STALE));
    gd.src_offsets.v = &right_src;
    gd.src_generation = 99;
    cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &gd, statuses, &gs), FLUXON_OK);
    cr_assert_eq(gs.statuses.v[0], ST(FLUXON_ERR_STALE));
    /* the source deleted before the copy was confirmed: STALE */
    fx_body_key_t dk = {fx_str_c("v")};
    fx_body_empty_t e;
    cr_assert_eq(T_CALL(&c1, DELETE, key, &dk, empty, &e), FLUXON_OK);
    gd.src_generation = 100;
    cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &gd, statuses, &gs), FLUXON_OK);
    cr_assert_eq(gs.statuses.v[0], ST(FLUXON_ERR_STALE));
    /* the true, live source: OK */
    t_put1(&c1, 2, "v", 40960, 100, 0, &ms, &ver);
    cr_assert_eq(T_CALL(&c2, GET_DONE, get_done, &gd, statuses, &gs), FLUXON_OK);
    cr_assert_eq(gs.statuses.v[0], ST(FLUXON_OK));
}

/* REGISTER's grant_ids and grant_offsets are parallel arrays: lengths that differ are
 * refused (naming both), not silently cut to the shorter one. */
Test(master_kv, register_with_mismatched_grant_arrays_is_refused)
{
    t_hello(&c1, "n1");
    uint64_t ids[] = {1, 2}, offs[] = {4096};
    fx_body_register_t rb = {fx_str_c("n1"), 100, FX_NODE_GPU_OWNER, SEG, 0x7f0000000000ull, fx_str_c(""),
                             fx_str_c(""), GRANT, {ids, 2}, {offs, 1}, fx_str_c(""), 0, {NULL, 0}, {NULL, 0},
                             {NULL, 0}, 0};
    fx_body_register_ack_t ack;
    cr_assert_eq(T_CALL(&c1, REGISTER, register, &rb, register_ack, &ack), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(last_err, "2 grant_ids") && strstr(last_err, "1 grant_offsets"), "%s", last_err);
    /* the same owner registers with matching arrays */
    rb.grant_ids.n = 1;
    cr_assert_eq(T_CALL(&c1, REGISTER, register, &rb, register_ack, &ack), FLUXON_OK, "%s", last_err);
}
