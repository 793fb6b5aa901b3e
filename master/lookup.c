/* lookup.c — the master's read side and deletions (ARCHITECTURE §5, §7): LOOKUP (which
 * replica to read, and whether the copy the reader makes is durable, temporary or a reuse
 * of its own slot), GET_DONE (a durable copy becomes a replica), EVICT (an owner drops
 * exact replicas of its own), DELETE, EXISTS and LIST.
 *
 *  - A route is "live" when its lease (if any) has not expired and at least one replica
 *    sits on an alive node of the recorded generation. LOOKUP and EXISTS see only live
 *    routes.
 *  - Expected per-key outcomes (NOT_FOUND on lookup, STALE get_done or evict) are logged
 *    at debug level, one summary per batch; request-level errors at warn.
 *  - INVALIDATEs caused by a request (expired leases met on the way, deletes) are sent
 *    BEFORE its reply. */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "disk.h"
#include "mkv.h"

/* ---- LOOKUP ---- */
FX_INTERNAL void fx_mkv_lookup(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena)
{
    fx_body_lookup_t b;
    MKV_DECODE(s, p, h, body, arena, lookup, &b);
    master_node_t *self = p->node;
    uint32_t nk = b.keys.n;
    size_t max_src = FX_MAX(FX_MIN((size_t)nk, s->m->n_nodes), (size_t)1);
    uint64_t *cols = mkv_arena_u64(arena, (size_t)nk * 9);
    uint64_t *sgen = mkv_arena_u64(arena, max_src), *sbase = mkv_arena_u64(arena, max_src),
             *srole = mkv_arena_u64(arena, max_src);
    fx_str_t *sid = fx_arena_alloc(arena, max_src * sizeof *sid);
    fx_str_t *saddr = fx_arena_alloc(arena, max_src * sizeof *saddr);
    fx_str_t *srkey = fx_arena_alloc(arena, max_src * sizeof *srkey);
    master_node_t **snode = fx_arena_alloc(arena, max_src * sizeof *snode);
    if (!cols || !sgen || !sbase || !srole || !sid || !saddr || !srkey || !snode) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "lookup of %u keys: out of memory", nk);
        return;
    }
    uint64_t *st = cols, *src = cols + nk, *offs = cols + 2 * (size_t)nk, *vlen = cols + 3 * (size_t)nk,
             *pms = cols + 4 * (size_t)nk, *pver = cols + 5 * (size_t)nk, *modes = cols + 6 * (size_t)nk,
             *seqs = cols + 7 * (size_t)nk, *reuse = cols + 8 * (size_t)nk;
    uint32_t nsrc = 0, hits = 0;
    fx_mkv_inv_t inv = {0};
    for (uint32_t i = 0; i < nk; i++) {
        st[i] = MKV_ST(FLUXON_ERR_NOT_FOUND);
        src[i] = UINT64_MAX;
        offs[i] = vlen[i] = pms[i] = pver[i] = modes[i] = seqs[i] = reuse[i] = 0;
        mkv_route_t *r = mkv_key_ok(b.keys.v[i]) ? mkv_route_get(s, b.keys.v[i], &inv) : NULL;
        if (!r) continue;
        /* a replica in the requester's own memory first (no network), else the first alive
         * one in memory, else the requester's own disk tier (issue 39: it reads it and
         * publishes the copy as any fetched one); another owner's disk is not read */
        int pick = -1, own_disk = -1;
        for (uint32_t j = 0; j < r->n_rep; j++) {
            if (!mkv_replica_alive(&r->rep[j])) continue;
            if (fx_disk_is_off(r->rep[j].offset)) {
                if (r->rep[j].node == self) own_disk = (int)j;
                continue;
            }
            if (r->rep[j].node == self) {
                pick = (int)j;
                break;
            }
            if (pick < 0) pick = (int)j;
        }
        if (pick < 0) pick = own_disk;
        if (pick < 0) continue;
        const mkv_replica_t *rep = &r->rep[pick];
        /* ReuseReplica: the requester's own slot holds it; otherwise a copy is made,
         * durable for at most 2 owners at once, temporary beyond (§7) */
        uint32_t live = 0; /* replicas of current generations: a GET_DONE could only add past these */
        for (uint32_t j = 0; j < r->n_rep; j++) live += r->rep[j].node->generation == r->rep[j].generation;
        if (rep->node == self && !rep->range_bytes && !fx_disk_is_off(rep->offset)) {
            modes[i] = FX_GET_REUSE;
            s->c.get_reuse++;
        } else if (self && live < MKV_MAX_REPLICAS) {
            modes[i] = fx_mplace_get_begin(s, b.keys.v[i], self);
            if (modes[i] == FX_GET_DURABLE) s->c.get_durable++;
            else s->c.get_temporary++;
            if (modes[i] == FX_GET_DURABLE && rep->range_bytes && rep->node != self && fx_mappend_keeps_copy(s, rep->node))
                modes[i] |= FX_GET_SRC_KEPT; /* issue 38: the copy needs no write-back */
        } else {
            modes[i] = FX_GET_TEMPORARY;
        }
        uint32_t si = 0;
        while (si < nsrc && snode[si] != rep->node) si++;
        if (si == nsrc) {
            if (nsrc == max_src) continue; /* cannot happen: sources are distinct nodes */
            master_node_t *sn = rep->node;
            snode[nsrc] = sn;
            sid[nsrc] = fx_str_c(sn->node_id);
            sgen[nsrc] = sn->generation;
            saddr[nsrc] = (fx_str_t){(const char *)sn->ucx_address, sn->ucx_address_len};
            srkey[nsrc] = (fx_str_t){(const char *)sn->rkey, sn->rkey_len};
            sbase[nsrc] = sn->segment_base;
            srole[nsrc] = sn->node_role;
            nsrc++;
        }
        st[i] = MKV_ST(FLUXON_OK);
        src[i] = si;
        offs[i] = rep->offset;
        seqs[i] = rep->seq;
        /* issue 38: a ranged replica's range is reused only range_reuse_delay_ms after it is
         * freed (reuse.c): a copy ended within that of this answer holds this version */
        if (rep->range_bytes && modes[i] != FX_GET_REUSE && s->m->cfg.range_reuse_delay_ms) {
            reuse[i] = s->m->cfg.range_reuse_delay_ms;
            s->c.lookup_early_reads++;
        }
        vlen[i] = r->value_len;
        pms[i] = r->put_ms;
        pver[i] = r->put_ver;
        if (self) fx_mappend_count_hit(s, self, rep->node);
        hits++;
    }
    s->c.lookups += nk;
    s->c.lookup_hits += hits;
    if (hits < nk) FX_DEBUG("lookup from %s: %u of %u keys hit", fx_conn_desc(p->conn), hits, nk);
    fx_body_lookup_ack_t ack = {{st, nk},     {src, nk},   {offs, nk},  {vlen, nk},   {pms, nk},   {pver, nk},
                                {sid, nsrc},  {sgen, nsrc}, {saddr, nsrc}, {srkey, nsrc}, {sbase, nsrc},
                                {modes, nk}, {seqs, nk}, {reuse, nk}, {srole, nsrc}};
    mkv_inv_flush(s, &inv);
    MKV_REPLY(p, h, lookup_ack, &ack);
}

/* ---- GET_DONE ---- */
/* Checks the modes and each copy's range; returns false after replying. */
static bool lk_get_done_valid(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const master_node_t *n,
                              const fx_body_get_done_t *b)
{
    for (uint32_t i = 0; i < b->modes.n; i++)
        if (b->modes.v[i] != FX_GET_DURABLE && b->modes.v[i] != FX_GET_TEMPORARY && b->modes.v[i] != FX_GET_ABANDON) {
            mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "get_done from %s: modes[%u] = %llu (must be %u durable, "
                     "%u temporary or %u abandoned)", n->node_id, i, (unsigned long long)b->modes.v[i], FX_GET_DURABLE,
                     FX_GET_TEMPORARY, FX_GET_ABANDON);
            return false;
        }
    for (uint32_t i = 0; i < b->keys.n; i++) {
        bool abandon = b->modes.n && b->modes.v[i] == FX_GET_ABANDON; /* no copy: nothing to check */
        if (abandon || (b->value_lens.v[i] != 0 && mkv_range_ok(n, b->offsets.v[i], b->value_lens.v[i]))) continue;
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT,
                 "get_done from %s: key %u at offset %llu + %llu bytes (payload range [4096, %llu))", n->node_id, i,
                 (unsigned long long)b->offsets.v[i], (unsigned long long)b->value_lens.v[i],
                 (unsigned long long)n->segment_bytes);
        return false;
    }
    return true;
}

FX_INTERNAL void fx_mkv_get_done(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena)
{
    fx_body_get_done_t b;
    MKV_DECODE(s, p, h, body, arena, get_done, &b);
    const mkv_array_t arrays[] = {{"offsets", b.offsets.n, false},        {"put_ms", b.put_ms.n, false},
                                  {"put_ver", b.put_ver.n, false},        {"value_lens", b.value_lens.n, false},
                                  {"src_offsets", b.src_offsets.n, false}, {"modes", b.modes.n, true},
                                  {"src_seqs", b.src_seqs.n, true}};
    mkv_batch_spec_t spec = {"get_done", b.keys, arrays, FX_ARRAY_LEN(arrays), 0, UINT32_MAX, false, 1};
    uint64_t *st;
    master_node_t *n = mkv_batch_open(s, p, h, &spec, arena, &st);
    if (!n || !lk_get_done_valid(s, p, h, n, &b)) return;
    uint32_t nk = b.keys.n;
    /* the source the values were copied from */
    master_node_t *src = NULL;
    for (size_t j = 0; j < s->m->n_nodes; j++)
        if (fx_str_eq(b.src_node_id, s->m->nodes[j]->node_id)) src = s->m->nodes[j];
    fx_mkv_inv_t inv = {0};
    uint32_t stale = 0, full = 0;
    uint64_t kh[MKV_PREFETCH_BLOCK];
    for (uint32_t i = 0; i < nk; i++) {
        mkv_routes_prefetch_block(s, b.keys.v, i, nk, kh); /* the batch's misses overlap */
        bool durable = b.modes.n == 0 || b.modes.v[i] == FX_GET_DURABLE;
        if (durable || b.modes.v[i] == FX_GET_ABANDON) fx_mplace_get_end(s, b.keys.v[i], n);
        if (!durable && b.modes.v[i] == FX_GET_ABANDON) { /* its durable record is gone: done */
            st[i] = MKV_ST(FLUXON_OK);
            continue;
        }
        mkv_route_t *r = mkv_route_get_h(s, b.keys.v[i], kh[i % MKV_PREFETCH_BLOCK], &inv);
        bool version = r && r->put_ms == b.put_ms.v[i] && r->put_ver == b.put_ver.v[i] && r->value_len == b.value_lens.v[i];
        if (version && durable && mkv_route_find(r, n, b.offsets.v[i]) >= 0) {
            /* a resend of a copy already recorded (its answer was lost): OK again, whatever
             * became of the source since — a STALE here would make the sender free a slot
             * this route still names, and readers would copy whatever lands in it next */
            st[i] = MKV_ST(FLUXON_OK);
            continue;
        }
        int sj = version && src && src->generation == b.src_generation ? mkv_route_find(r, src, b.src_offsets.v[i]) : -1;
        /* W3: that very replica (0: not named — a disk offset, issue 39, is never reused) */
        if (sj < 0 || (b.src_seqs.n && b.src_seqs.v[i] && r->rep[sj].seq != b.src_seqs.v[i])) {
            st[i] = MKV_ST(FLUXON_ERR_STALE); /* the version, or the copy's source, is gone */
            stale++;
            continue;
        }
        st[i] = MKV_ST(FLUXON_OK);
        if (!durable || mkv_route_find(r, n, b.offsets.v[i]) >= 0) continue; /* temporary: the source was intact */
        if (mkv_route_add_replica(s, r, n, b.offsets.v[i]) != FLUXON_OK) {
            st[i] = MKV_ST(FLUXON_ERR_NO_SPACE);
            full++;
            continue;
        }
        s->c.get_done_replicas++;
        fx_mappend_promoted(s, b.keys.v[i], r, n, src, b.src_offsets.v[i], &inv); /* issue 16 */
    }
    s->c.get_done_stale += stale;
    if (stale) FX_DEBUG("get_done from %s: %u of %u keys stale", n->node_id, stale, nk);
    s->c.get_done_full += full;
    /* many owners copying one popular key: expected, the copy is refused (NO_SPACE) and
     * counted, not an operator's matter */
    if (full) FX_DEBUG("get_done from %s: %u keys already have %u replicas", n->node_id, full, MKV_MAX_REPLICAS);
    fx_body_statuses_t ack = {{st, nk}};
    mkv_inv_flush(s, &inv);
    MKV_REPLY(p, h, statuses, &ack);
}

/* ---- EVICT (issue 7): an owner drops exact replicas of its own ---- */
/* Removes exactly replica (sender, offset) of the version (put_ms, put_ver) of each key;
 * a route left without replicas is deleted (later lookups miss). Anything else (no
 * route, another version, no such replica) answers STALE and changes nothing: a key
 * replaced while its old version was being evicted keeps its new version. No INVALIDATE
 * is sent: the sender drops its copy itself, the other replicas stay routed.
 * A key with a disk offset (issue 39) is not dropped: the replica moves to the sender's
 * disk tier, routed at that offset under a new replica number (a LOOKUP from the sender
 * finds it there; others do not read another owner's disk). A resend of a move already
 * made (its answer was lost) is OK again. */
FX_INTERNAL void fx_mkv_evict(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena)
{
    fx_body_evict_t b;
    MKV_DECODE(s, p, h, body, arena, evict, &b);
    const mkv_array_t arrays[] = {{"offsets", b.offsets.n, false},
                                  {"put_ms", b.put_ms.n, false},
                                  {"put_ver", b.put_ver.n, false},
                                  {"disk_offsets", b.disk_offsets.n, true}};
    mkv_batch_spec_t spec = {"evict", b.keys, arrays, FX_ARRAY_LEN(arrays), 0, UINT32_MAX, false, 1};
    uint64_t *st;
    master_node_t *n = mkv_batch_open(s, p, h, &spec, arena, &st);
    if (!n) return;
    uint32_t nk = b.keys.n;
    for (uint32_t i = 0; i < b.disk_offsets.n; i++) {
        uint64_t d = b.disk_offsets.v[i];
        if (d && (!fx_disk_is_off(d) || fx_disk_is_off(b.offsets.v[i]))) {
            mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT,
                     "evict from %s: key %u moves from offset %#llx to disk offset %#llx (a disk offset has bit 63 "
                     "set, a memory offset not)", n->node_id, i, (unsigned long long)b.offsets.v[i],
                     (unsigned long long)d);
            return;
        }
    }
    fx_mkv_inv_t inv = {0};
    uint32_t stale = 0;
    uint64_t kh[MKV_PREFETCH_BLOCK];
    for (uint32_t i = 0; i < nk; i++) {
        fx_str_t key = b.keys.v[i];
        uint64_t disk = b.disk_offsets.n ? b.disk_offsets.v[i] : 0;
        mkv_routes_prefetch_block(s, b.keys.v, i, nk, kh); /* the batch's misses overlap */
        mkv_route_t *r = mkv_route_get_h(s, key, kh[i % MKV_PREFETCH_BLOCK], &inv);
        bool version = r && r->put_ms == b.put_ms.v[i] && r->put_ver == b.put_ver.v[i];
        int j = version ? mkv_route_find(r, n, b.offsets.v[i]) : -1;
        if (j < 0 && disk && version && mkv_route_find(r, n, disk) >= 0) { /* moved already: a resend */
            st[i] = MKV_ST(FLUXON_OK);
            continue;
        }
        if (j >= 0 && disk && mkv_route_find(r, n, disk) >= 0) { /* read back from disk earlier: it is there */
            (void)mkv_route_drop_replica(s, key, r, (uint32_t)j); /* the disk replica stays: never the last */
            s->c.evict_to_disk++;
            st[i] = MKV_ST(FLUXON_OK);
            continue;
        }
        if (j >= 0 && disk) { /* issue 39: the replica moves to the sender's disk */
            mkv_replica_t *rep = &r->rep[j];
            fx_mkv_replica_free(s, rep); /* a placed range goes back to the allocator */
            rep->range_bytes = 0;
            rep->wb_by = NULL; /* its appender was told (FORGET): a disk record is no range */
            rep->offset = disk;
            rep->seq = ++s->rep_seq;
            s->c.evict_to_disk++;
            st[i] = MKV_ST(FLUXON_OK);
            continue;
        }
        if (j < 0) {
            st[i] = MKV_ST(FLUXON_ERR_STALE);
            stale++;
            continue;
        }
        s->c.evicted_replicas++;
        bool gone = mkv_route_drop_replica(s, key, r, (uint32_t)j);
        if (gone) s->c.evict_routes_deleted++;
        fx_mappend_count_evict(s, key, gone ? NULL : r);
        st[i] = MKV_ST(FLUXON_OK);
    }
    s->c.evict_batches++;
    s->c.evict_stale += stale;
    if (stale) FX_DEBUG("evict from %s: %u of %u keys stale", n->node_id, stale, nk);
    fx_body_statuses_t ack = {{st, nk}};
    mkv_inv_flush(s, &inv);
    MKV_REPLY(p, h, statuses, &ack);
}

/* ---- DELETE / EXISTS / LIST ---- */
/* A DELETE waits for its INVALIDATEs (W6): the owners holding a copy answer once they
 * dropped it, so a master restarted after the caller heard OK meets no owner that would
 * re-publish the key. Nothing here touches the KV state (the master may be deposed before
 * the answers come): the requester's connection and request only. */
typedef struct lk_del {
    fx_conn_t *conn; /* the requester's (referenced) */
    fx_frame_header_t h;
    uint32_t pending, unconfirmed, away, timeout_ms; /* unconfirmed: answers not OK; away: copies of owners
                                                      * not connected */
    int why; /* the first unconfirmed one's status */
    bool unremembered; /* tombs.c could not record it: an owner still to re-publish may bring it back */
    char reporting[FX_ID_MAX]; /* an owner awaited (re-publishing, or not back) when it was served ("": none) */
    char key[84];
} lk_del_t;

static void lk_del_end(lk_del_t *d)
{
    if (--d->pending) return;
    if (d->h.req_id && fx_conn_is_open(d->conn)) {
        if (!d->unconfirmed && !d->away && !d->unremembered && !d->reporting[0]) {
            fx_body_empty_t e;
            FX_CONN_REPLY(d->conn, &d->h, empty, &e);
        } else {
            /* each cause with what becomes of its copy */
            char why[600] = "";
            int k = 0;
            if (d->away)
                k = snprintf(why, sizeof why, "%u held by owners not connected (each drops its copy when it comes "
                             "back to this master)", d->away);
            if (d->unconfirmed && k >= 0 && (size_t)k < sizeof why)
                k += snprintf(why + k, sizeof why - (size_t)k, "%s%u not confirmed by their owner (%s; it drops its "
                              "copy when it reconnects to this master)", k ? "; " : "", d->unconfirmed,
                              d->why == FLUXON_ERR_TIMEOUT ? "no answer within the master's bound"
                                                           : fluxon_status_string(d->why));
            if (d->reporting[0] && k >= 0 && (size_t)k < sizeof why)
                k += snprintf(why + k, sizeof why - (size_t)k, "%sowner %s has not re-published to this new master "
                              "yet (a copy it reports is dropped then)", k ? "; " : "", d->reporting);
            if (d->unremembered && k >= 0 && (size_t)k < sizeof why)
                k += snprintf(why + k, sizeof why - (size_t)k, "%san owner still to re-publish to this master may "
                              "hold a copy, and this delete is not remembered (the record of a new master's deletes "
                              "is full or over): that copy would bring the key back", k ? "; " : "");
            FX_WARN("delete of %s: copies may remain: %s", d->key, why);
            fx_conn_reply_error(d->conn, &d->h, FLUXON_ERR_UNKNOWN_OUTCOME,
                                "delete of %s: the route is gone, but copies may remain: %s; if the master restarts "
                                "first, the key may come back: run the delete again to know", d->key, why);
        }
    }
    fx_conn_unref(d->conn);
    fx_free(d);
}

static void lk_on_inv_ack(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    lk_del_t *d = arg;
    if (status != FLUXON_OK && !d->unconfirmed++) d->why = status;
    lk_del_end(d);
}

/* The delete of key: the route goes, its copies' owners drop them, then the caller hears.
 * waited_ms: how long it was held (lk_hold). While an owner that may hold a copy the route
 * does not name yet is awaited (tombs.c: still re-publishing, or announced by the earlier
 * master and not back), the answer is UNKNOWN_OUTCOME naming it, never OK or NOT_FOUND: the
 * tombstone drops that copy when it is reported, but only this master knows of it. */
static void lk_delete(mkv_t *s, fx_conn_t *conn, const fx_frame_header_t *h, fx_str_t key, uint32_t waited_ms)
{
    fx_mkv_inv_t inv = {0};
    mkv_route_t *r = mkv_route_get(s, key, &inv);
    /* a new master's re-publication window: an owner not re-published yet may hold a copy */
    bool open = mkv_tombs_open(s, fx_now_ms());
    int trc = open ? mkv_tombs_put(s, key) : FLUXON_ERR_UNAVAILABLE; /* closed: not remembered */
    const char *awaited = mkv_tombs_awaited(s);
    if (open && trc != FLUXON_OK) {
        s->c.delete_tombstones_full += trc == FLUXON_ERR_NO_SPACE;
        FX_WARN("delete of %.*s: not remembered for the owners still to re-publish to this new master: %s",
                MKV_KEYF(key), trc == FLUXON_ERR_NO_SPACE ? "its record of deletes is full" : "out of memory");
    }
    if (!r) {
        mkv_inv_flush(s, &inv);
        if (awaited && trc == FLUXON_OK)
            mkv_fail_conn(s, conn, h, FLUXON_ERR_UNKNOWN_OUTCOME,
                        "delete of %.*s: no route, but owner %s has not re-published to this new master yet (after "
                        "%u ms) and may hold a copy: a copy it reports is dropped (the delete is remembered), but if "
                        "the master restarts before that, the key may come back", MKV_KEYF(key), awaited, waited_ms);
        else if (awaited)
            mkv_fail_conn(s, conn, h, FLUXON_ERR_UNKNOWN_OUTCOME,
                        "delete of %.*s: no route, but owner %s has not re-published to this master yet and may hold "
                        "a copy, and this delete is not remembered (%s): the key may come back with its report",
                        MKV_KEYF(key), awaited,
                        trc == FLUXON_ERR_NO_SPACE ? "this master's record of such deletes is full (262144)"
                        : trc == FLUXON_ERR_UNAVAILABLE ? "the window of a new master's deletes is over"
                                                        : "out of memory");
        else
            mkv_fail_conn(s, conn, h, FLUXON_ERR_NOT_FOUND, "key not found: %.*s", MKV_KEYF(key));
        return;
    }
    mkv_route_remove(s, key.p, key.len, r, &inv); /* the route goes first ... */
    s->c.deletes++;
    lk_del_t *d = fx_calloc(1, sizeof *d);
    if (!d) { /* ... then the owners are told, then the caller answered (not waiting: no memory) */
        mkv_inv_flush(s, &inv);
        if (h->req_id && fx_conn_is_open(conn)) {
            if (awaited) fx_conn_reply_error(conn, h, FLUXON_ERR_UNKNOWN_OUTCOME, "delete: out of memory");
            else {
                fx_body_empty_t e;
                (void)FX_CONN_REPLY(conn, h, empty, &e);
            }
        }
        return;
    }
    d->conn = conn;
    fx_conn_ref(d->conn);
    d->h = *h;
    d->pending = 1; /* ours, until every request is out */
    d->unremembered = awaited && trc != FLUXON_OK;
    if (awaited && trc == FLUXON_OK) snprintf(d->reporting, sizeof d->reporting, "%s", awaited);
    uint32_t bound = FX_MAX((s->m->cfg.master_timeout_ms ? s->m->cfg.master_timeout_ms : 5000u) / 2, 100u);
    d->timeout_ms = FX_MAX(bound > waited_ms ? bound - waited_ms : 0, 50u); /* the caller's bound holds */
    snprintf(d->key, sizeof d->key, "%.*s", MKV_KEYF(key));
    /* ... then the owners holding a copy drop it, then the caller is answered (an owner not
     * connected is told when it reconnects to this master) */
    size_t held = 0;
    d->pending += (uint32_t)mkv_inv_flush_acked(s, &inv, d->timeout_ms, lk_on_inv_ack, d, &held);
    if (held) { /* W6: an owner away holds a copy; if this master goes before it is back, it
                 * re-publishes the key to the next: the caller cannot be told OK */
        d->away += (uint32_t)held;
        s->c.deletes_unconfirmed_away++;
    }
    lk_del_end(d);
}

/* ---- DELETEs held while owners come back and re-publish (tombs.c) ----
 * A DELETE served while an owner that may hold a copy is awaited waits (at most half its
 * bound) for it: for an owner connected here and still re-publishing, its last batch (then
 * the route names its copy, and the delete has it dropped like any other, so that the OK
 * holds even if this master restarts too: a tombstone alone lives in its memory); for an
 * owner the earlier master announced and not back, only within this master's first
 * 2 x heartbeat_timeout_ms of serving (owners re-register then; one absent longer is not
 * waited for: the answer is UNKNOWN_OUTCOME at once). Checked every LK_HOLD_TICK_MS. */
#define LK_HOLD_TICK_MS 5u

typedef struct lk_held {
    struct lk_held *next;
    fx_conn_t *conn; /* referenced */
    fx_frame_header_t h;
    uint64_t since_ms, until_ms;
    uint32_t klen;
    char key[];
} lk_held_t;

/* Is a DELETE worth holding now: an owner is awaited, and it may come back soon? */
static bool lk_wait_worth(mkv_t *s, uint64_t now)
{
    if (!mkv_tombs_awaited(s)) return false;
    if (mkv_tombs_reporting(s)) return true;
    return now < s->tombs_since_ms + 2ull * s->m->cfg.heartbeat_timeout_ms;
}

static void lk_on_hold_tick(fx_reactor_t *r, fx_timer_t *t)
{
    mkv_t *s = FX_CONTAINER_OF(t, mkv_t, del_timer);
    uint64_t now = fx_now_ms();
    bool worth = lk_wait_worth(s, now);
    lk_held_t *keep = NULL, **tail = &keep;
    while (s->del_held) { /* in arrival order */
        lk_held_t *x = s->del_held;
        s->del_held = x->next;
        if (worth && now < x->until_ms) {
            x->next = NULL;
            *tail = x;
            tail = &x->next;
            continue;
        }
        s->c.deletes_held_expired += worth;
        lk_delete(s, x->conn, &x->h, (fx_str_t){x->key, x->klen}, (uint32_t)(now - x->since_ms));
        fx_conn_unref(x->conn);
        fx_free(x);
    }
    s->del_held = keep;
    if (s->del_held) fx_timer_arm(r, t, LK_HOLD_TICK_MS, lk_on_hold_tick);
}

/* Holds the DELETE of key while an owner is awaited; false: serve it now. */
static bool lk_hold(mkv_t *s, fx_conn_t *conn, const fx_frame_header_t *h, fx_str_t key)
{
    uint64_t now = fx_now_ms();
    if (!lk_wait_worth(s, now)) return false;
    lk_held_t *x = fx_malloc(sizeof *x + key.len);
    if (!x) return false; /* served now: the tombstone still catches the report */
    uint32_t bound = FX_MAX((s->m->cfg.master_timeout_ms ? s->m->cfg.master_timeout_ms : 5000u) / 2, 100u);
    *x = (lk_held_t){.conn = conn, .h = *h, .since_ms = now, .klen = key.len};
    x->until_ms = x->since_ms + bound / 2;
    memcpy(x->key, key.p, key.len);
    fx_conn_ref(conn);
    lk_held_t **pp = &s->del_held;
    while (*pp) pp = &(*pp)->next;
    *pp = x;
    s->c.deletes_held++;
    if (!fx_timer_armed(&s->del_timer)) fx_timer_arm(s->m->r, &s->del_timer, LK_HOLD_TICK_MS, lk_on_hold_tick);
    return true;
}

FX_INTERNAL void fx_mkv_deletes_held_drop(mkv_t *s)
{
    if (s->m && s->m->r) fx_timer_disarm(s->m->r, &s->del_timer);
    while (s->del_held) {
        lk_held_t *x = s->del_held;
        s->del_held = x->next;
        if (x->h.req_id && fx_conn_is_open(x->conn))
            fx_conn_reply_error(x->conn, &x->h, FLUXON_ERR_UNAVAILABLE,
                                "delete: this master stopped serving before it was done (not deleted here)");
        fx_conn_unref(x->conn);
        fx_free(x);
    }
}

FX_INTERNAL void fx_mkv_delete(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena)
{
    fx_body_key_t b;
    MKV_DECODE(s, p, h, body, arena, key, &b);
    if (!mkv_key_ok(b.key)) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "delete: key of %u bytes (must be 1..%u)", b.key.len,
                 MKV_MAX_KEY);
        return;
    }
    if (lk_hold(s, p->conn, h, b.key)) return;
    lk_delete(s, p->conn, h, b.key, 0);
}

FX_INTERNAL void fx_mkv_exists(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena)
{
    fx_body_keys_t b;
    MKV_DECODE(s, p, h, body, arena, keys, &b);
    fx_mkv_inv_t inv = {0};
    uint64_t count = 0;
    while (count < b.keys.n) {
        fx_str_t k = b.keys.v[count];
        mkv_route_t *r = mkv_key_ok(k) ? mkv_route_get(s, k, &inv) : NULL;
        if (!r || !mkv_route_has_alive_for(r, p->node)) break;
        count++;
    }
    fx_body_count_t ack = {count};
    mkv_inv_flush(s, &inv);
    MKV_REPLY(p, h, count, &ack);
}

FX_INTERNAL void fx_mkv_list(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                             fx_arena_t *arena)
{
    fx_body_list_t b;
    MKV_DECODE(s, p, h, body, arena, list, &b);
    uint32_t limit = b.limit ? FX_MIN(b.limit, MKV_LIST_MAX) : MKV_LIST_DEFAULT;
    uint32_t cap = (uint32_t)FX_MIN((size_t)limit, mkv_routes_count(s));
    fx_str_t *keys = fx_arena_alloc(arena, (cap ? cap : 1) * sizeof(fx_str_t));
    if (!keys) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "list: out of memory");
        return;
    }
    uint32_t n = 0; /* views valid until the reply is sent */
    if (mkv_routes_list(s, b.prefix, b.after, keys, cap, &n) != FLUXON_OK) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "list: out of memory for the prefix index of %zu keys",
                 mkv_routes_count(s));
        return;
    }
    fx_body_keys_t ack = {{keys, n}};
    MKV_REPLY(p, h, keys, &ack);
}
