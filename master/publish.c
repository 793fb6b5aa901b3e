/* publish.c — PUT_DONE, batch publication (ARCHITECTURE §5, §10): per-owner batch dedup
 * (T1: a retry gets the answer of the first attempt, nothing is applied twice),
 * same-identity convergence (T2: republishing the exact replica keeps its put_id), and
 * whole-group rejection (A1/A2: a group with a rejected member installs nothing).
 *
 *  - PUT_DONE with a lease that is not live: every key gets FLUXON_ERR_LEASE_EXPIRED
 *    (keys that converge on their existing exact replica keep their put_id).
 *  - REJECT_IF_EXIST rejects only against a live route (a route whose replicas are all on
 *    dead owners is replaced, so the key does not stay unwritable).
 *  - INVALIDATEs of replaced versions are sent BEFORE the reply, so the publisher and
 *    every other owner have dropped the old replica by the time the publisher hears OK.
 *  - A placed batch (put_token) installs its routes on the target of its in-flight record;
 *    ranges of rejected keys go back. */
#include <stdio.h>

#include "groups.h"
#include "log.h"
#include "mkv.h"

enum { PUB_INSTALL = 0, PUB_CONVERGED = 1, PUB_REJECTED = 2 };

/* ---- PUT_DONE ---- */
/* One PUT_DONE being applied: the request, its sender and target, and its columns. */
typedef struct pub_req {
    mkv_t *s;
    master_peer_t *p;
    const fx_frame_header_t *h;
    fx_body_put_done_t b;
    master_node_t *n, *tn; /* sender; target (the sender, or a placed batch's target) */
    mkv_inflight_t *rec;   /* a placed batch's in-flight record, or NULL */
    uint32_t nk;
    uint64_t *st, *pms, *pver;
    uint64_t *kh; /* each key's fx_hmap_hash: hashed once, its route slot prefetched */
    uint8_t *act, *kept;
} pub_req_t;

/* Checks what the prologue does not: value_len and offsets against the target's segment,
 * and the atomic groups. Returns false after replying. */
static bool pub_valid(pub_req_t *q)
{
    const fx_body_put_done_t *b = &q->b;
    const master_node_t *tn = q->tn;
    char why[200];
    bool ok = true;
    if (b->value_len == 0 || b->value_len > tn->segment_bytes) {
        snprintf(why, sizeof why, "value_len %llu must be 1..the segment size (%llu bytes)",
                 (unsigned long long)b->value_len, (unsigned long long)tn->segment_bytes);
        ok = false;
    } else if (!fx_groups_check(b->group_lens.v, b->group_lens.n, q->nk, why, sizeof why)) {
        ok = false;
    }
    for (uint32_t i = 0; i < q->nk && ok; i++)
        if (!mkv_range_ok(tn, b->offsets.v[i], b->value_len)) {
            snprintf(why, sizeof why, "key %u: offset %llu + value_len %llu is outside the payload range "
                     "[4096, %llu)", i, (unsigned long long)b->offsets.v[i], (unsigned long long)b->value_len,
                     (unsigned long long)tn->segment_bytes);
            ok = false;
        }
    if (!ok)
        mkv_fail(q->s, q->p, q->h, FLUXON_ERR_INVALID_ARGUMENT, "put_done batch %llu from %s: %s",
                 (unsigned long long)b->batch_id, q->n->node_id, why);
    return ok;
}

/* Encodes a PUT_DONE's answer and remembers it for retries of the same batch (T1);
 * *len_p its length. NULL when out of memory (nothing remembered). */
static uint8_t *pub_encode(pub_req_t *q, size_t *len_p)
{
    uint64_t batch_id = q->b.batch_id;
    fx_body_put_done_ack_t ack = {{q->st, q->nk}, {q->pms, q->nk}, {q->pver, q->nk}};
    size_t len = fx_body_put_done_ack_size(&ack);
    uint8_t *enc = fx_malloc(len ? len : 1);
    if (!enc) {
        FX_ERROR("put_done batch %llu: out of memory encoding the ack", (unsigned long long)batch_id);
        return NULL;
    }
    fx_body_put_done_ack_encode(&ack, enc);
    *len_p = len;
    return enc;
}

static void pub_remember(pub_req_t *q, uint8_t *enc, size_t len)
{
    if (!fx_mkv_dedup_remember(q->s, q->n, q->b.batch_id, enc, len)) {
        FX_ERROR("put_done batch %llu: out of memory remembering the ack (a retry would re-apply)",
                 (unsigned long long)q->b.batch_id);
        fx_free(enc);
    }
}

/* Answers a PUT_DONE and remembers the answer for retries of the same batch (T1). */
static void pub_reply(pub_req_t *q)
{
    size_t len = 0;
    uint8_t *enc = pub_encode(q, &len);
    if (!enc) {
        fx_body_put_done_ack_t ack = {{q->st, q->nk}, {q->pms, q->nk}, {q->pver, q->nk}};
        MKV_REPLY(q->p, q->h, put_done_ack, &ack);
        return;
    }
    mkv_send_body(q->p, q->h, enc, len);
    pub_remember(q, enc, len);
}

/* A placed put is answered once the range's owner recorded it (its PLACED acknowledged):
 * otherwise a master gone right after the OK could take the one-way PLACED with it, and
 * the value is re-published by nobody (an HA fault pass lost 4 acknowledged puts so). The
 * wait is bounded by a quarter of master_timeout_ms, shorter than the writer's own bound
 * on its PUT_DONE; a target that does not answer in time, or whose link goes, does not
 * change the answer: the route is installed either way (counted placed_unconfirmed). The
 * callback finds the writer's link by the reference it holds. */
typedef struct pub_wait {
    mkv_t *s;
    fx_conn_t *conn; /* the writer's link (referenced) */
    fx_frame_header_t h;
    uint8_t *ack;
    size_t len;
    uint32_t n_keys;
    uint64_t target_gen;
    char target[FX_ID_MAX];
} pub_wait_t;

static void pub_on_placed(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    (void)h, (void)body, (void)arena;
    pub_wait_t *w = arg;
    fx_master_t *m = w->s->m;
    master_node_t *tn = NULL; /* by identity: the node table may have been rebuilt meanwhile */
    for (size_t i = 0; !m->shutting_down && !m->resetting && i < m->n_nodes && !tn; i++)
        if (!strcmp(m->nodes[i]->node_id, w->target) && m->nodes[i]->generation == w->target_gen) tn = m->nodes[i];
    if (status == FLUXON_OK) {
        w->s->c.placed_confirmed++;
        if (tn) tn->placed_quiet_until_ms = 0;
    } else {
        w->s->c.placed_unconfirmed++;
        /* a stopped or slow owner: for a heartbeat timeout no placed put waits for it and
         * the placement passes it over, so one stall is not paid by every put */
        if (tn) tn->placed_quiet_until_ms = fx_now_ms() + FX_MAX(m->cfg.heartbeat_timeout_ms, 1000u);
        if (!m->shutting_down)
            FX_WARN("put_done: owner %s did not confirm recording %u placed values (%s); the writer is answered "
                    "anyway: they are routed, and a master restart before that owner records them misses them; "
                    "no placed put waits for it, nor goes to it, for %u ms",
                    w->target, w->n_keys, fluxon_status_string(status), FX_MAX(m->cfg.heartbeat_timeout_ms, 1000u));
    }
    if (w->h.req_id && fx_conn_is_open(w->conn)) {
        fx_frame_header_t rh = {FX_FRAME_MAGIC, w->h.type, FX_FLAG_RESPONSE, (uint32_t)w->len, FLUXON_OK, w->h.req_id};
        fx_conn_send_bytes(w->conn, &rh, w->ack);
    }
    fx_conn_unref(w->conn);
    fx_free(w->ack);
    fx_free(w);
}

/* Tells the target of a placed batch what it holds; true when the answer waits for its
 * acknowledgement (pub_on_placed sends it), false when the caller answers now. */
static bool pub_tell_target(pub_req_t *q)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < q->nk; i++) kept += q->kept[i];
    uint32_t bound = FX_MAX((q->s->m->cfg.master_timeout_ms ? q->s->m->cfg.master_timeout_ms : 5000u) / 4, 50u);
    size_t len = 0;
    bool quiet = q->tn->placed_quiet_until_ms && fx_now_ms() < q->tn->placed_quiet_until_ms;
    pub_wait_t *w = kept && q->h->req_id && !quiet ? fx_calloc(1, sizeof *w) : NULL;
    uint8_t *enc = w ? pub_encode(q, &len) : NULL;
    if (enc) w->ack = fx_malloc(len ? len : 1);
    if (!w || !enc || !w->ack) { /* one-way, as before */
        q->s->c.placed_unconfirmed += kept && quiet;
        if (w) fx_free(w->ack);
        fx_free(w);
        fx_free(enc);
        fx_mkv_placed_notify(q->s, q->tn, &q->b, q->kept, q->pms, q->pver, 0, NULL, NULL);
        return false;
    }
    memcpy(w->ack, enc, len);
    *w = (pub_wait_t){.s = q->s, .conn = q->p->conn, .h = *q->h, .ack = w->ack, .len = len, .n_keys = kept,
                      .target_gen = q->tn->generation};
    fx_strlcpy(w->target, q->tn->node_id, sizeof w->target);
    fx_conn_ref(w->conn);
    if (!fx_mkv_placed_notify(q->s, q->tn, &q->b, q->kept, q->pms, q->pver, bound, pub_on_placed, w)) {
        fx_conn_unref(w->conn);
        fx_free(w->ack);
        fx_free(w);
        fx_free(enc);
        return false;
    }
    pub_remember(q, enc, len);
    return true;
}

/* A placed batch: finds its in-flight record (q->rec, q->tn). Returns false when the
 * request is answered already (refused, or every key STALE: the sender falls back to
 * publishing its own copy). */
static bool pub_placed(pub_req_t *q)
{
    int tst;
    const char *why;
    q->rec = fx_mplace_find(q->s, q->n, &q->b, &tst, &why);
    if (q->rec) {
        q->tn = q->rec->target;
        return true;
    }
    if (tst != FLUXON_ERR_STALE) {
        mkv_fail(q->s, q->p, q->h, tst, "put_done batch %llu from %s, put_token %llu: %s",
                 (unsigned long long)q->b.batch_id, q->n->node_id, (unsigned long long)q->b.put_token, why);
        return false;
    }
    FX_INFO("put_done batch %llu from %s, put_token %llu: %s; all %u keys STALE", (unsigned long long)q->b.batch_id,
            q->n->node_id, (unsigned long long)q->b.put_token, why, q->nk);
    q->s->c.put_done_stale_token++;
    for (uint32_t i = 0; i < q->nk; i++) {
        q->st[i] = MKV_ST(FLUXON_ERR_STALE);
        q->pms[i] = q->pver[i] = 0;
    }
    pub_reply(q);
    return false;
}

/* Pass 1: each key's decision against the current routes (nothing changes yet, except
 * deleting routes whose lease expired). Returns the first rejected index, or SIZE_MAX. */
static size_t pub_decide(pub_req_t *q, fx_mkv_inv_t *inv, size_t *n_conv)
{
    const fx_body_put_done_t *b = &q->b;
    bool lease_ok = !b->lease_id || fx_lease_live(q->s->leases, b->lease_id, fx_now_ms());
    size_t first_rej = SIZE_MAX;
    for (uint32_t i = 0; i < q->nk; i++) {
        if (i % 32 == 0) /* blocks of 32 keys: hashed and prefetched, then looked up (the misses overlap) */
            for (uint32_t j = i; j < q->nk && j < i + 32; j++) {
                q->kh[j] = fx_hmap_hash(b->keys.v[j].p, b->keys.v[j].len);
                mkv_routes_prefetch(q->s, q->kh[j]);
            }
        mkv_route_t *r = mkv_route_get_h(q->s, b->keys.v[i], q->kh[i], inv);
        q->st[i] = MKV_ST(FLUXON_OK);
        q->pms[i] = q->pver[i] = 0;
        q->act[i] = PUB_INSTALL;
        if (r && r->value_len == b->value_len && mkv_route_find(r, q->tn, b->offsets.v[i]) >= 0) {
            q->act[i] = PUB_CONVERGED; /* T2: this exact value is already published */
            q->kept[i] = 1;
            q->pms[i] = r->put_ms;
            q->pver[i] = r->put_ver;
            (*n_conv)++;
        } else if (!lease_ok) {
            q->act[i] = PUB_REJECTED;
            q->st[i] = MKV_ST(FLUXON_ERR_LEASE_EXPIRED);
        } else if (r && (b->flags & FX_PUT_REJECT_IF_EXIST) && mkv_route_has_alive_for(r, q->n)) {
            q->act[i] = PUB_REJECTED;
            q->st[i] = MKV_ST(FLUXON_ERR_KEY_EXISTS);
        }
        if (q->act[i] == PUB_REJECTED && first_rej == SIZE_MAX) first_rej = i;
    }
    return first_rej;
}

/* Pass 2: a group with any rejected member is rejected whole (A1/A2); converged members
 * keep their route. */
static void pub_reject_groups(pub_req_t *q)
{
    fx_group_iter_t it = fx_group_iter(q->b.group_lens.v, q->b.group_lens.n, q->nk);
    while (fx_group_next(&it)) {
        bool rej = false;
        for (size_t i = it.start; i < it.start + it.len; i++) rej |= q->act[i] == PUB_REJECTED;
        for (size_t i = it.start; rej && i < it.start + it.len; i++) {
            if (q->act[i] != PUB_INSTALL) continue;
            q->act[i] = PUB_REJECTED;
            q->st[i] = MKV_ST(FLUXON_ERR_GROUP_REJECTED);
        }
    }
}

/* Pass 3: installs the accepted keys. Returns the number not installed. */
static size_t pub_install(pub_req_t *q, fx_mkv_inv_t *inv)
{
    const fx_body_put_done_t *b = &q->b;
    size_t n_rejected = 0;
    fx_group_iter_t it = fx_group_iter(b->group_lens.v, b->group_lens.n, q->nk);
    while (fx_group_next(&it)) {
        for (size_t i = it.start; i < it.start + it.len; i++) {
            if (q->act[i] != PUB_INSTALL) {
                n_rejected += q->act[i] == PUB_REJECTED;
                continue;
            }
            mkv_replica_t rep = {.node = q->tn, .generation = q->tn->generation, .offset = b->offsets.v[i],
                                 .range_bytes = q->rec ? q->rec->range_bytes : 0};
            uint32_t ver = 0;
            if (mkv_route_install(q->s, b->keys.v[i], q->kh[i], b->value_len, b->lease_id, (uint32_t)it.len, &rep, &q->pms[i],
                                  &ver, inv) != FLUXON_OK) {
                FX_ERROR("put_done batch %llu from %s: out of memory installing %.*s", (unsigned long long)b->batch_id,
                         q->n->node_id, MKV_KEYF(b->keys.v[i]));
                q->st[i] = MKV_ST(FLUXON_ERR_NOMEM);
                n_rejected++;
                continue;
            }
            q->pver[i] = ver;
            q->kept[i] = 1;
            if (rep.range_bytes) /* a placed value on a replica target ages out with its copies */
                fx_mappend_ranged(q->s, q->tn, b->keys.v[i], rep.offset, q->pms[i], ver, inv);
            q->s->c.puts++;
        }
    }
    return n_rejected;
}

FX_INTERNAL void fx_mkv_put_done(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena)
{
    pub_req_t q = {.s = s, .p = p, .h = h};
    MKV_DECODE(s, p, h, body, arena, put_done, &q.b);
    master_node_t *n = mkv_need_node(s, p, h);
    if (!n) return;
    const uint8_t *prev;
    size_t prev_len;
    switch (fx_mkv_dedup_check(s, n, q.b.batch_id, &prev, &prev_len)) {
    case MKV_DEDUP_ANSWERED: /* T1: a retry gets the same answer, nothing is applied twice */
        s->c.put_dedup++;
        FX_DEBUG("put_done batch %llu from %s is a retry: same ack", (unsigned long long)q.b.batch_id, n->node_id);
        mkv_send_body(p, h, prev, prev_len);
        return;
    case MKV_DEDUP_FORGOTTEN:
        s->c.put_done_too_old++;
        mkv_fail(s, p, h, FLUXON_ERR_STALE, "put_done batch %llu from %s: not applied: the answers of this owner's "
                 "batches up to %llu were dropped (kept %u x master_timeout_ms after the last attempt, at most %u "
                 "bytes), so a retry could be applied twice", (unsigned long long)q.b.batch_id, n->node_id,
                 (unsigned long long)fx_mkv_dedup_watermark(n), MKV_DEDUP_TTL_FACTOR, MKV_DEDUP_MAX_BYTES);
        return;
    default: break;
    }
    const mkv_array_t arrays[] = {{"offsets", q.b.offsets.n, false}};
    mkv_batch_spec_t spec = {"put_done", q.b.keys, arrays, 1, 1, UINT32_MAX, false, 3};
    uint64_t *cols;
    if (!mkv_batch_open(s, p, h, &spec, arena, &cols)) return;
    q.n = q.tn = n;
    q.nk = q.b.keys.n;
    q.st = cols;
    q.pms = cols + q.nk;
    q.pver = cols + 2 * (size_t)q.nk;
    q.act = fx_arena_alloc(arena, q.nk);
    q.kept = fx_arena_alloc(arena, q.nk);
    q.kh = fx_arena_alloc(arena, (size_t)q.nk * sizeof *q.kh);
    if (!q.act || !q.kept || !q.kh) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "put_done batch %llu: out of memory", (unsigned long long)q.b.batch_id);
        return;
    }
    memset(q.kept, 0, q.nk);
    if (q.b.put_token && !pub_placed(&q)) return;
    if (!pub_valid(&q)) return; /* the in-flight record stays */
    if (q.rec) fx_mplace_detach(s, q.rec);
    fx_mkv_inv_t inv = {0};
    size_t n_conv = 0, first_rej = pub_decide(&q, &inv, &n_conv);
    pub_reject_groups(&q);
    size_t n_rejected = pub_install(&q, &inv);
    s->c.put_done_batches++;
    s->c.put_converged += n_conv;
    s->c.put_rejected += n_rejected;
    if (first_rej != SIZE_MAX)
        FX_DEBUG("put_done batch %llu from %s: %zu of %u keys rejected (first: %.*s, %s)",
                 (unsigned long long)q.b.batch_id, n->node_id, n_rejected, q.nk, MKV_KEYF(q.b.keys.v[first_rej]),
                 fluxon_status_string((int)(int64_t)q.st[first_rej]));
    bool waits = q.rec && q.tn != n && pub_tell_target(&q); /* it re-publishes them */
    if (q.rec) fx_mplace_release(s, q.rec, q.kept); /* ranges of rejected keys go back */
    mkv_inv_flush(s, &inv); /* owners drop replaced versions before the publisher hears OK */
    if (!waits) pub_reply(&q);
}

