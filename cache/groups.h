/* groups.h — one validator and one iterator for the atomic groups of a key batch, and a
 * duplicate-key set, shared by the client, the owner and the master (every layer checks
 * the same rule the same way). Pure functions, no I/O, no locks. */
#ifndef FX_GROUPS_H
#define FX_GROUPS_H

#include "fx.h"

/* Atomic groups split n keys into consecutive runs: lens[g] > 0 and the lens sum to n
 * exactly. n_groups 0 (lens may be NULL) means every key is a group of its own. Checks
 * without ever overflowing a u64 (a sum is never computed past n). Returns true, or false
 * with a message in why[0..cap) (may be NULL) naming the group and the value. */
FX_INTERNAL bool fx_groups_check(const uint64_t *lens, size_t n_groups, size_t n, char *why, size_t cap);
/* The same for 32-bit lens (the public API's atomic_group_lens). */
FX_INTERNAL bool fx_groups_check32(const uint32_t *lens, size_t n_groups, size_t n, char *why, size_t cap);

/* Walks the groups of a checked batch:
 *   fx_group_iter_t it = fx_group_iter(lens, n_groups, n);
 *   while (fx_group_next(&it)) use it.start .. it.start + it.len  (it.g is the index) */
typedef struct fx_group_iter {
    const uint64_t *lens;
    size_t n_groups, n;
    size_t g, start, len; /* the current group once fx_group_next returned true */
    size_t next;          /* private */
} fx_group_iter_t;
FX_INTERNAL fx_group_iter_t fx_group_iter(const uint64_t *lens, size_t n_groups, size_t n);
FX_INTERNAL bool fx_group_next(fx_group_iter_t *it);

/* Whole-group rejection over an int status array: every group with a member whose status
 * is not `ok` gets `rejected` on each member still `ok`. on_reject (may be NULL) is called
 * with each index it rejected. Returns how many members it rejected. */
FX_INTERNAL size_t fx_groups_reject(const uint64_t *lens, size_t n_groups, size_t n, int *status, int ok,
                                    int rejected, void (*on_reject)(void *arg, size_t i), void *arg);

/* A set of byte-string keys that borrows the caller's key bytes (they must outlive the
 * set): duplicate detection in O(1) per key, replacing quadratic scans on the reactors.
 * fx_keyset_create sizes it for `expected` keys (it never grows past that: adding more
 * than `expected` keys returns FLUXON_ERR_INVALID_ARGUMENT). */
typedef struct fx_keyset fx_keyset_t;
FX_INTERNAL int fx_keyset_create(size_t expected, fx_keyset_t **s_p);
/* FLUXON_OK: added (new); FLUXON_ERR_KEY_EXISTS: already in the set (not added). */
FX_INTERNAL int fx_keyset_add(fx_keyset_t *s, const void *key, size_t klen);
FX_INTERNAL void fx_keyset_destroy(fx_keyset_t *s);

/* The TP cohort grammar (include/fluxon.h, "Key grammar: TP cohorts"): a key ending in
 * "_<rank>_<size>" (two runs of 1..9 ASCII digits, rank < size, something before them)
 * belongs to the cohort named by the key without that suffix. Returns the cohort id's
 * length (len minus the suffix), or len when the key has no such suffix (its own cohort). */
FX_INTERNAL size_t fx_cohort_len(const char *key, size_t len);

#endif
