/* test_evict_policy.c — cache/evict_policy.c (issue 15): the structure stays consistent
 * under random operations for every policy; lru evicts least recent first; s3fifo evicts
 * a new object that was never hit before one that was, admits a ghost straight to main,
 * and its victim search is bounded; a ghost given later keeps the queues; hold/put_back
 * restores the order; byte weights sum. */
#include <criterion/criterion.h>

#include "config.h"
#include "evict_policy.h"

typedef struct obj {
    fx_evp_node_t n;
    int id;
} obj_t;

Test(evict_policy, lru_evicts_least_recent_first)
{
    fx_evp_t p;
    fx_evp_init(&p, FX_EVICT_LRU, 4, NULL, 0);
    obj_t o[4] = {{.id = 0}, {.id = 1}, {.id = 2}, {.id = 3}};
    for (int i = 0; i < 4; i++) fx_evp_insert(&p, &o[i].n, 1, (uint64_t)i);
    fx_evp_touch(&p, &o[0].n);
    cr_assert_eq(fx_evp_victim(&p), &o[1].n);
    fx_evp_evicted(&p, &o[1].n);
    cr_assert_eq(fx_evp_victim(&p), &o[2].n);
    cr_assert_eq(p.count, 3);
    cr_assert_eq(p.bytes, 3);
    cr_assert_eq(fx_evp_check(&p), FLUXON_OK);
}

Test(evict_policy, s3fifo_keeps_a_hit_object_and_admits_ghosts_to_main)
{
    enum { N = 10 };
    uint64_t ghost[64] = {0};
    cr_assert_leq(fx_evp_ghost_words(N), 64);
    fx_evp_t p;
    fx_evp_init(&p, FX_EVICT_S3FIFO, N, ghost, N);
    obj_t o[N + 2] = {0};
    for (int i = 0; i < N; i++) fx_evp_insert(&p, &o[i].n, 1, (uint64_t)i);
    fx_evp_touch(&p, &o[0].n); /* the oldest, but hit on probation */
    fx_evp_node_t *v = fx_evp_victim(&p);
    cr_assert_eq(v, &o[1].n, "the oldest never-hit object goes; the hit one moved to main");
    cr_assert_eq(o[0].n.queue, FX_EVP_Q_MAIN);
    fx_evp_evicted(&p, v);
    fx_evp_insert(&p, &o[N].n, 1, 1); /* key 1 again: remembered by the ghost */
    cr_assert_eq(o[N].n.queue, FX_EVP_Q_MAIN, "a ghost is admitted to main");
    cr_assert_eq(p.ghost_hits, 1);
    fx_evp_insert(&p, &o[N + 1].n, 1, 99);
    cr_assert_eq(o[N + 1].n.queue, FX_EVP_Q_SMALL, "a new key starts on probation");
    cr_assert_eq(fx_evp_check(&p), FLUXON_OK);
}

/* issue 42: a tenant's own policy gets a ghost after its values moved in (and a new one
 * when its quota changes): the queues stay, the old ghost's keys are forgotten */
Test(evict_policy, a_ghost_given_later_keeps_the_queues_and_forgets_old_keys)
{
    enum { N = 10 };
    uint64_t g1[64] = {0}, g2[64] = {0};
    fx_evp_t p;
    fx_evp_init(&p, FX_EVICT_S3FIFO, N, NULL, 0);
    obj_t o[N + 3] = {0};
    for (int i = 0; i < N; i++) fx_evp_insert(&p, &o[i].n, 1, (uint64_t)i);
    fx_evp_evicted(&p, fx_evp_victim(&p)); /* key 0: no ghost to remember it */
    fx_evp_insert(&p, &o[N].n, 1, 0);
    cr_assert_eq(o[N].n.queue, FX_EVP_Q_SMALL, "without a ghost an evicted key starts on probation again");
    fx_evp_set_ghost(&p, g1, N);
    cr_assert_eq(p.count, N, "the queues are kept");
    cr_assert_eq(fx_evp_check(&p), FLUXON_OK);
    fx_evp_node_t *v = fx_evp_victim(&p);
    uint64_t key = v->key;
    fx_evp_evicted(&p, v);
    fx_evp_insert(&p, &o[N + 1].n, 1, key);
    cr_assert_eq(o[N + 1].n.queue, FX_EVP_Q_MAIN, "the ghost given later admits its key to main");
    cr_assert_eq(p.ghost_hits, 1);
    v = fx_evp_victim(&p);
    key = v->key;
    fx_evp_evicted(&p, v); /* remembered by g1 */
    fx_evp_set_ghost(&p, g2, N);
    cr_assert_eq(p.ghost_n, 0);
    fx_evp_insert(&p, &o[N + 2].n, 1, key);
    cr_assert_eq(o[N + 2].n.queue, FX_EVP_Q_SMALL, "a new ghost forgets the old one's keys");
    cr_assert_eq(fx_evp_check(&p), FLUXON_OK);
}

Test(evict_policy, hold_and_put_back_restore_the_order)
{
    fx_evp_t p;
    fx_evp_init(&p, FX_EVICT_LRU, 8, NULL, 0);
    obj_t o[5] = {0};
    for (int i = 0; i < 5; i++) fx_evp_insert(&p, &o[i].n, 1, (uint64_t)i);
    fx_evp_node_t *a = fx_evp_victim(&p);
    fx_evp_hold(&p, a);
    fx_evp_node_t *b = fx_evp_victim(&p);
    fx_evp_hold(&p, b);
    cr_assert_eq(a, &o[0].n);
    cr_assert_eq(b, &o[1].n);
    cr_assert_eq(fx_evp_victim(&p), &o[2].n);
    fx_evp_put_back(&p, b);
    fx_evp_put_back(&p, a);
    cr_assert_eq(fx_evp_victim(&p), &o[0].n, "the order is back");
    cr_assert_eq(fx_evp_check(&p), FLUXON_OK);
}

/* random insert/touch/remove/evict/hold with byte weights, every policy: the check passes,
 * bytes add up, each victim search returns a linked node */
Test(evict_policy, random_operations_keep_every_policy_consistent)
{
    enum { N = 2000, OPS = 200000 };
    static obj_t o[N];
    static uint64_t ghost[8192];
    int kinds[] = {FX_EVICT_LRU, FX_EVICT_S3FIFO, FX_EVICT_SLRU};
    for (int k = 0; k < 3; k++) {
        memset(o, 0, sizeof o);
        memset(ghost, 0, sizeof ghost);
        fx_evp_t p;
        cr_assert_leq(fx_evp_ghost_words(1000), 8192);
        fx_evp_init(&p, kinds[k], 400 * 4096, ghost, 1000);
        uint64_t rng = 88172645463325252ull, bytes = 0;
        for (int op = 0; op < OPS; op++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            obj_t *x = &o[rng % N];
            uint64_t w = 4096 * (1 + (rng >> 20) % 4);
            switch ((rng >> 40) % 5) {
            case 0:
            case 1:
                if (!fx_evp_linked(&x->n)) {
                    fx_evp_insert(&p, &x->n, w, rng % N);
                    bytes += w;
                } else {
                    fx_evp_touch(&p, &x->n);
                }
                break;
            case 2:
                if (fx_evp_linked(&x->n)) bytes -= x->n.weight;
                fx_evp_remove(&p, &x->n);
                break;
            default:
                while (p.bytes > p.capacity) {
                    fx_evp_node_t *v = fx_evp_victim(&p);
                    cr_assert_not_null(v);
                    cr_assert(fx_evp_linked(v));
                    bytes -= v->weight;
                    fx_evp_evicted(&p, v);
                }
            }
            cr_assert_eq(p.bytes, bytes);
            if (op % 10000 == 0) cr_assert_eq(fx_evp_check(&p), FLUXON_OK, "%s op %d", fx_evp_kind_name(kinds[k]), op);
        }
        cr_assert_eq(fx_evp_check(&p), FLUXON_OK);
    }
}
