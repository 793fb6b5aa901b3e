/* test_msg_chaos.c — Criterion suite for transport/chaos.c (issue 17): the message chaos is off
 * by default, one seed gives one fault stream, rates hold, and frames the protocol cannot
 * survive losing (HELLO, REGISTER, one-way frames) or seeing twice (requests that create
 * something per run) are never touched. */
#include <criterion/criterion.h>
#include <string.h>

#include "chaos.h"
#include "config.h"

static fx_config_t tc_cfg(uint32_t drop, uint32_t delay, uint32_t dup, uint64_t seed)
{
    fx_config_t c;
    memset(&c, 0, sizeof c);
    c.chaos_drop_ppm = drop;
    c.chaos_delay_ppm = delay;
    c.chaos_delay_ms = delay ? 100 : 0;
    c.chaos_dup_ppm = dup;
    c.chaos_seed = seed;
    return c;
}

static fx_frame_header_t tc_frame(unsigned type, bool response, uint64_t req_id)
{
    fx_frame_header_t h = {FX_FRAME_MAGIC, (uint16_t)type, response ? FX_FLAG_RESPONSE : 0, 0, 0, req_id};
    return h;
}

Test(msg_chaos, off_by_default)
{
    fx_config_t c = tc_cfg(0, 0, 0, 0);
    fx_chaos_t ch;
    cr_assert_not(fx_chaos_init(&ch, &c, "o1"));
}

Test(msg_chaos, one_seed_one_fault_stream)
{
    fx_config_t c = tc_cfg(100000, 100000, 100000, 42);
    fx_chaos_t a, b, other;
    cr_assert(fx_chaos_init(&a, &c, "o1"));
    fx_chaos_init(&b, &c, "o1");
    fx_chaos_init(&other, &c, "o2");
    fx_frame_header_t h = tc_frame(FX_MSG_PUT_DONE, true, 7);
    int differ = 0;
    for (int i = 0; i < 2000; i++) {
        uint32_t ma = 0, mb = 0, mo = 0;
        int ka = fx_chaos_pick(&a, &h, &ma), kb = fx_chaos_pick(&b, &h, &mb);
        cr_assert_eq(ka, kb);
        cr_assert_eq(ma, mb);
        differ += ka != fx_chaos_pick(&other, &h, &mo);
        if (ka == FX_CHAOS_DELAY) cr_assert(ma >= 1 && ma <= 100, "delay %u in 1..delay_ms", ma);
    }
    cr_assert_gt(differ, 0, "another node's stream differs");
}

Test(msg_chaos, rates_hold_and_are_counted)
{
    fx_config_t c = tc_cfg(100000, 50000, 20000, 1);
    fx_chaos_t ch;
    fx_chaos_init(&ch, &c, "master");
    fx_frame_header_t h = tc_frame(FX_MSG_LOOKUP, true, 9);
    uint64_t n[4] = {0};
    for (int i = 0; i < 200000; i++) {
        uint32_t ms;
        n[fx_chaos_pick(&ch, &h, &ms)]++;
    }
    cr_assert(n[FX_CHAOS_DROP] > 18000 && n[FX_CHAOS_DROP] < 22000, "drops %llu", (unsigned long long)n[FX_CHAOS_DROP]);
    cr_assert(n[FX_CHAOS_DELAY] > 9000 && n[FX_CHAOS_DELAY] < 11000);
    cr_assert(n[FX_CHAOS_DUP] > 3400 && n[FX_CHAOS_DUP] < 4600);
    cr_assert_eq(ch.dropped, n[FX_CHAOS_DROP]);
    cr_assert_eq(ch.delayed, n[FX_CHAOS_DELAY]);
    cr_assert_eq(ch.duplicated, n[FX_CHAOS_DUP]);
}

/* every frame faulted at a rate of 1: what is touched is what the protocol survives */
static int tc_always(int kind, unsigned type, bool response, uint64_t req_id)
{
    fx_config_t c = tc_cfg(kind == FX_CHAOS_DROP ? 1000000 : 0, kind == FX_CHAOS_DELAY ? 1000000 : 0,
                           kind == FX_CHAOS_DUP ? 1000000 : 0, 3);
    fx_chaos_t ch;
    fx_chaos_init(&ch, &c, "o1");
    fx_frame_header_t h = tc_frame(type, response, req_id);
    uint32_t ms;
    return fx_chaos_pick(&ch, &h, &ms);
}

Test(msg_chaos, unsurvivable_frames_are_never_touched)
{
    for (int k = FX_CHAOS_DROP; k <= FX_CHAOS_DUP; k++) {
        cr_assert_eq(tc_always(k, FX_MSG_HELLO, false, 1), FX_CHAOS_PASS);
        cr_assert_eq(tc_always(k, FX_MSG_HELLO, true, 1), FX_CHAOS_PASS);
        cr_assert_eq(tc_always(k, FX_MSG_REGISTER, true, 2), FX_CHAOS_PASS);
        cr_assert_eq(tc_always(k, FX_MSG_INVALIDATE, false, 0), FX_CHAOS_PASS, "one-way");
        cr_assert_eq(tc_always(k, FX_MSG_PLACED, false, 0), FX_CHAOS_PASS, "one-way");
        cr_assert_eq(tc_always(k, FX_MSG_RELEASE, false, 0), FX_CHAOS_PASS, "one-way");
        cr_assert_eq(tc_always(k, FX_MSG_PUBLISHED, false, 0), FX_CHAOS_PASS, "one-way");
        cr_assert_eq(tc_always(k, FX_MSG_GRANT, true, 5), k, "any answer");
        cr_assert_eq(tc_always(k, FX_MSG_PUT_DONE, false, 5), k, "PUT_DONE is deduplicated by batch_id");
    }
    cr_assert_eq(tc_always(FX_CHAOS_DROP, FX_MSG_GRANT, false, 5), FX_CHAOS_DROP);
    cr_assert_eq(tc_always(FX_CHAOS_DUP, FX_MSG_GRANT, false, 5), FX_CHAOS_PASS, "a second GRANT's grants leak");
    cr_assert_eq(tc_always(FX_CHAOS_DUP, FX_MSG_PUT_PLACE, false, 5), FX_CHAOS_PASS);
    cr_assert_eq(tc_always(FX_CHAOS_DUP, FX_MSG_GET_START, false, 5), FX_CHAOS_PASS);
    cr_assert_eq(tc_always(FX_CHAOS_DUP, FX_MSG_EVICT, false, 5), FX_CHAOS_DUP);
}
