/* peer_map.c — owners on one host copy with memcpy (issue 38). An owner's REGISTER rkey is
 * its UCX rkey followed by a descriptor of its segment (this host's boot id, the PID
 * and network namespaces, the process id and the segment's fd number); UCX unpacks only its own bytes,
 * so an owner of an older build reads the rkey as before. An owner that connects to a peer
 * with the same boot id and namespaces takes a copy of the peer's segment fd
 * (pidfd_getfd: the permission UCX's cma needs), maps it and checks its header (the node id
 * and generation the master named); transfers with that peer are then memcpy in this
 * process (transport/ucx_xfer.c): no rendezvous, no work for the peer's reactor, no
 * wake-up to wait for. Anything that fails (another host, other namespaces, no permission)
 * leaves the peer on UCX, logged once per reason. `"peer_segments": "ucx"` turns it off. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "owner_peers.h"

#define OPM_MAGIC "FXSEGMAP"
#define OPM_VERSION 1u

typedef struct opm_desc {
    char boot_id[40];    /* /proc/sys/kernel/random/boot_id, NUL-padded */
    uint64_t pidns;      /* inode of /proc/self/ns/pid */
    uint64_t netns;      /* inode of /proc/self/ns/net: other network namespaces stand for other hosts */
    uint64_t generation; /* the owner's, also in its segment header */
    uint64_t seg_len;
    int32_t pid;
    int32_t fd;
    uint32_t version; /* OPM_VERSION */
    uint32_t len;     /* sizeof (opm_desc_t) */
    char magic[8];    /* OPM_MAGIC, last: found from the end of the rkey */
} opm_desc_t;

/* This process's host, PID and network namespaces; false when one cannot be read. */
static bool opm_here(char boot_id[40], uint64_t *pidns, uint64_t *netns)
{
    memset(boot_id, 0, 40);
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, boot_id, 39);
    close(fd);
    if (n < 16) return false;
    for (ssize_t i = 0; i < n; i++)
        if (boot_id[i] == '\n') boot_id[i] = 0;
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) != 0) return false;
    *pidns = (uint64_t)st.st_ino;
    if (stat("/proc/self/ns/net", &st) != 0) return false;
    *netns = (uint64_t)st.st_ino;
    return true;
}

FX_INTERNAL int fx_opm_rkey(fx_owner_t *o, const void *ucx_rkey, size_t len, void **out, size_t *out_len)
{
    opm_desc_t d = {.generation = fx_segment_generation(o->seg), .seg_len = fx_segment_len(o->seg),
                    .pid = (int32_t)getpid(), .fd = fx_segment_fd(o->seg), .version = OPM_VERSION,
                    .len = (uint32_t)sizeof d};
    memcpy(d.magic, OPM_MAGIC, sizeof d.magic);
    bool here = o->cfg.peer_segments == FX_PEER_SEG_MAP && opm_here(d.boot_id, &d.pidns, &d.netns);
    uint8_t *b = fx_malloc(len + sizeof d);
    if (!b) return FLUXON_ERR_NOMEM;
    memcpy(b, ucx_rkey, len);
    if (here) memcpy(b + len, &d, sizeof d);
    *out = b;
    *out_len = len + (here ? sizeof d : 0);
    return FLUXON_OK;
}

/* The descriptor at the end of rkey (copied out: the rkey need not be aligned), if any. */
static bool opm_desc(fx_str_t rkey, opm_desc_t *d)
{
    if (rkey.len <= sizeof *d) return false;
    memcpy(d, rkey.p + rkey.len - sizeof *d, sizeof *d);
    return !memcmp(d->magic, OPM_MAGIC, sizeof d->magic) && d->version == OPM_VERSION && d->len == sizeof *d;
}

FX_INTERNAL size_t fx_opm_ucx_len(fx_str_t rkey)
{
    opm_desc_t d;
    return opm_desc(rkey, &d) ? rkey.len - sizeof d : rkey.len;
}

static void opm_once(fx_owner_t *o, unsigned why, const char *node, const char *fmt, const char *detail)
{
    if (o->peer_map_logged & (1u << why)) return;
    o->peer_map_logged |= 1u << why;
    char line[256];
    snprintf(line, sizeof line, fmt, detail);
    FX_INFO("owner %s: transfers with owner %s (and others alike) stay on UCX: %s", o->cfg.node_id, node, line);
}

/* rkey's descriptor (*d) names a segment of this host and namespaces at generation */
static bool opm_desc_here(fx_owner_t *o, uint64_t generation, fx_str_t rkey, opm_desc_t *d)
{
    if (o->cfg.peer_segments != FX_PEER_SEG_MAP || !opm_desc(rkey, d)) return false;
    char boot_id[40];
    uint64_t pidns = 0, netns = 0;
    if (!opm_here(boot_id, &pidns, &netns) || memcmp(boot_id, d->boot_id, sizeof boot_id) || pidns != d->pidns ||
        netns != d->netns)
        return false;
    return d->generation == generation; /* else the master's word is newer: UCX will say */
}

FX_INTERNAL bool fx_opm_here(fx_owner_t *o, uint64_t generation, fx_str_t rkey)
{
    opm_desc_t d;
    return opm_desc_here(o, generation, rkey, &d);
}

FX_INTERNAL fx_segment_t *fx_opm_attach(fx_owner_t *o, const char *node_id, uint64_t generation, fx_str_t rkey,
                                        int *pidfd_p)
{
    opm_desc_t d;
    *pidfd_p = -1;
    if (!opm_desc_here(o, generation, rkey, &d)) return NULL;
    int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)d.pid, 0);
    int fd = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd, d.fd, 0);
    int err = errno;
    if (fd < 0) {
        if (pidfd >= 0) close(pidfd);
        if (err == EPERM || err == EACCES)
            opm_once(o, 0, node_id, "its segment cannot be opened here (pidfd_getfd: %s; the permission ptrace needs, "
                     "e.g. kernel.yama.ptrace_scope 0)", strerror(err));
        else if (err != ESRCH && err != EBADF) /* gone meanwhile: the master will say */
            opm_once(o, 2, node_id, "its segment cannot be opened here (pidfd_getfd: %s)", strerror(err));
        return NULL;
    }
    fx_segment_t *seg = NULL;
    int rc = fx_segment_attach(fd, generation, &seg); /* checks the header: a memfd, the generation */
    if (rc != FLUXON_OK || strcmp(fx_segment_node_id(seg), node_id) || fx_segment_len(seg) != d.seg_len) {
        if (rc == FLUXON_OK) fx_segment_destroy(seg); /* closes fd */
        else close(fd);
        opm_once(o, 1, node_id, "the segment found is not its own (%s)", rc == FLUXON_OK ? "node id or size" :
                 fluxon_status_string(rc));
        close(pidfd);
        return NULL;
    }
    *pidfd_p = pidfd; /* readable once the peer's process exits (peers.c watches it) */
    return seg;
}

#undef OPM_MAGIC
#undef OPM_VERSION
