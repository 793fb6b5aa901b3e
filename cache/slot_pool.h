/* slot_pool.h — the owner's local reserve slot pool (ARCHITECTURE §6): master grants cut
 * into exact-fit slots of one size class each, the Free→Prepared→PendingLocalVisible→
 * Committed→Free life cycle with route_live + holder_refs (S2), and FIFO claim waiters. */
#ifndef FX_SLOT_POOL_H
#define FX_SLOT_POOL_H

#include "fx.h"

/* Pure, single-threaded data structure: the owner's reactor thread owns it; no locks, no
 * I/O besides log lines for timed-out claims, no clock reads (callers pass now_ms from a
 * monotonic clock; it must not go backwards between calls). Offsets are segment offsets
 * in bytes; sizes in bytes; times in milliseconds. */

#define FX_SLOT_PAGE 4096u                       /* slot granularity and minimum size */
#define FX_SLOT_POOL_DEFAULT_GRANT_BYTES (512ull << 20)
#define FX_SLOT_POOL_DEFAULT_SOFT_WAIT_MS 10u
#define FX_SLOT_POOL_DEFAULT_CLAIM_TIMEOUT_MS 30000u

typedef struct fx_slot_pool fx_slot_pool_t;

typedef struct fx_slot_pool_config {
    uint64_t grant_bytes;      /* size of every grant; multiple of 4096, >= 4096 */
    uint64_t soft_wait_ms;     /* a waiter older than this makes needs_grant fire */
    uint64_t claim_timeout_ms; /* hard bound of a waiting claim; must be > soft_wait_ms */
    uint64_t max_grants;       /* hard cap on installed grants (expected_grants); 0 = none */
} fx_slot_pool_config_t;

typedef enum fx_slot_state {
    FX_SLOT_FREE = 0,
    FX_SLOT_PREPARED = 1,  /* claimed by put_start or as a get target; writable */
    FX_SLOT_PENDING = 2,   /* PendingLocalVisible: readable on this owner only (V1) */
    FX_SLOT_COMMITTED = 3, /* master route published (V3) */
    FX_SLOT_NSTATES = 4
} fx_slot_state_t;

/* A claimed slot, passed by value. use_seq is unique per claim across the whole pool
 * (never reused, even if a grant id comes back), so a ref kept past the slot's release
 * is detected as FLUXON_ERR_STALE instead of touching the next user's slot. */
typedef struct fx_slot_ref {
    uint64_t grant_id;
    uint64_t offset;    /* segment offset of the slot = grant offset + index * slot_size */
    uint64_t slot_size;
    uint64_t use_seq;   /* > 0 for every valid ref; a zeroed ref is never valid */
    uint32_t index;     /* slot index inside its grant */
} fx_slot_ref_t;

typedef struct fx_slot_info {
    fx_slot_state_t state;
    bool route_live;
    bool aborted;        /* PENDING slot aborted while readers still pin it */
    uint32_t holder_refs;
} fx_slot_info_t;

typedef struct fx_slot_pool_stats {
    uint64_t grants, classes;
    uint64_t slots;                                  /* total slots in all grants */
    uint64_t free, prepared, pending, committed;     /* slots per state */
    uint64_t draining;    /* non-free, no longer live (route dead / aborted), only pinned */
    uint64_t holder_refs; /* sum over all slots */
    uint64_t granted_bytes;  /* sum of the grants' bytes */
    uint64_t slot_bytes;     /* usable: sum of slots * slot_size (tail fragments excluded) */
    uint64_t used_bytes;     /* non-free slots * slot_size */
    uint64_t waiters;        /* queued claims not yet served */
    uint64_t retiring_grants; /* fx_slot_pool_retire_grant */
    /* cumulative */
    uint64_t claims, frees, claim_no_space;
    uint64_t waits_queued, waits_served, waits_timed_out, waits_cancelled;
    uint64_t grants_added, grants_removed;
} fx_slot_pool_stats_t;

typedef struct fx_slot_grant_stats {
    uint64_t grant_id, offset, slot_size, slots;
    uint64_t free, prepared, pending, committed;
    bool retiring;
    uint64_t bytes; /* the grant's range */
} fx_slot_grant_stats_t;

/* Result of a waiting claim. status FLUXON_OK: *slot is PREPARED and now belongs to the
 * callee (it must advance or release it); slot points to a copy valid during the call.
 * FLUXON_ERR_TIMEOUT (claim_timeout_ms passed; slot NULL) or FLUXON_ERR_CANCELLED (pool
 * destroyed; slot NULL). The callback may call any fx_slot_pool_* function except
 * fx_slot_pool_destroy; during destroy it must call none. */
typedef void (*fx_slot_wait_cb)(void *arg, int status, const fx_slot_ref_t *slot);

/* ---- sizing (§6) ------------------------------------------------------------------ */

/* align_up(max(value_len, 4096), 4096): exact fit, never a power of two. 0 when
 * value_len is 0 or the rounding would overflow. */
FX_INTERNAL uint64_t fx_slot_size_for(uint64_t value_len);

/* floor(grant_bytes / slot_size); 0 when slot_size is 0 or larger than the grant. */
FX_INTERNAL uint64_t fx_slots_per_grant(uint64_t grant_bytes, uint64_t slot_size);

/* expected_grants = ceil(payload / (slots_per_grant * slot_size)): counts each grant's
 * tail fragment, unlike payload / grant_bytes. Writes *grants_p on success.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL, grant_bytes, value_len or payload
 * 0, or a slot that does not fit in one grant). */
FX_INTERNAL int fx_slot_pool_expected_grants(uint64_t grant_bytes, uint64_t value_len,
                                             uint64_t payload_capacity_bytes,
                                             uint64_t *grants_p);

/* ---- life of the pool ------------------------------------------------------------ */

/* Fills *cfg with the defaults (512 MiB grants, 10 ms soft wait, 30 s timeout, no cap). */
FX_INTERNAL void fx_slot_pool_config_init(fx_slot_pool_config_t *cfg);

/* Creates an empty pool (no grants). cfg is copied. *pool_p receives the pool; the caller
 * owns it (fx_slot_pool_destroy). Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL,
 * grant_bytes not a non-zero multiple of 4096 or over 16 TiB, claim_timeout_ms <=
 * soft_wait_ms); FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_slot_pool_create(const fx_slot_pool_config_t *cfg, fx_slot_pool_t **pool_p);

/* Fails every outstanding waiter with FLUXON_ERR_CANCELLED (callbacks must not call back
 * into the pool; functions called anyway return FLUXON_ERR_CANCELLED), then frees the
 * pool. Slots still in use are simply forgotten: the segment goes away with the owner.
 * NULL is a no-op. Must not be called from a wait callback. */
FX_INTERNAL void fx_slot_pool_destroy(fx_slot_pool_t *pool);

/* ---- grants ---------------------------------------------------------------------- */

/* Installs grant grant_id = [offset, offset + grant_bytes) for slots of slot_size; all
 * its slots start FREE and serve this class's waiters first (FIFO, callbacks run before
 * the return). Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (grant_id 0, offset or
 * slot_size not a multiple of 4096, slot_size 0 or > grant_bytes, range overflows or
 * overlaps an installed grant); FLUXON_ERR_KEY_EXISTS (grant_id already installed: a
 * replayed grant); FLUXON_ERR_NO_SPACE (max_grants reached); FLUXON_ERR_NOMEM;
 * FLUXON_ERR_CANCELLED (pool being destroyed). */
FX_INTERNAL int fx_slot_pool_add_grant(fx_slot_pool_t *pool, uint64_t grant_id,
                                       uint64_t offset, uint64_t slot_size);

/* The same for a grant of bytes (a multiple of 4096, at most grant_bytes, at least
 * slot_size): the owner carves its master grants into such sub-grants (issue 15). */
FX_INTERNAL int fx_slot_pool_add_grant_sized(fx_slot_pool_t *pool, uint64_t grant_id, uint64_t offset,
                                             uint64_t bytes, uint64_t slot_size);

/* Removes an idle grant (every slot FREE) so its range can go back to the master; refs
 * into it become FLUXON_ERR_STALE. Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND;
 * FLUXON_ERR_BUSY (some slot in use); FLUXON_ERR_INVALID_ARGUMENT; _CANCELLED. */
FX_INTERNAL int fx_slot_pool_remove_grant(fx_slot_pool_t *pool, uint64_t grant_id);

/* Retires a grant (retire true): its FREE slots leave the free list and slots that free
 * later stay off it, so it empties for re-carving into another class or a return to the
 * master (issue 15); retire false puts it back in service (its FREE slots serve waiters
 * and claims again). Idempotent. Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND;
 * FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_CANCELLED. */
FX_INTERNAL int fx_slot_pool_retire_grant(fx_slot_pool_t *pool, uint64_t grant_id, bool retire);

/* ---- claims ---------------------------------------------------------------------- */

/* Takes the oldest FREE slot of class fx_slot_size_for(value_len) (O(1)); it is PREPARED
 * on return and *slot_p describes it. Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT
 * (NULL, value_len 0 or its slot larger than a grant); FLUXON_ERR_NO_SPACE (no free
 * slot of that class: request a grant or fx_slot_pool_wait); FLUXON_ERR_CANCELLED. */
FX_INTERNAL int fx_slot_pool_claim(fx_slot_pool_t *pool, uint64_t value_len,
                                   fx_slot_ref_t *slot_p);

/* Claim-or-wait. A free slot of the class is claimed at once: FLUXON_OK, *slot_p set, cb
 * never called. Otherwise the claim is queued behind earlier waiters of the class:
 * FLUXON_IN_PROGRESS, *wait_id_p (non-zero) set, and cb is called exactly once later
 * (unless cancelled) from inside another fx_slot_pool_* call: with a PREPARED slot when
 * one frees or a grant of the class arrives, or with FLUXON_ERR_TIMEOUT from
 * fx_slot_pool_expire once now >= queued_at + claim_timeout_ms. cb and arg are borrowed
 * until then. Returns also FLUXON_ERR_INVALID_ARGUMENT (NULL cb/pointers, bad value_len);
 * FLUXON_ERR_NOMEM; FLUXON_ERR_CANCELLED. */
FX_INTERNAL int fx_slot_pool_wait(fx_slot_pool_t *pool, uint64_t value_len, uint64_t now_ms,
                                  fx_slot_wait_cb cb, void *arg, fx_slot_ref_t *slot_p,
                                  uint64_t *wait_id_p);

/* Withdraws a waiter. FLUXON_OK: cb will never be called (a slot already assigned to it
 * but not yet delivered goes back to the pool). FLUXON_ERR_NOT_FOUND: unknown id, or its
 * callback already ran or is running. FLUXON_ERR_CANCELLED. */
FX_INTERNAL int fx_slot_pool_cancel_wait(fx_slot_pool_t *pool, uint64_t wait_id);

/* Fails waiters whose claim_timeout_ms has passed at now_ms with FLUXON_ERR_TIMEOUT (one
 * warning per expiry naming stage=claim and the class state). Returns how many expired. */
FX_INTERNAL uint64_t fx_slot_pool_expire(fx_slot_pool_t *pool, uint64_t now_ms);

/* Tells the caller whether to ask the master for a grant: some class has waiters queued
 * at least soft_wait_ms ago (and, by the pool's invariant, no free slot). The class with
 * the oldest such waiter wins; *slot_size_p receives its slot size (may be NULL).
 * Returns FLUXON_OK (request a grant of that class); FLUXON_ERR_NO_SPACE (starving, but
 * max_grants is reached: free slots instead — evict or write back, S5);
 * FLUXON_ERR_NOT_FOUND (nothing to do). The pool does not track requests in flight: the
 * caller keeps at most one outstanding grant request per class. */
FX_INTERNAL int fx_slot_pool_needs_grant(const fx_slot_pool_t *pool, uint64_t now_ms,
                                         uint64_t *slot_size_p);

/* When the caller's timer should next call expire / needs_grant: the earliest of the
 * oldest waiter's claim deadline (<= now_ms when expire is overdue) and the next
 * soft-wait mark after now_ms of a class's oldest waiter; UINT64_MAX when none waits. */
FX_INTERNAL uint64_t fx_slot_pool_next_deadline(const fx_slot_pool_t *pool, uint64_t now_ms);

/* ---- transitions ----------------------------------------------------------------- */
/* Every function below validates ref first and changes nothing on error:
 * FLUXON_ERR_INVALID_ARGUMENT (NULL, or a ref that matches no slot geometry: index out of
 * range, slot_size/offset mismatch, use_seq 0); FLUXON_ERR_STALE (grant gone, slot freed
 * or claimed again since the ref was made: double release lands here);
 * FLUXON_ERR_WRONG_HANDLE (slot in the wrong state for the call); FLUXON_ERR_CANCELLED.
 * A slot that becomes FREE serves the oldest waiter of its class before the return. */

/* PREPARED → PENDING: the value is written and readable on this owner (V1). */
FX_INTERNAL int fx_slot_pool_mark_pending(fx_slot_pool_t *pool, const fx_slot_ref_t *ref);

/* PENDING → COMMITTED with route_live = true: the master route was published (V3).
 * WRONG_HANDLE for a PENDING slot that was aborted. */
FX_INTERNAL int fx_slot_pool_mark_committed(fx_slot_pool_t *pool, const fx_slot_ref_t *ref);

/* route_live true → false on a COMMITTED slot (route deleted, replaced or evicted). The
 * slot frees at once if no holder pins it, else at the last holder_unref (S2). */
FX_INTERNAL int fx_slot_pool_route_dead(fx_slot_pool_t *pool, const fx_slot_ref_t *ref);

/* Abort of a value that was never published: PREPARED → FREE at once; PENDING → FREE at
 * once without holders, else it stops being pinnable and frees at the last unref (a
 * local reader that pinned it under V1 finishes its read on intact bytes). */
FX_INTERNAL int fx_slot_pool_release_prepared(fx_slot_pool_t *pool, const fx_slot_ref_t *ref);

/* Pins a readable slot: PENDING (not aborted) or COMMITTED with a live route.
 * WRONG_HANDLE for PREPARED or aborted; STALE for a COMMITTED slot whose route died (its
 * version is gone); INVALID_ARGUMENT when holder_refs would overflow. */
FX_INTERNAL int fx_slot_pool_holder_ref(fx_slot_pool_t *pool, const fx_slot_ref_t *ref);

/* Drops one pin; WRONG_HANDLE when holder_refs is 0. Frees the slot when this was the
 * last pin and the slot is no longer live (route dead, or aborted while PENDING). */
FX_INTERNAL int fx_slot_pool_holder_unref(fx_slot_pool_t *pool, const fx_slot_ref_t *ref);

/* Reads a slot's state into *info_p; same validation as the transitions. */
FX_INTERNAL int fx_slot_pool_inspect(const fx_slot_pool_t *pool, const fx_slot_ref_t *ref,
                                     fx_slot_info_t *info_p);

/* ---- observability --------------------------------------------------------------- */

/* Grants whose every slot is FREE (retiring ones included). O(1). */
FX_INTERNAL uint64_t fx_slot_pool_idle_grants(const fx_slot_pool_t *pool);
/* Grants installed for slot_size (0: none, or an unknown size). O(classes). */
FX_INTERNAL uint64_t fx_slot_pool_class_grants(const fx_slot_pool_t *pool, uint64_t slot_size);

FX_INTERNAL void fx_slot_pool_stats(const fx_slot_pool_t *pool, fx_slot_pool_stats_t *st);

/* Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND; FLUXON_ERR_INVALID_ARGUMENT. */
FX_INTERNAL int fx_slot_pool_grant_stats(const fx_slot_pool_t *pool, uint64_t grant_id,
                                         fx_slot_grant_stats_t *st);

/* Writes a JSON object (totals, cumulative counters, per class, per grant) into buf (cap
 * bytes, NUL-terminated on success). *len_p receives strlen of the document; when cap is
 * too small, returns FLUXON_ERR_INVALID_ARGUMENT with *len_p = the size needed (excluding
 * the NUL). Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT. */
FX_INTERNAL int fx_slot_pool_stats_json(const fx_slot_pool_t *pool, char *buf, size_t cap,
                                        size_t *len_p);

/* Full consistency walk, O(slots + waiters), for tests and debug builds: free lists vs
 * counters, no slot on a free list twice, per-state recount per grant and in total, no
 * class holding both free slots and waiters. Returns FLUXON_OK or FLUXON_ERR_INTERNAL
 * (the first broken invariant is logged). */
FX_INTERNAL int fx_slot_pool_check(fx_slot_pool_t *pool);

#endif /* FX_SLOT_POOL_H */
