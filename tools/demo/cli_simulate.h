/* cli_simulate.h — `fluxon demo --simulate`: the owner's eviction policy code
 * (cache/evict_policy.c, compiled into the CLI) played offline over a trace, one block =
 * one value of one slot, so a policy's prefix-hit ratio is known in seconds without a
 * cluster (issue 15). Semantics of the reference simulator (cli_trace.h): a request looks
 * up its blocks in order (prefix hit = leading blocks present), then every block is
 * touched (present) or inserted (absent), evicting while the policy is over capacity. */
#ifndef FX_CLI_SIMULATE_H
#define FX_CLI_SIMULATE_H

#include "cli_trace.h"

typedef struct fx_cli_psim_result {
    uint64_t requests, lookups, prefix_hits, inserted, evictions;
    uint64_t copies, cpu_hits; /* with a CPU tier: values written back, blocks restored from it */
    double ratio; /* prefix_hits / lookups */
} fx_cli_psim_result;

/* policy: "lru" or "s3fifo" (NULL: lru). Returns 0; -1 on an unknown policy or out of
 * memory. capacity in blocks (> 0). cpu_capacity > 0 adds a CPU tier of that many blocks
 * (a FIFO, exclusive: a hit moves the block back) that the hot tier's victims are written
 * back to when admission (FX_WB_ADMIT_*, the owner's writeback_admission) admits them and,
 * max_depth > 0, the block sits at a position below max_depth in its request's chain (the
 * seeds' prefix-depth admission; simulator only: an owner does not know a value's position). */
int fx_cli_psim_run(const fx_cli_trace *t, size_t n_requests, uint64_t capacity, const char *policy,
                    uint64_t cpu_capacity, int admission, uint32_t max_depth, fx_cli_psim_result *out);
/* The same over a subset of the trace: requests reqs[0..n) (indexes into t->reqs, played in
 * that order), no CPU tier: what one tenant's own requests would hit alone in a cache of
 * capacity blocks (`fluxon demo --tenants`, issue 42). -1 also on an index out of range. */
int fx_cli_psim_run_reqs(const fx_cli_trace *t, const size_t *reqs, size_t n, uint64_t capacity, const char *policy,
                         fx_cli_psim_result *out);
/* 1 when name is a policy the simulator and the owner know. */
int fx_cli_psim_known(const char *policy);

#endif /* FX_CLI_SIMULATE_H */
