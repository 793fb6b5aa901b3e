/* owner_prefault.h — the segment's prefault thread (prefault.c). */
#ifndef FX_OWNER_PREFAULT_H
#define FX_OWNER_PREFAULT_H

#include "owner_int.h"
#include "owner_metrics.h"

/* Starts faulting the segment in on a thread of its own (not for a segment placed on a
 * NUMA node: fx_segment_create touched every page). Best effort: no thread, no prefault. */
FX_INTERNAL void fx_oprefault_start(fx_owner_t *o);
/* Stops the thread (it looks between every 64 MiB it maps, every 256 KiB it reads) and
 * joins it. No-op when none runs. */
FX_INTERNAL void fx_oprefault_stop(fx_owner_t *o);
/* segment_prefaulting: 1 while the thread runs (any thread). */
FX_INTERNAL void fx_oprefault_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
