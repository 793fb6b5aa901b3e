/* prefault.c — faults the whole segment in: first-touch faults of shared memory otherwise
 * land on the hot path of every first put and remote fetch into a fresh slot (they were
 * the largest cost of remote restores in profiles). On a thread of its own, in 64 MiB
 * steps, while the owner registers and serves (MADV_POPULATE_WRITE faults pages in without
 * writing them, so it may run under live puts): an 8 GiB segment takes 10-20 s, which must
 * not count against start_timeout_ms nor delay a stop. Best effort.
 *
 * Two passes (issue 18): the pages are first allocated in the memfd (fallocate: no faults,
 * no page tables), then mapped. Faulting them in did both at once (~1.4 s of CPU per GiB
 * here, against ~0.4 s to allocate and ~0.4 s to map), and a client opening meanwhile (its
 * prefault_segment) raced this thread to allocate the same pages; now it mostly finds them
 * allocated and only maps them, in parallel with this thread's own mapping pass.
 * segment_prefaulting (metrics) tells an embedder, such as `fluxon demo` before its replay,
 * when the thread is done. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fallocate */
#endif
#include <fcntl.h>
#include <sys/mman.h>

#include "log.h"
#include "owner_prefault.h"

/* One pass over the segment: allocate (fallocate) or map (MADV_POPULATE_WRITE). Returns
 * true when it covered the whole segment. */
static bool opf_pass(fx_owner_t *o, bool allocate)
{
    uint8_t *base = fx_segment_base(o->seg);
    uint64_t len = fx_segment_len(o->seg), step = 64ull << 20, off = 0;
    int fd = fx_segment_fd(o->seg);
    for (; off < len && !__atomic_load_n(&o->prefault_stop, __ATOMIC_RELAXED); off += step) {
        uint64_t n = FX_MIN(step, len - off);
        if (allocate && (fd < 0 || fallocate(fd, 0, (off_t)off, (off_t)n) != 0)) {
            FX_DEBUG("segment preallocation skipped: %m"); /* the mapping pass's faults allocate */
            return false;
        }
        if (!allocate && madvise(base + off, n, MADV_POPULATE_WRITE) != 0) {
            FX_DEBUG("segment prefault skipped: %m");
            return false;
        }
    }
    return off >= len;
}

static void *opf_main(void *arg)
{
    fx_owner_t *o = arg;
    uint64_t t0 = fx_now_ns();
    fx_log_set_context("owner", o->cfg.node_id);
    fx_thread_name(pthread_self(), "prefault", o->cfg.node_id);
    opf_pass(o, true);
    uint64_t t1 = fx_now_ns();
    if (opf_pass(o, false))
        FX_INFO("segment prefaulted: %llu MiB in %.1f s (allocated in %.1f s)",
                (unsigned long long)(fx_segment_len(o->seg) >> 20), (double)(fx_now_ns() - t0) / 1e9,
                (double)(t1 - t0) / 1e9);
    __atomic_store_n(&o->prefault_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

FX_INTERNAL void fx_oprefault_start(fx_owner_t *o)
{
    if (o->cfg.numa_node >= 0) return; /* fx_segment_create placed and touched every page */
    o->prefault_running = pthread_create(&o->prefault_thread, NULL, opf_main, o) == 0;
    if (!o->prefault_running) FX_DEBUG("segment prefault skipped: no thread");
}

FX_INTERNAL void fx_oprefault_stop(fx_owner_t *o)
{
    if (!o->prefault_running) return;
    __atomic_store_n(&o->prefault_stop, 1, __ATOMIC_RELAXED);
    pthread_join(o->prefault_thread, NULL);
    o->prefault_running = false;
}

FX_INTERNAL void fx_oprefault_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    m->segment_prefaulting = o->prefault_running && !__atomic_load_n(&o->prefault_done, __ATOMIC_ACQUIRE);
}
