/* test_master_index.c — the master's prefix index is built on demand (issue 18): publishing
 * never touches it until a LIST needs it; the first LIST builds it from the route map, every
 * later route change keeps it exact, and it is dropped MKV_INDEX_IDLE_MS after the last LIST
 * (then rebuilt by the next). Through the real plumbing (an embedded master spoken to as an
 * owner, mkvfix.h) and through the route functions directly (the idle sweep's clock). */
#include "mkvfix.h"
#include "mkv.h"

static fluxon_node *master;
static tc_t c1 = {.fd = -1};

static void setup(void)
{
    cr_assert_eq(fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"t\",\"listen\":\"127.0.0.1:0\","
                                   "\"heartbeat_timeout_ms\":60000,\"log_level\":\"error\"}", &master),
                 FLUXON_OK);
    mkv_port = fluxon_node_port(master);
    cr_assert_gt(mkv_port, 0);
}

static void teardown(void)
{
    t_close(&c1);
    fluxon_node_stop(master);
    master = NULL;
    mkv_free_kept();
}

/* The sample fluxon_<name>{node="master"} of the master's /metrics text, or -1. */
static long long mi_metric(const char *name)
{
    static char buf[1 << 18];
    size_t len = 0;
    if (fluxon_node_metrics(master, buf, sizeof buf, &len) != FLUXON_OK) return -1;
    char pat[128];
    snprintf(pat, sizeof pat, "\nfluxon_%s{node=\"master\"} ", name);
    const char *p = strstr(buf, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* Polls name until it reads want or timeout_ms passed (the snapshot is the reactor's). */
static bool mi_wait_metric(const char *name, long long want, int timeout_ms)
{
    uint64_t end = fx_now_ms() + (uint64_t)timeout_ms;
    for (int i = 0; i < 100000; i++) {
        if (mi_metric(name) == want) return true;
        if (fx_now_ms() >= end) return false;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* LIST prefix from the start, limit 0 (the default page); the keys into out. */
static uint32_t mi_list(const char *prefix, fx_body_keys_t *out)
{
    fx_body_list_t l = {fx_str_c(prefix), fx_str_c(""), 0};
    cr_assert_eq(T_CALL(&c1, LIST, list, &l, keys, out), FLUXON_OK, "%s", last_err);
    return out->keys.n;
}

TestSuite(master_index, .init = setup, .fini = teardown, .timeout = 60);

Test(master_index, publishing_leaves_the_index_unbuilt_until_a_list_needs_it)
{
    t_owner(&c1, "n1", 100);
    enum { N = 40 };
    char names[N][16];
    const char *keys[N];
    uint64_t offs[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "%s/%02d", i % 2 ? "b" : "a", N - 1 - i);
        keys[i] = names[i];
        offs[i] = 4096ull * (uint64_t)(i + 1);
    }
    fx_body_put_done_ack_t ack;
    cr_assert_eq(t_put(&c1, 1, keys, offs, N, 10, 0, 0, NULL, 0, &ack), FLUXON_OK, "%s", last_err);
    cr_assert(mi_wait_metric("master_routes", N, 5000), "routes %lld", mi_metric("master_routes"));
    cr_assert_eq(mi_metric("master_prefix_index_keys"), 0, "no LIST yet: no index");
    cr_assert_eq(mi_metric("master_prefix_index_builds_total"), 0);
    /* the first LIST builds it: every key, in order */
    fx_body_keys_t lk;
    cr_assert_eq(mi_list("a/", &lk), N / 2);
    for (uint32_t i = 0; i < lk.keys.n; i++) {
        char want[16];
        snprintf(want, sizeof want, "a/%02u", 2 * i + 1);
        cr_assert(str_is(lk.keys.v[i], want), "key %u: %.*s, want %s", i, (int)lk.keys.v[i].len, lk.keys.v[i].p, want);
    }
    cr_assert(mi_wait_metric("master_prefix_index_keys", N, 5000), "index keys %lld",
              mi_metric("master_prefix_index_keys"));
    cr_assert_eq(mi_metric("master_prefix_index_builds_total"), 1);
    /* from now on every route change keeps it exact: a new key, a replaced key, a delete */
    t_put1(&c1, 2, "a/00", 4096ull * (N + 1), 10, 0, NULL, NULL);
    t_put1(&c1, 3, "a/01", 4096ull * (N + 2), 10, 0, NULL, NULL); /* replaces a/01 */
    fx_body_invalidate_t inv;
    cr_assert(t_invalidate(&c1, &inv, 2000), "the replaced a/01 is invalidated");
    fx_body_key_t k = {fx_str_c("a/03")};
    fx_body_empty_t e;
    cr_assert_eq(T_CALL(&c1, DELETE, key, &k, empty, &e), FLUXON_OK, "%s", last_err);
    cr_assert(t_invalidate(&c1, &inv, 2000));
    cr_assert_eq(mi_list("a/", &lk), N / 2);
    cr_assert(str_is(lk.keys.v[0], "a/00") && str_is(lk.keys.v[1], "a/01") && str_is(lk.keys.v[2], "a/05"),
              "a/00 added, a/01 kept once, a/03 gone");
    cr_assert_eq(mi_list("", &lk), N);
    cr_assert(str_is(lk.keys.v[N / 2], "b/00") && str_is(lk.keys.v[N - 1], "b/38"));
    cr_assert(mi_wait_metric("master_prefix_index_keys", N, 5000));
    cr_assert_eq(mi_metric("master_prefix_index_builds_total"), 1, "built once, then maintained");
}

/* The route functions themselves, on the sweep's clock: an idle index is dropped, the next
 * LIST rebuilds it from the routes as they are then. */
Test(master_index, an_idle_index_is_dropped_and_the_next_list_rebuilds_it)
{
    fx_master_t m;
    memset(&m, 0, sizeof m);
    cr_assert_eq(fx_master_kv_init(&m), FLUXON_OK);
    mkv_t *s = m.kv;
    master_node_t n;
    memset(&n, 0, sizeof n);
    strcpy(n.node_id, "d1");
    n.generation = 1;
    mkv_replica_t rep = {.node = &n, .generation = 1, .offset = 4096};
    uint64_t pms;
    uint32_t pver;
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k/%04d", (i * 7919) % 1000);
        cr_assert_eq(mkv_route_install(s, fx_str_c(key), 0, 10, 0, 1, &rep, &pms, &pver, NULL), FLUXON_OK);
    }
    cr_assert_eq(mkv_routes_index_keys(s), 0, "publishing builds nothing");
    fx_str_t keys[16];
    uint32_t got = 0;
    cr_assert_eq(mkv_routes_list(s, fx_str_c("k/09"), fx_str_c("k/0990"), keys, 16, &got), FLUXON_OK);
    cr_assert_eq(got, 9, "k/0991..k/0999");
    cr_assert(str_is(keys[0], "k/0991") && str_is(keys[8], "k/0999"));
    cr_assert_eq(mkv_routes_index_keys(s), 1000);
    uint64_t now = fx_now_ms();
    cr_assert_not(mkv_routes_index_sweep(s, now), "just used: kept");
    cr_assert_not(mkv_routes_index_sweep(s, now + MKV_INDEX_IDLE_MS / 2), "kept while LISTs come");
    /* a route removed while the index exists leaves it */
    mkv_route_t *r = mkv_route_get(s, fx_str_c("k/0995"), NULL);
    cr_assert_not_null(r);
    mkv_route_remove(s, "k/0995", 6, r, NULL);
    cr_assert_eq(mkv_routes_index_keys(s), 999);
    cr_assert(mkv_routes_index_sweep(s, now + MKV_INDEX_IDLE_MS + 1000), "idle: dropped");
    cr_assert_eq(mkv_routes_index_keys(s), 0);
    /* routes change while there is no index; the next LIST sees them all */
    cr_assert_eq(mkv_route_install(s, fx_str_c("k/0995x"), 0, 10, 0, 1, &rep, &pms, &pver, NULL), FLUXON_OK);
    r = mkv_route_get(s, fx_str_c("k/0998"), NULL);
    mkv_route_remove(s, "k/0998", 6, r, NULL);
    cr_assert_eq(mkv_routes_list(s, fx_str_c("k/099"), fx_str_c(""), keys, 16, &got), FLUXON_OK);
    const char *want[] = {"k/0990", "k/0991", "k/0992", "k/0993", "k/0994", "k/0995x", "k/0996", "k/0997", "k/0999"};
    cr_assert_eq(got, FX_ARRAY_LEN(want));
    for (uint32_t i = 0; i < got; i++) cr_assert(str_is(keys[i], want[i]), "key %u", i);
    cr_assert_eq(mkv_routes_index_keys(s), 999);
    cr_assert_eq(s->c.prefix_index_builds, 2);
    fx_master_kv_fini(&m);
    cr_assert_null(m.kv);
    fx_master_kv_node_free(&m, &n);
}

FX_INTERNAL void fx_mappend_ranged(mkv_t *s, master_node_t *n, fx_str_t key, uint64_t off, uint64_t put_ms,
                                   uint64_t put_ver, fx_mkv_inv_t *inv);

/* The targets' oldest-first list is compacted a bounded number of times when every entry
 * stays live: 20,000 values each ranged on two CPU owners (two live entries a route, more
 * than twice the routes after any pass) take a handful of passes, not one per push (the
 * review of session 32: a pass on every push, 14.8 s for these 40,000 entries). The pass
 * runs a reactor turn after the push that makes it due, never inside it. */
Test(master_index_direct, the_cold_list_is_compacted_a_logarithmic_number_of_times)
{
    static fx_master_t m;
    memset(&m, 0, sizeof m);
    cr_assert_eq(fx_reactor_create(&m.r), FLUXON_OK);
    m.cfg.replica_target_roles = 1u << FX_NODE_REMOTE_CACHE;
    cr_assert_eq(fx_master_kv_init(&m), FLUXON_OK);
    static master_node_t nd[2];
    for (int i = 0; i < 2; i++) {
        snprintf(nd[i].node_id, sizeof nd[i].node_id, "cpu%d", i);
        nd[i].generation = 1;
        nd[i].alive = true;
        nd[i].node_role = FX_NODE_REMOTE_CACHE;
    }
    enum { N = 20000 };
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "k/%08d", i);
        uint64_t off = 4096ull * (uint64_t)(i + 1), pms = 0;
        uint32_t pver = 0;
        mkv_replica_t rep = {.node = &nd[0], .generation = 1, .offset = off, .range_bytes = 4096};
        cr_assert_eq(mkv_route_install(m.kv, fx_str_c(key), 0, 10, 0, 1, &rep, &pms, &pver, NULL), FLUXON_OK);
        fx_mappend_ranged(m.kv, &nd[0], fx_str_c(key), off, pms, pver, NULL);
        mkv_route_t *r = mkv_route_get(m.kv, fx_str_c(key), NULL);
        cr_assert_not_null(r);
        cr_assert_eq(mkv_route_add_replica(m.kv, r, &nd[1], off), FLUXON_OK);
        r->rep[r->n_rep - 1].range_bytes = 4096;
        fx_mappend_ranged(m.kv, &nd[1], fx_str_c(key), off, pms, pver, NULL);
        if (i % 500 == 499) fx_reactor_run_timers_due(m.r); /* a due pass runs */
    }
    fx_reactor_run_timers_due(m.r);
    fx_mmetrics_t mm;
    memset(&mm, 0, sizeof mm);
    fx_mappend_metrics(m.kv, &mm);
    cr_assert_eq(mm.target_cold_entries, 2 * N, "every entry names a replica: none removed");
    cr_assert_geq(mm.target_cold_compactions, 1, "a pass ran");
    cr_assert_leq(mm.target_cold_compactions, 5, "%llu passes for %d entries: each waits until the list doubled",
                  (unsigned long long)mm.target_cold_compactions, 2 * N);
}
