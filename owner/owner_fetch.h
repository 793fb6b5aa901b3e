/* owner_fetch.h — remote fetches (fetch.c): the leaders of get batches go to the master as
 * ONE LOOKUP (G8), each found value gets a local slot (claims), is pulled over UCX (one
 * transfer batch per source owner) and is registered with the master as a replica
 * (GET_DONE) before anyone reads it (D1). Each key's outcome goes back through the
 * completion get.c registers. */
#ifndef FX_OWNER_FETCH_H
#define FX_OWNER_FETCH_H

#include "owner_store.h"

/* One in-flight get of one key on this owner (G6): get.c owns it and its waiters; fetch.c
 * fills the leader's fields. */
typedef struct owner_oget {
    char *key;
    uint32_t klen;
    uint64_t khash; /* fx_hmap_hash(key, klen): the maps it is looked up in share it */
    struct oget_waiter *w; /* get.c */
    size_t nw, capw;
    /* leader fetch (fetch.c) */
    uint64_t value_len, put_ms, put_ver, src_off;
    uint64_t src_seq; /* the source replica's number (LOOKUP), echoed in GET_DONE (W3) */
    uint64_t reuse_ms; /* issue 38 (LOOKUP): a copy ended within half of it is read before GET_DONE */
    uint32_t src;
    fx_slot_ref_t slot;
    bool have_slot, found;
    bool src_cpu; /* the LOOKUP named a remote_cache (CPU) owner as the source: counted as a cpu hit */
    bool src_kept; /* the LOOKUP said the source keeps its copy (FX_GET_SRC_KEPT): no write-back */
    uint8_t mode; /* FX_GET_DURABLE / FX_GET_TEMPORARY, as the master decided */
    bool prefetch; /* issue 39: led by a PREFETCH (no reader yet): a disk read-back is kept (durable) */
    bool own_disk; /* issue 39: read from this owner's disk without a LOOKUP: the master holds no
                    * in-flight record of it (nothing to ABANDON) */
    bool hint_claim; /* its slot claimed as a hint's (fx_oclaim_unless_evicting): may end short */
    bool wb_rec;   /* issue 38: read from a copy this owner wrote back, by its record (wbmap.c), no LOOKUP */
    bool wb_tried; /* ... tried once: a second fetch asks the master */
    uint8_t lookups;      /* LOOKUPs made for it: a copy superseded meanwhile looks again */
    uint64_t deadline_ms; /* its first fetch's: a second look ends by then too */
    int why;      /* a miss: why (0 = FLUXON_ERR_NOT_FOUND) */
    int disk_rc;  /* issue 39: the read of this owner's disk replica failed (a miss) */
} owner_oget_t;

/* og is over: en is the version to serve (NULL: a miss, og->why says why). */
typedef void (*fx_ofetch_done_fn)(fx_owner_t *o, owner_oget_t *og, owner_entry_t *en);

FX_INTERNAL int fx_ofetch_init(fx_owner_t *o, fx_ofetch_done_fn done);
FX_INTERNAL void fx_ofetch_fini(fx_owner_t *o);
/* Fetches the n leaders ogs[0..n) (takes the array); each completes through done. */
/* caller_timeout_ms: how long the batch's caller waits (0: unknown); the copies' claims
 * and transfers end below 9/10 of it, so a slow source owner costs the caller a miss
 * (TIMEOUT), not its own timeout. */
FX_INTERNAL void fx_ofetch_start(fx_owner_t *o, owner_oget_t **ogs, size_t n, uint32_t caller_timeout_ms);
FX_INTERNAL void fx_ofetch_metrics(fx_owner_t *o, fx_ometrics_t *m);
/* get.c settled a miss without asking the master (the owner is alone): counted as a
 * skipped lookup. */
FX_INTERNAL void fx_ofetch_lookup_skipped(fx_owner_t *o);

#endif
