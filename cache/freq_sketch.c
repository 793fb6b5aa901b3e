/* freq_sketch.c — count-min frequency sketch with halving (freq_sketch.h). */
#include "freq_sketch.h"

#include <string.h>

#define FS_ROWS 4u
#define FS_MAX 3u /* 2-bit counters */

static uint64_t fs_mix(uint64_t x) /* splitmix64's finaliser */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The four counters of h: one 64-byte block of the table (one cache line: one miss, not
 * four), row r's counter in its quarter (16 bytes: 64 counters), chosen by 6 bits of the
 * mixed hash each: byte *bp, bits at *shift. */
static uint8_t *fs_counter(const fx_freq_sketch_t *s, uint64_t x, uint32_t row, unsigned *shift)
{
    uint64_t block = (x & s->mask) & ~(uint64_t)63;
    unsigned j = (unsigned)(x >> (40 + 6 * row)) & 63u;
    *shift = (j & 3u) * 2u;
    return &s->c[block + row * 16u + j / 4u];
}

static uint64_t fs_width(uint64_t keys)
{
    uint64_t w = 1024;
    while (w < keys * 64 && w < (1ull << 22)) w <<= 1;
    return w;
}

FX_INTERNAL size_t fx_freq_sketch_bytes(uint64_t keys) { return (size_t)(FS_ROWS * fs_width(keys) / 4); }

FX_INTERNAL void fx_freq_sketch_init(fx_freq_sketch_t *s, uint64_t keys, uint8_t *counters)
{
    uint64_t w = fs_width(keys);
    *s = (fx_freq_sketch_t){0};
    if (!counters) return;
    memset(counters, 0, fx_freq_sketch_bytes(keys));
    s->c = counters;
    s->width = w;
    s->mask = fx_freq_sketch_bytes(keys) - 1; /* the whole table: blocks of 64 bytes */
}

FX_INTERNAL void fx_freq_sketch_prefetch(const fx_freq_sketch_t *s, uint64_t h)
{
    unsigned sh;
    if (s->c) fx_prefetch(fs_counter(s, fs_mix(h), 0, &sh));
}

FX_INTERNAL uint32_t fx_freq_sketch_add(fx_freq_sketch_t *s, uint64_t h)
{
    if (!s->c) return 0;
    uint64_t x = fs_mix(h);
    uint32_t m = FS_MAX;
    for (uint32_t r = 0; r < FS_ROWS; r++) {
        unsigned sh;
        uint8_t *c = fs_counter(s, x, r, &sh);
        uint32_t v = (*c >> sh) & 3u;
        if (v < FS_MAX) *c = (uint8_t)(*c + (1u << sh)), v++;
        if (v < m) m = v;
    }
    if (++s->adds >= s->width / 2) { /* ageing: every counter halves (each 2-bit field of a byte) */
        for (uint64_t i = 0; i <= s->mask; i++) s->c[i] = (uint8_t)((s->c[i] >> 1) & 0x55u);
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
        unsigned sh;
        const uint8_t *c = fs_counter(s, x, r, &sh); /* sets sh: a statement of its own (in one
                                                      * expression with `>> sh` the order is unspecified) */
        uint32_t v = (*c >> sh) & 3u;
        if (v < m) m = v;
    }
    return m;
}
