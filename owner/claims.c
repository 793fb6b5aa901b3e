/* claims.c — slot claims and grants: claims are served FIFO from the pool.
 *
 * Grants and their carving (issue 15): a master grant is cut into up to 16 equal chunks;
 * a size class gets a sub-grant of k contiguous chunks (k: the fewest whose tail wastes at
 * most 1/8 of it, issue 44; for the expected value size the fewest power of two whose
 * sub-grants hold exactly as many slots as the whole grant would), added to the slot pool
 * as a grant of its own. When the pool
 * has no free slot of a claim's size: a sub-grant is carved from free chunks; else an idle
 * sub-grant of a size no queued claim wants is taken apart and its chunks carved again;
 * else a GRANT is requested from the master (one in flight); at capacity the claim waits
 * for eviction (the policy's can_wait/kick; it may retire the sub-grants of the coldest
 * master grant so that they empty) until claim_timeout_ms. Expected-capacity prewarm takes
 * the grants up front, carved for the expected size. A master grant whose sub-grants are
 * all idle for reserve.idle_grant_return_ms goes back to the master (GRANT_RETURN), never
 * below the prewarmed count (S5); a return without a definite answer is sent again with
 * the same identities (the master frees only grants it knows: a repeat is harmless). */
#include <stdio.h>

#include "log.h"
#include "owner_claims.h"
#include "owner_link.h"
#include "owner_store.h"

#include "claims_int.h"


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
    c->owner = o;
    c->chunks = 1;
    for (unsigned k = OCL_CHUNKS; k > 1; k /= 2)
        if (o->cfg.grant_bytes % ((uint64_t)k * FX_SLOT_PAGE) == 0) {
            c->chunks = k;
            break;
        }
    c->chunk_bytes = o->cfg.grant_bytes / c->chunks;
    fx_timer_init(&c->idle_timer);
    fx_timer_init(&c->return_timer);
    fx_timer_init(&c->deadline_timer);
    c->policy = (fx_oclaims_policy_t){ocl_no_wait, ocl_nop, ocl_nop_grant, ocl_nop};
    o->claims = c;
    return FLUXON_OK;
}

FX_INTERNAL void fx_oclaims_set_policy(fx_owner_t *o, const fx_oclaims_policy_t *p) { o->claims->policy = *p; }
FX_INTERNAL uint64_t fx_oclaims_max(fx_owner_t *o) { return o->claims->max_grants; }
FX_INTERNAL uint64_t fx_oclaims_count(fx_owner_t *o) { return o->claims->n_grants; }
FX_INTERNAL bool fx_oclaims_waiting(fx_owner_t *o) { return o->claims && o->claims->claims; }

FX_INTERNAL const char *fx_oclaims_refusal(fx_owner_t *o) { return o->claims ? o->claims->refusal : ""; }

FX_INTERNAL bool fx_oclaims_grant_refused(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    return c->grant_nospace_ms != 0;
}

FX_INTERNAL bool fx_oclaims_segment_full(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    return c->grant_nospace_ms && fx_now_ms() - c->grant_nospace_ms < 1000;
}

static bool ocl_can_grow(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    if (c->closing || !fx_olink_conn(o) || fx_oclaims_segment_full(o)) return false;
    return c->n_grants < c->max_grants;
}

static void ocl_grant_request(fx_owner_t *o);
static bool ocl_free_idle_one(fx_owner_t *o, const owner_claim_t *c);
static bool ocl_carve(fx_owner_t *o, uint64_t slot_size, uint64_t need);
static void ocl_deadline_arm(fx_owner_t *o, uint64_t at_ms);

/* Serves queued claims from free slots, in order. What is left: the pool grows when it
 * can (can_grow: a grant is requested); at capacity a claim waits for eviction (issue 7)
 * until claim_timeout_ms; otherwise it completes short (no space). */
static void ocl_serve(fx_owner_t *o, bool can_grow)
{
    oclaims_t *cs = o->claims;
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    owner_claim_t **pp = &cs->claims, *last = NULL;
    owner_claim_t *done = NULL, **done_tail = &done;
    uint64_t now = fx_now_ms();
    /* issue 44 P2: a size that found no free slot, no chunks and no idle sub-grant stays
     * stuck for the rest of the pass: its later claims only try the free list (O(1)), so a
     * pass costs O(claims + sizes x grants), not O(claims x grants) */
    uint64_t stuck[16];
    size_t nstuck = 0;
    uint64_t first_deadline = UINT64_MAX; /* of the claims left queued */
    while (*pp) {
        owner_claim_t *c = *pp;
        uint64_t size = fx_slot_size_for(c->value_len);
        bool is_stuck = false;
        for (size_t k = 0; k < nstuck && !is_stuck; k++) is_stuck = stuck[k] == size;
        for (;;) { /* free slots; a sub-grant carved from free chunks; an idle one taken apart */
            while (c->got < c->count && fx_slot_pool_claim(pool, c->value_len, &c->slots[c->got]) == FLUXON_OK)
                c->got++;
            if (c->got == c->count || cs->closing || !size || size > o->cfg.grant_bytes || is_stuck) break;
            if (!ocl_carve(o, size, c->count - c->got) && !ocl_free_idle_one(o, c)) {
                if (nstuck < FX_ARRAY_LEN(stuck)) stuck[nstuck++] = size;
                break;
            }
        }
        bool finished = c->got == c->count;
        if (!finished && !cs->closing && now >= c->deadline_ms) {
            finished = true;
            cs->claim_timeouts++;
            FX_WARN("claim of %zu slots of %llu bytes reached its deadline (claim_timeout_ms %u, or 9/10 of the "
                    "caller's timeout_ms when shorter; stage=claim, got %zu)",
                    c->count, (unsigned long long)fx_slot_size_for(c->value_len), o->cfg.claim_timeout_ms, c->got);
        } else if (!finished && !can_grow && c->hint) {
            finished = true; /* a hint's claim: only eviction could serve it now, and it never waits for that */
        } else if (!finished && !can_grow) {
            finished = cs->closing || !cs->policy.can_wait(o, c->value_len, c->count);
            cs->claim_no_space += finished && !cs->closing;
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
            last = c;
            pp = &c->next;
            first_deadline = FX_MIN(first_deadline, c->deadline_ms);
        }
    }
    cs->claims_tail = last;
    if (cs->claims && !cs->closing) ocl_deadline_arm(o, first_deadline);
    if (cs->claims && can_grow) ocl_grant_request(o);
    else if (cs->claims) cs->policy.kick(o); /* capacity reached: free slots by eviction */
    else if (done) cs->policy.idle(o);       /* a later claim is judged afresh */
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
        uint64_t *nd = fx_realloc(c->grant_idle_ms, nc * sizeof *nd);
        if (nd) c->grant_idle_ms = nd;
        uint32_t *nu = fx_realloc(c->grant_used, nc * sizeof *nu);
        if (nu) c->grant_used = nu;
        uint32_t *ns = fx_realloc(c->grant_starts, nc * sizeof *ns);
        if (ns) c->grant_starts = ns;
        if (ni && no && nd && nu && ns) c->cap_grants = nc;
    }
    if (c->n_grants < c->cap_grants) {
        c->grant_ids[c->n_grants] = id;
        c->grant_idle_ms[c->n_grants] = 0;
        c->grant_used[c->n_grants] = c->grant_starts[c->n_grants] = 0;
        c->grant_offsets[c->n_grants++] = offset;
    }
}

FX_INTERNAL void fx_ocl_grant_forget(oclaims_t *c, size_t i)
{
    c->n_grants--;
    c->grant_ids[i] = c->grant_ids[c->n_grants];
    c->grant_offsets[i] = c->grant_offsets[c->n_grants];
    c->grant_idle_ms[i] = c->grant_idle_ms[c->n_grants];
    c->grant_used[i] = c->grant_used[c->n_grants];
    c->grant_starts[i] = c->grant_starts[c->n_grants];
}

/* ---- carving ---- */
FX_INTERNAL uint64_t fx_ocl_sub_id(const oclaims_t *c, size_t i, unsigned chunk)
{
    return c->grant_ids[i] << OCL_SUB_SHIFT | chunk;
}

/* Chunks of a sub-grant for slot_size. The expected value size: the fewest k (a power of
 * two) whose chunks/k sub-grants hold as many slots as one whole grant (its grant count is
 * a hard cap, S5). Any other size (issue 44 R2): the fewest k whose tail wastes at most 1/8
 * of the sub-grant, so that a size of its own (values of random lengths) takes little more
 * than its bytes, not a whole grant for a few slots. */
static unsigned ocl_chunks_for(const fx_owner_t *o, const oclaims_t *c, uint64_t grant_bytes, uint64_t slot_size)
{
    uint64_t whole = grant_bytes / slot_size;
    if (o->cfg.has_expected && slot_size == fx_slot_size_for(o->cfg.expected_value_len)) {
        for (unsigned k = 1; k < c->chunks; k *= 2) {
            uint64_t b = k * c->chunk_bytes, total = b / slot_size * (c->chunks / k);
            if (b >= slot_size && total >= whole) return k;
        }
        return c->chunks;
    }
    for (unsigned k = 1; k < c->chunks; k++) {
        uint64_t b = k * c->chunk_bytes;
        if (b >= slot_size && b % slot_size * 8 <= b) return k;
    }
    return c->chunks;
}

FX_INTERNAL uint64_t fx_oclaims_carve_bytes(fx_owner_t *o, uint64_t slot_size)
{
    oclaims_t *c = o->claims;
    if (!slot_size || slot_size > o->cfg.grant_bytes) return o->cfg.grant_bytes;
    return ocl_chunks_for(o, c, o->cfg.grant_bytes, slot_size) * c->chunk_bytes;
}

static uint32_t ocl_mask(unsigned k) { return k >= 32 ? UINT32_MAX : (1u << k) - 1; }

FX_INTERNAL uint64_t fx_oclaims_retiring_slots(fx_owner_t *o, uint64_t slot_size)
{
    oclaims_t *c = o->claims;
    if (!c || !slot_size || slot_size > o->cfg.grant_bytes) return 0;
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    unsigned k = ocl_chunks_for(o, c, o->cfg.grant_bytes, slot_size);
    uint64_t per = (uint64_t)k * c->chunk_bytes / slot_size, n = 0;
    uint32_t m = ocl_mask(k);
    bool pow2 = (k & (k - 1)) == 0; /* as ocl_carve: power-of-two runs aligned */
    for (size_t i = 0; i < c->n_grants; i++) {
        uint32_t used = c->grant_used[i];
        bool retiring = false;
        for (unsigned at = 0; at < c->chunks; at++) {
            fx_slot_grant_stats_t g;
            if (!(c->grant_starts[i] & (1u << at)) ||
                fx_slot_pool_grant_stats(pool, fx_ocl_sub_id(c, i, at), &g) != FLUXON_OK || !g.retiring)
                continue;
            retiring = true;
            used &= ~(ocl_mask((unsigned)(g.bytes / c->chunk_bytes)) << at); /* free once empty */
        }
        for (unsigned at = 0; retiring && at + k <= c->chunks; at += pow2 ? k : 1)
            if (!(used & (m << at))) { /* first fit, as a claim carves */
                used |= m << at;
                n += per;
            }
    }
    return n;
}

/* A sub-grant of slot_size from free chunks (master grants already cut first, so that
 * empty ones stay whole). A size no grant serves yet gets no more chunks than hold the
 * need slots its claim waits for (issue 44 R2: a value length of its own, as with random
 * lengths, would leave the other slots of a larger sub-grant free for good); a size in use
 * (it repeats) gets ocl_chunks_for's. need 0: ocl_chunks_for's. Returns whether one was added. */
static bool ocl_carve(fx_owner_t *o, uint64_t slot_size, uint64_t need)
{
    oclaims_t *c = o->claims;
    unsigned k = ocl_chunks_for(o, c, o->cfg.grant_bytes, slot_size);
    if (need && !fx_slot_pool_class_grants(fx_ostore_pool(o), slot_size)) {
        uint64_t fit = (need * slot_size + c->chunk_bytes - 1) / c->chunk_bytes; /* chunks holding need slots */
        while (fit < k && fit * c->chunk_bytes / slot_size < need) fit++;
        k = (unsigned)FX_MIN((uint64_t)k, fit);
    }
    if (c->used_chunks + k > (uint64_t)c->n_grants * c->chunks) return false; /* not that many free: O(1) */
    c->claim_scans++;
    uint32_t m = ocl_mask(k);
    bool pow2 = (k & (k - 1)) == 0; /* aligned: power-of-two runs never straddle each other */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < c->n_grants; i++) {
            if ((c->grant_used[i] != 0) != (pass == 0)) continue;
            for (unsigned at = 0; at + k <= c->chunks; at += pow2 ? k : 1) { /* first fit */
                if (c->grant_used[i] & (m << at)) continue;
                int rc = fx_slot_pool_add_grant_sized(fx_ostore_pool(o), fx_ocl_sub_id(c, i, at),
                                                      c->grant_offsets[i] + at * c->chunk_bytes, k * c->chunk_bytes,
                                                      slot_size);
                if (rc != FLUXON_OK) {
                    FX_ERROR("cannot carve %u chunks of grant %llu for %llu-byte slots: %s", k,
                             (unsigned long long)c->grant_ids[i], (unsigned long long)slot_size,
                             fluxon_status_string(rc));
                    return false;
                }
                c->grant_used[i] |= m << at;
                c->grant_starts[i] |= 1u << at;
                c->used_chunks += k;
                c->grant_idle_ms[i] = 0;
                return true;
            }
        }
    return false;
}

/* Takes the (idle) sub-grant starting at chunk `at` of master grant i out of the pool. */
FX_INTERNAL bool fx_ocl_uncarve(fx_owner_t *o, size_t i, unsigned at)
{
    oclaims_t *c = o->claims;
    fx_slot_grant_stats_t g;
    uint64_t id = fx_ocl_sub_id(c, i, at);
    if (fx_slot_pool_grant_stats(fx_ostore_pool(o), id, &g) != FLUXON_OK ||
        fx_slot_pool_remove_grant(fx_ostore_pool(o), id) != FLUXON_OK)
        return false;
    unsigned k = (unsigned)(g.bytes / c->chunk_bytes);
    c->grant_used[i] &= ~(ocl_mask(k) << at);
    c->grant_starts[i] &= ~(1u << at);
    c->used_chunks -= k;
    return true;
}

/* Does a queued claim (other than `except`) want slots of slot_size? */
static bool ocl_class_wanted(oclaims_t *cs, uint64_t slot_size, const owner_claim_t *except)
{
    for (owner_claim_t *q = cs->claims; q; q = q->next)
        if (q != except && q->got < q->count && fx_slot_size_for(q->value_len) == slot_size) return true;
    return false;
}

/* An idle sub-grant (every slot free) whose size no other queued claim wants is taken
 * apart, so its chunks can be carved for claim c's size (same master grant, so the master's
 * record does not change). Retiring ones first (eviction emptied them for this). Returns
 * whether one was. */
static bool ocl_free_idle_one(fx_owner_t *o, const owner_claim_t *c)
{
    oclaims_t *cs = o->claims;
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    uint64_t want = fx_slot_size_for(c->value_len);
    if (!fx_slot_pool_idle_grants(pool)) return false; /* issue 44 P2: nothing idle, no scan */
    cs->claim_scans++;
    size_t best = SIZE_MAX;
    unsigned best_at = 0;
    bool best_retiring = false;
    for (size_t i = 0; i < cs->n_grants; i++)
        for (unsigned at = 0; at < cs->chunks; at++) {
            if (!(cs->grant_starts[i] & (1u << at))) continue;
            fx_slot_grant_stats_t g;
            if (fx_slot_pool_grant_stats(pool, fx_ocl_sub_id(cs, i, at), &g) != FLUXON_OK || g.free != g.slots) continue;
            if (g.slot_size == want && !g.retiring) continue; /* would already have served it */
            if (!g.retiring && ocl_class_wanted(cs, g.slot_size, c)) continue;
            if (best == SIZE_MAX || (g.retiring && !best_retiring)) {
                best = i;
                best_at = at;
                best_retiring = g.retiring;
            }
        }
    if (best == SIZE_MAX || !fx_ocl_uncarve(o, best, best_at)) return false;
    cs->grants_recarved++;
    return true;
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
            int64_t over = fx_oclaims_overlap(o, ack.offsets.v[i], o->cfg.grant_bytes);
            if (over >= 0) { /* never used: its slots would be handed out twice */
                c->grant_overlaps++;
                FX_ERROR("grant %llu at %llu overlaps grant %lld this owner holds: not used (the master's view of "
                         "this segment differs from this owner's)", (unsigned long long)ack.grant_ids.v[i],
                         (unsigned long long)ack.offsets.v[i], (long long)over);
                continue;
            }
            size_t before = c->n_grants;
            ocl_grant_keep(c, ack.grant_ids.v[i], ack.offsets.v[i]);
            if (c->n_grants == before) {
                FX_ERROR("grant %llu at %llu: out of memory recording it", (unsigned long long)ack.grant_ids.v[i],
                         (unsigned long long)ack.offsets.v[i]);
                continue;
            }
            FX_INFO("grant %llu at %llu received (%zu held)", (unsigned long long)ack.grant_ids.v[i],
                    (unsigned long long)ack.offsets.v[i], c->n_grants);
            /* prewarm: carved for the expected size now; otherwise on demand */
            while (prewarm && ocl_carve(o, slot_size, 0)) {}
            c->policy.grant_added(o, slot_size);
            c->grants_received++;
            grew = true;
        }
    } else {
        fx_body_error_t e = {{0}};
        char why[sizeof c->refusal] = "";
        if (h && fx_body_error_decode(body, h->body_len, &e, arena) == FLUXON_OK) fx_str_copy(e.message, why, sizeof why);
        if (status == FLUXON_ERR_BUSY) /* the master's range quarantine (W2): said by the master */
            FX_INFO("grant request refused for now (the master's range quarantine of this segment): evicting within "
                    "the grants held, asking again in a second");
        else if (status == FLUXON_ERR_NO_SPACE && strcmp(why, c->refusal) == 0)
            FX_DEBUG("grant request refused again: %s", why); /* said once (WARN) until a grant comes */
        else if (status == FLUXON_ERR_NO_SPACE) /* the master names what holds the segment */
            FX_WARN("grant request refused: %s%s%s; claims wait for eviction within the %zu grants held",
                    fluxon_status_string(status), why[0] ? ": " : "", why, c->n_grants);
        else
            FX_WARN("grant request failed: %s%s%s", fluxon_status_string(status), why[0] ? ": " : "", why);
        if (status == FLUXON_ERR_NO_SPACE) snprintf(c->refusal, sizeof c->refusal, "%s", why);
        /* no room, or BUSY: asked again in a second */
        if (status == FLUXON_ERR_NO_SPACE || status == FLUXON_ERR_BUSY) c->grant_nospace_ms = FX_MAX(fx_now_ms(), 1ull);
    }
    if (grew) c->grant_nospace_ms = 0;
    if (grew) c->refusal[0] = 0;
    if (grew) fx_ocl_idle_arm(o);
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
    if (c->n_grants >= c->max_grants) return;
    ocl_grant_send(o, fx_slot_size_for(o->cfg.expected_value_len), FX_MIN(c->max_grants - c->n_grants, 64u), true);
}

static void ocl_grant_request(fx_owner_t *o)
{
    oclaims_t *cs = o->claims;
    if (cs->grant_inflight || !cs->claims) return;
    if (!fx_olink_conn(o) || cs->n_grants >= cs->max_grants || fx_oclaims_segment_full(o)) {
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
    count = FX_MIN(count, cs->max_grants - cs->n_grants);
    count = FX_MAX(FX_MIN(count, 64u), 1u);
    if (ocl_grant_send(o, slot_size, count, false) != FLUXON_OK) ocl_serve(o, false);
}

/* A claim's deadline ends it whatever it waits for: eviction (whose rounds serve the claims
 * every 10 ms) or a GRANT, whose answer may take master_timeout_ms (3-5 s), longer than 9/10
 * of a short caller timeout: the claim then answered after its caller had given up. */
static void ocl_on_deadline(fx_reactor_t *r, fx_timer_t *t)
{
    fx_owner_t *o = FX_CONTAINER_OF(t, oclaims_t, deadline_timer)->owner;
    oclaims_t *c = o->claims;
    if (c->closing || !c->claims) return;
    ocl_serve(o, c->grant_inflight || ocl_can_grow(o)); /* past their deadline: answered short */
}

static void ocl_deadline_arm(fx_owner_t *o, uint64_t at_ms)
{
    oclaims_t *c = o->claims;
    if (at_ms == UINT64_MAX || c->closing) return;
    if (fx_timer_armed(&c->deadline_timer)) {
        if (c->deadline_at_ms <= at_ms) return;
        fx_timer_disarm(o->r, &c->deadline_timer);
    }
    uint64_t now = fx_now_ms();
    c->deadline_at_ms = FX_MAX(at_ms, now);
    fx_timer_arm(o->r, &c->deadline_timer, c->deadline_at_ms - now, ocl_on_deadline);
}

FX_INTERNAL uint64_t fx_oclaim_deadline(fx_owner_t *o, uint32_t caller_timeout_ms)
{
    uint64_t wait = o->cfg.claim_timeout_ms;
    if (caller_timeout_ms) wait = FX_MIN(wait, (uint64_t)caller_timeout_ms * 9 / 10);
    return fx_now_ms() + wait;
}

static void ocl_claim(fx_owner_t *o, uint64_t value_len, size_t count, fx_slot_ref_t *slots, uint64_t deadline_ms,
                      fx_oclaim_cb cb, void *arg, bool hint);

FX_INTERNAL void fx_oclaim(fx_owner_t *o, uint64_t value_len, size_t count, fx_slot_ref_t *slots,
                           uint64_t deadline_ms, fx_oclaim_cb cb, void *arg)
{
    ocl_claim(o, value_len, count, slots, deadline_ms, cb, arg, false);
}

static void ocl_claim(fx_owner_t *o, uint64_t value_len, size_t count, fx_slot_ref_t *slots, uint64_t deadline_ms,
                      fx_oclaim_cb cb, void *arg, bool hint)
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
    *c = (owner_claim_t){NULL, value_len, deadline_ms, false, hint, count, got, slots, cb, arg};
    /* issue 44 P2: behind a queued claim of its size it cannot be served before that one
     * (FIFO): queued without a pass over the queue (a batch of fetches queues one claim per
     * key); what serves the earlier claim (a grant, eviction) serves it next */
    uint64_t size = fx_slot_size_for(value_len);
    bool behind = cs->claims_tail && fx_slot_size_for(cs->claims_tail->value_len) == size; /* a batch: O(1) */
    for (owner_claim_t *q = cs->claims; q && !behind; q = q->next) behind = fx_slot_size_for(q->value_len) == size;
    if (cs->claims_tail) cs->claims_tail->next = c;
    else cs->claims = c;
    cs->claims_tail = c;
    if (behind) {
        ocl_deadline_arm(o, deadline_ms);
        if (!cs->grant_inflight && !ocl_can_grow(o) && hint) { /* only eviction serves it: a hint ends short */
            ocl_serve(o, false);
            return;
        }
        if (!cs->grant_inflight && !ocl_can_grow(o)) { /* at capacity: it waits for eviction */
            c->waited = true;
            cs->claim_waits++;
            cs->policy.kick(o);
        }
        return;
    }
    ocl_serve(o, cs->grant_inflight || ocl_can_grow(o)); /* carving first, then a grant or eviction */
}

FX_INTERNAL bool fx_oclaim_unless_evicting(fx_owner_t *o, uint64_t value_len, fx_slot_ref_t *slot,
                                          uint64_t deadline_ms, fx_oclaim_cb cb, void *arg)
{
    oclaims_t *cs = o->claims;
    uint64_t size = fx_slot_size_for(value_len);
    if (!cs->claims && !cs->closing && size && size <= o->cfg.grant_bytes) {
        fx_slot_pool_t *pool = fx_ostore_pool(o);
        if (fx_slot_pool_claim(pool, value_len, slot) == FLUXON_OK ||
            (ocl_carve(o, size, 1) && fx_slot_pool_claim(pool, value_len, slot) == FLUXON_OK)) {
            cb(o, arg, 1);
            return true;
        }
    }
    /* no slot now: a grant on its way (or one to ask for) serves it, as it would a put;
     * only eviction could otherwise, and a hint never waits for that */
    if (size && size <= o->cfg.grant_bytes && !cs->closing && !cs->grant_inflight && !ocl_can_grow(o)) return false;
    /* queued as a hint: should the grant not bring room for it, it ends short (ocl_serve)
     * instead of waiting for eviction, and eviction never runs for it */
    ocl_claim(o, value_len, 1, slot, deadline_ms, cb, arg, true);
    return true;
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
        if (c->hint) continue; /* eviction never runs for a hint */
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

static bool ocl_sub_reserve(oclaims_t *c, size_t n)
{
    if (n <= c->sub_cap) return true;
    uint64_t *nb = fx_realloc(c->sub_buf, n * sizeof *nb);
    if (!nb) return false;
    c->sub_buf = nb;
    c->sub_cap = n;
    return true;
}

FX_INTERNAL void fx_oclaims_pool_grants(fx_owner_t *o, fx_u64v_t *ids)
{
    oclaims_t *c = o->claims;
    size_t n = 0;
    if (ocl_sub_reserve(c, c->n_grants * c->chunks + 1))
        for (size_t i = 0; i < c->n_grants; i++)
            for (unsigned at = 0; at < c->chunks; at++)
                if (c->grant_starts[i] & (1u << at)) c->sub_buf[n++] = fx_ocl_sub_id(c, i, at);
    *ids = (fx_u64v_t){c->sub_buf, (uint32_t)n};
}

FX_INTERNAL void fx_oclaims_sub_grants(fx_owner_t *o, size_t i, fx_u64v_t *ids)
{
    oclaims_t *c = o->claims;
    size_t n = 0;
    if (i < c->n_grants && ocl_sub_reserve(c, c->chunks))
        for (unsigned at = 0; at < c->chunks; at++)
            if (c->grant_starts[i] & (1u << at)) c->sub_buf[n++] = fx_ocl_sub_id(c, i, at);
    *ids = (fx_u64v_t){c->sub_buf, (uint32_t)n};
}

FX_INTERNAL void fx_oclaims_grants(fx_owner_t *o, fx_u64v_t *ids, fx_u64v_t *offsets)
{
    oclaims_t *c = o->claims;
    *ids = (fx_u64v_t){c->grant_ids, (uint32_t)c->n_grants};
    *offsets = (fx_u64v_t){c->grant_offsets, (uint32_t)c->n_grants};
}

FX_INTERNAL void fx_oclaims_master_ready(fx_owner_t *o)
{
    fx_ocl_idle_arm(o);
    fx_ocl_return_send(o);
    ocl_prewarm(o);
    if (o->claims->claims) ocl_grant_request(o);
}

FX_INTERNAL void fx_oclaims_master_lost(fx_owner_t *o)
{
    o->claims->grant_inflight = false;
    o->claims->return_inflight = false; /* unconfirmed returns are sent again */
}

FX_INTERNAL void fx_oclaims_fail_all(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    if (!c) return;
    c->closing = true;
    fx_timer_disarm(o->r, &c->idle_timer);
    fx_timer_disarm(o->r, &c->return_timer);
    fx_timer_disarm(o->r, &c->deadline_timer);
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
    cs->claims_tail = NULL;
    fx_free(cs->grant_ids);
    fx_free(cs->grant_offsets);
    fx_free(cs->grant_idle_ms);
    fx_free(cs->grant_used);
    fx_free(cs->grant_starts);
    fx_free(cs->sub_buf);
    fx_free(cs->ret_ids);
    fx_free(cs->ret_offs);
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
    m->grants_returned = c->grants_returned;
    m->grants_recarved = c->grants_recarved;
    m->grants_returning = c->n_ret;
    m->grant_overlaps = c->grant_overlaps;
    m->claim_no_space = c->claim_no_space;
    m->claim_scans = c->claim_scans;
    m->master_grants = c->n_grants;
    m->grant_chunks = c->chunks;
}

#undef OCL_CHUNKS
#undef OCL_SUB_SHIFT
