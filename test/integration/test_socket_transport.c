/* test_socket_transport.c — the socket transport stays tested (issue 18): clients use the
 * shared-memory rings by default, so this suite runs the key client suites again (the
 * suites built next to it in the build folder) with FLUXON_CLIENT_TRANSPORT=socket, which
 * makes every client of those runs take the unix socket for its requests, and asserts
 * each passed; and some of them with FLUXON_RING_POLL_US=50 (owners that poll the rings
 * through an engine's writes too) or 0 (owners that never poll). */
#include <criterion/criterion.h>
#include <limits.h>

#include "helpers.h"

TestSuite(socket_transport, .timeout = 400);

/* Runs the sibling program `name` with args with env=val set (the socket transport, or
 * owners that poll their rings); its output is shown; asserts it exited 0 within limit_s. */
static void st_run_env(const char *name, const char *arg, int limit_s, const char *env, const char *val)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    cr_assert_not_null(slash);
    snprintf(slash + 1, sizeof exe - (size_t)(slash + 1 - exe), "%s", name);
    cr_assert_eq(access(exe, X_OK), 0, "%s is built with this suite", exe);
    char *dir = th_tmpdir();
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/out.log", dir);
    /* the child suite must start as a fresh Criterion runner, not as this one's worker */
    const char *map = getenv("BXFI_MAP");
    char *saved = map ? strdup(map) : NULL;
    unsetenv("BXFI_MAP");
    setenv(env, val, 1);
    const char *argv[] = {exe, arg, NULL};
    pid_t pid = th_spawn(argv, log);
    unsetenv(env);
    if (saved) setenv("BXFI_MAP", saved, 1);
    free(saved);
    cr_assert_gt(pid, 0);
    int st = 0;
    int ended = th_wait_exit(pid, limit_s, &st);
    char cmd[2 * PATH_MAX + 160];
    snprintf(cmd, sizeof cmd, "grep -E 'Synthesis|FAIL|passed|failed' '%s' >&2", log);
    if (system(cmd) != 0) { /* the summary is only shown */ }
    if (!ended || !WIFEXITED(st) || WEXITSTATUS(st) != 0) { /* the child's last words, before its log goes */
        snprintf(cmd, sizeof cmd, "echo '--- the last 60 lines of %s (status %d):' >&2; tail -n 60 '%s' >&2", name, st,
                 log);
        if (system(cmd) != 0) { /* only shown */ }
    }
    th_rmtree(dir);
    free(dir);
    cr_assert(ended, "%s ended within %d s", name, limit_s);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s passed with %s=%s (status %d)", name, env, val, st);
}

static void st_run(const char *name, const char *arg, int limit_s)
{
    st_run_env(name, arg, limit_s, "FLUXON_CLIENT_TRANSPORT", "socket");
}

Test(socket_transport, hostless_suite) { st_run("test_hostless", "--jobs=1", 300); }
Test(socket_transport, client_suite) { st_run("test_client", "--jobs=1", 300); }
Test(socket_transport, kv_suite) { st_run("test_kv", "--jobs=1", 300); }
Test(socket_transport, batch_suite) { st_run("test_batch", "--jobs=1", 300); }
Test(socket_transport, uncertain_suite) { st_run("test_uncertain", "--jobs=1", 300); }
Test(socket_transport, threads_stress_program) { st_run("stress_hostless_threads", "90", 150); }

/* Owners that poll their rings through an engine's writes (ring_poll_us chosen: the plan
 * window too, the default only on hosts with >= 8 CPUs) and owners that never poll
 * (ring_poll_us 0) serve the same suites as the default (a short window). */
Test(socket_transport, hostless_suite_with_polling_owners)
{
    st_run_env("test_hostless", "--jobs=1", 300, "FLUXON_RING_POLL_US", "50");
}
Test(socket_transport, hostless_suite_with_owners_that_never_poll)
{
    st_run_env("test_hostless", "--jobs=1", 300, "FLUXON_RING_POLL_US", "0");
}
Test(socket_transport, threads_stress_program_with_polling_owners)
{
    st_run_env("stress_hostless_threads", "90", 150, "FLUXON_RING_POLL_US", "50");
}
