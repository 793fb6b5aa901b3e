/* fetch_stats.c — what remote fetches report (owner_fetch.h, fx_ofetch_metrics): counters
 * kept by fetch.c and fetch_disk.c, copied into the owner's metrics. Reactor thread only. */
#include "owner_fetch.h"
#include "owner_fetch_int.h"

FX_INTERNAL void fx_ofetch_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    ofetch_t *s = o->fetch;
    m->lookup_batches = s->lookup_batches;
    m->lookups_skipped = s->lookups_skipped;
    m->transfers = s->transfers;
    m->transfer_keys = s->transfer_keys;
    m->transfer_bytes = s->transfer_bytes;
    m->remote_hits = s->remote_hits;
    m->prefetch_copies = s->prefetch_copies;
    m->prefetch_temp_skipped = s->prefetch_temp_skipped;
    m->prefetch_no_room = s->prefetch_no_room;
    m->cpu_hits = s->cpu_hits;
    m->get_done_stale = s->get_done_stale;
    m->get_relookups = s->relookups;
    m->temp_copies = s->temp_copies;
    m->reuse_hits = s->reuse_hits;
    m->self_copies = s->self_copies;
    m->disk_hits = s->disk_hits;
    m->disk_misses = s->disk_misses;
    m->disk_direct = s->disk_direct;
    m->disk_temp = s->disk_temp;
    m->wb_temp = s->wb_temp;
    m->wb_touched = s->wb_touched;
    m->wb_touch_lost = s->wb_touch_lost;
    m->get_done_resends = s->get_done_resends;
    m->get_done_readers_timed_out = s->get_done_readers_timed_out;
    m->disk_promoted_early = s->disk_promoted_early;
    m->read_before_get_done = s->read_before_get_done;
    m->wb_reads = s->wb_reads;
    m->wb_reads_late = s->wb_late;
    m->fetch_slots_held = s->held_slots;
    m->fetch_slots_held_total = s->held_total;
    m->fetch_slots_hold_overflow = s->hold_overflow;
    m->fetch_latency = s->fetch_latency;
    m->transfer_latency = s->transfer_latency;
}
