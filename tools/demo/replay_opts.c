/* replay_opts.c — `fluxon demo` options: the usage text and a table-driven parser (one
 * row per option: its name, what it takes, its range or its setter). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "replay.h"

void rp_usage(FILE *f)
{
    fprintf(f,
            "usage: fluxon demo [--trace FILE] [--requests N] [--value-len BYTES] [--workers N]\n"
            "                   [--owners K] [--tp T] [--group-pages G] [--speed X] [--out DIR]\n"
            "                   [--skip-bad-lines] [--capacity-blocks N] [--config FILE]...\n"
            "                   [--key-prefix P] [--eviction-policy P] [--simulate]\n"
            "                   [--metrics-listen ADDR [--metrics-linger-ms N]]\n"
            "                   [--cpu-owners K] [--cpu-capacity-blocks N] [--writeback-watermark X]\n"
            "                   [--writeback-admission all|second_touch]\n"
            "                   [--disk-dir DIR --disk-capacity-blocks N [--disk-admission A]\n"
            "                    [--disk-direct-io M]] [--prefetch L] [--prefetch-from-owners]\n"
            "                   [--ucx-tls LIST] [--peer-segments map|ucx]\n"
            "                   [--tenants T [--tenant-quotas P0,P1,..]]\n"
            "Replays a Mooncake JSONL trace through the hostless API as an inference engine:\n"
            "per request get_start over its page keys, restore and verify the transferable\n"
            "prefix, then local_fast_put_start/commit of the missed suffix.\n"
            "  --trace FILE         trace [$FLUXON_TRACE, else data/conversation_trace.jsonl from the working\n"
            "                       directory, beside the binary (DIR/data/, DIR/../data/), the installed\n"
            "                       DIR/../share/fluxon/, ../shared/data/ from the working directory]\n"
            "  --requests N         only the first N requests (0: all) [all]\n"
            "  --value-len BYTES    bytes per value (one page of one TP rank; 16KiB, 1MiB, ... too) [4096]\n"
            "  --workers N          worker threads per owner, each its own client [2]\n"
            "  --owners K           embedded owners [1]\n"
            "  --tenants T          split each owner's workers into T tenants t0..t<T-1>, each\n"
            "                       with a quota of 1/T of the owners' hot tier (with --capacity-blocks);\n"
            "                       prints hits per tenant next to the simulator's at its quota alone\n"
            "                       [0: no tenants]\n"
            "  --tenant-quotas P0,P1,..  with --tenants T and --capacity-blocks: tenant k's quota is Pk %%\n"
            "                       of the hot tier (integers 1..100, T of them, summing to at most 100)\n"
            "  --tp T               TP ranks: T keys per page, restored together [1]\n"
            "  --group-pages G      pages per atomic group [1]; a group is stored whole or not at\n"
            "                       all, so with G > 1 a group one of whose pages another chain\n"
            "                       stored already is refused (KEY_EXISTS): this trace's chains\n"
            "                       share their first pages, and --group-pages 2 hits 0 %%\n"
            "  --speed X            replay timestamps X times faster (0.001..1e9); 0 = flat out [0]\n"
            "  --out DIR            write summary.json, timeseries.csv, latency_cdf.csv\n"
            "  --skip-bad-lines     skip and count malformed trace lines\n"
            "  --capacity-blocks N  size each embedded owner for N pages [the whole run]\n"
            "  --config FILE        join a cluster: external config of one owner (repeatable)\n"
            "  --key-prefix P       key namespace [demo]\n"
            "  --eviction-policy P  embedded owners' eviction policy: lru, s3fifo, slru [s3fifo;\n"
            "                       lru with --cpu-owners, as an owner with write-back on]\n"
            "  --simulate           no cluster: play the policy's own code offline over the trace\n"
            "                       at --capacity-blocks (one block = one value) and print the\n"
            "                       prefix-hit ratio next to the reference LRU's\n"
            "  --metrics-listen ADDR  serve GET /metrics of the embedded nodes on host:port while\n"
            "                       the demo runs (port 0: any; the address is printed)\n"
            "  --metrics-linger-ms N  keep serving N ms after the replay (a last scrape) [0]\n"
            "  --cpu-owners K       embedded remote_cache owners (no workers): GPU owners write\n"
            "                       cold groups back to them and demote [0]; needs --capacity-blocks\n"
            "  --cpu-capacity-blocks N  with --cpu-owners: pages each CPU owner holds [--capacity-blocks]\n"
            "  --writeback-watermark X  with --cpu-owners: values colder than X of a GPU owner's\n"
            "                       hot tier are written back ahead of eviction [0.95]\n"
            "  --writeback-admission A  with --cpu-owners: which cold values get a copy: all, or\n"
            "                       second_touch (seen twice) [the owner's default, second_touch]\n"
            "  --disk-dir DIR       a disk tier per embedded owner in DIR/owner<k>; it is\n"
            "                       kept after the run: a second run re-indexes it and hits from it;\n"
            "                       needs --capacity-blocks (the memory it is below)\n"
            "  --disk-capacity-blocks N  values each owner's disk tier holds (capacity_bytes: N\n"
            "                       records of the value's size, in segments of an eighth of it,\n"
            "                       1..64 MiB; at least 2 segments); keys are demo-v<len>-tp<T>:...\n"
            "  --disk-admission A   which evicted values go to disk: all, second_touch [all]\n"
            "  --disk-direct-io M   O_DIRECT: auto, on, off (off: the page cache serves re-reads) [auto]\n"
            "  --prefetch L         a worker starting request i names request i+L's keys to its\n"
            "                       owner (fluxon_prefetch: it reads what its disk holds back now,\n"
            "                       as an engine's scheduler does for its queue); 0: off\n"
            "                       (0..64) [8 with --disk-dir or --prefetch-from-owners, else 0]\n"
            "  --prefetch-from-owners  with --cpu-owners: the owners' prefetch_from_owners, a\n"
            "                       prefetch also copies ahead what the CPU owners hold\n"
            "  --ucx-tls LIST       the embedded owners' ucx_tls: their data plane's UCX transports\n"
            "                       (one process, one host: shared memory), or default (UCX's\n"
            "                       choice between processes: tcp) [sm,self]\n"
            "  --peer-segments MODE the embedded owners' peer_segments: map (owners of one host\n"
            "                       copy through each other's mapped segment) or ucx (always\n"
            "                       UCX, as between hosts) [map]\n"
            "Memory: each embedded owner's segment is sized to the run's distinct pages (1.1 GiB for\n"
            "the whole default trace, 4 KiB pages; x T with --tp T; --requests or --capacity-blocks\n"
            "shrink it). Peak RSS counts it once per mapping, the owner's and each worker client's:\n"
            "3.5 GiB by default, 7.0 GiB with --tp 2; the summary also prints the memory in use.\n"
            "Exit: 0 passed (no errors or checksum failures, counters back to baseline),\n"
            "1 runtime failure, 2 usage error.\n");
}

static int rp_set_trace(rp_opts *o, const char *val)
{
    o->trace = val;
    o->trace_given = 1;
    return 0;
}

static int rp_set_out(rp_opts *o, const char *val)
{
    o->out_dir = val;
    return 0;
}

static int rp_set_key_prefix(rp_opts *o, const char *val)
{
    if (!*val || strlen(val) > 128) {
        fprintf(stderr, "fluxon demo: --key-prefix must be 1..128 bytes\n");
        return -1;
    }
    o->key_prefix = val;
    return 0;
}

static int rp_set_config(rp_opts *o, const char *val)
{
    if (o->n_configs == RP_MAX_OWNERS) {
        fprintf(stderr, "fluxon demo: at most %d --config files\n", RP_MAX_OWNERS);
        return -1;
    }
    char a[PATH_MAX], b[PATH_MAX];
    for (unsigned i = 0; i < o->n_configs; i++) /* one owner joined twice: twice the workers on it */
        if (!strcmp(o->configs[i], val) ||
            (realpath(o->configs[i], a) && realpath(val, b) && !strcmp(a, b))) {
            fprintf(stderr, "fluxon demo: --config %s given twice (one file per owner; --workers sets the "
                    "workers on each)\n", val);
            return -1;
        }
    o->configs[o->n_configs++] = val;
    return 0;
}

static int rp_set_speed(rp_opts *o, const char *val)
{
    char *end;
    errno = 0;
    double d = strtod(val, &end);
    /* at most 1000x slower: the pacing's nanoseconds stay far inside 64 bits */
    if (!*val || *end || errno || !(d == 0 || (d >= 1e-3 && d <= 1e9))) {
        fprintf(stderr, "fluxon demo: --speed %s: must be 0 (as fast as possible) or a number in 0.001..1e9\n", val);
        return -1;
    }
    o->speed = d;
    return 0;
}

static int rp_set_metrics_listen(rp_opts *o, const char *val)
{
    o->metrics_listen = val;
    return 0;
}

/* One option. A flag takes no value; an integer is stored in the field at off (of size
 * 4 or 8) after a check against [min, max]; anything else goes through set. */
typedef struct rp_optdef {
    const char *name;
    enum { RP_OPT_FLAG, RP_OPT_INT, RP_OPT_BYTES, RP_OPT_FN } kind;
    size_t off, size;
    uint64_t min, max;
    int (*set)(rp_opts *o, const char *val);
} rp_optdef;

#define RP_INT(nm, field, lo, hi) \
    {nm, RP_OPT_INT, offsetof(rp_opts, field), sizeof(((rp_opts *)0)->field), lo, hi, NULL}
#define RP_BYTES(nm, field, lo, hi) \
    {nm, RP_OPT_BYTES, offsetof(rp_opts, field), sizeof(((rp_opts *)0)->field), lo, hi, NULL}
#define RP_FN(nm, fn) {nm, RP_OPT_FN, 0, 0, 0, 0, fn}

static int rp_set_policy(rp_opts *o, const char *val)
{
    if (!fx_cli_psim_known(val)) {
        fprintf(stderr, "fluxon demo: --eviction-policy %s: must be one of lru, s3fifo, slru\n", val);
        return -1;
    }
    o->eviction_policy = val;
    return 0;
}

static int rp_set_admission(rp_opts *o, const char *val)
{
    if (strcmp(val, "all") && strcmp(val, "second_touch")) {
        fprintf(stderr, "fluxon demo: --writeback-admission %s: must be one of all, second_touch\n", val);
        return -1;
    }
    o->writeback_admission = val;
    return 0;
}

static int rp_set_disk_dir(rp_opts *o, const char *val)
{
    static char abs_dir[512]; /* a relative path is taken from the current directory (disk.path is absolute) */
    char cwd[300];
    if (*val && *val != '/' && getcwd(cwd, sizeof cwd) &&
        (size_t)snprintf(abs_dir, sizeof abs_dir, "%s/%s", cwd, val) < sizeof abs_dir)
        val = abs_dir;
    if (!*val || *val != '/' || strlen(val) > 200) {
        fprintf(stderr, "fluxon demo: --disk-dir: a directory path of 1..200 bytes (absolute once the current "
                        "directory is put in front of a relative one)\n");
        return -1;
    }
    struct stat sb;
    if (stat(val, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "fluxon demo: --disk-dir %s: exists and is not a directory\n", val);
        return -1;
    }
    o->disk_dir = val;
    return 0;
}

static int rp_set_disk_admission(rp_opts *o, const char *val)
{
    if (strcmp(val, "all") && strcmp(val, "second_touch")) {
        fprintf(stderr, "fluxon demo: --disk-admission %s: must be one of all, second_touch\n", val);
        return -1;
    }
    o->disk_admission = val;
    return 0;
}

static int rp_set_disk_direct(rp_opts *o, const char *val)
{
    if (strcmp(val, "auto") && strcmp(val, "on") && strcmp(val, "off")) {
        fprintf(stderr, "fluxon demo: --disk-direct-io %s: must be one of auto, on, off\n", val);
        return -1;
    }
    o->disk_direct_io = val;
    return 0;
}

static int rp_set_peer_segments(rp_opts *o, const char *val)
{
    if (strcmp(val, "map") && strcmp(val, "ucx")) {
        fprintf(stderr, "fluxon demo: --peer-segments %s: not map or ucx\n", val);
        return -1;
    }
    o->peer_segments_ucx = !strcmp(val, "ucx");
    return 0;
}

static int rp_set_ucx_tls(rp_opts *o, const char *val)
{
    if (!strcmp(val, "default")) { /* UCX's own choice (with peer failure handling: tcp) */
        o->ucx_tls = NULL;
        return 0;
    }
    size_t n = strlen(val);
    bool ok = n > 0 && n < 128 && val[0] != ',' && val[n - 1] != ',' && !strstr(val, ",,");
    for (size_t i = 0; ok && i < n; i++)
        ok = (val[i] >= 'a' && val[i] <= 'z') || (val[i] >= 'A' && val[i] <= 'Z') || (val[i] >= '0' && val[i] <= '9') ||
             strchr("_^:,", val[i]);
    if (!ok) {
        fprintf(stderr, "fluxon demo: --ucx-tls %s: not a UCX transport list (UCX_TLS syntax, e.g. sm,self or tcp)\n",
                val);
        return -1;
    }
    o->ucx_tls = val;
    return 0;
}

static int rp_set_writeback(rp_opts *o, const char *val)
{
    char *end;
    errno = 0;
    double d = strtod(val, &end);
    if (!*val || *end || errno || !(d > 0 && d < 1)) {
        fprintf(stderr, "fluxon demo: --writeback-watermark %s: must be in (0, 1) (a share of the hot tier)\n", val);
        return -1;
    }
    o->writeback_watermark = d;
    return 0;
}

/* --tenant-quotas 50,30,20 (issue 42): integer percents of the hot tier, one per tenant,
 * summing to at most 100; the count (against --tenants) and then the sum are checked in
 * rp_tenant_quotas_check, so a wrong count is named as such whatever the sum */
static int rp_set_tenant_quotas(rp_opts *o, const char *val)
{
    unsigned n = 0;
    const char *s = val;
    for (;;) {
        const char *e = s + strcspn(s, ",");
        unsigned v = 0;
        bool ok = e > s && e - s <= 3;
        for (const char *c = s; ok && c < e; c++) {
            ok = *c >= '0' && *c <= '9';
            v = v * 10 + (unsigned)(*c - '0');
        }
        if (!ok || v < 1 || v > 100) {
            fprintf(stderr, "fluxon demo: --tenant-quotas %s: \"%.*s\" is not a quota: each is an integer percent of "
                            "the hot tier in 1..100, e.g. --tenant-quotas 50,30,20\n", val, (int)(e - s), s);
            return -1;
        }
        if (n == RP_MAX_TENANTS) {
            fprintf(stderr, "fluxon demo: --tenant-quotas %s: more than %d quotas (at most %d tenants)\n", val,
                    RP_MAX_TENANTS, RP_MAX_TENANTS);
            return -1;
        }
        o->tenant_pct[n++] = v;
        if (!*e) break;
        s = e + 1;
    }
    o->n_tenant_pct = n;
    o->tenant_quotas = val;
    return 0;
}

#define RP_PREFETCH_MAX 64
#define RP_PREFETCH_UNSET UINT32_MAX /* 8 with --disk-dir or --prefetch-from-owners, else 0 */
#define RP_PREFETCH_DISK 8

static const rp_optdef rp_optdefs[] = {
    {"--simulate", RP_OPT_FLAG, offsetof(rp_opts, simulate), sizeof(int), 0, 0, NULL},
    RP_FN("--eviction-policy", rp_set_policy),
    {"--skip-bad-lines", RP_OPT_FLAG, offsetof(rp_opts, skip_bad_lines), sizeof(int), 0, 0, NULL},
    RP_FN("--trace", rp_set_trace),
    RP_INT("--requests", requests, 0, 1ull << 40),
    RP_BYTES("--value-len", value_len, 1, 1ull << 30),
    RP_INT("--workers", workers, 1, RP_MAX_WORKERS_PER_OWNER),
    RP_INT("--owners", owners, 1, RP_MAX_OWNERS),
    RP_INT("--tenants", tenants, 0, RP_MAX_TENANTS),
    RP_FN("--tenant-quotas", rp_set_tenant_quotas),
    RP_INT("--tp", tp, 1, 64),
    RP_INT("--group-pages", group_pages, 1, 1u << 20),
    RP_FN("--speed", rp_set_speed),
    RP_FN("--out", rp_set_out),
    RP_INT("--capacity-blocks", capacity_blocks, 1, 1ull << 40),
    RP_FN("--config", rp_set_config),
    RP_FN("--key-prefix", rp_set_key_prefix),
    RP_FN("--metrics-listen", rp_set_metrics_listen),
    RP_INT("--metrics-linger-ms", metrics_linger_ms, 0, 3600000),
    RP_INT("--cpu-owners", cpu_owners, 0, RP_MAX_OWNERS),
    RP_INT("--cpu-capacity-blocks", cpu_capacity_blocks, 1, 1ull << 40),
    RP_FN("--writeback-watermark", rp_set_writeback),
    RP_FN("--writeback-admission", rp_set_admission),
    RP_FN("--disk-dir", rp_set_disk_dir),
    RP_INT("--disk-capacity-blocks", disk_capacity_blocks, 1, 1ull << 40),
    RP_FN("--disk-admission", rp_set_disk_admission),
    RP_FN("--disk-direct-io", rp_set_disk_direct),
    RP_FN("--ucx-tls", rp_set_ucx_tls),
    RP_FN("--peer-segments", rp_set_peer_segments),
    RP_INT("--prefetch", prefetch, 0, RP_PREFETCH_MAX),
    {"--prefetch-from-owners", RP_OPT_FLAG, offsetof(rp_opts, prefetch_from_owners), sizeof(int), 0, 0, NULL},
};

static int rp_opt_apply(const rp_optdef *d, rp_opts *o, const char *val)
{
    char *field = (char *)o + d->off;
    uint64_t v = 0;
    switch (d->kind) {
    case RP_OPT_FLAG:
        *(int *)field = 1;
        return 0;
    case RP_OPT_FN:
        return d->set(o, val);
    case RP_OPT_INT:
    case RP_OPT_BYTES:
        if (fx_cli_parse_u64("demo", d->name, val, d->min, d->max, d->kind == RP_OPT_BYTES, &v)) return -1;
        if (d->size == sizeof(uint32_t)) *(uint32_t *)field = (uint32_t)v;
        else *(uint64_t *)field = v;
        return 0;
    }
    return -1;
}

/* --tenant-quotas against --tenants and --capacity-blocks; fills quota_pages (each
 * tenant's share of --capacity-blocks, rounded down to whole pages) */
static int rp_tenant_quotas_check(rp_opts *o)
{
    if (o->n_tenant_pct && (!o->tenants || o->n_tenant_pct != o->tenants)) {
        char t[32] = "no --tenants T";
        if (o->tenants) snprintf(t, sizeof t, "--tenants %u", o->tenants);
        fprintf(stderr, "fluxon demo: --tenant-quotas %s gives %u quota(s) but %s: one percent per tenant, e.g. "
                        "--tenants 3 --tenant-quotas 50,30,20\n", o->tenant_quotas, o->n_tenant_pct, t);
        return -1;
    }
    unsigned sum = 0;
    for (unsigned k = 0; k < o->n_tenant_pct; k++) sum += o->tenant_pct[k];
    if (sum > 100) {
        fprintf(stderr, "fluxon demo: --tenant-quotas %s: the quotas sum to %u %% of the hot tier, above the limit of "
                        "100 %%\n", o->tenant_quotas, sum);
        return -1;
    }
    if (o->n_tenant_pct && !o->capacity_blocks) {
        fprintf(stderr, "fluxon demo: --tenant-quotas splits the hot tier of --capacity-blocks N: give it, e.g. "
                        "--capacity-blocks 10000\n");
        return -1;
    }
    for (unsigned k = 0; o->capacity_blocks && k < o->tenants; k++) {
        o->quota_pages[k] = o->n_tenant_pct ? o->capacity_blocks * o->tenant_pct[k] / 100 : o->capacity_blocks / o->tenants;
        if (!o->quota_pages[k]) {
            fprintf(stderr, "fluxon demo: tenant t%u's quota, %u %% of --capacity-blocks %llu, is less than a page\n", k,
                    o->n_tenant_pct ? o->tenant_pct[k] : 100 / o->tenants, (unsigned long long)o->capacity_blocks);
            return -1;
        }
    }
    return 0;
}

/* The sizes the flags ask for, before anything is allocated for them (the reference
 * simulator of --capacity-blocks, the segments): the owners' pages in this host's RAM
 * (they are faulted in whole; the cluster start checks the exact segment sizes again), a
 * disk tier's bytes within what disk.capacity_bytes takes (2^53). */
static int rp_sizes_check(const rp_opts *o)
{
    uint64_t ram = fx_cli_host_ram();
    uint64_t slot = rp_slot_bytes(o->value_len);
    uint64_t per_page = slot * o->tp; /* --value-len <= 1 GiB, --tp <= 64: no overflow */
    const struct { const char *flag; uint64_t n, owners; } want[] = {
        {"--capacity-blocks", o->capacity_blocks, o->n_configs ? 0 : o->owners},
        {"--cpu-capacity-blocks", o->cpu_capacity_blocks, o->cpu_owners},
    };
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!want[i].n || !want[i].owners) continue;
        uint64_t add = want[i].n > UINT64_MAX / per_page / want[i].owners ? UINT64_MAX
                                                                           : want[i].n * per_page * want[i].owners;
        total = add > UINT64_MAX - total ? UINT64_MAX : total + add; /* saturating */
    }
    if (ram && total > ram / 10 * 9 && !o->simulate) { /* --simulate maps no segment */
        char cpu[96] = "";
        if (o->cpu_owners)
            snprintf(cpu, sizeof cpu, " and --cpu-capacity-blocks %llu (x %u CPU owner(s))",
                     (unsigned long long)o->cpu_capacity_blocks, o->cpu_owners);
        fprintf(stderr, "fluxon demo: --capacity-blocks %llu (x %u owner(s))%s of %llu-byte slots x %u TP rank(s) "
                "need %s%.1f GiB, more than 90 %% of this host's %.1f GiB of RAM (the segments are faulted in "
                "whole): lower them\n", (unsigned long long)o->capacity_blocks, o->owners, cpu,
                (unsigned long long)slot, o->tp, total == UINT64_MAX ? "over " : "",
                (double)(total == UINT64_MAX ? UINT64_MAX : total) / (1u << 30), (double)ram / (1u << 30));
        return -1;
    }
    uint64_t rec = rp_disk_record_bytes(o->value_len), disk_max = (1ull << 53) - 1;
    if (o->disk_capacity_blocks && o->disk_capacity_blocks > disk_max / rec / o->tp) {
        fprintf(stderr, "fluxon demo: --disk-capacity-blocks %llu: at most %llu with --value-len %llu and --tp %u "
                "(records of %llu bytes; a disk tier holds less than 2^53 bytes)\n",
                (unsigned long long)o->disk_capacity_blocks, (unsigned long long)(disk_max / rec / o->tp),
                (unsigned long long)o->value_len, o->tp, (unsigned long long)rec);
        return -1;
    }
    return 0;
}

/* --owners and --capacity-blocks against --config; owners is 0 while not given */
static int rp_opts_check(rp_opts *o)
{
    if (o->n_configs) {
        if (o->owners && o->owners != o->n_configs) {
            fprintf(stderr, "fluxon demo: --owners %u but %u --config files (one per owner)\n", o->owners,
                    o->n_configs);
            return -1;
        }
        if (o->capacity_blocks) {
            fprintf(stderr, "fluxon demo: --capacity-blocks sizes the embedded owners; not with --config\n");
            return -1;
        }
        if (o->metrics_listen) {
            fprintf(stderr, "fluxon demo: --metrics-listen serves the embedded nodes; not with --config "
                            "(give those nodes metrics_listen)\n");
            return -1;
        }
        o->owners = o->n_configs;
    } else if (!o->owners) {
        o->owners = 1;
    }
    if (o->simulate && !o->capacity_blocks) {
        fprintf(stderr, "fluxon demo: --simulate needs --capacity-blocks N\n");
        return -1;
    }
    if (o->metrics_linger_ms && !o->metrics_listen) {
        fprintf(stderr, "fluxon demo: --metrics-linger-ms %u keeps --metrics-listen serving after the replay: "
                "give --metrics-listen ADDR too\n", (unsigned)o->metrics_linger_ms);
        return -1;
    }
    if ((o->cpu_owners || o->cpu_capacity_blocks) && o->n_configs) {
        fprintf(stderr, "fluxon demo: --cpu-owners/--cpu-capacity-blocks start embedded CPU owners: they cannot "
                        "join a cluster given by --config\n");
        return -1;
    }
    if ((o->cpu_owners || o->cpu_capacity_blocks) && !o->capacity_blocks) {
        char given[64];
        if (o->cpu_owners) snprintf(given, sizeof given, "--cpu-owners %u", (unsigned)o->cpu_owners);
        else snprintf(given, sizeof given, "--cpu-capacity-blocks %llu", (unsigned long long)o->cpu_capacity_blocks);
        fprintf(stderr, "fluxon demo: %s needs --capacity-blocks N (GPU owners of N pages, which evict to the CPU "
                        "owners), e.g. --capacity-blocks 10000 --cpu-owners 1\n", given);
        return -1;
    }
    if (o->cpu_capacity_blocks && !o->cpu_owners) {
        fprintf(stderr, "fluxon demo: --cpu-capacity-blocks %llu sizes the CPU owners: it needs --cpu-owners K (K >= 1)\n",
                (unsigned long long)o->cpu_capacity_blocks);
        return -1;
    }
    if (o->prefetch_from_owners && (!o->cpu_owners || !o->prefetch)) {
        fprintf(stderr, "fluxon demo: --prefetch-from-owners has the workers' prefetches copy what the CPU owners "
                        "hold: it needs --cpu-owners K and a prefetch distance (--prefetch L, L > 0)\n");
        return -1;
    }
    if ((o->writeback_watermark > 0 || o->writeback_admission) && !o->cpu_owners) {
        fprintf(stderr, "fluxon demo: --writeback-watermark/--writeback-admission set how GPU owners copy to CPU "
                        "owners: they need --cpu-owners K\n");
        return -1;
    }
    if ((o->disk_dir != NULL) != (o->disk_capacity_blocks != 0) ||
        ((o->disk_admission || o->disk_direct_io) && !o->disk_dir)) {
        fprintf(stderr, "fluxon demo: the disk tier needs both --disk-dir DIR and --disk-capacity-blocks N "
                        "(--disk-admission and --disk-direct-io only with them)\n");
        return -1;
    }
    if (o->disk_dir && (o->n_configs || !o->capacity_blocks)) {
        fprintf(stderr, "fluxon demo: --disk-dir gives the embedded owners a disk tier below their memory: it "
                        "needs --capacity-blocks N (and no --config), e.g. --capacity-blocks 10000 --disk-dir "
                        "/var/tmp/fx --disk-capacity-blocks 100000\n");
        return -1;
    }
    if (rp_tenant_quotas_check(o)) return -1; /* a wrong count before what the tenants need */
    if (o->tenants && (o->n_configs || o->tenants > o->workers)) {
        fprintf(stderr, "fluxon demo: --tenants T splits the embedded owners' workers (no --config): it needs "
                        "--workers of at least T (each owner serves every tenant), e.g. --tenants 2 --workers 4\n");
        return -1;
    }
    if (o->disk_dir && !strcmp(o->key_prefix, "demo")) {
        /* a disk directory outlives the run: a later run with another value length must
         * not meet these keys (their values would be another length) */
        static char prefix[48];
        snprintf(prefix, sizeof prefix, "demo-v%llu-tp%u", (unsigned long long)o->value_len, o->tp);
        o->key_prefix = prefix;
    }
    if (!o->writeback_watermark) o->writeback_watermark = 0.95;
    if (o->cpu_owners && !o->cpu_capacity_blocks) o->cpu_capacity_blocks = o->capacity_blocks;
    return rp_sizes_check(o);
}

static void rp_opts_defaults(rp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->value_len = 4096;
    o->workers = 2;
    o->tp = 1;
    o->group_pages = 1;
    o->key_prefix = "demo";
    o->eviction_policy = NULL; /* s3fifo, or lru with --cpu-owners (the owner's default) */
    o->writeback_watermark = 0; /* unset: 0.95 with --cpu-owners */
    o->ucx_tls = "sm,self"; /* the embedded owners share one process: shared memory between them */
    o->prefetch = RP_PREFETCH_UNSET;
    const char *env = getenv("FLUXON_TRACE");
    if (env && *env) {
        o->trace = env;
        o->trace_from_env = 1;
    }
}

/* Appends a tried path to o->trace_tried (relative ones shown from cwd); true when it is
 * readable: it becomes o->trace. */
static bool rp_try_trace(rp_opts *o, const char *path, const char *cwd)
{
    size_t l = strlen(o->trace_tried);
    char shown[8400];
    snprintf(shown, sizeof shown, "%s%s%s", path[0] != '/' && cwd ? cwd : "", path[0] != '/' && cwd ? "/" : "", path);
    const char *dup = strstr(o->trace_tried, shown); /* the same path twice (run from the binary's directory) */
    size_t sl = strlen(shown);
    if (!(dup && (dup[sl] == 0 || dup[sl] == ';') && (dup == o->trace_tried || dup[-1] == ' ')))
        snprintf(o->trace_tried + l, sizeof o->trace_tried - l, "%s%s", l ? "; " : "", shown);
    if (access(path, R_OK) != 0) return false;
    snprintf(o->trace_found, sizeof o->trace_found, "%s", path);
    o->trace = o->trace_found;
    return true;
}

#define RP_TRACE_NAME "conversation_trace.jsonl"

/* No --trace and no $FLUXON_TRACE: the first readable of data/conversation_trace.jsonl
 * from the working directory (run in the repository); beside the executable (the binary
 * at the repository's root, DIR/data/, or in a build directory of it, DIR/../data/); the
 * installed copy (make install: PREFIX/bin/fluxon, PREFIX/share/fluxon/); the shared data
 * directory beside the repository (../shared/data/ from the working directory). None:
 * o->trace stays NULL and trace_tried names every path (rp_load says so). */
static void rp_default_trace(rp_opts *o)
{
    char cwd[4096], exe[4096], path[4096 + 64];
    const char *wd = getcwd(cwd, sizeof cwd) ? cwd : NULL;
    o->trace_tried[0] = 0;
    if (rp_try_trace(o, "data/" RP_TRACE_NAME, wd)) return;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0; /* the executable's directory */
            static const char *const rel[] = {"/data/", "/../data/", "/../share/fluxon/"};
            for (size_t k = 0; k < sizeof rel / sizeof rel[0]; k++) {
                snprintf(path, sizeof path, "%s%s" RP_TRACE_NAME, exe, rel[k]);
                if (rp_try_trace(o, path, wd)) return;
            }
        }
    }
    rp_try_trace(o, "../shared/data/" RP_TRACE_NAME, wd);
}

int rp_parse_opts(int argc, char **argv, rp_opts *o, int *help)
{
    _Static_assert(sizeof(o->requests) == 8 && sizeof(o->value_len) == 8 && sizeof(o->capacity_blocks) == 8 &&
                       sizeof(o->workers) == 4 && sizeof(o->owners) == 4 && sizeof(o->tp) == 4 &&
                       sizeof(o->group_pages) == 4 &&
                       sizeof(o->cpu_owners) == 4 && sizeof(o->cpu_capacity_blocks) == 8,
                   "rp_opt_apply stores 4- or 8-byte integers");
    rp_opts_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char name[64];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            *help = 1;
            return 0;
        }
        const rp_optdef *d = NULL;
        for (size_t k = 0; k < sizeof rp_optdefs / sizeof rp_optdefs[0] && !d; k++)
            if (!strcmp(name, rp_optdefs[k].name)) d = &rp_optdefs[k];
        if (!d) {
            fprintf(stderr, "fluxon demo: unknown argument %s (see fluxon demo --help)\n", a);
            return -1;
        }
        if (d->kind == RP_OPT_FLAG && val) {
            fprintf(stderr, "fluxon demo: %s takes no value\n", name);
            return -1;
        }
        if (d->kind != RP_OPT_FLAG && !val) {
            if (i + 1 >= argc) {
                fprintf(stderr, "fluxon demo: %s needs a value\n", name);
                return -1;
            }
            val = argv[++i];
        }
        if (rp_opt_apply(d, o, val)) return -1;
    }
    if (!o->eviction_policy) o->eviction_policy = o->cpu_owners ? "lru" : "s3fifo";
    if (o->prefetch == RP_PREFETCH_UNSET)
        o->prefetch = o->disk_dir || o->prefetch_from_owners ? RP_PREFETCH_DISK : 0;
    if (!o->trace) rp_default_trace(o);
    return rp_opts_check(o);
}
