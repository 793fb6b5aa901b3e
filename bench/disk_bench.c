/* disk_bench.c — the disk tier store's read figures (issue 39): n records of one size are
 * appended to a fresh directory under `dir`, then read back (checked) with `qd` reads in
 * flight on the reactor's io_uring, in a shuffled order, pass after pass for at least a
 * second; prints GB/s and IOPS with the I/O mode (O_DIRECT or buffered). bench/disk_fio.sh
 * prints fio's figures for the same block size and queue depth next to them. */
#include "bench.h"
#include "disk_int.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct db_run {
    fx_disk_t *d;
    uint64_t n, vlen, qd, *offs, *order;
    char **dst;
    uint64_t next, done, failed, target;
} db_run_t;

typedef struct db_slot {
    db_run_t *run;
    uint64_t slot;
} db_slot_t;

static void db_key(char *k, size_t cap, uint64_t i) { snprintf(k, cap, "bench-%08" PRIu64, i); }

static void db_issue(db_run_t *b, db_slot_t *s);

static void db_done(void *arg, int status)
{
    db_slot_t *s = arg;
    db_run_t *b = s->run;
    b->done++;
    if (status != FLUXON_OK) b->failed++;
    if (b->next < b->target) db_issue(b, s);
}

static void db_issue(db_run_t *b, db_slot_t *s)
{
    uint64_t i = b->order[b->next++ % b->n];
    char k[32];
    db_key(k, sizeof k, i);
    if (fx_disk_read(b->d, b->offs[i], k, (uint32_t)strlen(k), b->dst[s->slot], b->vlen, db_done, s) != FLUXON_OK) {
        b->done++;
        b->failed++;
    }
}

static void db_rmdir(const char *dir)
{
    DIR *dd = opendir(dir);
    struct dirent *de;
    char p[4400];
    for (int i = 0; dd && i < 100000 && (de = readdir(dd)); i++) {
        if (de->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (dd) closedir(dd);
    rmdir(dir);
}

FX_INTERNAL int fx_disk_bench(FILE *out, const char *dir, uint64_t n, uint64_t vlen, uint64_t qd)
{
    if (!out || !dir || !n || !vlen || !qd || qd > 4096) return FLUXON_ERR_INVALID_ARGUMENT;
    char path[4096];
    snprintf(path, sizeof path, "%s/fluxon-disk-bench-XXXXXX", dir);
    if (!mkdtemp(path)) {
        fprintf(out, "disk bench: cannot make a directory under %s: %m\n", dir);
        return FLUXON_ERR_UNAVAILABLE;
    }
    fx_reactor_t *r = NULL;
    fx_disk_t *d = NULL;
    db_run_t b = {.n = n, .vlen = vlen, .qd = qd};
    db_slot_t *slots = NULL;
    char *val = NULL, err[512] = "";
    int rc = fx_reactor_create(&r);
    uint64_t rec = fx_disk_rec_bytes(vlen);
    fx_disk_cfg_t c = {.path = path, .owner_id = "bench", .segment_bytes = 256ull << 20,
                       .write_buffers = 8, .buffer_bytes = 8u << 20};
    c.capacity_bytes = FX_MAX(2 * c.segment_bytes, (n * rec / c.segment_bytes + 3) * c.segment_bytes);
    if (rc == FLUXON_OK) rc = fx_disk_open(r, &c, NULL, &d, err, sizeof err);
    if (rc != FLUXON_OK) {
        fprintf(out, "disk bench: open %s: %s\n", path, err);
        goto out;
    }
    b.d = d;
    b.offs = fx_calloc(n, sizeof *b.offs);
    b.order = fx_calloc(n, sizeof *b.order);
    b.dst = fx_calloc(qd, sizeof *b.dst);
    slots = fx_calloc(qd, sizeof *slots);
    val = fx_malloc(vlen);
    rc = b.offs && b.order && b.dst && slots && val ? FLUXON_OK : FLUXON_ERR_NOMEM;
    for (uint64_t i = 0; rc == FLUXON_OK && i < qd; i++) {
        b.dst[i] = fx_malloc(vlen);
        slots[i] = (db_slot_t){&b, i};
        if (!b.dst[i]) rc = FLUXON_ERR_NOMEM;
    }
    if (rc != FLUXON_OK) goto out;
    for (uint64_t i = 0; i < vlen; i++) val[i] = (char)(i * 131 + 7);
    /* the writes */
    uint64_t t0 = fx_now_ns();
    for (uint64_t i = 0; i < n && rc == FLUXON_OK; i++) {
        char k[32];
        db_key(k, sizeof k, i);
        fx_disk_meta_t m = {.value_len = vlen, .put_ms = 1, .put_ver = i, .group_size = 1};
        for (int t = 0; t < 100000 && !fx_disk_room(d, 1, vlen + strlen(k)); t++) fx_reactor_poll(r, 10);
        rc = fx_disk_append(d, k, (uint32_t)strlen(k), val, &m, &b.offs[i]);
    }
    fx_disk_flush(d);
    for (int t = 0; t < 100000 && d->ops; t++) fx_reactor_poll(r, 10);
    double wsec = (double)(fx_now_ns() - t0) / 1e9;
    if (rc != FLUXON_OK) {
        fprintf(out, "disk bench: append failed: %s\n", fluxon_status_string(rc));
        goto out;
    }
    /* the reads: shuffled, qd in flight, at least 1 s */
    uint64_t s = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++) b.order[i] = i;
    for (uint64_t i = n - 1; i > 0; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t j = s % (i + 1), x = b.order[i];
        b.order[i] = b.order[j], b.order[j] = x;
    }
    uint64_t passes = 0, reads = 0;
    t0 = fx_now_ns();
    uint64_t elapsed = 0;
    while (passes < 1000 && (passes < 1 || elapsed < 1000000000ull)) {
        b.next = b.done = 0;
        b.target = n;
        for (uint64_t i = 0; i < FX_MIN(qd, n); i++) db_issue(&b, &slots[i]);
        for (uint64_t t = 0; t < 10000000 && b.done < n; t++) fx_reactor_poll(r, 100);
        reads += b.done;
        passes++;
        elapsed = fx_now_ns() - t0;
        if (b.done < n) break;
    }
    double sec = (double)elapsed / 1e9;
    int ok = !memcmp(b.dst[0], val, vlen);
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    fprintf(out,
            "disk read  %6" PRIu64 " x %8.1f KiB QD %3" PRIu64 " %-8s: %7.3f GB/s %7.3f GiB/s %9.0f IOPS  (%" PRIu64
            " reads in %.2f s, %" PRIu64 " failed, check %s; write %.3f GB/s)\n",
            n, (double)vlen / 1024, qd, st.direct_io ? "O_DIRECT" : "buffered", (double)reads * (double)vlen / sec / 1e9,
            (double)reads * (double)vlen / sec / (double)(1ull << 30), (double)reads / sec, reads, sec,
            b.failed + st.crc_failures, ok ? "ok" : "FAILED", (double)n * (double)vlen / wsec / 1e9);
    if (b.failed || !ok) rc = FLUXON_ERR_INTERNAL;
out:
    fx_disk_close(d, 10000);
    if (r) fx_reactor_destroy(r);
    for (uint64_t i = 0; b.dst && i < qd; i++) fx_free(b.dst[i]);
    fx_free(b.dst);
    fx_free(b.offs);
    fx_free(b.order);
    fx_free(slots);
    fx_free(val);
    db_rmdir(path);
    return rc;
}
