/* offset_alloc.h — the master's per-owner-segment offset allocator (ARCHITECTURE §6): hands
 * out 4 KiB-aligned ranges of [base, base+size) for reserve grants and remote-put targets.
 * Only bookkeeping: the segment's bytes live at the owner and are never touched here. */
#ifndef FX_OFFSET_ALLOC_H
#define FX_OFFSET_ALLOC_H

#include <stdio.h>

#include "fx.h"

/* Granularity of every allocation: offsets are multiples of it, lengths round up to it. */
#define FX_OFFSET_ALLOC_PAGE 4096u

/* One allocator per owner segment. TLSF (two-level segregated fit, Masmano et al. 2004)
 * with block headers kept in a side node pool: alloc and free are O(1) apart from the
 * documented exceptions below; a freed range is coalesced at once with free neighbours.
 *
 * Threads: none of these functions lock; the allocator belongs to one thread (the master
 * reactor, §3). Ownership: the allocator owns all its bookkeeping memory and frees it in
 * fx_offset_alloc_destroy; offsets it returns are plain numbers, not owned memory.
 * Units: every offset and length is in bytes. Offsets are absolute (they include base). */
typedef struct fx_offset_alloc fx_offset_alloc_t;

/* Creates an allocator managing [base, base + size), all of it free.
 * Returns FLUXON_OK and sets *a_p; FLUXON_ERR_INVALID_ARGUMENT when a_p is NULL, size is 0,
 * base or size is not a multiple of FX_OFFSET_ALLOC_PAGE, or the range passes 2^64;
 * FLUXON_ERR_NOMEM. *a_p is set only on success. */
FX_INTERNAL int fx_offset_alloc_create(uint64_t base, uint64_t size, fx_offset_alloc_t **a_p);

/* Frees the allocator and its bookkeeping; live allocations are forgotten. NULL is a no-op. */
FX_INTERNAL void fx_offset_alloc_destroy(fx_offset_alloc_t *a);

/* Allocates align_up(len, FX_OFFSET_ALLOC_PAGE) bytes; *offset_p gets the absolute offset of
 * the first byte (a multiple of FX_OFFSET_ALLOC_PAGE). The request fails only when no free
 * block is large enough (good-fit search first, then an exact search of the one size class
 * it skipped; that second search walks one free list, so it is O(blocks in that class)).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (a or offset_p NULL, len 0 or len > size);
 * FLUXON_ERR_NO_SPACE (no free block fits; nothing changed); FLUXON_ERR_NOMEM (the side
 * structures could not grow; nothing changed). *offset_p is set only on success. */
FX_INTERNAL int fx_offset_alloc_alloc(fx_offset_alloc_t *a, uint64_t len, uint64_t *offset_p);

/* Frees the allocation that starts at offset (absolute, as returned by alloc). O(1) average
 * (a hash lookup). Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND when offset is not the start of a
 * live allocation (a double free, an interior, unaligned or out-of-range offset): the state
 * is left unchanged; FLUXON_ERR_INVALID_ARGUMENT when a is NULL. Never allocates. */
FX_INTERNAL int fx_offset_alloc_free(fx_offset_alloc_t *a, uint64_t offset);

/* Marks [offset, offset + len) (offset 4096-aligned, len rounded up to 4096) allocated,
 * as if fx_offset_alloc_alloc had returned offset: used when a restarted master learns
 * the ranges an owner already holds. The range must lie inside one free block.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (misaligned, zero, outside the range);
 * FLUXON_ERR_BUSY (overlaps an allocation); FLUXON_ERR_NOMEM. O(blocks). */
FX_INTERNAL int fx_offset_alloc_reserve(fx_offset_alloc_t *a, uint64_t offset, uint64_t len);

/* Sets *len_p to the (rounded) length of the live allocation starting at offset.
 * Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND as for free; FLUXON_ERR_INVALID_ARGUMENT for NULL. */
FX_INTERNAL int fx_offset_alloc_size_of(const fx_offset_alloc_t *a, uint64_t offset,
                                        uint64_t *len_p);

/* Counters, O(1); a must not be NULL. used: bytes in live allocations (rounded lengths);
 * free_bytes: size - used (possibly in several blocks); count: live allocations. */
FX_INTERNAL uint64_t fx_offset_alloc_used(const fx_offset_alloc_t *a);
FX_INTERNAL uint64_t fx_offset_alloc_free_bytes(const fx_offset_alloc_t *a);
FX_INTERNAL size_t fx_offset_alloc_count(const fx_offset_alloc_t *a);

/* Size in bytes of the largest free block: the largest len that alloc would satisfy now.
 * 0 when full. a must not be NULL. O(blocks in the highest non-empty size class). */
FX_INTERNAL uint64_t fx_offset_alloc_largest_free(const fx_offset_alloc_t *a);

/* Full consistency walk, O(blocks + size classes + hash capacity), for tests and debug
 * builds: blocks tile [base, base+size) exactly with consistent neighbour links, no two
 * free blocks are adjacent, every free block is on the list of its size class and nothing
 * else is, the bitmaps match the lists, the offset map holds exactly the live allocations,
 * and the counters match. Returns 0 when consistent; otherwise logs the first broken
 * invariant and returns FLUXON_ERR_INTERNAL. */
FX_INTERNAL int fx_offset_alloc_check(const fx_offset_alloc_t *a);

#endif /* FX_OFFSET_ALLOC_H */
