/* msg.h — the ONE message catalog of the control plane (an X-macro list) and the frame
 * format. Names, numeric ids, body structs, encoders and bounds-checked decoders are all
 * generated from it (codec.c), so they cannot drift. Frames are little-endian:
 *   u32 magic 'FLX1' | u16 type | u16 flags | u32 body_len | u32 status | u64 req_id
 * A response carries its request's type and req_id, FX_FLAG_RESPONSE, and a status in
 * the fourth field (the "reserved" word of §4); an error response's body is `error`. */
#ifndef FX_MSG_H
#define FX_MSG_H

#include "fx.h"

#define FX_FRAME_MAGIC 0x31584c46u /* "FLX1" little-endian */
#define FX_FRAME_HEADER_BYTES 24u
#define FX_PROTOCOL_VERSION 11u /* 3: APPEND_START/APPEND_DONE (issue 16); 4: REPUBLISH/PLACED (issue 17);
                                * 5: owners' peers and unsettled pushes (issue 44 W2), LOOKUP's
                                * reuse_ms (issue 38); 6: LOOKUP's src_roles (issue 38); 7: LOOKUP's
                                * modes may carry FX_GET_SRC_KEPT (issue 38); 8: REGISTER's
                                * republishing (a new master's deletes, master/tombs.c); 9: a placed
                                * put's PLACED is a request its target answers (master/publish.c),
                                * APPEND_START's answer carries reuse_ms and src_kept, FORGET
                                * (owner/wbmap.c); 10: CLUSTER_INFO's addresses, rkeys and
                                * bases (owners map the segments of this host's at once,
                                * owner/peers.c); 11: TOUCH (an owner's first
                                * read-backs of its written-back copies, owner/fetch_touch.c). The codec
                                * refuses a body with a field more or less, so nodes of two
                                * versions are refused at HELLO rather than cut at their first
                                * LOOKUP answer */
#define FX_FLAG_RESPONSE 0x0001u
/* put flags (put_start.flags, put_done.flags) */
#define FX_PUT_REJECT_IF_INFLIGHT 0x1ull
#define FX_PUT_REJECT_IF_EXIST 0x2ull
#define FX_PUT_WRITE_THROUGH 0x4ull
#define FX_PUT_MAKE_REPLICA 0x8ull
#define FX_PUT_PLACE 0x10ull       /* the master places the value (plain put's default) */
#define FX_PUT_LOCAL_FIRST 0x20ull /* placement: the requester's own owner when it fits */
#define FX_PUT_PIN_REFRESH 0x40ull /* issue 42: a hit restarts the pin's TTL (owner-local; the master ignores it) */
/* get modes (lookup_ack.modes, get_done.modes), ARCHITECTURE §7 */
#define FX_GET_DURABLE 1u   /* copy here and register it as a replica (at most 2 at once per key) */
#define FX_GET_TEMPORARY 2u /* copy here for the readers of this fetch only (holders), no replica */
#define FX_GET_REUSE 3u     /* the requester already holds a replica at that offset: no transfer */
#define FX_GET_ABANDON 4u   /* get_done only: a durable copy was not made (fetch failed, no room) */
/* lookup_ack only, or'ed into FX_GET_DURABLE: the source is a replica target (a CPU owner)
 * that keeps its copy after this one (target_copy_after_fetch "keep"), so the copy needs no
 * write-back when it gets cold; the master moves that copy to its target's cold FIFO tail
 * when the requester evicts this version (issue 38). GET_DONE echoes the mode without it. */
#define FX_GET_SRC_KEPT 0x100u
/* A request with req_id 0 is one-way: no response is sent. */

typedef struct fx_frame_header {
    uint32_t magic;
    uint16_t type;
    uint16_t flags;
    uint32_t body_len;
    int32_t status; /* responses only; 0 in requests */
    uint64_t req_id;
} fx_frame_header_t;

/* A borrowed byte string: a view into a frame (decode) or into caller memory (encode). */
typedef struct fx_str {
    const char *p;
    uint32_t len;
} fx_str_t;

/* An array of u64: on decode it points into the decoder's arena (aligned copy). */
typedef struct fx_u64v {
    const uint64_t *v;
    uint32_t n;
} fx_u64v_t;

/* An array of strings: elements are views into the frame, the array in the arena. */
typedef struct fx_strv {
    const fx_str_t *v;
    uint32_t n;
} fx_strv_t;

/* ---- bodies: F(kind, name); kinds U8 U16 U32 U64 I32 I64 STR U64V STRV ---- */
#define FX_BODY_empty(F)
#define FX_BODY_error(F) F(STR, message)
#define FX_BODY_hello(F)                                                              \
    F(U32, proto_version) F(STR, cluster_id) F(U8, role) F(STR, node_id)                \
    F(U64, generation) F(STR, auth)
#define FX_BODY_hello_ack(F)                                                          \
    F(U32, proto_version) F(STR, node_id) F(U64, generation) F(U64, segment_bytes)      \
    F(STR, ucx_address) F(U32, handle_ttl_ms)
#define FX_BODY_register(F)                                                           \
    F(STR, node_id) F(U64, generation) F(U8, node_role) F(U64, segment_bytes)           \
    F(U64, segment_base) F(STR, ucx_address) F(STR, rkey) F(U64, grant_bytes)          \
    F(U64V, grant_ids) F(U64V, grant_offsets) /* grants held: a restarted master re-learns them */ \
    F(STR, sub_cluster) F(U64, prev_master_generation)                                  \
    F(STRV, peer_ids) F(U64V, peer_generations) F(STRV, unsettled) F(U8, republishing)
/* prev_master_generation: the master this owner process was last registered with (0: none).
 * A master that (re)builds the owner's allocator while it is not 0 quarantines new ranges
 * in its segment: pushes the old master started may still land there (W2). peer_ids /
 * peer_generations: the other owners that master announced (CLUSTER_INFO), the writers
 * of those pushes; the quarantine ends early once each is back with that generation and
 * has none to this owner unsettled. unsettled: the owners this one has pushes to that may
 * still land (started, not retired by UCX); also sent with every heartbeat. republishing:
 * this process re-publishes values it holds whatever the master (its disk tier's records at
 * its first registration): the master counts it among the owners still to report until
 * its last REPUBLISH batch, as one registered from another master (master/tombs.c). */
/* forgotten: this master forgot the owner's generation (dead longer than dead_owner_grace_ms,
 * L1): it missed deletions and overwrites meanwhile and drops every value it holds */
#define FX_BODY_register_ack(F) F(U64, master_generation) F(U32, heartbeat_timeout_ms) F(U8, forgotten) \
    F(U32, dead_owner_grace_ms)
#define FX_BODY_heartbeat(F) F(U64, generation) F(STRV, unsettled)
#define FX_BODY_ping(F) F(U8, to_master) F(U64, t_ns)
#define FX_BODY_nodes(F)                                                              \
    F(STRV, node_ids) F(U64V, roles) F(U64V, generations) F(U64V, alive)                \
    F(U64V, segment_bytes) F(STRV, sub_clusters) F(U64V, placed_bytes)
#define FX_BODY_json(F) F(STR, json)

/* ---- KV and hostless bodies (issues 3-5). Arrays of one batch are parallel (SoA):
 * element i of every U64V/STRV field describes key i. Statuses travel as u64 holding
 * the (negative) int status cast through int64_t. ---- */
#define FX_BODY_grant(F) F(U64, slot_size) F(U32, count)
#define FX_BODY_grant_ack(F) F(U64V, grant_ids) F(U64V, offsets)
/* owner -> master: publish a batch of local values (ONE message per plan, G8/A2).
 * batch_id is unique per owner generation; a retry reuses it (T1). */
#define FX_BODY_put_done(F)                                                           \
    F(U64, batch_id) F(U64, value_len) F(U64, flags) F(U64, lease_id) F(STRV, keys)      \
    F(U64V, offsets) F(U64V, group_lens) F(U64, put_token)
/* put_token != 0: the batch was placed by PUT_PLACE; the offsets are the ones that answer
 * gave (in the target's segment, or the sender's own slots when it was the target). */
/* per key: status, put_id = (put_ms, put_ver) */
#define FX_BODY_put_done_ack(F) F(U64V, statuses) F(U64V, put_ms) F(U64V, put_ver)
/* owner -> master: where are these keys (BatchGetStart, G8) */
#define FX_BODY_lookup(F) F(STRV, keys)
/* per key: status, source index into the src_* arrays, offset, value_len, put_id,
 * group id and group length (A1); per source owner: id, generation, UCX worker address,
 * packed rkey and segment base address (for RMA); per key the get mode and the source
 * replica's number (src_seqs, W3: never reused; GET_DONE echoes it). */
#define FX_BODY_lookup_ack(F)                                                         \
    F(U64V, statuses) F(U64V, src) F(U64V, offsets) F(U64V, value_lens) F(U64V, put_ms)  \
    F(U64V, put_ver) F(STRV, src_node_ids) F(U64V, src_generations)                     \
    F(STRV, src_addresses) F(STRV, src_rkeys) F(U64V, src_bases) F(U64V, modes) F(U64V, src_seqs) \
    F(U64V, reuse_ms) F(U64V, src_roles)
/* src_roles (per source, protocol 6): the source owner's node_role (FX_NODE_GPU_OWNER,
 * FX_NODE_REMOTE_CACHE), which the reader counts its fetches by. */
/* reuse_ms (issue 38; 0: wait): the source's range is not handed out again before
 * this long after it is freed, so a copy that ended 1 ms before reuse_ms from the LOOKUP (the
 * same master answering) holds the version named: its readers need not wait for GET_DONE. */
/* owner -> master: durable replicas now held here (GetDone, batch), copied from the
 * source replica (src node, generation, src_offsets, and src_seqs: the number LOOKUP gave
 * it; empty: not checked). The master accepts a key only if that very source replica
 * still exists: it was then intact for the whole copy (replicas are removed before their
 * slots can be reused, and one added again is another number), so the copy is
 * byte-exact (D1). */
#define FX_BODY_get_done(F)                                                           \
    F(STRV, keys) F(U64V, offsets) F(U64V, put_ms) F(U64V, put_ver) F(U64V, value_lens)  \
    F(STR, src_node_id) F(U64, src_generation) F(U64V, src_offsets) F(U64V, modes) F(U64V, src_seqs)
/* owner -> master: place a batch (PutStart of §7). The master applies the reject flags
 * against routes and its in-flight puts, picks ONE target owner for the batch (placement
 * policy in master/place.c), allocates a range per accepted key in the target's segment
 * and records an in-flight put (put_token) that expires after inflight_ttl_ms. Target ==
 * sender: offsets are 0 and the sender uses its own slots. */
#define FX_BODY_put_place(F)                                                          \
    F(STRV, keys) F(U64, value_len) F(U64, flags) F(U64V, group_lens) F(STR, preferred_sub_cluster)
#define FX_BODY_put_place_ack(F)                                                      \
    F(U64, put_token) F(STR, target_node_id) F(U64, target_generation) F(STR, target_address) \
    F(STR, target_rkey) F(U64, target_base) F(U64V, statuses) F(U64V, offsets) F(U32, ttl_ms) \
    F(U32, reuse_ms) F(U8, target_flags)
/* ttl_ms: the in-flight TTL; the sender must finish writing the ranges well within it
 * (counted from when it sent PUT_PLACE), or not write them at all. APPEND_START's answer
 * only (0 otherwise): reuse_ms, the master's range_reuse_delay_ms (> 0: the appender may
 * keep a record of its copies and read them back without a LOOKUP, owner/wbmap.c; the
 * master then tells it with FORGET when one goes); target_flags: FX_TARGET_KEEPS (the
 * target keeps its copy when an owner fetches it back, FX_GET_SRC_KEPT), FX_TARGET_CPU (the
 * target is a remote_cache owner) */
#define FX_TARGET_KEEPS 1u
#define FX_TARGET_CPU 2u
/* abandoned (W4): the push into the placement's ranges was started and failed or timed out:
 * UCX may still deliver its bytes, so the ranges stay allocated until the TTL (the keys are
 * released at once); 0: nothing was written, the ranges go at once */
#define FX_BODY_put_revoke(F) F(U64, put_token) F(U8, abandoned)
/* external -> owner: a whole plain put in one request (small values): the owner stages
 * the bytes, places and publishes them, and answers once published (empty body). */
#define FX_BODY_put_inline(F)                                                         \
    F(STR, key) F(STR, value) F(U64, flags) F(U64, lease_id) F(STR, preferred_sub_cluster) \
    F(U32, timeout_ms) F(U32, pin_ttl_ms)
#define FX_BODY_statuses(F) F(U64V, statuses)
#define FX_BODY_key(F) F(STR, key)
/* master -> owner (one-way, req_id 0): these replicas on you are no longer routed */
#define FX_BODY_invalidate(F) F(STRV, keys) F(U64V, offsets) F(U64V, put_ms) F(U64V, put_ver)
/* owner -> master: capacity eviction (issue 7): drop exactly these replicas of the
 * sender, (node, offset, put_id) per key; the route goes with its last replica. Answer:
 * statuses, per key OK or STALE (no such route/version/replica: nothing changed). */
/* disk_offsets (issue 39): empty, or per key 0 (drop the replica) or a disk offset
 * (FX_DISK_OFF_BIT set: the replica stays routed, moved to the sender's disk tier there). */
#define FX_BODY_evict(F) F(STRV, keys) F(U64V, offsets) F(U64V, put_ms) F(U64V, put_ver) F(U64V, disk_offsets)
#define FX_BODY_keys(F) F(STRV, keys)
#define FX_BODY_count(F) F(U64, count)
/* master -> owners, one-way: alive owners; of them, those not remote_cache (they take puts);
 * whether replicas live on replica targets (remote_cache owners) right now (issue 38); the
 * alive owners' ids and generations (W2: a later master waits for them, see REGISTER), and
 * their UCX addresses, rkeys and segment bases as they registered them (an owner maps the
 * segments of the owners of its host when they join, owner/peers.c) */
#define FX_BODY_cluster_info(F) F(U64, count) F(U64, gpu_alive) F(U64, targets_held) \
    F(STRV, node_ids) F(U64V, generations) F(STRV, addresses) F(STRV, rkeys) F(U64V, bases)
#define FX_BODY_lease(F) F(U64, ttl_ms)
#define FX_BODY_lease_ack(F) F(U64, lease_id)
#define FX_BODY_list(F) F(STR, prefix) F(STR, after) F(U32, limit)
/* external -> owner: hostless put_start (flags: FX_PUT_* bits) */
/* timeout_ms (put_start, put_inline): how long the caller waits for the answer; the owner
 * bounds its own waits (slot claims) below it, so its answer never arrives after the
 * caller gave up because of a server wait as long as the caller's. 0: claim_timeout_ms. */
#define FX_BODY_put_start(F)                                                          \
    F(STRV, keys) F(U64, value_len) F(U64, flags) F(U64V, group_lens) F(STR, replica_mask) \
    F(U64, lease_id) F(STR, preferred_sub_cluster) F(U32, timeout_ms) F(U32, pin_ttl_ms)
/* pin_ttl_ms (put_start, put_inline; issue 42): 0, or pin each value for that long once
 * published (owner-local; FX_PUT_PIN_REFRESH: a hit restarts it) */
#define FX_BODY_put_start_ack(F) F(U64, plan_id) F(U64V, statuses) F(U64V, offsets)
#define FX_BODY_plan_ref(F) F(U64, plan_id)
#define FX_BODY_put_commit_ack(F) F(U64, future_id)
/* owner -> external (one-way): the batch of future_id is published (or failed). status: the
 * batch outcome (the first refused key's status); key_statuses: empty when every key of the
 * plan is FLUXON_OK, else one per plan key (a key refused at put_start: that status) */
#define FX_BODY_published(F) F(U64, future_id) F(I32, status) F(U64V, key_statuses)
/* timeout_ms: the caller's wait; the owner bounds the fetch it leads (the copy's claim,
 * the UCX transfer) below it. 0: the owner's own bounds. */
#define FX_BODY_get_start(F) F(STRV, keys) F(U64V, group_lens) F(U8, best_effort) F(U32, timeout_ms)
/* per transferable key: segment offset, value_len and the holder pinning it */
#define FX_BODY_get_start_ack(F)                                                      \
    F(U64, handle_id) F(U64, raw_prefix) F(U64, transferable) F(U64, prefix_groups)      \
    F(I64, first_miss_index) F(I64, first_miss_group) F(U8, all_hit) F(U64V, offsets)    \
    F(U64V, value_lens) F(U64V, holder_ids)                                             \
    F(I32, miss_status) /* why the first missing key missed (0 when all hit) */
/* external -> owner (one-way): handle consumed: keep holders [0, consume), release the
 * rest; consume 0 = cancel (release all) */
#define FX_BODY_handle_consume(F) F(U64, handle_id) F(U64, consume)
/* external -> owner (one-way): release these holders */
#define FX_BODY_release(F) F(U64V, holder_ids)

/* ---- remote capacity (issue 16): replica tasks and write-back ----
 * owner -> master: copy ONE atomic group / TP cohort (the sender's own committed values,
 * identities (offsets, put_ms, put_ver)) to a replica target. The master checks each key's
 * route is at that version with that replica on the sender, picks ONE target for the batch
 * among the node roles its config allows (never the sender), allocates a range per key and
 * records an in-flight append (token) with inflight_ttl_ms. Answer: put_place_ack (per key
 * OK, STALE, KEY_BEING_WRITTEN; NO_SPACE for all when no target has room). */
#define FX_BODY_append_start(F)                                                       \
    F(U64, value_len) F(STRV, keys) F(U64V, offsets) F(U64V, put_ms) F(U64V, put_ver)   \
    F(U64V, group_lens)
/* owner -> master: the push of append `token` ended (pushed = 1), was never started (0, the
 * ranges go) or was started and failed or timed out (FX_APPEND_ABANDONED, W4: UCX may still
 * deliver its bytes: the keys are let go at once, the ranges only at the append's TTL).
 * Answer: statuses, per key OK (a replica now) or STALE (obsolete: freed). */
#define FX_APPEND_ABANDONED 2u
#define FX_BODY_append_done(F) F(U64, token) F(U8, pushed)
/* owner -> master (issue 17): after registering with a master that did not know it, an
 * owner re-publishes the values it holds committed, in batches of at most
 * FX_REPUBLISH_MAX_KEYS: key i lives at offsets[i] of its segment (a slot), value_lens[i]
 * bytes, version (put_ms, put_ver), published in an atomic group of group_sizes[i] keys.
 * last: the final batch. Answer: statuses, per key OK (routed), STALE (a newer version is
 * routed: drop this copy) or another error (not routed: drop it). */
#define FX_BODY_republish(F)                                                          \
    F(STRV, keys) F(U64V, offsets) F(U64V, value_lens) F(U64V, put_ms) F(U64V, put_ver)  \
    F(U64V, group_sizes) F(U64V, range_bytes) F(U8, last) F(U8, verify)
/* range_bytes[i] > 0: key i is a placed value in a range of that many bytes the master
 * had allocated in the sender's segment (PLACED told the sender), not one of its slots.
 * verify: the owner reconnected to the master it was registered with (the same process):
 * nothing is routed from the batch; each key answers OK when that very replica (sender,
 * offset, version) is routed, STALE otherwise (an INVALIDATE lost with the old connection:
 * the owner drops its copy). */
/* master -> owner (one-way): these placed values now live in ranges of your segment,
 * routed at these versions (lease_id != 0: bound to a lease, never re-published). The
 * owner remembers them to re-publish them; INVALIDATE names them when they go. */
#define FX_BODY_placed(F)                                                             \
    F(STRV, keys) F(U64V, offsets) F(U64, value_len) F(U64V, put_ms) F(U64V, put_ver) F(U64, lease_id)
/* master -> owner, one-way (issue 38): the copies this owner wrote back (appended) to
 * owner node_id (generation) at these offsets are no longer routed. Sent before the master
 * handles any later frame, and before it hands those ranges out again (range_reuse_delay_ms
 * later): owner/wbmap.c's rule rests on both. */
#define FX_BODY_forget(F) F(STR, node_id) F(U64, generation) F(U64V, offsets)
/* owner -> master, one-way (issue 38): this owner read back, for its readers only, its
 * written-back copies of keys (at these versions): the master makes them young in their
 * target's cold FIFO, as the eviction of a promoted replica would */
#define FX_BODY_touch(F) F(STRV, keys) F(U64V, put_ms) F(U64V, put_ver)
#define FX_REPUBLISH_MAX_KEYS 8192u
/* external -> owner (issue 42): pin these keys' values held by this owner for ttl_ms (0:
 * unpin); flags: FLUXON_PIN_REFRESH_ON_HIT. Answer: statuses, one per key. */
#define FX_BODY_pin(F) F(STRV, keys) F(U32, ttl_ms) F(U32, flags)
/* external -> owner (issue 42 quotas): set tenant's quota_bytes (fields & FX_TENANT_SET_QUOTA)
 * and guaranteed_bytes (& FX_TENANT_SET_GUARANTEED) on this owner; admin_token: the owner's
 * tenant_admin_token, or empty (then only the tenant's own clients may). Answer: empty. */
#define FX_BODY_tenant_set(F) F(STR, tenant) F(U64, quota_bytes) F(U64, guaranteed_bytes) F(U32, fields) F(STR, admin_token)
#define FX_TENANT_SET_QUOTA 1u
#define FX_TENANT_SET_GUARANTEED 2u

/* ---- catalog: X(NAME, id, request body, response body) ---- */
#define FX_MSG_CATALOG(X)                                                             \
    X(HELLO, 1, hello, hello_ack)            /* first frame on every connection */    \
    X(REGISTER, 2, register, register_ack)   /* owner -> master */                    \
    X(HEARTBEAT, 3, heartbeat, empty)        /* owner -> master, periodic */          \
    X(PING, 4, ping, ping)                   /* external -> owner (-> master) */      \
    X(CLUSTER_NODES, 5, empty, nodes)        /* external -> owner -> master */        \
    X(OWNER_STATS, 6, empty, json)           /* external -> owner */                  \
    X(GRANT, 7, grant, grant_ack)            /* owner -> master: slot grants */       \
    X(PUT_DONE, 8, put_done, put_done_ack)   /* owner -> master: publish a batch */   \
    X(LOOKUP, 9, lookup, lookup_ack)         /* owner -> master: BatchGetStart */     \
    X(GET_DONE, 10, get_done, statuses)      /* owner -> master: durable replicas */  \
    X(DELETE, 11, key, empty)                /* external -> owner -> master */        \
    X(INVALIDATE, 12, invalidate, empty)     /* master -> owner, one-way */           \
    X(EXISTS, 13, keys, count)               /* external -> owner (-> master) */      \
    X(LEASE_GRANT, 14, lease, lease_ack)     /* external -> owner -> master */        \
    X(LIST, 15, list, keys)                  /* external -> owner -> master */        \
    X(PUT_START, 16, put_start, put_start_ack) /* external -> owner (hostless) */     \
    X(PUT_COMMIT, 17, plan_ref, put_commit_ack)                                       \
    X(PUT_ABORT, 18, plan_ref, empty)                                                 \
    X(PUBLISHED, 19, published, empty)       /* owner -> external, one-way */         \
    X(GET_START, 20, get_start, get_start_ack)                                        \
    X(HANDLE_CONSUME, 21, handle_consume, empty) /* external -> owner, one-way */     \
    X(RELEASE, 22, release, empty)           /* external -> owner, one-way */         \
    X(CLUSTER_INFO, 23, cluster_info, empty) /* master -> owners, one-way: alive owners */ \
    X(EVICT, 24, evict, statuses)            /* owner -> master: drop exact replicas */ \
    X(PUT_PLACE, 25, put_place, put_place_ack) /* owner -> master: PutStart */        \
    X(PUT_REVOKE, 26, put_revoke, empty)     /* owner -> master: PutRevoke */         \
    X(MASTER_STATS, 27, empty, json)         /* external -> owner -> master: KV counters */ \
    X(PUT_INLINE, 28, put_inline, empty)     /* external -> owner: plain put, one request */ \
    X(GRANT_RETURN, 29, grant_ack, statuses) /* owner -> master: idle grants given back */ \
    /* ---- issue 17 (master restart) ---- */                                          \
    X(REPUBLISH, 30, republish, statuses)    /* owner -> master: what it holds (restart) */ \
    X(PLACED, 31, placed, empty)             /* master -> owner: placed values (a request: answered once recorded) */ \
    X(PIN, 32, pin, statuses)                /* external -> owner: pin held values (issue 42) */ \
    X(TENANT_SET, 33, tenant_set, empty)     /* external -> owner: a tenant's quota (issue 42) */ \
    X(TENANT_PUSH, 34, tenant_set, empty)    /* owner -> master -> owners, one-way: the same, applied */ \
    X(PREFETCH, 35, keys, empty)             /* external -> owner, one-way: bring disk values in (issue 39) */ \
    /* ---- issue 16 (remote capacity): ids 40..; the last entry has the highest id ---- */ \
    X(APPEND_START, 40, append_start, put_place_ack) /* owner -> master: replica task */ \
    X(APPEND_DONE, 41, append_done, statuses) /* owner -> master: replica pushed */ \
    X(FORGET, 42, forget, empty)             /* master -> owner, one-way: its copies gone (issue 38) */ \
    X(TOUCH, 43, touch, empty)               /* owner -> master, one-way: copies read back (issue 38) */

typedef enum fx_msg_type {
    FX_MSG_NONE = 0,
#define FX_MSG_ENUM(name, id, req, resp) FX_MSG_##name = id,
    FX_MSG_CATALOG(FX_MSG_ENUM)
#undef FX_MSG_ENUM
    FX_MSG_MAX_ID
} fx_msg_type_t;

/* Body structs: fx_body_<name>_t. */
#define FX_FIELD_U8(n) uint8_t n;
#define FX_FIELD_U16(n) uint16_t n;
#define FX_FIELD_U32(n) uint32_t n;
#define FX_FIELD_U64(n) uint64_t n;
#define FX_FIELD_I32(n) int32_t n;
#define FX_FIELD_I64(n) int64_t n;
#define FX_FIELD_STR(n) fx_str_t n;
#define FX_FIELD_U64V(n) fx_u64v_t n;
#define FX_FIELD_STRV(n) fx_strv_t n;
#define FX_FIELD(kind, n) FX_FIELD_##kind(n)
#define FX_BODY_STRUCT(body) typedef struct fx_body_##body { FX_BODY_##body(FX_FIELD) } fx_body_##body##_t;
/* Every body kind, once: generates structs and codec prototypes. */
#define FX_BODY_LIST(B) B(empty) B(error) B(hello) B(hello_ack) B(register) B(register_ack) \
    B(heartbeat) B(ping) B(nodes) B(json) B(grant) B(grant_ack) B(put_done) B(put_done_ack)   \
    B(lookup) B(lookup_ack) B(get_done) B(statuses) B(key) B(invalidate) B(keys) B(count) B(cluster_info) \
    B(lease) B(lease_ack) B(list) B(put_start) B(put_start_ack) B(plan_ref)                  \
    B(put_commit_ack) B(published) B(get_start) B(get_start_ack) B(handle_consume) B(release)  \
    B(evict) B(put_place) B(put_place_ack) B(put_revoke) B(put_inline)                        \
    B(append_start) B(append_done) /* issue 16 */ \
    B(republish) B(placed) B(pin) B(tenant_set) B(forget) B(touch)
FX_BODY_LIST(FX_BODY_STRUCT)

/* Body kinds, for the arena's decode memo. */
#define FX_BODY_KIND(body) FX_BODY_KIND_##body,
enum { FX_BODY_KIND_NONE, FX_BODY_LIST(FX_BODY_KIND) FX_BODY_KIND_COUNT };
#undef FX_BODY_KIND

/* A bump arena for decoded arrays; freed in one go after the frame is handled. It also
 * remembers the last body fx_msg_validate decoded into it (decode once per hop): a
 * handler's fx_body_X_decode of the same bytes, length and kind copies that struct instead
 * of decoding again. fx_arena_reset forgets it. */
typedef struct fx_arena {
    uint8_t *buf;
    size_t cap, used;
    struct fx_arena_chunk *chunks; /* overflow chunks */
    const uint8_t *memo_in;        /* the validated body's bytes, or NULL */
    size_t memo_len;
    int memo_kind;                 /* FX_BODY_KIND_* */
    const void *memo_body;         /* its decoded struct, in this arena */
} fx_arena_t;
FX_INTERNAL void *fx_arena_alloc(fx_arena_t *a, size_t n);
FX_INTERNAL void fx_arena_reset(fx_arena_t *a);
FX_INTERNAL void fx_arena_free(fx_arena_t *a);

/* Per body: encoded size, encode into out (exactly size bytes), decode (bounds-checked;
 * returns 0 or FLUXON_ERR_PROTOCOL; trailing bytes are an error). */
#define FX_BODY_PROTOS(body)                                                          \
    FX_INTERNAL size_t fx_body_##body##_size(const fx_body_##body##_t *b);             \
    FX_INTERNAL void fx_body_##body##_encode(const fx_body_##body##_t *b, uint8_t *out); \
    FX_INTERNAL int fx_body_##body##_decode(const uint8_t *in, size_t len,            \
                                            fx_body_##body##_t *b, fx_arena_t *arena);
FX_BODY_LIST(FX_BODY_PROTOS)

/* Catalog queries. */
FX_INTERNAL const char *fx_msg_name(unsigned type);   /* "HELLO", or NULL if unknown */
FX_INTERNAL bool fx_msg_known(unsigned type);
FX_INTERNAL unsigned fx_msg_by_name(const char *name); /* 0 if unknown */
/* Validates a whole body against the catalog (request or response body by flags). */
FX_INTERNAL int fx_msg_validate(const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena);

/* Header encode/decode. fx_frame_header_decode checks magic and body_len <= max. */
FX_INTERNAL void fx_frame_header_encode(const fx_frame_header_t *h, uint8_t out[FX_FRAME_HEADER_BYTES]);
FX_INTERNAL int fx_frame_header_decode(const uint8_t in[FX_FRAME_HEADER_BYTES], uint64_t max_body,
                                       fx_frame_header_t *h);

static inline fx_str_t fx_str_c(const char *s)
{
    fx_str_t r = {s, s ? (uint32_t)strlen(s) : 0};
    return r;
}
/* Copies a view into a NUL-terminated buffer (truncating); returns false if truncated. */
FX_INTERNAL bool fx_str_copy(fx_str_t s, char *dst, size_t cap);
FX_INTERNAL bool fx_str_eq(fx_str_t s, const char *c);

#endif
