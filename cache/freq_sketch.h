/* freq_sketch.h — a count-min sketch of how often keys were seen (TinyLFU's frequency
 * sketch: Einziger et al., "TinyLFU: A Highly Efficient Cache Admission Policy", 2017), for
 * the owner's write-back admission (issue 38): a value is worth a copy on a CPU owner when
 * its key was seen at least twice (a hit while hot, or a put again after an eviction).
 *
 * Four 2-bit counters a key (saturating at 3: the owner asks only "twice or more?"), all in
 * one 64-byte block of the table (a blocked count-min, as Caffeine's sketch: one cache miss
 * a call, not four), one in each quarter of the block, chosen by different bits of the
 * mixed hash; the estimate is the minimum of the four. Ageing: after width / 2 additions
 * every counter is halved, so old popularity fades (and no row is more than half full: a key
 * seen once reads as twice with probability < (1 - e^-0.5)^4 = 2.4 %). Sizing, measured by
 * replaying the conversation trace through an LRU hot tier of 10,000 values and a CPU tier
 * of as many: 64 counters per hot value (1 M a row) gives 28.31 % prefix hits with 29 % of
 * the evicted values copied (exact counts: 28.43 %), 4 per value gave 26.5 % with 78 % copied
 * (the rows fill up). 2-bit counters (session 32; 8-bit ones before, saturating at 15) make
 * that table 1 MiB instead of 4, which an owner's core keeps in its L2 cache: every put's add
 * missed to L3 before (~430 cycles, ~3 us of the owner's CPU a request in the replay).
 * Pure: no I/O, no clock, no allocation (the caller's memory, as the eviction policy's
 * ghost), so the same code runs in the owner and in the offline simulator. Single-threaded. */
#ifndef FX_FREQ_SKETCH_H
#define FX_FREQ_SKETCH_H

#include "fx.h"

typedef struct fx_freq_sketch {
    uint8_t *c;      /* 4 rows x width 2-bit counters (the caller's memory: width bytes) */
    uint64_t mask;   /* width - 1: the table's bytes (width: a power of two, >= 1,024) */
    uint64_t width;  /* counters a row */
    uint64_t adds;   /* additions since the last halving */
    uint64_t halvings;
} fx_freq_sketch_t;

/* Bytes of caller memory for a cache of about `keys` values: 4 rows of width = the next
 * power of two >= 64 x keys 2-bit counters, between 1,024 and 2^22 per row: width bytes (at
 * most 4 MiB). */
FX_INTERNAL size_t fx_freq_sketch_bytes(uint64_t keys);
/* Over counters (fx_freq_sketch_bytes(keys) bytes of the caller's, zeroed here; the caller
 * frees them after the sketch). counters NULL: an unmade sketch (adds nothing, reads 0). */
FX_INTERNAL void fx_freq_sketch_init(fx_freq_sketch_t *s, uint64_t keys, uint8_t *counters);
/* One more sighting of the key with hash h; returns its estimate after it (as
 * fx_freq_sketch_estimate, read from the same cache line: no second miss; 0 unmade). */
FX_INTERNAL uint32_t fx_freq_sketch_add(fx_freq_sketch_t *s, uint64_t h);
/* Starts loading the cache line fx_freq_sketch_add(s, h) will use (no-op unmade): a batch's
 * adds then overlap their misses instead of paying one after another. */
FX_INTERNAL void fx_freq_sketch_prefetch(const fx_freq_sketch_t *s, uint64_t h);
/* Sightings of h (an overestimate at worst, never below the true count since the last
 * halvings' effect), 0..3 (3: three or more). */
FX_INTERNAL uint32_t fx_freq_sketch_estimate(const fx_freq_sketch_t *s, uint64_t h);

#endif
