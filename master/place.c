/* place.c — the master's placement policy (ARCHITECTURE §7), a pure choice over the node
 * table; inflight.c records what it picked:
 *  - `local-first` (FX_PUT_LOCAL_FIRST) takes the requester;
 *  - otherwise owners of `preferred_sub_cluster` first, then every other owner; inside a
 *    tier the order is uniformly random; write_through leaves the requester out while
 *    another owner fits. An owner fits when it is alive, connected, and its segment can
 *    hold the whole batch within the placement limit (mpl_fits: half of a gpu_owner's
 *    segment, a remote_cache owner's all but one grant).
 *  - An owner in its range quarantine (W2: kv.c) is passed over: a push the master it had
 *    before started may still land in any range this master thinks free.
 *  - The requester always fits (its own slot pool decides), so placement never fails: a
 *    full cluster degrades to local writes. */
#include "log.h"
#include "mkv.h"

static uint64_t mpl_rand(uint64_t *rng) /* xorshift64* */
{
    *rng ^= *rng >> 12;
    *rng ^= *rng << 25;
    *rng ^= *rng >> 27;
    return *rng * 0x2545F4914F6CDD1Dull;
}

/* Can n hold `count` more ranges of `bytes`? Placed ranges may take at most half of a
 * gpu_owner's segment (the rest stays for its own slots: its writes and the copies its
 * readers need) and all but one grant of a remote_cache owner's; either way one grant
 * must stay free. */
static bool mpl_fits(const master_node_t *n, uint64_t bytes, uint32_t count)
{
    if (!n->alloc || !n->alive || !n->peer || !n->ucx_address_len) return false;
    if (n->placed_quiet_until_ms && fx_now_ms() < n->placed_quiet_until_ms) return false; /* publish.c */
    uint64_t need = bytes * count;
    uint64_t limit = n->node_role == FX_NODE_REMOTE_CACHE ? n->segment_bytes : n->segment_bytes / 2;
    return n->placed_bytes + need <= limit && fx_offset_alloc_largest_free(n->alloc) >= bytes &&
           fx_offset_alloc_free_bytes(n->alloc) >= need + n->grant_bytes;
}

static bool mpl_alloc_all(master_node_t *n, uint64_t bytes, uint32_t count, uint64_t *offs)
{
    for (uint32_t i = 0; i < count; i++)
        if (fx_offset_alloc_alloc(n->alloc, bytes, &offs[i]) != FLUXON_OK) {
            while (i--) fx_offset_alloc_free(n->alloc, offs[i]);
            return false;
        }
    n->placed_bytes += bytes * count;
    for (uint32_t i = 0; i < count; i++) {
        int64_t g = mkv_grant_overlap(n, offs[i], bytes, UINT32_MAX);
        if (g >= 0)
            FX_ERROR("place: range at %llu (%llu bytes) of %s overlaps its grant %lld: the allocator and the grants "
                     "disagree", (unsigned long long)offs[i], (unsigned long long)bytes, n->node_id, (long long)g);
    }
    return true;
}

FX_INTERNAL master_node_t *fx_mplace_pick(fx_master_t *m, uint64_t *rng, master_node_t *req, uint64_t flags,
                                          fx_str_t preferred, uint64_t bytes, uint32_t count, uint64_t *offs)
{
    if (flags & FX_PUT_LOCAL_FIRST) return req;
    master_node_t **c = fx_calloc(m->n_nodes + 1, sizeof *c);
    if (!c) return NULL;
    bool exclude_req = (flags & FX_PUT_WRITE_THROUGH) != 0;
    master_node_t *pick = NULL;
    uint64_t now = fx_now_ms();
    for (int tier = preferred.len ? 0 : 1; tier < 2 && !pick; tier++) {
        size_t nc = 0;
        for (size_t i = 0; i < m->n_nodes; i++) {
            master_node_t *n = m->nodes[i];
            if (n->role != FX_ROLE_OWNER) continue;
            bool in_pref = preferred.len && fx_str_eq(preferred, n->sub_cluster);
            if (preferred.len && (tier == 0) != in_pref) continue;
            if (n != req && mkv_quarantined(n, now)) { /* W2: the old master's pushes may land there */
                ((mkv_t *)m->kv)->c.range_quarantine_skips++;
                continue;
            }
            if (n != req) mkv_ranges_reclaim(n, now); /* issue 38: ranges whose reuse delay is over */
            if (n == req ? (!exclude_req && n->alive) : mpl_fits(n, bytes, count)) c[nc++] = n;
        }
        for (size_t i = nc; i > 1; i--) { /* Fisher-Yates */
            size_t j = (size_t)(mpl_rand(rng) % i);
            master_node_t *t = c[i - 1];
            c[i - 1] = c[j];
            c[j] = t;
        }
        for (size_t i = 0; i < nc && !pick; i++)
            if (c[i] == req || mpl_alloc_all(c[i], bytes, count, offs)) pick = c[i];
    }
    fx_free(c);
    return pick;
}

/* ---- replica targets (issue 16) ---- */
FX_INTERNAL master_node_t *fx_mplace_pick_target(fx_master_t *m, uint64_t affinity, const master_node_t *src,
                                                 uint64_t bytes, uint32_t count, uint64_t *offs, bool *any_p)
{
    uint32_t roles = m->cfg.replica_target_roles;
    master_node_t *c[64];
    size_t nc = 0;
    uint64_t now = fx_now_ms();
    *any_p = false;
    for (size_t i = 0; i < m->n_nodes && nc < FX_ARRAY_LEN(c); i++) {
        master_node_t *n = m->nodes[i];
        if (n->role != FX_ROLE_OWNER || n == src || !(roles & (1u << n->node_role)) || !n->alive) continue;
        if (mkv_quarantined(n, now)) { /* W2; not "any" either: dropping its cold replicas makes no room */
            ((mkv_t *)m->kv)->c.range_quarantine_skips++;
            continue;
        }
        *any_p = true;
        mkv_ranges_reclaim(n, now); /* issue 38 */
        c[nc++] = n;
    }
    /* the affinity's target first (every member of a TP cohort hashes alike, so the
     * cohort lands on one target while it has room), then the others in order */
    size_t start = nc ? (size_t)(affinity % nc) : 0;
    for (size_t k = 0; k < nc; k++) {
        master_node_t *n = c[(start + k) % nc];
        if (mpl_fits(n, bytes, count) && mpl_alloc_all(n, bytes, count, offs)) return n;
    }
    return NULL;
}

/* Issue 38: would a replica target (not src) fit count ranges of bytes once the ranges in
 * its reuse delay are back (reuse.c)? Then dropping more of its replicas makes no room now. */
FX_INTERNAL bool fx_mplace_room_coming(fx_master_t *m, const master_node_t *src, uint64_t bytes, uint32_t count)
{
    uint32_t roles = m->cfg.replica_target_roles;
    for (size_t i = 0; i < m->n_nodes; i++) {
        const master_node_t *n = m->nodes[i];
        if (n->role != FX_ROLE_OWNER || n == src || !(roles & (1u << n->node_role)) || !n->alive || !n->alloc ||
            !n->peer || !n->ucx_address_len || mkv_quarantined(n, fx_now_ms()))
            continue; /* as fx_mplace_pick_target and mpl_fits pass it over */
        uint64_t need = bytes * count, waiting = mkv_ranges_waiting_bytes(n);
        uint64_t limit = n->node_role == FX_NODE_REMOTE_CACHE ? n->segment_bytes : n->segment_bytes / 2;
        if (waiting && n->placed_bytes + need <= limit &&
            fx_offset_alloc_free_bytes(n->alloc) + waiting >= need + n->grant_bytes)
            return true;
    }
    return false;
}
