/* test_kv_cycle.c — the engine's whole cycle through a real cluster with the CPU reference
 * of the copy kernels, for every layout: pool pages → put_start → backup → commit →
 * get_start (on the other owner too) → get_transfer → restore into a cleared pool →
 * byte-exact; and fluxon_cuda_register_segments on a machine without a CUDA driver. */
#include <criterion/criterion.h>
#include <unistd.h>

#include "fluxon_cuda.h"
#include "kvfix.h"

TestSuite(kv_cycle, .fini = kf_down, .timeout = 90);

#define NPAGES 24
#define NKEYS 8

static void cycle(uint32_t kind, uint32_t layers, uint64_t chunk)
{
    fluxon_kv_layout l;
    cr_assert_eq(fluxon_kv_layout_init(kind, layers, chunk, NPAGES, &l), FLUXON_OK);
    uint8_t *pool = malloc(l.pool_bytes), *orig = malloc(l.pool_bytes);
    kf_fill(pool, l.pool_bytes, kind * 1000 + layers);
    memcpy(orig, pool, l.pool_bytes);
    char names[NKEYS][48];
    const char *keys[NKEYS];
    int64_t pages[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(names[i], sizeof names[i], "kv%u-%u-%llu/%d", kind, layers, (unsigned long long)chunk, i);
        keys[i] = names[i];
        pages[i] = (i * 7 + 3) % NPAGES; /* scattered, distinct */
    }
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    fluxon_plan *plan = NULL;
    int st[NKEYS];
    cr_assert_eq(fluxon_local_fast_put_start(a, keys, NKEYS, l.value_len, NULL, &plan, st), FLUXON_OK);
    for (int i = 0; i < NKEYS; i++) cr_assert_eq(st[i], FLUXON_OK);
    cr_assert_eq(fluxon_kv_backup_cpu(&l, pool, pages, plan->value_ptrs, NKEYS), FLUXON_OK);
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(a, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    fluxon_client *readers[2] = {a, b}; /* local, then through the other owner (a remote fetch) */
    for (int r = 0; r < 2; r++) {
        memset(pool, 0, l.pool_bytes);
        fluxon_get_handle *h = NULL;
        fluxon_get_start_result res;
        cr_assert_eq(fluxon_get_start(readers[r], keys, NKEYS, 1, NULL, 0, &h, &res), FLUXON_OK);
        cr_assert(res.all_hit, "reader %d: every key restorable", r);
        fluxon_plan *rp = NULL;
        cr_assert_eq(fluxon_get_transfer(readers[r], h, 0, &rp), FLUXON_OK);
        cr_assert_eq(rp->count, NKEYS);
        const uint64_t *lens = fluxon_plan_value_lens(readers[r], rp);
        cr_assert_not_null(lens);
        /* restore layer by layer, as an engine overlapping load with compute does */
        for (int32_t ly = 0; ly < (int32_t)layers; ly++)
            cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, pages, rp->value_ptrs, lens, NKEYS, ly), FLUXON_OK);
        cr_assert_eq(fluxon_release_views(readers[r], rp), FLUXON_OK);
        for (int i = 0; i < NKEYS; i++)
            for (uint32_t ly = 0; ly < layers; ly++)
                for (uint32_t kv = 0; kv < l.kv_factor; kv++) {
                    uint64_t off = (uint64_t)pages[i] * l.page_stride + ly * l.layer_stride + kv * l.kv_stride;
                    cr_assert_eq(memcmp(pool + off, orig + off, chunk), 0,
                                 "reader %d key %d layer %u kv %u restored byte-exact", r, i, ly, kv);
                }
    }
    fluxon_client_close(a);
    fluxon_client_close(b);
    free(pool);
    free(orig);
}

Test(kv_cycle, layer_first_round_trip_through_the_cluster)
{
    kf_up(2);
    cycle(FLUXON_KV_LAYER_FIRST, 4, 4096);
}

Test(kv_cycle, page_first_round_trip_with_an_odd_chunk)
{
    kf_up(2);
    cycle(FLUXON_KV_PAGE_FIRST, 3, 1000);
}

Test(kv_cycle, mla_round_trip_through_the_cluster)
{
    kf_up(2);
    cycle(FLUXON_KV_MLA, 5, 1152);
}

Test(kv_cycle, a_value_shorter_than_the_layout_is_refused_at_restore)
{
    kf_up(1);
    fluxon_kv_layout l;
    cr_assert_eq(fluxon_kv_layout_init(FLUXON_KV_PAGE_FIRST, 2, 4096, 4, &l), FLUXON_OK);
    fluxon_client *a = kf_client(0);
    const char *key = "short/0";
    fluxon_plan *plan = NULL;
    cr_assert_eq(fluxon_local_fast_put_start(a, &key, 1, l.value_len / 2, NULL, &plan, NULL), FLUXON_OK);
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(a, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result res;
    cr_assert_eq(fluxon_get_start(a, &key, 1, 1, NULL, 0, &h, &res), FLUXON_OK);
    fluxon_plan *rp = NULL;
    cr_assert_eq(fluxon_get_transfer(a, h, 0, &rp), FLUXON_OK);
    uint8_t *pool = calloc(1, l.pool_bytes);
    int64_t page = 1;
    cr_assert_eq(fluxon_kv_restore_cpu(&l, pool, &page, rp->value_ptrs, fluxon_plan_value_lens(a, rp), 1, -1),
                 FLUXON_ERR_INVALID_ARGUMENT, "a value of half the layout's length is never read past its end");
    cr_assert_eq(fluxon_release_views(a, rp), FLUXON_OK);
    free(pool);
    fluxon_client_close(a);
}

Test(kv_cycle, registration_without_a_cuda_driver_is_unavailable)
{
    if (access("/dev/nvidiactl", F_OK) == 0) {
        cr_skip_test("this machine has an NVIDIA device: `make cuda` runs the GPU registration test");
        return;
    }
    kf_up(1);
    fluxon_client *a = kf_client(0);
    cr_assert_eq(fluxon_cuda_register_segments(NULL, 0), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_cuda_register_segments(a, 1), FLUXON_ERR_INVALID_ARGUMENT, "no flag is defined");
    cr_assert_eq(fluxon_cuda_register_segments(a, 0), FLUXON_ERR_UNAVAILABLE);
    cr_assert_eq(fluxon_cuda_unregister_segments(a), FLUXON_OK, "nothing registered: nothing to undo");
    cr_assert_eq(fluxon_cuda_unregister_segments(NULL), FLUXON_ERR_INVALID_ARGUMENT);
    /* the client is unaffected */
    const char *key = "after/0";
    cr_assert_eq(fluxon_put(a, key, "x", 1, NULL), FLUXON_OK);
    fluxon_client_close(a);
}
