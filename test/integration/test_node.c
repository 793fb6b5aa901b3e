/* test_node.c — embedded mode through the public API: master and owners as threads of
 * the test process (several at once), clients from threads, start errors, stats, and
 * behaviour when the owner goes away. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>

#include "helpers.h"
#include "fluxon.h"

static char *dir;
static fluxon_node *master, *owner_a, *owner_b;

static void fini(void)
{
    fluxon_node_stop(owner_a);
    fluxon_node_stop(owner_b);
    fluxon_node_stop(master);
    owner_a = owner_b = master = NULL;
    th_rmtree(dir);
    free(dir);
    dir = NULL;
}

static fluxon_node *start_owner(const char *id, int expect)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"owner\",\"cluster_id\":\"emb\",\"cluster_token\":\"tok\",\"node_id\":\"%s\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s/%s/s.sock\",\"segment_bytes\":\"16MiB\","
             "\"reserve\":{\"grant_bytes\":\"4MiB\"},\"log_level\":\"warn\",\"start_timeout_ms\":3000}",
             id, fluxon_node_port(master), dir, id);
    fluxon_node *n = NULL;
    cr_assert_eq(fluxon_node_start(cfg, &n), expect, "owner %s", id);
    return n;
}

static fluxon_client *open_client(const char *owner_id, const char *token)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"external\",\"cluster_id\":\"emb\",\"cluster_token\":\"%s\",\"socket\":\"%s/%s/s.sock\","
             "\"timeout_ms\":2000,\"log_level\":\"warn\"}", token, dir, owner_id);
    fluxon_client *c = NULL;
    int rc = fluxon_client_open(cfg, &c);
    return rc == FLUXON_OK ? c : NULL;
}

/* true when a thread of this process is named `name` (/proc/self/task/TID/comm) */
static bool has_thread_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    bool found = false;
    struct dirent *de;
    while (!found && (de = readdir(d))) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        found = !strcmp(comm, name);
    }
    closedir(d);
    return found;
}

static void start_master(void)
{
    dir = th_tmpdir();
    cr_assert_eq(fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"emb\",\"cluster_token\":\"tok\","
                                   "\"listen\":\"127.0.0.1:0\",\"log_level\":\"warn\"}", &master), FLUXON_OK);
    cr_assert_gt(fluxon_node_port(master), 0);
}

Test(node, master_and_two_owners_in_one_process, .fini = fini, .timeout = 60)
{
    start_master();
    owner_a = start_owner("oa", FLUXON_OK);
    owner_b = start_owner("ob", FLUXON_OK);
    cr_assert_eq(fluxon_node_port(owner_a), 0);
    fluxon_client *ca = open_client("oa", "tok"), *cb = open_client("ob", "tok");
    cr_assert(ca && cb);
    /* each node's and client's thread carries its role (and node id): top -H, perf, gdb */
    cr_assert(has_thread_named("fx-master") && has_thread_named("fx-owner-oa") && has_thread_named("fx-owner-ob") &&
              has_thread_named("fx-client"));
    uint64_t rtt = 0;
    cr_assert_eq(fluxon_client_ping(ca, 0, &rtt), FLUXON_OK);
    cr_assert_eq(fluxon_client_ping(cb, 1, &rtt), FLUXON_OK);
    static char json[1 << 16]; /* the owner's stats document is ~10 KiB (every catalog row) */
    size_t len = 0;
    cr_assert_eq(fluxon_client_cluster_nodes(ca, json, sizeof json, &len), FLUXON_OK);
    cr_assert_eq(len, strlen(json));
    cr_assert(strstr(json, "\"node_id\":\"oa\"") && strstr(json, "\"node_id\":\"ob\"") &&
              strstr(json, "\"role\":\"master\""), "%s", json);
    cr_assert_eq(fluxon_client_stats(ca, json, sizeof json, &len), FLUXON_OK);
    cr_assert(strstr(json, "\"node_id\":\"oa\"") && strstr(json, "\"externals\":1") &&
              strstr(json, "\"master_connected\":true"), "%s", json);
    /* too small a buffer: INVALID_ARGUMENT and the needed length */
    size_t need = 0;
    cr_assert_eq(fluxon_client_stats(ca, json, 8, &need), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_geq(need, 8);
    cr_assert_lt(need, sizeof json, "the needed length fits the test's buffer");
    /* the counters move between two calls (the document can grow by a few bytes): the
     * retry has room to spare, as fluxon.h tells callers */
    cr_assert_eq(fluxon_client_stats(ca, json, 2 * need + 1, &len), FLUXON_OK);
    cr_assert_leq(len, 2 * need);
    /* the client's own prefault of the segment (prefault_segment, on by default) ends: its
     * field in the "client" object (the owner object has one of its own) */
    bool done = false;
    for (int i = 0; i < 2000 && !done; i++) {
        if (i) {
            th_sleep_ms(10);
            cr_assert_eq(fluxon_client_stats(ca, json, sizeof json, &len), FLUXON_OK);
        }
        int pf = th_client_prefaulting(json);
        cr_assert_geq(pf, 0, "no client.segment_prefaulting: %s", json);
        done = pf == 0;
    }
    cr_assert(done, "the prefault ended within 20 s: %s", json);
    fluxon_client_close(ca);
    fluxon_client_close(cb);
}

typedef struct pinger {
    fluxon_client *c;
    int ok;
} pinger_t;

static void *ping_loop(void *arg)
{
    pinger_t *p = arg;
    for (int i = 0; i < 500; i++) {
        uint64_t rtt;
        if (fluxon_client_ping(p->c, i & 1, &rtt) == FLUXON_OK) p->ok++;
    }
    return NULL;
}

Test(node, one_client_used_from_many_threads, .fini = fini, .timeout = 60)
{
    start_master();
    owner_a = start_owner("oa", FLUXON_OK);
    fluxon_client *c = open_client("oa", "tok");
    cr_assert_not_null(c);
    pthread_t t[4];
    pinger_t p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = (pinger_t){c, 0};
        pthread_create(&t[i], NULL, ping_loop, &p[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(p[i].ok, 500, "thread %d: %d of 500 pings", i, p[i].ok);
    }
    fluxon_client_close(c);
}

/* fluxon_client_open's refusals say why in fluxon_last_error_message (a binding's exception
 * carries it; before, only the log did): the config field, the missing owner. */
Test(node, a_refused_client_open_says_why, .timeout = 60)
{
    fluxon_client *c = NULL;
    cr_assert_eq(fluxon_client_open("{\"role\":\"external\",\"cluster_id\":\"x\",\"socket\":\"/tmp/x.sock\","
                                    "\"log_level\":\"bogus\"}", &c),
                 FLUXON_ERR_CONFIG);
    cr_assert(strstr(fluxon_last_error_message(), "log_level") && strstr(fluxon_last_error_message(), "bogus"), "[%s]",
              fluxon_last_error_message());
    cr_assert_eq(fluxon_client_open("{\"role\":\"master\",\"cluster_id\":\"x\"}", &c), FLUXON_ERR_CONFIG);
    cr_assert(strstr(fluxon_last_error_message(), "not \"external\""), "[%s]", fluxon_last_error_message());
    char *tdir = th_tmpdir(), cfg[512];
    snprintf(cfg, sizeof cfg, "{\"role\":\"external\",\"cluster_id\":\"x\",\"socket\":\"%s/none.sock\","
             "\"timeout_ms\":200}", tdir);
    cr_assert_eq(fluxon_client_open(cfg, &c), FLUXON_ERR_UNAVAILABLE);
    cr_assert(strstr(fluxon_last_error_message(), "none.sock"), "[%s]", fluxon_last_error_message());
    cr_assert_null(c);
    th_rmtree(tdir);
    free(tdir);
}

Test(node, start_errors, .fini = fini, .timeout = 60)
{
    fluxon_node *n = NULL;
    cr_assert_eq(fluxon_node_start(NULL, &n), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_node_start("{}", NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_node_start("{\"role\":\"master\"}", &n), FLUXON_ERR_CONFIG);
    cr_assert_eq(fluxon_node_start("not json", &n), FLUXON_ERR_CONFIG);
    cr_assert_eq(fluxon_node_start("{\"role\":\"external\",\"cluster_id\":\"x\",\"socket\":\"/tmp/x.sock\"}", &n),
                 FLUXON_ERR_CONFIG, "an external is not a node");
    cr_assert_null(n);
    /* a port already in use: the config's listen is wrong for this host (CONFIG, as a
     * metrics_listen in use; `fluxon` exits 2) */
    start_master();
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"role\":\"master\",\"cluster_id\":\"emb\",\"listen\":\"127.0.0.1:%u\"}",
             fluxon_node_port(master));
    cr_assert_eq(fluxon_node_start(cfg, &n), FLUXON_ERR_CONFIG);
    /* an owner whose master is unreachable gives up after start_timeout_ms */
    int port = th_free_port();
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"owner\",\"cluster_id\":\"emb\",\"node_id\":\"lonely\",\"master\":\"127.0.0.1:%d\","
             "\"socket\":\"%s/lonely/s.sock\",\"segment_bytes\":\"8MiB\",\"reserve\":{\"grant_bytes\":\"4MiB\"},"
             "\"start_timeout_ms\":500}", port, dir);
    double t0 = th_now_s();
    cr_assert_eq(fluxon_node_start(cfg, &n), FLUXON_ERR_UNAVAILABLE);
    cr_assert_lt(th_now_s() - t0, 3.0);
    /* a wrong token is refused by the master: AUTH */
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"owner\",\"cluster_id\":\"emb\",\"cluster_token\":\"bad\",\"node_id\":\"o\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s/o/s.sock\",\"segment_bytes\":\"8MiB\","
             "\"reserve\":{\"grant_bytes\":\"4MiB\"}}", fluxon_node_port(master), dir);
    cr_assert_eq(fluxon_node_start(cfg, &n), FLUXON_ERR_AUTH);
    cr_assert_null(n);
    /* no-ops */
    fluxon_node_stop(NULL);
    fluxon_client_close(NULL);
}

Test(node, client_errors_and_owner_going_away, .fini = fini, .timeout = 60)
{
    start_master();
    owner_a = start_owner("oa", FLUXON_OK);
    fluxon_client *c = NULL;
    cr_assert_eq(fluxon_client_open(NULL, &c), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_client_open("{\"role\":\"master\",\"cluster_id\":\"emb\"}", &c), FLUXON_ERR_CONFIG);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"role\":\"external\",\"cluster_id\":\"emb\",\"cluster_token\":\"tok\","
                              "\"socket\":\"%s/nowhere.sock\",\"timeout_ms\":200}", dir);
    double t0 = th_now_s();
    cr_assert_eq(fluxon_client_open(cfg, &c), FLUXON_ERR_UNAVAILABLE);
    cr_assert_lt(th_now_s() - t0, 2.0, "bounded by timeout_ms");
    cr_assert_null(open_client("oa", "wrong"));
    c = open_client("oa", "tok");
    cr_assert_not_null(c);
    cr_assert_eq(fluxon_client_ping(NULL, 0, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    size_t len;
    cr_assert_eq(fluxon_client_stats(c, NULL, 10, &len), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_client_stats(c, (char[4]){0}, 4, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    fluxon_node_stop(owner_a);
    owner_a = NULL;
    int rc = FLUXON_OK;
    for (int i = 0; i < 100 && rc == FLUXON_OK; i++) {
        rc = fluxon_client_ping(c, 0, NULL);
        if (rc == FLUXON_OK) th_sleep_ms(10);
    }
    cr_assert_eq(rc, FLUXON_ERR_UNAVAILABLE);
    fluxon_client_close(c);
}

Test(node, status_strings)
{
    cr_assert_str_eq(fluxon_status_string(FLUXON_OK), "FLUXON_OK");
    cr_assert_str_eq(fluxon_status_string(FLUXON_ERR_AUTH), "FLUXON_ERR_AUTH");
    cr_assert_str_eq(fluxon_status_string(FLUXON_ERR_INTERNAL), "FLUXON_ERR_INTERNAL");
    cr_assert_str_eq(fluxon_status_string(-12345), "FLUXON_ERR_UNKNOWN");
    for (int s = FLUXON_ERR_UNKNOWN_OUTCOME; s <= FLUXON_IN_PROGRESS; s++)
        cr_assert(strcmp(fluxon_status_string(s), "FLUXON_ERR_UNKNOWN") != 0, "status %d has a name", s);
    cr_assert_str_eq(fluxon_version(), FLUXON_VERSION_STRING);
}

Test(node, owner_restart_makes_the_mapping_stale_and_a_new_open_reattaches, .fini = fini, .timeout = 60)
{
    start_master();
    owner_a = start_owner("oa", FLUXON_OK);
    fluxon_client *c = open_client("oa", "tok");
    cr_assert_not_null(c);
    fluxon_segment_info si, si2;
    size_t n = 0;
    cr_assert_eq(fluxon_wait_local_segments_ready(c, 1000, &si, 1, &n), FLUXON_OK);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(si.node_id, "oa");
    cr_assert_gt(si.len, 0);
    /* the owner restarts: a new generation */
    fluxon_node_stop(owner_a);
    owner_a = start_owner("oa", FLUXON_OK);
    int rc = FLUXON_OK;
    for (int i = 0; i < 200 && rc == FLUXON_OK; i++) {
        rc = fluxon_wait_local_segments_ready(c, 100, &si2, 1, &n);
        if (rc == FLUXON_OK) th_sleep_ms(10);
    }
    cr_assert_eq(rc, FLUXON_ERR_STALE, "the old mapping is reported stale");
    fluxon_client_close(c);
    c = open_client("oa", "tok");
    cr_assert_not_null(c, "a new open re-attaches");
    cr_assert_eq(fluxon_wait_local_segments_ready(c, 1000, &si2, 1, &n), FLUXON_OK);
    cr_assert_gt(si2.generation, si.generation);
    fluxon_client_close(c);
}
