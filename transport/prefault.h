/* prefault.h — faults a segment mapping in on a thread of its own (owner and client).
 *
 * A mapping's pages cost a fault on their first access from this process: on the hot path
 * of every first put or remote fetch into a fresh slot. The thread takes them ahead of
 * time, in steps, while its process serves:
 *  1. allocate: fallocate the memfd (no faults, no page tables; the owner only);
 *  2. map: MADV_POPULATE_WRITE, which fills this mapping's page tables without writing;
 *  3. touch (issue 18): where a mapped page's first access from user mode still costs
 *     (measured by reading a few of them: ~6 us a page on this project's VM, whose
 *     hypervisor builds its own translations of the guest's page tables lazily, against
 *     ~0.1 us on bare metal), one read of every page makes this process's translations
 *     now. Without it the replay's engine spent ~24 us writing each fresh 16 KiB value
 *     instead of ~2.5. Reads only, never writes: the pages may hold live values. This
 *     pass runs at nice 19, so that it takes only CPU nobody else wants.
 * Best effort: a failed step is logged (debug) and ends the passes. */
#ifndef FX_PREFAULT_H
#define FX_PREFAULT_H

#include <pthread.h>

#include "fx.h"

typedef struct fx_prefault {
    pthread_t thread;
    bool running;    /* the thread was started (and not yet joined) */
    int stop;        /* atomic: set by fx_prefault_stop */
    int done;        /* atomic: set by the thread when it ends */
    uint8_t *base;   /* borrowed: the mapping (outlives the thread) */
    uint64_t len;
    int alloc_fd;    /* borrowed: fallocate this memfd first; -1: do not */
    char role[8], id[16];   /* log context: "owner"/"client", node id */
    uint64_t touched_pages; /* pages read by the touch pass (0: not needed or not run) */
    uint64_t probe_ns;      /* median first access of a mapped page, as probed */
} fx_prefault_t;

/* Starts the thread over [base, base + len) (len a multiple of 4096), pf zeroed by the
 * caller. role: "owner" or "client", id: its node id or NULL (the thread is
 * fx-prefault[-id], its log context role/id). No thread: logged (debug), nothing done,
 * fx_prefault_running false. */
FX_INTERNAL void fx_prefault_start(fx_prefault_t *pf, void *base, uint64_t len, int alloc_fd,
                                   const char *role, const char *id);
/* Asks the thread to stop (it looks between every 256 KiB) and joins it. No-op when none
 * runs. The mapping may be unmapped afterwards. */
FX_INTERNAL void fx_prefault_stop(fx_prefault_t *pf);
/* True while the thread works (any thread). */
FX_INTERNAL bool fx_prefault_running(const fx_prefault_t *pf);

/* The pass behind step 3, exposed for tests: the median nanoseconds of the first read of
 * n pages spread evenly over [base, base + len) (n >= 1, at most 64), each read alone. */
FX_INTERNAL uint64_t fx_prefault_probe_ns(const void *base, uint64_t len, unsigned n);
/* Reads one byte of every 4 KiB page of [base, base + len); stops early when *stop is
 * set (checked every 64 pages). Returns the number of pages read. */
FX_INTERNAL uint64_t fx_prefault_touch(const void *base, uint64_t len, const int *stop);
/* A probe at or above this many ns makes the touch pass run. */
#define FX_PREFAULT_TOUCH_PROBE_NS 1500u

#endif /* FX_PREFAULT_H */
