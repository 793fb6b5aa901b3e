/* test_master_ttl.c — the in-flight TTL of placed puts (300 ms here): an expired put frees
 * its ranges and its key, its late PUT_DONE is STALE, and a put finished in time keeps its
 * range. Fixture: mplfix.h. */
#include "mplfix.h"

TestSuite(master_place_ttl, .init = setup_ttl, .fini = teardown, .timeout = 60);


/* ---- with a short in-flight TTL (300 ms) ---- */
Test(master_place_ttl, an_expired_put_frees_its_ranges_and_its_key)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, false, "c");
    const char *x = "x";
    fx_body_put_place_ack_t a1, a3;
    double t0 = th_now_s();
    cr_assert_eq(t_place1(0, x, 100, FX_PUT_WRITE_THROUGH, NULL, &a1), 1);
    cr_assert_eq(placed(1), 4096);
    cr_assert_eq(t_place(&oc[2], &x, 1, 100, FX_PUT_REJECT_IF_INFLIGHT, NULL, 0, NULL, &a3), FLUXON_OK);
    cr_assert_eq(a3.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    cr_assert_geq(pm_wait_stat("inflight_expired", 1, 5000), 0, "the in-flight put did not expire within 5 s");
    double waited = th_now_s() - t0;
    cr_assert_geq(waited, 0.29, "expired after %.3f s, before its TTL of 300 ms", waited);
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "inflight_puts"), 0);
    cr_assert_eq(js(j, "inflight_put_keys"), 0);
    cJSON_Delete(j);
    cr_assert_eq(placed(1), 0, "the expired put's range is free");
    cr_assert_eq(t_place(&oc[2], &x, 1, 100, FX_PUT_REJECT_IF_INFLIGHT, NULL, 0, NULL, &a3), FLUXON_OK);
    cr_assert_eq(a3.statuses.v[0], ST(FLUXON_OK), "the key is no longer being written");
    /* the late PUT_DONE of the expired put: STALE, nothing installed */
    fx_body_put_done_ack_t pa;
    cr_assert_eq(t_put_token(&oc[0], 1, &x, &a1.offsets.v[0], 1, 100, 0, NULL, 0, a1.put_token, &pa), FLUXON_OK);
    cr_assert_eq(pa.statuses.v[0], ST(FLUXON_ERR_STALE));
    cr_assert_eq(pm_stat("put_done_stale_token"), 1);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[2], x, &la), ST(FLUXON_ERR_NOT_FOUND));
    cr_assert_eq(t_revoke(&oc[0], a1.put_token), FLUXON_ERR_NOT_FOUND);
    /* the second put expires as well (the timer re-arms) */
    cr_assert_geq(pm_wait_stat("inflight_expired", 2, 5000), 0, "the second in-flight put did not expire");
    cr_assert_eq(pm_stat("inflight_puts"), 0);
    /* a put finished in time is a route: the TTL no longer applies to its range */
    const char *y = "y";
    fx_body_put_place_ack_t ay;
    cr_assert_eq(t_place1(0, y, 100, FX_PUT_WRITE_THROUGH, NULL, &ay), 1);
    cr_assert_eq(t_put_token(&oc[0], 2, &y, &ay.offsets.v[0], 1, 100, 0, NULL, 0, ay.put_token, &pa), FLUXON_OK);
    cr_assert_eq(pa.statuses.v[0], ST(FLUXON_OK));
    /* proof that y's TTL has passed: z, placed after y on the same target, expires (the
     * in-flight records expire in FIFO order) while y's range stays */
    const char *z = "z";
    fx_body_put_place_ack_t az;
    cr_assert_eq(t_place1(0, z, 100, FX_PUT_WRITE_THROUGH, NULL, &az), 1);
    cr_assert_eq(placed(1), 2 * 4096);
    cr_assert_geq(pm_wait_stat("inflight_expired", 3, 5000), 0, "z did not expire within 5 s");
    cr_assert_eq(pm_stat("inflight_expired"), 3, "y, a route now, never expires");
    cr_assert_eq(placed(1), 4096);
    cr_assert_eq(t_lookup1(&oc[2], y, &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == ay.offsets.v[0]);
}
