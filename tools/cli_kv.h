/* cli_kv.h — `fluxon --role=external` KV commands: put, get, del, pin, ls, stats. */
#ifndef FX_CLI_KV_H
#define FX_CLI_KV_H
#include "fluxon.h"
/* exit status of a write whose outcome is not known yet (FLUXON_ERR_UNKNOWN_OUTCOME) */
#define FX_CLI_EXIT_UNKNOWN 3
/* Each takes the arguments after the command name; returns the exit status. */
int fx_cli_put(fluxon_client *c, int argc, char **argv);
int fx_cli_get(fluxon_client *c, int argc, char **argv);
int fx_cli_del(fluxon_client *c, int argc, char **argv);
int fx_cli_pin(fluxon_client *c, int argc, char **argv);
int fx_cli_ls(fluxon_client *c, int argc, char **argv);
int fx_cli_stats(fluxon_client *c, int argc, char **argv);
int fx_cli_master_stats(fluxon_client *c, int argc, char **argv);
int fx_cli_tenant(fluxon_client *c, int argc, char **argv); /* cli_tenant.c: tenant set (issue 42) */
#endif
