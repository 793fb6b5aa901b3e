/* owner_place.c — placed puts on the writer's owner (ARCHITECTURE §7):
 *   put_start: local staging slots claimed → PUT_PLACE to the master (one per plan, G8)
 *              → the master's target, put_token and per-key ranges → answer the external;
 *   commit:    values local-visible at once (V1, put.c) → ONE UCX PUT batch from
 *              the staging slots into the target's ranges → PUT_DONE with the put_token
 *              → the staging copies are dropped (the route names the target's ranges).
 * A target equal to this owner means the staging slots ARE the values (only the
 * master's in-flight record differs from a local-first put). Every failure before the
 * route exists falls back to publishing the staging copy: no PUT_PLACE answer (the
 * master's record then expires by its TTL), a failed push (PUT_REVOKE first), a
 * put_token the master no longer knows (fx_oplace_stale). Reactor thread only. */
#include <stdio.h>

#include "groups.h"
#include "log.h"
#include "owner_elsewhere.h"
#include "owner_link.h"
#include "owner_peers.h"
#include "owner_place.h"

typedef struct oplace {
    fx_oplace_ops_t ops;
    uint64_t place_requests, placed_remote, placed_local, place_fallbacks, pushed_keys, pushed_bytes, revokes_sent;
    uint64_t link_epoch; /* master connections lost so far (fx_oplace_master_lost) */
    uint64_t push_master_lost;
    fx_hist_t push_latency;
} oplace_t;

typedef struct oplace_ctx {
    fx_owner_t *o;
    uint64_t plan_id;
} oplace_ctx_t;

FX_INTERNAL void fx_oplace_plan_free(owner_plan_t *p)
{
    owner_placement_t *pl = &p->place;
    fx_free(pl->preferred);
    fx_free(pl->target_addr);
    fx_free(pl->target_rkey);
    fx_free(pl->target_offsets);
    pl->preferred = NULL;
    pl->target_addr = pl->target_rkey = NULL;
    pl->target_offsets = NULL;
}

FX_INTERNAL int fx_oplace_init(fx_owner_t *o, const fx_oplace_ops_t *ops)
{
    oplace_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    s->ops = *ops;
    o->place = s;
    return FLUXON_OK;
}

FX_INTERNAL void fx_oplace_fini(fx_owner_t *o)
{
    fx_free(o->place);
    o->place = NULL;
}

FX_INTERNAL uint64_t fx_oplace_offset(const owner_plan_t *p, size_t i)
{
    return p->place.target_remote ? p->place.target_offsets[i] : p->slots[i].offset;
}

FX_INTERNAL void fx_oplace_stale(fx_owner_t *o, owner_plan_t *p)
{
    FX_WARN("put_done batch %llu: put_token %llu is stale at the master; publishing the local copy",
            (unsigned long long)p->batch_id, (unsigned long long)p->place.put_token);
    p->place.put_token = 0;
    p->place.target_remote = false;
    o->place->place_fallbacks++;
}

static owner_plan_t *oplace_plan(oplace_ctx_t *c)
{
    owner_plan_t *p = c->o->place->ops.find(c->o, c->plan_id);
    fx_free(c);
    return p;
}

static void oplace_revoke(fx_owner_t *o, owner_plan_t *p, bool abandoned)
{
    oplace_t *kv = o->place;
    fx_conn_t *mc = fx_olink_conn(o);
    if (p->place.put_token && mc) { /* one-way: the TTL covers a lost one */
        fx_body_put_revoke_t b = {p->place.put_token, abandoned ? 1 : 0};
        if (FX_CONN_SEND(mc, FX_MSG_PUT_REVOKE, 0, 0, 0, put_revoke, &b) == FLUXON_OK) kv->revokes_sent++;
    }
    p->place.put_token = 0;
    p->place.target_remote = false;
}

FX_INTERNAL void fx_oplace_revoke(fx_owner_t *o, owner_plan_t *p) { oplace_revoke(o, p, false); }

/* ---- put_start: ask the master where the batch goes ---- */
static void oplace_on_place(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                            fx_arena_t *arena)
{
    oplace_ctx_t *c = arg;
    fx_owner_t *o = c->o;
    oplace_t *kv = o->place;
    owner_plan_t *p = oplace_plan(c);
    if (!p || p->state != OP_CLAIMING) return;
    size_t m = 0;
    for (size_t i = 0; i < p->n; i++) m += p->status[i] == FLUXON_OK;
    fx_body_put_place_ack_t a;
    memset(&a, 0, sizeof a);
    int rc = status;
    if (rc == FLUXON_OK) rc = fx_body_put_place_ack_decode(body, h->body_len, &a, arena);
    if (rc == FLUXON_OK && (a.statuses.n != m || a.offsets.n != m)) rc = FLUXON_ERR_PROTOCOL;
    bool remote = rc == FLUXON_OK && a.put_token &&
                  !(fx_str_eq(a.target_node_id, o->cfg.node_id) && a.target_generation == o->generation);
    if (remote) {
        p->place.target_offsets = fx_calloc(p->n, sizeof *p->place.target_offsets);
        p->place.target_addr = fx_malloc(a.target_address.len + 1);
        p->place.target_rkey = fx_malloc(a.target_rkey.len + 1);
        if (!p->place.target_offsets || !p->place.target_addr || !p->place.target_rkey) rc = FLUXON_ERR_NOMEM;
    }
    if (rc != FLUXON_OK) { /* no placement: publish locally (a record there expires by TTL) */
        FX_WARN("put_place of %zu keys failed (%s); the batch is written to this owner", m, fluxon_status_string(rc));
        fx_oplace_plan_free(p);
        kv->place_fallbacks++;
        kv->ops.placed(o, p);
        return;
    }
    for (size_t i = 0, k = 0; i < p->n; i++) {
        if (p->status[i] != FLUXON_OK) continue;
        int ks = (int)(int64_t)a.statuses.v[k];
        if (ks != FLUXON_OK) { /* rejected by the master (in flight or exists elsewhere) */
            p->status[i] = ks;
            fx_slot_pool_release_prepared(fx_ostore_pool(o), &p->slots[i]);
        } else if (remote) {
            p->place.target_offsets[i] = a.offsets.v[k];
        }
        k++;
    }
    p->place.put_token = a.put_token;
    /* the master frees the ranges TTL after it got PUT_PLACE (later than we sent it):
     * the bytes must have landed well before that */
    p->place.push_deadline_ms = p->place.place_sent_ms + (uint64_t)a.ttl_ms * 3 / 4;
    if (remote) {
        fx_str_copy(a.target_node_id, p->place.target_id, sizeof p->place.target_id);
        p->place.target_gen = a.target_generation;
        p->place.target_base = a.target_base;
        memcpy(p->place.target_addr, a.target_address.p, a.target_address.len);
        memcpy(p->place.target_rkey, a.target_rkey.p, a.target_rkey.len);
        p->place.target_addr_len = a.target_address.len;
        p->place.target_rkey_len = a.target_rkey.len;
        p->place.target_remote = true;
        kv->placed_remote++;
    } else if (p->place.put_token) {
        kv->placed_local++;
    }
    kv->ops.placed(o, p);
}

FX_INTERNAL bool fx_oplace_start(fx_owner_t *o, owner_plan_t *p)
{
    oplace_t *kv = o->place;
    if (!(p->flags & (FX_PUT_PLACE | FX_PUT_WRITE_THROUGH)) || !p->ext) return false;
    fx_oelse_off(o, "a placed or write-through put"); /* issue 38: its copies are not recorded */
    size_t m = 0, ng = 0;
    for (size_t i = 0; i < p->n; i++) m += p->status[i] == FLUXON_OK;
    fx_conn_t *mc = fx_olink_conn(o);
    if (!m || !mc) return false;
    fx_str_t *keys = fx_calloc(m, sizeof *keys);
    uint64_t *groups = fx_calloc(p->n_groups ? p->n_groups : 1, sizeof *groups);
    oplace_ctx_t *c = fx_malloc(sizeof *c);
    bool sent = false;
    if (keys && groups && c) {
        /* groups are all-or-none after the local checks; send the accepted ones */
        for (size_t i = 0, k = 0; i < p->n; i++)
            if (p->status[i] == FLUXON_OK) keys[k++] = (fx_str_t){p->keys[i], p->klens[i]};
        fx_group_iter_t it = fx_group_iter(p->group_lens, p->n_groups, p->n);
        while (p->n_groups && fx_group_next(&it))
            if (p->status[it.start] == FLUXON_OK) groups[ng++] = it.len;
        fx_body_put_place_t b = {{keys, (uint32_t)m}, p->value_len, p->flags, {groups, (uint32_t)ng},
                                 fx_str_c(p->place.preferred)};
        *c = (oplace_ctx_t){o, p->id};
        uint64_t now = fx_now_ms();
        p->place.place_sent_ms = now;
        p->place.link_epoch = kv->link_epoch;
        /* the master's answer is waited for no longer than the caller waits for this
         * put_start (answer_by_ms, below its timeout_ms): a master that does not answer in
         * time leaves the batch on this owner (oplace_on_place), answered before the caller
         * gives up. Before, master_timeout_ms (5 s) outlasted a caller's timeout_ms of 3 s:
         * the caller got FLUXON_ERR_TIMEOUT and nothing was stored */
        uint64_t wait = o->cfg.master_timeout_ms;
        if (p->answer_by_ms) wait = FX_MIN(wait, p->answer_by_ms > now ? p->answer_by_ms - now : 1);
        sent = FX_RPC_CALL(mc, PUT_PLACE, put_place, &b, (uint32_t)FX_MAX(wait, 1u), oplace_on_place, c) ==
               FLUXON_OK;
    }
    if (!sent) fx_free(c);
    fx_free(keys);
    fx_free(groups);
    if (sent) kv->place_requests++;
    return sent;
}

/* ---- after commit: push the values to the target ---- */
typedef struct oplace_push {
    oplace_ctx_t *c;
    fx_ucx_range_t *ranges;
    size_t n;
    bool inject_failure;
    uint64_t t0_ns; /* the push started (fx_now_ns) */
} oplace_push_t;

static void oplace_on_pushed(void *arg, int status)
{
    oplace_push_t *x = arg;
    fx_owner_t *o = x->c->o;
    oplace_t *kv = o->place;
    if (x->inject_failure && status == FLUXON_OK) status = FLUXON_ERR_INTERNAL;
    fx_hist_observe(&kv->push_latency, fx_now_ns() - x->t0_ns);
    size_t n = x->n;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += x->ranges[i].len;
    fx_free(x->ranges);
    owner_plan_t *p = oplace_plan(x->c);
    fx_free(x);
    if (!p || p->state != OP_PUBLISHING) return;
    p->place.pushing = false;
    if (status == FLUXON_OK) {
        p->place.pushed = true;
        kv->pushed_keys += n;
        kv->pushed_bytes += bytes;
    } else {
        FX_WARN("pushing %zu values to owner %s failed (%s); revoking the placement and publishing them here", n,
                p->place.target_id, fluxon_status_string(status));
        /* W4: a failed or timed-out push may still land (UCX may hold its requests, or the
         * target's worker has yet to read them): the master keeps the ranges until the TTL */
        oplace_revoke(o, p, true);
        kv->place_fallbacks++;
    }
    kv->ops.pushed(o, p);
}

FX_INTERNAL bool fx_oplace_before_publish(fx_owner_t *o, owner_plan_t *p)
{
    oplace_t *kv = o->place;
    if (!p->place.target_remote || p->place.pushed) return false;
    if (p->place.pushing) return true;
    size_t m = 0;
    for (size_t i = 0; i < p->n; i++) m += p->status[i] == FLUXON_OK;
    if (!m) return false;
    uint64_t now = fx_now_ms();
    if (p->place.link_epoch != kv->link_epoch) {
        /* the master that placed it may be gone (issue 17): a new one does not know these
         * ranges and may hand them out again, so never start writing into them */
        FX_WARN("put of %zu values: the master connection was lost since its placement; publishing them here "
                "instead", m);
        fx_oplace_revoke(o, p);
        kv->place_fallbacks++;
        kv->push_master_lost++;
        return false;
    }
    if (now >= p->place.push_deadline_ms) { /* too late to write into the ranges safely */
        FX_WARN("put of %zu values: committed %llu ms after its placement, past 3/4 of the in-flight TTL; "
                "publishing them here instead", m, (unsigned long long)(now - p->place.place_sent_ms));
        fx_oplace_revoke(o, p);
        kv->place_fallbacks++;
        return false;
    }
    fx_ucx_peer_t *peer = fx_opeers_get(o, fx_str_c(p->place.target_id), p->place.target_gen,
                                      (fx_str_t){(const char *)p->place.target_addr, p->place.target_addr_len},
                                      (fx_str_t){(const char *)p->place.target_rkey, p->place.target_rkey_len}, p->place.target_base);
    oplace_push_t *x = fx_calloc(1, sizeof *x);
    int rc = FLUXON_ERR_NOMEM;
    if (x) {
        x->t0_ns = fx_now_ns();
        x->c = fx_malloc(sizeof *x->c);
        x->ranges = fx_calloc(m, sizeof *x->ranges);
    }
    if (x && x->c && x->ranges) {
        uint8_t *base = fx_segment_base(o->seg);
        for (size_t i = 0; i < p->n; i++)
            if (p->status[i] == FLUXON_OK)
                x->ranges[x->n++] = (fx_ucx_range_t){base + p->slots[i].offset, p->place.target_offsets[i], p->value_len};
        *x->c = (oplace_ctx_t){o, p->id};
        /* bounded by the placement's deadline (a timeout fails the push, never lets it
         * land after the master may have reused the ranges) */
        fx_ucx_set_timeout_ms(fx_opeers_ucx(o), (uint32_t)FX_MIN(p->place.push_deadline_ms - now, (uint64_t)FX_UCX_DEFAULT_TIMEOUT_MS));
        rc = fx_opeers_push(o, p->place.target_id, peer, x->ranges, x->n, oplace_on_pushed, x);
        fx_ucx_set_timeout_ms(fx_opeers_ucx(o), 0);
        if (rc == FLUXON_OK && o->cfg.fail_transfers) { /* test-only: fail it afterwards */
            o->cfg.fail_transfers--;
            x->inject_failure = true;
        }
    }
    if (rc == FLUXON_OK) {
        p->place.pushing = true;
        return true;
    }
    if (x) {
        fx_free(x->c);
        fx_free(x->ranges);
        fx_free(x);
    }
    FX_WARN("cannot push %zu values to owner %s (%s); revoking the placement and publishing them here", m,
            p->place.target_id, fluxon_status_string(rc));
    fx_oplace_revoke(o, p);
    kv->place_fallbacks++;
    return false; /* publish the local copy now */
}

FX_INTERNAL void fx_oplace_master_lost(fx_owner_t *o) { o->place->link_epoch++; }

FX_INTERNAL void fx_oplace_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    oplace_t *kv = o->place;
    m->place_requests = kv->place_requests;
    m->placed_remote = kv->placed_remote;
    m->placed_local = kv->placed_local;
    m->place_fallbacks = kv->place_fallbacks;
    m->pushed_keys = kv->pushed_keys;
    m->pushed_bytes = kv->pushed_bytes;
    m->revokes_sent = kv->revokes_sent;
    m->push_master_lost = kv->push_master_lost;
    m->push_latency = kv->push_latency;
}
