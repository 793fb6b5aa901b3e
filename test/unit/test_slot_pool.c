/* test_slot_pool.c — Criterion suite for the owner's local reserve slot pool (cache/
 * slot_pool.c): §6 sizing, S2 release orders, stale refs, FIFO waiters, timeouts, caps,
 * stats. The 100k-op randomized walk is test_slot_pool_walk.c. */
#include <criterion/criterion.h>
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "slot_pool.h"
#include "slotfix.h"

/* ---- sizing ---------------------------------------------------------------------------- */

Test(slot_pool, sizing_formula)
{
    cr_assert_eq(fx_slot_size_for(1), 4096);
    cr_assert_eq(fx_slot_size_for(4096), 4096);
    cr_assert_eq(fx_slot_size_for(4097), 8192);
    cr_assert_eq(fx_slot_size_for(0), 0);
    cr_assert_eq(fx_slot_size_for(UINT64_MAX), 0);
    cr_assert_eq(fx_slot_size_for(4718592), 4718592); /* exact fit, not 8 MiB */
    cr_assert_eq(fx_slots_per_grant(536870912, 4718592), 113);
    cr_assert_eq(fx_slots_per_grant(536870912, 0), 0);

    uint64_t g = 0;
    cr_assert_eq(fx_slot_pool_expected_grants(536870912, 4718592, 109951162777ull, &g), FLUXON_OK);
    cr_assert_eq(g, 207); /* the seed's figure: tail fragments counted */
    cr_assert_eq(fx_slot_pool_expected_grants(536870912, 4718592, 113ull * 4718592, &g), FLUXON_OK);
    cr_assert_eq(g, 1);
    cr_assert_eq(fx_slot_pool_expected_grants(536870912, 4718592, 113ull * 4718592 + 1, &g),
                 FLUXON_OK);
    cr_assert_eq(g, 2);
    cr_assert_eq(fx_slot_pool_expected_grants(536870912, 1, 4096, &g), FLUXON_OK);
    cr_assert_eq(g, 1);

    g = 77;
    cr_assert_eq(fx_slot_pool_expected_grants(536870912, 536870913, 1ull << 30, &g),
                 FLUXON_ERR_INVALID_ARGUMENT); /* value > grant */
    cr_assert_eq(fx_slot_pool_expected_grants(536870912, 0, 1ull << 30, &g),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_expected_grants(536870912, 4096, 0, &g),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_expected_grants(0, 4096, 4096, &g), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_expected_grants(6000, 5000, 4096, &g),
                 FLUXON_ERR_INVALID_ARGUMENT); /* slot 8192 does not fit a 6000-byte grant */
    cr_assert_eq(fx_slot_pool_expected_grants(536870912, 4096, 4096, NULL),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(g, 77, "output written on error");
}

Test(slot_pool, create_validates_config)
{
    fx_slot_pool_config_t cfg;
    fx_slot_pool_t *p = NULL;
    fx_slot_pool_config_init(&cfg);
    cr_assert_eq(cfg.grant_bytes, 512ull << 20);
    cr_assert_eq(cfg.soft_wait_ms, 10);
    cr_assert_eq(cfg.claim_timeout_ms, 30000);
    cr_assert_eq(cfg.max_grants, 0);
    fx_slot_pool_config_t bad = cfg;
    bad.grant_bytes = 5000;
    cr_assert_eq(fx_slot_pool_create(&bad, &p), FLUXON_ERR_INVALID_ARGUMENT);
    bad = cfg;
    bad.grant_bytes = 0;
    cr_assert_eq(fx_slot_pool_create(&bad, &p), FLUXON_ERR_INVALID_ARGUMENT);
    bad = cfg;
    bad.claim_timeout_ms = bad.soft_wait_ms;
    cr_assert_eq(fx_slot_pool_create(&bad, &p), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_create(NULL, &p), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_null(p);
    cr_assert_eq(fx_slot_pool_create(&cfg, &p), FLUXON_OK);
    fx_slot_pool_destroy(p);
    fx_slot_pool_destroy(NULL);
}

/* ---- grants and claims ----------------------------------------------------------------- */

Test(slot_pool, add_grant_validation_and_cap)
{
    fx_slot_pool_t *p = mk_pool(64 * PG, 2);
    cr_assert_eq(fx_slot_pool_add_grant(p, 0, 0, PG), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 100, PG), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, 5000), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, 0), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, 65 * PG), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, UINT64_MAX - 4095, PG),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(stats(p).grants, 0);

    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, 3 * PG), FLUXON_OK); /* 21 slots, tail 4K */
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 128 * PG, PG), FLUXON_ERR_KEY_EXISTS);
    cr_assert_eq(fx_slot_pool_add_grant(p, 2, 32 * PG, PG), FLUXON_ERR_INVALID_ARGUMENT,
                 "overlapping grant accepted");
    cr_assert_eq(fx_slot_pool_add_grant(p, 2, 64 * PG, PG), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_add_grant(p, 3, 128 * PG, PG), FLUXON_ERR_NO_SPACE, "cap");
    fx_slot_pool_stats_t st = stats(p);
    cr_assert_eq(st.grants, 2);
    cr_assert_eq(st.slots, 21 + 64);
    cr_assert_eq(st.free, 85);
    cr_assert_eq(st.granted_bytes, 128 * PG);
    cr_assert_eq(st.slot_bytes, 21 * 3 * PG + 64 * PG);
    cr_assert_eq(st.used_bytes, 0);
    fx_slot_grant_stats_t gs;
    cr_assert_eq(fx_slot_pool_grant_stats(p, 1, &gs), FLUXON_OK);
    cr_assert_eq(gs.slots, 21);
    cr_assert_eq(gs.slot_size, 3 * PG);
    cr_assert_eq(fx_slot_pool_grant_stats(p, 9, &gs), FLUXON_ERR_NOT_FOUND);
    CHECK(p);

    /* removing an idle grant frees room under the cap; a busy one is refused */
    fx_slot_ref_t r;
    cr_assert_eq(fx_slot_pool_claim(p, 100, &r), FLUXON_OK);
    cr_assert_eq(r.grant_id, 2);
    cr_assert_eq(fx_slot_pool_remove_grant(p, 2), FLUXON_ERR_BUSY);
    cr_assert_eq(fx_slot_pool_remove_grant(p, 1), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_remove_grant(p, 1), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fx_slot_pool_add_grant(p, 3, 128 * PG, PG), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_add_grant(p, 4, 192 * PG, PG), FLUXON_ERR_NO_SPACE);
    CHECK(p);
    fx_slot_pool_destroy(p);
}

Test(slot_pool, claim_exact_class_fifo_and_no_space)
{
    fx_slot_pool_t *p = mk_pool(4 * PG, 0);
    cr_assert_eq(fx_slot_pool_add_grant(p, 7, 1024 * PG, PG), FLUXON_OK);      /* 4 slots */
    cr_assert_eq(fx_slot_pool_add_grant(p, 8, 2048 * PG, 2 * PG), FLUXON_OK);  /* 2 slots */
    fx_slot_ref_t r[4], x;
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(fx_slot_pool_claim(p, i == 0 ? 1 : 4096, &r[i]), FLUXON_OK);
        cr_assert_eq(r[i].grant_id, 7);
        cr_assert_eq(r[i].index, (uint32_t)i);
        cr_assert_eq(r[i].slot_size, PG);
        cr_assert_eq(r[i].offset, 1024 * PG + (uint64_t)i * PG);
        cr_assert_neq(r[i].use_seq, 0);
    }
    cr_assert_eq(fx_slot_pool_claim(p, 4096, &x), FLUXON_ERR_NO_SPACE,
                 "4 KiB values must not take 8 KiB slots");
    cr_assert_eq(fx_slot_pool_claim(p, 4097, &x), FLUXON_OK);
    cr_assert_eq(x.slot_size, 2 * PG);
    cr_assert_eq(fx_slot_pool_claim(p, 3 * PG, &x), FLUXON_ERR_NO_SPACE, "no such class");
    cr_assert_eq(fx_slot_pool_claim(p, 0, &x), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_claim(p, 4 * PG + 1, &x), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_claim(p, 1, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    EXPECT_STATES(p, 1, 5, 0, 0);
    cr_assert_eq(stats(p).claim_no_space, 2);
    cr_assert_eq(stats(p).used_bytes, 4 * PG + 2 * PG);
    /* a freed slot goes to the tail: the oldest free slot is reused first */
    cr_assert_eq(fx_slot_pool_release_prepared(p, &r[2]), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &r[0]), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_claim(p, 1, &x), FLUXON_OK);
    cr_assert_eq(x.index, 2);
    cr_assert_eq(fx_slot_pool_claim(p, 1, &x), FLUXON_OK);
    cr_assert_eq(x.index, 0);
    CHECK(p);
    fx_slot_pool_destroy(p);
}

/* ---- S2: release orders -------------------------------------------------------------- */

static fx_slot_ref_t committed_slot(fx_slot_pool_t *p)
{
    fx_slot_ref_t r;
    cr_assert_eq(fx_slot_pool_claim(p, 4096, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_mark_pending(p, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_mark_committed(p, &r), FLUXON_OK);
    return r;
}

Test(slot_pool, route_first_release_frees_once)
{
    fx_slot_pool_t *p = mk_pool(4 * PG, 0);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, PG), FLUXON_OK);
    fx_slot_ref_t r = committed_slot(p);
    fx_slot_info_t in;
    EXPECT_STATES(p, 3, 0, 0, 1);
    cr_assert_eq(fx_slot_pool_holder_ref(p, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_holder_ref(p, &r), FLUXON_OK);
    cr_assert_eq(stats(p).holder_refs, 2);
    cr_assert_eq(fx_slot_pool_route_dead(p, &r), FLUXON_OK);
    EXPECT_STATES(p, 3, 0, 0, 1); /* held: not free yet */
    cr_assert_eq(stats(p).draining, 1);
    cr_assert_eq(fx_slot_pool_inspect(p, &r, &in), FLUXON_OK);
    cr_assert(!in.route_live && in.holder_refs == 2 && in.state == FX_SLOT_COMMITTED);
    cr_assert_eq(fx_slot_pool_route_dead(p, &r), FLUXON_ERR_WRONG_HANDLE, "route dead twice");
    cr_assert_eq(fx_slot_pool_holder_ref(p, &r), FLUXON_ERR_STALE, "new pin on a dead route");
    cr_assert_eq(fx_slot_pool_holder_unref(p, &r), FLUXON_OK);
    EXPECT_STATES(p, 3, 0, 0, 1);
    cr_assert_eq(fx_slot_pool_holder_unref(p, &r), FLUXON_OK);
    EXPECT_STATES(p, 4, 0, 0, 0);
    fx_slot_pool_stats_t st = stats(p);
    cr_assert_eq(st.frees, 1);
    cr_assert_eq(st.draining, 0);
    cr_assert_eq(st.holder_refs, 0);
    cr_assert_eq(st.used_bytes, 0);
    /* every further release of the same ref is a stale double release */
    cr_assert_eq(fx_slot_pool_holder_unref(p, &r), FLUXON_ERR_STALE);
    cr_assert_eq(fx_slot_pool_route_dead(p, &r), FLUXON_ERR_STALE);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &r), FLUXON_ERR_STALE);
    cr_assert_eq(stats(p).frees, 1);
    EXPECT_STATES(p, 4, 0, 0, 0);
    fx_slot_pool_destroy(p);
}

Test(slot_pool, holder_first_release_frees_once)
{
    fx_slot_pool_t *p = mk_pool(4 * PG, 0);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, PG), FLUXON_OK);
    fx_slot_ref_t r = committed_slot(p);
    cr_assert_eq(fx_slot_pool_holder_ref(p, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_holder_unref(p, &r), FLUXON_OK);
    EXPECT_STATES(p, 3, 0, 0, 1); /* route still live */
    cr_assert_eq(fx_slot_pool_holder_unref(p, &r), FLUXON_ERR_WRONG_HANDLE, "unref of 0");
    EXPECT_STATES(p, 3, 0, 0, 1);
    cr_assert_eq(fx_slot_pool_route_dead(p, &r), FLUXON_OK);
    EXPECT_STATES(p, 4, 0, 0, 0);
    cr_assert_eq(stats(p).frees, 1);
    cr_assert_eq(fx_slot_pool_route_dead(p, &r), FLUXON_ERR_STALE);
    cr_assert_eq(stats(p).frees, 1);
    fx_slot_pool_destroy(p);
}

Test(slot_pool, pending_abort_with_local_reader)
{
    fx_slot_pool_t *p = mk_pool(4 * PG, 0);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, PG), FLUXON_OK);
    fx_slot_ref_t r;
    cr_assert_eq(fx_slot_pool_claim(p, 10, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_holder_ref(p, &r), FLUXON_ERR_WRONG_HANDLE, "pin PREPARED");
    cr_assert_eq(fx_slot_pool_mark_pending(p, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_holder_ref(p, &r), FLUXON_OK); /* V1 local reader */
    cr_assert_eq(fx_slot_pool_release_prepared(p, &r), FLUXON_OK);
    EXPECT_STATES(p, 3, 0, 1, 0); /* reader keeps the bytes */
    cr_assert_eq(stats(p).draining, 1);
    cr_assert_eq(fx_slot_pool_holder_ref(p, &r), FLUXON_ERR_WRONG_HANDLE, "pin aborted");
    cr_assert_eq(fx_slot_pool_mark_committed(p, &r), FLUXON_ERR_WRONG_HANDLE);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &r), FLUXON_ERR_WRONG_HANDLE);
    EXPECT_STATES(p, 3, 0, 1, 0);
    cr_assert_eq(fx_slot_pool_holder_unref(p, &r), FLUXON_OK);
    EXPECT_STATES(p, 4, 0, 0, 0);
    cr_assert_eq(stats(p).draining, 0);
    /* abort without readers frees at once, from PREPARED and from PENDING */
    cr_assert_eq(fx_slot_pool_claim(p, 10, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_claim(p, 10, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_mark_pending(p, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &r), FLUXON_OK);
    EXPECT_STATES(p, 4, 0, 0, 0);
    cr_assert_eq(stats(p).frees, 3);
    fx_slot_pool_destroy(p);
}

Test(slot_pool, stale_ref_after_reuse)
{
    fx_slot_pool_t *p = mk_pool(PG, 0); /* one slot per grant */
    cr_assert_eq(fx_slot_pool_add_grant(p, 5, 0, PG), FLUXON_OK);
    fx_slot_ref_t old, cur;
    cr_assert_eq(fx_slot_pool_claim(p, 1, &old), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &old), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_claim(p, 1, &cur), FLUXON_OK);
    cr_assert_eq(cur.index, old.index);
    cr_assert_eq(cur.offset, old.offset);
    cr_assert_gt(cur.use_seq, old.use_seq);
    fx_slot_pool_stats_t before = stats(p);
    cr_assert_eq(fx_slot_pool_mark_pending(p, &old), FLUXON_ERR_STALE);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &old), FLUXON_ERR_STALE);
    cr_assert_eq(fx_slot_pool_holder_ref(p, &old), FLUXON_ERR_STALE);
    cr_assert_eq(fx_slot_pool_holder_unref(p, &old), FLUXON_ERR_STALE);
    cr_assert_eq(fx_slot_pool_mark_committed(p, &old), FLUXON_ERR_STALE);
    cr_assert_eq(fx_slot_pool_route_dead(p, &old), FLUXON_ERR_STALE);
    fx_slot_pool_stats_t after = stats(p);
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0);
    fx_slot_info_t in;
    cr_assert_eq(fx_slot_pool_inspect(p, &cur, &in), FLUXON_OK);
    cr_assert_eq(in.state, FX_SLOT_PREPARED, "the new user's slot was touched");
    /* grant removed and the same id granted again: old refs stay stale */
    cr_assert_eq(fx_slot_pool_release_prepared(p, &cur), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_remove_grant(p, 5), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_mark_pending(p, &cur), FLUXON_ERR_STALE);
    cr_assert_eq(fx_slot_pool_add_grant(p, 5, 0, PG), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &cur), FLUXON_ERR_STALE);
    CHECK(p);
    fx_slot_pool_destroy(p);
}

Test(slot_pool, bad_transitions_change_nothing)
{
    fx_slot_pool_t *p = mk_pool(4 * PG, 0);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, PG), FLUXON_OK);
    fx_slot_ref_t prep, pend, com;
    cr_assert_eq(fx_slot_pool_claim(p, 1, &prep), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_claim(p, 1, &pend), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_mark_pending(p, &pend), FLUXON_OK);
    com = committed_slot(p);
    fx_slot_pool_stats_t before = stats(p);
    cr_assert_eq(fx_slot_pool_mark_committed(p, &prep), FLUXON_ERR_WRONG_HANDLE);
    cr_assert_eq(fx_slot_pool_route_dead(p, &prep), FLUXON_ERR_WRONG_HANDLE);
    cr_assert_eq(fx_slot_pool_holder_unref(p, &prep), FLUXON_ERR_WRONG_HANDLE);
    cr_assert_eq(fx_slot_pool_mark_pending(p, &pend), FLUXON_ERR_WRONG_HANDLE);
    cr_assert_eq(fx_slot_pool_route_dead(p, &pend), FLUXON_ERR_WRONG_HANDLE);
    cr_assert_eq(fx_slot_pool_mark_pending(p, &com), FLUXON_ERR_WRONG_HANDLE);
    cr_assert_eq(fx_slot_pool_mark_committed(p, &com), FLUXON_ERR_WRONG_HANDLE);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &com), FLUXON_ERR_WRONG_HANDLE);
    cr_assert_eq(fx_slot_pool_holder_unref(p, &com), FLUXON_ERR_WRONG_HANDLE);
    /* forged or corrupt refs */
    fx_slot_ref_t bad = prep;
    bad.index = 99;
    cr_assert_eq(fx_slot_pool_mark_pending(p, &bad), FLUXON_ERR_INVALID_ARGUMENT);
    bad = prep;
    bad.offset += PG;
    cr_assert_eq(fx_slot_pool_mark_pending(p, &bad), FLUXON_ERR_INVALID_ARGUMENT);
    bad = prep;
    bad.slot_size = 2 * PG;
    cr_assert_eq(fx_slot_pool_mark_pending(p, &bad), FLUXON_ERR_INVALID_ARGUMENT);
    bad = prep;
    bad.use_seq = 0;
    cr_assert_eq(fx_slot_pool_mark_pending(p, &bad), FLUXON_ERR_INVALID_ARGUMENT);
    bad = prep;
    bad.use_seq = 1000;
    cr_assert_eq(fx_slot_pool_mark_pending(p, &bad), FLUXON_ERR_INVALID_ARGUMENT);
    bad = prep;
    bad.use_seq = com.use_seq; /* issued, but to another slot */
    cr_assert_eq(fx_slot_pool_mark_pending(p, &bad), FLUXON_ERR_INVALID_ARGUMENT);
    bad = prep;
    bad.grant_id = 0;
    cr_assert_eq(fx_slot_pool_mark_pending(p, &bad), FLUXON_ERR_INVALID_ARGUMENT);
    bad = prep;
    bad.grant_id = 42;
    cr_assert_eq(fx_slot_pool_mark_pending(p, &bad), FLUXON_ERR_STALE);
    fx_slot_ref_t zero = {0};
    cr_assert_eq(fx_slot_pool_holder_ref(p, &zero), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_holder_ref(p, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_slot_pool_holder_ref(NULL, &prep), FLUXON_ERR_INVALID_ARGUMENT);
    fx_slot_pool_stats_t after = stats(p);
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0, "a failed call changed counters");
    EXPECT_STATES(p, 1, 1, 1, 1);
    fx_slot_pool_destroy(p);
}

/* ---- waiters --------------------------------------------------------------------------- */

typedef struct wlog {
    int n;
    int tag[16], status[16];
    fx_slot_ref_t ref[16];
    fx_slot_pool_t *pool;
    int release_in_cb;    /* tag whose callback releases its slot at once */
    uint64_t cancel_in_cb; /* wait id the first callback cancels */
    int cancel_rc;
} wlog_t;

typedef struct wtok {
    wlog_t *log;
    int tag;
} wtok_t;

static void wcb(void *arg, int status, const fx_slot_ref_t *slot)
{
    wtok_t *t = arg;
    wlog_t *l = t->log;
    cr_assert_lt(l->n, 16);
    l->tag[l->n] = t->tag;
    l->status[l->n] = status;
    cr_assert_eq(slot != NULL, status == FLUXON_OK);
    if (slot) l->ref[l->n] = *slot;
    l->n++;
    if (slot) {
        fx_slot_info_t in;
        cr_assert_eq(fx_slot_pool_inspect(l->pool, slot, &in), FLUXON_OK);
        cr_assert_eq(in.state, FX_SLOT_PREPARED);
        cr_assert_eq(fx_slot_pool_check(l->pool), FLUXON_OK);
        if (t->tag == l->release_in_cb)
            cr_assert_eq(fx_slot_pool_release_prepared(l->pool, slot), FLUXON_OK);
    }
    if (l->cancel_in_cb) {
        l->cancel_rc = fx_slot_pool_cancel_wait(l->pool, l->cancel_in_cb);
        l->cancel_in_cb = 0;
    }
}

static uint64_t queue(fx_slot_pool_t *p, uint64_t len, uint64_t now, wtok_t *t)
{
    fx_slot_ref_t r;
    uint64_t id = 0;
    cr_assert_eq(fx_slot_pool_wait(p, len, now, wcb, t, &r, &id), FLUXON_IN_PROGRESS);
    cr_assert_neq(id, 0);
    return id;
}

Test(slot_pool, waiters_fifo_on_free_and_on_grant)
{
    fx_slot_pool_t *p = mk_pool(2 * PG, 0);
    wlog_t l = {.pool = p, .release_in_cb = -1};
    wtok_t t[4] = {{&l, 0}, {&l, 1}, {&l, 2}, {&l, 3}};
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, PG), FLUXON_OK); /* 2 slots */
    fx_slot_ref_t a, b, x;
    uint64_t id;
    cr_assert_eq(fx_slot_pool_wait(p, 1, 0, wcb, &t[0], &a, &id), FLUXON_OK, "free: no wait");
    cr_assert_eq(fx_slot_pool_claim(p, 1, &b), FLUXON_OK);
    queue(p, 1, 1, &t[0]);
    queue(p, 100, 2, &t[1]);
    queue(p, 4096, 3, &t[2]);
    cr_assert_eq(stats(p).waiters, 3);
    cr_assert_eq(fx_slot_pool_claim(p, 1, &x), FLUXON_ERR_NO_SPACE, "claim jumped the queue");
    CHECK(p);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &b), FLUXON_OK);
    cr_assert_eq(l.n, 1);
    cr_assert_eq(l.tag[0], 0);
    cr_assert_eq(l.status[0], FLUXON_OK);
    cr_assert_eq(l.ref[0].index, b.index);
    cr_assert_gt(l.ref[0].use_seq, b.use_seq);
    EXPECT_STATES(p, 0, 2, 0, 0);
    cr_assert_eq(fx_slot_pool_mark_pending(p, &a), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &a), FLUXON_OK);
    cr_assert_eq(l.n, 2);
    cr_assert_eq(l.tag[1], 1);
    cr_assert_eq(l.ref[1].index, a.index);
    /* a new grant of the class serves the remaining waiter first, the rest go free */
    cr_assert_eq(fx_slot_pool_add_grant(p, 2, 8 * PG, PG), FLUXON_OK);
    cr_assert_eq(l.n, 3);
    cr_assert_eq(l.tag[2], 2);
    cr_assert_eq(l.ref[2].grant_id, 2);
    cr_assert_eq(l.ref[2].index, 0);
    fx_slot_pool_stats_t st = stats(p);
    cr_assert_eq(st.waiters, 0);
    cr_assert_eq(st.waits_queued, 3);
    cr_assert_eq(st.waits_served, 3);
    EXPECT_STATES(p, 1, 3, 0, 0);
    fx_slot_pool_destroy(p);
}

Test(slot_pool, grant_serves_only_its_class)
{
    fx_slot_pool_t *p = mk_pool(8 * PG, 0);
    wlog_t l = {.pool = p, .release_in_cb = -1};
    wtok_t t[3] = {{&l, 0}, {&l, 1}, {&l, 2}};
    queue(p, 5000, 0, &t[0]); /* 8 KiB class */
    queue(p, 100, 0, &t[1]);  /* 4 KiB class */
    queue(p, 8192, 1, &t[2]); /* 8 KiB class */
    cr_assert_eq(fx_slot_pool_add_grant(p, 9, 0, 2 * PG), FLUXON_OK);
    cr_assert_eq(l.n, 2);
    cr_assert_eq(l.tag[0], 0);
    cr_assert_eq(l.tag[1], 2);
    cr_assert_eq(l.ref[0].index, 0);
    cr_assert_eq(l.ref[1].index, 1);
    cr_assert_eq(stats(p).waiters, 1);
    EXPECT_STATES(p, 2, 2, 0, 0);
    fx_slot_pool_destroy(p);
}

Test(slot_pool, callbacks_may_reenter)
{
    fx_slot_pool_t *p = mk_pool(PG, 0);
    wlog_t l = {.pool = p, .release_in_cb = 0};
    wtok_t t[3] = {{&l, 0}, {&l, 1}, {&l, 2}};
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, PG), FLUXON_OK); /* 1 slot */
    fx_slot_ref_t r;
    cr_assert_eq(fx_slot_pool_claim(p, 1, &r), FLUXON_OK);
    queue(p, 1, 0, &t[0]);
    queue(p, 1, 0, &t[1]);
    uint64_t id2 = queue(p, 1, 0, &t[2]);
    /* waiter 0 releases its slot inside its callback: waiter 1 gets it in the same call,
     * after waiter 0's callback returned */
    cr_assert_eq(fx_slot_pool_release_prepared(p, &r), FLUXON_OK);
    cr_assert_eq(l.n, 2);
    cr_assert_eq(l.tag[0], 0);
    cr_assert_eq(l.tag[1], 1);
    cr_assert_eq(l.ref[1].index, 0);
    cr_assert_gt(l.ref[1].use_seq, l.ref[0].use_seq);
    cr_assert_eq(fx_slot_pool_cancel_wait(p, id2), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_cancel_wait(p, id2), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fx_slot_pool_cancel_wait(p, 12345), FLUXON_ERR_NOT_FOUND);
    fx_slot_pool_stats_t st = stats(p);
    cr_assert_eq(st.waits_cancelled, 1);
    cr_assert_eq(st.waiters, 0);
    EXPECT_STATES(p, 0, 1, 0, 0);
    fx_slot_pool_destroy(p);
}

Test(slot_pool, cancel_of_assigned_but_undelivered_waiter)
{
    fx_slot_pool_t *p = mk_pool(2 * PG, 0);
    wlog_t l = {.pool = p, .release_in_cb = -1};
    wtok_t t[3] = {{&l, 0}, {&l, 1}, {&l, 2}};
    queue(p, 1, 0, &t[0]);
    uint64_t id1 = queue(p, 1, 0, &t[1]);
    queue(p, 1, 0, &t[2]);
    l.cancel_in_cb = id1;
    /* the grant's 2 slots go to waiters 0 and 1; waiter 0's callback cancels 1, whose
     * slot then goes to waiter 2 — callback 1 never runs */
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, PG), FLUXON_OK);
    cr_assert_eq(l.cancel_rc, FLUXON_OK);
    cr_assert_eq(l.n, 2);
    cr_assert_eq(l.tag[0], 0);
    cr_assert_eq(l.tag[1], 2);
    cr_assert_eq(l.ref[1].index, 1);
    EXPECT_STATES(p, 0, 2, 0, 0);
    cr_assert_eq(stats(p).waits_served, 2);
    fx_slot_pool_destroy(p);
}

/* Runs fn with stderr captured into a temporary file; returns its text (malloc'ed). */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fseek(tmp, 0, SEEK_END);
    long n = ftell(tmp);
    if (n < 0) n = 0;
    char *buf = calloc(1, (size_t)n + 1);
    rewind(tmp);
    if (n > 0 && fread(buf, 1, (size_t)n, tmp) != (size_t)n) buf[0] = 0;
    fclose(tmp);
    return buf;
}

typedef struct expire_call {
    fx_slot_pool_t *p;
    uint64_t now, n;
} expire_call_t;

static void do_expire(void *arg)
{
    expire_call_t *e = arg;
    e->n = fx_slot_pool_expire(e->p, e->now);
}

Test(slot_pool, waiter_timeout_and_needs_grant)
{
    fx_slot_pool_t *p = mk_pool(2 * PG, 1); /* soft 10 ms, timeout 100 ms, cap 1 */
    wlog_t l = {.pool = p, .release_in_cb = -1};
    wtok_t t[3] = {{&l, 0}, {&l, 1}, {&l, 2}};
    uint64_t sz = 0;
    cr_assert_eq(fx_slot_pool_needs_grant(p, 1000, &sz), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fx_slot_pool_next_deadline(p, 1000), UINT64_MAX);
    queue(p, 1, 1000, &t[0]);
    queue(p, 5000, 1004, &t[1]);
    cr_assert_eq(fx_slot_pool_needs_grant(p, 1009, &sz), FLUXON_ERR_NOT_FOUND, "before soft wait");
    cr_assert_eq(fx_slot_pool_next_deadline(p, 1009), 1010);
    cr_assert_eq(fx_slot_pool_needs_grant(p, 1010, &sz), FLUXON_OK);
    cr_assert_eq(sz, PG, "oldest starving class first");
    cr_assert_eq(fx_slot_pool_next_deadline(p, 1010), 1014, "next soft mark");
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 0, PG), FLUXON_OK);
    cr_assert_eq(l.n, 1);
    cr_assert_eq(fx_slot_pool_needs_grant(p, 1014, &sz), FLUXON_ERR_NO_SPACE, "cap reached");
    cr_assert_eq(sz, 2 * PG);
    cr_assert_eq(fx_slot_pool_next_deadline(p, 1014), 1104);
    queue(p, 5000, 1050, &t[2]);
    cr_assert_eq(fx_slot_pool_expire(p, 1103), 0);
    expire_call_t e = {p, 1104, 0};
    char *err = capture_stderr(do_expire, &e);
    cr_assert_eq(e.n, 1);
    cr_assert_not_null(strstr(err, "stage=claim"), "log: %s", err);
    cr_assert_not_null(strstr(err, "timed out"), "log: %s", err);
    free(err);
    cr_assert_eq(l.n, 2);
    cr_assert_eq(l.tag[1], 1);
    cr_assert_eq(l.status[1], FLUXON_ERR_TIMEOUT);
    cr_assert_eq(fx_slot_pool_next_deadline(p, 1104), 1150);
    e.now = 1150;
    free(capture_stderr(do_expire, &e));
    cr_assert_eq(e.n, 1);
    cr_assert_eq(l.status[2], FLUXON_ERR_TIMEOUT);
    fx_slot_pool_stats_t st = stats(p);
    cr_assert_eq(st.waits_timed_out, 2);
    cr_assert_eq(st.waiters, 0);
    cr_assert_eq(fx_slot_pool_needs_grant(p, 5000, &sz), FLUXON_ERR_NOT_FOUND);
    CHECK(p);
    fx_slot_pool_destroy(p);
}

Test(slot_pool, destroy_cancels_waiters)
{
    fx_slot_pool_t *p = mk_pool(2 * PG, 0);
    wlog_t l = {.pool = NULL, .release_in_cb = -1};
    wtok_t t[2] = {{&l, 0}, {&l, 1}};
    fx_slot_ref_t r;
    uint64_t id;
    cr_assert_eq(fx_slot_pool_wait(p, 1, 0, wcb, &t[0], &r, &id), FLUXON_IN_PROGRESS);
    cr_assert_eq(fx_slot_pool_wait(p, 1, 0, wcb, &t[1], &r, &id), FLUXON_IN_PROGRESS);
    fx_slot_pool_destroy(p);
    cr_assert_eq(l.n, 2);
    cr_assert_eq(l.status[0], FLUXON_ERR_CANCELLED);
    cr_assert_eq(l.status[1], FLUXON_ERR_CANCELLED);
}

Test(slot_pool, stats_json)
{
    fx_slot_pool_t *p = mk_pool(4 * PG, 3);
    cr_assert_eq(fx_slot_pool_add_grant(p, 11, 0, PG), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_add_grant(p, 12, 16 * PG, 2 * PG), FLUXON_OK);
    fx_slot_ref_t r = committed_slot(p);
    cr_assert_eq(fx_slot_pool_holder_ref(p, &r), FLUXON_OK);
    size_t need = 0;
    char tiny[8];
    cr_assert_eq(fx_slot_pool_stats_json(p, tiny, sizeof tiny, &need),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_gt(need, sizeof tiny);
    char *buf = malloc(need + 1);
    size_t len = 0;
    cr_assert_eq(fx_slot_pool_stats_json(p, buf, need, &len), FLUXON_ERR_INVALID_ARGUMENT,
                 "no room for the NUL");
    cr_assert_eq(fx_slot_pool_stats_json(p, buf, need + 1, &len), FLUXON_OK);
    cr_assert_eq(len, need);
    cr_assert_eq(strlen(buf), len);
    cJSON *j = cJSON_Parse(buf);
    cr_assert_not_null(j, "not JSON: %s", buf);
    cJSON *tot = cJSON_GetObjectItem(j, "totals");
    cr_assert_eq(cJSON_GetObjectItem(tot, "grants")->valuedouble, 2);
    cr_assert_eq(cJSON_GetObjectItem(tot, "committed")->valuedouble, 1);
    cr_assert_eq(cJSON_GetObjectItem(tot, "free")->valuedouble, 5);
    cr_assert_eq(cJSON_GetObjectItem(tot, "holder_refs")->valuedouble, 1);
    cr_assert_eq(cJSON_GetObjectItem(tot, "max_grants")->valuedouble, 3);
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "counters"), "claims")->valuedouble, 1);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "classes")), 2);
    cJSON *gl = cJSON_GetObjectItem(j, "grants");
    cr_assert_eq(cJSON_GetArraySize(gl), 2);
    cJSON *g0 = cJSON_GetArrayItem(gl, 0);
    cr_assert_eq(cJSON_GetObjectItem(g0, "grant_id")->valuedouble, 11);
    cr_assert_eq(cJSON_GetObjectItem(g0, "committed")->valuedouble, 1);
    cr_assert_eq(cJSON_GetObjectItem(g0, "free")->valuedouble, 3);
    cJSON_Delete(j);
    free(buf);
    fx_slot_pool_destroy(p);
}
