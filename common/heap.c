/* heap.c — the heap reserve (fx.h): memory handed to mimalloc once per process, for the
 * prefault thread to fault in before the heap grows into it (issue 18); and tables mapped
 * on transparent huge pages (fx_huge_map).
 *
 * A filling cache grows its heap on the hot path: the owner's entries and index, the
 * master's routes (in `fluxon demo` all in one process). Each fresh 4 KiB page of it costs
 * a fault at its first write, ~6-13 us on this project's VM (whose hypervisor builds its
 * translation of a page lazily): the replay of 3,000 requests x 16 KiB took ~10,900 such
 * faults, ~3.6 a request. Memory given to mimalloc as an arena (mi_manage_os_memory) is
 * where it places new segments first; faulted in ahead of time, the same replay took ~1,100.
 * A thread keeps filling the segments it already has: the reserve must come before the
 * threads that grow (fluxon_node_launch makes it before the node's thread starts).
 * mimalloc keeps an arena for the life of the process: one reserve per process, never
 * returned. The sanitizer build (FX_USE_LIBC_MALLOC) has no mimalloc: no reserve. The reserve
 * asks for transparent huge pages (madvise). */
#include "fx.h"

#include <sys/mman.h>

#ifndef FX_USE_LIBC_MALLOC
#include <mimalloc.h>
#endif

#include "log.h"

/* mimalloc places segments at this alignment within an arena (32 MiB in 2.0; larger is
 * harmless): an arena that starts between two such boundaries loses memory before its
 * start to the rounding, which it does not own */
#define FX_HEAP_ALIGN (64ull << 20)

static int heap_reserved; /* atomic: a reserve was made (or tried) in this process */

/* bytes of private anonymous memory starting at a multiple of align (a power of two),
 * the slack around it unmapped; NULL when mmap fails (errno set) */
static uint8_t *heap_map_aligned(uint64_t bytes, uint64_t align, int flags)
{
    uint8_t *raw = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uint8_t *base = (uint8_t *)FX_ALIGN_UP((uintptr_t)raw, (uintptr_t)align);
    uint8_t *end = base + bytes, *raw_end = raw + bytes + align;
    if (base > raw) munmap(raw, (size_t)(base - raw)); /* the alignment's slack */
    if (raw_end > end) munmap(end, (size_t)(raw_end - end));
    return base;
}

/* whole huge pages: the kernel backs only a 2 MiB-aligned 2 MiB range of a mapping with
 * one, so a smaller mapping (the write-back sketch of 10,000 values is 1 MiB) would stay
 * on 4 KiB pages (session 32 shrank that sketch from 4 to 1 MiB and so lost its huge page:
 * fx_freq_sketch_add went from ~0.5 to ~4.5 us a request of the trace replay, one CPU) */
#define HUGE_BYTES(b)                                                                                 \
    ((uint64_t)(b) >= (1ull << 20) ? FX_ALIGN_UP((uint64_t)(b), (uint64_t)2u << 20) /* from half a huge page */ \
                                   : FX_ALIGN_UP((uint64_t)(b), (uint64_t)4096u)) /* a small table: its few 4 KiB pages */

FX_INTERNAL void *fx_huge_map(size_t bytes)
{
    uint8_t *p = heap_map_aligned(HUGE_BYTES(bytes), 2u << 20, 0);
    if (p) (void)madvise(p, HUGE_BYTES(bytes), MADV_HUGEPAGE); /* a hint: 4 KiB pages where refused */
    return p;
}

FX_INTERNAL void fx_huge_unmap(void *p, size_t bytes)
{
    if (p) munmap(p, HUGE_BYTES(bytes));
}

FX_INTERNAL void *fx_heap_reserve(uint64_t bytes, uint64_t *len_p)
{
    *len_p = 0;
    bytes = FX_ALIGN_UP(bytes, FX_HEAP_ALIGN);
    if (!bytes || __atomic_exchange_n(&heap_reserved, 1, __ATOMIC_ACQ_REL)) return NULL;
#ifdef FX_USE_LIBC_MALLOC
    return NULL;
#else
    uint8_t *base = heap_map_aligned(bytes, FX_HEAP_ALIGN, MAP_NORESERVE);
    if (!base) {
        FX_WARN("heap reserve of %llu MiB skipped: mmap: %m (heap_reserve_mib)", (unsigned long long)(bytes >> 20));
        return NULL;
    }
    /* on huge pages where the kernel gives them (a hint): the routes, entries and tables
     * the heap holds are read at random, and each TLB miss is a two-dimensional page walk
     * under a hypervisor. The prefault thread faults the whole reserve in either way
     * (MADV_POPULATE_WRITE), so this costs no memory; on a kernel without it (before 5.14)
     * later writes fault 2 MiB at a time instead of 4 KiB. Trace replay, one CPU, 4 interleaved pairs: 1.5-3 % more
     * requests/s with or without a CPU owner (perf: the GPU owner's and the master's samples
     * 10-12 % fewer, spread over every lookup) */
    (void)madvise(base, (size_t)bytes, MADV_HUGEPAGE);
    if (!mi_manage_os_memory(base, (size_t)bytes, true, false, true, -1)) {
        FX_WARN("heap reserve of %llu MiB skipped: mimalloc refused it (heap_reserve_mib)",
                (unsigned long long)(bytes >> 20));
        munmap(base, (size_t)bytes);
        return NULL;
    }
    *len_p = bytes;
    return base;
#endif
}
