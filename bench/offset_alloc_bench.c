/* offset_alloc_bench.c — throughput figure for the master's segment allocator: free+alloc
 * pairs per second with random KV-page sizes (4 KiB .. 8 MiB) on a half-full 64 GiB range,
 * the steady state a master sees while owners churn values. */
#include "bench.h"
#include "offset_alloc.h"

#include <inttypes.h>

/* splitmix64: deterministic across runs so figures are comparable. */
static uint64_t oa_bench_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t oa_bench_len(uint64_t *s)
{
    return FX_OFFSET_ALLOC_PAGE + oa_bench_rand(s) % (8ull * 1024 * 1024 - FX_OFFSET_ALLOC_PAGE + 1);
}

FX_INTERNAL int fx_offset_alloc_bench(FILE *out, uint64_t ops)
{
    if (!out || ops == 0) return FLUXON_ERR_INVALID_ARGUMENT;
    const uint64_t seg = 64ull << 30;
    /* Mean request is ~4 MiB, so ~16384 would fill the range; keep about half live. */
    const size_t target = (size_t)(seg / (4ull << 20) / 2);
    fx_offset_alloc_t *a = NULL;
    int rc = fx_offset_alloc_create(0, seg, &a);
    if (rc != FLUXON_OK) return rc;
    uint64_t *live = fx_malloc(target * sizeof *live);
    if (!live) {
        fx_offset_alloc_destroy(a);
        return FLUXON_ERR_NOMEM;
    }
    uint64_t s = 42;
    size_t n = 0;
    while (n < target && fx_offset_alloc_alloc(a, oa_bench_len(&s), &live[n]) == FLUXON_OK) n++;

    uint64_t failed = 0;
    uint64_t t0 = fx_now_ns();
    for (uint64_t k = 0; k < ops && n > 0; k++) {
        size_t v = (size_t)(oa_bench_rand(&s) % n);
        rc = fx_offset_alloc_free(a, live[v]);
        FX_ASSERT(rc == FLUXON_OK);
        if (fx_offset_alloc_alloc(a, oa_bench_len(&s), &live[v]) != FLUXON_OK) {
            live[v] = live[--n];
            failed++;
        }
    }
    double secs = (double)(fx_now_ns() - t0) / 1e9;
    fprintf(out, "offset_alloc: %" PRIu64 " alloc+free pairs in %.2f s = %.2f M ops/s"
                 " (%zu live, %" PRIu64 " no-space)\n",
            ops, secs, secs > 0 ? (double)ops / secs / 1e6 : 0.0, n, failed);
    fx_free(live);
    fx_offset_alloc_destroy(a);
    return 0;
}
