/* embed_cycle.c — an embedder's program built from the amalgamation alone (fluxon.c +
 * fluxon.h, issue 8): starts an embedded master and owner in this process, opens two
 * clients from two threads and runs the hostless cycle on 64 keys in each:
 * put_start → write the values in place → commit → future wait → get_start →
 * get_transfer → verify the bytes → release_views; then, after a barrier, reads the
 * other thread's 64 keys the same way. Exit status 0 on success.
 *
 * usage: embed_cycle [DIR]   (the owner's socket goes into a mkdtemp directory in DIR,
 *                             default /tmp; the directory is removed at exit) */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fluxon.h"

#define N_KEYS 64
#define VALUE_LEN 8192
#define WAIT_MS 20000

static char sock_dir[512];
static char sock_path[600];
static pthread_barrier_t barrier;

#define FAIL(...) do { fprintf(stderr, "embed_cycle (C): " __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)

static uint8_t pattern(int thread, int key, size_t j)
{
    return (uint8_t)(thread * 97 + key * 31 + (int)(j * 7) + (int)(j >> 8));
}

static void make_keys(int thread, char names[N_KEYS][64], const char *keys[N_KEYS])
{
    for (int i = 0; i < N_KEYS; i++) {
        snprintf(names[i], 64, "embed-c/t%d/page-%02d", thread, i);
        keys[i] = names[i];
    }
}

/* The value pointers of a plan must lie inside the owner's segment as mapped here. */
static int in_segment(const fluxon_segment_info *seg, uint64_t p)
{
    uint64_t base = (uint64_t)(uintptr_t)seg->write_ptr;
    return p >= base && p + VALUE_LEN <= base + seg->len;
}

static int put_cycle(fluxon_client *c, const fluxon_segment_info *seg, int thread)
{
    char names[N_KEYS][64];
    const char *keys[N_KEYS];
    int st[N_KEYS];
    make_keys(thread, names, keys);
    fluxon_plan *plan = NULL;
    int rc = fluxon_local_fast_put_start(c, keys, N_KEYS, VALUE_LEN, NULL, &plan, st);
    if (rc != FLUXON_OK) FAIL("put_start: %s", fluxon_status_string(rc));
    if (plan->magic != FLUXON_PUT_PLAN_MAGIC || plan->count != N_KEYS)
        FAIL("put plan: magic %llx count %llu", (unsigned long long)plan->magic, (unsigned long long)plan->count);
    for (int i = 0; i < N_KEYS; i++) {
        if (st[i] != FLUXON_OK || plan->value_ptrs[i] == 0 || !in_segment(seg, plan->value_ptrs[i]))
            FAIL("put_start key %d: %s, ptr %llx", i, fluxon_status_string(st[i]),
                 (unsigned long long)plan->value_ptrs[i]);
        uint8_t *dst = (uint8_t *)(uintptr_t)plan->value_ptrs[i]; /* the engine's kernel writes here */
        for (size_t j = 0; j < VALUE_LEN; j++) dst[j] = pattern(thread, i, j);
    }
    fluxon_future *f = NULL;
    rc = fluxon_local_fast_put_commit(c, plan, &f);
    if (rc != FLUXON_OK) FAIL("commit: %s", fluxon_status_string(rc));
    rc = fluxon_future_wait(f, WAIT_MS);
    fluxon_future_free(f);
    if (rc != FLUXON_OK) FAIL("future_wait: %s", fluxon_status_string(rc));
    return 0;
}

static int get_cycle(fluxon_client *c, const fluxon_segment_info *seg, int thread)
{
    char names[N_KEYS][64];
    const char *keys[N_KEYS];
    make_keys(thread, names, keys);
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result res;
    int rc = fluxon_get_start(c, keys, N_KEYS, 0, NULL, 0, &h, &res);
    if (rc != FLUXON_OK) FAIL("get_start(t%d): %s", thread, fluxon_status_string(rc));
    if (!res.all_hit || res.transferable_len != N_KEYS || res.first_miss_index != -1)
        FAIL("get_start(t%d): all_hit %d transferable %llu first_miss %lld", thread, res.all_hit,
             (unsigned long long)res.transferable_len, (long long)res.first_miss_index);
    fluxon_plan *plan = NULL;
    rc = fluxon_get_transfer(c, h, 0, &plan);
    if (rc != FLUXON_OK) FAIL("get_transfer(t%d): %s", thread, fluxon_status_string(rc));
    if (plan->magic != FLUXON_READ_PLAN_MAGIC || plan->count != N_KEYS)
        FAIL("read plan: magic %llx count %llu", (unsigned long long)plan->magic, (unsigned long long)plan->count);
    for (int i = 0; i < N_KEYS; i++) {
        if (!in_segment(seg, plan->value_ptrs[i])) FAIL("read ptr %d outside the segment", i);
        const uint8_t *src = (const uint8_t *)(uintptr_t)plan->value_ptrs[i];
        for (size_t j = 0; j < VALUE_LEN; j++)
            if (src[j] != pattern(thread, i, j))
                FAIL("t%d key %d byte %zu: %u, expected %u", thread, i, j, src[j], pattern(thread, i, j));
    }
    rc = fluxon_release_views(c, plan);
    if (rc != FLUXON_OK) FAIL("release_views: %s", fluxon_status_string(rc));
    return 0;
}

static int worker(int thread)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"external\",\"cluster_id\":\"embed\",\"cluster_token\":\"tok\",\"socket\":\"%s\","
             "\"timeout_ms\":%d,\"log_level\":\"warn\"}", sock_path, WAIT_MS);
    fluxon_client *c = NULL;
    int rc = fluxon_client_open(cfg, &c), bad = 0;
    if (rc != FLUXON_OK) {
        fprintf(stderr, "embed_cycle (C): client_open: %s\n", fluxon_status_string(rc));
        bad = 1;
    }
    fluxon_segment_info seg;
    memset(&seg, 0, sizeof seg);
    size_t n_seg = 0;
    if (!bad && ((rc = fluxon_wait_local_segments_ready(c, WAIT_MS, &seg, 1, &n_seg)) != FLUXON_OK || n_seg != 1)) {
        fprintf(stderr, "embed_cycle (C): segments: %s (%zu)\n", fluxon_status_string(rc), n_seg);
        bad = 1;
    }
    bad = bad || put_cycle(c, &seg, thread) || get_cycle(c, &seg, thread);
    pthread_barrier_wait(&barrier); /* both threads committed (or failed) */
    bad = bad || get_cycle(c, &seg, 1 - thread);
    fluxon_client_close(c);
    return bad;
}

static void *worker_main(void *arg)
{
    return (void *)(intptr_t)worker((int)(intptr_t)arg);
}

int main(int argc, char **argv)
{
    snprintf(sock_dir, sizeof sock_dir, "%s/fluxon-embed-XXXXXX", argc > 1 ? argv[1] : "/tmp");
    if (!mkdtemp(sock_dir)) { perror("mkdtemp"); return 1; }
    snprintf(sock_path, sizeof sock_path, "%s/owner.sock", sock_dir);
    printf("fluxon %s (header %s)\n", fluxon_version(), FLUXON_VERSION_STRING);

    int rc, fail = 1;
    fluxon_node *master = NULL, *owner = NULL;
    rc = fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"embed\",\"cluster_token\":\"tok\","
                           "\"listen\":\"127.0.0.1:0\",\"log_level\":\"warn\"}", &master);
    if (rc != FLUXON_OK || fluxon_node_port(master) == 0) {
        fprintf(stderr, "embed_cycle (C): master: %s\n", fluxon_status_string(rc));
        goto out;
    }
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"owner\",\"cluster_id\":\"embed\",\"cluster_token\":\"tok\",\"node_id\":\"embed-owner\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s\",\"segment_bytes\":\"32MiB\","
             "\"reserve\":{\"grant_bytes\":\"4MiB\"},\"log_level\":\"warn\",\"start_timeout_ms\":%d}",
             (unsigned)fluxon_node_port(master), sock_path, WAIT_MS);
    rc = fluxon_node_start(cfg, &owner);
    if (rc != FLUXON_OK) {
        fprintf(stderr, "embed_cycle (C): owner: %s\n", fluxon_status_string(rc));
        goto out;
    }
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t t[2];
    void *res[2] = {(void *)1, (void *)1};
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, worker_main, (void *)(intptr_t)i) != 0) {
            fprintf(stderr, "embed_cycle (C): pthread_create failed\n");
            return 1; /* the other thread would wait at the barrier forever */
        }
    for (int i = 0; i < 2; i++) pthread_join(t[i], &res[i]);
    pthread_barrier_destroy(&barrier);
    fail = res[0] != NULL || res[1] != NULL;
out:
    fluxon_node_stop(owner);
    fluxon_node_stop(master);
    unlink(sock_path);
    rmdir(sock_dir);
    if (!fail) printf("embed cycle ok (C): 2 threads x %d keys x %d bytes\n", N_KEYS, VALUE_LEN);
    return fail;
}
