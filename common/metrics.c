/* metrics.c — latency histograms and the catalog renderers (JSON members and Prometheus
 * text). Pure functions of a snapshot: they run on whatever thread holds the snapshot. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"

FX_INTERNAL void fx_hist_observe(fx_hist_t *h, uint64_t ns)
{
    size_t i = 0;
    while (i < FX_HIST_NB && ns > fx_hist_bounds_ns[i]) i++;
    h->b[i]++;
    h->count++;
    h->sum_ns += ns;
}

FX_INTERNAL double fx_hist_quantile_ns(const fx_hist_t *h, double q)
{
    if (!h->count) return 0;
    double rank = q * (double)h->count, cum = 0;
    for (size_t i = 0; i <= FX_HIST_NB; i++) {
        if (cum + (double)h->b[i] >= rank && h->b[i]) {
            if (i == FX_HIST_NB) return (double)fx_hist_bounds_ns[FX_HIST_NB - 1];
            double lo = i ? (double)fx_hist_bounds_ns[i - 1] : 0, hi = (double)fx_hist_bounds_ns[i];
            return lo + (hi - lo) * (rank - cum) / (double)h->b[i];
        }
        cum += (double)h->b[i];
    }
    return (double)fx_hist_bounds_ns[FX_HIST_NB - 1];
}

static uint64_t m_u64(const void *snap, size_t off)
{
    uint64_t v;
    memcpy(&v, (const char *)snap + off, sizeof v);
    return v;
}

FX_INTERNAL void fx_metrics_json(fx_jbuf_t *j, const fx_metric_desc_t *d, size_t n, const void *snap)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v = d[i].kind == FX_M_HIST ? 0 : m_u64(snap, d[i].off);
        if (d[i].kind == FX_M_BOOL) fx_jbuf_printf(j, ",\"%s\":%s", d[i].json, v ? "true" : "false");
        else if (d[i].kind == FX_M_SGAUGE) fx_jbuf_printf(j, ",\"%s\":%lld", d[i].json, (long long)v);
        if (d[i].kind == FX_M_BOOL || d[i].kind == FX_M_SGAUGE) continue;
        if (d[i].kind != FX_M_HIST) {
            fx_jbuf_printf(j, ",\"%s\":%llu", d[i].json, (unsigned long long)v);
            continue;
        }
        const fx_hist_t *h = (const fx_hist_t *)((const char *)snap + d[i].off);
        fx_jbuf_printf(j, ",\"%s\":{\"count\":%llu,\"sum_ns\":%llu,\"buckets\":[", d[i].json,
                       (unsigned long long)h->count, (unsigned long long)h->sum_ns);
        for (size_t k = 0; k <= FX_HIST_NB; k++)
            fx_jbuf_printf(j, "%s%llu", k ? "," : "", (unsigned long long)h->b[k]);
        fx_jbuf_printf(j, "]}");
    }
}

FX_INTERNAL void fx_metrics_prom_head(fx_jbuf_t *j, const char *family, const char *type, const char *help)
{
    fx_jbuf_printf(j, "# HELP fluxon_%s %s\n# TYPE fluxon_%s %s\n", family, help, family, type);
}

/* `{a,b}` from two label lists, either may be empty; "" when both are */
static void m_labels(char *out, size_t cap, const char *a, const char *b, const char *c)
{
    const char *parts[3] = {a, b, c};
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < 3; i++) {
        if (!parts[i] || !parts[i][0]) continue;
        int w = snprintf(out + len, cap - len, "%s%s", len ? "," : "{", parts[i]);
        if (w < 0 || (size_t)w >= cap - len) break;
        len += (size_t)w;
    }
    if (len && len + 1 < cap) {
        out[len++] = '}';
        out[len] = 0;
    }
}

static void m_prom_hist(fx_jbuf_t *j, const char *family, const char *labels, const char *extra, const fx_hist_t *h)
{
    char lb[512];
    uint64_t cum = 0;
    for (size_t k = 0; k <= FX_HIST_NB; k++) {
        char le[48];
        cum += h->b[k];
        if (k < FX_HIST_NB) snprintf(le, sizeof le, "le=\"%g\"", (double)fx_hist_bounds_ns[k] / 1e9);
        else snprintf(le, sizeof le, "le=\"+Inf\"");
        m_labels(lb, sizeof lb, labels, extra, le);
        fx_jbuf_printf(j, "fluxon_%s_bucket%s %llu\n", family, lb, (unsigned long long)cum);
    }
    m_labels(lb, sizeof lb, labels, extra, NULL);
    fx_jbuf_printf(j, "fluxon_%s_sum%s %.9f\nfluxon_%s_count%s %llu\n", family, lb, (double)h->sum_ns / 1e9, family, lb,
                   (unsigned long long)h->count);
}

FX_INTERNAL void fx_metrics_prom(fx_jbuf_t *j, const fx_metric_desc_t *d, size_t n, const void *const *snaps,
                                 const char *const *extra, size_t nsnap)
{
    static const char *const types[] = {"", "counter", "gauge", "histogram", "gauge", "gauge", "counter", "gauge"};
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(d[i].family, d[i - 1].family))
            fx_metrics_prom_head(j, d[i].family, types[d[i].kind], d[i].help);
        for (size_t s = 0; s < nsnap; s++) {
            const void *snap = snaps[s];
            if (d[i].kind == FX_M_HIST) {
                m_prom_hist(j, d[i].family, d[i].labels, extra[s], (const fx_hist_t *)((const char *)snap + d[i].off));
                continue;
            }
            char lb[512];
            m_labels(lb, sizeof lb, d[i].labels, extra[s], NULL);
            uint64_t v = m_u64(snap, d[i].off);
            if (d[i].kind == FX_M_SGAUGE) fx_jbuf_printf(j, "fluxon_%s%s %lld\n", d[i].family, lb, (long long)v);
            else if (d[i].kind == FX_M_NSCOUNTER) fx_jbuf_printf(j, "fluxon_%s%s %.9f\n", d[i].family, lb, (double)v / 1e9);
            else if (d[i].kind == FX_M_MSGAUGE) fx_jbuf_printf(j, "fluxon_%s%s %.3f\n", d[i].family, lb, (double)v / 1e3);
            else fx_jbuf_printf(j, "fluxon_%s%s %llu\n", d[i].family, lb, (unsigned long long)(d[i].kind == FX_M_BOOL ? !!v : v));
        }
    }
}

static const char *m_status_name(size_t k)
{
    const char *s = fluxon_status_string(-(int)k);
    return strncmp(s, "FLUXON_", 7) == 0 ? s + 7 : s;
}

FX_INTERNAL void fx_metrics_prom_replies(fx_jbuf_t *j, const char *role, const fx_reply_counts_t *const *r,
                                         fx_op_name_fn op_name, const char *const *extra, size_t nsnap)
{
    char fam[64], lb[512], pair[160];
    snprintf(fam, sizeof fam, "%s_requests_total", role);
    fx_metrics_prom_head(j, fam, "counter", "Requests answered, by message type (op) and reply status");
    for (size_t s = 0; s < nsnap; s++)
        for (unsigned t = 0; t < FX_REPLY_TYPES; t++)
            for (size_t k = 0; k < FX_REPLY_STATUSES; k++) {
                if (!r[s]->n[t][k]) continue;
                const char *op = op_name(t);
                snprintf(pair, sizeof pair, "op=\"%s\",status=\"%s\"", op ? op : "UNKNOWN", m_status_name(k));
                m_labels(lb, sizeof lb, pair, extra[s], NULL);
                fx_jbuf_printf(j, "fluxon_%s%s %llu\n", fam, lb, (unsigned long long)r[s]->n[t][k]);
            }
}

FX_INTERNAL void fx_metrics_json_replies(fx_jbuf_t *j, const fx_reply_counts_t *r, fx_op_name_fn op_name)
{
    fx_jbuf_printf(j, ",\"requests_by_op\":{");
    bool first_op = true;
    for (unsigned t = 0; t < FX_REPLY_TYPES; t++) {
        bool first = true;
        for (size_t k = 0; k < FX_REPLY_STATUSES; k++) {
            if (!r->n[t][k]) continue;
            const char *op = op_name(t);
            if (first) fx_jbuf_printf(j, "%s\"%s\":{", first_op ? "" : ",", op ? op : "UNKNOWN");
            fx_jbuf_printf(j, "%s\"%s\":%llu", first ? "" : ",", m_status_name(k), (unsigned long long)r->n[t][k]);
            first = first_op = false;
        }
        if (!first) fx_jbuf_printf(j, "}");
    }
    fx_jbuf_printf(j, "}");
}
