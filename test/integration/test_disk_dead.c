/* test_disk_dead.c — a deleted or replaced value never comes back from a disk tier (issue
 * 44 W6 on the disk tier, issue 39), fluxon processes on loopback (disktierfix.h):
 *  - deleted and overwritten keys whose records were on disk stay gone after the owner's
 *    kill -9 (tombstones; a DELETE is answered once they are written);
 *  - a DELETE while the owner holding the only copy is down is answered UNKNOWN_OUTCOME,
 *    and the owner restarted with its disk does not bring the key back (the master hands it
 *    what was invalidated meanwhile before it re-publishes);
 *  - an owner the master forgot drops its disk too (a barrier), whatever its generation;
 *  - an owner away longer than the master's grace (DIR/CONTACT) drops its disk when it
 *    starts again, even when the master restarted meanwhile and cannot tell it.
 * On the old code every one of these keys came back: the index dropped records in memory
 * only, the master dropped held invalidations for a new generation, and told only the same
 * generation it was forgotten. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stddef.h>
#include <xxhash.h>

#include "disk_int.h"
#include "disktierfix.h"

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Owner i killed -9 and started again (the caller waits for what it needs). */
static void owner_kill_restart(int i)
{
    int st = th_stop(rf.owner[i], SIGKILL, 5000);
    cr_assert(WIFSIGNALED(st));
    rf.owner[i] = -1;
    rf_start_owner(i);
}

Test(disk_dead, deleted_and_replaced_keys_stay_gone_after_an_owner_kill_9, .timeout = 240, .fini = fini)
{
    up("all");
    fluxon_client *c = rf_client(0);
    put_all(c); /* the first keys went to disk */
    cr_assert(rf_wait_stat(c, false, "eviction_debt", 0, 0, 5000), "evictions confirmed");
    /* the disk copies are made after their eviction round, 8 a reactor turn: the master counts
     * them once made (ASan once looked in between) */
    cr_assert(rf_wait_stat(c, true, "evict_to_disk", 1, 101, 10000), "values went to disk");
    char key[64];
    int deleted = 0;
    for (int i = 10; i < 20; i++) { /* replaced: the new version in memory only */
        snprintf(key, sizeof key, "k:%d", i);
        put_seeded(c, key, 9000 + (uint64_t)i);
    }
    double disk_us[10], mem_us[10];
    int unknown = 0;
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "k:%d", i);
        double t0 = th_now_s();
        int rc = fluxon_delete(c, key);
        disk_us[deleted] = (th_now_s() - t0) * 1e6;
        /* a disk that is behind (other suites writing to the same file system) may have no
         * staging room for the tombstone: the DELETE is then UNKNOWN_OUTCOME, counted
         * disk_tomb_failures, and the master holds the invalidation for the restart below
         * (make test met it once, with three suites in parallel) */
        if (rc == FLUXON_ERR_UNKNOWN_OUTCOME) {
            cr_assert_gt(rf_stat(c, false, "disk_tomb_failures"), 0, "delete %s: UNKNOWN_OUTCOME with every "
                         "tombstone written", key);
            unknown++;
            continue;
        }
        cr_assert(rc == FLUXON_OK || rc == FLUXON_ERR_NOT_FOUND, "delete %s: %s", key, fluxon_status_string(rc));
        deleted += rc == FLUXON_OK;
    }
    for (int i = 0; i < 10; i++) { /* the last keys put are in memory: no tombstone to write */
        snprintf(key, sizeof key, "k:%d", N_KEYS - 1 - i);
        double t0 = th_now_s();
        cr_assert_eq(fluxon_delete(c, key), FLUXON_OK);
        mem_us[i] = (th_now_s() - t0) * 1e6;
    }
    qsort(disk_us, (size_t)deleted, sizeof *disk_us, dbl_cmp);
    qsort(mem_us, 10, sizeof *mem_us, dbl_cmp);
    fprintf(stderr, "delete latency (median): a key on disk %.0f us (its tombstone written first), in memory %.0f us\n",
            deleted ? disk_us[deleted / 2] : 0.0, mem_us[5]);
    cr_assert_geq(deleted + unknown, 5, "most of the first keys were on disk (%d deleted, %d unknown)", deleted,
                  unknown);
    long long tombs = rf_stat(c, false, "disk_tombstones");
    cr_assert_geq(tombs, deleted, "a tombstone per deleted disk record (%lld)", tombs);
    fluxon_client_close(c);
    owner_kill_restart(0); /* right after the last DELETE's OK */
    c = client_when_up(0, 30000);
    cr_assert(rf_wait_stat(c, true, "republish_owners_done", 1, 1, 60000), "the restarted owner re-publishes (%s)",
              rf.dir);
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "k:%d", i);
        cr_assert_eq(get_check(c, key, 5000 + (uint64_t)i), 0, "deleted %s came back after the owner's kill -9", key);
    }
    cr_assert_gt(rf_stat(c, false, "disk_recovered_records"), 0);
    cr_assert_gt(rf_stat(c, false, "disk_recovered_killed"), 0, "the restart met the tombstones");
    for (int i = 10; i < 20; i++) { /* the new version went with the memory; never the old one */
        snprintf(key, sizeof key, "k:%d", i);
        get_check(c, key, 9000 + (uint64_t)i);
    }
    cr_assert_eq(get_check(c, "k:30", 5030), 1, "the other disk records are back");
    fluxon_client_close(c);
}

Test(disk_dead, a_delete_while_the_holder_is_down_is_unknown_and_its_restart_does_not_bring_it_back, .timeout = 240,
     .fini = fini)
{
    up_two();
    fluxon_client *a = rf_client(0), *b = rf_client(1);
    put_all_local(a); /* on owner 0: the first ones end on its disk */
    fluxon_client_close(a);
    owner0_killed(b);
    int rc = fluxon_delete(b, "k:0");
    cr_assert_eq(rc, FLUXON_ERR_UNKNOWN_OUTCOME, "a delete with the only copy's owner away is not OK: %s",
                 fluxon_status_string(rc));
    cr_assert_eq(rf_stat(b, true, "deletes_unconfirmed_away"), 1);
    rf_start_owner(0);
    cr_assert(rf_wait_stat(b, true, "republish_owners_done", 1, 1, 60000), "owner 0 re-publishes its disk (%s)",
              rf.dir);
    cr_assert_eq(get_check(b, "k:0", 5000), 0, "the deleted key came back with the restarted owner's disk");
    a = client_when_up(0, 30000);
    cr_assert_eq(get_check(a, "k:0", 5000), 0, "the deleted key came back (owner 0)");
    cr_assert_eq(get_check(a, "k:1", 5001), 1, "owner 0's other disk records are back");
    cr_assert_eq(fluxon_delete(b, "k:0"), FLUXON_ERR_NOT_FOUND, "the retry finds it deleted");
    fluxon_client_close(a);
    fluxon_client_close(b);
}

Test(disk_dead, an_owner_the_master_forgot_drops_its_disk_in_a_new_generation_too, .timeout = 240, .fini = fini)
{
    rf_master_extra = ",\"dead_owner_grace_ms\":1000";
    up_two();
    rf_master_extra = "";
    fluxon_client *a = rf_client(0), *b = rf_client(1);
    put_all_local(a); /* on owner 0: the first ones end on its disk */
    fluxon_client_close(a);
    owner0_killed(b);
    cr_assert_eq(fluxon_delete(b, "k:0"), FLUXON_ERR_UNKNOWN_OUTCOME);
    cr_assert(rf_wait_stat(b, true, "owners_forgotten", 1, 1, 20000), "owner 0 is forgotten (see %s)", rf.dir);
    rf_start_owner(0); /* a new process: the invalidations held for it went with the forgetting */
    cr_assert(rf_wait_stat(b, true, "reregistrations", 1, 1, 30000), "owner 0 registers again (see %s)", rf.dir);
    a = client_when_up(0, 30000);
    cr_assert(rf_wait_stat(a, false, "disk_barriers", 0, 1, 10000), "owner 0 dropped its disk (a barrier)");
    char log[400];
    snprintf(log, sizeof log, "%s/owner0.log", rf.dir);
    cr_assert(th_wait_log(log, "had forgotten this owner", 1000), "owner 0 is told it was forgotten (see %s)", log);
    cr_assert_eq(get_check(b, "k:0", 5000), 0, "the key deleted while owner 0 was away came back");
    cr_assert_eq(get_check(a, "k:1", 5001), 0, "owner 0's disk was dropped");
    cr_assert_eq(rf_stat(a, false, "disk_records"), 0);
    fluxon_client_close(a);
    fluxon_client_close(b);
    /* and it stays dropped across another restart (the barrier is on the file) */
    owner_kill_restart(0);
    a = client_when_up(0, 30000);
    cr_assert(rf_wait_stat(a, false, "master_connected", 0, 1, 30000));
    cr_assert_eq(rf_stat(a, false, "disk_records"), 0, "the barrier kept the old records dropped");
    cr_assert_eq(get_check(a, "k:1", 5001), 0);
    fluxon_client_close(a);
}

/* DIR/CONTACT says when this owner last heard from a master, and that master's grace. An
 * owner started again after a longer absence drops its disk: the master may have forgotten
 * it (and the deletions it missed) and then restarted, so that nobody can tell it. Here the
 * master restarts while owner 0 is down (losing the invalidation it held), and owner 0's
 * CONTACT is set back past the grace (as a long absence would leave it). The old code
 * re-published the deleted key to the new master. */
static void contact_set_back(uint64_t ago_ms)
{
    char path[700];
    snprintf(path, sizeof path, "%s/disk/CONTACT", disk_parent);
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0, "%s", path);
    dk_contact_rec_t c;
    cr_assert_eq(pread(fd, &c, sizeof c, 0), (ssize_t)sizeof c, "CONTACT was written");
    c.contact_ms = fx_realtime_ns() / 1000000u - ago_ms;
    c.checksum = XXH3_64bits(&c, offsetof(dk_contact_rec_t, checksum));
    cr_assert_eq(pwrite(fd, &c, sizeof c, 0), (ssize_t)sizeof c);
    close(fd);
}

Test(disk_dead, an_owner_away_longer_than_the_grace_drops_its_disk_even_after_a_master_restart, .timeout = 240,
     .fini = fini)
{
    rf_master_extra = ",\"dead_owner_grace_ms\":60000";
    up_two();
    fluxon_client *a = rf_client(0), *b = rf_client(1);
    put_all_local(a); /* on owner 0: the first ones end on its disk */
    cr_assert(rf_wait_stat(a, false, "disk_contact_writes", 1, 1, 10000), "owner 0 noted the master's contact");
    fluxon_client_close(a);
    owner0_killed(b);
    cr_assert_eq(fluxon_delete(b, "k:0"), FLUXON_ERR_UNKNOWN_OUTCOME);
    rf_kill_master(); /* the invalidation held for owner 0 goes with it */
    rf_start_master();
    cr_assert(rf_wait_stat(b, true, "republish_owners_done", 1, 1, 30000), "owner 1 re-registers (%s)", rf.dir);
    contact_set_back(120000); /* twice the grace */
    rf_start_owner(0);
    a = client_when_up(0, 30000);
    cr_assert(rf_wait_stat(a, false, "master_connected", 0, 1, 30000));
    cr_assert_eq(get_check(b, "k:0", 5000), 0, "the key deleted while owner 0 was away came back");
    cr_assert_eq(get_check(a, "k:0", 5000), 0, "the key deleted while owner 0 was away came back (owner 0)");
    cr_assert_eq(rf_stat(a, false, "disk_stale_drops"), 1);
    cr_assert_eq(rf_stat(a, false, "disk_records"), 0, "the disk was dropped");
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* One owner whose first disk INVALIDATE writes no tombstone (a test fault: the record leaves
 * the index, nothing reaches the file), every key put and the first ones moved to disk. */
static fluxon_client *up_with_one_tombstone_lost(void)
{
    up_with("all", ",\"test\":{\"fault_message\":\"INVALIDATE\",\"fault\":\"drop\",\"fault_count\":1}");
    fluxon_client *c = rf_client(0);
    put_all(c);
    cr_assert(rf_wait_stat(c, false, "eviction_debt", 0, 0, 5000), "evictions confirmed");
    /* the disk copies are made after their eviction round, 8 a reactor turn: the master counts
     * them once made (ASan once looked in between) */
    cr_assert(rf_wait_stat(c, true, "evict_to_disk", 1, 101, 10000), "values went to disk");
    return c;
}

/* A DELETE whose tombstone could not be written (a test fault stands for a paused or full
 * disk) is answered UNKNOWN_OUTCOME, and the master holds the invalidation for the owner as
 * for one that was away: the owner restarted with its disk gets it before it re-publishes,
 * and the key stays deleted. The old code counted the failure and forgot the
 * invalidation: the key came back with the restart (a new user's finding). */
Test(disk_dead, a_delete_whose_tombstone_failed_stays_deleted_after_an_owner_restart, .timeout = 240, .fini = fini)
{
    fluxon_client *c = up_with_one_tombstone_lost();
    int rc = fluxon_delete(c, "k:0"); /* on disk: evicted first */
    cr_assert_eq(rc, FLUXON_ERR_UNKNOWN_OUTCOME, "a delete whose tombstone failed is not OK: %s",
                 fluxon_status_string(rc));
    fluxon_client_close(c);
    owner_kill_restart(0);
    c = client_when_up(0, 30000);
    cr_assert(rf_wait_stat(c, true, "republish_owners_done", 1, 1, 60000), "the restarted owner re-publishes (%s)",
              rf.dir);
    cr_assert_eq(get_check(c, "k:0", 5000), 0, "the key whose tombstone failed came back after the owner's restart");
    cr_assert_eq(get_check(c, "k:1", 5001), 1, "the other disk records are back");
    cr_assert_eq(rf_stat(c, true, "invalidations_held_unconfirmed"), 1, "the master held the unconfirmed one");
    fluxon_client_close(c);
}

/* An overwrite's INVALIDATE of the old version's disk record is one-way: the owner stages
 * its tombstone (written within ms) and may be killed first. A test fault stands for that
 * lost tombstone (the record leaves the index, nothing reaches the file). The master now
 * sends the new process the disk invalidations it sent the old one lately, before it
 * re-publishes: the old version never comes back (the new one went with the memory). On the
 * old code the restarted owner re-published the old version and `get` served its bytes
 * (found by fuzz_owner_disk's second life, session 38). */
Test(disk_dead, a_replaced_key_whose_tombstone_was_lost_stays_gone_after_an_owner_kill_9, .timeout = 240, .fini = fini)
{
    fluxon_client *c = up_with_one_tombstone_lost();
    long long tombs = rf_stat(c, false, "disk_tombstones");
    put_seeded(c, "k:0", 9000); /* replaced (k:0 was evicted first: on disk); the new version in memory only */
    cr_assert_eq(get_check(c, "k:0", 9000), 1, "the new version is served");
    cr_assert_eq(rf_stat(c, false, "disk_tombstones"), tombs, "the fault stood for the lost tombstone");
    fluxon_client_close(c);
    owner_kill_restart(0);
    c = client_when_up(0, 30000);
    cr_assert(rf_wait_stat(c, true, "republish_owners_done", 1, 1, 60000), "the restarted owner re-publishes (%s)",
              rf.dir);
    cr_assert_eq(get_check(c, "k:0", 9000), 0, "the replaced key came back after the owner's kill -9");
    cr_assert_geq(rf_stat(c, true, "invalidations_held_after_restart"), 1, "the master sent it again");
    cr_assert_eq(get_check(c, "k:30", 5030), 1, "the other disk records are back");
    fluxon_client_close(c);
}

/* Issue 39: an eviction round's disk copies are made after it, 8 a reactor turn (the
 * pump), by identity. A value deleted between its round and its copy (a test fault holds
 * the first round's cohort before its copies) is never copied: it does not come back, from
 * the disk or after the owner's kill -9; later rounds go on meanwhile, their victims go to
 * disk and come back. */
Test(disk_dead, a_value_deleted_before_its_disk_copy_is_not_copied, .timeout = 240, .fini = fini)
{
    up_with("all", ",\"test\":{\"fault_message\":\"EVICT\",\"fault\":\"delay_request\",\"fault_ms\":1500,\"fault_count\":1}");
    fluxon_client *c = rf_client(0);
    char key[64];
    int n = 0;
    while (n < N_KEYS && rf_stat(c, false, "evict_disk_staging") == 0) { /* until the first round holds its copies */
        snprintf(key, sizeof key, "k:%d", n);
        put_seeded(c, key, 5000 + (uint64_t)n);
        n++;
    }
    cr_assert_eq(rf_stat(c, false, "evict_disk_staging"), 1, "a round's copies are held (%d puts)", n);
    /* (a later round's copies may already be made: evict_to_disk is not read here; the held
     * round is the first, and k:0, the coldest value, is in it. Under parallel suites a
     * second round once went to disk between the last put and this line.) */
    cr_assert_eq(fluxon_delete(c, "k:0"), FLUXON_OK, "k:0, the first victim, deleted while its copy waits");
    for (int i = n; i < n + 200; i++) { /* later rounds go on meanwhile: their copies are not held */
        snprintf(key, sizeof key, "k:%d", i);
        put_seeded(c, key, 5000 + (uint64_t)i);
    }
    cr_assert(rf_wait_stat(c, false, "evict_disk_staging", 0, 0, 10000), "the held copies were made");
    cr_assert(rf_wait_stat(c, false, "eviction_debt", 0, 0, 10000), "and the EVICT answered");
    long long moved = rf_stat(c, false, "evict_to_disk");
    cr_assert_gt(moved, 0, "the round's other victims moved to disk (evictions %lld, busy %lld, not admitted %lld, slices %lld, "
                 "records %lld)", rf_stat(c, false, "evictions"), rf_stat(c, false, "disk_demote_busy"),
                 rf_stat(c, false, "evict_disk_not_admitted"), rf_stat(c, false, "evict_disk_stage_slices"),
                 rf_stat(c, false, "disk_records"));
    cr_assert_eq(get_check(c, "k:0", 5000), 0, "the deleted key is served");
    cr_assert_eq(get_check(c, "k:1", 5001), 1, "the next victim is read back from disk");
    cr_assert_gt(rf_stat(c, false, "disk_hits"), 0);
    fluxon_client_close(c);
    owner_kill_restart(0);
    c = client_when_up(0, 30000);
    cr_assert(rf_wait_stat(c, true, "republish_owners_done", 1, 1, 60000), "the restarted owner re-publishes (%s)",
              rf.dir);
    cr_assert_eq(get_check(c, "k:0", 5000), 0, "the deleted key came back after the owner's kill -9");
    cr_assert_eq(get_check(c, "k:1", 5001), 1, "the other disk records are back");
    cr_assert_eq(rf_stat(c, false, "disk_crc_failures"), 0);
    fluxon_client_close(c);
}
