/* owner_kv.h — the owner's KV state shared by owner_kv.c (slots, grants, puts, holders,
 * invalidation, UCX glue) and owner_get.c (get batches, per-key in-flight gets,
 * lookups, remote fetches, handles). Reactor thread only. */
#ifndef FX_OWNER_KV_H
#define FX_OWNER_KV_H

#include "hmap.h"
#include "owner_int.h"
#include "slot_pool.h"
#include "ucx_dp.h"

/* How long a retired published slot keeps its bytes before reuse: covers a remote
 * fetch that obtained the address from the master just before the route died. */
#define FX_REUSE_GRACE_MS 1000u

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
    int64_t owners_alive; /* from CLUSTER_INFO; -1 unknown */
    struct okv_grace *graces; /* retired published slots kept for FX_REUSE_GRACE_MS */
    /* counters */
    uint64_t lookups_skipped;
    uint64_t puts_started, puts_committed, puts_published, put_keys_published, put_rejected,
        put_done_retries, puts_aborted, get_batches, get_keys, local_hits, joined, leaders,
        lookup_batches, transfers, transfer_keys, transfer_bytes, remote_hits, misses,
        invalidations, handles_opened, handles_expired, grants_received, get_done_stale, faults_applied;
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

/* owner_get.c */
FX_INTERNAL void fx_owner_get_start(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h,
                                    const uint8_t *body, fx_arena_t *arena);
FX_INTERNAL void fx_owner_handle_consume(fx_owner_t *o, owner_ext_t *e, uint64_t handle_id, uint64_t consume);
FX_INTERNAL void fx_owner_handle_free(fx_owner_t *o, owner_handle_t *hd, bool release_holders);
FX_INTERNAL void fx_owner_gets_fail_all(fx_owner_t *o);

#endif
