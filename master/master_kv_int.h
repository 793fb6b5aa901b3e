/* master_kv_int.h — the master's KV state shared by master_kv.c (grants, routes,
 * publication, lookups, deletes, leases) and master_place.c (placement, in-flight puts
 * and gets with their TTL, PUT_PLACE / PUT_REVOKE). Reactor thread only, no locks. */
#ifndef FX_MASTER_KV_INT_H
#define FX_MASTER_KV_INT_H

#include "hmap.h"
#include "master_kv_aux.h"
#include "offset_alloc.h"
#include "prefix_index.h"

#define MKV_MAX_REPLICAS 4u
#define MKV_MAX_KEY 1024u
#define MKV_DEDUP_ACKS 1024u
#define MKV_MAX_GRANTS 64u
#define MKV_LEASE_TICK_MS 20u
#define MKV_LEASE_TTL_MAX 86400000ull
#define MKV_LIST_DEFAULT 1000u
#define MKV_LIST_MAX 10000u
#define MKV_ST(s) ((uint64_t)(int64_t)(s))
/* printf arguments for a key view, truncated to 80 bytes */
#define MKV_KEYF(s) (int)FX_MIN((s).len, 80u), ((s).p ? (s).p : "")

typedef struct mkv_replica {
    master_node_t *node;
    uint64_t generation, offset;
    uint64_t range_bytes; /* > 0: a range this master allocated in node's segment (a placed
                           * put); freed when the replica goes. 0: a slot of the owner's grants */
} mkv_replica_t;

typedef struct mkv_route {
    uint64_t value_len, put_ms, lease_id;
    uint32_t put_ver, group_len, n_rep;
    mkv_replica_t rep[MKV_MAX_REPLICAS];
} mkv_route_t;

typedef struct mkv_ack {
    uint64_t batch_id;
    uint8_t *body; /* encoded put_done_ack body; NULL = ring slot empty */
    size_t len;
} mkv_ack_t;

/* per-node state (master_node_t.kv): acks of the last MKV_DEDUP_ACKS batches (T1) */
typedef struct mkv_node {
    uint64_t generation; /* the generation the state below belongs to */
    fx_hmap_t *acks;     /* batch_id (8 bytes) -> mkv_ack_t in ring */
    uint32_t ring_next;
    mkv_ack_t ring[MKV_DEDUP_ACKS];
} mkv_node_t;

#define MKV_COUNTERS(X)                                                                  \
    X(put_done_batches) X(put_dedup) X(puts) X(put_converged) X(put_rejected) X(lookups)      \
    X(lookup_hits) X(get_done_replicas) X(get_done_stale) X(deletes) X(invalidations_sent)   \
    X(invalidate_msgs) X(grants) X(leases_granted) X(leases_expired) X(lease_routes_expired) \
    X(generation_routes_dropped) X(error_replies) X(evict_batches) X(evicted_replicas) X(evict_stale)  \
    X(evict_routes_deleted) X(places) X(place_remote) X(place_local) X(place_rejected) X(place_fallback) \
    X(revokes) X(inflight_expired) X(put_done_stale_token) X(get_durable) X(get_temporary) X(get_reuse)

typedef struct mkv {
    fx_master_t *m;
    fx_hmap_t *routes; /* key -> mkv_route_t */
    fx_prefix_index_t *index;
    fx_lease_table_t *leases;
    fx_timer_t lease_timer;
    uint64_t last_put_ms;
    uint32_t last_put_ver;
    uint64_t replicas;
    struct fx_mplace *place; /* master_place.c: in-flight puts and gets, placement */
    struct {
#define MKV_FIELD(name) uint64_t name;
        MKV_COUNTERS(MKV_FIELD)
#undef MKV_FIELD
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

/* ---- master_place.c ---- */
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
/* Frees the range behind a replica (no-op for slot replicas and older generations). */
FX_INTERNAL void fx_mkv_replica_free(mkv_t *s, const mkv_replica_t *rp);
/* In-flight gets (GetStart/GetDone): FX_GET_DURABLE while fewer than 2 other owners are
 * making a durable replica of key, else FX_GET_TEMPORARY; get_end forgets req's record. */
FX_INTERNAL unsigned fx_mplace_get_begin(mkv_t *s, fx_str_t key, master_node_t *req);
FX_INTERNAL void fx_mplace_get_end(mkv_t *s, fx_str_t key, master_node_t *req);
FX_INTERNAL size_t fx_mplace_stats_json(mkv_t *s, char *buf, size_t cap);
/* Owner n died: its in-flight puts stop blocking their keys at once (their ranges stay
 * allocated until the TTL: a partitioned writer may still be pushing) and its durable
 * get records go. */
FX_INTERNAL void fx_mplace_node_dead(mkv_t *s, master_node_t *n);

FX_INTERNAL void mkv_fail(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, int status, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
FX_INTERNAL master_node_t *mkv_need_node(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h);
/* The route of key, or NULL; a route whose lease expired is deleted here (v collects the
 * invalidations). */
FX_INTERNAL mkv_route_t *mkv_route_get(mkv_t *s, fx_str_t key, fx_mkv_inv_t *v);
FX_INTERNAL void mkv_route_remove(mkv_t *s, const char *key, size_t klen, mkv_route_t *r, fx_mkv_inv_t *v);
FX_INTERNAL void mkv_inv_flush(mkv_t *s, fx_mkv_inv_t *v);

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
static inline int mkv_route_find(const mkv_route_t *r, const master_node_t *n, uint64_t offset)
{
    for (uint32_t i = 0; i < r->n_rep; i++)
        if (r->rep[i].node == n && r->rep[i].generation == n->generation && r->rep[i].offset == offset)
            return (int)i;
    return -1;
}

#endif
