/* master_int.h — the master's node and connection state (master.c) and the entry points
 * of its KV state (kv.c, stats.c; the request handlers are in mkv.h) that master.c calls.
 * Reactor thread only. */
#ifndef FX_MASTER_INT_H
#define FX_MASTER_INT_H

#include "master.h"
#include "chaos.h"
#include "master_metrics.h"

struct fx_offset_alloc;
struct fx_hmap;
struct fx_prefix_index;

typedef struct master_node {
    char node_id[FX_ID_MAX];
    uint8_t role;      /* fx_role_t */
    uint8_t node_role; /* fx_node_role_t */
    uint64_t generation;
    bool alive;
    uint64_t segment_bytes, segment_base;
    uint64_t last_heartbeat_ms;
    uint64_t dead_since_ms;        /* when it was declared dead (L1) */
    bool forgotten;                /* dead past dead_owner_grace_ms: its state is gone (L1) */
    struct master_peer *peer; /* live connection, or NULL */
    uint8_t *ucx_address, *rkey;
    uint32_t ucx_address_len, rkey_len;
    uint64_t grant_bytes;
    char sub_cluster[FX_ID_MAX]; /* "" = none (placement: preferred_sub_cluster) */
    uint64_t placed_bytes;       /* bytes of ranges allocated for placed values (this generation) */
    struct fx_offset_alloc *alloc; /* payload range [lo_end, segment_bytes) of this generation:
                                    * placed and appended ranges, and grants */
    struct fx_offset_alloc *alloc_lo; /* [4096, lo_end): grants only (W2: no push ever lands
                                       * there, so a quarantined owner is granted from it) */
    uint64_t lo_end;
    struct mkv_reuse_q *reuse_q;   /* reuse.c: ranges of alloc freed, reusable later (issue 38) */
    uint64_t next_grant_id;
    uint64_t *grant_ids, *grant_offs; /* grants the owner holds (this generation): a GRANT_RETURN
                                       * frees only these, so a repeated return is harmless */
    uint32_t n_grants, cap_grants;
    /* during REGISTER only: the grants the owner already holds (a restarted master
     * re-learns them so it never hands the same range out twice) */
    const uint64_t *reg_grant_ids, *reg_grant_offsets;
    uint32_t reg_n_grants;
    uint64_t reg_prev_master_generation; /* REGISTER only: the master it was registered with before */
    uint64_t quarantine_until_ms; /* W2: nothing (placed or appended range, grant) is allocated in
                                   * its segment before this (fx_now_ms): pushes the master it had
                                   * before started may still land in ranges this one knows nothing
                                   * of (quarantine.c) */
    uint64_t quarantine_since_ms, registered_ms;
    fx_strv_t reg_peer_ids;       /* REGISTER only: the owners its earlier master announced */
    fx_u64v_t reg_peer_gens;
    struct fx_mq_peer *q_wait;    /* quarantine.c: those writers not known done yet */
    uint32_t n_q_wait;
    bool q_wait_unknown;          /* the owner named no usable list: the quarantine runs to its end */
    bool q_report;                /* quarantined until its last REPUBLISH batch: the values it holds in
                                   * ranges the earlier master placed are not known here yet */
    char (*unsettled)[FX_ID_MAX]; /* the owners this one last said it has unsettled pushes to */
    uint32_t n_unsettled;
    void *kv; /* publish.c's per-node state (batch dedup); set once registered */
    uint64_t rp_keys, rp_ok, rp_stale, rp_replaced; /* republish.c: this re-publication's totals so far */
    bool rp_pending; /* registered from another master, its last REPUBLISH batch not in yet (tombs.c) */
    uint64_t rp_until_ms; /* ... counted so until then at most (dead_owner_grace_ms after its registration:
                           * a report abandoned without a new registration holds nothing for ever) */
    struct fx_mkv_inv *inv_held; /* routes.c: INVALIDATEs for this generation while it was not
                                  * connected, sent when it reconnects (issue 17) */
    struct fx_mkv_inv *inv_recent[2]; /* routes.c: one-way INVALIDATEs of its disk records sent
                                       * lately ([0] since inv_recent_ms, [1] the period before) */
    uint64_t inv_recent_ms;
    uint64_t placed_quiet_until_ms; /* publish.c: a PLACED it did not confirm: until then no placed put
                                     * waits for it, and the placement passes it over (fx_now_ms) */
} master_node_t;

typedef struct master_peer {
    struct master_peer *prev, *next;
    fx_master_t *m;
    fx_conn_t *conn;
    bool hello_ok;
    uint8_t role;
    char node_id[FX_ID_MAX];
    master_node_t *node; /* set by REGISTER */
} master_peer_t;

/* tenants.c (issue 42): the latest quota and guarantee per tenant (fields: which were given):
 * the config's "tenants", then pushed or read from etcd */
typedef fx_tenant_quota_t fx_mtenant_t;

struct fx_master {
    fx_reactor_t *r;
    fx_config_t cfg;
    uint64_t generation;
    int listen_fd;
    uint16_t port;
    fx_acceptor_t *acceptor;
    int unix_fd;                   /* "socket": owners on this host connect here; -1 = none */
    fx_acceptor_t *unix_acceptor;
    master_peer_t *peers;
    master_node_t **nodes;
    size_t n_nodes, cap_nodes;
    fx_timer_t liveness_timer;
    uint64_t liveness_last_ms; /* the liveness check's last run (a late one: this master stalled) */
    bool shutting_down;
    bool resetting; /* a deposed master closes its connections (issue 17) */
    void *kv; /* the KV state (mkv.h): routes, leases, in-flight records, counters */
    void *ha; /* ha.c's election state (master_ha.h); NULL without "ha" */
    /* metrics (FX_MASTER_NODE_METRICS) */
    uint64_t registrations, reregistrations, reconnects, owners_declared_dead, owners_forgotten;
    size_t n_peers;
    fx_reply_counts_t replies; /* every peer connection counts its replies here */
    fx_chaos_t chaos;          /* test message chaos on every peer connection (issue 17) */
    bool chaos_on;
    fx_mtenant_t tenants[FX_TENANT_TABLE_MAX]; /* tenants.c (issue 42) */
    uint32_t n_tenants;
    uint64_t tenant_pushes, tenant_table_loads, tenant_table_refused;
};

/* tenants.c (issue 42): an owner's TENANT_PUSH (kept, sent on to the other owners); the
 * table sent to an owner that just registered. */
FX_INTERNAL void fx_mtenants_push(master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena);
FX_INTERNAL void fx_mtenants_registered(fx_master_t *m, master_peer_t *p);
/* The starting table: the config's "tenants" (at create, before any owner registers). */
FX_INTERNAL void fx_mtenants_init(fx_master_t *m);
/* A tenants table read from etcd (HA: master_ha.h): {"NAME": {"quota_bytes": N | "SIZE",
 * "guaranteed_bytes": ...}, ...}, each field optional (fx_tenant_table_parse); "" when the key
 * is absent: then the config's table, which the leader stores there (when it has one).
 * Replaces the master's table; each entry that changed is sent to every owner. One not
 * valid changes nothing (logged, counted tenant_table_refused). */
FX_INTERNAL void fx_mtenants_load(fx_master_t *m, const char *json);

/* kv.c, called by master.c */
FX_INTERNAL int fx_master_kv_init(fx_master_t *m);
FX_INTERNAL void fx_master_kv_fini(fx_master_t *m);
/* Every put id issued from now on is above (put_ms, any): a new leader's floor (W6). */
FX_INTERNAL void fx_master_kv_put_floor(fx_master_t *m, uint64_t put_ms);
/* This master starts serving (an HA election): the re-publication window opens (tombs.c). */
FX_INTERNAL void fx_master_kv_serving(fx_master_t *m);
/* The liveness tick: the re-publication window's end is noticed (its deletes let go). */
FX_INTERNAL void fx_master_kv_tick(fx_master_t *m);
/* A node registered (new or new generation: old_generation != generation, 0 if new).
 * Resets its allocator and drops every replica of an older generation. */
FX_INTERNAL int fx_master_kv_node_registered(fx_master_t *m, master_node_t *n, uint64_t old_generation);
FX_INTERNAL void fx_master_kv_node_dead(fx_master_t *m, master_node_t *n);
FX_INTERNAL void fx_master_kv_node_free(fx_master_t *m, master_node_t *n);
/* L1: n is dead past the grace: its replicas leave the routes (routes left empty are
 * deleted), its held INVALIDATEs, allocator, grants and batch answers go. */
FX_INTERNAL void fx_master_kv_node_forget(fx_master_t *m, master_node_t *n);
/* What the master publishes: the catalog's numbers and the replies by op and status. */
struct fx_master_snap {
    fx_mmetrics_t m;
    fx_reply_counts_t replies;
};
/* stats.c: fills the KV rows (FX_MASTER_KV_GAUGES, FX_MASTER_KV_COUNTERS) of m */
FX_INTERNAL void fx_master_kv_metrics(fx_master_t *m, fx_mmetrics_t *mm);
/* stats.c: the `master-stats` JSON document of a snapshot; its length, 0 when over cap */
FX_INTERNAL size_t fx_master_stats_json(const fx_master_snap_t *s, char *buf, size_t cap);

#endif
