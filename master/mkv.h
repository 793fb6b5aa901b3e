/* mkv.h — the master's KV state and the modules that share it, lowest layer first:
 *   reply.c        error replies, the registered-owner check, the batch request prologue
 *   lease_table.c  lease id -> deadline, routes bound to it
 *   routes.c       route table, replicas, prefix index, put ids, INVALIDATE batching
 *   place.c        placement policy (a pure choice over the node table)
 *   inflight.c     in-flight puts (PUT_PLACE, PUT_REVOKE, TTL) and durable gets
 *   dedup.c        the answers of recent PUT_DONE batches per owner, kept for a time (T1)
 *   publish.c      PUT_DONE: batch dedup T1, convergence T2, whole-group rejection
 *   tombs.c        the deletes a new master remembers while owners re-publish (W6)
 *   republish.c    REPUBLISH: routes rebuilt from what owners hold (a restarted master)
 *   lookup.c       LOOKUP, GET_DONE, EVICT, DELETE, EXISTS, LIST
 *   leases.c       LEASE_GRANT and the lease timer
 *   kv.c, stats.c  lifecycle, per-owner state and GRANT; counters as JSON
 * master.c (accept, HELLO, REGISTER, liveness, dispatch) sits on top; no file here calls it.
 * Reactor thread only, no locks. Each module touches its own fields; the counters (c) are
 * bumped by every module and printed by stats.c. */
#ifndef FX_MKV_H
#define FX_MKV_H

#include "hmap.h"
#include "jsonbuf.h"
#include "master_int.h"
#include "offset_alloc.h"
#include "prefix_index.h"

#define MKV_MAX_REPLICAS 4u
#define MKV_MAX_KEY 1024u
#define MKV_MAX_GRANTS 64u
#define MKV_LEASE_TICK_MS 20u
#define MKV_LEASE_TTL_MAX 86400000ull
#define MKV_LIST_DEFAULT 1000u
#define MKV_LIST_MAX 10000u
#define MKV_INDEX_IDLE_MS 60000u          /* the prefix index is dropped this long after the last LIST */
#define MKV_DEDUP_TTL_FACTOR 60u          /* PUT_DONE answers kept 60 x master_timeout_ms ... */
#define MKV_DEDUP_MAX_BYTES (64u << 20)   /* ... and at most this much per owner (dedup.c) */
#define MKV_ST(s) ((uint64_t)(int64_t)(s))
/* printf arguments for a key view, truncated to 80 bytes */
#define MKV_KEYF(s) (int)FX_MIN((s).len, 80u), ((s).p ? (s).p : "")

typedef struct mkv_replica {
    master_node_t *node;
    uint64_t generation, offset;
    uint64_t range_bytes; /* > 0: a range this master allocated in node's segment (a placed
                           * put); freed when the replica goes. 0: a slot of the owner's grants */
    uint64_t seq;         /* W3: this replica's number, never used again by this master: a
                           * replica removed and added again (same node, generation, offset,
                           * version) is another one; LOOKUP names it, GET_DONE echoes it */
    uint64_t cold;        /* append.c: the number of its newest entry in the targets' cold FIFO
                           * (0: none; an entry with another number is void) */
    struct master_node *wb_by; /* a copy appended (written back) by that owner: it is told when the
                                * copy goes (forget.c), NULL otherwise */
} mkv_replica_t;

typedef struct mkv_route {
    uint64_t value_len, put_ms, lease_id;
    uint32_t put_ver, group_len, n_rep;
    uint32_t appending; /* append.c: in-flight appends of this version (KEY_BEING_WRITTEN); a new
                         * version is a new route, which starts at 0 */
    mkv_replica_t rep[MKV_MAX_REPLICAS];
} mkv_route_t;

/* the KV counters: FX_MASTER_KV_COUNTERS in master_metrics.h (one row each) */

struct fx_lease_table;
struct fx_mplace;

typedef struct mkv {
    fx_master_t *m;
    /* routes.c */
    fx_hmap_t *routes; /* key -> mkv_route_t */
    fx_prefix_index_t *index; /* NULL until a LIST needs it (routes.c) */
    uint64_t index_used_ms;   /* the last LIST */
    fx_timer_t index_timer;   /* drops the index MKV_INDEX_IDLE_MS after the last LIST */
    uint64_t replicas;
    uint64_t rep_seq; /* the last replica number given (mkv_replica_t.seq) */
    uint64_t last_put_ms;
    uint32_t last_put_ver;
    /* lease_table.c (the table) and leases.c (the timer) */
    struct fx_lease_table *leases;
    fx_timer_t lease_timer;
    /* inflight.c: in-flight puts and gets */
    struct fx_mplace *place;
    /* append.c: in-flight appends, replicas on targets (issue 16) */
    struct fx_mappend *append;
    /* dedup.c: the sweep of old PUT_DONE answers, and what all owners' answers hold */
    fx_timer_t dedup_timer;
    uint64_t dedup_acks, dedup_bytes;
    /* tombs.c: key -> the put id of its delete, while owners re-publish */
    fx_hmap_t *tombs;
    uint64_t tombs_since_ms;
    bool tombs_closed;
    char (*tombs_await)[FX_ID_MAX]; /* the owners earlier masters announced (REGISTER's peer_ids) */
    uint32_t n_tombs_await, cap_tombs_await;
    bool tombs_await_known, tombs_await_unknown; /* a list came; an owner from another master named none */
    /* forget.c: appended copies dropped, their appenders not told yet */
    struct mkv_forget *forget;
    /* lookup.c: DELETEs held while an owner re-publishes */
    struct lk_held *del_held;
    fx_timer_t del_timer;
    struct {
        FX_MASTER_KV_COUNTERS(FX_METRIC_FIELD)
    } c;
} mkv_t;

#define MKV_REPLY(p, h, body, bp)                                                    \
    do {                                                                             \
        if ((h)->req_id) (void)FX_CONN_REPLY((p)->conn, (h), body, (bp));             \
    } while (0)

#define MKV_DECODE(s, p, h, body, arena, kind, b)                                    \
    do {                                                                             \
        if (fx_body_##kind##_decode((body), (h)->body_len, (b), (arena)) != FLUXON_OK) { \
            mkv_fail((s), (p), (h), FLUXON_ERR_PROTOCOL, "body does not decode as " #kind); \
            return;                                                                  \
        }                                                                            \
    } while (0)

static inline void *mkv_arena_u64(fx_arena_t *a, size_t n) { return fx_arena_alloc(a, (n ? n : 1) * 8); }
static inline bool mkv_key_ok(fx_str_t k) { return k.len >= 1 && k.len <= MKV_MAX_KEY && k.p; }
static inline bool mkv_replica_alive(const mkv_replica_t *r)
{
    return r->node->alive && r->node->generation == r->generation;
}
static inline bool mkv_route_has_alive(const mkv_route_t *r)
{
    for (uint32_t i = 0; i < r->n_rep; i++)
        if (mkv_replica_alive(&r->rep[i])) return true;
    return false;
}
/* Restorable by reader (NULL: anyone): an alive replica in memory, or on reader's own disk
 * tier (issue 39: an owner reads only its own disk; FX_DISK_OFF_BIT, disk/disk.h). A key
 * only on another owner's disk is not there for reader: its put is not refused as existing
 * (the new version supersedes the disk copy), its EXISTS says no. */
static inline bool mkv_route_has_alive_for(const mkv_route_t *r, const master_node_t *reader)
{
    for (uint32_t i = 0; i < r->n_rep; i++)
        if (mkv_replica_alive(&r->rep[i]) && (!(r->rep[i].offset >> 63) || r->rep[i].node == reader)) return true;
    return false;
}
static inline int mkv_route_find(const mkv_route_t *r, const master_node_t *n, uint64_t offset)
{
    for (uint32_t i = 0; i < r->n_rep; i++)
        if (r->rep[i].node == n && r->rep[i].generation == n->generation && r->rep[i].offset == offset)
            return (int)i;
    return -1;
}
/* The allocator a range of n's segment at off came from (grants: either; pushes: alloc) */
static inline struct fx_offset_alloc *mkv_alloc_of(const master_node_t *n, uint64_t off)
{
    return off < n->lo_end && n->alloc_lo ? n->alloc_lo : n->alloc;
}
/* W2: n's segment takes no new placed or appended range now (kv.c) */
/* W2, or its own report still to come (q_report): ranges the earlier master placed there hold
 * values not reported yet, which a range handed out now would overwrite */
static inline bool mkv_quarantined(const master_node_t *n, uint64_t now_ms)
{
    return now_ms < n->quarantine_until_ms || (n->q_report && now_ms < n->rp_until_ms);
}
/* n's re-publication is still to come (bounded: rp_until_ms) */
static inline bool mkv_reporting(const master_node_t *n, uint64_t now_ms)
{
    return n->rp_pending && !n->forgotten && now_ms < n->rp_until_ms;
}
/* D1 check: the grant of n's that [off, off + len) overlaps (skip: an index to ignore, or
 * UINT32_MAX), or -1. A range the master hands out never overlaps a grant its owner holds. */
static inline int64_t mkv_grant_overlap(const master_node_t *n, uint64_t off, uint64_t len, uint32_t skip)
{
    for (uint32_t i = 0; i < n->n_grants; i++)
        if (i != skip && off < n->grant_offs[i] + n->grant_bytes && n->grant_offs[i] < off + len)
            return (int64_t)n->grant_ids[i];
    return -1;
}
/* the value [offset, offset + value_len) lies in the payload range of n's segment */
static inline bool mkv_range_ok(const master_node_t *n, uint64_t offset, uint64_t value_len)
{
    return offset >= FX_OFFSET_ALLOC_PAGE && offset <= n->segment_bytes && value_len <= n->segment_bytes - offset;
}

/* ---- reply.c ---- */
FX_INTERNAL void mkv_fail(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, int status, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The same, answered on conn (a request held past its peer's handler: DELETE, lookup.c). */
FX_INTERNAL void mkv_fail_conn(mkv_t *s, fx_conn_t *conn, const fx_frame_header_t *h, int status, const char *fmt,
                               ...) __attribute__((format(printf, 5, 6)));
/* The sender's registered owner, or NULL after answering INVALID_ARGUMENT. */
FX_INTERNAL master_node_t *mkv_need_node(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h);
/* Answers h with an already encoded OK body (nothing for a one-way request). */
FX_INTERNAL void mkv_send_body(master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body, size_t len);

/* The prologue every owner batch request (PUT_DONE, PUT_PLACE, GET_DONE, EVICT) shares:
 * the sender is a registered owner, every parallel array has exactly keys.n entries (an
 * array flagged optional may also be empty), the batch has min_keys..max_keys keys, every
 * key is 1..MKV_MAX_KEY bytes (and holds no NUL with no_nul), and n_cols u64 columns of
 * keys.n entries come from the arena (column c at cols + c * keys.n). Returns the node,
 * or NULL after answering (INVALID_ARGUMENT naming the array, key or count; NOMEM). */
typedef struct mkv_array {
    const char *name;
    uint32_t n;
    bool optional;
} mkv_array_t;
typedef struct mkv_batch_spec {
    const char *what; /* "put_done", ... : the start of every message */
    fx_strv_t keys;
    const mkv_array_t *arrays;
    size_t n_arrays;
    uint32_t min_keys, max_keys;
    bool no_nul;
    size_t n_cols;
} mkv_batch_spec_t;
FX_INTERNAL master_node_t *mkv_batch_open(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h,
                                          const mkv_batch_spec_t *spec, fx_arena_t *arena, uint64_t **cols_p);

/* ---- lease_table.c ---- */
typedef struct fx_lease_table fx_lease_table_t;
/* Returns FLUXON_OK and *t_p, or FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_lease_table_create(fx_lease_table_t **t_p);
FX_INTERNAL void fx_lease_table_destroy(fx_lease_table_t *t); /* NULL is a no-op */
/* Creates a lease (ids count up from 1) that expires at deadline_ms (fx_now_ms clock).
 * Returns FLUXON_OK and *id_p, or FLUXON_ERR_NOMEM (nothing changed). */
FX_INTERNAL int fx_lease_grant(fx_lease_table_t *t, uint64_t deadline_ms, uint64_t *id_p);
/* True when lease id exists and its deadline is after now_ms (id 0: false). */
FX_INTERNAL bool fx_lease_live(const fx_lease_table_t *t, uint64_t id, uint64_t now_ms);
/* True when lease id is still in the table (live, or expired but not yet collected). */
FX_INTERNAL bool fx_lease_exists(const fx_lease_table_t *t, uint64_t id);
/* Counts a route bound to (delta +1) or unbound from (delta -1) lease id; unknown ids
 * are ignored. A bind also records the route's key with the lease (issue 44 P5: its expiry
 * visits the lease's keys, never the whole route table). A key recorded more often than
 * the routes bound (routes replaced or deleted since) is compacted away: keep(arg, id, key)
 * says whether the key's route is still bound to id. FLUXON_ERR_NOMEM: the key could not
 * be recorded (the lease then falls back to a walk of the route table at its expiry). */
typedef bool (*fx_lease_keep_fn)(void *arg, uint64_t id, const char *key, size_t klen);
FX_INTERNAL int fx_lease_bind(fx_lease_table_t *t, uint64_t id, int delta, const char *key, size_t klen,
                              fx_lease_keep_fn keep, void *arg);
/* Removes every lease whose deadline is <= now_ms, calling expired(arg, id, keys, n_keys,
 * complete) for each with routes bound: keys are its recorded keys as records of {u32
 * length, bytes} back to back (n_keys of them; a key may repeat, its route may be gone or
 * bound to another lease now); complete false when some could not be recorded. Returns
 * how many leases expired. */
typedef void (*fx_lease_expired_fn)(void *arg, uint64_t id, const uint8_t *keys, size_t n_keys, bool complete);
FX_INTERNAL size_t fx_lease_expire(fx_lease_table_t *t, uint64_t now_ms, fx_lease_expired_fn expired, void *arg);
FX_INTERNAL size_t fx_lease_count(const fx_lease_table_t *t);

/* ---- routes.c: INVALIDATE batches ---- */
typedef struct fx_mkv_inv_ent {
    master_node_t *node;
    uint64_t offset, put_ms, put_ver;
    size_t koff; /* key bytes at keys + koff */
    uint32_t klen;
    bool sent;
} fx_mkv_inv_ent_t;

/* Zero-initialise ({0}); every add copies the key, so keys may be freed right after. */
typedef struct fx_mkv_inv {
    fx_mkv_inv_ent_t *e;
    size_t n, cap;
    char *keys;
    size_t kused, kcap;
    size_t lost; /* entries dropped for lack of memory (logged at flush) */
} fx_mkv_inv_t;

/* Queues: replica (node, offset) of key, version (put_ms, put_ver), is no longer routed. */
FX_INTERNAL void fx_mkv_inv_add(fx_mkv_inv_t *v, master_node_t *node, const char *key, size_t klen,
                                uint64_t offset, uint64_t put_ms, uint64_t put_ver);
/* Sends one INVALIDATE (req_id 0) per queued node that is connected (split only when a
 * body would pass ~1 MiB), counts them, and frees the queue (v is zeroed, reusable).
 * Callers flush BEFORE they answer the request that caused the invalidations. */
FX_INTERNAL void mkv_inv_flush(mkv_t *s, fx_mkv_inv_t *v);
/* As mkv_inv_flush, but each INVALIDATE to a connected owner is a request it answers once
 * it dropped those copies (W6: a DELETE is answered after that): cb(arg, ...) runs once per
 * request sent (FLUXON_ERR_TIMEOUT after timeout_ms). Returns how many were sent. */
FX_INTERNAL size_t mkv_inv_flush_acked(mkv_t *s, fx_mkv_inv_t *v, uint32_t timeout_ms, fx_rpc_cb cb, void *arg,
                                       size_t *held_p); /* *held_p: replicas of owners not connected (held) */
/* Invalidations of an owner that was not connected are held (n->inv_held, at most
 * RT_INV_HELD_MAX) instead of dropped: it may come back with the same generation, still
 * holding the copies (a lost connection, not a restart) — it must not go on serving them.
 * _send: it reconnected (before its REGISTER answer); _drop: a new generation, or freed. */
/* A new generation of n registers: its memory copies went with the old process, its disk
 * records did not (issue 39): only the held invalidations of disk offsets are kept for it. */
FX_INTERNAL void mkv_inv_held_keep_disk(master_node_t *n);
/* A new process of n registers: the one-way INVALIDATEs of its disk records sent lately
 * (within MKV_INV_RECENT_MS of the last one) are held for it too. The old process staged
 * their tombstones (flushed within ms) and may have been killed first: its disk would bring
 * those records back (session 38, fuzz_owner_disk). Sent again, a tombstone already written
 * finds nothing to kill (the owner checks key and version at the offset). */
FX_INTERNAL void mkv_inv_recent_hold(mkv_t *s, master_node_t *n);
FX_INTERNAL void mkv_inv_recent_drop(master_node_t *n);
FX_INTERNAL void mkv_inv_held_send(mkv_t *s, master_node_t *n);
FX_INTERNAL void mkv_inv_held_drop(master_node_t *n);

/* ---- routes.c: the route table ---- */
FX_INTERNAL int mkv_routes_create(mkv_t *s);
FX_INTERNAL void mkv_routes_destroy(mkv_t *s);
FX_INTERNAL size_t mkv_routes_count(const mkv_t *s);
/* The route of key, or NULL; a route whose lease expired is deleted here (v collects the
 * invalidations). */
FX_INTERNAL mkv_route_t *mkv_route_get(mkv_t *s, fx_str_t key, fx_mkv_inv_t *v);
/* The same with key's fx_hmap_hash h already computed (a batch hashes its keys and
 * prefetches their slots first: mkv_routes_prefetch). */
FX_INTERNAL mkv_route_t *mkv_route_get_h(mkv_t *s, fx_str_t key, uint64_t h, fx_mkv_inv_t *v);
FX_INTERNAL void mkv_routes_prefetch(const mkv_t *s, uint64_t h);
/* the route entry of hash h, its slot loaded (depth 1) or the entry's own data (2) */
FX_INTERNAL void mkv_routes_prefetch_deep(const mkv_t *s, uint64_t h, int depth);
/* A batch's route lookups, MKV_PREFETCH_BLOCK keys at a time: mkv_routes_prefetch_keys
 * hashes keys[0 .. n) (n <= MKV_PREFETCH_BLOCK) into kh[0 .. n) and starts loading their
 * slots, entries and routes, each level for all n keys before the next (the three misses
 * of a lookup overlap across the block instead of adding up; an empty key (NULL) is
 * hashed, not looked for). mkv_routes_prefetch_block does it for keys[i ..] when i is a
 * multiple of MKV_PREFETCH_BLOCK, nothing otherwise: a loop over i in order then finds key
 * i's hash at kh[i % MKV_PREFETCH_BLOCK] for mkv_route_get_h. */
#define MKV_PREFETCH_BLOCK 16u
FX_INTERNAL void mkv_routes_prefetch_keys(const mkv_t *s, const fx_str_t *keys, uint32_t n, uint64_t *kh);
static inline void mkv_routes_prefetch_block(const mkv_t *s, const fx_str_t *keys, uint32_t i, uint32_t n,
                                             uint64_t kh[MKV_PREFETCH_BLOCK])
{
    if (i % MKV_PREFETCH_BLOCK == 0 && i < n) mkv_routes_prefetch_keys(s, keys + i, FX_MIN(n - i, MKV_PREFETCH_BLOCK), kh);
}
/* Removes the route of key (r is its value) from the map and the prefix index, queues
 * INVALIDATEs for its replicas (if v) and frees r. key may be the map's own copy. */
FX_INTERNAL void mkv_route_remove(mkv_t *s, const char *key, size_t klen, mkv_route_t *r, fx_mkv_inv_t *v);
/* Installs a new route for key (h: its fx_hmap_hash, or 0 to compute it) with the single
 * replica rep and a fresh put id (returned in *pms / *pver); a route it replaces is
 * released (INVALIDATEs into v). Returns FLUXON_OK or FLUXON_ERR_NOMEM (nothing changed). */
FX_INTERNAL int mkv_route_install(mkv_t *s, fx_str_t key, uint64_t h, uint64_t value_len, uint64_t lease_id,
                                  uint32_t group_len, const mkv_replica_t *rep, uint64_t *pms, uint32_t *pver,
                                  fx_mkv_inv_t *v);
/* Adds replica (n, offset) to r, first forgetting replicas of dead processes when r is
 * full. Returns FLUXON_OK or FLUXON_ERR_NO_SPACE (MKV_MAX_REPLICAS current ones). */
FX_INTERNAL int mkv_route_add_replica(mkv_t *s, mkv_route_t *r, master_node_t *n, uint64_t offset);
/* Drops replica j of key's route r (its range is freed); the route goes with its last
 * replica (returns true then: r is freed). */
FX_INTERNAL bool mkv_route_drop_replica(mkv_t *s, fx_str_t key, mkv_route_t *r, uint32_t j);
/* W1 (issue 44): mkv_route_drop_replica for a drop the master decides (cold FIFO,
 * promotion): a replica with a range (range_bytes > 0) of its node's current process is
 * also invalidated there through v — a placed one is recorded by its owner (PLACED) and
 * would otherwise be re-published to the next master after the range held other bytes.
 * Returns whether it was invalidated (*gone_p: the route went with its last replica). */
FX_INTERNAL bool mkv_route_drop_replica_inv(mkv_t *s, fx_str_t key, mkv_route_t *r, uint32_t j, fx_mkv_inv_t *v,
                                            bool *gone_p);
/* Frees the range behind a replica (no-op for slot replicas and older generations). */
/* The range of ranged replica rp goes back to its node's allocator: after the reuse delay
 * when routed (a reader may be copying it), at once when it never was (routed false). */
FX_INTERNAL void fx_mkv_replica_free_ex(mkv_t *s, const mkv_replica_t *rp, bool routed);
static inline void fx_mkv_replica_free(mkv_t *s, const mkv_replica_t *rp) { fx_mkv_replica_free_ex(s, rp, true); }
/* ---- reuse.c (issue 38): freed ranges reusable only range_reuse_delay_ms later ---- */
/* read: a routed replica's range (a reader may be copying it): reusable after the delay */
FX_INTERNAL void mkv_range_release(mkv_t *s, master_node_t *n, uint64_t off, uint64_t bytes, bool read);
/* Frees into n->alloc the ranges whose delay is over (before an allocation in n). */
FX_INTERNAL void mkv_ranges_reclaim(master_node_t *n, uint64_t now_ms);
FX_INTERNAL uint64_t mkv_ranges_waiting_bytes(const master_node_t *n);
FX_INTERNAL bool fx_mplace_room_coming(fx_master_t *m, const master_node_t *src, uint64_t bytes, uint32_t count);
/* allocated bytes were just handed out in n: the bytes n should keep free or waiting so
 * that the next delay's worth of allocations finds room without waiting for the delay */
FX_INTERNAL uint64_t mkv_ranges_reserve(mkv_t *s, master_node_t *n, uint64_t allocated);
/* n's allocator is replaced or freed: the waiting ranges go with it. */
FX_INTERNAL void mkv_reuse_drop(master_node_t *n);
/* Deletes every route bound to a lease no longer in the table; returns how many. */
FX_INTERNAL size_t mkv_routes_drop_unleased(mkv_t *s, fx_mkv_inv_t *v);
/* Deletes the routes still bound to lease id among its recorded keys (lease_table.c's
 * records): the expiry of one lease costs its own routes (issue 44 P5). */
FX_INTERNAL size_t mkv_routes_drop_lease(mkv_t *s, uint64_t id, const uint8_t *keys, size_t n_keys, fx_mkv_inv_t *v);
/* n came back with a new generation: forgets its replicas of older generations; routes
 * left without a replica are deleted (no INVALIDATE: nobody holds them). */
FX_INTERNAL void mkv_routes_drop_generation(mkv_t *s, master_node_t *n, uint64_t old_generation);
/* Drops every replica on n, whatever its generation (n is forgotten: L1); O(routes). */
FX_INTERNAL void mkv_routes_drop_node(mkv_t *s, master_node_t *n);
/* Up to cap keys with prefix, after `after` (NULL: from the start), in order, into
 * keys[] (views of the route map's own copies: valid until the map changes); *n_p gets
 * their number. The first LIST (or the first after the index was dropped) builds the
 * prefix index from the route map: O(routes log routes). Returns FLUXON_OK or
 * FLUXON_ERR_NOMEM (the index could not be built; nothing listed). */
FX_INTERNAL int mkv_routes_list(mkv_t *s, fx_str_t prefix, fx_str_t after, fx_str_t *keys, uint32_t cap,
                                uint32_t *n_p);
/* Drops the prefix index when no LIST came for MKV_INDEX_IDLE_MS before now_ms (the
 * index timer calls it). Returns true when there is no index (left). */
FX_INTERNAL bool mkv_routes_index_sweep(mkv_t *s, uint64_t now_ms);
/* Keys in the prefix index: 0 while it is not built. */
FX_INTERNAL size_t mkv_routes_index_keys(const mkv_t *s);

/* ---- routes.c: re-published values (republish.c) ---- */
/* The put-id generator resumes above (put_ms, put_ver) (a version an owner reported). */
FX_INTERNAL void mkv_put_id_seen(mkv_t *s, uint64_t put_ms, uint32_t put_ver);
/* Takes the next put id (above every id issued or seen): a delete's tombstone (tombs.c). */
FX_INTERNAL void mkv_put_id_next(mkv_t *s, uint64_t *put_ms, uint32_t *put_ver);
/* Every put id from now on is above (put_ms, any put_ver): a new leader's floor (W6). */
FX_INTERNAL void mkv_put_id_floor(mkv_t *s, uint64_t put_ms);
/* An owner reports replica rep of key at version (put_ms, put_ver): no route yet: one is
 * made with that version (no lease); the same version: rep joins its replicas; an older
 * route: replaced by this version (its replicas invalidated through v); a newer route:
 * FLUXON_ERR_STALE, nothing changed; this very replica is routed already:
 * FLUXON_ERR_KEY_EXISTS, nothing changed. Returns FLUXON_OK, FLUXON_ERR_STALE, FLUXON_ERR_NO_SPACE
 * (MKV_MAX_REPLICAS current copies), FLUXON_ERR_INVALID_ARGUMENT (the same version with
 * another value_len) or FLUXON_ERR_NOMEM. *replaced_p: an older route was replaced. */
FX_INTERNAL int mkv_route_restore(mkv_t *s, fx_str_t key, uint64_t value_len, uint32_t group_len, uint64_t put_ms,
                                  uint32_t put_ver, const mkv_replica_t *rep, fx_mkv_inv_t *v, bool *replaced_p);

/* ---- tombs.c (issue 17, W6): the deletes a new master remembers while owners re-publish ---- */
#define MKV_TOMBS_MAX (1u << 18)
/* This master starts serving (created, or elected): the re-publication window opens. */
FX_INTERNAL void mkv_tombs_serving(mkv_t *s);
/* n registered (kv.c): one from another master names the owners that master announced. */
FX_INTERNAL void mkv_tombs_registered(mkv_t *s, master_node_t *n, fx_strv_t peer_ids, fx_u64v_t peer_gens);
/* Is the window open? It closes for good (the tombstones go) when no owner is re-publishing
 * (rp_pending) and either every owner the earlier masters announced is back and done, or
 * dead_owner_grace_ms has passed. */
FX_INTERNAL bool mkv_tombs_open(mkv_t *s, uint64_t now_ms);
/* An owner known to hold values not reported yet: one re-publishing, else one announced and
 * not back (its id), else NULL. */
FX_INTERNAL const char *mkv_tombs_awaited(mkv_t *s);
/* An owner connected here that is still re-publishing (NULL: none). */
FX_INTERNAL const master_node_t *mkv_tombs_reporting(mkv_t *s);
/* A DELETE of key was served: while the window is open, its tombstone (a put id taken now).
 * FLUXON_OK (recorded, or the window is closed), FLUXON_ERR_NO_SPACE (MKV_TOMBS_MAX kept),
 * FLUXON_ERR_NOMEM. */
FX_INTERNAL int mkv_tombs_put(mkv_t *s, fx_str_t key);
/* routes.c: key's route (version put_ms/put_ver) was removed; remembered while an owner is
 * awaited, so that its report of an older version answers STALE. */
FX_INTERNAL void mkv_tombs_gone(mkv_t *s, fx_str_t key, uint64_t put_ms, uint32_t put_ver);
/* A report of key at (put_ms, put_ver): put before a delete this window remembers? True
 * when below the delete's put id, or not the version this master routes for key now (one
 * put under the earlier master, whose clock ran ahead of this one's: a put here after the
 * delete is routed at its own version). */
FX_INTERNAL bool mkv_tombs_older(mkv_t *s, fx_str_t key, uint64_t put_ms, uint32_t put_ver, fx_mkv_inv_t *v);
FX_INTERNAL size_t mkv_tombs_count(const mkv_t *s);
FX_INTERNAL void mkv_tombs_fini(mkv_t *s);

/* ---- forget.c ---- */
/* Queues, for appender `by`, that its copy in n's range at offset (n's generation) went;
 * sent by fx_mkv_forget_flush, which master.c calls before and after every request. */
FX_INTERNAL void mkv_forget_add(mkv_t *s, master_node_t *by, master_node_t *n, uint64_t generation, uint64_t offset);
FX_INTERNAL void fx_mkv_forget_flush(mkv_t *s);
FX_INTERNAL void mkv_forget_fini(mkv_t *s);

/* ---- republish.c ---- */
FX_INTERNAL void fx_mkv_republish(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena);
/* Tells target (PLACED) which keys of a placed batch it now holds in ranges (keys[i] with
 * kept[i], at offsets[i], version (pms[i], pver[i])): one-way without cb, else a request
 * the target answers once it recorded them (cb runs once, within timeout_ms). Returns true
 * when sent (cb pending); false when nothing went (no key kept, the target not connected,
 * no memory): cb is not called then. */
FX_INTERNAL bool fx_mkv_placed_notify(mkv_t *s, master_node_t *target, const fx_body_put_done_t *b,
                                      const uint8_t *kept, const uint64_t *pms, const uint64_t *pver,
                                      uint32_t timeout_ms, fx_rpc_cb cb, void *arg);

/* ---- place.c: placement policy ---- */
/* Picks the target of a batch of `count` values of `bytes` each for requester req and
 * allocates their ranges (offs[count]) in its segment: req itself for local-first (offs
 * untouched), else a random owner of `preferred` that fits, then any other that fits;
 * write_through leaves req out. NULL when none fits (the caller falls back to req).
 * *rng is the caller's xorshift state. */
FX_INTERNAL master_node_t *fx_mplace_pick(fx_master_t *m, uint64_t *rng, master_node_t *req, uint64_t flags,
                                          fx_str_t preferred, uint64_t bytes, uint32_t count, uint64_t *offs);

/* Replica targets (issue 16): an alive owner other than src whose node role is in the
 * master's replica_target_roles and that fits `count` ranges of `bytes`, the one `affinity`
 * names first; allocates offs[count]. NULL: none has room (*any_p: whether any such owner
 * is alive). */
FX_INTERNAL master_node_t *fx_mplace_pick_target(fx_master_t *m, uint64_t affinity, const master_node_t *src,
                                                 uint64_t bytes, uint32_t count, uint64_t *offs, bool *any_p);

/* ---- inflight.c ---- */
/* An in-flight put (PutStart of §7): the batch PUT_PLACE accepted, waiting for its
 * PUT_DONE or PUT_REVOKE, or for its TTL (inflight_ttl_ms) to pass. Never a route. */
typedef struct mkv_inflight {
    uint64_t token;
    master_node_t *requester, *target; /* target == requester: the requester's own slots */
    uint64_t req_generation, tgt_generation;
    uint64_t value_len, range_bytes;   /* range_bytes: per key, 0 when target == requester */
    uint64_t deadline_ms;              /* fx_now_ms clock */
    uint32_t n;                        /* accepted keys, in batch order */
    bool keys_released;                /* the requester died: its keys no longer block puts */
    char **keys;
    uint32_t *klens;
    uint64_t *offsets;                 /* in the target's segment (0 when target == requester) */
    struct mkv_inflight *prev, *next;  /* FIFO by deadline (the TTL is one constant) */
} mkv_inflight_t;

FX_INTERNAL int fx_mplace_create(mkv_t *s);
FX_INTERNAL void fx_mplace_destroy(mkv_t *s);
FX_INTERNAL void fx_mplace_put_place(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                     fx_arena_t *arena);
FX_INTERNAL void fx_mplace_put_revoke(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                      fx_arena_t *arena);
/* PUT_DONE of a placed batch: the in-flight record of token if it belongs to n and
 * matches keys/offsets/value_len (still in the in-flight tables: fx_mplace_detach takes
 * it out once the whole request is known valid). NULL: *status_p = FLUXON_ERR_STALE
 * (unknown, expired or revoked token, or the target died: the record is dropped, every
 * key is STALE) or FLUXON_ERR_INVALID_ARGUMENT (*why_p says what does not match;
 * nothing changed). */
FX_INTERNAL mkv_inflight_t *fx_mplace_find(mkv_t *s, master_node_t *n, const fx_body_put_done_t *b, int *status_p,
                                           const char **why_p);
/* Out of the in-flight tables; its ranges stay allocated (fx_mplace_release). */
FX_INTERNAL void fx_mplace_detach(mkv_t *s, mkv_inflight_t *rec);
/* Frees a taken record; the range of key i is freed unless kept[i] (a route owns it now). */
FX_INTERNAL void fx_mplace_release(mkv_t *s, mkv_inflight_t *rec, const uint8_t *kept);
/* In-flight gets (GetStart/GetDone): FX_GET_DURABLE while fewer than 2 other owners are
 * making a durable replica of key, else FX_GET_TEMPORARY; get_end forgets req's record. */
FX_INTERNAL unsigned fx_mplace_get_begin(mkv_t *s, fx_str_t key, master_node_t *req);
FX_INTERNAL void fx_mplace_get_end(mkv_t *s, fx_str_t key, master_node_t *req);
/* Fills the in-flight gauges (inflight_puts, inflight_put_keys, inflight_gets). */
FX_INTERNAL void fx_mplace_metrics(mkv_t *s, fx_mmetrics_t *mm);
/* Owner n died: its in-flight puts stop blocking their keys at once (their ranges stay
 * allocated until the TTL: a partitioned writer may still be pushing) and its durable
 * get records go. */
FX_INTERNAL void fx_mplace_node_dead(mkv_t *s, master_node_t *n);

/* ---- dedup.c ---- */
typedef struct fx_mkv_dedup fx_mkv_dedup_t; /* an owner's (master_node_t.kv) */
enum { MKV_DEDUP_NEW = 0, MKV_DEDUP_ANSWERED = 1, MKV_DEDUP_FORGOTTEN = 2 };
/* Creates n's state (n->kv) or, for a new generation, empties it. FLUXON_ERR_NOMEM leaves
 * n as it was. */
FX_INTERNAL int fx_mkv_dedup_reset(mkv_t *s, master_node_t *n);
FX_INTERNAL void fx_mkv_dedup_free(mkv_t *s, master_node_t *n); /* s may be NULL (after fini) */
/* What to do with an attempt of batch_id from n: MKV_DEDUP_NEW (apply it),
 * MKV_DEDUP_ANSWERED (send *body_p, *len_p again: the first answer; its time is refreshed)
 * or MKV_DEDUP_FORGOTTEN (its answer may have been dropped: refuse it, never apply). */
FX_INTERNAL int fx_mkv_dedup_check(mkv_t *s, master_node_t *n, uint64_t batch_id, const uint8_t **body_p,
                                   size_t *len_p);
FX_INTERNAL uint64_t fx_mkv_dedup_watermark(const master_node_t *n);
/* Keeps the encoded answer of batch_id (takes body on success: returns true). */
FX_INTERNAL bool fx_mkv_dedup_remember(mkv_t *s, master_node_t *n, uint64_t batch_id, uint8_t *body, size_t len);
FX_INTERNAL void fx_mkv_dedup_stop(mkv_t *s); /* disarms the sweep timer */

/* ---- publish.c ---- */
FX_INTERNAL void fx_mkv_put_done(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena);

/* ---- lookup.c ---- */
FX_INTERNAL void fx_mkv_lookup(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena);
FX_INTERNAL void fx_mkv_get_done(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena);
FX_INTERNAL void fx_mkv_evict(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena);
/* The DELETEs held for a re-publishing owner are answered UNAVAILABLE (the KV state goes). */
FX_INTERNAL void fx_mkv_deletes_held_drop(mkv_t *s);
FX_INTERNAL void fx_mkv_delete(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena);
FX_INTERNAL void fx_mkv_exists(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena);
FX_INTERNAL void fx_mkv_list(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                             fx_arena_t *arena);

/* ---- leases.c ---- */
FX_INTERNAL void fx_mkv_lease_grant(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                    fx_arena_t *arena);
FX_INTERNAL void fx_mkv_leases_stop(mkv_t *s); /* disarms the lease timer */

/* ---- kv.c ---- */
/* ---- quarantine.c (W2) ---- */
/* range_quarantine_ms, or its computed default */
FX_INTERNAL uint32_t fx_mkv_quarantine_ms(const fx_master_t *m);
/* n registered as a new process or with a new master: its quarantine starts when it had an
 * earlier master (n->reg_prev_master_generation), awaiting the writers it names. */
FX_INTERNAL void fx_mq_start(mkv_t *s, master_node_t *n, fx_strv_t peer_ids, fx_u64v_t peer_gens);
/* Records the owners n has unsettled pushes to; true when the list changed. */
FX_INTERNAL bool fx_mq_unsettled_set(master_node_t *n, fx_strv_t v);
/* Ends the quarantines whose writers are all known done. */
FX_INTERNAL void fx_mq_review(fx_master_t *m);
/* GRANT to n while in quarantine: answered BUSY (counted), true. */
FX_INTERNAL bool fx_mq_grant_refused(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, master_node_t *n);
FX_INTERNAL void fx_mq_node_free(master_node_t *n);
FX_INTERNAL void fx_mkv_grant(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena);
/* GRANT_RETURN: idle grants back to the owner's segment allocator (issue 15) */
FX_INTERNAL void fx_mkv_grant_return(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                     fx_arena_t *arena);

/* ---- append.c: replica tasks and write-backs to replica targets (issue 16) ---- */
FX_INTERNAL int fx_mappend_create(mkv_t *s);
FX_INTERNAL void fx_mappend_destroy(mkv_t *s);
FX_INTERNAL void fx_mappend_start(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena);
FX_INTERNAL void fx_mappend_done(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena);
/* LOOKUP served a hit for req from src: counted by tier (local / GPU owner / CPU owner) */
FX_INTERNAL void fx_mappend_count_hit(mkv_t *s, const master_node_t *req, const master_node_t *src);
/* EVICT dropped a replica of key; r: its route, NULL when the route went with it (dropped),
 * else demoted when a replica on a target is left */
FX_INTERNAL void fx_mappend_count_evict(mkv_t *s, fx_str_t key, mkv_route_t *r);
FX_INTERNAL void fx_mappend_touch(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena);
FX_INTERNAL bool fx_mappend_keeps_copy(const mkv_t *s, const master_node_t *src);
FX_INTERNAL void fx_mappend_ranged(mkv_t *s, master_node_t *n, fx_str_t key, uint64_t off, uint64_t put_ms,
                                   uint64_t put_ver, fx_mkv_inv_t *inv);
FX_INTERNAL void fx_mappend_metrics(mkv_t *s, fx_mmetrics_t *mm);
/* GET_DONE made a durable copy of key (route r) on req from src's replica at src_off: a
 * copy on a replica target goes (exclusive levels) */
FX_INTERNAL void fx_mappend_promoted(mkv_t *s, fx_str_t key, mkv_route_t *r, const master_node_t *req,
                                     master_node_t *src, uint64_t src_off, fx_mkv_inv_t *inv);

#endif
