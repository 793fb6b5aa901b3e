/* kernels.cu — libfluxon_cuda.so: the KV copy kernels between a paged GPU KV pool (one
 * pool, or one tensor per layer: fluxon_cuda_layers_*) and a plan's values (in a segment registered with fluxon_cuda_register_segments). The offsets
 * come from layout.h, shared with the CPU reference (layout_ref.c); the tests compare the
 * two byte for byte. Built only by `make cuda` (nvcc); the core library never links CUDA. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "fluxon.h"
#include "fluxon_cuda.h"
#include "layout.h"

#define KV_THREADS 256
#define KV_MAX_BLOCKS (1u << 20)

/* Copies chunk_bytes from src to dst with the whole block: 16-byte words when both ends
 * and the length allow it, bytes otherwise. */
static __device__ void kv_copy_chunk(uint8_t *dst, const uint8_t *src, uint64_t len)
{
    if ((((uintptr_t)dst | (uintptr_t)src | len) & 15) == 0) {
        uint4 *d = (uint4 *)dst;
        const uint4 *s = (const uint4 *)src;
        for (uint64_t w = threadIdx.x; w < len / 16; w += blockDim.x) d[w] = s[w];
    } else {
        for (uint64_t b = threadIdx.x; b < len; b += blockDim.x) dst[b] = src[b];
    }
}

/* One job = one chunk (value i, layer, kv) of the selected layers [l0, l0+nl); blocks
 * stride over the jobs. A 0 value (a key the put plan rejected) and a page index outside
 * the pool are skipped: nothing is read or written outside the pool and the values.
 * layer_ptrs NULL: one pool at `pool`; else the per-layer tensors (fluxon_cuda_layers_*):
 * layer_ptrs[0..L) the K (or MLA) tensors, layer_ptrs[L..2L) the V tensors. */
static __global__ void kv_copy_kernel(fluxon_kv_layout l, uint8_t *pool, const uint64_t *layer_ptrs,
                                      const int64_t *page_idx, const uint64_t *value_ptrs, uint64_t n, uint32_t l0,
                                      uint32_t nl, int to_pool)
{
    uint64_t per_value = (uint64_t)nl * l.kv_factor, jobs = n * per_value;
    for (uint64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
        uint64_t i = job / per_value, c = job % per_value;
        uint32_t layer = l0 + (uint32_t)(c / l.kv_factor), kv = (uint32_t)(c % l.kv_factor);
        uint64_t v = value_ptrs[i];
        int64_t page = page_idx[i];
        if (!v || page < 0 || (uint64_t)page >= l.num_pages) continue;
        uint8_t *p = layer_ptrs ? (uint8_t *)(uintptr_t)fx_kv_layer_addr(&l, layer_ptrs, layer_ptrs + l.num_layers,
                                                                         (uint64_t)page, layer, kv)
                                : pool + fx_kv_pool_off(&l, (uint64_t)page, layer, kv);
        uint8_t *val = (uint8_t *)(uintptr_t)v + fx_kv_value_off(&l, layer, kv);
        if (to_pool)
            kv_copy_chunk(p, val, l.chunk_bytes);
        else
            kv_copy_chunk(val, p, l.chunk_bytes);
    }
}

static int kv_cuda_err(const char *what, cudaError_t e)
{
    fprintf(stderr, "fluxon_cuda: %s: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return FLUXON_ERR_UNAVAILABLE;
}

/* k_ptrs NULL: one pool at `pool` (fluxon_cuda_backup/_restore); else host arrays of the
 * per-layer tensors' device addresses (fluxon_cuda_layers_*), staged to the device with
 * the plan's value addresses. */
static int kv_launch(const char *what, const fluxon_kv_layout *l, uint8_t *pool, const uint64_t *k_ptrs,
                     const uint64_t *v_ptrs, const int64_t *page_idx_dev, const fluxon_plan *plan, uint64_t magic,
                     size_t first, size_t n, int32_t layer, int to_pool, void *stream)
{
    int per_layer = k_ptrs != NULL; /* the fluxon_cuda_layers_* entry points refuse a NULL k_ptrs */
    if (!l || (!per_layer && !pool) || !page_idx_dev || !plan) {
        fprintf(stderr, "fluxon_cuda: %s: NULL layout, pool, page_idx_dev or plan\n", what);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (!fx_kv_layout_ok(l)) {
        fprintf(stderr, "fluxon_cuda: %s: the layout was not made by fluxon_kv_layout_init\n", what);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (fx_kv_per_layer(l) != per_layer) {
        fprintf(stderr, "fluxon_cuda: %s: layout kind %u is %s: use %s\n", what, l->kind,
                per_layer ? "one pool (LAYER_FIRST, PAGE_FIRST, MLA)" : "one tensor per layer (LAYER_TENSORS*)",
                per_layer ? "fluxon_cuda_backup / fluxon_cuda_restore" : "fluxon_cuda_layers_backup / _restore");
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (per_layer) {
        if (l->kv_factor == 2 && !v_ptrs) {
            fprintf(stderr, "fluxon_cuda: %s: NULL v_ptrs (FLUXON_KV_LAYER_TENSORS needs one V tensor per layer)\n",
                    what);
            return FLUXON_ERR_INVALID_ARGUMENT;
        }
        for (uint32_t ly = 0; ly < l->num_layers; ly++)
            if (!k_ptrs[ly] || (l->kv_factor == 2 && !v_ptrs[ly])) {
                fprintf(stderr, "fluxon_cuda: %s: layer %u's %s tensor address is 0\n", what, ly,
                        !k_ptrs[ly] ? "K" : "V");
                return FLUXON_ERR_INVALID_ARGUMENT;
            }
    }
    if (plan->magic != magic) {
        fprintf(stderr, "fluxon_cuda: %s: the plan is not a %s plan\n", what, to_pool ? "read" : "put");
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (first > plan->count || n > plan->count - first) {
        fprintf(stderr, "fluxon_cuda: %s: values %zu..%zu are beyond the plan's %llu\n", what, first, first + n,
                (unsigned long long)plan->count);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (layer < -1 || layer >= (int32_t)l->num_layers) {
        fprintf(stderr, "fluxon_cuda: %s: layer %d is outside -1..%u\n", what, layer, l->num_layers - 1);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (n == 0) return FLUXON_OK;
    cudaStream_t s = (cudaStream_t)stream;
    uint64_t *ptrs_dev = NULL, L = l->num_layers, nlp = per_layer ? L * l->kv_factor : 0;
    cudaError_t e = cudaMallocAsync((void **)&ptrs_dev, (n + nlp) * sizeof(uint64_t), s);
    if (e != cudaSuccess) return e == cudaErrorMemoryAllocation ? FLUXON_ERR_NOMEM : kv_cuda_err(what, e);
    /* from pageable memory: staged before the call returns, so the plan (and the caller's
     * k_ptrs / v_ptrs) may go after it. Layout on the device: [values][K tensors][V tensors] */
    e = cudaMemcpyAsync(ptrs_dev, plan->value_ptrs + first, n * sizeof(uint64_t), cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess && per_layer)
        e = cudaMemcpyAsync(ptrs_dev + n, k_ptrs, L * sizeof(uint64_t), cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess && per_layer && l->kv_factor == 2)
        e = cudaMemcpyAsync(ptrs_dev + n + L, v_ptrs, L * sizeof(uint64_t), cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) {
        uint32_t l0 = layer < 0 ? 0 : (uint32_t)layer, nl = layer < 0 ? l->num_layers : 1;
        uint64_t jobs = (uint64_t)n * nl * l->kv_factor;
        unsigned blocks = (unsigned)(jobs < KV_MAX_BLOCKS ? jobs : KV_MAX_BLOCKS);
        kv_copy_kernel<<<blocks, KV_THREADS, 0, s>>>(*l, pool, per_layer ? ptrs_dev + n : NULL, page_idx_dev, ptrs_dev,
                                                     n, l0, nl, to_pool);
        e = cudaGetLastError();
    }
    cudaError_t f = cudaFreeAsync(ptrs_dev, s);
    if (e != cudaSuccess) return kv_cuda_err(what, e);
    if (f != cudaSuccess) return kv_cuda_err(what, f);
    return FLUXON_OK;
}

extern "C" int fluxon_cuda_backup(const fluxon_kv_layout *layout, const void *pool, const int64_t *page_idx_dev,
                                  const fluxon_plan *plan, size_t first, size_t n, void *stream)
{
    return kv_launch("fluxon_cuda_backup", layout, (uint8_t *)pool, NULL, NULL, page_idx_dev, plan,
                     FLUXON_PUT_PLAN_MAGIC, first, n, -1, 0, stream);
}

extern "C" int fluxon_cuda_restore(const fluxon_kv_layout *layout, void *pool, const int64_t *page_idx_dev,
                                   const fluxon_plan *plan, size_t first, size_t n, int32_t layer, void *stream)
{
    return kv_launch("fluxon_cuda_restore", layout, (uint8_t *)pool, NULL, NULL, page_idx_dev, plan,
                     FLUXON_READ_PLAN_MAGIC, first, n, layer, 1, stream);
}

extern "C" int fluxon_cuda_layers_backup(const fluxon_kv_layout *layout, const uint64_t *k_ptrs, const uint64_t *v_ptrs,
                                         const int64_t *page_idx_dev, const fluxon_plan *plan, size_t first, size_t n,
                                         void *stream)
{
    if (!k_ptrs) {
        fprintf(stderr, "fluxon_cuda: fluxon_cuda_layers_backup: NULL k_ptrs\n");
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    return kv_launch("fluxon_cuda_layers_backup", layout, NULL, k_ptrs, v_ptrs, page_idx_dev, plan,
                     FLUXON_PUT_PLAN_MAGIC, first, n, -1, 0, stream);
}

extern "C" int fluxon_cuda_layers_restore(const fluxon_kv_layout *layout, const uint64_t *k_ptrs, const uint64_t *v_ptrs,
                                          const int64_t *page_idx_dev, const fluxon_plan *plan, size_t first, size_t n,
                                          int32_t layer, void *stream)
{
    if (!k_ptrs) {
        fprintf(stderr, "fluxon_cuda: fluxon_cuda_layers_restore: NULL k_ptrs\n");
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    return kv_launch("fluxon_cuda_layers_restore", layout, NULL, k_ptrs, v_ptrs, page_idx_dev, plan,
                     FLUXON_READ_PLAN_MAGIC, first, n, layer, 1, stream);
}
