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
/* the committed members of one atomic group of a published plan (n >= 2) */
FX_INTERNAL void fx_oev_group_commit(fx_owner_t *o, owner_entry_t **members, size_t n);
/* the last atomic group of a put batch of two groups or more (a chain's tail,
 * prefix-aware): admitted as the first victims (not for lru) */
FX_INTERNAL void fx_oev_batch_tail(fx_owner_t *o, owner_entry_t **members, size_t n);
/* something changed that may let eviction or a waiting claim progress */
FX_INTERNAL void fx_oev_kick(fx_owner_t *o);
FX_INTERNAL void fx_oev_metrics(fx_owner_t *o, fx_ometrics_t *m);
/* the hot tier's watermark in bytes */
FX_INTERNAL uint64_t fx_oev_hot_capacity(fx_owner_t *o);
/* How many values the atomic group en was published in had (1: alone). */
FX_INTERNAL uint32_t fx_oev_group_size(const owner_entry_t *en);

#endif
