/* ucx_am.c — the target side of the UCX data plane's active-message mechanism (tcp):
 * answers GET_REQ with the bytes and PUT_REQ with an ack, both checked against the regions
 * mapped with fx_ucx_mem_map; and the mapped-region lookup both sides use. Replies are sent
 * from inside UCX callbacks; a reply's state lives until its send completes. */
#include "ucx_int.h"

#include "log.h"

/* Target-side state of one AM request: the header of the reply/ack it sends and the ep
 * to send it on; lives until that send (or the PUT receive) completes. */
struct ucxdp_tgt {
    fx_ucx_t *u;
    ucp_ep_h reply_ep;
    ucxdp_hdr_t hdr;
    void *vtmp; /* a PUTV's rendezvous payload, scattered once received; a GETV's range list */
    bool getv;  /* a GETV: the receive brings its range list */
    struct ucxdp_tgt *prev, *next;
};

FX_INTERNAL const fx_ucx_mem_t *fx_ucxdp_region_find(const fx_ucx_t *u, uint64_t addr, uint64_t len)
{
    for (const fx_ucx_mem_t *m = u->mems; m; m = m->next)
        if (addr >= m->base && len <= m->len && addr - m->base <= m->len - len) return m;
    return NULL;
}

static bool ucxdp_region_ok(const fx_ucx_t *u, uint64_t addr, uint64_t len)
{
    return fx_ucxdp_region_find(u, addr, len) != NULL;
}

static ucxdp_tgt_t *ucxdp_tgt_new(fx_ucx_t *u, ucp_ep_h reply_ep, const ucxdp_hdr_t *h)
{
    ucxdp_tgt_t *t = fx_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->u = u;
    t->reply_ep = reply_ep;
    t->hdr = *h;
    t->next = u->tgts;
    if (u->tgts) u->tgts->prev = t;
    u->tgts = t;
    return t;
}

static void ucxdp_tgt_free(ucxdp_tgt_t *t)
{
    fx_ucx_t *u = t->u;
    if (t->prev) t->prev->next = t->next; else u->tgts = t->next;
    if (t->next) t->next->prev = t->prev;
    fx_free(t->vtmp);
    fx_free(t);
}

static void ucxdp_tgt_send_cb(void *req, ucs_status_t st, void *ud)
{
    if (st != UCS_OK) FX_DEBUG("ucx: AM reply failed: %s", ucs_status_string(st));
    ucxdp_tgt_free(ud);
    ucp_request_free(req);
}

/* Sends t's header (with status) and optional data back to the initiator; t is freed
 * once the send completes. Sending from inside UCX callbacks is how UCX's own
 * rendezvous replies work, and reply_ep is only guaranteed valid there. */
static void ucxdp_tgt_reply(ucxdp_tgt_t *t, unsigned id, int status, const void *buf,
                            size_t len)
{
    t->hdr.status = status;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = ucxdp_tgt_send_cb,
        .user_data = t,
    };
    ucs_status_ptr_t r = ucp_am_send_nbx(t->reply_ep, id, &t->hdr, sizeof t->hdr, buf, len, &rp);
    if (UCS_PTR_IS_PTR(r)) return;
    if (UCS_PTR_IS_ERR(r))
        FX_DEBUG("ucx: AM reply failed: %s", ucs_status_string(UCS_PTR_STATUS(r)));
    ucxdp_tgt_free(t);
}

static ucp_ep_h ucxdp_reply_ep(const ucp_am_recv_param_t *param)
{
    return (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL;
}

/* A request's target-side state (its header copied to h), or NULL: not ours (no reply
 * endpoint, a foreign header: nobody to answer) or out of memory (the initiator's timeout
 * covers it). */
static ucxdp_tgt_t *ucxdp_tgt_begin(fx_ucx_t *u, const void *header, size_t hlen, const ucp_am_recv_param_t *param,
                                    ucxdp_hdr_t *h)
{
    ucp_ep_h ep = ucxdp_reply_ep(param);
    if (hlen != sizeof *h || !ep) return NULL;
    memcpy(h, header, sizeof *h);
    return ucxdp_tgt_new(u, ep, h);
}

static ucs_status_t ucxdp_am_get_req(void *arg, const void *header, size_t hlen, void *data,
                                     size_t len, const ucp_am_recv_param_t *param)
{
    fx_ucx_t *u = arg;
    ucxdp_hdr_t h;
    ucxdp_tgt_t *t = ucxdp_tgt_begin(u, header, hlen, param, &h);
    if (!t) return UCS_OK;
    if (!ucxdp_region_ok(u, h.addr, h.len)) {
        FX_WARN("ucx: rejected GET of %llu bytes at 0x%llx: outside mapped regions",
                (unsigned long long)h.len, (unsigned long long)h.addr);
        ucxdp_tgt_reply(t, FX_UCX_AM_ID_GET_REP, FLUXON_ERR_INVALID_ARGUMENT, NULL, 0);
        return UCS_OK;
    }
    ucxdp_tgt_reply(t, FX_UCX_AM_ID_GET_REP, FLUXON_OK, (const void *)(uintptr_t)h.addr,
                    (size_t)h.len);
    return UCS_OK;
}

static int ucxdp_putv_scatter(const fx_ucx_t *u, const ucxdp_hdr_t *h, const uint8_t *data, size_t len);
static void ucxdp_getv_serve(ucxdp_tgt_t *t, uint64_t n);

/* A rendezvous receive on the target ended: a PUT's bytes landed in place (ack), a PUTV's
 * payload in t->vtmp (scatter, then ack), or a GETV's range list in t->vtmp (serve it). */
static void ucxdp_tgt_recv_cb(void *req, ucs_status_t st, size_t len, void *ud)
{
    ucxdp_tgt_t *t = ud;
    ucp_request_free(req);
    if (st != UCS_OK) {
        /* The initiator's endpoint failed mid-transfer: nobody to answer. */
        FX_DEBUG("ucx: AM receive failed: %s", ucs_status_string(st));
        ucxdp_tgt_free(t);
        return;
    }
    if (t->getv) ucxdp_getv_serve(t, len / 16);
    else ucxdp_tgt_reply(t, FX_UCX_AM_ID_PUT_ACK,
                         t->vtmp ? ucxdp_putv_scatter(t->u, &t->hdr, t->vtmp, (size_t)t->hdr.len) : FLUXON_OK, NULL, 0);
}

static ucs_status_t ucxdp_am_put_req(void *arg, const void *header, size_t hlen, void *data,
                                     size_t len, const ucp_am_recv_param_t *param)
{
    fx_ucx_t *u = arg;
    ucxdp_hdr_t h;
    ucxdp_tgt_t *t = ucxdp_tgt_begin(u, header, hlen, param, &h);
    if (!t) return UCS_OK;
    if (h.len != len || !ucxdp_region_ok(u, h.addr, h.len)) {
        FX_WARN("ucx: rejected PUT of %zu bytes at 0x%llx: outside mapped regions", len,
                (unsigned long long)h.addr);
        ucxdp_tgt_reply(t, FX_UCX_AM_ID_PUT_ACK, FLUXON_ERR_INVALID_ARGUMENT, NULL, 0);
        return UCS_OK; /* drops a rendezvous descriptor */
    }
    void *dst = (void *)(uintptr_t)h.addr;
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        memcpy(dst, data, len); /* eager: the bytes are only valid during this call */
        ucxdp_tgt_reply(t, FX_UCX_AM_ID_PUT_ACK, FLUXON_OK, NULL, 0);
        return UCS_OK;
    }
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = ucxdp_tgt_recv_cb,
        .user_data = t,
    };
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(u->worker, data, dst, len, &rp);
    if (UCS_PTR_IS_PTR(r)) return UCS_OK;
    ucxdp_tgt_reply(t, FX_UCX_AM_ID_PUT_ACK, ucxdp_map(UCS_PTR_STATUS(r)), NULL, 0);
    return UCS_OK;
}

/* Entry j of a PUTV/GETV range list (ucx_int.h): absolute address and length. */
static void ucxdp_list_at(const uint8_t *lp, uint64_t j, uint64_t *a, uint64_t *l)
{
    memcpy(a, lp + 16 * j, 8);
    memcpy(l, lp + 16 * j + 8, 8);
}

/* Checks a PUTV payload (the range list, then the bytes: ucx_int.h) and copies each range
 * to its place; FLUXON_OK, or FLUXON_ERR_INVALID_ARGUMENT with nothing written. */
static int ucxdp_putv_scatter(const fx_ucx_t *u, const ucxdp_hdr_t *h, const uint8_t *data, size_t len)
{
    uint64_t n = (uint64_t)(uint32_t)h->status, list_bytes = n * 2 * sizeof(uint64_t), sum = 0;
    if (n < 1 || n > UCXDP_V_MAX_N || h->len != len || len < list_bytes) return FLUXON_ERR_INVALID_ARGUMENT;
    const uint8_t *lp = data;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t a, l;
        ucxdp_list_at(lp, j, &a, &l);
        if (!l || l > len || sum > len - list_bytes - l || !ucxdp_region_ok(u, a, l)) {
            FX_WARN("ucx: rejected PUT of %llu ranges: range %llu (%llu bytes at 0x%llx) is outside mapped "
                    "regions or the message",
                    (unsigned long long)n, (unsigned long long)j, (unsigned long long)l, (unsigned long long)a);
            return FLUXON_ERR_INVALID_ARGUMENT;
        }
        sum += l;
    }
    if (sum != len - list_bytes) return FLUXON_ERR_INVALID_ARGUMENT;
    const uint8_t *src = data + list_bytes;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t a, l;
        ucxdp_list_at(lp, j, &a, &l);
        memcpy((void *)(uintptr_t)a, src, l);
        src += l;
    }
    return FLUXON_OK;
}

static ucs_status_t ucxdp_am_putv_req(void *arg, const void *header, size_t hlen, void *data,
                                      size_t len, const ucp_am_recv_param_t *param)
{
    fx_ucx_t *u = arg;
    ucxdp_hdr_t h;
    ucxdp_tgt_t *t = ucxdp_tgt_begin(u, header, hlen, param, &h);
    if (!t) return UCS_OK;
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) { /* eager: valid during this call */
        ucxdp_tgt_reply(t, FX_UCX_AM_ID_PUT_ACK, ucxdp_putv_scatter(u, &h, data, len), NULL, 0);
        return UCS_OK;
    }
    if (h.len != len || len > (uint64_t)UCXDP_V_MAX_BYTES + UCXDP_V_MAX_N * 16u || !(t->vtmp = fx_malloc(len))) {
        ucxdp_tgt_reply(t, FX_UCX_AM_ID_PUT_ACK, t->vtmp || h.len != len ? FLUXON_ERR_INVALID_ARGUMENT : FLUXON_ERR_NOMEM,
                        NULL, 0);
        return UCS_OK; /* drops a rendezvous descriptor */
    }
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = ucxdp_tgt_recv_cb,
        .user_data = t,
    };
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(u->worker, data, t->vtmp, len, &rp);
    if (UCS_PTR_IS_PTR(r)) return UCS_OK;
    int st = UCS_PTR_STATUS(r) == UCS_OK ? ucxdp_putv_scatter(u, &h, t->vtmp, len) : ucxdp_map(UCS_PTR_STATUS(r));
    ucxdp_tgt_reply(t, FX_UCX_AM_ID_PUT_ACK, st, NULL, 0);
    return UCS_OK;
}

/* GETV: answers t with one GET_REP carrying the bytes of the ranges listed at t->vtmp (n x
 * {address, length}; an iov over the mapped regions follows the list in the same buffer and
 * lives until the reply's send completes). */
static void ucxdp_getv_serve(ucxdp_tgt_t *t, uint64_t n)
{
    fx_ucx_t *u = t->u;
    const uint8_t *lp = t->vtmp;
    ucp_dt_iov_t *iov = (ucp_dt_iov_t *)((uint8_t *)t->vtmp + n * 16);
    uint64_t sum = 0;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t a, l;
        ucxdp_list_at(lp, j, &a, &l);
        if (!l || l > UCXDP_V_MAX_BYTES || !ucxdp_region_ok(u, a, l)) {
            FX_WARN("ucx: rejected GET of %llu ranges: range %llu (%llu bytes at 0x%llx) is outside mapped regions",
                    (unsigned long long)n, (unsigned long long)j, (unsigned long long)l, (unsigned long long)a);
            ucxdp_tgt_reply(t, FX_UCX_AM_ID_GET_REP, FLUXON_ERR_INVALID_ARGUMENT, NULL, 0);
            return;
        }
        iov[j] = (ucp_dt_iov_t){(void *)(uintptr_t)a, l};
        sum += l;
    }
    if (sum != t->hdr.len) {
        ucxdp_tgt_reply(t, FX_UCX_AM_ID_GET_REP, FLUXON_ERR_INVALID_ARGUMENT, NULL, 0);
        return;
    }
    t->hdr.status = FLUXON_OK;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE,
        .cb.send = ucxdp_tgt_send_cb,
        .user_data = t,
        .datatype = ucp_dt_make_iov(),
    };
    ucs_status_ptr_t r = ucp_am_send_nbx(t->reply_ep, FX_UCX_AM_ID_GET_REP, &t->hdr, sizeof t->hdr, iov, n, &rp);
    if (UCS_PTR_IS_PTR(r)) return;
    if (UCS_PTR_IS_ERR(r)) FX_DEBUG("ucx: AM reply failed: %s", ucs_status_string(UCS_PTR_STATUS(r)));
    ucxdp_tgt_free(t);
}

static ucs_status_t ucxdp_am_getv_req(void *arg, const void *header, size_t hlen, void *data,
                                      size_t len, const ucp_am_recv_param_t *param)
{
    fx_ucx_t *u = arg;
    ucxdp_hdr_t h;
    ucxdp_tgt_t *t = ucxdp_tgt_begin(u, header, hlen, param, &h);
    if (!t) return UCS_OK;
    uint64_t n = (uint64_t)(uint32_t)h.status;
    if (n < 2 || n > UCXDP_V_MAX_N || len != n * 16) {
        ucxdp_tgt_reply(t, FX_UCX_AM_ID_GET_REP, FLUXON_ERR_INVALID_ARGUMENT, NULL, 0);
        return UCS_OK; /* drops a rendezvous descriptor */
    }
    t->getv = true;
    if (!(t->vtmp = fx_malloc(n * 16 + n * sizeof(ucp_dt_iov_t)))) {
        ucxdp_tgt_reply(t, FX_UCX_AM_ID_GET_REP, FLUXON_ERR_NOMEM, NULL, 0);
        return UCS_OK;
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) { /* eager: valid during this call */
        memcpy(t->vtmp, data, len);
        ucxdp_getv_serve(t, n);
        return UCS_OK;
    }
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = ucxdp_tgt_recv_cb,
        .user_data = t,
    };
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(u->worker, data, t->vtmp, len, &rp);
    if (UCS_PTR_IS_PTR(r)) return UCS_OK;
    if (UCS_PTR_IS_ERR(r)) ucxdp_tgt_reply(t, FX_UCX_AM_ID_GET_REP, ucxdp_map(UCS_PTR_STATUS(r)), NULL, 0);
    else ucxdp_getv_serve(t, n);
    return UCS_OK;
}

FX_INTERNAL ucs_status_t fx_ucxdp_am_set_handler(fx_ucx_t *u, unsigned id, ucp_am_recv_callback_t cb)
{
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = id,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = cb,
        .arg = u,
    };
    return ucp_worker_set_am_recv_handler(u->worker, &hp);
}

FX_INTERNAL ucs_status_t fx_ucxdp_target_init(fx_ucx_t *u)
{
    ucs_status_t st = fx_ucxdp_am_set_handler(u, FX_UCX_AM_ID_GET_REQ, ucxdp_am_get_req);
    if (st == UCS_OK) st = fx_ucxdp_am_set_handler(u, FX_UCX_AM_ID_PUT_REQ, ucxdp_am_put_req);
    if (st == UCS_OK) st = fx_ucxdp_am_set_handler(u, FX_UCX_AM_ID_PUTV_REQ, ucxdp_am_putv_req);
    if (st == UCS_OK) st = fx_ucxdp_am_set_handler(u, FX_UCX_AM_ID_GETV_REQ, ucxdp_am_getv_req);
    return st;
}

FX_INTERNAL void fx_ucxdp_target_fini(fx_ucx_t *u)
{
    while (u->tgts) ucxdp_tgt_free(u->tgts);
}
