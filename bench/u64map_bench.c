/* u64map_bench.c — the u64-keyed map (cache/u64map.c) next to its peer, the string-keyed
 * fx_hmap with the same 8-byte keys (what the owner's by_offset and holders used before):
 * n segment offsets (multiples of 4 KiB) inserted, then hit, missed and deleted in a
 * shuffled order so the lookups miss the caches. */
#include "bench.h"
#include "hmap.h"
#include "u64map.h"

#include <inttypes.h>

static uint64_t u64b_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void u64b_line(FILE *out, const char *what, uint64_t n, uint64_t ns_u64, uint64_t ns_hmap)
{
    double a = (double)ns_u64 / (double)n, b = (double)ns_hmap / (double)n;
    fprintf(out, "u64map %-8s %10" PRIu64 " ops  %7.1f ns/op   fx_hmap (8-byte keys) %7.1f ns/op   %.2fx\n", what, n,
            a, b, a > 0 ? b / a : 0.0);
}

FX_INTERNAL int fx_u64map_bench(FILE *out, uint64_t n)
{
    if (!out || n == 0 || n > (1ull << 28)) return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t *order = fx_malloc((size_t)n * sizeof *order);
    fx_u64map_t u = {0};
    fx_hmap_t *h = NULL;
    int rc = FLUXON_ERR_NOMEM;
    if (!order || fx_hmap_create(0, &h) != FLUXON_OK) goto out;
    uint64_t s = 7;
    for (uint64_t i = 0; i < n; i++) order[i] = i;
    for (uint64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        uint64_t j = u64b_rand(&s) % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    uint64_t t[2][4];
    uintptr_t sum[2] = {0, 0};
    for (int m = 0; m < 2; m++) {
        uint64_t t0 = fx_now_ns();
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = 4096 * (i + 1);
            void *v = (void *)(uintptr_t)(i + 1);
            if ((m ? fx_hmap_put(h, &k, sizeof k, v, NULL) : fx_u64map_put(&u, k, v, NULL)) != FLUXON_OK) goto out;
        }
        t[m][0] = fx_now_ns() - t0;
        t0 = fx_now_ns();
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = 4096 * (order[i] + 1);
            sum[m] += (uintptr_t)(m ? fx_hmap_get(h, &k, sizeof k) : fx_u64map_get(&u, k));
        }
        t[m][1] = fx_now_ns() - t0;
        t0 = fx_now_ns();
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = 4096 * (order[i] + 1) + 1; /* never stored */
            sum[m] += (uintptr_t)(m ? fx_hmap_get(h, &k, sizeof k) : fx_u64map_get(&u, k));
        }
        t[m][2] = fx_now_ns() - t0;
        t0 = fx_now_ns();
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = 4096 * (order[i] + 1);
            if ((m ? fx_hmap_del(h, &k, sizeof k, NULL) : fx_u64map_del(&u, k, NULL)) != FLUXON_OK) goto out;
        }
        t[m][3] = fx_now_ns() - t0;
    }
    FX_ASSERT(sum[0] == (uintptr_t)(n * (n + 1) / 2) && sum[1] == sum[0]);
    FX_ASSERT(fx_u64map_count(&u) == 0 && fx_hmap_count(h) == 0);
    const char *what[4] = {"put-new", "get-hit", "get-miss", "del"};
    for (int i = 0; i < 4; i++) u64b_line(out, what[i], n, t[0][i], t[1][i]);
    rc = FLUXON_OK;
out:
    fx_u64map_free(&u);
    fx_hmap_destroy(h);
    fx_free(order);
    return rc;
}
