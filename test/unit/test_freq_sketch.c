/* test_freq_sketch.c — Criterion suite for the count-min frequency sketch (cache/freq_sketch.c)
 * behind the owner's write-back admission (issue 38): counts never under-estimate before an
 * ageing, saturate at 3 (2-bit counters), halve after width / 2 additions, stay mostly exact for a working
 * set the size it was made for, are sized as documented, and are safe on an unmade sketch. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "freq_sketch.h"

static uint64_t key(uint64_t i) { return i * 0x9e3779b97f4a7c15ull + 17; }

static void make(fx_freq_sketch_t *s, uint64_t keys)
{
    uint8_t *c = malloc(fx_freq_sketch_bytes(keys));
    cr_assert_not_null(c);
    memset(c, 0xAB, fx_freq_sketch_bytes(keys)); /* init zeroes it */
    fx_freq_sketch_init(s, keys, c);
}

Test(freq_sketch, counts_and_saturates)
{
    fx_freq_sketch_t s;
    make(&s, 100);
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(1)), 0, "never seen");
    cr_assert_eq(fx_freq_sketch_add(&s, key(1)), 1, "an add returns the estimate after it");
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(1)), 1);
    cr_assert_eq(fx_freq_sketch_add(&s, key(1)), 2);
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(1)), 2, "seen twice: admitted by second_touch");
    uint32_t last = 0;
    for (int i = 0; i < 40; i++) last = fx_freq_sketch_add(&s, key(2));
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(2)), 3, "saturates at 3");
    cr_assert_eq(last, 3);
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(1)), 2, "a neighbour's counters are not touched");
    free(s.c);
}

/* A working set of n keys in a sketch sized for n: every key seen once reads >= 1, and few
 * read >= 2 (count-min over-estimates only by collisions in all four rows). */
Test(freq_sketch, few_false_second_touches)
{
    enum { N = 10000 };
    fx_freq_sketch_t s;
    make(&s, N);
    for (uint64_t i = 0; i < N; i++) fx_freq_sketch_add(&s, key(i));
    unsigned twice = 0;
    for (uint64_t i = 0; i < N; i++) {
        uint32_t e = fx_freq_sketch_estimate(&s, key(i));
        cr_assert_geq(e, 1, "key %llu under-estimated", (unsigned long long)i);
        twice += e >= 2;
    }
    cr_assert_lt(twice, N / 100, "%u of %d keys seen once read as twice", twice, N);
    free(s.c);
}

/* After width / 2 additions every counter halves: a key seen 3 times (or more) reads 1, one
 * seen twice reads 1, one seen once reads 0. */
Test(freq_sketch, ageing_halves)
{
    fx_freq_sketch_t s;
    make(&s, 1); /* the smallest: 1,024 counters per row */
    cr_assert_eq(s.width, 1024);
    for (int i = 0; i < 8; i++) fx_freq_sketch_add(&s, key(7));
    for (int i = 0; i < 2; i++) fx_freq_sketch_add(&s, key(8));
    fx_freq_sketch_add(&s, key(9));
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(7)), 3);
    uint64_t filler = 0;
    while (s.halvings == 0) fx_freq_sketch_add(&s, key(1000000 + filler++ % 3)); /* 3 other keys */
    cr_assert_eq(filler, s.width / 2 - 11, "halved after width / 2 additions");
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(7)), 1);
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(8)), 1);
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(9)), 0);
    free(s.c);
}

Test(freq_sketch, unmade_is_harmless)
{
    fx_freq_sketch_t s = {0};
    fx_freq_sketch_add(&s, key(1));
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(1)), 0);
    fx_freq_sketch_init(&s, 10, NULL);
    cr_assert_eq(fx_freq_sketch_estimate(&s, key(1)), 0);
    cr_assert_eq(fx_freq_sketch_bytes(1), 1024u, "4 rows of 1,024 2-bit counters");
    cr_assert_eq(fx_freq_sketch_bytes(10000), 1u << 20, "64 counters per value, rounded up: 1 MiB");
    cr_assert_eq(fx_freq_sketch_bytes(1ull << 40), 1u << 22, "capped at 2^22 per row");
}
