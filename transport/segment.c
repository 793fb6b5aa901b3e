/* segment.c — see segment.h. The owner's memfd segment: create, NUMA placement, attach
 * with header checks. The unix-socket plumbing that hands it to externals is unix.c. */
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <numa.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

#define SEG_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

struct fx_segment {
    void *base;
    uint64_t len;
    int fd;
    int numa_node;
    uint64_t generation;
    char node_id[64];
    bool huge; /* on MFD_HUGETLB pages */
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

/* A sealed memfd of `bytes` (memfd flags extra: 0 or MFD_HUGETLB) mapped read-write
 * shared. On failure returns the status and writes the reason into why. */
static int seg_map(uint64_t bytes, unsigned extra, int *fd_p, void **base_p, char *why, size_t cap)
{
    int rc, fd = memfd_create("fluxon-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING | extra);
    const char *what = "memfd_create";
    if (fd < 0) goto fail;
    what = "ftruncate";
    if (ftruncate(fd, (off_t)bytes) != 0) goto fail;
    /* Any process holding the fd could otherwise ftruncate it and make every other
     * mapping SIGBUS; F_SEAL_SEAL stops a peer from adding a write seal later. */
    what = "sealing the memfd";
    if (fcntl(fd, F_ADD_SEALS, SEG_SEALS) != 0) goto fail;
    what = "mmap";
    void *base = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) goto fail;
    *fd_p = fd;
    *base_p = base;
    return FLUXON_OK;
fail:
    rc = seg_errno_status(errno);
    snprintf(why, cap, "%s of %llu bytes%s failed: %s", what, (unsigned long long)bytes,
             extra ? " of huge pages" : "", strerror(errno));
    if (fd >= 0) close(fd);
    return rc;
}

/* huge_pages "try"/"on": the segment on 2 MiB hugetlb pages (fewer page-table entries for
 * the owner and every client). Returns FLUXON_OK with the mapping, or the reason why not. */
static int seg_map_huge(uint64_t bytes, int *fd_p, void **base_p, char *why, size_t cap)
{
    if (bytes % FX_SEGMENT_HUGE_BYTES) { /* segment_bytes + one huge page for the header */
        snprintf(why, cap, "segment_bytes %llu is not a multiple of the %u-byte huge page",
                 (unsigned long long)(bytes - FX_SEGMENT_HUGE_BYTES), FX_SEGMENT_HUGE_BYTES);
        return FLUXON_ERR_CONFIG;
    }
    int rc = seg_map(bytes, MFD_HUGETLB, fd_p, base_p, why, cap);
    if (rc == FLUXON_OK) return rc;
    long nr = -1;
    FILE *f = fopen("/proc/sys/vm/nr_hugepages", "r");
    if (f) {
        if (fscanf(f, "%ld", &nr) != 1) nr = -1;
        fclose(f);
    }
    size_t l = strlen(why);
    if (nr >= 0 && l < cap)
        snprintf(why + l, cap - l, " (vm.nr_hugepages is %ld; this segment needs %llu free: segment_bytes / 2 MiB "
                 "plus one for the header)", nr, (unsigned long long)(bytes / FX_SEGMENT_HUGE_BYTES));
    return rc;
}

static int seg_create(uint64_t bytes, uint64_t huge_bytes, int numa_node, uint64_t generation,
                      const char *node_id, int huge_pages, fx_segment_t **seg_p);

FX_INTERNAL int fx_segment_create(uint64_t bytes, int numa_node, uint64_t generation,
                                  const char *node_id, fx_segment_t **seg_p)
{
    return seg_create(bytes, 0, numa_node, generation, node_id, FX_HUGE_OFF, seg_p);
}

FX_INTERNAL int fx_segment_create_huge(uint64_t payload_bytes, int numa_node, uint64_t generation,
                                       const char *node_id, int huge_pages, fx_segment_t **seg_p)
{
    if (payload_bytes == 0 || payload_bytes % FX_SEGMENT_PAGE_BYTES != 0 || payload_bytes > (uint64_t)INT64_MAX / 2) {
        FX_ERROR("segment: segment_bytes %llu rejected: must be a multiple of %u and at least %u",
                 (unsigned long long)payload_bytes, FX_SEGMENT_PAGE_BYTES, FX_SEGMENT_PAGE_BYTES);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    /* the header page on top of the payload: a segment of N grants holds N (on huge pages
     * the header takes a whole 2 MiB page; the rest of it is payload room too) */
    return seg_create(payload_bytes + FX_SEGMENT_HEADER_BYTES, payload_bytes + FX_SEGMENT_HUGE_BYTES, numa_node,
                      generation, node_id, huge_pages, seg_p);
}

/* bytes: the memfd's size on 4 KiB pages; huge_bytes: on huge pages (huge_pages TRY/ON) */
static int seg_create(uint64_t bytes, uint64_t huge_bytes, int numa_node, uint64_t generation,
                      const char *node_id, int huge_pages, fx_segment_t **seg_p)
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
    char why[320];
    rc = FLUXON_ERR_CONFIG;
    if (huge_pages != FX_HUGE_OFF) {
        rc = seg_map_huge(huge_bytes, &seg->fd, &seg->base, why, sizeof why);
        if (rc == FLUXON_OK) {
            seg->huge = true;
            bytes = huge_bytes;
        } else if (huge_pages == FX_HUGE_ON) {
            FX_ERROR("segment: huge_pages \"on\": %s", why);
            fx_free(seg);
            return FLUXON_ERR_CONFIG;
        } else {
            FX_WARN("segment: huge_pages \"try\": using 4 KiB pages: %s", why);
        }
    }
    if (rc != FLUXON_OK && (rc = seg_map(bytes, 0, &seg->fd, &seg->base, why, sizeof why)) != FLUXON_OK) {
        FX_ERROR("segment: %s", why);
        fx_free(seg);
        return rc;
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

    FX_DEBUG("segment: created %llu bytes, generation %llu, numa_node %d%s",
             (unsigned long long)bytes, (unsigned long long)generation, numa_node,
             seg->huge ? ", huge pages" : "");
    *seg_p = seg;
    return FLUXON_OK;

err_unmap:
    munmap(seg->base, (size_t)bytes);
    close(seg->fd);
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
    struct statfs sf; /* a hugetlb memfd: its pages are 2 MiB here too (prefault steps) */
    seg->huge = fstatfs(fd, &sf) == 0 && sf.f_type == HUGETLBFS_MAGIC;
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
FX_INTERNAL bool fx_segment_huge(const fx_segment_t *seg) { return seg->huge; }

FX_INTERNAL void fx_segment_destroy(fx_segment_t *seg)
{
    if (!seg) return;
    if (munmap(seg->base, (size_t)seg->len) != 0) FX_ERROR("segment: munmap failed: %m");
    close(seg->fd);
    fx_free(seg);
}

#undef SEG_SEALS

/* ---- how much memory a segment can have ---- */
static uint64_t seg_read_limit(const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f) return 0;
    char buf[64] = "";
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok || !strncmp(buf, "max", 3)) return 0;
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    return end != buf ? (uint64_t)v : 0;
}

FX_INTERNAL uint64_t fx_segment_memory_limit(char *what, size_t cap)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t lim = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    snprintf(what, cap, "the host's RAM");
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) { /* "0::/path" (v2) or "N:memory:/path" (v1) */
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        bool v2 = !strcmp(c1 + 1, ""), v1 = !strcmp(c1 + 1, "memory");
        if (!v1 && !v2) continue;
        char path[512], file[600];
        snprintf(path, sizeof path, "%s", c2 + 1);
        for (;;) { /* the path and each ancestor: the lowest limit holds */
            snprintf(file, sizeof file, "/sys/fs/cgroup%s%s/%s", v1 ? "/memory" : "", strcmp(path, "/") ? path : "",
                     v1 ? "memory.limit_in_bytes" : "memory.max");
            uint64_t l = seg_read_limit(file);
            if (l && (!lim || l < lim)) {
                lim = l;
                snprintf(what, cap, "the memory cgroup's limit (%s)", file);
            }
            char *slash = strrchr(path, '/');
            if (!slash || slash == path) break;
            *slash = 0;
        }
    }
    if (f) fclose(f);
    return lim;
}
