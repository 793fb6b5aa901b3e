/* owner_store.h — the bottom of the owner's KV modules (store.c): the slot pool, the
 * entries (value versions held in this segment), the local index (key -> visible version),
 * by_offset (identity -> entry), holders (pins), retire, and INVALIDATE. Modules above
 * learn of retirement, commitment and unpinning through hooks they register. */
#ifndef FX_OWNER_STORE_H
#define FX_OWNER_STORE_H

#include "jsonbuf.h"
#include "evict_policy.h"
#include "owner_int.h"
#include "slot_pool.h"

/* A value version held in this owner's segment. Its identity is (slot.offset, put_ms,
 * put_ver) once committed; callbacks that outlive a reactor turn look it up again by
 * identity (fx_ostore_at), never keep the pointer. */
typedef struct owner_entry {
    char *key; /* klen bytes + NUL, in the same allocation as the entry */
    uint32_t klen;
    uint64_t khash; /* fx_hmap_hash(key, klen) */
    fx_slot_ref_t slot;
    uint64_t value_len, put_ms, put_ver;
    uint8_t state;  /* OE_PENDING (local-visible, V1) or OE_COMMITTED (route live, V3) */
    bool indexed;   /* the local index maps key to this entry */
    bool remote;    /* fetched from another owner (a replica) */
    bool leased;    /* published bound to a lease (put.c): never re-published to a new master */
    bool retired;
    bool evicting;  /* selected for eviction: hidden from the index until the master answers */
    bool invalidated; /* INVALIDATE named it while PENDING: hidden, retired when its PUT_DONE or
                       * GET_DONE outcome is known (the plan or fetch still names its identity) */
    /* evict.c's fields */
    uint32_t busy_tries;     /* eviction rounds that found it (alone) pinned */
    uint32_t group_idx;      /* index in group->m */
    struct oev_group *group; /* the atomic group it was published in; NULL = alone */
    fx_evp_node_t lru;       /* hot tier (eviction policy): linked while COMMITTED and not evicting */
    uint8_t repl;            /* replica.c: OREPL_* (issue 16) */
    bool wb_recheck;         /* replica.c: its copy was complete when a hit made it hot again: its next
                              * write-back looks at this owner's record of the copy first (wbmap.c) */
    bool target_kept;        /* fetch.c: copied from a replica target that keeps its copy
                              * (FX_GET_SRC_KEPT): OREPL_COPIED once published (issue 38) */
    uint8_t ev_cause;        /* evict.c: how it goes when evicted with write-back on (OEV_CAUSE_*) */
    uint32_t wb_epoch;       /* evict.c: the write-back look-ahead saw it in this epoch (0: not seen) */
    bool wb_rejected;        /* evict.c: second_touch did not admit it (kept until a hit: only a hit of
                              * this entry can raise its key's count) */
    bool seen_twice;         /* evict.c: its key's count reached 2 with its put, or it was hit while
                              * hot: what second_touch admits (no sketch read at eviction) */
    /* pins.c (issue 42): pinned until pin_until_ms (0: not pinned), kept off the hot tier's
     * policy meanwhile; pin_idx: its place in the deadline heap; pin_ttl_ms: a hit restarts
     * the pin for this long (0: hits do not); tenant: tenant.c's index + 1 of its key's
     * tenant, whose bytes count it since its commit (0: not counted) */
    uint64_t pin_until_ms;
    uint32_t pin_idx, pin_ttl_ms;
    uint8_t tenant;
    /* evict_quota.c (issue 42 quotas): in_tq: linked in its tenant's own policy (the tenant
     * has a quota or a guarantee), not the shared one; q_cause: chosen as a victim for its
     * tenant's quota or for pressure (OEV_Q_*), its bytes counted as selected until settled */
    bool in_tq;
    uint8_t q_cause;
} owner_entry_t;
enum { OE_PENDING = 1, OE_COMMITTED = 2 };

typedef struct owner_holder {
    uint64_t id;
    fx_slot_ref_t slot;
    owner_ext_t *ext;
    uint64_t since_ms; /* pinned at (fx_now_ms): client_limits.pin_expire_ms */
    struct owner_holder *prev, *next;
} owner_holder_t;

typedef struct fx_ostore_hooks {
    void (*retired)(fx_owner_t *o, owner_entry_t *en);   /* en is going away (retire, shutdown) */
    void (*committed)(fx_owner_t *o, owner_entry_t *en); /* en just became COMMITTED */
    void (*unpinned)(fx_owner_t *o);                     /* a holder went: a slot may be free */
} fx_ostore_hooks_t;

FX_INTERNAL int fx_ostore_init(fx_owner_t *o, uint64_t max_grants);
/* INVALIDATE named a replica outside the segment (a disk offset, issue 39): disk.c's. */
/* an INVALIDATE naming disk_off for key (klen bytes) at version (put_ms, put_ver):
 * fx_odisk_invalidate's result */
typedef int (*fx_ostore_disk_inv_fn)(fx_owner_t *o, uint64_t disk_off, const char *key, uint32_t klen, uint64_t put_ms,
                                     uint64_t put_ver);
FX_INTERNAL void fx_ostore_set_disk_hook(fx_owner_t *o, fx_ostore_disk_inv_fn fn);
FX_INTERNAL void fx_ostore_set_hooks(fx_owner_t *o, const fx_ostore_hooks_t *hooks);
/* Something changed that may let eviction or a waiting claim progress (a copy ended): the
 * unpinned hook, for the layers above the store that evict.c sits on (replica.c). */
FX_INTERNAL void fx_ostore_kick(fx_owner_t *o);
FX_INTERNAL void fx_ostore_fini(fx_owner_t *o); /* frees entries, holders and the pool */
FX_INTERNAL fx_slot_pool_t *fx_ostore_pool(fx_owner_t *o);
FX_INTERNAL uint64_t fx_ostore_next_id(fx_owner_t *o); /* ids of holders, plans, handles, batches */
FX_INTERNAL bool fx_ostore_key_ok(fx_str_t k);

/* khash: fx_hmap_hash(key, klen) when the caller has it, else 0 (computed here) */
FX_INTERNAL owner_entry_t *fx_ostore_entry_new(fx_owner_t *o, const char *key, uint32_t klen, uint64_t khash,
                                               const fx_slot_ref_t *slot, uint64_t value_len);
FX_INTERNAL owner_entry_t *fx_ostore_lookup(fx_owner_t *o, const void *key, size_t klen); /* visible */
FX_INTERNAL owner_entry_t *fx_ostore_lookup_h(fx_owner_t *o, const void *key, size_t klen, uint64_t khash);
/* Batches: start loading the index slot of a key (its fx_hmap_hash) and the identity
 * slot of a segment offset, before the batch's lookups (fx_hmap_prefetch). */
FX_INTERNAL void fx_ostore_prefetch_key(fx_owner_t *o, uint64_t khash);
FX_INTERNAL void fx_ostore_prefetch_offset(fx_owner_t *o, uint64_t offset);
FX_INTERNAL owner_entry_t *fx_ostore_at(fx_owner_t *o, uint64_t offset); /* any live entry */
/* The live entry in exactly this use of the slot (offset + use_seq), or NULL: how a
 * callback that outlived a reactor turn finds its entry again. */
FX_INTERNAL owner_entry_t *fx_ostore_find(fx_owner_t *o, const fx_slot_ref_t *slot);
/* makes en the indexed version of its key (the previous one stays until invalidated) */
FX_INTERNAL void fx_ostore_index(fx_owner_t *o, owner_entry_t *en);
FX_INTERNAL void fx_ostore_hide(fx_owner_t *o, owner_entry_t *en); /* out of the index only */
/* Marks en COMMITTED with its identity (the slot too); FLUXON_OK or the pool's refusal. */
FX_INTERNAL int fx_ostore_commit(fx_owner_t *o, owner_entry_t *en, uint64_t put_ms, uint64_t put_ver);
/* Drops an entry: out of the index, slot released (freed once no holder pins it, S2). */
FX_INTERNAL void fx_ostore_retire(fx_owner_t *o, owner_entry_t *en);
/* INVALIDATE from the master: COMMITTED versions it names retire; PENDING ones (their
 * PUT_DONE or GET_DONE outcome still unknown) are marked invalidated and hidden. */
/* L1: the master forgot this owner: every COMMITTED value is retired (a PENDING one, being
 * published or fetched now, is left to its publish/GET_DONE). Returns how many. */
FX_INTERNAL size_t fx_ostore_forget_all(fx_owner_t *o);
/* Returns the disk records it killed: > 0 tombstones staged (an acked INVALIDATE is answered
 * once they are written, fx_odisk_when_written), < 0 one could not be staged. */
FX_INTERNAL int fx_ostore_invalidate(fx_owner_t *o, const uint8_t *body, size_t len, fx_arena_t *arena);

FX_INTERNAL owner_holder_t *fx_ostore_holder_new(fx_owner_t *o, owner_ext_t *e, const fx_slot_ref_t *slot);
FX_INTERNAL void fx_ostore_holder_release(fx_owner_t *o, owner_holder_t *h);
FX_INTERNAL int fx_ostore_holder_release_id(fx_owner_t *o, owner_ext_t *e, uint64_t id);
FX_INTERNAL void fx_ostore_ext_closed(fx_owner_t *o, owner_ext_t *e); /* releases e's holders */

FX_INTERNAL void fx_ostore_metrics(fx_owner_t *o, fx_ometrics_t *m);

#endif
