/* hmap_bench.c — throughput figures for the string-keyed hash map with the keys the cache
 * really uses: 68-byte page keys (64 hex chars + "_0_2"). Inserts grow the map from empty;
 * lookups, replacements and deletions run in a shuffled order so they miss the caches; then
 * inserts, hits and deletions of the same keys in an intrusive map (values hold their keys). */
#include "bench.h"
#include "hmap.h"

#include <inttypes.h>
#include <stddef.h>

#define HM_BENCH_KLEN 68u

/* splitmix64: deterministic across runs so figures are comparable. */
static uint64_t hm_bench_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void hm_bench_key(char *k, uint64_t *s)
{
    static const char hex[] = "0123456789abcdef";
    for (unsigned w = 0; w < 4; w++) {
        uint64_t r = hm_bench_rand(s);
        for (unsigned j = 0; j < 16; j++) k[w * 16 + j] = hex[(r >> (4 * j)) & 15];
    }
    memcpy(k + 64, "_0_2", 4);
}

typedef struct hm_bench_obj {
    const char *key;
    uint32_t klen;
} hm_bench_obj_t;

static void hm_bench_line(FILE *out, const char *what, uint64_t n, uint64_t ns)
{
    double s = (double)(ns ? ns : 1) / 1e9;
    fprintf(out, "hmap %-18s %10" PRIu64 " ops  %8.1f ns/op  %12.0f ops/s\n", what, n,
            (double)ns / (double)n, (double)n / s);
}

/* Deletes every key of keys (in order[]) from m, timed as one line; each must be there. */
static void hm_bench_del(FILE *out, fx_hmap_t *m, const char *keys, const size_t *order, uint64_t n,
                         const char *what)
{
    uint64_t t0 = fx_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        int d = fx_hmap_del(m, keys + order[i] * HM_BENCH_KLEN, HM_BENCH_KLEN, NULL);
        FX_ASSERT(d == FLUXON_OK);
    }
    hm_bench_line(out, what, n, fx_now_ns() - t0);
}

FX_INTERNAL int fx_hmap_bench(FILE *out, uint64_t n)
{
    if (!out || n == 0 || n > (SIZE_MAX / HM_BENCH_KLEN / 2)) return FLUXON_ERR_INVALID_ARGUMENT;
    char *keys = fx_malloc((size_t)n * HM_BENCH_KLEN);
    char *miss = fx_malloc((size_t)n * HM_BENCH_KLEN);
    size_t *order = fx_malloc((size_t)n * sizeof *order);
    fx_hmap_t *m = NULL, *im = NULL;
    hm_bench_obj_t *objs = NULL;
    int rc = FLUXON_ERR_NOMEM;
    if (!keys || !miss || !order || fx_hmap_create(0, &m) != FLUXON_OK) goto out;
    uint64_t s = 42;
    for (uint64_t i = 0; i < n; i++) {
        hm_bench_key(keys + i * HM_BENCH_KLEN, &s);
        hm_bench_key(miss + i * HM_BENCH_KLEN, &s);
        order[i] = (size_t)i;
    }
    for (uint64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        size_t j = (size_t)(hm_bench_rand(&s) % (i + 1));
        size_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }

    uint64_t t0 = fx_now_ns();
    for (uint64_t i = 0; i < n; i++)
        if (fx_hmap_put(m, keys + i * HM_BENCH_KLEN, HM_BENCH_KLEN, (void *)(uintptr_t)(i + 1),
                        NULL) != FLUXON_OK)
            goto out;
    uint64_t t1 = fx_now_ns();
    hm_bench_line(out, "put-new", n, t1 - t0);

    uintptr_t sum = 0;
    t0 = fx_now_ns();
    for (uint64_t i = 0; i < n; i++)
        sum += (uintptr_t)fx_hmap_get(m, keys + order[i] * HM_BENCH_KLEN, HM_BENCH_KLEN);
    t1 = fx_now_ns();
    hm_bench_line(out, "get-hit", n, t1 - t0);
    FX_ASSERT(sum == (uintptr_t)(n * (n + 1) / 2));

    t0 = fx_now_ns();
    for (uint64_t i = 0; i < n; i++)
        sum += (uintptr_t)fx_hmap_get(m, miss + order[i] * HM_BENCH_KLEN, HM_BENCH_KLEN);
    t1 = fx_now_ns();
    hm_bench_line(out, "get-miss", n, t1 - t0);
    FX_ASSERT(sum == (uintptr_t)(n * (n + 1) / 2));

    t0 = fx_now_ns();
    for (uint64_t i = 0; i < n; i++)
        if (fx_hmap_put(m, keys + order[i] * HM_BENCH_KLEN, HM_BENCH_KLEN, NULL, NULL) != FLUXON_OK)
            goto out;
    t1 = fx_now_ns();
    hm_bench_line(out, "put-repl", n, t1 - t0);

    hm_bench_del(out, m, keys, order, n, "del");
    FX_ASSERT(fx_hmap_count(m) == 0);

    /* the same keys in an intrusive map (the owner's index: each value holds its key) */
    if (fx_hmap_create_intrusive(0, offsetof(hm_bench_obj_t, key), offsetof(hm_bench_obj_t, klen), &im) != FLUXON_OK ||
        !(objs = fx_malloc((size_t)n * sizeof *objs)))
        goto out;
    for (uint64_t i = 0; i < n; i++) objs[i] = (hm_bench_obj_t){keys + i * HM_BENCH_KLEN, HM_BENCH_KLEN};
    t0 = fx_now_ns();
    for (uint64_t i = 0; i < n; i++)
        if (fx_hmap_put(im, objs[i].key, HM_BENCH_KLEN, &objs[i], NULL) != FLUXON_OK) goto out;
    t1 = fx_now_ns();
    hm_bench_line(out, "put-new, intrusive", n, t1 - t0);
    t0 = fx_now_ns();
    for (uint64_t i = 0; i < n; i++)
        sum += (uintptr_t)(fx_hmap_get(im, keys + order[i] * HM_BENCH_KLEN, HM_BENCH_KLEN) == &objs[order[i]]);
    t1 = fx_now_ns();
    hm_bench_line(out, "get-hit, intrusive", n, t1 - t0);
    FX_ASSERT(sum == (uintptr_t)(n * (n + 1) / 2 + n));
    hm_bench_del(out, im, keys, order, n, "del, intrusive");
    rc = FLUXON_OK;
out:
    fx_hmap_destroy(im);
    fx_free(objs);
    fx_hmap_destroy(m);
    fx_free(order);
    fx_free(miss);
    fx_free(keys);
    return rc;
}

#undef HM_BENCH_KLEN
