/* bloom.h — a Bloom filter of 64-bit key hashes over the caller's memory (no removal), for
 * the owner's record of the keys it may have copied to other owners (issue 38): a key the
 * filter never saw was never copied by this owner. Four bits a key, all in one 64-byte
 * block of the filter (one cache line: one miss an add or a test), from the mixed
 * caller's hash; m bits, a power of two. Pure: no I/O, no
 * allocation. Single-threaded. */
#ifndef FX_BLOOM_H
#define FX_BLOOM_H

#include "fx.h"

typedef struct fx_bloom {
    uint64_t *bits;  /* the caller's words, m / 64 of them */
    uint64_t mask;   /* m - 1 */
    uint64_t added;  /* additions (each may set up to 3 bits) */
} fx_bloom_t;

/* Bits for about n keys at 16 bits a key: the next power of two >= 16 n, between 2^16 and
 * 2^28 (32 MiB); the false-positive rate at n keys is about 0.3 % (measured: 0.28 % at 16 bits a
 * key; three bits spread over the whole filter, before session 33, gave 0.49 %). */
FX_INTERNAL uint64_t fx_bloom_bits_for(uint64_t n);
/* Over words (bits / 64 of the caller's, zeroed here; 64-byte aligned, or a block spans two
 * cache lines); bits a power of two >= 512 (one block; asserted). */
FX_INTERNAL void fx_bloom_init(fx_bloom_t *b, uint64_t *words, uint64_t bits);
FX_INTERNAL void fx_bloom_add(fx_bloom_t *b, uint64_t h);
/* false: h was never added; true: it may have been. */
FX_INTERNAL bool fx_bloom_may_contain(const fx_bloom_t *b, uint64_t h);

#endif
