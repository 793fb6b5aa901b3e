/* reuse.c — a range of a segment freed by the master (a placed or appended replica dropped,
 * a placement given up) goes back to its allocator only range_reuse_delay_ms later (issue 38).
 * A reader that copies such a replica needs no GET_DONE answer before it reads its copy: if
 * the copy ended within that delay of its LOOKUP (less 1 ms), the range could not have been
 * handed out again meanwhile, so it still held the version LOOKUP named (D1). Dropped ranges
 * waiting count as used, so append.c drops a target's oldest replicas ahead to keep a
 * reserve (mkv_ranges_reserve): appends then rarely wait for the delay. LOOKUP tells the reader
 * the delay per key (reuse_ms). The queue is one FIFO per node, in release order, which is
 * due order: O(1) per release and per reclaim. A range no LOOKUP could have named (a
 * placement given up before it was routed) is freed at once. The range's bytes leave
 * placed_bytes (the placement limit) at once either way. Reactor thread only. */
#include "log.h"
#include "mkv.h"

typedef struct mkv_reuse_ent {
    uint64_t off, bytes, due_ms;
} mkv_reuse_ent_t;

struct mkv_reuse_q {
    mkv_reuse_ent_t *e;
    uint32_t head, n, cap;
    uint64_t bytes;                   /* of the ranges waiting */
    uint64_t win_ms, win_cur, win_prev; /* bytes allocated in this delay-long window, the last */
};

static void mr_free_now(master_node_t *n, uint64_t off)
{
    if (n->alloc && fx_offset_alloc_free(n->alloc, off) != FLUXON_OK)
        FX_ERROR("owner %s: range at %llu was not allocated", n->node_id, (unsigned long long)off);
}

FX_INTERNAL void mkv_range_release(mkv_t *s, master_node_t *n, uint64_t off, uint64_t bytes, bool read)
{
    n->placed_bytes -= FX_MIN(n->placed_bytes, bytes); /* no replica holds it: not placed any more */
    uint32_t d = read ? s->m->cfg.range_reuse_delay_ms : 0;
    struct mkv_reuse_q *q = n->reuse_q;
    if (!q && d) q = n->reuse_q = fx_calloc(1, sizeof *q);
    if (q && q->n == q->cap) { /* grow, unwrapping the ring */
        uint32_t nc = q->cap ? q->cap * 2 : 64;
        mkv_reuse_ent_t *ne = fx_malloc((size_t)nc * sizeof *ne);
        if (ne) {
            for (uint32_t i = 0; i < q->n; i++) ne[i] = q->e[(q->head + i) % q->cap];
            fx_free(q->e);
            q->e = ne;
            q->head = 0;
            q->cap = nc;
        }
    }
    if (!d) {
        mr_free_now(n, off);
        return;
    }
    if (!q || q->n == q->cap) { /* out of memory: LOOKUP promised the delay, so the range is never
                                 * freed (lost to this allocator until the owner registers anew) */
        if (!s->c.range_reuse_undelayed++)
            FX_ERROR("owner %s: out of memory delaying the reuse of a range: it is kept allocated (counted "
                     "range_reuse_lost_nomem)", n->node_id);
        return;
    }
    q->e[(q->head + q->n++) % q->cap] = (mkv_reuse_ent_t){off, bytes, fx_now_ms() + d};
    q->bytes += bytes;
    s->c.range_reuse_delayed++;
}

FX_INTERNAL void mkv_ranges_reclaim(master_node_t *n, uint64_t now_ms)
{
    struct mkv_reuse_q *q = n->reuse_q;
    while (q && q->n && q->e[q->head].due_ms <= now_ms) {
        mkv_reuse_ent_t x = q->e[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
        q->bytes -= FX_MIN(q->bytes, x.bytes);
        mr_free_now(n, x.off);
    }
}

FX_INTERNAL uint64_t mkv_ranges_waiting_bytes(const master_node_t *n) { return n->reuse_q ? n->reuse_q->bytes : 0; }

FX_INTERNAL void mkv_reuse_drop(master_node_t *n)
{
    if (!n->reuse_q) return;
    fx_free(n->reuse_q->e);
    fx_free(n->reuse_q);
    n->reuse_q = NULL;
}

FX_INTERNAL uint64_t mkv_ranges_reserve(mkv_t *s, master_node_t *n, uint64_t allocated)
{
    uint32_t d = s->m->cfg.range_reuse_delay_ms;
    struct mkv_reuse_q *q = n->reuse_q;
    if (!d || !q) return 0;
    uint64_t now = fx_now_ms();
    if (now >= q->win_ms + d) { /* a new window; the last one counts only if it just ended */
        q->win_prev = now < q->win_ms + 2ull * d ? q->win_cur : 0;
        q->win_cur = 0;
        q->win_ms = now;
    }
    q->win_cur += allocated;
    /* three times what one delay's worth of allocations takes: bursts */
    return FX_MAX(q->win_cur, q->win_prev) * 3;
}
