/* owner_kv.c — the owner's KV core, part 1: the local reserve slot pool fed by master
 * grants, the local index of visible values, holders, the local-first put path
 * (put_start → engine writes → put_commit: local-visible at once (V1), ONE batch
 * PUT_DONE per plan, slots Committed only once the route exists (V3), retried with the
 * same batch id when the outcome is uncertain (T1)), invalidation, and the UCX glue. */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "owner_kv.h"

#define OKV_PUT_RETRY_MAX_MS 1000u

typedef struct owner_claim {
    struct owner_claim *next;
    uint64_t value_len, deadline_ms;
    bool waited; /* counted once as waiting for eviction */
    size_t count, got;
    fx_slot_ref_t *slots;
    fx_okv_claim_cb cb;
    void *arg;
} owner_claim_t;

FX_INTERNAL uint64_t fx_okv_next_id(owner_kv_t *kv) { return ++kv->next_id; }

FX_INTERNAL bool fx_okv_key_ok(fx_str_t k)
{
    return k.len > 0 && k.len <= FLUXON_MAX_KEY_BYTES && memchr(k.p, 0, k.len) == NULL;
}

/* ---- UCX glue ---- */
/* Runs before the reactor sleeps: progress, then arm the worker's event fd; a busy
 * worker (arm refused) keeps the loop from sleeping. */
static bool okv_ucx_idle(void *arg)
{
    owner_kv_t *kv = arg;
    fx_ucx_progress(kv->ucx);
    return fx_ucx_arm(kv->ucx) == 0;
}

static void okv_ucx_event(void *arg)
{
    owner_kv_t *kv = arg;
    fx_ucx_progress(kv->ucx);
}
static void okv_ucx_tick(fx_reactor_t *r, fx_timer_t *t)
{
    owner_kv_t *kv = FX_CONTAINER_OF(t, owner_kv_t, ucx_timer);
    fx_ucx_progress(kv->ucx); /* transfer timeouts are noticed by progress */
    fx_timer_arm(r, t, 100, okv_ucx_tick);
}

FX_INTERNAL void fx_owner_kv_grants(fx_owner_t *o, fx_u64v_t *ids, fx_u64v_t *offsets)
{
    owner_kv_t *kv = owner_kv(o);
    *ids = (fx_u64v_t){kv->grant_ids, (uint32_t)kv->n_grants};
    *offsets = (fx_u64v_t){kv->grant_offsets, (uint32_t)kv->n_grants};
}

/* The master restarted: its routes are gone, so every value published here is no longer
 * routed. Retire them (their slots free once unpinned) so get, ls and del agree. Values
 * still being published (PENDING) stay: their PUT_DONE is retried to the new master. */
FX_INTERNAL void fx_owner_kv_master_changed(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    void *v;
    size_t dropped = 0;
    while (fx_hmap_iter_next(kv->by_offset, &it, NULL, NULL, &v)) {
        owner_entry_t *en = v;
        if (en->state != OE_COMMITTED) continue;
        fx_okv_entry_retire(o, en);
        dropped++;
    }
    if (dropped) FX_WARN("master restarted: %zu published values dropped from this owner (their routes are gone)", dropped);
}

FX_INTERNAL void fx_owner_kv_ucx_info(fx_owner_t *o, fx_str_t *address, fx_str_t *rkey)
{
    owner_kv_t *kv = owner_kv(o);
    address->p = kv->address;
    address->len = (uint32_t)kv->address_len;
    rkey->p = kv->rkey;
    rkey->len = (uint32_t)kv->rkey_len;
}

FX_INTERNAL fx_ucx_peer_t *fx_okv_peer(fx_owner_t *o, fx_str_t node_id, uint64_t generation,
                                       fx_str_t address, fx_str_t rkey, uint64_t base)
{
    owner_kv_t *kv = owner_kv(o);
    for (size_t i = 0; i < kv->n_peers; i++) {
        owner_peer_t *p = &kv->peers[i];
        if (fx_str_eq(node_id, p->node_id)) {
            if (p->generation == generation && fx_ucx_peer_status(p->peer) == 0) return p->peer;
            fx_ucx_peer_close(p->peer); /* restarted or failed: reconnect */
            kv->peers[i] = kv->peers[--kv->n_peers];
            break;
        }
    }
    if (kv->n_peers == kv->cap_peers) {
        size_t nc = kv->cap_peers ? kv->cap_peers * 2 : 8;
        owner_peer_t *np = fx_realloc(kv->peers, nc * sizeof *np);
        if (!np) return NULL;
        kv->peers = np;
        kv->cap_peers = nc;
    }
    fx_ucx_peer_t *peer = NULL;
    int rc = fx_ucx_peer_connect(kv->ucx, address.p, address.len, rkey.p, rkey.len, base, &peer);
    if (rc != FLUXON_OK) {
        FX_WARN("cannot connect to owner %.*s over UCX: %s", (int)node_id.len, node_id.p, fluxon_status_string(rc));
        return NULL;
    }
    owner_peer_t *p = &kv->peers[kv->n_peers++];
    fx_str_copy(node_id, p->node_id, sizeof p->node_id);
    p->generation = generation;
    p->peer = peer;
    return peer;
}

/* ---- entries and holders ---- */
FX_INTERNAL owner_entry_t *fx_okv_entry_new(fx_owner_t *o, const char *key, uint32_t klen,
                                            const fx_slot_ref_t *slot, uint64_t value_len)
{
    owner_kv_t *kv = owner_kv(o);
    owner_entry_t *en = fx_calloc(1, sizeof *en);
    if (!en) return NULL;
    en->key = fx_strndup(key, klen);
    if (!en->key) {
        fx_free(en);
        return NULL;
    }
    en->klen = klen;
    en->slot = *slot;
    en->value_len = value_len;
    en->state = OE_PENDING;
    if (fx_hmap_put(kv->by_offset, &slot->offset, sizeof slot->offset, en, NULL) != FLUXON_OK) {
        fx_free(en->key);
        fx_free(en);
        return NULL;
    }
    return en;
}

FX_INTERNAL void fx_okv_entry_index(fx_owner_t *o, owner_entry_t *en)
{
    owner_kv_t *kv = owner_kv(o);
    void *old = NULL;
    if (fx_hmap_put(kv->index, en->key, en->klen, en, &old) != FLUXON_OK) return;
    if (old && old != en) ((owner_entry_t *)old)->indexed = false;
    en->indexed = true;
}

/* Drops an entry: out of the index, slot released (the pool frees it once no holder
 * pins it, S2). */
FX_INTERNAL void fx_okv_entry_retire(fx_owner_t *o, owner_entry_t *en)
{
    owner_kv_t *kv = owner_kv(o);
    if (en->retired) return;
    en->retired = true;
    fx_oev_forget(o, en); /* out of the hot tier and its group */
    if (en->indexed) {
        fx_hmap_del(kv->index, en->key, en->klen, NULL);
        en->indexed = false;
    }
    fx_hmap_del(kv->by_offset, &en->slot.offset, sizeof en->slot.offset, NULL);
    /* Reuse at once is safe: the master removed this replica before telling us, and a
     * fetch that copied from it is only served once the master confirms the replica
     * still existed after the copy (GET_DONE, D1). */
    int rc = en->state == OE_COMMITTED ? fx_slot_pool_route_dead(kv->pool, &en->slot)
                                       : fx_slot_pool_release_prepared(kv->pool, &en->slot);
    if (rc != FLUXON_OK) FX_ERROR("retiring %s: slot release failed: %s", en->key, fluxon_status_string(rc));
    fx_free(en->key);
    fx_free(en);
}

FX_INTERNAL owner_holder_t *fx_okv_holder_new(fx_owner_t *o, owner_ext_t *e, const fx_slot_ref_t *slot)
{
    owner_kv_t *kv = owner_kv(o);
    if (fx_slot_pool_holder_ref(kv->pool, slot) != FLUXON_OK) return NULL;
    owner_holder_t *h = fx_calloc(1, sizeof *h);
    if (!h) goto err_unref;
    h->id = fx_okv_next_id(kv);
    h->slot = *slot;
    if (fx_hmap_put(kv->holders, &h->id, sizeof h->id, h, NULL) != FLUXON_OK) goto err_free;
    h->ext = e;
    if (e) {
        h->next = e->holders;
        if (e->holders) e->holders->prev = h;
        e->holders = h;
    }
    return h;
err_free:
    fx_free(h);
err_unref:
    fx_slot_pool_holder_unref(kv->pool, slot);
    return NULL;
}

FX_INTERNAL void fx_okv_holder_release(fx_owner_t *o, owner_holder_t *h)
{
    owner_kv_t *kv = owner_kv(o);
    fx_hmap_del(kv->holders, &h->id, sizeof h->id, NULL);
    if (h->ext) {
        if (h->prev) h->prev->next = h->next;
        else h->ext->holders = h->next;
        if (h->next) h->next->prev = h->prev;
    }
    int rc = fx_slot_pool_holder_unref(kv->pool, &h->slot);
    if (rc != FLUXON_OK) FX_ERROR("holder %llu: unref failed: %s", (unsigned long long)h->id, fluxon_status_string(rc));
    fx_free(h);
    fx_oev_kick(o); /* a slot may have freed, or a pinned victim became evictable */
}

FX_INTERNAL int fx_okv_holder_release_id(fx_owner_t *o, owner_ext_t *e, uint64_t id)
{
    owner_holder_t *h = fx_hmap_get(owner_kv(o)->holders, &id, sizeof id);
    if (!h || h->ext != e) return FLUXON_ERR_NOT_FOUND;
    fx_okv_holder_release(o, h);
    return FLUXON_OK;
}

/* ---- claims and grants ---- */
static void okv_grant_request(fx_owner_t *o);

FX_INTERNAL bool fx_okv_segment_full(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    return kv->grant_nospace_ms && fx_now_ms() - kv->grant_nospace_ms < 1000;
}

static bool okv_can_grow(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    if (kv->closing || o->mstate != OM_READY || !o->mconn || fx_okv_segment_full(o)) return false;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(kv->pool, &st);
    return st.grants < kv->max_grants;
}

/* Serves queued claims from free slots, in order. What is left: the pool grows when it
 * can (can_grow: a grant is requested); at capacity a claim waits for eviction (issue 7)
 * until claim_timeout_ms; otherwise it completes short (no space). */
static void okv_claims_serve(fx_owner_t *o, bool can_grow)
{
    owner_kv_t *kv = owner_kv(o);
    owner_claim_t **pp = &kv->claims;
    owner_claim_t *done = NULL, **done_tail = &done;
    uint64_t now = fx_now_ms();
    while (*pp) {
        owner_claim_t *c = *pp;
        while (c->got < c->count && fx_slot_pool_claim(kv->pool, c->value_len, &c->slots[c->got]) == FLUXON_OK)
            c->got++;
        bool finished = c->got == c->count;
        if (!finished && !kv->closing && now >= c->deadline_ms) {
            finished = true;
            kv->ev_claim_timeouts++;
            FX_WARN("claim of %zu slots of %llu bytes timed out after claim_timeout_ms %u (stage=claim, got %zu)",
                    c->count, (unsigned long long)fx_slot_size_for(c->value_len), o->cfg.claim_timeout_ms, c->got);
        } else if (!finished && !can_grow) {
            finished = !fx_oev_claim_can_wait(o, c->value_len, c->count);
            if (!finished && !c->waited) {
                c->waited = true;
                kv->ev_claim_waits++;
            }
        }
        if (finished) {
            *pp = c->next;
            c->next = NULL;
            *done_tail = c;
            done_tail = &c->next;
        } else {
            pp = &c->next;
        }
    }
    if (kv->claims && can_grow) okv_grant_request(o);
    else if (kv->claims) fx_oev_kick(o); /* capacity reached: free slots by eviction */
    while (done) { /* callbacks last: they may claim again */
        owner_claim_t *c = done;
        done = c->next;
        c->cb(o, c->arg, c->got);
        fx_free(c);
    }
}

typedef struct okv_grant_ctx {
    fx_owner_t *o;
    uint64_t slot_size;
    bool prewarm;
} okv_grant_ctx_t;

static void okv_prewarm(fx_owner_t *o);

static void okv_on_grant(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                         fx_arena_t *arena)
{
    okv_grant_ctx_t *g = arg;
    fx_owner_t *o = g->o;
    uint64_t slot_size = g->slot_size;
    bool prewarm = g->prewarm;
    fx_free(g);
    owner_kv_t *kv = owner_kv(o);
    if (!kv) return; /* shutting down */
    kv->grant_inflight = false;
    bool grew = false;
    if (status == FLUXON_OK) {
        fx_body_grant_ack_t ack;
        fx_body_grant_ack_decode(body, h->body_len, &ack, arena);
        for (uint32_t i = 0; i < ack.grant_ids.n && i < ack.offsets.n && slot_size; i++) {
            int rc = fx_slot_pool_add_grant(kv->pool, ack.grant_ids.v[i], ack.offsets.v[i], slot_size);
            if (rc == FLUXON_OK && kv->n_grants == kv->cap_grants) {
                size_t nc = kv->cap_grants ? kv->cap_grants * 2 : 16;
                uint64_t *ni = fx_realloc(kv->grant_ids, nc * sizeof *ni);
                if (ni) kv->grant_ids = ni;
                uint64_t *no = fx_realloc(kv->grant_offsets, nc * sizeof *no);
                if (no) kv->grant_offsets = no;
                if (ni && no) kv->cap_grants = nc;
            }
            if (rc == FLUXON_OK && kv->n_grants < kv->cap_grants) {
                kv->grant_ids[kv->n_grants] = ack.grant_ids.v[i];
                kv->grant_offsets[kv->n_grants++] = ack.offsets.v[i];
            }
            if (rc == FLUXON_OK) {
                fx_oev_grant_added(o, slot_size);
                kv->grants_received++;
                grew = true;
            } else {
                FX_ERROR("grant %llu at %llu rejected by the slot pool: %s", (unsigned long long)ack.grant_ids.v[i],
                         (unsigned long long)ack.offsets.v[i], fluxon_status_string(rc));
            }
        }
    } else {
        FX_WARN("grant request failed: %s", fluxon_status_string(status));
        if (status == FLUXON_ERR_NO_SPACE) kv->grant_nospace_ms = FX_MAX(fx_now_ms(), 1ull);
    }
    if (grew) kv->grant_nospace_ms = 0;
    if (prewarm && grew) okv_prewarm(o);
    okv_claims_serve(o, grew);
}

static int okv_grant_send(fx_owner_t *o, uint64_t slot_size, uint64_t count, bool prewarm)
{
    owner_kv_t *kv = owner_kv(o);
    okv_grant_ctx_t *g = fx_malloc(sizeof *g);
    if (!g) return FLUXON_ERR_NOMEM;
    *g = (okv_grant_ctx_t){o, slot_size, prewarm};
    fx_body_grant_t b = {slot_size, (uint32_t)count};
    int rc = FX_RPC_CALL(o->mconn, GRANT, grant, &b, o->cfg.master_timeout_ms, okv_on_grant, g);
    if (rc != FLUXON_OK) fx_free(g);
    else kv->grant_inflight = true;
    return rc;
}

/* Expected-capacity prewarm (§6): take the hard cap of grants for the expected value
 * length up front, so steady state never waits for a grant. */
static void okv_prewarm(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    if (!o->cfg.has_expected || kv->grant_inflight || o->mstate != OM_READY || !o->mconn) return;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(kv->pool, &st);
    if (st.grants >= kv->max_grants) return;
    okv_grant_send(o, fx_slot_size_for(o->cfg.expected_value_len), FX_MIN(kv->max_grants - st.grants, 64u), true);
}

static void okv_grant_request(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    if (kv->grant_inflight || !kv->claims) return;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(kv->pool, &st);
    if (o->mstate != OM_READY || !o->mconn || st.grants >= kv->max_grants || fx_okv_segment_full(o)) {
        okv_claims_serve(o, false); /* nothing more will come: wait for eviction or fail */
        return;
    }
    owner_claim_t *c = kv->claims;
    uint64_t slot_size = fx_slot_size_for(c->value_len);
    uint64_t per = fx_slots_per_grant(o->cfg.grant_bytes, slot_size);
    uint64_t need = 0;
    for (owner_claim_t *q = c; q; q = q->next)
        if (q->value_len == c->value_len) need += q->count - q->got;
    uint64_t count = per ? (need + per - 1) / per : 1;
    count = FX_MIN(count, kv->max_grants - st.grants);
    count = FX_MAX(FX_MIN(count, 64u), 1u);
    if (okv_grant_send(o, slot_size, count, false) != FLUXON_OK) okv_claims_serve(o, false);
}

FX_INTERNAL void fx_okv_claim(fx_owner_t *o, uint64_t value_len, size_t count, fx_slot_ref_t *slots,
                              fx_okv_claim_cb cb, void *arg)
{
    owner_kv_t *kv = owner_kv(o);
    size_t got = 0;
    if (!kv->claims) /* FIFO: never overtake queued claims */
        while (got < count && fx_slot_pool_claim(kv->pool, value_len, &slots[got]) == FLUXON_OK) got++;
    if (got == count) {
        cb(o, arg, got);
        return;
    }
    owner_claim_t *c = fx_calloc(1, sizeof *c);
    if (!c) {
        cb(o, arg, got);
        return;
    }
    *c = (owner_claim_t){NULL, value_len, fx_now_ms() + o->cfg.claim_timeout_ms, false, count, got, slots, cb, arg};
    owner_claim_t **pp = &kv->claims;
    while (*pp) pp = &(*pp)->next;
    *pp = c;
    okv_grant_request(o);
}

FX_INTERNAL void fx_okv_claims_pump(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    if (kv->claims) okv_claims_serve(o, kv->grant_inflight || okv_can_grow(o));
}

FX_INTERNAL size_t fx_okv_claims_deficit(fx_owner_t *o, uint64_t *sizes, uint64_t *needs, size_t cap)
{
    owner_kv_t *kv = owner_kv(o);
    size_t n = 0;
    if (!kv->claims || kv->grant_inflight || okv_can_grow(o)) return 0; /* a grant serves them */
    for (owner_claim_t *c = kv->claims; c; c = c->next) {
        uint64_t ss = fx_slot_size_for(c->value_len);
        size_t k = 0;
        while (k < n && sizes[k] != ss) k++;
        if (k == n) {
            if (n == cap) continue;
            sizes[n] = ss;
            needs[n++] = 0;
        }
        needs[k] += c->count - c->got;
    }
    return n;
}

/* ---- plans (put) ---- */
static void okv_plan_unlink(owner_plan_t *p)
{
    if (!p->ext) return;
    if (p->prev) p->prev->next = p->next;
    else p->ext->plans = p->next;
    if (p->next) p->next->prev = p->prev;
    p->ext = NULL;
    p->prev = p->next = NULL;
}

static void okv_plan_free(fx_owner_t *o, owner_plan_t *p)
{
    owner_kv_t *kv = owner_kv(o);
    okv_plan_unlink(p);
    fx_hmap_del(kv->plans, &p->id, sizeof p->id, NULL);
    fx_timer_disarm(o->r, &p->retry_timer);
    if (p->reply_conn) fx_conn_unref(p->reply_conn);
    for (size_t i = 0; i < p->n; i++) fx_free(p->keys[i]);
    fx_free(p->keys);
    fx_free(p->klens);
    fx_free(p->status);
    fx_free(p->slots);
    fx_free(p->entries);
    fx_free(p->group_lens);
    fx_oplace_plan_free(p);
    fx_free(p->inline_value);
    fx_free(p);
}

/* Releases the reservations of a plan that was never committed. */
static void okv_plan_abort(fx_owner_t *o, owner_plan_t *p)
{
    owner_kv_t *kv = owner_kv(o);
    for (size_t i = 0; i < p->n; i++) {
        if (fx_hmap_get(kv->inflight, p->keys[i], p->klens[i]) == p)
            fx_hmap_del(kv->inflight, p->keys[i], p->klens[i], NULL);
        if (p->status[i] == FLUXON_OK) fx_slot_pool_release_prepared(kv->pool, &p->slots[i]);
    }
    if (p->put_token) fx_oplace_revoke(o, p);
    kv->puts_aborted++;
    okv_plan_free(o, p);
    fx_oev_kick(o);
}

static bool okv_group_bounds(const uint64_t *lens, size_t n_groups, size_t n)
{
    if (n_groups == 0) return true;
    uint64_t sum = 0;
    for (size_t g = 0; g < n_groups; g++) {
        if (lens[g] == 0) return false;
        sum += lens[g];
        if (sum > n) return false;
    }
    return sum == n;
}

/* Rejects whole groups: if any member of a group is not OK, every OK member becomes
 * GROUP_REJECTED and its slot (if claimed) is released. */
static void okv_reject_groups(owner_kv_t *kv, owner_plan_t *p, bool slots_claimed)
{
    size_t start = 0;
    size_t ng = p->n_groups ? p->n_groups : p->n;
    for (size_t g = 0; g < ng; g++) {
        size_t len = p->n_groups ? (size_t)p->group_lens[g] : 1;
        bool bad = false;
        for (size_t i = start; i < start + len; i++) bad |= p->status[i] != FLUXON_OK;
        if (bad)
            for (size_t i = start; i < start + len; i++)
                if (p->status[i] == FLUXON_OK) {
                    p->status[i] = FLUXON_ERR_GROUP_REJECTED;
                    if (slots_claimed) fx_slot_pool_release_prepared(kv->pool, &p->slots[i]);
                }
        start += len;
    }
}

static void okv_commit(fx_owner_t *o, owner_plan_t *p, fx_conn_t *conn, const fx_frame_header_t *h);

/* PUT_INLINE: the slot is claimed (and the batch placed): copy the bytes in and commit,
 * or answer the per-key refusal. Consumes p->reply_conn's reference. */
static void okv_put_inline_claimed(fx_owner_t *o, owner_plan_t *p)
{
    fx_conn_t *c = p->reply_conn;
    p->reply_conn = NULL;
    p->state = OP_PREPARED;
    fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_PUT_INLINE, 0, 0, 0, p->req_id};
    if (p->status[0] != FLUXON_OK) {
        owner_kv(o)->put_rejected++;
        if (fx_conn_is_open(c))
            fx_conn_reply_error(c, &q, p->status[0], "put of %s: %s", p->keys[0], fluxon_status_string(p->status[0]));
        okv_plan_abort(o, p);
    } else if (!fx_conn_is_open(c) || !p->ext) {
        okv_plan_abort(o, p); /* the external went away meanwhile */
    } else {
        memcpy((uint8_t *)fx_segment_base(o->seg) + p->slots[0].offset, p->inline_value, p->value_len);
        fx_free(p->inline_value);
        p->inline_value = NULL;
        okv_commit(o, p, c, NULL);
    }
    fx_conn_unref(c);
}

FX_INTERNAL void fx_okv_put_start_reply(fx_owner_t *o, owner_plan_t *p)
{
    if (p->is_inline) {
        okv_put_inline_claimed(o, p);
        return;
    }
    owner_kv_t *kv = owner_kv(o);
    okv_reject_groups(kv, p, true);
    uint64_t *st = fx_calloc(2 * p->n, sizeof *st);
    size_t accepted = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->status[i] == FLUXON_OK) {
            accepted++;
        } else {
            kv->put_rejected++;
            if (fx_hmap_get(kv->inflight, p->keys[i], p->klens[i]) == p)
                fx_hmap_del(kv->inflight, p->keys[i], p->klens[i], NULL);
        }
        if (st) {
            st[i] = (uint64_t)(int64_t)p->status[i];
            st[p->n + i] = p->status[i] == FLUXON_OK ? p->slots[i].offset : 0;
        }
    }
    p->state = OP_PREPARED;
    fx_conn_t *c = p->reply_conn;
    p->reply_conn = NULL;
    fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_PUT_START, 0, 0, 0, p->req_id};
    if (!st) {
        fx_conn_reply_error(c, &q, FLUXON_ERR_NOMEM, "owner out of memory");
        okv_plan_abort(o, p);
    } else if (!fx_conn_is_open(c) || !p->ext) {
        okv_plan_abort(o, p); /* the external went away meanwhile */
    } else {
        fx_body_put_start_ack_t ack = {accepted ? p->id : 0, {st, (uint32_t)p->n}, {st + p->n, (uint32_t)p->n}};
        FX_CONN_SEND(c, FX_MSG_PUT_START, FX_FLAG_RESPONSE, FLUXON_OK, p->req_id, put_start_ack, &ack);
        if (!accepted) okv_plan_free(o, p);
    }
    fx_free(st);
    fx_conn_unref(c);
}

static void okv_put_claimed(fx_owner_t *o, void *arg, size_t got)
{
    owner_plan_t *p = arg;
    /* slots[0..got) were claimed for the accepted keys in order */
    size_t k = 0;
    fx_slot_ref_t *claimed = p->slots + p->n; /* scratch area after the per-key refs */
    for (size_t i = 0; i < p->n; i++) {
        if (p->status[i] != FLUXON_OK) continue;
        if (k < got) p->slots[i] = claimed[k++];
        else p->status[i] = o->mstate == OM_READY ? FLUXON_ERR_NO_SPACE
                                                  : FLUXON_ERR_UNAVAILABLE; /* no master: no grants */
    }
    okv_reject_groups(owner_kv(o), p, true); /* the master sees whole groups only */
    if (fx_oplace_start(o, p)) return;        /* answered once the master placed the batch */
    fx_okv_put_start_reply(o, p);
}

/* put_start of a decoded body; value != NULL: a PUT_INLINE of b.value_len bytes (one
 * key), copied into the slot once claimed and published without a put_commit. */
static void okv_put_start_b(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, fx_body_put_start_t b,
                            const void *value);

static void okv_put_start(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                          fx_arena_t *arena)
{
    fx_body_put_start_t b;
    fx_body_put_start_decode(body, h->body_len, &b, arena);
    okv_put_start_b(o, e, h, b, NULL);
}

static void okv_put_inline(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                           fx_arena_t *arena)
{
    fx_body_put_inline_t in;
    fx_body_put_inline_decode(body, h->body_len, &in, arena);
    fx_body_put_start_t b = {{&in.key, 1}, in.value.len, in.flags, {NULL, 0}, {NULL, 0}, in.lease_id,
                             in.preferred_sub_cluster};
    okv_put_start_b(o, e, h, b, in.value.p ? in.value.p : "");
}

static void okv_put_start_b(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, fx_body_put_start_t b,
                            const void *value)
{
    owner_kv_t *kv = owner_kv(o);
    size_t n = b.keys.n;
    /* validate everything before reserving anything */
    if (n == 0) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "put_start: n_keys is 0");
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (!fx_okv_key_ok(b.keys.v[i])) {
            fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                                "put_start: key %zu is empty, longer than %d bytes or contains NUL", i,
                                FLUXON_MAX_KEY_BYTES);
            return;
        }
    uint64_t slot_size = fx_slot_size_for(b.value_len);
    if (b.value_len == 0 || slot_size == 0 || slot_size > o->cfg.grant_bytes) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                            "put_start: value_len %llu must be in 1..%llu (reserve.grant_bytes)",
                            (unsigned long long)b.value_len, (unsigned long long)o->cfg.grant_bytes);
        return;
    }
    if (!okv_group_bounds(b.group_lens.v, b.group_lens.n, n)) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                            "put_start: atomic_group_lens must be > 0 each and sum to n_keys %zu", n);
        return;
    }
    if (b.replica_mask.len && b.replica_mask.len != n) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                            "put_start: make_replica_task_mask has %u entries, n_keys is %zu", b.replica_mask.len, n);
        return;
    }
    if (b.replica_mask.len && b.group_lens.n) {
        size_t s = 0;
        for (size_t g = 0; g < b.group_lens.n; s += b.group_lens.v[g], g++)
            for (size_t i = s + 1; i < s + b.group_lens.v[g]; i++)
                if ((b.replica_mask.p[i] != 0) != (b.replica_mask.p[s] != 0)) {
                    fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                                        "put_start: make_replica_task_mask differs inside atomic group %zu", g);
                    return;
                }
    }
    owner_plan_t *p = fx_calloc(1, sizeof *p);
    if (!p) goto nomem;
    p->n = n;
    p->keys = fx_calloc(n, sizeof *p->keys);
    p->klens = fx_calloc(n, sizeof *p->klens);
    p->status = fx_calloc(n, sizeof *p->status);
    p->slots = fx_calloc(2 * n, sizeof *p->slots);
    p->entries = fx_calloc(n, sizeof *p->entries);
    p->group_lens = fx_calloc(b.group_lens.n ? b.group_lens.n : 1, sizeof *p->group_lens);
    if (!p->keys || !p->klens || !p->status || !p->slots || !p->entries || !p->group_lens) goto nomem_plan;
    for (size_t i = 0; i < n; i++) {
        p->keys[i] = fx_strndup(b.keys.v[i].p, b.keys.v[i].len);
        if (!p->keys[i]) goto nomem_plan;
        p->klens[i] = b.keys.v[i].len;
    }
    if (b.group_lens.n) memcpy(p->group_lens, b.group_lens.v, b.group_lens.n * sizeof(uint64_t));
    p->n_groups = b.group_lens.n;
    p->value_len = b.value_len;
    p->flags = b.flags;
    p->lease_id = b.lease_id;
    if (value) {
        p->is_inline = true;
        if (!(p->inline_value = fx_malloc(b.value_len))) goto nomem_plan;
        memcpy(p->inline_value, value, b.value_len);
    }
    if (b.preferred_sub_cluster.len && !(p->preferred = fx_strndup(b.preferred_sub_cluster.p, b.preferred_sub_cluster.len)))
        goto nomem_plan;
    p->id = fx_okv_next_id(kv);
    p->o = o;
    fx_timer_init(&p->retry_timer);
    if (fx_hmap_put(kv->plans, &p->id, sizeof p->id, p, NULL) != FLUXON_OK) goto nomem_plan;
    p->ext = e;
    p->next = e->plans;
    if (e->plans) e->plans->prev = p;
    e->plans = p;
    /* per-key admission: in flight / exists (hostless path: both always on) */
    for (size_t i = 0; i < n; i++) {
        p->status[i] = FLUXON_OK;
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++)
            dup = p->klens[j] == p->klens[i] && !memcmp(p->keys[j], p->keys[i], p->klens[i]);
        if ((b.flags & FX_PUT_REJECT_IF_INFLIGHT) && (dup || fx_hmap_get(kv->inflight, p->keys[i], p->klens[i])))
            p->status[i] = FLUXON_ERR_KEY_BEING_WRITTEN;
        else if (dup)
            p->status[i] = FLUXON_ERR_INVALID_ARGUMENT; /* the same key twice in one plan */
        else if ((b.flags & FX_PUT_REJECT_IF_EXIST) && fx_hmap_get(kv->index, p->keys[i], p->klens[i]))
            p->status[i] = FLUXON_ERR_KEY_EXISTS;
    }
    okv_reject_groups(kv, p, false);
    size_t want = 0;
    for (size_t i = 0; i < n; i++) {
        if (p->status[i] != FLUXON_OK) continue;
        want++;
        /* in flight from now on, also while the slots are being claimed */
        fx_hmap_put(kv->inflight, p->keys[i], p->klens[i], p, NULL);
    }
    kv->puts_started++;
    p->state = OP_CLAIMING;
    p->req_id = h->req_id;
    p->reply_conn = e->conn;
    fx_conn_ref(e->conn);
    fx_okv_claim(o, b.value_len, want, p->slots + n, okv_put_claimed, p);
    return;

nomem_plan:
    if (p) {
        if (p->ext) okv_plan_unlink(p);
        fx_hmap_del(kv->plans, &p->id, sizeof p->id, NULL);
        for (size_t i = 0; p->keys && i < n; i++) fx_free(p->keys[i]);
        fx_free(p->keys);
        fx_free(p->klens);
        fx_free(p->status);
        fx_free(p->slots);
        fx_free(p->entries);
        fx_free(p->group_lens);
        fx_free(p->preferred);
        fx_free(p->inline_value);
        fx_free(p);
    }
nomem:
    fx_conn_reply_error(e->conn, h, FLUXON_ERR_NOMEM, "put_start: owner out of memory");
}

static owner_plan_t *okv_plan_of(fx_owner_t *o, owner_ext_t *e, uint64_t id)
{
    owner_plan_t *p = fx_hmap_get(owner_kv(o)->plans, &id, sizeof id);
    return p && p->ext == e && p->state == OP_PREPARED ? p : NULL;
}


static void okv_notify(fx_owner_t *o, owner_plan_t *p, int status)
{
    if (p->is_inline && p->reply_conn && fx_conn_is_open(p->reply_conn)) { /* the PUT_INLINE answer */
        fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_PUT_INLINE, 0, 0, 0, p->req_id};
        if (status == FLUXON_OK) {
            fx_body_empty_t em;
            FX_CONN_REPLY(p->reply_conn, &q, empty, &em);
        } else {
            fx_conn_reply_error(p->reply_conn, &q, status, "put of %s: %s", p->keys[0], fluxon_status_string(status));
        }
        return;
    }
    if (p->reply_conn && fx_conn_is_open(p->reply_conn)) {
        fx_body_published_t b = {p->id, status};
        FX_CONN_SEND(p->reply_conn, FX_MSG_PUBLISHED, 0, 0, 0, published, &b);
    }
}

static void okv_on_retry(fx_reactor_t *r, fx_timer_t *t)
{
    owner_plan_t *p = FX_CONTAINER_OF(t, owner_plan_t, retry_timer);
    fx_okv_publish(p->o, p);
}

static void okv_on_put_done(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                            fx_arena_t *arena);

typedef struct okv_publish_ctx {
    fx_owner_t *o;
    uint64_t plan_id;
} okv_publish_ctx_t;

FX_INTERNAL void fx_okv_publish(fx_owner_t *o, owner_plan_t *p)
{
    owner_kv_t *kv = owner_kv(o);
    if (fx_oplace_before_publish(o, p)) return; /* the values are on their way to the target */
    if (o->mstate != OM_READY || !o->mconn) return; /* fx_owner_kv_master_ready retries */
    size_t m = 0;
    for (size_t i = 0; i < p->n; i++) m += p->status[i] == FLUXON_OK;
    fx_str_t *keys = fx_calloc(m ? m : 1, sizeof *keys);
    uint64_t *offs = fx_calloc(m ? m : 1, sizeof *offs);
    uint64_t *groups = fx_calloc(p->n_groups ? p->n_groups : 1, sizeof *groups);
    okv_publish_ctx_t *ctx = fx_malloc(sizeof *ctx);
    if (!keys || !offs || !groups || !ctx) {
        fx_free(keys);
        fx_free(offs);
        fx_free(groups);
        fx_free(ctx);
        fx_timer_arm(o->r, &p->retry_timer, 50, okv_on_retry);
        return;
    }
    size_t k = 0, ng = 0, start = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->status[i] == FLUXON_OK) {
            keys[k].p = p->keys[i];
            keys[k].len = p->klens[i];
            offs[k++] = p->target_remote ? p->target_offsets[i] : p->slots[i].offset;
        }
    for (size_t g = 0; g < p->n_groups; start += p->group_lens[g], g++)
        if (p->status[start] == FLUXON_OK) groups[ng++] = p->group_lens[g]; /* groups are all-or-none */
    fx_body_put_done_t b = {p->batch_id, p->value_len, p->flags, p->lease_id, {keys, (uint32_t)m},
                            {offs, (uint32_t)m}, {groups, (uint32_t)ng}, p->put_token};
    ctx->o = o;
    ctx->plan_id = p->id;
    if (FX_RPC_CALL(o->mconn, PUT_DONE, put_done, &b, o->cfg.master_timeout_ms, okv_on_put_done, ctx) != FLUXON_OK)
        fx_free(ctx); /* conn closing: master_ready will retry */
    if (p->attempts++) kv->put_done_retries++;
    fx_free(keys);
    fx_free(offs);
    fx_free(groups);
}

/* The batch enters the hot tier together (V3, A1), each atomic group recorded on its
 * members so that eviction takes it whole. admit[i]: plan key i committed just now. */
static void okv_admit_plan(fx_owner_t *o, owner_plan_t *p, owner_entry_t **admit)
{
    if (!admit) return;
    size_t ng = p->n_groups ? p->n_groups : p->n, start = 0;
    for (size_t g = 0; g < ng; g++) {
        size_t len = p->n_groups ? (size_t)p->group_lens[g] : 1, m = 0;
        for (size_t i = start; i < start + len && i < p->n; i++)
            if (admit[i]) admit[start + m++] = admit[i]; /* compacted in place */
        fx_oev_group_commit(o, admit + start, m);
        for (size_t i = 0; i < m; i++) fx_oev_admit(o, admit[start + i]);
        start += len;
    }
}

static void okv_on_put_done(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                            fx_arena_t *arena)
{
    okv_publish_ctx_t *ctx = arg;
    fx_owner_t *o = ctx->o;
    owner_kv_t *kv = owner_kv(o);
    owner_plan_t *p = fx_hmap_get(kv->plans, &ctx->plan_id, sizeof ctx->plan_id);
    fx_free(ctx);
    if (!p || p->state != OP_PUBLISHING) return;
    if (status == FLUXON_ERR_TIMEOUT || status == FLUXON_ERR_UNAVAILABLE) {
        /* uncertain (T1): keep the local-visible entries, retry with the same batch id */
        uint32_t delay = FX_MIN(50u << FX_MIN(p->attempts, 5u), OKV_PUT_RETRY_MAX_MS);
        fx_timer_arm(o->r, &p->retry_timer, delay, okv_on_retry);
        return;
    }
    int outcome = status;
    if (status == FLUXON_OK) {
        fx_body_put_done_ack_t ack;
        fx_body_put_done_ack_decode(body, h->body_len, &ack, arena);
        bool all_stale = p->put_token && ack.statuses.n > 0;
        for (uint32_t k = 0; all_stale && k < ack.statuses.n; k++)
            all_stale = (int)(int64_t)ack.statuses.v[k] == FLUXON_ERR_STALE;
        if (all_stale) { /* the placement expired or its target died: publish the local copy */
            FX_WARN("put_done batch %llu: put_token %llu is stale at the master; publishing the local copy",
                    (unsigned long long)p->batch_id, (unsigned long long)p->put_token);
            p->put_token = 0;
            p->target_remote = false;
            p->batch_id = fx_okv_next_id(kv); /* a new batch: the old id has its answer */
            p->attempts = 0;
            kv->place_fallbacks++;
            fx_okv_publish(o, p);
            return;
        }
        owner_entry_t **admit = fx_calloc(p->n, sizeof *admit); /* [i]: committed just now */
        size_t k = 0;
        for (size_t i = 0; i < p->n; i++) {
            if (p->status[i] != FLUXON_OK) continue;
            owner_entry_t *en = p->entries[i];
            int ks = k < ack.statuses.n ? (int)(int64_t)ack.statuses.v[k] : FLUXON_ERR_PROTOCOL;
            if (ks == FLUXON_OK && en && !en->retired && p->target_remote) {
                fx_okv_entry_retire(o, en); /* published on the target: the staging copy goes */
                kv->put_keys_published++;
            } else if (ks == FLUXON_OK && en && !en->retired) {
                en->put_ms = ack.put_ms.v[k];
                en->put_ver = ack.put_ver.v[k];
                if (fx_slot_pool_mark_committed(kv->pool, &en->slot) == FLUXON_OK) {
                    en->state = OE_COMMITTED;
                    if (admit) admit[i] = en;
                }
                kv->put_keys_published++;
            } else if (en && !en->retired) {
                fx_okv_entry_retire(o, en); /* never published: the master refused it */
                if (outcome == FLUXON_OK) outcome = ks;
            }
            k++;
        }
        okv_admit_plan(o, p, admit);
        fx_free(admit);
    } else {
        for (size_t i = 0; i < p->n; i++)
            if (p->status[i] == FLUXON_OK && p->entries[i]) fx_okv_entry_retire(o, p->entries[i]);
    }
    kv->puts_published++;
    okv_notify(o, p, outcome);
    okv_plan_free(o, p);
}

static void okv_put_commit(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                           fx_arena_t *arena)
{
    fx_body_plan_ref_t b;
    fx_body_plan_ref_decode(body, h->body_len, &b, arena);
    owner_plan_t *p = okv_plan_of(o, e, b.plan_id);
    if (!p || p->is_inline) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_WRONG_HANDLE,
                            "put_commit: plan %llu is not a prepared put plan of this client",
                            (unsigned long long)b.plan_id);
        return;
    }
    okv_commit(o, p, e->conn, h);
}

/* Commits a prepared plan: local-visible (V1), then published. h: the put_commit request
 * to acknowledge (NULL for PUT_INLINE, answered by okv_notify once published). */
static void okv_commit(fx_owner_t *o, owner_plan_t *p, fx_conn_t *conn, const fx_frame_header_t *h)
{
    owner_kv_t *kv = owner_kv(o);
    /* local-read-ready now (V1): index the values before anything else */
    for (size_t i = 0; i < p->n; i++) {
        if (p->status[i] != FLUXON_OK) continue;
        fx_hmap_del(kv->inflight, p->keys[i], p->klens[i], NULL);
        fx_slot_pool_mark_pending(kv->pool, &p->slots[i]);
        owner_entry_t *en = fx_okv_entry_new(o, p->keys[i], p->klens[i], &p->slots[i], p->value_len);
        if (!en) {
            p->status[i] = FLUXON_ERR_NOMEM;
            fx_slot_pool_release_prepared(kv->pool, &p->slots[i]);
            continue;
        }
        fx_okv_entry_index(o, en);
        p->entries[i] = en;
    }
    okv_plan_unlink(p);
    p->state = OP_PUBLISHING;
    p->batch_id = p->id;
    p->reply_conn = conn; /* PUBLISHED (or the PUT_INLINE answer) goes here */
    fx_conn_ref(conn);
    kv->puts_committed++;
    if (h) {
        fx_body_put_commit_ack_t ack = {p->id};
        FX_CONN_REPLY(conn, h, put_commit_ack, &ack);
    }
    if (o->cfg.fault_kind == FX_FAULT_DELAY_REQUEST && !strcmp(o->cfg.fault_message, "PUT_DONE") &&
        (o->cfg.fault_count == 0 || kv->faults_applied < o->cfg.fault_count)) {
        kv->faults_applied++; /* test-only: the master hears of this batch fault_ms later */
        FX_WARN("test fault: PUT_DONE of batch %llu held back %u ms", (unsigned long long)p->id, o->cfg.fault_ms);
        fx_timer_arm(o->r, &p->retry_timer, o->cfg.fault_ms, okv_on_retry);
        return;
    }
    fx_okv_publish(o, p);
}

static void okv_put_abort(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                          fx_arena_t *arena)
{
    fx_body_plan_ref_t b;
    fx_body_plan_ref_decode(body, h->body_len, &b, arena);
    owner_plan_t *p = okv_plan_of(o, e, b.plan_id);
    if (!p) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_WRONG_HANDLE,
                            "put_abort: plan %llu is not a prepared put plan of this client (committed or unknown)",
                            (unsigned long long)b.plan_id);
        return;
    }
    okv_plan_abort(o, p);
    fx_body_empty_t em;
    FX_CONN_REPLY(e->conn, h, empty, &em);
}

/* ---- invalidation (master -> owner) ---- */
static void okv_invalidate(fx_owner_t *o, const uint8_t *body, size_t len, fx_arena_t *arena)
{
    owner_kv_t *kv = owner_kv(o);
    fx_body_invalidate_t b;
    fx_body_invalidate_decode(body, len, &b, arena);
    for (uint32_t i = 0; i < b.keys.n && i < b.offsets.n; i++) {
        uint64_t off = b.offsets.v[i];
        owner_entry_t *en = fx_hmap_get(kv->by_offset, &off, sizeof off);
        if (!en || en->klen != b.keys.v[i].len || memcmp(en->key, b.keys.v[i].p, en->klen)) continue;
        if (en->state == OE_COMMITTED && (en->put_ms != b.put_ms.v[i] || en->put_ver != b.put_ver.v[i]))
            continue; /* a different version lives at that offset now */
        kv->invalidations++;
        fx_okv_entry_retire(o, en);
    }
}

/* ---- EXISTS: leading keys visible here, then the master for the rest ---- */
typedef struct okv_exists_ctx {
    fx_conn_t *conn;
    uint64_t req_id, local;
} okv_exists_ctx_t;

static void okv_on_exists(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                          fx_arena_t *arena)
{
    okv_exists_ctx_t *x = arg;
    fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_EXISTS, 0, 0, 0, x->req_id};
    if (fx_conn_is_open(x->conn)) {
        if (status == FLUXON_OK) {
            fx_body_count_t c;
            fx_body_count_decode(body, h->body_len, &c, arena);
            c.count += x->local;
            FX_CONN_REPLY(x->conn, &q, count, &c);
        } else {
            fx_conn_reply_error(x->conn, &q, status, "exists: master %s", fluxon_status_string(status));
        }
    }
    fx_conn_unref(x->conn);
    fx_free(x);
}

static void okv_exists(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                       fx_arena_t *arena)
{
    owner_kv_t *kv = owner_kv(o);
    fx_body_keys_t b;
    fx_body_keys_decode(body, h->body_len, &b, arena);
    for (uint32_t i = 0; i < b.keys.n; i++)
        if (!fx_okv_key_ok(b.keys.v[i])) {
            fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "exists: key %u is not a valid key", i);
            return;
        }
    uint32_t l = 0;
    while (l < b.keys.n && fx_hmap_get(kv->index, b.keys.v[l].p, b.keys.v[l].len)) l++;
    if (l == b.keys.n || o->mstate != OM_READY || !o->mconn) {
        fx_body_count_t c = {l};
        FX_CONN_REPLY(e->conn, h, count, &c);
        return;
    }
    okv_exists_ctx_t *x = fx_malloc(sizeof *x);
    if (!x) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_NOMEM, "exists: owner out of memory");
        return;
    }
    x->conn = e->conn;
    x->req_id = h->req_id;
    x->local = l;
    fx_conn_ref(e->conn);
    fx_body_keys_t rest = {{b.keys.v + l, b.keys.n - l}};
    if (FX_RPC_CALL(o->mconn, EXISTS, keys, &rest, o->cfg.master_timeout_ms, okv_on_exists, x) != FLUXON_OK)
        okv_on_exists(x, FLUXON_ERR_UNAVAILABLE, NULL, NULL, NULL);
}

/* ---- dispatch ---- */
FX_INTERNAL bool fx_owner_kv_ext_request(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h,
                                         const uint8_t *body, fx_arena_t *arena)
{
    switch (h->type) {
    case FX_MSG_PUT_START: okv_put_start(o, e, h, body, arena); return true;
    case FX_MSG_PUT_INLINE: okv_put_inline(o, e, h, body, arena); return true;
    case FX_MSG_PUT_COMMIT: okv_put_commit(o, e, h, body, arena); return true;
    case FX_MSG_PUT_ABORT: okv_put_abort(o, e, h, body, arena); return true;
    case FX_MSG_GET_START: fx_owner_get_start(o, e, h, body, arena); return true;
    case FX_MSG_HANDLE_CONSUME: {
        fx_body_handle_consume_t b;
        fx_body_handle_consume_decode(body, h->body_len, &b, arena);
        fx_owner_handle_consume(o, e, b.handle_id, b.consume);
        return true;
    }
    case FX_MSG_RELEASE: {
        fx_body_release_t b;
        fx_body_release_decode(body, h->body_len, &b, arena);
        for (uint32_t i = 0; i < b.holder_ids.n; i++)
            if (fx_okv_holder_release_id(o, e, b.holder_ids.v[i]) != FLUXON_OK)
                FX_WARN("%s released unknown holder %llu", fx_conn_desc(e->conn),
                        (unsigned long long)b.holder_ids.v[i]);
        return true;
    }
    case FX_MSG_EXISTS: okv_exists(o, e, h, body, arena); return true;
    case FX_MSG_DELETE:
    case FX_MSG_LEASE_GRANT:
    case FX_MSG_LIST: fx_owner_forward(o, e->conn, h, body); return true;
    default: return false;
    }
}

FX_INTERNAL bool fx_owner_kv_master_request(fx_owner_t *o, const fx_frame_header_t *h,
                                            const uint8_t *body, fx_arena_t *arena)
{
    if (h->type == FX_MSG_CLUSTER_INFO) {
        fx_body_count_t b;
        fx_body_count_decode(body, h->body_len, &b, arena);
        owner_kv(o)->owners_alive = (int64_t)b.count;
        return true;
    }
    if (h->type != FX_MSG_INVALIDATE) return false;
    okv_invalidate(o, body, h->body_len, arena);
    if (h->req_id) {
        fx_body_empty_t em;
        FX_CONN_REPLY(o->mconn, h, empty, &em);
    }
    return true;
}

FX_INTERNAL void fx_owner_kv_ext_closed(fx_owner_t *o, owner_ext_t *e)
{
    while (e->plans) {
        owner_plan_t *p = e->plans;
        if (p->state == OP_CLAIMING) okv_plan_unlink(p); /* put_start_reply aborts it */
        else okv_plan_abort(o, p);
    }
    while (e->handles) fx_owner_handle_free(o, e->handles, true);
    while (e->holders) fx_okv_holder_release(o, e->holders);
}

FX_INTERNAL void fx_owner_kv_master_ready(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    /* retry publishes whose outcome is unknown (T1) */
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    void *v;
    while (fx_hmap_iter_next(kv->plans, &it, NULL, NULL, &v)) {
        owner_plan_t *p = v;
        if (p->state == OP_PUBLISHING && !fx_timer_armed(&p->retry_timer)) fx_okv_publish(o, p);
    }
    okv_prewarm(o);
    if (kv->claims) okv_grant_request(o);
    fx_oev_kick(o);
}

FX_INTERNAL void fx_owner_kv_master_lost(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    kv->grant_inflight = false;
    kv->owners_alive = -1; /* unknown until the master tells again */
}

/* ---- stats ---- */
FX_INTERNAL size_t fx_owner_kv_stats_json(fx_owner_t *o, char *buf, size_t cap)
{
    owner_kv_t *kv = owner_kv(o);
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(kv->pool, &st);
    size_t puts_inflight = 0;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    void *v;
    while (fx_hmap_iter_next(kv->plans, &it, NULL, NULL, &v)) puts_inflight++;
    int n = snprintf(buf, cap,
                     "\"index_keys\":%zu,\"holders\":%zu,\"handles_open\":%zu,\"gets_inflight\":%zu,"
                     "\"puts_inflight\":%zu,\"slots_free\":%llu,\"slots_prepared\":%llu,\"slots_pending\":%llu,"
                     "\"slots_committed\":%llu,\"slots_draining\":%llu,\"slot_holder_refs\":%llu,\"grants\":%llu,"
                     "\"max_grants\":%llu,\"granted_bytes\":%llu,\"used_bytes\":%llu,"
                     "\"puts_started\":%llu,\"puts_committed\":%llu,\"puts_published\":%llu,"
                     "\"put_keys_published\":%llu,\"put_rejected\":%llu,\"put_done_retries\":%llu,\"puts_aborted\":%llu,"
                     "\"get_batches\":%llu,\"get_keys\":%llu,\"local_hits\":%llu,\"joined\":%llu,\"leaders\":%llu,"
                     "\"lookup_batches\":%llu,\"transfers\":%llu,\"transfer_keys\":%llu,\"transfer_bytes\":%llu,"
                     "\"remote_hits\":%llu,\"misses\":%llu,\"invalidations\":%llu,\"handles_opened\":%llu,"
                     "\"handles_expired\":%llu,\"grants_received\":%llu,\"get_done_stale\":%llu,"
                     "\"owners_alive\":%lld,\"lookups_skipped\":%llu",
                     fx_hmap_count(kv->index), fx_hmap_count(kv->holders), fx_hmap_count(kv->handles),
                     fx_hmap_count(kv->gets), puts_inflight, (unsigned long long)st.free,
                     (unsigned long long)st.prepared, (unsigned long long)st.pending,
                     (unsigned long long)st.committed, (unsigned long long)st.draining,
                     (unsigned long long)st.holder_refs, (unsigned long long)st.grants,
                     (unsigned long long)kv->max_grants, (unsigned long long)st.granted_bytes,
                     (unsigned long long)st.used_bytes, (unsigned long long)kv->puts_started,
                     (unsigned long long)kv->puts_committed, (unsigned long long)kv->puts_published,
                     (unsigned long long)kv->put_keys_published, (unsigned long long)kv->put_rejected,
                     (unsigned long long)kv->put_done_retries, (unsigned long long)kv->puts_aborted,
                     (unsigned long long)kv->get_batches, (unsigned long long)kv->get_keys,
                     (unsigned long long)kv->local_hits, (unsigned long long)kv->joined,
                     (unsigned long long)kv->leaders, (unsigned long long)kv->lookup_batches,
                     (unsigned long long)kv->transfers, (unsigned long long)kv->transfer_keys,
                     (unsigned long long)kv->transfer_bytes, (unsigned long long)kv->remote_hits,
                     (unsigned long long)kv->misses, (unsigned long long)kv->invalidations,
                     (unsigned long long)kv->handles_opened, (unsigned long long)kv->handles_expired,
                     (unsigned long long)kv->grants_received, (unsigned long long)kv->get_done_stale,
                     (long long)kv->owners_alive, (unsigned long long)kv->lookups_skipped);
    if (n < 0) return 0;
    size_t len = FX_MIN((size_t)n, cap ? cap - 1 : 0);
    if (len + 1 < cap) { /* placement and get modes (owner_place.c, owner_get.c) */
        int m = snprintf(buf + len, cap - len,
                         ",\"place_requests\":%llu,\"placed_remote\":%llu,\"placed_local\":%llu,"
                         "\"place_fallbacks\":%llu,\"pushed_keys\":%llu,\"pushed_bytes\":%llu,\"revokes_sent\":%llu,"
                         "\"temp_copies\":%llu,\"reuse_hits\":%llu,\"self_copies\":%llu",
                         (unsigned long long)kv->place_requests, (unsigned long long)kv->placed_remote,
                         (unsigned long long)kv->placed_local, (unsigned long long)kv->place_fallbacks,
                         (unsigned long long)kv->pushed_keys, (unsigned long long)kv->pushed_bytes,
                         (unsigned long long)kv->revokes_sent, (unsigned long long)kv->temp_copies,
                         (unsigned long long)kv->reuse_hits, (unsigned long long)kv->self_copies);
        if (m > 0) len = FX_MIN(len + (size_t)m, cap - 1);
    }
    if (len + 2 < cap) {
        buf[len++] = ',';
        buf[len] = 0;
        len += fx_oev_stats_json(o, buf + len, cap - len);
    }
    return len;
}

/* ---- lifecycle ---- */
FX_INTERNAL int fx_owner_kv_init(fx_owner_t *o)
{
    owner_kv_t *kv = fx_calloc(1, sizeof *kv);
    if (!kv) return FLUXON_ERR_NOMEM;
    o->kv = kv;
    kv->owner = o;
    fx_slot_pool_config_t pc;
    fx_slot_pool_config_init(&pc);
    pc.grant_bytes = o->cfg.grant_bytes;
    pc.claim_timeout_ms = o->cfg.claim_timeout_ms;
    if (pc.claim_timeout_ms <= pc.soft_wait_ms) pc.claim_timeout_ms = pc.soft_wait_ms + 1;
    uint64_t fit = (fx_segment_len(o->seg) - 4096) / o->cfg.grant_bytes;
    kv->max_grants = fit;
    kv->owners_alive = -1;
    if (o->cfg.has_expected) {
        uint64_t eg = 0;
        if (fx_slot_pool_expected_grants(o->cfg.grant_bytes, o->cfg.expected_value_len,
                                         o->cfg.expected_payload_bytes, &eg) == FLUXON_OK)
            kv->max_grants = FX_MIN(eg, fit);
    }
    pc.max_grants = kv->max_grants;
    fx_oev_init(o);
    int rc = fx_slot_pool_create(&pc, &kv->pool);
    if (rc != FLUXON_OK) goto err;
    rc = FLUXON_ERR_NOMEM;
    if (fx_hmap_create(1024, &kv->index) || fx_hmap_create(1024, &kv->by_offset) ||
        fx_hmap_create(64, &kv->inflight) || fx_hmap_create(64, &kv->plans) ||
        fx_hmap_create(1024, &kv->holders) || fx_hmap_create(64, &kv->handles) ||
        fx_hmap_create(64, &kv->gets))
        goto err;
    rc = fx_ucx_create(NULL, &kv->ucx);
    if (rc != FLUXON_OK) goto err;
    {
        const char *mech = getenv("FLUXON_UCX_MECH"); /* rma | am: override the measured choice */
        if (mech && !strcmp(mech, "rma")) fx_ucx_set_mech(kv->ucx, FX_UCX_MECH_RMA);
        if (mech && !strcmp(mech, "am")) fx_ucx_set_mech(kv->ucx, FX_UCX_MECH_AM);
    }
    rc = fx_ucx_mem_map(kv->ucx, fx_segment_base(o->seg), fx_segment_len(o->seg), &kv->mem);
    if (rc != FLUXON_OK) goto err;
    rc = fx_ucx_rkey_pack(kv->mem, &kv->rkey, &kv->rkey_len);
    if (rc != FLUXON_OK) goto err;
    rc = fx_ucx_worker_address(kv->ucx, &kv->address, &kv->address_len);
    if (rc != FLUXON_OK) goto err;
    rc = fx_reactor_watch_fd(o->r, fx_ucx_efd(kv->ucx), okv_ucx_event, kv, &kv->ucx_watch);
    if (rc != FLUXON_OK) goto err;
    fx_reactor_set_idle_hook(o->r, okv_ucx_idle, kv);
    fx_timer_init(&kv->ucx_timer);
    fx_timer_arm(o->r, &kv->ucx_timer, 100, okv_ucx_tick);
    return FLUXON_OK;
err:
    FX_ERROR("owner KV state could not be set up: %s", fluxon_status_string(rc));
    fx_owner_kv_fini(o);
    return rc;
}

/* Stops watching the UCX fd so the reactor can drain (its poll would never complete). */
FX_INTERNAL void fx_owner_kv_shutdown(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    if (!kv) return;
    fx_timer_disarm(o->r, &kv->ucx_timer);
    fx_reactor_set_idle_hook(o->r, NULL, NULL);
    if (kv->ucx_watch) fx_reactor_unwatch(o->r, kv->ucx_watch);
    kv->ucx_watch = NULL;
}

FX_INTERNAL void fx_owner_kv_fini(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    if (!kv) return;
    fx_timer_disarm(o->r, &kv->ucx_timer);
    fx_reactor_set_idle_hook(o->r, NULL, NULL);
    if (kv->ucx_watch) fx_reactor_unwatch(o->r, kv->ucx_watch);
    kv->ucx_watch = NULL;
    kv->closing = true;
    fx_oev_fini(o);
    if (kv->pool) okv_claims_serve(o, false); /* queued claims fail: their gets miss */
    /* transfers in flight complete (CANCELLED) inside destroy, while the state exists */
    for (size_t i = 0; i < kv->n_peers; i++) fx_ucx_peer_close(kv->peers[i].peer);
    kv->n_peers = 0;
    if (kv->rkey) fx_ucx_buf_free(kv->rkey);
    kv->rkey = NULL;
    fx_ucx_mem_unmap(kv->mem);
    kv->mem = NULL;
    fx_ucx_destroy(kv->ucx);
    kv->ucx = NULL;
    fx_owner_gets_fail_all(o);
    if (kv->handles) {
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        void *hv;
        while (fx_hmap_iter_next(kv->handles, &it, NULL, NULL, &hv)) fx_owner_handle_free(o, hv, false);
    }
    /* plans still publishing, entries, holders: free the bookkeeping (the process or
     * node is going away; the segment goes with it) */
    void *v;
    if (kv->plans) {
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        const char *k;
        size_t kl;
        while (fx_hmap_iter_next(kv->plans, &it, &k, &kl, &v)) {
            owner_plan_t *p = v;
            fx_timer_disarm(o->r, &p->retry_timer);
            fx_hmap_del(kv->plans, k, kl, NULL);
            p->ext = NULL;
            if (p->reply_conn) fx_conn_unref(p->reply_conn);
            p->reply_conn = NULL;
            for (size_t i = 0; i < p->n; i++) fx_free(p->keys[i]);
            fx_free(p->keys);
            fx_free(p->klens);
            fx_free(p->status);
            fx_free(p->slots);
            fx_free(p->entries);
            fx_free(p->group_lens);
            fx_free(p);
        }
    }
    if (kv->by_offset) {
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        const char *k;
        size_t kl;
        while (fx_hmap_iter_next(kv->by_offset, &it, &k, &kl, &v)) {
            owner_entry_t *en = v;
            fx_hmap_del(kv->by_offset, k, kl, NULL);
            fx_oev_forget(o, en);
            fx_free(en->key);
            fx_free(en);
        }
    }
    if (kv->holders) {
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        const char *k;
        size_t kl;
        while (fx_hmap_iter_next(kv->holders, &it, &k, &kl, &v)) {
            fx_hmap_del(kv->holders, k, kl, NULL);
            fx_free(v);
        }
    }
    while (kv->claims) {
        owner_claim_t *c = kv->claims;
        kv->claims = c->next;
        fx_free(c);
    }
    fx_free(kv->peers);
    fx_free(kv->grant_ids);
    fx_free(kv->grant_offsets);
    fx_hmap_destroy(kv->index);
    fx_hmap_destroy(kv->by_offset);
    fx_hmap_destroy(kv->inflight);
    fx_hmap_destroy(kv->plans);
    fx_hmap_destroy(kv->holders);
    fx_hmap_destroy(kv->handles);
    fx_hmap_destroy(kv->gets);
    fx_slot_pool_destroy(kv->pool);
    fx_free(kv);
    o->kv = NULL;
}

#undef OKV_PUT_RETRY_MAX_MS
