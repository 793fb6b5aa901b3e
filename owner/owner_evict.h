/* owner_evict.h — the hot tier and capacity eviction (evict.c). Registers itself at init
 * as the store's hooks (retired, committed, unpinned) and the claims' capacity policy. */
#ifndef FX_OWNER_EVICT_H
#define FX_OWNER_EVICT_H

#include "owner_store.h"

FX_INTERNAL int fx_oev_init(fx_owner_t *o);      /* after store and claims */
FX_INTERNAL void fx_oev_shutdown(fx_owner_t *o); /* timers off, held-back cohorts freed */
FX_INTERNAL void fx_oev_fini(fx_owner_t *o);     /* after the store is gone */
/* a local hit (inline or joined) */
FX_INTERNAL void fx_oev_touch(fx_owner_t *o, owner_entry_t *en);
/* a value of key hash khash is about to be admitted or hit: its write-back sketch line
 * starts loading (no-op without second_touch admission) */
FX_INTERNAL void fx_oev_prefetch_seen(fx_owner_t *o, uint64_t khash);
/* the committed members of one atomic group of a published plan (n >= 2) */
FX_INTERNAL void fx_oev_group_commit(fx_owner_t *o, owner_entry_t **members, size_t n);
/* the last atomic group of a put batch of two groups or more (a chain's tail,
 * prefix-aware): admitted as the first victims (not for lru) */
FX_INTERNAL void fx_oev_batch_tail(fx_owner_t *o, owner_entry_t **members, size_t n);
/* sub-grant id starts retiring: its drain sweeps it from its first slot (evict_grants.c) */
FX_INTERNAL void fx_oev_drain_restart(fx_owner_t *o, uint64_t id);
/* something changed that may let eviction or a waiting claim progress */
FX_INTERNAL void fx_oev_kick(fx_owner_t *o);
FX_INTERNAL void fx_oev_metrics(fx_owner_t *o, fx_ometrics_t *m);
/* the hot tier's watermark in bytes */
FX_INTERNAL uint64_t fx_oev_hot_capacity(fx_owner_t *o);
/* How many values the atomic group en was published in had (1: alone). */
FX_INTERNAL uint32_t fx_oev_group_size(const owner_entry_t *en);
/* The members of en's atomic group (*one, holding en, when it has none), n_p of them; a
 * member that went is NULL. */
FX_INTERNAL owner_entry_t *const *fx_oev_group_members(owner_entry_t *const *one, const owner_entry_t *en, size_t *n_p);

/* Pins (issue 42, pins.c above): its news of the hot tier, registered at its init. Each
 * may be NULL. admitted: en became COMMITTED and entered the policy; forgotten: en goes
 * (retired, shutdown); touched: a local hit of en. */
typedef struct fx_oev_pin_hooks {
    void (*admitted)(fx_owner_t *o, owner_entry_t *en);
    void (*forgotten)(fx_owner_t *o, owner_entry_t *en);
    void (*touched)(fx_owner_t *o, owner_entry_t *en);
} fx_oev_pin_hooks_t;
FX_INTERNAL void fx_oev_set_pin_hooks(fx_owner_t *o, const fx_oev_pin_hooks_t *hooks);
/* en (COMMITTED, in the policy, not being evicted) leaves the policy while pinned: never a
 * victim, nor demoted. Returns false (nothing changed) when en is not in the policy. */
FX_INTERNAL bool fx_oev_pin_out(fx_owner_t *o, owner_entry_t *en);
/* en's pin ended: back into the policy as a value just admitted when readmit (unpin,
 * expiry), else only uncounted (en goes). */
FX_INTERNAL void fx_oev_pin_in(fx_owner_t *o, owner_entry_t *en, bool readmit);
/* The bytes and values kept off the policy by pins, and the owner's pin budget in bytes
 * (pin_budget_ratio x the hot tier). */
FX_INTERNAL void fx_oev_pinned(fx_owner_t *o, uint64_t *bytes_p, uint64_t *values_p, uint64_t *budget_p);

/* Quotas and guaranteed shares (issue 42, evict_quota.c). put_start of tenant (an index of
 * tenant.c's table) for bytes of slots: FLUXON_OK, or FLUXON_ERR_NO_SPACE and err naming the
 * tenant, its bytes, its quota and the config field (counted). */
FX_INTERNAL int fx_oevq_admit(fx_owner_t *o, int tenant, uint64_t bytes, char *err, size_t cap);
/* A plan's bytes charged to its tenant while it lives (put.c). */
FX_INTERNAL void fx_oevq_charge(fx_owner_t *o, int tenant, uint64_t bytes);
FX_INTERNAL void fx_oevq_release(fx_owner_t *o, int tenant, uint64_t bytes);
/* TENANT_SET of e (after tenant.c's filter). */
FX_INTERNAL void fx_oevq_request(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena);
/* TENANT_PUSH from the master: another owner's change, applied here within this owner's checks. */
FX_INTERNAL void fx_oevq_pushed(fx_owner_t *o, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena);
/* Appends to a NO_SPACE message what guarantees keep (the tenants at or under theirs). */
FX_INTERNAL void fx_oevq_note(fx_owner_t *o, char *buf, size_t cap);
FX_INTERNAL void fx_oevq_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
