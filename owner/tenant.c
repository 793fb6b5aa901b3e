/* tenant.c — tenants (issue 42): which tenant an external belongs to (checked at HELLO
 * against "tenants", tokens compared in constant time and never logged), and the
 * namespace of its keys: every key an external sends is checked and, for a tenant other
 * than "default", prefixed with FLUXON_TENANT_KEY_MARK "T/" before any handler sees it;
 * LIST answers are filtered to the client's namespace and stripped. See owner_tenant.h. */
#include <stdio.h>

#include "hello.h"
#include "log.h"
#include "owner_link.h"
#include "owner_tenant.h"

typedef struct otenant {
    uint32_t n;                              /* table entries: cfg.tenants, then "default" if not listed */
    fx_tenant_snap_t t[FX_TENANT_SNAP_MAX];  /* name, clients connected, refusals at HELLO */
    const char *token[FX_TENANT_SNAP_MAX];   /* into o->cfg ("" for an unlisted "default") */
    uint64_t refused;                        /* every refusal at HELLO (unknown tenants too) */
    uint64_t key_refusals;                   /* requests refused for a key (mark, empty, too long) */
    int dflt;                                /* the index of "default" */
} otenant_t;

/* the greatest possible first bytes of a tenant's key: the mark, then a name character
 * (all below 0x7f); a default LIST from the start begins after it */
static const char tn_after_tenants[2] = {FLUXON_TENANT_KEY_MARK, 0x7f};

FX_INTERNAL int fx_otenant_init(fx_owner_t *o)
{
    otenant_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    bool has_default = false;
    for (uint32_t i = 0; i < o->cfg.n_tenants; i++) {
        if (!strcmp(o->cfg.tenants[i].name, FX_TENANT_DEFAULT)) s->dflt = (int)s->n;
        fx_strlcpy(s->t[s->n].name, o->cfg.tenants[i].name, sizeof s->t[0].name);
        s->t[s->n].disk_quota_bytes = o->cfg.tenants[i].disk_quota_bytes; /* issue 42: disk.c keeps it */
        s->token[s->n++] = o->cfg.tenants[i].token;
        has_default |= !strcmp(o->cfg.tenants[i].name, FX_TENANT_DEFAULT);
    }
    if (!has_default) {
        s->dflt = (int)s->n;
        fx_strlcpy(s->t[s->n].name, FX_TENANT_DEFAULT, sizeof s->t[0].name);
        s->token[s->n++] = "";
    }
    o->tenant = s;
    return FLUXON_OK;
}

FX_INTERNAL void fx_otenant_fini(fx_owner_t *o)
{
    fx_free(o->tenant);
    o->tenant = NULL;
}

FX_INTERNAL void fx_otenant_refused(fx_owner_t *o) { o->tenant->refused++; }

FX_INTERNAL int fx_otenant_hello(fx_owner_t *o, owner_ext_t *e, const fx_body_hello_t *b, char *err, size_t cap)
{
    otenant_t *s = o->tenant;
    fx_str_t name, token;
    fx_hello_tenant(b, &name, &token);
    int k = -1;
    for (uint32_t i = 0; i < s->n && k < 0; i++)
        if (fx_str_eq(name, s->t[i].name)) k = (int)i;
    int shown = (int)FX_MIN(name.len, (uint32_t)FX_TENANT_NAME_MAX);
    bool name_ok = fx_tenant_name_ok(name.p, name.len);
    if (k < 0) {
        s->refused++; /* an unknown name is never a label: counted in the total only */
        snprintf(err, cap, "tenant \"%.*s\" is not known to this owner (its \"tenants\")%s", name_ok ? shown : 0,
                 name_ok ? name.p : "", name_ok ? "" : ": not a tenant name ([A-Za-z0-9_.-], 1..32 bytes)");
        return FLUXON_ERR_AUTH;
    }
    const char *want = s->token[k];
    if (!fx_ct_equal(token.p, token.len, want, strlen(want))) {
        s->refused++;
        s->t[k].auth_failures++;
        snprintf(err, cap, "tenant \"%s\": %s", s->t[k].name,
                 want[0] ? "tenant_token does not match" : "this tenant takes no tenant_token");
        return FLUXON_ERR_AUTH;
    }
    e->tenant = k;
    e->tag_len = 0;
    if (strcmp(s->t[k].name, FX_TENANT_DEFAULT)) {
        size_t nl = strlen(s->t[k].name);
        e->tag[0] = FLUXON_TENANT_KEY_MARK;
        memcpy(e->tag + 1, s->t[k].name, nl);
        e->tag[nl + 1] = '/';
        e->tag_len = (uint8_t)(nl + 2);
    }
    s->t[k].clients++;
    return FLUXON_OK;
}

FX_INTERNAL void fx_otenant_closed(fx_owner_t *o, owner_ext_t *e)
{
    if (e->tenant >= 0 && o->tenant->t[e->tenant].clients) o->tenant->t[e->tenant].clients--;
    e->tenant = -1;
}

FX_INTERNAL uint32_t fx_otenant_count(fx_owner_t *o) { return o->tenant->n; }

FX_INTERNAL int fx_otenant_find(fx_owner_t *o, fx_str_t name)
{
    for (uint32_t i = 0; i < o->tenant->n; i++)
        if (fx_str_eq(name, o->tenant->t[i].name)) return (int)i;
    return -1;
}

FX_INTERNAL bool fx_otenant_has_token(fx_owner_t *o, int k) { return o->tenant->token[k][0] != 0; }
FX_INTERNAL fx_tenant_snap_t *fx_otenant_at(fx_owner_t *o, int k) { return &o->tenant->t[k]; }

FX_INTERNAL int fx_otenant_of_key(fx_owner_t *o, const char *key, uint32_t klen)
{
    otenant_t *s = o->tenant;
    if (!klen || key[0] != FLUXON_TENANT_KEY_MARK) return s->dflt;
    const char *slash = memchr(key + 1, '/', FX_MIN((size_t)klen - 1, (size_t)FX_TENANT_NAME_MAX));
    if (!slash) return -1;
    size_t nl = (size_t)(slash - key - 1);
    for (uint32_t i = 0; i < s->n; i++)
        if (!strncmp(s->t[i].name, key + 1, nl) && s->t[i].name[nl] == 0) return (int)i;
    return -1;
}

/* ---- keys ---- */

static const char *tn_name(fx_owner_t *o, owner_ext_t *e) { return o->tenant->t[e->tenant].name; }

/* Checks key i of a request of e; FLUXON_OK or INVALID_ARGUMENT with err. */
static int tn_key_check(fx_owner_t *o, owner_ext_t *e, const char *what, uint32_t i, fx_str_t k, char *err,
                        size_t cap)
{
    if (k.len && k.p[0] == FLUXON_TENANT_KEY_MARK) {
        snprintf(err, cap, "%s: key %u starts with byte 0x01 (FLUXON_TENANT_KEY_MARK, reserved for tenants' namespaces)",
                 what, i);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (!e->tag_len) return FLUXON_OK; /* "default": checked below as before */
    if (!k.len) {
        snprintf(err, cap, "%s: key %u is empty (keys are 1..%d bytes)", what, i, FLUXON_MAX_KEY_BYTES);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (k.len + e->tag_len > FLUXON_MAX_KEY_BYTES) {
        snprintf(err, cap,
                 "%s: key %u of %u bytes is longer than %u bytes, the most for tenant \"%s\" (FLUXON_MAX_KEY_BYTES %d "
                 "less its %u-byte namespace prefix)",
                 what, i, k.len, FLUXON_MAX_KEY_BYTES - e->tag_len, tn_name(o, e), FLUXON_MAX_KEY_BYTES, e->tag_len);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    return FLUXON_OK;
}

/* k with e's prefix, in arena (NULL: out of memory) */
static bool tn_prefix(owner_ext_t *e, fx_str_t *k, fx_arena_t *arena)
{
    char *p = fx_arena_alloc(arena, (size_t)e->tag_len + k->len + 1);
    if (!p) return false;
    memcpy(p, e->tag, e->tag_len);
    if (k->len) memcpy(p + e->tag_len, k->p, k->len);
    k->p = p;
    k->len += e->tag_len;
    return true;
}

/* every key of v checked; prefixed (a new array in arena) for a tenant */
static int tn_keys(fx_owner_t *o, owner_ext_t *e, const char *what, fx_strv_t *v, fx_arena_t *arena, char *err,
                   size_t cap)
{
    for (uint32_t i = 0; i < v->n; i++) {
        int rc = tn_key_check(o, e, what, i, v->v[i], err, cap);
        if (rc != FLUXON_OK) return rc;
    }
    if (!e->tag_len || !v->n) return FLUXON_OK;
    fx_str_t *nv = fx_arena_alloc(arena, v->n * sizeof *nv);
    if (!nv) goto nomem;
    for (uint32_t i = 0; i < v->n; i++) {
        nv[i] = v->v[i];
        if (!tn_prefix(e, &nv[i], arena)) goto nomem;
    }
    v->v = nv;
    return FLUXON_OK;
nomem:
    snprintf(err, cap, "%s: owner out of memory for %u keys", what, v->n);
    return FLUXON_ERR_NOMEM;
}

static int tn_key(fx_owner_t *o, owner_ext_t *e, const char *what, fx_str_t *k, fx_arena_t *arena, char *err,
                  size_t cap)
{
    int rc = tn_key_check(o, e, what, 0, *k, err, cap);
    if (rc != FLUXON_OK || !e->tag_len) return rc;
    if (tn_prefix(e, k, arena)) return FLUXON_OK;
    snprintf(err, cap, "%s: owner out of memory", what);
    return FLUXON_ERR_NOMEM;
}

/* ---- LIST ---- */

/* The master's LIST answer to a client of namespace tag: its keys only, without the prefix
 * (the default namespace: keys that do not start with the mark). */
static void tn_list_relay(fx_conn_t *ext, const fx_frame_header_t *rh, const uint8_t *body, fx_arena_t *arena,
                          const char *tag, size_t tag_len)
{
    fx_body_keys_t b;
    if (rh->status != FLUXON_OK || fx_body_keys_decode(body, rh->body_len, &b, arena) != FLUXON_OK) {
        fx_conn_send_bytes(ext, rh, body);
        return;
    }
    fx_str_t *v = fx_arena_alloc(arena, (b.keys.n ? b.keys.n : 1) * sizeof *v);
    if (!v) {
        fx_conn_reply_error(ext, rh, FLUXON_ERR_NOMEM, "list: owner out of memory");
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < b.keys.n; i++) {
        fx_str_t k = b.keys.v[i];
        if (!tag_len) {
            if (!k.len || k.p[0] != FLUXON_TENANT_KEY_MARK) v[n++] = k;
        } else if (k.len > tag_len && !memcmp(k.p, tag, tag_len)) {
            v[n++] = (fx_str_t){k.p + tag_len, (uint32_t)(k.len - tag_len)};
        }
    }
    fx_body_keys_t out = {{v, n}};
    FX_CONN_SEND(ext, rh->type, FX_FLAG_RESPONSE, FLUXON_OK, rh->req_id, keys, &out);
}

/* memcmp order, a proper prefix first (the master's LIST order, cache/prefix_index.h) */
static int tn_cmp(fx_str_t a, const char *b, size_t bl)
{
    int c = a.len && bl ? memcmp(a.p, b, FX_MIN((size_t)a.len, bl)) : 0;
    return c ? c : (a.len > bl) - (a.len < bl);
}

static bool tn_list(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena,
                    char *err, size_t cap, int *rc_p)
{
    fx_body_list_t b;
    if (fx_body_list_decode(body, h->body_len, &b, arena) != FLUXON_OK) return false; /* the handler answers */
    if (b.prefix.len && b.prefix.p[0] == FLUXON_TENANT_KEY_MARK) {
        snprintf(err, cap, "list: prefix starts with byte 0x01 (FLUXON_TENANT_KEY_MARK, reserved for tenants)");
        *rc_p = FLUXON_ERR_INVALID_ARGUMENT;
        return true;
    }
    if (!e->tag_len) { /* the default namespace: past every tenant's keys */
        if (!b.prefix.len && tn_cmp(b.after, tn_after_tenants, sizeof tn_after_tenants) < 0)
            b.after = (fx_str_t){tn_after_tenants, 2};
    } else {
        if (!tn_prefix(e, &b.prefix, arena) || (b.after.len && !tn_prefix(e, &b.after, arena))) {
            snprintf(err, cap, "list: owner out of memory");
            *rc_p = FLUXON_ERR_NOMEM;
            return true;
        }
    }
    size_t bl = fx_body_list_size(&b);
    uint8_t *nb = fx_arena_alloc(arena, bl ? bl : 1);
    if (!nb) {
        snprintf(err, cap, "list: owner out of memory");
        *rc_p = FLUXON_ERR_NOMEM;
        return true;
    }
    fx_body_list_encode(&b, nb);
    fx_frame_header_t nh = *h;
    nh.body_len = (uint32_t)bl;
    fx_olink_forward_relay(o, e->conn, &nh, nb, tn_list_relay, e->tag, e->tag_len);
    *rc_p = FLUXON_OK;
    return true;
}

/* ---- the request filter ---- */

#define TN_REENCODE(kind, bp)                                                                         \
    do {                                                                                              \
        if (!e->tag_len) return true;                                                                 \
        size_t bl_ = fx_body_##kind##_size(bp);                                                       \
        uint8_t *nb_ = fx_arena_alloc(arena, bl_ ? bl_ : 1);                                          \
        if (!nb_) {                                                                                   \
            rc = FLUXON_ERR_NOMEM;                                                                    \
            snprintf(err, sizeof err, "%s: owner out of memory", what);                               \
            goto refuse;                                                                              \
        }                                                                                             \
        fx_body_##kind##_encode(bp, nb_);                                                             \
        h->body_len = (uint32_t)bl_;                                                                  \
        *body_p = nb_;                                                                                \
        return true;                                                                                  \
    } while (0)

FX_INTERNAL bool fx_otenant_request(fx_owner_t *o, owner_ext_t *e, fx_frame_header_t *h, const uint8_t **body_p,
                                    fx_arena_t *arena)
{
    const uint8_t *body = *body_p;
    const char *what = fx_msg_name(h->type);
    char err[320];
    int rc = FLUXON_OK;
    switch (h->type) {
    case FX_MSG_PUT_START: {
        fx_body_put_start_t b;
        if (fx_body_put_start_decode(body, h->body_len, &b, arena) != FLUXON_OK) return true;
        if ((rc = tn_keys(o, e, "put_start", &b.keys, arena, err, sizeof err)) != FLUXON_OK) goto refuse;
        TN_REENCODE(put_start, &b);
    }
    case FX_MSG_GET_START: {
        fx_body_get_start_t b;
        if (fx_body_get_start_decode(body, h->body_len, &b, arena) != FLUXON_OK) return true;
        if ((rc = tn_keys(o, e, "get_start", &b.keys, arena, err, sizeof err)) != FLUXON_OK) goto refuse;
        TN_REENCODE(get_start, &b);
    }
    case FX_MSG_EXISTS:
    case FX_MSG_PREFETCH: { /* issue 39: one-way, a refusal is counted, never answered */
        fx_body_keys_t b;
        if (fx_body_keys_decode(body, h->body_len, &b, arena) != FLUXON_OK) return true;
        if ((rc = tn_keys(o, e, h->type == FX_MSG_EXISTS ? "exists" : "prefetch", &b.keys, arena, err, sizeof err)) != FLUXON_OK) goto refuse;
        TN_REENCODE(keys, &b);
    }
    case FX_MSG_PUT_INLINE: {
        fx_body_put_inline_t b;
        if (fx_body_put_inline_decode(body, h->body_len, &b, arena) != FLUXON_OK) return true;
        if ((rc = tn_key(o, e, "put", &b.key, arena, err, sizeof err)) != FLUXON_OK) goto refuse;
        TN_REENCODE(put_inline, &b);
    }
    case FX_MSG_DELETE: {
        fx_body_key_t b;
        if (fx_body_key_decode(body, h->body_len, &b, arena) != FLUXON_OK) return true;
        if ((rc = tn_key(o, e, "delete", &b.key, arena, err, sizeof err)) != FLUXON_OK) goto refuse;
        TN_REENCODE(key, &b);
    }
    case FX_MSG_PIN: { /* issue 42 */
        fx_body_pin_t b;
        if (fx_body_pin_decode(body, h->body_len, &b, arena) != FLUXON_OK) return true;
        if ((rc = tn_keys(o, e, "pin", &b.keys, arena, err, sizeof err)) != FLUXON_OK) goto refuse;
        TN_REENCODE(pin, &b);
    }
    case FX_MSG_LIST:
        if (!tn_list(o, e, h, body, arena, err, sizeof err, &rc)) return true;
        if (rc == FLUXON_OK) return false;
        goto refuse;
    default: return true; /* no keys (ids of e's own plans, handles and holders; stats; leases) */
    }
refuse:
    if (rc == FLUXON_ERR_INVALID_ARGUMENT) o->tenant->key_refusals++;
    if (h->req_id) fx_conn_reply_error(e->conn, h, rc, "%s", err);
    return false;
}

#undef TN_REENCODE

FX_INTERNAL void fx_otenant_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    m->tenant_auth_failures = o->tenant->refused;
    m->tenant_key_refusals = o->tenant->key_refusals;
}

FX_INTERNAL uint32_t fx_otenant_snap(fx_owner_t *o, fx_tenant_snap_t *out)
{
    memcpy(out, o->tenant->t, o->tenant->n * sizeof *out);
    return o->tenant->n;
}
