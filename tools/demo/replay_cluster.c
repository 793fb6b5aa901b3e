/* replay_cluster.c — the cluster `fluxon demo` plays against: an embedded master + K
 * owners sized for the run (or for --capacity-blocks), or the owners named by --config;
 * and the owners' counters read through fluxon_client_stats (before the run, and R1: back
 * to baseline after it). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "replay.h"

#define RP_FIELD(name) {#name, offsetof(rp_owner_stats, name)}
const rp_stat_field rp_baseline_fields[RP_NBASELINE] = {
    RP_FIELD(handles_open), RP_FIELD(slots_prepared), RP_FIELD(gets_inflight), RP_FIELD(puts_inflight)};
const rp_stat_field rp_eviction_fields[RP_NEVICTION] = {
    RP_FIELD(evictions), RP_FIELD(evicted_bytes), RP_FIELD(cohorts),       RP_FIELD(busy_retries),
    RP_FIELD(restored),  RP_FIELD(eviction_debt), RP_FIELD(hot_bytes),     RP_FIELD(hot_capacity_bytes),
    RP_FIELD(claim_waits), RP_FIELD(claim_timeouts)};
#undef RP_FIELD

/* ---------------------------------------------------------------------------------
 * Owner counters (fluxon_client_stats)
 * ------------------------------------------------------------------------------- */


/* The number under key: in "owner" first, then anywhere (depth-first). */
static const cJSON *rp_json_find(const cJSON *node, const char *key)
{
    if (!node || !(cJSON_IsObject(node) || cJSON_IsArray(node))) return NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, node)
    {
        if (it->string && strcmp(it->string, key) == 0 && cJSON_IsNumber(it)) return it;
    }
    cJSON_ArrayForEach(it, node)
    {
        const cJSON *f = rp_json_find(it, key);
        if (f) return f;
    }
    return NULL;
}

static int rp_stat_u64(const cJSON *doc, const char *key, uint64_t *out)
{
    const cJSON *v = rp_json_find(cJSON_GetObjectItemCaseSensitive(doc, "owner"), key);
    if (!v) v = rp_json_find(doc, key);
    if (!v) {
        *out = 0;
        return 0;
    }
    *out = v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
    return 1;
}

/* The keys this owner fetched from another owner's memory: remote_hits (from GPU owners) +
 * cpu_hits (from remote_cache owners; 0 where an older owner does not split them). */
static int rp_stat_fetched(const cJSON *doc, uint64_t *out)
{
    uint64_t cpu = 0;
    int known = rp_stat_u64(doc, "remote_hits", out);
    (void)rp_stat_u64(doc, "cpu_hits", &cpu);
    *out += cpu;
    return known;
}

cJSON *rp_client_stats(fluxon_client *c)
{
    char *buf = NULL;
    int rc = fx_cli_json_call(c, fluxon_client_stats, RP_STATS_CAP, &buf);
    cJSON *doc = rc == FLUXON_OK ? cJSON_Parse(buf) : NULL;
    if (rc != FLUXON_OK) fprintf(stderr, "fluxon demo: fluxon_client_stats: %s\n", fluxon_status_string(rc));
    free(buf);
    return doc;
}

/* The first worker of owner k carries that owner's stats queries. */
fluxon_client *rp_owner_client(rp_run *r, unsigned k)
{
    for (unsigned i = 0; i < r->n_workers; i++)
        if (r->workers[i].owner == k && r->workers[i].client) return r->workers[i].client;
    return NULL;
}

void rp_stats_before(rp_run *r)
{
    for (unsigned k = 0; k < r->n_owners; k++) {
        cJSON *doc = rp_client_stats(rp_owner_client(r, k));
        rp_owner_stats *s = &r->owners[k];
        if (doc) {
            s->remote_hits_known = rp_stat_fetched(doc, &s->remote_hits_before);
            for (int i = 0; i < RP_NBASELINE; i++) rp_stat_u64(doc, rp_baseline_fields[i].key, &s->before[i]);
            for (int i = 0; i < RP_NEVICTION; i++) rp_stat_u64(doc, rp_eviction_fields[i].key, &s->ev_before[i]);
        }
        cJSON_Delete(doc);
    }
}

/* R1: polls every owner's counters until all four are back to their values before the
 * run (0 on the embedded cluster) or RP_BASELINE_MS passed. */
int rp_stats_after(rp_run *r)
{
    uint64_t deadline = fx_cli_now_ns() + (uint64_t)RP_BASELINE_MS * 1000000ull;
    int ok;
    do {
        ok = 1;
        for (unsigned k = 0; k < r->n_owners; k++) {
            rp_owner_stats *s = &r->owners[k];
            cJSON *doc = rp_client_stats(rp_owner_client(r, k));
            s->stats_ok = doc != NULL;
            if (!doc) {
                ok = 0;
                continue;
            }
            s->absent_mask = 0;
            for (int i = 0; i < RP_NBASELINE; i++) {
                uint64_t *v = rp_stat_at(s, &rp_baseline_fields[i]);
                if (!rp_stat_u64(doc, rp_baseline_fields[i].key, v)) s->absent_mask |= 1u << i;
                if (*v > s->before[i]) ok = 0;
            }
            uint64_t rh = 0;
            int known = rp_stat_fetched(doc, &rh);
            s->remote_hits_known = s->remote_hits_known && known;
            s->remote_hits_after = rh;
            s->ev_known = 1;
            for (int i = 0; i < RP_NEVICTION; i++) {
                uint64_t *v = rp_stat_at(s, &rp_eviction_fields[i]);
                s->ev_known &= rp_stat_u64(doc, rp_eviction_fields[i].key, v);
                /* the counters over this run: an owner joined with --config has counted
                 * since it started (3,054 values "evicted" by a run that wrote 2.2 MiB) */
                if (v != &s->eviction_debt && v != &s->hot_bytes && v != &s->hot_capacity_bytes)
                    *v = *v > s->ev_before[i] ? *v - s->ev_before[i] : 0;
            }
            if (s->eviction_debt) ok = 0; /* selected for eviction, not yet freed */
            rp_tenants_owner(r, k, doc); /* issue 42: each tenant's bytes and evictions there */
            cJSON_Delete(doc);
        }
        if (ok) break;
        fx_cli_sleep_ms(100);
    } while (fx_cli_now_ns() < deadline);
    return ok;
}

/* The embedded GPU owners map each other's and the CPU owners' segments when the master
 * lists them (peer_segments map): waited for, at most RP_PEERS_MAPPED_WAIT_MS (a host where
 * they cannot map each other, e.g. no permission for pidfd_getfd, keeps UCX: said once), so
 * that the mapping and its prefault (waited for with the segments') run before the replay,
 * as they would before an engine's traffic. */
#define RP_PEERS_MAPPED_WAIT_MS 10000u
static void rp_wait_peers_mapped(rp_run *r)
{
    if (!r->cl.embedded || r->o.peer_segments_ucx) return;
    uint64_t want = r->n_owners - 1 + r->o.cpu_owners;
    uint64_t deadline_ns = fx_cli_now_ns() + (uint64_t)RP_PEERS_MAPPED_WAIT_MS * 1000000ull;
    for (unsigned k = 0; want && k < r->n_owners; k++)
        for (;;) {
            cJSON *doc = rp_client_stats(rp_owner_client(r, k));
            uint64_t mapped = 0;
            int known = doc && rp_stat_u64(doc, "peers_mapped", &mapped);
            cJSON_Delete(doc);
            if (!known || mapped >= want || rp_interrupted) break;
            if (fx_cli_now_ns() >= deadline_ns) {
                fprintf(stderr, "fluxon demo: owner %u mapped %llu of the %llu other owners' segments in %u s; the "
                                "rest go over UCX (the owners' log says why)\n", k, (unsigned long long)mapped,
                        (unsigned long long)want, RP_PEERS_MAPPED_WAIT_MS / 1000u);
                return;
            }
            fx_cli_sleep_ms(10);
        }
}

void rp_wait_prefault(rp_run *r)
{
    fluxon_client **clients = calloc(r->n_workers ? r->n_workers : 1, sizeof *clients);
    for (unsigned i = 0; clients && i < r->n_workers; i++) clients[i] = r->workers[i].client;
    uint64_t t0 = fx_cli_now_ns();
    rp_wait_peers_mapped(r);
    if (clients)
        (void)fx_cli_wait_prefault(r->cl.owners, r->cl.embedded ? r->n_owners : 0, clients, r->n_workers,
                                   RP_PREFAULT_WAIT_MS, &rp_interrupted);
    free(clients);
    /* the CPU owners' segments and the master's heap reserve too, within the same bound:
     * the reserve grows with the CPU owners' segments (rp_start_cluster), so its prefault
     * could run into the replay with them and not without them */
    fluxon_node *more[RP_MAX_OWNERS + 1];
    unsigned n_more = 0;
    if (r->cl.embedded) {
        more[n_more++] = r->cl.master;
        for (unsigned i = 0; i < r->o.cpu_owners; i++) more[n_more++] = r->cl.cpu[i];
    }
    uint64_t spent_ms = (fx_cli_now_ns() - t0) / 1000000u;
    if (n_more && spent_ms < RP_PREFAULT_WAIT_MS)
        (void)fx_cli_wait_prefault(more, n_more, NULL, 0, (unsigned)(RP_PREFAULT_WAIT_MS - spent_ms), &rp_interrupted);
}

/* ---------------------------------------------------------------------------------
 * Embedded cluster
 * ------------------------------------------------------------------------------- */

#define RP_CLUSTER_ID "fluxon-demo"
#define RP_TOKEN "demo-token"

/* --capacity-blocks N: the hot tier holds N pages × T values and the segment RP_HEADROOM_PCT %
 * more slots (at least one). The owner evicts its coldest values as soon as the hot tier is
 * over N, in the background, so a put_start finds the free slots of this headroom and does
 * not wait for an EVICT round trip to the master (issue 38: a put never waits for
 * eviction; on this 2-vCPU VM the replay without it: 11,587 claims of 12,031 requests waited,
 * put_start p50 29-39 us; with 3 %: 6-12 claims waited, 9-11 us, hits 23.04 % against 23.08 %).
 * 6 % (session 43): with a CPU owner the restores take slots too and the master answers EVICT
 * later, and 3 % let 11-153 claims a replay wait (8-33 without it), the put_start p99 with
 * them; 6 %: 0-3 either way (10 interleaved runs each: 9,003 -> 9,380 requests/s on average
 * with a CPU owner). Owners run by hand get 5 % from hot_capacity_ratio (0.95 by default). */
#define RP_HEADROOM_PCT 6u
static uint64_t rp_headroom_values(const rp_opts *o)
{
    uint64_t values = o->capacity_blocks * o->tp;
    return (values * RP_HEADROOM_PCT + 99) / 100;
}

/* Segment and grant for one owner (ARCHITECTURE §6: slot = align_up(max(value_len,
 * 4096), 4096), grants hold whole slots; segment_bytes is the grants, the owner maps its
 * 4096-byte header page on top).
 * Whole-run sizing: every distinct page of the slice × T values + 25 % + one spare grant,
 * per owner, because with K owners an owner may hold its own puts and the copies it
 * fetched from the others. --capacity-blocks N: N pages × T values (the hot tier) plus
 * RP_HEADROOM_PCT % of them for the puts in flight, rounded up to whole grants. */
/* Without --capacity-blocks: room for the puts in flight on top of the run's pages and a
 * quarter more, 64 values, but at most 1 GiB of them (at least 8): 64 values of 256 MiB made
 * a 21 GiB segment for 14 pages (a new user's finding). */
static uint64_t rp_fixed_headroom(uint64_t slot)
{
    uint64_t n = (1ull << 30) / slot;
    return n > 64 ? 64 : n < 8 ? 8 : n;
}

static void rp_size_owner(const rp_opts *o, uint64_t distinct_pages, uint64_t *seg_p, uint64_t *grant_p)
{
    uint64_t slot = rp_slot_bytes(o->value_len);
    uint64_t values = (o->capacity_blocks ? o->capacity_blocks : distinct_pages) * o->tp;
    if (!o->capacity_blocks) values += values / 4 + rp_fixed_headroom(slot);
    else values += rp_headroom_values(o);
    uint64_t max_spg = (512ull << 20) / slot ? (512ull << 20) / slot : 1;
    uint64_t spg = o->capacity_blocks ? values : values / 8;
    if (!o->capacity_blocks && spg < 16) spg = 16;
    if (spg > max_spg) spg = max_spg;
    if (spg == 0) spg = 1;
    uint64_t grants = (values + spg - 1) / spg + (o->capacity_blocks ? 0 : 1);
    *grant_p = spg * slot;
    *seg_p = grants * spg * slot;
}

/* Issue 16: --cpu-owners K remote_cache owners of --cpu-capacity-blocks pages each. The
 * master places write-backs in their segments (ranges it allocates), so a segment is those
 * pages' slots, plus the one grant the placement limit keeps free (the header page is on
 * top of segment_bytes). */
static uint64_t rp_cpu_segment_bytes(const rp_run *r)
{
    return r->o.cpu_capacity_blocks * r->o.tp * rp_slot_bytes(r->o.value_len) + r->grant_bytes;
}

/* The owners' data-plane fields: ucx_tls (--ucx-tls) and peer_segments (--peer-segments). */
static const char *rp_data_plane(const rp_run *r, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%s", r->o.ucx_tls ? ",\"ucx_tls\":\"" : "", r->o.ucx_tls ? r->o.ucx_tls : "",
             r->o.ucx_tls ? "\"" : "", r->o.peer_segments_ucx ? ",\"peer_segments\":\"ucx\"" : "");
    return buf;
}

static int rp_start_cpu_owners(rp_run *r, fluxon_node *master, const char *dir)
{
    uint64_t seg = rp_cpu_segment_bytes(r);
    for (unsigned k = 0; k < r->o.cpu_owners; k++) {
        char cfg[1024], dp[200];
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"owner\",\"cluster_id\":\"" RP_CLUSTER_ID "\",\"cluster_token\":\"" RP_TOKEN "\","
                 "\"node_id\":\"demo-cpu-%u\",\"node_role\":\"remote_cache\",\"master\":\"unix:%s/master.sock\","
                 "\"socket\":\"%s/cpu%u.sock\",\"segment_bytes\":%llu,\"reserve\":{\"grant_bytes\":%llu},"
                 "\"log_level\":\"warn\",\"start_timeout_ms\":120000%s}",
                 k, dir, dir, k, (unsigned long long)seg, (unsigned long long)r->grant_bytes, rp_data_plane(r, dp, sizeof dp));
        int rc = fluxon_node_start(cfg, &r->cl.cpu[k]);
        if (rc != FLUXON_OK) {
            if (rc == FLUXON_ERR_CONFIG) /* the flags made a config it refused: its reason is logged above */
                fprintf(stderr, "fluxon demo: CPU owner %u did not start: its config was refused (the reason is "
                        "logged above)\n", k);
            else
                fprintf(stderr, "fluxon demo: CPU owner %u did not start: %s (segment_bytes %llu)\n", k,
                        fluxon_status_string(rc), (unsigned long long)seg);
            return rc;
        }
    }
    return FLUXON_OK;
}

#define RP_HEAP_DISK_VALUE 1536u /* heap bytes a disk-resident value takes: the owner's index, the master's route */

/* The segments are faulted in whole (prefault): refuse sizes this host cannot hold, naming
 * them, rather than let the kernel's OOM killer end the run (or something else). */
static int rp_check_memory(const rp_run *r)
{
    uint64_t slot = rp_slot_bytes(r->o.value_len);
    uint64_t need = r->segment_bytes * r->o.owners + rp_cpu_segment_bytes(r) * r->o.cpu_owners;
    uint64_t ram = fx_cli_host_ram();
    if (!ram || need <= ram / 10 * 9) return FLUXON_OK;
    char head[64] = "headroom, in whole grants";
    if (!r->o.capacity_blocks)
        snprintf(head, sizeof head, "25 %% + %llu values, in whole grants", (unsigned long long)rp_fixed_headroom(slot));
    fprintf(stderr,
            "fluxon demo: the segments need %.1f GiB (%u owner(s) x %.1f GiB: %llu %s x %u TP rank(s) x "
            "%llu-byte slots, + %s), more than 90 %% of this host's %.1f GiB of RAM: %s\n",
            (double)need / (1u << 30), r->o.owners, (double)r->segment_bytes / (1u << 30),
            (unsigned long long)(r->o.capacity_blocks ? r->o.capacity_blocks : r->distinct_pages),
            r->o.capacity_blocks ? "pages (--capacity-blocks)" : "distinct pages", r->o.tp, (unsigned long long)slot,
            head, (double)ram / (1u << 30),
            r->o.capacity_blocks ? "lower --capacity-blocks or --cpu-capacity-blocks"
                                 : "lower --value-len or --requests, or bound each owner with --capacity-blocks");
    return FLUXON_ERR_CONFIG; /* the flags' sizes: a usage error, as the --capacity-blocks check's */
}

static int rp_start_cluster(rp_run *r, fluxon_node **master, fluxon_node **owners, char *dir,
                            char socks[][160])
{
    /* the owners share the master's host: they reach it on its unix socket (no TCP stack
     * per PUT_DONE; the CPU owners too); remote owners would use "listen" */
    rp_size_owner(&r->o, r->distinct_pages, &r->segment_bytes, &r->grant_bytes);
    int rc = rp_check_memory(r);
    if (rc != FLUXON_OK) return rc;
    if (r->o.disk_dir && rp_mkdirs(r->o.disk_dir) != 0) {
        fprintf(stderr, "fluxon demo: --disk-dir %s: cannot make it: %s\n", r->o.disk_dir, strerror(errno));
        return FLUXON_ERR_CONFIG;
    }
    /* one heap reserve per process (common/heap.c), made by the node that starts first:
     * the master's covers the owners' default (an eighth of every segment) too, 64 MiB for
     * the rest of the process (the replay's own heap: 64 MiB alone left 2,300 page faults in
     * the trace replay, 128 MiB 1,800), and each disk tier's index with the master's routes
     * of its values (RP_HEAP_DISK_VALUE bytes a value, --tp values a page: 100,000 disk
     * values left 10,500 faults in the replay with 64 MiB, 1,800 with 256; one CPU, 5 pairs:
     * 172 -> 163 us a request) */
    uint64_t disk_values = r->o.disk_dir ? r->o.disk_capacity_blocks * r->o.tp * r->o.owners : 0;
    uint64_t heap_mib = ((r->segment_bytes * r->o.owners + rp_cpu_segment_bytes(r) * r->o.cpu_owners) / 8 +
                         (64ull << 20) + disk_values * RP_HEAP_DISK_VALUE) >> 20;
    heap_mib = heap_mib > 1024 ? 1024 : heap_mib;
    char mcfg[512];
    snprintf(mcfg, sizeof mcfg,
             "{\"role\":\"master\",\"cluster_id\":\"" RP_CLUSTER_ID "\",\"cluster_token\":\"" RP_TOKEN
             "\",\"listen\":\"127.0.0.1:0\",\"socket\":\"%s/master.sock\",\"log_level\":\"warn\","
             "\"heap_reserve_mib\":%llu}",
             dir, (unsigned long long)heap_mib);
    rc = fluxon_node_start(mcfg, master);
    if (rc != FLUXON_OK) {
        fprintf(stderr, "fluxon demo: master did not start: %s\n", fluxon_status_string(rc));
        return rc;
    }
    /* --capacity-blocks N: at most, and once full exactly, N pages × T values stay
     * resident: the expected capacity (§6: prewarmed, a hard cap) holds them and the
     * headroom (rp_size_owner), the hot tier's watermark is exactly their slots, so the
     * owner evicts its coldest values to make room (issue 7) */
    char capacity[256] = "", tenants[RP_MAX_TENANTS * 96 + 32] = "";
    if (r->o.capacity_blocks) {
        uint64_t slot = rp_slot_bytes(r->o.value_len);
        uint64_t hot = r->o.capacity_blocks * r->o.tp * slot, payload = hot + rp_headroom_values(&r->o) * slot;
        char wb[128] = ""; /* issue 16: write back ahead of eviction when CPU owners take it */
        if (r->o.cpu_owners)
            snprintf(wb, sizeof wb, ",\"writeback_watermark\":%.6g%s%s%s", r->o.writeback_watermark,
                     r->o.writeback_admission ? ",\"writeback_admission\":\"" : "",
                     r->o.writeback_admission ? r->o.writeback_admission : "", r->o.writeback_admission ? "\"" : "");
        snprintf(capacity, sizeof capacity,
                 ",\"expected\":{\"value_len\":%llu,\"payload_capacity_bytes\":%llu}},\"hot_capacity_bytes\":%llu%s",
                 (unsigned long long)r->o.value_len, (unsigned long long)payload, (unsigned long long)hot, wb);
    } else {
        snprintf(capacity, sizeof capacity, "}");
    }
    for (unsigned t = 0; t < r->o.tenants; t++) {
        size_t at = strlen(tenants);
        snprintf(tenants + at, sizeof tenants - at, "%s\"t%u\":{\"token\":\"demo-t%u\"", t ? "," : ",\"tenants\":{", t, t);
        at = strlen(tenants);
        /* issue 42: its quota_pages (--tenant-quotas, else 1/T of --capacity-blocks) in slot bytes */
        uint64_t quota = r->o.quota_pages[t] * r->o.tp * rp_slot_bytes(r->o.value_len);
        if (quota) snprintf(tenants + at, sizeof tenants - at, ",\"quota_bytes\":%llu", (unsigned long long)quota);
        at = strlen(tenants);
        snprintf(tenants + at, sizeof tenants - at, "}%s", t + 1 == r->o.tenants ? "}" : "");
    }
    for (unsigned k = 0; k < r->n_owners; k++) {
        char cfg[2560], disk[600] = "", dp[200];
        snprintf(socks[k], 160, "%s/owner%u.sock", dir, k);
        if (r->o.disk_dir) { /* issue 39: a record takes a 4 KiB header block + the value's 4 KiB blocks */
            uint64_t rec = rp_disk_record_bytes(r->o.value_len);
            uint64_t cap = r->o.disk_capacity_blocks * r->o.tp * rec;
            /* segments of an eighth of it (1..64 MiB, holding one record at least), so
             * that about N values fit, not the 2-segment floor */
            uint64_t seg = cap / 8 / (1u << 20) * (1u << 20);
            if (seg < (1u << 20)) seg = 1u << 20;
            if (seg > (64ull << 20)) seg = 64ull << 20;
            if (seg < rec + 4096) seg = (rec + 4096 + (1u << 20) - 1) / (1u << 20) * (1u << 20);
            if (cap < 2 * seg) {
                if (k == 0)
                    fprintf(stderr, "fluxon demo: --disk-capacity-blocks %llu: raised to %llu values per owner (2 "
                            "segments of %llu MiB, the least disk.capacity_bytes a disk tier takes)\n",
                            (unsigned long long)r->o.disk_capacity_blocks,
                            (unsigned long long)(2 * seg / (r->o.tp * rec)), (unsigned long long)(seg >> 20));
                cap = 2 * seg;
            }
            r->disk_values = cap / (r->o.tp * rec);
            snprintf(disk, sizeof disk,
                     ",\"disk\":{\"path\":\"%s/owner%u\",\"capacity_bytes\":%llu,\"segment_bytes\":%llu,"
                     "\"admission\":\"%s\",\"direct_io\":\"%s\"}", r->o.disk_dir, k, (unsigned long long)cap,
                     (unsigned long long)seg, r->o.disk_admission ? r->o.disk_admission : "all",
                     r->o.disk_direct_io ? r->o.disk_direct_io : "auto");
        }
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"owner\",\"cluster_id\":\"" RP_CLUSTER_ID "\",\"cluster_token\":\"" RP_TOKEN "\","
                 "\"node_id\":\"demo-owner-%u\",\"master\":\"unix:%s/master.sock\",\"socket\":\"%s\","
                 "\"segment_bytes\":%llu,\"reserve\":{\"grant_bytes\":%llu%s,\"log_level\":\"warn\","
                 "\"eviction_policy\":\"%s\",\"start_timeout_ms\":120000%s%s%s%s}", /* a multi-GiB segment is faulted in at start */
                 k, dir, socks[k], (unsigned long long)r->segment_bytes,
                 (unsigned long long)r->grant_bytes, capacity, r->o.eviction_policy, disk, tenants,
                 r->o.prefetch_from_owners ? ",\"prefetch_from_owners\":true" : "", rp_data_plane(r, dp, sizeof dp));
        rc = fluxon_node_start(cfg, &owners[k]);
        if (rc != FLUXON_OK) {
            if (rc == FLUXON_ERR_CONFIG) /* the flags made a config it refused: its reason is logged above */
                fprintf(stderr, "fluxon demo: owner %u did not start: its config was refused (the reason is logged "
                        "above)\n", k);
            else
                fprintf(stderr, "fluxon demo: owner %u did not start: %s (segment_bytes %llu, grant_bytes %llu)\n",
                        k, fluxon_status_string(rc), (unsigned long long)r->segment_bytes,
                        (unsigned long long)r->grant_bytes);
            return rc;
        }
    }
    return rp_start_cpu_owners(r, *master, dir);
}

/* one external config per owner: its --config file, or the embedded owner's socket;
 * 0 or the exit status */
static int rp_external_configs(rp_run *r)
{
    rp_cluster *cl = &r->cl;
    if (r->o.n_configs) {
        for (unsigned k = 0; k < r->o.n_configs; k++) {
            if (!(cl->ext_cfg[k] = fx_cli_read_config("fluxon demo", r->o.configs[k]))) return RP_EXIT_USAGE;
            /* each worker opens a client on it: say once what is wrong with the file */
            cJSON *doc = cJSON_Parse(cl->ext_cfg[k]);
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(doc, "role");
            int external = cJSON_IsString(role) && !strcmp(role->valuestring, "external");
            if (!external)
                fprintf(stderr, "fluxon demo: --config %s: %s: --config takes an external (client) config naming "
                        "one owner's socket (docs/config.md)\n", r->o.configs[k],
                        !doc ? "not valid JSON" : cJSON_IsString(role) ? "its role is not \"external\"" : "no \"role\"");
            cJSON_Delete(doc);
            if (!external) return RP_EXIT_USAGE;
        }
        return 0;
    }
    for (unsigned k = 0; k < r->n_owners; k++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"external\",\"cluster_id\":\"" RP_CLUSTER_ID "\",\"cluster_token\":\"" RP_TOKEN
                 "\",\"socket\":\"%s\",\"log_level\":\"warn\"}",
                 cl->socks[k]);
        if (!(cl->ext_cfg[k] = strdup(cfg))) return 1;
    }
    return 0;
}

int rp_cluster_up(rp_run *r)
{
    rp_cluster *cl = &r->cl;
    r->n_owners = r->o.owners;
    if (!r->o.n_configs) {
        int swept = rp_sweep_stale_dirs("/tmp", "fluxon-demo-", 600);
        if (swept)
            fprintf(stderr, "fluxon demo: removed %d director%s of earlier demos that were killed (/tmp/fluxon-demo-*: "
                    "only dead sockets in them)\n", swept, swept == 1 ? "y" : "ies");
        snprintf(cl->dir, sizeof cl->dir, "/tmp/fluxon-demo-XXXXXX");
        if (!mkdtemp(cl->dir)) {
            fprintf(stderr, "fluxon demo: mkdtemp: %s\n", strerror(errno));
            return 1;
        }
        cl->dir_made = 1;
        cl->embedded = 1;
        int rc = rp_start_cluster(r, &cl->master, cl->owners, cl->dir, cl->socks);
        if (rc != FLUXON_OK) return rc == FLUXON_ERR_CONFIG ? RP_EXIT_USAGE : 1; /* a flag's value refused: usage */
    }
    return rp_external_configs(r);
}

void rp_cluster_down(rp_run *r)
{
    rp_cluster *cl = &r->cl;
    for (unsigned k = 0; k < RP_MAX_OWNERS; k++) {
        free(cl->ext_cfg[k]);
        cl->ext_cfg[k] = NULL;
    }
    if (cl->embedded) {
        for (unsigned k = r->n_owners; k-- > 0;) fluxon_node_stop(cl->owners[k]);
        for (unsigned k = 0; k < RP_MAX_OWNERS; k++) fluxon_node_stop(cl->cpu[k]);
        fluxon_node_stop(cl->master);
        for (unsigned k = 0; k < r->n_owners; k++) unlink(cl->socks[k]); /* normally gone already */
        cl->embedded = 0;
    }
    if (cl->dir_made) rmdir(cl->dir);
    cl->dir_made = 0;
}
