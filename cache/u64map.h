/* u64map.h — single-threaded map from a 64-bit key (never 0) to a pointer, for the ids and
 * offsets of the hot path (slot pool grants and waiters, the owner's entries by segment
 * offset, holders by id). Unlike fx_hmap (byte-string keys, one allocation per entry), a
 * key and its value sit together in the slot array: an insert allocates nothing (except
 * when the array doubles) and a lookup touches one cache line, not a slot and an entry.
 * Linear probing over a splitmix64 hash, backward-shift deletion (no tombstones), load
 * factor <= 1/2 (an insert or a miss probes ~2.5 slots: one cache line), the array never
 * shrinks. */
#ifndef FX_U64MAP_H
#define FX_U64MAP_H

#include "fx.h"

typedef struct fx_u64map_slot {
    uint64_t key; /* 0: empty */
    void *val;
} fx_u64map_slot_t;

/* Embeddable; zero-initialised ({0}) is a valid empty map. */
typedef struct fx_u64map {
    fx_u64map_slot_t *slots;
    size_t cap, count; /* cap: 0 or a power of two */
} fx_u64map_t;

/* Sizes an empty map so that n keys fit without growth. FLUXON_OK; FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_u64map_reserve(fx_u64map_t *m, size_t n);
/* Frees the slot array (values are not freed) and leaves the map empty and usable. */
FX_INTERNAL void fx_u64map_free(fx_u64map_t *m);
/* The value under key, or NULL when absent (key 0 is never present). */
FX_INTERNAL void *fx_u64map_get(const fx_u64map_t *m, uint64_t key);
/* Inserts key -> val, or replaces the value of a present key; old_p (may be NULL) gets the
 * previous value or NULL. key must not be 0 (FLUXON_ERR_INVALID_ARGUMENT). FLUXON_OK;
 * FLUXON_ERR_NOMEM (the map is unchanged). */
FX_INTERNAL int fx_u64map_put(fx_u64map_t *m, uint64_t key, void *val, void **old_p);
/* Removes key; val_p (may be NULL) gets its value. FLUXON_OK; FLUXON_ERR_NOT_FOUND. */
FX_INTERNAL int fx_u64map_del(fx_u64map_t *m, uint64_t key, void **val_p);
/* Starts loading key's home slot into the cache (a batch's lookups overlap their misses). */
FX_INTERNAL void fx_u64map_prefetch(const fx_u64map_t *m, uint64_t key);
static inline size_t fx_u64map_count(const fx_u64map_t *m) { return m->count; }
/* Iteration: *it starts at 0; false at the end. The map must not change meanwhile. */
FX_INTERNAL bool fx_u64map_next(const fx_u64map_t *m, size_t *it, uint64_t *key_p, void **val_p);

#endif
