/* replay_remote.c — `fluxon demo --cpu-owners K` (issue 16): after the run, the write-backs
 * settle (bounded), then the summary shows the hits by tier and the remote-capacity
 * counters of the GPU owners and the master, and checks that they reconcile:
 *   tasks (eager + write-back) = completed + already + obsolete + failed (by cause);
 *   appended keys = replicas on remote_cache owners (+ 0 on GPU owners);
 *   evicted replicas = demoted + dropped (the master's view), and at the GPU owners
 *   evictions = with a copy + not admitted + behind + copy in flight + copy failed (issue 38);
 *   in-flight appends and tasks back to 0 (R1). */
#define _GNU_SOURCE
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "replay.h"

#define RR_SETTLE_MS 30000

static const char *const rr_owner_keys[] = {
    "repl_tasks_eager",     "repl_tasks_writeback", "repl_completed",         "repl_already",
    "repl_obsolete",        "repl_failed_no_space", "repl_failed_busy",       "repl_failed_stale",
    "repl_failed_transfer", "repl_failed_master",   "repl_failed_queue_full", "repl_queued",
    "repl_inflight",        "repl_pushed_bytes",    "repl_push_ns",           "evictions",
    "evict_dropped_behind", "evict_dropped_copying", "evict_dropped_failed", "repl_batches", "repl_pushed_keys", "evict_not_admitted", "evict_copied",
    "read_before_get_done", "remote_hits", "prefetch_lookups", "prefetch_copies", "peer_map_transfers", "peer_map_bytes",
    "cpu_hits", "repl_kept_after_fetch", "wb_reads", "wb_reads_late", "peer_map_ns", "repl_kept_recorded", "wb_temp",
    "wb_touched"};
#define RR_NOWNER (sizeof rr_owner_keys / sizeof rr_owner_keys[0])
enum { O_EAGER, O_WB, O_DONE, O_ALREADY, O_OBSOLETE, O_F0, O_QUEUED = 11, O_INFLIGHT, O_BYTES, O_NS, O_EVICT, O_DROP_BEHIND, O_DROP_COPYING, O_DROP_FAILED, O_BATCHES, O_PKEYS, O_NOT_ADMITTED, O_COPIED, O_EARLY, O_RHITS,
       O_PF_LOOKUPS, O_PF_COPIES, O_MAP_XFERS, O_MAP_BYTES, O_CHITS, O_KEPT, O_WB_READS, O_WB_LATE, O_MAP_NS, O_KEPT_REC, O_WB_TEMP, O_WB_TOUCHED };

static const char *const rr_master_keys[] = {
    "append_keys_completed", "target_replicas_remote_cache", "target_replicas_gpu_owner", "evicted_replicas",
    "evict_demoted",         "evict_dropped",                "hits_local",                "hits_remote_gpu",
    "hits_cpu_owner",        "target_cold_dropped",          "append_inflight",           "append_keys_obsolete",
    "append_keys_failed_transfer", "append_keys_expired"};
#define RR_NMASTER (sizeof rr_master_keys / sizeof rr_master_keys[0])
enum { M_APPENDED, M_T_CPU, M_T_GPU, M_EVICTED, M_DEMOTED, M_DROPPED, M_H_LOCAL, M_H_GPU, M_H_CPU, M_COLD, M_INFL };

static uint64_t rr_num(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

static fluxon_client *rr_client(rp_run *r, unsigned k)
{
    for (unsigned i = 0; i < r->n_workers; i++)
        if (r->workers[i].owner == k && r->workers[i].client) return r->workers[i].client;
    return NULL;
}

/* Sums the owner counters over the GPU owners and reads the master's; 0 on success. */
static int rr_read(rp_run *r, uint64_t *ov, uint64_t *mv)
{
    memset(ov, 0, RR_NOWNER * sizeof *ov);
    for (unsigned k = 0; k < r->n_owners; k++) {
        char *buf = NULL;
        if (fx_cli_json_call(rr_client(r, k), fluxon_client_stats, RP_STATS_CAP, &buf) != FLUXON_OK) return -1;
        cJSON *doc = cJSON_Parse(buf);
        free(buf);
        const cJSON *own = cJSON_GetObjectItemCaseSensitive(doc, "owner");
        for (size_t i = 0; i < RR_NOWNER; i++) ov[i] += rr_num(own, rr_owner_keys[i]);
        cJSON_Delete(doc);
    }
    char *buf = NULL;
    if (fx_cli_json_call(rr_client(r, 0), fluxon_client_master_stats, RP_STATS_CAP, &buf) != FLUXON_OK) return -1;
    cJSON *doc = cJSON_Parse(buf);
    free(buf);
    for (size_t i = 0; i < RR_NMASTER; i++) mv[i] = rr_num(doc, rr_master_keys[i]);
    cJSON_Delete(doc);
    return 0;
}

int rp_remote_report(rp_run *r, cJSON *summary)
{
    if (!r->o.cpu_owners) return 0;
    uint64_t ov[RR_NOWNER], mv[RR_NMASTER];
    uint64_t deadline = fx_cli_now_ns() + (uint64_t)RR_SETTLE_MS * 1000000ull;
    int rc;
    while ((rc = rr_read(r, ov, mv)) == 0 && (ov[O_QUEUED] || ov[O_INFLIGHT] || mv[M_INFL]) &&
           fx_cli_now_ns() < deadline)
        fx_cli_sleep_ms(100);
    if (rc) {
        fprintf(stderr, "fluxon demo: remote-capacity counters could not be read\n");
        return 1;
    }
    uint64_t failed = 0;
    for (int i = O_F0; i < O_QUEUED; i++) failed += ov[i];
    uint64_t tasks = ov[O_EAGER] + ov[O_WB], ends = ov[O_DONE] + ov[O_ALREADY] + ov[O_OBSOLETE] + failed;
    int ok_tasks = tasks == ends && !ov[O_QUEUED] && !ov[O_INFLIGHT];
    int ok_targets = mv[M_APPENDED] == mv[M_T_CPU] + mv[M_T_GPU] && mv[M_T_GPU] == 0;
    uint64_t owner_ways = ov[O_COPIED] + ov[O_NOT_ADMITTED] + ov[O_DROP_BEHIND] + ov[O_DROP_COPYING] + ov[O_DROP_FAILED];
    int ok_evict = mv[M_EVICTED] == mv[M_DEMOTED] + mv[M_DROPPED] && ov[O_EVICT] == owner_ways;
    int ok_r1 = mv[M_INFL] == 0;
    uint64_t hits = mv[M_H_LOCAL] + mv[M_H_GPU] + mv[M_H_CPU];
    printf("remote capacity   %u CPU owner(s) x %llu pages; write-back watermark %g of the hot tier\n",
           r->o.cpu_owners, (unsigned long long)r->o.cpu_capacity_blocks, r->o.writeback_watermark);
    printf("  fetch sources   %llu keys found by LOOKUP: own slot %llu, GPU owners %llu, CPU owners %llu (%.1f %%); "
           "%llu read back by their writer's record of its write-backs, without a LOOKUP (%llu too late: looked up)\n",
           (unsigned long long)hits, (unsigned long long)mv[M_H_LOCAL], (unsigned long long)mv[M_H_GPU],
           (unsigned long long)mv[M_H_CPU], hits ? 100.0 * (double)mv[M_H_CPU] / (double)hits : 0.0,
           (unsigned long long)ov[O_WB_READS], (unsigned long long)ov[O_WB_LATE]);
    printf("  copies read     %llu of %llu without waiting for the master's GET_DONE answer: %llu first read-backs "
           "for their readers only (no GET_DONE; %llu keys TOUCHed), %llu before the answer (ended within the master's "
           "range_reuse_delay_ms of their LOOKUP or of the record's last master answer, less 1 ms)\n",
           (unsigned long long)(ov[O_EARLY] + ov[O_WB_TEMP]), (unsigned long long)(ov[O_RHITS] + ov[O_CHITS]),
           (unsigned long long)ov[O_WB_TEMP], (unsigned long long)ov[O_WB_TOUCHED], (unsigned long long)ov[O_EARLY]);
    printf("  write-back      tasks %llu (eager %llu) = completed %llu + already %llu + obsolete %llu + failed %llu "
           "(no_space %llu, busy %llu, stale %llu, transfer %llu, master %llu, queue_full %llu) %s; none for "
           "%llu values fetched back from a CPU owner that keeps its copy, nor for %llu hit after their write-back whose "
           "copy the owner's record still named\n",
           (unsigned long long)tasks, (unsigned long long)ov[O_EAGER], (unsigned long long)ov[O_DONE],
           (unsigned long long)ov[O_ALREADY], (unsigned long long)ov[O_OBSOLETE], (unsigned long long)failed,
           (unsigned long long)ov[O_F0], (unsigned long long)ov[O_F0 + 1], (unsigned long long)ov[O_F0 + 2],
           (unsigned long long)ov[O_F0 + 3], (unsigned long long)ov[O_F0 + 4], (unsigned long long)ov[O_F0 + 5],
           ok_tasks ? "(reconciled)" : "(DOES NOT RECONCILE)", (unsigned long long)ov[O_KEPT],
           (unsigned long long)ov[O_KEPT_REC]);
    printf("  targets         appended keys %llu = on remote_cache owners %llu + on GPU owners %llu %s; the CPU "
           "owners dropped %llu of their oldest\n",
           (unsigned long long)mv[M_APPENDED], (unsigned long long)mv[M_T_CPU], (unsigned long long)mv[M_T_GPU],
           ok_targets ? "(reconciled)" : "(DOES NOT RECONCILE)", (unsigned long long)mv[M_COLD]);
    printf("  eviction        GPU replicas evicted %llu = demoted %llu (single copy on a CPU owner) + dropped %llu "
           "%s;\n                  at the GPU owners: evicted %llu = with a copy %llu + without: %llu not admitted + "
           "%llu write-back behind + %llu copy in flight + %llu copy failed (puts never wait for a copy)\n",
           (unsigned long long)mv[M_EVICTED], (unsigned long long)mv[M_DEMOTED], (unsigned long long)mv[M_DROPPED],
           ok_evict ? "(reconciled)" : "(DOES NOT RECONCILE)", (unsigned long long)ov[O_EVICT],
           (unsigned long long)ov[O_COPIED], (unsigned long long)ov[O_NOT_ADMITTED],
           (unsigned long long)ov[O_DROP_BEHIND],
           (unsigned long long)ov[O_DROP_COPYING], (unsigned long long)ov[O_DROP_FAILED]);
    printf("  pushes          %.1f MiB written back in %llu batches (%.1f values each), %.2f GB/s per push "
           "(summed push time)\n",
           (double)ov[O_BYTES] / 1048576.0, (unsigned long long)ov[O_BATCHES],
           ov[O_BATCHES] ? (double)ov[O_PKEYS] / (double)ov[O_BATCHES] : 0.0,
           ov[O_NS] ? (double)ov[O_BYTES] / (double)ov[O_NS] : 0.0);
    printf("  data plane      %.1f MiB in %llu transfers copied through mapped peer segments at %.2f GB/s (the "
           "copies' own time; owners of one host, peer_segments %s), the rest over UCX (%s)\n",
           (double)ov[O_MAP_BYTES] / 1048576.0, (unsigned long long)ov[O_MAP_XFERS],
           ov[O_MAP_NS] ? (double)ov[O_MAP_BYTES] / (double)ov[O_MAP_NS] : 0.0, r->o.peer_segments_ucx ? "ucx" : "map",
           r->o.ucx_tls ? r->o.ucx_tls : "UCX's choice");
    if (r->o.prefetch_from_owners)
        printf("  prefetch        %llu keys looked up ahead (--prefetch %u --prefetch-from-owners), %llu copied "
               "from the CPU owners before their get\n", (unsigned long long)ov[O_PF_LOOKUPS], r->o.prefetch,
               (unsigned long long)ov[O_PF_COPIES]);
    if (!ok_r1) printf("  R1              %llu appends still in flight at the master\n", (unsigned long long)mv[M_INFL]);
    if (summary) {
        cJSON *j = cJSON_AddObjectToObject(summary, "remote_capacity");
        for (size_t i = 0; j && i < RR_NOWNER; i++) cJSON_AddNumberToObject(j, rr_owner_keys[i], (double)ov[i]);
        for (size_t i = 0; j && i < RR_NMASTER; i++)
            cJSON_AddNumberToObject(j, rr_master_keys[i], (double)mv[i]);
        if (j) cJSON_AddBoolToObject(j, "reconciled", ok_tasks && ok_targets && ok_evict && ok_r1);
    }
    return ok_tasks && ok_targets && ok_evict && ok_r1 ? 0 : 1;
}
