/* test_master_place.c — the master's placement and in-flight records (ARCHITECTURE §7)
 * at frame level: PUT_PLACE (random placement, preferred_sub_cluster, local-first,
 * write-through, reject_if_inflight / reject_if_exist / whole-group rejection), PUT_DONE
 * of a placed batch (put_token), PUT_REVOKE, the in-flight TTL, range replicas freed on
 * replace/delete, and the get modes of LOOKUP / GET_DONE (reuse, at most 2 durable per
 * key, temporary beyond). The master runs on a reactor thread of this process (the way
 * node.c hosts it) so its counters (fx_master_kv_stats_json) are read on that thread;
 * fake owners n1..n5 talk to it over TCP with the frame codec (mkvfix.h). */
#include <cJSON.h>
#include <pthread.h>
#include <semaphore.h>

#include "mkvfix.h"
#include "log.h"
#include "reactor.h"
#include "master.h"
#include "owner.h"

/* ---- the master, hosted on its own reactor thread ---- */
static struct {
    fx_config_t cfg;
    fx_reactor_t *r;
    pthread_t thread;
    bool started;
    fx_master_t *m;
    sem_t ready;
    int ready_status;
} pm;

static void pm_on_ready(void *arg, int status)
{
    (void)arg;
    pm.ready_status = status;
    sem_post(&pm.ready);
}

static void *pm_thread(void *arg)
{
    (void)arg;
    fx_log_set_context("master", "master");
    int rc = fx_master_create(pm.r, &pm.cfg, pm_on_ready, NULL, &pm.m);
    if (rc != FLUXON_OK) {
        pm_on_ready(NULL, rc);
        return NULL;
    }
    fx_reactor_run(pm.r);
    fx_master_shutdown(pm.m);
    fx_reactor_drain(pm.r, 2000);
    fx_master_destroy(pm.m);
    pm.m = NULL;
    return NULL;
}

static bool sem_wait_ms(sem_t *s, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    for (;;) {
        if (sem_timedwait(s, &ts) == 0) return true;
        if (errno != EINTR) return false;
    }
}

static void pm_start(uint32_t inflight_ttl_ms)
{
    char cfg[512], err[512];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"master\",\"cluster_id\":\"t\",\"listen\":\"127.0.0.1:0\",\"heartbeat_timeout_ms\":60000,"
             "\"inflight_ttl_ms\":%u,\"log_level\":\"error\"}", inflight_ttl_ms);
    cr_assert_eq(fx_config_parse(cfg, &pm.cfg, err, sizeof err), FLUXON_OK, "%s", err);
    cr_assert_eq(pm.cfg.inflight_ttl_ms, inflight_ttl_ms);
    fx_log_apply_config_level(pm.cfg.log_level);
    cr_assert_eq(fx_reactor_create(&pm.r), FLUXON_OK);
    sem_init(&pm.ready, 0, 0);
    pm.ready_status = FLUXON_ERR_TIMEOUT;
    cr_assert_eq(pthread_create(&pm.thread, NULL, pm_thread, NULL), 0);
    pm.started = true;
    cr_assert(sem_wait_ms(&pm.ready, 10000), "the master did not start within 10 s");
    cr_assert_eq(pm.ready_status, FLUXON_OK);
    mkv_port = fx_master_port(pm.m);
    cr_assert_gt(mkv_port, 0);
}

static void pm_stop_on_reactor(void *arg) { fx_reactor_stop(arg); }

static void pm_stop(void)
{
    if (!pm.started) return;
    fx_reactor_post(pm.r, pm_stop_on_reactor, pm.r);
    pthread_join(pm.thread, NULL);
    sem_destroy(&pm.ready);
    fx_reactor_destroy(pm.r);
    pm.started = false;
}

/* master counters, read on the reactor thread */
typedef struct {
    char buf[16384];
    sem_t done;
} pm_stats_req_t;

static void pm_stats_on_reactor(void *arg)
{
    pm_stats_req_t *q = arg;
    q->buf[0] = '{';
    size_t n = fx_master_kv_stats_json(pm.m, q->buf + 1, sizeof q->buf - 3);
    q->buf[1 + n] = '}';
    q->buf[2 + n] = '\0';
    sem_post(&q->done);
}

static cJSON *pm_stats(void)
{
    static pm_stats_req_t q;
    sem_init(&q.done, 0, 0);
    cr_assert_eq(fx_reactor_post(pm.r, pm_stats_on_reactor, &q), FLUXON_OK);
    cr_assert(sem_wait_ms(&q.done, 5000), "stats: no answer from the master thread within 5 s");
    sem_destroy(&q.done);
    cJSON *j = cJSON_Parse(q.buf);
    cr_assert(j, "master stats are not JSON: %s", q.buf);
    return j;
}

static long long js(const cJSON *j, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
    cr_assert(cJSON_IsNumber(v), "master stats lack \"%s\"", name);
    return (long long)v->valuedouble;
}

static long long pm_stat(const char *name)
{
    cJSON *j = pm_stats();
    long long v = js(j, name);
    cJSON_Delete(j);
    return v;
}

/* Polls until stat name == want (bounded); returns the seconds waited, or -1. */
static double pm_wait_stat(const char *name, long long want, int timeout_ms)
{
    double t0 = th_now_s(), end = t0 + timeout_ms / 1000.0;
    for (;;) {
        if (pm_stat(name) == want) return th_now_s() - t0;
        if (th_now_s() > end) return -1;
        th_sleep_ms(5);
    }
}

/* ---- fake owners ---- */
typedef struct {
    const char *id, *ucx, *rkey;
    uint64_t gen, base;
} own_t;

#define N_OWN 5
static const own_t OWN[N_OWN] = {
    {"n1", "ucx-n1", "rkey-n1", 101, 0x100000000000ull}, {"n2", "ucx-n2", "rkey-n2", 102, 0x200000000000ull},
    {"n3", "ucx-n3", "rkey-n3", 103, 0x300000000000ull}, {"n4", "ucx-n4", "rkey-n4", 104, 0x400000000000ull},
    {"n5", "ucx-n5", "rkey-n5", 105, 0x500000000000ull},
};
static tc_t oc[N_OWN];
static tc_t ext = {.fd = -1}; /* a peer that never registered */

/* owner i (0 = n1) registers as node_role: eligible (UCX address) or not, in sub_cluster */
static void up_role(int i, uint8_t node_role, bool eligible, const char *sub_cluster)
{
    t_register(&oc[i], OWN[i].id, OWN[i].gen, node_role, OWN[i].base, eligible ? OWN[i].ucx : "", OWN[i].rkey,
               sub_cluster);
}

/* owner i registers as a gpu_owner */
static void up(int i, bool eligible, const char *sub_cluster) { up_role(i, FX_NODE_GPU_OWNER, eligible, sub_cluster); }

static int own_index(fx_str_t id)
{
    for (int i = 0; i < N_OWN; i++)
        if (str_is(id, OWN[i].id)) return i;
    return -1;
}

static void setup_common(uint32_t ttl)
{
    for (int i = 0; i < N_OWN; i++) oc[i] = (tc_t){.fd = -1};
    ext = (tc_t){.fd = -1};
    pm_start(ttl);
}

static void setup(void) { setup_common(60000); }
static void setup_ttl(void) { setup_common(300); }

static void teardown(void)
{
    for (int i = 0; i < N_OWN; i++) t_close(&oc[i]);
    t_close(&ext);
    pm_stop();
    mkv_free_kept();
}

static uint64_t slot_of(uint64_t vlen) { return FX_MAX((vlen + 4095) & ~4095ull, 4096ull); }

/* ---- requests ---- */
static int t_place(tc_t *c, const char *const *keys, uint32_t n, uint64_t vlen, uint64_t flags, const uint64_t *groups,
                   uint32_t ng, const char *pref, fx_body_put_place_ack_t *ack)
{
    fx_body_put_place_t b = {t_keys(keys, n), vlen, flags, {groups, ng}, fx_str_c(pref ? pref : "")};
    int st = T_CALL(c, PUT_PLACE, put_place, &b, put_place_ack, ack);
    if (st == FLUXON_OK) {
        cr_assert_eq(ack->statuses.n, n);
        cr_assert_eq(ack->offsets.n, n);
    }
    return st;
}

/* Checks a PUT_PLACE answer against the registered owners: the target's identity, UCX
 * address, rkey and base; offsets 0 for rejected keys and for a target == requester,
 * else 4 KiB aligned ranges inside the payload range. Returns the target's index. */
static int check_place(const fx_body_put_place_ack_t *a, int requester, uint64_t vlen)
{
    int t = own_index(a->target_node_id);
    cr_assert_geq(t, 0, "unknown target %.*s", (int)a->target_node_id.len, a->target_node_id.p);
    cr_assert_eq(a->target_generation, OWN[t].gen);
    cr_assert(str_is(a->target_rkey, OWN[t].rkey));
    cr_assert_eq(a->target_base, OWN[t].base);
    bool any = false;
    for (uint32_t i = 0; i < a->statuses.n; i++) {
        bool ok = a->statuses.v[i] == ST(FLUXON_OK);
        any |= ok;
        if (!ok || t == requester) {
            cr_assert_eq(a->offsets.v[i], 0, "key %u: offset %llu", i, (unsigned long long)a->offsets.v[i]);
            continue;
        }
        uint64_t o = a->offsets.v[i];
        cr_assert(o >= 4096 && o % 4096 == 0 && o + slot_of(vlen) <= SEG, "key %u: range at %llu", i,
                  (unsigned long long)o);
    }
    if (any) cr_assert_neq(a->put_token, 0);
    else cr_assert_eq(a->put_token, 0, "nothing accepted: no in-flight put");
    if (t != requester) cr_assert(str_is(a->target_address, OWN[t].ucx), "a remote target has a UCX address");
    return t;
}

/* one key, must be accepted; returns the target index */
static int t_place1(int req, const char *key, uint64_t vlen, uint64_t flags, const char *pref,
                    fx_body_put_place_ack_t *ack)
{
    cr_assert_eq(t_place(&oc[req], &key, 1, vlen, flags, NULL, 0, pref, ack), FLUXON_OK, "place %s: %s", key,
                 last_err);
    cr_assert_eq(ack->statuses.v[0], ST(FLUXON_OK), "place %s: %s", key,
                 fluxon_status_string((int)(int64_t)ack->statuses.v[0]));
    return check_place(ack, req, vlen);
}

static int t_put_token(tc_t *c, uint64_t batch, const char *const *keys, const uint64_t *offs, uint32_t n,
                       uint64_t vlen, uint64_t flags, const uint64_t *groups, uint32_t ng, uint64_t token,
                       fx_body_put_done_ack_t *ack)
{
    fx_body_put_done_t b = {batch, vlen, flags, 0, t_keys(keys, n), {offs, n}, {groups, ng}, token};
    int st = T_CALL(c, PUT_DONE, put_done, &b, put_done_ack, ack);
    if (st == FLUXON_OK) cr_assert_eq(ack->statuses.n, n);
    return st;
}

static int t_revoke(tc_t *c, uint64_t token)
{
    fx_body_put_revoke_t b = {token};
    fx_body_empty_t e;
    return T_CALL(c, PUT_REVOKE, put_revoke, &b, empty, &e);
}

/* CLUSTER_NODES: placed_bytes (and alive) of owner i */
static uint64_t t_node(tc_t *c, int i, bool *alive)
{
    fx_body_empty_t e = {};
    fx_body_nodes_t nb;
    cr_assert_eq(T_CALL(c, CLUSTER_NODES, empty, &e, nodes, &nb), FLUXON_OK, "%s", last_err);
    cr_assert(nb.placed_bytes.n == nb.node_ids.n && nb.sub_clusters.n == nb.node_ids.n && nb.alive.n == nb.node_ids.n);
    for (uint32_t k = 0; k < nb.node_ids.n; k++)
        if (str_is(nb.node_ids.v[k], OWN[i].id)) {
            if (alive) *alive = nb.alive.v[k] != 0;
            return nb.placed_bytes.v[k];
        }
    cr_assert_fail("node %s not in CLUSTER_NODES", OWN[i].id);
    return 0;
}

static uint64_t placed(int i) { return t_node(oc[0].fd >= 0 ? &oc[0] : &ext, i, NULL); }

/* closes owner i and waits (bounded) until the master has declared it dead */
static void kill_owner(int i, tc_t *observer)
{
    t_close(&oc[i]);
    bool alive = true;
    for (int k = 0; k < 200 && alive; k++) {
        t_node(observer, i, &alive);
        if (alive) th_sleep_ms(10);
    }
    cr_assert_not(alive, "%s is still alive 2 s after its connection closed", OWN[i].id);
}

/* GET_DONE of one key copied to offset off of the sender, from the source the lookup gave;
 * mode 0 sends an empty modes vector (= durable) */
static uint64_t t_get_done(tc_t *c, const char *key, uint64_t off, const fx_body_lookup_ack_t *la, uint64_t mode)
{
    uint64_t s = la->src.v[0];
    fx_body_get_done_t gd = {t_keys(&key, 1), {&off, 1}, {&la->put_ms.v[0], 1}, {&la->put_ver.v[0], 1},
                             {&la->value_lens.v[0], 1}, la->src_node_ids.v[s], la->src_generations.v[s],
                             {&la->offsets.v[0], 1}, {&mode, mode ? 1 : 0}};
    fx_body_statuses_t gs;
    cr_assert_eq(T_CALL(c, GET_DONE, get_done, &gd, statuses, &gs), FLUXON_OK, "get_done: %s", last_err);
    cr_assert_eq(gs.statuses.n, 1);
    return gs.statuses.v[0];
}

static const char *src_of(const fx_body_lookup_ack_t *la, uint32_t i)
{
    static char id[64];
    fx_str_copy(la->src_node_ids.v[la->src.v[i]], id, sizeof id);
    return id;
}

/* ---- tests ---- */
TestSuite(master_place, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(master_place_ttl, .init = setup_ttl, .fini = teardown, .timeout = 60);

Test(master_place, random_placement_spreads_over_owners)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, true, "c");
    const uint64_t vlen = 10000, B = slot_of(vlen);
    int hits[N_OWN] = {0};
    uint64_t offs[N_OWN][64], tokens[60];
    int noffs[N_OWN] = {0};
    for (int i = 0; i < 60; i++) {
        char key[16];
        snprintf(key, sizeof key, "r%02d", i);
        fx_body_put_place_ack_t a;
        int t = t_place1(0, key, vlen, 0, NULL, &a);
        hits[t]++;
        tokens[i] = a.put_token;
        for (int j = 0; j < i; j++) cr_assert_neq(tokens[j], tokens[i], "tokens are unique");
        if (t != 0) {
            for (int j = 0; j < noffs[t]; j++)
                cr_assert(offs[t][j] + B <= a.offsets.v[0] || a.offsets.v[0] + B <= offs[t][j], "ranges overlap");
            offs[t][noffs[t]++] = a.offsets.v[0];
        }
    }
    int distinct = (hits[0] > 0) + (hits[1] > 0) + (hits[2] > 0);
    cr_assert_geq(distinct, 2, "60 places went to one owner: n1 %d n2 %d n3 %d", hits[0], hits[1], hits[2]);
    cr_assert_gt(hits[0], 0, "the requester is a candidate like any other owner");
    cr_assert_gt(hits[1] + hits[2], 0, "remote owners are candidates");
    cr_assert_eq(hits[0] + hits[1] + hits[2], 60);
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "places"), 60);
    cr_assert_eq(js(j, "place_local"), hits[0]);
    cr_assert_eq(js(j, "place_remote"), hits[1] + hits[2]);
    cr_assert_eq(js(j, "place_rejected"), 0);
    cr_assert_eq(js(j, "place_fallback"), 0);
    cr_assert_eq(js(j, "inflight_puts"), 60);
    cr_assert_eq(js(j, "inflight_put_keys"), 60);
    cr_assert_eq(js(j, "routes"), 0, "in-flight puts are never routes");
    cJSON_Delete(j);
    cr_assert_eq(placed(0), 0, "the requester's own slots are not master ranges");
    fx_body_empty_t e = {};
    fx_body_nodes_t nb;
    cr_assert_eq(T_CALL(&oc[0], CLUSTER_NODES, empty, &e, nodes, &nb), FLUXON_OK);
    for (uint32_t k = 0; k < nb.node_ids.n; k++) {
        int i = own_index(nb.node_ids.v[k]);
        if (i >= 0) cr_assert(str_is(nb.sub_clusters.v[k], i == 0 ? "a" : i == 1 ? "b" : "c"), "%s", OWN[i].id);
    }
    cr_assert_eq(placed(1), hits[1] * B);
    cr_assert_eq(placed(2), hits[2] * B);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[1], "r00", &la), ST(FLUXON_ERR_NOT_FOUND), "not readable before PUT_DONE");
}

Test(master_place, ineligible_owners_are_never_targets)
{
    up(0, true, "a");
    up(1, false, "a"); /* no UCX address */
    up(2, true, "a");
    kill_owner(2, &oc[0]); /* dead */
    t_hello(&ext, "x1");  /* connected, never registered */
    for (int i = 0; i < 30; i++) {
        char key[16];
        snprintf(key, sizeof key, "e%02d", i);
        fx_body_put_place_ack_t a;
        cr_assert_eq(t_place1(0, key, 100, 0, NULL, &a), 0, "only the requester is eligible");
        cr_assert_eq(t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 0, "write-through falls back");
    }
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "place_local"), 60);
    cr_assert_eq(js(j, "place_remote"), 0);
    cr_assert_eq(js(j, "place_fallback"), 30, "each write-through place without another owner");
    cJSON_Delete(j);
    /* an eligible owner joins: write-through goes there every time */
    up(3, true, "z");
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "w%02d", i);
        fx_body_put_place_ack_t a;
        cr_assert_eq(t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 3);
    }
    cr_assert_eq(placed(3), 20 * 4096);
    cr_assert_eq(placed(1), 0);
}

/* fills owner i's segment with grants so that no placed range fits any more */
static void fill_with_grants(int i)
{
    fx_body_grant_t g = {4096, 64};
    fx_body_grant_ack_t ga;
    cr_assert_eq(T_CALL(&oc[i], GRANT, grant, &g, grant_ack, &ga), FLUXON_OK, "%s", last_err);
    cr_assert_geq(ga.grant_ids.n, 6, "grants fill the segment");
}

Test(master_place, preferred_sub_cluster_first_then_the_others)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, true, "c");
    up(3, true, "b");
    int hits[N_OWN] = {0};
    char key[16];
    fx_body_put_place_ack_t a;
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "b%02d", i);
        hits[t_place1(0, key, 100, 0, "b", &a)]++;
    }
    cr_assert(hits[0] == 0 && hits[2] == 0, "only sub-cluster b while it fits: n1 %d n3 %d", hits[0], hits[2]);
    cr_assert(hits[1] > 0 && hits[3] > 0, "random inside the sub-cluster: n2 %d n4 %d", hits[1], hits[3]);
    /* the requester's own sub-cluster is preferred like any other */
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "a%02d", i);
        cr_assert_eq(t_place1(0, key, 100, 0, "a", &a), 0);
    }
    /* a sub-cluster nobody is in: every owner is a candidate */
    memset(hits, 0, sizeof hits);
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "z%02d", i);
        hits[t_place1(0, key, 100, 0, "nobody", &a)]++;
    }
    cr_assert_geq((hits[0] > 0) + (hits[1] > 0) + (hits[2] > 0) + (hits[3] > 0), 2);
    /* n2 full: b means n4 only */
    fill_with_grants(1);
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "f%02d", i);
        cr_assert_eq(t_place1(0, key, 100, 0, "b", &a), 3, "n2 no longer fits");
    }
    /* n4 full too: the others (n1, n3) */
    fill_with_grants(3);
    memset(hits, 0, sizeof hits);
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "g%02d", i);
        hits[t_place1(0, key, 100, 0, "b", &a)]++;
    }
    cr_assert(hits[1] == 0 && hits[3] == 0, "full owners are skipped: n2 %d n4 %d", hits[1], hits[3]);
    cr_assert(hits[0] > 0 && hits[2] > 0, "fallback to the other sub-clusters: n1 %d n3 %d", hits[0], hits[2]);
    cr_assert_eq(pm_stat("place_fallback"), 0, "the requester was a candidate all along");
}

/* Placed ranges take at most half of a gpu_owner's segment and all but one grant of a
 * remote_cache owner's; beyond, the next tier (or the requester) is chosen. */
Test(master_place, placement_limits_per_node_role)
{
    up(0, true, "a");
    up_role(1, FX_NODE_GPU_OWNER, true, "g");
    fx_body_put_place_ack_t a, half;
    cr_assert_neq(t_place1(0, "over", SEG / 2 + 1, 0, "g", &a), 1, "more than half of a gpu_owner's segment");
    cr_assert_eq(t_place1(0, "half", SEG / 2, 0, "g", &half), 1, "exactly half fits");
    cr_assert_eq(placed(1), SEG / 2);
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "g%02d", i);
        cr_assert_neq(t_place1(0, key, 100, 0, "g", &a), 1, "n2 is at its limit");
    }
    cr_assert_eq(t_revoke(&oc[0], half.put_token), FLUXON_OK);
    cr_assert_eq(t_place1(0, "again", 100, 0, "g", &a), 1, "room again after the revoke");
    /* remote_cache: all of the payload range but one grant (registered only now: above,
     * it would have been a fallback target) */
    up_role(2, FX_NODE_REMOTE_CACHE, true, "r");
    uint64_t most = SEG - 4096 - GRANT;
    fx_body_put_place_ack_t rc;
    cr_assert_neq(t_place1(0, "rc-over", most + 4096, 0, "r", &a), 2);
    cr_assert_eq(t_place1(0, "rc", most, 0, "r", &rc), 2, "a remote_cache owner lends all but one grant");
    cr_assert_eq(placed(2), most);
    cr_assert_neq(t_place1(0, "rc-more", 100, 0, "r", &a), 2);
    /* a grant still fits after the placement: the owner's own slots are not starved */
    fx_body_grant_t g = {4096, 1};
    fx_body_grant_ack_t ga;
    cr_assert_eq(T_CALL(&oc[2], GRANT, grant, &g, grant_ack, &ga), FLUXON_OK, "%s", last_err);
    cr_assert_eq(ga.grant_ids.n, 1);
}

Test(master_place, local_first_gives_the_requester)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, true, "c");
    fx_body_put_place_ack_t a;
    char key[16];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "l%02d", i);
        cr_assert_eq(t_place1(1, key, 5000, FX_PUT_LOCAL_FIRST, i % 2 ? "c" : NULL, &a), 1);
        cr_assert_eq(a.offsets.v[0], 0);
        cr_assert(str_is(a.target_address, "ucx-n2"));
    }
    cr_assert_eq(pm_stat("place_local"), 20);
    cr_assert_eq(pm_stat("place_remote"), 0);
    for (int i = 0; i < 3; i++) cr_assert_eq(placed(i), 0);
    /* PUT_DONE of a local placement: the offsets are the requester's own slots */
    const char *k = "lf";
    cr_assert_eq(t_place1(1, k, 5000, FX_PUT_LOCAL_FIRST, NULL, &a), 1);
    uint64_t slot = 40960;
    fx_body_put_done_ack_t pa;
    cr_assert_eq(t_put_token(&oc[1], 1, &k, &slot, 1, 5000, 0, NULL, 0, a.put_token, &pa), FLUXON_OK, "%s",
                 last_err);
    cr_assert_eq(pa.statuses.v[0], ST(FLUXON_OK));
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[1], k, &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == slot);
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE, "its own slot: no transfer");
    cr_assert_eq(t_lookup1(&oc[0], k, &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == slot);
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(pm_stat("get_reuse"), 1);
}

Test(master_place, write_through_never_gives_the_requester)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, true, "c");
    int hits[N_OWN] = {0};
    char key[16];
    fx_body_put_place_ack_t a;
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "w%02d", i);
        hits[t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, NULL, &a)]++;
    }
    cr_assert_eq(hits[0], 0, "write-through: not the requester while another owner fits");
    cr_assert(hits[1] > 0 && hits[2] > 0, "n2 %d n3 %d", hits[1], hits[2]);
    /* write-through with a preferred sub-cluster that is the requester's own: elsewhere */
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "x%02d", i);
        cr_assert_neq(t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, "a", &a), 0);
    }
    cr_assert_eq(pm_stat("place_fallback"), 0);
    /* nobody else fits: the requester after all, counted as a fallback */
    fill_with_grants(1);
    fill_with_grants(2);
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "y%02d", i);
        cr_assert_eq(t_place1(0, key, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 0);
    }
    cr_assert_eq(pm_stat("place_fallback"), 5);
    cr_assert_eq(pm_stat("place_local"), 5);
}

Test(master_place, reject_flags_and_group_rejection)
{
    up(0, true, "a");
    up(1, true, "b");
    fx_body_put_place_ack_t a, a1;
    const uint64_t RIF = FX_PUT_REJECT_IF_INFLIGHT, RIE = FX_PUT_REJECT_IF_EXIST;
    t_place1(0, "k1", 100, 0, NULL, &a1); /* k1 in flight */
    /* reject_if_inflight: per key; the other key is placed */
    const char *k12[] = {"k1", "k2"};
    cr_assert_eq(t_place(&oc[1], k12, 2, 100, RIF, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    cr_assert_eq(a.statuses.v[1], ST(FLUXON_OK));
    check_place(&a, 1, 100);
    uint64_t tok_k2 = a.put_token;
    /* one group: rejected whole, nothing in flight, no token */
    const char *k13[] = {"k1", "k3"};
    uint64_t g2[] = {2};
    cr_assert_eq(t_place(&oc[1], k13, 2, 100, RIF, g2, 1, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    cr_assert_eq(a.statuses.v[1], ST(FLUXON_ERR_GROUP_REJECTED));
    cr_assert_eq(check_place(&a, 1, 100), 1, "nothing placed: the answer names the requester");
    /* without the flag an in-flight key does not block */
    t_place1(1, "k1", 100, 0, NULL, &a);
    uint64_t tok_k1b = a.put_token;
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "inflight_puts"), 3);
    cr_assert_eq(js(j, "inflight_put_keys"), 2, "k1 (twice) and k2");
    cr_assert_eq(js(j, "place_rejected"), 3);
    cJSON_Delete(j);
    /* a key twice in one batch */
    const char *dd[] = {"d", "d"};
    cr_assert_eq(t_place(&oc[0], dd, 2, 100, RIF, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_OK) && a.statuses.v[1] == ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    cr_assert_eq(t_revoke(&oc[0], a.put_token), FLUXON_OK);
    cr_assert_eq(t_place(&oc[0], dd, 2, 100, 0, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_OK) && a.statuses.v[1] == ST(FLUXON_ERR_INVALID_ARGUMENT));
    cr_assert_eq(t_revoke(&oc[0], a.put_token), FLUXON_OK);
    /* reject_if_exist against live routes */
    t_put1(&oc[0], 1, "e", 4096, 100, 0, NULL, NULL);
    const char *ef[] = {"e", "f"}, *egh[] = {"e", "g", "h"};
    cr_assert_eq(t_place(&oc[1], ef, 2, 100, RIE, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_ERR_KEY_EXISTS) && a.statuses.v[1] == ST(FLUXON_OK));
    check_place(&a, 1, 100);
    cr_assert_eq(t_place(&oc[1], ef, 2, 100, RIE, g2, 1, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_ERR_KEY_EXISTS) && a.statuses.v[1] == ST(FLUXON_ERR_GROUP_REJECTED));
    cr_assert_eq(a.put_token, 0);
    uint64_t g12[] = {1, 2};
    cr_assert_eq(t_place(&oc[1], egh, 3, 100, RIE, g12, 2, NULL, &a), FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_ERR_KEY_EXISTS) && a.statuses.v[1] == ST(FLUXON_OK) &&
              a.statuses.v[2] == ST(FLUXON_OK), "only the group of the existing key is rejected");
    check_place(&a, 1, 100);
    /* each flag looks at its own thing: in-flight keys do not exist, routes are not in flight */
    t_place1(1, "k1", 100, RIE, NULL, &a);
    uint64_t tok_k1c = a.put_token;
    t_place1(1, "e", 100, RIF, NULL, &a);
    /* both flags: the in-flight check wins on a key that is both */
    t_place1(0, "e", 100, 0, NULL, &a);
    cr_assert_eq(t_place(&oc[1], ef, 1, 100, RIF | RIE, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    /* once every put of k1 is gone, reject_if_inflight accepts it */
    cr_assert_eq(t_revoke(&oc[0], a1.put_token), FLUXON_OK);
    cr_assert_eq(t_place(&oc[1], k12, 1, 100, RIF, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN), "another put of k1 is still in flight");
    cr_assert_eq(t_revoke(&oc[1], tok_k1b), FLUXON_OK);
    cr_assert_eq(t_revoke(&oc[1], tok_k1c), FLUXON_OK);
    cr_assert_eq(t_place(&oc[1], k12, 1, 100, RIF, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_OK));
    cr_assert_eq(t_revoke(&oc[1], tok_k2), FLUXON_OK);
    /* counters: places and rejected keys */
    j = pm_stats();
    cr_assert_eq(js(j, "place_rejected"), 3 + 1 + 1 + 1 + 2 + 1 + 1 + 1);
    cr_assert_eq(js(j, "places"), 15);
    cJSON_Delete(j);
}

Test(master_place, put_done_with_token_installs_the_route_on_the_target)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, false, "c"); /* a reader, never a target */
    const char *keys[] = {"p0", "p1", "p2"};
    const uint64_t vlen = 5000, B = slot_of(vlen);
    fx_body_put_place_ack_t a;
    cr_assert_eq(t_place(&oc[0], keys, 3, vlen, FX_PUT_WRITE_THROUGH, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(check_place(&a, 0, vlen), 1);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < i; k++)
            cr_assert(a.offsets.v[k] + B <= a.offsets.v[i] || a.offsets.v[i] + B <= a.offsets.v[k]);
    cr_assert_eq(placed(1), 3 * B);
    uint64_t offs[3] = {a.offsets.v[0], a.offsets.v[1], a.offsets.v[2]}, token = a.put_token;
    fx_body_put_done_ack_t pa, pa2;
    cr_assert_eq(t_put_token(&oc[0], 7, keys, offs, 3, vlen, 0, NULL, 0, token, &pa), FLUXON_OK, "%s", last_err);
    for (int i = 0; i < 3; i++) cr_assert_eq(pa.statuses.v[i], ST(FLUXON_OK));
    cr_assert_eq(placed(1), 3 * B, "the ranges now belong to the routes");
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "inflight_puts"), 0);
    cr_assert_eq(js(j, "inflight_put_keys"), 0);
    cr_assert_eq(js(j, "routes"), 3);
    cr_assert_eq(js(j, "replicas"), 3);
    cr_assert_eq(js(j, "puts"), 3);
    cJSON_Delete(j);
    /* every reader, the requester included, is pointed at the target's range */
    fx_body_lookup_ack_t la;
    for (int r = 0; r < 3; r++) {
        t_lookup(&oc[r], keys, 3, &la);
        cr_assert_eq(la.src_node_ids.n, 1);
        cr_assert(str_is(la.src_node_ids.v[0], "n2"), "reader n%d", r + 1);
        cr_assert_eq(la.src_generations.v[0], OWN[1].gen);
        cr_assert(str_is(la.src_addresses.v[0], "ucx-n2") && str_is(la.src_rkeys.v[0], "rkey-n2"));
        cr_assert_eq(la.src_bases.v[0], OWN[1].base);
        for (int i = 0; i < 3; i++) {
            cr_assert_eq(la.statuses.v[i], ST(FLUXON_OK));
            cr_assert_eq(la.offsets.v[i], offs[i]);
            cr_assert_eq(la.value_lens.v[i], vlen);
            cr_assert(la.put_ms.v[i] == pa.put_ms.v[i] && la.put_ver.v[i] == pa.put_ver.v[i]);
            /* a master range on the target is no slot of its own: never ReuseReplica */
            cr_assert_neq(la.modes.v[i], FX_GET_REUSE, "reader n%d key %d", r + 1, i);
        }
    }
    /* the same batch again (T1): the remembered answer */
    cr_assert_eq(t_put_token(&oc[0], 7, keys, offs, 3, vlen, 0, NULL, 0, token, &pa2), FLUXON_OK);
    for (int i = 0; i < 3; i++)
        cr_assert(pa2.statuses.v[i] == ST(FLUXON_OK) && pa2.put_ms.v[i] == pa.put_ms.v[i] &&
                  pa2.put_ver.v[i] == pa.put_ver.v[i]);
    /* the token again in a new batch: it is used up, every key STALE, nothing changes */
    cr_assert_eq(t_put_token(&oc[0], 8, keys, offs, 3, vlen, 0, NULL, 0, token, &pa2), FLUXON_OK, "%s", last_err);
    for (int i = 0; i < 3; i++) cr_assert_eq(pa2.statuses.v[i], ST(FLUXON_ERR_STALE));
    cr_assert_eq(pm_stat("put_done_stale_token"), 1);
    cr_assert_eq(t_lookup1(&oc[2], "p1", &la), ST(FLUXON_OK));
    cr_assert(la.put_ms.v[0] == pa.put_ms.v[1] && la.put_ver.v[0] == pa.put_ver.v[1]);
    cr_assert_eq(placed(1), 3 * B);
    /* another owner's token: STALE for it, the owner's record stays */
    const char *q = "q";
    cr_assert_eq(t_place1(0, q, vlen, FX_PUT_WRITE_THROUGH, NULL, &a), 1);
    cr_assert_eq(t_put_token(&oc[2], 1, &q, &a.offsets.v[0], 1, vlen, 0, NULL, 0, a.put_token, &pa2), FLUXON_OK);
    cr_assert_eq(pa2.statuses.v[0], ST(FLUXON_ERR_STALE));
    cr_assert_eq(t_lookup1(&oc[2], q, &la), ST(FLUXON_ERR_NOT_FOUND));
    cr_assert_eq(t_put_token(&oc[0], 9, &q, &a.offsets.v[0], 1, vlen, 0, NULL, 0, a.put_token, &pa2), FLUXON_OK);
    cr_assert_eq(pa2.statuses.v[0], ST(FLUXON_OK));
    cr_assert_eq(t_lookup1(&oc[2], q, &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == a.offsets.v[0]);
    /* an unknown token */
    cr_assert_eq(t_put_token(&oc[0], 10, &q, &a.offsets.v[0], 1, vlen, 0, NULL, 0, 999999, &pa2), FLUXON_OK);
    cr_assert_eq(pa2.statuses.v[0], ST(FLUXON_ERR_STALE));
    cr_assert_eq(pm_stat("put_done_stale_token"), 3);
}

Test(master_place, put_done_keys_rejected_at_done_free_their_ranges)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, false, "c");
    const char *keys[] = {"a", "b"};
    fx_body_put_place_ack_t a;
    cr_assert_eq(t_place(&oc[0], keys, 2, 100, FX_PUT_WRITE_THROUGH, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(check_place(&a, 0, 100), 1);
    cr_assert_eq(placed(1), 2 * 4096);
    t_put1(&oc[2], 1, "a", 4096, 100, 0, NULL, NULL); /* someone else published a meanwhile */
    uint64_t offs[] = {a.offsets.v[0], a.offsets.v[1]};
    fx_body_put_done_ack_t pa;
    cr_assert_eq(t_put_token(&oc[0], 1, keys, offs, 2, 100, FX_PUT_REJECT_IF_EXIST, NULL, 0, a.put_token, &pa),
                 FLUXON_OK);
    cr_assert(pa.statuses.v[0] == ST(FLUXON_ERR_KEY_EXISTS) && pa.statuses.v[1] == ST(FLUXON_OK));
    cr_assert_eq(placed(1), 4096, "the rejected key's range went back");
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[0], "a", &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n3"));
    cr_assert_eq(t_lookup1(&oc[0], "b", &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == offs[1]);
}

/* PUT_DONE of a partly rejected placement names exactly the accepted keys */
Test(master_place, put_done_names_only_the_accepted_keys)
{
    up(0, true, "a");
    up(1, true, "b");
    t_put1(&oc[1], 1, "x", 4096, 100, 0, NULL, NULL);
    const char *keys[] = {"x", "y", "z"};
    fx_body_put_place_ack_t a;
    cr_assert_eq(t_place(&oc[0], keys, 3, 100, FX_PUT_REJECT_IF_EXIST | FX_PUT_WRITE_THROUGH, NULL, 0, NULL, &a),
                 FLUXON_OK);
    cr_assert(a.statuses.v[0] == ST(FLUXON_ERR_KEY_EXISTS) && a.statuses.v[1] == ST(FLUXON_OK) &&
              a.statuses.v[2] == ST(FLUXON_OK));
    cr_assert_eq(check_place(&a, 0, 100), 1);
    cr_assert_eq(placed(1), 2 * 4096, "ranges only for the accepted keys");
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "inflight_put_keys"), 2);
    cr_assert_eq(js(j, "place_rejected"), 1);
    cJSON_Delete(j);
    fx_body_put_done_ack_t pa;
    uint64_t all[] = {4096, a.offsets.v[1], a.offsets.v[2]};
    cr_assert_eq(t_put_token(&oc[0], 1, keys, all, 3, 100, 0, NULL, 0, a.put_token, &pa),
                 FLUXON_ERR_INVALID_ARGUMENT, "the rejected key is not part of the put");
    cr_assert_eq(t_put_token(&oc[0], 2, keys + 1, all + 1, 2, 100, 0, NULL, 0, a.put_token, &pa), FLUXON_OK, "%s",
                 last_err);
    cr_assert(pa.statuses.v[0] == ST(FLUXON_OK) && pa.statuses.v[1] == ST(FLUXON_OK));
    fx_body_lookup_ack_t la;
    t_lookup(&oc[0], keys, 3, &la);
    cr_assert(!strcmp(src_of(&la, 0), "n2") && la.offsets.v[0] == 4096, "x keeps its own version");
    cr_assert(!strcmp(src_of(&la, 1), "n2") && la.offsets.v[1] == all[1]);
    cr_assert(!strcmp(src_of(&la, 2), "n2") && la.offsets.v[2] == all[2]);
    cr_assert_eq(placed(1), 2 * 4096);
}

/* reject_if_exist looks at live routes only: a key whose every replica is on a dead
 * owner can be written again */
Test(master_place, reject_if_exist_ignores_routes_of_dead_owners)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, true, "c");
    t_put1(&oc[2], 1, "dz", 4096, 100, 0, NULL, NULL);
    fx_body_put_place_ack_t a;
    const char *k = "dz";
    cr_assert_eq(t_place(&oc[0], &k, 1, 100, FX_PUT_REJECT_IF_EXIST, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(a.statuses.v[0], ST(FLUXON_ERR_KEY_EXISTS));
    kill_owner(2, &oc[0]);
    for (int i = 0; i < 20; i++) {
        cr_assert_neq(t_place1(0, k, 100, FX_PUT_REJECT_IF_EXIST, NULL, &a), 2, "a dead owner is no target");
        cr_assert_eq(t_revoke(&oc[0], a.put_token), FLUXON_OK);
    }
}

Test(master_place, mismatching_put_done_is_refused_and_changes_nothing)
{
    up(0, true, "a");
    up(1, true, "b");
    const char *keys[] = {"m0", "m1"}, *swapped[] = {"m1", "m0"}, *renamed[] = {"m0", "mX"};
    fx_body_put_place_ack_t a;
    cr_assert_eq(t_place(&oc[0], keys, 2, 100, FX_PUT_WRITE_THROUGH, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(check_place(&a, 0, 100), 1);
    uint64_t good[] = {a.offsets.v[0], a.offsets.v[1]}, moved[] = {a.offsets.v[0], a.offsets.v[1] + 4096};
    uint64_t rev[] = {a.offsets.v[1], a.offsets.v[0]};
    struct {
        const char *const *k;
        const uint64_t *o;
        uint32_t n;
        uint64_t vlen;
    } cases[] = {
        {keys, moved, 2, 100},   /* another offset */
        {swapped, good, 2, 100}, /* keys in another order */
        {swapped, rev, 2, 100},  /* keys and offsets in another order */
        {renamed, good, 2, 100}, /* another key */
        {keys, good, 1, 100},    /* a key missing */
        {keys, good, 2, 200},    /* another value_len */
    };
    fx_body_put_done_ack_t pa;
    fx_body_lookup_ack_t la;
    for (size_t i = 0; i < FX_ARRAY_LEN(cases); i++) {
        cr_assert_eq(t_put_token(&oc[0], 10 + i, cases[i].k, cases[i].o, cases[i].n, cases[i].vlen, 0, NULL, 0,
                                 a.put_token, &pa), FLUXON_ERR_INVALID_ARGUMENT, "case %zu", i);
        cr_assert(strstr(last_err, "put_token"), "case %zu: %s", i, last_err);
        cJSON *j = pm_stats();
        cr_assert_eq(js(j, "inflight_puts"), 1, "case %zu: the in-flight put stays", i);
        cr_assert_eq(js(j, "routes"), 0, "case %zu", i);
        cJSON_Delete(j);
        cr_assert_eq(placed(1), 2 * 4096, "case %zu", i);
        cr_assert_eq(t_lookup1(&oc[0], "m0", &la), ST(FLUXON_ERR_NOT_FOUND));
    }
    /* the right answer is still accepted, even under a batch id that was refused */
    cr_assert_eq(t_put_token(&oc[0], 10, keys, good, 2, 100, 0, NULL, 0, a.put_token, &pa), FLUXON_OK, "%s",
                 last_err);
    cr_assert(pa.statuses.v[0] == ST(FLUXON_OK) && pa.statuses.v[1] == ST(FLUXON_OK));
    cr_assert_eq(t_lookup1(&oc[0], "m1", &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == good[1]);
}

/* A PUT_DONE whose keys/offsets match its token but whose body is otherwise invalid
 * (here: group_lens that do not sum to the keys) is refused like any malformed batch; the
 * in-flight put must survive it (nothing changes), as it does for mismatching offsets. */
Test(master_place, invalid_put_done_body_keeps_the_token)
{
    up(0, true, "a");
    up(1, true, "b");
    const char *keys[] = {"v0", "v1"};
    fx_body_put_place_ack_t a;
    cr_assert_eq(t_place(&oc[0], keys, 2, 100, FX_PUT_WRITE_THROUGH, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(check_place(&a, 0, 100), 1);
    uint64_t offs[] = {a.offsets.v[0], a.offsets.v[1]}, bad_groups[] = {3};
    fx_body_put_done_ack_t pa;
    cr_assert_eq(t_put_token(&oc[0], 1, keys, offs, 2, 100, 0, bad_groups, 1, a.put_token, &pa),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(pm_stat("inflight_puts"), 1, "a refused PUT_DONE must not consume the in-flight put");
    cr_assert_eq(placed(1), 2 * 4096, "nor free its ranges");
    cr_assert_eq(t_put_token(&oc[0], 2, keys, offs, 2, 100, 0, NULL, 0, a.put_token, &pa), FLUXON_OK);
    cr_assert(pa.statuses.v[0] == ST(FLUXON_OK) && pa.statuses.v[1] == ST(FLUXON_OK),
              "the corrected PUT_DONE of the same token: %s",
              fluxon_status_string((int)(int64_t)pa.statuses.v[0]));
}

Test(master_place, put_done_after_the_target_died_is_stale)
{
    up(0, true, "a");
    up(1, true, "b");
    const char *k = "dead";
    fx_body_put_place_ack_t a;
    cr_assert_eq(t_place1(0, k, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 1);
    kill_owner(1, &oc[0]);
    fx_body_put_done_ack_t pa;
    cr_assert_eq(t_put_token(&oc[0], 1, &k, &a.offsets.v[0], 1, 100, 0, NULL, 0, a.put_token, &pa), FLUXON_OK);
    cr_assert_eq(pa.statuses.v[0], ST(FLUXON_ERR_STALE));
    cr_assert_eq(pm_stat("inflight_puts"), 0);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[0], k, &la), ST(FLUXON_ERR_NOT_FOUND));
    /* the requester now writes locally (the only owner left) */
    cr_assert_eq(t_place1(0, k, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 0);
}

Test(master_place, revoke_frees_the_ranges)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, false, "c");
    fx_body_put_place_ack_t a, keep_a;
    cr_assert_eq(t_place1(0, "keep", 9000, FX_PUT_WRITE_THROUGH, NULL, &keep_a), 1);
    uint64_t before = placed(1);
    cr_assert_eq(before, slot_of(9000));
    const char *keys[] = {"r0", "r1", "r2", "r3"};
    cr_assert_eq(t_place(&oc[0], keys, 4, 9000, FX_PUT_WRITE_THROUGH, NULL, 0, NULL, &a), FLUXON_OK);
    cr_assert_eq(check_place(&a, 0, 9000), 1);
    cr_assert_eq(placed(1), before + 4 * slot_of(9000));
    /* only the requester can revoke */
    cr_assert_eq(t_revoke(&oc[2], a.put_token), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(t_revoke(&oc[1], a.put_token), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(placed(1), before + 4 * slot_of(9000));
    cr_assert_eq(t_revoke(&oc[0], a.put_token), FLUXON_OK, "%s", last_err);
    cr_assert_eq(placed(1), before, "the ranges are free again");
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "revokes"), 1);
    cr_assert_eq(js(j, "inflight_puts"), 1);
    cr_assert_eq(js(j, "inflight_put_keys"), 1);
    cJSON_Delete(j);
    cr_assert_eq(t_revoke(&oc[0], a.put_token), FLUXON_ERR_NOT_FOUND, "a second revoke");
    cr_assert(strstr(last_err, "put_revoke"), "%s", last_err);
    cr_assert_eq(t_revoke(&oc[0], 0), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(t_revoke(&oc[0], 424242), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(pm_stat("revokes"), 1);
    /* a revoked token is stale at PUT_DONE */
    uint64_t offs[] = {a.offsets.v[0], a.offsets.v[1], a.offsets.v[2], a.offsets.v[3]};
    fx_body_put_done_ack_t pa;
    cr_assert_eq(t_put_token(&oc[0], 1, keys, offs, 4, 9000, 0, NULL, 0, a.put_token, &pa), FLUXON_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(pa.statuses.v[i], ST(FLUXON_ERR_STALE));
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[2], "r0", &la), ST(FLUXON_ERR_NOT_FOUND));
    /* the keys are no longer in flight */
    cr_assert_eq(t_place(&oc[2], keys, 4, 9000, FX_PUT_REJECT_IF_INFLIGHT, NULL, 0, NULL, &a), FLUXON_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(a.statuses.v[i], ST(FLUXON_OK));
    /* a local placement revokes too (no range to free) */
    fx_body_put_place_ack_t l;
    cr_assert_eq(t_place1(1, "loc", 100, FX_PUT_LOCAL_FIRST, NULL, &l), 1);
    uint64_t p1 = placed(1);
    cr_assert_eq(t_revoke(&oc[1], l.put_token), FLUXON_OK);
    cr_assert_eq(placed(1), p1);
    /* the other in-flight put was untouched */
    fx_body_put_done_ack_t ka;
    const char *kk = "keep";
    cr_assert_eq(t_put_token(&oc[0], 2, &kk, &keep_a.offsets.v[0], 1, 9000, 0, NULL, 0, keep_a.put_token, &ka),
                 FLUXON_OK);
    cr_assert_eq(ka.statuses.v[0], ST(FLUXON_OK));
}

Test(master_place, replacing_or_deleting_a_placed_key_frees_its_range)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, false, "c");
    const char *k = "r";
    const uint64_t B = slot_of(100);
    fx_body_put_place_ack_t a;
    fx_body_put_done_ack_t pa;
    fx_body_invalidate_t inv;
    cr_assert_eq(t_place1(0, k, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 1);
    uint64_t off1 = a.offsets.v[0];
    cr_assert_eq(t_put_token(&oc[0], 1, &k, &off1, 1, 100, 0, NULL, 0, a.put_token, &pa), FLUXON_OK);
    cr_assert_eq(pa.statuses.v[0], ST(FLUXON_OK));
    cr_assert_eq(placed(1), B);
    /* n3 takes a durable replica into its own slot */
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[2], k, &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_get_done(&oc[2], k, 81920, &la, FX_GET_DURABLE), ST(FLUXON_OK));
    cr_assert_eq(pm_stat("replicas"), 2);
    /* replaced by a new placed version: the old range is freed, the new one kept */
    cr_assert_eq(t_place1(0, k, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 1);
    uint64_t off2 = a.offsets.v[0];
    cr_assert_neq(off2, off1, "the old range is still routed");
    cr_assert_eq(placed(1), 2 * B);
    cr_assert_eq(t_put_token(&oc[0], 2, &k, &off2, 1, 100, 0, NULL, 0, a.put_token, &pa), FLUXON_OK);
    cr_assert_eq(pa.statuses.v[0], ST(FLUXON_OK));
    cr_assert_eq(placed(1), B, "the replaced version's range went back");
    cr_assert(t_invalidate(&oc[2], &inv, 2000), "n3's slot replica is invalidated");
    cr_assert(inv.keys.n == 1 && str_is(inv.keys.v[0], "r") && inv.offsets.v[0] == 81920);
    cr_assert_not(t_invalidate(&oc[1], &inv, 200), "no INVALIDATE for a master range");
    cr_assert_not(t_invalidate(&oc[0], &inv, 50));
    cr_assert_eq(pm_stat("replicas"), 1);
    /* replaced by a plain put from a slot of n1 */
    t_put1(&oc[0], 3, k, 4096, 100, 0, NULL, NULL);
    cr_assert_eq(placed(1), 0);
    cr_assert_not(t_invalidate(&oc[1], &inv, 200));
    cr_assert_eq(t_lookup1(&oc[2], k, &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n1") && la.offsets.v[0] == 4096);
    /* deleted */
    const char *k2 = "r2";
    cr_assert_eq(t_place1(0, k2, 100, FX_PUT_WRITE_THROUGH, NULL, &a), 1);
    cr_assert_eq(t_put_token(&oc[0], 4, &k2, &a.offsets.v[0], 1, 100, 0, NULL, 0, a.put_token, &pa), FLUXON_OK);
    cr_assert_eq(placed(1), B);
    fx_body_key_t dk = {fx_str_c(k2)};
    fx_body_empty_t e;
    cr_assert_eq(T_CALL(&oc[2], DELETE, key, &dk, empty, &e), FLUXON_OK, "%s", last_err);
    cr_assert_eq(placed(1), 0);
    cr_assert_not(t_invalidate(&oc[1], &inv, 200));
    cr_assert_eq(t_lookup1(&oc[2], k2, &la), ST(FLUXON_ERR_NOT_FOUND));
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "routes"), 1);
    cr_assert_eq(js(j, "replicas"), 1);
    cJSON_Delete(j);
    /* the freed ranges are allocatable again */
    uint64_t big = SEG / 2;
    cr_assert_eq(t_place1(0, "big", big, FX_PUT_WRITE_THROUGH, NULL, &a), 1);
    cr_assert_eq(placed(1), big);
}

Test(master_place, durable_for_two_owners_then_temporary)
{
    for (int i = 0; i < N_OWN; i++) up(i, false, "");
    uint64_t ms, ver;
    t_put1(&oc[3], 1, "dk", 40960, 100, 0, &ms, &ver); /* held by n4 */
    fx_body_lookup_ack_t la1, la2, la3, la;
    cr_assert_eq(t_lookup1(&oc[0], "dk", &la1), ST(FLUXON_OK));
    cr_assert_eq(la1.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_lookup1(&oc[1], "dk", &la2), ST(FLUXON_OK));
    cr_assert_eq(la2.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_lookup1(&oc[2], "dk", &la3), ST(FLUXON_OK));
    cr_assert_eq(la3.modes.v[0], FX_GET_TEMPORARY, "a third owner at once: temporary");
    cr_assert(!strcmp(src_of(&la3, 0), "n4") && la3.offsets.v[0] == 40960);
    cr_assert_eq(t_lookup1(&oc[1], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE, "the same owner asking again keeps its durable slot");
    cr_assert_eq(t_lookup1(&oc[3], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE, "the holder reuses its replica");
    cr_assert(!strcmp(src_of(&la, 0), "n4") && la.offsets.v[0] == 40960);
    /* an unregistered peer: temporary, and it takes no durable slot */
    t_hello(&ext, "x1");
    cr_assert_eq(t_lookup1(&ext, "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_TEMPORARY);
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "get_durable"), 3);
    cr_assert_eq(js(j, "get_temporary"), 1);
    cr_assert_eq(js(j, "get_reuse"), 1);
    cr_assert_eq(js(j, "inflight_gets"), 1, "one key");
    cr_assert_eq(js(j, "replicas"), 1);
    cJSON_Delete(j);
    /* n1 finishes its durable copy: a replica, and its slot goes to the next owner */
    cr_assert_eq(t_get_done(&oc[0], "dk", 8192, &la1, FX_GET_DURABLE), ST(FLUXON_OK));
    cr_assert_eq(pm_stat("replicas"), 2);
    cr_assert_eq(t_lookup1(&oc[2], "dk", &la3), ST(FLUXON_OK));
    cr_assert_eq(la3.modes.v[0], FX_GET_DURABLE, "a durable slot is free again");
    cr_assert_eq(t_lookup1(&oc[4], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_TEMPORARY, "n2 and n3 hold the two slots");
    cr_assert_eq(t_lookup1(&oc[0], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE);
    cr_assert(!strcmp(src_of(&la, 0), "n1") && la.offsets.v[0] == 8192);
    /* n5's temporary copy is validated but adds no replica */
    cr_assert_eq(t_lookup1(&oc[4], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_TEMPORARY);
    uint64_t dn = pm_stat("get_done_replicas");
    cr_assert_eq(t_get_done(&oc[4], "dk", 12288, &la, FX_GET_TEMPORARY), ST(FLUXON_OK));
    j = pm_stats();
    cr_assert_eq(js(j, "replicas"), 2);
    cr_assert_eq(js(j, "get_done_replicas"), (long long)dn);
    cJSON_Delete(j);
    fx_body_lookup_ack_t l5;
    cr_assert_eq(t_lookup1(&oc[4], "dk", &l5), ST(FLUXON_OK));
    cr_assert(strcmp(src_of(&l5, 0), "n5") && l5.modes.v[0] != FX_GET_REUSE, "n5 holds no replica");
    fx_body_lookup_ack_t l3;
    cr_assert_eq(t_lookup1(&oc[2], "dk", &l3), ST(FLUXON_OK));
    cr_assert(strcmp(src_of(&l3, 0), "n5"), "nobody is sent to n5's temporary copy");
    /* a temporary copy of a replaced source is stale */
    fx_body_lookup_ack_t old = la;
    uint64_t bad_ver = old.put_ver.v[0] + 1;
    old.put_ver.v = &bad_ver;
    cr_assert_eq(t_get_done(&oc[4], "dk", 12288, &old, FX_GET_TEMPORARY), ST(FLUXON_ERR_STALE));
    /* n2 finishes with an empty modes vector (= durable) */
    cr_assert_eq(t_get_done(&oc[1], "dk", 16384, &la2, 0), ST(FLUXON_OK));
    cr_assert_eq(pm_stat("replicas"), 3);
    cr_assert_eq(t_lookup1(&oc[1], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_REUSE);
    /* modes: only durable or temporary, one per key or none */
    const char *k = "dk";
    uint64_t off = 20480, bad_modes[] = {FX_GET_REUSE}, two_modes[] = {1, 1};
    fx_body_get_done_t gd = {t_keys(&k, 1), {&off, 1}, {&ms, 1}, {&ver, 1}, {&la.value_lens.v[0], 1},
                             fx_str_c("n4"), OWN[3].gen, {&la.offsets.v[0], 1}, {bad_modes, 1}};
    fx_body_statuses_t gs;
    cr_assert_eq(T_CALL(&oc[4], GET_DONE, get_done, &gd, statuses, &gs), FLUXON_ERR_INVALID_ARGUMENT);
    gd.modes = (fx_u64v_t){two_modes, 2};
    cr_assert_eq(T_CALL(&oc[4], GET_DONE, get_done, &gd, statuses, &gs), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(pm_stat("replicas"), 3);
}

Test(master_place, malformed_put_place_changes_nothing)
{
    up(0, true, "a");
    up(1, true, "b");
    fx_body_put_place_ack_t a;
    t_place1(0, "ok", 100, FX_PUT_WRITE_THROUGH, NULL, &a); /* one real in-flight put */
    char longkey[1100];
    memset(longkey, 'x', sizeof longkey - 1);
    longkey[1025] = '\0';
    fx_str_t nul[] = {{"a", 1}, {"a\0b", 3}}, empty[] = {{"a", 1}, {"", 0}}, two[] = {{"a", 1}, {"b", 1}};
    fx_str_t lng[] = {{"a", 1}, {longkey, 1025}};
    uint64_t g_zero[] = {0, 2}, g_short[] = {1}, g_long[] = {2, 1}, g_over[] = {3};
    struct {
        fx_str_t *k;
        uint32_t nk;
        uint64_t vlen;
        const uint64_t *g;
        uint32_t ng;
    } cases[] = {
        {two, 0, 100, NULL, 0},       /* no keys */
        {two, 2, 0, NULL, 0},         /* value_len 0 */
        {two, 2, SEG + 1, NULL, 0},   /* value larger than the requester's segment */
        {two, 2, UINT64_MAX, NULL, 0},
        {two, 2, 100, g_zero, 2},     /* an empty group */
        {two, 2, 100, g_short, 1},    /* groups sum to less */
        {two, 2, 100, g_long, 2},     /* groups sum to more */
        {two, 2, 100, g_over, 1},     /* one group longer than the batch */
        {nul, 2, 100, NULL, 0},       /* a key with NUL */
        {empty, 2, 100, NULL, 0},     /* an empty key */
        {lng, 2, 100, NULL, 0},       /* a key of 1025 bytes */
    };
    const char *names[] = {"places", "place_remote", "place_local", "place_rejected", "place_fallback",
                           "inflight_puts", "inflight_put_keys", "routes"};
    cJSON *j0 = pm_stats();
    uint64_t p0 = placed(1), p1 = placed(0);
    for (size_t i = 0; i < FX_ARRAY_LEN(cases); i++) {
        fx_body_put_place_t b = {{cases[i].k, cases[i].nk}, cases[i].vlen, 0, {cases[i].g, cases[i].ng},
                                 fx_str_c("")};
        cr_assert_eq(T_CALL(&oc[0], PUT_PLACE, put_place, &b, put_place_ack, &a), FLUXON_ERR_INVALID_ARGUMENT,
                     "case %zu", i);
        cr_assert(strstr(last_err, "put_place"), "case %zu: %s", i, last_err);
    }
    /* from a peer that never registered */
    t_hello(&ext, "x1");
    const char *k = "a";
    cr_assert_eq(t_place(&ext, &k, 1, 100, 0, NULL, 0, NULL, &a), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(t_revoke(&ext, 1), FLUXON_ERR_INVALID_ARGUMENT);
    cJSON *j1 = pm_stats();
    for (size_t i = 0; i < FX_ARRAY_LEN(names); i++)
        cr_assert_eq(js(j1, names[i]), js(j0, names[i]), "%s changed", names[i]);
    cr_assert_eq(js(j1, "error_replies"), js(j0, "error_replies") + (long long)FX_ARRAY_LEN(cases) + 2);
    cJSON_Delete(j0);
    cJSON_Delete(j1);
    cr_assert_eq(placed(1), p0);
    cr_assert_eq(placed(0), p1);
    /* limits that are fine: a 1024-byte key, a value as large as the segment (no other
     * owner can hold it plus a grant: the requester's own slots) */
    longkey[1024] = '\0';
    const char *lk = longkey;
    t_place1(0, lk, 100, 0, NULL, &a);
    cr_assert_eq(t_place1(0, "huge", SEG, 0, NULL, &a), 0);
    /* a truncated body is a protocol error: the connection is closed, the master serves on */
    fx_body_put_place_t b = {t_keys(&k, 1), 100, 0, {NULL, 0}, fx_str_c("")};
    uint8_t *enc;
    size_t len;
    T_ENCODE(put_place, &b, enc, len);
    t_send(&oc[1], FX_MSG_PUT_PLACE, 99, enc, len - 1);
    free(enc);
    tframe_t f;
    cr_assert_not(t_recv_frame(&oc[1], &f, 2000), "the master closes a connection that sent a malformed frame");
    t_place1(0, "after", 100, 0, NULL, &a);
}

/* ---- with a short in-flight TTL (300 ms) ---- */
Test(master_place_ttl, an_expired_put_frees_its_ranges_and_its_key)
{
    up(0, true, "a");
    up(1, true, "b");
    up(2, false, "c");
    const char *x = "x";
    fx_body_put_place_ack_t a1, a3;
    double t0 = th_now_s();
    cr_assert_eq(t_place1(0, x, 100, FX_PUT_WRITE_THROUGH, NULL, &a1), 1);
    cr_assert_eq(placed(1), 4096);
    cr_assert_eq(t_place(&oc[2], &x, 1, 100, FX_PUT_REJECT_IF_INFLIGHT, NULL, 0, NULL, &a3), FLUXON_OK);
    cr_assert_eq(a3.statuses.v[0], ST(FLUXON_ERR_KEY_BEING_WRITTEN));
    cr_assert_geq(pm_wait_stat("inflight_expired", 1, 5000), 0, "the in-flight put did not expire within 5 s");
    double waited = th_now_s() - t0;
    cr_assert_geq(waited, 0.29, "expired after %.3f s, before its TTL of 300 ms", waited);
    cJSON *j = pm_stats();
    cr_assert_eq(js(j, "inflight_puts"), 0);
    cr_assert_eq(js(j, "inflight_put_keys"), 0);
    cJSON_Delete(j);
    cr_assert_eq(placed(1), 0, "the expired put's range is free");
    cr_assert_eq(t_place(&oc[2], &x, 1, 100, FX_PUT_REJECT_IF_INFLIGHT, NULL, 0, NULL, &a3), FLUXON_OK);
    cr_assert_eq(a3.statuses.v[0], ST(FLUXON_OK), "the key is no longer being written");
    /* the late PUT_DONE of the expired put: STALE, nothing installed */
    fx_body_put_done_ack_t pa;
    cr_assert_eq(t_put_token(&oc[0], 1, &x, &a1.offsets.v[0], 1, 100, 0, NULL, 0, a1.put_token, &pa), FLUXON_OK);
    cr_assert_eq(pa.statuses.v[0], ST(FLUXON_ERR_STALE));
    cr_assert_eq(pm_stat("put_done_stale_token"), 1);
    fx_body_lookup_ack_t la;
    cr_assert_eq(t_lookup1(&oc[2], x, &la), ST(FLUXON_ERR_NOT_FOUND));
    cr_assert_eq(t_revoke(&oc[0], a1.put_token), FLUXON_ERR_NOT_FOUND);
    /* the second put expires as well (the timer re-arms) */
    cr_assert_geq(pm_wait_stat("inflight_expired", 2, 5000), 0, "the second in-flight put did not expire");
    cr_assert_eq(pm_stat("inflight_puts"), 0);
    /* a put finished in time is a route: the TTL no longer applies to its range */
    const char *y = "y";
    fx_body_put_place_ack_t ay;
    cr_assert_eq(t_place1(0, y, 100, FX_PUT_WRITE_THROUGH, NULL, &ay), 1);
    cr_assert_eq(t_put_token(&oc[0], 2, &y, &ay.offsets.v[0], 1, 100, 0, NULL, 0, ay.put_token, &pa), FLUXON_OK);
    cr_assert_eq(pa.statuses.v[0], ST(FLUXON_OK));
    th_sleep_ms(500);
    cr_assert_eq(pm_stat("inflight_expired"), 2);
    cr_assert_eq(placed(1), 4096);
    cr_assert_eq(t_lookup1(&oc[2], y, &la), ST(FLUXON_OK));
    cr_assert(str_is(la.src_node_ids.v[la.src.v[0]], "n2") && la.offsets.v[0] == ay.offsets.v[0]);
}

Test(master_place_ttl, durable_get_slots_expire)
{
    for (int i = 0; i < 4; i++) up(i, false, "");
    t_put1(&oc[3], 1, "dk", 40960, 100, 0, NULL, NULL);
    fx_body_lookup_ack_t la1, la;
    cr_assert_eq(t_lookup1(&oc[0], "dk", &la1), ST(FLUXON_OK));
    cr_assert_eq(la1.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_lookup1(&oc[1], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE);
    cr_assert_eq(t_lookup1(&oc[2], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_TEMPORARY);
    cr_assert_geq(pm_wait_stat("inflight_gets", 0, 5000), 0, "in-flight gets did not expire within 5 s");
    cr_assert_eq(t_lookup1(&oc[2], "dk", &la), ST(FLUXON_OK));
    cr_assert_eq(la.modes.v[0], FX_GET_DURABLE, "the expired slots are free");
    /* a late durable GET_DONE of a live source still adds its replica */
    cr_assert_eq(t_get_done(&oc[0], "dk", 8192, &la1, FX_GET_DURABLE), ST(FLUXON_OK));
    cr_assert_eq(pm_stat("replicas"), 2);
}
