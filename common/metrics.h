/* metrics.h — the pieces every role's metric catalog is built from: a latency histogram
 * (fixed buckets 1 us .. 10 s), a metric descriptor (one catalog row), and the two
 * renderers that turn a snapshot struct plus its catalog into the JSON members the CLI
 * prints and the Prometheus text exposition format. Both read the same rows, so a name
 * can never differ between `fluxon stats` and /metrics. */
#ifndef FX_METRICS_H
#define FX_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "jsonbuf.h"

/* Upper bounds (ns) 1, 2.5, 5 per decade from 1 us to 10 s: 22 buckets, then +Inf. */
#define FX_HIST_NB 22
typedef struct fx_hist {
    uint64_t b[FX_HIST_NB + 1]; /* per-bucket counts (not cumulative); [FX_HIST_NB] = +Inf */
    uint64_t count, sum_ns;
} fx_hist_t;

static const uint64_t fx_hist_bounds_ns[FX_HIST_NB] = {
    1000ull,       2500ull,       5000ull,       10000ull,      25000ull,      50000ull,
    100000ull,     250000ull,     500000ull,     1000000ull,    2500000ull,    5000000ull,
    10000000ull,   25000000ull,   50000000ull,   100000000ull,  250000000ull,  500000000ull,
    1000000000ull, 2500000000ull, 5000000000ull, 10000000000ull};
FX_INTERNAL void fx_hist_observe(fx_hist_t *h, uint64_t ns);
/* The q-quantile (0..1) in ns, interpolated inside its bucket as Prometheus does; 0 when empty. */
FX_INTERNAL double fx_hist_quantile_ns(const fx_hist_t *h, double q);

/* Kinds of catalog row: the snapshot member is a uint64_t (COUNTER, GAUGE, BOOL: JSON
 * true/false, Prometheus 0/1; NSCOUNTER: nanoseconds in JSON, a _seconds_total counter in
 * Prometheus), an int64_t (SGAUGE) or an fx_hist_t (HIST). Catalog headers name the kind
 * by its suffix (COUNTER, GAUGE, ...); FX_MT_<kind> is its C type. */
enum { FX_M_COUNTER = 1, FX_M_GAUGE = 2, FX_M_HIST = 3, FX_M_BOOL = 4, FX_M_SGAUGE = 5, FX_M_NSCOUNTER = 6,
       FX_M_MSGAUGE = 7 /* milliseconds in JSON, a _seconds gauge in Prometheus */ };
#define FX_MT_COUNTER uint64_t
#define FX_MT_NSCOUNTER uint64_t
#define FX_MT_MSGAUGE uint64_t
#define FX_MT_GAUGE uint64_t
#define FX_MT_BOOL uint64_t
#define FX_MT_SGAUGE int64_t
#define FX_MT_HIST fx_hist_t

/* For a catalog X(name, KIND, family, labels, help): the snapshot member, and the row. */
#define FX_METRIC_FIELD(name, kind, family, labels, help) FX_MT_##kind name;
#define FX_METRIC_ROW(type, name, kind, family, labels, help) \
    {#name, family, labels, help, FX_M_##kind, offsetof(type, name)},

/* One catalog row: json = the member name in the stats JSON; family = the Prometheus family
 * (without the "fluxon_" prefix, with its unit suffix); labels = "" or `k="v"` pairs; the
 * value is a uint64_t (or an fx_hist_t for FX_M_HIST) at offset `off` of the snapshot. */
typedef struct fx_metric_desc {
    const char *json, *family, *labels, *help;
    int kind;
    size_t off;
} fx_metric_desc_t;

/* Appends `,"json":value` for every row (histograms as {"count","sum_ns","buckets":[..]}). */
FX_INTERNAL void fx_metrics_json(fx_jbuf_t *j, const fx_metric_desc_t *d, size_t n, const void *snap);
/* Appends the rows in Prometheus text format: `# HELP` and `# TYPE` once per family (rows of
 * one family must be adjacent; the help of its first row is used), then its samples for
 * each of the nsnap snapshots (several nodes of one role in one exposition); a histogram's
 * seconds buckets are cumulative, with _sum (seconds) and _count. extra[k] is a label list
 * added to every sample of snapshot k ("" for none), e.g. node="a". */
FX_INTERNAL void fx_metrics_prom(fx_jbuf_t *j, const fx_metric_desc_t *d, size_t n, const void *const *snaps,
                                 const char *const *extra, size_t nsnap);
/* One family header; fx_metrics_prom calls it, roles use it for rows outside a catalog. */
FX_INTERNAL void fx_metrics_prom_head(fx_jbuf_t *j, const char *family, const char *type, const char *help);

/* Replies per (message type, status) that a connection sent (transport counts them when
 * a table is attached to the connection; roles render it as requests by op and status). */
#define FX_REPLY_TYPES 32
#define FX_REPLY_STATUSES 19 /* 0 = OK, k = status -k */
typedef struct fx_reply_counts {
    uint64_t n[FX_REPLY_TYPES][FX_REPLY_STATUSES];
} fx_reply_counts_t;

typedef const char *(*fx_op_name_fn)(unsigned type);
/* Renders a reply table as the family fluxon_<role>_requests_total{op,status} with one
 * sample per (op, status) seen (never a key: at most 32 x 19 series); op names come from
 * op_name (the transport's message catalog), statuses are fluxon_status_string less
 * "FLUXON_" ("OK", "ERR_NOT_FOUND"). */
FX_INTERNAL void fx_metrics_prom_replies(fx_jbuf_t *j, const char *role, const fx_reply_counts_t *const *r,
                                         fx_op_name_fn op_name, const char *const *extra, size_t nsnap);
/* The same table as the JSON member ,"requests_by_op":{"GET_START":{"OK":n,...},...}. */
FX_INTERNAL void fx_metrics_json_replies(fx_jbuf_t *j, const fx_reply_counts_t *r, fx_op_name_fn op_name);

#endif
