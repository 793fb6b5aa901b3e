/* owner_get.h — hostless get_start on the owner (get.c): batches split per key into local
 * hits, joins of an in-flight get, and leaders (fetch.c); finalize; get handles. */
#ifndef FX_OWNER_GET_H
#define FX_OWNER_GET_H

#include "owner_store.h"

FX_INTERNAL int fx_oget_init(fx_owner_t *o); /* after fetch: registers its completion */
FX_INTERNAL void fx_oget_fini(fx_owner_t *o);
FX_INTERNAL void fx_oget_start(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena);
FX_INTERNAL void fx_oget_consume(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena);
/* EXISTS: the leading keys visible here, then the master for the rest */
/* PREFETCH (issue 39, one-way): reads back the keys this owner's disk holds and its memory
 * lacks, kept in memory for the get_start that follows. */
FX_INTERNAL void fx_oget_prefetch(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena);
FX_INTERNAL void fx_oget_exists(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena);
FX_INTERNAL void fx_oget_ext_closed(fx_owner_t *o, owner_ext_t *e); /* its handles release their pins */
FX_INTERNAL void fx_oget_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
