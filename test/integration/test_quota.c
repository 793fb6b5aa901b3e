/* test_quota.c — quotas and guaranteed shares per tenant on an owner's hot tier (issue 42,
 * owner/evict_quota.c): a tenant with a guarantee keeps at least its guaranteed bytes while
 * another floods; a tenant at its quota evicts its own coldest values, never another's; a
 * quota changed at run time (fluxon_tenant_set) applies within a second; bad config and bad
 * `tenant set` input get specific statuses and messages and move no counter; a put refused
 * for its quota is NO_SPACE with a message naming the tenant, its bytes, its quota and the
 * field (the CLI, processes). Embedded master and owner (kvfix.h) with a 1 MiB hot tier (256
 * values of 4 KiB), and a master + owner as processes (opsfix.h) for the CLI. */
#include <criterion/criterion.h>
#include <string.h>

#include "kvfix.h"
#include "tenantfix.h"
#include "opsfix.h"

/* the fixtures' helpers this suite does not call */
__attribute__((unused)) static void qt_unused(void) { (void)kf_client; (void)kf_up; }

#define QT_VAL 4096u /* one 4 KiB slot */
#define QT_HOT 256u  /* values of QT_VAL the hot tier holds */

TestSuite(quota, .timeout = 180);

static void qt_up(const char *tenants)
{
    char extra[1024];
    snprintf(extra, sizeof extra,
             ",\"hot_capacity_bytes\":\"1MiB\",\"eviction_policy\":\"lru\",\"tenant_admin_token\":\"adm-secret\","
             "\"tenants\":{%s}", tenants);
    const char *ex[1] = {extra};
    kf_up_ex(1, NULL, ex);
}

static int qt_put(fluxon_client *c, const char *key, uint64_t seed)
{
    static uint8_t v[QT_VAL];
    kf_fill(v, sizeof v, seed);
    return fluxon_put(c, key, v, sizeof v, NULL);
}

static void qt_puts(fluxon_client *c, const char *prefix, int n)
{
    char key[64];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s/%d", prefix, i);
        int rc = qt_put(c, key, 100 + (uint64_t)i);
        cr_assert_eq(rc, FLUXON_OK, "put %s: %s", key, fluxon_status_string(rc));
    }
}

static int qt_exists(fluxon_client *c, const char *key)
{
    size_t hits = 9;
    const char *k[1] = {key};
    cr_assert_eq(fluxon_batch_exists(c, k, 1, &hits), FLUXON_OK);
    return (int)hits;
}

/* every EVICT confirmed and the hot tier under its watermark (bounded) */
static void qt_settle(fluxon_client *c)
{
    double end = th_now_s() + th_wait_bound_s(20000);
    while (th_now_s() < end &&
           (kf_stat(c, "hot_bytes") + kf_stat(c, "pinned_bytes") > (long long)(QT_HOT * QT_VAL) ||
            kf_stat(c, "eviction_debt")))
        th_sleep_ms(10);
    cr_assert_leq(kf_stat(c, "hot_bytes"), (long long)(QT_HOT * QT_VAL));
    cr_assert_eq(kf_stat(c, "eviction_debt"), 0);
}

/* Guarantees that do not fit the hot tier together are a configuration error (exit
 * status 2 from the command line), not a runtime one. */
Test(quota, guarantees_over_the_hot_tier_are_a_config_error, .fini = kf_down)
{
    kf_up(0);
    char cfg[1024];
    kf_owner_cfg(cfg, sizeof cfg, 0,
                 ",\"hot_capacity_bytes\":\"1MiB\",\"tenants\":{\"acme\":{\"token\":\"acme-secret\","
                 "\"guaranteed_bytes\":\"768KiB\"},\"beta\":{\"token\":\"beta-secret\",\"guaranteed_bytes\":\"512KiB\"}}");
    fluxon_node *n = NULL;
    cr_assert_eq(fluxon_node_start(cfg, &n), FLUXON_ERR_CONFIG, "1.25 MiB guaranteed on a 1 MiB hot tier");
    cr_assert_null(n);
}

Test(quota, a_guaranteed_share_survives_another_tenants_flood, .fini = kf_down)
{
    /* acme: 768 KiB (192 values) guaranteed, of a 1 MiB hot tier; beta floods three hot tiers'
     * worth (blind to tenants, or splitting the tier evenly, acme would keep 512 KiB at most) */
    qt_up("\"acme\":{\"token\":\"acme-secret\",\"guaranteed_bytes\":\"768KiB\"},\"beta\":{\"token\":\"beta-secret\"}");
    fluxon_client *a = tf_client("acme"), *b = tf_client("beta");
    cr_assert_eq(tf_stat(a, "acme", "guaranteed_bytes"), 768 * 1024);
    cr_assert_eq(tf_stat(a, "acme", "quota_bytes"), 0, "no quota by default");
    cr_assert_eq(tf_stat(a, "beta", "guaranteed_bytes"), 0, "no guarantee by default");
    qt_puts(a, "a", 224); /* 896 KiB: 128 KiB above its guarantee */
    qt_puts(b, "b", 3 * QT_HOT);
    qt_settle(b);
    long long ab = tf_stat(a, "acme", "bytes"), bb = tf_stat(a, "beta", "bytes");
    cr_assert_geq(ab, 768 * 1024, "acme holds %lld bytes: under its guarantee of 768 KiB", ab);
    cr_assert_gt(bb, 0, "beta holds what is left");
    cr_assert_leq(ab + bb, (long long)(QT_HOT * QT_VAL));
    int held = 0;
    char key[32];
    for (int i = 0; i < 224; i++) {
        snprintf(key, sizeof key, "a/%d", i);
        held += qt_exists(a, key);
    }
    cr_assert_geq(held, 192, "acme's values held: %d of 224 (its guarantee is 192)", held);
    cr_assert_eq(qt_exists(a, "a/223"), 1, "acme's newest stay");
    cr_assert_gt(tf_stat(a, "beta", "evictions_pressure"), 0, "beta's flood evicted its own values");
    cr_assert_leq(tf_stat(a, "acme", "evictions_pressure"), 32, "at most acme's bytes above its guarantee went");
    cr_assert_eq(tf_stat(a, "acme", "evictions_quota") + tf_stat(a, "beta", "evictions_quota"), 0);
    cr_assert_eq(kf_stat(a, "evictions_pressure"), tf_stat(a, "acme", "evictions_pressure") +
                                                      tf_stat(a, "beta", "evictions_pressure") +
                                                      tf_stat(a, "default", "evictions_pressure"));
    fluxon_client_close(a);
    fluxon_client_close(b);
}

Test(quota, a_tenant_at_its_quota_evicts_its_own_values_not_anothers, .fini = kf_down)
{
    /* acme may hold 256 KiB (64 values); beta has no quota; together they stay far under the
     * hot tier, so every eviction is acme's own quota */
    qt_up("\"acme\":{\"token\":\"acme-secret\",\"quota_bytes\":\"256KiB\"},\"beta\":{\"token\":\"beta-secret\"}");
    fluxon_client *a = tf_client("acme"), *b = tf_client("beta");
    qt_puts(b, "k", 64);   /* beta's keys first: the coldest of the hot tier */
    qt_puts(a, "k", 128);  /* the same key bytes, acme's namespace */
    qt_settle(a);
    double end = th_now_s() + th_wait_bound_s(5000);
    while (th_now_s() < end && tf_stat(a, "acme", "bytes") > 256 * 1024) th_sleep_ms(10);
    cr_assert_leq(tf_stat(a, "acme", "bytes"), 256 * 1024, "acme stays at its quota");
    cr_assert_eq(tf_stat(a, "beta", "bytes"), 64 * QT_VAL, "beta's values all stay");
    cr_assert_eq(tf_stat(a, "acme", "bytes"), 256 * 1024, "no more evicted than the quota asks");
    cr_assert_eq(tf_stat(a, "acme", "evictions_quota"), 64, "acme's own quota evicted its 64 coldest");
    cr_assert_eq(tf_stat(a, "beta", "evictions_quota") + tf_stat(a, "beta", "evictions_pressure"), 0);
    cr_assert_eq(tf_stat(a, "acme", "evictions_pressure"), 0, "no pressure: the hot tier has room");
    cr_assert_eq(tf_stat(a, "acme", "quota_refusals"), 0, "its own values made room: no put refused");
    char key[32];
    for (int i = 0; i < 64; i++) {
        snprintf(key, sizeof key, "k/%d", i);
        cr_assert_eq(qt_exists(b, key), 1, "beta's %s survived acme's puts", key);
    }
    cr_assert_eq(qt_exists(a, "k/0"), 0, "acme's coldest went");
    cr_assert_eq(qt_exists(a, "k/127"), 1, "acme's newest stay");
    cr_assert_eq(kf_stat(a, "quota_refusals"), 0);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

/* A new user's crash (session 22): a value in its tenant's own policy (a tenant with a
 * quota) that was replaced or deleted left the policy through the wrong table entry (its
 * tenant was forgotten first): the tenant's policy kept its bytes with no value behind them,
 * the memory before the table was written, and the next eviction round for the quota found
 * an empty queue holding bytes (SIGSEGV). Replacements and deletes of a quota tenant's
 * values, then more puts than its quota holds: the owner lives, the quota holds exactly,
 * every value kept reads back. */
Test(quota, replaced_and_deleted_values_of_a_quota_tenant_leave_its_policy_whole, .fini = kf_down)
{
    qt_up("\"acme\":{\"token\":\"acme-secret\",\"quota_bytes\":\"256KiB\"}");
    fluxon_client *a = tf_client("acme");
    for (int round = 0; round < 3; round++) qt_puts(a, "r", 64); /* each round replaces the last */
    char key[32];
    for (int i = 0; i < 32; i++) {
        snprintf(key, sizeof key, "r/%d", i);
        int rc = fluxon_delete(a, key); /* a replacement at the quota may have evicted it */
        cr_assert(rc == FLUXON_OK || rc == FLUXON_ERR_NOT_FOUND, "%s: %s", key, fluxon_status_string(rc));
    }
    qt_puts(a, "n", 128); /* twice its quota: its own values go */
    qt_settle(a);
    double end = th_now_s() + th_wait_bound_s(5000);
    while (th_now_s() < end && tf_stat(a, "acme", "bytes") > 256 * 1024) th_sleep_ms(10);
    cr_assert_eq(tf_stat(a, "acme", "bytes"), 256 * 1024, "acme holds its quota exactly");
    cr_assert_gt(tf_stat(a, "acme", "evictions_quota"), 0);
    int kept = 0;
    for (int i = 0; i < 128; i++) {
        snprintf(key, sizeof key, "n/%d", i);
        kept += qt_exists(a, key);
    }
    cr_assert_eq(kept, 64, "its 64 newest values stay");
    fluxon_client_close(a);
}

/* fluxon_last_error_message (session 22): the owner's reason for this thread's last
 * refused call, emptied as every call starts (a new user saw a refusal's reason stay on
 * through later calls refused in the client); a call the client refuses says its own reason
 * (session 40: a binding's exception had none to show). */
Test(quota, a_refusals_reason_is_this_calls_only, .fini = kf_down)
{
    qt_up("\"acme\":{\"token\":\"acme-secret\",\"quota_bytes\":\"64KiB\"}");
    fluxon_client *a = tf_client("acme");
    static uint8_t big[128 * 1024];
    cr_assert_eq(fluxon_put(a, "big", big, sizeof big, NULL), FLUXON_ERR_NO_SPACE);
    cr_assert(strstr(fluxon_last_error_message(), "tenants.acme.quota_bytes"), "[%s]", fluxon_last_error_message());
    cr_assert_eq(fluxon_put(a, "", big, 1, NULL), FLUXON_ERR_INVALID_ARGUMENT); /* refused in the client */
    cr_assert_str_eq(fluxon_last_error_message(), "put: the key must be 1..1024 bytes (it is empty)");
    cr_assert_eq(fluxon_put(a, "big", big, sizeof big, NULL), FLUXON_ERR_NO_SPACE);
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_get(a, NULL, &h), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(fluxon_last_error_message(), "get: the key must be 1..1024 bytes (it is NULL)");
    cr_assert_eq(fluxon_get(a, "small", NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(fluxon_last_error_message(), "get: holder_p is NULL");
    cr_assert_eq(fluxon_put(a, "big", big, sizeof big, NULL), FLUXON_ERR_NO_SPACE);
    cr_assert_eq(fluxon_get(a, NULL, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(fluxon_last_error_message(), "it is NULL"), "[%s]", fluxon_last_error_message());
    cr_assert_eq(fluxon_put(a, "big", big, sizeof big, NULL), FLUXON_ERR_NO_SPACE);
    cr_assert_eq(qt_put(a, "small", 1), FLUXON_OK);
    cr_assert_str_eq(fluxon_last_error_message(), "", "a success says nothing");
    fluxon_client_close(a);
}

Test(quota, a_quota_changed_at_run_time_applies_within_a_second, .fini = kf_down)
{
    qt_up("\"acme\":{\"token\":\"acme-secret\"},\"beta\":{\"token\":\"beta-secret\"}");
    fluxon_client *a = tf_client("acme"), *b = tf_client("beta");
    qt_puts(a, "a", 128); /* 512 KiB, no quota yet */
    qt_puts(b, "b", 16);
    cr_assert_eq(tf_stat(a, "acme", "bytes"), 128 * QT_VAL);
    /* its own client (it proved acme's token) lowers its quota to 128 KiB */
    double t0 = th_now_s();
    int rc = fluxon_tenant_set(a, "acme", 128 * 1024, 0, FLUXON_TENANT_SET_QUOTA, NULL);
    cr_assert_eq(rc, FLUXON_OK, "%s", fluxon_status_string(rc));
    cr_assert_eq(tf_stat(a, "acme", "quota_bytes"), 128 * 1024, "visible in stats at once");
    cr_assert_eq(kf_stat(a, "quota_changes"), 1);
    double end = t0 + 1.0;
    while (th_now_s() < end && tf_stat(a, "acme", "bytes") > 128 * 1024) th_sleep_ms(5);
    cr_assert_leq(tf_stat(a, "acme", "bytes"), 128 * 1024, "within a second of the change (%.3f s)", th_now_s() - t0);
    cr_assert_eq(tf_stat(a, "beta", "bytes"), 16 * QT_VAL, "beta untouched");
    cr_assert_geq(tf_stat(a, "acme", "evictions_quota"), 96);
    /* the admin token changes any tenant's; the guarantee shows too */
    rc = fluxon_tenant_set(b, "acme", 0, 64 * 1024, FLUXON_TENANT_SET_GUARANTEED, "adm-secret");
    cr_assert_eq(rc, FLUXON_OK, "%s", fluxon_status_string(rc));
    cr_assert_eq(tf_stat(a, "acme", "guaranteed_bytes"), 64 * 1024);
    cr_assert_eq(tf_stat(a, "acme", "quota_bytes"), 128 * 1024, "a field not given keeps its value");
    /* raising the quota: new puts fit again without evicting */
    rc = fluxon_tenant_set(a, "acme", 0, 0, FLUXON_TENANT_SET_QUOTA, NULL); /* removing it raises it */
    cr_assert_eq(rc, FLUXON_ERR_AUTH, "a tenant lifts its own quota: %s", fluxon_status_string(rc));
    rc = fluxon_tenant_set(a, "acme", 0, 0, FLUXON_TENANT_SET_QUOTA, "adm-secret");
    cr_assert_eq(rc, FLUXON_OK);
    long long ev = tf_stat(a, "acme", "evictions_quota");
    qt_puts(a, "c", 64);
    cr_assert_eq(tf_stat(a, "acme", "evictions_quota"), ev, "no quota: nothing of acme's evicted for it");
    cr_assert_eq(kf_stat(a, "quota_changes"), 3);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

Test(quota, bad_tenant_set_input_is_refused_and_moves_no_counter, .fini = kf_down)
{
    qt_up("\"acme\":{\"token\":\"acme-secret\",\"quota_bytes\":\"512KiB\"},\"beta\":{\"token\":\"beta-secret\"}");
    fluxon_client *a = tf_client("acme"), *b = tf_client("beta"), *d = tf_client(NULL);
    long long ch0 = kf_stat(a, "quota_changes"), rf0 = kf_stat(a, "quota_refusals");
    /* another tenant's client, without or with a wrong admin token; default has no token */
    cr_assert_eq(fluxon_tenant_set(b, "acme", 1024 * 1024, 0, FLUXON_TENANT_SET_QUOTA, NULL), FLUXON_ERR_AUTH);
    cr_assert_eq(fluxon_tenant_set(b, "acme", 1024 * 1024, 0, FLUXON_TENANT_SET_QUOTA, "nope"), FLUXON_ERR_AUTH);
    cr_assert_eq(fluxon_tenant_set(d, "default", 4096, 0, FLUXON_TENANT_SET_QUOTA, NULL), FLUXON_ERR_AUTH);
    /* the reason says why (a new user's finding: it spoke of a client proving its token) */
    cr_assert(strstr(fluxon_last_error_message(), "\"default\" has no tenant_token, so its own clients cannot"),
              "%s", fluxon_last_error_message());
    /* unknown tenant */
    cr_assert_eq(fluxon_tenant_set(a, "gamma", 4096, 0, FLUXON_TENANT_SET_QUOTA, "adm-secret"), FLUXON_ERR_NOT_FOUND);
    /* a guarantee above the quota; guarantees above the hot tier (1 MiB) */
    cr_assert_eq(fluxon_tenant_set(a, "acme", 0, 1024 * 1024, FLUXON_TENANT_SET_GUARANTEED, NULL),
                 FLUXON_ERR_AUTH, "a tenant raises its own guarantee");
    cr_assert_eq(fluxon_tenant_set(a, "acme", 0, 1024 * 1024, FLUXON_TENANT_SET_GUARANTEED, "adm-secret"),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_tenant_set(a, "beta", 0, 2 * 1024 * 1024, FLUXON_TENANT_SET_GUARANTEED, "adm-secret"),
                 FLUXON_ERR_INVALID_ARGUMENT);
    /* refused by the library before anything is sent */
    cr_assert_eq(fluxon_tenant_set(a, "acme", 1, 1, 0, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_tenant_set(a, "acme", 1, 1, 0x8, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_tenant_set(a, NULL, 1, 1, FLUXON_TENANT_SET_QUOTA, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    /* not a tenant name: no owner could list it (before: the owner's NOT_FOUND) */
    cr_assert_eq(fluxon_tenant_set(a, "a/b", 4096, 0, FLUXON_TENANT_SET_QUOTA, "adm-secret"), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_tenant_set(a, "", 4096, 0, FLUXON_TENANT_SET_QUOTA, "adm-secret"), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(kf_stat(a, "quota_changes"), ch0, "no change counted");
    cr_assert_eq(kf_stat(a, "quota_refusals"), rf0);
    cr_assert_eq(tf_stat(a, "acme", "quota_bytes"), 512 * 1024, "nothing changed");
    cr_assert_eq(tf_stat(a, "beta", "guaranteed_bytes"), 0);
    cr_assert_eq(tf_stat(a, "default", "quota_bytes"), 0);
    /* bad put input with a quota: refused before admission, no quota refusal counted */
    cr_assert_eq(qt_put(a, "", 1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(kf_stat(a, "quota_refusals"), rf0);
    fluxon_client_close(a);
    fluxon_client_close(b);
    fluxon_client_close(d);
}

Test(quota, guarantees_above_the_hot_tier_are_refused_at_start)
{
    kf_dir = th_tmpdir();
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"role\":\"master\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\","
             "\"listen\":\"127.0.0.1:0\",\"log_level\":\"warn\"}");
    cr_assert_eq(fluxon_node_start(cfg, &kf_master), FLUXON_OK);
    kf_owner_cfg(cfg, sizeof cfg, 0,
                 ",\"hot_capacity_bytes\":\"1MiB\",\"tenants\":{\"acme\":{\"token\":\"a\",\"guaranteed_bytes\":\"768KiB\"},"
                 "\"beta\":{\"token\":\"b\",\"guaranteed_bytes\":\"512KiB\"}}");
    fluxon_node *o = NULL;
    int rc = fluxon_node_start(cfg, &o);
    cr_assert_neq(rc, FLUXON_OK, "1.25 MiB of guarantees on a 1 MiB hot tier");
    cr_assert_null(o);
    kf_down();
}

/* The CLI against processes: `tenant set` (good and bad input, exit statuses and the owner's
 * reasons) and a put refused for its tenant's quota, whose message names the tenant, its
 * bytes, its quota and the config field. */
Test(quota, the_cli_sets_quotas_and_a_refused_put_names_its_tenant_and_field, .fini = ops_fini)
{
    ops_up("32MiB", ",\"hot_capacity_bytes\":\"4MiB\",\"tenant_admin_token\":\"adm\",\"tenants\":{\"acme\":"
                    "{\"token\":\"acme-secret\",\"quota_bytes\":\"64KiB\"}}");
    char acfg[600], out[8192], val[300], acme[1200];
    snprintf(acfg, sizeof acfg, "%s/acme.json", t.dir);
    snprintf(acme, sizeof acme,
             "{\"role\":\"external\",\"cluster_id\":\"t1\",\"cluster_token\":\"secret\",\"socket\":\"%s\","
             "\"timeout_ms\":3000,\"tenant\":\"acme\",\"tenant_token\":\"acme-secret\",\"log_level\":\"debug\"}",
             t.sock);
    th_write_file(acfg, acme);
    /* a 128 KiB value is larger than acme's quota: NO_SPACE, the owner's reason on stderr */
    snprintf(val, sizeof val, "%s/big", t.dir);
    static char big[128 * 1024];
    memset(big, 'x', sizeof big);
    FILE *f = fopen(val, "w");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(big, 1, sizeof big, f), sizeof big);
    fclose(f);
    int ex = ops_cli(out, sizeof out, "--role=external --config %s put big %s", acfg, val);
    cr_assert_eq(ex, 1, "exit %d: %s", ex, out);
    cr_assert(strstr(out, "FLUXON_ERR_NO_SPACE"), "%s", out);
    cr_assert(strstr(out, "tenant \"acme\" holds 0 bytes"), "%s", out);
    cr_assert(strstr(out, "its quota is 65536 bytes (tenants.acme.quota_bytes)"), "%s", out);
    /* usage errors: exit 2, nothing sent */
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set acme", acfg);
    cr_assert_eq(ex, 2, "%s", out);
    cr_assert(strstr(out, "give --quota, --guaranteed or both"), "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set acme --quota lots", acfg);
    cr_assert_eq(ex, 2, "%s", out);
    cr_assert(strstr(out, "--quota lots is not a size"), "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant frob", acfg);
    cr_assert_eq(ex, 2, "%s", out);
    cr_assert(strstr(out, "unknown sub-command"), "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set", acfg);
    cr_assert_eq(ex, 2, "%s", out);
    cr_assert(strstr(out, "set needs the tenant's NAME"), "a known sub-command without its NAME: %s", out);
    /* refused by the owner, with its reason */
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set acme --quota 64KiB --guaranteed 1MiB "
                 "--admin-token adm", acfg);
    cr_assert_eq(ex, 2, "%s", out);
    cr_assert(strstr(out, "the guarantee is above the quota"), "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set acme --quota 1MiB", t.ecfg);
    cr_assert_eq(ex, 1, "%s", out);
    cr_assert(strstr(out, "FLUXON_ERR_AUTH"), "%s", out);
    cr_assert(strstr(out, "tenant_admin_token"), "%s", out);
    /* its own client may lower its limits, not raise them; the admin token may */
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set acme --quota 1MiB", acfg);
    cr_assert_eq(ex, 1, "a tenant raising its own quota: %s", out);
    cr_assert(strstr(out, "not raise them"), "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set acme --quota 1MiB --admin-token adm", acfg);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert(strstr(out, "tenant acme: quota_bytes 1048576"), "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s tenant set acme --guaranteed 256KiB --admin-token adm",
                 t.ecfg);
    cr_assert_eq(ex, 0, "%s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s put big %s", acfg, val);
    cr_assert_eq(ex, 0, "the raised quota admits it: %s", out);
    ex = ops_cli(out, sizeof out, "--role=external --config %s stats", t.ecfg);
    cr_assert_eq(ex, 0);
    cr_assert(strstr(out, "\"quota_bytes\":1048576"), "%s", out);
    cr_assert(strstr(out, "\"guaranteed_bytes\":262144"), "%s", out);
    cr_assert(strstr(out, "\"quota_changes\":2"), "%s", out);
}

/* Owner A applies a `tenant set`, sends it to the master, which pushes it to owner B and to
 * an owner C that registers later: each shows it in its stats within a second; a change A
 * refuses is sent nowhere. */
Test(quota, a_change_on_one_owner_reaches_every_owner_and_later_ones, .fini = kf_down)
{
    const char *tn = ",\"hot_capacity_bytes\":\"1MiB\",\"tenant_admin_token\":\"adm-secret\",\"tenants\":{"
                     "\"acme\":{\"token\":\"acme-secret\"},\"beta\":{\"token\":\"beta-secret\",\"guaranteed_bytes\":\"512KiB\"}}";
    const char *ex[2] = {tn, tn};
    kf_up_ex(2, NULL, ex);
    fluxon_client *a = tf_client("acme"); /* owner A's */
    char cfg[768];
    const char *base = kf_client_cfg(1);
    snprintf(cfg, sizeof cfg, "%.*s}", (int)strlen(base) - 1, base);
    fluxon_client *b = NULL;
    cr_assert_eq(fluxon_client_open(cfg, &b), FLUXON_OK); /* owner B's, default tenant */
    cr_assert_eq(fluxon_tenant_set(a, "acme", 256 * 1024, 128 * 1024,
                                   FLUXON_TENANT_SET_QUOTA | FLUXON_TENANT_SET_GUARANTEED, "adm-secret"), FLUXON_OK);
    double t0 = th_now_s(), end = t0 + 1.0;
    while (th_now_s() < end && tf_stat(b, "acme", "quota_bytes") != 256 * 1024) th_sleep_ms(5);
    cr_assert_eq(tf_stat(b, "acme", "quota_bytes"), 256 * 1024, "owner B within a second (%.3f s)", th_now_s() - t0);
    cr_assert_eq(tf_stat(b, "acme", "guaranteed_bytes"), 128 * 1024);
    cr_assert_eq(kf_stat(b, "quota_pushes"), 1);
    cr_assert_eq(kf_stat(b, "quota_changes"), 0, "B did not take a tenant set itself");
    cr_assert_eq(kf_stat(a, "quota_pushes"), 0, "not sent back to A");
    /* guarantees above the hot tier (beta's 512 KiB + 640 KiB): refused by A, sent nowhere */
    cr_assert_eq(fluxon_tenant_set(a, "acme", 0, 640 * 1024, FLUXON_TENANT_SET_GUARANTEED, "adm-secret"),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tf_stat(b, "acme", "guaranteed_bytes"), 128 * 1024);
    cr_assert_eq(kf_stat(b, "quota_pushes") + kf_stat(b, "quota_push_refusals"), 1);
    /* owner C registers after the change: the master hands it the table */
    char ocfg[1024];
    kf_owner_cfg(ocfg, sizeof ocfg, 2, tn);
    cr_assert_eq(fluxon_node_start(ocfg, &kf_owner[2]), FLUXON_OK);
    base = kf_client_cfg(2);
    snprintf(cfg, sizeof cfg, "%.*s}", (int)strlen(base) - 1, base);
    fluxon_client *c = NULL;
    cr_assert_eq(fluxon_client_open(cfg, &c), FLUXON_OK);
    t0 = th_now_s();
    end = t0 + th_wait_bound_s(1000);
    while (th_now_s() < end && tf_stat(c, "acme", "quota_bytes") != 256 * 1024) th_sleep_ms(5);
    cr_assert_eq(tf_stat(c, "acme", "quota_bytes"), 256 * 1024, "owner C got it at registration");
    cr_assert_eq(tf_stat(c, "acme", "guaranteed_bytes"), 128 * 1024);
    fluxon_client_close(a);
    fluxon_client_close(b);
    fluxon_client_close(c);
}

/* The master's config table (issue 42): an owner that lists acme without a quota gets the
 * master's quota and guarantee when it registers, and keeps its values under that quota; the
 * master's beta quota overrides the owner's own (the guarantee, not in the master's entry,
 * stays the owner's); gamma, which the owner does not list, is ignored. Before: "tenants" was
 * no field of a master's config (the master did not start). */
Test(quota, the_masters_config_table_reaches_each_owner_at_registration, .fini = kf_down)
{
    const char *mt = ",\"tenants\":{\"acme\":{\"quota_bytes\":\"256KiB\",\"guaranteed_bytes\":65536},"
                     "\"beta\":{\"quota_bytes\":\"128KiB\"},\"gamma\":{\"quota_bytes\":\"64KiB\"}}";
    const char *ot = ",\"hot_capacity_bytes\":\"1MiB\",\"eviction_policy\":\"lru\",\"tenants\":{\"acme\":{\"token\":"
                     "\"acme-secret\"},\"beta\":{\"token\":\"beta-secret\",\"quota_bytes\":\"512KiB\","
                     "\"guaranteed_bytes\":\"32KiB\"}}";
    const char *ex[1] = {ot};
    kf_up_ex(1, mt, ex);
    fluxon_client *a = tf_client("acme");
    double t0 = th_now_s(), end = t0 + th_wait_bound_s(5000);
    while (th_now_s() < end && (tf_stat(a, "acme", "quota_bytes") != 256 * 1024 ||
                                tf_stat(a, "beta", "quota_bytes") != 128 * 1024))
        th_sleep_ms(5);
    cr_assert_eq(tf_stat(a, "acme", "quota_bytes"), 256 * 1024, "the master's quota (%.3f s)", th_now_s() - t0);
    cr_assert_eq(tf_stat(a, "acme", "guaranteed_bytes"), 64 * 1024);
    cr_assert_eq(tf_stat(a, "beta", "quota_bytes"), 128 * 1024, "the master's table over the owner's config");
    cr_assert_eq(tf_stat(a, "beta", "guaranteed_bytes"), 32 * 1024, "a field the master's entry lacks: the owner's");
    cr_assert_eq(tf_stat(a, "gamma", "quota_bytes"), -1, "a tenant the owner does not list is ignored");
    cr_assert_eq(kf_stat(a, "quota_pushes"), 2);
    qt_puts(a, "a", 96); /* 384 KiB: its own coldest go for its 256 KiB quota */
    end = th_now_s() + th_wait_bound_s(5000);
    while (th_now_s() < end && tf_stat(a, "acme", "bytes") > 256 * 1024) th_sleep_ms(5);
    cr_assert_leq(tf_stat(a, "acme", "bytes"), 256 * 1024, "acme held under the master's quota");
    cr_assert_geq(tf_stat(a, "acme", "evictions_quota"), 32);
    fluxon_client_close(a);
}

/* A master whose "tenants" table is not valid does not start: exit 2, the message naming the
 * field (an unknown field, as an owner's "token"; a guarantee above the quota; a bad name). */
Test(quota, a_bad_table_in_the_masters_config_exits_2_naming_the_field, .fini = kf_down)
{
    kf_dir = th_tmpdir();
    static const struct {
        const char *table, *want;
    } bad[] = {
        {"{\"acme\":{\"token\":\"s3cret\",\"quota_bytes\":4096}}",
         "tenants.acme.token: is not a field of a tenant's quota (known: quota_bytes, guaranteed_bytes;"},
        {"{\"acme\":{\"quota_bytes\":\"1MiB\",\"guaranteed_bytes\":\"2MiB\"}}",
         "tenants.acme: guaranteed_bytes (2097152) is above quota_bytes (1048576)"},
        {"{\"a/b\":{\"quota_bytes\":4096}}", "tenants: \"a/b\" is not a tenant name"},
    };
    char path[300], json[600], out[4096];
    snprintf(path, sizeof path, "%s/master.json", kf_dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(json, sizeof json, "{\"role\":\"master\",\"cluster_id\":\"kv\",\"listen\":\"127.0.0.1:0\","
                 "\"tenants\":%s}", bad[i].table);
        th_write_file(path, json);
        int ex = ops_cli(out, sizeof out, "--role=master --config %s", path);
        cr_assert_eq(ex, 2, "case %zu: exit %d: %s", i, ex, out);
        cr_assert(strstr(out, bad[i].want), "case %zu: \"%s\" lacks \"%s\"", i, out, bad[i].want);
    }
}

/* Pinned values count toward their tenant's bytes and are never its victims: a tenant whose
 * quota is all pinned gets NO_SPACE for a new put, the message naming it; unpinning makes
 * room (its own coldest then go). */
Test(quota, pinned_values_count_toward_the_quota_and_are_not_evicted_for_it, .fini = kf_down)
{
    qt_up("\"acme\":{\"token\":\"acme-secret\",\"quota_bytes\":\"64KiB\"}");
    fluxon_client *a = tf_client("acme");
    static uint8_t v[QT_VAL];
    fluxon_put_options po = {.field_mask = FLUXON_PUT_OPT_PIN_TTL, .pin_ttl_ms = 60000};
    char key[32];
    const char *ks[16];
    static char kb[16][32];
    for (int i = 0; i < 16; i++) { /* 64 KiB pinned: the whole quota */
        snprintf(kb[i], sizeof kb[i], "p/%d", i);
        ks[i] = kb[i];
        kf_fill(v, sizeof v, (uint64_t)i);
        cr_assert_eq(fluxon_put(a, kb[i], v, sizeof v, &po), FLUXON_OK);
    }
    cr_assert_eq(tf_stat(a, "acme", "bytes"), 64 * 1024);
    cr_assert_eq(tf_stat(a, "acme", "pinned_bytes"), 64 * 1024);
    long long rf = tf_stat(a, "acme", "quota_refusals");
    snprintf(key, sizeof key, "x");
    cr_assert_eq(qt_put(a, key, 1), FLUXON_ERR_NO_SPACE, "nothing of acme's is evictable");
    cr_assert_eq(tf_stat(a, "acme", "quota_refusals"), rf + 1);
    cr_assert_eq(kf_stat(a, "quota_refusals"), rf + 1);
    for (int i = 0; i < 16; i++) cr_assert_eq(qt_exists(a, kb[i]), 1, "%s stays pinned", kb[i]);
    int st[16];
    cr_assert_eq(fluxon_pin(a, ks, 16, 0, 0, st), FLUXON_OK); /* unpinned: evictable again */
    cr_assert_eq(qt_put(a, key, 1), FLUXON_OK);
    double end = th_now_s() + th_wait_bound_s(5000);
    while (th_now_s() < end && tf_stat(a, "acme", "bytes") > 64 * 1024) th_sleep_ms(5);
    cr_assert_leq(tf_stat(a, "acme", "bytes"), 64 * 1024);
    cr_assert_eq(qt_exists(a, "p/0"), 0, "its coldest went for its quota");
    cr_assert_eq(qt_exists(a, "x"), 1);
    fluxon_client_close(a);
}
