/* config.c — loads one role's JSON configuration (cJSON) into fx_config_t: applies the
 * per-role defaults of ARCHITECTURE §11, rejects unknown fields and wrong types, checks
 * every value and the owner's segment/grant/expected-capacity rules (§6). See config.h. This
 * file: the field tables, the sections and the per-role checks; the context, error messages
 * and typed value readers are in config_read.c (config_int.h). */
#include "config_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"

#define CFG_NUMA_MAX 1023
#define CFG_FILE_MAX (16u << 20)
#define CFG_M (1u << FX_ROLE_MASTER)
#define CFG_O (1u << FX_ROLE_OWNER)
#define CFG_E (1u << FX_ROLE_EXTERNAL)

/* Top-level keys, in the order of cfg_top_fields. */
enum {
    CFG_K_ROLE, CFG_K_CLUSTER_ID, CFG_K_TOKEN, CFG_K_LOG_LEVEL, CFG_K_START_TIMEOUT,
    CFG_K_MAX_FRAME, CFG_K_LISTEN, CFG_K_METRICS, CFG_K_INFLIGHT_TTL, CFG_K_HB_TIMEOUT,
    CFG_K_NODE_ID, CFG_K_MASTER, CFG_K_SOCKET, CFG_K_SEGMENT, CFG_K_NODE_ROLE, CFG_K_NUMA,
    CFG_K_RESERVE, CFG_K_HOT_RATIO, CFG_K_HANDLE_TTL, CFG_K_HB_INTERVAL, CFG_K_CLAIM_TIMEOUT,
    CFG_K_TIMEOUT, CFG_K_MASTER_TIMEOUT, CFG_K_TEST, CFG_K_HOT_BYTES, CFG_K_SUB_CLUSTER, CFG_K_PLAN_TTL,
    CFG_K_PREFAULT, CFG_K_EVICTION_POLICY,
    CFG_K_REPLICA_ROLES, CFG_K_WRITEBACK /* issue 16 */, CFG_K_HUGE_PAGES,
    CFG_K_HA /* issue 17 */, CFG_K_TRANSPORT /* issue 18 */, CFG_K_RING_POLL, CFG_K_RING_POLL_PLAN,
    CFG_K_SEGMENT_TOUCH, CFG_K_HEAP_RESERVE, CFG_K_WB_ADMISSION /* issue 38 */, CFG_K_WB_STALL,
    CFG_K_DEAD_GRACE, CFG_K_CLIENT_LIMITS /* issue 44 */, CFG_K_DISK /* issue 39 */,
    CFG_K_RANGE_QUARANTINE /* issue 44 W2 */, CFG_K_TENANTS /* issue 42 */, CFG_K_TENANT, CFG_K_TENANT_TOKEN, CFG_K_PIN_RATIO,
    CFG_K_TENANT_ADMIN /* issue 42 quotas */, CFG_K_RANGE_REUSE /* issue 38 */, CFG_K_UCX_TLS /* issue 38 */,
    CFG_K_PREFETCH_OWNERS /* issue 38 */, CFG_K_PEER_SEGMENTS /* issue 38 */,
    CFG_K_TARGET_COPY_FETCHED /* issue 38 */, CFG_K_IDLE_POLL /* issue 38 */
};

static const struct cfg_field cfg_top_fields[] = {
    {"role", CFG_M | CFG_O | CFG_E},        {"cluster_id", CFG_M | CFG_O | CFG_E},
    {"cluster_token", CFG_M | CFG_O | CFG_E}, {"log_level", CFG_M | CFG_O | CFG_E},
    {"start_timeout_ms", CFG_M | CFG_O | CFG_E}, {"max_frame_bytes", CFG_M | CFG_O | CFG_E},
    {"listen", CFG_M},                      {"metrics_listen", CFG_M | CFG_O},
    {"inflight_ttl_ms", CFG_M},             {"heartbeat_timeout_ms", CFG_M},
    {"node_id", CFG_O | CFG_E},             {"master", CFG_O},
    {"socket", CFG_M | CFG_O | CFG_E},      {"segment_bytes", CFG_O},
    {"node_role", CFG_O},                   {"numa_node", CFG_O},
    {"reserve", CFG_O},                     {"hot_capacity_ratio", CFG_O},
    {"handle_ttl_ms", CFG_O},               {"heartbeat_interval_ms", CFG_O},
    {"claim_timeout_ms", CFG_O},            {"timeout_ms", CFG_E},
    {"master_timeout_ms", CFG_O | CFG_M},   {"test", CFG_O | CFG_M},
    {"hot_capacity_bytes", CFG_O},          {"sub_cluster", CFG_O},
    {"put_plan_ttl_ms", CFG_O},
    {"prefault_segment", CFG_E},
    {"eviction_policy", CFG_O},
    {"replica_target_roles", CFG_M}, /* issue 16 */
    {"writeback_watermark", CFG_O},  /* issue 16 */
    {"huge_pages", CFG_O},
    {"ha", CFG_M | CFG_O}, /* issue 17 */
    {"transport", CFG_E},  /* issue 18 */
    {"ring_poll_us", CFG_O},
    {"ring_poll_plan_us", CFG_O},
    {"segment_touch", CFG_O | CFG_E},
    {"heap_reserve_mib", CFG_M | CFG_O},
    {"writeback_admission", CFG_O}, /* issue 38 */
    {"writeback_max_stall_ms", CFG_O},
    {"dead_owner_grace_ms", CFG_M}, /* L1 */
    {"client_limits", CFG_O}, /* issue 44 C3 */
    {"disk", CFG_O},          /* issue 39 */
    {"range_quarantine_ms", CFG_M}, /* issue 44 W2 */
    {"tenants", CFG_O | CFG_M},     /* issue 42: an owner's tenants; the master's quota table */
    {"tenant", CFG_E},
    {"tenant_token", CFG_E},
    {"pin_budget_ratio", CFG_O}, /* issue 42 */
    {"tenant_admin_token", CFG_O}, /* issue 42: who may change any tenant's quota (tenant set) */
    {"range_reuse_delay_ms", CFG_M}, /* issue 38 */
    {"ucx_tls", CFG_O},              /* issue 38: the data plane's UCX transports */
    {"prefetch_from_owners", CFG_O}, /* issue 38: PREFETCH copies keys other owners hold */
    {"peer_segments", CFG_O},        /* issue 38: same-host owners map each other's segment */
    {"target_copy_after_fetch", CFG_M}, /* issue 38: a CPU owner's copy a GPU owner fetched back */
    {"idle_poll_us", CFG_M | CFG_E},  /* issue 38: the master and a client poll for their next message */
};
static const struct cfg_field cfg_client_limits_fields[] = {{"max_pinned_bytes", CFG_O}, {"max_handles", CFG_O},
                                                            {"max_plans", CFG_O}, {"pin_expire_ms", CFG_O}};
static const struct cfg_field cfg_test_fields[] = {{"fault_message", CFG_O}, {"fault", CFG_O},
                                                   {"fault_ms", CFG_O},      {"fault_count", CFG_O},
                                                   {"fail_transfers", CFG_O},
                                                   /* message chaos (issue 17): master and owners */
                                                   {"drop_ppm", CFG_O | CFG_M}, {"delay_ppm", CFG_O | CFG_M},
                                                   {"delay_ms", CFG_O | CFG_M}, {"dup_ppm", CFG_O | CFG_M},
                                                   {"seed", CFG_O | CFG_M},
                                                   /* W6: a master's put-id clock skewed (a standby on another host) */
                                                   {"clock_offset_ms", CFG_M},
                                                   /* W4: GETs reported timed out at once, posted late */
                                                   {"late_gets", CFG_O}, {"late_ms", CFG_O},
                                                   /* W2: pushes reported timed out at once, posted late */
                                                   {"late_puts", CFG_O},
                                                   /* W2: how long an owner names one no longer announced */
                                                   {"peer_forget_ms", CFG_O},
                                                   /* the chaos harness: values checked against their key's */
                                                   {"value_oracle", CFG_O}};
static const struct cfg_field cfg_reserve_fields[] = {{"grant_bytes", CFG_O}, {"expected", CFG_O},
                                                      {"idle_grant_return_ms", CFG_O}};
static const struct cfg_field cfg_ha_fields[] = {{"etcd", CFG_M | CFG_O}, {"lease_ttl_ms", CFG_M | CFG_O},
                                                {"key", CFG_M | CFG_O}};
static const struct cfg_field cfg_expected_fields[] = {{"value_len", CFG_O},
                                                       {"payload_capacity_bytes", CFG_O}};

static int cfg_parse_expected(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg)
{
    int rc = fx_cfg_want_object(c, "reserve.expected", obj);
    if (rc) return rc;
    uint64_t seen = 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = fx_cfg_match(c, it, "reserve.expected.", cfg_expected_fields,
                          (int)FX_ARRAY_LEN(cfg_expected_fields), &seen);
        if (k < 0) return FLUXON_ERR_CONFIG;
        char path[64];
        snprintf(path, sizeof path, "reserve.expected.%s", cfg_expected_fields[k].name);
        uint64_t *dst = k == 0 ? &cfg->expected_value_len : &cfg->expected_payload_bytes;
        if ((rc = fx_cfg_get_size(c, path, it, dst))) return rc;
        if (*dst == 0) return fx_cfg_bad(c, path, it, "must be > 0");
    }
    if (!(seen & 1u)) return fx_cfg_fail(c, "reserve.expected.value_len", "missing (required)");
    if (!(seen & 2u))
        return fx_cfg_fail(c, "reserve.expected.payload_capacity_bytes", "missing (required)");
    cfg->has_expected = true;
    return 0;
}

/* "replica_target_roles": a non-empty array of distinct node roles (issue 16). */
static int cfg_parse_replica_roles(struct cfg_ctx *c, const char *path, const cJSON *v, fx_config_t *cfg)
{
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1)
        return fx_cfg_bad(c, path, v, "must be a non-empty array of node roles (gpu_owner, remote_cache)");
    uint32_t bits = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        uint32_t b;
        if (cJSON_IsString(it) && strcmp(it->valuestring, "gpu_owner") == 0) b = 1u << FX_NODE_GPU_OWNER;
        else if (cJSON_IsString(it) && strcmp(it->valuestring, "remote_cache") == 0) b = 1u << FX_NODE_REMOTE_CACHE;
        else return fx_cfg_bad(c, path, it, "is not a node role (must be one of gpu_owner, remote_cache)");
        if (bits & b) return fx_cfg_bad(c, path, it, "is named twice");
        bits |= b;
    }
    cfg->replica_target_roles = bits;
    return 0;
}

static int cfg_parse_reserve(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg)
{
    int rc = fx_cfg_want_object(c, "reserve", obj);
    if (rc) return rc;
    uint64_t seen = 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = fx_cfg_match(c, it, "reserve.", cfg_reserve_fields,
                          (int)FX_ARRAY_LEN(cfg_reserve_fields), &seen);
        if (k < 0) return FLUXON_ERR_CONFIG;
        if (k == 0) cfg->has_grant_bytes = true;
        rc = k == 0   ? fx_cfg_get_pages(c, "reserve.grant_bytes", it, &cfg->grant_bytes)
             : k == 2 ? fx_cfg_get_ms(c, "reserve.idle_grant_return_ms", it, &cfg->idle_grant_return_ms)
                      : cfg_parse_expected(c, it, cfg);
        if (rc) return rc;
    }
    return 0;
}

/* "client_limits" (owner, issue 44 C3): what one external client may hold at once. */
static int cfg_parse_client_limits(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg)
{
    int rc = fx_cfg_want_object(c, "client_limits", obj);
    if (rc) return rc;
    uint64_t seen = 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = fx_cfg_match(c, it, "client_limits.", cfg_client_limits_fields,
                          (int)FX_ARRAY_LEN(cfg_client_limits_fields), &seen);
        if (k < 0) return FLUXON_ERR_CONFIG;
        int64_t x = 0;
        switch (k) {
        case 0: rc = fx_cfg_get_size(c, "client_limits.max_pinned_bytes", it, &cfg->client_max_pinned_bytes); break;
        case 1:
            rc = fx_cfg_get_int(c, "client_limits.max_handles", it, 1, UINT32_MAX, &x);
            if (!rc) cfg->client_max_handles = (uint32_t)x;
            break;
        case 2:
            rc = fx_cfg_get_int(c, "client_limits.max_plans", it, 1, UINT32_MAX, &x);
            if (!rc) cfg->client_max_plans = (uint32_t)x;
            break;
        default: rc = fx_cfg_get_ms(c, "client_limits.pin_expire_ms", it, &cfg->client_pin_expire_ms); break;
        }
        if (rc) return rc;
    }
    return 0;
}

/* "test": fault injection, documented in the README; off unless fault_message is set. */
static int cfg_parse_test(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg)
{
    int rc = fx_cfg_want_object(c, "test", obj);
    if (rc) return rc;
    uint64_t seen = 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = fx_cfg_match(c, it, "test.", cfg_test_fields, (int)FX_ARRAY_LEN(cfg_test_fields), &seen);
        if (k < 0) return FLUXON_ERR_CONFIG;
        char path[64];
        snprintf(path, sizeof path, "test.%s", cfg_test_fields[k].name);
        if (k == 0 || k == 1) {
            if (!cJSON_IsString(it)) return fx_cfg_bad(c, path, it, "must be a string");
            const char *v = it->valuestring;
            if (k == 0) {
                if (strlen(v) >= sizeof cfg->fault_message) return fx_cfg_bad(c, path, it, "is too long");
                fx_strlcpy(cfg->fault_message, v, sizeof cfg->fault_message);
            } else if (!strcmp(v, "delay")) cfg->fault_kind = FX_FAULT_DELAY;
            else if (!strcmp(v, "drop")) cfg->fault_kind = FX_FAULT_DROP;
            else if (!strcmp(v, "duplicate")) cfg->fault_kind = FX_FAULT_DUPLICATE;
            else if (!strcmp(v, "delay_request")) cfg->fault_kind = FX_FAULT_DELAY_REQUEST;
            else if (!strcmp(v, "truncate")) cfg->fault_kind = FX_FAULT_TRUNCATE;
            else return fx_cfg_bad(c, path, it,
                                "must be \"delay\", \"drop\", \"duplicate\", \"delay_request\" or \"truncate\"");
            continue;
        }
        if (k >= 5 && k <= 8) { /* chaos rates (ppm) and the delay bound */
            double hi = k == 7 ? 60000 : 1000000;
            if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > hi ||
                it->valuedouble != (double)(uint32_t)it->valuedouble)
                return fx_cfg_bad(c, path, it, k == 7 ? "must be an integer in 0..60000 (ms)"
                                                   : "must be an integer in 0..1000000 (parts per million)");
            uint32_t x = (uint32_t)it->valuedouble;
            *(k == 5 ? &cfg->chaos_drop_ppm : k == 6 ? &cfg->chaos_delay_ppm : k == 7 ? &cfg->chaos_delay_ms
                                                                             : &cfg->chaos_dup_ppm) = x;
            continue;
        }
        if (k == 10) {
            if (!cJSON_IsNumber(it) || it->valuedouble < -86400000.0 || it->valuedouble > 86400000.0 ||
                it->valuedouble != (double)(int64_t)it->valuedouble)
                return fx_cfg_bad(c, path, it, "must be an integer in -86400000..86400000 (ms)");
            cfg->test_clock_offset_ms = (int64_t)it->valuedouble;
            continue;
        }
        if (k == 15) {
            if (!cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) >= sizeof cfg->test_value_oracle)
                return fx_cfg_bad(c, path, it, "must be a key prefix of 1..%zu bytes", sizeof cfg->test_value_oracle - 1);
            fx_strlcpy(cfg->test_value_oracle, it->valuestring, sizeof cfg->test_value_oracle);
            continue;
        }
        if (k == 9) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 9007199254740991.0 ||
                it->valuedouble != (double)(uint64_t)it->valuedouble)
                return fx_cfg_bad(c, path, it, "must be an integer in 0..2^53-1");
            cfg->chaos_seed = (uint64_t)it->valuedouble;
            continue;
        }
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 86400000 ||
            it->valuedouble != (double)(uint32_t)it->valuedouble)
            return fx_cfg_bad(c, path, it, "must be an integer in 0..86400000");
        uint32_t x = (uint32_t)it->valuedouble;
        if (k == 2) cfg->fault_ms = x;
        else if (k == 3) cfg->fault_count = x;
        else if (k == 11) cfg->test_late_gets = x;
        else if (k == 12) cfg->test_late_ms = x;
        else if (k == 13) cfg->test_late_puts = x;
        else if (k == 14) cfg->test_peer_forget_ms = x;
        else cfg->fail_transfers = x;
    }
    if (cfg->chaos_delay_ppm && !cfg->chaos_delay_ms)
        return fx_cfg_fail(c, "test.delay_ms", "missing or 0 (required > 0 with test.delay_ppm)");
    if ((uint64_t)cfg->chaos_drop_ppm + cfg->chaos_delay_ppm + cfg->chaos_dup_ppm > 1000000u)
        return fx_cfg_fail(c, "test.drop_ppm", "drop_ppm %u + delay_ppm %u + dup_ppm %u exceed 1000000",
                        cfg->chaos_drop_ppm, cfg->chaos_delay_ppm, cfg->chaos_dup_ppm);
    if (cfg->fault_message[0] && !cfg->fault_kind)
        return fx_cfg_fail(c, "test.fault", "missing (required with test.fault_message)");
    return 0;
}

/* One etcd endpoint of "ha.etcd": http://<IPv4 or localhost>:<port>, port > 0. */
static bool cfg_etcd_endpoint_ok(const char *s, size_t n)
{
    char ep[128];
    if (n < 8 || n >= sizeof ep || strncmp(s, "http://", 7) != 0) return false;
    memcpy(ep, s + 7, n - 7);
    ep[n - 7] = 0;
    uint16_t port = 0;
    return fx_parse_hostport(ep, NULL, 0, &port) == 0 && port > 0;
}

/* "ha": {"etcd": "http://h:p,...", "lease_ttl_ms": N, "key": "name"} (issue 17). */
static int cfg_parse_ha(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg)
{
    int rc = fx_cfg_want_object(c, "ha", obj);
    if (rc) return rc;
    uint64_t seen = 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = fx_cfg_match(c, it, "ha.", cfg_ha_fields, (int)FX_ARRAY_LEN(cfg_ha_fields), &seen);
        if (k < 0) return FLUXON_ERR_CONFIG;
        if (k == 1) {
            int64_t x = 0;
            if ((rc = fx_cfg_get_int(c, "ha.lease_ttl_ms", it, 1000, 600000, &x))) return rc;
            if (x % 1000) return fx_cfg_bad(c, "ha.lease_ttl_ms", it, "is not a multiple of 1000 (etcd leases count whole seconds)");
            cfg->ha_lease_ttl_ms = (uint32_t)x;
            continue;
        }
        const char *path = k == 0 ? "ha.etcd" : "ha.key";
        if ((rc = fx_cfg_want_string(c, path, it))) return rc;
        const char *v = it->valuestring;
        size_t cap = k == 0 ? sizeof cfg->ha_etcd : sizeof cfg->ha_key;
        if (!v[0] || strlen(v) >= cap) return fx_cfg_bad(c, path, it, "must be 1..%zu bytes long", cap - 1);
        if (k == 2 && strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-") != strlen(v))
            return fx_cfg_bad(c, path, it, "must be characters of [A-Za-z0-9._/-]");
        int n_eps = 0;
        for (const char *p = v, *comma = p; k == 0 && comma; p = comma + 1) {
            comma = strchr(p, ',');
            if (++n_eps > 8 || !cfg_etcd_endpoint_ok(p, comma ? (size_t)(comma - p) : strlen(p)))
                return fx_cfg_bad(c, path, it, "endpoint %d is not http://host:port (IPv4 or localhost, port 1..65535; "
                               "at most 8 endpoints)", n_eps);
        }
        fx_strlcpy(k == 0 ? cfg->ha_etcd : cfg->ha_key, v, cap);
    }
    if (!(seen & 1u)) return fx_cfg_fail(c, "ha.etcd", "missing (required with \"ha\")");
    return 0;
}

/* Parses one top-level member whose key index is k into cfg. */
static int cfg_parse_field(struct cfg_ctx *c, int k, const cJSON *v, fx_config_t *cfg)
{
    const char *path = cfg_top_fields[k].name;
    int64_t x = 0;
    int rc;
    switch (k) {
    case CFG_K_ROLE: return 0; /* parsed before the walk */
    case CFG_K_CLUSTER_ID: return fx_cfg_get_id(c, path, v, false, cfg->cluster_id);
    case CFG_K_TOKEN: return fx_cfg_get_token(c, path, v, cfg->cluster_token); /* a secret: never shown */
    case CFG_K_LOG_LEVEL:
        if ((rc = fx_cfg_want_string(c, path, v))) return rc;
        if ((cfg->log_level = fx_log_level_parse(v->valuestring)) < 0)
            return fx_cfg_bad(c, path, v, "must be one of debug, info, warn, error, off");
        cfg->log_level_given = true;
        return 0;
    case CFG_K_START_TIMEOUT: return fx_cfg_get_ms(c, path, v, &cfg->start_timeout_ms);
    case CFG_K_MAX_FRAME:
        if ((rc = fx_cfg_get_size(c, path, v, &cfg->max_frame_bytes))) return rc;
        if (cfg->max_frame_bytes < CFG_PAGE) return fx_cfg_bad(c, path, v, "must be >= 4096");
        return 0;
    case CFG_K_LISTEN:
        return fx_cfg_get_hostport(c, path, v, cfg->listen_host, sizeof cfg->listen_host,
                                &cfg->listen_port);
    case CFG_K_METRICS: {
        char host[FX_HOST_MAX];
        uint16_t port;
        if ((rc = fx_cfg_get_hostport(c, path, v, host, sizeof host, &port))) return rc;
        fx_strlcpy(cfg->metrics_listen, v->valuestring, sizeof cfg->metrics_listen);
        return 0;
    }
    case CFG_K_INFLIGHT_TTL: return fx_cfg_get_ms(c, path, v, &cfg->inflight_ttl_ms);
    case CFG_K_HB_TIMEOUT: return fx_cfg_get_ms(c, path, v, &cfg->heartbeat_timeout_ms);
    case CFG_K_DEAD_GRACE: return fx_cfg_get_ms(c, path, v, &cfg->dead_owner_grace_ms);
    case CFG_K_IDLE_POLL: {
        int64_t us = 0;
        if ((rc = fx_cfg_get_int(c, path, v, 0, CFG_RING_POLL_MAX, &us))) return rc;
        cfg->idle_poll_us = (uint32_t)us;
        return 0;
    }
    case CFG_K_RANGE_REUSE: { /* 0: off */
        int64_t d = 0;
        if ((rc = fx_cfg_get_int(c, path, v, 0, 1000, &d))) return rc;
        cfg->range_reuse_delay_ms = (uint32_t)d;
        return 0;
    }
    case CFG_K_RANGE_QUARANTINE: { /* 0: off */
        int64_t q = 0;
        if ((rc = fx_cfg_get_int(c, path, v, 0, CFG_MS_MAX, &q))) return rc;
        cfg->range_quarantine_ms = (uint32_t)q;
        return 0;
    }
    case CFG_K_NODE_ID: return fx_cfg_get_id(c, path, v, true, cfg->node_id);
    case CFG_K_MASTER:
        if (cJSON_IsString(v) && strncmp(v->valuestring, "unix:", 5) == 0) { /* a master on this host */
            const char *sp = v->valuestring + 5;
            if (!*sp) return fx_cfg_bad(c, path, v, "names no path after \"unix:\"");
            if (strlen(sp) >= FX_PATH_MAX) return fx_cfg_bad(c, path, v, "has a path longer than %d bytes", FX_PATH_MAX - 1);
            fx_strlcpy(cfg->master_socket, sp, sizeof cfg->master_socket);
            return 0;
        }
        cfg->master_socket[0] = 0;
        if ((rc = fx_cfg_want_string(c, path, v))) return rc;
        if (fx_parse_hostport(v->valuestring, cfg->master_host, sizeof cfg->master_host, &cfg->master_port) != 0)
            return fx_cfg_bad(c, path, v, "is neither host:port (IPv4 or localhost, port 1..65535) nor unix:PATH");
        return cfg->master_port ? 0 : fx_cfg_bad(c, path, v, "port must be > 0");
    case CFG_K_SOCKET:
        if ((rc = fx_cfg_want_string(c, path, v))) return rc;
        if (!v->valuestring[0]) return fx_cfg_bad(c, path, v, "must not be empty");
        if (strlen(v->valuestring) >= FX_PATH_MAX)
            return fx_cfg_bad(c, path, v, "is longer than %d bytes", FX_PATH_MAX - 1);
        fx_strlcpy(cfg->socket_path, v->valuestring, sizeof cfg->socket_path);
        return 0;
    case CFG_K_SEGMENT: return fx_cfg_get_pages(c, path, v, &cfg->segment_bytes);
    case CFG_K_NODE_ROLE: {
        static const char *const roles[] = {"gpu_owner", "remote_cache"}; /* FX_NODE_* */
        int i = 0;
        if ((rc = fx_cfg_get_choice(c, path, v, roles, 2, &i))) return rc;
        cfg->node_role = (fx_node_role_t)i;
        return 0;
    }
    case CFG_K_NUMA:
        if ((rc = fx_cfg_get_int(c, path, v, -1, CFG_NUMA_MAX, &x))) return rc;
        cfg->numa_node = (int)x;
        return 0;
    case CFG_K_RESERVE: return cfg_parse_reserve(c, v, cfg);
    case CFG_K_CLIENT_LIMITS: return cfg_parse_client_limits(c, v, cfg);
    case CFG_K_DISK: return fx_cfg_parse_disk(c, v, cfg);
    case CFG_K_TENANTS:
        return c->role == FX_ROLE_MASTER ? fx_cfg_parse_tenant_quotas(c, v, cfg) : fx_cfg_parse_tenants(c, v, cfg);
    case CFG_K_TENANT: return fx_cfg_parse_tenant(c, v, cfg);
    case CFG_K_TENANT_TOKEN: return fx_cfg_get_token(c, path, v, cfg->tenant_token);
    case CFG_K_UCX_TLS: { /* UCX_TLS syntax: names of letters, digits and _ ^ : separated by commas */
        rc = fx_cfg_want_string(c, path, v);
        if (rc) return rc;
        const char *t = v->valuestring;
        size_t n = strlen(t);
        bool ok = n > 0 && n < sizeof cfg->ucx_tls && t[0] != ',' && t[n - 1] != ',' && !strstr(t, ",,");
        for (size_t i = 0; ok && i < n; i++)
            ok = (t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') || (t[i] >= '0' && t[i] <= '9') ||
                 strchr("_^:,", t[i]);
        if (!ok)
            return fx_cfg_bad(c, path, v, "is not a UCX transport list (UCX_TLS syntax, e.g. \"sm,self\" or \"tcp\"; "
                                          "1..%zu characters)", sizeof cfg->ucx_tls - 1);
        memcpy(cfg->ucx_tls, t, n + 1);
        return 0;
    }
    case CFG_K_TENANT_ADMIN: /* issue 42 quotas: "" would let anyone in */
        if (cJSON_IsString(v) && !v->valuestring[0])
            return fx_cfg_fail(c, path, "is empty (omit it: then only a tenant's own clients change its quota)");
        return fx_cfg_get_token(c, path, v, cfg->tenant_admin_token);
    case CFG_K_HOT_RATIO:
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble <= 1))
            return fx_cfg_bad(c, path, v, "%smust be in (0, 1]", cJSON_IsNumber(v) ? "" : "is not a number: ");
        cfg->hot_capacity_ratio = v->valuedouble;
        return 0;
    case CFG_K_PIN_RATIO:
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1))
            return fx_cfg_bad(c, path, v, "must be a number in [0, 1]");
        cfg->pin_budget_ratio = v->valuedouble;
        return 0;
    case CFG_K_HANDLE_TTL: return fx_cfg_get_ms(c, path, v, &cfg->handle_ttl_ms);
    case CFG_K_PLAN_TTL: return fx_cfg_get_ms(c, path, v, &cfg->put_plan_ttl_ms);
    case CFG_K_HB_INTERVAL: return fx_cfg_get_ms(c, path, v, &cfg->heartbeat_interval_ms);
    case CFG_K_CLAIM_TIMEOUT: return fx_cfg_get_ms(c, path, v, &cfg->claim_timeout_ms);
    case CFG_K_TIMEOUT: return fx_cfg_get_ms(c, path, v, &cfg->timeout_ms);
    case CFG_K_MASTER_TIMEOUT: return fx_cfg_get_ms(c, path, v, &cfg->master_timeout_ms);
    case CFG_K_SUB_CLUSTER: return fx_cfg_get_id(c, path, v, false, cfg->sub_cluster);
    case CFG_K_TEST: return cfg_parse_test(c, v, cfg);
    case CFG_K_HA: return cfg_parse_ha(c, v, cfg);
    case CFG_K_EVICTION_POLICY: {
        static const char *const policies[] = {"lru", "s3fifo", "slru"}; /* FX_EVICT_* */
        cfg->eviction_policy_set = true;
        return fx_cfg_get_choice(c, path, v, policies, 3, &cfg->eviction_policy);
    }
    case CFG_K_REPLICA_ROLES: return cfg_parse_replica_roles(c, path, v, cfg);
    case CFG_K_WRITEBACK:
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 1))
            return fx_cfg_bad(c, path, v, "%smust be in [0, 1) (a share of the hot tier's capacity; 0 = off)",
                              cJSON_IsNumber(v) ? "" : "is not a number: ");
        cfg->writeback_watermark = v->valuedouble;
        return 0;
    case CFG_K_WB_ADMISSION: {
        static const char *const adm[] = {"all", "second_touch"}; /* FX_WB_ADMIT_* */
        return fx_cfg_get_choice(c, path, v, adm, 2, &cfg->writeback_admission);
    }
    case CFG_K_WB_STALL: {
        int64_t ms = 0;
        if ((rc = fx_cfg_get_int(c, path, v, 0, 60000, &ms))) return rc;
        cfg->writeback_max_stall_ms = (uint32_t)ms;
        return 0;
    }
    case CFG_K_HOT_BYTES:
        if ((rc = fx_cfg_get_size(c, path, v, &cfg->hot_capacity_bytes))) return rc;
        return cfg->hot_capacity_bytes ? 0 : fx_cfg_bad(c, path, v, "must be > 0");
    case CFG_K_HUGE_PAGES: {
        static const char *const modes[] = {"off", "try", "on"}; /* FX_HUGE_* */
        return fx_cfg_get_choice(c, path, v, modes, 3, &cfg->huge_pages);
    }
    case CFG_K_PREFAULT:
        if (!cJSON_IsBool(v)) return fx_cfg_bad(c, path, v, "must be true or false");
        cfg->prefault_segment = cJSON_IsTrue(v);
        return 0;
    case CFG_K_PREFETCH_OWNERS:
        if (!cJSON_IsBool(v)) return fx_cfg_bad(c, path, v, "must be true or false");
        cfg->prefetch_from_owners = cJSON_IsTrue(v);
        return 0;
    case CFG_K_PEER_SEGMENTS: {
        static const char *const modes[] = {"map", "ucx"}; /* FX_PEER_SEG_* */
        return fx_cfg_get_choice(c, path, v, modes, 2, &cfg->peer_segments);
    }
    case CFG_K_TARGET_COPY_FETCHED: {
        static const char *const modes[] = {"keep", "drop"}; /* FX_TARGET_COPY_* */
        return fx_cfg_get_choice(c, path, v, modes, 2, &cfg->target_copy_after_fetch);
    }
    case CFG_K_SEGMENT_TOUCH: {
        static const char *const modes[] = {"auto", "off", "on"}; /* FX_TOUCH_* */
        return fx_cfg_get_choice(c, path, v, modes, 3, &cfg->segment_touch);
    }
    case CFG_K_TRANSPORT: {
        static const char *const transports[] = {"ring", "socket"};
        int i = 0;
        if ((rc = fx_cfg_get_choice(c, path, v, transports, 2, &i))) return rc;
        cfg->transport_socket = i == 1;
        return 0;
    }
    case CFG_K_RING_POLL: {
        int64_t us = 0;
        if ((rc = fx_cfg_get_int(c, path, v, 0, CFG_RING_POLL_MAX, &us))) return rc;
        cfg->ring_poll_us = (uint32_t)us;
        return 0;
    }
    case CFG_K_RING_POLL_PLAN: {
        int64_t us = 0;
        if ((rc = fx_cfg_get_int(c, path, v, 0, CFG_RING_POLL_MAX, &us))) return rc;
        cfg->ring_poll_plan_us = (uint32_t)us;
        return 0;
    }
    case CFG_K_HEAP_RESERVE: {
        int64_t mib = 0;
        if ((rc = fx_cfg_get_int(c, path, v, 0, CFG_HEAP_RESERVE_MAX_MIB, &mib))) return rc;
        cfg->heap_reserve_mib = (uint32_t)mib;
        return 0;
    }
    default: return fx_cfg_fail(c, path, "internal error: no parser");
    }
}

#define CFG_SEGMENT_MAX (1ull << 46)

/* Owner rules across fields (§6): the segment holds at least one grant (its header page
 * is mapped on top of segment_bytes: segment_bytes / grant_bytes grants fit), and the
 * expected capacity fits in the grants the segment can hold. */
static int cfg_check_owner(struct cfg_ctx *c, const fx_config_t *cfg)
{
    uint64_t seg = cfg->segment_bytes, grant = cfg->grant_bytes;
    if (seg < CFG_PAGE)
        return fx_cfg_fail(c, "segment_bytes", "%llu is too small: at least 4096 (a one-page grant)",
                        (unsigned long long)seg);
    if (seg > CFG_SEGMENT_MAX) /* and its header page added to it never wraps */
        return fx_cfg_fail(c, "segment_bytes", "%llu is too large: at most %llu (64 TiB, half of x86-64's user "
                           "address space)", (unsigned long long)seg, (unsigned long long)CFG_SEGMENT_MAX);
    if (grant > seg)
        return fx_cfg_fail(c, "segment_bytes", "%llu is smaller than one grant (reserve.grant_bytes %llu)",
                        (unsigned long long)seg, (unsigned long long)grant);
    if (cfg->hot_capacity_bytes > seg)
        return fx_cfg_fail(c, "hot_capacity_bytes", "%llu is larger than segment_bytes %llu",
                        (unsigned long long)cfg->hot_capacity_bytes, (unsigned long long)seg);
    if (cfg->hot_capacity_bytes && cfg->hot_capacity_bytes < CFG_PAGE) /* 0: hot_capacity_ratio decides */
        return fx_cfg_fail(c, "hot_capacity_bytes", "%llu is less than one 4096-byte slot: every value would be "
                           "refused", (unsigned long long)cfg->hot_capacity_bytes);
    if (!cfg->has_expected) return 0;
    uint64_t vlen = cfg->expected_value_len, payload = cfg->expected_payload_bytes;
    if (vlen > grant)
        return fx_cfg_fail(c, "reserve.expected.value_len",
                        "%llu is larger than one grant (reserve.grant_bytes %llu)",
                        (unsigned long long)vlen, (unsigned long long)grant);
    uint64_t slot = FX_ALIGN_UP(FX_MAX(vlen, (uint64_t)CFG_PAGE), (uint64_t)CFG_PAGE);
    uint64_t per_grant = grant / slot * slot; /* payload bytes one grant serves */
    uint64_t need = payload / per_grant + (payload % per_grant != 0);
    uint64_t fit = seg / grant;
    if (need > fit)
        return fx_cfg_fail(c, "reserve.expected.payload_capacity_bytes",
                        "%llu needs %llu grants of %llu bytes (%llu slots of %llu) but "
                        "segment_bytes %llu fits only %llu",
                        (unsigned long long)payload, (unsigned long long)need,
                        (unsigned long long)grant, (unsigned long long)(grant / slot),
                        (unsigned long long)slot, (unsigned long long)seg,
                        (unsigned long long)fit);
    return 0;
}

/* Derived defaults and required fields once every member was read. */
static int cfg_finish(struct cfg_ctx *c, uint64_t seen, fx_config_t *cfg)
{
    if (!(seen & (1ull << CFG_K_CLUSTER_ID))) return fx_cfg_fail(c, "cluster_id", "missing (required)");
    if (cfg->ha_etcd[0]) { /* issue 17 */
        if (!cfg->ha_key[0]) snprintf(cfg->ha_key, sizeof cfg->ha_key, "fluxon/%s/master", cfg->cluster_id);
        if (cfg->role == FX_ROLE_OWNER && (seen & (1ull << CFG_K_MASTER)))
            return fx_cfg_fail(c, "master", "cannot be combined with \"ha\" (the owner finds its master's address in etcd)");
        if (cfg->role == FX_ROLE_MASTER && (strcmp(cfg->listen_host, "0.0.0.0") == 0 || cfg->listen_port == 0))
            return fx_cfg_fail(c, "listen", "\"%s:%u\" cannot be advertised through \"ha\" (give the address and port "
                            "owners reach)", cfg->listen_host, cfg->listen_port);
    }
    if (cfg->role == FX_ROLE_EXTERNAL) {
        if (!(seen & (1ull << CFG_K_SOCKET))) return fx_cfg_fail(c, "socket", "missing (required)");
        if (!(seen & (1ull << CFG_K_NODE_ID))) {
            char suffix[24];
            snprintf(suffix, sizeof suffix, ":%ld", (long)getpid());
            fx_cfg_default_node_id(cfg->node_id, suffix);
        }
        return 0;
    }
    if (cfg->role != FX_ROLE_OWNER) return 0;
    if (!(seen & (1ull << CFG_K_NODE_ID))) fx_cfg_default_node_id(cfg->node_id, "");
    if (!(seen & (1ull << CFG_K_HEAP_RESERVE))) /* an eighth of the segment and a 32nd of the disk tier (its
                                                 * index: ~256 bytes a record of a 4 KiB value), in whole
                                                 * 64 MiB, at most 1 GiB */
        cfg->heap_reserve_mib = (uint32_t)FX_MIN((cfg->segment_bytes / 8 + cfg->disk_capacity_bytes / 32) >> 26 << 6,
                                                 (uint64_t)FX_HEAP_RESERVE_OWNER_MAX_MIB);
    /* a chosen poll window comes with the plan window's default on any host (defaults) */
    if ((seen & (1ull << CFG_K_RING_POLL)) && !(seen & (1ull << CFG_K_RING_POLL_PLAN)))
        cfg->ring_poll_plan_us = FX_RING_POLL_PLAN_DEFAULT_US;
    if (!(seen & (1ull << CFG_K_SOCKET))) {
        const char *dir = getenv("XDG_RUNTIME_DIR");
        char path[512];
        snprintf(path, sizeof path, "%s/fluxon-%s/%s.sock", dir && dir[0] ? dir : "/tmp",
                 cfg->cluster_id, cfg->node_id);
        if (strlen(path) >= FX_PATH_MAX) {
            char shown[160];
            fx_cfg_sanitize(path, true, shown, sizeof shown);
            return fx_cfg_fail(c, "socket", "%s (default) is longer than %d bytes; set \"socket\"",
                            shown, FX_PATH_MAX - 1);
        }
        fx_strlcpy(cfg->socket_path, path, sizeof cfg->socket_path);
    }
    if (!cfg->has_grant_bytes) {
        /* A grant serves ONE slot size and an owner holds segment/grant of them: keep at
         * least 16 grants in segments under 8 GiB (1 GiB -> 64 MiB grants), so values of
         * several sizes fit; 512 MiB (§6) from 8 GiB up. Never below 4 MiB, never above
         * the segment. */
        uint64_t seg = cfg->segment_bytes, g = 512ull << 20;
        if (seg < (8ull << 30)) g = FX_MAX(seg / 16 / CFG_PAGE * CFG_PAGE, 4ull << 20);
        if (g > seg) g = seg;
        if (seg >= CFG_PAGE) cfg->grant_bytes = g;
    }
    return cfg_check_owner(c, cfg);
}

static int cfg_parse_root(struct cfg_ctx *c, const cJSON *root, fx_config_t *cfg)
{
    if (!cJSON_IsObject(root)) return fx_cfg_bad(c, "config", root, "is not a JSON object");
    const cJSON *r = NULL;
    for (const cJSON *it = root->child; it && !r; it = it->next)
        if (it->string && strcmp(it->string, "role") == 0) r = it;
    if (!r) return fx_cfg_fail(c, "role", "missing (required)");
    if (!cJSON_IsString(r)) return fx_cfg_bad(c, "role", r, "is not a string");
    fx_role_t role = FX_ROLE_NONE;
    for (int i = FX_ROLE_MASTER; i <= FX_ROLE_EXTERNAL; i++)
        if (strcmp(r->valuestring, fx_role_name((fx_role_t)i)) == 0) role = (fx_role_t)i;
    if (role == FX_ROLE_NONE) return fx_cfg_bad(c, "role", r, "must be one of master, owner, external");
    c->role = role;
    fx_config_defaults(cfg, role);
    uint64_t seen = 0;
    for (const cJSON *it = root->child; it; it = it->next) {
        int k = fx_cfg_match(c, it, "", cfg_top_fields, (int)FX_ARRAY_LEN(cfg_top_fields), &seen);
        if (k < 0) return FLUXON_ERR_CONFIG;
        int rc = cfg_parse_field(c, k, it, cfg);
        if (rc) return rc;
    }
    return cfg_finish(c, seen, cfg);
}

/* The deepest nesting of arrays and objects in json's first n bytes (strings skipped). */
static size_t cfg_depth(const char *json, size_t n)
{
    size_t depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < n && json[i]; i++) {
        char ch = json[i];
        if (in_string) {
            if (ch == '\\' && i + 1 < n) i++;
            else if (ch == '"') in_string = false;
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > deepest) deepest = depth;
        } else if ((ch == ']' || ch == '}') && depth) {
            depth--;
        }
    }
    return deepest;
}

/* 1 + the byte offset of the first \u0000 escape in json (a backslash escaping a 'u' and
 * four zeros), else 0. An escaped backslash before a 'u' ("\\u0000") is text, not one. */
static size_t cfg_escaped_nul(const char *json)
{
    for (const char *p = json; (p = strchr(p, '\\')) != NULL;) {
        if (p[1] == 'u' && p[2] == '0' && p[3] == '0' && p[4] == '0' && p[5] == '0') return (size_t)(p - json) + 1;
        p += p[1] ? 2 : 1; /* the escaped character is skipped: JSON "\\u0000" is a backslash, then text */
    }
    return 0;
}

FX_INTERNAL int fx_config_parse(const char *json, fx_config_t *cfg, char *err, size_t errcap)
{
    struct cfg_ctx c = {.err = err, .errcap = errcap, .role = FX_ROLE_NONE};
    if (err && errcap) err[0] = 0;
    if (!json) return fx_cfg_fail(&c, "config", "NULL is not a JSON document");
    if (!cfg) return fx_cfg_fail(&c, "config", "NULL output struct");
    size_t nul = cfg_escaped_nul(json);
    if (nul) /* cJSON ends the string there: "s3cret\u0000x" would be taken for "s3cret" */
        return fx_cfg_fail(&c, "config", "a string holds \\u0000 at byte %zu: no field takes a NUL character",
                           nul - 1);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        if (json[strspn(json, " \t\r\n")] == 0)
            return fx_cfg_fail(&c, "config", "is empty: a config is a JSON object, e.g. {\"role\":\"master\"}");
        return fx_cfg_fail(&c, "config", "not valid JSON near byte %zu%s", at,
                           cfg_depth(json, at) >= CJSON_NESTING_LIMIT ? " (nested deeper than cJSON's limit)" : "");
    }
    fx_config_t tmp;
    int rc = cfg_parse_root(&c, root, &tmp);
    cJSON_Delete(root);
    if (rc == 0) *cfg = tmp; /* *cfg is written only on success */
    return rc;
}

/* Files over 16 MiB are refused; FLUXON_ERR_NOMEM if the read buffer cannot grow. */
FX_INTERNAL int fx_config_load_file(const char *path, fx_config_t *cfg, char *err,
                                    size_t errcap)
{
    struct cfg_ctx c = {.err = err, .errcap = errcap, .role = FX_ROLE_NONE};
    if (!path) return fx_cfg_fail(&c, "config", "NULL is not a file path");
    char shown[160];
    fx_cfg_sanitize(path, true, shown, sizeof shown);
    FILE *f = fopen(path, "rb");
    if (!f) return fx_cfg_fail(&c, "config", "cannot open %s: %s", shown, strerror(errno));
    char *buf = NULL;
    size_t cap = 0, len = 0;
    int rc = 0;
    for (;;) {
        if (len + 1 >= cap) {
            if (cap >= CFG_FILE_MAX) {
                rc = fx_cfg_fail(&c, "config", "%s is too large (limit %u bytes)", shown, CFG_FILE_MAX);
                break;
            }
            char *nb = fx_realloc(buf, cap ? cap * 2 : 4096);
            if (!nb) {
                fx_cfg_fail(&c, "config", "out of memory reading %s", shown);
                rc = FLUXON_ERR_NOMEM;
                break;
            }
            buf = nb;
            cap = cap ? cap * 2 : 4096;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) rc = fx_cfg_fail(&c, "config", "cannot read %s: %s", shown, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (rc) {
        fx_free(buf);
        return rc;
    }
    buf[len] = 0;
    if (strlen(buf) != len)
        rc = fx_cfg_fail(&c, "config", "not valid JSON near byte %zu (NUL byte in %s)", strlen(buf),
                      shown);
    else
        rc = fx_config_parse(buf, cfg, err, errcap);
    fx_free(buf);
    return rc;
}

#undef CFG_NUMA_MAX
#undef CFG_FILE_MAX
#undef CFG_M
#undef CFG_O
#undef CFG_E
