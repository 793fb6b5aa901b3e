/* evict_stats.c — what the hot tier and its eviction report (owner_evict.h,
 * fx_oev_metrics): counters kept by evict.c, evict_send.c, evict_wb.c and the tenants'
 * policies (evict_quota.c), copied into the owner's metrics. Reactor thread only. */
#include "owner_evict_int.h"

FX_INTERNAL void fx_oev_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    oev_t *kv = o->ev;
    m->hot_bytes = fx_oevq_bytes(kv); /* issue 42: the shared policy and the tenants' */
    m->hot_values = fx_oevq_count(kv);
    m->hot_capacity_bytes = kv->hot_capacity;
    m->evictions = kv->evictions;
    m->evicted_bytes = kv->evicted_bytes;
    m->cohorts = kv->n_cohorts;
    m->busy_retries = kv->busy_retries;
    m->left_hot = kv->left_hot;
    m->restored = kv->restored;
    m->selected_bytes = kv->selected_bytes;
    m->eviction_debt = kv->debt;
    m->evict_stale = kv->stale;
    m->evict_resends = kv->resends;
    m->grants_retired = kv->grants_retired;
    m->claims_no_space_fast = kv->no_space_fast;
    m->evict_rounds = kv->rounds;
    m->evict_walked = kv->walked;
    m->evict_wb_stuck_rounds = kv->wb_stuck_rounds;
    m->eviction_policy_lru = kv->hot.kind == FX_EVICT_LRU;
    m->eviction_policy_s3fifo = kv->hot.kind == FX_EVICT_S3FIFO;
    m->eviction_policy_slru = kv->hot.kind == FX_EVICT_SLRU;
    m->policy_promotions = kv->hot.promotions;
    m->policy_ghost_hits = kv->hot.ghost_hits;
    m->evict_dropped_behind = kv->dropped_behind; /* issue 38 */
    m->evict_dropped_copying = kv->dropped_copying;
    m->evict_dropped_failed = kv->dropped_failed;
    m->evict_not_admitted = kv->not_admitted;
    m->evict_copied = kv->evict_copied;
    m->evict_to_disk = kv->to_disk;
    m->evict_disk_not_admitted = kv->disk_not_admitted;
    m->evict_disk_staging = kv->n_staging;
    m->evict_disk_stage_slices = kv->stage_slices;
    m->evict_writeback_waits = kv->wb_waits;
}
