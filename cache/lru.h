/* lru.h — an intrusive, doubly linked LRU list weighted by bytes (ARCHITECTURE §9: the
 * owner's hot tier). The caller embeds an fx_lru_node_t in its own object and recovers
 * the object with FX_CONTAINER_OF. insert, touch, remove: O(1); iteration runs from the
 * coldest node towards the hottest. No allocation, no locks (reactor thread only). */
#ifndef FX_LRU_H
#define FX_LRU_H

#include "fx.h"

typedef struct fx_lru_node {
    struct fx_lru_node *prev, *next; /* both NULL while not linked */
    uint64_t weight;
    uint64_t stamp; /* the list's clock at the last insert/touch (0: inserted cold) */
} fx_lru_node_t;

typedef struct fx_lru {
    fx_lru_node_t head; /* sentinel: head.next = coldest, head.prev = hottest */
    uint64_t bytes;     /* sum of the weights of the linked nodes */
    uint64_t count;     /* linked nodes */
    uint64_t clock;     /* ticks once per insert/touch: a node's stamp orders it by recency */
} fx_lru_t;

/* Empty list. A node must be zeroed (or fx_lru_node_init) before its first insert. */
FX_INTERNAL void fx_lru_init(fx_lru_t *l);
FX_INTERNAL void fx_lru_node_init(fx_lru_node_t *n);
FX_INTERNAL bool fx_lru_linked(const fx_lru_node_t *n);
/* Links n as the hottest with the given weight; a node already linked is only touched
 * (its weight changes to weight). */
FX_INTERNAL void fx_lru_insert(fx_lru_t *l, fx_lru_node_t *n, uint64_t weight);
/* Links n as the coldest (a restored victim goes first next time); linked: moved there. */
FX_INTERNAL void fx_lru_insert_cold(fx_lru_t *l, fx_lru_node_t *n, uint64_t weight);
/* Makes a linked node the hottest; no-op for a node that is not linked. */
FX_INTERNAL void fx_lru_touch(fx_lru_t *l, fx_lru_node_t *n);
/* Unlinks n; no-op when not linked. */
FX_INTERNAL void fx_lru_remove(fx_lru_t *l, fx_lru_node_t *n);
/* The coldest node, NULL when empty. */
FX_INTERNAL fx_lru_node_t *fx_lru_coldest(const fx_lru_t *l);
/* The next node towards the hottest after n (linked), NULL after the hottest. */
FX_INTERNAL fx_lru_node_t *fx_lru_warmer(const fx_lru_t *l, const fx_lru_node_t *n);
/* Consistency walk for tests: links both ways, count and bytes. FLUXON_OK or
 * FLUXON_ERR_INTERNAL. */
FX_INTERNAL int fx_lru_check(const fx_lru_t *l);

#endif /* FX_LRU_H */
