/* evict_policy.h — the hot tier's eviction policies (ARCHITECTURE §9, issue 15), pure: no
 * I/O, no allocation, no clock, so the SAME code runs in the owner (owner/evict.c) and in
 * the offline simulator of `fluxon demo --simulate` (compiled into the CLI).
 *
 * The caller embeds an fx_evp_node_t in each cached object (an atomic group is one node
 * whose weight is the group's bytes) and tells the policy what happens:
 *   insert (admission; key is a 64-bit hash of the object's identity), touch (a hit),
 *   remove (the object went for another reason), and asks for victims: victim() returns
 *   the node the policy would evict next (it may first reorder its queues: O(1)
 *   amortized), then the caller either evicts it (evicted(): it leaves the policy) or
 *   cannot now (skip(): it is treated as touched and the walk goes on).
 *
 * Policies (FX_EVICT_* in config.h):
 *   lru     one queue, touch = most recent; victim = least recent.
 *   s3fifo  S3-FIFO (Yang et al., SOSP'23), byte-weighted: new objects enter a probation
 *           FIFO (half the capacity: the paper's 10 % lost to LRU on the conversation
 *           trace, whose reuse distances are long); one that is hit there moves to the main
 *           FIFO when it reaches the tail, one that is not is evicted and its key goes to a
 *           ghost FIFO; an object whose key is in the ghost is admitted straight to main.
 *           Main is a CLOCK over 2-bit frequencies (a hit increments, passing the tail
 *           decrements; 0 at the tail = victim). The ghost holds as many keys as the
 *           capacity holds objects.
 *   slru    segmented LRU: probation LRU, a hit moves to a protected LRU (20 %); the
 *           protected overflow goes back to probation. (Measured, not the default.)
 * Every operation is O(1) (victim: amortized; each node is passed over at most 4 times
 * per insert). */
#ifndef FX_EVICT_POLICY_H
#define FX_EVICT_POLICY_H

#include "fx.h"

typedef struct fx_evp_node {
    struct fx_evp_node *prev, *next; /* both NULL while not in the policy */
    uint64_t weight, key;
    uint64_t stamp; /* the policy clock at the last insert/touch (recency, for callers) */
    uint8_t queue;  /* FX_EVP_Q_* */
    uint8_t freq;
} fx_evp_node_t;

enum { FX_EVP_Q_NONE = 0, FX_EVP_Q_SMALL = 1, FX_EVP_Q_MAIN = 2 };

typedef struct fx_evp {
    int kind;                 /* FX_EVICT_LRU / FX_EVICT_S3FIFO */
    fx_evp_node_t q[3];       /* sentinels of FX_EVP_Q_SMALL and _MAIN (q[0] unused);
                                 next = head (newest), prev = tail (oldest) */
    uint64_t qbytes[3];
    uint64_t capacity;        /* bytes: sizes the small queue (10 %) */
    uint64_t bytes, count, clock;
    uint64_t *ghost;          /* caller's buffer: a FIFO ring of keys + an open-addressing set */
    uint32_t ghost_cap;       /* ring entries (0: no ghost) */
    uint32_t ghost_head, ghost_n;
    uint64_t *ghost_set;      /* 2 * ghost_cap slots (power of two) */
    uint32_t ghost_mask;
    uint32_t ghost_live;      /* keys in the set (a ring entry taken since is no longer there) */
    uint64_t promotions, ghost_hits, reinserts;
} fx_evp_t;

/* Words of caller memory fx_evp_init needs for a ghost of ghost_entries keys (0: none). */
FX_INTERNAL size_t fx_evp_ghost_words(uint32_t ghost_entries);
/* kind: FX_EVICT_*; capacity in bytes (the hot tier); ghost: fx_evp_ghost_words(n) zeroed
 * words or NULL. An unknown kind behaves as lru. */
FX_INTERNAL void fx_evp_init(fx_evp_t *p, int kind, uint64_t capacity, uint64_t *ghost, uint32_t ghost_entries);
/* Gives p another ghost (the same kind of memory as fx_evp_init's, or NULL: none): the keys
 * of the old one are forgotten, the queues are kept; the caller frees the old memory. */
FX_INTERNAL void fx_evp_set_ghost(fx_evp_t *p, uint64_t *ghost, uint32_t ghost_entries);
FX_INTERNAL const char *fx_evp_kind_name(int kind);
FX_INTERNAL bool fx_evp_linked(const fx_evp_node_t *n);
/* Admits n (not linked) with weight bytes; key identifies the object for the ghost. */
FX_INTERNAL void fx_evp_insert(fx_evp_t *p, fx_evp_node_t *n, uint64_t weight, uint64_t key);
/* Admits n as the first victim (an eviction the caller had to undo). */
FX_INTERNAL void fx_evp_insert_cold(fx_evp_t *p, fx_evp_node_t *n, uint64_t weight, uint64_t key);
FX_INTERNAL void fx_evp_touch(fx_evp_t *p, fx_evp_node_t *n); /* a hit; no-op when not linked */
FX_INTERNAL void fx_evp_remove(fx_evp_t *p, fx_evp_node_t *n); /* no-op when not linked */
/* The next victim (still linked), NULL when empty. */
FX_INTERNAL fx_evp_node_t *fx_evp_victim(fx_evp_t *p);
/* A walk in about the order victims come (probation oldest first, then main oldest
 * first), without changing anything: for work ahead of eviction (write-back). NULL: end. */
FX_INTERNAL fx_evp_node_t *fx_evp_coldest(fx_evp_t *p);
FX_INTERNAL fx_evp_node_t *fx_evp_warmer(fx_evp_t *p, fx_evp_node_t *n);
/* The victim leaves: unlinked, its key remembered by the ghost when it was on probation. */
FX_INTERNAL void fx_evp_evicted(fx_evp_t *p, fx_evp_node_t *n);
/* The victim cannot go now: kept as if just touched. */
FX_INTERNAL void fx_evp_skip(fx_evp_t *p, fx_evp_node_t *n);
/* A walk that must pass over victims it cannot take without reordering them: hold takes n
 * out (remembering its queue), put_back links it at the tail (oldest end) of that queue
 * again; putting back in the reverse order of holding restores the order. */
FX_INTERNAL void fx_evp_hold(fx_evp_t *p, fx_evp_node_t *n);
FX_INTERNAL void fx_evp_put_back(fx_evp_t *p, fx_evp_node_t *n);
/* Consistency walk for tests: FLUXON_OK or FLUXON_ERR_INTERNAL. */
FX_INTERNAL int fx_evp_check(const fx_evp_t *p);

#endif /* FX_EVICT_POLICY_H */
