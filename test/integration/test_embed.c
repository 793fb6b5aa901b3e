/* test_embed.c — the amalgamation as a product (issue 8). Each test runs one step of
 * test/embed/embed.sh with a bounded time and asserts it exits 0, printing the step's
 * output otherwise:
 *  - symbol_hygiene: fluxon.c compiled alone has no global symbol outside fluxon_*, its
 *    banner names version and commit, fluxon.h is include/fluxon.h;
 *  - c_* / cxx_*: C11 and C++17 programs built from fluxon.c + fluxon.h only (plus the
 *    dependencies' pkg-config flags) with -Wall -Wextra -Werror, by gcc/g++ and, when
 *    installed, clang/clang++, run the hostless cycle from two threads;
 *  - install: make install into a temporary prefix, a program built with pkg-config
 *    against it, SONAME and exports of libfluxon.so.
 * fluxon.c is compiled once per compiler per run into a directory shared by the tests
 * (made before the first test, removed after the last). Runs from the repository root
 * (or finds it from /proc/self/exe: ROOT/build/test/test_embed). */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <limits.h>

#include "helpers.h"

#define WORK_ENV "FX_EMBED_WORK"
#define STEP_TIMEOUT_S 280

static char *work_dir; /* in the runner process only */

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    work_dir = th_tmpdir();
    if (work_dir) setenv(WORK_ENV, work_dir, 1); /* inherited by the test processes */
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    th_rmtree(work_dir);
    free(work_dir);
    work_dir = NULL;
}

/* chdir to the repository root: the cwd when it has test/embed/embed.sh, else the
 * directory three levels above this executable. */
static void to_repo_root(void)
{
    if (access("test/embed/embed.sh", X_OK) == 0) return;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = 0;
    for (int i = 0; i < 3; i++) {
        char *slash = strrchr(exe, '/');
        cr_assert_not_null(slash);
        *slash = 0;
    }
    cr_assert_eq(chdir(exe), 0, "chdir %s", exe);
    cr_assert_eq(access("test/embed/embed.sh", X_OK), 0, "run from the repository root (no test/embed/embed.sh)");
}

static int have(const char *prog)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

/* Last bytes of a file, malloc'ed (for failure messages). */
static char *file_tail(const char *path, long max)
{
    FILE *f = fopen(path, "r");
    if (!f) return strdup("(no output)");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    long from = len > max ? len - max : 0;
    fseek(f, from, SEEK_SET);
    char *buf = calloc(1, (size_t)(len - from) + 1);
    size_t got = buf ? fread(buf, 1, (size_t)(len - from), f) : 0;
    fclose(f);
    if (buf) buf[got] = 0;
    return buf ? buf : strdup("(out of memory)");
}

/* Runs `test/embed/embed.sh STEP WORK` (ARGS between STEP and WORK) under timeout(1);
 * asserts exit status 0 and shows the tail of the step's output when not. */
static void step(const char *name, const char *step_and_args)
{
    to_repo_root();
    const char *work = getenv(WORK_ENV);
    cr_assert(work && *work, "no shared work directory (PRE_ALL hook)");
    char log[PATH_MAX], cmd[2 * PATH_MAX];
    snprintf(log, sizeof log, "%s/%s.log", work, name);
    snprintf(cmd, sizeof cmd, "timeout -k 10 %d test/embed/embed.sh %s '%s' >'%s' 2>&1",
             STEP_TIMEOUT_S, step_and_args, work, log);
    double t0 = th_now_s();
    int st = system(cmd);
    int rc = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    char *out = file_tail(log, 6000);
    if (rc == 0) cr_log_info("%s: ok in %.1f s", name, th_now_s() - t0);
    cr_assert_eq(rc, 0, "%s: exit %d%s after %.1f s; output (tail):\n%s", name, rc,
                 rc == 124 ? " (timed out)" : "", th_now_s() - t0, out);
    free(out);
}

TestSuite(embed, .timeout = 300);

Test(embed, symbol_hygiene)
{
    step("symbol_hygiene", "hygiene");
}

Test(embed, c_gcc)
{
    step("c_gcc", "program gcc g++ test/embed/embed_cycle.c");
}

Test(embed, cxx_gxx)
{
    step("cxx_gxx", "program gcc g++ test/embed/embed_cycle.cpp");
}

Test(embed, c_clang)
{
    if (!have("clang")) cr_skip_test("clang is not installed");
    step("c_clang", "program clang clang++ test/embed/embed_cycle.c");
}

Test(embed, cxx_clangxx)
{
    if (!have("clang") || !have("clang++")) cr_skip_test("clang/clang++ is not installed");
    step("cxx_clangxx", "program clang clang++ test/embed/embed_cycle.cpp");
}

Test(embed, install)
{
    step("install", "install");
}
