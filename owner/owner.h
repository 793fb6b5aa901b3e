/* owner.h — the owner role as the embedding layer (node/) sees it. An owner instance
 * lives on one reactor thread; all functions below run on that thread. */
#ifndef FX_OWNER_H
#define FX_OWNER_H

#include "hello.h"


typedef struct fx_owner fx_owner_t;
FX_INTERNAL int fx_owner_create(fx_reactor_t *r, const fx_config_t *cfg, fx_ready_fn ready,
                                void *ready_arg, fx_owner_t **o_p);
FX_INTERNAL void fx_owner_shutdown(fx_owner_t *o);
FX_INTERNAL void fx_owner_destroy(fx_owner_t *o);

#endif
