/* cli_top.h — `fluxon --role=external --config F top`: a live terminal view of the cluster. */
#ifndef FX_CLI_TOP_H
#define FX_CLI_TOP_H

#include "fluxon.h"

/* top [--once] [--iterations N] [--interval-ms MS]: redraws every interval (1000 ms) until
 * q or Ctrl-C, or N frames; 0 ok, 1 a stats call failed, 2 usage. */
int fx_cli_top(fluxon_client *c, int argc, char **argv);

#endif
