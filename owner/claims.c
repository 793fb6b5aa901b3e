/* claims.c — slot claims and grants: claims are served FIFO from the pool; when it runs
 * dry a GRANT is requested from the master (one in flight); at capacity a claim waits for
 * eviction (the policy's can_wait/kick) until claim_timeout_ms; expected-capacity
 * prewarm takes the grants up front. */
#include "log.h"
#include "owner_claims.h"
#include "owner_link.h"
#include "owner_store.h"

typedef struct owner_claim {
    struct owner_claim *next;
    uint64_t value_len, deadline_ms;
    bool waited; /* counted once as waiting for eviction */
    size_t count, got;
    fx_slot_ref_t *slots;
    fx_oclaim_cb cb;
    void *arg;
} owner_claim_t;

typedef struct oclaims {
    owner_claim_t *claims;
    fx_oclaims_policy_t policy;
    uint64_t max_grants;
    bool grant_inflight, closing;
    uint64_t grant_nospace_ms; /* when the master last had no room for a grant (0: never/since grown) */
    uint64_t *grant_ids, *grant_offsets;
    size_t n_grants, cap_grants;
    uint64_t grants_received, claim_waits, claim_timeouts;
} oclaims_t;

static bool ocl_no_wait(fx_owner_t *o, uint64_t value_len, size_t count) { return false; }
static void ocl_nop(fx_owner_t *o) {}
static void ocl_nop_grant(fx_owner_t *o, uint64_t slot_size) {}

FX_INTERNAL uint64_t fx_oclaims_max_grants(const fx_config_t *cfg, uint64_t segment_len)
{
    uint64_t fit = (segment_len - 4096) / cfg->grant_bytes, eg = 0;
    if (cfg->has_expected &&
        fx_slot_pool_expected_grants(cfg->grant_bytes, cfg->expected_value_len, cfg->expected_payload_bytes, &eg) ==
            FLUXON_OK)
        return FX_MIN(eg, fit);
    return fit;
}

FX_INTERNAL int fx_oclaims_init(fx_owner_t *o, uint64_t max_grants)
{
    oclaims_t *c = fx_calloc(1, sizeof *c);
    if (!c) return FLUXON_ERR_NOMEM;
    c->max_grants = max_grants;
    c->policy = (fx_oclaims_policy_t){ocl_no_wait, ocl_nop, ocl_nop_grant};
    o->claims = c;
    return FLUXON_OK;
}

FX_INTERNAL void fx_oclaims_set_policy(fx_owner_t *o, const fx_oclaims_policy_t *p) { o->claims->policy = *p; }
FX_INTERNAL uint64_t fx_oclaims_max(fx_owner_t *o) { return o->claims->max_grants; }
FX_INTERNAL bool fx_oclaims_waiting(fx_owner_t *o) { return o->claims && o->claims->claims; }

FX_INTERNAL bool fx_oclaims_segment_full(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    return c->grant_nospace_ms && fx_now_ms() - c->grant_nospace_ms < 1000;
}

static bool ocl_can_grow(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    if (c->closing || !fx_olink_conn(o) || fx_oclaims_segment_full(o)) return false;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(fx_ostore_pool(o), &st);
    return st.grants < c->max_grants;
}

static void ocl_grant_request(fx_owner_t *o);

/* Serves queued claims from free slots, in order. What is left: the pool grows when it
 * can (can_grow: a grant is requested); at capacity a claim waits for eviction (issue 7)
 * until claim_timeout_ms; otherwise it completes short (no space). */
static void ocl_serve(fx_owner_t *o, bool can_grow)
{
    oclaims_t *cs = o->claims;
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    owner_claim_t **pp = &cs->claims;
    owner_claim_t *done = NULL, **done_tail = &done;
    uint64_t now = fx_now_ms();
    while (*pp) {
        owner_claim_t *c = *pp;
        while (c->got < c->count && fx_slot_pool_claim(pool, c->value_len, &c->slots[c->got]) == FLUXON_OK) c->got++;
        bool finished = c->got == c->count;
        if (!finished && !cs->closing && now >= c->deadline_ms) {
            finished = true;
            cs->claim_timeouts++;
            FX_WARN("claim of %zu slots of %llu bytes reached its deadline (claim_timeout_ms %u, or 9/10 of the "
                    "caller's timeout_ms when shorter; stage=claim, got %zu)",
                    c->count, (unsigned long long)fx_slot_size_for(c->value_len), o->cfg.claim_timeout_ms, c->got);
        } else if (!finished && !can_grow) {
            finished = cs->closing || !cs->policy.can_wait(o, c->value_len, c->count);
            if (!finished && !c->waited) {
                c->waited = true;
                cs->claim_waits++;
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
    if (cs->claims && can_grow) ocl_grant_request(o);
    else if (cs->claims) cs->policy.kick(o); /* capacity reached: free slots by eviction */
    while (done) { /* callbacks last: they may claim again */
        owner_claim_t *c = done;
        done = c->next;
        c->cb(o, c->arg, c->got);
        fx_free(c);
    }
}

typedef struct ocl_grant_ctx {
    fx_owner_t *o;
    uint64_t slot_size;
    bool prewarm;
} ocl_grant_ctx_t;

static void ocl_prewarm(fx_owner_t *o);

static void ocl_grant_keep(oclaims_t *c, uint64_t id, uint64_t offset)
{
    if (c->n_grants == c->cap_grants) {
        size_t nc = c->cap_grants ? c->cap_grants * 2 : 16;
        uint64_t *ni = fx_realloc(c->grant_ids, nc * sizeof *ni);
        if (ni) c->grant_ids = ni;
        uint64_t *no = fx_realloc(c->grant_offsets, nc * sizeof *no);
        if (no) c->grant_offsets = no;
        if (ni && no) c->cap_grants = nc;
    }
    if (c->n_grants < c->cap_grants) {
        c->grant_ids[c->n_grants] = id;
        c->grant_offsets[c->n_grants++] = offset;
    }
}

static void ocl_on_grant(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    ocl_grant_ctx_t *g = arg;
    fx_owner_t *o = g->o;
    uint64_t slot_size = g->slot_size;
    bool prewarm = g->prewarm;
    fx_free(g);
    oclaims_t *c = o->claims;
    if (!c || c->closing) return; /* shutting down */
    c->grant_inflight = false;
    bool grew = false;
    if (status == FLUXON_OK) {
        fx_body_grant_ack_t ack;
        fx_body_grant_ack_decode(body, h->body_len, &ack, arena);
        for (uint32_t i = 0; i < ack.grant_ids.n && i < ack.offsets.n && slot_size; i++) {
            int rc = fx_slot_pool_add_grant(fx_ostore_pool(o), ack.grant_ids.v[i], ack.offsets.v[i], slot_size);
            if (rc != FLUXON_OK) {
                FX_ERROR("grant %llu at %llu rejected by the slot pool: %s", (unsigned long long)ack.grant_ids.v[i],
                         (unsigned long long)ack.offsets.v[i], fluxon_status_string(rc));
                continue;
            }
            ocl_grant_keep(c, ack.grant_ids.v[i], ack.offsets.v[i]);
            c->policy.grant_added(o, slot_size);
            c->grants_received++;
            grew = true;
        }
    } else {
        FX_WARN("grant request failed: %s", fluxon_status_string(status));
        if (status == FLUXON_ERR_NO_SPACE) c->grant_nospace_ms = FX_MAX(fx_now_ms(), 1ull);
    }
    if (grew) c->grant_nospace_ms = 0;
    if (prewarm && grew) ocl_prewarm(o);
    ocl_serve(o, grew);
}

static int ocl_grant_send(fx_owner_t *o, uint64_t slot_size, uint64_t count, bool prewarm)
{
    fx_conn_t *mc = fx_olink_conn(o);
    if (!mc) return FLUXON_ERR_UNAVAILABLE;
    ocl_grant_ctx_t *g = fx_malloc(sizeof *g);
    if (!g) return FLUXON_ERR_NOMEM;
    *g = (ocl_grant_ctx_t){o, slot_size, prewarm};
    fx_body_grant_t b = {slot_size, (uint32_t)count};
    int rc = FX_RPC_CALL(mc, GRANT, grant, &b, o->cfg.master_timeout_ms, ocl_on_grant, g);
    if (rc != FLUXON_OK) fx_free(g);
    else o->claims->grant_inflight = true;
    return rc;
}

/* Expected-capacity prewarm (§6): take the hard cap of grants for the expected value
 * length up front, so steady state never waits for a grant. */
static void ocl_prewarm(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    if (!o->cfg.has_expected || c->grant_inflight || !fx_olink_conn(o)) return;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(fx_ostore_pool(o), &st);
    if (st.grants >= c->max_grants) return;
    ocl_grant_send(o, fx_slot_size_for(o->cfg.expected_value_len), FX_MIN(c->max_grants - st.grants, 64u), true);
}

static void ocl_grant_request(fx_owner_t *o)
{
    oclaims_t *cs = o->claims;
    if (cs->grant_inflight || !cs->claims) return;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(fx_ostore_pool(o), &st);
    if (!fx_olink_conn(o) || st.grants >= cs->max_grants || fx_oclaims_segment_full(o)) {
        ocl_serve(o, false); /* nothing more will come: wait for eviction or fail */
        return;
    }
    owner_claim_t *c = cs->claims;
    uint64_t slot_size = fx_slot_size_for(c->value_len);
    uint64_t per = fx_slots_per_grant(o->cfg.grant_bytes, slot_size);
    uint64_t need = 0;
    for (owner_claim_t *q = c; q; q = q->next)
        if (q->value_len == c->value_len) need += q->count - q->got;
    uint64_t count = per ? (need + per - 1) / per : 1;
    count = FX_MIN(count, cs->max_grants - st.grants);
    count = FX_MAX(FX_MIN(count, 64u), 1u);
    if (ocl_grant_send(o, slot_size, count, false) != FLUXON_OK) ocl_serve(o, false);
}

FX_INTERNAL uint64_t fx_oclaim_deadline(fx_owner_t *o, uint32_t caller_timeout_ms)
{
    uint64_t wait = o->cfg.claim_timeout_ms;
    if (caller_timeout_ms) wait = FX_MIN(wait, (uint64_t)caller_timeout_ms * 9 / 10);
    return fx_now_ms() + wait;
}

FX_INTERNAL void fx_oclaim(fx_owner_t *o, uint64_t value_len, size_t count, fx_slot_ref_t *slots,
                           uint64_t deadline_ms, fx_oclaim_cb cb, void *arg)
{
    oclaims_t *cs = o->claims;
    size_t got = 0;
    if (!cs->claims) /* FIFO: never overtake queued claims */
        while (got < count && fx_slot_pool_claim(fx_ostore_pool(o), value_len, &slots[got]) == FLUXON_OK) got++;
    if (got == count || cs->closing) {
        cb(o, arg, got);
        return;
    }
    owner_claim_t *c = fx_calloc(1, sizeof *c);
    if (!c) {
        cb(o, arg, got);
        return;
    }
    *c = (owner_claim_t){NULL, value_len, deadline_ms, false, count, got, slots, cb, arg};
    owner_claim_t **pp = &cs->claims;
    while (*pp) pp = &(*pp)->next;
    *pp = c;
    ocl_grant_request(o);
}

FX_INTERNAL void fx_oclaims_pump(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    if (c->claims) ocl_serve(o, c->grant_inflight || ocl_can_grow(o));
}

FX_INTERNAL size_t fx_oclaims_deficit(fx_owner_t *o, uint64_t *sizes, uint64_t *needs, size_t cap)
{
    oclaims_t *cs = o->claims;
    size_t n = 0;
    if (!cs->claims || cs->grant_inflight || ocl_can_grow(o)) return 0; /* a grant serves them */
    for (owner_claim_t *c = cs->claims; c; c = c->next) {
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

FX_INTERNAL void fx_oclaims_grants(fx_owner_t *o, fx_u64v_t *ids, fx_u64v_t *offsets)
{
    oclaims_t *c = o->claims;
    *ids = (fx_u64v_t){c->grant_ids, (uint32_t)c->n_grants};
    *offsets = (fx_u64v_t){c->grant_offsets, (uint32_t)c->n_grants};
}

FX_INTERNAL void fx_oclaims_master_ready(fx_owner_t *o)
{
    ocl_prewarm(o);
    if (o->claims->claims) ocl_grant_request(o);
}

FX_INTERNAL void fx_oclaims_master_lost(fx_owner_t *o) { o->claims->grant_inflight = false; }

FX_INTERNAL void fx_oclaims_fail_all(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    if (!c) return;
    c->closing = true;
    if (o->store) ocl_serve(o, false); /* queued claims fail: their gets miss */
}

FX_INTERNAL void fx_oclaims_fini(fx_owner_t *o)
{
    oclaims_t *cs = o->claims;
    if (!cs) return;
    while (cs->claims) {
        owner_claim_t *c = cs->claims;
        cs->claims = c->next;
        fx_free(c);
    }
    fx_free(cs->grant_ids);
    fx_free(cs->grant_offsets);
    fx_free(cs);
    o->claims = NULL;
}

FX_INTERNAL void fx_oclaims_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    oclaims_t *c = o->claims;
    m->max_grants = c->max_grants;
    m->grants_received = c->grants_received;
    m->claim_waits = c->claim_waits;
    m->claim_timeouts = c->claim_timeouts;
}
