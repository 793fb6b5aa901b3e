/* owner_ext.h — the owner's external clients (ext.c): the unix socket, the handshake that
 * passes the segment's memfd, and per-external cleanup through hooks. */
#ifndef FX_OWNER_EXT_H
#define FX_OWNER_EXT_H

#include "owner_int.h"
#include "jsonbuf.h"

typedef struct fx_oext_hooks {
    /* a request from an external past HELLO: true when served */
    bool (*request)(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                    fx_arena_t *arena);
    void (*closed)(fx_owner_t *o, owner_ext_t *e); /* release what e holds (before it is freed) */
} fx_oext_hooks_t;

FX_INTERNAL int fx_oext_init(fx_owner_t *o, const fx_oext_hooks_t *hooks); /* listens on socket_path */
FX_INTERNAL void fx_oext_shutdown(fx_owner_t *o); /* stops accepting, closes every external */
FX_INTERNAL void fx_oext_fini(fx_owner_t *o);
FX_INTERNAL void fx_oext_metrics(fx_owner_t *o, fx_ometrics_t *m);
/* Makes c (e's socket or its ring's conn) where e's replies go; returns the previous one.
 * A request served later (held back by a test fault) is served on the conn it came from. */
FX_INTERNAL fx_conn_t *fx_oext_reply_conn(owner_ext_t *e, fx_conn_t *c);
/* C2: e named n ids (holders, get handles: `what`) the owner does not know, `first` the
 * first of them: counted; logged (on the reactor, synchronously) at most once a second per
 * external, with the count since the last line. */
FX_INTERNAL void fx_oext_unknown(fx_owner_t *o, owner_ext_t *e, const char *what, uint64_t first, uint64_t n);
/* client_limits.max_plans (issue 44 C3): true when e already holds that many put plans not
 * committed; the request h was then answered FLUXON_ERR_BUSY (naming the field and limit). */
FX_INTERNAL bool fx_oext_plans_full(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h);
/* Replies to externals by (message type, status) since the owner started. */
FX_INTERNAL const fx_reply_counts_t *fx_oext_replies(fx_owner_t *o);

#endif
