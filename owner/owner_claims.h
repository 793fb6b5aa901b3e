/* owner_claims.h — slot claims and the grants that feed the pool (claims.c). A claim the
 * pool cannot serve grows the pool by a GRANT from the master, or, at capacity, waits for
 * eviction through the capacity policy evict.c registers. */
#ifndef FX_OWNER_CLAIMS_H
#define FX_OWNER_CLAIMS_H

#include "jsonbuf.h"
#include "owner_int.h"
#include "slot_pool.h"

/* Called once with slots[0..got) claimed (got < count: no space). May run before the
 * claim call returns. */
typedef void (*fx_oclaim_cb)(fx_owner_t *o, void *arg, size_t got);

typedef struct fx_oclaims_policy {
    /* a claim the pool cannot serve now may wait for eviction (capacity reached) */
    bool (*can_wait)(fx_owner_t *o, uint64_t value_len, size_t count);
    void (*kick)(fx_owner_t *o);                          /* claims wait: evict */
    void (*grant_added)(fx_owner_t *o, uint64_t slot_size); /* the pool grew by one grant */
    void (*idle)(fx_owner_t *o);                            /* the last waiting claim was answered */
} fx_oclaims_policy_t;

/* Grants this segment may hold (the expected-capacity cap when configured). */
FX_INTERNAL uint64_t fx_oclaims_max_grants(const fx_config_t *cfg, uint64_t segment_len);
FX_INTERNAL int fx_oclaims_init(fx_owner_t *o, uint64_t max_grants);
FX_INTERNAL void fx_oclaims_set_policy(fx_owner_t *o, const fx_oclaims_policy_t *policy);
/* Shutdown: queued claims complete short (their gets miss), then the state goes. */
FX_INTERNAL void fx_oclaims_fail_all(fx_owner_t *o);
FX_INTERNAL void fx_oclaims_fini(fx_owner_t *o);
FX_INTERNAL uint64_t fx_oclaims_max(fx_owner_t *o);
FX_INTERNAL bool fx_oclaims_waiting(fx_owner_t *o); /* claims are queued */
/* Claims count slots of value_len into slots; a claim still short at deadline_ms
 * (fx_now_ms clock) completes short. */
FX_INTERNAL void fx_oclaim(fx_owner_t *o, uint64_t value_len, size_t count, fx_slot_ref_t *slots,
                           uint64_t deadline_ms, fx_oclaim_cb cb, void *arg);
/* A claim for a hint (a PREFETCH nobody waits on yet): one slot of value_len into *slot,
 * as fx_oclaim, unless only eviction could serve it — no slot free now (nor carved from the
 * grants held) and the pool cannot grow (no grant in flight or to ask for): then false,
 * nothing queued and cb not called. Queued behind a grant, it ends short (cb with 0) if
 * the grant brings no room for it, and eviction never runs for it: a prefetch never makes a
 * put wait for eviction behind it (FIFO). True: cb runs (now, or once served or short). */
FX_INTERNAL bool fx_oclaim_unless_evicting(fx_owner_t *o, uint64_t value_len, fx_slot_ref_t *slot,
                                          uint64_t deadline_ms, fx_oclaim_cb cb, void *arg);
/* The deadline of a claim made for a caller that waits caller_timeout_ms (0: unknown):
 * claim_timeout_ms from now, but never past 9/10 of the caller's wait, so the answer
 * (NO_SPACE) reaches the caller before it gives up. */
FX_INTERNAL uint64_t fx_oclaim_deadline(fx_owner_t *o, uint32_t caller_timeout_ms);
/* The master refused a grant for lack of room in this segment less than a second ago
 * (ranges it placed here for other owners take room too): claims wait for eviction. */
FX_INTERNAL bool fx_oclaims_segment_full(fx_owner_t *o);
/* The master refused this owner's last GRANT (no room, or BUSY) and has granted none since. */
FX_INTERNAL bool fx_oclaims_grant_refused(fx_owner_t *o);
/* The master's reason for the last GRANT it refused for lack of room (what holds this
 * segment: the values it placed here for other owners' puts, this owner's grants); "" when
 * none was refused since the last grant came. */
FX_INTERNAL const char *fx_oclaims_refusal(fx_owner_t *o);
/* Serves queued claims again (slots may have freed); claims past claim_timeout_ms fail. */
FX_INTERNAL void fx_oclaims_pump(fx_owner_t *o);
/* Slots still missing per class over the queued claims: sizes[i], needs[i] for i < return. */
FX_INTERNAL size_t fx_oclaims_deficit(fx_owner_t *o, uint64_t *sizes, uint64_t *needs, size_t cap);
/* Bytes of the sub-grant a claim of slot_size gets carved (its chunks of a master grant). */
FX_INTERNAL uint64_t fx_oclaims_carve_bytes(fx_owner_t *o, uint64_t slot_size);
/* Slots of slot_size the master grants with retiring sub-grants will give once those are
 * empty: in each, its free chunks and its retiring sub-grants' chunks, carved as a claim
 * would carve them (a sub-grant that is not retiring stays where it is). */
FX_INTERNAL uint64_t fx_oclaims_retiring_slots(fx_owner_t *o, uint64_t slot_size);
/* master grants held */
FX_INTERNAL uint64_t fx_oclaims_count(fx_owner_t *o);
/* the slot pool's grants: sub-grants carved from the master grants (valid until the next
 * call into claims); _sub_grants: those of master grant i (as fx_oclaims_grants orders them) */
FX_INTERNAL void fx_oclaims_pool_grants(fx_owner_t *o, fx_u64v_t *ids);
FX_INTERNAL void fx_oclaims_sub_grants(fx_owner_t *o, size_t i, fx_u64v_t *ids);
/* every master grant held (REGISTER tells a new master) */
FX_INTERNAL void fx_oclaims_grants(fx_owner_t *o, fx_u64v_t *ids, fx_u64v_t *offsets);
/* The id of the grant (held, or being returned) that [off, off + len) of the segment
 * overlaps; -1 when none. */
FX_INTERNAL int64_t fx_oclaims_overlap(fx_owner_t *o, uint64_t off, uint64_t len);
FX_INTERNAL void fx_oclaims_master_ready(fx_owner_t *o); /* prewarm, ask for waiting claims */
FX_INTERNAL void fx_oclaims_master_lost(fx_owner_t *o);
FX_INTERNAL void fx_oclaims_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
