/* conn.h — a framed, message-oriented connection on the reactor (TCP or unix socket):
 * io_uring recv/send, frame parsing against the catalog (a malformed, oversized or
 * unknown frame closes the connection with a logged protocol error), and request/
 * response correlation by req_id with per-request timeouts. Reactor thread only. */
#ifndef FX_CONN_H
#define FX_CONN_H

#include "metrics.h"
#include "msg.h"
#include "reactor.h"

typedef struct fx_conn fx_conn_t;

typedef struct fx_conn_ops {
    /* A validated request frame (responses are routed to their rpc callback). The
     * arena holds decoded arrays and is reset after the call. The conn may be closed
     * from inside. */
    void (*on_request)(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                       fx_arena_t *arena);
    /* Called once when the conn closes, for any reason (status says why). After it
     * returns, the conn must not be used except through a reference taken with
     * fx_conn_ref. */
    void (*on_close)(fx_conn_t *c, int status);
    /* Optional: a response whose req_id is not a pending rpc of this conn (requests the
     * owner of the conn sent by other means, e.g. directly on the socket). */
    void (*on_response)(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                        fx_arena_t *arena);
} fx_conn_ops_t;

/* Takes ownership of fd (non-blocking socket) and starts receiving. desc names the
 * peer in logs ("owner n1", "127.0.0.1:5123"). Returns NULL on allocation failure
 * (fd closed). */
FX_INTERNAL fx_conn_t *fx_conn_new(fx_reactor_t *r, int fd, const fx_conn_ops_t *ops, void *ud,
                                   uint64_t max_frame_bytes, const char *desc);
/* A conn with no socket, to drive a role in-process (the fuzz targets of test/fuzz):
 * nothing is received but what fx_conn_feed hands it, parsed exactly as received bytes
 * are; every frame it sends goes to sink(sink_arg, frames, len) at once (sink NULL:
 * dropped). Timers and rpcs still use r (never run by the caller: they do not fire). */
typedef void (*fx_conn_sink_fn)(void *arg, const uint8_t *frames, size_t len);
FX_INTERNAL fx_conn_t *fx_conn_new_sink(fx_reactor_t *r, const fx_conn_ops_t *ops, void *ud,
                                        uint64_t max_frame_bytes, const char *desc,
                                        fx_conn_sink_fn sink, void *sink_arg);
/* Bytes "received" on a sink conn (no-op when closed or not a sink conn). */
FX_INTERNAL void fx_conn_feed(fx_conn_t *c, const uint8_t *data, size_t len);
/* Idempotent. Fails every pending rpc with FLUXON_ERR_UNAVAILABLE, calls on_close, and
 * frees the conn once no operation is in flight and no reference is held. */
FX_INTERNAL void fx_conn_close(fx_conn_t *c, int status);
/* Stops reading requests, lets the queued frames (e.g. an error reply) go out, then
 * closes with status. */
FX_INTERNAL void fx_conn_close_after_flush(fx_conn_t *c, int status);
FX_INTERNAL bool fx_conn_is_open(const fx_conn_t *c);
FX_INTERNAL void *fx_conn_ud(const fx_conn_t *c);
FX_INTERNAL void fx_conn_set_ud(fx_conn_t *c, void *ud);
FX_INTERNAL int fx_conn_fd(const fx_conn_t *c);
FX_INTERNAL const char *fx_conn_desc(const fx_conn_t *c);
FX_INTERNAL void fx_conn_set_desc(fx_conn_t *c, const char *desc);
FX_INTERNAL void fx_conn_ref(fx_conn_t *c);
FX_INTERNAL void fx_conn_unref(fx_conn_t *c);

/* Reserves room for one frame of body_len bytes in the send buffer and returns where
 * to write the header + body (valid until the next conn call); NULL when closed or out
 * of memory. fx_conn_commit queues it for sending. */
FX_INTERNAL uint8_t *fx_conn_reserve(fx_conn_t *c, size_t body_len);
FX_INTERNAL void fx_conn_commit(fx_conn_t *c);
/* Counts every response frame c sends into t by (type, status) (metrics: requests by op
 * and status); t outlives c or is detached with NULL. */
FX_INTERNAL void fx_conn_count_replies(fx_conn_t *c, fx_reply_counts_t *t);
/* Sends a frame whose body is already encoded. */
FX_INTERNAL int fx_conn_send_bytes(fx_conn_t *c, const fx_frame_header_t *h, const void *body);
/* Error response to request h with a message body. */
FX_INTERNAL int fx_conn_reply_error(fx_conn_t *c, const fx_frame_header_t *h, int status,
                                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Encodes and sends one frame: type, flags, status, req_id and a body of kind `body`
 * pointed to by bp. Evaluates to FLUXON_OK or FLUXON_ERR_UNAVAILABLE (closed). */
#define FX_CONN_SEND(c, type_, flags_, status_, reqid_, body, bp)                           \
    ({                                                                                  \
        size_t fx_bl_ = fx_body_##body##_size(bp);                                      \
        uint8_t *fx_o_ = fx_conn_reserve((c), fx_bl_);                                   \
        int fx_rc_ = FLUXON_ERR_UNAVAILABLE;                                             \
        if (fx_o_) {                                                                    \
            fx_frame_header_t fx_h_ = {FX_FRAME_MAGIC, (uint16_t)(type_), (uint16_t)(flags_), \
                                       (uint32_t)fx_bl_, (int32_t)(status_), (reqid_)}; \
            fx_frame_header_encode(&fx_h_, fx_o_);                                      \
            fx_body_##body##_encode((bp), fx_o_ + FX_FRAME_HEADER_BYTES);               \
            fx_conn_commit(c);                                                          \
            fx_rc_ = FLUXON_OK;                                                         \
        }                                                                               \
        fx_rc_;                                                                         \
    })

/* Success response to request h. */
#define FX_CONN_REPLY(c, h, body, bp) \
    FX_CONN_SEND((c), (h)->type, FX_FLAG_RESPONSE, FLUXON_OK, (h)->req_id, body, (bp))

/* ---- rpc: request/response correlation ---- */
/* Called exactly once per call: with the response (status = the response's status,
 * body validated against the catalog, arena valid during the call), or with
 * FLUXON_ERR_TIMEOUT / FLUXON_ERR_UNAVAILABLE and h == NULL, body == NULL. */
typedef void (*fx_rpc_cb)(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                          fx_arena_t *arena);

/* Registers a pending call and returns its req_id (0 when the conn is closed). */
FX_INTERNAL uint64_t fx_rpc_register(fx_conn_t *c, uint32_t timeout_ms, fx_rpc_cb cb, void *arg);
/* Forgets a registered call without calling its callback (send failed). */
FX_INTERNAL void fx_rpc_forget(fx_conn_t *c, uint64_t req_id);
FX_INTERNAL size_t fx_rpc_pending(const fx_conn_t *c);
/* When (fx_now_ns) the latest call whose answer has been dispatched was registered: every
 * frame the peer sent before that answer has been dispatched too (one stream, in order), and
 * the peer handled that call after this time. 0: no answer yet. (owner/wbmap.c) */
FX_INTERNAL uint64_t fx_rpc_answered_ns(const fx_conn_t *c);
/* True while c dispatches a frame a test fault or the message chaos held back: frames the
 * peer sent after it were dispatched first (a real stream never reorders). */
FX_INTERNAL bool fx_conn_dispatching_late(const fx_conn_t *c);

/* Sends request TYPE with body kind `body` and registers cb. Evaluates to FLUXON_OK
 * (cb will run exactly once) or FLUXON_ERR_UNAVAILABLE (cb will not run). */
#define FX_RPC_CALL(c, TYPE, body, bp, timeout_ms, cb, arg)                             \
    ({                                                                                  \
        int fx_rrc_ = FLUXON_ERR_UNAVAILABLE;                                           \
        uint64_t fx_rid_ = fx_rpc_register((c), (timeout_ms), (cb), (arg));              \
        if (fx_rid_) {                                                                  \
            fx_rrc_ = FX_CONN_SEND((c), FX_MSG_##TYPE, 0, 0, fx_rid_, body, (bp));       \
            if (fx_rrc_ != FLUXON_OK) fx_rpc_forget((c), fx_rid_);                       \
        }                                                                               \
        fx_rrc_;                                                                        \
    })

/* Test-only fault injection (owner "test" config): the next `count` responses (0 =
 * all) of message `type` arriving on c are delayed by ms, dropped, or delivered twice
 * (kind: FX_FAULT_* from config.h). */
FX_INTERNAL void fx_conn_set_fault(fx_conn_t *c, uint16_t type, int kind, uint32_t ms, uint32_t count);

/* Test-only message chaos (issue 17, chaos.h): every frame c receives from now on is
 * offered to ch (NULL: off); ch outlives c or is detached with NULL. */
struct fx_chaos;
FX_INTERNAL void fx_conn_set_chaos(fx_conn_t *c, struct fx_chaos *ch);

/* Socket helpers: non-blocking + CLOEXEC. */
FX_INTERNAL int fx_tcp_listen(const char *host, uint16_t port, int *fd_p, uint16_t *bound_port_p);
FX_INTERNAL int fx_tcp_socket(const char *host, uint16_t port, int *fd_p, void *sockaddr_out,
                              uint32_t *addrlen_p);

/* Starts an asynchronous io_uring connect of fd to addr, bounded by timeout_ms; cb
 * gets 0 or a negative errno (-ECANCELED/-ETIME on timeout). The op struct must live
 * until cb ran. */
typedef struct fx_connect_op {
    fx_io_t io;
    struct __kernel_timespec ts;
    uint8_t addr[128];
    uint32_t addrlen;
    void (*cb)(struct fx_connect_op *op, int res);
    void *arg;
} fx_connect_op_t;
FX_INTERNAL void fx_connect_start(fx_reactor_t *r, fx_connect_op_t *op, int fd, uint32_t timeout_ms);

/* Accepts connections on a listening fd until stopped; cb gets each new fd (already
 * non-blocking + CLOEXEC) or a negative errno. */
typedef struct fx_acceptor fx_acceptor_t;
FX_INTERNAL int fx_acceptor_start(fx_reactor_t *r, int listen_fd, void (*cb)(void *arg, int fd),
                                  void *arg, fx_acceptor_t **a_p);
/* Stops accepting; the acceptor frees itself once its accept op completed. Does not
 * close listen_fd. */
FX_INTERNAL void fx_acceptor_stop(fx_reactor_t *r, fx_acceptor_t *a);

#endif
