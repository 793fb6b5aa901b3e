/* segment.c — see segment.h. The owner's memfd segment (create, NUMA placement, attach
 * with header checks) and the unix-socket plumbing that hands it to externals: fd
 * passing by SCM_RIGHTS and a 0700/0600 listening socket. */
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <numa.h>
#include <numaif.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

/* How many fds one recvmsg can take: room for more than one so that a peer sending
 * extras is detected (and the extras closed) instead of silently truncated. */
#define SEG_MAX_RECV_FDS 8
#define SEG_CONNECT_RETRY_MS 10
#define SEG_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

struct fx_segment {
    void *base;
    uint64_t len;
    int fd;
    int numa_node;
    uint64_t generation;
    char node_id[64];
};

static int seg_errno_status(int e)
{
    switch (e) {
    case ENOSPC: return FLUXON_ERR_NO_SPACE;
    case ENOMEM: return FLUXON_ERR_NOMEM;
    default: return FLUXON_ERR_INTERNAL;
    }
}

/* ---------------------------------------------------------------------------------
 * Segment
 * ------------------------------------------------------------------------------- */

static int seg_numa_check(int node)
{
    if (numa_available() < 0) {
        FX_ERROR("segment: numa_node %d requested but NUMA is not available on this host "
                 "(numa_available() < 0); set numa_node to -1", node);
        return FLUXON_ERR_CONFIG;
    }
    int max = numa_max_node();
    /* numa_all_nodes_ptr = nodes this process may allocate on (cpuset-aware), so a node
     * that exists but is fenced off is refused here rather than failing at mbind. */
    if (node > max || !numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned int)node)) {
        FX_ERROR("segment: numa_node %d does not exist or has no memory usable by this "
                 "process (highest node: %d)", node, max);
        return FLUXON_ERR_CONFIG;
    }
    return FLUXON_OK;
}

/* Binds the shared object's pages to `node` and allocates them now. The policy set by
 * mbind on a shmem mapping is stored on the memfd itself, so fallocate honours it; and
 * fallocate turns "node full" into ENOSPC/ENOMEM instead of a SIGBUS or an OOM kill at
 * first touch. */
static int seg_numa_place(void *base, uint64_t bytes, int fd, int node)
{
    struct bitmask *mask = numa_allocate_nodemask();
    if (!mask) {
        FX_ERROR("segment: cannot allocate a NUMA node mask");
        return FLUXON_ERR_NOMEM;
    }
    numa_bitmask_setbit(mask, (unsigned int)node);
    long rc = mbind(base, bytes, MPOL_BIND, mask->maskp, mask->size + 1, 0);
    int e = errno;
    numa_free_nodemask(mask);
    if (rc != 0) {
        errno = e;
        if (e == ENOMEM) {
            FX_ERROR("segment: mbind to numa_node %d failed: %m", node);
            return FLUXON_ERR_NOMEM;
        }
        FX_ERROR("segment: cannot bind %llu bytes to numa_node %d: %m",
                 (unsigned long long)bytes, node);
        return FLUXON_ERR_CONFIG;
    }
    int frc;
    do {
        frc = fallocate(fd, 0, 0, (off_t)bytes);
    } while (frc != 0 && errno == EINTR);
    if (frc != 0) {
        if (errno == ENOSPC || errno == ENOMEM) {
            FX_ERROR("segment: numa_node %d has no room for %llu bytes: %m", node,
                     (unsigned long long)bytes);
            return FLUXON_ERR_NO_SPACE;
        }
        FX_ERROR("segment: fallocate of %llu bytes on numa_node %d failed: %m",
                 (unsigned long long)bytes, node);
        return FLUXON_ERR_INTERNAL;
    }
    /* Also fault every page into this mapping now, so the owner's first real access does
     * not pay for page-table setup and placement is final before we serve. */
    volatile char *p = base;
    for (uint64_t off = 0; off < bytes; off += FX_SEGMENT_PAGE_BYTES) p[off] = 0;
    return FLUXON_OK;
}

FX_INTERNAL int fx_segment_create(uint64_t bytes, int numa_node, uint64_t generation,
                                  const char *node_id, fx_segment_t **seg_p)
{
    if (!seg_p) return FLUXON_ERR_INVALID_ARGUMENT;
    if (bytes < FX_SEGMENT_MIN_BYTES || bytes % FX_SEGMENT_PAGE_BYTES != 0 ||
        bytes > (uint64_t)INT64_MAX || bytes > (uint64_t)SIZE_MAX) {
        FX_ERROR("segment: size %llu bytes rejected: must be a multiple of %u and at least "
                 "%u", (unsigned long long)bytes, FX_SEGMENT_PAGE_BYTES, FX_SEGMENT_MIN_BYTES);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (!node_id) node_id = "";
    if (strlen(node_id) >= sizeof(((struct fx_segment_header *)0)->node_id)) {
        FX_ERROR("segment: node_id '%s' is longer than 63 bytes", node_id);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (numa_node < 0) numa_node = -1;
    int rc = numa_node >= 0 ? seg_numa_check(numa_node) : FLUXON_OK;
    if (rc != FLUXON_OK) return rc;

    fx_segment_t *seg = fx_calloc(1, sizeof *seg);
    if (!seg) return FLUXON_ERR_NOMEM;
    seg->fd = memfd_create("fluxon-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (seg->fd < 0) {
        rc = seg_errno_status(errno);
        FX_ERROR("segment: memfd_create failed: %m");
        goto err_free;
    }
    if (ftruncate(seg->fd, (off_t)bytes) != 0) {
        rc = seg_errno_status(errno);
        FX_ERROR("segment: ftruncate to %llu bytes failed: %m", (unsigned long long)bytes);
        goto err_close;
    }
    /* Any process holding the fd could otherwise ftruncate it and make every other
     * mapping SIGBUS; F_SEAL_SEAL stops a peer from adding a write seal later. */
    if (fcntl(seg->fd, F_ADD_SEALS, SEG_SEALS) != 0) {
        rc = seg_errno_status(errno);
        FX_ERROR("segment: sealing the memfd failed: %m");
        goto err_close;
    }
    seg->base = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
    if (seg->base == MAP_FAILED) {
        rc = seg_errno_status(errno);
        FX_ERROR("segment: mmap of %llu bytes failed: %m", (unsigned long long)bytes);
        goto err_close;
    }
    if (numa_node >= 0) {
        rc = seg_numa_place(seg->base, bytes, seg->fd, numa_node);
        if (rc != FLUXON_OK) goto err_unmap;
    }
    seg->len = bytes;
    seg->generation = generation;
    seg->numa_node = numa_node;
    fx_strlcpy(seg->node_id, node_id, sizeof seg->node_id);

    struct fx_segment_header *h = seg->base; /* a fresh memfd reads as zeros */
    h->layout_version = FX_SEGMENT_LAYOUT_VERSION;
    h->header_bytes = FX_SEGMENT_HEADER_BYTES;
    h->generation = generation;
    h->length = bytes;
    h->numa_node = numa_node;
    memcpy(h->node_id, seg->node_id, sizeof h->node_id);
    __atomic_store_n(&h->magic, FX_SEGMENT_MAGIC, __ATOMIC_RELEASE);

    FX_DEBUG("segment: created %llu bytes, generation %llu, numa_node %d",
             (unsigned long long)bytes, (unsigned long long)generation, numa_node);
    *seg_p = seg;
    return FLUXON_OK;

err_unmap:
    munmap(seg->base, (size_t)bytes);
err_close:
    close(seg->fd);
err_free:
    fx_free(seg);
    return rc;
}

/* Validates the mapped header; returns FLUXON_OK, FLUXON_ERR_PROTOCOL or
 * FLUXON_ERR_STALE (generation checked last: a stale but well-formed segment is the
 * expected case after an owner restart, garbage is not). */
static int seg_check_header(const struct fx_segment_header *h, uint64_t file_len, int fd,
                            uint64_t expected_generation)
{
    uint64_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
    if (magic != FX_SEGMENT_MAGIC) {
        FX_WARN("segment: attach refused: bad magic 0x%016llx", (unsigned long long)magic);
        return FLUXON_ERR_PROTOCOL;
    }
    if (h->layout_version != FX_SEGMENT_LAYOUT_VERSION ||
        h->header_bytes != FX_SEGMENT_HEADER_BYTES) {
        FX_WARN("segment: attach refused: layout version %u / header %u bytes, expected "
                "%u / %u", h->layout_version, h->header_bytes, FX_SEGMENT_LAYOUT_VERSION,
                FX_SEGMENT_HEADER_BYTES);
        return FLUXON_ERR_PROTOCOL;
    }
    if (h->length != file_len) {
        FX_WARN("segment: attach refused: header length %llu != file size %llu",
                (unsigned long long)h->length, (unsigned long long)file_len);
        return FLUXON_ERR_PROTOCOL;
    }
    if (memchr(h->node_id, 0, sizeof h->node_id) == NULL) {
        FX_WARN("segment: attach refused: node_id is not NUL-terminated");
        return FLUXON_ERR_PROTOCOL;
    }
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
        FX_WARN("segment: attach refused: the fd is not sealed against resizing");
        return FLUXON_ERR_PROTOCOL;
    }
    if (h->generation != expected_generation) {
        FX_WARN("segment: attach refused: segment generation %llu, expected %llu (stale)",
                (unsigned long long)h->generation, (unsigned long long)expected_generation);
        return FLUXON_ERR_STALE;
    }
    return FLUXON_OK;
}

FX_INTERNAL int fx_segment_attach(int fd, uint64_t expected_generation, fx_segment_t **seg_p)
{
    if (fd < 0 || !seg_p) return FLUXON_ERR_INVALID_ARGUMENT;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = errno == EBADF ? FLUXON_ERR_INVALID_ARGUMENT : FLUXON_ERR_INTERNAL;
        FX_ERROR("segment: attach: fstat of fd %d failed: %m", fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        FX_ERROR("segment: attach: fd %d is not a memfd / regular file", fd);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    /* Checked before mmap: mapping 0 bytes fails, and a short file would SIGBUS on the
     * header read. */
    uint64_t len = (uint64_t)st.st_size;
    if (len < FX_SEGMENT_MIN_BYTES || len % FX_SEGMENT_PAGE_BYTES != 0 ||
        len > (uint64_t)SIZE_MAX) {
        FX_WARN("segment: attach refused: file size %llu is not a valid segment size",
                (unsigned long long)len);
        return FLUXON_ERR_PROTOCOL;
    }
    fx_segment_t *seg = fx_calloc(1, sizeof *seg);
    if (!seg) return FLUXON_ERR_NOMEM;
    int rc;
    seg->base = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (seg->base == MAP_FAILED) {
        if (errno == EACCES) {
            FX_ERROR("segment: attach: fd %d is not open read-write: %m", fd);
            rc = FLUXON_ERR_INVALID_ARGUMENT;
        } else {
            rc = seg_errno_status(errno);
            FX_ERROR("segment: attach: mmap of %llu bytes failed: %m", (unsigned long long)len);
        }
        goto err_free;
    }
    const struct fx_segment_header *h = seg->base;
    rc = seg_check_header(h, len, fd, expected_generation);
    if (rc != FLUXON_OK) goto err_unmap;

    seg->fd = fd;
    seg->len = len;
    seg->generation = h->generation;
    seg->numa_node = h->numa_node;
    memcpy(seg->node_id, h->node_id, sizeof seg->node_id);
    FX_DEBUG("segment: attached %llu bytes of node '%s', generation %llu",
             (unsigned long long)len, seg->node_id, (unsigned long long)seg->generation);
    *seg_p = seg;
    return FLUXON_OK;

err_unmap:
    munmap(seg->base, (size_t)len);
err_free:
    fx_free(seg);
    return rc;
}

FX_INTERNAL void *fx_segment_base(const fx_segment_t *seg) { return seg->base; }
FX_INTERNAL uint64_t fx_segment_len(const fx_segment_t *seg) { return seg->len; }
FX_INTERNAL int fx_segment_fd(const fx_segment_t *seg) { return seg->fd; }
FX_INTERNAL uint64_t fx_segment_generation(const fx_segment_t *seg) { return seg->generation; }
FX_INTERNAL uint64_t fx_segment_payload_offset(const fx_segment_t *seg)
{
    (void)seg;
    return FX_SEGMENT_HEADER_BYTES;
}
FX_INTERNAL const char *fx_segment_node_id(const fx_segment_t *seg) { return seg->node_id; }
FX_INTERNAL int fx_segment_numa_node(const fx_segment_t *seg) { return seg->numa_node; }

FX_INTERNAL void fx_segment_destroy(fx_segment_t *seg)
{
    if (!seg) return;
    if (munmap(seg->base, (size_t)seg->len) != 0) FX_ERROR("segment: munmap failed: %m");
    close(seg->fd);
    fx_free(seg);
}

/* ---------------------------------------------------------------------------------
 * Unix sockets and fd passing
 * ------------------------------------------------------------------------------- */

/* Waits for `events` on fd until deadline_ms (fx_now_ms clock). POLLHUP/POLLERR also
 * count as ready: the following syscall reports what happened. */
static int seg_poll_until(int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        uint64_t now = fx_now_ms();
        int wait = now >= deadline_ms ? 0 : (int)FX_MIN(deadline_ms - now, (uint64_t)INT_MAX);
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, wait);
        if (r > 0) return (p.revents & POLLNVAL) ? FLUXON_ERR_INVALID_ARGUMENT : FLUXON_OK;
        if (r == 0) {
            if (fx_now_ms() >= deadline_ms) return FLUXON_ERR_TIMEOUT;
            continue; /* woke a little early by the ms clock */
        }
        if (errno == EINTR) continue;
        FX_ERROR("unix socket: poll failed: %m");
        return FLUXON_ERR_INTERNAL;
    }
}

static int seg_sock_errno_status(int e)
{
    switch (e) {
    case EPIPE:
    case ECONNRESET:
    case ENOTCONN: return FLUXON_ERR_UNAVAILABLE;
    case EBADF:
    case ENOTSOCK:
    case EINVAL: return FLUXON_ERR_INVALID_ARGUMENT;
    case ENOMEM:
    case ENOBUFS: return FLUXON_ERR_NOMEM;
    default: return FLUXON_ERR_INTERNAL;
    }
}

FX_INTERNAL int fx_unix_send_fd(int sock, int fd, const void *data, size_t len)
{
    if (sock < 0 || fd < 0 || !data || len == 0) return FLUXON_ERR_INVALID_ARGUMENT;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    uint64_t deadline = fx_now_ms() + FX_UNIX_SEND_TIMEOUT_MS;
    size_t off = 0;
    bool fd_sent = false;
    while (off < len) {
        struct iovec iov = {.iov_base = (char *)data + off, .iov_len = len - off};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (!fd_sent) {
            msg.msg_control = ctl.buf;
            msg.msg_controllen = sizeof ctl.buf;
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &fd, sizeof fd);
        }
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = seg_poll_until(sock, POLLOUT, deadline);
                if (rc == FLUXON_ERR_TIMEOUT)
                    FX_WARN("unix socket: send_fd: no buffer space for %d ms",
                            FX_UNIX_SEND_TIMEOUT_MS);
                if (rc != FLUXON_OK) return rc;
                continue;
            }
            int rc = seg_sock_errno_status(errno);
            FX_ERROR("unix socket: sendmsg with fd failed: %m");
            return rc;
        }
        fd_sent = true; /* the kernel attached it to the first byte that went out */
        off += (size_t)n;
    }
    return FLUXON_OK;
}

FX_INTERNAL int fx_unix_recv_fd(int sock, int *fd_p, void *buf, size_t cap, size_t *len_p,
                                int timeout_ms)
{
    if (sock < 0 || !fd_p || !buf || cap == 0 || !len_p || timeout_ms < 0)
        return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t deadline = fx_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int rc = seg_poll_until(sock, POLLIN, deadline);
        if (rc != FLUXON_OK) return rc;
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(int) * SEG_MAX_RECV_FDS)];
        } ctl;
        memset(&ctl, 0, sizeof ctl);
        struct iovec iov = {.iov_base = buf, .iov_len = cap};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                             .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            rc = seg_sock_errno_status(errno);
            if (rc == FLUXON_ERR_UNAVAILABLE)
                FX_WARN("unix socket: recv_fd: peer reset: %m");
            else
                FX_ERROR("unix socket: recvmsg failed: %m");
            return rc;
        }
        int fds[SEG_MAX_RECV_FDS];
        int nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k && nfds < SEG_MAX_RECV_FDS; i++)
                memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
        if (n == 0 && nfds == 0) {
            FX_DEBUG("unix socket: recv_fd: peer closed");
            return FLUXON_ERR_UNAVAILABLE;
        }
        if ((msg.msg_flags & MSG_CTRUNC) || nfds != 1 || n == 0) {
            FX_WARN("unix socket: recv_fd: expected exactly one fd, got %d%s with %zd data "
                    "bytes", nfds, (msg.msg_flags & MSG_CTRUNC) ? " (control truncated)" : "",
                    n);
            for (int i = 0; i < nfds; i++) close(fds[i]);
            return FLUXON_ERR_PROTOCOL;
        }
        *fd_p = fds[0];
        *len_p = (size_t)n;
        return FLUXON_OK;
    }
}

/* Fills addr from path; FLUXON_ERR_CONFIG when it does not fit sun_path. */
static int seg_unix_addr(const char *path, struct sockaddr_un *addr, socklen_t *alen)
{
    size_t plen = strlen(path);
    memset(addr, 0, sizeof *addr);
    if (plen >= sizeof addr->sun_path) {
        FX_ERROR("unix socket: path '%s' is %zu bytes; at most %zu fit in sun_path", path,
                 plen, sizeof addr->sun_path - 1);
        return FLUXON_ERR_CONFIG;
    }
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path, path, plen + 1);
    *alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + 1);
    return FLUXON_OK;
}

/* mkdir -p of path's directory, then checks that the directory holding the socket is
 * ours and private: the 0600 socket alone does not stop others from renaming or
 * replacing it inside a group/world-writable directory. */
static int seg_make_socket_dir(const char *path)
{
    char *dir = fx_strdup(path);
    if (!dir) return FLUXON_ERR_NOMEM;
    int rc = FLUXON_OK;
    char *slash = strrchr(dir, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == dir) {
        dir[1] = 0; /* "/x.sock": the root directory */
    } else {
        *slash = 0;
    }
    bool created = false;
    for (char *p = dir + 1; ; p++) {
        bool last = *p == 0;
        if (!last && *p != '/') continue;
        char save = *p;
        *p = 0;
        if (mkdir(dir, 0700) == 0) {
            created = last;
        } else if (errno != EEXIST) {
            FX_ERROR("unix socket: cannot create directory '%s': %m", dir);
            rc = FLUXON_ERR_CONFIG;
            goto out;
        }
        *p = save;
        if (last) break;
    }
    /* mkdir's mode went through the umask; make the final directory exactly 0700. */
    if (created && chmod(dir, 0700) != 0) {
        FX_ERROR("unix socket: chmod 0700 of '%s' failed: %m", dir);
        rc = FLUXON_ERR_CONFIG;
        goto out;
    }
    struct stat st;
    if (lstat(dir, &st) != 0) {
        FX_ERROR("unix socket: cannot stat directory '%s': %m", dir);
        rc = FLUXON_ERR_CONFIG;
    } else if (!S_ISDIR(st.st_mode)) {
        FX_ERROR("unix socket: '%s' is not a directory (symlinks are refused)", dir);
        rc = FLUXON_ERR_CONFIG;
    } else if (st.st_uid != geteuid()) {
        FX_ERROR("unix socket: directory '%s' is owned by uid %u, not by this user (%u)", dir,
                 (unsigned)st.st_uid, (unsigned)geteuid());
        rc = FLUXON_ERR_CONFIG;
    } else if ((st.st_mode & 077) != 0) {
        FX_ERROR("unix socket: directory '%s' has mode %03o; it must be 0700 (use a "
                 "private directory for the socket)", dir, (unsigned)(st.st_mode & 0777));
        rc = FLUXON_ERR_CONFIG;
    }
out:
    fx_free(dir);
    return rc;
}

/* Called when bind found path taken: unlinks it if it is a dead socket, refuses when a
 * process accepts there or when it is not a socket at all. */
static int seg_clear_stale(const char *path, const struct sockaddr_un *addr, socklen_t alen)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return FLUXON_OK; /* gone meanwhile */
        FX_ERROR("unix socket: cannot stat '%s': %m", path);
        return FLUXON_ERR_CONFIG;
    }
    if (!S_ISSOCK(st.st_mode)) {
        FX_ERROR("unix socket: '%s' exists and is not a socket; refusing to replace it", path);
        return FLUXON_ERR_CONFIG;
    }
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (probe < 0) {
        int rc = seg_sock_errno_status(errno);
        FX_ERROR("unix socket: socket() failed: %m");
        return rc;
    }
    int r = connect(probe, (const struct sockaddr *)addr, alen);
    int e = errno;
    close(probe);
    /* A full backlog (EAGAIN) still means someone listens. */
    if (r == 0 || e == EAGAIN || e == EINPROGRESS) {
        FX_ERROR("unix socket: '%s': socket in use (another process is listening)", path);
        return FLUXON_ERR_UNAVAILABLE;
    }
    if (e == ENOENT) return FLUXON_OK;
    if (e != ECONNREFUSED) {
        errno = e;
        FX_ERROR("unix socket: probing existing socket '%s' failed: %m", path);
        return FLUXON_ERR_UNAVAILABLE;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        FX_ERROR("unix socket: cannot remove stale socket '%s': %m", path);
        return FLUXON_ERR_CONFIG;
    }
    FX_INFO("unix socket: removed stale socket file '%s'", path);
    return FLUXON_OK;
}

FX_INTERNAL int fx_unix_listen(const char *path, int *fd_p)
{
    if (!path || !*path || !fd_p) return FLUXON_ERR_INVALID_ARGUMENT;
    struct sockaddr_un addr;
    socklen_t alen;
    int rc = seg_unix_addr(path, &addr, &alen);
    if (rc != FLUXON_OK) return rc;
    rc = seg_make_socket_dir(path);
    if (rc != FLUXON_OK) return rc;

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = seg_sock_errno_status(errno);
        FX_ERROR("unix socket: socket() failed: %m");
        return rc;
    }
    /* Linux creates the socket file from the socket inode's mode (minus umask), so this
     * closes the window between bind and the chmod below; best effort, chmod decides. */
    if (fchmod(fd, 0600) != 0) FX_DEBUG("unix socket: fchmod before bind failed: %m");
    for (int attempt = 0;; attempt++) {
        if (bind(fd, (const struct sockaddr *)&addr, alen) == 0) break;
        if (errno == EADDRINUSE && attempt == 0) {
            rc = seg_clear_stale(path, &addr, alen);
            if (rc != FLUXON_OK) goto err_close;
            continue;
        }
        if (errno == EADDRINUSE) {
            FX_ERROR("unix socket: '%s': socket in use (taken again while replacing it)", path);
            rc = FLUXON_ERR_UNAVAILABLE;
        } else {
            int e = errno;
            rc = (e == EACCES || e == EROFS || e == ENOTDIR || e == ENOENT || e == EISDIR ||
                  e == ELOOP || e == ENAMETOOLONG)
                     ? FLUXON_ERR_CONFIG : seg_sock_errno_status(e);
            FX_ERROR("unix socket: bind to '%s' failed: %m", path);
        }
        goto err_close;
    }
    if (chmod(path, 0600) != 0) {
        FX_ERROR("unix socket: chmod 0600 of '%s' failed: %m", path);
        rc = FLUXON_ERR_INTERNAL;
        goto err_unlink;
    }
    if (listen(fd, SOMAXCONN) != 0) {
        rc = seg_sock_errno_status(errno);
        FX_ERROR("unix socket: listen on '%s' failed: %m", path);
        goto err_unlink;
    }
    FX_DEBUG("unix socket: listening on '%s'", path);
    *fd_p = fd;
    return FLUXON_OK;

err_unlink:
    unlink(path);
err_close:
    close(fd);
    return rc;
}

FX_INTERNAL int fx_unix_connect(const char *path, int timeout_ms, int *fd_p)
{
    if (!path || !*path || !fd_p || timeout_ms < 0) return FLUXON_ERR_INVALID_ARGUMENT;
    struct sockaddr_un addr;
    socklen_t alen;
    int rc = seg_unix_addr(path, &addr, &alen);
    if (rc != FLUXON_OK) return rc;
    uint64_t deadline = fx_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = seg_sock_errno_status(errno);
            FX_ERROR("unix socket: socket() failed: %m");
            return rc;
        }
        int e = 0;
        if (connect(fd, (const struct sockaddr *)&addr, alen) != 0) e = errno;
        if (e == EINPROGRESS) {
            /* Not what AF_UNIX does today, but allowed for non-blocking sockets. */
            rc = seg_poll_until(fd, POLLOUT, deadline);
            socklen_t elen = sizeof e;
            if (rc == FLUXON_OK && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0)
                e = errno;
            else if (rc != FLUXON_OK)
                e = ETIMEDOUT;
        }
        if (e == 0) {
            *fd_p = fd;
            return FLUXON_OK;
        }
        close(fd);
        bool retry = e == ENOENT || e == ECONNREFUSED || e == EAGAIN || e == EINTR ||
                     e == ETIMEDOUT;
        if (!retry) {
            errno = e;
            FX_ERROR("unix socket: connect to '%s' failed: %m", path);
            return FLUXON_ERR_UNAVAILABLE;
        }
        uint64_t now = fx_now_ms();
        if (now >= deadline) {
            errno = e;
            FX_WARN("unix socket: nobody accepted at '%s' within %d ms (last error: %m)", path,
                    timeout_ms);
            return FLUXON_ERR_UNAVAILABLE;
        }
        uint64_t nap = FX_MIN(deadline - now, (uint64_t)SEG_CONNECT_RETRY_MS);
        struct timespec ts = {0, (long)nap * 1000000L};
        nanosleep(&ts, NULL); /* an early wake-up only means an earlier retry */
    }
}

#undef SEG_MAX_RECV_FDS
#undef SEG_CONNECT_RETRY_MS
#undef SEG_SEALS
