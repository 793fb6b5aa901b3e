/* inflight.c — the master's in-flight records (ARCHITECTURE §7):
 *  - PUT_PLACE (PutStart): applies reject_if_inflight / reject_if_exist per key (a group
 *    with a rejected member is rejected whole), lets place.c pick ONE target owner for the
 *    batch and allocate a range per accepted key in its segment, and records an in-flight
 *    put with a TTL (inflight_ttl_ms). In-flight records are never routes: only PUT_DONE
 *    (publish.c) turns one into routes; PUT_REVOKE or the TTL frees its ranges.
 *  - In-flight gets: DurableReplica for at most 2 owners per key at once (each record
 *    lives until that owner's GET_DONE or the TTL), TemporaryReplica beyond.
 * Reactor thread only. */
#include <stdio.h>

#include "groups.h"
#include "log.h"
#include "mkv.h"

#define MPL_MAX_DURABLE 2u
#define MPL_MAX_KEYS 65536u

typedef struct mpl_get_ent {
    master_node_t *node;
    uint64_t generation, deadline_ms;
} mpl_get_ent_t;

typedef struct mpl_get { /* in-flight durable gets of one key */
    uint32_t n;
    mpl_get_ent_t e[MPL_MAX_DURABLE];
} mpl_get_t;

typedef struct fx_mplace {
    mkv_t *s;
    fx_hmap_t *by_token;  /* u64 token -> mkv_inflight_t */
    fx_hmap_t *keys;      /* key -> (uintptr_t) number of in-flight puts naming it */
    fx_hmap_t *gets;      /* key -> mpl_get_t */
    mkv_inflight_t *head, *tail; /* FIFO by deadline */
    uint64_t next_token, rng;
    fx_timer_t timer;
} fx_mplace_t;

static uint32_t mpl_ttl(const mkv_t *s) { return s->m->cfg.inflight_ttl_ms ? s->m->cfg.inflight_ttl_ms : 60000u; }

/* ---- in-flight puts ---- */
static void mpl_key_count(fx_mplace_t *pl, const char *k, uint32_t kl, int delta)
{
    uintptr_t c = (uintptr_t)fx_hmap_get(pl->keys, k, kl);
    if (delta > 0) {
        if (fx_hmap_put(pl->keys, k, kl, (void *)(c + 1), NULL) != FLUXON_OK)
            FX_ERROR("in-flight key table: out of memory (reject_if_inflight may miss %.*s)", (int)FX_MIN(kl, 80u), k);
    } else if (c <= 1) {
        fx_hmap_del(pl->keys, k, kl, NULL);
    } else {
        fx_hmap_put(pl->keys, k, kl, (void *)(c - 1), NULL);
    }
}

/* Out of every table (ranges untouched). */
static void mpl_unlink(fx_mplace_t *pl, mkv_inflight_t *r)
{
    fx_hmap_del(pl->by_token, &r->token, sizeof r->token, NULL);
    if (r->prev) r->prev->next = r->next;
    else pl->head = r->next;
    if (r->next) r->next->prev = r->prev;
    else pl->tail = r->prev;
    r->prev = r->next = NULL;
    for (uint32_t i = 0; !r->keys_released && i < r->n; i++) mpl_key_count(pl, r->keys[i], r->klens[i], -1);
    r->keys_released = true;
}

static void mpl_free(mkv_inflight_t *r)
{
    for (uint32_t i = 0; r->keys && i < r->n; i++) fx_free(r->keys[i]);
    fx_free(r->keys);
    fx_free(r->klens);
    fx_free(r->offsets);
    fx_free(r);
}

FX_INTERNAL void fx_mplace_release(mkv_t *s, mkv_inflight_t *r, const uint8_t *kept)
{
    for (uint32_t i = 0; i < r->n; i++) {
        if (kept && kept[i]) continue;
        mkv_replica_t rp = {.node = r->target, .generation = r->tgt_generation, .offset = r->offsets[i],
                            .range_bytes = r->range_bytes};
        fx_mkv_replica_free_ex(s, &rp, false); /* never routed: no reader can be copying it */
    }
    mpl_free(r);
}

static void mpl_arm(fx_mplace_t *pl);

/* Drops key k's durable-get entries that expired by now (now 0: none), whose owner died,
 * or that belong to `drop` (NULL: none); forgets the key when none is left. Returns how
 * many entries went. */
static uint32_t mpl_get_prune(fx_mplace_t *pl, const char *k, size_t kl, mpl_get_t *g, uint64_t now,
                              const master_node_t *drop)
{
    uint32_t keep = 0, n = g->n;
    for (uint32_t i = 0; i < n; i++) {
        const mpl_get_ent_t *e = &g->e[i];
        bool gone = (now && e->deadline_ms <= now) || !e->node->alive || e->node->generation != e->generation ||
                    e->node == drop;
        if (!gone) g->e[keep++] = *e;
    }
    g->n = keep;
    if (!keep) {
        fx_hmap_del(pl->gets, k, kl, NULL);
        fx_free(g);
    }
    return n - keep;
}

static void mpl_on_timer(fx_reactor_t *rx, fx_timer_t *t)
{
    (void)rx;
    fx_mplace_t *pl = FX_CONTAINER_OF(t, fx_mplace_t, timer);
    mkv_t *s = pl->s;
    uint64_t now = fx_now_ms();
    size_t expired = 0;
    while (pl->head && pl->head->deadline_ms <= now) {
        mkv_inflight_t *r = pl->head;
        FX_WARN("in-flight put %llu of %u keys from %s (first %.*s) expired after %u ms without PUT_DONE; "
                "its ranges are freed", (unsigned long long)r->token, r->n, r->requester->node_id,
                (int)FX_MIN(r->klens[0], 80u), r->keys[0], mpl_ttl(s));
        mpl_unlink(pl, r);
        fx_mplace_release(s, r, NULL);
        expired++;
    }
    s->c.inflight_expired += expired;
    /* in-flight gets: forget records past their deadline */
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(pl->gets, &it, &k, &kl, &v)) mpl_get_prune(pl, k, kl, v, now, NULL);
    mpl_arm(pl);
}

static void mpl_arm(fx_mplace_t *pl)
{
    if (fx_timer_armed(&pl->timer)) return;
    if (!pl->head && fx_hmap_count(pl->gets) == 0) return;
    uint64_t now = fx_now_ms(), when = now + FX_MAX(mpl_ttl(pl->s) / 4, 10u);
    if (pl->head) when = FX_MIN(when, FX_MAX(pl->head->deadline_ms, now + 1));
    fx_timer_arm(pl->s->m->r, &pl->timer, when - now, mpl_on_timer);
}

/* ---- PUT_PLACE ---- */
/* Per-key admission (reject_if_inflight, duplicates, reject_if_exist), then whole-group
 * rejection; st[] gets each key's status. Returns the number accepted, or UINT32_MAX when
 * the duplicate set could not be made (out of memory). */
static uint32_t mpl_admit(mkv_t *s, const master_node_t *n, const fx_body_put_place_t *b, uint64_t *st)
{
    fx_mplace_t *pl = s->place;
    uint32_t nk = b->keys.n;
    fx_keyset_t *seen = NULL;
    int *ist = fx_malloc(nk * sizeof *ist);
    if (!ist || fx_keyset_create(nk, &seen) != FLUXON_OK) {
        fx_free(ist);
        return UINT32_MAX;
    }
    fx_mkv_inv_t inv = {0};
    for (uint32_t i = 0; i < nk; i++) {
        fx_str_t k = b->keys.v[i];
        bool dup = fx_keyset_add(seen, k.p, k.len) == FLUXON_ERR_KEY_EXISTS;
        mkv_route_t *r;
        ist[i] = FLUXON_OK;
        if ((b->flags & FX_PUT_REJECT_IF_INFLIGHT) && (dup || fx_hmap_get(pl->keys, k.p, k.len)))
            ist[i] = FLUXON_ERR_KEY_BEING_WRITTEN;
        else if (dup)
            ist[i] = FLUXON_ERR_INVALID_ARGUMENT;
        else if ((b->flags & FX_PUT_REJECT_IF_EXIST) && (r = mkv_route_get(s, k, &inv)) && mkv_route_has_alive_for(r, n))
            ist[i] = FLUXON_ERR_KEY_EXISTS;
    }
    fx_keyset_destroy(seen);
    mkv_inv_flush(s, &inv);
    fx_groups_reject(b->group_lens.v, b->group_lens.n, nk, ist, FLUXON_OK, FLUXON_ERR_GROUP_REJECTED, NULL, NULL);
    uint32_t acc = 0;
    for (uint32_t i = 0; i < nk; i++) {
        st[i] = MKV_ST(ist[i]);
        acc += ist[i] == FLUXON_OK;
    }
    fx_free(ist);
    return acc;
}

/* The in-flight record of the acc accepted keys of b (st[i] OK) placed on t (ranges
 * aoffs[], by accepted index, when t != n); offs[i] gets key i's range. NULL: out of
 * memory (nothing recorded, the ranges are still allocated). */
static mkv_inflight_t *mpl_record_new(mkv_t *s, master_node_t *n, master_node_t *t, const fx_body_put_place_t *b,
                                      const uint64_t *st, const uint64_t *aoffs, uint32_t acc, uint64_t bytes,
                                      uint64_t *offs)
{
    fx_mplace_t *pl = s->place;
    mkv_inflight_t *r = fx_calloc(1, sizeof *r);
    if (r) {
        r->keys = fx_calloc(acc, sizeof *r->keys);
        r->klens = fx_calloc(acc, sizeof *r->klens);
        r->offsets = fx_calloc(acc, sizeof *r->offsets);
    }
    bool ok = r && r->keys && r->klens && r->offsets;
    for (uint32_t i = 0, k = 0; ok && i < b->keys.n; i++) {
        if (st[i] != MKV_ST(FLUXON_OK)) continue;
        r->keys[k] = fx_strndup(b->keys.v[i].p, b->keys.v[i].len);
        ok = r->keys[k] != NULL;
        r->klens[k] = b->keys.v[i].len;
        r->offsets[k] = t == n ? 0 : aoffs[k];
        offs[i] = r->offsets[k];
        r->n = ++k;
    }
    if (ok) {
        r->token = ++pl->next_token;
        r->requester = n;
        r->req_generation = n->generation;
        r->target = t;
        r->tgt_generation = t->generation;
        r->value_len = b->value_len;
        r->range_bytes = t == n ? 0 : bytes;
        r->deadline_ms = fx_now_ms() + mpl_ttl(s);
        ok = fx_hmap_put(pl->by_token, &r->token, sizeof r->token, r, NULL) == FLUXON_OK;
    }
    if (!ok) {
        if (r) mpl_free(r);
        return NULL;
    }
    r->prev = pl->tail;
    if (pl->tail) pl->tail->next = r;
    else pl->head = r;
    pl->tail = r;
    for (uint32_t k = 0; k < r->n; k++) mpl_key_count(pl, r->keys[k], r->klens[k], +1);
    mpl_arm(pl);
    return r;
}

FX_INTERNAL void fx_mplace_put_place(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                     fx_arena_t *arena)
{
    fx_mplace_t *pl = s->place;
    fx_body_put_place_t b;
    MKV_DECODE(s, p, h, body, arena, put_place, &b);
    mkv_batch_spec_t spec = {"put_place", b.keys, NULL, 0, 1, MPL_MAX_KEYS, true, 3};
    uint64_t *cols;
    master_node_t *n = mkv_batch_open(s, p, h, &spec, arena, &cols);
    if (!n) return;
    uint32_t nk = b.keys.n;
    uint64_t bytes = b.value_len > UINT64_MAX - 8192 ? 0 : FX_MAX((b.value_len + 4095) & ~4095ull, 4096ull);
    char why[160];
    if (b.value_len == 0 || !bytes || b.value_len > n->segment_bytes) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "put_place from %s: value_len %llu must be 1..the segment "
                 "size (%llu)", n->node_id, (unsigned long long)b.value_len, (unsigned long long)n->segment_bytes);
        return;
    }
    if (!fx_groups_check(b.group_lens.v, b.group_lens.n, nk, why, sizeof why)) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "put_place from %s: %s", n->node_id, why);
        return;
    }
    uint64_t *st = cols, *offs = cols + nk, *aoffs = cols + 2 * (size_t)nk;
    memset(offs, 0, nk * sizeof *offs);
    uint32_t acc = mpl_admit(s, n, &b, st);
    if (acc == UINT32_MAX) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "put_place of %u keys: out of memory", nk);
        return;
    }
    s->c.places++;
    s->c.place_rejected += nk - acc;
    master_node_t *t = n;
    mkv_inflight_t *r = NULL;
    if (acc) {
        t = fx_mplace_pick(s->m, &pl->rng, n, b.flags, b.preferred_sub_cluster, bytes, acc, aoffs);
        if (!t) {
            s->c.place_fallback++;
            t = n;
        }
        r = mpl_record_new(s, n, t, &b, st, aoffs, acc, bytes, offs);
        if (!r) {
            if (t != n) {
                for (uint32_t k = 0; k < acc; k++) fx_offset_alloc_free(t->alloc, aoffs[k]);
                t->placed_bytes -= FX_MIN(t->placed_bytes, bytes * acc);
            }
            mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "put_place of %u keys: out of memory", nk);
            return;
        }
        if (t == n) s->c.place_local++;
        else s->c.place_remote++;
    }
    FX_DEBUG("put_place from %s: %u of %u keys accepted, target %s", n->node_id, acc, nk, t->node_id);
    fx_body_put_place_ack_t ack = {r ? r->token : 0,
                                   fx_str_c(t->node_id),
                                   t->generation,
                                   {(const char *)t->ucx_address, t->ucx_address_len},
                                   {(const char *)t->rkey, t->rkey_len},
                                   t->segment_base,
                                   {st, nk},
                                   {offs, nk},
                                   mpl_ttl(s),
                                   0, /* no record of placed puts (wbmap.c: write-backs only) */
                                   0};
    MKV_REPLY(p, h, put_place_ack, &ack);
}

FX_INTERNAL void fx_mplace_put_revoke(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                      fx_arena_t *arena)
{
    fx_body_put_revoke_t b;
    MKV_DECODE(s, p, h, body, arena, put_revoke, &b);
    master_node_t *n = mkv_need_node(s, p, h);
    if (!n) return;
    mkv_inflight_t *r = fx_hmap_get(s->place->by_token, &b.put_token, sizeof b.put_token);
    if (!r || r->requester != n || r->req_generation != n->generation) {
        mkv_fail(s, p, h, FLUXON_ERR_NOT_FOUND, "put_revoke: no in-flight put %llu of %s (done, expired or unknown)",
                 (unsigned long long)b.put_token, n->node_id);
        return;
    }
    s->c.revokes++;
    if (b.abandoned) { /* W4: its push may still land: the keys go now, the ranges at the TTL */
        fx_hmap_del(s->place->by_token, &r->token, sizeof r->token, NULL); /* no PUT_DONE for it */
        for (uint32_t i = 0; !r->keys_released && i < r->n; i++) mpl_key_count(s->place, r->keys[i], r->klens[i], -1);
        r->keys_released = true;
        s->c.revokes_abandoned++;
        fx_body_empty_t e;
        MKV_REPLY(p, h, empty, &e);
        return;
    }
    mpl_unlink(s->place, r);
    fx_mplace_release(s, r, NULL);
    fx_body_empty_t e;
    MKV_REPLY(p, h, empty, &e);
}

FX_INTERNAL mkv_inflight_t *fx_mplace_find(mkv_t *s, master_node_t *n, const fx_body_put_done_t *b, int *status_p,
                                           const char **why_p)
{
    mkv_inflight_t *r = fx_hmap_get(s->place->by_token, &b->put_token, sizeof b->put_token);
    *why_p = NULL;
    if (!r || r->requester != n || r->req_generation != n->generation) {
        *status_p = FLUXON_ERR_STALE;
        *why_p = "unknown, expired or revoked put_token";
        return NULL;
    }
    bool same = b->keys.n == r->n && b->offsets.n == r->n && b->value_len == r->value_len;
    for (uint32_t i = 0; same && i < r->n; i++)
        same = b->keys.v[i].len == r->klens[i] && !memcmp(b->keys.v[i].p, r->keys[i], r->klens[i]) &&
               (r->target == n || b->offsets.v[i] == r->offsets[i]);
    if (!same) {
        *status_p = FLUXON_ERR_INVALID_ARGUMENT;
        *why_p = "keys, offsets or value_len differ from the PUT_PLACE answer of this put_token";
        return NULL;
    }
    if (!r->target->alive || r->target->generation != r->tgt_generation) {
        mpl_unlink(s->place, r);
        fx_mplace_release(s, r, NULL);
        *status_p = FLUXON_ERR_STALE;
        *why_p = "the target owner died";
        return NULL;
    }
    return r;
}

FX_INTERNAL void fx_mplace_detach(mkv_t *s, mkv_inflight_t *r) { mpl_unlink(s->place, r); }

FX_INTERNAL void fx_mplace_node_dead(mkv_t *s, master_node_t *n)
{
    fx_mplace_t *pl = s->place;
    if (!pl) return;
    size_t puts = 0, gets = 0;
    for (mkv_inflight_t *r = pl->head; r; r = r->next) {
        if (r->requester != n || r->keys_released) continue;
        for (uint32_t i = 0; i < r->n; i++) mpl_key_count(pl, r->keys[i], r->klens[i], -1);
        r->keys_released = true;
        puts++;
    }
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(pl->gets, &it, &k, &kl, &v)) gets += mpl_get_prune(pl, k, kl, v, 0, n);
    if (puts || gets)
        FX_INFO("owner %s dead: %zu in-flight puts no longer block their keys (ranges freed at their TTL), "
                "%zu durable gets forgotten", n->node_id, puts, gets);
}

/* ---- in-flight gets ---- */
FX_INTERNAL unsigned fx_mplace_get_begin(mkv_t *s, fx_str_t key, master_node_t *req)
{
    fx_mplace_t *pl = s->place;
    uint64_t now = fx_now_ms();
    mpl_get_t *g = fx_hmap_get(pl->gets, key.p, key.len);
    if (!g) {
        g = fx_calloc(1, sizeof *g);
        if (!g || fx_hmap_put(pl->gets, key.p, key.len, g, NULL) != FLUXON_OK) {
            fx_free(g);
            return FX_GET_TEMPORARY; /* no memory to count it: the safe mode */
        }
    }
    uint32_t keep = 0;
    int mine = -1;
    for (uint32_t i = 0; i < g->n; i++) {
        mpl_get_ent_t *e = &g->e[i];
        if (e->deadline_ms <= now || !e->node->alive || e->node->generation != e->generation) continue;
        if (e->node == req) mine = (int)keep;
        g->e[keep++] = *e;
    }
    g->n = keep;
    unsigned mode = FX_GET_TEMPORARY;
    if (mine >= 0) {
        g->e[mine].deadline_ms = now + mpl_ttl(s); /* the same owner asks again */
        mode = FX_GET_DURABLE;
    } else if (g->n < MPL_MAX_DURABLE) {
        g->e[g->n++] = (mpl_get_ent_t){req, req->generation, now + mpl_ttl(s)};
        mode = FX_GET_DURABLE;
    }
    if (g->n == 0) {
        fx_hmap_del(pl->gets, key.p, key.len, NULL);
        fx_free(g);
    }
    mpl_arm(pl);
    return mode;
}

FX_INTERNAL void fx_mplace_get_end(mkv_t *s, fx_str_t key, master_node_t *req)
{
    fx_mplace_t *pl = s->place;
    mpl_get_t *g = fx_hmap_get(pl->gets, key.p, key.len);
    if (g) mpl_get_prune(pl, key.p, key.len, g, 0, req);
}

/* ---- life ---- */
FX_INTERNAL int fx_mplace_create(mkv_t *s)
{
    fx_mplace_t *pl = fx_calloc(1, sizeof *pl);
    if (!pl) return FLUXON_ERR_NOMEM;
    pl->s = s;
    fx_timer_init(&pl->timer);
    pl->next_token = s->m->generation; /* tokens of a restarted master do not repeat */
    pl->rng = s->m->generation | 1;
    int rc = fx_hmap_create(64, &pl->by_token);
    if (rc == FLUXON_OK) rc = fx_hmap_create(64, &pl->keys);
    if (rc == FLUXON_OK) rc = fx_hmap_create(64, &pl->gets);
    if (rc != FLUXON_OK) {
        fx_hmap_destroy(pl->by_token);
        fx_hmap_destroy(pl->keys);
        fx_free(pl);
        return rc;
    }
    s->place = pl;
    return FLUXON_OK;
}

FX_INTERNAL void fx_mplace_destroy(mkv_t *s)
{
    fx_mplace_t *pl = s->place;
    if (!pl) return;
    fx_timer_disarm(s->m->r, &pl->timer);
    while (pl->head) {
        mkv_inflight_t *r = pl->head;
        mpl_unlink(pl, r);
        mpl_free(r);
    }
    fx_hmap_clear(pl->gets, fx_free);
    fx_hmap_destroy(pl->gets);
    fx_hmap_destroy(pl->keys);
    fx_hmap_destroy(pl->by_token);
    fx_free(pl);
    s->place = NULL;
}

FX_INTERNAL void fx_mplace_metrics(mkv_t *s, fx_mmetrics_t *mm)
{
    fx_mplace_t *pl = s->place;
    if (!pl) return;
    mm->inflight_puts = fx_hmap_count(pl->by_token);
    mm->inflight_put_keys = fx_hmap_count(pl->keys);
    mm->inflight_gets = fx_hmap_count(pl->gets);
}

#undef MPL_MAX_DURABLE
#undef MPL_MAX_KEYS
