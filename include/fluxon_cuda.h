/* fluxon_cuda.h — optional: a paged KV cache's pages ↔ a plan's values, on the GPU and on
 * the CPU. Include after fluxon.h. The conventions of fluxon.h hold (FLUXON_OK or a
 * negative FLUXON_ERR_*, outputs written only on success, sizes in bytes).
 *
 * Three parts:
 *  1. The layout (fluxon_kv_layout): where page p's bytes of layer l (K or V) sit in the
 *     engine's KV pool, and where they sit inside one value. Defined once, in
 *     cuda/layout.h; the GPU kernels and the CPU reference share that code.
 *  2. The CPU reference (fluxon_kv_backup_cpu / fluxon_kv_restore_cpu, in the core
 *     library, no CUDA needed): the exact gather/scatter the kernels do. Tests use it
 *     everywhere; engines without a GPU use it as is.
 *  3. CUDA: fluxon_cuda_register_segments (core library; loads the CUDA driver with dlopen
 *     at that call, so nothing links CUDA) and the copy kernels fluxon_cuda_backup /
 *     fluxon_cuda_restore (libfluxon_cuda.so, built by `make cuda` with nvcc).
 *
 * One value = one page of the engine's cache, all layers. Its byte layout is
 *     [layer 0 K][layer 0 V][layer 1 K][layer 1 V] ... (MHA; chunk_bytes each)
 *     [layer 0][layer 1] ...                        (MLA: one latent chunk per layer)
 * so value_len = num_layers * kv_factor * chunk_bytes (kv_factor 2 for MHA, 1 for MLA),
 * the same for every layout of the pool, so an engine may change its pool layout without
 * invalidating what is cached. The pool layouts (chunk = one page of one layer's K or V):
 *     FLUXON_KV_LAYER_FIRST  [layer][K|V][page][chunk_bytes]
 *     FLUXON_KV_PAGE_FIRST   [page][layer][K|V][chunk_bytes]  (a page is one contiguous value)
 *     FLUXON_KV_MLA          [layer][page][chunk_bytes]
 * and the per-layer pools, one tensor per layer (and per K/V) at addresses the caller passes
 * in arrays (SGLang's GPU pool: MHATokenToKVPool's k_buffer[l] / v_buffer[l] of shape
 * [tokens, heads, head_dim], MLATokenToKVPool's kv_buffer[l] of [tokens, 1, latent dim];
 * page p is tokens p*page_size .. (p+1)*page_size-1, so chunk_bytes = page_size * heads *
 * head_dim * dtype bytes):
 *     FLUXON_KV_LAYER_TENSORS      K tensor l and V tensor l, each [page][chunk_bytes]
 *     FLUXON_KV_LAYER_TENSORS_MLA  tensor l [page][chunk_bytes]
 * copied by fluxon_kv_layers_* / fluxon_cuda_layers_* (the single-pool calls refuse them,
 * and the per-layer calls refuse the single-pool kinds). The value is the same as above, so
 * a page backed up from a per-layer pool restores into a PAGE_FIRST pool and back.
 */
#ifndef FLUXON_CUDA_H
#define FLUXON_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include "fluxon.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLUXON_KV_LAYER_FIRST 1u
#define FLUXON_KV_PAGE_FIRST  2u
#define FLUXON_KV_MLA         3u
#define FLUXON_KV_LAYER_TENSORS     4u /* per layer: a K tensor and a V tensor */
#define FLUXON_KV_LAYER_TENSORS_MLA 5u /* per layer: one latent tensor */

#define FLUXON_KV_MAX_LAYERS  4096u

typedef struct fluxon_kv_layout {
    uint32_t kind;         /* FLUXON_KV_LAYER_FIRST, _PAGE_FIRST, _MLA, _LAYER_TENSORS(_MLA) */
    uint32_t num_layers;   /* 1..FLUXON_KV_MAX_LAYERS */
    uint64_t chunk_bytes;  /* one page of one layer's K (or V, or MLA latent); >= 1 */
    uint64_t num_pages;    /* pages in the pool; page indices are 0..num_pages-1 */
    /* derived by fluxon_kv_layout_init; do not set by hand: */
    uint32_t kv_factor;    /* 2 (K and V) or 1 (MLA) */
    uint32_t reserved;
    uint64_t page_stride;  /* pool byte offset of (page, layer, kv) = page*page_stride + */
    uint64_t layer_stride; /*   layer*layer_stride + kv*kv_stride (per-layer kinds: page *
                              page_stride inside tensor (layer, kv); layer/kv_stride 0) */
    uint64_t kv_stride;
    uint64_t value_len;    /* bytes of one value: num_layers * kv_factor * chunk_bytes */
    uint64_t pool_bytes;   /* bytes of the whole pool (per-layer kinds: of all its tensors
                              together; each tensor is num_pages * chunk_bytes) */
} fluxon_kv_layout;

/* Fills *layout_p for a pool of num_pages pages. No round trip; thread-safe.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL, unknown kind (not 1..5), num_layers 0 or above
 * FLUXON_KV_MAX_LAYERS, chunk_bytes or num_pages 0, or a pool size that overflows 64 bits;
 * logged naming the value). */
int fluxon_kv_layout_init(uint32_t kind, uint32_t num_layers, uint64_t chunk_bytes,
                          uint64_t num_pages, fluxon_kv_layout *layout_p);

/* CPU reference. For each i < n: value_ptrs[i] (an address of a plan, e.g.
 * plan->value_ptrs) ↔ page page_idx[i] of pool (the pool's base address, layout->pool_bytes
 * bytes). value_ptrs[i] == 0 (a key a put plan rejected) is skipped.
 *  backup:  copies every layer of the pages into the values (value_len bytes each).
 *  restore: copies the values into the pages; layer -1 copies every layer, 0..num_layers-1
 *           only that layer's chunks (to overlap loading with compute).
 *  value_lens  NULL, or n lengths (fluxon_plan_value_lens): a value shorter than
 *              layout->value_len is refused before anything is copied (restore only).
 * Everything is validated before the first byte is copied. No round trip; thread-safe for
 * disjoint destinations. Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL pointer with
 * n > 0, a per-layer kind (use fluxon_kv_layers_*), a page index outside 0..num_pages-1,
 * a layer out of range, a value shorter than value_len; logged naming the index and the
 * value). */
int fluxon_kv_backup_cpu(const fluxon_kv_layout *layout, const void *pool,
                         const int64_t *page_idx, const uint64_t *value_ptrs, size_t n);
int fluxon_kv_restore_cpu(const fluxon_kv_layout *layout, void *pool, const int64_t *page_idx,
                          const uint64_t *value_ptrs, const uint64_t *value_lens, size_t n,
                          int32_t layer);

/* CPU reference for the per-layer pools (FLUXON_KV_LAYER_TENSORS / _MLA): as
 * fluxon_kv_backup_cpu / fluxon_kv_restore_cpu, the pool given as one tensor per layer.
 *  layout      made by fluxon_kv_layout_init with a per-layer kind; num_pages = pages each
 *              tensor holds (chunk_bytes each, contiguous: a tensor is num_pages *
 *              chunk_bytes bytes).
 *  k_ptrs      layout->num_layers host addresses (uint64): the base of layer l's K tensor
 *              (MLA: its latent tensor). Borrowed for the call; every entry non-zero.
 *  v_ptrs      layout->num_layers addresses of the V tensors (LAYER_TENSORS; every entry
 *              non-zero); ignored and may be NULL for LAYER_TENSORS_MLA.
 *  page_idx    n page indices (0..num_pages-1), the same index in every tensor.
 *  value_ptrs  n value addresses (a plan's value_ptrs; 0 = a rejected key, skipped); each
 *              value is layout->value_len bytes: [l0 K][l0 V][l1 K]... (MLA [l0][l1]...).
 *  value_lens  (restore) NULL or n stored lengths: a value shorter than value_len is refused.
 *  layer       (restore) -1: every layer; 0..num_layers-1: that layer's K and V chunks only.
 * The caller owns every buffer; nothing is kept after the call. Blocks only for the memcpy
 * (no round trip); thread-safe for disjoint destinations. Everything (the kind, each
 * address, each index, each length, the layer) is checked before the first byte moves.
 * Returns FLUXON_OK (n = 0: nothing copied); FLUXON_ERR_INVALID_ARGUMENT (NULL layout, a
 * single-pool kind, NULL k_ptrs / v_ptrs (MHA) / page_idx / value_ptrs with n > 0, a zero
 * tensor address, a page index outside the tensors, a layer out of range, a short value;
 * logged naming the layer, index or value). */
int fluxon_kv_layers_backup_cpu(const fluxon_kv_layout *layout, const uint64_t *k_ptrs,
                                const uint64_t *v_ptrs, const int64_t *page_idx,
                                const uint64_t *value_ptrs, size_t n);
int fluxon_kv_layers_restore_cpu(const fluxon_kv_layout *layout, const uint64_t *k_ptrs,
                                 const uint64_t *v_ptrs, const int64_t *page_idx,
                                 const uint64_t *value_ptrs, const uint64_t *value_lens,
                                 size_t n, int32_t layer);

/* Registers every segment this client has mapped (the owner's, see
 * fluxon_wait_local_segments_ready) with CUDA as portable, device-mapped pinned memory
 * (cuMemHostRegister PORTABLE|DEVICEMAP), in the calling thread's current CUDA context —
 * or, when the thread has none, device 0's primary context (what the CUDA runtime uses).
 * After it, plan addresses are directly usable by kernels (unified addressing) and
 * device↔segment copies run at DMA speed. Once per client: a second call returns
 * FLUXON_OK and does nothing. fluxon_client_close unregisters; or call unregister.
 * The CUDA driver (libcuda.so.1) is loaded with dlopen at the first call.
 * Blocks while the driver pins the pages (about 0.1 s per GiB).
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL client, flags not 0);
 * FLUXON_ERR_UNAVAILABLE (no CUDA driver, no device, or the driver refused: the message
 * says which, with the driver's error name); FLUXON_ERR_STALE (the owner restarted). */
int fluxon_cuda_register_segments(fluxon_client *client, unsigned flags);
/* Undoes fluxon_cuda_register_segments (not registered: FLUXON_OK, nothing done). Call it
 * before destroying the CUDA context the segments were registered in. Returns FLUXON_OK;
 * FLUXON_ERR_INVALID_ARGUMENT (NULL); FLUXON_ERR_UNAVAILABLE (the driver refused). */
int fluxon_cuda_unregister_segments(fluxon_client *client);

/* GPU copies (libfluxon_cuda.so; link -lfluxon_cuda -lfluxon). One kernel launch per call
 * on `stream` (a cudaStream_t; NULL = the legacy default stream); asynchronous: the call
 * returns once the work is queued.
 *  pool          device address of the pool (layout->pool_bytes bytes).
 *  page_idx_dev  n page indices in device memory, read by the kernel.
 *  plan          a put plan (backup) or a read plan (restore) whose value_ptrs are in a
 *                registered segment; plan->value_ptrs[first .. first+n) are used, copied to
 *                the device on `stream` before the call returns (the plan may be committed
 *                or released once the stream has passed this work).
 * A page index outside the pool is skipped by the kernel (it never reads or writes
 * outside the pool or the value); check indices on the host when they may be wrong.
 * Backup: the engine must synchronize `stream` before fluxon_local_fast_put_commit.
 * Restore: the read plan must stay unreleased until `stream` has passed this work.
 * Returns FLUXON_OK; FLUXON_ERR_INVALID_ARGUMENT (NULL, first+n beyond plan->count, a
 * plan of the wrong kind, layer out of range, a per-layer kind: use fluxon_cuda_layers_*);
 * FLUXON_ERR_UNAVAILABLE (a CUDA error: the
 * message names it); FLUXON_ERR_NOMEM. */
int fluxon_cuda_backup(const fluxon_kv_layout *layout, const void *pool,
                       const int64_t *page_idx_dev, const fluxon_plan *plan, size_t first,
                       size_t n, void *stream);
int fluxon_cuda_restore(const fluxon_kv_layout *layout, void *pool, const int64_t *page_idx_dev,
                        const fluxon_plan *plan, size_t first, size_t n, int32_t layer,
                        void *stream);

/* GPU copies for the per-layer pools (libfluxon_cuda.so): fluxon_cuda_backup /
 * fluxon_cuda_restore with the pool given as one device tensor per layer (SGLang's GPU
 * pool), one kernel launch per call on `stream`, asynchronous: the call returns once the
 * work is queued.
 *  layout        a per-layer kind (FLUXON_KV_LAYER_TENSORS / _MLA) from fluxon_kv_layout_init.
 *  k_ptrs        HOST array of layout->num_layers DEVICE addresses (uint64): layer l's K
 *                tensor (MLA: its latent tensor), num_pages * chunk_bytes bytes each, e.g.
 *                [t.data_ptr() for t in k_buffer]. Every entry non-zero. Copied to the
 *                device on `stream` before the call returns (the caller may free it then).
 *  v_ptrs        the same for the V tensors (LAYER_TENSORS); ignored, may be NULL, for MLA.
 *  page_idx_dev  n page indices in DEVICE memory, read by the kernel; one index names the
 *                same page in every tensor. An index outside 0..num_pages-1 is skipped by
 *                the kernel (nothing outside a tensor or a value is read or written).
 *  plan, first, n, layer, stream  as fluxon_cuda_backup / fluxon_cuda_restore: values
 *                [first, first+n) of a put plan (backup) or a read plan (restore) in a
 *                registered segment; layer -1 or one layer; synchronize `stream` before the
 *                put plan's commit; keep the read plan until `stream` has passed the work.
 * Returns FLUXON_OK (n = 0: nothing queued); FLUXON_ERR_INVALID_ARGUMENT (NULL layout,
 * k_ptrs, v_ptrs (MHA), page_idx_dev or plan; a single-pool kind; a zero tensor address; a
 * plan of the wrong kind; first+n beyond plan->count; layer out of range; the message on
 * stderr names which); FLUXON_ERR_UNAVAILABLE (a CUDA error, named); FLUXON_ERR_NOMEM (no
 * device memory for the staged address arrays). */
int fluxon_cuda_layers_backup(const fluxon_kv_layout *layout, const uint64_t *k_ptrs,
                              const uint64_t *v_ptrs, const int64_t *page_idx_dev,
                              const fluxon_plan *plan, size_t first, size_t n, void *stream);
int fluxon_cuda_layers_restore(const fluxon_kv_layout *layout, const uint64_t *k_ptrs,
                               const uint64_t *v_ptrs, const int64_t *page_idx_dev,
                               const fluxon_plan *plan, size_t first, size_t n, int32_t layer,
                               void *stream);

#ifdef __cplusplus
}
#endif
#endif /* FLUXON_CUDA_H */
