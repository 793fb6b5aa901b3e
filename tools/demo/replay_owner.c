/* replay_owner.c — the owners' side of the demo's latency: how long the requests on the
 * shared-memory rings waited for an owner's reactor to take them (ring_wait), next to how
 * long the owner took to answer (get_start, put_start), read from the owners' stats after
 * the run. A call's mean at the worker is about the wait, the answer, and the worker's own
 * wake-up: where the first dominates, the owner's thread was busy with other work (the disk
 * tier's copies, write-backs, the master's messages) or not on a CPU. */
#define _GNU_SOURCE
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

double rp_hist_quantile_us(const uint64_t *b, size_t nb, const cJSON *bounds, double q)
{
    uint64_t n = 0, c = 0;
    for (size_t k = 0; k < nb; k++) n += b[k];
    if (!n) return 0;
    for (size_t k = 0; k < nb; k++) {
        c += b[k];
        if ((double)c >= q * (double)n) {
            int last = cJSON_GetArraySize(bounds) - 1; /* the +Inf bucket reads as the last bound */
            const cJSON *e = cJSON_GetArrayItem(bounds, (int)k < last ? (int)k : last);
            return cJSON_IsNumber(e) ? e->valuedouble / 1e3 : 0;
        }
    }
    return 0;
}

void rp_hist_add(rp_hist_sum *s, const cJSON *doc, const cJSON *own, const char *name)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(own, name), *bk, *e;
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(h, "sum_ns"), *cnt = cJSON_GetObjectItemCaseSensitive(h, "count");
    s->sum_ns += cJSON_IsNumber(sum) && sum->valuedouble > 0 ? (uint64_t)sum->valuedouble : 0;
    s->n += cJSON_IsNumber(cnt) && cnt->valuedouble > 0 ? (uint64_t)cnt->valuedouble : 0;
    size_t nb = 0;
    if ((bk = cJSON_GetObjectItemCaseSensitive(h, "buckets")))
        cJSON_ArrayForEach(e, bk) if (nb < RP_HIST_NB) s->b[nb++] += cJSON_IsNumber(e) ? (uint64_t)e->valuedouble : 0;
    if (nb > s->nb) s->nb = nb;
    const cJSON *hb = cJSON_GetObjectItemCaseSensitive(own, "hist_bounds_ns");
    if (!hb) hb = cJSON_GetObjectItemCaseSensitive(doc, "hist_bounds_ns");
    if (hb && !s->bounds) s->bounds = cJSON_Duplicate(hb, 1);
}

void rp_owner_side_collect(rp_run *r)
{
    rp_hist_sum wait = {0}, gs = {0}, ps = {0};
    for (unsigned k = 0; k < r->n_owners; k++) {
        fluxon_client *c = rp_owner_client(r, k);
        cJSON *doc = c ? rp_client_stats(c) : NULL;
        if (!doc) continue;
        const cJSON *own = cJSON_GetObjectItemCaseSensitive(doc, "owner");
        rp_hist_add(&wait, doc, own, "ring_wait");
        rp_hist_add(&gs, doc, own, "get_start_latency");
        rp_hist_add(&ps, doc, own, "put_start_latency");
        cJSON_Delete(doc);
    }
    r->owner_ring_requests = wait.n;
    r->owner_ring_wait_us = wait.n ? (double)wait.sum_ns / (double)wait.n / 1e3 : 0.0;
    r->owner_ring_wait_p50_us = rp_hist_quantile_us(wait.b, wait.nb, wait.bounds, 0.5);
    r->owner_ring_wait_p99_us = rp_hist_quantile_us(wait.b, wait.nb, wait.bounds, 0.99);
    r->owner_get_start_us = gs.n ? (double)gs.sum_ns / (double)gs.n / 1e3 : 0.0;
    r->owner_put_start_us = ps.n ? (double)ps.sum_ns / (double)ps.n / 1e3 : 0.0;
    cJSON_Delete(wait.bounds);
    cJSON_Delete(gs.bounds);
    cJSON_Delete(ps.bounds);
}

void rp_owner_side_print(const rp_run *r)
{
    if (!r->owner_ring_requests) return; /* no ring (FLUXON_RING off) or no stats */
    printf("owner side        %llu ring requests waited %.1f us on average for their owner's reactor to take "
           "them (median <= %.0f us, p99 <= %.0f us); the owner then answered get_start in %.1f us, put_start "
           "in %.1f us on average\n",
           (unsigned long long)r->owner_ring_requests, r->owner_ring_wait_us, r->owner_ring_wait_p50_us,
           r->owner_ring_wait_p99_us, r->owner_get_start_us, r->owner_put_start_us);
}
