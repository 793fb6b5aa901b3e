/* lease_table.c — the master's lease table: lease id -> deadline, the number of routes
 * bound to it and their keys (issue 44 P5: an expiry visits its own routes, not the whole
 * table); routes.c binds and unbinds, leases.c grants and expires. A pure table: no I/O,
 * no timers. */
#include <string.h>

#include "groups.h"
#include "hmap.h"
#include "log.h"
#include "mkv.h"

typedef struct mkva_lease {
    uint64_t id, deadline_ms, n_routes;
    uint8_t *keys; /* the keys of the routes bound, {u32 length, bytes} records (P5) */
    size_t kused, kcap, n_keys;
    bool lost; /* a key could not be recorded: the expiry walks the route table */
} mkva_lease_t;

static void mkva_lease_free(void *v)
{
    mkva_lease_t *l = v;
    if (l) fx_free(l->keys);
    fx_free(l);
}

struct fx_lease_table {
    fx_hmap_t *map; /* id (8 bytes) -> mkva_lease_t */
    uint64_t next_id;
};

FX_INTERNAL int fx_lease_table_create(fx_lease_table_t **t_p)
{
    fx_lease_table_t *t = fx_calloc(1, sizeof *t);
    if (!t) return FLUXON_ERR_NOMEM;
    t->next_id = 1;
    int rc = fx_hmap_create(0, &t->map);
    if (rc != FLUXON_OK) {
        fx_free(t);
        return rc;
    }
    *t_p = t;
    return FLUXON_OK;
}

FX_INTERNAL void fx_lease_table_destroy(fx_lease_table_t *t)
{
    if (!t) return;
    fx_hmap_clear(t->map, mkva_lease_free);
    fx_hmap_destroy(t->map);
    fx_free(t);
}

FX_INTERNAL int fx_lease_grant(fx_lease_table_t *t, uint64_t deadline_ms, uint64_t *id_p)
{
    mkva_lease_t *l = fx_calloc(1, sizeof *l);
    if (!l) return FLUXON_ERR_NOMEM;
    l->id = t->next_id;
    l->deadline_ms = deadline_ms;
    if (fx_hmap_put(t->map, &l->id, sizeof l->id, l, NULL) != FLUXON_OK) {
        fx_free(l);
        return FLUXON_ERR_NOMEM;
    }
    t->next_id++;
    *id_p = l->id;
    return FLUXON_OK;
}

FX_INTERNAL bool fx_lease_live(const fx_lease_table_t *t, uint64_t id, uint64_t now_ms)
{
    const mkva_lease_t *l = id ? fx_hmap_get(t->map, &id, sizeof id) : NULL;
    return l && l->deadline_ms > now_ms;
}

FX_INTERNAL bool fx_lease_exists(const fx_lease_table_t *t, uint64_t id)
{
    return id && fx_hmap_get(t->map, &id, sizeof id) != NULL;
}

static bool mkva_key_add(mkva_lease_t *l, const char *key, size_t klen)
{
    if (l->kused + 4 + klen > l->kcap) {
        size_t cap = FX_MAX(l->kcap * 2, l->kused + 4 + klen + 256);
        uint8_t *k = fx_realloc(l->keys, cap);
        if (!k) return false;
        l->keys = k;
        l->kcap = cap;
    }
    uint32_t n = (uint32_t)klen;
    memcpy(l->keys + l->kused, &n, 4);
    memcpy(l->keys + l->kused + 4, key, klen);
    l->kused += 4 + klen;
    l->n_keys++;
    return true;
}

/* Keeps the recorded keys whose route is still bound to l, once each. */
static void mkva_compact(mkva_lease_t *l, fx_lease_keep_fn keep, void *arg)
{
    fx_keyset_t *seen = NULL;
    if (fx_keyset_create(l->n_routes + 16, &seen) != FLUXON_OK) return;
    size_t w = 0, n = 0;
    for (size_t r = 0; r < l->kused;) {
        uint32_t kl;
        memcpy(&kl, l->keys + r, 4);
        const char *k = (const char *)l->keys + r + 4;
        size_t rec = 4 + (size_t)kl;
        if (keep(arg, l->id, k, kl) && fx_keyset_add(seen, k, kl) == FLUXON_OK) { /* OK: first seen */
            memmove(l->keys + w, l->keys + r, rec);
            w += rec;
            n++;
        }
        r += rec;
    }
    fx_keyset_destroy(seen);
    l->kused = w;
    l->n_keys = n;
}

FX_INTERNAL int fx_lease_bind(fx_lease_table_t *t, uint64_t id, int delta, const char *key, size_t klen,
                              fx_lease_keep_fn keep, void *arg)
{
    mkva_lease_t *l = id ? fx_hmap_get(t->map, &id, sizeof id) : NULL;
    if (!l) return FLUXON_OK;
    if (delta < 0) {
        if (l->n_routes) l->n_routes--;
        return FLUXON_OK;
    }
    l->n_routes++;
    if (l->n_keys >= 2 * l->n_routes + 64 && keep) mkva_compact(l, keep, arg);
    if (mkva_key_add(l, key, klen)) return FLUXON_OK;
    l->lost = true;
    return FLUXON_ERR_NOMEM;
}

FX_INTERNAL size_t fx_lease_expire(fx_lease_table_t *t, uint64_t now_ms, fx_lease_expired_fn cb, void *arg)
{
    size_t expired = 0;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(t->map, &it, &k, &kl, &v)) {
        mkva_lease_t *l = v;
        if (l->deadline_ms > now_ms) continue;
        FX_DEBUG("lease %llu expired (%llu routes bound)", (unsigned long long)l->id,
                 (unsigned long long)l->n_routes);
        expired++;
        fx_hmap_del(t->map, k, kl, NULL); /* deleting the entry just returned is allowed */
        if (l->n_routes) cb(arg, l->id, l->keys, l->n_keys, !l->lost); /* out of the table: unbinds find nothing */
        mkva_lease_free(l);
    }
    return expired;
}

FX_INTERNAL size_t fx_lease_count(const fx_lease_table_t *t) { return fx_hmap_count(t->map); }
