/* reactor.c — io_uring loop, timer heap, cross-thread posts and fd watches (reactor.h). */
#include "reactor.h"

#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <unistd.h>

#include "log.h"
#include "prof.h"

typedef struct reactor_post {
    struct reactor_post *next;
    void (*fn)(void *);
    void *arg;
} reactor_post_t;

struct fx_watch {
    fx_io_t io;
    fx_reactor_t *r;
    int fd;
    bool active, in_flight, in_cb; /* in_cb: its callback runs (an unwatch there frees it after) */
    void (*cb)(void *);
    void *arg;
};

struct fx_reactor {
    struct io_uring ring;
    bool stop;
    /* timers: binary min-heap on deadline_ns */
    fx_timer_t **heap;
    uint32_t heap_len, heap_cap;
    /* cross-thread posts */
    pthread_mutex_t post_lock;
    reactor_post_t *post_head, *post_tail;
    int efd;
    uint64_t efd_buf;
    fx_io_t efd_io;
    bool efd_armed;
    struct {
        bool (*fn)(void *);
        void *arg;
        uint64_t busy_gap_ns, last_ns;
    } idle[FX_REACTOR_IDLE_HOOKS];
    uint32_t n_idle;
    bool was_busy; /* the last iteration did not sleep */
    bool idle_busy; /* inside this iteration's idle hooks: one has kept the loop busy */
    uint64_t poll_ns;      /* fx_reactor_set_poll_ns: after a completion, no sleep for this long */
    uint64_t last_work_ns; /* when the last completion was handled (poll_ns > 0) */
    uint64_t poll_off_until_ns, poll_backoffs; /* long yields closed the window until then */
    uint64_t poll_backoff_ns;                   /* the last closing's length */
    uint64_t last_long_ns;                      /* the end of the last yield that lasted a time slice */
    void (*between)(void *); /* fx_reactor_set_between: run between the loop's callbacks */
    void *between_arg;
    bool in_loop_pass; /* inside fx_reactor_run */
    uint32_t cb_depth; /* callbacks running (a nested fx_reactor_poll from one: above 1) */
    uint64_t inflight; /* submitted operations with an fx_io whose CQE has not arrived */
    uint64_t submits;  /* hand-overs of the queued SQEs to the kernel (fx_reactor_submits) */
};

static void reactor_efd_arm(fx_reactor_t *r);

static void reactor_drain_posts(fx_reactor_t *r)
{
    pthread_mutex_lock(&r->post_lock);
    reactor_post_t *p = r->post_head;
    r->post_head = r->post_tail = NULL;
    pthread_mutex_unlock(&r->post_lock);
    while (p) {
        reactor_post_t *n = p->next;
        p->fn(p->arg);
        fx_free(p);
        p = n;
    }
}

static void reactor_on_efd(fx_reactor_t *r, fx_io_t *io, int res, uint32_t flags)
{
    r->efd_armed = false;
    if (res < 0 && res != -EAGAIN && res != -EINTR && res != -ECANCELED)
        FX_ERROR("reactor: eventfd read failed: %s", strerror(-res));
    reactor_drain_posts(r);
    if (!r->stop) reactor_efd_arm(r);
}

static void reactor_efd_arm(fx_reactor_t *r)
{
    if (r->efd_armed) return;
    struct io_uring_sqe *sqe = fx_reactor_sqe(r, &r->efd_io);
    io_uring_prep_read(sqe, r->efd, &r->efd_buf, sizeof r->efd_buf, 0);
    r->efd_armed = true;
}

FX_INTERNAL int fx_reactor_create(fx_reactor_t **r_p)
{
    fx_reactor_t *r = fx_calloc(1, sizeof *r);
    if (!r) return FLUXON_ERR_NOMEM;
    /* COOP_TASKRUN: a completion (a disk read, a socket) is not announced by an interrupt
     * to this thread; it is run at the thread's next system call, and TASKRUN_FLAG makes
     * liburing's peek enter the kernel for it (the loop's poll never misses one). Kernels
     * before 5.19 refuse the flags: then none. */
    int rc = io_uring_queue_init(256, &r->ring, IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG);
    if (rc == -EINVAL) rc = io_uring_queue_init(256, &r->ring, 0);
    if (rc < 0) {
        FX_ERROR("reactor: io_uring_queue_init failed: %s", strerror(-rc));
        fx_free(r);
        return rc == -ENOMEM ? FLUXON_ERR_NOMEM : FLUXON_ERR_INTERNAL;
    }
    r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->efd < 0) {
        FX_ERROR("reactor: eventfd failed: %m");
        io_uring_queue_exit(&r->ring);
        fx_free(r);
        return FLUXON_ERR_INTERNAL;
    }
    pthread_mutex_init(&r->post_lock, NULL);
    r->efd_io.cb = reactor_on_efd;
    *r_p = r;
    return FLUXON_OK;
}

FX_INTERNAL void fx_reactor_destroy(fx_reactor_t *r)
{
    if (!r) return;
    reactor_post_t *p = r->post_head;
    while (p) {
        reactor_post_t *n = p->next;
        fx_free(p);
        p = n;
    }
    io_uring_queue_exit(&r->ring);
    close(r->efd);
    pthread_mutex_destroy(&r->post_lock);
    fx_free(r->heap);
    fx_free(r);
}

FX_INTERNAL struct io_uring_sqe *fx_reactor_sqe(fx_reactor_t *r, fx_io_t *io)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    while (!sqe) {
        r->submits++;
        io_uring_submit(&r->ring);
        sqe = io_uring_get_sqe(&r->ring);
    }
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, io);
    if (io) r->inflight++;
    return sqe;
}

FX_INTERNAL uint64_t fx_reactor_submits(const fx_reactor_t *r) { return r->submits; }

FX_INTERNAL int fx_reactor_post(fx_reactor_t *r, void (*fn)(void *), void *arg)
{
    reactor_post_t *p = fx_malloc(sizeof *p);
    if (!p) return FLUXON_ERR_NOMEM;
    p->fn = fn;
    p->arg = arg;
    p->next = NULL;
    pthread_mutex_lock(&r->post_lock);
    if (r->post_tail) r->post_tail->next = p;
    else r->post_head = p;
    r->post_tail = p;
    pthread_mutex_unlock(&r->post_lock);
    uint64_t one = 1;
    ssize_t w = write(r->efd, &one, sizeof one);
    (void)w; /* EAGAIN only when the counter is saturated: already woken */
    return FLUXON_OK;
}

FX_INTERNAL void fx_reactor_stop(fx_reactor_t *r) { r->stop = true; }
FX_INTERNAL bool fx_reactor_stopping(const fx_reactor_t *r) { return r->stop; }

/* ---- timer heap ---- */
static void reactor_heap_swap(fx_reactor_t *r, uint32_t a, uint32_t b)
{
    fx_timer_t *t = r->heap[a];
    r->heap[a] = r->heap[b];
    r->heap[b] = t;
    r->heap[a]->heap_idx = a;
    r->heap[b]->heap_idx = b;
}
static void reactor_heap_up(fx_reactor_t *r, uint32_t i)
{
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (r->heap[p]->deadline_ns <= r->heap[i]->deadline_ns) break;
        reactor_heap_swap(r, i, p);
        i = p;
    }
}
static void reactor_heap_down(fx_reactor_t *r, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, m = i;
        if (l < r->heap_len && r->heap[l]->deadline_ns < r->heap[m]->deadline_ns) m = l;
        if (l + 1 < r->heap_len && r->heap[l + 1]->deadline_ns < r->heap[m]->deadline_ns) m = l + 1;
        if (m == i) break;
        reactor_heap_swap(r, i, m);
        i = m;
    }
}

FX_INTERNAL void fx_timer_init(fx_timer_t *t)
{
    t->heap_idx = UINT32_MAX;
    t->cb = NULL;
    t->deadline_ns = 0;
}
FX_INTERNAL bool fx_timer_armed(const fx_timer_t *t) { return t->heap_idx != UINT32_MAX; }

FX_INTERNAL void fx_timer_disarm(fx_reactor_t *r, fx_timer_t *t)
{
    if (!fx_timer_armed(t)) return;
    uint32_t i = t->heap_idx;
    FX_ASSERT(i < r->heap_len && r->heap[i] == t);
    r->heap_len--;
    if (i != r->heap_len) {
        r->heap[i] = r->heap[r->heap_len];
        r->heap[i]->heap_idx = i;
        reactor_heap_down(r, i);
        reactor_heap_up(r, i);
    }
    t->heap_idx = UINT32_MAX;
}

FX_INTERNAL void fx_timer_arm_ns(fx_reactor_t *r, fx_timer_t *t, uint64_t delay_ns, fx_timer_cb cb)
{
    fx_timer_disarm(r, t);
    if (r->heap_len == r->heap_cap) {
        uint32_t nc = r->heap_cap ? r->heap_cap * 2 : 64;
        fx_timer_t **nh = fx_realloc(r->heap, nc * sizeof *nh);
        FX_ASSERT(nh != NULL); /* a few bytes per timer; failure here is not recoverable */
        r->heap = nh;
        r->heap_cap = nc;
    }
    t->cb = cb;
    t->deadline_ns = fx_now_ns() + delay_ns;
    t->heap_idx = r->heap_len;
    r->heap[r->heap_len++] = t;
    reactor_heap_up(r, t->heap_idx);
}

FX_INTERNAL void fx_timer_arm(fx_reactor_t *r, fx_timer_t *t, uint64_t delay_ms, fx_timer_cb cb)
{
    fx_timer_arm_ns(r, t, delay_ms * 1000000ull, cb);
}

/* fx_reactor_set_between's hook, after a callback of the loop's own passes: never inside
 * a callback (a nested fx_reactor_poll's) nor inside itself */
static void reactor_between(fx_reactor_t *r)
{
    if (!r->between || !r->in_loop_pass || r->cb_depth) return;
    r->cb_depth++;
    r->between(r->between_arg);
    r->cb_depth--;
}

static void reactor_run_timers(fx_reactor_t *r)
{
    uint64_t now = fx_now_ns();
    while (r->heap_len && r->heap[0]->deadline_ns <= now) {
        fx_timer_t *t = r->heap[0];
        fx_timer_disarm(r, t);
        uint64_t t0 = fx_prof_start();
        fx_timer_cb cb = t->cb; /* t may be gone after it */
        r->cb_depth++;
        cb(r, t);
        r->cb_depth--;
        fx_prof_add((const void *)cb, "timer", t0);
        reactor_between(r);
    }
}

FX_INTERNAL void fx_reactor_run_due_timers(fx_reactor_t *r) { reactor_run_timers(r); }

FX_INTERNAL int fx_reactor_add_idle_hook(fx_reactor_t *r, bool (*hook)(void *), void *arg, uint64_t busy_gap_ns)
{
    if (r->n_idle == FX_REACTOR_IDLE_HOOKS) return FLUXON_ERR_NOMEM;
    uint32_t at = r->n_idle; /* the hooks without a gap (pollers) run before those with one */
    while (!busy_gap_ns && at > 0 && r->idle[at - 1].busy_gap_ns) at--;
    memmove(&r->idle[at + 1], &r->idle[at], (r->n_idle - at) * sizeof r->idle[0]);
    r->idle[at].fn = hook;
    r->idle[at].arg = arg;
    r->idle[at].busy_gap_ns = busy_gap_ns;
    r->idle[at].last_ns = 0;
    r->n_idle++;
    return FLUXON_OK;
}

/* The idle hooks of one iteration: true when one asks the loop not to sleep. While the
 * loop is kept busy, a hook with a busy_gap_ns runs at most that often; but before the
 * loop sleeps every hook has run in this iteration (UCX must be armed before a sleep). */
/* Hook i, profiled (prof.h) as "idle" when it found nothing to do, else "idle-busy". */
static bool reactor_idle_hook(fx_reactor_t *r, uint32_t i)
{
    uint64_t t0 = fx_prof_start();
    bool (*fn)(void *) = r->idle[i].fn; /* a hook may remove itself */
    r->cb_depth++; /* a nested poll's callbacks run no reactor_between */
    bool busy = fn(r->idle[i].arg);
    r->cb_depth--;
    fx_prof_add((const void *)fn, busy ? "idle-busy" : "idle", t0);
    return busy;
}

static bool reactor_run_idle_hooks(fx_reactor_t *r)
{
    bool busy = false;
    uint32_t skipped = 0;
    uint64_t now = 0;
    for (uint32_t i = 0; i < r->n_idle; i++) {
        if (r->idle[i].busy_gap_ns && r->was_busy) {
            if (!now) now = fx_now_ns();
            if (now - r->idle[i].last_ns < r->idle[i].busy_gap_ns) {
                skipped |= 1u << i;
                continue;
            }
            r->idle[i].last_ns = now;
        }
        r->idle_busy = busy;
        busy |= reactor_idle_hook(r, i);
    }
    for (uint32_t i = 0; !busy && skipped && i < r->n_idle; i++)
        if (skipped & (1u << i)) {
            r->idle_busy = busy;
            busy |= reactor_idle_hook(r, i);
        }
    r->idle_busy = false;
    r->was_busy = busy;
    return busy;
}

FX_INTERNAL bool fx_reactor_idle_kept_busy(const fx_reactor_t *r) { return r->idle_busy; }

FX_INTERNAL void fx_reactor_del_idle_hook(fx_reactor_t *r, bool (*hook)(void *), void *arg)
{
    for (uint32_t i = 0; i < r->n_idle; i++)
        if (r->idle[i].fn == hook && r->idle[i].arg == arg) {
            memmove(&r->idle[i], &r->idle[i + 1], (r->n_idle - i - 1) * sizeof r->idle[0]);
            r->n_idle--;
            return;
        }
}

/* ---- fd watches ---- */
static void reactor_watch_arm(fx_watch_t *w)
{
    struct io_uring_sqe *sqe = fx_reactor_sqe(w->r, &w->io);
    io_uring_prep_poll_add(sqe, w->fd, POLLIN);
    w->in_flight = true;
}

static void reactor_on_watch(fx_reactor_t *r, fx_io_t *io, int res, uint32_t flags)
{
    fx_watch_t *w = FX_CONTAINER_OF(io, fx_watch_t, io);
    w->in_flight = false;
    if (!w->active) {
        fx_free(w);
        return;
    }
    w->in_cb = true;
    w->cb(w->arg);
    w->in_cb = false;
    if (w->active) reactor_watch_arm(w);
    else fx_free(w);
}

FX_INTERNAL int fx_reactor_watch_fd(fx_reactor_t *r, int fd, void (*cb)(void *), void *arg,
                                    fx_watch_t **w_p)
{
    fx_watch_t *w = fx_calloc(1, sizeof *w);
    if (!w) return FLUXON_ERR_NOMEM;
    w->io.cb = reactor_on_watch;
    w->r = r;
    w->fd = fd;
    w->cb = cb;
    w->arg = arg;
    w->active = true;
    reactor_watch_arm(w);
    *w_p = w;
    return FLUXON_OK;
}

FX_INTERNAL void fx_reactor_unwatch(fx_reactor_t *r, fx_watch_t *w)
{
    if (!w) return;
    w->active = false;
    if (w->in_cb) return; /* reactor_on_watch frees it once the callback returns */
    if (w->in_flight) {
        struct io_uring_sqe *sqe = fx_reactor_sqe(r, NULL);
        io_uring_prep_poll_remove(sqe, (__u64)(uintptr_t)&w->io);
        /* freed when its poll completes (-ECANCELED) */
    } else {
        fx_free(w);
    }
}

/* ---- the loop ---- */
static int reactor_reap(fx_reactor_t *r)
{
    struct io_uring_cqe *cqe;
    int n = 0;
    while (io_uring_peek_cqe(&r->ring, &cqe) == 0 && cqe) {
        fx_io_t *io = io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        uint32_t fl = cqe->flags;
        io_uring_cqe_seen(&r->ring, cqe);
        if (io) {
            r->inflight--;
            uint64_t t0 = fx_prof_start();
            fx_io_cb cb = io->cb; /* io may be gone after it */
            r->cb_depth++;
            cb(r, io, res, fl);
            r->cb_depth--;
            fx_prof_add((const void *)cb, "io", t0);
            n++;
            reactor_between(r);
        }
    }
    if (n && r->poll_ns) r->last_work_ns = fx_now_ns();
    return n;
}

/* The poll window (fx_reactor_set_poll_ns): a completion came less than poll_ns ago, so the
 * loop looks again instead of sleeping, after yielding the CPU (a thread this poll would
 * keep waiting runs at once on this core; with none runnable the call returns at once).
 * A yield that lasts a time slice means a thread that does not yield (a busy engine thread)
 * held this core: a looking loop waits for its whole slice each time (measured: replies
 * 56 us -> 1.9-3.9 ms), where a sleeping one would be woken ahead of it. Two such yields
 * within REACTOR_POLL_LONG_GAP_NS (one alone may be the hypervisor's: on this VM a back-off
 * at every long yield closed the window for most of each replay) close the window, 100 ms
 * the first time, twice as long each time it closes again within a second of reopening (at
 * most 10 s): the loop sleeps and is woken as without one. */
#define REACTOR_POLL_LONG_YIELD_NS 1000000ull
#define REACTOR_POLL_LONG_GAP_NS 20000000ull
#define REACTOR_POLL_BACKOFF_MIN_NS 100000000ull
#define REACTOR_POLL_BACKOFF_MAX_NS 10000000000ull
static bool reactor_poll_window(fx_reactor_t *r)
{
    if (!r->poll_ns || r->stop) return false;
    uint64_t now = fx_now_ns();
    if (now - r->last_work_ns >= r->poll_ns || now < r->poll_off_until_ns) return false;
    r->was_busy = true; /* the gapped idle hooks (UCX) keep their pace meanwhile */
    sched_yield();
    uint64_t back = fx_now_ns();
    if (back - now > FX_MAX(r->poll_ns, REACTOR_POLL_LONG_YIELD_NS)) {
        if (r->last_long_ns && back - r->last_long_ns < REACTOR_POLL_LONG_GAP_NS) {
            bool again = r->poll_off_until_ns && back - r->poll_off_until_ns < 1000000000ull;
            r->poll_backoff_ns = again ? FX_MIN(2 * r->poll_backoff_ns, REACTOR_POLL_BACKOFF_MAX_NS)
                                       : REACTOR_POLL_BACKOFF_MIN_NS;
            r->poll_off_until_ns = back + r->poll_backoff_ns;
            r->poll_backoffs++;
            back = 0; /* the next long yield starts a new pair */
        }
        r->last_long_ns = back;
    }
    return true;
}

FX_INTERNAL uint64_t fx_reactor_poll_backoffs(const fx_reactor_t *r) { return r->poll_backoffs; }

FX_INTERNAL void fx_reactor_set_poll_ns(fx_reactor_t *r, uint64_t ns) { r->poll_ns = ns; }

FX_INTERNAL void fx_reactor_set_between(fx_reactor_t *r, void (*fn)(void *arg), void *arg)
{
    r->between = fn;
    r->between_arg = arg;
}

FX_INTERNAL int fx_reactor_poll(fx_reactor_t *r, uint32_t timeout_ms)
{
    struct __kernel_timespec ts = {(long long)(timeout_ms / 1000u), (long long)(timeout_ms % 1000u) * 1000000ll};
    struct io_uring_cqe *cqe = NULL;
    r->submits++;
    uint64_t c0 = fx_prof_cpu_start(); /* CPU time: the wait itself is not counted */
    io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, &ts, NULL);
    fx_prof_submit(c0);
    return reactor_reap(r);
}

FX_INTERNAL void fx_reactor_run_timers_due(fx_reactor_t *r) { reactor_run_timers(r); }

FX_INTERNAL int fx_reactor_run(fx_reactor_t *r)
{
    reactor_efd_arm(r);
    r->in_loop_pass = true;
    while (!r->stop) {
        /* completions that arrived while this thread was busy (or not scheduled) are handled
         * before timers: a reply already here never loses to its own timeout */
        reactor_reap(r);
        if (r->stop) break;
        reactor_run_timers(r);
        if (r->stop) break;
        if (reactor_run_idle_hooks(r) || reactor_poll_window(r)) {
            /* a hook has more to do (UCX progress, ring polling), or the poll window is
             * open: no wait, and no system call unless something is queued; completions
             * are read from the shared CQ */
            if (io_uring_sq_ready(&r->ring)) {
                r->submits++;
                uint64_t c0 = fx_prof_cpu_start();
                io_uring_submit(&r->ring);
                fx_prof_submit(c0);
            }
            reactor_reap(r);
            continue;
        }
        if (r->stop) break; /* a hook stopped the loop: no wait */
        struct __kernel_timespec ts = {0, 0}, *tsp = NULL;
        if (r->heap_len) {
            uint64_t now = fx_now_ns(), d = r->heap[0]->deadline_ns;
            uint64_t wait = d > now ? d - now : 0;
            ts.tv_sec = (long long)(wait / 1000000000ull);
            ts.tv_nsec = (long long)(wait % 1000000000ull);
            tsp = &ts;
        }
        struct io_uring_cqe *cqe = NULL;
        r->submits++;
        uint64_t c0 = fx_prof_cpu_start(); /* CPU time: the wait itself is not counted */
        int rc = io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, tsp, NULL);
        fx_prof_submit(c0);
        if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN) {
            FX_ERROR("reactor: io_uring wait failed: %s", strerror(-rc));
            r->in_loop_pass = false;
            fx_prof_dump();
            return FLUXON_ERR_INTERNAL;
        }
        reactor_reap(r);
        /* issue 18: what the completions queued (replies first of all) goes out now, not
         * after the next turn's timers and idle hook (UCX progress) */
        if (io_uring_sq_ready(&r->ring)) {
            r->submits++;
            uint64_t c1 = fx_prof_cpu_start();
            io_uring_submit(&r->ring);
            fx_prof_submit(c1);
        }
    }
    r->in_loop_pass = false;
    fx_prof_dump(); /* FLUXON_PROFILE (prof.h): this thread's table */
    return FLUXON_OK;
}

FX_INTERNAL void fx_reactor_drain(fx_reactor_t *r, uint32_t timeout_ms)
{
    if (r->efd_armed) {
        struct io_uring_sqe *sqe = fx_reactor_sqe(r, NULL);
        io_uring_prep_cancel64(sqe, (__u64)(uintptr_t)&r->efd_io, 0);
    }
    uint64_t end = fx_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (r->inflight > 0) {
        uint64_t now = fx_now_ns();
        if (now >= end) {
            FX_WARN("reactor: %llu operations still in flight at shutdown",
                    (unsigned long long)r->inflight);
            break;
        }
        struct __kernel_timespec ts = {0, (long long)FX_MIN(end - now, 50000000ull)};
        struct io_uring_cqe *cqe = NULL;
        r->submits++;
        io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, &ts, NULL);
        reactor_reap(r);
    }
    reactor_drain_posts(r);
    fx_prof_dump(); /* FLUXON_PROFILE: what the shutdown did after the loop */
}
