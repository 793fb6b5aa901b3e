/* test_replay_sweep.c — `fluxon demo` removes the socket directories of earlier demos that
 * were killed (kill -9 left /tmp/fluxon-demo-XXXXXX with its sockets behind), and only
 * those: a private directory of this user, untouched for a while, with nothing in it but
 * sockets no process listens on. Run in a private parent directory, never /tmp itself. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "helpers.h"
#include "replay.h"

static char *parent;

static void fini(void) { th_rmtree(parent); }

/* a socket at dir/name: listening (fd returned, to close at the end) or dead (closed
 * without unlink: connect is refused) */
static int sock_at(const char *dir, const char *name, bool listening)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s/%s", dir, name);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "%s: %m", a.sun_path);
    cr_assert_eq(listen(fd, 4), 0);
    if (listening) return fd;
    close(fd);
    return -1;
}

/* parent/name made with mode, holding a dead socket (and a listening one, or a file), its
 * times set age_s in the past */
static char *mk(const char *name, mode_t mode, bool live, bool file, time_t age_s, int *live_fd)
{
    char *d = malloc(512);
    snprintf(d, 512, "%s/%s", parent, name);
    cr_assert_eq(mkdir(d, 0700), 0);
    sock_at(d, "master.sock", false);
    if (live) *live_fd = sock_at(d, "owner0.sock", true);
    if (file) {
        char f[600];
        snprintf(f, sizeof f, "%s/notes.txt", d);
        int fd = open(f, O_CREAT | O_WRONLY, 0600);
        cr_assert_geq(fd, 0);
        close(fd);
    }
    cr_assert_eq(chmod(d, mode), 0);
    struct timespec t[2] = {{.tv_sec = time(NULL) - age_s}, {.tv_sec = time(NULL) - age_s}};
    cr_assert_eq(utimensat(AT_FDCWD, d, t, AT_SYMLINK_NOFOLLOW), 0);
    return d;
}

static bool exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

Test(replay_sweep, only_a_killed_demos_directory_is_removed, .fini = fini)
{
    parent = th_tmpdir();
    cr_assert(parent);
    int live_fd = -1;
    char *dead = mk("fluxon-demo-aaaaaa", 0700, false, false, 3600, NULL);
    char *live = mk("fluxon-demo-bbbbbb", 0700, true, false, 3600, &live_fd);
    char *file = mk("fluxon-demo-cccccc", 0700, false, true, 3600, NULL);
    char *young = mk("fluxon-demo-dddddd", 0700, false, false, 5, NULL);
    char *open_mode = mk("fluxon-demo-eeeeee", 0755, false, false, 3600, NULL);
    char *other = mk("fluxon-demo-long-name", 0700, false, false, 3600, NULL);
    cr_assert_eq(rp_sweep_stale_dirs(parent, "fluxon-demo-", 600), 1);
    cr_assert_not(exists(dead), "a killed demo's directory (dead sockets only) goes");
    cr_assert(exists(live), "a socket someone listens on: a demo still running");
    cr_assert(exists(file), "a file that is not a socket: not a demo's");
    cr_assert(exists(young), "touched within min_age_s: a demo may be starting");
    cr_assert(exists(open_mode), "not a private (0700) directory: not mkdtemp's");
    cr_assert(exists(other), "not <prefix>XXXXXX");
    cr_assert_eq(rp_sweep_stale_dirs(parent, "fluxon-demo-", 600), 0, "nothing more");
    close(live_fd);
    cr_assert_eq(rp_sweep_stale_dirs(parent, "fluxon-demo-", 600), 1, "its listener gone, that demo's directory goes");
    cr_assert_not(exists(live));
    cr_assert_eq(rp_sweep_stale_dirs(parent, "no-such-prefix-", 0), 0);
    cr_assert_eq(rp_sweep_stale_dirs("/nonexistent-fluxon-dir", "fluxon-demo-", 0), 0, "no parent: nothing, no crash");
    free(dead), free(live), free(file), free(young), free(open_mode), free(other);
}
