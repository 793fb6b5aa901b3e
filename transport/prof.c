/* prof.c — the opt-in reactor profile (prof.h). */
#include "prof.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int prof_state; /* atomic: 0 unread, 1 off, 2 on */
static pthread_once_t prof_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t prof_key; /* frees a thread's table when it exits without a dump */
static bool prof_key_ok;

typedef struct prof_table {
    fx_prof_entry_t e[FX_PROF_ENTRIES];
    size_t n;
    uint64_t dropped, submit_ns, submits;
} prof_table_t;
static __thread prof_table_t *prof_tab; /* made at a thread's first entry, freed by its dump */

FX_INTERNAL bool fx_prof_on(void)
{
    int s = __atomic_load_n(&prof_state, __ATOMIC_RELAXED);
    if (FX_UNLIKELY(!s)) {
        const char *v = getenv("FLUXON_PROFILE");
        s = v && *v && strcmp(v, "0") ? 2 : 1;
        __atomic_store_n(&prof_state, s, __ATOMIC_RELAXED); /* the same answer from any thread */
    }
    return s == 2;
}

FX_INTERNAL uint64_t fx_prof_start(void) { return fx_prof_on() ? fx_now_ns() : 0; }

static void prof_key_make(void) { prof_key_ok = pthread_key_create(&prof_key, fx_free) == 0; }

static prof_table_t *prof_table(void)
{
    if (prof_tab) return prof_tab;
    pthread_once(&prof_key_once, prof_key_make);
    prof_tab = fx_calloc(1, sizeof *prof_tab);
    if (prof_tab && prof_key_ok) pthread_setspecific(prof_key, prof_tab); /* freed at the thread's exit */
    return prof_tab;
}

FX_INTERNAL bool fx_prof_table_made(void) { return prof_tab != NULL; }

FX_INTERNAL void fx_prof_reset(void)
{
    __atomic_store_n(&prof_state, 0, __ATOMIC_RELAXED);
    if (!prof_tab) return;
    if (prof_key_ok) pthread_setspecific(prof_key, NULL);
    fx_free(prof_tab);
    prof_tab = NULL;
}

FX_INTERNAL void fx_prof_add(const void *fn, const char *kind, uint64_t t0_ns)
{
    if (!t0_ns) return;
    uint64_t dt = fx_now_ns() - t0_ns;
    prof_table_t *t = prof_table();
    if (!t) return;
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].fn == fn && t->e[i].kind == kind) {
            t->e[i].ns += dt;
            t->e[i].n++;
            if (dt > t->e[i].max_ns) t->e[i].max_ns = dt;
            return;
        }
    if (t->n == FX_PROF_ENTRIES) {
        t->dropped++;
        return;
    }
    t->e[t->n++] = (fx_prof_entry_t){fn, kind, dt, 1, dt};
}

static uint64_t prof_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

FX_INTERNAL uint64_t fx_prof_cpu_start(void) { return fx_prof_on() ? prof_cpu_ns() : 0; }

FX_INTERNAL void fx_prof_submit(uint64_t cpu0)
{
    if (!cpu0) return;
    prof_table_t *t = prof_table();
    if (!t) return;
    t->submit_ns += prof_cpu_ns() - cpu0;
    t->submits++;
}

FX_INTERNAL size_t fx_prof_snapshot(fx_prof_entry_t *out, size_t cap, uint64_t *submit_ns, uint64_t *submits)
{
    prof_table_t *t = prof_tab;
    if (submit_ns) *submit_ns = t ? t->submit_ns : 0;
    if (submits) *submits = t ? t->submits : 0;
    if (!t) return 0;
    if (out) memcpy(out, t->e, FX_MIN(cap, t->n) * sizeof *out);
    return t->n;
}

static int prof_by_time(const void *a, const void *b)
{
    const fx_prof_entry_t *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

FX_INTERNAL void fx_prof_dump(void)
{
    prof_table_t *t = prof_tab;
    if (!t) return;
    prof_tab = NULL;
    if (prof_key_ok) pthread_setspecific(prof_key, NULL);
    char name[32] = "?";
    pthread_getname_np(pthread_self(), name, sizeof name);
    uint64_t total = 0;
    for (size_t i = 0; i < t->n; i++) total += t->e[i].ns;
    qsort(t->e, t->n, sizeof *t->e, prof_by_time);
    /* one buffer, one write: the threads of one process end together */
    char self[PATH_MAX] = ""; /* the program: dladdr names it as argv[0], which may not be a path */
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = 0;
    size_t cap = 256 + t->n * (160 + sizeof self), len = 0;
    char *buf = fx_malloc(cap);
    if (!buf) {
        fx_free(t);
        return;
    }
    len += (size_t)snprintf(buf + len, cap - len,
                            "fluxon profile %s: %.1f ms in callbacks (nested ones counted in both), io_uring "
                            "submissions %.1f ms of CPU in %llu calls%s\n",
                            name, (double)total / 1e6, (double)t->submit_ns / 1e6, (unsigned long long)t->submits,
                            t->dropped ? " (table full: some callbacks not counted)" : "");
    for (size_t i = 0; i < t->n && len < cap; i++) {
        const fx_prof_entry_t *e = &t->e[i];
        Dl_info di;
        char where[64 + PATH_MAX];
        if (dladdr(e->fn, &di) && di.dli_sname)
            snprintf(where, sizeof where, "%s", di.dli_sname);
        else if (dladdr(e->fn, &di) && di.dli_fname)
            snprintf(where, sizeof where, "%s+0x%lx", access(di.dli_fname, R_OK) == 0 || !self[0] ? di.dli_fname : self,
                     (unsigned long)((const char *)e->fn - (const char *)di.dli_fbase));
        else
            snprintf(where, sizeof where, "%p", e->fn);
        len += (size_t)snprintf(buf + len, cap - len, "fluxon profile %s: %10.2f ms %9llu calls %8.2f us/call %9.1f us max  %-14s %s\n",
                                name, (double)e->ns / 1e6, (unsigned long long)e->n, (double)e->ns / 1e3 / (double)e->n,
                                (double)e->max_ns / 1e3, e->kind, where);
    }
    fwrite(buf, 1, FX_MIN(len, cap - 1), stderr);
    fx_free(buf);
    fx_free(t);
}
