/* replay_tenants.c — `fluxon demo --tenants T` (issue 42): each tenant's requests, lookups
 * and prefix hits, next to what the same requests would hit alone in a cache of the tenant's
 * quota: the policy simulator (cli_simulate.c, the owner's eviction policy code) played over
 * the requests the tenant's workers got, in trace order. Printed in the summary and written
 * to summary.json's "tenants". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

/* Tenant k's sums over the requests its workers played, and with quotas the simulator's
 * figure for them at its quota (× the owners: each holds a quota of the tenant's values). */
static void rp_tenant_one(rp_run *r, unsigned k, size_t *idx)
{
    rp_tenant_res *t = &r->tenant[k];
    size_t n = 0;
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < r->n_req; i++) {
        const rp_reqrec *q = &r->recs[i];
        if (!q->done || q->tenant != k) continue;
        t->requests++;
        t->lookups += q->pages;
        t->hits += q->hits;
        idx[n++] = i;
    }
    t->sim_pages = r->o.quota_pages[k] * r->n_owners;
    if (!t->sim_pages || !n) return;
    fx_cli_psim_result res;
    if (fx_cli_psim_run_reqs(&r->trace, idx, n, t->sim_pages, r->o.eviction_policy, &res) != 0) {
        fprintf(stderr, "fluxon demo: tenant t%u: the simulator did not run (out of memory)\n", k);
        return;
    }
    t->sim_ok = 1;
    t->sim_hits = res.prefix_hits;
    t->sim_ratio = res.ratio;
}

void rp_tenants_tally(rp_run *r)
{
    size_t *idx = malloc((r->n_req ? r->n_req : 1) * sizeof *idx);
    for (unsigned k = 0; idx && k < r->o.tenants && k < RP_MAX_TENANTS; k++) rp_tenant_one(r, k, idx);
    if (!idx) fprintf(stderr, "fluxon demo: out of memory for the tenants' figures\n");
    free(idx);
}

static double rp_ratio(uint64_t hits, uint64_t lookups) { return lookups ? (double)hits / (double)lookups : 0; }

void rp_tenants_print(const rp_run *r)
{
    const rp_opts *o = &r->o;
    for (unsigned k = 0; k < o->tenants && k < RP_MAX_TENANTS; k++) {
        const rp_tenant_res *t = &r->tenant[k];
        double ratio = rp_ratio(t->hits, t->lookups);
        printf("tenant t%-9u %llu requests, prefix hits %llu of %llu lookups = %.2f %%", k,
               (unsigned long long)t->requests, (unsigned long long)t->hits, (unsigned long long)t->lookups,
               100 * ratio);
        if (!o->capacity_blocks) {
            printf(" (no quota: --capacity-blocks sizes the hot tier the quotas split)\n");
            continue;
        }
        printf(" (quota %llu of %llu pages per owner: tenants.t%u.quota_bytes)\n",
               (unsigned long long)o->quota_pages[k], (unsigned long long)o->capacity_blocks, k);
        if (t->sim_ok)
            printf("  alone at quota  %.2f %% prefix hits (simulator: its %llu requests alone, %s, %llu pages): "
                   "measured %+.2f pp\n", 100 * t->sim_ratio, (unsigned long long)t->requests, o->eviction_policy,
                   (unsigned long long)t->sim_pages, 100 * (ratio - t->sim_ratio));
    }
}

void rp_tenants_json(cJSON *j, const rp_run *r)
{
    cJSON *ta = r->o.tenants ? cJSON_AddArrayToObject(j, "tenants") : NULL;
    for (unsigned k = 0; ta && k < r->o.tenants && k < RP_MAX_TENANTS; k++) {
        const rp_tenant_res *t = &r->tenant[k];
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        char name[16];
        snprintf(name, sizeof name, "t%u", k);
        cJSON_AddStringToObject(e, "tenant", name);
        cJSON_AddNumberToObject(e, "requests", (double)t->requests);
        cJSON_AddNumberToObject(e, "lookups", (double)t->lookups);
        cJSON_AddNumberToObject(e, "prefix_hits", (double)t->hits);
        cJSON_AddNumberToObject(e, "prefix_hit_ratio", rp_ratio(t->hits, t->lookups));
        cJSON_AddNumberToObject(e, "quota_pages", (double)r->o.quota_pages[k]);
        if (r->o.n_tenant_pct) cJSON_AddNumberToObject(e, "quota_percent", r->o.tenant_pct[k]);
        if (t->sim_ok) { /* the simulator's figure for its requests alone at its quota */
            cJSON_AddNumberToObject(e, "simulated_pages", (double)t->sim_pages);
            cJSON_AddNumberToObject(e, "simulated_prefix_hits", (double)t->sim_hits);
            cJSON_AddNumberToObject(e, "simulated_prefix_hit_ratio", t->sim_ratio);
            cJSON_AddNumberToObject(e, "difference_pp", 100 * (rp_ratio(t->hits, t->lookups) - t->sim_ratio));
        }
        cJSON_AddItemToArray(ta, e);
    }
}
