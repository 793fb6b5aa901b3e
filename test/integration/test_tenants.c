/* test_tenants.c — tenants (issue 42): a client's tenant and token checked at HELLO
 * (FLUXON_ERR_AUTH for an unknown tenant or a wrong token), and keys in the tenant's
 * namespace: the same key in two tenants is two values, and get, exists, delete, list,
 * put and the hostless put_start/get_start of one tenant never see another's values.
 * The default tenant behaves as before. A master and two owners (kvfix.h), both knowing
 * tenants acme and beta. */
#include <criterion/criterion.h>
#include <string.h>

#include "kvfix.h"
#include "tenantfix.h"

#define TN_LEN(a) (sizeof(a) / sizeof((a)[0]))

TestSuite(tenants, .fini = kf_down, .timeout = 60);

#define TN_TENANTS ",\"tenants\":{\"acme\":{\"token\":\"acme-secret\"},\"beta\":{\"token\":\"beta-secret\"}}"

static void tn_up(void)
{
    const char *extra[2] = {TN_TENANTS, TN_TENANTS};
    kf_up_ex(2, NULL, extra);
}

/* opens a client of owner `owner` with these extra config members; returns its status */
static int tn_open(int owner, const char *extra, fluxon_client **c)
{
    char cfg[768];
    const char *base = kf_client_cfg(owner);
    size_t n = strlen(base) - 1; /* without its closing brace */
    snprintf(cfg, sizeof cfg, "%.*s%s}", (int)n, base, extra);
    *c = NULL;
    return fluxon_client_open(cfg, c);
}

static fluxon_client *tn_client(int owner, const char *tenant)
{
    char extra[160] = "";
    if (tenant) snprintf(extra, sizeof extra, ",\"tenant\":\"%s\",\"tenant_token\":\"%s-secret\"", tenant, tenant);
    fluxon_client *c;
    int rc = tn_open(owner, extra, &c);
    cr_assert_eq(rc, FLUXON_OK, "client of tenant %s: %s", tenant ? tenant : "default", fluxon_status_string(rc));
    return c;
}

static void tn_put(fluxon_client *c, const char *key, const char *val)
{
    int rc = fluxon_put(c, key, val, strlen(val), NULL);
    cr_assert_eq(rc, FLUXON_OK, "put %s: %s", key, fluxon_status_string(rc));
}

/* the value of key as c reads it ("" when missing: rc_p gets the status) */
static const char *tn_get(fluxon_client *c, const char *key, int *rc_p)
{
    static char buf[256];
    fluxon_holder *h = NULL;
    int rc = fluxon_get(c, key, &h);
    if (rc_p) *rc_p = rc;
    buf[0] = 0;
    if (rc != FLUXON_OK) return buf;
    size_t len = fluxon_holder_len(h);
    cr_assert_lt(len, sizeof buf);
    memcpy(buf, fluxon_holder_data(h), len);
    buf[len] = 0;
    fluxon_holder_release(h);
    return buf;
}

typedef struct {
    char keys[16][64];
    size_t n;
} tn_list_t;

static void tn_list_cb(void *arg, const char *key)
{
    tn_list_t *l = arg;
    if (l->n < 16) snprintf(l->keys[l->n], sizeof l->keys[0], "%s", key);
    l->n++;
}

static tn_list_t tn_list(fluxon_client *c, const char *prefix)
{
    tn_list_t l = {.n = 0};
    size_t n = 0;
    int rc = fluxon_list_keys(c, prefix, NULL, 100, tn_list_cb, &l, &n);
    cr_assert_eq(rc, FLUXON_OK, "list: %s", fluxon_status_string(rc));
    cr_assert_eq(n, l.n);
    return l;
}

static size_t tn_exists(fluxon_client *c, const char *key)
{
    size_t hits = 99;
    const char *keys[1] = {key};
    int rc = fluxon_batch_exists(c, keys, 1, &hits);
    cr_assert_eq(rc, FLUXON_OK, "exists %s: %s", key, fluxon_status_string(rc));
    return hits;
}

Test(tenants, same_key_in_two_tenants_is_two_values)
{
    tn_up();
    fluxon_client *a = tn_client(0, "acme"), *b = tn_client(0, "beta"), *d = tn_client(0, NULL);
    tn_put(a, "page/1", "acme-bytes");
    tn_put(b, "page/1", "beta-bytes");
    tn_put(d, "page/1", "default-bytes");
    int rc;
    cr_assert_str_eq(tn_get(a, "page/1", &rc), "acme-bytes");
    cr_assert_str_eq(tn_get(b, "page/1", &rc), "beta-bytes");
    cr_assert_str_eq(tn_get(d, "page/1", &rc), "default-bytes");
    /* another owner's clients of the same tenants read the same values (fetched over UCX) */
    fluxon_client *a2 = tn_client(1, "acme"), *b2 = tn_client(1, "beta"), *d2 = tn_client(1, NULL);
    cr_assert_str_eq(tn_get(a2, "page/1", &rc), "acme-bytes");
    cr_assert_str_eq(tn_get(b2, "page/1", &rc), "beta-bytes");
    cr_assert_str_eq(tn_get(d2, "page/1", &rc), "default-bytes");
    /* overwriting in one tenant leaves the others' values (owner 0 reads the INVALIDATE of its
     * older copy on its own time, a one-way message: wait for it, as a sanitized run showed) */
    long long inv0 = kf_stat(a, "invalidations");
    tn_put(a2, "page/1", "acme-v2");
    cr_assert_geq(kf_wait_stat_geq(a, "invalidations", inv0 + 1, 5000), inv0 + 1, "owner 0 hears of the overwrite");
    cr_assert_str_eq(tn_get(a, "page/1", &rc), "acme-v2");
    cr_assert_str_eq(tn_get(b, "page/1", &rc), "beta-bytes");
    cr_assert_str_eq(tn_get(d, "page/1", &rc), "default-bytes");
    fluxon_client *cs[] = {a, b, d, a2, b2, d2};
    for (size_t i = 0; i < TN_LEN(cs); i++) fluxon_client_close(cs[i]);
}

Test(tenants, get_exists_delete_list_see_nothing_of_another_tenant)
{
    tn_up();
    fluxon_client *a = tn_client(0, "acme"), *b = tn_client(1, "beta"), *d = tn_client(1, NULL);
    tn_put(a, "only-acme", "A");
    tn_put(a, "both", "A2");
    tn_put(d, "both", "D");
    int rc;
    /* beta: no get, no exists, no delete of acme's key */
    tn_get(b, "only-acme", &rc);
    cr_assert_eq(rc, FLUXON_ERR_NOT_FOUND, "beta reads acme's key: %s", fluxon_status_string(rc));
    cr_assert_eq(tn_exists(b, "only-acme"), 0);
    cr_assert_eq(fluxon_delete(b, "only-acme"), FLUXON_ERR_NOT_FOUND);
    /* the default tenant neither */
    tn_get(d, "only-acme", &rc);
    cr_assert_eq(rc, FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(tn_exists(d, "only-acme"), 0);
    cr_assert_eq(fluxon_delete(d, "only-acme"), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(tn_exists(a, "only-acme"), 1);
    /* lists: each its own keys, without any prefix */
    tn_list_t l = tn_list(a, "");
    cr_assert_eq(l.n, 2, "acme lists %zu keys", l.n);
    cr_assert_str_eq(l.keys[0], "both");
    cr_assert_str_eq(l.keys[1], "only-acme");
    l = tn_list(a, "only");
    cr_assert(l.n == 1 && !strcmp(l.keys[0], "only-acme"));
    l = tn_list(b, "");
    cr_assert_eq(l.n, 0, "beta lists %zu keys (%s)", l.n, l.n ? l.keys[0] : "");
    l = tn_list(d, "");
    cr_assert(l.n == 1 && !strcmp(l.keys[0], "both"), "default lists %zu keys (%s)", l.n, l.n ? l.keys[0] : "");
    /* paging from a key: acme's "after" is in acme's namespace */
    tn_list_t p = {.n = 0};
    size_t n = 0;
    cr_assert_eq(fluxon_list_keys(a, "", "both", 10, tn_list_cb, &p, &n), FLUXON_OK);
    cr_assert(n == 1 && !strcmp(p.keys[0], "only-acme"));
    /* acme's delete takes its own value only */
    cr_assert_eq(fluxon_delete(a, "both"), FLUXON_OK);
    cr_assert_str_eq(tn_get(d, "both", &rc), "D");
    tn_get(a, "both", &rc);
    cr_assert_eq(rc, FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fluxon_delete(d, "both"), FLUXON_OK);
    fluxon_client_close(a);
    fluxon_client_close(b);
    fluxon_client_close(d);
}

/* the hostless paths (put_start / commit on the rings or the socket, get_start) with a TP
 * cohort (keys <page>_<rank>_<size>) as one atomic group */
Test(tenants, hostless_put_and_get_start_stay_in_the_tenant)
{
    tn_up();
    fluxon_client *a = tn_client(0, "acme"), *b = tn_client(0, "beta");
    const char *keys[2] = {"p7_0_2", "p7_1_2"};
    uint32_t groups[1] = {2};
    fluxon_put_options opts = {0};
    opts.atomic_group_lens = groups;
    opts.n_atomic_groups = 1;
    fluxon_plan *plan = NULL;
    int ks[2] = {0, 0};
    cr_assert_eq(fluxon_local_fast_put_start(a, keys, 2, 4096, &opts, &plan, ks), FLUXON_OK);
    cr_assert(ks[0] == FLUXON_OK && ks[1] == FLUXON_OK);
    for (int i = 0; i < 2; i++) kf_fill((uint8_t *)(uintptr_t)plan->value_ptrs[i], 4096, 70 + (uint64_t)i);
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(a, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    /* beta: the same keys miss, and beta may put its own under them */
    fluxon_get_handle *gh = NULL;
    fluxon_get_start_result r;
    cr_assert_eq(fluxon_get_start(b, keys, 2, 1, groups, 1, &gh, &r), FLUXON_OK);
    cr_assert(r.transferable_len == 0 && r.first_miss_index == 0 && r.miss_status == FLUXON_ERR_NOT_FOUND,
              "beta: transferable %llu, miss %lld (%d)", (unsigned long long)r.transferable_len,
              (long long)r.first_miss_index, r.miss_status);
    cr_assert_eq(fluxon_cancel_get_transfer(b, gh), FLUXON_OK);
    plan = NULL;
    cr_assert_eq(fluxon_local_fast_put_start(b, keys, 2, 4096, &opts, &plan, ks), FLUXON_OK);
    cr_assert(ks[0] == FLUXON_OK && ks[1] == FLUXON_OK, "beta's put_start of the same keys: %d %d", ks[0], ks[1]);
    cr_assert_eq(fluxon_put_abort(b, plan), FLUXON_OK);
    /* acme reads its bytes */
    cr_assert_eq(fluxon_get_start(a, keys, 2, 1, groups, 1, &gh, &r), FLUXON_OK);
    cr_assert(r.all_hit && r.transferable_len == 2);
    fluxon_plan *rp = NULL;
    cr_assert_eq(fluxon_get_transfer(a, gh, 0, &rp), FLUXON_OK);
    for (int i = 0; i < 2; i++)
        cr_assert(kf_check((const uint8_t *)(uintptr_t)rp->value_ptrs[i], 4096, 70 + (uint64_t)i), "value %d", i);
    cr_assert_eq(fluxon_release_views(a, rp), FLUXON_OK);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

Test(tenants, a_forged_tenant_is_refused_at_hello)
{
    tn_up();
    fluxon_client *c = NULL;
    static const char *const forged[] = {
        ",\"tenant\":\"acme\",\"tenant_token\":\"beta-secret\"", /* another tenant's token */
        ",\"tenant\":\"acme\",\"tenant_token\":\"acme-secre\"",  /* a prefix of the token */
        ",\"tenant\":\"acme\"",                                   /* no token */
        ",\"tenant\":\"gamma\",\"tenant_token\":\"x\"",           /* unknown tenant */
        ",\"tenant_token\":\"x\"",                                /* a token for default, which has none */
    };
    for (size_t i = 0; i < TN_LEN(forged); i++) {
        int rc = tn_open(0, forged[i], &c);
        cr_assert_eq(rc, FLUXON_ERR_AUTH, "%s: %s", forged[i], fluxon_status_string(rc));
        cr_assert_null(c);
    }
    fluxon_client *a = tn_client(0, "acme"), *d = tn_client(0, NULL);
    cr_assert_eq(kf_stat(d, "tenant_auth_failures"), 5);
    cr_assert_eq(tf_stat(d, "acme", "auth_failures"), 3);
    cr_assert_eq(tf_stat(d, "default", "auth_failures"), 1);
    cr_assert_eq(tf_stat(d, "acme", "clients"), 1);
    cr_assert_eq(tf_stat(d, "default", "clients"), 1);
    cr_assert_eq(tf_stat(d, "gamma", "clients"), -1, "an unknown name is never a label");
    /* the owner's /metrics has the per-tenant families */
    static char text[1 << 20];
    size_t len = 0;
    cr_assert_eq(fluxon_node_metrics(kf_owner[0], text, sizeof text, &len), FLUXON_OK);
    cr_assert(strstr(text, "fluxon_owner_tenant_auth_failures_total{tenant=\"acme\",node=\"ownA\"} 3"), "%s", text);
    cr_assert(strstr(text, "fluxon_owner_tenant_clients{tenant=\"acme\",node=\"ownA\"} 1"));
    cr_assert(strstr(text, "fluxon_owner_auth_failures_total{node=\"ownA\"} 5"));
    fluxon_client_close(a);
    cr_assert(kf_wait_stat(d, "externals", 1, 5000));
    cr_assert_eq(tf_stat(d, "acme", "clients"), 0);
    fluxon_client_close(d);
}

/* an owner without "tenants" knows "default" only, token-less */
Test(tenants, an_owner_without_tenants_refuses_every_other_tenant)
{
    kf_up(1);
    fluxon_client *c = NULL;
    cr_assert_eq(tn_open(0, ",\"tenant\":\"acme\",\"tenant_token\":\"acme-secret\"", &c), FLUXON_ERR_AUTH);
    cr_assert_eq(tn_open(0, ",\"tenant\":\"default\"", &c), FLUXON_OK);
    fluxon_client_close(c);
    c = kf_client(0); /* no tenant at all: as before */
    tn_put(c, "k", "v");
    int rc;
    cr_assert_str_eq(tn_get(c, "k", &rc), "v");
    fluxon_client_close(c);
}

/* "default" listed with a token: its clients must show it */
Test(tenants, a_default_tenant_with_a_token_needs_it)
{
    const char *extra[1] = {",\"tenants\":{\"default\":{\"token\":\"d-secret\"}}"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *c = NULL;
    cr_assert_eq(tn_open(0, "", &c), FLUXON_ERR_AUTH);
    cr_assert_eq(tn_open(0, ",\"tenant_token\":\"d-secret\"", &c), FLUXON_OK);
    tn_put(c, "k", "v");
    int rc;
    cr_assert_str_eq(tn_get(c, "k", &rc), "v");
    fluxon_client_close(c);
}

Test(tenants, keys_a_tenant_may_not_use)
{
    tn_up();
    fluxon_client *a = tn_client(0, "acme"), *d = tn_client(0, NULL);
    tn_put(a, "secret", "A");
    /* the default tenant cannot name acme's internal key */
    int rc = fluxon_put(d, "\001acme/secret", "D", 1, NULL);
    cr_assert_eq(rc, FLUXON_ERR_INVALID_ARGUMENT, "%s", fluxon_status_string(rc));
    tn_get(d, "\001acme/secret", &rc);
    cr_assert_neq(rc, FLUXON_OK);
    cr_assert_eq(fluxon_delete(d, "\001acme/secret"), FLUXON_ERR_INVALID_ARGUMENT);
    tn_list_t l = {.n = 0};
    size_t n = 0;
    cr_assert_eq(fluxon_list_keys(d, "\001", NULL, 10, tn_list_cb, &l, &n), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(tn_get(a, "secret", &rc), "A");
    /* acme's keys are shorter by its prefix: "\001acme/" is 6 bytes */
    static char key[FLUXON_MAX_KEY_BYTES + 1];
    memset(key, 'k', FLUXON_MAX_KEY_BYTES - 6);
    key[FLUXON_MAX_KEY_BYTES - 6] = 0;
    tn_put(a, key, "longest");
    cr_assert_str_eq(tn_get(a, key, &rc), "longest");
    key[FLUXON_MAX_KEY_BYTES - 6] = 'k';
    rc = fluxon_put(a, key, "x", 1, NULL);
    cr_assert_eq(rc, FLUXON_ERR_INVALID_ARGUMENT, "%s", fluxon_status_string(rc));
    /* the default tenant keeps the whole length */
    memset(key, 'd', FLUXON_MAX_KEY_BYTES);
    key[FLUXON_MAX_KEY_BYTES] = 0;
    tn_put(d, key, "full");
    cr_assert_str_eq(tn_get(d, key, &rc), "full");
    cr_assert_geq(kf_stat(d, "tenant_key_refusals"), 4);
    fluxon_client_close(a);
    fluxon_client_close(d);
}

/* Waits (bounded) until tenant's number `name` on c's owner is want. */
static int tn_wait_tenant_stat(fluxon_client *c, const char *tenant, const char *name, long long want, int timeout_ms)
{
    double end = th_now_s() + th_wait_bound_s(timeout_ms);
    while (th_now_s() < end) {
        if (tf_stat(c, tenant, name) == want) return 1;
        th_sleep_ms(10);
    }
    return 0;
}

/* Issue 42, bytes per tier: values the master places on a CPU owner (write-through puts)
 * count there as their tenant's placed_bytes (whole pages), and leave it when deleted. */
Test(tenants, a_cpu_owners_bytes_are_counted_per_tenant)
{
    const char *extra[2] = {TN_TENANTS, TN_TENANTS ",\"node_role\":\"remote_cache\""};
    kf_up_ex(2, NULL, extra);
    fluxon_client *a = tn_client(0, "acme"), *b = tn_client(0, "beta"), *cpu = kf_client(1);
    enum { LEN = 20000, PAGES = 20480 }; /* one value: 5 whole pages on the CPU owner */
    static uint8_t v[LEN];
    fluxon_put_options wt = {.field_mask = FLUXON_PUT_OPT_WRITE_THROUGH, .write_through = 1};
    char key[32];
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "k%d", i);
        kf_fill(v, LEN, (uint64_t)i);
        cr_assert_eq(fluxon_put(a, key, v, LEN, &wt), FLUXON_OK, "acme %s", key);
        if (i < 2) cr_assert_eq(fluxon_put(b, key, v, LEN, &wt), FLUXON_OK, "beta %s", key);
    }
    cr_assert(tn_wait_tenant_stat(cpu, "acme", "placed_bytes", 4 * PAGES, 5000), "acme: %lld placed bytes on the CPU owner",
              tf_stat(cpu, "acme", "placed_bytes"));
    cr_assert(tn_wait_tenant_stat(cpu, "beta", "placed_bytes", 2 * PAGES, 5000), "beta: %lld",
              tf_stat(cpu, "beta", "placed_bytes"));
    cr_assert_eq(tf_stat(cpu, "default", "placed_bytes"), 0);
    cr_assert_eq(tf_stat(cpu, "acme", "bytes"), 0, "not in the CPU owner's hot tier");
    cr_assert_eq(fluxon_delete(a, "k0"), FLUXON_OK);
    cr_assert(tn_wait_tenant_stat(cpu, "acme", "placed_bytes", 3 * PAGES, 5000), "acme after a delete: %lld",
              tf_stat(cpu, "acme", "placed_bytes"));
    cr_assert_eq(tf_stat(cpu, "beta", "placed_bytes"), 2 * PAGES, "beta's own stay");
    fluxon_client_close(a);
    fluxon_client_close(b);
    fluxon_client_close(cpu);
}
