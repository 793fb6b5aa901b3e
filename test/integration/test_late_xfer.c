/* test_late_xfer.c — issue 44 W4 (fetches): a GET reported as failed (timed out) before UCX
 * retired it may still write its destination slot, so the slot stays PREPARED — no put can
 * claim it — until the transfer retires, and is freed then. The fault: config
 * test.late_gets / test.late_ms (transport/ucx_dp.h fx_ucx_test_late_gets): the GET is
 * reported as timed out at once and its bytes land late_ms later. */
#include <criterion/criterion.h>

#include "kvfix.h"

#define KIB 1024ull
#define VLEN (5 * KIB * KIB) /* one slot per 8 MiB grant: a freed slot is the next claimed */
#define LATE_MS 1500

static void down(void) { kf_down(); }

TestSuite(late_xfer, .fini = down, .timeout = 120);

static void put_seeded(fluxon_client *c, const char *key, uint64_t seed)
{
    uint8_t *v = malloc(VLEN);
    cr_assert_not_null(v);
    kf_fill(v, VLEN, seed);
    fluxon_put_options lf = {.field_mask = FLUXON_PUT_OPT_LOCAL_FIRST, .local_first = 1};
    int rc = fluxon_put(c, key, v, VLEN, &lf);
    free(v);
    cr_assert_eq(rc, FLUXON_OK, "put %s: %s", key, fluxon_status_string(rc));
}

/* 1: the value's bytes are seed's, 0: other bytes; asserts that the get succeeds. */
static int get_is(fluxon_client *c, const char *key, uint64_t seed)
{
    fluxon_holder *h = NULL;
    int rc = fluxon_get(c, key, &h);
    cr_assert_eq(rc, FLUXON_OK, "get %s: %s", key, fluxon_status_string(rc));
    cr_assert_eq(fluxon_holder_len(h), VLEN);
    int ok = kf_check(fluxon_holder_data(h), VLEN, seed);
    fluxon_holder_release(h);
    return ok;
}

Test(late_xfer, a_timed_out_get_keeps_its_slot_until_ucx_retires_it)
{
    char extra_b[128];
    snprintf(extra_b, sizeof extra_b, ",\"test\":{\"late_gets\":1,\"late_ms\":%d}", LATE_MS);
    const char *extra[2] = {NULL, extra_b};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    put_seeded(a, "src", 900);
    cr_assert_eq(kf_stat(b, "slots_prepared"), 0);
    fluxon_holder *h = NULL;
    double t0 = th_now_s();
    int rc = fluxon_get(b, "src", &h);
    cr_assert_neq(rc, FLUXON_OK, "the fault reports B's GET as timed out");
    /* the GET's bytes have not landed yet (they land LATE_MS after it started) */
    cr_assert_eq(kf_stat(b, "fetch_slots_held"), 1, "the destination slot is held, not freed");
    cr_assert_eq(kf_stat(b, "slots_prepared"), 1, "held PREPARED: no put can claim it");
    put_seeded(b, "victim", 901); /* must take another slot */
    cr_assert_lt(th_now_s() - t0, LATE_MS / 1000.0, "checked before the late bytes land");
    cr_assert(kf_wait_stat(b, "fetch_slots_held", 0, 10000), "released once UCX retired the GET");
    cr_assert_eq(kf_stat(b, "fetch_slots_held_total"), 1);
    cr_assert_eq(kf_stat(b, "slots_prepared"), 0, "the held slot went back to the pool");
    cr_assert(get_is(b, "victim", 901), "the late GET's bytes did not land in the put's value");
    cr_assert(get_is(b, "src", 900), "the next fetch works");
    cr_assert(get_is(b, "victim", 901));
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* A held slot whose GET never retires before the owner stops is released at shutdown (by
 * fx_ucx_destroy, while the pool still exists): no crash, no leak (ASan). */
Test(late_xfer, a_slot_held_at_shutdown_is_released_by_the_teardown)
{
    const char *extra[2] = {NULL, ",\"test\":{\"late_gets\":1,\"late_ms\":600000}"};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    put_seeded(a, "src", 910);
    fluxon_holder *h = NULL;
    cr_assert_neq(fluxon_get(b, "src", &h), FLUXON_OK);
    cr_assert_eq(kf_stat(b, "fetch_slots_held"), 1);
    /* a fetch that completes: B's endpoint to A is wired up before B stops (UCX 1.13 may
     * assert when an endpoint still in wire-up is torn down) */
    put_seeded(a, "src2", 911);
    cr_assert(get_is(b, "src2", 911));
    cr_assert_eq(kf_stat(b, "fetch_slots_held"), 1, "still held");
    fluxon_client_close(a);
    fluxon_client_close(b);
    fluxon_node_stop(kf_owner[1]); /* the held slot goes with the teardown */
    kf_owner[1] = NULL;
}
