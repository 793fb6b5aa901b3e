/* prof.h — an opt-in profile of where a reactor thread's time goes (env FLUXON_PROFILE=1):
 * per completion, timer and idle-hook callback and per message type handled, the wall time
 * spent in it and how often; and the CPU time of the thread's io_uring submissions (the
 * system calls that also start disk and socket I/O). Each reactor thread writes its table to
 * stderr when its loop ends (fx_reactor_run): asked for by the environment, so printed
 * whatever the log level.
 *
 * Why not only perf: on this project's VM perf can only sample cpu-clock (no PMU), and its
 * samples gather on the instructions where a timer interrupt gets delivered, not where the
 * time goes: `perf annotate` put 54 ms of the trace replay on the write-back sketch's one
 * load, which rdtsc around the same call measured at 10 ms (46 ns a call, 230,000 calls).
 * Timing the callbacks themselves does not depend on where interrupts land. Wall time: a
 * callback preempted by another thread (one CPU shared) counts that thread's time too; the
 * ring-polling idle hook counts its polling.
 *
 * Off (the default), each callback costs two calls that test a cached flag. On, two clock reads
 * (vDSO, ~25 ns) and a lookup in a small per-thread table; submissions add two reads of the
 * thread's CPU clock. Thread-safe: each thread has its own table. */
#ifndef FX_PROF_H
#define FX_PROF_H

#include "fx.h"

/* FLUXON_PROFILE is set and not "0" (read once per process). */
FX_INTERNAL bool fx_prof_on(void);
/* A start time for fx_prof_add: fx_now_ns() when profiling, else 0. */
FX_INTERNAL uint64_t fx_prof_start(void);
/* fn (a callback, or a message handler: kind then names the message) ran since t0_ns.
 * Nothing when t0_ns is 0 (profiling off). The table keeps FX_PROF_ENTRIES pairs of (fn,
 * kind) a thread; later ones are counted as dropped. kind must be a string that outlives
 * the thread (a literal, a message name). */
#define FX_PROF_ENTRIES 128
FX_INTERNAL void fx_prof_add(const void *fn, const char *kind, uint64_t t0_ns);
/* The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), 0 when profiling is off. */
FX_INTERNAL uint64_t fx_prof_cpu_start(void);
/* A submission that started at cpu0 (fx_prof_cpu_start) ended. */
FX_INTERNAL void fx_prof_submit(uint64_t cpu0);

typedef struct fx_prof_entry {
    const void *fn;
    const char *kind;
    uint64_t ns, n;
    uint64_t max_ns; /* the longest call: one long callback holds every request behind it */
} fx_prof_entry_t;
/* Copies the calling thread's entries (at most cap) into out; returns how many it has.
 * *submit_ns, *submits: its submissions (either may be NULL). */
FX_INTERNAL size_t fx_prof_snapshot(fx_prof_entry_t *out, size_t cap, uint64_t *submit_ns, uint64_t *submits);
/* Whether the calling thread has a table (tests: profiling off never makes one). */
FX_INTERNAL bool fx_prof_table_made(void);
/* Tests: FLUXON_PROFILE is read again at the next fx_prof_on; this thread's table goes. */
FX_INTERNAL void fx_prof_reset(void);
/* Writes the calling thread's table to stderr, largest first, each callback named by its symbol
 * or by its module and offset (`addr2line -f -e MODULE 0xOFFSET` names a static one), then
 * empties it. Nothing when the table is empty. A thread that ends without a dump has its
 * table freed, unwritten. fx_reactor_run dumps when its loop ends, fx_reactor_drain when
 * it is done (what a node's shutdown did after the loop). */
FX_INTERNAL void fx_prof_dump(void);

#endif
