/* cli_hot.h — `fluxon --role=external --config FILE hot`: the hostless hot path in steady
 * state against a running owner (issue 18), as an engine process sees it. */
#ifndef FX_CLI_HOT_H
#define FX_CLI_HOT_H

#include "fluxon.h"

/* hot [--batch N] [--value-len B] [--iters N]: puts one batch of N keys, restores it
 * (get_start + get_transfer, then release_views untimed) --iters times, then puts
 * --iters fresh batches (put_start + commit timed; the future waited for and the keys
 * deleted untimed) and prints p50/p90/p99 of each. Exit 0, 1 on a failed call, 2 on
 * bad arguments. */
int fx_cli_hot(fluxon_client *c, int argc, char **argv);

#endif
