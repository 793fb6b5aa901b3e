/* evict_bench.c — the owner's claims and eviction per request at n resident values (issue
 * 44 P1-P6: each was O(values) per request). An embedded master and one owner in this
 * process whose hot tier holds n values of 4 KiB; filled with batch puts of 64 (the
 * chain-tail admission included), then, each put batch needing 64 evictions:
 *   same size   64 x 4 KiB: the eviction walk, the claims queue;
 *   other size  64 x 8 KiB: no grant serves it, so grants of 4 KiB values are retired,
 *               drained and re-carved (R2/P4 paths);
 * the median and p90 wall time of a batch (client to owner and master and back: the round
 * trips are the same at every n, so a flat figure means a flat owner cost) and the CPU time
 * per batch of the owner's reactor thread, of the master's and of the whole process
 * (/proc schedstat and getrusage: steadier than wall time on a loaded host). */
#include "bench.h"
#include "helpers.h"

#include <inttypes.h>
#include <dirent.h>
#include <sys/resource.h>

#define EVB_BATCH 64
#define EVB_VALUE 4096u

static int evb_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* rounds batch puts of EVB_BATCH values of len bytes under keys "<prefix>-<i>"; times[]
 * receives each batch's wall time in us (may be NULL). Returns the first failure. */
static int evb_puts(fluxon_client *c, const char *prefix, uint64_t first, uint64_t rounds, uint64_t len,
                    const uint8_t *buf, double *times)
{
    char kb[EVB_BATCH][40];
    const char *keys[EVB_BATCH];
    const void *src[EVB_BATCH];
    uint64_t lens[EVB_BATCH];
    int st[EVB_BATCH];
    for (uint64_t r = 0; r < rounds; r++) {
        for (int j = 0; j < EVB_BATCH; j++) {
            snprintf(kb[j], sizeof kb[j], "%s-%" PRIu64, prefix, first + r * EVB_BATCH + (uint64_t)j);
            keys[j] = kb[j];
            src[j] = buf;
            lens[j] = len;
        }
        double t0 = th_now_s();
        int rc = fluxon_batch_put_from(c, keys, EVB_BATCH, src, lens, NULL, st);
        if (times) times[r] = (th_now_s() - t0) * 1e6;
        if (rc != FLUXON_OK) return rc;
        for (int j = 0; j < EVB_BATCH; j++)
            if (st[j] != FLUXON_OK) return st[j];
    }
    return FLUXON_OK;
}

/* CPU seconds of this process (client, master and owner threads) */
static double evb_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ns this process's thread named comm ran on a CPU (/proc schedstat; 0: not found) */
static uint64_t evb_thread_ns(const char *comm)
{
    DIR *d = opendir("/proc/self/task");
    uint64_t ns = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(name, sizeof name, f)) name[0] = 0;
        fclose(f);
        name[strcspn(name, "\n")] = 0;
        if (strcmp(name, comm)) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", de->d_name);
        if ((f = fopen(path, "r"))) {
            unsigned long long v = 0;
            if (fscanf(f, "%llu", &v) == 1) ns += v;
            fclose(f);
        }
    }
    if (d) closedir(d);
    return ns;
}

typedef struct evb_cpu {
    double all_s;
    uint64_t owner_ns, master_ns;
} evb_cpu_t;

static evb_cpu_t evb_cpu(void)
{
    return (evb_cpu_t){evb_cpu_s(), evb_thread_ns("fx-owner-evb"), evb_thread_ns("fx-master")};
}

static void evb_line(FILE *out, uint64_t n, const char *what, double *t, uint64_t k, evb_cpu_t c0)
{
    evb_cpu_t c1 = evb_cpu();
    qsort(t, k, sizeof *t, evb_cmp);
    double p50 = t[k / 2], p90 = t[k * 9 / 10];
    fprintf(out,
            "evict %8" PRIu64 " resident  %-19s batch of %d: wall p50 %7.1f us p90 %7.1f us; cpu a batch: owner "
            "reactor %6.1f us, master %6.1f us, process %6.1f us\n",
            n, what, EVB_BATCH, p50, p90, (double)(c1.owner_ns - c0.owner_ns) / 1e3 / (double)k,
            (double)(c1.master_ns - c0.master_ns) / 1e3 / (double)k, (c1.all_s - c0.all_s) * 1e6 / (double)k);
}

FX_INTERNAL int fx_evict_bench(FILE *out, uint64_t n, uint64_t rounds)
{
    if (!out || n < EVB_BATCH || !rounds) return FLUXON_ERR_INVALID_ARGUMENT;
    char *dir = th_tmpdir();
    if (!dir) return FLUXON_ERR_NOMEM;
    fluxon_node *master = NULL, *owner = NULL;
    fluxon_client *c = NULL;
    uint8_t *buf = fx_calloc(1, 2 * EVB_VALUE);
    double *t = fx_calloc(rounds, sizeof *t);
    int rc = buf && t ? FLUXON_OK : FLUXON_ERR_NOMEM;
    char cfg[1024];
    /* grants of 16 MiB (the eviction and re-carving unit is the same at every n); the hot
     * tier is the whole payload, so the other size always has to retire grants */
    uint64_t grant = 16ull << 20, payload = (n * EVB_VALUE + grant - 1) / grant * grant;
    uint64_t segment = payload + 4096;
    n = payload / EVB_VALUE;
    if (rc == FLUXON_OK) {
        snprintf(cfg, sizeof cfg, "{\"role\":\"master\",\"cluster_id\":\"evb\",\"listen\":\"127.0.0.1:0\",\"log_level\":\"error\"}");
        rc = fluxon_node_start(cfg, &master);
    }
    if (rc == FLUXON_OK) {
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"owner\",\"cluster_id\":\"evb\",\"node_id\":\"evb\",\"master\":\"127.0.0.1:%u\","
                 "\"socket\":\"%s/o.sock\",\"segment_bytes\":%" PRIu64 ",\"reserve\":{\"grant_bytes\":%" PRIu64 "},"
                 "\"hot_capacity_bytes\":%" PRIu64 ",\"segment_touch\":\"off\",\"ring_poll_us\":0,\"log_level\":\"error\"}",
                 fluxon_node_port(master), dir, segment, grant, payload);
        rc = fluxon_node_start(cfg, &owner);
    }
    if (rc == FLUXON_OK) {
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"external\",\"cluster_id\":\"evb\",\"socket\":\"%s/o.sock\",\"timeout_ms\":30000,"
                 "\"prefault_segment\":false,\"log_level\":\"error\"}", dir);
        rc = fluxon_client_open(cfg, &c);
    }
    double t0 = th_now_s();
    uint64_t fill = (n + EVB_BATCH - 1) / EVB_BATCH;
    if (rc == FLUXON_OK) rc = evb_puts(c, "fill", 0, fill, EVB_VALUE, buf, NULL);
    double fill_s = th_now_s() - t0;
    if (rc == FLUXON_OK) {
        fprintf(out, "evict %8" PRIu64 " resident  fill: %" PRIu64 " batches of %d x 4 KiB in %.1f s\n", n, fill,
                EVB_BATCH, fill_s);
        evb_cpu_t c0 = evb_cpu();
        rc = evb_puts(c, "same", 0, rounds, EVB_VALUE, buf, t);
        if (rc == FLUXON_OK) evb_line(out, n, "same size (4 KiB)", t, rounds, c0);
    }
    if (rc == FLUXON_OK) {
        evb_cpu_t c0 = evb_cpu();
        rc = evb_puts(c, "other", 0, rounds, 2 * EVB_VALUE, buf, t);
        if (rc == FLUXON_OK) evb_line(out, n, "other size (8 KiB)", t, rounds, c0);
    }
    if (rc != FLUXON_OK) fprintf(out, "evict %8" PRIu64 " resident  failed: %s\n", n, fluxon_status_string(rc));
    fluxon_client_close(c);
    fluxon_node_stop(owner);
    fluxon_node_stop(master);
    th_rmtree(dir);
    free(dir);
    fx_free(buf);
    fx_free(t);
    return rc;
}
