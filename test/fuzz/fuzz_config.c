/* fuzz_config.c — the configuration parser of every role (common/config.c). The first
 * byte picks how the rest is read: 0 the rest is the whole JSON document; 1/2/3 the rest
 * follows `{"role":"master",` / owner / external (so mutations keep a role and reach that
 * role's fields). Also throws the rest at fx_parse_size and fx_parse_hostport. Checked:
 * no crash; an error has a non-empty message; a success is a config that keeps the
 * documented rules (role, ids, sizes, ratios), and parsing it again gives the same. */
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "log.h"

#define FZ_ERRCAP 512

static bool fz_terminated(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

static void fz_check_ok(const fx_config_t *c)
{
    FUZZ_CHECK(c->role >= FX_ROLE_MASTER && c->role <= FX_ROLE_EXTERNAL, "role %d", c->role);
    FUZZ_CHECK(fz_terminated(c->cluster_id, sizeof c->cluster_id) && c->cluster_id[0], "cluster_id");
    FUZZ_CHECK(fz_terminated(c->cluster_token, sizeof c->cluster_token), "cluster_token");
    FUZZ_CHECK(fz_terminated(c->node_id, sizeof c->node_id), "node_id");
    FUZZ_CHECK(fz_terminated(c->listen_host, sizeof c->listen_host), "listen_host");
    FUZZ_CHECK(fz_terminated(c->master_host, sizeof c->master_host), "master_host");
    FUZZ_CHECK(fz_terminated(c->socket_path, sizeof c->socket_path), "socket_path");
    FUZZ_CHECK(fz_terminated(c->sub_cluster, sizeof c->sub_cluster), "sub_cluster");
    FUZZ_CHECK(fz_terminated(c->metrics_listen, sizeof c->metrics_listen), "metrics_listen");
    FUZZ_CHECK(fz_terminated(c->fault_message, sizeof c->fault_message), "fault_message");
    FUZZ_CHECK(c->log_level >= FX_LOG_DEBUG && c->log_level <= FX_LOG_OFF, "log_level %d", c->log_level);
    FUZZ_CHECK(c->max_frame_bytes >= 4096, "max_frame_bytes %llu", (unsigned long long)c->max_frame_bytes);
    if (c->role == FX_ROLE_MASTER) {
        FUZZ_CHECK(c->inflight_ttl_ms > 0 && c->heartbeat_timeout_ms > 0, "master timeouts");
    } else if (c->role == FX_ROLE_OWNER) {
        FUZZ_CHECK(c->segment_bytes % 4096 == 0 && c->segment_bytes >= 4096, "segment_bytes %llu",
                   (unsigned long long)c->segment_bytes);
        /* the header page is mapped on top of segment_bytes: a grant may take all of it */
        FUZZ_CHECK(c->grant_bytes % 4096 == 0 && c->grant_bytes > 0 && c->grant_bytes <= c->segment_bytes,
                   "grant_bytes %llu of segment %llu", (unsigned long long)c->grant_bytes,
                   (unsigned long long)c->segment_bytes);
        FUZZ_CHECK(c->hot_capacity_ratio > 0 && c->hot_capacity_ratio <= 1, "hot_capacity_ratio %g",
                   c->hot_capacity_ratio);
        FUZZ_CHECK(c->hot_capacity_bytes <= c->segment_bytes, "hot_capacity_bytes");
        FUZZ_CHECK(c->numa_node >= -1, "numa_node %d", c->numa_node);
        FUZZ_CHECK(c->master_port > 0, "master port 0");
        FUZZ_CHECK(c->handle_ttl_ms > 0 && c->put_plan_ttl_ms > 0 && c->heartbeat_interval_ms > 0 &&
                       c->claim_timeout_ms > 0 && c->master_timeout_ms > 0,
                   "owner timeouts");
        FUZZ_CHECK(c->socket_path[0], "owner without a socket path");
    } else {
        FUZZ_CHECK(c->timeout_ms > 0 && c->socket_path[0], "external timeout/socket");
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fx_log_set_level(FX_LOG_OFF);
    setenv("XDG_RUNTIME_DIR", "/tmp/fuzz-run", 1); /* the default socket path does not depend on the host */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536) return 0;
    static const char *const prefix[4] = {"", "{\"role\":\"master\",", "{\"role\":\"owner\",",
                                          "{\"role\":\"external\","};
    const char *pre = prefix[data[0] & 3];
    size_t pl = strlen(pre), n = size - 1;
    char *json = malloc(pl + n + 1);
    FUZZ_CHECK(json != NULL, "out of memory");
    memcpy(json, pre, pl);
    memcpy(json + pl, data + 1, n);
    json[pl + n] = 0;

    fx_config_t c, c2;
    char err[FZ_ERRCAP], err2[FZ_ERRCAP];
    memset(err, 0x5a, sizeof err);
    int rc = fx_config_parse(json, &c, err, sizeof err);
    FUZZ_CHECK(fz_terminated(err, sizeof err), "error message not terminated");
    if (rc == FLUXON_OK) {
        fz_check_ok(&c);
        FUZZ_CHECK(fx_config_parse(json, &c2, err2, sizeof err2) == FLUXON_OK, "second parse failed: %s", err2);
        FUZZ_CHECK(c2.role == c.role && !strcmp(c2.cluster_id, c.cluster_id) &&
                       c2.segment_bytes == c.segment_bytes && c2.grant_bytes == c.grant_bytes &&
                       !strcmp(c2.socket_path, c.socket_path),
                   "two parses of one document differ");
    } else {
        FUZZ_CHECK(rc == FLUXON_ERR_CONFIG, "status %d", rc);
        FUZZ_CHECK(err[0] != 0, "an error without a message");
    }
    /* a short error buffer is still terminated */
    char tiny[8];
    fx_config_parse(json, &c2, tiny, sizeof tiny);
    FUZZ_CHECK(fz_terminated(tiny, sizeof tiny), "8-byte error buffer not terminated");

    /* the value parsers on the raw text */
    uint64_t sz = 0;
    if (fx_parse_size(json + pl, &sz) == 0) FUZZ_CHECK(json[pl] >= '0' && json[pl] <= '9', "size from \"%.20s\"", json + pl);
    char host[FX_HOST_MAX];
    uint16_t port = 0;
    if (fx_parse_hostport(json + pl, host, sizeof host, &port) == 0)
        FUZZ_CHECK(fz_terminated(host, sizeof host) && host[0], "hostport without a host");
    free(json);
    return 0;
}
