/* test_keybatch.c — Criterion suite for transport/keybatch.c: keys queued for one frame with
 * their uint64 columns, growing past their first capacities, cleared for reuse. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "keybatch.h"

Test(keybatch, keys_and_columns_grow_and_read_back)
{
    fx_keybatch_t b = {0};
    char key[64];
    for (uint64_t i = 0; i < 1000; i++) { /* past 64 entries and 1,024 key bytes, several times */
        int len = snprintf(key, sizeof key, "key-%llu", (unsigned long long)i);
        const uint64_t v[2] = {i, 1000 + i};
        cr_assert(fx_keybatch_add(&b, key, (uint32_t)len, v, 2));
    }
    cr_assert_eq(b.n, 1000);
    fx_str_t *k = calloc(b.n, sizeof *k);
    fx_keybatch_views(&b, k);
    for (uint64_t i = 0; i < 1000; i++) {
        int len = snprintf(key, sizeof key, "key-%llu", (unsigned long long)i);
        cr_assert_eq(k[i].len, (uint32_t)len);
        cr_assert_eq(memcmp(k[i].p, key, (size_t)len), 0, "key %llu", (unsigned long long)i);
        cr_assert_eq(b.col[0][i], i);
        cr_assert_eq(b.col[1][i], 1000 + i);
        cr_assert_eq(b.col[2][i], 0, "a column not given is 0");
    }
    free(k);
    const uint64_t v3[4] = {1, 2, 3, 4};
    cr_assert_not(fx_keybatch_add(&b, "x", 1, v3, FX_KEYBATCH_COLS + 1), "more columns than it has");
    cr_assert_eq(b.n, 1000, "nothing appended");
    fx_keybatch_clear(&b);
    cr_assert_eq(b.n, 0);
    cr_assert(fx_keybatch_add(&b, "again", 5, v3, 3));
    fx_str_t one;
    fx_keybatch_views(&b, &one);
    cr_assert(one.len == 5 && !memcmp(one.p, "again", 5) && b.col[2][0] == 3, "reused from the start");
    fx_keybatch_free(&b);
    cr_assert(b.kbuf == NULL && b.n == 0);
    fx_keybatch_free(&b); /* twice: harmless */
}
