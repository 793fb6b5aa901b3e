/* bloom.c — Bloom filter of 64-bit hashes (bloom.h). */
#include "bloom.h"

#include <string.h>

static uint64_t bl_mix(uint64_t x) /* splitmix64's finaliser: the caller's hash may be weak */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

FX_INTERNAL uint64_t fx_bloom_bits_for(uint64_t n)
{
    uint64_t m = 1ull << 16;
    while (m < n * 16 && m < (1ull << 28)) m <<= 1;
    return m;
}

FX_INTERNAL void fx_bloom_init(fx_bloom_t *b, uint64_t *words, uint64_t bits)
{
    FX_ASSERT(bits >= 512 && !(bits & (bits - 1))); /* whole 512-bit blocks (bl_block) */
    memset(words, 0, bits / 8);
    *b = (fx_bloom_t){words, bits - 1, 0};
}

/* Blocked (Putze, Sanders & Singler, "Cache-, hash- and space-efficient Bloom filters",
 * 2007): the four bits of h lie in one 512-bit block, one cache line, chosen by the mixed
 * hash's top bits; each bit by 9 of its low bits. One miss an add or a test instead of
 * three (the GPU owner's adds and tests of this record were 3 random lines each, about 300
 * perf samples of the trace replay with a CPU owner, session 33). */
static uint64_t *bl_block(const fx_bloom_t *b, uint64_t x) { return &b->bits[((x >> 36) & (b->mask >> 9)) * 8]; }

FX_INTERNAL void fx_bloom_add(fx_bloom_t *b, uint64_t h)
{
    uint64_t x = bl_mix(h), *w = bl_block(b, x);
    for (int i = 0; i < 4; i++, x >>= 9) w[(x & 511) >> 6] |= 1ull << (x & 63);
    b->added++;
}

FX_INTERNAL bool fx_bloom_may_contain(const fx_bloom_t *b, uint64_t h)
{
    uint64_t x = bl_mix(h);
    const uint64_t *w = bl_block(b, x);
    for (int i = 0; i < 4; i++, x >>= 9)
        if (!(w[(x & 511) >> 6] & (1ull << (x & 63)))) return false;
    return true;
}
