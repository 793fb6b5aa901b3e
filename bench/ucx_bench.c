/* ucx_bench.c — measures the UCX data plane (two processes, batched GET/PUT per
 * mechanism) against ucx_perftest on the same transport and size, so the figures can be
 * read as a fraction of what UCX itself achieves on this machine. */
#include "bench.h"
#include "ucx_dp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "log.h"
#include "ucxpeer.h"

#define UCXDP_BENCH_IO_MS 20000      /* handshake over the socketpair */
#define UCXDP_BENCH_CHILD_S 600      /* the serving child gives up after this */
#define UCXDP_BENCH_XFER_MS 120000u  /* one batch */
#define UCXDP_BENCH_PERF_MS 90000    /* one ucx_perftest run */
#define UCXDP_BENCH_PERF_ITERS 50

static double ucxdp_bench_now(void)
{
    return (double)fx_now_ns() / 1e9;
}

/* The serving process: maps its region, publishes it and progresses its worker (the
 * target side of tcp transfers runs here) until told to quit or the parent vanishes. */
static void ucxdp_bench_serve(int fd, const char *tls, size_t region_len)
{
    int code = 1;
    fx_ucx_t *u = NULL;
    fx_ucx_mem_t *m = NULL;
    void *base = mmap(NULL, region_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) goto out;
    memset(base, 0x5a, region_len);
    if (fx_ucx_create(tls, &u) != FLUXON_OK) goto out;
    if (fx_ucx_mem_map(u, base, region_len, &m) != FLUXON_OK) goto out;
    if (ucxp_publish(fd, u, m, base) != 0) goto out;
    double end = ucxdp_bench_now() + UCXDP_BENCH_CHILD_S;
    while (ucxdp_bench_now() < end) {
        fx_ucx_progress(u);
        struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = fx_ucx_efd(u), .events = POLLIN}};
        int armed = fx_ucx_arm(u) == 1;
        if (poll(pf, 2, armed ? 100 : 0) > 0 && pf[0].revents) {
            char c = 0;
            if (recv(fd, &c, 1, 0) <= 0 || c == 'Q') {
                code = 0;
                break;
            }
        }
    }
out:
    fx_ucx_destroy(u); /* unmaps m too */
    if (base != MAP_FAILED) munmap(base, region_len);
    close(fd);
    _exit(code);
}

typedef struct ucxdp_bench_done {
    int fired;
    int status;
} ucxdp_bench_done_t;

static void ucxdp_bench_cb(void *arg, int status)
{
    ucxdp_bench_done_t *d = arg;
    d->fired = 1;
    d->status = status;
}

/* One batch; returns seconds, or a negative value on failure. */
static double ucxdp_bench_batch(fx_ucx_t *u, fx_ucx_peer_t *p, fx_ucx_op_t op,
                                const fx_ucx_range_t *r, size_t n)
{
    ucxdp_bench_done_t d = {0, 0};
    double t0 = ucxdp_bench_now();
    if (fx_ucx_transfer(u, p, op, r, n, ucxdp_bench_cb, &d) != FLUXON_OK) return -1;
    ucxp_wait(u, &d.fired, UCXDP_BENCH_XFER_MS + 5000, 100);
    double dt = ucxdp_bench_now() - t0;
    if (!d.fired || d.status != FLUXON_OK) {
        FX_ERROR("bench: %s batch failed: %s", op == FX_UCX_GET ? "GET" : "PUT",
                 d.fired ? fluxon_status_string(d.status) : "no completion");
        return -1;
    }
    return dt;
}

static int ucxdp_bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int ucxdp_bench_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* Starts ucx_perftest (server when host is NULL) with UCX_TLS=tls; its stdout goes to
 * out_fd (or /dev/null). Returns the pid or -1. */
static pid_t ucxdp_bench_spawn_perftest(const char *tls, const char *test, size_t size,
                                        int port, const char *host, int out_fd)
{
    char s_size[32], s_iters[16], s_port[16];
    snprintf(s_size, sizeof s_size, "%zu", size);
    snprintf(s_iters, sizeof s_iters, "%d", UCXDP_BENCH_PERF_ITERS);
    snprintf(s_port, sizeof s_port, "%d", port);
    pid_t pid = fork();
    if (pid != 0) return pid;
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(out_fd >= 0 ? out_fd : devnull, 1);
        dup2(devnull, 2);
    }
    if (tls) setenv("UCX_TLS", tls, 1);
    if (host)
        execlp("ucx_perftest", "ucx_perftest", host, "-t", test, "-s", s_size, "-n", s_iters,
               "-p", s_port, (char *)NULL);
    else
        execlp("ucx_perftest", "ucx_perftest", "-t", test, "-s", s_size, "-n", s_iters, "-p",
               s_port, (char *)NULL);
    _exit(127);
}

/* Runs one ucx_perftest pair; returns its average bandwidth in GB/s (1e9), or -1.
 * perftest prints MB/s meaning MiB/s. */
static double ucxdp_bench_perftest(const char *tls, const char *test, size_t size)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int port = ucxdp_bench_free_port();
        int pfd[2];
        if (port < 0 || pipe2(pfd, O_CLOEXEC) != 0) return -1;
        pid_t srv = ucxdp_bench_spawn_perftest(tls, test, size, port, NULL, -1);
        if (srv < 0) {
            close(pfd[0]);
            close(pfd[1]);
            return -1;
        }
        struct timespec ts = {0, (300 + 400 * attempt) * 1000L * 1000L}; /* server listen */
        nanosleep(&ts, NULL);
        pid_t cli = ucxdp_bench_spawn_perftest(tls, test, size, port, "127.0.0.1", pfd[1]);
        close(pfd[1]);
        char buf[16384];
        size_t used = 0;
        double end = ucxdp_bench_now() + UCXDP_BENCH_PERF_MS / 1000.0;
        while (cli > 0 && used + 1 < sizeof buf) {
            int left = (int)((end - ucxdp_bench_now()) * 1000);
            if (left <= 0) break;
            struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
            int r = poll(&pf, 1, left);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            ssize_t k = read(pfd[0], buf + used, sizeof buf - 1 - used);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            used += (size_t)k;
        }
        buf[used] = 0;
        close(pfd[0]);
        if (cli > 0) sio_reap(cli, 1000, NULL);
        sio_reap(srv, 2000, NULL);
        const char *f = strstr(buf, "Final:");
        double v[6];
        if (f && sscanf(f, "Final: %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4],
                        &v[5]) == 6)
            return v[4] * 1048576.0 / 1e9;
    }
    return -1;
}

FX_INTERNAL int fx_ucx_bench(FILE *out, const char *tls, size_t n_ranges, size_t range_len,
                             int iters)
{
    if (!out || !n_ranges || !range_len || iters < 1 || n_ranges > SIZE_MAX / range_len)
        return FLUXON_ERR_INVALID_ARGUMENT;
    const char *tname = tls ? tls : "default";
    size_t region_len = n_ranges * range_len;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return FLUXON_ERR_INTERNAL;
    fflush(out); /* the child must not flush our buffered output again */
    pid_t child = fork();
    if (child < 0) {
        close(sv[0]);
        close(sv[1]);
        return FLUXON_ERR_INTERNAL;
    }
    if (child == 0) {
        close(sv[0]);
        ucxdp_bench_serve(sv[1], tls, region_len);
    }
    close(sv[1]);

    int rc = FLUXON_ERR_INTERNAL;
    fx_ucx_t *u = NULL;
    fx_ucx_mem_t *m = NULL;
    fx_ucx_range_t *r = NULL;
    double *dt = NULL;
    void *raddr = NULL, *rkey = NULL;
    ucxp_info_t in;
    double res[2][2] = {{-1, -1}, {-1, -1}}; /* [mech rma/am][get/put] */
    const char *auto_mech = "?";
    void *base = mmap(NULL, region_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) goto done;
    memset(base, 0xa5, region_len);
    r = fx_calloc(n_ranges, sizeof *r);
    dt = fx_calloc((size_t)iters, sizeof *dt);
    if (!r || !dt) goto done;
    if ((rc = fx_ucx_create(tls, &u)) != FLUXON_OK) goto done;
    rc = FLUXON_ERR_INTERNAL;
    fx_ucx_set_timeout_ms(u, UCXDP_BENCH_XFER_MS);
    if (fx_ucx_mem_map(u, base, region_len, &m) != FLUXON_OK) goto done;
    if (ucxp_receive(sv[0], UCXDP_BENCH_IO_MS, &in, &raddr, &rkey) != 0) goto done;
    for (size_t i = 0; i < n_ranges; i++)
        r[i] = (fx_ucx_range_t){.local = (char *)base + i * range_len,
                                .remote_offset = (uint64_t)i * range_len, .len = range_len};
    for (int mech = FX_UCX_MECH_AUTO; mech <= FX_UCX_MECH_AM; mech++) {
        fx_ucx_peer_t *p = NULL;
        fx_ucx_set_mech(u, (fx_ucx_mech_t)mech);
        if (fx_ucx_peer_connect(u, raddr, in.addr_len, rkey, in.rkey_len, in.base, &p) != FLUXON_OK)
            goto done;
        if (mech == FX_UCX_MECH_AUTO) { /* only to learn what AUTO picks */
            auto_mech = fx_ucx_peer_mech_name(p);
            fx_ucx_peer_close(p);
            continue;
        }
        for (int op = 0; op < 2; op++) {
            fx_ucx_op_t o = op ? FX_UCX_PUT : FX_UCX_GET;
            bool ok = ucxdp_bench_batch(u, p, o, r, n_ranges) >= 0; /* warm-up: wire-up, faults */
            for (int i = 0; ok && i < iters; i++) ok = (dt[i] = ucxdp_bench_batch(u, p, o, r, n_ranges)) >= 0;
            if (!ok) {
                fx_ucx_peer_close(p);
                goto done;
            }
            qsort(dt, (size_t)iters, sizeof *dt, ucxdp_bench_cmp);
            res[mech - 1][op] = (double)region_len / dt[iters / 2] / 1e9;
        }
        fx_ucx_peer_close(p);
    }
    rc = FLUXON_OK;
done:
    if (sv[0] >= 0) {
        sio_write_all(sv[0], "Q", 1);
        close(sv[0]);
    }
    sio_reap(child, 5000, NULL);
    fx_ucx_destroy(u);
    if (base != MAP_FAILED) munmap(base, region_len);
    fx_free(r);
    fx_free(dt);
    fx_free(raddr);
    fx_free(rkey);
    if (rc != FLUXON_OK) {
        fprintf(out, "ucx %s: benchmark failed: %s\n", tname, fluxon_status_string(rc));
        return rc;
    }
    /* perftest after our instance is gone, so the two never compete for the 2 cores. */
    double pt_get = ucxdp_bench_perftest(tls, "ucp_get", range_len);
    double pt_put = ucxdp_bench_perftest(tls, "ucp_put_bw", range_len);
    double pt_am = ucxdp_bench_perftest(tls, "ucp_am_bw", range_len);
    static const char *const mech_name[2] = {"rma", "am"};
    static const char *const op_name[2] = {"get", "put"};
    for (int mech = 0; mech < 2; mech++) {
        for (int op = 0; op < 2; op++) {
            const char *test = mech ? "ucp_am_bw" : op ? "ucp_put_bw" : "ucp_get";
            double pt = mech ? pt_am : op ? pt_put : pt_get;
            fprintf(out, "ucx %s %s %zux%zu [%s%s]: %.2f GB/s (median of %d); ", tname,
                    op_name[op], n_ranges, range_len, mech_name[mech],
                    strcmp(auto_mech, mech_name[mech]) == 0 ? ", auto" : "", res[mech][op],
                    iters);
            if (pt > 0 && pt_get > 0 && pt < pt_get / 5) /* the peer's own outlier: say so */
                fprintf(out, "ucx_perftest %s: %.2f GB/s, a fifth of its own ucp_get (%.2f GB/s) on the same "
                             "transport in this run: not a fair peer; ratio to ucp_get %.2f\n",
                        test, pt, pt_get, res[mech][op] / pt_get);
            else if (pt > 0)
                fprintf(out, "ucx_perftest %s: %.2f GB/s; ratio %.2f\n", test, pt,
                        res[mech][op] / pt);
            else
                fprintf(out, "ucx_perftest %s: unavailable\n", test);
        }
    }
    fflush(out);
    return FLUXON_OK;
}

#undef UCXDP_BENCH_IO_MS
#undef UCXDP_BENCH_CHILD_S
#undef UCXDP_BENCH_XFER_MS
#undef UCXDP_BENCH_PERF_MS
#undef UCXDP_BENCH_PERF_ITERS
