/* replay_disk.c — `fluxon demo --disk-dir D --disk-capacity-blocks N` (issue 39): after the
 * run, the summary shows what the owners' disk tiers took and gave back — values moved to
 * disk, hits read back and their bytes, read GB/s over the replay's wall time, records
 * re-indexed at start (a second run on the same directory), checksum failures — and checks
 * that the master moved what the owners counted and that no record failed its checksum. */
#define _GNU_SOURCE
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "replay.h"

static const char *const rd_keys[] = {"evict_to_disk",     "disk_hits",          "disk_misses",
                                      "disk_read_bytes",   "disk_reads",         "disk_write_bytes",
                                      "disk_demote_busy",  "disk_crc_failures",  "disk_recovered_records",
                                      "disk_recover_ms",   "disk_direct_io",     "disk_records",
                                      "evict_disk_not_admitted", "disk_direct_fallbacks", "disk_staged_reads",
                                      "prefetch_requests", "prefetch_keys", "prefetch_reads", "prefetch_joined",
                                      "disk_read_ios", "prefetch_no_room"};
#define RD_N (sizeof rd_keys / sizeof rd_keys[0])
enum { D_MOVED, D_HITS, D_MISSES, D_RBYTES, D_READS, D_WBYTES, D_BUSY, D_CRC, D_RECOVERED, D_RECOVER_MS, D_DIRECT,
       D_RECORDS, D_NOT_ADMITTED, D_FALLBACKS, D_STAGED, D_PF_REQ, D_PF_KEYS, D_PF_READS, D_PF_JOINED,
       D_READ_IOS, D_PF_NO_ROOM };

static uint64_t rd_num(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : cJSON_IsTrue(v) ? 1 : 0;
}

int rp_disk_report(rp_run *r, cJSON *summary)
{
    if (!r->o.disk_dir) return 0;
    uint64_t v[RD_N] = {0}, master_moved = 0;
    rp_hist_sum lat = {0};
    for (unsigned k = 0; k < r->n_owners; k++) {
        char *buf = NULL;
        if (fx_cli_json_call(rp_owner_client(r, k), fluxon_client_stats, RP_STATS_CAP, &buf) != FLUXON_OK) {
            fprintf(stderr, "fluxon demo: the disk tier's counters could not be read\n");
            return 1;
        }
        cJSON *doc = cJSON_Parse(buf);
        free(buf);
        const cJSON *own = cJSON_GetObjectItemCaseSensitive(doc, "owner");
        for (size_t i = 0; i < RD_N; i++) v[i] += rd_num(own, rd_keys[i]);
        rp_hist_add(&lat, doc, own, "disk_read_latency");
        cJSON_Delete(doc);
    }
    char *buf = NULL;
    if (fx_cli_json_call(rp_owner_client(r, 0), fluxon_client_master_stats, RP_STATS_CAP, &buf) == FLUXON_OK) {
        cJSON *doc = cJSON_Parse(buf);
        master_moved = rd_num(doc, "evict_to_disk");
        cJSON_Delete(doc);
    }
    free(buf);
    double wall_s = r->t_end_ns > r->t_start_ns ? (double)(r->t_end_ns - r->t_start_ns) / 1e9 : 0;
    int ok = v[D_CRC] == 0 && master_moved == v[D_MOVED];
    printf("disk tier         %s/owner<k>, %llu values each (%s, admission %s); %llu records re-indexed at start "
           "in %llu ms\n", r->o.disk_dir, (unsigned long long)r->disk_values,
           v[D_DIRECT] == r->n_owners ? "O_DIRECT" : "buffered I/O", r->o.disk_admission ? r->o.disk_admission : "all",
           (unsigned long long)v[D_RECOVERED], (unsigned long long)v[D_RECOVER_MS]);
    printf("  moved to disk   %llu evicted values (master: %llu %s); not admitted %llu; dropped for want of "
           "staging room %llu; %llu records held\n",
           (unsigned long long)v[D_MOVED], (unsigned long long)master_moved,
           master_moved == v[D_MOVED] ? "(reconciled)" : "(DOES NOT RECONCILE)", (unsigned long long)v[D_NOT_ADMITTED],
           (unsigned long long)v[D_BUSY], (unsigned long long)v[D_RECORDS]);
    printf("  disk hits       %llu values read back (%llu from staging buffers, the rest in %llu reads of the "
           "file), %llu unreadable (gone or failing their checksum: misses, never served); %.1f MiB read, %.3f GB/s over the replay; %.1f MiB written; checksum "
           "failures %llu\n",
           (unsigned long long)v[D_HITS], (unsigned long long)v[D_STAGED], (unsigned long long)v[D_READ_IOS],
           (unsigned long long)v[D_MISSES],
           (double)v[D_RBYTES] / 1048576.0, wall_s > 0 ? (double)v[D_RBYTES] / wall_s / 1e9 : 0.0,
           (double)v[D_WBYTES] / 1048576.0, (unsigned long long)v[D_CRC]);
    if (lat.n)
        printf("  disk reads      %llu records read from the files: %.0f us on average from asked to checked, "
               "median <= %.0f us, p99 <= %.0f us%s\n",
               (unsigned long long)lat.n, (double)lat.sum_ns / (double)lat.n / 1e3,
               rp_hist_quantile_us(lat.b, lat.nb, lat.bounds, 0.5), rp_hist_quantile_us(lat.b, lat.nb, lat.bounds, 0.99),
               r->o.prefetch ? " (the prefetches started most of them before their get)" : "");
    cJSON_Delete(lat.bounds);
    uint64_t refused = 0;
    for (unsigned i = 0; i < r->n_workers; i++) refused += r->workers[i].prefetch_refused;
    printf("  prefetch        %s: %llu requests named %llu keys; %llu read back from disk ahead (%llu of them "
           "joined by their get while in flight); %llu hints dropped or refused; %llu keys not read for want of a "
           "free slot (a prefetch never waits for eviction)\n",
           r->o.prefetch ? "on" : "off (--prefetch 0)", (unsigned long long)v[D_PF_REQ], (unsigned long long)v[D_PF_KEYS],
           (unsigned long long)v[D_PF_READS], (unsigned long long)v[D_PF_JOINED], (unsigned long long)refused,
           (unsigned long long)v[D_PF_NO_ROOM]);
    if (summary) {
        cJSON *j = cJSON_AddObjectToObject(summary, "disk");
        for (size_t i = 0; j && i < RD_N; i++) cJSON_AddNumberToObject(j, rd_keys[i], (double)v[i]);
        if (j) cJSON_AddNumberToObject(j, "master_evict_to_disk", (double)master_moved);
        if (j) cJSON_AddNumberToObject(j, "values_per_owner", (double)r->disk_values);
        if (j) cJSON_AddBoolToObject(j, "reconciled", ok);
        if (j) cJSON_AddNumberToObject(j, "prefetch_distance", r->o.prefetch);
        if (j) cJSON_AddNumberToObject(j, "prefetch_refused", (double)refused);
    }
    if (v[D_CRC]) /* the exit status says the run failed: say why */
        fprintf(stderr, "fluxon demo: exit status 1: %llu checksum failure(s) on disk (records, or index blocks "
                "then scanned record by record): each bad record dropped and counted a miss, never served (found when re-indexing %s at start or when read back; the owners' "
                "log names the files and the first records by byte offset)\n", (unsigned long long)v[D_CRC], r->o.disk_dir);
    if (master_moved != v[D_MOVED])
        fprintf(stderr, "fluxon demo: exit status 1: the owners moved %llu values to disk, the master counted %llu\n",
                (unsigned long long)v[D_MOVED], (unsigned long long)master_moved);
    return ok ? 0 : 1;
}
