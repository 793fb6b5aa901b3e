/* test_disk_tomb.c — Criterion suite for what keeps a dead disk record dead across a reopen
 * (issue 44 W6 on the disk tier, disk/disk_tomb.c): a killed record (INVALIDATE) is not
 * found again whether its tombstone is read from an index block or by a scan; a newer
 * version written after the tombstone stays; a barrier drops everything before it and
 * nothing after; fx_disk_when_written reports a written tombstone and a failed write. The
 * old code dropped records from memory only: every one came back at the reopen. */
#include <criterion/criterion.h>

#include "diskfix.h"

typedef struct wres {
    int status, calls;
} wres_t;

static void on_written(void *arg, int status)
{
    wres_t *w = arg;
    w->status = status;
    w->calls++;
}

/* Waits (bounded) for what was staged so far to be on the file; its status. */
static int written_wait(fx_reactor_t *r, fx_disk_t *d)
{
    wres_t w = {0};
    bool nomem;
    if (!fx_disk_when_written(d, on_written, &w, &nomem)) {
        cr_assert(!nomem);
        return FLUXON_OK;
    }
    cr_assert_eq(w.calls, 0, "cb never runs inside fx_disk_when_written");
    uint64_t end = fx_now_ms() + 5000;
    for (int i = 0; i < 100000 && !w.calls && fx_now_ms() < end; i++) fx_reactor_poll(r, 10);
    cr_assert_eq(w.calls, 1, "cb ran once within 5 s");
    return w.status;
}

static uint64_t off_of(fx_disk_t *d, const char *key)
{
    uint64_t off = 0;
    cr_assert_eq(fx_disk_find(d, key, (uint32_t)strlen(key), &off, NULL), FLUXON_OK, "%s is indexed", key);
    return off;
}

static void fillers(fx_reactor_t *r, fx_disk_t *d, int from, int to)
{
    char key[16];
    for (int i = from; i < to; i++) {
        snprintf(key, sizeof key, "f%d", i);
        cr_assert_eq(put(r, d, key, 60 * KiB, (uint64_t)i, 100, NULL), FLUXON_OK);
    }
}

static void truncate_index_block(const char *dir, uint64_t seg)
{
    char path[512];
    seg_file(dir, seg, path, sizeof path);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    int fd = open(path, O_RDWR);
    fx_disk_foot_t f;
    cr_assert_eq(pread(fd, &f, sizeof f, sb.st_size - 4096), (ssize_t)sizeof f);
    cr_assert_eq(f.magic, FX_DISK_IDX_MAGIC, "segment %llu was sealed", (unsigned long long)seg);
    cr_assert_eq(ftruncate(fd, (off_t)f.data_end), 0);
    close(fd);
}

static void expect_after_reopen(fx_reactor_t *r, fx_disk_t *d)
{
    cr_assert_eq(fx_disk_find(d, "a", 1, NULL, NULL), FLUXON_ERR_NOT_FOUND, "a (killed, sealed before) came back");
    cr_assert_eq(fx_disk_find(d, "c", 1, NULL, NULL), FLUXON_ERR_NOT_FOUND, "c (killed in its own segment) came back");
    fx_disk_meta_t m;
    cr_assert_eq(fx_disk_find(d, "dv", 2, NULL, &m), FLUXON_OK, "the newer dv, written after the tombstone, stays");
    cr_assert_eq(m.put_ms, 200);
    check_value(r, d, "dv", 5000, 21, FLUXON_OK);
    check_value(r, d, "b", 3000, 2, FLUXON_OK); /* never killed */
    check_value(r, d, "f3", 60 * KiB, 3, FLUXON_OK);
}

Test(disk_tomb, a_killed_record_stays_dead_after_a_reopen_from_an_index_block_or_a_scan)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    cr_assert_eq(put(r, d, "a", 3000, 1, 100, NULL), FLUXON_OK);
    cr_assert_eq(put(r, d, "b", 3000, 2, 100, NULL), FLUXON_OK);
    fillers(r, d, 0, 20); /* a and b's segment fills and is sealed with them in its index block */
    drain(r, d);
    uint64_t a_off = off_of(d, "a");
    cr_assert_eq(fx_disk_kill(d, a_off), FLUXON_OK);
    cr_assert_eq(fx_disk_kill(d, a_off), FLUXON_ERR_NOT_FOUND, "a second kill finds nothing");
    cr_assert_eq(put(r, d, "c", 3000, 3, 100, NULL), FLUXON_OK);
    cr_assert_eq(fx_disk_kill(d, off_of(d, "c")), FLUXON_OK);
    cr_assert_eq(put(r, d, "dv", 5000, 20, 100, NULL), FLUXON_OK); /* version 100 */
    cr_assert_eq(fx_disk_kill(d, off_of(d, "dv")), FLUXON_OK);
    cr_assert_eq(put(r, d, "dv", 5000, 21, 200, NULL), FLUXON_OK); /* version 200, after the tombstone */
    cr_assert_eq(written_wait(r, d), FLUXON_OK, "the tombstones are on the file");
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert_eq(st.tombstones, 3);
    cr_assert_eq(st.tomb_failures, 0);
    uint64_t last = off_seg(off_of(d, "dv"));
    fx_disk_close(d, 5000); /* seals the last segment: its index block lists the tombstones */

    d = open_ok(r, &c, NULL);
    expect_after_reopen(r, d);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.recovered_killed, 1, "a, listed in a sealed index block, dropped for its tombstone");
    cr_assert_eq(st.recovered_records, 22, "b, 20 fillers and dv");
    fx_disk_close(d, 5000);

    truncate_index_block(dir, last); /* the tombstones' segment is now read record by record */
    d = open_ok(r, &c, NULL);
    expect_after_reopen(r, d);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.recovered_killed, 2, "a and c (scanned: its record, then its tombstone)");
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

Test(disk_tomb, a_barrier_drops_every_record_before_it_and_none_after)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    fillers(r, d, 0, 30); /* over two segments */
    drain(r, d);
    uint64_t in_sealed = 0; /* listed in index blocks: the reopen meets them, then the barrier */
    for (dk_seg_t *s = d->segs; s; s = s->next) in_sealed += s->sealed ? s->live : 0;
    cr_assert_gt(in_sealed, 0);
    cr_assert_eq(fx_disk_barrier(d), FLUXON_OK);
    cr_assert_eq(fx_disk_records(d), 0, "the index is empty at once");
    fillers(r, d, 100, 103);
    cr_assert_eq(written_wait(r, d), FLUXON_OK);
    fx_disk_close(d, 5000);
    d = open_ok(r, &c, NULL);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert_eq(fx_disk_records(d), 3, "only what was written after the barrier");
    cr_assert_eq(st.recovered_killed, in_sealed);
    check_value(r, d, "f101", 60 * KiB, 101, FLUXON_OK);
    cr_assert_eq(fx_disk_find(d, "f1", 2, NULL, NULL), FLUXON_ERR_NOT_FOUND);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

Test(disk_tomb, when_written_reports_a_failed_write_and_nothing_pending)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    wres_t w = {0};
    bool nomem = true;
    cr_assert(!fx_disk_when_written(d, on_written, &w, &nomem), "nothing staged: no wait");
    cr_assert(!nomem);
    cr_assert_eq(put(r, d, "k", 3000, 1, 100, NULL), FLUXON_OK);
    drain(r, d);
    cr_assert(!fx_disk_when_written(d, on_written, &w, &nomem), "everything written: no wait");
    fx_disk_fault_next_write(d, EIO);
    cr_assert_eq(fx_disk_kill(d, off_of(d, "k")), FLUXON_OK);
    cr_assert_eq(written_wait(r, d), FLUXON_ERR_UNAVAILABLE, "the tombstone's write failed");
    cr_assert_eq(w.calls, 0);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    cr_assert(in && out, "%s -> %s", from, to);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) cr_assert_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

/* A segment retired for room whose file stays (its unlink failed: a read-only or immutable
 * directory, EIO; or a kill -9 before the unlink ran) is not read again: a retirement mark
 * says every segment up to it retired. The old code re-indexed it, and its records (deleted
 * or replaced since) came back. */
Test(disk_tomb, a_retired_segment_whose_file_stays_is_not_read_again)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 4 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    cr_assert_eq(put(r, d, "old", 3000, 1, 100, NULL), FLUXON_OK);
    fillers(r, d, 0, 20); /* segment 0 fills and is sealed */
    drain(r, d);
    char seg0[512], saved[600];
    seg_file(dir, 0, seg0, sizeof seg0);
    snprintf(saved, sizeof saved, "%s.saved", seg0);
    copy_file(seg0, saved);
    fillers(r, d, 20, 80); /* past 4 segments: segment 0 retires (no hook: freed at once) */
    drain(r, d);
    cr_assert_eq(fx_disk_find(d, "old", 3, NULL, NULL), FLUXON_ERR_NOT_FOUND, "retired");
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    uint64_t marks = st.retire_marks;
    fx_disk_close(d, 5000);
    copy_file(saved, seg0); /* the file is back, as an unlink that failed leaves it */
    unlink(saved);
    d = open_ok(r, &c, NULL);
    cr_assert_eq(fx_disk_find(d, "old", 3, NULL, NULL), FLUXON_ERR_NOT_FOUND, "a retired segment was read again");
    fx_disk_stats(d, &st);
    cr_assert_eq(st.recovered_retired, 1);
    cr_assert_geq(marks, 1, "retirements were marked");
    check_value(r, d, "f79", 60 * KiB, 79, FLUXON_OK);
    drain(r, d); /* its file goes through the ring */
    cr_assert(access(seg0, F_OK) != 0 || (d->n_recycle && d->recycle_id[0] == 0),
              "the retired segment's file was removed, or kept to be a new segment's");
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

/* fuzz_disk found it (corpus/disk/regress-kill-retires-its-segment): the tombstone's staging
 * rolled to a new segment, the roll retired the oldest one (no hook: freed at once) and with
 * it the record being killed, whose key the tombstone was then copied from and which was then
 * dropped a second time (a use after free, then a double free). */
Test(disk_tomb, a_kill_whose_tombstone_retires_the_records_segment)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 2 * MiB);
    uint64_t off;
    fx_disk_t *d = open_ok(r, &c, NULL);
    cr_assert_eq(put(r, d, "old", 3000, 1, 100, &off), FLUXON_OK); /* segment 0 */
    fx_disk_close(d, 5000);
    d = open_ok(r, &c, NULL);
    cr_assert_eq(put(r, d, "mid", 3000, 2, 100, NULL), FLUXON_OK); /* segment 1 */
    fx_disk_close(d, 5000);
    d = open_ok(r, &c, NULL); /* no open segment: the tombstone rolls, and 2 of 2 segments are closed */
    cr_assert_eq(off_seg(off), 0);
    cr_assert_eq(fx_disk_kill(d, off), FLUXON_OK);
    cr_assert_eq(fx_disk_find(d, "old", 3, NULL, NULL), FLUXON_ERR_NOT_FOUND);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert_eq(st.segments_freed + st.segments_retiring, 1, "segment 0 retired");
    cr_assert_eq(st.tombstones, 1);
    cr_assert_eq(st.records_dropped, 1, "the record was dropped once (%llu)", (unsigned long long)st.records_dropped);
    check_value(r, d, "mid", 3000, 2, FLUXON_OK);
    fx_disk_close(d, 5000);
    d = open_ok(r, &c, NULL);
    cr_assert_eq(fx_disk_find(d, "old", 3, NULL, NULL), FLUXON_ERR_NOT_FOUND, "killed and retired: not back");
    check_value(r, d, "mid", 3000, 2, FLUXON_OK);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

/* The directory as a kill -9 leaves it: its files copied while the store runs, opened as a
 * store of its own. */
static fx_disk_t *open_crash_copy(fx_reactor_t *r, const char *dir, char **copy, fx_disk_cfg_t *c2)
{
    *copy = th_tmpdir();
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp -p '%s'/* '%s'/", dir, *copy);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    *c2 = cfg_of(*copy, c2->segment_bytes, c2->capacity_bytes);
    return open_ok(r, c2, NULL);
}

/* Closes both stores and the reactor, removes both directories. */
static void crash_copy_done(fx_reactor_t *r, fx_disk_t *d, fx_disk_t *d2, char *dir, char *copy)
{
    fx_disk_close(d2, 5000);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(copy);
    th_rmtree(dir);
    free(copy);
    free(dir);
}

/* A new user's finding (session 40): a file system that fills (ENOSPC) makes the store retire
 * its oldest segment for room while writes pause, so no retirement mark can be written; its
 * file was kept under its own name for reuse, and an owner killed meanwhile re-indexed it at
 * its restart: keys replaced or deleted since came back with their old bytes. A segment
 * retired while writes fail is now removed at once, and so are the files kept for reuse when
 * a write fails (their marks may have been in it). */
Test(disk_tomb, a_segment_retired_while_writes_fail_does_not_come_back_after_a_crash)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 6 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL); /* no hook: a retiring segment is freed at once */
    fillers(r, d, 0, 100);                /* ~6 segments: the oldest retire for capacity, files kept for reuse */
    drain(r, d);
    uint64_t kept[FX_DISK_RECYCLE];
    uint32_t n_kept = d->n_recycle;
    memcpy(kept, d->recycle_id, n_kept * sizeof kept[0]);
    uint64_t oldest = UINT64_MAX;
    for (dk_seg_t *s = d->segs; s; s = s->next)
        if (s->state == DK_SEG_CLOSED && s->id < oldest) oldest = s->id;
    cr_assert_neq(oldest, UINT64_MAX, "a closed segment to retire");
    char victim_key[16] = "";
    for (dk_seg_t *s = d->segs; s; s = s->next)
        if (s->id == oldest && s->recs) snprintf(victim_key, sizeof victim_key, "%.*s", (int)s->recs->klen, s->recs->key);
    cr_assert(victim_key[0], "the oldest closed segment holds a record");
    fx_disk_fault_next_write(d, ENOSPC);
    cr_assert_eq(put(r, d, "lost", 60 * KiB, 200, 200, NULL), FLUXON_OK);
    fx_disk_flush(d);
    drain(r, d);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert(st.writes_failing);
    cr_assert_eq(fx_disk_find(d, victim_key, (uint32_t)strlen(victim_key), NULL, NULL), FLUXON_ERR_NOT_FOUND,
                 "%s's segment retired for room", victim_key);
    char path[512];
    seg_file(dir, oldest, path, sizeof path);
    cr_assert_neq(access(path, F_OK), 0, "the segment retired while writes fail is removed at once: %s", path);
    for (uint32_t i = 0; i < n_kept; i++) {
        seg_file(dir, kept[i], path, sizeof path);
        cr_assert_neq(access(path, F_OK), 0, "a file kept for reuse goes when a write fails: %s", path);
    }
    cr_assert_eq(d->n_recycle, 0);
    cr_assert_geq(st.retired_removed_now, 1 + n_kept);
    cr_assert_eq(st.retired_remove_failures, 0);
    char *copy;
    fx_disk_cfg_t c2 = c;
    fx_disk_t *d2 = open_crash_copy(r, dir, &copy, &c2);
    cr_assert_eq(fx_disk_find(d2, victim_key, (uint32_t)strlen(victim_key), NULL, NULL), FLUXON_ERR_NOT_FOUND,
                 "%s came back after a crash (its retired segment re-indexed)", victim_key);
    check_value(r, d2, "f99", 60 * KiB, 99, FLUXON_OK);
    crash_copy_done(r, d, d2, dir, copy);
}

/* A new user's finding (session 40): a file system that fills in the middle of a write. The
 * first part of a buffer reached the file with whole records in it, the rest failed ENOSPC;
 * every record of the buffer left the index (a miss, and no tombstone when the key is deleted
 * later), yet a restart's scan found the whole ones again: a deleted key came back. The file
 * is now cut back to where the failed buffer began. */
Test(disk_tomb, records_of_a_write_cut_short_do_not_come_back_after_a_crash)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    fillers(r, d, 0, 20); /* segment 0 fills and closes: the one ENOSPC retires for room */
    cr_assert_eq(put(r, d, "before", 60 * KiB, 1, 1, NULL), FLUXON_OK);
    fx_disk_flush(d);
    drain(r, d);
    cr_assert_eq(off_seg(off_of(d, "before")), 1);
    fx_disk_fault_short_write(d, 3 * 64 * KiB); /* "a" and "b" whole on the file, the rest fails */
    static const char *cut[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) cr_assert_eq(put(r, d, cut[i], 60 * KiB, 10 + (uint64_t)i, 2, NULL), FLUXON_OK);
    fx_disk_flush(d);
    drain(r, d);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert(st.writes_failing, "the write failed");
    cr_assert_eq(st.truncate_failures, 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(fx_disk_find(d, cut[i], 1, NULL, NULL), FLUXON_ERR_NOT_FOUND, "%s left the index", cut[i]);
    char *copy;
    fx_disk_cfg_t c2 = c;
    fx_disk_t *d2 = open_crash_copy(r, dir, &copy, &c2);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(fx_disk_find(d2, cut[i], 1, NULL, NULL), FLUXON_ERR_NOT_FOUND,
                     "%s, dropped from the index at the failure, came back after a crash", cut[i]);
    check_value(r, d2, "before", 60 * KiB, 1, FLUXON_OK);
    crash_copy_done(r, d, d2, dir, copy);
}
