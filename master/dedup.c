/* dedup.c — the answers of recent PUT_DONE batches per owner (T1): a retry of a batch gets
 * the answer of its first attempt, and no batch is ever applied twice.
 *
 * An owner retries a PUT_DONE whose answer it did not get (timeout, lost connection) with
 * the same batch id, every master_timeout_ms + at most 1 s, for as long as it lives. So
 * the memory is bounded by TIME, not by a count of batches: an answer is kept until
 * MKV_DEDUP_TTL_FACTOR x master_timeout_ms (5 min at the default 5 s) after the LAST
 * attempt of its batch (each retry refreshes it), and at most MKV_DEDUP_MAX_BYTES per
 * owner (the oldest go first). Batch ids are unique and increasing per owner generation.
 * When an answer is dropped (age or memory), the highest dropped batch id becomes the
 * owner's watermark: any later attempt of an unknown batch at or below it is refused with
 * FLUXON_ERR_STALE (the owner drops that put) instead of being applied a second time —
 * losing a value is allowed, resurrecting a deleted key or overwriting a newer value is
 * not. Only a batch whose FIRST attempt arrives after a later batch's answer was dropped
 * is refused spuriously; an owner numbers a batch when it is committed and sends it at
 * once (W9: not at put_start, up to put_plan_ttl_ms earlier), so that takes a batch held
 * unsent past the TTL or 64 MiB of later answers. A new generation starts over (its ids
 * are its own).
 * The sweep runs on a timer (a quarter of the TTL) while answers are kept. */
#include "log.h"
#include "mkv.h"

#define DDP_ACK_OVERHEAD 96u /* bytes counted per kept answer besides its body (entry + map) */

typedef struct ddp_ack {
    uint64_t batch_id;
    uint64_t touched_ms; /* fx_now_ms of the last attempt */
    uint8_t *body;       /* encoded put_done_ack body */
    size_t len;
    struct ddp_ack *prev, *next; /* oldest attempt first */
} ddp_ack_t;

struct fx_mkv_dedup {
    uint64_t generation;
    fx_hmap_t *acks; /* batch_id (8 bytes) -> ddp_ack_t */
    ddp_ack_t *head, *tail;
    size_t bytes;
    uint64_t watermark; /* the highest batch id whose answer was dropped; 0: none */
};

static uint64_t ddp_ttl_ms(const mkv_t *s)
{
    uint64_t t = s->m->cfg.master_timeout_ms ? s->m->cfg.master_timeout_ms : 5000u;
    return t * MKV_DEDUP_TTL_FACTOR;
}

static void ddp_unlink(fx_mkv_dedup_t *d, ddp_ack_t *a)
{
    if (a->prev) a->prev->next = a->next;
    else d->head = a->next;
    if (a->next) a->next->prev = a->prev;
    else d->tail = a->prev;
    a->prev = a->next = NULL;
}

static void ddp_append(fx_mkv_dedup_t *d, ddp_ack_t *a)
{
    a->prev = d->tail;
    a->next = NULL;
    if (d->tail) d->tail->next = a;
    else d->head = a;
    d->tail = a;
}

/* Drops answer a; forgot: it was dropped while its batch may still be retried (raises
 * the watermark and counts it). */
static void ddp_drop(mkv_t *s, fx_mkv_dedup_t *d, ddp_ack_t *a, bool forgot)
{
    ddp_unlink(d, a);
    fx_hmap_del(d->acks, &a->batch_id, sizeof a->batch_id, NULL);
    size_t cost = a->len + DDP_ACK_OVERHEAD;
    d->bytes -= FX_MIN(d->bytes, cost);
    if (s) {
        s->dedup_acks -= FX_MIN(s->dedup_acks, 1u);
        s->dedup_bytes -= FX_MIN(s->dedup_bytes, cost);
    }
    if (forgot) {
        d->watermark = FX_MAX(d->watermark, a->batch_id);
        if (s) s->c.put_dedup_forgotten++;
    }
    fx_free(a->body);
    fx_free(a);
}

static void ddp_clear(mkv_t *s, fx_mkv_dedup_t *d)
{
    while (d->head) ddp_drop(s, d, d->head, false);
    d->watermark = 0;
}

static void ddp_on_timer(fx_reactor_t *r, fx_timer_t *t)
{
    mkv_t *s = FX_CONTAINER_OF(t, mkv_t, dedup_timer);
    uint64_t now = fx_now_ms(), ttl = ddp_ttl_ms(s);
    size_t dropped = 0;
    for (size_t i = 0; i < s->m->n_nodes; i++) {
        fx_mkv_dedup_t *d = s->m->nodes[i]->kv;
        while (d && d->head && now - d->head->touched_ms >= ttl) {
            ddp_drop(s, d, d->head, true);
            dropped++;
        }
    }
    if (dropped) FX_DEBUG("put_done dedup: %zu answers older than %llu ms dropped", dropped, (unsigned long long)ttl);
    if (s->dedup_acks) fx_timer_arm(r, t, FX_MAX(ttl / 4, 1u), ddp_on_timer);
}

FX_INTERNAL int fx_mkv_dedup_reset(mkv_t *s, master_node_t *n)
{
    fx_mkv_dedup_t *d = n->kv;
    if (d) {
        ddp_clear(s, d); /* batch ids are unique per generation only */
    } else {
        d = fx_calloc(1, sizeof *d);
        if (!d || fx_hmap_create(64, &d->acks) != FLUXON_OK) {
            fx_free(d);
            return FLUXON_ERR_NOMEM;
        }
        n->kv = d;
    }
    d->generation = n->generation;
    return FLUXON_OK;
}

FX_INTERNAL void fx_mkv_dedup_free(mkv_t *s, master_node_t *n)
{
    fx_mkv_dedup_t *d = n->kv;
    if (!d) return;
    ddp_clear(s, d);
    fx_hmap_destroy(d->acks);
    fx_free(d);
    n->kv = NULL;
}

FX_INTERNAL int fx_mkv_dedup_check(mkv_t *s, master_node_t *n, uint64_t batch_id, const uint8_t **body_p,
                                   size_t *len_p)
{
    fx_mkv_dedup_t *d = n->kv;
    ddp_ack_t *a = fx_hmap_get(d->acks, &batch_id, sizeof batch_id);
    if (a) {
        a->touched_ms = fx_now_ms(); /* the owner still retries: keep it another TTL */
        ddp_unlink(d, a);
        ddp_append(d, a);
        *body_p = a->body;
        *len_p = a->len;
        return MKV_DEDUP_ANSWERED;
    }
    (void)s;
    return batch_id <= d->watermark ? MKV_DEDUP_FORGOTTEN : MKV_DEDUP_NEW;
}

FX_INTERNAL uint64_t fx_mkv_dedup_watermark(const master_node_t *n)
{
    const fx_mkv_dedup_t *d = n->kv;
    return d ? d->watermark : 0;
}

FX_INTERNAL bool fx_mkv_dedup_remember(mkv_t *s, master_node_t *n, uint64_t batch_id, uint8_t *body, size_t len)
{
    fx_mkv_dedup_t *d = n->kv;
    ddp_ack_t *a = fx_calloc(1, sizeof *a);
    if (!a) return false;
    *a = (ddp_ack_t){batch_id, fx_now_ms(), body, len, NULL, NULL};
    if (fx_hmap_put(d->acks, &a->batch_id, sizeof a->batch_id, a, NULL) != FLUXON_OK) {
        fx_free(a);
        return false;
    }
    ddp_append(d, a);
    size_t cost = len + DDP_ACK_OVERHEAD;
    d->bytes += cost;
    s->dedup_acks++;
    s->dedup_bytes += cost;
    size_t dropped = 0;
    while (d->bytes > MKV_DEDUP_MAX_BYTES && d->head != a) {
        ddp_drop(s, d, d->head, true);
        dropped++;
    }
    if (dropped)
        FX_WARN("put_done dedup of %s: %zu answers dropped to stay within %u bytes; retries of batches up to "
                "%llu are refused", n->node_id, dropped, MKV_DEDUP_MAX_BYTES, (unsigned long long)d->watermark);
    if (s->m->r && !fx_timer_armed(&s->dedup_timer))
        fx_timer_arm(s->m->r, &s->dedup_timer, FX_MAX(ddp_ttl_ms(s) / 4, 1u), ddp_on_timer);
    return true;
}

FX_INTERNAL void fx_mkv_dedup_stop(mkv_t *s) { fx_timer_disarm(s->m->r, &s->dedup_timer); }

#undef DDP_ACK_OVERHEAD
