/* disk.c — the disk store (disk.h): configuration, the directory lock, the key index,
 * segments and capacity (retirement), close and stats. The byte layout and the rebuild are
 * in disk_format.c, staging, writes, seals and reads in disk_io.c. */
#include "disk_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"

FX_INTERNAL void *fx_disk_aligned(size_t n) { return fx_malloc_aligned(FX_DISK_BLOCK, n); }

/* ---- configuration ---- */

static int dk_check_cfg(const fx_disk_cfg_t *in, fx_disk_cfg_t *c, char *err, size_t errlen)
{
    *c = *in;
    if (!c->path || !c->path[0] || strlen(c->path) > 3000) {
        snprintf(err, errlen, "disk.path: missing or longer than 3000 bytes");
        return FLUXON_ERR_CONFIG;
    }
    size_t ol = c->owner_id ? strlen(c->owner_id) : 0;
    bool ok = ol >= 1 && ol <= 64;
    for (size_t i = 0; ok && i < ol; i++) {
        char ch = c->owner_id[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
             ch == '.' || ch == '-';
    }
    if (!ok) {
        snprintf(err, errlen, "disk.owner_id \"%.80s\": must be 1..64 bytes of [A-Za-z0-9_.-]",
                 c->owner_id ? c->owner_id : "");
        return FLUXON_ERR_CONFIG;
    }
    if (!c->segment_bytes) c->segment_bytes = FX_DISK_SEGMENT_DEFAULT;
    if (c->segment_bytes % FX_DISK_BLOCK || c->segment_bytes < (1ull << 20) || c->segment_bytes > (1ull << 44)) {
        snprintf(err, errlen, "disk.segment_bytes %" PRIu64 ": must be a multiple of 4096 in [1 MiB, 16 TiB]",
                 in->segment_bytes);
        return FLUXON_ERR_CONFIG;
    }
    if (c->capacity_bytes < 2 * c->segment_bytes) {
        snprintf(err, errlen, "disk.capacity_bytes %" PRIu64 ": must be at least 2 segments (2 x %" PRIu64 ")",
                 c->capacity_bytes, c->segment_bytes);
        return FLUXON_ERR_CONFIG;
    }
    if (c->direct_io < FX_DISK_DIRECT_AUTO || c->direct_io > FX_DISK_DIRECT_OFF) {
        snprintf(err, errlen, "disk.direct_io %d: must be auto (0), on (1) or off (2)", c->direct_io);
        return FLUXON_ERR_CONFIG;
    }
    if (!c->write_buffers) c->write_buffers = 4;
    if (c->write_buffers > 1024) {
        snprintf(err, errlen, "disk.write_buffers %u: must be in [1, 1024]", c->write_buffers);
        return FLUXON_ERR_CONFIG;
    }
    if (!c->buffer_bytes) c->buffer_bytes = 1u << 20;
    if (c->buffer_bytes % FX_DISK_BLOCK || c->buffer_bytes < 2 * FX_DISK_BLOCK || c->buffer_bytes > c->segment_bytes) {
        snprintf(err, errlen, "disk.buffer_bytes %u: must be a multiple of 4096 in [8 KiB, segment_bytes %" PRIu64 "]",
                 in->buffer_bytes, c->segment_bytes);
        return FLUXON_ERR_CONFIG;
    }
    return FLUXON_OK;
}

/* ---- the lock ---- */

/* mkdir -p: the missing parents 0755 (as for the owner's socket), the directory 0700. */
static int dk_mkdirs(const char *path)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *c = p + 1; *c; c++)
        if (*c == '/') {
            *c = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
            *c = '/';
        }
    return mkdir(p, 0700);
}

static int dk_lock(fx_disk_t *d, char *err, size_t errlen)
{
    char lp[4096];
    snprintf(lp, sizeof lp, "%s/LOCK", d->path);
    d->lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600); /* never a link's target */
    if (d->lock_fd < 0) {
        snprintf(err, errlen, "disk.path %.300s: cannot open its LOCK file: %s", d->path, strerror(errno));
        return FLUXON_ERR_UNAVAILABLE;
    }
    if (flock(d->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char who[160] = "";
        ssize_t n = pread(d->lock_fd, who, sizeof who - 1, 0);
        who[n > 0 ? n : 0] = 0;
        char owner[80] = "?";
        long pid = 0;
        if (sscanf(who, "%79s %ld", owner, &pid) < 2) pid = 0;
        if (e == EWOULDBLOCK)
            snprintf(err, errlen, "disk.path %s is held by owner %s pid %ld", d->path, owner, pid);
        else
            snprintf(err, errlen, "disk.path %.300s: flock of its LOCK file failed: %s", d->path, strerror(e));
        return e == EWOULDBLOCK ? FLUXON_ERR_BUSY : FLUXON_ERR_UNAVAILABLE;
    }
    char me[128];
    int n = snprintf(me, sizeof me, "%s %ld\n", d->owner_id, (long)getpid());
    if (ftruncate(d->lock_fd, 0) != 0 || pwrite(d->lock_fd, me, (size_t)n, 0) != n)
        FX_WARN("disk: %s: cannot write the holder into LOCK: %m", d->path);
    return FLUXON_OK;
}

/* O_DIRECT: the file system's word (statx DIOALIGN where it answers), then an open of the
 * lock file with O_DIRECT (a file system that refuses it says EINVAL). */
static int dk_probe_direct(fx_disk_t *d, char *err, size_t errlen)
{
    d->direct = false;
    if (d->cfg.direct_io == FX_DISK_DIRECT_OFF) return FLUXON_OK;
    const char *why = NULL;
    d->dio_align = FX_DISK_BLOCK;
#ifdef STATX_DIOALIGN
    struct statx sx;
    char lp[4096];
    snprintf(lp, sizeof lp, "%s/LOCK", d->path);
    if (statx(AT_FDCWD, lp, 0, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        if (sx.stx_dio_offset_align == 0) why = "statx reports no direct I/O support";
        else if (sx.stx_dio_offset_align > FX_DISK_BLOCK || sx.stx_dio_mem_align > FX_DISK_BLOCK)
            why = "its direct I/O alignment is above 4096";
        else d->dio_align = sx.stx_dio_offset_align;
    }
#endif
    if (!why) {
        char lp2[4096];
        snprintf(lp2, sizeof lp2, "%s/LOCK", d->path);
        int fd = open(lp2, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd < 0) why = errno == EINVAL ? "open with O_DIRECT: EINVAL" : strerror(errno);
        else close(fd);
    }
    if (!why) {
        d->direct = true;
        return FLUXON_OK;
    }
    if (d->cfg.direct_io == FX_DISK_DIRECT_ON) {
        snprintf(err, errlen, "disk.direct_io is on but disk.path %s refuses O_DIRECT (%s)", d->path, why);
        return FLUXON_ERR_CONFIG;
    }
    d->st.direct_fallbacks++;
    FX_WARN("disk: %s refuses O_DIRECT (%s): buffered I/O with POSIX_FADV_DONTNEED after each write", d->path, why);
    return FLUXON_OK;
}

FX_INTERNAL int fx_disk_seg_open_fd(fx_disk_t *d, const char *path, int flags, char *err, size_t errlen)
{
    int fd = open(path, flags | O_CLOEXEC | (d->direct ? O_DIRECT : 0), 0600);
    if (fd < 0 && errno == EINVAL && d->direct && d->cfg.direct_io == FX_DISK_DIRECT_AUTO) {
        fx_disk_direct_off(d, "EINVAL at open");
        fd = open(path, flags | O_CLOEXEC, 0600);
    }
    if (fd < 0) snprintf(err, errlen, "disk.path %.150s: cannot open %.150s: %s", d->path, path, strerror(errno));
    return fd;
}

/* ---- segments ---- */

FX_INTERNAL dk_seg_t *fx_disk_seg_new(fx_disk_t *d, uint64_t id, int fd)
{
    dk_seg_t *s = fx_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->id = id;
    s->fd = fd;
    s->state = DK_SEG_CLOSED;
    dk_seg_t **pp = &d->segs;
    while (*pp && (*pp)->id < id) pp = &(*pp)->next;
    s->next = *pp;
    *pp = s;
    return s;
}

FX_INTERNAL bool fx_disk_seg_fits(const fx_disk_t *d, const dk_seg_t *s, uint64_t rec_bytes, uint64_t ent_bytes)
{
    return s->data_end + rec_bytes + FX_ALIGN_UP(s->entry_bytes + ent_bytes, (uint64_t)FX_DISK_BLOCK) + FX_DISK_BLOCK <=
           d->cfg.segment_bytes;
}

FX_INTERNAL void fx_disk_seg_maybe_unlink(fx_disk_t *d, dk_seg_t *seg)
{
    if (seg->state != DK_SEG_FREED || seg->readers || seg->writes || seg->aux) return;
    close(seg->fd); /* cheap: the file is still linked */
    if (d->failed) /* its retirement mark may never be written: under its own name it would be read again */
        fx_disk_unlink_retired_now(d, seg->id);
    else if (!d->closing && !d->shutting && d->n_recycle < FX_DISK_RECYCLE)
        d->recycle_id[d->n_recycle++] = seg->id; /* the next segment is written into it (disk_fs.c) */
    else
        fx_disk_unlink_async(d, seg->id); /* the unlink (which frees its blocks) goes through the ring */
    for (dk_seg_t **pp = &d->segs; *pp; pp = &(*pp)->next)
        if (*pp == seg) {
            *pp = seg->next;
            break;
        }
    fx_free(seg->seal_buf);
    fx_disk_tombs_free(&seg->tombs);
    fx_free(seg);
    d->st.segments_freed++;
}

/* why: NULL for capacity, else the reason logged */
static void dk_retire(fx_disk_t *d, dk_seg_t *s, const char *why)
{
    s->state = DK_SEG_RETIRING;
    uint64_t now = fx_now_ms(); /* a line every 10 s at most: small segments retire many a second */
    if (why) {
        FX_WARN("disk: segment %016" PRIx64 " of %s retires (%u live records) %s", s->id, d->path, s->live, why);
    } else if (!d->retire_log_ms || now - d->retire_log_ms >= 10000) {
        FX_INFO("disk: segment %016" PRIx64 " retires (%u live records) to stay within disk.capacity_bytes %" PRIu64
                "%s", s->id, s->live, d->cfg.capacity_bytes,
                d->retire_quiet ? " (more retired since the last such line: see segments_freed)" : "");
        d->retire_log_ms = now;
        d->retire_quiet = 0;
    } else {
        d->retire_quiet++;
    }
    if (!d->hooks.segment_retiring) { /* nobody above to tell */
        fx_disk_segment_free(d, s->id);
        return;
    }
    size_t n = s->live;
    uint64_t *offs = fx_malloc((n ? n : 1) * sizeof *offs);
    const char **keys = fx_malloc((n ? n : 1) * sizeof *keys);
    uint32_t *klens = fx_malloc((n ? n : 1) * sizeof *klens);
    if (!offs || !keys || !klens) { /* nobody can be told: the records go now */
        FX_ERROR("disk: out of memory telling the segment %" PRIu64 " retires: its records are dropped", s->id);
        fx_free(offs), fx_free(keys), fx_free(klens);
        fx_disk_segment_free(d, s->id);
        return;
    }
    size_t i = 0;
    for (dk_rec_t *r = s->recs; r && i < n; r = r->next, i++) {
        offs[i] = r->off;
        keys[i] = r->key;
        klens[i] = r->klen;
    }
    d->hooks.segment_retiring(d->hooks.arg, s->id, offs, (const char *const *)keys, klens, i);
    fx_free(offs), fx_free(keys), fx_free(klens);
}

static uint64_t dk_count_segs(const fx_disk_t *d, bool active_only)
{
    uint64_t n = 0;
    for (const dk_seg_t *s = d->segs; s; s = s->next)
        if (!active_only || s->state == DK_SEG_OPEN || s->state == DK_SEG_CLOSED) n++;
    return n;
}

static bool dk_count_allows(const fx_disk_t *d)
{
    return dk_count_segs(d, false) + 1 <= d->max_segs + FX_DISK_OVER_SEGMENTS;
}

/* The oldest closed segments retire while the active ones (and one more) pass capacity. */
static void dk_retire_over(fx_disk_t *d)
{
    while (dk_count_segs(d, true) + 1 > d->max_segs) {
        dk_seg_t *old = NULL;
        for (dk_seg_t *s = d->segs; s && !old; s = s->next)
            if (s->state == DK_SEG_CLOSED) old = s;
        if (!old) break;
        dk_retire(d, old, NULL); /* may free it at once (no hook): the list is walked again */
    }
}

/* Past capacity + FX_DISK_OVER_SEGMENTS (a directory reopened with a smaller capacity, or
 * the layer above slow to free), the oldest segments retire here too: roll is the other
 * place, and it is reached only through here. */
FX_INTERNAL void fx_disk_fail(fx_disk_t *d, int err, const char *what)
{
    d->st.write_stops += !d->failed;
    bool was_failed = d->failed;
    d->failed = true;
    d->failed_ms = fx_now_ms();
    d->fail_backoff_ms = d->fail_backoff_ms ? FX_MIN(d->fail_backoff_ms * 2, 30000u) : 1000u;
    if (!was_failed)
        FX_ERROR("disk: %s in %s failed: %s; writes to the disk tier pause %u ms, then retry (values evicted meanwhile "
                 "go without a disk copy, counted)", what, d->path, strerror(err), d->fail_backoff_ms);
    if (d->open_seg) { /* a hole in it now: no record after it */
        d->open_seg->state = DK_SEG_CLOSED;
        d->open_seg = NULL;
    }
    /* The files kept for reuse were retired segments: the marks saying so may have been in
     * the write that failed (and no later one is written while paused). Under their own
     * names a restart would read them again: they go now. */
    for (uint32_t i = 0; i < d->n_recycle; i++) fx_disk_unlink_retired_now(d, d->recycle_id[i]);
    d->n_recycle = 0;
    if (err == ENOSPC) { /* a cache: the oldest segment makes room */
        dk_seg_t *old = NULL;
        for (dk_seg_t *s = d->segs; s && !old; s = s->next)
            if (s->state == DK_SEG_CLOSED) old = s;
        if (old) dk_retire(d, old, "to make room: the file system is full (ENOSPC)");
    }
}

FX_INTERNAL bool fx_disk_failing(fx_disk_t *d)
{
    if (!d->failed) return false;
    if (fx_now_ms() - d->failed_ms < d->fail_backoff_ms) return true;
    d->failed = false; /* the pause is over: the next write or file creation tries again */
    FX_INFO("disk: writes to %s resume after a failure (%u ms pause)", d->path, d->fail_backoff_ms);
    return false;
}

FX_INTERNAL bool fx_disk_can_roll(fx_disk_t *d)
{
    if (!dk_count_allows(d)) dk_retire_over(d);
    return dk_count_allows(d) && d->spare_fd >= 0;
}

/* The open segment is full (or there is none): it closes (its seal starts once its data is
 * written), the oldest segments retire while a new one would pass capacity, and the spare
 * (the file made ahead) becomes the open segment while the next spare is made through the
 * ring. FLUXON_ERR_BUSY: past capacity + FX_DISK_OVER_SEGMENTS, or the spare is not made
 * yet (segment_waits). */
static int dk_roll(fx_disk_t *d);

FX_INTERNAL int fx_disk_roll(fx_disk_t *d, uint64_t rec_bytes, uint64_t ent_bytes)
{
    (void)rec_bytes, (void)ent_bytes;
    d->in_roll = true; /* a segment freed inside (no hook) stages its retirement mark after */
    int rc = dk_roll(d);
    d->in_roll = false;
    return rc;
}

static int dk_roll(fx_disk_t *d)
{
    dk_seg_t *o = d->open_seg;
    if (o) {
        if (d->cur && d->cur->seg == o) fx_disk_buf_submit(d, d->cur);
        o->state = DK_SEG_CLOSED;
        d->open_seg = NULL;
        if (o->data_end) fx_disk_seal(d, o);
    }
    dk_retire_over(d);
    if (!dk_count_allows(d)) return FLUXON_ERR_BUSY;
    if (d->spare_fd < 0) { /* the next file is still being made (or could not be): never made here */
        if (fx_disk_failing(d)) return FLUXON_ERR_UNAVAILABLE;
        d->st.segment_waits++;
        fx_disk_spare_start(d);
        return FLUXON_ERR_BUSY;
    }
    dk_seg_t *s = fx_disk_seg_new(d, d->spare_id, d->spare_fd);
    if (!s) return FLUXON_ERR_NOMEM; /* the spare stays for the next roll */
    s->reuse_bytes = d->spare_reuse_bytes;
    d->st.segments_recycled += s->reuse_bytes > 0;
    d->spare_fd = -1;
    d->spare_reuse_bytes = 0;
    s->state = DK_SEG_OPEN;
    d->open_seg = s;
    fx_disk_spare_start(d); /* the one after it, made while this one fills */
    return FLUXON_OK;
}

FX_INTERNAL void fx_disk_segment_free(fx_disk_t *d, uint64_t seg)
{
    dk_seg_t *s = d->segs;
    while (s && s->id != seg) s = s->next;
    if (!s || s->state != DK_SEG_RETIRING) return; /* only a segment the hook named */
    s->state = DK_SEG_FREED;
    while (s->recs) {
        d->st.records_dropped++;
        fx_disk_rec_drop(d, s->recs);
    }
    fx_disk_retire_mark(d, seg); /* an unlink that fails (or never runs: kill -9) is not a resurrection */
    if (!d->retire_pending) fx_disk_flush(d); /* staged: written now, not within the flush interval */
    fx_disk_seg_maybe_unlink(d, s);
}

/* ---- the index ---- */

static bool dk_newer(const fx_disk_meta_t *a, uint64_t aoff, const fx_disk_meta_t *b, uint64_t boff)
{
    if (a->put_ms != b->put_ms) return a->put_ms > b->put_ms;
    if (a->put_ver != b->put_ver) return a->put_ver > b->put_ver;
    return aoff > boff;
}

/* Out of the by-offset map and its segment's list, freed; the by-key map is the caller's. */
static void dk_rec_counted(fx_disk_t *d, const dk_rec_t *r, bool added)
{
    if (d->hooks.record_counted)
        d->hooks.record_counted(d->hooks.arg, r->off, r->key, r->klen, fx_disk_rec_bytes(r->m.value_len), added);
}

static void dk_rec_unlink(fx_disk_t *d, dk_rec_t *r)
{
    dk_rec_counted(d, r, false);
    fx_u64map_del(&d->by_off, r->off, NULL);
    if (r->prev) r->prev->next = r->next;
    else r->seg->recs = r->next;
    if (r->next) r->next->prev = r->prev;
    r->seg->live--;
    fx_free(r);
}

FX_INTERNAL int fx_disk_index_add(fx_disk_t *d, dk_seg_t *seg, uint64_t byte_off, const char *key, uint32_t klen,
                                  uint64_t h, const fx_disk_meta_t *m, bool newest_wins)
{
    uint64_t off = FX_DISK_OFF_BIT | seg->id << 32 | byte_off / FX_DISK_BLOCK;
    if (!h) h = fx_hmap_hash(key, klen); /* once: the lookup and the put (an append's hot path) */
    /* an append replaces whatever the key had (the put below hands it back): only the
     * rebuild, where an older record may come later, looks first */
    dk_rec_t *old = newest_wins ? fx_hmap_get_h(d->by_key, key, klen, h) : NULL;
    if (old && dk_newer(&old->m, old->off, m, off)) return FLUXON_OK;
    /* an index block naming one place twice (its checksum holds: written so, not damaged):
     * the first entry stays, the read checks whose record is there; a second dk_rec_t at
     * one offset would leave the two indexes disagreeing (one record in by_key only) */
    if (newest_wins && fx_u64map_get(&d->by_off, off)) return FLUXON_OK;
    dk_rec_t *r = fx_malloc(sizeof *r + klen + 1);
    if (!r) return FLUXON_ERR_NOMEM;
    r->key = (char *)(r + 1);
    if (klen) memcpy(r->key, key, klen);
    r->key[klen] = 0;
    r->klen = klen;
    r->off = off;
    r->m = *m;
    r->seg = seg;
    if (fx_u64map_put(&d->by_off, off, r, NULL) != FLUXON_OK) {
        fx_free(r);
        return FLUXON_ERR_NOMEM;
    }
    /* replaces old under the key (the intrusive map then holds r and r's key) */
    void *prev = NULL;
    if (fx_hmap_put_h(d->by_key, r->key, klen, h, r, &prev) != FLUXON_OK) {
        fx_u64map_del(&d->by_off, off, NULL);
        fx_free(r);
        return FLUXON_ERR_NOMEM;
    }
    old = prev;
    if (old) {
        d->st.records_dropped++;
        dk_rec_unlink(d, old);
    }
    r->prev = NULL;
    r->next = seg->recs;
    if (seg->recs) seg->recs->prev = r;
    seg->recs = r;
    seg->live++;
    dk_rec_counted(d, r, true);
    return FLUXON_OK;
}

FX_INTERNAL void fx_disk_rec_drop(fx_disk_t *d, dk_rec_t *r)
{
    fx_hmap_del(d->by_key, r->key, r->klen, NULL);
    dk_rec_unlink(d, r);
}

FX_INTERNAL bool fx_disk_rec_at(fx_disk_t *d, uint64_t off, const char **key, uint32_t *klen, fx_disk_meta_t *m)
{
    const dk_rec_t *r = fx_u64map_get(&d->by_off, off);
    if (!r) return false;
    *key = r->key;
    *klen = r->klen;
    *m = r->m;
    return true;
}

FX_INTERNAL void fx_disk_foreach(fx_disk_t *d, fx_disk_visit_fn cb, void *arg)
{
    size_t it = 0;
    uint64_t k;
    void *v;
    while (fx_u64map_next(&d->by_off, &it, &k, &v)) {
        dk_rec_t *r = v;
        if (!cb(arg, r->off, r->key, r->klen, &r->m)) break;
    }
}

FX_INTERNAL void fx_disk_prefetch_key(fx_disk_t *d, uint64_t khash) { fx_hmap_prefetch(d->by_key, khash); }

FX_INTERNAL int fx_disk_find(fx_disk_t *d, const char *key, uint32_t klen, uint64_t *off, fx_disk_meta_t *m)
{
    return fx_disk_find_h(d, key, klen, 0, off, m);
}

FX_INTERNAL int fx_disk_find_h(fx_disk_t *d, const char *key, uint32_t klen, uint64_t khash, uint64_t *off,
                               fx_disk_meta_t *m)
{
    if (klen > FX_DISK_MAX_KEY) return FLUXON_ERR_NOT_FOUND;
    dk_rec_t *r = fx_hmap_get_h(d->by_key, key, klen, khash ? khash : fx_hmap_hash(key, klen));
    if (!r) return FLUXON_ERR_NOT_FOUND;
    if (off) *off = r->off;
    if (m) *m = r->m;
    return FLUXON_OK;
}

FX_INTERNAL void fx_disk_drop(fx_disk_t *d, uint64_t off)
{
    dk_rec_t *r = fx_u64map_get(&d->by_off, off);
    if (!r) return;
    d->st.records_dropped++;
    fx_disk_rec_drop(d, r);
}

/* ---- open, close, stats ---- */

static void dk_free_all(fx_disk_t *d)
{
    fx_timer_disarm(d->r, &d->flush_timer);
    size_t it = 0;
    uint64_t k;
    void *v;
    while (fx_u64map_next(&d->by_off, &it, &k, &v)) fx_free(v);
    fx_u64map_free(&d->by_off);
    fx_hmap_destroy(d->by_key);
    fx_disk_tombs_free(&d->rb_tombs);
    while (d->segs) {
        dk_seg_t *s = d->segs;
        d->segs = s->next;
        if (s->fd >= 0) close(s->fd);
        fx_free(s->seal_buf);
        fx_disk_tombs_free(&s->tombs);
        fx_free(s);
    }
    if (d->spare_fd >= 0) close(d->spare_fd); /* only after a failed open: close dropped it */
    for (uint32_t i = 0; d->bufs && i < d->cfg.write_buffers; i++) {
        fx_disk_waiters_done(&d->bufs[i], FLUXON_ERR_CANCELLED); /* none after a clean close */
        fx_free(d->bufs[i].mem);
        fx_free(d->bufs[i].dirty);
    }
    fx_free(d->bufs);
    fx_free(d->gap_buf);
    if (d->contact_fd >= 0) close(d->contact_fd);
    if (d->lock_fd >= 0) close(d->lock_fd); /* releases the flock */
    fx_free(d->path);
    fx_free(d->owner_id);
    fx_free(d);
}

FX_INTERNAL int fx_disk_open(fx_reactor_t *r, const fx_disk_cfg_t *cfg, const fx_disk_hooks_t *hooks, fx_disk_t **d_p,
                             char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen) err = scratch, errlen = sizeof scratch;
    err[0] = 0;
    if (!r || !cfg || !d_p) {
        snprintf(err, errlen, "disk: fx_disk_open needs a reactor, a cfg and d_p");
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    fx_disk_cfg_t c;
    int rc = dk_check_cfg(cfg, &c, err, errlen);
    if (rc != FLUXON_OK) return rc;
    fx_disk_t *d = fx_calloc(1, sizeof *d);
    if (!d) return FLUXON_ERR_NOMEM;
    d->r = r;
    d->cfg = c;
    d->lock_fd = -1;
    d->spare_fd = -1;
    d->contact_fd = -1;
    d->path = fx_strdup(c.path);
    d->owner_id = fx_strdup(c.owner_id);
    d->cfg.path = d->path;
    d->cfg.owner_id = d->owner_id;
    if (hooks) d->hooks = *hooks;
    d->max_segs = c.capacity_bytes / c.segment_bytes;
    fx_timer_init(&d->flush_timer);
    d->bufs = fx_calloc(c.write_buffers, sizeof *d->bufs);
    if (!d->path || !d->owner_id || !d->bufs ||
        fx_hmap_create_intrusive(0, offsetof(dk_rec_t, key), offsetof(dk_rec_t, klen), &d->by_key) != FLUXON_OK) {
        dk_free_all(d);
        snprintf(err, errlen, "disk: out of memory");
        return FLUXON_ERR_NOMEM;
    }
    d->gap_buf = fx_disk_aligned(DK_RGROUP_GAP); /* none: records apart get reads of their own */
    for (uint32_t i = 0; i < c.write_buffers; i++) { /* made and touched now: their first fill
                                                       * faults no page in under an eviction */
        d->bufs[i].d = d;
        if ((d->bufs[i].mem = fx_disk_aligned(c.buffer_bytes))) {
            memset(d->bufs[i].mem, 0, c.buffer_bytes);
            d->bufs[i].cap = c.buffer_bytes;
            d->bufs[i].dirty = fx_disk_dirty_new(c.buffer_bytes, 0);
        }
    }
    struct stat sb;
    if (dk_mkdirs(d->path) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "disk.path %s: cannot make it: %s", d->path, strerror(errno));
        rc = FLUXON_ERR_UNAVAILABLE;
    } else if (stat(d->path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "disk.path %s: not a directory", d->path);
        rc = FLUXON_ERR_UNAVAILABLE;
    } else if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
        FX_WARN("disk.path %s is writable by other users (mode %04o): they could plant or change its files; "
                "0700 is safe (a directory this owner makes is)", d->path, (unsigned)(sb.st_mode & 07777));
    }
    struct statvfs vfs;
    if (rc == FLUXON_OK && statvfs(d->path, &vfs) == 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < c.capacity_bytes) /* it may be freed later: a warning */
        FX_WARN("disk.capacity_bytes %" PRIu64 " is more than the %" PRIu64 " bytes free on %s now: when the file system "
                "fills, the oldest segments give up their room (ENOSPC)", c.capacity_bytes,
                (uint64_t)vfs.f_bavail * vfs.f_frsize, d->path);
    if (rc == FLUXON_OK) rc = dk_lock(d, err, errlen);
    if (rc == FLUXON_OK) fx_disk_contact_open(d);
    if (rc == FLUXON_OK) rc = dk_probe_direct(d, err, errlen);
    if (rc == FLUXON_OK) rc = fx_disk_rebuild(d, err, errlen);
    if (rc == FLUXON_OK) fx_disk_spare_make_sync(d); /* the first segment file, made ahead */
    for (dk_seg_t *s = d->segs, *nx; rc == FLUXON_OK && s; s = nx) { /* retired before, file left: it goes */
        nx = s->next;
        if (s->state == DK_SEG_FREED) fx_disk_seg_maybe_unlink(d, s);
    }
    if (rc != FLUXON_OK) {
        dk_free_all(d);
        return rc;
    }
    FX_INFO("disk: %s open (owner %s, %s I/O, %" PRIu64 " MiB capacity in segments of %" PRIu64 " MiB)", d->path,
            d->owner_id, d->direct ? "direct" : "buffered", c.capacity_bytes >> 20, c.segment_bytes >> 20);
    *d_p = d;
    return FLUXON_OK;
}

FX_INTERNAL void fx_disk_close(fx_disk_t *d, uint32_t timeout_ms)
{
    if (!d) return;
    fx_disk_flush(d);
    d->shutting = true; /* a spare still being made is unlinked when it is */
    fx_disk_spare_drop(d);
    dk_seg_t *o = d->open_seg;
    if (o) {
        o->state = DK_SEG_CLOSED;
        d->open_seg = NULL;
        if (o->data_end) fx_disk_seal(d, o);
    }
    uint64_t end = fx_now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (uint32_t i = 0; d->ops && i < 1000000u; i++) {
        uint64_t now = fx_now_ns();
        if (now >= end) break;
        fx_reactor_poll(d->r, (uint32_t)FX_MIN((end - now) / 1000000u + 1, 50u));
    }
    if (d->ops) { /* the kernel may still write from our buffers: they stay (leaked) */
        FX_WARN("disk: %s: %" PRIu64 " I/O operations still in flight after %u ms: the store is left allocated",
                d->path, d->ops, timeout_ms);
        d->closing = true;
        fx_timer_disarm(d->r, &d->flush_timer);
        return;
    }
    dk_free_all(d);
}

FX_INTERNAL uint64_t fx_disk_records(const fx_disk_t *d) { return fx_hmap_count(d->by_key); }

FX_INTERNAL bool fx_disk_writes_paused(const fx_disk_t *d)
{
    return d->failed && fx_now_ms() - d->failed_ms < d->fail_backoff_ms;
}

FX_INTERNAL void fx_disk_stats(const fx_disk_t *d, fx_disk_stats_t *s)
{
    *s = d->st;
    s->capacity_bytes = d->cfg.capacity_bytes;
    s->records = fx_hmap_count(d->by_key);
    s->used_bytes = s->segments = s->segments_retiring = 0;
    for (const dk_seg_t *g = d->segs; g; g = g->next) {
        s->segments++;
        s->used_bytes += g->state == DK_SEG_OPEN || !g->file_bytes ? g->data_end : g->file_bytes;
        if (g->state == DK_SEG_RETIRING || g->state == DK_SEG_FREED) s->segments_retiring++;
    }
    s->direct_io = d->direct;
    s->writes_failing = fx_disk_writes_paused(d);
}
