/* test_spawn.c — Criterion suite for the fixtures' th_spawn (helpers.h): a program that
 * cannot be started is reported at once (-1, nothing left behind), its output goes to the
 * log, and what a test process started dies with it when that process is killed (as
 * Criterion kills a suite past its timeout). Every wait is bounded. */
#include "helpers.h"

#include <criterion/criterion.h>

#define TS_WAIT_MS 10000

/* True when pid no longer runs: gone, or a zombie (its parent died; init reaps it). */
static bool ts_gone(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X';
}

Test(spawn, a_program_that_cannot_start_is_reported_at_once)
{
    const char *argv[] = {"/nonexistent/fluxon-test-binary", NULL};
    double t0 = th_now_s();
    cr_assert_eq(th_spawn(argv, NULL), -1);
    cr_assert_lt(th_now_s() - t0, 5.0, "no wait for a program that never ran");
    char dir[] = "/tmp/fluxon-spawn-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char log[128];
    snprintf(log, sizeof log, "%s/none/x.log", dir); /* its folder does not exist */
    const char *sh[] = {"/bin/sh", "-c", "exit 0", NULL};
    cr_assert_eq(th_spawn(sh, log), -1, "a log that cannot be opened fails the start");
    snprintf(log, sizeof log, "%s/x.log", dir);
    const char *echo[] = {"/bin/sh", "-c", "echo spawned-ok; echo to-stderr >&2", NULL};
    pid_t p = th_spawn(echo, log);
    cr_assert_gt(p, 0);
    int st = 0;
    cr_assert_eq(waitpid(p, &st, 0), p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert(th_wait_log(log, "spawned-ok", TS_WAIT_MS), "stdout in the log");
    cr_assert(th_wait_log(log, "to-stderr", TS_WAIT_MS), "stderr in the log");
    unlink(log);
    rmdir(dir);
}

Test(spawn, what_a_test_process_started_dies_with_it, .timeout = 60)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t test = fork(); /* stands for a suite's test process */
    cr_assert_geq(test, 0);
    if (test == 0) {
        const char *argv[] = {"/bin/sleep", "60", NULL};
        pid_t p = th_spawn(argv, NULL);
        ssize_t w = write(fds[1], &p, sizeof p);
        (void)w;
        for (;;) pause(); /* until killed */
    }
    close(fds[1]);
    pid_t child = -1;
    cr_assert_eq(read(fds[0], &child, sizeof child), (ssize_t)sizeof child);
    close(fds[0]);
    cr_assert_gt(child, 0, "the test process started its child");
    cr_assert_not(ts_gone(child), "the child runs while the test process lives");
    kill(test, SIGKILL); /* as Criterion kills a suite past its timeout */
    waitpid(test, NULL, 0);
    double end = th_now_s() + TS_WAIT_MS / 1000.0;
    while (!ts_gone(child) && th_now_s() < end) th_sleep_ms(10);
    bool gone = ts_gone(child);
    if (!gone) kill(child, SIGKILL); /* ours: never left running */
    cr_assert(gone, "pid %d died with the process that started it", (int)child);
}
