/* owner_kv.h — the owner's KV state shared by owner_kv.c (slots, grants, puts, holders,
 * invalidation, UCX glue) and owner_get.c (get batches, per-key in-flight gets,
 * lookups, remote fetches, handles). Reactor thread only. */
#ifndef FX_OWNER_KV_H
#define FX_OWNER_KV_H

#include "hmap.h"
#include "lru.h"
#include "owner_int.h"
#include "slot_pool.h"
#include "ucx_dp.h"

/* A value version held in this owner's segment. */
typedef struct owner_entry {
    char *key;
    uint32_t klen;
    fx_slot_ref_t slot;
    uint64_t value_len, put_ms, put_ver;
    uint8_t state;  /* OE_PENDING (local-visible, V1) or OE_COMMITTED (route live, V3) */
    bool indexed;   /* the local index maps key to this entry */
    bool remote;    /* fetched from another owner (a replica) */
    bool retired;
    bool evicting;  /* selected for eviction: hidden from the index until the master answers */
    uint32_t busy_tries;   /* eviction rounds that found it (alone) pinned */
    uint32_t group_idx;    /* index in group->m */
    struct oev_group *group; /* the atomic group it was published in; NULL = alone */
    fx_lru_node_t lru;     /* hot tier: linked while COMMITTED and not evicting */
} owner_entry_t;
enum { OE_PENDING = 1, OE_COMMITTED = 2 };

typedef struct owner_holder {
    uint64_t id;
    fx_slot_ref_t slot;
    owner_ext_t *ext;
    struct owner_holder *prev, *next;
} owner_holder_t;

typedef struct owner_plan {
    uint64_t id;
    fx_owner_t *o;
    owner_ext_t *ext; /* NULL once committed (the owner publishes it) or orphaned */
    struct owner_plan *prev, *next;
    int state; /* OP_CLAIMING, OP_PREPARED, OP_PUBLISHING */
    size_t n;
    char **keys;
    uint32_t *klens;
    int *status;
    fx_slot_ref_t *slots;
    owner_entry_t **entries;
    uint64_t value_len, flags, lease_id;
    uint64_t *group_lens;
    size_t n_groups;
    uint64_t batch_id;
    uint32_t attempts;
    fx_timer_t retry_timer;
    size_t next_claim;
    uint64_t req_id; /* put_start request to answer once slots are claimed */
    fx_conn_t *reply_conn;
    /* placement (owner_place.c): the master's PUT_PLACE answer */
    char *preferred;          /* preferred_sub_cluster, NULL = none */
    uint64_t put_token;       /* 0: not placed (local-first, no in-flight record at the master) */
    bool target_remote;       /* the values go to the target over UCX before PUT_DONE */
    bool pushing, pushed;
    char target_id[FX_ID_MAX];
    uint64_t target_gen, target_base;
    uint8_t *target_addr, *target_rkey;
    uint32_t target_addr_len, target_rkey_len;
    uint64_t *target_offsets; /* n entries: where key i goes in the target's segment */
    uint64_t place_sent_ms;   /* when PUT_PLACE left (fx_now_ms) */
    uint64_t push_deadline_ms; /* the push must be over by then: 3/4 of the master's TTL */
    uint8_t *inline_value;     /* PUT_INLINE: the bytes to stage (freed once copied); */
    bool is_inline;            /* the answer to req_id is the publish outcome */
} owner_plan_t;
enum { OP_CLAIMING = 1, OP_PREPARED = 2, OP_PUBLISHING = 3 };

typedef struct owner_handle {
    uint64_t id;
    owner_ext_t *ext;
    struct owner_handle *prev, *next;
    size_t n;
    uint64_t *holder_ids;
    fx_timer_t ttl;
    fx_owner_t *o;
} owner_handle_t;

typedef struct owner_peer {
    char node_id[FX_ID_MAX];
    uint64_t generation;
    fx_ucx_peer_t *peer;
} owner_peer_t;

/* A slot class the pool holds grants of (eviction frees slots per class). */
typedef struct okv_class {
    uint64_t slot_size, slots; /* slots: in every grant of the class */
    uint64_t draining;         /* retired slots held by the reuse grace */
} okv_class_t;
#define FX_OKV_MAX_CLASSES 16

typedef struct owner_kv {
    fx_slot_pool_t *pool;
    uint64_t max_grants, grants_requested;
    fx_hmap_t *index;        /* key -> owner_entry_t (the visible version) */
    fx_hmap_t *by_offset;    /* u64 offset -> owner_entry_t (every live entry) */
    fx_hmap_t *inflight;     /* key -> owner_plan_t (prepared, not committed) */
    fx_hmap_t *plans;        /* u64 id -> owner_plan_t */
    fx_hmap_t *holders;      /* u64 id -> owner_holder_t */
    fx_hmap_t *handles;      /* u64 id -> owner_handle_t */
    fx_hmap_t *gets;         /* key -> struct owner_oget (one in-flight get per key, G6) */
    uint64_t next_id;
    /* UCX */
    fx_ucx_t *ucx;
    fx_ucx_mem_t *mem;
    void *rkey;
    size_t rkey_len;
    const void *address;
    size_t address_len;
    fx_watch_t *ucx_watch;
    fx_timer_t ucx_timer;
    owner_peer_t *peers;
    size_t n_peers, cap_peers;
    /* claims waiting for grants */
    struct owner_claim *claims;
    bool grant_inflight;
    uint64_t grant_nospace_ms; /* when the master last had no room for a grant (0: never/since grown) */
    int64_t owners_alive; /* from CLUSTER_INFO; -1 unknown */
    uint64_t *grant_ids, *grant_offsets; /* every grant held (REGISTER tells a new master) */
    size_t n_grants, cap_grants;
    /* hot tier and eviction (owner_evict.c) */
    fx_owner_t *owner;
    fx_lru_t hot;             /* COMMITTED values, weighted by slot_size */
    uint64_t hot_capacity;    /* bytes; the watermark, never the configured capacity (S5) */
    okv_class_t classes[FX_OKV_MAX_CLASSES];
    size_t n_classes;
    struct oev_cohort *cohorts; /* EVICT batches waiting for the master */
    fx_timer_t oev_kick_timer, oev_tick_timer;
    bool oev_in_step, closing;
    uint64_t oev_round;
    uint32_t oev_backoff_ms;
    uint64_t ev_evictions, ev_evicted_bytes, ev_cohorts, ev_busy_retries, ev_restored, ev_selected_bytes,
        ev_debt, ev_stale, ev_claim_waits, ev_claim_timeouts, ev_left_hot;
    /* counters */
    uint64_t lookups_skipped;
    uint64_t puts_started, puts_committed, puts_published, put_keys_published, put_rejected,
        put_done_retries, puts_aborted, get_batches, get_keys, local_hits, joined, leaders,
        lookup_batches, transfers, transfer_keys, transfer_bytes, remote_hits, misses,
        invalidations, handles_opened, handles_expired, grants_received, get_done_stale, faults_applied,
        place_requests, placed_remote, placed_local, place_fallbacks, pushed_keys, pushed_bytes, revokes_sent,
        temp_copies, reuse_hits, self_copies;
} owner_kv_t;

static inline owner_kv_t *owner_kv(fx_owner_t *o) { return (owner_kv_t *)o->kv; }

/* shared helpers (owner_kv.c) */
FX_INTERNAL uint64_t fx_okv_next_id(owner_kv_t *kv);
FX_INTERNAL owner_holder_t *fx_okv_holder_new(fx_owner_t *o, owner_ext_t *e, const fx_slot_ref_t *slot);
FX_INTERNAL void fx_okv_holder_release(fx_owner_t *o, owner_holder_t *h);
FX_INTERNAL int fx_okv_holder_release_id(fx_owner_t *o, owner_ext_t *e, uint64_t id);
FX_INTERNAL owner_entry_t *fx_okv_entry_new(fx_owner_t *o, const char *key, uint32_t klen,
                                            const fx_slot_ref_t *slot, uint64_t value_len);
/* makes entry the indexed version of its key (the previous one stays until invalidated) */
FX_INTERNAL void fx_okv_entry_index(fx_owner_t *o, owner_entry_t *en);
FX_INTERNAL void fx_okv_entry_retire(fx_owner_t *o, owner_entry_t *en);
/* Claims `count` slots of value_len, asking the master for grants when the pool runs
 * dry; cb(arg, got) runs once with slots[0..got) claimed (got < count: no space). May
 * call cb before returning. */
typedef void (*fx_okv_claim_cb)(fx_owner_t *o, void *arg, size_t got);
FX_INTERNAL void fx_okv_claim(fx_owner_t *o, uint64_t value_len, size_t count, fx_slot_ref_t *slots,
                              fx_okv_claim_cb cb, void *arg);
FX_INTERNAL fx_ucx_peer_t *fx_okv_peer(fx_owner_t *o, fx_str_t node_id, uint64_t generation,
                                       fx_str_t address, fx_str_t rkey, uint64_t base);
FX_INTERNAL bool fx_okv_key_ok(fx_str_t k);

/* The master refused a grant for lack of room in this segment less than a second ago
 * (ranges it placed here for other owners take room too): claims wait for eviction. */
FX_INTERNAL bool fx_okv_segment_full(fx_owner_t *o);
/* Serves queued claims again (slots may have freed); claims past claim_timeout_ms fail. */
FX_INTERNAL void fx_okv_claims_pump(fx_owner_t *o);
/* Slots still missing per class over the queued claims: sizes[i], needs[i] for i < return. */
FX_INTERNAL size_t fx_okv_claims_deficit(fx_owner_t *o, uint64_t *sizes, uint64_t *needs, size_t cap);

/* owner_evict.c: the hot tier (an LRU of COMMITTED values) and capacity eviction of whole
 * atomic groups by exact identity (ARCHITECTURE §9, S1/S2/S5, A1). */
FX_INTERNAL void fx_oev_init(fx_owner_t *o);
FX_INTERNAL void fx_oev_fini(fx_owner_t *o);
/* en just became COMMITTED: it enters the hot tier as the hottest */
FX_INTERNAL void fx_oev_admit(fx_owner_t *o, owner_entry_t *en);
/* a local hit (inline or joined) */
FX_INTERNAL void fx_oev_touch(fx_owner_t *o, owner_entry_t *en);
/* en is going away (retire, shutdown): out of the hot tier and its group */
FX_INTERNAL void fx_oev_forget(fx_owner_t *o, owner_entry_t *en);
/* the committed members of one atomic group of a published plan (n >= 2) */
FX_INTERNAL void fx_oev_group_commit(fx_owner_t *o, owner_entry_t **members, size_t n);
/* something changed that may let eviction or a waiting claim progress */
FX_INTERNAL void fx_oev_kick(fx_owner_t *o);
/* a claim that the pool cannot serve now may wait for eviction (capacity reached) */
FX_INTERNAL bool fx_oev_claim_can_wait(fx_owner_t *o, uint64_t value_len, size_t count);
FX_INTERNAL void fx_oev_grant_added(fx_owner_t *o, uint64_t slot_size);
FX_INTERNAL void fx_oev_draining(fx_owner_t *o, uint64_t slot_size, int delta);
FX_INTERNAL size_t fx_oev_stats_json(fx_owner_t *o, char *buf, size_t cap);

/* owner_kv.c, for owner_place.c */
FX_INTERNAL void fx_okv_put_start_reply(fx_owner_t *o, owner_plan_t *p);
FX_INTERNAL void fx_okv_publish(fx_owner_t *o, owner_plan_t *p);

/* owner_place.c: placed puts (ARCHITECTURE §7). A plan with FX_PUT_PLACE asks the master
 * for a target (PUT_PLACE) once its local staging slots are claimed; after commit the
 * values are pushed over UCX into the ranges the master allocated, then published with
 * the put_token. Any failure on the way (no master answer, push failed, token stale)
 * revokes the placement and publishes the local copy instead. */
/* Takes over answering put_start (true) when the plan is placed and has accepted keys. */
FX_INTERNAL bool fx_oplace_start(fx_owner_t *o, owner_plan_t *p);
/* Called first by fx_okv_publish: true when a push is running or was started (the
 * publish resumes when it ends). */
FX_INTERNAL bool fx_oplace_before_publish(fx_owner_t *o, owner_plan_t *p);
/* Drops the placement: one-way PUT_REVOKE to the master, the plan publishes locally. */
FX_INTERNAL void fx_oplace_revoke(fx_owner_t *o, owner_plan_t *p);
FX_INTERNAL void fx_oplace_plan_free(owner_plan_t *p);

/* owner_get.c */
FX_INTERNAL void fx_owner_get_start(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h,
                                    const uint8_t *body, fx_arena_t *arena);
FX_INTERNAL void fx_owner_handle_consume(fx_owner_t *o, owner_ext_t *e, uint64_t handle_id, uint64_t consume);
FX_INTERNAL void fx_owner_handle_free(fx_owner_t *o, owner_handle_t *hd, bool release_holders);
FX_INTERNAL void fx_owner_gets_fail_all(fx_owner_t *o);

#endif
