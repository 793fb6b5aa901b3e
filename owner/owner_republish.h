/* owner_republish.h — re-publishing what this owner holds to a master that does not know
 * it (republish.c, issue 17): after a registration with a new master generation (a
 * restart, a failover), the identities of every COMMITTED value go to the master in
 * REPUBLISH batches so that it rebuilds its routes; a copy the master answers STALE (a
 * newer version is routed) or refuses is dropped here. */
#ifndef FX_OWNER_REPUBLISH_H
#define FX_OWNER_REPUBLISH_H

#include "jsonbuf.h"
#include "owner_int.h"

FX_INTERNAL int fx_orepub_init(fx_owner_t *o);
FX_INTERNAL void fx_orepub_fini(fx_owner_t *o);
/* Registered with the master; master_changed: a new master generation. Starts (or
 * restarts) a re-publication when the master changed or an earlier one did not end; else,
 * when again (the same master after a lost connection), a verification: the same walk and
 * batches (REPUBLISH verify), nothing routed, every copy the master does not route
 * dropped (an INVALIDATE sent on the old connection may never have been read). */
FX_INTERNAL void fx_orepub_registered(fx_owner_t *o, bool master_changed, bool again);
/* The master connection went away: a re-publication under way resumes from the start at
 * the next registration. */
FX_INTERNAL void fx_orepub_lost(fx_owner_t *o);
/* L1: the master forgot this owner: the placed ranges it recorded are no longer its. */
FX_INTERNAL void fx_orepub_forget_all(fx_owner_t *o);
/* PLACED from the master: these placed values live in ranges of this segment (kept to
 * be re-published); FLUXON_OK when every one is recorded, else ERR_PROTOCOL (malformed)
 * or ERR_NOMEM (its answer to the master). INVALIDATE: the ranges it names are no longer
 * routed. */
FX_INTERNAL int fx_orepub_placed(fx_owner_t *o, const uint8_t *body, size_t len, fx_arena_t *arena);
FX_INTERNAL void fx_orepub_invalidate(fx_owner_t *o, const uint8_t *body, size_t len, fx_arena_t *arena);
/* Bytes of the values the master placed in ranges of this segment (the PLACED records, less
 * those invalidated since): room the owner's own grants cannot have (pins.c's budget). */
FX_INTERNAL uint64_t fx_orepub_placed_bytes(fx_owner_t *o);
FX_INTERNAL void fx_orepub_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
