/* test_ops2.c — operability, round 2 (issue 43): what a new user's second trial of the
 * README hit (shared/design/NEWCOMER-2026-12b.md, its numbered findings). Real `fluxon`
 * processes on loopback in a private temporary directory (opsfix.h). */
#include <criterion/criterion.h>

#include <fcntl.h>

#include "helpers.h"
#include "opsfix.h"

/* Findings 8 and 15. Before: an owner that had not reached its master made put, get and
 * ping fail with a bare "FLUXON_ERR_UNAVAILABLE", and get did not name its key. Now the
 * CLI names the key and says that the owner is not connected to its master. */
Test(ops2, an_owner_without_its_master_says_so_and_a_failed_get_names_its_key, .timeout = 60, .fini = ops_fini)
{
    ops_up_owner_alone();
    char out[4096], val[300];
    snprintf(val, sizeof val, "%s/v", t.dir);
    th_write_file(val, "x");
    int ex = ops_cli(out, sizeof out, "--role=external --config %s put k1 %s", t.ecfg, val);
    cr_assert(ex == 1 && strstr(out, "put: FLUXON_ERR_UNAVAILABLE (key k1)"), "exit %d: %s", ex, out);
    cr_assert(strstr(out, "owner o1 is not connected to its master"), "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s get k1", t.ecfg);
    cr_assert(ex == 1 && strstr(out, "get: FLUXON_ERR_UNAVAILABLE (key k1)") &&
                  strstr(out, "owner o1 is not connected to its master"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s ping --count 3", t.ecfg);
    cr_assert(ex == 1 && strstr(out, "ping: owner o1 is not connected to its master"), "exit %d: %s", ex, out);
    /* once registered, a missing key is NOT_FOUND, named, with no word about the master */
    t.master = ops_start("master", t.mcfg, t.mlog);
    cr_assert(th_wait_log(t.olog, "registered with master", 20000), "owner did not register");
    ex = ops_cli(out, sizeof out, "--role=external --config %s get 'no/such key'", t.ecfg);
    cr_assert(ex == 1 && strstr(out, "get: FLUXON_ERR_NOT_FOUND (key no/such key)") && !strstr(out, "master"),
              "exit %d: %s", ex, out);
}

/* Finding 9. Before: `fluxon put` of a 600 MiB file read it whole (14 s) before refusing
 * it. Now a regular file larger than what put reads is refused from its size: the message
 * gives the file's size (only the size check knows it; the file is sparse, nothing read). */
Test(ops2, a_too_large_file_is_refused_from_its_size, .timeout = 60, .fini = ops_fini)
{
    ops_up_owner_alone();
    char big[300], out[4096];
    snprintf(big, sizeof big, "%s/big.bin", t.dir);
    int fd = open(big, O_CREAT | O_WRONLY, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, 600ll << 20), 0);
    close(fd);
    int ex = ops_cli(out, sizeof out, "--role=external --config %s put big %s", t.ecfg, big);
    cr_assert(ex == 2 && strstr(out, "is 629145600 bytes, larger than 512 MiB"), "exit %d: %s", ex, out);
}

/* A placed put (a value past the inline size) to a master that stops answering (SIGSTOP),
 * with the client's timeout_ms (3000) below the owner's master_timeout_ms (5000). Before:
 * the owner waited 5 s for PUT_PLACE, the client gave up at 3 s with FLUXON_ERR_TIMEOUT
 * (exit 1) and nothing was stored. Now the owner waits no longer than the caller and keeps
 * the batch itself: the put ends UNKNOWN_OUTCOME (exit 3, its PUT_DONE unanswered) and the
 * value is readable byte-exact once the master answers again. */
Test(ops2, a_placed_put_to_a_hung_master_is_kept_within_the_callers_timeout, .timeout = 90, .fini = ops_fini)
{
    ops_up(NULL, NULL);
    char val[300], back[300], out[4096];
    snprintf(val, sizeof val, "%s/big.bin", t.dir);
    snprintf(back, sizeof back, "%s/back.bin", t.dir);
    static char buf[300000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (char)('a' + (i * 7 + i / 977) % 26);
    FILE *f = fopen(val, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(buf, 1, sizeof buf, f), sizeof buf);
    fclose(f);
    int ex = ops_cli(out, sizeof out, "--role=external --config %s put warm %s", t.ecfg, val);
    cr_assert_eq(ex, 0, "a grant of the value's slot size first: %s", out);
    cr_assert_eq(kill(t.master, SIGSTOP), 0);
    double t0 = th_now_s();
    ex = ops_cli(out, sizeof out, "--role=external --config %s put hung %s", t.ecfg, val);
    double took = th_now_s() - t0;
    cr_assert_eq(kill(t.master, SIGCONT), 0);
    cr_assert(ex == 3 && strstr(out, "FLUXON_ERR_UNKNOWN_OUTCOME"), "exit %d after %.1f s: %s", ex, took, out);
    cr_assert_lt(took, 8.0, "two waits of the client's 3 s at most: %.1f s", took);
    ex = 1;
    for (double end = th_now_s() + 20; ex != 0 && th_now_s() < end; th_sleep_ms(100))
        ex = ops_cli(out, sizeof out, "--role=external --config %s get hung -o %s", t.ecfg, back);
    cr_assert_eq(ex, 0, "%s", out);
    static char got[sizeof buf + 1];
    f = fopen(back, "rb");
    cr_assert_not_null(f);
    size_t n = fread(got, 1, sizeof got, f);
    fclose(f);
    cr_assert(n == sizeof buf && memcmp(got, buf, sizeof buf) == 0, "byte-exact (%zu bytes)", n);
}

/* Writes a client config dir/name: the cluster's id, token (as JSON text), socket, more
 * fields (",..." or ""), and text after the object (or ""); path gets its name. */
static void ops_client_cfg(char *path, size_t cap, const char *name, const char *token, const char *sock,
                           const char *more, const char *after)
{
    char buf[1024];
    snprintf(path, cap, "%s/%s", t.dir, name);
    snprintf(buf, sizeof buf, "{\"role\":\"external\",\"cluster_id\":\"t1\",\"cluster_token\":\"%s\",\"socket\":\"%s\"%s}%s",
             token, sock, more, after);
    th_write_file(path, buf);
}

/* The external CLI added "prefault_segment" to its config through cJSON's lenient parse
 * and printed it again: a cluster_token "s3cret\u0000junk" was cut to "s3cret" (and
 * authenticated), and junk after the object was dropped. Now such a file reaches the
 * library unchanged and is refused (exit 2) with its message, as the other roles refuse it;
 * a good one still works. */
Test(ops2, the_external_cli_refuses_a_config_the_library_refuses, .timeout = 60, .fini = ops_fini)
{
    ops_up_owner_alone();
    char cfg[300], out[4096];
    ops_client_cfg(cfg, sizeof cfg, "nul-client.json", "secret\\u0000junk", t.sock, "", "");
    int ex = ops_cli(out, sizeof out, "--role=external --config %s stat", cfg);
    cr_assert(ex == 2 && strstr(out, "a string holds \\u0000"), "exit %d: %s", ex, out);
    ops_client_cfg(cfg, sizeof cfg, "nul-client.json", "secret", t.sock, "", " {\"role\":\"master\"}");
    ex = ops_cli(out, sizeof out, "--role=external --config %s stat", cfg);
    cr_assert(ex == 2 && strstr(out, "not valid JSON near byte"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s stat", t.ecfg);
    cr_assert(ex != 2 && !strstr(out, "config rejected"), "the good config is taken: exit %d: %s", ex, out);
}

/* Finding 10. Before: a client whose socket named a directory was told "the file is there
 * but nobody accepts: its owner exited (owner sockets in /tmp: none)". Now it is told
 * that it is a directory, and which owner sockets that directory holds. */
Test(ops2, a_socket_naming_a_directory_is_called_one, .timeout = 60, .fini = ops_fini)
{
    ops_up_owner_alone();
    char cfg[300], dir[300], out[4096];
    snprintf(dir, sizeof dir, "%s/run", t.dir);
    ops_client_cfg(cfg, sizeof cfg, "dir-client.json", "secret", dir, "", "");
    int ex = ops_cli(out, sizeof out, "--role=external --config %s stat", cfg);
    cr_assert(ex == 1 && strstr(out, "/run is a directory, not an owner's socket") &&
                  strstr(out, "owner sockets in ") && strstr(out, "o1.sock"), "exit %d: %s", ex, out);
    cr_assert(!strstr(out, "nobody accepts"), "%s", out);
}

/* Finding 11. Before: a master whose "listen" port was taken exited 1 (a runtime error)
 * with "listen: bind ... failed"; a metrics_listen in use exited 2 naming its field. Now
 * both exit 2 and name the field. */
Test(ops2, a_listen_port_in_use_exits_2_naming_listen, .timeout = 60, .fini = ops_fini)
{
    ops_init(NULL, NULL);
    t.master = ops_start("master", t.mcfg, t.mlog);
    cr_assert(th_wait_log(t.mlog, "master listening", 10000), "master did not start");
    char out[4096];
    int ex = ops_cli(out, sizeof out, "--role=master --config %s", t.mcfg); /* the same port again */
    cr_assert(ex == 2 && strstr(out, "config rejected: listen: 127.0.0.1:") && strstr(out, "is in use") &&
                  strstr(out, "FLUXON_ERR_CONFIG"), "exit %d: %s", ex, out);
}

/* Finding 24. Before: `fluxon demo --cpu-owners 1` alone said "need --capacity-blocks
 * (...), not --config" although no --config was given. */
Test(ops2, cpu_owners_without_capacity_blocks_says_what_is_missing, .timeout = 60, .fini = ops_fini)
{
    ops_init(NULL, NULL);
    char out[4096];
    int ex = ops_cli(out, sizeof out, "demo --cpu-owners 1");
    cr_assert(ex == 2 && strstr(out, "--cpu-owners 1 needs --capacity-blocks N") && !strstr(out, "not --config"),
              "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "demo --cpu-owners 1 --config %s", t.ecfg);
    cr_assert(ex == 2 && strstr(out, "cannot join a cluster given by --config"), "exit %d: %s", ex, out);
    /* a new-user pass (session 44): --cpu-capacity-blocks without --cpu-owners started no CPU
     * owner and said nothing (exit 0); the other CPU-owner flags were refused */
    ex = ops_cli(out, sizeof out, "demo --requests 10 --capacity-blocks 1000 --cpu-capacity-blocks 10");
    cr_assert(ex == 2 && strstr(out, "--cpu-capacity-blocks 10 sizes the CPU owners: it needs --cpu-owners K"),
              "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "demo --cpu-capacity-blocks 10");
    cr_assert(ex == 2 && strstr(out, "--cpu-capacity-blocks 10 needs --capacity-blocks N"), "exit %d: %s", ex, out);
}

/* A new-user pass: sizes past this host's RAM or a disk tier's limit are usage errors
 * naming the flags, before anything is allocated (--capacity-blocks 1099511627776 ran out of
 * memory in the reference simulator; 100000000 blamed "distinct pages"; the largest
 * --disk-capacity-blocks blamed disk.capacity_bytes, a field the user never set). */
Test(ops2, demo_sizes_past_the_host_are_usage_errors_naming_the_flags, .timeout = 60, .fini = ops_fini)
{
    ops_init(NULL, NULL);
    char out[4096];
    int ex = ops_cli(out, sizeof out, "demo --capacity-blocks 1099511627776");
    cr_assert(ex == 2 && strstr(out, "--capacity-blocks 1099511627776 (x 1 owner(s))") && strstr(out, "of RAM"),
              "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "demo --capacity-blocks 10 --cpu-owners 1 --cpu-capacity-blocks 1099511627776");
    cr_assert(ex == 2 && strstr(out, "--cpu-capacity-blocks 1099511627776 (x 1 CPU owner(s))"), "exit %d: %s", ex, out);
    ex = ops_cli(out, sizeof out, "demo --capacity-blocks 10 --disk-dir %s/dd --disk-capacity-blocks 1099511627776",
                 t.dir);
    cr_assert(ex == 2 && strstr(out, "--disk-capacity-blocks 1099511627776: at most 1099511627775"), "exit %d: %s",
              ex, out);
    /* the parts saturate, never wrap past 2^64 to a total that passes */
    ex = ops_cli(out, sizeof out, "demo --capacity-blocks 1099511627776 --value-len 1MiB --owners 8 --cpu-owners 8");
    cr_assert(ex == 2 && strstr(out, "need over "), "exit %d: %s", ex, out);
    /* --simulate maps no segment: no RAM bound */
    ex = ops_cli(out, sizeof out, "demo --simulate --capacity-blocks 100000000 --requests 100");
    cr_assert(ex == 0 && strstr(out, "prefix hits"), "exit %d: %s", ex, out);
}

/* Finding 27. Before: `scripts/plot out/` printed "wrote out//hit_ratio.png". */
Test(ops2, plot_names_its_files_without_a_double_slash, .timeout = 120, .fini = ops_fini)
{
    ops_init(NULL, NULL);
    if (access("/usr/bin/gnuplot", X_OK) != 0) cr_skip_test("gnuplot is not installed");
    char out[1 << 15], cmd[600];
    int ex = ops_cli(out, sizeof out, "demo --requests 300 --out %s/out", t.dir);
    cr_assert_eq(ex, 0, "%s", out);
    snprintf(cmd, sizeof cmd, "scripts/plot %s/out/ 2>&1", t.dir);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
    cr_assert(strstr(out, "/out/hit_ratio.png") && !strstr(out, "//"), "%s", out);
}

/* Findings 12 and 14. Before: an orderly owner stop was logged by the master as "declared
 * dead: connection lost" and the owner's last line was "SIGTERM received, shutting down";
 * after a master restart the master logged "re-published what it holds (last batch: 0
 * keys, ...)" for an owner that re-published 3 values. Now the master says the owner left,
 * the owner says it stopped, and the re-publication's line gives its totals. */
Test(ops2, orderly_stops_and_republications_are_logged_as_what_they_are, .timeout = 90, .fini = ops_fini)
{
    ops_up(NULL, NULL);
    char out[4096], val[300];
    snprintf(val, sizeof val, "%s/v", t.dir);
    th_write_file(val, "value");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ops_cli(out, sizeof out, "--role=external --config %s put k%d %s", t.ecfg, i, val), 0, "%s", out);
    th_stop(t.master, SIGTERM, 10000);
    t.master = ops_start("master", t.mcfg, t.mlog); /* appends to the same log */
    cr_assert(th_wait_log(t.mlog, "owner o1 re-published what it holds: 3 keys, 3 routed", 20000),
              "the master's re-publication line (see %s)", t.mlog);
    th_stop(t.owner, SIGTERM, 10000);
    t.owner = -1;
    cr_assert(th_wait_log(t.olog, "owner o1 stopped", 5000), "the owner's last line (see %s)", t.olog);
    cr_assert(th_wait_log(t.mlog, "owner o1 (generation", 5000) &&
                  th_wait_log(t.mlog, "left: its connection closed (it stopped, or its process ended)", 5000),
              "see %s", t.mlog);
    cr_assert(!ops_file_has(t.mlog, "declared dead"), "an orderly stop is not a death (see %s)", t.mlog);
}

/* Finding 15. Before: `top` flagged an op that had failures with "(errors)" and no count
 * ("DELETE 128066 (errors)"). Now it gives the count ("(2 errors)" on the totals screen). */
Test(ops2, top_counts_the_errors_of_each_op, .timeout = 60, .fini = ops_fini)
{
    ops_up(NULL, NULL);
    char out[8192];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(ops_cli(out, sizeof out, "--role=external --config %s del missing%d", t.ecfg, i), 1, "%s", out);
    int ex = ops_cli(out, sizeof out, "--role=external --config %s top --once", t.ecfg);
    cr_assert(ex == 0 && strstr(out, "(2 errors)") && !strstr(out, "(errors)"), "exit %d: %s", ex, out);
    /* only "default", without limits: no tenants section (issue 42) */
    cr_assert(!strstr(out, "\ntenants "), "%s", out);
}

/* The row of tenant name in top's tenants section, copied into row ("" when there is none). */
static void ops_tenant_row(const char *out, const char *name, char *row, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\n            %s ", name);
    const char *sec = strstr(out, "\ntenants "), *r = sec ? strstr(sec, pat) : NULL;
    size_t n = r ? strcspn(r + 1, "\n") : 0;
    snprintf(row, cap, "%.*s", (int)n, r ? r + 1 : "");
}

/* Issue 42. Before: `top` showed no tenant at all. Now, with tenants configured, it has a
 * row per tenant: held bytes, quota and guarantee (as the owner has them now, a `tenant
 * set` included), pinned bytes, hits, misses, evictions, refusals. */
Test(ops2, top_shows_each_tenants_bytes_and_quota, .timeout = 60, .fini = ops_fini)
{
    ops_up(NULL, ",\"tenants\":{\"acme\":{\"token\":\"acme-secret\",\"quota_bytes\":\"8MiB\","
                 "\"guaranteed_bytes\":\"1MiB\"}},\"tenant_admin_token\":\"admin-secret\"");
    char acme[300], val[300], out[8192], row[512];
    ops_client_cfg(acme, sizeof acme, "acme.json", "secret", t.sock, ",\"tenant\":\"acme\",\"tenant_token\":\"acme-secret\"",
                   "");
    snprintf(val, sizeof val, "%s/v", t.dir);
    th_write_file(val, "value");
    cr_assert_eq(ops_cli(out, sizeof out, "--role=external --config %s put k1 %s", acme, val), 0, "%s", out);
    cr_assert_eq(ops_cli(out, sizeof out, "--role=external --config %s get k1 -o /dev/null", acme), 0, "%s", out);
    int ex = ops_cli(out, sizeof out, "--role=external --config %s top --once", t.ecfg);
    cr_assert(ex == 0 && strstr(out, "\ntenants     tenant ") && strstr(out, "quota") && strstr(out, "guaranteed") &&
                  strstr(out, "placed") && strstr(out, "on disk"),
              "exit %d: %s", ex, out);
    ops_tenant_row(out, "acme", row, sizeof row);
    /* held: one 4 KiB slot; quota 8 MiB, guarantee 1 MiB; one hit (100.0 %) */
    cr_assert(strstr(row, " 4.0 KiB ") && strstr(row, " 8.0 MiB ") && strstr(row, " 1.0 MiB ") &&
                  strstr(row, " 100.0 "), "acme's row: [%s] in %s", row, out);
    ops_tenant_row(out, "default", row, sizeof row);
    cr_assert(row[0], "default has a row too: %s", out);
    /* a quota changed at run time is what top shows */
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set acme --quota 12MiB --admin-token admin-secret",
                 t.ecfg);
    cr_assert_eq(ex, 0, "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s top --once", t.ecfg);
    ops_tenant_row(out, "acme", row, sizeof row);
    cr_assert(ex == 0 && strstr(row, " 12.0 MiB ") && !strstr(row, " 8.0 MiB "), "acme's row: [%s] in %s", row, out);
    /* the config's decimal units mean what they mean there (a new user's finding: 16MB was
     * "not a size" here while the config took it) */
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set acme --quota 16MB --admin-token admin-secret",
                 t.ecfg);
    cr_assert(ex == 0 && strstr(out, "quota_bytes 16000000"), "exit %d: %s", ex, out);
}

/* A new user's finding (session 21): a put refused NO_SPACE printed the status only; the
 * owner's message (here: the tenant, its quota and the field) reached nobody. Now the CLI
 * prints it (fluxon_last_error_message). */
Test(ops2, a_refused_put_says_why, .timeout = 60, .fini = ops_fini)
{
    ops_up(NULL, ",\"tenants\":{\"acme\":{\"token\":\"acme-secret\",\"quota_bytes\":\"64KiB\"}}");
    char acme[300], val[300], out[8192];
    ops_client_cfg(acme, sizeof acme, "acme.json", "secret", t.sock, ",\"tenant\":\"acme\",\"tenant_token\":\"acme-secret\"",
                   "");
    static char big[100 * 1024 + 1];
    memset(big, 'v', sizeof big - 1);
    snprintf(val, sizeof val, "%s/big", t.dir);
    th_write_file(val, big);
    int ex = ops_cli(out, sizeof out, "--role=external --config %s put big %s", acme, val);
    cr_assert(ex == 1 && strstr(out, "NO_SPACE") && strstr(out, "the owner says:") &&
                  strstr(out, "tenants.acme.quota_bytes"),
              "exit %d: %s", ex, out);
    /* a put that succeeds says nothing of the kind */
    snprintf(val, sizeof val, "%s/small", t.dir);
    th_write_file(val, "small");
    ex = ops_cli(out, sizeof out, "--role=external --config %s put small %s", acme, val);
    cr_assert(ex == 0 && !strstr(out, "the owner says"), "exit %d: %s", ex, out);
}

/* A new user's finding (session 19): with the master gone, `top --once` drew an empty
 * cluster (generation ?, 0 owners, 0 routes) and exited 0. Now its header says the master
 * is unreachable and it exits 1. */
Test(ops2, top_says_when_the_master_is_unreachable, .timeout = 60, .fini = ops_fini)
{
    ops_up(NULL, NULL);
    char out[8192];
    int st = th_stop(t.master, SIGKILL, 5000);
    cr_assert(WIFSIGNALED(st));
    t.master = -1;
    cr_assert(th_wait_log(t.olog, "lost the master connection", 5000), "see %s", t.olog);
    int ex = ops_cli(out, sizeof out, "--role=external --config %s top --once", t.ecfg);
    cr_assert(ex == 1 && strstr(out, "MASTER UNREACHABLE"), "exit %d: %s", ex, out);
}

/* Finding 15. Before: `stats` printed one 4.9 KB line of JSON on a terminal too. Now a
 * terminal gets it indented; a pipe still gets one line (scripts parse it). */
Test(ops2, stats_is_indented_on_a_terminal_and_one_line_in_a_pipe, .timeout = 60, .fini = ops_fini)
{
    if (access("/usr/bin/script", X_OK) != 0) cr_skip_test("no /usr/bin/script to give the CLI a terminal");
    ops_up(NULL, NULL);
    static char out[1 << 16];
    int ex = ops_cli(out, sizeof out, "--role=external --config %s stats", t.ecfg);
    cr_assert(ex == 0 && out[0] == '{' && strchr(out, '\n') == out + strlen(out) - 1, "one line: %.200s", out);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "timeout 60 /usr/bin/script -qec '%s --role=external --config %s stats' /dev/null",
             th_fluxon_bin(), t.ecfg);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    ex = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    int lines = 0;
    for (const char *q = out; (q = strchr(q, '\n')) && lines < 1000; q++) lines++;
    cr_assert(ex == 0 && lines > 20 && strstr(out, "\"owner\":"), "exit %d, %d lines: %.300s", ex, lines, out);
}
