/* forget.c — FORGET (issue 38): an owner that wrote a value back to another owner (an append)
 * may keep a record of the copy and read it back without a LOOKUP (owner/wbmap.c). When the
 * master drops such a copy (the target's oldest dropped, the key replaced or deleted, the copy
 * promoted away), its range is queued here for its appender, and the queue goes out as one-way
 * FORGET frames before the master handles its next frame (master.c calls the flush around
 * every request). The appender's rule rests on that order and on the range's reuse delay
 * (reuse.c): a copy it reads within range_reuse_delay_ms (less 1 ms) of sending a request
 * whose answer it has seen is of the version it recorded, unless a FORGET came first. A queue
 * that cannot grow (no memory) makes the appender forget all its records instead. Reactor
 * thread only. */
#include "log.h"
#include "mkv.h"

typedef struct mkv_forget_ent {
    master_node_t *by, *n; /* the appender; the node whose range it was */
    uint64_t generation, offset;
} mkv_forget_ent_t;

struct mkv_forget {
    mkv_forget_ent_t *e;
    uint32_t n, cap;
    master_node_t **all; /* appenders told to forget every record (the queue could not grow) */
    uint32_t n_all, cap_all;
};

static bool mf_connected(const master_node_t *by)
{
    return by->peer && by->peer->conn && fx_conn_is_open(by->peer->conn);
}

FX_INTERNAL void mkv_forget_add(mkv_t *s, master_node_t *by, master_node_t *n, uint64_t generation, uint64_t offset)
{
    if (!mf_connected(by)) return; /* it forgets its records when its link goes */
    struct mkv_forget *q = s->forget;
    if (!q) q = s->forget = fx_calloc(1, sizeof *q);
    if (q && q->n == q->cap) {
        uint32_t nc = q->cap ? q->cap * 2 : 256;
        mkv_forget_ent_t *ne = fx_realloc(q->e, (size_t)nc * sizeof *ne);
        if (ne) {
            q->e = ne;
            q->cap = nc;
        }
    }
    if (q && q->n < q->cap) {
        q->e[q->n++] = (mkv_forget_ent_t){by, n, generation, offset};
        return;
    }
    s->c.forget_all_sent++; /* no memory: the appender forgets everything (below), or loses its link */
    if (q && q->n_all == q->cap_all) {
        uint32_t nc = q->cap_all ? q->cap_all * 2 : 8;
        master_node_t **na = fx_realloc(q->all, (size_t)nc * sizeof *na);
        if (na) {
            q->all = na;
            q->cap_all = nc;
        }
    }
    if (q && q->n_all < q->cap_all) {
        q->all[q->n_all++] = by;
        return;
    }
    FX_ERROR("forget: out of memory; owner %s's link is closed so that it drops its records of its copies",
             by->node_id);
    fx_conn_close(by->peer->conn, FLUXON_ERR_NOMEM);
}

static void mf_send(mkv_t *s, master_node_t *by, const char *node_id, uint64_t generation, uint64_t *offs, uint32_t k)
{
    if (!mf_connected(by)) return;
    fx_body_forget_t b = {fx_str_c(node_id), generation, {offs, k}};
    if (FX_CONN_SEND(by->peer->conn, FX_MSG_FORGET, 0, 0, 0, forget, &b) == FLUXON_OK) {
        s->c.forget_msgs++;
        s->c.forget_copies += k;
        return;
    }
    FX_ERROR("forget: cannot tell owner %s that %u of its copies on %s went; its link is closed so that it drops "
             "its records", by->node_id, k, node_id[0] ? node_id : "any owner");
    fx_conn_close(by->peer->conn, FLUXON_ERR_NOMEM);
}

FX_INTERNAL void fx_mkv_forget_flush(mkv_t *s)
{
    struct mkv_forget *q = s ? s->forget : NULL;
    if (!q || (!q->n && !q->n_all)) return;
    for (uint32_t i = 0; i < q->n_all; i++) mf_send(s, q->all[i], "", 0, NULL, 0); /* every record */
    q->n_all = 0;
    uint64_t *offs = fx_malloc((size_t)q->n * sizeof *offs);
    /* one FORGET per (appender, node, generation): entries of one group are gathered in
     * place, the rest moves down (the queue is usually one group) */
    while (q->n) {
        mkv_forget_ent_t g = q->e[0];
        uint32_t k = 0, rest = 0;
        for (uint32_t i = 0; i < q->n; i++) {
            mkv_forget_ent_t *x = &q->e[i];
            if (x->by == g.by && x->n == g.n && x->generation == g.generation) {
                if (offs) offs[k] = x->offset;
                k++;
            } else {
                q->e[rest++] = *x;
            }
        }
        q->n = rest;
        if (offs) mf_send(s, g.by, g.n->node_id, g.generation, offs, k);
        else mf_send(s, g.by, "", 0, NULL, 0); /* no memory for the list: every record */
    }
    fx_free(offs);
}

FX_INTERNAL void mkv_forget_fini(mkv_t *s)
{
    if (!s->forget) return;
    fx_free(s->forget->e);
    fx_free(s->forget->all);
    fx_free(s->forget);
    s->forget = NULL;
}
