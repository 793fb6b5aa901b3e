/* disk_tomb.c — what keeps a dead record dead across a reopen (issue 44 W6 on the disk
 * tier): tombstones (a key's versions up to one are dead: an INVALIDATE for a DELETE or a
 * newer version elsewhere) and barriers (everything before is dead: the master forgot this
 * owner), staged as 4 KiB records and listed in their segment's index block; the rebuild
 * applies them once every segment is read. Also the write waiters (fx_disk_when_written):
 * an owner answers an INVALIDATE only once its tombstone is on the file.
 *
 * Why this is enough: segments retire oldest first, so a tombstone's segment outlives every
 * segment holding a record it names; a tombstone kills only versions up to its own written
 * before it, so a newer version of the key (or the same version written again later) stays. */
#include "disk_int.h"

#include <inttypes.h>

#include "log.h"

FX_INTERNAL void fx_disk_tombs_free(dk_tomb_t **list)
{
    while (*list) {
        dk_tomb_t *t = *list;
        *list = t->next;
        fx_free(t);
    }
}

FX_INTERNAL int fx_disk_kill(fx_disk_t *d, uint64_t off)
{
    dk_rec_t *r = fx_u64map_get(&d->by_off, off);
    if (!r) return FLUXON_ERR_NOT_FOUND;
    fx_disk_meta_t m = r->m;
    m.value_len = 0;
    /* the staging may roll and retire r's segment, freeing r at once (no hook, or one that
     * frees inside it): the key is copied first and r looked up again after */
    char key[FX_DISK_MAX_KEY];
    uint32_t klen = r->klen;
    memcpy(key, r->key, klen);
    int rc = fx_disk_stage(d, key, klen, 0, NULL, &m, FX_DISK_REC_TOMB, NULL);
    if (rc == FLUXON_OK) d->st.tombstones++;
    else d->st.tomb_failures++;
    if (rc != FLUXON_OK && (d->st.tomb_failures == 1 || d->st.tomb_failures % 1000 == 0)) /* not one line a key:
                                                               * a disk that is behind fails them by the thousand */
        FX_WARN("disk: no tombstone for %.*s (%s): the record leaves the index, but a restart before its segment "
                "retires may find it again (%llu so far, counted disk_tomb_failures)", (int)FX_MIN(klen, 64u),
                key, fluxon_status_string(rc), (unsigned long long)d->st.tomb_failures);
    if ((r = fx_u64map_get(&d->by_off, off))) {
        d->st.records_dropped++;
        fx_disk_rec_drop(d, r);
    }
    return rc;
}

FX_INTERNAL int fx_disk_barrier(fx_disk_t *d)
{
    fx_disk_meta_t m = {0};
    int rc = fx_disk_stage(d, NULL, 0, 0, NULL, &m, FX_DISK_REC_BARRIER, NULL);
    if (rc == FLUXON_OK) d->st.barriers++;
    else d->st.tomb_failures++;
    uint64_t n = 0;
    for (dk_seg_t *s = d->segs; s; s = s->next)
        while (s->recs) {
            fx_disk_rec_drop(d, s->recs);
            n++;
        }
    d->st.records_dropped += n;
    FX_WARN("disk: %" PRIu64 " records dropped%s", n,
            rc == FLUXON_OK ? " (a barrier keeps them dropped after a restart)"
                            : ": no barrier could be staged, a restart may find them again");
    return rc;
}

/* ---- retirement marks ---- */

static void dk_retire_mark_stage(fx_disk_t *d)
{
    uint64_t upto = d->retire_pending; /* 1 + the highest retired id */
    fx_disk_meta_t m = {.put_ms = upto - 1};
    d->retire_pending = 0;
    int rc = fx_disk_stage(d, NULL, 0, 0, NULL, &m, FX_DISK_REC_RETIRED, NULL);
    if (rc == FLUXON_OK) {
        d->st.retire_marks++;
        return;
    }
    if (!d->retire_pending) d->retire_pending = upto; /* tried again at the next staging */
}

FX_INTERNAL void fx_disk_retire_mark(fx_disk_t *d, uint64_t seg)
{
    d->retire_pending = FX_MAX(d->retire_pending, seg + 1);
    if (!d->in_roll && !d->closing) dk_retire_mark_stage(d);
}

FX_INTERNAL void fx_disk_retire_mark_flush(fx_disk_t *d)
{
    if (d->retire_pending && !d->in_roll) dk_retire_mark_stage(d);
}

/* ---- write waiters ---- */

FX_INTERNAL void fx_disk_waiters_done(dk_buf_t *b, int status)
{
    while (b->waiters) {
        dk_wlink_t *l = b->waiters;
        b->waiters = l->next;
        dk_wait_t *w = l->w;
        fx_free(l);
        if (status != FLUXON_OK && w->status == FLUXON_OK) w->status = status;
        if (--w->left) continue;
        w->cb(w->arg, w->status);
        fx_free(w);
    }
}

FX_INTERNAL bool fx_disk_when_written(fx_disk_t *d, fx_disk_written_fn cb, void *arg, bool *nomem)
{
    *nomem = false;
    if (d->cur) fx_disk_buf_submit(d, d->cur); /* now, not after FX_DISK_FLUSH_MS */
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->cfg.write_buffers; i++) n += d->bufs[i].state == DK_BUF_WRITE;
    if (!n) return false;
    dk_wait_t *w = fx_malloc(sizeof *w);
    dk_wlink_t **links = fx_calloc(n, sizeof *links);
    for (uint32_t i = 0; w && links && i < n; i++)
        if (!(links[i] = fx_malloc(sizeof **links))) break;
    bool ok = w && links && links[n - 1];
    if (!ok) {
        for (uint32_t i = 0; links && i < n; i++) fx_free(links[i]);
        fx_free(links);
        fx_free(w);
        *nomem = true;
        return false;
    }
    *w = (dk_wait_t){cb, arg, n, FLUXON_OK};
    uint32_t k = 0;
    for (uint32_t i = 0; i < d->cfg.write_buffers; i++) {
        dk_buf_t *b = &d->bufs[i];
        if (b->state != DK_BUF_WRITE) continue;
        links[k]->w = w;
        links[k]->next = b->waiters;
        b->waiters = links[k++];
    }
    fx_free(links);
    return true;
}

/* ---- the rebuild ---- */

FX_INTERNAL bool fx_disk_rb_mark(fx_disk_t *d, uint64_t seg_id, uint64_t byte_off, const char *key, uint32_t klen,
                                 const fx_disk_meta_t *m, uint32_t flags)
{
    if (flags & FX_DISK_REC_RETIRED) {
        d->rb_retired = FX_MAX(d->rb_retired, m->put_ms + 1);
        return true;
    }
    if (flags & FX_DISK_REC_BARRIER) {
        if (!d->rb_barrier || seg_id > d->rb_barrier_seg ||
            (seg_id == d->rb_barrier_seg && byte_off > d->rb_barrier_off)) {
            d->rb_barrier = true;
            d->rb_barrier_seg = seg_id;
            d->rb_barrier_off = byte_off;
        }
        return true;
    }
    dk_tomb_t *t = fx_malloc(sizeof *t + klen + 1);
    if (!t) return false;
    *t = (dk_tomb_t){d->rb_tombs, seg_id, byte_off, *m, klen, flags};
    if (klen) memcpy(t->key, key, klen);
    d->rb_tombs = t;
    return true;
}

/* rec (seg, byte_off) was written before (tseg, toff) */
static bool dk_before(uint64_t seg, uint64_t off, uint64_t tseg, uint64_t toff)
{
    return seg < tseg || (seg == tseg && off < toff);
}

FX_INTERNAL void fx_disk_rb_apply(fx_disk_t *d)
{
    uint64_t killed = 0;
    for (dk_seg_t *s = d->segs; s && d->rb_retired; s = s->next) { /* retired, its file still there */
        if (s->id >= d->rb_retired || s->state == DK_SEG_FREED) continue;
        FX_WARN("disk: segment %" PRIu64 " retired before the restart but its file is still there: its %u records "
                "are not read; the file goes now", s->id, s->live);
        while (s->recs) {
            fx_disk_rec_drop(d, s->recs);
            killed++;
        }
        s->state = DK_SEG_FREED; /* unlinked once the reactor runs (fx_disk_seg_maybe_unlink at open) */
        d->st.recovered_retired++;
    }
    if (d->rb_barrier)
        for (dk_seg_t *s = d->segs; s; s = s->next)
            for (dk_rec_t *r = s->recs, *nx; r; r = nx) {
                nx = r->next;
                if (!dk_before(s->id, (r->off & 0xffffffffull) * FX_DISK_BLOCK, d->rb_barrier_seg, d->rb_barrier_off))
                    continue;
                fx_disk_rec_drop(d, r);
                killed++;
            }
    for (dk_tomb_t *t = d->rb_tombs; t; t = t->next) {
        dk_rec_t *r = fx_hmap_get(d->by_key, t->key, t->klen);
        if (!r || !dk_before(r->seg->id, (r->off & 0xffffffffull) * FX_DISK_BLOCK, t->seg_id, t->byte_off)) continue;
        bool newer = r->m.put_ms != t->m.put_ms ? r->m.put_ms > t->m.put_ms : r->m.put_ver > t->m.put_ver;
        if (newer) continue; /* a newer version of the key, written before the tombstone of an older one */
        fx_disk_rec_drop(d, r);
        killed++;
    }
    fx_disk_tombs_free(&d->rb_tombs);
    d->rb_barrier = false;
    d->st.recovered_killed += killed;
    if (killed) FX_INFO("disk: %s: %" PRIu64 " records dropped for their tombstones or a barrier", d->path, killed);
}
