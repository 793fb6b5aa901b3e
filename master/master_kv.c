/* master_kv.c — the master's KV state (ARCHITECTURE §5, §7, §10): per-owner segment
 * allocators and slot grants, the route table (key -> value_len, put_id, lease, atomic
 * group length, up to 4 replicas) with its ordered prefix index, batch publication
 * (PUT_DONE: per-owner batch dedup T1, same-identity convergence T2, whole-group
 * rejection A1/A2), lookups, durable replicas (GET_DONE), deletes, leases, listing,
 * and the one-way INVALIDATE messages that tell owners a replica is no longer routed.
 *
 * Reactor thread only (no locks). Every request is validated in full (each array length
 * against every other) before anything changes; a malformed one is answered with
 * FLUXON_ERR_INVALID_ARGUMENT and a message, and leaves the state as it was. A request
 * with req_id 0 is one-way and never answered.
 *
 * Decisions not spelled out elsewhere:
 *  - A route is "live" when its lease (if any) has not expired and at least one replica
 *    sits on an alive node of the recorded generation. LOOKUP and EXISTS see only live
 *    routes; REJECT_IF_EXIST rejects only against a live route (a route whose replicas
 *    are all on dead owners is replaced, so the key does not stay unwritable).
 *  - A route whose lease expired is deleted (with INVALIDATEs) the moment any request
 *    meets it, or by the lease timer (~20 ms period while leases exist).
 *  - PUT_DONE with a lease that is not live: every key gets FLUXON_ERR_LEASE_EXPIRED
 *    (keys that converge on their existing exact replica keep their put_id).
 *  - INVALIDATEs caused by a request are sent BEFORE its reply (one per affected owner,
 *    via master_kv_aux.c), so an owner that forwarded a DELETE, or published a newer
 *    version, has dropped the old replica by the time it hears OK.
 *  - Expected per-key outcomes (KEY_EXISTS, NOT_FOUND on lookup, STALE get_done) are
 *    logged at debug level, one summary per batch; request-level errors at warn. */
#include <stdarg.h>
#include <stdio.h>

#include "hmap.h"
#include "log.h"
#include "master_kv_int.h"
#include "offset_alloc.h"
#include "prefix_index.h"

/* ---- small helpers ---- */
FX_INTERNAL void mkv_fail(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, int status,
                     const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->c.error_replies++;
    FX_WARN("%s from %s: %s (%s)", fx_msg_name(h->type), fx_conn_desc(p->conn), msg,
            fluxon_status_string(status));
    if (h->req_id) fx_conn_reply_error(p->conn, h, status, "%s", msg);
}

FX_INTERNAL master_node_t *mkv_need_node(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h)
{
    master_node_t *n = p->node;
    if (!n || !n->kv) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT,
                 "%s needs a registered owner on this connection (send REGISTER first)",
                 fx_msg_name(h->type));
        return NULL;
    }
    return n;
}


static uint64_t mkv_realtime_ms(void) { return fx_realtime_ns() / 1000000ull; }

/* ONE global monotonic put_id generator: strictly increasing across the whole master. */
static void mkv_next_put_id(mkv_t *s, uint64_t *ms, uint32_t *ver)
{
    uint64_t now = mkv_realtime_ms();
    if (now > s->last_put_ms) {
        s->last_put_ms = now;
        s->last_put_ver = 0;
    } else if (s->last_put_ver == UINT32_MAX) {
        s->last_put_ms++;
        s->last_put_ver = 0;
    } else {
        s->last_put_ver++;
    }
    *ms = s->last_put_ms;
    *ver = s->last_put_ver;
}


/* the value [offset, offset + value_len) lies in the payload range of n's segment */
static bool mkv_range_ok(const master_node_t *n, uint64_t offset, uint64_t value_len)
{
    return offset >= FX_OFFSET_ALLOC_PAGE && offset <= n->segment_bytes &&
           value_len <= n->segment_bytes - offset;
}

static bool mkv_lease_live(mkv_t *s, uint64_t id) { return fx_lease_live(s->leases, id, fx_now_ms()); }

/* ---- invalidations ---- */
FX_INTERNAL void mkv_inv_flush(mkv_t *s, fx_mkv_inv_t *v)
{
    fx_mkv_inv_flush(v, &s->c.invalidations_sent, &s->c.invalidate_msgs);
}

/* Queues an INVALIDATE for every replica of r that belongs to its node's current
 * generation (replicas of an older generation died with that process). */
static void mkv_inv_route(fx_mkv_inv_t *v, const char *key, size_t klen, const mkv_route_t *r)
{
    for (uint32_t i = 0; i < r->n_rep; i++)
        if (r->rep[i].node->generation == r->rep[i].generation && !r->rep[i].range_bytes) /* ranges: no owner state */
            fx_mkv_inv_add(v, r->rep[i].node, key, klen, r->rep[i].offset, r->put_ms, r->put_ver);
}

/* ---- routes ---- */
/* Forgets r (already out of the map or about to be): invalidations (if v), counters,
 * lease bookkeeping. Frees r. */
static void mkv_route_release(mkv_t *s, const char *key, size_t klen, mkv_route_t *r, fx_mkv_inv_t *v)
{
    if (v) mkv_inv_route(v, key, klen, r);
    for (uint32_t i = 0; i < r->n_rep; i++) fx_mkv_replica_free(s, &r->rep[i]);
    s->replicas -= r->n_rep;
    if (r->lease_id) fx_lease_bind(s->leases, r->lease_id, -1);
    fx_free(r);
}

/* Removes the route of key (r is its value) from the map and the prefix index. key may be
 * the map's own copy (iteration): it is used last. */
FX_INTERNAL void mkv_route_remove(mkv_t *s, const char *key, size_t klen, mkv_route_t *r, fx_mkv_inv_t *v)
{
    if (fx_prefix_index_remove(s->index, key, klen) != FLUXON_OK)
        FX_ERROR("route %.*s was not in the prefix index", (int)FX_MIN(klen, 80u), key);
    mkv_route_release(s, key, klen, r, v);
    fx_hmap_del(s->routes, key, klen, NULL);
}

/* The route of key, or NULL; a route whose lease expired is deleted here (v collects the
 * invalidations). */
FX_INTERNAL mkv_route_t *mkv_route_get(mkv_t *s, fx_str_t key, fx_mkv_inv_t *v)
{
    mkv_route_t *r = fx_hmap_get(s->routes, key.p, key.len);
    if (r && r->lease_id && !mkv_lease_live(s, r->lease_id)) {
        FX_DEBUG("route %.*s: lease %llu expired; deleting", MKV_KEYF(key), (unsigned long long)r->lease_id);
        s->c.lease_routes_expired++;
        mkv_route_remove(s, key.p, key.len, r, v);
        return NULL;
    }
    return r;
}

/* ---- dedup of PUT_DONE batches (T1) ---- */
static void mkv_node_clear_acks(mkv_node_t *ns)
{
    for (uint32_t i = 0; i < MKV_DEDUP_ACKS; i++) {
        mkv_ack_t *a = &ns->ring[i];
        if (!a->body) continue;
        fx_hmap_del(ns->acks, &a->batch_id, sizeof a->batch_id, NULL);
        fx_free(a->body);
        a->body = NULL;
    }
    ns->ring_next = 0;
}

/* Takes ownership of body on success (returns true). */
static bool mkv_ack_remember(mkv_node_t *ns, uint64_t batch_id, uint8_t *body, size_t len)
{
    mkv_ack_t *a = &ns->ring[ns->ring_next];
    if (a->body) {
        fx_hmap_del(ns->acks, &a->batch_id, sizeof a->batch_id, NULL);
        fx_free(a->body);
        a->body = NULL;
    }
    if (fx_hmap_put(ns->acks, &batch_id, sizeof batch_id, a, NULL) != FLUXON_OK) return false;
    *a = (mkv_ack_t){batch_id, body, len};
    ns->ring_next = (ns->ring_next + 1) % MKV_DEDUP_ACKS;
    return true;
}

static void mkv_send_body(master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body, size_t len)
{
    if (!h->req_id) return;
    fx_frame_header_t rh = {FX_FRAME_MAGIC, h->type, FX_FLAG_RESPONSE, (uint32_t)len, FLUXON_OK, h->req_id};
    fx_conn_send_bytes(p->conn, &rh, body);
}

/* ---- GRANT ---- */
static void mkv_grant(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
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
    uint64_t *ids = mkv_arena_u64(arena, b.count), *offs = mkv_arena_u64(arena, b.count);
    if (!ids || !offs) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "grant: out of memory");
        return;
    }
    uint32_t k = 0;
    int arc = FLUXON_ERR_NO_SPACE;
    while (k < b.count && n->alloc) {
        arc = fx_offset_alloc_alloc(n->alloc, n->grant_bytes, &offs[k]);
        if (arc != FLUXON_OK) break;
        ids[k++] = n->next_grant_id++;
    }
    if (k == 0) {
        mkv_fail(s, p, h, arc == FLUXON_ERR_NOMEM ? FLUXON_ERR_NOMEM : FLUXON_ERR_NO_SPACE,
                 "grant: no room for a %llu-byte grant (slot_size %llu) in the segment of %s "
                 "(generation %llu, %llu bytes, %llu free, largest free %llu)",
                 (unsigned long long)n->grant_bytes, (unsigned long long)b.slot_size, n->node_id,
                 (unsigned long long)n->generation, (unsigned long long)n->segment_bytes,
                 (unsigned long long)(n->alloc ? fx_offset_alloc_free_bytes(n->alloc) : 0),
                 (unsigned long long)(n->alloc ? fx_offset_alloc_largest_free(n->alloc) : 0));
        return;
    }
    s->c.grants += k;
    if (k < b.count)
        FX_INFO("grant: %s asked for %u grants of %llu bytes, %u fit", n->node_id, b.count,
                (unsigned long long)n->grant_bytes, k);
    fx_body_grant_ack_t ack = {{ids, k}, {offs, k}};
    MKV_REPLY(p, h, grant_ack, &ack);
}

/* ---- PUT_DONE ---- */
enum { MKV_ACT_INSTALL = 0, MKV_ACT_CONVERGED = 1, MKV_ACT_REJECTED = 2 };

/* Checks a put_done body completely; returns false after replying. */
static bool mkv_put_done_valid(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h,
                               const master_node_t *n, const fx_body_put_done_t *b)
{
    uint32_t nk = b->keys.n;
    const char *why = NULL;
    char tmp[160];
    if (nk == 0) why = "empty batch (no keys)";
    else if (b->offsets.n != nk) {
        snprintf(tmp, sizeof tmp, "%u keys but %u offsets", nk, b->offsets.n);
        why = tmp;
    } else if (b->value_len == 0) why = "value_len is 0";
    else if (b->value_len > n->segment_bytes) {
        snprintf(tmp, sizeof tmp, "value_len %llu exceeds the segment (%llu bytes)",
                 (unsigned long long)b->value_len, (unsigned long long)n->segment_bytes);
        why = tmp;
    }
    if (!why && b->group_lens.n) {
        uint64_t sum = 0;
        for (uint32_t g = 0; g < b->group_lens.n && !why; g++) {
            uint64_t gl = b->group_lens.v[g];
            if (gl == 0 || gl > nk - sum) {
                snprintf(tmp, sizeof tmp, "group_lens[%u] = %llu: groups must be > 0 and sum to %u keys", g,
                         (unsigned long long)gl, nk);
                why = tmp;
            } else {
                sum += gl;
            }
        }
        if (!why && sum != nk) {
            snprintf(tmp, sizeof tmp, "group_lens sum to %llu, not to the %u keys", (unsigned long long)sum, nk);
            why = tmp;
        }
    }
    for (uint32_t i = 0; i < nk && !why; i++) {
        if (!mkv_key_ok(b->keys.v[i])) {
            snprintf(tmp, sizeof tmp, "key %u has %u bytes (must be 1..%u)", i, b->keys.v[i].len, MKV_MAX_KEY);
            why = tmp;
        } else if (!mkv_range_ok(n, b->offsets.v[i], b->value_len)) {
            snprintf(tmp, sizeof tmp, "key %u: offset %llu + value_len %llu is outside the payload range "
                     "[4096, %llu)", i, (unsigned long long)b->offsets.v[i],
                     (unsigned long long)b->value_len, (unsigned long long)n->segment_bytes);
            why = tmp;
        }
    }
    if (!why) return true;
    mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "put_done batch %llu from %s: %s",
             (unsigned long long)b->batch_id, n->node_id, why);
    return false;
}

/* Answers a PUT_DONE and remembers the answer for retries of the same batch (T1). */
static void mkv_put_done_reply(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, mkv_node_t *ns,
                               uint64_t batch_id, uint64_t *st, uint64_t *pms, uint64_t *pver, uint32_t nk)
{
    (void)s;
    fx_body_put_done_ack_t ack = {{st, nk}, {pms, nk}, {pver, nk}};
    size_t len = fx_body_put_done_ack_size(&ack);
    uint8_t *enc = fx_malloc(len ? len : 1);
    if (enc) {
        fx_body_put_done_ack_encode(&ack, enc);
        mkv_send_body(p, h, enc, len);
        if (!mkv_ack_remember(ns, batch_id, enc, len)) {
            FX_ERROR("put_done batch %llu: out of memory remembering the ack (a retry would re-apply)",
                     (unsigned long long)batch_id);
            fx_free(enc);
        }
    } else {
        FX_ERROR("put_done batch %llu: out of memory encoding the ack", (unsigned long long)batch_id);
        MKV_REPLY(p, h, put_done_ack, &ack);
    }
}

static void mkv_put_done(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                         fx_arena_t *arena)
{
    fx_body_put_done_t b;
    MKV_DECODE(s, p, h, body, arena, put_done, &b);
    master_node_t *n = mkv_need_node(s, p, h);
    if (!n) return;
    mkv_node_t *ns = n->kv;
    mkv_ack_t *prev = fx_hmap_get(ns->acks, &b.batch_id, sizeof b.batch_id);
    if (prev) { /* T1: a retry gets the same answer, nothing is applied twice */
        s->c.put_dedup++;
        FX_DEBUG("put_done batch %llu from %s is a retry: same ack", (unsigned long long)b.batch_id, n->node_id);
        mkv_send_body(p, h, prev->body, prev->len);
        return;
    }
    uint32_t nk = b.keys.n;
    uint64_t *st = mkv_arena_u64(arena, nk), *pms = mkv_arena_u64(arena, nk), *pver = mkv_arena_u64(arena, nk);
    uint8_t *act = fx_arena_alloc(arena, nk), *kept = fx_arena_alloc(arena, nk ? nk : 1);
    if (!st || !pms || !pver || !act || !kept) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "put_done batch %llu: out of memory", (unsigned long long)b.batch_id);
        return;
    }
    /* a placed batch (PUT_PLACE): its in-flight record says where the values are */
    mkv_inflight_t *rec = NULL;
    master_node_t *tn = n;
    if (b.put_token) {
        int tst;
        const char *why;
        rec = fx_mplace_find(s, n, &b, &tst, &why);
        if (!rec && tst != FLUXON_ERR_STALE) {
            mkv_fail(s, p, h, tst, "put_done batch %llu from %s, put_token %llu: %s", (unsigned long long)b.batch_id,
                     n->node_id, (unsigned long long)b.put_token, why);
            return;
        }
        if (!rec) { /* every key STALE: the sender falls back to publishing its own copy */
            FX_INFO("put_done batch %llu from %s, put_token %llu: %s; all %u keys STALE",
                    (unsigned long long)b.batch_id, n->node_id, (unsigned long long)b.put_token, why, nk);
            s->c.put_done_stale_token++;
            for (uint32_t i = 0; i < nk; i++) {
                st[i] = MKV_ST(FLUXON_ERR_STALE);
                pms[i] = pver[i] = 0;
            }
            mkv_put_done_reply(s, p, h, ns, b.batch_id, st, pms, pver, nk);
            return;
        }
        tn = rec->target;
    }
    if (!mkv_put_done_valid(s, p, h, tn, &b)) return; /* the in-flight record stays */
    if (rec) fx_mplace_detach(s, rec);
    memset(kept, 0, nk ? nk : 1);
    bool lease_ok = !b.lease_id || mkv_lease_live(s, b.lease_id);
    fx_mkv_inv_t inv = {0};
    size_t n_rejected = 0, n_conv = 0, first_rej = SIZE_MAX;
    /* pass 1: per key decision against the current routes (nothing changes yet, except
     * deleting routes whose lease expired) */
    for (uint32_t i = 0; i < nk; i++) {
        mkv_route_t *r = mkv_route_get(s, b.keys.v[i], &inv);
        st[i] = MKV_ST(FLUXON_OK);
        pms[i] = pver[i] = 0;
        act[i] = MKV_ACT_INSTALL;
        if (r && r->value_len == b.value_len && mkv_route_find(r, tn, b.offsets.v[i]) >= 0) {
            act[i] = MKV_ACT_CONVERGED; /* T2: this exact value is already published */
            kept[i] = 1;
            pms[i] = r->put_ms;
            pver[i] = r->put_ver;
            n_conv++;
        } else if (!lease_ok) {
            act[i] = MKV_ACT_REJECTED;
            st[i] = MKV_ST(FLUXON_ERR_LEASE_EXPIRED);
        } else if (r && (b.flags & FX_PUT_REJECT_IF_EXIST) && mkv_route_has_alive(r)) {
            act[i] = MKV_ACT_REJECTED;
            st[i] = MKV_ST(FLUXON_ERR_KEY_EXISTS);
        }
        if (act[i] == MKV_ACT_REJECTED && first_rej == SIZE_MAX) first_rej = i;
    }
    /* pass 2: a group with any rejected member is rejected whole (A1/A2) */
    uint32_t ngroups = b.group_lens.n ? b.group_lens.n : nk;
    for (uint32_t g = 0, start = 0; g < ngroups; g++) {
        uint32_t gl = b.group_lens.n ? (uint32_t)b.group_lens.v[g] : 1;
        bool rej = false;
        for (uint32_t i = start; i < start + gl; i++) rej |= act[i] == MKV_ACT_REJECTED;
        for (uint32_t i = start; rej && i < start + gl; i++) {
            if (act[i] != MKV_ACT_INSTALL) continue;
            act[i] = MKV_ACT_REJECTED;
            st[i] = MKV_ST(FLUXON_ERR_GROUP_REJECTED);
        }
        /* pass 3: install the accepted members of this group */
        for (uint32_t i = start; i < start + gl; i++) {
            if (act[i] != MKV_ACT_INSTALL) {
                n_rejected += act[i] == MKV_ACT_REJECTED;
                continue;
            }
            fx_str_t key = b.keys.v[i];
            mkv_route_t *nr = fx_calloc(1, sizeof *nr);
            if (!nr) goto nomem;
            nr->value_len = b.value_len;
            nr->lease_id = b.lease_id;
            nr->group_len = gl;
            nr->n_rep = 1;
            nr->rep[0] = (mkv_replica_t){tn, tn->generation, b.offsets.v[i], rec ? rec->range_bytes : 0};
            kept[i] = 1;
            mkv_next_put_id(s, &nr->put_ms, &nr->put_ver);
            void *old = NULL;
            if (fx_hmap_put(s->routes, key.p, key.len, nr, &old) != FLUXON_OK) {
                fx_free(nr);
                goto nomem;
            }
            if (old) {
                mkv_route_release(s, key.p, key.len, old, &inv);
            } else {
                int irc = fx_prefix_index_insert(s->index, key.p, key.len);
                if (irc != FLUXON_OK && irc != FLUXON_ERR_KEY_EXISTS) {
                    fx_hmap_del(s->routes, key.p, key.len, NULL);
                    fx_free(nr);
                    goto nomem;
                }
            }
            if (b.lease_id) fx_lease_bind(s->leases, b.lease_id, +1);
            s->replicas++;
            s->c.puts++;
            pms[i] = nr->put_ms;
            pver[i] = nr->put_ver;
            continue;
        nomem:
            FX_ERROR("put_done batch %llu from %s: out of memory installing %.*s", (unsigned long long)b.batch_id,
                     n->node_id, MKV_KEYF(key));
            st[i] = MKV_ST(FLUXON_ERR_NOMEM);
            n_rejected++;
        }
        start += gl;
    }
    s->c.put_done_batches++;
    s->c.put_converged += n_conv;
    s->c.put_rejected += n_rejected;
    if (first_rej != SIZE_MAX)
        FX_DEBUG("put_done batch %llu from %s: %zu of %u keys rejected (first: %.*s, %s)",
                 (unsigned long long)b.batch_id, n->node_id, n_rejected, nk, MKV_KEYF(b.keys.v[first_rej]),
                 fluxon_status_string((int)(int64_t)st[first_rej]));
    if (rec) fx_mplace_release(s, rec, kept); /* ranges of rejected keys go back */
    mkv_inv_flush(s, &inv); /* owners drop replaced versions before the publisher hears OK */
    mkv_put_done_reply(s, p, h, ns, b.batch_id, st, pms, pver, nk);
}

/* ---- LOOKUP ---- */
static void mkv_lookup(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                       fx_arena_t *arena)
{
    fx_body_lookup_t b;
    MKV_DECODE(s, p, h, body, arena, lookup, &b);
    master_node_t *self = p->node;
    uint32_t nk = b.keys.n;
    size_t max_src = FX_MAX(FX_MIN((size_t)nk, s->m->n_nodes), (size_t)1);
    uint64_t *cols = mkv_arena_u64(arena, (size_t)nk * 7);
    uint64_t *sgen = mkv_arena_u64(arena, max_src), *sbase = mkv_arena_u64(arena, max_src);
    fx_str_t *sid = fx_arena_alloc(arena, max_src * sizeof *sid);
    fx_str_t *saddr = fx_arena_alloc(arena, max_src * sizeof *saddr);
    fx_str_t *srkey = fx_arena_alloc(arena, max_src * sizeof *srkey);
    master_node_t **snode = fx_arena_alloc(arena, max_src * sizeof *snode);
    if (!cols || !sgen || !sbase || !sid || !saddr || !srkey || !snode) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "lookup of %u keys: out of memory", nk);
        return;
    }
    uint64_t *st = cols, *src = cols + nk, *offs = cols + 2 * (size_t)nk, *vlen = cols + 3 * (size_t)nk,
             *pms = cols + 4 * (size_t)nk, *pver = cols + 5 * (size_t)nk, *modes = cols + 6 * (size_t)nk;
    uint32_t nsrc = 0, hits = 0;
    fx_mkv_inv_t inv = {0};
    for (uint32_t i = 0; i < nk; i++) {
        st[i] = MKV_ST(FLUXON_ERR_NOT_FOUND);
        src[i] = UINT64_MAX;
        offs[i] = vlen[i] = pms[i] = pver[i] = modes[i] = 0;
        mkv_route_t *r = mkv_key_ok(b.keys.v[i]) ? mkv_route_get(s, b.keys.v[i], &inv) : NULL;
        if (!r) continue;
        /* a replica on the requester itself first (no network), else the first alive one */
        int pick = -1;
        for (uint32_t j = 0; j < r->n_rep; j++) {
            if (!mkv_replica_alive(&r->rep[j])) continue;
            if (r->rep[j].node == self) {
                pick = (int)j;
                break;
            }
            if (pick < 0) pick = (int)j;
        }
        if (pick < 0) continue;
        const mkv_replica_t *rep = &r->rep[pick];
        /* ReuseReplica: the requester's own slot holds it; otherwise a copy is made,
         * durable for at most 2 owners at once, temporary beyond (§7) */
        uint32_t live = 0; /* replicas of current generations: a GET_DONE could only add past these */
        for (uint32_t j = 0; j < r->n_rep; j++) live += r->rep[j].node->generation == r->rep[j].generation;
        if (rep->node == self && !rep->range_bytes) {
            modes[i] = FX_GET_REUSE;
            s->c.get_reuse++;
        } else if (self && live < MKV_MAX_REPLICAS) {
            modes[i] = fx_mplace_get_begin(s, b.keys.v[i], self);
            if (modes[i] == FX_GET_DURABLE) s->c.get_durable++;
            else s->c.get_temporary++;
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
            nsrc++;
        }
        st[i] = MKV_ST(FLUXON_OK);
        src[i] = si;
        offs[i] = rep->offset;
        vlen[i] = r->value_len;
        pms[i] = r->put_ms;
        pver[i] = r->put_ver;
        hits++;
    }
    s->c.lookups += nk;
    s->c.lookup_hits += hits;
    if (hits < nk) FX_DEBUG("lookup from %s: %u of %u keys hit", fx_conn_desc(p->conn), hits, nk);
    fx_body_lookup_ack_t ack = {{st, nk},     {src, nk},   {offs, nk},  {vlen, nk},   {pms, nk},   {pver, nk},
                                {sid, nsrc},  {sgen, nsrc}, {saddr, nsrc}, {srkey, nsrc}, {sbase, nsrc},
                                {modes, nk}};
    mkv_inv_flush(s, &inv);
    MKV_REPLY(p, h, lookup_ack, &ack);
}

/* ---- GET_DONE ---- */
static void mkv_get_done(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                         fx_arena_t *arena)
{
    fx_body_get_done_t b;
    MKV_DECODE(s, p, h, body, arena, get_done, &b);
    master_node_t *n = mkv_need_node(s, p, h);
    if (!n) return;
    uint32_t nk = b.keys.n;
    if (b.offsets.n != nk || b.put_ms.n != nk || b.put_ver.n != nk || b.value_lens.n != nk ||
        b.src_offsets.n != nk || (b.modes.n != nk && b.modes.n != 0)) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT,
                 "get_done from %s: %u keys, %u offsets, %u put_ms, %u put_ver, %u value_lens, %u src_offsets, "
                 "%u modes (lengths must match; modes may be empty = all durable)", n->node_id, nk, b.offsets.n,
                 b.put_ms.n, b.put_ver.n, b.value_lens.n, b.src_offsets.n, b.modes.n);
        return;
    }
    for (uint32_t i = 0; i < b.modes.n; i++)
        if (b.modes.v[i] != FX_GET_DURABLE && b.modes.v[i] != FX_GET_TEMPORARY && b.modes.v[i] != FX_GET_ABANDON) {
            mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "get_done from %s: modes[%u] = %llu (must be %u durable, "
                     "%u temporary or %u abandoned)", n->node_id, i, (unsigned long long)b.modes.v[i], FX_GET_DURABLE,
                     FX_GET_TEMPORARY, FX_GET_ABANDON);
            return;
        }
    /* the source the values were copied from */
    master_node_t *src = NULL;
    for (size_t j = 0; j < s->m->n_nodes; j++)
        if (fx_str_eq(b.src_node_id, s->m->nodes[j]->node_id)) src = s->m->nodes[j];
    for (uint32_t i = 0; i < nk; i++) {
        bool abandon = b.modes.n && b.modes.v[i] == FX_GET_ABANDON; /* no copy: nothing to check but the key */
        if (!mkv_key_ok(b.keys.v[i]) ||
            (!abandon && (b.value_lens.v[i] == 0 || !mkv_range_ok(n, b.offsets.v[i], b.value_lens.v[i])))) {
            mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT,
                     "get_done from %s: key %u (%u bytes, must be 1..%u) at offset %llu + %llu bytes "
                     "(payload range [4096, %llu))", n->node_id, i, b.keys.v[i].len, MKV_MAX_KEY,
                     (unsigned long long)b.offsets.v[i], (unsigned long long)b.value_lens.v[i],
                     (unsigned long long)n->segment_bytes);
            return;
        }
    }
    uint64_t *st = mkv_arena_u64(arena, nk);
    if (!st) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "get_done of %u keys: out of memory", nk);
        return;
    }
    fx_mkv_inv_t inv = {0};
    uint32_t stale = 0, full = 0;
    for (uint32_t i = 0; i < nk; i++) {
        bool durable = b.modes.n == 0 || b.modes.v[i] == FX_GET_DURABLE;
        if (durable || b.modes.v[i] == FX_GET_ABANDON) fx_mplace_get_end(s, b.keys.v[i], n);
        if (!durable && b.modes.v[i] == FX_GET_ABANDON) { /* its durable record is gone: done */
            st[i] = MKV_ST(FLUXON_OK);
            continue;
        }
        mkv_route_t *r = mkv_route_get(s, b.keys.v[i], &inv);
        if (!r || r->put_ms != b.put_ms.v[i] || r->put_ver != b.put_ver.v[i] || r->value_len != b.value_lens.v[i] ||
            !src || src->generation != b.src_generation || mkv_route_find(r, src, b.src_offsets.v[i]) < 0) {
            st[i] = MKV_ST(FLUXON_ERR_STALE); /* the version, or the copy's source, is gone */
            stale++;
            continue;
        }
        st[i] = MKV_ST(FLUXON_OK);
        if (!durable || mkv_route_find(r, n, b.offsets.v[i]) >= 0) continue; /* temporary: the source was intact */
        if (r->n_rep == MKV_MAX_REPLICAS) { /* make room by forgetting replicas of dead processes */
            uint32_t k = 0;
            for (uint32_t j = 0; j < r->n_rep; j++)
                if (r->rep[j].node->generation == r->rep[j].generation) r->rep[k++] = r->rep[j];
            s->replicas -= r->n_rep - k;
            r->n_rep = k;
        }
        if (r->n_rep == MKV_MAX_REPLICAS) {
            st[i] = MKV_ST(FLUXON_ERR_NO_SPACE);
            full++;
            continue;
        }
        r->rep[r->n_rep++] = (mkv_replica_t){n, n->generation, b.offsets.v[i], 0};
        s->replicas++;
        s->c.get_done_replicas++;
    }
    s->c.get_done_stale += stale;
    if (stale) FX_DEBUG("get_done from %s: %u of %u keys stale", n->node_id, stale, nk);
    if (full) FX_WARN("get_done from %s: %u keys already have %u replicas", n->node_id, full, MKV_MAX_REPLICAS);
    fx_body_statuses_t ack = {{st, nk}};
    mkv_inv_flush(s, &inv);
    MKV_REPLY(p, h, statuses, &ack);
}

/* ---- EVICT (issue 7): an owner drops exact replicas of its own ---- */
/* Removes exactly replica (sender, offset) of the version (put_ms, put_ver) of each key;
 * a route left without replicas is deleted (later lookups miss). Anything else (no
 * route, another version, no such replica) answers STALE and changes nothing: a key
 * replaced while its old version was being evicted keeps its new version. No INVALIDATE
 * is sent: the sender drops its copy itself, the other replicas stay routed. */
static void mkv_evict(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                      fx_arena_t *arena)
{
    fx_body_evict_t b;
    MKV_DECODE(s, p, h, body, arena, evict, &b);
    master_node_t *n = mkv_need_node(s, p, h);
    if (!n) return;
    uint32_t nk = b.keys.n;
    if (b.offsets.n != nk || b.put_ms.n != nk || b.put_ver.n != nk) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT,
                 "evict from %s: %u keys, %u offsets, %u put_ms, %u put_ver (lengths must match)", n->node_id, nk,
                 b.offsets.n, b.put_ms.n, b.put_ver.n);
        return;
    }
    for (uint32_t i = 0; i < nk; i++)
        if (!mkv_key_ok(b.keys.v[i])) {
            mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "evict from %s: key %u has %u bytes (must be 1..%u)",
                     n->node_id, i, b.keys.v[i].len, MKV_MAX_KEY);
            return;
        }
    uint64_t *st = mkv_arena_u64(arena, nk);
    if (!st) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "evict of %u keys: out of memory", nk);
        return;
    }
    fx_mkv_inv_t inv = {0};
    uint32_t stale = 0;
    for (uint32_t i = 0; i < nk; i++) {
        fx_str_t key = b.keys.v[i];
        mkv_route_t *r = mkv_route_get(s, key, &inv);
        int j = r && r->put_ms == b.put_ms.v[i] && r->put_ver == b.put_ver.v[i] ? mkv_route_find(r, n, b.offsets.v[i])
                                                                              : -1;
        if (j < 0) {
            st[i] = MKV_ST(FLUXON_ERR_STALE);
            stale++;
            continue;
        }
        fx_mkv_replica_free(s, &r->rep[j]);
        memmove(&r->rep[j], &r->rep[j + 1], (r->n_rep - (uint32_t)j - 1) * sizeof r->rep[0]);
        r->n_rep--;
        s->replicas--;
        s->c.evicted_replicas++;
        if (r->n_rep == 0) { /* the last copy: the key is gone (a later get misses) */
            mkv_route_remove(s, key.p, key.len, r, NULL);
            s->c.evict_routes_deleted++;
        }
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
static void mkv_delete(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                       fx_arena_t *arena)
{
    fx_body_key_t b;
    MKV_DECODE(s, p, h, body, arena, key, &b);
    if (!mkv_key_ok(b.key)) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "delete: key of %u bytes (must be 1..%u)", b.key.len,
                 MKV_MAX_KEY);
        return;
    }
    fx_mkv_inv_t inv = {0};
    mkv_route_t *r = mkv_route_get(s, b.key, &inv);
    if (!r) {
        mkv_inv_flush(s, &inv);
        mkv_fail(s, p, h, FLUXON_ERR_NOT_FOUND, "key not found: %.*s", MKV_KEYF(b.key));
        return;
    }
    mkv_route_remove(s, b.key.p, b.key.len, r, &inv); /* the route goes first ... */
    s->c.deletes++;
    mkv_inv_flush(s, &inv); /* ... then the owners are told, then the caller answered */
    fx_body_empty_t e;
    MKV_REPLY(p, h, empty, &e);
}

static void mkv_exists(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                       fx_arena_t *arena)
{
    fx_body_keys_t b;
    MKV_DECODE(s, p, h, body, arena, keys, &b);
    fx_mkv_inv_t inv = {0};
    uint64_t count = 0;
    while (count < b.keys.n) {
        fx_str_t k = b.keys.v[count];
        mkv_route_t *r = mkv_key_ok(k) ? mkv_route_get(s, k, &inv) : NULL;
        if (!r || !mkv_route_has_alive(r)) break;
        count++;
    }
    fx_body_count_t ack = {count};
    mkv_inv_flush(s, &inv);
    MKV_REPLY(p, h, count, &ack);
}

typedef struct mkv_list_ctx {
    mkv_t *s;
    fx_str_t *keys;
    uint32_t n, cap;
} mkv_list_ctx_t;

static int mkv_list_cb(void *arg, const char *key, size_t klen)
{
    mkv_list_ctx_t *c = arg;
    const char *stored = NULL; /* the route map's copy stays valid until the reply is sent */
    if (fx_hmap_get_key(c->s->routes, key, klen, &stored) != FLUXON_OK) {
        FX_ERROR("list: %.*s is in the prefix index but has no route", (int)FX_MIN(klen, 80u), key);
        return 0;
    }
    if (c->n < c->cap) c->keys[c->n++] = (fx_str_t){stored, (uint32_t)klen};
    return c->n < c->cap ? 0 : 1;
}

static void mkv_list(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                     fx_arena_t *arena)
{
    fx_body_list_t b;
    MKV_DECODE(s, p, h, body, arena, list, &b);
    uint32_t limit = b.limit ? FX_MIN(b.limit, MKV_LIST_MAX) : MKV_LIST_DEFAULT;
    size_t cap = FX_MIN((size_t)limit, fx_prefix_index_count(s->index));
    mkv_list_ctx_t c = {s, fx_arena_alloc(arena, (cap ? cap : 1) * sizeof(fx_str_t)), 0, (uint32_t)cap};
    if (!c.keys) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "list: out of memory");
        return;
    }
    if (cap)
        fx_prefix_index_list(s->index, b.prefix.p, b.prefix.len, b.after.len ? b.after.p : NULL, b.after.len,
                             cap, mkv_list_cb, &c);
    fx_body_keys_t ack = {{c.keys, c.n}};
    MKV_REPLY(p, h, keys, &ack);
}

/* ---- leases ---- */
static void mkv_on_lease_timer(fx_reactor_t *r, fx_timer_t *t)
{
    mkv_t *s = FX_CONTAINER_OF(t, mkv_t, lease_timer);
    uint64_t bound = 0;
    size_t expired = fx_lease_expire(s->leases, fx_now_ms(), &bound);
    s->c.leases_expired += expired;
    if (bound) { /* delete every route bound to a lease that is gone */
        fx_mkv_inv_t inv = {0};
        size_t dropped = 0;
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        const char *k;
        size_t kl;
        void *v;
        while (fx_hmap_iter_next(s->routes, &it, &k, &kl, &v)) {
            mkv_route_t *rt = v;
            if (!rt->lease_id || fx_lease_exists(s->leases, rt->lease_id)) continue;
            mkv_route_remove(s, k, kl, rt, &inv); /* deletes the entry just returned: allowed */
            dropped++;
        }
        s->c.lease_routes_expired += dropped;
        FX_INFO("%zu lease(s) expired: %zu routes deleted", expired, dropped);
        mkv_inv_flush(s, &inv);
    }
    if (fx_lease_count(s->leases)) fx_timer_arm(r, t, MKV_LEASE_TICK_MS, mkv_on_lease_timer);
}

static void mkv_lease_grant(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                            fx_arena_t *arena)
{
    fx_body_lease_t b;
    MKV_DECODE(s, p, h, body, arena, lease, &b);
    if (b.ttl_ms < 1 || b.ttl_ms > MKV_LEASE_TTL_MAX) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "lease: ttl_ms %llu must be 1..%llu",
                 (unsigned long long)b.ttl_ms, MKV_LEASE_TTL_MAX);
        return;
    }
    fx_body_lease_ack_t ack = {0};
    if (fx_lease_grant(s->leases, fx_now_ms() + b.ttl_ms, &ack.lease_id) != FLUXON_OK) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "lease: out of memory");
        return;
    }
    s->c.leases_granted++;
    if (!fx_timer_armed(&s->lease_timer))
        fx_timer_arm(s->m->r, &s->lease_timer, MKV_LEASE_TICK_MS, mkv_on_lease_timer);
    MKV_REPLY(p, h, lease_ack, &ack);
}

/* ---- nodes ---- */
/* A node came back with a new generation: its old replicas died with the old process.
 * Routes left without a replica are deleted. No INVALIDATE (nobody holds them). */
static void mkv_drop_generation(mkv_t *s, master_node_t *n, uint64_t old_generation)
{
    size_t dropped = 0, routes = 0;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(s->routes, &it, &k, &kl, &v)) {
        mkv_route_t *r = v;
        uint32_t keep = 0;
        for (uint32_t j = 0; j < r->n_rep; j++)
            if (r->rep[j].node != n || r->rep[j].generation == n->generation) r->rep[keep++] = r->rep[j];
        dropped += r->n_rep - keep;
        s->replicas -= r->n_rep - keep;
        r->n_rep = keep;
        if (keep == 0) {
            mkv_route_remove(s, k, kl, r, NULL);
            routes++;
        }
    }
    s->c.generation_routes_dropped += routes;
    FX_INFO("owner %s: generation %llu -> %llu: dropped %zu replicas of the old generation (%zu routes deleted)",
            n->node_id, (unsigned long long)old_generation, (unsigned long long)n->generation, dropped, routes);
}

FX_INTERNAL int fx_master_kv_node_registered(fx_master_t *m, master_node_t *n, uint64_t old_generation)
{
    mkv_t *s = m->kv;
    mkv_node_t *ns = n->kv;
    if (!s) return FLUXON_ERR_INTERNAL;
    if (ns && ns->generation == n->generation && old_generation == n->generation) return FLUXON_OK; /* reconnect */
    fx_offset_alloc_t *a = NULL;
    uint64_t top = n->segment_bytes / FX_OFFSET_ALLOC_PAGE * FX_OFFSET_ALLOC_PAGE;
    if (top > FX_OFFSET_ALLOC_PAGE) {
        int rc = fx_offset_alloc_create(FX_OFFSET_ALLOC_PAGE, top - FX_OFFSET_ALLOC_PAGE, &a);
        if (rc != FLUXON_OK) {
            FX_ERROR("owner %s: cannot create the segment allocator over [4096, %llu): %s", n->node_id,
                     (unsigned long long)top, fluxon_status_string(rc));
            return rc;
        }
    } else {
        FX_WARN("owner %s: segment of %llu bytes has no payload range; it gets no grants", n->node_id,
                (unsigned long long)n->segment_bytes);
    }
    if (!ns) {
        ns = fx_calloc(1, sizeof *ns);
        if (!ns || fx_hmap_create(MKV_DEDUP_ACKS, &ns->acks) != FLUXON_OK) {
            fx_free(ns);
            fx_offset_alloc_destroy(a);
            FX_ERROR("owner %s: out of memory for its KV state", n->node_id);
            return FLUXON_ERR_NOMEM;
        }
        n->kv = ns;
    } else {
        mkv_node_clear_acks(ns); /* batch ids are unique per generation only */
    }
    ns->generation = n->generation;
    fx_offset_alloc_destroy(n->alloc);
    n->alloc = a;
    n->placed_bytes = 0;
    n->next_grant_id = 1;
    /* grants the owner already holds (this master restarted under it) */
    for (uint32_t i = 0; a && i < n->reg_n_grants; i++) {
        int rc = fx_offset_alloc_reserve(a, n->reg_grant_offsets[i], n->grant_bytes);
        if (rc != FLUXON_OK)
            FX_ERROR("owner %s: its grant %llu at %llu cannot be re-learned: %s", n->node_id,
                     (unsigned long long)n->reg_grant_ids[i], (unsigned long long)n->reg_grant_offsets[i],
                     fluxon_status_string(rc));
        n->next_grant_id = FX_MAX(n->next_grant_id, n->reg_grant_ids[i] + 1);
    }
    if (n->reg_n_grants)
        FX_INFO("owner %s: re-learned %u grants it holds", n->node_id, n->reg_n_grants);
    if (old_generation != 0 && old_generation != n->generation) mkv_drop_generation(s, n, old_generation);
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
    mkv_node_t *ns = n->kv;
    if (ns) {
        mkv_node_clear_acks(ns);
        fx_hmap_destroy(ns->acks);
        fx_free(ns);
        n->kv = NULL;
    }
    fx_offset_alloc_destroy(n->alloc);
    n->alloc = NULL;
}

/* ---- lifecycle, dispatch, stats ---- */
static void mkv_free_values(fx_hmap_t *map)
{
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    void *v;
    while (map && fx_hmap_iter_next(map, &it, NULL, NULL, &v)) fx_free(v);
    fx_hmap_destroy(map);
}

FX_INTERNAL int fx_master_kv_init(fx_master_t *m)
{
    mkv_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    s->m = m;
    fx_timer_init(&s->lease_timer);
    int rc = fx_hmap_create(1024, &s->routes);
    if (rc == FLUXON_OK) rc = fx_prefix_index_create(&s->index);
    if (rc == FLUXON_OK) rc = fx_lease_table_create(&s->leases);
    if (rc == FLUXON_OK) rc = fx_mplace_create(s);
    if (rc != FLUXON_OK) {
        FX_ERROR("master: cannot create the route table: %s", fluxon_status_string(rc));
        fx_hmap_destroy(s->routes);
        fx_prefix_index_destroy(s->index);
        fx_lease_table_destroy(s->leases);
        fx_free(s);
        return rc;
    }
    m->kv = s;
    return FLUXON_OK;
}

FX_INTERNAL void fx_master_kv_fini(fx_master_t *m)
{
    mkv_t *s = m->kv;
    if (!s) return;
    fx_timer_disarm(m->r, &s->lease_timer);
    fx_mplace_destroy(s);
    mkv_free_values(s->routes);
    fx_lease_table_destroy(s->leases);
    fx_prefix_index_destroy(s->index);
    fx_free(s);
    m->kv = NULL;
}

FX_INTERNAL bool fx_master_kv_request(fx_master_t *m, master_peer_t *p, const fx_frame_header_t *h,
                                      const uint8_t *body, fx_arena_t *arena)
{
    mkv_t *s = m->kv;
    if (!s) return false;
    switch (h->type) {
    case FX_MSG_GRANT: mkv_grant(s, p, h, body, arena); return true;
    case FX_MSG_PUT_DONE: mkv_put_done(s, p, h, body, arena); return true;
    case FX_MSG_LOOKUP: mkv_lookup(s, p, h, body, arena); return true;
    case FX_MSG_GET_DONE: mkv_get_done(s, p, h, body, arena); return true;
    case FX_MSG_EVICT: mkv_evict(s, p, h, body, arena); return true;
    case FX_MSG_DELETE: mkv_delete(s, p, h, body, arena); return true;
    case FX_MSG_EXISTS: mkv_exists(s, p, h, body, arena); return true;
    case FX_MSG_LEASE_GRANT: mkv_lease_grant(s, p, h, body, arena); return true;
    case FX_MSG_LIST: mkv_list(s, p, h, body, arena); return true;
    case FX_MSG_PUT_PLACE: fx_mplace_put_place(s, p, h, body, arena); return true;
    case FX_MSG_PUT_REVOKE: fx_mplace_put_revoke(s, p, h, body, arena); return true;
    default: return false;
    }
}

FX_INTERNAL size_t fx_master_kv_stats_json(fx_master_t *m, char *buf, size_t cap)
{
    mkv_t *s = m->kv;
    if (!buf || !cap) return 0;
    buf[0] = '\0';
    if (!s) return 0;
    size_t len = (size_t)snprintf(buf, cap, "\"routes\":%zu,\"replicas\":%llu,\"leases\":%zu", fx_hmap_count(s->routes),
                                  (unsigned long long)s->replicas, fx_lease_count(s->leases));
#define MKV_JSON(name)                                                                            \
    if (len < cap) len += (size_t)snprintf(buf + len, cap - len, ",\"" #name "\":%llu", (unsigned long long)s->c.name);
    MKV_COUNTERS(MKV_JSON)
#undef MKV_JSON
    if (len < cap) len += fx_mplace_stats_json(s, buf + len, cap - len);
    return FX_MIN(len, cap - 1);
}
