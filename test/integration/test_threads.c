/* test_threads.c — runs the 8-thread hostless stress program (test/stress/hostless_threads.c,
 * built next to this suite as test/stress_hostless_threads in the build folder) and asserts it
 * passed: one client's hostless API from 8 threads against a reference model, with
 * stale-pointer misuse racing live plans. The scenario is a plain program so that
 * `make tsan` can run it too (Criterion cannot start under ThreadSanitizer). */
#include <criterion/criterion.h>
#include <limits.h>

#include "helpers.h"

Test(threads, one_client_hostless_from_8_threads_matches_the_model, .timeout = 150)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    cr_assert_not_null(slash);
    snprintf(slash + 1, sizeof exe - (size_t)(slash + 1 - exe), "stress_hostless_threads");
    cr_assert_eq(access(exe, X_OK), 0, "%s is built with this suite", exe);
    char *dir = th_tmpdir();
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/out.log", dir);
    const char *argv[] = {exe, "90", NULL};
    pid_t pid = th_spawn(argv, log);
    cr_assert_gt(pid, 0);
    int st = 0;
    int ended = th_wait_exit(pid, 120, &st);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "cat '%s' >&2", log);
    if (system(cmd) != 0) { /* the log is only shown */ }
    th_rmtree(dir);
    free(dir);
    cr_assert(ended, "the stress program ended within 120 s");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the stress program passed (status %d)", st);
}
