/* test_lease_table.c — Criterion suite for the master's lease table (master/lease_table.c,
 * issue 44 P5): an expired lease hands its recorded route keys to the caller (so its expiry
 * visits its own routes, not the whole route table), a key recorded again and again is
 * compacted to the routes still bound, unbinds only count, live leases are left alone. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "mkv.h"

typedef struct got {
    uint64_t id;
    size_t n_keys;
    bool complete;
    char first[64];
    int calls;
} got_t;

static void on_expired(void *arg, uint64_t id, const uint8_t *keys, size_t n_keys, bool complete)
{
    got_t *g = arg;
    g->calls++;
    g->id = id;
    g->n_keys = n_keys;
    g->complete = complete;
    uint32_t kl;
    memcpy(&kl, keys, 4);
    snprintf(g->first, sizeof g->first, "%.*s", (int)kl, (const char *)keys + 4);
}

/* the "route table" of the test: key "k<i>" is bound to lease bound_to[i] */
static uint64_t bound_to[4096];
static bool keep(void *arg, uint64_t id, const char *key, size_t klen)
{
    (void)arg;
    int i = atoi(key + 1);
    (void)klen;
    return i >= 0 && i < 4096 && bound_to[i] == id;
}

Test(lease_table, an_expired_lease_hands_back_its_keys)
{
    fx_lease_table_t *t = NULL;
    cr_assert_eq(fx_lease_table_create(&t), FLUXON_OK);
    uint64_t a = 0, b = 0;
    cr_assert_eq(fx_lease_grant(t, 100, &a), FLUXON_OK);
    cr_assert_eq(fx_lease_grant(t, 1000, &b), FLUXON_OK);
    cr_assert_eq(fx_lease_bind(t, a, +1, "k1", 2, keep, NULL), FLUXON_OK);
    cr_assert_eq(fx_lease_bind(t, a, +1, "k2", 2, keep, NULL), FLUXON_OK);
    cr_assert_eq(fx_lease_bind(t, b, +1, "k3", 2, keep, NULL), FLUXON_OK);
    got_t g = {0};
    cr_assert_eq(fx_lease_expire(t, 50, on_expired, &g), 0, "nothing expired at 50");
    cr_assert_eq(g.calls, 0);
    cr_assert_eq(fx_lease_expire(t, 100, on_expired, &g), 1);
    cr_assert_eq(g.calls, 1);
    cr_assert_eq(g.id, a);
    cr_assert_eq(g.n_keys, 2);
    cr_assert(g.complete);
    cr_assert_str_eq(g.first, "k1");
    cr_assert(!fx_lease_exists(t, a));
    cr_assert(fx_lease_live(t, b, 100));
    fx_lease_table_destroy(t);
}

Test(lease_table, a_lease_without_routes_expires_silently)
{
    fx_lease_table_t *t = NULL;
    cr_assert_eq(fx_lease_table_create(&t), FLUXON_OK);
    uint64_t a = 0;
    cr_assert_eq(fx_lease_grant(t, 10, &a), FLUXON_OK);
    cr_assert_eq(fx_lease_bind(t, a, +1, "k1", 2, keep, NULL), FLUXON_OK);
    cr_assert_eq(fx_lease_bind(t, a, -1, NULL, 0, NULL, NULL), FLUXON_OK); /* its route went */
    got_t g = {0};
    cr_assert_eq(fx_lease_expire(t, 10, on_expired, &g), 1);
    cr_assert_eq(g.calls, 0, "no route bound: nothing to visit");
    fx_lease_table_destroy(t);
}

Test(lease_table, keys_bound_again_and_again_are_compacted_to_the_bound_ones)
{
    fx_lease_table_t *t = NULL;
    cr_assert_eq(fx_lease_table_create(&t), FLUXON_OK);
    uint64_t a = 0;
    cr_assert_eq(fx_lease_grant(t, 10, &a), FLUXON_OK);
    memset(bound_to, 0, sizeof bound_to);
    char k[16];
    /* 10 live routes, each replaced 1,000 times under the same lease (its old route unbound) */
    for (int round = 0; round < 1000; round++)
        for (int i = 0; i < 10; i++) {
            snprintf(k, sizeof k, "k%d", i);
            if (round) cr_assert_eq(fx_lease_bind(t, a, -1, NULL, 0, NULL, NULL), FLUXON_OK);
            bound_to[i] = a;
            cr_assert_eq(fx_lease_bind(t, a, +1, k, strlen(k), keep, NULL), FLUXON_OK);
        }
    got_t g = {0};
    cr_assert_eq(fx_lease_expire(t, 10, on_expired, &g), 1);
    cr_assert_eq(g.calls, 1);
    cr_assert_leq(g.n_keys, 2 * 10 + 64 + 1, "recorded keys stay bounded by the routes bound: %zu", g.n_keys);
    cr_assert_geq(g.n_keys, 10, "every bound route is among them");
    fx_lease_table_destroy(t);
}
