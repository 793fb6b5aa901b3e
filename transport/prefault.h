/* prefault.h — faults a segment mapping in on a thread of its own (owner and client).
 *
 * A mapping's pages cost a fault on their first access from this process: on the hot path
 * of every first put or remote fetch into a fresh slot. The thread takes them ahead of
 * time, while its process serves:
 *  1. allocate: fallocate the memfd in 64 MiB steps (no faults, no page tables; the
 *     owner only; a failure is logged at debug level and left to step 2's faults);
 *  2. map: MADV_POPULATE_WRITE in 64 MiB steps, which fills this mapping's page tables
 *     without writing;
 *  3. touch (issue 18): where a mapped page's first access from user mode still costs
 *     (measured by reading a few of them: ~6 us a page on this project's VM, whose
 *     hypervisor builds its own translations of the guest's page tables lazily), one read
 *     of every page makes this process's translations now, at the cost the first writes
 *     would otherwise pay on the hot path (~2-3 s of CPU per GiB there). Without it the
 *     replay's engine spent ~24 us writing each fresh 16 KiB value instead of ~2.5. Reads
 *     only, never writes: the pages may hold live values. Where step 2 is not available
 *     (a kernel before 5.14) or fails, step 3 runs without a probe: its reads fault the
 *     pages in.
 * Config "segment_touch" (owner and external): "auto" as above, "off" never step 3, "on"
 * step 3 without a probe.
 * The thread runs at the process's priority: a lower one made a stop wait for it up to
 * ~1 s on a loaded host (measured at nice 19 with 4 busy threads). Best effort. */
#ifndef FX_PREFAULT_H
#define FX_PREFAULT_H

#include <pthread.h>

#include "config.h"
#include "fx.h"

typedef struct fx_prefault {
    pthread_t thread;
    bool running;     /* the thread was started (and not yet joined) */
    int stop;         /* atomic: set by fx_prefault_stop */
    int done;         /* atomic: set by the thread when it ends */
    uint8_t *base;    /* borrowed: the mapping (outlives the thread) */
    uint64_t len;
    uint64_t page;    /* the mapping's page size: 4096, or 2 MiB on hugetlb pages */
    int alloc_fd;     /* borrowed: fallocate this memfd first; -1: do not */
    char role[16], id[FX_ID_MAX]; /* log context: "owner"/"external", node id ("" = none) */
    int touch;                    /* set before start: FX_TOUCH_AUTO (probe), OFF or ON (config.h) */
    uint64_t touch_probe_ns;      /* set before start: the probe threshold (0: the default) */
    uint64_t progress;            /* atomic: bytes the current pass has covered */
    int pass;                     /* atomic: 1 allocate, 2 map, 3 touch, 0 none yet */
    uint64_t touched_pages;       /* pages read by step 3 (0: not needed or not run) */
    uint64_t probe_ns;            /* median first access of a mapped page, as probed */
    uint8_t *heap_base;           /* set before start: a heap reserve (fx_heap_reserve) to fault in
                                     first, steps 2 and 3; NULL: none */
    uint64_t heap_len;
    uint64_t heap_touched_pages;  /* pages of it read by step 3 */
    char what[64];                /* set before start: what the log line names ("" = "segment"),
                                     e.g. "owner host-b's segment" for a peer's mapped here */
} fx_prefault_t;

/* Starts the thread over [base, base + len) (len a multiple of page; 0: the heap reserve
 * only), pf zeroed by the caller but for touch, touch_probe_ns and the heap reserve. role: "owner" or "external"; id: its node id or NULL (the
 * thread is fx-prefault[-id], cut to 15 characters; its log context role[id]). No thread:
 * logged (debug), nothing done, fx_prefault_running false. */
FX_INTERNAL void fx_prefault_start(fx_prefault_t *pf, void *base, uint64_t len, uint64_t page, int alloc_fd,
                                   const char *role, const char *id);
/* Asks the thread to stop and joins it: it looks between two 64 MiB steps of steps 1 and
 * 2 (a step takes ~20-40 ms here) and every 64 pages of step 3. No-op when none runs. The
 * mapping may be unmapped afterwards. */
FX_INTERNAL void fx_prefault_stop(fx_prefault_t *pf);
/* True while the thread works (any thread). */
FX_INTERNAL bool fx_prefault_running(const fx_prefault_t *pf);

/* Step 3's parts, exposed for tests: the median nanoseconds of the first read of n pages
 * (of page bytes) spread evenly over [base, base + len) (n >= 1, at most 64; 0 when no
 * page), each read alone. */
FX_INTERNAL uint64_t fx_prefault_probe_ns(const void *base, uint64_t len, uint64_t page, unsigned n);
/* Reads one byte of every page (of page bytes) of [base, base + len); stops early when
 * *stop is set (checked every 64 pages); adds what it covered to *progress (may be NULL).
 * Returns the number of pages read. */
FX_INTERNAL uint64_t fx_prefault_touch(const void *base, uint64_t len, uint64_t page, const int *stop,
                                       uint64_t *progress);
/* A probe at or above this many ns makes step 3 run (touch_probe_ns 0). */
#define FX_PREFAULT_TOUCH_PROBE_NS 1500u

#endif /* FX_PREFAULT_H */
