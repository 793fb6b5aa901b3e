/* test_bloom.c — Criterion suite for the Bloom filter of key hashes (cache/bloom.c) behind
 * the owner's record of its copies (issue 38): never a false negative (a miss settled
 * locally must be one), a false-positive rate near the documented 0.3 % at its sizing, and
 * the documented sizes. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>

#include "bloom.h"

static uint64_t key(uint64_t i) { return i * 0x9e3779b97f4a7c15ull ^ 0x1234; }

Test(bloom, no_false_negatives_and_few_false_positives)
{
    enum { N = 20000 };
    uint64_t bits = fx_bloom_bits_for(N);
    cr_assert_eq(bits, 1ull << 19, "the next power of two >= 16 bits a key");
    uint64_t *w = malloc(bits / 8);
    cr_assert_not_null(w);
    fx_bloom_t b;
    fx_bloom_init(&b, w, bits);
    for (uint64_t i = 0; i < N; i++) cr_assert_not(fx_bloom_may_contain(&b, key(i)), "empty: nothing may be there");
    for (uint64_t i = 0; i < N; i++) fx_bloom_add(&b, key(i));
    cr_assert_eq(b.added, N);
    for (uint64_t i = 0; i < N; i++) cr_assert(fx_bloom_may_contain(&b, key(i)), "key %llu added", (unsigned long long)i);
    unsigned fp = 0;
    for (uint64_t i = N; i < 11 * N; i++) fp += fx_bloom_may_contain(&b, key(i));
    cr_log_info("false positives: %u of %d", fp, 10 * N);
    cr_assert_lt(fp, 10 * N / 100, "%u false positives of %d (documented ~0.3 %% at 16 bits a key)", fp, 10 * N);
    free(w);
}

Test(bloom, sizes)
{
    cr_assert_eq(fx_bloom_bits_for(0), 1ull << 16, "at least 2^16 bits");
    cr_assert_eq(fx_bloom_bits_for(4096), 1ull << 16);
    cr_assert_eq(fx_bloom_bits_for(4097), 1ull << 17);
    cr_assert_eq(fx_bloom_bits_for(1ull << 40), 1ull << 28, "at most 2^28 bits (32 MiB)");
}

/* Four bits a key in one 512-bit block: a smaller filter would index past its words (a
 * reviewer's ASan harness, session 33), so it is refused. */
Test(bloom, a_filter_smaller_than_one_block_is_refused, .signal = SIGABRT)
{
    uint64_t w[4];
    fx_bloom_t b;
    fx_bloom_init(&b, w, 256);
}
