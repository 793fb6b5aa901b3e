/* kvfix.h — a fixture for KV suites: an embedded master and two owners (A, B) in the
 * test process, clients on each, stats parsing, and cleanup in .fini. */
#ifndef FX_TEST_KVFIX_H
#define FX_TEST_KVFIX_H

#include <cJSON.h>

#include "fluxon.h"
#include "helpers.h"

static char *kf_dir;
#define KF_MAX_OWNERS 4
static fluxon_node *kf_master, *kf_owner[KF_MAX_OWNERS];

static void kf_owner_cfg(char *buf, size_t cap, int i, const char *extra)
{
    snprintf(buf, cap,
             "{\"role\":\"owner\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"node_id\":\"own%c\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s/own%c/s.sock\",\"segment_bytes\":\"72MiB\","
             "\"reserve\":{\"grant_bytes\":\"8MiB\"},\"log_level\":\"warn\",\"handle_ttl_ms\":3000%s}",
             'A' + i, fluxon_node_port(kf_master), kf_dir, 'A' + i, extra ? extra : "");
}

/* A master (master_extra: more JSON members, e.g. ",\"inflight_ttl_ms\":500") and
 * n_owners owners A.. (owner_extra[i]: more members of owner i, or NULL). */
static void kf_up_ex(int n_owners, const char *master_extra, const char *const *owner_extra)
{
    kf_dir = th_tmpdir();
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"role\":\"master\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\","
             "\"listen\":\"127.0.0.1:0\",\"log_level\":\"warn\"%s}", master_extra ? master_extra : "");
    cr_assert_eq(fluxon_node_start(cfg, &kf_master), FLUXON_OK, "%s", cfg);
    cr_assert_leq(n_owners, KF_MAX_OWNERS);
    for (int i = 0; i < n_owners; i++) {
        kf_owner_cfg(cfg, sizeof cfg, i, owner_extra ? owner_extra[i] : NULL);
        cr_assert_eq(fluxon_node_start(cfg, &kf_owner[i]), FLUXON_OK, "owner %d: %s", i, cfg);
    }
}

static void kf_up(int n_owners) { kf_up_ex(n_owners, NULL, NULL); }

static void kf_down(void)
{
    for (int i = 0; i < KF_MAX_OWNERS; i++) {
        fluxon_node_stop(kf_owner[i]);
        kf_owner[i] = NULL;
    }
    fluxon_node_stop(kf_master);
    kf_master = NULL;
    th_rmtree(kf_dir);
    free(kf_dir);
    kf_dir = NULL;
}

static const char *kf_client_cfg(int owner)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"role\":\"external\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"socket\":\"%s/own%c/s.sock\","
             "\"timeout_ms\":5000,\"log_level\":\"warn\"}", kf_dir, 'A' + owner);
    return buf;
}

static fluxon_client *kf_client(int owner)
{
    fluxon_client *c = NULL;
    cr_assert_eq(fluxon_client_open(kf_client_cfg(owner), &c), FLUXON_OK);
    return c;
}

/* Reads one numeric counter of the client's owner (the "owner" object of the stats). */
static long long kf_stat(fluxon_client *c, const char *name)
{
    char buf[16384];
    size_t len;
    cr_assert_eq(fluxon_client_stats(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *doc = cJSON_Parse(buf);
    cr_assert_not_null(doc, "stats are JSON: %s", buf);
    cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "owner"), name);
    cr_assert(cJSON_IsNumber(v), "stat %s missing in %s", name, buf);
    long long r = (long long)cJSON_GetNumberValue(v);
    cJSON_Delete(doc);
    return r;
}

/* Waits (bounded) until a counter reaches want. */
static int kf_wait_stat(fluxon_client *c, const char *name, long long want, int timeout_ms)
{
    double end = th_now_s() + timeout_ms / 1000.0;
    while (th_now_s() < end) {
        if (kf_stat(c, name) == want) return 1;
        th_sleep_ms(10);
    }
    return 0;
}

static void kf_fill(uint8_t *p, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static int kf_check(const uint8_t *p, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (p[i] != (uint8_t)x) return 0;
    }
    return 1;
}

#endif
