/* hmap.c — robin-hood hash map with byte-string keys (see hmap.h). Slots hold the cached
 * XXH3 hash (0 = empty) and a pointer to a separately allocated entry {value, key copy}
 * (or, intrusive, to the value itself, which holds its key), so growth moves 16-byte slots
 * only; deletion shifts the displaced run back by one. */
#include "hmap.h"

#include <xxhash.h>

#define HM_MIN_CAP 8u
/* Load factor 0.85 = 17/20: count must stay <= cap * 17 / 20. */
#define HM_FITS(count, cap) ((count) * 20u <= (cap) * 17u)

typedef struct hm_entry {
    void *val;
    size_t klen;
    char key[]; /* klen bytes + NUL */
} hm_entry_t;

typedef struct hm_slot {
    uint64_t hash; /* 0 = empty; never 0 for an occupied slot */
    void *e;       /* hm_entry_t *, or the value itself in an intrusive map */
} hm_slot_t;

struct fx_hmap {
    hm_slot_t *slots;
    size_t cap, mask, count;
    bool intrusive;          /* values hold their key: char * at key_off, uint32_t at klen_off */
    size_t key_off, klen_off;
    uint64_t mods;      /* bumped by every insert of a new key and every deletion */
    uintptr_t last_del; /* entry freed by the latest deletion (iteration check only) */
};

static inline uint64_t hm_hash(const void *key, size_t klen)
{
    uint64_t h = XXH3_64bits(key, klen);
    return h ? h : 1;
}

/* The _h variants trust the caller's hash; sanitizer builds (make asan/tsan, the fuzzers)
 * check it, release builds do not pay for a second hash. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HM_CHECK_H(key, klen, h) FX_ASSERT((h) == hm_hash((key), (klen)))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HM_CHECK_H(key, klen, h) FX_ASSERT((h) == hm_hash((key), (klen)))
#endif
#endif
#ifndef HM_CHECK_H
#define HM_CHECK_H(key, klen, h) ((void)0)
#define HM_CHECK_OBJ(m, val, key, klen) ((void)0)
#else
#define HM_CHECK_OBJ(m, val, key, klen)                                                                      \
    FX_ASSERT(!(m)->intrusive ||                                                                            \
              (hm_klen((m), (val)) == (klen) && (!(klen) || !memcmp(hm_key((m), (val)), (key), (klen)))))
#endif

static inline size_t hm_klen(const fx_hmap_t *m, const void *e)
{
    if (!m->intrusive) return ((const hm_entry_t *)e)->klen;
    uint32_t l;
    memcpy(&l, (const char *)e + m->klen_off, sizeof l);
    return l;
}

static inline const char *hm_key(const fx_hmap_t *m, const void *e)
{
    if (!m->intrusive) return ((const hm_entry_t *)e)->key;
    const char *k;
    memcpy(&k, (const char *)e + m->key_off, sizeof k);
    return k;
}

static inline void *hm_val(const fx_hmap_t *m, void *e) { return m->intrusive ? e : ((hm_entry_t *)e)->val; }

/* Probe distance of the occupant of slot i from its home slot. */
static inline size_t hm_dist(const fx_hmap_t *m, size_t i)
{
    return (i - (size_t)(m->slots[i].hash & m->mask)) & m->mask;
}

/* Slot index of key, or SIZE_MAX when absent. */
static size_t hm_find(const fx_hmap_t *m, const void *key, size_t klen, uint64_t h)
{
    size_t i = (size_t)h & m->mask;
    for (size_t d = 0;; d++, i = (i + 1) & m->mask) {
        const hm_slot_t *s = &m->slots[i];
        if (s->hash == 0 || hm_dist(m, i) < d) return SIZE_MAX;
        if (s->hash == h && hm_klen(m, s->e) == klen && (klen == 0 || memcmp(hm_key(m, s->e), key, klen) == 0))
            return i;
    }
}

/* Robin-hood placement of (h, e) into slots that are known to have room. */
static void hm_place(hm_slot_t *slots, size_t mask, uint64_t h, void *e)
{
    size_t i = (size_t)h & mask;
    for (size_t d = 0;; d++, i = (i + 1) & mask) {
        hm_slot_t *s = &slots[i];
        if (s->hash == 0) {
            s->hash = h;
            s->e = e;
            return;
        }
        size_t sd = (i - (size_t)(s->hash & mask)) & mask;
        if (sd < d) { /* the richer occupant yields its slot and moves on */
            uint64_t th = s->hash;
            void *te = s->e;
            s->hash = h;
            s->e = e;
            h = th;
            e = te;
            d = sd;
        }
    }
}

static int hm_resize(fx_hmap_t *m, size_t ncap)
{
    hm_slot_t *ns = fx_calloc(ncap, sizeof *ns);
    if (!ns) return FLUXON_ERR_NOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].hash) hm_place(ns, ncap - 1, m->slots[i].hash, m->slots[i].e);
    fx_free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    m->mask = ncap - 1;
    return FLUXON_OK;
}

FX_INTERNAL int fx_hmap_create(size_t initial_cap, fx_hmap_t **m_p)
{
    if (!m_p || initial_cap > (SIZE_MAX / 32u)) return FLUXON_ERR_INVALID_ARGUMENT;
    size_t cap = HM_MIN_CAP;
    while (!HM_FITS(initial_cap, cap)) cap <<= 1;
    fx_hmap_t *m = fx_calloc(1, sizeof *m);
    if (!m) return FLUXON_ERR_NOMEM;
    m->slots = fx_calloc(cap, sizeof *m->slots);
    if (!m->slots) {
        fx_free(m);
        return FLUXON_ERR_NOMEM;
    }
    m->cap = cap;
    m->mask = cap - 1;
    *m_p = m;
    return FLUXON_OK;
}

FX_INTERNAL int fx_hmap_create_intrusive(size_t initial_cap, size_t key_off, size_t klen_off, fx_hmap_t **m_p)
{
    int rc = fx_hmap_create(initial_cap, m_p);
    if (rc != FLUXON_OK) return rc;
    (*m_p)->intrusive = true;
    (*m_p)->key_off = key_off;
    (*m_p)->klen_off = klen_off;
    return FLUXON_OK;
}

FX_INTERNAL void fx_hmap_destroy(fx_hmap_t *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->cap && !m->intrusive; i++)
        if (m->slots[i].hash) fx_free(m->slots[i].e);
    fx_free(m->slots);
    fx_free(m);
}

FX_INTERNAL void fx_hmap_clear(fx_hmap_t *m, void (*free_fn)(void *val))
{
    if (!m) return;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].hash) continue;
        void *val = hm_val(m, m->slots[i].e);
        if (!m->intrusive) fx_free(m->slots[i].e);
        m->slots[i].hash = 0;
        m->slots[i].e = NULL;
        if (free_fn) free_fn(val);
    }
    m->count = 0;
    m->mods++;
}

FX_INTERNAL uint64_t fx_hmap_hash(const void *key, size_t klen) { return hm_hash(key, klen); }

FX_INTERNAL void fx_hmap_prefetch(const fx_hmap_t *m, uint64_t h)
{
    fx_prefetch(&m->slots[(size_t)h & m->mask]);
}

FX_INTERNAL void fx_hmap_prefetch_deep(const fx_hmap_t *m, uint64_t h, int depth)
{
    size_t i = (size_t)h & m->mask;
    for (size_t d = 0; d <= m->mask; d++, i = (i + 1) & m->mask) {
        const hm_slot_t *s = &m->slots[i];
        if (s->hash == 0 || hm_dist(m, i) < d) return;
        if (s->hash != h) continue;
        if (depth <= 1) fx_prefetch(s->e);
        else if (!m->intrusive) fx_prefetch(((const hm_entry_t *)s->e)->val);
        return;
    }
}

FX_INTERNAL void *fx_hmap_get_h(const fx_hmap_t *m, const void *key, size_t klen, uint64_t h)
{
    FX_ASSERT(m && (key || klen == 0));
    FX_ASSERT(h != 0); /* 0 marks an empty slot */
    HM_CHECK_H(key, klen, h);
    size_t i = hm_find(m, key, klen, h);
    return i == SIZE_MAX ? NULL : hm_val(m, m->slots[i].e);
}

FX_INTERNAL void *fx_hmap_get(const fx_hmap_t *m, const void *key, size_t klen)
{
    return fx_hmap_get_h(m, key, klen, hm_hash(key, klen));
}

FX_INTERNAL int fx_hmap_get_key(const fx_hmap_t *m, const void *key, size_t klen,
                                const char **stored_key_p)
{
    FX_ASSERT(m && (key || klen == 0));
    size_t i = hm_find(m, key, klen, hm_hash(key, klen));
    if (i == SIZE_MAX) return FLUXON_ERR_NOT_FOUND;
    if (stored_key_p) *stored_key_p = hm_key(m, m->slots[i].e);
    return FLUXON_OK;
}

FX_INTERNAL int fx_hmap_put(fx_hmap_t *m, const void *key, size_t klen, void *val,
                            void **old_p)
{
    return fx_hmap_put_h(m, key, klen, hm_hash(key, klen), val, old_p);
}

FX_INTERNAL int fx_hmap_put_h(fx_hmap_t *m, const void *key, size_t klen, uint64_t h, void *val, void **old_p)
{
    FX_ASSERT(m && (key || klen == 0));
    FX_ASSERT(h != 0); /* 0 marks an empty slot */
    HM_CHECK_H(key, klen, h);
    /* intrusive: val is the object and holds this very key (checked in sanitizer builds) */
    FX_ASSERT(!m->intrusive || val);
    HM_CHECK_OBJ(m, val, key, klen);
    size_t i = hm_find(m, key, klen, h);
    if (i != SIZE_MAX) {
        if (m->intrusive) {
            if (old_p) *old_p = m->slots[i].e;
            m->slots[i].e = val;
            return FLUXON_OK;
        }
        hm_entry_t *e = m->slots[i].e;
        if (old_p) *old_p = e->val;
        e->val = val;
        return FLUXON_OK;
    }
    void *e = val;
    if (!m->intrusive) {
        if (klen > SIZE_MAX - sizeof(hm_entry_t) - 1) return FLUXON_ERR_NOMEM;
        hm_entry_t *ne = fx_malloc(sizeof *ne + klen + 1);
        if (!ne) return FLUXON_ERR_NOMEM;
        ne->val = val;
        ne->klen = klen;
        if (klen) memcpy(ne->key, key, klen);
        ne->key[klen] = 0;
        e = ne;
    }
    if (!HM_FITS(m->count + 1, m->cap)) {
        if (m->cap > SIZE_MAX / 2 / sizeof(hm_slot_t) || hm_resize(m, m->cap * 2) != FLUXON_OK) {
            if (!m->intrusive) fx_free(e);
            return FLUXON_ERR_NOMEM;
        }
    }
    hm_place(m->slots, m->mask, h, e);
    m->count++;
    m->mods++;
    if (old_p) *old_p = NULL;
    return FLUXON_OK;
}

FX_INTERNAL int fx_hmap_del(fx_hmap_t *m, const void *key, size_t klen, void **val_p)
{
    return fx_hmap_del_h(m, key, klen, hm_hash(key, klen), val_p);
}

/* Removes the occupant of slot i (backward shift). */
static void hm_remove_at(fx_hmap_t *m, size_t i)
{
    void *e = m->slots[i].e;
    /* Backward shift: pull each following displaced occupant one slot towards home. */
    for (;;) {
        size_t j = (i + 1) & m->mask;
        if (m->slots[j].hash == 0 || hm_dist(m, j) == 0) break;
        m->slots[i] = m->slots[j];
        i = j;
    }
    m->slots[i].hash = 0;
    m->slots[i].e = NULL;
    m->count--;
    m->mods++;
    m->last_del = (uintptr_t)e;
    if (!m->intrusive) fx_free(e);
}

FX_INTERNAL int fx_hmap_del_h(fx_hmap_t *m, const void *key, size_t klen, uint64_t h, void **val_p)
{
    FX_ASSERT(m && (key || klen == 0));
    FX_ASSERT(h != 0); /* 0 marks an empty slot */
    HM_CHECK_H(key, klen, h);
    size_t i = hm_find(m, key, klen, h);
    if (i == SIZE_MAX) return FLUXON_ERR_NOT_FOUND;
    if (val_p) *val_p = hm_val(m, m->slots[i].e);
    hm_remove_at(m, i);
    return FLUXON_OK;
}

FX_INTERNAL int fx_hmap_del_obj(fx_hmap_t *m, uint64_t h, const void *obj)
{
    FX_ASSERT(m && m->intrusive && obj);
    FX_ASSERT(h != 0); /* 0 marks an empty slot */
    HM_CHECK_H(hm_key(m, obj), hm_klen(m, obj), h);
    size_t i = (size_t)h & m->mask;
    for (size_t d = 0;; d++, i = (i + 1) & m->mask) {
        const hm_slot_t *s = &m->slots[i];
        if (s->hash == 0 || hm_dist(m, i) < d) return FLUXON_ERR_NOT_FOUND;
        if (s->hash == h && s->e == obj) break;
    }
    hm_remove_at(m, i);
    return FLUXON_OK;
}

FX_INTERNAL size_t fx_hmap_count(const fx_hmap_t *m) { return m ? m->count : 0; }

FX_INTERNAL size_t fx_hmap_capacity(const fx_hmap_t *m) { return m ? m->cap : 0; }

FX_INTERNAL void fx_hmap_iter_init(fx_hmap_iter_t *it) { memset(it, 0, sizeof *it); }

FX_INTERNAL bool fx_hmap_iter_next(const fx_hmap_t *m, fx_hmap_iter_t *it, const char **key,
                                   size_t *klen, void **val)
{
    FX_ASSERT(m && it);
    if (it->state == 2) return false;
    if (it->state == 0) {
        /* Start right after an empty slot (one always exists: load <= 0.85). */
        size_t e = 0;
        while (m->slots[e].hash) e++;
        it->origin = (e + 1) & m->mask;
        it->off = 0;
        it->mods = m->mods;
        it->state = 1;
    } else if (m->mods != it->mods) {
        /* Only the deletion of the entry just returned is allowed; its slot now holds
         * the next occupant of the run (or is empty), so examine it again. */
        FX_ASSERT(it->off > 0 && m->mods == it->mods + 1 && m->last_del == it->last);
        it->mods = m->mods;
        it->off--;
    }
    while (it->off < m->cap) {
        const hm_slot_t *s = &m->slots[(it->origin + it->off) & m->mask];
        it->off++;
        if (s->hash) {
            it->last = (uintptr_t)s->e;
            if (key) *key = hm_key(m, s->e);
            if (klen) *klen = hm_klen(m, s->e);
            if (val) *val = hm_val(m, s->e);
            return true;
        }
    }
    it->state = 2;
    return false;
}

#undef HM_CHECK_H
#undef HM_CHECK_OBJ
#undef HM_MIN_CAP
#undef HM_FITS
