/* slot_pool.c — the owner's local reserve slot pool (see slot_pool.h). Slot records live
 * in per-grant arrays that never move; each size class keeps an intrusive FIFO free list
 * and a FIFO of waiters, so claim and release are O(1) and a freed slot is reused last. */
#include "slot_pool.h"

#include <inttypes.h>
#include <stdio.h>

#include "log.h"

/* Intrusive doubly linked lists: h/t head and tail, P/N the link member names. */
#define SP_APPEND(h, t, n, P, N)                                                    \
    do {                                                                            \
        (n)->N = NULL;                                                              \
        (n)->P = (t);                                                               \
        if (t) (t)->N = (n); else (h) = (n);                                        \
        (t) = (n);                                                                  \
    } while (0)
#define SP_UNLINK(h, t, n, P, N)                                                    \
    do {                                                                            \
        if ((n)->P) (n)->P->N = (n)->N; else (h) = (n)->N;                          \
        if ((n)->N) (n)->N->P = (n)->P; else (t) = (n)->P;                          \
        (n)->P = (n)->N = NULL;                                                     \
    } while (0)

#include "slot_pool_int.h"

/* ---- sizing ----------------------------------------------------------------------------- */

FX_INTERNAL uint64_t fx_slot_size_for(uint64_t value_len)
{
    if (value_len == 0 || value_len > UINT64_MAX - FX_SLOT_PAGE) return 0;
    return FX_ALIGN_UP(FX_MAX(value_len, (uint64_t)FX_SLOT_PAGE), (uint64_t)FX_SLOT_PAGE);
}

FX_INTERNAL uint64_t fx_slots_per_grant(uint64_t grant_bytes, uint64_t slot_size)
{
    return slot_size ? grant_bytes / slot_size : 0;
}

FX_INTERNAL int fx_slot_pool_expected_grants(uint64_t grant_bytes, uint64_t value_len,
                                             uint64_t payload_capacity_bytes,
                                             uint64_t *grants_p)
{
    if (!grants_p || grant_bytes == 0 || payload_capacity_bytes == 0)
        return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t slot = fx_slot_size_for(value_len);
    uint64_t per = fx_slots_per_grant(grant_bytes, slot);
    if (slot == 0 || per == 0) return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t usable = per * slot; /* <= grant_bytes, no overflow; ceil without p+d-1 */
    *grants_p = payload_capacity_bytes / usable + (payload_capacity_bytes % usable != 0);
    return FLUXON_OK;
}

/* Slot class of value_len in this pool; 0 when the value cannot be served at all. */
static uint64_t sp_class_size(const fx_slot_pool_t *pool, uint64_t value_len)
{
    uint64_t s = fx_slot_size_for(value_len);
    return s && s <= pool->cfg.grant_bytes ? s : 0;
}

FX_INTERNAL void fx_slot_pool_config_init(fx_slot_pool_config_t *cfg)
{
    if (!cfg) return;
    *cfg = (fx_slot_pool_config_t){FX_SLOT_POOL_DEFAULT_GRANT_BYTES,
                                   FX_SLOT_POOL_DEFAULT_SOFT_WAIT_MS,
                                   FX_SLOT_POOL_DEFAULT_CLAIM_TIMEOUT_MS, 0};
}

FX_INTERNAL int fx_slot_pool_create(const fx_slot_pool_config_t *cfg, fx_slot_pool_t **pool_p)
{
    if (!cfg || !pool_p) return FLUXON_ERR_INVALID_ARGUMENT;
    /* slot indexes are u32: at most UINT32_MAX minimum-size slots per grant */
    if (cfg->grant_bytes == 0 || cfg->grant_bytes % FX_SLOT_PAGE ||
        cfg->grant_bytes > (uint64_t)UINT32_MAX * FX_SLOT_PAGE ||
        cfg->claim_timeout_ms <= cfg->soft_wait_ms)
        return FLUXON_ERR_INVALID_ARGUMENT;
    fx_slot_pool_t *pool = fx_calloc(1, sizeof *pool);
    if (!pool) return FLUXON_ERR_NOMEM;
    pool->cfg = *cfg;
    *pool_p = pool;
    return FLUXON_OK;
}

/* ---- free lists, states, waiters ------------------------------------------------------- */

static void sp_free_push(sp_class_t *c, sp_slot_t *s)
{
    FX_ASSERT(!s->on_free && s->state == FX_SLOT_FREE);
    SP_APPEND(c->free_head, c->free_tail, s, fprev, fnext);
    s->on_free = true;
    c->nfree++;
}

static void sp_free_unlink(sp_class_t *c, sp_slot_t *s)
{
    FX_ASSERT(s->on_free && s->state == FX_SLOT_FREE && c->nfree > 0);
    SP_UNLINK(c->free_head, c->free_tail, s, fprev, fnext);
    s->on_free = false;
    c->nfree--;
}

static bool sp_legal(int from, int to)
{
    switch (from) {
    case FX_SLOT_FREE: return to == FX_SLOT_PREPARED;
    case FX_SLOT_PREPARED: return to == FX_SLOT_PENDING || to == FX_SLOT_FREE;
    case FX_SLOT_PENDING: return to == FX_SLOT_COMMITTED || to == FX_SLOT_FREE;
    case FX_SLOT_COMMITTED: return to == FX_SLOT_FREE;
    default: return false;
    }
}

static void sp_set_state(fx_slot_pool_t *pool, sp_slot_t *s, int to)
{
    int from = s->state;
    sp_grant_t *g = s->grant;
    FX_ASSERT(sp_legal(from, to) && g->n[from] > 0 && pool->n[from] > 0);
    if (from == FX_SLOT_FREE && g->n[FX_SLOT_FREE] == g->nslots) pool->idle_grants--; /* no longer idle */
    g->n[from]--, g->n[to]++;
    pool->n[from]--, pool->n[to]++;
    if (to == FX_SLOT_FREE && g->n[FX_SLOT_FREE] == g->nslots) pool->idle_grants++; /* every slot free */
    if (from == FX_SLOT_FREE) pool->used_bytes += g->slot_size;
    if (to == FX_SLOT_FREE) pool->used_bytes -= g->slot_size;
    s->state = (uint8_t)to;
}

/* FREE slot, already off its free list → PREPARED under a fresh use_seq. */
static void sp_take(fx_slot_pool_t *pool, sp_slot_t *s, fx_slot_ref_t *ref)
{
    FX_ASSERT(!s->on_free && s->holder_refs == 0 && !s->route_live && !s->aborted);
    sp_set_state(pool, s, FX_SLOT_PREPARED);
    s->use_seq = ++pool->next_use_seq;
    pool->claims++;
    const sp_grant_t *g = s->grant;
    *ref = (fx_slot_ref_t){.grant_id = g->id, .offset = g->offset + (uint64_t)s->index * g->slot_size,
                           .slot_size = g->slot_size, .use_seq = s->use_seq, .index = s->index};
}

static bool sp_claim_free(fx_slot_pool_t *pool, sp_class_t *c, fx_slot_ref_t *ref)
{
    sp_slot_t *s = c->free_head;
    if (!s) return false;
    sp_free_unlink(c, s);
    sp_take(pool, s, ref);
    return true;
}

static void sp_wait_unqueue(fx_slot_pool_t *pool, sp_waiter_t *w)
{
    FX_ASSERT(w->where == SP_W_QUEUED && w->cls->nwait > 0 && pool->nwaiters > 0);
    SP_UNLINK(w->cls->wait_head, w->cls->wait_tail, w, prev, next);
    SP_UNLINK(pool->gw_head, pool->gw_tail, w, gprev, gnext);
    w->cls->nwait--;
    pool->nwaiters--;
    w->where = 0;
}

static void sp_deliver_later(fx_slot_pool_t *pool, sp_waiter_t *w, int status)
{
    FX_ASSERT(w->where == 0);
    w->status = status;
    w->where = SP_W_DELIVERING;
    SP_APPEND(pool->dl_head, pool->dl_tail, w, prev, next);
}

/* A FREE slot off any list: the oldest waiter of its class gets it, else the free list. */
static void sp_offer(fx_slot_pool_t *pool, sp_slot_t *s)
{
    sp_class_t *c = s->grant->cls;
    if (s->grant->retiring) { /* kept free for its re-carving or return */
        pool->retiring_free++;
        return;
    }
    sp_waiter_t *w = c->wait_head;
    if (!w) {
        sp_free_push(c, s);
        return;
    }
    sp_wait_unqueue(pool, w);
    sp_take(pool, s, &w->ref);
    w->slot = s;
    sp_deliver_later(pool, w, FLUXON_OK);
}

/* The S2 point: the only way a used slot becomes FREE. */
static void sp_release_slot(fx_slot_pool_t *pool, sp_slot_t *s)
{
    FX_ASSERT(s->holder_refs == 0 && !s->route_live && !s->on_free);
    if (sp_is_draining(s)) {
        FX_ASSERT(pool->draining > 0);
        pool->draining--;
    }
    s->aborted = false;
    sp_set_state(pool, s, FX_SLOT_FREE);
    pool->frees++;
    sp_offer(pool, s);
}

/* Runs due callbacks. Collected first and called last, so a callback sees a consistent
 * pool; a nested call from a callback only queues, the outermost flush delivers. */
static void sp_flush(fx_slot_pool_t *pool)
{
    if (pool->flushing) return;
    pool->flushing = true;
    sp_waiter_t *w;
    while ((w = pool->dl_head)) {
        SP_UNLINK(pool->dl_head, pool->dl_tail, w, prev, next);
        fx_u64map_del(&pool->waiters_by_id, w->id, NULL);
        fx_slot_ref_t ref = w->ref;
        int status = w->status;
        fx_slot_wait_cb cb = w->cb;
        void *arg = w->arg;
        fx_free(w);
        if (status == FLUXON_OK) pool->waits_served++;
        else if (status == FLUXON_ERR_TIMEOUT) pool->waits_timed_out++;
        cb(arg, status, status == FLUXON_OK ? &ref : NULL);
    }
    pool->flushing = false;
}

FX_INTERNAL void fx_slot_pool_destroy(fx_slot_pool_t *pool)
{
    if (!pool) return;
    FX_ASSERT(!pool->flushing); /* documented: never from a wait callback */
    pool->closing = true;
    for (sp_waiter_t *w = pool->dl_head; w; w = w->next) w->status = FLUXON_ERR_CANCELLED;
    while (pool->gw_head) {
        sp_waiter_t *w = pool->gw_head;
        sp_wait_unqueue(pool, w);
        sp_deliver_later(pool, w, FLUXON_ERR_CANCELLED);
    }
    sp_flush(pool);
    for (sp_grant_t *g = pool->grant_head, *next; g; g = next) {
        next = g->next;
        fx_free(g->slots);
        fx_free(g);
    }
    for (size_t i = 0; i < pool->nclasses; i++) fx_free(pool->classes[i]);
    fx_free(pool->classes);
    fx_u64map_free(&pool->grants_by_id);
    fx_u64map_free(&pool->waiters_by_id);
    fx_free(pool);
}

/* ---- grants ------------------------------------------------------------------------------ */

static sp_class_t *sp_class_find(const fx_slot_pool_t *pool, uint64_t slot_size)
{
    for (size_t i = 0; i < pool->nclasses; i++)
        if (pool->classes[i]->slot_size == slot_size) return pool->classes[i];
    return NULL;
}

FX_INTERNAL uint64_t fx_slot_pool_idle_grants(const fx_slot_pool_t *pool) { return pool ? pool->idle_grants : 0; }

FX_INTERNAL uint64_t fx_slot_pool_class_grants(const fx_slot_pool_t *pool, uint64_t slot_size)
{
    const sp_class_t *c = pool ? sp_class_find(pool, slot_size) : NULL;
    return c ? c->grants : 0;
}

static int sp_class_get_or_add(fx_slot_pool_t *pool, uint64_t slot_size, sp_class_t **c_p)
{
    if ((*c_p = sp_class_find(pool, slot_size))) return FLUXON_OK;
    if (pool->nclasses == pool->classes_cap) {
        size_t ncap = pool->classes_cap ? pool->classes_cap * 2 : 4;
        sp_class_t **nc = fx_realloc(pool->classes, ncap * sizeof *nc);
        if (!nc) return FLUXON_ERR_NOMEM;
        pool->classes = nc;
        pool->classes_cap = ncap;
    }
    sp_class_t *c = fx_calloc(1, sizeof *c);
    if (!c) return FLUXON_ERR_NOMEM;
    c->slot_size = slot_size;
    pool->classes[pool->nclasses++] = c;
    *c_p = c;
    return FLUXON_OK;
}

FX_INTERNAL int fx_slot_pool_add_grant(fx_slot_pool_t *pool, uint64_t grant_id,
                                       uint64_t offset, uint64_t slot_size)
{
    return fx_slot_pool_add_grant_sized(pool, grant_id, offset, pool ? pool->cfg.grant_bytes : 0, slot_size);
}

FX_INTERNAL int fx_slot_pool_add_grant_sized(fx_slot_pool_t *pool, uint64_t grant_id, uint64_t offset,
                                             uint64_t bytes, uint64_t slot_size)
{
    if (!pool) return FLUXON_ERR_INVALID_ARGUMENT;
    if (pool->closing) return FLUXON_ERR_CANCELLED;
    uint64_t gb = bytes;
    if (grant_id == 0 || offset % FX_SLOT_PAGE || slot_size == 0 || gb % FX_SLOT_PAGE ||
        gb > pool->cfg.grant_bytes || slot_size % FX_SLOT_PAGE || slot_size > gb || offset > UINT64_MAX - gb)
        return FLUXON_ERR_INVALID_ARGUMENT;
    if (fx_u64map_get(&pool->grants_by_id, grant_id)) return FLUXON_ERR_KEY_EXISTS;
    if (pool->cfg.max_grants && pool->ngrants >= pool->cfg.max_grants)
        return FLUXON_ERR_NO_SPACE;
    /* two grants over the same bytes would hand one range to two values; rare call */
    for (const sp_grant_t *o = pool->grant_head; o; o = o->next)
        if (offset < o->offset + o->bytes && o->offset < offset + gb)
            return FLUXON_ERR_INVALID_ARGUMENT;
    sp_class_t *c;
    int rc = sp_class_get_or_add(pool, slot_size, &c);
    if (rc != FLUXON_OK) return rc;
    uint64_t nslots = gb / slot_size;
    sp_grant_t *g = fx_calloc(1, sizeof *g);
    sp_slot_t *slots = fx_calloc(nslots, sizeof *slots);
    if (!g || !slots || fx_u64map_put(&pool->grants_by_id, grant_id, g, NULL) != FLUXON_OK) {
        fx_free(g);
        fx_free(slots);
        return FLUXON_ERR_NOMEM;
    }
    *g = (sp_grant_t){.id = grant_id, .offset = offset, .bytes = gb, .slot_size = slot_size,
                      .nslots = nslots, .added_seq = pool->next_use_seq, .cls = c,
                      .slots = slots};
    g->n[FX_SLOT_FREE] = nslots;
    SP_APPEND(pool->grant_head, pool->grant_tail, g, prev, next);
    pool->n[FX_SLOT_FREE] += nslots;
    pool->ngrants++;
    pool->idle_grants++;
    pool->granted_bytes += gb;
    pool->nslots += nslots;
    pool->slot_bytes += nslots * slot_size;
    pool->grants_added++;
    c->grants++;
    for (uint64_t i = 0; i < nslots; i++) {
        slots[i].grant = g;
        slots[i].index = (uint32_t)i;
        sp_offer(pool, &slots[i]);
    }
    sp_flush(pool);
    return FLUXON_OK;
}

FX_INTERNAL int fx_slot_pool_remove_grant(fx_slot_pool_t *pool, uint64_t grant_id)
{
    if (!pool || grant_id == 0) return FLUXON_ERR_INVALID_ARGUMENT;
    if (pool->closing) return FLUXON_ERR_CANCELLED;
    sp_grant_t *g = fx_u64map_get(&pool->grants_by_id, grant_id);
    if (!g) return FLUXON_ERR_NOT_FOUND;
    if (g->n[FX_SLOT_FREE] != g->nslots) return FLUXON_ERR_BUSY;
    for (uint64_t i = 0; i < g->nslots; i++)
        if (g->slots[i].on_free) sp_free_unlink(g->cls, &g->slots[i]);
    if (g->retiring) {
        pool->retiring--;
        pool->retiring_free -= g->nslots;
    }
    pool->n[FX_SLOT_FREE] -= g->nslots;
    pool->ngrants--;
    pool->idle_grants--;
    pool->granted_bytes -= g->bytes;
    pool->nslots -= g->nslots;
    pool->slot_bytes -= g->nslots * g->slot_size;
    pool->grants_removed++;
    sp_class_t *cls = g->cls;
    cls->grants--;
    if (!cls->grants && !cls->nwait && !cls->nfree) { /* a size no longer in use: forgotten (issue 44) */
        size_t i = 0;
        while (i < pool->nclasses && pool->classes[i] != cls) i++;
        if (i < pool->nclasses) {
            pool->classes[i] = pool->classes[--pool->nclasses];
            fx_free(cls);
        }
    }
    fx_u64map_del(&pool->grants_by_id, grant_id, NULL);
    SP_UNLINK(pool->grant_head, pool->grant_tail, g, prev, next);
    fx_free(g->slots);
    fx_free(g);
    return FLUXON_OK;
}

FX_INTERNAL int fx_slot_pool_retire_grant(fx_slot_pool_t *pool, uint64_t grant_id, bool retire)
{
    if (!pool || grant_id == 0) return FLUXON_ERR_INVALID_ARGUMENT;
    if (pool->closing) return FLUXON_ERR_CANCELLED;
    sp_grant_t *g = fx_u64map_get(&pool->grants_by_id, grant_id);
    if (!g) return FLUXON_ERR_NOT_FOUND;
    if (g->retiring == retire) return FLUXON_OK;
    if (retire) {
        g->retiring = true;
        pool->retiring++;
        for (uint64_t i = 0; i < g->nslots; i++)
            if (g->slots[i].on_free) {
                sp_free_unlink(g->cls, &g->slots[i]);
                pool->retiring_free++;
            }
        return FLUXON_OK;
    }
    g->retiring = false;
    pool->retiring--;
    for (uint64_t i = 0; i < g->nslots; i++)
        if (g->slots[i].state == FX_SLOT_FREE) {
            pool->retiring_free--;
            sp_offer(pool, &g->slots[i]);
        }
    sp_flush(pool);
    return FLUXON_OK;
}

/* ---- claims ------------------------------------------------------------------------------ */

FX_INTERNAL int fx_slot_pool_claim(fx_slot_pool_t *pool, uint64_t value_len,
                                   fx_slot_ref_t *slot_p)
{
    if (!pool || !slot_p) return FLUXON_ERR_INVALID_ARGUMENT;
    if (pool->closing) return FLUXON_ERR_CANCELLED;
    uint64_t size = sp_class_size(pool, value_len);
    if (!size) return FLUXON_ERR_INVALID_ARGUMENT;
    sp_class_t *c = sp_class_find(pool, size);
    /* a class with queued waiters has no free slot, so this never jumps the queue */
    if (c && sp_claim_free(pool, c, slot_p)) return FLUXON_OK;
    pool->claim_no_space++;
    return FLUXON_ERR_NO_SPACE;
}

FX_INTERNAL int fx_slot_pool_wait(fx_slot_pool_t *pool, uint64_t value_len, uint64_t now_ms,
                                  fx_slot_wait_cb cb, void *arg, fx_slot_ref_t *slot_p,
                                  uint64_t *wait_id_p)
{
    if (!pool || !cb || !slot_p || !wait_id_p) return FLUXON_ERR_INVALID_ARGUMENT;
    if (pool->closing) return FLUXON_ERR_CANCELLED;
    uint64_t size = sp_class_size(pool, value_len);
    if (!size) return FLUXON_ERR_INVALID_ARGUMENT;
    sp_class_t *c;
    int rc = sp_class_get_or_add(pool, size, &c);
    if (rc != FLUXON_OK) return rc;
    if (sp_claim_free(pool, c, slot_p)) return FLUXON_OK;
    sp_waiter_t *w = fx_calloc(1, sizeof *w);
    if (!w) return FLUXON_ERR_NOMEM;
    w->id = ++pool->next_wait_id;
    if (fx_u64map_put(&pool->waiters_by_id, w->id, w, NULL) != FLUXON_OK) {
        fx_free(w);
        return FLUXON_ERR_NOMEM;
    }
    /* clamped to the latest time seen, so the pool-wide queue stays in deadline order */
    if (now_ms > pool->last_now_ms) pool->last_now_ms = now_ms;
    w->queued_ms = pool->last_now_ms;
    uint64_t t = pool->cfg.claim_timeout_ms;
    w->deadline_ms = w->queued_ms > UINT64_MAX - t ? UINT64_MAX : w->queued_ms + t;
    w->cls = c;
    w->cb = cb;
    w->arg = arg;
    w->where = SP_W_QUEUED;
    SP_APPEND(c->wait_head, c->wait_tail, w, prev, next);
    SP_APPEND(pool->gw_head, pool->gw_tail, w, gprev, gnext);
    c->nwait++;
    pool->nwaiters++;
    pool->waits_queued++;
    *wait_id_p = w->id;
    return FLUXON_IN_PROGRESS;
}

FX_INTERNAL int fx_slot_pool_cancel_wait(fx_slot_pool_t *pool, uint64_t wait_id)
{
    if (!pool) return FLUXON_ERR_INVALID_ARGUMENT;
    if (pool->closing) return FLUXON_ERR_CANCELLED;
    sp_waiter_t *w = wait_id ? fx_u64map_get(&pool->waiters_by_id, wait_id) : NULL;
    if (!w) return FLUXON_ERR_NOT_FOUND;
    if (w->where == SP_W_QUEUED) {
        sp_wait_unqueue(pool, w);
    } else {
        SP_UNLINK(pool->dl_head, pool->dl_tail, w, prev, next);
        if (w->status == FLUXON_OK) {
            /* assigned but never handed over: no one else can know this slot */
            FX_ASSERT(w->slot->state == FX_SLOT_PREPARED && w->slot->use_seq == w->ref.use_seq);
            sp_release_slot(pool, w->slot);
        }
    }
    fx_u64map_del(&pool->waiters_by_id, w->id, NULL);
    fx_free(w);
    pool->waits_cancelled++;
    sp_flush(pool);
    return FLUXON_OK;
}

FX_INTERNAL uint64_t fx_slot_pool_expire(fx_slot_pool_t *pool, uint64_t now_ms)
{
    if (!pool || pool->closing) return 0;
    if (now_ms > pool->last_now_ms) pool->last_now_ms = now_ms;
    uint64_t n = 0;
    sp_waiter_t *w;
    while ((w = pool->gw_head) && w->deadline_ms <= now_ms) {
        sp_class_t *c = w->cls;
        sp_wait_unqueue(pool, w);
        /* one line per call, not per waiter: an overloaded owner expires many at once */
        if (n++ == 0)
            FX_WARN("slot pool: claim timed out (stage=claim) slot_size=%" PRIu64 " waited_ms=%"
                    PRIu64 " class_grants=%" PRIu64 " grants=%" PRIu64 "/%" PRIu64 " pending=%"
                    PRIu64 " committed=%" PRIu64 " draining=%" PRIu64, c->slot_size,
                    now_ms - w->queued_ms, c->grants, pool->ngrants, pool->cfg.max_grants,
                    pool->n[FX_SLOT_PENDING], pool->n[FX_SLOT_COMMITTED], pool->draining);
        sp_deliver_later(pool, w, FLUXON_ERR_TIMEOUT);
    }
    if (n > 1) FX_WARN("slot pool: %" PRIu64 " claims timed out (stage=claim)", n);
    sp_flush(pool);
    return n;
}

FX_INTERNAL int fx_slot_pool_needs_grant(const fx_slot_pool_t *pool, uint64_t now_ms,
                                         uint64_t *slot_size_p)
{
    if (!pool || pool->closing) return FLUXON_ERR_NOT_FOUND;
    const sp_waiter_t *best = NULL;
    for (size_t i = 0; i < pool->nclasses; i++) {
        const sp_waiter_t *h = pool->classes[i]->wait_head;
        if (!h || now_ms < h->queued_ms || now_ms - h->queued_ms < pool->cfg.soft_wait_ms)
            continue;
        if (!best || h->queued_ms < best->queued_ms) best = h;
    }
    if (!best) return FLUXON_ERR_NOT_FOUND;
    if (slot_size_p) *slot_size_p = best->cls->slot_size;
    if (pool->cfg.max_grants && pool->ngrants >= pool->cfg.max_grants)
        return FLUXON_ERR_NO_SPACE;
    return FLUXON_OK;
}

FX_INTERNAL uint64_t fx_slot_pool_next_deadline(const fx_slot_pool_t *pool, uint64_t now_ms)
{
    if (!pool || !pool->gw_head) return UINT64_MAX;
    uint64_t t = pool->gw_head->deadline_ms;
    for (size_t i = 0; i < pool->nclasses; i++) {
        const sp_waiter_t *h = pool->classes[i]->wait_head;
        if (!h || h->queued_ms > UINT64_MAX - pool->cfg.soft_wait_ms) continue;
        uint64_t mark = h->queued_ms + pool->cfg.soft_wait_ms;
        if (mark > now_ms && mark < t) t = mark;
    }
    return t;
}

/* ---- transitions ------------------------------------------------------------------------ */

/* Validates a caller's ref without touching anything; see the header for the statuses. */
static int sp_resolve(const fx_slot_pool_t *pool, const fx_slot_ref_t *ref, sp_slot_t **s_p)
{
    if (!pool || !ref) return FLUXON_ERR_INVALID_ARGUMENT;
    if (pool->closing) return FLUXON_ERR_CANCELLED;
    if (ref->grant_id == 0 || ref->use_seq == 0 || ref->use_seq > pool->next_use_seq)
        return FLUXON_ERR_INVALID_ARGUMENT;
    sp_grant_t *g = fx_u64map_get(&pool->grants_by_id, ref->grant_id);
    if (!g || ref->use_seq <= g->added_seq) return FLUXON_ERR_STALE;
    if (ref->index >= g->nslots || ref->slot_size != g->slot_size ||
        ref->offset != g->offset + (uint64_t)ref->index * g->slot_size)
        return FLUXON_ERR_INVALID_ARGUMENT;
    sp_slot_t *s = &g->slots[ref->index];
    if (ref->use_seq > s->use_seq) return FLUXON_ERR_INVALID_ARGUMENT; /* never issued */
    if (ref->use_seq < s->use_seq || s->state == FX_SLOT_FREE) return FLUXON_ERR_STALE;
    *s_p = s;
    return FLUXON_OK;
}

/* Every transition starts here: a bad ref returns before anything changes. */
#define SP_RESOLVE(pool, ref, s)                                                     \
    sp_slot_t *s;                                                                    \
    do {                                                                             \
        int rc_ = sp_resolve(pool, ref, &s);                                         \
        if (rc_ != FLUXON_OK) return rc_;                                            \
    } while (0)

FX_INTERNAL int fx_slot_pool_mark_pending(fx_slot_pool_t *pool, const fx_slot_ref_t *ref)
{
    SP_RESOLVE(pool, ref, s);
    if (s->state != FX_SLOT_PREPARED) return FLUXON_ERR_WRONG_HANDLE;
    FX_ASSERT(s->holder_refs == 0 && !s->route_live);
    sp_set_state(pool, s, FX_SLOT_PENDING);
    return FLUXON_OK;
}

FX_INTERNAL int fx_slot_pool_mark_committed(fx_slot_pool_t *pool, const fx_slot_ref_t *ref)
{
    SP_RESOLVE(pool, ref, s);
    if (s->state != FX_SLOT_PENDING || s->aborted) return FLUXON_ERR_WRONG_HANDLE;
    FX_ASSERT(!s->route_live);
    sp_set_state(pool, s, FX_SLOT_COMMITTED);
    s->route_live = true;
    return FLUXON_OK;
}

FX_INTERNAL int fx_slot_pool_route_dead(fx_slot_pool_t *pool, const fx_slot_ref_t *ref)
{
    SP_RESOLVE(pool, ref, s);
    if (s->state != FX_SLOT_COMMITTED || !s->route_live) return FLUXON_ERR_WRONG_HANDLE;
    s->route_live = false;
    pool->draining++;
    if (s->holder_refs == 0) sp_release_slot(pool, s);
    sp_flush(pool);
    return FLUXON_OK;
}

FX_INTERNAL int fx_slot_pool_release_prepared(fx_slot_pool_t *pool, const fx_slot_ref_t *ref)
{
    SP_RESOLVE(pool, ref, s);
    if (s->state == FX_SLOT_PREPARED) {
        sp_release_slot(pool, s);
    } else if (s->state == FX_SLOT_PENDING && !s->aborted) {
        s->aborted = true;
        pool->draining++;
        if (s->holder_refs == 0) sp_release_slot(pool, s);
    } else {
        return FLUXON_ERR_WRONG_HANDLE;
    }
    sp_flush(pool);
    return FLUXON_OK;
}

FX_INTERNAL int fx_slot_pool_holder_ref(fx_slot_pool_t *pool, const fx_slot_ref_t *ref)
{
    SP_RESOLVE(pool, ref, s);
    if (s->state == FX_SLOT_PREPARED || (s->state == FX_SLOT_PENDING && s->aborted))
        return FLUXON_ERR_WRONG_HANDLE;
    if (s->state == FX_SLOT_COMMITTED && !s->route_live) return FLUXON_ERR_STALE;
    if (s->holder_refs == UINT32_MAX) return FLUXON_ERR_INVALID_ARGUMENT;
    s->holder_refs++;
    pool->holder_refs++;
    return FLUXON_OK;
}

FX_INTERNAL int fx_slot_pool_holder_unref(fx_slot_pool_t *pool, const fx_slot_ref_t *ref)
{
    SP_RESOLVE(pool, ref, s);
    if (s->holder_refs == 0) return FLUXON_ERR_WRONG_HANDLE;
    FX_ASSERT(s->state == FX_SLOT_PENDING || s->state == FX_SLOT_COMMITTED);
    s->holder_refs--;
    pool->holder_refs--;
    if (s->holder_refs == 0 && sp_is_draining(s)) sp_release_slot(pool, s);
    sp_flush(pool);
    return FLUXON_OK;
}

FX_INTERNAL int fx_slot_pool_inspect(const fx_slot_pool_t *pool, const fx_slot_ref_t *ref,
                                     fx_slot_info_t *info_p)
{
    if (!info_p) return FLUXON_ERR_INVALID_ARGUMENT;
    SP_RESOLVE(pool, ref, s);
    *info_p = (fx_slot_info_t){(fx_slot_state_t)s->state, s->route_live, s->aborted,
                               s->holder_refs};
    return FLUXON_OK;
}

#undef SP_RESOLVE
#undef SP_APPEND
#undef SP_UNLINK
