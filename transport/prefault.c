/* prefault.c — faults a segment mapping in on a thread of its own (prefault.h).
 *
 * Allocating and mapping are two passes (issue 18): faulting pages in did both at once
 * (~1.4 s of CPU per GiB here, against ~0.4 s to allocate and ~0.4 s to map), and a client
 * opening meanwhile raced the owner's thread to allocate the same pages; now it mostly
 * finds them allocated and only maps them. The touch pass comes last, where it pays. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fallocate */
#endif
#include "prefault.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "log.h"

#define PF_STEP (64ull << 20)  /* allocate in steps this large */
/* map in steps this large: each MADV_POPULATE_WRITE holds the process's mmap lock, and a
 * thread's mmap or munmap meanwhile waits for it (64 MiB steps, ~90 ms each here, held an
 * owner with a 4 GiB heap reserve 8.2 s from serving; 2 MiB steps: 0.19 s) */
#define PF_MAP_STEP (2ull << 20)
#define PF_STOP_EVERY 64u      /* touch: look at the stop flag every 64 pages */
#define PF_PROBE_PAGES 16u

static bool pf_stopped(const int *stop) { return stop && __atomic_load_n(stop, __ATOMIC_RELAXED); }

/* The reads below may meet an engine's writes into the same pages (of another process, or
 * of this one under TSan): they only make translations, their values are never used. */
__attribute__((no_sanitize("thread"))) static uint8_t pf_read(const uint8_t *p)
{
    return *(const volatile uint8_t *)p;
}

static int pf_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

FX_INTERNAL uint64_t fx_prefault_probe_ns(const void *base, uint64_t len, uint64_t page, unsigned n)
{
    uint64_t pages = page ? len / page : 0, ns[64];
    if (n == 0 || pages == 0) return 0;
    if (n > 64) n = 64;
    if (n > pages) n = (unsigned)pages;
    for (unsigned i = 0; i < n; i++) {
        const uint8_t *p = (const uint8_t *)base + (pages * i / n) * page;
        uint64_t t0 = fx_now_ns();
        (void)pf_read(p);
        ns[i] = fx_now_ns() - t0;
    }
    qsort(ns, n, sizeof ns[0], pf_cmp_u64);
    return ns[n / 2];
}

FX_INTERNAL uint64_t fx_prefault_touch(const void *base, uint64_t len, uint64_t page, const int *stop,
                                       uint64_t *progress)
{
    const uint8_t *p = base;
    uint64_t pages = page ? len / page : 0, i = 0;
    uint8_t acc = 0;
    for (; i < pages; i++) {
        if (i % PF_STOP_EVERY == 0) {
            if (progress) __atomic_store_n(progress, i * page, __ATOMIC_RELAXED);
            if (pf_stopped(stop)) break;
        }
        acc ^= pf_read(p + i * page);
    }
    if (progress) __atomic_store_n(progress, i * page, __ATOMIC_RELAXED);
    (void)acc;
    return i;
}

/* Step 1 (allocate) or 2 (map) over [base, base + len) (alloc_fd: the memfd behind it;
 * page: the mapping's page size, below which a map step never goes: a huge page is
 * populated whole). Returns true when it covered all of it. */
static bool pf_pass(fx_prefault_t *pf, uint8_t *base, uint64_t len, uint64_t page, int alloc_fd, bool allocate)
{
    uint64_t off = 0;
    __atomic_store_n(&pf->progress, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pf->pass, allocate ? 1 : 2, __ATOMIC_RELAXED);
    uint64_t step = allocate ? PF_STEP : FX_MAX(PF_MAP_STEP, page);
    for (; off < len && !pf_stopped(&pf->stop); off += step) {
        uint64_t n = FX_MIN(step, len - off);
        if (allocate && fallocate(alloc_fd, 0, (off_t)off, (off_t)n) != 0) {
            FX_DEBUG("segment preallocation skipped: %m"); /* the mapping pass's faults allocate */
            return false;
        }
#ifdef MADV_POPULATE_WRITE
        if (!allocate && madvise(base + off, n, MADV_POPULATE_WRITE) != 0) {
            FX_INFO("prefault: MADV_POPULATE_WRITE failed (%m); reading every page instead");
            return false;
        }
#else
        if (!allocate) return false;
#endif
        __atomic_store_n(&pf->progress, off + n, __ATOMIC_RELAXED);
    }
    return off >= len;
}

/* Steps 2 and 3 over the heap reserve (4 KiB pages, private memory mimalloc may already
 * be using: populating and reading never change a byte). */
static void pf_heap(fx_prefault_t *pf, uint64_t threshold)
{
    uint64_t t0 = fx_now_ns();
    bool mapped = pf_pass(pf, pf->heap_base, pf->heap_len, 4096, -1, false);
    uint64_t probe = mapped && pf->touch == FX_TOUCH_AUTO
                         ? fx_prefault_probe_ns(pf->heap_base, pf->heap_len, 4096, PF_PROBE_PAGES) : 0;
    bool touch = pf->touch == FX_TOUCH_ON || (pf->touch == FX_TOUCH_AUTO && (!mapped || probe >= threshold));
    if (!pf_stopped(&pf->stop) && touch) {
        __atomic_store_n(&pf->pass, 3, __ATOMIC_RELAXED);
        pf->heap_touched_pages = fx_prefault_touch(pf->heap_base, pf->heap_len, 4096, &pf->stop, &pf->progress);
    }
    if (!pf_stopped(&pf->stop))
        FX_INFO("heap reserve prefaulted: %llu MiB in %.2f s (%s)", (unsigned long long)(pf->heap_len >> 20),
                (double)(fx_now_ns() - t0) / 1e9, pf->heap_touched_pages ? "every page read once" : "no page read");
}

static void *pf_main(void *arg)
{
    fx_prefault_t *pf = arg;
    uint64_t t0 = fx_now_ns(), t1 = t0;
    fx_log_set_context(pf->role, pf->id[0] ? pf->id : NULL);
    uint64_t threshold = pf->touch_probe_ns ? pf->touch_probe_ns : FX_PREFAULT_TOUCH_PROBE_NS;
    if (pf->heap_len) { /* first: the heap grows from the first request on */
        pf_heap(pf, threshold);
        t0 = t1 = fx_now_ns();
    }
    if (!pf->len) goto done;
    if (pf->alloc_fd >= 0) {
        pf_pass(pf, pf->base, pf->len, pf->page, pf->alloc_fd, true);
        t1 = fx_now_ns();
    }
    bool mapped = pf_pass(pf, pf->base, pf->len, pf->page, -1, false);
    uint64_t t2 = fx_now_ns();
    if (mapped && pf->touch == FX_TOUCH_AUTO)
        pf->probe_ns = fx_prefault_probe_ns(pf->base, pf->len, pf->page, PF_PROBE_PAGES);
    bool touch = pf->touch == FX_TOUCH_ON || (pf->touch == FX_TOUCH_AUTO && (!mapped || pf->probe_ns >= threshold));
    if (!pf_stopped(&pf->stop) && touch) {
        __atomic_store_n(&pf->pass, 3, __ATOMIC_RELAXED);
        pf->touched_pages = fx_prefault_touch(pf->base, pf->len, pf->page, &pf->stop, &pf->progress);
    }
    if (!pf_stopped(&pf->stop))
    {
        char probe[64] = "";
        if (pf->probe_ns) snprintf(probe, sizeof probe, ", a mapped page's first access took %.1f us", (double)pf->probe_ns / 1e3);
        FX_INFO("%s prefaulted: %llu MiB in %.1f s (allocated in %.1f s, mapped in %.1f s; segment_touch %s%s: %s)",
                pf->what[0] ? pf->what : "segment", (unsigned long long)(pf->len >> 20), (double)(fx_now_ns() - t0) / 1e9, (double)(t1 - t0) / 1e9,
                (double)(t2 - t1) / 1e9, pf->touch == FX_TOUCH_ON ? "on" : pf->touch == FX_TOUCH_OFF ? "off" : "auto",
                probe, pf->touched_pages ? "every page read once" : "no page read");
    }
done:
    __atomic_store_n(&pf->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

FX_INTERNAL void fx_prefault_start(fx_prefault_t *pf, void *base, uint64_t len, uint64_t page, int alloc_fd,
                                   const char *role, const char *id)
{
    pf->base = base;
    pf->len = len;
    pf->page = page ? page : 4096;
    pf->alloc_fd = alloc_fd;
    fx_strlcpy(pf->role, role ? role : "", sizeof pf->role);
    fx_strlcpy(pf->id, id ? id : "", sizeof pf->id);
    pf->running = pthread_create(&pf->thread, NULL, pf_main, pf) == 0;
    if (!pf->running) FX_DEBUG("segment prefault skipped: no thread");
    else fx_thread_name(pf->thread, "prefault", pf->id);
}

FX_INTERNAL void fx_prefault_stop(fx_prefault_t *pf)
{
    if (!pf->running) return;
    __atomic_store_n(&pf->stop, 1, __ATOMIC_RELAXED);
    pthread_join(pf->thread, NULL);
    pf->running = false;
}

FX_INTERNAL bool fx_prefault_running(const fx_prefault_t *pf)
{
    return pf->running && !__atomic_load_n(&pf->done, __ATOMIC_ACQUIRE);
}
