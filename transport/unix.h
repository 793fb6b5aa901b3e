/* unix.h — unix-socket helpers between an owner and its local externals (§4): SCM_RIGHTS
 * fd passing (how the segment's memfd reaches an external), the owner's 0700/0600
 * listening socket, and connect with retry. Thread-safe for distinct sockets. */
#ifndef FX_UNIX_H
#define FX_UNIX_H

#include "fx.h"

/* A usual bound for fx_unix_send_fd's wait for buffer space from a thread that may wait
 * (tests, tools). A reactor passes 0: it never waits. */
#define FX_UNIX_SEND_TIMEOUT_MS 1000

/* Sends `len` (>= 1) bytes from data plus one fd (SCM_RIGHTS, attached to the first
 * byte) over a connected AF_UNIX SOCK_STREAM socket, blocking or not. Normally one
 * sendmsg; a short write is completed without the fd. Waits at most timeout_ms for buffer
 * space (0: never waits — what a reactor passes; a bootstrap message on a fresh
 * connection always fits). No SIGPIPE. fd stays owned by the caller (the receiver gets
 * its own duplicate). Thread-safe for distinct sockets.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (bad sock/fd, NULL data, len 0);
 * FLUXON_ERR_UNAVAILABLE (peer closed / reset); FLUXON_ERR_TIMEOUT (no buffer space
 * within timeout_ms: part of the message may have gone, close the socket);
 * FLUXON_ERR_INTERNAL. */
FX_INTERNAL int fx_unix_send_fd(int sock, int fd, const void *data, size_t len, int timeout_ms);
/* The same with n_fds (1..FX_UNIX_MAX_FDS) fds in one SCM_RIGHTS message, in order
 * (issue 18: the segment, the rings' memfd, the doorbell eventfd). */
#define FX_UNIX_MAX_FDS 4
FX_INTERNAL int fx_unix_send_fds(int sock, const int *fds, int n_fds, const void *data, size_t len, int timeout_ms);

/* Receives one message sent by fx_unix_send_fd: waits up to timeout_ms (>= 0; 0 = only
 * what is already queued) for data, then one recvmsg into buf (cap >= 1 bytes).
 * On FLUXON_OK *fd_p receives the fd (close-on-exec, caller owns it) and *len_p the
 * number of data bytes read (1..cap). Stream semantics: bytes may arrive split, so a
 * caller expecting a fixed-size message reads any remainder with ordinary reads.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (bad socket, NULL pointers, cap 0,
 * timeout_ms < 0); FLUXON_ERR_TIMEOUT (nothing arrived in time); FLUXON_ERR_UNAVAILABLE
 * (peer closed or reset); FLUXON_ERR_PROTOCOL (data without an fd, more than one fd,
 * truncated control data — every received fd is closed; the data bytes are consumed);
 * FLUXON_ERR_INTERNAL. EINTR is retried. */
FX_INTERNAL int fx_unix_recv_fd(int sock, int *fd_p, void *buf, size_t cap, size_t *len_p,
                                int timeout_ms);

/* Creates the owner's listening socket at path (AF_UNIX SOCK_STREAM, non-blocking,
 * close-on-exec, backlog SOMAXCONN). Missing parent directories are created with mode
 * 0700; the socket's own directory must end up a real directory (not a symlink) owned by
 * this user with mode 0700 (an existing one with group/other bits is refused, not
 * changed); the socket file gets mode 0600.
 * A leftover socket file nobody listens on (connect → ECONNREFUSED) is replaced; a path
 * that exists but is not a socket is refused. Liveness is probed by connecting, so a
 * live listener there sees one connection that closes without sending anything. The
 * caller removes path when it stops (fx_unix_remove).
 *  fd_p  receives the listening fd (caller owns it).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL/empty path, NULL fd_p);
 * FLUXON_ERR_CONFIG (path too long for sun_path, directory cannot be made or has the
 * wrong owner/mode, path is not a socket, permission denied); FLUXON_ERR_BUSY
 * ("socket in use": another process listens there); FLUXON_ERR_NOMEM;
 * FLUXON_ERR_INTERNAL. */
FX_INTERNAL int fx_unix_listen(const char *path, int *fd_p);

/* The listener at path stopped: unlinks path, and removes its directory when this process
 * made it (fx_unix_listen) and it is empty now. Any thread. */
FX_INTERNAL void fx_unix_remove(const char *path);

/* Connects to the unix socket at path, retrying while it does not exist yet or nobody
 * accepts (ENOENT, full backlog) until timeout_ms (>= 0) has passed; ECONNREFUSED (a
 * stale file nobody listens on) only for 300 ms (an owner between bind and listen).
 *  fd_p  receives the connected fd: non-blocking, close-on-exec (caller owns it).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL/empty path, NULL fd_p,
 * timeout_ms < 0); FLUXON_ERR_CONFIG (path too long for sun_path);
 * FLUXON_ERR_UNAVAILABLE (no listener within the timeout, errno = the last error, logged
 * at debug level; or a permanent error such as EACCES, logged); FLUXON_ERR_INTERNAL. */
FX_INTERNAL int fx_unix_connect(const char *path, int timeout_ms, int *fd_p);

/* A unix stream socket (non-blocking, close-on-exec) and the address of path, for an
 * asynchronous connect (fx_connect_start: the owner's link to a master on its host).
 *  sockaddr_out  receives a struct sockaddr_un (at least sizeof(struct sockaddr_un) bytes)
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL/empty path or outputs);
 * FLUXON_ERR_CONFIG (path too long for sun_path); FLUXON_ERR_INTERNAL (socket failed). */
FX_INTERNAL int fx_unix_socket(const char *path, int *fd_p, void *sockaddr_out, uint32_t *addrlen_p);

#endif /* FX_UNIX_H */
