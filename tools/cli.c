/* cli.c — the `fluxon` command line (like SQLite's shell.c, kept out of the library:
 * it uses only the public API of include/fluxon.h). Roles run in the foreground until
 * SIGINT/SIGTERM; `--role=external` runs one client command; `demo` runs an embedded
 * cluster in this process. Exit status: 0 ok, 1 runtime error, 2 usage/config error,
 * 3 outcome unknown (FX_CLI_EXIT_UNKNOWN). */
#define _GNU_SOURCE
#include <stdbool.h>
#include <cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_bench.h"
#include "cli_hot.h"
#include "cli_kv.h"
#include "cli_metrics.h"
#include "cli_top.h"
#include "cli_replay.h"
#include "cli_util.h"
#include "fluxon.h"

#ifndef FX_GIT_COMMIT
#define FX_GIT_COMMIT "unknown" /* built without the Makefile */
#endif

#define EXIT_USAGE 2

static void usage(FILE *f)
{
    fprintf(f,
            "usage:\n"
            "  fluxon --role=master   --config FILE        run the master (foreground)\n"
            "  fluxon --role=owner    --config FILE        run an owner (foreground)\n"
            "  fluxon --role=external --config FILE CMD    run one client command:\n"
            "      ping [--count N]      round trips external->owner and external->owner->master\n"
            "                            (Ctrl-C: prints the figures so far, exit status 130)\n"
            "      stat [--json]         the cluster's nodes\n"
            "      stats                 this client's and its owner's counters (JSON)\n"
            "      master-stats          the master's KV counters and in-flight records (JSON)\n"
            "      put KEY FILE|-        store a value (a file, or stdin)\n"
            "      get KEY [-o FILE]     print (or save) a value\n"
            "      del KEY               delete a key\n"
            "      pin TTL_MS KEY...     keep values this owner holds for TTL_MS ms (0 unpins; docs/tenants.md)\n"
            "      ls [PREFIX]           list keys by prefix\n"
            "      tenant set NAME [--quota BYTES] [--guaranteed BYTES] [--admin-token T]   a tenant's quota and\n"
            "                            guaranteed share on this owner, at once (docs/tenants.md)\n"
            "      top [--once] [--iterations N] [--interval-ms 10..60000]   live view: nodes, hit ratio,\n"
            "                            ops/s, p50/p99 (q quits) [1000]; --iterations 0 (the default): until interrupted\n"
            "      hot [--batch N] [--value-len B] [--iters N]   the hostless hot path in steady state against\n"
            "                            this owner: restores of one batch, then fresh puts (p50/p90/p99)\n"
            "  fluxon demo [OPTIONS]                       replay an LLM trace through the hostless API\n"
            "                                              (its options: below)\n"
            "  fluxon bench-hostless [--batch N] [--value-len B] [--iters N]   hostless API latencies\n"
            "  fluxon bench-kv [--value-len B] [--count N]                    plain put/get ops/s\n"
            "  fluxon bench-batch [--batch N] [--value-len B] [--iters N]     batch copy API vs hostless C, GB/s\n"
            "  fluxon --help | --version\n"
            "Exit status: 0 ok; 1 runtime error (a missing key included); 2 usage or configuration error\n"
            "(also wrong credentials, a node_id already taken, a listen port in use); 3 outcome unknown: a\n"
            "put was sent but not confirmed (FLUXON_ERR_UNKNOWN_OUTCOME: the owner lost its master, or no\n"
            "answer came in time) - the owner holds the value and publishes it when its master\n"
            "answers; read it back to know; or a del an owner holding a copy has not confirmed yet\n"
            "(it is down): run del again to know.\n"
            "Config fields and defaults: docs/config.md.\n\n");
    fx_cli_replay_usage(f); /* every demo option, as `fluxon demo --help` prints them */
}

/* configuration-like failures (bad config, wrong credentials, node_id taken) exit 2 */
static int exit_for(int status)
{
    return status == FLUXON_ERR_CONFIG || status == FLUXON_ERR_AUTH || status == FLUXON_ERR_BUSY ? EXIT_USAGE : 1;
}

/* The config's "metrics_listen" ("" when absent or not a string: the library validated it) */
static void metrics_listen_of(const char *json, char *out, size_t cap)
{
    out[0] = 0;
    cJSON *doc = cJSON_Parse(json);
    cJSON *v = cJSON_GetObjectItem(doc, "metrics_listen");
    if (cJSON_IsString(v)) snprintf(out, cap, "%s", v->valuestring);
    cJSON_Delete(doc);
}

/* The config's log_level is "off": its errors are not logged. */
static bool log_off_in(const char *json)
{
    cJSON *doc = cJSON_Parse(json);
    cJSON *v = cJSON_GetObjectItem(doc, "log_level");
    bool off = cJSON_IsString(v) && !strcasecmp(v->valuestring, "off");
    cJSON_Delete(doc);
    return off;
}

/* A signal pending in the blocked set, without waiting: 0 when none. */
static int pending_signal(const sigset_t *set)
{
    struct timespec zero = {0, 0};
    int sig = sigtimedwait(set, NULL, &zero);
    return sig > 0 ? sig : 0;
}

/* Runs a master or owner in the foreground like a daemon: its own setup has no deadline,
 * then it waits for its master (an owner started first keeps retrying and logs every 5 s)
 * — without bound unless the config sets start_timeout_ms; SIGINT/SIGTERM stop it at any
 * point. AUTH (wrong credentials) and BUSY (node_id taken) end it with exit status 2. */
static int run_node(const char *json, int bounded, uint32_t start_timeout_ms)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* node threads inherit the mask */
    fluxon_node *node = NULL;
    int rc = fluxon_node_launch(json, &node);
    if (rc != FLUXON_OK) {
        const char *why = fluxon_last_error_message();
        /* the reason was logged just above, unless the config's log_level hides errors */
        bool hidden = why[0] && log_off_in(json);
        fprintf(stderr, "fluxon: node did not start: %s%s%s\n", fluxon_status_string(rc), hidden ? ": " : "",
                hidden ? why : "");
        return exit_for(rc);
    }
    char ml[300];
    metrics_listen_of(json, ml, sizeof ml);
    fx_cli_metrics *metrics = NULL;
    if (ml[0] && !(metrics = fx_cli_metrics_start("metrics_listen", ml, &node, 1, NULL))) {
        fluxon_node_stop(node);
        return EXIT_USAGE;
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int sig = 0;
    while ((rc = fluxon_node_wait_ready(node, 200)) == FLUXON_ERR_TIMEOUT && !(sig = pending_signal(&set))) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        double ms = (t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6;
        if (bounded && ms >= start_timeout_ms) {
            fprintf(stderr, "fluxon: no master answered within start_timeout_ms %u; exiting\n", start_timeout_ms);
            fx_cli_metrics_stop(metrics);
            fluxon_node_stop(node);
            return 1;
        }
    }
    if (rc != FLUXON_OK && rc != FLUXON_ERR_TIMEOUT) {
        fprintf(stderr, "fluxon: node did not start: %s\n", fluxon_status_string(rc));
        fx_cli_metrics_stop(metrics);
        fluxon_node_stop(node);
        return exit_for(rc);
    }
    while (!sig && sigwait(&set, &sig) != 0) {}
    fprintf(stderr, "fluxon: %s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    fx_cli_metrics_stop(metrics);
    fluxon_node_stop(node);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static volatile sig_atomic_t ping_interrupted;
static void ping_on_sigint(int sig) { ping_interrupted = sig; }

/* Prints the figures of the first n round trips (sorted in place). */
static void ping_print(uint64_t *rtt, long n, const char *label, const char *note)
{
    qsort(rtt, (size_t)n, sizeof *rtt, cmp_u64);
    printf("%-26s n=%ld  p50 %8.1f us  p99 %8.1f us  max %8.1f us%s\n", label, n, rtt[n / 2] / 1e3,
           rtt[(size_t)((n - 1) * 0.99)] / 1e3, rtt[n - 1] / 1e3, note);
}

/* Returns 0, 1 (a ping failed) or 130 (interrupted: the figures so far are printed). */
static int ping_series(fluxon_client *c, int to_master, long count, const char *label)
{
    uint64_t *rtt = malloc((size_t)count * sizeof *rtt);
    if (!rtt) return 1;
    long i = 0;
    for (; i < count && !ping_interrupted; i++) {
        int rc = fluxon_client_ping(c, to_master, &rtt[i]);
        if (rc != FLUXON_OK) {
            fprintf(stderr, "fluxon: ping %s failed at %ld: %s\n", label, i, fluxon_status_string(rc));
            if (to_master) fx_cli_explain_unavailable(c, "ping", rc);
            if (i) ping_print(rtt, i, label, "  (before the failure)");
            free(rtt);
            return 1;
        }
        if (isatty(STDERR_FILENO) && count >= 10000 && (i + 1) % (count / 10) == 0)
            fprintf(stderr, "\r%s: %ld of %ld", label, i + 1, count);
    }
    if (isatty(STDERR_FILENO) && count >= 10000) fprintf(stderr, "\r%*s\r", 60, "");
    if (i) ping_print(rtt, i, label, i < count ? "  (interrupted)" : "");
    free(rtt);
    if (i < count) {
        fprintf(stderr, "fluxon: ping interrupted after %ld of %ld round trips\n", i, count);
        return 130;
    }
    return 0;
}

static int cmd_ping(fluxon_client *c, int argc, char **argv)
{
    long count = 1000;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--count") == 0 && i + 1 == argc) {
            fprintf(stderr, "fluxon: ping: --count needs a value\n");
            return EXIT_USAGE;
        } else if (strcmp(argv[i], "--count") == 0) {
            char *end;
            count = strtol(argv[++i], &end, 10);
            if (*end || count <= 0 || count > 100000000) {
                fprintf(stderr, "fluxon: ping: --count %s must be an integer in 1..100000000\n", argv[i]);
                return EXIT_USAGE;
            }
        } else {
            fprintf(stderr, "fluxon: ping: unknown argument %s\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    struct sigaction sa = {0};
    sa.sa_handler = ping_on_sigint;
    sigaction(SIGINT, &sa, NULL); /* Ctrl-C: stop and print the figures so far */
    sigaction(SIGTERM, &sa, NULL);
    int ex = ping_series(c, 0, count, "external->owner");
    if (!ex) ex = ping_series(c, 1, count, "external->owner->master");
    return ex;
}

static int cmd_stat(fluxon_client *c, int argc, char **argv)
{
    int json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else {
            fprintf(stderr, "fluxon: stat: unknown argument %s\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    char *buf = NULL;
    int rc = fx_cli_json_call(c, fluxon_client_cluster_nodes, 1 << 16, &buf);
    if (rc != FLUXON_OK) {
        fprintf(stderr, "fluxon: stat failed: %s\n", fluxon_status_string(rc));
        fx_cli_explain_unavailable(c, "stat", rc); /* as put, get and ping do: the owner has no master */
        return 1;
    }
    if (json) {
        printf("%s\n", buf);
        free(buf);
        return 0;
    }
    /* The library writes this array in a fixed shape (fluxon_client_cluster_nodes);
     * scan it directly so 64-bit generations keep every digit. */
    printf("%-24s %-13s %-20s %-6s %15s %-12s %15s\n", "NODE", "ROLE", "GENERATION", "ALIVE", "SEGMENT_BYTES",
           "SUB_CLUSTER", "PLACED_BYTES");
    for (const char *p = strchr(buf, '{'); p; p = strchr(p + 1, '{')) {
        char id[64] = "", role[16] = "", alive[6] = "", sc[64] = "-";
        unsigned long long gen = 0, seg = 0, placed = 0;
        int n = sscanf(p, "{\"node_id\":\"%63[^\"]\",\"role\":\"%15[^\"]\",\"generation\":%llu,"
                          "\"alive\":%5[a-z],\"segment_bytes\":%llu,\"sub_cluster\":\"%63[^\"]",
                       id, role, &gen, alive, &seg, sc);
        const char *q = strstr(p, "\"placed_bytes\":");
        if (q) placed = strtoull(q + 15, NULL, 10);
        if (n >= 5)
            printf("%-24s %-13s %-20llu %-6s %15llu %-12s %15llu\n", id, role, gen, strcmp(alive, "true") ? "no" : "yes",
                   seg, sc[0] ? sc : "-", placed);
    }
    free(buf);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(fluxon_client *, int, char **);
} external_cmds[] = {{"ping", cmd_ping}, {"stat", cmd_stat},  {"stats", fx_cli_stats}, {"master-stats", fx_cli_master_stats},
                     {"put", fx_cli_put},
                     {"get", fx_cli_get},  {"del", fx_cli_del}, {"pin", fx_cli_pin}, {"ls", fx_cli_ls}, {"top", fx_cli_top},
                     {"hot", fx_cli_hot}, {"tenant", fx_cli_tenant}};

static int run_external(const char *json, int argc, char **argv)
{
    const char *names = "ping, stat, stats, master-stats, put, get, del, pin, ls, top, hot, tenant";
    if (argc < 1) {
        fprintf(stderr, "fluxon: --role=external needs a command (%s)\n", names);
        return EXIT_USAGE;
    }
    int (*fn)(fluxon_client *, int, char **) = NULL;
    for (size_t k = 0; k < sizeof external_cmds / sizeof *external_cmds; k++)
        if (!strcmp(argv[0], external_cmds[k].name)) fn = external_cmds[k].fn;
    if (!fn) {
        fprintf(stderr, "fluxon: unknown external command '%s' (%s)\n", argv[0], names);
        return EXIT_USAGE;
    }
    /* its arguments are checked before the client opens: a usage error exits 2 whether or not an
     * owner listens (each command returns 0 from its check when given no client) */
    int chk = fn(NULL, argc - 1, argv + 1);
    if (chk) return chk;
    /* one command, then exit: mapping every page table of a multi-GiB segment would cost
     * more than the command (1.2 s for 4 GiB), so the CLI does not prefault unless told.
     * The field is added (the document printed again) only to strict JSON without an
     * escaped NUL: cJSON's lenient parse would cut a string there ("s3cret\u0000junk" read
     * as "s3cret") and drop what follows the object, so such a file goes to the library
     * unchanged and is refused with its message (exit 2), as the other roles refuse it */
    const char *jend = NULL;
    cJSON *doc = strstr(json, "\\u0000") ? NULL : cJSON_ParseWithOpts(json, &jend, 1);
    char *cjson = NULL;
    const cJSON *to = doc ? cJSON_GetObjectItemCaseSensitive(doc, "timeout_ms") : NULL;
    if (cJSON_IsNumber(to) && to->valuedouble >= 1 && to->valuedouble <= 4294967295.0)
        fx_cli_timeout_ms = (unsigned)to->valuedouble; /* a bad value: the open below refuses it */
    if (doc && cJSON_IsObject(doc) && !cJSON_GetObjectItemCaseSensitive(doc, "prefault_segment") &&
        cJSON_AddFalseToObject(doc, "prefault_segment"))
        cjson = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    fluxon_client *c = NULL;
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old); /* the client's thread never takes Ctrl-C: this one does */
    int rc = fluxon_client_open(cjson ? cjson : json, &c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(cjson);
    if (rc != FLUXON_OK) {
        fprintf(stderr, "fluxon: cannot open client: %s\n", fluxon_status_string(rc));
        return exit_for(rc);
    }
    int ex = fn(c, argc - 1, argv + 1);
    fluxon_client_close(c);
    return ex;
}

int main(int argc, char **argv)
{
    const char *role = NULL, *config = NULL;
    int i = 1;
    /* a closed stdout or stderr pipe (`| head`, a log collector restarted) is a failed write
     * (EPIPE), never the death of a daemon (new user's finding) */
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 2 && strcmp(argv[1], "demo") == 0) return fx_cli_replay_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "bench-hostless") == 0) return fx_cli_bench_hostless(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "bench-kv") == 0) return fx_cli_bench_kv(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "bench-batch") == 0) return fx_cli_bench_batch(argc - 1, argv + 1);
    if (argc == 2 && (!strcmp(argv[1], "help") || !strcmp(argv[1], "version"))) /* as --help, --version */
        argv[1] = argv[1][0] == 'h' ? "--help" : "--version";
    for (; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("fluxon %s (commit %s)\n", fluxon_version(), FX_GIT_COMMIT); /* the Makefile's GIT_STAMP */
            return 0;
        } else if (!strncmp(a, "--role=", 7) || !strcmp(a, "--role") || !strncmp(a, "--config=", 9) ||
                   !strcmp(a, "--config")) {
            bool is_role = !strncmp(a, "--role", 6);
            const char *name = is_role ? "--role" : "--config";
            size_t nl = strlen(name);
            if (a[nl] == '=') v = a + nl + 1;
            else if (i + 1 < argc) v = argv[++i];
            if (!v || !*v) {
                fprintf(stderr, "fluxon: %s needs %s\n", name, is_role ? "master, owner or external" : "FILE");
                return EXIT_USAGE;
            }
            const char **slot = is_role ? &role : &config;
            if (*slot && strcmp(*slot, v)) {
                fprintf(stderr, "fluxon: %s given twice (%s, %s)\n", name, *slot, v);
                return EXIT_USAGE;
            }
            *slot = v;
        } else if (a[0] == '-' && (!role || strcmp(role, "external"))) {
            fprintf(stderr, "fluxon: unknown option %s (see fluxon --help)\n", a);
            return EXIT_USAGE;
        } else {
            break; /* the external command starts here */
        }
    }
    if (!role) {
        fprintf(stderr, "fluxon: --role is missing\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(role, "master") && strcmp(role, "owner") && strcmp(role, "external")) {
        fprintf(stderr, "fluxon: --role=%s: must be master, owner or external\n", role);
        return EXIT_USAGE;
    }
    if (!config) {
        fprintf(stderr, "fluxon: --role=%s needs --config FILE\n", role);
        return EXIT_USAGE;
    }
    char *json = fx_cli_read_config("fluxon", config);
    if (!json) return EXIT_USAGE;
    /* the file's "role" must agree with --role */
    cJSON *doc = cJSON_Parse(json);
    const char *frole = doc ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "role")) : NULL;
    if (doc && frole && strcmp(frole, role) != 0) {
        fprintf(stderr, "fluxon: config %s: role: \"%s\" does not match --role=%s\n", config, frole, role);
        cJSON_Delete(doc);
        free(json);
        return EXIT_USAGE;
    }
    /* a daemon waits for its master without bound unless the config bounds it */
    cJSON *sto = doc ? cJSON_GetObjectItemCaseSensitive(doc, "start_timeout_ms") : NULL;
    int bounded = cJSON_IsNumber(sto) && sto->valuedouble >= 1 && sto->valuedouble <= 4e9;
    uint32_t start_timeout_ms = bounded ? (uint32_t)sto->valuedouble : 0;
    cJSON_Delete(doc);
    int ex;
    if (strcmp(role, "external") == 0) {
        ex = run_external(json, argc - i, argv + i);
    } else {
        if (i < argc) {
            fprintf(stderr, "fluxon: unexpected argument %s\n", argv[i]);
            free(json);
            return EXIT_USAGE;
        }
        ex = run_node(json, bounded, start_timeout_ms);
    }
    free(json);
    return ex;
}
