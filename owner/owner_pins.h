/* owner_pins.h — pins with a TTL (issue 42, pins.c): values this owner holds that its
 * eviction must not take before a deadline. A pinned value (its whole atomic group) is
 * kept off the hot tier's policy (evict.c) and in a deadline min-heap; when its pin ends
 * (expiry, unpin, TTL 0) it goes back into the policy as a value just admitted. Each
 * tenant's pinned slot bytes are bounded by its budget; the per-tenant numbers (bytes
 * held, pinned bytes) are kept here as values are committed and retired. Reactor thread
 * only. */
#ifndef FX_OWNER_PINS_H
#define FX_OWNER_PINS_H

#include "owner_store.h"

FX_INTERNAL int fx_opin_init(fx_owner_t *o);   /* after evict and tenant (put.c's init) */
FX_INTERNAL void fx_opin_fini(fx_owner_t *o);  /* before the store frees its entries */
/* The PIN request of e (its keys already in e's namespace: tenant.c): answers statuses. */
FX_INTERNAL void fx_opin_request(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena);
/* A put's values were just committed (put.c): key i (kst[i] FLUXON_OK) at slots[i] is pinned
 * with its atomic group for ttl_ms (refresh: a hit restarts it); a key whose pin was not
 * applied (over its tenant's budget, or not held here: placed on another owner) gets
 * kst[i] = FLUXON_PIN_REFUSED. Returns how many were refused. */
FX_INTERNAL size_t fx_opin_plan(fx_owner_t *o, const fx_slot_ref_t *slots, size_t n, uint32_t ttl_ms, bool refresh,
                                uint64_t *kst);
/* For an answer of status: with NO_SPACE while values are pinned, a note naming the pinned
 * bytes and the budget ("; ..."); else "". Valid until the next call on this thread. */
/* The owner's pin budget, all tenants together: pin_budget_ratio x the hot tier, or x the
 * room the values the master placed in this segment for other owners' puts leave its
 * grants when that is less (so that pins leave room for unpinned values in the grants it
 * can have: every slot pinned, a claim can only answer NO_SPACE). */
FX_INTERNAL uint64_t fx_opin_budget(fx_owner_t *o);
FX_INTERNAL const char *fx_opin_note(fx_owner_t *o, int status);
FX_INTERNAL void fx_opin_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
