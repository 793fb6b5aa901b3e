/* disk_io.c — the disk store's I/O on the reactor's io_uring (disk.h): appends into staging
 * buffers written whole (one write each, at most write_buffers in flight), the seal of a
 * full segment (fdatasync, then its index block), and reads checked before a byte is
 * served. Every completion runs on the reactor thread. */
#include "disk_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"

FX_INTERNAL void fx_disk_fault_next_write(fx_disk_t *d, int err) { d->fault_err = err; }
FX_INTERNAL void fx_disk_fault_short_write(fx_disk_t *d, uint64_t bytes) { d->fault_short = bytes; }

FX_INTERNAL uint32_t fx_disk_free_bufs(const fx_disk_t *d)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->cfg.write_buffers; i++) n += d->bufs[i].state == DK_BUF_FREE;
    return n;
}

static void dk_seal_step(fx_disk_t *d, dk_seg_t *seg);

/* ---- writes ---- */

static void dk_write_sqe(fx_disk_t *d, dk_buf_t *b)
{
    struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &b->io);
    io_uring_prep_write(sqe, b->seg->fd, b->mem + b->done, (unsigned)(b->len - b->done), b->file_off + b->done);
    /* by an io-wq worker, not inline on this thread: a write into a recycled file's blocks
     * is an overwrite the kernel would submit here (gup, bio), on the reactor that serves the
     * rings (an extending write into a new file went to io-wq anyway) */
    io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
}

static void dk_buf_done(fx_disk_t *d, dk_buf_t *b, int status)
{
    fx_disk_waiters_done(b, status);
    dk_seg_t *seg = b->seg;
    b->state = DK_BUF_FREE;
    b->seg = NULL;
    b->len = b->done = 0;
    if (b->cap > d->cfg.buffer_bytes) { /* a record larger than a buffer had it grown */
        fx_free(b->mem);
        fx_free(b->dirty);
        b->mem = NULL;
        b->dirty = NULL;
        b->cap = 0;
    }
    seg->writes--;
    if (d->closing) return;
    if (seg->sealing && seg->seal_step == 0) dk_seal_step(d, seg);
    fx_disk_seg_maybe_unlink(d, seg);
}

static void dk_on_write(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)fl;
    dk_buf_t *b = FX_CONTAINER_OF(io, dk_buf_t, io);
    fx_disk_t *d = b->d;
    d->ops--;
    if (d->fault_err) {
        res = -d->fault_err;
        d->fault_err = 0;
    } else if (d->fault_short && res > 0 && (uint64_t)res > d->fault_short) {
        res = (int)d->fault_short;
        d->fault_short = 0;
        d->fault_err = ENOSPC; /* the write of the rest */
    }
    if (!d->first_write_done && d->direct && d->cfg.direct_io == FX_DISK_DIRECT_AUTO && (res == -EINVAL || res == -EOPNOTSUPP)) {
        d->first_write_done = true;
        fx_disk_direct_off(d, res == -EINVAL ? "EINVAL at the first write" : "EOPNOTSUPP at the first write");
        b->done = 0; /* the whole buffer again, buffered */
        dk_write_sqe(d, b);
        d->ops++;
        return;
    }
    d->first_write_done = true;
    if (res == -EINTR || res == -EAGAIN) {
        dk_write_sqe(d, b);
        d->ops++;
        return;
    }
    if (res > 0 && b->done + (size_t)res < b->len) { /* short write: the rest */
        b->done += (size_t)res;
        dk_write_sqe(d, b);
        d->ops++;
        return;
    }
    if (res <= 0) {
        d->st.write_errors++;
        char what[160];
        snprintf(what, sizeof what, "a write of %zu bytes at byte %" PRIu64 " of segment %" PRIu64, b->len, b->file_off,
                 b->seg->id);
        fx_disk_fail(d, res ? -res : EIO, what);
        /* A write cut short (ENOSPC mid-buffer; any failed write may have put some blocks down)
         * can leave whole records of this buffer on the file: they leave the index below, so a
         * DELETE writes no tombstone for them, and a restart's scan would find them again (a
         * deleted key back: a new user's finding, session 40). The file is cut back to where
         * this buffer began; a later buffer of this segment already written goes too (its
         * records then fail their check when read: a miss, never bytes). */
        if (ftruncate(b->seg->fd, (off_t)b->file_off) != 0) {
            d->st.truncate_failures++;
            FX_ERROR("disk: cannot cut segment %" PRIu64 " of %s back to byte %" PRIu64 " after a failed write (%s): "
                     "a restart before it retires may find records dropped since", b->seg->id, d->path, b->file_off,
                     strerror(errno));
        }
        /* the records of this buffer are not on the file: out of the index */
        uint64_t lo = b->file_off, hi = b->file_off + b->len;
        for (dk_rec_t *x = b->seg->recs, *nx; x; x = nx) {
            nx = x->next;
            uint64_t bo = (x->off & 0xffffffffull) * FX_DISK_BLOCK;
            if (bo >= lo && bo < hi) fx_disk_rec_drop(d, x);
        }
    } else {
        d->st.writes++;
        d->st.write_bytes += b->len;
        if (!d->failed) d->fail_backoff_ms = 0; /* writes work: the next failure pauses 1 s again (a write
                                                 * issued before a failure ending now does not cut the pause) */
        if (!d->direct) fx_disk_fadvise_async(d, b->seg, b->file_off, b->len);
    }
    dk_buf_done(d, b, res <= 0 ? FLUXON_ERR_UNAVAILABLE : FLUXON_OK);
}

FX_INTERNAL void fx_disk_buf_submit(fx_disk_t *d, dk_buf_t *b)
{
    if (d->cur == b) {
        d->cur = NULL;
        fx_timer_disarm(d->r, &d->flush_timer);
    }
    if (!b->len) {
        fx_disk_waiters_done(b, FLUXON_OK);
        b->state = DK_BUF_FREE;
        b->seg->writes--;
        b->seg = NULL;
        return;
    }
    b->state = DK_BUF_WRITE;
    b->done = 0;
    b->io.cb = dk_on_write;
    dk_write_sqe(d, b);
    d->ops++;
}

static void dk_on_flush_timer(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    fx_disk_t *d = FX_CONTAINER_OF(t, fx_disk_t, flush_timer);
    if (d->cur) fx_disk_buf_submit(d, d->cur);
}

FX_INTERNAL void fx_disk_flush(fx_disk_t *d)
{
    if (d && d->cur) fx_disk_buf_submit(d, d->cur);
}

/* The dirty marks of a staging buffer of cap bytes, each block's set to `was` (0: the buffer
 * is zeroed); NULL when out of memory. */
FX_INTERNAL uint16_t *fx_disk_dirty_new(size_t cap, uint16_t was)
{
    size_t n = cap / FX_DISK_BLOCK;
    uint16_t *v = fx_malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; v && i < n; i++) v[i] = was;
    return v;
}

/* A buffer being filled for seg with `need` bytes free (the current one, else a free one);
 * NULL when every buffer is in flight. A buffer counts as one of seg's writes from here. */
FX_INTERNAL dk_buf_t *fx_disk_buf_take(fx_disk_t *d, dk_seg_t *seg, uint64_t need)
{
    dk_buf_t *b = d->cur;
    if (b && (b->seg != seg || b->cap - b->len < need)) {
        fx_disk_buf_submit(d, b);
        b = NULL;
    }
    if (b) return b;
    for (uint32_t i = 0; i < d->cfg.write_buffers && !b; i++)
        if (d->bufs[i].state == DK_BUF_FREE) b = &d->bufs[i];
    if (!b) return NULL;
    if (b->cap < need || !b->mem) {
        size_t cap = FX_MAX((size_t)need, (size_t)d->cfg.buffer_bytes);
        char *m = fx_disk_aligned(cap);
        if (!m) return NULL;
        fx_free(b->mem);
        fx_free(b->dirty);
        b->mem = m;
        b->cap = cap;
        b->dirty = fx_disk_dirty_new(cap, FX_DISK_BLOCK); /* NULL: every header block zeroed whole */
    }
    b->state = DK_BUF_FILL;
    b->seg = seg;
    b->file_off = seg->data_end;
    b->len = b->done = 0;
    seg->writes++;
    d->cur = b;
    fx_timer_arm(d->r, &d->flush_timer, FX_DISK_FLUSH_MS, dk_on_flush_timer);
    return b;
}

FX_INTERNAL bool fx_disk_room(fx_disk_t *d, size_t n, uint64_t bytes)
{
    if (fx_disk_failing(d)) return false;
    if (!n) return true;
    uint64_t need = bytes + (uint64_t)n * 2 * FX_DISK_BLOCK; /* header block + padding, at most */
    uint64_t ent = FX_MIN(bytes, (uint64_t)n * FX_DISK_MAX_KEY) + (uint64_t)n * (FX_DISK_IDX_ENTRY + 8);
    dk_seg_t *s = d->open_seg;
    bool roll = !s || !fx_disk_seg_fits(d, s, need, ent);
    if (roll && !fx_disk_can_roll(d)) {
        fx_disk_spare_start(d); /* when none is made or being made (a failed allocation) */
        return false;
    }
    if (!roll && d->cur && d->cur->seg == s && d->cur->cap - d->cur->len >= need) return true;
    uint64_t bb = d->cfg.buffer_bytes;
    uint64_t k = FX_MIN((uint64_t)n, 2 * ((need + bb - 1) / bb) + 1) + 1;
    return fx_disk_free_bufs(d) + (d->cur ? 1 : 0) >= k;
}

/* Stages one record (flags 0: a value, indexed; else a tombstone or barrier, listed for
 * its segment's index block) and returns its disk offset in *off. */
FX_INTERNAL int fx_disk_stage(fx_disk_t *d, const char *key, uint32_t klen, uint64_t khash, const void *value,
                              const fx_disk_meta_t *m, uint16_t flags, uint64_t *off)
{
    if (fx_disk_failing(d)) return FLUXON_ERR_UNAVAILABLE;
    if (klen > FX_DISK_MAX_KEY || (klen && !key) || (m->value_len && !value)) return FLUXON_ERR_INVALID_ARGUMENT;
    if (!(flags & FX_DISK_REC_RETIRED)) fx_disk_retire_mark_flush(d); /* a mark left by a roll goes first */
    uint64_t rb = fx_disk_rec_bytes(m->value_len), eb = fx_disk_ient_bytes(klen);
    if (m->value_len > d->cfg.segment_bytes ||
        rb + FX_ALIGN_UP(eb, (uint64_t)FX_DISK_BLOCK) + FX_DISK_BLOCK > d->cfg.segment_bytes)
        return FLUXON_ERR_INVALID_ARGUMENT;
    if (!d->open_seg || !fx_disk_seg_fits(d, d->open_seg, rb, eb)) {
        int rc = fx_disk_roll(d, rb, eb);
        if (rc != FLUXON_OK) {
            d->st.append_busy += rc == FLUXON_ERR_BUSY;
            return rc;
        }
    }
    dk_seg_t *seg = d->open_seg;
    dk_buf_t *b = fx_disk_buf_take(d, seg, rb);
    if (!b) {
        d->st.append_busy++;
        return FLUXON_ERR_BUSY;
    }
    uint64_t byte_off = seg->data_end;
    if (!flags) { /* the index's slots this record goes to, loaded while its bytes are copied */
        if (!khash) khash = fx_hmap_hash(key, klen);
        fx_u64map_prefetch(&d->by_off, FX_DISK_OFF_BIT | seg->id << 32 | byte_off / FX_DISK_BLOCK);
        fx_hmap_prefetch(d->by_key, khash);
    }
    fx_disk_rec_encode(b->mem + b->len, b->dirty ? b->dirty + b->len / FX_DISK_BLOCK : NULL, seg->id, byte_off, key,
                       klen, value, m, flags);
    if (!flags) {
        int rc = fx_disk_index_add(d, seg, byte_off, key, klen, khash, m, false);
        if (rc != FLUXON_OK) return rc; /* the bytes are staged but never counted: overwritten */
    } else {
        dk_tomb_t *t = fx_malloc(sizeof *t + klen + 1);
        if (!t) return FLUXON_ERR_NOMEM;
        *t = (dk_tomb_t){seg->tombs, seg->id, byte_off, *m, klen, flags};
        if (klen) memcpy(t->key, key, klen);
        seg->tombs = t;
    }
    b->len += rb;
    seg->data_end += rb;
    seg->entry_bytes += eb;
    if (off) *off = FX_DISK_OFF_BIT | seg->id << 32 | byte_off / FX_DISK_BLOCK;
    if (b->len == b->cap) fx_disk_buf_submit(d, b);
    return FLUXON_OK;
}

FX_INTERNAL int fx_disk_append(fx_disk_t *d, const char *key, uint32_t klen, const void *value,
                               const fx_disk_meta_t *m, uint64_t *off)
{
    return fx_disk_append_h(d, key, klen, 0, value, m, off);
}

FX_INTERNAL int fx_disk_append_h(fx_disk_t *d, const char *key, uint32_t klen, uint64_t khash, const void *value,
                                 const fx_disk_meta_t *m, uint64_t *off)
{
    int rc = fx_disk_stage(d, key, klen, khash, value, m, 0, off);
    if (rc == FLUXON_OK) {
        d->st.appends++;
        d->st.append_bytes += klen + m->value_len;
    }
    return rc;
}

/* ---- the seal: fdatasync of the data, then the index block ---- */

static void dk_on_seal(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)fl;
    dk_seg_t *seg = FX_CONTAINER_OF(io, dk_seg_t, seal_io);
    fx_disk_t *d = seg->seal_d;
    d->ops--;
    seg->writes--;
    if (d->closing) return;
    if (res == -EINTR || res == -EAGAIN) {
        seg->seal_step--; /* the same step again */
        dk_seal_step(d, seg);
        return;
    }
    bool ok = seg->seal_step == 1   ? res >= 0
              : seg->seal_step == 2 ? res >= 0 && (size_t)res == seg->seal_len
                                    : res == (int)FX_DISK_BLOCK; /* 3: the footer again, in a recycled file's last block */
    if (!ok) {
        d->st.write_errors++;
        FX_ERROR("disk: sealing segment %" PRIu64 " of %s failed at its %s: %s; it stays unsealed (scanned at restart)",
                 seg->id, d->path, seg->seal_step == 1 ? "fdatasync" : seg->seal_step == 2 ? "index block" : "footer",
                 res < 0 ? strerror(-res) : "short write");
        seg->sealing = false;
        fx_free(seg->seal_buf);
        seg->seal_buf = NULL;
    } else {
        dk_seal_step(d, seg);
    }
    fx_disk_seg_maybe_unlink(d, seg);
}

/* Where seg's footer must also be (a recycled file longer than the segment: its last
 * block), else where the index block puts it anyway. */
static uint64_t dk_footer_at(const dk_seg_t *seg)
{
    uint64_t own = seg->data_end + seg->seal_len - FX_DISK_BLOCK, last = seg->reuse_bytes / FX_DISK_BLOCK * FX_DISK_BLOCK;
    return last >= FX_DISK_BLOCK && last - FX_DISK_BLOCK > own ? last - FX_DISK_BLOCK : own;
}

static void dk_seal_step(fx_disk_t *d, dk_seg_t *seg)
{
    if (seg->state == DK_SEG_FREED || d->failed) { /* no point any more */
        seg->sealing = false;
        return;
    }
    seg->seal_io.cb = dk_on_seal;
    seg->seal_d = d;
    if (seg->seal_step == 0) {
        if (seg->writes) return; /* its data is still being written */
        struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &seg->seal_io);
        io_uring_prep_fsync(sqe, seg->fd, IORING_FSYNC_DATASYNC);
    } else if (seg->seal_step == 1) {
        seg->seal_buf = fx_disk_index_encode(seg, &seg->seal_len);
        if (!seg->seal_buf) {
            FX_ERROR("disk: out of memory for the index block of segment %" PRIu64 ": it stays unsealed", seg->id);
            seg->sealing = false;
            return;
        }
        fx_disk_tombs_free(&seg->tombs); /* in the index block now (and in their records) */
        struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &seg->seal_io);
        io_uring_prep_write(sqe, seg->fd, seg->seal_buf, (unsigned)seg->seal_len, seg->data_end);
    } else if (seg->seal_step == 2 && dk_footer_at(seg) > seg->data_end + seg->seal_len - FX_DISK_BLOCK) {
        /* a recycled file longer than this segment: the rebuild reads the footer in the
         * file's last block (the earlier life's stays there until this one replaces it) */
        struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &seg->seal_io);
        io_uring_prep_write(sqe, seg->fd, seg->seal_buf + seg->seal_len - FX_DISK_BLOCK, FX_DISK_BLOCK, dk_footer_at(seg));
    } else {
        seg->sealing = false;
        seg->sealed = true;
        seg->file_bytes = FX_MAX(seg->data_end + seg->seal_len, dk_footer_at(seg) + FX_DISK_BLOCK);
        fx_free(seg->seal_buf);
        seg->seal_buf = NULL;
        if (!d->direct) fx_disk_fadvise_async(d, seg, 0, 0);
        return;
    }
    seg->seal_step++;
    seg->writes++;
    d->ops++;
}

FX_INTERNAL void fx_disk_seal(fx_disk_t *d, dk_seg_t *seg)
{
    if (seg->sealing || seg->sealed) return;
    seg->sealing = true;
    seg->seal_step = 0;
    dk_seal_step(d, seg);
}

/* ---- reads ---- */

static void dk_read_finish(fx_disk_t *d, dk_read_t *rd, int status)
{
    fx_disk_read_fn done = rd->done;
    void *arg = rd->arg;
    fx_free(rd->bounce);
    fx_free(rd);
    if (done) done(arg, status);
}

static void dk_on_posted(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)res, (void)fl;
    dk_read_t *rd = FX_CONTAINER_OF(io, dk_read_t, io);
    rd->d->ops--;
    dk_read_finish(rd->d, rd, rd->status);
}

static void dk_read_sqe(fx_disk_t *d, dk_read_t *rd)
{
    struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &rd->io);
    io_uring_prep_read(sqe, rd->seg->fd, rd->bounce + rd->got, (unsigned)(rd->len - rd->got),
                       (rd->off & 0xffffffffull) * FX_DISK_BLOCK + rd->got);
    d->ops++;
}

static void dk_read_done(fx_disk_t *d, dk_read_t *rd, int res);

static void dk_on_read(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)fl;
    dk_read_t *rd = FX_CONTAINER_OF(io, dk_read_t, io);
    rd->d->ops--;
    if (res > 0 && rd->got + (size_t)res < rd->len) { /* short read: the rest (EOF ends it with 0) */
        rd->got += (size_t)res;
        dk_read_sqe(rd->d, rd);
        return;
    }
    if (res > 0) rd->got += (size_t)res;
    dk_read_done(rd->d, rd, res);
}

/* A coalesced read ended: each record read whole is checked as its own read; one the read
 * did not cover (an error, a short read) is read again alone from where it stopped, so it
 * ends as a read of its own would have (its own error, EOF, retry). */
static void dk_on_rgroup(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)fl;
    dk_rgroup_t *g = FX_CONTAINER_OF(io, dk_rgroup_t, io);
    fx_disk_t *d = g->d;
    d->ops--;
    if (d->rg_open == g) d->rg_open = NULL;
    uint64_t left = res > 0 ? (uint64_t)res : 0;
    for (uint32_t i = 0; i < g->n; i++) {
        dk_read_t *rd = g->m[i];
        left -= FX_MIN(left, (uint64_t)g->gap[i]); /* the blocks before it, read to join it: dropped */
        size_t got = (size_t)FX_MIN(left, (uint64_t)rd->len);
        left -= got;
        if (got == rd->len) {
            rd->got = got;
            dk_read_done(d, rd, (int)got);
        } else {
            rd->got = got;
            dk_read_sqe(d, rd);
        }
    }
    fx_free(g);
}

/* Starts the read of rd (its bounce buffer allocated, its segment held): it joins the read
 * queued this turn when its record starts where that one's last ends. */
static void dk_read_issue(fx_disk_t *d, dk_read_t *rd)
{
    d->st.read_ios++;
    uint64_t bo = (rd->off & 0xffffffffull) * FX_DISK_BLOCK;
    dk_rgroup_t *g = d->rg_open;
    uint64_t end = g ? g->file_off + g->len : 0, gap = g && bo >= end ? bo - end : UINT64_MAX;
    if (g && fx_reactor_submits(d->r) == g->submits && g->seg == rd->seg &&
        (gap == 0 || (gap <= DK_RGROUP_GAP && d->gap_buf)) && g->n < DK_RGROUP_MAX &&
        g->len + gap + rd->len <= DK_RGROUP_BYTES) {
        d->st.read_ios--;
        if (gap) { /* the blocks between: read into the scratch buffer, dropped */
            g->iov[g->niov++] = (struct iovec){d->gap_buf, gap};
            d->st.read_gap_bytes += gap;
        }
        g->gap[g->n] = (uint32_t)gap;
        g->m[g->n] = rd;
        g->iov[g->niov++] = (struct iovec){rd->bounce, rd->len};
        g->n++;
        g->len += gap + rd->len;
        g->sqe->len = g->niov; /* READV: the number of iovecs */
        return;
    }
    d->rg_open = NULL;
    g = fx_malloc(sizeof *g);
    if (!g) { /* no memory for a group: a read of its own */
        dk_read_sqe(d, rd);
        return;
    }
    g->d = d;
    g->seg = rd->seg;
    g->file_off = bo;
    g->len = rd->len;
    g->n = 1;
    g->niov = 1;
    g->gap[0] = 0;
    g->m[0] = rd;
    g->iov[0] = (struct iovec){rd->bounce, rd->len};
    g->io.cb = dk_on_rgroup;
    g->sqe = fx_reactor_sqe(d->r, &g->io);
    g->submits = fx_reactor_submits(d->r);
    io_uring_prep_readv(g->sqe, rd->seg->fd, g->iov, 1, bo);
    io_uring_sqe_set_data(g->sqe, &g->io);
    d->ops++;
    d->rg_open = g;
}

/* rd's read ended with res (bytes, or -errno): retried, or checked and finished. */
static void dk_read_done(fx_disk_t *d, dk_read_t *rd, int res)
{
    dk_seg_t *seg = rd->seg;
    if (res == -EINTR || res == -EAGAIN) {
        dk_read_sqe(d, rd);
        return;
    }
    seg->readers--;
    d->st.reads_in_flight--;
    fx_hist_observe(&d->st.read_latency, fx_now_ns() - rd->t0_ns);
    int status = FLUXON_OK;
    uint64_t bo = (rd->off & 0xffffffffull) * FX_DISK_BLOCK;
    char path[4096];
    if (res < 0) {
        d->st.read_errors++;
        fx_disk_seg_path(d, seg->id, path, sizeof path);
        FX_ERROR("disk: read of %zu bytes at byte %" PRIu64 " of %s failed: %s", rd->len, bo, path, strerror(-res));
        status = FLUXON_ERR_UNAVAILABLE;
    } else {
        const char *bad = fx_disk_rec_check(rd->bounce, rd->got, seg->id, bo, rd->key, rd->klen);
        fx_disk_hdr_t h;
        memcpy(&h, rd->bounce, sizeof h);
        if (!bad && h.value_len != rd->value_len) bad = "another value length";
        if (!bad && h.flags) bad = "not a value"; /* a tombstone, barrier or mark an index block names as one */
        if (bad) {
            d->st.crc_failures++;
            fx_disk_seg_path(d, seg->id, path, sizeof path);
            FX_WARN("disk: record at byte %" PRIu64 " of %s fails its check (%s): a miss, dropped from the index", bo,
                    path, bad);
            dk_rec_t *x = d->closing ? NULL : fx_u64map_get(&d->by_off, rd->off);
            if (x) {
                d->st.records_dropped++;
                fx_disk_rec_drop(d, x);
            }
            status = FLUXON_ERR_NOT_FOUND;
        } else if (!d->closing && !fx_u64map_get(&d->by_off, rd->off)) {
            status = FLUXON_ERR_NOT_FOUND; /* dropped while it was read */
        } else {
            memcpy(rd->dst, rd->bounce + FX_DISK_BLOCK, rd->value_len);
            d->st.read_bytes += rd->value_len;
        }
    }
    if (!d->closing) fx_disk_seg_maybe_unlink(d, seg);
    dk_read_finish(d, rd, status);
}

FX_INTERNAL int fx_disk_read(fx_disk_t *d, uint64_t off, const char *key, uint32_t klen, void *dst,
                             uint64_t value_len, fx_disk_read_fn done, void *arg)
{
    dk_rec_t *x = fx_u64map_get(&d->by_off, off);
    if (!x || klen > FX_DISK_MAX_KEY) return FLUXON_ERR_NOT_FOUND;
    dk_read_t *rd = fx_malloc(sizeof *rd + klen + 1);
    if (!rd) return FLUXON_ERR_NOMEM;
    memset(rd, 0, sizeof *rd);
    rd->d = d;
    rd->off = off;
    rd->value_len = value_len;
    rd->dst = dst;
    rd->done = done;
    rd->arg = arg;
    rd->klen = klen;
    if (klen) memcpy(rd->key, key, klen);
    d->st.reads++;
    dk_seg_t *seg = x->seg;
    uint64_t bo = (off & 0xffffffffull) * FX_DISK_BLOCK;
    dk_buf_t *b = NULL;
    for (uint32_t i = 0; i < d->cfg.write_buffers && !b; i++) {
        dk_buf_t *c = &d->bufs[i];
        if (c->state != DK_BUF_FREE && c->seg == seg && bo >= c->file_off && bo < c->file_off + c->len) b = c;
    }
    if (x->klen != klen || (klen && memcmp(x->key, key, klen))) {
        rd->status = FLUXON_ERR_NOT_FOUND; /* not the record of this key */
    } else if (value_len != x->m.value_len) {
        rd->status = FLUXON_ERR_INVALID_ARGUMENT;
    } else if (b) { /* still in a staging buffer: our own bytes, copied */
        if (value_len) memcpy(dst, b->mem + (bo - b->file_off) + FX_DISK_BLOCK, value_len);
        d->st.staged_reads++;
        d->st.read_bytes += value_len;
        rd->status = FLUXON_OK;
    } else {
        rd->len = fx_disk_rec_bytes(value_len);
        rd->bounce = fx_disk_aligned(rd->len);
        if (!rd->bounce) {
            fx_free(rd);
            return FLUXON_ERR_NOMEM;
        }
        rd->seg = seg;
        rd->io.cb = dk_on_read;
        rd->t0_ns = fx_now_ns();
        seg->readers++;
        d->st.reads_in_flight++;
        dk_read_issue(d, rd);
        return FLUXON_OK;
    }
    /* done runs from the completion of a NOP on the ring: later, never inside this call */
    rd->io.cb = dk_on_posted;
    fx_reactor_sqe(d->r, &rd->io);
    d->ops++;
    return FLUXON_OK;
}
