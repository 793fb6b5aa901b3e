/* stats.c — the master's numbers: fills the KV rows of the catalog (master_metrics.h) and
 * renders a snapshot as the `master-stats` JSON document or as Prometheus text. The
 * renderers read only the snapshot, so /metrics renders off the reactor thread. */
#include "mkv.h"

static const fx_metric_desc_t mstats_rows[] = {
#define MSTATS_ROW(name, kind, family, labels, help) FX_METRIC_ROW(fx_mmetrics_t, name, kind, family, labels, help)
    FX_MASTER_METRICS(MSTATS_ROW)
#undef MSTATS_ROW
};

FX_INTERNAL void fx_master_kv_metrics(fx_master_t *m, fx_mmetrics_t *mm)
{
    mkv_t *s = m->kv;
    if (!s) return;
    mm->routes = mkv_routes_count(s);
    mm->replicas = s->replicas;
    mm->leases = fx_lease_count(s->leases);
    mm->put_dedup_acks = s->dedup_acks;
    mm->put_dedup_bytes = s->dedup_bytes;
    mm->prefix_index_keys = mkv_routes_index_keys(s);
    mm->delete_tombstones_held = mkv_tombs_count(s);
#define MSTATS_COPY(name, ...) mm->name = s->c.name;
    FX_MASTER_KV_COUNTERS(MSTATS_COPY)
#undef MSTATS_COPY
    fx_mplace_metrics(s, mm);
    fx_mappend_metrics(s, mm);
}

FX_INTERNAL size_t fx_master_snap_size(void) { return sizeof(fx_master_snap_t); }

FX_INTERNAL size_t fx_master_stats_json(const fx_master_snap_t *s, char *buf, size_t cap)
{
    fx_jbuf_t j = fx_jbuf(buf, cap);
    fx_jbuf_printf(&j, "{\"role\":\"master\"");
    fx_metrics_json(&j, mstats_rows, FX_ARRAY_LEN(mstats_rows), &s->m);
    fx_metrics_json_replies(&j, &s->replies, fx_msg_name);
    fx_jbuf_printf(&j, "}");
    return j.overflow ? 0 : j.len;
}

FX_INTERNAL void fx_master_snap_prom(fx_jbuf_t *j, const fx_master_snap_t *const *s, const char *const *extra,
                                     size_t n)
{
    const void *ms[8];
    const fx_reply_counts_t *rs[8];
    n = FX_MIN(n, FX_ARRAY_LEN(ms));
    for (size_t k = 0; k < n; k++) {
        ms[k] = &s[k]->m;
        rs[k] = &s[k]->replies;
    }
    fx_metrics_prom(j, mstats_rows, FX_ARRAY_LEN(mstats_rows), ms, extra, n);
    fx_metrics_prom_replies(j, "master", rs, fx_msg_name, extra, n);
}
