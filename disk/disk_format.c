/* disk_format.c — the disk store's byte layout (records, index blocks; docs/disk.md) and the
 * rebuild of the index from the segment files when a store opens (plain pread: it runs
 * before the reactor loop). */
#include "disk_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack: the streaming checksum */
#include <xxhash.h>
#include <xxh_x86dispatch.h> /* XXH3 with AVX2 / AVX-512 where the CPU has them (the shared libxxhash) */

#include "log.h"
#include "stream_copy.h" /* a staging buffer is next read by the device (O_DIRECT) or the kernel */

FX_INTERNAL uint64_t fx_disk_rec_bytes(uint64_t value_len)
{
    return FX_DISK_BLOCK + FX_ALIGN_UP(value_len, (uint64_t)FX_DISK_BLOCK);
}

FX_INTERNAL uint64_t fx_disk_ient_bytes(uint32_t klen) { return FX_ALIGN_UP(FX_DISK_IDX_ENTRY + (uint64_t)klen, 8u); }

FX_INTERNAL void fx_disk_seg_path(const fx_disk_t *d, uint64_t id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/fxd-%s-%016" PRIx64 ".seg", d->path, d->owner_id, id);
}

FX_INTERNAL uint64_t fx_disk_rec_sum(const fx_disk_hdr_t *h, const char *key, const void *value)
{
    fx_disk_hdr_t c = *h;
    c.checksum = 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &c, sizeof c);
    XXH3_64bits_update(&st, key, h->key_len);
    XXH3_64bits_update(&st, value, h->value_len);
    return XXH3_64bits_digest(&st);
}


/* The staging buffer gets the header block (header, key, zeros to 4 KiB) and the value with
 * its padding, through streaming stores; the checksum is taken over header + key and the
 * value at its source (the slot, which the copy then reads from the cache). Same bytes. */
FX_INTERNAL void fx_disk_rec_encode(char *p, uint16_t *dirty, uint64_t seg_id, uint64_t byte_off, const char *key,
                                    uint32_t klen, const void *value, const fx_disk_meta_t *m, uint16_t flags)
{
    fx_disk_hdr_t h = {
        .magic = FX_DISK_REC_MAGIC, .version = FX_DISK_VERSION, .flags = flags, .key_len = klen,
        .group_size = m->group_size, .group_idx = m->group_idx, .blk = (uint32_t)(byte_off / FX_DISK_BLOCK),
        .value_len = m->value_len, .put_ms = m->put_ms, .put_ver = m->put_ver, .seg_id = seg_id,
    };
    h.checksum = fx_disk_rec_sum(&h, key, value);
    /* header + key assembled here (at most 64 + FX_DISK_MAX_KEY bytes, rounded up to 64),
     * then streamed with the zeros after them: whole 64-byte lines */
    _Alignas(64) char head[FX_DISK_HDR_BYTES + FX_DISK_MAX_KEY + 64];
    size_t hk = FX_ALIGN_UP((size_t)FX_DISK_HDR_BYTES + klen, (size_t)64);
    memcpy(head, &h, sizeof h);
    if (klen) memcpy(head + FX_DISK_HDR_BYTES, key, klen);
    memset(head + FX_DISK_HDR_BYTES + klen, 0, hk - FX_DISK_HDR_BYTES - klen);
    fx_stream_copy(p, head, hk);
    /* the zeros after header + key: only over what an earlier record left in this block (a
     * staging buffer's blocks take records of one size again and again, the header blocks
     * then land where header blocks were: 4 KiB of zeros a record was ~2.5 us a request of
     * the trace replay's disk tier, one CPU) */
    size_t was = dirty ? dirty[0] : FX_DISK_BLOCK;
    if (was > hk) fx_stream_zero(p + hk, was - hk);
    if (m->value_len) fx_stream_copy(p + FX_DISK_BLOCK, value, m->value_len);
    uint64_t pad = FX_ALIGN_UP(m->value_len, (uint64_t)FX_DISK_BLOCK) - m->value_len;
    if (pad) memset(p + FX_DISK_BLOCK + m->value_len, 0, pad);
    fx_stream_fence();
    if (dirty) {
        dirty[0] = (uint16_t)hk;
        for (uint64_t b = 1; b <= FX_ALIGN_UP(m->value_len, (uint64_t)FX_DISK_BLOCK) / FX_DISK_BLOCK; b++)
            dirty[b] = FX_DISK_BLOCK; /* whole blocks of value and zeros */
    }
}

FX_INTERNAL const char *fx_disk_rec_check(const char *p, size_t len, uint64_t seg_id, uint64_t byte_off,
                                          const char *key, uint32_t klen)
{
    if (len < FX_DISK_BLOCK) return "short record";
    fx_disk_hdr_t h;
    memcpy(&h, p, sizeof h);
    if (h.magic != FX_DISK_REC_MAGIC) return "bad magic";
    if (h.version != FX_DISK_VERSION) return "unknown version";
    if (h.seg_id != seg_id || (uint64_t)h.blk * FX_DISK_BLOCK != byte_off) return "record of another place";
    if (h.key_len > FX_DISK_MAX_KEY) return "key length out of range";
    if (fx_disk_rec_bytes(h.value_len) > len || h.value_len > (1ull << 40)) return "value length out of range";
    if (key && (h.key_len != klen || memcmp(p + FX_DISK_HDR_BYTES, key, klen) != 0)) return "another key";
    if (fx_disk_rec_sum(&h, p + FX_DISK_HDR_BYTES, p + FX_DISK_BLOCK) != h.checksum) return "checksum mismatch";
    return NULL;
}

FX_INTERNAL uint64_t fx_disk_index_sum(const char *entries, uint64_t entry_bytes, const fx_disk_foot_t *f)
{
    fx_disk_foot_t c = *f;
    c.checksum = 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, entries, entry_bytes);
    XXH3_64bits_update(&st, &c, sizeof c);
    return XXH3_64bits_digest(&st);
}

FX_INTERNAL char *fx_disk_index_encode(const dk_seg_t *seg, size_t *len_p)
{
    uint64_t eb = 0;
    uint32_t n = 0;
    for (const dk_rec_t *r = seg->recs; r; r = r->next) {
        eb += fx_disk_ient_bytes(r->klen);
        n++;
    }
    for (const dk_tomb_t *t = seg->tombs; t; t = t->next) {
        eb += fx_disk_ient_bytes(t->klen);
        n++;
    }
    size_t len = FX_ALIGN_UP(eb, (uint64_t)FX_DISK_BLOCK) + FX_DISK_BLOCK;
    char *p = fx_disk_aligned(len);
    if (!p) return NULL;
    memset(p, 0, len);
    char *q = p;
    for (const dk_rec_t *r = seg->recs; r; r = r->next) {
        fx_disk_ient_t e = {
            .offset = (r->off & 0xffffffffull) * FX_DISK_BLOCK, .value_len = r->m.value_len, .put_ms = r->m.put_ms,
            .put_ver = r->m.put_ver, .group_size = r->m.group_size, .group_idx = r->m.group_idx, .key_len = r->klen,
        };
        memcpy(q, &e, sizeof e);
        if (r->klen) memcpy(q + sizeof e, r->key, r->klen);
        q += fx_disk_ient_bytes(r->klen);
    }
    for (const dk_tomb_t *t = seg->tombs; t; t = t->next) { /* tombstones and barriers: value_len 0 */
        fx_disk_ient_t e = {.offset = t->byte_off, .put_ms = t->m.put_ms, .put_ver = t->m.put_ver,
                            .key_len = t->klen, .flags = t->flags};
        memcpy(q, &e, sizeof e);
        if (t->klen) memcpy(q + sizeof e, t->key, t->klen);
        q += fx_disk_ient_bytes(t->klen);
    }
    fx_disk_foot_t f = {.magic = FX_DISK_IDX_MAGIC, .version = FX_DISK_VERSION, .count = n, .seg_id = seg->id,
                        .data_end = seg->data_end, .entry_bytes = eb};
    f.checksum = fx_disk_index_sum(p, eb, &f);
    memcpy(p + len - FX_DISK_BLOCK, &f, sizeof f);
    *len_p = len;
    return p;
}

/* ---- the rebuild ---- */

static bool dk_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += (size_t)n;
    }
    return true;
}

/* The index block of a sealed segment: true when its footer and entries check out (the
 * records are then indexed; each is verified when read). *had_footer: a footer magic was
 * there (a failed index block is then a checksum failure). */
static bool dk_load_index(fx_disk_t *d, dk_seg_t *seg, int fd, uint64_t size, bool *had_footer, bool *earlier)
{
    *had_footer = *earlier = false;
    if (size < FX_DISK_BLOCK || size % FX_DISK_BLOCK) return false;
    fx_disk_foot_t f;
    if (!dk_pread_all(fd, &f, sizeof f, size - FX_DISK_BLOCK) || f.magic != FX_DISK_IDX_MAGIC) return false;
    /* an earlier segment's footer: the file was recycled (disk_fs.c) and this segment is
     * not sealed yet; its records are scanned, nothing failed */
    if (f.version == FX_DISK_VERSION && f.seg_id < seg->id) {
        *earlier = true;
        return false;
    }
    *had_footer = true;
    /* the index block right after the records, the footer after it or, in a recycled file
     * longer than the segment, in the file's last block */
    if (f.version != FX_DISK_VERSION || f.seg_id != seg->id || f.data_end % FX_DISK_BLOCK ||
        f.entry_bytes > size || f.data_end + FX_ALIGN_UP(f.entry_bytes, (uint64_t)FX_DISK_BLOCK) + FX_DISK_BLOCK > size)
        return false;
    char *e = fx_malloc(f.entry_bytes ? f.entry_bytes : 1);
    if (!e) return false;
    bool ok = dk_pread_all(fd, e, f.entry_bytes, f.data_end) && fx_disk_index_sum(e, f.entry_bytes, &f) == f.checksum;
    /* entries are checked whole before any is indexed */
    uint64_t at = 0;
    for (uint32_t i = 0; ok && i < f.count; i++) {
        fx_disk_ient_t en;
        if (at + sizeof en > f.entry_bytes) { ok = false; break; }
        memcpy(&en, e + at, sizeof en);
        if (en.key_len > FX_DISK_MAX_KEY || at + fx_disk_ient_bytes(en.key_len) > f.entry_bytes ||
            en.offset % FX_DISK_BLOCK || en.value_len > f.data_end ||
            en.offset + fx_disk_rec_bytes(en.value_len) > f.data_end)
            ok = false;
        at += fx_disk_ient_bytes(en.key_len);
    }
    at = 0;
    for (uint32_t i = 0; ok && i < f.count; i++) {
        fx_disk_ient_t en;
        memcpy(&en, e + at, sizeof en);
        fx_disk_meta_t m = {.value_len = en.value_len, .put_ms = en.put_ms, .put_ver = en.put_ver,
                            .group_size = en.group_size, .group_idx = en.group_idx};
        if (en.flags ? !fx_disk_rb_mark(d, seg->id, en.offset, e + at + sizeof en, en.key_len, &m, en.flags)
                     : fx_disk_index_add(d, seg, en.offset, e + at + sizeof en, en.key_len, 0, &m, true) != FLUXON_OK)
            ok = false;
        at += fx_disk_ient_bytes(en.key_len);
    }
    fx_free(e);
    if (ok) {
        seg->data_end = f.data_end;
        seg->sealed = true;
    }
    return ok;
}

#define DK_SCAN_BAD_LOG 16u /* bad records logged one by one per store rebuild; then one line a segment */

/* A segment without a good index block: record by record. A record whose header is sane
 * (magic, version, its own segment and place, lengths within the file) but whose checksum
 * fails is skipped and counted; the first record with a broken header ends the scan (the
 * torn tail). */
static void dk_scan(fx_disk_t *d, dk_seg_t *seg, int fd, uint64_t size, const char *path, bool recycled)
{
    uint64_t off = 0;
    char *buf = NULL;
    size_t cap = 0;
    const char *why = NULL;
    bool earlier = false, io_stop = false; /* an earlier segment's header ended it; a read or memory failure did */
    uint64_t unlogged = 0; /* bad records past DK_SCAN_BAD_LOG: one line for them */
    while (off + FX_DISK_BLOCK <= size) {
        fx_disk_hdr_t h;
        if (!dk_pread_all(fd, &h, sizeof h, off)) { why = "read failed"; io_stop = true; break; }
        if (h.magic == FX_DISK_REC_MAGIC && h.version == FX_DISK_VERSION && h.seg_id < seg->id) {
            earlier = true; /* an earlier segment's record: this file's earlier life, past this one's end */
            break;
        }
        if (h.magic != FX_DISK_REC_MAGIC || h.version != FX_DISK_VERSION || h.seg_id != seg->id ||
            (uint64_t)h.blk * FX_DISK_BLOCK != off || h.key_len > FX_DISK_MAX_KEY || h.value_len > size ||
            off + fx_disk_rec_bytes(h.value_len) > size) {
            why = h.magic == 0 ? "zero block" : "broken header";
            break;
        }
        uint64_t rb = fx_disk_rec_bytes(h.value_len);
        if (rb > cap) {
            fx_free(buf);
            cap = rb;
            buf = fx_malloc(cap);
            if (!buf) { why = "out of memory"; io_stop = true; cap = 0; break; }
        }
        if (!dk_pread_all(fd, buf, rb, off)) { why = "read failed"; io_stop = true; break; }
        const char *bad = fx_disk_rec_check(buf, rb, seg->id, off, NULL, 0);
        if (bad) {
            d->st.crc_failures++;
            if (d->scan_bad_logged < DK_SCAN_BAD_LOG) { /* a damaged disk can have millions: the first ones */
                d->scan_bad_logged++;
                FX_WARN("disk: %s at byte %" PRIu64 ": %s; the record is skipped", path, off, bad);
            } else {
                unlogged++;
            }
        } else {
            fx_disk_meta_t m = {.value_len = h.value_len, .put_ms = h.put_ms, .put_ver = h.put_ver,
                                .group_size = h.group_size, .group_idx = h.group_idx};
            if (h.flags ? !fx_disk_rb_mark(d, seg->id, off, buf + FX_DISK_HDR_BYTES, h.key_len, &m, h.flags)
                        : fx_disk_index_add(d, seg, off, buf + FX_DISK_HDR_BYTES, h.key_len, 0, &m, true) != FLUXON_OK) {
                why = "out of memory";
                io_stop = true;
                break;
            }
        }
        off += rb;
    }
    fx_free(buf);
    if (unlogged)
        FX_WARN("disk: %s: %" PRIu64 " more records fail their checks and are skipped (the first %u of this store "
                "were logged one by one)", path, unlogged, DK_SCAN_BAD_LOG);
    seg->data_end = off;
    /* in a recycled file (its last block an earlier segment's footer) the scan ends where the
     * earlier life's bytes begin, on one of its headers or not */
    if (off < size && (earlier || (recycled && !io_stop))) {
        if (!off) return; /* nothing of this segment: the caller frees it */
        d->st.recovered_recycled++;
        FX_INFO("disk: %s: the records end at byte %" PRIu64 " of %" PRIu64 ", where the file's earlier life "
                "(a freed segment's, recycled) goes on", path, off, size);
    } else if (off < size) {
        d->st.recovered_torn++;
        FX_WARN("disk: %s: the records end at byte %" PRIu64 " of %" PRIu64 " (%s): a torn tail, the rest is ignored",
                path, off, size, why ? why : "short");
    }
}

/* "fxd-<owner>-<16 hex>.seg": true and *id for this owner's; *foreign for another's. */
static bool dk_parse_name(const fx_disk_t *d, const char *name, uint64_t *id, bool *foreign)
{
    *foreign = false;
    size_t n = strlen(name), ol = strlen(d->owner_id);
    if (n < 4 + 1 + 16 + 4 || strncmp(name, "fxd-", 4) || strcmp(name + n - 4, ".seg")) return false;
    const char *hex = name + n - 4 - 16;
    if (hex[-1] != '-') return false;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = hex[i];
        int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (x < 0) return false;
        v = v << 4 | (uint64_t)x;
    }
    if ((size_t)(hex - 1 - (name + 4)) != ol || strncmp(name + 4, d->owner_id, ol)) {
        *foreign = true;
        return false;
    }
    *id = v;
    return true;
}

static int dk_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

FX_INTERNAL int fx_disk_rebuild(fx_disk_t *d, char *err, size_t errlen)
{
    uint64_t t0 = fx_now_ns();
    DIR *dir = opendir(d->path);
    if (!dir) {
        snprintf(err, errlen, "disk.path %s: cannot list it: %s", d->path, strerror(errno));
        return FLUXON_ERR_UNAVAILABLE;
    }
    uint64_t *ids = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        uint64_t id;
        bool foreign;
        if (!dk_parse_name(d, de->d_name, &id, &foreign)) {
            if (foreign) FX_WARN("disk: %s/%s belongs to another owner id: ignored", d->path, de->d_name);
            continue;
        }
        if (id >= (1ull << 31)) {
            FX_WARN("disk: %s/%s: segment id out of range: ignored", d->path, de->d_name);
            continue;
        }
        if (de->d_type != DT_REG && de->d_type != DT_UNKNOWN) { /* a directory or a link named like one */
            FX_WARN("disk: %s/%s is not a regular file: ignored (its id is not reused)", d->path, de->d_name);
            d->next_seg_id = FX_MAX(d->next_seg_id, id + 1);
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            uint64_t *nids = fx_realloc(ids, cap * sizeof *ids);
            if (!nids) { closedir(dir); fx_free(ids); snprintf(err, errlen, "disk: out of memory"); return FLUXON_ERR_NOMEM; }
            ids = nids;
        }
        ids[n++] = id;
    }
    closedir(dir);
    if (n) qsort(ids, n, sizeof *ids, dk_cmp_u64);
    int rc = FLUXON_OK;
    for (size_t i = 0; i < n && rc == FLUXON_OK; i++) {
        char path[4096];
        fx_disk_seg_path(d, ids[i], path, sizeof path);
        d->next_seg_id = FX_MAX(d->next_seg_id, ids[i] + 1);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0) {
            snprintf(err, errlen, "disk.path %.200s: cannot read segment %016llx: %s", d->path,
                     (unsigned long long)ids[i], strerror(errno));
            if (fd >= 0) close(fd);
            rc = FLUXON_ERR_UNAVAILABLE;
            break;
        }
        uint64_t size = (uint64_t)sb.st_size;
        if (size == 0) { /* made, never written: nothing to keep */
            close(fd);
            unlink(path);
            continue;
        }
        int iofd = fx_disk_seg_open_fd(d, path, O_RDONLY, err, errlen);
        if (iofd < 0) {
            close(fd);
            rc = FLUXON_ERR_UNAVAILABLE;
            break;
        }
        dk_seg_t *seg = fx_disk_seg_new(d, ids[i], iofd);
        if (!seg) {
            close(fd);
            close(iofd);
            snprintf(err, errlen, "disk: out of memory");
            rc = FLUXON_ERR_NOMEM;
            break;
        }
        seg->file_bytes = size;
        bool had_footer, earlier;
        if (!dk_load_index(d, seg, fd, size, &had_footer, &earlier)) {
            if (had_footer) {
                d->st.crc_failures++;
                FX_WARN("disk: %s: the index block (last 4 KiB at byte %" PRIu64 ") fails its checks: scanning the records",
                        path, size - FX_DISK_BLOCK);
            }
            /* the records an index block added before failing stay out: none (checked whole) */
            dk_scan(d, seg, fd, size, path, earlier);
            /* a recycled file renamed as the next segment and never written (the spare at a
             * crash): nothing of this segment, freed (reused or removed once the loop runs) */
            if (!seg->data_end && !seg->live) seg->state = DK_SEG_FREED;
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
        d->st.recovered_segments++;
    }
    fx_free(ids);
    fx_disk_rb_apply(d); /* tombstones and barriers: after every record is known */
    d->st.recovered_records = fx_hmap_count(d->by_key);
    d->st.recover_ms = (fx_now_ns() - t0) / 1000000u;
    if (rc == FLUXON_OK && n)
        fx_log(d->st.crc_failures ? FX_LOG_WARN : FX_LOG_INFO,
               "disk: %s: %" PRIu64 " records in %" PRIu64 " segments re-indexed in %" PRIu64 " ms (%" PRIu64
                " torn tails, %" PRIu64 " checksum failures)",
                d->path, d->st.recovered_records, d->st.recovered_segments, d->st.recover_ms, d->st.recovered_torn,
                d->st.crc_failures);
    return rc;
}
