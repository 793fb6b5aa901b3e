/* heap.c — the heap reserve (fx.h): memory handed to mimalloc once per process, for the
 * prefault thread to fault in before the heap grows into it (issue 18).
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
 * returned. The sanitizer build (FX_USE_LIBC_MALLOC) has no mimalloc: no reserve. */
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

FX_INTERNAL void *fx_heap_reserve(uint64_t bytes, uint64_t *len_p)
{
    *len_p = 0;
    bytes = FX_ALIGN_UP(bytes, FX_HEAP_ALIGN);
    if (!bytes || __atomic_exchange_n(&heap_reserved, 1, __ATOMIC_ACQ_REL)) return NULL;
#ifdef FX_USE_LIBC_MALLOC
    return NULL;
#else
    uint8_t *raw = mmap(NULL, bytes + FX_HEAP_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    if (raw == MAP_FAILED) {
        FX_WARN("heap reserve of %llu MiB skipped: mmap: %m (heap_reserve_mib)", (unsigned long long)(bytes >> 20));
        return NULL;
    }
    uint8_t *base = (uint8_t *)FX_ALIGN_UP((uintptr_t)raw, (uintptr_t)FX_HEAP_ALIGN);
    uint8_t *end = base + bytes, *raw_end = raw + bytes + FX_HEAP_ALIGN;
    if (base > raw) munmap(raw, (size_t)(base - raw)); /* the alignment's slack */
    if (raw_end > end) munmap(end, (size_t)(raw_end - end));
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
