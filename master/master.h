/* master.h — the master role as the embedding layer (node/) sees it. A master instance
 * lives on one reactor thread; all functions below run on that thread. */
#ifndef FX_MASTER_H
#define FX_MASTER_H

#include "hello.h"

typedef struct fx_master fx_master_t;
FX_INTERNAL int fx_master_create(fx_reactor_t *r, const fx_config_t *cfg, fx_ready_fn ready,
                                 void *ready_arg, fx_master_t **m_p);
FX_INTERNAL void fx_master_shutdown(fx_master_t *m); /* close listeners and connections */
FX_INTERNAL void fx_master_destroy(fx_master_t *m);
FX_INTERNAL uint16_t fx_master_port(const fx_master_t *m);

#endif
