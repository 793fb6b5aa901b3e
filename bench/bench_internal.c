/* bench_internal.c — benchmarks of internal modules (built by `make bench`, linked with
 * the separately compiled objects): offset allocator alloc+free ops/s, hash map ops/s
 * (string keys; u64 keys next to fx_hmap), the owner's claims and eviction per request at
 * 10 k, 100 k and 1 M resident values ("evict"; EVICT_BENCH_MIN/_MAX bound n),
 * the disk tier store's reads ("disk [DIR [QD]]", not in "all": 64 x 4.5 MiB and
 * 1,024 x 16 KiB, next to bench/disk_fio.sh), its re-index time ("disk-recover [DIR [N
 * [VLEN]]]", not in "all": 1 M records of 4 KiB by default), and owner-to-owner UCX transfers of 64 x 4.5 MiB over tcp and shared memory next to
 * ucx_perftest for the same transport and size. Figures, not pass/fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "offset_alloc.h"
#include "ucx_dp.h"

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : "all";
    int rc = 0;
    if (!strcmp(only, "all") || !strcmp(only, "alloc")) rc |= fx_offset_alloc_bench(stdout, 2000000);
    if (!strcmp(only, "all") || !strcmp(only, "hmap")) rc |= fx_hmap_bench(stdout, 1000000);
    if (!strcmp(only, "all") || !strcmp(only, "u64map")) rc |= fx_u64map_bench(stdout, 1000000);
    if (!strcmp(only, "evict")) { /* issue 44: claims and eviction per request at 10 k .. 1 M values */
        const char *max_s = getenv("EVICT_BENCH_MAX");
        const char *min_s = getenv("EVICT_BENCH_MIN");
        uint64_t max = max_s ? strtoull(max_s, NULL, 10) : 1000000, min = min_s ? strtoull(min_s, NULL, 10) : 10000;
        for (uint64_t n = FX_MAX(min, 10000u); n <= max; n *= 10) rc |= fx_evict_bench(stdout, n, 200);
    }
    if (!strcmp(only, "disk")) { /* issue 39: disk tier reads; `disk [DIR [QD]]` (not in "all") */
        const char *dir = argc > 2 ? argv[2] : "build";
        uint64_t qd = argc > 3 ? strtoull(argv[3], NULL, 10) : 32;
        rc |= fx_disk_bench(stdout, dir, 64, 4718592, qd);
        rc |= fx_disk_bench(stdout, dir, 1024, 16384, qd);
    }
    if (!strcmp(only, "disk-recover")) { /* issue 39: re-index time; `disk-recover [DIR [N [VLEN]]]` */
        const char *dir = argc > 2 ? argv[2] : "build";
        uint64_t n = argc > 3 ? strtoull(argv[3], NULL, 10) : 1000000;
        uint64_t vlen = argc > 4 ? strtoull(argv[4], NULL, 10) : 4096;
        rc |= fx_disk_recover_bench(stdout, dir, n, vlen);
    }
    if (!strcmp(only, "all") || !strcmp(only, "ucx")) {
        rc |= fx_ucx_bench(stdout, "tcp", 64, 4718592, 5);
        rc |= fx_ucx_bench(stdout, "posix,sysv,self", 64, 4718592, 5);
    }
    return rc ? 1 : 0;
}
