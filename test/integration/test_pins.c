/* test_pins.c — pins with a TTL and per-tenant numbers on the owner (issue 42): pinned
 * values (put's pin_ttl_ms, fluxon_pin) survive floods of other puts until their pin ends,
 * then are evicted like any value; a tenant's pins past its budget are refused per key
 * (FLUXON_PIN_REFUSED) while the values are stored; an atomic group is pinned whole; pins
 * are the owner's and survive a master kill -9; each tenant's bytes, pinned bytes, hits,
 * misses and evictions are exact in `stats` and /metrics; bad input changes nothing.
 * Embedded master and owner (kvfix.h) with a 1 MiB hot tier (256 values of 4 KiB), and a
 * process cluster (restartfix.h) for the master kill. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kvfix.h"
#include "tenantfix.h"
#include "promfix.h"
#include "restartfix.h"

/* the fixtures' helpers this suite does not call */
__attribute__((unused)) static void pn_unused(void) { (void)pf_http_get; (void)kf_client; (void)kf_up; }

#define PN_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define PN_VAL 4096u /* one 4 KiB slot */
#define PN_HOT 256u  /* values of PN_VAL the hot tier holds */

TestSuite(pins, .fini = kf_down, .timeout = 120);

/* acme may pin 16 KiB (4 values); beta and default the owner's budget (half the hot tier) */
#define PN_OWNER                                                                                                 \
    ",\"hot_capacity_bytes\":\"1MiB\",\"eviction_policy\":\"lru\",\"tenants\":{\"acme\":{\"token\":\"acme-secret\"," \
    "\"pinned_bytes_max\":\"16KiB\"},\"beta\":{\"token\":\"beta-secret\"}}"

static void pn_up(void)
{
    const char *extra[1] = {PN_OWNER};
    kf_up_ex(1, NULL, extra);
}

static int pn_put(fluxon_client *c, const char *key, uint64_t seed, uint32_t pin_ttl_ms)
{
    static uint8_t v[PN_VAL];
    kf_fill(v, sizeof v, seed);
    fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_PIN_TTL, .pin_ttl_ms = pin_ttl_ms};
    return fluxon_put(c, key, v, sizeof v, pin_ttl_ms ? &o : NULL);
}

/* n other values, each put once: more than the hot tier holds */
static void pn_flood(fluxon_client *c, const char *prefix, int n)
{
    char key[64];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s/%d", prefix, i);
        int rc = pn_put(c, key, 1000 + (uint64_t)i, 0);
        cr_assert_eq(rc, FLUXON_OK, "flood put %s: %s", key, fluxon_status_string(rc));
    }
}

/* the flood is over: the hot tier is back under its watermark and the master confirmed
 * every EVICT (bounded) */
static long long pn_held(fluxon_client *c) { return kf_stat(c, "hot_bytes") + kf_stat(c, "pinned_bytes"); }

static void pn_settle(fluxon_client *c)
{
    double end = th_now_s() + th_wait_bound_s(20000);
    while (th_now_s() < end && (pn_held(c) > (long long)(PN_HOT * PN_VAL) || kf_stat(c, "eviction_debt")))
        th_sleep_ms(10);
    cr_assert_leq(pn_held(c), (long long)(PN_HOT * PN_VAL), "pinned values count in the hot tier's watermark");
    cr_assert_eq(kf_stat(c, "eviction_debt"), 0);
}

/* the key's value as put with seed (1), missing (0) */
static int pn_has(fluxon_client *c, const char *key, uint64_t seed)
{
    fluxon_holder *h = NULL;
    int rc = fluxon_get(c, key, &h);
    if (rc == FLUXON_ERR_NOT_FOUND) return 0;
    cr_assert_eq(rc, FLUXON_OK, "get %s: %s", key, fluxon_status_string(rc));
    cr_assert_eq(fluxon_holder_len(h), PN_VAL);
    cr_assert(kf_check(fluxon_holder_data(h), PN_VAL, seed), "%s: bytes", key);
    fluxon_holder_release(h);
    return 1;
}

/* whether the key is still held by the owner, without a get (a get would warm it) */
static int pn_exists(fluxon_client *c, const char *key)
{
    size_t hits = 9;
    const char *k[1] = {key};
    cr_assert_eq(fluxon_batch_exists(c, k, 1, &hits), FLUXON_OK);
    return (int)hits;
}

Test(pins, pinned_values_survive_floods_until_their_pin_ends_then_are_evicted)
{
    pn_up();
    fluxon_client *c = tf_client("beta");
    char key[8][32];
    for (int i = 0; i < 8; i++) {
        snprintf(key[i], sizeof key[i], "keep/%d", i);
        int rc = pn_put(c, key[i], (uint64_t)i, 60000);
        cr_assert_eq(rc, FLUXON_OK, "pinned put %s: %s", key[i], fluxon_status_string(rc));
    }
    cr_assert_eq(kf_stat(c, "pinned_values"), 8);
    cr_assert_eq(kf_stat(c, "pinned_bytes"), 8 * PN_VAL);
    cr_assert_eq(tf_stat(c, "beta", "pinned_bytes"), 8 * PN_VAL);
    long long ev0 = kf_stat(c, "evictions");
    pn_flood(c, "flood1", 3 * PN_HOT); /* three hot tiers' worth */
    pn_settle(c);
    cr_assert_geq(kf_stat(c, "evictions") - ev0, 2 * PN_HOT - 8, "the flood evicted");
    cr_assert_eq(pn_exists(c, "flood1/0"), 0, "the first flood values are gone");
    for (int i = 0; i < 8; i++) cr_assert(pn_exists(c, key[i]), "%s survived the flood", key[i]);
    cr_assert_eq(kf_stat(c, "pinned_values"), 8);
    /* a second pin shortens the deadline; once it passes they go back to normal eviction */
    const char *ks[8];
    int st[8];
    for (int i = 0; i < 8; i++) ks[i] = key[i];
    cr_assert_eq(fluxon_pin(c, ks, 8, 200, 0, st), FLUXON_OK);
    for (int i = 0; i < 8; i++) cr_assert_eq(st[i], FLUXON_OK, "%s: %s", key[i], fluxon_status_string(st[i]));
    cr_assert(kf_wait_stat(c, "pinned_values", 0, 10000), "the pins expired");
    cr_assert_eq(kf_stat(c, "pins_expired"), 8);
    cr_assert_eq(tf_stat(c, "beta", "pinned_bytes"), 0);
    for (int i = 0; i < 8; i++) cr_assert(pn_has(c, key[i], (uint64_t)i), "%s still held when its pin ends", key[i]);
    pn_flood(c, "flood2", 2 * PN_HOT);
    pn_settle(c);
    for (int i = 0; i < 8; i++) cr_assert_eq(pn_exists(c, key[i]), 0, "%s evicted once unpinned", key[i]);
    fluxon_client_close(c);
}

Test(pins, pins_over_the_tenant_budget_are_refused_per_key_and_the_values_stored)
{
    pn_up();
    fluxon_client *a = tf_client("acme"), *b = tf_client("beta");
    const char *keys[6] = {"r/0", "r/1", "r/2", "r/3", "r/4", "r/5"};
    static uint8_t buf[6][PN_VAL];
    const void *src[6];
    uint64_t lens[6];
    for (int i = 0; i < 6; i++) {
        kf_fill(buf[i], PN_VAL, 50 + (uint64_t)i);
        src[i] = buf[i];
        lens[i] = PN_VAL;
    }
    fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_PIN_TTL, .pin_ttl_ms = 60000};
    int st[6];
    cr_assert_eq(fluxon_batch_put_from(a, keys, 6, src, lens, &o, st), FLUXON_OK);
    for (int i = 0; i < 6; i++) /* acme's budget is 16 KiB: four values */
        cr_assert_eq(st[i], i < 4 ? FLUXON_OK : FLUXON_PIN_REFUSED, "%s: %s", keys[i], fluxon_status_string(st[i]));
    for (int i = 0; i < 6; i++) cr_assert(pn_has(a, keys[i], 50 + (uint64_t)i), "%s stored", keys[i]);
    /* a plain put over the budget: stored, says so */
    cr_assert_eq(pn_put(a, "r/plain", 77, 60000), FLUXON_PIN_REFUSED);
    cr_assert(pn_has(a, "r/plain", 77));
    cr_assert_eq(tf_stat(a, "acme", "pinned_bytes"), 4 * PN_VAL);
    cr_assert_eq(tf_stat(a, "acme", "pin_budget"), 4 * PN_VAL);
    cr_assert_eq(tf_stat(a, "acme", "pins_refused"), 3);
    /* another tenant's budget is its own */
    cr_assert_eq(pn_put(b, "r/0", 78, 60000), FLUXON_OK);
    cr_assert_eq(tf_stat(b, "beta", "pinned_bytes"), PN_VAL);
    cr_assert_eq(tf_stat(b, "beta", "pin_budget"), PN_HOT * PN_VAL / 2);
    /* unpinning gives the budget back */
    cr_assert_eq(fluxon_pin(a, keys, 1, 0, 0, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK);
    cr_assert_eq(tf_stat(a, "acme", "pinned_bytes"), 3 * PN_VAL);
    cr_assert_eq(fluxon_pin(a, keys + 4, 1, 60000, 0, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK, "r/4 fits now: %s", fluxon_status_string(st[0]));
    cr_assert_eq(tf_stat(a, "acme", "pinned_bytes"), 4 * PN_VAL);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

Test(pins, pin_and_unpin_existing_keys)
{
    pn_up();
    fluxon_client *c = tf_client(NULL);
    const char *keys[4] = {"e/0", "e/1", "e/2", "e/3"};
    for (int i = 0; i < 4; i++) cr_assert_eq(pn_put(c, keys[i], 10 + (uint64_t)i, 0), FLUXON_OK);
    cr_assert_eq(kf_stat(c, "pinned_values"), 0);
    int st[5];
    const char *with_unknown[5] = {"e/0", "e/1", "e/2", "e/3", "never-put"};
    cr_assert_eq(fluxon_pin(c, with_unknown, 5, 60000, FLUXON_PIN_REFRESH_ON_HIT, st), FLUXON_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(st[i], FLUXON_OK, "%s: %s", keys[i], fluxon_status_string(st[i]));
    cr_assert_eq(st[4], FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(kf_stat(c, "pinned_values"), 4);
    cr_assert_eq(tf_stat(c, "default", "pinned_bytes"), 4 * PN_VAL);
    pn_flood(c, "f1", 2 * PN_HOT);
    pn_settle(c);
    for (int i = 0; i < 4; i++) cr_assert(pn_has(c, keys[i], 10 + (uint64_t)i), "%s pinned through the flood", keys[i]);
    cr_assert_eq(kf_stat(c, "pins_refreshed"), 4, "each hit restarted its pin");
    /* unpin: evictable again at once */
    cr_assert_eq(fluxon_pin(c, keys, 4, 0, 0, st), FLUXON_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(st[i], FLUXON_OK);
    cr_assert_eq(kf_stat(c, "pinned_values"), 0);
    cr_assert_eq(tf_stat(c, "default", "pinned_bytes"), 0);
    pn_flood(c, "f2", 2 * PN_HOT);
    pn_settle(c);
    for (int i = 0; i < 4; i++) cr_assert_eq(pn_exists(c, keys[i]), 0, "%s evicted once unpinned", keys[i]);
    fluxon_client_close(c);
}

Test(pins, a_pinned_atomic_group_stays_whole)
{
    pn_up();
    fluxon_client *c = tf_client(NULL);
    /* an unpinned group of three; pinning one member pins the three */
    const char *g[3] = {"g/0", "g/1", "g/2"};
    uint32_t lens[1] = {3};
    fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_ATOMIC_GROUPS, .atomic_group_lens = lens,
                            .n_atomic_groups = 1};
    fluxon_plan *plan = NULL;
    int st[3];
    cr_assert_eq(fluxon_local_fast_put_start(c, g, 3, PN_VAL, &o, &plan, st), FLUXON_OK);
    for (int i = 0; i < 3; i++) kf_fill((uint8_t *)(uintptr_t)plan->value_ptrs[i], PN_VAL, 30 + (uint64_t)i);
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(c, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 5000), FLUXON_OK);
    fluxon_future_free(f);
    cr_assert_eq(fluxon_pin(c, g + 1, 1, 60000, 0, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK);
    cr_assert_eq(kf_stat(c, "pinned_values"), 3, "the whole group is pinned");
    /* a group put with a pin, hostless */
    const char *h[2] = {"h/0", "h/1"};
    uint32_t hl[1] = {2};
    fluxon_put_options p = {.field_mask = FLUXON_PUT_OPT_ATOMIC_GROUPS | FLUXON_PUT_OPT_PIN_TTL,
                            .atomic_group_lens = hl, .n_atomic_groups = 1, .pin_ttl_ms = 60000};
    cr_assert_eq(fluxon_local_fast_put_start(c, h, 2, PN_VAL, &p, &plan, st), FLUXON_OK);
    for (int i = 0; i < 2; i++) kf_fill((uint8_t *)(uintptr_t)plan->value_ptrs[i], PN_VAL, 40 + (uint64_t)i);
    cr_assert_eq(fluxon_local_fast_put_commit(c, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 5000), FLUXON_OK);
    cr_assert_eq(fluxon_future_key_statuses(f, st, 2), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK);
    cr_assert_eq(st[1], FLUXON_OK);
    fluxon_future_free(f);
    cr_assert_eq(kf_stat(c, "pinned_values"), 5);
    pn_flood(c, "f", 2 * PN_HOT);
    pn_settle(c);
    for (int i = 0; i < 3; i++) cr_assert(pn_exists(c, g[i]), "%s kept with its group", g[i]);
    for (int i = 0; i < 2; i++) cr_assert(pn_exists(c, h[i]), "%s kept with its group", h[i]);
    /* unpinning one member unpins the group */
    cr_assert_eq(fluxon_pin(c, g, 1, 0, 0, st), FLUXON_OK);
    cr_assert_eq(kf_stat(c, "pinned_values"), 2);
    fluxon_client_close(c);
}

Test(pins, per_tenant_bytes_hits_misses_and_evictions_are_exact)
{
    pn_up();
    fluxon_client *a = tf_client("acme"), *d = tf_client(NULL);
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof key, "t/%d", i);
        cr_assert_eq(pn_put(a, key, (uint64_t)i, 0), FLUXON_OK);
    }
    cr_assert_eq(pn_put(a, "t/pinned", 9, 60000), FLUXON_OK);
    cr_assert_eq(tf_stat(a, "acme", "bytes"), 4 * PN_VAL);
    cr_assert_eq(tf_stat(a, "acme", "pinned_bytes"), PN_VAL);
    cr_assert_eq(tf_stat(a, "default", "bytes"), 0);
    cr_assert(pn_has(a, "t/0", 0));
    cr_assert(pn_has(a, "t/1", 1));
    cr_assert_eq(pn_has(a, "t/none", 0), 0);
    cr_assert_eq(tf_stat(a, "acme", "hits"), 2);
    cr_assert_eq(tf_stat(a, "acme", "misses"), 1);
    cr_assert_eq(tf_stat(a, "default", "hits"), 0);
    /* a delete retires the value: its bytes go */
    cr_assert_eq(fluxon_delete(a, "t/2"), FLUXON_OK);
    double end = th_now_s() + th_wait_bound_s(5000);
    while (th_now_s() < end && tf_stat(a, "acme", "bytes") != 3 * PN_VAL) th_sleep_ms(10);
    cr_assert_eq(tf_stat(a, "acme", "bytes"), 3 * PN_VAL);
    /* the default tenant floods: acme's unpinned values are evicted, counted as acme's */
    pn_flood(d, "f", 2 * PN_HOT);
    pn_settle(d);
    cr_assert_eq(tf_stat(a, "acme", "evictions"), 2);
    cr_assert_eq(tf_stat(a, "acme", "bytes"), PN_VAL, "only the pinned value is left");
    long long dbytes = tf_stat(d, "default", "bytes");
    cr_assert_eq(dbytes, kf_stat(d, "hot_bytes"), "the hot tier is default's values");
    cr_assert_eq(tf_stat(d, "default", "evictions"), 2 * PN_HOT - dbytes / PN_VAL);
    /* /metrics: the same numbers, labelled, and a valid exposition */
    static char text[1 << 20];
    size_t len = 0;
    cr_assert_eq(fluxon_node_metrics(kf_owner[0], text, sizeof text, &len), FLUXON_OK);
    char want[160];
    snprintf(want, sizeof want, "fluxon_owner_tenant_bytes{tenant=\"acme\",node=\"ownA\"} %u", PN_VAL);
    cr_assert(strstr(text, want), "%s in:\n%.3000s", want, text);
    cr_assert(strstr(text, "fluxon_owner_tenant_hits_total{tenant=\"acme\",node=\"ownA\"} 2"));
    cr_assert(strstr(text, "fluxon_owner_tenant_misses_total{tenant=\"acme\",node=\"ownA\"} 1"));
    cr_assert(strstr(text, "fluxon_owner_tenant_evictions_total{tenant=\"acme\",node=\"ownA\"} 2"));
    snprintf(want, sizeof want, "fluxon_owner_tenant_pinned_bytes{tenant=\"acme\",node=\"ownA\"} %u", PN_VAL);
    cr_assert(strstr(text, want));
    static pf_doc doc;
    cr_assert_eq(pf_parse(text, &doc), 0, "every sample's family has HELP and TYPE");
    char out[4096];
    cr_assert_eq(pf_promtool(text, kf_dir, out, sizeof out), 0, "promtool check metrics:\n%s", out);
    fluxon_client_close(a);
    fluxon_client_close(d);
}

Test(pins, bad_input_gets_a_status_and_moves_no_counter)
{
    pn_up();
    fluxon_client *c = tf_client("acme");
    cr_assert_eq(pn_put(c, "b/0", 1, 0), FLUXON_OK);
    static const char *const counters[] = {"pin_requests", "pins_applied", "pins_refused", "pins_unpinned",
                                           "pinned_values", "tenant_key_refusals", "pin_puts"};
    long long before[PN_LEN(counters)];
    for (size_t i = 0; i < PN_LEN(counters); i++) before[i] = kf_stat(c, counters[i]);
    const char *k[1] = {"b/0"}, *nul[1] = {NULL}, *mark[1] = {"\001beta/b/0"};
    int st[1] = {123};
    cr_assert_eq(fluxon_pin(c, k, 1, FLUXON_PIN_TTL_MAX_MS + 1, 0, st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_pin(c, k, 0, 1000, 0, st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_pin(c, NULL, 1, 1000, 0, st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_pin(c, k, 1, 1000, 0, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_pin(c, nul, 1, 1000, 0, st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_pin(c, k, 1, 1000, 0x80, st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_pin(NULL, k, 1, 1000, 0, st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(st[0], 123, "no status written on an error return");
    uint8_t v[PN_VAL] = {0};
    fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_PIN_TTL, .pin_ttl_ms = FLUXON_PIN_TTL_MAX_MS + 1};
    cr_assert_eq(fluxon_put(c, "b/1", v, sizeof v, &o), FLUXON_ERR_INVALID_ARGUMENT);
    fluxon_put_options w = {.field_mask = FLUXON_PUT_OPT_PIN_TTL | FLUXON_PUT_OPT_WRITE_THROUGH,
                            .pin_ttl_ms = 1000, .write_through = 1};
    cr_assert_eq(fluxon_put(c, "b/1", v, sizeof v, &w), FLUXON_ERR_INVALID_ARGUMENT);
    for (size_t i = 0; i < PN_LEN(counters); i++)
        cr_assert_eq(kf_stat(c, counters[i]), before[i], "%s moved", counters[i]);
    cr_assert_eq(pn_exists(c, "b/1"), 0, "nothing stored");
    /* a key another tenant's namespace would name: refused by the tenant filter (its counter) */
    cr_assert_eq(fluxon_pin(c, mark, 1, 1000, 0, st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(kf_stat(c, "tenant_key_refusals"), before[5] + 1);
    cr_assert_eq(kf_stat(c, "pin_requests"), before[0]);
    /* an unknown key is a per-key status, not an error */
    const char *unk[1] = {"b/unknown"};
    cr_assert_eq(fluxon_pin(c, unk, 1, 1000, 0, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(kf_stat(c, "pinned_values"), 0);
    fluxon_client_close(c);
}

/* the default policy (s3fifo): pins take values out of its queues and put them back */
Test(pins, pins_work_with_the_s3fifo_policy)
{
    const char *extra[1] = {",\"hot_capacity_bytes\":\"1MiB\",\"eviction_policy\":\"s3fifo\""};
    kf_up_ex(1, NULL, extra);
    fluxon_client *c = tf_client(NULL);
    const char *keys[4] = {"s3/0", "s3/1", "s3/2", "s3/3"};
    for (int i = 0; i < 4; i++) cr_assert_eq(pn_put(c, keys[i], 60 + (uint64_t)i, 60000), FLUXON_OK);
    pn_flood(c, "f1", 3 * PN_HOT);
    pn_settle(c);
    for (int i = 0; i < 4; i++) cr_assert(pn_exists(c, keys[i]), "%s pinned through the flood", keys[i]);
    int st[4];
    cr_assert_eq(fluxon_pin(c, keys, 4, 0, 0, st), FLUXON_OK);
    cr_assert_eq(kf_stat(c, "pinned_values"), 0);
    pn_flood(c, "f2", 3 * PN_HOT);
    pn_settle(c);
    for (int i = 0; i < 4; i++) cr_assert_eq(pn_exists(c, keys[i]), 0, "%s evicted once unpinned", keys[i]);
    fluxon_client_close(c);
}

/* PIN travels on the rings (the default) and on the unix socket alike; pin_requests counts
 * a put carrying pin_ttl_ms as well as a fluxon_pin call (it counted only the latter),
 * pin_puts the puts alone */
Test(pins, pin_on_the_socket_transport)
{
    pn_up();
    char cfg[768];
    const char *base = kf_client_cfg(0);
    snprintf(cfg, sizeof cfg, "%.*s,\"transport\":\"socket\"}", (int)strlen(base) - 1, base);
    fluxon_client *c = NULL;
    cr_assert_eq(fluxon_client_open(cfg, &c), FLUXON_OK);
    cr_assert_eq(pn_put(c, "s/0", 1, 0), FLUXON_OK);
    cr_assert_eq(kf_stat(c, "pin_requests"), 0, "a put without pin_ttl_ms asks no pin");
    cr_assert_eq(pn_put(c, "s/1", 2, 60000), FLUXON_OK);
    cr_assert_eq(kf_stat(c, "pin_requests"), 1, "the pinned put");
    cr_assert_eq(kf_stat(c, "pin_puts"), 1);
    const char *k[3] = {"s/0", "s/1", "s/none"};
    int st[3];
    cr_assert_eq(fluxon_pin(c, k, 3, 60000, 0, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK);
    cr_assert_eq(st[1], FLUXON_OK);
    cr_assert_eq(st[2], FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(kf_stat(c, "pinned_values"), 2);
    cr_assert_eq(kf_stat(c, "pin_requests"), 2, "the pinned put and the fluxon_pin call (3 keys: one request)");
    cr_assert_eq(kf_stat(c, "pin_puts"), 1);
    fluxon_client_close(c);
}

/* Every value of a full segment pinned: a put is answered NO_SPACE within the stuck bound,
 * never left waiting; unpinning makes room. Values of 1 MiB (the plan path of fluxon_put). */
Test(pins, a_put_that_only_pinned_values_could_make_room_for_gets_no_space)
{
    kf_dir = th_tmpdir();
    cr_assert_eq(fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\","
                                   "\"listen\":\"127.0.0.1:0\",\"log_level\":\"error\"}", &kf_master), FLUXON_OK);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"owner\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"node_id\":\"ownA\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s/ownA/s.sock\",\"segment_bytes\":\"60MiB\","
             "\"reserve\":{\"grant_bytes\":\"4MiB\"},\"hot_capacity_bytes\":\"60MiB\",\"pin_budget_ratio\":1,"
             "\"log_level\":\"error\"}",
             fluxon_node_port(kf_master), kf_dir);
    cr_assert_eq(fluxon_node_start(cfg, &kf_owner[0]), FLUXON_OK, "%s", cfg);
    fluxon_client *c = tf_client(NULL);
    size_t big = 1u << 20;
    uint8_t *v = calloc(1, big);
    cr_assert_not_null(v);
    fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_PIN_TTL, .pin_ttl_ms = 60000};
    char k[32];
    int n = 0, rc = FLUXON_OK;
    for (; n < 80; n++) { /* 15 grants x 4 slots of 1 MiB fill the segment */
        snprintf(k, sizeof k, "p-%d", n);
        rc = fluxon_put(c, k, v, big, &o);
        if (rc != FLUXON_OK) break;
    }
    cr_assert_eq(rc, FLUXON_ERR_NO_SPACE, "put %d: %s", n, fluxon_status_string(rc));
    cr_assert_geq(n, 50, "%d values pinned before the segment was full", n);
    cr_assert_eq(kf_stat(c, "pinned_values"), n);
    double t0 = th_now_s();
    rc = pn_put(c, "small", 1, 0);
    double took = th_now_s() - t0;
    cr_assert_eq(rc, FLUXON_ERR_NO_SPACE, "everything pinned: %s", fluxon_status_string(rc));
    cr_assert_lt(took, 4.0, "answered in %.2f s, below the 5 s timeout", took);
    cr_assert_gt(kf_stat(c, "claims_no_space_fast"), 0);
    const char *first[1] = {"p-0"};
    int st[1];
    cr_assert_eq(fluxon_pin(c, first, 1, 0, 0, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK);
    double end = th_now_s() + th_wait_bound_s(10000);
    while ((rc = pn_put(c, "small", 1, 0)) == FLUXON_ERR_NO_SPACE && th_now_s() < end) th_sleep_ms(50);
    cr_assert_eq(rc, FLUXON_OK, "unpinned: room again (%s)", fluxon_status_string(rc));
    fluxon_client_close(c);
    free(v);
}

/* ---- pins are the owner's: a master kill -9 and restart leaves them (processes) ---- */
TestSuite(pins_restart, .fini = rf_down, .timeout = 180);

Test(pins_restart, pins_survive_a_master_kill_9)
{
    const char *extra[1] = {",\"hot_capacity_bytes\":\"1MiB\",\"eviction_policy\":\"lru\""};
    rf_up(1, extra);
    fluxon_client *c = rf_client(0);
    char key[8][32];
    for (int i = 0; i < 8; i++) {
        snprintf(key[i], sizeof key[i], "keep/%d", i);
        int rc = pn_put(c, key[i], (uint64_t)i, 120000);
        cr_assert_eq(rc, FLUXON_OK, "pinned put %s: %s", key[i], fluxon_status_string(rc));
    }
    cr_assert_eq(rf_stat(c, false, "pinned_values"), 8);
    rf_kill_master();
    rf_start_master();
    cr_assert(rf_wait_stat(c, true, "republish_owners_done", 1, 1, 30000), "the owner re-published");
    cr_assert(rf_wait_stat(c, false, "republishing", 0, 0, 30000));
    cr_assert_eq(rf_stat(c, false, "pinned_values"), 8, "re-publication keeps the pins");
    cr_assert_eq(rf_stat(c, true, "republish_refused"), 0);
    long long ev0 = rf_stat(c, false, "evictions");
    pn_flood(c, "flood", 3 * PN_HOT);
    cr_assert(rf_wait_stat(c, false, "hot_bytes", -1, PN_HOT * PN_VAL, 20000));
    cr_assert(rf_wait_stat(c, false, "eviction_debt", 0, 0, 20000));
    cr_assert_geq(rf_stat(c, false, "evictions") - ev0, 2 * PN_HOT - 8);
    for (int i = 0; i < 8; i++) cr_assert(pn_has(c, key[i], (uint64_t)i), "%s survived the restart and flood", key[i]);
    cr_assert_eq(rf_stat(c, false, "pinned_values"), 8);
    fluxon_client_close(c);
}
