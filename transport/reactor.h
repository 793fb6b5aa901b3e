/* reactor.h — the single-threaded io_uring event loop each role instance runs (Redis'
 * ae.c model: one thread owns all of the role's state). It drives socket operations
 * submitted by other modules, a timer heap, cross-thread posts (MPSC queue + eventfd)
 * and an idle hook where the UCX worker is progressed and armed before sleeping. */
#ifndef FX_REACTOR_H
#define FX_REACTOR_H

#include <liburing.h>

#include "fx.h"

typedef struct fx_reactor fx_reactor_t;
typedef struct fx_io fx_io_t;

/* An in-flight io_uring operation. Embed it in the object that owns the operation; the
 * object must stay alive until cb ran. res is the CQE result (>= 0 or -errno). */
typedef void (*fx_io_cb)(fx_reactor_t *r, fx_io_t *io, int res, uint32_t cqe_flags);
struct fx_io {
    fx_io_cb cb;
};

typedef struct fx_timer fx_timer_t;
typedef void (*fx_timer_cb)(fx_reactor_t *r, fx_timer_t *t);
struct fx_timer {
    uint64_t deadline_ns;
    fx_timer_cb cb;
    uint32_t heap_idx; /* UINT32_MAX when not armed */
};

FX_INTERNAL int fx_reactor_create(fx_reactor_t **r_p);
/* Frees the reactor; posts still queued are dropped (their fn is called with run=false
 * semantics: not at all). Operations still in flight must have been cancelled. */
FX_INTERNAL void fx_reactor_destroy(fx_reactor_t *r);

/* Runs until fx_reactor_stop is called from the reactor thread (or posted). */
FX_INTERNAL int fx_reactor_run(fx_reactor_t *r);
FX_INTERNAL void fx_reactor_stop(fx_reactor_t *r);
FX_INTERNAL bool fx_reactor_stopping(const fx_reactor_t *r);
/* After run returned: processes completions until every submitted operation has
 * completed (their owners free themselves in their callbacks) or timeout_ms passed,
 * then runs the posts still queued. Used by orderly shutdown. */
FX_INTERNAL void fx_reactor_drain(fx_reactor_t *r, uint32_t timeout_ms);

/* Outside the loop (a store closing, a test driving I/O): submits what is queued, waits at
 * most timeout_ms for a completion and runs the callbacks of those that arrived (not the
 * timers, not the posts). Returns how many ran. Reactor thread only. */
FX_INTERNAL int fx_reactor_poll(fx_reactor_t *r, uint32_t timeout_ms);
/* Outside the loop (a test driving a module's timers): runs the timers due now. Reactor
 * thread only. */
FX_INTERNAL void fx_reactor_run_timers_due(fx_reactor_t *r);

/* Returns a zeroed SQE whose user_data is io (NULL io: completion ignored). Submits
 * pending SQEs first when the ring is full; never returns NULL. Reactor thread only. */
FX_INTERNAL struct io_uring_sqe *fx_reactor_sqe(fx_reactor_t *r, fx_io_t *io);

/* How many times the SQEs queued were handed to the kernel. An SQE from fx_reactor_sqe
 * has not been submitted (its fields may still change, e.g. a read grown to cover the
 * next record) while this count is what it was right after fx_reactor_sqe returned it.
 * Reactor thread only. */
FX_INTERNAL uint64_t fx_reactor_submits(const fx_reactor_t *r);

/* Thread-safe: queues fn(arg) to run on the reactor thread and wakes it.
 * Returns FLUXON_OK or FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_reactor_post(fx_reactor_t *r, void (*fn)(void *arg), void *arg);

/* The poll window (0, the default: none): after the loop handled a completion (a message, a
 * posted call), it does not sleep for ns but looks at its completion queue again, yielding
 * the CPU between looks (sched_yield), so a message that follows within ns is handled without
 * a wake-up. A wake-up through the kernel costs the loop and the CPUs around it more than the
 * looks: the master's (idle_poll_us) took the trace replay on 2 vCPUs from 9,054 to 10,606
 * (30 us) and 11,927 (100 us) requests/s, 5 interleaved runs, its process CPU from 217 to 151
 * us a request. Yields that each last a time slice close it for a while (below). Reactor
 * thread, or before the loop runs. */
FX_INTERNAL void fx_reactor_set_poll_ns(fx_reactor_t *r, uint64_t ns);
/* fn(arg) runs after each completion and timer callback of fx_reactor_run's own passes
 * (never inside a nested fx_reactor_poll): a short look for urgent work between long
 * callbacks. NULL: none. Reactor thread only. */
FX_INTERNAL void fx_reactor_set_between(fx_reactor_t *r, void (*fn)(void *arg), void *arg);
/* How many times two yields in the window within 20 ms each lasted a time slice (a thread
 * that does not yield shares this core: a looking loop would wait for its whole slice each
 * time), each closing the window for 100 ms, doubling while it goes on (at most 10 s): the
 * loop sleeps and is woken as without one. Reactor thread. */
FX_INTERNAL uint64_t fx_reactor_poll_backoffs(const fx_reactor_t *r);

/* Timers (reactor thread only). Arming an armed timer re-arms it. */
FX_INTERNAL void fx_timer_init(fx_timer_t *t);
FX_INTERNAL void fx_timer_arm(fx_reactor_t *r, fx_timer_t *t, uint64_t delay_ms, fx_timer_cb cb);
FX_INTERNAL void fx_timer_arm_ns(fx_reactor_t *r, fx_timer_t *t, uint64_t delay_ns, fx_timer_cb cb);
FX_INTERNAL void fx_timer_disarm(fx_reactor_t *r, fx_timer_t *t);
FX_INTERNAL bool fx_timer_armed(const fx_timer_t *t);
/* Runs the timers whose deadline passed, without the loop: a role driven in-process
 * (the fuzz targets of test/fuzz, on a clock they control) fires its timers this way. */
FX_INTERNAL void fx_reactor_run_due_timers(fx_reactor_t *r);

/* Idle hooks (at most FX_REACTOR_IDLE_HOOKS; those without a busy gap first, each kind in
 * the order added) run each loop iteration
 * before the reactor sleeps; one returning true keeps the loop from sleeping (more work
 * pending: ucp_worker_arm said BUSY; the owner polls its rings): the loop then reads
 * completions without a system call. While the loop is kept busy, a hook with busy_gap_ns
 * > 0 runs at most once per busy_gap_ns (UCX progress and arm cost system calls; the ring
 * poll must not wait for them), but every hook runs in the iteration before the loop
 * sleeps. Reactor thread (or before the loop runs), never from inside an idle hook (the
 * iteration tracks hooks by index). add: FLUXON_ERR_NOMEM when full; del of a hook never
 * added does nothing. */
#define FX_REACTOR_IDLE_HOOKS 4
FX_INTERNAL int fx_reactor_add_idle_hook(fx_reactor_t *r, bool (*hook)(void *arg), void *arg, uint64_t busy_gap_ns);
FX_INTERNAL void fx_reactor_del_idle_hook(fx_reactor_t *r, bool (*hook)(void *arg), void *arg);
/* Inside an idle hook: true when a hook before it in this iteration already keeps the loop
 * from sleeping, so this one need not prepare for a sleep (UCX: progress without the arm,
 * whose event-fd drain is a system call); it runs again before any sleep. */
FX_INTERNAL bool fx_reactor_idle_kept_busy(const fx_reactor_t *r);

/* Watches fd for readability (one-shot poll re-armed after each callback) and calls
 * cb(arg) on the reactor thread: the hook point for the UCX worker's event fd. After
 * fx_reactor_unwatch (also from inside cb) cb is never called again. */
typedef struct fx_watch fx_watch_t;
FX_INTERNAL int fx_reactor_watch_fd(fx_reactor_t *r, int fd, void (*cb)(void *arg), void *arg,
                                    fx_watch_t **w_p);
FX_INTERNAL void fx_reactor_unwatch(fx_reactor_t *r, fx_watch_t *w);

#endif
