/* client.c — the external client (fluxon_client_*): attaches to its owner's unix
 * socket (HELLO, memfd by SCM_RIGHTS, segment mapped here) and runs a reactor thread
 * that owns the connection. API calls from any thread post a command to that reactor
 * and wait, bounded by timeout_ms, for its completion. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "role.h"
#include "segment.h"


static void client_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena)
{
    fluxon_client *cl = fx_conn_ud(c);
    if (fx_client_kv_notification(cl, h, body, arena)) return;
    if (h->req_id) fx_conn_reply_error(c, h, FLUXON_ERR_INVALID_ARGUMENT, "%s is not served by an external",
                        fx_msg_name(h->type));
}

static void client_on_close(fx_conn_t *c, int status)
{
    fluxon_client *cl = fx_conn_ud(c);
    cl->conn = NULL;
    __atomic_store_n(&cl->owner_lost, true, __ATOMIC_RELEASE);
    fx_client_kv_owner_lost(cl);
    if (!fx_reactor_stopping(cl->r))
        FX_WARN("connection to owner %s lost (%s)", cl->owner_node_id, fluxon_status_string(status));
}

static const fx_conn_ops_t client_conn_ops = {client_on_request, client_on_close};

static void *client_thread(void *arg)
{
    fluxon_client *cl = arg;
    fx_log_set_context("external", cl->cfg.node_id);
    fx_reactor_run(cl->r);
    if (cl->conn) fx_conn_close(cl->conn, FLUXON_ERR_CANCELLED);
    fx_reactor_drain(cl->r, 2000);
    return NULL;
}

/* ---- blocking handshake (before the reactor owns the socket) ---- */
static int client_wait_fd(int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        uint64_t now = fx_now_ms();
        if (now >= deadline_ms) return FLUXON_ERR_TIMEOUT;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, (int)(deadline_ms - now));
        if (n > 0) return FLUXON_OK;
        if (n < 0 && errno != EINTR) return FLUXON_ERR_UNAVAILABLE;
    }
}

/* Reads one whole frame; an fd passed with any of its bytes is returned in *fd_p. */
static int client_read_frame(int sock, uint8_t *buf, size_t cap, uint64_t max_body,
                             fx_frame_header_t *h, int *fd_p, uint64_t deadline_ms)
{
    size_t have = 0, need = FX_FRAME_HEADER_BYTES;
    *fd_p = -1;
    while (have < need) {
        int rc = client_wait_fd(sock, POLLIN, deadline_ms);
        if (rc != FLUXON_OK) return rc;
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int) * 4)];
        } ctl;
        struct iovec iov = {buf + have, need - have};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                             .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return FLUXON_ERR_UNAVAILABLE;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
            size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < nfd; i++) {
                int f;
                memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
                if (*fd_p < 0) *fd_p = f;
                else close(f);
            }
        }
        have += (size_t)n;
        if (have == FX_FRAME_HEADER_BYTES && need == FX_FRAME_HEADER_BYTES) {
            if (fx_frame_header_decode(buf, max_body, h) != FLUXON_OK ||
                FX_FRAME_HEADER_BYTES + (size_t)h->body_len > cap)
                return FLUXON_ERR_PROTOCOL;
            need += h->body_len;
        }
    }
    return FLUXON_OK;
}

static int client_handshake(fluxon_client *cl, int sock, int *seg_fd_p)
{
    uint64_t deadline = fx_now_ms() + cl->cfg.timeout_ms;
    fx_body_hello_t hb;
    fx_hello_fill(&cl->cfg, FX_ROLE_EXTERNAL, cl->cfg.node_id, 0, &hb);
    uint8_t out[1024];
    size_t bl = fx_body_hello_size(&hb);
    if (bl + FX_FRAME_HEADER_BYTES > sizeof out) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_frame_header_t h = {FX_FRAME_MAGIC, FX_MSG_HELLO, 0, (uint32_t)bl, 0, 1};
    fx_frame_header_encode(&h, out);
    fx_body_hello_encode(&hb, out + FX_FRAME_HEADER_BYTES);
    size_t off = 0, total = bl + FX_FRAME_HEADER_BYTES;
    while (off < total) {
        int rc = client_wait_fd(sock, POLLOUT, deadline);
        if (rc != FLUXON_OK) return rc;
        ssize_t n = send(sock, out + off, total - off, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return FLUXON_ERR_UNAVAILABLE;
        off += (size_t)n;
    }
    uint8_t in[2048];
    fx_frame_header_t rh;
    int fd = -1;
    int rc = client_read_frame(sock, in, sizeof in, sizeof in, &rh, &fd, deadline);
    if (rc != FLUXON_OK) {
        if (fd >= 0) close(fd);
        FX_ERROR("handshake with owner at %s failed: %s", cl->cfg.socket_path, fluxon_status_string(rc));
        return rc;
    }
    fx_arena_t arena = {0};
    if (rh.type != FX_MSG_HELLO || !(rh.flags & FX_FLAG_RESPONSE) ||
        fx_msg_validate(&rh, in + FX_FRAME_HEADER_BYTES, &arena) != FLUXON_OK) {
        rc = FLUXON_ERR_PROTOCOL;
        FX_ERROR("handshake with owner at %s: malformed reply", cl->cfg.socket_path);
    } else if (rh.status != FLUXON_OK) {
        fx_body_error_t e;
        fx_body_error_decode(in + FX_FRAME_HEADER_BYTES, rh.body_len, &e, &arena);
        rc = rh.status;
        FX_ERROR("owner at %s refused the connection: %s: %.*s", cl->cfg.socket_path,
                 fluxon_status_string(rc), (int)e.message.len, e.message.p ? e.message.p : "");
    } else if (fd < 0) {
        rc = FLUXON_ERR_PROTOCOL;
        FX_ERROR("handshake with owner at %s: no segment fd received", cl->cfg.socket_path);
    } else {
        fx_body_hello_ack_t ack;
        fx_body_hello_ack_decode(in + FX_FRAME_HEADER_BYTES, rh.body_len, &ack, &arena);
        fx_str_copy(ack.node_id, cl->owner_node_id, sizeof cl->owner_node_id);
        cl->owner_generation = ack.generation;
        cl->handle_ttl_ms = ack.handle_ttl_ms;
        *seg_fd_p = fd;
        fd = -1;
    }
    if (fd >= 0) close(fd);
    fx_arena_free(&arena);
    return rc;
}

int fluxon_client_open(const char *config_json, fluxon_client **client_p)
{
    if (!config_json || !client_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fluxon_client *cl = fx_calloc(1, sizeof *cl);
    if (!cl) return FLUXON_ERR_NOMEM;
    char err[512];
    int rc = fx_config_parse(config_json, &cl->cfg, err, sizeof err);
    if (rc != FLUXON_OK) {
        FX_ERROR("config rejected: %s", err);
        goto err_free;
    }
    if (cl->cfg.role != FX_ROLE_EXTERNAL) {
        FX_ERROR("config rejected: role: \"%s\" is not \"external\" (fluxon_client_open)",
                 fx_role_name(cl->cfg.role));
        rc = FLUXON_ERR_CONFIG;
        goto err_free;
    }
    fx_log_apply_config_level(cl->cfg.log_level);
    int sock = -1, seg_fd = -1;
    rc = fx_unix_connect(cl->cfg.socket_path, (int)cl->cfg.timeout_ms, &sock);
    if (rc != FLUXON_OK) {
        FX_ERROR("cannot connect to owner socket %s: %s", cl->cfg.socket_path, fluxon_status_string(rc));
        goto err_free;
    }
    rc = client_handshake(cl, sock, &seg_fd);
    if (rc != FLUXON_OK) goto err_sock;
    rc = fx_segment_attach(seg_fd, cl->owner_generation, &cl->seg); /* takes seg_fd */
    if (rc != FLUXON_OK) {
        FX_ERROR("cannot map the segment of owner %s: %s", cl->owner_node_id, fluxon_status_string(rc));
        goto err_sock;
    }
    rc = fx_reactor_create(&cl->r);
    if (rc != FLUXON_OK) goto err_seg;
    rc = fx_client_kv_init(cl);
    if (rc != FLUXON_OK) goto err_reactor;
    cl->conn = fx_conn_new(cl->r, sock, &client_conn_ops, cl, cl->cfg.max_frame_bytes, "owner");
    sock = -1; /* owned by the conn now, even on failure */
    if (!cl->conn) {
        rc = FLUXON_ERR_NOMEM;
        goto err_kv;
    }
    char desc[96];
    snprintf(desc, sizeof desc, "owner %s", cl->owner_node_id);
    fx_conn_set_desc(cl->conn, desc);
    if (pthread_create(&cl->thread, NULL, client_thread, cl) != 0) {
        FX_ERROR("cannot start the client thread: %m");
        rc = FLUXON_ERR_INTERNAL;
        fx_conn_close(cl->conn, FLUXON_ERR_CANCELLED);
        fx_reactor_drain(cl->r, 1000);
        goto err_kv;
    }
    *client_p = cl;
    return FLUXON_OK;

err_kv:
    fx_client_kv_fini(cl);
err_reactor:
    fx_reactor_destroy(cl->r);
err_seg:
    fx_segment_destroy(cl->seg);
err_sock:
    if (sock >= 0) close(sock);
err_free:
    fx_free(cl);
    return rc;
}

static void client_stop_on_reactor(void *arg)
{
    fluxon_client *cl = arg;
    fx_reactor_stop(cl->r);
}

void fluxon_client_close(fluxon_client *cl)
{
    if (!cl) return;
    fx_reactor_post(cl->r, client_stop_on_reactor, cl);
    pthread_join(cl->thread, NULL);
    fx_client_kv_fini(cl);
    fx_reactor_destroy(cl->r);
    fx_segment_destroy(cl->seg);
    fx_free(cl);
}

/* ---- calls: post to the reactor, wait for the completion ---- */
FX_INTERNAL int fx_client_call(fluxon_client *cl, fx_client_call_t *call)
{
    __atomic_add_fetch(&cl->requests, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&cl->owner_lost, __ATOMIC_ACQUIRE)) {
        __atomic_add_fetch(&cl->errors, 1, __ATOMIC_RELAXED);
        return FLUXON_ERR_UNAVAILABLE;
    }
    call->cl = cl;
    call->status = FLUXON_ERR_INTERNAL;
    call->refs = 2;
    sem_init(&call->done, 0, 0);
    if (fx_reactor_post(cl->r, call->run, call) != FLUXON_OK) {
        sem_destroy(&call->done);
        return FLUXON_ERR_NOMEM;
    }
    call->posted = true;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(cl->cfg.timeout_ms + 1000) * 1000000ull;
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    int rc;
    while ((rc = sem_timedwait(&call->done, &ts)) != 0 && errno == EINTR) {}
    int status = rc == 0 ? call->status : FLUXON_ERR_TIMEOUT;
    if (status == FLUXON_ERR_TIMEOUT) __atomic_add_fetch(&cl->timeouts, 1, __ATOMIC_RELAXED);
    if (status < 0) __atomic_add_fetch(&cl->errors, 1, __ATOMIC_RELAXED);
    return status;
}

/* Completes a call from the reactor (exactly once). */
FX_INTERNAL void fx_client_call_done(fx_client_call_t *call, int status)
{
    call->status = status;
    sem_post(&call->done);
}

/* Drops the caller's reference once it has read the results (after fx_client_call). */
FX_INTERNAL bool fx_client_call_release(fx_client_call_t *call)
{
    return __atomic_sub_fetch(&call->refs, 1, __ATOMIC_ACQ_REL) == 0;
}

FX_INTERNAL fx_conn_t *fx_client_conn(fluxon_client *cl) { return cl->conn; }
FX_INTERNAL const fx_config_t *fx_client_config(const fluxon_client *cl) { return &cl->cfg; }
FX_INTERNAL fx_segment_t *fx_client_segment(const fluxon_client *cl) { return cl->seg; }

/* ---- ping ---- */
typedef struct client_ping {
    fx_client_call_t call;
    uint8_t to_master;
} client_ping_t;

static void client_ping_free(fx_client_call_t *call)
{
    if (fx_client_call_release(call)) {
        sem_destroy(&call->done);
        fx_free(call);
    }
}

static void client_on_ping(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                           fx_arena_t *arena)
{
    client_ping_t *p = arg;
    fx_client_call_done(&p->call, status);
    client_ping_free(&p->call);
}

static void client_run_ping(void *arg)
{
    client_ping_t *p = arg;
    fx_conn_t *c = p->call.cl->conn;
    fx_body_ping_t b = {p->to_master, fx_now_ns()};
    if (!c || FX_RPC_CALL(c, PING, ping, &b, p->call.cl->cfg.timeout_ms, client_on_ping, p) != FLUXON_OK) {
        fx_client_call_done(&p->call, FLUXON_ERR_UNAVAILABLE);
        client_ping_free(&p->call);
    }
}

int fluxon_client_ping(fluxon_client *cl, int to_master, uint64_t *rtt_ns_p)
{
    if (!cl) return FLUXON_ERR_INVALID_ARGUMENT;
    client_ping_t *p = fx_calloc(1, sizeof *p);
    if (!p) return FLUXON_ERR_NOMEM;
    p->call.run = client_run_ping;
    p->to_master = to_master ? 1 : 0;
    uint64_t t0 = fx_now_ns();
    int rc = fx_client_call(cl, &p->call);
    uint64_t t1 = fx_now_ns();
    if (!p->call.posted) {
        fx_free(p);
        return rc;
    }
    client_ping_free(&p->call);
    if (rc == FLUXON_OK && rtt_ns_p) *rtt_ns_p = t1 - t0;
    return rc;
}

/* ---- json-returning calls: owner stats and cluster nodes ---- */
typedef struct client_json {
    fx_client_call_t call;
    uint16_t type;
    char *json; /* fx_malloc'ed by the reactor */
    size_t len;
} client_json_t;

static void client_json_free(fx_client_call_t *call)
{
    client_json_t *j = (client_json_t *)call;
    if (fx_client_call_release(call)) {
        sem_destroy(&call->done);
        fx_free(j->json);
        fx_free(j);
    }
}

static const char *client_role_label(uint64_t role)
{
    switch (role) {
    case FX_ROLE_MASTER: return "master";
    case FX_ROLE_OWNER: return "gpu_owner";
    case 100 + FX_NODE_REMOTE_CACHE: return "remote_cache";
    default: return "unknown";
    }
}

static char *client_nodes_to_json(const fx_body_nodes_t *b, size_t *len_p)
{
    size_t n = b->node_ids.n;
    if (b->roles.n != n || b->generations.n != n || b->alive.n != n || b->segment_bytes.n != n) return NULL;
    size_t cap = 64 + n * 256, len = 0;
    char *out = fx_malloc(cap);
    if (!out) return NULL;
    len += (size_t)snprintf(out + len, cap - len, "[");
    for (size_t i = 0; i < n; i++) {
        char id[FX_ID_MAX];
        fx_str_copy(b->node_ids.v[i], id, sizeof id);
        for (char *q = id; *q; q++)
            if (*q == '"' || *q == '\\' || (unsigned char)*q < 0x20) *q = '_';
        len += (size_t)snprintf(out + len, cap - len,
                                "%s{\"node_id\":\"%s\",\"role\":\"%s\",\"generation\":%llu,"
                                "\"alive\":%s,\"segment_bytes\":%llu}",
                                i ? "," : "", id, client_role_label(b->roles.v[i]),
                                (unsigned long long)b->generations.v[i], b->alive.v[i] ? "true" : "false",
                                (unsigned long long)b->segment_bytes.v[i]);
    }
    len += (size_t)snprintf(out + len, cap - len, "]");
    *len_p = len;
    return out;
}

static void client_on_json(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                           fx_arena_t *arena)
{
    client_json_t *j = arg;
    fluxon_client *cl = j->call.cl;
    if (status == FLUXON_OK && j->type == FX_MSG_OWNER_STATS) {
        fx_body_json_t b;
        fx_body_json_decode(body, h->body_len, &b, arena);
        char client_part[256];
        int cn = snprintf(client_part, sizeof client_part,
                          "{\"client\":{\"node_id\":\"%s\",\"requests\":%llu,\"errors\":%llu,"
                          "\"timeouts\":%llu},\"owner\":",
                          cl->cfg.node_id, (unsigned long long)__atomic_load_n(&cl->requests, __ATOMIC_RELAXED),
                          (unsigned long long)__atomic_load_n(&cl->errors, __ATOMIC_RELAXED),
                          (unsigned long long)__atomic_load_n(&cl->timeouts, __ATOMIC_RELAXED));
        j->json = fx_malloc((size_t)cn + b.json.len + 2);
        if (!j->json) {
            status = FLUXON_ERR_NOMEM;
        } else {
            memcpy(j->json, client_part, (size_t)cn);
            memcpy(j->json + cn, b.json.p, b.json.len);
            j->len = (size_t)cn + b.json.len;
            j->json[j->len++] = '}';
            j->json[j->len] = 0;
        }
    } else if (status == FLUXON_OK) {
        fx_body_nodes_t b;
        fx_body_nodes_decode(body, h->body_len, &b, arena);
        j->json = client_nodes_to_json(&b, &j->len);
        if (!j->json) status = FLUXON_ERR_PROTOCOL;
    }
    fx_client_call_done(&j->call, status);
    client_json_free(&j->call);
}

static void client_run_json(void *arg)
{
    client_json_t *j = arg;
    fx_conn_t *c = j->call.cl->conn;
    fx_body_empty_t e;
    uint32_t to = j->call.cl->cfg.timeout_ms;
    int rc = FLUXON_ERR_UNAVAILABLE;
    if (c && j->type == FX_MSG_OWNER_STATS)
        rc = FX_RPC_CALL(c, OWNER_STATS, empty, &e, to, client_on_json, j);
    else if (c)
        rc = FX_RPC_CALL(c, CLUSTER_NODES, empty, &e, to, client_on_json, j);
    if (rc != FLUXON_OK) {
        fx_client_call_done(&j->call, rc);
        client_json_free(&j->call);
    }
}

static int client_json_call(fluxon_client *cl, uint16_t type, char *json, size_t cap, size_t *len_p)
{
    if (!cl || !len_p || (!json && cap)) return FLUXON_ERR_INVALID_ARGUMENT;
    client_json_t *j = fx_calloc(1, sizeof *j);
    if (!j) return FLUXON_ERR_NOMEM;
    j->call.run = client_run_json;
    j->type = type;
    int rc = fx_client_call(cl, &j->call);
    if (!j->call.posted) {
        fx_free(j);
        return rc;
    }
    if (rc == FLUXON_OK) {
        if (j->len + 1 > cap) {
            *len_p = j->len;
            rc = FLUXON_ERR_INVALID_ARGUMENT;
        } else {
            memcpy(json, j->json, j->len + 1);
            *len_p = j->len;
        }
    }
    client_json_free(&j->call);
    return rc;
}

int fluxon_client_stats(fluxon_client *cl, char *json, size_t cap, size_t *len_p)
{
    return client_json_call(cl, FX_MSG_OWNER_STATS, json, cap, len_p);
}

int fluxon_client_cluster_nodes(fluxon_client *cl, char *json, size_t cap, size_t *len_p)
{
    return client_json_call(cl, FX_MSG_CLUSTER_NODES, json, cap, len_p);
}
