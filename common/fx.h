/* fx.h — internal basics shared by every Fluxon module: the FX_INTERNAL linkage macro
 * the amalgamation turns into `static`, allocation through mimalloc, assertions,
 * clocks and small helpers. Internal names are fx_* / FX_*; public ones fluxon_*. */
#ifndef FX_H
#define FX_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fluxon.h"

/* Every internal function and global is declared FX_INTERNAL. The amalgamation defines
 * it as `static` (so nm shows only fluxon_* globals); separate compilation (unit tests)
 * leaves it empty so tests can reach internals. */
#ifndef FX_INTERNAL
#define FX_INTERNAL
#endif

#define FX_UNUSED __attribute__((unused))
#define FX_LIKELY(x) __builtin_expect(!!(x), 1)
#define FX_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define FX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define FX_MAX(a, b) ((a) > (b) ? (a) : (b))
#define FX_ALIGN_UP(x, a) (((x) + ((a) - 1)) / (a) * (a))
/* Starts loading p's cache line (a hint: no fault, nothing done where p is not mapped).
 * An asm statement, not a bare __builtin_prefetch: GCC drops a call to a function whose only
 * work is __builtin_prefetch (it finds the function free of side effects), so the
 * prefetch helpers fx_u64map_prefetch and fx_freq_sketch_prefetch compiled to nothing where
 * they were called (the amalgamation, GCC 12 -O2; found in session 33 by reading the
 * disassembly). */
static inline void fx_prefetch(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
#else
    __asm__ volatile("" : : "r"(p)); /* keeps the call site; the builtin after it */
    __builtin_prefetch(p, 0, 3);
#endif
}
#define FX_CONTAINER_OF(p, T, m) ((T *)((char *)(p) - offsetof(T, m)))

/* The calling thread's fluxon_last_error_message (status.c): emptied as each public call
 * starts, set to the reason of its refusal. */
FX_INTERNAL void fx_last_msg_clear(void);
FX_INTERNAL void fx_last_msg_vset(const char *fmt, va_list ap);

/* Allocation: mimalloc underneath; NULL on failure (callers map to FLUXON_ERR_NOMEM). */
FX_INTERNAL void *fx_malloc(size_t n);
FX_INTERNAL void *fx_calloc(size_t n, size_t size);
FX_INTERNAL void *fx_realloc(void *p, size_t n);
FX_INTERNAL char *fx_strdup(const char *s);
FX_INTERNAL char *fx_strndup(const char *s, size_t n);
FX_INTERNAL void fx_free(void *p);
/* n bytes aligned to align (a power of two: O_DIRECT buffers); freed with fx_free. */
FX_INTERNAL void *fx_malloc_aligned(size_t align, size_t n);
/* The heap reserve (heap.c): maps `bytes` (rounded up to 64 MiB) of private memory and
 * hands it to mimalloc, which places new heap segments there before asking the OS; the
 * caller faults it in ahead of use (the prefault thread). Once per process: a later call,
 * bytes 0, the sanitizer build or a failure (logged) return NULL. *len_p: the reserve's
 * length (0 with NULL). The memory is mimalloc's until the process ends. Thread-safe. */
FX_INTERNAL void *fx_heap_reserve(uint64_t bytes, uint64_t *len_p);
/* bytes of zeroed memory, 2 MiB aligned, on transparent huge pages where the kernel gives
 * them (madvise; 4 KiB pages otherwise), for a large table read at random (one TLB entry
 * per 2 MiB: under a hypervisor each TLB miss is a two-dimensional page walk); NULL when
 * mmap fails. From 1 MiB up the mapping is rounded up to whole 2 MiB pages (the kernel backs
 * no smaller one with a huge page; that memory is taken); below, to 4 KiB pages. Freed by
 * fx_huge_unmap(p, the same bytes). Any thread. */
FX_INTERNAL void *fx_huge_map(size_t bytes);
FX_INTERNAL void fx_huge_unmap(void *p, size_t bytes);

/* Assertion for states that must never happen (Redis' serverAssert): logs file, line
 * and the expression, then aborts. Always on, also in release builds. */
#define FX_ASSERT(cond)                                                              \
    do {                                                                             \
        if (FX_UNLIKELY(!(cond))) fx_assert_fail(#cond, __FILE__, __LINE__, __func__); \
    } while (0)
FX_INTERNAL void fx_assert_fail(const char *expr, const char *file, int line,
                                const char *func) __attribute__((noreturn));

/* Clocks. */
FX_INTERNAL uint64_t fx_now_ns(void);      /* CLOCK_MONOTONIC */
FX_INTERNAL uint64_t fx_now_ms(void);      /* CLOCK_MONOTONIC */
FX_INTERNAL uint64_t fx_boot_ms(void);     /* CLOCK_BOOTTIME: goes on through a suspend (lease deadlines, H2) */
FX_INTERNAL uint64_t fx_realtime_ns(void); /* CLOCK_REALTIME, for generations */

/* Deadlines and bounded waits, all on CLOCK_MONOTONIC (a wall-clock step never shortens
 * or stretches a wait). fx_deadline_ts: the absolute CLOCK_MONOTONIC time `ms` from now,
 * for sem_clockwait / pthread_cond_timedwait on a condvar made by fx_cond_init_monotonic.
 * fx_sem_wait_ms: waits on s up to ms (EINTR retried); true when it was posted, false on
 * timeout. fx_cond_init_monotonic: returns pthread_cond_init's status. */
FX_INTERNAL struct timespec fx_deadline_ts(uint64_t ms);
FX_INTERNAL bool fx_sem_wait_ms(sem_t *s, uint64_t ms);
FX_INTERNAL int fx_cond_init_monotonic(pthread_cond_t *c);

/* Constant-time comparison of two byte strings (length leaks, contents do not). */
FX_INTERNAL bool fx_ct_equal(const void *a, size_t alen, const void *b, size_t blen);

/* Names thread t (pthread_self() or one just created) "fx-<what>[-<id>]" (the kernel
 * keeps 15 bytes), as top -H, ps -L, perf and gdb show it; best effort, nothing on
 * failure. A creator names its thread before it returns to its caller. */
FX_INTERNAL void fx_thread_name(pthread_t t, const char *what, const char *id);

/* snprintf into a fixed buffer that always NUL-terminates; returns needed length. */
FX_INTERNAL size_t fx_strlcpy(char *dst, const char *src, size_t cap);

#endif /* FX_H */
