/* master.h — the master role as the embedding layer (node/) sees it. A master instance
 * lives on one reactor thread; all functions below run on that thread. */
#ifndef FX_MASTER_H
#define FX_MASTER_H

#include "hello.h"
#include "jsonbuf.h"

typedef struct fx_master fx_master_t;
FX_INTERNAL int fx_master_create(fx_reactor_t *r, const fx_config_t *cfg, fx_ready_fn ready,
                                 void *ready_arg, fx_master_t **m_p);
FX_INTERNAL void fx_master_shutdown(fx_master_t *m); /* close listeners and connections */
FX_INTERNAL void fx_master_destroy(fx_master_t *m);
FX_INTERNAL uint16_t fx_master_port(const fx_master_t *m);

/* Metrics (master_metrics.h): fx_master_snap (reactor thread) copies every number into s
 * (fx_master_snap_size bytes, caller's memory); fx_master_snap_prom (any thread) renders
 * n snapshots as Prometheus text, extra[k] labels snapshot k. */
typedef struct fx_master_snap fx_master_snap_t;
FX_INTERNAL size_t fx_master_snap_size(void);
FX_INTERNAL void fx_master_snap(fx_master_t *m, fx_master_snap_t *s);
FX_INTERNAL void fx_master_snap_prom(fx_jbuf_t *j, const fx_master_snap_t *const *s, const char *const *extra,
                                     size_t n);

#endif
