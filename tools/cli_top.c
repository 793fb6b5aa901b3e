/* cli_top.c — `top`: every second, the owner's stats, the master's stats and the node table
 * (public API), shown as a screen: nodes alive/dead, ops/s by op, hit ratio by tier, p50/p99
 * of the latency histograms (from the same catalog /metrics serves), capacity. Rates and
 * percentiles are over the last interval (over the whole run on the first frame); a row per
 * tenant when the owner has tenants or quotas (issue 42). q or Ctrl-C quits; on a terminal
 * stdin is put in non-canonical mode and restored on exit. */
#define _GNU_SOURCE
#include <cJSON.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli_top.h"
#include "cli_util.h"

static volatile sig_atomic_t top_quit;
static void top_on_signal(int sig) { top_quit = sig; }

typedef struct top_frame {
    cJSON *owner, *master, *nodes; /* owned */
    char generation[24];           /* the master's, as its JSON wrote it (not through a double) */
    uint64_t t_ns;
} top_frame;

static void top_frame_free(top_frame *f)
{
    cJSON_Delete(f->owner);
    cJSON_Delete(f->master);
    cJSON_Delete(f->nodes);
    memset(f, 0, sizeof *f);
}

/* The digits of the first `"name":` member in json (the master's stats are one flat
 * object): u64 counters above 2^53, such as the generation (ns since the epoch), do not
 * survive cJSON's double. */
static void top_raw_u64(const char *json, const char *name, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", name);
    const char *p = json ? strstr(json, pat) : NULL;
    size_t n = p ? strspn(p + strlen(pat), "0123456789") : 0;
    snprintf(out, cap, "%.*s", n && n < cap ? (int)n : 1, n && n < cap ? p + strlen(pat) : "?");
}

static cJSON *top_fetch(fluxon_client *c, fx_cli_json_fn fn, char *generation, size_t cap)
{
    char *buf = NULL;
    if (fx_cli_json_call(c, fn, 1 << 16, &buf) != FLUXON_OK) return NULL;
    cJSON *d = cJSON_Parse(buf);
    if (generation) top_raw_u64(buf, "generation", generation, cap);
    free(buf);
    return d;
}

static double top_num(cJSON *o, const char *name)
{
    cJSON *v = cJSON_GetObjectItem(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : cJSON_IsTrue(v) ? 1 : 0;
}

/* cur - prev of member name (cur alone when there is no previous frame) */
static double top_delta(cJSON *cur, cJSON *prev, const char *name)
{
    return top_num(cur, name) - (prev ? top_num(prev, name) : 0);
}

/* the q-quantile (seconds) of histogram name over cur - prev, interpolated in its bucket */
static double top_quantile(cJSON *cur, cJSON *prev, const char *name, double q)
{
    cJSON *bounds = cJSON_GetObjectItem(cur, "hist_bounds_ns");
    cJSON *hb = cJSON_GetObjectItem(cJSON_GetObjectItem(cur, name), "buckets");
    cJSON *pb = prev ? cJSON_GetObjectItem(cJSON_GetObjectItem(prev, name), "buckets") : NULL;
    int nb = cJSON_GetArraySize(hb), nbounds = cJSON_GetArraySize(bounds);
    if (nb < 2 || nbounds != nb - 1) return -1;
    double d[64], total = 0;
    for (int i = 0; i < nb && i < 64; i++) {
        d[i] = cJSON_GetArrayItem(hb, i)->valuedouble - (pb ? cJSON_GetArrayItem(pb, i)->valuedouble : 0);
        total += d[i];
    }
    if (total <= 0) return -1;
    double rank = q * total, cum = 0;
    for (int i = 0; i < nb && i < 64; i++) {
        if (d[i] > 0 && cum + d[i] >= rank) {
            if (i == nb - 1) return cJSON_GetArrayItem(bounds, nbounds - 1)->valuedouble / 1e9;
            double lo = i ? cJSON_GetArrayItem(bounds, i - 1)->valuedouble : 0, hi = cJSON_GetArrayItem(bounds, i)->valuedouble;
            return (lo + (hi - lo) * (rank - cum) / d[i]) / 1e9;
        }
        cum += d[i];
    }
    return -1;
}

static void top_fmt_s(double s, char *out, size_t cap)
{
    if (s < 0) snprintf(out, cap, "%9s", "-");
    else if (s < 1e-3) snprintf(out, cap, "%6.1f us", s * 1e6);
    else if (s < 1) snprintf(out, cap, "%6.2f ms", s * 1e3);
    else snprintf(out, cap, "%6.2f s ", s);
}

static void top_ops(cJSON *cur, cJSON *prev, double dt)
{
    cJSON *by = cJSON_GetObjectItem(cur, "requests_by_op"), *pby = prev ? cJSON_GetObjectItem(prev, "requests_by_op") : NULL;
    printf(prev ? "ops/s       " : "ops         ");
    int shown = 0;
    cJSON *op;
    cJSON_ArrayForEach(op, by) {
        double n = 0, e = 0;
        cJSON *st;
        cJSON_ArrayForEach(st, op) {
            double v = st->valuedouble - (pby ? top_num(cJSON_GetObjectItem(pby, op->string), st->string) : 0);
            n += v;
            if (strcmp(st->string, "OK")) e += v;
        }
        if (n <= 0) continue;
        char err[48] = ""; /* how many of them failed (per second, like n; a count on the first screen) */
        if (e > 0) snprintf(err, sizeof err, " (%.0f %s)", e / dt, e / dt >= 1.5 ? "errors" : "error");
        printf("%s%s %.0f%s", shown++ % 4 == 0 && shown > 1 ? "\n            " : shown > 1 ? "  " : "", op->string,
               n / dt, err);
    }
    printf("%s\n", shown ? "" : "idle");
}

/* bytes as B, KiB, MiB or GiB with one decimal; "-" for a limit that is 0 (none) */
static void top_fmt_bytes(double b, bool zero_is_none, char *out, size_t cap)
{
    if (zero_is_none && b <= 0) snprintf(out, cap, "-");
    else if (b < 1024) snprintf(out, cap, "%.0f B", b);
    else if (b < 1048576) snprintf(out, cap, "%.1f KiB", b / 1024);
    else if (b < 1073741824) snprintf(out, cap, "%.1f MiB", b / 1048576);
    else snprintf(out, cap, "%.1f GiB", b / 1073741824);
}

/* Issue 42: a row per tenant of the owner's "tenants" object (at most 33: the configured
 * ones and "default"), shown when there is more than "default" or a tenant has a quota or
 * a guarantee. Bytes as they are now; counters per second (totals on the first screen). */
static void top_tenants(cJSON *o, cJSON *po, double dt, bool first)
{
    cJSON *ts = cJSON_GetObjectItem(o, "tenants"), *pts = po ? cJSON_GetObjectItem(po, "tenants") : NULL, *t;
    bool limits = false;
    cJSON_ArrayForEach(t, ts) limits |= top_num(t, "quota_bytes") > 0 || top_num(t, "guaranteed_bytes") > 0;
    if (cJSON_GetArraySize(ts) < 2 && !limits) return;
    printf("tenants     %-16s %10s %10s %10s %10s %10s %10s %6s %8s %8s %s   %s   (%s)\n", "tenant", "held", "quota",
           "guaranteed", "pinned", "placed", "on disk", "hit %", "hits", "misses", "evictions (quota, pressure)", "refused (quota, pin)",
           first ? "counts since start" : "counts per second");
    cJSON_ArrayForEach(t, ts) {
        cJSON *pt = pts ? cJSON_GetObjectItem(pts, t->string) : NULL;
        char held[16], quota[16], guar[16], pin[16], placed[16], disk[16], ratio[16] = "-";
        top_fmt_bytes(top_num(t, "bytes"), false, held, sizeof held);
        top_fmt_bytes(top_num(t, "quota_bytes"), true, quota, sizeof quota);
        top_fmt_bytes(top_num(t, "guaranteed_bytes"), true, guar, sizeof guar);
        top_fmt_bytes(top_num(t, "pinned_bytes"), false, pin, sizeof pin);
        top_fmt_bytes(top_num(t, "placed_bytes"), false, placed, sizeof placed); /* other owners' puts, copies */
        top_fmt_bytes(top_num(t, "disk_bytes"), false, disk, sizeof disk);
        double hits = top_delta(t, pt, "hits"), misses = top_delta(t, pt, "misses");
        if (hits + misses > 0) snprintf(ratio, sizeof ratio, "%.1f", 100 * hits / (hits + misses));
        char ev[48], ref[48];
        snprintf(ev, sizeof ev, "%.0f (%.0f, %.0f)", top_delta(t, pt, "evictions") / dt,
                 top_delta(t, pt, "evictions_quota") / dt, top_delta(t, pt, "evictions_pressure") / dt);
        snprintf(ref, sizeof ref, "%.0f (%.0f, %.0f)",
                 (top_delta(t, pt, "quota_refusals") + top_delta(t, pt, "pins_refused")) / dt,
                 top_delta(t, pt, "quota_refusals") / dt, top_delta(t, pt, "pins_refused") / dt);
        printf("            %-16s %10s %10s %10s %10s %10s %10s %6s %8.0f %8.0f %-27s   %s\n", t->string, held, quota,
               guar, pin, placed, disk, ratio, hits / dt, misses / dt, ev, ref);
    }
}

static void top_draw(const top_frame *f, const top_frame *p, bool tty)
{
    cJSON *o = f->owner ? cJSON_GetObjectItem(f->owner, "owner") : NULL;
    cJSON *po = p && p->owner ? cJSON_GetObjectItem(p->owner, "owner") : NULL;
    cJSON *m = f->master, *pm = p ? p->master : NULL;
    double dt = p ? (double)(f->t_ns - p->t_ns) / 1e9 : 1; /* the first frame: totals since start */
    const char *per = p ? "/s" : " (total)";
    if (tty) printf("\033[H\033[2J");
    if (m)
        printf("fluxon top   owner %s   master generation %s   owners alive %.0f dead %.0f   (%s)\n",
               o ? cJSON_GetStringValue(cJSON_GetObjectItem(o, "node_id")) : "?", f->generation,
               top_num(m, "owners_alive"), top_num(m, "owners_dead"), p ? "last second" : "since start; q quits");
    else /* not an empty cluster: a master this owner cannot reach (new user's finding) */
        printf("fluxon top   owner %s   MASTER UNREACHABLE (the owner's master link is down or the master does not "
               "answer: the master's rows are missing)   (%s)\n",
               o ? cJSON_GetStringValue(cJSON_GetObjectItem(o, "node_id")) : "?",
               p ? "last second" : "since start; q quits");
    double keys = top_delta(o, po, "get_keys");
    double loc = top_delta(o, po, "local_hits"), join = top_delta(o, po, "joined_hits"),
           lead = top_delta(o, po, "leader_hits"), pref = top_delta(o, po, "prefix_transferable_keys");
    if (keys > 0)
        printf("hit ratio   %.1f %%  (local %.1f, joined %.1f, leader %.1f)   transferable prefix %.1f %%   keys%s %.0f\n",
               100 * (loc + join + lead) / keys, 100 * loc / keys, 100 * join / keys, 100 * lead / keys,
               100 * pref / keys, per, keys / dt);
    else
        printf("hit ratio   - (no gets)\n");
    top_ops(o, po, dt);
    static const char *const h[][2] = {{"get_start_latency", "get_start"}, {"put_start_latency", "put_start"},
                                       {"commit_latency", "commit"},       {"publish_latency", "publish"},
                                       {"fetch_latency", "remote fetch"},  {"transfer_latency", "get transfer"},
                                       {"push_latency", "push"}};
    printf("latency          p50        p99\n");
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        char a[32], b[32];
        top_fmt_s(top_quantile(o, po, h[i][0], 0.5), a, sizeof a);
        top_fmt_s(top_quantile(o, po, h[i][0], 0.99), b, sizeof b);
        printf("  %-12s %s  %s\n", h[i][1], a, b);
    }
    printf("segment     used %.1f MiB of %.1f MiB   hot %.1f MiB   evictions%s %.0f   handles %.0f   plans %.0f\n",
           top_num(o, "used_bytes") / 1048576, top_num(o, "segment_bytes") / 1048576, top_num(o, "hot_bytes") / 1048576,
           per, top_delta(o, po, "evictions") / dt, top_num(o, "handles_open"), top_num(o, "puts_inflight"));
    if (top_num(o, "disk_on") > 0) /* issue 39 */
        printf("disk        used %.1f MiB of %.1f MiB   records %.0f   to disk%s %.0f   hits%s %.0f   reads in flight %.0f"
               "   checksum failures %.0f\n",
               top_num(o, "disk_used_bytes") / 1048576, top_num(o, "disk_capacity_bytes") / 1048576,
               top_num(o, "disk_records"), per, top_delta(o, po, "evict_to_disk") / dt, per,
               top_delta(o, po, "disk_hits") / dt, top_num(o, "disk_reads_in_flight"), top_num(o, "disk_crc_failures"));
    top_tenants(o, po, dt, !p);
    printf("master      routes %.0f   in flight: puts %.0f gets %.0f   lookups%s %.0f\n", top_num(m, "routes"),
           top_num(m, "inflight_puts"), top_num(m, "inflight_gets"), per, top_delta(m, pm, "lookups") / dt);
    printf("nodes       %-20s %-12s %-6s %s\n", "node_id", "role", "alive", "segment");
    cJSON *n;
    cJSON_ArrayForEach(n, f->nodes) {
        cJSON *id = cJSON_GetObjectItem(n, "node_id"), *role = cJSON_GetObjectItem(n, "role");
        printf("            %-20s %-12s %-6s %.0f MiB\n", cJSON_GetStringValue(id) ? cJSON_GetStringValue(id) : "?",
               cJSON_GetStringValue(role) ? cJSON_GetStringValue(role) : "?",
               cJSON_IsTrue(cJSON_GetObjectItem(n, "alive")) ? "yes" : "no", top_num(n, "segment_bytes") / 1048576);
    }
    fflush(stdout);
}

static int top_args(int argc, char **argv, long *iters, long *interval)
{
    bool once = false; /* --once wins over --iterations, in any order */
    for (int i = 0; i < argc; i++) {
        uint64_t v = 0;
        bool it = !strcmp(argv[i], "--iterations"), iv = !strcmp(argv[i], "--interval-ms");
        if (!strcmp(argv[i], "--once")) {
            once = true;
            continue;
        }
        if ((!it && !iv) || i + 1 == argc ||
            fx_cli_parse_u64("top", argv[i], argv[i + 1], it ? 0 : 10, it ? 1000000000 : 60000, 0, &v)) {
            if (!it && !iv) fprintf(stderr, "fluxon top: unknown argument %s\n", argv[i]);
            else if (i + 1 == argc) fprintf(stderr, "fluxon top: %s needs a value\n", argv[i]);
            fprintf(stderr, "usage: top [--once] [--iterations N (0: until interrupted, the default)] "
                    "[--interval-ms 10..60000]\n");
            return -1;
        }
        *(it ? iters : interval) = (long)v;
        i++;
    }
    if (once) *iters = 1;
    return 0;
}

int fx_cli_top(fluxon_client *c, int argc, char **argv)
{
    long iters = 0, interval = 1000;
    if (top_args(argc, argv, &iters, &interval)) return 2;
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    bool tty = isatty(STDOUT_FILENO), raw = isatty(STDIN_FILENO);
    struct termios saved;
    if (raw && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios t = saved;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* ISIG kept: Ctrl-C still signals */
        tcsetattr(STDIN_FILENO, TCSANOW, &t);
    } else {
        raw = false;
    }
    struct sigaction sa = {.sa_handler = top_on_signal}, old_int, old_term;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    top_frame prev = {0}, cur = {0};
    int ex = 0;
    for (long k = 0; !top_quit && (!iters || k < iters); k++) {
        cur.t_ns = fx_cli_now_ns();
        cur.owner = top_fetch(c, fluxon_client_stats, NULL, 0);
        cur.master = top_fetch(c, fluxon_client_master_stats, cur.generation, sizeof cur.generation);
        cur.nodes = top_fetch(c, fluxon_client_cluster_nodes, NULL, 0);
        if (!cur.owner) {
            fprintf(stderr, "fluxon: top: the owner's stats are unavailable\n");
            ex = 1;
            break;
        }
        top_draw(&cur, k ? &prev : NULL, tty);
        ex = cur.master ? 0 : 1; /* the last frame says whether the master answered */
        top_frame_free(&prev);
        prev = cur;
        memset(&cur, 0, sizeof cur);
        if (iters && k + 1 == iters) break;
        struct pollfd pf = {STDIN_FILENO, POLLIN, 0};
        uint64_t end = fx_cli_now_ns() + (uint64_t)interval * 1000000u;
        for (uint64_t now = fx_cli_now_ns(); !top_quit && now < end; now = fx_cli_now_ns()) {
            int r = poll(&pf, raw ? 1 : 0, (int)((end - now) / 1000000u) + 1);
            char ch;
            if (r > 0 && read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q')) top_quit = 1;
        }
    }
    top_frame_free(&prev);
    top_frame_free(&cur);
    if (raw) tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    top_quit = 0;
    return ex;
}
