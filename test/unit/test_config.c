/* test_config.c — Criterion suite for common/config.c: per-role defaults and values,
 * rejected configs (status and a message naming the field), size and host:port
 * parsing, file loading, and that no mangled input crashes the parser. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

#define ERRCAP 512

static int tc_parse(const char *json, fx_config_t *cfg, char *err)
{
    memset(cfg, 0xAB, sizeof *cfg);
    return fx_config_parse(json, cfg, err, ERRCAP);
}

Test(config, master_defaults)
{
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(tc_parse("{\"role\":\"master\",\"cluster_id\":\"c1\"}", &c, err), FLUXON_OK,
                 "%s", err);
    cr_assert_eq(c.role, FX_ROLE_MASTER);
    cr_assert_str_eq(c.cluster_id, "c1");
    cr_assert_str_eq(c.cluster_token, "");
    cr_assert_eq(c.log_level, FX_LOG_INFO);
    cr_assert_str_eq(c.listen_host, "127.0.0.1");
    cr_assert_eq(c.listen_port, 7600);
    cr_assert_str_eq(c.metrics_listen, "");
    cr_assert_eq(c.inflight_ttl_ms, 60000);
    cr_assert_eq(c.heartbeat_timeout_ms, 3000);
    cr_assert_eq(c.start_timeout_ms, 10000);
    cr_assert_eq(c.max_frame_bytes, 64ull << 20);
    cr_assert_str_eq(fx_role_name(c.role), "master");
}

Test(config, master_values)
{
    fx_config_t c;
    char err[ERRCAP];
    const char *j = "{\"role\":\"master\",\"cluster_id\":\"prod.A-1_x\",\"cluster_token\":\"s3cr\","
                    "\"listen\":\"0.0.0.0:0\",\"metrics_listen\":\"localhost:9100\","
                    "\"inflight_ttl_ms\":5,\"heartbeat_timeout_ms\":86400000,"
                    "\"log_level\":\"debug\",\"start_timeout_ms\":250,\"max_frame_bytes\":\"1MiB\"}";
    cr_assert_eq(tc_parse(j, &c, err), FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.cluster_id, "prod.A-1_x");
    cr_assert_str_eq(c.cluster_token, "s3cr");
    cr_assert_str_eq(c.listen_host, "0.0.0.0");
    cr_assert_eq(c.listen_port, 0);
    cr_assert_str_eq(c.metrics_listen, "localhost:9100");
    cr_assert_eq(c.inflight_ttl_ms, 5);
    cr_assert_eq(c.heartbeat_timeout_ms, 86400000);
    cr_assert_eq(c.log_level, FX_LOG_DEBUG);
    cr_assert_eq(c.start_timeout_ms, 250);
    cr_assert_eq(c.max_frame_bytes, 1u << 20);
    cr_assert_str_eq(c.socket_path, "", "no unix socket unless asked");
    cr_assert_eq(tc_parse("{\"role\":\"master\",\"cluster_id\":\"c1\",\"socket\":\"/run/f/m.sock\"}", &c, err),
                 FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.socket_path, "/run/f/m.sock");
}

Test(config, owner_defaults)
{
    setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
    fx_config_t c;
    char err[ERRCAP], host[256] = "", sock[256];
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\"}", &c, err), FLUXON_OK,
                 "%s", err);
    cr_assert_eq(c.role, FX_ROLE_OWNER);
    gethostname(host, sizeof host - 1);
    if (host[0] && strlen(host) < FX_ID_MAX && !strpbrk(host, " :/")) cr_assert_str_eq(c.node_id, host);
    cr_assert_neq(c.node_id[0], 0);
    snprintf(sock, sizeof sock, "/run/user/77/fluxon-c1/%s.sock", c.node_id);
    cr_assert_str_eq(c.socket_path, sock);
    cr_assert_str_eq(c.master_host, "127.0.0.1");
    cr_assert_eq(c.master_port, 7600);
    cr_assert_eq(c.segment_bytes, 1ull << 30);
    cr_assert_eq(c.node_role, FX_NODE_GPU_OWNER);
    cr_assert_eq(c.numa_node, -1);
    cr_assert_eq(c.grant_bytes, 64ull << 20, "1 GiB / 16");
    cr_assert_not(c.has_expected);
    cr_assert_float_eq(c.hot_capacity_ratio, 0.95, 1e-12);
    cr_assert_eq(c.handle_ttl_ms, 30000);
    cr_assert_lt(c.put_plan_ttl_ms, 30000, "a prepared plan expires before a client's default timeout_ms");
    cr_assert_eq(c.heartbeat_interval_ms, 1000);
    cr_assert_eq(c.claim_timeout_ms, 30000);
    cr_assert_eq(c.max_frame_bytes, 64ull << 20);
    cr_assert_str_eq(c.metrics_listen, "");

    unsetenv("XDG_RUNTIME_DIR");
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c2\",\"node_id\":\"n9\"}", &c, err),
                 FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.socket_path, "/tmp/fluxon-c2/n9.sock");
    /* a master on this host: its unix socket instead of TCP (issue 18) */
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c2\",\"master\":\"unix:/run/f/m.sock\"}", &c, err),
                 FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.master_socket, "/run/f/m.sock");
}

Test(config, owner_values)
{
    fx_config_t c;
    char err[ERRCAP];
    const char *j =
        "{\"role\":\"owner\",\"cluster_id\":\"c1\",\"node_id\":\"gpu-3\",\"master\":\"10.0.0.2:7601\","
        "\"socket\":\"/tmp/x.sock\",\"segment_bytes\":\"2GiB\",\"node_role\":\"remote_cache\","
        "\"numa_node\":1,\"reserve\":{\"grant_bytes\":\"256MiB\",\"expected\":{\"value_len\":4718592,"
        "\"payload_capacity_bytes\":\"1GB\"}},\"hot_capacity_ratio\":1,\"handle_ttl_ms\":100,"
        "\"heartbeat_interval_ms\":20,\"claim_timeout_ms\":7,\"metrics_listen\":\"127.0.0.1:9000\","
        "\"log_level\":\"off\"}";
    cr_assert_eq(tc_parse(j, &c, err), FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.node_id, "gpu-3");
    cr_assert_str_eq(c.master_host, "10.0.0.2");
    cr_assert_eq(c.master_port, 7601);
    cr_assert_str_eq(c.master_socket, "");
    cr_assert_str_eq(c.socket_path, "/tmp/x.sock");
    cr_assert_eq(c.segment_bytes, 2ull << 30);
    cr_assert_eq(c.node_role, FX_NODE_REMOTE_CACHE);
    cr_assert_str_eq(fx_node_role_name(c.node_role), "remote_cache");
    cr_assert_eq(c.numa_node, 1);
    cr_assert_eq(c.grant_bytes, 256ull << 20);
    cr_assert(c.has_expected);
    cr_assert_eq(c.expected_value_len, 4718592);
    cr_assert_eq(c.expected_payload_bytes, 1000000000ull);
    cr_assert_float_eq(c.hot_capacity_ratio, 1.0, 1e-12);
    cr_assert_eq(c.handle_ttl_ms, 100);
    cr_assert_eq(c.heartbeat_interval_ms, 20);
    cr_assert_eq(c.claim_timeout_ms, 7);
    cr_assert_str_eq(c.metrics_listen, "127.0.0.1:9000");
    cr_assert_eq(c.log_level, FX_LOG_OFF);
}

/* Expected capacity at the exact limit: a 1 GiB segment fits two 512 MiB grants (its
 * header page is mapped on top of it); a 4718592-byte value gives 113 slots = 533200896
 * payload bytes per grant. A segment of one page holds one one-page grant. */
Test(config, expected_capacity_boundary)
{
    fx_config_t c;
    char err[ERRCAP];
    const char *fmt = "{\"role\":\"owner\",\"cluster_id\":\"c\",\"socket\":\"/tmp/s\","
                      "\"reserve\":{\"grant_bytes\":\"512MiB\",\"expected\":{\"value_len\":4718592,"
                      "\"payload_capacity_bytes\":%s}}}";
    char j[512];
    snprintf(j, sizeof j, fmt, "1066401792");
    cr_assert_eq(tc_parse(j, &c, err), FLUXON_OK, "%s", err);
    snprintf(j, sizeof j, fmt, "1066401793");
    cr_assert_eq(tc_parse(j, &c, err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "reserve.expected.payload_capacity_bytes: 1066401793 needs 3 grants"),
              "%s", err);
    cr_assert(strstr(err, "segment_bytes 1073741824 fits only 2"), "%s", err);
    /* value_len == grant is allowed: one slot per grant */
    const char *eq = "{\"role\":\"owner\",\"cluster_id\":\"c\",\"socket\":\"/tmp/s\",\"segment_bytes\":"
                     "4096,\"reserve\":{\"grant_bytes\":4096,\"expected\":{\"value_len\":1,"
                     "\"payload_capacity_bytes\":4096}}}";
    cr_assert_eq(tc_parse(eq, &c, err), FLUXON_OK, "%s", err);
}

/* heap_reserve_mib (issue 18): the master's default, the owner's (an eighth of its segment
 * and a 32nd of its disk tier, in whole 64 MiB, at most 1 GiB), a chosen value and 0 */
Test(config, heap_reserve_defaults_and_values)
{
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(tc_parse("{\"role\":\"master\",\"cluster_id\":\"c\"}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.heap_reserve_mib, 0, "a master makes no reserve unless asked");
    const struct { const char *seg; uint32_t want; } owners[] = {
        {"\"1GiB\"", 128}, {"\"1400MiB\"", 128}, {"\"700MiB\"", 64}, {"\"72MiB\"", 0}, {"8192", 0},
        {"\"64GiB\"", FX_HEAP_RESERVE_OWNER_MAX_MIB}};
    for (size_t i = 0; i < FX_ARRAY_LEN(owners); i++) {
        char js[256];
        snprintf(js, sizeof js, "{\"role\":\"owner\",\"cluster_id\":\"c\",\"socket\":\"/tmp/s\",\"segment_bytes\":%s}",
                 owners[i].seg);
        cr_assert_eq(tc_parse(js, &c, err), FLUXON_OK, "%s", err);
        cr_assert_eq(c.heap_reserve_mib, owners[i].want, "segment_bytes %s: heap_reserve_mib %u", owners[i].seg,
                     c.heap_reserve_mib);
    }
    /* a disk tier's index comes on top: a 32nd of disk.capacity_bytes (1 GiB / 8 + 4 GiB / 32 = 256 MiB) */
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c\",\"socket\":\"/tmp/s\",\"segment_bytes\":\"1GiB\","
                          "\"disk\":{\"path\":\"/tmp/fx-disk-cfg\",\"capacity_bytes\":\"4GiB\"}}", &c, err),
                 FLUXON_OK, "%s", err);
    cr_assert_eq(c.heap_reserve_mib, 256, "with a disk tier of 4 GiB: %u", c.heap_reserve_mib);
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c\",\"socket\":\"/tmp/s\",\"heap_reserve_mib\":0}",
                          &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.heap_reserve_mib, 0);
    cr_assert_eq(tc_parse("{\"role\":\"master\",\"cluster_id\":\"c\",\"heap_reserve_mib\":65536}", &c, err),
                 FLUXON_OK, "%s", err);
    cr_assert_eq(c.heap_reserve_mib, 65536);
}

Test(config, external_defaults_and_values)
{
    fx_config_t c;
    char err[ERRCAP], suffix[32];
    cr_assert_eq(tc_parse("{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/tmp/o.sock\"}",
                          &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.role, FX_ROLE_EXTERNAL);
    cr_assert_str_eq(c.socket_path, "/tmp/o.sock");
    cr_assert_eq(c.timeout_ms, 30000);
    cr_assert_eq(c.start_timeout_ms, 10000);
    cr_assert_eq(c.log_level, FX_LOG_INFO);
    cr_assert(c.prefault_segment, "a library client prefaults its mapping by default");
    cr_assert_eq(c.segment_touch, FX_TOUCH_AUTO, "segment_touch defaults to auto");
    snprintf(suffix, sizeof suffix, ":%ld", (long)getpid());
    size_t n = strlen(c.node_id), s = strlen(suffix);
    cr_assert(n > s && strcmp(c.node_id + n - s, suffix) == 0, "node_id %s", c.node_id);
    const char *touch_names[3] = {"auto", "off", "on"};
    const int touch_modes[3] = {FX_TOUCH_AUTO, FX_TOUCH_OFF, FX_TOUCH_ON};
    for (int i = 0; i < 3; i++) {
        char js[256];
        snprintf(js, sizeof js, "{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"s\",\"segment_touch\":\"%s\"}",
                 touch_names[i]);
        cr_assert_eq(tc_parse(js, &c, err), FLUXON_OK, "%s", err);
        cr_assert_eq(c.segment_touch, touch_modes[i], "external segment_touch %s", touch_names[i]);
        snprintf(js, sizeof js, "{\"role\":\"owner\",\"cluster_id\":\"c1\",\"node_id\":\"o\",\"master\":\"127.0.0.1:1\","
                 "\"segment_touch\":\"%s\"}", touch_names[i]);
        cr_assert_eq(tc_parse(js, &c, err), FLUXON_OK, "%s", err);
        cr_assert_eq(c.segment_touch, touch_modes[i], "owner segment_touch %s", touch_names[i]);
    }

    cr_assert_eq(tc_parse("{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"s\","
                          "\"timeout_ms\":1,\"node_id\":\"me:42\",\"cluster_token\":\"t\","
                          "\"log_level\":\"WARN\"}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.timeout_ms, 1);
    cr_assert_str_eq(c.node_id, "me:42");
    cr_assert_str_eq(c.cluster_token, "t");
    cr_assert_eq(c.log_level, FX_LOG_WARN);
}

struct tc_bad {
    const char *json;
    const char *want; /* substring the message must contain (field path first) */
};

#define O "{\"role\":\"owner\",\"cluster_id\":\"c\",\"socket\":\"/tmp/s\","
#define M "{\"role\":\"master\",\"cluster_id\":\"c\","
#define E "{\"role\":\"external\",\"cluster_id\":\"c\",\"socket\":\"/tmp/s\","
static const struct tc_bad tc_bads[] = {
    {M "\"inflight_ttl_ms\":\"60000\"}", "inflight_ttl_ms: \"60000\" is not an integer"},
    {M "\"listen\":7600}", "listen: 7600 is not a string"},
    {O "\"colour\":1}", "colour: unknown field for role owner"},
    {M "\"target_copy_after_fetch\":\"move\"}", "target_copy_after_fetch: \"move\""},
    {O "\"target_copy_after_fetch\":\"keep\"}", "target_copy_after_fetch: unknown field for role owner"},
    /* a typo within two edits of a field of the role (new user's finding 15) */
    {O "\"segmnet_bytes\":4096}", "segmnet_bytes: unknown field for role owner (did you mean segment_bytes?)"},
    {M "\"lisen\":\"127.0.0.1:1\"}", "lisen: unknown field for role master (did you mean listen?)"},
    {O "\"reserve\":{\"grant_byte\":4096}}", "reserve.grant_byte: unknown field for role owner (did you mean reserve.grant_bytes?)"},
    {O "\"reserve\":{\"grant\":4096}}", "reserve.grant: unknown field for role owner"},
    {O "\"reserve\":{\"expected\":{\"value_len\":1,\"payload_capacity_bytes\":1,\"x\":1}}}",
     "reserve.expected.x: unknown field"},
    {O "\"segment_bytes\":\"1GB1\"}", "segment_bytes: \"1GB1\" is not a size"},
    {O "\"segment_bytes\":\"1gib\"}", "segment_bytes: \"1gib\" is not a size"},
    {O "\"segment_bytes\":\"1.5GiB\"}", "segment_bytes: \"1.5GiB\" is not a size"},
    {O "\"segment_bytes\":1.5}", "segment_bytes: 1.5 is not a size"},
    {O "\"segment_bytes\":-4096}", "segment_bytes: -4096 is not a size"},
    /* past 2^53 a JSON number is a double: named as such, not as the number it rounded to */
    {O "\"segment_bytes\":9007199254740993}", "segment_bytes: 9007199254740992 or so is not a size: a JSON number is "
                                              "exact only below 2^53"},
    {O "\"segment_bytes\":true}", "segment_bytes: true is not a size"},
    {O "\"segment_bytes\":\"16777216TiB\"}", "segment_bytes: \"16777216TiB\" is too large: a size is at most "
                                             "18446744073709551615 bytes"},
    {"{\"role\":\"master\"}", "cluster_id: missing (required)"},
    {"{\"role\":\"master\",\"cluster_id\":\"a/b\"}", "cluster_id: \"a/b\" must be 1..63"},
    {"{\"role\":\"master\",\"cluster_id\":\"\"}", "cluster_id: \"\" must be 1..63"},
    {"{\"role\":\"master\",\"cluster_id\":\"0123456789012345678901234567890123456789012345678901234567890123\"}",
     "cluster_id:"},
    {M "\"listen\":\"abc\"}", "listen: \"abc\" is not host:port"},
    {M "\"listen\":\"127.0.0.1\"}", "listen: \"127.0.0.1\" is not host:port"},
    {M "\"listen\":\"127.0.0.1:65536\"}", "listen: \"127.0.0.1:65536\" is not host:port"},
    {M "\"metrics_listen\":\"1.2.3.4:x\"}", "metrics_listen:"},
    {O "\"master\":\"127.0.0.1:0\"}", "master: \"127.0.0.1:0\" port must be > 0"},
    {O "\"master\":\"unix:\"}", "master: \"unix:\" names no path after \"unix:\""},
    {O "\"master\":\"/run/m.sock\"}", "master: \"/run/m.sock\" is neither host:port"},
    {O "\"master\":7600}", "master: 7600 is not a string"},
    {O "\"master\":\"unix:/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
     "has a path longer than 107 bytes"},
    {M "\"socket\":\"\"}", "socket: \"\" must not be empty"},
    {O "\"hot_capacity_ratio\":-0.5}", "hot_capacity_ratio: -0.5 must be in (0, 1]"},
    {O "\"hot_capacity_ratio\":1.01}", "hot_capacity_ratio: 1.01 must be in (0, 1]"},
    {O "\"hot_capacity_ratio\":0}", "hot_capacity_ratio: 0 must be in (0, 1]"},
    {O "\"hot_capacity_ratio\":\"0.5\"}", "hot_capacity_ratio: \"0.5\" is not a number"},
    {O "\"reserve\":{\"grant_bytes\":0}}", "reserve.grant_bytes: 0 must be > 0"},
    {O "\"reserve\":{\"grant_bytes\":100}}", "reserve.grant_bytes: 100 is not a multiple of 4096"},
    {O "\"segment_bytes\":4097}", "segment_bytes: 4097 is not a multiple of 4096"},
    {O "\"segment_bytes\":0}", "segment_bytes: 0 must be > 0"},
    {"", "config: is empty: a config is a JSON object"},
    {O "\"segment_bytes\":\"1MiB\",\"hot_capacity_bytes\":1}", "hot_capacity_bytes: 1 is less than one 4096-byte slot"},
    {" \n\t", "config: is empty"},
    {M "\"cluster_token\":\"s3cret\\u0000evil\"}", "a string holds \\u0000 at byte"},
    {"{\"role\":\"owner\\u0000junk\",\"cluster_id\":\"c\"}", "a string holds \\u0000 at byte 14"},
    {O "\"segment_bytes\":\"18446744073709547520\"}", "segment_bytes: 18446744073709547520 is too large: at most 70368744177664"},
    {O "\"segment_bytes\":\"512MiB\",\"reserve\":{\"grant_bytes\":\"1GiB\"}}",
     "segment_bytes: 536870912 is smaller than one grant (reserve.grant_bytes 1073741824)"},
    {O "\"reserve\":{\"grant_bytes\":8192,\"expected\":{\"value_len\":8193,"
       "\"payload_capacity_bytes\":1}}}",
     "reserve.expected.value_len: 8193 is larger than one grant (reserve.grant_bytes 8192)"},
    {O "\"segment_bytes\":\"1GiB\",\"reserve\":{\"expected\":{\"value_len\":4096,"
       "\"payload_capacity_bytes\":\"2GiB\"}}}",
     "reserve.expected.payload_capacity_bytes: 2147483648 needs"},
    {O "\"reserve\":{\"expected\":{\"value_len\":0,\"payload_capacity_bytes\":1}}}",
     "reserve.expected.value_len: 0 must be > 0"},
    {O "\"reserve\":{\"expected\":{\"value_len\":4096}}}",
     "reserve.expected.payload_capacity_bytes: missing (required)"},
    {O "\"reserve\":{\"expected\":[]}}", "reserve.expected: [...] is not an object"},
    {O "\"reserve\":5}", "reserve: 5 is not an object"},
    {M "\"reserve\":{\"grant_bytes\":4096}}", "reserve: unknown field for role master"},
    {E "\"reserve\":{}}", "reserve: unknown field for role external"},
    {E "\"segment_bytes\":4096}", "segment_bytes: unknown field for role external"},
    {M "\"node_id\":\"x\"}", "node_id: unknown field for role master"},
    {"{\"role\":\"client\",\"cluster_id\":\"c\"}", "role: \"client\" must be one of"},
    {"{\"role\":7,\"cluster_id\":\"c\"}", "role: 7 is not a string"},
    {"{\"cluster_id\":\"c\"}", "role: missing (required)"},
    {"{\"Role\":\"master\",\"cluster_id\":\"c\"}", "role: missing (required)"},
    {"{\"role\":\"external\",\"cluster_id\":\"c\"}", "socket: missing (required)"},
    {E "\"socket\":\"\"}", "socket: duplicate field"},
    {"{\"role\":\"external\",\"cluster_id\":\"c\",\"socket\":\"\"}", "socket: \"\" must not be empty"},
    {"{\"role\":\"master\",\"cluster_id\":\"c\",", "config: not valid JSON near byte"},
    {"{\"role\":\"master\"} x", "config: not valid JSON near byte"},
    {"[1,2]", "config: [...] is not a JSON object"},
    {M "\"inflight_ttl_ms\":0}", "inflight_ttl_ms: 0 must be an integer in [1, 86400000]"},
    {M "\"heartbeat_timeout_ms\":86400001}", "heartbeat_timeout_ms: 86400001 must be"},
    {O "\"handle_ttl_ms\":1.5}", "handle_ttl_ms: 1.5 must be an integer"},
    {O "\"put_plan_ttl_ms\":0}", "put_plan_ttl_ms: 0 must be an integer in [1, 86400000]"},
    {O "\"claim_timeout_ms\":-1}", "claim_timeout_ms: -1 must be"},
    {E "\"timeout_ms\":0}", "timeout_ms: 0 must be"},
    {E "\"prefault_segment\":1}", "prefault_segment: 1 must be true or false"},
    {O "\"huge_pages\":\"yes\"}", "huge_pages: \"yes\" must be one of off, try, on"},
    {O "\"segment_touch\":\"always\"}", "segment_touch: \"always\" must be one of auto, off, on"},
    {O "\"eviction_policy\":\"fifo\"}", "eviction_policy: \"fifo\" must be one of lru, s3fifo, slru"},
    {E "\"transport\":\"shm\"}", "transport: \"shm\" must be one of ring, socket"},
    {O "\"node_role\":1}", "node_role: 1 is not a string: must be one of gpu_owner, remote_cache"},
    {O "\"writeback_admission\":3}", "writeback_admission: 3 is not a string: must be one of all, second_touch"},
    {O "\"writeback_watermark\":\"abc\"}", "writeback_watermark: \"abc\" is not a number: must be in [0, 1)"},
    {O "\"writeback_watermark\":1}", "writeback_watermark: 1 must be in [0, 1)"},
    {E "\"segment_touch\":true}", "segment_touch: true is not a string"},
    {M "\"segment_touch\":\"off\"}", "segment_touch: unknown field for role master"},
    {O "\"heap_reserve_mib\":-1}", "heap_reserve_mib: -1 must be an integer in [0, 65536]"},
    {M "\"heap_reserve_mib\":65537}", "heap_reserve_mib: 65537 must be an integer in [0, 65536]"},
    {O "\"heap_reserve_mib\":\"64MiB\"}", "heap_reserve_mib: \"64MiB\" is not an integer"},
    {E "\"heap_reserve_mib\":64}", "heap_reserve_mib: unknown field for role external"},
    {O "\"prefault_segment\":false}", "prefault_segment: unknown field for role owner"},
    {M "\"start_timeout_ms\":1e300}", "start_timeout_ms: 1e+300 must be"},
    {O "\"numa_node\":-2}", "numa_node: -2 must be an integer in [-1,"},
    {O "\"numa_node\":\"0\"}", "numa_node: \"0\" is not an integer"},
    {O "\"node_role\":\"gpu\"}", "node_role: \"gpu\" must be one of gpu_owner, remote_cache"},
    {M "\"log_level\":\"loud\"}", "log_level: \"loud\" must be one of"},
    {M "\"log_level\":null}", "log_level: null is not a string"},
    {M "\"max_frame_bytes\":4095}", "max_frame_bytes: 4095 must be >= 4096"},
    {M "\"cluster_token\":5}", "cluster_token: (not shown) is not a string"},
    {O "\"node_id\":\"a b\"}", "node_id: \"a b\" must be 1..63"},
    {"{\"role\":\"owner\",\"cluster_id\":"
     "\"ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\",\"node_id\":"
     "\"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\"}",
     "socket: \"/"}, /* default path longer than 107 bytes */
    {M "\"listen\":\"1.2.3.4:80\",\"listen\":\"1.2.3.4:81\"}", "listen: duplicate field"},
    /* message chaos (issue 17) */
    {M "\"test\":{\"drop_ppm\":1000001}}", "test.drop_ppm: 1000001 must be an integer in 0..1000000 (parts per million)"},
    {O "\"test\":{\"dup_ppm\":-1}}", "test.dup_ppm: -1 must be an integer in 0..1000000"},
    {O "\"test\":{\"delay_ppm\":10}}", "test.delay_ms: missing or 0 (required > 0 with test.delay_ppm)"},
    {M "\"test\":{\"delay_ppm\":10,\"delay_ms\":60001}}", "test.delay_ms: 60001 must be an integer in 0..60000 (ms)"},
    {O "\"test\":{\"drop_ppm\":600000,\"dup_ppm\":500000}}", "test.drop_ppm: drop_ppm 600000 + delay_ppm 0 + dup_ppm 500000 exceed 1000000"},
    {M "\"test\":{\"seed\":1.5}}", "test.seed: 1.5 must be an integer in 0..2^53-1"},
    {M "\"test\":{\"fault_message\":\"GRANT\"}}", "test.fault_message: unknown field for role master"},
    {E "\"test\":{\"drop_ppm\":1}}", "test: unknown field for role external"},
};
/* One role's poll window default under its variable: unset, the default; "7", 7; the field
 * over it; "7us", ignored (the default); the variable restored after. */
static void tc_poll_env(const char *var, const char *json, const char *json_off, uint32_t def)
{
    fx_config_t c;
    char err[ERRCAP], saved[32] = "";
    const char *keep = getenv(var);
    if (keep) snprintf(saved, sizeof saved, "%s", keep);
    unsetenv(var);
    cr_assert_eq(tc_parse(json, &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.idle_poll_us, def, "%s unset: the default", var);
    setenv(var, "7", 1);
    cr_assert_eq(tc_parse(json, &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.idle_poll_us, 7, "%s moves the default", var);
    cr_assert_eq(tc_parse(json_off, &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.idle_poll_us, 0, "the field wins (0: off)");
    setenv(var, "7us", 1);
    cr_assert_eq(tc_parse(json, &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.idle_poll_us, def, "a bad %s is ignored", var);
    if (keep) setenv(var, saved, 1);
    else unsetenv(var);
}

/* issue 38: the poll window of the master and of a client (idle_poll_us): a default the
 * environment may move (FLUXON_MASTER_POLL_US, FLUXON_CLIENT_POLL_US; ignored when not an
 * integer in range), the field over both; no such field for an owner */
Test(config, master_idle_poll)
{
    fx_config_t c;
    char err[ERRCAP];
    tc_poll_env("FLUXON_MASTER_POLL_US", M "\"cluster_token\":\"t\"}", M "\"idle_poll_us\":0}",
                FX_MASTER_POLL_DEFAULT_US);
    tc_poll_env("FLUXON_CLIENT_POLL_US", E "\"timeout_ms\":1000}", E "\"idle_poll_us\":0}",
                FX_CLIENT_POLL_DEFAULT_US);
    cr_assert_eq(tc_parse(M "\"idle_poll_us\":250}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.idle_poll_us, 250);
    cr_assert_eq(tc_parse(M "\"idle_poll_us\":1000001}", &c, err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "idle_poll_us") && strstr(err, "1000000"), "%s", err);
    cr_assert_eq(tc_parse(M "\"idle_poll_us\":-1}", &c, err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "idle_poll_us"), "%s", err);
    cr_assert_eq(tc_parse(O "\"idle_poll_us\":10}", &c, err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "idle_poll_us: unknown field for role owner"), "%s", err);
}
#undef O
#undef M
#undef E

Test(config, bad_configs)
{
    cr_assert_geq(FX_ARRAY_LEN(tc_bads), 16);
    unsetenv("XDG_RUNTIME_DIR");
    for (size_t i = 0; i < FX_ARRAY_LEN(tc_bads); i++) {
        fx_config_t c, before;
        char err[ERRCAP];
        memset(&c, 0x5A, sizeof c);
        before = c;
        int rc = fx_config_parse(tc_bads[i].json, &c, err, sizeof err);
        cr_assert_eq(rc, FLUXON_ERR_CONFIG, "case %zu (%s): rc %d", i, tc_bads[i].json, rc);
        cr_assert(strstr(err, tc_bads[i].want) != NULL, "case %zu (%s): message \"%s\" lacks \"%s\"",
                  i, tc_bads[i].json, err, tc_bads[i].want);
        cr_assert(memcmp(&c, &before, sizeof c) == 0, "case %zu: cfg written on error", i);
    }
}

/* An escaped backslash followed by the text "u0000" is no NUL: the token keeps it all. */
Test(config, escaped_backslash_before_u0000_is_text)
{
    fx_config_t c;
    char err[ERRCAP];
    const char *j = "{\"role\":\"master\",\"cluster_id\":\"c\",\"cluster_token\":\"a\\\\u0000b\"}";
    cr_assert_eq(fx_config_parse(j, &c, err, sizeof err), FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.cluster_token, "a\\u0000b");
}

/* Too deep a document is named as such, wherever the parser stops; a shallow one with a
 * stray byte at the same offset is not. */
Test(config, nesting_past_the_parser_limit_is_named)
{
    static char deep[8 * 1100 + 16], flat[1100];
    size_t at = 0;
    for (int i = 0; i < 1001; i++) at += (size_t)snprintf(deep + at, sizeof deep - at, "{\"a\":");
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(fx_config_parse(deep, &c, err, sizeof err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "nested deeper than cJSON's limit"), "%s", err);
    memset(flat, ' ', 1000);
    memcpy(flat, "{\"role\":\"master\"", 16);
    flat[1000] = '#';
    cr_assert_eq(fx_config_parse(flat, &c, err, sizeof err), FLUXON_ERR_CONFIG);
    cr_assert(!strstr(err, "nested"), "%s", err);
}

Test(config, token_is_never_echoed)
{
    fx_config_t c;
    char err[ERRCAP], j[1024];
    char tok[301];
    memset(tok, 'Q', 300);
    tok[300] = 0;
    snprintf(j, sizeof j, "{\"role\":\"master\",\"cluster_id\":\"c\",\"cluster_token\":\"%s\"}", tok);
    cr_assert_eq(tc_parse(j, &c, err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "cluster_token: (300 bytes, not shown) is longer than 255 bytes"), "%s", err);
    cr_assert_null(strstr(err, "QQQ"));
    tok[255] = 0;
    snprintf(j, sizeof j, "{\"role\":\"master\",\"cluster_id\":\"c\",\"cluster_token\":\"%s\"}", tok);
    cr_assert_eq(tc_parse(j, &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(strlen(c.cluster_token), 255);
}

Test(config, null_and_small_buffers)
{
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(fx_config_parse(NULL, &c, err, sizeof err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "config:"), "%s", err);
    cr_assert_eq(fx_config_parse("{\"role\":\"master\",\"cluster_id\":\"c\"}", NULL, err, sizeof err),
                 FLUXON_ERR_CONFIG);
    cr_assert_eq(fx_config_parse(NULL, &c, NULL, 0), FLUXON_ERR_CONFIG);
    cr_assert_eq(fx_config_parse("{}", &c, NULL, 0), FLUXON_ERR_CONFIG);
    char small[8];
    memset(small, 'x', sizeof small);
    cr_assert_eq(fx_config_parse("{\"role\":\"master\"}", &c, small, sizeof small), FLUXON_ERR_CONFIG);
    cr_assert_eq(small[7], 0);
    cr_assert_str_eq(small, "cluster");
    cr_assert_eq(fx_config_parse("{\"role\":\"master\",\"cluster_id\":\"c\"}", &c, small, sizeof small),
                 FLUXON_OK);
    cr_assert_str_eq(small, "");
}

Test(config, load_file)
{
    char path[] = "/tmp/fluxon-test-config-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *j = "{\"role\":\"master\",\"cluster_id\":\"filec\",\"listen\":\"127.0.0.1:0\"}\n";
    cr_assert_eq(write(fd, j, strlen(j)), (ssize_t)strlen(j));
    close(fd);
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(fx_config_load_file(path, &c, err, sizeof err), FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.cluster_id, "filec");
    cr_assert_eq(c.listen_port, 0);
    unlink(path);
    cr_assert_eq(fx_config_load_file(path, &c, err, sizeof err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, path) && strstr(err, "No such file"), "%s", err);
    cr_assert_eq(fx_config_load_file("/tmp", &c, err, sizeof err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "config:"), "%s", err);
    cr_assert_eq(fx_config_load_file(NULL, &c, err, sizeof err), FLUXON_ERR_CONFIG);
}

Test(config, parse_size_table)
{
    static const struct { const char *s; int rc; uint64_t v; } t[] = {
        {"0", 0, 0}, {"4096", 0, 4096}, {"00012", 0, 12}, {"7B", 0, 7}, {"1KiB", 0, 1024},
        {"512MiB", 0, 512ull << 20}, {"1GiB", 0, 1ull << 30}, {"2TiB", 0, 2ull << 40},
        {"3KB", 0, 3000}, {"5MB", 0, 5000000}, {"1GB", 0, 1000000000}, {"4TB", 0, 4000000000000ull},
        {"18446744073709551615", 0, UINT64_MAX}, {"16777215TiB", 0, 16777215ull << 40},
        {"18446744073709551616", -2, 0}, {"16777216TiB", -2, 0}, {"18446744073709552TB", -2, 0},
        {"99999999999999999999999KiB", -2, 0}, {"99999999999999999999999XiB", -1, 0},
        {"1.5GiB", -1, 0}, {"12 MiB", -1, 0}, {"-1", -1, 0}, {"GB", -1, 0}, {"", -1, 0},
        {" 1", -1, 0}, {"1 ", -1, 0}, {"1gib", -1, 0}, {"1Gi", -1, 0}, {"1KIB", -1, 0},
        {"1kB", -1, 0}, {"+1", -1, 0}, {"1e3", -1, 0}, {"0x10", -1, 0}, {"1GiBB", -1, 0},
    };
    for (size_t i = 0; i < FX_ARRAY_LEN(t); i++) {
        uint64_t v = 12345;
        int rc = fx_parse_size(t[i].s, &v);
        cr_assert_eq(rc, t[i].rc, "\"%s\": rc %d", t[i].s, rc);
        if (rc == 0) cr_assert_eq(v, t[i].v, "\"%s\": %llu", t[i].s, (unsigned long long)v);
        else cr_assert_eq(v, 12345, "\"%s\" wrote output on failure", t[i].s);
    }
    uint64_t v;
    cr_assert_eq(fx_parse_size(NULL, &v), -1);
    cr_assert_eq(fx_parse_size("1", NULL), -1);
}

Test(config, parse_hostport_table)
{
    static const struct { const char *s; int rc; const char *host; unsigned port; } t[] = {
        {"127.0.0.1:7600", 0, "127.0.0.1", 7600}, {"0.0.0.0:0", 0, "0.0.0.0", 0},
        {"255.255.255.255:65535", 0, "255.255.255.255", 65535}, {"localhost:80", 0, "localhost", 80},
        {"10.1.2.3:00080", 0, "10.1.2.3", 80},
        {"127.0.0.1", -1, 0, 0}, {"127.0.0.1:", -1, 0, 0}, {":80", -1, 0, 0},
        {"127.0.0.1:65536", -1, 0, 0}, {"127.0.0.1:99999", -1, 0, 0}, {"127.0.0.1:123456", -1, 0, 0},
        {"127.0.0.1:8a", -1, 0, 0}, {"127.0.0.1:-1", -1, 0, 0}, {"127.0.0.1:+80", -1, 0, 0},
        {"127.0.0.1:80 ", -1, 0, 0}, {" 127.0.0.1:80", -1, 0, 0}, {"256.0.0.1:80", -1, 0, 0},
        {"1.2.3:80", -1, 0, 0}, {"1.2.3.4.5:80", -1, 0, 0}, {"01.2.3.4:80", -1, 0, 0},
        {"1..3.4:80", -1, 0, 0}, {"abc:80", -1, 0, 0}, {"example.com:80", -1, 0, 0},
        {"LOCALHOST:80", -1, 0, 0}, {"localhost:80:90", -1, 0, 0}, {"[::1]:80", -1, 0, 0},
        {"1.2.3.4:80x", -1, 0, 0}, {"", -1, 0, 0}, {"abc", -1, 0, 0}, {"1.2.3.1234:80", -1, 0, 0},
    };
    for (size_t i = 0; i < FX_ARRAY_LEN(t); i++) {
        char host[FX_HOST_MAX] = "";
        uint16_t port = 1;
        int rc = fx_parse_hostport(t[i].s, host, sizeof host, &port);
        cr_assert_eq(rc, t[i].rc, "\"%s\": rc %d", t[i].s, rc);
        if (rc == 0) {
            cr_assert_str_eq(host, t[i].host, "\"%s\"", t[i].s);
            cr_assert_eq(port, t[i].port, "\"%s\"", t[i].s);
        }
    }
    char tiny[4];
    uint16_t p;
    cr_assert_eq(fx_parse_hostport("127.0.0.1:1", tiny, sizeof tiny, &p), -1);
    cr_assert_eq(fx_parse_hostport(NULL, tiny, sizeof tiny, &p), -1);
    cr_assert_eq(fx_parse_hostport("1.2.3.4:5", NULL, 0, NULL), 0);
}

Test(config, names)
{
    cr_assert_str_eq(fx_role_name(FX_ROLE_OWNER), "owner");
    cr_assert_str_eq(fx_role_name(FX_ROLE_EXTERNAL), "external");
    cr_assert_str_eq(fx_role_name((fx_role_t)99), "none");
    cr_assert_str_eq(fx_node_role_name(FX_NODE_GPU_OWNER), "gpu_owner");
    cr_assert_not_null(fx_node_role_name((fx_node_role_t)42));
}

/* Every prefix of a good config and thousands of byte mutations: must never crash
 * (ASan/UBSan build) and must either succeed or fail with a message. */
Test(config, never_crashes)
{
    const char *good =
        "{\"role\":\"owner\",\"cluster_id\":\"c1\",\"socket\":\"/tmp/s\",\"segment_bytes\":\"1GiB\","
        "\"reserve\":{\"grant_bytes\":\"512MiB\",\"expected\":{\"value_len\":4096,"
        "\"payload_capacity_bytes\":1e3}},\"hot_capacity_ratio\":0.5,\"numa_node\":-1,"
        "\"master\":\"localhost:1\",\"log_level\":\"info\",\"cluster_token\":\"x\\u0041y\"}";
    size_t n = strlen(good);
    char buf[1024], err[ERRCAP];
    fx_config_t c;
    for (size_t k = 0; k <= n; k++) {
        memcpy(buf, good, k);
        buf[k] = 0;
        int rc = fx_config_parse(buf, &c, err, sizeof err);
        cr_assert(rc == FLUXON_OK || (rc == FLUXON_ERR_CONFIG && err[0]), "prefix %zu", k);
    }
    static const char alphabet[] = "{}[]\":,.-+eE0123456789 \\abnrtu\x01\xff";
    srand(7);
    for (int it = 0; it < 20000; it++) {
        memcpy(buf, good, n + 1);
        int edits = 1 + rand() % 4;
        for (int e = 0; e < edits; e++)
            buf[rand() % n] = alphabet[rand() % (sizeof alphabet - 1)];
        int rc = fx_config_parse(buf, &c, err, sizeof err);
        cr_assert(rc == FLUXON_OK || (rc == FLUXON_ERR_CONFIG && err[0]), "mutation %d", it);
    }
    /* deep nesting is refused by cJSON's nesting limit, not the stack */
    static char deep[200010];
    memset(deep, '[', 200000);
    deep[200000] = 0;
    cr_assert_eq(fx_config_parse(deep, &c, err, sizeof err), FLUXON_ERR_CONFIG);
}

/* issue 15: eviction_policy and reserve.idle_grant_return_ms */
Test(config, eviction_policy_and_idle_grant_return)
{
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\"}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.eviction_policy, FX_EVICT_S3FIFO, "the default");
    cr_assert_eq(c.idle_grant_return_ms, 2000);
    const char *names[] = {"lru", "s3fifo", "slru"};
    int kinds[] = {FX_EVICT_LRU, FX_EVICT_S3FIFO, FX_EVICT_SLRU};
    for (int i = 0; i < 3; i++) {
        char js[256];
        snprintf(js, sizeof js,
                 "{\"role\":\"owner\",\"cluster_id\":\"c1\",\"eviction_policy\":\"%s\","
                 "\"reserve\":{\"idle_grant_return_ms\":250}}", names[i]);
        cr_assert_eq(tc_parse(js, &c, err), FLUXON_OK, "%s", err);
        cr_assert_eq(c.eviction_policy, kinds[i]);
        cr_assert_eq(c.idle_grant_return_ms, 250);
    }
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"eviction_policy\":\"lfu\"}", &c, err),
                 FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "eviction_policy") && strstr(err, "lfu") && strstr(err, "lru, s3fifo, slru"), "%s", err);
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"reserve\":{\"idle_grant_return_ms\":0}}", &c,
                          err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "reserve.idle_grant_return_ms"), "%s", err);
    cr_assert_eq(tc_parse("{\"role\":\"master\",\"cluster_id\":\"c1\",\"eviction_policy\":\"lru\"}", &c, err),
                 FLUXON_ERR_CONFIG, "an owner field");
}

/* the message chaos fields (issue 17): master and owners, off by default */
Test(config, test_chaos_fields)
{
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\"}", &c, err), FLUXON_OK, "%s", err);
    cr_assert(!c.chaos_drop_ppm && !c.chaos_delay_ppm && !c.chaos_delay_ms && !c.chaos_dup_ppm && !c.chaos_seed, "off by default");
    cr_assert_eq(tc_parse("{\"role\":\"master\",\"cluster_id\":\"c1\",\"test\":{\"drop_ppm\":10,\"delay_ppm\":20,"
                          "\"delay_ms\":300,\"dup_ppm\":30,\"seed\":77}}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.chaos_drop_ppm, 10);
    cr_assert_eq(c.chaos_delay_ppm, 20);
    cr_assert_eq(c.chaos_delay_ms, 300);
    cr_assert_eq(c.chaos_dup_ppm, 30);
    cr_assert_eq(c.chaos_seed, 77);
}

/* client_limits (issue 44 C3): owner only, defaults, values, and errors naming the field */
Test(config, client_limits)
{
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\"}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.client_max_pinned_bytes, 0, "0: three quarters of the hot tier");
    cr_assert_eq(c.client_max_handles, 4096);
    cr_assert_eq(c.client_max_plans, 1024);
    cr_assert_eq(c.client_pin_expire_ms, 600000);
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"client_limits\":{\"max_pinned_bytes\":\"1GiB\","
                          "\"max_handles\":7,\"max_plans\":3,\"pin_expire_ms\":250}}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.client_max_pinned_bytes, 1ull << 30);
    cr_assert_eq(c.client_max_handles, 7);
    cr_assert_eq(c.client_max_plans, 3);
    cr_assert_eq(c.client_pin_expire_ms, 250);
    static const struct tc_bad bad[] = {
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"client_limits\":{\"max_handles\":0}}",
         "client_limits.max_handles: 0 must be an integer in [1, 4294967295]"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"client_limits\":{\"max_plans\":1.5}}", "client_limits.max_plans"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"client_limits\":{\"pin_expire_ms\":0}}",
         "client_limits.pin_expire_ms"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"client_limits\":{\"max_pinned_bytes\":\"lots\"}}",
         "client_limits.max_pinned_bytes: \"lots\" is not a size"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"client_limits\":{\"max_pins\":1}}",
         "client_limits.max_pins: unknown field"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"client_limits\":3}", "client_limits"},
        {"{\"role\":\"master\",\"cluster_id\":\"c1\",\"client_limits\":{}}", "client_limits: unknown field for role master"},
    };
    for (size_t i = 0; i < FX_ARRAY_LEN(bad); i++) {
        cr_assert_eq(tc_parse(bad[i].json, &c, err), FLUXON_ERR_CONFIG, "case %zu", i);
        cr_assert(strstr(err, bad[i].want), "case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].want);
    }
}

/* tenants (issue 42): the owner's "tenants", an external's "tenant" and "tenant_token" */
Test(config, tenants)
{
    { /* issue 42: a tenant's disk quota, a size */
        fx_config_t dq;
        char e2[512];
        cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"t\","
                              "\"disk_quota_bytes\":\"2MiB\"}}}", &dq, e2), FLUXON_OK, "%s", e2);
        cr_assert_eq(dq.tenants[0].disk_quota_bytes, 2u << 20);
        cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"t\","
                              "\"disk_quota_bytes\":\"lots\"}}}", &dq, e2), FLUXON_ERR_CONFIG);
        cr_assert(strstr(e2, "tenants.acme.disk_quota_bytes"), "%s", e2);
    }
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(tc_parse("{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/s\"}", &c, err), FLUXON_OK, "%s",
                 err);
    cr_assert_str_eq(c.tenant, "default");
    cr_assert_str_eq(c.tenant_token, "");
    cr_assert_eq(tc_parse("{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/s\",\"tenant\":\"team-A.1_x\","
                          "\"tenant_token\":\"s3cret\"}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.tenant, "team-A.1_x");
    cr_assert_str_eq(c.tenant_token, "s3cret");
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\"}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.n_tenants, 0);
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"a\"},"
                          "\"default\":{},\"b\":{\"token\":\"bb\"}}}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.n_tenants, 3);
    cr_assert(!strcmp(c.tenants[0].name, "acme") && !strcmp(c.tenants[0].token, "a"));
    cr_assert(!strcmp(c.tenants[1].name, "default") && !c.tenants[1].token[0]);
    cr_assert(!strcmp(c.tenants[2].name, "b") && !strcmp(c.tenants[2].token, "bb"));
    cr_assert(!c.tenants[0].has_pinned_max);
    cr_assert_float_eq(c.pin_budget_ratio, 0.5, 1e-9, "pin_budget_ratio's default");
    /* issue 42: a tenant's pin budget, the owner's pin ratio */
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"pin_budget_ratio\":0.25,\"tenants\":{\"acme\":"
                          "{\"token\":\"a\",\"pinned_bytes_max\":\"64MiB\"},\"default\":{\"pinned_bytes_max\":0}}}",
                          &c, err), FLUXON_OK, "%s", err);
    cr_assert(c.tenants[0].has_pinned_max && c.tenants[0].pinned_bytes_max == 64ull << 20);
    cr_assert(c.tenants[1].has_pinned_max && c.tenants[1].pinned_bytes_max == 0);
    cr_assert_float_eq(c.pin_budget_ratio, 0.25, 1e-9);
    cr_assert(!c.tenants[0].quota_bytes && !c.tenants[0].guaranteed_bytes, "no quota, no guarantee by default");
    /* issue 42 quotas: a quota and a guarantee per tenant, the admin token */
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenant_admin_token\":\"adm\",\"tenants\":"
                          "{\"acme\":{\"token\":\"a\",\"quota_bytes\":\"64MiB\",\"guaranteed_bytes\":\"16MiB\"},"
                          "\"default\":{\"guaranteed_bytes\":4096}}}", &c, err), FLUXON_OK, "%s", err);
    cr_assert(c.tenants[0].quota_bytes == 64ull << 20 && c.tenants[0].guaranteed_bytes == 16ull << 20);
    cr_assert(!c.tenants[1].quota_bytes && c.tenants[1].guaranteed_bytes == 4096);
    cr_assert_str_eq(c.tenant_admin_token, "adm");
    char many[4096] = "{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{";
    for (int i = 0; i <= FX_TENANTS_MAX; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s\"t%d\":{\"token\":\"x\"}", i ? "," : "", i);
    strcat(many, "}}");
    const struct tc_bad bad[] = {
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"a b\":{\"token\":\"x\"}}}",
         "tenants: \"a b\" is not a tenant name (1..32 characters of [A-Za-z0-9_.-])"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"\":{\"token\":\"x\"}}}", "tenants: \"\" is not a tenant name"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"abcdefghijabcdefghijabcdefghijabc\":{\"token\":\"x\"}}}",
         "is not a tenant name (1..32 characters"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{}}}",
         "tenants.acme.token: missing or empty (required, 1..255 bytes; only \"default\" may have none)"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"\"}}}", "tenants.acme.token: missing or empty"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":7}}}",
         "tenants.acme.token: (not shown) is not a string"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"x\",\"quota\":1}}}",
         "tenants.acme.quota: is not a field of a tenant (known: token, pinned_bytes_max, quota_bytes, guaranteed_bytes, disk_quota_bytes)"},
        /* issue 42 quotas */
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"x\",\"quota_bytes\":\"1MiB\","
         "\"guaranteed_bytes\":\"2MiB\"}}}",
         "tenants.acme: guaranteed_bytes (2097152) is above quota_bytes (1048576)"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"x\",\"quota_bytes\":-5}}}",
         "tenants.acme.quota_bytes"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"x\",\"guaranteed_bytes\":\"many\"}}}",
         "tenants.acme.guaranteed_bytes"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenant_admin_token\":\"\"}", "tenant_admin_token"},
        {"{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/s\",\"tenant_admin_token\":\"a\"}",
         "tenant_admin_token: unknown field for role external"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"x\",\"pinned_bytes_max\":-1}}}",
         "tenants.acme.pinned_bytes_max"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"x\",\"pinned_bytes_max\":\"lots\"}}}",
         "tenants.acme.pinned_bytes_max"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"pin_budget_ratio\":1.5}", "pin_budget_ratio: 1.5 must be a number in [0, 1]"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"pin_budget_ratio\":\"half\"}", "pin_budget_ratio"},
        {"{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/s\",\"pin_budget_ratio\":0.5}",
         "pin_budget_ratio: unknown field for role external"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"x\"},\"acme\":{\"token\":\"y\"}}}",
         "tenants: \"acme\" is named twice"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":[]}", "tenants"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":\"x\"}}", "tenants.acme"},
        {many, "tenants: names more than 32 tenants (at \"t32\")"},
        {"{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/s\",\"tenants\":{}}",
         "tenants: unknown field for role external"},
        {"{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/s\",\"tenant\":\"a/b\"}",
         "tenant: \"a/b\" is not a tenant name (1..32 characters of [A-Za-z0-9_.-])"},
        {"{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/s\",\"tenant\":\"\"}", "tenant: \"\" is not a tenant name"},
        {"{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/s\",\"tenant\":3}", "tenant: 3 is not a string"},
        {"{\"role\":\"external\",\"cluster_id\":\"c1\",\"socket\":\"/s\",\"tenant_token\":false}",
         "tenant_token: (not shown) is not a string"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenant\":\"acme\"}", "tenant: unknown field for role owner"},
    };
    for (size_t i = 0; i < FX_ARRAY_LEN(bad); i++) {
        cr_assert_eq(tc_parse(bad[i].json, &c, err), FLUXON_ERR_CONFIG, "case %zu", i);
        cr_assert(strstr(err, bad[i].want), "case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].want);
    }
    /* a token is never echoed */
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"token\":\"SECRETSECRET\","
                          "\"x\":1}}}", &c, err), FLUXON_ERR_CONFIG);
    cr_assert_null(strstr(err, "SECRET"), "%s", err);
}

/* The master's "tenants" (issue 42): the quota table it hands to every owner, the schema of
 * the etcd value (quota_bytes and guaranteed_bytes only, no token); a bad table is refused
 * naming the field (before: "tenants" was no field of a master's). */
Test(config, master_tenants_quota_table)
{
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(tc_parse("{\"role\":\"master\",\"cluster_id\":\"c1\"}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.n_tenant_quotas, 0, "none by default");
    cr_assert_eq(tc_parse("{\"role\":\"master\",\"cluster_id\":\"c1\",\"tenants\":{\"acme\":{\"quota_bytes\":8388608,"
                          "\"guaranteed_bytes\":\"2MiB\"},\"beta\":{\"guaranteed_bytes\":\"1MiB\"},\"default\":{}}}",
                          &c, err), FLUXON_OK, "%s", err);
    cr_assert_eq(c.n_tenant_quotas, 3);
    cr_assert_str_eq(c.tenant_quotas[0].name, "acme");
    cr_assert_eq(c.tenant_quotas[0].quota, 8ull << 20);
    cr_assert_eq(c.tenant_quotas[0].guaranteed, 2ull << 20);
    cr_assert_eq(c.tenant_quotas[0].fields, FX_TQ_QUOTA | FX_TQ_GUARANTEED);
    cr_assert_eq(c.tenant_quotas[1].fields, FX_TQ_GUARANTEED, "a field not given stays each owner's");
    cr_assert_eq(c.tenant_quotas[2].fields, 0);
    char many[4096] = "{\"role\":\"master\",\"cluster_id\":\"c1\",\"tenants\":{";
    for (int i = 0; i <= FX_TENANT_TABLE_MAX; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s\"t%d\":{}", i ? "," : "", i);
    strcat(many, "}}");
#define TCM "{\"role\":\"master\",\"cluster_id\":\"c1\",\"tenants\":"
    const struct tc_bad bad[] = {
        {TCM "{\"acme\":{\"quota_byte\":1}}}",
         "tenants.acme.quota_byte: is not a field of a tenant's quota (known: quota_bytes, guaranteed_bytes;"},
        {TCM "{\"acme\":{\"token\":\"s3cret\"}}}", "tenants.acme.token: is not a field of a tenant's quota"},
        {TCM "{\"acme\":{\"quota_bytes\":\"1MiB\",\"guaranteed_bytes\":\"2MiB\"}}}",
         "tenants.acme: guaranteed_bytes (2097152) is above quota_bytes (1048576)"},
        {TCM "{\"a b\":{}}}", "tenants: \"a b\" is not a tenant name (1..32 characters of [A-Za-z0-9_.-])"},
        {TCM "{\"\":{}}}", "tenants: \"\" is not a tenant name"},
        {TCM "{\"acme\":{\"quota_bytes\":\"lots\"}}}",
         "tenants.acme.quota_bytes: \"lots\" is not a size (integer bytes, or a string like \"512MiB\")"},
        {TCM "{\"acme\":{\"guaranteed_bytes\":-1}}}", "tenants.acme.guaranteed_bytes: -1 is not a size"},
        {TCM "{\"acme\":{\"quota_bytes\":1.5}}}", "tenants.acme.quota_bytes: 1.5 is not a size"},
        {TCM "{\"acme\":{},\"acme\":{}}}", "tenants: \"acme\" is named twice"},
        /* a new user's findings: the entry named twice after one with a field (not that field
         * named), and a field given twice in one entry (was taken silently) */
        {TCM "{\"acme\":{\"quota_bytes\":1},\"acme\":{}}}", "tenants: \"acme\" is named twice"},
        {TCM "{\"acme\":{\"quota_bytes\":1,\"quota_bytes\":2}}}", "tenants.acme.quota_bytes: is given twice"},
        {TCM "{\"acme\":7}}", "tenants.acme: 7 is not an object of quota_bytes, guaranteed_bytes"},
        {TCM "[]}", "tenants: [...] is not an object"},
        {many, "tenants: names more than 33 tenants (at \"t33\")"},
    };
#undef TCM
    for (size_t i = 0; i < FX_ARRAY_LEN(bad); i++) {
        cr_assert_eq(tc_parse(bad[i].json, &c, err), FLUXON_ERR_CONFIG, "case %zu", i);
        cr_assert(strstr(err, bad[i].want), "case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].want);
    }
}

/* ucx_tls (issue 38): the owner's data-plane transports, UCX_TLS syntax; "" by default
 * (UCX's choice); anything else is refused naming the field and the syntax. */
Test(config, ucx_tls)
{
    fx_config_t c;
    char err[ERRCAP];
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\"}", &c, err), FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.ucx_tls, "", "UCX's own choice by default");
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"ucx_tls\":\"sm,self\"}", &c, err), FLUXON_OK,
                 "%s", err);
    cr_assert_str_eq(c.ucx_tls, "sm,self");
    cr_assert_eq(tc_parse("{\"role\":\"owner\",\"cluster_id\":\"c1\",\"ucx_tls\":\"^tcp\"}", &c, err), FLUXON_OK);
    static const struct tc_bad bad[] = {
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"ucx_tls\":\"\"}", "ucx_tls: \"\" is not a UCX transport list"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"ucx_tls\":\"sm,,tcp\"}", "ucx_tls"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"ucx_tls\":\"sm tcp\"}", "(UCX_TLS syntax"},
        {"{\"role\":\"owner\",\"cluster_id\":\"c1\",\"ucx_tls\":7}", "ucx_tls"},
        {"{\"role\":\"master\",\"cluster_id\":\"c1\",\"ucx_tls\":\"tcp\"}", "ucx_tls: unknown field for role master"},
    };
    for (size_t i = 0; i < FX_ARRAY_LEN(bad); i++) {
        cr_assert_eq(tc_parse(bad[i].json, &c, err), FLUXON_ERR_CONFIG, "case %zu", i);
        cr_assert(strstr(err, bad[i].want), "case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].want);
    }
}
