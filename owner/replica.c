/* replica.c — replica tasks and write-backs from this owner (issue 16, owner_replica.h).
 *
 * A task is ONE atomic group / TP cohort of this owner's COMMITTED values, identified by
 * (slot, put_ms, put_ver) per member (looked up again by identity at every step, never kept
 * as pointers across turns). A bounded FIFO (OREPL_QUEUE_MAX) feeds at most
 * OREPL_INFLIGHT_MAX tasks at once:
 *   APPEND_START → per key OK / KEY_EXISTS (a target already holds it) / STALE /
 *     KEY_BEING_WRITTEN (retried at most OREPL_BUSY_RETRIES times, 25 then 50 ms) /
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

#include "hmap.h"
#include "log.h"
#include "owner_link.h"
#include "owner_peers.h"
#include "owner_replica.h"

#define OREPL_QUEUE_MAX 4096u
#define OREPL_INFLIGHT_MAX 32u
#define OREPL_BUSY_RETRIES 3u

typedef struct orepl_task {
    uint64_t id;
    struct orepl_task *next; /* queue */
    fx_owner_t *o;
    bool eager, pushed;
    uint32_t n, attempts;
    uint64_t value_len, token, sent_ms, push_deadline_ms, target_gen, target_base;
    fx_slot_ref_t *slots;
    char **keys;
    uint32_t *klens;
    uint64_t *offs, *put_ms, *put_ver, *tgt_offs;
    char target_id[FX_ID_MAX];
    fx_timer_t retry;
    fx_ucx_range_t *ranges;
    size_t n_ranges;
} orepl_task_t;

#define OREPL_COUNTERS(X)                                                                  \
    X(tasks_eager) X(tasks_writeback) X(completed) X(already) X(obsolete) X(failed_no_space) \
    X(failed_busy) X(failed_stale) X(failed_transfer) X(failed_master) X(failed_queue_full)  \
    X(busy_retries) X(pushed_keys) X(pushed_bytes) X(push_ns)

typedef struct orepl {
    fx_hmap_t *tasks; /* id -> task (queued or in flight) */
    orepl_task_t *qhead, *qtail;
    uint32_t queued, inflight;
    struct {
#define OREPL_FIELD(name) uint64_t name;
        OREPL_COUNTERS(OREPL_FIELD)
#undef OREPL_FIELD
    } c;
} orepl_t;

typedef struct orepl_ctx {
    fx_owner_t *o;
    uint64_t id;
    uint64_t t0_ns;
} orepl_ctx_t;

enum { OR_COMPLETED, OR_ALREADY, OR_OBSOLETE, OR_NO_SPACE, OR_BUSY, OR_STALE, OR_TRANSFER, OR_MASTER };

FX_INTERNAL int fx_orepl_state(const owner_entry_t *en) { return en->repl; }
FX_INTERNAL void fx_orepl_touched(owner_entry_t *en)
{
    if (en->repl == OREPL_COPIED) en->repl = OREPL_NONE; /* hot again: its copy is written back anew */
}
FX_INTERNAL bool fx_orepl_room(fx_owner_t *o) { return o->repl && o->repl->queued < OREPL_QUEUE_MAX; }
FX_INTERNAL bool fx_orepl_idle(fx_owner_t *o) { return !o->repl || (!o->repl->queued && !o->repl->inflight); }

static void orepl_task_free(orepl_task_t *t)
{
    if (!t) return;
    for (uint32_t i = 0; t->keys && i < t->n; i++) fx_free(t->keys[i]);
    fx_free(t->keys);
    fx_free(t->klens);
    fx_free(t->slots);
    fx_free(t->offs);
    fx_free(t->put_ms);
    fx_free(t->put_ver);
    fx_free(t->tgt_offs);
    fx_free(t->ranges);
    fx_free(t);
}

static void orepl_pump(fx_owner_t *o);

/* The task's outcome: counted once, members marked, the task freed. */
static void orepl_finish(fx_owner_t *o, orepl_task_t *t, int outcome)
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
    fx_hmap_del(s->tasks, &t->id, sizeof t->id, NULL);
    s->inflight--;
    orepl_task_free(t);
    orepl_pump(o);
}

static orepl_task_t *orepl_ctx_task(orepl_ctx_t *c)
{
    fx_owner_t *o = c->o;
    orepl_task_t *t = o->repl ? fx_hmap_get(o->repl->tasks, &c->id, sizeof c->id) : NULL;
    return t;
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
    orepl_task_t *t = orepl_ctx_task(c);
    fx_free(c);
    if (!t) return;
    fx_body_statuses_t a;
    memset(&a, 0, sizeof a);
    if (status == FLUXON_OK && fx_body_statuses_decode(body, h->body_len, &a, arena) != FLUXON_OK)
        status = FLUXON_ERR_PROTOCOL;
    if (!t->pushed) { /* the ranges went back: the push failed */
        orepl_finish(o, t, OR_TRANSFER);
        return;
    }
    if (status == FLUXON_ERR_STALE) { /* the master forgot the append (TTL) */
        orepl_finish(o, t, OR_OBSOLETE);
        return;
    }
    if (status != FLUXON_OK || a.statuses.n != t->n_ranges) { /* uncertain: never counted as a copy */
        orepl_finish(o, t, OR_MASTER);
        return;
    }
    bool all = true;
    for (uint32_t k = 0; k < a.statuses.n; k++) all &= (int)(int64_t)a.statuses.v[k] == FLUXON_OK;
    orepl_finish(o, t, all ? OR_COMPLETED : OR_OBSOLETE);
}

static void orepl_send_done(fx_owner_t *o, orepl_task_t *t, bool pushed)
{
    t->pushed = pushed;
    fx_conn_t *mc = fx_olink_conn(o);
    orepl_ctx_t *c = fx_malloc(sizeof *c);
    fx_body_append_done_t b = {t->token, pushed ? 1 : 0};
    if (c) *c = (orepl_ctx_t){o, t->id, 0};
    if (!c || !mc || FX_RPC_CALL(mc, APPEND_DONE, append_done, &b, o->cfg.master_timeout_ms, orepl_on_done, c) !=
                         FLUXON_OK) {
        fx_free(c); /* the master frees the ranges at the TTL */
        orepl_finish(o, t, pushed ? OR_MASTER : OR_TRANSFER);
    }
}

/* ---- the push ---- */
static void orepl_on_pushed(void *arg, int status)
{
    orepl_ctx_t *c = arg;
    fx_owner_t *o = c->o;
    orepl_task_t *t = o->repl ? orepl_ctx_task(c) : NULL;
    uint64_t dt = fx_now_ns() - c->t0_ns;
    fx_free(c);
    if (!t) return;
    if (status == FLUXON_OK) {
        o->repl->c.pushed_keys += t->n_ranges;
        o->repl->c.pushed_bytes += t->n_ranges * t->value_len;
        o->repl->c.push_ns += dt;
    } else {
        FX_WARN("replica push of %zu values to %s failed (%s); the local copies stay", t->n_ranges, t->target_id,
                fluxon_status_string(status));
    }
    orepl_send_done(o, t, status == FLUXON_OK);
}

static void orepl_push(fx_owner_t *o, orepl_task_t *t, const fx_body_put_place_ack_t *a)
{
    uint64_t now = fx_now_ms();
    fx_ucx_peer_t *peer = fx_opeers_get(o, a->target_node_id, a->target_generation, a->target_address,
                                        a->target_rkey, a->target_base);
    t->ranges = fx_calloc(t->n, sizeof *t->ranges);
    orepl_ctx_t *c = fx_malloc(sizeof *c);
    int rc = FLUXON_ERR_NOMEM;
    if (t->ranges && c && now < t->push_deadline_ms && orepl_members_live(o, t)) {
        uint8_t *base = fx_segment_base(o->seg);
        for (uint32_t i = 0; i < t->n; i++)
            if (t->tgt_offs[i]) t->ranges[t->n_ranges++] = (fx_ucx_range_t){base + t->offs[i], t->tgt_offs[i], t->value_len};
        *c = (orepl_ctx_t){o, t->id, fx_now_ns()};
        fx_ucx_set_timeout_ms(fx_opeers_ucx(o),
                              (uint32_t)FX_MIN(t->push_deadline_ms - now, (uint64_t)FX_UCX_DEFAULT_TIMEOUT_MS));
        rc = peer ? fx_ucx_transfer(fx_opeers_ucx(o), peer, FX_UCX_PUT, t->ranges, t->n_ranges, orepl_on_pushed, c)
                  : FLUXON_ERR_UNAVAILABLE;
        fx_ucx_set_timeout_ms(fx_opeers_ucx(o), 0);
    } else if (t->ranges && c) {
        rc = FLUXON_ERR_STALE;
    }
    if (rc == FLUXON_OK) return;
    fx_free(c);
    FX_DEBUG("replica task %llu: cannot push (%s)", (unsigned long long)t->id, fluxon_status_string(rc));
    orepl_send_done(o, t, false);
}

/* ---- APPEND_START ---- */
static void orepl_start(fx_owner_t *o, orepl_task_t *t);

static void orepl_on_retry(fx_reactor_t *r, fx_timer_t *tm)
{
    (void)r;
    orepl_task_t *t = FX_CONTAINER_OF(tm, orepl_task_t, retry);
    orepl_start(t->o, t);
}

static void orepl_on_start(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                           fx_arena_t *arena)
{
    orepl_ctx_t *c = arg;
    fx_owner_t *o = c->o;
    orepl_task_t *t = orepl_ctx_task(c);
    fx_free(c);
    if (!t) return;
    fx_body_put_place_ack_t a;
    memset(&a, 0, sizeof a);
    if (status == FLUXON_OK && fx_body_put_place_ack_decode(body, h->body_len, &a, arena) != FLUXON_OK)
        status = FLUXON_ERR_PROTOCOL;
    if (status == FLUXON_OK && (a.statuses.n != t->n || a.offsets.n != t->n)) status = FLUXON_ERR_PROTOCOL;
    if (status != FLUXON_OK) { /* an append the master may have recorded expires by its TTL */
        orepl_finish(o, t, OR_MASTER);
        return;
    }
    int worst = FLUXON_OK;
    uint32_t ok = 0, exists = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        int ks = (int)(int64_t)a.statuses.v[i];
        t->tgt_offs[i] = ks == FLUXON_OK ? a.offsets.v[i] : 0;
        ok += ks == FLUXON_OK;
        exists += ks == FLUXON_ERR_KEY_EXISTS;
        if (ks != FLUXON_OK && ks != FLUXON_ERR_KEY_EXISTS && worst == FLUXON_OK) worst = ks;
    }
    if (worst == FLUXON_ERR_KEY_BEING_WRITTEN && t->attempts < OREPL_BUSY_RETRIES) {
        o->repl->c.busy_retries++;
        fx_timer_arm(o->r, &t->retry, t->attempts++ ? 50u : 25u, orepl_on_retry);
        return;
    }
    if (worst != FLUXON_OK) {
        orepl_finish(o, t, worst == FLUXON_ERR_KEY_BEING_WRITTEN ? OR_BUSY
                           : worst == FLUXON_ERR_NO_SPACE       ? OR_NO_SPACE
                                                                : OR_STALE);
        return;
    }
    if (!ok) {
        orepl_finish(o, t, exists == t->n ? OR_ALREADY : OR_STALE);
        return;
    }
    t->token = a.put_token;
    t->push_deadline_ms = t->sent_ms + (uint64_t)a.ttl_ms * 3 / 4;
    t->target_gen = a.target_generation;
    fx_str_copy(a.target_node_id, t->target_id, sizeof t->target_id);
    orepl_push(o, t, &a);
}

static void orepl_start(fx_owner_t *o, orepl_task_t *t)
{
    fx_conn_t *mc = fx_olink_conn(o);
    if (!orepl_members_live(o, t)) {
        orepl_finish(o, t, OR_STALE);
        return;
    }
    fx_str_t *keys = fx_calloc(t->n, sizeof *keys);
    orepl_ctx_t *c = fx_malloc(sizeof *c);
    uint64_t glen = t->n;
    int rc = FLUXON_ERR_UNAVAILABLE;
    if (keys && c && mc) {
        for (uint32_t i = 0; i < t->n; i++) keys[i] = (fx_str_t){t->keys[i], t->klens[i]};
        fx_body_append_start_t b = {t->value_len,        {keys, t->n},       {t->offs, t->n},
                                    {t->put_ms, t->n},   {t->put_ver, t->n}, {&glen, 1}};
        *c = (orepl_ctx_t){o, t->id, 0};
        t->sent_ms = fx_now_ms();
        rc = FX_RPC_CALL(mc, APPEND_START, append_start, &b, o->cfg.master_timeout_ms, orepl_on_start, c);
    }
    fx_free(keys);
    if (rc == FLUXON_OK) return;
    fx_free(c);
    orepl_finish(o, t, OR_MASTER);
}

static void orepl_pump(fx_owner_t *o)
{
    orepl_t *s = o->repl;
    while (s->qhead && s->inflight < OREPL_INFLIGHT_MAX) {
        orepl_task_t *t = s->qhead;
        s->qhead = t->next;
        if (!s->qhead) s->qtail = NULL;
        s->queued--;
        s->inflight++;
        orepl_start(o, t);
    }
}

FX_INTERNAL bool fx_orepl_enqueue(fx_owner_t *o, owner_entry_t *const *members, size_t n, bool eager)
{
    orepl_t *s = o->repl;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += members[i] && members[i]->state == OE_COMMITTED && members[i]->repl == OREPL_NONE;
    if (!s || !m || m > UINT32_MAX) return false;
    if (eager) s->c.tasks_eager++;
    else s->c.tasks_writeback++;
    if (s->queued >= OREPL_QUEUE_MAX) {
        s->c.failed_queue_full++;
        return false;
    }
    orepl_task_t *t = fx_calloc(1, sizeof *t);
    if (t) {
        t->keys = fx_calloc(m, sizeof *t->keys);
        t->klens = fx_calloc(m, sizeof *t->klens);
        t->slots = fx_calloc(m, sizeof *t->slots);
        t->offs = fx_calloc(m, sizeof *t->offs);
        t->put_ms = fx_calloc(m, sizeof *t->put_ms);
        t->put_ver = fx_calloc(m, sizeof *t->put_ver);
        t->tgt_offs = fx_calloc(m, sizeof *t->tgt_offs);
    }
    bool ok = t && t->keys && t->klens && t->slots && t->offs && t->put_ms && t->put_ver && t->tgt_offs;
    for (size_t i = 0; ok && i < n; i++) {
        owner_entry_t *en = members[i];
        if (!en || en->state != OE_COMMITTED || en->repl != OREPL_NONE) continue;
        if (!(t->keys[t->n] = fx_strndup(en->key, en->klen))) ok = false;
        t->klens[t->n] = en->klen;
        t->slots[t->n] = en->slot;
        t->offs[t->n] = en->slot.offset;
        t->put_ms[t->n] = en->put_ms;
        t->put_ver[t->n] = en->put_ver;
        t->value_len = en->value_len;
        t->n++;
    }
    if (ok) {
        t->o = o;
        t->eager = eager;
        t->id = fx_ostore_next_id(o);
        fx_timer_init(&t->retry);
        ok = fx_hmap_put(s->tasks, &t->id, sizeof t->id, t, NULL) == FLUXON_OK;
    }
    if (!ok) {
        orepl_task_free(t);
        s->c.failed_queue_full++; /* out of memory: counted with the queue bound */
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (members[i] && members[i]->state == OE_COMMITTED && members[i]->repl == OREPL_NONE)
            members[i]->repl = OREPL_INFLIGHT;
    if (s->qtail) s->qtail->next = t;
    else s->qhead = t;
    s->qtail = t;
    s->queued++;
    orepl_pump(o);
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

FX_INTERNAL int fx_orepl_init(fx_owner_t *o)
{
    orepl_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    if (fx_hmap_create(64, &s->tasks) != FLUXON_OK) {
        fx_free(s);
        return FLUXON_ERR_NOMEM;
    }
    o->repl = s;
    return FLUXON_OK;
}

FX_INTERNAL void fx_orepl_fini(fx_owner_t *o)
{
    orepl_t *s = o->repl;
    if (!s) return;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    void *v;
    while (fx_hmap_iter_next(s->tasks, &it, NULL, NULL, &v)) {
        orepl_task_t *t = v;
        fx_timer_disarm(o->r, &t->retry);
        orepl_task_free(t);
    }
    fx_hmap_destroy(s->tasks);
    fx_free(s);
    o->repl = NULL;
}
