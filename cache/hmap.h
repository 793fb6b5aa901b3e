/* hmap.h — single-threaded string-keyed hash map (byte-string keys → void *) used by the
 * master (routes, in-flight records) and the owner (local index, get registry, holders).
 * Robin-hood open addressing, XXH3 hashing, backward-shift deletion (no tombstones). */
#ifndef FX_HMAP_H
#define FX_HMAP_H

#include <stdio.h>

#include "fx.h"

/* Design and guarantees:
 *  - Keys are byte strings with an explicit length (any bytes, NUL included; length 0 is
 *    a valid key). A key pointer may be NULL only when its length is 0.
 *  - Each entry is one separate allocation holding the value and the map's own copy of
 *    the key (followed by a NUL byte not counted in the length, so hex keys can be used
 *    as C strings); an intrusive map (fx_hmap_create_intrusive) stores the values
 *    themselves, which hold their keys. Entries never move: growth moves only the 16-byte
 *    slots (cached hash + entry pointer), so a stored key pointer (fx_hmap_get_key,
 *    iteration) stays valid until that entry is deleted or the map is destroyed.
 *  - Capacity is a power of two (minimum 8); the load factor stays <= 0.85: an insert that
 *    would pass it first doubles the slot array. The map never shrinks.
 *  - Deletion shifts the following run of displaced slots back by one (Knuth's Algorithm
 *    R adapted to robin hood), so there are no tombstones and probe lengths do not decay.
 *  - Values are opaque: the map never dereferences or frees them.
 * Threads: none of these functions lock; a map belongs to one thread.
 * Complexity: get/put/del are expected O(1 + klen) (hash + one key compare on a hit);
 * a put that grows the map is O(capacity) once, amortised O(1). */
typedef struct fx_hmap fx_hmap_t;

/* Creates an empty map sized so that initial_cap entries fit without growth (0 = the
 * minimum, 8 slots). Returns FLUXON_OK and sets *m_p; FLUXON_ERR_INVALID_ARGUMENT (m_p
 * NULL or initial_cap absurdly large); FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_hmap_create(size_t initial_cap, fx_hmap_t **m_p);

/* An intrusive map: each value is an object that holds its own key (a `char *` at key_off
 * and its length, a uint32_t, at klen_off), and the map stores the object itself: no
 * entry is allocated and no key copied, a lookup reaches the object in one step. Every
 * put's val must hold exactly the put's key (asserted), and must keep that key unchanged
 * and stay alive while it is in the map; replacing a key's value replaces the object.
 * fx_hmap_get_key returns the object's key. Otherwise as fx_hmap_create. */
FX_INTERNAL int fx_hmap_create_intrusive(size_t initial_cap, size_t key_off, size_t klen_off, fx_hmap_t **m_p);

/* Frees the map, its slots and every stored key copy. Values are NOT freed (iterate first
 * if they are owned). NULL is a no-op. */
FX_INTERNAL void fx_hmap_destroy(fx_hmap_t *m);

/* Returns the value stored under key[0..klen), or NULL when absent (a stored NULL value is
 * indistinguishable from absence here; use fx_hmap_get_key to tell them apart). */
FX_INTERNAL void *fx_hmap_get(const fx_hmap_t *m, const void *key, size_t klen);

/* Looks key up and sets *stored_key_p to the map's own copy of it (klen bytes plus a
 * trailing NUL), stable until the entry is deleted or the map destroyed — growth does not
 * move it. Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND (*stored_key_p untouched). */
FX_INTERNAL int fx_hmap_get_key(const fx_hmap_t *m, const void *key, size_t klen,
                                const char **stored_key_p);

/* Inserts key → val, or replaces the value when key is present (the stored key copy is
 * kept, so its pointer stays valid). The key is copied on insert; val is stored as is.
 * old_p (may be NULL) receives the previous value, or NULL when the key was new.
 * Returns FLUXON_OK; FLUXON_ERR_NOMEM (entry or slot growth failed; map unchanged). */
FX_INTERNAL int fx_hmap_put(fx_hmap_t *m, const void *key, size_t klen, void *val,
                            void **old_p);

/* Removes key and frees the stored key copy; val_p (may be NULL) receives the value (the
 * caller owns it again). key may be the map's own stored copy of this very key (from
 * iteration or fx_hmap_get_key): it is not read after being freed, but it dangles after
 * the call. Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND (val_p untouched). */
FX_INTERNAL int fx_hmap_del(fx_hmap_t *m, const void *key, size_t klen, void **val_p);

/* Batches (hot path, issue 18): the _h variants take the key's hash, computed once by
 * fx_hmap_hash (XXH3, never 0) and shared by the maps a key is in; fx_hmap_prefetch
 * starts loading the key's home slot, so a batch prefetches every key first and then
 * probes: the cache misses overlap instead of adding up. A prefetch is only a hint (a
 * later growth just wastes it). h must be fx_hmap_hash(key, klen): 0 aborts in every
 * build, any other mismatch is caught in sanitizer builds only (make asan/tsan, the
 * fuzzers); otherwise the _h variants behave as their plain counterparts. */
FX_INTERNAL uint64_t fx_hmap_hash(const void *key, size_t klen);
FX_INTERNAL void fx_hmap_prefetch(const fx_hmap_t *m, uint64_t h);
/* The next levels of a lookup of hash h, for a batch that prefetched every key's slot
 * first: depth 1 starts loading the entry whose slot holds h (its key), depth 2 the value
 * that entry names (a non-intrusive map). Reads the slots (and at depth 2 the entry), so
 * each depth pays off after the one before it was prefetched for the whole batch. A hash
 * match is enough: keys are not compared. No-op where h is not in the map. */
FX_INTERNAL void fx_hmap_prefetch_deep(const fx_hmap_t *m, uint64_t h, int depth);
FX_INTERNAL void *fx_hmap_get_h(const fx_hmap_t *m, const void *key, size_t klen, uint64_t h);
FX_INTERNAL int fx_hmap_put_h(fx_hmap_t *m, const void *key, size_t klen, uint64_t h, void *val, void **old_p);
FX_INTERNAL int fx_hmap_del_h(fx_hmap_t *m, const void *key, size_t klen, uint64_t h, void **val_p);

/* Intrusive maps only: removes obj itself, the object stored under its key's hash h,
 * found by identity (no key comparison). Another object stored under the same key stays.
 * Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND (obj is not in the map; nothing changes). */
FX_INTERNAL int fx_hmap_del_obj(fx_hmap_t *m, uint64_t h, const void *obj);

/* Deletes every entry, calling free_fn(value) on each (free_fn may be NULL); the map stays
 * usable. O(capacity). */
FX_INTERNAL void fx_hmap_clear(fx_hmap_t *m, void (*free_fn)(void *val));

/* Number of entries. O(1). */
FX_INTERNAL size_t fx_hmap_count(const fx_hmap_t *m);

/* Number of slots (a power of two; count <= 0.85 * capacity). O(1). For tests/stats. */
FX_INTERNAL size_t fx_hmap_capacity(const fx_hmap_t *m);

/* Iteration in unspecified (slot) order. Initialise with FX_HMAP_ITER_INIT (or zero the
 * struct / call fx_hmap_iter_init); fields are private.
 *
 * Contract while an iteration is in progress (between the first and the last call to
 * fx_hmap_iter_next that returned true):
 *  - Deleting the entry just returned (fx_hmap_del of that key) is allowed, any number of
 *    times over the iteration, at most once per returned entry. Every entry present when
 *    the iteration started and not deleted is then visited exactly once; no entry is
 *    visited twice.
 *  - Replacing the value of an existing key (fx_hmap_put on a present key) is allowed.
 *  - Inserting a new key, or deleting any entry other than the one just returned, is NOT
 *    allowed: fx_hmap_iter_next detects it and aborts through FX_ASSERT. To delete other
 *    entries, collect their keys first and delete after the iteration.
 * Why it works: the walk starts just after an empty slot, so no run of occupied slots
 * wraps around the starting point; backward-shift deletion moves only later slots of the
 * current run back by one, so after such a deletion the iterator re-examines the slot it
 * just returned. */
typedef struct fx_hmap_iter {
    size_t origin, off;  /* walk starts at slot origin; off = slots examined so far */
    uint64_t mods;       /* map's structural-change counter when last returned */
    uintptr_t last;      /* entry last returned (compared, never dereferenced) */
    int state;           /* 0 fresh, 1 walking, 2 done */
} fx_hmap_iter_t;

#define FX_HMAP_ITER_INIT {0, 0, 0, 0, 0}

FX_INTERNAL void fx_hmap_iter_init(fx_hmap_iter_t *it);

/* Advances it; on true sets *key (the stored key copy, NUL-terminated, stable as for
 * fx_hmap_get_key), *klen and *val (each out pointer may be NULL). Returns false when every
 * entry has been visited (and keeps returning false). O(capacity) over a full iteration. */
FX_INTERNAL bool fx_hmap_iter_next(const fx_hmap_t *m, fx_hmap_iter_t *it, const char **key,
                                   size_t *klen, void **val);

#endif /* FX_HMAP_H */
