/* lease_table.c — the master's lease table: lease id -> deadline and the number of routes
 * bound to it (routes.c binds and unbinds, leases.c grants and expires). A pure table:
 * no I/O, no timers. */
#include "hmap.h"
#include "log.h"
#include "mkv.h"

typedef struct mkva_lease {
    uint64_t id, deadline_ms, n_routes;
} mkva_lease_t;

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
    fx_hmap_clear(t->map, fx_free);
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

FX_INTERNAL void fx_lease_bind(fx_lease_table_t *t, uint64_t id, int delta)
{
    mkva_lease_t *l = id ? fx_hmap_get(t->map, &id, sizeof id) : NULL;
    if (!l) return;
    if (delta > 0) l->n_routes++;
    else if (l->n_routes) l->n_routes--;
}

FX_INTERNAL size_t fx_lease_expire(fx_lease_table_t *t, uint64_t now_ms, uint64_t *routes_p)
{
    size_t expired = 0;
    uint64_t routes = 0;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(t->map, &it, &k, &kl, &v)) {
        mkva_lease_t *l = v;
        if (l->deadline_ms > now_ms) continue;
        FX_DEBUG("lease %llu expired (%llu routes bound)", (unsigned long long)l->id,
                 (unsigned long long)l->n_routes);
        routes += l->n_routes;
        expired++;
        fx_hmap_del(t->map, k, kl, NULL); /* deleting the entry just returned is allowed */
        fx_free(l);
    }
    *routes_p = routes;
    return expired;
}

FX_INTERNAL size_t fx_lease_count(const fx_lease_table_t *t) { return fx_hmap_count(t->map); }
