/* cli_replay.h — `fluxon demo`: replays a Mooncake-format trace through the hostless API
 * as an inference engine would (issue 6). CLI-side code: public API of include/fluxon.h
 * only; compiled into the `fluxon` binary, not into the library. */
#ifndef FX_CLI_REPLAY_H
#define FX_CLI_REPLAY_H

#include <stdio.h>

/* Runs `fluxon demo [options]`. argv[0] is the sub-command ("demo"); options follow:
 *   --trace FILE          Mooncake JSONL trace [$FLUXON_TRACE, else the first of
 *                         data/conversation_trace.jsonl from the working directory,
 *                         EXEDIR/data/, EXEDIR/../data/, EXEDIR/../share/fluxon/ (make
 *                         install), ../shared/data/; none: the error names each path]
 *   --requests N          replay only the first N requests [all]
 *   --value-len BYTES     bytes of one value (one page of one TP rank) [4096]
 *   --workers N           worker threads per owner, each with its own client [2]
 *   --owners K            owners of the embedded cluster [1]
 *   --tp T                TP ranks emulated: T keys per page [1]
 *   --group-pages G       pages per atomic group [1]
 *   --speed X             replay timestamps X times faster; 0 = as fast as possible [0]
 *   --out DIR             write summary.json, timeseries.csv, latency_cdf.csv there
 *   --skip-bad-lines      skip (and count) malformed trace lines instead of failing
 *   --capacity-blocks N   size each embedded owner for N pages instead of the whole run
 *   --config FILE         join an existing cluster: an external config naming one
 *                         owner's socket; repeat once per owner (no embedded nodes)
 *   --key-prefix P        key namespace [demo]
 * Exit status: 0 the run passed (no errors, no checksum failures, counters back to
 * baseline), 1 runtime failure, 2 usage or configuration error. */
int fx_cli_replay_main(int argc, char **argv);

/* Prints every `fluxon demo` option (what `fluxon demo --help` prints) to f. */
void fx_cli_replay_usage(FILE *f);

#endif /* FX_CLI_REPLAY_H */
