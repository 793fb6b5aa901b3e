/* master_link.c — the owner's registered, heart-beating link to the master: connect with
 * backoff, HELLO, REGISTER (UCX address, rkey and grants from the registering hook),
 * heartbeats, reconnect when it goes away, and forwarding of externals' requests that
 * only the master answers. Sits below every KV module: they reach the master through
 * fx_olink_conn, and hear of registration and loss through the hooks. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"
#include "owner_leader.h"
#include "owner_link.h"
#include "unix.h"

enum { OM_DOWN, OM_CONNECTING, OM_HELLO, OM_REGISTERING, OM_READY };

typedef struct olink_peers {
    char (*ids)[FX_ID_MAX];
    uint64_t *gens;    /* the generation last announced */
    uint64_t *seen_ms; /* UINT64_MAX: in the latest announcement (alive now); else when it left it */
    uint32_t n, cap;
} olink_peers_t;

/* W2: an owner no master announced for this long is no longer named to the next master
 * (its pushes ended long before: range_quarantine_ms bounds them, 47 s by default) */
#define OLINK_PEER_FORGET_MS 600000u

typedef struct olink {
    fx_owner_t *o;
    fx_olink_hooks_t hooks;
    int mstate;
    fx_conn_t *mconn;
    int connect_fd;
    fx_connect_op_t connect_op;
    bool connect_inflight, started;
    fx_timer_t reconnect_timer, heartbeat_timer;
    uint32_t backoff_ms;
    uint32_t hb_interval_ms; /* heartbeat_interval_ms, or less: a third of the master's heartbeat_timeout_ms */
    uint64_t master_generation;
    uint32_t dead_grace_ms; /* the master's dead_owner_grace_ms (REGISTER's answer; 0: not told) */
    uint32_t reconnects;
    uint64_t waiting_since_ns, waiting_logged_ns; /* unreachable master: since when, last log */
    bool refused_final; /* AUTH/BUSY before the start: the start failed, no reconnect */
    int64_t owners_alive;
    bool others_seen; /* another live owner was announced once: it may have placed values here */
    bool info_seen;   /* a CLUSTER_INFO came since this process started */
    bool copies_mine; /* issue 38: at the first, no remote_cache owner held replicas, and since then no
                       * other owner that takes puts was announced: every copy on a remote_cache owner
                       * is one this owner made */
    uint64_t forwarded, heartbeats_sent, heartbeat_failures;
    /* W2: the owners masters announced (CLUSTER_INFO), kept across masters (one still away
     * from the last master may be pushing here from the one before): named in the REGISTER
     * to the next master, which waits for them before it allocates in this segment.
     * peers_broken: a list was not whole (out of memory, a short one): none is named, so the
     * next master waits out its whole quarantine. */
    olink_peers_t peers;
    bool peers_broken;
    /* the master's address: the config's, or with "ha" the leader etcd names (issue 17) */
    char host[FX_HOST_MAX];
    uint16_t port;
    fx_oleader_t *leader; /* NULL without "ha" */
    int64_t leader_rev;   /* the leader key's revision this connection went to */
} olink_t;

static void olink_connect(olink_t *l);

/* ---- W2: the owners a master announced ---- */
static void olink_peers_free(olink_peers_t *s)
{
    fx_free(s->ids);
    fx_free(s->gens);
    fx_free(s->seen_ms);
    *s = (olink_peers_t){0};
}

/* A new announcement (every alive owner): adds or updates its owners, alive now; those it no
 * longer names left it now. False when out of memory. */
static bool olink_peers_add(olink_peers_t *s, fx_strv_t ids, fx_u64v_t gens, uint64_t now)
{
    for (uint32_t k = 0; k < s->n; k++)
        if (s->seen_ms[k] == UINT64_MAX) s->seen_ms[k] = now; /* until named again below */
    for (uint32_t i = 0; i < ids.n && i < gens.n; i++) {
        uint32_t k = 0;
        while (k < s->n && !fx_str_eq(ids.v[i], s->ids[k])) k++;
        if (k == s->n) {
            if (s->n == s->cap) {
                uint32_t nc = s->cap ? s->cap * 2 : 8;
                char(*ni)[FX_ID_MAX] = fx_realloc(s->ids, nc * sizeof *ni);
                if (ni) s->ids = ni;
                uint64_t *ng = fx_realloc(s->gens, nc * sizeof *ng);
                if (ng) s->gens = ng;
                uint64_t *ns = fx_realloc(s->seen_ms, nc * sizeof *ns);
                if (ns) s->seen_ms = ns;
                if (!ni || !ng || !ns) return false;
                s->cap = nc;
            }
            fx_str_copy(ids.v[i], s->ids[s->n++], FX_ID_MAX);
        }
        s->gens[k] = gens.v[i];
        s->seen_ms[k] = UINT64_MAX;
    }
    return true;
}

/* What REGISTER says the masters announced: the owners of the latest announcement, and those
 * that left one less than OLINK_PEER_FORGET_MS ago (older ones are forgotten here); nothing when a list was not whole or this owner had no
 * master (the new master then waits out the whole quarantine). Views into l->peers (view: n
 * entries), valid while the REGISTER is sent. */
static void olink_peers_for_register(olink_t *l, fx_body_register_t *reg, fx_str_t *view)
{
    olink_peers_t *p = &l->peers;
    uint64_t now = fx_now_ms(), forget = l->o->cfg.test_peer_forget_ms ? l->o->cfg.test_peer_forget_ms
                                                                         : OLINK_PEER_FORGET_MS;
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->n; i++) /* forget the long gone, in place */
        if (p->seen_ms[i] == UINT64_MAX || now - p->seen_ms[i] < forget) {
            if (k != i) {
                memcpy(p->ids[k], p->ids[i], FX_ID_MAX);
                p->gens[k] = p->gens[i];
                p->seen_ms[k] = p->seen_ms[i];
            }
            k++;
        }
    p->n = k;
    if (!l->master_generation || l->peers_broken || !view) return;
    for (uint32_t i = 0; i < p->n; i++) view[i] = fx_str_c(p->ids[i]);
    reg->peer_ids = (fx_strv_t){view, p->n};
    reg->peer_generations = (fx_u64v_t){p->gens, p->n};
}
static void olink_on_close(fx_conn_t *c, int status);
static void olink_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena);
static const fx_conn_ops_t olink_ops = {olink_on_request, olink_on_close, NULL};

static void olink_started(olink_t *l, int status)
{
    if (l->started) return;
    l->started = true;
    l->hooks.started(l->o, status);
}

/* The master as the logs name it: unix:PATH, host:port, or etcd's leader not known yet. */
static const char *olink_who(const olink_t *l, char *buf, size_t cap)
{
    if (l->o->cfg.master_socket[0] && !l->leader) snprintf(buf, cap, "unix:%s", l->o->cfg.master_socket);
    else if (l->port) snprintf(buf, cap, "%s:%u", l->host, l->port);
    else snprintf(buf, cap, "(the leader etcd names)");
    return buf;
}

static void olink_on_reconnect_timer(fx_reactor_t *r, fx_timer_t *t)
{
    olink_connect(FX_CONTAINER_OF(t, olink_t, reconnect_timer));
}

static void olink_schedule_reconnect(olink_t *l)
{
    if (l->o->shutting_down) return;
    l->mstate = OM_DOWN;
    uint32_t cap = l->leader ? 500u : 2000u; /* with "ha", a new leader is found within a TTL */
    l->backoff_ms = l->backoff_ms ? FX_MIN(l->backoff_ms * 2, cap) : l->leader ? 20u : 100u;
    fx_timer_arm(l->o->r, &l->reconnect_timer, l->backoff_ms, olink_on_reconnect_timer);
}

static void olink_on_heartbeat_resp(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                                    fx_arena_t *arena)
{
    olink_t *l = arg;
    if (status == FLUXON_OK) return;
    l->heartbeat_failures++;
    if (status == FLUXON_ERR_UNAVAILABLE) return; /* the conn closed; reconnect is scheduled */
    FX_WARN("heartbeat to master failed: %s; reconnecting", fluxon_status_string(status));
    if (l->mconn) fx_conn_close(l->mconn, status);
}

static void olink_on_heartbeat_timer(fx_reactor_t *r, fx_timer_t *t)
{
    olink_t *l = FX_CONTAINER_OF(t, olink_t, heartbeat_timer);
    fx_owner_t *o = l->o;
    if (l->mstate != OM_READY || !l->mconn) return;
    fx_body_heartbeat_t b = {o->generation, l->hooks.unsettled(o)};
    /* answered within master_timeout_ms, like every request to the master: a late answer
     * is no lost link (3 intervals, 300 ms at 100 ms heartbeats, dropped a working link on
     * a loaded machine and refused puts until it was back); a dead master closes the
     * connection, a hung one is given up on after master_timeout_ms */
    if (FX_RPC_CALL(l->mconn, HEARTBEAT, heartbeat, &b, o->cfg.master_timeout_ms, olink_on_heartbeat_resp, l) ==
        FLUXON_OK)
        l->heartbeats_sent++;
    fx_timer_arm(r, t, l->hb_interval_ms, olink_on_heartbeat_timer);
}

/* The master answered HELLO or REGISTER with an error: log its reason (rate-limited once
 * serving), fail the start on a permanent refusal (credentials, node_id taken), and drop
 * the connection so the reconnect loop tries again. */
static void olink_refused(olink_t *l, const char *what, int status, const fx_frame_header_t *h,
                          const uint8_t *body, fx_arena_t *arena)
{
    char msg[256] = "";
    fx_body_error_t e;
    if (h && fx_body_error_decode(body, h->body_len, &e, arena) == FLUXON_OK) fx_str_copy(e.message, msg, sizeof msg);
    bool say = !l->started || l->reconnects++ % 10 == 0;
    if (say && status == FLUXON_ERR_TIMEOUT) /* no answer is no refusal */
        FX_ERROR("master did not answer %s within master_timeout_ms %u", what, l->o->cfg.master_timeout_ms);
    else if (say)
        FX_ERROR("master refused %s: %s%s%s", what, fluxon_status_string(status), msg[0] ? ": " : "", msg);
    if ((status == FLUXON_ERR_AUTH || status == FLUXON_ERR_BUSY) && !l->started) {
        l->refused_final = true; /* the start fails with this status: one message, no "reconnecting" */
        olink_started(l, status);
    }
    if (l->mconn) fx_conn_close(l->mconn, status);
}

static void olink_on_register_resp(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                                   fx_arena_t *arena)
{
    olink_t *l = arg;
    fx_owner_t *o = l->o;
    if (status == FLUXON_ERR_UNAVAILABLE && !h) return; /* connection lost: reconnect scheduled */
    if (status != FLUXON_OK) {
        olink_refused(l, "registration", status, h, body, arena);
        return;
    }
    fx_body_register_ack_t ack;
    fx_body_register_ack_decode(body, h->body_len, &ack, arena);
    l->mstate = OM_READY;
    l->backoff_ms = 0;
    bool changed = l->master_generation && l->master_generation != ack.master_generation;
    bool again = l->master_generation && l->master_generation == ack.master_generation;
    l->master_generation = ack.master_generation;
    l->dead_grace_ms = ack.dead_owner_grace_ms;
    char who[FX_PATH_MAX + 8];
    FX_INFO("registered with master %s (master generation %llu, owner generation %llu)", olink_who(l, who, sizeof who),
            (unsigned long long)ack.master_generation, (unsigned long long)o->generation);
    /* heartbeats rarer than the master's timeout would have it declare this owner dead
     * between two of them: at most a third of it, said once per registration */
    uint32_t hb = o->cfg.heartbeat_interval_ms, cap = FX_MAX(ack.heartbeat_timeout_ms / 3, 1u);
    if (ack.heartbeat_timeout_ms && hb > cap) {
        FX_WARN("heartbeat_interval_ms %u is not well below the master's heartbeat_timeout_ms %u (it would declare "
                "this owner dead between two heartbeats): heartbeating every %u ms", hb, ack.heartbeat_timeout_ms, cap);
        hb = cap;
    }
    l->hb_interval_ms = hb;
    fx_timer_arm(o->r, &l->heartbeat_timer, l->hb_interval_ms, olink_on_heartbeat_timer);
    if (ack.forgotten)
        FX_WARN("master %s had forgotten this owner (dead longer than its dead_owner_grace_ms): it missed the "
                "deletions and overwrites meanwhile, so every value held here is dropped", who);
    l->hooks.registered(o, changed, ack.forgotten != 0, again);
    olink_started(l, FLUXON_OK);
}

static void olink_on_hello_resp(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena)
{
    olink_t *l = arg;
    fx_owner_t *o = l->o;
    if (status == FLUXON_ERR_UNAVAILABLE && !h) return; /* connection lost: reconnect scheduled */
    if (status != FLUXON_OK) {
        olink_refused(l, "HELLO", status, h, body, arena);
        return;
    }
    l->mstate = OM_REGISTERING;
    fx_body_register_t reg = {fx_str_c(o->cfg.node_id), o->generation, (uint8_t)o->cfg.node_role,
                              fx_segment_len(o->seg), (uint64_t)(uintptr_t)fx_segment_base(o->seg),
                              {NULL, 0}, {NULL, 0}, o->cfg.grant_bytes, {NULL, 0}, {NULL, 0},
                              fx_str_c(o->cfg.sub_cluster), l->master_generation, {NULL, 0}, {NULL, 0},
                              {NULL, 0}, 0};
    l->hooks.registering(o, &reg);
    fx_str_t *view = fx_malloc((l->peers.n ? l->peers.n : 1) * sizeof *view);
    olink_peers_for_register(l, &reg, view);
    if (FX_RPC_CALL(l->mconn, REGISTER, register, &reg, o->cfg.master_timeout_ms, olink_on_register_resp, l) !=
        FLUXON_OK)
        fx_conn_close(l->mconn, FLUXON_ERR_UNAVAILABLE);
    fx_free(view);
}

/* The master cannot be reached: said at the first failure, then at the first retry past
 * each 5 s mark (retries come every 2 s at most) with the time waited so far (the owner waits like a daemon; fluxon_node_start bounds the wait). */
static void olink_log_waiting(olink_t *l, const char *why)
{
    uint64_t now = fx_now_ns();
    char who[FX_PATH_MAX + 8];
    olink_who(l, who, sizeof who);
    l->reconnects++;
    if (!l->waiting_since_ns) {
        l->waiting_since_ns = l->waiting_logged_ns = now;
        FX_WARN("waiting for master %s (%s); %s, retrying with backoff up to %s", who, why,
                l->started ? "serving local hits meanwhile" : "not registered yet", l->leader ? "0.5 s" : "2 s");
    } else if (now - l->waiting_logged_ns >= 5000000000ull) { /* at the first retry past each 5 s mark */
        l->waiting_logged_ns += (now - l->waiting_logged_ns) / 5000000000ull * 5000000000ull;
        FX_WARN("still waiting for master %s after %.0f s (%s)", who, (double)(now - l->waiting_since_ns) / 1e9, why);
    }
}

static void olink_on_connect(fx_connect_op_t *op, int res)
{
    olink_t *l = op->arg;
    fx_owner_t *o = l->o;
    l->connect_inflight = false;
    int fd = l->connect_fd;
    l->connect_fd = -1;
    if (o->shutting_down) {
        close(fd);
        return;
    }
    if (res < 0) {
        close(fd);
        olink_log_waiting(l, strerror(res == -ECANCELED ? ETIMEDOUT : -res));
        olink_schedule_reconnect(l);
        return;
    }
    l->waiting_since_ns = 0;
    char desc[FX_PATH_MAX + 16], who[FX_PATH_MAX + 8];
    snprintf(desc, sizeof desc, "master %s", olink_who(l, who, sizeof who));
    l->mconn = fx_conn_new(o->r, fd, &olink_ops, l, o->cfg.max_frame_bytes, desc);
    if (!l->mconn) {
        olink_schedule_reconnect(l);
        return;
    }
    if (o->cfg.fault_message[0] && o->cfg.fault_kind != FX_FAULT_DELAY_REQUEST &&
        o->cfg.fault_kind != FX_FAULT_TRUNCATE) /* test-only: faults of the connection itself */
        fx_conn_set_fault(l->mconn, (uint16_t)fx_msg_by_name(o->cfg.fault_message), o->cfg.fault_kind,
                          o->cfg.fault_ms, o->cfg.fault_count);
    fx_conn_set_chaos(l->mconn, fx_owner_chaos(o)); /* test-only message chaos (NULL: off) */
    l->mstate = OM_HELLO;
    fx_body_hello_t hb;
    fx_hello_fill(&o->cfg, FX_ROLE_OWNER, o->cfg.node_id, o->generation, &hb);
    if (FX_RPC_CALL(l->mconn, HELLO, hello, &hb, o->cfg.master_timeout_ms, olink_on_hello_resp, l) != FLUXON_OK)
        fx_conn_close(l->mconn, FLUXON_ERR_UNAVAILABLE);
}

static void olink_connect(olink_t *l)
{
    fx_owner_t *o = l->o;
    if (o->shutting_down || l->connect_inflight || l->mconn) return;
    if (l->leader && !fx_oleader_get(l->leader, l->host, sizeof l->host, &l->port, &l->leader_rev)) {
        /* before etcd's first answer there is nothing to say: the lookup posts its result */
        if (fx_oleader_answered(l->leader)) olink_log_waiting(l, "etcd names no leader yet");
        olink_schedule_reconnect(l);
        return;
    }
    int fd;
    /* a master on this host: its unix socket, no TCP stack on either side (issue 18) */
    int rc = o->cfg.master_socket[0] && !l->leader
                 ? fx_unix_socket(o->cfg.master_socket, &fd, l->connect_op.addr, &l->connect_op.addrlen)
                 : fx_tcp_socket(l->host, l->port, &fd, l->connect_op.addr, &l->connect_op.addrlen);
    if (rc != FLUXON_OK) {
        olink_schedule_reconnect(l);
        return;
    }
    l->mstate = OM_CONNECTING;
    l->connect_fd = fd;
    l->connect_inflight = true;
    l->connect_op.cb = olink_on_connect;
    l->connect_op.arg = l;
    fx_connect_start(o->r, &l->connect_op, fd, 2000);
}

static void olink_on_close(fx_conn_t *c, int status)
{
    olink_t *l = fx_conn_ud(c);
    bool was_ready = l->mstate >= OM_HELLO;
    l->mconn = NULL;
    fx_timer_disarm(l->o->r, &l->heartbeat_timer);
    if (l->o->shutting_down || l->refused_final) return;
    l->owners_alive = -1; /* unknown until the master tells again */
    l->hooks.lost(l->o);
    if (was_ready) FX_WARN("lost the master connection (%s); reconnecting", fluxon_status_string(status));
    olink_schedule_reconnect(l);
}

static void olink_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    olink_t *l = fx_conn_ud(c);
    if (h->type == FX_MSG_CLUSTER_INFO) {
        fx_body_cluster_info_t b;
        if (fx_body_cluster_info_decode(body, h->body_len, &b, arena) != FLUXON_OK) {
            l->owners_alive = -1; /* unknown: ask the master about every miss */
            l->others_seen = true;
            l->copies_mine = false;
            l->peers_broken = true; /* W2 */
            return;
        }
        l->owners_alive = (int64_t)b.count;
        /* W2: every owner announced, kept across masters; a list short of the count (the
         * master ran out of memory) or one not recorded makes the peers unknown for good */
        if (b.node_ids.n != b.count || b.generations.n != b.count ||
            !olink_peers_add(&l->peers, b.node_ids, b.generations, fx_now_ms())) {
            if (!l->peers_broken)
                FX_WARN("the master's list of owners (%u of %llu) could not be kept: a later master will wait out its "
                        "whole range quarantine before it allocates in this segment", b.node_ids.n,
                        (unsigned long long)b.count);
            l->peers_broken = true;
        }
        if (b.node_ids.n == b.count && b.generations.n == b.count && b.addresses.n == b.count &&
            b.rkeys.n == b.count && b.bases.n == b.count && l->hooks.alive) {
            fx_olink_owners_t owners = {l->master_generation, b.node_ids.v, b.generations.v, b.addresses.v,
                                        b.rkeys.v, b.bases.v, b.count};
            l->hooks.alive(l->o, &owners); /* UCX peers of the dead fail; this host's are mapped */
        }
        if (b.count > 1) l->others_seen = true;
        if (!l->info_seen) l->copies_mine = !b.targets_held && b.gpu_alive <= 1;
        if (b.gpu_alive > 1) l->copies_mine = false;
        l->info_seen = true;
        return;
    }
    if (l->hooks.request(l->o, h, body, arena)) return;
    if (h->req_id)
        fx_conn_reply_error(c, h, FLUXON_ERR_INVALID_ARGUMENT, "%s is not served by an owner", fx_msg_name(h->type));
}

/* ---- forwarding ---- */
typedef struct olink_forward {
    fx_conn_t *ext;
    uint16_t type;
    uint64_t req_id;
    fx_olink_relay_fn relay; /* NULL: the answer goes back as it came */
    uint8_t tag_len;
    char tag[FX_TENANT_NAME_MAX + 2];
} olink_forward_t;

static void olink_on_forward_resp(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena)
{
    olink_forward_t *f = arg;
    if (fx_conn_is_open(f->ext)) {
        if (h) {
            fx_frame_header_t rh = *h;
            rh.req_id = f->req_id;
            if (f->relay) f->relay(f->ext, &rh, body, arena, f->tag, f->tag_len);
            else fx_conn_send_bytes(f->ext, &rh, body);
        } else if (f->type == FX_MSG_DELETE) { /* sent: the master may have applied it (never guessed) */
            fx_frame_header_t q = {FX_FRAME_MAGIC, f->type, 0, 0, 0, f->req_id};
            fx_conn_reply_error(f->ext, &q, FLUXON_ERR_UNKNOWN_OUTCOME,
                                "master %s after the delete was sent: it may have been applied; a retry deletes "
                                "it, or answers NOT_FOUND if it was",
                                status == FLUXON_ERR_TIMEOUT ? "did not answer in time" : "connection lost");
        } else {
            fx_frame_header_t q = {FX_FRAME_MAGIC, f->type, 0, 0, 0, f->req_id};
            fx_conn_reply_error(f->ext, &q, status, "master %s",
                                status == FLUXON_ERR_TIMEOUT ? "did not answer in time" : "connection lost");
        }
    }
    fx_conn_unref(f->ext);
    fx_free(f);
}

FX_INTERNAL void fx_olink_forward(fx_owner_t *o, fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body)
{
    fx_olink_forward_relay(o, c, h, body, NULL, NULL, 0);
}

FX_INTERNAL void fx_olink_forward_relay(fx_owner_t *o, fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                        fx_olink_relay_fn relay, const char *tag, size_t tag_len)
{
    olink_t *l = o->link;
    if (l->mstate != OM_READY || !l->mconn) {
        fx_conn_reply_error(c, h, FLUXON_ERR_UNAVAILABLE, "owner %s is not connected to its master", o->cfg.node_id);
        return;
    }
    olink_forward_t *f = fx_malloc(sizeof *f);
    if (!f) {
        fx_conn_reply_error(c, h, FLUXON_ERR_NOMEM, "owner out of memory");
        return;
    }
    f->ext = c;
    f->type = h->type;
    f->req_id = h->req_id;
    f->relay = relay;
    FX_ASSERT(tag_len <= sizeof f->tag);
    f->tag_len = (uint8_t)tag_len;
    if (tag_len) memcpy(f->tag, tag, tag_len);
    fx_conn_ref(c);
    uint64_t rid = fx_rpc_register(l->mconn, o->cfg.master_timeout_ms, olink_on_forward_resp, f);
    fx_frame_header_t fh = {FX_FRAME_MAGIC, h->type, 0, h->body_len, 0, rid};
    if (!rid || fx_conn_send_bytes(l->mconn, &fh, body) != FLUXON_OK) {
        if (rid) fx_rpc_forget(l->mconn, rid);
        fx_conn_unref(c);
        fx_free(f);
        fx_conn_reply_error(c, h, FLUXON_ERR_UNAVAILABLE, "master connection lost");
        return;
    }
    l->forwarded++;
}

/* ---- lifecycle and accessors ---- */
FX_INTERNAL int fx_olink_init(fx_owner_t *o, const fx_olink_hooks_t *hooks)
{
    olink_t *l = fx_calloc(1, sizeof *l);
    if (!l) return FLUXON_ERR_NOMEM;
    l->o = o;
    l->hooks = *hooks;
    l->connect_fd = -1;
    l->owners_alive = -1;
    fx_strlcpy(l->host, o->cfg.master_host, sizeof l->host);
    l->port = o->cfg.ha_etcd[0] ? 0 : o->cfg.master_port; /* with "ha": etcd's leader */
    fx_timer_init(&l->reconnect_timer);
    fx_timer_init(&l->heartbeat_timer);
    o->link = l;
    return FLUXON_OK;
}

/* With "ha": etcd names another leader (or none). A connection to an older one goes (its
 * requests fail over to the new leader's registration); a link waiting connects now. */
static void olink_on_leader_changed(void *arg)
{
    olink_t *l = arg;
    char host[FX_HOST_MAX];
    uint16_t port;
    int64_t rev;
    if (l->o->shutting_down || !l->leader) return;
    bool known = fx_oleader_get(l->leader, host, sizeof host, &port, &rev);
    if (l->mconn || l->connect_inflight) {
        if (known && rev == l->leader_rev) return;
        char to[FX_HOST_MAX + 8];
        if (known) snprintf(to, sizeof to, "%s:%u", host, (unsigned)port);
        else snprintf(to, sizeof to, "no leader");
        FX_WARN("the master's leadership moved (%s:%u -> %s); leaving %s:%u", l->host, l->port, to, l->host, l->port);
        l->backoff_ms = 0;
        if (l->mconn) fx_conn_close(l->mconn, FLUXON_ERR_STALE);
        return; /* a connect in flight fails or is refused by the old leader: then the new one */
    }
    if (known && l->mstate == OM_DOWN) {
        fx_timer_disarm(l->o->r, &l->reconnect_timer);
        l->backoff_ms = 0;
        olink_connect(l);
    }
}

FX_INTERNAL void fx_olink_start(fx_owner_t *o)
{
    olink_t *l = o->link;
    if (o->cfg.ha_etcd[0]) {
        int rc = fx_oleader_start(o->r, &o->cfg, olink_on_leader_changed, l, &l->leader);
        if (rc != FLUXON_OK) {
            FX_ERROR("owner: cannot start the etcd leader lookup (ha.etcd %s): %s", o->cfg.ha_etcd,
                     fluxon_status_string(rc));
            olink_started(l, rc);
            return;
        }
    }
    olink_connect(l);
}

FX_INTERNAL void fx_olink_shutdown(fx_owner_t *o)
{
    olink_t *l = o->link;
    if (!l) return;
    fx_oleader_stop(l->leader); /* no more changes posted */
    fx_timer_disarm(o->r, &l->reconnect_timer);
    fx_timer_disarm(o->r, &l->heartbeat_timer);
    if (l->connect_inflight) {
        struct io_uring_sqe *sqe = fx_reactor_sqe(o->r, NULL);
        io_uring_prep_cancel64(sqe, (__u64)(uintptr_t)&l->connect_op.io, 0);
    }
    if (l->mconn) fx_conn_close(l->mconn, FLUXON_ERR_CANCELLED);
}

FX_INTERNAL void fx_olink_fini(fx_owner_t *o)
{
    if (o->link) {
        fx_oleader_free(o->link->leader);
        olink_peers_free(&o->link->peers);
    }
    fx_free(o->link);
    o->link = NULL;
}

FX_INTERNAL uint64_t fx_olink_master_generation(fx_owner_t *o)
{
    olink_t *l = o->link;
    return l && l->mstate == OM_READY ? l->master_generation : 0;
}

FX_INTERNAL int fx_olink_statuses(int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena,
                                  size_t n, const char *what, fx_body_statuses_t *st)
{
    memset(st, 0, sizeof *st);
    if (status != FLUXON_OK) return status;
    if (fx_body_statuses_decode(body, h->body_len, st, arena) != FLUXON_OK) st->statuses.n = 0;
    if (st->statuses.n == n) return FLUXON_OK;
    FX_ERROR("malformed %s answer from the master (%u statuses for %zu keys)", what, st->statuses.n, n);
    memset(st, 0, sizeof *st);
    return FLUXON_ERR_PROTOCOL;
}

FX_INTERNAL fx_conn_t *fx_olink_conn(fx_owner_t *o)
{
    olink_t *l = o->link;
    return l && l->mstate == OM_READY ? l->mconn : NULL;
}

FX_INTERNAL int64_t fx_olink_owners_alive(fx_owner_t *o) { return o->link->owners_alive; }

FX_INTERNAL uint32_t fx_olink_dead_grace_ms(fx_owner_t *o)
{
    return o->link && o->link->mstate == OM_READY ? o->link->dead_grace_ms : 0;
}

/* True only while this owner is the only one alive AND no other owner was ever announced
 * to it: another owner's puts may have been placed in this segment (served without their
 * keys being known here), so once one was seen a local miss proves nothing. */
FX_INTERNAL bool fx_olink_alone(fx_owner_t *o) { return o->link->owners_alive == 1 && !o->link->others_seen; }

FX_INTERNAL bool fx_olink_copies_mine(fx_owner_t *o)
{
    olink_t *l = o->link;
    return l->copies_mine && l->owners_alive >= 1 && o->cfg.node_role != FX_NODE_REMOTE_CACHE;
}

FX_INTERNAL void fx_olink_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    olink_t *l = o->link;
    m->master_connected = l->mstate == OM_READY;
    m->master_generation = l->master_generation;
    m->forwarded = l->forwarded;
    m->heartbeats_sent = l->heartbeats_sent;
    m->heartbeat_failures = l->heartbeat_failures;
    m->owners_alive = l->owners_alive;
}
