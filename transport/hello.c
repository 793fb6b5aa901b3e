/* hello.c — the HELLO handshake shared by every role: protocol version, cluster id and
 * a constant-time comparison of the cluster token (§4 "at minimum a constant-time
 * compare"; the token never appears in logs or error messages). */
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
    if (!fx_ct_equal(b->auth.p, b->auth.len, cfg->cluster_token, strlen(cfg->cluster_token))) {
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
