/* owner_replica.h — replica tasks and write-backs from this owner (replica.c, issue 16):
 * one task per atomic group / TP cohort of COMMITTED values: APPEND_START to the master
 * (it picks ONE target among its replica_target_roles, allocates the ranges, records an
 * in-flight append) → ONE UCX PUT batch from this owner's slots → APPEND_DONE (the master
 * adds the target's replicas if the versions are still current). Every task's outcome is
 * counted once: completed, already (a target held it), failed by cause (no_space, busy,
 * stale, transfer, master, queue_full) or obsolete. A task never changes what this owner
 * holds: the local primary stays; a complete copy marks the members OREPL_COPIED so that
 * eviction can take them first (single-copy demotion). Sits above store, peers and the
 * master link; evict.c and put.c call it. Reactor thread only. */
#ifndef FX_OWNER_REPLICA_H
#define FX_OWNER_REPLICA_H

#include "owner_store.h"

/* owner_entry_t.repl (touched by replica.c only; others read it through fx_orepl_state) */
enum { OREPL_NONE = 0, OREPL_INFLIGHT = 1, OREPL_COPIED = 2, OREPL_FAILED = 3 /* no copy can be made now */ };

FX_INTERNAL int fx_orepl_init(fx_owner_t *o);
FX_INTERNAL void fx_orepl_fini(fx_owner_t *o); /* queued and in-flight tasks are forgotten */
/* Queues ONE task for the group members[0..n) (COMMITTED entries of this owner, one value
 * length): eager (a make_replica_task put) or a write-back. Members already copied or in
 * flight leave the task out. Returns true when queued; false when nothing was queued
 * (counted failed queue_full when the bounded queue is full). */
FX_INTERNAL bool fx_orepl_enqueue(fx_owner_t *o, owner_entry_t *const *members, size_t n, bool eager);
FX_INTERNAL int fx_orepl_state(const owner_entry_t *en);
/* Eviction's write-back of the group m[0..mn) (its members still evictable, at most 256):
 * queues one for the members without a copy; true when the group must wait for a copy
 * being made (queued now or already running), false when it may go now (copied, or no copy
 * can be made: failed before, queue full, too large). */
FX_INTERNAL bool fx_orepl_writeback_group(fx_owner_t *o, owner_entry_t *const *m, size_t mn);
/* a local hit: a copied value is hot again; when it gets cold its write-back finds the
 * target's copy ("already") or makes a new one */
FX_INTERNAL void fx_orepl_touched(owner_entry_t *en);
FX_INTERNAL void fx_orepl_kept(fx_owner_t *o, owner_entry_t *en); /* fetched from a target that keeps its copy */
FX_INTERNAL bool fx_orepl_room(fx_owner_t *o); /* the queue takes another task */
/* The queue is full and no task has ended for ms: the copies are not moving (a stopped or
 * dead target whose transfers wait for their timeout). */
FX_INTERNAL bool fx_orepl_stuck(fx_owner_t *o, uint64_t ms);
FX_INTERNAL bool fx_orepl_idle(fx_owner_t *o); /* nothing queued or in flight (R1) */
FX_INTERNAL void fx_orepl_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
