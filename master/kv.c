/* kv.c — the lifecycle of the master's KV state and its per-owner part: init/fini of the
 * modules in mkv.h, an owner's registration (a segment allocator per generation, grants it
 * already holds re-learned after a master restart, replicas of its older generation
 * dropped), death and removal, and GRANT (ranges of grant_bytes handed to an owner for its
 * own slots). Called by master.c only. */
#include <stdio.h>

#include "log.h"
#include "mkv.h"

/* ---- GRANT ---- */
static bool mkv_grant_keep(master_node_t *n, uint64_t id, uint64_t off)
{
    if (n->n_grants == n->cap_grants) {
        uint32_t nc = n->cap_grants ? n->cap_grants * 2 : 16;
        uint64_t *ni = fx_realloc(n->grant_ids, nc * sizeof *ni);
        if (ni) n->grant_ids = ni;
        uint64_t *no = fx_realloc(n->grant_offs, nc * sizeof *no);
        if (no) n->grant_offs = no;
        if (!ni || !no) return false;
        n->cap_grants = nc;
    }
    n->grant_ids[n->n_grants] = id;
    n->grant_offs[n->n_grants++] = off;
    return true;
}

FX_INTERNAL void fx_mkv_grant_return(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                     fx_arena_t *arena)
{
    fx_body_grant_ack_t b;
    MKV_DECODE(s, p, h, body, arena, grant_ack, &b);
    master_node_t *n = mkv_need_node(s, p, h);
    if (!n) return;
    if (b.grant_ids.n != b.offsets.n) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "grant_return: %u grant_ids but %u offsets (must match)",
                 b.grant_ids.n, b.offsets.n);
        return;
    }
    uint64_t *st = mkv_arena_u64(arena, b.grant_ids.n ? b.grant_ids.n : 1);
    if (!st) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "grant_return: out of memory");
        return;
    }
    for (uint32_t i = 0; i < b.grant_ids.n; i++) {
        uint32_t k = 0;
        while (k < n->n_grants && (n->grant_ids[k] != b.grant_ids.v[i] || n->grant_offs[k] != b.offsets.v[i])) k++;
        st[i] = FLUXON_OK; /* not held (any more): an earlier return was applied */
        if (k == n->n_grants) continue;
        fx_offset_alloc_t *ga = mkv_alloc_of(n, n->grant_offs[k]);
        if (ga && fx_offset_alloc_free(ga, n->grant_offs[k]) != FLUXON_OK)
            FX_WARN("grant_return: %s grant %llu at %llu was not allocated", n->node_id,
                    (unsigned long long)n->grant_ids[k], (unsigned long long)n->grant_offs[k]);
        n->grant_ids[k] = n->grant_ids[n->n_grants - 1];
        n->grant_offs[k] = n->grant_offs[--n->n_grants];
        s->c.grants_returned++;
    }
    fx_body_statuses_t ack = {{st, b.grant_ids.n}};
    MKV_REPLY(p, h, statuses, &ack);
}

FX_INTERNAL void fx_mkv_grant(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena)
{
    fx_body_grant_t b;
    MKV_DECODE(s, p, h, body, arena, grant, &b);
    master_node_t *n = mkv_need_node(s, p, h);
    if (!n) return;
    if (b.slot_size == 0 || b.slot_size > n->grant_bytes || b.count < 1 || b.count > MKV_MAX_GRANTS) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT,
                 "grant: slot_size %llu must be 1..grant_bytes (%llu) and count %u 1..%u",
                 (unsigned long long)b.slot_size, (unsigned long long)n->grant_bytes, b.count, MKV_MAX_GRANTS);
        return;
    }
    /* W2: in quarantine a range of the earlier master's pushes may be anywhere in alloc: only
     * the grant-only zone then */
    bool quarantined = mkv_quarantined(n, fx_now_ms());
    uint64_t *ids = mkv_arena_u64(arena, b.count), *offs = mkv_arena_u64(arena, b.count);
    if (!ids || !offs) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "grant: out of memory");
        return;
    }
    uint32_t k = 0;
    int arc = FLUXON_ERR_NO_SPACE;
    while (k < b.count) { /* the grant-only zone first: the rest stays for placed ranges */
        fx_offset_alloc_t *ga = n->alloc_lo;
        arc = ga ? fx_offset_alloc_alloc(ga, n->grant_bytes, &offs[k]) : FLUXON_ERR_NO_SPACE;
        if (arc != FLUXON_OK && !quarantined && n->alloc) {
            ga = n->alloc;
            mkv_ranges_reclaim(n, fx_now_ms());
            arc = fx_offset_alloc_alloc(ga, n->grant_bytes, &offs[k]);
        }
        if (arc != FLUXON_OK) break;
        int64_t over = mkv_grant_overlap(n, offs[k], n->grant_bytes, UINT32_MAX);
        if (over >= 0)
            FX_ERROR("grant: range at %llu of %s overlaps its grant %lld: the allocator and the grants disagree",
                     (unsigned long long)offs[k], n->node_id, (long long)over);
        if (!mkv_grant_keep(n, n->next_grant_id, offs[k])) {
            fx_offset_alloc_free(ga, offs[k]);
            arc = FLUXON_ERR_NOMEM;
            break;
        }
        ids[k++] = n->next_grant_id++;
    }
    if (k == 0 && quarantined && arc == FLUXON_ERR_NO_SPACE && fx_mq_grant_refused(s, p, h, n)) return;
    if (k == 0) { /* what holds the segment: the owner's NO_SPACE names it from this text */
        uint64_t free_b = (n->alloc ? fx_offset_alloc_free_bytes(n->alloc) : 0) +
                          (n->alloc_lo ? fx_offset_alloc_free_bytes(n->alloc_lo) : 0),
                 largest = FX_MAX(n->alloc ? fx_offset_alloc_largest_free(n->alloc) : 0,
                                  n->alloc_lo ? fx_offset_alloc_largest_free(n->alloc_lo) : 0);
        bool cpu = n->node_role == FX_NODE_REMOTE_CACHE;
        mkv_fail(s, p, h, arc == FLUXON_ERR_NOMEM ? FLUXON_ERR_NOMEM : FLUXON_ERR_NO_SPACE,
                 "grant: no room for a %llu-byte grant (reserve.grant_bytes) in %s's %llu-byte segment: %llu bytes "
                 "hold values the master placed for other owners' %s (limit: %s, node_role %s), %llu its %u grants, "
                 "%llu freed awaiting range_reuse_delay_ms, %llu free (largest %llu)",
                 (unsigned long long)n->grant_bytes, n->node_id, (unsigned long long)n->segment_bytes,
                 (unsigned long long)n->placed_bytes, cpu ? "puts and copies" : "puts",
                 cpu ? "all of the segment but a grant" : "half the segment", fx_node_role_name(n->node_role),
                 (unsigned long long)n->n_grants * n->grant_bytes, n->n_grants,
                 (unsigned long long)mkv_ranges_waiting_bytes(n), (unsigned long long)free_b,
                 (unsigned long long)largest);
        return;
    }
    s->c.grants += k;
    if (quarantined) s->c.range_quarantine_grants += k;
    if (k < b.count)
        FX_INFO("grant: %s asked for %u grants of %llu bytes, %u fit", n->node_id, b.count,
                (unsigned long long)n->grant_bytes, k);
    fx_body_grant_ack_t ack = {{ids, k}, {offs, k}};
    MKV_REPLY(p, h, grant_ack, &ack);
}

FX_INTERNAL int fx_master_kv_node_registered(fx_master_t *m, master_node_t *n, uint64_t old_generation)
{
    mkv_t *s = m->kv;
    if (!s) return FLUXON_ERR_INTERNAL;
    if (n->kv && old_generation == n->generation) { /* reconnect: the state stays */
        mkv_inv_held_send(s, n); /* what was invalidated while it was away */
        return FLUXON_OK;
    }
    /* a new process: the old one's memory copies went with it, but its disk records did not
     * (issue 39): what was invalidated there while it was away goes to it before its
     * registration is answered (the same connection, in order), so its re-publication skips
     * them (W6) */
    mkv_inv_recent_hold(s, n); /* the old process's tombstones may not have reached its disk */
    mkv_inv_held_keep_disk(n);
    fx_offset_alloc_t *a = NULL, *lo = NULL;
    uint64_t top = n->segment_bytes / FX_OFFSET_ALLOC_PAGE * FX_OFFSET_ALLOC_PAGE, lo_end = FX_OFFSET_ALLOC_PAGE;
    /* W2: whole grants of a gpu_owner's lower half, but one, are a grant-only zone: no placed
     * range ever lies there, so a master in quarantine can grant from it (quarantine.c). The
     * rest holds the placed ranges (half the segment at most, place.c) with a grant to spare. */
    if (n->node_role != FX_NODE_REMOTE_CACHE && n->grant_bytes && n->grant_bytes % FX_OFFSET_ALLOC_PAGE == 0 &&
        top / 2 > n->grant_bytes + FX_OFFSET_ALLOC_PAGE)
        lo_end += (top / 2 - n->grant_bytes - FX_OFFSET_ALLOC_PAGE) / n->grant_bytes * n->grant_bytes;
    int rc = FLUXON_OK;
    if (lo_end > FX_OFFSET_ALLOC_PAGE) rc = fx_offset_alloc_create(FX_OFFSET_ALLOC_PAGE, lo_end - FX_OFFSET_ALLOC_PAGE, &lo);
    if (rc == FLUXON_OK && top > lo_end) rc = fx_offset_alloc_create(lo_end, top - lo_end, &a);
    if (rc != FLUXON_OK) {
        FX_ERROR("owner %s: cannot create the segment allocators over [4096, %llu): %s", n->node_id,
                 (unsigned long long)top, fluxon_status_string(rc));
        fx_offset_alloc_destroy(lo);
        return rc;
    }
    if (top <= FX_OFFSET_ALLOC_PAGE)
        FX_WARN("owner %s: segment of %llu bytes has no payload range; it gets no grants", n->node_id,
                (unsigned long long)n->segment_bytes);
    if (fx_mkv_dedup_reset(s, n) != FLUXON_OK) {
        fx_offset_alloc_destroy(a);
        fx_offset_alloc_destroy(lo);
        FX_ERROR("owner %s: out of memory for its KV state", n->node_id);
        return FLUXON_ERR_NOMEM;
    }
    mkv_reuse_drop(n); /* ranges of the old allocator */
    fx_offset_alloc_destroy(n->alloc);
    fx_offset_alloc_destroy(n->alloc_lo);
    n->alloc = a;
    n->alloc_lo = lo;
    n->lo_end = lo_end;
    n->placed_bytes = 0;
    n->next_grant_id = 1;
    n->n_grants = 0;
    /* grants the owner already holds (this master restarted under it) */
    for (uint32_t i = 0; i < n->reg_n_grants; i++) {
        fx_offset_alloc_t *ga = mkv_alloc_of(n, n->reg_grant_offsets[i]);
        rc = ga ? fx_offset_alloc_reserve(ga, n->reg_grant_offsets[i], n->grant_bytes) : FLUXON_ERR_NO_SPACE;
        if (rc != FLUXON_OK)
            FX_ERROR("owner %s: its grant %llu at %llu cannot be re-learned: %s", n->node_id,
                     (unsigned long long)n->reg_grant_ids[i], (unsigned long long)n->reg_grant_offsets[i],
                     fluxon_status_string(rc));
        else if (!mkv_grant_keep(n, n->reg_grant_ids[i], n->reg_grant_offsets[i]))
            FX_ERROR("owner %s: out of memory recording its grant %llu", n->node_id,
                     (unsigned long long)n->reg_grant_ids[i]);
        n->next_grant_id = FX_MAX(n->next_grant_id, n->reg_grant_ids[i] + 1);
    }
    if (n->reg_n_grants) {
        char at[32 * 21] = "";
        for (uint32_t i = 0, w = 0; i < n->reg_n_grants && w + 21 < sizeof at; i++)
            w += (uint32_t)snprintf(at + w, sizeof at - w, "%s%llu", i ? "," : "", (unsigned long long)n->reg_grant_offsets[i]);
        FX_INFO("owner %s: re-learned %u grants it holds (at %s%s)", n->node_id, n->reg_n_grants, at,
                n->reg_n_grants > 32 ? ",..." : "");
    }
    fx_mq_start(s, n, n->reg_peer_ids, n->reg_peer_gens);
    mkv_tombs_registered(s, n, n->reg_peer_ids, n->reg_peer_gens);
    if (old_generation != 0 && old_generation != n->generation) mkv_routes_drop_generation(s, n, old_generation);
    mkv_inv_held_send(s, n);
    return FLUXON_OK;
}

FX_INTERNAL void fx_master_kv_node_dead(fx_master_t *m, master_node_t *n)
{
    /* replicas stay recorded (the owner may come back with the same generation);
     * LOOKUP skips them while the node is not alive */
    FX_DEBUG("owner %s dead: its replicas are no longer returned by lookups", n->node_id);
    if (m->kv) fx_mplace_node_dead(m->kv, n);
}

FX_INTERNAL void fx_master_kv_node_free(fx_master_t *m, master_node_t *n)
{
    fx_mkv_dedup_free(m->kv, n);
    fx_mq_node_free(n);
    mkv_inv_held_drop(n);
    mkv_inv_recent_drop(n);
    mkv_reuse_drop(n);
    fx_offset_alloc_destroy(n->alloc);
    fx_offset_alloc_destroy(n->alloc_lo);
    n->alloc = n->alloc_lo = NULL;
    fx_free(n->grant_ids);
    fx_free(n->grant_offs);
    n->grant_ids = n->grant_offs = NULL;
    n->n_grants = n->cap_grants = 0;
}

FX_INTERNAL void fx_master_kv_node_forget(fx_master_t *m, master_node_t *n)
{
    if (m->kv) mkv_routes_drop_node(m->kv, n);
    fx_master_kv_node_free(m, n);
}

FX_INTERNAL int fx_master_kv_init(fx_master_t *m)
{
    mkv_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    s->m = m;
    fx_timer_init(&s->lease_timer);
    fx_timer_init(&s->dedup_timer);
    fx_timer_init(&s->del_timer);
    int rc = mkv_routes_create(s);
    if (rc == FLUXON_OK) rc = fx_lease_table_create(&s->leases);
    if (rc == FLUXON_OK) rc = fx_mplace_create(s);
    if (rc == FLUXON_OK) rc = fx_mappend_create(s);
    if (rc != FLUXON_OK) {
        FX_ERROR("master: cannot create the route table: %s", fluxon_status_string(rc));
        fx_mplace_destroy(s);
        mkv_routes_destroy(s);
        fx_lease_table_destroy(s->leases);
        fx_free(s);
        return rc;
    }
    mkv_tombs_serving(s);
    m->kv = s;
    return FLUXON_OK;
}

FX_INTERNAL void fx_master_kv_serving(fx_master_t *m)
{
    if (m->kv) mkv_tombs_serving(m->kv);
}

FX_INTERNAL void fx_master_kv_tick(fx_master_t *m)
{
    if (m->kv) (void)mkv_tombs_open(m->kv, fx_now_ms());
}

FX_INTERNAL void fx_master_kv_put_floor(fx_master_t *m, uint64_t put_ms)
{
    if (m->kv && put_ms) mkv_put_id_floor(m->kv, put_ms);
}

FX_INTERNAL void fx_master_kv_fini(fx_master_t *m)
{
    mkv_t *s = m->kv;
    if (!s) return;
    fx_mkv_leases_stop(s);
    fx_mkv_dedup_stop(s);
    fx_mkv_deletes_held_drop(s);
    fx_mplace_destroy(s);
    fx_mappend_destroy(s);
    mkv_tombs_fini(s);
    mkv_forget_fini(s);
    mkv_routes_destroy(s);
    fx_lease_table_destroy(s->leases);
    fx_free(s);
    m->kv = NULL;
}
