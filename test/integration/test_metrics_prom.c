/* test_metrics_prom.c — issue 19 with a real Prometheus server (Debian `prometheus`,
 * started here on loopback with a temporary config and data dir, stopped by pid): it
 * scrapes `fluxon demo --metrics-listen` during a replay slice of the real trace, and the
 * hit ratio a PromQL query computes from the owners' counters equals the one the demo
 * summary reports (within 1 pp); every query of the shipped Grafana dashboard names a
 * family of a real scrape and is accepted by that server. */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <ctype.h>
#include <math.h>
#include <sys/stat.h>

#include "fluxon.h"
#include "promfix.h"
#include "replayfix.h"

static pid_t prom_pid;
static fluxon_node *nodes[2];
static pf_doc doc;
static char text[1 << 20];

static void prom_fini(void)
{
    th_stop(prom_pid, SIGTERM, 10000);
    prom_pid = 0;
    fluxon_node_stop(nodes[1]);
    fluxon_node_stop(nodes[0]);
    nodes[0] = nodes[1] = NULL;
    fini();
}

TestSuite(metrics_prom, .fini = prom_fini, .timeout = 120);

static void url_encode(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || strchr("-_.~", ch)) out[n++] = (char)ch;
        else n += (size_t)snprintf(out + n, cap - n, "%%%02X", ch);
    }
    out[n] = 0;
}

/* GET /api/v1/query?query=q on the server; the parsed answer (caller frees) */
static cJSON *prom_query(int port, const char *q)
{
    static char enc[8192], path[8300], body[1 << 16];
    url_encode(q, enc, sizeof enc);
    snprintf(path, sizeof path, "/api/v1/query?query=%s", enc);
    int st = pf_http_get(port, path, body, sizeof body, 10000);
    cJSON *d = cJSON_Parse(body);
    cr_assert(st == 200 && d, "query %s: HTTP %d %s", q, st, body);
    return d;
}

/* the scalar of a one-series vector answer; NAN when empty */
static double prom_value(cJSON *d)
{
    cJSON *r = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "data"), "result");
    cJSON *v = cJSON_GetArraySize(r) ? cJSON_GetObjectItem(cJSON_GetArrayItem(r, 0), "value") : NULL;
    cJSON *s = v ? cJSON_GetArrayItem(v, 1) : NULL;
    return cJSON_IsString(s) ? strtod(s->valuestring, NULL) : NAN;
}

/* Prometheus on prom_port scraping the target every interval ("200ms", "5s") */
static void start_prometheus(int prom_port, int target_port, const char *interval)
{
    char cfg[1024], path[512], data[512], listen[64], cfgarg[600], dataarg[600], log[512];
    snprintf(cfg, sizeof cfg,
             "global:\n  scrape_interval: %s\n  scrape_timeout: 200ms\n"
             "scrape_configs:\n  - job_name: fluxon-demo\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
             interval, target_port);
    snprintf(path, sizeof path, "%s/prometheus.yml", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(log, sizeof log, "%s/prometheus.log", dir);
    th_write_file(path, cfg);
    snprintf(cfgarg, sizeof cfgarg, "--config.file=%s", path);
    snprintf(dataarg, sizeof dataarg, "--storage.tsdb.path=%s", data);
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", prom_port);
    const char *argv[] = {"/usr/bin/prometheus", cfgarg, dataarg, listen, NULL};
    prom_pid = th_spawn(argv, log);
    cr_assert_gt(prom_pid, 0, "cannot start /usr/bin/prometheus (scripts/setup installs it)");
    static char body[4096];
    double end = th_now_s() + 30;
    while (th_now_s() < end && pf_http_get(prom_port, "/-/ready", body, sizeof body, 1000) != 200) th_sleep_ms(100);
    cr_assert_eq(pf_http_get(prom_port, "/-/ready", body, sizeof body, 1000), 200, "prometheus not ready (%s)", log);
    /* its scrape manager takes the target up to ~5 s after start: wait until it is active */
    char needle[64];
    snprintf(needle, sizeof needle, "127.0.0.1:%d", target_port);
    end = th_now_s() + 30;
    while (th_now_s() < end && (pf_http_get(prom_port, "/api/v1/targets", body, sizeof body, 1000) != 200 ||
                                !strstr(body, needle)))
        th_sleep_ms(100);
    cr_assert(strstr(body, needle), "prometheus never took the target %s: %s", needle, body);
}

/* the exprs of every panel target of the dashboard (n returned; strings in the doc) */
static size_t dashboard_exprs(cJSON **dash, const char **exprs, size_t cap)
{
    FILE *f = fopen("deploy/grafana/fluxon.json", "r");
    cr_assert_not_null(f, "deploy/grafana/fluxon.json");
    static char js[1 << 17];
    size_t len = fread(js, 1, sizeof js - 1, f);
    js[len] = 0;
    fclose(f);
    *dash = cJSON_Parse(js);
    cr_assert_not_null(*dash, "the dashboard is JSON");
    size_t n = 0;
    cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(*dash, "panels")) {
        cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(p, "targets")) {
            cJSON *e = cJSON_GetObjectItem(t, "expr");
            cr_assert(cJSON_IsString(e) && n < cap);
            exprs[n++] = e->valuestring;
        }
    }
    cr_assert_gt(n, 10);
    return n;
}

Test(metrics_prom, prometheus_computes_the_demo_hit_ratio_and_runs_every_dashboard_query)
{
    dir = th_tmpdir();
    int prom_port = th_free_port(), demo_port;
    do demo_port = th_free_port();
    while (demo_port == prom_port);
    start_prometheus(prom_port, demo_port, "200ms");

    static char out[8192], args[256];
    snprintf(args, sizeof args, "--requests 300 --workers 2 --metrics-listen 127.0.0.1:%d --metrics-linger-ms 1500",
             demo_port);
    cJSON *sum = run_demo(args, out, sizeof out);
    double demo_ratio = num(sum, "prefix_hit_ratio");
    cr_assert_gt(demo_ratio, 0.05, "the slice has hits");

    /* the last values scraped (max_over_time ignores the staleness marker set once the
     * demo stopped serving) */
    cJSON *d = prom_query(prom_port, "sum(max_over_time(fluxon_owner_get_prefix_keys_total{kind=\"transferable\"}[5m]))"
                                     " / sum(max_over_time(fluxon_owner_get_keys_total[5m]))");
    double prom_ratio = prom_value(d);
    cJSON_Delete(d);
    cr_assert(fabs(prom_ratio - demo_ratio) <= 0.01, "Prometheus says %.4f, the demo summary %.4f", prom_ratio,
              demo_ratio);
    d = prom_query(prom_port, "count(max_over_time(fluxon_owner_get_start_seconds_count[5m]))");
    cr_assert_eq(prom_value(d), 1, "one owner's get_start histogram scraped");
    cJSON_Delete(d);

    /* the dashboard: every query runs on this server, and names families a scrape has */
    const char *exprs[64];
    cJSON *dash;
    size_t n = dashboard_exprs(&dash, exprs, 64);
    for (size_t i = 0; i < n; i++) {
        char q[4096]; /* Grafana's $__rate_interval, as it would substitute it */
        const char *var = strstr(exprs[i], "$__rate_interval");
        size_t at = var ? (size_t)(var - exprs[i]) : strlen(exprs[i]);
        snprintf(q, sizeof q, "%.*s", (int)at, exprs[i]);
        for (const char *p = exprs[i] + at; *p;) {
            const char *v = strstr(p, "$__rate_interval");
            size_t l = v ? (size_t)(v - p) : strlen(p);
            snprintf(q + strlen(q), sizeof q - strlen(q), "%.*s%s", (int)l, p, v ? "1m" : "");
            p += l + (v ? strlen("$__rate_interval") : 0);
        }
        d = prom_query(prom_port, q);
        cJSON *st = cJSON_GetObjectItem(d, "status");
        cr_assert(cJSON_IsString(st) && !strcmp(st->valuestring, "success"), "dashboard query %s refused", exprs[i]);
        cJSON_Delete(d);
    }
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"role\":\"master\",\"cluster_id\":\"p\",\"cluster_token\":\"t\",\"listen\":\"127.0.0.1:0\","
             "\"log_level\":\"warn\"}");
    cr_assert_eq(fluxon_node_start(cfg, &nodes[0]), FLUXON_OK);
    snprintf(cfg, sizeof cfg, "{\"role\":\"owner\",\"cluster_id\":\"p\",\"cluster_token\":\"t\",\"node_id\":\"o1\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s/o1.sock\",\"segment_bytes\":\"16MiB\","
             "\"reserve\":{\"grant_bytes\":\"4MiB\"},\"log_level\":\"warn\"}", fluxon_node_port(nodes[0]), dir);
    cr_assert_eq(fluxon_node_start(cfg, &nodes[1]), FLUXON_OK);
    size_t len = 0;
    cr_assert_eq(fluxon_nodes_metrics(nodes, 2, text, sizeof text, &len), FLUXON_OK);
    cr_assert_eq(len, strlen(text));
    /* the cost of one scrape (both reactors' snapshots + the rendering), reported */
    double t0 = th_now_s();
    for (int i = 0; i < 200; i++) cr_assert_eq(fluxon_nodes_metrics(nodes, 2, text, sizeof text, &len), FLUXON_OK);
    double us = (th_now_s() - t0) / 200 * 1e6;
    fprintf(stderr, "metrics: one scrape of a master and an owner (%zu bytes): %.1f us\n", len, us);
    cr_assert_lt(us, 50000, "a scrape costs %.0f us", us);
    char pt[4096];
    cr_assert_eq(pf_promtool(text, dir, pt, sizeof pt), 0, "promtool, master and owner in one exposition:\n%s", pt);
    cr_assert_eq(pf_parse(text, &doc), 0);
    for (size_t i = 0; i < n; i++)
        for (const char *p = strstr(exprs[i], "fluxon_"); p; p = strstr(p + 1, "fluxon_")) {
            char name[128];
            size_t l = 0;
            while ((isalnum((unsigned char)p[l]) || p[l] == '_') && l + 1 < sizeof name) l++;
            snprintf(name, sizeof name, "%.*s", (int)l, p);
            cr_assert_geq(pf_family_of(&doc, name), 0, "dashboard query names %s, no such family:\n%s", name, exprs[i]);
        }
    cJSON_Delete(dash);
    cr_assert_eq(system("promtool check config deploy/prometheus.yml > /dev/null 2>&1"), 0, "deploy/prometheus.yml");
    cJSON_Delete(sum);
}

/* Finding 19 of the second new user's trial. Before: scripts/metrics-plot put 5s for
 * $__rate_interval, so against deploy/prometheus.yml's 5 s scrape every rate window held
 * one sample: the rate panels had no data, and the "no data" fallback failed on the
 * latency panels' log axis (gnuplot exit 1, a traceback). Now the window is 4 x the
 * server's scrape interval, an empty panel says so on a linear axis, and nothing is left
 * in /tmp. */
Test(metrics_prom, metrics_plot_draws_rates_from_a_5s_scrape)
{
    dir = th_tmpdir();
    int prom_port = th_free_port(), demo_port;
    do demo_port = th_free_port();
    while (demo_port == prom_port);
    start_prometheus(prom_port, demo_port, "5s");
    static char out[8192], args[256];
    snprintf(args, sizeof args, "--requests 300 --workers 2 --metrics-listen 127.0.0.1:%d --metrics-linger-ms 17000",
             demo_port); /* served ~17 s after the replay: 3 scrapes or more */
    cJSON *sum = run_demo(args, out, sizeof out);
    cJSON_Delete(sum);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "TMPDIR=%s scripts/metrics-plot http://127.0.0.1:%d %s/panels.png 120 2>&1", dir,
             prom_port, dir);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "metrics-plot: %s", out);
    cr_assert(strstr(out, "wrote ") && strstr(out, "rate window 20s"), "%s", out);
    const char *nodata = strstr(out, "no data:");
    cr_assert(!nodata || !strstr(nodata, "Requests per second"), "no rate data: %s", out);
    char png[600];
    snprintf(png, sizeof png, "%s/panels.png", dir);
    struct stat sb;
    cr_assert(stat(png, &sb) == 0 && sb.st_size > 1000, "%s", out);
    snprintf(cmd, sizeof cmd, "ls -d %s/fluxon-plot-* 2>/dev/null | wc -l", dir);
    p = popen(cmd, "r");
    cr_assert(p && fgets(out, sizeof out, p));
    pclose(p);
    cr_assert_eq(atoi(out), 0, "metrics-plot left its temporary directory");
}
