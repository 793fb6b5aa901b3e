/* test_threads.c — one client's hostless API driven from 8 threads at once (issue 13): puts,
 * gets, transfers, cancels, aborts, releases, and deliberate misuse (double commit, double
 * release, double cancel, transfer after cancel) racing other threads' live plans and
 * handles. A reference model (every committed key and the seed of its bytes) says what must
 * be readable: every committed key restores byte-exact, misuse is always WRONG_HANDLE and
 * never touches another thread's plan, and the owner is back to zero holders, handles and
 * prepared slots at the end. Run under ASan and TSan too (make asan / make tsan). */
#include <criterion/criterion.h>
#include <pthread.h>

#include "kvfix.h"

TestSuite(threads, .fini = kf_down, .timeout = 180);

#define TH_THREADS 8
#define TH_ITERS 300
#define TH_VLEN 4096
#define TH_MAX_BATCH 8
#define TH_KEYS_PER_THREAD (TH_ITERS * TH_MAX_BATCH)

typedef struct th_model {
    pthread_mutex_t mu;
    /* committed[t][i]: key "th<t>-<i>" is published (its bytes are seeded by t, i) */
    uint8_t committed[TH_THREADS][TH_KEYS_PER_THREAD];
    int next_key[TH_THREADS];
} th_model_t;

static th_model_t model;
static fluxon_client *shared_client;
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

Test(threads, one_client_hostless_from_8_threads_matches_the_model)
{
    kf_up(1);
    shared_client = kf_client(0);
    memset(&model, 0, sizeof model);
    pthread_mutex_init(&model.mu, NULL);
    deadline_s = th_now_s() + 90;
    th_ctx_t ctx[TH_THREADS];
    pthread_t tid[TH_THREADS];
    for (int t = 0; t < TH_THREADS; t++) {
        memset(&ctx[t], 0, sizeof ctx[t]);
        ctx[t].t = t;
        ctx[t].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
        cr_assert_eq(pthread_create(&tid[t], NULL, th_main, &ctx[t]), 0);
    }
    long puts = 0, gets = 0, misuse = 0;
    for (int t = 0; t < TH_THREADS; t++) {
        pthread_join(tid[t], NULL);
        cr_expect_eq(ctx[t].err[0], '\0', "%s", ctx[t].err);
        puts += ctx[t].puts;
        gets += ctx[t].gets;
        misuse += ctx[t].misuse;
    }
    cr_log_info("threads: %ld put batches, %ld get batches, %ld misuse checks", puts, gets, misuse);
    cr_assert_gt(puts, TH_THREADS, "the threads really put");
    cr_assert_gt(gets, TH_THREADS, "the threads really read");
    cr_assert_gt(misuse, 0, "misuse was exercised");
    /* every committed key of every thread restores byte-exact at the end */
    for (int t = 0; t < TH_THREADS; t++)
        for (int i = 0; i < TH_KEYS_PER_THREAD; i++) {
            if (!model.committed[t][i]) continue;
            char name[32];
            th_key(name, sizeof name, t, i);
            fluxon_holder *hd = NULL;
            cr_assert_eq(fluxon_get(shared_client, name, &hd), FLUXON_OK, "%s", name);
            cr_assert_eq(fluxon_holder_len(hd), TH_VLEN);
            cr_assert(kf_check(fluxon_holder_data(hd), TH_VLEN, th_seed(t, i)), "%s byte-exact", name);
            fluxon_holder_release(hd);
        }
    /* nothing stays pinned or prepared */
    cr_assert(kf_wait_stat(shared_client, "holders", 0, 5000), "holders back to 0");
    cr_assert(kf_wait_stat(shared_client, "handles_open", 0, 5000), "handles back to 0");
    cr_assert(kf_wait_stat(shared_client, "slots_prepared", 0, 5000), "no prepared slots left");
    fluxon_client_close(shared_client);
    shared_client = NULL;
}
