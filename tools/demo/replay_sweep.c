/* replay_sweep.c — the directories of earlier demos that never reached their cleanup (a
 * kill -9, an OOM kill): `fluxon demo` makes /tmp/fluxon-demo-XXXXXX for its sockets and
 * removes it as it ends; one killed leaves it behind with its sockets. A later demo removes
 * such a directory when nothing can still be using it: it is this user's, a private
 * directory untouched for min_age_s, holding nothing but sockets no process listens on. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "replay.h"

/* 1 when path is a socket nobody accepts on (connect refused), else 0 */
static int rp_dead_socket(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) return 0;
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    int r = connect(fd, (const struct sockaddr *)&a, sizeof a);
    int e = errno;
    close(fd);
    return r != 0 && e == ECONNREFUSED;
}

/* 1 when dir (of this user, mode 0700, older than min_age_s) holds only dead sockets (at
 * most 64 of them): each is unlinked, then dir. */
static int rp_sweep_one(const char *dir, unsigned min_age_s)
{
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0777) != 0700 ||
        time(NULL) - st.st_mtime < (time_t)min_age_s)
        return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    char socks[64][256];
    unsigned n = 0;
    int ok = 1;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat es;
        ok = n < 64 && (size_t)snprintf(socks[n], sizeof socks[n], "%s/%s", dir, e->d_name) < sizeof socks[n] &&
             lstat(socks[n], &es) == 0 && S_ISSOCK(es.st_mode) && rp_dead_socket(socks[n]);
        n += ok;
    }
    closedir(d);
    if (!ok) return 0;
    for (unsigned i = 0; i < n; i++) unlink(socks[i]);
    return rmdir(dir) == 0;
}

int rp_sweep_stale_dirs(const char *parent, const char *prefix, unsigned min_age_s)
{
    DIR *d = opendir(parent);
    if (!d) return 0;
    int removed = 0;
    size_t pl = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[512];
        if (strncmp(e->d_name, prefix, pl) || strlen(e->d_name) != pl + 6 || /* mkdtemp's XXXXXX */
            (size_t)snprintf(path, sizeof path, "%s/%s", parent, e->d_name) >= sizeof path)
            continue;
        removed += rp_sweep_one(path, min_age_s);
    }
    closedir(d);
    return removed;
}
