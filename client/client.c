/* client.c — the external client (fluxon_client_*): attaches to its owner's unix
 * socket (HELLO, memfd by SCM_RIGHTS, segment mapped here) and runs a reactor thread
 * that owns the connection and receives; requests go out through rpc.c from the calling
 * thread. Also ping, owner stats and cluster nodes. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "hello.h"
#include "jsonbuf.h"
#include "segment.h"
#include "ring.h"


static void client_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena)
{
    fluxon_client *cl = fx_conn_ud(c);
    if (fx_client_futures_notification(cl, h, body, arena)) return;
    /* the owner sends no other requests; the client never answers on this socket (its
     * callers write to it directly) */
    FX_DEBUG("unexpected %s from the owner ignored", fx_msg_name(h->type));
}

static void client_on_close(fx_conn_t *c, int status)
{
    fluxon_client *cl = fx_conn_ud(c);
    cl->conn = NULL;
    __atomic_store_n(&cl->owner_lost, true, __ATOMIC_RELEASE);
    fx_client_ring_lost(cl);
    fx_client_rpc_fail_all(cl);
    fx_client_futures_fail_all(cl);
    if (!fx_reactor_stopping(cl->r))
        FX_WARN("connection to owner %s lost (%s)", cl->owner_node_id, fluxon_status_string(status));
}

static const fx_conn_ops_t client_conn_ops = {client_on_request, client_on_close, fx_client_on_response};

/* handle_ttl_ms/4, within 10 ms .. 1 s: a handle is cancelled at most that late */
static uint64_t client_sweep_ms(const fluxon_client *cl) { return FX_MIN(FX_MAX(cl->handle_ttl_ms / 4, 10u), 1000u); }

static void client_on_handle_timer(fx_reactor_t *r, fx_timer_t *t)
{
    fluxon_client *cl = FX_CONTAINER_OF(t, fluxon_client, handle_timer);
    fx_client_ring_sweep(cl); /* late ring replies hand back what they reserved */
    fx_client_handles_expire(cl);
    if (!fx_reactor_stopping(r)) fx_timer_arm(r, t, client_sweep_ms(cl), client_on_handle_timer);
}

static void *client_thread(void *arg)
{
    fluxon_client *cl = arg;
    fx_log_set_context("external", cl->cfg.node_id);
    fx_timer_init(&cl->handle_timer);
    fx_timer_arm(cl->r, &cl->handle_timer, client_sweep_ms(cl), client_on_handle_timer);
    fx_reactor_run(cl->r);
    fx_timer_disarm(cl->r, &cl->handle_timer);
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

/* Reads one whole frame; the fds passed with its bytes are returned in fds[0..3) in
 * order (-1: none; more are closed). */
static int client_read_frame(int sock, uint8_t *buf, size_t cap, uint64_t max_body,
                             fx_frame_header_t *h, int fds[3], uint64_t deadline_ms)
{
    size_t have = 0, need = FX_FRAME_HEADER_BYTES, n_fds = 0;
    fds[0] = fds[1] = fds[2] = -1;
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
                if (n_fds < 3) fds[n_fds++] = f;
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

static void client_close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
}

/* fds_p[0]: the segment's memfd; [1], [2]: the rings' memfd and doorbell (-1: none). */
static int client_handshake(fluxon_client *cl, int sock, int fds_p[3])
{
    uint64_t deadline = fx_now_ms() + cl->cfg.timeout_ms;
    fx_body_hello_t hb;
    fx_hello_fill(&cl->cfg, FX_ROLE_EXTERNAL, cl->cfg.node_id, cl->cfg.transport_socket ? 0 : FX_RING_HELLO_WANT, &hb);
    char auth[FX_HELLO_AUTH_MAX];
    fx_hello_fill_tenant(&cl->cfg, &hb, auth, sizeof auth); /* issue 42: its tenant and token */
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
    int fds[3];
    int rc = client_read_frame(sock, in, sizeof in, sizeof in, &rh, fds, deadline);
    int fd = fds[0];
    if (rc != FLUXON_OK) {
        client_close_fds(fds, 3);
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
        fx_client_last_msg_set("owner at %s refused the connection: %.*s", cl->cfg.socket_path, (int)e.message.len,
                               e.message.p ? e.message.p : "");
    } else if (fd < 0) {
        rc = FLUXON_ERR_PROTOCOL;
        FX_ERROR("handshake with owner at %s: no segment fd received", cl->cfg.socket_path);
    } else {
        fx_body_hello_ack_t ack;
        fx_body_hello_ack_decode(in + FX_FRAME_HEADER_BYTES, rh.body_len, &ack, &arena);
        fx_str_copy(ack.node_id, cl->owner_node_id, sizeof cl->owner_node_id);
        cl->owner_generation = ack.generation;
        cl->handle_ttl_ms = ack.handle_ttl_ms;
        memcpy(fds_p, fds, sizeof fds);
        fds[0] = fds[1] = fds[2] = -1;
    }
    client_close_fds(fds, 3);
    fx_arena_free(&arena);
    return rc;
}

/* The request path, futures and plans: what open made after the reactor (each part
 * tolerates never having been made). Waiting callers and armed futures complete
 * UNAVAILABLE. */
static void client_state_fini(fluxon_client *cl)
{
    if (cl->rpc.pending) fx_client_rpc_fail_all(cl);
    fx_client_futures_fini(cl);
    fx_plan_reg_destroy(cl->plans);
    cl->plans = NULL;
    fx_client_rpc_fini(cl);
}

/* The owner sockets (*.sock) in path's directory, for a message: "a.sock, b.sock" or
 * "none"; "the directory does not exist" when it does not. */
static void client_list_sockets(const char *path, char *out, size_t cap)
{
    char dir[FX_PATH_MAX];
    fx_strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else fx_strlcpy(dir, ".", sizeof dir);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(out, cap, "%s: %s", dir, strerror(errno));
        return;
    }
    size_t o = (size_t)snprintf(out, cap, "owner sockets in %s: ", dir), n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && o + 1 < cap) {
        size_t l = strlen(de->d_name);
        if (l <= 5 || strcmp(de->d_name + l - 5, ".sock")) continue;
        if (n++ == 16) {
            o += (size_t)snprintf(out + o, cap - o, ", ...");
            break;
        }
        o += (size_t)snprintf(out + o, cap - o, "%s%s", n > 1 ? ", " : "", de->d_name);
    }
    closedir(d);
    if (!n && o < cap) snprintf(out + o, cap - o, "none");
}

/* Connects to the owner's socket. A missing file fails at once and a file nobody listens
 * on (its owner exited) fails within 300 ms, both saying no owner listens there and
 * which owner sockets that directory holds; only a full backlog is waited for. */
static int client_socket_connect(const char *path, int timeout_ms, int *sock_p)
{
    char socks[512];
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) {
        client_list_sockets(path, socks, sizeof socks);
        FX_ERROR("no owner listens at socket %s: no such file (%s)", path, socks);
        fx_client_last_msg_set("no owner listens at socket %s: no such file (%s)", path, socks);
        return FLUXON_ERR_UNAVAILABLE;
    }
    if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) { /* the config names a folder or a plain file */
        char inside[FX_PATH_MAX + 2];
        snprintf(inside, sizeof inside, "%s/", path);
        client_list_sockets(S_ISDIR(st.st_mode) ? inside : path, socks, sizeof socks);
        FX_ERROR("socket %s is a %s, not an owner's socket (%s)", path, S_ISDIR(st.st_mode) ? "directory" : "regular file",
                 socks);
        fx_client_last_msg_set("socket %s is a %s, not an owner's socket (%s)", path,
                               S_ISDIR(st.st_mode) ? "directory" : "regular file", socks);
        return FLUXON_ERR_UNAVAILABLE;
    }
    int rc = fx_unix_connect(path, timeout_ms, sock_p);
    if (rc == FLUXON_OK) return rc;
    int e = errno;
    if (rc == FLUXON_ERR_UNAVAILABLE && (e == ECONNREFUSED || e == ENOENT)) {
        client_list_sockets(path, socks, sizeof socks);
        FX_ERROR("no owner listens at socket %s: %s (%s)", path,
                 e == ENOENT ? "no such file" : "the file is there but nobody accepts: its owner exited", socks);
        fx_client_last_msg_set("no owner listens at socket %s: %s (%s)", path,
                               e == ENOENT ? "no such file" : "the file is there but nobody accepts: its owner exited",
                               socks);
    } else {
        FX_ERROR("cannot connect to owner socket %s: %s", path, fluxon_status_string(rc));
        fx_client_last_msg_set("cannot connect to owner socket %s: %s", path, fluxon_status_string(rc));
    }
    return rc;
}

int fluxon_client_open(const char *config_json, fluxon_client **client_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (client_p) *client_p = NULL; /* on every failure: a caller that forgot the status gets NULL */
    if (!config_json || !client_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fluxon_client *cl = fx_calloc(1, sizeof *cl);
    if (!cl) return FLUXON_ERR_NOMEM;
    char err[512];
    int rc = fx_config_parse(config_json, &cl->cfg, err, sizeof err);
    if (rc != FLUXON_OK) {
        FX_ERROR("config rejected: %s", err);
        fx_client_last_msg_set("config rejected: %s", err);
        goto err_free;
    }
    if (cl->cfg.role != FX_ROLE_EXTERNAL) {
        FX_ERROR("config rejected: role: \"%s\" is not \"external\" (fluxon_client_open)",
                 fx_role_name(cl->cfg.role));
        fx_client_last_msg_set("config rejected: role: \"%s\" is not \"external\"", fx_role_name(cl->cfg.role));
        rc = FLUXON_ERR_CONFIG;
        goto err_free;
    }
    fx_log_apply_config_level(cl->cfg.log_level, cl->cfg.log_level_given);
    int sock = -1, fds[3] = {-1, -1, -1};
    rc = client_socket_connect(cl->cfg.socket_path, (int)cl->cfg.timeout_ms, &sock);
    if (rc != FLUXON_OK) goto err_free;
    rc = client_handshake(cl, sock, fds);
    if (rc != FLUXON_OK) goto err_sock;
    rc = fx_segment_attach(fds[0], cl->owner_generation, &cl->seg); /* takes the fd on success only */
    if (rc != FLUXON_OK) {
        client_close_fds(fds, 3); /* still ours: a leaked memfd would pin the owner's whole segment */
        FX_ERROR("cannot map the segment of owner %s: %s", cl->owner_node_id, fluxon_status_string(rc));
        goto err_sock;
    }
    /* issue 18: the rings, unless "transport": "socket" (or the owner offered none) */
    if (fds[1] >= 0 && fds[2] >= 0 && !cl->cfg.transport_socket) fx_client_ring_attach(cl, fds[1], fds[2]);
    else client_close_fds(fds + 1, 2);
    rc = fx_reactor_create(&cl->r);
    if (rc != FLUXON_OK) goto err_seg;
    /* issue 38: the owner's notifications (PUBLISHED: a put's future) come one after the other
     * while an engine puts; looking for the next one spares a wake-up each (idle_poll_us) */
    fx_reactor_set_poll_ns(cl->r, (uint64_t)cl->cfg.idle_poll_us * 1000u);
    if ((rc = fx_client_rpc_init(cl)) != FLUXON_OK || (rc = fx_client_futures_init(cl)) != FLUXON_OK ||
        (rc = fx_plan_reg_create(&cl->plans)) != FLUXON_OK)
        goto err_state;
    cl->conn = fx_conn_new(cl->r, sock, &client_conn_ops, cl, cl->cfg.max_frame_bytes, "owner");
    sock = -1; /* owned by the conn now, even on failure */
    if (!cl->conn) {
        rc = FLUXON_ERR_NOMEM;
        goto err_state;
    }
    char desc[96];
    snprintf(desc, sizeof desc, "owner %s", cl->owner_node_id);
    fx_conn_set_desc(cl->conn, desc);
    fx_client_rpc_attach(cl, cl->conn);
    if (pthread_create(&cl->thread, NULL, client_thread, cl) != 0) {
        FX_ERROR("cannot start the client thread: %m");
        rc = FLUXON_ERR_INTERNAL;
        fx_conn_close(cl->conn, FLUXON_ERR_CANCELLED);
        fx_reactor_drain(cl->r, 1000);
        goto err_state;
    }
    fx_thread_name(cl->thread, "client", NULL); /* named before the caller can look */
    /* Map every page of the (owner-prefaulted) segment, on a thread of its own: otherwise
     * the first write of each page by this process takes a fault on the put path
     * (measured: most of a 4.5 MiB put into a fresh slot; on this project's VM ~24 us of
     * each fresh 16 KiB value). Page tables; memory only for pages the owner's own
     * prefault has not allocated yet (it does the same). Best effort; off
     * ("prefault_segment": false) for short-lived clients such as the CLI. */
    cl->prefault.touch = cl->cfg.segment_touch;
    if (cl->cfg.prefault_segment)
        fx_prefault_start(&cl->prefault, fx_segment_base(cl->seg), fx_segment_len(cl->seg),
                          fx_segment_huge(cl->seg) ? FX_SEGMENT_HUGE_BYTES : FX_SEGMENT_PAGE_BYTES, -1, "external",
                          cl->cfg.node_id);
    *client_p = cl;
    return FLUXON_OK;

err_state:
    client_state_fini(cl);
    fx_reactor_destroy(cl->r);
err_seg:
    fx_client_ring_fini(cl);
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

void fx_client_set_close_hook(fluxon_client *cl, void (*fn)(void *arg), void *arg)
{
    cl->close_hook = fn;
    cl->close_hook_arg = fn ? arg : NULL;
}

void *fx_client_close_hook_arg(const fluxon_client *cl) { return cl->close_hook_arg; }

void fluxon_client_close(fluxon_client *cl)
{
    if (!cl) return;
    fx_prefault_stop(&cl->prefault);
    fx_reactor_post(cl->r, client_stop_on_reactor, cl);
    pthread_join(cl->thread, NULL);
    client_state_fini(cl);
    fx_reactor_destroy(cl->r);
    fx_client_ring_fini(cl);
    if (cl->close_hook) cl->close_hook(cl->close_hook_arg); /* before the segment goes */
    fx_segment_destroy(cl->seg);
    fx_free(cl);
}


/* ---- ping, owner stats, cluster nodes: one request each, decoded by the caller ---- */
int fluxon_client_ping(fluxon_client *cl, int to_master, uint64_t *rtt_ns_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cl) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_body_ping_t b = {to_master ? 1 : 0, fx_now_ns()};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(ping, &b, req, len);
    if (!req) return FLUXON_ERR_NOMEM;
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    uint64_t t0 = fx_now_ns();
    int rc = fx_client_call(cl, FX_MSG_PING, req, len, NULL, NULL, &resp, &rlen);
    uint64_t t1 = fx_now_ns();
    fx_client_buf_free(resp);
    if (rc == FLUXON_OK && rtt_ns_p) *rtt_ns_p = t1 - t0;
    return rc;
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

/* The nodes as a JSON array in a fresh buffer (*len_p bytes + NUL), rendered by the
 * bounded writer into a buffer that grows until the document fits (never truncated);
 * NULL for a malformed reply (or NOMEM). */
static char *client_nodes_to_json(const fx_body_nodes_t *b, size_t *len_p)
{
    size_t n = b->node_ids.n;
    if (b->roles.n != n || b->generations.n != n || b->alive.n != n || b->segment_bytes.n != n ||
        b->sub_clusters.n != n || b->placed_bytes.n != n)
        return NULL;
    for (size_t cap = 256 + n * 512; cap <= (256u << 20); cap *= 2) {
        char *out = fx_malloc(cap);
        if (!out) return NULL;
        fx_jbuf_t j = fx_jbuf(out, cap);
        fx_jbuf_printf(&j, "[");
        for (size_t i = 0; i < n && !j.overflow; i++) {
            fx_jbuf_printf(&j, "%s{\"node_id\":", i ? "," : "");
            fx_jbuf_str(&j, b->node_ids.v[i].p, b->node_ids.v[i].len);
            fx_jbuf_printf(&j, ",\"role\":\"%s\",\"generation\":%llu,\"alive\":%s,\"segment_bytes\":%llu,"
                               "\"sub_cluster\":",
                           client_role_label(b->roles.v[i]), (unsigned long long)b->generations.v[i],
                           b->alive.v[i] ? "true" : "false", (unsigned long long)b->segment_bytes.v[i]);
            fx_jbuf_str(&j, b->sub_clusters.v[i].p, b->sub_clusters.v[i].len);
            fx_jbuf_printf(&j, ",\"placed_bytes\":%llu}", (unsigned long long)b->placed_bytes.v[i]);
        }
        fx_jbuf_printf(&j, "]");
        if (!j.overflow) {
            *len_p = j.len;
            return out;
        }
        fx_free(out);
    }
    return NULL;
}

/* Asks the owner (stats) or, through it, the master (nodes) and renders JSON. */
static int client_json_call(fluxon_client *cl, uint16_t type, char *json, size_t cap, size_t *len_p)
{
    if (!cl || !len_p || (!json && cap)) return FLUXON_ERR_INVALID_ARGUMENT;
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    int rc = fx_client_call(cl, type, fx_malloc(1), 0, NULL, NULL, &resp, &rlen);
    char *out = NULL;
    size_t len = 0;
    fx_arena_t arena = {0};
    if (rc == FLUXON_OK && type == FX_MSG_OWNER_STATS) {
        fx_body_json_t b;
        rc = fx_body_json_decode(resp, rlen, &b, &arena);
        char head[384]; /* node_id (< 64 bytes) and five numbers: never truncated */
        int hn = snprintf(head, sizeof head,
                          "{\"client\":{\"node_id\":\"%s\",\"requests\":%llu,\"errors\":%llu,"
                          "\"timeouts\":%llu,\"handles_expired\":%llu,\"segment_prefaulting\":%s},\"owner\":",
                          cl->cfg.node_id, (unsigned long long)__atomic_load_n(&cl->requests, __ATOMIC_RELAXED),
                          (unsigned long long)__atomic_load_n(&cl->errors, __ATOMIC_RELAXED),
                          (unsigned long long)__atomic_load_n(&cl->timeouts, __ATOMIC_RELAXED),
                          (unsigned long long)__atomic_load_n(&cl->handles_expired, __ATOMIC_RELAXED),
                          fx_prefault_running(&cl->prefault) ? "true" : "false");
        out = rc == FLUXON_OK ? fx_malloc((size_t)hn + b.json.len + 2) : NULL;
        if (rc == FLUXON_OK && !out) rc = FLUXON_ERR_NOMEM;
        if (out) {
            memcpy(out, head, (size_t)hn);
            memcpy(out + hn, b.json.p, b.json.len);
            len = (size_t)hn + b.json.len;
            out[len++] = '}';
            out[len] = 0;
        }
    } else if (rc == FLUXON_OK && type == FX_MSG_MASTER_STATS) {
        fx_body_json_t b;
        rc = fx_body_json_decode(resp, rlen, &b, &arena);
        if (rc == FLUXON_OK && !(out = fx_strndup(b.json.p, b.json.len))) rc = FLUXON_ERR_NOMEM;
        len = rc == FLUXON_OK ? b.json.len : 0;
    } else if (rc == FLUXON_OK) {
        fx_body_nodes_t b;
        rc = fx_body_nodes_decode(resp, rlen, &b, &arena);
        if (rc == FLUXON_OK && !(out = client_nodes_to_json(&b, &len))) rc = FLUXON_ERR_PROTOCOL;
    }
    fx_arena_free(&arena);
    fx_client_buf_free(resp);
    if (rc == FLUXON_OK) {
        if (len + 1 > cap) {
            *len_p = len;
            rc = FLUXON_ERR_INVALID_ARGUMENT;
        } else {
            memcpy(json, out, len + 1);
            *len_p = len;
        }
    }
    fx_free(out);
    return rc;
}

int fluxon_client_stats(fluxon_client *cl, char *json, size_t cap, size_t *len_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    return client_json_call(cl, FX_MSG_OWNER_STATS, json, cap, len_p);
}

int fluxon_client_cluster_nodes(fluxon_client *cl, char *json, size_t cap, size_t *len_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    return client_json_call(cl, FX_MSG_CLUSTER_NODES, json, cap, len_p);
}

int fluxon_client_master_stats(fluxon_client *cl, char *json, size_t cap, size_t *len_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    return client_json_call(cl, FX_MSG_MASTER_STATS, json, cap, len_p);
}
