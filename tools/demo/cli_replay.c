/* cli_replay.c — `fluxon demo`: plays an inference engine over a Mooncake trace through
 * the hostless API. This file is the run's order: options → trace + reference simulator →
 * cluster up → workers (+ future collector) → report → cluster down. The parts live in
 * replay_opts.c, replay_cluster.c, replay_worker.c, replay_collector.c, replay_report.c
 * (replay.h). CLI-side: public API of include/fluxon.h only. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli_replay.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_metrics.h"
#include "cli_util.h"
#include "replay.h"

const char *const rp_call_names[RP_NCALLS] = {
    "get_start", "get_transfer", "release_views", "cancel_get_transfer", "put_start",
    "put_commit", "put_abort", "future", "request"};

/* The trace, the reference simulators (unlimited, and the LRU of --capacity-blocks),
 * the per-request records and --out; 0, or the exit status. */
static int rp_load(rp_run *r)
{
    rp_opts *o = &r->o;
    char err[512];
    if (!o->trace) { /* no --trace, no $FLUXON_TRACE, no default found (replay_opts.c) */
        fprintf(stderr, "fluxon demo: no trace found: tried %s; pass --trace FILE or set FLUXON_TRACE=FILE\n",
                o->trace_tried);
        return RP_EXIT_USAGE;
    }
    if (fx_cli_trace_load(o->trace, o->requests, o->skip_bad_lines, &r->trace, err, sizeof err)) {
        fprintf(stderr, "fluxon demo: %s%s%s\n", o->trace_given ? "--trace " : "", err,
                o->trace_from_env && !o->trace_given ? " (from FLUXON_TRACE)" : "");
        if (strstr(err, ": cannot open: ") && !o->trace_given)
            fprintf(stderr, "fluxon demo: pass --trace FILE or set FLUXON_TRACE=FILE\n");
        return RP_EXIT_USAGE;
    }
    r->n_req = r->trace.n_reqs;
    for (size_t q = 0; q < r->n_req; q++) /* a request's get_start is one batch of pages x TP ranks */
        if ((uint64_t)r->trace.reqs[q].n_blocks * o->tp > FLUXON_MAX_BATCH_KEYS) {
            fprintf(stderr, "fluxon demo: %s line %zu: %u pages x --tp %u = %llu keys, more than one batch takes "
                    "(FLUXON_MAX_BATCH_KEYS, %d)\n", o->trace, r->trace.reqs[q].line, r->trace.reqs[q].n_blocks, o->tp,
                    (unsigned long long)r->trace.reqs[q].n_blocks * o->tp, FLUXON_MAX_BATCH_KEYS);
            return RP_EXIT_USAGE;
        }
    if (r->n_req == 0) {
        if (r->trace.skipped_lines)
            fprintf(stderr, "fluxon demo: %s holds no request (%zu malformed line(s) skipped, the first at line %zu)\n",
                    o->trace, r->trace.skipped_lines, r->trace.first_skipped_line);
        else
            fprintf(stderr, "fluxon demo: %s holds no request\n", o->trace);
        return RP_EXIT_USAGE;
    }
    fx_cli_sim_result ref;
    if (fx_cli_sim_run(&r->trace, 0, 0, 1, &ref)) {
        fprintf(stderr, "fluxon demo: out of memory for the reference simulator\n");
        return 1;
    }
    r->ref_hits = ref.prefix_hits;
    r->ref_lookups = ref.lookups;
    r->distinct_pages = ref.inserted;
    if (o->capacity_blocks) {
        fx_cli_sim_result lref;
        if (fx_cli_sim_run(&r->trace, 0, o->capacity_blocks, 1, &lref)) {
            fprintf(stderr, "fluxon demo: out of memory for the reference simulator\n");
            return 1;
        }
        r->lru_ref_hits = lref.prefix_hits;
        fx_cli_psim_result pref;
        if (fx_cli_psim_run(&r->trace, 0, o->capacity_blocks, o->eviction_policy, 0, 0, 0, &pref)) {
            fprintf(stderr, "fluxon demo: out of memory for the policy simulator\n");
            return 1;
        }
        r->policy_ref_hits = pref.prefix_hits;
    }
    r->recs = calloc(r->n_req, sizeof *r->recs);
    if (!r->recs) return 1;
    if (o->out_dir && rp_mkdirs(o->out_dir)) {
        fprintf(stderr, "fluxon demo: cannot create --out %s: %s\n", o->out_dir, strerror(errno));
        return RP_EXIT_USAGE;
    }
    struct stat st; /* an existing file, or a directory we cannot write: said now, not after the replay */
    if (o->out_dir && (stat(o->out_dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(o->out_dir, W_OK | X_OK) != 0)) {
        fprintf(stderr, "fluxon demo: --out %s is not a directory this process can write into: %s\n", o->out_dir,
                errno ? strerror(errno) : "not a directory");
        return RP_EXIT_USAGE;
    }
    return 0;
}

/* futures hold fds: allow as many as the hard limit */
static void rp_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* clients open, collector started, workers run, report; 0, or the exit status */
static void rp_on_signal(int sig)
{
    (void)sig;
    rp_interrupted = 1;
}

/* 1 (after saying so) when a SIGINT/SIGTERM came before the replay began */
static int rp_interrupted_before(const char *when)
{
    if (!rp_interrupted) return 0;
    fprintf(stderr, "fluxon demo: interrupted %s; no request was replayed\n", when);
    return 1;
}

static int rp_play_run(rp_run *r)
{
    r->t_open_ns = fx_cli_now_ns();
    int ex = rp_workers_open(r);
    if (ex) return ex;
    r->t_opened_ns = fx_cli_now_ns();
    rp_wait_prefault(r); /* the owners' and the clients' prefault must not run under the replay */
    if (rp_interrupted_before("while the clients opened")) return 1;
    rp_stats_before(r);
    if (rp_collector_init(&r->col) || rp_collector_start(&r->col)) return 1;
    if (rp_run_workers(r) != 0) {
        /* a thread still uses its client: do not close or free anything it may touch */
        fprintf(stderr, "fluxon demo: exiting without cleanup after a hung worker\n");
        fflush(NULL);
        _exit(1);
    }
    return rp_report(r);
}

/* --simulate: the owner's policy code offline (cli_simulate.c), next to the reference LRU */
static int rp_simulate(rp_run *r)
{
    const rp_opts *o = &r->o;
    double lru = r->ref_lookups ? (double)r->lru_ref_hits / (double)r->ref_lookups : 0;
    double pol = r->ref_lookups ? (double)r->policy_ref_hits / (double)r->ref_lookups : 0;
    double unl = r->ref_lookups ? (double)r->ref_hits / (double)r->ref_lookups : 0;
    printf("fluxon demo --simulate: %s, %zu requests, %llu block lookups, capacity %llu blocks\n", o->trace, r->n_req,
           (unsigned long long)r->ref_lookups, (unsigned long long)o->capacity_blocks);
    printf("policy %-8s %.2f %% prefix hits (%llu)\n", o->eviction_policy, 100 * pol,
           (unsigned long long)r->policy_ref_hits);
    printf("reference LRU   %.2f %% prefix hits\nunlimited       %.2f %% prefix hits\n", 100 * lru, 100 * unl);
    if (o->cpu_owners) { /* issue 38: a CPU tier under each write-back admission rule */
        static const char *const adm[] = {"all", "second_touch"}; /* FX_WB_ADMIT_* */
        uint64_t cpu_blocks = (uint64_t)o->cpu_owners * o->cpu_capacity_blocks;
        /* and the seeds' prefix-depth rule (a chain's first N blocks), which the owner does
         * not offer: it cannot know a value's position, and on the conversation trace it
         * keeps fewer hits than second_touch for as many copies (docs/tiers.md) */
        static const uint32_t depths[] = {0, 0, 8, 32, 128};
        for (int a = 0; a < 5; a++) {
            fx_cli_psim_result res;
            char name[32];
            if (depths[a]) snprintf(name, sizeof name, "prefix_depth %u", depths[a]);
            else snprintf(name, sizeof name, "%s", adm[a]);
            if (fx_cli_psim_run(&r->trace, 0, o->capacity_blocks, o->eviction_policy, cpu_blocks, depths[a] ? 0 : a,
                                depths[a], &res))
                return 1;
            printf("+ CPU tier of %llu blocks, %s %-16s %.2f %% prefix hits (%.2f %% from the CPU "
                   "tier); %llu of %llu evicted blocks copied (%.0f %%)\n",
                   (unsigned long long)cpu_blocks, depths[a] ? "simulated" : "writeback_admission", name, 100 * res.ratio,
                   res.lookups ? 100.0 * (double)res.cpu_hits / (double)res.lookups : 0.0,
                   (unsigned long long)res.copies, (unsigned long long)res.evictions,
                   res.evictions ? 100.0 * (double)res.copies / (double)res.evictions : 0.0);
        }
    }
    if (o->out_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/simulate.json", o->out_dir);
        FILE *f = fopen(path, "w");
        if (!f) return 1;
        fprintf(f, "{\"policy\":\"%s\",\"capacity_blocks\":%llu,\"lookups\":%llu,\"prefix_hits\":%llu,"
                   "\"prefix_hit_ratio\":%.6f,\"reference_lru_prefix_hit_ratio\":%.6f,\"unlimited_prefix_hit_ratio\":%.6f}\n",
                o->eviction_policy, (unsigned long long)o->capacity_blocks, (unsigned long long)r->ref_lookups,
                (unsigned long long)r->policy_ref_hits, pol, lru, unl);
        fclose(f);
    }
    return 0;
}

int fx_cli_replay_main(int argc, char **argv)
{
    int help = 0;
    /* a pipe or a file gets the banner and the summary in order with the stderr lines (block
     * buffering put them after every warning: a new user's finding); a few dozen lines */
    setvbuf(stdout, NULL, _IOLBF, 0);
    rp_run *r = calloc(1, sizeof *r);
    if (!r) return 1;
    int ex = rp_parse_opts(argc, argv, &r->o, &help) ? RP_EXIT_USAGE : 0;
    if (!ex && help) rp_usage(stdout);
    /* SIGINT/SIGTERM from here on (a replay): the trace's load and the start-up end at their
     * next step, the replay stops its workers (and reports the requests that ran), the
     * linger ends; the cluster is always taken down (its segments and sockets removed).
     * Installed, not inherited: a shell starts a background job with SIGINT ignored. Before
     * the load, not after it: one in its first ~50 ms was lost (SIGINT of a background job)
     * or ended the process without a word (SIGTERM; a new user's finding). */
    int replay = !ex && !help && !r->o.simulate;
    struct sigaction sa = {.sa_handler = rp_on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    if (replay) {
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
    }
    if (!ex && !help) ex = rp_load(r);
    if (replay && rp_interrupted_before("while the trace loaded")) ex = 1; /* a read it cut short, too */
    if (!ex && !help && r->o.simulate) {
        ex = rp_simulate(r);
    } else if (!ex && !help) {
        rp_raise_nofile();
        r->t_setup_ns = fx_cli_now_ns();
        ex = rp_cluster_up(r);
        if (!ex && rp_interrupted_before("while the cluster started")) ex = 1;
        fx_cli_metrics *metrics = NULL;
        if (!ex && r->o.metrics_listen) {
            fluxon_node *nodes[RP_MAX_OWNERS + 1] = {r->cl.master};
            for (unsigned k = 0; k < r->n_owners; k++) nodes[k + 1] = r->cl.owners[k];
            metrics = fx_cli_metrics_start("--metrics-listen", r->o.metrics_listen, nodes, r->n_owners + 1, NULL);
            if (!metrics) ex = RP_EXIT_USAGE;
        }
        if (!ex) ex = rp_play_run(r);
        if (metrics) /* a last scrape */
            for (unsigned ms = 0; ms < r->o.metrics_linger_ms && !rp_interrupted; ms += 50)
                fx_cli_sleep_ms(r->o.metrics_linger_ms - ms < 50 ? r->o.metrics_linger_ms - ms : 50);
        fx_cli_metrics_stop(metrics);
        rp_collector_close(&r->col); /* only after a start failure: no worker ran */
        rp_collector_fini(&r->col);
        rp_workers_close(r);
        rp_cluster_down(r);
    }
    if (replay) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    free(r->recs);
    fx_cli_trace_free(&r->trace);
    free(r);
    return ex;
}

void fx_cli_replay_usage(FILE *f)
{
    rp_usage(f);
}
