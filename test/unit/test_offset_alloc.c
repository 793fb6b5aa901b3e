/* test_offset_alloc.c — Criterion suite for cache/offset_alloc.c, the master's segment
 * allocator: alignment and rounding, no overlap (against a shadow bitmap of 4 KiB pages),
 * coalescing, misuse statuses, utilization before the first NO_SPACE, randomized stress. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "offset_alloc.h"

#define PG FX_OFFSET_ALLOC_PAGE
#define MIB (1024ull * 1024)
#define GIB (1024ull * MIB)

/* splitmix64: deterministic, so every run checks the same sequences. */
static uint64_t oat_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t oat_range(uint64_t *s, uint64_t lo, uint64_t hi) /* inclusive */
{
    return lo + oat_rand(s) % (hi - lo + 1);
}

static fx_offset_alloc_t *oat_create(uint64_t base, uint64_t size)
{
    fx_offset_alloc_t *a = NULL;
    cr_assert_eq(fx_offset_alloc_create(base, size, &a), FLUXON_OK);
    cr_assert_not_null(a);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    return a;
}

/* Snapshot of every counter, to prove a failed call changed nothing. */
typedef struct oat_counters {
    uint64_t used, free_bytes, largest;
    size_t count;
} oat_counters_t;

static oat_counters_t oat_counters(const fx_offset_alloc_t *a)
{
    return (oat_counters_t){fx_offset_alloc_used(a), fx_offset_alloc_free_bytes(a),
                            fx_offset_alloc_largest_free(a), fx_offset_alloc_count(a)};
}

static void oat_assert_same(oat_counters_t x, oat_counters_t y)
{
    cr_assert_eq(x.used, y.used);
    cr_assert_eq(x.free_bytes, y.free_bytes);
    cr_assert_eq(x.largest, y.largest);
    cr_assert_eq(x.count, y.count);
}

/* ---- shadow bitmap: one bit per 4 KiB page, set while a live allocation covers it ---- */

typedef struct oat_shadow {
    uint64_t base, pages;
    uint64_t *bits;
} oat_shadow_t;

static void oat_shadow_init(oat_shadow_t *sh, uint64_t base, uint64_t size)
{
    sh->base = base;
    sh->pages = size / PG;
    sh->bits = calloc((sh->pages + 63) / 64, sizeof *sh->bits);
    cr_assert_not_null(sh->bits);
}

static bool oat_bit(const oat_shadow_t *sh, uint64_t p) { return (sh->bits[p / 64] >> (p % 64)) & 1; }

/* Marks [off, off+len) used (set) or free; asserts every page was in the other state. */
static void oat_shadow_mark(oat_shadow_t *sh, uint64_t off, uint64_t len, bool set)
{
    cr_assert_eq(off % PG, 0, "offset %llu not 4 KiB aligned", (unsigned long long)off);
    cr_assert_geq(off, sh->base);
    uint64_t p0 = (off - sh->base) / PG, n = len / PG;
    cr_assert_leq(p0 + n, sh->pages, "allocation runs past the range");
    for (uint64_t p = p0; p < p0 + n; p++) {
        cr_assert_eq(oat_bit(sh, p), !set, "page %llu %s", (unsigned long long)p,
                     set ? "handed out twice (overlap)" : "freed but not allocated");
        sh->bits[p / 64] ^= 1ull << (p % 64);
    }
}

static uint64_t oat_shadow_max_free_run(const oat_shadow_t *sh)
{
    uint64_t best = 0, run = 0;
    for (uint64_t p = 0; p < sh->pages; p++) {
        run = oat_bit(sh, p) ? 0 : run + 1;
        if (run > best) best = run;
    }
    return best * PG;
}

/* ---- create ---- */

Test(offset_alloc, create_rejects_bad_arguments)
{
    fx_offset_alloc_t *a = (fx_offset_alloc_t *)(uintptr_t)0x1;
    cr_assert_eq(fx_offset_alloc_create(0, 0, &a), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_create(0, 4095, &a), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_create(0, PG + 1, &a), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_create(100, PG, &a), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_create(UINT64_MAX - PG + 1, 2 * PG, &a),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_create(0, PG, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(a, (fx_offset_alloc_t *)(uintptr_t)0x1, "output set on failure");
    fx_offset_alloc_destroy(NULL);

    a = oat_create(0, PG); /* the smallest segment works */
    uint64_t off = 1;
    cr_assert_eq(fx_offset_alloc_alloc(a, 1, &off), FLUXON_OK);
    cr_assert_eq(off, 0);
    cr_assert_eq(fx_offset_alloc_alloc(a, 1, &off), FLUXON_ERR_NO_SPACE);
    fx_offset_alloc_destroy(a);

    /* A range ending exactly at 2^64 is representable. */
    a = oat_create(UINT64_MAX - 2 * PG + 1, 2 * PG);
    cr_assert_eq(fx_offset_alloc_alloc(a, 2 * PG, &off), FLUXON_OK);
    cr_assert_eq(off, UINT64_MAX - 2 * PG + 1);
    fx_offset_alloc_destroy(a);
}

/* ---- alignment, rounding, lengths ---- */

Test(offset_alloc, aligned_and_rounded)
{
    const uint64_t base = 3 * PG; /* not a power of two: offsets are absolute, not relative */
    fx_offset_alloc_t *a = oat_create(base, 64 * MIB);
    const uint64_t lens[] = {1, PG - 1, PG, PG + 1, 3 * PG - 7, 1 * MIB, 4718592, 4718593, 123457};
    uint64_t offs[FX_ARRAY_LEN(lens)], used = 0;
    for (size_t i = 0; i < FX_ARRAY_LEN(lens); i++) {
        cr_assert_eq(fx_offset_alloc_alloc(a, lens[i], &offs[i]), FLUXON_OK);
        uint64_t want = FX_ALIGN_UP(lens[i], PG), got = 0;
        cr_assert_eq(offs[i] % PG, 0, "offset %llu unaligned", (unsigned long long)offs[i]);
        cr_assert_geq(offs[i], base);
        cr_assert_leq(offs[i] + want, base + 64 * MIB);
        cr_assert_eq(fx_offset_alloc_size_of(a, offs[i], &got), FLUXON_OK);
        cr_assert_eq(got, want, "len %llu rounded to %llu", (unsigned long long)lens[i],
                     (unsigned long long)got);
        used += want;
        cr_assert_eq(fx_offset_alloc_used(a), used);
        cr_assert_eq(fx_offset_alloc_free_bytes(a), 64 * MIB - used);
        cr_assert_eq(fx_offset_alloc_count(a), i + 1);
    }
    /* The first allocation of a fresh range starts at its base. */
    cr_assert_eq(offs[0], base);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    fx_offset_alloc_destroy(a);
}

Test(offset_alloc, zero_and_oversized_len)
{
    fx_offset_alloc_t *a = oat_create(PG, 16 * MIB);
    uint64_t off = 77;
    oat_counters_t c0 = oat_counters(a);
    cr_assert_eq(fx_offset_alloc_alloc(a, 0, &off), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_alloc(a, 16 * MIB + 1, &off), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_alloc(a, UINT64_MAX, &off), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_alloc(a, PG, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_alloc(NULL, PG, &off), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(off, 77, "output set on failure");
    oat_assert_same(c0, oat_counters(a));

    /* len == size is legal and takes everything; then even one byte is NO_SPACE. */
    cr_assert_eq(fx_offset_alloc_alloc(a, 16 * MIB, &off), FLUXON_OK);
    cr_assert_eq(off, PG);
    cr_assert_eq(fx_offset_alloc_largest_free(a), 0);
    oat_counters_t c1 = oat_counters(a);
    uint64_t off2 = 99;
    cr_assert_eq(fx_offset_alloc_alloc(a, 1, &off2), FLUXON_ERR_NO_SPACE);
    cr_assert_eq(off2, 99);
    oat_assert_same(c1, oat_counters(a));
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    fx_offset_alloc_destroy(a);
}

/* ---- misuse of free ---- */

Test(offset_alloc, double_free_and_bogus_offsets)
{
    const uint64_t base = 16 * PG, size = 32 * MIB;
    fx_offset_alloc_t *a = oat_create(base, size);
    uint64_t x, y, z;
    cr_assert_eq(fx_offset_alloc_alloc(a, 5 * PG, &x), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_alloc(a, 2 * MIB, &y), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_alloc(a, PG, &z), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_free(a, y), FLUXON_OK);

    oat_counters_t c = oat_counters(a);
    const uint64_t bogus[] = {
        y,               /* double free */
        y + PG,          /* inside a free block */
        x + PG,          /* interior of a live allocation */
        x + 1,           /* unaligned */
        base - PG,       /* below the range */
        0,               /* far below */
        base + size,     /* one past the end */
        UINT64_MAX,      /* nonsense */
        base + size - PG /* the last page, free */
    };
    for (size_t i = 0; i < FX_ARRAY_LEN(bogus); i++) {
        uint64_t len = 0;
        cr_assert_eq(fx_offset_alloc_free(a, bogus[i]), FLUXON_ERR_NOT_FOUND, "offset %llu",
                     (unsigned long long)bogus[i]);
        cr_assert_eq(fx_offset_alloc_size_of(a, bogus[i], &len), FLUXON_ERR_NOT_FOUND);
        oat_assert_same(c, oat_counters(a));
        cr_assert_eq(fx_offset_alloc_check(a), 0);
    }
    cr_assert_eq(fx_offset_alloc_free(NULL, x), FLUXON_ERR_INVALID_ARGUMENT);

    /* The live allocations are intact and free exactly once. */
    cr_assert_eq(fx_offset_alloc_free(a, x), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_free(a, x), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fx_offset_alloc_free(a, z), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_free(a, z), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fx_offset_alloc_count(a), 0);
    cr_assert_eq(fx_offset_alloc_largest_free(a), size);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    fx_offset_alloc_destroy(a);
}

/* ---- coalescing ---- */

/* Fills a range to the first NO_SPACE, frees everything in the given order, and expects
 * one free block of the whole range. order: 0 random, 1 address ascending, 2 descending
 * (ascending merges each block with its free predecessor, descending with its successor). */
static void oat_fill_and_drain(int order, uint64_t seed)
{
    const uint64_t base = PG, size = 256 * MIB;
    fx_offset_alloc_t *a = oat_create(base, size);
    size_t cap = size / PG, n = 0;
    uint64_t *offs = malloc(cap * sizeof *offs);
    cr_assert_not_null(offs);
    uint64_t s = seed;
    for (;;) {
        uint64_t len = oat_rand(&s) % 4 ? oat_range(&s, 1, 16 * PG) : oat_range(&s, PG, 4 * MIB);
        int rc = fx_offset_alloc_alloc(a, len, &offs[n]);
        if (rc == FLUXON_ERR_NO_SPACE) break;
        cr_assert_eq(rc, FLUXON_OK);
        if (n > 0) cr_assert_gt(offs[n], offs[n - 1], "fill not in address order");
        n++;
    }
    cr_assert_gt(n, 100);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    if (order == 0) {
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)(oat_rand(&s) % i);
            uint64_t t = offs[i - 1];
            offs[i - 1] = offs[j];
            offs[j] = t;
        }
    }
    /* A fresh range hands out ascending offsets, so fill order is address order. */
    for (size_t k = 0; k < n; k++) {
        size_t i = order == 2 ? n - 1 - k : k;
        cr_assert_eq(fx_offset_alloc_free(a, offs[i]), FLUXON_OK);
        if (k % 64 == 0) cr_assert_eq(fx_offset_alloc_check(a), 0);
    }
    cr_assert_eq(fx_offset_alloc_count(a), 0);
    cr_assert_eq(fx_offset_alloc_used(a), 0);
    cr_assert_eq(fx_offset_alloc_free_bytes(a), size);
    cr_assert_eq(fx_offset_alloc_largest_free(a), size);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    /* Proof that it is one block: the whole range fits in one allocation at base. */
    uint64_t off;
    cr_assert_eq(fx_offset_alloc_alloc(a, size, &off), FLUXON_OK);
    cr_assert_eq(off, base);
    free(offs);
    fx_offset_alloc_destroy(a);
}

Test(offset_alloc, full_coalescing_random_order) { oat_fill_and_drain(0, 7); }
Test(offset_alloc, full_coalescing_ascending) { oat_fill_and_drain(1, 8); }
Test(offset_alloc, full_coalescing_descending) { oat_fill_and_drain(2, 9); }

Test(offset_alloc, merges_both_neighbours)
{
    fx_offset_alloc_t *a = oat_create(0, 5 * PG);
    uint64_t o[5];
    for (int i = 0; i < 5; i++) cr_assert_eq(fx_offset_alloc_alloc(a, PG, &o[i]), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_free(a, o[1]), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_free(a, o[3]), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_largest_free(a), PG);
    cr_assert_eq(fx_offset_alloc_free(a, o[2]), FLUXON_OK); /* joins o[1]..o[3] */
    cr_assert_eq(fx_offset_alloc_largest_free(a), 3 * PG);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    uint64_t off;
    cr_assert_eq(fx_offset_alloc_alloc(a, 3 * PG, &off), FLUXON_OK);
    cr_assert_eq(off, o[1]);
    fx_offset_alloc_destroy(a);
}

/* ---- exact fit: a request fails only when no free block truly fits ---- */

Test(offset_alloc, falls_back_to_own_size_class)
{
    /* A 1000-page free hole (pinned by a 1-page guard so it cannot grow) lies in the class
     * [992, 1008) pages. A 993-page request rounds up to the 1008 class for the O(1) search,
     * which is empty; it must still be served from the 1000-page hole. */
    fx_offset_alloc_t *a = oat_create(0, 1001 * PG);
    uint64_t hole, guard, off, rest;
    cr_assert_eq(fx_offset_alloc_alloc(a, 1000 * PG, &hole), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_alloc(a, PG, &guard), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_free(a, hole), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_largest_free(a), 1000 * PG);
    cr_assert_eq(fx_offset_alloc_alloc(a, 1001 * PG, &off), FLUXON_ERR_NO_SPACE);
    cr_assert_eq(fx_offset_alloc_alloc(a, 993 * PG - 100, &off), FLUXON_OK);
    cr_assert_eq(off, hole);
    cr_assert_eq(fx_offset_alloc_alloc(a, 8 * PG, &rest), FLUXON_ERR_NO_SPACE);
    cr_assert_eq(fx_offset_alloc_alloc(a, 7 * PG, &rest), FLUXON_OK);
    cr_assert_eq(rest, hole + 993 * PG);
    cr_assert_eq(fx_offset_alloc_free_bytes(a), 0);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    fx_offset_alloc_destroy(a);
}

/* ---- utilization ----
 * Workload: a 1 GiB range; each step, with probability 1/8 free a uniformly chosen live
 * allocation (if any), otherwise allocate a length uniform in [4 KiB, 4.5 MiB] bytes (KV
 * pages of typical models), until the first NO_SPACE. At that failure we assert, for each
 * of 32 seeds:
 *   (1) it is genuine: largest_free < align_up(request, 4 KiB), so no free block fits;
 *   (2) used / size >= 0.97 (strict: the failed request is not counted as used).
 * (2) implies the weaker "used + request > 0.97 * size". Denser freeing fragments the range
 * more for any placement policy (an address-ordered best fit measures the same as this
 * allocator at 1/3 frees: ~0.95 minimum); 1/8 is a fill with moderate churn. */
Test(offset_alloc, utilization_before_first_failure)
{
    const uint64_t size = 1 * GIB;
    const int seeds = 32;
    double min_u = 1.0, sum_u = 0.0;
    uint64_t *live = malloc((size / PG) * sizeof *live);
    cr_assert_not_null(live);
    for (int seed = 1; seed <= seeds; seed++) {
        fx_offset_alloc_t *a = oat_create(0, size);
        uint64_t s = (uint64_t)seed * 1000003u;
        size_t n = 0;
        for (;;) {
            if (n > 0 && oat_rand(&s) % 8 == 0) {
                size_t v = (size_t)(oat_rand(&s) % n);
                cr_assert_eq(fx_offset_alloc_free(a, live[v]), FLUXON_OK);
                live[v] = live[--n];
                continue;
            }
            uint64_t len = oat_range(&s, 4096, 4718592);
            int rc = fx_offset_alloc_alloc(a, len, &live[n]);
            if (rc == FLUXON_OK) {
                n++;
                continue;
            }
            cr_assert_eq(rc, FLUXON_ERR_NO_SPACE);
            uint64_t need = FX_ALIGN_UP(len, PG);
            cr_assert_lt(fx_offset_alloc_largest_free(a), need,
                         "seed %d: NO_SPACE for %llu B while a %llu B block is free", seed,
                         (unsigned long long)need,
                         (unsigned long long)fx_offset_alloc_largest_free(a));
            double u = (double)fx_offset_alloc_used(a) / (double)size;
            cr_assert_geq(u, 0.97, "seed %d: utilization %.4f at the first failure", seed, u);
            min_u = FX_MIN(min_u, u);
            sum_u += u;
            break;
        }
        cr_assert_eq(fx_offset_alloc_check(a), 0);
        fx_offset_alloc_destroy(a);
    }
    free(live);
    cr_log_info("utilization at first NO_SPACE over %d seeds: min %.4f mean %.4f", seeds, min_u,
                sum_u / seeds);
    fprintf(stderr, "offset_alloc utilization at first NO_SPACE (%d seeds): min %.4f mean %.4f\n",
            seeds, min_u, sum_u / seeds);
}

/* ---- randomized stress against the shadow bitmap ---- */

typedef struct oat_live {
    uint64_t off, len; /* len rounded */
} oat_live_t;

Test(offset_alloc, random_stress_200k, .timeout = 120)
{
    const uint64_t base = 1 * MIB, size = 1 * GIB;
    const int ops = 200000;
    fx_offset_alloc_t *a = oat_create(base, size);
    oat_shadow_t sh;
    oat_shadow_init(&sh, base, size);
    oat_live_t *live = malloc((size / PG) * sizeof *live);
    cr_assert_not_null(live);
    size_t n = 0;
    uint64_t s = 0xF1u, used = 0, nospace = 0, allocs = 0, frees = 0;
    for (int op = 0; op < ops; op++) {
        /* Phases of 25k ops alternate between filling and draining, so the range goes from
         * empty to full (NO_SPACE) and back several times. */
        unsigned alloc_pct = (op / 25000) % 2 == 0 ? 70 : 35;
        unsigned r = (unsigned)(oat_rand(&s) % 100);
        if (r < alloc_pct || n == 0) {
            uint64_t len;
            switch (oat_rand(&s) % 4) {
            case 0: len = oat_range(&s, 1, 32 * PG); break;       /* exact small classes */
            case 1: len = oat_range(&s, 32 * PG, 512 * PG); break;
            default: len = oat_range(&s, 4096, 4718592); break;   /* KV-page sizes */
            }
            uint64_t off = 0, need = FX_ALIGN_UP(len, PG);
            int rc = fx_offset_alloc_alloc(a, len, &off);
            if (rc == FLUXON_ERR_NO_SPACE) {
                nospace++;
                cr_assert_lt(fx_offset_alloc_largest_free(a), need);
                if (nospace % 64 == 1) cr_assert_lt(oat_shadow_max_free_run(&sh), need);
            } else {
                cr_assert_eq(rc, FLUXON_OK);
                oat_shadow_mark(&sh, off, need, true);
                live[n++] = (oat_live_t){off, need};
                used += need;
                allocs++;
            }
        } else {
            size_t v = (size_t)(oat_rand(&s) % n);
            oat_live_t l = live[v];
            if (oat_rand(&s) % 16 == 0) {
                /* Misuse never changes anything: an interior page, or a free page. */
                oat_counters_t c = oat_counters(a);
                if (l.len > PG) cr_assert_eq(fx_offset_alloc_free(a, l.off + PG), FLUXON_ERR_NOT_FOUND);
                uint64_t p = oat_rand(&s) % sh.pages;
                if (!oat_bit(&sh, p))
                    cr_assert_eq(fx_offset_alloc_free(a, base + p * PG), FLUXON_ERR_NOT_FOUND);
                oat_assert_same(c, oat_counters(a));
            }
            uint64_t got = 0;
            cr_assert_eq(fx_offset_alloc_size_of(a, l.off, &got), FLUXON_OK);
            cr_assert_eq(got, l.len);
            cr_assert_eq(fx_offset_alloc_free(a, l.off), FLUXON_OK);
            cr_assert_eq(fx_offset_alloc_free(a, l.off), FLUXON_ERR_NOT_FOUND);
            oat_shadow_mark(&sh, l.off, l.len, false);
            live[v] = live[--n];
            used -= l.len;
            frees++;
        }
        cr_assert_eq(fx_offset_alloc_used(a), used);
        cr_assert_eq(fx_offset_alloc_count(a), n);
        if (op % 1000 == 0) cr_assert_eq(fx_offset_alloc_check(a), 0, "op %d", op);
        if (op % 5000 == 0)
            cr_assert_eq(fx_offset_alloc_largest_free(a), oat_shadow_max_free_run(&sh), "op %d", op);
    }
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    cr_assert_gt(nospace, 0, "the stress never filled the range");
    cr_assert_gt(allocs, 50000);
    cr_assert_gt(frees, 50000);
    while (n > 0) {
        cr_assert_eq(fx_offset_alloc_free(a, live[n - 1].off), FLUXON_OK);
        n--;
    }
    cr_assert_eq(fx_offset_alloc_largest_free(a), size);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    free(live);
    free(sh.bits);
    fx_offset_alloc_destroy(a);
}

/* ---- bench entry point runs (figures are printed, not checked) ---- */

Test(offset_alloc, bench_runs)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(fx_offset_alloc_bench(f, 20000), 0);
    fclose(f);
    cr_assert(strstr(buf, "offset_alloc: 20000 alloc+free pairs in ") != NULL, "%s", buf);
    cr_assert(strstr(buf, "M ops/s") != NULL);
    free(buf);
    cr_assert_eq(fx_offset_alloc_bench(NULL, 1), FLUXON_ERR_INVALID_ARGUMENT);
}

Test(offset_alloc, reserve_marks_ranges_allocated_as_alloc_would)
{
    fx_offset_alloc_t *a = NULL;
    cr_assert_eq(fx_offset_alloc_create(4096, 64 * 4096, &a), FLUXON_OK);
    /* reserve in the middle, at the start and at the end of free blocks */
    cr_assert_eq(fx_offset_alloc_reserve(a, 4096 + 10 * 4096, 3 * 4096), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_reserve(a, 4096, 4096), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_reserve(a, 4096 + 63 * 4096, 100), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    cr_assert_eq(fx_offset_alloc_used(a), 5 * 4096);
    /* overlaps and bad input change nothing */
    cr_assert_eq(fx_offset_alloc_reserve(a, 4096 + 11 * 4096, 4096), FLUXON_ERR_BUSY);
    cr_assert_eq(fx_offset_alloc_reserve(a, 4096 + 9 * 4096, 2 * 4096), FLUXON_ERR_BUSY);
    cr_assert_eq(fx_offset_alloc_reserve(a, 4097, 4096), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_reserve(a, 4096 + 64 * 4096, 4096), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_reserve(a, 4096, 0), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_offset_alloc_used(a), 5 * 4096);
    /* allocations never overlap reserved ranges; frees coalesce everything back */
    uint64_t off[64];
    int n = 0;
    while (n < 64 && fx_offset_alloc_alloc(a, 4096, &off[n]) == FLUXON_OK) {
        cr_assert(!(off[n] >= 4096 + 10 * 4096 && off[n] < 4096 + 13 * 4096) && off[n] != 4096 &&
                  off[n] != 4096 + 63 * 4096, "offset %llu overlaps a reserved range", (unsigned long long)off[n]);
        n++;
    }
    cr_assert_eq(n, 59);
    for (int i = 0; i < n; i++) cr_assert_eq(fx_offset_alloc_free(a, off[i]), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_free(a, 4096 + 10 * 4096), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_free(a, 4096), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_free(a, 4096 + 63 * 4096), FLUXON_OK);
    cr_assert_eq(fx_offset_alloc_check(a), 0);
    cr_assert_eq(fx_offset_alloc_largest_free(a), 64 * 4096);
    fx_offset_alloc_destroy(a);
}
