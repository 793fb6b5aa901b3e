/* owner_tenant.h — tenants (issue 42, tenant.c): the check of an external's tenant and
 * token at HELLO, and the namespace of its keys. A key K of tenant T travels inside the
 * cluster as FLUXON_TENANT_KEY_MARK "T/" K (e->tag); the "default" tenant's keys as they
 * are. Every request an external sends (socket or rings) passes fx_otenant_request before
 * the dispatch, so no handler below sees a client's own key bytes; LIST answers go back
 * through a relay that keeps the client's namespace only and strips the prefix. */
#ifndef FX_OWNER_TENANT_H
#define FX_OWNER_TENANT_H

#include "owner_int.h"
#include "jsonbuf.h"

/* One tenant's numbers for the stats JSON and /metrics (stats.c). */
typedef struct fx_tenant_snap {
    char name[FX_TENANT_NAME_MAX];
    uint64_t clients, auth_failures;
    /* issue 42, updated where the events happen by the modules above (fx_otenant_at):
     * slot bytes of its values held here (committed; pins.c), of them pinned, its pin
     * budget; its clients' get keys that hit and missed (get.c); its values evicted
     * (evict_send.c); pins refused for its budget (pins.c) */
    uint64_t bytes, pinned_bytes, pin_budget, hits, misses, evictions, pins_refused;
    /* quotas (evict_quota.c): its quota and guarantee on this owner (0: none), puts refused
     * for its quota, its values evicted for its own quota and for pressure */
    uint64_t quota_bytes, guaranteed_bytes, quota_refusals, evictions_quota, evictions_pressure;
    /* its bytes in the lower tiers here: values the master placed or copied into this
     * owner's segment for other owners (a CPU owner's whole tier; republish.c), and records
     * on this owner's disk tier (header block + value; disk.c) */
    uint64_t placed_bytes, disk_bytes;
    /* its disk quota here (tenants.NAME.disk_quota_bytes; 0: none), its records that left the
     * disk for its newer ones, and evicted values it kept off the disk (each larger than the
     * quota, or the records to drop not found) (disk.c) */
    uint64_t disk_quota_bytes, disk_quota_drops, disk_quota_refused;
} fx_tenant_snap_t;
#define FX_TENANT_SNAP_MAX (FX_TENANTS_MAX + 1) /* the configured ones, and "default" */

FX_INTERNAL int fx_otenant_init(fx_owner_t *o);
FX_INTERNAL void fx_otenant_fini(fx_owner_t *o);
/* HELLO of e (already past the cluster checks): FLUXON_OK and e's tenant set, or
 * FLUXON_ERR_AUTH and err naming the tenant (never a token). Counted either way. */
FX_INTERNAL int fx_otenant_hello(fx_owner_t *o, owner_ext_t *e, const fx_body_hello_t *b, char *err, size_t cap);
/* e goes (it had passed HELLO: counted as connected) */
FX_INTERNAL void fx_otenant_closed(fx_owner_t *o, owner_ext_t *e);
/* A refusal at HELLO before the tenant was looked at (cluster token, role): counted. */
FX_INTERNAL void fx_otenant_refused(fx_owner_t *o);
/* A request of e past HELLO: false when it was served or refused here (LIST: forwarded
 * with the relay; a key e may not use: answered INVALID_ARGUMENT); true when the caller
 * dispatches *h_p / *body_p (the keys carry e's prefix; maybe a new body in arena). */
FX_INTERNAL bool fx_otenant_request(fx_owner_t *o, owner_ext_t *e, fx_frame_header_t *h_p, const uint8_t **body_p,
                                    fx_arena_t *arena);
FX_INTERNAL void fx_otenant_metrics(fx_owner_t *o, fx_ometrics_t *m);
/* The tenant whose namespace the stored key is in: its index in the table (a key without
 * the mark: "default"), or -1 when this owner does not list it. O(tenants) on a tenant's
 * key, O(1) on a default key. */
FX_INTERNAL int fx_otenant_of_key(fx_owner_t *o, const char *key, uint32_t klen);
/* Tenant k's numbers (0 <= k < the table's count), for the modules above to update. */
FX_INTERNAL fx_tenant_snap_t *fx_otenant_at(fx_owner_t *o, int k);
FX_INTERNAL uint32_t fx_otenant_count(fx_owner_t *o);
/* The index of the tenant called name (-1: not listed); whether tenant k's clients prove a
 * token at HELLO (issue 42 quotas: only then may they change its quota themselves). */
FX_INTERNAL int fx_otenant_find(fx_owner_t *o, fx_str_t name);
FX_INTERNAL bool fx_otenant_has_token(fx_owner_t *o, int k);
/* Fills out[0..FX_TENANT_SNAP_MAX) with every tenant's numbers; returns how many. */
FX_INTERNAL uint32_t fx_otenant_snap(fx_owner_t *o, fx_tenant_snap_t *out);

#endif
