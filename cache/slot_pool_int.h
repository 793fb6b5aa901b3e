/* slot_pool_int.h — the slot pool's private records, shared by slot_pool.c (claims,
 * grants, transitions) and slot_pool_stats.c (statistics, JSON, the invariant check).
 * Nothing outside those two files includes it. */
#ifndef FX_SLOT_POOL_INT_H
#define FX_SLOT_POOL_INT_H

#include "slot_pool.h"
#include "u64map.h"

typedef struct sp_grant sp_grant_t;
typedef struct sp_class sp_class_t;
typedef struct sp_waiter sp_waiter_t;

typedef struct sp_slot {
    struct sp_slot *fprev, *fnext; /* class free list, valid while on_free */
    sp_grant_t *grant;
    uint64_t use_seq;              /* pool-wide claim number of the current/last use */
    uint64_t check_mark;           /* duplicate detection in fx_slot_pool_check */
    uint32_t holder_refs, index;
    uint8_t state;
    bool route_live, on_free, aborted;
} sp_slot_t;

struct sp_grant {
    uint64_t id, offset, bytes, slot_size, nslots; /* bytes: cfg.grant_bytes, or less (sized) */
    uint64_t added_seq; /* refs with use_seq <= this predate the grant: stale, not forged */
    uint64_t n[FX_SLOT_NSTATES];
    bool retiring; /* fx_slot_pool_retire_grant: its FREE slots stay off the free list */
    sp_class_t *cls;
    sp_grant_t *prev, *next;
    sp_slot_t *slots;
};

struct sp_class {
    uint64_t slot_size, grants, nfree, nwait;
    sp_slot_t *free_head, *free_tail;
    sp_waiter_t *wait_head, *wait_tail;
};

enum { SP_W_QUEUED = 1, SP_W_DELIVERING = 2 };

struct sp_waiter {
    uint64_t id, queued_ms, deadline_ms;
    sp_class_t *cls;
    fx_slot_wait_cb cb;
    void *arg;
    sp_waiter_t *prev, *next;   /* class queue while QUEUED, delivery list while DELIVERING */
    sp_waiter_t *gprev, *gnext; /* pool-wide queue: queue order == deadline order */
    int where, status;
    sp_slot_t *slot;            /* assigned slot while DELIVERING with FLUXON_OK */
    fx_slot_ref_t ref;
};

struct fx_slot_pool {
    fx_slot_pool_config_t cfg;
    fx_u64map_t grants_by_id, waiters_by_id;
    sp_grant_t *grant_head, *grant_tail;
    sp_class_t **classes; /* few (one per value size in use): searched linearly */
    size_t nclasses, classes_cap;
    sp_waiter_t *gw_head, *gw_tail; /* queued waiters, oldest first */
    sp_waiter_t *dl_head, *dl_tail; /* waiters whose callback is due */
    uint64_t n[FX_SLOT_NSTATES];
    uint64_t granted_bytes;            /* sum of the grants' bytes */
    uint64_t retiring, retiring_free; /* retiring grants; their FREE slots (off the lists) */
    uint64_t idle_grants; /* grants whose every slot is FREE (O(1) for fx_slot_pool_idle_grants) */
    uint64_t ngrants, nslots, slot_bytes, used_bytes, holder_refs, draining, nwaiters;
    uint64_t next_use_seq, next_wait_id, last_now_ms, check_epoch;
    uint64_t claims, frees, claim_no_space, waits_queued, waits_served, waits_timed_out,
        waits_cancelled, grants_added, grants_removed;
    bool flushing, closing;
};

/* a used slot waiting for its last holder before it may be freed (S2) */
static inline bool sp_is_draining(const sp_slot_t *s)
{
    return (s->state == FX_SLOT_COMMITTED && !s->route_live) || (s->state == FX_SLOT_PENDING && s->aborted);
}

#endif
