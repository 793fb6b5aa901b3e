/* claims_int.h — the claims' state (claims.c), shared with claims_return.c (idle grants
 * going back to the master, and the grants an owner holds or returns). Owner reactor only. */
#ifndef FX_OWNER_CLAIMS_INT_H
#define FX_OWNER_CLAIMS_INT_H

#include "owner_claims.h"
#include "owner_int.h"

typedef struct owner_claim {
    struct owner_claim *next;
    uint64_t value_len, deadline_ms;
    bool waited; /* counted once as waiting for eviction */
    bool hint;   /* fx_oclaim_unless_evicting's: ends short rather than wait for eviction */
    size_t count, got;
    fx_slot_ref_t *slots;
    fx_oclaim_cb cb;
    void *arg;
} owner_claim_t;

typedef struct oclaims {
    owner_claim_t *claims, *claims_tail; /* FIFO */
    fx_oclaims_policy_t policy;
    uint64_t max_grants;
    fx_owner_t *owner;
    bool grant_inflight, closing;
    uint64_t grant_nospace_ms; /* when the master last had no room for a grant (0: never/since grown) */
    uint64_t grant_overlaps;   /* grants refused: they overlapped one held (fx_oclaims_overlap) */
    uint64_t *grant_ids, *grant_offsets, *grant_idle_ms; /* master grants; idle_ms: idle since (0: in use) */
    uint32_t *grant_used, *grant_starts; /* per master grant: chunks carved, chunks a sub-grant starts at */
    size_t n_grants, cap_grants;
    unsigned chunks;      /* per master grant (1..OCL_CHUNKS) */
    uint64_t used_chunks; /* carved chunks over every master grant (issue 44 P2: O(1) "none free") */
    uint64_t chunk_bytes; /* grant_bytes / chunks */
    uint64_t *sub_buf;    /* fx_oclaims_pool_grants / _sub_grants answers */
    size_t sub_cap;
    fx_timer_t idle_timer, return_timer;
    fx_timer_t deadline_timer; /* the earliest queued claim's deadline: ends it even while a GRANT is in flight */
    uint64_t deadline_at_ms;   /* when deadline_timer fires */
    uint64_t *ret_ids, *ret_offs; /* returned grants the master has not confirmed */
    size_t n_ret, cap_ret;
    bool return_inflight;
    uint64_t grants_received, claim_waits, claim_timeouts, grants_returned, grants_recarved, claim_no_space;
    uint64_t claim_scans; /* walks over the grants for free chunks or an idle sub-grant (issue 44 P2) */
    char refusal[400];    /* the master's reason for the last GRANT refused NO_SPACE ("": none since a grant) */
} oclaims_t;

#define OCL_CHUNKS 16u  /* at most this many chunks per master grant */
#define OCL_SUB_SHIFT 5 /* sub-grant id = master id << 5 | first chunk */

/* claims.c */
FX_INTERNAL bool fx_ocl_uncarve(fx_owner_t *o, size_t i, unsigned at);
FX_INTERNAL void fx_ocl_grant_forget(oclaims_t *c, size_t i);
FX_INTERNAL uint64_t fx_ocl_sub_id(const oclaims_t *c, size_t i, unsigned chunk);
/* claims_return.c */
FX_INTERNAL void fx_ocl_return_send(fx_owner_t *o);
FX_INTERNAL void fx_ocl_idle_arm(fx_owner_t *o);

#endif
