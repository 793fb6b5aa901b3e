/* evict_policy.c — LRU and S3-FIFO over intrusive nodes (see evict_policy.h). Pure: no
 * allocation, no I/O, no FX_ASSERT (the CLI compiles this file on its own). */
#include "evict_policy.h"

#include "config.h"

#define EVP_SMALL_PCT 50u /* probation queue: half the capacity (10 %, the paper's, lost on the trace) */
#define EVP_PROTECTED_PCT 20u /* slru: the protected share */
#define EVP_FREQ_MAX 3u

FX_INTERNAL size_t fx_evp_ghost_words(uint32_t n)
{
    if (!n) return 0;
    uint64_t set = 2;
    while (set < 2ull * n) set <<= 1;
    return (size_t)n + (size_t)set;
}

FX_INTERNAL void fx_evp_init(fx_evp_t *p, int kind, uint64_t capacity, uint64_t *ghost, uint32_t ghost_entries)
{
    memset(p, 0, sizeof *p);
    p->kind = kind == FX_EVICT_S3FIFO || kind == FX_EVICT_SLRU ? kind : FX_EVICT_LRU;
    p->capacity = capacity;
    for (int i = 1; i < 3; i++) p->q[i].prev = p->q[i].next = &p->q[i];
    fx_evp_set_ghost(p, ghost, ghost_entries);
}

FX_INTERNAL void fx_evp_set_ghost(fx_evp_t *p, uint64_t *ghost, uint32_t ghost_entries)
{
    p->ghost = NULL;
    p->ghost_set = NULL;
    p->ghost_cap = p->ghost_head = p->ghost_n = p->ghost_mask = p->ghost_live = 0;
    if (ghost && ghost_entries && p->kind == FX_EVICT_S3FIFO) {
        size_t set = fx_evp_ghost_words(ghost_entries) - ghost_entries;
        p->ghost = ghost;
        p->ghost_cap = ghost_entries;
        p->ghost_set = ghost + ghost_entries;
        p->ghost_mask = (uint32_t)(set - 1);
    }
}

FX_INTERNAL const char *fx_evp_kind_name(int kind) { return kind == FX_EVICT_S3FIFO ? "s3fifo" : "lru"; }

FX_INTERNAL bool fx_evp_linked(const fx_evp_node_t *n) { return n->next != NULL; }

/* ---- queues: head = q.next (newest), tail = q.prev (oldest) ---- */
static void evp_unlink(fx_evp_t *p, fx_evp_node_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = NULL;
    p->qbytes[n->queue] -= n->weight;
    p->bytes -= n->weight;
    p->count--;
    n->queue = FX_EVP_Q_NONE;
}

static void evp_link(fx_evp_t *p, fx_evp_node_t *n, int q, bool at_head)
{
    fx_evp_node_t *s = &p->q[q], *a = at_head ? s : s->prev, *b = a->next;
    n->prev = a;
    n->next = b;
    a->next = n;
    b->prev = n;
    n->queue = (uint8_t)q;
    p->qbytes[q] += n->weight;
    p->bytes += n->weight;
    p->count++;
}

static fx_evp_node_t *evp_tail(fx_evp_t *p, int q) { return p->q[q].prev == &p->q[q] ? NULL : p->q[q].prev; }

FX_INTERNAL fx_evp_node_t *fx_evp_coldest(fx_evp_t *p)
{
    fx_evp_node_t *n = evp_tail(p, FX_EVP_Q_SMALL);
    return n ? n : evp_tail(p, FX_EVP_Q_MAIN);
}

FX_INTERNAL fx_evp_node_t *fx_evp_warmer(fx_evp_t *p, fx_evp_node_t *n)
{
    if (n->prev != &p->q[n->queue]) return n->prev; /* toward the head (newer) */
    return n->queue == FX_EVP_Q_SMALL ? evp_tail(p, FX_EVP_Q_MAIN) : NULL;
}

/* ---- ghost: keys evicted from probation (a FIFO ring, and a set to find them) ---- */
static uint64_t evp_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x | 1; /* never 0: 0 marks an empty set slot */
}

static uint32_t evp_ghost_find(const fx_evp_t *p, uint64_t h)
{
    for (uint32_t i = (uint32_t)(h >> 7) & p->ghost_mask;; i = (i + 1) & p->ghost_mask) {
        if (p->ghost_set[i] == h) return i;
        if (p->ghost_set[i] == 0) return UINT32_MAX;
    }
}

static void evp_ghost_del_at(fx_evp_t *p, uint32_t i)
{
    for (uint32_t j = (i + 1) & p->ghost_mask; p->ghost_set[j]; j = (j + 1) & p->ghost_mask) {
        uint32_t k = (uint32_t)(p->ghost_set[j] >> 7) & p->ghost_mask;
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
        p->ghost_set[i] = p->ghost_set[j];
        i = j;
    }
    p->ghost_set[i] = 0;
    p->ghost_live--;
}

static void evp_ghost_add(fx_evp_t *p, uint64_t key)
{
    if (!p->ghost_cap) return;
    uint64_t h = evp_mix(key);
    if (evp_ghost_find(p, h) != UINT32_MAX) return;
    if (p->ghost_n == p->ghost_cap) { /* the oldest goes */
        uint32_t at = evp_ghost_find(p, p->ghost[p->ghost_head]);
        if (at != UINT32_MAX) evp_ghost_del_at(p, at);
        p->ghost_head = (p->ghost_head + 1) % p->ghost_cap;
        p->ghost_n--;
    }
    p->ghost[(p->ghost_head + p->ghost_n++) % p->ghost_cap] = h;
    uint32_t i = (uint32_t)(h >> 7) & p->ghost_mask;
    while (p->ghost_set[i]) i = (i + 1) & p->ghost_mask;
    p->ghost_set[i] = h;
    p->ghost_live++;
}

/* Is key in the ghost? (It stays in the ring; the set forgets it, so it counts once.) */
static bool evp_ghost_take(fx_evp_t *p, uint64_t key)
{
    if (!p->ghost_live) return false; /* nothing to find: no random read of the set */
    uint32_t at = evp_ghost_find(p, evp_mix(key));
    if (at == UINT32_MAX) return false;
    evp_ghost_del_at(p, at);
    return true;
}

/* ---- operations ---- */
FX_INTERNAL void fx_evp_insert(fx_evp_t *p, fx_evp_node_t *n, uint64_t weight, uint64_t key)
{
    if (fx_evp_linked(n)) fx_evp_remove(p, n);
    n->weight = weight;
    n->key = key;
    n->freq = 0;
    n->stamp = ++p->clock;
    int q = FX_EVP_Q_MAIN;
    if (p->kind == FX_EVICT_SLRU) q = FX_EVP_Q_SMALL;
    else if (p->kind == FX_EVICT_S3FIFO && !evp_ghost_take(p, key)) q = FX_EVP_Q_SMALL;
    else if (p->kind == FX_EVICT_S3FIFO) p->ghost_hits++;
    evp_link(p, n, q, true);
}

FX_INTERNAL void fx_evp_insert_cold(fx_evp_t *p, fx_evp_node_t *n, uint64_t weight, uint64_t key)
{
    if (fx_evp_linked(n)) fx_evp_remove(p, n);
    n->weight = weight;
    n->key = key;
    n->freq = 0;
    n->stamp = 0;
    evp_link(p, n, p->kind == FX_EVICT_S3FIFO && p->qbytes[FX_EVP_Q_SMALL] ? FX_EVP_Q_SMALL : FX_EVP_Q_MAIN, false);
}

static void evp_move(fx_evp_t *p, fx_evp_node_t *n, int q);
/* SLRU: the protected queue keeps at most its share; its oldest go back to probation */
static void evp_slru_balance(fx_evp_t *p)
{
    uint64_t limit = p->capacity / 100 * EVP_PROTECTED_PCT;
    fx_evp_node_t *t;
    while (p->qbytes[FX_EVP_Q_MAIN] > limit && (t = evp_tail(p, FX_EVP_Q_MAIN))) evp_move(p, t, FX_EVP_Q_SMALL);
}

FX_INTERNAL void fx_evp_touch(fx_evp_t *p, fx_evp_node_t *n)
{
    if (!fx_evp_linked(n)) return;
    n->stamp = ++p->clock;
    if (p->kind == FX_EVICT_S3FIFO) {
        if (n->freq < EVP_FREQ_MAX) n->freq++;
        return;
    }
    if (p->kind == FX_EVICT_SLRU) {
        if (n->freq < EVP_FREQ_MAX) n->freq++;
        evp_move(p, n, FX_EVP_Q_MAIN); /* hit: protected */
        evp_slru_balance(p);
        return;
    }
    if (p->q[n->queue].next == n) return; /* already the newest */
    int q = n->queue;
    uint64_t w = n->weight;
    evp_unlink(p, n);
    n->weight = w;
    evp_link(p, n, q, true);
}

FX_INTERNAL void fx_evp_remove(fx_evp_t *p, fx_evp_node_t *n)
{
    if (fx_evp_linked(n)) evp_unlink(p, n);
}

/* Moves n to the head of queue q, keeping its weight. */
static void evp_move(fx_evp_t *p, fx_evp_node_t *n, int q)
{
    uint64_t w = n->weight;
    evp_unlink(p, n);
    n->weight = w;
    evp_link(p, n, q, true);
}

FX_INTERNAL fx_evp_node_t *fx_evp_victim(fx_evp_t *p)
{
    if (!p->count) return NULL;
    if (p->kind == FX_EVICT_SLRU) {
        fx_evp_node_t *t = evp_tail(p, FX_EVP_Q_SMALL);
        return t ? t : evp_tail(p, FX_EVP_Q_MAIN);
    }
    if (p->kind != FX_EVICT_S3FIFO) return evp_tail(p, FX_EVP_Q_MAIN);
    /* each pass either returns or lowers a frequency / promotes: bounded by 4 x count */
    for (uint64_t guard = 4 * p->count + 4; guard; guard--) {
        bool small = p->qbytes[FX_EVP_Q_SMALL] &&
                     (p->qbytes[FX_EVP_Q_SMALL] * 100 >= p->capacity * EVP_SMALL_PCT || !p->qbytes[FX_EVP_Q_MAIN]);
        if (small) {
            fx_evp_node_t *t = evp_tail(p, FX_EVP_Q_SMALL);
            if (!t->freq) return t;
            t->freq = 0; /* hit while on probation: into main */
            evp_move(p, t, FX_EVP_Q_MAIN);
            p->promotions++;
            continue;
        }
        fx_evp_node_t *t = evp_tail(p, FX_EVP_Q_MAIN);
        if (!t->freq) return t;
        t->freq--;
        evp_move(p, t, FX_EVP_Q_MAIN);
        p->reinserts++;
    }
    fx_evp_node_t *t = evp_tail(p, FX_EVP_Q_SMALL);
    return t ? t : evp_tail(p, FX_EVP_Q_MAIN);
}

FX_INTERNAL void fx_evp_evicted(fx_evp_t *p, fx_evp_node_t *n)
{
    if (!fx_evp_linked(n)) return;
    bool probation = n->queue == FX_EVP_Q_SMALL;
    evp_unlink(p, n);
    if (probation) evp_ghost_add(p, n->key);
}

FX_INTERNAL void fx_evp_skip(fx_evp_t *p, fx_evp_node_t *n)
{
    if (!fx_evp_linked(n)) return;
    n->stamp = ++p->clock;
    evp_move(p, n, n->queue);
}

FX_INTERNAL void fx_evp_hold(fx_evp_t *p, fx_evp_node_t *n)
{
    if (!fx_evp_linked(n)) return;
    int q = n->queue;
    uint64_t w = n->weight;
    evp_unlink(p, n);
    n->weight = w;
    n->queue = (uint8_t)q; /* remembered for fx_evp_put_back */
}

FX_INTERNAL void fx_evp_put_back(fx_evp_t *p, fx_evp_node_t *n)
{
    if (fx_evp_linked(n)) return;
    int q = n->queue == FX_EVP_Q_SMALL || n->queue == FX_EVP_Q_MAIN ? n->queue : FX_EVP_Q_MAIN;
    evp_link(p, n, q, false);
}

FX_INTERNAL int fx_evp_check(const fx_evp_t *p)
{
    uint64_t count = 0, bytes = 0;
    for (int q = 1; q < 3; q++) {
        uint64_t qb = 0;
        const fx_evp_node_t *s = &p->q[q], *prev = s;
        for (const fx_evp_node_t *n = s->next; n != s; prev = n, n = n->next) {
            if (!n || n->prev != prev || n->queue != q || count > p->count) return FLUXON_ERR_INTERNAL;
            count++;
            qb += n->weight;
        }
        if (s->prev != prev || qb != p->qbytes[q]) return FLUXON_ERR_INTERNAL;
        bytes += qb;
    }
    if (count != p->count || bytes != p->bytes || p->ghost_n > p->ghost_cap || p->ghost_live > p->ghost_n)
        return FLUXON_ERR_INTERNAL;
    return FLUXON_OK;
}
