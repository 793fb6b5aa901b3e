/* stats.c — the owner's numbers: a snapshot of every catalog row (owner_metrics.h), filled
 * by each module's fx_o<module>_metrics on the reactor thread, and its two renderings: the
 * OWNER_STATS JSON document (identity, the rows, replies by op, then "slot_pool") and the
 * Prometheus text of /metrics, which reads only snapshots and so runs on any thread. */
#include "log.h"
#include "owner_claims.h"
#include "owner_evict.h"
#include "owner_ext.h"
#include "owner_fetch.h"
#include "owner_get.h"
#include "owner_link.h"
#include "owner_place.h"
#include "owner_prefault.h"
#include "owner_wbmap.h"
#include "owner_put.h"
#include "owner_replica.h"
#include "owner_republish.h"
#include "owner_disk.h"
#include "owner_elsewhere.h"
#include "owner_stats.h"
#include "owner_tenant.h"
#include "owner_pins.h"
#include "owner_peers.h"

struct fx_owner_snap {
    fx_ometrics_t m;
    fx_reply_counts_t replies;
    char node_id[FX_ID_MAX];
    const char *node_role;
    uint32_t n_tenants; /* issue 42: every tenant this owner knows, its clients and refusals */
    fx_tenant_snap_t tenants[FX_TENANT_SNAP_MAX];
};

static const fx_metric_desc_t ostats_rows[] = {
#define OSTATS_ROW(name, kind, family, labels, help) FX_METRIC_ROW(fx_ometrics_t, name, kind, family, labels, help)
    FX_OWNER_METRICS(OSTATS_ROW)
#undef OSTATS_ROW
};

FX_INTERNAL size_t fx_owner_snap_size(void) { return sizeof(fx_owner_snap_t); }
FX_INTERNAL const char *fx_owner_snap_node_id(const fx_owner_snap_t *s) { return s->node_id; }

FX_INTERNAL void fx_owner_snap(fx_owner_t *o, fx_owner_snap_t *s)
{
    memset(s, 0, sizeof *s);
    fx_strlcpy(s->node_id, o->cfg.node_id, sizeof s->node_id);
    s->node_role = fx_node_role_name(o->cfg.node_role);
    s->m.generation = o->generation;
    s->m.segment_bytes = fx_segment_len(o->seg);
    const fx_chaos_t *ch = fx_owner_chaos(o);
    if (ch) {
        s->m.chaos_dropped = ch->dropped;
        s->m.chaos_delayed = ch->delayed;
        s->m.chaos_duplicated = ch->duplicated;
    }
    s->m.value_oracle_failures = o->oracle_failures;
    void (*parts[])(fx_owner_t *, fx_ometrics_t *) = {fx_oext_metrics,   fx_olink_metrics, fx_ostore_metrics,
                                                      fx_oclaims_metrics, fx_oput_metrics,  fx_oplace_metrics,
                                                      fx_oget_metrics,    fx_ofetch_metrics, fx_oev_metrics,
                                                      fx_orepl_metrics,   fx_orepub_metrics, fx_oprefault_metrics,
                                                      fx_oelse_metrics,  fx_odisk_metrics, fx_otenant_metrics,
                                                      fx_opin_metrics,    fx_oevq_metrics,  fx_opeers_metrics,
                                                      fx_owbm_metrics};
    for (size_t i = 0; i < FX_ARRAY_LEN(parts); i++) parts[i](o, &s->m);
    s->replies = *fx_oext_replies(o);
    s->n_tenants = fx_otenant_snap(o, s->tenants);
}

/* per tenant (issue 42): configured names only, so the label's values are few and known */
static const struct {
    const char *fam, *type, *help;
    size_t off;
} ostats_tenant_rows[] = {
#define OSTATS_T(f, t, h, field) {f, t, h, offsetof(fx_tenant_snap_t, field)}
    OSTATS_T("owner_tenant_clients", "gauge", "External clients connected, per tenant", clients),
    OSTATS_T("owner_tenant_auth_failures_total", "counter",
             "Clients of a tenant refused at HELLO for a wrong or missing tenant_token", auth_failures),
    OSTATS_T("owner_tenant_bytes", "gauge", "Slot bytes of a tenant's values this owner holds (committed)", bytes),
    OSTATS_T("owner_tenant_placed_bytes", "gauge",
             "Bytes of a tenant's values other owners placed or copied into this owner's segment (a CPU owner's tier)",
             placed_bytes),
    OSTATS_T("owner_tenant_disk_bytes", "gauge", "Bytes of a tenant's records on this owner's disk tier (header + value)",
             disk_bytes),
    OSTATS_T("owner_tenant_disk_quota_bytes", "gauge",
             "Bytes of a tenant's records this owner's disk tier keeps at most (tenants.NAME.disk_quota_bytes; 0: none)",
             disk_quota_bytes),
    OSTATS_T("owner_tenant_disk_quota_drops_total", "counter",
             "A tenant's records that left the disk tier for its newer ones (its disk quota)", disk_quota_drops),
    OSTATS_T("owner_tenant_disk_quota_refused_total", "counter",
             "A tenant's evicted values kept off the disk tier by its disk quota", disk_quota_refused),
    OSTATS_T("owner_tenant_pinned_bytes", "gauge", "Slot bytes of a tenant's values pinned on this owner",
             pinned_bytes),
    OSTATS_T("owner_tenant_pin_budget_bytes", "gauge",
             "Most slot bytes a tenant may pin on this owner (tenants.NAME.pinned_bytes_max, capped)", pin_budget),
    OSTATS_T("owner_tenant_hits_total", "counter", "Get keys of a tenant's clients that hit (local or fetched)", hits),
    OSTATS_T("owner_tenant_misses_total", "counter", "Get keys of a tenant's clients that missed", misses),
    OSTATS_T("owner_tenant_evictions_total", "counter", "A tenant's values evicted from this owner's hot tier",
             evictions),
    OSTATS_T("owner_tenant_pins_refused_total", "counter", "Pins of a tenant refused for its pin budget",
             pins_refused),
    OSTATS_T("owner_tenant_quota_bytes", "gauge",
             "Most slot bytes of this owner's hot tier a tenant may hold (tenants.NAME.quota_bytes, tenant set; 0: none)",
             quota_bytes),
    OSTATS_T("owner_tenant_guaranteed_bytes", "gauge",
             "Slot bytes of a tenant other tenants' puts never evict (tenants.NAME.guaranteed_bytes; 0: none)",
             guaranteed_bytes),
    OSTATS_T("owner_tenant_quota_refusals_total", "counter", "Puts of a tenant refused NO_SPACE for its quota",
             quota_refusals),
    OSTATS_T("owner_tenant_evictions_quota_total", "counter", "A tenant's values evicted for its own quota",
             evictions_quota),
    OSTATS_T("owner_tenant_evictions_pressure_total", "counter",
             "A tenant's values evicted for pressure (claims waiting, the hot tier's watermark)", evictions_pressure),
#undef OSTATS_T
};

static uint64_t ostats_tenant_val(const fx_tenant_snap_t *t, size_t off)
{
    return *(const uint64_t *)((const char *)t + off);
}

static void ostats_prom_tenants(fx_jbuf_t *j, const fx_owner_snap_t *const *s, const char *const *extra, size_t n)
{
    for (size_t f = 0; f < FX_ARRAY_LEN(ostats_tenant_rows); f++) {
        fx_metrics_prom_head(j, ostats_tenant_rows[f].fam, ostats_tenant_rows[f].type, ostats_tenant_rows[f].help);
        for (size_t k = 0; k < n; k++)
            for (uint32_t i = 0; i < s[k]->n_tenants; i++) {
                const fx_tenant_snap_t *t = &s[k]->tenants[i];
                bool ex = extra[k] && extra[k][0];
                fx_jbuf_printf(j, "fluxon_%s{tenant=\"%s\"%s%s} %llu\n", ostats_tenant_rows[f].fam, t->name,
                               ex ? "," : "", ex ? extra[k] : "",
                               (unsigned long long)ostats_tenant_val(t, ostats_tenant_rows[f].off));
            }
    }
}

FX_INTERNAL void fx_owner_snap_prom(fx_jbuf_t *j, const fx_owner_snap_t *const *s, const char *const *extra,
                                    size_t n)
{
    const void *ms[64];
    const fx_reply_counts_t *rs[64];
    n = FX_MIN(n, FX_ARRAY_LEN(ms));
    for (size_t k = 0; k < n; k++) {
        ms[k] = &s[k]->m;
        rs[k] = &s[k]->replies;
    }
    fx_metrics_prom(j, ostats_rows, FX_ARRAY_LEN(ostats_rows), ms, extra, n);
    fx_metrics_prom_replies(j, "owner", rs, fx_msg_name, extra, n);
    ostats_prom_tenants(j, s, extra, n);
}

FX_INTERNAL size_t fx_ostats_json(fx_owner_t *o, char *buf, size_t cap)
{
    fx_owner_snap_t *s = fx_malloc(sizeof *s);
    if (!s) return 0;
    fx_owner_snap(o, s);
    fx_jbuf_t j = fx_jbuf(buf, cap);
    fx_jbuf_printf(&j, "{\"node_id\":");
    fx_jbuf_str(&j, s->node_id, strlen(s->node_id));
    fx_jbuf_printf(&j, ",\"node_role\":\"%s\"", s->node_role);
    fx_metrics_json(&j, ostats_rows, FX_ARRAY_LEN(ostats_rows), &s->m);
    fx_metrics_json_replies(&j, &s->replies, fx_msg_name);
    fx_jbuf_printf(&j, ",\"tenants\":{");
    static const char *const tnames[] = {"clients", "auth_failures", "bytes", "placed_bytes", "disk_bytes", "disk_quota_bytes",
                                         "disk_quota_drops", "disk_quota_refused", "pinned_bytes", "pin_budget",
                                         "hits", "misses", "evictions", "pins_refused", "quota_bytes",
                                         "guaranteed_bytes", "quota_refusals", "evictions_quota",
                                         "evictions_pressure"};
    _Static_assert(FX_ARRAY_LEN(tnames) == FX_ARRAY_LEN(ostats_tenant_rows), "a JSON name per tenant row");
    for (uint32_t i = 0; i < s->n_tenants; i++) {
        fx_jbuf_printf(&j, "%s\"%s\":{", i ? "," : "", s->tenants[i].name);
        for (size_t f = 0; f < FX_ARRAY_LEN(tnames); f++)
            fx_jbuf_printf(&j, "%s\"%s\":%llu", f ? "," : "", tnames[f],
                           (unsigned long long)ostats_tenant_val(&s->tenants[i], ostats_tenant_rows[f].off));
        fx_jbuf_printf(&j, "}");
    }
    fx_jbuf_printf(&j, "}");
    fx_jbuf_printf(&j, ",\"hist_bounds_ns\":[");
    for (size_t k = 0; k < FX_HIST_NB; k++)
        fx_jbuf_printf(&j, "%s%llu", k ? "," : "", (unsigned long long)fx_hist_bounds_ns[k]);
    fx_jbuf_printf(&j, "]");
    fx_free(s);
    /* the slot pool per state and grant, when it fits (a huge pool is left out) */
    static const char key[] = ",\"slot_pool\":";
    size_t pl = 0, kl = sizeof key - 1;
    if (!j.overflow && j.len + kl + 2 < cap &&
        fx_slot_pool_stats_json(fx_ostore_pool(o), buf + j.len + kl, cap - j.len - kl - 2, &pl) == FLUXON_OK) {
        memcpy(buf + j.len, key, kl);
        j.len += kl + pl;
    }
    fx_jbuf_printf(&j, "}");
    if (j.overflow) {
        FX_ERROR("owner stats do not fit in %zu bytes", cap);
        return 0;
    }
    return j.len;
}
