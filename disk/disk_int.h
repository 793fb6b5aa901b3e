/* disk_int.h — the disk store's internals shared by disk.c (open, close, index, capacity),
 * disk_format.c (the byte layout, the rebuild) and disk_io.c (staging, writes, seals,
 * reads). docs/disk.md has the byte table. */
#ifndef FX_DISK_INT_H
#define FX_DISK_INT_H

#include "disk.h"
#include "hmap.h"
#include "u64map.h"

#include <sys/uio.h>

#define FX_DISK_REC_MAGIC 0x52445846u  /* "FXDR" little-endian */
#define FX_DISK_IDX_MAGIC 0x58445846u  /* "FXDX": the index footer */
#define FX_DISK_VERSION 1u
#define FX_DISK_HDR_BYTES 64u          /* the record header before the key */
#define FX_DISK_IDX_ENTRY 48u          /* an index entry before its key (8-aligned total) */
#define FX_DISK_FLUSH_MS 2u            /* a partly filled staging buffer is written after this */
#define FX_DISK_OVER_SEGMENTS 2u       /* segments past capacity while the layer above frees */
#define FX_DISK_RECYCLE 2u             /* freed segment files kept to be written again (disk_fs.c) */
#define FX_DISK_REC_TOMB 1u    /* record flags: a tombstone (no value): the key's versions up to its
                                * put_ms/put_ver, written before it, are dead (an INVALIDATE) */
#define FX_DISK_REC_BARRIER 2u /* record flags: every record written before it is dead (no key) */
#define FX_DISK_REC_RETIRED 4u /* record flags: every segment with an id up to its put_ms retired (no key):
                                * one whose file could not be removed is not read again */

/* The record header (little-endian, 64 bytes), then the key, zero padding to 4 KiB, the
 * value, zero padding to 4 KiB. */
typedef struct fx_disk_hdr {
    uint32_t magic;
    uint16_t version, flags;
    uint32_t key_len, group_size, group_idx;
    uint32_t blk;      /* this record's byte offset in its segment / 4096 */
    uint64_t value_len, put_ms, put_ver;
    uint64_t seg_id;
    uint64_t checksum; /* XXH3-64 over this header (checksum 0) + key + value */
} fx_disk_hdr_t;
_Static_assert(sizeof(fx_disk_hdr_t) == FX_DISK_HDR_BYTES, "record header is 64 bytes");

/* An index entry (48 bytes + key, padded to 8). */
typedef struct fx_disk_ient {
    uint64_t offset; /* byte offset of the record in the segment */
    uint64_t value_len, put_ms, put_ver;
    uint32_t group_size, group_idx;
    uint32_t key_len, flags; /* flags: the record's (FX_DISK_REC_TOMB, FX_DISK_REC_BARRIER) */
} fx_disk_ient_t;
_Static_assert(sizeof(fx_disk_ient_t) == FX_DISK_IDX_ENTRY, "index entry is 48 bytes");

/* The footer: the last 4 KiB block of a sealed segment (64 bytes used). */
typedef struct fx_disk_foot {
    uint32_t magic;
    uint16_t version, flags;
    uint32_t count, pad;
    uint64_t seg_id;
    uint64_t data_end;    /* records occupy [0, data_end); the index entries start there */
    uint64_t entry_bytes; /* bytes of index entries (the region is padded to 4 KiB) */
    uint64_t reserved[2];
    uint64_t checksum;    /* XXH3-64 over the entries + this footer (checksum 0) */
} fx_disk_foot_t;
_Static_assert(sizeof(fx_disk_foot_t) == 64, "footer is 64 bytes");

enum { DK_SEG_OPEN, DK_SEG_CLOSED, DK_SEG_RETIRING, DK_SEG_FREED };

typedef struct dk_rec dk_rec_t;

/* A tombstone or barrier: staged in the open segment (listed in its index block, then
 * freed), or found by the rebuild (applied once every segment is read, then freed). */
typedef struct dk_tomb {
    struct dk_tomb *next;
    uint64_t seg_id, byte_off;
    fx_disk_meta_t m; /* the dead version (a tombstone) */
    uint32_t klen, flags;
    char key[];
} dk_tomb_t;

/* DIR/CONTACT (disk_contact.c): when this owner last heard from a master, and its grace. */
typedef struct dk_contact_rec {
    uint32_t magic;
    uint16_t version, flags;
    uint64_t contact_ms, grace_ms;
    uint64_t reserved[4];
    uint64_t checksum;
} dk_contact_rec_t;
_Static_assert(sizeof(dk_contact_rec_t) == 64, "the CONTACT record is 64 bytes");

/* fx_disk_when_written: one waiter, linked from every staging buffer it waits for. */
typedef struct dk_wait {
    fx_disk_written_fn cb;
    void *arg;
    uint32_t left;
    int status;
} dk_wait_t;
typedef struct dk_wlink {
    struct dk_wlink *next;
    dk_wait_t *w;
} dk_wlink_t;

typedef struct dk_seg {
    uint64_t id;
    int fd;
    int state;
    bool sealing, sealed;     /* the index block is being / was written */
    uint64_t data_end;        /* bytes of records (staged or written) */
    uint64_t file_bytes;      /* bytes of the file (data, then the index block) */
    uint64_t reuse_bytes;     /* a recycled file's size when this segment took it: the footer goes
                               * in its last block (the earlier life's records past data_end stay) */
    uint64_t entry_bytes;     /* index entries the records so far need (all, not just live) */
    uint32_t live;            /* records indexed */
    uint32_t readers, writes; /* reads, writes (data, fsync, index) in flight */
    uint32_t aux;             /* other operations on its fd in flight (fadvise) */
    dk_rec_t *recs;           /* its indexed records (doubly linked) */
    dk_tomb_t *tombs;         /* tombstones and barriers staged in it, until its index block */
    struct dk_seg *next;      /* the segments by id, oldest first */
    fx_io_t seal_io;          /* the fsync, then the index write */
    char *seal_buf;
    size_t seal_len;
    int seal_step;
    struct fx_disk *seal_d;
} dk_seg_t;

struct dk_rec {
    char *key; /* after the struct */
    uint32_t klen;
    uint64_t off; /* the disk offset */
    fx_disk_meta_t m;
    dk_seg_t *seg;
    dk_rec_t *prev, *next; /* in seg->recs */
};

enum { DK_BUF_FREE, DK_BUF_FILL, DK_BUF_WRITE };
typedef struct dk_buf {
    fx_io_t io;
    struct fx_disk *d;
    int state;
    char *mem;
    uint16_t *dirty; /* per 4 KiB block of mem: how many bytes from its start may be nonzero (a
                      * header block only zeroes what an earlier record left past its header + key) */
    size_t cap, len, done; /* done: bytes already written (short writes go on) */
    dk_seg_t *seg;
    uint64_t file_off;
    dk_wlink_t *waiters; /* fx_disk_when_written callers waiting for this buffer */
} dk_buf_t;

/* Reads of records that follow each other in a segment, asked in one reactor turn, go to
 * the kernel as one READV (each record into its own bounce buffer): a prefix's blocks
 * were demoted together and lie side by side (87 % of the replay's reads follow the one
 * before), and on a virtual disk each I/O costs far more CPU than its bytes. */
#define DK_RGROUP_MAX 32u                 /* records in one coalesced read at most */
#define DK_RGROUP_BYTES (512u * 1024u)    /* and bytes */
/* A record that starts at most this far after the group's end joins it too: the blocks
 * between are read into a scratch buffer and dropped. On a virtual disk an I/O costs far
 * more CPU than 16 KiB of it (about 20 us of io_uring_enter a read here); in the trace
 * replay a third of the reads that were not the first of their turn began within 16 KiB
 * of the one before (the records of a prefix demoted together, less those still in memory). */
#define DK_RGROUP_GAP (16u * 1024u)
struct dk_read;
typedef struct dk_rgroup {
    fx_io_t io;
    struct fx_disk *d;
    struct dk_seg *seg;
    struct io_uring_sqe *sqe; /* ours while fx_reactor_submits says it was not submitted */
    uint64_t submits;         /* fx_reactor_submits right after the SQE was got */
    uint64_t file_off, len;   /* bytes of the segment file the group reads */
    uint32_t n, niov;
    struct dk_read *m[DK_RGROUP_MAX];
    uint32_t gap[DK_RGROUP_MAX];          /* bytes skipped before member i (DK_RGROUP_GAP at most) */
    struct iovec iov[2 * DK_RGROUP_MAX];  /* a member's buffer, after its gap's (the scratch) */
} dk_rgroup_t;

typedef struct dk_read {
    fx_io_t io;
    struct fx_disk *d;
    dk_seg_t *seg; /* NULL: a completion posted through a NOP (status below) */
    uint64_t off, value_len;
    void *dst;
    fx_disk_read_fn done;
    void *arg;
    int status;
    char *bounce;
    size_t len, got;
    uint64_t t0_ns; /* when it was asked (read_latency) */
    uint32_t klen;
    char key[]; /* the key asked for */
} dk_read_t;

struct fx_disk {
    fx_reactor_t *r;
    fx_disk_cfg_t cfg; /* path and owner_id point at the copies below */
    char *path, *owner_id;
    char *gap_buf; /* DK_RGROUP_GAP bytes the blocks between a read group's records go to (dropped) */
    fx_disk_hooks_t hooks;
    int lock_fd;
    bool direct, failed, closing;
    uint64_t failed_ms;   /* writes failed (fx_disk_fail) at this fx_now_ms: they pause, then retry */
    uint32_t fail_backoff_ms;
    bool ids_exhausted; /* logged once */
    uint32_t scan_bad_logged; /* bad records the rebuild logged one by one (disk_format.c) */
    bool shutting;      /* fx_disk_close began: no spare is made any more */
    bool spare_opening; /* the next segment file is being made (disk_fs.c) */
    int spare_fd;       /* the next segment file, made ahead (-1: none yet) */
    uint64_t spare_id;
    uint64_t spare_reuse_bytes; /* the spare is a recycled file of this size (0: a new, empty one) */
    /* freed segments' files kept (by id) to be renamed into the next segment instead of
     * unlinked: removing a file frees its blocks, which on a file system mounted with online
     * discard sends the device a discard that stalls the reads behind it (a 64 MiB discard
     * held this VM's reads 5-10 ms, 12 times a trace replay) */
    uint64_t recycle_id[FX_DISK_RECYCLE];
    uint32_t n_recycle;
    uint32_t dio_align;
    bool first_write_done;
    int fault_err; /* fx_disk_fault_next_write */
    uint64_t fault_short; /* fx_disk_fault_short_write */
    dk_rgroup_t *rg_open; /* the read that may still grow (its SQE not submitted), or NULL */
    fx_hmap_t *by_key; /* key -> dk_rec_t (intrusive) */
    fx_u64map_t by_off; /* disk offset -> dk_rec_t */
    dk_seg_t *segs, *open_seg;
    uint64_t next_seg_id, max_segs;
    dk_buf_t *bufs; /* cfg.write_buffers */
    dk_buf_t *cur;  /* the buffer being filled, or NULL */
    fx_timer_t flush_timer;
    uint64_t ops; /* I/O of this store in flight (writes, reads, NOP completions) */
    fx_disk_stats_t st;
    dk_tomb_t *rb_tombs; /* the rebuild's tombstones, applied after every segment is read */
    bool rb_barrier;     /* the rebuild met a barrier at (rb_barrier_seg, rb_barrier_off) */
    uint64_t rb_retired;     /* the rebuild: segments with an id below this retired (a mark said so) */
    uint64_t retire_pending; /* a retirement mark to stage (1 + the highest id retired; 0: none) */
    bool in_roll;            /* fx_disk_roll runs: a mark waits for the next staging */
    uint64_t retire_log_ms, retire_quiet; /* retirements logged every 10 s at most */
    uint64_t rb_barrier_seg, rb_barrier_off;
    int contact_fd;      /* DIR/CONTACT (-1: none) */
    bool contact_known, contact_inflight;
    uint32_t contact_failed;
    uint64_t contact_ms, contact_grace_ms; /* what the file said at open */
    dk_contact_rec_t contact_buf;
    fx_io_t contact_io;
};

/* disk_format.c */
FX_INTERNAL uint64_t fx_disk_ient_bytes(uint32_t klen);
/* Writes the record (header block with key, value, padding) at p (fx_disk_rec_bytes).
 * dirty: per 4 KiB block from p, how many bytes from its start may be nonzero (kept up to
 * date: the header block's zeros are written only where an earlier record left bytes), or
 * NULL (the whole header block is zeroed). */
FX_INTERNAL void fx_disk_rec_encode(char *p, uint16_t *dirty, uint64_t seg_id, uint64_t byte_off, const char *key,
                                    uint32_t klen, const void *value, const fx_disk_meta_t *m, uint16_t flags);
/* A record's checksum: XXH3-64 over h (its checksum field taken as 0), then its key
 * (h->key_len bytes) and value (h->value_len bytes). */
FX_INTERNAL uint64_t fx_disk_rec_sum(const fx_disk_hdr_t *h, const char *key, const void *value);
/* An index block's checksum: XXH3-64 over its entries (entry_bytes), then the footer f (its
 * checksum field taken as 0). */
FX_INTERNAL uint64_t fx_disk_index_sum(const char *entries, uint64_t entry_bytes, const fx_disk_foot_t *f);
/* Checks the record at p (len bytes read): a reason string on failure, NULL when good.
 * key may be NULL (the rebuild: any key). */
FX_INTERNAL const char *fx_disk_rec_check(const char *p, size_t len, uint64_t seg_id, uint64_t byte_off,
                                          const char *key, uint32_t klen);
/* The index block of seg (its live records) into a new aligned buffer; *len_p its bytes. */
FX_INTERNAL char *fx_disk_index_encode(const dk_seg_t *seg, size_t *len_p);
FX_INTERNAL void fx_disk_seg_path(const fx_disk_t *d, uint64_t id, char *buf, size_t cap);
/* The rebuild: lists DIR, reads every segment of this owner, fills the index. */
FX_INTERNAL int fx_disk_rebuild(fx_disk_t *d, char *err, size_t errlen);

/* disk.c */
/* h: fx_hmap_hash(key, klen), or 0 (computed here) */
FX_INTERNAL int fx_disk_index_add(fx_disk_t *d, dk_seg_t *seg, uint64_t byte_off, const char *key, uint32_t klen,
                                  uint64_t h, const fx_disk_meta_t *m, bool newest_wins);
FX_INTERNAL void fx_disk_rec_drop(fx_disk_t *d, dk_rec_t *rec);
FX_INTERNAL dk_seg_t *fx_disk_seg_new(fx_disk_t *d, uint64_t id, int fd);
FX_INTERNAL int fx_disk_seg_open_fd(fx_disk_t *d, const char *path, int flags, char *err, size_t errlen);
FX_INTERNAL void fx_disk_seg_maybe_unlink(fx_disk_t *d, dk_seg_t *seg);
FX_INTERNAL bool fx_disk_can_roll(fx_disk_t *d);
/* A write or a segment file's creation failed with -err: writes pause (1 s, doubling to
 * 30 s while they keep failing), the open segment takes no more records, and ENOSPC
 * retires the oldest segment for room (disk.c). Logged once per pause. */
FX_INTERNAL void fx_disk_fail(fx_disk_t *d, int err, const char *what);
/* Writes are paused by a failure (false once its pause is over: the next one retries). */
FX_INTERNAL bool fx_disk_failing(fx_disk_t *d);
FX_INTERNAL int fx_disk_roll(fx_disk_t *d, uint64_t rec_bytes, uint64_t ent_bytes);
FX_INTERNAL bool fx_disk_seg_fits(const fx_disk_t *d, const dk_seg_t *s, uint64_t rec_bytes, uint64_t ent_bytes);
FX_INTERNAL void *fx_disk_aligned(size_t n);

/* disk_io.c */
/* khash: fx_hmap_hash(key, klen), or 0 (computed when needed) */
FX_INTERNAL int fx_disk_stage(fx_disk_t *d, const char *key, uint32_t klen, uint64_t khash, const void *value,
                              const fx_disk_meta_t *m, uint16_t flags, uint64_t *off);
FX_INTERNAL void fx_disk_buf_submit(fx_disk_t *d, dk_buf_t *b);
/* The dirty marks of a staging buffer of cap bytes (dk_buf_t.dirty), each block's `was`. */
FX_INTERNAL uint16_t *fx_disk_dirty_new(size_t cap, uint16_t was);
FX_INTERNAL dk_buf_t *fx_disk_buf_take(fx_disk_t *d, dk_seg_t *seg, uint64_t need);
FX_INTERNAL void fx_disk_seal(fx_disk_t *d, dk_seg_t *seg);
FX_INTERNAL uint32_t fx_disk_free_bufs(const fx_disk_t *d);
/* Test hook (test_disk): the next write completes with -err (its bytes did reach the file),
 * as a file system refusing O_DIRECT only at write time would make it. */
FX_INTERNAL void fx_disk_fault_next_write(fx_disk_t *d, int err);
/* Tests: the next write completes as if only `bytes` of it were written (the kernel wrote it
 * all), and the write of the rest fails with ENOSPC: a file system that fills mid-write. */
FX_INTERNAL void fx_disk_fault_short_write(fx_disk_t *d, uint64_t bytes);

/* disk_tomb.c: tombstones, barriers, write waiters */
/* b's waiters hear status (b written, failed or dropped); each runs once all its buffers did. */
FX_INTERNAL void fx_disk_waiters_done(dk_buf_t *b, int status);
/* The rebuild met a tombstone or barrier at (seg_id, byte_off); false: no memory. */
FX_INTERNAL bool fx_disk_rb_mark(fx_disk_t *d, uint64_t seg_id, uint64_t byte_off, const char *key, uint32_t klen,
                                 const fx_disk_meta_t *m, uint32_t flags);
/* After every segment is read: records older than the last barrier and those a tombstone
 * names (its key, a version up to its own, written before it) leave the index. */
FX_INTERNAL void fx_disk_rb_apply(fx_disk_t *d);
/* A segment retired (FIFO): a mark "every segment up to seg retired" is staged now, or at the
 * next staging when a roll is running. */
FX_INTERNAL void fx_disk_retire_mark(fx_disk_t *d, uint64_t seg);
FX_INTERNAL void fx_disk_retire_mark_flush(fx_disk_t *d); /* a pending mark, staged when no roll runs */
/* Frees the tombstones listed for seg's index block (encoded, or the segment gone). */
FX_INTERNAL void fx_disk_tombs_free(dk_tomb_t **list);

/* disk_contact.c: opens DIR/CONTACT and reads what it says (at open, before the reactor runs). */
FX_INTERNAL void fx_disk_contact_open(fx_disk_t *d);

/* disk_fs.c: file system calls off the reactor thread */
/* Turns O_DIRECT off on every segment file (and the spare), counted and logged once. */
FX_INTERNAL void fx_disk_direct_off(fx_disk_t *d, const char *why);
/* Unlinks segment id's file through the ring (its fd must be closed already). */
FX_INTERNAL void fx_disk_unlink_async(fx_disk_t *d, uint64_t id);
/* A retired segment's file removed now, on this thread (not through the ring, not kept for
 * reuse): while writes fail its retirement mark may never reach the disk, and a restart would
 * read the file under its own name again (records deleted or replaced since coming back). */
FX_INTERNAL void fx_disk_unlink_retired_now(fx_disk_t *d, uint64_t id);
/* POSIX_FADV_DONTNEED over [off, off + len) of seg (0, 0: all) through the ring; holds
 * seg (seg->aux) until it completed. */
FX_INTERNAL void fx_disk_fadvise_async(fx_disk_t *d, dk_seg_t *seg, uint64_t off, uint64_t len);
/* Starts making the next segment file (id next_seg_id) unless one is made or being made. */
FX_INTERNAL void fx_disk_spare_start(fx_disk_t *d);
/* At open (before the reactor runs): makes the first spare with a plain open. A failure
 * stops writes (logged), as a failed roll did. */
FX_INTERNAL void fx_disk_spare_make_sync(fx_disk_t *d);
/* At close: the unused spare is closed and unlinked through the ring. */
FX_INTERNAL void fx_disk_spare_drop(fx_disk_t *d);

#endif
