/* quarantine.c — W2 (issue 44): the range quarantine of an owner that had another master.
 * This master's allocator of that owner's segment knows nothing of the ranges the earlier
 * master allocated there for pushes (PUT_PLACE, APPEND_START), and such a push may still be
 * landing: a range handed out now — placed, appended, or a GRANT for the owner's own slots —
 * could take those late bytes. So nothing is allocated where a push may land until either
 * range_quarantine_ms has passed (the bound of any push: 3/4 inflight_ttl_ms + the UCX
 * orphan grace), or every writer that could have started such a push is known to be done:
 *  - the owner names the other owners its earlier master announced (CLUSTER_INFO: ids and
 *    generations) — the only processes that could push into its segment;
 *  - each of them, once registered here, reports the owners it has unsettled pushes to
 *    (started and not retired by UCX: a timed-out push is unsettled until UCX retires it),
 *    at REGISTER and with every heartbeat;
 *  - a writer back with the same generation and no unsettled push to the owner is done; one
 *    back as a newer process is done FX_RANGE_QUARANTINE_GRACE_MS after it registered here
 *    (its predecessor is gone, the socket-in-use rule; bytes it had already sent have had
 *    that long to arrive); one not back keeps the quarantine to its end;
 *  - any owner registered here that names it unsettled holds it too (a writer it was not
 *    told of: nothing is placed in a quarantined segment, so such a push is an old one).
 * Meanwhile grants still come from the grant-only lower part of a gpu_owner's segment (kv.c:
 * no master ever places a push there); only when it is full is a GRANT refused (BUSY).
 * Reviewed at every registration, heartbeat change and liveness tick. Reactor thread only. */
#include <stdio.h>

#include "hmap.h"
#include "log.h"
#include "mkv.h"

typedef struct fx_mq_peer {
    char node_id[FX_ID_MAX];
    uint64_t generation;
} fx_mq_peer_t;

FX_INTERNAL uint32_t fx_mkv_quarantine_ms(const fx_master_t *m)
{
    uint32_t q = m->cfg.range_quarantine_ms;
    if (q != FX_RANGE_QUARANTINE_AUTO) return q;
    uint64_t ttl = m->cfg.inflight_ttl_ms ? m->cfg.inflight_ttl_ms : 60000u;
    return (uint32_t)(ttl * 3 / 4 + FX_RANGE_QUARANTINE_GRACE_MS);
}

static void mq_wait_clear(master_node_t *n)
{
    fx_free(n->q_wait);
    n->q_wait = NULL;
    n->n_q_wait = 0;
}

FX_INTERNAL void fx_mq_node_free(master_node_t *n)
{
    mq_wait_clear(n);
    fx_free(n->unsettled);
    n->unsettled = NULL;
    n->n_unsettled = 0;
}

FX_INTERNAL bool fx_mq_unsettled_set(master_node_t *n, fx_strv_t v)
{
    bool same = v.n == n->n_unsettled;
    for (uint32_t i = 0; same && i < v.n; i++) same = fx_str_eq(v.v[i], n->unsettled[i]);
    if (same) return false;
    char(*u)[FX_ID_MAX] = v.n ? fx_malloc(v.n * sizeof *u) : NULL;
    if (v.n && !u) { /* out of memory: keep the old list (it can only hold a quarantine longer) */
        FX_ERROR("owner %s: out of memory recording its %u unsettled pushes", n->node_id, v.n);
        return false;
    }
    for (uint32_t i = 0; i < v.n; i++) fx_str_copy(v.v[i], u[i], FX_ID_MAX);
    fx_free(n->unsettled);
    n->unsettled = u;
    n->n_unsettled = v.n;
    return true;
}

static bool mq_unsettled_to(const master_node_t *w, const char *node_id)
{
    for (uint32_t i = 0; i < w->n_unsettled; i++)
        if (!strcmp(w->unsettled[i], node_id)) return true;
    return false;
}

FX_INTERNAL void fx_mq_start(mkv_t *s, master_node_t *n, fx_strv_t peer_ids, fx_u64v_t peer_gens)
{
    n->quarantine_until_ms = 0;
    mq_wait_clear(n);
    uint32_t q = fx_mkv_quarantine_ms(s->m);
    n->q_report = q && n->rp_pending && n->reg_prev_master_generation;
    if (!n->reg_prev_master_generation || !q) return;
    n->quarantine_until_ms = fx_now_ms() + q;
    n->quarantine_since_ms = fx_now_ms();
    s->c.range_quarantines++;
    /* the list names the owner itself when it is usable (it was announced alive too); an
     * empty or malformed one: not told, so the quarantine runs to its end */
    uint32_t np = peer_ids.n == peer_gens.n ? peer_ids.n : 0;
    n->q_wait = np ? fx_calloc(np, sizeof *n->q_wait) : NULL;
    for (uint32_t i = 0; n->q_wait && i < np; i++) {
        if (fx_str_eq(peer_ids.v[i], n->node_id) || !peer_ids.v[i].len) continue;
        fx_str_copy(peer_ids.v[i], n->q_wait[n->n_q_wait].node_id, FX_ID_MAX);
        n->q_wait[n->n_q_wait++].generation = peer_gens.v[i];
    }
    bool known = n->q_wait != NULL;
    FX_INFO("owner %s was registered with master generation %llu: no placed or appended range goes to its segment, "
            "and grants only from its grant-only part, until %s, %u ms at most (range_quarantine_ms: pushes that "
            "master started may still land)", n->node_id, (unsigned long long)n->reg_prev_master_generation,
            known ? "the owners that master announced are back with none unsettled"
                  : "the end (the owner named no list of the owners that master announced)", q);
    n->q_wait_unknown = !known;
}

/* Is the writer w announced to n (generation gen) known to have no push into n's segment
 * left from the earlier master? by_id: node id -> node. */
static bool mq_writer_done(const master_node_t *n, const fx_mq_peer_t *w, const fx_hmap_t *by_id, uint64_t now)
{
    const master_node_t *p = fx_hmap_get(by_id, w->node_id, strlen(w->node_id));
    if (!p || !p->kv || !p->alive || !p->peer) return false; /* not registered here, or not now */
    if (p->generation == w->generation) return !mq_unsettled_to(p, n->node_id);
    return now >= p->registered_ms + FX_RANGE_QUARANTINE_GRACE_MS; /* a newer process */
}

FX_INTERNAL void fx_mq_review(fx_master_t *m)
{
    mkv_t *s = m->kv;
    if (!s) return;
    uint64_t now = fx_now_ms();
    for (size_t i = 0; i < m->n_nodes; i++) { /* ended by their bound: said, once */
        master_node_t *n = m->nodes[i];
        if (!n->quarantine_until_ms || now < n->quarantine_until_ms) continue;
        FX_INFO("owner %s: its range quarantine ended by its bound (range_quarantine_ms %u) after %llu ms; %s",
                n->node_id, fx_mkv_quarantine_ms(m), (unsigned long long)(now - n->quarantine_since_ms),
                n->q_wait_unknown ? "the owners its earlier master announced were not known"
                                  : "some owner its earlier master announced did not come back with none unsettled");
        n->quarantine_until_ms = 0;
        mq_wait_clear(n);
        s->c.range_quarantines_expired++;
    }
    size_t waiting = 0;
    for (size_t i = 0; i < m->n_nodes; i++)
        waiting += now < m->nodes[i]->quarantine_until_ms && !m->nodes[i]->q_wait_unknown; /* W2's own */
    if (!waiting) return;
    /* O(nodes + waits): nodes by id, and the targets some alive owner names unsettled; out of
     * memory, no quarantine ends now (the next review tries again, the bound still holds) */
    fx_hmap_t *by_id = NULL, *named_to = NULL;
    bool ok = fx_hmap_create(m->n_nodes * 2 + 8, &by_id) == FLUXON_OK && fx_hmap_create(16, &named_to) == FLUXON_OK;
    for (size_t j = 0; ok && j < m->n_nodes; j++) {
        const master_node_t *w = m->nodes[j];
        ok = fx_hmap_put(by_id, w->node_id, strlen(w->node_id), (void *)w, NULL) == FLUXON_OK;
        for (uint32_t u = 0; ok && w->alive && u < w->n_unsettled; u++)
            ok = fx_hmap_put(named_to, w->unsettled[u], strlen(w->unsettled[u]), (void *)w, NULL) == FLUXON_OK;
    }
    for (size_t i = 0; ok && i < m->n_nodes; i++) {
        master_node_t *n = m->nodes[i];
        if (now >= n->quarantine_until_ms || n->q_wait_unknown || !n->alive) continue; /* W2's own */
        /* issue 38: the earlier master's reuse delay of ranges it freed may still run */
        if (now < n->quarantine_since_ms + s->m->cfg.range_reuse_delay_ms) continue;
        uint32_t k = 0;
        for (uint32_t j = 0; j < n->n_q_wait; j++)
            if (!mq_writer_done(n, &n->q_wait[j], by_id, now)) n->q_wait[k++] = n->q_wait[j];
        n->n_q_wait = k;
        if (k) continue;
        /* a writer n was not told of (it joined while n's link was down) that names n: its
         * push is from the earlier master too (nothing is placed in n here meanwhile) */
        const master_node_t *w = fx_hmap_get(named_to, n->node_id, strlen(n->node_id));
        if (w && w != n) continue;
        FX_INFO("owner %s: every owner its earlier master announced is back and has no push to it unsettled: its "
                "range quarantine ends after %llu ms%s", n->node_id, (unsigned long long)(now - n->quarantine_since_ms),
                n->q_report ? " once its own report is in (the ranges of the values it holds are not known yet)" : "");
        n->quarantine_until_ms = 0;
        mq_wait_clear(n);
        s->c.range_quarantines_lifted++;
    }
    fx_hmap_destroy(by_id);
    fx_hmap_destroy(named_to);
}

FX_INTERNAL bool fx_mq_grant_refused(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, master_node_t *n)
{
    uint64_t now = fx_now_ms();
    if (!mkv_quarantined(n, now)) return false;
    s->c.range_quarantine_grants_refused++;
    if (n->q_report && now >= n->quarantine_until_ms) {
        mkv_fail(s, p, h, FLUXON_ERR_BUSY,
                 "grant: the grant-only part of the segment of %s (its first %llu bytes) is full, and the rest waits "
                 "for its re-publication to this new master to end (ranges of values it holds, placed by the earlier "
                 "master, are not known here yet); its grants serve meanwhile", n->node_id,
                 (unsigned long long)n->lo_end);
        return true;
    }
    char why[96];
    if (n->q_wait_unknown)
        snprintf(why, sizeof why, "the owners to await are not known, so it ends by its bound");
    else
        snprintf(why, sizeof why, "it ends once the %u owner(s) still awaited are back with none unsettled", n->n_q_wait);
    mkv_fail(s, p, h, FLUXON_ERR_BUSY,
             "grant: the grant-only part of the segment of %s (its first %llu bytes) is full, and the rest is in "
             "range quarantine for %llu ms more at most (range_quarantine_ms %u: pushes the previous master started "
             "may still land in ranges this master thinks free; %s); its grants serve meanwhile",
             n->node_id, (unsigned long long)n->lo_end, (unsigned long long)(n->quarantine_until_ms - now),
             fx_mkv_quarantine_ms(s->m), why);
    return true;
}
