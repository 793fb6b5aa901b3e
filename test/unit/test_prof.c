/* test_prof.c — Criterion suite for the opt-in reactor profile (transport/prof.h): with
 * FLUXON_PROFILE=1 a reactor counts each completion, timer and idle-hook callback it ran,
 * with the time spent in it, under the callback's own address, and the CPU time of its
 * submissions; it writes and empties the table when its loop ends; without the variable
 * nothing is counted and no table is made. Each test starts from fx_prof_reset (the variable
 * read again). Every wait is bounded. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <time.h>

#include "prof.h"
#include "reactor.h"

typedef struct prof_run {
    fx_reactor_t *r;
    int hook_calls;
    fx_prof_entry_t seen[FX_PROF_ENTRIES]; /* the table as the hook's second call found it */
    size_t n_seen;
} prof_run_t;

static void prof_on_nop(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)io, (void)res, (void)fl;
}

static void prof_on_timer(fx_reactor_t *r, fx_timer_t *t)
{
    (void)t;
    struct timespec ts = {0, 2000000}; /* 2 ms spent in the callback: what is measured */
    nanosleep(&ts, NULL);
    fx_reactor_stop(r);
}

/* the bound of a loop: a test that never stops it fails, not hangs */
static void prof_deadline(fx_reactor_t *r, fx_timer_t *t)
{
    (void)t;
    fx_reactor_stop(r);
}

static bool prof_hook(void *arg)
{
    prof_run_t *run = arg;
    if (++run->hook_calls == 1) return true; /* busy: the loop calls it again at once */
    if (run->hook_calls == 2) { /* the first call's entry is in the table now */
        run->n_seen = fx_prof_snapshot(run->seen, FX_PROF_ENTRIES, NULL, NULL);
        fx_reactor_stop(run->r);
    }
    return false;
}

static const fx_prof_entry_t *prof_find(const fx_prof_entry_t *e, size_t n, const void *fn, const char *kind)
{
    for (size_t i = 0; i < n && i < FX_PROF_ENTRIES; i++)
        if (e[i].fn == fn && !strcmp(e[i].kind, kind)) return &e[i];
    return NULL;
}

/* One NOP completion (fx_reactor_poll) and a timer run when due; returns the table. */
static size_t prof_drive(fx_prof_entry_t *snap, size_t cap, uint64_t *submits)
{
    fx_reactor_t *r = NULL;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    fx_io_t io = {.cb = prof_on_nop};
    io_uring_prep_nop(fx_reactor_sqe(r, &io));
    cr_assert_eq(fx_reactor_poll(r, 1000), 1, "the NOP completed within 1 s");
    fx_timer_t t;
    fx_timer_init(&t);
    fx_timer_arm(r, &t, 1, prof_on_timer);
    uint64_t end = fx_now_ms() + 2000; /* due 1 ms on: it runs, profiled, and stops the loop */
    for (int k = 0; k < 100000 && !fx_reactor_stopping(r) && fx_now_ms() < end; k++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
        fx_reactor_run_due_timers(r);
    }
    cr_assert(fx_reactor_stopping(r), "the timer ran within 2 s");
    size_t n = fx_prof_snapshot(snap, cap, NULL, submits);
    fx_reactor_destroy(r);
    return n;
}

Test(prof, on_each_callback_is_counted_under_its_address_with_its_time, .timeout = 10)
{
    setenv("FLUXON_PROFILE", "1", 1);
    fx_prof_reset();
    cr_assert(fx_prof_on());
    fx_prof_entry_t e[FX_PROF_ENTRIES];
    uint64_t submits = 0;
    size_t n = prof_drive(e, FX_PROF_ENTRIES, &submits);
    const fx_prof_entry_t *io = prof_find(e, n, (const void *)prof_on_nop, "io");
    const fx_prof_entry_t *tm = prof_find(e, n, (const void *)prof_on_timer, "timer");
    cr_assert_not_null(io, "the NOP's callback is in the table (%zu entries)", n);
    cr_assert_eq(io->n, 1);
    cr_assert_not_null(tm, "the timer's callback is in the table");
    cr_assert_eq(tm->n, 1);
    cr_assert_geq(tm->ns, 2000000ull, "the 2 ms spent in the timer callback are counted (%llu ns)",
                  (unsigned long long)tm->ns);
    cr_assert_eq(tm->max_ns, tm->ns, "one call: its time is the longest (%llu of %llu ns)",
                 (unsigned long long)tm->max_ns, (unsigned long long)tm->ns);
    cr_assert(io->max_ns <= io->ns && io->max_ns < tm->max_ns, "the NOP's longest call (%llu ns) is its only one",
              (unsigned long long)io->max_ns);
    cr_assert_eq(submits, 1, "the poll's submission is counted");
    fx_prof_dump(); /* written (stderr) and freed */
    cr_assert_not(fx_prof_table_made());
}

Test(prof, idle_hooks_are_counted_and_the_loop_end_writes_and_empties_the_table, .timeout = 10)
{
    setenv("FLUXON_PROFILE", "1", 1);
    fx_prof_reset();
    fx_reactor_t *r = NULL;
    cr_assert_eq(fx_reactor_create(&r), FLUXON_OK);
    prof_run_t run = {.r = r};
    fx_timer_t deadline;
    fx_timer_init(&deadline);
    fx_timer_arm(r, &deadline, 5000, prof_deadline);
    cr_assert_eq(fx_reactor_add_idle_hook(r, prof_hook, &run, 0), FLUXON_OK);
    cr_assert_eq(fx_reactor_run(r), FLUXON_OK);
    cr_assert_eq(run.hook_calls, 2, "the hook stopped the loop at its second call");
    const fx_prof_entry_t *h = prof_find(run.seen, run.n_seen, (const void *)prof_hook, "idle-busy");
    cr_assert_not_null(h, "the hook's first call is in the table as idle-busy (it had more to do)");
    cr_assert_eq(h->n, 1);
    cr_assert_not(fx_prof_table_made(), "written and freed at the loop's end");
    fx_reactor_del_idle_hook(r, prof_hook, &run);
    fx_timer_disarm(r, &deadline);
    fx_reactor_destroy(r);
}

Test(prof, off_nothing_is_counted_and_no_table_is_made, .timeout = 10)
{
    unsetenv("FLUXON_PROFILE");
    fx_prof_reset();
    cr_assert_not(fx_prof_on());
    cr_assert_eq(fx_prof_start(), 0u);
    fx_prof_entry_t e[FX_PROF_ENTRIES];
    uint64_t submits = 1;
    cr_assert_eq(prof_drive(e, FX_PROF_ENTRIES, &submits), 0, "no entry without FLUXON_PROFILE");
    cr_assert_eq(submits, 0u, "no submission counted");
    cr_assert_not(fx_prof_table_made(), "and no table made");
}

Test(prof, zero_means_off, .timeout = 10)
{
    setenv("FLUXON_PROFILE", "0", 1);
    fx_prof_reset();
    cr_assert_not(fx_prof_on());
}
