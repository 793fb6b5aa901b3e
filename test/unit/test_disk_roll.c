/* test_disk_roll.c — Criterion suite for the disk store's segment switches (issue 39): the
 * next segment file is made ahead through the reactor's io_uring (disk_fs.c), never on the
 * calling thread; freed files are unlinked through the ring; close removes the unused
 * spare. The reactor is driven by hand (fx_reactor_poll); every wait is bounded. */
#include "diskfix.h"

#include <dirent.h>

/* The .seg files of dir: how many, and how many are empty (a spare made ahead). */
static int count_segs(const char *dir, int *empty)
{
    DIR *dd = opendir(dir);
    cr_assert_not_null(dd);
    struct dirent *de;
    int n = 0;
    *empty = 0;
    char p[600];
    struct stat sb;
    for (int i = 0; i < 100000 && (de = readdir(dd)); i++) {
        size_t l = strlen(de->d_name);
        if (l < 4 || strcmp(de->d_name + l - 4, ".seg")) continue;
        n++;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (stat(p, &sb) == 0 && sb.st_size == 0) (*empty)++;
    }
    closedir(dd);
    return n;
}

/* Many segment switches (1 MiB segments, 3 records each), the oldest freed at once: every
 * roll takes the file made ahead and asks for the next one through the ring. A roll whose
 * next file is still being made is refused (BUSY, segment_waits; fx_disk_room agrees)
 * instead of making it on the calling thread, and goes through once the ring made it. Ids
 * stay consecutive; freed files are unlinked; close removes the unused spare. Both I/O modes
 * (buffered: the DONTNEED advice goes through the ring too). */
static void many_switches(int direct_io)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 4 * MiB);
    c.direct_io = direct_io;
    fx_disk_t *d = open_ok(r, &c, NULL); /* no hook: a retiring segment is freed at once */
    int empty = 0;
    cr_assert_eq(count_segs(dir, &empty), 1, "the first segment file is made at open");
    cr_assert_eq(empty, 1);
    char key[32];
    uint64_t off = 0, prev_seg = 0;
    int i = 0;
    for (; i < 600; i++) {
        snprintf(key, sizeof key, "m%d", i);
        cr_assert_eq(put(r, d, key, 300 * KiB, (uint64_t)i, 1 + (uint64_t)i, &off), FLUXON_OK, "append %d", i);
        cr_assert(off_seg(off) == prev_seg || off_seg(off) == prev_seg + 1, "ids are consecutive (%d)", i);
        prev_seg = off_seg(off);
    }
    cr_assert_geq(prev_seg, 190, "about 200 segment switches (%llu)", (unsigned long long)prev_seg);
    /* the open segment fills, the next roll takes the spare, the one after finds the next
     * file not made yet: the ring was not driven in between */
    drain(r, d);
    cr_assert_geq(d->spare_fd, 0, "the next file is made once the ring ran");
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    uint64_t waits = st.segment_waits;
    uint8_t *v = calloc(1, 300 * KiB);
    fx_disk_meta_t m = {.value_len = 300 * KiB, .put_ms = 5000, .put_ver = 1, .group_size = 1};
    uint64_t seg0 = prev_seg;
    int rc = FLUXON_OK;
    for (int k = 0; k < 8 && rc == FLUXON_OK; k++, i++) {
        snprintf(key, sizeof key, "m%d", i);
        rc = fx_disk_append(d, key, (uint32_t)strlen(key), v, &m, &off);
        if (rc == FLUXON_OK) prev_seg = off_seg(off);
    }
    cr_assert_eq(rc, FLUXON_ERR_BUSY, "a roll without its next file made is refused, not made here");
    cr_assert_eq(prev_seg, seg0 + 1, "one roll took the spare");
    cr_assert_lt(d->spare_fd, 0);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.segment_waits, waits + 1);
    cr_assert(!fx_disk_room(d, 1, 300 * KiB + 8), "room agrees");
    for (int k = 0; k < 500 && !fx_disk_room(d, 1, 300 * KiB + 8); k++) fx_reactor_poll(r, 10);
    cr_assert_eq(fx_disk_append(d, key, (uint32_t)strlen(key), v, &m, &off), FLUXON_OK, "the ring made it");
    cr_assert_eq(off_seg(off), seg0 + 2);
    free(v);
    check_value(r, d, "m599", 300 * KiB, 599, FLUXON_OK);
    drain(r, d);
    cr_assert_eq(d->ops, 0);
    for (dk_seg_t *g = d->segs; g; g = g->next) cr_assert_eq(g->aux, 0, "no advice left holding segment %llu",
                                                            (unsigned long long)g->id);
    int n = count_segs(dir, &empty);
    cr_assert_leq(n, (int)(4 + FX_DISK_OVER_SEGMENTS + 1 + FX_DISK_RECYCLE),
                  "freed segments are reused or unlinked (%d files)", n);
    cr_assert_leq(empty, 1, "one spare made ahead at most (a recycled one is not empty)");
    fx_disk_stats(d, &st);
    cr_assert_eq(st.crc_failures, 0);
    cr_assert_eq(st.write_errors, 0);
    cr_assert_geq(st.segments_freed, 190);
    cr_assert_geq(st.segments_recycled * 10, st.segments_freed * 9,
                  "most segments go into freed files (%llu of %llu)", (unsigned long long)st.segments_recycled,
                  (unsigned long long)st.segments_freed);
    int pooled = (int)d->n_recycle;
    fx_disk_close(d, 5000);
    cr_assert_eq(count_segs(dir, &empty), n - 1 - pooled, "close unlinked the spare and the %d files kept for reuse",
                 pooled);
    cr_assert_eq(empty, 0);
    d = open_ok(r, &c, NULL);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.crc_failures, 0, "the recycled files' earlier lives are no checksum failure");
    cr_assert_eq(st.recovered_torn, 0, "nor a torn tail: every segment was sealed");
    cr_assert_eq(st.recovered_recycled, 0, "and read from its own index block, not scanned");
    fx_disk_close(d, 5000);
    d = open_ok(r, &c, NULL);
    check_value(r, d, "m599", 300 * KiB, 599, FLUXON_OK);
    cr_assert_eq(put(r, d, "after", 10, 1, 9000, &off), FLUXON_OK);
    cr_assert_eq(off_seg(off), seg0 + 3, "the next id after the last segment written");
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

Test(disk, segment_switches_take_a_file_made_ahead_and_never_make_one_inline)
{
    many_switches(FX_DISK_DIRECT_AUTO);
    many_switches(FX_DISK_DIRECT_OFF);
}


/* A directory written with a larger capacity (or smaller segments) than the store now opens
 * with — an operator shrinks disk.capacity_bytes, or raises disk.segment_bytes, and
 * restarts the owner — holds more segments than capacity + FX_DISK_OVER_SEGMENTS. The
 * oldest must retire at the next roll so that appends go on. (Failed: fx_disk_room asks
 * fx_disk_can_roll, which refuses past capacity + FX_DISK_OVER_SEGMENTS, so fx_disk_roll,
 * the only place that retires, is never reached: every demotion is dropped as busy and the
 * directory stays over its capacity for good.) */
Test(disk, reopened_with_a_smaller_capacity_retires_down_to_it_and_appends_go_on)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 16 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    char key[32];
    for (int i = 0; i < 36; i++) { /* 3 records a segment: 12 segments */
        snprintf(key, sizeof key, "s%d", i);
        cr_assert_eq(put(r, d, key, 300 * KiB, (uint64_t)i, 1 + (uint64_t)i, NULL), FLUXON_OK, "append %d", i);
    }
    drain(r, d);
    fx_disk_close(d, 5000);
    c.capacity_bytes = 2 * MiB; /* 2 segments now */
    d = open_ok(r, &c, NULL);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert_geq(st.segments, 10, "the directory was re-indexed (%llu segments)", (unsigned long long)st.segments);
    for (int i = 0; i < 9; i++) {
        snprintf(key, sizeof key, "n%d", i);
        cr_assert_eq(put(r, d, key, 300 * KiB, 100 + (uint64_t)i, 1000 + (uint64_t)i, NULL), FLUXON_OK,
                     "append %d after reopening with a smaller capacity", i);
    }
    drain(r, d);
    check_value(r, d, "n8", 300 * KiB, 108, FLUXON_OK);
    fx_disk_stats(d, &st);
    cr_assert_leq(st.segments, 2 + FX_DISK_OVER_SEGMENTS + 1, "old segments retired (%llu left)",
                  (unsigned long long)st.segments);
    cr_assert_leq(st.used_bytes, c.capacity_bytes + (FX_DISK_OVER_SEGMENTS + 1) * c.segment_bytes,
                  "within capacity (%llu bytes used)", (unsigned long long)st.used_bytes);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

/* A failed write (an I/O error) pauses writes and they resume after the pause: the tier
 * does not stop for good. The records of the failed buffer are dropped (a miss, never bytes
 * that are not on the file); those written before and after read back. (ENOSPC also gives
 * up the oldest segment for room.) */
Test(disk, a_failed_write_pauses_writes_then_they_resume)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 4 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    cr_assert_eq(put(r, d, "before", 64 * KiB, 1, 1, NULL), FLUXON_OK);
    drain(r, d);
    fx_disk_fault_next_write(d, EIO);
    cr_assert_eq(put(r, d, "lost", 64 * KiB, 2, 2, NULL), FLUXON_OK);
    fx_disk_flush(d);
    drain(r, d);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert(st.writes_failing, "writes pause after the failure");
    cr_assert_eq(st.write_stops, 1);
    cr_assert(!fx_disk_room(d, 1, 64 * KiB), "no room while paused");
    check_value(r, d, "lost", 64 * KiB, 2, FLUXON_ERR_NOT_FOUND); /* its buffer never reached the file */
    double end = th_now_s() + 5; /* the pause is 1 s: room comes back within it (bounded) */
    while (!fx_disk_room(d, 1, 64 * KiB) && th_now_s() < end) fx_reactor_poll(r, 50);
    cr_assert(fx_disk_room(d, 1, 64 * KiB), "writes resume after the pause");
    cr_assert_eq(put(r, d, "after", 64 * KiB, 3, 3, NULL), FLUXON_OK);
    fx_disk_flush(d);
    drain(r, d);
    check_value(r, d, "before", 64 * KiB, 1, FLUXON_OK);
    check_value(r, d, "after", 64 * KiB, 3, FLUXON_OK);
    fx_disk_stats(d, &st);
    cr_assert(!st.writes_failing);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}


/* Issue 39: a freed segment's file is written again as a later segment (renamed, not
 * unlinked: an unlink frees its blocks, a discard on an SSD mounted with it, which stalled
 * this VM's reads 5-10 ms). Its earlier life's records and index block stay past the new
 * segment's end. A crash (the directory copied while the store runs) leaves the new segment
 * unsealed: the rebuild reads its own records and stops where the earlier life's begin,
 * neither a torn tail nor a checksum failure, and none of the earlier life's keys comes back
 * (they were retired). A segment sealed short in a longer recycled file (close) puts its
 * footer in the file's last block and is read from its index block. */
Test(disk, a_recycled_segment_file_is_read_as_its_new_segment_only)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 4 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL); /* no hook: a retiring segment is freed at once */
    char key[32];
    uint64_t off = 0;
    int i = 0;
    fx_disk_stats_t st;
    for (; i < 60; i++) { /* 3 records a segment: about 20 segments, the oldest freed and reused */
        snprintf(key, sizeof key, "m%d", i);
        cr_assert_eq(put(r, d, key, 300 * KiB, (uint64_t)i, 1 + (uint64_t)i, &off), FLUXON_OK, "append %d", i);
        drain(r, d);
    }
    fx_disk_stats(d, &st);
    cr_assert_geq(st.segments_recycled, 10, "segments went into freed files (%llu)",
                  (unsigned long long)st.segments_recycled);
    /* the next record opens a new segment: one whose file held a full earlier one */
    uint64_t last_seg = off_seg(off);
    for (; off_seg(off) == last_seg; i++) {
        snprintf(key, sizeof key, "m%d", i);
        cr_assert_eq(put(r, d, key, 300 * KiB, (uint64_t)i, 1 + (uint64_t)i, &off), FLUXON_OK, "append %d", i);
    }
    int first_new = i - 1; /* the only record of the open segment */
    drain(r, d);
    cr_assert_gt(d->open_seg->reuse_bytes, d->open_seg->data_end, "the open segment is a longer recycled file");
    /* a crash now: the directory as it is on disk */
    char *copy = th_tmpdir();
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp -p %s/*.seg %s/", dir, copy);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    fx_reactor_t *r2;
    cr_assert_eq(fx_reactor_create(&r2), FLUXON_OK);
    fx_disk_cfg_t c2 = cfg_of(copy, 1 * MiB, 4 * MiB);
    fx_disk_t *d2 = open_ok(r2, &c2, NULL);
    fx_disk_stats(d2, &st);
    cr_assert_eq(st.crc_failures, 0, "an earlier life is no checksum failure");
    cr_assert_eq(st.recovered_torn, 0, "nor a torn tail");
    cr_assert_eq(st.recovered_recycled, 1, "the unsealed segment ends where its file's earlier life goes on (the "
                 "spare, renamed but never written, is freed for reuse, not counted)");
    cr_assert_eq(d2->n_recycle, 1, "the never-written spare waits to be reused");
    snprintf(key, sizeof key, "m%d", first_new);
    check_value(r2, d2, key, 300 * KiB, (uint64_t)first_new, FLUXON_OK);
    snprintf(key, sizeof key, "m%d", first_new - 1);
    check_value(r2, d2, key, 300 * KiB, (uint64_t)(first_new - 1), FLUXON_OK);
    for (int k = 0; k < first_new - 4 * 3 - 6; k++) { /* retired before: never back, whatever file they were in */
        snprintf(key, sizeof key, "m%d", k);
        uint64_t o;
        fx_disk_meta_t m;
        cr_assert_neq(fx_disk_find(d2, key, (uint32_t)strlen(key), &o, &m), FLUXON_OK, "retired %s came back", key);
    }
    fx_disk_close(d2, 5000);
    fx_reactor_destroy(r2);
    th_rmtree(copy);
    free(copy);
    /* the store itself closes: the short segment is sealed, its footer in the file's last block */
    fx_disk_close(d, 5000);
    d = open_ok(r, &c, NULL);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.crc_failures, 0);
    cr_assert_eq(st.recovered_torn, 0);
    cr_assert_eq(st.recovered_recycled, 0, "sealed: read from its index block, not scanned");
    snprintf(key, sizeof key, "m%d", first_new);
    check_value(r, d, key, 300 * KiB, (uint64_t)first_new, FLUXON_OK);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}
