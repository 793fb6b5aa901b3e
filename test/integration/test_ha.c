/* test_ha.c — standby masters through etcd (issue 17): masters campaign with etcd's
 * election API, the leader alone serves; owners find it in etcd and follow it when it
 * changes; a leader killed mid-replay is replaced within 2 x the lease TTL and the owners'
 * re-publication keeps every value; a leader stopped until its lease expired refuses
 * writes once resumed. Needs /usr/bin/etcd (skips without it). Processes: hafix.h. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "config.h"
#include "hafix.h"
#include "tcpproxy.h"

#define VLEN 20000
#define N_PRE 48
#define TTL_MS 2000

static void fini(void) { hf_down(); }

static void put_opt(fluxon_client *c, const char *key, uint64_t seed, bool local_first)
{
    static uint8_t v[VLEN];
    th_pattern(v, NULL, VLEN, seed);
    fluxon_put_options lf = {.field_mask = FLUXON_PUT_OPT_LOCAL_FIRST, .local_first = 1};
    int rc = fluxon_put(c, key, v, VLEN, local_first ? &lf : NULL);
    cr_assert_eq(rc, FLUXON_OK, "put %s: %s", key, fluxon_status_string(rc));
}

static void put_seeded(fluxon_client *c, const char *key, uint64_t seed) { put_opt(c, key, seed, false); }

static void get_check(fluxon_client *c, const char *key, uint64_t seed, const char *through)
{
    fluxon_holder *h = NULL;
    int rc = fluxon_get(c, key, &h);
    cr_assert_eq(rc, FLUXON_OK, "get %s through %s: %s", key, through, fluxon_status_string(rc));
    cr_assert_eq(fluxon_holder_len(h), VLEN);
    cr_assert(th_pattern(NULL, fluxon_holder_data(h), VLEN, seed), "%s through %s: wrong bytes", key, through);
    fluxon_holder_release(h);
}

/* ---- no etcd needed: the config and the gateway's base64 ---- */
static void cfg_err(const char *ha, const char *want)
{
    char json[700], err[512];
    snprintf(json, sizeof json, "{\"role\":\"master\",\"cluster_id\":\"c\",\"listen\":\"127.0.0.1:7600\",\"ha\":%s}", ha);
    fx_config_t c;
    cr_assert_eq(fx_config_parse(json, &c, err, sizeof err), FLUXON_ERR_CONFIG, "%s accepted", ha);
    cr_assert(strstr(err, want), "error for %s: \"%s\" lacks \"%s\"", ha, err, want);
}

Test(ha_config, fields_defaults_and_errors_name_value_limit_and_field)
{
    fx_config_t c;
    char err[512];
    cr_assert_eq(fx_config_parse("{\"role\":\"master\",\"cluster_id\":\"c\"}", &c, err, sizeof err), FLUXON_OK);
    cr_assert_eq(c.ha_etcd[0], 0, "off by default");
    const char *ok = "{\"role\":\"owner\",\"cluster_id\":\"c\",\"socket\":\"/tmp/x.sock\",\"segment_bytes\":\"64MiB\","
                     "\"ha\":{\"etcd\":\"http://127.0.0.1:2379,http://localhost:2380\",\"lease_ttl_ms\":3000}}";
    cr_assert_eq(fx_config_parse(ok, &c, err, sizeof err), FLUXON_OK, "%s", err);
    cr_assert_str_eq(c.ha_etcd, "http://127.0.0.1:2379,http://localhost:2380");
    cr_assert_eq(c.ha_lease_ttl_ms, 3000);
    cr_assert_str_eq(c.ha_key, "fluxon/c/master", "the default election name");
    cfg_err("{\"lease_ttl_ms\":2000}", "ha.etcd: missing (required with \"ha\")");
    cfg_err("{\"etcd\":\"127.0.0.1:2379\"}", "ha.etcd: \"127.0.0.1:2379\" endpoint 1 is not http://host:port");
    cfg_err("{\"etcd\":\"http://127.0.0.1:2379,http://x:1\"}", "endpoint 2 is not http://host:port");
    cfg_err("{\"etcd\":\"http://127.0.0.1:2379\",\"lease_ttl_ms\":500}",
            "ha.lease_ttl_ms: 500 must be an integer in [1000, 600000]");
    cfg_err("{\"etcd\":\"http://127.0.0.1:2379\",\"lease_ttl_ms\":1500}", "ha.lease_ttl_ms: 1500 is not a multiple of 1000");
    cfg_err("{\"etcd\":\"http://127.0.0.1:2379\",\"key\":\"a b\"}", "ha.key: \"a b\" must be characters of");
    cfg_err("{\"etcd\":\"http://127.0.0.1:2379\",\"ttl\":1}", "ha.ttl: unknown field for role master");
    cr_assert_eq(fx_config_parse("{\"role\":\"master\",\"cluster_id\":\"c\",\"listen\":\"0.0.0.0:7600\","
                                 "\"ha\":{\"etcd\":\"http://127.0.0.1:2379\"}}", &c, err, sizeof err),
                 FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "listen: \"0.0.0.0:7600\" cannot be advertised"), "%s", err);
    cr_assert_eq(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"c\",\"master\":\"127.0.0.1:7600\","
                                 "\"ha\":{\"etcd\":\"http://127.0.0.1:2379\"}}", &c, err, sizeof err),
                 FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "master: cannot be combined with \"ha\""), "%s", err);
}

Test(ha_config, base64_round_trips)
{
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar", "127.0.0.1:7600"};
    const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy", "MTI3LjAuMC4xOjc2MDA="};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        char enc[64];
        uint8_t dec[64];
        cr_assert_eq(fx_b64_encode(in[i], strlen(in[i]), enc, sizeof enc), strlen(out[i]));
        cr_assert_str_eq(enc, out[i]);
        cr_assert_eq(fx_b64_decode(enc, dec, sizeof dec), (ssize_t)strlen(in[i]));
        cr_assert_eq(memcmp(dec, in[i], strlen(in[i])), 0);
    }
    uint8_t d[8];
    cr_assert_eq(fx_b64_decode("Zm9", d, sizeof d), -1, "not a multiple of 4");
    cr_assert_eq(fx_b64_decode("Z!9v", d, sizeof d), -1, "not base64");
    cr_assert_eq(fx_b64_decode("Zm9vYmFy", d, 5), -1, "short buffer");
}

/* ---- with etcd ---- */
Test(ha, two_masters_one_leads_owners_register_with_it_a_standby_serves_nobody, .timeout = 120, .fini = fini)
{
    HF_REQUIRE_ETCD();
    hf_up(2, 2, TTL_MS);
    cr_assert_eq(hf_etcd_leader(), 0, "etcd names master 0 (it campaigned first)");
    cr_assert(!th_wait_log(hf.mlog[1], "is the leader of", 1), "master 1 stays a standby");
    char want[80], log[400];
    snprintf(want, sizeof want, "registered with master 127.0.0.1:%d", hf.mport[0]);
    for (int i = 0; i < 2; i++) {
        snprintf(log, sizeof log, "%s/owner%d.log", rf.dir, i);
        cr_assert(th_wait_log(log, want, 1), "owner %d registered with the leader", i);
        /* a leader elected before the owner started: no "no leader" warning before etcd's
         * first answer (new user's finding 21) */
        cr_assert(!th_wait_log(log, "etcd names no leader", 1), "owner %d warned before its first lookup", i);
    }
    fluxon_client *c[2] = {rf_client(0), rf_client(1)};
    put_seeded(c[0], "a", 1);
    get_check(c[1], "a", 1, "o1");
    cr_assert_eq(rf_stat(c[0], true, "ha_leader"), 1);
    cr_assert_eq(rf_stat(c[0], true, "ha_elections"), 1);
    cr_assert_eq(rf_stat(c[1], true, "owners"), 2, "both owners at the leader");
    /* an owner pointed at the standby (no "ha") is refused: the standby serves nobody */
    char at[64];
    snprintf(at, sizeof at, "\"master\":\"127.0.0.1:%d\"", hf.mport[1]);
    hf_write_owner(2, at, NULL);
    rf_start_owner(2);
    snprintf(log, sizeof log, "%s/owner2.log", rf.dir);
    cr_assert(th_wait_log(log, "is a standby, not the leader", 20000), "the standby refuses an owner (see %s)", log);
    cr_assert(!th_wait_log(log, "registered with master", 1));
    fluxon_client_close(c[0]);
    fluxon_client_close(c[1]);
}

Test(ha, leader_killed_mid_replay_a_standby_leads_within_two_ttls_and_nothing_is_lost, .timeout = 300, .fini = fini)
{
    HF_REQUIRE_ETCD();
    snprintf(rf_segment, sizeof rf_segment, "1GiB"); /* room for the whole replay: nothing evicted */
    hf_up(2, 2, TTL_MS);
    snprintf(rf_segment, sizeof rf_segment, "256MiB");
    fluxon_client *c[2] = {rf_client(0), rf_client(1)};
    char key[64];
    for (int i = 0; i < N_PRE; i++) { /* placed by the leader on either owner */
        snprintf(key, sizeof key, "pre:%d", i);
        put_seeded(c[i % 2], key, 1000 + i);
    }
    put_seeded(c[0], "del-me", 7);
    cr_assert_eq(fluxon_delete(c[1], "del-me"), FLUXON_OK);
    pid_t demo = rf_demo_start("pass1", 3, 6000, "rp");
    cr_assert(rf_wait_stat(c[0], true, "puts", 1, N_PRE + 2000, 120000), "the replay publishes");
    long long routes_before = rf_stat(c[0], true, "routes");
    double t0 = th_now_s();
    hf_kill_master(0); /* mid-replay */
    cr_assert(hf_wait_leads(1, 4 * TTL_MS), "master 1 takes over (see %s)", hf.mlog[1]);
    double elected_s = th_now_s() - t0;
    cr_assert_leq(elected_s, 2.0 * TTL_MS / 1000, "a standby leads within 2 x lease TTL: %.2f s", elected_s);
    cr_assert(rf_wait_stat(c[0], true, "republish_owners_done", 1, 2, 20000), "both owners re-publish to master 1");
    cr_log_info("leader SIGKILL -> standby leads %.2f s, owners re-registered %.2f s (lease TTL %d ms)", elected_s,
                th_now_s() - t0, TTL_MS);
    cr_assert_eq(hf_etcd_leader(), 1);
    { /* `fluxon stat` tells which master leads (new user's finding 22) */
        static char nodes[1 << 16];
        char want[64];
        size_t nl = 0;
        cr_assert_eq(fluxon_client_cluster_nodes(c[0], nodes, sizeof nodes, &nl), FLUXON_OK);
        snprintf(want, sizeof want, "\"node_id\":\"master@127.0.0.1:%d\"", hf.mport[1]);
        cr_assert(strstr(nodes, want), "the leader's row names it: %s", nodes);
    }
    long long routes_after = rf_stat(c[0], true, "routes");
    cr_assert_geq(routes_after, routes_before, "routes after the failover %lld, before %lld", routes_after, routes_before);
    cr_assert_eq(rf_stat(c[0], true, "republish_refused"), 0);
    int ex;
    cJSON *d = rf_demo_wait(demo, "pass1", 240000, &ex);
    rf_demo_explain(d, "pass1", ex, "FLUXON_ERR_UNAVAILABLE"); /* refusals while no master led */
    cr_assert_eq(rf_num(d, "checksum_failures"), 0);
    cr_assert_eq(rf_num(d, "contract_violations"), 0);
    cr_assert_eq(rf_num(d, "futures_failed"), 0, "puts in flight either publish or fall back");
    cr_assert(rf_num(d, "baseline_ok"), "the replay's counters are back to baseline (R1)");
    cr_assert_eq(rf_num(d, "errors"), rf_errors_of(d, "FLUXON_ERR_UNAVAILABLE"), "only refusals while no master "
                 "served: see %s/pass1.log", rf.dir);
    cJSON_Delete(d);
    for (int o = 0; o < 2; o++) {
        for (int i = 0; i < N_PRE; i++) {
            snprintf(key, sizeof key, "pre:%d", i);
            get_check(c[o], key, 1000 + i, o ? "o1" : "o0");
        }
        fluxon_holder *h = NULL;
        cr_assert_eq(fluxon_get(c[o], "del-me", &h), FLUXON_ERR_NOT_FOUND, "a delete before the kill stays deleted");
    }
    /* the replay again through each owner: every hit checked by its checksum */
    for (int o = 0; o < 2; o++) {
        char name[32];
        snprintf(name, sizeof name, "pass2-o%d", o);
        d = rf_demo_wait(rf_demo_start(name, 1u << o, 6000, "rp"), name, 240000, &ex);
        rf_demo_explain(d, name, ex, NULL);
        cr_assert_eq(ex, 0, "replay through o%d alone: see %s/%s.log", o, rf.dir, name);
        cr_assert_eq(rf_num(d, "checksum_failures"), 0);
        cr_assert_gt(rf_num(d, "prefix_hits"), 0);
        cJSON_Delete(d);
    }
    fluxon_client_close(c[0]);
    fluxon_client_close(c[1]);
}

typedef struct bg_delete {
    fluxon_client *c;
    int rc;
} bg_delete_t;

static void *bg_delete(void *arg)
{
    bg_delete_t *b = arg;
    b->rc = fluxon_delete(b->c, "w");
    return NULL;
}

Test(ha, a_leader_resumed_after_its_lease_expired_refuses_writes, .timeout = 120, .fini = fini)
{
    HF_REQUIRE_ETCD();
    hf_up(2, 2, TTL_MS);
    /* owner 2 is tied to master 0 (no "ha"), with heartbeats too rare to notice the stop */
    char at[64];
    snprintf(at, sizeof at, "\"master\":\"127.0.0.1:%d\"", hf.mport[0]);
    hf_write_owner(2, at, "\"heartbeat_interval_ms\":30000,\"master_timeout_ms\":30000");
    rf_start_owner(2);
    hf_wait_owner(2, "registered with master");
    fluxon_client *c0 = rf_client(0), *cx = rf_client(2);
    put_opt(c0, "w", 5, true); /* held by o0, which follows the leader */
    cr_assert_eq(kill(hf.master[0], SIGSTOP), 0);
    hf.stopped[0] = true;
    double t0 = th_now_s();
    cr_assert(hf_wait_leads(1, 4 * TTL_MS), "master 1 takes over once master 0's lease expired (see %s)", hf.mlog[1]);
    cr_assert_leq(th_now_s() - t0, 2.0 * TTL_MS / 1000, "within 2 x lease TTL");
    cr_assert(rf_wait_stat(c0, true, "republish_owners_done", 1, 2, 20000), "the HA owners follow the new leader");
    /* a write to the stopped leader waits in its socket ... */
    bg_delete_t b = {cx, 1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, bg_delete, &b), 0);
    cr_assert_eq(kill(hf.master[0], SIGCONT), 0); /* ... and is refused once it runs again */
    hf.stopped[0] = false;
    pthread_join(th, NULL);
    cr_assert_neq(b.rc, FLUXON_OK, "the resumed old leader does not accept the delete");
    cr_assert(th_wait_log(hf.mlog[0], "lost the leadership", 10000), "it knows it lost (see %s)", hf.mlog[0]);
    cr_assert(th_wait_log(hf.mlog[0], "master deposed", 10000), "it stopped serving");
    cr_assert_eq(hf_etcd_leader(), 1, "master 1 still leads");
    /* the delete took effect nowhere: "w" is read back byte-exact through the new leader */
    get_check(c0, "w", 5, "o0");
    put_seeded(c0, "after", 9);
    get_check(c0, "after", 9, "o0");
    fluxon_client_close(c0);
    fluxon_client_close(cx);
}

/* The failover figure: leader SIGKILL -> the standby leads, and -> every owner has
 * re-registered and re-published; median of 10 (printed with --verbose). */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

Test(ha, failover_time_median_of_10, .timeout = 300, .fini = fini)
{
    HF_REQUIRE_ETCD();
    enum { ROUNDS = 10, TTL = 1000 };
    hf_up(2, 2, TTL);
    fluxon_client *c = rf_client(0);
    put_seeded(c, "keep", 3);
    double lead[ROUNDS], ready[ROUNDS];
    int leader = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int next = 1 - leader;
        double t0 = th_now_s();
        hf_kill_master(leader);
        cr_assert(hf_wait_leads(next, 10 * TTL), "round %d: master %d takes over (see %s)", r, next, hf.mlog[next]);
        lead[r] = th_now_s() - t0;
        cr_assert(rf_wait_stat(c, true, "republish_owners_done", 1, 2, 20000), "round %d: owners re-register", r);
        ready[r] = th_now_s() - t0;
        get_check(c, "keep", 3, "o0");
        hf_start_master(leader); /* back as the standby */
        leader = next;
    }
    double l2[ROUNDS], r2[ROUNDS];
    memcpy(l2, lead, sizeof l2);
    memcpy(r2, ready, sizeof r2);
    qsort(l2, ROUNDS, sizeof *l2, cmp_d);
    qsort(r2, ROUNDS, sizeof *r2, cmp_d);
    cr_log_info("failover (lease TTL %d ms, %d rounds): SIGKILL -> new leader serving median %.2f s (min %.2f, max "
                "%.2f); -> owners re-registered and re-published median %.2f s (min %.2f, max %.2f)",
                TTL, ROUNDS, (l2[4] + l2[5]) / 2, l2[0], l2[ROUNDS - 1], (r2[4] + r2[5]) / 2, r2[0], r2[ROUNDS - 1]);
    cr_assert_leq((l2[4] + l2[5]) / 2, 2.0 * TTL / 1000, "the median election is within 2 x lease TTL");
    fluxon_client_close(c);
}

/* W6: put ids grow across masters whatever the hosts' clocks say. Master 1's put clock is
 * 10 minutes behind master 0's. k is put through master 0 on owner 0, which is then
 * stopped (SIGSTOP) while master 0 is killed; k is put again through master 1 on owner 1;
 * owner 0 resumes and re-publishes its older k. That version had the higher put id (the
 * faster clock's) and replaced the newer one; now master 1 issues ids above the ceiling
 * master 0 kept in etcd, and the older k is refused. */
Test(ha, a_standby_with_a_slower_clock_issues_put_ids_above_the_old_leaders, .timeout = 120, .fini = fini)
{
    HF_REQUIRE_ETCD();
    hf_master_extra[1] = ",\"test\":{\"clock_offset_ms\":-600000}";
    hf_up(2, 2, TTL_MS);
    hf_master_extra[1] = NULL;
    fluxon_client *c[2] = {rf_client(0), rf_client(1)};
    put_opt(c[0], "k", 1, true); /* on owner 0 */
    cr_assert_eq(kill(rf.owner[0], SIGSTOP), 0);
    hf_kill_master(0);
    cr_assert(hf_wait_leads(1, 4 * TTL_MS), "master 1 takes over (see %s)", hf.mlog[1]);
    char want[80], log[400];
    snprintf(want, sizeof want, "registered with master 127.0.0.1:%d", hf.mport[1]);
    snprintf(log, sizeof log, "%s/owner1.log", rf.dir);
    cr_assert(th_wait_log(log, want, 20000), "owner 1 registered with master 1 (see %s)", log);
    put_opt(c[1], "k", 2, true); /* the newer k, on owner 1, through the slower clock */
    cr_assert_eq(kill(rf.owner[0], SIGCONT), 0);
    cr_assert(rf_wait_stat(c[1], true, "republish_owners_done", 1, 2, 30000), "owner 0 re-publishes to master 1");
    get_check(c[1], "k", 2, "o1");
    get_check(c[0], "k", 2, "o0");
    fluxon_client_close(c[0]);
    fluxon_client_close(c[1]);
}

/* H1: the standby's campaign connection dies silently (a proxy the test controls stops
 * relaying it, closing nothing) while its lease stays alive through other connections.
 * The leader is killed: etcd elects the standby, whose campaign answer never arrives. It
 * used to wait for it for ever (elected in etcd, serving nobody: owners refused); now its
 * leader check at the next keepalive finds the leader key its own and it serves. */
static tcp_proxy_t px;

static void fini_proxy(void)
{
    hf_down();
    tp_stop(&px);
}

Test(ha, a_standby_whose_campaign_connection_died_silently_still_takes_over, .timeout = 120, .fini = fini_proxy)
{
    HF_REQUIRE_ETCD();
    tp_start(&px, &hf.etcd_port);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", px.port);
    hf_master_etcd[1] = url;
    hf_up(2, 1, TTL_MS);
    hf_master_etcd[1] = NULL;
    double end = th_now_s() + 10;
    while (atomic_load(&px.campaigns_seen) < 1 && th_now_s() < end) th_sleep_ms(10);
    cr_assert_geq(atomic_load(&px.campaigns_seen), 1, "master 1's campaign went through the proxy");
    th_sleep_ms(200); /* etcd holds master 1's candidacy */
    atomic_store(&px.freeze_campaigns, true);
    end = th_now_s() + 5;
    while (atomic_load(&px.frozen) < 1 && th_now_s() < end) th_sleep_ms(10);
    cr_assert_geq(atomic_load(&px.frozen), 1, "the campaign connection is silent");
    hf_kill_master(0);
    cr_assert(hf_wait_leads(1, 5 * TTL_MS), "master 1 serves though its campaign's answer never came (see %s)",
              hf.mlog[1]);
    cr_assert_eq(hf_etcd_leader(), 1);
    hf_wait_owner(0, "registered with master");
    char want[80], log[400];
    snprintf(want, sizeof want, "registered with master 127.0.0.1:%d", hf.mport[1]);
    snprintf(log, sizeof log, "%s/owner0.log", rf.dir);
    cr_assert(th_wait_log(log, want, 20000), "the owner registers with master 1 (see %s)", log);
    fluxon_client *c = rf_client(0);
    put_seeded(c, "after", 5);
    get_check(c, "after", 5, "o0");
    fluxon_client_close(c);
}

/* Tenant acme's quota_bytes at c's owner (-1: not listed). */
static long long acme_quota(fluxon_client *c)
{
    static char buf[1 << 17];
    size_t len;
    cr_assert_eq(fluxon_client_stats(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *doc = cJSON_Parse(buf);
    cr_assert_not_null(doc);
    cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "owner"), "tenants"), "acme");
    cJSON *v = cJSON_GetObjectItem(t, "quota_bytes");
    long long r = cJSON_IsNumber(v) ? (long long)cJSON_GetNumberValue(v) : -1;
    cJSON_Delete(doc);
    return r;
}

/* Waits (bounded) until acme's quota at c's owner is want. */
static bool wait_quota(fluxon_client *c, long long want, int timeout_ms)
{
    double end = th_now_s() + th_wait_bound_s(timeout_ms);
    while (th_now_s() < end) {
        if (acme_quota(c) == want) return true;
        th_sleep_ms(20);
    }
    return false;
}

static void etcd_put_tenants(const char *json)
{
    fx_etcd_t *e = NULL;
    cr_assert_eq(fx_etcd_new(hf.url, &e), FLUXON_OK);
    char err[256] = "";
    int rc = fx_etcd_put(e, "fluxon/ha/master.tenants", json, 2000, err, sizeof err);
    fx_etcd_free(e);
    cr_assert_eq(rc, FLUXON_OK, "etcd put: %s", err);
}

/* Issue 42: the tenants' quota table outlives its master. A quota set at run time on o0
 * reaches o1 through the leader, which stores the table in etcd. The leader is killed and
 * o1 restarted (it starts from its config's quota); the new leader reads the table from
 * etcd before it serves and hands it to o1 when it registers. Then an operator changes the
 * table in etcd itself, and both owners apply it; a table that is not valid is refused and
 * changes nothing. The old code: the new leader had no table, and o1 kept its config's. */
/* Starts owner i again and waits until it registered with master 1 (the new leader); a
 * client of it. */
static fluxon_client *owner_back_under_master1(int i)
{
    char want[128];
    rf_start_owner(i);
    snprintf(want, sizeof want, "registered with master 127.0.0.1:%d", hf.mport[1]);
    hf_wait_owner(i, want);
    return rf_client(i);
}

Test(ha, a_quota_set_at_run_time_outlives_the_leader_and_follows_etcd, .timeout = 120, .fini = fini)
{
    HF_REQUIRE_ETCD();
    hf_up(2, 0, TTL_MS);
    char ha[200];
    snprintf(ha, sizeof ha, "\"ha\":{\"etcd\":\"%s\",\"lease_ttl_ms\":%d}", hf.url, TTL_MS);
    const char *ten = "\"heartbeat_interval_ms\":500,\"master_timeout_ms\":3000,\"tenant_admin_token\":\"adm\","
                      "\"tenants\":{\"acme\":{\"token\":\"acme-secret\",\"quota_bytes\":\"8MiB\"}}";
    rf.n_owners = 2;
    for (int i = 0; i < 2; i++) {
        hf_write_owner(i, ha, ten);
        rf_start_owner(i);
    }
    for (int i = 0; i < 2; i++) hf_wait_owner(i, "registered with master");
    fluxon_client *c0 = rf_client(0), *c1 = rf_client(1);
    cr_assert_eq(acme_quota(c1), 8 << 20, "the config's quota");
    cr_assert_eq(fluxon_tenant_set(c0, "acme", 4 << 20, 0, FLUXON_TENANT_SET_QUOTA, "adm"), FLUXON_OK);
    cr_assert(wait_quota(c1, 4 << 20, 5000), "o1 applies o0's change (through the leader)");
    cr_assert(rf_wait_stat(c0, true, "tenant_table_stores", 1, 1, 5000), "the leader stored the table in etcd");
    fluxon_client_close(c1);
    th_stop(rf.owner[1], SIGTERM, 5000); /* back with its config's 8 MiB */
    rf.owner[1] = -1;
    hf_kill_master(0);
    cr_assert(hf_wait_leads(1, 4 * TTL_MS), "master 1 takes over (see %s)", hf.mlog[1]);
    cr_assert(th_wait_log(hf.mlog[1], "tenants' quota table read from etcd", 1), "read before it served");
    c1 = owner_back_under_master1(1);
    cr_assert(wait_quota(c1, 4 << 20, 10000), "the restarted o1 gets the run-time quota from the new leader: %lld",
              acme_quota(c1));
    /* an operator edits the table in etcd: every owner applies it */
    etcd_put_tenants("{\"acme\":{\"quota_bytes\":\"2MiB\"}}");
    cr_assert(wait_quota(c0, 2 << 20, 10000) && wait_quota(c1, 2 << 20, 10000), "the etcd edit reaches both owners");
    /* a table that is not valid changes nothing */
    etcd_put_tenants("{\"acme\":{\"quota_bytes\":\"lots\"}}");
    cr_assert(rf_wait_stat(c0, true, "tenant_table_refused", 0, 1, 10000), "the bad table is refused");
    cr_assert(th_wait_log(hf.mlog[1], "acme.quota_bytes: \"lots\" is not a size (integer bytes", 1));
    cr_assert_eq(acme_quota(c0), 2 << 20);
    cr_assert_eq(acme_quota(c1), 2 << 20);
    /* nor one with a field it does not know (a typo would be a silent no-op) */
    etcd_put_tenants("{\"acme\":{\"quota_byte\":\"1MiB\"}}");
    cr_assert(rf_wait_stat(c0, true, "tenant_table_refused", 0, 2, 10000), "the typo is refused");
    cr_assert(th_wait_log(hf.mlog[1], "acme.quota_byte: is not a field of a tenant's quota (known: quota_bytes", 1));
    cr_assert_eq(acme_quota(c0), 2 << 20);
    /* nor does a value longer than any table (70,000 bytes, written with etcdctl): the
     * leader refuses it and leads on (it must never give the leadership up for it) */
    char path[400], cmd[1200];
    snprintf(path, sizeof path, "%s/huge.json", rf.dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputc('{', f);
    for (int i = 0; i < 70000; i++) fputc(' ', f);
    fputc('}', f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "ETCDCTL_API=3 etcdctl --endpoints=%s put fluxon/ha/master.tenants < %s > /dev/null 2>&1",
             hf.url, path);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    cr_assert(rf_wait_stat(c0, true, "tenant_table_refused", 0, 3, 10000), "the long value is refused");
    cr_assert(th_wait_log(hf.mlog[1], "longer than", 1));
    cr_assert_eq(rf_stat(c0, true, "ha_leader"), 1, "the leader leads on");
    cr_assert_eq(acme_quota(c0), 2 << 20);
    /* and a master elected with it there leads (it refuses the value, keeps its own table) */
    hf_kill_master(1);
    hf_start_master(0);
    cr_assert(hf_wait_leads(0, 4 * TTL_MS + 5000), "master 0 leads with the long value in etcd (see %s)", hf.mlog[0]);
    cr_assert(th_wait_log(hf.mlog[0], "longer than", 1));
    fluxon_client_close(c0);
    fluxon_client_close(c1);
}

/* etcd's tenants' quota table ("" when the key is absent) */
static void etcd_get_tenants(char *val, size_t cap)
{
    fx_etcd_t *e = NULL;
    cr_assert_eq(fx_etcd_new(hf.url, &e), FLUXON_OK);
    char err[256] = "";
    int rc = fx_etcd_get(e, "fluxon/ha/master.tenants", 2000, val, cap, err, sizeof err);
    fx_etcd_free(e);
    if (rc == FLUXON_ERR_NOT_FOUND) val[0] = 0;
    else cr_assert_eq(rc, FLUXON_OK, "etcd get: %s", err);
}

/* Issue 42: the masters' config "tenants". With the key absent from etcd, the leader's config
 * table is the starting table (the read at election does not wipe it): it stores it in etcd
 * and an owner listing acme without a quota gets 6 MiB. Once etcd holds a table it wins: an
 * operator's 2 MiB, and a new leader whose config says 6 MiB hands a restarted owner etcd's
 * 2 MiB and leaves the key alone. Before: "tenants" was no field of a master's config. */
Test(ha, the_masters_config_table_starts_the_table_and_etcds_wins, .timeout = 120, .fini = fini)
{
    HF_REQUIRE_ETCD();
    hf_master_extra[0] = hf_master_extra[1] = ",\"tenants\":{\"acme\":{\"quota_bytes\":\"6MiB\"}}";
    hf_up(2, 0, TTL_MS);
    hf_master_extra[0] = hf_master_extra[1] = NULL;
    char val[4096] = "", ha[200];
    double end = th_now_s() + th_wait_bound_s(10000);
    while (th_now_s() < end && !strstr(val, "6291456")) {
        etcd_get_tenants(val, sizeof val);
        if (!strstr(val, "6291456")) th_sleep_ms(20);
    }
    cr_assert(strstr(val, "\"acme\":{\"quota_bytes\":6291456}"), "the leader stored its config's table: \"%s\"", val);
    snprintf(ha, sizeof ha, "\"ha\":{\"etcd\":\"%s\",\"lease_ttl_ms\":%d}", hf.url, TTL_MS);
    const char *ten = "\"heartbeat_interval_ms\":500,\"master_timeout_ms\":3000,"
                      "\"tenants\":{\"acme\":{\"token\":\"acme-secret\"}}";
    rf.n_owners = 1;
    hf_write_owner(0, ha, ten);
    rf_start_owner(0);
    hf_wait_owner(0, "registered with master");
    fluxon_client *c = rf_client(0);
    cr_assert(wait_quota(c, 6 << 20, 5000), "the config table's quota: %lld", acme_quota(c));
    etcd_put_tenants("{\"acme\":{\"quota_bytes\":\"2MiB\"}}");
    cr_assert(wait_quota(c, 2 << 20, 10000), "etcd's table wins");
    fluxon_client_close(c);
    th_stop(rf.owner[0], SIGTERM, 5000); /* back with no quota of its own */
    rf.owner[0] = -1;
    hf_kill_master(0);
    cr_assert(hf_wait_leads(1, 4 * TTL_MS), "master 1 takes over (see %s)", hf.mlog[1]);
    c = owner_back_under_master1(0);
    cr_assert(wait_quota(c, 2 << 20, 10000), "the new leader hands etcd's table, not its config's: %lld",
              acme_quota(c));
    etcd_get_tenants(val, sizeof val);
    cr_assert_str_eq(val, "{\"acme\":{\"quota_bytes\":\"2MiB\"}}", "etcd's table is left as it was");
    fluxon_client_close(c);
}
