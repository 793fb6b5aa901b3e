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

#endif
