/* test_cluster.c — master, owner and external as separate `fluxon` processes on
 * loopback, in a temporary directory with free ports: ping, refused credentials,
 * garbage on the master's port, owner death detection, re-registration after restart,
 * owner reconnect after a master restart, orderly SIGTERM, CLI exit statuses. */
#include <criterion/criterion.h>

#include "helpers.h"
#include "fluxon.h"

typedef struct cluster {
    char *dir;
    int port;
    pid_t master, owner;
    char mcfg[256], ocfg[256], ecfg[256], mlog[256], olog[256], sock[256];
    char msock[256]; /* set before cluster_up: the owner reaches the master on this unix socket */
} cluster_t;

static void write_configs(cluster_t *c, const char *token_e, const char *cluster_e)
{
    char buf[1024];
    snprintf(c->mcfg, sizeof c->mcfg, "%s/master.json", c->dir);
    snprintf(c->ocfg, sizeof c->ocfg, "%s/owner.json", c->dir);
    snprintf(c->ecfg, sizeof c->ecfg, "%s/external.json", c->dir);
    snprintf(c->mlog, sizeof c->mlog, "%s/master.log", c->dir);
    snprintf(c->olog, sizeof c->olog, "%s/owner.log", c->dir);
    snprintf(c->sock, sizeof c->sock, "%s/run/o1.sock", c->dir);
    char msock[300] = "", master[320];
    if (c->msock[0]) snprintf(msock, sizeof msock, "\"socket\":\"%s\",", c->msock);
    if (c->msock[0]) snprintf(master, sizeof master, "unix:%s", c->msock);
    else snprintf(master, sizeof master, "127.0.0.1:%d", c->port);
    snprintf(buf, sizeof buf,
             "{\"role\":\"master\",\"cluster_id\":\"t1\",\"cluster_token\":\"secret\",%s"
             "\"listen\":\"127.0.0.1:%d\",\"heartbeat_timeout_ms\":1000}", msock, c->port);
    th_write_file(c->mcfg, buf);
    snprintf(buf, sizeof buf,
             "{\"role\":\"owner\",\"cluster_id\":\"t1\",\"cluster_token\":\"secret\",\"node_id\":\"o1\","
             "\"master\":\"%s\",\"socket\":\"%s\",\"segment_bytes\":\"32MiB\","
             "\"reserve\":{\"grant_bytes\":\"8MiB\"},\"heartbeat_interval_ms\":100}", master, c->sock);
    th_write_file(c->ocfg, buf);
    snprintf(buf, sizeof buf,
             "{\"role\":\"external\",\"cluster_id\":\"%s\",\"cluster_token\":\"%s\",\"socket\":\"%s\","
             "\"timeout_ms\":3000}", cluster_e, token_e, c->sock);
    th_write_file(c->ecfg, buf);
}

static pid_t start_role(const char *role, const char *cfg, const char *log)
{
    char arg[64];
    snprintf(arg, sizeof arg, "--role=%s", role);
    const char *argv[] = {th_fluxon_bin(), arg, "--config", cfg, NULL};
    return th_spawn(argv, log);
}

/* unix_master: the master also listens on <dir>/run/master.sock and the owner uses it */
static void cluster_up_with(cluster_t *c, bool unix_master)
{
    memset(c, 0, sizeof *c);
    c->dir = th_tmpdir();
    cr_assert_not_null(c->dir);
    if (unix_master) snprintf(c->msock, sizeof c->msock, "%s/run/master.sock", c->dir);
    c->port = th_free_port();
    write_configs(c, "secret", "t1");
    c->master = start_role("master", c->mcfg, c->mlog);
    cr_assert(th_wait_log(c->mlog, "master listening", 5000), "master did not start");
    c->owner = start_role("owner", c->ocfg, c->olog);
    cr_assert(th_wait_log(c->mlog, "owner o1 registered", 5000), "owner did not register");
    cr_assert(th_wait_log(c->olog, "registered with master", 5000), "owner did not see its registration");
    cr_assert(th_wait_path(c->sock, 5000));
}

static void cluster_up(cluster_t *c) { cluster_up_with(c, false); }

static void cluster_down(cluster_t *c)
{
    if (c->owner > 0) th_stop(c->owner, SIGTERM, 3000);
    if (c->master > 0) th_stop(c->master, SIGTERM, 3000);
    c->owner = c->master = -1;
    if (c->dir) {
        th_rmtree(c->dir);
        free(c->dir);
        c->dir = NULL;
    }
}

/* One cluster per test process; .fini stops it even when an assertion failed. */
static cluster_t c;
static pid_t extra_pid = -1;
static void teardown(void)
{
    if (extra_pid > 0) th_stop(extra_pid, SIGKILL, 1000);
    cluster_down(&c);
}

/* Runs `fluxon --role=external --config cfg args...`, returns its exit status and
 * leaves its output in out (cap bytes). */
static int run_external(const char *cfg, const char *a1, const char *a2, const char *a3, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 60 %s --role=external --config %s %s %s %s 2>&1", th_fluxon_bin(), cfg,
             a1 ? a1 : "", a2 ? a2 : "", a3 ? a3 : "");
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *client_json(const char *sock, const char *token, const char *cluster)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"role\":\"external\",\"cluster_id\":\"%s\",\"cluster_token\":\"%s\",\"socket\":\"%s\","
             "\"timeout_ms\":3000,\"log_level\":\"error\"}", cluster, token, sock);
    return buf;
}

Test(cluster, ping_and_stat_through_processes, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    char out[4096];
    int ex = run_external(c.ecfg, "ping", "--count", "200", out, sizeof out);
    cr_assert_eq(ex, 0, "ping failed: %s", out);
    cr_assert(strstr(out, "external->owner ") && strstr(out, "external->owner->master") && strstr(out, "p99"), "%s", out);
    ex = run_external(c.ecfg, "stat", "--json", NULL, out, sizeof out);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert(strstr(out, "\"node_id\":\"o1\",\"role\":\"gpu_owner\""), "%s", out);
    /* the segment: segment_bytes 32 MiB and its header page mapped on top */
    cr_assert(strstr(out, "\"alive\":true,\"segment_bytes\":33558528"), "%s", out);
    ex = run_external(c.ecfg, "stat", NULL, NULL, out, sizeof out);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert(strstr(out, "NODE") && strstr(out, "o1") && strstr(out, "33558528"), "%s", out);
    ex = run_external(c.ecfg, "master-stats", NULL, NULL, out, sizeof out);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert(strstr(out, "\"owners\":1,\"routes\":0") && strstr(out, "\"inflight_puts\":0"), "%s", out);
    cluster_down(&c);
}

/* `hot` (issue 18's steady-state figures): both series over the asked rounds, its keys
 * deleted afterwards, bad arguments refused with usage status 2, a batch the owner turns
 * down reported (it crashed); `top --once` */
Test(cluster, hot_reports_steady_state_latencies_and_leaves_no_key, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    char out[4096];
    int ex = run_external(c.ecfg, "hot", "--iters", "20", out, sizeof out);
    cr_assert_eq(ex, 0, "hot failed: %s", out);
    cr_assert(strstr(out, "batch 64 x 65536 bytes, 20 rounds"), "%s", out);
    cr_assert(strstr(out, "get_start+get_transfer       n=20 ") && strstr(out, "put_start+commit             n=20 "),
              "%s", out);
    ex = run_external(c.ecfg, "master-stats", NULL, NULL, out, sizeof out);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert(strstr(out, "\"routes\":0"), "every key hot wrote is deleted: %s", out);
    cr_assert_eq(run_external(c.ecfg, "hot", "--batch", "0", out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "--batch 0 must be an integer in 1..4096"), "%s", out);
    cr_assert_eq(run_external(c.ecfg, "hot", "--iters", NULL, out, sizeof out), 2, "%s", out);
    /* a value larger than the owner's reserve.grant_bytes (8 MiB): refused, exit 2 as put's */
    cr_assert_eq(run_external(c.ecfg, "hot", "--value-len", "16777216", out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "the first put failed: FLUXON_ERR_INVALID_ARGUMENT"), "%s", out);
    /* a batch the 32 MiB owner cannot hold: keys turned down, reported, nothing left */
    cr_assert_eq(run_external(c.ecfg, "hot", "--value-len", "1048576", out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "the first put failed: FLUXON_ERR_NO_SPACE (the owner turned down"), "%s", out);
    ex = run_external(c.ecfg, "master-stats", NULL, NULL, out, sizeof out);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert(strstr(out, "\"routes\":0"), "nothing of the refused batch is published: %s", out);
    /* `top --once`: one frame of totals since start, labelled as totals, not rates; --once
     * wins over an unbounded --iterations 0; the master's generation (ns since the epoch,
     * above 2^53) exactly as master-stats says it, not rounded through a double */
    char gen[48] = "";
    const char *g = strstr(out, "\"generation\":");
    cr_assert_not_null(g, "%s", out);
    snprintf(gen, sizeof gen, "generation %.*s ", (int)strspn(g + 13, "0123456789"), g + 13);
    cr_assert_eq(run_external(c.ecfg, "top", "--iterations 0", "--once", out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, gen), "top does not print the master's %s: %s", gen, out);
    cr_assert(strstr(out, "fluxon top") && strstr(out, "since start") && strstr(out, "lookups (total)"), "%s", out);
    cr_assert(!strstr(out, "ops/s") && !strstr(out, "keys/s") && !strstr(out, "evictions/s"), "%s", out);
    cluster_down(&c);
}

/* `hot` against an owner that stops answering (SIGSTOP): it ends within a few of its
 * timeout_ms (3000), not after a timed-out delete for each of its 64 keys (192 s), and
 * says how many keys it left */
Test(cluster, hot_ends_within_its_timeout_when_the_owner_stalls, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    char log[300], out[4096];
    snprintf(log, sizeof log, "%s/hot.log", c.dir);
    const char *argv[] = {th_fluxon_bin(), "--role=external", "--config", c.ecfg, "hot", "--iters", "10000000", NULL};
    extra_pid = th_spawn(argv, log);
    cr_assert_gt(extra_pid, 0);
    bool running = false; /* its first batch is published: it is restoring */
    for (int i = 0; i < 200 && !running; i++) {
        cr_assert_eq(run_external(c.ecfg, "master-stats", NULL, NULL, out, sizeof out), 0, "%s", out);
        running = strstr(out, "\"routes\":64") != NULL;
        if (!running) th_sleep_ms(25);
    }
    cr_assert(running, "hot published nothing: %s", out);
    cr_assert_eq(kill(c.owner, SIGSTOP), 0);
    double t0 = th_now_s();
    int st = 0;
    int ended = th_wait_exit(extra_pid, 30, &st);
    double took = th_now_s() - t0;
    extra_pid = -1;
    kill(c.owner, SIGCONT);
    cr_assert(ended, "hot still ran 30 s after its owner stopped");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    cr_assert_lt(took, 15.0, "hot took %.1f s to give up", took);
    cr_assert(th_wait_log(log, "deleting its keys stopped at", 1000), "no word of the keys it left");
    cr_assert(th_wait_log(log, "FLUXON_ERR_TIMEOUT", 1000));
    cluster_down(&c);
}

Test(cluster, wrong_token_and_cluster_id_are_refused_with_auth, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    fluxon_client *cl = NULL;
    cr_assert_eq(fluxon_client_open(client_json(c.sock, "wrong", "t1"), &cl), FLUXON_ERR_AUTH);
    cr_assert_null(cl);
    cr_assert_eq(fluxon_client_open(client_json(c.sock, "secret", "other"), &cl), FLUXON_ERR_AUTH);
    cr_assert_eq(fluxon_client_open(client_json(c.sock, "", "t1"), &cl), FLUXON_ERR_AUTH);
    /* the right credentials still work afterwards */
    cr_assert_eq(fluxon_client_open(client_json(c.sock, "secret", "t1"), &cl), FLUXON_OK);
    uint64_t rtt = 0;
    cr_assert_eq(fluxon_client_ping(cl, 1, &rtt), FLUXON_OK);
    cr_assert_gt(rtt, 0);
    fluxon_client_close(cl);
    /* CLI: exit status 1 and the status named */
    write_configs(&c, "wrong", "t1");
    char out[4096];
    int ex = run_external(c.ecfg, "ping", "--count", "1", out, sizeof out);
    cr_assert_eq(ex, 2, "wrong credentials are a configuration error");
    cr_assert(strstr(out, "FLUXON_ERR_AUTH"), "%s", out);
    /* an owner with a wrong token is refused by the master and does not start */
    char bad[512], cfg[256], log[256];
    snprintf(cfg, sizeof cfg, "%s/bad-owner.json", c.dir);
    snprintf(log, sizeof log, "%s/bad-owner.log", c.dir);
    snprintf(bad, sizeof bad,
             "{\"role\":\"owner\",\"cluster_id\":\"t1\",\"cluster_token\":\"nope\",\"node_id\":\"o2\","
             "\"master\":\"127.0.0.1:%d\",\"socket\":\"%s/run2/o2.sock\",\"segment_bytes\":\"16MiB\","
             "\"reserve\":{\"grant_bytes\":\"8MiB\"}}", c.port, c.dir);
    th_write_file(cfg, bad);
    extra_pid = start_role("owner", cfg, log);
    th_stop(extra_pid, 0, 10000); /* signal 0: just wait for it to exit (start_timeout 10 s) */
    extra_pid = -1;
    cr_assert(th_wait_log(log, "FLUXON_ERR_AUTH", 100), "owner with a wrong token should report AUTH");
    cr_assert(th_wait_log(c.mlog, "refusing", 100));
    cluster_down(&c);
}

Test(cluster, garbage_on_the_master_port_does_not_take_it_down, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    for (int round = 0; round < 20; round++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c.port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
        uint8_t junk[4096];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(rand() & 0xff);
        if (round % 4 == 1) memcpy(junk, "FLX1", 4);             /* magic, then garbage */
        if (round % 4 == 2) memcpy(junk, "FLX1\x04\x00\x00\x00\xff\xff\xff\xff", 12); /* huge body */
        if (round % 4 == 3) memcpy(junk, "FLX1\x63\x00\x00\x00\x00\x00\x00\x00", 12); /* unknown type */
        ssize_t w = send(fd, junk, round % 2 ? sizeof junk : 24, MSG_NOSIGNAL);
        (void)w;
        th_sleep_ms(5);
        close(fd);
    }
    cr_assert_eq(kill(c.master, 0), 0, "master died");
    cr_assert(th_wait_log(c.mlog, "protocol error", 2000), "a protocol error should be logged");
    fluxon_client *cl = NULL;
    cr_assert_eq(fluxon_client_open(client_json(c.sock, "secret", "t1"), &cl), FLUXON_OK);
    uint64_t rtt;
    cr_assert_eq(fluxon_client_ping(cl, 1, &rtt), FLUXON_OK, "master must still serve its owner");
    fluxon_client_close(cl);
    cluster_down(&c);
}

/* A second copy of a running owner (same config: same socket) is an operator's mistake:
 * exit 2 naming the socket, and the first one keeps serving. */
Test(cluster, a_second_owner_on_a_socket_in_use_exits_2, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    char cmd[1200], out[4096];
    snprintf(cmd, sizeof cmd, "timeout 20 %s --role=owner --config %s 2>&1", th_fluxon_bin(), c.ocfg);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "exit %d: %s", WEXITSTATUS(st), out);
    cr_assert(strstr(out, "socket in use") && strstr(out, c.sock), "%s", out);
    cr_assert_eq(run_external(c.ecfg, "ping", "--count", "10", out, sizeof out), 0, "%s", out);
    cluster_down(&c);
}

Test(cluster, killed_owner_is_declared_dead_and_reregisters_with_new_generation, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    fluxon_client *cl = NULL;
    cr_assert_eq(fluxon_client_open(client_json(c.sock, "secret", "t1"), &cl), FLUXON_OK);
    char before[4096];
    size_t len;
    cr_assert_eq(fluxon_client_cluster_nodes(cl, before, sizeof before, &len), FLUXON_OK);
    fluxon_client_close(cl);
    double t0 = th_now_s();
    kill(c.owner, SIGKILL);
    waitpid(c.owner, NULL, 0);
    c.owner = -1;
    cr_assert(th_wait_log(c.mlog, "owner o1 (generation", 10000) && th_wait_log(c.mlog, "left: its connection closed", 10000),
              "master did not report the dead owner");
    double dt = th_now_s() - t0;
    /* the lost connection tells at once, the 1 s heartbeat timeout at the latest; the bound
     * stays below the 3 s default (the configured timeout is in force) with room for load */
    cr_assert_lt(dt, 2.9, "dead after %.2f s; heartbeat timeout is 1 s", dt);
    /* restart: a new generation is registered */
    c.owner = start_role("owner", c.ocfg, c.olog);
    cr_assert(th_wait_log(c.mlog, "owner o1 re-registered with generation", 5000));
    cr_assert(th_wait_path(c.sock, 5000));
    cr_assert_eq(fluxon_client_open(client_json(c.sock, "secret", "t1"), &cl), FLUXON_OK);
    char after[4096];
    cr_assert_eq(fluxon_client_cluster_nodes(cl, after, sizeof after, &len), FLUXON_OK);
    fluxon_client_close(cl);
    unsigned long long g1 = 0, g2 = 0;
    const char *p1 = strstr(before, "\"node_id\":\"o1\""), *p2 = strstr(after, "\"node_id\":\"o1\"");
    cr_assert(p1 && p2);
    sscanf(strstr(p1, "\"generation\":"), "\"generation\":%llu", &g1);
    sscanf(strstr(p2, "\"generation\":"), "\"generation\":%llu", &g2);
    cr_assert_gt(g2, g1, "generation must grow across restarts");
    cr_assert(strstr(strstr(after, "\"node_id\":\"o1\""), "\"alive\":true"));
    cluster_down(&c);
}

Test(cluster, owner_reconnects_when_the_master_restarts, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    th_stop(c.master, SIGKILL, 1000);
    cr_assert(th_wait_log(c.olog, "lost the master connection", 3000));
    fluxon_client *cl = NULL;
    cr_assert_eq(fluxon_client_open(client_json(c.sock, "secret", "t1"), &cl), FLUXON_OK);
    uint64_t rtt;
    cr_assert_eq(fluxon_client_ping(cl, 0, &rtt), FLUXON_OK, "the owner serves while its master is away");
    cr_assert_eq(fluxon_client_ping(cl, 1, &rtt), FLUXON_ERR_UNAVAILABLE);
    char mlog2[300];
    snprintf(mlog2, sizeof mlog2, "%s/master2.log", c.dir);
    c.master = start_role("master", c.mcfg, mlog2);
    cr_assert(th_wait_log(mlog2, "owner o1 registered", 8000), "owner did not come back");
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) {
        ok = fluxon_client_ping(cl, 1, &rtt) == FLUXON_OK;
        if (!ok) th_sleep_ms(50);
    }
    cr_assert(ok, "ping through the new master");
    fluxon_client_close(cl);
    cluster_down(&c);
}

/* "master": "unix:PATH" (issue 18): an owner on the master's host registers, forwards and
 * reconnects over the master's unix socket; a restarted master replaces the stale socket
 * file; an orderly stop removes it. */
Test(cluster, an_owner_on_the_masters_host_reaches_it_on_its_unix_socket, .timeout = 60, .fini = teardown)
{
    cluster_up_with(&c, true);
    char want[320], out[4096];
    snprintf(want, sizeof want, "registered with master unix:%s", c.msock);
    cr_assert(th_wait_log(c.olog, want, 3000), "the owner names the socket it registered on");
    cr_assert(th_wait_log(c.mlog, "and unix:", 1000), "the master names its socket");
    cr_assert_eq(run_external(c.ecfg, "ping", "--count", "50", out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "external->owner->master"), "%s", out);
    char val[300];
    snprintf(val, sizeof val, "%s/v.bin", c.dir);
    th_write_file(val, "over the unix socket\n");
    cr_assert_eq(run_external(c.ecfg, "put", "u1", val, out, sizeof out), 0, "%s", out);
    cr_assert_eq(run_external(c.ecfg, "master-stats", NULL, NULL, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "\"owners\":1,\"routes\":1"), "published through the master: %s", out);

    th_stop(c.master, SIGKILL, 1000); /* leaves its socket file behind */
    cr_assert(th_wait_log(c.olog, "lost the master connection", 3000));
    cr_assert_eq(access(c.msock, F_OK), 0, "a killed master leaves its socket file");
    char mlog2[300];
    snprintf(mlog2, sizeof mlog2, "%s/master2.log", c.dir);
    c.master = start_role("master", c.mcfg, mlog2);
    cr_assert(th_wait_log(mlog2, "owner o1 registered", 8000), "the owner came back over the socket");
    cr_assert(th_wait_log(mlog2, "re-learned", 3000), "the new master re-learns the owner's values");
    cr_assert_eq(run_external(c.ecfg, "get", "u1", NULL, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "over the unix socket"), "%s", out);

    int st = th_stop(c.master, SIGTERM, 5000);
    c.master = -1;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "master exit status %d", st);
    cr_assert_neq(access(c.msock, F_OK), 0, "an orderly stop removes the socket file");
    cluster_down(&c);
}

Test(cluster, sigterm_is_orderly_and_unlinks_the_socket, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    int st = th_stop(c.owner, SIGTERM, 5000);
    c.owner = -1;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "owner exit status %d", st);
    cr_assert_neq(access(c.sock, F_OK), 0, "socket file must be gone");
    st = th_stop(c.master, SIGINT, 5000);
    c.master = -1;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cluster_down(&c);
}

Test(cluster, cli_usage_and_config_errors_exit_2, .timeout = 60, .fini = teardown)
{
    char *dir = th_tmpdir();
    char cfg[256], cmd[600], out[4096];
    snprintf(cfg, sizeof cfg, "%s/bad.json", dir);
    th_write_file(cfg, "{\"role\":\"master\",\"cluster_id\":\"x\",\"listen\":\"nonsense\"}");
    snprintf(cmd, sizeof cmd, "%s --role=master --config %s 2>&1", th_fluxon_bin(), cfg);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    cr_assert_eq(WEXITSTATUS(st), 2, "%s", out);
    cr_assert(strstr(out, "listen"), "the message names the field: %s", out);
    /* a segment larger than this host's memory is refused, naming the field and the limit
     * (it would be faulted in and end in an OOM kill) */
    th_write_file(cfg, "{\"role\":\"owner\",\"cluster_id\":\"x\",\"node_id\":\"big\",\"master\":\"127.0.0.1:1\","
                       "\"socket\":\"/nonexistent-dir/big.sock\",\"segment_bytes\":\"64TiB\"}");
    snprintf(cmd, sizeof cmd, "timeout 20 %s --role=owner --config %s 2>&1", th_fluxon_bin(), cfg);
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    st = pclose(p);
    cr_assert_eq(WEXITSTATUS(st), 2, "%s", out);
    cr_assert(strstr(out, "segment_bytes 70368744177664 plus its 4096-byte header page is more than") &&
                  strstr(out, "bytes: lower segment_bytes"),
              "%s", out);
    cr_assert_null(strstr(out, "heap_reserve_mib"), "the one error, no warning of a heap lowered for it first: %s", out);
    /* with "log_level": "off" nothing is logged: the CLI's own line says why (it said only
     * FLUXON_ERR_CONFIG: a new user's finding) */
    th_write_file(cfg, "{\"role\":\"owner\",\"cluster_id\":\"x\",\"node_id\":\"big\",\"master\":\"127.0.0.1:1\","
                       "\"socket\":\"/nonexistent-dir/big.sock\",\"segment_bytes\":\"64TiB\",\"log_level\":\"off\"}");
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    st = pclose(p);
    cr_assert_eq(WEXITSTATUS(st), 2, "%s", out);
    cr_assert(strstr(out, "fluxon: node did not start: FLUXON_ERR_CONFIG: config rejected: segment_bytes 70368744177664 "
                          "plus its 4096-byte header page is more than"), "%s", out);
    snprintf(cfg, sizeof cfg, "%s/bad.json", dir);
    snprintf(cmd, sizeof cmd, "%s --role=nobody --config %s >/dev/null 2>&1", th_fluxon_bin(), cfg);
    cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "%s --role=master --config %s/missing.json >/dev/null 2>&1", th_fluxon_bin(), dir);
    cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "%s --version", th_fluxon_bin());
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    cr_assert_eq(WEXITSTATUS(pclose(p)), 0);
    cr_assert(strstr(out, FLUXON_VERSION_STRING));
    /* and the commit it was built at: the Makefile rebuilds what prints it when HEAD moves */
    char head[64] = "";
    FILE *g = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (g && fgets(head, sizeof head, g)) head[strcspn(head, "\n")] = 0;
    if (g) pclose(g);
    if (head[0]) cr_assert(strstr(out, head), "fluxon --version: %s (HEAD is %s)", out, head);
    th_rmtree(dir);
    free(dir);
}

Test(cluster, cli_put_get_del_ls_and_stats, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    char in[256], outp[256], out[8192], cmd[2048];
    snprintf(in, sizeof in, "%s/value.bin", c.dir);
    snprintf(outp, sizeof outp, "%s/back.bin", c.dir);
    FILE *f = fopen(in, "wb");
    for (int i = 0; i < 100000; i++) fputc((i * 7) & 0xff, f);
    fclose(f);
    cr_assert_eq(run_external(c.ecfg, "put", "page:001", in, out, sizeof out), 0, "%s", out);
    cr_assert_eq(run_external(c.ecfg, "put", "page:002", in, out, sizeof out), 0, "%s", out);
    cr_assert_eq(run_external(c.ecfg, "get", "page:001", "-o", out, sizeof out), 2, "-o needs a file: usage error");
    snprintf(cmd, sizeof cmd, "%s --role=external --config %s get page:001 -o %s && cmp %s %s", th_fluxon_bin(),
             c.ecfg, outp, in, outp);
    cr_assert_eq(system(cmd), 0, "get returns the bytes put");
    /* an output that cannot be written is a usage error found before the get, as put's
     * unreadable file; nothing is made */
    char bad[300];
    snprintf(bad, sizeof bad, "page:001 -o %s/no/such/dir/x", c.dir);
    cr_assert_eq(run_external(c.ecfg, "get", bad, NULL, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "cannot write") && strstr(out, "No such file or directory"), "%s", out);
    snprintf(bad, sizeof bad, "page:001 -o %s", c.dir);
    cr_assert_eq(run_external(c.ecfg, "get", bad, NULL, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "Is a directory"), "%s", out);
    cr_assert_eq(run_external(c.ecfg, "ls", "page:", NULL, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "page:001\npage:002\n"), "%s", out);
    cr_assert_eq(run_external(c.ecfg, "del", "page:001", NULL, out, sizeof out), 0, "%s", out);
    cr_assert_eq(run_external(c.ecfg, "del", "page:001", NULL, out, sizeof out), 1, "second delete: not found");
    cr_assert(strstr(out, "FLUXON_ERR_NOT_FOUND"), "%s", out);
    cr_assert_eq(run_external(c.ecfg, "get", "page:001", NULL, out, sizeof out), 1);
    cr_assert_eq(run_external(c.ecfg, "stats", NULL, NULL, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "\"slot_pool\":") && strstr(out, "\"slots_committed\":"), "%s", out);
    cr_assert_eq(run_external(c.ecfg, "frobnicate", NULL, NULL, out, sizeof out), 2);
}

Test(cluster, master_restart_relearns_grants_and_values_and_keeps_get_ls_del_consistent, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    char small[256], big[256], out[8192];
    snprintf(small, sizeof small, "%s/small.bin", c.dir);
    snprintf(big, sizeof big, "%s/big.bin", c.dir);
    th_write_file(small, "hi\n");
    FILE *f = fopen(big, "wb");
    for (int i = 0; i < 100000; i++) fputc(i & 0xff, f);
    fclose(f);
    cr_assert_eq(run_external(c.ecfg, "put", "r1", small, out, sizeof out), 0, "%s", out);
    int st = th_stop(c.master, SIGTERM, 5000);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char mlog2[300];
    snprintf(mlog2, sizeof mlog2, "%s/master2.log", c.dir);
    c.master = start_role("master", c.mcfg, mlog2);
    cr_assert(th_wait_log(mlog2, "owner o1 registered", 8000), "owner did not come back");
    cr_assert(th_wait_log(mlog2, "re-learned", 2000), "the new master re-learns the owner's grants");
    /* the master logs the registration before the owner has its answer: until then a put
     * is answered UNKNOWN_OUTCOME (exit 3), so wait for the owner's side of the link */
    bool linked = false;
    for (double end = th_now_s() + 8; !linked && th_now_s() < end; th_sleep_ms(20)) {
        cr_assert_eq(run_external(c.ecfg, "stats", NULL, NULL, out, sizeof out), 0, "%s", out);
        linked = strstr(out, "\"master_connected\":true") != NULL;
    }
    cr_assert(linked, "the owner is linked to the new master: %s", out);
    /* a put of a new size gets a fresh grant, not one overlapping the owner's */
    cr_assert_eq(run_external(c.ecfg, "put", "r2", big, out, sizeof out), 0, "%s", out);
    /* the owner re-published r1 (issue 17): get, ls and del agree that it is still there */
    cr_assert(th_wait_log(mlog2, "owner o1 re-published", 8000), "the owner re-publishes what it holds");
    cr_assert_eq(run_external(c.ecfg, "get", "r1", NULL, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "hi"), "%s", out);
    cr_assert_eq(run_external(c.ecfg, "ls", NULL, NULL, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "r1") && strstr(out, "r2"), "%s", out);
    cr_assert_eq(run_external(c.ecfg, "del", "r1", NULL, out, sizeof out), 0, "%s", out);
    cr_assert_eq(run_external(c.ecfg, "get", "r1", NULL, out, sizeof out), 1, "%s", out);
    cr_assert_eq(run_external(c.ecfg, "ls", NULL, NULL, out, sizeof out), 0, "%s", out);
    cr_assert(!strstr(out, "r1") && strstr(out, "r2"), "%s", out);
}

Test(cluster, a_second_live_owner_with_the_same_node_id_is_refused, .timeout = 60, .fini = teardown)
{
    cluster_up(&c);
    char cfg[256], log[256], buf[1024];
    snprintf(cfg, sizeof cfg, "%s/dup.json", c.dir);
    snprintf(log, sizeof log, "%s/dup.log", c.dir);
    snprintf(buf, sizeof buf,
             "{\"role\":\"owner\",\"cluster_id\":\"t1\",\"cluster_token\":\"secret\",\"node_id\":\"o1\","
             "\"master\":\"127.0.0.1:%d\",\"socket\":\"%s/run-dup/o1.sock\",\"segment_bytes\":\"32MiB\","
             "\"reserve\":{\"grant_bytes\":\"8MiB\"}}", c.port, c.dir);
    th_write_file(cfg, buf);
    extra_pid = start_role("owner", cfg, log);
    int st = th_stop(extra_pid, 0, 15000); /* signal 0: wait for it to give up */
    extra_pid = -1;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "exit status %d", st);
    cr_assert(th_wait_log(log, "already registered", 100));
    char out[4096];
    cr_assert_eq(run_external(c.ecfg, "ping", "--count", "10", out, sizeof out), 0, "the first owner still serves: %s", out);
    cr_assert(!th_wait_log(c.mlog, "re-registered", 100), "no flapping");
}
