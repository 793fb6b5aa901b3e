/* owner.c — the owner role: contributes a shared-memory segment, keeps a registered,
 * heart-beating link to the master (reconnecting with backoff when it goes away), and
 * serves external clients on its unix socket (handshake passes the segment's memfd by
 * SCM_RIGHTS; control requests are answered here or forwarded to the master). */
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "owner_kv.h"

static void owner_master_connect(fx_owner_t *o);
static void owner_ext_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena);
static void owner_ext_on_close(fx_conn_t *c, int status);
static const fx_conn_ops_t owner_ext_ops = {owner_ext_on_request, owner_ext_on_close, NULL};
static void owner_master_on_close(fx_conn_t *c, int status);
static void owner_master_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                    fx_arena_t *arena);
static const fx_conn_ops_t owner_master_ops = {owner_master_on_request, owner_master_on_close, NULL};

static void owner_signal_ready(fx_owner_t *o, int status)
{
    if (o->ready_sent) return;
    o->ready_sent = true;
    o->ready(o->ready_arg, status);
}

/* ---- master link ---- */
static void owner_on_reconnect_timer(fx_reactor_t *r, fx_timer_t *t)
{
    fx_owner_t *o = FX_CONTAINER_OF(t, fx_owner_t, reconnect_timer);
    owner_master_connect(o);
}

static void owner_schedule_reconnect(fx_owner_t *o)
{
    if (o->shutting_down) return;
    o->mstate = OM_DOWN;
    o->backoff_ms = o->backoff_ms ? FX_MIN(o->backoff_ms * 2, 2000u) : 100u;
    fx_timer_arm(o->r, &o->reconnect_timer, o->backoff_ms, owner_on_reconnect_timer);
}

static void owner_on_heartbeat_resp(void *arg, int status, const fx_frame_header_t *h,
                                    const uint8_t *body, fx_arena_t *arena)
{
    fx_owner_t *o = arg;
    if (status == FLUXON_OK) return;
    o->heartbeat_failures++;
    if (status == FLUXON_ERR_UNAVAILABLE) return; /* the conn closed; reconnect is scheduled */
    FX_WARN("heartbeat to master failed: %s; reconnecting", fluxon_status_string(status));
    if (o->mconn) fx_conn_close(o->mconn, status);
}

static void owner_on_heartbeat_timer(fx_reactor_t *r, fx_timer_t *t)
{
    fx_owner_t *o = FX_CONTAINER_OF(t, fx_owner_t, heartbeat_timer);
    if (o->mstate != OM_READY || !o->mconn) return;
    fx_body_heartbeat_t b = {o->generation};
    uint32_t to = FX_MAX(o->cfg.heartbeat_interval_ms * 3, 100u);
    if (FX_RPC_CALL(o->mconn, HEARTBEAT, heartbeat, &b, to, owner_on_heartbeat_resp, o) == FLUXON_OK)
        o->heartbeats_sent++;
    fx_timer_arm(r, t, o->cfg.heartbeat_interval_ms, owner_on_heartbeat_timer);
}

/* The master answered HELLO or REGISTER with an error: log its reason (rate-limited once
 * serving), fail the start on a permanent refusal (credentials, node_id taken), and drop
 * the connection so the reconnect loop tries again. */
static void owner_master_refused(fx_owner_t *o, const char *what, int status, const fx_frame_header_t *h,
                                 const uint8_t *body, fx_arena_t *arena)
{
    char msg[256] = "";
    fx_body_error_t e;
    if (h && fx_body_error_decode(body, h->body_len, &e, arena) == FLUXON_OK) fx_str_copy(e.message, msg, sizeof msg);
    if (!o->ready_sent || o->reconnects++ % 10 == 0)
        FX_ERROR("master refused %s: %s%s%s", what, fluxon_status_string(status), msg[0] ? ": " : "", msg);
    if (status == FLUXON_ERR_AUTH || status == FLUXON_ERR_BUSY) owner_signal_ready(o, status);
    if (o->mconn) fx_conn_close(o->mconn, status);
}

static void owner_on_register_resp(void *arg, int status, const fx_frame_header_t *h,
                                   const uint8_t *body, fx_arena_t *arena)
{
    fx_owner_t *o = arg;
    if (status == FLUXON_ERR_UNAVAILABLE) return; /* connection lost: reconnect scheduled */
    if (status != FLUXON_OK) {
        owner_master_refused(o, "registration", status, h, body, arena);
        return;
    }
    fx_body_register_ack_t ack;
    fx_body_register_ack_decode(body, h->body_len, &ack, arena);
    o->mstate = OM_READY;
    o->backoff_ms = 0;
    if (o->master_generation && o->master_generation != ack.master_generation) fx_owner_kv_master_changed(o);
    o->master_generation = ack.master_generation;
    FX_INFO("registered with master %s:%u (master generation %llu, owner generation %llu)",
            o->cfg.master_host, o->cfg.master_port, (unsigned long long)ack.master_generation,
            (unsigned long long)o->generation);
    fx_timer_arm(o->r, &o->heartbeat_timer, o->cfg.heartbeat_interval_ms, owner_on_heartbeat_timer);
    fx_owner_kv_master_ready(o);
    owner_signal_ready(o, FLUXON_OK);
}

static void owner_on_hello_resp(void *arg, int status, const fx_frame_header_t *h,
                                const uint8_t *body, fx_arena_t *arena)
{
    fx_owner_t *o = arg;
    if (status == FLUXON_ERR_UNAVAILABLE) return; /* connection lost: reconnect scheduled */
    if (status != FLUXON_OK) {
        owner_master_refused(o, "HELLO", status, h, body, arena);
        return;
    }
    o->mstate = OM_REGISTERING;
    fx_str_t ua, rk;
    fx_u64v_t gids, goffs;
    fx_owner_kv_ucx_info(o, &ua, &rk);
    fx_owner_kv_grants(o, &gids, &goffs);
    fx_body_register_t reg = {fx_str_c(o->cfg.node_id), o->generation, (uint8_t)o->cfg.node_role,
                              fx_segment_len(o->seg), (uint64_t)(uintptr_t)fx_segment_base(o->seg),
                              ua, rk, o->cfg.grant_bytes, gids, goffs, fx_str_c(o->cfg.sub_cluster)};
    if (FX_RPC_CALL(o->mconn, REGISTER, register, &reg, o->cfg.master_timeout_ms,
                    owner_on_register_resp, o) != FLUXON_OK)
        fx_conn_close(o->mconn, FLUXON_ERR_UNAVAILABLE);
}

static void owner_on_connect(fx_connect_op_t *op, int res)
{
    fx_owner_t *o = op->arg;
    o->connect_inflight = false;
    int fd = o->connect_fd;
    o->connect_fd = -1;
    if (o->shutting_down) {
        close(fd);
        return;
    }
    if (res < 0) {
        close(fd);
        if (o->reconnects++ % 10 == 0)
            FX_WARN("cannot reach master %s:%u: %s; retrying", o->cfg.master_host, o->cfg.master_port,
                    strerror(res == -ECANCELED ? ETIMEDOUT : -res));
        owner_schedule_reconnect(o);
        return;
    }
    char desc[96];
    snprintf(desc, sizeof desc, "master %s:%u", o->cfg.master_host, o->cfg.master_port);
    o->mconn = fx_conn_new(o->r, fd, &owner_master_ops, o, o->cfg.max_frame_bytes, desc);
    if (!o->mconn) {
        owner_schedule_reconnect(o);
        return;
    }
    if (o->cfg.fault_message[0] && o->cfg.fault_kind != FX_FAULT_DELAY_REQUEST) /* test-only */
        fx_conn_set_fault(o->mconn, (uint16_t)fx_msg_by_name(o->cfg.fault_message), o->cfg.fault_kind,
                          o->cfg.fault_ms, o->cfg.fault_count);
    o->mstate = OM_HELLO;
    fx_body_hello_t hb;
    fx_hello_fill(&o->cfg, FX_ROLE_OWNER, o->cfg.node_id, o->generation, &hb);
    if (FX_RPC_CALL(o->mconn, HELLO, hello, &hb, o->cfg.master_timeout_ms, owner_on_hello_resp, o) != FLUXON_OK)
        fx_conn_close(o->mconn, FLUXON_ERR_UNAVAILABLE);
}

static void owner_master_connect(fx_owner_t *o)
{
    if (o->shutting_down || o->connect_inflight || o->mconn) return;
    int fd;
    if (fx_tcp_socket(o->cfg.master_host, o->cfg.master_port, &fd, o->connect_op.addr,
                      &o->connect_op.addrlen) != FLUXON_OK) {
        owner_schedule_reconnect(o);
        return;
    }
    o->mstate = OM_CONNECTING;
    o->connect_fd = fd;
    o->connect_inflight = true;
    o->connect_op.cb = owner_on_connect;
    o->connect_op.arg = o;
    fx_connect_start(o->r, &o->connect_op, fd, 2000);
}

static void owner_master_on_close(fx_conn_t *c, int status)
{
    fx_owner_t *o = fx_conn_ud(c);
    bool was_ready = o->mstate >= OM_HELLO;
    o->mconn = NULL;
    fx_timer_disarm(o->r, &o->heartbeat_timer);
    if (o->shutting_down) return;
    fx_owner_kv_master_lost(o);
    if (was_ready) FX_WARN("lost the master connection (%s); reconnecting", fluxon_status_string(status));
    owner_schedule_reconnect(o);
}

static void owner_master_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                    fx_arena_t *arena)
{
    fx_owner_t *o = fx_conn_ud(c);
    if (fx_owner_kv_master_request(o, h, body, arena)) return;
    if (h->req_id) fx_conn_reply_error(c, h, FLUXON_ERR_INVALID_ARGUMENT, "%s is not served by an owner", fx_msg_name(h->type));
}

/* ---- externals ---- */
typedef struct owner_forward {
    fx_conn_t *ext;
    uint16_t type;
    uint64_t req_id;
} owner_forward_t;

static void owner_on_forward_resp(void *arg, int status, const fx_frame_header_t *h,
                                  const uint8_t *body, fx_arena_t *arena)
{
    owner_forward_t *f = arg;
    if (fx_conn_is_open(f->ext)) {
        if (h) {
            fx_frame_header_t rh = *h;
            rh.req_id = f->req_id;
            fx_conn_send_bytes(f->ext, &rh, body);
        } else {
            fx_frame_header_t q = {FX_FRAME_MAGIC, f->type, 0, 0, 0, f->req_id};
            fx_conn_reply_error(f->ext, &q, status, "master %s", status == FLUXON_ERR_TIMEOUT
                                ? "did not answer in time" : "connection lost");
        }
    }
    fx_conn_unref(f->ext);
    fx_free(f);
}

FX_INTERNAL void fx_owner_forward(fx_owner_t *o, fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body)
{
    if (o->mstate != OM_READY || !o->mconn) {
        fx_conn_reply_error(c, h, FLUXON_ERR_UNAVAILABLE, "owner %s is not connected to its master",
                            o->cfg.node_id);
        return;
    }
    owner_forward_t *f = fx_malloc(sizeof *f);
    if (!f) {
        fx_conn_reply_error(c, h, FLUXON_ERR_NOMEM, "owner out of memory");
        return;
    }
    f->ext = c;
    f->type = h->type;
    f->req_id = h->req_id;
    fx_conn_ref(c);
    uint64_t rid = fx_rpc_register(o->mconn, o->cfg.master_timeout_ms, owner_on_forward_resp, f);
    fx_frame_header_t fh = {FX_FRAME_MAGIC, h->type, 0, h->body_len, 0, rid};
    if (!rid || fx_conn_send_bytes(o->mconn, &fh, body) != FLUXON_OK) {
        if (rid) fx_rpc_forget(o->mconn, rid);
        fx_conn_unref(c);
        fx_free(f);
        fx_conn_reply_error(c, h, FLUXON_ERR_UNAVAILABLE, "master connection lost");
        return;
    }
    o->forwarded++;
}

static void owner_handle_ext_hello(owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                   fx_arena_t *arena)
{
    fx_owner_t *o = e->o;
    fx_body_hello_t b;
    fx_body_hello_decode(body, h->body_len, &b, arena);
    char err[256];
    int rc = fx_hello_check(&o->cfg, &b, err, sizeof err);
    if (rc == FLUXON_OK && b.role != FX_ROLE_EXTERNAL) {
        snprintf(err, sizeof err, "role %s may not connect to an owner's socket", fx_role_name((fx_role_t)b.role));
        rc = FLUXON_ERR_AUTH;
    }
    if (rc != FLUXON_OK) {
        FX_WARN("refusing a client on %s: %s", o->cfg.socket_path, err);
        fx_conn_reply_error(e->conn, h, rc, "%s", err);
        fx_conn_close_after_flush(e->conn, rc);
        return;
    }
    e->hello_ok = true;
    fx_str_copy(b.node_id, e->node_id, sizeof e->node_id);
    char desc[96];
    snprintf(desc, sizeof desc, "external %s", e->node_id);
    fx_conn_set_desc(e->conn, desc);
    /* The ack travels with the segment's memfd (SCM_RIGHTS); nothing else has been sent
     * on this connection yet, so a direct sendmsg keeps the stream in order. */
    fx_body_hello_ack_t ack = {FX_PROTOCOL_VERSION, fx_str_c(o->cfg.node_id), o->generation,
                               fx_segment_len(o->seg), {NULL, 0}, o->cfg.handle_ttl_ms};
    size_t bl = fx_body_hello_ack_size(&ack);
    uint8_t frame[512];
    FX_ASSERT(bl + FX_FRAME_HEADER_BYTES <= sizeof frame);
    fx_frame_header_t rh = {FX_FRAME_MAGIC, FX_MSG_HELLO, FX_FLAG_RESPONSE, (uint32_t)bl, 0, h->req_id};
    fx_frame_header_encode(&rh, frame);
    fx_body_hello_ack_encode(&ack, frame + FX_FRAME_HEADER_BYTES);
    rc = fx_unix_send_fd(fx_conn_fd(e->conn), fx_segment_fd(o->seg), frame, bl + FX_FRAME_HEADER_BYTES);
    if (rc != FLUXON_OK) {
        FX_WARN("cannot pass the segment to %s: %s", desc, fluxon_status_string(rc));
        fx_conn_close(e->conn, rc);
        return;
    }
    FX_DEBUG("external %s attached", e->node_id);
}

static int owner_stats_json(fx_owner_t *o, char *buf, size_t cap)
{
    return snprintf(buf, cap,
                    "{\"node_id\":\"%s\",\"generation\":%llu,\"node_role\":\"%s\","
                    "\"segment_bytes\":%llu,\"externals\":%zu,\"master_connected\":%s,"
                    "\"master_generation\":%llu,\"requests\":%llu,\"forwarded\":%llu,"
                    "\"errors\":%llu,\"heartbeats_sent\":%llu,\"heartbeat_failures\":%llu}",
                    o->cfg.node_id, (unsigned long long)o->generation,
                    fx_node_role_name(o->cfg.node_role), (unsigned long long)fx_segment_len(o->seg),
                    o->n_exts, o->mstate == OM_READY ? "true" : "false",
                    (unsigned long long)o->master_generation, (unsigned long long)o->requests,
                    (unsigned long long)o->forwarded, (unsigned long long)o->errors,
                    (unsigned long long)o->heartbeats_sent, (unsigned long long)o->heartbeat_failures);
}

static void owner_ext_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena)
{
    owner_ext_t *e = fx_conn_ud(c);
    fx_owner_t *o = e->o;
    o->requests++;
    if (!e->hello_ok) {
        if (h->type != FX_MSG_HELLO) {
            FX_ERROR("protocol error from %s: %s before HELLO; closing the connection",
                     fx_conn_desc(c), fx_msg_name(h->type));
            o->errors++;
            fx_conn_close(c, FLUXON_ERR_PROTOCOL);
            return;
        }
        owner_handle_ext_hello(e, h, body, arena);
        return;
    }
    switch (h->type) {
    case FX_MSG_PING: {
        fx_body_ping_t b;
        fx_body_ping_decode(body, h->body_len, &b, arena);
        if (b.to_master) fx_owner_forward(o, c, h, body);
        else FX_CONN_REPLY(c, h, ping, &b);
        break;
    }
    case FX_MSG_CLUSTER_NODES:
    case FX_MSG_MASTER_STATS: fx_owner_forward(o, c, h, body); break;
    case FX_MSG_OWNER_STATS: {
        /* owner counters, then the KV counters, then the slot pool per state and grant */
        size_t cap = 1 << 20;
        char *buf = fx_malloc(cap);
        if (!buf) {
            fx_conn_reply_error(c, h, FLUXON_ERR_NOMEM, "stats: owner out of memory");
            break;
        }
        int n = owner_stats_json(o, buf, 4096);
        n--; /* reopen the object */
        buf[n++] = ',';
        n += (int)fx_owner_kv_stats_json(o, buf + n, 16384);
        size_t pl = 0;
        memcpy(buf + n, ",\"slot_pool\":", 13);
        if (fx_slot_pool_stats_json(owner_kv(o)->pool, buf + n + 13, cap - (size_t)n - 16, &pl) == FLUXON_OK)
            n += 13 + (int)pl;
        buf[n++] = '}';
        buf[n] = 0;
        fx_body_json_t j = {{buf, (uint32_t)n}};
        FX_CONN_REPLY(c, h, json, &j);
        fx_free(buf);
        break;
    }
    default:
        if (fx_owner_kv_ext_request(o, e, h, body, arena)) break;
        o->errors++;
        if (h->req_id)
            fx_conn_reply_error(c, h, FLUXON_ERR_INVALID_ARGUMENT, "%s is not served by an owner",
                                fx_msg_name(h->type));
    }
}

static void owner_ext_on_close(fx_conn_t *c, int status)
{
    owner_ext_t *e = fx_conn_ud(c);
    fx_owner_t *o = e->o;
    fx_owner_kv_ext_closed(o, e);
    if (e->prev) e->prev->next = e->next;
    else o->exts = e->next;
    if (e->next) e->next->prev = e->prev;
    o->n_exts--;
    fx_free(e);
}

static void owner_on_accept(void *arg, int fd)
{
    fx_owner_t *o = arg;
    if (fd < 0) {
        FX_ERROR("accept on %s failed: %s", o->cfg.socket_path, strerror(-fd));
        return;
    }
    owner_ext_t *e = fx_calloc(1, sizeof *e);
    if (!e) {
        close(fd);
        return;
    }
    e->o = o;
    e->conn = fx_conn_new(o->r, fd, &owner_ext_ops, e, o->cfg.max_frame_bytes, "new external");
    if (!e->conn) {
        fx_free(e);
        return;
    }
    e->next = o->exts;
    if (o->exts) o->exts->prev = e;
    o->exts = e;
    o->n_exts++;
}

FX_INTERNAL int fx_owner_create(fx_reactor_t *r, const fx_config_t *cfg, fx_ready_fn ready,
                                void *ready_arg, fx_owner_t **o_p)
{
    fx_owner_t *o = fx_calloc(1, sizeof *o);
    if (!o) return FLUXON_ERR_NOMEM;
    o->r = r;
    o->cfg = *cfg;
    o->generation = fx_realtime_ns();
    o->connect_fd = -1;
    o->listen_fd = -1;
    o->ready = ready;
    o->ready_arg = ready_arg;
    fx_timer_init(&o->reconnect_timer);
    fx_timer_init(&o->heartbeat_timer);
    if (cfg->fault_message[0] && !fx_msg_by_name(cfg->fault_message)) {
        FX_ERROR("config rejected: test.fault_message: \"%s\" is not a message name", cfg->fault_message);
        fx_free(o);
        return FLUXON_ERR_CONFIG;
    }
    int rc = fx_segment_create(cfg->segment_bytes, cfg->numa_node, o->generation, cfg->node_id, &o->seg);
    if (rc != FLUXON_OK) goto err_free;
    /* Fault the whole segment in now: first-touch faults of shared memory otherwise land
     * on the hot path of every first put and remote fetch into a fresh slot (they were
     * the largest cost of remote restores in profiles). Best effort. */
    if (madvise(fx_segment_base(o->seg), fx_segment_len(o->seg), MADV_POPULATE_WRITE) != 0)
        FX_DEBUG("segment prefault skipped: %m");
    rc = fx_owner_kv_init(o);
    if (rc != FLUXON_OK) goto err_segment;
    rc = fx_unix_listen(cfg->socket_path, &o->listen_fd);
    if (rc != FLUXON_OK) goto err_kv;
    rc = fx_acceptor_start(r, o->listen_fd, owner_on_accept, o, &o->acceptor);
    if (rc != FLUXON_OK) goto err_listen;
    FX_INFO("owner %s serving externals on %s (segment %llu bytes, generation %llu)", cfg->node_id,
            cfg->socket_path, (unsigned long long)cfg->segment_bytes, (unsigned long long)o->generation);
    *o_p = o;
    owner_master_connect(o); /* ready is signalled once registered */
    return FLUXON_OK;

err_listen:
    close(o->listen_fd);
    unlink(cfg->socket_path);
err_kv:
    fx_owner_kv_fini(o);
err_segment:
    fx_segment_destroy(o->seg);
err_free:
    fx_free(o);
    return rc;
}

FX_INTERNAL void fx_owner_shutdown(fx_owner_t *o)
{
    o->shutting_down = true;
    fx_timer_disarm(o->r, &o->reconnect_timer);
    fx_timer_disarm(o->r, &o->heartbeat_timer);
    fx_acceptor_stop(o->r, o->acceptor);
    o->acceptor = NULL;
    if (o->connect_inflight) {
        struct io_uring_sqe *sqe = fx_reactor_sqe(o->r, NULL);
        io_uring_prep_cancel64(sqe, (__u64)(uintptr_t)&o->connect_op.io, 0);
    }
    while (o->exts) fx_conn_close(o->exts->conn, FLUXON_ERR_CANCELLED);
    if (o->mconn) fx_conn_close(o->mconn, FLUXON_ERR_CANCELLED);
    fx_owner_kv_shutdown(o);
    if (o->listen_fd >= 0) {
        close(o->listen_fd);
        o->listen_fd = -1;
        unlink(o->cfg.socket_path);
    }
}

FX_INTERNAL void fx_owner_destroy(fx_owner_t *o)
{
    if (!o) return;
    fx_owner_kv_fini(o);
    fx_segment_destroy(o->seg);
    fx_free(o);
}
