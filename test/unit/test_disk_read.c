/* test_disk_read.c — Criterion suite for the disk store's coalesced reads (disk_io.c):
 * records side by side in a segment, asked in one reactor turn, are read by one READV, and
 * each is still checked as its own read: a corrupt record in the middle is a miss alone,
 * a file cut short ends the records it no longer holds as misses (read again alone), and
 * records of another segment, or further apart than DK_RGROUP_GAP, get reads of their own
 * (closer ones share the read, the blocks between dropped). Every wait is bounded. */
#include <criterion/criterion.h>

#include "diskfix.h"

#define NREC 12
#define VLEN (8 * KiB)

typedef struct batch {
    uint8_t *got[NREC];
    rres_t res[NREC];
} batch_t;

/* Asks every record of idx[0..n) in one turn, then drives the ring until all ended. */
static void read_all(fx_reactor_t *r, fx_disk_t *d, const uint64_t *offs, const int *idx, int n, batch_t *b)
{
    char key[16];
    for (int j = 0; j < n; j++) {
        int i = idx[j];
        snprintf(key, sizeof key, "a%d", i);
        b->got[i] = calloc(1, VLEN);
        b->res[i] = (rres_t){0};
        cr_assert_eq(fx_disk_read(d, offs[i], key, (uint32_t)strlen(key), b->got[i], VLEN, on_read, &b->res[i]),
                     FLUXON_OK);
    }
    uint64_t end = fx_now_ms() + 5000;
    for (int k = 0; k < 100000 && fx_now_ms() < end; k++) {
        int left = 0;
        for (int j = 0; j < n; j++) left += b->res[idx[j]].calls == 0;
        if (!left) break;
        fx_reactor_poll(r, 10);
    }
    for (int j = 0; j < n; j++) cr_assert_eq(b->res[idx[j]].calls, 1, "read of a%d ended once within 5 s", idx[j]);
}

static void expect(batch_t *b, int i, int status)
{
    cr_assert_eq(b->res[i].status, status, "a%d: %d, want %d", i, b->res[i].status, status);
    if (status == FLUXON_OK) {
        uint8_t exp[VLEN];
        fill(exp, VLEN, (uint64_t)i);
        cr_assert(!memcmp(b->got[i], exp, VLEN), "the bytes of a%d", i);
    }
    free(b->got[i]);
    b->got[i] = NULL;
}

static uint64_t read_ios(fx_disk_t *d)
{
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    return st.read_ios;
}

Test(disk_read, records_side_by_side_share_one_read_and_each_is_checked_alone)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    uint64_t offs[NREC];
    char key[16];
    for (int i = 0; i < NREC; i++) {
        snprintf(key, sizeof key, "a%d", i);
        cr_assert_eq(put(r, d, key, VLEN, (uint64_t)i, 1, &offs[i]), FLUXON_OK);
        if (i) cr_assert_eq(off_byte(offs[i]), off_byte(offs[i - 1]) + fx_disk_rec_bytes(VLEN), "side by side");
    }
    drain(r, d); /* on the file: reads go to the kernel, not the staging buffers */
    char p0[512];
    seg_file(dir, 0, p0, sizeof p0);
    flip(p0, off_byte(offs[5]) + FX_DISK_BLOCK + 100); /* a5's value */

    int all[NREC];
    for (int i = 0; i < NREC; i++) all[i] = i;
    batch_t b;
    uint64_t ios = read_ios(d);
    read_all(r, d, offs, all, NREC, &b);
    cr_assert_eq(read_ios(d) - ios, 1, "12 records side by side: one read (%llu)",
                 (unsigned long long)(read_ios(d) - ios));
    for (int i = 0; i < NREC; i++) expect(&b, i, i == 5 ? FLUXON_ERR_NOT_FOUND : FLUXON_OK);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    cr_assert_eq(st.crc_failures, 1, "a5 alone failed its check");
    cr_assert_eq(fx_disk_find(d, "a5", 2, NULL, NULL), FLUXON_ERR_NOT_FOUND, "and left the index");

    /* one record apart (a0, a2, a4: 12 KiB between, within DK_RGROUP_GAP): still one read,
     * the records between read into the scratch buffer and dropped; five apart (a0, a6: 60
     * KiB): a read each; in reverse order (a9, a8): a read each */
    int gaps[] = {0, 2, 4}, far[] = {0, 6}, rev[] = {9, 8};
    fx_disk_stats(d, &st);
    uint64_t gap_bytes = st.read_gap_bytes;
    ios = read_ios(d);
    read_all(r, d, offs, gaps, 3, &b);
    cr_assert_eq(read_ios(d) - ios, 1, "a0, a2, a4: one read (%llu)", (unsigned long long)(read_ios(d) - ios));
    for (int j = 0; j < 3; j++) expect(&b, gaps[j], FLUXON_OK);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.read_gap_bytes - gap_bytes, 2 * fx_disk_rec_bytes(VLEN), "a1 and a3 read and dropped");
    ios = read_ios(d);
    read_all(r, d, offs, far, 2, &b);
    cr_assert_eq(read_ios(d) - ios, 2);
    for (int j = 0; j < 2; j++) expect(&b, far[j], FLUXON_OK);
    ios = read_ios(d);
    read_all(r, d, offs, rev, 2, &b);
    cr_assert_eq(read_ios(d) - ios, 2);
    for (int j = 0; j < 2; j++) expect(&b, rev[j], FLUXON_OK);

    /* the file cut in the middle of a10: a8, a9 still read (one read with a10 and a11 that
     * comes back short), a10 and a11 are misses, each read again alone */
    cr_assert_eq(truncate(p0, (off_t)(off_byte(offs[10]) + FX_DISK_BLOCK + 1000)), 0);
    int tail[] = {8, 9, 10, 11};
    ios = read_ios(d);
    read_all(r, d, offs, tail, 4, &b);
    cr_assert_eq(read_ios(d) - ios, 1);
    expect(&b, 8, FLUXON_OK);
    expect(&b, 9, FLUXON_OK);
    expect(&b, 10, FLUXON_ERR_NOT_FOUND);
    expect(&b, 11, FLUXON_ERR_NOT_FOUND);
    fx_disk_stats(d, &st);
    cr_assert_eq(st.crc_failures, 3);
    cr_assert_eq(st.reads_in_flight, 0);
    cr_assert_eq(st.read_latency.count, 12 + 3 + 2 + 2 + 4, "each record read from the file is timed once");
    cr_assert_gt(st.read_latency.sum_ns, 0);
    cr_assert_eq(d->ops, 0, "no I/O left");
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}

Test(disk_read, records_of_two_segments_get_a_read_each)
{
    fx_reactor_t *r;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    char *dir = th_tmpdir();
    fx_disk_cfg_t c = cfg_of(dir, 1 * MiB, 64 * MiB);
    fx_disk_t *d = open_ok(r, &c, NULL);
    /* 12 KiB records: a segment of 1 MiB takes 84 or fewer (its index block at the end) */
    uint64_t offs[100];
    char key[16];
    int last0 = -1;
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "a%d", i);
        cr_assert_eq(put(r, d, key, VLEN, (uint64_t)i, 1, &offs[i]), FLUXON_OK);
        if (off_seg(offs[i]) == 0) last0 = i;
    }
    cr_assert(last0 > 0 && last0 < 99 && off_seg(offs[last0 + 1]) == 1, "the records span two segments");
    drain(r, d);
    int pair[] = {last0, last0 + 1};
    uint8_t *got[2];
    rres_t res[2] = {{0}};
    uint64_t ios = read_ios(d);
    /* the two are not in one file: one read each, both right */
    for (int j = 0; j < 2; j++) {
        snprintf(key, sizeof key, "a%d", pair[j]);
        got[j] = calloc(1, VLEN);
        cr_assert_eq(fx_disk_read(d, offs[pair[j]], key, (uint32_t)strlen(key), got[j], VLEN, on_read, &res[j]),
                     FLUXON_OK);
    }
    uint64_t end = fx_now_ms() + 5000;
    for (int k = 0; k < 100000 && fx_now_ms() < end && (!res[0].calls || !res[1].calls); k++) fx_reactor_poll(r, 10);
    cr_assert_eq(read_ios(d) - ios, 2);
    for (int j = 0; j < 2; j++) {
        cr_assert_eq(res[j].calls, 1);
        uint8_t exp[VLEN];
        fill(exp, VLEN, (uint64_t)pair[j]);
        cr_assert_eq(res[j].status, FLUXON_OK);
        cr_assert(!memcmp(got[j], exp, VLEN));
        free(got[j]);
    }
    fx_disk_close(d, 5000);
    fx_reactor_destroy(r);
    th_rmtree(dir);
    free(dir);
}
