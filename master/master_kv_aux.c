/* master_kv_aux.c — the lease table and the INVALIDATE batcher of master_kv.c (see
 * master_kv_aux.h). */
#include <stdio.h>

#include "hmap.h"
#include "log.h"
#include "master_kv_aux.h"

#define MKVA_INV_CHUNK_BYTES (1u << 20) /* an INVALIDATE body is split at about 1 MiB */

/* ---- leases ---- */
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
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    void *v;
    while (fx_hmap_iter_next(t->map, &it, NULL, NULL, &v)) fx_free(v);
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

/* ---- INVALIDATE batches ---- */
FX_INTERNAL void fx_mkv_inv_add(fx_mkv_inv_t *v, master_node_t *node, const char *key, size_t klen,
                                uint64_t offset, uint64_t put_ms, uint64_t put_ver)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 16;
        fx_mkv_inv_ent_t *ne = fx_realloc(v->e, nc * sizeof *ne);
        if (!ne) {
            v->lost++;
            return;
        }
        v->e = ne;
        v->cap = nc;
    }
    if (v->kcap - v->kused < klen) {
        size_t nc = FX_MAX(v->kcap * 2, v->kused + klen + 4096);
        char *nk = fx_realloc(v->keys, nc);
        if (!nk) {
            v->lost++;
            return;
        }
        v->keys = nk;
        v->kcap = nc;
    }
    if (klen) memcpy(v->keys + v->kused, key, klen);
    v->e[v->n++] = (fx_mkv_inv_ent_t){node, offset, put_ms, put_ver, v->kused, (uint32_t)klen, false};
    v->kused += klen;
}

static void mkva_inv_send(master_node_t *node, const fx_mkv_inv_t *v, const size_t *idx, size_t cnt,
                          uint64_t *replicas_p, uint64_t *msgs_p)
{
    fx_str_t *keys = fx_malloc(cnt * sizeof *keys);
    uint64_t *cols = fx_malloc(cnt * 3 * sizeof *cols);
    if (!keys || !cols) {
        FX_ERROR("invalidate %s: out of memory; %zu replicas not invalidated", node->node_id, cnt);
        fx_free(keys);
        fx_free(cols);
        return;
    }
    for (size_t i = 0; i < cnt; i++) {
        const fx_mkv_inv_ent_t *e = &v->e[idx[i]];
        keys[i] = (fx_str_t){v->keys + e->koff, e->klen};
        cols[i] = e->offset;
        cols[cnt + i] = e->put_ms;
        cols[2 * cnt + i] = e->put_ver;
    }
    uint32_t n = (uint32_t)cnt;
    fx_body_invalidate_t b = {{keys, n}, {cols, n}, {cols + cnt, n}, {cols + 2 * cnt, n}};
    if (FX_CONN_SEND(node->peer->conn, FX_MSG_INVALIDATE, 0, 0, 0, invalidate, &b) == FLUXON_OK) {
        *replicas_p += cnt;
        (*msgs_p)++;
    } else {
        FX_WARN("invalidate %s: connection closed; %zu replicas not invalidated", node->node_id, cnt);
    }
    fx_free(keys);
    fx_free(cols);
}

FX_INTERNAL void fx_mkv_inv_flush(fx_mkv_inv_t *v, uint64_t *replicas_p, uint64_t *msgs_p)
{
    if (v->lost) FX_ERROR("out of memory collecting invalidations: %zu replicas not invalidated", v->lost);
    size_t *idx = v->n ? fx_malloc(v->n * sizeof *idx) : NULL;
    if (v->n && !idx) FX_ERROR("out of memory sending %zu invalidations", v->n);
    for (size_t i = 0; idx && i < v->n; i++) {
        if (v->e[i].sent) continue;
        master_node_t *node = v->e[i].node;
        bool connected = node->peer && node->peer->conn && fx_conn_is_open(node->peer->conn);
        size_t cnt = 0, bytes = 0;
        for (size_t j = i; j < v->n; j++) {
            if (v->e[j].sent || v->e[j].node != node) continue;
            v->e[j].sent = true;
            if (!connected) continue;
            idx[cnt++] = j;
            bytes += 28 + v->e[j].klen;
            if (bytes >= MKVA_INV_CHUNK_BYTES) {
                mkva_inv_send(node, v, idx, cnt, replicas_p, msgs_p);
                cnt = bytes = 0;
            }
        }
        if (cnt) mkva_inv_send(node, v, idx, cnt, replicas_p, msgs_p);
        if (!connected) FX_DEBUG("invalidate: owner %s is not connected; not told", node->node_id);
    }
    fx_free(idx);
    fx_free(v->e);
    fx_free(v->keys);
    memset(v, 0, sizeof *v);
}

#undef MKVA_INV_CHUNK_BYTES
