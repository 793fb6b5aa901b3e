/* test_master_place.c — the master's placement policy (ARCHITECTURE §7) at frame level:
 * PUT_PLACE's random placement, preferred_sub_cluster, per-role placement limits,
 * local-first, write-through, reject_if_inflight / reject_if_exist / whole-group
 * rejection, and malformed PUT_PLACE requests. Fixture: mplfix.h. */
#include "mplfix.h"

TestSuite(master_place, .init = setup, .fini = teardown, .timeout = 60);


Test(master_place, random_placement_spreads_over_owners)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, true, "c");
    const uint64_t vlen = 10000, B = slot_of(vlen);
    int hits[N_OWN] = {0};
    uint64_t offs[N_OWN][64], tokens[60];
    int noffs[N_OWN] = {0};
    for (int i = 0; i < 60; i++) {
        char key[16];
        snprintf(key, sizeof key, "r%02d", i);
        fx_body_put_place_ack_t a;
        int t = t_place1(0, key, vlen, 0, NULL, &a);
        hits[t]++;
        tokens[i] = a.put_token;
        for (int j = 0; j < i; j++) cr_assert_neq(tokens[j], tokens[i], "tokens are unique");
        if (t != 0) {
            for (int j = 0; j < noffs[t]; j++)
                cr_assert(offs[t][j] + B <= a.offsets.v[0] || a.offsets.v[0] + B <= offs[t][j], "ranges overlap");
            offs[t][noffs[t]++] = a.offsets.v[0];
        }
    }
    int distinct = (hits[0] > 0) + (hits[1] > 0) + (hits[2] > 0);
    cr_assert_geq(distinct, 2, "60 places went to one owner: n1 %d n2 %d n3 %d", hits[0], hits[1], hits[2]);
    cr_assert_gt(hits[0], 0, "the requester is a candidate like any other owner");
    cr_assert_gt(hits[1] + hits[2], 0, "remote owners are candidates");
    cr_assert_eq(hits[0] + hits[1] + hits[2], 60);
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "places"), 60);
    cr_assert_eq(js(j, "place_local"), hits[0]);
    cr_assert_eq(js(j, "place_remote"), hits[1] + hits[2]);
    cr_assert_eq(js(j, "place_rejected"), 0);
    cr_assert_eq(js(j, "place_fallback"), 0);
    cr_assert_eq(js(j, "inflight_puts"), 60);
    cr_assert_eq(js(j, "inflight_put_keys"), 60);
    cr_assert_eq(js(j, "routes"), 0, "in-flight puts are never routes");
    cJSON_Delete(j);
    cr_assert_eq(placed(0), 0, "the requester's own slots are not master ranges");
    fx_body_empty_t e = {};
    fx_body_nodes_t nb;
    cr_assert_eq(T_CALL(&oc[0], CLUSTER_NODES, empty, &e, nodes, &nb), FLUXON_OK);
    for (uint32_t k = 0; k < nb.node_ids.n; k++) {
        int i = own_index(nb.node_ids.v[k]);
        if (i >= 0) cr_assert(str_is(nb.sub_clusters.v[k], i == 0 ? "a" : i == 1 ? "b" : "c"), "%s", OWN[i].id);
    }
    cr_assert_eq(placed(1), hits[1] * B);
    cr_assert_eq(placed(2), hits[2] * B);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[1], "r00", &la), ST(FLUXON_ERR_NOT_FOUND), "not readable before PUT_DONE");
}

Test(master_place, ineligible_owners_are_never_targets)
{
    up(0, true, "a");
    up(1, false, "a"); /* no UCX address */
    up(2, true, "a");
    kill_owner(2, &oc[0]); /* dead */
    t_hello(&ext, "x1");  /* connected, never registered */
    for (int i = 0; i < 30; i++) {
        char key[16];
        snprintf(key, sizeof key, "e%02d", i);
        fx_body_put_place_ack_t a;
        cr_assert_eq(t_place1(0, key, 100, 0, NULL, &a), 0, "only the requester is eligible");
        cr_assert_eq(t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 0, "write-through falls back");
    }
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "place_local"), 60);
    cr_assert_eq(js(j, "place_remote"), 0);
    cr_assert_eq(js(j, "place_fallback"), 30, "each write-through place without another owner");
    cJSON_Delete(j);
    /* an eligible owner joins: write-through goes there every time */
    up(3, true, "z");
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "w%02d", i);
        fx_body_put_place_ack_t a;
        cr_assert_eq(t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 3);
    }
    cr_assert_eq(placed(3), 20 * 4096);
    cr_assert_eq(placed(1), 0);
}


Test(master_place, preferred_sub_cluster_first_then_the_others)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, true, "c");
    up(3, true, "b");
    int hits[N_OWN] = {0};
    char key[16];
    fx_body_put_place_ack_t a;
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "b%02d", i);
        hits[t_place1(0, key, 100, 0, "b", &a)]++;
    }
    cr_assert(hits[0] == 0 && hits[2] == 0, "only sub-cluster b while it fits: n1 %d n3 %d", hits[0], hits[2]);
    cr_assert(hits[1] > 0 && hits[3] > 0, "random inside the sub-cluster: n2 %d n4 %d", hits[1], hits[3]);
    /* the requester's own sub-cluster is preferred like any other */
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "a%02d", i);
        cr_assert_eq(t_place1(0, key, 100, 0, "a", &a), 0);
    }
    /* a sub-cluster nobody is in: every owner is a candidate */
    memset(hits, 0, sizeof hits);
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "z%02d", i);
        hits[t_place1(0, key, 100, 0, "nobody", &a)]++;
    }
    cr_assert_geq((hits[0] > 0) + (hits[1] > 0) + (hits[2] > 0) + (hits[3] > 0), 2);
    /* n2 full: b means n4 only */
    fill_with_grants(1);
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "f%02d", i);
        cr_assert_eq(t_place1(0, key, 100, 0, "b", &a), 3, "n2 no longer fits");
    }
    /* n4 full too: the others (n1, n3) */
    fill_with_grants(3);
    memset(hits, 0, sizeof hits);
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "g%02d", i);
        hits[t_place1(0, key, 100, 0, "b", &a)]++;
    }
    cr_assert(hits[1] == 0 && hits[3] == 0, "full owners are skipped: n2 %d n4 %d", hits[1], hits[3]);
    cr_assert(hits[0] > 0 && hits[2] > 0, "fallback to the other sub-clusters: n1 %d n3 %d", hits[0], hits[2]);
    cr_assert_eq(pm_stat("place_fallback"), 0, "the requester was a candidate all along");
}

/* Placed ranges take at most half of a gpu_owner's segment and all but one grant of a
 * remote_cache owner's; beyond, the next tier (or the requester) is chosen. */
Test(master_place, placement_limits_per_node_role)
{
    up(0, true, "a");
    up_role(1, FX_NODE_GPU_OWNER, true, "g");
    fx_body_put_place_ack_t a, half;
    cr_assert_neq(t_place1(0, "over", SEG / 2 + 1, 0, "g", &a), 1, "more than half of a gpu_owner's segment");
    cr_assert_eq(t_place1(0, "half", SEG / 2, 0, "g", &half), 1, "exactly half fits");
    cr_assert_eq(placed(1), SEG / 2);
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "g%02d", i);
        cr_assert_neq(t_place1(0, key, 100, 0, "g", &a), 1, "n2 is at its limit");
    }
    cr_assert_eq(t_revoke(&oc[0], half.put_token), FLUXON_OK);
    cr_assert_eq(t_place1(0, "again", 100, 0, "g", &a), 1, "room again after the revoke");
    /* remote_cache: all of the payload range but one grant (registered only now: above,
     * it would have been a fallback target) */
    up_role(2, FX_NODE_REMOTE_CACHE, true, "r");
    uint64_t most = SEG - 4096 - GRANT;
    fx_body_put_place_ack_t rc;
    cr_assert_neq(t_place1(0, "rc-over", most + 4096, 0, "r", &a), 2);
    cr_assert_eq(t_place1(0, "rc", most, 0, "r", &rc), 2, "a remote_cache owner lends all but one grant");
    cr_assert_eq(placed(2), most);
    cr_assert_neq(t_place1(0, "rc-more", 100, 0, "r", &a), 2);
    /* a grant still fits after the placement: the owner's own slots are not starved */
    fx_body_grant_t g = {4096, 1};
    fx_body_grant_ack_t ga;
    cr_assert_eq(T_CALL(&oc[2], GRANT, grant, &g, grant_ack, &ga), FLUXON_OK, "%s", last_err);
    cr_assert_eq(ga.grant_ids.n, 1);
}

Test(master_place, local_first_gives_the_requester)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, true, "c");
    fx_body_put_place_ack_t a;
    char key[16];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "l%02d", i);
        cr_assert_eq(t_place1(1, key, 5000, FX_PUT_LOCAL_FIRST, i % 2 ? "c" : NULL, &a), 1);
        cr_assert_eq(a.offsets.v[0], 0);
        cr_assert(str_is(a.target_address, "ucx-n2"));
    }
    cr_assert_eq(pm_stat("place_local"), 20);
    cr_assert_eq(pm_stat("place_remote"), 0);
    for (int i = 0; i < 3; i++) cr_assert_eq(placed(i), 0);
    /* PUT_DONE of a local placement: the offsets are the requester's own slots */
    const char *k = "lf";
    cr_assert_eq(t_place1(1, k, 5000, FX_PUT_LOCAL_FIRST, NULL, &a), 1);
    uint64_t slot = 40960;
    fx_body_put_done_ack_t pa;
    cr_assert_eq(t_put_token(&oc[1], 1, &k, &slot, 1, 5000, 0, NULL, 0, a.put_token, &pa), FLUXON_OK, "%s",
                 last_err);
    cr_assert_eq(pa.statuses.v[0], ST(FLUXON_OK));
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[1], k, &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == slot);
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE, "its own slot: no transfer");
    cr_assert_eq(t_lookup1(&oc[0], k, &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == slot);
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(pm_stat("get_reuse"), 1);
}

Test(master_place, write_through_never_gives_the_requester)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, true, "c");
    int hits[N_OWN] = {0};
    char key[16];
    fx_body_put_place_ack_t a;
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "w%02d", i);
        hits[t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, NULL, &a)]++;
    }
    cr_assert_eq(hits[0], 0, "write-through: not the requester while another owner fits");
    cr_assert(hits[1] > 0 && hits[2] > 0, "n2 %d n3 %d", hits[1], hits[2]);
    /* write-through with a preferred sub-cluster that is the requester's own: elsewhere */
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "x%02d", i);
        cr_assert_neq(t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, "a", &a), 0);
    }
    cr_assert_eq(pm_stat("place_fallback"), 0);
    /* nobody else fits: the requester after all, counted as a fallback */
    fill_with_grants(1);
    fill_with_grants(2);
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "y%02d", i);
        cr_assert_eq(t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 0);
    }
    cr_assert_eq(pm_stat("place_fallback"), 5);
    cr_assert_eq(pm_stat("place_local"), 5);
}

Test(master_place, reject_flags_and_group_rejection)
{
    up(0, true, "a");
    up(1, true, "b");
    fx_body_put_place_ack_t a, a1;
    const uint64_t RIF = FX_PUT_REJECT_IF_INFLIGHT, RIE = FX_PUT_REJECT_IF_EXIST;
    t_place1(0, "k1", 100, 0, NULL, &a1); /* k1 in flight */
    /* reject_if_inflight: per key; the other key is placed */
    const char *k12[] = {"k1", "k2"};
    cr_assert_eq(t_place(&oc[1], k12, 2, 100, RIF, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    cr_assert_eq(a.statuses.v[1], ST(FLUXON_OK));
    check_place(&a, 1, 100);
    uint64_t tok_k2 = a.put_token;
    /* one group: rejected whole, nothing in flight, no token */
    const char *k13[] = {"k1", "k3"};
    uint64_t g2[] = {2};
    cr_assert_eq(t_place(&oc[1], k13, 2, 100, RIF, g2, 1, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    cr_assert_eq(a.statuses.v[1], ST(FLUXON_ERR_GROUP_REJECTED));
    cr_assert_eq(check_place(&a, 1, 100), 1, "nothing placed: the answer names the requester");
    /* without the flag an in-flight key does not block */
    t_place1(1, "k1", 100, 0, NULL, &a);
    uint64_t tok_k1b = a.put_token;
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "inflight_puts"), 3);
    cr_assert_eq(js(j, "inflight_put_keys"), 2, "k1 (twice) and k2");
    cr_assert_eq(js(j, "place_rejected"), 3);
    cJSON_Delete(j);
    /* a key twice in one batch */
    const char *dd[] = {"d", "d"};
    cr_assert_eq(t_place(&oc[0], dd, 2, 100, RIF, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_OK) && a.statuses.v[1] == ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    cr_assert_eq(t_revoke(&oc[0], a.put_token), FLUXON_OK);
    cr_assert_eq(t_place(&oc[0], dd, 2, 100, 0, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_OK) && a.statuses.v[1] == ST(FLUXON_ERR_INVALID_ARGUMENT));
    cr_assert_eq(t_revoke(&oc[0], a.put_token), FLUXON_OK);
    /* reject_if_exist against live routes */
    t_put1(&oc[0], 1, "e", 4096, 100, 0, NULL, NULL);
    const char *ef[] = {"e", "f"}, *egh[] = {"e", "g", "h"};
    cr_assert_eq(t_place(&oc[1], ef, 2, 100, RIE, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_ERR_KEY_EXISTS) && a.statuses.v[1] == ST(FLUXON_OK));
    check_place(&a, 1, 100);
    cr_assert_eq(t_place(&oc[1], ef, 2, 100, RIE, g2, 1, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_ERR_KEY_EXISTS) && a.statuses.v[1] == ST(FLUXON_ERR_GROUP_REJECTED));
    cr_assert_eq(a.put_token, 0);
    uint64_t g12[] = {1, 2};
    cr_assert_eq(t_place(&oc[1], egh, 3, 100, RIE, g12, 2, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_ERR_KEY_EXISTS) && a.statuses.v[1] == ST(FLUXON_OK) &&
              a.statuses.v[2] == ST(FLUXON_OK), "only the group of the existing key is rejected");
    check_place(&a, 1, 100);
    /* each flag looks at its own thing: in-flight keys do not exist, routes are not in flight */
    t_place1(1, "k1", 100, RIE, NULL, &a);
    uint64_t tok_k1c = a.put_token;
    t_place1(1, "e", 100, RIF, NULL, &a);
    /* both flags: the in-flight check wins on a key that is both */
    t_place1(0, "e", 100, 0, NULL, &a);
    cr_assert_eq(t_place(&oc[1], ef, 1, 100, RIF | RIE, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    /* once every put of k1 is gone, reject_if_inflight accepts it */
    cr_assert_eq(t_revoke(&oc[0], a1.put_token), FLUXON_OK);
    cr_assert_eq(t_place(&oc[1], k12, 1, 100, RIF, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN), "another put of k1 is still in flight");
    cr_assert_eq(t_revoke(&oc[1], tok_k1b), FLUXON_OK);
    cr_assert_eq(t_revoke(&oc[1], tok_k1c), FLUXON_OK);
    cr_assert_eq(t_place(&oc[1], k12, 1, 100, RIF, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_OK));
    cr_assert_eq(t_revoke(&oc[1], tok_k2), FLUXON_OK);
    /* counters: places and rejected keys */
    j = pm_stats();
    cr_assert_eq(js(j, "place_rejected"), 3 + 1 + 1 + 1 + 2 + 1 + 1 + 1);
    cr_assert_eq(js(j, "places"), 15);
    cJSON_Delete(j);
}


Test(master_place, malformed_put_place_changes_nothing)
{
    up(0, true, "a");
    up(1, true, "b");
    fx_body_put_place_ack_t a;
    t_place1(0, "ok", 100, FX_PUT_WRITE_THROUGH, NULL, &a); /* one real in-flight put */
    char longkey[1100];
    memset(longkey, 'x', sizeof longkey - 1);
    longkey[1025] = '\0';
    fx_str_t nul[] = {{"a", 1}, {"a\0b", 3}}, empty[] = {{"a", 1}, {"", 0}}, two[] = {{"a", 1}, {"b", 1}};
    fx_str_t lng[] = {{"a", 1}, {longkey, 1025}};
    uint64_t g_zero[] = {0, 2}, g_short[] = {1}, g_long[] = {2, 1}, g_over[] = {3};
    struct {
        fx_str_t *k;
        uint32_t nk;
        uint64_t vlen;
        const uint64_t *g;
        uint32_t ng;
    } cases[] = {
        {two, 0, 100, NULL, 0},       /* no keys */
        {two, 2, 0, NULL, 0},         /* value_len 0 */
        {two, 2, SEG + 1, NULL, 0},   /* value larger than the requester's segment */
        {two, 2, UINT64_MAX, NULL, 0},
        {two, 2, 100, g_zero, 2},     /* an empty group */
        {two, 2, 100, g_short, 1},    /* groups sum to less */
        {two, 2, 100, g_long, 2},     /* groups sum to more */
        {two, 2, 100, g_over, 1},     /* one group longer than the batch */
        {nul, 2, 100, NULL, 0},       /* a key with NUL */
        {empty, 2, 100, NULL, 0},     /* an empty key */
        {lng, 2, 100, NULL, 0},       /* a key of 1025 bytes */
    };
    const char *names[] = {"places", "place_remote", "place_local", "place_rejected", "place_fallback",
                           "inflight_puts", "inflight_put_keys", "routes"};
    cJSON *j0 = pm_stats();
    uint64_t p0 = placed(1), p1 = placed(0);
    for (size_t i = 0; i < FX_ARRAY_LEN(cases); i++) {
        fx_body_put_place_t b = {{cases[i].k, cases[i].nk}, cases[i].vlen, 0, {cases[i].g, cases[i].ng},
                                 fx_str_c("")};
        cr_assert_eq(T_CALL(&oc[0], PUT_PLACE, put_place, &b, put_place_ack, &a), FLUXON_ERR_INVALID_ARGUMENT,
                     "case %zu", i);
        cr_assert(strstr(last_err, "put_place"), "case %zu: %s", i, last_err);
    }
    /* from a peer that never registered */
    t_hello(&ext, "x1");
    const char *k = "a";
    cr_assert_eq(t_place(&ext, &k, 1, 100, 0, NULL, 0, NULL, &a), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(t_revoke(&ext, 1), FLUXON_ERR_INVALID_ARGUMENT);
    cJSON *j1 = pm_stats();
    for (size_t i = 0; i < FX_ARRAY_LEN(names); i++)
        cr_assert_eq(js(j1, names[i]), js(j0, names[i]), "%s changed", names[i]);
    cr_assert_eq(js(j1, "error_replies"), js(j0, "error_replies") + (long long)FX_ARRAY_LEN(cases) + 2);
    cJSON_Delete(j0);
    cJSON_Delete(j1);
    cr_assert_eq(placed(1), p0);
    cr_assert_eq(placed(0), p1);
    /* limits that are fine: a 1024-byte key, a value as large as the segment (no other
     * owner can hold it plus a grant: the requester's own slots) */
    longkey[1024] = '\0';
    const char *lk = longkey;
    t_place1(0, lk, 100, 0, NULL, &a);
    cr_assert_eq(t_place1(0, "huge", SEG, 0, NULL, &a), 0);
    /* a truncated body is a protocol error: the connection is closed, the master serves on */
    fx_body_put_place_t b = {t_keys(&k, 1), 100, 0, {NULL, 0}, fx_str_c("")};
    uint8_t *enc;
    size_t len;
    T_ENCODE(put_place, &b, enc, len);
    t_send(&oc[1], FX_MSG_PUT_PLACE, 99, enc, len - 1);
    free(enc);
    tframe_t f;
    cr_assert_not(t_recv_frame(&oc[1], &f, 2000), "the master closes a connection that sent a malformed frame");
    t_place1(0, "after", 100, 0, NULL, &a);
}

/* Issue 38, session 56: TOUCH (an owner's first read-backs of its written-back copies, one-way
 * as owners send it) checks its input: arrays of other lengths than the keys, an empty batch,
 * a bad key, or a peer that never registered are refused with a message naming the field,
 * moving no counter but error_replies; keys with no copy of that version are skipped
 * (target_touch_stale); a TOUCH sent as a request is answered, one sent one-way is not. */
Test(master_place, touch_checks_its_input_and_skips_what_is_no_copy)
{
    up(0, true, "a");
    fx_body_put_place_ack_t a;
    t_place1(0, "t/1", 100, FX_PUT_WRITE_THROUGH, NULL, &a); /* a route in flight, no copy */
    const char *names[] = {"target_touched", "target_refreshed_at_read", "target_touch_stale", "routes",
                           "target_cold_entries"};
    cJSON *j0 = pm_stats();
    char longkey[1100];
    memset(longkey, 'x', sizeof longkey - 1);
    longkey[1025] = '\0';
    fx_str_t two[] = {{"t/1", 3}, {"t/2", 3}}, empty[] = {{"t/1", 3}, {"", 0}}, lng[] = {{"t/1", 3}, {longkey, 1025}};
    uint64_t v1[] = {1}, v2[] = {1, 2};
    struct {
        fx_str_t *k;
        uint32_t nk, nms, nver;
        const char *field;
    } cases[] = {
        {two, 2, 1, 2, "put_ms"},  /* put_ms short */
        {two, 2, 2, 1, "put_ver"}, /* put_ver short */
        {two, 0, 0, 0, "keys"},    /* an empty batch */
        {empty, 2, 2, 2, "key 1"}, /* an empty key */
        {lng, 2, 2, 2, "key 1"},   /* a key of 1025 bytes */
    };
    fx_body_empty_t e;
    for (size_t i = 0; i < FX_ARRAY_LEN(cases); i++) {
        fx_body_touch_t b = {{cases[i].k, cases[i].nk}, {cases[i].nms == 1 ? v1 : v2, cases[i].nms},
                             {cases[i].nver == 1 ? v1 : v2, cases[i].nver}};
        cr_assert_eq(T_CALL(&oc[0], TOUCH, touch, &b, empty, &e), FLUXON_ERR_INVALID_ARGUMENT, "case %zu", i);
        cr_assert(strstr(last_err, "touch") && strstr(last_err, cases[i].field), "case %zu: %s", i, last_err);
    }
    t_hello(&ext, "x1");
    fx_body_touch_t ok = {{two, 2}, {v2, 2}, {v2, 2}};
    cr_assert_eq(T_CALL(&ext, TOUCH, touch, &ok, empty, &e), FLUXON_ERR_INVALID_ARGUMENT, "a peer not registered");
    cJSON *j1 = pm_stats();
    for (size_t i = 0; i < FX_ARRAY_LEN(names); i++)
        cr_assert_eq(js(j1, names[i]), js(j0, names[i]), "%s changed", names[i]);
    cr_assert_eq(js(j1, "error_replies"), js(j0, "error_replies") + (long long)FX_ARRAY_LEN(cases) + 1);
    /* well-formed: neither key has a copy (t/1 is in flight, t/2 unknown): both skipped */
    cr_assert_eq(T_CALL(&oc[0], TOUCH, touch, &ok, empty, &e), FLUXON_OK, "%s", last_err);
    T_SEND_ONEWAY(&oc[0], TOUCH, touch, &ok); /* no answer: the next frame is the next call's */
    cr_assert_eq(t_place1(0, "t/3", 100, 0, NULL, &a), 0);
    cJSON *j2 = pm_stats();
    cr_assert_eq(js(j2, "target_touched"), js(j0, "target_touched") + 4);
    cr_assert_eq(js(j2, "target_touch_stale"), js(j0, "target_touch_stale") + 4);
    cr_assert_eq(js(j2, "target_refreshed_at_read"), js(j0, "target_refreshed_at_read"));
    cr_assert_eq(js(j2, "error_replies"), js(j1, "error_replies"));
    cJSON_Delete(j0);
    cJSON_Delete(j1);
    cJSON_Delete(j2);
}
