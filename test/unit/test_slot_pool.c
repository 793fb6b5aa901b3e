/* test_slot_pool.c — Criterion suite for the owner's local reserve slot pool (cache/
 * slot_pool.c): §6 sizing, S2 release orders, stale refs, FIFO waiters, timeouts, caps,
 * and a 100k-op randomized walk checked against a reference model after every step. */
#include <criterion/criterion.h>
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "slot_pool.h"

#define PG 4096ull /* one page: the slot granularity */

static fx_slot_pool_t *mk_pool(uint64_t grant_bytes, uint64_t max_grants)
{
    fx_slot_pool_config_t cfg;
    fx_slot_pool_config_init(&cfg);
    cfg.grant_bytes = grant_bytes;
    cfg.max_grants = max_grants;
    cfg.soft_wait_ms = 10;
    cfg.claim_timeout_ms = 100;
    fx_slot_pool_t *p = NULL;
    cr_assert_eq(fx_slot_pool_create(&cfg, &p), FLUXON_OK);
    return p;
}

static fx_slot_pool_stats_t stats(fx_slot_pool_t *p)
{
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(p, &st);
    return st;
}

#define CHECK(p) cr_assert_eq(fx_slot_pool_check(p), FLUXON_OK)
#define EXPECT_STATES(p, f, pr, pe, co)                                                  \
    do {                                                                                 \
        fx_slot_pool_stats_t st_ = stats(p);                                             \
        cr_assert_eq(st_.free, (f), "free %lu", (unsigned long)st_.free);                \
        cr_assert_eq(st_.prepared, (pr), "prepared %lu", (unsigned long)st_.prepared);   \
        cr_assert_eq(st_.pending, (pe), "pending %lu", (unsigned long)st_.pending);      \
        cr_assert_eq(st_.committed, (co), "committed %lu", (unsigned long)st_.committed);\
        CHECK(p);                                                                        \
    } while (0)

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

/* ---- randomized walk against a reference model ----------------------------------------- */

#define RW_OPS 100000
#define RW_NCLS 4 /* slot sizes 1..4 pages; the 4-page class never gets a grant */
#define RW_MAXSLOTS 32

typedef struct rw_slot {
    int state, cls;
    bool route, aborted;
    uint32_t holders;
    uint64_t use_seq;
} rw_slot_t;

typedef struct rw_tok {
    int idx, cls, queued; /* queued: 1 while the model expects it in a class queue */
    uint64_t queued_ms, wait_id;
} rw_tok_t;

typedef struct rw_event {
    int tok, status, flat;
    uint64_t use_seq;
} rw_event_t;

static struct rw {
    fx_slot_pool_t *p;
    rw_slot_t s[RW_MAXSLOTS];
    int nslots, grant_first[5], grant_cls[5];
    int freeq[RW_NCLS][RW_MAXSLOTS * 4], fhead[RW_NCLS], ftail[RW_NCLS];
    int *waitq[RW_NCLS], whead[RW_NCLS], wtail[RW_NCLS];
    rw_tok_t *tok;
    int ntok, exp_head;
    uint64_t seq, now;
    rw_event_t want[64], got[64];
    int nwant, ngot;
    fx_slot_ref_t hist[64];
} rw;

static uint64_t rw_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(uint64_t n)
{
    rw_rng ^= rw_rng << 13, rw_rng ^= rw_rng >> 7, rw_rng ^= rw_rng << 17;
    return rw_rng % n;
}

static int rw_flat(const fx_slot_ref_t *r) { return rw.grant_first[r->grant_id] + (int)r->index; }

static void rw_cb(void *arg, int status, const fx_slot_ref_t *slot)
{
    rw_tok_t *t = arg;
    cr_assert_lt(rw.ngot, 64);
    rw.got[rw.ngot++] = (rw_event_t){t->idx, status, slot ? rw_flat(slot) : -1,
                                     slot ? slot->use_seq : 0};
}

static void rw_take(int f)
{
    rw.s[f].state = FX_SLOT_PREPARED;
    rw.s[f].use_seq = ++rw.seq;
}

static void rw_free(int f)
{
    rw_slot_t *m = &rw.s[f];
    *m = (rw_slot_t){.state = FX_SLOT_FREE, .cls = m->cls, .use_seq = m->use_seq};
    int c = m->cls;
    while (rw.whead[c] < rw.wtail[c]) {
        rw_tok_t *t = &rw.tok[rw.waitq[c][rw.whead[c]++]];
        if (!t->queued) continue; /* cancelled or expired: lazily dropped */
        t->queued = 0;
        rw_take(f);
        rw.want[rw.nwant++] = (rw_event_t){t->idx, FLUXON_OK, f, m->use_seq};
        return;
    }
    rw.freeq[c][rw.ftail[c]++ % (RW_MAXSLOTS * 4)] = f;
}

static int rw_pop_free(int c)
{
    if (rw.fhead[c] == rw.ftail[c]) return -1;
    return rw.freeq[c][rw.fhead[c]++ % (RW_MAXSLOTS * 4)];
}

static fx_slot_ref_t rw_ref(int f)
{
    int g = 1;
    while (g < 4 && rw.grant_first[g + 1] <= f) g++;
    uint64_t sz = (uint64_t)(rw.grant_cls[g] + 1) * PG;
    uint32_t idx = (uint32_t)(f - rw.grant_first[g]);
    return (fx_slot_ref_t){.grant_id = (uint64_t)g, .offset = (uint64_t)(g - 1) * 8 * PG + idx * sz,
                           .slot_size = sz, .use_seq = rw.s[f].use_seq, .index = idx};
}

static void rw_verify(void)
{
    cr_assert_eq(rw.ngot, rw.nwant, "deliveries: got %d want %d", rw.ngot, rw.nwant);
    for (int i = 0; i < rw.ngot; i++) {
        cr_assert_eq(rw.got[i].tok, rw.want[i].tok);
        cr_assert_eq(rw.got[i].status, rw.want[i].status);
        cr_assert_eq(rw.got[i].flat, rw.want[i].flat);
        cr_assert_eq(rw.got[i].use_seq, rw.want[i].use_seq);
    }
    rw.ngot = rw.nwant = 0;
    uint64_t n[FX_SLOT_NSTATES] = {0}, holders = 0, draining = 0, waiters = 0;
    for (int f = 0; f < rw.nslots; f++) {
        n[rw.s[f].state]++;
        holders += rw.s[f].holders;
        draining += (rw.s[f].state == FX_SLOT_COMMITTED && !rw.s[f].route) || rw.s[f].aborted;
    }
    for (int i = 0; i < rw.ntok; i++) waiters += rw.tok[i].queued;
    fx_slot_pool_stats_t st = stats(rw.p);
    cr_assert_eq(st.free, n[FX_SLOT_FREE]);
    cr_assert_eq(st.prepared, n[FX_SLOT_PREPARED]);
    cr_assert_eq(st.pending, n[FX_SLOT_PENDING]);
    cr_assert_eq(st.committed, n[FX_SLOT_COMMITTED]);
    cr_assert_eq(st.holder_refs, holders);
    cr_assert_eq(st.draining, draining);
    cr_assert_eq(st.waiters, waiters);
    CHECK(rw.p);
}

static int rw_expected(int op, int f, const fx_slot_ref_t *r)
{
    rw_slot_t *m = &rw.s[f];
    if (r->use_seq != m->use_seq || m->state == FX_SLOT_FREE) return FLUXON_ERR_STALE;
    switch (op) {
    case 0:
        if (m->state != FX_SLOT_PREPARED) return FLUXON_ERR_WRONG_HANDLE;
        m->state = FX_SLOT_PENDING;
        return FLUXON_OK;
    case 1:
        if (m->state != FX_SLOT_PENDING || m->aborted) return FLUXON_ERR_WRONG_HANDLE;
        m->state = FX_SLOT_COMMITTED;
        m->route = true;
        return FLUXON_OK;
    case 2:
        if (m->state != FX_SLOT_COMMITTED || !m->route) return FLUXON_ERR_WRONG_HANDLE;
        m->route = false;
        if (!m->holders) rw_free(f);
        return FLUXON_OK;
    case 3:
        if (m->state == FX_SLOT_PREPARED) {
            rw_free(f);
        } else if (m->state == FX_SLOT_PENDING && !m->aborted) {
            m->aborted = true;
            if (!m->holders) rw_free(f);
        } else {
            return FLUXON_ERR_WRONG_HANDLE;
        }
        return FLUXON_OK;
    case 4:
        if (m->state == FX_SLOT_PREPARED || m->aborted) return FLUXON_ERR_WRONG_HANDLE;
        if (m->state == FX_SLOT_COMMITTED && !m->route) return FLUXON_ERR_STALE;
        m->holders++;
        return FLUXON_OK;
    default:
        if (!m->holders) return FLUXON_ERR_WRONG_HANDLE;
        if (--m->holders == 0 && ((m->state == FX_SLOT_COMMITTED && !m->route) || m->aborted))
            rw_free(f);
        return FLUXON_OK;
    }
}

static int rw_call(int op, const fx_slot_ref_t *r)
{
    switch (op) {
    case 0: return fx_slot_pool_mark_pending(rw.p, r);
    case 1: return fx_slot_pool_mark_committed(rw.p, r);
    case 2: return fx_slot_pool_route_dead(rw.p, r);
    case 3: return fx_slot_pool_release_prepared(rw.p, r);
    case 4: return fx_slot_pool_holder_ref(rw.p, r);
    default: return fx_slot_pool_holder_unref(rw.p, r);
    }
}

static void rw_expire_model(uint64_t now)
{
    for (int i = rw.exp_head; i < rw.ntok; i++) {
        rw_tok_t *t = &rw.tok[i];
        if (!t->queued) {
            if (i == rw.exp_head) rw.exp_head++;
            continue;
        }
        if (t->queued_ms + 100 > now) break;
        t->queued = 0;
        rw.want[rw.nwant++] = (rw_event_t){t->idx, FLUXON_ERR_TIMEOUT, -1, 0};
    }
}

Test(slot_pool, randomized_walk_100k, .timeout = 120)
{
    fx_log_set_level(FX_LOG_ERROR); /* expiries are expected here; keep the output short */
    memset(&rw, 0, sizeof rw);
    rw.p = mk_pool(8 * PG, 0); /* soft 10 ms, timeout 100 ms */
    rw.tok = calloc(RW_OPS, sizeof *rw.tok);
    for (int c = 0; c < RW_NCLS; c++) rw.waitq[c] = calloc(RW_OPS, sizeof(int));
    const int gcls[5] = {0, 0, 0, 1, 2}; /* grants 1,2: 1 page; 3: 2 pages; 4: 3 pages */
    for (int g = 1; g <= 4; g++) {
        int per = 8 / (gcls[g] + 1);
        rw.grant_first[g] = rw.nslots;
        rw.grant_cls[g] = gcls[g];
        for (int i = 0; i < per; i++) {
            rw.s[rw.nslots].cls = gcls[g];
            rw.freeq[gcls[g]][rw.ftail[gcls[g]]++] = rw.nslots;
            rw.nslots++;
        }
        cr_assert_eq(fx_slot_pool_add_grant(rw.p, (uint64_t)g, (uint64_t)(g - 1) * 8 * PG,
                                            (uint64_t)(gcls[g] + 1) * PG), FLUXON_OK);
    }
    rw_verify();
    const uint64_t lens[] = {1, 4096, 4097, 8192, 9000, 12288, 16384};
    uint64_t served = 0, timeouts = 0, stale = 0;
    for (int step = 0; step < RW_OPS; step++) {
        rw.now += rnd(3);
        uint64_t k = rnd(100);
        if (k < 15 || (k < 22 && rw.ntok < RW_OPS)) {
            uint64_t len = lens[rnd(FX_ARRAY_LEN(lens))];
            int c = (int)((fx_slot_size_for(len) / PG) - 1);
            fx_slot_ref_t r = {0};
            uint64_t id = 0;
            int f = rw_pop_free(c), rc;
            if (k < 15) {
                rc = fx_slot_pool_claim(rw.p, len, &r);
                cr_assert_eq(rc, f < 0 ? FLUXON_ERR_NO_SPACE : FLUXON_OK);
            } else {
                rw_tok_t *t = &rw.tok[rw.ntok];
                *t = (rw_tok_t){.idx = rw.ntok, .cls = c};
                rc = fx_slot_pool_wait(rw.p, len, rw.now, rw_cb, t, &r, &id);
                cr_assert_eq(rc, f < 0 ? FLUXON_IN_PROGRESS : FLUXON_OK);
                if (rc == FLUXON_IN_PROGRESS) {
                    *t = (rw_tok_t){rw.ntok, c, 1, rw.now, id};
                    rw.waitq[c][rw.wtail[c]++] = rw.ntok;
                }
                rw.ntok++;
            }
            if (f >= 0) {
                rw_take(f);
                cr_assert_eq(rw_flat(&r), f, "not the oldest free slot of the class");
                cr_assert_eq(r.use_seq, rw.s[f].use_seq);
                rw.hist[rnd(64)] = r;
            }
        } else if (k < 25) {
            if (!rw.ntok) continue;
            rw_tok_t *t = &rw.tok[rw.ntok - 1 - (int)rnd((uint64_t)FX_MIN(rw.ntok, 50))];
            int rc = fx_slot_pool_cancel_wait(rw.p, t->wait_id);
            cr_assert_eq(rc, t->queued ? FLUXON_OK : FLUXON_ERR_NOT_FOUND);
            t->queued = 0;
        } else if (k < 28) {
            rw_expire_model(rw.now);
            timeouts += (uint64_t)rw.nwant;
            cr_assert_eq(fx_slot_pool_expire(rw.p, rw.now), (uint64_t)rw.nwant);
        } else if (k < 30) {
            uint64_t best = UINT64_MAX, sz = 0;
            for (int c = 0; c < RW_NCLS; c++)
                for (int i = rw.whead[c]; i < rw.wtail[c]; i++) {
                    rw_tok_t *t = &rw.tok[rw.waitq[c][i]];
                    if (!t->queued) continue;
                    if (rw.now - t->queued_ms >= 10 && t->queued_ms < best) best = t->queued_ms;
                    break; /* only the class's oldest waiter matters */
                }
            int rc = fx_slot_pool_needs_grant(rw.p, rw.now, &sz);
            cr_assert_eq(rc, best == UINT64_MAX ? FLUXON_ERR_NOT_FOUND : FLUXON_OK);
            if (rc == FLUXON_OK) {
                int c = (int)(sz / PG) - 1, i = rw.whead[c];
                while (!rw.tok[rw.waitq[c][i]].queued) i++;
                cr_assert_eq(rw.tok[rw.waitq[c][i]].queued_ms, best);
            }
        } else {
            fx_slot_ref_t r;
            if (rnd(100) < 85) {
                int f = (int)rnd((uint64_t)rw.nslots);
                if (!rw.s[f].use_seq) continue;
                r = rw_ref(f);
            } else {
                r = rw.hist[rnd(64)];
                if (!r.use_seq) continue;
            }
            static const int weights[6] = {20, 20, 12, 13, 18, 17};
            int op = 0;
            for (int w = (int)rnd(100); w >= weights[op]; op++) w -= weights[op];
            int f = rw_flat(&r);
            int want = rw_expected(op, f, &r);
            int got = rw_call(op, &r);
            cr_assert_eq(got, want, "step %d op %d slot %d: got %d want %d", step, op, f, got,
                         want);
            stale += got == FLUXON_ERR_STALE;
        }
        for (int i = 0; i < rw.nwant; i++) served += rw.want[i].status == FLUXON_OK;
        rw_verify();
    }
    /* R1: with the workload over, everything returns to baseline */
    rw.now += 1000;
    rw_expire_model(rw.now);
    cr_assert_eq(fx_slot_pool_expire(rw.p, rw.now), (uint64_t)rw.nwant);
    rw_verify();
    for (int f = 0; f < rw.nslots; f++) {
        fx_slot_ref_t r = rw_ref(f);
        rw_slot_t *m = &rw.s[f];
        if (m->state == FX_SLOT_PREPARED || (m->state == FX_SLOT_PENDING && !m->aborted))
            cr_assert_eq(rw_call(3, &r), rw_expected(3, f, &r));
        if (m->state == FX_SLOT_COMMITTED && m->route)
            cr_assert_eq(rw_call(2, &r), rw_expected(2, f, &r));
        while (m->holders) cr_assert_eq(rw_call(5, &r), rw_expected(5, f, &r));
        cr_assert_eq(m->state, FX_SLOT_FREE, "slot %d not drained", f);
    }
    rw_verify();
    fx_slot_pool_stats_t st = stats(rw.p);
    cr_assert_eq(st.free, (uint64_t)rw.nslots);
    cr_assert_eq(st.holder_refs + st.draining + st.waiters + st.used_bytes, 0);
    cr_assert_gt(served, 100, "too few waiters served: %lu", (unsigned long)served);
    cr_assert_gt(timeouts, 100, "too few timeouts: %lu", (unsigned long)timeouts);
    cr_assert_gt(stale, 1000, "too few stale refs: %lu", (unsigned long)stale);
    cr_assert_gt(st.frees, 4000, "too few frees: %lu", (unsigned long)st.frees);
    cr_log_info("walk: %lu frees, %lu waiters served, %lu timeouts, %lu stale refs",
                (unsigned long)st.frees, (unsigned long)served, (unsigned long)timeouts,
                (unsigned long)stale);
    fx_slot_pool_destroy(rw.p);
    for (int c = 0; c < RW_NCLS; c++) free(rw.waitq[c]);
    free(rw.tok);
}
