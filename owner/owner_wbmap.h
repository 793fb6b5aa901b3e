/* owner_wbmap.h — this owner's record of the copies it wrote back (appended) to other owners
 * (issue 38), so that a get of such a value reads it back without a LOOKUP (fetch.c). See
 * wbmap.c for the rule that makes such a read safe. Reactor thread only. */
#ifndef FX_OWNER_WBMAP_H
#define FX_OWNER_WBMAP_H

#include "owner_int.h"

/* One recorded copy: where it lies and what it is. */
typedef struct fx_owbm_hit {
    const char *node_id; /* the target (valid until the next call into wbmap) */
    uint64_t generation, base;
    fx_str_t address, rkey;
    uint64_t offset, value_len, put_ms, put_ver;
    uint32_t reuse_ms; /* the master's range_reuse_delay_ms */
    bool keeps, cpu;   /* FX_TARGET_KEEPS, FX_TARGET_CPU */
    bool read_before;  /* fx_owbm_note_read was called for this copy */
    void *ent;         /* the record (fx_owbm_note_read; valid until the next call into wbmap) */
} fx_owbm_hit_t;

FX_INTERNAL int fx_owbm_init(fx_owner_t *o);
FX_INTERNAL void fx_owbm_fini(fx_owner_t *o);
/* A target as APPEND_START named it (its answer a): returns its index for fx_owbm_add, -1
 * when no record is kept (reuse_ms 0, or the table of targets is full). */
FX_INTERNAL int fx_owbm_target(fx_owner_t *o, const fx_body_put_place_ack_t *a);
/* fx_owbm_add's memory for that key and offset starts loading (a batch's misses overlap). */
FX_INTERNAL void fx_owbm_prefetch(fx_owner_t *o, int tgt, const char *key, uint32_t klen, uint64_t offset);
/* The master recorded key's copy (version put_ms/put_ver, value_len bytes) at offset of
 * target tgt (APPEND_DONE answered OK for it). */
FX_INTERNAL void fx_owbm_add(fx_owner_t *o, int tgt, const char *key, uint32_t klen, uint64_t offset,
                             uint64_t value_len, uint64_t put_ms, uint64_t put_ver);
/* FORGET from the master: those copies are gone (an empty node_id: every record). */
FX_INTERNAL void fx_owbm_forget(fx_owner_t *o, const uint8_t *body, size_t len, fx_arena_t *arena);
/* The master link went or changed: no record can be trusted (FORGETs may be lost). */
FX_INTERNAL void fx_owbm_clear(fx_owner_t *o);
/* key's recorded copy, if any: true and *h filled. khash: fx_hmap_hash(key, klen). */
FX_INTERNAL bool fx_owbm_find(fx_owner_t *o, const char *key, uint32_t klen, uint64_t khash, fx_owbm_hit_t *h);
/* The copy h names (fx_owbm_find, no call into wbmap since) was read back and served: the
 * next read of it finds read_before (fetch.c serves a first read to its readers only). */
FX_INTERNAL void fx_owbm_note_read(fx_owner_t *o, const fx_owbm_hit_t *h);
/* fx_owbm_find's memory for khash starts loading: depth 0 the map's slot, depth 1 (after
 * depth 0 was asked for the whole batch) the record itself (a batch's misses overlap). */
FX_INTERNAL void fx_owbm_prefetch_key(const fx_owner_t *o, uint64_t khash, int depth);
FX_INTERNAL bool fx_owbm_empty(const fx_owner_t *o);
FX_INTERNAL void fx_owbm_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
