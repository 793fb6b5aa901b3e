/* hello.c — the HELLO handshake shared by every role: protocol version, cluster id and
 * a constant-time comparison of the cluster token (§4 "at minimum a constant-time
 * compare"; the token never appears in logs or error messages). An external of a tenant
 * (issue 42) appends its tenant and token to `auth`, NUL-separated (hello.h). */
#include <stdio.h>

#include "hello.h"

FX_INTERNAL void fx_hello_fill(const fx_config_t *cfg, fx_role_t role, const char *node_id,
                               uint64_t generation, fx_body_hello_t *b)
{
    b->proto_version = FX_PROTOCOL_VERSION;
    b->cluster_id = fx_str_c(cfg->cluster_id);
    b->role = (uint8_t)role;
    b->node_id = fx_str_c(node_id);
    b->generation = generation;
    b->auth = fx_str_c(cfg->cluster_token);
}

FX_INTERNAL int fx_hello_check(const fx_config_t *cfg, const fx_body_hello_t *b, char *err,
                               size_t errcap)
{
    if (b->proto_version != FX_PROTOCOL_VERSION) {
        snprintf(err, errcap, "protocol version %u is not supported (this node speaks %u)",
                 b->proto_version, FX_PROTOCOL_VERSION);
        return FLUXON_ERR_AUTH;
    }
    if (!fx_str_eq(b->cluster_id, cfg->cluster_id)) {
        snprintf(err, errcap, "cluster id \"%.*s\" does not match this cluster (\"%s\")",
                 (int)FX_MIN(b->cluster_id.len, 64u), b->cluster_id.p ? b->cluster_id.p : "",
                 cfg->cluster_id);
        return FLUXON_ERR_AUTH;
    }
    /* the cluster token: auth up to its first NUL; what follows is an external's tenant */
    const char *nul = b->auth.len ? memchr(b->auth.p, 0, b->auth.len) : NULL;
    uint32_t clen = nul ? (uint32_t)(nul - b->auth.p) : b->auth.len;
    if (!fx_ct_equal(b->auth.p, clen, cfg->cluster_token, strlen(cfg->cluster_token)) ||
        (nul && b->role != FX_ROLE_EXTERNAL)) {
        snprintf(err, errcap, "cluster token does not match");
        return FLUXON_ERR_AUTH;
    }
    if (b->role < FX_ROLE_MASTER || b->role > FX_ROLE_EXTERNAL) {
        snprintf(err, errcap, "unknown role %u", b->role);
        return FLUXON_ERR_AUTH;
    }
    if (b->node_id.len == 0 || b->node_id.len >= FX_ID_MAX) {
        snprintf(err, errcap, "node id of %u bytes (must be 1..%d)", b->node_id.len, FX_ID_MAX - 1);
        return FLUXON_ERR_AUTH;
    }
    return FLUXON_OK;
}

FX_INTERNAL void fx_hello_fill_tenant(const fx_config_t *cfg, fx_body_hello_t *b, char *buf, size_t cap)
{
    if (!strcmp(cfg->tenant, FX_TENANT_DEFAULT) && !cfg->tenant_token[0]) return; /* as before issue 42 */
    size_t cl = strlen(cfg->cluster_token), tl = strlen(cfg->tenant), kl = strlen(cfg->tenant_token);
    FX_ASSERT(cl + tl + kl + 2 <= cap);
    memcpy(buf, cfg->cluster_token, cl);
    buf[cl] = 0;
    memcpy(buf + cl + 1, cfg->tenant, tl);
    buf[cl + 1 + tl] = 0;
    memcpy(buf + cl + tl + 2, cfg->tenant_token, kl);
    b->auth = (fx_str_t){buf, (uint32_t)(cl + tl + kl + 2)};
}

FX_INTERNAL void fx_hello_tenant(const fx_body_hello_t *b, fx_str_t *tenant, fx_str_t *token)
{
    *tenant = fx_str_c(FX_TENANT_DEFAULT);
    *token = (fx_str_t){"", 0};
    const char *p = b->auth.len ? memchr(b->auth.p, 0, b->auth.len) : NULL;
    if (!p) return;
    const char *end = b->auth.p + b->auth.len, *t = p + 1;
    const char *q = memchr(t, 0, (size_t)(end - t));
    if (!q) { /* malformed: a tenant no configuration names */
        *tenant = (fx_str_t){"", 0};
        return;
    }
    *tenant = (fx_str_t){t, (uint32_t)(q - t)};
    *token = (fx_str_t){q + 1, (uint32_t)(end - q - 1)};
}
