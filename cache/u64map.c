/* u64map.c — see u64map.h. */
#include "u64map.h"

static inline uint64_t u64m_hash(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t u64m_find(const fx_u64map_t *m, uint64_t key)
{
    if (!m->cap || key == 0) return SIZE_MAX;
    for (size_t mask = m->cap - 1, i = u64m_hash(key) & mask;; i = (i + 1) & mask) {
        if (m->slots[i].key == key) return i;
        if (m->slots[i].key == 0) return SIZE_MAX;
    }
}

static void u64m_insert_new(fx_u64map_t *m, uint64_t key, void *val)
{
    size_t mask = m->cap - 1, i = u64m_hash(key) & mask;
    while (m->slots[i].key) i = (i + 1) & mask;
    m->slots[i] = (fx_u64map_slot_t){key, val};
    m->count++;
}

static int u64m_grow(fx_u64map_t *m, size_t ncap)
{
    fx_u64map_slot_t *ns = fx_calloc(ncap, sizeof *ns);
    if (!ns) return FLUXON_ERR_NOMEM;
    fx_u64map_t old = *m;
    *m = (fx_u64map_t){ns, ncap, 0};
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].key) u64m_insert_new(m, old.slots[i].key, old.slots[i].val);
    fx_free(old.slots);
    return FLUXON_OK;
}

FX_INTERNAL int fx_u64map_reserve(fx_u64map_t *m, size_t n)
{
    if (n > SIZE_MAX / 4 / sizeof(fx_u64map_slot_t)) return FLUXON_ERR_NOMEM;
    size_t cap = 16;
    while (cap < n * 2) {
        if (cap > SIZE_MAX / 4 / sizeof(fx_u64map_slot_t)) return FLUXON_ERR_NOMEM;
        cap *= 2;
    }
    return cap > m->cap ? u64m_grow(m, cap) : FLUXON_OK;
}

FX_INTERNAL void fx_u64map_free(fx_u64map_t *m)
{
    fx_free(m->slots);
    *m = (fx_u64map_t){NULL, 0, 0};
}

FX_INTERNAL void *fx_u64map_get(const fx_u64map_t *m, uint64_t key)
{
    size_t i = u64m_find(m, key);
    return i == SIZE_MAX ? NULL : m->slots[i].val;
}

FX_INTERNAL int fx_u64map_put(fx_u64map_t *m, uint64_t key, void *val, void **old_p)
{
    if (old_p) *old_p = NULL;
    if (key == 0) return FLUXON_ERR_INVALID_ARGUMENT;
    if (m->cap) { /* one probe: the key's slot, or the empty one that ends its run */
        size_t mask = m->cap - 1, i = u64m_hash(key) & mask;
        while (m->slots[i].key && m->slots[i].key != key) i = (i + 1) & mask;
        if (m->slots[i].key == key) {
            if (old_p) *old_p = m->slots[i].val;
            m->slots[i].val = val;
            return FLUXON_OK;
        }
        if ((m->count + 1) * 2 <= m->cap) {
            m->slots[i] = (fx_u64map_slot_t){key, val};
            m->count++;
            return FLUXON_OK;
        }
    }
    if (m->cap > SIZE_MAX / 4 / sizeof(fx_u64map_slot_t)) return FLUXON_ERR_NOMEM;
    int rc = u64m_grow(m, m->cap ? m->cap * 2 : 16);
    if (rc != FLUXON_OK) return rc;
    u64m_insert_new(m, key, val);
    return FLUXON_OK;
}

FX_INTERNAL int fx_u64map_del(fx_u64map_t *m, uint64_t key, void **val_p)
{
    size_t i = u64m_find(m, key);
    if (i == SIZE_MAX) return FLUXON_ERR_NOT_FOUND;
    if (val_p) *val_p = m->slots[i].val;
    size_t mask = m->cap - 1;
    for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t k = u64m_hash(m->slots[j].key) & mask;
        /* an entry may fill the hole only if its home is not cyclically in (i, j] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
        m->slots[i] = m->slots[j];
        i = j;
    }
    m->slots[i] = (fx_u64map_slot_t){0, NULL};
    m->count--;
    return FLUXON_OK;
}

FX_INTERNAL void fx_u64map_prefetch(const fx_u64map_t *m, uint64_t key)
{
    if (m->cap) fx_prefetch(&m->slots[u64m_hash(key) & (m->cap - 1)]);
}

FX_INTERNAL bool fx_u64map_next(const fx_u64map_t *m, size_t *it, uint64_t *key_p, void **val_p)
{
    for (; *it < m->cap; (*it)++)
        if (m->slots[*it].key) {
            if (key_p) *key_p = m->slots[*it].key;
            if (val_p) *val_p = m->slots[*it].val;
            (*it)++;
            return true;
        }
    return false;
}
