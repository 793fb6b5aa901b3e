/* owner_int.h — the owner role's core: struct fx_owner, from which every owner module hangs
 * its own state (a module's struct is defined in its .c and touched only there; the others
 * go through its functions), the external connection record, and the test-fault helper.
 * Layers inside owner/, lowest first:
 *   store (entries, index, holders)  peers (UCX)  master_link  ext (externals)
 *   claims (grants)  evict  pins  place  put  fetch  get  republish  stats  owner.c (lifecycle, dispatch)
 * A module calls only modules below it; upward news travels through hooks registered at
 * init (store hooks, claims policy, place callbacks, fetch completion, link and ext hooks).
 * Reactor thread only. */
#ifndef FX_OWNER_INT_H
#define FX_OWNER_INT_H

#include <pthread.h>
#include <string.h>

#include "owner.h"
#include "owner_metrics.h"
#include "chaos.h"
#include "prefault.h"
#include "segment.h"

/* One external client connected on the owner's unix socket (ext.c). */
typedef struct owner_ext {
    struct owner_ext *prev, *next;
    fx_owner_t *o;
    fx_conn_t *conn;              /* where the request being served replies: sock, or the ring's conn */
    fx_conn_t *sock;              /* the unix socket (HELLO, liveness, notifications) */
    struct owner_ring *ring;      /* shared-memory rings (ext_ring.c), NULL if none */
    bool hello_ok;
    char node_id[FX_ID_MAX];
    struct owner_holder *holders; /* pins this external holds, newest first (store.c; released when it goes) */
    struct owner_holder *holders_tail; /* its oldest pin (client_limits.pin_expire_ms, issue 44 C3) */
    uint64_t pinned_bytes;        /* slot bytes its pins hold (store.c; client_limits.max_pinned_bytes) */
    uint32_t n_handles;           /* get handles not yet consumed (get.c; client_limits.max_handles) */
    struct owner_plan *plans;     /* put plans not yet committed (put.c) */
    struct owner_handle *handles; /* get handles not yet consumed (get.c) */
    uint64_t unknown_unlogged;    /* ext.c: unknown ids it named since the last log line */
    uint64_t unknown_log_ms;      /* ext.c: when that line was written (0: never) */
    /* tenant.c (issue 42): its tenant, and the prefix its keys carry inside the cluster
     * (FLUXON_TENANT_KEY_MARK, the name, '/'; none for "default") */
    int tenant;                   /* index of its tenant (tenant.c's table), -1 before HELLO */
    uint8_t tag_len;
    char tag[FX_TENANT_NAME_MAX + 2];
} owner_ext_t;

struct fx_owner {
    fx_reactor_t *r;
    fx_config_t cfg;
    uint64_t generation;
    fx_segment_t *seg;
    bool shutting_down;
    uint64_t faults_applied; /* test faults (delay_request) applied so far */
    uint64_t oracle_failures; /* oracle.c: values test.value_oracle found to be another key's */
    uint64_t refuse_log_ms, refuse_quiet; /* ext.c: refused clients, logged once a second */
    /* module state, each defined and touched by its own .c */
    struct olink *link;      /* master_link.c */
    struct oext_state *ext;  /* ext.c */
    struct ostore *store;    /* store.c */
    struct opeers *peers;    /* peers.c */
    struct oclaims *claims;  /* claims.c */
    struct oev *ev;          /* evict.c */
    struct oplace *place;    /* place.c */
    struct oput *put;        /* put.c */
    struct ofetch *fetch;    /* fetch.c */
    struct oget_state *get;  /* get.c */
    struct orepl *repl;      /* replica.c (issue 16) */
    struct oelse *elsewhere; /* elsewhere.c (issue 38) */
    struct orepub *repub;    /* republish.c */
    struct owbm *wbm;        /* wbmap.c (issue 38): the copies this owner wrote back */
    struct odisk *disk;      /* disk.c (issue 39) */
    struct otenant *tenant;  /* tenant.c (issue 42; made and freed with ext.c's state) */
    struct opin *pin;        /* pins.c (issue 42; made and freed with put.c's state) */
    /* owner.c */
    struct owner_held *held; /* test fault delay_request: externals' requests held back */
    fx_chaos_t chaos;        /* test message chaos (issue 17): set at create, read by fx_owner_chaos */
    bool chaos_on;
    fx_ready_fn ready;
    void *ready_arg;
    bool ready_sent;
    /* prefault.c */
    fx_prefault_t prefault; /* faults the segment in while the owner registers */
    uint32_t peer_map_logged; /* peer_map.c: the reasons a peer stayed on UCX, logged once each */
};

/* Test-only (config "test": fault `kind` of message msg): true when it applies now
 * (counted against fault_count). */
static inline bool fx_owner_fault(fx_owner_t *o, int kind, const char *msg)
{
    if (o->cfg.fault_kind != kind || strcmp(o->cfg.fault_message, msg)) return false;
    if (o->cfg.fault_count && o->faults_applied >= o->cfg.fault_count) return false;
    o->faults_applied++;
    return true;
}

/* The message chaos to hand the owner's connections (master link, externals), NULL when
 * the config's "test" section sets none (chaos.h). */
static inline fx_chaos_t *fx_owner_chaos(fx_owner_t *o) { return o->chaos_on ? &o->chaos : NULL; }

/* The owners a master (of master_generation) says are alive (CLUSTER_INFO): n ids and
 * generations, and the UCX addresses, rkeys and segment bases they registered. */
typedef struct fx_olink_owners {
    uint64_t master_generation;
    const fx_str_t *ids;
    const uint64_t *generations;
    const fx_str_t *addresses, *rkeys;
    const uint64_t *bases;
    size_t n;
} fx_olink_owners_t;

/* delay_request: this request to the master is held back fault_ms */
static inline bool fx_owner_fault_delay(fx_owner_t *o, const char *msg)
{
    return fx_owner_fault(o, FX_FAULT_DELAY_REQUEST, msg);
}

#endif
