/* owner_evict.c — the owner's hot tier and capacity eviction (ARCHITECTURE §9, issues 7, 15).
 *
 * Hot tier: the eviction policy (cache/evict_policy.c, owner "eviction_policy") over this
 * owner's COMMITTED values (local puts once PUT_DONE succeeded, replicas once GET_DONE
 * succeeded), weighted by slot_size; every local hit touches it; the last atomic group of
 * a put batch of two or more (a chain's tail) is admitted as the first victim. Its capacity is a watermark (owner "hot_capacity_bytes", else
 * hot_capacity_ratio × the configured payload capacity); the configured capacity itself
 * never changes (S5).
 *
 * Eviction runs when a claim waits because the pool is at max_grants (the missing slots
 * of its class are the demand) or when the hot tier is above its watermark after an
 * admission. One round (oev_step) takes the policy's victims in order, expands each
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
 * Sizes (issue 15): when a waiting size finds too few victims of its own size, the
 * sub-grants of the master grant whose values are coldest are retired (they serve no new
 * claim) and emptied the same way, whole groups, then carved again for the waiting size
 * (claims.c; the grant-level choice is in evict_grants.c). When claims wait and nothing could be chosen for OEV_STUCK_MS (everything
 * held), they answer NO_SPACE with a line naming the sizes, grants and holds.
 *
 * Write-back ahead of eviction is in evict_wb.c, the EVICT messages in evict_send.c (their
 * shared state: owner_evict_int.h). Reactor thread only. Static helpers are oev_*. */
#include <stdio.h>

#include "log.h"
#include "owner_claims.h"
#include "owner_disk.h"
#include "owner_evict_grants.h"
#include "owner_evict_int.h"
#include "owner_oracle.h"
#include "owner_link.h"
#include "owner_replica.h"

#define OEV_BUSY_MAX 4u        /* rounds a pinned group is skipped before it is left hot */
#define OEV_TICK_MS 10u        /* while claims wait: expiry and a safety re-run */
#define OEV_BACKOFF_MAX_MS 64u /* busy backoff cap */

#define OEV_MAX_CLASSES 16 /* slot sizes of waiting claims considered per round */
#define OEV_STUCK_MS 1000u /* nothing evictable this long: waiting claims answer NO_SPACE */
#define OEV_WB_STUCK_MS 100u /* the write-back queue full and no copy ended this long: not moving */
#define OEV_COLD_OTHERS 8  /* coldest values of other sizes a round remembers (grant retirement) */

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


/* ---- lifecycle ---- */
static void oev_admit(fx_owner_t *o, owner_entry_t *en);
static void oev_forget(fx_owner_t *o, owner_entry_t *en);
static bool oev_claim_can_wait(fx_owner_t *o, uint64_t value_len, size_t count);
FX_INTERNAL uint32_t fx_oev_group_size(const owner_entry_t *en) { return en->group ? en->group->n : 1; }
FX_INTERNAL owner_entry_t *const *fx_oev_group_members(owner_entry_t *const *one, const owner_entry_t *en, size_t *n_p)
{
    *n_p = en->group ? en->group->n : 1;
    return en->group ? (owner_entry_t *const *)en->group->m : one;
}

static void oev_grant_added(fx_owner_t *o, uint64_t slot_size);
static void oev_claims_idle(fx_owner_t *o);

FX_INTERNAL int fx_oev_init(fx_owner_t *o)
{
    oev_t *kv = fx_calloc(1, sizeof *kv);
    if (!kv) return FLUXON_ERR_NOMEM;
    o->ev = kv;
    kv->o = o;
    fx_timer_init(&kv->kick_timer);
    fx_timer_init(&kv->tick_timer);
    kv->backoff_ms = 1;
    kv->wb_epoch = 1;
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
    /* the ghost remembers as many keys as the hot tier holds values (of the expected size) */
    uint64_t unit = o->cfg.has_expected ? fx_slot_size_for(o->cfg.expected_value_len) : FX_SLOT_PAGE;
    uint32_t ghost_n = (uint32_t)FX_MIN(kv->hot_capacity / unit, 1u << 22);
    /* issue 38: with write-back on, lru is the default: with a CPU tier of the hot tier's
     * size and second_touch admission it restores 28.31 % of the conversation trace's
     * lookups (29 % of the evicted values copied), s3fifo 26.59 % (23 % copied): s3fifo's
     * probation evicts a value before its first reuse, and a copy is made only at the
     * second (fluxon demo --simulate --cpu-owners 1 prints both) */
    if (!o->cfg.eviction_policy_set && o->cfg.writeback_watermark > 0) o->cfg.eviction_policy = FX_EVICT_LRU;
    if (o->cfg.eviction_policy == FX_EVICT_S3FIFO && ghost_n) {
        kv->ghost = fx_calloc(fx_evp_ghost_words(ghost_n), sizeof *kv->ghost);
        if (!kv->ghost) return FLUXON_ERR_NOMEM;
    }
    fx_evp_init(&kv->hot, o->cfg.eviction_policy, kv->hot_capacity, kv->ghost, kv->ghost ? ghost_n : 0);
    if ((o->cfg.writeback_watermark > 0 && o->cfg.writeback_admission == FX_WB_ADMIT_SECOND_TOUCH) ||
        (o->cfg.disk_path[0] && o->cfg.disk_admission == FX_WB_ADMIT_SECOND_TOUCH)) { /* issue 39: disk.admission too */
        /* one random line a put or hit: on huge pages, or each access also missed the TLB
         * (the GPU owner's PUT_DONE in the trace replay: 6.49-6.63 -> 4.02 us a batch of
         * 18 keys, FLUXON_PROFILE, one CPU; a prefetch of the batch's lines added nothing) */
        kv->seen_bytes = fx_freq_sketch_bytes(kv->hot_capacity / unit);
        uint8_t *counters = fx_huge_map(kv->seen_bytes);
        if (!counters) return FLUXON_ERR_NOMEM;
        fx_freq_sketch_init(&kv->seen, kv->hot_capacity / unit, counters);
    }
    if (fx_odisk_on(o) && fx_reactor_add_idle_hook(o->r, fx_oevs_stage_pump, o, 0) != FLUXON_OK) return FLUXON_ERR_NOMEM;
    fx_ostore_set_hooks(o, &(fx_ostore_hooks_t){oev_forget, oev_admit, fx_oev_kick});
    fx_oclaims_set_policy(o, &(fx_oclaims_policy_t){oev_claim_can_wait, fx_oev_kick, oev_grant_added, oev_claims_idle});
    return fx_oevq_init(o); /* issue 42: the tenants' quotas and guarantees */
}

FX_INTERNAL void fx_oev_shutdown(fx_owner_t *o)
{
    oev_t *kv = o->ev;
    if (!kv) return;
    kv->closing = true;
    fx_timer_disarm(o->r, &kv->kick_timer);
    fx_timer_disarm(o->r, &kv->tick_timer);
    fx_reactor_del_idle_hook(o->r, fx_oevs_stage_pump, o);
    /* cohorts waiting for the master are freed by their callbacks (they see the state
     * closing); one held back by a test fault or still staging was never sent: freed here */
    oev_cohort_t *c = kv->cohorts;
    kv->cohorts = NULL;
    while (c) {
        oev_cohort_t *next = c->next;
        c->prev = c->next = NULL;
        if (fx_timer_armed(&c->delay) || c->staging) {
            fx_timer_disarm(o->r, &c->delay);
            fx_oevs_cohort_free(c);
        }
        c = next;
    }
}

FX_INTERNAL void fx_oev_fini(fx_owner_t *o)
{
    if (o->ev) fx_free(o->ev->ghost);
    if (o->ev) fx_huge_unmap(o->ev->seen.c, o->ev->seen_bytes);
    if (o->ev) fx_free(o->ev->dc);
    if (o->ev) fx_oevq_fini(o);
    fx_free(o->ev);
    o->ev = NULL;
}

/* ---- hot tier ---- */
/* The hot tier's bytes against its watermark: the policy's and the pinned values' (issue
 * 42: pins take their share of the hot tier, the unpinned values the rest). */
static uint64_t oev_held(const oev_t *kv) { return fx_oevq_bytes(kv) + kv->pinned_bytes; }

static void oev_admit(fx_owner_t *o, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    if (en->retired || en->evicting || en->state != OE_COMMITTED) return;
    fx_oevq_place(o, en); /* issue 42: its tenant's bytes; its tenant's policy when managed */
    fx_evp_insert(fx_oevq_pol(kv, en), &en->lru, en->slot.slot_size, fx_oev_key_hash(en));
    /* a no-op without second_touch admission; the count is read where it is written */
    en->seen_twice = fx_freq_sketch_add(&kv->seen, en->lru.key) >= 2;
    if (kv->pin.admitted) kv->pin.admitted(o, en); /* issue 42: its tenant's bytes */
    if (oev_held(kv) > kv->hot_capacity || fx_oclaims_waiting(o) || (en->in_tq && fx_oevq_over(o))) fx_oev_kick(o);
}

FX_INTERNAL void fx_oev_touch(fx_owner_t *o, owner_entry_t *en)
{
    if (en->pin_until_ms && o->ev->pin.touched) o->ev->pin.touched(o, en); /* issue 42: refresh on hit */
    if (fx_evp_linked(&en->lru)) fx_oevw_moved(o->ev, en);
    fx_evp_touch(fx_oevq_pol(o->ev, en), &en->lru);
    /* a hit admits the value without the sketch: the count its put left there already makes
     * a later put of the key (after its eviction) its second (the add at a first hit cost
     * 0.4 us of CPU a request in the replay with a CPU owner; hits alike within the noise) */
    if (fx_evp_linked(&en->lru)) en->seen_twice = true;
    if (en->group) { /* any member's count may now admit the group */
        for (uint32_t i = 0; i < en->group->n; i++)
            if (en->group->m[i]) en->group->m[i]->wb_rejected = false;
    } else {
        en->wb_rejected = false;
    }
    fx_orepl_touched(en); /* issue 16 */
}

FX_INTERNAL void fx_oev_batch_tail(fx_owner_t *o, owner_entry_t **members, size_t n)
{
    oev_t *kv = o->ev;
    if (kv->hot.kind == FX_EVICT_LRU) return; /* today's lru: admitted in order */
    for (size_t i = n; i-- > 0;) {
        owner_entry_t *en = members[i];
        if (!fx_evp_linked(&en->lru)) continue;
        fx_oevw_moved(kv, en);
        fx_evp_insert_cold(fx_oevq_pol(kv, en), &en->lru, en->lru.weight, en->lru.key);
    }
}

static void oev_forget(fx_owner_t *o, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    if (en->q_cause) fx_oevq_settled(o, en, false); /* issue 42: no longer its tenant's selected bytes */
    /* out of its policy while its tenant is known: pin.forgotten forgets the tenant, and the
     * policy of a value in its tenant's own one is found by that tenant (a new user's crash:
     * the shared table's entry before the tenants' was taken, the tenant's policy kept its
     * bytes, and a later eviction round found its queue empty with bytes in it) */
    fx_oevw_moved(kv, en);
    fx_evp_remove(fx_oevq_pol(kv, en), &en->lru);
    en->in_tq = false;
    if (kv->pin.forgotten) kv->pin.forgotten(o, en); /* issue 42: unpinned, its tenant's bytes */
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

/* a grant serves waiting claims: the "nothing evictable" clock starts again */
static void oev_grant_added(fx_owner_t *o, uint64_t slot_size)
{
    if (o->ev) o->ev->stuck_since_ms = 0;
}

/* no claim waits: the next one starts its own clock (values may turn evictable meanwhile,
 * a pin ending, a reader releasing, with no round to see it) */
static void oev_claims_idle(fx_owner_t *o)
{
    if (o->ev) o->ev->stuck_since_ms = 0; /* NULL: shutting down (claims fail) */
}

static bool oev_claim_can_wait(fx_owner_t *o, uint64_t value_len, size_t count)
{
    oev_t *kv = o->ev;
    if (kv->closing || !fx_olink_conn(o)) return false;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(fx_ostore_pool(o), &st);
    uint64_t held = fx_oclaims_count(o);
    if (held < fx_oclaims_max(o) && !fx_oclaims_segment_full(o)) return false; /* a grant failed otherwise */
    uint64_t per = fx_slots_per_grant(o->cfg.grant_bytes, fx_slot_size_for(value_len));
    uint64_t grants = FX_MAX(held, fx_oclaims_max(o));
    if (count > per * grants) { /* could never complete, whatever is evicted */
        kv->no_space_fast++;
        fx_oevg_no_space_log(o, value_len, count, "more than every grant re-carved to this size holds",
                             &kv->no_space_log_ms);
        return false;
    }
    if (kv->stuck_since_ms && fx_now_ms() - kv->stuck_since_ms >= OEV_STUCK_MS) {
        kv->no_space_fast++;
        fx_oevg_no_space_log(o, value_len, count, "nothing was evictable for OEV_STUCK_MS (1 s): every value in the grants held is pinned, read or being written",
                             &kv->no_space_log_ms);
        return false;
    }
    return true;
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
    if (!fx_oclaims_waiting(o) && oev_held(kv) <= kv->hot_capacity && !fx_oevq_over(o)) return;
    fx_timer_arm(o->r, &kv->kick_timer, 0, oev_on_kick);
}

FX_INTERNAL void fx_oev_tick_arm(fx_owner_t *o, uint32_t ms)
{
    oev_t *kv = o->ev;
    if (kv->closing) return;
    if (fx_timer_armed(&kv->tick_timer)) {
        if (kv->tick_at_ms <= fx_now_ms() + ms) return;
        fx_timer_disarm(o->r, &kv->tick_timer);
    }
    kv->tick_at_ms = fx_now_ms() + ms;
    fx_timer_arm(o->r, &kv->tick_timer, ms, oev_on_tick);
}

/* One round's decisions: the victims (hidden at the end), groups left hot, the demand. */
typedef struct oev_round {
    uint64_t round;
    oev_vec_t victims, hot;
    bool busy, nomem;
    const uint64_t *sizes;
    uint64_t *needs;
    size_t nc;
    uint64_t excess;
    /* issue 44 R2: bytes of colder values of other sizes the walk passed over; a waiting
     * size whose next victim comes after more than a sub-grant of them (limits[k]) is
     * blocked: its own values are hotter, a grant of other sizes is retired instead */
    uint64_t passed;
    const uint64_t *limits;
    uint32_t blocked; /* bit k: sizes[k] takes no more victims of its own this round */
    uint64_t cold_other[OEV_COLD_OTHERS]; /* segment offsets of the first values of sizes no
                                           * claim waits for the walk met, coldest first:
                                           * the grants to retire (P4) */
    size_t n_cold_other;
    /* issue 42 quotas: the policy being walked; own: the tenant (index + 1) whose quota the
     * walk serves (0: pressure); guarded: a group was kept for its tenant's guarantee (the
     * walk of that tenant stops) */
    fx_evp_t *pol;
    uint32_t own;
    bool guarded;
} oev_round_t;

/* Decides en's whole atomic group (A1): victims, or skipped as Busy when a reader pins a
 * member (after OEV_BUSY_MAX rounds left hot). A group without a complete copy is never
 * waited for: a claim that reaches it drops it (evicted without its copy, counted). */
static void oev_take(fx_owner_t *o, oev_round_t *rd, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    oev_group_t *g = en->group;
    owner_entry_t *one = en, **m = g ? g->m : &one;
    size_t mn = g ? g->n : 1, cnt = 0;
    bool pinned = false;
    for (size_t i = 0; i < mn; i++) {
        if (m[i] && m[i]->pin_until_ms) return; /* issue 42: a pinned member keeps its group whole */
        if (!fx_oevg_evictable(m[i])) continue;
        cnt++;
        fx_slot_info_t info;
        if (fx_slot_pool_inspect(fx_ostore_pool(o), &m[i]->slot, &info) != FLUXON_OK || info.holder_refs) pinned = true;
    }
    if (!cnt) return;
    uint64_t gbytes = 0; /* issue 42: a tenant under its guarantee keeps the group whole */
    for (size_t i = 0; i < mn; i++)
        if (fx_oevg_evictable(m[i])) gbytes += m[i]->slot.slot_size;
    if (!fx_oevq_may_take(o, en, gbytes, rd->own)) {
        rd->guarded = true;
        return;
    }
    uint32_t *tries = g ? &g->busy_tries : &en->busy_tries;
    if (pinned) { /* Busy: a reader holds a member; skip the group this round */
        rd->busy = true;
        kv->busy_retries++;
        if (++*tries >= OEV_BUSY_MAX) { /* bounded: leave it hot */
            *tries = 0;
            kv->left_hot++;
            for (size_t i = 0; i < mn; i++)
                if (fx_oevg_evictable(m[i]) && !oev_vec_push(&rd->hot, m[i])) rd->nomem = true;
        }
        return;
    }
    *tries = 0;
    bool wb = o->cfg.writeback_watermark > 0, admitted = wb && fx_oevw_admit(o, en);
    for (size_t i = 0; i < mn && !rd->nomem; i++) {
        owner_entry_t *e = m[i];
        if (!fx_oevg_evictable(e)) continue;
        if (wb) { /* issue 38: demoted, or dropped without a copy (and why); counted once evicted */
            int rs = fx_orepl_state(e);
            e->ev_cause = rs == OREPL_COPIED     ? OEV_CAUSE_COPIED
                          : rs == OREPL_INFLIGHT ? OEV_CAUSE_COPYING
                          : rs == OREPL_FAILED   ? OEV_CAUSE_FAILED
                          : admitted             ? OEV_CAUSE_BEHIND
                                                 : OEV_CAUSE_NOT_ADMITTED;
        }
        if (!oev_vec_push(&rd->victims, e)) {
            rd->nomem = true;
            break;
        }
        e->evicting = true; /* decided: later members of the walk skip it */
        fx_oracle_entry(o, "chosen for eviction", e, NULL); /* test.value_oracle: still its key's bytes */
        fx_oevq_chosen(o, e, rd->own ? OEV_Q_QUOTA : OEV_Q_PRESSURE);
        fx_oevw_moved(kv, e);
        fx_evp_evicted(fx_oevq_pol(kv, e), &e->lru);
        for (size_t k = 0; k < rd->nc; k++)
            if (rd->sizes[k] == e->slot.slot_size && rd->needs[k]) {
                rd->needs[k]--;
                break;
            }
        rd->excess -= FX_MIN(rd->excess, e->slot.slot_size);
    }
}

/* writeback_max_stall_ms: whether claims may still wait for copies (since the first round
 * that found one to wait for; the clock restarts once no claim waits). */
static bool oev_may_stall(fx_owner_t *o, bool want)
{
    oev_t *kv = o->ev;
    if (!o->cfg.writeback_max_stall_ms || !want) return false;
    uint64_t now = fx_now_ms();
    if (!kv->stall_since_ms) kv->stall_since_ms = now;
    return now - kv->stall_since_ms < o->cfg.writeback_max_stall_ms;
}

/* en's group waits for its copy: not a victim this round, its bytes count as coming. */
static void oev_wait_copy(fx_owner_t *o, oev_round_t *rd, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    owner_entry_t *one = en, **m = en->group ? en->group->m : &one;
    size_t mn = en->group ? en->group->n : 1;
    rd->busy = true;
    kv->wb_waits++;
    for (size_t i = 0; i < mn; i++) {
        owner_entry_t *e = m[i];
        if (!fx_oevg_evictable(e)) continue;
        for (size_t k = 0; k < rd->nc; k++)
            if (rd->sizes[k] == e->slot.slot_size && rd->needs[k]) {
                rd->needs[k]--;
                break;
            }
        rd->excess -= FX_MIN(rd->excess, e->slot.slot_size);
    }
}

static bool oev_demand(const oev_round_t *rd)
{
    bool more = rd->excess > 0;
    for (size_t k = 0; k < rd->nc && !more; k++) more = rd->needs[k] > 0 && !(rd->blocked & (1u << k));
    return more;
}

static bool oev_useful(const oev_round_t *rd, const owner_entry_t *en)
{
    bool useful = rd->excess > 0;
    for (size_t k = 0; k < rd->nc && !useful; k++)
        useful = rd->needs[k] > 0 && !(rd->blocked & (1u << k)) && rd->sizes[k] == en->slot.slot_size;
    return useful;
}

static bool oev_waiting_size(const oev_round_t *rd, uint64_t slot_size)
{
    for (size_t k = 0; k < rd->nc; k++)
        if (rd->sizes[k] == slot_size) return true;
    return false;
}

/* Issue 44 P4: the walk passed more values of other sizes than any waiting size accepts
 * before its own: walking on finds nothing it may take (a size no value has yet would
 * otherwise walk the whole hot tier, O(values) per round). */
static bool oev_passed_all(const oev_round_t *rd)
{
    if (rd->excess || !rd->limits) return false;
    for (size_t k = 0; k < rd->nc; k++)
        if (rd->needs[k] && !(rd->blocked & (1u << k)) && rd->passed < rd->limits[k]) return false;
    return true;
}

/* Issue 44 R2: en (useful to a waiting size only) comes after more colder values of other
 * sizes than a sub-grant of its size holds: its size stops taking its own values this round
 * (they are all hotter) and keeps its need, so that a grant of the colder sizes is retired
 * and re-carved for it. Returns whether en's size is now blocked. */
static bool oev_block(oev_round_t *rd, const owner_entry_t *en)
{
    if (rd->excess || !rd->limits) return false;
    for (size_t k = 0; k < rd->nc; k++)
        if (rd->sizes[k] == en->slot.slot_size && rd->needs[k] && rd->passed >= rd->limits[k]) {
            rd->blocked |= 1u << k;
            return true;
        }
    return false;
}

/* Victims in the policy's order, whole groups, until the demand is met. A victim that
 * cannot go now (another size than the waiting claims', pinned, decided with its group) is
 * held aside and put back where it was at the end of the round; each value is looked at
 * once per round.
 *
 * With write-back on (issue 38), a claim never waits for a copy: the walk takes groups
 * whose copy is complete first (demoted: the CPU owner keeps the only copy) and defers
 * those without one (their write-back queued), looking at most the write-back window
 * ((1 - writeback_watermark) x the hot tier) ahead; when the demand is still not met, the
 * deferred groups go in the policy's order without their copy (dropped: a later miss,
 * never a stall). The window ahead is written back by oev_lookahead after the round. */
static void oev_walk(fx_owner_t *o, oev_round_t *rd)
{
    oev_t *kv = o->ev;
    oev_vec_t held = {0}, deferred = {0};
    uint64_t ahead = fx_oevw_ahead_bytes(o), deferred_bytes = 0; /* issue 16 */
    /* copies not moving (queue full, none ended for OEV_WB_STUCK_MS): no group of the
     * window will get one soon, so none is looked for (each round walked the whole window:
     * 3,100 values per eviction with a dead CPU owner, puts 3x slower) and victims go in
     * the policy's order, without their copy (counted: dropped behind) */
    bool wb_stuck = ahead && fx_orepl_stuck(o, OEV_WB_STUCK_MS);
    if (wb_stuck) kv->wb_stuck_rounds++;
    fx_evp_t *pol = rd->pol; /* issue 42: the shared policy or one tenant's */
    rd->guarded = false;
    for (uint64_t budget = pol->count; budget && !rd->nomem && !rd->guarded; budget--) {
        if (!oev_demand(rd)) break;
        if (ahead && deferred_bytes >= ahead) break; /* the window holds no more copies */
        fx_evp_node_t *n = fx_evp_victim(pol);
        if (!n) break;
        kv->walked++;
        owner_entry_t *en = fx_oev_entry_of(n);
        oev_group_t *g = en->group;
        bool first = !(g && g->round == rd->round);
        if (!rd->own && rd->n_cold_other < OEV_COLD_OTHERS && !oev_waiting_size(rd, en->slot.slot_size))
            rd->cold_other[rd->n_cold_other++] = en->slot.offset;
        if (!oev_useful(rd, en)) {
            rd->passed += en->slot.slot_size; /* colder than what the waiting sizes take next */
            if (oev_passed_all(rd)) break; /* issue 44 P4: every waiting size would be blocked */
        } else if (first && !oev_block(rd, en)) {
            if (g) g->round = rd->round;
            if (wb_stuck || fx_oevw_clean(o, en)) {
                oev_take(o, rd, en);
            } else if (!oev_vec_push(&deferred, en)) {
                rd->nomem = true;
            } else {
                deferred_bytes += en->slot.slot_size * (g ? g->live : 1);
            }
        }
        if (fx_evp_linked(n)) { /* not taken */
            if (!oev_vec_push(&held, en)) {
                rd->nomem = true;
                break;
            }
            fx_evp_hold(pol, n);
        }
    }
    /* back in the policy where they were (a held value is not evictable: the deferred ones
     * are taken below from their places) */
    for (size_t i = held.n; i-- > 0;)
        if (!held.v[i]->evicting) fx_evp_put_back(pol, &held.v[i]->lru);
    /* the demand is still there: the deferred groups go without their copy, coldest first,
     * unless writeback_max_stall_ms lets the claims wait for them a while */
    bool stall = oev_may_stall(o, deferred.n > 0);
    for (size_t i = 0; i < deferred.n && !rd->nomem && !rd->guarded && oev_demand(rd); i++) {
        if (!oev_useful(rd, deferred.v[i])) continue;
        if (stall) oev_wait_copy(o, rd, deferred.v[i]);
        else oev_take(o, rd, deferred.v[i]);
    }
    fx_free(held.v);
    fx_free(deferred.v);
}

/* Every committed value of the retiring grants goes (whole groups): they empty, and
 * claims.c re-carves them for the sizes that wait. */
static oev_drain_cur_t *oev_drain_cur(oev_t *kv, uint64_t id)
{
    for (size_t i = 0; i < kv->ndc; i++)
        if (kv->dc[i].id == id) return &kv->dc[i];
    if (kv->ndc == kv->capdc) {
        size_t nc = kv->capdc ? kv->capdc * 2 : 8;
        oev_drain_cur_t *nd = fx_realloc(kv->dc, nc * sizeof *nd);
        if (!nd) return NULL;
        kv->dc = nd;
        kv->capdc = nc;
    }
    kv->dc[kv->ndc] = (oev_drain_cur_t){id, 0, false};
    return &kv->dc[kv->ndc++];
}

/* Sub-grant id starts retiring (evict_grants.c): its drain starts at slot 0. A sub-grant id
 * is a master grant and a chunk, so a sub-grant taken apart and carved again at the same
 * chunk has the same id: a cursor left from an earlier retirement there (a sweep that had
 * passed every slot) skipped the new one for good, and claims waiting for its room answered
 * NO_SPACE for as long as it held values (capacity::random_mix_of_twenty_sizes_never_fails,
 * 2 failures in about 16 runs of its suite; found by a reviewer, session 29). */
FX_INTERNAL void fx_oev_drain_restart(fx_owner_t *o, uint64_t id)
{
    oev_t *kv = o->ev;
    for (size_t i = 0; kv && i < kv->ndc; i++)
        if (kv->dc[i].id == id) kv->dc[i].next = 0;
}

/* Each slot of a retiring sub-grant is looked at once per sweep (issue 44 P4: the whole
 * sub-grant was walked again every round until it emptied). */
static void oev_drain(fx_owner_t *o, oev_round_t *rd)
{
    oev_t *kv = o->ev;
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    fx_u64v_t ids;
    fx_oclaims_pool_grants(o, &ids);
    for (size_t i = 0; i < kv->ndc; i++) kv->dc[i].seen = false;
    for (uint32_t i = 0; i < ids.n && !rd->nomem; i++) {
        fx_slot_grant_stats_t g;
        if (fx_slot_pool_grant_stats(pool, ids.v[i], &g) != FLUXON_OK || !g.retiring) continue;
        oev_drain_cur_t *cur = oev_drain_cur(kv, ids.v[i]);
        if (!cur) {
            rd->nomem = true;
            break;
        }
        cur->seen = true;
        if (!g.committed || cur->next >= g.slots) continue;
        bool busy = rd->busy;
        rd->busy = false;
        uint64_t k = cur->next;
        for (; k < g.slots && !rd->nomem; k++) {
            owner_entry_t *en = fx_ostore_at(o, g.offset + k * g.slot_size);
            if (!fx_oevg_evictable(en)) continue;
            if (en->group && en->group->round == rd->round) continue;
            if (en->group) en->group->round = rd->round;
            oev_take(o, rd, en);
        }
        /* a pinned group, or slots still being written (they commit later): the next round
         * sweeps again */
        cur->next = rd->busy || rd->guarded || rd->nomem || g.prepared || g.pending ? 0 : k;
        rd->guarded = false;
        rd->busy |= busy;
    }
    size_t w = 0; /* sub-grants no longer retiring: forgotten */
    for (size_t i = 0; i < kv->ndc; i++)
        if (kv->dc[i].seen) kv->dc[w++] = kv->dc[i];
    kv->ndc = w;
}

/* One round: same-size victims coldest first; a size whose claims that cannot cover
 * retires a grant of another size; retiring grants are emptied. Returns busy. */
static bool oev_select(fx_owner_t *o, const uint64_t *sizes, uint64_t *needs, size_t nc, uint64_t excess,
                       bool *progress)
{
    oev_t *kv = o->ev;
    uint64_t limits[OEV_MAX_CLASSES];
    for (size_t k = 0; k < nc; k++) limits[k] = fx_oclaims_carve_bytes(o, sizes[k]);
    kv->rounds++;
    oev_round_t rd = {.round = ++kv->round, .sizes = sizes, .needs = needs, .nc = nc, .excess = excess,
                      .limits = limits};
    for (uint32_t i = 0; i < kv->n_managed; i++) { /* issue 42: a tenant over its quota gives its own coldest */
        uint32_t k = kv->managed[i];
        uint64_t over = fx_oevq_over_by(o, k), ex = rd.excess, before = kv->tq[k].selected;
        if (!over) continue;
        rd.nc = 0;
        rd.excess = over;
        rd.own = k + 1;
        rd.pol = &kv->tq[k].pol;
        size_t first = rd.victims.n;
        oev_walk(o, &rd);
        rd.excess = ex - FX_MIN(ex, kv->tq[k].selected - before);
        /* their slots serve the waiting claims too: pressure below does not take as many
         * again from the tenant above its guarantee by the most (it did: with quotas summing
         * to the hot tier, tenant t0 of fluxon demo --tenant-quotas 50,30,20 lost 70,639
         * values to pressure, the other tenants' quota victims counted twice) */
        for (size_t v = first; v < rd.victims.n; v++)
            for (size_t c = 0; c < nc; c++)
                if (sizes[c] == rd.victims.v[v]->slot.slot_size && needs[c]) {
                    needs[c]--;
                    break;
                }
    }
    rd.nc = nc;
    rd.own = 0;
    fx_evp_t *pols[FX_TENANT_SNAP_MAX + 1];
    size_t np = fx_oevq_order(o, pols, FX_ARRAY_LEN(pols)); /* pressure: the shared policy alone without quotas */
    for (size_t i = 0; i < np && !rd.nomem && oev_demand(&rd); i++) {
        rd.pol = pols[i];
        rd.passed = 0;
        oev_walk(o, &rd);
    }
    rd.guarded = false;
    bool retired = false;
    for (size_t k = 0; k < nc && !retired; k++)
        if (needs[k] > fx_oevg_retiring_slots(o, sizes[k]) && fx_oevg_retire_one(o, sizes, nc, rd.cold_other, rd.n_cold_other)) {
            retired = true;
            kv->grants_retired++;
        }
    if (retired) fx_oclaims_pump(o); /* an idle grant re-carves at once */
    oev_drain(o, &rd);
    for (size_t i = 0; i < rd.hot.n; i++) {
        fx_oevw_moved(kv, rd.hot.v[i]);
        fx_evp_skip(fx_oevq_pol(kv, rd.hot.v[i]), &rd.hot.v[i]->lru);
    }
    if (rd.nomem) FX_WARN("eviction round: out of memory for its victim list");
    for (size_t i = 0; i < rd.victims.n; i++) { /* hidden: no new local pin can start */
        owner_entry_t *e = rd.victims.v[i];
        fx_ostore_hide(o, e);
        fx_oevw_moved(kv, e);
        fx_evp_remove(fx_oevq_pol(kv, e), &e->lru);
    }
    *progress = rd.victims.n > 0 || retired;
    fx_oevw_lookahead(o); /* issue 38: what eviction takes next is copied meanwhile */
    if (rd.victims.n) fx_oevs_send(o, rd.victims.v, rd.victims.n);
    fx_free(rd.victims.v);
    fx_free(rd.hot.v);
    return rd.busy;
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
    uint64_t excess = oev_held(kv) > kv->hot_capacity ? oev_held(kv) - kv->hot_capacity : 0;
    bool progress = false;
    if ((want || excess || fx_oevq_over(o)) && fx_olink_conn(o)) busy = oev_select(o, sizes, needs, nc, excess, &progress);
    if (!fx_oclaims_waiting(o)) kv->stall_since_ms = 0;
    /* claims wait, nothing was chosen and nothing is on its way: everything left is held.
     * The clock restarts only on what can serve a claim: a victim, an EVICT on its way, a
     * grant received (oev_grant_added), or no claim waiting. Not while a GRANT is in flight
     * or about to be asked (want is false then): a refused GRANT is asked again each second
     * (claims.c), and restarting the clock there kept it under OEV_STUCK_MS for good, so
     * claims waited to their deadline, 9/10 of the caller's timeout (27 s of 30 s). */
    /* ...but a GRANT in flight or to be asked, while the master has refused none since it
     * last granted, may serve them: not stuck (a GRANT slower than 1 s on a loaded master
     * answered a claim NO_SPACE, with nothing held, in capacity::random_mix_...) */
    bool grant_may_serve = !want && !fx_oclaims_grant_refused(o);
    if (!fx_oclaims_waiting(o) || progress || kv->cohorts || grant_may_serve) kv->stuck_since_ms = 0;
    else if (want && !kv->stuck_since_ms) kv->stuck_since_ms = FX_MAX(fx_now_ms(), 1ull);
    kv->backoff_ms = busy ? FX_MIN(kv->backoff_ms * 2, OEV_BACKOFF_MAX_MS) : 1;
    if (busy) fx_oev_tick_arm(o, kv->backoff_ms);
    else if (fx_oclaims_waiting(o)) fx_oev_tick_arm(o, OEV_TICK_MS);
    kv->in_step = false;
}

FX_INTERNAL uint64_t fx_oev_hot_capacity(fx_owner_t *o) { return o->ev ? o->ev->hot_capacity : 0; }

/* ---- pins (issue 42): pinned values are off the policy until their pin ends ---- */
FX_INTERNAL void fx_oev_set_pin_hooks(fx_owner_t *o, const fx_oev_pin_hooks_t *hooks) { o->ev->pin = *hooks; }

FX_INTERNAL bool fx_oev_pin_out(fx_owner_t *o, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    if (!fx_evp_linked(&en->lru) || en->evicting || en->retired) return false;
    fx_oevw_moved(kv, en);
    fx_evp_remove(fx_oevq_pol(kv, en), &en->lru);
    kv->pinned_bytes += en->slot.slot_size;
    kv->pinned_values++;
    return true;
}

FX_INTERNAL void fx_oev_pin_in(fx_owner_t *o, owner_entry_t *en, bool readmit)
{
    oev_t *kv = o->ev;
    kv->pinned_bytes -= FX_MIN(kv->pinned_bytes, en->slot.slot_size);
    kv->pinned_values -= kv->pinned_values > 0;
    if (!readmit || en->retired || en->evicting || en->state != OE_COMMITTED || fx_evp_linked(&en->lru)) return;
    fx_oevq_place(o, en);
    fx_evp_insert(fx_oevq_pol(kv, en), &en->lru, en->slot.slot_size, fx_oev_key_hash(en));
    for (size_t i = 0; i < kv->ndc; i++) kv->dc[i].next = 0; /* evictable again: drains look again */
    fx_oev_kick(o);
}

FX_INTERNAL void fx_oev_pinned(fx_owner_t *o, uint64_t *bytes_p, uint64_t *values_p, uint64_t *budget_p)
{
    oev_t *kv = o->ev;
    *bytes_p = kv ? kv->pinned_bytes : 0;
    *values_p = kv ? kv->pinned_values : 0;
    *budget_p = kv ? (uint64_t)(o->cfg.pin_budget_ratio * (double)kv->hot_capacity) : 0;
}

#undef OEV_BUSY_MAX
#undef OEV_TICK_MS
#undef OEV_BACKOFF_MAX_MS
#undef OEV_MAX_CLASSES
#undef OEV_STUCK_MS
#undef OEV_COLD_OTHERS
