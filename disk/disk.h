/* disk.h — the disk tier's store (issue 39): one owner's directory of log-structured segment
 * files on a local SSD, written and read through the reactor's io_uring, every record
 * checksummed, its index rebuilt when the owner starts again. Pure storage: no message,
 * no master, no owner entry — the owner (owner/disk.c) decides what goes to disk and tells
 * the master; this layer stores, finds, reads, verifies and frees.
 *
 * Layout (docs/disk.md has the byte table):
 *  - DIR/LOCK: flock(LOCK_EX|LOCK_NB) held while open; holds "owner_id pid\n" (the holder a
 *    second opener names).
 *  - DIR/fxd-<owner_id>-<segment id, 16 hex>.seg: one segment, at most segment_bytes. Created
 *    O_EXCL (never O_TRUNC); ids are monotonic across restarts (max found + 1).
 *  - A record: a 4 KiB-aligned header block {magic, version, flags, key_len, value_len,
 *    put_ms, put_ver, group_size, group_idx, checksum}, the key right after the header, zero
 *    padding to 4 KiB, then the value (4 KiB-aligned), zero padding to 4 KiB. The checksum
 *    is XXH3-64 over the header (checksum field zero) + key + value.
 *  - A sealed segment ends with its index block: every record's {offset, key, value_len,
 *    put_ms, put_ver, group_size, group_idx} and a footer {magic, count, bytes, checksum},
 *    written after an fdatasync of the data, itself checksummed.
 *
 * Identity: a record's disk offset (fx_disk_off_t) is FX_DISK_OFF_BIT | segment id << 32 |
 * (byte offset in the segment / 4096). Segment ids are never reused, so a disk offset never
 * names two records: the owner uses it as the replica's offset at the master.
 *
 * Threading: reactor thread only (every call, every callback). Nothing here blocks on I/O
 * except fx_disk_open (the rebuild reads the directory before the reactor runs): writes,
 * reads, fdatasync, the making of the next segment file (made ahead), unlinks and, in
 * buffered mode, POSIX_FADV_DONTNEED all go through the reactor's io_uring (disk_fs.c).
 */
#ifndef FX_DISK_H
#define FX_DISK_H

#include "fx.h"
#include "metrics.h"
#include "reactor.h"

#define FX_DISK_OFF_BIT (1ull << 63)
#define FX_DISK_BLOCK 4096u
#define FX_DISK_SEGMENT_DEFAULT (256ull << 20)
#define FX_DISK_MAX_KEY 1024u /* a longer key is refused (FLUXON_ERR_INVALID_ARGUMENT) */

static inline bool fx_disk_is_off(uint64_t off) { return (off & FX_DISK_OFF_BIT) != 0; }

typedef struct fx_disk fx_disk_t;

enum { FX_DISK_DIRECT_AUTO = 0, FX_DISK_DIRECT_ON = 1, FX_DISK_DIRECT_OFF = 2 };

typedef struct fx_disk_cfg {
    const char *path;        /* the directory (made if absent, mode 0700) */
    const char *owner_id;    /* in file names and LOCK; [A-Za-z0-9_.-], 1..64 bytes */
    uint64_t capacity_bytes; /* bytes of segment files at most (>= 2 segments) */
    uint64_t segment_bytes;  /* 0: FX_DISK_SEGMENT_DEFAULT; a multiple of 4 KiB, >= 1 MiB */
    int direct_io;           /* FX_DISK_DIRECT_*: auto = O_DIRECT when the file system takes it */
    uint32_t write_buffers;  /* staging buffers in flight (0: 4) */
    uint32_t buffer_bytes;   /* bytes of one staging buffer (0: 1 MiB; multiple of 4 KiB) */
} fx_disk_cfg_t;

/* What a record says about its value (the owner's identity of a version). */
typedef struct fx_disk_meta {
    uint64_t value_len, put_ms, put_ver;
    uint32_t group_size, group_idx; /* atomic group: its size (1: alone) and this key's index */
} fx_disk_meta_t;

/* Hooks into the layer above (owner/disk.c); every one runs on the reactor thread. */
typedef struct fx_disk_hooks {
    /* The oldest segment must go to make room (capacity_bytes): its live records are
     * offs[0..n) with their keys. The caller unpublishes them (they stay readable) and
     * calls fx_disk_segment_free(d, seg) once nobody names them; until then the store may
     * run past capacity by the segments retiring. */
    void (*segment_retiring)(void *arg, uint64_t seg, const uint64_t *offs, const char *const *keys,
                             const uint32_t *klens, size_t n);
    /* A record of key joined (added) or left the index: bytes, its size on disk (header
     * block + value, fx_disk_rec_bytes). Runs inside the store's call (a rebuild at open
     * too); it must not call back into the store. NULL: nobody counts. */
    void (*record_counted)(void *arg, uint64_t off, const char *key, uint32_t klen, uint64_t bytes, bool added);
    void *arg;
} fx_disk_hooks_t;

/* Opens (or makes) the directory, takes the lock, and rebuilds the index from the segments
 * found: a sealed segment's index block, else a scan record by record up to the first that
 * fails its checksum (a torn tail); a key in several records keeps the highest (put_ms,
 * put_ver). Returns FLUXON_OK; FLUXON_ERR_BUSY when another process holds the lock (err names
 * it: "... held by owner X pid N"); FLUXON_ERR_CONFIG for a bad cfg (err names the field, the
 * value and the limit); FLUXON_ERR_UNAVAILABLE when the directory cannot be used (err names
 * the path and the errno). err gets a message on any failure. */
FX_INTERNAL int fx_disk_open(fx_reactor_t *r, const fx_disk_cfg_t *cfg, const fx_disk_hooks_t *hooks, fx_disk_t **d_p,
                             char *err, size_t errlen);
/* Writes what is staged, seals the open segment (index block) when timeout_ms allows, waits
 * at most timeout_ms for its I/O in flight (driving the reactor's completions with
 * fx_reactor_poll: reads still in flight complete, their done runs), releases the lock and
 * frees everything. I/O still in flight after timeout_ms: the store is left allocated (the
 * kernel may still use its buffers) and a warning logged. NULL is fine. */
FX_INTERNAL void fx_disk_close(fx_disk_t *d, uint32_t timeout_ms);

/* Visiting the index (after open: what the rebuild found; the owner re-publishes it).
 * cb returns false to stop; it must not change the store (collect, then drop). Keys are
 * not NUL-terminated. */
typedef bool (*fx_disk_visit_fn)(void *arg, uint64_t off, const char *key, uint32_t klen, const fx_disk_meta_t *m);
FX_INTERNAL void fx_disk_foreach(fx_disk_t *d, fx_disk_visit_fn cb, void *arg);

/* Room for n more records holding `bytes` of keys + values without waiting: the staging
 * buffers are not all in flight. An atomic group is appended only when all its members fit
 * (callers ask first, then append each; appends in the same reactor turn then succeed). */
FX_INTERNAL bool fx_disk_room(fx_disk_t *d, size_t n, uint64_t bytes);
/* Copies key + value into a staging buffer (the value's memory may be reused on return),
 * indexes the record under key (replacing an older version of the key: that one is dropped)
 * and returns its disk offset in *off. The bytes reach the file in the background (a full
 * buffer, or fx_disk_flush, or 2 ms later); until then reads are served from the buffer.
 * FLUXON_ERR_BUSY: no staging room, or capacity + 2 segments reached while retiring
 * segments wait for fx_disk_segment_free (fx_disk_room said so); FLUXON_ERR_INVALID_ARGUMENT: key
 * too long or value longer than a segment can take; FLUXON_ERR_UNAVAILABLE: the directory
 * failed (writes to it stopped; logged once). */
FX_INTERNAL int fx_disk_append(fx_disk_t *d, const char *key, uint32_t klen, const void *value,
                               const fx_disk_meta_t *m, uint64_t *off);
/* The same, with khash = fx_hmap_hash(key, klen) known to the caller (0: computed here). */
FX_INTERNAL int fx_disk_append_h(fx_disk_t *d, const char *key, uint32_t klen, uint64_t khash, const void *value,
                                 const fx_disk_meta_t *m, uint64_t *off);
FX_INTERNAL void fx_disk_flush(fx_disk_t *d);

/* The indexed record of key: its offset and meta (FLUXON_OK), or FLUXON_ERR_NOT_FOUND. */
FX_INTERNAL int fx_disk_find(fx_disk_t *d, const char *key, uint32_t klen, uint64_t *off, fx_disk_meta_t *m);
/* Starts loading the index slot of the key of hash khash (fx_hmap_hash): a find follows. */
FX_INTERNAL void fx_disk_prefetch_key(fx_disk_t *d, uint64_t khash);
/* The same with khash = fx_hmap_hash(key, klen) known to the caller (0: computed here). */
FX_INTERNAL int fx_disk_find_h(fx_disk_t *d, const char *key, uint32_t klen, uint64_t khash, uint64_t *off,
                               fx_disk_meta_t *m);
/* Bytes a record of a value_len-byte value takes on disk: its 4 KiB header block (header,
 * key) and the value rounded up to 4 KiB. */
FX_INTERNAL uint64_t fx_disk_rec_bytes(uint64_t value_len);
/* The indexed record at off: its key (*key valid until the record leaves the index) and
 * meta; false when none is indexed there. */
FX_INTERNAL bool fx_disk_rec_at(fx_disk_t *d, uint64_t off, const char **key, uint32_t *klen, fx_disk_meta_t *m);
/* The record at off is no longer wanted (a newer version, an INVALIDATE, a refused
 * re-publication): out of the index. Its bytes stay until its segment goes. Unknown off:
 * nothing. */
FX_INTERNAL void fx_disk_drop(fx_disk_t *d, uint64_t off);
/* The record at off is dead and must stay dead across a reopen (an INVALIDATE: a DELETE or a
 * newer version elsewhere, W6): a tombstone naming its key and version is staged (a 4 KiB
 * record; a reopen drops every record of that key up to that version written before it),
 * then the record leaves the index. FLUXON_OK: staged; FLUXON_ERR_NOT_FOUND: no record at
 * off (nothing done); FLUXON_ERR_BUSY / FLUXON_ERR_UNAVAILABLE (no staging room, writes
 * paused): the record left the index but a reopen may find it again. */
FX_INTERNAL int fx_disk_kill(fx_disk_t *d, uint64_t off);
/* Every record is dead (the master forgot this owner: it missed deletions): a barrier record
 * is staged (a reopen drops every record written before it) and the index is emptied.
 * Returns as fx_disk_kill (never NOT_FOUND). */
FX_INTERNAL int fx_disk_barrier(fx_disk_t *d);
/* cb(arg, status) runs once every byte staged before this call is on the file (written,
 * not synced: a process crash keeps it, a power loss may not): FLUXON_OK, or the first
 * failed write's FLUXON_ERR_UNAVAILABLE, or FLUXON_ERR_CANCELLED when the store closed
 * first. The open staging buffer is written now. Returns true when cb will run (later, on
 * the reactor thread), false when nothing was staged or in flight (cb does not run) or no
 * memory (then cb does not run either: *nomem is set). */
typedef void (*fx_disk_written_fn)(void *arg, int status);
/* Records that a master was heard from at contact_ms (CLOCK_REALTIME) and forgets an owner
 * away longer than grace_ms: written to DIR/CONTACT through the ring (one write in flight;
 * a call while one is in flight is dropped). */
FX_INTERNAL void fx_disk_note_contact(fx_disk_t *d, uint64_t contact_ms, uint64_t grace_ms);
/* What DIR/CONTACT said when the store opened: true with the last contact and the grace,
 * false when nothing was recorded (a new directory, a damaged file). */
FX_INTERNAL bool fx_disk_last_contact(const fx_disk_t *d, uint64_t *contact_ms, uint64_t *grace_ms);
FX_INTERNAL bool fx_disk_when_written(fx_disk_t *d, fx_disk_written_fn cb, void *arg, bool *nomem);

/* Reads the record at off into dst (value_len bytes; dst needs no alignment) and checks it:
 * magic, key == (key, klen), lengths, and the checksum. done(arg, status) runs later on the
 * reactor thread (never inside this call): FLUXON_OK; FLUXON_ERR_NOT_FOUND (no such record
 * indexed, or off is another key's record, or dropped meanwhile, or the record failed a
 * check: it is then dropped from the index, counted in crc_failures and logged with its file
 * and byte offset — never bytes served); FLUXON_ERR_INVALID_ARGUMENT: value_len is not the
 * record's (a caller's bug; the record stays); FLUXON_ERR_UNAVAILABLE: the read failed
 * (errno logged). The call itself returns
 * FLUXON_OK (done will run) or FLUXON_ERR_NOT_FOUND (off not indexed: done will not run). dst must stay valid until done ran. Reads of one segment hold it: its file
 * is removed only after they ended. */
typedef void (*fx_disk_read_fn)(void *arg, int status);
FX_INTERNAL int fx_disk_read(fx_disk_t *d, uint64_t off, const char *key, uint32_t klen, void *dst,
                             uint64_t value_len, fx_disk_read_fn done, void *arg);

/* The layer above unpublished every record of a retiring segment: they leave the index
 * (reads of them: NOT_FOUND) and its file goes once the reads holding it ended. A segment
 * that is not retiring (not named by segment_retiring): nothing. It may be called from
 * inside segment_retiring. */
FX_INTERNAL void fx_disk_segment_free(fx_disk_t *d, uint64_t seg);

typedef struct fx_disk_stats {
    uint64_t capacity_bytes, used_bytes, records, segments, segments_retiring;
    uint64_t appends, append_bytes, append_busy, writes, write_bytes, write_errors;
    uint64_t reads, read_bytes, reads_in_flight, read_errors, crc_failures, staged_reads;
    uint64_t read_ios; /* reads handed to the kernel: records side by side asked in one turn share one */
    uint64_t read_gap_bytes; /* read only to join two records' reads into one (DK_RGROUP_GAP), dropped */
    fx_hist_t read_latency; /* a record's read from the file: fx_disk_read to its check (staged reads not) */
    uint64_t segments_freed, records_dropped;
    uint64_t segments_recycled;  /* segments written into a freed segment's file (renamed), not a new one */
    uint64_t recovered_recycled; /* unsealed segments the rebuild found ending where their file's earlier life goes on */
    uint64_t tombstones, barriers, tomb_failures; /* staged; not staged (BUSY, paused) */
    uint64_t recovered_killed; /* records a reopen dropped for a tombstone or barrier */
    uint64_t contact_writes;   /* DIR/CONTACT writes */
    uint64_t retire_marks;     /* retirement marks staged (a file that could not be removed is not read again) */
    uint64_t recovered_retired; /* segments a reopen found retired (their file left): not read */
    uint64_t retired_removed_now; /* retired segments' files removed at once while writes failed (their
                                   * retirement marks may never reach the disk), not kept for reuse */
    uint64_t retired_remove_failures; /* of those, files that could not be removed (a restart first may find them) */
    uint64_t truncate_failures; /* segments not cut back after a write cut short (a restart may find its records) */
    uint64_t segment_waits; /* rolls refused (BUSY) while the next segment file was being made */
    uint64_t write_stops;   /* times writes paused after a failed write or file creation (they retry) */
    bool writes_failing;    /* paused now (a failure less than its backoff ago) */
    uint64_t recovered_records, recovered_segments, recovered_torn, recover_ms;
    bool direct_io; /* O_DIRECT in use */
    uint64_t direct_fallbacks; /* O_DIRECT refused (at open or first write): buffered + DONTNEED */
} fx_disk_stats_t;
FX_INTERNAL void fx_disk_stats(const fx_disk_t *d, fx_disk_stats_t *s); /* walks the segments */
/* Cheap (no walk), for per-key and per-batch decisions: records indexed; writes paused now. */
FX_INTERNAL uint64_t fx_disk_records(const fx_disk_t *d);
FX_INTERNAL bool fx_disk_writes_paused(const fx_disk_t *d);

#endif
