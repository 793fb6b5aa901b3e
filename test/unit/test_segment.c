/* test_segment.c — Criterion suite for transport/segment.c: a real memfd segment handed to
 * forked children over AF_UNIX and checked byte for byte, attach refusals, NUMA
 * placement, fd-passing errors and the owner socket's modes. Every child _exits and is
 * reaped with a bounded wait (and dies with its parent via PR_SET_PDEATHSIG). */
#include "helpers.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <numa.h>
#include <numaif.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "segment.h"
#include "sockio.h"

#define TSEG_MIB (1024u * 1024u)
#define TSEG_WAIT_MS 10000
/* One value for every test: Criterion 2.4.1 leaks a timer record (LeakSanitizer fails
 * the run) when tests with different .timeout values run in parallel. */
#define TSEG_TEST_TIMEOUT_S 60

/* ---- helpers ------------------------------------------------------------------- */

static void tseg_fill(void *p, size_t n, uint64_t seed)
{
    uint64_t x = seed | 1;
    unsigned char *b = p;
    for (size_t i = 0; i < n; i += 8) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        uint64_t v = x * 0x2545F4914F6CDD1Dull;
        memcpy(b + i, &v, FX_MIN(8, n - i));
    }
}

static uint64_t tseg_sum(const void *p, size_t n) /* FNV-1a 64 */
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t tseg_expected_sum(size_t n, uint64_t seed)
{
    void *tmp = malloc(n);
    if (!tmp) return 0;
    tseg_fill(tmp, n, seed);
    uint64_t s = tseg_sum(tmp, n);
    free(tmp);
    return s;
}

/* Exit code of pid, or -1 if it was killed / did not exit within timeout_ms (then it is
 * SIGKILLed and reaped, so no process is ever left behind). */
static int tseg_reap(pid_t pid, int timeout_ms)
{
    int st = 0;
    return sio_reap(pid, timeout_ms, &st) == 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void tseg_child_init(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(99);
}

static int tseg_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* A memfd of file_len bytes whose start holds hdr (hdr_len bytes), optionally sealed the
 * way fx_segment_create seals. */
static int tseg_memfd_with(const void *hdr, size_t hdr_len, size_t file_len, bool seal)
{
    int fd = memfd_create("tseg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)file_len) != 0 ||
        (hdr_len && pwrite(fd, hdr, FX_MIN(hdr_len, file_len), 0) < 0) ||
        (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* What the parent tells a child: where to read, what to expect, where to write. */
struct tseg_msg {
    uint64_t generation;
    uint64_t off_a, len, sum_a;
    uint64_t off_b, seed_b;
};

/* Receives the segment, attaches, returns 0 with *seg_p or an exit code. */
static int tseg_child_attach(int sock, struct tseg_msg *m, fx_segment_t **seg_p)
{
    int fd = -1;
    size_t got = 0;
    if (fx_unix_recv_fd(sock, &fd, m, sizeof *m, &got, TSEG_WAIT_MS) != FLUXON_OK) return 10;
    if (got < sizeof *m && sio_read_all(sock, (char *)m + got, sizeof *m - got, TSEG_WAIT_MS))
        return 11;
    if (fx_segment_attach(fd, m->generation, seg_p) != FLUXON_OK) {
        close(fd);
        return 12;
    }
    return 0;
}

/* ---- segment through a forked child -------------------------------------------- */

static int tseg_child_roundtrip(int sock, uint64_t seg_len)
{
    struct tseg_msg m;
    fx_segment_t *seg = NULL;
    int rc = tseg_child_attach(sock, &m, &seg);
    if (rc) return rc;
    unsigned char *b = fx_segment_base(seg);
    if (fx_segment_len(seg) != seg_len || fx_segment_generation(seg) != m.generation ||
        strcmp(fx_segment_node_id(seg), "node-a") != 0 || fx_segment_payload_offset(seg) != 4096)
        rc = 13;
    else if (tseg_sum(b + m.off_a, m.len) != m.sum_a)
        rc = 14;
    uint64_t reply = 0;
    if (!rc) {
        tseg_fill(b + m.off_b, m.len, m.seed_b);
        reply = tseg_sum(b + m.off_b, m.len);
    }
    fx_segment_destroy(seg);
    if (!rc && sio_write_all(sock, &reply, sizeof reply) != 0) rc = 15;
    return rc;
}

Test(segment, child_attaches_reads_and_writes, .timeout = TSEG_TEST_TIMEOUT_S)
{
    const uint64_t len = 4 * TSEG_MIB, gen = 0x1234567890abcdefull;
    fx_segment_t *seg = NULL;
    cr_assert_eq(fx_segment_create(len, -1, gen, "node-a", &seg), FLUXON_OK);
    unsigned char *base = fx_segment_base(seg);
    cr_assert_eq(memcmp(base, "FLXSEG01", 8), 0, "header starts with the magic bytes");

    struct tseg_msg m = {.generation = gen, .len = TSEG_MIB, .seed_b = 0xB0B};
    m.off_a = fx_segment_payload_offset(seg) + 12345; /* unaligned on purpose */
    m.off_b = fx_segment_payload_offset(seg) + 2 * TSEG_MIB + 777;
    tseg_fill(base + m.off_a, m.len, 0xA11CE);
    m.sum_a = tseg_sum(base + m.off_a, m.len);

    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        tseg_child_init(parent);
        close(sv[0]);
        _exit(tseg_child_roundtrip(sv[1], len));
    }
    close(sv[1]);
    int send_rc = fx_unix_send_fd(sv[0], fx_segment_fd(seg), &m, sizeof m, FX_UNIX_SEND_TIMEOUT_MS);
    uint64_t reply = 0;
    int read_rc = sio_read_all(sv[0], &reply, sizeof reply, TSEG_WAIT_MS);
    int code = tseg_reap(pid, TSEG_WAIT_MS);
    close(sv[0]);

    cr_assert_eq(send_rc, FLUXON_OK);
    cr_assert_eq(code, 0, "child exit code %d", code);
    cr_assert_eq(read_rc, 0);
    uint64_t seen = tseg_sum(base + m.off_b, m.len);
    cr_assert_eq(seen, reply, "parent sees the child's bytes");
    cr_assert_eq(seen, tseg_expected_sum(m.len, m.seed_b));
    cr_assert_eq(tseg_sum(base + m.off_a, m.len), m.sum_a, "the parent's region is intact");
    fx_segment_destroy(seg);
}

/* ---- two children share the same pages ------------------------------------------ */

static int tseg_child_writer(int sock, int ready_w)
{
    struct tseg_msg m;
    fx_segment_t *seg = NULL;
    int rc = tseg_child_attach(sock, &m, &seg);
    if (rc) return rc;
    tseg_fill((char *)fx_segment_base(seg) + m.off_b, m.len, m.seed_b);
    char one = 1, release = 0;
    if (sio_write_all(ready_w, &one, 1) != 0) rc = 20;
    /* Stay attached until the reader is done, so both mappings coexist. */
    else if (sio_read_all(sock, &release, 1, TSEG_WAIT_MS) != 0) rc = 21;
    fx_segment_destroy(seg);
    return rc;
}

static int tseg_child_reader(int sock, int ready_r)
{
    struct tseg_msg m;
    fx_segment_t *seg = NULL;
    int rc = tseg_child_attach(sock, &m, &seg);
    if (rc) return rc;
    char one = 0;
    uint64_t sum = 0;
    if (sio_read_all(ready_r, &one, 1, TSEG_WAIT_MS) != 0) rc = 30;
    else sum = tseg_sum((char *)fx_segment_base(seg) + m.off_b, m.len);
    fx_segment_destroy(seg);
    if (!rc && sio_write_all(sock, &sum, sizeof sum) != 0) rc = 31;
    return rc;
}

Test(segment, two_children_see_same_bytes, .timeout = TSEG_TEST_TIMEOUT_S)
{
    const uint64_t gen = 77;
    fx_segment_t *seg = NULL;
    cr_assert_eq(fx_segment_create(2 * TSEG_MIB + 4096, -1, gen, "node-b", &seg), FLUXON_OK);
    struct tseg_msg m = {.generation = gen, .off_b = 4096 + 4096 + 3, .len = TSEG_MIB,
                         .seed_b = 0xFEED};
    int sa[2], sb[2], ready[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sa), 0);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sb), 0);
    cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
    pid_t parent = getpid();

    pid_t a = fork();
    cr_assert_geq(a, 0);
    if (a == 0) {
        tseg_child_init(parent);
        close(sa[0]), close(sb[0]), close(sb[1]), close(ready[0]);
        _exit(tseg_child_writer(sa[1], ready[1]));
    }
    pid_t b = fork();
    if (b == 0) {
        tseg_child_init(parent);
        close(sa[0]), close(sa[1]), close(sb[0]), close(ready[1]);
        _exit(tseg_child_reader(sb[1], ready[0]));
    }
    close(sa[1]), close(sb[1]), close(ready[0]), close(ready[1]);

    int src_a = fx_unix_send_fd(sa[0], fx_segment_fd(seg), &m, sizeof m, FX_UNIX_SEND_TIMEOUT_MS);
    int src_b = b > 0 ? fx_unix_send_fd(sb[0], fx_segment_fd(seg), &m, sizeof m, FX_UNIX_SEND_TIMEOUT_MS) : -1;
    uint64_t reader_sum = 0;
    int read_rc = b > 0 ? sio_read_all(sb[0], &reader_sum, sizeof reader_sum, TSEG_WAIT_MS) : -1;
    char release = 1;
    int rel_rc = sio_write_all(sa[0], &release, 1);
    int code_b = b > 0 ? tseg_reap(b, TSEG_WAIT_MS) : -1;
    int code_a = tseg_reap(a, TSEG_WAIT_MS);
    close(sa[0]), close(sb[0]);

    cr_assert_gt(b, 0, "second fork failed");
    cr_assert_eq(src_a, FLUXON_OK);
    cr_assert_eq(src_b, FLUXON_OK);
    cr_assert_eq(code_a, 0, "writer exit code %d", code_a);
    cr_assert_eq(code_b, 0, "reader exit code %d", code_b);
    cr_assert_eq(read_rc, 0);
    cr_assert_eq(rel_rc, 0);
    uint64_t want = tseg_expected_sum(m.len, m.seed_b);
    cr_assert_eq(reader_sum, want, "reader saw the writer's bytes");
    cr_assert_eq(tseg_sum((char *)fx_segment_base(seg) + m.off_b, m.len), want);
    fx_segment_destroy(seg);
}

/* ---- attach refusals ------------------------------------------------------------ */

Test(segment, attach_wrong_generation_is_stale, .timeout = TSEG_TEST_TIMEOUT_S)
{
    fx_segment_t *seg = NULL, *att = NULL;
    cr_assert_eq(fx_segment_create(8192, -1, 1000, "n", &seg), FLUXON_OK);
    int fd = fcntl(fx_segment_fd(seg), F_DUPFD_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(fx_segment_attach(fd, 999, &att), FLUXON_ERR_STALE);
    cr_assert_null(att);
    cr_assert_neq(fcntl(fd, F_GETFD), -1, "a failed attach leaves the fd to the caller");
    cr_assert_eq(fx_segment_attach(fd, 1000, &att), FLUXON_OK);
    cr_assert_eq(fx_segment_generation(att), 1000);
    cr_assert_eq(fx_segment_fd(att), fd);
    ((char *)fx_segment_base(att))[5000] = 42;
    cr_assert_eq(((char *)fx_segment_base(seg))[5000], 42);
    fx_segment_destroy(att); /* closes fd */
    cr_assert_eq(fcntl(fd, F_GETFD), -1);
    fx_segment_destroy(seg);
    fx_segment_destroy(NULL);
}

Test(segment, attach_bad_header_is_protocol, .timeout = TSEG_TEST_TIMEOUT_S)
{
    fx_segment_t *att = NULL;
    unsigned char garbage[8192];
    memset(garbage, 0xAB, sizeof garbage);
    int fd = tseg_memfd_with(garbage, sizeof garbage, 8192, true);
    cr_assert_geq(fd, 0);
    cr_assert_eq(fx_segment_attach(fd, 1, &att), FLUXON_ERR_PROTOCOL);
    close(fd);

    /* Too small to hold a header and a payload page, and empty. */
    fd = tseg_memfd_with(garbage, 100, 100, true);
    cr_assert_eq(fx_segment_attach(fd, 1, &att), FLUXON_ERR_PROTOCOL);
    close(fd);
    fd = tseg_memfd_with(NULL, 0, 0, false);
    cr_assert_eq(fx_segment_attach(fd, 1, &att), FLUXON_ERR_PROTOCOL);
    close(fd);

    /* Start from a valid header and break one thing at a time. */
    fx_segment_t *seg = NULL;
    cr_assert_eq(fx_segment_create(8192, -1, 5, "n", &seg), FLUXON_OK);
    struct fx_segment_header h;
    memcpy(&h, fx_segment_base(seg), sizeof h);
    fx_segment_destroy(seg);

    fd = tseg_memfd_with(&h, sizeof h, 8192, true);
    cr_assert_eq(fx_segment_attach(fd, 5, &att), FLUXON_OK, "the unmodified copy attaches");
    fx_segment_destroy(att);
    att = NULL;

    struct fx_segment_header bad = h;
    bad.layout_version = 2;
    fd = tseg_memfd_with(&bad, sizeof bad, 8192, true);
    cr_assert_eq(fx_segment_attach(fd, 5, &att), FLUXON_ERR_PROTOCOL, "layout version");
    close(fd);

    fd = tseg_memfd_with(&h, sizeof h, 16384, true);
    cr_assert_eq(fx_segment_attach(fd, 5, &att), FLUXON_ERR_PROTOCOL, "length != file size");
    close(fd);

    bad = h;
    memset(bad.node_id, 'x', sizeof bad.node_id);
    fd = tseg_memfd_with(&bad, sizeof bad, 8192, true);
    cr_assert_eq(fx_segment_attach(fd, 5, &att), FLUXON_ERR_PROTOCOL, "node_id without NUL");
    close(fd);

    fd = tseg_memfd_with(&h, sizeof h, 8192, false);
    cr_assert_eq(fx_segment_attach(fd, 5, &att), FLUXON_ERR_PROTOCOL, "resizable memfd");
    close(fd);
    cr_assert_null(att);
}

Test(segment, attach_invalid_fds, .timeout = TSEG_TEST_TIMEOUT_S)
{
    fx_segment_t *att = NULL, *seg = NULL;
    cr_assert_eq(fx_segment_attach(-1, 1, &att), FLUXON_ERR_INVALID_ARGUMENT);
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    cr_assert_eq(fx_segment_attach(p[0], 1, &att), FLUXON_ERR_INVALID_ARGUMENT);
    close(p[0]), close(p[1]);

    cr_assert_eq(fx_segment_create(8192, -1, 9, "n", &seg), FLUXON_OK);
    cr_assert_eq(fx_segment_attach(fx_segment_fd(seg), 9, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fx_segment_fd(seg));
    int ro = open(proc, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(ro, 0);
    cr_assert_eq(fx_segment_attach(ro, 9, &att), FLUXON_ERR_INVALID_ARGUMENT, "read-only fd");
    close(ro);
    cr_assert_null(att);
    fx_segment_destroy(seg);
}

/* ---- create ------------------------------------------------------------------- */

Test(segment, create_rejects_bad_sizes, .timeout = TSEG_TEST_TIMEOUT_S)
{
    fx_segment_t *seg = NULL;
    const uint64_t bad[] = {0, 4096, 4097, 8191, 8193, 12288 + 1, UINT64_MAX & ~4095ull};
    for (size_t i = 0; i < FX_ARRAY_LEN(bad); i++)
        cr_assert_eq(fx_segment_create(bad[i], -1, 1, "n", &seg), FLUXON_ERR_INVALID_ARGUMENT,
                     "size %llu", (unsigned long long)bad[i]);
    cr_assert_null(seg);
    cr_assert_eq(fx_segment_create(8192, -1, 1, "n", NULL), FLUXON_ERR_INVALID_ARGUMENT);
    char long_id[65];
    memset(long_id, 'a', 64);
    long_id[64] = 0;
    cr_assert_eq(fx_segment_create(8192, -1, 1, long_id, &seg), FLUXON_ERR_INVALID_ARGUMENT);
    long_id[63] = 0; /* 63 bytes fit */
    cr_assert_eq(fx_segment_create(8192, -1, 1, long_id, &seg), FLUXON_OK);
    cr_assert_str_eq(fx_segment_node_id(seg), long_id);
    fx_segment_destroy(seg);
}

Test(segment, create_writes_header, .timeout = TSEG_TEST_TIMEOUT_S)
{
    fx_segment_t *seg = NULL;
    cr_assert_eq(fx_segment_create(3 * 4096, -1, 42, NULL, &seg), FLUXON_OK);
    const struct fx_segment_header *h = fx_segment_base(seg);
    cr_assert_eq(h->magic, FX_SEGMENT_MAGIC);
    cr_assert_eq(h->layout_version, 1);
    cr_assert_eq(h->header_bytes, 4096);
    cr_assert_eq(h->generation, 42);
    cr_assert_eq(h->length, 3 * 4096);
    cr_assert_eq(h->numa_node, -1);
    cr_assert_str_eq(h->node_id, "");
    cr_assert_eq(fx_segment_len(seg), 3 * 4096);
    cr_assert_eq(fx_segment_numa_node(seg), -1);
    int fdflags = fcntl(fx_segment_fd(seg), F_GETFD);
    cr_assert(fdflags & FD_CLOEXEC);
    int seals = fcntl(fx_segment_fd(seg), F_GET_SEALS);
    cr_assert_eq(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
                 F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    cr_assert_neq(ftruncate(fx_segment_fd(seg), 4096), 0, "sealed against shrinking");
    fx_segment_destroy(seg);
}

Test(segment, numa_node_0_places_pages, .timeout = TSEG_TEST_TIMEOUT_S)
{
    if (numa_available() < 0) cr_skip_test("NUMA not available on this host");
    fx_segment_t *seg = NULL;
    const uint64_t len = 4096 + 64 * 4096;
    cr_assert_eq(fx_segment_create(len, 0, 3, "numa", &seg), FLUXON_OK);
    cr_assert_eq(fx_segment_numa_node(seg), 0);
    cr_assert_eq(((const struct fx_segment_header *)fx_segment_base(seg))->numa_node, 0);
    for (uint64_t off = 4096; off < len; off += 16 * 4096) {
        int node = -1;
        long r = get_mempolicy(&node, NULL, 0, (char *)fx_segment_base(seg) + off,
                               MPOL_F_NODE | MPOL_F_ADDR);
        cr_assert_eq(r, 0, "get_mempolicy: %s", strerror(errno));
        cr_assert_eq(node, 0, "page at %llu is on node %d", (unsigned long long)off, node);
    }
    fx_segment_destroy(seg);
}

Test(segment, numa_node_missing_is_config, .timeout = TSEG_TEST_TIMEOUT_S)
{
    fx_segment_t *seg = NULL;
    cr_assert_eq(fx_segment_create(8192, 4095, 1, "n", &seg), FLUXON_ERR_CONFIG);
    if (numa_available() >= 0)
        cr_assert_eq(fx_segment_create(8192, numa_max_node() + 1, 1, "n", &seg),
                     FLUXON_ERR_CONFIG);
    cr_assert_null(seg);
}

/* ---- fd passing errors -------------------------------------------------------- */

Test(segment, recv_fd_times_out, .timeout = TSEG_TEST_TIMEOUT_S)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    int fd = -1;
    size_t got = 0;
    char buf[16];
    double t0 = th_now_s();
    int rc = fx_unix_recv_fd(sv[0], &fd, buf, sizeof buf, &got, 200);
    double ms = (th_now_s() - t0) * 1000.0;
    cr_assert_eq(rc, FLUXON_ERR_TIMEOUT);
    cr_assert(ms >= 190 && ms < 1500, "waited %.1f ms for a 200 ms timeout", ms);
    t0 = th_now_s();
    cr_assert_eq(fx_unix_recv_fd(sv[0], &fd, buf, sizeof buf, &got, 0), FLUXON_ERR_TIMEOUT);
    cr_assert_lt(th_now_s() - t0, 1.0, "a zero timeout polls once (microseconds; 1 s allows a loaded host)");
    cr_assert_eq(fd, -1);
    cr_assert_eq(fx_unix_recv_fd(sv[0], &fd, buf, sizeof buf, &got, -1),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_unix_recv_fd(sv[0], &fd, buf, 0, &got, 10), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_unix_send_fd(sv[1], 0, buf, 0, FX_UNIX_SEND_TIMEOUT_MS), FLUXON_ERR_INVALID_ARGUMENT);
    close(sv[0]), close(sv[1]);
}

Test(segment, recv_fd_protocol_errors, .timeout = TSEG_TEST_TIMEOUT_S)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    int fd = -1;
    size_t got = 0;
    char buf[16];

    /* Data without an fd. */
    cr_assert_eq(write(sv[1], "hello", 5), 5);
    cr_assert_eq(fx_unix_recv_fd(sv[0], &fd, buf, sizeof buf, &got, 1000), FLUXON_ERR_PROTOCOL);

    /* Two fds in one message: refused and both received copies closed. */
    int before = tseg_count_fds();
    int extra[2];
    cr_assert_eq(pipe2(extra, O_CLOEXEC), 0);
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = "x", .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                         .msg_controllen = sizeof ctl.b};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    memcpy(CMSG_DATA(c), extra, sizeof extra);
    cr_assert_eq(sendmsg(sv[1], &msg, 0), 1);
    close(extra[0]), close(extra[1]);
    cr_assert_eq(fx_unix_recv_fd(sv[0], &fd, buf, sizeof buf, &got, 1000), FLUXON_ERR_PROTOCOL);
    cr_assert_eq(tseg_count_fds(), before, "extra fds were closed");

    /* A good message still works on the same socket afterwards. */
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    cr_assert_eq(fx_unix_send_fd(sv[1], p[0], "ok", 2, FX_UNIX_SEND_TIMEOUT_MS), FLUXON_OK);
    cr_assert_eq(fx_unix_recv_fd(sv[0], &fd, buf, sizeof buf, &got, 1000), FLUXON_OK);
    cr_assert_eq(got, 2);
    cr_assert_eq(memcmp(buf, "ok", 2), 0);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC, "received fd is close-on-exec");
    cr_assert_eq(write(p[1], "z", 1), 1);
    char z = 0;
    cr_assert_eq(read(fd, &z, 1), 1, "received fd is the pipe's read end");
    cr_assert_eq(z, 'z');
    close(fd), close(p[0]), close(p[1]);

    /* Peer closed. */
    close(sv[1]);
    cr_assert_eq(fx_unix_recv_fd(sv[0], &fd, buf, sizeof buf, &got, 1000),
                 FLUXON_ERR_UNAVAILABLE);
    cr_assert_eq(fx_unix_send_fd(sv[0], 0, "x", 1, FX_UNIX_SEND_TIMEOUT_MS), FLUXON_ERR_UNAVAILABLE);
    close(sv[0]);
}

/* ---- owner socket ------------------------------------------------------------- */

static int tseg_accept(int lfd, int timeout_ms)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1) return -1;
    return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

Test(segment, listen_modes_in_use_and_stale, .timeout = TSEG_TEST_TIMEOUT_S)
{
    char *tmp = th_tmpdir();
    cr_assert_not_null(tmp);
    char dir1[512], dir2[512], path[512];
    snprintf(dir1, sizeof dir1, "%s/run", tmp);
    snprintf(dir2, sizeof dir2, "%s/run/fluxon-c1", tmp);
    snprintf(path, sizeof path, "%s/run/fluxon-c1/node.sock", tmp);

    mode_t old_umask = umask(0); /* the modes must not depend on the caller's umask */
    int lfd = -1;
    int rc = fx_unix_listen(path, &lfd);
    umask(old_umask);
    cr_assert_eq(rc, FLUXON_OK);

    struct stat st;
    cr_assert_eq(stat(dir1, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "parent dir mode %o", st.st_mode & 0777);
    cr_assert_eq(stat(dir2, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(st.st_mode & 0777, 0700, "socket dir mode %o", st.st_mode & 0777);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert(S_ISSOCK(st.st_mode));
    cr_assert_eq(st.st_mode & 0777, 0600, "socket mode %o", st.st_mode & 0777);
    cr_assert(fcntl(lfd, F_GETFL) & O_NONBLOCK);
    cr_assert(fcntl(lfd, F_GETFD) & FD_CLOEXEC);

    /* A second listener is refused and leaves the first one working. */
    int lfd2 = -1;
    cr_assert_eq(fx_unix_listen(path, &lfd2), FLUXON_ERR_BUSY);
    cr_assert_eq(lfd2, -1);
    /* Its liveness probe reached the live listener as a connection that closes unused. */
    int probe = tseg_accept(lfd, 1000);
    cr_assert_geq(probe, 0);
    char pb;
    cr_assert_eq(read(probe, &pb, 1), 0, "probe sent nothing and closed");
    close(probe);
    int cfd = -1;
    cr_assert_eq(fx_unix_connect(path, 1000, &cfd), FLUXON_OK);
    cr_assert(fcntl(cfd, F_GETFL) & O_NONBLOCK);
    cr_assert(fcntl(cfd, F_GETFD) & FD_CLOEXEC);
    int afd = tseg_accept(lfd, 1000);
    cr_assert_geq(afd, 0);

    /* Pass a segment over the connected pair (non-blocking sockets). */
    fx_segment_t *seg = NULL, *att = NULL;
    cr_assert_eq(fx_segment_create(8192, -1, 11, "sock", &seg), FLUXON_OK);
    memcpy((char *)fx_segment_base(seg) + 4096, "payload", 8);
    cr_assert_eq(fx_unix_send_fd(afd, fx_segment_fd(seg), "S", 1, FX_UNIX_SEND_TIMEOUT_MS), FLUXON_OK);
    int sfd = -1;
    size_t got = 0;
    char b[4];
    cr_assert_eq(fx_unix_recv_fd(cfd, &sfd, b, sizeof b, &got, 1000), FLUXON_OK);
    cr_assert_eq(fx_segment_attach(sfd, 11, &att), FLUXON_OK);
    cr_assert_str_eq((char *)fx_segment_base(att) + 4096, "payload");
    fx_segment_destroy(att);
    fx_segment_destroy(seg);
    close(afd), close(cfd);

    /* Listener gone, socket file left behind: the next listen replaces it. */
    close(lfd);
    cr_assert_eq(stat(path, &st), 0, "stale socket file exists");
    cr_assert_eq(fx_unix_listen(path, &lfd), FLUXON_OK);
    cr_assert_eq(fx_unix_connect(path, 1000, &cfd), FLUXON_OK);
    afd = tseg_accept(lfd, 1000);
    cr_assert_geq(afd, 0);
    close(afd), close(cfd), close(lfd);
    /* removed: the socket and the directory the first listen made for it (dir2, empty now);
     * dir1 (made too, but not the socket's own) stays */
    fx_unix_remove(path);
    cr_assert_neq(stat(path, &st), 0, "the socket is removed");
    cr_assert_neq(stat(dir2, &st), 0, "the directory made for the socket is removed");
    cr_assert_eq(stat(dir1, &st), 0);
    /* a directory that was there before the listen stays */
    cr_assert_eq(fx_unix_listen(path, &lfd), FLUXON_OK); /* makes dir2 again */
    close(lfd);
    char other[600];
    snprintf(other, sizeof other, "%s/other.sock", dir2);
    cr_assert_eq(fx_unix_listen(other, &lfd2), FLUXON_OK); /* dir2 exists: not made by this one */
    close(lfd2);
    fx_unix_remove(path); /* dir2 holds other.sock: not empty, stays */
    cr_assert_eq(stat(dir2, &st), 0, "a directory with another socket in it stays");
    fx_unix_remove(other); /* the last one out: dir2 was made by this process, now empty */
    cr_assert_neq(stat(dir2, &st), 0, "removed once its last socket went");
    snprintf(other, sizeof other, "%s/mine.sock", dir1);
    cr_assert_eq(fx_unix_listen(other, &lfd2), FLUXON_OK); /* dir1 was there (made for dir2's socket) */
    close(lfd2);
    fx_unix_remove(other);
    cr_assert_eq(stat(dir1, &st), 0, "a directory this listen did not make stays");
    th_rmtree(tmp);
    free(tmp);
}

Test(segment, listen_refusals, .timeout = TSEG_TEST_TIMEOUT_S)
{
    char *tmp = th_tmpdir();
    cr_assert_not_null(tmp);
    char path[512];
    int fd = -1;

    char longp[200];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = 0;
    cr_assert_eq(fx_unix_listen(longp, &fd), FLUXON_ERR_CONFIG);
    cr_assert_eq(fx_unix_connect(longp, 10, &fd), FLUXON_ERR_CONFIG);
    cr_assert_eq(fx_unix_listen("", &fd), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_unix_listen(NULL, &fd), FLUXON_ERR_INVALID_ARGUMENT);

    /* Not a socket: refused, and the file is not touched. */
    snprintf(path, sizeof path, "%s/plain", tmp);
    th_write_file(path, "data");
    cr_assert_eq(fx_unix_listen(path, &fd), FLUXON_ERR_CONFIG);
    cr_assert_eq(access(path, F_OK), 0);

    /* An existing directory others can read is refused, not chmod'ed. */
    char open_dir[512];
    snprintf(open_dir, sizeof open_dir, "%s/open", tmp);
    cr_assert_eq(mkdir(open_dir, 0755), 0);
    cr_assert_eq(chmod(open_dir, 0755), 0);
    snprintf(path, sizeof path, "%s/open/x.sock", tmp);
    cr_assert_eq(fx_unix_listen(path, &fd), FLUXON_ERR_CONFIG);
    struct stat st;
    cr_assert_eq(stat(open_dir, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0755);

    /* The same refusal of a relative path names the directory it resolved to, not '.'
     * alone (the log, on stderr, captured into a file here). */
    char cwd[512], logp[512], real[PATH_MAX], log[2048] = "";
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_not_null(realpath(open_dir, real));
    snprintf(logp, sizeof logp, "%s/log.txt", tmp);
    int logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600), saved = dup(STDERR_FILENO);
    cr_assert(logfd >= 0 && saved >= 0);
    fflush(stderr);
    cr_assert_eq(dup2(logfd, STDERR_FILENO), STDERR_FILENO);
    cr_assert_eq(chdir(open_dir), 0);
    int lrc = fx_unix_listen("r.sock", &fd);
    cr_assert_eq(chdir(cwd), 0);
    fflush(stderr);
    cr_assert_eq(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    close(logfd);
    cr_assert_eq(lrc, FLUXON_ERR_CONFIG);
    FILE *lf = fopen(logp, "r");
    cr_assert_not_null(lf);
    size_t ln = fread(log, 1, sizeof log - 1, lf);
    log[ln] = 0;
    fclose(lf);
    cr_assert_not_null(strstr(log, real), "the log does not name %s: %s", real, log);
    cr_assert_not_null(strstr(log, "'r.sock' is relative"), "%s", log);

    /* Nobody listening: bounded wait, then UNAVAILABLE. */
    snprintf(path, sizeof path, "%s/none.sock", tmp);
    double t0 = th_now_s();
    cr_assert_eq(fx_unix_connect(path, 150, &fd), FLUXON_ERR_UNAVAILABLE);
    double ms = (th_now_s() - t0) * 1000.0;
    cr_assert(ms >= 140 && ms < 1500, "connect gave up after %.1f ms", ms);
    cr_assert_eq(fd, -1);
    th_rmtree(tmp);
    free(tmp);
}

Test(segment, connect_retries_until_listener_appears, .timeout = TSEG_TEST_TIMEOUT_S)
{
    char *tmp = th_tmpdir();
    cr_assert_not_null(tmp);
    char path[512];
    snprintf(path, sizeof path, "%s/late/owner.sock", tmp);
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        tseg_child_init(parent);
        th_sleep_ms(200);
        int lfd = -1;
        if (fx_unix_listen(path, &lfd) != FLUXON_OK) _exit(40);
        int afd = tseg_accept(lfd, TSEG_WAIT_MS);
        if (afd < 0) _exit(41);
        int rc = sio_write_all(afd, "!", 1) == 0 ? 0 : 42;
        char c;
        if (!rc && sio_read_all(afd, &c, 1, TSEG_WAIT_MS) != 0) rc = 43; /* parent done */
        close(afd), close(lfd);
        unlink(path);
        _exit(rc);
    }
    int fd = -1;
    double t0 = th_now_s();
    int rc = fx_unix_connect(path, 5000, &fd);
    double ms = (th_now_s() - t0) * 1000.0;
    char c = 0;
    int read_rc = rc == FLUXON_OK ? sio_read_all(fd, &c, 1, TSEG_WAIT_MS) : -1;
    if (rc == FLUXON_OK) {
        if (sio_write_all(fd, "k", 1) != 0) read_rc = -2;
        close(fd);
    }
    int code = tseg_reap(pid, TSEG_WAIT_MS);
    th_rmtree(tmp);
    free(tmp);
    cr_assert_eq(rc, FLUXON_OK);
    cr_assert_geq(ms, 150, "connected after %.1f ms, before the listener existed?", ms);
    cr_assert_eq(read_rc, 0);
    cr_assert_eq(c, '!');
    cr_assert_eq(code, 0, "listener child exit code %d", code);
}

/* A reactor passes timeout 0 to fx_unix_send_fd (issue 13 item 13): with the socket's
 * buffer full it returns TIMEOUT at once instead of waiting. */
Test(segment, send_fd_with_zero_timeout_never_waits)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    char junk[4096] = {0};
    for (int i = 0; i < 4096 && send(sv[0], junk, sizeof junk, MSG_DONTWAIT) > 0; i++) {}
    int p[2];
    cr_assert_eq(pipe(p), 0);
    double t0 = th_now_s();
    cr_assert_eq(fx_unix_send_fd(sv[0], p[0], "hello", 5, 0), FLUXON_ERR_TIMEOUT);
    cr_assert_lt(th_now_s() - t0, 1.0, "returned without waiting (microseconds; 1 s allows a loaded host)");
    cr_assert_eq(fx_unix_send_fd(sv[0], p[0], "hello", 5, -1), FLUXON_ERR_INVALID_ARGUMENT);
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
}

/* The memory a segment can have: the host's RAM at most, named */
Test(segment, the_memory_limit_is_at_most_the_ram_and_says_where_it_comes_from)
{
    char what[700] = "";
    uint64_t lim = fx_segment_memory_limit(what, sizeof what);
    uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    cr_assert(lim > 0 && lim <= ram, "limit %llu, RAM %llu", (unsigned long long)lim, (unsigned long long)ram);
    cr_assert(strstr(what, "RAM") || strstr(what, "cgroup"), "%s", what);
}
