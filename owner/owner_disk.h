/* owner_disk.h — the owner's disk tier (disk.c, issue 39): values leaving the memory tier
 * are copied into the disk store (disk/) and their replica at the master moves there (EVICT
 * with a disk offset); a get of a key on disk reads it back into a slot through the fetch
 * path (LOOKUP names this owner's disk replica, GET_DONE publishes the copy); INVALIDATEs
 * naming disk offsets drop records; segments that leave for room are unpublished. Above
 * the store and the master link; evict_send.c, fetch.c, get.c, store.c and republish.c
 * call it. Reactor thread only. Every function is a no-op (or false) with the tier off. */
#ifndef FX_OWNER_DISK_H
#define FX_OWNER_DISK_H

#include "disk.h"
#include "owner_store.h"

/* Opens the configured directory (rebuilding its index); FLUXON_OK with the tier off.
 * FLUXON_ERR_CONFIG (logged, naming the field or the holder of the directory) otherwise. */
FX_INTERNAL int fx_odisk_init(fx_owner_t *o);
FX_INTERNAL void fx_odisk_fini(fx_owner_t *o);
FX_INTERNAL bool fx_odisk_on(const fx_owner_t *o);
/* The key's record on disk: true with its offset and meta. */
FX_INTERNAL bool fx_odisk_find(fx_owner_t *o, const char *key, uint32_t klen, uint64_t *off, fx_disk_meta_t *m);
/* The key has a record on disk (a miss here is not settled without the master). */
FX_INTERNAL bool fx_odisk_has(fx_owner_t *o, const char *key, uint32_t klen);
/* The same with khash = fx_hmap_hash(key, klen) (the owner's index shares it; 0: computed). */
FX_INTERNAL bool fx_odisk_has_h(fx_owner_t *o, const char *key, uint32_t klen, uint64_t khash);
/* Starts loading the disk index's slot of the key of hash khash (a lookup follows). */
FX_INTERNAL void fx_odisk_prefetch_key(fx_owner_t *o, uint64_t khash);
/* Eviction: m[i] is victim v[i]'s record meta, group_size 0 when it does not deserve a disk
 * copy (whole groups: the caller decides per group). Fills disk[i]: the disk offset its
 * replica moves to (the record is written or already there in that version), or 0
 * (dropped as before); reused[i]: true when the record was there already (a copy read back
 * from this disk: the master routes that record, whatever this EVICT's answer). */
FX_INTERNAL void fx_odisk_demote(fx_owner_t *o, owner_entry_t *const *v, const fx_disk_meta_t *m, size_t n,
                                 uint64_t *disk, bool *reused);
/* The EVICT that moved a replica to disk_off answered st (OK: routed there; else the
 * record is dropped: the master does not route it). */
FX_INTERNAL void fx_odisk_moved(fx_owner_t *o, uint64_t disk_off, int st);
/* INVALIDATE or a refused re-publication named this disk offset: the record is killed (a
 * tombstone keeps it dead across a restart, W6). Returns fx_disk_kill's status
 * (FLUXON_ERR_NOT_FOUND: no such record, or no disk tier). */
FX_INTERNAL int fx_odisk_drop(fx_owner_t *o, uint64_t disk_off);
/* An INVALIDATE named disk_off for key at (put_ms, put_ver): the record is killed as by
 * fx_odisk_drop when it is that one; another record there (or none): FLUXON_ERR_NOT_FOUND,
 * nothing killed (counted disk_invalidate_other). */
FX_INTERNAL int fx_odisk_invalidate(fx_owner_t *o, uint64_t disk_off, const char *key, uint32_t klen, uint64_t put_ms,
                                    uint64_t put_ver);
/* The master forgot this owner: every record is dropped, for good (a barrier). */
FX_INTERNAL void fx_odisk_forget_all(fx_owner_t *o);
/* cb(arg, status) once the tombstones staged so far are on the file (fx_disk_when_written);
 * false: nothing to wait for (cb does not run; *nomem says whether that was memory). */
FX_INTERNAL bool fx_odisk_when_written(fx_owner_t *o, fx_disk_written_fn cb, void *arg, bool *nomem);
/* Reads the value of the record at off into dst (fetch.c); done as fx_disk_read's. */
FX_INTERNAL int fx_odisk_read(fx_owner_t *o, uint64_t off, const char *key, uint32_t klen, void *dst, uint64_t len,
                              fx_disk_read_fn done, void *arg);
/* A read-back of the record at off: true when it was read back before (promote it: a
 * durable copy in memory), false the first time (a temporary copy for its readers). */
FX_INTERNAL bool fx_odisk_promote(fx_owner_t *o, uint64_t off);
/* A disk replica the master routes could not be read (gone, or failed its checksum): the
 * master is told to drop it (EVICT), so later lookups miss instead of reading again. */
FX_INTERNAL void fx_odisk_forget(fx_owner_t *o, const char *key, uint32_t klen, uint64_t off, uint64_t put_ms,
                                 uint64_t put_ver);
/* At every registration (DIR/CONTACT notes the master heard from). True once, at the first,
 * when the directory held records from an earlier run: they are re-published like values a
 * new master does not know — unless the last contact recorded is older than that master's
 * dead_owner_grace_ms: then they are dropped first (W6), and it says false. */
FX_INTERNAL bool fx_odisk_first_registration(fx_owner_t *o);
/* Before the first registration (REGISTER's republishing): will it re-publish disk records
 * whatever the master? Then fx_odisk_first_registration says true (a last batch is sent). */
FX_INTERNAL bool fx_odisk_will_republish(fx_owner_t *o);
/* republish.c: every record (key, offset, meta) to report to a new master. */
FX_INTERNAL void fx_odisk_foreach(fx_owner_t *o, fx_disk_visit_fn cb, void *arg);
FX_INTERNAL void fx_odisk_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
