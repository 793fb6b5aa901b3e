/* test_u64map.c — Criterion suite for the u64-keyed map (cache/u64map.c): key 0 refused,
 * replace, delete, growth, iteration, and a differential test against a plain array over
 * keys that collide in small tables (deletions inside wrapped probe runs). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "u64map.h"

#define V(x) ((void *)(uintptr_t)(x))

Test(u64map, key_zero_is_refused_and_never_found)
{
    fx_u64map_t m = {0};
    cr_assert_null(fx_u64map_get(&m, 0), "an empty map finds nothing");
    cr_assert_null(fx_u64map_get(&m, 5));
    void *old = V(1);
    cr_assert_eq(fx_u64map_put(&m, 0, V(9), &old), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_null(old);
    cr_assert_eq(fx_u64map_count(&m), 0);
    cr_assert_eq(fx_u64map_del(&m, 0, NULL), FLUXON_ERR_NOT_FOUND);
    fx_u64map_prefetch(&m, 3); /* no slots yet: a no-op */
    fx_u64map_free(&m);
}

Test(u64map, put_replace_get_delete)
{
    fx_u64map_t m = {0};
    void *old = V(1);
    cr_assert_eq(fx_u64map_put(&m, 7, V(70), &old), FLUXON_OK);
    cr_assert_null(old, "new key: no previous value");
    cr_assert_eq(fx_u64map_put(&m, 7, V(71), &old), FLUXON_OK);
    cr_assert_eq(old, V(70), "replaced");
    cr_assert_eq(fx_u64map_count(&m), 1);
    cr_assert_eq(fx_u64map_get(&m, 7), V(71));
    cr_assert_eq(fx_u64map_put(&m, UINT64_MAX, V(2), NULL), FLUXON_OK);
    cr_assert_eq(fx_u64map_get(&m, UINT64_MAX), V(2));
    void *v = NULL;
    cr_assert_eq(fx_u64map_del(&m, 7, &v), FLUXON_OK);
    cr_assert_eq(v, V(71));
    cr_assert_eq(fx_u64map_del(&m, 7, &v), FLUXON_ERR_NOT_FOUND);
    cr_assert_null(fx_u64map_get(&m, 7));
    cr_assert_eq(fx_u64map_count(&m), 1);
    fx_u64map_free(&m);
    cr_assert_eq(fx_u64map_count(&m), 0);
    cr_assert_null(fx_u64map_get(&m, UINT64_MAX), "usable again after free");
}

Test(u64map, reserve_then_fill_without_growth_and_iterate_every_key_once)
{
    fx_u64map_t m = {0};
    cr_assert_eq(fx_u64map_reserve(&m, 1000), FLUXON_OK);
    size_t cap = m.cap;
    cr_assert_geq(cap * 3, 1000 * 4);
    for (uint64_t k = 1; k <= 1000; k++) cr_assert_eq(fx_u64map_put(&m, k * 4096, V(k), NULL), FLUXON_OK);
    cr_assert_eq(m.cap, cap, "1000 keys fit the reservation");
    static unsigned char seen[1001];
    size_t it = 0, n = 0;
    uint64_t k;
    void *v;
    while (fx_u64map_next(&m, &it, &k, &v)) {
        cr_assert_eq(k % 4096, 0);
        cr_assert_eq((uint64_t)(uintptr_t)v, k / 4096);
        cr_assert_eq(seen[k / 4096]++, 0, "key %llu twice", (unsigned long long)k);
        n++;
    }
    cr_assert_eq(n, 1000);
    fx_u64map_free(&m);
}

/* 400k random operations over 3000 keys against an array; small tables at first, so
 * probe runs wrap and deletions shift entries across the end of the array. */
Test(u64map, differential_against_an_array)
{
    enum { NK = 3000 };
    static void *ref[NK + 1];
    fx_u64map_t m = {0};
    uint64_t seed = 12345;
    size_t live = 0;
    for (int op = 0; op < 400000; op++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t r = seed >> 33, key = 1 + r % NK;
        uint64_t mk = key * 0x10000; /* offsets-like keys */
        int what = (int)((r >> 20) % 3);
        if (op < 2000) what = 0;
        if (what == 0) {
            void *old = V(1);
            cr_assert_eq(fx_u64map_put(&m, mk, V(op + 1), &old), FLUXON_OK);
            cr_assert_eq(old, ref[key]);
            live += ref[key] == NULL;
            ref[key] = V(op + 1);
        } else if (what == 1) {
            void *v = V(1);
            int rc = fx_u64map_del(&m, mk, &v);
            cr_assert_eq(rc, ref[key] ? FLUXON_OK : FLUXON_ERR_NOT_FOUND);
            if (ref[key]) cr_assert_eq(v, ref[key]);
            live -= ref[key] != NULL;
            ref[key] = NULL;
        } else {
            fx_u64map_prefetch(&m, mk);
            cr_assert_eq(fx_u64map_get(&m, mk), ref[key], "op %d key %llu", op, (unsigned long long)key);
        }
        cr_assert_eq(fx_u64map_count(&m), live);
    }
    for (uint64_t k = 1; k <= NK; k++) cr_assert_eq(fx_u64map_get(&m, k * 0x10000), ref[k]);
    fx_u64map_free(&m);
}

Test(u64map, bench_runs_and_refuses_bad_arguments)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(fx_u64map_bench(f, 5000), FLUXON_OK);
    fclose(f);
    const char *what[] = {"u64map put-new ", "u64map get-hit ", "u64map get-miss", "u64map del "};
    for (int i = 0; i < 4; i++) cr_assert(strstr(buf, what[i]) != NULL, "%s missing in\n%s", what[i], buf);
    cr_assert(strstr(buf, "fx_hmap (8-byte keys)") != NULL, "the peer's figure is printed: %s", buf);
    free(buf);
    cr_assert_eq(fx_u64map_bench(NULL, 1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_u64map_bench(stdout, 0), FLUXON_ERR_INVALID_ARGUMENT);
}
