/* test_metrics.c — issue 19: GET /metrics on a master and an owner run as processes
 * (metrics_listen), checked by `promtool check metrics`, every family described (HELP and
 * TYPE), every catalog row's value equal to the JSON stats of the same moment; bad
 * metrics_listen values exit 2 naming the field; the catalogs' own rules. */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "fluxon.h"
#include "helpers.h"
#include "master_metrics.h"
#include "owner_metrics.h"
#include "promfix.h"

static char *dir;
static pid_t pids[4];
static int npids;
static pf_doc doc; /* large: static */

static void fini(void)
{
    for (int i = 0; i < npids; i++) th_stop(pids[i], SIGTERM, 5000);
    npids = 0;
    if (dir) th_rmtree(dir);
    free(dir);
    dir = NULL;
}

TestSuite(metrics, .fini = fini, .timeout = 60);

/* starts `fluxon --role=R --config path` (log in dir/name.log) and returns its metrics port,
 * read from the line the binary prints ("metrics on http://127.0.0.1:PORT/metrics") */
static int spawn_role(const char *role, const char *name, const char *cfg_json)
{
    char cfg[512], log[512], arg[64];
    snprintf(cfg, sizeof cfg, "%s/%s.json", dir, name);
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    snprintf(arg, sizeof arg, "--role=%s", role);
    th_write_file(cfg, cfg_json);
    const char *argv[] = {th_fluxon_bin(), arg, "--config", cfg, NULL};
    pid_t pid = th_spawn(argv, log);
    cr_assert_gt(pid, 0);
    pids[npids++] = pid;
    cr_assert(th_wait_log(log, "/metrics", 10000), "%s printed no metrics address", name);
    FILE *f = fopen(log, "r");
    char line[512];
    int port = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "fluxon: metrics on http://127.0.0.1:%d/metrics", &port) == 1) break;
    if (f) fclose(f);
    cr_assert_gt(port, 0, "no port in %s's log", name);
    return port;
}

/* value of JSON member name of obj as a number (bools 1/0, histograms their count) */
static double json_num(cJSON *obj, const char *name)
{
    cJSON *v = cJSON_GetObjectItem(obj, name);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItem(v, "count");
    cr_assert(cJSON_IsNumber(v), "JSON stats lack %s", name);
    return v->valuedouble;
}

typedef struct row {
    const char *name, *family, *labels;
    double scale; /* JSON value / scale = the scrape's (ns or ms in JSON, seconds in the scrape) */
    int hist;
} row_t;
#define ROW(name, kind, family, labels, help)                                                                  \
    {#name, family, labels, !strcmp(#kind, "NSCOUNTER") ? 1e9 : !strcmp(#kind, "MSGAUGE") ? 1e3 : 1, !strcmp(#kind, "HIST")},
static const row_t owner_rows[] = {FX_OWNER_METRICS(ROW)};
static const row_t master_rows[] = {FX_MASTER_METRICS(ROW)};
#undef ROW

/* every row's sample (node=node) lies between its JSON value before and after the scrape */
static void check_rows(const row_t *rows, size_t n, const char *node, cJSON *before, cJSON *after)
{
    for (size_t i = 0; i < n; i++) {
        char series[512];
        snprintf(series, sizeof series, "fluxon_%s%s{%s%snode=\"%s\"}", rows[i].family, rows[i].hist ? "_count" : "",
                 rows[i].labels, rows[i].labels[0] ? "," : "", node);
        double v = pf_value(&doc, series), a = json_num(before, rows[i].name), b = json_num(after, rows[i].name);
        a /= rows[i].scale, b /= rows[i].scale;
        cr_assert(!isnan(v), "%s missing from the scrape", series);
        cr_assert(v >= fmin(a, b) && v <= fmax(a, b), "%s = %.0f but JSON %s was %.0f then %.0f", series, v,
                  rows[i].name, a, b);
    }
}

static cJSON *owner_json(fluxon_client *c)
{
    static char buf[1 << 16];
    size_t len;
    cr_assert_eq(fluxon_client_stats(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *d = cJSON_Parse(buf);
    cr_assert_not_null(d);
    return d;
}

static cJSON *master_json(fluxon_client *c)
{
    static char buf[1 << 16];
    size_t len;
    cr_assert_eq(fluxon_client_master_stats(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *d = cJSON_Parse(buf);
    cr_assert_not_null(d);
    return d;
}

static char text[1 << 20];

/* entries of a directory (a process's fds), or -1 */
static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n - 2; /* . and .. */
}

Test(metrics, master_and_owner_processes_serve_what_their_stats_say)
{
    dir = th_tmpdir();
    int mport = th_free_port();
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"role\":\"master\",\"cluster_id\":\"m\",\"cluster_token\":\"t\",\"listen\":\"127.0.0.1:%d\","
             "\"metrics_listen\":\"127.0.0.1:0\",\"log_level\":\"warn\"}", mport);
    int master_metrics = spawn_role("master", "master", cfg);
    snprintf(cfg, sizeof cfg, "{\"role\":\"owner\",\"cluster_id\":\"m\",\"cluster_token\":\"t\",\"node_id\":\"ownA\","
             "\"master\":\"127.0.0.1:%d\",\"socket\":\"%s/a.sock\",\"segment_bytes\":\"64MiB\","
             "\"reserve\":{\"grant_bytes\":\"8MiB\"},\"metrics_listen\":\"127.0.0.1:0\",\"log_level\":\"warn\"}", mport, dir);
    int owner_metrics = spawn_role("owner", "owner", cfg);
    snprintf(cfg, sizeof cfg, "{\"role\":\"external\",\"cluster_id\":\"m\",\"cluster_token\":\"t\",\"socket\":\"%s/a.sock\","
             "\"timeout_ms\":5000,\"log_level\":\"warn\"}", dir);
    fluxon_client *c = NULL;
    cr_assert_eq(fluxon_client_open(cfg, &c), FLUXON_OK);
    cr_assert(th_wait_registered(c, 10000), "the owner registered with its master within 10 s");

    /* a workload: small puts (one request), big puts (put_start + commit), hits, a miss */
    static uint8_t big[300 << 10];
    memset(big, 7, sizeof big);
    for (int i = 0; i < 20; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        cr_assert_eq(fluxon_put(c, key, big, i < 4 ? sizeof big : 1000, NULL), FLUXON_OK);
        fluxon_holder *h = NULL;
        cr_assert_eq(fluxon_get(c, key, &h), FLUXON_OK);
        fluxon_holder_release(h);
    }
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_get(c, "absent", &h), FLUXON_ERR_NOT_FOUND);

    cJSON *ob = owner_json(c), *mb = master_json(c);
    cr_assert_eq(pf_http_get(owner_metrics, "/metrics", text, sizeof text, 5000), 200);
    cJSON *oa = owner_json(c);
    cr_assert_eq(pf_parse(text, &doc), 0, "every sample's family has HELP and TYPE:\n%s", text);
    char out[4096];
    cr_assert_eq(pf_promtool(text, dir, out, sizeof out), 0, "promtool check metrics:\n%s", out);
    check_rows(owner_rows, sizeof owner_rows / sizeof owner_rows[0], "ownA", cJSON_GetObjectItem(ob, "owner"),
               cJSON_GetObjectItem(oa, "owner"));
    /* what the workload did shows, by tier, op and status, and in the histograms */
    cr_assert_geq(pf_value(&doc, "fluxon_owner_get_hits_total{tier=\"local\",node=\"ownA\"}"), 20);
    cr_assert_geq(pf_value(&doc, "fluxon_owner_get_start_seconds_count{node=\"ownA\"}"), 21);
    cr_assert_geq(pf_value(&doc, "fluxon_owner_put_start_seconds_count{node=\"ownA\"}"), 4);
    cr_assert_geq(pf_value(&doc, "fluxon_owner_commit_seconds_count{phase=\"global\",node=\"ownA\"}"), 4);
    cr_assert_geq(pf_value(&doc, "fluxon_owner_requests_total{op=\"PUT_INLINE\",status=\"OK\",node=\"ownA\"}"), 16);
    cr_assert_geq(pf_value(&doc, "fluxon_owner_get_misses_total{node=\"ownA\"}"), 1);
    cr_assert_geq(pf_value(&doc, "fluxon_owner_get_miss_reasons_total{reason=\"not_found\",node=\"ownA\"}"), 1);
    cr_assert_eq(pf_value_prefix(&doc, "fluxon_build_info{version=\"" FLUXON_VERSION_STRING "\",commit=\""), 1);

    cr_assert_eq(pf_http_get(master_metrics, "/metrics", text, sizeof text, 5000), 200);
    cJSON *ma = master_json(c);
    cr_assert_eq(pf_parse(text, &doc), 0, "every sample's family has HELP and TYPE:\n%s", text);
    cr_assert_eq(pf_promtool(text, dir, out, sizeof out), 0, "promtool check metrics:\n%s", out);
    check_rows(master_rows, sizeof master_rows / sizeof master_rows[0], "master", mb, ma);
    cr_assert_eq(pf_value(&doc, "fluxon_master_nodes{state=\"alive\",node=\"master\"}"), 1);
    cr_assert_geq(pf_value(&doc, "fluxon_master_puts_total{node=\"master\"}"), 20);

    /* `top` shows the same cluster: two frames, then it exits by itself */
    char ext[512], cmd[1400], top[8192];
    snprintf(ext, sizeof ext, "%s/ext.json", dir);
    th_write_file(ext, cfg);
    snprintf(cmd, sizeof cmd, "timeout 20 %s --role=external --config %s top --iterations 2 --interval-ms 100 "
             "> %s/top.txt 2>&1 < /dev/null", th_fluxon_bin(), ext, dir);
    int st = system(cmd);
    snprintf(ext, sizeof ext, "%s/top.txt", dir);
    FILE *f = fopen(ext, "r");
    size_t tl = f ? fread(top, 1, sizeof top - 1, f) : 0;
    top[tl] = 0;
    if (f) fclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "top failed:\n%s", top);
    cr_assert(strstr(top, "owner ownA") && strstr(top, "owners alive 1 dead 0") && strstr(top, "hit ratio") &&
              strstr(top, "get_start") && strstr(top, "p99") && strstr(top, "GET_START"), "%s", top);
    const char *second = strstr(top, "(last second)");
    cr_assert(second && !strstr(second + 1, "fluxon top"), "exactly two frames:\n%s", top);

    /* only GET /metrics is served */
    cr_assert_eq(pf_http_get(master_metrics, "/other", text, sizeof text, 5000), 404);

    /* past FD_SETSIZE: the master holds over 1024 descriptors (idle connections the test
     * opens to its listen port) and still serves scrapes (microhttpd on epoll, not select) */
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < 1300 && rl.rlim_max >= 1300) {
        rl.rlim_cur = 1300;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    enum { IDLE = 1100 };
    static int idle[IDLE];
    int n_idle = 0;
    for (; rl.rlim_cur >= 1300 && n_idle < IDLE; n_idle++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)mport)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        idle[n_idle] = socket(AF_INET, SOCK_STREAM, 0);
        cr_assert_geq(idle[n_idle], 0);
        cr_assert_eq(connect(idle[n_idle], (struct sockaddr *)&a, sizeof a), 0, "connection %d", n_idle);
    }
    if (n_idle) { /* every one accepted: the master's socket count is past 1024 */
        char fds[64];
        snprintf(fds, sizeof fds, "/proc/%d/fd", (int)pids[0]);
        int open_fds = 0;
        double end = th_now_s() + 10;
        while (th_now_s() < end && (open_fds = count_dir(fds)) < 1030) th_sleep_ms(20);
        cr_assert_geq(open_fds, 1030, "the master holds %d descriptors", open_fds);
        cr_assert_eq(pf_http_get(master_metrics, "/metrics", text, sizeof text, 5000), 200,
                     "a scrape of a master holding %d descriptors", open_fds);
        for (int i = 0; i < n_idle; i++) close(idle[i]);
    }
    cJSON_Delete(ob);
    cJSON_Delete(oa);
    cJSON_Delete(mb);
    cJSON_Delete(ma);
    fluxon_client_close(c);
}

/* exit status and log of `fluxon --role=master` with metrics_listen = value */
static int master_with_metrics_listen(const char *value, char *log_text, size_t cap)
{
    char cfg[512], path[512], log[512];
    snprintf(cfg, sizeof cfg, "{\"role\":\"master\",\"cluster_id\":\"m\",\"cluster_token\":\"t\",\"listen\":\"127.0.0.1:0\","
             "\"metrics_listen\":\"%s\",\"log_level\":\"warn\"}", value);
    snprintf(path, sizeof path, "%s/bad.json", dir);
    snprintf(log, sizeof log, "%s/bad.log", dir);
    unlink(log);
    th_write_file(path, cfg);
    const char *argv[] = {th_fluxon_bin(), "--role=master", "--config", path, NULL};
    pid_t pid = th_spawn(argv, log);
    cr_assert_gt(pid, 0);
    int st = 0;
    double end = th_now_s() + 10;
    while (waitpid(pid, &st, WNOHANG) == 0 && th_now_s() < end) th_sleep_ms(10);
    if (th_now_s() >= end) st = th_stop(pid, SIGKILL, 1000);
    FILE *f = fopen(log, "r");
    size_t n = f ? fread(log_text, 1, cap - 1, f) : 0;
    log_text[n] = 0;
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(metrics, a_metrics_listen_that_cannot_serve_exits_2_naming_the_field)
{
    dir = th_tmpdir();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(fd, 1), 0);
    getsockname(fd, (struct sockaddr *)&a, &al);
    char busy[64], log[4096];
    snprintf(busy, sizeof busy, "127.0.0.1:%u", ntohs(a.sin_port));
    cr_assert_eq(master_with_metrics_listen(busy, log, sizeof log), 2, "%s", log);
    cr_assert(strstr(log, "metrics_listen") && strstr(log, busy) && strstr(log, "in use"), "%s", log);
    close(fd);
    cr_assert_eq(master_with_metrics_listen("no-such-host.invalid:9100", log, sizeof log), 2, "%s", log);
    cr_assert(strstr(log, "metrics_listen") && strstr(log, "no-such-host.invalid"), "%s", log);
    cr_assert_eq(master_with_metrics_listen("127.0.0.1:x", log, sizeof log), 2, "%s", log);
    cr_assert(strstr(log, "metrics_listen"), "%s", log);
}

/* The catalogs' own rules: rows of a family adjacent, the first with help, one kind per
 * family, counters end in _total, histograms in _seconds, JSON names unique. */
static void check_catalog(const char *const *json, const char *const *fam, const char *const *kind,
                          const char *const *help, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool first = i == 0 || strcmp(fam[i], fam[i - 1]);
        if (first) cr_assert(help[i][0], "family %s: its first row has no help", fam[i]);
        else cr_assert_str_eq(kind[i], kind[i - 1], "family %s mixes kinds", fam[i]);
        for (size_t k = 0; k + 1 < i; k++)
            if (!strcmp(fam[k], fam[i])) cr_assert_str_eq(fam[k + 1], fam[i], "rows of %s are not adjacent", fam[i]);
        for (size_t k = 0; k < i; k++) cr_assert_str_neq(json[k], json[i], "JSON name %s twice", json[i]);
        size_t l = strlen(fam[i]);
        bool counter = !strcmp(kind[i], "COUNTER") || !strcmp(kind[i], "NSCOUNTER");
        if (counter) cr_assert(l > 6 && !strcmp(fam[i] + l - 6, "_total"), "counter %s", fam[i]);
        if (!strcmp(kind[i], "NSCOUNTER"))
            cr_assert(l > 14 && !strcmp(fam[i] + l - 14, "_seconds_total"), "seconds counter %s", fam[i]);
        if (!strcmp(kind[i], "HIST")) cr_assert(l > 8 && !strcmp(fam[i] + l - 8, "_seconds"), "histogram %s", fam[i]);
        if (!counter) cr_assert(l < 6 || strcmp(fam[i] + l - 6, "_total"), "gauge %s", fam[i]);
    }
}

Test(metrics, catalog_rules)
{
#define J(name, kind, family, labels, help) #name,
#define F(name, kind, family, labels, help) family,
#define K(name, kind, family, labels, help) #kind,
#define H(name, kind, family, labels, help) help,
    static const char *const oj[] = {FX_OWNER_METRICS(J)}, *const of[] = {FX_OWNER_METRICS(F)},
                             *const ok[] = {FX_OWNER_METRICS(K)}, *const oh[] = {FX_OWNER_METRICS(H)};
    static const char *const mj[] = {FX_MASTER_METRICS(J)}, *const mf[] = {FX_MASTER_METRICS(F)},
                             *const mk[] = {FX_MASTER_METRICS(K)}, *const mh[] = {FX_MASTER_METRICS(H)};
    check_catalog(oj, of, ok, oh, sizeof oj / sizeof oj[0]);
    check_catalog(mj, mf, mk, mh, sizeof mj / sizeof mj[0]);
}
