/* disk_recover_bench.c — the disk tier's re-index time (issue 39: "re-index time for 1 M
 * disk-resident keys"): n records of vlen bytes are appended to a fresh directory under
 * dir (one owner's store, 256 MiB segments), the store is closed (every segment sealed)
 * and opened again: the rebuild reads each segment's index block. Then the last segment
 * loses its index block (what a kill -9 leaves: the open segment unsealed) and the store
 * is opened again: that segment is scanned record by record. Prints recover_ms and the
 * records recovered for both, and removes the directory. */
#include "bench.h"
#include "disk_int.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void dr_rmdir(const char *dir)
{
    DIR *dd = opendir(dir);
    struct dirent *de;
    char p[4400];
    for (int i = 0; dd && i < 1000000 && (de = readdir(dd)); i++) {
        if (de->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (dd) closedir(dd);
    rmdir(dir);
}

static int dr_reopen(FILE *out, fx_reactor_t *r, const fx_disk_cfg_t *c, const char *what, uint64_t n)
{
    fx_disk_t *d = NULL;
    char err[512] = "";
    uint64_t t0 = fx_now_ns();
    int rc = fx_disk_open(r, c, NULL, &d, err, sizeof err);
    double open_ms = (double)(fx_now_ns() - t0) / 1e6;
    if (rc != FLUXON_OK) {
        fprintf(out, "disk recover: reopen %s: %s\n", c->path, err);
        return rc;
    }
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    fprintf(out,
            "disk recover %-34s: %8" PRIu64 " of %8" PRIu64 " records in %3" PRIu64 " segments, recover_ms %6" PRIu64
            " (open %.0f ms), %" PRIu64 " torn, %" PRIu64 " checksum failures\n",
            what, st.recovered_records, n, st.recovered_segments, st.recover_ms, open_ms, st.recovered_torn,
            st.crc_failures);
    fx_disk_close(d, 10000);
    return FLUXON_OK;
}

FX_INTERNAL int fx_disk_recover_bench(FILE *out, const char *dir, uint64_t n, uint64_t vlen)
{
    if (!out || !dir || !n) return FLUXON_ERR_INVALID_ARGUMENT;
    char path[4096];
    snprintf(path, sizeof path, "%s/fluxon-disk-recover-XXXXXX", dir);
    if (!mkdtemp(path)) {
        fprintf(out, "disk recover: cannot make a directory under %s: %m\n", dir);
        return FLUXON_ERR_UNAVAILABLE;
    }
    fx_reactor_t *r = NULL;
    fx_disk_t *d = NULL;
    char err[512] = "", *val = fx_malloc(vlen ? vlen : 1);
    int rc = val ? fx_reactor_create(&r) : FLUXON_ERR_NOMEM;
    uint64_t rec = fx_disk_rec_bytes(vlen);
    fx_disk_cfg_t c = {.path = path, .owner_id = "bench", .segment_bytes = FX_DISK_SEGMENT_DEFAULT,
                       .write_buffers = 8, .buffer_bytes = 8u << 20};
    c.capacity_bytes = FX_MAX(2 * c.segment_bytes, (n * rec / c.segment_bytes + 3) * c.segment_bytes);
    if (rc == FLUXON_OK) rc = fx_disk_open(r, &c, NULL, &d, err, sizeof err);
    if (rc != FLUXON_OK) {
        fprintf(out, "disk recover: open %s: %s\n", path, err);
        goto out;
    }
    for (uint64_t i = 0; i < vlen; i++) val[i] = (char)(i * 131 + 7);
    uint64_t t0 = fx_now_ns();
    for (uint64_t i = 0; i < n && rc == FLUXON_OK; i++) {
        char k[48];
        int kl = snprintf(k, sizeof k, "bench-recover-%010" PRIu64, i);
        fx_disk_meta_t m = {.value_len = vlen, .put_ms = 1, .put_ver = i, .group_size = 1};
        for (int t = 0; t < 100000 && !fx_disk_room(d, 1, vlen + (uint64_t)kl); t++) fx_reactor_poll(r, 10);
        rc = fx_disk_append(d, k, (uint32_t)kl, val, &m, NULL);
    }
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    uint64_t nseg = d->next_seg_id;
    fx_disk_close(d, 60000);
    d = NULL;
    double wsec = (double)(fx_now_ns() - t0) / 1e9;
    if (rc != FLUXON_OK) {
        fprintf(out, "disk recover: append failed: %s\n", fluxon_status_string(rc));
        goto out;
    }
    fprintf(out, "disk recover: %" PRIu64 " records of %" PRIu64 " B values (%.1f GB of segments, %s) written and "
            "sealed in %.1f s\n", n, vlen, (double)n * (double)rec / 1e9, st.direct_io ? "O_DIRECT" : "buffered", wsec);
    rc = dr_reopen(out, r, &c, "(sealed: index blocks)", n);
    /* the last segment written loses its index block: a kill -9's open segment */
    char sp[4200];
    struct stat sb;
    for (uint64_t id = nseg; id-- > 0;) {
        snprintf(sp, sizeof sp, "%s/fxd-bench-%016" PRIx64 ".seg", path, id);
        if (stat(sp, &sb) != 0 || sb.st_size == 0) continue;
        int fd = open(sp, O_RDONLY);
        fx_disk_foot_t f;
        if (fd >= 0 && pread(fd, &f, sizeof f, sb.st_size - FX_DISK_BLOCK) == (ssize_t)sizeof f &&
            f.magic == FX_DISK_IDX_MAGIC && truncate(sp, (off_t)f.data_end) == 0) {
            close(fd);
            char what[64];
            snprintf(what, sizeof what, "(last segment unsealed: %u scanned)", f.count);
            if (rc == FLUXON_OK) rc = dr_reopen(out, r, &c, what, n);
        } else if (fd >= 0) {
            close(fd);
        }
        break;
    }
out:
    fx_disk_close(d, 10000);
    if (r) fx_reactor_destroy(r);
    fx_free(val);
    dr_rmdir(path);
    return rc;
}
