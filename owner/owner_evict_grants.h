/* owner_evict_grants.h — eviction's grant-level helpers (evict_grants.c): which entries a
 * round may take, the grant of another size to retire when a waiting size finds too few
 * victims of its own (issue 15), and the NO_SPACE report. Reactor thread only. */
#ifndef FX_OWNER_EVICT_GRANTS_H
#define FX_OWNER_EVICT_GRANTS_H

#include "owner_store.h"

/* COMMITTED, indexed, in the hot tier, not retired or being evicted */
FX_INTERNAL bool fx_oevg_evictable(const owner_entry_t *e);
/* Slots of slot_size the master grants with retiring sub-grants will give once empty. */
FX_INTERNAL uint64_t fx_oevg_retiring_slots(fx_owner_t *o, uint64_t slot_size);
/* Retires the sub-grants (of sizes not in sizes[0..nc)) of the master grant holding the
 * first segment offset of cold[0..ncold) (the coldest values of other sizes an eviction
 * round saw, O(grants) each) whose grant has any, else of the master grant whose values
 * are coldest (O(slots): only when the round saw none); returns whether any was retired. */
FX_INTERNAL bool fx_oevg_retire_one(fx_owner_t *o, const uint64_t *sizes, size_t nc, const uint64_t *cold,
                                    size_t ncold);
/* Logs why `count` slots for value_len get NO_SPACE (at most one line a second: *last_ms). */
FX_INTERNAL void fx_oevg_no_space_log(fx_owner_t *o, uint64_t value_len, size_t count, const char *why,
                                      uint64_t *last_ms);

#endif
