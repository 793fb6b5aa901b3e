/* evict_grants.c — eviction's grant-level helpers (owner_evict_grants.h): the evictable
 * test, grant retirement for sizes no grant serves (coldest master grant first, whole
 * sub-grants; evict.c empties them), and the NO_SPACE report naming sizes and holds. */
#include <stdio.h>

#include "log.h"
#include "owner_claims.h"
#include "owner_evict.h"
#include "owner_evict_grants.h"
#include "owner_pins.h"

FX_INTERNAL bool fx_oevg_evictable(const owner_entry_t *e)
{
    return e && !e->retired && !e->evicting && e->state == OE_COMMITTED && e->indexed && fx_evp_linked(&e->lru);
}

/* Slots of slot_size the master grants with retiring sub-grants will give once empty: what
 * their free and retiring chunks can be carved into (claims.c). Counting a whole grant's
 * worth for every master grant with any retiring sub-grant overstated it when a sub-grant
 * of a size still wanted stays in that grant (retire_one keeps those): no run long enough
 * for a large slot was ever freed, yet the count said the room was coming, so nothing more
 * was retired and a claim of that size could wait out OEV_STUCK_MS and answer NO_SPACE
 * (a likely cause of capacity::random_mix_of_twenty_sizes_never_fails failing in 2 of
 * about 16 runs of its suite, session 29; 0 of 8 since). */
FX_INTERNAL uint64_t fx_oevg_retiring_slots(fx_owner_t *o, uint64_t slot_size)
{
    return fx_oclaims_retiring_slots(o, slot_size);
}

/* Recency and holds of one sub-grant's values: the hottest stamp; held: slots being
 * written or pinned. */
static void oevg_heat(fx_owner_t *o, const fx_slot_grant_stats_t *g, uint64_t *hottest, uint64_t *held)
{
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    *held += g->prepared + g->pending;
    for (uint64_t k = 0; k < g->slots && g->committed; k++) {
        owner_entry_t *en = fx_ostore_at(o, g->offset + k * g->slot_size);
        if (!en) continue;
        fx_slot_info_t info;
        if (fx_slot_pool_inspect(pool, &en->slot, &info) == FLUXON_OK && info.holder_refs) (*held)++;
        if (fx_oevg_evictable(en)) *hottest = FX_MAX(*hottest, en->lru.stamp);
    }
}

/* Retires the sub-grants (of sizes no claim waits for) of the master grant whose values
 * are coldest (its hottest value is the least recent): they serve no new claim and are
 * emptied by evict.c's drain, then carved again. Master grants with slots being written or
 * pinned, or holding a waiting size, come last. Returns whether any was retired. */
FX_INTERNAL bool fx_oevg_retire_one(fx_owner_t *o, const uint64_t *sizes, size_t nc, const uint64_t *cold,
                                    size_t ncold)
{
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    uint64_t masters = fx_oclaims_count(o), best_score = UINT64_MAX;
    size_t best = SIZE_MAX, best_m = SIZE_MAX;
    if (ncold) { /* issue 44 P4: the grant of the coldest value of another size, O(grants) */
        fx_u64v_t mids, moffs;
        fx_oclaims_grants(o, &mids, &moffs);
        for (size_t m = 0; m < moffs.n && best == SIZE_MAX; m++)
            if (cold[0] >= moffs.v[m] && cold[0] - moffs.v[m] < o->cfg.grant_bytes) best = m;
        if (best == SIZE_MAX) return fx_oevg_retire_one(o, sizes, nc, cold + 1, ncold - 1);
    }
    for (size_t m = 0; m < masters && best == SIZE_MAX; m++) { /* else: the coldest hottest value, O(slots) */
        fx_u64v_t ids;
        fx_oclaims_sub_grants(o, m, &ids);
        uint64_t hottest = 0, held = 0, candidates = 0;
        bool wanted_here = false;
        for (uint32_t i = 0; i < ids.n; i++) {
            fx_slot_grant_stats_t g;
            if (fx_slot_pool_grant_stats(pool, ids.v[i], &g) != FLUXON_OK || g.retiring) continue;
            bool wanted = false;
            for (size_t k = 0; k < nc; k++) wanted |= sizes[k] == g.slot_size;
            wanted_here |= wanted;
            if (wanted) continue;
            candidates++;
            oevg_heat(o, &g, &hottest, &held);
        }
        if (!candidates) continue;
        uint64_t score = FX_MIN(hottest, (1ull << 48) - 1) + (held ? (1ull << 49) : 0) + (wanted_here ? (1ull << 48) : 0);
        if (score < best_score) {
            best_score = score;
            best_m = m;
        }
    }
    if (best == SIZE_MAX) best = best_m;
    if (best == SIZE_MAX) return false;
    fx_u64v_t ids;
    fx_oclaims_sub_grants(o, best, &ids);
    uint64_t retire[32];
    size_t n = 0;
    for (uint32_t i = 0; i < ids.n && n < 32; i++) {
        fx_slot_grant_stats_t g;
        if (fx_slot_pool_grant_stats(pool, ids.v[i], &g) != FLUXON_OK || g.retiring) continue;
        bool wanted = false;
        for (size_t k = 0; k < nc; k++) wanted |= sizes[k] == g.slot_size;
        if (!wanted) retire[n++] = ids.v[i];
    }
    if (!n && ncold) return fx_oevg_retire_one(o, sizes, nc, cold + 1, ncold - 1); /* the next coldest */
    for (size_t i = 0; i < n; i++) {
        fx_slot_pool_retire_grant(pool, retire[i], true);
        fx_oev_drain_restart(o, retire[i]); /* a cursor of an earlier sub-grant at this id must not skip it */
    }
    return n > 0;
}

/* Why a claim gets NO_SPACE: the sizes the grants serve and what holds their slots. */
FX_INTERNAL void fx_oevg_no_space_log(fx_owner_t *o, uint64_t value_len, size_t count, const char *why,
                                      uint64_t *last_ms)
{
    uint64_t now = fx_now_ms();
    if (*last_ms && now - *last_ms < 1000) return; /* one line a second */
    *last_ms = now;
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(pool, &st);
    fx_u64v_t ids;
    fx_oclaims_pool_grants(o, &ids);
    uint64_t pb, pv, budget;
    fx_oev_pinned(o, &pb, &pv, &budget);
    if (o->pin) budget = fx_opin_budget(o); /* less when the master's placed values leave less room */
    char sizes[256];
    size_t len = 0, shown = 0;
    uint64_t seen[8];
    sizes[0] = 0;
    for (uint32_t i = 0; i < ids.n && shown < 8; i++) {
        fx_slot_grant_stats_t g;
        if (fx_slot_pool_grant_stats(pool, ids.v[i], &g) != FLUXON_OK) continue;
        size_t k = 0, n = 0;
        while (k < shown && seen[k] != g.slot_size) k++;
        if (k < shown) continue;
        seen[shown++] = g.slot_size;
        for (uint32_t j = 0; j < ids.n; j++) {
            fx_slot_grant_stats_t h;
            n += fx_slot_pool_grant_stats(pool, ids.v[j], &h) == FLUXON_OK && h.slot_size == g.slot_size;
        }
        int w = snprintf(sizes + len, sizeof sizes - len, "%s%llux%zu", len ? " " : "",
                         (unsigned long long)g.slot_size, n);
        if (w > 0 && (size_t)w < sizeof sizes - len) len += (size_t)w;
    }
    /* the committed values by what keeps them: a census of the grants' slots (one line a
     * second at most, O(slots)) */
    uint64_t c_evictable = 0, c_evicting = 0, c_unlinked = 0, c_hidden = 0, c_retiring = 0;
    for (uint32_t i = 0; i < ids.n; i++) {
        fx_slot_grant_stats_t g;
        if (fx_slot_pool_grant_stats(pool, ids.v[i], &g) != FLUXON_OK) continue;
        c_retiring += g.retiring;
        for (uint64_t k = 0; k < g.slots; k++) {
            const owner_entry_t *en = fx_ostore_at(o, g.offset + k * g.slot_size);
            if (!en || en->retired || en->state != OE_COMMITTED) continue;
            if (fx_oevg_evictable(en)) c_evictable++;
            else if (en->evicting) c_evicting++;
            else if (!en->indexed) c_hidden++;
            else c_unlinked++;
        }
    }
    char census[256];
    snprintf(census, sizeof census, " (%llu in the eviction policy, %llu being evicted, %llu "
             "hidden, %llu off the policy: pinned or read); %llu sub-grants retiring",
             (unsigned long long)c_evictable, (unsigned long long)c_evicting, (unsigned long long)c_hidden,
             (unsigned long long)c_unlinked, (unsigned long long)c_retiring);
    char gnote[512] = ""; /* issue 42 quotas: what the tenants' guarantees keep */
    fx_oevq_note(o, gnote, sizeof gnote);
    const char *refusal = fx_oclaims_refusal(o); /* what holds the rest of the segment, said by the master */
    /* two lines: what a reader needs first (how many, why, the grants, what the master
     * says, the readers' pins), then the census (a new user's finding: one line of ~700
     * characters) */
    FX_WARN("no space for %zu slots of %llu bytes: %s; grants %llu/%llu%s%s; held: %llu reader pins, %llu bytes "
            "pinned in %llu values (details on the next line)",
            count, (unsigned long long)fx_slot_size_for(value_len), why, (unsigned long long)fx_oclaims_count(o),
            (unsigned long long)fx_oclaims_max(o), refusal[0] ? "; the master has no room for more: " : "", refusal,
            (unsigned long long)st.holder_refs, (unsigned long long)pb, (unsigned long long)pv);
    FX_WARN("no space, details: grants carved into slot sizes [%s%s] (bytes x sub-grants); %llu slots draining, "
            "%llu prepared and %llu pending (being written), %llu committed%s; the owner's pin budget is %llu bytes "
            "(pin_budget_ratio %.2f of the %llu-byte hot tier or of the room the master's placed values leave its "
            "grants; tenants.NAME.pinned_bytes_max)%s",
            sizes, shown == 8 ? " ..." : "", (unsigned long long)st.draining, (unsigned long long)st.prepared,
            (unsigned long long)st.pending, (unsigned long long)st.committed, census, (unsigned long long)budget,
            o->cfg.pin_budget_ratio, (unsigned long long)fx_oev_hot_capacity(o), gnote);
}

