/* test_disk.c — Criterion suite for the disk tier's store (disk/, issue 39): appends read
 * back from the staging buffer and from the file, the index rebuilt at reopen (sealed
 * segments through their index block, an unsealed tail by a scan, the highest version
 * winning), corruption of a header, a key, a value, an index block and a truncated tail
 * (misses, never bytes), the directory lock, capacity retirement through the hook, O_DIRECT
 * and its fallback, and refused configurations (segment switches: test_disk_roll.c). The
 * reactor is driven by hand (fx_reactor_poll, fx_reactor_run_due_timers); every wait is
 * bounded. */
#include <criterion/criterion.h>

#include "diskfix.h"

#include <dirent.h>
#include <sys/statfs.h>

Test(disk, append_then_read_from_staging_and_from_the_file)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 16 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    static const uint64_t lens[] = {1, 4096, 4608 * KiB, 0};
    char key[FX_DISK_MAX_KEY + 2];
    uint64_t offs[4];
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "k%d", i);
        cr_assert_eq(put(r, d, key, lens[i], (uint64_t)i, 100, &offs[i]), FLUXON_OK);
        cr_assert(fx_disk_is_off(offs[i]));
        check_value(r, d, key, lens[i], (uint64_t)i, FLUXON_OK);
    }
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert_geq(st.staged_reads, 2, "values not yet written were read from the buffer (%llu)",
                  (unsigned long long)st.staged_reads);
    /* the longest key */
    memset(key, 'x', FX_DISK_MAX_KEY);
    key[FX_DISK_MAX_KEY] = 0;
    cr_assert_eq(put(r, d, key, 5000, 9, 100, NULL), FLUXON_OK);
    key[FX_DISK_MAX_KEY] = 'y', key[FX_DISK_MAX_KEY + 1] = 0;
    fx_disk_meta_t m = {.value_len = 1};
    cr_assert_eq(fx_disk_append(d, key, FX_DISK_MAX_KEY + 1, "v", &m, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    m.value_len = 16 * MiB;
    cr_assert_eq(fx_disk_append(d, "big", 3, key, &m, NULL), FLUXON_ERR_INVALID_ARGUMENT, "a value above a segment");
    /* the 2 ms timer writes a partly filled buffer without a flush */
    fx_disk_stats(d, &st);
    uint64_t w0 = st.writes;
    cr_assert_eq(put(r, d, "late", 100, 5, 100, NULL), FLUXON_OK);
    uint64_t end = fx_now_ms() + 3000;
    for (int i = 0; i < 10000 && fx_now_ms() < end; i++) {
        fx_disk_stats(d, &st);
        if (st.writes > w0 && !d->ops) break;
        fx_reactor_run_due_timers(r);
        fx_reactor_poll(r, 1);
    }
    cr_assert_gt(st.writes, w0, "the flush timer wrote the buffer");
    drain(r, d);
    uint64_t staged = st.staged_reads;
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "k%d", i);
        check_value(r, d, key, lens[i], (uint64_t)i, FLUXON_OK);
    }
    check_value(r, d, "late", 100, 5, FLUXON_OK);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.staged_reads, staged, "after the writes, reads come from the file");
    cr_assert_eq(st.crc_failures, 0);
    cr_assert_eq(st.records, 6);
    /* a wrong key or length, a dropped record */
    uint8_t b[4096];
    cr_assert_eq(read_wait(r, d, offs[1], "k0", b, 4096), FLUXON_ERR_NOT_FOUND, "another key's offset");
    cr_assert_eq(read_wait(r, d, offs[1], "k1", b, 10), FLUXON_ERR_INVALID_ARGUMENT, "a wrong length");
    fx_disk_drop(d, offs[1]);
    cr_assert_eq(fx_disk_read(d, offs[1], "k1", 2, b, 4096, on_read, NULL), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fx_disk_find(d, "k1", 2, NULL, NULL), FLUXON_ERR_NOT_FOUND);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

typedef struct snap {
    int n;
    uint64_t offs[256];
    fx_disk_meta_t m[256];
    char keys[256][16];
} snap_t;

static bool snap_visit(void *arg, uint64_t off, const char *key, uint32_t klen, const fx_disk_meta_t *m)
{
    snap_t *s = arg;
    cr_assert_lt(s->n, 256);
    cr_assert_lt(klen, 16);
    s->offs[s->n] = off;
    s->m[s->n] = *m;
    memcpy(s->keys[s->n], key, klen);
    s->keys[s->n][klen] = 0;
    s->n++;
    return true;
}

static int snap_find(const snap_t *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->keys[i], key)) return i;
    return -1;
}

Test(disk, reopen_rebuilds_the_index_sealed_by_index_block_tail_by_scan_highest_version_wins)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    uint64_t off_hi, off_lo;
    cr_assert_eq(put(r, d, "dup", 1000, 77, 20, &off_hi), FLUXON_OK); /* the newer version, first */
    char key[16];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "r%d", i);
        cr_assert_eq(put(r, d, key, 60 * KiB + (uint64_t)i, (uint64_t)i, 1000 + (uint64_t)i, NULL), FLUXON_OK);
    }
    drain(r, d); /* the first segments are sealed with "dup" (put_ms 20) in their index */
    cr_assert_eq(put(r, d, "dup", 1000, 78, 10, &off_lo), FLUXON_OK); /* an older version, later */
    cr_assert_neq(off_seg(off_hi), off_seg(off_lo));
    for (int i = 40; i < 50; i++) {
        snprintf(key, sizeof key, "r%d", i);
        cr_assert_eq(put(r, d, key, 60 * KiB + (uint64_t)i, (uint64_t)i, 1000 + (uint64_t)i, NULL), FLUXON_OK);
    }
    snap_t *before = calloc(1, sizeof *before), *after = calloc(1, sizeof *after);
    fx_disk_foreach(d, snap_visit, before);
    cr_assert_eq(before->n, 51);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    uint64_t nseg = st.segments;
    cr_assert_geq(nseg, 4);
    fx_disk_close(d, 5000);

    /* the last segment loses its index block: an unsealed tail, found by a scan */
    uint64_t last = nseg - 1;
    char path[512];
    seg_file(dir, last, path, sizeof path);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    int fd = open(path, O_RDWR);
    fx_disk_foot_t f;
    cr_assert_eq(pread(fd, &f, sizeof f, sb.st_size - 4096), (ssize_t)sizeof f);
    cr_assert_eq(f.magic, FX_DISK_IDX_MAGIC, "close sealed the last segment");
    cr_assert_eq(ftruncate(fd, (off_t)f.data_end), 0);
    close(fd);

    d = open_ok(r, &c, NULL);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.recovered_segments, nseg);
    cr_assert_eq(st.recovered_torn, 0, "the scan ended at the end of the file");
    cr_assert_eq(st.crc_failures, 0);
    cr_assert_eq(st.recovered_records, 51);
    fx_disk_foreach(d, snap_visit, after);
    cr_assert_eq(after->n, 51);
    for (int i = 0; i < before->n; i++) {
        if (!strcmp(before->keys[i], "dup")) continue;
        int j = snap_find(after, before->keys[i]);
        cr_assert_geq(j, 0, "%s is back", before->keys[i]);
        cr_assert_eq(after->offs[j], before->offs[i], "%s at the same offset", before->keys[i]);
        cr_assert(!memcmp(&after->m[j], &before->m[i], sizeof before->m[i]), "%s has the same meta", before->keys[i]);
    }
    uint64_t off;
    fx_disk_meta_t m;
    cr_assert_eq(fx_disk_find(d, "dup", 3, &off, &m), FLUXON_OK);
    cr_assert_eq(m.put_ms, 20, "the highest (put_ms, put_ver) wins");
    cr_assert_eq(off, off_hi);
    check_value(r, d, "dup", 1000, 77, FLUXON_OK);
    check_value(r, d, "r45", 60 * KiB + 45, 45, FLUXON_OK); /* from the scanned tail */
    check_value(r, d, "r3", 60 * KiB + 3, 3, FLUXON_OK);
    /* new appends go to a new segment id (max + 1), never to the old tail */
    cr_assert_eq(put(r, d, "new", 10, 1, 5000, &off), FLUXON_OK);
    cr_assert_eq(off_seg(off), nseg);
    fx_disk_close(d, 5000);
    free(before);
    free(after);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

Test(disk, corruption_of_header_key_value_index_and_a_truncated_tail_are_misses)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    char key[16];
    uint64_t offs[40];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "c%d", i);
        cr_assert_eq(put(r, d, key, 64 * KiB, (uint64_t)i, 1, &offs[i]), FLUXON_OK);
    }
    cr_assert_eq(off_seg(offs[0]), 0);
    cr_assert_eq(off_seg(offs[39]), 2, "three segments (14 records each)");
    fx_disk_close(d, 5000);
    char p0[512], p1[512], p2[512];
    seg_file(dir, 0, p0, sizeof p0);
    seg_file(dir, 1, p1, sizeof p1);
    seg_file(dir, 2, p2, sizeof p2);
    /* segment 0 (sealed): a header byte (put_ms) of c1, a key byte of c2, a value byte of c3 */
    cr_assert_eq(off_seg(offs[3]), 0);
    flip(p0, off_byte(offs[1]) + 40);
    flip(p0, off_byte(offs[2]) + FX_DISK_HDR_BYTES + 1);
    flip(p0, off_byte(offs[3]) + FX_DISK_BLOCK + 1000);
    /* segment 1: a byte of its index block (the first entry) */
    struct stat sb;
    cr_assert_eq(stat(p1, &sb), 0);
    int fd = open(p1, O_RDONLY);
    fx_disk_foot_t f;
    cr_assert_eq(pread(fd, &f, sizeof f, sb.st_size - 4096), (ssize_t)sizeof f);
    close(fd);
    flip(p1, f.data_end + 20);
    /* segment 2: cut in the middle of its last record */
    int last = 39;
    cr_assert_eq(truncate(p2, (off_t)(off_byte(offs[last]) + FX_DISK_BLOCK + 1000)), 0);

    d = open_ok(r, &c, NULL);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert_eq(st.recovered_torn, 2, "segment 1 (scan up to its index) and segment 2 (cut)");
    cr_assert_eq(st.crc_failures, 1, "the index block of segment 1");
    cr_assert_eq(fx_disk_find(d, "c39", 3, NULL, NULL), FLUXON_ERR_NOT_FOUND, "the cut record is gone");
    for (int i = 1; i <= 3; i++) {
        snprintf(key, sizeof key, "c%d", i);
        check_value(r, d, key, 64 * KiB, (uint64_t)i, FLUXON_ERR_NOT_FOUND);
        cr_assert_eq(fx_disk_find(d, key, (uint32_t)strlen(key), NULL, NULL), FLUXON_ERR_NOT_FOUND,
                     "%s is dropped from the index", key);
    }
    fx_disk_stats(d, &st);
    cr_assert_eq(st.crc_failures, 4);
    for (int i = 0; i < 39; i++) {
        if (i >= 1 && i <= 3) continue;
        snprintf(key, sizeof key, "c%d", i);
        check_value(r, d, key, 64 * KiB, (uint64_t)i, FLUXON_OK);
    }
    fx_disk_close(d, 5000);
    /* drops are not written down: segment 0's index block names c1..c3 again, and each
     * read of them fails its check again */
    d = open_ok(r, &c, NULL);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.records, 39);
    check_value(r, d, "c2", 64 * KiB, 2, FLUXON_ERR_NOT_FOUND);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

Test(disk, a_scanned_segment_skips_a_bad_record_and_keeps_the_rest)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    uint64_t offs[5];
    char key[16];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "s%d", i);
        cr_assert_eq(put(r, d, key, 8 * KiB, (uint64_t)i, 1, &offs[i]), FLUXON_OK);
    }
    fx_disk_close(d, 5000);
    char p0[512];
    seg_file(dir, 0, p0, sizeof p0);
    int fd = open(p0, O_RDONLY);
    struct stat sb;
    cr_assert_eq(fstat(fd, &sb), 0);
    fx_disk_foot_t f;
    cr_assert_eq(pread(fd, &f, sizeof f, sb.st_size - 4096), (ssize_t)sizeof f);
    close(fd);
    cr_assert_eq(truncate(p0, (off_t)f.data_end), 0); /* unsealed */
    flip(p0, off_byte(offs[2]) + FX_DISK_BLOCK + 7); /* s2's value */
    d = open_ok(r, &c, NULL);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert_eq(st.crc_failures, 1);
    cr_assert_eq(st.records, 4);
    cr_assert_eq(fx_disk_find(d, "s2", 2, NULL, NULL), FLUXON_ERR_NOT_FOUND);
    check_value(r, d, "s4", 8 * KiB, 4, FLUXON_OK);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

Test(disk, a_second_open_of_the_same_directory_is_busy_and_names_the_holder)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 4 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL), *d2 = NULL;
    c.owner_id = "o2";
    char err[512] = "", want[128];
    cr_assert_eq(fx_disk_open(r, &c, NULL, &d2, err, sizeof err), FLUXON_ERR_BUSY);
    cr_assert_null(d2);
    snprintf(want, sizeof want, "is held by owner o1 pid %ld", (long)getpid());
    cr_assert(strstr(err, want), "err names the holder: %s", err);
    cr_assert(strstr(err, dir), "err names the path: %s", err);
    fx_disk_close(d, 5000);
    d2 = open_ok(r, &c, NULL); /* free again once closed */
    fx_disk_close(d2, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

typedef struct retire_log {
    int calls;
    uint64_t seg;
    size_t n;
    uint64_t offs[64];
} retire_log_t;

static void on_retire(void *arg, uint64_t seg, const uint64_t *offs, const char *const *keys, const uint32_t *klens,
                      size_t n)
{
    retire_log_t *l = arg;
    if (l->calls++ == 0) {
        l->seg = seg;
        l->n = FX_MIN(n, 64u);
        memcpy(l->offs, offs, l->n * sizeof *offs);
    }
    for (size_t i = 0; i < n; i++) cr_assert_eq(klens[i], strlen(keys[i]));
}

Test(disk, capacity_retires_the_oldest_segment_through_the_hook)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 2 * MiB);
    retire_log_t l = {0};
    fx_disk_hooks_t h = {.segment_retiring = on_retire, .arg = &l};
    fx_disk_t *d = open_ok(r, &c, &h);
    char key[16];
    int i = 0, rc = FLUXON_OK;
    for (; i < 12 && l.calls == 0; i++) { /* 4 records of 200 KiB a segment */
        snprintf(key, sizeof key, "a%d", i);
        cr_assert_eq(put(r, d, key, 200 * KiB, (uint64_t)i, 1, NULL), FLUXON_OK);
    }
    cr_assert_eq(l.calls, 1, "the third segment retired the first");
    cr_assert_eq(l.seg, 0);
    cr_assert_eq(l.n, 4);
    check_value(r, d, "a0", 200 * KiB, 0, FLUXON_OK); /* readable until freed */
    /* nobody frees: appends stop at capacity + 2 segments */
    for (; i < 60; i++) {
        snprintf(key, sizeof key, "a%d", i);
        rc = put(r, d, key, 200 * KiB, (uint64_t)i, 1, NULL);
        if (rc != FLUXON_OK) break;
    }
    cr_assert_eq(rc, FLUXON_ERR_BUSY, "the store refuses past its bound");
    cr_assert(!fx_disk_room(d, 1, 200 * KiB));
    fx_disk_meta_t m = {.value_len = 200 * KiB, .group_size = 1};
    uint8_t *v = calloc(1, 200 * KiB);
    rc = fx_disk_append(d, "x", 1, v, &m, NULL);
    cr_assert_eq(rc, FLUXON_ERR_BUSY, "append agrees with room: %d (i %d, segments %llu)", rc, i, (unsigned long long)d->next_seg_id);
    free(v);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert_leq(st.segments, 2 + FX_DISK_OVER_SEGMENTS);
    cr_assert_leq(st.used_bytes, c.capacity_bytes + FX_DISK_OVER_SEGMENTS * c.segment_bytes);
    cr_assert_geq(st.append_busy, 1);
    drain(r, d);
    char p0[512];
    seg_file(dir, 0, p0, sizeof p0);
    struct stat sb;
    cr_assert_eq(stat(p0, &sb), 0);
    fx_disk_segment_free(d, 0);
    drain(r, d); /* the unlink goes through the ring */
    cr_assert(stat(p0, &sb) != 0 || (d->n_recycle && d->recycle_id[d->n_recycle - 1] == 0),
              "segment 0's file is gone once freed, or kept to be the next segment's");
    uint8_t b[16];
    cr_assert_eq(fx_disk_read(d, l.offs[0], "a0", 2, b, 200 * KiB, on_read, NULL), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fx_disk_find(d, "a0", 2, NULL, NULL), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(l.calls, 3, "segments 0, 1 and 2 retired");
    fx_disk_stats(d, &st);
    cr_assert_eq(st.segments_retiring, 2);
    /* the others the hook named; room now, so each free stages its retirement mark and
     * starts its write at once, not after the flush interval: a kill -9 right after the free
     * finds the mark on the file sooner (the freed file stays under its name, kept for
     * reuse, until then) */
    for (uint64_t s = 1; s <= 2; s++) {
        drain(r, d);
        uint64_t marks = st.retire_marks;
        fx_disk_segment_free(d, s);
        fx_disk_stats(d, &st);
        cr_assert_eq(st.retire_marks, marks + 1, "freeing segment %llu staged a retirement mark", (unsigned long long)s);
        cr_assert(d->cur == NULL && d->ops > 0, "the mark's buffer was submitted by the free itself");
    }
    snprintf(key, sizeof key, "a%d", i);
    cr_assert_eq(put(r, d, key, 200 * KiB, 1, 1, NULL), FLUXON_OK, "room again once freed");
    fx_disk_stats(d, &st);
    cr_assert_geq(st.segments_freed, 1);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

/* A read in flight holds its segment: freed meanwhile, the file goes after the read. */
Test(disk, a_freed_segment_waits_for_its_reads)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 2 * MiB);
    retire_log_t l = {0};
    fx_disk_hooks_t h = {.segment_retiring = on_retire, .arg = &l};
    fx_disk_t *d = open_ok(r, &c, &h);
    char key[16];
    uint64_t off0 = 0;
    for (int i = 0; i < 12 && !l.calls; i++) {
        snprintf(key, sizeof key, "a%d", i);
        cr_assert_eq(put(r, d, key, 200 * KiB, (uint64_t)i, 1, i ? NULL : &off0), FLUXON_OK);
    }
    drain(r, d);
    uint8_t *buf = malloc(200 * KiB);
    rres_t x = {0};
    cr_assert_eq(fx_disk_read(d, off0, "a0", 2, buf, 200 * KiB, on_read, &x), FLUXON_OK);
    fx_disk_segment_free(d, 0);
    char p0[512];
    seg_file(dir, 0, p0, sizeof p0);
    struct stat sb;
    cr_assert_eq(stat(p0, &sb), 0, "the file stays while a read holds it");
    for (int i = 0; i < 1000 && !x.calls; i++) fx_reactor_poll(r, 10);
    cr_assert_eq(x.calls, 1);
    cr_assert_eq(x.status, FLUXON_ERR_NOT_FOUND, "freed while read: a miss");
    drain(r, d); /* the unlink goes through the ring */
    cr_assert(stat(p0, &sb) != 0 || (d->n_recycle && d->recycle_id[d->n_recycle - 1] == 0),
              "gone after the read, or kept to be the next segment's");
    free(buf);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

static void direct_roundtrip(fx_reactor_t *r, fx_disk_t *d)
{
    cr_assert_eq(put(r, d, "dio", 12345, 3, 1, NULL), FLUXON_OK);
    drain(r, d);
    check_value(r, d, "dio", 12345, 3, FLUXON_OK);
}

static bool fs_is_tmpfs(const char *dir)
{
    struct statfs sf;
    return statfs(dir, &sf) == 0 && sf.f_type == 0x01021994; /* TMPFS_MAGIC */
}

Test(disk, direct_io_on_or_refused_and_auto_consistent)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 4 * MiB);
    c.direct_io = FX_DISK_DIRECT_ON;
    fx_disk_t *d = NULL;
    char err[512] = "";
    int rc = fx_disk_open(r, &c, NULL, &d, err, sizeof err);
    bool takes = rc == FLUXON_OK;
    cr_log_info("%s (%s) %s O_DIRECT", dir, fs_is_tmpfs(dir) ? "tmpfs" : "not tmpfs", takes ? "takes" : "refuses");
    fx_disk_stats_t st;
    if (takes) {
        fx_disk_stats(d, &st);
        cr_assert(st.direct_io);
        cr_assert_eq(st.direct_fallbacks, 0);
        direct_roundtrip(r, d);
        fx_disk_close(d, 5000);
    } else {
        cr_assert_eq(rc, FLUXON_ERR_CONFIG);
        cr_assert(strstr(err, "disk.direct_io"), "%s", err);
    }
    c.direct_io = FX_DISK_DIRECT_AUTO;
    d = open_ok(r, &c, NULL);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.direct_io, takes);
    cr_assert_eq(st.direct_fallbacks, takes ? 0 : 1);
    direct_roundtrip(r, d);
    fx_disk_close(d, 5000);
    c.direct_io = FX_DISK_DIRECT_OFF;
    d = open_ok(r, &c, NULL);
    fx_disk_stats(d, &st);
    cr_assert(!st.direct_io);
    cr_assert_eq(st.direct_fallbacks, 0);
    check_value(r, d, "dio", 12345, 3, FLUXON_OK);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

/* The first write refused (-EINVAL, as some file systems answer O_DIRECT only there): auto
 * falls back to buffered I/O, writes the buffer again and counts it. */
Test(disk, auto_falls_back_when_the_first_write_refuses_direct_io)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 4 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    if (!st.direct_io) {
        cr_log_info("%s refuses O_DIRECT at open: the fallback there is covered", dir);
        cr_assert_eq(st.direct_fallbacks, 1);
    } else {
        fx_disk_fault_next_write(d, EINVAL);
        direct_roundtrip(r, d);
        fx_disk_stats(d, &st);
        cr_assert(!st.direct_io);
        cr_assert_eq(st.direct_fallbacks, 1);
        cr_assert_eq(st.write_errors, 0);
        cr_assert_eq(put(r, d, "after", 5000, 4, 1, NULL), FLUXON_OK);
        drain(r, d);
        check_value(r, d, "after", 5000, 4, FLUXON_OK);
    }
    fx_disk_close(d, 5000);
    d = open_ok(r, &c, NULL); /* what the buffered writes left is whole */
    check_value(r, d, "dio", 12345, 3, FLUXON_OK);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

/* tmpfs (/dev/shm): whatever it answers, the store's stats agree with it. */
Test(disk, tmpfs_direct_io_answer_is_consistent)
{
    if (!fs_is_tmpfs("/dev/shm")) {
        cr_log_info("/dev/shm is not tmpfs here: skipped");
        return;
    }
    char tmpl[] = "/dev/shm/fluxon-test-disk-XXXXXX";
    char *dir = mkdtemp(tmpl);
    cr_assert_not_null(dir);
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 4 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_log_info("tmpfs %s O_DIRECT", st.direct_io ? "takes" : "refuses");
    cr_assert_eq(st.direct_fallbacks, st.direct_io ? 0 : 1);
    direct_roundtrip(r, d);
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    DIR *dd = opendir(dir);
    struct dirent *de;
    char p[512];
    for (int i = 0; dd && i < 100 && (de = readdir(dd)); i++) {
        if (de->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (dd) closedir(dd);
    cr_assert_eq(rmdir(dir), 0);
}

Test(disk, bad_configuration_values_name_their_field)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    struct {
        const char *field;
        fx_disk_cfg_t c;
    } bad[] = {
        {"disk.path", {.path = NULL, .owner_id = "o1", .capacity_bytes = 4 * MiB, .segment_bytes = MiB}},
        {"disk.path", {.path = "", .owner_id = "o1", .capacity_bytes = 4 * MiB, .segment_bytes = MiB}},
        {"disk.owner_id", {.path = dir, .owner_id = "", .capacity_bytes = 4 * MiB, .segment_bytes = MiB}},
        {"disk.owner_id", {.path = dir, .owner_id = "a/b", .capacity_bytes = 4 * MiB, .segment_bytes = MiB}},
        {"disk.segment_bytes", {.path = dir, .owner_id = "o1", .capacity_bytes = 4 * MiB, .segment_bytes = MiB + 1}},
        {"disk.segment_bytes", {.path = dir, .owner_id = "o1", .capacity_bytes = 4 * MiB, .segment_bytes = 512 * KiB}},
        {"disk.capacity_bytes", {.path = dir, .owner_id = "o1", .capacity_bytes = MiB, .segment_bytes = MiB}},
        {"disk.capacity_bytes", {.path = dir, .owner_id = "o1", .capacity_bytes = 0, .segment_bytes = 0}},
        {"disk.direct_io", {.path = dir, .owner_id = "o1", .capacity_bytes = 4 * MiB, .segment_bytes = MiB, .direct_io = 7}},
        {"disk.write_buffers",
         {.path = dir, .owner_id = "o1", .capacity_bytes = 4 * MiB, .segment_bytes = MiB, .write_buffers = 5000}},
        {"disk.buffer_bytes",
         {.path = dir, .owner_id = "o1", .capacity_bytes = 4 * MiB, .segment_bytes = MiB, .buffer_bytes = 5000}},
        {"disk.buffer_bytes",
         {.path = dir, .owner_id = "o1", .capacity_bytes = 4 * MiB, .segment_bytes = MiB, .buffer_bytes = 2 * MiB}},
    };
    for (size_t i = 0; i < FX_ARRAY_LEN(bad); i++) {
        fx_disk_t *d = NULL;
        char err[512] = "";
        cr_assert_eq(fx_disk_open(r, &bad[i].c, NULL, &d, err, sizeof err), FLUXON_ERR_CONFIG, "case %zu (%s)", i,
                     bad[i].field);
        cr_assert_null(d);
        cr_assert(strstr(err, bad[i].field), "case %zu: err names %s: %s", i, bad[i].field, err);
    }
    /* a path that is a file: unavailable, naming it */
    char fpath[512];
    snprintf(fpath, sizeof fpath, "%s/file", dir);
    FILE *fp = fopen(fpath, "w");
    fclose(fp);
    fx_disk_cfg_t c = cfg_of(fpath, MiB, 4 * MiB);
    fx_disk_t *d = NULL;
    char err[512] = "";
    cr_assert_eq(fx_disk_open(r, &c, NULL, &d, err, sizeof err), FLUXON_ERR_UNAVAILABLE);
    cr_assert(strstr(err, fpath), "%s", err);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

/* A staging buffer's header block is zeroed only where an earlier record left bytes past
 * the new header + key (dk_buf_t.dirty): a record with a short key written where one with
 * a long key was still has zeros after its key, and checks; so does one written without
 * marks (the whole block zeroed). */
Test(disk, a_header_block_written_over_an_earlier_record_has_zeros_after_its_key)
{
    enum { VL = FX_DISK_BLOCK + 100, NB = 3 };
    char *p = fx_disk_aligned(NB * FX_DISK_BLOCK);
    cr_assert_not_null(p);
    memset(p, 0xaa, NB * FX_DISK_BLOCK); /* what an earlier use left */
    uint16_t dirty[NB] = {FX_DISK_BLOCK, FX_DISK_BLOCK, FX_DISK_BLOCK};
    static uint8_t value[VL];
    fill(value, VL, 7);
    char long_key[300];
    memset(long_key, 'k', sizeof long_key);
    fx_disk_meta_t m = {VL, 1, 1, 1, 0};
    const struct { const char *key; uint32_t klen; bool marks; } recs[] = {
        {long_key, sizeof long_key, true}, {"s", 1, true}, {long_key, sizeof long_key, true}, {"s", 1, false}};
    for (size_t i = 0; i < FX_ARRAY_LEN(recs); i++) {
        if (!recs[i].marks) memset(p + FX_DISK_HDR_BYTES, 0xaa, FX_DISK_BLOCK - FX_DISK_HDR_BYTES);
        fx_disk_rec_encode(p, recs[i].marks ? dirty : NULL, 5, 0, recs[i].key, recs[i].klen, value, &m, 0);
        const char *why = fx_disk_rec_check(p, NB * FX_DISK_BLOCK, 5, 0, recs[i].key, recs[i].klen);
        cr_assert_null(why, "record %zu: %s", i, why ? why : "");
        size_t hk = FX_ALIGN_UP((size_t)FX_DISK_HDR_BYTES + recs[i].klen, (size_t)64);
        for (size_t b = FX_DISK_HDR_BYTES + recs[i].klen; b < FX_DISK_BLOCK; b++)
            cr_assert_eq(p[b], 0, "record %zu: byte %zu of its header block after its key is %d", i, b, p[b]);
        for (size_t b = FX_DISK_BLOCK + VL; b < NB * FX_DISK_BLOCK; b++)
            cr_assert_eq(p[b], 0, "record %zu: padding byte %zu after its value", i, b);
        if (recs[i].marks) {
            cr_assert_eq(dirty[0], hk, "record %zu: its header block's mark", i);
            cr_assert_eq(dirty[1], FX_DISK_BLOCK);
            cr_assert_eq(dirty[2], FX_DISK_BLOCK);
        }
    }
    fx_free(p);
}
