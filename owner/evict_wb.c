/* evict_wb.c — write-back ahead of eviction (issues 16, 38; owner_evict_int.h): which cold
 * values deserve a copy on a replica target (writeback_admission), the look-ahead that
 * queues their copies before eviction needs their room (a cursor: a round costs what
 * entered the window since), and whether a victim may go now. replica.c makes the copies;
 * evict.c takes the victims. Reactor thread only. */
#include "owner_evict_int.h"
#include "owner_replica.h"

/* writeback_admission (issue 38): whether en's group deserves a copy when it gets cold —
 * every group, or (second_touch) a group one of whose keys was seen twice: hit while hot,
 * or put again after an eviction (the reuse a CPU owner's copy would have served). */
FX_INTERNAL bool fx_oevw_admit(fx_owner_t *o, owner_entry_t *en)
{
    if (o->cfg.writeback_admission != FX_WB_ADMIT_SECOND_TOUCH) return true;
    if (en->wb_rejected) return false; /* the members are read once per group until a hit */
    bool admit = false;
    if (!en->group) admit = en->seen_twice;
    for (uint32_t i = 0; en->group && i < en->group->n && !admit; i++)
        admit = en->group->m[i] && en->group->m[i]->seen_twice;
    en->wb_rejected = !admit;
    return admit;
}

/* second_touch's sketch line of a key about to be admitted (owner_evict.h) */
FX_INTERNAL void fx_oev_prefetch_seen(fx_owner_t *o, uint64_t khash)
{
    if (o->ev) fx_freq_sketch_prefetch(&o->ev->seen, khash);
}

/* Bytes of the next victims an eviction round writes back ahead: (1 - watermark) x the hot
 * capacity (0: write-back off). */
FX_INTERNAL uint64_t fx_oevw_ahead_bytes(fx_owner_t *o)
{
    double w = o->cfg.writeback_watermark;
    return w > 0 ? (uint64_t)((1.0 - w) * (double)o->ev->hot_capacity) : 0;
}

/* en's group, a coming victim: written back now if it has no copy (queue room allowing). */
static void oev_wb_ahead(fx_owner_t *o, owner_entry_t *en)
{
    owner_entry_t *one = en;
    if (fx_orepl_room(o) && fx_orepl_state(en) == OREPL_NONE && fx_oevw_admit(o, en))
        fx_orepl_writeback_group(o, en->group ? en->group->m : &one, en->group ? en->group->n : 1);
}


/* en leaves the policy or moves in it (evicted, retired, touched, put first in line): the
 * look-ahead has not seen it where it is now. */
FX_INTERNAL void fx_oevw_moved(oev_t *kv, owner_entry_t *en)
{
    if (en->wb_epoch && en->wb_epoch == kv->wb_epoch) {
        kv->wb_seen_bytes -= FX_MIN(kv->wb_seen_bytes, en->slot.slot_size);
        en->wb_epoch = 0;
    }
    if (en == kv->wb_cursor) {
        kv->wb_cursor = NULL;
        kv->wb_seen_bytes = 0;
        if (++kv->wb_epoch == 0) kv->wb_epoch = 1;
    }
}

/* Write-back ahead of eviction (issue 16; issue 38 P3): the values that eviction takes next,
 * (1 - writeback_watermark) x the hot tier of them, get their write-back queued (admitted
 * groups without a copy). The walk goes on from where the last one stopped (the cursor), in
 * about the order victims come, without touching the policy's order or state: a round costs
 * the values that entered the window since, not the window. */
FX_INTERNAL void fx_oevw_lookahead(fx_owner_t *o)
{
    oev_t *kv = o->ev;
    uint64_t ahead = fx_oevw_ahead_bytes(o);
    if (!ahead) return;
    fx_evp_node_t *n = kv->wb_cursor ? fx_evp_warmer(&kv->hot, &kv->wb_cursor->lru) : fx_evp_coldest(&kv->hot);
    for (uint32_t budget = 4096; n && budget && kv->wb_seen_bytes < ahead && fx_orepl_room(o); budget--) {
        fx_evp_node_t *next = fx_evp_warmer(&kv->hot, n); /* a hint only: the walk takes it again below */
        if (next) __builtin_prefetch(next);                /* its miss overlaps this entry's work */
        owner_entry_t *en = fx_oev_entry_of(n);
        if (en->wb_epoch != kv->wb_epoch) {
            en->wb_epoch = kv->wb_epoch;
            kv->wb_seen_bytes += en->slot.slot_size;
        }
        kv->wb_cursor = en;
        oev_wb_ahead(o, en);
        n = fx_evp_warmer(&kv->hot, n);
    }
}

/* The evictable members of en's group have a complete copy on a replica target (or no copy
 * can be made: failed, too large) — evicting them now loses nothing write-back could keep.
 * Members without a copy are queued for one (write-back on only). */
FX_INTERNAL bool fx_oevw_clean(fx_owner_t *o, owner_entry_t *en)
{
    if (o->cfg.writeback_watermark <= 0 || !fx_oevw_admit(o, en)) return true;
    owner_entry_t *one = en, *const *m = en->group ? en->group->m : &one;
    size_t mn = en->group ? en->group->n : 1;
    return !fx_orepl_writeback_group(o, m, mn);
}
