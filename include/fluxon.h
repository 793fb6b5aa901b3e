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
    FLUXON_ERR_AUTH              = -12, /* wrong cluster token, cluster id or version */
    FLUXON_ERR_WRONG_HANDLE      = -13, /* handle/plan of the wrong type or state */
    FLUXON_ERR_CANCELLED         = -14, /* operation cancelled (shutdown, cancel call) */
    FLUXON_ERR_LEASE_EXPIRED     = -15, /* the lease bound to the value expired */
    FLUXON_ERR_CONFIG            = -16, /* configuration rejected (message names field) */
    FLUXON_ERR_NOMEM             = -17, /* process memory allocation failed */
    FLUXON_ERR_INTERNAL          = -18  /* a bug: an invariant did not hold */
};

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
 *               fluxon_node_stop exactly once.
 * Waits at most the node's start timeout ("start_timeout_ms", default 10000 ms).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL argument);
 * FLUXON_ERR_CONFIG (the config was rejected; the reason is logged, naming the field);
 * FLUXON_ERR_UNAVAILABLE (listen/bind failed, or the owner's master was unreachable
 * for the whole start timeout); FLUXON_ERR_AUTH (the master refused the owner);
 * FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM; FLUXON_ERR_INTERNAL. */
int fluxon_node_start(const char *config_json, fluxon_node **node_p);

/* Stops the node: closes every connection, unlinks an owner's socket, joins the thread
 * and frees the node. NULL is a no-op. Not safe to call twice on the same node. */
void fluxon_node_stop(fluxon_node *node);

/* The TCP port a master node listens on (the bound port when its "listen" asked for
 * port 0); 0 for an owner node or NULL. Valid while the node runs. */
uint16_t fluxon_node_port(const fluxon_node *node);

/* ---------------------------------------------------------------------------------
 * External client: attaches to the owner whose unix socket config_json names.
 * ------------------------------------------------------------------------------- */
typedef struct fluxon_client fluxon_client;

/* Opens a client: connects to the owner's socket ("socket" in config_json), performs
 * the HELLO handshake and starts the client's reactor thread.
 *  config_json  borrowed for the call: {"role":"external","cluster_id",...,"socket"}.
 *  client_p     receives the client; the caller owns it (fluxon_client_close).
 * Waits at most "timeout_ms" (default 30000 ms) for the owner.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_CONFIG;
 * FLUXON_ERR_UNAVAILABLE (no owner listening at the socket); FLUXON_ERR_AUTH (wrong
 * cluster id/token or protocol version); FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM. */
int fluxon_client_open(const char *config_json, fluxon_client **client_p);

/* Closes the client: releases everything it holds at its owner, stops its thread and
 * frees it. NULL is a no-op. The caller must not use the client in another thread
 * during or after this call. */
void fluxon_client_close(fluxon_client *client);

/* Writes a JSON object with the client's counters and its owner's counters into json
 * (cap bytes, NUL-terminated on success). *len_p receives strlen of the document; when
 * cap is too small, returns FLUXON_ERR_INVALID_ARGUMENT and sets *len_p to the size
 * needed (excluding the NUL) so the caller can retry.
 * Keys: "client": {"requests", "errors", "timeouts"}, "owner": {"node_id",
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

/* Writes the cluster's node table as a JSON array into json (same cap/len_p rules as
 * fluxon_client_stats): [{"node_id","role","generation","alive","segment_bytes"}...].
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_UNAVAILABLE;
 * FLUXON_ERR_TIMEOUT; FLUXON_ERR_NOMEM. */
int fluxon_client_cluster_nodes(fluxon_client *client, char *json, size_t cap,
                                size_t *len_p);

#ifdef __cplusplus
}
#endif
#endif /* FLUXON_H */
