/* append.c — replica tasks and write-backs on the master (issue 16, ARCHITECTURE §9):
 *
 *   APPEND_START {value_len, keys, offsets, put_ms, put_ver, group_lens}: atomic groups
 *     (or TP cohorts) of the sender's committed values, one batch (G8). Per key: the route must be at that
 *     version with that replica on the sender (else STALE); a key another append is copying
 *     is KEY_BEING_WRITTEN; a key that already has a replica on a target is KEY_EXISTS
 *     ("already satisfied"). A group shares ONE status when any key fails (a partial copy
 *     never counts as one), except that satisfied keys stay satisfied. The master picks
 *     ONE target for the batch (so each group lands whole on one) among the alive owners whose node role is in replica_target_roles (default
 *     remote_cache only, never another role: none with room = NO_SPACE), allocates a range
 *     per key and records an in-flight append (token, TTL inflight_ttl_ms). Answer:
 *     put_place_ack (put_token = the append token).
 *   APPEND_DONE {token, pushed}: pushed: each key whose route is still at that version and
 *     still names the sender's source replica (so the source slot was intact for the whole
 *     copy: D1) gets the target's range as a replica; the others are freed and counted
 *     obsolete. Not pushed: every range is freed (failed, by cause transfer).
 *
 * Targets keep their own coldest values out: the ranged replicas on targets (appended here,
 * placed by puts, re-published after a restart: fx_mappend_ranged) form one FIFO;
 * when no target has room for a batch, the oldest of them are dropped (the route goes with
 * its last replica: a later miss) until one fits or MAPP_EVICT_MAX were dropped. Entries
 * whose replica went otherwise (replaced, deleted, evicted) are skipped when met.
 *
 * Counters (stats JSON, member "append_*", "hits_*", "evict_*"): every started append's keys
 * end in exactly one of completed / obsolete / failed_transfer / expired. Reactor thread only. */
#include <stdio.h>

#include "groups.h"
#include "log.h"
#include "mkv.h"

#define MAPP_MAX_KEYS 4096u   /* keys of one APPEND_START (one group / cohort) */
#define MAPP_EVICT_MAX 65536u /* cold replicas dropped per APPEND_START looking for room */

typedef struct mapp_rec {
    uint64_t token, deadline_ms;
    master_node_t *src, *tgt;
    uint64_t src_gen, tgt_gen, value_len, range_bytes;
    uint32_t n;
    char **keys;
    uint32_t *klens;
    uint64_t *src_offs, *put_ms, *put_ver, *offs;
    uint64_t *src_seqs; /* W3: the number of each source replica at APPEND_START */
    uint8_t *busy;      /* 1: key i still holds its route's `appending` count (mapp_busy) */
    bool abandoned; /* W4: its push failed but may still land: only its ranges are kept, until the TTL */
    struct mapp_rec *prev, *next; /* FIFO by deadline */
} mapp_rec_t;

typedef struct mapp_cold { /* one replica appended to a target, oldest first */
    struct mapp_cold *next;
    master_node_t *node;
    uint64_t no, gen, rep_seq; /* this entry's number; the replica's generation and number (W3) */
    uint64_t kh;               /* the key's hash in the routes: pops prefetch their next ones */
    uint32_t klen;
    char key[];
} mapp_cold_t;

#define MAPP_COUNTERS(X)                                                                       \
    X(append_requests) X(append_started) X(append_keys_started) X(append_keys_completed)        \
    X(append_keys_obsolete) X(append_keys_failed_transfer) X(append_keys_expired)               \
    X(append_keys_abandoned) /* of failed_transfer: ranges kept until the TTL (W4) */               \
    X(append_rejected_stale) X(append_rejected_busy) X(append_rejected_no_target)              \
    X(append_rejected_no_space) X(append_keys_already) X(append_done_unknown)                   \
    X(append_rejected_room_coming) /* BUSY: room in its reuse delay, asked again */                 \
    X(target_replicas_remote_cache) X(target_replicas_gpu_owner) X(target_cold_dropped)        \
    X(target_cold_routes_deleted) X(hits_local) X(hits_remote_gpu) X(hits_cpu_owner)             \
    X(evict_demoted) X(evict_dropped) X(target_refreshed) X(target_refreshed_at_evict) X(target_touched) X(target_refreshed_at_read) X(target_touch_stale) X(target_promoted_away) X(target_cold_listed)       \
    X(target_cold_compactions)          \
    X(append_placed_told)               \
    X(target_ranges_invalidated) /* W1: dropped ranged replicas invalidated at their owner */

typedef struct fx_mappend {
    mkv_t *s;
    fx_hmap_t *by_token; /* token -> rec (a key's in-flight appends: mkv_route_t.appending) */
    mapp_rec_t *head, *tail;
    mapp_cold_t *cold_head, *cold_tail;
    uint64_t n_cold, next_token, next_seq;
    fx_timer_t timer;
    fx_timer_t compact_timer; /* the cold FIFO's compaction, a reactor turn after a push asks */
    uint64_t cold_after;      /* entries left by the last compaction */
    struct {
#define MAPP_FIELD(name) uint64_t name;
        MAPP_COUNTERS(MAPP_FIELD)
#undef MAPP_FIELD
    } c;
} fx_mappend_t;

static uint32_t mapp_ttl(const mkv_t *s) { return s->m->cfg.inflight_ttl_ms ? s->m->cfg.inflight_ttl_ms : 60000u; }

static bool mapp_is_target(const mkv_t *s, const master_node_t *n)
{
    return (s->m->cfg.replica_target_roles & (1u << n->node_role)) != 0;
}

/* The in-flight appends of the key's route at this version (mkv_route_t.appending): a
 * field of the route, looked up without side effects (before, a map of busy keys cost a
 * lookup, an insert with its allocation and a removal per copied key: ~15 ms of the master's
 * CPU a trace replay with a CPU owner). A route gone, or replaced by a newer version (a new
 * route, at 0), is left alone. */
static void mapp_busy(fx_mappend_t *a, const char *k, uint32_t kl, uint64_t put_ms, uint64_t put_ver, int delta)
{
    mkv_route_t *r = a->s->routes ? fx_hmap_get(a->s->routes, k, kl) : NULL;
    if (!r || r->put_ms != put_ms || r->put_ver != put_ver) return;
    if (delta > 0) r->appending++;
    else if (r->appending) r->appending--;
}

static void mapp_free_range(mapp_rec_t *r, uint32_t i)
{
    master_node_t *t = r->tgt;
    if (!r->offs[i] || t->generation != r->tgt_gen || !t->alloc) return;
    if (fx_offset_alloc_free(t->alloc, r->offs[i]) == FLUXON_OK)
        t->placed_bytes -= FX_MIN(t->placed_bytes, r->range_bytes);
    r->offs[i] = 0;
}

/* Out of the tables; frees the ranges still set in r->offs and r itself. */
static void mapp_rec_end(fx_mappend_t *a, mapp_rec_t *r)
{
    fx_hmap_del(a->by_token, &r->token, sizeof r->token, NULL);
    if (r->prev) r->prev->next = r->next;
    else a->head = r->next;
    if (r->next) r->next->prev = r->prev;
    else a->tail = r->prev;
    for (uint32_t i = 0; i < r->n; i++) {
        mapp_free_range(r, i);
        if (r->keys[i] && r->busy[i]) /* NULL: abandoned (mapp_abandon); 0: APPEND_DONE let go */
            mapp_busy(a, r->keys[i], r->klens[i], r->put_ms[i], r->put_ver[i], -1);
    }
    fx_free(r); /* its arrays and keys are in the same block (mapp_rec_new) */
}

static void mapp_on_timer(fx_reactor_t *rx, fx_timer_t *t);

/* W4: the push of r was started and failed or timed out, and UCX may still deliver its
 * bytes: its keys are let go now (no longer busy, no APPEND_DONE for it any more), its
 * ranges stay allocated until its TTL (beyond the owner's push deadline, 3/4 of it). */
static void mapp_abandon(fx_mappend_t *a, mapp_rec_t *r)
{
    fx_hmap_del(a->by_token, &r->token, sizeof r->token, NULL);
    for (uint32_t i = 0; i < r->n; i++)
        if (r->keys[i]) { /* the keys are no longer busy; the bytes stay in r's block */
            if (r->busy[i]) mapp_busy(a, r->keys[i], r->klens[i], r->put_ms[i], r->put_ver[i], -1);
            r->keys[i] = NULL;
        }
    r->abandoned = true;
    a->c.append_keys_abandoned += r->n;
}

static void mapp_arm(fx_mappend_t *a)
{
    if (fx_timer_armed(&a->timer) || !a->head) return;
    uint64_t now = fx_now_ms();
    uint64_t when = FX_MAX(a->head->deadline_ms, now + 1);
    fx_timer_arm(a->s->m->r, &a->timer, when - now, mapp_on_timer);
}

static void mapp_on_timer(fx_reactor_t *rx, fx_timer_t *t)
{
    (void)rx;
    fx_mappend_t *a = FX_CONTAINER_OF(t, fx_mappend_t, timer);
    uint64_t now = fx_now_ms();
    while (a->head && a->head->deadline_ms <= now) { /* TTL: the ranges go */
        mapp_rec_t *r = a->head;
        if (r->abandoned) { /* answered already (failed_transfer): only its ranges were left */
            mapp_rec_end(a, r);
            continue;
        }
        FX_WARN("append %llu of %u keys from %s expired after %u ms; its ranges on %s are freed",
                (unsigned long long)r->token, r->n, r->src->node_id, mapp_ttl(a->s), r->tgt->node_id);
        a->c.append_keys_expired += r->n;
        mapp_rec_end(a, r);
    }
    mapp_arm(a);
}

/* ---- the targets' cold FIFO ----
 * An entry per replica appended to a target, in order; pushing the same replica again (it
 * was found again by a write-back: "already") voids the older entry, so the order is the one
 * in which the GPU owners let go of the values (an exclusive second level). The replica
 * itself says which entry stands for it (mkv_replica_t.cold): an entry is checked with the
 * one route lookup its drop needs anyway, and no map of entries is kept beside the routes
 * (before: a key -> entry map, one insert, lookup and delete more a copy). */
static void mapp_on_compact(fx_reactor_t *rx, fx_timer_t *t);

/* Appends an entry for rep. A compaction it makes due runs a reactor turn later, never here:
 * callers hold route pointers, and a compaction's route lookups delete expired routes. */
static void mapp_cold_push(fx_mappend_t *a, fx_str_t key, mkv_replica_t *rep)
{
    mapp_cold_t *e = fx_malloc(sizeof *e + key.len);
    if (!e) return; /* the replica stays; only target-side eviction cannot pick it */
    *e = (mapp_cold_t){NULL, rep->node, ++a->next_seq, rep->generation, rep->seq, fx_hmap_hash(key.p, key.len),
                       (uint32_t)key.len};
    rep->cold = e->no;
    memcpy(e->key, key.p, key.len);
    if (a->cold_tail) a->cold_tail->next = e;
    else a->cold_head = e;
    a->cold_tail = e;
    a->n_cold++;
    /* Without room pressure nothing pops the FIFO: when it holds many entries that may no
     * longer name a replica (voided, deleted, replaced, evicted), they go in one pass. A
     * route may have several live entries (a copy on each of two targets), so a pass can
     * leave more than twice the routes: the next one waits until the FIFO has doubled
     * since (each pass's cost is then paid by as many pushes; before, a pass ran on every
     * push: 14.8 s for 20,000 routes with two target copies each) */
    if (a->n_cold >= 4096 && a->n_cold >= 2 * (uint64_t)mkv_routes_count(a->s) && a->n_cold >= 2 * a->cold_after &&
        !fx_timer_armed(&a->compact_timer))
        fx_timer_arm(a->s->m->r, &a->compact_timer, 0, mapp_on_compact);
}

/* The replica the entry stands for, when the entry still does (the replica is routed, of a
 * process still alive, and this is its newest entry): its index in *rp's, else -1. */
static int mapp_cold_find(fx_mappend_t *a, const mapp_cold_t *e, mkv_route_t **rp, fx_mkv_inv_t *inv)
{
    if (e->node->generation != e->gen) return -1;
    mkv_route_t *r = mkv_route_get_h(a->s, (fx_str_t){e->key, e->klen}, e->kh, inv);
    for (uint32_t j = 0; r && j < r->n_rep; j++)
        if (r->rep[j].seq == e->rep_seq) {
            if (r->rep[j].cold != e->no) return -1;
            *rp = r;
            return (int)j;
        }
    return -1;
}

/* The compaction mapp_cold_push made due: every entry that no longer stands for its replica
 * goes. */
static void mapp_on_compact(fx_reactor_t *rx, fx_timer_t *t)
{
    (void)rx;
    fx_mappend_t *a = FX_CONTAINER_OF(t, fx_mappend_t, compact_timer);
    fx_mkv_inv_t inv = {0};
    mapp_cold_t **pp = &a->cold_head, *last = NULL;
    while (*pp) {
        mapp_cold_t *e = *pp;
        mkv_route_t *r = NULL;
        if (mapp_cold_find(a, e, &r, &inv) >= 0) {
            last = e;
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        a->n_cold--;
        fx_free(e);
    }
    a->cold_tail = last;
    a->cold_after = a->n_cold;
    a->c.target_cold_compactions++;
    mkv_inv_flush(a->s, &inv);
}

/* Drops the oldest replica on a target (if it is still routed). MAPP_POP_EMPTY: the FIFO
 * is empty; MAPP_POP_VOID: the entry named nothing any more (nothing freed); MAPP_POP_FREED:
 * a replica went (its range freed when it had one). */
enum { MAPP_POP_EMPTY = 0, MAPP_POP_VOID, MAPP_POP_FREED };
static int mapp_cold_pop(fx_mappend_t *a, fx_mkv_inv_t *inv)
{
    mapp_cold_t *e = a->cold_head;
    if (!e) return MAPP_POP_EMPTY;
    a->cold_head = e->next;
    if (!a->cold_head) a->cold_tail = NULL;
    a->n_cold--;
    /* pops come in runs (room for a batch): the next entries' route lookups start loading
     * under this one's (its slot was asked for one pop earlier, its entry's node two) */
    mapp_cold_t *e1 = e->next, *e2 = e1 ? e1->next : NULL;
    if (e1) mkv_routes_prefetch_deep(a->s, e1->kh, 1);
    if (e2) {
        mkv_routes_prefetch(a->s, e2->kh);
        if (e2->next) __builtin_prefetch(e2->next);
    }
    mkv_route_t *r = NULL;
    int j = mapp_cold_find(a, e, &r, inv);
    if (j >= 0) {
        a->c.target_cold_dropped++;
        bool gone = false;
        a->c.target_ranges_invalidated +=
            mkv_route_drop_replica_inv(a->s, (fx_str_t){e->key, e->klen}, r, (uint32_t)j, inv, &gone); /* W1 */
        if (gone) a->c.target_cold_routes_deleted++;
    }
    fx_free(e);
    return j >= 0 ? MAPP_POP_FREED : MAPP_POP_VOID;
}

/* ---- APPEND_START ---- */
/* Keys [from, to) of b still OK in st are not busy after all (looked up again: cold drops may
 * have run since mapp_check raised their count). */
static void mapp_let_go(fx_mappend_t *a, const fx_body_append_start_t *b, const uint64_t *st, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (st[i] == MKV_ST(FLUXON_OK))
            mapp_busy(a, b->keys.v[i].p, b->keys.v[i].len, b->put_ms.v[i], b->put_ver.v[i], -1);
}

/* Per-key checks of keys [from, to) (one group); returns the group's status (OK when at
 * least one key needs a copy). */
static int mapp_check(mkv_t *s, master_node_t *n, const fx_body_append_start_t *b, uint64_t *st, uint64_t *seqs,
                      fx_mkv_inv_t *inv, size_t from, size_t to, uint64_t kh[MKV_PREFETCH_BLOCK])
{
    fx_mappend_t *a = s->append;
    int batch = FLUXON_OK;
    uint32_t need = 0;
    for (size_t i = from; i < to; i++) {
        fx_str_t k = b->keys.v[i];
        mkv_routes_prefetch_block(s, b->keys.v, (uint32_t)i, b->keys.n, kh); /* groups come in key order */
        mkv_route_t *r = mkv_route_get_h(s, k, kh[i % MKV_PREFETCH_BLOCK], inv);
        int ks = FLUXON_OK, sj = -1;
        if (!r || r->put_ms != b->put_ms.v[i] || r->put_ver != b->put_ver.v[i] || r->value_len != b->value_len ||
            (sj = mkv_route_find(r, n, b->offsets.v[i])) < 0) {
            ks = FLUXON_ERR_STALE;
        } else if (r->appending) {
            ks = FLUXON_ERR_KEY_BEING_WRITTEN;
        } else {
            for (uint32_t j = 0; j < r->n_rep && ks == FLUXON_OK; j++)
                if (r->rep[j].node != n && mkv_replica_alive(&r->rep[j]) && mapp_is_target(s, r->rep[j].node)) {
                    ks = FLUXON_ERR_KEY_EXISTS; /* already satisfied: it is let go of now */
                    if (r->rep[j].range_bytes) {
                        mapp_cold_push(a, k, &r->rep[j]);
                        a->c.target_refreshed++;
                    }
                }
        }
        st[i] = MKV_ST(ks);
        seqs[i] = sj >= 0 ? r->rep[sj].seq : 0; /* the source replica the push copies (W3) */
        if (ks == FLUXON_OK) {
            r->appending++; /* busy from here, on the route just found (mapp_busy) */
            need++;
        } else if (ks != FLUXON_ERR_KEY_EXISTS && batch == FLUXON_OK) batch = ks;
    }
    if (batch == FLUXON_OK && !need) return FLUXON_ERR_KEY_EXISTS;
    if (batch != FLUXON_OK) { /* the group is copied whole or not at all */
        mapp_let_go(a, b, st, from, to);
        for (size_t i = from; i < to; i++)
            if (st[i] == MKV_ST(FLUXON_OK)) st[i] = MKV_ST(batch);
    }
    if (batch == FLUXON_ERR_STALE) a->c.append_rejected_stale++;
    else if (batch == FLUXON_ERR_KEY_BEING_WRITTEN) a->c.append_rejected_busy++;
    return batch;
}

static mapp_rec_t *mapp_rec_new(mkv_t *s, master_node_t *n, master_node_t *t, const fx_body_append_start_t *b,
                                const uint64_t *st, const uint64_t *seqs, const uint64_t *aoffs, uint32_t m,
                                uint64_t bytes)
{
    fx_mappend_t *a = s->append;
    /* one allocation: the record, its arrays, then its keys */
    size_t kbytes = 0;
    for (uint32_t i = 0; i < b->keys.n; i++)
        if (st[i] == MKV_ST(FLUXON_OK)) kbytes += (size_t)b->keys.v[i].len + 1;
    size_t per_key = 5 * sizeof(uint64_t) + sizeof(char *) + sizeof(uint32_t) + 1;
    mapp_rec_t *r = fx_calloc(1, sizeof *r + (size_t)m * per_key + kbytes);
    if (!r) { /* out of memory: the ranges picked for it go back, the keys are not busy */
        for (uint32_t k = 0; k < m; k++)
            if (fx_offset_alloc_free(t->alloc, aoffs[k]) == FLUXON_OK) t->placed_bytes -= FX_MIN(t->placed_bytes, bytes);
        mapp_let_go(a, b, st, 0, b->keys.n);
        return NULL;
    }
    uint8_t *p = (uint8_t *)(r + 1);
    r->src_offs = (uint64_t *)p, p += m * sizeof(uint64_t);
    r->src_seqs = (uint64_t *)p, p += m * sizeof(uint64_t);
    r->put_ms = (uint64_t *)p, p += m * sizeof(uint64_t);
    r->put_ver = (uint64_t *)p, p += m * sizeof(uint64_t);
    r->offs = (uint64_t *)p, p += m * sizeof(uint64_t);
    r->keys = (char **)p, p += m * sizeof(char *);
    r->klens = (uint32_t *)p, p += m * sizeof(uint32_t);
    r->busy = p, p += m;
    char *kp = (char *)p;
    r->token = ++a->next_token;
    r->src = n;
    r->tgt = t;
    r->src_gen = n->generation;
    r->tgt_gen = t->generation;
    r->value_len = b->value_len;
    r->range_bytes = bytes;
    r->deadline_ms = fx_now_ms() + mapp_ttl(s);
    for (uint32_t i = 0, k = 0; i < b->keys.n && k < m; i++) {
        if (st[i] != MKV_ST(FLUXON_OK)) continue;
        r->offs[k] = aoffs[k]; /* owned by r from here (freed by mapp_rec_end) */
        memcpy(kp, b->keys.v[i].p, b->keys.v[i].len); /* NUL-ended: the block is zeroed */
        r->keys[k] = kp;
        kp += b->keys.v[i].len + 1;
        r->klens[k] = b->keys.v[i].len;
        r->src_offs[k] = b->offsets.v[i];
        r->src_seqs[k] = seqs[i];
        r->put_ms[k] = b->put_ms.v[i];
        r->put_ver[k] = b->put_ver.v[i];
        r->busy[k] = 1; /* its route's count went up in mapp_check */
        r->n = ++k;
    }
    bool ok = fx_hmap_put(a->by_token, &r->token, sizeof r->token, r, NULL) == FLUXON_OK;
    r->prev = a->tail;
    if (a->tail) a->tail->next = r;
    else a->head = r;
    a->tail = r;
    if (!ok) {
        for (uint32_t k = r->n; k < m; k++) /* ranges not yet owned by r */
            if (fx_offset_alloc_free(t->alloc, aoffs[k]) == FLUXON_OK)
                t->placed_bytes -= FX_MIN(t->placed_bytes, bytes);
        mapp_rec_end(a, r);
        return NULL;
    }
    mapp_arm(a);
    return r;
}

/* The TP cohort of key (fx_cohort_len: the grammar of include/fluxon.h): keys differing
 * only in a trailing "_<rank>_<size>" (rank < size) hash alike. */
static uint64_t mapp_cohort_hash(fx_str_t key)
{
    size_t cut = fx_cohort_len(key.p, key.len);
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < cut; i++) h = (h ^ (uint8_t)key.p[i]) * 1099511628211ull;
    return h;
}

/* Picks a target for m ranges of bytes, dropping the targets' oldest replicas for room. */
static master_node_t *mapp_pick(mkv_t *s, master_node_t *n, fx_str_t key0, uint64_t bytes, uint32_t m,
                                uint64_t *aoffs, bool *any, bool *coming_p, fx_mkv_inv_t *inv)
{
    fx_mappend_t *a = s->append;
    uint64_t aff = mapp_cohort_hash(key0);
    master_node_t *t = fx_mplace_pick_target(s->m, aff, n, bytes, m, aoffs, any);
    /* issue 44 P6: a void entry frees nothing, so the targets are asked again only after
     * a pop that freed a range (a pick is O(nodes), a void pop one hash lookup) */
    /* issue 38: a dropped range is reusable only range_reuse_delay_ms later (reuse.c): once
     * a target would fit the batch with what is on its way back, more drops would not make
     * room now; the batch is refused NO_SPACE and a later one finds the room */
    uint64_t need = bytes * m;
    bool coming = !t && fx_mplace_room_coming(s->m, n, bytes, m);
    for (uint32_t k = 0; !t && !coming && *any && k < MAPP_EVICT_MAX; k++) {
        int pr = mapp_cold_pop(a, inv);
        if (pr == MAPP_POP_EMPTY) break;
        if (pr != MAPP_POP_FREED) continue; /* P6: a void pop costs one hash lookup */
        t = fx_mplace_pick_target(s->m, aff, n, bytes, m, aoffs, any);
        coming = !t && fx_mplace_room_coming(s->m, n, bytes, m);
    }
    /* and a reserve: the target keeps what one delay's worth of appends takes free or on its
     * way back (dropped ahead, bounded), so the next batches need not wait for the delay */
    uint64_t reserve = t ? mkv_ranges_reserve(s, t, need) : 0;
    if (reserve) {
        uint64_t have = (t->alloc ? fx_offset_alloc_free_bytes(t->alloc) : 0) + mkv_ranges_waiting_bytes(t);
        /* a grant stays free; only t's own oldest (the FIFO's head on t) are dropped for it */
        for (uint32_t k = 0; have < reserve + t->grant_bytes && k < 4 * m + 64; k++) {
            if (a->cold_head && a->cold_head->node != t) break;
            uint64_t before = mkv_ranges_waiting_bytes(t);
            if (mapp_cold_pop(a, inv) == MAPP_POP_EMPTY) break;
            have += mkv_ranges_waiting_bytes(t) - FX_MIN(before, mkv_ranges_waiting_bytes(t));
        }
    }
    *coming_p = !t && coming;
    return t;
}

FX_INTERNAL void fx_mappend_start(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena)
{
    fx_mappend_t *a = s->append;
    fx_body_append_start_t b;
    MKV_DECODE(s, p, h, body, arena, append_start, &b);
    const mkv_array_t arrays[] = {
        {"offsets", b.offsets.n, false}, {"put_ms", b.put_ms.n, false}, {"put_ver", b.put_ver.n, false}};
    mkv_batch_spec_t spec = {"append_start", b.keys, arrays, FX_ARRAY_LEN(arrays), 1, MAPP_MAX_KEYS, true, 3};
    uint64_t *cols;
    master_node_t *n = mkv_batch_open(s, p, h, &spec, arena, &cols);
    if (!n) return;
    uint32_t nk = b.keys.n;
    char why[160];
    uint64_t bytes = b.value_len > UINT64_MAX - 8192 ? 0 : FX_MAX((b.value_len + 4095) & ~4095ull, 4096ull);
    if (b.value_len == 0 || !bytes || b.value_len > n->segment_bytes) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "append_start from %s: value_len %llu must be 1..the segment "
                 "size (%llu)", n->node_id, (unsigned long long)b.value_len, (unsigned long long)n->segment_bytes);
        return;
    }
    if (!fx_groups_check(b.group_lens.v, b.group_lens.n, nk, why, sizeof why)) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "append_start from %s: %s", n->node_id, why);
        return;
    }
    a->c.append_requests++;
    uint64_t *st = cols, *offs = cols + nk, *aoffs = cols + 2 * (size_t)nk, *seqs = mkv_arena_u64(arena, nk);
    if (!seqs) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "append_start of %u keys: out of memory", nk);
        return;
    }
    memset(offs, 0, nk * sizeof *offs);
    fx_mkv_inv_t inv = {0};
    fx_group_iter_t it = fx_group_iter(b.group_lens.v, b.group_lens.n, nk);
    uint32_t groups_ok = 0;
    uint64_t kh[MKV_PREFETCH_BLOCK]; /* the keys' hashes, a block at a time (mkv_routes_prefetch_block) */
    while (fx_group_next(&it))
        groups_ok += mapp_check(s, n, &b, st, seqs, &inv, it.start, it.start + it.len, kh) == FLUXON_OK;
    int batch = groups_ok ? FLUXON_OK : FLUXON_ERR_KEY_EXISTS;
    uint32_t m = 0;
    for (uint32_t i = 0; i < nk; i++) m += st[i] == MKV_ST(FLUXON_OK);
    for (uint32_t i = 0; i < nk; i++) a->c.append_keys_already += st[i] == MKV_ST(FLUXON_ERR_KEY_EXISTS);
    master_node_t *t = NULL;
    mapp_rec_t *r = NULL;
    bool any = false, coming = false;
    if (batch == FLUXON_OK) {
        t = mapp_pick(s, n, b.keys.v[0], bytes, m, aoffs, &any, &coming, &inv);
        if (!t) {
            /* room on its way back (ranges in their reuse delay, dropped for this batch or
             * before it): BUSY, the sender asks again a little later; else NO_SPACE */
            mapp_let_go(a, &b, st, 0, nk);
            batch = coming ? FLUXON_ERR_BUSY : FLUXON_ERR_NO_SPACE;
            if (coming) a->c.append_rejected_room_coming += groups_ok;
            else if (any) a->c.append_rejected_no_space += groups_ok;
            else a->c.append_rejected_no_target += groups_ok;
            for (uint32_t i = 0; i < nk; i++)
                if (st[i] == MKV_ST(FLUXON_OK)) st[i] = MKV_ST(batch);
        } else if (!(r = mapp_rec_new(s, n, t, &b, st, seqs, aoffs, m, bytes))) {
            mkv_inv_flush(s, &inv);
            mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "append_start of %u keys: out of memory", nk);
            return;
        }
    }
    if (r) {
        a->c.append_started++;
        a->c.append_keys_started += m;
        for (uint32_t i = 0, k = 0; i < nk; i++)
            if (st[i] == MKV_ST(FLUXON_OK)) offs[i] = r->offs[k++];
    }
    if (!t) t = n; /* the answer names no target: statuses say why */
    fx_body_put_place_ack_t ack = {r ? r->token : 0,
                                   fx_str_c(t->node_id),
                                   t->generation,
                                   {(const char *)t->ucx_address, t->ucx_address_len},
                                   {(const char *)t->rkey, t->rkey_len},
                                   t->segment_base,
                                   {st, nk},
                                   {offs, nk},
                                   mapp_ttl(s),
                                   s->m->cfg.range_reuse_delay_ms, /* the appender's record (FORGET) */
                                   (uint8_t)((t != n && fx_mappend_keeps_copy(s, t) ? FX_TARGET_KEEPS : 0u) |
                                             (t->node_role == FX_NODE_REMOTE_CACHE ? FX_TARGET_CPU : 0u))};
    mkv_inv_flush(s, &inv);
    MKV_REPLY(p, h, put_place_ack, &ack);
}

/* ---- APPEND_DONE ---- */
FX_INTERNAL void fx_mappend_done(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena)
{
    fx_mappend_t *a = s->append;
    fx_body_append_done_t b;
    MKV_DECODE(s, p, h, body, arena, append_done, &b);
    master_node_t *n = mkv_need_node(s, p, h);
    if (!n) return;
    mapp_rec_t *r = fx_hmap_get(a->by_token, &b.token, sizeof b.token);
    if (!r || r->src != n || r->src_gen != n->generation) {
        a->c.append_done_unknown++;
        mkv_fail(s, p, h, FLUXON_ERR_STALE, "append_done from %s: token %llu is unknown (expired, or not its own)",
                 n->node_id, (unsigned long long)b.token);
        return;
    }
    uint64_t *st = mkv_arena_u64(arena, r->n);
    if (!st) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "append_done: out of memory");
        return;
    }
    bool tgt_ok = r->tgt->alive && r->tgt->generation == r->tgt_gen;
    fx_mkv_inv_t inv = {0};
    /* what the target now holds, told to it (PLACED) */
    fx_str_t *pk = fx_arena_alloc(arena, (r->n ? r->n : 1) * sizeof *pk);
    uint64_t *pcols = fx_arena_alloc(arena, (r->n ? r->n : 1) * 3 * sizeof *pcols);
    uint32_t np = 0;
    uint64_t kh[MKV_PREFETCH_BLOCK];
    for (uint32_t i = 0; i < r->n; i++) {
        st[i] = MKV_ST(FLUXON_ERR_STALE);
        if (b.pushed != 1) { /* never started, or abandoned (W4) */
            a->c.append_keys_failed_transfer++;
            continue;
        }
        fx_str_t key = {r->keys[i], r->klens[i]};
        if (tgt_ok && i % MKV_PREFETCH_BLOCK == 0) { /* the block's route misses overlap */
            fx_str_t blk[MKV_PREFETCH_BLOCK];
            uint32_t m = FX_MIN(r->n - i, MKV_PREFETCH_BLOCK);
            for (uint32_t j = 0; j < m; j++) blk[j] = (fx_str_t){r->keys[i + j], r->klens[i + j]};
            mkv_routes_prefetch_keys(s, blk, m, kh);
        }
        mkv_route_t *rt = tgt_ok ? mkv_route_get_h(s, key, kh[i % MKV_PREFETCH_BLOCK], &inv) : NULL;
        bool same = rt && rt->put_ms == r->put_ms[i] && rt->put_ver == r->put_ver[i];
        if (tgt_ok && r->busy[i]) { /* the key is let go of here, on the route just found (mapp_busy) */
            if (same && rt->appending) rt->appending--;
            r->busy[i] = 0;
        }
        int sj = same ? mkv_route_find(rt, n, r->src_offs[i]) : -1;
        bool current = sj >= 0 && rt->rep[sj].seq == r->src_seqs[i]; /* W3: the very replica pushed from */
        if (!current || mkv_route_add_replica(s, rt, r->tgt, r->offs[i]) != FLUXON_OK) {
            a->c.append_keys_obsolete++;
            continue;
        }
        rt->rep[rt->n_rep - 1].range_bytes = r->range_bytes; /* freed when the replica goes */
        if (s->m->cfg.range_reuse_delay_ms) /* else the appender keeps no record: nothing to tell */
            rt->rep[rt->n_rep - 1].wb_by = n; /* told when it goes (forget.c) */
        mapp_cold_push(a, key, &rt->rep[rt->n_rep - 1]);
        if (pk && pcols) {
            pk[np] = key;
            pcols[np] = r->offs[i];
            pcols[r->n + np] = r->put_ms[i];
            pcols[2 * (size_t)r->n + np] = r->put_ver[i];
            np++;
        }
        r->offs[i] = 0; /* the route owns the range now */
        st[i] = MKV_ST(FLUXON_OK);
        a->c.append_keys_completed++;
        if (r->tgt->node_role == FX_NODE_REMOTE_CACHE) a->c.target_replicas_remote_cache++;
        else a->c.target_replicas_gpu_owner++;
    }
    /* The target learns the keys it now holds (one-way PLACED), as for a placed put: it
     * re-publishes them to a later master (before, a master restart lost every copy on the
     * CPU owners), and forgets each when the master drops it (INVALIDATE, W1). */
    if (np && r->tgt->peer && r->tgt->peer->conn && fx_conn_is_open(r->tgt->peer->conn)) {
        fx_body_placed_t pb = {{pk, np}, {pcols, np}, r->value_len, {pcols + r->n, np}, {pcols + 2 * (size_t)r->n, np}, 0};
        FX_CONN_SEND(r->tgt->peer->conn, FX_MSG_PLACED, 0, 0, 0, placed, &pb);
        a->c.append_placed_told += np;
    } else if (np && (!pk || !pcols)) {
        FX_WARN("append_done: out of memory telling %s of %u copies (they are not re-published after a restart)",
                r->tgt->node_id, np);
    }
    uint32_t nk = r->n;
    if (b.pushed == FX_APPEND_ABANDONED) mapp_abandon(a, r);
    else mapp_rec_end(a, r);
    fx_body_statuses_t ack = {{st, nk}};
    mkv_inv_flush(s, &inv);
    MKV_REPLY(p, h, statuses, &ack);
}

/* A ranged replica on a replica target that no append made (a placed put's value, or any
 * ranged replica a target re-published after a master restart) joins the FIFO too: nothing
 * else ever drops it (the target evicts nothing of its own), so a target full of them would
 * refuse every later copy (NO_SPACE) for good. */
FX_INTERNAL void fx_mappend_ranged(mkv_t *s, master_node_t *n, fx_str_t key, uint64_t off, uint64_t put_ms,
                                   uint64_t put_ver, fx_mkv_inv_t *inv)
{
    fx_mappend_t *a = s->append;
    if (!a || !mapp_is_target(s, n)) return;
    mkv_route_t *r = mkv_route_get(s, key, inv);
    int j = r && r->put_ms == put_ms && r->put_ver == put_ver ? mkv_route_find(r, n, off) : -1;
    if (j < 0) return; /* not routed after all: nothing to drop later */
    mapp_cold_push(a, key, &r->rep[j]);
    a->c.target_cold_listed++;
}

/* A durable copy of key was made on req from src, a replica target. target_copy_after_fetch
 * "keep" (the default): the target's copy stays, and when the value gets cold on req again
 * its write-back finds it (APPEND_START: KEY_EXISTS, the cold FIFO refreshed, no bytes
 * moved). In the trace replay with one GPU owner and one CPU owner that saves 28 % of the
 * copies (62,803 -> 45,239; already 938 -> 18,281) for 28.26 % prefix hits against 28.39 %,
 * and 4 % of the CPU per request (six interleaved pairs on one CPU). "drop": the copy goes
 * (exclusive levels: the value lives on the GPU owner again, and is written back in full
 * when it gets cold there). */
FX_INTERNAL void fx_mappend_promoted(mkv_t *s, fx_str_t key, mkv_route_t *r, const master_node_t *req,
                                     master_node_t *src, uint64_t src_off, fx_mkv_inv_t *inv)
{
    fx_mappend_t *a = s->append;
    if (!src || src == req || !mapp_is_target(s, src)) return;
    if (s->m->cfg.target_copy_after_fetch == FX_TARGET_COPY_KEEP) return; /* its next write-back: "already" */
    int j = mkv_route_find(r, src, src_off);
    if (j < 0 || !r->rep[j].range_bytes || r->n_rep < 2) return;
    bool gone = false;
    a->c.target_ranges_invalidated += mkv_route_drop_replica_inv(s, key, r, (uint32_t)j, inv, &gone); /* W1 */
    if (!gone) a->c.target_promoted_away++;
}

/* ---- counters ---- */
FX_INTERNAL void fx_mappend_count_hit(mkv_t *s, const master_node_t *req, const master_node_t *src)
{
    fx_mappend_t *a = s->append;
    if (src == req) a->c.hits_local++;
    else if (src->node_role == FX_NODE_REMOTE_CACHE) a->c.hits_cpu_owner++;
    else a->c.hits_remote_gpu++;
}

/* LOOKUP (issue 38): a durable copy from src's replica of a key leaves that replica in place
 * (target_copy_after_fetch "keep", src a replica target): the requester's copy needs no
 * write-back (FX_GET_SRC_KEPT), and its eviction refreshes src's (fx_mappend_count_evict). */
FX_INTERNAL bool fx_mappend_keeps_copy(const mkv_t *s, const master_node_t *src)
{
    return s->append && s->m->cfg.target_copy_after_fetch == FX_TARGET_COPY_KEEP && mapp_is_target(s, src);
}

/* An owner evicted its replica of key (r: the route left, NULL when none). A target's replica
 * that stays is what the key is now (demoted). Its cold FIFO entry moves to the tail, as a
 * write-back finding it does (APPEND_START: already), unless it is among the newest eighth
 * of the FIFO (a copy just made): the owner that fetched it back skipped that write-back
 * (FX_GET_SRC_KEPT). Without this the copy kept its place from before the fetch, and the
 * target dropped it while the value was still in use: 28.2 -> 27.6 % prefix hits in the
 * trace replay with one CPU owner. */
FX_INTERNAL void fx_mappend_count_evict(mkv_t *s, fx_str_t key, mkv_route_t *r)
{
    fx_mappend_t *a = s->append;
    bool kept = false;
    for (uint32_t j = 0; r && j < r->n_rep && !kept; j++) {
        mkv_replica_t *rep = &r->rep[j];
        kept = mkv_replica_alive(rep) && mapp_is_target(s, rep->node);
        if (kept && rep->range_bytes && a->next_seq - rep->cold > a->n_cold / 8) {
            mapp_cold_push(a, key, rep);
            a->c.target_refreshed_at_evict++;
        }
    }
    if (kept) a->c.evict_demoted++;
    else a->c.evict_dropped++;
}

/* TOUCH (one-way, issue 38): the sender read back, for its readers only, copies of keys it
 * wrote back (a first read-back: no replica of its own is recorded, so no eviction of one
 * will refresh the copy, fx_mappend_count_evict). Each alive target replica of the key at
 * that version moves to its cold FIFO's tail, unless among the newest eighth. A key gone or
 * of another version is skipped: its copy went meanwhile (counted target_touch_stale). */
FX_INTERNAL void fx_mappend_touch(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena)
{
    fx_mappend_t *a = s->append;
    fx_body_touch_t b;
    MKV_DECODE(s, p, h, body, arena, touch, &b);
    const mkv_array_t arrays[] = {{"put_ms", b.put_ms.n, false}, {"put_ver", b.put_ver.n, false}};
    mkv_batch_spec_t spec = {"touch", b.keys, arrays, FX_ARRAY_LEN(arrays), 1, UINT32_MAX, false, 1};
    if (!mkv_batch_open(s, p, h, &spec, arena, NULL)) return;
    if (!a) { /* no append module: nothing is a copy */
        if (h->req_id) mkv_send_body(p, h, NULL, 0);
        return;
    }
    fx_mkv_inv_t inv = {0};
    uint64_t kh[MKV_PREFETCH_BLOCK];
    for (uint32_t i = 0; i < b.keys.n; i++) {
        fx_str_t key = b.keys.v[i];
        mkv_routes_prefetch_block(s, b.keys.v, i, b.keys.n, kh); /* the batch's misses overlap */
        mkv_route_t *r = mkv_route_get_h(s, key, kh[i % MKV_PREFETCH_BLOCK], &inv);
        bool found = false; /* an alive target copy in a range, of that version */
        for (uint32_t j = 0; r && r->put_ms == b.put_ms.v[i] && r->put_ver == b.put_ver.v[i] && j < r->n_rep; j++) {
            mkv_replica_t *rep = &r->rep[j];
            if (!mkv_replica_alive(rep) || !mapp_is_target(s, rep->node) || !rep->range_bytes) continue;
            found = true;
            if (a->next_seq - rep->cold > a->n_cold / 8) {
                mapp_cold_push(a, key, rep);
                a->c.target_refreshed_at_read++;
            }
        }
        a->c.target_touch_stale += !found;
    }
    a->c.target_touched += b.keys.n;
    mkv_inv_flush(s, &inv);
    if (h->req_id) mkv_send_body(p, h, NULL, 0); /* one-way as the owner sends it; a request is answered */
}

FX_INTERNAL void fx_mappend_metrics(mkv_t *s, fx_mmetrics_t *mm)
{
    fx_mappend_t *a = s->append;
    if (!a) return;
    uint64_t keys = 0;
    for (mapp_rec_t *r = a->head; r; r = r->next) keys += r->abandoned ? 0 : r->n;
    mm->append_inflight = fx_hmap_count(a->by_token);
    mm->append_inflight_keys = keys;
    mm->target_cold_entries = a->n_cold;
#define MAPP_COPY(name) mm->name = a->c.name;
    MAPP_COUNTERS(MAPP_COPY)
#undef MAPP_COPY
}

/* ---- life ---- */
FX_INTERNAL int fx_mappend_create(mkv_t *s)
{
    fx_mappend_t *a = fx_calloc(1, sizeof *a);
    if (!a) return FLUXON_ERR_NOMEM;
    a->s = s;
    fx_timer_init(&a->timer);
    fx_timer_init(&a->compact_timer);
    a->next_token = s->m->generation << 16;
    int rc = fx_hmap_create(64, &a->by_token);
    if (rc != FLUXON_OK) {
        fx_free(a);
        return rc;
    }
    s->append = a;
    return FLUXON_OK;
}

FX_INTERNAL void fx_mappend_destroy(mkv_t *s)
{
    fx_mappend_t *a = s->append;
    if (!a) return;
    fx_timer_disarm(s->m->r, &a->timer);
    fx_timer_disarm(s->m->r, &a->compact_timer);
    while (a->head) mapp_rec_end(a, a->head);
    while (a->cold_head) {
        mapp_cold_t *e = a->cold_head;
        a->cold_head = e->next;
        fx_free(e);
    }
    fx_hmap_destroy(a->by_token);
    fx_free(a);
    s->append = NULL;
}
