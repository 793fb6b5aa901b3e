/* owner_put.h — the local-first put path (put.c): put_start / PUT_INLINE / put_commit /
 * put_abort from externals, publish (ONE PUT_DONE per plan) with the T1 retry. */
#ifndef FX_OWNER_PUT_H
#define FX_OWNER_PUT_H

#include "owner_plan.h"

FX_INTERNAL int fx_oput_init(fx_owner_t *o); /* registers place.c's callbacks */
FX_INTERNAL void fx_oput_fini(fx_owner_t *o);
FX_INTERNAL void fx_oput_start(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena);
FX_INTERNAL void fx_oput_inline(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena);
FX_INTERNAL void fx_oput_commit(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena);
FX_INTERNAL void fx_oput_abort(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena);
FX_INTERNAL void fx_oput_ext_closed(fx_owner_t *o, owner_ext_t *e); /* its uncommitted plans go */
FX_INTERNAL void fx_oput_master_ready(fx_owner_t *o);               /* retries uncertain publishes */
FX_INTERNAL void fx_oput_metrics(fx_owner_t *o, fx_ometrics_t *m);
/* put_check.c: validates a put_start request before anything is reserved; false: it was
 * answered with the error (INVALID_ARGUMENT naming the value, the limit and the field). */
FX_INTERNAL bool fx_oput_check(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h,
                               const fx_body_put_start_t *b);

#endif
