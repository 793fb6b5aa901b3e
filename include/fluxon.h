/* fluxon.h — the public API of Fluxon, a distributed cache for the KV cache of LLM
 * inference engines. This header is the specification: every function states its
 * contract, the shapes and units of its arguments, who owns each pointer, its thread
 * rules and every status it can return. Embedders include this file only.
 *
 * Conventions (after UCX's docs/CodeStyle.md and SQLite's sqlite.h.in):
 *  - Functions return FLUXON_OK (0) or a negative FLUXON_ERR_* status unless stated.
 *  - Output parameters end in _p and are written only on success.
 *  - Destroying NULL is a harmless no-op.
 *  - Every function is thread-safe unless its comment says otherwise.
 *  - Sizes are in bytes, durations in milliseconds, unless the name says otherwise.
 *  - Strings passed in are borrowed for the duration of the call only (copied if kept).
 *  - Any call that talks to the owner (every call below not marked "no round trip") can
 *    also return FLUXON_ERR_PROTOCOL (the answer could not be decoded: a version skew or
 *    a bug) and FLUXON_ERR_INTERNAL (an invariant did not hold), besides the statuses it
 *    lists; FLUXON_ERR_NOMEM wherever the library allocates.
 *
 * Blocking: calls with a round trip block the calling thread at most the client's
 * "timeout_ms" (default 30000) for the answer, plus at most that again to write a large
 * request when the owner reads slowly; each returns FLUXON_ERR_TIMEOUT past it. Calls
 * marked "no round trip" (fluxon_get_transfer, fluxon_cancel_get_transfer,
 * fluxon_release_views, fluxon_holder_release, the fluxon_future_* calls other than
 * wait, fluxon_plan_value_lens) never block on the owner: they only take the client's
 * internal locks and queue a message.
 *
 * Process-wide effects: the log level is global to the process (the most verbose config
 * opened so far wins) and logs go to stderr. Library threads (one per client, one per
 * embedded node) inherit the signal mask of the thread that opened or started them: block
 * the signals a process handles with sigwait before that (as the CLI does). The library
 * is not fork-safe: a child must not use a client or node of its parent. Each client maps its owner's whole segment (memfd,
 * MAP_SHARED): page tables cost about segment/512 bytes per process once touched.
 *
 * Lifetime: fluxon_client_close frees every plan, handle, read plan and holder the client
 * still has and unmaps the segment: every value_ptrs address and holder data pointer of
 * that client dangles afterwards. Futures stay valid (fluxon_future_free) and report
 * FLUXON_ERR_UNAVAILABLE if they had not completed.
 *
 * Copyright 2026 the Fluxon authors. Licensed under the Apache License, Version 2.0.
 */
#ifndef FLUXON_H
#define FLUXON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLUXON_VERSION_MAJOR 0
#define FLUXON_VERSION_MINOR 1
#define FLUXON_VERSION_PATCH 0
#define FLUXON_VERSION_STRING "0.1.0"

/* ---------------------------------------------------------------------------------
 * Status codes. Values are fixed forever (they cross process boundaries in the wire
 * protocol and are stored by embedders). Grouped after UCX's ucs_status_t: 0 OK,
 * 1 in progress, negative = errors.
 * ------------------------------------------------------------------------------- */
enum {
    FLUXON_OK                    = 0,   /* success */
    FLUXON_IN_PROGRESS           = 1,   /* operation not finished yet (futures) */
    FLUXON_PIN_REFUSED           = 2,   /* success without the pin asked for: the value is
                                           stored (or held) but not pinned, e.g. its tenant's
                                           pinned-bytes budget is full (issue 42; a per-key
                                           status, see fluxon_pin) */
    FLUXON_ERR_INVALID_ARGUMENT  = -1,  /* a caller-supplied value broke the contract */
    FLUXON_ERR_NOT_FOUND         = -2,  /* key (or object) does not exist */
    FLUXON_ERR_KEY_BEING_WRITTEN = -3,  /* a put of the same key is in flight */
    FLUXON_ERR_KEY_EXISTS        = -4,  /* the key already has a committed value */
    FLUXON_ERR_GROUP_REJECTED    = -5,  /* another member of this atomic group was rejected */
    FLUXON_ERR_NO_SPACE          = -6,  /* no memory left for the value (capacity) */
    FLUXON_ERR_TIMEOUT           = -7,  /* a bounded wait expired */
    FLUXON_ERR_STALE             = -8,  /* object from an older generation / version */
    FLUXON_ERR_BUSY              = -9,  /* resource held by a reader; retry later */
    FLUXON_ERR_UNAVAILABLE       = -10, /* peer (owner or master) not reachable */
    FLUXON_ERR_PROTOCOL          = -11, /* malformed, oversized or unknown message */
    FLUXON_ERR_AUTH              = -12, /* wrong cluster token, cluster id or version; an
                                           unknown tenant or a wrong tenant_token (issue 42) */
    FLUXON_ERR_WRONG_HANDLE      = -13, /* handle/plan of the wrong type or state */
    FLUXON_ERR_CANCELLED         = -14, /* operation cancelled (shutdown, cancel call) */
    FLUXON_ERR_LEASE_EXPIRED     = -15, /* the lease bound to the value expired */
    FLUXON_ERR_CONFIG            = -16, /* configuration rejected (message names field) */
    FLUXON_ERR_NOMEM             = -17, /* process memory allocation failed */
    FLUXON_ERR_INTERNAL          = -18, /* a bug: an invariant did not hold */
    FLUXON_ERR_UNKNOWN_OUTCOME   = -19  /* a write may have taken effect or not: not known
                                           yet (no master, lost answer); it converges */
};

/* Keys are byte strings of 1..FLUXON_MAX_KEY_BYTES bytes without NUL bytes, whose first
 * byte is not FLUXON_TENANT_KEY_MARK (0x01).
 * Tenants (issue 42, docs/tenants.md): an external client belongs to the tenant its config
 * names ("tenant", default "default"; "tenant_token": the tenant's secret, checked by the
 * owner at connect: an unknown tenant or a wrong token fails fluxon_client_open with
 * FLUXON_ERR_AUTH). Keys live in the tenant's namespace: inside the cluster a key K of
 * tenant T is stored as FLUXON_TENANT_KEY_MARK "T/" K, so no other tenant can read, list,
 * check, delete or overwrite it, even with the same bytes. A tenant's keys are therefore
 * at most FLUXON_MAX_KEY_BYTES - (strlen(T) + 2) bytes (longer: FLUXON_ERR_INVALID_ARGUMENT
 * naming both lengths). The "default" tenant's keys are stored as they are (no prefix); a
 * key starting with FLUXON_TENANT_KEY_MARK is refused (FLUXON_ERR_INVALID_ARGUMENT) for
 * every tenant, and list_keys never shows another tenant's keys. The TP-cohort suffix
 * below keeps working (the prefix goes at the front). */
#define FLUXON_MAX_KEY_BYTES 1024
#define FLUXON_TENANT_KEY_MARK '\x01'

/* Key grammar: TP cohorts. Keys are opaque to Fluxon except for one suffix: a key that
 * ends in "_<rank>_<size>" (two runs of 1..9 ASCII digits, rank < size, at least one byte
 * before them) belongs to the TP cohort named by the key without that suffix; any other
 * key is a cohort of its own. The tensor-parallel ranks of an engine that store their
 * shares of one page under <page key>_<tp_rank>_<tp_size> form one cohort, and when the
 * master copies values to a remote_cache owner (replica tasks and write-backs, issue 16)
 * it places a batch on the target its first key's cohort hashes to (while that target
 * has room), so every rank's share of a page lands on the same CPU owner. The SGLang
 * backend writes <namespace>_<page hash>_<part>_<tp_rank>_<tp_size>, part "k"/"v" (MHA)
 * or "kv" with "_0_1" (MLA: one copy for all ranks): python/fluxon/sglang_keys.py and
 * docs/sglang.md. The master parses it in one place (fx_cohort_len, cache/groups.c). */

/* A batch (put_start, get_start, batch_exists) has 1..FLUXON_MAX_BATCH_KEYS keys, and its
 * request must also encode within the client's and owner's "max_frame_bytes" (default
 * 64 MiB: about 60k keys of 1 KiB). Past either limit the call returns
 * FLUXON_ERR_INVALID_ARGUMENT, naming the limit in the log, and the client stays usable. */
#define FLUXON_MAX_BATCH_KEYS 1000000

/* Returns a static, never-NULL, human-readable name for a status ("FLUXON_ERR_TIMEOUT");
 * unknown values give "FLUXON_ERR_UNKNOWN". The string is owned by the library. */
const char *fluxon_status_string(int status);

/* Returns the library version, FLUXON_VERSION_STRING, as a static string. */
const char *fluxon_version(void);

/* ---------------------------------------------------------------------------------
 * Embedded roles: run a master or an owner reactor on a thread of this process.
 * ------------------------------------------------------------------------------- */
typedef struct fluxon_node fluxon_node;

/* Starts the role described by config_json (a JSON document as in the README:
 * {"role":"master"|"owner", ...}) on a new thread of this process and returns once the
 * node serves: a master is listening; an owner has registered with its master and is
 * accepting on its unix socket. Several nodes may run in one process.
 *  config_json  borrowed for the call; NUL-terminated JSON text.
 *  node_p       on success receives the node; the caller owns it and must pass it to
 *               fluxon_node_stop exactly once. On any failure *node_p is set to NULL
 *               (when node_p is not NULL).
 * The node's own setup (segment, socket, UCX) is not bounded; then the wait for the master
 * is bounded by the start timeout ("start_timeout_ms", default 10000 ms). An owner's
 * segment is prefaulted on a thread of its own while it registers, not waited for.
 * The first node started in a process also hands the heap allocator a reserve of
 * "heap_reserve_mib" (owner: segment_bytes / 8 in whole 64 MiB up to 1 GiB; master:
 * none unless set; 0: none) that a thread faults in meanwhile: this process's memory
 * grows by that much, for its life (the heap the nodes grow into then costs no page
 * faults on their hot paths).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL argument);
 * FLUXON_ERR_CONFIG (the config was rejected; the reason is logged, naming the field;
 * also a master's "listen" address that is in use, not local or privileged);
 * FLUXON_ERR_UNAVAILABLE (another listen/bind failure, or the owner's master was
 * unreachable for the whole start timeout); FLUXON_ERR_AUTH (the master refused the owner);
 * FLUXON_ERR_BUSY (another live owner registered this node_id);
 * FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM; FLUXON_ERR_INTERNAL. */
int fluxon_node_start(const char *config_json, fluxon_node **node_p);

/* Like fluxon_node_start, but returns once the node's own setup is done (an owner serves
 * on its socket), without waiting for the master: a daemon's start. The owner keeps
 * connecting with backoff (100 ms doubling to 2 s) and logs every 5 s that it waits.
 * On FLUXON_OK the caller owns *node_p and must pass it to fluxon_node_stop exactly once
 * (also after fluxon_node_wait_ready reported a failure). Same failures as
 * fluxon_node_start, less those of the master's answer. */
int fluxon_node_launch(const char *config_json, fluxon_node **node_p);

/* Waits up to timeout_ms for a launched node to be ready (a master listens at once; an
 * owner is ready once registered). Returns FLUXON_OK; FLUXON_ERR_TIMEOUT (not yet: call
 * again); or the start's final failure: FLUXON_ERR_AUTH (credentials refused),
 * FLUXON_ERR_BUSY (node_id registered by another live owner). One thread at a time. */
int fluxon_node_wait_ready(fluxon_node *node, uint32_t timeout_ms);

/* Stops the node: closes every connection, unlinks an owner's socket, joins the thread
 * and frees the node. NULL is a no-op. Not safe to call twice on the same node. */
void fluxon_node_stop(fluxon_node *node);

/* The TCP port a master node listens on (the bound port when its "listen" asked for
 * port 0); 0 for an owner node or NULL. Valid while the node runs. */
uint16_t fluxon_node_port(const fluxon_node *node);

/* Metrics of running nodes in the Prometheus text exposition format (0.0.4): every family
 * once, with "# HELP" and "# TYPE", fluxon_ prefix, base units (_bytes, _seconds, _total);
 * each node's samples carry node="<node_id>" (a master without node_id: node="master");
 * fluxon_build_info{version,commit} is always 1. The same numbers, under the same names,
 * are in the JSON of fluxon_client_stats / fluxon_client_master_stats (one catalog).
 * Thread-safe with respect to the nodes (not with fluxon_node_stop of one of them): each
 * node's reactor is asked for a snapshot of its counters (a copy, a few microseconds) and
 * the text is rendered on the calling thread, so the reactor never waits on the caller;
 * the caller waits at most 1000 ms in all, and a node whose reactor has not answered by
 * then is rendered from its previous snapshot. This is what the fluxon binary serves at
 * GET /metrics on "metrics_listen"; an embedder serves it with its own HTTP server.
 *  nodes, n   1..64 running nodes (masters and owners mixed)
 *  buf, cap   the caller's buffer; *len_p receives the text length (NUL-terminated)
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_NO_SPACE (cap too small:
 * retry with a larger buffer); FLUXON_ERR_TIMEOUT (a node has never produced a snapshot
 * within the wait); FLUXON_ERR_NOMEM. */
int fluxon_nodes_metrics(fluxon_node *const *nodes, size_t n, char *buf, size_t cap, size_t *len_p);
/* fluxon_nodes_metrics of one node. */
int fluxon_node_metrics(fluxon_node *node, char *buf, size_t cap, size_t *len_p);

/* ---------------------------------------------------------------------------------
 * External client: attaches to the owner whose unix socket config_json names.
 * ------------------------------------------------------------------------------- */
typedef struct fluxon_client fluxon_client;

/* Opens a client: connects to the owner's socket ("socket" in config_json), performs
 * the HELLO handshake and starts the client's reactor thread.
 *  config_json  borrowed for the call: {"role":"external","cluster_id",...,"socket"};
 *               "tenant" (default "default") and "tenant_token": the tenant this client
 *               belongs to and its secret (issue 42, docs/tenants.md; see the key
 *               grammar above for namespaces).
 *  client_p     receives the client; the caller owns it (fluxon_client_close). On any
 *               failure *client_p is set to NULL (when client_p is not NULL): every
 *               call given that NULL returns FLUXON_ERR_INVALID_ARGUMENT.
 * Waits at most "timeout_ms" (default 30000 ms) for the owner.
 * With "prefault_segment" (default true) a thread of the client then faults the owner's
 * segment into this process's mapping (MADV_POPULATE_WRITE), not waited for: the engine's
 * first write of each page skips the fault; the client's stats say "segment_prefaulting"
 * until it is done. Where a mapped page's first access still costs (probed; a VM whose
 * hypervisor makes each translation at the first access, ~6 us a page), the thread also
 * reads every page once: ~2-3 s of CPU per GiB there, the cost the engine's first writes
 * would otherwise pay ("segment_touch": "auto", or "off" / "on"). Each client of a
 * process does this for its own mapping.
 * fluxon_client_close stops it (it looks every 64 MiB it maps and every 64 pages it
 * reads).
 * The client's reactor thread, after each message from the owner (a put's PUBLISHED that
 * completes its future, a reply), looks for the next one for "idle_poll_us" (default 100,
 * env FLUXON_CLIENT_POLL_US; 0 = off) before it sleeps, yielding the CPU between looks: while
 * an engine puts, that thread keeps a core of this process busy, and spares a wake-up a put.
 * On a core that a thread which never yields shares, the looks would wait for that thread's
 * time slices: after two such yields the window closes for a while (100 ms, doubling).
 * Every request of a client encodes to one frame of at most the client's
 * "max_frame_bytes" (default 64 MiB; the owner's must be as large): a larger batch is
 * refused before anything is sent with FLUXON_ERR_INVALID_ARGUMENT and a warning naming
 * the size and the limit (split the batch); the client stays usable. A request that
 * timed out while being written is still written whole later (never half a frame).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_CONFIG;
 * FLUXON_ERR_UNAVAILABLE (no owner listening at the socket: a missing socket file fails
 * at once, a file nobody listens on within 300 ms, logging the owner sockets in that
 * directory); FLUXON_ERR_AUTH (wrong
 * cluster id/token or protocol version; a tenant the owner does not know, or a wrong
 * or missing tenant_token); FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM. */
int fluxon_client_open(const char *config_json, fluxon_client **client_p);

/* Closes the client: releases everything it holds at its owner, stops its thread and
 * frees it. NULL is a no-op. The caller must not use the client in another thread
 * during or after this call. Everything the client handed out dangles afterwards (plans,
 * handles, holders, segment pointers); a future may only be freed (see "Lifetime" and
 * "Blocking" at the top of this header). */
void fluxon_client_close(fluxon_client *client);

/* Writes a JSON object with the client's counters and its owner's counters into json
 * (cap bytes, NUL-terminated on success). *len_p receives strlen of the document; when
 * cap is too small, returns FLUXON_ERR_INVALID_ARGUMENT and sets *len_p to the size
 * needed (excluding the NUL) so the caller can retry. The counters move between calls, so
 * the next document may be a little longer: retry with room to spare (e.g. twice the size
 * needed) and loop while the answer is still INVALID_ARGUMENT with a larger *len_p.
 * Keys: "client": {"node_id", "requests", "errors", "timeouts", "handles_expired",
 * "segment_prefaulting" (true while the client's prefault, see fluxon_client_open, still
 * works)},
 * "owner": {"node_id",
 * "generation", "externals", "master_connected", ...}.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_UNAVAILABLE (owner gone);
 * FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM. */
int fluxon_client_stats(fluxon_client *client, char *json, size_t cap, size_t *len_p);

/* Round trip through the control plane: to_master == 0 measures external→owner,
 * to_master != 0 external→owner→master. On success *rtt_ns_p receives the round-trip
 * time in nanoseconds (may be NULL).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_UNAVAILABLE (owner, or for
 * to_master its master, not connected); FLUXON_ERR_TIMEOUT. */
int fluxon_client_ping(fluxon_client *client, int to_master, uint64_t *rtt_ns_p);

/* Writes the master's KV counters as one JSON object into json (same cap/len_p rules as
 * fluxon_client_stats): generation, owners, routes, replicas, leases, the cumulative
 * counters (puts, lookups, places, place_remote, revokes, inflight_expired, get_durable,
 * get_temporary, ...) and the in-flight gauges inflight_puts, inflight_put_keys and
 * inflight_gets (all back to 0 once a workload's puts and gets are done, R1).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_UNAVAILABLE (the owner has
 * no master); FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM. Thread-safe. */
int fluxon_client_master_stats(fluxon_client *client, char *json, size_t cap, size_t *len_p);

/* Writes the cluster's node table as a JSON array into json (same cap/len_p rules as
 * fluxon_client_stats): [{"node_id","role","generation","alive","segment_bytes",
 * "sub_cluster","placed_bytes"}...]; placed_bytes: bytes of that owner's segment the
 * master allocated for placed values. The master's own row comes first, its node_id
 * "master@<listen host>:<port>" (the master that answered: with standby masters, the
 * leader). The document is always whole (never truncated),
 * whatever the number of nodes and the length of their ids.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_UNAVAILABLE;
 * FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM. */
int fluxon_client_cluster_nodes(fluxon_client *client, char *json, size_t cap,
                                size_t *len_p);

/* ---------------------------------------------------------------------------------
 * Segments: the owner's shared memory as mapped in this process.
 * ------------------------------------------------------------------------------- */
typedef struct fluxon_segment_info {
    char segment_label[32];  /* "external_owner:0" in an external */
    char node_id[64];        /* the owner's node id */
    void *write_ptr;         /* base of the mapping (header page at offset 0) */
    const void *read_ptr;    /* same mapping, for readers */
    uint64_t len;            /* bytes mapped */
    uint64_t generation;     /* the owner generation the mapping belongs to */
} fluxon_segment_info;

/* Describes the segments mapped in this process (one: the owner's). The external maps
 * its owner's segment at fluxon_client_open (memfd passed by SCM_RIGHTS), so this call
 * never waits and makes no round trip.
 *  out   cap entries; n_p receives the number of segments — an exception to the
 *        outputs-on-success rule: also when cap is too small.
 *  timeout_ms  not used (kept for the API of the hostless design, where segments may be
 *              mapped later); any value is accepted.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL client or n_p, out NULL with
 * cap > 0, or cap smaller than the count: *n_p then holds the count needed);
 * FLUXON_ERR_STALE (the owner restarted or went away: its generation is gone; open a
 * new client to re-attach). Thread-safe. The pointers stay valid until
 * fluxon_client_close. */
int fluxon_wait_local_segments_ready(fluxon_client *client, uint32_t timeout_ms,
                                     fluxon_segment_info *out, size_t cap, size_t *n_p);

/* ---------------------------------------------------------------------------------
 * Options of a put. Zero-initialise, then set field_mask bits for the fields you set
 * (UCX's parameter-struct idiom, so fields can be added without breaking the ABI).
 * ------------------------------------------------------------------------------- */
#define FLUXON_PUT_OPT_REJECT_IF_INFLIGHT (1ull << 0)
#define FLUXON_PUT_OPT_REJECT_IF_EXIST    (1ull << 1)
#define FLUXON_PUT_OPT_WRITE_THROUGH      (1ull << 2)
#define FLUXON_PUT_OPT_MAKE_REPLICA_TASK  (1ull << 3)
#define FLUXON_PUT_OPT_REPLICA_MASK       (1ull << 4)
#define FLUXON_PUT_OPT_ATOMIC_GROUPS      (1ull << 5)
#define FLUXON_PUT_OPT_LEASE_ID           (1ull << 6)
#define FLUXON_PUT_OPT_PREFERRED_SUB_CLUSTER (1ull << 7)
#define FLUXON_PUT_OPT_LOCAL_FIRST        (1ull << 8)
#define FLUXON_PUT_OPT_PIN_TTL            (1ull << 9)
#define FLUXON_PUT_OPT_PIN_REFRESH_ON_HIT (1ull << 10)

/* Pins (issue 42, docs/tenants.md): a pinned value is not evicted from its owner's hot tier
 * (nor demoted to a CPU owner or the disk tier) before its deadline; an atomic group is
 * pinned whole. Pins are the owner's own state: they bind the copy on the owner that took
 * the put (a pinned put is stored there, as local_first), survive a master restart, and
 * are lost with that owner. Each tenant's pinned bytes (slot bytes: values rounded up to
 * 4 KiB) are bounded by its budget (owner config tenants.NAME.pinned_bytes_max, at most
 * pin_budget_ratio x the hot tier, which also bounds all tenants together); a pin past it
 * is refused per key with FLUXON_PIN_REFUSED and the value is kept unpinned. */
#define FLUXON_PIN_TTL_MAX_MS 86400000u /* 24 h */
#define FLUXON_PIN_REFRESH_ON_HIT 0x1u  /* fluxon_pin flags: each hit restarts the TTL */

typedef struct fluxon_put_options {
    uint64_t field_mask;                   /* FLUXON_PUT_OPT_* bits of the fields set */
    int reject_if_inflight_same_key;       /* FLUXON_ERR_KEY_BEING_WRITTEN if a put of the
                                              key is in flight on this owner */
    int reject_if_exist_same_key;          /* FLUXON_ERR_KEY_EXISTS if the key has a value */
    int write_through;                     /* hostless: the master places the batch on
                                              another owner (random among those that fit);
                                              the values are staged here, pushed over UCX
                                              after commit, then published */
    int make_replica_task;                 /* accepted, validated and carried to the
                                              master: after publish, one async replica
                                              task per group to a remote_cache owner
                                              (issue 16; the local primary stays) */
    const uint8_t *make_replica_task_mask; /* NULL, or n_keys entries, uniform per group */
    const uint32_t *atomic_group_lens;     /* NULL: every key is its own group; else
                                              n_atomic_groups lengths > 0 summing to n_keys */
    size_t n_atomic_groups;
    uint64_t lease_id;                     /* 0: no lease (never bound by default) */
    const char *preferred_sub_cluster;     /* NULL: none. fluxon_put and write_through:
                                              owners whose config "sub_cluster" equals it
                                              are tried first, the others after them */
    int local_first;                       /* fluxon_put: store on this client's owner
                                              (no placement round trip); the hostless
                                              local_fast_put path always is local-first.
                                              Not with write_through (INVALID_ARGUMENT) */
    uint32_t pin_ttl_ms;                   /* 0: no pin; 1..FLUXON_PIN_TTL_MAX_MS: pin each
                                              stored value for this many ms from its
                                              publication (see Pins above; implies
                                              local_first; not with write_through:
                                              INVALID_ARGUMENT). A key whose pin was not
                                              applied reports FLUXON_PIN_REFUSED */
    int pin_refresh_on_hit;                /* with pin_ttl_ms: each hit of a pinned value on
                                              its owner restarts its TTL */
} fluxon_put_options;

/* ---------------------------------------------------------------------------------
 * Plain KV. A put is placed by the master (ARCHITECTURE §7): on a uniformly random owner
 * among those with room, owners of preferred_sub_cluster first, this client's owner
 * included; local_first keeps it on this client's owner. The bytes are staged in this
 * client's owner, moved by UCX to the target, then published (a later put of the same
 * key replaces it). If the target cannot be reached the staged copy is published here
 * instead. reject_if_inflight is checked against every placed put in flight in the
 * cluster, reject_if_exist against published values. A value of at most 256 KiB travels
 * to the owner inside one request (one round trip, answered once published); larger
 * ones are written by this process straight into the owner's shared segment.
 * ------------------------------------------------------------------------------- */
typedef struct fluxon_holder fluxon_holder;

/* Stores a copy of value (value_len bytes, 1..the owner's reserve.grant_bytes, and its slot
 * at most the owner's hot tier: hot_capacity_bytes, else hot_capacity_ratio x the payload
 * capacity; a larger value would be evicted as soon as stored) under key
 * (1..FLUXON_MAX_KEY_BYTES bytes, NUL-terminated, no embedded NUL) and waits until the
 * master published it (at most timeout_ms of the client config); a value the master
 * placed on another owner (write_through, or its placement) is answered once that owner
 * confirmed recording it (at most a quarter of the master's master_timeout_ms, once: an
 * owner that did not confirm is passed over for heartbeat_timeout_ms), so it is
 * re-published to a master that restarts after the OK. opts may be NULL.
 * Returns FLUXON_OK; FLUXON_PIN_REFUSED (opts asked for a pin: the value is stored and
 * published but not pinned — its tenant's pinned-bytes budget is full, or the value went
 * to another owner; the owner logs why); FLUXON_ERR_INVALID_ARGUMENT (bad key, value NULL, value_len 0 or
 * larger than a grant or than the owner's hot tier (the log names it), local_first together with write_through, preferred_sub_cluster
 * not 1..63 characters of [A-Za-z0-9._-], field_mask bits this library does not know,
 * pin_ttl_ms over FLUXON_PIN_TTL_MAX_MS or with write_through); FLUXON_ERR_KEY_EXISTS / FLUXON_ERR_KEY_BEING_WRITTEN
 * (with the matching option); FLUXON_ERR_NO_SPACE (the owner cannot stage it: no free
 * slot of its size and no room for a grant of that size, see reserve.grant_bytes);
 * FLUXON_ERR_LEASE_EXPIRED
 * (lease_id unknown or expired); FLUXON_ERR_UNAVAILABLE (nothing was stored);
 * FLUXON_ERR_UNKNOWN_OUTCOME: the put was sent but its outcome is not known — the owner
 * has no master to publish to (answered at once: the value is readable on this client's
 * owner and is published, with the same batch id, when the master returns), or no answer
 * came within timeout_ms. Not a failure: the value converges to published or, if the
 * master refuses it (e.g. a reject option), to absent; read it back to know.
 * FLUXON_ERR_TIMEOUT: the owner did not answer the staging of a value larger than
 * 256 KiB within timeout_ms (an owner that hangs: it answers by 9/10 of it,
 * a master that does not answer its placement in time included): nothing of it was written,
 * nothing is stored. */
int fluxon_put(fluxon_client *c, const char *key, const void *value, uint64_t value_len,
               const fluxon_put_options *opts);

/* Looks key up (this owner first, then the master; a value held by another owner is
 * copied into this owner (over UCX, or through the segment of an owner of the same host,
 * mapped: owner config peer_segments): as a replica for at most 2 owners per key at a time
 * and 4 replicas in all, otherwise as a temporary copy freed with its holders) and
 * returns a holder that keeps the bytes valid and unchanged until fluxon_holder_release,
 * whatever deletes or replaces the key meanwhile. *holder_p is owned by the caller.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_NOT_FOUND (no value);
 * FLUXON_ERR_NO_SPACE (a value exists but this owner has no room for the copy);
 * FLUXON_ERR_BUSY (this client already pins its share of the owner's hot tier, the
 * owner's client_limits.max_pinned_bytes: release holders or plans first);
 * FLUXON_ERR_UNAVAILABLE (no master, or the transfer failed); FLUXON_ERR_TIMEOUT;
 * FLUXON_ERR_NOMEM; FLUXON_ERR_INTERNAL. Thread-safe. */
int fluxon_get(fluxon_client *c, const char *key, fluxon_holder **holder_p);
/* The value's bytes (read-only, in the owner's shared segment) and length in bytes. */
const void *fluxon_holder_data(const fluxon_holder *h);
uint64_t fluxon_holder_len(const fluxon_holder *h);
/* Releases the holder (exactly once). NULL is a no-op. Closing the client releases every
 * holder it still has; a holder must not be used after its client is closed. */
void fluxon_holder_release(fluxon_holder *h);

/* Deletes key cluster-wide: the route goes first, replicas are invalidated afterwards;
 * memory is reused once every holder of the old value is released. FLUXON_OK comes once
 * every owner holding a copy confirmed dropping it — a copy on its disk tier included,
 * written off there (a tombstone) before it confirms — so neither a master restart nor an
 * owner restart brings the key back. A delete that reaches a restarted master before every
 * owner re-published what it holds waits for those owners (at most a quarter of the
 * master's master_timeout_ms) and drops their copies too; while one is still not back or
 * not done, it answers FLUXON_ERR_UNKNOWN_OUTCOME naming it (never OK or NOT_FOUND), and the
 * master drops that owner's copy when it reports it (docs/api.md: the bounds of that).
 * Returns FLUXON_OK; FLUXON_ERR_NOT_FOUND (no such key — never a silent success);
 * FLUXON_ERR_UNKNOWN_OUTCOME (the route is gone or there was none, but an owner holding a
 * copy is not connected, did not confirm within half the master's master_timeout_ms, or has
 * not re-published to a restarted master yet: the copy is
 * dropped when that owner answers or comes back to this master — restarted with its disk
 * too — but if the master restarts first, the key may come back; a retry then finds it and
 * deletes it again, else answers NOT_FOUND); FLUXON_ERR_INVALID_ARGUMENT;
 * FLUXON_ERR_UNAVAILABLE; FLUXON_ERR_TIMEOUT. */
int fluxon_delete(fluxon_client *c, const char *key);

/* *leading_hits_p receives how many of keys[0..n_keys) exist, counted from the first
 * key up to the first missing one. Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL,
 * n_keys 0, a bad key); FLUXON_ERR_UNAVAILABLE; FLUXON_ERR_TIMEOUT. */
int fluxon_batch_exists(fluxon_client *c, const char *const *keys, size_t n_keys,
                        size_t *leading_hits_p);

/* The reason the owner (or the master through it) gave when it refused the calling
 * thread's last call: e.g. a NO_SPACE put names the tenant, its bytes, its quota and the
 * config field. The client puts its own refusals here too: fluxon_client_open's (a
 * rejected config, naming the field; no owner at the socket; the owner's refusal of the
 * connection), and an INVALID_ARGUMENT for a bad argument of a client that is open (naming
 * the argument and, in a batch, the key's index: "key 1 is empty (keys are 1..1024 bytes)",
 * "get_transfer: consume_prefix_len 3 is past the handle's keys");
 * fluxon_node_start and fluxon_node_launch put a rejected config's reason here (naming the
 * field), or why the node could not start (a segment larger than the host's RAM, a listen
 * address in use), logged or not (log_level "off"). "" when that call succeeded, failed in the client otherwise (a NULL client, a
 * closed client, an owner gone, a plan or handle not live: WRONG_HANDLE) or without an
 * answer (TIMEOUT), or the owner gave no reason. Each
 * call of this API emptying it as it starts, it is valid on this thread until its next
 * call; the string belongs to the library (at most 511 bytes, NUL-terminated). Thread-safe:
 * each thread has its own; never blocks. */
const char *fluxon_last_error_message(void);

/* A hint: the caller will soon get_start keys[0..n_keys) (e.g. an engine's next request in
 * its queue). The client's owner reads back, now, each of them that its disk tier holds and
 * its memory lacks (issue 39), and keeps it in memory (published as a copy there), so the
 * get_start that follows finds it in memory, or waits only for the rest of a read already
 * under way, instead of starting the disk read then. Keys held only elsewhere are left
 * alone (the get_start fetches those as always) unless the owner's config has
 * "prefetch_from_owners": true (issue 38): then the owner asks the master about them in one
 * lookup and copies ahead, the same way, those another owner (a CPU owner) holds. Keys in
 * memory are left alone, and so are the keys after the first one the owner knows is held
 * nowhere (the get_start's prefix ends there). One-way: the call queues one
 * message (on the shared-memory ring when it fits, else the socket's out-queue) and returns
 * without waiting, ever; nothing tells whether or when the reads ended. A hint that fails on
 * the owner (a key gone meanwhile, no room) costs the later get its wait. A hint never
 * waits on the owner either: a key is read only into a slot free now (or one a grant brings),
 * never one eviction would have to make, so no put queues behind a prefetch (the owner's
 * counter prefetch_no_room counts the keys skipped for want of one); the copies it
 * brings in take room like any value (a tenant at its quota evicts its own coldest for
 * them: prefetch what will be read soon, not more). Keys as get_start's
 * (1..FLUXON_MAX_BATCH_KEYS NUL-terminated keys of 1..FLUXON_MAX_KEY_BYTES bytes, less
 * strlen(tenant) + 2 for a client of a tenant other than "default": its namespace), the
 * caller keeps ownership of keys. Returns FLUXON_OK (queued); FLUXON_ERR_BUSY (the owner's
 * queue for such messages is full now, the owner is behind: dropped, try a later hint);
 * FLUXON_ERR_INVALID_ARGUMENT (NULL keys, n_keys 0 or too many, a bad or too long key, a
 * batch that encodes past max_frame_bytes: nothing sent); FLUXON_ERR_NOMEM;
 * FLUXON_ERR_UNAVAILABLE (the owner is gone). Thread-safe, non-blocking. */
int fluxon_prefetch(fluxon_client *c, const char *const *keys, size_t n_keys);

/* Creates a lease of ttl_ms (1..86400000) ms at the master; values put with its id in
 * fluxon_put_options.lease_id are deleted when it expires. Returns FLUXON_OK;
 * FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_UNAVAILABLE; FLUXON_ERR_TIMEOUT. */
int fluxon_lease_grant(fluxon_client *c, uint64_t ttl_ms, uint64_t *lease_id_p);

/* Lists up to limit (1..10000) keys starting with prefix (may be ""), in lexicographic
 * order, after the key `after` (NULL: from the start) — for paging. For each key calls
 * cb(arg, key) (key NUL-terminated, valid during the call). *n_p receives the count.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_UNAVAILABLE;
 * FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM. */
int fluxon_list_keys(fluxon_client *c, const char *prefix, const char *after, uint32_t limit,
                     void (*cb)(void *arg, const char *key), void *arg, size_t *n_p);

/* Pins (or unpins) values this client's owner already holds (see Pins above): each key's
 * value is kept in the owner's hot tier for ttl_ms from now (replacing an earlier pin's
 * deadline), its whole atomic group with it.
 *  keys      n_keys NUL-terminated keys of this client's tenant (borrowed for the call);
 *            n_keys 1..FLUXON_MAX_BATCH_KEYS.
 *  ttl_ms    1..FLUXON_PIN_TTL_MAX_MS ms; 0 unpins (the value is evictable again at once,
 *            as a value just stored).
 *  flags     0 or FLUXON_PIN_REFRESH_ON_HIT (each hit on the owner restarts the TTL).
 *  statuses  required, n_keys entries, written on FLUXON_OK: FLUXON_OK (pinned, or unpinned
 *            with ttl_ms 0, also when it was not pinned); FLUXON_PIN_REFUSED (held, not
 *            pinned: the tenant's pinned-bytes budget would be exceeded — the owner logs
 *            the tenant, its pinned bytes and its budget); FLUXON_ERR_NOT_FOUND (this owner
 *            holds no published copy of the key: never put, deleted, evicted, or held by
 *            another owner only); FLUXON_ERR_KEY_BEING_WRITTEN (held here but not published
 *            yet: pin it once its put returned). A key named twice is acted on
 *            twice (the second pin replaces the first's deadline).
 * Returns FLUXON_OK (read statuses); FLUXON_ERR_INVALID_ARGUMENT before anything is sent
 * or changed (NULL c, keys or statuses, n_keys 0 or too many, a bad key, ttl_ms over
 * FLUXON_PIN_TTL_MAX_MS, unknown flags; the log names which); FLUXON_ERR_UNAVAILABLE (the
 * owner went away); FLUXON_ERR_TIMEOUT (no answer within timeout_ms: some pins may have
 * applied; pinning again is harmless); FLUXON_ERR_NOMEM. One round trip to the owner, no
 * master involved. Thread-safe. */
int fluxon_pin(fluxon_client *c, const char *const *keys, size_t n_keys, uint32_t ttl_ms, uint32_t flags,
               int *statuses);

/* Quotas (issue 42, docs/tenants.md): sets tenant's quota (the most slot bytes of its owner's
 * hot tier it may hold; 0: none) and/or guaranteed share (bytes other tenants' puts never
 * evict; 0: none) on this client's owner, at once, no restart; `fluxon stats` shows them.
 *  flags        FLUXON_TENANT_SET_QUOTA and/or FLUXON_TENANT_SET_GUARANTEED: which to change.
 *  admin_token  the owner's tenant_admin_token, or NULL/"": then only a client of tenant
 *               itself (which proved its tenant_token at HELLO) may change it, and only
 *               lower it (a higher or cleared quota, a higher guarantee: FLUXON_ERR_AUTH).
 * Returns FLUXON_OK (applied on this owner; it sends the change to the master, which pushes
 * it to every other owner and to owners that register later, each applying it within its
 * own checks);
 * FLUXON_ERR_INVALID_ARGUMENT (NULL c or tenant, a tenant that is not a name
 * ([A-Za-z0-9_.-], 1..32 bytes), no or unknown flags; or the owner's
 * refusal: a guarantee above the quota, guarantees summing above its hot tier — its
 * message names the values); FLUXON_ERR_NOT_FOUND (the owner does not list the tenant);
 * FLUXON_ERR_AUTH (neither the admin token nor a client of that tenant, or that client
 * raising its own limits); UNAVAILABLE,
 * TIMEOUT, NOMEM. Thread-safe. */
#define FLUXON_TENANT_SET_QUOTA 0x1u
#define FLUXON_TENANT_SET_GUARANTEED 0x2u
int fluxon_tenant_set(fluxon_client *c, const char *tenant, uint64_t quota_bytes, uint64_t guaranteed_bytes,
                      uint32_t flags, const char *admin_token);

/* ---------------------------------------------------------------------------------
 * Hostless API (ARCHITECTURE.md §8; after the SGLang/Fluxon hostless design).
 * A plan is a blob the library owns: {magic, count, value_ptrs[count]}; value_ptrs are
 * absolute addresses valid in THIS process (the owner's segment as mapped here). The
 * engine's kernel reads or writes value_len bytes at each address.
 *  - Alignment: every non-zero value_ptrs[i] is a multiple of 4096 (slots are whole
 *    4 KiB pages of a page-aligned mapping); a slot holds its value rounded up to 4 KiB.
 *  - Writes: everything the engine writes into a put plan — CPU stores, device copies,
 *    DMA — must be complete and visible to the CPU (stream synchronized) before
 *    fluxon_local_fast_put_commit is called; the owner publishes what is there then.
 *  - Reads: a value may be shorter than the layout the engine expects (another writer's
 *    value_len); fluxon_plan_value_lens gives each value's length. Reading past it reads
 *    the next slot.
 * Plans and get handles are identities, not addresses: once one is consumed (committed,
 * aborted, transferred, cancelled, released or expired), passing the same pointer again
 * returns FLUXON_ERR_WRONG_HANDLE and never acts on another plan or handle, even one a
 * thread obtained since (the library does not hand a consumed blob's address out again
 * until tens of GiB of plans later). Reading a consumed plan's fields is undefined.
 * ------------------------------------------------------------------------------- */
#define FLUXON_PUT_PLAN_MAGIC  0x4e414c5054555046ull /* "FPUTPLAN" */
#define FLUXON_READ_PLAN_MAGIC 0x4e414c5044414552ull /* "READPLAN" */
typedef struct fluxon_plan {
    uint64_t magic;          /* FLUXON_PUT_PLAN_MAGIC or FLUXON_READ_PLAN_MAGIC */
    uint64_t count;          /* entries in value_ptrs */
    uint64_t value_ptrs[];   /* 0 for a rejected key of a put plan */
} fluxon_plan;
typedef struct fluxon_future fluxon_future;

/* Reserves one slot per key in this client's owner and returns a put plan whose
 * value_ptrs[i] is where the engine writes key i's value_len bytes.
 *  keys        n_keys NUL-terminated keys (borrowed for the call); n_keys >= 1.
 *  value_len   bytes per value, 1..reserve.grant_bytes of the owner; a value's slot, and
 *              an atomic group's slots together, at most the owner's hot tier
 *              (hot_capacity_bytes, else hot_capacity_ratio x the payload capacity):
 *              else FLUXON_ERR_INVALID_ARGUMENT naming the hot tier (it would be evicted
 *              as soon as stored).
 *  opts        NULL or options; reject_if_inflight_same_key and
 *              reject_if_exist_same_key are always on for this path. pin_ttl_ms pins
 *              the values once published (fluxon_future_key_statuses reports
 *              FLUXON_PIN_REFUSED for a key whose pin did not fit its tenant's budget).
 *  plan_p      receives the plan (owned by the library; pass it to exactly one of
 *              fluxon_local_fast_put_commit / fluxon_put_abort).
 *  key_status  NULL or n_keys entries: FLUXON_OK, FLUXON_ERR_KEY_BEING_WRITTEN,
 *              FLUXON_ERR_KEY_EXISTS, FLUXON_ERR_GROUP_REJECTED (another member of the
 *              atomic group was rejected), FLUXON_ERR_NO_SPACE, FLUXON_ERR_INVALID_ARGUMENT
 *              (the same key twice). Rejected keys have value_ptrs[i] == 0.
 * Everything is validated before anything is reserved; on an error return nothing is
 * reserved and no counter moves. Returns FLUXON_OK (even when some keys were rejected —
 * read key_status; when all were rejected *plan_p is still a plan, of zeros, to abort);
 * FLUXON_ERR_INVALID_ARGUMENT (NULL pointers, n_keys 0, a bad key, value_len 0 or too
 * large, groups not > 0 or not summing to n_keys, mask length or non-uniform mask);
 * FLUXON_ERR_BUSY (this client holds client_limits.max_plans put plans of this owner
 * not yet committed or aborted, 1024 by default: nothing reserved; the owner logs the
 * limit); FLUXON_ERR_UNAVAILABLE; FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM. */
int fluxon_local_fast_put_start(fluxon_client *c, const char *const *keys, size_t n_keys,
                                uint64_t value_len, const fluxon_put_options *opts,
                                fluxon_plan **plan_p, int *key_status);

/* Commits a put plan once the engine wrote its values: they are readable through this
 * owner at once (local-read-ready, V1); the owner then publishes the batch to the master
 * in ONE request. *future_p (owned by the caller, fluxon_future_free) completes when the
 * values are global (FLUXON_OK) or failed. The plan is consumed.
 * Idempotent by plan identity: on FLUXON_ERR_TIMEOUT (the answer was lost or late: the
 * batch may or may not be committed) the plan stays live; commit it again to learn the
 * outcome: the retry returns FLUXON_OK and a future with the FIRST commit's outcome if
 * that one went through (the batch is never published twice), else it commits now. Do
 * not abort a plan whose commit timed out (WRONG_HANDLE if that commit went through).
 * Returns FLUXON_OK; FLUXON_ERR_WRONG_HANDLE (not a live put plan: a read plan, already
 * committed or aborted, unknown pointer, or expired: the owner released it when it was
 * neither committed nor aborted within its put_plan_ttl_ms, 20000 by default, and logs
 * so: its keys can be written again at once, but its slots are kept (not reused) while
 * this client is connected, since its engine may still be writing through value_ptrs;
 * this commit or an abort of the expired plan answers WRONG_HANDLE and releases them, as
 * does closing the client); FLUXON_ERR_INVALID_ARGUMENT (NULL);
 * FLUXON_ERR_STALE (the owner restarted); FLUXON_ERR_UNAVAILABLE; FLUXON_ERR_TIMEOUT. */
int fluxon_local_fast_put_commit(fluxon_client *c, fluxon_plan *plan, fluxon_future **future_p);

/* Releases every slot of a put plan that was not committed; the plan is consumed. On
 * FLUXON_ERR_TIMEOUT the plan stays live; a retried abort returns FLUXON_OK when the
 * first one went through. Returns FLUXON_OK; FLUXON_ERR_WRONG_HANDLE (committed, aborted, a read plan, unknown);
 * FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_UNAVAILABLE; FLUXON_ERR_TIMEOUT. */
int fluxon_put_abort(fluxon_client *c, fluxon_plan *plan);

/* Futures: the outcome of a commit. wait blocks up to timeout_ms and returns the batch
 * outcome (FLUXON_OK, or the first key's error: FLUXON_ERR_KEY_EXISTS,
 * FLUXON_ERR_GROUP_REJECTED, FLUXON_ERR_UNAVAILABLE (client closed or owner gone) ...)
 * or FLUXON_ERR_TIMEOUT if not done yet (the future stays usable); poll returns
 * FLUXON_IN_PROGRESS until done, then the outcome. A future holds no file descriptor:
 * fd makes one on its first call (an eventfd; -1 when the process has no fd left) that
 * is readable once done and stays readable (level-triggered; for epoll; do not read or
 * close it); free releases the future (NULL: no-op; safe before completion) and its fd.
 * All thread-safe. A future outlives its client: after fluxon_client_close every call
 * above still works on it (one not done by then completed FLUXON_ERR_UNAVAILABLE at the
 * close), and it must still be freed. */
int  fluxon_future_wait(fluxon_future *f, uint32_t timeout_ms);
int  fluxon_future_poll(fluxon_future *f);
/* Each key's outcome of a done commit future (fluxon_local_fast_put_commit): for every key
 * accepted at put_start (value_ptrs[i] != 0) key_status[i] becomes FLUXON_OK (stored and
 * published) or why that key alone was not: FLUXON_ERR_KEY_EXISTS (another owner
 * published the key first), FLUXON_ERR_GROUP_REJECTED (another member of its atomic group
 * was refused), FLUXON_ERR_LEASE_EXPIRED, FLUXON_ERR_NOMEM, or FLUXON_PIN_REFUSED (stored
 * and published but not pinned: opts asked for pin_ttl_ms and the tenant's pinned-bytes
 * budget was full); or, when the batch failed as a
 * whole (the owner restarted or went away), the future's status. Entries of keys refused
 * at put_start are left as they are: pass the array put_start filled and it ends with
 * every key's outcome. n_keys: the plan's key count. Returns FLUXON_OK;
 * FLUXON_IN_PROGRESS (not done: nothing written); FLUXON_ERR_INVALID_ARGUMENT (NULL,
 * n_keys not the plan's count, or not a commit's future). Thread-safe, never blocks. */
int  fluxon_future_key_statuses(fluxon_future *f, int *key_status, size_t n_keys);
int  fluxon_future_fd(const fluxon_future *f);
void fluxon_future_free(fluxon_future *f);

typedef struct fluxon_get_start_result {
    uint64_t raw_prefix_hit_len;     /* leading keys that hit (page granularity) */
    uint64_t transferable_len;       /* raw rounded DOWN to a whole atomic group */
    uint64_t prefix_hit_groups;      /* whole groups inside transferable_len */
    int64_t  first_miss_index;       /* -1 when all hit */
    int64_t  first_miss_group_index; /* -1 when all hit */
    int      all_hit;                /* every key hit (not only the prefix) */
    int      miss_status;            /* why key first_miss_index missed: FLUXON_ERR_NOT_FOUND
                                        (no value), _NO_SPACE (no room here for the copy),
                                        _UNAVAILABLE / _TIMEOUT (no master, or the copy's
                                        transfer failed), _BUSY (this client pins its
                                        share, client_limits.max_pinned_bytes, of the
                                        owner: release some), _NOMEM, _INTERNAL; 0 when
                                        all hit */
} fluxon_get_start_result;
typedef struct fluxon_get_handle fluxon_get_handle;

/* Plans the restore of a batch of page keys in order: pins the longest restorable
 * prefix (never cutting an atomic group) in this owner, fetching values held by other
 * owners first, and releases everything past it at once.
 *  keys/n_keys        the batch (n_keys >= 1; keys borrowed for the call).
 *  prefix_best_effort non-zero: transferable_len is the longest whole-group prefix;
 *                     zero: all-or-nothing (transferable_len is n_keys or 0).
 *  atomic_group_lens  NULL (each key its own group) or n_atomic_groups lengths > 0
 *                     summing to n_keys (e.g. the TP ranks of a page, or a radix node).
 *  handle_p           receives the handle (owned by the library): consume it with
 *                     exactly one of fluxon_get_transfer / fluxon_cancel_get_transfer.
 *                     Unconsumed after the owner's handle_ttl_ms (default 30000 ms) it
 *                     expires: this client's library cancels it (within a quarter of the
 *                     TTL, at most 1 s later) and it is then FLUXON_ERR_WRONG_HANDLE. The
 *                     owner never expires a handle itself, so a read plan returned by
 *                     fluxon_get_transfer holds its pins until fluxon_release_views, however
 *                     late the owner reads the consume (only the client's close or death
 *                     releases them earlier — or the owner's client_limits.pin_expire_ms,
 *                     600000 by default: a client holding a pin longer is disconnected by
 *                     the owner, every plan, handle and pin of it revoked, and its calls
 *                     then fail as with an owner that went away).
 *  result             receives the prefix figures.
 * Returns FLUXON_OK (also when nothing hit); FLUXON_ERR_INVALID_ARGUMENT;
 * FLUXON_ERR_BUSY (this client holds client_limits.max_handles get handles of the owner
 * not yet consumed, 4096 by default: nothing pinned); FLUXON_ERR_UNAVAILABLE;
 * FLUXON_ERR_STALE; FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM. */
int fluxon_get_start(fluxon_client *c, const char *const *keys, size_t n_keys,
                     int prefix_best_effort, const uint32_t *atomic_group_lens,
                     size_t n_atomic_groups, fluxon_get_handle **handle_p,
                     fluxon_get_start_result *result);

/* Consumes the handle: returns a read plan for the first consume_prefix_len values
 * (0 = all of transferable_len; otherwise > 0, <= transferable_len and on an atomic
 * group boundary), each readable at value_ptrs[i] until fluxon_release_views; the rest
 * is released. An invalid consume_prefix_len returns FLUXON_ERR_INVALID_ARGUMENT and
 * leaves the handle usable. Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT;
 * FLUXON_ERR_WRONG_HANDLE (consumed, cancelled, expired or unknown handle);
 * FLUXON_ERR_STALE (owner restarted); FLUXON_ERR_NOMEM. No round trip: the values were
 * pinned by get_start. */
int fluxon_get_transfer(fluxon_client *c, fluxon_get_handle *h, uint64_t consume_prefix_len,
                        fluxon_plan **plan_p);

/* Consumes the handle without transferring: every pinned value is released.
 * Returns FLUXON_OK; FLUXON_ERR_WRONG_HANDLE; FLUXON_ERR_INVALID_ARGUMENT. */
int fluxon_cancel_get_transfer(fluxon_client *c, fluxon_get_handle *h);

/* The length in bytes of each value of a live plan of client c: count entries parallel to
 * value_ptrs (a put plan: value_len, 0 for a rejected key; a read plan: the length each
 * value was stored with — it may differ from the length the engine expects when another
 * writer stored the key). Valid as long as the plan is (owned by the library, like the
 * plan). NULL when c or plan is NULL, or plan is not a live plan of c (consumed, forged,
 * a get handle). No round trip, never blocks. */
const uint64_t *fluxon_plan_value_lens(fluxon_client *c, const fluxon_plan *plan);

/* Releases a read plan's values (the plan is consumed). Returns FLUXON_OK;
 * FLUXON_ERR_WRONG_HANDLE (a put plan, released already, unknown pointer);
 * FLUXON_ERR_INVALID_ARGUMENT. */
int fluxon_release_views(fluxon_client *c, fluxon_plan *plan);

/* ---------------------------------------------------------------------------------
 * Batch copy API (Mooncake's batch_put_from / batch_get_into shape): for bindings and
 * engines that hand buffers instead of writing into plans. Each call is one hostless
 * round (one put_start + commit, or one get_start + get_transfer + release_views) and
 * copies in the calling thread with memcpy. Thread-safe like the calls it is built on;
 * the caller must not modify (put) or read (get) the buffers during the call. Blocking:
 * put at most three commit attempts of timeout_ms each plus timeout_ms for the
 * publication; get as fluxon_get_start.
 * ------------------------------------------------------------------------------- */

/* Stores n_keys values, key i's from src_ptrs[i] (lens[i] bytes, copied; the buffers are
 * borrowed for the call), through ONE put_start on this client's owner, then commits and
 * waits until the master published them (as fluxon_put).
 *  keys        n_keys NUL-terminated keys (1..FLUXON_MAX_BATCH_KEYS, as put_start).
 *  src_ptrs    n_keys non-NULL sources.
 *  lens        n_keys lengths, all EQUAL and 1..the owner's reserve.grant_bytes (one
 *              put_start reserves one slot size; split a batch of mixed lengths).
 *  opts        NULL or options as fluxon_local_fast_put_start (atomic groups included;
 *              reject_if_inflight and reject_if_exist are always on).
 *  per_key_status  required, n_keys entries, written whenever the arguments were valid:
 *              FLUXON_OK (stored and published), the put_start rejections
 *              (FLUXON_ERR_KEY_EXISTS, _KEY_BEING_WRITTEN, _GROUP_REJECTED, _NO_SPACE,
 *              _INVALID_ARGUMENT for the same key twice), or for accepted keys the
 *              key's own outcome when it was not FLUXON_OK (fluxon_future_key_statuses:
 *              FLUXON_ERR_KEY_EXISTS when another owner published that key first, the
 *              other keys stay FLUXON_OK; FLUXON_PIN_REFUSED: stored, not pinned), or when the batch failed as a whole its status (e.g.
 *              FLUXON_ERR_TIMEOUT: readable through this owner, publication not
 *              confirmed within timeout_ms; FLUXON_ERR_STALE / _UNAVAILABLE).
 * Returns FLUXON_OK when the batch ran (even if some keys were rejected: read
 * per_key_status); FLUXON_ERR_INVALID_ARGUMENT (a NULL pointer, n_keys 0, src_ptrs[i]
 * NULL, lens[i] 0, lens not all equal — the log names the key index and both lengths —,
 * a bad key or option, a length over the grant: nothing stored); FLUXON_ERR_STALE /
 * FLUXON_ERR_UNAVAILABLE (the owner restarted or went away); FLUXON_ERR_TIMEOUT
 * (put_start unanswered: nothing reserved); FLUXON_ERR_NOMEM. */
int fluxon_batch_put_from(fluxon_client *c, const char *const *keys, size_t n_keys,
                          const void *const *src_ptrs, const uint64_t *lens,
                          const fluxon_put_options *opts, int *per_key_status);

/* Restores a batch of keys in order into the caller's buffers: ONE get_start (prefix
 * semantics, atomic groups and cross-owner fetches as fluxon_get_start), then the values
 * of the restored prefix are copied to dst_ptrs[i] and released at once. Each restored
 * value must be EXACTLY dst_lens[i] bytes: a value of another length (shorter or longer:
 * another writer's layout, dtype or page size under the same key) is never copied and
 * stops the prefix like a miss, so a short value can never pass for a whole page.
 *  dst_ptrs/dst_lens  n_keys non-NULL destinations and the exact length in bytes (>= 1)
 *              each value must have.
 *  prefix_best_effort, atomic_group_lens, n_atomic_groups  as fluxon_get_start.
 *  per_key_status  required, n_keys entries: FLUXON_OK for the restored keys
 *              [0, *n_restored_p); the key that stopped the prefix gets why
 *              (FLUXON_ERR_NOT_FOUND, _NO_SPACE, _UNAVAILABLE, _TIMEOUT: the get_start
 *              miss_status; FLUXON_ERR_INVALID_ARGUMENT: its value is not dst_lens[i]
 *              bytes long); keys before it that were not restored (the rest of its
 *              atomic group; every key, all-or-nothing) FLUXON_ERR_GROUP_REJECTED; keys
 *              after it FLUXON_ERR_CANCELLED (not restored: past the prefix).
 *  value_lens  NULL or n_keys entries: the bytes copied per key (0 past the prefix).
 *  n_restored_p  required: how many leading keys were copied (a whole number of groups).
 * Outputs are written on FLUXON_OK and on the length error below.
 * Returns FLUXON_OK (also when nothing hit: *n_restored_p is 0);
 * FLUXON_ERR_INVALID_ARGUMENT before anything is looked up (a NULL pointer, n_keys 0,
 * dst_ptrs[i] NULL or dst_lens[i] 0, a bad key or groups), or after the copy when a
 * restored value's length was not its dst_lens[i]: the keys before that key's atomic
 * group (none, all-or-nothing) were copied, that group and the rest are untouched, the
 * log names the key index, the value's length and dst_lens[i]; FLUXON_ERR_UNAVAILABLE;
 * FLUXON_ERR_STALE; FLUXON_ERR_TIMEOUT (also a handle that expired between get_start and
 * the copy); FLUXON_ERR_NOMEM. */
int fluxon_batch_get_into(fluxon_client *c, const char *const *keys, size_t n_keys,
                          void *const *dst_ptrs, const uint64_t *dst_lens,
                          int prefix_best_effort, const uint32_t *atomic_group_lens,
                          size_t n_atomic_groups, int *per_key_status, uint64_t *value_lens,
                          size_t *n_restored_p);

#ifdef __cplusplus
}
#endif
#endif /* FLUXON_H */
