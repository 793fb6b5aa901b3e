/* owner_evict.c — the owner's hot tier and capacity eviction (ARCHITECTURE §9, issue 7).
 *
 * Hot tier: an LRU (cache/lru.c) over this owner's COMMITTED values (local puts once
 * PUT_DONE succeeded, replicas once GET_DONE succeeded), weighted by slot_size; every
 * local hit touches it. Its capacity is a watermark (owner "hot_capacity_bytes", else
 * hot_capacity_ratio × the configured payload capacity); the configured capacity itself
 * never changes (S5).
 *
 * Eviction runs when a claim waits because the pool is at max_grants (the missing slots
 * of its class are the demand) or when the hot tier is above its watermark after an
 * admission. One round (oev_step) walks the LRU from the coldest value, expands each
 * candidate to its whole atomic group (the members of the put's atomic group that are
 * still indexed, COMMITTED and not already being evicted: A1), skips a group any member
 * of which a reader pins (Busy: counted, retried with backoff, after OEV_BUSY_MAX rounds
 * left hot), hides the chosen groups from the local index (no new local pin can start)
 * and sends ONE EVICT {keys, offsets, put_ms, put_ver} for the round. The master drops
 * exactly those replicas (the route goes with its last replica); a key replaced meanwhile
 * answers STALE and its new version is untouched. Then the entries retire (route_dead:
 * the slot frees once no holder pins it, S2; a fetch that copied from it is refused by
 * the master's GET_DONE check) — on STALE too: the old version is ours to drop. When the EVICT
 * could not be sent, or the master refused it outright, the hidden entries go back to the
 * index (the route still names them) and eviction is retried later. When its outcome is
 * uncertain (no answer in time, the connection lost after sending, a malformed answer) the
 * master may already have dropped the replicas: the entries stay hidden and the SAME
 * identities are sent again (with backoff) until the master answers; a replica it had
 * dropped then answers STALE and retires.
 *
 * Reactor thread only. Static helpers are oev_*. */
#include <stdio.h>

#include "log.h"
#include "owner_claims.h"
#include "owner_evict.h"
#include "owner_link.h"

#define OEV_BUSY_MAX 4u        /* rounds a pinned group is skipped before it is left hot */
#define OEV_TICK_MS 10u        /* while claims wait: expiry and a safety re-run */
#define OEV_RETRY_MS 100u      /* after the master could not be reached */
#define OEV_RESEND_MAX_MS 1000u /* backoff cap of an uncertain EVICT's resend */
#define OEV_BACKOFF_MAX_MS 64u /* busy backoff cap */

/* A slot class the pool holds grants of (eviction frees slots per class). */
typedef struct oev_class {
    uint64_t slot_size, slots; /* slots: in every grant of the class */
} oev_class_t;
#define OEV_MAX_CLASSES 16

typedef struct oev {
    fx_owner_t *o;
    fx_lru_t hot;          /* COMMITTED values, weighted by slot_size */
    uint64_t hot_capacity; /* bytes; the watermark, never the configured capacity (S5) */
    oev_class_t classes[OEV_MAX_CLASSES];
    size_t n_classes;
    struct oev_cohort *cohorts; /* EVICT batches waiting for the master */
    fx_timer_t kick_timer, tick_timer;
    bool in_step, closing;
    uint64_t round;
    uint32_t backoff_ms;
    uint64_t evictions, evicted_bytes, n_cohorts, busy_retries, restored, selected_bytes, debt, stale, left_hot,
        resends;
} oev_t;

/* The atomic group a version was published in: its members while they live. */
typedef struct oev_group {
    uint32_t n, live, busy_tries;
    uint64_t round;
    owner_entry_t *m[];
} oev_group_t;

/* One EVICT message in flight: the identities it names. */
typedef struct oev_cohort {
    fx_owner_t *o;
    struct oev_cohort *prev, *next;
    size_t n;
    uint64_t bytes;
    uint64_t *offsets, *put_ms, *put_ver, *slot_sizes;
    char *kbuf;       /* the keys, back to back (kept: a delayed send outlives entries) */
    uint32_t *klens;
    fx_timer_t delay; /* test fault: EVICT held back; the retry of an uncertain one */
    bool uncertain;   /* sent once without a definite answer: never restored */
    uint32_t attempts;
} oev_cohort_t;

typedef struct oev_vec {
    owner_entry_t **v;
    size_t n, cap;
} oev_vec_t;

static bool oev_vec_push(oev_vec_t *a, owner_entry_t *en)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        owner_entry_t **nv = fx_realloc(a->v, nc * sizeof *nv);
        if (!nv) return false;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = en;
    return true;
}

static owner_entry_t *oev_entry_of(fx_lru_node_t *n) { return FX_CONTAINER_OF(n, owner_entry_t, lru); }

static oev_class_t *oev_class(oev_t *kv, uint64_t slot_size)
{
    for (size_t i = 0; i < kv->n_classes; i++)
        if (kv->classes[i].slot_size == slot_size) return &kv->classes[i];
    return NULL;
}

static void oev_cohort_free(oev_cohort_t *c);

/* ---- lifecycle ---- */
static void oev_admit(fx_owner_t *o, owner_entry_t *en);
static void oev_forget(fx_owner_t *o, owner_entry_t *en);
static bool oev_claim_can_wait(fx_owner_t *o, uint64_t value_len, size_t count);
FX_INTERNAL uint32_t fx_oev_group_size(const owner_entry_t *en) { return en->group ? en->group->n : 1; }

static void oev_grant_added(fx_owner_t *o, uint64_t slot_size);

FX_INTERNAL int fx_oev_init(fx_owner_t *o)
{
    oev_t *kv = fx_calloc(1, sizeof *kv);
    if (!kv) return FLUXON_ERR_NOMEM;
    o->ev = kv;
    kv->o = o;
    fx_lru_init(&kv->hot);
    fx_timer_init(&kv->kick_timer);
    fx_timer_init(&kv->tick_timer);
    kv->backoff_ms = 1;
    uint64_t max_grants = fx_oclaims_max(o);
    if (o->cfg.hot_capacity_bytes) {
        kv->hot_capacity = o->cfg.hot_capacity_bytes;
    } else {
        uint64_t payload = max_grants * o->cfg.grant_bytes;
        if (o->cfg.has_expected) {
            uint64_t slot = fx_slot_size_for(o->cfg.expected_value_len);
            payload = max_grants * fx_slots_per_grant(o->cfg.grant_bytes, slot) * slot;
        }
        kv->hot_capacity = (uint64_t)(o->cfg.hot_capacity_ratio * (double)payload + 0.5);
    }
    fx_ostore_set_hooks(o, &(fx_ostore_hooks_t){oev_forget, oev_admit, fx_oev_kick});
    fx_oclaims_set_policy(o, &(fx_oclaims_policy_t){oev_claim_can_wait, fx_oev_kick, oev_grant_added});
    return FLUXON_OK;
}

FX_INTERNAL void fx_oev_shutdown(fx_owner_t *o)
{
    oev_t *kv = o->ev;
    if (!kv) return;
    kv->closing = true;
    fx_timer_disarm(o->r, &kv->kick_timer);
    fx_timer_disarm(o->r, &kv->tick_timer);
    /* cohorts waiting for the master are freed by their callbacks (they see the state
     * closing); one held back by a test fault was never sent: freed here */
    oev_cohort_t *c = kv->cohorts;
    kv->cohorts = NULL;
    while (c) {
        oev_cohort_t *next = c->next;
        c->prev = c->next = NULL;
        if (fx_timer_armed(&c->delay)) {
            fx_timer_disarm(o->r, &c->delay);
            oev_cohort_free(c);
        }
        c = next;
    }
}

FX_INTERNAL void fx_oev_fini(fx_owner_t *o)
{
    fx_free(o->ev);
    o->ev = NULL;
}

/* ---- hot tier ---- */
static void oev_admit(fx_owner_t *o, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    if (en->retired || en->evicting || en->state != OE_COMMITTED) return;
    fx_lru_insert(&kv->hot, &en->lru, en->slot.slot_size);
    if (kv->hot.bytes > kv->hot_capacity || fx_oclaims_waiting(o)) fx_oev_kick(o);
}

FX_INTERNAL void fx_oev_touch(fx_owner_t *o, owner_entry_t *en) { fx_lru_touch(&o->ev->hot, &en->lru); }

static void oev_forget(fx_owner_t *o, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    fx_lru_remove(&kv->hot, &en->lru);
    oev_group_t *g = en->group;
    if (g) {
        g->m[en->group_idx] = NULL;
        en->group = NULL;
        if (--g->live == 0) fx_free(g);
    }
    if (fx_oclaims_waiting(o)) fx_oev_kick(o); /* its slot may be free now */
}

FX_INTERNAL void fx_oev_group_commit(fx_owner_t *o, owner_entry_t **members, size_t n)
{
    if (n < 2) return;
    oev_group_t *g = fx_calloc(1, sizeof *g + n * sizeof g->m[0]);
    if (!g) { /* out of memory: the members are evicted one by one */
        FX_WARN("out of memory recording an atomic group of %zu values: evicted one by one", n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        owner_entry_t *en = members[i];
        if (en->group) continue; /* cannot happen: a version is published once */
        en->group = g;
        en->group_idx = g->n;
        g->m[g->n++] = en;
        g->live++;
    }
    if (!g->live) fx_free(g);
}

static void oev_grant_added(fx_owner_t *o, uint64_t slot_size)
{
    oev_t *kv = o->ev;
    oev_class_t *c = oev_class(kv, slot_size);
    if (!c && kv->n_classes < OEV_MAX_CLASSES) {
        c = &kv->classes[kv->n_classes++];
        *c = (oev_class_t){slot_size, 0};
    }
    if (c) c->slots += fx_slots_per_grant(o->cfg.grant_bytes, slot_size);
}

static bool oev_claim_can_wait(fx_owner_t *o, uint64_t value_len, size_t count)
{
    oev_t *kv = o->ev;
    if (kv->closing || !fx_olink_conn(o)) return false;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(fx_ostore_pool(o), &st);
    if (st.grants < fx_oclaims_max(o) && !fx_oclaims_segment_full(o)) return false; /* a grant failed otherwise */
    oev_class_t *c = oev_class(kv, fx_slot_size_for(value_len));
    return c && count <= c->slots; /* a claim larger than its class could never complete */
}

/* ---- rounds ---- */
static void oev_step(fx_owner_t *o);

static void oev_on_kick(fx_reactor_t *r, fx_timer_t *t)
{
    oev_step(FX_CONTAINER_OF(t, oev_t, kick_timer)->o);
}

static void oev_on_tick(fx_reactor_t *r, fx_timer_t *t)
{
    oev_step(FX_CONTAINER_OF(t, oev_t, tick_timer)->o);
}

FX_INTERNAL void fx_oev_kick(fx_owner_t *o)
{
    oev_t *kv = o->ev;
    if (!kv || kv->closing || kv->in_step || fx_timer_armed(&kv->kick_timer)) return;
    if (!fx_oclaims_waiting(o) && kv->hot.bytes <= kv->hot_capacity) return;
    fx_timer_arm(o->r, &kv->kick_timer, 0, oev_on_kick);
}

static void oev_tick_arm(fx_owner_t *o, uint32_t ms)
{
    oev_t *kv = o->ev;
    if (!kv->closing && !fx_timer_armed(&kv->tick_timer)) fx_timer_arm(o->r, &kv->tick_timer, ms, oev_on_tick);
}

/* Back into the index (unless a newer local version took the key meanwhile) and into the
 * hot tier as the coldest: it goes first next time. */
static void oev_restore(fx_owner_t *o, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    en->evicting = false;
    if (!fx_ostore_lookup(o, en->key, en->klen)) fx_ostore_index(o, en);
    fx_lru_insert_cold(&kv->hot, &en->lru, en->slot.slot_size);
    kv->restored++;
}

static void oev_cohort_free(oev_cohort_t *c)
{
    fx_free(c->kbuf);
    fx_free(c->klens);
    fx_free(c->offsets);
    fx_free(c->put_ms);
    fx_free(c->put_ver);
    fx_free(c->slot_sizes);
    fx_free(c);
}

static void oev_cohort_unlink(oev_t *kv, oev_cohort_t *c)
{
    if (c->prev) c->prev->next = c->next;
    else if (kv->cohorts == c) kv->cohorts = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* The master answered (st: per key) or could not be asked (status != OK): entries still
 * hidden under their identity retire (evicted) or go back (restored). */
static void oev_finish(fx_owner_t *o, oev_cohort_t *c, int status, const fx_body_statuses_t *stp)
{
    oev_t *kv = o->ev;
    oev_cohort_unlink(kv, c);
    fx_body_statuses_t st = stp ? *stp : (fx_body_statuses_t){{NULL, 0}};
    bool ok = status == FLUXON_OK && st.statuses.n == c->n;
    size_t restored = 0;
    for (size_t i = 0; i < c->n; i++) {
        owner_entry_t *en = fx_ostore_at(o, c->offsets[i]);
        if (!en || !en->evicting || en->put_ms != c->put_ms[i] || en->put_ver != c->put_ver[i])
            continue; /* invalidated meanwhile: already retired */
        int ks = ok ? (int)(int64_t)st.statuses.v[i] : (status == FLUXON_OK ? FLUXON_ERR_PROTOCOL : status);
        if (ks == FLUXON_OK || ks == FLUXON_ERR_STALE) {
            /* the master no longer routes this replica (STALE: the key moved on or is
             * gone, and the old version is ours to drop) */
            kv->evictions++;
            kv->evicted_bytes += en->slot.slot_size;
            kv->stale += ks == FLUXON_ERR_STALE;
            fx_ostore_retire(o, en);
        } else {
            oev_restore(o, en);
            restored++;
        }
    }
    kv->debt -= FX_MIN(kv->debt, c->bytes);
    if (restored) {
        FX_WARN("eviction of %zu values not confirmed by the master (%s): restored, retry in %u ms", restored,
                fluxon_status_string(ok ? FLUXON_ERR_INTERNAL : status), OEV_RETRY_MS);
        oev_tick_arm(o, OEV_RETRY_MS);
    }
    oev_cohort_free(c);
    fx_oev_kick(o);
}

static void oev_on_delay(fx_reactor_t *r, fx_timer_t *t);

/* The outcome of c is unknown: keep its entries hidden, send the same identities again. */
static void oev_resend_later(fx_owner_t *o, oev_cohort_t *c, int status)
{
    c->uncertain = true;
    uint32_t ms = FX_MIN(OEV_RETRY_MS << FX_MIN(c->attempts, 4u), OEV_RESEND_MAX_MS);
    c->attempts++;
    o->ev->resends++;
    FX_WARN("eviction of %zu values: outcome unknown (%s); kept hidden, sent again in %u ms", c->n,
            fluxon_status_string(status), ms);
    fx_timer_arm(o->r, &c->delay, ms, oev_on_delay);
}

static void oev_on_evict(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                         fx_arena_t *arena)
{
    oev_cohort_t *c = arg;
    if (!c->o->ev || c->o->ev->closing) { /* shut down meanwhile */
        oev_cohort_free(c);
        return;
    }
    fx_body_statuses_t st = {{NULL, 0}};
    if (status == FLUXON_OK && fx_body_statuses_decode(body, h->body_len, &st, arena) != FLUXON_OK)
        st.statuses.n = 0;
    if (status == FLUXON_OK && st.statuses.n != c->n) {
        FX_ERROR("malformed EVICT answer from the master (%u statuses for %zu values)", st.statuses.n, c->n);
        status = FLUXON_ERR_PROTOCOL;
    }
    if (status == FLUXON_ERR_TIMEOUT || status == FLUXON_ERR_UNAVAILABLE || status == FLUXON_ERR_PROTOCOL) {
        oev_resend_later(c->o, c, status); /* the master may have dropped them */
        return;
    }
    oev_finish(c->o, c, status, &st);
}

static void oev_transmit(fx_owner_t *o, oev_cohort_t *c)
{
    fx_str_t *keys = fx_calloc(c->n, sizeof *keys);
    int rc = FLUXON_ERR_NOMEM;
    if (keys) {
        size_t off = 0;
        for (size_t i = 0; i < c->n; off += c->klens[i], i++) keys[i] = (fx_str_t){c->kbuf + off, c->klens[i]};
        fx_body_evict_t b = {{keys, (uint32_t)c->n}, {c->offsets, (uint32_t)c->n}, {c->put_ms, (uint32_t)c->n},
                             {c->put_ver, (uint32_t)c->n}};
        fx_conn_t *mc = fx_olink_conn(o);
        rc = mc ? FX_RPC_CALL(mc, EVICT, evict, &b, o->cfg.master_timeout_ms, oev_on_evict, c) : FLUXON_ERR_UNAVAILABLE;
        fx_free(keys);
    }
    if (rc != FLUXON_OK && c->uncertain) {
        oev_resend_later(o, c, rc); /* an earlier send may have been applied: never restore */
    } else if (rc != FLUXON_OK) {
        FX_WARN("cannot send EVICT of %zu values: %s", c->n, fluxon_status_string(rc));
        oev_finish(o, c, rc, NULL); /* never sent: restores them */
    }
}

static void oev_on_delay(fx_reactor_t *r, fx_timer_t *t)
{
    oev_cohort_t *c = FX_CONTAINER_OF(t, oev_cohort_t, delay);
    oev_transmit(c->o, c);
}

static bool oev_evictable(const owner_entry_t *e)
{
    return e && !e->retired && !e->evicting && e->state == OE_COMMITTED && e->indexed && fx_lru_linked(&e->lru);
}

/* Sends ONE EVICT for the victims (already hidden); on failure restores them. */
static void oev_send(fx_owner_t *o, owner_entry_t **v, size_t n)
{
    oev_t *kv = o->ev;
    size_t kbytes = 0;
    for (size_t i = 0; i < n; i++) kbytes += v[i]->klen;
    oev_cohort_t *c = fx_calloc(1, sizeof *c);
    if (c) {
        c->offsets = fx_calloc(n, sizeof *c->offsets);
        c->put_ms = fx_calloc(n, sizeof *c->put_ms);
        c->put_ver = fx_calloc(n, sizeof *c->put_ver);
        c->slot_sizes = fx_calloc(n, sizeof *c->slot_sizes);
        c->klens = fx_calloc(n, sizeof *c->klens);
        c->kbuf = fx_malloc(kbytes ? kbytes : 1);
    }
    if (!c || !c->offsets || !c->put_ms || !c->put_ver || !c->slot_sizes || !c->klens || !c->kbuf) {
        if (c) oev_cohort_free(c);
        for (size_t i = 0; i < n; i++) oev_restore(o, v[i]);
        FX_WARN("eviction of %zu values: out of memory; retry in %u ms", n, OEV_RETRY_MS);
        oev_tick_arm(o, OEV_RETRY_MS);
        return;
    }
    c->o = o;
    c->n = n;
    fx_timer_init(&c->delay);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        owner_entry_t *en = v[i];
        memcpy(c->kbuf + off, en->key, en->klen);
        off += en->klen;
        c->klens[i] = en->klen;
        c->offsets[i] = en->slot.offset;
        c->put_ms[i] = en->put_ms;
        c->put_ver[i] = en->put_ver;
        c->slot_sizes[i] = en->slot.slot_size;
        c->bytes += en->slot.slot_size;
    }
    c->next = kv->cohorts;
    if (kv->cohorts) kv->cohorts->prev = c;
    kv->cohorts = c;
    kv->n_cohorts++;
    kv->selected_bytes += c->bytes;
    kv->debt += c->bytes;
    if (fx_owner_fault_delay(o, "EVICT")) { /* test-only: the master hears of this cohort fault_ms later */
        FX_WARN("test fault: EVICT of %zu values held back %u ms", n, o->cfg.fault_ms);
        fx_timer_arm(o->r, &c->delay, o->cfg.fault_ms, oev_on_delay);
        return;
    }
    oev_transmit(o, c);
}

/* One round: victims from the cold end, whole groups, until the demand is met. */
static bool oev_select(fx_owner_t *o, const uint64_t *sizes, uint64_t *needs, size_t nc, uint64_t excess)
{
    oev_t *kv = o->ev;
    oev_vec_t victims = {0}, hot = {0};
    uint64_t round = ++kv->round;
    bool busy = false, nomem = false;
    for (fx_lru_node_t *n = fx_lru_coldest(&kv->hot); n && !nomem; n = fx_lru_warmer(&kv->hot, n)) {
        bool more = excess > 0;
        for (size_t k = 0; k < nc; k++) more |= needs[k] > 0;
        if (!more) break;
        owner_entry_t *en = oev_entry_of(n);
        oev_group_t *g = en->group;
        if (g && g->round == round) continue; /* decided with another member */
        if (g) g->round = round;
        if (!excess) { /* only claims wait: only their classes help */
            bool useful = false;
            for (size_t k = 0; k < nc; k++) useful |= needs[k] > 0 && sizes[k] == en->slot.slot_size;
            if (!useful) continue;
        }
        owner_entry_t *one = en, **m = g ? g->m : &one;
        size_t mn = g ? g->n : 1, cnt = 0;
        bool pinned = false;
        for (size_t i = 0; i < mn; i++) {
            if (!oev_evictable(m[i])) continue;
            cnt++;
            fx_slot_info_t info;
            if (fx_slot_pool_inspect(fx_ostore_pool(o), &m[i]->slot, &info) != FLUXON_OK || info.holder_refs) pinned = true;
        }
        if (!cnt) continue;
        uint32_t *tries = g ? &g->busy_tries : &en->busy_tries;
        if (pinned) { /* Busy: a reader holds a member; skip the group this round */
            busy = true;
            kv->busy_retries++;
            if (++*tries >= OEV_BUSY_MAX) { /* bounded: leave it hot */
                *tries = 0;
                kv->left_hot++;
                for (size_t i = 0; i < mn; i++)
                    if (oev_evictable(m[i]) && !oev_vec_push(&hot, m[i])) nomem = true;
            }
            continue;
        }
        *tries = 0;
        for (size_t i = 0; i < mn && !nomem; i++) {
            owner_entry_t *e = m[i];
            if (!oev_evictable(e)) continue;
            if (!oev_vec_push(&victims, e)) {
                nomem = true;
                break;
            }
            e->evicting = true; /* decided: later members of the walk skip it */
            for (size_t k = 0; k < nc; k++)
                if (sizes[k] == e->slot.slot_size && needs[k]) {
                    needs[k]--;
                    break;
                }
            excess -= FX_MIN(excess, e->slot.slot_size);
        }
    }
    for (size_t i = 0; i < hot.n; i++) fx_lru_touch(&kv->hot, &hot.v[i]->lru);
    if (nomem) FX_WARN("eviction round: out of memory for its victim list");
    for (size_t i = 0; i < victims.n; i++) { /* hidden: no new local pin can start */
        owner_entry_t *e = victims.v[i];
        fx_ostore_hide(o, e);
        fx_lru_remove(&kv->hot, &e->lru);
    }
    if (victims.n) oev_send(o, victims.v, victims.n);
    fx_free(victims.v);
    fx_free(hot.v);
    return busy;
}

static void oev_step(fx_owner_t *o)
{
    oev_t *kv = o->ev;
    if (!kv || kv->closing) return;
    kv->in_step = true;
    fx_oclaims_pump(o); /* slots freed since: serve waiting claims first */
    uint64_t sizes[OEV_MAX_CLASSES], needs[OEV_MAX_CLASSES];
    size_t nc = fx_oclaims_deficit(o, sizes, needs, OEV_MAX_CLASSES);
    bool want = false, busy = false;
    for (size_t k = 0; k < nc; k++) { /* minus slots already on their way */
        uint64_t coming = 0;
        for (oev_cohort_t *c = kv->cohorts; c; c = c->next)
            for (size_t i = 0; i < c->n; i++) coming += c->slot_sizes[i] == sizes[k];
        needs[k] = needs[k] > coming ? needs[k] - coming : 0;
        want |= needs[k] > 0;
    }
    uint64_t excess = kv->hot.bytes > kv->hot_capacity ? kv->hot.bytes - kv->hot_capacity : 0;
    if ((want || excess) && fx_olink_conn(o)) busy = oev_select(o, sizes, needs, nc, excess);
    kv->backoff_ms = busy ? FX_MIN(kv->backoff_ms * 2, OEV_BACKOFF_MAX_MS) : 1;
    if (busy) oev_tick_arm(o, kv->backoff_ms);
    else if (fx_oclaims_waiting(o)) oev_tick_arm(o, OEV_TICK_MS);
    kv->in_step = false;
}

/* ---- stats ---- */
FX_INTERNAL void fx_oev_stats_json(fx_owner_t *o, fx_jbuf_t *j)
{
    oev_t *kv = o->ev;
    fx_jbuf_printf(j,
                   "\"hot_bytes\":%llu,\"hot_values\":%llu,\"hot_capacity_bytes\":%llu,\"evictions\":%llu,"
                   "\"evicted_bytes\":%llu,\"cohorts\":%llu,\"busy_retries\":%llu,\"left_hot\":%llu,"
                   "\"restored\":%llu,\"selected_bytes\":%llu,\"eviction_debt\":%llu,\"evict_stale\":%llu,"
                   "\"evict_resends\":%llu",
                   (unsigned long long)kv->hot.bytes, (unsigned long long)kv->hot.count,
                   (unsigned long long)kv->hot_capacity, (unsigned long long)kv->evictions,
                   (unsigned long long)kv->evicted_bytes, (unsigned long long)kv->n_cohorts,
                   (unsigned long long)kv->busy_retries, (unsigned long long)kv->left_hot,
                   (unsigned long long)kv->restored, (unsigned long long)kv->selected_bytes,
                   (unsigned long long)kv->debt, (unsigned long long)kv->stale, (unsigned long long)kv->resends);
}

#undef OEV_BUSY_MAX
#undef OEV_TICK_MS
#undef OEV_RETRY_MS
#undef OEV_RESEND_MAX_MS
#undef OEV_BACKOFF_MAX_MS
