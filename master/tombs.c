/* tombs.c — the deletes a new master remembers while owners re-publish (issue 17, W6).
 * A master that starts serving (a restart, an HA failover) knows no route until the owners
 * re-publish what they hold. A DELETE it serves meanwhile finds no route for a key whose
 * owner has not reported yet (NOT_FOUND), or removes the route made by the owners that did
 * (OK) while another owner's report of the same key is still to come: without a record, that
 * report would route the key again and undo the delete.
 * So each DELETE served in the re-publication window leaves a tombstone: the key and a put id
 * taken at the delete, above every id this master issued or was reported so far. A report
 * of that key at a lower put id (a value put before the delete), or at any version this
 * master does not route now (one put under an earlier master whose clock ran ahead of this
 * one's), answers STALE: its owner drops the copy, on its disk tier with a tombstone of its
 * own. A value put here after the delete is routed at its own version and kept. (lookup.c
 * holds a DELETE while an owner connected here re-publishes: its copy is then routed and
 * dropped like any other, which outlives this master; a tombstone does not.)
 * The window opens when this master starts serving and closes, for good, once no owner is
 * re-publishing (rp_pending: registered from another master, or a restarted process with
 * disk records, its last REPUBLISH batch not in; dead_owner_grace_ms after its registration
 * at most) and either every owner the earlier masters
 * announced (each owner from another master names them in REGISTER) is back and done, or
 * dead_owner_grace_ms has passed; the tombstones go then. An owner back later than that can
 * still bring a key deleted meanwhile back (the bound of what a master keeps for an absent
 * owner, as for one it forgets). At most MKV_TOMBS_MAX tombstones: past that a delete
 * answers UNKNOWN_OUTCOME while an owner is awaited (lookup.c).
 * A route this master removes while an owner is awaited (its last copy evicted, a lease
 * ended) leaves a tombstone of its own version too: a report of an older version of the key
 * answers STALE. Without it, an overwrite answered OK here, then evicted from its only
 * owner, gave the key back its older value when the absent owner reported that (an HA fault
 * pass of session 42). Reactor thread only. */
#include <string.h>

#include "log.h"
#include "mkv.h"

typedef struct mkv_tomb {
    uint64_t put_ms;
    uint32_t put_ver;
    bool deleted; /* a DELETE's (a put id taken at it); else a route gone (its own version) */
} mkv_tomb_t;

static void tb_free(void *v) { fx_free(v); }

static void tb_drop_all(mkv_t *s)
{
    fx_free(s->tombs_await);
    s->tombs_await = NULL;
    s->n_tombs_await = s->cap_tombs_await = 0;
    s->tombs_await_known = s->tombs_await_unknown = false;
    if (!s->tombs) return;
    size_t n = fx_hmap_count(s->tombs);
    fx_hmap_clear(s->tombs, tb_free);
    fx_hmap_destroy(s->tombs);
    s->tombs = NULL;
    if (n) FX_INFO("the re-publication window is over: %zu deletes it remembered are let go", n);
}

FX_INTERNAL void mkv_tombs_serving(mkv_t *s)
{
    tb_drop_all(s);
    s->tombs_since_ms = fx_now_ms();
    s->tombs_closed = false;
}

static void tb_await_add(mkv_t *s, fx_str_t id)
{
    for (uint32_t i = 0; i < s->n_tombs_await; i++)
        if (fx_str_eq(id, s->tombs_await[i])) return;
    if (s->n_tombs_await == s->cap_tombs_await) {
        uint32_t nc = s->cap_tombs_await ? s->cap_tombs_await * 2 : 8;
        char(*na)[FX_ID_MAX] = fx_realloc(s->tombs_await, nc * sizeof *na);
        if (!na) { /* not known whom to await: the window runs to its bound */
            s->tombs_await_unknown = true;
            return;
        }
        s->tombs_await = na;
        s->cap_tombs_await = nc;
    }
    fx_str_copy(id, s->tombs_await[s->n_tombs_await++], FX_ID_MAX);
}

FX_INTERNAL void mkv_tombs_registered(mkv_t *s, master_node_t *n, fx_strv_t peer_ids, fx_u64v_t peer_gens)
{
    if (s->tombs_closed || !n->reg_prev_master_generation || n->reg_prev_master_generation == s->m->generation)
        return;
    if (!peer_ids.n || peer_ids.n != peer_gens.n) { /* no usable list: the window runs to its bound */
        s->tombs_await_unknown = true;
        return;
    }
    s->tombs_await_known = true;
    for (uint32_t i = 0; i < peer_ids.n; i++)
        if (peer_ids.v[i].len && peer_ids.v[i].len < FX_ID_MAX) tb_await_add(s, peer_ids.v[i]);
}

static const master_node_t *tb_node(const fx_master_t *m, const char *id)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (!strcmp(m->nodes[i]->node_id, id)) return m->nodes[i];
    return NULL;
}

FX_INTERNAL const char *mkv_tombs_awaited(mkv_t *s)
{
    const fx_master_t *m = s->m;
    uint64_t now = fx_now_ms();
    for (size_t i = 0; i < m->n_nodes; i++) /* re-publishing */
        if (mkv_reporting(m->nodes[i], now)) return m->nodes[i]->node_id;
    for (uint32_t i = 0; i < s->n_tombs_await; i++) { /* announced, not back (O(nodes) each: a few) */
        const master_node_t *n = tb_node(m, s->tombs_await[i]);
        if (!n || !n->alive) return s->tombs_await[i];
    }
    return NULL;
}

FX_INTERNAL const master_node_t *mkv_tombs_reporting(mkv_t *s)
{
    uint64_t now = fx_now_ms();
    for (size_t i = 0; i < s->m->n_nodes; i++) {
        const master_node_t *n = s->m->nodes[i];
        if (mkv_reporting(n, now) && n->alive && n->peer) return n;
    }
    return NULL;
}

FX_INTERNAL bool mkv_tombs_open(mkv_t *s, uint64_t now_ms)
{
    if (s->tombs_closed) return false;
    const char *awaited = mkv_tombs_awaited(s);
    bool rp = false;
    for (size_t i = 0; awaited && !rp && i < s->m->n_nodes; i++)
        rp = mkv_reporting(s->m->nodes[i], now_ms);
    if (rp) return true; /* an owner's report is still to come, whatever the time */
    bool all_back = s->tombs_await_known && !s->tombs_await_unknown && !awaited;
    if (!all_back && now_ms < s->tombs_since_ms + s->m->cfg.dead_owner_grace_ms) return true;
    if (all_back)
        FX_INFO("every owner the earlier master announced re-published to this one after %llu ms: its deletes need no "
                "record any more", (unsigned long long)(now_ms - s->tombs_since_ms));
    s->tombs_closed = true;
    tb_drop_all(s);
    return false;
}

FX_INTERNAL int mkv_tombs_put(mkv_t *s, fx_str_t key)
{
    if (!mkv_tombs_open(s, fx_now_ms())) return FLUXON_OK;
    if (!s->tombs && fx_hmap_create(64, &s->tombs) != FLUXON_OK) return FLUXON_ERR_NOMEM;
    mkv_tomb_t *t = fx_hmap_get(s->tombs, key.p, key.len);
    if (!t) {
        if (fx_hmap_count(s->tombs) >= MKV_TOMBS_MAX) return FLUXON_ERR_NO_SPACE;
        if (!(t = fx_malloc(sizeof *t))) return FLUXON_ERR_NOMEM;
        if (fx_hmap_put(s->tombs, key.p, key.len, t, NULL) != FLUXON_OK) {
            fx_free(t);
            return FLUXON_ERR_NOMEM;
        }
    }
    mkv_put_id_next(s, &t->put_ms, &t->put_ver); /* later than every value put before */
    t->deleted = true;
    s->c.delete_tombstones++;
    return FLUXON_OK;
}

FX_INTERNAL void mkv_tombs_gone(mkv_t *s, fx_str_t key, uint64_t put_ms, uint32_t put_ver)
{
    /* a fresh master (no owner announced, no delete remembered), or a closed window: nothing */
    if (s->tombs_closed || (!s->n_tombs_await && !s->tombs)) return;
    if (!mkv_tombs_awaited(s) || !mkv_tombs_open(s, fx_now_ms())) return; /* every report is in */
    if (!s->tombs && fx_hmap_create(64, &s->tombs) != FLUXON_OK) return;
    mkv_tomb_t *t = fx_hmap_get(s->tombs, key.p, key.len);
    if (t) { /* the higher id stands; a delete's rule stays */
        if (put_ms > t->put_ms || (put_ms == t->put_ms && put_ver > t->put_ver)) {
            t->put_ms = put_ms;
            t->put_ver = put_ver;
        }
        return;
    }
    if (fx_hmap_count(s->tombs) >= MKV_TOMBS_MAX) {
        if (!s->c.route_tombstones_full++)
            FX_WARN("the record of routes gone while owners re-publish is full (%u): an absent owner's older copy "
                    "of such a key may route it again", MKV_TOMBS_MAX);
        return;
    }
    if (!(t = fx_malloc(sizeof *t))) return;
    *t = (mkv_tomb_t){put_ms, put_ver, false};
    if (fx_hmap_put(s->tombs, key.p, key.len, t, NULL) != FLUXON_OK) {
        fx_free(t);
        return;
    }
    s->c.route_tombstones++;
}

FX_INTERNAL bool mkv_tombs_older(mkv_t *s, fx_str_t key, uint64_t put_ms, uint32_t put_ver, fx_mkv_inv_t *v)
{
    if (!s->tombs || !fx_hmap_count(s->tombs) || !mkv_tombs_open(s, fx_now_ms())) return false;
    const mkv_tomb_t *t = fx_hmap_get(s->tombs, key.p, key.len);
    if (!t) return false;
    if (put_ms < t->put_ms || (put_ms == t->put_ms && put_ver < t->put_ver)) return true;
    if (!t->deleted) return false; /* a route gone: its own version or a newer one is reported */
    /* not below the delete's id: a version put here after the delete is routed (this very
     * version); any other came from the earlier master, whose clock ran ahead of this one's */
    const mkv_route_t *r = mkv_route_get(s, key, v);
    return !r || r->put_ms != put_ms || r->put_ver != put_ver;
}

FX_INTERNAL size_t mkv_tombs_count(const mkv_t *s) { return s->tombs ? fx_hmap_count(s->tombs) : 0; }

FX_INTERNAL void mkv_tombs_fini(mkv_t *s) { tb_drop_all(s); }
