/* owner_evict_int.h — the state the files of the owner's eviction share (evict.c: the hot
 * tier and eviction rounds; evict_wb.c: write-back ahead of eviction; evict_send.c: the
 * EVICT messages to the master). Internal to them; others use owner_evict.h. Reactor thread
 * only. */
#ifndef FX_OWNER_EVICT_INT_H
#define FX_OWNER_EVICT_INT_H

#include "disk.h"
#include "freq_sketch.h"
#include "owner_evict.h"
#include "owner_tenant.h"

/* owner_entry_t.ev_cause: decided at selection, counted when the master confirmed (issue 38) */
enum { OEV_CAUSE_NONE = 0, OEV_CAUSE_COPIED, OEV_CAUSE_COPYING, OEV_CAUSE_FAILED, OEV_CAUSE_BEHIND,
       OEV_CAUSE_NOT_ADMITTED };

/* issue 42 quotas (evict_quota.c), per tenant (tenant.c's index). A tenant with a quota or a
 * guarantee ("managed") keeps its COMMITTED unpinned values in a policy of its own (pol),
 * the others share `hot`: a victim is chosen tenant first, then that tenant's coldest. */
enum { OEV_Q_NONE = 0, OEV_Q_QUOTA = 1, OEV_Q_PRESSURE = 2 };
typedef struct oev_tq {
    fx_evp_t pol;
    uint64_t *ghost;            /* pol's ghost (s3fifo): as many keys as its quota holds values */
    uint32_t ghost_n;
    bool managed;
    uint64_t quota, guaranteed; /* slot bytes of this owner's hot tier; 0: none */
    uint64_t charged;           /* slot bytes of its put_starts whose plans live (admission) */
    uint64_t selected;          /* slot bytes of its victims whose EVICT is not settled */
    uint64_t refused, ev_quota, ev_pressure;
} oev_tq_t;

typedef struct oev {
    fx_owner_t *o;
    fx_evp_t hot;          /* COMMITTED values, weighted by slot_size (eviction_policy) */
    uint64_t *ghost;       /* the policy's ghost keys */
    fx_freq_sketch_t seen; /* issue 38: how often each key was put or hit (writeback_admission) */
    size_t seen_bytes;     /* its counters' mapping (oev_sketch_map) */
    uint64_t hot_capacity; /* bytes; the watermark, never the configured capacity (S5) */
    uint64_t stuck_since_ms; /* claims wait and nothing is evictable (held) since; 0: not stuck */
    struct oev_cohort *cohorts; /* EVICT batches waiting for the master */
    fx_timer_t kick_timer, tick_timer;
    bool in_step, closing;
    uint64_t round;
    uint32_t backoff_ms;
    uint64_t evictions, evicted_bytes, n_cohorts, busy_retries, restored, selected_bytes, debt, stale, left_hot,
        resends, grants_retired, no_space_fast, dropped_behind, dropped_copying, dropped_failed,
        not_admitted, wb_waits, evict_copied, rounds, walked, wb_stuck_rounds;
    uint64_t to_disk, disk_not_admitted; /* issue 39: replicas moved to the disk tier; victims it did not admit */
    uint64_t n_staging, stage_slices;    /* issue 39: cohorts whose disk copies are being made; pump turns that made some */
    uint64_t tick_at_ms;     /* when the armed tick_timer fires */
    /* the write-back look-ahead's cursor (issue 38, P3): the warmest value it looked at in
     * this epoch; wb_seen_bytes: the bytes of the values looked at (wb_epoch) still in the
     * policy. A value that leaves or moves is unseen again (oev_moved); the cursor's own
     * move starts a new epoch (the walk restarts from the coldest). */
    owner_entry_t *wb_cursor;
    uint64_t wb_seen_bytes;
    uint32_t wb_epoch;
    struct oev_drain_cur *dc; /* issue 44 P4: where the drain of each retiring sub-grant is */
    size_t ndc, capdc;
    uint64_t stall_since_ms; /* writeback_max_stall_ms: claims first waited for a copy; 0: none wait */
    uint64_t no_space_log_ms;
    /* issue 42: pins.c's news (hooks) and the values it keeps off the policy */
    fx_oev_pin_hooks_t pin;
    uint64_t pinned_bytes, pinned_values;
    /* issue 42 quotas (evict_quota.c): tq[FX_TENANT_SNAP_MAX]; managed[0..n_managed): the
     * indices of the managed tenants */
    oev_tq_t *tq;
    uint8_t managed[FX_TENANT_SNAP_MAX];
    uint32_t n_managed;
    uint64_t q_refused, q_changes, q_ev_quota, q_ev_pressure, q_log_ms, q_pushed, q_push_refused;
} oev_t;

/* The drain of one retiring sub-grant (issue 44 P4): slots [0, next) were looked at. No
 * claim takes a slot of a retiring sub-grant, so one sweep takes all; a sweep that met a
 * pinned group or slots still being written starts over next round, and a restored value
 * restarts every sweep. */
typedef struct oev_drain_cur {
    uint64_t id, next;
    bool seen; /* still retiring this round */
} oev_drain_cur_t;

/* The atomic group a version was published in: its members while they live. */
typedef struct oev_group {
    uint32_t n, live, busy_tries;
    uint64_t round;
    owner_entry_t *m[];
} oev_group_t;

/* One EVICT message in flight: the identities it names. */
typedef struct oev_cohort {
    fx_owner_t *o;
    struct oev_cohort *prev, *next;
    size_t n;
    uint64_t bytes;
    uint64_t *offsets, *put_ms, *put_ver, *slot_sizes;
    uint64_t *disk; /* issue 39: the disk offset each replica moves to (0: dropped); NULL: none */
    bool *reused;   /* issue 39: disk[i] was on disk before (read back): not dropped when not moved */
    fx_disk_meta_t *adm; /* issue 39: each victim's record as admitted (group_size 0: not admitted) */
    size_t staged;       /* issue 39: victims whose disk copy was made (or skipped) so far */
    bool staging;        /* issue 39: copies still to make; the EVICT goes once they are made */
    bool held;           /* test fault (EVICT delay): the copies wait for the delay timer */
    char *kbuf;       /* the keys, back to back (kept: a delayed send outlives entries) */
    uint32_t *klens;
    fx_timer_t delay; /* test fault: EVICT held back; the retry of an uncertain one */
    bool uncertain;   /* sent once without a definite answer: never restored */
    uint32_t attempts;
} oev_cohort_t;

static inline owner_entry_t *fx_oev_entry_of(fx_evp_node_t *n) { return FX_CONTAINER_OF(n, owner_entry_t, lru); }

/* the policy's ghost key and the write-back sketch's: the store's hash of the key (made
 * once, at put_start; an FNV-1a walk of the key here cost ~60 ns a put) */
static inline uint64_t fx_oev_key_hash(const owner_entry_t *en) { return en->khash; }


/* ---- evict_quota.c: quotas and guaranteed shares (issue 42) ---- */
/* The policy en is (or goes) in: its tenant's when in_tq, else the shared one. */
static inline fx_evp_t *fx_oevq_pol(oev_t *kv, const owner_entry_t *en)
{
    return en->in_tq ? &kv->tq[en->tenant - 1].pol : &kv->hot;
}
FX_INTERNAL int fx_oevq_init(fx_owner_t *o); /* end of fx_oev_init: the config's quotas */
FX_INTERNAL void fx_oevq_fini(fx_owner_t *o);
/* Before en (not linked) enters a policy: its tenant (counted in its bytes once) and list. */
FX_INTERNAL void fx_oevq_place(fx_owner_t *o, owner_entry_t *en);
/* Values and bytes in every policy (the shared one and the tenants'). */
FX_INTERNAL uint64_t fx_oevq_bytes(const oev_t *kv);
FX_INTERNAL uint64_t fx_oevq_count(const oev_t *kv);
/* Bytes managed tenant k holds (with its puts in flight) above its quota, not yet chosen. */
FX_INTERNAL uint64_t fx_oevq_over_by(fx_owner_t *o, uint32_t k);
FX_INTERNAL bool fx_oevq_over(fx_owner_t *o);
/* Pressure's order: the policies to take victims from, the tenant holding most above its
 * guarantee first (the shared policy: its bytes). Returns how many (<= cap). */
FX_INTERNAL size_t fx_oevq_order(fx_owner_t *o, fx_evp_t **pols, size_t cap);
/* Whether the group of en (bytes of its evictable members) may go: always for the shared
 * policy's tenants and for own (tenant index + 1: its own quota), else only while its
 * tenant keeps at least its guarantee. */
FX_INTERNAL bool fx_oevq_may_take(fx_owner_t *o, const owner_entry_t *en, uint64_t bytes, uint32_t own);
/* en was chosen as a victim (cause OEV_Q_*); settled: evicted (counted by cause) or not. */
FX_INTERNAL void fx_oevq_chosen(fx_owner_t *o, owner_entry_t *en, int cause);
FX_INTERNAL void fx_oevq_settled(fx_owner_t *o, owner_entry_t *en, bool evicted);

/* ---- evict.c ---- */
/* The tick runs at the earlier of its armed deadline and ms from now. */
FX_INTERNAL void fx_oev_tick_arm(fx_owner_t *o, uint32_t ms);

/* ---- evict_wb.c: write-back ahead of eviction (issues 16, 38) ---- */
/* writeback_admission: whether en's group deserves a copy when it gets cold. */
FX_INTERNAL bool fx_oevw_admit(fx_owner_t *o, owner_entry_t *en);
/* Bytes of the look-ahead window: (1 - writeback_watermark) x the hot tier (0: off). */
FX_INTERNAL uint64_t fx_oevw_ahead_bytes(fx_owner_t *o);
/* en leaves the policy or moves in it: the look-ahead has not seen it where it is now. */
FX_INTERNAL void fx_oevw_moved(oev_t *kv, owner_entry_t *en);
/* Queues the write-back of the values entering the window since the last call. */
FX_INTERNAL void fx_oevw_lookahead(fx_owner_t *o);
/* en's group may go now (copied, not admitted, no copy possible); else its copy is queued. */
FX_INTERNAL bool fx_oevw_clean(fx_owner_t *o, owner_entry_t *en);

/* ---- evict_send.c: one EVICT message per round ---- */
/* Sends ONE EVICT for the victims v[0..n) (already hidden); their outcome retires them
 * (counted by how they went) or restores them. */
FX_INTERNAL void fx_oevs_send(fx_owner_t *o, owner_entry_t **v, size_t n);
FX_INTERNAL void fx_oevs_cohort_free(oev_cohort_t *c);
/* The reactor idle hook (added when a disk tier is on): makes the next OEV_STAGE_SLICE disk
 * copies of the oldest staging cohort, and sends its EVICT once all are made. True while
 * copies remain. */
FX_INTERNAL bool fx_oevs_stage_pump(void *arg);

#endif
