/* mkvfix.h — frame-level helpers for suites that speak to a master over blocking TCP
 * sockets with the frame codec, the way owners do (test_master_kv.c, test_master_place.c):
 * raw frames with bounded waits, request/response calls (one-way frames received while
 * waiting are stashed), HELLO/REGISTER as a fake owner, and the KV requests PUT_DONE and
 * LOOKUP. The including suite sets mkv_port (the master's TCP port) before connecting,
 * closes its connections (t_close) and calls mkv_free_kept() in its .fini. */
#ifndef FX_TEST_MKVFIX_H
#define FX_TEST_MKVFIX_H

#include <criterion/criterion.h>
#include <netinet/tcp.h>
#include <poll.h>

#include "helpers.h"
#include "fluxon.h"
#include "config.h"
#include "master_int.h"
#include "msg.h"

#define MIB (1024ull * 1024ull)
#define SEG (64 * MIB)
#define GRANT (8 * MIB)
#define ST(x) ((uint64_t)(int64_t)(x))
#define IO_TIMEOUT_MS 5000
#define MKV_FN static __attribute__((unused))

static uint16_t mkv_port;   /* the master's TCP port, set by the suite's .init */
static fx_arena_t arena;    /* decoded responses; freed by mkv_free_kept */
static void *kept[8192];    /* received bodies (decoded views point into them) */
static size_t n_kept;
static char last_err[512];  /* message of the last error response */

typedef struct tframe {
    fx_frame_header_t h;
    uint8_t *body;
} tframe_t;

typedef struct tc {
    int fd;
    uint64_t next_req;
    tframe_t stash[64]; /* one-way frames received while waiting for a response */
    int n_stash;
} tc_t;

MKV_FN void *keep(void *p)
{
    cr_assert(n_kept < FX_ARRAY_LEN(kept));
    kept[n_kept++] = p;
    return p;
}

/* Frees every received body and the decode arena (the suite's .fini). */
MKV_FN void mkv_free_kept(void)
{
    for (size_t i = 0; i < n_kept; i++) free(kept[i]);
    n_kept = 0;
    fx_arena_free(&arena);
}

MKV_FN void t_close(tc_t *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->n_stash = 0;
}

/* ---- raw frames ---- */
MKV_FN bool t_read_exact(int fd, void *buf, size_t n, int timeout_ms)
{
    size_t got = 0;
    double end = th_now_s() + timeout_ms / 1000.0;
    while (got < n) {
        int left = (int)((end - th_now_s()) * 1000);
        if (left <= 0) return false;
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) return false;
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

/* Receives one frame (bounded wait); false on timeout or EOF. */
MKV_FN bool t_recv_frame(tc_t *c, tframe_t *f, int timeout_ms)
{
again:;
    uint8_t hb[FX_FRAME_HEADER_BYTES];
    if (!t_read_exact(c->fd, hb, sizeof hb, timeout_ms)) return false;
    cr_assert_eq(fx_frame_header_decode(hb, SEG, &f->h), FLUXON_OK);
    f->body = keep(malloc(f->h.body_len + 1));
    if (f->h.body_len) cr_assert(t_read_exact(c->fd, f->body, f->h.body_len, timeout_ms), "frame body");
    fx_arena_t a = {0};
    cr_assert_eq(fx_msg_validate(&f->h, f->body, &a), FLUXON_OK, "frame %s fails validation",
                 fx_msg_name(f->h.type));
    fx_arena_free(&a);
    /* CLUSTER_INFO (alive-owner count) is broadcast on every register/death: not
     * what these tests look at */
    if (f->h.type == FX_MSG_CLUSTER_INFO && f->h.req_id == 0) goto again;
    return true;
}

MKV_FN void t_send(tc_t *c, uint16_t type, uint64_t req_id, const uint8_t *body, size_t len)
{
    uint8_t *buf = malloc(FX_FRAME_HEADER_BYTES + len);
    fx_frame_header_t h = {FX_FRAME_MAGIC, type, 0, (uint32_t)len, 0, req_id};
    fx_frame_header_encode(&h, buf);
    if (len) memcpy(buf + FX_FRAME_HEADER_BYTES, body, len);
    size_t off = 0, total = FX_FRAME_HEADER_BYTES + len;
    while (off < total) {
        ssize_t w = send(c->fd, buf + off, total - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        cr_assert_gt(w, 0, "send: %s", strerror(errno));
        off += (size_t)w;
    }
    free(buf);
}

/* Sends a request and waits for the response with its req_id; one-way frames received
 * meanwhile are stashed. Returns the response frame. */
MKV_FN tframe_t t_call_raw(tc_t *c, uint16_t type, const uint8_t *body, size_t len)
{
    uint64_t req = ++c->next_req;
    t_send(c, type, req, body, len);
    for (;;) {
        tframe_t f;
        cr_assert(t_recv_frame(c, &f, IO_TIMEOUT_MS), "no response to %s within %d ms", fx_msg_name(type),
                  IO_TIMEOUT_MS);
        if (!(f.h.flags & FX_FLAG_RESPONSE)) {
            cr_assert_lt(c->n_stash, 64);
            c->stash[c->n_stash++] = f;
            continue;
        }
        cr_assert_eq(f.h.req_id, req, "response to req %llu while waiting for %llu (%s)",
                     (unsigned long long)f.h.req_id, (unsigned long long)req, fx_msg_name(type));
        cr_assert_eq(f.h.type, type);
        last_err[0] = '\0';
        if (f.h.status != FLUXON_OK) {
            fx_body_error_t e;
            cr_assert_eq(fx_body_error_decode(f.body, f.h.body_len, &e, &arena), FLUXON_OK);
            fx_str_copy(e.message, last_err, sizeof last_err);
        }
        return f;
    }
}

#define T_ENCODE(kind, bp, out, len)                                                 \
    do {                                                                             \
        len = fx_body_##kind##_size(bp);                                             \
        out = malloc(len + 1);                                                       \
        fx_body_##kind##_encode((bp), out);                                          \
    } while (0)

/* request of body kind `kind`; on success decodes the response into rp (kind rkind) */
#define T_CALL(c, TYPE, kind, bp, rkind, rp)                                         \
    ({                                                                               \
        size_t l_;                                                                   \
        uint8_t *b_;                                                                 \
        T_ENCODE(kind, bp, b_, l_);                                                  \
        tframe_t f_ = t_call_raw((c), FX_MSG_##TYPE, b_, l_);                        \
        free(b_);                                                                    \
        if (f_.h.status == FLUXON_OK)                                                \
            cr_assert_eq(fx_body_##rkind##_decode(f_.body, f_.h.body_len, (rp), &arena), FLUXON_OK); \
        f_.h.status;                                                                 \
    })

/* sends a one-way request (req_id 0) */
#define T_SEND_ONEWAY(c, TYPE, kind, bp)                                             \
    do {                                                                             \
        size_t l_;                                                                   \
        uint8_t *b_;                                                                 \
        T_ENCODE(kind, bp, b_, l_);                                                  \
        t_send((c), FX_MSG_##TYPE, 0, b_, l_);                                       \
        free(b_);                                                                    \
    } while (0)

/* Next INVALIDATE sent to c (stashed or read within timeout_ms); false if none. */
MKV_FN bool t_invalidate(tc_t *c, fx_body_invalidate_t *b, int timeout_ms)
{
    tframe_t f;
    if (c->n_stash) {
        f = c->stash[0];
        memmove(c->stash, c->stash + 1, (size_t)(--c->n_stash) * sizeof *c->stash);
    } else if (!t_recv_frame(c, &f, timeout_ms)) {
        return false;
    }
    cr_assert_eq(f.h.type, FX_MSG_INVALIDATE, "unexpected %s frame", fx_msg_name(f.h.type));
    cr_assert_eq(f.h.req_id, 0, "INVALIDATE must be one-way");
    cr_assert_eq(f.h.flags & FX_FLAG_RESPONSE, 0);
    cr_assert_eq(fx_body_invalidate_decode(f.body, f.h.body_len, b, &arena), FLUXON_OK);
    return true;
}

MKV_FN bool str_is(fx_str_t s, const char *c) { return s.len == strlen(c) && memcmp(s.p, c, s.len) == 0; }

/* ---- the owner side of the protocol ---- */
MKV_FN void t_connect(tc_t *c)
{
    cr_assert_gt(mkv_port, 0, "mkv_port is not set");
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(c->fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(mkv_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->next_req = 0;
    c->n_stash = 0;
}

MKV_FN void t_hello(tc_t *c, const char *node_id)
{
    t_connect(c);
    fx_body_hello_t hb = {FX_PROTOCOL_VERSION, fx_str_c("t"), FX_ROLE_OWNER, fx_str_c(node_id), 1, fx_str_c("")};
    fx_body_hello_ack_t ack;
    cr_assert_eq(T_CALL(c, HELLO, hello, &hb, hello_ack, &ack), FLUXON_OK, "hello: %s", last_err);
}

/* HELLO + REGISTER as owner node_id (node_role FX_NODE_*, segment SEG, grants GRANT);
 * ucx_address, rkey and sub_cluster may be "" (an owner without a UCX address is never a
 * placement target). */
MKV_FN void t_register(tc_t *c, const char *node_id, uint64_t generation, uint8_t node_role, uint64_t base,
                       const char *ucx_address, const char *rkey, const char *sub_cluster)
{
    t_hello(c, node_id);
    fx_body_register_t rb = {fx_str_c(node_id), generation, node_role, SEG, base,
                             fx_str_c(ucx_address), fx_str_c(rkey), GRANT, {NULL, 0}, {NULL, 0},
                             fx_str_c(sub_cluster)};
    fx_body_register_ack_t ack;
    cr_assert_eq(T_CALL(c, REGISTER, register, &rb, register_ack, &ack), FLUXON_OK, "register: %s", last_err);
}

/* a gpu_owner without a UCX address or sub-cluster, segment base 0x7f0000000000 */
MKV_FN void t_owner(tc_t *c, const char *node_id, uint64_t generation)
{
    t_register(c, node_id, generation, FX_NODE_GPU_OWNER, 0x7f0000000000ull, "", "", "");
}

MKV_FN fx_strv_t t_keys(const char *const *keys, uint32_t n)
{
    fx_str_t *v = fx_arena_alloc(&arena, (n ? n : 1) * sizeof *v);
    for (uint32_t i = 0; i < n; i++) v[i] = fx_str_c(keys[i]);
    return (fx_strv_t){v, n};
}

/* PUT_DONE of a batch the sender wrote into its own slots (put_token 0) */
MKV_FN int t_put(tc_t *c, uint64_t batch, const char *const *keys, const uint64_t *offs, uint32_t n,
                 uint64_t vlen, uint64_t flags, uint64_t lease, const uint64_t *groups, uint32_t ng,
                 fx_body_put_done_ack_t *ack)
{
    fx_body_put_done_t b = {batch, vlen, flags, lease, t_keys(keys, n), {offs, n}, {groups, ng}, 0};
    int st = T_CALL(c, PUT_DONE, put_done, &b, put_done_ack, ack);
    if (st == FLUXON_OK) {
        cr_assert_eq(ack->statuses.n, n);
        cr_assert_eq(ack->put_ms.n, n);
        cr_assert_eq(ack->put_ver.n, n);
    }
    return st;
}

/* one key, own group, must succeed; returns its put_id */
MKV_FN void t_put1(tc_t *c, uint64_t batch, const char *key, uint64_t off, uint64_t vlen, uint64_t lease,
                   uint64_t *ms, uint64_t *ver)
{
    fx_body_put_done_ack_t ack;
    cr_assert_eq(t_put(c, batch, &key, &off, 1, vlen, 0, lease, NULL, 0, &ack), FLUXON_OK, "put %s: %s", key,
                 last_err);
    cr_assert_eq(ack.statuses.v[0], ST(FLUXON_OK), "put %s: %s", key,
                 fluxon_status_string((int)(int64_t)ack.statuses.v[0]));
    if (ms) *ms = ack.put_ms.v[0];
    if (ver) *ver = ack.put_ver.v[0];
}

MKV_FN void t_lookup(tc_t *c, const char *const *keys, uint32_t n, fx_body_lookup_ack_t *ack)
{
    fx_body_lookup_t b = {t_keys(keys, n)};
    cr_assert_eq(T_CALL(c, LOOKUP, lookup, &b, lookup_ack, ack), FLUXON_OK, "lookup: %s", last_err);
    cr_assert_eq(ack->statuses.n, n);
    cr_assert_eq(ack->src.n, n);
    cr_assert_eq(ack->offsets.n, n);
    cr_assert_eq(ack->value_lens.n, n);
    cr_assert_eq(ack->put_ms.n, n);
    cr_assert_eq(ack->put_ver.n, n);
    cr_assert_eq(ack->modes.n, n);
    uint32_t ns = ack->src_node_ids.n;
    cr_assert(ack->src_generations.n == ns && ack->src_addresses.n == ns && ack->src_rkeys.n == ns &&
              ack->src_bases.n == ns);
    for (uint32_t i = 0; i < n; i++)
        if (ack->statuses.v[i] == ST(FLUXON_OK)) cr_assert_lt(ack->src.v[i], ns);
}

MKV_FN uint64_t t_lookup1(tc_t *c, const char *key, fx_body_lookup_ack_t *ack)
{
    t_lookup(c, &key, 1, ack);
    return ack->statuses.v[0];
}

MKV_FN bool put_id_lt(uint64_t ams, uint64_t aver, uint64_t bms, uint64_t bver)
{
    return ams < bms || (ams == bms && aver < bver);
}

#endif
