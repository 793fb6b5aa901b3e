/* replica.c — replica tasks and write-backs from this owner (issue 16, owner_replica.h).
 *
 * A task is ONE atomic group / TP cohort of this owner's COMMITTED values, identified by
 * (slot, put_ms, put_ver) per member (looked up again by identity at every step, never kept
 * as pointers across turns). A bounded FIFO (OREPL_QUEUE_MAX) feeds at most
 * OREPL_INFLIGHT_MAX tasks at once:
 *   APPEND_START → per key OK / KEY_EXISTS (a target already holds it) / STALE /
 *     KEY_BEING_WRITTEN or BUSY (the target's room is still in the master's reuse delay;
 *     both retried at most OREPL_BUSY_RETRIES times, 25 then 50 ms) /
 *     NO_SPACE (no target has room: replica targets are strict);
 *   → ONE UCX PUT batch from the slots into the target's ranges, bounded by 3/4 of the
 *     master's in-flight TTL;
 *   → APPEND_DONE {token, pushed}: the master keeps a replica only for keys still at that
 *     version with this owner's source replica still routed (the slot was intact: D1).
 * Outcomes (exactly one per task): completed (every key a replica), already, obsolete
 * (some key's version changed meanwhile), failed by cause. Only "completed" and "already"
 * mark the members OREPL_COPIED: a failed, stale or partial copy never counts. The local
 * primary never changes here. Reactor thread only. */
#include <stdio.h>
#include <string.h>

#include "hmap.h"
#include "log.h"
#include "owner_elsewhere.h"
#include "owner_link.h"
#include "owner_peers.h"
#include "owner_replica.h"
#include "owner_wbmap.h"

#define OREPL_QUEUE_MAX 4096u
#define OREPL_BATCHES_MAX 2u      /* APPEND_START batches in flight: while they are, the queue
                                   * fills and the next batch carries many groups (issue 38) */
#define OREPL_BATCH_GROUPS 128u   /* tasks (groups) per batch (G8) */
#define OREPL_BATCH_KEYS 2048u    /* keys per batch (the master takes up to 4096) */
#define OREPL_BATCH_MIN 64u       /* groups queued before a batch goes ... */
#define OREPL_BATCH_WAIT_MS 2u    /* ... or the oldest waited this long (issue 38) */
#define OREPL_BUSY_RETRIES 3u
/* A push to a mapped peer (memcpy on this thread) copies at most this much per reactor turn,
 * the rings polled between slices: a batch of 70 values of 4 KiB copied at once held the
 * loop ~130 us, and the engine's requests that came meanwhile waited for it */
#define OREPL_PUSH_SLICE_BYTES (32u << 10)

typedef struct orepl_task {
    uint64_t id, queued_ms;
    struct orepl_task *next; /* queue */
    struct orepl_task *all_prev, *all_next; /* every live task (freed at fini) */
    fx_owner_t *o;
    bool eager;
    uint32_t n, attempts;
    uint64_t value_len;
    fx_slot_ref_t *slots;
    char **keys;
    uint32_t *klens;
    uint64_t *offs, *put_ms, *put_ver, *tgt_offs; /* tgt_offs[i] 0: key i is not copied */
    fx_timer_t retry;
} orepl_task_t;

/* One APPEND_START / push / APPEND_DONE round for up to OREPL_BATCH_GROUPS tasks of one
 * value length: ONE target, ONE UCX batch, ONE APPEND_DONE. */
typedef struct orepl_batch {
    uint64_t id;
    fx_owner_t *o;
    orepl_task_t **t; /* NULL once a task left the batch (finished, or waiting to retry) */
    uint32_t nt, n;
    uint64_t value_len, token, sent_ms, push_deadline_ms;
    bool pushed;
    int wb_tgt; /* wbmap.c's index of the target (-1: no record kept) */
    char target_id[FX_ID_MAX];
    uint64_t target_gen;
    fx_ucx_range_t *ranges;
    size_t n_ranges;
    size_t push_next;     /* the first range not posted yet */
    uint32_t push_left;   /* slices posted, not yet reported */
    int push_status;      /* the first slice's failure */
    uint64_t push_t0_ns;  /* the first slice posted (0: none yet) */
    uint64_t push_ns;     /* the slices' times, posted to reported (not the turns between) */
    fx_timer_t slice_timer; /* the next slice, on the loop's next turn */
} orepl_batch_t;

#define OREPL_COUNTERS(X)                                                                  \
    X(tasks_eager) X(tasks_writeback) X(completed) X(already) X(obsolete) X(failed_no_space) \
    X(failed_busy) X(failed_stale) X(failed_transfer) X(failed_master) X(failed_queue_full)  \
    X(busy_retries) X(batches) X(push_slices) X(pushed_keys) X(pushed_bytes) X(push_ns) X(kept_after_fetch) \
    X(kept_recorded)

typedef struct orepl {
    orepl_task_t *all;          /* every task (queued, batched or waiting to retry): a list, not a
                                 * table (no lookup by id: batches name their tasks, timers embed them) */
    fx_hmap_t *batches;         /* id -> batch */
    fx_timer_t pump_timer;      /* the queue is pumped once per reactor turn: a round's tasks share batches */
    orepl_task_t *qhead, *qtail;
    uint32_t queued, inflight;  /* tasks in the queue; tasks batched or waiting to retry */
    bool pumping;               /* in orepl_pump: a batch that ends inside it (no master) does not re-enter */
    uint64_t last_end_ms;       /* when a task last ended (or the queue last had room) */
    fx_owner_t *o;
    struct {
#define OREPL_FIELD(name) uint64_t name;
        OREPL_COUNTERS(OREPL_FIELD)
#undef OREPL_FIELD
    } c;
} orepl_t;

typedef struct orepl_ctx {
    fx_owner_t *o;
    uint64_t id;    /* a batch */
    uint64_t t0_ns; /* a slice: when it was posted */
} orepl_ctx_t;

enum { OR_COMPLETED, OR_ALREADY, OR_OBSOLETE, OR_NO_SPACE, OR_BUSY, OR_STALE, OR_TRANSFER, OR_MASTER };

FX_INTERNAL int fx_orepl_state(const owner_entry_t *en) { return en->repl; }
FX_INTERNAL void fx_orepl_touched(owner_entry_t *en)
{
    /* hot again: its copy is written back anew (the target may drop it meanwhile); a failed
     * one is tried again when it comes back to the write-back window (L4: a master blip no
     * longer fails it for life). A complete copy is looked for in the record first. */
    if (en->repl == OREPL_COPIED) en->wb_recheck = true;
    if (en->repl == OREPL_COPIED || en->repl == OREPL_FAILED) en->repl = OREPL_NONE;
}

/* en's copy, complete before a hit made en hot again, is still where this owner put it: the
 * record of its write-backs (wbmap.c) names this version on a target connected at the
 * recorded generation. The master tells this owner of every copy of its it drops (FORGET)
 * before any later frame, so a record is at most one FORGET late: a value evicted on a stale
 * one is dropped (a later miss), never read wrong. Before, each such value cost a write-back
 * task and an APPEND_START answered "already" (5,900 of 50,200 tasks in the trace replay with
 * a CPU owner); when en is evicted, the master moves the copy to its target's young end as
 * the "already" did (target_refreshed_at_evict). */
static bool orepl_still_copied(fx_owner_t *o, owner_entry_t *en)
{
    if (!en->wb_recheck) return false;
    en->wb_recheck = false; /* looked at once: a miss means the copy is gone or never recorded */
    fx_owbm_hit_t h;
    return fx_owbm_find(o, en->key, en->klen, en->khash, &h) && h.put_ms == en->put_ms && h.put_ver == en->put_ver &&
           h.value_len == en->value_len && fx_opeers_live(o, h.node_id, h.generation);
}
/* A durable copy fetched from a replica target that keeps its own (FX_GET_SRC_KEPT): the
 * target holds this version, so en needs no write-back until a hit makes it hot again
 * (fx_orepl_touched: written back anew unless this owner's record still names the copy,
 * orepl_still_copied; "already" if the target still has it). Before, each
 * such value cost a write-back task and an APPEND_START key answered "already": 17,900 of
 * 63,400 tasks in the trace replay with one CPU owner. */
FX_INTERNAL void fx_orepl_kept(fx_owner_t *o, owner_entry_t *en)
{
    if (!o->repl || en->repl != OREPL_NONE) return;
    en->repl = OREPL_COPIED;
    o->repl->c.kept_after_fetch++;
}
FX_INTERNAL bool fx_orepl_room(fx_owner_t *o) { return o->repl && o->repl->queued < OREPL_QUEUE_MAX; }

FX_INTERNAL bool fx_orepl_stuck(fx_owner_t *o, uint64_t ms)
{
    orepl_t *s = o->repl;
    if (!s || s->queued < OREPL_QUEUE_MAX) {
        if (s) s->last_end_ms = fx_now_ms();
        return false;
    }
    return fx_now_ms() - s->last_end_ms >= ms;
}
FX_INTERNAL bool fx_orepl_idle(fx_owner_t *o) { return !o->repl || (!o->repl->queued && !o->repl->inflight); }

static void orepl_task_free(orepl_task_t *t) { fx_free(t); /* its arrays and keys are in the same block */ }

static void orepl_pump(fx_owner_t *o);

static void orepl_link(orepl_t *s, orepl_task_t *t)
{
    t->all_prev = NULL;
    t->all_next = s->all;
    if (s->all) s->all->all_prev = t;
    s->all = t;
}

static void orepl_unlink(orepl_t *s, orepl_task_t *t)
{
    if (t->all_prev) t->all_prev->all_next = t->all_next;
    else s->all = t->all_next;
    if (t->all_next) t->all_next->all_prev = t->all_prev;
    t->all_prev = t->all_next = NULL;
}

/* A task's outcome: counted once, members marked, the task freed (never pumps: callers do;
 * nor reads the clock or kicks eviction: orepl_finish does, orepl_batch_end once a batch). */
static void orepl_finish_one(fx_owner_t *o, orepl_task_t *t, int outcome)
{
    orepl_t *s = o->repl;
    switch (outcome) {
    case OR_COMPLETED: s->c.completed++; break;
    case OR_ALREADY: s->c.already++; break;
    case OR_OBSOLETE: s->c.obsolete++; break;
    case OR_NO_SPACE: s->c.failed_no_space++; break;
    case OR_BUSY: s->c.failed_busy++; break;
    case OR_STALE: s->c.failed_stale++; break;
    case OR_TRANSFER: s->c.failed_transfer++; break;
    default: s->c.failed_master++; break;
    }
    bool copied = outcome == OR_COMPLETED || outcome == OR_ALREADY;
    for (uint32_t i = 0; i < t->n; i++) {
        owner_entry_t *en = fx_ostore_find(o, &t->slots[i]);
        if (en && en->put_ms == t->put_ms[i] && en->put_ver == t->put_ver[i])
            en->repl = copied ? OREPL_COPIED : t->eager || outcome == OR_OBSOLETE ? OREPL_NONE : OREPL_FAILED;
    }
    fx_timer_disarm(o->r, &t->retry);
    orepl_unlink(s, t);
    s->inflight--;
    orepl_task_free(t);
}

static void orepl_finish(fx_owner_t *o, orepl_task_t *t, int outcome)
{
    o->repl->last_end_ms = fx_now_ms();
    orepl_finish_one(o, t, outcome);
    fx_ostore_kick(o); /* a claim that may stall for this copy (writeback_max_stall_ms) looks again */
}

static void orepl_batch_free(fx_owner_t *o, orepl_batch_t *b)
{
    fx_timer_disarm(o->r, &b->slice_timer);
    fx_hmap_del(o->repl->batches, &b->id, sizeof b->id, NULL);
    fx_free(b->t);
    fx_free(b->ranges);
    fx_free(b);
}

/* Ends a batch: every task still in it gets outcome (OR_COMPLETED: per task, from st). */
static void orepl_batch_end(fx_owner_t *o, orepl_batch_t *b, int outcome, const fx_u64v_t *st)
{
    size_t k = 0;
    for (uint32_t j = 0; j < b->nt; j++) /* the records' and the members' misses overlap */
        for (uint32_t i = 0; b->t[j] && i < b->t[j]->n; i++) {
            fx_ostore_prefetch_offset(o, b->t[j]->slots[i].offset); /* orepl_finish finds each member */
            if (st && b->wb_tgt >= 0 && b->t[j]->tgt_offs[i])
                fx_owbm_prefetch(o, b->wb_tgt, b->t[j]->keys[i], b->t[j]->klens[i], b->t[j]->tgt_offs[i]);
        }
    for (uint32_t j = 0; j < b->nt; j++) {
        orepl_task_t *t = b->t[j];
        if (!t) continue;
        int out = outcome;
        if (st) {
            bool all = true;
            for (uint32_t i = 0; i < t->n; i++) {
                if (!t->tgt_offs[i]) continue;
                bool ok = k < st->n && (int)(int64_t)st->v[k++] == FLUXON_OK;
                all &= ok;
                if (ok) /* the master routes the copy: read back without a LOOKUP (wbmap.c) */
                    fx_owbm_add(o, b->wb_tgt, t->keys[i], t->klens[i], t->tgt_offs[i], t->value_len, t->put_ms[i],
                                t->put_ver[i]);
            }
            out = all ? OR_COMPLETED : OR_OBSOLETE;
        }
        orepl_finish_one(o, t, out);
    }
    o->repl->last_end_ms = fx_now_ms();
    fx_ostore_kick(o); /* a claim that may stall for one of these copies looks again */
    orepl_batch_free(o, b);
    orepl_pump(o);
}

static orepl_batch_t *orepl_ctx_batch(orepl_ctx_t *c)
{
    fx_owner_t *o = c->o;
    return o->repl ? fx_hmap_get(o->repl->batches, &c->id, sizeof c->id) : NULL;
}

/* Every member still holds the version the task names (COMMITTED, same slot use). */
static bool orepl_members_live(fx_owner_t *o, orepl_task_t *t)
{
    for (uint32_t i = 0; i < t->n; i++) {
        owner_entry_t *en = fx_ostore_find(o, &t->slots[i]);
        if (!en || en->state != OE_COMMITTED || en->put_ms != t->put_ms[i] || en->put_ver != t->put_ver[i])
            return false;
    }
    return true;
}

/* ---- APPEND_DONE ---- */
static void orepl_on_done(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    orepl_ctx_t *c = arg;
    fx_owner_t *o = c->o;
    orepl_batch_t *b = orepl_ctx_batch(c);
    fx_free(c);
    if (!b) return;
    fx_body_statuses_t a;
    status = fx_olink_statuses(status, h, body, arena, b->n_ranges, "APPEND_DONE", &a);
    /* an answer dispatched after frames the master sent later (test chaos or fault: a
     * FORGET of these very copies may have come first): no record of them (wbmap.c) */
    if (fx_conn_dispatching_late(fx_olink_conn(o))) b->wb_tgt = -1;
    if (!b->pushed) orepl_batch_end(o, b, OR_TRANSFER, NULL); /* the ranges went back: the push failed */
    else if (status == FLUXON_ERR_STALE) orepl_batch_end(o, b, OR_OBSOLETE, NULL); /* forgotten (TTL) */
    else if (status != FLUXON_OK)
        orepl_batch_end(o, b, OR_MASTER, NULL); /* uncertain: never counted as a copy */
    else orepl_batch_end(o, b, OR_COMPLETED, &a.statuses);
}

/* pushed: 1 done, 0 never started, FX_APPEND_ABANDONED started and failed (W4: the master
 * keeps the ranges until the TTL: UCX may still deliver the bytes) */
static void orepl_send_done(fx_owner_t *o, orepl_batch_t *b, uint8_t pushed)
{
    b->pushed = pushed == 1;
    fx_conn_t *mc = fx_olink_conn(o);
    orepl_ctx_t *c = fx_malloc(sizeof *c);
    fx_body_append_done_t d = {b->token, pushed};
    if (c) *c = (orepl_ctx_t){o, b->id, 0};
    if (!c || !mc || FX_RPC_CALL(mc, APPEND_DONE, append_done, &d, o->cfg.master_timeout_ms, orepl_on_done, c) !=
                         FLUXON_OK) {
        fx_free(c); /* the master frees the ranges at the TTL */
        orepl_batch_end(o, b, b->pushed ? OR_MASTER : OR_TRANSFER, NULL);
    }
}

/* ---- the push ---- */
static void orepl_push_slice(fx_owner_t *o, orepl_batch_t *b, fx_ucx_peer_t *peer, bool mapped);

/* Every slice posted has been reported, or posting stopped: APPEND_DONE. */
static void orepl_push_end(fx_owner_t *o, orepl_batch_t *b)
{
    if (b->push_status == FLUXON_OK) {
        o->repl->c.pushed_keys += b->n_ranges;
        o->repl->c.pushed_bytes += b->n_ranges * b->value_len;
        o->repl->c.push_ns += b->push_ns;
        orepl_send_done(o, b, 1);
        return;
    }
    if (b->push_t0_ns)
        FX_WARN("replica push of %zu values to %s failed (%s); the local copies stay", b->n_ranges, b->target_id,
                fluxon_status_string(b->push_status));
    else
        FX_DEBUG("replica batch %llu: cannot push (%s)", (unsigned long long)b->id, fluxon_status_string(b->push_status));
    orepl_send_done(o, b, b->push_t0_ns ? FX_APPEND_ABANDONED : 0); /* a slice posted may have landed */
}

/* A slice's posting failed (rc) or cannot go on: no more slices; the batch ends once those
 * posted are reported. */
static void orepl_push_stop(fx_owner_t *o, orepl_batch_t *b, int rc)
{
    if (b->push_status == FLUXON_OK) b->push_status = rc;
    b->push_next = b->n_ranges;
    fx_timer_disarm(o->r, &b->slice_timer);
    if (!b->push_left) orepl_push_end(o, b);
}

static void orepl_on_pushed(void *arg, int status)
{
    orepl_ctx_t *c = arg;
    fx_owner_t *o = c->o;
    orepl_batch_t *b = orepl_ctx_batch(c);
    uint64_t t0 = c->t0_ns;
    fx_free(c);
    if (!b) return;
    b->push_ns += fx_now_ns() - t0;
    if (status == FLUXON_OK && o->cfg.fail_transfers) { /* test-only: this push fails */
        o->cfg.fail_transfers--;
        status = FLUXON_ERR_INTERNAL;
    }
    b->push_left--;
    if (status != FLUXON_OK) orepl_push_stop(o, b, status);
    else if (!b->push_left && b->push_next == b->n_ranges) orepl_push_end(o, b);
}

static void orepl_on_slice(fx_reactor_t *r, fx_timer_t *tm)
{
    (void)r;
    orepl_batch_t *b = FX_CONTAINER_OF(tm, orepl_batch_t, slice_timer);
    fx_owner_t *o = b->o;
    bool mapped = false;
    fx_ucx_peer_t *peer = fx_opeers_find(o, b->target_id, b->target_gen, &mapped);
    if (!peer) orepl_push_stop(o, b, FLUXON_ERR_UNAVAILABLE); /* failed or restarted since */
    else orepl_push_slice(o, b, peer, mapped);
}

/* Posts the next slice of b's ranges: all that is left over UCX (it copies in the
 * background), OREPL_PUSH_SLICE_BYTES to a mapped peer, the rest on the loop's next turn. */
static void orepl_push_slice(fx_owner_t *o, orepl_batch_t *b, fx_ucx_peer_t *peer, bool mapped)
{
    uint64_t now = fx_now_ms();
    if (now >= b->push_deadline_ms) {
        orepl_push_stop(o, b, FLUXON_ERR_TIMEOUT);
        return;
    }
    size_t i = b->push_next, k = 1;
    uint64_t bytes = b->ranges[i].len;
    if (!mapped) k = b->n_ranges - i;
    else
        while (i + k < b->n_ranges && bytes + b->ranges[i + k].len <= OREPL_PUSH_SLICE_BYTES) bytes += b->ranges[i + k++].len;
    orepl_ctx_t *c = fx_malloc(sizeof *c);
    if (!c) {
        orepl_push_stop(o, b, FLUXON_ERR_NOMEM);
        return;
    }
    uint64_t t0 = fx_now_ns();
    *c = (orepl_ctx_t){o, b->id, t0};
    fx_ucx_set_timeout_ms(fx_opeers_ucx(o), (uint32_t)FX_MIN(b->push_deadline_ms - now, (uint64_t)FX_UCX_DEFAULT_TIMEOUT_MS));
    int rc = fx_opeers_push(o, b->target_id, peer, b->ranges + i, k, orepl_on_pushed, c);
    fx_ucx_set_timeout_ms(fx_opeers_ucx(o), 0);
    if (rc != FLUXON_OK) {
        fx_free(c);
        orepl_push_stop(o, b, rc);
        return;
    }
    if (!b->push_t0_ns) b->push_t0_ns = t0;
    o->repl->c.push_slices++;
    b->push_left++;
    b->push_next = i + k;
    if (b->push_next < b->n_ranges) fx_timer_arm(o->r, &b->slice_timer, 0, orepl_on_slice);
}

static void orepl_push(fx_owner_t *o, orepl_batch_t *b, const fx_body_put_place_ack_t *a)
{
    fx_ucx_peer_t *peer = fx_opeers_get(o, a->target_node_id, a->target_generation, a->target_address,
                                        a->target_rkey, a->target_base);
    bool mapped = false;
    if (peer) (void)fx_opeers_find(o, b->target_id, a->target_generation, &mapped);
    b->target_gen = a->target_generation;
    b->ranges = fx_calloc(b->n, sizeof *b->ranges);
    if (!b->ranges) {
        orepl_send_done(o, b, 0);
        return;
    }
    /* a member retired since is harmless: APPEND_DONE keeps a copy only while its source
     * replica is still routed, i.e. its slot was never reused (D1) */
    uint8_t *base = fx_segment_base(o->seg);
    for (uint32_t j = 0; j < b->nt; j++)
        for (uint32_t i = 0; b->t[j] && i < b->t[j]->n; i++)
            if (b->t[j]->tgt_offs[i])
                b->ranges[b->n_ranges++] = (fx_ucx_range_t){base + b->t[j]->offs[i], b->t[j]->tgt_offs[i], b->value_len};
    if (!peer) orepl_push_stop(o, b, FLUXON_ERR_UNAVAILABLE);
    else orepl_push_slice(o, b, peer, mapped);
}

/* ---- APPEND_START ---- */
static void orepl_on_retry(fx_reactor_t *r, fx_timer_t *tm)
{
    (void)r;
    orepl_task_t *t = FX_CONTAINER_OF(tm, orepl_task_t, retry);
    orepl_t *s = t->o->repl;
    s->inflight--; /* back to the head of the queue */
    s->queued++;
    t->next = s->qhead;
    s->qhead = t;
    if (!s->qtail) s->qtail = t;
    orepl_pump(t->o);
}

/* Task j's part of the answer (statuses from k): true when it stays in the batch. */
static bool orepl_task_answer(fx_owner_t *o, orepl_task_t *t, const fx_body_put_place_ack_t *a, size_t k)
{
    int worst = FLUXON_OK;
    uint32_t ok = 0, exists = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        int ks = (int)(int64_t)a->statuses.v[k + i];
        t->tgt_offs[i] = ks == FLUXON_OK ? a->offsets.v[k + i] : 0;
        ok += ks == FLUXON_OK;
        exists += ks == FLUXON_ERR_KEY_EXISTS;
        if (ks != FLUXON_OK && ks != FLUXON_ERR_KEY_EXISTS && worst == FLUXON_OK) worst = ks;
    }
    /* KEY_BEING_WRITTEN: another copy of the key is on its way; BUSY: the target's room is on
     * its way back (the master's range_reuse_delay_ms): asked again 25, then 50 ms later */
    if ((worst == FLUXON_ERR_KEY_BEING_WRITTEN || worst == FLUXON_ERR_BUSY) && t->attempts < OREPL_BUSY_RETRIES) {
        o->repl->c.busy_retries++;
        fx_timer_arm(o->r, &t->retry, t->attempts++ ? 50u : 25u, orepl_on_retry);
        return false;
    }
    if (worst != FLUXON_OK) {
        orepl_finish(o, t, worst == FLUXON_ERR_KEY_BEING_WRITTEN || worst == FLUXON_ERR_BUSY ? OR_BUSY
                           : worst == FLUXON_ERR_NO_SPACE       ? OR_NO_SPACE
                                                                : OR_STALE);
        return false;
    }
    if (!ok) {
        orepl_finish(o, t, exists == t->n ? OR_ALREADY : OR_STALE);
        return false;
    }
    return true;
}

static void orepl_on_start(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                           fx_arena_t *arena)
{
    orepl_ctx_t *c = arg;
    fx_owner_t *o = c->o;
    orepl_batch_t *b = orepl_ctx_batch(c);
    fx_free(c);
    if (!b) return;
    fx_body_put_place_ack_t a;
    memset(&a, 0, sizeof a);
    if (status == FLUXON_OK && fx_body_put_place_ack_decode(body, h->body_len, &a, arena) != FLUXON_OK)
        status = FLUXON_ERR_PROTOCOL;
    if (status == FLUXON_OK && (a.statuses.n != b->n || a.offsets.n != b->n)) status = FLUXON_ERR_PROTOCOL;
    if (status != FLUXON_OK) { /* an append the master may have recorded expires by its TTL */
        orepl_batch_end(o, b, OR_MASTER, NULL);
        return;
    }
    size_t k = 0, left = 0;
    for (uint32_t j = 0; j < b->nt; j++) {
        orepl_task_t *t = b->t[j];
        uint32_t tn = t->n; /* t may be freed by its answer */
        if (!orepl_task_answer(o, t, &a, k)) b->t[j] = NULL;
        else left++;
        k += tn;
    }
    if (!left) { /* nothing to copy: no append was recorded */
        orepl_batch_end(o, b, OR_MASTER, NULL);
        return;
    }
    b->token = a.put_token;
    b->wb_tgt = fx_conn_dispatching_late(fx_olink_conn(o)) ? -1 : fx_owbm_target(o, &a); /* as in orepl_on_done */
    b->push_deadline_ms = b->sent_ms + (uint64_t)a.ttl_ms * 3 / 4;
    fx_str_copy(a.target_node_id, b->target_id, sizeof b->target_id);
    orepl_push(o, b, &a);
}

/* One APPEND_START for the tasks of b (arrays concatenated in task order). */
static void orepl_send_start(fx_owner_t *o, orepl_batch_t *b)
{
    fx_conn_t *mc = fx_olink_conn(o);
    fx_str_t *keys = fx_calloc(b->n, sizeof *keys);
    uint64_t *cols = fx_calloc((size_t)b->n * 3 + b->nt, sizeof *cols);
    orepl_ctx_t *c = fx_malloc(sizeof *c);
    int rc = FLUXON_ERR_UNAVAILABLE;
    if (keys && cols && c && mc) {
        uint64_t *offs = cols, *pms = cols + b->n, *pver = cols + 2 * (size_t)b->n, *glen = cols + 3 * (size_t)b->n;
        size_t k = 0;
        for (uint32_t j = 0; j < b->nt; j++) {
            orepl_task_t *t = b->t[j];
            glen[j] = t->n;
            for (uint32_t i = 0; i < t->n; i++, k++) {
                keys[k] = (fx_str_t){t->keys[i], t->klens[i]};
                offs[k] = t->offs[i];
                pms[k] = t->put_ms[i];
                pver[k] = t->put_ver[i];
            }
        }
        fx_body_append_start_t body = {b->value_len, {keys, b->n}, {offs, b->n},
                                       {pms, b->n},  {pver, b->n}, {glen, b->nt}};
        *c = (orepl_ctx_t){o, b->id, 0};
        b->sent_ms = fx_now_ms();
        rc = FX_RPC_CALL(mc, APPEND_START, append_start, &body, o->cfg.master_timeout_ms, orepl_on_start, c);
    }
    fx_free(keys);
    fx_free(cols);
    if (rc == FLUXON_OK) {
        o->repl->c.batches++;
        return;
    }
    fx_free(c);
    orepl_batch_end(o, b, OR_MASTER, NULL);
}

/* Forms batches from the queue head (one value length each) while fewer than
 * OREPL_BATCHES_MAX are in flight. */
static void orepl_on_pump(fx_reactor_t *r, fx_timer_t *tm);

/* A batch goes when OREPL_BATCH_MIN groups are queued or when the oldest queued task has
 * waited OREPL_BATCH_WAIT_MS (else the pump timer is armed for then). */
static bool orepl_batch_ready(fx_owner_t *o)
{
    orepl_t *s = o->repl;
    if (!s->qhead) return false;
    if (s->queued >= OREPL_BATCH_MIN) return true;
    uint64_t now = fx_now_ms();
    if (now >= s->qhead->queued_ms + OREPL_BATCH_WAIT_MS) return true;
    if (!fx_timer_armed(&s->pump_timer))
        fx_timer_arm(o->r, &s->pump_timer, (uint32_t)(s->qhead->queued_ms + OREPL_BATCH_WAIT_MS - now), orepl_on_pump);
    return false;
}

static void orepl_pump(fx_owner_t *o)
{
    orepl_t *s = o->repl;
    if (s->pumping) return; /* the loop below goes on: no recursion as deep as the queue (review §7) */
    s->pumping = true;
    while (fx_hmap_count(s->batches) < OREPL_BATCHES_MAX && orepl_batch_ready(o)) {
        orepl_batch_t *b = fx_calloc(1, sizeof *b);
        if (b) b->t = fx_calloc(OREPL_BATCH_GROUPS, sizeof *b->t);
        if (b && b->t) {
            b->id = fx_ostore_next_id(o);
            b->o = o;
            b->wb_tgt = -1;
            fx_timer_init(&b->slice_timer);
        }
        if (!b || !b->t || fx_hmap_put(s->batches, &b->id, sizeof b->id, b, NULL) != FLUXON_OK) {
            if (b) fx_free(b->t);
            fx_free(b);
            break; /* out of memory: the queue waits for the next pump */
        }
        while (s->qhead && b->nt < OREPL_BATCH_GROUPS && b->n + s->qhead->n <= OREPL_BATCH_KEYS &&
               (!b->nt || s->qhead->value_len == b->value_len)) {
            orepl_task_t *t = s->qhead;
            s->qhead = t->next;
            if (!s->qhead) s->qtail = NULL;
            s->queued--;
            s->inflight++;
            t->next = NULL;
            if (!orepl_members_live(o, t)) { /* evicted, replaced or deleted meanwhile */
                orepl_finish(o, t, OR_STALE);
                continue;
            }
            b->value_len = t->value_len;
            b->t[b->nt++] = t;
            b->n += t->n;
        }
        if (!b->nt) { /* every task taken was stale */
            fx_hmap_del(s->batches, &b->id, sizeof b->id, NULL);
            fx_free(b->t);
            fx_free(b);
            continue;
        }
        orepl_send_start(o, b);
    }
    s->pumping = false;
}

static void orepl_on_pump(fx_reactor_t *r, fx_timer_t *tm)
{
    (void)r;
    orepl_pump(FX_CONTAINER_OF(tm, orepl_t, pump_timer)->o);
}

static void orepl_pump_soon(fx_owner_t *o)
{
    orepl_t *s = o->repl;
    if (!fx_timer_armed(&s->pump_timer)) fx_timer_arm(o->r, &s->pump_timer, 0, orepl_on_pump);
}

FX_INTERNAL bool fx_orepl_enqueue(fx_owner_t *o, owner_entry_t *const *members, size_t n, bool eager)
{
    orepl_t *s = o->repl;
    size_t m = 0, kbytes = 0; /* the members copied, and their keys' bytes (NUL-ended) */
    for (size_t i = 0; i < n; i++)
        if (members[i] && members[i]->state == OE_COMMITTED && members[i]->repl == OREPL_NONE) {
            m++;
            kbytes += (size_t)members[i]->klen + 1;
        }
    if (!s || !m || m > UINT32_MAX) return false;
    if (eager) s->c.tasks_eager++;
    else s->c.tasks_writeback++;
    if (s->queued >= OREPL_QUEUE_MAX) {
        s->c.failed_queue_full++;
        return false;
    }
    /* one allocation: the task, its arrays, then its keys (before: 8 + m of them a task, 64,000
     * tasks in the trace replay with a CPU owner) */
    size_t per_key = sizeof(fx_slot_ref_t) + 4 * sizeof(uint64_t) + sizeof(char *) + sizeof(uint32_t);
    orepl_task_t *t = fx_calloc(1, sizeof *t + m * per_key + kbytes);
    bool ok = t != NULL;
    if (ok) {
        uint8_t *p = (uint8_t *)(t + 1);
        t->slots = (fx_slot_ref_t *)p, p += m * sizeof *t->slots;
        t->offs = (uint64_t *)p, p += m * sizeof(uint64_t);
        t->put_ms = (uint64_t *)p, p += m * sizeof(uint64_t);
        t->put_ver = (uint64_t *)p, p += m * sizeof(uint64_t);
        t->tgt_offs = (uint64_t *)p, p += m * sizeof(uint64_t);
        t->keys = (char **)p, p += m * sizeof(char *);
        t->klens = (uint32_t *)p, p += m * sizeof(uint32_t);
        char *kp = (char *)p;
        for (size_t i = 0; i < n; i++) {
            owner_entry_t *en = members[i];
            if (!en || en->state != OE_COMMITTED || en->repl != OREPL_NONE) continue;
            memcpy(kp, en->key, en->klen); /* NUL-ended: the block is zeroed */
            t->keys[t->n] = kp;
            kp += en->klen + 1;
            t->klens[t->n] = en->klen;
            t->slots[t->n] = en->slot;
            t->offs[t->n] = en->slot.offset;
            t->put_ms[t->n] = en->put_ms;
            t->put_ver[t->n] = en->put_ver;
            t->value_len = en->value_len;
            t->n++;
        }
    }
    if (ok) {
        t->o = o;
        t->eager = eager;
        t->id = fx_ostore_next_id(o);
        fx_timer_init(&t->retry);
        orepl_link(s, t);
    }
    if (!ok) {
        orepl_task_free(t);
        s->c.failed_queue_full++; /* out of memory: counted with the queue bound */
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (members[i] && members[i]->state == OE_COMMITTED && members[i]->repl == OREPL_NONE) {
            members[i]->repl = OREPL_INFLIGHT;
            fx_oelse_copied(o, members[i]->khash); /* before its APPEND_START: a miss of it asks the master */
        }
    t->queued_ms = fx_now_ms();
    if (s->qtail) s->qtail->next = t;
    else s->qhead = t;
    s->qtail = t;
    s->queued++;
    orepl_pump_soon(o);
    return true;
}

FX_INTERNAL void fx_orepl_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    orepl_t *s = o->repl;
    if (!s) return;
    m->repl_queued = s->queued;
    m->repl_inflight = s->inflight;
#define OREPL_COPY(name) m->repl_##name = s->c.name;
    OREPL_COUNTERS(OREPL_COPY)
#undef OREPL_COPY
}

#define OREPL_WB_GROUP_MAX 256u /* a larger group is never written back: dropped whole */

FX_INTERNAL bool fx_orepl_writeback_group(fx_owner_t *o, owner_entry_t *const *m, size_t mn)
{
    owner_entry_t *v[OREPL_WB_GROUP_MAX];
    size_t k = 0;
    bool inflight = false, none = false;
    for (size_t i = 0; i < mn; i++) {
        if (!m[i] || m[i]->retired || m[i]->evicting || m[i]->state != OE_COMMITTED) continue;
        if (m[i]->repl == OREPL_NONE && o->repl && orepl_still_copied(o, m[i])) {
            m[i]->repl = OREPL_COPIED;
            o->repl->c.kept_recorded++;
        }
        inflight |= m[i]->repl == OREPL_INFLIGHT;
        none |= m[i]->repl == OREPL_NONE;
        if (k == OREPL_WB_GROUP_MAX) return false;
        v[k++] = m[i];
    }
    if (inflight) return true;
    return none && fx_orepl_enqueue(o, v, k, false);
}

FX_INTERNAL int fx_orepl_init(fx_owner_t *o)
{
    orepl_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    if (fx_hmap_create(16, &s->batches) != FLUXON_OK) {
        fx_free(s);
        return FLUXON_ERR_NOMEM;
    }
    s->o = o;
    fx_timer_init(&s->pump_timer);
    o->repl = s;
    return FLUXON_OK;
}

FX_INTERNAL void fx_orepl_fini(fx_owner_t *o)
{
    orepl_t *s = o->repl;
    if (!s) return;
    fx_timer_disarm(o->r, &s->pump_timer);
    while (s->all) {
        orepl_task_t *t = s->all;
        orepl_unlink(s, t);
        fx_timer_disarm(o->r, &t->retry);
        orepl_task_free(t);
    }
    void *v;
    while (fx_hmap_iter_next(s->batches, &(fx_hmap_iter_t){0}, NULL, NULL, &v)) orepl_batch_free(o, v);
    fx_hmap_destroy(s->batches);
    fx_free(s);
    o->repl = NULL;
}
