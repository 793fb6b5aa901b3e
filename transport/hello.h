/* hello.h — the HELLO handshake every role shares (master, owner, external) and the
 * start callback a role reports readiness with. Functions run on the caller's thread. */
#ifndef FX_HELLO_H
#define FX_HELLO_H

#include "config.h"
#include "conn.h"

/* Called once by a role when it serves (status FLUXON_OK) or failed to start. */
typedef void (*fx_ready_fn)(void *arg, int status);

/* HELLO: fill ours; check a peer's against our config. On mismatch returns
 * FLUXON_ERR_AUTH and a message naming what differed (never the token itself). */
FX_INTERNAL void fx_hello_fill(const fx_config_t *cfg, fx_role_t role, const char *node_id,
                               uint64_t generation, fx_body_hello_t *b);
FX_INTERNAL int fx_hello_check(const fx_config_t *cfg, const fx_body_hello_t *b, char *err,
                               size_t errcap);
/* Tenants (issue 42): an external whose tenant is not "default", or which has a
 * tenant_token, sends auth = cluster_token NUL tenant NUL tenant_token (a token holds no
 * NUL), so a default client's HELLO is byte for byte what it was. fill_tenant builds it in
 * buf (cap >= FX_HELLO_AUTH_MAX); fx_hello_tenant reads it back (views into b): "default"
 * and "" when auth has no NUL; an empty tenant when it is malformed. */
#define FX_HELLO_AUTH_MAX (2 * FX_TOKEN_MAX + FX_TENANT_NAME_MAX + 2)
FX_INTERNAL void fx_hello_fill_tenant(const fx_config_t *cfg, fx_body_hello_t *b, char *buf, size_t cap);
FX_INTERNAL void fx_hello_tenant(const fx_body_hello_t *b, fx_str_t *tenant, fx_str_t *token);

#endif
