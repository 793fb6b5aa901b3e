/* cli_util.c — see cli_util.h: helpers the CLI commands share (public API and libc only). */
#include "cli_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

unsigned fx_cli_timeout_ms = 30000;

#define CLI_CONFIG_MAX (16u << 20)

char *fx_cli_read_config(const char *who, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: config %s is a directory\n", who, path);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot read config %s: %s\n", who, path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *nb = cap < CLI_CONFIG_MAX ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                fprintf(stderr, "%s: config %s is too large (at most %u bytes)\n", who, path,
                        (unsigned)CLI_CONFIG_MAX);
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = 0;
    if (buf && strlen(buf) != len) { /* what follows it would be dropped unread */
        fprintf(stderr, "%s: config %s has a NUL byte at byte %zu: a config is JSON text\n", who, path, strlen(buf));
        free(buf);
        buf = NULL;
    }
    return buf;
}

int fx_cli_json_call(fluxon_client *c, fx_cli_json_fn fn, size_t cap, char **buf_p)
{
    size_t len = 0;
    char *buf = malloc(cap);
    int rc = buf ? fn(c, buf, cap, &len) : FLUXON_ERR_NOMEM;
    if (rc == FLUXON_ERR_INVALID_ARGUMENT && buf && len >= cap) {
        char *nb = realloc(buf, len + 1);
        if (nb) {
            buf = nb;
            rc = fn(c, buf, len + 1, &len);
        }
    }
    if (rc != FLUXON_OK) {
        free(buf);
        buf = NULL;
    }
    *buf_p = buf;
    return rc;
}

void fx_cli_explain_unavailable(fluxon_client *c, const char *what, int rc)
{
    if (rc != FLUXON_ERR_UNAVAILABLE && rc != FLUXON_ERR_UNKNOWN_OUTCOME) return;
    char *js = NULL;
    if (fx_cli_json_call(c, fluxon_client_stats, 1 << 16, &js) != FLUXON_OK) return;
    const char *owner = strstr(js, "\"owner\":{\"node_id\":\"");
    char id[80] = "?";
    if (owner) sscanf(owner + strlen("\"owner\":{\"node_id\":\""), "%79[^\"]", id);
    if (strstr(js, "\"master_connected\":false"))
        fprintf(stderr, "fluxon: %s: owner %s is not connected to its master (not registered yet, or the master is "
                        "down or unreachable); it keeps retrying, and its log names the master it waits for\n",
                what, id);
    free(js);
}

/* The gauge family's value in one node's metrics (prom text): 0 or 1, -1 when absent. */
static int cli_gauge01(const char *prom, const char *family)
{
    char key[96];
    snprintf(key, sizeof key, "\n%s{", family);
    const char *p = strstr(prom, key);
    p = p ? strstr(p, "} ") : NULL;
    return p ? atoi(p + 2) != 0 : -1;
}

/* 1 while a node's prefault threads run (an owner's segment and the peer segments it mapped,
 * any node's heap reserve), 0
 * once done, -1 unknown (no metrics). */
static int cli_node_prefaulting(fluxon_node *node, char **buf, size_t *cap)
{
    size_t len = 0;
    int rc;
    while ((rc = fluxon_node_metrics(node, *buf, *cap, &len)) == FLUXON_ERR_NO_SPACE && *cap < (64u << 20)) {
        char *nb = realloc(*buf, *cap * 2);
        if (!nb) return -1;
        *buf = nb;
        *cap *= 2;
    }
    if (rc != FLUXON_OK) return -1;
    int seg = cli_gauge01(*buf, "fluxon_owner_segment_prefaulting"), heap = cli_gauge01(*buf, "fluxon_heap_prefaulting"),
        peers = cli_gauge01(*buf, "fluxon_owner_peers_prefaulting");
    return seg > 0 || heap > 0 || peers > 0 ? 1 : seg < 0 && heap < 0 ? -1 : 0;
}

/* 1 while the client's own prefault thread runs (its stats), 0 once done, -1 unknown. */
static int cli_client_prefaulting(fluxon_client *c, char **buf, size_t *cap)
{
    size_t len = 0;
    int rc;
    while ((rc = fluxon_client_stats(c, *buf, *cap, &len)) == FLUXON_ERR_INVALID_ARGUMENT && len + 1 > *cap &&
           *cap < (64u << 20)) {
        char *nb = realloc(*buf, len + 1);
        if (!nb) return -1;
        *buf = nb;
        *cap = len + 1;
    }
    const char *key = "\"segment_prefaulting\":";
    const char *p = rc == FLUXON_OK ? strstr(*buf, key) : NULL;
    return p ? strncmp(p + strlen(key), "true", 4) == 0 : -1;
}

int fx_cli_wait_prefault(fluxon_node *const *nodes, unsigned n_nodes, fluxon_client *const *clients,
                         unsigned n_clients, unsigned timeout_ms, const volatile sig_atomic_t *stop)
{
    size_t cap = 1u << 20;
    char *buf = malloc(cap);
    uint64_t deadline = fx_cli_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    int st = buf ? 0 : -1;
    for (unsigned i = 0; buf && i < n_nodes + n_clients; i++)
        for (;;) { /* one that cannot be read (-1) is skipped: the others are still waited for */
            int r = i < n_nodes ? cli_node_prefaulting(nodes[i], &buf, &cap)
                                 : cli_client_prefaulting(clients[i - n_nodes], &buf, &cap);
            if (r == 0) break;
            if (r < 0 || fx_cli_now_ns() >= deadline || (stop && *stop)) {
                st = -1;
                if (r > 0) i = n_nodes + n_clients; /* out of time: stop waiting for any */
                break;
            }
            fx_cli_sleep_ms(10);
        }
    free(buf);
    return st;
}

/* fx_parse_size's units, which this CLI-side code cannot call: the library's internals are
 * static in the amalgamation the binary is built from */
int fx_cli_parse_u64(const char *who, const char *opt, const char *s, uint64_t min, uint64_t max, int units,
                     uint64_t *out)
{
    static const struct { const char *sfx; uint64_t mul; } u[] = {
        {"", 1}, {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"KB", 1000}, {"MB", 1000000},
        {"GB", 1000000000}};
    size_t nu = units ? sizeof u / sizeof *u : 1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    size_t k = 0;
    while (k < nu && strcmp(end, u[k].sfx)) k++;
    int ok = *s && end != s && !errno && s[0] != '-' && k < nu && v <= max / u[k].mul && v * u[k].mul >= min;
    if (!ok) {
        fprintf(stderr, "fluxon %s: %s %s: must be an integer in %llu..%llu%s\n", who, opt, s, (unsigned long long)min,
                (unsigned long long)max, units ? " (bytes, or with a unit: B, KiB, MiB, GiB, KB, MB, GB)" : "");
        return -1;
    }
    *out = v * u[k].mul;
    return 0;
}

uint64_t fx_cli_host_ram(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}
