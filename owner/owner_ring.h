/* owner_ring.h — the owner's side of one external's shared-memory rings (ext_ring.c, issue
 * 18; layout and the hostile-safe readers in transport/ring.h). Requests read from the
 * ring are fed, exactly as received bytes are, into a socketless conn (fx_conn_new_sink):
 * the same validation and dispatch as the socket, and the handlers' replies come back
 * through its sink into the caller's completion slot. Frames that are not replies (the
 * PUBLISHED notifications) go out on the external's socket. Reactor thread only. */
#ifndef FX_OWNER_RING_H
#define FX_OWNER_RING_H

#include "owner_int.h"

typedef struct owner_ring owner_ring_t;

/* A ring for one external: requests reach ops->on_request on a sink conn whose ud is ud;
 * notifications go to sock (referenced until the ring is freed). *memfd_p: the region's
 * memfd to pass to the client (the caller closes it once sent), *efd_p: the doorbell
 * (the ring keeps its own; pass it, do not close it). NULL when rings are unavailable
 * (logged): the external then uses the socket. */
FX_INTERNAL owner_ring_t *fx_oring_new(fx_owner_t *o, fx_conn_t *sock, const fx_conn_ops_t *ops, void *ud,
                                       int *memfd_p, int *efd_p);
FX_INTERNAL fx_conn_t *fx_oring_conn(const owner_ring_t *g);
/* Polling (owner field ring_poll_us; ext.c drives it from a reactor idle hook): once
 * set_polled, a doorbell wake leaves the doorbell disarmed and writes the time into
 * *last_ns (which outlives the ring's serving), as does each reply or PUBLISHED it
 * sends; fx_oring_poll serves what is there with the doorbell disarmed, fx_oring_park
 * arms it and takes a last look. Both return true when they served something; neither
 * does anything on a closed ring. */
FX_INTERNAL void fx_oring_set_polled(owner_ring_t *g, uint64_t *last_ns);
/* The histogram each request taken from g observes its wait in: posted to taken (the owner's
 * ring_wait; NULL: none). */
FX_INTERNAL void fx_oring_set_wait_hist(owner_ring_t *g, fx_hist_t *h);
FX_INTERNAL bool fx_oring_poll(owner_ring_t *g);
FX_INTERNAL bool fx_oring_park(owner_ring_t *g);
/* Starts reading the doorbell (after the client got the fds). */
FX_INTERNAL void fx_oring_start(owner_ring_t *g);
/* Stops serving and closes the ring's conn (its on_close runs with FLUXON_ERR_CANCELLED);
 * the ring frees itself once its doorbell read completed. */
FX_INTERNAL void fx_oring_close(owner_ring_t *g);

#endif
