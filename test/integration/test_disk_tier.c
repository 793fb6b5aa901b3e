/* test_disk_tier.c — the disk tier end to end (issue 39), fluxon processes on loopback
 * (restartfix.h): values evicted from an owner's memory come back from its disk with their
 * bytes; the disk cache survives an owner kill -9 and a master kill -9 (re-published);
 * a byte flipped in a segment file makes its key a miss, never wrong bytes; a second owner
 * on the same directory refuses to start. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>

#include "disktierfix.h"

/* The segment files in the owner's disk directory (paths into out[], at most cap). */
static int seg_files(char out[][800], int cap)
{
    char dir[512];
    const char *p = strstr(disk_extra, "\"path\":\"") + 8;
    snprintf(dir, sizeof dir, "%.*s", (int)(strchr(p, '"') - p), p);
    DIR *dd = opendir(dir);
    cr_assert_not_null(dd, "%s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd)) && n < cap)
        if (strstr(e->d_name, ".seg")) snprintf(out[n++], 800, "%s/%s", dir, e->d_name);
    closedir(dd);
    return n;
}

/* Issue 42: the default tenant's disk_bytes and the disk tier's records, read from one
 * stats answer (both change on the same thread): every record counts a 4 KiB header block
 * plus its value. */
static void tenant_disk_bytes_match(fluxon_client *c)
{
    static char buf[1 << 17];
    size_t len = 0;
    cr_assert_eq(fluxon_client_stats(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *doc = cJSON_Parse(buf), *own = cJSON_GetObjectItem(doc, "owner");
    double recs = cJSON_GetNumberValue(cJSON_GetObjectItem(own, "disk_records"));
    double b = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(own, "tenants"), "default"),
                                                        "disk_bytes"));
    cJSON_Delete(doc);
    cr_assert_gt(recs, 0);
    cr_assert_eq((long long)b, (long long)recs * (4096 + VLEN), "default's disk_bytes %.0f for %.0f records", b, recs);
}

/* One owner with a disk tier (admission all) and a client of it, after put_all and the
 * evictions' confirmation: most values on disk. */
static fluxon_client *filled_owner(void)
{
    up("all");
    fluxon_client *c = rf_client(0);
    put_all(c);
    cr_assert(rf_wait_stat(c, false, "eviction_debt", 0, 0, 5000), "evictions confirmed");
    return c;
}

Test(disk_tier, evicted_values_come_back_from_disk, .timeout = 240, .fini = fini)
{
    fluxon_client *c = filled_owner();
    /* most evicted values moved to disk; under load some go without a copy (no staging
     * room: counted, never a wait for the put) */
    cr_assert_gt(rf_stat(c, false, "evict_to_disk"), 0);
    cr_assert_gt(rf_stat(c, false, "evict_to_disk") + rf_stat(c, false, "disk_demote_busy"), N_KEYS / 3,
                 "the evicted values moved to disk or were counted");
    /* the copies were made 8 a reactor turn at most (a request waits for a slice, never a
     * round), and none is left to make once the evictions are confirmed (R1) */
    cr_assert_eq(rf_stat(c, false, "evict_disk_staging"), 0);
    cr_assert_geq(rf_stat(c, false, "evict_disk_stage_slices") * 8, rf_stat(c, false, "evict_to_disk"),
                  "%lld slices for %lld copies", rf_stat(c, false, "evict_disk_stage_slices"),
                  rf_stat(c, false, "evict_to_disk"));
    int hits = get_all(c);
    long long disk_hits = rf_stat(c, false, "disk_hits"), moved = rf_stat(c, false, "evict_to_disk");
    /* every value moved to disk and not pushed out of it is read back: the misses are the
     * victims the disk could not take at once (no staging room, counted) */
    long long busy = rf_stat(c, false, "disk_demote_busy");
    fprintf(stderr, "disk tier: %d of %d keys hit, %lld read back from disk, %lld values moved there, %lld dropped for "
            "want of staging room\n", hits, N_KEYS, disk_hits, moved, busy);
    cr_assert_geq(hits + busy, N_KEYS, "hits %d + dropped for room %lld of %d keys", hits, busy, N_KEYS);
    cr_assert_gt(disk_hits, 0, "hits came from disk (%lld moved there)", moved);
    cr_assert_eq(rf_stat(c, false, "disk_crc_failures"), 0);
    cr_assert_eq(rf_stat(c, true, "evict_to_disk"), moved, "the master moved what the owner counts");
    tenant_disk_bytes_match(c);
    /* a first read-back is a temporary copy; a second one promotes the value (published,
     * in memory again): the second pass makes no temporary copy */
    long long temp1 = rf_stat(c, false, "disk_temp"), reused1 = rf_stat(c, false, "disk_demote_reused");
    cr_assert_gt(temp1, 0);
    /* the same keys, but for victims of this pass's promotions that the disk could not take
     * at once (no staging room under load: counted, never a wait; seen under make asan) */
    int hits2 = get_all(c);
    long long busy2 = rf_stat(c, false, "disk_demote_busy") - busy;
    cr_assert(hits2 <= hits && hits2 + busy2 >= hits,
              "the second pass hits the same keys: %d of %d, %lld victims dropped for want of staging room", hits2,
              hits, busy2);
    /* every key read back once is promoted at its second read (the values they push out of
     * memory are read back once, temporary, in their turn) */
    long long promoted = (rf_stat(c, false, "disk_hits") - disk_hits) - (rf_stat(c, false, "disk_temp") - temp1);
    cr_assert_geq(promoted, temp1, "read back twice: %lld promoted, %lld read once before", promoted, temp1);
    put_all(c); /* pushes the promoted copies out again: their records are on disk already */
    tenant_disk_bytes_match(c);
    cr_assert_gt(rf_stat(c, false, "disk_demote_reused"), reused1, "a promoted copy evicted is not rewritten");
    cr_assert_eq(rf_stat(c, false, "disk_crc_failures"), 0);
    fluxon_client_close(c);
}

Test(disk_tier, survives_owner_and_master_kill_9, .timeout = 300, .fini = fini)
{
    up("all");
    fluxon_client *c = rf_client(0);
    put_all(c);
    /* the evictions confirmed first (their moves to disk are counted then), as filled_owner */
    cr_assert(rf_wait_stat(c, false, "eviction_debt", 0, 0, 5000), "evictions confirmed");
    long long moved = rf_stat(c, false, "evict_to_disk");
    cr_assert_gt(moved, N_KEYS / 3, "%lld values moved to disk of %d", moved, N_KEYS);
    fluxon_client_close(c);
    /* the owner dies with nothing flushed: what its disk held comes back, memory does not */
    int st = th_stop(rf.owner[0], SIGKILL, 5000);
    cr_assert(WIFSIGNALED(st));
    rf.owner[0] = -1;
    char log[400];
    snprintf(log, sizeof log, "%s/owner0.log", rf.dir);
    rf_start_owner(0);
    cr_assert(th_wait_log(log, "re-published", 60000), "the restarted owner re-publishes its disk (%s)", log);
    c = rf_client(0);
    cr_assert_gt(rf_stat(c, false, "disk_recovered_records"), 0);
    tenant_disk_bytes_match(c); /* counted by the rebuild too */
    int hits = get_all(c);
    fprintf(stderr, "after the owner's kill -9: %d hits of %lld values on disk (%lld records re-indexed)\n", hits, moved,
            rf_stat(c, false, "disk_recovered_records"));
    cr_assert_geq(hits, moved / 2, "after the owner's kill -9: %d hits of %lld values on disk", hits, moved);
    cr_assert_eq(rf_stat(c, false, "disk_crc_failures"), 0);
    /* then the master dies: the owner re-publishes to the new one, disk values included */
    rf_kill_master();
    rf_start_master();
    cr_assert(rf_wait_stat(c, true, "republish_owners_done", 1, 1, 30000), "the owner re-publishes (%s)", rf.dir);
    int hits2 = get_all(c);
    fprintf(stderr, "after the master's kill -9: %d hits\n", hits2);
    cr_assert_geq(hits2, hits / 2, "after the master's kill -9: %d hits (%d before)", hits2, hits);
    cr_assert_eq(rf_stat(c, false, "disk_crc_failures"), 0);
    fluxon_client_close(c);
}

Test(disk_tier, a_flipped_byte_is_a_miss_never_wrong_bytes, .timeout = 240, .fini = fini)
{
    up("all");
    fluxon_client *c = rf_client(0);
    put_all(c);
    fluxon_client_close(c);
    cr_assert_eq(WEXITSTATUS(th_stop(rf.owner[0], SIGTERM, 10000)), 0);
    rf.owner[0] = -1;
    char segs[64][800];
    int n = seg_files(segs, 64);
    cr_assert_gt(n, 0);
    int flipped = 0;
    for (int i = 0; i < n; i++) { /* one byte in the middle of each segment's first 4 MiB */
        int fd = open(segs[i], O_RDWR);
        cr_assert_geq(fd, 0);
        off_t at = (off_t)(4096 * 7 + 123);
        uint8_t b;
        if (pread(fd, &b, 1, at) == 1) {
            b ^= 0x5a;
            cr_assert_eq(pwrite(fd, &b, 1, at), 1);
            flipped++;
        }
        close(fd);
    }
    cr_assert_gt(flipped, 0);
    char log[400];
    snprintf(log, sizeof log, "%s/owner0.log", rf.dir);
    rf_start_owner(0);
    cr_assert(th_wait_log(log, "re-published", 60000), "%s", log);
    c = rf_client(0);
    int hits = get_all(c); /* fails on any wrong byte */
    fprintf(stderr, "%d bytes flipped: %d of %d keys hit, %lld checksum failures\n", flipped, hits, N_KEYS,
            rf_stat(c, false, "disk_crc_failures"));
    cr_assert_gt(hits, 0, "the records not touched still hit");
    cr_assert_lt(hits, N_KEYS, "the flipped records miss");
    cr_assert_gt(rf_stat(c, false, "disk_crc_failures"), 0, "the flips were detected");
    fluxon_client_close(c);
}

Test(disk_tier, a_second_owner_on_the_same_directory_exits_2, .timeout = 120, .fini = fini)
{
    up("all");
    char cfg[400], log[400], buf[2048];
    snprintf(cfg, sizeof cfg, "%s/owner-b.json", rf.dir);
    snprintf(log, sizeof log, "%s/owner-b.log", rf.dir);
    snprintf(buf, sizeof buf,
             "{\"role\":\"owner\",\"cluster_id\":\"rs\",\"cluster_token\":\"tok\",\"node_id\":\"ob\","
             "\"master\":\"127.0.0.1:%d\",\"socket\":\"%s/runb/o.sock\",\"segment_bytes\":\"32MiB\","
             "\"segment_touch\":\"off\"%s}", rf.port, rf.dir, disk_extra);
    th_write_file(cfg, buf);
    const char *argv[] = {th_fluxon_bin(), "--role=owner", "--config", cfg, NULL};
    pid_t b = th_spawn(argv, log);
    cr_assert_gt(b, 0);
    int st = 0;
    cr_assert(th_wait_exit(b, 20, &st), "the second owner exits on its own (see %s)", log);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "second owner: status %d (see %s)", st, log);
    cr_assert(th_wait_log(log, "held by owner o0", 10), "it names the holder (%s)", log);
}

/* Atomic groups (issue 39): demoted to disk whole and restored whole — a get over a group
 * hits all of its members or none, with their bytes. */
#define G_N 200
#define G_LEN 4

static void gkey(char *buf, size_t cap, int g, int m) { snprintf(buf, cap, "grp:%d:%d", g, m); }

Test(disk_tier, atomic_groups_come_back_whole, .timeout = 240, .fini = fini)
{
    up("all");
    fluxon_client *c = rf_client(0);
    static uint8_t v[VLEN];
    char kb[G_LEN][32];
    const char *keys[G_LEN];
    uint32_t glen = G_LEN;
    for (int m = 0; m < G_LEN; m++) keys[m] = kb[m];
    for (int g = 0; g < G_N; g++) { /* 200 groups x 4 x 64 KiB = 50 MiB through a 32 MiB segment */
        for (int m = 0; m < G_LEN; m++) gkey(kb[m], sizeof kb[m], g, m);
        fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_ATOMIC_GROUPS, .atomic_group_lens = &glen,
                                .n_atomic_groups = 1};
        fluxon_plan *plan = NULL;
        int st[G_LEN];
        cr_assert_eq(fluxon_local_fast_put_start(c, keys, G_LEN, VLEN, &o, &plan, st), FLUXON_OK);
        for (int m = 0; m < G_LEN; m++) {
            cr_assert_eq(st[m], FLUXON_OK, "group %d member %d: %s", g, m, fluxon_status_string(st[m]));
            th_pattern(v, NULL, VLEN, 9000 + (uint64_t)g * G_LEN + (uint64_t)m);
            memcpy((void *)(uintptr_t)plan->value_ptrs[m], v, VLEN);
        }
        fluxon_future *f = NULL;
        cr_assert_eq(fluxon_local_fast_put_commit(c, plan, &f), FLUXON_OK);
        cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
        fluxon_future_free(f);
    }
    /* moves are counted when the master confirms them: the last EVICTs may be on their way */
    cr_assert(rf_wait_stat(c, false, "eviction_debt", 0, 0, 5000), "evictions confirmed");
    cr_assert_gt(rf_stat(c, false, "evict_to_disk") + rf_stat(c, false, "disk_demote_busy"), G_N,
                 "groups moved to disk (or counted as dropped for room)");
    int whole = 0;
    for (int g = 0; g < G_N; g++) {
        for (int m = 0; m < G_LEN; m++) gkey(kb[m], sizeof kb[m], g, m);
        fluxon_get_handle *h = NULL;
        fluxon_get_start_result r;
        cr_assert_eq(fluxon_get_start(c, keys, G_LEN, 1, &glen, 1, &h, &r), FLUXON_OK);
        cr_assert(r.transferable_len == 0 || r.transferable_len == G_LEN, "group %d: %llu of %d members", g,
                  (unsigned long long)r.transferable_len, G_LEN);
        if (!r.transferable_len) {
            cr_assert_eq(fluxon_cancel_get_transfer(c, h), FLUXON_OK);
            continue;
        }
        fluxon_plan *p = NULL;
        cr_assert_eq(fluxon_get_transfer(c, h, 0, &p), FLUXON_OK);
        for (int m = 0; m < G_LEN; m++)
            cr_assert(th_pattern(NULL, (const uint8_t *)(uintptr_t)p->value_ptrs[m], VLEN,
                                 9000 + (uint64_t)g * G_LEN + (uint64_t)m), "group %d member %d: wrong bytes", g, m);
        cr_assert_eq(fluxon_release_views(c, p), FLUXON_OK);
        whole++;
    }
    long long busy = rf_stat(c, false, "disk_demote_busy");
    fprintf(stderr, "atomic groups: %d of %d restored whole (%lld disk hits, %lld victims without room)\n", whole, G_N,
            rf_stat(c, false, "disk_hits"), busy);
    cr_assert_geq(whole * G_LEN + busy, G_N * G_LEN, "every group not dropped for room comes back whole");
    cr_assert_eq(rf_stat(c, false, "disk_crc_failures"), 0);
    fluxon_client_close(c);
}

/* Another owner does not read this owner's disk (issue 39): a key only on A's disk misses
 * through B, B's put of it is not refused as existing, and the new version supersedes A's
 * disk record (INVALIDATE): A's readers get B's bytes, never the old ones. */
Test(disk_tier, a_key_on_another_owners_disk_is_superseded_by_a_new_put, .timeout = 240, .fini = fini)
{
    up_two();
    fluxon_client *a = rf_client(0), *b = rf_client(1);
    fluxon_put_options local = {.field_mask = FLUXON_PUT_OPT_LOCAL_FIRST, .local_first = 1};
    static uint8_t v[VLEN];
    char key[64];
    for (int i = 0; i < N_KEYS; i++) { /* on A: the first ones end on A's disk */
        snprintf(key, sizeof key, "k:%d", i);
        th_pattern(v, NULL, VLEN, 5000 + (uint64_t)i);
        cr_assert_eq(fluxon_put(a, key, v, VLEN, &local), FLUXON_OK);
    }
    cr_assert_gt(rf_stat(a, false, "evict_to_disk"), 100);
    /* k:0 went first: on A's disk only */
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_get(b, "k:0", &h), FLUXON_ERR_NOT_FOUND, "B does not read A's disk");
    th_pattern(v, NULL, VLEN, 777);
    fluxon_put_options rej = {.field_mask = FLUXON_PUT_OPT_LOCAL_FIRST | FLUXON_PUT_OPT_REJECT_IF_EXIST,
                              .local_first = 1, .reject_if_exist_same_key = 1};
    int rc = fluxon_put(b, "k:0", v, VLEN, &rej);
    cr_assert_eq(rc, FLUXON_OK, "B's put is not refused by A's disk copy: %s", fluxon_status_string(rc));
    cr_assert_eq(get_check(a, "k:0", 777), 1, "A's readers get B's version, never the disk's older one");
    cr_assert_eq(get_check(b, "k:0", 777), 1);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* fluxon_prefetch (issue 39): the keys a get will ask for soon are read back from the disk
 * now and kept in memory, so the get reads no disk; keys held nowhere or in memory start
 * no read; bad input is refused before anything is sent and moves no counter. */
Test(disk_tier, a_prefetch_reads_disk_values_back_before_the_get, .timeout = 240, .fini = fini)
{
    fluxon_client *c = filled_owner();
    cr_assert_gt(rf_stat(c, false, "disk_records"), 16);
    /* bad input: refused, nothing sent */
    static char longkey[FLUXON_MAX_KEY_BYTES + 2];
    memset(longkey, 'k', sizeof longkey - 1);
    const char *bad[1] = {longkey}, *none[1] = {NULL};
    cr_assert_eq(fluxon_prefetch(c, NULL, 1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_prefetch(c, bad, 0), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_prefetch(c, bad, 1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_prefetch(c, none, 1), FLUXON_ERR_INVALID_ARGUMENT);
    /* k:0..k:15 went first: on disk, not in memory; "nowhere" is held nowhere */
    enum { NK = 16 };
    char names[NK + 1][16];
    const char *keys[NK + 1];
    for (int i = 0; i < NK; i++) {
        snprintf(names[i], sizeof names[i], "k:%d", i);
        keys[i] = names[i];
    }
    keys[NK] = "nowhere";
    long long on_disk = 0;
    cr_assert_eq(fluxon_prefetch(c, keys, NK + 1), FLUXON_OK);
    cr_assert(rf_wait_stat(c, false, "prefetch_requests", 0, 1, 5000), "the one-way PREFETCH was read");
    on_disk = rf_stat(c, false, "prefetch_reads");
    cr_assert_eq(rf_stat(c, false, "prefetch_keys"), NK + 1, "bad input moved no counter");
    cr_assert_eq(rf_stat(c, false, "prefetch_bad_keys"), 0);
    cr_assert_gt(on_disk, NK / 2, "the oldest keys were read back from disk (%lld of %d)", on_disk, NK);
    cr_assert_leq(on_disk, NK, "\"nowhere\" started no read");
    cr_assert(rf_wait_stat(c, false, "gets_inflight", 0, 0, 10000), "the reads ended");
    long long disk_hits = rf_stat(c, false, "disk_hits"), temp = rf_stat(c, false, "disk_temp");
    cr_assert_eq(disk_hits, on_disk, "each prefetched key read once (%lld reads)", disk_hits);
    cr_assert_eq(temp, 0, "kept: no temporary copy");
    int hits = 0;
    for (int i = 0; i < NK; i++) hits += get_check(c, names[i], 5000 + (uint64_t)i);
    cr_assert_geq(hits, on_disk, "every prefetched key hits, byte-exact");
    cr_assert_eq(rf_stat(c, false, "disk_hits"), disk_hits, "the gets read no disk: the values were in memory");
    /* a second prefetch of the same keys starts no read: they are in memory */
    cr_assert_eq(fluxon_prefetch(c, keys, NK), FLUXON_OK);
    cr_assert(rf_wait_stat(c, false, "prefetch_requests", 0, 2, 5000));
    cr_assert_eq(rf_stat(c, false, "prefetch_reads"), on_disk);
    /* a key held nowhere first: the get's prefix would end there, so the keys after it (on
     * disk or not) are read for nobody: none is (the only owner knows it is held nowhere) */
    char later[NK][16];
    const char *cut[NK + 1];
    cut[0] = "nowhere-first";
    for (int i = 0; i < NK; i++) {
        snprintf(later[i], sizeof later[i], "k:%d", NK + i);
        cut[i + 1] = later[i];
    }
    long long past = rf_stat(c, false, "prefetch_past_prefix");
    cr_assert_eq(fluxon_prefetch(c, cut, NK + 1), FLUXON_OK);
    cr_assert(rf_wait_stat(c, false, "prefetch_requests", 0, 3, 5000));
    cr_assert_eq(rf_stat(c, false, "prefetch_past_prefix") - past, NK, "the %d keys after it were skipped", NK);
    cr_assert_eq(rf_stat(c, false, "prefetch_reads"), on_disk, "no read started past the cut");
    cr_assert_eq(rf_stat(c, false, "disk_crc_failures"), 0);
    /* a hint never waits (a new user's finding: with the owner stopped, the call waited for
     * the one-way queue twice timeout_ms): a full queue drops it, FLUXON_ERR_BUSY */
    cr_assert_eq(kill(rf.owner[0], SIGSTOP), 0);
    int busy = 0, calls = 0;
    double slowest = 0;
    for (; calls < 20000 && !busy; calls++) {
        double t0 = th_now_s();
        int rc = fluxon_prefetch(c, keys, NK);
        double dt = th_now_s() - t0;
        if (dt > slowest) slowest = dt;
        cr_assert(rc == FLUXON_OK || rc == FLUXON_ERR_BUSY, "%s", fluxon_status_string(rc));
        busy += rc == FLUXON_ERR_BUSY;
    }
    cr_assert_eq(kill(rf.owner[0], SIGCONT), 0);
    cr_assert(busy, "the queue to a stopped owner filled within %d calls", calls);
    cr_assert_lt(slowest, 0.5, "no call waited (slowest %.3f s)", slowest);
    cr_assert(rf_wait_stat(c, false, "prefetch_requests", 1, calls + 2, 10000), "the queued hints were read");
    fluxon_client_close(c);
}

/* A prefetch is a hint: it reads into a slot that is free now, never into one it would
 * have to wait for (a put queued behind its claim would wait too). With every slot of the
 * owner held by readers, a prefetch of disk keys starts no read and queues no claim
 * (prefetch_no_room, claim_waits unchanged); once they are released, the same prefetch
 * reads them back, byte-exact. */
Test(disk_tier, a_prefetch_never_waits_for_a_slot, .timeout = 240, .fini = fini)
{
    up_with("all", ",\"client_limits\":{\"max_pinned_bytes\":\"1GiB\"}"); /* one client may hold them all */
    fluxon_client *c = rf_client(0);
    put_all(c);
    cr_assert(rf_wait_stat(c, false, "eviction_debt", 0, 0, 5000), "evictions confirmed");
    /* the newest keys hit in memory, older ones come back from disk as temporary copies;
     * each is held until a get finds no slot and nothing it could evict (NO_SPACE) */
    static fluxon_holder *h[N_KEYS];
    int held = 0, rc = FLUXON_OK, i = N_KEYS - 1;
    char key[64];
    for (; i >= 0 && rc != FLUXON_ERR_NO_SPACE; i--) {
        snprintf(key, sizeof key, "k:%d", i);
        rc = fluxon_get(c, key, &h[held]);
        cr_assert(rc == FLUXON_OK || rc == FLUXON_ERR_NOT_FOUND || rc == FLUXON_ERR_NO_SPACE, "get %s: %s", key,
                  fluxon_status_string(rc));
        held += rc == FLUXON_OK;
    }
    cr_assert_eq(rc, FLUXON_ERR_NO_SPACE, "the owner filled with held values (%d held)", held);
    cr_assert_gt(i, 16, "older keys are left on disk");
    enum { NK = 16 };
    char names[NK][16];
    const char *keys[NK];
    for (int k = 0; k < NK; k++) {
        snprintf(names[k], sizeof names[k], "k:%d", k);
        keys[k] = names[k];
    }
    long long reads0 = rf_stat(c, false, "prefetch_reads"), room0 = rf_stat(c, false, "prefetch_no_room");
    long long waits0 = rf_stat(c, false, "claim_waits"), hits0 = rf_stat(c, false, "disk_hits");
    long long req0 = rf_stat(c, false, "prefetch_requests");
    cr_assert_eq(fluxon_prefetch(c, keys, NK), FLUXON_OK);
    cr_assert(rf_wait_stat(c, false, "prefetch_requests", 1, req0 + 1, 5000), "the one-way PREFETCH was read");
    cr_assert(rf_wait_stat(c, false, "gets_inflight", 0, 0, 10000));
    long long asked = rf_stat(c, false, "prefetch_reads") - reads0;
    cr_assert_gt(asked, NK / 2, "the oldest keys are on disk (%lld)", asked);
    cr_assert_eq(rf_stat(c, false, "prefetch_no_room") - room0, asked, "no slot free: no read started");
    cr_assert_eq(rf_stat(c, false, "claim_waits"), waits0, "the prefetch queued no claim");
    cr_assert_eq(rf_stat(c, false, "disk_hits"), hits0);
    for (int k = 0; k < held; k++) fluxon_holder_release(h[k]);
    /* room again: the same hint reads them back, and the gets find them in memory */
    cr_assert_eq(fluxon_prefetch(c, keys, NK), FLUXON_OK);
    cr_assert(rf_wait_stat(c, false, "prefetch_requests", 1, req0 + 2, 5000));
    cr_assert_eq(rf_stat(c, false, "prefetch_reads"), reads0 + 2 * asked, "the same keys on disk");
    cr_assert(rf_wait_stat(c, false, "gets_inflight", 0, 0, 10000));
    cr_assert_eq(rf_stat(c, false, "prefetch_no_room") - room0, asked, "room: every read started");
    cr_assert_eq(rf_stat(c, false, "disk_hits") - hits0, asked);
    int hits = 0;
    for (int k = 0; k < NK; k++) hits += get_check(c, names[k], 5000 + (uint64_t)k);
    cr_assert_geq(hits, asked, "the prefetched keys hit, byte-exact");
    cr_assert_eq(rf_stat(c, false, "disk_hits") - hits0, asked, "from memory: no second read");
    fluxon_client_close(c);
}

/* One number of tenant's entry in the owner's "tenants" stats (-1: absent). */
static long long tenant_stat(fluxon_client *c, const char *tenant, const char *name)
{
    static char buf[1 << 17];
    size_t len = 0;
    cr_assert_eq(fluxon_client_stats(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *doc = cJSON_Parse(buf);
    cJSON *v = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "owner"), "tenants"), tenant), name);
    long long r = cJSON_IsNumber(v) ? (long long)cJSON_GetNumberValue(v) : -1;
    cJSON_Delete(doc);
    return r;
}

/* Issue 42, a quota per tier: tenants.acme.disk_quota_bytes bounds acme's records on the
 * owner's disk tier. acme evicts ~700 values of 64 KiB (68 KiB on disk each) into a quota
 * of 1 MiB: its oldest records leave for its newer ones, its bytes there never pass the
 * quota, and only its newest evicted values come back from disk (byte-exact); the default
 * tenant, without a quota, keeps what the disk holds. */
Test(disk_tier, a_tenants_disk_quota_keeps_its_newest_records_only, .timeout = 240, .fini = fini)
{
    up_with("all", ",\"tenants\":{\"acme\":{\"token\":\"acme-secret\",\"disk_quota_bytes\":\"1MiB\"}}");
    char buf[2048];
    FILE *f = fopen(rf.ecfg[0], "r");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, sizeof buf - 64, f);
    fclose(f);
    while (n && buf[n - 1] != '}') n--;
    cr_assert_gt(n, 0);
    snprintf(buf + n - 1, sizeof buf - (n - 1), ",\"tenant\":\"acme\",\"tenant_token\":\"acme-secret\"}");
    fluxon_client *acme = NULL, *d = rf_client(0);
    cr_assert_eq(fluxon_client_open(buf, &acme), FLUXON_OK, "%s", buf);
    const long long quota = 1 << 20, rec = 4096 + VLEN;
    /* acme's keys are 1018 bytes at most (1024 less "\x01acme/"): prefetch refuses longer
     * ones itself, for nobody answers it */
    static char lk[FLUXON_MAX_KEY_BYTES + 1];
    memset(lk, 'k', FLUXON_MAX_KEY_BYTES - 5);
    const char *lks[1] = {lk};
    cr_assert_eq(fluxon_prefetch(acme, lks, 1), FLUXON_ERR_INVALID_ARGUMENT, "1019 bytes");
    lk[FLUXON_MAX_KEY_BYTES - 6] = 0;
    cr_assert_eq(fluxon_prefetch(acme, lks, 1), FLUXON_OK, "1018 bytes");
    cr_assert_eq(tenant_stat(d, "acme", "disk_quota_bytes"), quota);
    put_all(acme);
    cr_assert(rf_wait_stat(d, false, "eviction_debt", 0, 0, 5000), "evictions confirmed");
    long long held = tenant_stat(d, "acme", "disk_bytes"), drops = tenant_stat(d, "acme", "disk_quota_drops");
    fprintf(stderr, "acme: %lld bytes on disk (quota %lld), %lld records dropped for newer ones\n", held, quota, drops);
    cr_assert_gt(held, 0);
    cr_assert_leq(held, quota, "acme's records stay within its disk quota");
    cr_assert_eq(held % rec, 0);
    cr_assert_gt(drops, 100, "its oldest records left for its newer ones");
    long long disk_hits = rf_stat(d, false, "disk_hits");
    int hits = get_all(acme); /* a miss, or exactly the bytes put */
    long long from_disk = rf_stat(d, false, "disk_hits") - disk_hits;
    cr_assert_gt(from_disk, 0, "its newest evicted values come back from disk");
    cr_assert_leq(from_disk, quota / rec, "no more than its quota's records come back from disk (%d hits)", hits);
    cr_assert_eq(rf_stat(d, false, "disk_crc_failures"), 0);
    /* the default tenant has no disk quota: its records take what the disk holds */
    put_all(d);
    cr_assert(rf_wait_stat(d, false, "eviction_debt", 0, 0, 5000));
    cr_assert_gt(tenant_stat(d, "default", "disk_bytes"), 4 * quota);
    cr_assert_leq(tenant_stat(d, "acme", "disk_bytes"), quota);
    cr_assert_eq(tenant_stat(d, "default", "disk_quota_drops"), 0);
    fluxon_client_close(acme);
    fluxon_client_close(d);
}

/* The master's replicas of owner 0 against what it holds (committed slots and disk records),
 * read until they agree (bounded): true when they do. */
static bool replicas_match(fluxon_client *c, int timeout_ms)
{
    double end = th_now_s() + th_wait_bound_s(timeout_ms);
    long long m, com, disk;
    do {
        m = rf_stat(c, true, "replicas");
        com = rf_stat(c, false, "slots_committed");
        disk = rf_stat(c, false, "disk_records");
        if (m == com + disk) return true;
        th_sleep_ms(50);
    } while (th_now_s() < end);
    fprintf(stderr, "the master records %lld replicas; owner 0 holds %lld committed slots + %lld disk records\n", m, com,
            disk);
    return false;
}

/* A disk record dropped while the report naming it is on its way to a new master (held 3 s
 * by a test fault): its route drop reaches the master first and finds no route, then the
 * report routes it. The owner drops that route again when the report is answered (found by
 * the disk chaos run: 14 more replicas at the master than the owners held); the old code
 * left the master routing records that were gone (lookups read nothing and missed). */
Test(disk_tier, a_record_dropped_while_its_report_is_held_loses_its_route, .timeout = 240, .fini = fini)
{
    up_with("all", ",\"test\":{\"fault_message\":\"REPUBLISH\",\"fault\":\"delay_request\",\"fault_ms\":3000,"
                   "\"fault_count\":1}");
    fluxon_client *c = rf_client(0);
    put_all(c);
    cr_assert(rf_wait_stat(c, false, "eviction_debt", 0, 0, 5000), "evictions confirmed");
    cr_assert(rf_wait_stat(c, false, "disk_write_bytes", 1, 0, 10000), "records written");
    char segs[64][800];
    int n = seg_files(segs, 64), flipped = 0;
    for (int i = 0; i < n; i++) { /* a byte of a record's value in each segment: that record fails its read */
        int fd = open(segs[i], O_RDWR);
        cr_assert_geq(fd, 0);
        uint8_t b;
        if (pread(fd, &b, 1, 4096 * 7 + 123) == 1) {
            b ^= 0x5a;
            cr_assert_eq(pwrite(fd, &b, 1, 4096 * 7 + 123), 1);
            flipped++;
        }
        close(fd);
    }
    cr_assert_gt(flipped, 0);
    rf_kill_master();
    rf_start_master();
    cr_assert(rf_wait_stat(c, true, "owners_alive", 0, 1, 20000), "owner 0 registered with the new master");
    cr_assert_eq(rf_stat(c, false, "republishing"), 1, "its report is held (see %s)", rf.dir);
    int hits = get_all(c); /* from the disk index (no route yet): the flipped records fail, are dropped */
    cr_assert_gt(rf_stat(c, false, "disk_crc_failures"), 0, "the flips were met while the report was held");
    cr_assert_eq(rf_stat(c, false, "republishing"), 1, "the reads ran while the report was held");
    cr_assert(rf_wait_stat(c, true, "republish_owners_done", 1, 1, 20000), "the report reached the master");
    cr_assert_gt(rf_stat(c, false, "republish_routed_gone"), 0, "the report routed records dropped meanwhile");
    cr_assert(replicas_match(c, 5000), "no route names a record owner 0 dropped (see %s)", rf.dir);
    fprintf(stderr, "%d keys hit while the report was held; %lld records routed after they went\n", hits,
            rf_stat(c, false, "republish_routed_gone"));
    fluxon_client_close(c);
}
