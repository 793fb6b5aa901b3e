/* prefix_index.h — ordered set of byte-string keys for `fluxon ls PREFIX`: insert, remove,
 * and paged listing of the keys that start with a prefix, in lexicographic order.
 * A crit-bit tree (D. J. Bernstein) over 9-bit symbols, so any byte (NUL too) is allowed. */
#ifndef FX_PREFIX_INDEX_H
#define FX_PREFIX_INDEX_H

#include "fx.h"

/* Order: bytewise unsigned lexicographic (memcmp order), a proper prefix sorting before
 * its extensions ("ab" < "ab\0" < "ab0" < "b"); "" is a valid key and the smallest.
 * Internally byte i of a key becomes the symbol 0x100 | byte and every position past the
 * end the symbol 0, so no key is confused with another that extends it by NUL bytes.
 *
 * Memory: each key is copied into one leaf allocation (klen + NUL + 16 bytes), and each
 * key but the first adds one 40-byte inner node. Keys are owned by the index.
 * Complexity: insert/remove/lookup are O(depth + klen), depth <= min(count, 9 * klen) —
 * about log2(count) for random keys such as hex page hashes; listing costs
 * O(depth + listed keys * amortised O(1) steps).
 * Threads: none of these functions lock; an index belongs to one thread. */
typedef struct fx_prefix_index fx_prefix_index_t;

/* Creates an empty index. Returns FLUXON_OK and sets *idx_p; FLUXON_ERR_INVALID_ARGUMENT
 * (idx_p NULL); FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_prefix_index_create(fx_prefix_index_t **idx_p);

/* Frees the index and every key copy. NULL is a no-op. */
FX_INTERNAL void fx_prefix_index_destroy(fx_prefix_index_t *idx);

/* Adds a copy of key[0..klen) (key may be NULL when klen is 0).
 * Returns FLUXON_OK; FLUXON_ERR_KEY_EXISTS (already present; nothing changed);
 * FLUXON_ERR_NOMEM (nothing changed). */
FX_INTERNAL int fx_prefix_index_insert(fx_prefix_index_t *idx, const void *key, size_t klen);

/* fx_prefix_index_insert of a key greater than every key present (building an index
 * from sorted keys): no descent, only the right spine (hot in cache) and one comparison,
 * with the current greatest key. Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (key is
 * not greater than the greatest key present; nothing changed); FLUXON_ERR_NOMEM (nothing
 * changed). */
FX_INTERNAL int fx_prefix_index_append(fx_prefix_index_t *idx, const void *key, size_t klen);

/* Removes key and frees its copy. Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND. */
FX_INTERNAL int fx_prefix_index_remove(fx_prefix_index_t *idx, const void *key, size_t klen);

/* True when key is present. */
FX_INTERNAL bool fx_prefix_index_contains(const fx_prefix_index_t *idx, const void *key,
                                          size_t klen);

/* Number of keys. O(1). */
FX_INTERNAL size_t fx_prefix_index_count(const fx_prefix_index_t *idx);

/* Listing callback: key points at the index's copy (klen bytes plus a NUL), valid only
 * during the call. Return 0 to continue, nonzero to stop after this key. The callback
 * must not modify the index. */
typedef int (*fx_prefix_index_cb)(void *arg, const char *key, size_t klen);

/* Calls cb, in ascending order, for the keys that start with prefix[0..plen) (plen 0 or
 * prefix NULL: every key) and, when after is not NULL, are strictly greater than
 * after[0..alen) — `after` need not be present (paging: pass the last key of the previous
 * page). At most limit keys are listed (limit 0 lists none; SIZE_MAX = no limit).
 * Returns the number of keys passed to cb (including the one whose cb asked to stop). */
FX_INTERNAL size_t fx_prefix_index_list(const fx_prefix_index_t *idx, const void *prefix,
                                        size_t plen, const void *after, size_t alen,
                                        size_t limit, fx_prefix_index_cb cb, void *arg);

/* Verifies every invariant (parent links, critical positions strictly increasing down
 * each path, each key on the side its ancestors route it to, strictly ascending in-order
 * keys, leaf count == count). O(count * depth); for tests. Returns FLUXON_OK;
 * FLUXON_ERR_INVALID_ARGUMENT (idx NULL); FLUXON_ERR_INTERNAL (an invariant is broken). */
FX_INTERNAL int fx_prefix_index_check(const fx_prefix_index_t *idx);

#endif /* FX_PREFIX_INDEX_H */
