/* slot_pool_stats.c — what the slot pool shows: totals and counters, per-grant figures,
 * the JSON document, and fx_slot_pool_check, the full invariant walk tests run after every
 * step (see slot_pool.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "log.h"
#include "slot_pool_int.h"

/* ---- observability ------------------------------------------------------------------------ */

FX_INTERNAL void fx_slot_pool_stats(const fx_slot_pool_t *pool, fx_slot_pool_stats_t *st)
{
    if (!pool || !st) return;
    *st = (fx_slot_pool_stats_t){
        .grants = pool->ngrants, .classes = pool->nclasses, .slots = pool->nslots,
        .free = pool->n[FX_SLOT_FREE], .prepared = pool->n[FX_SLOT_PREPARED],
        .pending = pool->n[FX_SLOT_PENDING], .committed = pool->n[FX_SLOT_COMMITTED],
        .draining = pool->draining, .holder_refs = pool->holder_refs,
        .granted_bytes = pool->granted_bytes,
        .slot_bytes = pool->slot_bytes, .used_bytes = pool->used_bytes,
        .waiters = pool->nwaiters, .claims = pool->claims, .frees = pool->frees,
        .claim_no_space = pool->claim_no_space, .waits_queued = pool->waits_queued,
        .waits_served = pool->waits_served, .waits_timed_out = pool->waits_timed_out,
        .waits_cancelled = pool->waits_cancelled, .grants_added = pool->grants_added,
        .grants_removed = pool->grants_removed, .retiring_grants = pool->retiring};
}

FX_INTERNAL int fx_slot_pool_grant_stats(const fx_slot_pool_t *pool, uint64_t grant_id,
                                         fx_slot_grant_stats_t *st)
{
    if (!pool || !st || grant_id == 0) return FLUXON_ERR_INVALID_ARGUMENT;
    const sp_grant_t *g = fx_u64map_get(&pool->grants_by_id, grant_id);
    if (!g) return FLUXON_ERR_NOT_FOUND;
    *st = (fx_slot_grant_stats_t){g->id, g->offset, g->slot_size, g->nslots,
                                  g->n[FX_SLOT_FREE], g->n[FX_SLOT_PREPARED],
                                  g->n[FX_SLOT_PENDING], g->n[FX_SLOT_COMMITTED], g->retiring, g->bytes};
    return FLUXON_OK;
}

typedef struct sp_json {
    char *buf;
    size_t cap, len;
} sp_json_t;

/* Appends while there is room and keeps counting past it, so the caller learns the size. */
static void sp_json_add(sp_json_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sp_json_add(sp_json_t *j, const char *fmt, ...)
{
    size_t room = j->len < j->cap ? j->cap - j->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? j->buf + j->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) j->len += (size_t)n;
}

/* {"name":value,...} from parallel arrays (names are JSON-safe literals). */
static void sp_json_obj(sp_json_t *j, const char *const *names, const uint64_t *vals, size_t n)
{
    sp_json_add(j, "{");
    for (size_t i = 0; i < n; i++)
        sp_json_add(j, "%s\"%s\":%" PRIu64, i ? "," : "", names[i], vals[i]);
    sp_json_add(j, "}");
}

FX_INTERNAL int fx_slot_pool_stats_json(const fx_slot_pool_t *pool, char *buf, size_t cap,
                                        size_t *len_p)
{
    if (!pool || !len_p || (!buf && cap)) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(pool, &st);
    sp_json_t j = {buf, cap, 0};
    static const char *const top[] = {
        "grant_bytes", "max_grants", "grants", "slots", "free", "prepared", "pending",
        "committed", "draining", "holder_refs", "granted_bytes", "slot_bytes", "used_bytes",
        "waiters"};
    const uint64_t topv[] = {
        pool->cfg.grant_bytes, pool->cfg.max_grants, st.grants, st.slots, st.free,
        st.prepared, st.pending, st.committed, st.draining, st.holder_refs,
        st.granted_bytes, st.slot_bytes, st.used_bytes, st.waiters};
    static const char *const cnt[] = {
        "claims", "frees", "claim_no_space", "waits_queued", "waits_served",
        "waits_timed_out", "waits_cancelled", "grants_added", "grants_removed"};
    const uint64_t cntv[] = {
        st.claims, st.frees, st.claim_no_space, st.waits_queued, st.waits_served,
        st.waits_timed_out, st.waits_cancelled, st.grants_added, st.grants_removed};
    static const char *const cls[] = {"slot_size", "grants", "free", "waiters"};
    static const char *const gr[] = {"grant_id", "offset", "slot_size", "slots",
                                     "free", "prepared", "pending", "committed"};
    sp_json_add(&j, "{\"totals\":");
    sp_json_obj(&j, top, topv, FX_ARRAY_LEN(top));
    sp_json_add(&j, ",\"counters\":");
    sp_json_obj(&j, cnt, cntv, FX_ARRAY_LEN(cnt));
    sp_json_add(&j, ",\"classes\":[");
    for (size_t i = 0; i < pool->nclasses; i++) {
        const sp_class_t *c = pool->classes[i];
        const uint64_t v[] = {c->slot_size, c->grants, c->nfree, c->nwait};
        sp_json_add(&j, "%s", i ? "," : "");
        sp_json_obj(&j, cls, v, FX_ARRAY_LEN(cls));
    }
    sp_json_add(&j, "],\"grants\":[");
    for (const sp_grant_t *g = pool->grant_head; g; g = g->next) {
        const uint64_t v[] = {g->id, g->offset, g->slot_size, g->nslots, g->n[FX_SLOT_FREE],
                              g->n[FX_SLOT_PREPARED], g->n[FX_SLOT_PENDING],
                              g->n[FX_SLOT_COMMITTED]};
        sp_json_add(&j, "%s", g == pool->grant_head ? "" : ",");
        sp_json_obj(&j, gr, v, FX_ARRAY_LEN(gr));
    }
    sp_json_add(&j, "]}");
    *len_p = j.len;
    return j.len < cap ? FLUXON_OK : FLUXON_ERR_INVALID_ARGUMENT;
}

#define SP_CHECK(cond, ...)                                                          \
    do {                                                                             \
        if (!(cond)) {                                                               \
            FX_ERROR("slot pool check failed: " __VA_ARGS__);                        \
            return FLUXON_ERR_INTERNAL;                                              \
        }                                                                            \
    } while (0)

FX_INTERNAL int fx_slot_pool_check(fx_slot_pool_t *pool)
{
    if (!pool) return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t epoch = ++pool->check_epoch;
    uint64_t tot[FX_SLOT_NSTATES] = {0}, ngrants = 0, nslots = 0, slot_bytes = 0, used = 0;
    uint64_t holders = 0, draining = 0, on_lists = 0, nwait = 0, gw = 0, dl = 0, last = 0;
    uint64_t retiring = 0, retiring_free = 0, idle = 0;
    for (size_t i = 0; i < pool->nclasses; i++) {
        sp_class_t *c = pool->classes[i];
        uint64_t n = 0, w = 0;
        for (sp_slot_t *s = c->free_head, *prev = NULL; s; prev = s, s = s->fnext, n++) {
            SP_CHECK(s->check_mark != epoch, "grant %" PRIu64 " slot %u twice on free lists",
                     s->grant->id, s->index);
            s->check_mark = epoch;
            SP_CHECK(s->on_free && s->state == FX_SLOT_FREE && s->grant->cls == c &&
                     s->fprev == prev, "bad free entry in class %" PRIu64, c->slot_size);
        }
        for (sp_waiter_t *x = c->wait_head; x; x = x->next, w++)
            SP_CHECK(x->where == SP_W_QUEUED && x->cls == c, "bad waiter %" PRIu64, x->id);
        SP_CHECK(n == c->nfree && w == c->nwait, "class %" PRIu64 " counts", c->slot_size);
        SP_CHECK(n == 0 || w == 0, "class %" PRIu64 " has free slots and waiters", c->slot_size);
        on_lists += n;
        nwait += w;
    }
    for (sp_grant_t *g = pool->grant_head; g; g = g->next) {
        uint64_t n[FX_SLOT_NSTATES] = {0};
        SP_CHECK(fx_u64map_get(&pool->grants_by_id, g->id) == g, "grant %" PRIu64 " map", g->id);
        for (uint64_t i = 0; i < g->nslots; i++) {
            sp_slot_t *s = &g->slots[i];
            SP_CHECK(s->state < FX_SLOT_NSTATES && s->grant == g && s->index == i,
                     "grant %" PRIu64 " slot %" PRIu64 " identity", g->id, i);
            n[s->state]++;
            holders += s->holder_refs;
            used += s->state != FX_SLOT_FREE ? g->slot_size : 0;
            draining += sp_is_draining(s);
            SP_CHECK(!sp_is_draining(s) || s->holder_refs > 0,
                     "slot %" PRIu64 " draining without holders", i);
            retiring_free += g->retiring && s->state == FX_SLOT_FREE;
            SP_CHECK(s->on_free == (s->state == FX_SLOT_FREE && !g->retiring) &&
                     (!s->on_free || s->check_mark == epoch),
                     "grant %" PRIu64 " slot %" PRIu64 " free bit/list mismatch", g->id, i);
            SP_CHECK((s->state == FX_SLOT_COMMITTED || !s->route_live) &&
                     (s->state == FX_SLOT_PENDING || !s->aborted),
                     "slot %" PRIu64 " flags in state %d", i, s->state);
            SP_CHECK(s->state >= FX_SLOT_PENDING || s->holder_refs == 0,
                     "slot %" PRIu64 " pinned while unreadable", i);
        }
        idle += n[FX_SLOT_FREE] == g->nslots;
        for (int k = 0; k < FX_SLOT_NSTATES; k++) {
            SP_CHECK(n[k] == g->n[k], "grant %" PRIu64 " state %d: %" PRIu64 " != %" PRIu64,
                     g->id, k, n[k], g->n[k]);
            tot[k] += n[k];
        }
        ngrants++;
        retiring += g->retiring;
        nslots += g->nslots;
        slot_bytes += g->nslots * g->slot_size;
    }
    for (int k = 0; k < FX_SLOT_NSTATES; k++)
        SP_CHECK(tot[k] == pool->n[k], "state %d: %" PRIu64 " != %" PRIu64, k, tot[k],
                 pool->n[k]);
    SP_CHECK(retiring == pool->retiring && retiring_free == pool->retiring_free,
             "retiring grants %" PRIu64 " free %" PRIu64, retiring, retiring_free);
    SP_CHECK(on_lists + retiring_free == pool->n[FX_SLOT_FREE], "free lists hold %" PRIu64, on_lists);
    SP_CHECK(ngrants == pool->ngrants && ngrants == pool->grants_by_id.count, "grant count");
    SP_CHECK(idle == pool->idle_grants, "idle grants: %" PRIu64 " != %" PRIu64, idle, pool->idle_grants);
    SP_CHECK(nslots == pool->nslots && slot_bytes == pool->slot_bytes, "slot totals");
    SP_CHECK(used == pool->used_bytes && holders == pool->holder_refs &&
             draining == pool->draining, "used %" PRIu64 " holders %" PRIu64
             " draining %" PRIu64 " disagree with counters", used, holders, draining);
    for (sp_waiter_t *x = pool->gw_head; x; x = x->gnext, gw++) {
        SP_CHECK(x->deadline_ms >= last, "waiter %" PRIu64 " out of deadline order", x->id);
        last = x->deadline_ms;
    }
    for (sp_waiter_t *x = pool->dl_head; x; x = x->next) dl++;
    SP_CHECK(gw == nwait && gw == pool->nwaiters, "waiters %" PRIu64, gw);
    SP_CHECK(gw + dl == pool->waiters_by_id.count, "waiter map %zu", pool->waiters_by_id.count);
    return FLUXON_OK;
}

#undef SP_CHECK
