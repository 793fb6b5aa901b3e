/* test_registry.c — Criterion suite for plan/registry: identities not addresses (a
 * released blob's address is not handed out again; a stale pointer is WRONG_HANDLE), the
 * check callback (take / keep / discard), kinds, re-adding after a retryable failure,
 * and the arena giving released pages back. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "hmap.h"
#include "registry.h"

static fx_plan_reg_t *reg_new(void)
{
    fx_plan_reg_t *r = NULL;
    cr_assert_eq(fx_plan_reg_create(&r), FLUXON_OK);
    return r;
}

Test(registry, released_addresses_are_not_reused)
{
    fx_plan_reg_t *r = reg_new();
    enum { N = 100000 };
    fx_hmap_t *seen = NULL;
    cr_assert_eq(fx_hmap_create(N, &seen), FLUXON_OK);
    fx_plan_obj_t *prev = NULL;
    for (int i = 0; i < N; i++) {
        fx_plan_obj_t *o = fx_plan_obj_new(r, FX_PLAN_PUT, 16 + (size_t)(i % 7) * 8);
        cr_assert_not_null(o);
        cr_assert_eq(((uintptr_t)o->blob) % 16, 0, "blobs are 16-byte aligned");
        cr_assert_null(fx_hmap_get(seen, &o->blob, sizeof o->blob), "address %p handed out twice", o->blob);
        fx_hmap_put(seen, &o->blob, sizeof o->blob, o->blob, NULL);
        cr_assert_eq(fx_plan_reg_add(r, o), FLUXON_OK);
        fx_plan_obj_t *t = NULL;
        cr_assert_eq(fx_plan_reg_take(r, o->blob, FX_PLAN_PUT, NULL, NULL, &t), FLUXON_OK);
        cr_assert_eq(t, o);
        void *blob = o->blob;
        fx_plan_reg_retire(r, o);
        cr_assert_eq(fx_plan_reg_take(r, blob, FX_PLAN_PUT, NULL, NULL, &t), FLUXON_ERR_WRONG_HANDLE);
        if (prev) cr_assert_eq(fx_plan_reg_take(r, prev, FX_PLAN_PUT, NULL, NULL, &t), FLUXON_ERR_WRONG_HANDLE);
        prev = blob;
    }
    fx_hmap_destroy(seen);
    fx_plan_reg_destroy(r);
}

static int check_keep(fx_plan_obj_t *o, void *arg, bool *discard) { return FLUXON_ERR_INVALID_ARGUMENT; }
static int check_discard(fx_plan_obj_t *o, void *arg, bool *discard)
{
    *discard = true;
    return FLUXON_ERR_STALE;
}

Test(registry, kinds_checks_and_readd)
{
    fx_plan_reg_t *r = reg_new();
    fx_plan_obj_t *o = fx_plan_obj_new(r, FX_PLAN_HANDLE, 8), *t = NULL;
    cr_assert_eq(fx_plan_reg_add(r, o), FLUXON_OK);
    cr_assert_eq(fx_plan_reg_take(r, o->blob, FX_PLAN_READ, NULL, NULL, &t), FLUXON_ERR_WRONG_HANDLE, "wrong kind");
    cr_assert_eq(fx_plan_reg_take(r, (char *)o->blob + 8, FX_PLAN_HANDLE, NULL, NULL, &t), FLUXON_ERR_WRONG_HANDLE,
                 "an address inside the blob");
    cr_assert_eq(fx_plan_reg_take(r, o->blob, FX_PLAN_HANDLE, check_keep, NULL, &t), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_plan_reg_take(r, o->blob, FX_PLAN_HANDLE, NULL, NULL, &t), FLUXON_OK, "kept by the check");
    uint64_t seq = t->seq;
    cr_assert_eq(fx_plan_reg_add(r, t), FLUXON_OK, "re-added after a retryable failure");
    cr_assert_eq(fx_plan_reg_take(r, o->blob, FX_PLAN_HANDLE, NULL, NULL, &t), FLUXON_OK);
    cr_assert_eq(t->seq, seq, "the same identity");
    cr_assert_eq(fx_plan_reg_add(r, t), FLUXON_OK);
    void *blob = o->blob;
    cr_assert_eq(fx_plan_reg_take(r, blob, FX_PLAN_HANDLE, check_discard, NULL, &t), FLUXON_ERR_STALE);
    cr_assert_eq(fx_plan_reg_take(r, blob, FX_PLAN_HANDLE, NULL, NULL, &t), FLUXON_ERR_WRONG_HANDLE, "discarded");
    fx_plan_reg_destroy(r);
}

/* A "Vm...:" line of /proc/self/status in KiB (field: "VmRSS", "VmSize"); -1 if absent. */
static long proc_status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t n = strlen(field);
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':' && sscanf(line + n + 1, "%ld", &v) == 1) break;
    if (f) fclose(f);
    return v;
}

Test(registry, released_pages_go_back)
{
    fx_plan_reg_t *r = reg_new();
    long before = proc_status_kib("VmRSS");
    for (int i = 0; i < 2000; i++) { /* 2000 x 64 KiB read plans, one at a time: 125 MiB of blobs */
        fx_plan_obj_t *o = fx_plan_obj_new(r, FX_PLAN_READ, 64 << 10);
        cr_assert_not_null(o);
        fx_plan_reg_retire(r, o);
    }
    long grown = proc_status_kib("VmRSS") - before;
    long bound = 16 << 10;
#ifdef __SANITIZE_ADDRESS__
    /* the arena hands out fresh addresses by design: AddressSanitizer's shadow (1 byte per
     * 8) of the 125 MiB of blob addresses written stays resident, ~15.6 MiB */
    bound += (2000L * 64) / 8;
#endif
    cr_assert_lt(grown, bound, "RSS grew by %ld KiB for 125 MiB of released blobs (bound %ld KiB)", grown, bound);
    fx_plan_reg_destroy(r);
}

/* Dead chunks go back in runs and fresh ones are faulted in ahead: neither may touch a
 * live blob. Long-lived blobs of every size sit among thousands released around them (their
 * chunks join, leave and flush release runs); each keeps the bytes written into it. */
Test(registry, batched_release_and_populate_never_touch_a_live_blob)
{
    fx_plan_reg_t *r = reg_new();
    enum { KEEP = 64 };
    fx_plan_obj_t *kept[KEEP] = {0};
    uint64_t seed = 99;
    for (int i = 0; i < 40000; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t bytes = 16 + (size_t)((seed >> 33) % 9000); /* within a chunk or across two or three */
        fx_plan_obj_t *o = fx_plan_obj_new(r, FX_PLAN_READ, bytes);
        cr_assert_not_null(o);
        for (size_t k = 0; k < bytes; k++) cr_assert_eq(((unsigned char *)o->blob)[k], 0, "a new blob is zeroed");
        memset(o->blob, (int)(o->seq & 0xff) | 1, bytes);
        int slot = (int)((seed >> 20) % (KEEP * 4));
        if (slot < KEEP) { /* keep it; the one it replaces goes (a straggler's chunk) */
            if (kept[slot]) {
                const unsigned char *b = kept[slot]->blob;
                for (size_t k = 0; k < kept[slot]->blob_bytes; k++)
                    cr_assert_eq(b[k], (unsigned char)((kept[slot]->seq & 0xff) | 1), "blob %llu byte %zu",
                                 (unsigned long long)kept[slot]->seq, k);
                fx_plan_reg_retire(r, kept[slot]);
            }
            kept[slot] = o;
        } else {
            fx_plan_reg_retire(r, o);
        }
    }
    for (int s = 0; s < KEEP; s++) {
        if (!kept[s]) continue;
        const unsigned char *b = kept[s]->blob;
        for (size_t k = 0; k < kept[s]->blob_bytes; k++)
            cr_assert_eq(b[k], (unsigned char)((kept[s]->seq & 0xff) | 1));
        fx_plan_reg_retire(r, kept[s]);
    }
    fx_plan_reg_destroy(r);
}

/* take_expired deletes while it walks the registry: every expired handle comes out exactly
 * once (in calls of at most cap), the others and the other kinds stay. */
Test(registry, take_expired_returns_each_expired_handle_once)
{
    fx_plan_reg_t *r = reg_new();
    enum { N = 3000 };
    static fx_plan_obj_t *objs[N];
    static int taken[N];
    for (int i = 0; i < N; i++) {
        objs[i] = fx_plan_obj_new(r, i % 5 == 4 ? FX_PLAN_READ : FX_PLAN_HANDLE, 8);
        cr_assert_not_null(objs[i]);
        objs[i]->expires_ms = i % 3 == 0 ? 1000 : i % 3 == 1 ? 5000 : 0; /* 0: no expiry */
        objs[i]->owner_id = (uint64_t)i;
        cr_assert_eq(fx_plan_reg_add(r, objs[i]), FLUXON_OK);
    }
    int want = 0;
    for (int i = 0; i < N; i++) want += i % 5 != 4 && i % 3 == 0;
    fx_plan_obj_t *out[7];
    int got = 0;
    for (int round = 0; round < N; round++) {
        size_t n = fx_plan_reg_take_expired(r, FX_PLAN_HANDLE, 2000, out, 7);
        for (size_t k = 0; k < n; k++) {
            int i = (int)out[k]->owner_id;
            cr_assert(i % 3 == 0 && i % 5 != 4, "handle %d was not due", i);
            cr_assert_eq(taken[i]++, 0, "handle %d taken twice", i);
            got++;
            fx_plan_reg_retire(r, out[k]);
        }
        if (n < 7) break;
    }
    cr_assert_eq(got, want, "every expired handle, in calls of at most 7");
    for (int i = 0; i < N; i++)
        cr_assert_eq(fx_plan_reg_kind(r, taken[i] ? (void *)16 : objs[i]->blob), /* a retired one is freed */
                     taken[i] ? 0 : (i % 5 == 4 ? FX_PLAN_READ : FX_PLAN_HANDLE), "object %d", i);
    fx_plan_reg_destroy(r);
}

/* A blob that ends exactly at the arena's end: the next one wraps to the start, and the
 * chunk "after the last" (there is none) is neither counted nor given back. Found in
 * review: its live count was read past the array, and the page after the arena could be
 * MADV_DONTNEED'd (zeroed). The address space is capped so that the arena is 1 GiB. */
Test(registry, a_blob_ending_at_the_arena_end_wraps_without_touching_the_page_after)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    cr_skip_test("a sanitizer's shadow memory cannot live under a capped address space");
#else
    long vm = proc_status_kib("VmSize");
    cr_assert_gt(vm, 0);
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_AS, &rl), 0);
    rl.rlim_cur = (rlim_t)(vm + (2560l << 10)) << 10; /* 2.5 GiB more: a 4 GiB arena does not fit */
    cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0); /* this test's own process (Criterion forks one per test) */
    fx_plan_reg_t *r = reg_new();
    enum { BLOB = 4096 - 16 }; /* with its 16-byte header: exactly one chunk */
    fx_plan_obj_t *o = fx_plan_obj_new(r, FX_PLAN_READ, BLOB);
    cr_assert_not_null(o);
    uint8_t *base = (uint8_t *)o->blob - 16, *after = base + (1ull << 30);
    fx_plan_reg_retire(r, o);
    void *p = mmap(after, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != after) { /* the arena is larger than 1 GiB, or something else lives there */
        if (p != MAP_FAILED) munmap(p, 4096);
        fx_plan_reg_destroy(r);
        cr_skip_test("could not place a page right after a 1 GiB arena");
    }
    memset(after, 0xab, 4096);
    bool wrapped = false;
    for (long i = 1; i <= (1l << 18) + 300; i++) {
        o = fx_plan_obj_new(r, FX_PLAN_READ, BLOB);
        cr_assert_not_null(o, "allocation %ld", i);
        wrapped |= (uint8_t *)o->blob - 16 == base;
        fx_plan_reg_retire(r, o);
    }
    cr_assert(wrapped, "the pointer went round the 1 GiB arena");
    for (int k = 0; k < 4096; k++) cr_assert_eq(after[k], 0xab, "byte %d of the page after the arena", k);
    munmap(after, 4096);
    fx_plan_reg_destroy(r);
#endif
}
