/* unix.c — see unix.h. The unix-socket plumbing between an owner and its local
 * externals: SCM_RIGHTS fd passing with bounded waits, the owner's 0700/0600 listening
 * socket (stale-socket replacement), and connect with retry. */
#include "unix.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

/* How many fds one recvmsg can take: room for more than one so that a peer sending
 * extras is detected (and the extras closed) instead of silently truncated. */
#define UX_MAX_RECV_FDS 8
#define UX_CONNECT_RETRY_MS 10
#define UX_REFUSED_GRACE_MS 300

/* Waits for `events` on fd until deadline_ms (fx_now_ms clock). POLLHUP/POLLERR also
 * count as ready: the following syscall reports what happened. */
static int ux_poll_until(int fd, short events, uint64_t deadline_ms)
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

static int ux_sock_errno_status(int e)
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

FX_INTERNAL int fx_unix_send_fd(int sock, int fd, const void *data, size_t len, int timeout_ms)
{
    return fx_unix_send_fds(sock, &fd, 1, data, len, timeout_ms);
}

FX_INTERNAL int fx_unix_send_fds(int sock, const int *fds, int n_fds, const void *data, size_t len, int timeout_ms)
{
    if (sock < 0 || !fds || n_fds < 1 || n_fds > FX_UNIX_MAX_FDS || !data || len == 0 || timeout_ms < 0)
        return FLUXON_ERR_INVALID_ARGUMENT;
    for (int i = 0; i < n_fds; i++)
        if (fds[i] < 0) return FLUXON_ERR_INVALID_ARGUMENT;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * FX_UNIX_MAX_FDS)];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    uint64_t deadline = fx_now_ms() + (uint64_t)timeout_ms;
    size_t off = 0;
    bool fd_sent = false;
    while (off < len) {
        struct iovec iov = {.iov_base = (char *)data + off, .iov_len = len - off};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (!fd_sent) {
            msg.msg_control = ctl.buf;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n_fds);
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n_fds);
            memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n_fds);
        }
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = ux_poll_until(sock, POLLOUT, deadline);
                if (rc == FLUXON_ERR_TIMEOUT)
                    FX_WARN("unix socket: send_fd: no buffer space for %d ms", timeout_ms);
                if (rc != FLUXON_OK) return rc;
                continue;
            }
            int e = errno, rc = ux_sock_errno_status(e);
            if (e == EPIPE || e == ECONNRESET) /* the peer closed first (a client that gave up): not our failure */
                FX_WARN("unix socket: sendmsg with fd: the peer closed its end (%s)", strerror(e));
            else
                FX_ERROR("unix socket: sendmsg with fd failed: %s", strerror(e));
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
        int rc = ux_poll_until(sock, POLLIN, deadline);
        if (rc != FLUXON_OK) return rc;
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(int) * UX_MAX_RECV_FDS)];
        } ctl;
        memset(&ctl, 0, sizeof ctl);
        struct iovec iov = {.iov_base = buf, .iov_len = cap};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                             .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            rc = ux_sock_errno_status(errno);
            if (rc == FLUXON_ERR_UNAVAILABLE)
                FX_WARN("unix socket: recv_fd: peer reset: %m");
            else
                FX_ERROR("unix socket: recvmsg failed: %m");
            return rc;
        }
        int fds[UX_MAX_RECV_FDS];
        int nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k && nfds < UX_MAX_RECV_FDS; i++)
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
static int ux_unix_addr(const char *path, struct sockaddr_un *addr, socklen_t *alen)
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

/* The socket directories this process made (ux_make_socket_dir), so that fx_unix_remove
 * takes away only a directory that was not there before; any thread (a process may run a
 * master and owners, each listening from its own thread). */
#define UX_MADE_MAX 16
static pthread_mutex_t ux_made_mu = PTHREAD_MUTEX_INITIALIZER;
static char *ux_made[UX_MADE_MAX];

static void ux_made_note(const char *dir)
{
    pthread_mutex_lock(&ux_made_mu);
    for (int i = 0; i < UX_MADE_MAX; i++)
        if (!ux_made[i]) {
            ux_made[i] = fx_strdup(dir); /* out of memory: the directory stays at the end */
            break;
        }
    pthread_mutex_unlock(&ux_made_mu);
}

FX_INTERNAL void fx_unix_remove(const char *path)
{
    if (!path || !*path) return;
    unlink(path);
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return; /* the working or the root directory: never made here */
    size_t n = (size_t)(slash - path);
    pthread_mutex_lock(&ux_made_mu);
    for (int i = 0; i < UX_MADE_MAX; i++)
        if (ux_made[i] && strlen(ux_made[i]) == n && !memcmp(ux_made[i], path, n)) {
            int e = rmdir(ux_made[i]) == 0 ? 0 : errno;
            if (e && e != ENOTEMPTY && e != EEXIST && e != ENOENT)
                FX_DEBUG("unix socket: cannot remove directory '%s' it made: %s", ux_made[i], strerror(e));
            if (e != ENOTEMPTY && e != EEXIST) { /* else another socket in it: removed after that one */
                fx_free(ux_made[i]);
                ux_made[i] = NULL;
            }
            break;
        }
    pthread_mutex_unlock(&ux_made_mu);
}

/* mkdir -p of path's directory, then checks that the directory holding the socket is
 * ours and private: the 0600 socket alone does not stop others from renaming or
 * replacing it inside a group/world-writable directory. */
static int ux_make_socket_dir(const char *path)
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
    if (created) ux_made_note(dir);
    /* mkdir's mode went through the umask; make the final directory exactly 0700. */
    if (created && chmod(dir, 0700) != 0) {
        FX_ERROR("unix socket: chmod 0700 of '%s' failed: %m", dir);
        rc = FLUXON_ERR_CONFIG;
        goto out;
    }
    /* a relative socket path is named with the directory it resolved to: "'.'" alone
     * does not say which directory a service was started in */
    char abs[PATH_MAX], shown[PATH_MAX + 2 * 108 + 96]; /* 108: sun_path */
    if (path[0] != '/' && realpath(dir, abs))
        snprintf(shown, sizeof shown, "'%s' (%s; the socket path '%s' is relative to the working directory)", dir,
                 abs, path);
    else
        snprintf(shown, sizeof shown, "'%s'", dir);
    struct stat st;
    if (lstat(dir, &st) != 0) {
        FX_ERROR("unix socket: cannot stat directory %s: %m", shown);
        rc = FLUXON_ERR_CONFIG;
    } else if (!S_ISDIR(st.st_mode)) {
        FX_ERROR("unix socket: %s is not a directory (symlinks are refused)", shown);
        rc = FLUXON_ERR_CONFIG;
    } else if (st.st_uid != geteuid()) {
        FX_ERROR("unix socket: directory %s is owned by uid %u, not by this user (%u)", shown,
                 (unsigned)st.st_uid, (unsigned)geteuid());
        rc = FLUXON_ERR_CONFIG;
    } else if ((st.st_mode & 077) != 0) {
        FX_ERROR("unix socket: directory %s has mode %03o; it must be 0700 (use a "
                 "private directory for the socket)", shown, (unsigned)(st.st_mode & 0777));
        rc = FLUXON_ERR_CONFIG;
    }
out:
    fx_free(dir);
    return rc;
}

/* Called when bind found path taken: unlinks it if it is a dead socket, refuses when a
 * process accepts there or when it is not a socket at all. */
static int ux_clear_stale(const char *path, const struct sockaddr_un *addr, socklen_t alen)
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
        int rc = ux_sock_errno_status(errno);
        FX_ERROR("unix socket: socket() failed: %m");
        return rc;
    }
    int r = connect(probe, (const struct sockaddr *)addr, alen);
    int e = errno;
    close(probe);
    /* A full backlog (EAGAIN) still means someone listens. */
    if (r == 0 || e == EAGAIN || e == EINPROGRESS) {
        FX_ERROR("unix socket: '%s': socket in use (another process is listening)", path);
        return FLUXON_ERR_BUSY; /* an operator's mistake: the CLI exits 2 */
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

FX_INTERNAL int fx_unix_socket(const char *path, int *fd_p, void *sockaddr_out, uint32_t *addrlen_p)
{
    if (!path || !*path || !fd_p || !sockaddr_out || !addrlen_p) return FLUXON_ERR_INVALID_ARGUMENT;
    struct sockaddr_un addr;
    socklen_t alen;
    int rc = ux_unix_addr(path, &addr, &alen);
    if (rc != FLUXON_OK) return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        FX_ERROR("unix socket: socket() failed: %m");
        return FLUXON_ERR_INTERNAL;
    }
    memcpy(sockaddr_out, &addr, alen);
    *addrlen_p = alen;
    *fd_p = fd;
    return FLUXON_OK;
}

FX_INTERNAL int fx_unix_listen(const char *path, int *fd_p)
{
    if (!path || !*path || !fd_p) return FLUXON_ERR_INVALID_ARGUMENT;
    struct sockaddr_un addr;
    socklen_t alen;
    int rc = ux_unix_addr(path, &addr, &alen);
    if (rc != FLUXON_OK) return rc;
    rc = ux_make_socket_dir(path);
    if (rc != FLUXON_OK) return rc;

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = ux_sock_errno_status(errno);
        FX_ERROR("unix socket: socket() failed: %m");
        return rc;
    }
    /* Linux creates the socket file from the socket inode's mode (minus umask), so this
     * closes the window between bind and the chmod below; best effort, chmod decides. */
    if (fchmod(fd, 0600) != 0) FX_DEBUG("unix socket: fchmod before bind failed: %m");
    for (int attempt = 0;; attempt++) {
        if (bind(fd, (const struct sockaddr *)&addr, alen) == 0) break;
        if (errno == EADDRINUSE && attempt == 0) {
            rc = ux_clear_stale(path, &addr, alen);
            if (rc != FLUXON_OK) goto err_close;
            continue;
        }
        if (errno == EADDRINUSE) {
            FX_ERROR("unix socket: '%s': socket in use (taken again while replacing it)", path);
            rc = FLUXON_ERR_BUSY;
        } else {
            int e = errno;
            rc = (e == EACCES || e == EROFS || e == ENOTDIR || e == ENOENT || e == EISDIR ||
                  e == ELOOP || e == ENAMETOOLONG)
                     ? FLUXON_ERR_CONFIG : ux_sock_errno_status(e);
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
        rc = ux_sock_errno_status(errno);
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
    int rc = ux_unix_addr(path, &addr, &alen);
    if (rc != FLUXON_OK) return rc;
    uint64_t deadline = fx_now_ms() + (uint64_t)timeout_ms, refused_until = 0;
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = ux_sock_errno_status(errno);
            FX_ERROR("unix socket: socket() failed: %m");
            return rc;
        }
        int e = 0;
        if (connect(fd, (const struct sockaddr *)&addr, alen) != 0) e = errno;
        if (e == EINPROGRESS) {
            /* Not what AF_UNIX does today, but allowed for non-blocking sockets. */
            rc = ux_poll_until(fd, POLLOUT, deadline);
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
        /* ECONNREFUSED: the file is there but nobody listens on it — a stale socket whose
         * owner exited (a new owner binds a new file), or one caught between the owner's
         * bind and listen: retried UX_REFUSED_GRACE_MS only. */
        if (e == ECONNREFUSED && !refused_until) refused_until = now + UX_REFUSED_GRACE_MS;
        if (now >= deadline || (e == ECONNREFUSED && now >= refused_until)) {
            FX_DEBUG("unix socket: nobody accepted at '%s' within %llu ms (last error: %s)", path,
                     (unsigned long long)(now - (deadline - (uint64_t)timeout_ms)), strerror(e));
            errno = e;
            return FLUXON_ERR_UNAVAILABLE;
        }
        uint64_t nap = FX_MIN(deadline - now, (uint64_t)UX_CONNECT_RETRY_MS);
        struct timespec ts = {0, (long)nap * 1000000L};
        nanosleep(&ts, NULL); /* an early wake-up only means an earlier retry */
    }
}

#undef UX_MAX_RECV_FDS
#undef UX_CONNECT_RETRY_MS
#undef UX_REFUSED_GRACE_MS
