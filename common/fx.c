/* fx.c — allocation, assertions, clocks and small helpers (see fx.h). */
#include "fx.h"

#include <errno.h>
#include <mimalloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

/* The sanitizer build (make asan) defines FX_USE_LIBC_MALLOC so AddressSanitizer sees
 * every allocation; mimalloc's own arenas are invisible to it. */
#ifdef FX_USE_LIBC_MALLOC
FX_INTERNAL void *fx_malloc(size_t n) { return malloc(n ? n : 1); }
FX_INTERNAL void *fx_calloc(size_t n, size_t size) { return calloc(n ? n : 1, size ? size : 1); }
FX_INTERNAL void *fx_realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }
FX_INTERNAL char *fx_strdup(const char *s) { return s ? strdup(s) : NULL; }
FX_INTERNAL char *fx_strndup(const char *s, size_t n) { return s ? strndup(s, n) : NULL; }
FX_INTERNAL void fx_free(void *p) { free(p); }
FX_INTERNAL void *fx_malloc_aligned(size_t align, size_t n)
{
    void *p = NULL;
    return posix_memalign(&p, align, n ? n : 1) == 0 ? p : NULL;
}
#else
FX_INTERNAL void *fx_malloc(size_t n) { return mi_malloc(n ? n : 1); }
FX_INTERNAL void *fx_calloc(size_t n, size_t size) { return mi_calloc(n ? n : 1, size ? size : 1); }
FX_INTERNAL void *fx_realloc(void *p, size_t n) { return mi_realloc(p, n ? n : 1); }
FX_INTERNAL char *fx_strdup(const char *s) { return s ? mi_strdup(s) : NULL; }
FX_INTERNAL char *fx_strndup(const char *s, size_t n) { return s ? mi_strndup(s, n) : NULL; }
FX_INTERNAL void fx_free(void *p) { mi_free(p); }
FX_INTERNAL void *fx_malloc_aligned(size_t align, size_t n) { return mi_malloc_aligned(n ? n : 1, align); }
#endif

FX_INTERNAL void fx_assert_fail(const char *expr, const char *file, int line, const char *func)
{
    fx_log(FX_LOG_ERROR, "assertion failed: %s at %s:%d (%s)", expr, file, line, func);
    fflush(stderr);
    abort();
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

FX_INTERNAL uint64_t fx_now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
FX_INTERNAL uint64_t fx_now_ms(void) { return clock_ns(CLOCK_MONOTONIC) / 1000000ull; }
FX_INTERNAL uint64_t fx_realtime_ns(void) { return clock_ns(CLOCK_REALTIME); }
FX_INTERNAL uint64_t fx_boot_ms(void) { return clock_ns(CLOCK_BOOTTIME) / 1000000ull; }

/* ThreadSanitizer (make tsan) does not intercept sem_clockwait: tell it that a successful
 * wait acquires what the sem_post released, as its sem_wait interceptor does. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define FX_TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#else
#define FX_TSAN_ACQUIRE(addr) ((void)(addr))
#endif

FX_INTERNAL struct timespec fx_deadline_ts(uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (ms % 1000u) * 1000000u;
    ts.tv_sec += (time_t)(ms / 1000u + ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}

FX_INTERNAL bool fx_sem_wait_ms(sem_t *s, uint64_t ms)
{
    struct timespec ts = fx_deadline_ts(ms);
    for (;;) {
        if (sem_clockwait(s, CLOCK_MONOTONIC, &ts) == 0) {
            FX_TSAN_ACQUIRE(s); /* TSan intercepts sem_post but not sem_clockwait */
            return true;
        }
        if (errno != EINTR) return false;
    }
}

FX_INTERNAL int fx_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc) return rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (!rc) rc = pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

FX_INTERNAL bool fx_ct_equal(const void *a, size_t alen, const void *b, size_t blen)
{
    const volatile unsigned char *x = a, *y = b;
    size_t n = alen > blen ? alen : blen;
    unsigned char diff = (unsigned char)(alen != blen);
    for (size_t i = 0; i < n; i++) {
        unsigned char cx = i < alen ? x[i] : 0, cy = i < blen ? y[i] : 0;
        diff |= (unsigned char)(cx ^ cy);
    }
    return diff == 0;
}

FX_INTERNAL void fx_thread_name(pthread_t t, const char *what, const char *id)
{
    char name[16];
    snprintf(name, sizeof name, id && *id ? "fx-%s-%s" : "fx-%s", what, id);
    (void)pthread_setname_np(t, name);
}

FX_INTERNAL size_t fx_strlcpy(char *dst, const char *src, size_t cap)
{
    size_t n = strlen(src);
    if (cap) {
        size_t c = n < cap - 1 ? n : cap - 1;
        memcpy(dst, src, c);
        dst[c] = 0;
    }
    return n;
}
