/* master.c — the control plane's master role, the top of master/: accepts owners on TCP,
 * checks HELLO, registers owners (node_id, generation, role, segment, UCX address and
 * rkey), tracks heartbeats and declares silent owners dead, answers cluster queries, and
 * dispatches KV requests to the modules of mkv.h (no file there calls back into this
 * one). Payload bytes never pass through here. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "jsonbuf.h"
#include "master_ha.h"
#include "mkv.h"
#include "unix.h"

static void master_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena);
static void master_on_close(fx_conn_t *c, int status);
static const fx_conn_ops_t master_peer_ops = {master_on_request, master_on_close, NULL};

static master_node_t *master_find_node(fx_master_t *m, const char *node_id)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (strcmp(m->nodes[i]->node_id, node_id) == 0) return m->nodes[i];
    return NULL;
}

static master_node_t *master_add_node(fx_master_t *m, const char *node_id)
{
    if (m->n_nodes == m->cap_nodes) {
        size_t nc = m->cap_nodes ? m->cap_nodes * 2 : 16;
        master_node_t **nn = fx_realloc(m->nodes, nc * sizeof *nn);
        if (!nn) return NULL;
        m->nodes = nn;
        m->cap_nodes = nc;
    }
    master_node_t *n = fx_calloc(1, sizeof *n);
    if (!n) return NULL;
    fx_strlcpy(n->node_id, node_id, sizeof n->node_id);
    m->nodes[m->n_nodes++] = n;
    return n;
}

/* Tells every connected owner how many owners are alive (one-way): an owner that is
 * alone can answer misses without asking the master (nobody else can hold the key). With
 * remote_cache owners (issue 38): how many of the alive take puts (not remote_cache), and
 * whether any remote_cache owner holds replicas now (placed bytes, re-published ones too):
 * a GPU owner that saw no other GPU owner and no such replica when it joined knows every
 * copy on them is one it made. */
static void master_broadcast_info(fx_master_t *m)
{
    uint64_t alive = 0, gpu_alive = 0, targets_held = 0;
    size_t cap = m->n_nodes ? m->n_nodes : 1;
    fx_str_t *ids = fx_malloc(cap * 3 * sizeof *ids), *addrs = ids ? ids + cap : NULL, *rkeys = ids ? ids + 2 * cap : NULL;
    uint64_t *gens = fx_malloc(cap * 2 * sizeof *gens), *bases = gens ? gens + cap : NULL;
    uint32_t k = 0;
    for (size_t i = 0; i < m->n_nodes; i++) {
        const master_node_t *n = m->nodes[i];
        alive += n->alive;
        gpu_alive += n->alive && n->node_role != FX_NODE_REMOTE_CACHE;
        targets_held |= n->node_role == FX_NODE_REMOTE_CACHE && n->placed_bytes > 0;
        if (n->alive && ids && gens) { /* W2: the writers a later master must wait for (quarantine.c) */
            ids[k] = fx_str_c(n->node_id);
            addrs[k] = (fx_str_t){(const char *)n->ucx_address, n->ucx_address_len};
            rkeys[k] = (fx_str_t){(const char *)n->rkey, n->rkey_len};
            bases[k] = n->segment_base;
            gens[k++] = n->generation;
        }
    }
    if (!ids || !gens) { /* out of memory: no list (a later master then keeps the whole quarantine) */
        FX_ERROR("master: out of memory listing the alive owners for CLUSTER_INFO");
        k = 0;
    }
    fx_body_cluster_info_t b = {alive, gpu_alive, targets_held, {ids, k}, {gens, k}, {addrs, k}, {rkeys, k}, {bases, k}};
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i]->peer)
            FX_CONN_SEND(m->nodes[i]->peer->conn, FX_MSG_CLUSTER_INFO, 0, 0, 0, cluster_info, &b);
    fx_free(ids);
    fx_free(gens);
}

static void master_mark_dead(fx_master_t *m, master_node_t *n, const char *why)
{
    if (!n->alive) return;
    n->alive = false;
    n->dead_since_ms = fx_now_ms();
    m->owners_declared_dead++;
    fx_master_kv_node_dead(m, n);
    master_broadcast_info(m);
    /* a closed connection is usually an orderly stop (the master cannot tell it from a
     * process that ended): info, in plain words; silence is a failure: warn */
    if (!strcmp(why, "connection lost"))
        FX_INFO("owner %s (generation %llu) left: its connection closed (it stopped, or its process ended); it "
                "serves nothing until it registers again", n->node_id, (unsigned long long)n->generation);
    else
        FX_WARN("owner %s (generation %llu) declared dead: %s", n->node_id, (unsigned long long)n->generation, why);
}

/* L1: an owner dead past dead_owner_grace_ms is forgotten: its connection (a silent one may
 * still be open) closes, its replicas leave the routes, what was held for it goes. The
 * node's name and generation stay (a small record): if that process comes back it is told
 * at registration that it was forgotten, and drops what it holds. */
static void master_forget_node(fx_master_t *m, master_node_t *n, uint64_t now)
{
    if (n->peer) {
        master_peer_t *p = n->peer;
        p->node = NULL;
        n->peer = NULL;
        fx_conn_close(p->conn, FLUXON_ERR_STALE);
    }
    fx_master_kv_node_forget(m, n);
    n->forgotten = true;
    m->owners_forgotten++;
    FX_WARN("owner %s (generation %llu) forgotten: dead for %llu ms (dead_owner_grace_ms %u); if it comes back it "
            "drops every value it holds", n->node_id, (unsigned long long)n->generation,
            (unsigned long long)(now - n->dead_since_ms), m->cfg.dead_owner_grace_ms);
}

static void master_on_liveness(fx_reactor_t *r, fx_timer_t *t)
{
    fx_master_t *m = FX_CONTAINER_OF(t, fx_master_t, liveness_timer);
    uint64_t now = fx_now_ms(), period = FX_MAX(m->cfg.heartbeat_timeout_ms / 8, 10u);
    uint64_t late = m->liveness_last_ms ? now - m->liveness_last_ms : 0;
    m->liveness_last_ms = now;
    if (late > period + m->cfg.heartbeat_timeout_ms / 2) {
        /* this master did not run (stopped, starved): the owners' silence was its own, and
         * their heartbeats wait unread in its sockets; their liveness counts from now */
        FX_WARN("this master did not run for %llu ms (its liveness check is due every %llu ms): owners' "
                "heartbeats are counted from now", (unsigned long long)late, (unsigned long long)period);
        for (size_t i = 0; i < m->n_nodes; i++) m->nodes[i]->last_heartbeat_ms = now;
    }
    for (size_t i = 0; i < m->n_nodes; i++) {
        master_node_t *n = m->nodes[i];
        if (n->alive && now - n->last_heartbeat_ms > m->cfg.heartbeat_timeout_ms) {
            char why[192];
            snprintf(why, sizeof why,
                     "no heartbeat for %llu ms (heartbeat_timeout_ms %u; an owner's heartbeat_interval_ms must "
                     "be well below it)",
                     (unsigned long long)(now - n->last_heartbeat_ms), m->cfg.heartbeat_timeout_ms);
            master_mark_dead(m, n, why);
        }
        if (!n->alive && !n->forgotten && n->dead_since_ms && now - n->dead_since_ms > m->cfg.dead_owner_grace_ms)
            master_forget_node(m, n, now);
    }
    fx_mq_review(m); /* W2: writers back as newer processes are done after a grace */
    fx_master_kv_tick(m);
    fx_timer_arm(r, t, period, master_on_liveness);
}

/* ---- requests ---- */
static void master_handle_hello(master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena)
{
    fx_master_t *m = p->m;
    fx_body_hello_t b;
    fx_body_hello_decode(body, h->body_len, &b, arena);
    char err[256];
    int rc = fx_hello_check(&m->cfg, &b, err, sizeof err);
    if (rc != FLUXON_OK) {
        FX_WARN("refusing %s: %s", fx_conn_desc(p->conn), err);
        fx_conn_reply_error(p->conn, h, rc, "%s", err);
        fx_conn_close_after_flush(p->conn, rc);
        return;
    }
    p->hello_ok = true;
    p->role = b.role;
    fx_str_copy(b.node_id, p->node_id, sizeof p->node_id);
    char desc[96];
    snprintf(desc, sizeof desc, "%s %s", fx_role_name((fx_role_t)b.role), p->node_id);
    fx_conn_set_desc(p->conn, desc);
    fx_body_hello_ack_t ack = {FX_PROTOCOL_VERSION, fx_str_c("master"), m->generation, 0, {NULL, 0}, 0};
    FX_CONN_REPLY(p->conn, h, hello_ack, &ack);
}

static void master_handle_register(master_peer_t *p, const fx_frame_header_t *h,
                                   const uint8_t *body, fx_arena_t *arena)
{
    fx_master_t *m = p->m;
    fx_body_register_t b;
    fx_body_register_decode(body, h->body_len, &b, arena);
    char node_id[FX_ID_MAX];
    if (!fx_str_copy(b.node_id, node_id, sizeof node_id) || !node_id[0] ||
        !fx_str_eq(b.node_id, p->node_id)) {
        fx_conn_reply_error(p->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                            "register: node_id must equal the HELLO node_id \"%s\"", p->node_id);
        return;
    }
    if (b.grant_ids.n != b.grant_offsets.n) { /* parallel arrays */
        fx_conn_reply_error(p->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                            "register of %s: %u grant_ids but %u grant_offsets (lengths must match)", node_id,
                            b.grant_ids.n, b.grant_offsets.n);
        return;
    }
    master_node_t *n = master_find_node(m, node_id);
    if (n && n->peer && n->peer != p) {
        if (n->alive) { /* two live processes with one node_id would steal each other's routes */
            FX_WARN("refusing owner %s (generation %llu): node_id already registered by a live owner "
                    "(generation %llu)", node_id, (unsigned long long)b.generation,
                    (unsigned long long)n->generation);
            fx_conn_reply_error(p->conn, h, FLUXON_ERR_BUSY,
                                "register: node_id %s is already registered by a live owner (generation %llu)",
                                node_id, (unsigned long long)n->generation);
            return;
        }
        /* the old process is gone or restarted: drop its connection */
        master_peer_t *old = n->peer;
        old->node = NULL;
        n->peer = NULL;
        fx_conn_close(old->conn, FLUXON_ERR_STALE);
    }
    if (!n) {
        n = master_add_node(m, node_id);
        if (!n) {
            fx_conn_reply_error(p->conn, h, FLUXON_ERR_NOMEM, "register: out of memory");
            return;
        }
        m->registrations++;
        FX_INFO("owner %s registered: generation %llu, %s, segment %llu bytes", node_id,
                (unsigned long long)b.generation, fx_node_role_name((fx_node_role_t)b.node_role),
                (unsigned long long)b.segment_bytes);
    } else if (n->generation != b.generation) {
        m->reregistrations++;
        FX_INFO("owner %s re-registered with generation %llu (was %llu)", node_id,
                (unsigned long long)b.generation, (unsigned long long)n->generation);
    } else {
        m->reconnects++;
        FX_INFO("owner %s reconnected (generation %llu)", node_id, (unsigned long long)b.generation);
    }
    uint8_t *ua = fx_malloc(b.ucx_address.len + 1), *rk = fx_malloc(b.rkey.len + 1);
    if (!ua || !rk) {
        fx_free(ua);
        fx_free(rk);
        fx_conn_reply_error(p->conn, h, FLUXON_ERR_NOMEM, "register: out of memory");
        return;
    }
    if (b.ucx_address.len) memcpy(ua, b.ucx_address.p, b.ucx_address.len);
    if (b.rkey.len) memcpy(rk, b.rkey.p, b.rkey.len);
    fx_free(n->ucx_address);
    fx_free(n->rkey);
    n->ucx_address = ua;
    n->ucx_address_len = b.ucx_address.len;
    n->rkey = rk;
    n->rkey_len = b.rkey.len;
    uint64_t old_generation = n->generation;
    /* L1: the very process this master forgot: it missed what happened meanwhile */
    /* any generation: a restarted process keeps its disk records, and the deletions made while
     * it was away were not kept for it past the grace */
    bool forgotten = n->forgotten;
    if (forgotten)
        FX_WARN("owner %s (generation %llu) is back after it was forgotten: it drops every value it holds",
                node_id, (unsigned long long)b.generation);
    n->forgotten = false;
    n->role = p->role;
    n->node_role = b.node_role;
    n->generation = b.generation;
    n->rp_keys = n->rp_ok = n->rp_stale = n->rp_replaced = 0; /* a re-publication starts over */
    n->grant_bytes = b.grant_bytes;
    n->segment_bytes = b.segment_bytes;
    n->segment_base = b.segment_base;
    fx_str_copy(b.sub_cluster, n->sub_cluster, sizeof n->sub_cluster);
    n->alive = true;
    n->last_heartbeat_ms = fx_now_ms();
    n->peer = p;
    p->node = n;
    n->reg_grant_ids = b.grant_ids.v;
    n->reg_grant_offsets = b.grant_offsets.v;
    n->reg_n_grants = b.grant_ids.n;
    n->reg_prev_master_generation = b.prev_master_generation;
    /* it held values under another master, or its disk's from an earlier run: it re-publishes
     * them (tombs.c keeps the deletes until its last batch) */
    n->rp_pending = (b.prev_master_generation && b.prev_master_generation != m->generation) || b.republishing;
    n->rp_until_ms = fx_now_ms() + m->cfg.dead_owner_grace_ms;
    n->reg_peer_ids = b.peer_ids;
    n->reg_peer_gens = b.peer_generations;
    n->registered_ms = fx_now_ms();
    fx_mq_unsettled_set(n, b.unsettled);
    int krc = fx_master_kv_node_registered(m, n, old_generation);
    n->reg_grant_ids = n->reg_grant_offsets = NULL;
    n->reg_n_grants = 0;
    n->reg_peer_ids = (fx_strv_t){NULL, 0};
    n->reg_peer_gens = (fx_u64v_t){NULL, 0};
    if (krc != FLUXON_OK) {
        n->alive = false;
        fx_conn_reply_error(p->conn, h, krc, "register: cannot set up the segment allocator of %s", node_id);
        return;
    }
    /* a replica target keeps one grant free (place.c mpl_fits): a segment of one grant takes
     * no copy at all, and every write-back to it failed NO_SPACE silently (found by a fault
     * test; `fluxon demo` sizes its CPU owners as their capacity + one grant) */
    uint64_t room = n->segment_bytes - FX_MIN(n->segment_bytes, n->grant_bytes);
    if ((m->cfg.replica_target_roles & (1u << n->node_role)) && n->grant_bytes && room < n->segment_bytes / 16)
        FX_WARN("owner %s (%s) is a replica target with a segment of %llu bytes (its header page included): one "
                "grant (%llu bytes) stays free, so copies get only %llu bytes (give it segment_bytes of its "
                "capacity + reserve.grant_bytes)",
                node_id, n->node_role == FX_NODE_REMOTE_CACHE ? "remote_cache" : "gpu_owner",
                (unsigned long long)n->segment_bytes, (unsigned long long)n->grant_bytes, (unsigned long long)room);
    fx_mq_review(m); /* W2: quarantines this registration ends (its own too) */
    master_broadcast_info(m); /* before the ack: the owner knows its peers when it serves */
    fx_body_register_ack_t ack = {m->generation, m->cfg.heartbeat_timeout_ms, forgotten, m->cfg.dead_owner_grace_ms};
    FX_CONN_REPLY(p->conn, h, register_ack, &ack);
    fx_mtenants_registered(m, p); /* issue 42: the quotas pushed so far, after the ack */
}

static void master_handle_heartbeat(master_peer_t *p, const fx_frame_header_t *h,
                                    const uint8_t *body, fx_arena_t *arena)
{
    fx_body_heartbeat_t b;
    fx_body_heartbeat_decode(body, h->body_len, &b, arena);
    master_node_t *n = p->node;
    if (!n || n->generation != b.generation) {
        fx_conn_reply_error(p->conn, h, FLUXON_ERR_STALE, "heartbeat: not registered with generation %llu",
                            (unsigned long long)b.generation);
        return;
    }
    n->last_heartbeat_ms = fx_now_ms();
    bool review = fx_mq_unsettled_set(n, b.unsettled);
    if (!n->alive) {
        n->alive = true;
        review = true;
        FX_INFO("owner %s (generation %llu) alive again", n->node_id, (unsigned long long)n->generation);
        master_broadcast_info(p->m);
    }
    if (review) fx_mq_review(p->m); /* W2 */
    fx_body_empty_t e;
    FX_CONN_REPLY(p->conn, h, empty, &e);
}

FX_INTERNAL void fx_master_snap(fx_master_t *m, fx_master_snap_t *s)
{
    memset(s, 0, sizeof *s);
    fx_mmetrics_t *mm = &s->m;
    mm->generation = m->generation;
    mm->owners = m->n_nodes;
    for (size_t i = 0; i < m->n_nodes; i++) (*(m->nodes[i]->alive ? &mm->owners_alive : &mm->owners_dead))++;
    mm->registrations = m->registrations;
    mm->reregistrations = m->reregistrations;
    mm->reconnects = m->reconnects;
    mm->owners_declared_dead = m->owners_declared_dead;
    mm->owners_forgotten = m->owners_forgotten;
    mm->tenant_pushes = m->tenant_pushes;
    mm->tenant_table_loads = m->tenant_table_loads;
    mm->tenant_table_refused = m->tenant_table_refused;
    mm->connections = m->n_peers;
    mm->poll_backoffs = fx_reactor_poll_backoffs(m->r);
    fx_mha_metrics(m, mm);
    mm->chaos_dropped = m->chaos.dropped;
    mm->chaos_delayed = m->chaos.delayed;
    mm->chaos_duplicated = m->chaos.duplicated;
    fx_master_kv_metrics(m, mm);
    s->replies = m->replies;
}

/* The master's numbers (master_metrics.h) as one JSON object. */
static void master_handle_stats(master_peer_t *p, const fx_frame_header_t *h)
{
    size_t cap = 32768;
    char *buf = fx_malloc(cap);
    fx_master_snap_t *s = fx_malloc(sizeof *s);
    size_t len = 0;
    if (buf && s) {
        fx_master_snap(p->m, s);
        len = fx_master_stats_json(s, buf, cap);
    }
    if (!len) {
        fx_conn_reply_error(p->conn, h, buf && s ? FLUXON_ERR_INTERNAL : FLUXON_ERR_NOMEM,
                            "master stats: out of memory or the document passes %zu bytes", cap);
    } else {
        fx_body_json_t js = {{buf, (uint32_t)len}};
        FX_CONN_REPLY(p->conn, h, json, &js);
    }
    fx_free(s);
    fx_free(buf);
}

static void master_handle_nodes(master_peer_t *p, const fx_frame_header_t *h)
{
    fx_master_t *m = p->m;
    size_t n = m->n_nodes + 1;
    fx_str_t *ids = fx_calloc(2 * n, sizeof *ids), *scs = ids ? ids + n : NULL;
    uint64_t *cols = fx_calloc(5 * n, sizeof *cols);
    if (!ids || !cols) {
        fx_free(ids);
        fx_free(cols);
        fx_conn_reply_error(p->conn, h, FLUXON_ERR_NOMEM, "cluster nodes: out of memory");
        return;
    }
    uint64_t *roles = cols, *gens = cols + n, *alive = cols + 2 * n, *seg = cols + 3 * n, *placed = cols + 4 * n;
    char self[FX_ID_MAX + 32]; /* where this master listens: in HA, which one leads */
    if (m->cfg.node_id[0]) fx_strlcpy(self, m->cfg.node_id, sizeof self);
    else snprintf(self, sizeof self, "master@%s:%u", m->cfg.listen_host, (unsigned)m->port);
    ids[0] = fx_str_c(self);
    roles[0] = FX_ROLE_MASTER;
    gens[0] = m->generation;
    alive[0] = 1;
    seg[0] = 0;
    scs[0] = fx_str_c("");
    for (size_t i = 0; i < m->n_nodes; i++) {
        master_node_t *nd = m->nodes[i];
        ids[i + 1] = fx_str_c(nd->node_id);
        roles[i + 1] = nd->node_role == FX_NODE_REMOTE_CACHE ? 100 + FX_NODE_REMOTE_CACHE : FX_ROLE_OWNER;
        gens[i + 1] = nd->generation;
        alive[i + 1] = nd->alive;
        seg[i + 1] = nd->segment_bytes;
        scs[i + 1] = fx_str_c(nd->sub_cluster);
        placed[i + 1] = nd->placed_bytes;
    }
    fx_body_nodes_t b = {{ids, (uint32_t)n}, {roles, (uint32_t)n}, {gens, (uint32_t)n},
                         {alive, (uint32_t)n}, {seg, (uint32_t)n}, {scs, (uint32_t)n}, {placed, (uint32_t)n}};
    FX_CONN_REPLY(p->conn, h, nodes, &b);
    fx_free(ids);
    fx_free(cols);
}

/* A KV request of an authenticated peer to its module; false if the type is not a KV
 * message (the caller answers "not served"). */
static bool master_kv_request(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena)
{
    if (!s) return false;
    switch (h->type) {
    case FX_MSG_GRANT: fx_mkv_grant(s, p, h, body, arena); return true;
    case FX_MSG_GRANT_RETURN: fx_mkv_grant_return(s, p, h, body, arena); return true;
    case FX_MSG_PUT_DONE: fx_mkv_put_done(s, p, h, body, arena); return true;
    case FX_MSG_LOOKUP: fx_mkv_lookup(s, p, h, body, arena); return true;
    case FX_MSG_GET_DONE: fx_mkv_get_done(s, p, h, body, arena); return true;
    case FX_MSG_EVICT: fx_mkv_evict(s, p, h, body, arena); return true;
    case FX_MSG_DELETE: fx_mkv_delete(s, p, h, body, arena); return true;
    case FX_MSG_EXISTS: fx_mkv_exists(s, p, h, body, arena); return true;
    case FX_MSG_LEASE_GRANT: fx_mkv_lease_grant(s, p, h, body, arena); return true;
    case FX_MSG_LIST: fx_mkv_list(s, p, h, body, arena); return true;
    case FX_MSG_PUT_PLACE: fx_mplace_put_place(s, p, h, body, arena); return true;
    case FX_MSG_PUT_REVOKE: fx_mplace_put_revoke(s, p, h, body, arena); return true;
    case FX_MSG_APPEND_START: fx_mappend_start(s, p, h, body, arena); return true; /* issue 16 */
    case FX_MSG_APPEND_DONE: fx_mappend_done(s, p, h, body, arena); return true;
    case FX_MSG_TOUCH: fx_mappend_touch(s, p, h, body, arena); return true;
    case FX_MSG_REPUBLISH: fx_mkv_republish(s, p, h, body, arena); return true;
    default: return false;
    }
}

/* Refuses a request on a master that does not serve (master_ha.h) and drops the peer:
 * its owner asks etcd for the leader and reconnects there. */
static void master_refuse_not_leader(master_peer_t *p, const fx_frame_header_t *h)
{
    char why[256];
    fx_mha_why_not(p->m, why, sizeof why);
    if (h->req_id) fx_conn_reply_error(p->conn, h, FLUXON_ERR_UNAVAILABLE, "%s", why);
    fx_conn_close_after_flush(p->conn, FLUXON_ERR_UNAVAILABLE);
}

static void master_dispatch(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena);

/* Every request: the appenders hear of their copies dropped since (FORGET) before this one is
 * handled, and of those it drops right after (forget.c's order). */
static void master_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena)
{
    fx_master_t *m = ((master_peer_t *)fx_conn_ud(c))->m;
    fx_mkv_forget_flush(m->kv);
    master_dispatch(c, h, body, arena);
    fx_mkv_forget_flush(m->kv);
}

static void master_dispatch(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    master_peer_t *p = fx_conn_ud(c);
    if (!fx_mha_serving(p->m)) { /* a standby, or a leader unsure of its lease: serves nobody (issue 17) */
        master_refuse_not_leader(p, h);
        return;
    }
    if (!p->hello_ok) {
        if (h->type != FX_MSG_HELLO) {
            FX_ERROR("protocol error from %s: %s before HELLO; closing the connection",
                     fx_conn_desc(c), fx_msg_name(h->type));
            fx_conn_close(c, FLUXON_ERR_PROTOCOL);
            return;
        }
        master_handle_hello(p, h, body, arena);
        return;
    }
    switch (h->type) {
    case FX_MSG_REGISTER: master_handle_register(p, h, body, arena); break;
    case FX_MSG_HEARTBEAT: master_handle_heartbeat(p, h, body, arena); break;
    case FX_MSG_PING: {
        fx_body_ping_t b;
        fx_body_ping_decode(body, h->body_len, &b, arena);
        FX_CONN_REPLY(c, h, ping, &b);
        break;
    }
    case FX_MSG_CLUSTER_NODES: master_handle_nodes(p, h); break;
    case FX_MSG_MASTER_STATS: master_handle_stats(p, h); break;
    case FX_MSG_TENANT_PUSH: fx_mtenants_push(p, h, body, arena); break; /* issue 42 */
    default:
        if (master_kv_request(p->m->kv, p, h, body, arena)) break;
        if (h->req_id)
            fx_conn_reply_error(c, h, FLUXON_ERR_INVALID_ARGUMENT, "%s is not served by the master",
                                fx_msg_name(h->type));
    }
}

static void master_on_close(fx_conn_t *c, int status)
{
    master_peer_t *p = fx_conn_ud(c);
    fx_master_t *m = p->m;
    if (p->node) {
        p->node->peer = NULL;
        if (!m->shutting_down && !m->resetting) master_mark_dead(m, p->node, "connection lost");
    }
    if (p->prev) p->prev->next = p->next;
    else m->peers = p->next;
    if (p->next) p->next->prev = p->prev;
    m->n_peers--;
    fx_free(p);
}

static void master_on_accept(void *arg, int fd)
{
    fx_master_t *m = arg;
    if (fd < 0) {
        FX_ERROR("accept failed: %s", strerror(-fd));
        return;
    }
    int one = 1; /* replies are small and latency-bound: no Nagle (a unix socket has none) */
    struct sockaddr_storage sa;
    socklen_t salen = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &salen) == 0 && sa.ss_family != AF_UNIX)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    master_peer_t *p = fx_calloc(1, sizeof *p);
    if (!p) {
        close(fd);
        return;
    }
    p->m = m;
    p->conn = fx_conn_new(m->r, fd, &master_peer_ops, p, m->cfg.max_frame_bytes, "new peer");
    if (!p->conn) {
        fx_free(p);
        return;
    }
    fx_conn_count_replies(p->conn, &m->replies);
    if (m->chaos_on) fx_conn_set_chaos(p->conn, &m->chaos); /* test-only message chaos */
    m->n_peers++;
    p->next = m->peers;
    if (m->peers) m->peers->prev = p;
    m->peers = p;
}

/* ---- standby masters (issue 17): the election's verdicts (ha.c) ---- */
static void master_ha_elected(fx_master_t *m)
{
    fx_master_kv_put_floor(m, fx_mha_put_floor(m)); /* above every id an earlier leader issued (W6) */
    fx_master_kv_serving(m); /* deletes are remembered while the owners re-publish */
    FX_INFO("master generation %llu serves: owners register and re-publish what they hold",
            (unsigned long long)m->generation);
}

/* Drops every node and the KV state: what this master knew may be stale now that another
 * one may have led; if it leads again, owners re-register and re-publish to it. */
static void master_forget_all(fx_master_t *m)
{
    for (size_t i = 0; i < m->n_nodes; i++) {
        fx_master_kv_node_free(m, m->nodes[i]);
        fx_free(m->nodes[i]->ucx_address);
        fx_free(m->nodes[i]->rkey);
        fx_free(m->nodes[i]);
    }
    m->n_nodes = 0;
    fx_master_kv_fini(m);
    int rc = fx_master_kv_init(m);
    if (rc != FLUXON_OK) FX_ERROR("master: cannot recreate its KV state: %s", fluxon_status_string(rc));
    m->generation = fx_realtime_ns();
}

/* Stops serving at once: every connection closes (owners look up the new leader) and the
 * state goes; the master stays a standby and campaigns again. */
static void master_ha_deposed(fx_master_t *m, const char *why)
{
    size_t n = m->n_peers, owners = m->n_nodes;
    m->resetting = true; /* closing is not owners dying: no dead marks, no broadcasts */
    while (m->peers) fx_conn_close(m->peers->conn, FLUXON_ERR_UNAVAILABLE);
    m->resetting = false;
    master_forget_all(m);
    FX_WARN("master deposed (%s): stopped serving, closed %zu connections, dropped the routes of %zu owners; "
            "standby now (generation %llu)", why, n, owners, (unsigned long long)m->generation);
}

/* Closes the unix listener and removes its file (the acceptor is stopped first). */
static void master_unix_close(fx_master_t *m)
{
    if (m->unix_fd < 0) return;
    close(m->unix_fd);
    m->unix_fd = -1;
    fx_unix_remove(m->cfg.socket_path);
}

FX_INTERNAL int fx_master_create(fx_reactor_t *r, const fx_config_t *cfg, fx_ready_fn ready,
                                 void *ready_arg, fx_master_t **m_p)
{
    fx_master_t *m = fx_calloc(1, sizeof *m);
    if (!m) return FLUXON_ERR_NOMEM;
    m->r = r;
    m->cfg = *cfg;
    fx_reactor_set_poll_ns(r, (uint64_t)cfg->idle_poll_us * 1000u); /* issue 38: no wake-up per message */
    m->generation = fx_realtime_ns();
    m->chaos_on = fx_chaos_init(&m->chaos, cfg, "master");
    fx_mtenants_init(m); /* issue 42: the config's quota table, handed to each owner that registers */
    int rc = fx_master_kv_init(m);
    if (rc != FLUXON_OK) goto err_free;
    rc = fx_tcp_listen(cfg->listen_host, cfg->listen_port, &m->listen_fd, &m->port);
    if (rc == FLUXON_ERR_UNAVAILABLE && (errno == EADDRINUSE || errno == EADDRNOTAVAIL || errno == EACCES)) {
        FX_ERROR("config rejected: listen: %s:%u %s; set \"listen\" to a free port of this host", cfg->listen_host,
                 cfg->listen_port,
                 errno == EADDRINUSE    ? "is in use (another process listens there)"
                 : errno == EACCES      ? "needs privileges this process lacks"
                                        : "is not an address of this host");
        rc = FLUXON_ERR_CONFIG;
    }
    if (rc != FLUXON_OK) goto err_free;
    rc = fx_acceptor_start(r, m->listen_fd, master_on_accept, m, &m->acceptor);
    if (rc != FLUXON_OK) goto err_close;
    m->unix_fd = -1;
    if (cfg->socket_path[0]) { /* owners on this host: "master": "unix:PATH" (issue 18) */
        rc = fx_unix_listen(cfg->socket_path, &m->unix_fd);
        if (rc == FLUXON_OK) rc = fx_acceptor_start(r, m->unix_fd, master_on_accept, m, &m->unix_acceptor);
        if (rc != FLUXON_OK) {
            FX_ERROR("master: cannot listen on socket %s: %s", cfg->socket_path, fluxon_status_string(rc));
            master_unix_close(m);
            fx_acceptor_stop(r, m->acceptor);
            goto err_close;
        }
    }
    fx_timer_init(&m->liveness_timer);
    fx_timer_arm(r, &m->liveness_timer, FX_MAX(cfg->heartbeat_timeout_ms / 8, 10u), master_on_liveness);
    FX_INFO("master listening on %s:%u%s%s (cluster %s, generation %llu)", cfg->listen_host, m->port,
            cfg->socket_path[0] ? " and unix:" : "", cfg->socket_path, cfg->cluster_id,
            (unsigned long long)m->generation);
    static const fx_mha_hooks_t ha_hooks = {master_ha_elected, master_ha_deposed};
    rc = fx_mha_start(m, &ha_hooks); /* "ha": serves once elected */
    if (rc != FLUXON_OK) {
        FX_ERROR("master: cannot start the etcd election: %s", fluxon_status_string(rc));
        fx_mha_free(m);
        fx_timer_disarm(r, &m->liveness_timer);
        fx_acceptor_stop(r, m->acceptor);
        if (m->unix_acceptor) fx_acceptor_stop(r, m->unix_acceptor);
        master_unix_close(m);
        goto err_close;
    }
    *m_p = m;
    ready(ready_arg, FLUXON_OK);
    return FLUXON_OK;

err_close:
    close(m->listen_fd);
err_free:
    fx_master_kv_fini(m);
    fx_free(m);
    return rc;
}

FX_INTERNAL uint16_t fx_master_port(const fx_master_t *m) { return m->port; }

FX_INTERNAL void fx_master_shutdown(fx_master_t *m)
{
    m->shutting_down = true;
    fx_mha_stop(m); /* a leader hands over before its connections close */
    fx_timer_disarm(m->r, &m->liveness_timer);
    fx_acceptor_stop(m->r, m->acceptor);
    m->acceptor = NULL;
    if (m->unix_acceptor) fx_acceptor_stop(m->r, m->unix_acceptor);
    m->unix_acceptor = NULL;
    while (m->peers) fx_conn_close(m->peers->conn, FLUXON_ERR_CANCELLED);
}

FX_INTERNAL void fx_master_destroy(fx_master_t *m)
{
    if (!m) return;
    fx_mha_free(m);
    if (m->listen_fd > 0) close(m->listen_fd);
    master_unix_close(m);
    fx_master_kv_fini(m);
    for (size_t i = 0; i < m->n_nodes; i++) {
        fx_master_kv_node_free(m, m->nodes[i]);
        fx_free(m->nodes[i]->ucx_address);
        fx_free(m->nodes[i]->rkey);
        fx_free(m->nodes[i]);
    }
    fx_free(m->nodes);
    fx_free(m);
}
