/* ucx_int.h — state shared by the three files of the UCX data plane, lowest first:
 * ucx_am.c (mapped-region lookup, the active-message target side), ucx_xfer.c (transfers:
 * posting, completion counting, the callback queue; the initiator side), ucx_dp.c
 * (context, worker, memory, peers, timeouts, progress, teardown). A file calls only the
 * ones before it. Internal to transport/; callers use ucx_dp.h. */
#ifndef FX_UCX_INT_H
#define FX_UCX_INT_H

#include "ucx_dp.h"

#include <ucp/api/ucp.h>

/* Wire header of the AM mechanism (both ends run the same build on one host class). */
typedef struct ucxdp_hdr {
    uint64_t token;  /* initiator's transfer token */
    uint64_t addr;   /* absolute address in the target's mapped region */
    uint64_t len;
    uint32_t idx;    /* range index within the batch */
    int32_t status;  /* FLUXON status, in replies/acks */
} ucxdp_hdr_t;

typedef struct ucxdp_xfer ucxdp_xfer_t;

typedef struct ucxdp_rng {
    ucxdp_xfer_t *x;
    void *local;
    uint64_t addr; /* absolute remote address */
    uint64_t len;
    ucp_mem_h memh; /* local registration if the range lies in a mapped region */
    ucxdp_hdr_t hdr; /* AM request header: UCX may read it until the send completes */
    uint8_t awaiting; /* AM: reply/ack not yet received */
    uint32_t vn;      /* AM: ranges [i, i + vn) in this range's one PUTV/GETV message (0: alone) */
    void *vbuf;       /* that message's iov + range list, freed with the transfer */
    void *rtmp;       /* GETV: a rendezvous reply's bytes, scattered once received */
} ucxdp_rng_t;

/* AM PUTV / GETV (ucx_am.c, ucx_xfer.c): small ranges travel together, one message and one
 * answer for up to UCXDP_V_MAX_N ranges of at most UCXDP_V_MAX_RANGE bytes, UCXDP_V_MAX_BYTES
 * in all. PUTV's payload is the range list (n x {absolute address, length}, uint64 each)
 * followed by the ranges' bytes in that order; hdr.len is the payload's length, hdr.status
 * the number of ranges; PUT_ACK answers. GETV's payload is the range list alone, hdr.len the
 * bytes asked; one GET_REP carries them back in list order. Over tcp this is one send
 * instead of one per range. */
#define UCXDP_V_MAX_N 256u
#define UCXDP_V_MAX_RANGE (64u * 1024u)
#define UCXDP_V_MAX_BYTES (1024u * 1024u)

struct ucxdp_xfer {
    fx_ucx_t *u;
    fx_ucx_peer_t *peer;
    fx_ucx_done_cb cb;
    void *arg;
    uint64_t token;
    uint64_t deadline_ns;
    size_t pending; /* outstanding UCX requests + awaited AM replies */
    int status;     /* first error */
    uint8_t op, mech;
    uint8_t timed_out, finished, queued, early;
    fx_ucx_retired_cb hold_fn; /* fx_ucx_hold_until_retired: run once x is retired */
    void *hold_arg;
    uint64_t test_post_ns; /* test hook (fx_ucx_test_late_gets): post the ranges then */
    ucxdp_xfer_t *prev, *next; /* u->live, submission order, until finished */
    ucxdp_xfer_t *qnext;       /* u->queue: callback due */
    size_t n;
    ucxdp_rng_t r[];
};

struct fx_ucx_peer {
    fx_ucx_t *u;
    ucp_ep_h ep; /* NULL once closing */
    ucp_rkey_h rkey;
    uint64_t remote_base;
    void *close_req;
    uint64_t close_deadline_ns;
    int status;  /* FLUXON_OK while usable */
    size_t refs; /* unfinished transfers on this peer */
    uint8_t mech, err_peer, user_closed, closing;
    uint8_t *local;      /* the peer's region mapped here (fx_ucx_peer_set_local), else NULL */
    void *lazy_addr, *lazy_rkey; /* fx_ucx_peer_connect_mapped: the endpoint is made at the */
    size_t lazy_rkey_len;        /* first transfer that needs UCX (none till then) */
    uint64_t local_len;
    fx_ucx_peer_t *prev, *next;
};

/* Makes a mapped peer's endpoint now (fx_ucx_peer_connect_mapped): FLUXON_OK, or the peer
 * failed (its status says why). */
FX_INTERNAL int fx_ucxdp_peer_open_lazy(fx_ucx_peer_t *p);

/* Target-side state of one AM request (ucx_am.c). */
typedef struct ucxdp_tgt ucxdp_tgt_t;

struct fx_ucx_mem {
    fx_ucx_t *u;
    ucp_mem_h memh;
    uint64_t base;
    uint64_t len;
    fx_ucx_mem_t *prev, *next;
};

struct fx_ucx {
    ucp_context_h ctx;
    ucp_worker_h worker;
    int efd;
    ucp_address_t *addr;
    size_t addr_len;
    uint64_t timeout_ns;
    uint64_t local_xfers, local_bytes; /* transfers copied through a peer's local mapping */
    uint64_t local_ns;                 /* ... and the time their copies took */
    fx_ucx_mech_t mech;
    bool shm_only;
    bool destroying;
    bool need_reap; /* a peer failed inside a UCX callback */
    uint64_t next_token;
    fx_ucx_peer_t *peers;
    fx_ucx_mem_t *mems;
    fx_ucx_mem_t *dead_mems; /* unmapped by the caller, still named by live requests */
    ucxdp_xfer_t *live_head, *live_tail;
    ucxdp_xfer_t *q_head, *q_tail;
    ucxdp_xfer_t *in_cb; /* the unfinished transfer whose callback runs now (drain) */
    size_t held;         /* transfers holding a fx_ucx_hold_until_retired callback */
    uint32_t test_late_n, test_late_ms; /* fx_ucx_test_late_gets */
    uint32_t test_late_puts_n;          /* fx_ucx_test_late_puts */
    ucxdp_tgt_t *tgts;
};

static inline int ucxdp_map(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:
        return FLUXON_OK;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_IO_ERROR: /* a transport I/O error towards the peer (socket, cma) */
        return FLUXON_ERR_UNAVAILABLE;
    case UCS_ERR_CANCELED:
        return FLUXON_ERR_CANCELLED;
    case UCS_ERR_NO_MEMORY:
        return FLUXON_ERR_NOMEM;
    default:
        return FLUXON_ERR_INTERNAL;
    }
}

/* ---- ucx_am.c ---- */

/* The region mapped with fx_ucx_mem_map that holds [addr, addr + len), or NULL. */
FX_INTERNAL const fx_ucx_mem_t *fx_ucxdp_region_find(const fx_ucx_t *u, uint64_t addr, uint64_t len);
/* Registers the whole-message AM handler cb for id on u's worker (arg = u). */
FX_INTERNAL ucs_status_t fx_ucxdp_am_set_handler(fx_ucx_t *u, unsigned id, ucp_am_recv_callback_t cb);
/* Registers the target side (GET_REQ, PUT_REQ handlers). */
FX_INTERNAL ucs_status_t fx_ucxdp_target_init(fx_ucx_t *u);
/* Frees the target-side state of requests whose reply never completed (after the
 * worker is destroyed). */
FX_INTERNAL void fx_ucxdp_target_fini(fx_ucx_t *u);

/* ---- ucx_xfer.c ---- */

/* Registers the initiator's AM reply handlers (GET_REP, PUT_ACK). */
FX_INTERNAL ucs_status_t fx_ucxdp_xfer_init(fx_ucx_t *u);
/* Removes x from u's live list (submission order). */
FX_INTERNAL void fx_ucxdp_xfer_unlink(fx_ucx_t *u, ucxdp_xfer_t *x);
/* Queues x for its callback at the next drain (once). */
FX_INTERNAL void fx_ucxdp_xfer_queue(fx_ucx_t *u, ucxdp_xfer_t *x);
FX_INTERNAL void fx_ucxdp_xfer_free(ucxdp_xfer_t *x);
/* Frees x, then runs its fx_ucx_hold_until_retired callback if it has one. */
FX_INTERNAL void fx_ucxdp_xfer_retire(fx_ucx_t *u, ucxdp_xfer_t *x);
/* Posts every range of x (a test-late GET, fx_ucx_test_late_gets) and drops its guard. */
FX_INTERNAL void fx_ucxdp_xfer_post_late(ucxdp_xfer_t *x);
/* Delivers the queued callbacks (frees finished transfers first); the number run. */
FX_INTERNAL unsigned fx_ucxdp_xfer_drain(fx_ucx_t *u);
/* p failed or is closing: its transfers take p's status, awaited AM replies are given up. */
FX_INTERNAL void fx_ucxdp_xfer_fail_peer(fx_ucx_t *u, fx_ucx_peer_t *p);
/* Whether a live transfer's range still names memh. */
FX_INTERNAL bool fx_ucxdp_memh_in_use(const fx_ucx_t *u, ucp_mem_h memh);

#endif /* FX_UCX_INT_H */
