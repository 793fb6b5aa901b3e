/* test_hmap.c — Criterion suite for the string-keyed hash map (cache/hmap.c): basic
 * operations, odd keys (NUL bytes, empty, 64 KiB), growth keeping stored-key pointers,
 * iteration with deletion of the current entry, and a 1M-op differential test (every
 * other op through the hash-once _h variants after a prefetch). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"

static fx_hmap_t *mk(size_t cap)
{
    fx_hmap_t *m = NULL;
    cr_assert_eq(fx_hmap_create(cap, &m), FLUXON_OK);
    cr_assert_not_null(m);
    return m;
}

#define V(x) ((void *)(uintptr_t)(x))

static uint64_t th_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* 64 hex chars + "_0_2", as the cache's page keys. */
static void page_key(char k[69], uint64_t i)
{
    snprintf(k, 69, "%016llx%016llx%016llx%016llx_0_2", (unsigned long long)i,
             (unsigned long long)(i * 31), (unsigned long long)~i, (unsigned long long)(i ^ 0xabc));
}

Test(hmap, create_destroy_args)
{
    cr_assert_eq(fx_hmap_create(0, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    fx_hmap_destroy(NULL);
    fx_hmap_t *m = mk(0);
    cr_assert_eq(fx_hmap_count(m), 0);
    cr_assert_eq(fx_hmap_capacity(m), 8);
    fx_hmap_destroy(m);
    m = mk(1000); /* 1000 entries fit without growth */
    size_t cap = fx_hmap_capacity(m);
    cr_assert(cap >= 1000 * 20 / 17 && (cap & (cap - 1)) == 0);
    char k[69];
    for (int i = 0; i < 1000; i++) {
        page_key(k, (uint64_t)i);
        cr_assert_eq(fx_hmap_put(m, k, 68, V(i + 1), NULL), FLUXON_OK);
    }
    cr_assert_eq(fx_hmap_capacity(m), cap);
    fx_hmap_destroy(m);
}

Test(hmap, insert_get_replace_delete)
{
    fx_hmap_t *m = mk(0);
    void *old = V(1);
    cr_assert_null(fx_hmap_get(m, "a", 1));
    cr_assert_eq(fx_hmap_put(m, "a", 1, V(10), &old), FLUXON_OK);
    cr_assert_null(old);
    cr_assert_eq(fx_hmap_put(m, "b", 1, V(20), NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_get(m, "a", 1), V(10));
    cr_assert_eq(fx_hmap_get(m, "b", 1), V(20));
    cr_assert_null(fx_hmap_get(m, "ab", 2));
    cr_assert_eq(fx_hmap_count(m), 2);

    const char *sk1 = NULL, *sk2 = NULL;
    cr_assert_eq(fx_hmap_get_key(m, "a", 1, &sk1), FLUXON_OK);
    cr_assert_eq(fx_hmap_put(m, "a", 1, V(11), &old), FLUXON_OK);
    cr_assert_eq(old, V(10));
    cr_assert_eq(fx_hmap_get_key(m, "a", 1, &sk2), FLUXON_OK);
    cr_assert_eq(sk1, sk2, "replace keeps the stored key");
    cr_assert_str_eq(sk2, "a");
    cr_assert_eq(fx_hmap_count(m), 2);

    void *v = NULL;
    cr_assert_eq(fx_hmap_del(m, "a", 1, &v), FLUXON_OK);
    cr_assert_eq(v, V(11));
    v = V(99);
    cr_assert_eq(fx_hmap_del(m, "a", 1, &v), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(v, V(99), "val_p untouched on NOT_FOUND");
    sk1 = "x";
    cr_assert_eq(fx_hmap_get_key(m, "a", 1, &sk1), FLUXON_ERR_NOT_FOUND);
    cr_assert_str_eq(sk1, "x");
    cr_assert_null(fx_hmap_get(m, "a", 1));
    cr_assert_eq(fx_hmap_count(m), 1);
    cr_assert_eq(fx_hmap_del(m, "b", 1, NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_count(m), 0);

    /* A stored NULL value is present (get_key tells). */
    cr_assert_eq(fx_hmap_put(m, "n", 1, NULL, NULL), FLUXON_OK);
    cr_assert_null(fx_hmap_get(m, "n", 1));
    cr_assert_eq(fx_hmap_get_key(m, "n", 1, NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_count(m), 1);
    fx_hmap_destroy(m);
}

Test(hmap, odd_keys)
{
    fx_hmap_t *m = mk(0);
    /* Empty key, with and without a pointer. */
    cr_assert_eq(fx_hmap_put(m, NULL, 0, V(1), NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_get(m, "", 0), V(1));
    const char *sk = NULL;
    cr_assert_eq(fx_hmap_get_key(m, NULL, 0, &sk), FLUXON_OK);
    cr_assert_eq(sk[0], 0);
    /* Keys differing only after / in NUL bytes. */
    const char k1[] = {'a', 0, 'b'}, k2[] = {'a', 0, 'c'}, k3[] = {'a', 0}, k4[] = {0};
    cr_assert_eq(fx_hmap_put(m, k1, 3, V(2), NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_put(m, k2, 3, V(3), NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_put(m, k3, 2, V(4), NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_put(m, "a", 1, V(5), NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_put(m, k4, 1, V(6), NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_count(m), 6);
    cr_assert_eq(fx_hmap_get(m, k1, 3), V(2));
    cr_assert_eq(fx_hmap_get(m, k2, 3), V(3));
    cr_assert_eq(fx_hmap_get(m, k3, 2), V(4));
    cr_assert_eq(fx_hmap_get(m, "a", 1), V(5));
    cr_assert_eq(fx_hmap_get(m, k4, 1), V(6));
    cr_assert_eq(fx_hmap_get(m, NULL, 0), V(1));
    cr_assert_eq(fx_hmap_get_key(m, k1, 3, &sk), FLUXON_OK);
    cr_assert(memcmp(sk, k1, 3) == 0 && sk[3] == 0);
    cr_assert_neq(sk, k1, "the map keeps its own copy");

    /* 64 KiB keys, two differing only in the last byte, one only in the first. */
    size_t big = 64 * 1024;
    char *b1 = malloc(big), *b2 = malloc(big), *b3 = malloc(big);
    for (size_t i = 0; i < big; i++) b1[i] = (char)(i * 7);
    memcpy(b2, b1, big);
    memcpy(b3, b1, big);
    b2[big - 1] ^= 1;
    b3[0] ^= 1;
    cr_assert_eq(fx_hmap_put(m, b1, big, V(7), NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_put(m, b2, big, V(8), NULL), FLUXON_OK);
    cr_assert_null(fx_hmap_get(m, b3, big));
    cr_assert_null(fx_hmap_get(m, b1, big - 1));
    cr_assert_eq(fx_hmap_get(m, b1, big), V(7));
    cr_assert_eq(fx_hmap_get(m, b2, big), V(8));
    cr_assert_eq(fx_hmap_get_key(m, b2, big, &sk), FLUXON_OK);
    cr_assert(memcmp(sk, b2, big) == 0);
    memset(b1, 0, big); /* the caller's buffer is not referenced */
    cr_assert_null(fx_hmap_get(m, b1, big));
    cr_assert_eq(fx_hmap_del(m, b2, big, NULL), FLUXON_OK);
    cr_assert_null(fx_hmap_get(m, b2, big));
    cr_assert_eq(fx_hmap_count(m), 7);
    free(b1);
    free(b2);
    free(b3);
    fx_hmap_destroy(m); /* frees the remaining 64 KiB key (ASan checks) */
}

Test(hmap, growth_preserves_entries_and_key_pointers)
{
    fx_hmap_t *m = mk(0);
    enum { N = 50000 };
    const char **sk = malloc(N * sizeof *sk);
    char k[69];
    size_t cap = fx_hmap_capacity(m), grows = 0;
    for (uint64_t i = 0; i < N; i++) {
        page_key(k, i);
        cr_assert_eq(fx_hmap_put(m, k, 68, V(i + 1), NULL), FLUXON_OK);
        cr_assert_eq(fx_hmap_get_key(m, k, 68, &sk[i]), FLUXON_OK);
        size_t c = fx_hmap_capacity(m);
        cr_assert(fx_hmap_count(m) * 20 <= c * 17, "load factor <= 0.85");
        if (c != cap) {
            cr_assert_eq(c, cap * 2);
            cap = c;
            grows++;
            /* After each growth every entry and every stored key pointer survives. */
            for (uint64_t j = 0; j <= i; j++) {
                page_key(k, j);
                const char *p = NULL;
                cr_assert_eq(fx_hmap_get(m, k, 68), V(j + 1));
                cr_assert_eq(fx_hmap_get_key(m, k, 68, &p), FLUXON_OK);
                cr_assert_eq(p, sk[j], "stored key moved on growth");
                cr_assert_str_eq(p, k);
            }
        }
    }
    cr_assert_geq(grows, 12);
    cr_assert_eq(fx_hmap_count(m), N);
    /* Deleting half keeps the others' pointers too (backward shift moves slots only). */
    for (uint64_t i = 0; i < N; i += 2) {
        page_key(k, i);
        cr_assert_eq(fx_hmap_del(m, k, 68, NULL), FLUXON_OK);
    }
    for (uint64_t i = 1; i < N; i += 2) {
        page_key(k, i);
        const char *p = NULL;
        cr_assert_eq(fx_hmap_get_key(m, k, 68, &p), FLUXON_OK);
        cr_assert_eq(p, sk[i]);
    }
    cr_assert_eq(fx_hmap_count(m), N / 2);
    free(sk);
    fx_hmap_destroy(m);
}

/* Iterates and returns the number of entries, checking each is visited once via seen[]
 * (values are index + 1). */
static size_t iter_all(fx_hmap_t *m, unsigned char *seen, size_t n)
{
    memset(seen, 0, n);
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl, cnt = 0;
    void *v;
    while (fx_hmap_iter_next(m, &it, &k, &kl, &v)) {
        size_t i = (size_t)(uintptr_t)v - 1;
        cr_assert_lt(i, n);
        cr_assert_eq(seen[i], 0, "entry visited twice");
        seen[i] = 1;
        cr_assert_eq(fx_hmap_get(m, k, kl), v);
        cnt++;
    }
    cr_assert_not(fx_hmap_iter_next(m, &it, &k, &kl, &v), "stays done");
    return cnt;
}

Test(hmap, iteration_visits_each_once)
{
    enum { N = 20000 };
    unsigned char *seen = malloc(N);
    fx_hmap_t *m = mk(0);
    cr_assert_eq(iter_all(m, seen, N), 0);
    char k[69];
    for (uint64_t i = 0; i < N; i++) {
        page_key(k, i);
        cr_assert_eq(fx_hmap_put(m, k, 68, V(i + 1), NULL), FLUXON_OK);
        if (i % 997 == 0) cr_assert_eq(iter_all(m, seen, N), i + 1);
    }
    cr_assert_eq(iter_all(m, seen, N), N);
    for (size_t i = 0; i < N; i++) cr_assert_eq(seen[i], 1);
    /* Null out-pointers are accepted. */
    fx_hmap_iter_t it;
    fx_hmap_iter_init(&it);
    size_t c = 0;
    while (fx_hmap_iter_next(m, &it, NULL, NULL, NULL)) c++;
    cr_assert_eq(c, N);
    free(seen);
    fx_hmap_destroy(m);
}

/* Deleting the entry just returned: every other entry is visited exactly once. Run at
 * several fill levels (dense runs, wrap-around at the table end) and deletion patterns. */
Test(hmap, delete_current_during_iteration)
{
    enum { N = 6000 };
    unsigned char *seen = malloc(N);
    uint64_t s = 7;
    for (int round = 0; round < 40; round++) {
        fx_hmap_t *m = mk(0);
        size_t n = 1 + (size_t)(th_rand(&s) % N);
        char k[69];
        for (uint64_t i = 0; i < n; i++) {
            page_key(k, i + (uint64_t)round * 1000003u);
            cr_assert_eq(fx_hmap_put(m, k, 68, V(i + 1), NULL), FLUXON_OK);
        }
        unsigned pct = (unsigned)(th_rand(&s) % 101); /* deletion probability */
        memset(seen, 0, N);
        size_t deleted = 0, visited = 0;
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        const char *kp;
        size_t kl;
        void *v;
        while (fx_hmap_iter_next(m, &it, &kp, &kl, &v)) {
            size_t i = (size_t)(uintptr_t)v - 1;
            cr_assert_lt(i, n);
            cr_assert_eq(seen[i], 0, "visited twice (round %d)", round);
            seen[i] = 1;
            visited++;
            if (th_rand(&s) % 100 < pct) {
                /* kp is the stored key: copy before deleting (del frees it). */
                char copy[69];
                memcpy(copy, kp, kl);
                void *dv = NULL;
                cr_assert_eq(fx_hmap_del(m, copy, kl, &dv), FLUXON_OK);
                cr_assert_eq(dv, v);
                seen[i] = 2;
                deleted++;
            } else if (th_rand(&s) % 4 == 0) {
                void *old = NULL; /* replacing the value is allowed too */
                cr_assert_eq(fx_hmap_put(m, kp, kl, v, &old), FLUXON_OK);
                cr_assert_eq(old, v);
            }
        }
        cr_assert_eq(visited, n, "round %d: visited %zu of %zu", round, visited, n);
        cr_assert_eq(fx_hmap_count(m), n - deleted);
        for (size_t i = 0; i < n; i++) {
            page_key(k, i + (uint64_t)round * 1000003u);
            cr_assert_eq(fx_hmap_get(m, k, 68), seen[i] == 2 ? NULL : V(i + 1));
        }
        fx_hmap_destroy(m);
    }
    /* Delete everything while iterating. */
    fx_hmap_t *m = mk(0);
    char k[69];
    for (uint64_t i = 0; i < N; i++) {
        page_key(k, i);
        cr_assert_eq(fx_hmap_put(m, k, 68, V(i + 1), NULL), FLUXON_OK);
    }
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *kp;
    size_t kl, c = 0;
    while (fx_hmap_iter_next(m, &it, &kp, &kl, NULL)) {
        /* The stored key itself may be passed to del (ASan checks it is not read after
         * being freed). */
        cr_assert_eq(fx_hmap_del(m, kp, kl, NULL), FLUXON_OK);
        c++;
    }
    cr_assert_eq(c, N);
    cr_assert_eq(fx_hmap_count(m), 0);
    free(seen);
    fx_hmap_destroy(m);
}

/* Breaking the contract (deleting another entry, inserting) aborts. */
Test(hmap, iteration_misuse_delete_other_aborts, .signal = SIGABRT)
{
    fx_hmap_t *m = mk(0);
    char k[69];
    for (uint64_t i = 0; i < 100; i++) {
        page_key(k, i);
        fx_hmap_put(m, k, 68, V(i + 1), NULL);
    }
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *kp;
    size_t kl;
    cr_assert(fx_hmap_iter_next(m, &it, &kp, &kl, NULL));
    char other[69];
    for (uint64_t i = 0;; i++) {
        page_key(other, i);
        if (memcmp(other, kp, 68) != 0) break;
    }
    fx_hmap_del(m, other, 68, NULL);
    fx_hmap_iter_next(m, &it, &kp, &kl, NULL);
}

Test(hmap, iteration_misuse_insert_aborts, .signal = SIGABRT)
{
    fx_hmap_t *m = mk(0);
    fx_hmap_put(m, "a", 1, V(1), NULL);
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    cr_assert(fx_hmap_iter_next(m, &it, NULL, NULL, NULL));
    fx_hmap_put(m, "b", 1, V(2), NULL);
    fx_hmap_iter_next(m, &it, NULL, NULL, NULL);
}

/* Differential test: 1,000,000 random operations over a universe of 4096 distinct keys of
 * varied length (0..80, with NUL bytes and shared prefixes), checked against a plain
 * array indexed by key id. */
Test(hmap, randomized_differential, .timeout = 300)
{
    enum { U = 4096, OPS = 1000000 };
    char **keys = malloc(U * sizeof *keys);
    size_t *klens = malloc(U * sizeof *klens);
    void **ref = calloc(U, sizeof *ref);
    bool *present = calloc(U, sizeof *present);
    const char **stored = calloc(U, sizeof *stored);
    uint64_t s = 12345;
    for (size_t u = 0; u < U; u++) {
        /* Make keys distinct by construction: 2 id bytes then a random tail; some keys
         * are the same tail with the id bytes at the end to get shared prefixes. */
        size_t tail = (size_t)(th_rand(&s) % 79);
        klens[u] = tail + 2;
        keys[u] = malloc(klens[u]);
        for (size_t i = 0; i < tail; i++) {
            uint64_t r = th_rand(&s);
            keys[u][i] = (r & 3) == 0 ? 0 : (char)(r >> 8);
        }
        if (u % 3 == 0) memset(keys[u], 'p', tail); /* long common prefixes */
        keys[u][tail] = (char)(u & 0xff);
        keys[u][tail + 1] = (char)(u >> 8);
    }
    fx_hmap_t *m = mk(0);
    size_t count = 0;
    for (uint64_t op = 0; op < OPS; op++) {
        size_t u = (size_t)(th_rand(&s) % U);
        unsigned kind = (unsigned)(th_rand(&s) % 10);
        /* Phases bias the mix so the map grows, shrinks and refills: puts 0..put_hi,
         * deletes put_hi..del_hi, gets (and get_key) the rest. */
        bool del_phase = (op / 100000) % 2 == 1;
        /* every other op through the hash-once variants (batch paths), after a prefetch */
        bool via_h = op & 1;
        uint64_t h = fx_hmap_hash(keys[u], klens[u]);
        cr_assert_neq(h, 0);
        if (via_h) fx_hmap_prefetch(m, h);
        unsigned put_hi = del_phase ? 2u : 4u, del_hi = del_phase ? 6u : 5u;
        if (kind < put_hi) {
            void *nv = V(op + 1), *old = V(1);
            cr_assert_eq(via_h ? fx_hmap_put_h(m, keys[u], klens[u], h, nv, &old) : fx_hmap_put(m, keys[u], klens[u], nv, &old),
                         FLUXON_OK);
            cr_assert_eq(old, present[u] ? ref[u] : NULL);
            if (!present[u]) {
                count++;
                present[u] = true;
                cr_assert_eq(fx_hmap_get_key(m, keys[u], klens[u], &stored[u]), FLUXON_OK);
            }
            ref[u] = nv;
        } else if (kind < del_hi) {
            void *v = V(1);
            int rc = via_h ? fx_hmap_del_h(m, keys[u], klens[u], h, &v) : fx_hmap_del(m, keys[u], klens[u], &v);
            if (present[u]) {
                cr_assert_eq(rc, FLUXON_OK);
                cr_assert_eq(v, ref[u]);
                present[u] = false;
                count--;
            } else {
                cr_assert_eq(rc, FLUXON_ERR_NOT_FOUND);
                cr_assert_eq(v, V(1));
            }
        } else {
            const char *sk = NULL;
            int rc = fx_hmap_get_key(m, keys[u], klens[u], &sk);
            cr_assert_eq(via_h ? fx_hmap_get_h(m, keys[u], klens[u], h) : fx_hmap_get(m, keys[u], klens[u]),
                         present[u] ? ref[u] : NULL);
            cr_assert_eq(rc, present[u] ? FLUXON_OK : FLUXON_ERR_NOT_FOUND);
            if (present[u]) cr_assert_eq(sk, stored[u], "stored key pointer changed");
        }
        cr_assert_eq(fx_hmap_count(m), count);
        if (op % 100000 == 99999) {
            /* Full iteration agrees with the reference. */
            fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
            const char *kp;
            size_t kl, seen = 0;
            void *v;
            while (fx_hmap_iter_next(m, &it, &kp, &kl, &v)) {
                cr_assert_geq(kl, 2);
                size_t id = (size_t)(unsigned char)kp[kl - 2] | (size_t)(unsigned char)kp[kl - 1] << 8;
                cr_assert(id < U && present[id] && kl == klens[id] && memcmp(kp, keys[id], kl) == 0);
                cr_assert_eq(v, ref[id]);
                cr_assert_eq(kp, stored[id]);
                seen++;
            }
            cr_assert_eq(seen, count);
        }
    }
    cr_log_info("differential: %zu keys live at the end, capacity %zu", count,
                fx_hmap_capacity(m));
    fx_hmap_destroy(m);
    for (size_t u = 0; u < U; u++) free(keys[u]);
    free(keys);
    free(klens);
    free(ref);
    free(present);
    free(stored);
}

Test(hmap, nomem_not_testable, .disabled = true)
{
    /* fx_malloc failure cannot be injected (mimalloc underneath, no hook): skipped. */
}

/* ---- intrusive maps: the value holds its key ---- */
typedef struct hm_obj {
    int tag;
    char *key;
    uint32_t klen;
    char buf[72];
} hm_obj_t;

static hm_obj_t *obj_new(uint64_t i, int tag)
{
    hm_obj_t *o = calloc(1, sizeof *o);
    cr_assert_not_null(o);
    page_key(o->buf, i);
    o->key = o->buf;
    o->klen = (uint32_t)strlen(o->buf);
    o->tag = tag;
    return o;
}

Test(hmap, intrusive_stores_the_objects_themselves)
{
    fx_hmap_t *m = NULL;
    cr_assert_eq(fx_hmap_create_intrusive(0, offsetof(hm_obj_t, key), offsetof(hm_obj_t, klen), &m), FLUXON_OK);
    hm_obj_t *a = obj_new(1, 1), *a2 = obj_new(1, 2), *b = obj_new(2, 3);
    void *old = V(1);
    cr_assert_eq(fx_hmap_put(m, a->key, a->klen, a, &old), FLUXON_OK);
    cr_assert_null(old);
    cr_assert_eq(fx_hmap_put(m, b->key, b->klen, b, NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_get(m, a->key, a->klen), a, "the object itself, found by its key");
    const char *sk = NULL;
    cr_assert_eq(fx_hmap_get_key(m, a2->key, a2->klen, &sk), FLUXON_OK);
    cr_assert_eq(sk, a->key, "the stored key is the object's own");
    cr_assert_eq(fx_hmap_put(m, a2->key, a2->klen, a2, &old), FLUXON_OK, "the same key, another object");
    cr_assert_eq(old, a, "replacing returns the previous object");
    cr_assert_eq(fx_hmap_get(m, a->key, a->klen), a2);
    cr_assert_eq(fx_hmap_count(m), 2);
    free(a); /* out of the map: the map never reads it again */
    void *v = NULL;
    cr_assert_eq(fx_hmap_del(m, b->key, b->klen, &v), FLUXON_OK);
    cr_assert_eq(v, b);
    cr_assert_null(fx_hmap_get(m, b->key, b->klen));
    free(b);
    fx_hmap_clear(m, free); /* frees a2 through free_fn, once */
    cr_assert_eq(fx_hmap_count(m), 0);
    fx_hmap_destroy(m);
}

/* fx_hmap_del_obj removes an object by identity: another object under the same key stays,
 * an object not in the map changes nothing, and the displaced run behind a removed object
 * stays reachable (64 keys in a small table, removed in a shuffled order). */
Test(hmap, intrusive_delete_by_identity)
{
    fx_hmap_t *m = NULL;
    cr_assert_eq(fx_hmap_create_intrusive(8, offsetof(hm_obj_t, key), offsetof(hm_obj_t, klen), &m), FLUXON_OK);
    hm_obj_t *a = obj_new(1, 1), *a2 = obj_new(1, 2);
    uint64_t ha = fx_hmap_hash(a->key, a->klen);
    cr_assert_eq(fx_hmap_put_h(m, a->key, a->klen, ha, a, NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_del_obj(m, ha, a2), FLUXON_ERR_NOT_FOUND, "same key, another object: not removed");
    cr_assert_eq(fx_hmap_get(m, a->key, a->klen), a);
    cr_assert_eq(fx_hmap_put_h(m, a2->key, a2->klen, ha, a2, NULL), FLUXON_OK); /* a2 takes the key over */
    cr_assert_eq(fx_hmap_del_obj(m, ha, a), FLUXON_ERR_NOT_FOUND, "the replaced object is no longer there");
    cr_assert_eq(fx_hmap_get(m, a->key, a->klen), a2);
    cr_assert_eq(fx_hmap_del_obj(m, ha, a2), FLUXON_OK);
    cr_assert_null(fx_hmap_get(m, a->key, a->klen));
    cr_assert_eq(fx_hmap_count(m), 0);
    enum { N = 64 };
    hm_obj_t *o[N];
    uint64_t h[N];
    int order[N];
    for (int i = 0; i < N; i++) {
        o[i] = obj_new(100 + (uint64_t)i, i);
        h[i] = fx_hmap_hash(o[i]->key, o[i]->klen);
        cr_assert_eq(fx_hmap_put_h(m, o[i]->key, o[i]->klen, h[i], o[i], NULL), FLUXON_OK);
        order[i] = i;
    }
    uint64_t x = 88172645463325252ull;
    for (int i = N - 1; i > 0; i--) { /* xorshift shuffle */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (int k = 0; k < N; k++) {
        int i = order[k];
        cr_assert_eq(fx_hmap_del_obj(m, h[i], o[i]), FLUXON_OK, "object %d", i);
        cr_assert_eq(fx_hmap_del_obj(m, h[i], o[i]), FLUXON_ERR_NOT_FOUND, "object %d twice", i);
        for (int q = k + 1; q < N; q++)
            cr_assert_eq(fx_hmap_get(m, o[order[q]]->key, o[order[q]]->klen), o[order[q]], "object %d after %d left",
                         order[q], i);
    }
    cr_assert_eq(fx_hmap_count(m), 0);
    for (int i = 0; i < N; i++) free(o[i]);
    free(a);
    free(a2);
    fx_hmap_destroy(m);
}

/* 200k random operations over 4000 keys against an array, in an intrusive map; then an
 * iteration that deletes as it goes returns every object once. */
Test(hmap, intrusive_differential_and_iteration_with_deletion)
{
    enum { NK = 4000 };
    static hm_obj_t *ref[NK];
    fx_hmap_t *m = NULL;
    cr_assert_eq(fx_hmap_create_intrusive(8, offsetof(hm_obj_t, key), offsetof(hm_obj_t, klen), &m), FLUXON_OK);
    uint64_t s = 5;
    for (int op = 0; op < 200000; op++) {
        uint64_t r = th_rand(&s), k = r % NK;
        char kb[72];
        page_key(kb, k);
        size_t kl = strlen(kb);
        uint64_t h = fx_hmap_hash(kb, kl);
        switch ((r >> 32) % 3) {
        case 0: {
            hm_obj_t *o = obj_new(k, op), *prev = NULL;
            cr_assert_eq(fx_hmap_put_h(m, o->key, o->klen, fx_hmap_hash(o->key, o->klen), o, (void **)&prev), FLUXON_OK);
            cr_assert_eq(prev, ref[k]);
            free(prev);
            ref[k] = o;
            break;
        }
        case 1: {
            hm_obj_t *v = NULL;
            int rc = fx_hmap_del_h(m, kb, kl, h, (void **)&v);
            cr_assert_eq(rc, ref[k] ? FLUXON_OK : FLUXON_ERR_NOT_FOUND);
            cr_assert_eq(v, ref[k]);
            free(v);
            ref[k] = NULL;
            break;
        }
        default: cr_assert_eq(fx_hmap_get_h(m, kb, kl, h), ref[k], "op %d", op);
        }
    }
    size_t live = 0, seen = 0;
    for (int k = 0; k < NK; k++) live += ref[k] != NULL;
    cr_assert_eq(fx_hmap_count(m), live);
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *key;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(m, &it, &key, &kl, &v)) {
        hm_obj_t *o = v;
        cr_assert_eq(key, o->key);
        cr_assert_eq(kl, o->klen);
        cr_assert_eq(fx_hmap_del(m, key, kl, NULL), FLUXON_OK);
        free(o);
        seen++;
    }
    cr_assert_eq(seen, live);
    cr_assert_eq(fx_hmap_count(m), 0);
    fx_hmap_destroy(m);
}
