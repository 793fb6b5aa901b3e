/* helpers.h — small helpers shared by the Criterion suites: temporary directories, free
 * loopback ports, and starting/stopping real `fluxon` processes with bounded waits. */
#ifndef FX_TEST_HELPERS_H
#define FX_TEST_HELPERS_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Creates a fresh temporary directory; returns a malloc'ed path. */
static inline char *th_tmpdir(void)
{
    char tmpl[] = "/tmp/fluxon-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

/* rm -rf of a directory made by th_tmpdir (bounded: only under /tmp/fluxon-test-). */
static inline void th_rmtree(const char *dir)
{
    if (!dir || strncmp(dir, "/tmp/fluxon-test-", 17) != 0) return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) { /* best effort */ }
}

/* A loopback TCP port that was free a moment ago. */
static inline int th_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static inline void th_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static inline double th_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void th_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Path of the fluxon binary under test ($FLUXON_BIN, else ./fluxon). */
static inline const char *th_fluxon_bin(void)
{
    const char *b = getenv("FLUXON_BIN");
    return b && *b ? b : "./fluxon";
}

/* Starts `fluxon argv...` with stdout+stderr appended to logpath; returns the pid. */
static inline pid_t th_spawn(const char *const argv[], const char *logpath)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (logpath) {
        posix_spawn_file_actions_addopen(&fa, 1, logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    pid_t pid = -1;
    if (posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* Sends sig, waits up to timeout_ms for exit, then SIGKILLs. Returns the wait status. */
static inline int th_stop(pid_t pid, int sig, int timeout_ms)
{
    if (pid <= 0) return -1;
    int st = 0;
    kill(pid, sig);
    double end = th_now_s() + timeout_ms / 1000.0;
    while (th_now_s() < end) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        th_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return st;
}

/* Waits until path exists (up to timeout_ms). Returns 1 if it appeared. */
static inline int th_wait_path(const char *path, int timeout_ms)
{
    double end = th_now_s() + timeout_ms / 1000.0;
    while (th_now_s() < end) {
        if (access(path, F_OK) == 0) return 1;
        th_sleep_ms(10);
    }
    return 0;
}

/* Waits until a file contains needle (up to timeout_ms). Returns 1 if found. */
static inline int th_wait_log(const char *path, const char *needle, int timeout_ms)
{
    double end = th_now_s() + timeout_ms / 1000.0;
    while (th_now_s() < end) {
        FILE *f = fopen(path, "r");
        if (f) {
            char line[2048];
            int found = 0;
            while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
            fclose(f);
            if (found) return 1;
        }
        th_sleep_ms(20);
    }
    return 0;
}

#endif
