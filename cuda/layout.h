/* layout.h — the one definition of where a KV chunk sits, in the pool and in a value.
 * Included by the CPU reference (layout_ref.c) and the CUDA kernels (kernels.cu), so both
 * compute the same offsets (FX_KV_HD marks the functions host+device under nvcc).
 * A chunk = one page of one layer's K, V, or MLA latent: chunk_bytes contiguous bytes.
 * Chunk c of a value (c = layer * kv_factor + kv) sits at byte c * chunk_bytes of it. */
#ifndef FX_CUDA_LAYOUT_H
#define FX_CUDA_LAYOUT_H

#include <stdint.h>
#include "fluxon_cuda.h"

#ifdef __CUDACC__
#define FX_KV_HD static __host__ __device__ __forceinline__
#else
#define FX_KV_HD static inline
#endif

/* Byte offset in the pool of (page, layer, kv). */
FX_KV_HD uint64_t fx_kv_pool_off(const fluxon_kv_layout *l, uint64_t page, uint32_t layer, uint32_t kv)
{
    return page * l->page_stride + (uint64_t)layer * l->layer_stride + (uint64_t)kv * l->kv_stride;
}

/* Byte offset inside a value of (layer, kv). */
FX_KV_HD uint64_t fx_kv_value_off(const fluxon_kv_layout *l, uint32_t layer, uint32_t kv)
{
    return ((uint64_t)layer * l->kv_factor + kv) * l->chunk_bytes;
}

/* A per-layer kind (FLUXON_KV_LAYER_TENSORS*): the pool is one tensor per layer (and K/V). */
FX_KV_HD int fx_kv_per_layer(const fluxon_kv_layout *l)
{
    return l->kind == FLUXON_KV_LAYER_TENSORS || l->kind == FLUXON_KV_LAYER_TENSORS_MLA;
}

/* Address of (page, layer, kv) in a per-layer pool: k_ptrs[layer] (kv 0) or v_ptrs[layer]
 * (kv 1) plus page * page_stride. */
FX_KV_HD uint64_t fx_kv_layer_addr(const fluxon_kv_layout *l, const uint64_t *k_ptrs, const uint64_t *v_ptrs,
                                   uint64_t page, uint32_t layer, uint32_t kv)
{
    return (kv ? v_ptrs[layer] : k_ptrs[layer]) + page * l->page_stride;
}

/* Sets kv_factor and the strides (bytes) of l->kind; 0 on an unknown kind. */
FX_KV_HD int fx_kv_strides(fluxon_kv_layout *l)
{
    uint64_t c = l->chunk_bytes, p = l->num_pages, L = l->num_layers;
    switch (l->kind) {
    case FLUXON_KV_LAYER_FIRST: /* [layer][K|V][page][chunk] */
        l->kv_factor = 2;
        l->page_stride = c;
        l->kv_stride = p * c;
        l->layer_stride = 2 * p * c;
        return 1;
    case FLUXON_KV_PAGE_FIRST: /* [page][layer][K|V][chunk] */
        l->kv_factor = 2;
        l->kv_stride = c;
        l->layer_stride = 2 * c;
        l->page_stride = L * 2 * c;
        return 1;
    case FLUXON_KV_MLA: /* [layer][page][chunk] */
        l->kv_factor = 1;
        l->kv_stride = 0;
        l->page_stride = c;
        l->layer_stride = p * c;
        return 1;
    case FLUXON_KV_LAYER_TENSORS:     /* per layer: a K tensor and a V tensor, each [page][chunk] */
    case FLUXON_KV_LAYER_TENSORS_MLA: /* per layer: one tensor [page][chunk] */
        l->kv_factor = l->kind == FLUXON_KV_LAYER_TENSORS ? 2 : 1;
        l->kv_stride = 0;
        l->layer_stride = 0; /* the layer's tensor comes from the caller's per-layer addresses */
        l->page_stride = c;
        return 1;
    default:
        return 0;
    }
}

/* A layout as fluxon_kv_layout_init makes it (a hand-made one could point outside the pool). */
FX_KV_HD int fx_kv_layout_ok(const fluxon_kv_layout *l)
{
    fluxon_kv_layout chk = *l;
    if (l->num_layers == 0 || l->num_layers > FLUXON_KV_MAX_LAYERS || l->chunk_bytes == 0 || l->num_pages == 0)
        return 0;
    if (!fx_kv_strides(&chk)) return 0;
    return chk.page_stride == l->page_stride && chk.layer_stride == l->layer_stride &&
           chk.kv_stride == l->kv_stride && chk.kv_factor == l->kv_factor &&
           l->value_len == (uint64_t)l->num_layers * l->kv_factor * l->chunk_bytes &&
           l->pool_bytes == l->value_len * l->num_pages;
}

#endif
