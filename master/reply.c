/* reply.c — the bottom of the master's KV modules: error replies (logged at warn, counted),
 * the "sender is a registered owner" check, pre-encoded replies, and the one prologue
 * every owner batch request starts with (see mkv_batch_open in mkv.h). */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"
#include "mkv.h"

static void mkv_vfail(mkv_t *s, fx_conn_t *conn, const fx_frame_header_t *h, int status, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    s->c.error_replies++;
    FX_WARN("%s from %s: %s (%s)", fx_msg_name(h->type), fx_conn_desc(conn), msg, fluxon_status_string(status));
    if (h->req_id && fx_conn_is_open(conn)) fx_conn_reply_error(conn, h, status, "%s", msg);
}

FX_INTERNAL void mkv_fail(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mkv_vfail(s, p->conn, h, status, fmt, ap);
    va_end(ap);
}

FX_INTERNAL void mkv_fail_conn(mkv_t *s, fx_conn_t *conn, const fx_frame_header_t *h, int status, const char *fmt,
                               ...)
{
    va_list ap;
    va_start(ap, fmt);
    mkv_vfail(s, conn, h, status, fmt, ap);
    va_end(ap);
}

FX_INTERNAL master_node_t *mkv_need_node(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h)
{
    master_node_t *n = p->node;
    if (!n || !n->kv) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT,
                 "%s needs a registered owner on this connection (send REGISTER first)", fx_msg_name(h->type));
        return NULL;
    }
    return n;
}

FX_INTERNAL void mkv_send_body(master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body, size_t len)
{
    if (!h->req_id) return;
    fx_frame_header_t rh = {FX_FRAME_MAGIC, h->type, FX_FLAG_RESPONSE, (uint32_t)len, FLUXON_OK, h->req_id};
    fx_conn_send_bytes(p->conn, &rh, body);
}

FX_INTERNAL master_node_t *mkv_batch_open(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h,
                                          const mkv_batch_spec_t *spec, fx_arena_t *arena, uint64_t **cols_p)
{
    master_node_t *n = mkv_need_node(s, p, h);
    if (!n) return NULL;
    uint32_t nk = spec->keys.n;
    for (size_t a = 0; a < spec->n_arrays; a++) {
        const mkv_array_t *ar = &spec->arrays[a];
        if (ar->n == nk || (ar->optional && ar->n == 0)) continue;
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "%s from %s: %u keys but %u %s (lengths must match%s)",
                 spec->what, n->node_id, nk, ar->n, ar->name, ar->optional ? "; it may also be empty" : "");
        return NULL;
    }
    if (nk < spec->min_keys || nk > spec->max_keys) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "%s from %s: %u keys (the batch must have %u..%u keys)",
                 spec->what, n->node_id, nk, spec->min_keys, spec->max_keys);
        return NULL;
    }
    for (uint32_t i = 0; i < nk; i++) {
        fx_str_t k = spec->keys.v[i];
        if (mkv_key_ok(k) && !(spec->no_nul && memchr(k.p, 0, k.len))) continue;
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "%s from %s: key %u has %u bytes (must be 1..%u%s)",
                 spec->what, n->node_id, i, k.len, MKV_MAX_KEY, spec->no_nul ? " without NUL" : "");
        return NULL;
    }
    if (cols_p) {
        *cols_p = fx_arena_alloc(arena, (nk ? nk : 1) * FX_MAX(spec->n_cols, (size_t)1) * sizeof(uint64_t));
        if (!*cols_p) {
            mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "%s of %u keys from %s: out of memory", spec->what, nk, n->node_id);
            return NULL;
        }
    }
    return n;
}
