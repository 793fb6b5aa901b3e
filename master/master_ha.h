/* master_ha.h — standby masters (issue 17, ha.c): with "ha" configured the master
 * campaigns for leadership through etcd's election API on its own thread, advertising its
 * listen address, and serves only while it leads and surely holds its etcd lease (a
 * local, monotonic deadline a margin short of the lease's TTL: fencing). Without "ha"
 * every function below says "serving". Reactor thread unless said otherwise. */
#ifndef FX_MASTER_HA_H
#define FX_MASTER_HA_H

#include "master_int.h"

typedef struct fx_mha_hooks {
    void (*elected)(fx_master_t *m);                  /* this master leads now */
    void (*deposed)(fx_master_t *m, const char *why); /* it no longer surely leads */
} fx_mha_hooks_t;

/* Starts the election thread when cfg.ha is set (m->port known). */
FX_INTERNAL int fx_mha_start(fx_master_t *m, const fx_mha_hooks_t *hooks);
/* Stops the thread (a leader revokes its lease: a standby takes over at once). */
FX_INTERNAL void fx_mha_stop(fx_master_t *m);
FX_INTERNAL void fx_mha_free(fx_master_t *m);
/* May this master accept requests now? (HA off: always.) Checks the lease deadline on
 * the monotonic clock, so a master resumed after its lease expired refuses at once. */
FX_INTERNAL bool fx_mha_serving(fx_master_t *m);
/* Why it does not serve (for the refusal's message). */
FX_INTERNAL const char *fx_mha_why_not(fx_master_t *m, char *buf, size_t cap);
FX_INTERNAL void fx_mha_metrics(fx_master_t *m, fx_mmetrics_t *mm);
/* Issue 42: the tenants' quota table (JSON, fx_mtenants_json; taken over) is stored in etcd
 * key <ha.key>.tenants by the election thread while this master leads (the latest of
 * several pending; a failure is retried). A new leader reads the key before it serves, and
 * the leader reads it once a second: a value other than the one it knows (an operator's
 * `etcdctl put`) is applied with fx_mtenants_load. HA off: json is freed, nothing kept. */
FX_INTERNAL void fx_mha_tenants_store(fx_master_t *m, char *json);
/* Put ids (W6): every id the previous leaders issued has put_ms <= the floor (read from
 * etcd at election); this leader issues none with put_ms above the ceiling it stored
 * (0: no limit, HA off or not leading). */
FX_INTERNAL uint64_t fx_mha_put_floor(fx_master_t *m);
FX_INTERNAL uint64_t fx_mha_put_ceiling(fx_master_t *m);

/* The clock put ids are taken from (ms): CLOCK_REALTIME, plus test.clock_offset_ms. */
static inline uint64_t fx_master_put_clock_ms(const fx_config_t *cfg)
{
    return (uint64_t)((int64_t)(fx_realtime_ns() / 1000000ull) + cfg->test_clock_offset_ms);
}

#endif
