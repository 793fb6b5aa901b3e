/* replay.h — the parts of `fluxon demo` (cli_replay.c: entry and run order), shared by
 * its modules: replay_opts.c (options), replay_cluster.c (embedded cluster or --config
 * owners, owner counters), replay_worker.c (workers playing requests, progress),
 * replay_collector.c (committed futures), replay_report.c (summary, summary.json,
 * timeseries.csv, latency_cdf.csv). CLI-side: public API of include/fluxon.h only;
 * functions are rp_*. */
#ifndef FX_REPLAY_H
#define FX_REPLAY_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli_simulate.h"
#include "cli_trace.h"
#include "fluxon.h"

#define RP_EXIT_USAGE 2
#define RP_MAX_OWNERS 16
#define RP_MAX_WORKERS_PER_OWNER 64
#define RP_MAX_TENANTS 8 /* --tenants (issue 42) */
#define RP_FUTURES_MAX 256          /* committed futures not yet collected (bounds fds) */
#define RP_FUTURE_TIMEOUT_MS 30000  /* a future pending longer is counted timed out */
#define RP_STALL_MS 120000          /* one request running this long: stop the run */
#define RP_JOIN_MS 60000            /* bound on joining a worker or the collector */
#define RP_BASELINE_MS 5000         /* counters must be back to baseline within this */
#define RP_PREFAULT_WAIT_MS 300000  /* the owners' prefault threads are waited for at most this long */
#define RP_STATS_CAP (64u << 10)
#define RP_NSTATUS 20               /* index -status for FLUXON_OK..-18, 19 = other */
#define RP_MAX_LOGGED_ERRORS 10

/* the options of every backup put (both reject flags are always on for this path) */
#define RP_PUT_FIELDS \
    (FLUXON_PUT_OPT_REJECT_IF_INFLIGHT | FLUXON_PUT_OPT_REJECT_IF_EXIST | FLUXON_PUT_OPT_ATOMIC_GROUPS)

enum rp_call {
    RP_C_GET_START, RP_C_GET_TRANSFER, RP_C_RELEASE, RP_C_CANCEL, RP_C_PUT_START,
    RP_C_PUT_COMMIT, RP_C_PUT_ABORT, RP_C_FUTURE, RP_C_REQUEST, RP_NCALLS
};
extern const char *const rp_call_names[RP_NCALLS];

/* set by SIGINT/SIGTERM while the run is in play */
extern volatile sig_atomic_t rp_interrupted;

typedef struct rp_opts {
    const char *trace;        /* NULL after the options: no default trace was found (trace_tried says where) */
    int trace_given;          /* --trace on the command line (else the default or $FLUXON_TRACE) */
    int trace_from_env;       /* $FLUXON_TRACE */
    char trace_found[4096];   /* the default trace found (rp_default_trace) */
    char trace_tried[4 * 4096 + 64]; /* the default paths tried, "; "-separated (messages) */
    size_t requests;          /* 0 = all */
    uint64_t value_len;
    unsigned workers, owners, tp, group_pages;
    unsigned tenants;         /* issue 42: --tenants T: workers split into T tenants, quotas of 1/T each [0] */
    unsigned tenant_pct[RP_MAX_TENANTS]; /* --tenant-quotas P0,P1,..: percent of the hot tier per tenant */
    unsigned n_tenant_pct;    /* how many were given (0: 100/T % each) */
    const char *tenant_quotas; /* the value as given (messages) */
    uint64_t quota_pages[RP_MAX_TENANTS]; /* per tenant, pages per owner (0: no quota); set by the checks */
    double speed;             /* 0 = as fast as possible */
    const char *out_dir;
    int skip_bad_lines;
    uint64_t capacity_blocks; /* 0 = size for the run */
    const char *configs[RP_MAX_OWNERS];
    unsigned n_configs;
    const char *key_prefix;
    const char *eviction_policy; /* the embedded owners' "eviction_policy" (and the simulator's) */
    int simulate;                /* --simulate: the policy offline over the trace, no cluster */
    const char *metrics_listen; /* serve the embedded nodes' /metrics here while running */
    uint64_t metrics_linger_ms; /* keep serving that long after the replay */
    unsigned cpu_owners;          /* issue 16: embedded remote_cache owners (no workers) */
    uint64_t cpu_capacity_blocks; /* pages each of them holds [--capacity-blocks] */
    double writeback_watermark;   /* GPU owners' writeback_watermark with cpu_owners [0.95] */
    const char *writeback_admission; /* GPU owners' writeback_admission with cpu_owners [NULL: theirs] */
    const char *disk_dir;            /* issue 39: a disk tier per owner in disk_dir/owner<k> */
    uint64_t disk_capacity_blocks;   /* values each disk tier holds */
    const char *disk_admission;      /* its admission [NULL: all] */
    const char *disk_direct_io;      /* its direct_io [NULL: auto] */
    uint32_t prefetch;               /* a worker starting request i names request i+prefetch's keys
                                      * to its owner (fluxon_prefetch); 0: none [8 with a disk tier] */
    int prefetch_from_owners;        /* issue 38: the owners' prefetch_from_owners (copies from CPU owners) */
    const char *ucx_tls;             /* the embedded owners' ucx_tls ["sm,self"; NULL: UCX's choice] */
    int peer_segments_ucx;           /* --peer-segments ucx: owners never map each other's segment [map] */
} rp_opts;

typedef struct rp_samples {
    uint64_t *v;              /* nanoseconds */
    size_t n, cap;
} rp_samples;

/* One per request, written by the worker that played it. */
typedef struct rp_reqrec {
    uint64_t t_done_ns;       /* since the run started */
    uint64_t lat_ns, get_start_ns, put_start_ns;
    uint32_t pages, hits;
    uint32_t tenant;          /* --tenants: the tenant of the worker that played it */
    uint64_t bytes_restored, bytes_written;
    int done;
} rp_reqrec;

typedef struct rp_fut {
    fluxon_future *f;
    uint64_t t_commit_ns;
    struct rp_fut *next;
} rp_fut;

/* Collects committed futures off the workers' path: polls their fds and records the
 * completion latency; a future pending past RP_FUTURE_TIMEOUT_MS is given up. */
typedef struct rp_collector {
    pthread_mutex_t mu;
    pthread_cond_t cv_space, cv_work;
    rp_fut *head, *tail;      /* guarded by mu: handed over by workers */
    size_t inflight;          /* guarded by mu: queued + held by the collector */
    int closing;              /* guarded by mu: no more futures will come */
    pthread_t thread;
    int started, inited;
    /* collector thread only; read after it is joined */
    rp_samples lat;
    uint64_t completed, failed, timed_out;
    uint64_t refused;         /* batches refused at publish (KEY_EXISTS ...): skipped */
    uint64_t fail_by[RP_NSTATUS], refused_by[RP_NSTATUS];
} rp_collector;

struct rp_run;

typedef struct rp_worker {
    struct rp_run *run;
    unsigned id, owner;
    unsigned tenant;          /* --tenants: t<tenant>, whose quota the owners' config gives */
    fluxon_client *client;
    pthread_t thread;
    int started, joined;
    _Atomic uint64_t busy_since_ns; /* start of the request in play, 0 between requests */
    uint64_t t_exit_ns;       /* when its last request ended (read after the join; 0: it played none) */
    uint64_t cpu_ns;          /* the thread's own CPU time over its requests */
    uint64_t requests;        /* requests it played (the workers take the next one free) */
    uint64_t prefetches, prefetch_refused; /* --prefetch: fluxon_prefetch calls queued, refused */
    /* scratch sized for the largest request */
    size_t max_keys;
    uint64_t *page_hash;
    char *keybuf;             /* max_keys × FX_CLI_KEY_MAX */
    const char **keys;
    size_t *klen;
    uint32_t *glens;
    int *kstatus;
    unsigned char *kv;        /* the simulated GPU KV buffer: max_keys × value_len */
    /* results, read after the worker is joined */
    rp_samples lat[RP_NCALLS];
    uint64_t errors_by[RP_NSTATUS], skipped_by[RP_NSTATUS];
    uint64_t raw_hits, contract_violations;
    /* the engine's own work, not the cache's: writing the values of backups, and copying
     * restored values out and checking them (what Mooncake's replay does too) */
    uint64_t fill_ns, check_ns;
} rp_worker;

typedef struct rp_owner_stats {
    uint64_t remote_hits_before, remote_hits_after;
    int remote_hits_known;
    uint64_t handles_open, slots_prepared, gets_inflight, puts_inflight;
    uint64_t before[4];       /* the same four before the run (0 on a fresh cluster) */
    /* capacity eviction (issue 7), after the run; ev_known: the owner reports them */
    uint64_t evictions, evicted_bytes, cohorts, busy_retries, restored, eviction_debt, hot_bytes,
        hot_capacity_bytes, claim_waits, claim_timeouts;
    uint64_t ev_before[10];   /* the counters among them before the run (--config: an owner's lifetime) */
    int ev_known;
    unsigned absent_mask;     /* bit i: baseline key i absent from the stats */
    int stats_ok;
} rp_owner_stats;

/* The cluster the workers talk to: an embedded master + owners (sockets in a temporary
 * directory), or the owners named by --config. ext_cfg[k]: the external config of owner k. */
typedef struct rp_cluster {
    fluxon_node *master, *owners[RP_MAX_OWNERS];
    fluxon_node *cpu[RP_MAX_OWNERS]; /* issue 16: remote_cache owners */
    char dir[32], socks[RP_MAX_OWNERS][160];
    char *ext_cfg[RP_MAX_OWNERS];
    int dir_made, embedded;
} rp_cluster;

/* --tenants (issue 42): one tenant's figures (replay_tenants.c) */
typedef struct rp_tenant_res {
    uint64_t requests, lookups, hits; /* the requests its workers played */
    uint64_t sim_pages;               /* the simulator's cache: its quota pages x the owners */
    uint64_t sim_hits;                /* prefix hits of the same requests alone there */
    double sim_ratio;
    int sim_ok;                       /* 0: no quota (or the simulator did not run) */
    /* the owners' "tenants" stats after the run, summed over the owners (owners_known of
     * them reported the tenant): bytes held, values evicted for its quota, for pressure */
    uint64_t held_bytes, ev_quota, ev_pressure;
    unsigned owners_known;
} rp_tenant_res;

typedef struct rp_run {
    rp_opts o;
    fx_cli_trace trace;
    size_t n_req;
    rp_reqrec *recs;
    uint64_t ref_hits, ref_lookups, distinct_pages;
    uint64_t lru_ref_hits;    /* the reference LRU of capacity_blocks pages (when given) */
    uint64_t policy_ref_hits; /* the eviction policy's own simulator (cli_simulate.c) */
    rp_cluster cl;
    rp_worker *workers;
    unsigned n_workers, n_owners;
    rp_collector col;
    uint64_t t_start_ns, t_end_ns;
    double cpu_user_s, cpu_sys_s; /* the process's CPU from the start to the workers' join */
    uint64_t minor_faults;        /* the process's page faults (minor) over the same span */
    uint64_t t_setup_ns, t_open_ns, t_opened_ns; /* cluster up started; clients' opening started, done (issue 18) */
    _Atomic size_t next_req;
    _Atomic int stop;
    /* progress, relaxed: exact totals are summed from the workers at the end */
    _Atomic uint64_t done, lookups, hits, errors, checksum_failures, length_mismatches, skipped,
        bytes_restored, bytes_written;
    _Atomic unsigned logged_errors;
    rp_owner_stats owners[RP_MAX_OWNERS];
    uint64_t segment_bytes, grant_bytes;
    uint64_t disk_values; /* values each owner's disk tier holds (--disk-capacity-blocks, or the 2-segment floor) */
    rp_tenant_res tenant[RP_MAX_TENANTS]; /* --tenants, after the run */
    /* replay_owner.c, after the run: ring requests taken, their mean wait and its median and
     * p99 bounds, the owners' mean get_start and put_start answers (us; 0: none) */
    uint64_t owner_ring_requests;
    double owner_ring_wait_us, owner_ring_wait_p50_us, owner_ring_wait_p99_us, owner_get_start_us, owner_put_start_us;
} rp_run;

/* An owner counter: its key in fluxon_client_stats (and in summary.json's "owners") and
 * the uint64_t field of rp_owner_stats it is read into. */
typedef struct rp_stat_field {
    const char *key;
    size_t off;
} rp_stat_field;

#define RP_NBASELINE 4
#define RP_NEVICTION 10
_Static_assert(sizeof(((rp_owner_stats *)0)->ev_before) / sizeof(uint64_t) == RP_NEVICTION, "ev_before: one a field");
/* handles_open, slots_prepared, gets_inflight, puts_inflight: back to their value before
 * the run (R1); before[i] holds baseline field i's value before it */
extern const rp_stat_field rp_baseline_fields[RP_NBASELINE];
/* the capacity-eviction counters (issue 7), read after the run */
extern const rp_stat_field rp_eviction_fields[RP_NEVICTION];

static inline uint64_t *rp_stat_at(rp_owner_stats *s, const rp_stat_field *f)
{
    return (uint64_t *)((char *)s + f->off);
}

static inline uint64_t rp_stat_get(const rp_owner_stats *s, const rp_stat_field *f)
{
    return *(const uint64_t *)((const char *)s + f->off);
}

/* ---- status classes (inline here) and latency samples (replay_report.c) ---- */

static inline int rp_status_index(int st)
{
    return st <= 0 && st > -(RP_NSTATUS - 1) ? -st : RP_NSTATUS - 1;
}

static inline int rp_is_capacity_outcome(int st)
{
    return st == FLUXON_ERR_NO_SPACE || st == FLUXON_ERR_KEY_EXISTS ||
           st == FLUXON_ERR_KEY_BEING_WRITTEN || st == FLUXON_ERR_GROUP_REJECTED;
}

void rp_samples_push(rp_samples *s, uint64_t ns);
/* nearest-rank percentile of sorted v[n], p in [0, 100]; 0 when empty */
uint64_t rp_pct(const uint64_t *v, size_t n, double p);

/* ---- options (replay_opts.c) ---- */

void rp_usage(FILE *f);
/* The slot a value of value_len bytes takes (ARCHITECTURE §6): align_up(max(len, 4096), 4096). */
static inline uint64_t rp_slot_bytes(uint64_t value_len)
{
    return (value_len < 4096 ? 4096 : value_len + 4095) / 4096 * 4096;
}
/* A disk record of such a value: its 4 KiB header block and the value's 4 KiB blocks. */
static inline uint64_t rp_disk_record_bytes(uint64_t value_len) { return 4096 + (value_len + 4095) / 4096 * 4096; }
/* fills *o from argv[1..]; -1 after printing a usage error; *help set on --help */
int rp_parse_opts(int argc, char **argv, rp_opts *o, int *help);

/* ---- cluster and owner counters (replay_cluster.c) ---- */

/* brings up the embedded cluster, or reads the --config files; fills r->cl.ext_cfg.
 * 0, or the exit status (1 runtime failure, RP_EXIT_USAGE an unreadable --config) */
int rp_cluster_up(rp_run *r);
void rp_cluster_down(rp_run *r); /* safe on a partly started cluster */
void rp_stats_before(rp_run *r);
/* Waits (bounded) until every embedded owner's prefault thread is done (segment_prefaulting
 * 0 in its metrics), and every worker client's (its stats), so that they do not run under
 * the replay. */
void rp_wait_prefault(rp_run *r);
/* R1: 1 when every owner's counters are back to their baseline within RP_BASELINE_MS */
int rp_stats_after(rp_run *r);

/* ---- future collector (replay_collector.c) ---- */

int rp_collector_init(rp_collector *c); /* 0, or -1 with a message */
int rp_collector_start(rp_collector *c);
/* hands a committed future to the collector; waits (bounded) while RP_FUTURES_MAX are
 * in flight */
void rp_collector_add(rp_collector *c, fluxon_future *f, uint64_t t_commit_ns);
/* no more futures: waits for the collector to settle every one; -1 when it did not
 * finish in time (it still runs) */
int rp_collector_close(rp_collector *c);
void rp_collector_fini(rp_collector *c); /* after a successful close (or none started) */

/* ---- workers (replay_worker.c) ---- */

/* opens o.workers clients per owner on r->cl.ext_cfg; 0, or the exit status (1, or
 * RP_EXIT_USAGE when a config is refused) */
int rp_workers_open(rp_run *r);
/* with SIGINT/SIGTERM caught: starts every worker, shows progress, joins them, then
 * closes the collector (every future settled); -1 when a worker or the collector did not
 * finish in time (it still runs) */
int rp_run_workers(rp_run *r);
void rp_workers_close(rp_run *r);

/* ---- report (replay_report.c) ---- */

struct cJSON;

int rp_mkdirs(const char *dir);
/* replay_sweep.c: removes parent/<prefix>XXXXXX directories an earlier demo left when it
 * was killed (this user's, mode 0700, untouched for min_age_s, nothing in them but sockets
 * no process listens on); returns how many. */
int rp_sweep_stale_dirs(const char *parent, const char *prefix, unsigned min_age_s);
/* waits for the owners' counters (R1), prints the summary, writes the --out files; the
 * exit status of the run (0 passed, 1 not) */
int rp_report(rp_run *r);
/* replay_tenants.c (issue 42): after the run, each tenant's sums and the simulator's figure
 * for its requests alone at its quota; then printed, and "tenants" added to summary.json */
void rp_tenants_tally(rp_run *r);
/* reads owner k's per-tenant counters from its stats document (owner 0 starts the sums) */
void rp_tenants_owner(rp_run *r, unsigned k, const struct cJSON *doc);
void rp_tenants_print(const rp_run *r);
void rp_tenants_json(struct cJSON *j, const rp_run *r);
/* replay_remote.c (issue 16): with --cpu-owners, waits (bounded) for the write-backs to
 * settle, prints hits by tier and the write-back/demotion counters and checks that they
 * reconcile; adds "remote_capacity" to summary (may be NULL). 0, or 1 when they do not. */
int rp_remote_report(rp_run *r, struct cJSON *summary);
/* replay_disk.c (issue 39): with --disk-dir, prints what the disk tiers moved and read back;
 * adds "disk" to summary (may be NULL). 0, or 1 on a checksum failure or counts that do not
 * reconcile. */
int rp_disk_report(rp_run *r, struct cJSON *summary);
/* replay_whose.c: after a checksum failure, into out: whether the vlen bytes at v are zeros,
 * a trace key's value (which), or neither */
void rp_whose_bytes(const rp_run *r, const unsigned char *v, uint64_t vlen, char *out, size_t cap);
/* replay_cluster.c: the first worker's client of owner k, which carries that owner's stats
 * queries (NULL: none); a client's stats document (NULL, said on stderr, when unreadable) */
fluxon_client *rp_owner_client(rp_run *r, unsigned k);
struct cJSON *rp_client_stats(fluxon_client *c);
/* replay_owner.c: a stats histogram {count, sum_ns, buckets} summed over the owners */
#define RP_HIST_NB 64
typedef struct rp_hist_sum {
    uint64_t b[RP_HIST_NB], sum_ns, n;
    size_t nb;
    struct cJSON *bounds; /* hist_bounds_ns, duplicated (the caller deletes it) */
} rp_hist_sum;
/* adds own's histogram `name` (doc: its stats document, for hist_bounds_ns) to s */
void rp_hist_add(rp_hist_sum *s, const struct cJSON *doc, const struct cJSON *own, const char *name);
/* the bound (us) of the bucket holding quantile q of the summed buckets; 0 when empty */
double rp_hist_quantile_us(const uint64_t *b, size_t nb, const struct cJSON *bounds, double q);
/* reads how long ring requests waited for the owners' reactors, and their answer times,
 * into r->owner_* (after the run); print: the summary's line of them */
void rp_owner_side_collect(rp_run *r);
void rp_owner_side_print(const rp_run *r);

#endif /* FX_REPLAY_H */
