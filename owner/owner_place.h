/* owner_place.h — placed puts (place.c, ARCHITECTURE §7). A plan with FX_PUT_PLACE asks the
 * master for a target (PUT_PLACE) once its local staging slots are claimed; after commit
 * the values are pushed over UCX into the ranges the master allocated, then published with
 * the put_token. Any failure on the way (no master answer, push failed, token stale)
 * revokes the placement and publishes the local copy instead. place.c never calls put.c:
 * put registers the callbacks below. */
#ifndef FX_OWNER_PLACE_H
#define FX_OWNER_PLACE_H

#include "owner_plan.h"

typedef struct fx_oplace_ops {
    owner_plan_t *(*find)(fx_owner_t *o, uint64_t plan_id); /* a live plan by id, or NULL */
    void (*placed)(fx_owner_t *o, owner_plan_t *p); /* PUT_PLACE resolved: answer put_start */
    void (*pushed)(fx_owner_t *o, owner_plan_t *p); /* the push ended (or failed): publish */
} fx_oplace_ops_t;

FX_INTERNAL int fx_oplace_init(fx_owner_t *o, const fx_oplace_ops_t *ops);
FX_INTERNAL void fx_oplace_fini(fx_owner_t *o);
/* Takes over answering put_start (true) when the plan is placed and has accepted keys. */
FX_INTERNAL bool fx_oplace_start(fx_owner_t *o, owner_plan_t *p);
/* true when a push is running or was started (the publish resumes through ops.pushed). */
FX_INTERNAL bool fx_oplace_before_publish(fx_owner_t *o, owner_plan_t *p);
/* Drops the placement: one-way PUT_REVOKE to the master, the plan publishes locally. */
FX_INTERNAL void fx_oplace_revoke(fx_owner_t *o, owner_plan_t *p);
/* The master no longer knows the put_token (all STALE): publish the local copy. */
FX_INTERNAL void fx_oplace_stale(fx_owner_t *o, owner_plan_t *p);
/* Where key i is published: the target's range when pushed there, else the local slot. */
FX_INTERNAL uint64_t fx_oplace_offset(const owner_plan_t *p, size_t i);
FX_INTERNAL void fx_oplace_plan_free(owner_plan_t *p);
/* The master connection went away: placements made before are never pushed (a new
 * master does not know their ranges); their plans publish locally. */
FX_INTERNAL void fx_oplace_master_lost(fx_owner_t *o);
FX_INTERNAL void fx_oplace_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
