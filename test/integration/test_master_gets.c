/* test_master_gets.c — the get modes of LOOKUP / GET_DONE at frame level: reuse of the
 * reader's own slot, at most 2 durable copies per key at once, temporary beyond, and
 * durable-get records that expire with the in-flight TTL. Fixture: mplfix.h. */
#include "mplfix.h"

TestSuite(master_place, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(master_place_ttl, .init = setup_ttl, .fini = teardown, .timeout = 60);


Test(master_place, durable_for_two_owners_then_temporary)
{
    for (int i = 0; i < N_OWN; i++) up(i, false, "");
    uint64_t ms, ver;
    t_put1(&oc[3], 1, "dk", 40960, 100, 0, &ms, &ver); /* held by n4 */
    fx_body_lookup_ack_t la1, la2, la3, la;
    cr_assert_eq(t_lookup1(&oc[0], "dk", &la1), ST(FLUXON_OK));
    cr_assert_eq(la1.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_lookup1(&oc[1], "dk", &la2), ST(FLUXON_OK));
    cr_assert_eq(la2.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_lookup1(&oc[2], "dk", &la3), ST(FLUXON_OK));
    cr_assert_eq(la3.modes.v[0], FX_GET_TEMPORARY, "a third owner at once: temporary");
    cr_assert(!strcmp(src_of(&la3, 0), "n4") && la3.offsets.v[0] == 40960);
    cr_assert_eq(t_lookup1(&oc[1], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE, "the same owner asking again keeps its durable slot");
    cr_assert_eq(t_lookup1(&oc[3], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE, "the holder reuses its replica");
    cr_assert(!strcmp(src_of(&la, 0), "n4") && la.offsets.v[0] == 40960);
    /* an unregistered peer: temporary, and it takes no durable slot */
    t_hello(&ext, "x1");
    cr_assert_eq(t_lookup1(&ext, "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_TEMPORARY);
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "get_durable"), 3);
    cr_assert_eq(js(j, "get_temporary"), 1);
    cr_assert_eq(js(j, "get_reuse"), 1);
    cr_assert_eq(js(j, "inflight_gets"), 1, "one key");
    cr_assert_eq(js(j, "replicas"), 1);
    cJSON_Delete(j);
    /* n1 finishes its durable copy: a replica, and its slot goes to the next owner */
    cr_assert_eq(t_get_done(&oc[0], "dk", 8192, &la1, FX_GET_DURABLE), ST(FLUXON_OK));
    cr_assert_eq(pm_stat("replicas"), 2);
    cr_assert_eq(t_lookup1(&oc[2], "dk", &la3), ST(FLUXON_OK));
    cr_assert_eq(la3.modes.v[0], FX_GET_DURABLE, "a durable slot is free again");
    cr_assert_eq(t_lookup1(&oc[4], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_TEMPORARY, "n2 and n3 hold the two slots");
    cr_assert_eq(t_lookup1(&oc[0], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE);
    cr_assert(!strcmp(src_of(&la, 0), "n1") && la.offsets.v[0] == 8192);
    /* n5's temporary copy is validated but adds no replica */
    cr_assert_eq(t_lookup1(&oc[4], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_TEMPORARY);
    uint64_t dn = pm_stat("get_done_replicas");
    cr_assert_eq(t_get_done(&oc[4], "dk", 12288, &la, FX_GET_TEMPORARY), ST(FLUXON_OK));
    j = pm_stats();
    cr_assert_eq(js(j, "replicas"), 2);
    cr_assert_eq(js(j, "get_done_replicas"), (long long)dn);
    cJSON_Delete(j);
    fx_body_lookup_ack_t l5;
    cr_assert_eq(t_lookup1(&oc[4], "dk", &l5), ST(FLUXON_OK));
    cr_assert(strcmp(src_of(&l5, 0), "n5") && l5.modes.v[0] != FX_GET_REUSE, "n5 holds no replica");
    fx_body_lookup_ack_t l3;
    cr_assert_eq(t_lookup1(&oc[2], "dk", &l3), ST(FLUXON_OK));
    cr_assert(strcmp(src_of(&l3, 0), "n5"), "nobody is sent to n5's temporary copy");
    /* a temporary copy of a replaced source is stale */
    fx_body_lookup_ack_t old = la;
    uint64_t bad_ver = old.put_ver.v[0] + 1;
    old.put_ver.v = &bad_ver;
    cr_assert_eq(t_get_done(&oc[4], "dk", 12288, &old, FX_GET_TEMPORARY), ST(FLUXON_ERR_STALE));
    /* n2 finishes with an empty modes vector (= durable) */
    cr_assert_eq(t_get_done(&oc[1], "dk", 16384, &la2, 0), ST(FLUXON_OK));
    cr_assert_eq(pm_stat("replicas"), 3);
    cr_assert_eq(t_lookup1(&oc[1], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE);
    /* modes: only durable or temporary, one per key or none */
    const char *k = "dk";
    uint64_t off = 20480, bad_modes[] = {FX_GET_REUSE}, two_modes[] = {1, 1};
    fx_body_get_done_t gd = {t_keys(&k, 1), {&off, 1}, {&ms, 1}, {&ver, 1}, {&la.value_lens.v[0], 1},
                             fx_str_c("n4"), OWN[3].gen, {&la.offsets.v[0], 1}, {bad_modes, 1}, {NULL, 0}};
    fx_body_statuses_t gs;
    cr_assert_eq(T_CALL(&oc[4], GET_DONE, get_done, &gd, statuses, &gs), FLUXON_ERR_INVALID_ARGUMENT);
    gd.modes = (fx_u64v_t){two_modes, 2};
    cr_assert_eq(T_CALL(&oc[4], GET_DONE, get_done, &gd, statuses, &gs), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(pm_stat("replicas"), 3);
}


Test(master_place_ttl, durable_get_slots_expire)
{
    for (int i = 0; i < 4; i++) up(i, false, "");
    t_put1(&oc[3], 1, "dk", 40960, 100, 0, NULL, NULL);
    fx_body_lookup_ack_t la1, la;
    cr_assert_eq(t_lookup1(&oc[0], "dk", &la1), ST(FLUXON_OK));
    cr_assert_eq(la1.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_lookup1(&oc[1], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_lookup1(&oc[2], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_TEMPORARY);
    cr_assert_geq(pm_wait_stat("inflight_gets", 0, 5000), 0, "in-flight gets did not expire within 5 s");
    cr_assert_eq(t_lookup1(&oc[2], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE, "the expired slots are free");
    /* a late durable GET_DONE of a live source still adds its replica */
    cr_assert_eq(t_get_done(&oc[0], "dk", 8192, &la1, FX_GET_DURABLE), ST(FLUXON_OK));
    cr_assert_eq(pm_stat("replicas"), 2);
}

/* Retries with the same identity are safe at the master (what an owner needs to retry an
 * uncertain GET_DONE or EVICT, issue 13 items 3/4): a second GET_DONE of the same copy
 * answers OK and adds nothing; a second EVICT of a replica already dropped answers STALE
 * (the master routes no such replica: the owner may drop its copy) and changes nothing. */
Test(master_place, get_done_and_evict_retries_are_idempotent)
{
    for (int i = 0; i < 2; i++) up(i, false, "");
    uint64_t ms, ver;
    t_put1(&oc[1], 1, "rk", 40960, 100, 0, &ms, &ver); /* held by n2 */
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[0], "rk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_get_done(&oc[0], "rk", 8192, &la, FX_GET_DURABLE), ST(FLUXON_OK));
    cr_assert_eq(pm_stat("replicas"), 2);
    cr_assert_eq(t_get_done(&oc[0], "rk", 8192, &la, FX_GET_DURABLE), ST(FLUXON_OK), "the retry");
    cr_assert_eq(pm_stat("replicas"), 2, "the retry adds no replica");
    cr_assert_eq(pm_stat("get_done_replicas"), 1);
    const char *k = "rk";
    uint64_t off = 8192;
    fx_body_evict_t eb = {t_keys(&k, 1), {&off, 1}, {&ms, 1}, {&ver, 1}, {NULL, 0}};
    fx_body_statuses_t es;
    cr_assert_eq(T_CALL(&oc[0], EVICT, evict, &eb, statuses, &es), FLUXON_OK, "%s", last_err);
    cr_assert_eq(es.statuses.v[0], ST(FLUXON_OK));
    cr_assert_eq(pm_stat("replicas"), 1);
    cr_assert_eq(T_CALL(&oc[0], EVICT, evict, &eb, statuses, &es), FLUXON_OK, "%s", last_err);
    cr_assert_eq(es.statuses.v[0], ST(FLUXON_ERR_STALE), "the retry: no such replica any more");
    cr_assert_eq(pm_stat("replicas"), 1, "n2's replica stays");
    cr_assert_eq(t_lookup1(&oc[0], "rk", &la), ST(FLUXON_OK));
    cr_assert(!strcmp(src_of(&la, 0), "n2") && la.offsets.v[0] == 40960);
}

/* W3: a copy is accepted only from the very replica its LOOKUP named. n1 holds w3 at x,
 * n2 copies it; n3 starts copying from n1:x; n1 evicts its replica and copies the same
 * version back into x (the same node, generation, offset and version: another replica,
 * its bytes rewritten meanwhile). n3's GET_DONE used to pass (the identity matched); the
 * master now gives every replica a number never used again, LOOKUP names it and GET_DONE
 * must echo it. */
Test(master_place, a_copy_from_a_replica_removed_and_added_again_is_stale)
{
    for (int i = 0; i < 3; i++) up(i, false, "");
    uint64_t ms, ver;
    t_put1(&oc[0], 1, "w3", 40960, 100, 0, &ms, &ver); /* n1:x */
    fx_body_lookup_ack_t lr, lf, ls;
    cr_assert_eq(t_lookup1(&oc[1], "w3", &lr), ST(FLUXON_OK));
    cr_assert_eq(t_get_done(&oc[1], "w3", 8192, &lr, FX_GET_DURABLE), ST(FLUXON_OK)); /* n2:y */
    cr_assert_eq(t_lookup1(&oc[2], "w3", &lf), ST(FLUXON_OK));
    cr_assert(!strcmp(src_of(&lf, 0), "n1") && lf.offsets.v[0] == 40960, "n3 copies from n1:x");
    const char *k = "w3";
    uint64_t x = 40960;
    fx_body_evict_t eb = {t_keys(&k, 1), {&x, 1}, {&ms, 1}, {&ver, 1}, {NULL, 0}};
    fx_body_statuses_t es;
    cr_assert_eq(T_CALL(&oc[0], EVICT, evict, &eb, statuses, &es), FLUXON_OK, "%s", last_err);
    cr_assert_eq(es.statuses.v[0], ST(FLUXON_OK), "n1 drops its replica");
    cr_assert_eq(t_lookup1(&oc[0], "w3", &ls), ST(FLUXON_OK));
    cr_assert(!strcmp(src_of(&ls, 0), "n2"));
    cr_assert_eq(t_get_done(&oc[0], "w3", 40960, &ls, FX_GET_DURABLE), ST(FLUXON_OK), "n1 copies it back into x");
    cr_assert_eq(pm_stat("replicas"), 2);
    cr_assert_eq(t_get_done(&oc[2], "w3", 12288, &lf, lf.modes.v[0]), ST(FLUXON_ERR_STALE),
                 "n3's copy came from the replica that was removed");
    cr_assert_eq(pm_stat("replicas"), 2, "and adds nothing");
}
