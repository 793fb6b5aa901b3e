/* segment.h — the owner's shared segment (a memfd every local external maps, §6).
 * Accessors are safe from any thread; destroy must not race with them. The unix-socket
 * helpers that carry its fd (SCM_RIGHTS, the owner's 0700/0600 socket, §4) are unix.h,
 * included here for the callers that use both. */
#ifndef FX_SEGMENT_H
#define FX_SEGMENT_H

#include "fx.h"
#include "unix.h"

/* "FLXSEG01" as the bytes of a little-endian u64, so a hexdump of offset 0 reads it. */
#define FX_SEGMENT_MAGIC 0x3130474553584C46ull
#define FX_SEGMENT_LAYOUT_VERSION 1u
#define FX_SEGMENT_HEADER_BYTES 4096u /* also the payload offset */
#define FX_SEGMENT_PAGE_BYTES 4096u
#define FX_SEGMENT_MIN_BYTES 8192u /* header page + at least one payload page */

/* Offset 0 of every segment. Fixed-width fields only: the page is read by other
 * processes, possibly other builds. Written by the creator, magic last (release store),
 * so a reader that sees the magic sees the rest. Little-endian host order. */
struct fx_segment_header {
    uint64_t magic;          /* FX_SEGMENT_MAGIC */
    uint32_t layout_version; /* FX_SEGMENT_LAYOUT_VERSION */
    uint32_t header_bytes;   /* FX_SEGMENT_HEADER_BYTES = offset of the payload */
    uint64_t generation;     /* the owner's generation (§5) */
    uint64_t length;         /* total bytes of the memfd, header included */
    char node_id[64];        /* owner's node id, NUL-terminated */
    int32_t numa_node;       /* node the pages were placed on, -1 = none */
    uint32_t reserved0;      /* zero */
    uint8_t reserved[FX_SEGMENT_HEADER_BYTES - 104]; /* zero; room for later fields */
};
_Static_assert(sizeof(struct fx_segment_header) == FX_SEGMENT_HEADER_BYTES,
               "segment header must fill exactly one page");
_Static_assert(offsetof(struct fx_segment_header, node_id) == 32, "segment header layout");

typedef struct fx_segment fx_segment_t;

/* Creates the owner's segment: a memfd of `bytes` bytes (named "fluxon-segment",
 * close-on-exec, sealed against shrinking and growing so no process holding the fd can
 * SIGBUS the others), mapped read-write MAP_SHARED, header written at offset 0.
 *  bytes       total size, header page included: a multiple of 4096 and >= 8192.
 *  numa_node   < 0: no placement (pages are allocated lazily on first touch).
 *              >= 0: the memory is bound (MPOL_BIND) to that node, allocated now and
 *              every page touched, so creation takes time proportional to `bytes`.
 *  generation  stored in the header; attachers must present the same value.
 *  node_id     borrowed; NULL = ""; at most 63 bytes.
 *  seg_p       receives the segment (caller owns it: fx_segment_destroy).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (size rule, NULL seg_p, node_id too
 * long); FLUXON_ERR_CONFIG (numa_node >= 0 but NUMA unavailable, the node does not
 * exist / has no memory for this process, or binding to it was refused);
 * FLUXON_ERR_NO_SPACE (ENOSPC, or the NUMA node had no room for `bytes`);
 * FLUXON_ERR_NOMEM (ENOMEM from memfd/mmap, allocation failure); FLUXON_ERR_INTERNAL
 * (any other syscall failure). Every failure is logged with its reason. */
FX_INTERNAL int fx_segment_create(uint64_t bytes, int numa_node, uint64_t generation,
                                  const char *node_id, fx_segment_t **seg_p);

/* The owner's segment of payload_bytes (config segment_bytes, a multiple of 4096, > 0) plus
 * its header page ON TOP, so a segment of N grants holds N: the memfd is payload_bytes +
 * 4096 on 4 KiB pages, payload_bytes + 2 MiB on huge pages (the header's huge page; the
 * rest of it is payload room too). huge_pages FX_HUGE_OFF/TRY/ON (config.h): TRY and ON
 * first make the memfd with MFD_HUGETLB (payload_bytes must be a multiple of 2 MiB, and
 * payload_bytes / 2 MiB + 1 huge pages free in vm.nr_hugepages); when that fails, TRY
 * logs the reason and uses 4 KiB pages, ON logs it and returns FLUXON_ERR_CONFIG. Other
 * returns as fx_segment_create. fx_segment_len() is the memfd's whole size. */
FX_INTERNAL int fx_segment_create_huge(uint64_t payload_bytes, int numa_node, uint64_t generation,
                                       const char *node_id, int huge_pages, fx_segment_t **seg_p);
#define FX_SEGMENT_HUGE_BYTES (2u << 20)

/* Maps a segment made by fx_segment_create in another (or this) process, from an fd
 * received over the owner's socket (fx_unix_recv_fd).
 *  fd                   a read-write fd of the segment. On FLUXON_OK the segment takes
 *                       ownership of it (fx_segment_destroy closes it); on any error
 *                       the caller still owns it and must close it.
 *  expected_generation  the owner generation learned from the handshake.
 *  seg_p                receives the segment (caller owns it: fx_segment_destroy).
 * Checks, in order: file size (>= 8192, multiple of 4096), magic, layout version,
 * header_bytes, header length == file size, NUL-terminated node_id, seals against
 * resizing — any failure FLUXON_ERR_PROTOCOL; then generation: a mismatch is
 * FLUXON_ERR_STALE (the owner restarted). Also FLUXON_ERR_INVALID_ARGUMENT (fd < 0, not
 * an open regular file, not writable, NULL seg_p); FLUXON_ERR_NOMEM; FLUXON_ERR_INTERNAL. */
FX_INTERNAL int fx_segment_attach(int fd, uint64_t expected_generation, fx_segment_t **seg_p);

/* Accessors; seg must be non-NULL. Payload offsets are relative to fx_segment_base(),
 * so each process computes its own absolute address as base + offset (§6). */
FX_INTERNAL void *fx_segment_base(const fx_segment_t *seg);             /* header at 0 */
FX_INTERNAL uint64_t fx_segment_len(const fx_segment_t *seg);           /* whole segment */
FX_INTERNAL int fx_segment_fd(const fx_segment_t *seg);    /* still owned by the segment */
FX_INTERNAL uint64_t fx_segment_generation(const fx_segment_t *seg);
FX_INTERNAL uint64_t fx_segment_payload_offset(const fx_segment_t *seg); /* 4096 */
FX_INTERNAL const char *fx_segment_node_id(const fx_segment_t *seg);  /* owned by seg */
FX_INTERNAL int fx_segment_numa_node(const fx_segment_t *seg);        /* -1 = none */
FX_INTERNAL bool fx_segment_huge(const fx_segment_t *seg);  /* on hugetlb pages */

/* Unmaps and closes the segment's fd, frees seg. NULL is a no-op. The memory lives on
 * while any other process still maps it or holds the fd. */
FX_INTERNAL void fx_segment_destroy(fx_segment_t *seg);

/* The most memory a segment of this process can have: the host's RAM, or less when the
 * process's memory cgroup (v1 memory.limit_in_bytes, v2 memory.max, up to the root) has a
 * lower limit; what: "RAM" or the cgroup file that set it (NUL-terminated, at most cap
 * bytes). 0 when unknown. A segment is faulted in whole: a larger one ends in an OOM kill. */
FX_INTERNAL uint64_t fx_segment_memory_limit(char *what, size_t cap);

#endif /* FX_SEGMENT_H */
