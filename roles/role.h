/* role.h — what every role instance (master, owner) offers to the embedding layer
 * (node.c) and the pieces of the HELLO handshake they share. A role instance lives on
 * one reactor thread; all functions below run on that thread. */
#ifndef FX_ROLE_H
#define FX_ROLE_H

#include "config.h"
#include "conn.h"

/* Called once by a role when it serves (status FLUXON_OK) or failed to start. */
typedef void (*fx_ready_fn)(void *arg, int status);

typedef struct fx_master fx_master_t;
FX_INTERNAL int fx_master_create(fx_reactor_t *r, const fx_config_t *cfg, fx_ready_fn ready,
                                 void *ready_arg, fx_master_t **m_p);
FX_INTERNAL void fx_master_shutdown(fx_master_t *m); /* close listeners and connections */
FX_INTERNAL void fx_master_destroy(fx_master_t *m);
FX_INTERNAL uint16_t fx_master_port(const fx_master_t *m);

typedef struct fx_owner fx_owner_t;
FX_INTERNAL int fx_owner_create(fx_reactor_t *r, const fx_config_t *cfg, fx_ready_fn ready,
                                void *ready_arg, fx_owner_t **o_p);
FX_INTERNAL void fx_owner_shutdown(fx_owner_t *o);
FX_INTERNAL void fx_owner_destroy(fx_owner_t *o);

/* HELLO: fill ours; check a peer's against our config. On mismatch returns
 * FLUXON_ERR_AUTH and a message naming what differed (never the token itself). */
FX_INTERNAL void fx_hello_fill(const fx_config_t *cfg, fx_role_t role, const char *node_id,
                               uint64_t generation, fx_body_hello_t *b);
FX_INTERNAL int fx_hello_check(const fx_config_t *cfg, const fx_body_hello_t *b, char *err,
                               size_t errcap);

#define FX_MASTER_RPC_TIMEOUT_MS 5000u

#endif
