/* fuzz_owner.c — the owner's request handlers (external -> owner frames), driven against an
 * in-process owner registered with an in-process master, with no socket anywhere.
 *
 * The seam is the link step only: this file adds no hook to the library. The owner is made
 * by fx_owner_create itself; the few calls that would touch the system are wrapped at link
 * time (-Wl,--wrap, Makefile FUZZ_LDFLAGS_owner):
 *   - fx_unix_listen / fx_acceptor_start / fx_acceptor_stop: no socket; the harness keeps
 *     the owner's accept callback and calls it to connect an external;
 *   - fx_conn_new: a socketless conn (fx_conn_new_sink) for every external and for the
 *     owner's master link; fx_unix_send_fd(s) (the HELLO ack that carries the memfd) goes
 *     to the external's output like any frame;
 *   - fx_tcp_socket / fx_connect_start: the master link "connects" at once;
 *   - fx_segment_create_huge / fx_segment_destroy: one small segment, made once and kept;
 *     fx_segment_memory_limit: unknown (no /proc and /sys reads per input);
 *   - fx_opeers_*, fx_ucx_set_timeout_ms: no UCX (no other owner is reachable: fetches
 *     and pushes to a remote owner fail as UNAVAILABLE);
 *   - fx_now_ms / fx_now_ns / fx_realtime_ns: the harness's clock (a run replays exactly);
 *   - fx_hmap_create: tables start at the minimum capacity (cheap per input).
 * The master is master.c (included, as in fuzz_master.c) with fresh state per input; what
 * the owner sends it and what it answers travel through two byte queues pumped after each
 * record (never re-entrantly), so the owner sees its answers as from a socket.
 *
 * Peers: 0 and 1 are externals past HELLO (the harness sent theirs), 2 is a new external
 * (no HELLO yet); 3 is a second owner "o1" registered with the master (its frames go to the
 * master: it can publish keys the owner under test then looks up).
 * Input: records [op u8][frame]: op < 0xE0 feeds the next frame (24-byte header + up to
 * body_len bytes) to peer op % 4; 0xE0..0xEF advances the clock by 16 ms << (op & 15) and
 * fires the timers that came due (claims, plan and handle TTLs, heartbeats, the master's
 * leases and TTLs); 0xF0..0xF7 closes peer op % 4 and connects a new one in its place;
 * 0xF8..0xFF drops the owner's master connection (it reconnects on its backoff timer).
 * After every record (once the queues are empty): every frame the owner sent an external
 * decodes and validates; no counter of the owner went negative (wrapped); slot gauges add
 * up. At the end (the reset: every external disconnects, then up to 10 s pass until the
 * owner is quiescent: its master link back, committed puts published): R1, no holder,
 * handle, put plan, prepared slot or holder reference is left; then the owner and the
 * master are torn down (ASan's leak check covers what they free).
 * fuzz_owner_disk.c includes this file with FZ_DISK 1: the same owner with a disk tier, its
 * fz_disk_* hooks (a directory per input, the rest of a reactor turn after each record, the
 * disk's checks, ops 0xFC/0xFD crashing the owner and bringing it back over its disk, the
 * frames the master sends o0 watched for one-way INVALIDATEs); here they do nothing (0xFC/0xFD drop the link like the rest of 0xF8..0xFF). */
#include "master.c"

#include "fuzz.h"
#include "owner.h"
#include "owner_claims.h"
#include "owner_disk.h"
#include "owner_evict.h"
#include "owner_ext.h"
#include "owner_fetch.h"
#include "owner_get.h"
#include "owner_link.h"
#include "owner_peers.h"
#include "owner_place.h"
#include "owner_put.h"
#include "owner_replica.h"
#include "owner_republish.h"
#include "segment.h"
#include "unix.h"

#ifndef FZ_DISK /* fuzz_owner_disk.c: the owner with a disk tier, these hooks its own */
#define FZ_DISK 0
#define FZ_DISK_CFG ""
static void fz_disk_begin(void) {}
static void fz_disk_settle(void) {}
static void fz_disk_check(void) {}
static bool fz_disk_quiet(void) { return true; }
static void fz_disk_final(void) {}
static void fz_disk_end(void) {}
static bool fz_disk_crash(uint8_t op) { return false; }
static void fz_disk_revive(void) {}
static void fz_disk_to_o0(const uint8_t *p, size_t n) {}
#endif
#define FZ_PEERS 4
#define FZ_EXTS 3
#define FZ_MGEN 1000ull
#define FZ_SEG (8ull << 20)

static fx_reactor_t *fz_r;
static uint64_t fz_mgen; /* the master's generation: FZ_MGEN, a later one after a restart (fuzz_owner_disk.c) */
static fx_config_t fz_mcfg, fz_ocfg;
static bool fz_trace;

/* ---- clock ---- */
static uint64_t fz_clock_ns;
uint64_t __wrap_fx_now_ns(void);
uint64_t __wrap_fx_now_ms(void);
uint64_t __wrap_fx_realtime_ns(void);
uint64_t __wrap_fx_now_ns(void) { return fz_clock_ns; }
uint64_t __wrap_fx_now_ms(void) { return fz_clock_ns / 1000000ull; }
uint64_t __wrap_fx_realtime_ns(void) { return 1700000000000000000ull + fz_clock_ns; }
int __real_fx_hmap_create(size_t initial_cap, fx_hmap_t **m_p);
int __wrap_fx_hmap_create(size_t initial_cap, fx_hmap_t **m_p);
int __wrap_fx_hmap_create(size_t initial_cap, fx_hmap_t **m_p) { return __real_fx_hmap_create(0, m_p); }

/* ---- frames out: every one must validate ---- */
static fx_arena_t fz_arena;

/* FUZZ_TRACE=1: what the owner and the master say (the ids to write seed sessions with) */
static void fz_trace_frame(const char *who, const fx_frame_header_t *h, const uint8_t *body)
{
    fx_arena_t a = {0};
    fprintf(stderr, "  -> %s: %s%s req %llu status %d (%u bytes)", who, fx_msg_name(h->type), h->flags ? " response" : "",
            (unsigned long long)h->req_id, h->status, h->body_len);
    fx_body_put_start_ack_t ps;
    fx_body_get_start_ack_t gs;
    fx_body_error_t e;
    if (h->status && fx_body_error_decode(body, h->body_len, &e, &a) == FLUXON_OK) {
        fprintf(stderr, ": %.*s", (int)e.message.len, e.message.p);
    } else if (h->flags && h->type == FX_MSG_PUT_START &&
               fx_body_put_start_ack_decode(body, h->body_len, &ps, &a) == FLUXON_OK) {
        fprintf(stderr, ": plan %llu, statuses", (unsigned long long)ps.plan_id);
        for (uint32_t i = 0; i < ps.statuses.n; i++) fprintf(stderr, " %lld", (long long)ps.statuses.v[i]);
    } else if (h->flags && h->type == FX_MSG_GET_START &&
               fx_body_get_start_ack_decode(body, h->body_len, &gs, &a) == FLUXON_OK) {
        fprintf(stderr, ": handle %llu, %llu transferable, miss %d, holders", (unsigned long long)gs.handle_id,
                (unsigned long long)gs.transferable, gs.miss_status);
        for (uint32_t i = 0; i < gs.holder_ids.n; i++) fprintf(stderr, " %llu", (unsigned long long)gs.holder_ids.v[i]);
    }
    fputc('\n', stderr);
    fx_arena_free(&a);
}
static void fz_check_frames(const char *who, const uint8_t *p, size_t n)
{
    size_t off = 0;
    while (off < n) {
        FUZZ_CHECK(n - off >= FX_FRAME_HEADER_BYTES, "a partial header to %s", who);
        fx_frame_header_t h;
        FUZZ_CHECK(fx_frame_header_decode(p + off, 64ull << 20, &h) == FLUXON_OK, "a bad header to %s", who);
        FUZZ_CHECK(n - off - FX_FRAME_HEADER_BYTES >= h.body_len, "a partial body to %s", who);
        int rc = fx_msg_validate(&h, p + off + FX_FRAME_HEADER_BYTES, &fz_arena);
        fx_arena_reset(&fz_arena);
        FUZZ_CHECK(rc == FLUXON_OK, "%s got a malformed %s (flags %x, status %d, %u bytes)", who,
                   fx_msg_name(h.type) ? fx_msg_name(h.type) : "?", h.flags, h.status, h.body_len);
        if (fz_trace) fz_trace_frame(who, &h, p + off + FX_FRAME_HEADER_BYTES);
        off += FX_FRAME_HEADER_BYTES + h.body_len;
    }
}

/* ---- the two directions between the owner's link and the master, pumped ---- */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} fz_buf_t;
static fz_buf_t fz_to_master, fz_to_owner;
static void fz_buf_put(fz_buf_t *b, const uint8_t *p, size_t n)
{
    if (b->cap - b->n < n) {
        size_t nc = FX_MAX(b->cap * 2, b->n + n);
        b->p = realloc(b->p, nc);
        FUZZ_CHECK(b->p != NULL, "out of memory");
        b->cap = nc;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void fz_sink_master(void *arg, const uint8_t *p, size_t n)
{
    fz_check_frames("the master", p, n);
    fz_buf_put(&fz_to_master, p, n);
}
static void fz_sink_owner(void *arg, const uint8_t *p, size_t n)
{
    fz_check_frames("owner o0", p, n);
    fz_disk_to_o0(p, n); /* fuzz_owner_disk.c: the one-way INVALIDATEs of o0's disk records */
    fz_buf_put(&fz_to_owner, p, n);
}
static void fz_sink_ext(void *arg, const uint8_t *p, size_t n) { fz_check_frames("an external", p, n); }
static void fz_sink_o1(void *arg, const uint8_t *p, size_t n) { fz_check_frames("owner o1", p, n); }

/* ---- the master (as fuzz_master.c makes it) ---- */
static fx_master_t *fz_m;
static fx_conn_t *fz_mpeer;  /* the master's side of the owner's link */
static fx_conn_t *fz_olink;  /* the owner's side */

static fx_conn_t *fz_mpeer_new(fx_conn_sink_fn sink)
{
    master_peer_t *p = fx_calloc(1, sizeof *p);
    FUZZ_CHECK(p != NULL, "out of memory");
    p->m = fz_m;
    p->conn = fx_conn_new_sink(fz_r, &master_peer_ops, p, fz_m->cfg.max_frame_bytes, "fuzz peer", sink, NULL);
    FUZZ_CHECK(p->conn != NULL, "out of memory");
    p->next = fz_m->peers;
    if (fz_m->peers) fz_m->peers->prev = p;
    fz_m->peers = p;
    fx_conn_ref(p->conn);
    return p->conn;
}


static fx_conn_t *fz_o1_new(void)
{
    fx_conn_t *c = fz_mpeer_new(fz_sink_o1);
    fx_body_hello_t hb;
    fx_hello_fill(&fz_mcfg, FX_ROLE_OWNER, "o1", 2, &hb);
    FZ_SEND(c, FX_MSG_HELLO, 1, hello, &hb);
    fx_body_register_t rb = {.node_id = fx_str_c("o1"), .generation = 2, .node_role = FX_NODE_GPU_OWNER,
                             .segment_bytes = FZ_SEG, .segment_base = 0x7f0000000000ull,
                             .ucx_address = fx_str_c("ucx-address"), .rkey = fx_str_c("rkey"),
                             .grant_bytes = 1ull << 20, .sub_cluster = fx_str_c("b")};
    FZ_SEND(c, FX_MSG_REGISTER, 2, register, &rb);
    return c;
}

static void fz_master_new(void)
{
    fz_m = fx_calloc(1, sizeof *fz_m);
    FUZZ_CHECK(fz_m != NULL, "out of memory");
    fz_m->r = fz_r;
    fz_m->cfg = fz_mcfg;
    fz_m->generation = fz_mgen;
    fz_m->listen_fd = -1;
    fx_timer_init(&fz_m->liveness_timer); /* not armed (fuzz_owner_disk.c arms it once o0 crashed) */
    FUZZ_CHECK(fx_master_kv_init(fz_m) == FLUXON_OK, "kv init");
}

static void fz_master_free(void)
{
    while (fz_m->peers) fx_conn_close(fz_m->peers->conn, FLUXON_ERR_UNAVAILABLE);
    if (fx_timer_armed(&fz_m->liveness_timer)) fx_timer_disarm(fz_r, &fz_m->liveness_timer);
    fz_m->shutting_down = true;
    fx_master_kv_fini(fz_m);
    for (size_t i = 0; i < fz_m->n_nodes; i++) {
        fx_master_kv_node_free(fz_m, fz_m->nodes[i]);
        fx_free(fz_m->nodes[i]->ucx_address);
        fx_free(fz_m->nodes[i]->rkey);
        fx_free(fz_m->nodes[i]);
    }
    fx_free(fz_m->nodes);
    fx_free(fz_m);
    fz_m = NULL;
}

/* ---- the owner's system calls, wrapped ---- */
static fx_segment_t *fz_seg;
static void (*fz_accept_cb)(void *arg, int fd);
static void *fz_accept_arg;
static fx_conn_t *fz_last_ext;

int __real_fx_segment_create_huge(uint64_t bytes, int numa_node, uint64_t generation, const char *node_id,
                                  int huge_pages, fx_segment_t **seg_p);
int __wrap_fx_segment_create_huge(uint64_t bytes, int numa_node, uint64_t generation, const char *node_id,
                                  int huge_pages, fx_segment_t **seg_p);
int __wrap_fx_segment_create_huge(uint64_t bytes, int numa_node, uint64_t generation, const char *node_id,
                                  int huge_pages, fx_segment_t **seg_p)
{
    if (!fz_seg) FUZZ_CHECK(__real_fx_segment_create_huge(bytes, -1, 1, node_id, FX_HUGE_OFF, &fz_seg) == FLUXON_OK, "segment");
    FUZZ_CHECK(fx_segment_len(fz_seg) == bytes + FX_SEGMENT_HEADER_BYTES, "one segment size: segment_bytes and its header");
    *seg_p = fz_seg;
    return FLUXON_OK;
}
uint64_t __wrap_fx_segment_memory_limit(char *what, size_t cap);
uint64_t __wrap_fx_segment_memory_limit(char *what, size_t cap) { return 0; } /* no /proc read per input */
void __wrap_fx_segment_destroy(fx_segment_t *seg);
void __wrap_fx_segment_destroy(fx_segment_t *seg) { FUZZ_CHECK(seg == fz_seg, "an unknown segment"); }

int __wrap_fx_unix_listen(const char *path, int *fd_p);
int __wrap_fx_unix_listen(const char *path, int *fd_p)
{
    *fd_p = -1;
    return FLUXON_OK;
}
int __wrap_fx_acceptor_start(fx_reactor_t *r, int listen_fd, void (*cb)(void *arg, int fd), void *arg,
                             fx_acceptor_t **a_p);
int __wrap_fx_acceptor_start(fx_reactor_t *r, int listen_fd, void (*cb)(void *arg, int fd), void *arg,
                             fx_acceptor_t **a_p)
{
    fz_accept_cb = cb;
    fz_accept_arg = arg;
    *a_p = (fx_acceptor_t *)&fz_accept_cb;
    return FLUXON_OK;
}
void __wrap_fx_acceptor_stop(fx_reactor_t *r, fx_acceptor_t *a);
void __wrap_fx_acceptor_stop(fx_reactor_t *r, fx_acceptor_t *a) { fz_accept_cb = NULL; }

int __wrap_fx_tcp_socket(const char *host, uint16_t port, int *fd_p, void *sockaddr_out, uint32_t *addrlen_p);
int __wrap_fx_tcp_socket(const char *host, uint16_t port, int *fd_p, void *sockaddr_out, uint32_t *addrlen_p)
{
    *fd_p = -1;
    return FLUXON_OK;
}
void __wrap_fx_connect_start(fx_reactor_t *r, fx_connect_op_t *op, int fd, uint32_t timeout_ms);
void __wrap_fx_connect_start(fx_reactor_t *r, fx_connect_op_t *op, int fd, uint32_t timeout_ms) { op->cb(op, 0); }

/* the owner's master link (desc "master ...") or an external it accepted */
fx_conn_t *__wrap_fx_conn_new(fx_reactor_t *r, int fd, const fx_conn_ops_t *ops, void *ud, uint64_t max_frame_bytes,
                              const char *desc);
fx_conn_t *__wrap_fx_conn_new(fx_reactor_t *r, int fd, const fx_conn_ops_t *ops, void *ud, uint64_t max_frame_bytes,
                              const char *desc)
{
    if (!strncmp(desc, "master", 6)) {
        FUZZ_CHECK(fz_olink == NULL && fz_mpeer == NULL, "a second master link");
        fz_olink = fx_conn_new_sink(r, ops, ud, max_frame_bytes, desc, fz_sink_master, NULL);
        FUZZ_CHECK(fz_olink != NULL, "out of memory");
        fx_conn_ref(fz_olink);
        fz_mpeer = fz_mpeer_new(fz_sink_owner);
        return fz_olink;
    }
    fz_last_ext = fx_conn_new_sink(r, ops, ud, max_frame_bytes, desc, fz_sink_ext, NULL);
    return fz_last_ext;
}
int __wrap_fx_unix_send_fd(int sock, int fd, const void *data, size_t len, int timeout_ms);
int __wrap_fx_unix_send_fd(int sock, int fd, const void *data, size_t len, int timeout_ms)
{
    fz_check_frames("an external (HELLO ack)", data, len);
    return FLUXON_OK;
}

/* the same for the HELLO ack that also carries an external's rings (issue 18) */
int __wrap_fx_unix_send_fds(int sock, const int *fds, int n_fds, const void *data, size_t len, int timeout_ms);
int __wrap_fx_unix_send_fds(int sock, const int *fds, int n_fds, const void *data, size_t len, int timeout_ms)
{
    fz_check_frames("an external (HELLO ack)", data, len);
    return FLUXON_OK;
}

/* no UCX */
int __wrap_fx_opeers_init(fx_owner_t *o);
int __wrap_fx_opeers_init(fx_owner_t *o) { return FLUXON_OK; }
void __wrap_fx_opeers_shutdown(fx_owner_t *o);
void __wrap_fx_opeers_shutdown(fx_owner_t *o) {}
void __wrap_fx_opeers_fini(fx_owner_t *o);
void __wrap_fx_opeers_fini(fx_owner_t *o) {}
fx_ucx_t *__wrap_fx_opeers_ucx(fx_owner_t *o);
fx_ucx_t *__wrap_fx_opeers_ucx(fx_owner_t *o) { return NULL; }
void __wrap_fx_opeers_info(fx_owner_t *o, fx_str_t *address, fx_str_t *rkey);
void __wrap_fx_opeers_info(fx_owner_t *o, fx_str_t *address, fx_str_t *rkey)
{
    *address = fx_str_c("ucx-o0");
    *rkey = fx_str_c("rkey-o0");
}
fx_ucx_peer_t *__wrap_fx_opeers_get(fx_owner_t *o, fx_str_t node_id, uint64_t generation, fx_str_t address,
                                    fx_str_t rkey, uint64_t base);
fx_ucx_peer_t *__wrap_fx_opeers_get(fx_owner_t *o, fx_str_t node_id, uint64_t generation, fx_str_t address,
                                    fx_str_t rkey, uint64_t base)
{
    return NULL;
}
void __wrap_fx_ucx_set_timeout_ms(fx_ucx_t *u, uint32_t ms);
void __wrap_fx_ucx_set_timeout_ms(fx_ucx_t *u, uint32_t ms) { FUZZ_CHECK(u == NULL, "UCX in the fuzz owner"); }

/* ---- pumping ---- */
static void fz_link_drop(void)
{
    fx_conn_t *a = fz_olink, *b = fz_mpeer;
    fz_olink = fz_mpeer = NULL;
    fz_to_master.n = fz_to_owner.n = 0;
    if (a) {
        fx_conn_close(a, FLUXON_ERR_UNAVAILABLE);
        fx_conn_unref(a);
    }
    if (b) {
        fx_conn_close(b, FLUXON_ERR_UNAVAILABLE);
        fx_conn_unref(b);
    }
}

static void fz_pump_link(void)
{
    fz_buf_t tmp = {0};
    for (int i = 0; i < 10000; i++) {
        if (fz_olink && (!fx_conn_is_open(fz_olink) || !fx_conn_is_open(fz_mpeer))) fz_link_drop();
        fz_buf_t *q = fz_to_master.n ? &fz_to_master : fz_to_owner.n ? &fz_to_owner : NULL;
        if (!q) break;
        fx_conn_t *dst = q == &fz_to_master ? fz_mpeer : fz_olink;
        fz_buf_t t = *q; /* swap: what the feed produces lands in the (empty) queue */
        *q = tmp;
        tmp = t;
        if (dst) fx_conn_feed(dst, tmp.p, tmp.n);
        tmp.n = 0;
        FUZZ_CHECK(i < 9999, "the owner and the master never stop talking");
    }
    free(tmp.p);
}

/* ---- the owner under test ---- */
static fx_owner_t *fz_o;
static fx_conn_t *fz_peer[FZ_PEERS];

static void fz_ready(void *arg, int status) { (void)arg, (void)status; }

/* the link pumped; with a disk tier, the rest of a reactor turn too (fz_disk_settle) */
static void fz_pump(void)
{
    fz_pump_link();
    fz_disk_settle();
}

static fx_conn_t *fz_ext_new(int i)
{
    FUZZ_CHECK(fz_accept_cb != NULL, "the owner is not accepting");
    fz_last_ext = NULL;
    fz_accept_cb(fz_accept_arg, 1 << 20); /* an fd number nothing uses: never touched */
    fx_conn_t *c = fz_last_ext;
    FUZZ_CHECK(c != NULL, "no external connected");
    fx_conn_ref(c);
    if (i < 2) {
        fx_body_hello_t hb;
        char id[8];
        snprintf(id, sizeof id, "x%d", i);
        fx_hello_fill(&fz_ocfg, FX_ROLE_EXTERNAL, id, 77 + (uint64_t)i, &hb);
        FZ_SEND(c, FX_MSG_HELLO, 1, hello, &hb);
    }
    return c;
}

static fx_conn_t *fz_peer_new(int i) { return i == 3 ? fz_o1_new() : fz_ext_new(i); }

static void fz_peer_close(int i)
{
    fx_conn_close(fz_peer[i], FLUXON_ERR_UNAVAILABLE);
    fx_conn_unref(fz_peer[i]);
    fz_peer[i] = NULL;
}

static void fz_metrics(fx_ometrics_t *mm)
{
    memset(mm, 0, sizeof *mm);
    void (*parts[])(fx_owner_t *, fx_ometrics_t *) = {fx_oext_metrics,   fx_olink_metrics, fx_ostore_metrics,
                                                      fx_oclaims_metrics, fx_oput_metrics,  fx_oplace_metrics,
                                                      fx_oget_metrics,    fx_ofetch_metrics, fx_oev_metrics,
                                                      fx_orepl_metrics,   fx_orepub_metrics, fx_odisk_metrics};
    for (size_t i = 0; i < FX_ARRAY_LEN(parts); i++) parts[i](fz_o, mm);
}

#define FZ_WRAP_COUNTER(n) FUZZ_CHECK(mm.n < (1ull << 62), #n " is %llu", (unsigned long long)mm.n);
#define FZ_WRAP_NSCOUNTER FZ_WRAP_COUNTER
#define FZ_WRAP_MSGAUGE FZ_WRAP_COUNTER
#define FZ_WRAP_GAUGE FZ_WRAP_COUNTER
#define FZ_WRAP_BOOL(n) FUZZ_CHECK(mm.n <= 1, #n " is %llu", (unsigned long long)mm.n);
#define FZ_WRAP_SGAUGE(n) FUZZ_CHECK(mm.n >= -1 && mm.n < (1ll << 62), #n " is %lld", (long long)mm.n);
#define FZ_WRAP_HIST(n)
#define FZ_WRAP(name, kind, family, labels, help) FZ_WRAP_##kind(name)

static void fz_check(void)
{
    if (!fz_o) return; /* o0 is down (crashed, fuzz_owner_disk.c): back at the next record but a clock one */
    fx_ometrics_t mm;
    fz_metrics(&mm);
    FX_OWNER_METRICS(FZ_WRAP)
    uint64_t slots = mm.slots_free + mm.slots_prepared + mm.slots_pending + mm.slots_committed;
    FUZZ_CHECK(mm.used_bytes + mm.free_bytes <= FZ_SEG, "used %llu + free %llu bytes > a %llu-byte segment",
               (unsigned long long)mm.used_bytes, (unsigned long long)mm.free_bytes, (unsigned long long)FZ_SEG);
    FUZZ_CHECK(mm.granted_bytes <= FZ_SEG, "%llu bytes granted of a %llu-byte segment",
               (unsigned long long)mm.granted_bytes, (unsigned long long)FZ_SEG);
    FUZZ_CHECK(slots < (1ull << 40), "%llu slots", (unsigned long long)slots);
    uint64_t open = 0;
    for (int i = 0; i < FZ_EXTS; i++) open += fz_peer[i] && fx_conn_is_open(fz_peer[i]);
    FUZZ_CHECK(mm.externals == open, "%llu externals, %llu connected", (unsigned long long)mm.externals,
               (unsigned long long)open);
    fz_disk_check();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_trace = getenv("FUZZ_TRACE") != NULL;
    fx_log_set_level(fz_trace ? FX_LOG_DEBUG : FX_LOG_OFF);
    FUZZ_CHECK(fx_reactor_create(&fz_r) == FLUXON_OK, "reactor");
    char err[256];
    FUZZ_CHECK(fx_config_parse("{\"role\":\"master\",\"cluster_id\":\"fz\",\"cluster_token\":\"tok\","
                               "\"max_frame_bytes\":\"1MiB\"}", &fz_mcfg, err, sizeof err) == FLUXON_OK,
               "%s", err);
    FUZZ_CHECK(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"fz\",\"cluster_token\":\"tok\",\"node_id\":\"o0\","
                               "\"master\":\"127.0.0.1:1\",\"socket\":\"/nonexistent/fz.sock\",\"segment_bytes\":\"8MiB\","
                               "\"numa_node\":0,\"sub_cluster\":\"a\",\"max_frame_bytes\":\"1MiB\","
                               "\"reserve\":{\"grant_bytes\":\"1MiB\"}" FZ_DISK_CFG "}",
                               &fz_ocfg, err, sizeof err) == FLUXON_OK,
               "%s", err);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    fz_clock_ns = 1000000000000ull; /* 1000 s */
    fz_mgen = FZ_MGEN;
    fz_master_new();
    fz_disk_begin();
    FUZZ_CHECK(fx_owner_create(fz_r, &fz_ocfg, fz_ready, NULL, &fz_o) == FLUXON_OK, "owner create");
    fz_pump(); /* HELLO, REGISTER, grants */
    for (int i = FZ_PEERS - 1; i >= 0; i--) fz_peer[i] = fz_peer_new(i);
    fz_pump();
    fz_check();

    size_t off = 0;
    while (off < size) {
        uint8_t op = data[off++];
        int pi = op % FZ_PEERS;
        if (op < 0xE0 || op >= 0xF0) fz_disk_revive(); /* o0 crashed (fuzz_owner_disk.c): it comes back first */
        if (op >= 0xE0 && op < 0xF0) {
            fz_clock_ns += (16ull << (op & 15)) * 1000000ull;
            fx_reactor_run_due_timers(fz_r);
        } else if (op >= 0xF8) {
            if (!fz_disk_crash(op)) fz_link_drop();
        } else if (op >= 0xF0) {
            fz_peer_close(pi);
            fz_peer[pi] = fz_peer_new(pi);
        } else {
            size_t n = size - off;
            if (n >= FX_FRAME_HEADER_BYTES) {
                const uint8_t *b = data + off + 8;
                uint32_t bl = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
                n = FX_FRAME_HEADER_BYTES + FX_MIN((size_t)bl, n - FX_FRAME_HEADER_BYTES);
            }
            fx_conn_feed(fz_peer[pi], data + off, n);
            if (!fx_conn_is_open(fz_peer[pi])) { /* closed on a protocol error (or HELLO refused) */
                fx_conn_unref(fz_peer[pi]);
                fz_peer[pi] = fz_peer_new(pi);
            }
            off += n;
        }
        fz_pump();
        fz_check();
    }

    fz_disk_revive(); /* o0 still down after a crash: its next life is the one checked */
    /* the reset: every external disconnects (R1: all they held is released) */
    for (int i = 0; i < FZ_EXTS; i++) fz_peer_close(i);
    fz_pump();
    /* then time passes until the owner is quiescent: its master link back (reconnect
     * backoff), a committed put published (it outlives its client) */
    fx_ometrics_t mm;
    for (int i = 0; i < 40; i++) {
        fz_metrics(&mm);
        if (mm.master_connected && mm.puts_inflight == 0 && mm.gets_inflight == 0 && mm.slots_pending == 0 &&
            fz_disk_quiet())
            break;
        fz_clock_ns += 250000000ull;
        fx_reactor_run_due_timers(fz_r);
        fz_pump();
    }
    fz_metrics(&mm);
    FUZZ_CHECK(mm.externals == 0, "R1: %llu externals after they all left", (unsigned long long)mm.externals);
    FUZZ_CHECK(mm.holders == 0, "R1: %llu holders after every external left", (unsigned long long)mm.holders);
    FUZZ_CHECK(mm.slot_holder_refs == 0, "R1: %llu holder references on slots after every external left",
               (unsigned long long)mm.slot_holder_refs);
    FUZZ_CHECK(mm.handles_open == 0, "R1: %llu get handles after every external left",
               (unsigned long long)mm.handles_open);
    FUZZ_CHECK(mm.puts_inflight == 0, "R1: %llu put plans 10 s after every external left",
               (unsigned long long)mm.puts_inflight);
    FUZZ_CHECK(mm.slots_prepared == 0, "R1: %llu prepared slots after every external left",
               (unsigned long long)mm.slots_prepared);
    FUZZ_CHECK(mm.slots_pending == 0, "%llu slots still pending 10 s after every external left",
               (unsigned long long)mm.slots_pending);
    FUZZ_CHECK(mm.gets_inflight == 0, "%llu fetches in flight 10 s after every external left",
               (unsigned long long)mm.gets_inflight);
    fz_disk_final();

    fx_owner_shutdown(fz_o);
    fz_pump_link();
    fx_owner_destroy(fz_o);
    fz_o = NULL;
    fz_disk_end();
    fz_link_drop();
    fz_peer_close(3);
    fz_master_free();
    return 0;
}
