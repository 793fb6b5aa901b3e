/* test_lru.c — Criterion suite for the intrusive byte-weighted LRU (cache/lru.c): basic
 * order, touch/remove/insert_cold, weights, and a randomized differential test against a
 * reference model (an array ordered coldest first). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "lru.h"

typedef struct item {
    fx_lru_node_t node;
    int id;
} item_t;

static int id_of(const fx_lru_node_t *n) { return FX_CONTAINER_OF(n, item_t, node)->id; }

/* writes the ids coldest first into out; returns the count */
static int order(const fx_lru_t *l, int *out, int cap)
{
    int k = 0;
    for (fx_lru_node_t *n = fx_lru_coldest(l); n && k < cap; n = fx_lru_warmer(l, n)) out[k++] = id_of(n);
    return k;
}

Test(lru, basic_order_touch_remove)
{
    fx_lru_t l;
    fx_lru_init(&l);
    cr_assert_null(fx_lru_coldest(&l));
    item_t it[5];
    for (int i = 0; i < 5; i++) {
        it[i].id = i;
        fx_lru_node_init(&it[i].node);
        cr_assert(!fx_lru_linked(&it[i].node));
        fx_lru_insert(&l, &it[i].node, 4096u * (i + 1));
    }
    cr_assert_eq(l.count, 5);
    cr_assert_eq(l.bytes, 4096u * 15);
    int o[8];
    cr_assert_eq(order(&l, o, 8), 5);
    for (int i = 0; i < 5; i++) cr_assert_eq(o[i], i);
    fx_lru_touch(&l, &it[0].node); /* 1 2 3 4 0 */
    fx_lru_remove(&l, &it[2].node); /* 1 3 4 0 */
    fx_lru_remove(&l, &it[2].node); /* no-op */
    fx_lru_touch(&l, &it[2].node);  /* no-op: not linked */
    fx_lru_insert_cold(&l, &it[2].node, 1); /* 2 1 3 4 0 */
    int want[] = {2, 1, 3, 4, 0};
    cr_assert_eq(order(&l, o, 8), 5);
    for (int i = 0; i < 5; i++) cr_assert_eq(o[i], want[i], "position %d", i);
    cr_assert_eq(l.bytes, 4096u * 12 + 1);
    cr_assert_eq(fx_lru_check(&l), FLUXON_OK);
    for (int i = 0; i < 5; i++) fx_lru_remove(&l, &it[i].node);
    cr_assert_eq(l.count, 0);
    cr_assert_eq(l.bytes, 0);
    cr_assert_null(fx_lru_coldest(&l));
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* reference: ids coldest first */
static int ref[512], nref;
static void ref_del(int id)
{
    for (int i = 0; i < nref; i++)
        if (ref[i] == id) {
            memmove(&ref[i], &ref[i + 1], (size_t)(nref - i - 1) * sizeof ref[0]);
            nref--;
            return;
        }
}
static int ref_has(int id)
{
    for (int i = 0; i < nref; i++)
        if (ref[i] == id) return 1;
    return 0;
}

Test(lru, order_matches_a_reference_model)
{
    enum { N = 512 };
    static item_t it[N];
    static uint64_t w[N];
    fx_lru_t l;
    fx_lru_init(&l);
    for (int i = 0; i < N; i++) {
        it[i].id = i;
        fx_lru_node_init(&it[i].node);
    }
    nref = 0;
    uint64_t s = 42, bytes = 0;
    for (int step = 0; step < 200000; step++) {
        int id = (int)(rnd(&s) % N), op = (int)(rnd(&s) % 5);
        uint64_t wt = 4096 * (1 + rnd(&s) % 8);
        switch (op) {
        case 0: /* insert hot */
            if (ref_has(id)) bytes -= w[id];
            ref_del(id);
            ref[nref++] = id;
            w[id] = wt;
            bytes += wt;
            fx_lru_insert(&l, &it[id].node, wt);
            break;
        case 1: /* touch */
            if (ref_has(id)) {
                ref_del(id);
                ref[nref++] = id;
            }
            fx_lru_touch(&l, &it[id].node);
            break;
        case 2: /* remove */
            if (ref_has(id)) bytes -= w[id];
            ref_del(id);
            fx_lru_remove(&l, &it[id].node);
            break;
        case 3: /* insert cold */
            if (ref_has(id)) bytes -= w[id];
            ref_del(id);
            memmove(&ref[1], &ref[0], (size_t)nref * sizeof ref[0]);
            ref[0] = id;
            nref++;
            w[id] = wt;
            bytes += wt;
            fx_lru_insert_cold(&l, &it[id].node, wt);
            break;
        default: /* evict the coldest */
            if (nref) {
                fx_lru_node_t *c = fx_lru_coldest(&l);
                cr_assert_not_null(c);
                cr_assert_eq(id_of(c), ref[0], "step %d: coldest", step);
                bytes -= w[ref[0]];
                fx_lru_remove(&l, c);
                ref_del(ref[0]);
            } else {
                cr_assert_null(fx_lru_coldest(&l));
            }
        }
        cr_assert_eq(l.count, (uint64_t)nref, "step %d count", step);
        cr_assert_eq(l.bytes, bytes, "step %d bytes", step);
        if (step % 997 == 0) {
            int o[N];
            cr_assert_eq(order(&l, o, N), nref);
            for (int i = 0; i < nref; i++) cr_assert_eq(o[i], ref[i], "step %d position %d", step, i);
            cr_assert_eq(fx_lru_check(&l), FLUXON_OK);
        }
    }
}
