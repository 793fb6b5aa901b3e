/* put.c — the owner's local-first put path, as a small state machine per plan:
 *   put_start: validate -> admit keys (in flight / exists / duplicate) -> CLAIMING (slots;
 *              [PUT_PLACE by place.c]) -> answer -> PREPARED (the external writes)
 *   put_commit: local-visible at once (V1) -> PUBLISHING: [push by place.c] -> ONE batch
 *              PUT_DONE; slots Committed only once the route exists (V3); an uncertain
 *              outcome retries with the same batch id (T1) -> PUBLISHED (notify) -> freed
 *   put_abort / the external going away: the reservations are released.
 * PUT_INLINE is a one-key put_start whose bytes the owner copies in and commits itself. */
#include <stdio.h>

#include "groups.h"
#include "hmap.h"
#include "log.h"
#include "owner_claims.h"
#include "owner_evict.h"
#include "owner_link.h"
#include "owner_pins.h"
#include "owner_place.h"
#include "owner_put.h"
#include "owner_replica.h"

#define OPUT_RETRY_MAX_MS 1000u

typedef struct oput {
    fx_hmap_t *inflight; /* key -> owner_plan_key_t of its plan (prepared, not committed); intrusive */
    fx_hmap_t *plans;    /* u64 id -> owner_plan_t */
    uint64_t inline_answered_uncertain; /* L3: PUT_INLINEs answered UNKNOWN_OUTCOME by their caller's deadline */
    uint64_t puts_started, puts_committed, puts_published, put_keys_published, put_rejected, put_done_retries,
        puts_aborted, put_plans_expired;
    fx_hist_t put_start_latency, commit_latency, publish_latency;
    uint64_t put_value_bytes; /* value bytes committed (local-ready) */
} oput_t;

static void oput_publish(fx_owner_t *o, owner_plan_t *p);
static void oput_commit_plan(fx_owner_t *o, owner_plan_t *p, fx_conn_t *conn, const fx_frame_header_t *h);

/* ---- plan lifetime ---- */
static void oput_plan_unlink(owner_plan_t *p)
{
    if (!p->ext) return;
    if (p->prev) p->prev->next = p->next;
    else p->ext->plans = p->next;
    if (p->next) p->next->prev = p->prev;
    p->ext = NULL;
    p->prev = p->next = NULL;
}

/* The one plan teardown (every path frees through it). */
static void oput_plan_free(fx_owner_t *o, owner_plan_t *p)
{
#ifdef FX_USE_LIBC_MALLOC /* sanitizer builds: no record of this plan stays in the in-flight map */
    for (size_t i = 0; o->put->inflight && p->arrays && i < p->n; i++)
        FX_ASSERT(fx_hmap_get_h(o->put->inflight, p->keys[i], p->klens[i], p->khash[i]) != &p->ikeys[i]);
#endif
    oput_plan_unlink(p);
    fx_hmap_del(o->put->plans, &p->id, sizeof p->id, NULL);
    fx_timer_disarm(o->r, &p->retry_timer);
    fx_timer_disarm(o->r, &p->answer_timer);
    if (p->q_charged) fx_oevq_release(o, p->q_tenant, p->q_charged); /* issue 42 quotas */
    if (p->reply_conn) fx_conn_unref(p->reply_conn);
    fx_free(p->arrays);
    fx_oplace_plan_free(p);
    fx_free(p->inline_value);
    fx_free(p->repl_mask);
    fx_free(p);
}

static owner_plan_t *oput_find(fx_owner_t *o, uint64_t id) { return fx_hmap_get(o->put->plans, &id, sizeof id); }

/* Key i of p leaves the in-flight map if its mark there is this very record (a later plan
 * may have taken the key over: then it stays, that plan's; the second of a key repeated
 * in one plan never had a mark: the first's stays). Safe on every path for every key, so
 * no plan's record outlives it in the map. */
static void oput_inflight_drop(oput_t *s, owner_plan_t *p, size_t i)
{
    if (!s->inflight) return; /* fx_oput_fini */
    fx_hmap_del_obj(s->inflight, p->khash[i], &p->ikeys[i]); /* by identity: NOT_FOUND when not its own */
}

/* Releases the reservations of a plan that was never committed. */
static void oput_plan_abort(fx_owner_t *o, owner_plan_t *p)
{
    oput_t *s = o->put;
    for (size_t i = 0; i < p->n; i++) {
        oput_inflight_drop(s, p, i);
        if (p->status[i] == FLUXON_OK) fx_slot_pool_release_prepared(fx_ostore_pool(o), &p->slots[i]);
    }
    if (p->place.put_token) fx_oplace_revoke(o, p);
    s->puts_aborted++;
    oput_plan_free(o, p);
    fx_oev_kick(o);
}

typedef struct oput_reject_ctx {
    fx_owner_t *o;
    owner_plan_t *p;
} oput_reject_ctx_t;

static void oput_on_reject(void *arg, size_t i)
{
    oput_reject_ctx_t *c = arg;
    fx_slot_pool_release_prepared(fx_ostore_pool(c->o), &c->p->slots[i]);
}

/* Rejects whole groups: if any member of a group is not OK, every OK member becomes
 * GROUP_REJECTED and its slot (if claimed) is released. */
static void oput_reject_groups(fx_owner_t *o, owner_plan_t *p, bool slots_claimed)
{
    oput_reject_ctx_t c = {o, p};
    fx_groups_reject(p->group_lens, p->n_groups, p->n, p->status, FLUXON_OK, FLUXON_ERR_GROUP_REJECTED,
                     slots_claimed ? oput_on_reject : NULL, &c);
}

/* ---- put_start: answer once the slots are claimed (and the batch placed) ---- */
/* PUT_INLINE: the slot is claimed (and the batch placed): copy the bytes in and commit,
 * or answer the per-key refusal. Consumes p->reply_conn's reference. */
static void oput_inline_claimed(fx_owner_t *o, owner_plan_t *p)
{
    fx_conn_t *c = p->reply_conn;
    p->reply_conn = NULL;
    p->state = OP_PREPARED;
    fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_PUT_INLINE, 0, 0, 0, p->req_id};
    if (p->status[0] != FLUXON_OK) {
        o->put->put_rejected++;
        const char *refusal = p->status[0] == FLUXON_ERR_NO_SPACE ? fx_oclaims_refusal(o) : "";
        if (fx_conn_is_open(c)) /* issue 42: a NO_SPACE names what pins hold, and what the master's placed values */
            fx_conn_reply_error(c, &q, p->status[0], "put of %s: %s%s%s%s", p->keys[0],
                                fluxon_status_string(p->status[0]), refusal[0] ? "; the master grants no more: " : "",
                                refusal, fx_opin_note(o, p->status[0]));
        oput_plan_abort(o, p);
    } else if (!fx_conn_is_open(c) || !p->ext) {
        oput_plan_abort(o, p); /* the external went away meanwhile */
    } else {
        memcpy((uint8_t *)fx_segment_base(o->seg) + p->slots[0].offset, p->inline_value, p->value_len);
        fx_free(p->inline_value);
        p->inline_value = NULL;
        oput_commit_plan(o, p, c, NULL);
    }
    fx_conn_unref(c);
}

/* A prepared plan nobody committed or aborted within put_plan_ttl_ms (its answer may
 * have reached a client that had given up): its keys can be written again at once. Its
 * slots are not reused while its client is connected (issue 44 W5): that client's engine
 * may still be writing through the plan's value_ptrs (a stalled GPU, a preempted process)
 * and its writes would land in other keys' values. They go when the client commits or
 * aborts the plan (answered WRONG_HANDLE: it learns the plan expired, its writes are
 * over) or disconnects; client_limits.max_plans bounds how many it can hold so. */
static void oput_on_plan_ttl(fx_reactor_t *r, fx_timer_t *t)
{
    owner_plan_t *p = FX_CONTAINER_OF(t, owner_plan_t, retry_timer);
    fx_owner_t *o = p->o;
    if (p->state != OP_PREPARED) return;
    o->put->put_plans_expired++;
    if (!p->ext) {
        FX_WARN("put plan %llu (%zu keys) neither committed nor aborted within put_plan_ttl_ms %u: released",
                (unsigned long long)p->id, p->n, o->cfg.put_plan_ttl_ms);
        oput_plan_abort(o, p);
        return;
    }
    FX_WARN("put plan %llu (%zu keys) neither committed nor aborted within put_plan_ttl_ms %u: its keys are "
            "released, its slots kept until the client commits or aborts it or disconnects",
            (unsigned long long)p->id, p->n, o->cfg.put_plan_ttl_ms);
    for (size_t i = 0; i < p->n; i++) oput_inflight_drop(o->put, p, i);
    p->state = OP_EXPIRED;
}

/* The client named its expired plan (commit or abort): it is done with it, the slots go. */
static bool oput_expired_named(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, uint64_t id,
                               const char *what)
{
    owner_plan_t *p = oput_find(o, id);
    if (!p || p->ext != e || p->state != OP_EXPIRED) return false;
    oput_plan_abort(o, p);
    fx_conn_reply_error(e->conn, h, FLUXON_ERR_WRONG_HANDLE,
                        "%s: plan %llu expired (put_plan_ttl_ms %u); its slots are released now", what,
                        (unsigned long long)id, o->cfg.put_plan_ttl_ms);
    return true;
}

static void oput_start_reply(fx_owner_t *o, owner_plan_t *p)
{
    if (p->is_inline) {
        oput_inline_claimed(o, p);
        return;
    }
    oput_t *s = o->put;
    oput_reject_groups(o, p, true);
    uint64_t *st = fx_malloc(2 * p->n * sizeof *st); /* n <= the frame's key count: no overflow */
    size_t accepted = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->status[i] == FLUXON_OK) {
            accepted++;
        } else {
            s->put_rejected++;
            oput_inflight_drop(s, p, i); /* its own mark only: a repeated key's stays its first's */
        }
        if (st) {
            st[i] = (uint64_t)(int64_t)p->status[i];
            st[p->n + i] = p->status[i] == FLUXON_OK ? p->slots[i].offset : 0;
        }
    }
    p->state = OP_PREPARED;
    fx_conn_t *c = p->reply_conn;
    p->reply_conn = NULL;
    fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_PUT_START, 0, 0, 0, p->req_id};
    if (!st) {
        fx_conn_reply_error(c, &q, FLUXON_ERR_NOMEM, "owner out of memory");
        oput_plan_abort(o, p);
    } else if (!fx_conn_is_open(c) || !p->ext) {
        oput_plan_abort(o, p); /* the external went away meanwhile */
    } else {
        fx_body_put_start_ack_t ack = {accepted ? p->id : 0, {st, (uint32_t)p->n}, {st + p->n, (uint32_t)p->n}};
        FX_CONN_SEND(c, FX_MSG_PUT_START, FX_FLAG_RESPONSE, FLUXON_OK, p->req_id, put_start_ack, &ack);
        fx_hist_observe(&s->put_start_latency, fx_now_ns() - p->t0_ns);
        if (!accepted) oput_plan_free(o, p);
        else fx_timer_arm(o->r, &p->retry_timer, o->cfg.put_plan_ttl_ms, oput_on_plan_ttl); /* PREPARED: TTL */
    }
    fx_free(st);
    fx_conn_unref(c);
}

static void oput_claimed(fx_owner_t *o, void *arg, size_t got)
{
    owner_plan_t *p = arg;
    /* slots[0..got) were claimed for the accepted keys in order */
    size_t k = 0;
    fx_slot_ref_t *claimed = p->slots + p->n; /* scratch area after the per-key refs */
    for (size_t i = 0; i < p->n; i++) {
        if (p->status[i] != FLUXON_OK) continue;
        if (k < got) p->slots[i] = claimed[k++];
        else p->status[i] = fx_olink_conn(o) ? FLUXON_ERR_NO_SPACE : FLUXON_ERR_UNAVAILABLE; /* no master: no grants */
    }
    oput_reject_groups(o, p, true); /* the master sees whole groups only */
    if (fx_oplace_start(o, p)) return; /* answered once the master placed the batch */
    oput_start_reply(o, p);
}

/* A plan for a checked request, registered and linked to its external; NULL: no memory. */
static owner_plan_t *oput_plan_new(fx_owner_t *o, owner_ext_t *e, const fx_body_put_start_t *b, const void *value)
{
    size_t n = b->keys.n;
    owner_plan_t *p = fx_calloc(1, sizeof *p);
    if (!p) return NULL;
    fx_timer_init(&p->retry_timer);
    fx_timer_init(&p->answer_timer);
    p->o = o;
    p->t0_ns = fx_now_ns();
    p->n = n;
    /* one allocation, the 8-byte-aligned arrays first; keys are at most
     * FLUXON_MAX_KEY_BYTES and n is bounded by the frame (fx_oput_check): no overflow */
    size_t ng = b->group_lens.n, kb = 0;
    for (size_t i = 0; i < n; i++) kb += b->keys.v[i].len + 1;
    size_t at_ikeys = 2 * n * sizeof *p->slots, at_hash = at_ikeys + n * sizeof *p->ikeys,
           at_groups = at_hash + n * sizeof *p->khash,
           at_keys = at_groups + (ng ? ng : 1) * sizeof *p->group_lens, at_klens = at_keys + n * sizeof *p->keys,
           at_status = at_klens + n * sizeof *p->klens, at_bytes = at_status + n * sizeof *p->status;
    /* not zeroed but for the per-key slot refs (a never-claimed one stays invalid);
     * every other array is written below or by oput_admit before it is read */
    uint8_t *a = p->arrays = fx_malloc(at_bytes + kb + 1);
    if (!a) goto nomem;
    memset(a, 0, n * sizeof *p->slots);
    p->slots = (fx_slot_ref_t *)a;
    p->ikeys = (owner_plan_key_t *)(a + at_ikeys);
    p->khash = (uint64_t *)(a + at_hash);
    p->group_lens = (uint64_t *)(a + at_groups);
    p->keys = (char **)(a + at_keys);
    p->klens = (uint32_t *)(a + at_klens);
    p->status = (int *)(a + at_status);
    for (size_t i = 0, off = at_bytes; i < n; i++) {
        p->keys[i] = (char *)a + off;
        memcpy(p->keys[i], b->keys.v[i].p, b->keys.v[i].len);
        p->keys[i][b->keys.v[i].len] = 0;
        p->klens[i] = b->keys.v[i].len;
        p->khash[i] = fx_hmap_hash(p->keys[i], p->klens[i]);
        p->ikeys[i] = (owner_plan_key_t){p->keys[i], p->klens[i], (uint32_t)i, p};
        off += b->keys.v[i].len + 1;
    }
    if (b->group_lens.n) memcpy(p->group_lens, b->group_lens.v, b->group_lens.n * sizeof(uint64_t));
    p->n_groups = b->group_lens.n;
    p->value_len = b->value_len;
    p->flags = b->flags;
    p->lease_id = b->lease_id;
    p->pin_ttl_ms = b->pin_ttl_ms;
    if ((b->flags & FX_PUT_MAKE_REPLICA) && !(b->flags & FX_PUT_WRITE_THROUGH)) { /* issue 16: eager replicas */
        if (!(p->repl_mask = fx_malloc(n))) goto nomem;
        for (size_t i = 0; i < n; i++) p->repl_mask[i] = b->replica_mask.len ? b->replica_mask.p[i] != 0 : 1;
    }
    if (value) {
        p->is_inline = true;
        if (!(p->inline_value = fx_malloc(b->value_len))) goto nomem;
        memcpy(p->inline_value, value, b->value_len);
    }
    if (b->preferred_sub_cluster.len &&
        !(p->place.preferred = fx_strndup(b->preferred_sub_cluster.p, b->preferred_sub_cluster.len)))
        goto nomem;
    p->id = fx_ostore_next_id(o);
    if (fx_hmap_put(o->put->plans, &p->id, sizeof p->id, p, NULL) != FLUXON_OK) goto nomem;
    p->ext = e;
    p->next = e->plans;
    if (e->plans) e->plans->prev = p;
    e->plans = p;
    return p;
nomem:
    oput_plan_free(o, p);
    return NULL;
}

/* Per-key admission, one pass that also marks the keys in flight (s->inflight -> p): the
 * same key twice in the plan (the mark is already p's), in flight in another plan, or
 * exists here. A refused key leaves the marks as they were. Returns FLUXON_OK or NOMEM
 * (then the caller drops p's marks: oput_plan_abort). */
static int oput_admit(fx_owner_t *o, owner_plan_t *p)
{
    oput_t *s = o->put;
    for (size_t i = 0; i < p->n; i++) { /* the batch's misses overlap (fx_hmap_prefetch) */
        p->status[i] = FLUXON_OK;
        fx_hmap_prefetch(s->inflight, p->khash[i]);
        if (p->flags & FX_PUT_REJECT_IF_EXIST) fx_ostore_prefetch_key(o, p->khash[i]);
    }
    for (size_t i = 0; i < p->n; i++) {
        owner_plan_key_t *old = NULL;
        const char *k = p->keys[i];
        uint32_t kl = p->klens[i];
        uint64_t kh = p->khash[i];
        if (fx_hmap_put_h(s->inflight, k, kl, kh, &p->ikeys[i], (void **)&old) != FLUXON_OK) return FLUXON_ERR_NOMEM;
        if (old && old->p == p) {
            fx_hmap_put_h(s->inflight, k, kl, kh, old, NULL); /* the first of the two stays in flight */
            p->status[i] = FLUXON_ERR_INVALID_ARGUMENT; /* the same key twice in one plan (the header's status) */
            continue;
        }
        if (old && (p->flags & FX_PUT_REJECT_IF_INFLIGHT))
            p->status[i] = FLUXON_ERR_KEY_BEING_WRITTEN;
        else if ((p->flags & FX_PUT_REJECT_IF_EXIST) && fx_ostore_lookup_h(o, k, kl, kh))
            p->status[i] = FLUXON_ERR_KEY_EXISTS;
        if (p->status[i] == FLUXON_OK) continue;
        if (old) fx_hmap_put_h(s->inflight, k, kl, kh, old, NULL); /* the slot exists: no growth */
        else fx_hmap_del_h(s->inflight, k, kl, kh, NULL);
    }
    return FLUXON_OK;
}

/* put_start of a decoded body; value != NULL: a PUT_INLINE of b.value_len bytes (one
 * key), copied into the slot once claimed and published without a put_commit. */
static void oput_start_b(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, fx_body_put_start_t b,
                         const void *value)
{
    oput_t *s = o->put;
    if (!fx_oput_check(o, e, h, &b)) return;
    owner_plan_t *p = oput_plan_new(o, e, &b, value);
    if (!p || oput_admit(o, p) != FLUXON_OK) {
        if (p) {
            for (size_t i = 0; i < p->n; i++) oput_inflight_drop(s, p, i);
            oput_plan_free(o, p);
        }
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_NOMEM, "put_start: owner out of memory");
        return;
    }
    /* the accepted keys are in flight from now on, also while the slots are being claimed;
     * a member of a refused group is not */
    oput_reject_groups(o, p, false);
    size_t want = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->status[i] == FLUXON_OK) want++;
        else if (p->status[i] == FLUXON_ERR_GROUP_REJECTED) oput_inflight_drop(s, p, i);
    }
    s->puts_started++;
    fx_oevq_charge(o, p->q_tenant = e->tenant, p->q_charged = want * fx_slot_size_for(b.value_len)); /* issue 42 */
    p->state = OP_CLAIMING;
    p->req_id = h->req_id;
    p->reply_conn = e->conn;
    fx_conn_ref(e->conn);
    p->answer_by_ms = fx_oclaim_deadline(o, b.timeout_ms);
    fx_oclaim(o, b.value_len, want, p->slots + p->n, p->answer_by_ms, oput_claimed, p);
}

FX_INTERNAL void fx_oput_start(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena)
{
    fx_body_put_start_t b;
    fx_body_put_start_decode(body, h->body_len, &b, arena);
    oput_start_b(o, e, h, b, NULL);
}

FX_INTERNAL void fx_oput_inline(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena)
{
    fx_body_put_inline_t in;
    fx_body_put_inline_decode(body, h->body_len, &in, arena);
    fx_body_put_start_t b = {{&in.key, 1}, in.value.len, in.flags, {NULL, 0}, {NULL, 0}, in.lease_id,
                             in.preferred_sub_cluster, in.timeout_ms, in.pin_ttl_ms};
    oput_start_b(o, e, h, b, in.value.p ? in.value.p : "");
}

/* ---- publish (PUT_DONE, T1) ---- */
static owner_plan_t *oput_prepared(fx_owner_t *o, owner_ext_t *e, uint64_t id)
{
    owner_plan_t *p = oput_find(o, id);
    return p && p->ext == e && p->state == OP_PREPARED ? p : NULL;
}

static void oput_notify(fx_owner_t *o, owner_plan_t *p, int status, const uint64_t *kst)
{
    if (!p->reply_conn || !fx_conn_is_open(p->reply_conn)) return;
    if (p->is_inline) { /* the PUT_INLINE answer */
        fx_timer_disarm(o->r, &p->answer_timer);
        fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_PUT_INLINE, 0, 0, 0, p->req_id};
        if (status == FLUXON_OK && kst && (int)(int64_t)kst[0] == FLUXON_PIN_REFUSED) status = FLUXON_PIN_REFUSED;
        if (status == FLUXON_OK) {
            fx_body_empty_t em;
            FX_CONN_REPLY(p->reply_conn, &q, empty, &em);
        } else {
            fx_conn_reply_error(p->reply_conn, &q, status, "put of %s: %s", p->keys[0], fluxon_status_string(status));
        }
        return;
    }
    fx_body_published_t b = {p->id, status, {NULL, 0}};
    for (size_t i = 0; kst && i < p->n && !b.key_statuses.n; i++) /* per key only when one is not OK */
        if (kst[i] != (uint64_t)(int64_t)FLUXON_OK) b.key_statuses = (fx_u64v_t){kst, (uint32_t)p->n};
    FX_CONN_SEND(p->reply_conn, FX_MSG_PUBLISHED, 0, 0, 0, published, &b);
}

/* No master to publish to, or no answer from it by the caller's deadline (L3): a
 * PUT_INLINE's caller is told that the outcome is not known yet (the value is readable here
 * and is published with the same batch id when the master answers) instead of waiting out
 * its timeout; the plan keeps retrying. */
static void oput_uncertain(fx_owner_t *o, owner_plan_t *p, const char *why)
{
    if (!p->is_inline || !p->reply_conn) return;
    fx_timer_disarm(o->r, &p->answer_timer);
    if (fx_conn_is_open(p->reply_conn)) {
        fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_PUT_INLINE, 0, 0, 0, p->req_id};
        fx_conn_reply_error(p->reply_conn, &q, FLUXON_ERR_UNKNOWN_OUTCOME,
                            "put of %s: stored on owner %s and readable there, not published yet: %s (it is "
                            "published when the master answers)", p->keys[0], o->cfg.node_id, why);
    }
    fx_conn_unref(p->reply_conn);
    p->reply_conn = NULL;
}

static void oput_on_answer_by(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    owner_plan_t *p = FX_CONTAINER_OF(t, owner_plan_t, answer_timer);
    p->o->put->inline_answered_uncertain++;
    oput_uncertain(p->o, p, "no answer from the master by the caller's deadline");
}

static void oput_on_retry(fx_reactor_t *r, fx_timer_t *t)
{
    owner_plan_t *p = FX_CONTAINER_OF(t, owner_plan_t, retry_timer);
    oput_publish(p->o, p);
}

static void oput_on_put_done(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                             fx_arena_t *arena);

typedef struct oput_publish_ctx {
    fx_owner_t *o;
    uint64_t plan_id;
} oput_publish_ctx_t;

static void oput_publish(fx_owner_t *o, owner_plan_t *p)
{
    if (fx_oplace_before_publish(o, p)) return; /* the values are on their way to the target */
    fx_conn_t *mc = fx_olink_conn(o);
    if (!mc) { /* fx_oput_master_ready retries */
        oput_uncertain(o, p, "no master connection");
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < p->n; i++) m += p->status[i] == FLUXON_OK;
    fx_str_t *keys = fx_calloc(m ? m : 1, sizeof *keys);
    uint64_t *offs = fx_calloc(m ? m : 1, sizeof *offs);
    uint64_t *groups = fx_calloc(p->n_groups ? p->n_groups : 1, sizeof *groups);
    oput_publish_ctx_t *ctx = fx_malloc(sizeof *ctx);
    if (!keys || !offs || !groups || !ctx) {
        fx_free(keys);
        fx_free(offs);
        fx_free(groups);
        fx_free(ctx);
        fx_timer_arm(o->r, &p->retry_timer, 50, oput_on_retry);
        return;
    }
    size_t k = 0, ng = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->status[i] == FLUXON_OK) {
            keys[k] = (fx_str_t){p->keys[i], p->klens[i]};
            offs[k++] = fx_oplace_offset(p, i);
        }
    fx_group_iter_t it = fx_group_iter(p->group_lens, p->n_groups, p->n);
    while (p->n_groups && fx_group_next(&it))
        if (p->status[it.start] == FLUXON_OK) groups[ng++] = it.len; /* groups are all-or-none */
    fx_body_put_done_t b = {p->batch_id, p->value_len, p->flags, p->lease_id, {keys, (uint32_t)m},
                            {offs, (uint32_t)m}, {groups, (uint32_t)ng}, p->place.put_token};
    *ctx = (oput_publish_ctx_t){o, p->id};
    if (FX_RPC_CALL(mc, PUT_DONE, put_done, &b, o->cfg.master_timeout_ms, oput_on_put_done, ctx) != FLUXON_OK)
        fx_free(ctx); /* conn closing: master_ready will retry */
    if (p->attempts++) o->put->put_done_retries++;
    fx_free(keys);
    fx_free(offs);
    fx_free(groups);
}

/* The batch enters the hot tier together (V3, A1), each atomic group recorded on its
 * members so that eviction takes it whole. admit[i]: plan key i committed just now. */
static void oput_admit_groups(fx_owner_t *o, owner_plan_t *p, owner_entry_t **admit)
{
    if (!admit) return;
    fx_group_iter_t it = fx_group_iter(p->group_lens, p->n_groups, p->n);
    size_t last = 0, last_m = 0, groups = 0;
    while (fx_group_next(&it)) {
        size_t m = 0;
        for (size_t i = it.start; i < it.start + it.len; i++)
            if (admit[i]) admit[it.start + m++] = admit[i]; /* compacted in place */
        fx_oev_group_commit(o, admit + it.start, m);
        last = it.start;
        last_m = m;
        groups++;
        if (m && p->repl_mask && p->repl_mask[it.start]) /* one replica task per group (uniform mask) */
            fx_orepl_enqueue(o, admit + it.start, m, true);
    }
    if (groups >= 2) fx_oev_batch_tail(o, admit + last, last_m); /* a chain's tail is evicted first */
}

/* The master answered PUT_DONE: each accepted key is committed (or, placed remotely, its
 * staging copy goes), or retired when refused. Returns the plan's outcome, or
 * FLUXON_ERR_PROTOCOL (nothing applied) when the answer's columns do not match the batch. */
static int oput_apply_ack(fx_owner_t *o, owner_plan_t *p, const fx_body_put_done_ack_t *ack, uint64_t *kst)
{
    oput_t *s = o->put;
    int outcome = FLUXON_OK;
    size_t m = 0;
    for (size_t i = 0; i < p->n; i++) m += p->status[i] == FLUXON_OK;
    if (ack->statuses.n != m || ack->put_ms.n != m || ack->put_ver.n != m) return FLUXON_ERR_PROTOCOL;
    owner_entry_t **admit = fx_calloc(p->n, sizeof *admit); /* [i]: committed just now */
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) /* the batch's misses overlap: each slot, and its admission's sketch line */
        if (p->status[i] == FLUXON_OK) fx_ostore_prefetch_offset(o, p->slots[i].offset), fx_oev_prefetch_seen(o, p->khash[i]);
    for (size_t i = 0; i < p->n; i++) {
        if (kst) kst[i] = (uint64_t)(int64_t)p->status[i]; /* refused at put_start (or commit): as it was */
        if (p->status[i] != FLUXON_OK) continue;
        owner_entry_t *en = fx_ostore_find(o, &p->slots[i]); /* by identity: it may be gone */
        int ks = (int)(int64_t)ack->statuses.v[k];
        if (kst) kst[i] = (uint64_t)(int64_t)ks; /* what the master did with this key (R4) */
        if (ks == FLUXON_OK && en && (p->place.target_remote || en->invalidated)) {
            /* published on the target (the staging copy goes), or published and invalidated
             * since (deleted or replaced meanwhile): this copy is done */
            fx_ostore_retire(o, en);
            s->put_keys_published++;
        } else if (ks == FLUXON_OK && en) {
            en->leased = p->lease_id != 0; /* a new master would not know the lease */
            if (fx_ostore_commit(o, en, ack->put_ms.v[k], ack->put_ver.v[k]) == FLUXON_OK && admit) admit[i] = en;
            s->put_keys_published++;
        } else if (en) {
            fx_ostore_retire(o, en); /* never published: the master refused it */
            if (outcome == FLUXON_OK) outcome = ks;
        }
        k++;
    }
    oput_admit_groups(o, p, admit);
    fx_free(admit);
    if (p->pin_ttl_ms && kst) fx_opin_plan(o, p->slots, p->n, p->pin_ttl_ms, p->flags & FX_PUT_PIN_REFRESH, kst);
    return outcome;
}

static void oput_retry_later(fx_owner_t *o, owner_plan_t *p)
{
    uint32_t delay = FX_MIN(50u << FX_MIN(p->attempts, 5u), OPUT_RETRY_MAX_MS);
    fx_timer_arm(o->r, &p->retry_timer, delay, oput_on_retry);
}

static void oput_on_put_done(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                             fx_arena_t *arena)
{
    oput_publish_ctx_t *ctx = arg;
    fx_owner_t *o = ctx->o;
    owner_plan_t *p = o->put ? oput_find(o, ctx->plan_id) : NULL;
    fx_free(ctx);
    if (!p || p->state != OP_PUBLISHING) return;
    fx_body_put_done_ack_t ack;
    memset(&ack, 0, sizeof ack);
    if (status == FLUXON_OK && fx_body_put_done_ack_decode(body, h->body_len, &ack, arena) != FLUXON_OK)
        status = FLUXON_ERR_PROTOCOL;
    if (status == FLUXON_OK && fx_owner_fault(o, FX_FAULT_TRUNCATE, "PUT_DONE")) /* test-only */
        ack.put_ms = ack.put_ver = (fx_u64v_t){NULL, 0};
    if (status == FLUXON_ERR_TIMEOUT || status == FLUXON_ERR_UNAVAILABLE || status == FLUXON_ERR_PROTOCOL) {
        /* uncertain (T1): keep the local-visible entries, retry with the same batch id */
        oput_retry_later(o, p);
        return;
    }
    int outcome = status;
    uint64_t *kst = fx_malloc(p->n * sizeof *kst); /* per key, for PUBLISHED; NULL: the outcome only */
    if (status == FLUXON_OK) {
        bool all_stale = p->place.put_token && ack.statuses.n > 0;
        for (uint32_t k = 0; all_stale && k < ack.statuses.n; k++)
            all_stale = (int)(int64_t)ack.statuses.v[k] == FLUXON_ERR_STALE;
        if (all_stale) { /* the placement expired or its target died: publish the local copy */
            fx_free(kst);
            fx_oplace_stale(o, p);
            p->batch_id = fx_ostore_next_id(o); /* a new batch: the old id has its answer */
            p->attempts = 0;
            oput_publish(o, p);
            return;
        }
        outcome = oput_apply_ack(o, p, &ack, kst);
        if (outcome == FLUXON_ERR_PROTOCOL) { /* malformed: the outcome is unknown (T1) */
            fx_free(kst);
            FX_ERROR("malformed PUT_DONE answer for batch %llu (%u statuses, %u put_ms, %u put_ver); retrying",
                     (unsigned long long)p->batch_id, ack.statuses.n, ack.put_ms.n, ack.put_ver.n);
            oput_retry_later(o, p);
            return;
        }
    } else {
        for (size_t i = 0; i < p->n; i++) {
            owner_entry_t *en = p->status[i] == FLUXON_OK ? fx_ostore_find(o, &p->slots[i]) : NULL;
            if (en) fx_ostore_retire(o, en);
            if (kst) kst[i] = (uint64_t)(int64_t)(p->status[i] == FLUXON_OK ? status : p->status[i]);
        }
    }
    o->put->puts_published++;
    fx_hist_observe(&o->put->publish_latency, fx_now_ns() - p->t0_ns);
    oput_notify(o, p, outcome, kst);
    fx_free(kst);
    oput_plan_free(o, p);
}

/* ---- commit and abort ---- */
/* Commits a prepared plan: local-visible (V1), then published. h: the put_commit request
 * to acknowledge (NULL for PUT_INLINE, answered by oput_notify once published). */
static void oput_commit_plan(fx_owner_t *o, owner_plan_t *p, fx_conn_t *conn, const fx_frame_header_t *h)
{
    oput_t *s = o->put;
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    p->t0_ns = fx_now_ns();
    oput_plan_unlink(p); /* no longer the external's to abort, whatever happens to its conn */
    fx_timer_disarm(o->r, &p->retry_timer); /* the PREPARED TTL: the same timer retries publishes */
    p->state = OP_PUBLISHING;
    /* the batch id is the commit's (W9): ids reach the master in the order of their first
     * attempt, so a plan committed long after its put_start is not below the dedup
     * watermark a later batch's forgotten answer raised (p->id stays the future's id) */
    p->batch_id = fx_ostore_next_id(o);
    p->reply_conn = conn; /* PUBLISHED (or the PUT_INLINE answer) goes here */
    fx_conn_ref(conn);
    if (h) { /* answered first: this reactor indexes the values below before it reads any
              * other request, so every request after the answer finds them (V1); the answer
              * carries no per-key outcome (that is PUBLISHED's) */
        fx_body_put_commit_ack_t ack = {p->id};
        FX_CONN_REPLY(conn, h, put_commit_ack, &ack);
    }
    for (size_t i = 0; i < p->n; i++) { /* the batch's misses overlap (fx_hmap_prefetch) */
        if (p->status[i] != FLUXON_OK) continue;
        fx_hmap_prefetch(s->inflight, p->khash[i]);
        fx_ostore_prefetch_offset(o, p->slots[i].offset);
        fx_ostore_prefetch_key(o, p->khash[i]);
    }
    /* local-read-ready now (V1): index the values before anything else */
    for (size_t i = 0; i < p->n; i++) {
        if (p->status[i] != FLUXON_OK) continue;
        oput_inflight_drop(s, p, i);
        fx_slot_pool_mark_pending(pool, &p->slots[i]);
        owner_entry_t *en =
            fx_ostore_entry_new(o, p->keys[i], p->klens[i], p->khash[i], &p->slots[i], p->value_len);
        if (!en) {
            p->status[i] = FLUXON_ERR_NOMEM;
            fx_slot_pool_release_prepared(pool, &p->slots[i]);
            continue;
        }
        fx_ostore_index(o, en);
    }
    s->puts_committed++;
    for (size_t i = 0; i < p->n; i++) s->put_value_bytes += p->status[i] == FLUXON_OK ? p->value_len : 0;
    fx_hist_observe(&s->commit_latency, fx_now_ns() - p->t0_ns);
    if (p->is_inline && p->reply_conn) { /* L3: answered by the caller's deadline, whatever the master does */
        uint64_t now = fx_now_ms();
        fx_timer_arm(o->r, &p->answer_timer, (uint32_t)FX_MIN(p->answer_by_ms > now ? p->answer_by_ms - now : 1,
                                                              (uint64_t)UINT32_MAX), oput_on_answer_by);
    }
    if (fx_owner_fault_delay(o, "PUT_DONE")) { /* test-only: the master hears of this batch fault_ms later */
        FX_WARN("test fault: PUT_DONE of batch %llu held back %u ms", (unsigned long long)p->id, o->cfg.fault_ms);
        fx_timer_arm(o->r, &p->retry_timer, o->cfg.fault_ms, oput_on_retry);
        return;
    }
    oput_publish(o, p);
}

FX_INTERNAL void fx_oput_commit(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena)
{
    fx_body_plan_ref_t b;
    fx_body_plan_ref_decode(body, h->body_len, &b, arena);
    if (oput_expired_named(o, e, h, b.plan_id, "put_commit")) return;
    owner_plan_t *p = oput_prepared(o, e, b.plan_id);
    if (!p || p->is_inline) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_WRONG_HANDLE,
                            "put_commit: plan %llu is not a prepared put plan of this client",
                            (unsigned long long)b.plan_id);
        return;
    }
    oput_commit_plan(o, p, e->conn, h);
}

FX_INTERNAL void fx_oput_abort(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena)
{
    fx_body_plan_ref_t b;
    fx_body_plan_ref_decode(body, h->body_len, &b, arena);
    if (oput_expired_named(o, e, h, b.plan_id, "put_abort")) return;
    owner_plan_t *p = oput_prepared(o, e, b.plan_id);
    if (!p) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_WRONG_HANDLE,
                            "put_abort: plan %llu is not a prepared put plan of this client (committed or unknown)",
                            (unsigned long long)b.plan_id);
        return;
    }
    oput_plan_abort(o, p);
    fx_body_empty_t em;
    FX_CONN_REPLY(e->conn, h, empty, &em);
}

FX_INTERNAL void fx_oput_ext_closed(fx_owner_t *o, owner_ext_t *e)
{
    while (e->plans) {
        owner_plan_t *p = e->plans;
        if (p->state == OP_CLAIMING) oput_plan_unlink(p); /* the put_start reply aborts it */
        else oput_plan_abort(o, p);
    }
}

FX_INTERNAL void fx_oput_master_ready(fx_owner_t *o)
{
    /* retry publishes whose outcome is unknown (T1) */
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    void *v;
    while (fx_hmap_iter_next(o->put->plans, &it, NULL, NULL, &v)) {
        owner_plan_t *p = v;
        if (p->state == OP_PUBLISHING && !fx_timer_armed(&p->retry_timer)) oput_publish(o, p);
    }
}

/* ---- lifecycle and stats ---- */
static void oput_placed(fx_owner_t *o, owner_plan_t *p) { oput_start_reply(o, p); }
static void oput_pushed(fx_owner_t *o, owner_plan_t *p) { oput_publish(o, p); }

FX_INTERNAL int fx_oput_init(fx_owner_t *o)
{
    oput_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    o->put = s;
    if (fx_hmap_create_intrusive(64, offsetof(owner_plan_key_t, key), offsetof(owner_plan_key_t, klen), &s->inflight) ||
        fx_hmap_create(64, &s->plans))
        return FLUXON_ERR_NOMEM;
    int rc = fx_oplace_init(o, &(fx_oplace_ops_t){oput_find, oput_placed, oput_pushed});
    return rc == FLUXON_OK ? fx_opin_init(o) : rc; /* issue 42: pins ride on put's lifetime */
}

/* Plans still publishing go with their bookkeeping (the node is going away). */
FX_INTERNAL void fx_oput_fini(fx_owner_t *o)
{
    oput_t *s = o->put;
    if (!s) return;
    fx_hmap_destroy(s->inflight); /* it holds the plans' own records: it goes first */
    s->inflight = NULL;
    if (s->plans) {
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        void *v;
        while (fx_hmap_iter_next(s->plans, &it, NULL, NULL, &v)) {
            owner_plan_t *p = v;
            p->ext = NULL; /* the externals are gone */
            oput_plan_free(o, p);
        }
    }
    fx_hmap_destroy(s->plans);
    fx_free(s);
    o->put = NULL;
    fx_oplace_fini(o);
    fx_opin_fini(o);
}

FX_INTERNAL void fx_oput_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    oput_t *s = o->put;
    m->puts_inflight = fx_hmap_count(s->plans);
    m->puts_started = s->puts_started;
    m->puts_committed = s->puts_committed;
    m->put_inline_answered_uncertain = s->inline_answered_uncertain;
    m->puts_published = s->puts_published;
    m->put_keys_published = s->put_keys_published;
    m->put_rejected = s->put_rejected;
    m->put_done_retries = s->put_done_retries;
    m->puts_aborted = s->puts_aborted;
    m->put_plans_expired = s->put_plans_expired;
    m->put_value_bytes = s->put_value_bytes;
    m->put_start_latency = s->put_start_latency;
    m->commit_latency = s->commit_latency;
    m->publish_latency = s->publish_latency;
}

#undef OPUT_RETRY_MAX_MS
