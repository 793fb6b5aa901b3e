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
 * owner gave a route drop up (counted); the disk counters add up. */
#include <stdbool.h>
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
}

/* Every route of the master's that names a disk offset of o0: a record the store indexes,
 * of the route's key and version. Returns how many do not (0: none); the first one's
 * description in why. */
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
    char why[256] = "";
    size_t bad = mm.disk_route_drops_failed ? 0 : fz_disk_stale_routes(why, sizeof why);
    FUZZ_CHECK(bad == 0, "%zu routes of the master name records o0's disk does not hold: %s", bad, why);
}

static void fz_disk_end(void)
{
    fz_disk = NULL; /* closed with the owner */
    fuzz_rmdir(fz_dir);
}
