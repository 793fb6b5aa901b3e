/* freq_sketch.c — count-min frequency sketch with halving (freq_sketch.h). */
#include "freq_sketch.h"

#include <string.h>

#define FS_ROWS 4u
#define FS_MAX 15u

static uint64_t fs_mix(uint64_t x) /* splitmix64's finaliser */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The four counters of h: one 64-byte block of the table (one cache line: one miss, not
 * four), a counter in each quarter of it, chosen by different bits of the mixed hash. */
static uint8_t *fs_counter(const fx_freq_sketch_t *s, uint64_t x, uint32_t row)
{
    uint64_t block = (x & s->mask) & ~(uint64_t)63;
    return &s->c[block + row * 16u + ((x >> (40 + 4 * row)) & 15u)];
}

static uint64_t fs_width(uint64_t keys)
{
    uint64_t w = 1024;
    while (w < keys * 64 && w < (1ull << 22)) w <<= 1;
    return w;
}

FX_INTERNAL size_t fx_freq_sketch_bytes(uint64_t keys) { return (size_t)(FS_ROWS * fs_width(keys)); }

FX_INTERNAL void fx_freq_sketch_init(fx_freq_sketch_t *s, uint64_t keys, uint8_t *counters)
{
    uint64_t w = fs_width(keys);
    *s = (fx_freq_sketch_t){0};
    if (!counters) return;
    memset(counters, 0, FS_ROWS * w);
    s->c = counters;
    s->mask = FS_ROWS * w - 1; /* the whole table: blocks of 64 counters */
}

FX_INTERNAL uint32_t fx_freq_sketch_add(fx_freq_sketch_t *s, uint64_t h)
{
    if (!s->c) return 0;
    uint64_t x = fs_mix(h);
    uint32_t m = FS_MAX;
    for (uint32_t r = 0; r < FS_ROWS; r++) {
        uint8_t *c = fs_counter(s, x, r);
        if (*c < FS_MAX) (*c)++;
        if (*c < m) m = *c;
    }
    uint64_t cells = (uint64_t)s->mask + 1; /* every counter, the 4 rows together */
    if (++s->adds >= cells / FS_ROWS / 2) { /* ageing: every counter halves */
        for (uint64_t i = 0; i < cells; i++) s->c[i] >>= 1;
        s->adds = 0;
        s->halvings++;
        m >>= 1;
    }
    return m;
}

FX_INTERNAL uint32_t fx_freq_sketch_estimate(const fx_freq_sketch_t *s, uint64_t h)
{
    if (!s->c) return 0;
    uint64_t x = fs_mix(h);
    uint32_t m = FS_MAX;
    for (uint32_t r = 0; r < FS_ROWS; r++) {
        uint32_t v = *fs_counter(s, x, r);
        if (v < m) m = v;
    }
    return m;
}

#undef FS_ROWS
#undef FS_MAX
