/* republish.c — REPUBLISH (issue 17, ARCHITECTURE §9 "Master restart and failover"): an
 * owner that registered with a master that did not know it (a restart, a failover)
 * reports, in batches, the values it holds committed; the routes, their replicas and the
 * prefix index are rebuilt from them:
 *  - a key nobody reported yet gets a route with the reported version (no lease: the
 *    leases died with the old master, so leased values are never re-published);
 *  - the same version from another owner adds a replica;
 *  - a key reported with different versions resolves to the highest: an older route is
 *    replaced (its replicas are invalidated, their slots free once unpinned), an older
 *    report answers STALE (the owner drops that copy);
 *  - the put-id generator resumes above every version reported, so a later put wins.
 * A value in an owner's disk tier (issue 39) is reported at its disk offset (bit 63 set).
 * Until an owner's last batch, lookups of keys it has not reported yet miss (no route):
 * never the bytes of another version. A key deleted at this master after the reported value
 * was put answers STALE too (tombs.c): a delete served before every owner re-published is
 * not undone by a later report. */
#include <stdio.h>

#include "log.h"
#include "disk.h"
#include "mkv.h"

/* Checks key i's identity against the sender's segment; false with *why set. */
static bool rp_key_ok(const master_node_t *n, const fx_body_republish_t *b, uint32_t i, char *why, size_t cap)
{
    uint64_t off = b->offsets.v[i], len = b->value_lens.v[i];
    bool disk = fx_disk_is_off(off); /* issue 39: a value in the owner's disk tier */
    if (disk && b->range_bytes.v[i]) {
        snprintf(why, cap, "disk offset %#llx with range_bytes %llu (a disk value holds no range)",
                 (unsigned long long)off, (unsigned long long)b->range_bytes.v[i]);
        return false;
    }
    if (len == 0 || (!disk && !mkv_range_ok(n, off, len))) {
        snprintf(why, cap, "offset %llu + value_len %llu is outside the payload range [4096, %llu)",
                 (unsigned long long)off, (unsigned long long)len, (unsigned long long)n->segment_bytes);
        return false;
    }
    if (b->put_ms.v[i] == 0 || b->put_ver.v[i] > UINT32_MAX) {
        snprintf(why, cap, "put_id (%llu, %llu) is not one a master assigns", (unsigned long long)b->put_ms.v[i],
                 (unsigned long long)b->put_ver.v[i]);
        return false;
    }
    uint64_t rb = b->range_bytes.v[i];
    if (rb && (rb % FX_OFFSET_ALLOC_PAGE || off % FX_OFFSET_ALLOC_PAGE || rb < len || rb > n->segment_bytes - off)) {
        snprintf(why, cap, "range of %llu bytes at %llu must be 4096-aligned, hold value_len %llu and lie in the "
                 "segment (%llu bytes)", (unsigned long long)rb, (unsigned long long)off, (unsigned long long)len,
                 (unsigned long long)n->segment_bytes);
        return false;
    }
    if (b->group_sizes.v[i] == 0 || b->group_sizes.v[i] > FLUXON_MAX_BATCH_KEYS) {
        snprintf(why, cap, "group_size %llu must be 1..%u", (unsigned long long)b->group_sizes.v[i],
                 (unsigned)FLUXON_MAX_BATCH_KEYS);
        return false;
    }
    return true;
}

/* Routes key i of b as reported by n; a placed range is reserved in n's segment first
 * (refused BUSY when the new master handed part of it out already: that value is lost,
 * never overwritten while routed). */
static int rp_restore(mkv_t *s, master_node_t *n, const fx_body_republish_t *b, uint32_t i, fx_mkv_inv_t *inv,
                      size_t *replaced_p)
{
    uint64_t off = b->offsets.v[i], rb = b->range_bytes.v[i];
    if (rb) {
        int arc = n->alloc ? fx_offset_alloc_reserve(n->alloc, off, rb) : FLUXON_ERR_NO_SPACE;
        if (arc != FLUXON_OK) {
            mkv_route_t *r = mkv_route_get(s, b->keys.v[i], inv); /* reported twice? */
            bool dup = arc == FLUXON_ERR_BUSY && r && r->put_ms == b->put_ms.v[i] && r->put_ver == b->put_ver.v[i] &&
                       mkv_route_find(r, n, off) >= 0;
            return dup ? FLUXON_OK : arc == FLUXON_ERR_NOMEM ? FLUXON_ERR_NOMEM : FLUXON_ERR_BUSY;
        }
    }
    mkv_replica_t rep = {.node = n, .generation = n->generation, .offset = off, .range_bytes = rb}; /* its number is given when it is routed */
    bool rpl = false;
    int rc = mkv_route_restore(s, b->keys.v[i], b->value_lens.v[i], (uint32_t)b->group_sizes.v[i], b->put_ms.v[i],
                               (uint32_t)b->put_ver.v[i], &rep, inv, &rpl);
    if (rc == FLUXON_ERR_KEY_EXISTS) rc = FLUXON_OK; /* reported twice: routed already */
    else if (rb && rc != FLUXON_OK) fx_offset_alloc_free(n->alloc, off);
    else if (rb) {
        n->placed_bytes += rb;
        fx_mappend_ranged(s, n, b->keys.v[i], off, b->put_ms.v[i], b->put_ver.v[i], inv); /* else never dropped */
    }
    *replaced_p += rpl;
    return rc;
}

/* ---- PLACED ---- */
FX_INTERNAL bool fx_mkv_placed_notify(mkv_t *s, master_node_t *target, const fx_body_put_done_t *b,
                                      const uint8_t *kept, const uint64_t *pms, const uint64_t *pver,
                                      uint32_t timeout_ms, fx_rpc_cb cb, void *arg)
{
    (void)s;
    uint32_t nk = b->keys.n, m = 0;
    if (!target->peer || !target->peer->conn || !fx_conn_is_open(target->peer->conn)) return false;
    fx_str_t *keys = fx_malloc((nk ? nk : 1) * sizeof *keys);
    uint64_t *cols = fx_malloc((nk ? nk : 1) * 3 * sizeof *cols);
    int rc = FLUXON_ERR_NOMEM;
    if (!keys || !cols) {
        FX_ERROR("placed: out of memory telling %s of %u values (they are not re-published after a restart)",
                 target->node_id, nk);
    } else {
        for (uint32_t i = 0; i < nk; i++) {
            if (!kept[i]) continue;
            keys[m] = b->keys.v[i];
            cols[m] = b->offsets.v[i];
            cols[nk + m] = pms[i];
            cols[2 * (size_t)nk + m] = pver[i];
            m++;
        }
        fx_body_placed_t pb = {{keys, m}, {cols, m}, b->value_len, {cols + nk, m}, {cols + 2 * (size_t)nk, m},
                               b->lease_id};
        if (m && cb) rc = FX_RPC_CALL(target->peer->conn, PLACED, placed, &pb, timeout_ms, cb, arg);
        else if (m) rc = FX_CONN_SEND(target->peer->conn, FX_MSG_PLACED, 0, 0, 0, placed, &pb);
    }
    fx_free(keys);
    fx_free(cols);
    return m && rc == FLUXON_OK;
}

/* ---- REPUBLISH verify: an owner back on a lost connection checks what it serves ---- */
/* Answers each key OK when that very replica (n, offset) of that version is routed, else
 * STALE (an INVALIDATE lost with the old connection): nothing is routed or changed. A disk
 * record (issue 39) of a version routed at another replica of n's is kept too: its
 * EVICT, which moves that replica to the record, may still be on its way (resent after
 * the reconnect). */
static bool rp_verify_routed(const mkv_route_t *r, const master_node_t *n, const fx_body_republish_t *b, uint32_t i)
{
    if (!r || r->put_ms != b->put_ms.v[i] || r->put_ver != b->put_ver.v[i]) return false;
    if (mkv_route_find(r, n, b->offsets.v[i]) >= 0) return true;
    for (uint32_t j = 0; fx_disk_is_off(b->offsets.v[i]) && j < r->n_rep; j++)
        if (r->rep[j].node == n && r->rep[j].generation == n->generation) return true;
    return false;
}

static void rp_verify(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, master_node_t *n,
                      const fx_body_republish_t *b, uint64_t *st)
{
    fx_mkv_inv_t inv = {0};
    uint64_t ok = 0;
    char why[200];
    for (uint32_t i = 0; i < b->keys.n; i++) {
        mkv_route_t *r = rp_key_ok(n, b, i, why, sizeof why) ? mkv_route_get(s, b->keys.v[i], &inv) : NULL;
        bool routed = rp_verify_routed(r, n, b, i);
        st[i] = MKV_ST(routed ? FLUXON_OK : FLUXON_ERR_STALE);
        ok += routed;
    }
    s->c.verify_routed += ok;
    s->c.verify_stale += b->keys.n - ok;
    if (ok < b->keys.n)
        FX_INFO("owner %s verified %u values: %llu no longer routed there (it drops them)", n->node_id, b->keys.n,
                (unsigned long long)(b->keys.n - ok));
    mkv_inv_flush(s, &inv);
    fx_body_statuses_t ack = {{st, b->keys.n}};
    MKV_REPLY(p, h, statuses, &ack);
}

/* ---- REPUBLISH ---- */
FX_INTERNAL void fx_mkv_republish(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena)
{
    fx_body_republish_t b;
    MKV_DECODE(s, p, h, body, arena, republish, &b);
    const mkv_array_t arrays[] = {{"range_bytes", b.range_bytes.n, false},
                                  {"offsets", b.offsets.n, false},
                                  {"value_lens", b.value_lens.n, false},
                                  {"put_ms", b.put_ms.n, false},
                                  {"put_ver", b.put_ver.n, false},
                                  {"group_sizes", b.group_sizes.n, false}};
    mkv_batch_spec_t spec = {"republish", b.keys, arrays, FX_ARRAY_LEN(arrays), 0, FX_REPUBLISH_MAX_KEYS, false, 1};
    uint64_t *st;
    master_node_t *n = mkv_batch_open(s, p, h, &spec, arena, &st);
    if (!n) return;
    if (b.verify) {
        rp_verify(s, p, h, n, &b, st);
        return;
    }
    fx_mkv_inv_t inv = {0};
    size_t ok = 0, stale = 0, replaced = 0, refused = 0, deleted = 0, taken = 0, first_bad = SIZE_MAX;
    char why[200] = "", scratch[200];
    for (uint32_t i = 0; i < b.keys.n; i++) {
        if (!rp_key_ok(n, &b, i, first_bad == SIZE_MAX ? why : scratch, sizeof why)) {
            st[i] = MKV_ST(FLUXON_ERR_INVALID_ARGUMENT);
            if (first_bad == SIZE_MAX) first_bad = i;
            refused++;
            continue;
        }
        mkv_put_id_seen(s, b.put_ms.v[i], (uint32_t)b.put_ver.v[i]);
        if (mkv_tombs_older(s, b.keys.v[i], b.put_ms.v[i], (uint32_t)b.put_ver.v[i], &inv)) { /* deleted since */
            st[i] = MKV_ST(FLUXON_ERR_STALE);
            deleted++;
            continue;
        }
        int rc = rp_restore(s, n, &b, i, &inv, &replaced);
        st[i] = MKV_ST(rc);
        ok += rc == FLUXON_OK;
        stale += rc == FLUXON_ERR_STALE;
        refused += rc != FLUXON_OK && rc != FLUXON_ERR_STALE;
        taken += rc == FLUXON_ERR_BUSY;
    }
    s->c.republish_batches++;
    s->c.republished += ok;
    s->c.republish_stale += stale;
    s->c.republish_replaced += replaced;
    s->c.republish_refused += refused;
    s->c.republish_deleted += deleted;
    if (taken) /* q_report keeps the ranges of a re-publishing owner: never expected */
        FX_WARN("republish from %s: %zu values refused (lost: a miss): this master handed their ranges out meanwhile",
                n->node_id, taken);
    if (deleted)
        FX_INFO("republish from %s: %zu values dropped: their keys were deleted at this master after they were put",
                n->node_id, deleted);
    if (first_bad != SIZE_MAX)
        FX_WARN("republish from %s: key %zu (%.*s) refused: %s", n->node_id, first_bad,
                MKV_KEYF(b.keys.v[first_bad]), why);
    n->rp_keys += b.keys.n;
    n->rp_ok += ok;
    n->rp_stale += stale;
    n->rp_replaced += replaced;
    if (b.last) { /* the totals of every batch since its registration */
        s->c.republish_owners_done++;
        n->rp_pending = false;
        n->q_report = false; /* its ranges are all known now: W2 alone holds them */
        FX_INFO("owner %s re-published what it holds: %llu keys, %llu routed, %llu older than the routed version, "
                "%llu replaced an older route", n->node_id, (unsigned long long)n->rp_keys,
                (unsigned long long)n->rp_ok, (unsigned long long)n->rp_stale, (unsigned long long)n->rp_replaced);
        n->rp_keys = n->rp_ok = n->rp_stale = n->rp_replaced = 0;
    }
    mkv_inv_flush(s, &inv); /* owners of replaced versions drop them before the reporter hears */
    fx_body_statuses_t ack = {{st, b.keys.n}};
    MKV_REPLY(p, h, statuses, &ack);
}
