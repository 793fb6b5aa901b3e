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
    t->requests = t->lookups = t->hits = 0;
    t->sim_ok = 0;
    for (size_t i = 0; i < r->n_req; i++) {
        const rp_reqrec *q = &r->recs[i];
        if (!q->done || q->tenant != k) continue;
        t->requests++;
        t->lookups += q->pages;
        t->hits += q->hits;
        idx[n++] = i;
    }
    t->sim_pages = r->o.quota_pages[k] * r->n_owners;
    if (!t->sim_pages) return;
    fx_cli_psim_result res = {0}; /* no request (another worker took them all): no hit either */
    if (n && fx_cli_psim_run_reqs(&r->trace, idx, n, t->sim_pages, r->o.eviction_policy, &res) != 0) {
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

/* The object named key, depth-first (the owner's "tenants" sits in its part of the doc). */
static const cJSON *rp_find_object(const cJSON *node, const char *key)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, node)
    {
        if (it->string && !strcmp(it->string, key) && cJSON_IsObject(it)) return it;
    }
    cJSON_ArrayForEach(it, node)
    {
        const cJSON *f = cJSON_IsObject(it) ? rp_find_object(it, key) : NULL;
        if (f) return f;
    }
    return NULL;
}

static uint64_t rp_u64(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

void rp_tenants_owner(rp_run *r, unsigned k, const cJSON *doc)
{
    const cJSON *ts = r->o.tenants ? rp_find_object(doc, "tenants") : NULL;
    for (unsigned i = 0; i < r->o.tenants && i < RP_MAX_TENANTS; i++) {
        rp_tenant_res *t = &r->tenant[i];
        if (k == 0) t->held_bytes = t->ev_quota = t->ev_pressure = t->owners_known = 0;
        char name[16];
        snprintf(name, sizeof name, "t%u", i);
        const cJSON *e = ts ? cJSON_GetObjectItemCaseSensitive(ts, name) : NULL;
        if (!cJSON_IsObject(e)) continue;
        t->held_bytes += rp_u64(e, "bytes");
        t->ev_quota += rp_u64(e, "evictions_quota");
        t->ev_pressure += rp_u64(e, "evictions_pressure");
        t->owners_known++;
    }
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
        uint64_t page = rp_slot_bytes(o->value_len) * o->tp; /* slots */
        if (t->owners_known)
            printf("  on the owners   holds %llu pages at the end (quota %llu); values evicted for its quota %llu, "
                   "for pressure %llu\n", (unsigned long long)(t->held_bytes / page),
                   (unsigned long long)(o->quota_pages[k] * t->owners_known), (unsigned long long)t->ev_quota,
                   (unsigned long long)t->ev_pressure);
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
        if (t->owners_known) { /* the owners' counters, summed */
            cJSON_AddNumberToObject(e, "held_bytes", (double)t->held_bytes);
            cJSON_AddNumberToObject(e, "evictions_quota", (double)t->ev_quota);
            cJSON_AddNumberToObject(e, "evictions_pressure", (double)t->ev_pressure);
        }
        cJSON_AddItemToArray(ta, e);
    }
}
