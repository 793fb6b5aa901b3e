/* lru.c — the intrusive byte-weighted LRU list (see lru.h). */
#include "lru.h"

FX_INTERNAL void fx_lru_init(fx_lru_t *l)
{
    l->head.prev = l->head.next = &l->head;
    l->head.weight = 0;
    l->bytes = l->count = l->clock = 0;
}

FX_INTERNAL void fx_lru_node_init(fx_lru_node_t *n)
{
    n->prev = n->next = NULL;
    n->weight = n->stamp = 0;
}

FX_INTERNAL bool fx_lru_linked(const fx_lru_node_t *n) { return n->next != NULL; }

static void lru_unlink(fx_lru_t *l, fx_lru_node_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = NULL;
    l->bytes -= n->weight;
    l->count--;
}

/* links n between a and b (a->next == b) */
static void lru_link(fx_lru_t *l, fx_lru_node_t *n, fx_lru_node_t *a, fx_lru_node_t *b, uint64_t weight)
{
    n->prev = a;
    n->next = b;
    a->next = n;
    b->prev = n;
    n->weight = weight;
    l->bytes += weight;
    l->count++;
}

FX_INTERNAL void fx_lru_insert(fx_lru_t *l, fx_lru_node_t *n, uint64_t weight)
{
    if (fx_lru_linked(n)) lru_unlink(l, n);
    lru_link(l, n, l->head.prev, &l->head, weight);
    n->stamp = ++l->clock;
}

FX_INTERNAL void fx_lru_insert_cold(fx_lru_t *l, fx_lru_node_t *n, uint64_t weight)
{
    if (fx_lru_linked(n)) lru_unlink(l, n);
    lru_link(l, n, &l->head, l->head.next, weight);
    n->stamp = 0;
}

FX_INTERNAL void fx_lru_touch(fx_lru_t *l, fx_lru_node_t *n)
{
    if (!fx_lru_linked(n) || l->head.prev == n) return;
    uint64_t w = n->weight;
    lru_unlink(l, n);
    lru_link(l, n, l->head.prev, &l->head, w);
    n->stamp = ++l->clock;
}

FX_INTERNAL void fx_lru_remove(fx_lru_t *l, fx_lru_node_t *n)
{
    if (fx_lru_linked(n)) lru_unlink(l, n);
}

FX_INTERNAL fx_lru_node_t *fx_lru_coldest(const fx_lru_t *l)
{
    return l->head.next == &l->head ? NULL : l->head.next;
}

FX_INTERNAL fx_lru_node_t *fx_lru_warmer(const fx_lru_t *l, const fx_lru_node_t *n)
{
    return n->next == &l->head ? NULL : n->next;
}

FX_INTERNAL int fx_lru_check(const fx_lru_t *l)
{
    uint64_t count = 0, bytes = 0;
    const fx_lru_node_t *p = &l->head;
    for (const fx_lru_node_t *n = l->head.next; n != &l->head; p = n, n = n->next) {
        if (!n || n->prev != p || count > l->count) return FLUXON_ERR_INTERNAL;
        count++;
        bytes += n->weight;
    }
    if (l->head.prev != p || count != l->count || bytes != l->bytes) return FLUXON_ERR_INTERNAL;
    return FLUXON_OK;
}
