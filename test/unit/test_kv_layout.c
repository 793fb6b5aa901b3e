/* test_kv_layout.c — the CPU reference of the KV copy kernels (cuda/layout_ref.c) against
 * a naive per-byte model written from the layouts' definitions in fluxon_cuda.h (indices
 * of a C array, not the strides the library derives), for every layout, odd chunk sizes,
 * random and repeated page indices; per-layer restore; rejected (0) values; every
 * refused input with nothing copied; the per-layer pools (one K and one V tensor per
 * layer, SGLang's GPU pool: fluxon_kv_layers_*) against the same model and against a
 * PAGE_FIRST pool holding the same pages. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fluxon.h"
#include "fluxon_cuda.h"

/* Naive model: the byte offset in the pool of byte b of (page p, layer l, kv k). */
static uint64_t naive_pool(uint32_t kind, uint64_t L, uint64_t P, uint64_t C, uint64_t p, uint64_t l, uint64_t k,
                           uint64_t b)
{
    switch (kind) {
    case FLUXON_KV_LAYER_FIRST: return ((l * 2 + k) * P + p) * C + b;    /* [L][2][P][C] */
    case FLUXON_KV_PAGE_FIRST: return ((p * L + l) * 2 + k) * C + b;     /* [P][L][2][C] */
    default: return (l * P + p) * C + b;                                 /* [L][P][C] */
    }
}
static uint64_t naive_value(uint32_t kind, uint64_t l, uint64_t k, uint64_t C, uint64_t b)
{
    uint64_t kvf = kind == FLUXON_KV_MLA ? 1 : 2;
    return (l * kvf + k) * C + b;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)next();
}

struct shape { uint32_t kind, L; uint64_t C, P; size_t n; };
static const struct shape shapes[] = {
    {FLUXON_KV_LAYER_FIRST, 3, 64, 9, 5},  {FLUXON_KV_LAYER_FIRST, 1, 17, 4, 4},
    {FLUXON_KV_LAYER_FIRST, 5, 4097, 3, 3}, {FLUXON_KV_PAGE_FIRST, 4, 64, 7, 6},
    {FLUXON_KV_PAGE_FIRST, 2, 3, 11, 9},    {FLUXON_KV_PAGE_FIRST, 7, 1000, 2, 2},
    {FLUXON_KV_MLA, 6, 576, 8, 5},          {FLUXON_KV_MLA, 1, 1, 5, 5},
    {FLUXON_KV_MLA, 3, 4099, 4, 3},
};

/* n distinct page indices in 0..P-1 (n <= P). */
static void distinct_pages(int64_t *idx, size_t n, uint64_t P)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        bool dup;
        do {
            v = (int64_t)(next() % P);
            dup = false;
            for (size_t j = 0; j < i; j++) dup |= idx[j] == v;
        } while (dup);
        idx[i] = v;
    }
}

Test(kv_layout, layout_init_derives_value_len_and_pool_bytes)
{
    fluxon_kv_layout l;
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_LAYER_FIRST, 32, 8192, 1000, &l), FLUXON_OK);
    cr_assert_eq(l.kv_factor, 2);
    cr_assert_eq(l.value_len, 32ull * 2 * 8192);
    cr_assert_eq(l.pool_bytes, 32ull * 2 * 8192 * 1000);
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_MLA, 61, 576 * 2, 100, &l), FLUXON_OK);
    cr_assert_eq(l.kv_factor, 1);
    cr_assert_eq(l.value_len, 61ull * 1152);
}

Test(kv_layout, backup_matches_the_naive_model_for_every_layout)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const struct shape *sh = &shapes[s];
        fluxon_kv_layout l;
        cr_assert_eq(fluxon_kv_layout_init(sh->kind, sh->L, sh->C, sh->P, &l), FLUXON_OK);
        uint8_t *pool = malloc(l.pool_bytes);
        fill(pool, l.pool_bytes);
        int64_t idx[16];
        uint64_t ptrs[16];
        uint8_t *vals = calloc(sh->n, l.value_len);
        for (size_t i = 0; i < sh->n; i++) {
            idx[i] = (int64_t)(next() % sh->P); /* repeats allowed: a backup only reads pages */
            ptrs[i] = (uint64_t)(uintptr_t)(vals + i * l.value_len);
        }
        cr_assert_eq(fluxon_kv_backup_cpu(&l, pool, idx, ptrs, sh->n), FLUXON_OK);
        uint32_t kvf = sh->kind == FLUXON_KV_MLA ? 1 : 2;
        for (size_t i = 0; i < sh->n; i++)
            for (uint32_t ly = 0; ly < sh->L; ly++)
                for (uint32_t k = 0; k < kvf; k++)
                    for (uint64_t b = 0; b < sh->C; b++)
                        cr_assert_eq(vals[i * l.value_len + naive_value(sh->kind, ly, k, sh->C, b)],
                                     pool[naive_pool(sh->kind, sh->L, sh->P, sh->C, (uint64_t)idx[i], ly, k, b)],
                                     "shape %zu value %zu layer %u kv %u byte %llu", s, i, ly, k,
                                     (unsigned long long)b);
        free(vals);
        free(pool);
    }
}

/* Restores n values into a copy of a random pool (layer -1 or one layer) and checks every
 * byte of the pool against the model: restored chunks hold the value's bytes, all others
 * are unchanged. */
static void restore_case(const struct shape *sh, int32_t layer)
{
    fluxon_kv_layout l;
    cr_assert_eq(fluxon_kv_layout_init(sh->kind, sh->L, sh->C, sh->P, &l), FLUXON_OK);
    uint8_t *pool = malloc(l.pool_bytes), *want = malloc(l.pool_bytes), *vals = malloc(sh->n * l.value_len);
    fill(pool, l.pool_bytes);
    fill(vals, sh->n * l.value_len);
    memcpy(want, pool, l.pool_bytes);
    int64_t idx[16];
    uint64_t ptrs[16], lens[16];
    distinct_pages(idx, sh->n, sh->P);
    uint32_t kvf = sh->kind == FLUXON_KV_MLA ? 1 : 2;
    for (size_t i = 0; i < sh->n; i++) {
        ptrs[i] = (uint64_t)(uintptr_t)(vals + i * l.value_len);
        lens[i] = l.value_len;
        for (uint32_t ly = 0; ly < sh->L; ly++)
            for (uint32_t k = 0; k < kvf; k++)
                for (uint64_t b = 0; b < sh->C && (layer < 0 || (uint32_t)layer == ly); b++)
                    want[naive_pool(sh->kind, sh->L, sh->P, sh->C, (uint64_t)idx[i], ly, k, b)] =
                        vals[i * l.value_len + naive_value(sh->kind, ly, k, sh->C, b)];
    }
    cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, idx, ptrs, lens, sh->n, layer), FLUXON_OK);
    cr_assert_eq(memcmp(pool, want, l.pool_bytes), 0, "kind %u layer %d: pool differs from the model", sh->kind, layer);
    free(pool);
    free(want);
    free(vals);
}

Test(kv_layout, restore_matches_the_naive_model_for_every_layout)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) restore_case(&shapes[s], -1);
}

Test(kv_layout, per_layer_restore_writes_only_that_layer)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        restore_case(&shapes[s], 0);
        restore_case(&shapes[s], (int32_t)shapes[s].L - 1);
    }
}

Test(kv_layout, a_rejected_value_is_skipped)
{
    fluxon_kv_layout l;
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_PAGE_FIRST, 2, 8, 4, &l), FLUXON_OK);
    uint8_t pool[128], before[128], val[32];
    fill(pool, sizeof pool);
    memcpy(before, pool, sizeof pool);
    fill(val, sizeof val);
    int64_t idx[2] = {1, 2};
    uint64_t ptrs[2] = {0, (uint64_t)(uintptr_t)val};
    cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, idx, ptrs, NULL, 2, -1), FLUXON_OK);
    cr_assert_eq(memcmp(pool + 32, before + 32, 32), 0, "page 1 (value 0 rejected) unchanged");
    cr_assert_eq(memcmp(pool + 64, val, 32), 0, "page 2 restored (page_first: one contiguous value)");
    cr_assert_eq(fluxon_kv_backup_cpu(&l, pool, idx, ptrs, 2), FLUXON_OK);
}

Test(kv_layout, bad_input_is_refused_before_any_byte_moves)
{
    fluxon_kv_layout l;
    cr_assert_eq(fluxon_kv_layout_init(0, 1, 1, 1, &l), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layout_init(6, 1, 1, 1, &l), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_MLA, 0, 1, 1, &l), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_MLA, FLUXON_KV_MAX_LAYERS + 1, 1, 1, &l), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_MLA, 1, 0, 1, &l), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_MLA, 1, 1, 0, &l), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_LAYER_FIRST, 4096, 1ull << 40, 1ull << 20, &l),
                 FLUXON_ERR_INVALID_ARGUMENT, "overflow");
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_LAYER_FIRST, 1, 1, 1, NULL), FLUXON_ERR_INVALID_ARGUMENT);

    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_LAYER_FIRST, 2, 16, 4, &l), FLUXON_OK);
    uint8_t pool[256], before[256], val[2][64];
    fill(pool, sizeof pool);
    memcpy(before, pool, sizeof pool);
    fill(&val[0][0], sizeof val);
    uint64_t ptrs[2] = {(uint64_t)(uintptr_t)val[0], (uint64_t)(uintptr_t)val[1]};
    int64_t bad_hi[2] = {0, 4}, bad_lo[2] = {1, -1}, ok[2] = {0, 1};
    uint64_t short_lens[2] = {64, 63};
    cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, bad_hi, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, bad_lo, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, ok, ptrs, short_lens, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, ok, ptrs, NULL, 2, 2), FLUXON_ERR_INVALID_ARGUMENT, "layer 2 of 2");
    cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, ok, ptrs, NULL, 2, -2), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_restore_cpu(&l, NULL, ok, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_restore_cpu(NULL, pool, ok, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(memcmp(pool, before, sizeof pool), 0, "nothing copied by a refused call");
    uint8_t vbefore[2][64];
    memcpy(vbefore, val, sizeof val);
    cr_assert_eq(fluxon_kv_backup_cpu(&l, pool, bad_hi, ptrs, 2), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(memcmp(val, vbefore, sizeof val), 0, "nothing copied by a refused backup");
    fluxon_kv_layout forged = l;
    forged.page_stride = 1;
    cr_assert_eq(fluxon_kv_backup_cpu(&forged, pool, ok, ptrs, 2), FLUXON_ERR_INVALID_ARGUMENT, "hand-made layout");
    cr_assert_eq(fluxon_kv_backup_cpu(&l, pool, NULL, NULL, 0), FLUXON_OK, "n = 0 copies nothing");
}

/* Per-layer pools: L separate K (and V) tensors of P pages x C bytes each. */
struct tensors { uint32_t L, kvf; uint64_t C, P; uint8_t *t[2][64]; uint64_t k[64], v[64]; };
static void tensors_make(struct tensors *ts, uint32_t kvf, uint32_t L, uint64_t C, uint64_t P)
{
    *ts = (struct tensors){.L = L, .kvf = kvf, .C = C, .P = P};
    for (uint32_t ly = 0; ly < L; ly++)
        for (uint32_t kv = 0; kv < kvf; kv++) {
            ts->t[kv][ly] = malloc(P * C);
            fill(ts->t[kv][ly], P * C);
            (kv ? ts->v : ts->k)[ly] = (uint64_t)(uintptr_t)ts->t[kv][ly];
        }
}
static void tensors_free(struct tensors *ts)
{
    for (uint32_t ly = 0; ly < ts->L; ly++)
        for (uint32_t kv = 0; kv < ts->kvf; kv++) free(ts->t[kv][ly]);
}

Test(kv_layout, per_layer_tensors_match_the_model_and_a_page_first_pool)
{
    static const struct { uint32_t kvf, L; uint64_t C, P; size_t n; } sh[] = {
        {2, 3, 64, 9, 5}, {2, 1, 17, 4, 4}, {2, 5, 4097, 3, 3}, {1, 6, 576, 8, 5}, {1, 2, 3, 5, 5}};
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        uint32_t kind = sh[s].kvf == 2 ? FLUXON_KV_LAYER_TENSORS : FLUXON_KV_LAYER_TENSORS_MLA;
        uint64_t C = sh[s].C, P = sh[s].P;
        uint32_t L = sh[s].L, kvf = sh[s].kvf;
        size_t n = sh[s].n;
        fluxon_kv_layout l;
        cr_assert_eq(fluxon_kv_layout_init(kind, L, C, P, &l), FLUXON_OK);
        cr_assert_eq(l.kv_factor, kvf);
        cr_assert_eq(l.value_len, (uint64_t)L * kvf * C);
        struct tensors ts;
        tensors_make(&ts, kvf, L, C, P);
        int64_t idx[16];
        uint64_t ptrs[16], lens[16];
        distinct_pages(idx, n, P);
        uint8_t *vals = calloc(n, l.value_len);
        for (size_t i = 0; i < n; i++) ptrs[i] = (uint64_t)(uintptr_t)(vals + i * l.value_len);
        cr_assert_eq(fluxon_kv_layers_backup_cpu(&l, ts.k, kvf == 2 ? ts.v : NULL, idx, ptrs, n), FLUXON_OK);
        for (size_t i = 0; i < n; i++) /* the value: [l0 K][l0 V][l1 K]... from tensor (l, kv), row idx[i] */
            for (uint32_t ly = 0; ly < L; ly++)
                for (uint32_t k = 0; k < kvf; k++)
                    cr_assert_eq(memcmp(vals + i * l.value_len + ((uint64_t)ly * kvf + k) * C,
                                        ts.t[k][ly] + (uint64_t)idx[i] * C, C), 0,
                                 "shape %zu value %zu layer %u kv %u", s, i, ly, k);
        if (kvf == 2) { /* the same pages in a PAGE_FIRST pool back up to the same values */
            fluxon_kv_layout pf;
            cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_PAGE_FIRST, L, C, P, &pf), FLUXON_OK);
            uint8_t *pool = malloc(pf.pool_bytes), *pvals = calloc(n, pf.value_len);
            for (uint64_t p = 0; p < P; p++)
                for (uint32_t ly = 0; ly < L; ly++)
                    for (uint32_t k = 0; k < 2; k++)
                        memcpy(pool + naive_pool(FLUXON_KV_PAGE_FIRST, L, P, C, p, ly, k, 0), ts.t[k][ly] + p * C, C);
            uint64_t pptrs[16];
            for (size_t i = 0; i < n; i++) pptrs[i] = (uint64_t)(uintptr_t)(pvals + i * pf.value_len);
            cr_assert_eq(fluxon_kv_backup_cpu(&pf, pool, idx, pptrs, n), FLUXON_OK);
            cr_assert_eq(memcmp(pvals, vals, n * l.value_len), 0, "per-layer and page_first values are the same bytes");
            free(pool);
            free(pvals);
        }
        /* restore other values into other pages: one layer, then all; every other byte unchanged */
        struct tensors want;
        tensors_make(&want, kvf, L, C, P);
        for (uint32_t ly = 0; ly < L; ly++)
            for (uint32_t k = 0; k < kvf; k++) memcpy(want.t[k][ly], ts.t[k][ly], P * C);
        fill(vals, n * l.value_len);
        int64_t to[16];
        distinct_pages(to, n, P);
        for (size_t i = 0; i < n; i++) lens[i] = l.value_len;
        int32_t one = (int32_t)(L - 1);
        cr_assert_eq(fluxon_kv_layers_restore_cpu(&l, ts.k, ts.v, to, ptrs, lens, n, one), FLUXON_OK);
        for (size_t i = 0; i < n; i++)
            for (uint32_t k = 0; k < kvf; k++)
                memcpy(want.t[k][one] + (uint64_t)to[i] * C, vals + i * l.value_len + ((uint64_t)one * kvf + k) * C, C);
        for (uint32_t ly = 0; ly < L; ly++)
            for (uint32_t k = 0; k < kvf; k++)
                cr_assert_eq(memcmp(ts.t[k][ly], want.t[k][ly], P * C), 0, "shape %zu layer %d only: tensor %u/%u", s,
                             one, ly, k);
        cr_assert_eq(fluxon_kv_layers_restore_cpu(&l, ts.k, ts.v, to, ptrs, NULL, n, -1), FLUXON_OK);
        for (size_t i = 0; i < n; i++)
            for (uint32_t ly = 0; ly < L; ly++)
                for (uint32_t k = 0; k < kvf; k++)
                    memcpy(want.t[k][ly] + (uint64_t)to[i] * C, vals + i * l.value_len + ((uint64_t)ly * kvf + k) * C, C);
        for (uint32_t ly = 0; ly < L; ly++)
            for (uint32_t k = 0; k < kvf; k++)
                cr_assert_eq(memcmp(ts.t[k][ly], want.t[k][ly], P * C), 0, "shape %zu all layers: tensor %u/%u", s, ly,
                             k);
        tensors_free(&want);
        tensors_free(&ts);
        free(vals);
    }
}

Test(kv_layout, per_layer_bad_input_is_refused_before_any_byte_moves)
{
    fluxon_kv_layout l, pf;
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_LAYER_TENSORS, 2, 16, 4, &l), FLUXON_OK);
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_PAGE_FIRST, 2, 16, 4, &pf), FLUXON_OK);
    struct tensors ts, before;
    tensors_make(&ts, 2, 2, 16, 4);
    tensors_make(&before, 2, 2, 16, 4);
    for (uint32_t ly = 0; ly < 2; ly++)
        for (uint32_t k = 0; k < 2; k++) memcpy(before.t[k][ly], ts.t[k][ly], 64);
    uint8_t val[2][64], vbefore[2][64];
    fill(&val[0][0], sizeof val);
    memcpy(vbefore, val, sizeof val);
    uint64_t ptrs[2] = {(uint64_t)(uintptr_t)val[0], (uint64_t)(uintptr_t)val[1]};
    int64_t ok[2] = {0, 3}, bad_hi[2] = {0, 4}, bad_lo[2] = {-1, 0};
    uint64_t short_lens[2] = {64, 63}, zero_k[2] = {ts.k[0], 0};
    uint8_t pool[256];
    cr_assert_eq(fluxon_kv_layers_restore_cpu(&l, ts.k, ts.v, bad_hi, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layers_restore_cpu(&l, ts.k, ts.v, bad_lo, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layers_restore_cpu(&l, ts.k, ts.v, ok, ptrs, short_lens, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layers_restore_cpu(&l, ts.k, ts.v, ok, ptrs, NULL, 2, 2), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layers_restore_cpu(&l, ts.k, NULL, ok, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT,
                 "MHA without V tensors");
    cr_assert_eq(fluxon_kv_layers_restore_cpu(&l, zero_k, ts.v, ok, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT,
                 "a zero tensor address");
    cr_assert_eq(fluxon_kv_layers_restore_cpu(&l, NULL, ts.v, ok, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layers_restore_cpu(NULL, ts.k, ts.v, ok, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layers_restore_cpu(&pf, ts.k, ts.v, ok, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT,
                 "a single-pool kind");
    cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, ok, ptrs, NULL, 2, -1), FLUXON_ERR_INVALID_ARGUMENT,
                 "a per-layer kind to the single-pool call");
    cr_assert_eq(fluxon_kv_backup_cpu(&l, pool, ok, ptrs, 2), FLUXON_ERR_INVALID_ARGUMENT);
    for (uint32_t ly = 0; ly < 2; ly++)
        for (uint32_t k = 0; k < 2; k++)
            cr_assert_eq(memcmp(ts.t[k][ly], before.t[k][ly], 64), 0, "nothing restored by a refused call");
    cr_assert_eq(fluxon_kv_layers_backup_cpu(&l, ts.k, ts.v, bad_hi, ptrs, 2), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layers_backup_cpu(&l, zero_k, ts.v, ok, ptrs, 2), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_kv_layers_backup_cpu(&pf, ts.k, ts.v, ok, ptrs, 2), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(memcmp(val, vbefore, sizeof val), 0, "nothing backed up by a refused call");
    cr_assert_eq(fluxon_kv_layers_backup_cpu(&l, NULL, NULL, NULL, NULL, 0), FLUXON_OK, "n = 0 copies nothing");
    fluxon_kv_layout mla;
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_LAYER_TENSORS_MLA, 2, 16, 4, &mla), FLUXON_OK);
    uint64_t mptrs[2] = {ptrs[0], 0}; /* a rejected value is skipped */
    cr_assert_eq(fluxon_kv_layers_backup_cpu(&mla, ts.k, NULL, ok, mptrs, 2), FLUXON_OK, "MLA needs no v_ptrs");
    cr_assert_eq(memcmp(val[0], ts.t[0][0], 16), 0);
    cr_assert_eq(memcmp(val[0] + 16, ts.t[0][1], 16), 0);
    tensors_free(&ts);
    tensors_free(&before);
}
