/* bench.h — micro-benchmarks of internal modules, printed next to their peer. Built by
 * `make bench` (bench_internal) and the unit suites that check the entry points run; never
 * part of the library or the amalgamation. */
#ifndef FX_BENCH_H
#define FX_BENCH_H

#include "fx.h" /* first: it defines _GNU_SOURCE */

#include <stdio.h>

/* Benchmark (hmap_bench.c): n distinct 68-byte hex page keys (64 hex + "_0_2"); prints to
 * out the ops/s of inserting all of them (growing from empty), random-order hits, misses,
 * value replacements and deletions. Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (out
 * NULL or n 0); FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_hmap_bench(FILE *out, uint64_t n);

/* Benchmark (u64map_bench.c): n segment offsets in the u64-keyed map and, as its peer,
 * in fx_hmap with the same 8-byte keys: inserts, shuffled hits, misses and deletions, one
 * line each with both ns/op. Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (out NULL, n 0
 * or above 2^28); FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_u64map_bench(FILE *out, uint64_t n);

/* Benchmark (offset_alloc_bench.c): after a warm-up fill, runs `ops` free+alloc pairs with
 * random sizes 4 KiB .. 8 MiB on a large range and prints one line with pairs per second
 * to out. Returns 0; FLUXON_ERR_INVALID_ARGUMENT (out NULL or ops 0); FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_offset_alloc_bench(FILE *out, uint64_t ops);

/* Benchmark (ucx_bench.c): two processes (fork) each with an n_ranges x range_len
 * region exchange worker address + rkey over a socketpair; the parent measures GET and
 * PUT of the whole batch `iters` times per mechanism (median GB/s, 1 GB = 1e9 B), then
 * runs ucx_perftest (server + client on 127.0.0.1, UCX_TLS=tls) for the same size and
 * prints both and their ratio. Waits are bounded, children are always reaped.
 * Returns FLUXON_OK, or an error if the measurement itself failed. */
FX_INTERNAL int fx_ucx_bench(FILE *out, const char *tls, size_t n_ranges, size_t range_len,
                             int iters);

/* Benchmark (evict_bench.c, issue 44): an embedded master and one owner whose hot tier
 * holds n values of 4 KiB, filled by batch puts of 64, then `rounds` put batches of 64 that
 * each evict 64 values of the same size and `rounds` of another size (grants retired and
 * re-carved); prints the fill time and each phase's p50/p90 batch wall time. Returns
 * FLUXON_OK, or the first failure (printed). */
FX_INTERNAL int fx_evict_bench(FILE *out, uint64_t n, uint64_t rounds);

/* Benchmark (disk_bench.c, issue 39): n records of vlen bytes appended to the disk tier's
 * store in a fresh directory under dir, then read back (checked) with qd reads in flight,
 * shuffled, for at least a second; prints GB/s, IOPS and the I/O mode (O_DIRECT or
 * buffered), and removes the directory. Returns FLUXON_OK, or the first failure. */
FX_INTERNAL int fx_disk_bench(FILE *out, const char *dir, uint64_t n, uint64_t vlen, uint64_t qd);

/* Benchmark (disk_recover_bench.c, issue 39): n records of vlen bytes appended, the store
 * closed and reopened (the rebuild from the index blocks), then reopened with the last
 * segment unsealed (scanned); prints recover_ms and the records recovered for both and
 * removes the directory. Returns FLUXON_OK, or the first failure. */
FX_INTERNAL int fx_disk_recover_bench(FILE *out, const char *dir, uint64_t n, uint64_t vlen);

#endif
