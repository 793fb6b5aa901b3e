/* owner_fetch_int.h — what fetch.c (LOOKUP, claims, UCX transfers, GET_DONE) and
 * fetch_disk.c (the transfers from this owner's own disk tier, issue 39) share. Internal to
 * them; others use owner_fetch.h. Reactor thread only. */
#ifndef FX_OWNER_FETCH_INT_H
#define FX_OWNER_FETCH_INT_H

#include "owner_fetch.h"
#include "ucx_dp.h"

typedef struct ofetch {
    fx_ofetch_done_fn done;
    struct ofetch_gd *waiting; /* GET_DONEs scheduled to be (re)sent */
    uint64_t lookup_batches, lookups_skipped, transfers, transfer_keys, transfer_bytes, remote_hits, get_done_stale,
        temp_copies, reuse_hits, self_copies, get_done_resends, relookups, disk_hits, disk_misses, disk_direct, disk_temp,
        get_done_readers_timed_out, disk_promoted_early, read_before_get_done;
    uint64_t prefetch_copies, prefetch_temp_skipped; /* issue 38: PREFETCH copies from other owners */
    uint64_t prefetch_no_room; /* PREFETCH keys not fetched: no slot without waiting for eviction (fx_oclaim_unless_evicting) */
    /* W4: slots of failed GETs that UCX has not retired (kept PREPARED until it does) */
    uint64_t held_slots, held_bytes, held_total, hold_overflow;
    fx_hist_t fetch_latency, transfer_latency;
    uint64_t cpu_hits; /* the remote hits whose source was a remote_cache owner (remote_hits: the others) */
    uint64_t wb_reads, wb_late; /* issue 38: reads by this owner's record of its write-backs; too late, asked again */
    uint64_t wb_temp, wb_touched, wb_touch_lost; /* of them, first reads served to their readers only; keys sent in TOUCH; not (no link, no memory) */
    struct otouch *touch; /* fetch_touch.c */
} ofetch_t;

/* ---- fetch_touch.c: TOUCH, the master told of first read-backs (issue 38) ---- */
typedef struct otouch otouch_t;
/* key (version put_ms/put_ver), read back from its recorded copy for its readers only: the
 * master is told within OTOUCH_FLUSH_MS, with the other keys queued meanwhile. */
FX_INTERNAL void fx_otouch_add(fx_owner_t *o, const char *key, uint32_t klen, uint64_t put_ms, uint64_t put_ver);
FX_INTERNAL void fx_otouch_fini(fx_owner_t *o);

/* A remote hit (hit: og's copy was a get's, from another owner's memory), by its source's kind */
static inline void ofetch_count_hit(ofetch_t *kv, const owner_oget_t *og, bool hit)
{
    if (hit && og->src_cpu) kv->cpu_hits++;
    else if (hit) kv->remote_hits++;
}

typedef struct ofetch_fetch { /* one LOOKUP batch and what follows it */
    fx_owner_t *o;
    size_t n;
    owner_oget_t **og;
    size_t claims_pending;
    /* copies of the lookup's source table (the arena dies with the callback) */
    size_t n_src;
    char (*src_ids)[FX_ID_MAX];
    uint64_t *src_gens, *src_bases;
    uint8_t **src_addr, **src_rkey;
    uint32_t *src_addr_len, *src_rkey_len;
    size_t xfers_pending;
    uint64_t deadline_ms; /* claims and transfers end by then (below the caller's wait) */
    uint64_t t0_ns;       /* the fetch started (fx_now_ns): its LOOKUP was sent */
    uint64_t early_ns;    /* a copy ended within reuse_ms (less 1 ms) of this is read before GET_DONE:
                           * t0_ns, or for a record's read (wbmap.c) fx_rpc_answered_ns */
    uint64_t master_gen;  /* the master the LOOKUP went to (issue 38: its reuse delay holds) */
} ofetch_batch_t;

typedef struct ofetch_xfer {
    bool inject_failure;
    size_t src; /* index into the fetch's source table */
    ofetch_batch_t *f;
    size_t n;
    owner_oget_t **og;
    fx_ucx_range_t *ranges;
    uint64_t t0_ns; /* the transfer started (fx_now_ns) */
    size_t disk_pending; /* issue 39: reads of this owner's disk still running */
    struct ofetch_dr *dr;
} ofetch_xfer_t;

/* One read of this owner's disk tier for a transfer (issue 39). */
typedef struct ofetch_dr {
    ofetch_xfer_t *x;
    size_t k;
} ofetch_dr_t;


/* ---- fetch.c ---- */
FX_INTERNAL void ofetch_batch_free(ofetch_batch_t *f);
/* The transfer x ended (status for all its keys; a key with disk_rc set is a miss). */
FX_INTERNAL void ofetch_on_xfer(void *arg, int status);
/* Claims a slot for every leader still in f (decided, f->claims_pending held at 1), then
 * transfers. */
FX_INTERNAL void ofetch_claim_all(ofetch_batch_t *f);

/* A finished copy waits for the master's word before anyone reads it: GET_DONE is
 * accepted only if the source replica still existed when the copy ended, hence for the
 * whole copy (D1). Meanwhile the per-key get stays registered, so joiners keep joining. */
typedef struct ofetch_getdone_ctx {
    fx_owner_t *o;
    size_t n;
    owner_oget_t **og;
    fx_slot_ref_t *slot; /* the copies' identities (looked up again when the answer comes) */
} ofetch_getdone_ctx_t;


/* ---- fetch_publish.c ---- */
FX_INTERNAL void ofetch_gd_ctx_free(ofetch_getdone_ctx_t *c);
/* One GET_DONE for the copies of c (n keys in keys[], cols: fetch.c's 7 columns of n), from
 * the source src_id of generation src_gen; the readers are answered by deadline_ms at the
 * latest (L3). Takes c, keys and cols. */
FX_INTERNAL void ofetch_publish(fx_owner_t *o, ofetch_getdone_ctx_t *c, fx_str_t *keys, uint64_t *cols, size_t n,
                                const char *src_id, uint64_t src_gen, uint64_t deadline_ms);
/* Shutdown: the GET_DONEs scheduled to be (re)sent are dropped. */
FX_INTERNAL void ofetch_publish_fini(fx_owner_t *o);
/* Durable fetches that made no copy: one-way GET_DONE (ABANDON); reads of this owner's own
 * disk made no LOOKUP and are skipped. */
FX_INTERNAL void ofetch_abandon(fx_owner_t *o, owner_oget_t *const *ogs, size_t n);

/* ---- fetch_disk.c ---- */
/* This owner's own replicas of x: a range of its segment (a placed value) is memcpy'd, a
 * disk replica is read. True when the transfer ends later (disk reads in flight). */
FX_INTERNAL bool ofetch_self_copy(fx_owner_t *o, ofetch_xfer_t *x, uint8_t *base);
/* The leaders whose key this owner's disk holds are read from it without a LOOKUP; the
 * others stay in ogs[0..return). */
FX_INTERNAL size_t ofetch_start_disk(fx_owner_t *o, owner_oget_t **ogs, size_t n, uint32_t caller_timeout_ms);

#endif
