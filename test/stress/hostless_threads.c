/* hostless_threads.c — one client's hostless API driven from 8 threads at once (issue 13):
 * puts, gets, transfers, cancels, aborts, releases, and deliberate misuse (double commit,
 * double release, double cancel, transfer after cancel, and pointers this thread consumed
 * earlier used again while it holds live plans that may sit at the same address) racing
 * other threads' live plans and handles. A reference model (every committed key and the
 * seed of its bytes) says what must be readable: every committed key restores
 * byte-exact, misuse is always WRONG_HANDLE and never touches another plan, and the owner
 * is back to zero holders, handles and prepared slots at the end.
 *
 * A plain program (exit 0 = passed), not a Criterion suite, so that `make tsan` can run
 * it: Criterion cannot start under ThreadSanitizer (its BoxFort arena maps at fixed
 * addresses TSan reserves; Criterion issue #274). test_threads runs it in `make test` and
 * `make asan`. Usage: hostless_threads [seconds] (default 90, the bound of the run). */
#include <cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdbool.h>

#include "fluxon.h"
#include "helpers.h"

#define TH_THREADS 8
#define TH_ITERS 300
#define TH_VLEN 4096
#define TH_MAX_BATCH 8
#define TH_KEYS_PER_THREAD (TH_ITERS * TH_MAX_BATCH)

static void kf_fill(uint8_t *p, size_t len, uint64_t seed) { th_pattern(p, NULL, len, seed); }
static int kf_check(const uint8_t *p, size_t len, uint64_t seed) { return th_pattern(NULL, p, len, seed); }

typedef struct th_model {
    pthread_mutex_t mu;
    /* committed[t][i]: key "th<t>-<i>" is published (its bytes are seeded by t, i) */
    uint8_t committed[TH_THREADS][TH_KEYS_PER_THREAD];
    int next_key[TH_THREADS];
} th_model_t;

static th_model_t model;
static fluxon_client *shared_client;
static char *dir;
static fluxon_node *master, *owner;
static double deadline_s;

typedef struct th_ctx {
    int t;
    uint64_t rng;
    char err[256]; /* first failure, reported by the main thread */
    long puts, gets, misuse;
    /* pointers this thread already consumed, used again later while it holds live ones:
     * the allocator may well have handed out the same address again */
    fluxon_plan *stale_plan;
    fluxon_get_handle *stale_handle;
} th_ctx_t;

static uint64_t th_rand(th_ctx_t *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

static uint64_t th_seed(int t, int i) { return (uint64_t)t * 1000003u + (uint64_t)i * 7919u + 17u; }
static void th_key(char *buf, size_t cap, int t, int i) { snprintf(buf, cap, "th%d-%05d", t, i); }

#define TH_FAIL(c, ...)                                                                                              \
    do {                                                                                                             \
        if (!(c)->err[0]) snprintf((c)->err, sizeof (c)->err, __VA_ARGS__);                                         \
        return false;                                                                                                \
    } while (0)

/* Puts a batch of fresh keys of this thread; sometimes aborts instead, sometimes commits
 * twice (the second commit must be WRONG_HANDLE). */
static bool th_put(th_ctx_t *c)
{
    int n = 1 + (int)(th_rand(c) % TH_MAX_BATCH);
    pthread_mutex_lock(&model.mu);
    int first = model.next_key[c->t];
    model.next_key[c->t] += n;
    pthread_mutex_unlock(&model.mu);
    if (first + n > TH_KEYS_PER_THREAD) return true;
    char names[TH_MAX_BATCH][32];
    const char *keys[TH_MAX_BATCH];
    int st[TH_MAX_BATCH];
    for (int k = 0; k < n; k++) {
        th_key(names[k], sizeof names[k], c->t, first + k);
        keys[k] = names[k];
    }
    fluxon_plan *plan = NULL;
    int rc = fluxon_local_fast_put_start(shared_client, keys, (size_t)n, TH_VLEN, NULL, &plan, st);
    if (rc != FLUXON_OK) TH_FAIL(c, "thread %d: put_start of %d keys: %s", c->t, n, fluxon_status_string(rc));
    for (int k = 0; k < n; k++) {
        if (st[k] != FLUXON_OK) TH_FAIL(c, "thread %d: fresh key %s rejected: %s", c->t, keys[k], fluxon_status_string(st[k]));
        kf_fill((uint8_t *)(uintptr_t)plan->value_ptrs[k], TH_VLEN, th_seed(c->t, first + k));
    }
    uint64_t r = th_rand(c) % 8;
    if (r == 0) { /* abort: nothing is published, and the plan is gone */
        rc = fluxon_put_abort(shared_client, plan);
        if (rc != FLUXON_OK) TH_FAIL(c, "thread %d: abort: %s", c->t, fluxon_status_string(rc));
        rc = fluxon_put_abort(shared_client, plan);
        if (rc != FLUXON_ERR_WRONG_HANDLE) TH_FAIL(c, "thread %d: second abort: %s", c->t, fluxon_status_string(rc));
        c->misuse++;
        return true;
    }
    fluxon_future *f = NULL;
    rc = fluxon_local_fast_put_commit(shared_client, plan, &f);
    if (rc != FLUXON_OK) TH_FAIL(c, "thread %d: commit: %s", c->t, fluxon_status_string(rc));
    if (r == 1) { /* a stale plan pointer: never another thread's new plan */
        fluxon_future *f2 = NULL;
        rc = fluxon_local_fast_put_commit(shared_client, plan, &f2);
        if (rc != FLUXON_ERR_WRONG_HANDLE) TH_FAIL(c, "thread %d: second commit: %s", c->t, fluxon_status_string(rc));
        c->misuse++;
    }
    rc = fluxon_future_wait(f, 20000);
    fluxon_future_free(f);
    if (rc != FLUXON_OK) TH_FAIL(c, "thread %d: future: %s", c->t, fluxon_status_string(rc));
    pthread_mutex_lock(&model.mu);
    for (int k = 0; k < n; k++) model.committed[c->t][first + k] = 1;
    pthread_mutex_unlock(&model.mu);
    c->puts++;
    return true;
}

/* Reads committed keys of a random thread (often another one): every one must restore
 * byte-exact. Ends with a release, a cancel, or misuse of a consumed plan/handle. */
static bool th_get(th_ctx_t *c)
{
    int t = (int)(th_rand(c) % TH_THREADS);
    int ids[TH_MAX_BATCH], n = 0;
    pthread_mutex_lock(&model.mu);
    int lim = model.next_key[t] < TH_KEYS_PER_THREAD ? model.next_key[t] : TH_KEYS_PER_THREAD;
    for (int tries = 0; tries < 64 && n < TH_MAX_BATCH && lim > 0; tries++) {
        int i = (int)(th_rand(c) % (uint64_t)lim);
        bool dup = false;
        for (int k = 0; k < n; k++) dup |= ids[k] == i;
        if (model.committed[t][i] && !dup) ids[n++] = i;
    }
    pthread_mutex_unlock(&model.mu);
    if (n == 0) return true;
    char names[TH_MAX_BATCH][32];
    const char *keys[TH_MAX_BATCH];
    for (int k = 0; k < n; k++) {
        th_key(names[k], sizeof names[k], t, ids[k]);
        keys[k] = names[k];
    }
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result res;
    int rc = fluxon_get_start(shared_client, keys, (size_t)n, 1, NULL, 0, &h, &res);
    if (rc != FLUXON_OK) TH_FAIL(c, "thread %d: get_start: %s", c->t, fluxon_status_string(rc));
    if (res.transferable_len != (uint64_t)n)
        TH_FAIL(c, "thread %d: %d committed keys of thread %d, only %llu restorable", c->t, n, t,
                (unsigned long long)res.transferable_len);
    if (c->stale_handle) { /* a consumed handle, maybe at the address of the live h */
        rc = fluxon_cancel_get_transfer(shared_client, c->stale_handle);
        if (rc != FLUXON_ERR_WRONG_HANDLE) TH_FAIL(c, "thread %d: cancel of a consumed handle: %s", c->t, fluxon_status_string(rc));
        c->misuse++;
    }
    c->stale_handle = h;
    uint64_t r = th_rand(c) % 6;
    if (r == 0) { /* cancel; a second cancel and a transfer after it are WRONG_HANDLE */
        rc = fluxon_cancel_get_transfer(shared_client, h);
        if (rc != FLUXON_OK) TH_FAIL(c, "thread %d: cancel: %s", c->t, fluxon_status_string(rc));
        rc = fluxon_cancel_get_transfer(shared_client, h);
        if (rc != FLUXON_ERR_WRONG_HANDLE) TH_FAIL(c, "thread %d: second cancel: %s", c->t, fluxon_status_string(rc));
        fluxon_plan *p2 = NULL;
        rc = fluxon_get_transfer(shared_client, h, 0, &p2);
        if (rc != FLUXON_ERR_WRONG_HANDLE) TH_FAIL(c, "thread %d: transfer after cancel: %s", c->t, fluxon_status_string(rc));
        c->misuse++;
        return true;
    }
    fluxon_plan *plan = NULL;
    rc = fluxon_get_transfer(shared_client, h, 0, &plan);
    if (rc != FLUXON_OK) TH_FAIL(c, "thread %d: get_transfer: %s", c->t, fluxon_status_string(rc));
    if (plan->count != (uint64_t)n) TH_FAIL(c, "thread %d: plan of %llu values, wanted %d", c->t, (unsigned long long)plan->count, n);
    for (int k = 0; k < n; k++)
        if (!kf_check((const uint8_t *)(uintptr_t)plan->value_ptrs[k], TH_VLEN, th_seed(t, ids[k])))
            TH_FAIL(c, "thread %d: %s read wrong bytes", c->t, keys[k]);
    if (c->stale_plan) { /* a released plan, maybe at the address of the live one */
        rc = fluxon_release_views(shared_client, c->stale_plan);
        if (rc != FLUXON_ERR_WRONG_HANDLE) TH_FAIL(c, "thread %d: release of a released plan: %s", c->t, fluxon_status_string(rc));
        c->misuse++;
    }
    c->stale_plan = plan;
    rc = fluxon_release_views(shared_client, plan);
    if (rc != FLUXON_OK) TH_FAIL(c, "thread %d: release_views: %s", c->t, fluxon_status_string(rc));
    if (r == 1) { /* a stale read plan pointer: never another thread's plan */
        rc = fluxon_release_views(shared_client, plan);
        if (rc != FLUXON_ERR_WRONG_HANDLE) TH_FAIL(c, "thread %d: second release: %s", c->t, fluxon_status_string(rc));
        c->misuse++;
    } else if (r == 2) { /* the consumed handle is no longer a handle */
        fluxon_plan *p2 = NULL;
        rc = fluxon_get_transfer(shared_client, h, 0, &p2);
        if (rc != FLUXON_ERR_WRONG_HANDLE) TH_FAIL(c, "thread %d: transfer of a consumed handle: %s", c->t, fluxon_status_string(rc));
        c->misuse++;
    }
    c->gets++;
    return true;
}

static void *th_main(void *arg)
{
    th_ctx_t *c = arg;
    for (int it = 0; it < TH_ITERS && th_now_s() < deadline_s; it++) {
        bool ok = (th_rand(c) % 3 == 0) ? th_put(c) : th_get(c);
        if (!ok) break;
    }
    return NULL;
}

static int failures;
#define CHECK(cond, ...)                                                                                             \
    do {                                                                                                             \
        if (!(cond)) {                                                                                               \
            fprintf(stderr, "hostless_threads: FAILED: " __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                                                     \
            failures++;                                                                                              \
        }                                                                                                            \
    } while (0)

static long long owner_stat(const char *name)
{
    static char buf[1 << 16];
    size_t len;
    if (fluxon_client_stats(shared_client, buf, sizeof buf, &len) != FLUXON_OK) return -1;
    cJSON *doc = cJSON_Parse(buf);
    cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "owner"), name);
    long long r = cJSON_IsNumber(v) ? (long long)cJSON_GetNumberValue(v) : -1;
    cJSON_Delete(doc);
    return r;
}

static bool wait_stat(const char *name, long long want, int timeout_ms)
{
    double end = th_now_s() + timeout_ms / 1000.0;
    for (;;) {
        if (owner_stat(name) == want) return true;
        if (th_now_s() > end) return false;
        th_sleep_ms(10);
    }
}

static int cluster_up(void)
{
    dir = th_tmpdir();
    if (!dir) return FLUXON_ERR_INTERNAL;
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"role\":\"master\",\"cluster_id\":\"thr\",\"cluster_token\":\"tok\","
             "\"listen\":\"127.0.0.1:0\",\"log_level\":\"warn\"}");
    int rc = fluxon_node_start(cfg, &master);
    if (rc != FLUXON_OK) return rc;
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"owner\",\"cluster_id\":\"thr\",\"cluster_token\":\"tok\",\"node_id\":\"own\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s/own/s.sock\",\"segment_bytes\":\"72MiB\","
             "\"reserve\":{\"grant_bytes\":\"8MiB\"},\"log_level\":\"warn\"}",
             fluxon_node_port(master), dir);
    if ((rc = fluxon_node_start(cfg, &owner)) != FLUXON_OK) return rc;
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"external\",\"cluster_id\":\"thr\",\"cluster_token\":\"tok\",\"socket\":\"%s/own/s.sock\","
             "\"timeout_ms\":20000,\"log_level\":\"warn\"}", dir);
    return fluxon_client_open(cfg, &shared_client);
}

static void cluster_down(void)
{
    fluxon_client_close(shared_client);
    fluxon_node_stop(owner);
    fluxon_node_stop(master);
    th_rmtree(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 90;
    if (secs <= 0) secs = 90;
    int rc = cluster_up();
    if (rc != FLUXON_OK) {
        fprintf(stderr, "hostless_threads: cluster did not start: %s\n", fluxon_status_string(rc));
        cluster_down();
        return 1;
    }
    pthread_mutex_init(&model.mu, NULL);
    deadline_s = th_now_s() + secs;
    static th_ctx_t ctx[TH_THREADS];
    pthread_t tid[TH_THREADS];
    for (int t = 0; t < TH_THREADS; t++) {
        ctx[t].t = t;
        ctx[t].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
        if (pthread_create(&tid[t], NULL, th_main, &ctx[t]) != 0) {
            fprintf(stderr, "hostless_threads: pthread_create failed\n");
            return 1;
        }
    }
    long puts = 0, gets = 0, misuse = 0;
    for (int t = 0; t < TH_THREADS; t++) {
        pthread_join(tid[t], NULL);
        CHECK(ctx[t].err[0] == '\0', "%s", ctx[t].err);
        puts += ctx[t].puts;
        gets += ctx[t].gets;
        misuse += ctx[t].misuse;
    }
    printf("hostless_threads: %d threads, %ld put batches, %ld get batches, %ld misuse checks\n", TH_THREADS, puts,
           gets, misuse);
    CHECK(puts > TH_THREADS, "the threads really put (%ld batches)", puts);
    CHECK(gets > TH_THREADS, "the threads really read (%ld batches)", gets);
    CHECK(misuse > 0, "misuse was exercised");
    /* every committed key of every thread restores byte-exact at the end */
    for (int t = 0; t < TH_THREADS; t++)
        for (int i = 0; i < TH_KEYS_PER_THREAD; i++) {
            if (!model.committed[t][i]) continue;
            char name[32];
            th_key(name, sizeof name, t, i);
            fluxon_holder *hd = NULL;
            rc = fluxon_get(shared_client, name, &hd);
            CHECK(rc == FLUXON_OK, "%s: %s", name, fluxon_status_string(rc));
            if (rc != FLUXON_OK) continue;
            CHECK(fluxon_holder_len(hd) == TH_VLEN && kf_check(fluxon_holder_data(hd), TH_VLEN, th_seed(t, i)),
                  "%s byte-exact", name);
            fluxon_holder_release(hd);
        }
    /* nothing stays pinned or prepared */
    CHECK(wait_stat("holders", 0, 5000), "holders back to 0 (%lld)", owner_stat("holders"));
    CHECK(wait_stat("handles_open", 0, 5000), "handles back to 0 (%lld)", owner_stat("handles_open"));
    CHECK(wait_stat("slots_prepared", 0, 5000), "no prepared slots left (%lld)", owner_stat("slots_prepared"));
    cluster_down();
    pthread_mutex_destroy(&model.mu);
    if (failures) fprintf(stderr, "hostless_threads: %d failures\n", failures);
    else printf("hostless_threads: passed\n");
    return failures ? 1 : 0;
}
