/* test_reactor_idle.c — Criterion suite for the reactor's idle hooks (transport/reactor.c):
 * hooks without a busy gap (ring pollers) run before those with one (UCX), whatever the
 * order they were added in; a later hook learns whether an earlier one keeps the loop from
 * sleeping (then UCX progresses without arming its event fd), and every hook runs with
 * the flag clear in the iteration before the loop sleeps; a poll window keeps the loop
 * looking after a completion, then lets it sleep, and closes where a thread that never
 * yields shares its core. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reactor.h"

#define IDLE_PASSES 5 /* the poller keeps the loop busy for this many iterations */

typedef struct idle_log {
    fx_reactor_t *r;
    int poller_calls, gapped_calls;
    int order_ok;       /* the gapped hook found the poller already called in this iteration */
    int busy_seen;      /* gapped-hook calls that saw fx_reactor_idle_kept_busy */
    int clear_seen;     /* gapped-hook calls that saw it clear */
    int after_last_pass; /* the gapped hook ran after the poller stopped keeping the loop busy */
    int poller_in_iter;
} idle_log_t;

static bool idle_poller(void *arg)
{
    idle_log_t *l = arg;
    l->poller_calls++;
    l->poller_in_iter = 1;
    return l->poller_calls <= IDLE_PASSES;
}

static bool idle_gapped(void *arg)
{
    idle_log_t *l = arg;
    l->gapped_calls++;
    l->order_ok += l->poller_in_iter;
    l->poller_in_iter = 0;
    if (fx_reactor_idle_kept_busy(l->r)) {
        l->busy_seen++;
    } else {
        l->clear_seen++;
        if (l->poller_calls > IDLE_PASSES) {
            l->after_last_pass = 1;
            fx_reactor_stop(l->r); /* the loop would sleep now: the test is over */
        }
    }
    return false;
}

/* the bound of every loop here: a hook that never stops it fails the test, not hangs it */
static void idle_deadline(fx_reactor_t *r, fx_timer_t *t)
{
    (void)t;
    fx_reactor_stop(r);
}

Test(reactor_idle, pollers_run_first_and_later_hooks_see_the_loop_kept_busy)
{
    fx_reactor_t *r = NULL;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    fx_timer_t deadline;
    fx_timer_init(&deadline);
    fx_timer_arm(r, &deadline, 2000, idle_deadline);
    idle_log_t l = {.r = r};
    /* the gapped hook is added first, as the owner adds UCX before its ring poller; a gap
     * of 0 ns never skips it, so it runs in every iteration */
    cr_assert_eq(fx_reactor_add_idle_hook(r, idle_gapped, &l, 1), FLUXON_OK);
    cr_assert_eq(fx_reactor_add_idle_hook(r, idle_poller, &l, 0), FLUXON_OK);
    cr_assert_eq(fx_reactor_run(r), FLUXON_OK);
    cr_assert(l.after_last_pass, "the gapped hook ran before the loop would sleep");
    cr_assert_eq(l.order_ok, l.gapped_calls, "the poller ran before the gapped hook in each iteration (%d of %d)",
                 l.order_ok, l.gapped_calls);
    cr_assert_geq(l.busy_seen, 1, "the gapped hook saw the loop kept busy by the poller");
    cr_assert_leq(l.busy_seen, IDLE_PASSES);
    cr_assert_eq(l.clear_seen, 1, "only the last iteration (no poller work) prepared for a sleep");
    fx_reactor_del_idle_hook(r, idle_poller, &l);
    fx_reactor_del_idle_hook(r, idle_gapped, &l);
    fx_timer_disarm(r, &deadline);
    fx_reactor_destroy(r);
}

static bool idle_never_busy(void *arg)
{
    (*(int *)arg)++;
    return false;
}

static int idle_flag_in_hook;
static fx_reactor_t *idle_flag_r;

static bool idle_record_flag(void *arg)
{
    idle_flag_in_hook = fx_reactor_idle_kept_busy(idle_flag_r) ? 1 : 2;
    fx_reactor_stop(idle_flag_r);
    return false;
}

Test(reactor_idle, nothing_busy_leaves_the_flag_clear_and_outside_hooks_it_is_false)
{
    fx_reactor_t *r = NULL;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    idle_flag_r = r;
    fx_timer_t deadline;
    fx_timer_init(&deadline);
    fx_timer_arm(r, &deadline, 2000, idle_deadline);
    int calls = 0;
    cr_assert_not(fx_reactor_idle_kept_busy(r), "outside a hook the flag is clear");
    cr_assert_eq(fx_reactor_add_idle_hook(r, idle_never_busy, &calls, 0), FLUXON_OK);
    cr_assert_eq(fx_reactor_add_idle_hook(r, idle_record_flag, NULL, 20000), FLUXON_OK);
    cr_assert_eq(fx_reactor_run(r), FLUXON_OK);
    cr_assert_eq(calls, 1);
    cr_assert_eq(idle_flag_in_hook, 2, "no hook kept the loop busy: the flag is clear");
    cr_assert_not(fx_reactor_idle_kept_busy(r), "cleared after the hooks ran");
    fx_timer_disarm(r, &deadline);
    fx_reactor_destroy(r);
}

/* The poll window (fx_reactor_set_poll_ns, the master's idle_poll_us): after a completion (a
 * posted call here, as a message would be) the loop looks again instead of sleeping while
 * the window is open, and sleeps once it is over; without a window it sleeps at once. */
typedef struct poll_log {
    int passes;
    uint64_t last_ns; /* the last pass */
} poll_log_t;

static bool poll_pass(void *arg)
{
    poll_log_t *l = arg;
    l->passes++;
    l->last_ns = fx_now_ns();
    return false;
}

static void poll_posted(void *arg) { (void)arg; }

static poll_log_t poll_run(uint64_t window_ns, uint32_t run_ms)
{
    fx_reactor_t *r = NULL;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    fx_reactor_set_poll_ns(r, window_ns);
    fx_timer_t deadline;
    fx_timer_init(&deadline);
    fx_timer_arm(r, &deadline, run_ms, idle_deadline);
    poll_log_t l = {0, 0};
    cr_assert_eq(fx_reactor_add_idle_hook(r, poll_pass, &l, 0), FLUXON_OK);
    cr_assert_eq(fx_reactor_post(r, poll_posted, NULL), FLUXON_OK);
    cr_assert_eq(fx_reactor_run(r), FLUXON_OK);
    fx_reactor_del_idle_hook(r, poll_pass, &l);
    fx_reactor_destroy(r);
    return l;
}

Test(reactor_idle, a_poll_window_looks_again_after_a_completion_then_sleeps)
{
    poll_log_t none = poll_run(0, 100);
    cr_assert_leq(none.passes, 10, "no window: the loop sleeps until its timer (%d passes)", none.passes);
    poll_log_t open = poll_run(10ull * 1000000000ull, 100); /* the window outlasts the run */
    cr_assert_gt(open.passes, 100, "the window keeps the loop looking (%d passes in 100 ms)", open.passes);
    uint64_t t0 = fx_now_ns();
    poll_log_t over = poll_run(20ull * 1000000ull, 400); /* 20 ms, then the loop sleeps */
    cr_assert_gt(over.passes, 10, "it looked during the window (%d passes)", over.passes);
    cr_assert_lt(over.last_ns - t0, 200ull * 1000000ull, "and slept after it: its last look was %.1f ms in",
                 (double)(over.last_ns - t0) / 1e6);
}

/* A poll window on a core a thread that never yields shares (a busy engine thread): a yield
 * there lasts the other thread's time slice, so a looking loop would answer each message a
 * slice late (measured 1.9-3.9 ms), where a sleeping one is woken ahead of it. The window
 * closes after two such yields: replies stay within 1 ms at the median (about 60 us here). */
static int hog_pa[2], hog_pb[2];
static fx_reactor_t *hog_r;
static volatile int hog_run = 1, hog_done;
static char hog_byte = 'x';

static void hog_pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void hog_on_msg(void *arg)
{
    (void)arg;
    char b[64];
    while (read(hog_pa[0], b, sizeof b) > 0) {
    }
    io_uring_prep_write(fx_reactor_sqe(hog_r, NULL), hog_pb[1], &hog_byte, 1, 0);
}

static void *hog_spin(void *arg)
{
    hog_pin(*(int *)arg);
    while (hog_run) {
    }
    return NULL;
}

#define HOG_MSGS 60
static uint64_t hog_lat[HOG_MSGS];

static void *hog_driver(void *arg)
{
    hog_pin(*(int *)arg);
    for (int i = 0; i < HOG_MSGS; i++) {
        char c;
        uint64_t t0 = fx_now_ns();
        if (write(hog_pa[1], "m", 1) != 1 || read(hog_pb[0], &c, 1) != 1) break;
        hog_lat[i] = fx_now_ns() - t0;
        usleep(i & 1 ? 2000 : 20); /* within the window, then after it */
    }
    hog_done = 1;
    return NULL;
}

static void hog_until_done(fx_reactor_t *r, fx_timer_t *t)
{
    if (hog_done) fx_reactor_stop(r);
    else fx_timer_arm(r, t, 5, hog_until_done);
}

static int hog_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

Test(reactor_idle, a_thread_that_never_yields_on_its_core_closes_the_window, .timeout = 30)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) cr_skip_test("needs 2 CPUs (the hog's and the driver's)");
    int here = 0, there = 1;
    hog_pin(here);
    cr_assert_eq(pipe2(hog_pa, O_NONBLOCK), 0);
    cr_assert_eq(pipe(hog_pb), 0);
    cr_assert_eq(fx_reactor_create(&hog_r), FLUXON_OK);
    fx_reactor_set_poll_ns(hog_r, 100000); /* the master's and a client's default */
    fx_watch_t *w = NULL;
    cr_assert_eq(fx_reactor_watch_fd(hog_r, hog_pa[0], hog_on_msg, NULL, &w), FLUXON_OK);
    pthread_t h, d;
    cr_assert_eq(pthread_create(&h, NULL, hog_spin, &here), 0);
    cr_assert_eq(pthread_create(&d, NULL, hog_driver, &there), 0);
    fx_timer_t t, deadline;
    fx_timer_init(&t);
    fx_timer_init(&deadline);
    fx_timer_arm(hog_r, &t, 5, hog_until_done);
    fx_timer_arm(hog_r, &deadline, 20000, idle_deadline); /* the bound: a stuck loop fails, not hangs */
    cr_assert_eq(fx_reactor_run(hog_r), FLUXON_OK);
    hog_run = 0;
    pthread_join(d, NULL);
    pthread_join(h, NULL);
    cr_assert(hog_done, "every message answered before the deadline");
    qsort(hog_lat, HOG_MSGS, sizeof hog_lat[0], hog_cmp);
    cr_assert_lt(hog_lat[HOG_MSGS / 2], 1000000, "median reply %.1f us (a slice late: ms)", hog_lat[HOG_MSGS / 2] / 1e3);
    fx_reactor_unwatch(hog_r, w);
    fx_timer_disarm(hog_r, &t);
    fx_timer_disarm(hog_r, &deadline);
    fx_reactor_drain(hog_r, 100);
    fx_reactor_destroy(hog_r);
    close(hog_pa[0]), close(hog_pa[1]), close(hog_pb[0]), close(hog_pb[1]);
}

/* fx_reactor_set_between (the owner's look at its rings between long callbacks): the hook
 * runs after each callback of the loop's own passes, never inside one (a callback's nested
 * fx_reactor_poll runs callbacks too), and not at all once it is unset. */
static char btw_log[32];
static int btw_n;
static fx_timer_t btw_t[3];

static void btw_mark(char c)
{
    if (btw_n < (int)sizeof btw_log - 1) btw_log[btw_n++] = c;
}
static void btw_hook(void *arg)
{
    (void)arg;
    btw_mark('b');
}
static void btw_posted(void *arg)
{
    (void)arg;
    btw_mark('p');
}
static void btw_timer(fx_reactor_t *r, fx_timer_t *t)
{
    int i = (int)(t - btw_t);
    btw_mark((char)('1' + i));
    if (i == 1) { /* a nested poll: the post's completion runs inside this callback */
        cr_assert_eq(fx_reactor_post(r, btw_posted, NULL), FLUXON_OK);
        for (int k = 0; k < 100 && !memchr(btw_log, 'p', (size_t)btw_n); k++) fx_reactor_poll(r, 10);
    }
    if (i == 2) fx_reactor_stop(r);
}

static void btw_run(bool hooked)
{
    fx_reactor_t *r = NULL;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    memset(btw_log, 0, sizeof btw_log);
    btw_n = 0;
    if (hooked) fx_reactor_set_between(r, btw_hook, NULL);
    fx_timer_t deadline;
    fx_timer_init(&deadline);
    fx_timer_arm(r, &deadline, 5000, idle_deadline);
    for (int i = 0; i < 3; i++) {
        fx_timer_init(&btw_t[i]);
        fx_timer_arm_ns(r, &btw_t[i], (uint64_t)i * 1000u, btw_timer);
    }
    fx_reactor_run(r);
    fx_timer_disarm(r, &deadline);
    fx_reactor_destroy(r);
}

Test(reactor_idle, the_between_hook_runs_after_each_top_level_callback_never_inside_one)
{
    btw_run(true);
    cr_assert_str_eq(btw_log, "1b2pb3b", "timer 1, the hook, timer 2 with its nested completion, the hook, ...");
    btw_run(false);
    cr_assert_str_eq(btw_log, "12p3", "unset: no hook");
}
