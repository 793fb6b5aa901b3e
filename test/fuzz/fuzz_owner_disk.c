/* fuzz_owner_disk.c — fuzz_owner.c's owner (the same harness, records and checks) with a
 * disk tier (issue 39), so the frames reach what the disk adds to the owner: victims of
 * eviction demoted (copied into the store in slices by the eviction's idle hook, their EVICT
 * naming disk offsets), INVALIDATEs naming disk offsets (tombstones), gets read back from
 * the owner's own disk into claimed slots (a temporary copy, promoted on the second read,
 * prefetches), segments retired (route drops to the master), disk records re-published after
 * the master link drops.
 *
 * Each input gets a fresh directory ($FLUXON_TEST_TMP, $TMPDIR or /tmp; removed after) as
 * the owner's disk.path: capacity 4 segments of 1 MiB, buffered I/O, and a 1 MiB hot tier,
 * so a few puts of a few hundred KiB evict to disk and a dozen retire a segment. The store's
 * I/O is real (the reactor's io_uring; fx_disk_open is wrapped to learn the store and give it
 * staging buffers of 64 KiB, grown for a larger record, not 1 MiB made per input); the
 * clock is still the harness's, so the store's 2 ms flush and the contact timer wait for a
 * clock record. After every record, once the link is pumped, the harness runs the rest of a
 * reactor turn until nothing is left (fz_disk_settle): the eviction's staging hook, the timers
 * due now (a batch of route drops, a retirement slice) and the store's I/O completions (their
 * callbacks may send frames: pumped again).
 * Checked besides fuzz_owner.c's: after every record the store's two indexes (key, offset)
 * agree; at the end (the owner quiet: no I/O in flight, no staging) every route the master
 * holds that names a disk offset of o0 names a record the store indexes, of that key and
 * version (none left pointing at a record retired, replaced, deleted or failed), unless the
 * owner gave a route drop up (counted); the disk counters add up.
 *
 * A second life (ops 0xFC, 0xFD; in fuzz_owner.c's target they drop the link like the rest of
 * 0xF8..0xFF): o0 crashes as a kill -9 would leave it. The store has no I/O in flight after a
 * record (fz_disk_settle reaped it: writes handed to the kernel are done), so the crash image
 * is the directory's files copied at that instant (fz_dir_copy): what was written is there,
 * what is still in a staging buffer (a record or tombstone waiting for the 2 ms flush) is
 * lost, the open segment has no index block, DIR/CONTACT is as last written. The process is
 * then torn down in process (for the leak check), its link dropped first and its externals
 * closed, so nothing more reaches the master; what its close writes goes to the directory
 * thrown away. 0xFD restarts the master too (a fresh one, a later generation; o1 registers
 * with it again). o0 stays down through clock records (the master's timers run: it may
 * declare o0 dead and forget it); the next other record, or the end of the input, brings it
 * back: a new owner (a newer generation) over the crash image, which re-indexes the records
 * found there and offers them to the master at its registration (re-publication), then the
 * records go on. Checked besides the above:
 *  - a tombstone (fx_disk_kill) or barrier (fx_disk_barrier) of an earlier life that was on
 *    the file at the crash (read back from the image: fz_kill_on_file): the store never
 *    indexes again the key's record it killed (a record of that key and version or older,
 *    written before the tombstone; any record before a barrier), after every record;
 *  - once o0 is back and again at the end: every route naming o0's disk names a record the
 *    store indexes, of that key and version (fz_disk_stale_routes), and none names a record
 *    such a tombstone or barrier killed;
 *  - kills lost in a crash of o0 alone (0xFC): a record the master invalidated by a one-way
 *    INVALIDATE to o0 (the frames it sends o0 are watched) less than 1 s before the crash is
 *    one the master still remembers and sends again to o0's next process: once that one is
 *    registered and re-published, its store indexes none of them and no route names one
 *    (fz_inv_lost_check; none after 0xFD: a fresh master remembers nothing). */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FZ_DISK 1
#define FZ_DISK_CFG                                                                                        \
    ",\"hot_capacity_bytes\":\"1MiB\",\"disk\":{\"path\":\"/nonexistent/fz-disk\",\"capacity_bytes\":\"4MiB\"," \
    "\"segment_bytes\":\"1MiB\",\"direct_io\":\"off\"}"
static void fz_disk_begin(void);
static void fz_disk_settle(void);
static void fz_disk_check(void);
static bool fz_disk_quiet(void);
static void fz_disk_final(void);
static void fz_disk_end(void);
static bool fz_disk_crash(uint8_t op);
static void fz_disk_revive(void);
static void fz_disk_to_o0(const uint8_t *p, size_t n);

#include "fuzz_owner.c"

#include "disk_int.h"
#include "owner_evict_int.h"

static fx_disk_t *fz_disk; /* the owner's store (fx_disk_open wrapped to learn it) */
static char fz_dir[256];

int __real_fx_disk_open(fx_reactor_t *r, const fx_disk_cfg_t *cfg, const fx_disk_hooks_t *hooks, fx_disk_t **d_p,
                        char *err, size_t errlen);
int __wrap_fx_disk_open(fx_reactor_t *r, const fx_disk_cfg_t *cfg, const fx_disk_hooks_t *hooks, fx_disk_t **d_p,
                        char *err, size_t errlen);
int __wrap_fx_disk_open(fx_reactor_t *r, const fx_disk_cfg_t *cfg, const fx_disk_hooks_t *hooks, fx_disk_t **d_p,
                        char *err, size_t errlen)
{
    FUZZ_CHECK(fz_disk == NULL, "a second store");
    fx_disk_cfg_t c = *cfg;
    c.buffer_bytes = 64u << 10; /* not 16 x 1 MiB made and touched per input (a record larger grows its buffer) */
    int rc = __real_fx_disk_open(r, &c, hooks, d_p, err, errlen);
    FUZZ_CHECK(rc == FLUXON_OK, "the owner's store did not open: %s (%s)", fluxon_status_string(rc), err);
    fz_disk = *d_p;
    return rc;
}

/* ---- the second life: what the earlier lives killed on disk ---- */
#define FZ_LIVES 16              /* crashes an input at most (a later 0xFC/0xFD drops the link) */
#define FZ_OP_CRASH 0xFC         /* o0 crashes; the master stays */
#define FZ_OP_CRASH_MASTER 0xFD  /* o0 and the master crash; a fresh master starts */

/* A tombstone (or barrier) the store staged: the record it killed and where it lies. */
typedef struct {
    char *key; /* NULL: a barrier (every record written before it) */
    uint32_t klen;
    uint64_t put_ms, put_ver; /* the version killed: it and older ones of the key written before it */
    uint64_t rec_off, tomb_off; /* the record killed; the tombstone's (barrier's) own disk offset */
    int life;                   /* the life that staged it */
    bool on_file;               /* in its life's crash image (known at that crash) */
} fz_kill_t;
static fz_kill_t *fz_kills;
static size_t fz_n_kills, fz_cap_kills, fz_n_on_file;
static int fz_life; /* crashes so far in this input */

static bool fz_before(uint64_t a, uint64_t b) { return (a & ~FX_DISK_OFF_BIT) < (b & ~FX_DISK_OFF_BIT); }

/* The tombstone or barrier just staged (fx_disk_stage pushed it on the open segment's list). */
static void fz_kill_note(fx_disk_t *d, char *key, uint32_t klen, const fx_disk_meta_t *m, uint64_t rec_off,
                         uint16_t flag)
{
    const dk_tomb_t *t = d->open_seg ? d->open_seg->tombs : NULL;
    FUZZ_CHECK(t && (t->flags & flag) && t->klen == klen, "the %s just staged is not the open segment's latest",
               key ? "tombstone" : "barrier");
    if (fz_n_kills == fz_cap_kills) {
        fz_cap_kills = fz_cap_kills ? 2 * fz_cap_kills : 16;
        fz_kills = realloc(fz_kills, fz_cap_kills * sizeof *fz_kills);
        FUZZ_CHECK(fz_kills != NULL, "out of memory");
    }
    fz_kills[fz_n_kills++] = (fz_kill_t){key, klen, m ? m->put_ms : 0, m ? m->put_ver : 0, rec_off,
                                         FX_DISK_OFF_BIT | t->seg_id << 32 | t->byte_off / FX_DISK_BLOCK, fz_life, false};
}

/* The store's kills (owner/disk.c calls them: INVALIDATE, a refused EVICT or re-publication, a
 * record that could not be read; the master forgot o0), noted with what they killed. */
int __real_fx_disk_kill(fx_disk_t *d, uint64_t off);
int __wrap_fx_disk_kill(fx_disk_t *d, uint64_t off);
int __wrap_fx_disk_kill(fx_disk_t *d, uint64_t off)
{
    const char *k = NULL;
    uint32_t kl = 0;
    fx_disk_meta_t m;
    char *kc = d == fz_disk && fx_disk_rec_at(d, off, &k, &kl, &m) ? malloc(kl ? kl : 1) : NULL;
    if (kc) memcpy(kc, k, kl);
    int rc = __real_fx_disk_kill(d, off);
    if (kc && rc == FLUXON_OK) fz_kill_note(d, kc, kl, &m, off, FX_DISK_REC_TOMB);
    else free(kc);
    return rc;
}
int __real_fx_disk_barrier(fx_disk_t *d);
int __wrap_fx_disk_barrier(fx_disk_t *d);
int __wrap_fx_disk_barrier(fx_disk_t *d)
{
    int rc = __real_fx_disk_barrier(d);
    if (d == fz_disk && rc == FLUXON_OK) fz_kill_note(d, NULL, 0, NULL, 0, FX_DISK_REC_BARRIER);
    return rc;
}

/* Is kill k's tombstone (barrier) whole on the file in the crash image dir? */
static bool fz_kill_on_file(const char *dir, const fz_kill_t *k)
{
    uint64_t seg = (k->tomb_off & ~FX_DISK_OFF_BIT) >> 32, byte_off = (k->tomb_off & 0xffffffffull) * FX_DISK_BLOCK;
    char p[512];
    snprintf(p, sizeof p, "%s/fxd-o0-%016llx.seg", dir, (unsigned long long)seg);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char *b = malloc(FX_DISK_BLOCK);
    FUZZ_CHECK(b != NULL, "out of memory");
    ssize_t n = pread(fd, b, FX_DISK_BLOCK, (off_t)byte_off);
    close(fd);
    fx_disk_hdr_t h;
    memcpy(&h, b, sizeof h);
    bool ok = n == FX_DISK_BLOCK && !fx_disk_rec_check(b, FX_DISK_BLOCK, seg, byte_off, k->key, k->klen) &&
              (h.flags & (k->key ? FX_DISK_REC_TOMB : FX_DISK_REC_BARRIER)) &&
              (!k->key || (h.put_ms == k->put_ms && h.put_ver == k->put_ver));
    free(b);
    return ok;
}

/* The kill of an earlier life, on the file at its crash, that killed the record of key and
 * version (pms, pv) at disk offset off (NULL: none did). */
static const fz_kill_t *fz_killed(const char *key, uint32_t klen, uint64_t off, uint64_t pms, uint64_t pv)
{
    for (size_t i = 0; i < fz_n_kills; i++) {
        const fz_kill_t *k = &fz_kills[i];
        if (!k->on_file || !fz_before(off, k->tomb_off)) continue;
        if (!k->key) return k;
        if (k->klen == klen && !memcmp(k->key, key, klen) && (pms < k->put_ms || (pms == k->put_ms && pv <= k->put_ver)))
            return k;
    }
    return NULL;
}

static bool fz_index_visit(void *arg, uint64_t off, const char *key, uint32_t klen, const fx_disk_meta_t *m)
{
    const fz_kill_t *k = fz_killed(key, klen, off, m->put_ms, m->put_ver);
    FUZZ_CHECK(!k, "the store indexes %.*s (version %llu.%llu) at %llx, killed in life %d by the %s at %llx (the "
               "record there was %llx), on the file at that crash", (int)FX_MIN(klen, 80u), key,
               (unsigned long long)m->put_ms, (unsigned long long)m->put_ver, (unsigned long long)off, k->life,
               k->key ? "tombstone" : "barrier", (unsigned long long)k->tomb_off, (unsigned long long)k->rec_off);
    return true;
}

/* Every record the store indexes: none an earlier life's kill on the file killed. */
static void fz_disk_index_walk(void)
{
    if (fz_n_on_file) fx_disk_foreach(fz_disk, fz_index_visit, NULL);
}

/* ---- kills lost in a crash of o0 alone (0xFC) ----
 * An overwrite's INVALIDATE of a disk record is one-way: o0 stages its tombstone (written at
 * the store's 2 ms flush: a clock record here) and a crash before that loses it. The master
 * remembers the one-way INVALIDATEs of disk records it sent a node (master/routes.c,
 * inv_recent: two periods of MKV_INV_RECENT_MS, a new one begun by a send MKV_INV_RECENT_MS
 * or more after the current one began, the oldest then dropped) and sends them again to the
 * node's next process at its registration, before its re-publication. One sent at t goes only
 * at the second period begun after it, by a send at t + MKV_INV_RECENT_MS or later (nothing is
 * sent to o0 while it is down): the master still holds it for sure when o0 crashes before
 * t + MKV_INV_RECENT_MS (it may hold it up to twice as long: not checked). Those are checked in
 * o0's next life: once it registered and re-published, its store indexes none of those records
 * (that key and version at that offset) and no route of the master names one. A crash of the
 * master too (0xFD): the fresh master remembers nothing, nothing is checked. */
#define FZ_INV_RECENT_MS 1000u /* master/routes.c's MKV_INV_RECENT_MS */
typedef struct {
    char *key;
    uint32_t klen;
    uint64_t off, put_ms, put_ver; /* the disk record invalidated */
    uint64_t sent_ms;              /* fx_now_ms when the master sent it */
    int life;                      /* the life of o0 it was sent to */
} fz_inv_t;
typedef struct {
    fz_inv_t *v;
    size_t n, cap;
} fz_invs_t;
static fz_invs_t fz_inv_sent; /* to o0's current process, within FZ_INV_RECENT_MS of now */
static fz_invs_t fz_inv_lost; /* sent within FZ_INV_RECENT_MS before o0's last crash (0xFC): checked in this life */
static uint64_t fz_crash_ms;  /* fx_now_ms at that crash */
static bool fz_inv_checked;   /* fz_inv_lost checked at least once in this life (FUZZ_TRACE) */

static void fz_invs_add(fz_invs_t *l, const fz_inv_t *e)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        FUZZ_CHECK(l->v != NULL, "out of memory");
    }
    fz_inv_t *d = &l->v[l->n++];
    *d = *e;
    d->key = malloc(e->klen ? e->klen : 1);
    FUZZ_CHECK(d->key != NULL, "out of memory");
    memcpy(d->key, e->key, e->klen);
}

static void fz_invs_clear(fz_invs_t *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i].key);
    l->n = 0;
}

/* The frames the master sends o0 (fuzz_owner.c's fz_sink_owner: whole frames, validated): its
 * one-way INVALIDATEs (request, req_id 0) naming disk offsets are noted; those sent
 * FZ_INV_RECENT_MS or more ago are dropped (no crash from now on can be within their window). */
static void fz_disk_to_o0(const uint8_t *p, size_t n)
{
    uint64_t now = fz_clock_ns / 1000000ull;
    size_t k = 0;
    for (size_t i = 0; i < fz_inv_sent.n; i++) {
        if (now - fz_inv_sent.v[i].sent_ms < FZ_INV_RECENT_MS) fz_inv_sent.v[k++] = fz_inv_sent.v[i];
        else free(fz_inv_sent.v[i].key);
    }
    fz_inv_sent.n = k;
    fx_arena_t a = {0};
    for (size_t off = 0; n - off >= FX_FRAME_HEADER_BYTES;) {
        fx_frame_header_t h;
        if (fx_frame_header_decode(p + off, 64ull << 20, &h) != FLUXON_OK || n - off - FX_FRAME_HEADER_BYTES < h.body_len)
            break;
        fx_body_invalidate_t b;
        if (h.type == FX_MSG_INVALIDATE && !h.flags && !h.req_id &&
            fx_body_invalidate_decode(p + off + FX_FRAME_HEADER_BYTES, h.body_len, &b, &a) == FLUXON_OK)
            for (uint32_t i = 0; i < b.keys.n; i++)
                if (fx_disk_is_off(b.offsets.v[i])) {
                    if (fz_trace)
                        fprintf(stderr, "  one-way INVALIDATE of o0's disk record %.*s version %llu.%llu at %llx\n",
                                (int)FX_MIN(b.keys.v[i].len, 80u), b.keys.v[i].p, (unsigned long long)b.put_ms.v[i],
                                (unsigned long long)b.put_ver.v[i], (unsigned long long)b.offsets.v[i]);
                    fz_invs_add(&fz_inv_sent, &(fz_inv_t){(char *)b.keys.v[i].p, (uint32_t)b.keys.v[i].len,
                                                          b.offsets.v[i], b.put_ms.v[i], b.put_ver.v[i], now, fz_life});
                }
        fx_arena_reset(&a);
        off += FX_FRAME_HEADER_BYTES + h.body_len;
    }
    fx_arena_free(&a);
}

/* o0 back from a crash of its own (0xFC), registered and done re-publishing: no record the
 * master invalidated (one-way) within FZ_INV_RECENT_MS before the crash is indexed or routed
 * (the tombstone may have been lost with the crash: the master sent the INVALIDATE again). */
static void fz_inv_lost_check(void)
{
    if (!fz_inv_lost.n || !fz_o || !fz_disk) return;
    fx_ometrics_t mm;
    fz_metrics(&mm);
    if (!mm.master_connected || mm.republishing) return;
    if (fz_trace && !fz_inv_checked)
        fprintf(stderr, "o0 registered (life %d): %zu records invalidated one-way within %u ms before its crash checked\n",
                fz_life, fz_inv_lost.n, FZ_INV_RECENT_MS);
    fz_inv_checked = true;
    for (size_t i = 0; i < fz_inv_lost.n; i++) {
        const fz_inv_t *e = &fz_inv_lost.v[i];
        const char *k = NULL;
        uint32_t kl = 0;
        fx_disk_meta_t m;
        bool at = fx_disk_rec_at(fz_disk, e->off, &k, &kl, &m) && kl == e->klen && !memcmp(k, e->key, kl) &&
                  m.put_ms == e->put_ms && m.put_ver == e->put_ver;
        FUZZ_CHECK(!at, "o0 registered again (life %d) and its store indexes %.*s (version %llu.%llu) at %llx: the "
                   "master invalidated that record (one-way, to life %d) %llu ms before o0 crashed (its tombstone may "
                   "be lost; the master remembers it and sends it again)", fz_life, (int)FX_MIN(e->klen, 80u), e->key,
                   (unsigned long long)e->put_ms, (unsigned long long)e->put_ver, (unsigned long long)e->off, e->life,
                   (unsigned long long)(fz_crash_ms - e->sent_ms));
        const mkv_route_t *r = fx_hmap_get(((mkv_t *)fz_m->kv)->routes, e->key, e->klen);
        for (uint32_t j = 0; r && r->put_ms == e->put_ms && r->put_ver == e->put_ver && j < r->n_rep; j++)
            FUZZ_CHECK(strcmp(r->rep[j].node->node_id, "o0") || r->rep[j].offset != e->off,
                       "o0 registered again (life %d) and the master routes %.*s (version %llu.%llu) to its disk "
                       "offset %llx: it invalidated that record (one-way, to life %d) %llu ms before o0 crashed",
                       fz_life, (int)FX_MIN(e->klen, 80u), e->key, (unsigned long long)e->put_ms,
                       (unsigned long long)e->put_ver, (unsigned long long)e->off, e->life,
                       (unsigned long long)(fz_crash_ms - e->sent_ms));
    }
}

static void fz_disk_begin(void)
{
    fuzz_mkdtemp(fz_dir, sizeof fz_dir, "fuzz-owner-disk");
    fx_strlcpy(fz_ocfg.disk_path, fz_dir, sizeof fz_ocfg.disk_path);
}

/* The store's I/O in flight ends (real completions: reaped as the loop would, each callback
 * run); 5 s of real time at most (the clock the store sees stands still). */
static bool fz_disk_reap(void)
{
    if (!fz_disk || !fz_disk->ops) return false;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 100000 && fz_disk->ops; i++) {
        fx_reactor_poll(fz_r, 10);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 5) break;
    }
    FUZZ_CHECK(fz_disk->ops == 0, "%llu I/O operations of the store still in flight after 5 s",
               (unsigned long long)fz_disk->ops);
    return true;
}

/* The rest of a reactor turn, until a turn finds nothing to do: the eviction's idle hook
 * (victims copied into the store, 8 a call; its EVICT sent after the last), the timers due
 * now, the store's completions, and what they sent pumped. */
static void fz_disk_settle(void)
{
    if (!fz_o) return;
    for (int turn = 0; turn < 1000; turn++) {
        fz_pump_link();
        bool busy = false;
        for (int i = 0; i < 4096 && fx_oevs_stage_pump(fz_o); i++) busy = true;
        fx_reactor_run_due_timers(fz_r);
        busy |= fz_disk_reap();
        if (!busy && !fz_to_master.n && !fz_to_owner.n) return;
    }
}

static void fz_disk_check(void)
{
    FUZZ_CHECK(fz_disk != NULL, "no store");
    FUZZ_CHECK(fx_hmap_count(fz_disk->by_key) == fz_disk->by_off.count, "the store indexes %zu keys, %zu offsets",
               fx_hmap_count(fz_disk->by_key), (size_t)fz_disk->by_off.count);
    for (size_t i = 0; fz_n_on_file && i < fz_n_kills; i++) { /* the keys killed (barriers: fz_disk_index_walk) */
        const fz_kill_t *k = &fz_kills[i];
        uint64_t off;
        fx_disk_meta_t m;
        if (k->on_file && k->key && fx_disk_find(fz_disk, k->key, k->klen, &off, &m) == FLUXON_OK)
            fz_index_visit(NULL, off, k->key, k->klen, &m);
    }
    fz_inv_lost_check();
}

/* Every route of the master's that names a disk offset of o0: a record the store indexes,
 * of the route's key and version, and none an earlier life's kill on the file killed. Returns
 * how many do not (0: none); the first one's description in why. */
static size_t fz_disk_stale_routes(char *why, size_t cap)
{
    mkv_t *s = fz_m->kv;
    size_t bad = 0;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(s->routes, &it, &k, &kl, &v)) {
        const mkv_route_t *r = v;
        for (uint32_t i = 0; i < r->n_rep; i++) {
            const mkv_replica_t *rep = &r->rep[i];
            if (strcmp(rep->node->node_id, "o0") || !fx_disk_is_off(rep->offset)) continue;
            const char *dk = NULL;
            uint32_t dkl = 0;
            fx_disk_meta_t m;
            bool at = fx_disk_rec_at(fz_disk, rep->offset, &dk, &dkl, &m);
            const fz_kill_t *kd = fz_killed(k, (uint32_t)kl, rep->offset, r->put_ms, r->put_ver);
            if (kd) {
                if (!bad++)
                    snprintf(why, cap, "route %.*s (version %llu.%u) names o0's disk offset %llx, killed in life %d by "
                             "the %s at %llx, on the file at that crash", (int)FX_MIN(kl, 80u), k,
                             (unsigned long long)r->put_ms, r->put_ver, (unsigned long long)rep->offset, kd->life,
                             kd->key ? "tombstone" : "barrier", (unsigned long long)kd->tomb_off);
                continue;
            }
            if (at && dkl == kl && !memcmp(dk, k, kl) && m.put_ms == r->put_ms && m.put_ver == r->put_ver) continue;
            if (!bad++)
                snprintf(why, cap, "route %.*s (version %llu.%u) names o0's disk offset %llx: %s", (int)FX_MIN(kl, 80u),
                         k, (unsigned long long)r->put_ms, r->put_ver, (unsigned long long)rep->offset,
                         !at ? "the store has no record there"
                             : "the store's record there is another key or version");
        }
    }
    return bad;
}

static bool fz_disk_quiet(void)
{
    fx_ometrics_t mm;
    fz_metrics(&mm);
    char why[256];
    return !fz_disk->ops && !mm.evict_disk_staging &&
           (mm.disk_route_drops_failed || !fz_disk_stale_routes(why, sizeof why));
}

static void fz_disk_final(void)
{
    fx_ometrics_t mm;
    fz_metrics(&mm);
    FUZZ_CHECK(fz_disk->ops == 0 && mm.disk_reads_in_flight == 0, "%llu I/O operations, %llu reads in flight",
               (unsigned long long)fz_disk->ops, (unsigned long long)mm.disk_reads_in_flight);
    FUZZ_CHECK(mm.evict_disk_staging == 0, "%llu eviction rounds still staging", (unsigned long long)mm.evict_disk_staging);
    FUZZ_CHECK(mm.disk_records == fx_hmap_count(fz_disk->by_key), "%llu records counted, %zu indexed",
               (unsigned long long)mm.disk_records, fx_hmap_count(fz_disk->by_key));
    FUZZ_CHECK(mm.disk_used_bytes <= mm.disk_capacity_bytes + (1ull << 20), "%llu bytes on disk of %llu",
               (unsigned long long)mm.disk_used_bytes, (unsigned long long)mm.disk_capacity_bytes);
    if (fz_trace)
        fprintf(stderr,
                "disk: %llu appends, %llu records, %llu hits (%llu direct, %llu temporary), %llu misses, %llu tombstones, "
                "%llu segments freed, %llu records retired, %llu routes dropped, %llu evicted to disk, %llu prefetch reads\n",
                (unsigned long long)mm.disk_appends, (unsigned long long)mm.disk_records, (unsigned long long)mm.disk_hits,
                (unsigned long long)mm.disk_direct, (unsigned long long)mm.disk_temp, (unsigned long long)mm.disk_misses,
                (unsigned long long)mm.disk_tombstones, (unsigned long long)mm.disk_segments_freed,
                (unsigned long long)mm.disk_retired_records, (unsigned long long)mm.disk_routes_dropped,
                (unsigned long long)mm.evict_to_disk, (unsigned long long)mm.prefetch_reads);
    fz_disk_index_walk();
    fz_inv_lost_check();
    char why[256] = "";
    size_t bad = mm.disk_route_drops_failed ? 0 : fz_disk_stale_routes(why, sizeof why);
    FUZZ_CHECK(bad == 0, "%zu routes of the master name records o0's disk does not hold: %s", bad, why);
}

static void fz_disk_end(void)
{
    fz_disk = NULL; /* closed with the owner */
    fuzz_rmdir(fz_dir);
    for (size_t i = 0; i < fz_n_kills; i++) free(fz_kills[i].key);
    fz_n_kills = fz_n_on_file = 0;
    fz_life = 0;
    fz_invs_clear(&fz_inv_sent);
    fz_invs_clear(&fz_inv_lost);
}

/* ---- the crash and the next life ---- */
/* Copies the files of directory from (flat) into the empty directory to. */
static void fz_dir_copy(const char *from, const char *to)
{
    DIR *dd = opendir(from);
    FUZZ_CHECK(dd != NULL, "opendir %s: %s", from, strerror(errno));
    char *buf = malloc(64u << 10);
    FUZZ_CHECK(buf != NULL, "out of memory");
    struct dirent *de;
    char src[512], dst[512];
    while ((de = readdir(dd))) {
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]))) continue;
        snprintf(src, sizeof src, "%s/%s", from, de->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, de->d_name);
        int in = open(src, O_RDONLY | O_CLOEXEC);
        FUZZ_CHECK(in >= 0, "open %s: %s", src, strerror(errno));
        int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        FUZZ_CHECK(out >= 0, "create %s: %s", dst, strerror(errno));
        ssize_t n;
        while ((n = read(in, buf, 64u << 10)) > 0)
            FUZZ_CHECK(write(out, buf, (size_t)n) == n, "write %s: %s", dst, strerror(errno));
        FUZZ_CHECK(n == 0, "read %s: %s", src, strerror(errno));
        close(in);
        close(out);
    }
    closedir(dd);
    free(buf);
}

static bool fz_trace_rec(void *arg, uint64_t off, const char *key, uint32_t klen, const fx_disk_meta_t *m)
{
    fprintf(stderr, "  disk record %.*s version %llu.%llu at %llx\n", (int)FX_MIN(klen, 80u), key,
            (unsigned long long)m->put_ms, (unsigned long long)m->put_ver, (unsigned long long)off);
    return true;
}

/* 0xFC / 0xFD: o0 crashes (the file's comment says what the crash image holds). */
static bool fz_disk_crash(uint8_t op)
{
    if ((op != FZ_OP_CRASH && op != FZ_OP_CRASH_MASTER) || !fz_o || fz_life >= FZ_LIVES) return false;
    FUZZ_CHECK(fz_disk && !fz_disk->ops, "a crash with the store's I/O in flight");
    char img[256];
    fuzz_mkdtemp(img, sizeof img, "fuzz-owner-disk");
    fz_dir_copy(fz_dir, img);
    size_t was = fz_n_on_file, kills = 0;
    for (size_t i = 0; i < fz_n_kills; i++)
        if (fz_kills[i].life == fz_life && (kills++, fz_kill_on_file(img, &fz_kills[i]))) {
            fz_kills[i].on_file = true;
            fz_n_on_file++;
        }
    if (fz_trace)
        fprintf(stderr, "o0 crashes (life %d%s): %zu records indexed, %zu of its %zu kills on the file\n", fz_life,
                op == FZ_OP_CRASH_MASTER ? ", the master too" : "", fx_hmap_count(fz_disk->by_key),
                fz_n_on_file - was, kills);
    if (fz_trace) fx_disk_foreach(fz_disk, fz_trace_rec, NULL);
    /* what the master must still remember of its one-way disk INVALIDATEs to o0: checked in
     * the next life (a fresh master, 0xFD, remembers nothing) */
    fz_invs_clear(&fz_inv_lost);
    fz_crash_ms = fz_clock_ns / 1000000ull;
    fz_inv_checked = false;
    for (size_t i = 0; op == FZ_OP_CRASH && i < fz_inv_sent.n; i++)
        if (fz_crash_ms - fz_inv_sent.v[i].sent_ms < FZ_INV_RECENT_MS) fz_invs_add(&fz_inv_lost, &fz_inv_sent.v[i]);
    if (fz_trace && fz_inv_lost.n)
        fprintf(stderr, "  %zu records invalidated one-way within %u ms: checked once o0 is back\n", fz_inv_lost.n,
                FZ_INV_RECENT_MS);
    fz_disk = NULL; /* its teardown's kills (none expected) are not noted */
    fz_link_drop(); /* first: nothing more reaches the master */
    for (int i = 0; i < FZ_EXTS; i++) fz_peer_close(i);
    fx_owner_shutdown(fz_o);
    fx_owner_destroy(fz_o); /* closes the store: what it writes goes to the directory thrown away */
    fz_o = NULL;
    fz_link_drop();
    /* at o0's registration the master moves what it remembers to what it holds for the new
     * process and sends it again (noted anew, as sent to the next life) */
    fz_invs_clear(&fz_inv_sent);
    fuzz_rmdir(fz_dir);
    fx_strlcpy(fz_dir, img, sizeof fz_dir);
    fz_life++;
    if (op == FZ_OP_CRASH_MASTER) {
        fz_peer_close(3);
        fz_master_free();
        fz_mgen += 1000000ull; /* a later master: its in-flight tokens do not repeat */
        fz_master_new();
        fz_peer[3] = fz_o1_new();
        fz_pump_link();
    }
    /* from now on the master's liveness check runs as in a real master (master_start arms
     * it; the owner target leaves it off): an owner down past dead_owner_grace_ms is
     * forgotten (o0 then drops its disk at its registration: a barrier) */
    if (!fx_timer_armed(&fz_m->liveness_timer))
        fx_timer_arm(fz_r, &fz_m->liveness_timer, FX_MAX(fz_mcfg.heartbeat_timeout_ms / 8, 10u), master_on_liveness);
    return true;
}

/* o0 down: it starts again over its crash image (a new process: a newer generation),
 * re-indexes it, registers (the master's held invalidations first, then the re-publication
 * of what the disk holds) and its externals connect again. */
static void fz_disk_revive(void)
{
    if (fz_o) return;
    fz_clock_ns += 1000000ull; /* fx_realtime_ns: the generation, later than the crashed one's */
    fx_strlcpy(fz_ocfg.disk_path, fz_dir, sizeof fz_ocfg.disk_path);
    FUZZ_CHECK(fx_owner_create(fz_r, &fz_ocfg, fz_ready, NULL, &fz_o) == FLUXON_OK, "owner create (life %d)", fz_life);
    FUZZ_CHECK(fz_disk != NULL, "no store");
    fz_disk_index_walk(); /* the re-index kept nothing an earlier life killed for good */
    fz_pump(); /* HELLO, REGISTER, re-publication, grants */
    for (int i = FZ_EXTS - 1; i >= 0; i--) fz_peer[i] = fz_peer_new(i);
    fz_pump();
    fz_check();
    fx_ometrics_t mm;
    fz_metrics(&mm);
    if (fz_trace)
        fprintf(stderr, "o0 back (life %d): %llu records re-indexed (%llu torn, %llu killed), %llu re-published, "
                "registered %d, re-publishing %d\n", fz_life, (unsigned long long)mm.disk_recovered_records,
                (unsigned long long)mm.disk_recovered_torn, (unsigned long long)mm.disk_recovered_killed,
                (unsigned long long)mm.republish_keys, (int)mm.master_connected, (int)mm.republishing);
    char why[256] = "";
    size_t bad = mm.master_connected && !mm.republishing && !mm.disk_route_drops_failed && !mm.evict_disk_staging
                     ? fz_disk_stale_routes(why, sizeof why)
                     : 0;
    FUZZ_CHECK(bad == 0, "o0 registered again (life %d): %zu routes of the master name records its disk does not "
               "hold: %s", fz_life, bad, why);
}
