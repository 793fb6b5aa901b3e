/* owner_stats.h — the owner's stats document (stats.c): one JSON object composed from
 * every module's counters, then the slot pool per state and grant. */
#ifndef FX_OWNER_STATS_H
#define FX_OWNER_STATS_H

#include "owner_int.h"

/* Writes the document into buf[0..cap); returns its length, or 0 when it did not fit. */
FX_INTERNAL size_t fx_ostats_json(fx_owner_t *o, char *buf, size_t cap);

#endif
