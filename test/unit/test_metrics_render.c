/* test_metrics_render.c — common/metrics.c: histogram buckets (1 us .. 10 s, +Inf) and
 * quantiles, the JSON members and the Prometheus text a catalog renders to (HELP/TYPE once
 * per family, several snapshots under one header, cumulative buckets, bools and signed
 * gauges), and the requests-by-op table. */
#include <criterion/criterion.h>
#include <string.h>

#include "metrics.h"

typedef struct snap {
    uint64_t a, b1, b2, flag;
    int64_t neg;
    fx_hist_t lat;
} snap_t;

#define CAT(X)                                                                  \
    X(a, COUNTER, "t_a_total", "", "A counter")                                 \
    X(b1, GAUGE, "t_b", "kind=\"x\"", "A labelled gauge")                       \
    X(b2, GAUGE, "t_b", "kind=\"y\"", "")                                       \
    X(flag, BOOL, "t_up", "", "A bool")                                         \
    X(neg, SGAUGE, "t_neg", "", "A signed gauge")                               \
    X(lat, HIST, "t_lat_seconds", "", "A latency")
static const fx_metric_desc_t rows[] = {
#define R(name, kind, family, labels, help) FX_METRIC_ROW(snap_t, name, kind, family, labels, help)
    CAT(R)
#undef R
};

Test(metrics_render, histogram_buckets_and_quantiles)
{
    fx_hist_t h;
    memset(&h, 0, sizeof h);
    fx_hist_observe(&h, 1000);          /* <= 1 us: bucket 0 */
    fx_hist_observe(&h, 1001);          /* bucket 1 (2.5 us) */
    fx_hist_observe(&h, 10000000000ull); /* exactly 10 s: the last finite bucket */
    fx_hist_observe(&h, 20000000000ull); /* +Inf */
    cr_assert_eq(h.b[0], 1);
    cr_assert_eq(h.b[1], 1);
    cr_assert_eq(h.b[FX_HIST_NB - 1], 1);
    cr_assert_eq(h.b[FX_HIST_NB], 1);
    cr_assert_eq(h.count, 4);
    cr_assert_eq(h.sum_ns, 1000 + 1001 + 10000000000ull + 20000000000ull);
    memset(&h, 0, sizeof h);
    cr_assert_eq(fx_hist_quantile_ns(&h, 0.5), 0, "empty");
    for (int i = 0; i < 100; i++) fx_hist_observe(&h, 3000); /* all in (2.5, 5] us */
    double p50 = fx_hist_quantile_ns(&h, 0.5);
    cr_assert(p50 > 2500 && p50 <= 5000, "p50 %f inside its bucket", p50);
    cr_assert_float_eq(p50, 3750, 1e-6, "linear inside the bucket, as histogram_quantile");
}

Test(metrics_render, prometheus_text_and_json_from_one_catalog)
{
    snap_t s1 = {.a = 7, .b1 = 1, .b2 = 2, .flag = 5, .neg = -1}, s2 = {.a = 9};
    fx_hist_observe(&s1.lat, 2000);
    fx_hist_observe(&s1.lat, 40000);
    const void *snaps[] = {&s1, &s2};
    const char *extra[] = {"node=\"n1\"", "node=\"n2\""};
    static char buf[16384];
    fx_jbuf_t j = fx_jbuf(buf, sizeof buf);
    fx_metrics_prom(&j, rows, sizeof rows / sizeof rows[0], snaps, extra, 2);
    cr_assert_not(j.overflow);
    cr_assert(strstr(buf, "# HELP fluxon_t_a_total A counter\n# TYPE fluxon_t_a_total counter\n"
                          "fluxon_t_a_total{node=\"n1\"} 7\nfluxon_t_a_total{node=\"n2\"} 9\n"), "%s", buf);
    cr_assert(strstr(buf, "# TYPE fluxon_t_b gauge\nfluxon_t_b{kind=\"x\",node=\"n1\"} 1\n"
                          "fluxon_t_b{kind=\"x\",node=\"n2\"} 0\nfluxon_t_b{kind=\"y\",node=\"n1\"} 2\n"), "%s", buf);
    const char *second = strstr(buf, "# HELP fluxon_t_b ");
    cr_assert(second && !strstr(second + 1, "# HELP fluxon_t_b "), "one HELP per family");
    cr_assert(strstr(buf, "fluxon_t_up{node=\"n1\"} 1\n"), "a bool is 0/1");
    cr_assert(strstr(buf, "fluxon_t_neg{node=\"n1\"} -1\n"), "%s", buf);
    cr_assert(strstr(buf, "# TYPE fluxon_t_lat_seconds histogram\n"), "%s", buf);
    cr_assert(strstr(buf, "fluxon_t_lat_seconds_bucket{node=\"n1\",le=\"1e-06\"} 0\n"), "%s", buf);
    cr_assert(strstr(buf, "fluxon_t_lat_seconds_bucket{node=\"n1\",le=\"2.5e-06\"} 1\n"), "%s", buf);
    cr_assert(strstr(buf, "fluxon_t_lat_seconds_bucket{node=\"n1\",le=\"5e-05\"} 2\n"), "cumulative: %s", buf);
    cr_assert(strstr(buf, "fluxon_t_lat_seconds_bucket{node=\"n1\",le=\"+Inf\"} 2\n"), "%s", buf);
    cr_assert(strstr(buf, "fluxon_t_lat_seconds_sum{node=\"n1\"} 0.000042000\n"), "%s", buf);
    cr_assert(strstr(buf, "fluxon_t_lat_seconds_count{node=\"n1\"} 2\n"), "%s", buf);

    j = fx_jbuf(buf, sizeof buf);
    fx_metrics_json(&j, rows, sizeof rows / sizeof rows[0], &s1);
    cr_assert(strstr(buf, ",\"a\":7,\"b1\":1,\"b2\":2,\"flag\":true,\"neg\":-1,\"lat\":{\"count\":2,\"sum_ns\":42000,"
                          "\"buckets\":[0,1,"), "%s", buf);
    char small[32];
    j = fx_jbuf(small, sizeof small);
    fx_metrics_prom(&j, rows, sizeof rows / sizeof rows[0], snaps, extra, 2);
    cr_assert(j.overflow && strlen(small) < sizeof small, "a short buffer is reported, never overrun");
}

static const char *op_name(unsigned t) { return t == 3 ? "PING" : t == 20 ? "GET_START" : NULL; }

Test(metrics_render, requests_by_op_and_status)
{
    static fx_reply_counts_t r;
    memset(&r, 0, sizeof r);
    r.n[20][0] = 5;
    r.n[20][2] = 1; /* FLUXON_ERR_NOT_FOUND = -2 */
    r.n[3][0] = 2;
    const fx_reply_counts_t *rs[] = {&r};
    const char *extra[] = {""};
    static char buf[4096];
    fx_jbuf_t j = fx_jbuf(buf, sizeof buf);
    fx_metrics_prom_replies(&j, "owner", rs, op_name, extra, 1);
    cr_assert(strstr(buf, "# TYPE fluxon_owner_requests_total counter\n"), "%s", buf);
    cr_assert(strstr(buf, "fluxon_owner_requests_total{op=\"GET_START\",status=\"OK\"} 5\n"), "%s", buf);
    cr_assert(strstr(buf, "fluxon_owner_requests_total{op=\"GET_START\",status=\"ERR_NOT_FOUND\"} 1\n"), "%s", buf);
    cr_assert(strstr(buf, "fluxon_owner_requests_total{op=\"PING\",status=\"OK\"} 2\n"), "%s", buf);
    j = fx_jbuf(buf, sizeof buf);
    fx_metrics_json_replies(&j, &r, op_name);
    cr_assert_str_eq(buf, ",\"requests_by_op\":{\"PING\":{\"OK\":2},\"GET_START\":{\"OK\":5,\"ERR_NOT_FOUND\":1}}");
}
