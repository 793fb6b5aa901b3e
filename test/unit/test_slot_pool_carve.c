/* test_slot_pool_carve.c — the slot pool's pieces for issue 15: grants smaller than
 * grant_bytes (sub-grants carved from a master grant) and retiring grants (their free
 * slots serve no claim, so they empty for re-carving), with the invariant check after
 * every step. */
#include <criterion/criterion.h>

#include "slot_pool.h"

static fx_slot_pool_t *mk(uint64_t grant_bytes)
{
    fx_slot_pool_config_t cfg;
    fx_slot_pool_config_init(&cfg);
    cfg.grant_bytes = grant_bytes;
    fx_slot_pool_t *p = NULL;
    cr_assert_eq(fx_slot_pool_create(&cfg, &p), FLUXON_OK);
    return p;
}

Test(slot_pool_carve, sized_grants_tile_a_master_grant)
{
    fx_slot_pool_t *p = mk(16 * 4096);
    cr_assert_eq(fx_slot_pool_add_grant_sized(p, 1, 4096, 4 * 4096, 4096), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_add_grant_sized(p, 2, 5 * 4096, 8 * 4096, 8192), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_add_grant_sized(p, 3, 8 * 4096, 4 * 4096, 4096), FLUXON_ERR_INVALID_ARGUMENT,
                 "overlaps grant 2");
    cr_assert_eq(fx_slot_pool_add_grant_sized(p, 3, 13 * 4096, 32 * 4096, 4096), FLUXON_ERR_INVALID_ARGUMENT,
                 "larger than grant_bytes");
    cr_assert_eq(fx_slot_pool_add_grant_sized(p, 3, 13 * 4096, 4096, 8192), FLUXON_ERR_INVALID_ARGUMENT,
                 "smaller than its slot");
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(p, &st);
    cr_assert_eq(st.grants, 2);
    cr_assert_eq(st.slots, 8);
    cr_assert_eq(st.granted_bytes, 12 * 4096);
    fx_slot_grant_stats_t g;
    cr_assert_eq(fx_slot_pool_grant_stats(p, 2, &g), FLUXON_OK);
    cr_assert_eq(g.bytes, 8 * 4096);
    cr_assert_eq(g.slots, 4);
    fx_slot_ref_t r;
    cr_assert_eq(fx_slot_pool_claim(p, 5000, &r), FLUXON_OK);
    cr_assert_eq(r.grant_id, 2);
    cr_assert_eq(fx_slot_pool_check(p), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &r), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_remove_grant(p, 2), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_add_grant_sized(p, 4, 5 * 4096, 8 * 4096, 4096), FLUXON_OK, "re-carved");
    fx_slot_pool_stats(p, &st);
    cr_assert_eq(st.granted_bytes, 12 * 4096);
    cr_assert_eq(fx_slot_pool_check(p), FLUXON_OK);
    fx_slot_pool_destroy(p);
}

Test(slot_pool_carve, a_retiring_grant_serves_no_claim_and_empties)
{
    fx_slot_pool_t *p = mk(4 * 4096);
    cr_assert_eq(fx_slot_pool_add_grant(p, 1, 4096, 4096), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_add_grant(p, 2, 5 * 4096, 4096), FLUXON_OK);
    fx_slot_ref_t a, b;
    cr_assert_eq(fx_slot_pool_claim(p, 4096, &a), FLUXON_OK);
    cr_assert_eq(a.grant_id, 1);
    cr_assert_eq(fx_slot_pool_retire_grant(p, 1, true), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_retire_grant(p, 1, true), FLUXON_OK, "idempotent");
    cr_assert_eq(fx_slot_pool_check(p), FLUXON_OK);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(fx_slot_pool_claim(p, 4096, &b), FLUXON_OK);
        cr_assert_eq(b.grant_id, 2, "never from the retiring grant");
    }
    cr_assert_eq(fx_slot_pool_claim(p, 4096, &b), FLUXON_ERR_NO_SPACE);
    cr_assert_eq(fx_slot_pool_remove_grant(p, 1), FLUXON_ERR_BUSY, "a slot still in use");
    cr_assert_eq(fx_slot_pool_release_prepared(p, &a), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_claim(p, 4096, &b), FLUXON_ERR_NO_SPACE, "its freed slot stays off the free list");
    fx_slot_grant_stats_t g;
    cr_assert_eq(fx_slot_pool_grant_stats(p, 1, &g), FLUXON_OK);
    cr_assert(g.retiring);
    cr_assert_eq(g.free, g.slots, "empty");
    cr_assert_eq(fx_slot_pool_check(p), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_retire_grant(p, 1, false), FLUXON_OK, "back in service");
    cr_assert_eq(fx_slot_pool_claim(p, 4096, &b), FLUXON_OK);
    cr_assert_eq(b.grant_id, 1);
    cr_assert_eq(fx_slot_pool_retire_grant(p, 1, true), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_release_prepared(p, &b), FLUXON_OK);
    cr_assert_eq(fx_slot_pool_remove_grant(p, 1), FLUXON_OK, "an idle retiring grant goes");
    cr_assert_eq(fx_slot_pool_check(p), FLUXON_OK);
    fx_slot_pool_destroy(p);
}
