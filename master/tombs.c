/* tombs.c — the deletes a new master remembers while owners re-publish (issue 17, W6).
 * A master that starts serving (a restart, an HA failover) knows no route until the owners
 * re-publish what they hold. A DELETE it serves meanwhile finds no route for a key whose
 * owner has not reported yet (NOT_FOUND), or removes the route made by the owners that did
 * (OK) while another owner's report of the same key is still to come: without a record, that
 * report would route the key again and undo the delete.
 * So each DELETE served in the re-publication window leaves a tombstone: the key and a put id
 * taken at the delete, above every id this master issued or was reported so far. A report
 * of that key at a lower put id (a value put before the delete) answers STALE: its owner
 * drops the copy, on its disk tier with a tombstone of its own. A value put after the delete
 * has a higher id and is routed as usual.
 * The window opens when this master starts serving and closes, for good, once
 * dead_owner_grace_ms has passed and no owner that registered from another master is still
 * re-publishing; the tombstones go then. An owner back later than that can still bring a
 * key deleted meanwhile back (the bound of what a master keeps for an absent owner, as for
 * one it forgets). At most MKV_TOMBS_MAX tombstones: a delete past that answers
 * UNKNOWN_OUTCOME (lookup.c). Reactor thread only. */
#include "log.h"
#include "mkv.h"

typedef struct mkv_tomb {
    uint64_t put_ms;
    uint32_t put_ver;
} mkv_tomb_t;

static void tb_free(void *v) { fx_free(v); }

static void tb_drop_all(mkv_t *s)
{
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

/* Is an owner still re-publishing what it held under another master? */
static bool tb_republishing(const fx_master_t *m)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i]->rp_pending && !m->nodes[i]->forgotten) return true;
    return false;
}

FX_INTERNAL bool mkv_tombs_open(mkv_t *s, uint64_t now_ms)
{
    if (s->tombs_closed) return false;
    if (now_ms < s->tombs_since_ms + s->m->cfg.dead_owner_grace_ms || tb_republishing(s->m)) return true;
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
    s->c.delete_tombstones++;
    return FLUXON_OK;
}

FX_INTERNAL bool mkv_tombs_older(mkv_t *s, fx_str_t key, uint64_t put_ms, uint32_t put_ver)
{
    if (!s->tombs || !fx_hmap_count(s->tombs) || !mkv_tombs_open(s, fx_now_ms())) return false;
    const mkv_tomb_t *t = fx_hmap_get(s->tombs, key.p, key.len);
    return t && (put_ms < t->put_ms || (put_ms == t->put_ms && put_ver < t->put_ver));
}

FX_INTERNAL size_t mkv_tombs_count(const mkv_t *s) { return s->tombs ? fx_hmap_count(s->tombs) : 0; }

FX_INTERNAL void mkv_tombs_fini(mkv_t *s) { tb_drop_all(s); }
