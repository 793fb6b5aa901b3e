/* cli_bench.h — benchmark sub-commands of the CLI (public API only). */
#ifndef FX_CLI_BENCH_H
#define FX_CLI_BENCH_H
/* fluxon bench-hostless [--batch N] [--value-len B] [--iters N] */
int fx_cli_bench_hostless(int argc, char **argv);
/* fluxon bench-kv [--value-len B] [--count N] */
int fx_cli_bench_kv(int argc, char **argv);
/* fluxon bench-batch [--batch N] [--value-len B] [--iters N] */
int fx_cli_bench_batch(int argc, char **argv);
#endif
