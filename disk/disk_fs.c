/* disk_fs.c — the disk store's file system calls that may block, taken off the reactor
 * thread onto the reactor's io_uring (the kernel runs them in its io-wq workers):
 *  - the next segment file is made ahead (IORING_OP_OPENAT, O_CREAT|O_EXCL): a roll takes
 *    it and asks for the next one; while it is being made, a roll waits (FLUXON_ERR_BUSY,
 *    counted in segment_waits), never the thread;
 *  - a freed segment's file is closed (cheap: still linked) and kept (FX_DISK_RECYCLE of
 *    them): the next segment is that file renamed (IORING_OP_RENAMEAT, then OPENAT without
 *    O_CREAT), written from its start over the earlier life's records, which the rebuild
 *    tells apart by their segment id; past those, a freed file is unlinked through
 *    IORING_OP_UNLINKAT (the unlink frees its blocks: a discard on an SSD mounted with it);
 *  - in buffered mode, written ranges leave the page cache through IORING_OP_FADVISE.
 * Every operation counts in d->ops (fx_disk_close waits for them, bounded). The spare made
 * at open is made with a plain open (before the reactor runs). Reactor thread only. */
#include "disk_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

enum { DK_OP_SPARE, DK_OP_UNLINK, DK_OP_FADVISE, DK_OP_RENAME };

typedef struct dk_op {
    fx_io_t io;
    fx_disk_t *d;
    int kind;
    bool direct;  /* DK_OP_SPARE: opened with O_DIRECT */
    uint64_t id;  /* the segment id of the file */
    uint64_t old_id; /* DK_OP_RENAME: the freed segment's id, its file renamed to id's */
    dk_seg_t *seg; /* DK_OP_FADVISE: the segment whose fd it uses (held through seg->aux) */
    char *old_path; /* DK_OP_RENAME: old_id's path (after path, in the same allocation) */
    char path[];  /* DK_OP_SPARE, DK_OP_UNLINK, DK_OP_RENAME: read by the kernel at submission */
} dk_op_t;

static dk_op_t *dk_op_new(fx_disk_t *d, int kind, uint64_t id, bool with_path)
{
    size_t pl = with_path ? strlen(d->path) + 96 : 0;
    dk_op_t *op = fx_calloc(1, sizeof *op + pl);
    if (!op) return NULL;
    op->d = d;
    op->kind = kind;
    op->id = id;
    if (with_path) fx_disk_seg_path(d, id, op->path, pl);
    return op;
}

FX_INTERNAL void fx_disk_direct_off(fx_disk_t *d, const char *why)
{
    d->direct = false;
    d->st.direct_fallbacks++;
    for (dk_seg_t *s = d->segs; s; s = s->next) fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) & ~O_DIRECT);
    if (d->spare_fd >= 0) fcntl(d->spare_fd, F_SETFL, fcntl(d->spare_fd, F_GETFL) & ~O_DIRECT);
    FX_WARN("disk: %s refuses O_DIRECT (%s): buffered I/O with POSIX_FADV_DONTNEED after each write", d->path, why);
}

/* ---- unlink ---- */

static void dk_on_unlink(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)fl;
    dk_op_t *op = FX_CONTAINER_OF(io, dk_op_t, io);
    op->d->ops--;
    if (res < 0 && res != -ENOENT) FX_WARN("disk: cannot remove %s: %s", op->path, strerror(-res));
    fx_free(op);
}

FX_INTERNAL void fx_disk_unlink_async(fx_disk_t *d, uint64_t id)
{
    dk_op_t *op = dk_op_new(d, DK_OP_UNLINK, id, true);
    if (!op) { /* no memory for the op: the file stays until the next open's rebuild reads it */
        FX_ERROR("disk: out of memory removing segment %" PRIu64 " of %s: the file stays", id, d->path);
        return;
    }
    op->io.cb = dk_on_unlink;
    struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &op->io);
    io_uring_prep_unlinkat(sqe, AT_FDCWD, op->path, 0);
    d->ops++;
}

FX_INTERNAL void fx_disk_unlink_retired_now(fx_disk_t *d, uint64_t id)
{
    char path[4200];
    fx_disk_seg_path(d, id, path, sizeof path);
    d->st.retired_removed_now++;
    if (unlink(path) == 0 || errno == ENOENT) return;
    d->st.retired_remove_failures++;
    FX_ERROR("disk: cannot remove retired segment file %s (%s) while writes to %s fail: a restart before they resume "
             "may find its records again", path, strerror(errno), d->path);
}

/* ---- fadvise (buffered mode) ---- */

static void dk_on_fadvise(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)res, (void)fl; /* advice: a failure changes nothing we rely on */
    dk_op_t *op = FX_CONTAINER_OF(io, dk_op_t, io);
    fx_disk_t *d = op->d;
    dk_seg_t *seg = op->seg;
    fx_free(op);
    d->ops--;
    seg->aux--;
    if (!d->closing) fx_disk_seg_maybe_unlink(d, seg);
}

FX_INTERNAL void fx_disk_fadvise_async(fx_disk_t *d, dk_seg_t *seg, uint64_t off, uint64_t len)
{
    dk_op_t *op = dk_op_new(d, DK_OP_FADVISE, seg->id, false);
    if (!op) return; /* advice only: the pages stay cached */
    op->seg = seg;
    op->io.cb = dk_on_fadvise;
    struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &op->io);
    io_uring_prep_fadvise(sqe, seg->fd, off, (off_t)len, POSIX_FADV_DONTNEED);
    seg->aux++;
    d->ops++;
}

/* ---- the spare segment file ---- */

static int dk_spare_flags(const fx_disk_t *d)
{
    return O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | (d->direct ? O_DIRECT : 0);
}

static void dk_on_spare(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)fl;
    dk_op_t *op = FX_CONTAINER_OF(io, dk_op_t, io);
    fx_disk_t *d = op->d;
    d->ops--;
    d->spare_opening = false;
    if (d->shutting) { /* closing: the file is not needed (an empty file, made by us) */
        if (res >= 0) close(res);
        if (res >= 0 || res == -EINVAL) fx_disk_unlink_async(d, op->id);
    } else if (res == -EINVAL && op->direct && d->cfg.direct_io == FX_DISK_DIRECT_AUTO) {
        /* the file system refused O_DIRECT after making the file: it goes, the next id is
         * made buffered (an id is never made twice) */
        if (d->direct) fx_disk_direct_off(d, "EINVAL at the open of a new segment file");
        fx_disk_unlink_async(d, op->id);
        fx_disk_spare_start(d);
    } else if (res < 0) {
        char what[160];
        snprintf(what, sizeof what, "making segment file %016llx", (unsigned long long)op->id);
        fx_disk_fail(d, -res, what);
    } else {
        if (op->direct && !d->direct) fcntl(res, F_SETFL, fcntl(res, F_GETFL) & ~O_DIRECT); /* fell back meanwhile */
        d->spare_fd = res;
        d->spare_id = op->id;
    }
    fx_free(op);
}

/* ---- a freed segment's file as the next segment ---- */

static void dk_on_recycled_open(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)fl;
    dk_op_t *op = FX_CONTAINER_OF(io, dk_op_t, io);
    fx_disk_t *d = op->d;
    d->ops--;
    d->spare_opening = false;
    struct stat sb;
    if (res >= 0 && (d->shutting || fstat(res, &sb) != 0)) { /* not needed any more, or unreadable */
        close(res);
        res = -EBADF;
    }
    if (res < 0) { /* the renamed file goes; the next spare is made new (an id is never made twice) */
        if (res != -EBADF || !d->shutting) FX_WARN("disk: reusing a freed segment file as %s failed (%s): a new one is made",
                                                   op->path, strerror(-res));
        fx_disk_unlink_async(d, op->id);
        fx_free(op);
        if (!d->shutting) fx_disk_spare_start(d);
        return;
    }
    if (op->direct && !d->direct) fcntl(res, F_SETFL, fcntl(res, F_GETFL) & ~O_DIRECT); /* fell back meanwhile */
    d->spare_fd = res;
    d->spare_id = op->id;
    d->spare_reuse_bytes = (uint64_t)sb.st_size;
    fx_free(op);
}

static void dk_on_renamed(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)fl;
    dk_op_t *op = FX_CONTAINER_OF(io, dk_op_t, io);
    fx_disk_t *d = op->d;
    d->ops--;
    if (res < 0 || d->shutting) { /* the old file stays where it was (or is gone): unlinked, a new spare made */
        if (res < 0) FX_WARN("disk: renaming freed segment file %s to %s failed (%s): it is removed, a new one is made",
                             op->old_path, op->path, strerror(-res));
        fx_disk_unlink_async(d, res < 0 ? op->old_id : op->id);
        d->spare_opening = false;
        fx_free(op);
        if (!d->shutting) fx_disk_spare_start(d);
        return;
    }
    op->io.cb = dk_on_recycled_open;
    op->direct = d->direct;
    struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &op->io);
    io_uring_prep_openat(sqe, AT_FDCWD, op->path, O_RDWR | O_CLOEXEC | (d->direct ? O_DIRECT : 0), 0);
    d->ops++;
}

/* The next segment (id) in the freed segment old_id's file: renamed, then opened. False:
 * no memory (the caller makes a new file). */
static bool dk_recycle_start(fx_disk_t *d, uint64_t old_id, uint64_t id)
{
    size_t pl = strlen(d->path) + 96;
    dk_op_t *op = fx_calloc(1, sizeof *op + 2 * pl);
    if (!op) return false;
    op->d = d;
    op->kind = DK_OP_RENAME;
    op->id = id;
    op->old_id = old_id;
    op->old_path = op->path + pl;
    fx_disk_seg_path(d, id, op->path, pl);
    fx_disk_seg_path(d, old_id, op->old_path, pl);
    op->io.cb = dk_on_renamed;
    struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &op->io);
    io_uring_prep_renameat(sqe, AT_FDCWD, op->old_path, AT_FDCWD, op->path, 0);
    d->spare_opening = true;
    d->ops++;
    return true;
}

FX_INTERNAL void fx_disk_spare_start(fx_disk_t *d)
{
    if (d->spare_fd >= 0 || d->spare_opening || fx_disk_failing(d) || d->shutting) return;
    if (d->next_seg_id >= (1ull << 31)) { /* ids are 31 bits in a disk offset */
        if (!d->ids_exhausted) FX_ERROR("disk: %s: segment ids exhausted (2^31 made): writes to the disk tier stop; "
                                        "empty the directory to start over", d->path);
        d->ids_exhausted = true;
        return;
    }
    if (d->n_recycle) { /* the oldest freed file first */
        uint64_t old_id = d->recycle_id[0];
        if (dk_recycle_start(d, old_id, d->next_seg_id)) {
            memmove(d->recycle_id, d->recycle_id + 1, --d->n_recycle * sizeof d->recycle_id[0]);
            d->next_seg_id++;
            return;
        }
    }
    dk_op_t *op = dk_op_new(d, DK_OP_SPARE, d->next_seg_id, true);
    if (!op) return; /* the next roll asks again */
    d->next_seg_id++;
    op->direct = d->direct;
    op->io.cb = dk_on_spare;
    struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &op->io);
    io_uring_prep_openat(sqe, AT_FDCWD, op->path, dk_spare_flags(d), 0600);
    d->spare_opening = true;
    d->ops++;
}

FX_INTERNAL void fx_disk_spare_make_sync(fx_disk_t *d)
{
    if (d->next_seg_id >= (1ull << 31)) return;
    char path[4200];
    uint64_t id = d->next_seg_id++;
    fx_disk_seg_path(d, id, path, sizeof path);
    int fd = open(path, dk_spare_flags(d), 0600);
    if (fd < 0 && errno == EINVAL && d->direct && d->cfg.direct_io == FX_DISK_DIRECT_AUTO) {
        unlink(path); /* made before O_DIRECT was refused: ours, empty */
        fx_disk_direct_off(d, "EINVAL at the open of a new segment file");
        id = d->next_seg_id++;
        fx_disk_seg_path(d, id, path, sizeof path);
        fd = open(path, dk_spare_flags(d), 0600);
    }
    if (fd < 0) {
        fx_disk_fail(d, errno, "making the first segment file");
        return;
    }
    d->spare_fd = fd;
    d->spare_id = id;
}

FX_INTERNAL void fx_disk_spare_drop(fx_disk_t *d)
{
    if (d->spare_fd >= 0) {
        close(d->spare_fd);
        d->spare_fd = -1;
        d->spare_reuse_bytes = 0;
        fx_disk_unlink_async(d, d->spare_id);
    }
    /* the freed files kept for reuse go too: a restart would find retired segments' files */
    for (uint32_t i = 0; i < d->n_recycle; i++) fx_disk_unlink_async(d, d->recycle_id[i]);
    d->n_recycle = 0;
}
