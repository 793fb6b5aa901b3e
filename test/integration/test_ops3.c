/* test_ops3.c — operability, round 3: what a fresh user's pass over the README and the CLI
 * found in session 35 (a helper trying it as a new user would, with bad input). Real `fluxon`
 * processes on loopback in a private temporary directory (opsfix.h). */
#include <criterion/criterion.h>
#include <dirent.h>

#include "helpers.h"
#include "opsfix.h"

/* Before: `fluxon demo --config` copied --value-len bytes out of every restored value
 * without looking at its length, so a second run with a larger --value-len over the same
 * keys read past the values (SIGSEGV near the segment's end), reported CHECKSUM FAILUREs of
 * intact data, or with a smaller one passed silently. Now each value's stored length is
 * checked first (fluxon_plan_value_lens): a mismatch is counted and named, never read. */
Test(ops3, demo_over_values_of_another_length_names_the_mismatch_and_never_reads_past_them, .timeout = 120,
     .fini = ops_fini)
{
    ops_up(NULL, NULL);
    static char out[1 << 18]; /* the summary follows the client's log lines */
    int ex = ops_cli(out, sizeof out, "demo --config %s --requests 5 --key-prefix s --workers 1", t.ecfg);
    cr_assert(ex == 0 && strstr(out, "checksum failures 0"), "exit %d: %s", ex, out);
    cr_assert(!strstr(out, "length mismatches"), "%s", out);
    ex = ops_cli(out, sizeof out, "demo --config %s --requests 5 --key-prefix s --workers 1 --value-len 8192", t.ecfg);
    cr_assert(ex == 1, "exit %d: %s", ex, out);
    cr_assert(strstr(out, "holds a 4096-byte value, not --value-len 8192") && strstr(out, "length mismatches ") &&
                  strstr(out, "use another --key-prefix"), "%s", out);
    cr_assert(strstr(out, "checksum failures 0") && !strstr(out, "CHECKSUM FAILURE"), "intact data: %s", out);
    /* a smaller --value-len: named too (before, the values passed as 1024-byte pages) */
    ex = ops_cli(out, sizeof out, "demo --config %s --requests 5 --key-prefix s --workers 1 --value-len 1024", t.ecfg);
    cr_assert(ex == 1 && strstr(out, "holds a 4096-byte value, not --value-len 1024"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s ping --count 2", t.ecfg);
    cr_assert_eq(ex, 0, "the owner serves on: %s", out);
}

/* The evictions `fluxon demo --config` printed for an owner it joined. */
static long long ops3_evicted(const char *out)
{
    const char *p = strstr(out, "eviction          owner 0: ");
    return p ? atoll(p + strlen("eviction          owner 0: ")) : 0;
}

/* A new user's finding (session 47): `fluxon demo --config` printed the owner's lifetime
 * eviction counters as the run's ("3054 values (195.0 MiB)" for a run that wrote 2.2 MiB).
 * Now each counter is its difference over the run: a run of one request after a run that
 * evicted thousands of values shows at most its own few. */
Test(ops3, demo_over_an_owner_reports_the_runs_own_evictions, .timeout = 120, .fini = ops_fini)
{
    ops_up(NULL, NULL);
    static char out[1 << 18];
    int ex = ops_cli(out, sizeof out, "demo --config %s --requests 600 --key-prefix e1 --workers 1", t.ecfg);
    cr_assert_eq(ex, 0, "%s", out);
    long long first = ops3_evicted(out);
    cr_assert_gt(first, 1000, "a 32 MiB segment evicts: %s", out);
    ex = ops_cli(out, sizeof out, "demo --config %s --requests 1 --key-prefix e2 --workers 1", t.ecfg);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert_lt(ops3_evicted(out), 200, "one request's own evictions, not the owner's %lld since it started: %s",
                 first, out);
}

/* Before: bench-kv, bench-hostless and bench-batch ran with any unknown option, took
 * "10abc" as 10 and a missing value as the default, and ran a --count of 10^20 until
 * killed. Now each is a usage error naming the option and its range. */
Test(ops3, bench_options_are_checked_and_named, .timeout = 60, .fini = ops_fini)
{
    ops_init(NULL, NULL);
    static const struct { const char *args, *says; } bad[] = {
        {"bench-kv --bogus", "fluxon bench-kv: unknown option --bogus (options: --value-len N --count N)"},
        {"bench-kv --count 10abc", "--count 10abc: must be an integer in 1..10000000"},
        {"bench-kv --count", "--count needs a value"},
        {"bench-kv --count 99999999999999999999 --value-len 1", "--count 99999999999999999999: must be"},
        {"bench-kv --count 9000000 --value-len 1MiB", "more than 90 % of this host's"},
        {"bench-hostless --value-len 99999999999 --iters 1 --batch 1",
         "--value-len 99999999999: must be an integer in 1..1073741824"},
        {"bench-batch --iters 0", "fluxon bench-batch: --iters 0: must be an integer in 1..1000000"},
    };
    char out[4096];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int ex = ops_cli(out, sizeof out, "%s", bad[i].args);
        cr_assert(ex == 2 && strstr(out, bad[i].says), "%s: exit %d: %s", bad[i].args, ex, out);
    }
}

/* Before: --metrics-linger-ms without --metrics-listen and one --config given twice were
 * taken silently (the second as a second owner: twice the workers on one), a trace line of
 * more keys than a batch takes failed only at run time (1.5 GiB later), and a --ucx-tls the
 * owners refused exited 1 blaming the segment sizes. */
Test(ops3, demo_flags_taken_silently_before_are_usage_errors, .timeout = 60, .fini = ops_fini)
{
    ops_init(NULL, NULL);
    char out[8192], trace[300];
    int ex = ops_cli(out, sizeof out, "demo --metrics-linger-ms 100 --requests 20");
    cr_assert(ex == 2 && strstr(out, "--metrics-linger-ms 100 keeps --metrics-listen serving") &&
                  strstr(out, "give --metrics-listen ADDR too"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "demo --config %s --config %s/../%s/external.json", t.ecfg, t.dir,
                 strrchr(t.dir, '/') + 1);
    cr_assert(ex == 2 && strstr(out, "given twice (one file per owner"), "exit %d: %s", ex, out);
    snprintf(trace, sizeof trace, "%s/huge.jsonl", t.dir);
    FILE *f = fopen(trace, "w");
    cr_assert_not_null(f);
    fputs("{\"timestamp\":0,\"input_length\":10,\"output_length\":1,\"hash_ids\":[0", f);
    for (int i = 1; i <= FLUXON_MAX_BATCH_KEYS; i++) fprintf(f, ",%d", i);
    fputs("]}\n", f);
    fclose(f);
    ex = ops_cli(out, sizeof out, "demo --trace %s --capacity-blocks 1000", trace);
    cr_assert(ex == 2 && strstr(out, "\"hash_ids\" has 1000001 entries, more than one batch takes "
                                     "(FLUXON_MAX_BATCH_KEYS, 1000000)"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "demo --ucx-tls zzz --requests 20");
    cr_assert(ex == 2 && strstr(out, "owner 0 did not start: its config was refused") &&
                  strstr(out, "ucx_tls \"zzz\"") && !strstr(out, "grant_bytes"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "demo --trace %s/missing.jsonl", t.dir);
    cr_assert(ex == 2 && strstr(out, "fluxon demo: --trace ") && strstr(out, "missing.jsonl: cannot open"),
              "exit %d: %s", ex, out);
}

/* Before: `--config` with no value said "unknown option --config", a second --role won
 * silently, `fluxon help` and `fluxon version` said "--role is missing", `top` took an empty
 * or partly numeric value as a number (0 = forever) and `tenant set "bad name"` was a
 * NOT_FOUND from the owner (exit 1). */
Test(ops3, cli_arguments_say_what_is_wrong, .timeout = 60, .fini = ops_fini)
{
    ops_up(NULL, NULL);
    char out[8192];
    int ex = ops_cli(out, sizeof out, "--role=master --config");
    cr_assert(ex == 2 && strstr(out, "fluxon: --config needs FILE"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "--role=owner --role=master --config %s", t.mcfg);
    cr_assert(ex == 2 && strstr(out, "fluxon: --role given twice (owner, master)"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "help");
    cr_assert(ex == 0 && strstr(out, "usage:"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "version");
    cr_assert(ex == 0 && strstr(out, "fluxon "), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s top --iterations ''", t.ecfg);
    cr_assert(ex == 2 && strstr(out, "fluxon top: --iterations : must be an integer in 0..1000000000"), "exit %d: %s",
              ex, out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s top --interval-ms 5", t.ecfg);
    cr_assert(ex == 2 && strstr(out, "--interval-ms 5: must be an integer in 10..60000") &&
                  strstr(out, "0: until interrupted"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s top --once", t.ecfg);
    cr_assert_eq(ex, 0, "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set 'bad name' --quota 1MiB", t.ecfg);
    cr_assert(ex == 2 && strstr(out, "is not a tenant name ([A-Za-z0-9_.-], 1..32 bytes)") &&
                  strstr(out, "FLUXON_ERR_INVALID_ARGUMENT"), "exit %d: %s", ex, out);
}

/* Before: `stat` against an owner that had not reached its master printed only
 * "stat failed: FLUXON_ERR_UNAVAILABLE", where put, get and ping said why. */
Test(ops3, stat_without_a_master_says_why, .timeout = 60, .fini = ops_fini)
{
    ops_up_owner_alone();
    char out[4096];
    int ex = ops_cli(out, sizeof out, "--role=external --config %s stat", t.ecfg);
    cr_assert(ex == 1 && strstr(out, "stat failed: FLUXON_ERR_UNAVAILABLE") &&
                  strstr(out, "stat: owner o1 is not connected to its master"), "exit %d: %s", ex, out);
}

/* Before: a paced replay (--speed 1 plays the trace's own timestamps: minutes) printed its
 * progress only on a terminal, so a log or a pipe showed nothing until the end. Off a
 * terminal a line now comes every 10 s, worded apart from the summary's lines. */
Test(ops3, a_paced_replay_off_a_terminal_logs_its_progress, .timeout = 90, .fini = ops_fini)
{
    ops_init(NULL, NULL);
    static char out[1 << 16];
    int ex = ops_cli(out, sizeof out, "demo --requests 50 --speed 1 --workers 1");
    cr_assert_eq(ex, 0, "exit %d: %s", ex, out);
    const char *p = strstr(out, "[demo] after "); /* 10 s, or 11 on a loaded host */
    cr_assert(p && strstr(p, " s: ") && strstr(p, " of 50 requests done (") &&
                  strstr(p, ", 0 errors, 0 bad checksums so far\n"), "%s", out);
    cr_assert(p < strstr(out, "requests          50 in "), "the progress line comes before the summary: %s", out);
    cr_assert(!strstr(out, "\r"), "no terminal line off a terminal: %s", out);
}

/* Before: `hot` against an owner that had not reached its master printed the cleanup's
 * failure ("deleting its keys stopped ...") before the cause, and not why the owner was
 * unavailable. Now the cause comes first, then why, and no delete is tried for keys the
 * owner turned down. */
Test(ops3, hot_without_a_master_says_why_first, .timeout = 60, .fini = ops_fini)
{
    ops_up_owner_alone();
    char out[4096];
    int ex = ops_cli(out, sizeof out, "--role=external --config %s hot --iters 10 --batch 4", t.ecfg);
    const char *cause = strstr(out, "fluxon: hot: the first put failed: FLUXON_ERR_UNAVAILABLE");
    cr_assert(ex == 1 && cause && strstr(cause, "hot: owner o1 is not connected to its master"), "exit %d: %s", ex,
              out);
    cr_assert(!strstr(out, "deleting its keys stopped"), "no delete of keys never stored: %s", out);
}

/* A new user's finding (session 38): with no owner at the socket, `ping --count -5`, `get`
 * with no key, `pin abc k`, `hot --batch 0` and `top --interval-ms 5` said "cannot open
 * client: FLUXON_ERR_UNAVAILABLE" and exited 1; with an owner up they exited 2 naming the
 * argument. Now every command's arguments are checked before the client opens. */
Test(ops3, usage_errors_exit_2_with_no_owner_up, .timeout = 60, .fini = ops_fini)
{
    ops_init(NULL, NULL); /* configs only: nothing listens */
    static const struct {
        const char *args, *says;
    } cases[] = {{"ping --count -5", "--count -5 must be an integer in 1..100000000"},
                 {"get", "usage: get KEY"},
                 {"pin abc k", "usage: pin TTL_MS KEY"},
                 {"pin -5 k", "pin: TTL_MS -5 must be an integer in 0..86400000"},
                 {"tenant set t1 --quota 1MiB --admin-token", "--admin-token needs a value"},
                 {"hot --batch 0", "--batch 0 must be an integer in 1..4096"},
                 {"hot --value-len 65MiB", "--value-len 65MiB: must be an integer in 1..67108864 (bytes, or with a unit"},
                 {"top --interval-ms 5", "--interval-ms 5: must be an integer in 10..60000"},
                 {"put k /nonexistent/file", "cannot read /nonexistent/file"},
                 {"stat --json x", "stat: unknown argument x"},
                 {"ls a b", "usage: ls [PREFIX]"},
                 {"del", "usage: del KEY"},
                 {"stats x", "usage: stats"},
                 {"tenant set t1", "give --quota, --guaranteed or both"}};
    char out[8192];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int ex = ops_cli(out, sizeof out, "--role=external --config %s %s", t.ecfg, cases[i].args);
        cr_assert(ex == 2 && strstr(out, cases[i].says) && !strstr(out, "cannot open client"), "%s: exit %d: %s",
                  cases[i].args, ex, out);
    }
    /* well-formed: the open is tried, and fails as it should (hot's --value-len takes the size
     * units of demo's and the configs': it refused 16KiB) */
    int ex = ops_cli(out, sizeof out, "--role=external --config %s ping --count 3", t.ecfg);
    cr_assert(ex == 1 && strstr(out, "cannot open client: FLUXON_ERR_UNAVAILABLE"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s hot --value-len 16KiB --iters 1", t.ecfg);
    cr_assert(ex == 1 && strstr(out, "cannot open client: FLUXON_ERR_UNAVAILABLE"), "exit %d: %s", ex, out);
}

/* 1 when pid's SIGINT is caught (a handler installed: SigCgt in /proc/pid/status) */
static int ops3_catches_sigint(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long mask = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "SigCgt: %llx", &mask) == 1) break;
    if (f) fclose(f);
    return (mask >> (SIGINT - 1)) & 1;
}

/* 1 when pid has path open (one of /proc/pid/fd links to it) */
static int ops3_has_open(pid_t pid, const char *path)
{
    char dpath[64], lpath[320], target[256];
    snprintf(dpath, sizeof dpath, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dpath);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        snprintf(lpath, sizeof lpath, "%s/%s", dpath, e->d_name);
        ssize_t n = readlink(lpath, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            found = strcmp(target, path) == 0;
        }
    }
    if (d) closedir(d);
    return found;
}

/* Session 58, a new user's finding: `fluxon demo` installed its SIGINT/SIGTERM handler only
 * after it had read the trace, so a signal in its first ~50 ms ended it without a word
 * (SIGTERM) or, in a shell's background job (SIGINT ignored), was lost and the whole replay
 * ran. Now the handler comes first: a SIGINT while the trace loads (here a FIFO nobody
 * writes yet) ends the demo with exit 1, saying so. */
Test(ops3, a_signal_while_the_demo_loads_its_trace_ends_it_saying_so, .timeout = 60)
{
    char *dir = th_tmpdir(), fifo[256], log[256];
    cr_assert_not_null(dir);
    snprintf(fifo, sizeof fifo, "%s/trace.fifo", dir);
    snprintf(log, sizeof log, "%s/demo.log", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    int wfd = open(fifo, O_RDWR); /* a writer: the demo's open does not block, its read does */
    cr_assert_geq(wfd, 0);
    const char *line = "{\"timestamp\": 0, \"input_length\": 16, \"output_length\": 1, \"hash_ids\": [1]}\n";
    cr_assert_eq(write(wfd, line, strlen(line)), (ssize_t)strlen(line));
    const char *argv[] = {th_fluxon_bin(), "demo", "--trace", fifo, NULL};
    pid_t pid = th_spawn(argv, log);
    cr_assert_gt(pid, 0);
    int caught = 0, reading = 0; /* the trace open (a slow start, ASan: not yet), SIGINT caught */
    for (double end = th_now_s() + 10; !(caught && reading) && th_now_s() < end;) {
        reading = ops3_has_open(pid, fifo);
        caught = ops3_catches_sigint(pid);
        if (!(caught && reading)) th_sleep_ms(5);
    }
    cr_assert_eq(kill(pid, SIGINT), 0);
    close(wfd); /* the end of the trace: a load the signal did not cut short ends here */
    int st = 0, ended = th_wait_exit(pid, 20, &st);
    char out[8192] = "";
    FILE *lf = fopen(log, "r");
    size_t n = lf ? fread(out, 1, sizeof out - 1, lf) : 0;
    out[n] = '\0';
    if (lf) fclose(lf);
    th_rmtree(dir);
    free(dir);
    cr_assert(reading, "the demo opened its trace: %s", out);
    cr_assert(caught, "the demo catches SIGINT while it loads its trace: %s", out);
    cr_assert(ended && WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status %d: %s", st, out);
    cr_assert(strstr(out, "interrupted while the trace loaded; no request was replayed"), "%s", out);
}
