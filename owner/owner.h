/* owner.h — the owner role as the embedding layer (node/) sees it. An owner instance
 * lives on one reactor thread; all functions below run on that thread. */
#ifndef FX_OWNER_H
#define FX_OWNER_H

#include "hello.h"
#include "jsonbuf.h"


typedef struct fx_owner fx_owner_t;
FX_INTERNAL int fx_owner_create(fx_reactor_t *r, const fx_config_t *cfg, fx_ready_fn ready,
                                void *ready_arg, fx_owner_t **o_p);
FX_INTERNAL void fx_owner_shutdown(fx_owner_t *o);
FX_INTERNAL void fx_owner_destroy(fx_owner_t *o);

/* Metrics (owner_metrics.h; stats.c): fx_owner_snap (reactor thread) copies every number
 * into s (fx_owner_snap_size bytes, caller's memory); fx_owner_snap_prom (any thread)
 * renders n snapshots as Prometheus text, extra[k] labels snapshot k. */
typedef struct fx_owner_snap fx_owner_snap_t;
FX_INTERNAL size_t fx_owner_snap_size(void);
FX_INTERNAL void fx_owner_snap(fx_owner_t *o, fx_owner_snap_t *s);
FX_INTERNAL const char *fx_owner_snap_node_id(const fx_owner_snap_t *s);
FX_INTERNAL void fx_owner_snap_prom(fx_jbuf_t *j, const fx_owner_snap_t *const *s, const char *const *extra,
                                    size_t n);

#endif
