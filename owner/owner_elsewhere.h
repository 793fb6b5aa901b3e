/* owner_elsewhere.h — what this owner knows of copies of its keys on other owners
 * (elsewhere.c, issue 38). Above the store and the master link; replica.c, place.c and
 * get.c call it. Reactor thread only. */
#ifndef FX_OWNER_ELSEWHERE_H
#define FX_OWNER_ELSEWHERE_H

#include "owner_int.h"

FX_INTERNAL int fx_oelse_init(fx_owner_t *o);
FX_INTERNAL void fx_oelse_fini(fx_owner_t *o);
/* A copy of the key with hash khash (fx_hmap_hash) is about to be made on another owner. */
FX_INTERNAL void fx_oelse_copied(fx_owner_t *o, uint64_t khash);
/* The master recorded this owner's copy of the key (APPEND_DONE answered OK for it). */
FX_INTERNAL void fx_oelse_recorded(fx_owner_t *o, uint64_t khash);
/* The master dropped this owner's copy of the key and told it (FORGET): until a copy of it
 * starts or is recorded again, a miss of it is held nowhere. */
FX_INTERNAL void fx_oelse_dropped(fx_owner_t *o, uint64_t khash);
/* The memory fx_oelse_recorded or fx_oelse_dropped of khash reads starts loading (a batch's
 * misses overlap). */
FX_INTERNAL void fx_oelse_prefetch(fx_owner_t *o, uint64_t khash);
/* The record of copies was cleared (another master, a lost link): every key fx_oelse_dropped
 * named may have a copy again. */
FX_INTERNAL void fx_oelse_dropped_clear(fx_owner_t *o);
/* Copies were made that the record cannot name (a placed or write-through put): from now on
 * every miss asks the master. why: for the log line (once). */
FX_INTERNAL void fx_oelse_off(fx_owner_t *o, const char *why);
/* true: a key with hash khash missing here is held nowhere (this owner never copied it, or
 * the master dropped its copy since, and every copy on a remote_cache owner is one it made:
 * fx_olink_copies_mine); false: ask the master. */
FX_INTERNAL bool fx_oelse_nowhere(fx_owner_t *o, uint64_t khash);
FX_INTERNAL void fx_oelse_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
