/* stats.c — the master's KV counters and gauges as JSON members (no braces), written with
 * the bounded JSON writer: output never passes the buffer and stays NUL-terminated. */
#include "mkv.h"

FX_INTERNAL size_t fx_master_kv_stats_json(fx_master_t *m, char *buf, size_t cap)
{
    mkv_t *s = m->kv;
    if (!buf || !cap) return 0;
    fx_jbuf_t j = fx_jbuf(buf, cap);
    if (!s) return 0;
    fx_jbuf_printf(&j, "\"routes\":%zu,\"replicas\":%llu,\"leases\":%zu,\"put_dedup_acks\":%llu,"
                   "\"put_dedup_bytes\":%llu", mkv_routes_count(s), (unsigned long long)s->replicas,
                   fx_lease_count(s->leases), (unsigned long long)s->dedup_acks, (unsigned long long)s->dedup_bytes);
#define MKV_JSON(name) fx_jbuf_printf(&j, ",\"" #name "\":%llu", (unsigned long long)s->c.name);
    MKV_COUNTERS(MKV_JSON)
#undef MKV_JSON
    fx_mplace_stats_json(s, &j);
    fx_mappend_stats_json(s, &j);
    return j.len;
}
