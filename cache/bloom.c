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
    memset(words, 0, bits / 8);
    *b = (fx_bloom_t){words, bits - 1, 0};
}

FX_INTERNAL void fx_bloom_add(fx_bloom_t *b, uint64_t h)
{
    uint64_t x = bl_mix(h), step = (x >> 32) | 1;
    for (int i = 0; i < 3; i++, x += step) b->bits[(x & b->mask) >> 6] |= 1ull << (x & 63);
    b->added++;
}

FX_INTERNAL bool fx_bloom_may_contain(const fx_bloom_t *b, uint64_t h)
{
    uint64_t x = bl_mix(h), step = (x >> 32) | 1;
    for (int i = 0; i < 3; i++, x += step)
        if (!(b->bits[(x & b->mask) >> 6] & (1ull << (x & 63)))) return false;
    return true;
}
