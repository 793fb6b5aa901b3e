/* ucx_xfer.c — transfers of the UCX data plane (initiator side): a batch of ranges is
 * posted as RMA GET/PUT or as active-message requests, its completions (UCX callbacks,
 * AM replies and acks) are counted until the batch finishes, and finished batches wait
 * in a queue until the caller's progress delivers their callbacks. Lifecycle, peers and
 * timeouts are in ucx_dp.c; the AM target side in ucx_am.c. */
#include "ucx_int.h"

#include "log.h"
#include "stream_copy.h"

FX_INTERNAL void fx_ucxdp_xfer_unlink(fx_ucx_t *u, ucxdp_xfer_t *x)
{
    if (x->prev) x->prev->next = x->next; else u->live_head = x->next;
    if (x->next) x->next->prev = x->prev; else u->live_tail = x->prev;
    x->prev = x->next = NULL;
}

FX_INTERNAL void fx_ucxdp_xfer_queue(fx_ucx_t *u, ucxdp_xfer_t *x)
{
    if (x->queued) return;
    x->queued = 1;
    x->qnext = NULL;
    if (u->q_tail) u->q_tail->qnext = x; else u->q_head = x;
    u->q_tail = x;
}

static void ucxdp_xfer_finish(ucxdp_xfer_t *x)
{
    x->finished = 1;
    fx_ucxdp_xfer_unlink(x->u, x);
    x->peer->refs--;
    fx_ucxdp_xfer_queue(x->u, x);
}

/* One outstanding item of x (a request, an awaited reply, the submit guard) is done. */
static void ucxdp_xfer_event(ucxdp_xfer_t *x, int st)
{
    if (st != FLUXON_OK && x->status == FLUXON_OK) x->status = st;
    FX_ASSERT(x->pending > 0);
    if (--x->pending == 0) ucxdp_xfer_finish(x);
}

static ucxdp_xfer_t *ucxdp_xfer_find(fx_ucx_t *u, uint64_t token)
{
    /* Few transfers are in flight at a time (one per request batch), so a list scan is
     * cheaper than keeping a table in sync. */
    for (ucxdp_xfer_t *x = u->live_head; x; x = x->next)
        if (x->token == token) return x;
    return NULL;
}

static void ucxdp_rma_cb(void *req, ucs_status_t st, void *ud)
{
    ucxdp_xfer_event((ucxdp_xfer_t *)ud, ucxdp_map(st));
    ucp_request_free(req);
}

/* Completion of an AM GET/PUT request send. A failed send will never be answered. */
static void ucxdp_amreq_cb(void *req, ucs_status_t st, void *ud)
{
    ucxdp_rng_t *r = ud;
    ucxdp_xfer_t *x = r->x;
    int fst = ucxdp_map(st);
    if (fst != FLUXON_OK && r->awaiting) {
        r->awaiting = 0;
        ucxdp_xfer_event(x, fst);
    }
    ucxdp_xfer_event(x, fst);
    ucp_request_free(req);
}

static void ucxdp_amrecv_cb(void *req, ucs_status_t st, size_t len, void *ud)
{
    ucxdp_xfer_event(((ucxdp_rng_t *)ud)->x, ucxdp_map(st));
    ucp_request_free(req);
}

/* ---- initiator side of the AM mechanism ---------------------------------------- */

/* Finds the range a reply/ack answers; NULL for late or foreign replies (the transfer
 * already finished, timed out or its peer failed). */
static ucxdp_rng_t *ucxdp_reply_rng(fx_ucx_t *u, const void *header, size_t hlen, int op,
                                    ucxdp_hdr_t *h)
{
    if (hlen != sizeof *h) return NULL;
    memcpy(h, header, sizeof *h);
    ucxdp_xfer_t *x = ucxdp_xfer_find(u, h->token);
    if (!x || x->op != op || h->idx >= x->n || !x->r[h->idx].awaiting) return NULL;
    x->r[h->idx].awaiting = 0;
    return &x->r[h->idx];
}

/* Copies a GETV reply's bytes (the ranges of r's message, in order) to their places. */
static void ucxdp_getv_scatter(ucxdp_rng_t *r, const uint8_t *src)
{
    for (uint32_t j = 0; j < r->vn; j++) {
        ucxdp_rng_t *q = r + j;
        memcpy(q->local, src, q->len);
        src += q->len;
    }
}

static void ucxdp_getv_recv_cb(void *req, ucs_status_t st, size_t len, void *ud)
{
    ucxdp_rng_t *r = ud;
    (void)len;
    if (st == UCS_OK) ucxdp_getv_scatter(r, r->rtmp);
    fx_free(r->rtmp);
    r->rtmp = NULL;
    ucxdp_xfer_event(r->x, ucxdp_map(st));
    ucp_request_free(req);
}

static ucs_status_t ucxdp_getv_rep(fx_ucx_t *u, ucxdp_rng_t *r, void *data, size_t len,
                                   const ucp_am_recv_param_t *param)
{
    ucxdp_xfer_t *x = r->x;
    uint64_t want = 0;
    for (uint32_t j = 0; j < r->vn; j++) want += r[j].len;
    if (len != want) {
        FX_ERROR("ucx: GET reply of %zu bytes for %u ranges of %llu bytes", len, r->vn, (unsigned long long)want);
        ucxdp_xfer_event(x, FLUXON_ERR_INTERNAL);
        return UCS_OK;
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        ucxdp_getv_scatter(r, data);
        ucxdp_xfer_event(x, FLUXON_OK);
        return UCS_OK;
    }
    if (!(r->rtmp = fx_malloc(len))) {
        ucxdp_xfer_event(x, FLUXON_ERR_NOMEM); /* drops a rendezvous descriptor */
        return UCS_OK;
    }
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = ucxdp_getv_recv_cb,
        .user_data = r,
    };
    ucs_status_ptr_t q = ucp_am_recv_data_nbx(u->worker, data, r->rtmp, len, &rp);
    if (UCS_PTR_IS_PTR(q)) {
        x->pending++; /* before the reply's event can finish x */
        ucxdp_xfer_event(x, FLUXON_OK);
        return UCS_OK;
    }
    if (!UCS_PTR_IS_ERR(q)) ucxdp_getv_scatter(r, r->rtmp); /* completed in place */
    fx_free(r->rtmp);
    r->rtmp = NULL;
    ucxdp_xfer_event(x, UCS_PTR_IS_ERR(q) ? ucxdp_map(UCS_PTR_STATUS(q)) : FLUXON_OK);
    return UCS_OK;
}

static ucs_status_t ucxdp_am_get_rep(void *arg, const void *header, size_t hlen, void *data,
                                     size_t len, const ucp_am_recv_param_t *param)
{
    fx_ucx_t *u = arg;
    ucxdp_hdr_t h;
    ucxdp_rng_t *r = ucxdp_reply_rng(u, header, hlen, FX_UCX_GET, &h);
    if (!r) return UCS_OK;
    ucxdp_xfer_t *x = r->x;
    if (h.status != FLUXON_OK) {
        ucxdp_xfer_event(x, h.status);
        return UCS_OK;
    }
    if (r->vn > 1) return ucxdp_getv_rep(u, r, data, len, param);
    if (len != r->len) {
        FX_ERROR("ucx: GET reply of %zu bytes for a %llu-byte range", len,
                 (unsigned long long)r->len);
        ucxdp_xfer_event(x, FLUXON_ERR_INTERNAL);
        return UCS_OK;
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        memcpy(r->local, data, len);
        ucxdp_xfer_event(x, FLUXON_OK);
        return UCS_OK;
    }
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = ucxdp_amrecv_cb,
        .user_data = r,
    };
    ucs_status_ptr_t q = ucp_am_recv_data_nbx(u->worker, data, r->local, len, &rp);
    if (UCS_PTR_IS_PTR(q)) x->pending++; /* before the reply's event can finish x */
    ucxdp_xfer_event(x, UCS_PTR_IS_ERR(q) ? ucxdp_map(UCS_PTR_STATUS(q)) : FLUXON_OK);
    return UCS_OK;
}

static ucs_status_t ucxdp_am_put_ack(void *arg, const void *header, size_t hlen, void *data,
                                     size_t len, const ucp_am_recv_param_t *param)
{
    ucxdp_hdr_t h;
    ucxdp_rng_t *r = ucxdp_reply_rng(arg, header, hlen, FX_UCX_PUT, &h);
    if (r) ucxdp_xfer_event(r->x, h.status);
    return UCS_OK;
}


FX_INTERNAL bool fx_ucxdp_memh_in_use(const fx_ucx_t *u, ucp_mem_h memh)
{
    for (const ucxdp_xfer_t *x = u->live_head; x; x = x->next)
        for (size_t i = 0; i < x->n; i++)
            if (x->r[i].memh == memh) return true;
    return false;
}

FX_INTERNAL void fx_ucxdp_xfer_free(ucxdp_xfer_t *x)
{
    for (size_t i = 0; i < x->n; i++) {
        fx_free(x->r[i].vbuf);
        fx_free(x->r[i].rtmp);
    }
    fx_free(x);
}

FX_INTERNAL void fx_ucxdp_xfer_retire(fx_ucx_t *u, ucxdp_xfer_t *x)
{
    fx_ucx_retired_cb fn = x->hold_fn;
    void *arg = x->hold_arg;
    fx_ucxdp_xfer_free(x);
    if (fn) {
        u->held--;
        fn(arg);
    }
}

FX_INTERNAL unsigned fx_ucxdp_xfer_drain(fx_ucx_t *u)
{
    unsigned n = 0;
    ucxdp_xfer_t *q = u->q_head;
    u->q_head = u->q_tail = NULL;
    while (q) {
        ucxdp_xfer_t *x = q;
        q = x->qnext;
        x->qnext = NULL;
        x->queued = 0;
        fx_ucx_done_cb cb = x->cb;
        void *arg = x->arg;
        int st = x->status;
        bool fin = x->finished;
        x->cb = NULL;
        /* Callbacks run last: they may submit, close peers or free their buffers. A held
         * callback (an early report, now retired) runs here too. */
        if (fin) {
            n += x->hold_fn != NULL;
            fx_ucxdp_xfer_retire(u, x);
        }
        if (cb) {
            ucxdp_xfer_t *outer = u->in_cb;
            u->in_cb = fin ? NULL : x; /* fx_ucx_hold_until_retired may keep a callback on x */
            cb(arg, st);
            u->in_cb = outer;
            n++;
        }
    }
    return n;
}

/* Posts range i; returns FLUXON_OK or the error that stops the batch. */
static int ucxdp_post(ucxdp_xfer_t *x, size_t i)
{
    fx_ucx_peer_t *p = x->peer;
    ucxdp_rng_t *r = &x->r[i];
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
    };
    ucs_status_ptr_t q;
    if (x->mech == FX_UCX_MECH_RMA) {
        rp.cb.send = ucxdp_rma_cb;
        rp.user_data = x;
        if (r->memh) {
            rp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
            rp.memh = r->memh;
        }
        q = x->op == FX_UCX_GET ? ucp_get_nbx(p->ep, r->local, r->len, r->addr, p->rkey, &rp)
                                : ucp_put_nbx(p->ep, r->local, r->len, r->addr, p->rkey, &rp);
    } else {
        r->hdr = (ucxdp_hdr_t){.token = x->token, .addr = r->addr, .len = r->len,
                               .idx = (uint32_t)i};
        rp.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags = UCP_AM_SEND_FLAG_REPLY;
        rp.cb.send = ucxdp_amreq_cb;
        rp.user_data = r;
        r->awaiting = 1;
        x->pending++;
        if (x->op == FX_UCX_GET)
            q = ucp_am_send_nbx(p->ep, FX_UCX_AM_ID_GET_REQ, &r->hdr, sizeof r->hdr, NULL, 0, &rp);
        else
            q = ucp_am_send_nbx(p->ep, FX_UCX_AM_ID_PUT_REQ, &r->hdr, sizeof r->hdr, r->local,
                                r->len, &rp);
        if (UCS_PTR_IS_ERR(q)) { /* never sent: no reply will come */
            r->awaiting = 0;
            x->pending--;
        }
    }
    if (UCS_PTR_IS_ERR(q)) {
        int st = ucxdp_map(UCS_PTR_STATUS(q));
        /* A peer failing under our feet is an expected event, not a bug. */
        fx_log(st == FLUXON_ERR_INTERNAL ? FX_LOG_ERROR : FX_LOG_WARN,
               "ucx: posting %s range %zu of %zu: %s", x->op == FX_UCX_GET ? "GET" : "PUT", i,
               x->n, ucs_status_string(UCS_PTR_STATUS(q)));
        return st;
    }
    if (q) x->pending++;
    return FLUXON_OK;
}

/* How many ranges from i go in one AM PUTV message (1: range i goes alone). */
static size_t ucxdp_v_count(const ucxdp_xfer_t *x, size_t i)
{
    if (x->mech != FX_UCX_MECH_AM) return 1;
    size_t k = 0;
    uint64_t bytes = 0;
    while (i + k < x->n && k < UCXDP_V_MAX_N && x->r[i + k].len <= UCXDP_V_MAX_RANGE &&
           bytes + x->r[i + k].len <= UCXDP_V_MAX_BYTES)
        bytes += x->r[i + k++].len;
    return k ? k : 1;
}

/* Posts ranges [i, i + k) (k >= 2) as one AM PUTV (the ack names range i) or GETV (the
 * reply names range i and carries the k ranges' bytes). */
static int ucxdp_post_v(ucxdp_xfer_t *x, size_t i, size_t k)
{
    fx_ucx_peer_t *p = x->peer;
    ucxdp_rng_t *r = &x->r[i];
    bool put = x->op == FX_UCX_PUT;
    /* PUTV: iov[0] = the range list, iov[1..k] = the bytes; GETV: the list alone */
    size_t iov_bytes = (k + 1) * sizeof(ucp_dt_iov_t);
    r->vbuf = fx_malloc(iov_bytes + k * 2 * sizeof(uint64_t));
    if (!r->vbuf) return FLUXON_ERR_NOMEM;
    ucp_dt_iov_t *iov = r->vbuf;
    uint64_t *list = (uint64_t *)((char *)r->vbuf + iov_bytes), bytes = 0;
    for (size_t j = 0; j < k; j++) {
        list[2 * j] = x->r[i + j].addr;
        list[2 * j + 1] = x->r[i + j].len;
        iov[1 + j] = (ucp_dt_iov_t){x->r[i + j].local, x->r[i + j].len};
        bytes += x->r[i + j].len;
    }
    iov[0] = (ucp_dt_iov_t){list, k * 2 * sizeof(uint64_t)};
    r->vn = (uint32_t)k;
    uint64_t total = put ? bytes + k * 2 * sizeof(uint64_t) : bytes;
    r->hdr = (ucxdp_hdr_t){.token = x->token, .addr = 0, .len = total, .idx = (uint32_t)i, .status = (int32_t)k};
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS |
                        UCP_OP_ATTR_FIELD_DATATYPE,
        .cb.send = ucxdp_amreq_cb,
        .user_data = r,
        .flags = UCP_AM_SEND_FLAG_REPLY,
        .datatype = ucp_dt_make_iov(),
    };
    r->awaiting = 1;
    x->pending++;
    ucs_status_ptr_t q = put ? ucp_am_send_nbx(p->ep, FX_UCX_AM_ID_PUTV_REQ, &r->hdr, sizeof r->hdr, iov, k + 1, &rp)
                             : ucp_am_send_nbx(p->ep, FX_UCX_AM_ID_GETV_REQ, &r->hdr, sizeof r->hdr, iov, 1, &rp);
    if (UCS_PTR_IS_ERR(q)) { /* never sent: no answer will come */
        r->awaiting = 0;
        x->pending--;
        fx_log(FX_LOG_WARN, "ucx: posting %s ranges %zu..%zu of %zu: %s", put ? "PUT" : "GET", i, i + k - 1, x->n,
               ucs_status_string(UCS_PTR_STATUS(q)));
        return ucxdp_map(UCS_PTR_STATUS(q));
    }
    if (q) x->pending++;
    return FLUXON_OK;
}

/* Posts every range of x (and an RMA PUT's flush), then drops the submit guard. */
/* A peer mapped here (fx_ucx_peer_set_local): each range is one memcpy, made now. */
static int ucxdp_post_local(ucxdp_xfer_t *x)
{
    fx_ucx_peer_t *p = x->peer;
    uint64_t bytes = 0, t0 = fx_now_ns();
    for (size_t i = 0; i < x->n; i++) { /* every range first: a refused batch copies nothing */
        uint64_t off = x->r[i].addr - p->remote_base; /* fx_ucx_transfer checked it does not wrap */
        if (off > p->local_len || x->r[i].len > p->local_len - off) return FLUXON_ERR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < x->n; i++) {
        const ucxdp_rng_t *r = &x->r[i];
        uint64_t off = r->addr - p->remote_base;
        if (i + 1 < x->n) /* the next piece's source starts loading under this copy */
            fx_stream_prefetch_next(x->op == FX_UCX_GET ? (const void *)(p->local + (x->r[i + 1].addr - p->remote_base))
                                                        : x->r[i + 1].local,
                                    x->r[i + 1].len);
        if (x->op == FX_UCX_GET) memcpy(r->local, p->local + off, r->len); /* read here next: cached */
        else if ((uintptr_t)(p->local + off) % 16) memcpy(p->local + off, r->local, r->len);
        else fx_stream_copy(p->local + off, r->local, r->len); /* read by the peer's readers, not here */
        bytes += r->len;
    }
    if (x->op != FX_UCX_GET) fx_stream_fence(); /* all of it visible before the completion is reported */
    x->u->local_xfers++;
    x->u->local_bytes += bytes;
    x->u->local_ns += fx_now_ns() - t0;
    return FLUXON_OK;
}

FX_INTERNAL void fx_ucx_peer_set_local(fx_ucx_peer_t *p, void *base, uint64_t len)
{
    if (!p) return;
    p->local = base;
    p->local_len = base ? len : 0;
}

FX_INTERNAL uint64_t fx_ucx_local_ns(const fx_ucx_t *u) { return u ? u->local_ns : 0; }

FX_INTERNAL void fx_ucx_local_stats(const fx_ucx_t *u, uint64_t *xfers, uint64_t *bytes)
{
    *xfers = u ? u->local_xfers : 0;
    *bytes = u ? u->local_bytes : 0;
}

static void ucxdp_xfer_post_all(ucxdp_xfer_t *x)
{
    fx_ucx_peer_t *peer = x->peer;
    size_t n = x->n;
    int st = FLUXON_OK;
    uint64_t bytes = 0;
    for (size_t i = 0; peer->local && i < n && bytes <= FX_UCX_LOCAL_MAX_BYTES; i++) bytes += x->r[i].len;
    if (peer->local && bytes <= FX_UCX_LOCAL_MAX_BYTES) { /* larger: UCX, which the reactor interleaves */
        ucxdp_xfer_event(x, ucxdp_post_local(x)); /* drop the guard: finished, queued for progress */
        return;
    }
    if (!peer->ep) { /* a mapped peer's first transfer over UCX */
        int rc = fx_ucxdp_peer_open_lazy(peer);
        if (rc != FLUXON_OK) {
            ucxdp_xfer_event(x, rc);
            return;
        }
    }
    for (size_t i = 0, k; i < n && st == FLUXON_OK; i += k) {
        k = ucxdp_v_count(x, i);
        st = k > 1 ? ucxdp_post_v(x, i, k) : ucxdp_post(x, i);
    }
    if (st == FLUXON_OK && x->op == FX_UCX_PUT && x->mech == FX_UCX_MECH_RMA) {
        /* RMA put completion only means "local buffer reusable"; the flush makes the
         * callback mean "visible at the target". */
        ucp_request_param_t rp = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
            .cb.send = ucxdp_rma_cb,
            .user_data = x,
        };
        ucs_status_ptr_t q = ucp_ep_flush_nbx(peer->ep, &rp);
        if (UCS_PTR_IS_ERR(q)) {
            FX_ERROR("ucx: flush after PUT: %s", ucs_status_string(UCS_PTR_STATUS(q)));
            st = ucxdp_map(UCS_PTR_STATUS(q));
        } else if (q) {
            x->pending++;
        }
    }
    ucxdp_xfer_event(x, st); /* drop the guard; a finished x waits in the queue */
}

/* fx_ucx_transfer's and fx_ucx_copy_now's checks of their arguments (their statuses). */
static int ucxdp_args_check(fx_ucx_t *u, fx_ucx_peer_t *peer, fx_ucx_op_t op, const fx_ucx_range_t *ranges, size_t n)
{
    if (!u || !peer || !ranges || n == 0 || peer->u != u || (op != FX_UCX_GET && op != FX_UCX_PUT))
        return FLUXON_ERR_INVALID_ARGUMENT;
    if (n > UINT32_MAX || n > (SIZE_MAX - sizeof(ucxdp_xfer_t)) / sizeof(ucxdp_rng_t))
        return FLUXON_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++) {
        const fx_ucx_range_t *g = &ranges[i];
        if (!g->local || !g->len || g->remote_offset + g->len < g->len ||
            peer->remote_base + g->remote_offset + g->len < peer->remote_base ||
            (uint64_t)(uintptr_t)g->local + g->len < g->len)
            return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (u->destroying) return FLUXON_ERR_CANCELLED;
    if (peer->closing || peer->status != FLUXON_OK) return FLUXON_ERR_UNAVAILABLE;
    return FLUXON_OK;
}

FX_INTERNAL int fx_ucx_copy_now(fx_ucx_t *u, fx_ucx_peer_t *peer, fx_ucx_op_t op, const fx_ucx_range_t *ranges,
                                size_t n)
{
    int rc = ucxdp_args_check(u, peer, op, ranges, n);
    if (rc != FLUXON_OK) return rc;
    /* the test hooks that report transfers late act on queued ones only */
    if (!peer->local || u->test_late_n || u->test_late_puts_n) return FLUXON_ERR_UNAVAILABLE;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n && bytes <= FX_UCX_LOCAL_MAX_BYTES; i++) bytes += ranges[i].len;
    if (bytes > FX_UCX_LOCAL_MAX_BYTES) return FLUXON_ERR_UNAVAILABLE;
    ucxdp_xfer_t *x = fx_calloc(1, sizeof *x + n * sizeof(ucxdp_rng_t));
    if (!x) return FLUXON_ERR_NOMEM;
    x->u = u;
    x->peer = peer;
    x->op = (uint8_t)op;
    x->n = n;
    for (size_t i = 0; i < n; i++)
        x->r[i] = (ucxdp_rng_t){.x = x, .local = ranges[i].local, .addr = peer->remote_base + ranges[i].remote_offset,
                                .len = ranges[i].len};
    rc = ucxdp_post_local(x);
    fx_free(x);
    return rc;
}

FX_INTERNAL int fx_ucx_transfer(fx_ucx_t *u, fx_ucx_peer_t *peer, fx_ucx_op_t op,
                                const fx_ucx_range_t *ranges, size_t n, fx_ucx_done_cb cb,
                                void *arg)
{
    int rc = cb ? ucxdp_args_check(u, peer, op, ranges, n) : FLUXON_ERR_INVALID_ARGUMENT;
    if (rc != FLUXON_OK) return rc;

    ucxdp_xfer_t *x = fx_calloc(1, sizeof *x + n * sizeof(ucxdp_rng_t));
    if (!x) return FLUXON_ERR_NOMEM;
    x->u = u;
    x->peer = peer;
    x->cb = cb;
    x->arg = arg;
    x->token = ++u->next_token;
    x->deadline_ns = fx_now_ns() + u->timeout_ns;
    x->op = (uint8_t)op;
    x->mech = peer->mech;
    x->n = n;
    x->pending = 1; /* submit guard: completions during posting cannot finish x */
    for (size_t i = 0; i < n; i++) {
        ucxdp_rng_t *r = &x->r[i];
        r->x = x;
        r->local = ranges[i].local;
        r->addr = peer->remote_base + ranges[i].remote_offset;
        r->len = ranges[i].len;
        const fx_ucx_mem_t *lm = fx_ucxdp_region_find(u, (uint64_t)(uintptr_t)r->local, r->len);
        r->memh = lm ? lm->memh : NULL;
    }
    x->prev = u->live_tail;
    if (u->live_tail) u->live_tail->next = x; else u->live_head = x;
    u->live_tail = x;
    peer->refs++;

    uint32_t *late = op == FX_UCX_GET ? &u->test_late_n : op == FX_UCX_PUT ? &u->test_late_puts_n : NULL;
    if (late && *late) { /* test hook: reported now, posted later */
        (*late)--;
        x->test_post_ns = fx_now_ns() + (uint64_t)u->test_late_ms * 1000000ull;
        x->deadline_ns = UINT64_MAX;
        x->timed_out = 1;
        x->early = 1;
        x->status = FLUXON_ERR_TIMEOUT;
        FX_WARN("ucx test hook: %s of %zu ranges reported as timed out now, posted in %u ms",
                op == FX_UCX_GET ? "GET" : "PUT", n, u->test_late_ms);
        fx_ucxdp_xfer_queue(u, x);
        return FLUXON_OK; /* the guard stays until fx_ucxdp_xfer_post_late */
    }
    ucxdp_xfer_post_all(x);
    return FLUXON_OK;
}

FX_INTERNAL void fx_ucxdp_xfer_post_late(ucxdp_xfer_t *x)
{
    x->test_post_ns = 0;
    if (x->peer->closing || x->peer->status != FLUXON_OK) {
        ucxdp_xfer_event(x, x->peer->status != FLUXON_OK ? x->peer->status : FLUXON_ERR_CANCELLED);
        return;
    }
    ucxdp_xfer_post_all(x);
}

FX_INTERNAL void fx_ucxdp_xfer_fail_peer(fx_ucx_t *u, fx_ucx_peer_t *p)
{
    /* The peer's status goes first so cancellations caused by a failure read as such. */
    ucxdp_xfer_t *nx;
    for (ucxdp_xfer_t *x = u->live_head; x; x = nx) {
        nx = x->next;
        if (x->peer != p) continue;
        if (x->status == FLUXON_OK) x->status = p->status;
        for (size_t i = 0; i < x->n && !x->finished; i++) {
            if (!x->r[i].awaiting) continue;
            x->r[i].awaiting = 0;
            ucxdp_xfer_event(x, p->status);
        }
    }
}

FX_INTERNAL ucs_status_t fx_ucxdp_xfer_init(fx_ucx_t *u)
{
    ucs_status_t st = fx_ucxdp_am_set_handler(u, FX_UCX_AM_ID_GET_REP, ucxdp_am_get_rep);
    if (st == UCS_OK) st = fx_ucxdp_am_set_handler(u, FX_UCX_AM_ID_PUT_ACK, ucxdp_am_put_ack);
    return st;
}
