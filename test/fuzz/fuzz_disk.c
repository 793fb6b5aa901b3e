/* fuzz_disk.c — the disk tier's store (disk/, issue 39) opened on a damaged directory: its
 * segment files cross a trust boundary (a crash, a torn write, bit rot, an operator's
 * mistake) and the promise is that a damaged record is a miss, never wrong bytes, never a
 * crash. Once per process the store itself writes a template directory (segment_bytes
 * 1 MiB, 4 lives, closed in between):
 *   seg 0  a0, a1, dup@10 (sealed; retired by life C, its file kept as if its unlink failed)
 *   seg 1  a barrier, b0 (empty value), b1, b2, dup@20, a tombstone of b1 (sealed)
 *   seg 2  c0@30, the retirement mark "up to 0", c1 (group 2/1), dup@30, c2 (sealed)
 *   seg 3  d0, d1, c0@50 (written, not sealed: the tail of a killed owner)
 *   CONTACT
 * so the live keys are b0 b2 c0@50 c1 c2 d0 d1 dup@30. An input is
 *   [mode] then edits [op][args] up to its end, applied to copies of those files:
 *   op%8 0 write [slot][blk][in u16][n][n bytes]   1 xor [slot][blk][in u16][x]
 *        2 truncate at [slot][blk][in u16]         3 delete [slot]
 *        4 rename [slot][id] (0xff: 2^31-1)        5 copy [dst][src]
 *        6 zero [slot][blk][nblk]
 *        7 forge [slot][blk][flags][put_ms][vlen u16][klen][key] a record signed in place
 *          (mode bit 0 only)
 *   slot%7: 0..3 the segments above, 4 and 5 absent files (ids 4, 5), 6 CONTACT; an offset
 *   is blk*4096 + in, blk >= 0x80 counting (blk & 0x7f) blocks back from the file's end.
 * mode bit 0: forge (op 7 works, and every record header and footer found is signed again
 * after the edits: the fuzzer then reaches what lies behind the checksums); bit 1: a second
 * life (append "new", kill the first record indexed, or with bit 2 stage a barrier first,
 * close, open again, read all again); bit 3: capacity 2 segments (the second life retires);
 * bit 4: 8 KiB staging buffers.
 * The files are written to a fresh directory ($FLUXON_TEST_TMP, $TMPDIR or /tmp), the store
 * opened (buffered I/O) and every indexed record read at once (coalesced reads included).
 * Checked: the store opens; its two indexes (by key, by offset) agree; every read ends once,
 * as OK, NOT_FOUND or UNAVAILABLE; an OK read's bytes are the value of a record of that key,
 * length, segment and place whose checksum holds in the file; without forging, every
 * indexed record is one the template appended (same key, version, group, bytes), the
 * unedited template indexes exactly its live keys, and after a second life "new" reads back
 * whole, the killed key is gone (or newer) and after a barrier "new" is all there is. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_int.h"
#include "fuzz.h"
#include "log.h"

#define FZ_SLOTS 7
#define FZ_SEGS 6         /* slots 0..5 are segment files, 6 is CONTACT */
#define FZ_FILE_MAX (2u << 20)
#define FZ_ORIG_MAX 64    /* records the template (and a second life) appended */

typedef struct fz_file {
    uint64_t id;
    bool present;
    uint8_t *p;
    size_t n;
} fz_file_t;

typedef struct fz_orig { /* a record appended by the template or a second life */
    uint64_t off, seed;
    char key[8];
    fx_disk_meta_t m;
} fz_orig_t;

typedef struct fz_ent { /* an indexed record and its read */
    uint64_t off;
    fx_disk_meta_t m;
    uint32_t klen;
    char *key;
    uint8_t *buf;
    int status, calls;
} fz_ent_t;

static fx_reactor_t *fz_r;
static bool fz_trace;
static char fz_dir[256];
static fz_file_t fz_tmpl[FZ_SLOTS], fz_f[FZ_SLOTS];
static fz_orig_t fz_orig[FZ_ORIG_MAX];
static int fz_norig, fz_ntmpl;

static void fz_fill(uint8_t *p, uint64_t len, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < len; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (uint8_t)s;
    }
}

static void fz_seg_path(uint64_t id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/fxd-fz-%016llx.seg", fz_dir, (unsigned long long)id);
}

/* ---- the directory ---- */

static void fz_mkdir(void) { fuzz_mkdtemp(fz_dir, sizeof fz_dir, "fuzz-disk"); }

static void fz_rmdir(void) { fuzz_rmdir(fz_dir); }

static bool fz_read_file(const char *path, fz_file_t *f)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat sb;
    FUZZ_CHECK(fstat(fd, &sb) == 0 && (size_t)sb.st_size <= FZ_FILE_MAX, "%s", path);
    f->n = (size_t)sb.st_size;
    f->p = realloc(f->p, FZ_FILE_MAX);
    FUZZ_CHECK(f->p && pread(fd, f->p, f->n, 0) == (ssize_t)f->n, "read %s", path);
    f->present = true;
    close(fd);
    return true;
}

/* ---- the store ---- */

static fx_disk_cfg_t fz_cfg(uint64_t segs, uint32_t buffer_bytes)
{
    return (fx_disk_cfg_t){.path = fz_dir, .owner_id = "fz", .capacity_bytes = segs << 20, .segment_bytes = 1u << 20,
                           .direct_io = FX_DISK_DIRECT_OFF, .write_buffers = 2, .buffer_bytes = buffer_bytes};
}

static fx_disk_t *fz_open(const fx_disk_cfg_t *c)
{
    fx_disk_t *d = NULL;
    char err[512] = "";
    int rc = fx_disk_open(fz_r, c, NULL, &d, err, sizeof err);
    FUZZ_CHECK(rc == FLUXON_OK, "fx_disk_open: %s (%s)", fluxon_status_string(rc), err);
    return d;
}

static void fz_drain(fx_disk_t *d)
{
    fx_disk_flush(d);
    uint64_t end = fx_now_ms() + 5000;
    for (int i = 0; i < 100000 && d->ops && fx_now_ms() < end; i++) fx_reactor_poll(fz_r, 10);
    FUZZ_CHECK(d->ops == 0, "the store's I/O ended within 5 s");
}

/* Appends key (len bytes of pattern seed) and notes it among the known records. */
static int fz_put(fx_disk_t *d, const char *key, uint64_t len, uint64_t seed, uint64_t put_ms, uint32_t gsize)
{
    uint8_t *v = malloc(len ? len : 1);
    fz_fill(v, len, seed);
    fx_disk_meta_t m = {.value_len = len, .put_ms = put_ms, .put_ver = 1, .group_size = gsize, .group_idx = gsize - 1};
    uint64_t off = 0;
    int rc = FLUXON_ERR_BUSY;
    for (int i = 0; i < 1000; i++) {
        if (fx_disk_room(d, 1, strlen(key) + len)) {
            rc = fx_disk_append(d, key, (uint32_t)strlen(key), v, &m, &off);
            break;
        }
        if (!d->ops) break; /* nothing in flight: no room will come */
        fx_reactor_poll(fz_r, 10);
    }
    free(v);
    if (rc == FLUXON_OK) {
        FUZZ_CHECK(fz_norig < FZ_ORIG_MAX, "too many records");
        fz_orig_t *o = &fz_orig[fz_norig++];
        *o = (fz_orig_t){.off = off, .seed = seed, .m = m};
        snprintf(o->key, sizeof o->key, "%s", key);
    }
    return rc;
}

static void fz_build_template(void)
{
    fz_mkdir();
    fx_disk_cfg_t c = fz_cfg(64, 64u << 10);
    uint64_t off;
    /* life A: segment 0 */
    fx_disk_t *d = fz_open(&c);
    FUZZ_CHECK(fz_put(d, "a0", 100, 1, 10, 1) == FLUXON_OK && fz_put(d, "a1", 5000, 2, 11, 1) == FLUXON_OK &&
               fz_put(d, "dup", 3000, 3, 10, 1) == FLUXON_OK, "life A");
    fx_disk_close(d, 5000);
    char p[512];
    fz_seg_path(0, p, sizeof p);
    FUZZ_CHECK(fz_read_file(p, &fz_tmpl[0]), "segment 0");
    /* life B: segment 1, a barrier first, a tombstone last */
    d = fz_open(&c);
    FUZZ_CHECK(fx_disk_barrier(d) == FLUXON_OK, "barrier");
    FUZZ_CHECK(fz_put(d, "b0", 0, 4, 12, 1) == FLUXON_OK && fz_put(d, "b1", 9000, 5, 13, 1) == FLUXON_OK, "life B");
    off = fz_orig[fz_norig - 1].off;
    FUZZ_CHECK(fz_put(d, "b2", 4097, 6, 14, 1) == FLUXON_OK && fz_put(d, "dup", 2000, 7, 20, 1) == FLUXON_OK, "life B");
    FUZZ_CHECK(fx_disk_kill(d, off) == FLUXON_OK, "tombstone");
    fx_disk_close(d, 5000);
    /* life C: two segments of capacity: segment 0 retires (a mark in segment 2) */
    fx_disk_cfg_t c2 = fz_cfg(2, 64u << 10);
    d = fz_open(&c2);
    FUZZ_CHECK(fz_put(d, "c0", 700, 8, 30, 1) == FLUXON_OK && fz_put(d, "c1", 1, 9, 31, 2) == FLUXON_OK &&
               fz_put(d, "dup", 1500, 10, 30, 1) == FLUXON_OK && fz_put(d, "c2", 12000, 11, 32, 1) == FLUXON_OK,
               "life C");
    FUZZ_CHECK(d->st.retire_marks == 1, "segment 0 retired");
    fx_disk_close(d, 5000);
    /* life D: segment 3 written, not sealed (read before the close seals it) */
    d = fz_open(&c);
    FUZZ_CHECK(fz_put(d, "d0", 200, 12, 40, 1) == FLUXON_OK && fz_put(d, "d1", 4096, 13, 41, 1) == FLUXON_OK &&
               fz_put(d, "c0", 800, 14, 50, 1) == FLUXON_OK, "life D");
    fx_disk_note_contact(d, 1700000000000ull, 600000);
    fz_drain(d);
    for (uint64_t id = 1; id <= 3; id++) {
        fz_seg_path(id, p, sizeof p);
        FUZZ_CHECK(fz_read_file(p, &fz_tmpl[id]), "segment %llu", (unsigned long long)id);
    }
    snprintf(p, sizeof p, "%s/CONTACT", fz_dir);
    FUZZ_CHECK(fz_read_file(p, &fz_tmpl[6]), "CONTACT");
    fx_disk_close(d, 5000);
    fz_rmdir();
    for (int i = 0; i < FZ_SLOTS; i++) {
        fz_tmpl[i].id = (uint64_t)i;
        if (!fz_tmpl[i].p) fz_tmpl[i].p = malloc(FZ_FILE_MAX);
        FUZZ_CHECK(fz_tmpl[i].p != NULL, "memory");
    }
    fz_ntmpl = fz_norig;
    if (fz_trace)
        for (int i = 0; i < fz_norig; i++)
            fprintf(stderr, "template: %-4s seg %llu block %llu value_len %llu put_ms %llu\n", fz_orig[i].key,
                    (unsigned long long)(fz_orig[i].off >> 32 & 0x7fffffff),
                    (unsigned long long)(fz_orig[i].off & 0xffffffff), (unsigned long long)fz_orig[i].m.value_len,
                    (unsigned long long)fz_orig[i].m.put_ms);
}

/* ---- the edits ---- */

static uint64_t fz_get(const uint8_t **p, size_t *n, size_t w)
{
    uint64_t v = 0;
    for (size_t i = 0; i < w && *n; i++, (*p)++, (*n)--) v |= (uint64_t)**p << (8 * i);
    return v;
}

/* An offset in f: blk*4096 + in, or (blk & 0x7f) blocks back from the end's last block. */
static size_t fz_at(const fz_file_t *f, uint64_t blk, uint64_t in)
{
    uint64_t base = blk & 0x80 ? (f->n / FX_DISK_BLOCK > (blk & 0x7f) ? (f->n / FX_DISK_BLOCK - 1 - (blk & 0x7f)) : 0)
                               : blk;
    return (size_t)FX_MIN(base * FX_DISK_BLOCK + in, (uint64_t)FZ_FILE_MAX);
}

/* Grows f to n bytes (zeros), within FZ_FILE_MAX. */
static void fz_grow(fz_file_t *f, size_t n)
{
    n = FX_MIN(n, (size_t)FZ_FILE_MAX);
    if (n > f->n) memset(f->p + f->n, 0, n - f->n);
    if (n > f->n) f->n = n;
}

/* As the store signs a record (the harness forges records the store must take as its own). */
static uint64_t fz_sum(const fx_disk_hdr_t *h, const uint8_t *key, const uint8_t *value)
{
    return fx_disk_rec_sum(h, (const char *)key, value);
}

/* Every record header found and the footer signed again (the last block first: a header
 * inside another record's value changes that value before its own checksum is taken). */
static void fz_resign(fz_file_t *f)
{
    for (size_t b = f->n / FX_DISK_BLOCK; b-- > 0;) {
        fx_disk_hdr_t h;
        memcpy(&h, f->p + b * FX_DISK_BLOCK, sizeof h);
        if (h.magic != FX_DISK_REC_MAGIC || h.key_len > FX_DISK_MAX_KEY || h.value_len > f->n ||
            b * FX_DISK_BLOCK + fx_disk_rec_bytes(h.value_len) > f->n)
            continue;
        h.checksum = fz_sum(&h, f->p + b * FX_DISK_BLOCK + FX_DISK_HDR_BYTES, f->p + (b + 1) * FX_DISK_BLOCK);
        memcpy(f->p + b * FX_DISK_BLOCK, &h, sizeof h);
    }
    if (f->n < FX_DISK_BLOCK) return;
    fx_disk_foot_t ft;
    memcpy(&ft, f->p + f->n - FX_DISK_BLOCK, sizeof ft);
    if (ft.magic != FX_DISK_IDX_MAGIC || ft.data_end > f->n || ft.entry_bytes > f->n - ft.data_end) return;
    ft.checksum = fx_disk_index_sum((const char *)f->p + ft.data_end, ft.entry_bytes, &ft);
    memcpy(f->p + f->n - FX_DISK_BLOCK, &ft, sizeof ft);
}

static void fz_apply(const uint8_t *p, size_t n, bool forge)
{
    for (int steps = 0; n && steps < 256; steps++) {
        unsigned op = (unsigned)fz_get(&p, &n, 1) % 8;
        fz_file_t *f = &fz_f[fz_get(&p, &n, 1) % FZ_SLOTS];
        if (op == 0 || op == 1 || op == 2) {
            uint64_t blk = fz_get(&p, &n, 1), in = fz_get(&p, &n, 2);
            size_t at = fz_at(f, blk, in);
            if (op == 2) {
                if (at < f->n) f->n = at;
                continue;
            }
            size_t k = op == 0 ? (size_t)fz_get(&p, &n, 1) : 1;
            k = FX_MIN(FX_MIN(k, n), (size_t)FZ_FILE_MAX - FX_MIN(at, (size_t)FZ_FILE_MAX));
            fz_grow(f, at + k);
            for (size_t i = 0; i < k; i++) f->p[at + i] = op == 0 ? p[i] : (uint8_t)(f->p[at + i] ^ p[i]);
            f->present = true;
            p += k, n -= k;
        } else if (op == 3) {
            f->present = false;
        } else if (op == 4) {
            uint64_t id = fz_get(&p, &n, 1);
            if (f != &fz_f[6]) f->id = id == 0xff ? (1ull << 31) - 1 : id;
        } else if (op == 5) {
            const fz_file_t *s = &fz_f[fz_get(&p, &n, 1) % FZ_SLOTS];
            if (s != f) {
                memcpy(f->p, s->p, s->n);
                f->n = s->n;
                f->present = s->present;
            }
        } else if (op == 6) {
            uint64_t blk = fz_get(&p, &n, 1), nb = fz_get(&p, &n, 1);
            size_t at = fz_at(f, blk, 0);
            if (at < f->n) memset(f->p + at, 0, FX_MIN(nb * FX_DISK_BLOCK, (uint64_t)(f->n - at)));
        } else { /* a record signed in place: a tombstone, a barrier, a mark, a newer version */
            uint64_t blk = fz_get(&p, &n, 1), flags = fz_get(&p, &n, 1), ms = fz_get(&p, &n, 1);
            uint64_t vlen = fz_get(&p, &n, 2), klen = fz_get(&p, &n, 1);
            klen = FX_MIN(klen, (uint64_t)n);
            const uint8_t *key = p;
            p += klen, n -= klen;
            size_t at = fz_at(f, blk & 0x7f, 0);
            if (!forge || f == &fz_f[6] || at + fx_disk_rec_bytes(vlen) > FZ_FILE_MAX) continue;
            fz_grow(f, at + fx_disk_rec_bytes(vlen));
            fx_disk_hdr_t h = {.magic = FX_DISK_REC_MAGIC, .version = FX_DISK_VERSION, .flags = (uint16_t)flags,
                               .key_len = (uint32_t)klen, .group_size = 1, .blk = (uint32_t)(at / FX_DISK_BLOCK),
                               .value_len = vlen, .put_ms = ms, .put_ver = 1, .seg_id = f->id};
            memset(f->p + at, 0, fx_disk_rec_bytes(vlen));
            memcpy(f->p + at + FX_DISK_HDR_BYTES, key, klen);
            fz_fill(f->p + at + FX_DISK_BLOCK, vlen, ms);
            h.checksum = fz_sum(&h, f->p + at + FX_DISK_HDR_BYTES, f->p + at + FX_DISK_BLOCK);
            memcpy(f->p + at, &h, sizeof h);
            f->present = true;
        }
    }
}

static void fz_write_files(void)
{
    for (int i = 0; i < FZ_SLOTS; i++) {
        if (!fz_f[i].present) continue;
        for (int j = i + 1; j < FZ_SEGS && i < FZ_SEGS; j++) /* two files of one id: the later one */
            if (fz_f[j].present && fz_f[j].id == fz_f[i].id) fz_f[i].present = false;
        if (!fz_f[i].present) continue;
        char p[512];
        if (i < FZ_SEGS) fz_seg_path(fz_f[i].id, p, sizeof p);
        else snprintf(p, sizeof p, "%s/CONTACT", fz_dir);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        FUZZ_CHECK(fd >= 0 && write(fd, fz_f[i].p, fz_f[i].n) == (ssize_t)fz_f[i].n, "write %s", p);
        close(fd);
    }
}

/* ---- the checks ---- */

typedef struct fz_index {
    fz_ent_t *e;
    size_t n, cap;
} fz_index_t;

static bool fz_visit(void *arg, uint64_t off, const char *key, uint32_t klen, const fx_disk_meta_t *m)
{
    fz_index_t *x = arg;
    if (x->n == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 64;
        x->e = realloc(x->e, x->cap * sizeof *x->e);
        FUZZ_CHECK(x->e != NULL, "memory");
    }
    fz_ent_t *e = &x->e[x->n++];
    *e = (fz_ent_t){.off = off, .m = *m, .klen = klen, .key = malloc(klen + 1)};
    FUZZ_CHECK(e->key != NULL, "memory");
    memcpy(e->key, key, klen);
    return true;
}

static void fz_index_free(fz_index_t *x)
{
    for (size_t i = 0; i < x->n; i++) free(x->e[i].key), free(x->e[i].buf);
    free(x->e);
    *x = (fz_index_t){0};
}

static void fz_on_read(void *arg, int status)
{
    fz_ent_t *e = arg;
    e->status = status;
    e->calls++;
}

static const fz_orig_t *fz_orig_at(uint64_t off)
{
    for (int i = fz_norig; i-- > 0;) /* the latest: a deleted last file's id is made again */
        if (fz_orig[i].off == off) return &fz_orig[i];
    return NULL;
}

/* An OK read: its bytes are those of a record in the file with its key, length, segment and
 * place, and a checksum that holds; without forging, the record the template appended. */
static void fz_check_ok(const fz_ent_t *e, bool forge)
{
    uint64_t seg = e->off >> 32 & 0x7fffffffull, bo = (e->off & 0xffffffffull) * FX_DISK_BLOCK;
    char p[512];
    fz_seg_path(seg, p, sizeof p);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "the file of segment %llu is there", (unsigned long long)seg);
    uint64_t len = fx_disk_rec_bytes(e->m.value_len);
    uint8_t *r = malloc(len);
    FUZZ_CHECK(r && pread(fd, r, len, (off_t)bo) == (ssize_t)len, "the record at byte %llu of segment %llu is whole",
               (unsigned long long)bo, (unsigned long long)seg);
    close(fd);
    fx_disk_hdr_t h;
    memcpy(&h, r, sizeof h);
    FUZZ_CHECK(h.magic == FX_DISK_REC_MAGIC && h.version == FX_DISK_VERSION && h.flags == 0 && h.seg_id == seg &&
                   (uint64_t)h.blk * FX_DISK_BLOCK == bo && h.key_len == e->klen && h.value_len == e->m.value_len &&
                   !memcmp(r + FX_DISK_HDR_BYTES, e->key, e->klen),
               "an OK read of %.*s (segment %llu byte %llu) is a record of that key, length and place", (int)e->klen,
               e->key, (unsigned long long)seg, (unsigned long long)bo);
    FUZZ_CHECK(fz_sum(&h, r + FX_DISK_HDR_BYTES, r + FX_DISK_BLOCK) == h.checksum, "an OK read's record checks out");
    FUZZ_CHECK(!memcmp(e->buf, r + FX_DISK_BLOCK, e->m.value_len), "an OK read's bytes are the record's value");
    if (!forge) {
        const fz_orig_t *o = fz_orig_at(e->off);
        fz_fill(r, e->m.value_len, o->seed);
        FUZZ_CHECK(!memcmp(e->buf, r, e->m.value_len), "an OK read of %s returns the bytes appended", o->key);
    }
    free(r);
}

/* Every indexed record read at once, each checked; returns the keys indexed. */
static size_t fz_read_all(fx_disk_t *d, bool forge)
{
    fz_index_t x = {0};
    fx_disk_foreach(d, fz_visit, &x);
    FUZZ_CHECK(x.n == fx_disk_records(d), "the key index (%llu) and the offset index (%zu) agree",
               (unsigned long long)fx_disk_records(d), x.n);
    for (size_t i = 0; i < x.n && !forge; i++) { /* only records the template appended */
        const fz_orig_t *o = fz_orig_at(x.e[i].off);
        FUZZ_CHECK(o && strlen(o->key) == x.e[i].klen && !memcmp(o->key, x.e[i].key, x.e[i].klen) &&
                       !memcmp(&o->m, &x.e[i].m, sizeof o->m),
                   "indexed %.*s at %llx is a record appended", (int)x.e[i].klen, x.e[i].key,
                   (unsigned long long)x.e[i].off);
    }
    for (size_t i = 0; i < x.n; i++) {
        fz_ent_t *e = &x.e[i];
        e->buf = malloc(e->m.value_len ? e->m.value_len : 1);
        FUZZ_CHECK(e->buf != NULL, "memory");
        int rc = fx_disk_read(d, e->off, e->key, e->klen, e->buf, e->m.value_len, fz_on_read, e);
        FUZZ_CHECK(rc == FLUXON_OK, "a read of an indexed record starts: %s", fluxon_status_string(rc));
        FUZZ_CHECK(e->calls == 0, "done never runs inside fx_disk_read");
    }
    uint64_t end = fx_now_ms() + 5000;
    for (size_t i = 0, left = x.n; left && i < 100000 && fx_now_ms() < end; i++) {
        fx_reactor_poll(fz_r, 10);
        left = 0;
        for (size_t j = 0; j < x.n; j++) left += !x.e[j].calls;
    }
    fx_disk_stats_t st;
    fx_disk_stats(d, &st);
    FUZZ_CHECK(st.reads_in_flight == 0, "no read in flight");
    for (size_t i = 0; i < x.n; i++) {
        fz_ent_t *e = &x.e[i];
        FUZZ_CHECK(e->calls == 1, "done ran once (%d)", e->calls);
        FUZZ_CHECK(e->status == FLUXON_OK || e->status == FLUXON_ERR_NOT_FOUND || e->status == FLUXON_ERR_UNAVAILABLE,
                   "read status %s", fluxon_status_string(e->status));
        if (e->status == FLUXON_OK) fz_check_ok(e, forge);
        else FUZZ_CHECK(fx_disk_find(d, e->key, e->klen, NULL, NULL) != FLUXON_OK || e->status != FLUXON_ERR_NOT_FOUND,
                        "a record that failed its check left the index");
    }
    size_t n = x.n;
    fz_index_free(&x);
    fx_disk_foreach(d, fz_visit, &x); /* failed reads dropped: the indexes still agree */
    FUZZ_CHECK(x.n == fx_disk_records(d), "the indexes agree after the reads");
    fz_index_free(&x);
    return n;
}

/* The second life: "new" appended (after a barrier, or with the first record killed), the
 * store closed and opened again, every record read again; without forging, "new" is there. */
static void fz_second_life(fx_disk_t *d, const fx_disk_cfg_t *c, bool forge, bool barrier)
{
    fz_index_t x = {0};
    fx_disk_foreach(d, fz_visit, &x);
    int krc = FLUXON_ERR_NOT_FOUND, brc = barrier ? fx_disk_barrier(d) : FLUXON_ERR_NOT_FOUND;
    fz_ent_t killed = {0};
    if (!barrier && x.n) {
        killed = x.e[0];
        krc = fx_disk_kill(d, killed.off);
    }
    int arc = fz_put(d, "new", 6000, 99, 1000, 1);
    fx_disk_close(d, 5000);
    d = fz_open(c);
    size_t n = fz_read_all(d, forge);
    if (!forge && arc == FLUXON_OK) {
        uint64_t off;
        fx_disk_meta_t m;
        FUZZ_CHECK(fx_disk_find(d, "new", 3, &off, &m) == FLUXON_OK && off == fz_orig[fz_norig - 1].off,
                   "the record appended in the second life is back");
        if (brc == FLUXON_OK) FUZZ_CHECK(n == 1, "after a barrier only the new record is back (%zu)", n);
        if (krc == FLUXON_OK && fx_disk_find(d, killed.key, killed.klen, &off, &m) == FLUXON_OK)
            FUZZ_CHECK(m.put_ms > killed.m.put_ms || (m.put_ms == killed.m.put_ms && m.put_ver > killed.m.put_ver),
                       "the killed %.*s is not back", (int)killed.klen, killed.key);
    }
    fz_index_free(&x);
    fx_disk_close(d, 5000);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_trace = getenv("FUZZ_TRACE") != NULL;
    fx_log_set_level(fz_trace ? FX_LOG_INFO : FX_LOG_OFF);
    FUZZ_CHECK(fx_reactor_create(&fz_r) == FLUXON_OK, "reactor");
    fz_build_template();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned mode = size ? data[0] : 0;
    bool forge = mode & 1;
    fz_norig = fz_ntmpl;
    for (int i = 0; i < FZ_SLOTS; i++) {
        fz_file_t *f = &fz_f[i];
        if (!f->p) f->p = malloc(FZ_FILE_MAX);
        FUZZ_CHECK(f->p != NULL, "memory");
        f->id = fz_tmpl[i].id;
        f->present = fz_tmpl[i].present;
        f->n = fz_tmpl[i].n;
        memcpy(f->p, fz_tmpl[i].p, f->n);
    }
    if (size > 1) fz_apply(data + 1, size - 1, forge);
    if (forge)
        for (int i = 0; i < FZ_SEGS; i++) fz_resign(&fz_f[i]);
    fz_mkdir();
    fz_write_files();
    fx_disk_cfg_t c = fz_cfg(mode & 8 ? 2 : 64, mode & 16 ? 8u << 10 : 64u << 10);
    fx_disk_t *d = fz_open(&c);
    size_t n = fz_read_all(d, forge);
    if (size <= 1) FUZZ_CHECK(n == 8, "the template indexes its 8 live keys (%zu)", n);
    if (mode & 2) fz_second_life(d, &c, forge, mode & 4);
    else fx_disk_close(d, 5000);
    fz_rmdir();
    return 0;
}
