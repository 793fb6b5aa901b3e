/* routes.c — the bottom of the master's KV state (ARCHITECTURE §5, §10): the route table
 * (key -> value_len, put_id, lease, atomic group length, up to 4 replicas) with its
 * ordered prefix index, the one global put-id generator, replica bookkeeping (ranges of
 * placed puts are freed with their replica), and the INVALIDATE batcher (collects "this
 * replica is no longer routed" per owner during one request, then sends ONE one-way
 * INVALIDATE per owner).
 *
 * The ordered prefix index serves LIST only, and most clusters never list: keeping it up to
 * date cost every published key a crit-bit insert (half the master's CPU in a trace replay,
 * issue 18). So it does not exist until the first LIST builds it from the route map (keys
 * sorted first: in-order inserts walk a path that stays in cache); while it exists every
 * route change keeps it exact, and a timer drops it once no LIST came for
 * MKV_INDEX_IDLE_MS (a `ls` paging through many pages keeps it).
 *
 * Decisions not spelled out elsewhere:
 *  - A route whose lease expired is deleted (with INVALIDATEs) the moment any request
 *    meets it (mkv_route_get), or by the lease timer (leases.c).
 *  - Replicas of a node's older generation died with that process: never invalidated. */
#include <stdio.h>
#include <stdlib.h>

#include "hmap.h"
#include "log.h"
#include "master_ha.h"
#include "mkv.h"

#define RT_INV_CHUNK_BYTES (1u << 20) /* an INVALIDATE body is split at about 1 MiB */
#define RT_INV_HELD_MAX (1u << 20)    /* invalidations held per disconnected owner */
#define MKV_INV_RECENT_MS 1000u       /* one-way disk INVALIDATEs remembered: far above a tombstone's
                                       * staging (2 ms) and write */

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

/* An acked INVALIDATE (a DELETE waits for it) that the owner did not confirm — it answered
 * an error (its disk tombstone could not be written), did not answer in time, or its
 * connection went — is held for that owner like one made while it was away: sent again when
 * it comes back to this master, restarted with its disk too (new user's finding: a DELETE
 * whose tombstone failed came back at the owner's restart). */
static fx_mkv_inv_t *rt_inv_held(master_node_t *n);

typedef struct rt_inv_ack {
    mkv_t *s;
    fx_rpc_cb cb;
    void *arg;
    uint64_t generation;
    fx_mkv_inv_t ents; /* what was sent, for the owner of this node_id */
    char node_id[FX_ID_MAX];
} rt_inv_ack_t;

static void rt_on_inv_ack(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    rt_inv_ack_t *a = arg;
    mkv_t *s = a->s;
    if (status != FLUXON_OK && !s->m->shutting_down && !s->m->resetting) {
        master_node_t *n = NULL;
        for (size_t i = 0; i < s->m->n_nodes && !n; i++)
            if (!strcmp(s->m->nodes[i]->node_id, a->node_id)) n = s->m->nodes[i];
        fx_mkv_inv_t *held = n && n->generation == a->generation && !n->forgotten ? rt_inv_held(n) : NULL;
        for (size_t i = 0; held && i < a->ents.n; i++) {
            const fx_mkv_inv_ent_t *e = &a->ents.e[i];
            if (held->n < RT_INV_HELD_MAX)
                fx_mkv_inv_add(held, n, a->ents.keys + e->koff, e->klen, e->offset, e->put_ms, e->put_ver);
            else held->lost++;
        }
        if (held) s->c.invalidations_held_unconfirmed += a->ents.n;
    }
    a->cb(a->arg, status, h, body, arena);
    fx_free(a->ents.e);
    fx_free(a->ents.keys);
    fx_free(a);
}

static void rt_inv_free(fx_mkv_inv_t *v)
{
    if (!v) return;
    fx_free(v->e);
    fx_free(v->keys);
    fx_free(v);
}

/* The disk records among a one-way INVALIDATE just sent to node (mkv_inv_recent_hold). */
static void rt_inv_recent_add(master_node_t *n, const fx_mkv_inv_t *v, const size_t *idx, size_t cnt)
{
    uint64_t now = fx_now_ms();
    bool any = false;
    for (size_t i = 0; i < cnt && !any; i++) any = v->e[idx[i]].offset >> 63; /* FX_DISK_OFF_BIT */
    if (!any) return;
    if (!n->inv_recent[0] || now - n->inv_recent_ms >= MKV_INV_RECENT_MS) { /* a new period */
        rt_inv_free(n->inv_recent[1]);
        n->inv_recent[1] = n->inv_recent[0];
        n->inv_recent[0] = fx_calloc(1, sizeof *n->inv_recent[0]);
        n->inv_recent_ms = now;
        if (!n->inv_recent[0])
            FX_ERROR("invalidate: out of memory remembering the disk invalidations sent to %s", n->node_id);
    }
    fx_mkv_inv_t *r = n->inv_recent[0];
    for (size_t i = 0; r && i < cnt; i++) {
        const fx_mkv_inv_ent_t *e = &v->e[idx[i]];
        if (!(e->offset >> 63)) continue;
        if (r->n < RT_INV_HELD_MAX) fx_mkv_inv_add(r, n, v->keys + e->koff, e->klen, e->offset, e->put_ms, e->put_ver);
        else r->lost++;
    }
}

/* Sends one INVALIDATE of cnt entries: one-way, or (cb) a request node answers once it
 * dropped the copies (cb runs once). Returns true when sent. */
static bool rt_inv_send(mkv_t *s, master_node_t *node, const fx_mkv_inv_t *v, const size_t *idx, size_t cnt,
                        uint64_t *replicas_p, uint64_t *msgs_p, uint32_t timeout_ms, fx_rpc_cb cb, void *arg)
{
    fx_str_t *keys = fx_malloc(cnt * sizeof *keys);
    uint64_t *cols = fx_malloc(cnt * 3 * sizeof *cols);
    if (!keys || !cols) {
        FX_ERROR("invalidate %s: out of memory; %zu replicas not invalidated", node->node_id, cnt);
        fx_free(keys);
        fx_free(cols);
        return false;
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
    rt_inv_ack_t *a = cb ? fx_calloc(1, sizeof *a) : NULL;
    if (a) {
        *a = (rt_inv_ack_t){.s = s, .cb = cb, .arg = arg, .generation = node->generation};
        fx_strlcpy(a->node_id, node->node_id, sizeof a->node_id);
        for (size_t i = 0; i < cnt; i++) {
            const fx_mkv_inv_ent_t *e = &v->e[idx[i]];
            fx_mkv_inv_add(&a->ents, node, v->keys + e->koff, e->klen, e->offset, e->put_ms, e->put_ver);
        }
    }
    int rc = a ? FX_RPC_CALL(node->peer->conn, INVALIDATE, invalidate, &b, timeout_ms, rt_on_inv_ack, a)
         : cb ? FX_RPC_CALL(node->peer->conn, INVALIDATE, invalidate, &b, timeout_ms, cb, arg) /* no memory: as before */
              : FX_CONN_SEND(node->peer->conn, FX_MSG_INVALIDATE, 0, 0, 0, invalidate, &b);
    if (rc != FLUXON_OK && a) {
        fx_free(a->ents.e);
        fx_free(a->ents.keys);
        fx_free(a);
    }
    if (rc == FLUXON_OK) {
        *replicas_p += cnt;
        (*msgs_p)++;
        if (!cb) rt_inv_recent_add(node, v, idx, cnt);
    } else {
        FX_WARN("invalidate %s: connection closed; %zu replicas not invalidated", node->node_id, cnt);
    }
    fx_free(keys);
    fx_free(cols);
    return rc == FLUXON_OK;
}

/* The held invalidations of a node (created on first use; NULL when out of memory). */
static fx_mkv_inv_t *rt_inv_held(master_node_t *n)
{
    if (!n->inv_held) n->inv_held = fx_calloc(1, sizeof *n->inv_held);
    if (!n->inv_held) FX_ERROR("invalidate: out of memory holding invalidations for %s", n->node_id);
    return n->inv_held;
}

FX_INTERNAL void mkv_inv_held_drop(master_node_t *n)
{
    if (!n->inv_held) return;
    fx_free(n->inv_held->e);
    fx_free(n->inv_held->keys);
    fx_free(n->inv_held);
    n->inv_held = NULL;
}

FX_INTERNAL void mkv_inv_recent_drop(master_node_t *n)
{
    rt_inv_free(n->inv_recent[0]);
    rt_inv_free(n->inv_recent[1]);
    n->inv_recent[0] = n->inv_recent[1] = NULL;
}

FX_INTERNAL void mkv_inv_recent_hold(mkv_t *s, master_node_t *n)
{
    size_t moved = 0, lost = 0;
    for (int k = 1; k >= 0; k--) { /* oldest first */
        const fx_mkv_inv_t *r = n->inv_recent[k];
        fx_mkv_inv_t *held = r && r->n ? rt_inv_held(n) : NULL;
        for (size_t i = 0; held && i < r->n; i++) {
            const fx_mkv_inv_ent_t *e = &r->e[i];
            if (held->n < RT_INV_HELD_MAX) {
                fx_mkv_inv_add(held, n, r->keys + e->koff, e->klen, e->offset, e->put_ms, e->put_ver);
                moved++;
            } else {
                held->lost++;
            }
        }
        lost += r ? r->lost : 0;
    }
    s->c.invalidations_held_after_restart += moved;
    if (moved || lost)
        FX_INFO("owner %s restarted: %zu invalidations of its disk records sent to the old process in its last "
                "%u ms are sent again (their tombstones may not have reached its disk)%s", n->node_id, moved,
                2 * MKV_INV_RECENT_MS, lost ? "; some were not kept (out of memory or too many)" : "");
    mkv_inv_recent_drop(n);
}

FX_INTERNAL void mkv_inv_held_keep_disk(master_node_t *n)
{
    fx_mkv_inv_t *v = n->inv_held;
    if (!v) return;
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->e[i].offset >> 63) v->e[k++] = v->e[i]; /* FX_DISK_OFF_BIT: a disk record (its key stays in keys) */
    v->n = k;
    v->lost = 0; /* what could not be held was counted when it was lost */
    if (!k) mkv_inv_held_drop(n);
}

FX_INTERNAL void mkv_inv_held_send(mkv_t *s, master_node_t *n)
{
    fx_mkv_inv_t *v = n->inv_held;
    if (!v) return;
    n->inv_held = NULL;
    if (v->lost)
        FX_ERROR("owner %s reconnected: %zu invalidations made while it was away were not kept (more than %u); it "
                 "may serve those replaced or deleted values, from memory until it restarts and from its disk tier "
                 "after it", n->node_id, v->lost, RT_INV_HELD_MAX);
    v->lost = 0;
    FX_INFO("owner %s reconnected: sending %zu invalidations made while it was away", n->node_id, v->n);
    mkv_inv_flush(s, v); /* connected now: sent (held again if the connection is already gone) */
    fx_free(v);
}

static size_t rt_inv_flush(mkv_t *s, fx_mkv_inv_t *v, uint32_t timeout_ms, fx_rpc_cb cb, void *arg,
                           size_t *held_p);

FX_INTERNAL void mkv_inv_flush(mkv_t *s, fx_mkv_inv_t *v) { rt_inv_flush(s, v, 0, NULL, NULL, NULL); }

FX_INTERNAL size_t mkv_inv_flush_acked(mkv_t *s, fx_mkv_inv_t *v, uint32_t timeout_ms, fx_rpc_cb cb, void *arg,
                                       size_t *held_p)
{
    return rt_inv_flush(s, v, timeout_ms, cb, arg, held_p);
}

static size_t rt_inv_flush(mkv_t *s, fx_mkv_inv_t *v, uint32_t timeout_ms, fx_rpc_cb cb, void *arg,
                           size_t *held_p)
{
    size_t acked = 0, held_n = 0;
    uint64_t *replicas_p = &s->c.invalidations_sent, *msgs_p = &s->c.invalidate_msgs;
    if (v->lost) FX_ERROR("out of memory collecting invalidations: %zu replicas not invalidated", v->lost);
    size_t *idx = v->n ? fx_malloc(v->n * sizeof *idx) : NULL;
    if (v->n && !idx) FX_ERROR("out of memory sending %zu invalidations", v->n);
    for (size_t i = 0; idx && i < v->n; i++) {
        if (v->e[i].sent) continue;
        master_node_t *node = v->e[i].node;
        bool connected = node->peer && node->peer->conn && fx_conn_is_open(node->peer->conn);
        size_t cnt = 0, bytes = 0;
        fx_mkv_inv_t *held = connected ? NULL : rt_inv_held(node);
        for (size_t j = i; j < v->n; j++) {
            if (v->e[j].sent || v->e[j].node != node) continue;
            v->e[j].sent = true;
            if (!connected) {
                held_n++;
                const fx_mkv_inv_ent_t *e = &v->e[j];
                if (held && held->n < RT_INV_HELD_MAX)
                    fx_mkv_inv_add(held, node, v->keys + e->koff, e->klen, e->offset, e->put_ms, e->put_ver);
                else if (held) held->lost++;
                continue;
            }
            idx[cnt++] = j;
            bytes += 28 + v->e[j].klen;
            if (bytes >= RT_INV_CHUNK_BYTES) {
                acked += rt_inv_send(s, node, v, idx, cnt, replicas_p, msgs_p, timeout_ms, cb, arg) && cb;
                cnt = bytes = 0;
            }
        }
        if (cnt) acked += rt_inv_send(s, node, v, idx, cnt, replicas_p, msgs_p, timeout_ms, cb, arg) && cb;
        if (!connected) FX_DEBUG("invalidate: owner %s is not connected; told when it reconnects", node->node_id);
    }
    fx_free(idx);
    fx_free(v->e);
    fx_free(v->keys);
    memset(v, 0, sizeof *v);
    if (held_p) *held_p = held_n;
    return acked;
}

/* ---- put ids ---- */
static uint64_t rt_realtime_ms(const mkv_t *s)
{
    return s->m ? fx_master_put_clock_ms(&s->m->cfg) : fx_realtime_ns() / 1000000ull;
}

/* ONE global monotonic put_id generator: strictly increasing across the whole master, and
 * across masters (W6): with standbys, never above the ceiling this leader stored in etcd
 * (the next leader starts above it), whatever this host's clock says. */
static void rt_next_put_id(mkv_t *s, uint64_t *ms, uint32_t *ver)
{
    uint64_t now = rt_realtime_ms(s), ceil = s->m ? fx_mha_put_ceiling(s->m) : 0;
    if (ceil && now > ceil) now = ceil; /* ids go on in put_ver (4 G of them) until it is extended */
    if (now > s->last_put_ms) {
        s->last_put_ms = now;
        s->last_put_ver = 0;
    } else if (s->last_put_ver == UINT32_MAX) {
        s->last_put_ms++;
        s->last_put_ver = 0;
    } else {
        s->last_put_ver++;
    }
    *ms = s->last_put_ms;
    *ver = s->last_put_ver;
}

FX_INTERNAL void mkv_put_id_next(mkv_t *s, uint64_t *put_ms, uint32_t *put_ver) { rt_next_put_id(s, put_ms, put_ver); }

FX_INTERNAL void mkv_put_id_floor(mkv_t *s, uint64_t put_ms)
{
    mkv_put_id_seen(s, put_ms, UINT32_MAX); /* the next id is above every (put_ms, *) */
}

FX_INTERNAL void mkv_put_id_seen(mkv_t *s, uint64_t put_ms, uint32_t put_ver)
{
    if (put_ms > s->last_put_ms || (put_ms == s->last_put_ms && put_ver > s->last_put_ver)) {
        s->last_put_ms = put_ms;
        s->last_put_ver = put_ver;
    }
}

/* ---- the prefix index (built by the first LIST, dropped when idle) ---- */
/* A new key of the route map into the index, when there is one. FLUXON_OK or NOMEM. */
static int rt_index_add(mkv_t *s, fx_str_t key)
{
    if (!s->index) return FLUXON_OK;
    int rc = fx_prefix_index_insert(s->index, key.p, key.len);
    return rc == FLUXON_ERR_KEY_EXISTS ? FLUXON_OK : rc;
}

static void rt_index_drop(mkv_t *s)
{
    fx_prefix_index_destroy(s->index);
    s->index = NULL;
}

static void rt_index_on_timer(fx_reactor_t *r, fx_timer_t *t)
{
    mkv_t *s = FX_CONTAINER_OF(t, mkv_t, index_timer);
    if (mkv_routes_index_sweep(s, fx_now_ms())) return;
    fx_timer_arm(r, t, MKV_INDEX_IDLE_MS / 4, rt_index_on_timer);
}

FX_INTERNAL bool mkv_routes_index_sweep(mkv_t *s, uint64_t now_ms)
{
    if (!s->index) return true;
    if (now_ms < s->index_used_ms + MKV_INDEX_IDLE_MS) return false;
    FX_DEBUG("prefix index of %zu keys dropped: no LIST for %u ms", fx_prefix_index_count(s->index),
             MKV_INDEX_IDLE_MS);
    rt_index_drop(s);
    return true;
}

FX_INTERNAL size_t mkv_routes_index_keys(const mkv_t *s) { return s->index ? fx_prefix_index_count(s->index) : 0; }

/* A key to sort: its 8 bytes after the prefix every key shares, big-endian (most
 * comparisons end there, without touching the key bytes scattered in the route map). */
typedef struct rt_sort_key {
    uint64_t head;
    fx_str_t k;
} rt_sort_key_t;

static int rt_sort_cmp(const void *a, const void *b)
{
    const rt_sort_key_t *x = a, *y = b;
    if (x->head != y->head) return x->head < y->head ? -1 : 1;
    size_t n = FX_MIN(x->k.len, y->k.len);
    int c = n ? memcmp(x->k.p, y->k.p, n) : 0;
    return c ? c : (x->k.len > y->k.len) - (x->k.len < y->k.len);
}

/* Every key of the route map, sorted (memcmp order, a prefix first); NULL when out of
 * memory. Views of the map's own copies: valid until the map changes. */
static rt_sort_key_t *rt_sorted_keys(mkv_t *s, size_t *n_p)
{
    size_t n = fx_hmap_count(s->routes), i = 0, common = SIZE_MAX;
    rt_sort_key_t *v = fx_malloc((n ? n : 1) * sizeof *v);
    if (!v) return NULL;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *val;
    while (i < n && fx_hmap_iter_next(s->routes, &it, &k, &kl, &val)) {
        v[i].k = (fx_str_t){k, (uint32_t)kl};
        size_t c = 0, lim = i ? FX_MIN(common, kl) : kl;
        while (i && c < lim && k[c] == v[0].k.p[c]) c++;
        common = i ? c : kl;
        i++;
    }
    for (size_t j = 0; j < i; j++) {
        if (j + 8 < i) fx_prefetch(v[j + 8].k.p); /* the keys lie scattered in the map */
        uint64_t h = 0;
        for (size_t c = common; c < common + 8; c++) h = h << 8 | (c < v[j].k.len ? (uint8_t)v[j].k.p[c] : 0);
        v[j].head = h;
    }
    qsort(v, i, sizeof *v, rt_sort_cmp);
    *n_p = i;
    return v;
}

/* The index of every key of the route map, made now if there is none (LIST): the keys
 * sorted, then appended (O(routes log routes); ~0.3 s for a million keys). */
static int rt_index_need(mkv_t *s)
{
    s->index_used_ms = fx_now_ms();
    if (s->index) return FLUXON_OK;
    size_t n = 0;
    rt_sort_key_t *keys = rt_sorted_keys(s, &n);
    int rc = keys ? fx_prefix_index_create(&s->index) : FLUXON_ERR_NOMEM;
    for (size_t j = 0; rc == FLUXON_OK && j < n; j++) {
        if (j + 8 < n) fx_prefetch(keys[j + 8].k.p);
        rc = fx_prefix_index_append(s->index, keys[j].k.p, keys[j].k.len);
    }
    fx_free(keys);
    if (rc != FLUXON_OK) {
        FX_ERROR("list: cannot build the prefix index of %zu keys: %s", fx_hmap_count(s->routes),
                 fluxon_status_string(rc));
        rt_index_drop(s);
        return FLUXON_ERR_NOMEM;
    }
    s->c.prefix_index_builds++;
    FX_DEBUG("prefix index built: %zu keys", n);
    if (s->m && s->m->r && !fx_timer_armed(&s->index_timer))
        fx_timer_arm(s->m->r, &s->index_timer, MKV_INDEX_IDLE_MS / 4, rt_index_on_timer);
    return FLUXON_OK;
}

/* ---- routes ---- */
FX_INTERNAL int mkv_routes_create(mkv_t *s)
{
    int rc = fx_hmap_create(1024, &s->routes);
    fx_timer_init(&s->index_timer);
    s->last_put_ms = rt_realtime_ms(s); /* without standbys, every put id of an older master's is from before */
    if (rc != FLUXON_OK) mkv_routes_destroy(s);
    return rc;
}

FX_INTERNAL void mkv_routes_destroy(mkv_t *s)
{
    if (s->m && s->m->r) fx_timer_disarm(s->m->r, &s->index_timer);
    if (s->routes) fx_hmap_clear(s->routes, fx_free);
    fx_hmap_destroy(s->routes);
    fx_prefix_index_destroy(s->index);
    s->routes = NULL;
    s->index = NULL;
}

FX_INTERNAL size_t mkv_routes_count(const mkv_t *s) { return s->routes ? fx_hmap_count(s->routes) : 0; }

FX_INTERNAL void fx_mkv_replica_free_ex(mkv_t *s, const mkv_replica_t *rp, bool routed)
{
    master_node_t *n = rp->node;
    if (!rp->range_bytes || n->generation != rp->generation || !n->alloc) return;
    if (rp->wb_by && routed) mkv_forget_add(s, rp->wb_by, n, rp->generation, rp->offset); /* before its reuse */
    mkv_range_release(s, n, rp->offset, rp->range_bytes, routed); /* routed: reusable after range_reuse_delay_ms */
}

/* Queues an INVALIDATE for every replica of r that belongs to its node's current
 * generation (replicas of an older generation died with that process); a placed range
 * too: its owner remembers it (PLACED) to re-publish it to a restarted master. */
static void rt_inv_route(fx_mkv_inv_t *v, const char *key, size_t klen, const mkv_route_t *r)
{
    for (uint32_t i = 0; i < r->n_rep; i++)
        if (r->rep[i].node->generation == r->rep[i].generation)
            fx_mkv_inv_add(v, r->rep[i].node, key, klen, r->rep[i].offset, r->put_ms, r->put_ver);
}

/* Forgets r (already out of the map or about to be): invalidations (if v), counters,
 * lease bookkeeping. Frees r. */
static void rt_release(mkv_t *s, const char *key, size_t klen, mkv_route_t *r, fx_mkv_inv_t *v)
{
    if (v) rt_inv_route(v, key, klen, r);
    for (uint32_t i = 0; i < r->n_rep; i++) fx_mkv_replica_free(s, &r->rep[i]);
    s->replicas -= r->n_rep;
    if (r->lease_id) (void)fx_lease_bind(s->leases, r->lease_id, -1, NULL, 0, NULL, NULL);
    fx_free(r);
}

/* key may be the map's own copy (iteration): it is used last. */
FX_INTERNAL void mkv_route_remove(mkv_t *s, const char *key, size_t klen, mkv_route_t *r, fx_mkv_inv_t *v)
{
    mkv_tombs_gone(s, (fx_str_t){key, (uint32_t)klen}, r->put_ms, r->put_ver); /* W6: an absent owner's older copy */
    if (s->index && fx_prefix_index_remove(s->index, key, klen) != FLUXON_OK)
        FX_ERROR("route %.*s was not in the prefix index", (int)FX_MIN(klen, 80u), key);
    rt_release(s, key, klen, r, v);
    fx_hmap_del(s->routes, key, klen, NULL);
}

FX_INTERNAL void mkv_routes_prefetch(const mkv_t *s, uint64_t h) { fx_hmap_prefetch(s->routes, h); }
FX_INTERNAL void mkv_routes_prefetch_deep(const mkv_t *s, uint64_t h, int depth)
{
    fx_hmap_prefetch_deep(s->routes, h, depth);
}

FX_INTERNAL void mkv_routes_prefetch_keys(const mkv_t *s, const fx_str_t *keys, uint32_t n, uint64_t *kh)
{
    for (uint32_t j = 0; j < n; j++) {
        kh[j] = fx_hmap_hash(keys[j].p ? keys[j].p : "", keys[j].len);
        fx_hmap_prefetch(s->routes, kh[j]);
    }
    for (int depth = 1; depth <= 2; depth++)
        for (uint32_t j = 0; j < n; j++)
            if (keys[j].p) fx_hmap_prefetch_deep(s->routes, kh[j], depth);
}

FX_INTERNAL mkv_route_t *mkv_route_get(mkv_t *s, fx_str_t key, fx_mkv_inv_t *v)
{
    return mkv_route_get_h(s, key, fx_hmap_hash(key.p, key.len), v);
}

FX_INTERNAL mkv_route_t *mkv_route_get_h(mkv_t *s, fx_str_t key, uint64_t h, fx_mkv_inv_t *v)
{
    mkv_route_t *r = fx_hmap_get_h(s->routes, key.p, key.len, h);
    if (r && r->lease_id && !fx_lease_live(s->leases, r->lease_id, fx_now_ms())) {
        FX_DEBUG("route %.*s: lease %llu expired; deleting", MKV_KEYF(key), (unsigned long long)r->lease_id);
        s->c.lease_routes_expired++;
        mkv_route_remove(s, key.p, key.len, r, v);
        return NULL;
    }
    return r;
}

/* A key a lease recorded is still bound to it (lease_table.c's compaction). */
static bool rt_lease_keep(void *arg, uint64_t id, const char *key, size_t klen)
{
    mkv_t *s = arg;
    const mkv_route_t *r = fx_hmap_get(s->routes, key, klen);
    return r && r->lease_id == id;
}

FX_INTERNAL int mkv_route_install(mkv_t *s, fx_str_t key, uint64_t h, uint64_t value_len, uint64_t lease_id,
                                  uint32_t group_len, const mkv_replica_t *rep, uint64_t *pms, uint32_t *pver,
                                  fx_mkv_inv_t *v)
{
    mkv_route_t *nr = fx_calloc(1, sizeof *nr);
    if (!nr) return FLUXON_ERR_NOMEM;
    nr->value_len = value_len;
    nr->lease_id = lease_id;
    nr->group_len = group_len;
    nr->n_rep = 1;
    nr->rep[0] = *rep;
    nr->rep[0].seq = ++s->rep_seq;
    rt_next_put_id(s, &nr->put_ms, &nr->put_ver);
    void *old = NULL;
    if (fx_hmap_put_h(s->routes, key.p, key.len, h ? h : fx_hmap_hash(key.p, key.len), nr, &old) != FLUXON_OK) {
        fx_free(nr);
        return FLUXON_ERR_NOMEM;
    }
    if (old) {
        rt_release(s, key.p, key.len, old, v);
    } else if (rt_index_add(s, key) != FLUXON_OK) {
        fx_hmap_del(s->routes, key.p, key.len, NULL);
        fx_free(nr);
        return FLUXON_ERR_NOMEM;
    }
    if (lease_id) (void)fx_lease_bind(s->leases, lease_id, +1, key.p, key.len, rt_lease_keep, s);
    s->replicas++;
    *pms = nr->put_ms;
    *pver = nr->put_ver;
    return FLUXON_OK;
}

/* A new route for key at a reported version (republish): in the map and the index. */
static int rt_restore_new(mkv_t *s, fx_str_t key, mkv_route_t *nr, fx_mkv_inv_t *v)
{
    void *old = NULL;
    if (fx_hmap_put(s->routes, key.p, key.len, nr, &old) != FLUXON_OK) return FLUXON_ERR_NOMEM;
    if (old) {
        rt_release(s, key.p, key.len, old, v);
    } else if (rt_index_add(s, key) != FLUXON_OK) {
        fx_hmap_del(s->routes, key.p, key.len, NULL);
        return FLUXON_ERR_NOMEM;
    }
    s->replicas++;
    return FLUXON_OK;
}

FX_INTERNAL int mkv_route_restore(mkv_t *s, fx_str_t key, uint64_t value_len, uint32_t group_len, uint64_t put_ms,
                                  uint32_t put_ver, const mkv_replica_t *rep, fx_mkv_inv_t *v, bool *replaced_p)
{
    *replaced_p = false;
    mkv_route_t *r = mkv_route_get(s, key, v);
    if (r && (r->put_ms > put_ms || (r->put_ms == put_ms && r->put_ver > put_ver))) return FLUXON_ERR_STALE;
    if (r && r->put_ms == put_ms && r->put_ver == put_ver) {
        if (r->value_len != value_len) return FLUXON_ERR_INVALID_ARGUMENT;
        if (mkv_route_find(r, rep->node, rep->offset) >= 0) return FLUXON_ERR_KEY_EXISTS; /* reported twice */
        int rc = mkv_route_add_replica(s, r, rep->node, rep->offset);
        if (rc == FLUXON_OK) r->rep[r->n_rep - 1].range_bytes = rep->range_bytes;
        return rc;
    }
    mkv_route_t *nr = fx_calloc(1, sizeof *nr);
    if (!nr) return FLUXON_ERR_NOMEM;
    *nr = (mkv_route_t){.value_len = value_len, .put_ms = put_ms, .put_ver = put_ver, .group_len = group_len,
                        .n_rep = 1};
    nr->rep[0] = *rep;
    nr->rep[0].seq = ++s->rep_seq;
    int rc = rt_restore_new(s, key, nr, v);
    if (rc != FLUXON_OK) {
        fx_free(nr);
        return rc;
    }
    *replaced_p = r != NULL;
    mkv_put_id_seen(s, put_ms, put_ver);
    return FLUXON_OK;
}

FX_INTERNAL int mkv_route_add_replica(mkv_t *s, mkv_route_t *r, master_node_t *n, uint64_t offset)
{
    if (r->n_rep == MKV_MAX_REPLICAS) { /* make room by forgetting replicas of dead processes */
        uint32_t k = 0;
        for (uint32_t j = 0; j < r->n_rep; j++)
            if (r->rep[j].node->generation == r->rep[j].generation) r->rep[k++] = r->rep[j];
        s->replicas -= r->n_rep - k;
        r->n_rep = k;
    }
    if (r->n_rep == MKV_MAX_REPLICAS) return FLUXON_ERR_NO_SPACE;
    r->rep[r->n_rep++] = (mkv_replica_t){.node = n, .generation = n->generation, .offset = offset, .seq = ++s->rep_seq};
    s->replicas++;
    return FLUXON_OK;
}

FX_INTERNAL bool mkv_route_drop_replica(mkv_t *s, fx_str_t key, mkv_route_t *r, uint32_t j)
{
    fx_mkv_replica_free(s, &r->rep[j]);
    memmove(&r->rep[j], &r->rep[j + 1], (r->n_rep - j - 1) * sizeof r->rep[0]);
    r->n_rep--;
    s->replicas--;
    if (r->n_rep) return false;
    mkv_route_remove(s, key.p, key.len, r, NULL); /* the last copy: the key is gone */
    return true;
}

FX_INTERNAL size_t mkv_routes_drop_lease(mkv_t *s, uint64_t id, const uint8_t *keys, size_t n_keys, fx_mkv_inv_t *v)
{
    size_t dropped = 0;
    for (size_t i = 0, at = 0; i < n_keys; i++) {
        uint32_t kl;
        memcpy(&kl, keys + at, 4);
        const char *k = (const char *)keys + at + 4;
        at += 4 + (size_t)kl;
        mkv_route_t *r = fx_hmap_get(s->routes, k, kl);
        if (!r || r->lease_id != id) continue; /* replaced, deleted, or listed twice */
        mkv_route_remove(s, k, kl, r, v);
        dropped++;
    }
    return dropped;
}

FX_INTERNAL bool mkv_route_drop_replica_inv(mkv_t *s, fx_str_t key, mkv_route_t *r, uint32_t j, fx_mkv_inv_t *v,
                                            bool *gone_p)
{
    const mkv_replica_t *rp = &r->rep[j];
    bool inv = v && rp->range_bytes && rp->node->generation == rp->generation;
    if (inv) fx_mkv_inv_add(v, rp->node, key.p, key.len, rp->offset, r->put_ms, r->put_ver);
    *gone_p = mkv_route_drop_replica(s, key, r, j); /* r may be freed */
    return inv;
}

FX_INTERNAL size_t mkv_routes_drop_unleased(mkv_t *s, fx_mkv_inv_t *v)
{
    size_t dropped = 0;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *val;
    while (fx_hmap_iter_next(s->routes, &it, &k, &kl, &val)) {
        mkv_route_t *rt = val;
        if (!rt->lease_id || fx_lease_exists(s->leases, rt->lease_id)) continue;
        mkv_route_remove(s, k, kl, rt, v); /* deletes the entry just returned: allowed */
        dropped++;
    }
    return dropped;
}

/* Drops n's replicas (all, or those not of its current generation); deletes routes left
 * with none. */
static void rt_drop_node_replicas(mkv_t *s, master_node_t *n, bool all, size_t *dropped_p, size_t *routes_p)
{
    size_t dropped = 0, routes = 0;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(s->routes, &it, &k, &kl, &v)) {
        mkv_route_t *r = v;
        uint32_t keep = 0;
        for (uint32_t j = 0; j < r->n_rep; j++)
            if (r->rep[j].node != n || (!all && r->rep[j].generation == n->generation)) r->rep[keep++] = r->rep[j];
        dropped += r->n_rep - keep;
        s->replicas -= r->n_rep - keep;
        r->n_rep = keep;
        if (keep == 0) {
            mkv_route_remove(s, k, kl, r, NULL);
            routes++;
        }
    }
    *dropped_p = dropped;
    *routes_p = routes;
}

FX_INTERNAL void mkv_routes_drop_node(mkv_t *s, master_node_t *n)
{
    size_t dropped, routes;
    rt_drop_node_replicas(s, n, true, &dropped, &routes);
    FX_INFO("owner %s forgotten: dropped its %zu replicas (%zu routes deleted)", n->node_id, dropped, routes);
}

FX_INTERNAL void mkv_routes_drop_generation(mkv_t *s, master_node_t *n, uint64_t old_generation)
{
    size_t dropped, routes;
    rt_drop_node_replicas(s, n, false, &dropped, &routes);
    s->c.generation_routes_dropped += routes;
    FX_INFO("owner %s: generation %llu -> %llu: dropped %zu replicas of the old generation (%zu routes deleted)",
            n->node_id, (unsigned long long)old_generation, (unsigned long long)n->generation, dropped, routes);
}

typedef struct rt_list_ctx {
    mkv_t *s;
    fx_str_t *keys;
    uint32_t n, cap;
} rt_list_ctx_t;

static int rt_list_cb(void *arg, const char *key, size_t klen)
{
    rt_list_ctx_t *c = arg;
    const char *stored = NULL; /* the route map's copy stays valid until the map changes */
    if (fx_hmap_get_key(c->s->routes, key, klen, &stored) != FLUXON_OK) {
        FX_ERROR("list: %.*s is in the prefix index but has no route", (int)FX_MIN(klen, 80u), key);
        return 0;
    }
    if (c->n < c->cap) c->keys[c->n++] = (fx_str_t){stored, (uint32_t)klen};
    return c->n < c->cap ? 0 : 1;
}

FX_INTERNAL int mkv_routes_list(mkv_t *s, fx_str_t prefix, fx_str_t after, fx_str_t *keys, uint32_t cap,
                                uint32_t *n_p)
{
    rt_list_ctx_t c = {s, keys, 0, cap};
    *n_p = 0;
    int rc = rt_index_need(s);
    if (rc != FLUXON_OK) return rc;
    if (cap)
        fx_prefix_index_list(s->index, prefix.p, prefix.len, after.len ? after.p : NULL, after.len, cap, rt_list_cb,
                             &c);
    *n_p = c.n;
    return FLUXON_OK;
}

#undef RT_INV_CHUNK_BYTES
