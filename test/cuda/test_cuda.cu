/* test_cuda.cu — GPU checks of the KV copy kernels (`make cuda` builds and runs it):
 *  1. kernels vs the CPU reference, byte-exact, every layout, odd chunks, random pages,
 *     per-layer restore; the per-layer pools (one tensor per layer and K/V) likewise;
 *  2. a real owner's segment registered with CUDA, and the engine's whole cycle:
 *     put_start → backup kernel → commit → get_start → get_transfer → restore kernel;
 *  3. with --bench: backup/restore GB/s for 64 pages × 4.5 MiB and 1,024 pages × 64 KiB
 *     next to one cudaMemcpyAsync of the same bytes from pinned memory.
 * Without a GPU it prints why and exits 0 (SKIP): the CPU side is tested by make test. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vector>
#include <algorithm>
#include <string>

#include "fluxon.h"
#include "fluxon_cuda.h"

static int failures;
#define CHECK(cond, ...)                                                                         \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                 \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fprintf(stderr, "\n");                                                               \
            failures++;                                                                          \
            return;                                                                              \
        }                                                                                        \
    } while (0)
#define CU(x) CHECK((x) == cudaSuccess, "%s", #x)

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)next_rand();
}

/* A plan blob of `count` values pointing at `ptrs` (for the kernel tests' own buffers). */
static fluxon_plan *fake_plan(uint64_t magic, const uint64_t *ptrs, size_t count)
{
    fluxon_plan *p = (fluxon_plan *)malloc(sizeof(fluxon_plan) + count * sizeof(uint64_t));
    p->magic = magic;
    p->count = count;
    memcpy(p->value_ptrs, ptrs, count * sizeof(uint64_t));
    return p;
}

static void kernels_match_reference(uint32_t kind, uint32_t L, uint64_t C, uint64_t P, size_t n)
{
    fluxon_kv_layout l;
    CHECK(fluxon_kv_layout_init(kind, L, C, P, &l) == FLUXON_OK, "layout");
    std::vector<uint8_t> pool(l.pool_bytes), ref_vals(n * l.value_len), got(l.pool_bytes), ref_pool;
    fill(pool.data(), pool.size());
    std::vector<int64_t> idx(n);
    for (size_t i = 0; i < n; i++) idx[i] = (int64_t)i * 3 % (int64_t)P; /* distinct while n*3 < P or P prime */
    uint8_t *vals_h = NULL, *pool_d = NULL;
    int64_t *idx_d = NULL;
    CU(cudaHostAlloc((void **)&vals_h, n * l.value_len, cudaHostAllocMapped | cudaHostAllocPortable));
    CU(cudaMalloc((void **)&pool_d, l.pool_bytes));
    CU(cudaMalloc((void **)&idx_d, n * sizeof(int64_t)));
    CU(cudaMemcpy(pool_d, pool.data(), l.pool_bytes, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(idx_d, idx.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    std::vector<uint64_t> ptrs(n), ref_ptrs(n);
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = (uint64_t)(uintptr_t)(vals_h + i * l.value_len);
        ref_ptrs[i] = (uint64_t)(uintptr_t)(ref_vals.data() + i * l.value_len);
    }
    memset(vals_h, 0, n * l.value_len);
    fluxon_plan *put = fake_plan(FLUXON_PUT_PLAN_MAGIC, ptrs.data(), n);
    CHECK(fluxon_cuda_backup(&l, pool_d, idx_d, put, 0, n, NULL) == FLUXON_OK, "backup launch");
    CU(cudaDeviceSynchronize());
    CHECK(fluxon_kv_backup_cpu(&l, pool.data(), idx.data(), ref_ptrs.data(), n) == FLUXON_OK, "cpu backup");
    CHECK(memcmp(vals_h, ref_vals.data(), n * l.value_len) == 0, "kind %u L %u C %llu: backup differs from the CPU reference",
          kind, L, (unsigned long long)C);
    /* restore new values, layer by layer (and all layers), into the pool; compare pools */
    fill(vals_h, n * l.value_len);
    memcpy(ref_vals.data(), vals_h, n * l.value_len);
    ref_pool = pool;
    fluxon_plan *rd = fake_plan(FLUXON_READ_PLAN_MAGIC, ptrs.data(), n);
    for (int32_t ly = -1; ly < (int32_t)L; ly += (L > 2 ? 2 : 1)) {
        CHECK(fluxon_cuda_restore(&l, pool_d, idx_d, rd, 0, n, ly, NULL) == FLUXON_OK, "restore launch");
        CHECK(fluxon_kv_restore_cpu(&l, ref_pool.data(), idx.data(), ref_ptrs.data(), NULL, n, ly) == FLUXON_OK, "cpu");
    }
    CU(cudaMemcpy(got.data(), pool_d, l.pool_bytes, cudaMemcpyDeviceToHost));
    CHECK(got == ref_pool, "kind %u L %u C %llu: restore differs from the CPU reference", kind, L, (unsigned long long)C);
    CHECK(fluxon_cuda_restore(&l, pool_d, idx_d, put, 0, n, -1, NULL) == FLUXON_ERR_INVALID_ARGUMENT, "put plan refused");
    CHECK(fluxon_cuda_backup(&l, pool_d, idx_d, put, 1, n, NULL) == FLUXON_ERR_INVALID_ARGUMENT, "beyond the plan");
    free(put);
    free(rd);
    cudaFreeHost(vals_h);
    cudaFree(pool_d);
    cudaFree(idx_d);
    printf("ok   kernels = CPU reference: kind %u, %u layers, %llu-byte chunks, %zu pages\n", kind, L,
           (unsigned long long)C, n);
}

/* The per-layer kernels (fluxon_cuda_layers_*: one device tensor per layer and K/V, SGLang's
 * GPU pool) against the CPU reference fluxon_kv_layers_*_cpu on host copies, byte-exact:
 * backup, then restore layer by layer and all layers; bad input refused. */
static void layers_match_reference(uint32_t kind, uint32_t L, uint64_t C, uint64_t P, size_t n)
{
    fluxon_kv_layout l;
    CHECK(fluxon_kv_layout_init(kind, L, C, P, &l) == FLUXON_OK, "layout");
    uint32_t kvf = l.kv_factor;
    std::vector<std::vector<uint8_t>> host(2 * L, std::vector<uint8_t>(P * C));
    std::vector<uint8_t *> dev(2 * L, nullptr);
    std::vector<uint64_t> kd(L), vd(L), kh(L), vh(L);
    for (uint32_t t = 0; t < kvf * L; t++) {
        fill(host[t].data(), P * C);
        CU(cudaMalloc((void **)&dev[t], P * C));
        CU(cudaMemcpy(dev[t], host[t].data(), P * C, cudaMemcpyHostToDevice));
    }
    for (uint32_t ly = 0; ly < L; ly++) {
        kd[ly] = (uint64_t)(uintptr_t)dev[ly], kh[ly] = (uint64_t)(uintptr_t)host[ly].data();
        vd[ly] = kvf == 2 ? (uint64_t)(uintptr_t)dev[L + ly] : 0;
        vh[ly] = kvf == 2 ? (uint64_t)(uintptr_t)host[L + ly].data() : 0;
    }
    std::vector<int64_t> idx(n);
    for (size_t i = 0; i < n; i++) idx[i] = (int64_t)i * 3 % (int64_t)P;
    int64_t *idx_d = NULL;
    uint8_t *vals_h = NULL;
    std::vector<uint8_t> ref_vals(n * l.value_len);
    CU(cudaMalloc((void **)&idx_d, n * sizeof(int64_t)));
    CU(cudaMemcpy(idx_d, idx.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    CU(cudaHostAlloc((void **)&vals_h, n * l.value_len, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(vals_h, 0, n * l.value_len);
    std::vector<uint64_t> ptrs(n), ref_ptrs(n);
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = (uint64_t)(uintptr_t)(vals_h + i * l.value_len);
        ref_ptrs[i] = (uint64_t)(uintptr_t)(ref_vals.data() + i * l.value_len);
    }
    const uint64_t *vdp = kvf == 2 ? vd.data() : NULL, *vhp = kvf == 2 ? vh.data() : NULL;
    fluxon_plan *put = fake_plan(FLUXON_PUT_PLAN_MAGIC, ptrs.data(), n);
    CHECK(fluxon_cuda_layers_backup(&l, kd.data(), vdp, idx_d, put, 0, n, NULL) == FLUXON_OK, "layers backup launch");
    CU(cudaDeviceSynchronize());
    CHECK(fluxon_kv_layers_backup_cpu(&l, kh.data(), vhp, idx.data(), ref_ptrs.data(), n) == FLUXON_OK, "cpu");
    CHECK(memcmp(vals_h, ref_vals.data(), n * l.value_len) == 0, "kind %u L %u C %llu: layers backup differs", kind, L,
          (unsigned long long)C);
    fill(vals_h, n * l.value_len);
    memcpy(ref_vals.data(), vals_h, n * l.value_len);
    fluxon_plan *rd = fake_plan(FLUXON_READ_PLAN_MAGIC, ptrs.data(), n);
    for (int32_t ly = -1; ly < (int32_t)L; ly += (L > 2 ? 2 : 1)) {
        CHECK(fluxon_cuda_layers_restore(&l, kd.data(), vdp, idx_d, rd, 0, n, ly, NULL) == FLUXON_OK, "restore");
        CHECK(fluxon_kv_layers_restore_cpu(&l, kh.data(), vhp, idx.data(), ref_ptrs.data(), NULL, n, ly) == FLUXON_OK,
              "cpu restore");
    }
    CU(cudaDeviceSynchronize());
    std::vector<uint8_t> got(P * C);
    for (uint32_t t = 0; t < kvf * L; t++) {
        CU(cudaMemcpy(got.data(), dev[t], P * C, cudaMemcpyDeviceToHost));
        CHECK(got == host[t], "kind %u tensor %u: layers restore differs from the CPU reference", kind, t);
    }
    std::vector<uint64_t> zero_k(kd);
    zero_k[L - 1] = 0;
    CHECK(fluxon_cuda_layers_restore(&l, zero_k.data(), vdp, idx_d, rd, 0, n, -1, NULL) == FLUXON_ERR_INVALID_ARGUMENT,
          "a zero tensor address");
    CHECK(fluxon_cuda_layers_restore(&l, kd.data(), vdp, idx_d, put, 0, n, -1, NULL) == FLUXON_ERR_INVALID_ARGUMENT,
          "put plan refused");
    CHECK(fluxon_cuda_backup(&l, dev[0], idx_d, put, 0, n, NULL) == FLUXON_ERR_INVALID_ARGUMENT,
          "a per-layer kind to the one-pool call");
    free(put);
    free(rd);
    cudaFreeHost(vals_h);
    cudaFree(idx_d);
    for (uint32_t t = 0; t < kvf * L; t++) cudaFree(dev[t]);
    printf("ok   layers kernels = CPU reference: kind %u, %u layers, %llu-byte chunks, %zu pages\n", kind, L,
           (unsigned long long)C, n);
}

/* An embedded master + owner (segment_bytes) in dir, and a client on the owner. */
struct cluster {
    fluxon_node *master, *owner;
    fluxon_client *client;
    char dir[64];
};
static int cluster_up(cluster *c, const char *segment_bytes)
{
    memset(c, 0, sizeof *c);
    strcpy(c->dir, "/tmp/fluxon-cuda-XXXXXX");
    if (!mkdtemp(c->dir)) return -1;
    char cfg[1024];
    if (fluxon_node_start("{\"role\":\"master\",\"cluster_id\":\"cu\",\"cluster_token\":\"tok\","
                          "\"listen\":\"127.0.0.1:0\",\"log_level\":\"warn\"}", &c->master) != FLUXON_OK)
        return -1;
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"owner\",\"cluster_id\":\"cu\",\"cluster_token\":\"tok\",\"node_id\":\"gpu0\","
             "\"master\":\"127.0.0.1:%u\",\"socket\":\"%s/s.sock\",\"segment_bytes\":\"%s\","
             "\"reserve\":{\"grant_bytes\":\"64MiB\"},\"log_level\":\"warn\"}",
             fluxon_node_port(c->master), c->dir, segment_bytes);
    if (fluxon_node_start(cfg, &c->owner) != FLUXON_OK) return -1;
    snprintf(cfg, sizeof cfg, "{\"role\":\"external\",\"cluster_id\":\"cu\",\"cluster_token\":\"tok\","
             "\"socket\":\"%s/s.sock\",\"timeout_ms\":10000,\"log_level\":\"warn\"}", c->dir);
    return fluxon_client_open(cfg, &c->client) == FLUXON_OK ? 0 : -1;
}
static void cluster_down(cluster *c)
{
    fluxon_client_close(c->client);
    fluxon_node_stop(c->owner);
    fluxon_node_stop(c->master);
    char path[128];
    snprintf(path, sizeof path, "%s/s.sock", c->dir);
    unlink(path);
    rmdir(c->dir);
}

static void full_cycle_through_a_registered_segment(uint32_t kind)
{
    cluster c;
    CHECK(cluster_up(&c, "256MiB") == 0, "cluster up");
    CHECK(fluxon_cuda_register_segments(c.client, 0) == FLUXON_OK, "register");
    CHECK(fluxon_cuda_register_segments(c.client, 0) == FLUXON_OK, "second register: no-op");
    const size_t n = 16;
    fluxon_kv_layout l;
    CHECK(fluxon_kv_layout_init(kind, 8, 4096, 64, &l) == FLUXON_OK, "layout");
    std::vector<uint8_t> pool(l.pool_bytes), got(l.pool_bytes);
    fill(pool.data(), pool.size());
    std::vector<int64_t> idx(n);
    for (size_t i = 0; i < n; i++) idx[i] = (int64_t)((i * 5 + 1) % 64);
    uint8_t *pool_d;
    int64_t *idx_d;
    CU(cudaMalloc((void **)&pool_d, l.pool_bytes));
    CU(cudaMalloc((void **)&idx_d, n * sizeof(int64_t)));
    CU(cudaMemcpy(pool_d, pool.data(), l.pool_bytes, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(idx_d, idx.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    char names[16][32];
    const char *keys[16];
    for (size_t i = 0; i < n; i++) snprintf(names[i], 32, "gpu%u/%zu", kind, i), keys[i] = names[i];
    fluxon_plan *plan = NULL;
    CHECK(fluxon_local_fast_put_start(c.client, keys, n, l.value_len, NULL, &plan, NULL) == FLUXON_OK, "put_start");
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    CHECK(fluxon_cuda_backup(&l, pool_d, idx_d, plan, 0, n, s) == FLUXON_OK, "backup");
    CU(cudaStreamSynchronize(s)); /* the contract: complete before commit */
    fluxon_future *f = NULL;
    CHECK(fluxon_local_fast_put_commit(c.client, plan, &f) == FLUXON_OK, "commit");
    CHECK(fluxon_future_wait(f, 10000) == FLUXON_OK, "published");
    fluxon_future_free(f);
    CU(cudaMemset(pool_d, 0, l.pool_bytes));
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    CHECK(fluxon_get_start(c.client, keys, n, 1, NULL, 0, &h, &r) == FLUXON_OK && r.all_hit, "get_start");
    fluxon_plan *rp = NULL;
    CHECK(fluxon_get_transfer(c.client, h, 0, &rp) == FLUXON_OK, "transfer");
    for (int32_t ly = 0; ly < 8; ly++) CHECK(fluxon_cuda_restore(&l, pool_d, idx_d, rp, 0, n, ly, s) == FLUXON_OK, "restore");
    CU(cudaStreamSynchronize(s)); /* before the views go */
    CHECK(fluxon_release_views(c.client, rp) == FLUXON_OK, "release");
    CU(cudaMemcpy(got.data(), pool_d, l.pool_bytes, cudaMemcpyDeviceToHost));
    std::vector<uint8_t> want(l.pool_bytes, 0);
    std::vector<uint64_t> ptrs(n);
    std::vector<uint8_t> vals(n * l.value_len);
    for (size_t i = 0; i < n; i++) ptrs[i] = (uint64_t)(uintptr_t)(vals.data() + i * l.value_len);
    fluxon_kv_backup_cpu(&l, pool.data(), idx.data(), ptrs.data(), n);
    fluxon_kv_restore_cpu(&l, want.data(), idx.data(), ptrs.data(), NULL, n, -1);
    CHECK(got == want, "kind %u: the cycle through the owner's segment is not byte-exact", kind);
    CHECK(fluxon_cuda_unregister_segments(c.client) == FLUXON_OK, "unregister");
    cudaStreamDestroy(s);
    cudaFree(pool_d);
    cudaFree(idx_d);
    cluster_down(&c);
    printf("ok   registered segment, put_start -> backup -> commit -> get -> restore: kind %u\n", kind);
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* GB/s of backup and restore of n values of value_len (layer_first, 64 KiB chunks or
 * 1 KiB chunks) through a registered owner segment, next to one pinned cudaMemcpyAsync. */
static void bench(size_t n, uint32_t layers, uint64_t chunk)
{
    cluster c;
    CHECK(cluster_up(&c, "1GiB") == 0, "cluster up");
    CHECK(fluxon_cuda_register_segments(c.client, 0) == FLUXON_OK, "register");
    fluxon_kv_layout l;
    CHECK(fluxon_kv_layout_init(FLUXON_KV_LAYER_FIRST, layers, chunk, n, &l) == FLUXON_OK, "layout");
    uint8_t *pool_d, *pinned;
    int64_t *idx_d;
    std::vector<int64_t> idx(n);
    for (size_t i = 0; i < n; i++) idx[i] = (int64_t)i;
    CU(cudaMalloc((void **)&pool_d, l.pool_bytes));
    CU(cudaMalloc((void **)&idx_d, n * sizeof(int64_t)));
    CU(cudaMemcpy(idx_d, idx.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    CU(cudaHostAlloc((void **)&pinned, l.pool_bytes, cudaHostAllocDefault));
    std::vector<std::string> names(n);
    std::vector<const char *> keys(n);
    for (size_t i = 0; i < n; i++) names[i] = "bench/" + std::to_string(i), keys[i] = names[i].c_str();
    fluxon_plan *plan = NULL;
    CHECK(fluxon_local_fast_put_start(c.client, keys.data(), n, l.value_len, NULL, &plan, NULL) == FLUXON_OK,
          "put_start of %zu x %llu bytes", n, (unsigned long long)l.value_len);
    fluxon_plan *rd = fake_plan(FLUXON_READ_PLAN_MAGIC, plan->value_ptrs, n); /* same registered slots */
    cudaStream_t s;
    cudaEvent_t e0, e1;
    CU(cudaStreamCreate(&s));
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    std::vector<double> t[4];
    for (int rep = 0; rep < 11; rep++) {
        float ms;
        cudaEventRecord(e0, s), fluxon_cuda_backup(&l, pool_d, idx_d, plan, 0, n, s), cudaEventRecord(e1, s);
        cudaEventSynchronize(e1), cudaEventElapsedTime(&ms, e0, e1), t[0].push_back(ms);
        cudaEventRecord(e0, s), fluxon_cuda_restore(&l, pool_d, idx_d, rd, 0, n, -1, s), cudaEventRecord(e1, s);
        cudaEventSynchronize(e1), cudaEventElapsedTime(&ms, e0, e1), t[1].push_back(ms);
        cudaEventRecord(e0, s), cudaMemcpyAsync(pinned, pool_d, l.pool_bytes, cudaMemcpyDeviceToHost, s);
        cudaEventRecord(e1, s), cudaEventSynchronize(e1), cudaEventElapsedTime(&ms, e0, e1), t[2].push_back(ms);
        cudaEventRecord(e0, s), cudaMemcpyAsync(pool_d, pinned, l.pool_bytes, cudaMemcpyHostToDevice, s);
        cudaEventRecord(e1, s), cudaEventSynchronize(e1), cudaEventElapsedTime(&ms, e0, e1), t[3].push_back(ms);
    }
    double gb = (double)l.pool_bytes / 1e9;
    printf("bench %zu pages x %.2f MiB: backup %.1f GB/s (pinned D2H memcpy %.1f GB/s), restore %.1f GB/s "
           "(pinned H2D memcpy %.1f GB/s); medians of 11\n", n, l.value_len / 1048576.0, gb / (median(t[0]) / 1e3),
           gb / (median(t[2]) / 1e3), gb / (median(t[1]) / 1e3), gb / (median(t[3]) / 1e3));
    fluxon_put_abort(c.client, plan);
    free(rd);
    cudaStreamDestroy(s);
    cudaFree(pool_d), cudaFree(idx_d), cudaFreeHost(pinned);
    cluster_down(&c);
}

int main(int argc, char **argv)
{
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        printf("SKIP GPU tests: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return 0;
    }
    const uint32_t kinds[3] = {FLUXON_KV_LAYER_FIRST, FLUXON_KV_PAGE_FIRST, FLUXON_KV_MLA};
    for (int k = 0; k < 3; k++) {
        kernels_match_reference(kinds[k], 4, 4096, 17, 5);
        kernels_match_reference(kinds[k], 3, 1000, 13, 4); /* odd chunk: the byte path */
        kernels_match_reference(kinds[k], 1, 17, 7, 7);
        full_cycle_through_a_registered_segment(kinds[k]);
    }
    layers_match_reference(FLUXON_KV_LAYER_TENSORS, 4, 16 * 8 * 128 * 2, 9, 5); /* SGLang MHA, page 16 */
    layers_match_reference(FLUXON_KV_LAYER_TENSORS, 3, 1000, 13, 4);            /* odd chunk: the byte path */
    layers_match_reference(FLUXON_KV_LAYER_TENSORS_MLA, 5, 16 * 576 * 2, 7, 5);  /* SGLang MLA */
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        bench(64, 36, 64 * 1024); /* 64 pages x 4.5 MiB */
        bench(1024, 32, 1024);    /* 1,024 pages x 64 KiB */
    }
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
