/* cli_metrics.h — GET /metrics over HTTP for the nodes this process runs (the fluxon
 * binary's side of "metrics_listen" and `fluxon demo --metrics-listen`). The HTTP server
 * is libmicrohttpd's own thread; each scrape calls fluxon_nodes_metrics, which asks the
 * nodes' reactors for a snapshot and renders it on that thread, never blocking them.
 * It lives in tools/ so the embeddable library does not depend on libmicrohttpd. */
#ifndef FX_CLI_METRICS_H
#define FX_CLI_METRICS_H

#include <stdint.h>

#include "fluxon.h"

typedef struct fx_cli_metrics fx_cli_metrics;

/* Listens on `listen` ("host:port"; port 0 = any free port) and serves the n nodes (kept
 * borrowed: stop the server before stopping them). `field` names the setting in messages
 * ("metrics_listen", "--metrics-listen"). On success prints
 * "fluxon: metrics on http://HOST:PORT/metrics" to stderr and returns the server (and its
 * bound port in *port_p when not NULL); NULL after a message naming the field, the value
 * and why (bad address, port in use). */
fx_cli_metrics *fx_cli_metrics_start(const char *field, const char *listen, fluxon_node *const *nodes, size_t n,
                                     uint16_t *port_p);
/* Stops the server (in-flight scrapes finish first). NULL is a no-op. */
void fx_cli_metrics_stop(fx_cli_metrics *s);

#endif
