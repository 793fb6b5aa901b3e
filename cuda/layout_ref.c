/* layout_ref.c — the CPU reference of the KV copy kernels: the same offsets (layout.h),
 * the same skip rules, memcpy per chunk; for one pool (fluxon_kv_*_cpu) and for one
 * tensor per layer (fluxon_kv_layers_*_cpu, SGLang's GPU pool). Engines without a GPU use it as is; the tests
 * check the GPU kernels against it byte for byte. */
#include <string.h>
#include "fluxon.h"
#include "fluxon_cuda.h"
#include "layout.h"
#include "log.h"

int fluxon_kv_layout_init(uint32_t kind, uint32_t num_layers, uint64_t chunk_bytes, uint64_t num_pages,
                          fluxon_kv_layout *layout_p)
{
    if (!layout_p) return FLUXON_ERR_INVALID_ARGUMENT;
    if (kind < FLUXON_KV_LAYER_FIRST || kind > FLUXON_KV_LAYER_TENSORS_MLA) {
        FX_ERROR("kv layout: kind %u is not FLUXON_KV_LAYER_FIRST (1), _PAGE_FIRST (2), _MLA (3), "
                 "_LAYER_TENSORS (4) or _LAYER_TENSORS_MLA (5)", kind);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (num_layers == 0 || num_layers > FLUXON_KV_MAX_LAYERS) {
        FX_ERROR("kv layout: num_layers %u is outside 1..%u", num_layers, FLUXON_KV_MAX_LAYERS);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (chunk_bytes == 0 || num_pages == 0) {
        FX_ERROR("kv layout: chunk_bytes %llu and num_pages %llu must both be at least 1",
                 (unsigned long long)chunk_bytes, (unsigned long long)num_pages);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    uint64_t kvf = kind == FLUXON_KV_MLA || kind == FLUXON_KV_LAYER_TENSORS_MLA ? 1 : 2, value_len, pool;
    if (__builtin_mul_overflow(chunk_bytes, kvf * num_layers, &value_len) ||
        __builtin_mul_overflow(value_len, num_pages, &pool)) {
        FX_ERROR("kv layout: %u layers x %llu pages x %llu-byte chunks overflows 64 bits", num_layers,
                 (unsigned long long)num_pages, (unsigned long long)chunk_bytes);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    fluxon_kv_layout l = {.kind = kind, .num_layers = num_layers, .chunk_bytes = chunk_bytes,
                          .num_pages = num_pages, .value_len = value_len, .pool_bytes = pool};
    fx_kv_strides(&l);
    *layout_p = l;
    return FLUXON_OK;
}

/* Everything a copy needs checked before its first byte moves. per_layer: the call takes
 * one tensor per layer (fluxon_kv_layers_*), so its layout must be of a per-layer kind. */
static int kv_check(const char *what, const fluxon_kv_layout *l, const void *pool, const int64_t *page_idx,
                    const uint64_t *value_ptrs, const uint64_t *value_lens, size_t n, int32_t layer,
                    int per_layer)
{
    if (!l || (n > 0 && (!pool || !page_idx || !value_ptrs))) {
        FX_ERROR("%s: NULL layout, %s, page_idx or value_ptrs", what, per_layer ? "k_ptrs" : "pool");
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (!fx_kv_layout_ok(l)) {
        FX_ERROR("%s: the layout was not made by fluxon_kv_layout_init", what);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (fx_kv_per_layer(l) != per_layer) {
        FX_ERROR("%s: layout kind %u is %s: use %s", what, l->kind,
                 per_layer ? "one pool (LAYER_FIRST, PAGE_FIRST, MLA)" : "one tensor per layer (LAYER_TENSORS*)",
                 per_layer ? "fluxon_kv_backup_cpu / fluxon_kv_restore_cpu" : "fluxon_kv_layers_backup_cpu / "
                 "fluxon_kv_layers_restore_cpu");
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (layer < -1 || layer >= (int32_t)l->num_layers) {
        FX_ERROR("%s: layer %d is outside -1..%u", what, layer, l->num_layers - 1);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++) {
        if (page_idx[i] < 0 || (uint64_t)page_idx[i] >= l->num_pages) {
            FX_ERROR("%s: page_idx[%zu] = %lld is outside the pool's 0..%llu", what, i, (long long)page_idx[i],
                     (unsigned long long)l->num_pages - 1);
            return FLUXON_ERR_INVALID_ARGUMENT;
        }
        if (value_lens && value_ptrs[i] && value_lens[i] < l->value_len) {
            FX_ERROR("%s: value %zu holds %llu bytes, the layout needs %llu", what, i,
                     (unsigned long long)value_lens[i], (unsigned long long)l->value_len);
            return FLUXON_ERR_INVALID_ARGUMENT;
        }
    }
    return FLUXON_OK;
}

/* to_pool 0: pool → values (backup); 1: values → pool (restore). */
static void kv_copy(const fluxon_kv_layout *l, uint8_t *pool, const int64_t *page_idx,
                    const uint64_t *value_ptrs, size_t n, int32_t layer, int to_pool)
{
    uint32_t l0 = layer < 0 ? 0 : (uint32_t)layer, l1 = layer < 0 ? l->num_layers : (uint32_t)layer + 1;
    for (size_t i = 0; i < n; i++) {
        if (!value_ptrs[i]) continue;
        uint8_t *value = (uint8_t *)(uintptr_t)value_ptrs[i];
        for (uint32_t ly = l0; ly < l1; ly++)
            for (uint32_t kv = 0; kv < l->kv_factor; kv++) {
                uint8_t *p = pool + fx_kv_pool_off(l, (uint64_t)page_idx[i], ly, kv);
                uint8_t *v = value + fx_kv_value_off(l, ly, kv);
                if (to_pool)
                    memcpy(p, v, l->chunk_bytes);
                else
                    memcpy(v, p, l->chunk_bytes);
            }
    }
}

int fluxon_kv_backup_cpu(const fluxon_kv_layout *layout, const void *pool, const int64_t *page_idx,
                         const uint64_t *value_ptrs, size_t n)
{
    int rc = kv_check("fluxon_kv_backup_cpu", layout, pool, page_idx, value_ptrs, NULL, n, -1, 0);
    if (rc != FLUXON_OK) return rc;
    kv_copy(layout, (uint8_t *)(uintptr_t)pool, page_idx, value_ptrs, n, -1, 0);
    return FLUXON_OK;
}

int fluxon_kv_restore_cpu(const fluxon_kv_layout *layout, void *pool, const int64_t *page_idx,
                          const uint64_t *value_ptrs, const uint64_t *value_lens, size_t n, int32_t layer)
{
    int rc = kv_check("fluxon_kv_restore_cpu", layout, pool, page_idx, value_ptrs, value_lens, n, layer, 0);
    if (rc != FLUXON_OK) return rc;
    kv_copy(layout, pool, page_idx, value_ptrs, n, layer, 1);
    return FLUXON_OK;
}

/* The per-layer tensors' addresses: k_ptrs (and v_ptrs for MHA) hold num_layers non-zero
 * entries. */
static int kv_check_tensors(const char *what, const fluxon_kv_layout *l, const uint64_t *k_ptrs,
                            const uint64_t *v_ptrs)
{
    if (l->kv_factor == 2 && !v_ptrs) {
        FX_ERROR("%s: NULL v_ptrs (FLUXON_KV_LAYER_TENSORS needs one V tensor per layer)", what);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    for (uint32_t ly = 0; ly < l->num_layers; ly++)
        if (!k_ptrs[ly] || (l->kv_factor == 2 && !v_ptrs[ly])) {
            FX_ERROR("%s: layer %u's %s tensor address is 0", what, ly, !k_ptrs[ly] ? "K" : "V");
            return FLUXON_ERR_INVALID_ARGUMENT;
        }
    return FLUXON_OK;
}

static void kv_layers_copy(const fluxon_kv_layout *l, const uint64_t *k_ptrs, const uint64_t *v_ptrs,
                           const int64_t *page_idx, const uint64_t *value_ptrs, size_t n, int32_t layer, int to_pool)
{
    uint32_t l0 = layer < 0 ? 0 : (uint32_t)layer, l1 = layer < 0 ? l->num_layers : (uint32_t)layer + 1;
    for (size_t i = 0; i < n; i++) {
        if (!value_ptrs[i]) continue;
        uint8_t *value = (uint8_t *)(uintptr_t)value_ptrs[i];
        for (uint32_t ly = l0; ly < l1; ly++)
            for (uint32_t kv = 0; kv < l->kv_factor; kv++) {
                uint8_t *p = (uint8_t *)(uintptr_t)fx_kv_layer_addr(l, k_ptrs, v_ptrs, (uint64_t)page_idx[i], ly, kv);
                uint8_t *v = value + fx_kv_value_off(l, ly, kv);
                if (to_pool)
                    memcpy(p, v, l->chunk_bytes);
                else
                    memcpy(v, p, l->chunk_bytes);
            }
    }
}

int fluxon_kv_layers_backup_cpu(const fluxon_kv_layout *layout, const uint64_t *k_ptrs, const uint64_t *v_ptrs,
                                const int64_t *page_idx, const uint64_t *value_ptrs, size_t n)
{
    const char *what = "fluxon_kv_layers_backup_cpu";
    int rc = kv_check(what, layout, k_ptrs, page_idx, value_ptrs, NULL, n, -1, 1);
    if (rc == FLUXON_OK && n > 0) rc = kv_check_tensors(what, layout, k_ptrs, v_ptrs);
    if (rc != FLUXON_OK) return rc;
    kv_layers_copy(layout, k_ptrs, v_ptrs, page_idx, value_ptrs, n, -1, 0);
    return FLUXON_OK;
}

int fluxon_kv_layers_restore_cpu(const fluxon_kv_layout *layout, const uint64_t *k_ptrs, const uint64_t *v_ptrs,
                                 const int64_t *page_idx, const uint64_t *value_ptrs, const uint64_t *value_lens,
                                 size_t n, int32_t layer)
{
    const char *what = "fluxon_kv_layers_restore_cpu";
    int rc = kv_check(what, layout, k_ptrs, page_idx, value_ptrs, value_lens, n, layer, 1);
    if (rc == FLUXON_OK && n > 0) rc = kv_check_tensors(what, layout, k_ptrs, v_ptrs);
    if (rc != FLUXON_OK) return rc;
    kv_layers_copy(layout, k_ptrs, v_ptrs, page_idx, value_ptrs, n, layer, 1);
    return FLUXON_OK;
}
