/* config_defaults.c — the per-role defaults of a configuration (ARCHITECTURE §11), set
 * before config.c reads the file's fields over them; the environment variables that only
 * move a default (FLUXON_RING_POLL_US, FLUXON_MASTER_POLL_US, FLUXON_CLIENT_POLL_US,
 * FLUXON_CLIENT_TRANSPORT) are read here. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* An environment variable that moves a default of microseconds: def when unset, or (with a
 * warning) when it is not an integer in 0..CFG_RING_POLL_MAX; *set (may be NULL): it was used. */
static uint32_t cfg_env_us(const char *name, uint32_t def, bool *set)
{
    const char *p = getenv(name);
    char *end = NULL;
    long n = p ? strtol(p, &end, 10) : -1;
    if (p && (!*p || *end || !(*p >= '0' && *p <= '9') || n < 0 || n > CFG_RING_POLL_MAX)) {
        FX_WARN("%s=%s is not an integer in 0..%u (microseconds): ignored (the default)", name, p, CFG_RING_POLL_MAX);
        n = -1;
    }
    if (set) *set = n >= 0;
    return n >= 0 ? (uint32_t)n : def;
}

FX_INTERNAL void fx_config_defaults(fx_config_t *cfg, fx_role_t role)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->role = role;
    cfg->log_level = FX_LOG_INFO;
    cfg->start_timeout_ms = 10000;
    cfg->max_frame_bytes = 64ull << 20;
    if (role == FX_ROLE_MASTER) {
        fx_strlcpy(cfg->listen_host, "127.0.0.1", sizeof cfg->listen_host);
        cfg->listen_port = 7600;
        cfg->inflight_ttl_ms = 60000;
        cfg->heartbeat_timeout_ms = 3000;
        cfg->dead_owner_grace_ms = 600000;
        cfg->range_quarantine_ms = FX_RANGE_QUARANTINE_AUTO;
        cfg->range_reuse_delay_ms = 4;
        cfg->idle_poll_us = cfg_env_us("FLUXON_MASTER_POLL_US", FX_MASTER_POLL_DEFAULT_US, NULL);
        cfg->replica_target_roles = 1u << FX_NODE_REMOTE_CACHE;
        cfg->ha_lease_ttl_ms = 5000;
    } else if (role == FX_ROLE_OWNER) {
        fx_strlcpy(cfg->master_host, "127.0.0.1", sizeof cfg->master_host);
        cfg->master_port = 7600;
        cfg->segment_bytes = 1ull << 30;
        cfg->node_role = FX_NODE_GPU_OWNER;
        cfg->numa_node = -1;
        cfg->grant_bytes = 512ull << 20;
        cfg->hot_capacity_ratio = 0.95;
        cfg->pin_budget_ratio = 0.5; /* issue 42: pins never take more than half the hot tier */
        cfg->handle_ttl_ms = 30000;
        cfg->client_max_handles = 4096; /* issue 44 C3 */
        cfg->client_max_plans = 1024;
        cfg->client_pin_expire_ms = 600000;
        cfg->put_plan_ttl_ms = 20000; /* below the client's default timeout_ms (30000) */
        cfg->heartbeat_interval_ms = 1000;
        cfg->claim_timeout_ms = 30000;
        cfg->idle_grant_return_ms = 2000;
        cfg->eviction_policy = FX_EVICT_S3FIFO; /* beats lru on the conversation trace (issue 15) */
        cfg->writeback_admission = FX_WB_ADMIT_SECOND_TOUCH; /* issue 38: 29 % of the copies, 28.4 of 28.8 % hits */
        cfg->master_timeout_ms = 5000;
        cfg->fault_count = 1;
        cfg->ha_lease_ttl_ms = 5000;
        /* issue 18: poll the externals' rings this long after the last request or reply
         * (env FLUXON_RING_POLL_US sets the default, the field overrides it). The window
         * through an engine's writes (ring_poll_plan_us) costs a core while a client holds
         * a plan: by default only where the reactor can have one to itself
         * (FX_RING_POLL_MIN_CPUS) or where ring_poll_us was chosen (cfg_finish) */
        bool set = false;
        cfg->ring_poll_us = cfg_env_us("FLUXON_RING_POLL_US", FX_RING_POLL_DEFAULT_US, &set);
        cfg->ring_poll_plan_us = set || sysconf(_SC_NPROCESSORS_ONLN) >= FX_RING_POLL_MIN_CPUS
                                     ? FX_RING_POLL_PLAN_DEFAULT_US
                                     : 0;
    } else {
        cfg->timeout_ms = 30000;
        fx_strlcpy(cfg->tenant, FX_TENANT_DEFAULT, sizeof cfg->tenant);
        cfg->idle_poll_us = cfg_env_us("FLUXON_CLIENT_POLL_US", FX_CLIENT_POLL_DEFAULT_US, NULL);
        cfg->prefault_segment = true;
        /* issue 18: the shared-memory rings unless the environment picks the socket (the
         * test suites run both ways); the config field "transport" overrides both */
        const char *t = getenv("FLUXON_CLIENT_TRANSPORT");
        cfg->transport_socket = t && strcmp(t, "socket") == 0;
        if (t && *t && !cfg->transport_socket && strcmp(t, "ring"))
            FX_WARN("FLUXON_CLIENT_TRANSPORT=%s is neither ring nor socket: ignored (ring)", t);
    }
}
