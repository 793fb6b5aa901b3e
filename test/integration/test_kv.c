/* test_kv.c — the plain KV protocol (issue 4) through the public API with an embedded
 * master and two owners: replace, concurrent writers, a writer killed mid-put, delete
 * under a holder, missing keys, bad input, size extremes, cross-owner reads (UCX),
 * counters back to zero, leases. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "kvfix.h"

TestSuite(kv, .fini = kf_down, .timeout = 60);

static void put_str(fluxon_client *c, const char *k, const char *v)
{
    cr_assert_eq(fluxon_put(c, k, v, strlen(v), NULL), FLUXON_OK, "put %s", k);
}

static void expect(fluxon_client *c, const char *k, const char *v)
{
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_get(c, k, &h), FLUXON_OK, "get %s", k);
    cr_assert_eq(fluxon_holder_len(h), strlen(v));
    cr_assert_eq(memcmp(fluxon_holder_data(h), v, strlen(v)), 0);
    fluxon_holder_release(h);
}

Test(kv, put_replace_get)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    put_str(c, "k", "value-A");
    put_str(c, "k", "value-B-longer");
    expect(c, "k", "value-B-longer");
    /* the replaced version's slot comes back once the master invalidated it */
    cr_assert(kf_wait_stat(c, "slots_committed", 1, 3000), "one committed slot after replace");
    fluxon_client_close(c);
}

typedef struct writer {
    fluxon_client *c;
    uint64_t seed;
    int rc;
} writer_t;

static void *writer_run(void *arg)
{
    writer_t *w = arg;
    uint8_t buf[20000];
    for (int i = 0; i < 20; i++) {
        kf_fill(buf, sizeof buf, w->seed);
        w->rc = fluxon_put(w->c, "contended", buf, sizeof buf, NULL);
        if (w->rc != FLUXON_OK) break;
    }
    return NULL;
}

Test(kv, concurrent_writers_leave_one_whole_value)
{
    kf_up(2);
    writer_t w[2] = {{kf_client(0), 1, 0}, {kf_client(1), 2, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, writer_run, &w[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    cr_assert_eq(w[0].rc, FLUXON_OK);
    cr_assert_eq(w[1].rc, FLUXON_OK);
    for (int i = 0; i < 2; i++) {
        fluxon_holder *h = NULL;
        cr_assert_eq(fluxon_get(w[i].c, "contended", &h), FLUXON_OK);
        cr_assert_eq(fluxon_holder_len(h), 20000);
        const uint8_t *p = fluxon_holder_data(h);
        cr_assert(kf_check(p, 20000, 1) || kf_check(p, 20000, 2), "value must be one writer's, whole");
        fluxon_holder_release(h);
    }
    fluxon_client_close(w[0].c);
    fluxon_client_close(w[1].c);
}

Test(kv, writer_killed_between_put_start_and_commit)
{
    /* fork before any thread exists: the child is a clean single-threaded process */
    int go[2], ready[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(ready), 0);
    pid_t child = fork();
    if (child == 0) {
        char path[512] = "";
        if (read(go[0], path, sizeof path - 1) <= 0) _exit(1);
        char cfg[700];
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"external\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"socket\":\"%s\","
                 "\"log_level\":\"error\"}", path);
        fluxon_client *c = NULL;
        if (fluxon_client_open(cfg, &c) != FLUXON_OK) _exit(2);
        const char *k = "half-written";
        fluxon_plan *plan = NULL;
        int st;
        if (fluxon_local_fast_put_start(c, &k, 1, 65536, NULL, &plan, &st) != FLUXON_OK || st) _exit(3);
        memset((void *)(uintptr_t)plan->value_ptrs[0], 0xAB, 30000); /* half the value */
        char one = 1;
        if (write(ready[1], &one, 1) != 1) _exit(4);
        for (;;) pause(); /* killed here, before commit */
    }
    kf_up(1);
    char path[512];
    snprintf(path, sizeof path, "%s/ownA/s.sock", kf_dir);
    cr_assert_eq(write(go[1], path, strlen(path)), (ssize_t)strlen(path));
    char one;
    struct pollfd pf = {ready[0], POLLIN, 0};
    cr_assert_eq(poll(&pf, 1, 10000), 1, "child did not reach put_start");
    cr_assert_eq(read(ready[0], &one, 1), 1);
    fluxon_client *c = kf_client(0);
    cr_assert_eq(kf_stat(c, "slots_prepared"), 1);
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_get(c, "half-written", &h), FLUXON_ERR_NOT_FOUND, "no partial value is readable");
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    cr_assert(kf_wait_stat(c, "slots_prepared", 0, 3000), "the dead writer's slot is released");
    cr_assert_eq(fluxon_get(c, "half-written", &h), FLUXON_ERR_NOT_FOUND);
    put_str(c, "half-written", "now whole");
    expect(c, "half-written", "now whole");
    fluxon_client_close(c);
}

Test(kv, delete_while_a_reader_holds_the_value)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    uint8_t buf[50000];
    kf_fill(buf, sizeof buf, 7);
    cr_assert_eq(fluxon_put(c, "held", buf, sizeof buf, NULL), FLUXON_OK);
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_get(c, "held", &h), FLUXON_OK);
    long long free_before = kf_stat(c, "slots_free");
    cr_assert_eq(fluxon_delete(c, "held"), FLUXON_OK);
    fluxon_holder *h2 = NULL;
    cr_assert_eq(fluxon_get(c, "held", &h2), FLUXON_ERR_NOT_FOUND);
    /* new puts must not reuse the held slot */
    for (int i = 0; i < 20; i++) {
        char k[32];
        snprintf(k, sizeof k, "filler-%d", i);
        uint8_t other[50000];
        memset(other, i, sizeof other);
        cr_assert_eq(fluxon_put(c, k, other, sizeof other, NULL), FLUXON_OK);
    }
    cr_assert(kf_check(fluxon_holder_data(h), sizeof buf, 7), "held bytes intact after delete + reuse");
    cr_assert_eq(kf_stat(c, "slots_draining"), 1, "the deleted slot waits for its holder");
    fluxon_holder_release(h);
    cr_assert(kf_wait_stat(c, "slots_draining", 0, 3000), "released: the slot is free again");
    (void)free_before;
    fluxon_client_close(c);
}

Test(kv, missing_keys_and_bad_input)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_delete(c, "nope"), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fluxon_get(c, "nope", &h), FLUXON_ERR_NOT_FOUND);
    long long started = kf_stat(c, "puts_started"), slots_free = kf_stat(c, "slots_free");
    char big[FLUXON_MAX_KEY_BYTES + 2];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = 0;
    cr_assert_eq(fluxon_put(c, "", "v", 1, NULL), FLUXON_ERR_INVALID_ARGUMENT, "empty key");
    cr_assert_eq(fluxon_put(c, NULL, "v", 1, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_put(c, big, "v", 1, NULL), FLUXON_ERR_INVALID_ARGUMENT, "key too long");
    cr_assert_eq(fluxon_put(c, "k", "v", 0, NULL), FLUXON_ERR_INVALID_ARGUMENT, "value_len 0");
    cr_assert_eq(fluxon_put(c, "k", NULL, 1, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    static uint8_t huge[9 << 20];
    cr_assert_eq(fluxon_put(c, "k", huge, sizeof huge, NULL), FLUXON_ERR_INVALID_ARGUMENT,
                 "larger than a grant (8 MiB): the owner can never hold it");
    cr_assert_eq(fluxon_get(c, "", &h), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_get(c, big, &h), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_delete(c, ""), FLUXON_ERR_INVALID_ARGUMENT);
    size_t lead;
    cr_assert_eq(fluxon_batch_exists(c, NULL, 1, &lead), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(kf_stat(c, "puts_started"), started, "nothing changed");
    cr_assert_eq(kf_stat(c, "slots_free"), slots_free);
    fluxon_client_close(c);
}

Test(kv, one_byte_and_max_size_values_and_cross_owner_reads)
{
    kf_up(2);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    cr_assert_eq(fluxon_put(a, "tiny", "x", 1, NULL), FLUXON_OK);
    size_t max = 8u << 20; /* one whole grant */
    uint8_t *big = malloc(max);
    kf_fill(big, max, 99);
    cr_assert_eq(fluxon_put(a, "big", big, max, NULL), FLUXON_OK);
    /* read through the other owner: LOOKUP at the master, UCX fetch from A */
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_get(b, "tiny", &h), FLUXON_OK);
    cr_assert_eq(fluxon_holder_len(h), 1);
    cr_assert_eq(*(const char *)fluxon_holder_data(h), 'x');
    fluxon_holder_release(h);
    cr_assert_eq(fluxon_get(b, "big", &h), FLUXON_OK);
    cr_assert_eq(fluxon_holder_len(h), max);
    cr_assert(kf_check(fluxon_holder_data(h), max, 99), "cross-owner value byte-exact");
    fluxon_holder_release(h);
    cr_assert_geq(kf_stat(b, "remote_hits"), 2);
    size_t lead = 0;
    const char *ks[] = {"tiny", "big", "absent", "tiny"};
    cr_assert_eq(fluxon_batch_exists(b, ks, 4, &lead), FLUXON_OK);
    cr_assert_eq(lead, 2);
    free(big);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

static void collect(void *arg, const char *key) { (*(int *)arg)++; (void)key; }

Test(kv, deleting_everything_returns_counters_to_zero)
{
    kf_up(2);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    char k[32];
    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof k, "page-%02d", i);
        cr_assert_eq(fluxon_put(a, k, k, strlen(k) + 1, NULL), FLUXON_OK);
    }
    for (int i = 0; i < 40; i += 2) { /* replicas on B */
        snprintf(k, sizeof k, "page-%02d", i);
        fluxon_holder *h;
        cr_assert_eq(fluxon_get(b, k, &h), FLUXON_OK);
        cr_assert_str_eq(fluxon_holder_data(h), k);
        fluxon_holder_release(h);
    }
    int n = 0;
    size_t listed = 0;
    cr_assert_eq(fluxon_list_keys(a, "page-1", NULL, 100, collect, &n, &listed), FLUXON_OK);
    cr_assert_eq(listed, 10);
    cr_assert_eq(n, 10);
    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof k, "page-%02d", i);
        cr_assert_eq(fluxon_delete(i % 2 ? a : b, k), FLUXON_OK);
    }
    fluxon_client *cs[2] = {a, b};
    for (int j = 0; j < 2; j++) {
        cr_assert(kf_wait_stat(cs[j], "index_keys", 0, 3000));
        cr_assert(kf_wait_stat(cs[j], "slots_committed", 0, 3000));
        cr_assert_eq(kf_stat(cs[j], "slots_pending"), 0);
        cr_assert_eq(kf_stat(cs[j], "slots_prepared"), 0);
        cr_assert_eq(kf_stat(cs[j], "holders"), 0);
        cr_assert_eq(kf_stat(cs[j], "handles_open"), 0);
        cr_assert_eq(kf_stat(cs[j], "gets_inflight"), 0);
        cr_assert_eq(kf_stat(cs[j], "puts_inflight"), 0);
        cr_assert_eq(kf_stat(cs[j], "used_bytes"), 0);
    }
    fluxon_client_close(a);
    fluxon_client_close(b);
}

Test(kv, lease_expiry_deletes_the_value)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    uint64_t lease = 0;
    cr_assert_eq(fluxon_lease_grant(c, 200, &lease), FLUXON_OK);
    cr_assert_neq(lease, 0);
    fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_LEASE_ID, .lease_id = lease};
    cr_assert_eq(fluxon_put(c, "leased", "v", 1, &o), FLUXON_OK);
    put_str(c, "unleased", "w");
    expect(c, "leased", "v");
    th_sleep_ms(400);
    fluxon_holder *h = NULL;
    cr_assert_eq(fluxon_get(c, "leased", &h), FLUXON_ERR_NOT_FOUND, "expired with its lease");
    expect(c, "unleased", "w");
    o.lease_id = 999999;
    cr_assert_eq(fluxon_put(c, "bad-lease", "v", 1, &o), FLUXON_ERR_LEASE_EXPIRED);
    fluxon_client_close(c);
}
