/* ucx_dp.h — the owner<->owner UCX data plane: one UCX context + worker per instance,
 * registered memory, peers (endpoint + unpacked rkey) and batched GET/PUT of byte
 * ranges. Reactor-agnostic: the caller's loop polls fx_ucx_efd() and calls progress. */
#ifndef FX_UCX_DP_H
#define FX_UCX_DP_H

#include "fx.h" /* first: it defines _GNU_SOURCE */

#include <stdio.h>

/* Threading: an fx_ucx_t and everything made from it (memory, peers, transfers) belong
 * to ONE thread, the caller's reactor (UCS_THREAD_MODE_SINGLE). No call is thread-safe.
 *
 * Event loop contract (the UCX wakeup protocol, §3):
 *     for (;;) {
 *         fx_ucx_progress(u);                      // runs completion callbacks
 *         if (fx_ucx_arm(u) == 1)                  // nothing pending: safe to sleep
 *             poll(efd + own fds, fx_ucx_next_timeout_ms(u) or own timers);
 *     }                                            // arm() == 0: progress again first
 * Completion callbacks run only inside fx_ucx_progress (or fx_ucx_destroy), never inside
 * the submitting call, so a caller never sees a re-entrant callback during submit.
 *
 * Mechanisms (chosen per peer at connect time, see fx_ucx_set_mech):
 *  - RMA: ucp_get_nbx / ucp_put_nbx with the peer's rkey; a PUT batch ends with one
 *    ucp_ep_flush_nbx, so its callback means "visible at the target", not just "local
 *    buffer reusable". Chosen for RDMA lanes (native one-sided) and for posix/sysv-only
 *    shared memory (emulated, but as fast as AM there).
 *  - AM: active-message rendezvous handled by the target's own fx_ucx_progress — a GET
 *    sends a small request and the target replies with the bytes straight from its
 *    region; a PUT sends the bytes (UCX rendezvous into the target offset) and the
 *    target acknowledges after they landed, so the callback also means "visible at the
 *    target". Chosen for tcp (UCX 1.13 emulates RMA there; measured AM/RMA on the dev VM,
 *    64 x 4.5 MiB: GET median 1.6x, PUT median 2.7x) and where cma is available (single
 *    copy by rendezvous, while user RMA cannot use cma). Numbers in ucx_dp.c. The target
 *    validates every (address, length) against its mapped regions, the same authority
 *    an rkey gives.
 * Both require the target to run its event loop (tcp RMA is emulated in software by the
 * target's progress too), which every owner reactor does anyway.
 *
 * Failure model: endpoints are created with UCP_ERR_HANDLING_MODE_PEER, so a dead or
 * unreachable peer (tcp: the kernel closes the socket) fails the peer and its transfers
 * complete with FLUXON_ERR_UNAVAILABLE. UCX 1.13 shared-memory transports (posix, sysv,
 * self) do not support peer failure handling, so with PEER mode UCX never selects them:
 * with tls NULL two processes on one host talk over tcp. When the TLS list is
 * shared-memory only (e.g. "posix,sysv,self", "shm"), or PEER mode makes the peer
 * unreachable, the endpoint falls back to UCP_ERR_HANDLING_MODE_NONE: transfers run over
 * shared memory, and a dead peer is noticed only by the per-transfer timeout
 * (FLUXON_ERR_TIMEOUT; measured: exactly the timeout, for posix/sysv and for cma). Either
 * way the peer is then failed and force-closed, and later transfers are refused with
 * FLUXON_ERR_UNAVAILABLE. In NONE mode UCX keeps the dead endpoint's requests until
 * fx_ucx_destroy, which then logs UCX warnings about unreturned requests (harmless). */

typedef struct fx_ucx fx_ucx_t;
typedef struct fx_ucx_mem fx_ucx_mem_t;
typedef struct fx_ucx_peer fx_ucx_peer_t;

typedef enum fx_ucx_op {
    FX_UCX_GET = 1, /* remote -> local */
    FX_UCX_PUT = 2  /* local -> remote */
} fx_ucx_op_t;

typedef enum fx_ucx_mech {
    FX_UCX_MECH_AUTO = 0, /* per endpoint: AM over tcp or cma, RMA otherwise (see above) */
    FX_UCX_MECH_RMA = 1,
    FX_UCX_MECH_AM = 2
} fx_ucx_mech_t;

/* One range of a batch: `len` bytes at local address `local` <-> the peer's region at
 * remote_base + remote_offset (remote_base given to fx_ucx_peer_connect). */
typedef struct fx_ucx_range {
    void *local;
    uint64_t remote_offset;
    uint64_t len;
} fx_ucx_range_t;

/* Completion of a transfer: status is FLUXON_OK or the first error of the batch
 * (FLUXON_ERR_UNAVAILABLE peer failed/unreachable, FLUXON_ERR_CANCELLED peer closed or
 * instance destroyed, FLUXON_ERR_TIMEOUT the transfer timeout expired,
 * FLUXON_ERR_INVALID_ARGUMENT the target rejected a range outside its regions (AM only),
 * FLUXON_ERR_INTERNAL any other UCX error). Invoked exactly once per accepted transfer,
 * on the owning thread, from fx_ucx_progress or fx_ucx_destroy. The callback may submit
 * transfers and close peers; it must not call fx_ucx_destroy. */
typedef void (*fx_ucx_done_cb)(void *arg, int status);

/* Run once a transfer reported early is retired (fx_ucx_hold_until_retired). */
typedef void (*fx_ucx_retired_cb)(void *arg);

/* Default per-transfer timeout (the design's 30 s hard timeout). */
#define FX_UCX_DEFAULT_TIMEOUT_MS 30000u
/* Active message ids used by the AM mechanism on this instance's worker. */
#define FX_UCX_AM_ID_GET_REQ 0xF1u
#define FX_UCX_AM_ID_GET_REP 0xF2u
#define FX_UCX_AM_ID_PUT_REQ 0xF3u
#define FX_UCX_AM_ID_PUT_ACK 0xF4u
#define FX_UCX_AM_ID_PUTV_REQ 0xF5u /* several ranges in one message (answered by PUT_ACK) */
#define FX_UCX_AM_ID_GETV_REQ 0xF6u /* several ranges asked in one message (one GET_REP) */

/* Creates a UCX context (features RMA|AM|WAKEUP) and one single-threaded worker with an
 * event fd.
 *  tls  NULL = UCX's default transport selection (UCX_TLS from the environment still
 *       applies), else the UCX_TLS value to use, e.g. "tcp", "posix,sysv,self", "shm".
 *       Borrowed for the call.
 *  u_p  receives the instance; the caller owns it (fx_ucx_destroy).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (u_p NULL); FLUXON_ERR_UNAVAILABLE (no
 * usable transport/device — UCX 1.13 also reports an unknown transport name this way,
 * after a warning naming the available ones); FLUXON_ERR_CONFIG (UCX rejected a
 * configuration value); FLUXON_ERR_NOMEM; FLUXON_ERR_INTERNAL. UCX's reason is logged
 * with ucs_status_string. */
FX_INTERNAL int fx_ucx_create(const char *tls, fx_ucx_t **u_p);

/* Destroys the instance. NULL is a no-op. Force-closes every peer (pending transfers
 * complete with FLUXON_ERR_CANCELLED, their callbacks invoked from inside this call; a
 * callback here must not use u), progresses the worker for at most ~1 s so UCX can
 * retire requests, then destroys rkeys, the worker, every still-mapped region and the
 * context. Bounded: never waits on a peer. Peer and memory handles die with it. */
FX_INTERNAL void fx_ucx_destroy(fx_ucx_t *u);

/* The worker's event fd (ucp_worker_get_efd): poll it for POLLIN. Owned by u; never
 * close it. Valid until fx_ucx_destroy. */
FX_INTERNAL int fx_ucx_efd(const fx_ucx_t *u);

/* Prepares to sleep on the event fd. Returns 1 when it is safe to block on the fd (the
 * fd will signal new events), 0 when more fx_ucx_progress is needed first (UCS_ERR_BUSY,
 * or completions/internal work are queued), FLUXON_ERR_INTERNAL if UCX failed to arm. */
FX_INTERNAL int fx_ucx_arm(fx_ucx_t *u);

/* Progresses the worker until it reports no more work (bounded number of rounds so one
 * call cannot starve the caller's loop), then handles peer failures, close completions
 * and transfer timeouts, then invokes the callbacks of finished transfers. Returns the
 * number of UCX events plus callbacks handled (0 = idle). */
FX_INTERNAL unsigned fx_ucx_progress(fx_ucx_t *u);

/* True when finished transfers wait for fx_ucx_progress to run their callbacks (a transfer
 * through a mapped peer segment is finished when fx_ucx_transfer returns). u NULL: false. */
FX_INTERNAL bool fx_ucx_completions_queued(const fx_ucx_t *u);

/* Milliseconds until the earliest internal deadline (a transfer timeout, a close
 * deadline), 0 if one is already due, -1 if none. The caller's poll() must wake up by
 * then and call fx_ucx_progress, otherwise timeouts are only noticed on the next event. */
FX_INTERNAL int fx_ucx_next_timeout_ms(const fx_ucx_t *u);

/* Per-transfer timeout for transfers submitted from now on (default
 * FX_UCX_DEFAULT_TIMEOUT_MS; 0 restores the default). When it expires the transfer's
 * status becomes FLUXON_ERR_TIMEOUT and its peer is failed and force-closed (a stuck
 * endpoint is never trusted again), so its callback still arrives promptly. */
FX_INTERNAL void fx_ucx_set_timeout_ms(fx_ucx_t *u, uint32_t ms);

/* Mechanism for peers connected from now on (default FX_UCX_MECH_AUTO). */
FX_INTERNAL void fx_ucx_set_mech(fx_ucx_t *u, fx_ucx_mech_t mech);

/* The worker's address, to give to peers. The bytes (*addr_p, *len_p of them) are owned
 * by u and valid until fx_ucx_destroy. Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT. */
FX_INTERNAL int fx_ucx_worker_address(fx_ucx_t *u, const void **addr_p, size_t *len_p);

/* Registers an existing region [base, base+len) (e.g. the owner segment) with UCX
 * (ucp_mem_map, no allocation) so peers can reach it: by RMA through the rkey, by AM
 * because the target only accepts ranges inside its mapped regions. The region must
 * stay mapped until fx_ucx_mem_unmap/fx_ucx_destroy.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL, len 0); FLUXON_ERR_NOMEM;
 * FLUXON_ERR_INTERNAL (UCX refused, logged). */
FX_INTERNAL int fx_ucx_mem_map(fx_ucx_t *u, void *base, uint64_t len, fx_ucx_mem_t **m_p);

/* Packs the region's remote key for peers. *buf_p is owned by the caller and freed with
 * fx_ucx_buf_free. Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_INTERNAL. */
FX_INTERNAL int fx_ucx_rkey_pack(fx_ucx_mem_t *m, void **buf_p, size_t *len_p);
FX_INTERNAL void fx_ucx_buf_free(void *buf);

/* Unregisters the region. NULL is a no-op. From this call on the region is no longer an
 * AM target (remote ranges inside it are rejected). If local transfers using it are
 * still pending (e.g. cancelled by a peer close just before, callbacks not yet run), the
 * UCX registration is released by a later progress/destroy once they are retired; the
 * memory itself must stay mapped until their callbacks have run. */
FX_INTERNAL void fx_ucx_mem_unmap(fx_ucx_mem_t *m);

/* Connects to a peer: ucp_ep_create by worker address (error handling mode PEER where
 * the transports support it, see the failure model above) and ucp_ep_rkey_unpack of the
 * peer's packed rkey. Non-blocking: the UCX wire-up completes during progress.
 *  worker_addr/addr_len  the peer's fx_ucx_worker_address (borrowed for the call).
 *  rkey_buf/rkey_len     the peer's fx_ucx_rkey_pack output (borrowed for the call).
 *  remote_base           the address of the peer's region that offset 0 refers to.
 *  p_p                   receives the peer; owned by u, released by fx_ucx_peer_close
 *                        (or fx_ucx_destroy).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT; FLUXON_ERR_UNAVAILABLE (UCX found no
 * transport to reach the address); FLUXON_ERR_PROTOCOL (the rkey could not be unpacked);
 * FLUXON_ERR_NOMEM; FLUXON_ERR_INTERNAL. */
FX_INTERNAL int fx_ucx_peer_connect(fx_ucx_t *u, const void *worker_addr, size_t addr_len,
                                    const void *rkey_buf, size_t rkey_len,
                                    uint64_t remote_base, fx_ucx_peer_t **p_p);

/* Closes the peer without blocking. An idle, healthy peer is closed gracefully (flush:
 * the remote side sees an orderly disconnect); a failed peer or one with transfers in
 * flight is force-closed (UCP_EP_CLOSE_FLAG_FORCE: no round trip, cannot hang on a dead
 * peer) and those transfers complete with FLUXON_ERR_CANCELLED from later progress.
 * Never waits: the close finishes in later progress, and is abandoned after 2 s (UCX
 * then releases it by itself or at destroy). The handle is invalid after the call.
 * NULL is a no-op. */
FX_INTERNAL void fx_ucx_peer_close(fx_ucx_peer_t *p);

/* The peer is known dead (its owner was declared dead, or replaced by a new process): it
 * fails at once, as if every transfer in flight to it had reached its deadline now (they
 * complete FLUXON_ERR_TIMEOUT in the next progress: the outcome of a push is uncertain),
 * and later ones are refused. Shared-memory peers cannot report their death to UCX 1.13:
 * without this their transfers wait their whole timeout. Returns how many transfers were
 * in flight. NULL or already failed: 0. */
FX_INTERNAL size_t fx_ucx_peer_fail(fx_ucx_peer_t *p);

/* 0 while the peer is usable, else the status that failed it (FLUXON_ERR_UNAVAILABLE,
 * ...). Updated by fx_ucx_progress. */
FX_INTERNAL int fx_ucx_peer_status(const fx_ucx_peer_t *p);

/* The mechanism chosen for the peer: "rma" or "am" (static string). */
FX_INTERNAL const char *fx_ucx_peer_mech_name(const fx_ucx_peer_t *p);

/* Same host (issue 38): the peer's region [remote_base, remote_base + len) is mapped in this
 * process too, at base, by the caller, who keeps it mapped until fx_ucx_peer_close(p).
 * Transfers on p of at most FX_UCX_LOCAL_MAX_BYTES in all are then copies made inside
 * fx_ucx_transfer (memcpy: no UCX request, no work for the peer's worker, no timeout to
 * wait for; a larger batch goes over UCX, so one transfer never holds the caller's loop
 * for more than ~1 ms); their callbacks still run from a later fx_ucx_progress. A range past len fails its batch with FLUXON_ERR_INVALID_ARGUMENT
 * (nothing of the batch is copied; the peer stays usable). base NULL goes back to UCX. Counted in fx_ucx_local_stats. */
FX_INTERNAL void fx_ucx_peer_set_local(fx_ucx_peer_t *p, void *base, uint64_t len);

#define FX_UCX_LOCAL_MAX_BYTES (4ull << 20)

/* A peer of the same host whose region is mapped here (fx_ucx_peer_set_local's terms, set
 * from the start): no UCX endpoint is made until a transfer needs one (a batch over
 * FX_UCX_LOCAL_MAX_BYTES, or after fx_ucx_peer_set_local(p, NULL, 0)); worker_addr and
 * rkey_buf are copied for it. An endpoint nothing uses would only carry UCX's wireup, and
 * UCX 1.13 asserts in ucp_worker_destroy when a wireup reply is still pending ("got REP
 * message"). Same returns as fx_ucx_peer_connect; a failure to make the endpoint later
 * fails that transfer and the peer (FLUXON_ERR_UNAVAILABLE or the cause). */
FX_INTERNAL int fx_ucx_peer_connect_mapped(fx_ucx_t *u, const void *worker_addr, size_t addr_len,
                                           const void *rkey_buf, size_t rkey_len, uint64_t remote_base,
                                           void *local, uint64_t local_len, fx_ucx_peer_t **p_p);

/* Transfers and bytes copied through peers' local mappings since fx_ucx_create. */
FX_INTERNAL void fx_ucx_local_stats(const fx_ucx_t *u, uint64_t *xfers, uint64_t *bytes);
/* Nanoseconds those copies took (their memcpy, not the wait for their callbacks). */
FX_INTERNAL uint64_t fx_ucx_local_ns(const fx_ucx_t *u);

/* Same host: a batch on a peer whose region is mapped here (fx_ucx_peer_set_local) copied
 * now, inside the call, through the mapping, within FX_UCX_LOCAL_MAX_BYTES: no transfer is
 * queued and no callback runs, so a caller that needs the bytes at once (a get waiting for
 * a restore) does not wait for the loop's next turn. FLUXON_OK: every range copied (a PUT's
 * bytes visible to the peer's readers); FLUXON_ERR_UNAVAILABLE: nothing copied, use
 * fx_ucx_transfer (not a mapped peer, a larger batch, a test hook that delays transfers, the
 * peer failed or is closing); FLUXON_ERR_INVALID_ARGUMENT: fx_ucx_transfer's argument
 * checks, or a range past the mapping (nothing copied); FLUXON_ERR_CANCELLED (u is being
 * destroyed); FLUXON_ERR_NOMEM. Counted in fx_ucx_local_stats. Reactor thread. */
FX_INTERNAL int fx_ucx_copy_now(fx_ucx_t *u, fx_ucx_peer_t *peer, fx_ucx_op_t op, const fx_ucx_range_t *ranges,
                                size_t n);

/* Submits one batch: all n ranges are posted at once (ucp_*_nbx; on a locally mapped peer,
 * fx_ucx_peer_set_local, copied now, within the bound there), then cb is invoked
 * ONCE when every range has completed, with FLUXON_OK or the first error. Local buffers
 * must stay valid and untouched until the callback. Ranges may but need not lie in a
 * region mapped with fx_ucx_mem_map (a mapped one avoids UCX registration lookups).
 * Returns FLUXON_OK when the batch was accepted: cb will be called exactly once, never
 * from inside this call (also when everything completed immediately, or when posting a
 * later range failed: earlier ranges are in flight, so the failure is reported through
 * cb). Any other return means nothing was posted and cb will not be called:
 * FLUXON_ERR_INVALID_ARGUMENT (n == 0, NULL u/peer/ranges/cb, op unknown, a range with
 * len 0 or NULL local, remote_offset+len overflowing); FLUXON_ERR_UNAVAILABLE (the peer
 * failed or is closing); FLUXON_ERR_CANCELLED (u is being destroyed); FLUXON_ERR_NOMEM. */
FX_INTERNAL int fx_ucx_transfer(fx_ucx_t *u, fx_ucx_peer_t *peer, fx_ucx_op_t op,
                                const fx_ucx_range_t *ranges, size_t n, fx_ucx_done_cb cb,
                                void *arg);

/* Called from inside a transfer's done callback (and only there; xfer_arg is the arg that
 * transfer was submitted with, so a call made for another transfer is refused): when it was
 * reported before UCX retired its requests (a timeout: FLUXON_ERR_TIMEOUT, delivered at
 * once without PEER error handling or after the orphan grace with it), its local buffers
 * may still be written (GET) or read (PUT) by UCX. Then fn(arg) is kept and runs exactly
 * once, from a later fx_ucx_progress when every request of the transfer has retired, or
 * from fx_ucx_destroy (after the worker is destroyed: nothing can write any more; fn must
 * not use u there). Returns true when fn was kept; false (fn is not called) when the
 * transfer has retired (every normal completion: its buffers are free now), or when this
 * is not xfer_arg's callback (nothing held). Issue 44 W4: a fetch keeps its destination slots until then. In NONE
 * error-handling mode (shared memory only) UCX 1.13 may keep such requests until destroy:
 * callers bound what they hold this way. */
FX_INTERNAL bool fx_ucx_hold_until_retired(fx_ucx_t *u, const void *xfer_arg, fx_ucx_retired_cb fn, void *arg);

/* Transfers reported early and not retired yet that hold a fx_ucx_hold_until_retired
 * callback. */
FX_INTERNAL size_t fx_ucx_held(const fx_ucx_t *u);

/* Test-only (config "test.late_gets" / "test.late_ms"): the next n GET transfers are
 * reported at once as FLUXON_ERR_TIMEOUT (an early report, as after a timeout) and their
 * ranges are posted only ms later, so their bytes land after the report: a peer that
 * answers after the timeout. The peer is not failed. n 0 = off. */
FX_INTERNAL void fx_ucx_test_late_gets(fx_ucx_t *u, uint32_t n, uint32_t ms);
/* The same for the next n PUT transfers ("test.late_puts"): a push whose bytes land after
 * its timeout was reported (issue 44 W2). */
FX_INTERNAL void fx_ucx_test_late_puts(fx_ucx_t *u, uint32_t n, uint32_t ms);

/* Maps a UCX status to a FLUXON status (UNREACHABLE, CONNECTION_RESET, ENDPOINT_TIMEOUT,
 * IO_ERROR -> UNAVAILABLE; CANCELED -> CANCELLED; NO_MEMORY -> NOMEM; others ->
 * INTERNAL). Takes an int so the header needs no UCX include. */
FX_INTERNAL int fx_ucx_status_map(int ucs_status);

#endif /* FX_UCX_DP_H */
