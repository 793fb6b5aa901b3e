/* freq_sketch.c — count-min frequency sketch with halving (freq_sketch.h). */
#include "freq_sketch.h"

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

static uint32_t fs_index(const fx_freq_sketch_t *s, uint64_t h, uint32_t row)
{
    return (uint32_t)(fs_mix(h + 0x9e3779b97f4a7c15ull * (row + 1)) & s->mask);
}

FX_INTERNAL int fx_freq_sketch_init(fx_freq_sketch_t *s, uint64_t keys)
{
    uint64_t w = 1024;
    while (w < keys * 64 && w < (1ull << 22)) w <<= 1;
    *s = (fx_freq_sketch_t){0};
    s->c = fx_calloc(FS_ROWS * w, 1);
    if (!s->c) return FLUXON_ERR_NOMEM;
    s->mask = (uint32_t)(w - 1);
    return FLUXON_OK;
}

FX_INTERNAL void fx_freq_sketch_fini(fx_freq_sketch_t *s)
{
    if (!s) return;
    fx_free(s->c);
    s->c = NULL;
}

FX_INTERNAL void fx_freq_sketch_add(fx_freq_sketch_t *s, uint64_t h)
{
    if (!s->c) return;
    uint64_t w = (uint64_t)s->mask + 1;
    for (uint32_t r = 0; r < FS_ROWS; r++) {
        uint8_t *c = &s->c[r * w + fs_index(s, h, r)];
        if (*c < FS_MAX) (*c)++;
    }
    if (++s->adds >= w / 2) { /* ageing: every counter halves */
        for (uint64_t i = 0; i < FS_ROWS * w; i++) s->c[i] >>= 1;
        s->adds = 0;
        s->halvings++;
    }
}

FX_INTERNAL uint32_t fx_freq_sketch_estimate(const fx_freq_sketch_t *s, uint64_t h)
{
    if (!s->c) return 0;
    uint64_t w = (uint64_t)s->mask + 1;
    uint32_t m = FS_MAX;
    for (uint32_t r = 0; r < FS_ROWS; r++) {
        uint32_t v = s->c[r * w + fs_index(s, h, r)];
        if (v < m) m = v;
    }
    return m;
}

#undef FS_ROWS
#undef FS_MAX
