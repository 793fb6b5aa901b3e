/* owner_leader.h — where the master is, with standby masters (issue 17, leader.c): a
 * thread asks etcd for the leader of the masters' election (its advertised host:port and
 * its key's revision) every quarter of the lease TTL (50..1000 ms), and at once when
 * asked; a change is posted to the reactor. */
#ifndef FX_OWNER_LEADER_H
#define FX_OWNER_LEADER_H

#include "config.h"
#include "reactor.h"

typedef struct fx_oleader fx_oleader_t;

/* changed(arg) runs on the reactor after the leader changed (or went away). */
FX_INTERNAL int fx_oleader_start(fx_reactor_t *r, const fx_config_t *cfg, void (*changed)(void *arg), void *arg,
                                 fx_oleader_t **w_p);
/* The leader last seen: false when there is none (or etcd was not reached yet). Any thread. */
FX_INTERNAL bool fx_oleader_get(fx_oleader_t *w, char *host, size_t cap, uint16_t *port, int64_t *rev);
/* true once etcd answered a lookup (naming a leader or none): before, "no leader" means
 * only "not asked yet" */
FX_INTERNAL bool fx_oleader_answered(fx_oleader_t *w);
FX_INTERNAL void fx_oleader_refresh(fx_oleader_t *w); /* ask etcd now */
FX_INTERNAL void fx_oleader_stop(fx_oleader_t *w);    /* joins the thread; changes are no longer posted */
FX_INTERNAL void fx_oleader_free(fx_oleader_t *w);

#endif
