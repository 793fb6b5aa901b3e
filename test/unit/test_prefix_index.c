/* test_prefix_index.c — Criterion suite for the ordered key index behind `fluxon ls`
 * (cache/prefix_index.c): ordering with NUL bytes and prefixes of keys, prefix filtering,
 * paging with `after`, early stop, and a randomized differential test vs a sorted array. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "prefix_index.h"

static fx_prefix_index_t *mk(void)
{
    fx_prefix_index_t *x = NULL;
    cr_assert_eq(fx_prefix_index_create(&x), FLUXON_OK);
    return x;
}

static uint64_t tp_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct kbuf {
    const char *k;
    size_t n;
} kbuf_t;

/* Collects listed keys (copies) into an array. */
typedef struct coll {
    char **keys;
    size_t *lens;
    size_t n, cap, stop_at;
} coll_t;

static int coll_cb(void *arg, const char *key, size_t klen)
{
    coll_t *c = arg;
    cr_assert_eq(key[klen], 0, "listed key is NUL-terminated");
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 16;
        c->keys = realloc(c->keys, c->cap * sizeof *c->keys);
        c->lens = realloc(c->lens, c->cap * sizeof *c->lens);
    }
    c->keys[c->n] = malloc(klen + 1);
    memcpy(c->keys[c->n], key, klen);
    c->lens[c->n] = klen;
    c->n++;
    return c->stop_at && c->n >= c->stop_at;
}

static void coll_free(coll_t *c)
{
    for (size_t i = 0; i < c->n; i++) free(c->keys[i]);
    free(c->keys);
    free(c->lens);
    memset(c, 0, sizeof *c);
}

static int kcmp(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

static void ins(fx_prefix_index_t *x, const char *k, size_t n)
{
    cr_assert_eq(fx_prefix_index_insert(x, k, n), FLUXON_OK);
}

#define S(str) str, sizeof(str) - 1

Test(prefix_index, basics)
{
    cr_assert_eq(fx_prefix_index_create(NULL), FLUXON_ERR_INVALID_ARGUMENT);
    fx_prefix_index_destroy(NULL);
    fx_prefix_index_t *x = mk();
    coll_t c = {0};
    cr_assert_eq(fx_prefix_index_count(x), 0);
    cr_assert_eq(fx_prefix_index_list(x, NULL, 0, NULL, 0, SIZE_MAX, coll_cb, &c), 0);
    cr_assert_eq(fx_prefix_index_remove(x, S("a")), FLUXON_ERR_NOT_FOUND);
    cr_assert_not(fx_prefix_index_contains(x, S("a")));
    ins(x, S("b"));
    cr_assert_eq(fx_prefix_index_insert(x, S("b")), FLUXON_ERR_KEY_EXISTS);
    ins(x, S("a"));
    ins(x, S("c"));
    cr_assert_eq(fx_prefix_index_insert(x, S("a")), FLUXON_ERR_KEY_EXISTS);
    cr_assert_eq(fx_prefix_index_count(x), 3);
    cr_assert(fx_prefix_index_contains(x, S("a")));
    cr_assert_not(fx_prefix_index_contains(x, S("ab")));
    cr_assert_not(fx_prefix_index_contains(x, NULL, 0));
    cr_assert_eq(fx_prefix_index_remove(x, S("ab")), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fx_prefix_index_remove(x, S("b")), FLUXON_OK);
    cr_assert_eq(fx_prefix_index_remove(x, S("b")), FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(fx_prefix_index_count(x), 2);
    cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    cr_assert_eq(fx_prefix_index_remove(x, S("a")), FLUXON_OK);
    cr_assert_eq(fx_prefix_index_remove(x, S("c")), FLUXON_OK);
    cr_assert_eq(fx_prefix_index_count(x), 0);
    cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    ins(x, S("z")); /* reusable after emptying */
    cr_assert_eq(fx_prefix_index_list(x, NULL, 0, NULL, 0, SIZE_MAX, coll_cb, &c), 1);
    coll_free(&c);
    fx_prefix_index_destroy(x);
}

/* Keys with NUL bytes, empty key, proper prefixes, bytes >= 0x80: memcmp order with the
 * shorter key first. */
Test(prefix_index, ordering_odd_keys)
{
    static const kbuf_t sorted[] = {
        {"", 0},          {"\0", 1},      {"\0\0", 2}, {"\0\x01", 2}, {"a", 1},
        {"a\0", 2},       {"a\0\0", 3},   {"a\0b", 3}, {"a\x01", 2},  {"ab", 2},
        {"ab\0", 3},      {"abc", 3},     {"b", 1},    {"\x7f", 1},   {"\x80", 1},
        {"\xff", 1},      {"\xff\0", 2},  {"\xff\xff", 2},
    };
    size_t n = sizeof sorted / sizeof sorted[0];
    fx_prefix_index_t *x = mk();
    /* Insert in a scrambled order. */
    for (size_t i = 0; i < n; i++) ins(x, sorted[(i * 7) % n].k, sorted[(i * 7) % n].n);
    cr_assert_eq(fx_prefix_index_count(x), n);
    cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(fx_prefix_index_insert(x, sorted[i].k, sorted[i].n), FLUXON_ERR_KEY_EXISTS);
    coll_t c = {0};
    cr_assert_eq(fx_prefix_index_list(x, NULL, 0, NULL, 0, SIZE_MAX, coll_cb, &c), n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(c.lens[i], sorted[i].n, "key %zu", i);
        cr_assert(memcmp(c.keys[i], sorted[i].k, sorted[i].n) == 0, "key %zu", i);
    }
    coll_free(&c);
    /* Prefix "a\0": a\0, a\0\0, a\0b. */
    cr_assert_eq(fx_prefix_index_list(x, "a\0", 2, NULL, 0, SIZE_MAX, coll_cb, &c), 3);
    cr_assert(c.lens[0] == 2 && c.lens[1] == 3 && c.lens[2] == 3 && c.keys[2][2] == 'b');
    coll_free(&c);
    /* Prefix "\0": 3 keys; prefix "": all. */
    cr_assert_eq(fx_prefix_index_list(x, "\0", 1, NULL, 0, SIZE_MAX, coll_cb, &c), 3);
    coll_free(&c);
    cr_assert_eq(fx_prefix_index_list(x, "", 0, NULL, 0, SIZE_MAX, coll_cb, &c), n);
    coll_free(&c);
    /* after = "" (present, the smallest) skips only it; after NULL skips nothing. */
    cr_assert_eq(fx_prefix_index_list(x, NULL, 0, "", 0, SIZE_MAX, coll_cb, &c), n - 1);
    cr_assert_eq(c.lens[0], 1);
    coll_free(&c);
    /* Remove each in turn, checking the structure. */
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(fx_prefix_index_remove(x, sorted[(i * 5) % n].k, sorted[(i * 5) % n].n),
                     FLUXON_OK);
        cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    }
    cr_assert_eq(fx_prefix_index_count(x), 0);
    fx_prefix_index_destroy(x);
}

Test(prefix_index, prefix_filter_and_paging)
{
    fx_prefix_index_t *x = mk();
    char k[80];
    /* 3 models x 200 pages: "m<model>/<page as 64 hex>_0_2". */
    for (int mdl = 0; mdl < 3; mdl++)
        for (int p = 199; p >= 0; p--) {
            int n = snprintf(k, sizeof k, "m%d/%064x_0_2", mdl, p * 2654435761u);
            ins(x, k, (size_t)n);
        }
    ins(x, S("m1"));   /* equals the prefix itself */
    ins(x, S("m1/"));
    ins(x, S("m10/x")); /* shares "m1" but not "m1/" */
    cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    coll_t c = {0};
    cr_assert_eq(fx_prefix_index_list(x, S("m1/"), NULL, 0, SIZE_MAX, coll_cb, &c), 201);
    cr_assert_eq(c.lens[0], 3, "m1/ itself first");
    for (size_t i = 1; i < c.n; i++) {
        cr_assert(kcmp(c.keys[i - 1], c.lens[i - 1], c.keys[i], c.lens[i]) < 0);
        cr_assert(memcmp(c.keys[i], "m1/", 3) == 0);
    }
    coll_free(&c);
    cr_assert_eq(fx_prefix_index_list(x, S("m1"), NULL, 0, SIZE_MAX, coll_cb, &c), 203);
    coll_free(&c);
    cr_assert_eq(fx_prefix_index_list(x, S("m3"), NULL, 0, SIZE_MAX, coll_cb, &c), 0);
    cr_assert_eq(fx_prefix_index_list(x, S("m1/zz"), NULL, 0, SIZE_MAX, coll_cb, &c), 0);
    cr_assert_eq(fx_prefix_index_list(x, S("m"), NULL, 0, 0, coll_cb, &c), 0, "limit 0");
    /* A prefix longer than every key. */
    memset(k, 'm', sizeof k);
    cr_assert_eq(fx_prefix_index_list(x, k, sizeof k, NULL, 0, SIZE_MAX, coll_cb, &c), 0);

    /* Paging through "m0/" 7 keys at a time gives the full listing. */
    coll_t all = {0};
    cr_assert_eq(fx_prefix_index_list(x, S("m0/"), NULL, 0, SIZE_MAX, coll_cb, &all), 200);
    size_t got = 0, pages = 0;
    char last[80];
    size_t lastn = 0;
    bool first = true;
    for (;;) {
        coll_t pg = {0};
        size_t r = fx_prefix_index_list(x, S("m0/"), first ? NULL : last, lastn, 7, coll_cb, &pg);
        cr_assert_eq(r, pg.n);
        cr_assert_leq(r, 7);
        for (size_t i = 0; i < r; i++) {
            cr_assert_eq(pg.lens[i], all.lens[got + i]);
            cr_assert(memcmp(pg.keys[i], all.keys[got + i], pg.lens[i]) == 0);
        }
        got += r;
        if (r) {
            memcpy(last, pg.keys[r - 1], pg.lens[r - 1]);
            lastn = pg.lens[r - 1];
        }
        coll_free(&pg);
        first = false;
        pages++;
        if (r < 7) break;
    }
    cr_assert_eq(got, 200);
    cr_assert_eq(pages, 200 / 7 + 1);
    /* `after` need not be present; before / after the prefix range. */
    cr_assert_eq(fx_prefix_index_list(x, S("m0/"), S("m0/0"), SIZE_MAX, coll_cb, &c), 200);
    coll_free(&c);
    cr_assert_eq(fx_prefix_index_list(x, S("m0/"), S("a"), SIZE_MAX, coll_cb, &c), 200);
    coll_free(&c);
    cr_assert_eq(fx_prefix_index_list(x, S("m0/"), S("m0/~"), SIZE_MAX, coll_cb, &c), 0);
    cr_assert_eq(fx_prefix_index_list(x, S("m0/"), S("z"), SIZE_MAX, coll_cb, &c), 0);
    /* After a removed key resumes at its successor. */
    cr_assert_eq(fx_prefix_index_remove(x, all.keys[50], all.lens[50]), FLUXON_OK);
    cr_assert_eq(fx_prefix_index_list(x, S("m0/"), all.keys[50], all.lens[50], 1, coll_cb, &c), 1);
    cr_assert(c.lens[0] == all.lens[51] && memcmp(c.keys[0], all.keys[51], c.lens[0]) == 0);
    coll_free(&c);
    /* Early stop from the callback. */
    c.stop_at = 5;
    cr_assert_eq(fx_prefix_index_list(x, S("m2/"), NULL, 0, SIZE_MAX, coll_cb, &c), 5);
    coll_free(&c);
    coll_free(&all);
    fx_prefix_index_destroy(x);
}

/* Degenerate shape: "a", "aa", "aaa", ... makes a path as deep as the key count. */
Test(prefix_index, deep_chain)
{
    enum { N = 3000 };
    char *k = malloc(N);
    memset(k, 'a', N);
    fx_prefix_index_t *x = mk();
    for (size_t n = N; n >= 1; n--) ins(x, k, n);
    cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    coll_t c = {0};
    cr_assert_eq(fx_prefix_index_list(x, k, 10, k, 20, SIZE_MAX, coll_cb, &c), N - 20);
    for (size_t i = 0; i < c.n; i++) cr_assert_eq(c.lens[i], 21 + i);
    coll_free(&c);
    for (size_t n = 1; n <= N; n += 2) cr_assert_eq(fx_prefix_index_remove(x, k, n), FLUXON_OK);
    cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    cr_assert_eq(fx_prefix_index_count(x), N / 2);
    free(k);
    fx_prefix_index_destroy(x); /* destroy frees a deep tree without recursion */
}

/* Reference: sorted array of (key, len). */
typedef struct ref {
    kbuf_t *a;
    size_t n;
} ref_t;

static size_t ref_lower(const ref_t *r, const char *k, size_t n)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (kcmp(r->a[mid].k, r->a[mid].n, k, n) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void gen_key(uint64_t *s, char *k, size_t *n)
{
    /* Small alphabet with NUL so prefixes, NULs and length ties are frequent; about
     * 3,900 distinct keys (lengths 0..5 over 5 symbols). */
    static const char alpha[] = {'0', 'a', 0, '\xff', '_'};
    *n = (size_t)(tp_rand(s) % 6);
    for (size_t i = 0; i < *n; i++) k[i] = alpha[tp_rand(s) % sizeof alpha];
}

Test(prefix_index, randomized_differential, .timeout = 300)
{
    fx_prefix_index_t *x = mk();
    ref_t r = {calloc(4000, sizeof(kbuf_t)), 0};
    uint64_t s = 99;
    coll_t c = {0};
    for (int op = 0; op < 120000; op++) {
        char k[16], p[16], a[16];
        size_t kn, pn, an;
        gen_key(&s, k, &kn);
        size_t pos = ref_lower(&r, k, kn);
        bool present = pos < r.n && kcmp(r.a[pos].k, r.a[pos].n, k, kn) == 0;
        unsigned kind = (unsigned)(tp_rand(&s) % 10);
        if (kind < 5) {
            int rc = fx_prefix_index_insert(x, k, kn);
            cr_assert_eq(rc, present ? FLUXON_ERR_KEY_EXISTS : FLUXON_OK);
            if (!present) {
                memmove(&r.a[pos + 1], &r.a[pos], (r.n - pos) * sizeof *r.a);
                char *copy = malloc(kn + 1);
                memcpy(copy, k, kn);
                r.a[pos] = (kbuf_t){copy, kn};
                r.n++;
            }
        } else if (kind < 8) {
            int rc = fx_prefix_index_remove(x, k, kn);
            cr_assert_eq(rc, present ? FLUXON_OK : FLUXON_ERR_NOT_FOUND);
            if (present) {
                free((void *)r.a[pos].k);
                memmove(&r.a[pos], &r.a[pos + 1], (r.n - pos - 1) * sizeof *r.a);
                r.n--;
            }
        } else if (kind < 9) {
            cr_assert_eq(fx_prefix_index_contains(x, k, kn), present);
        } else {
            /* List: random prefix (short), random optional after, random limit. */
            gen_key(&s, p, &pn);
            pn = pn % 4;
            bool use_after = tp_rand(&s) % 2;
            gen_key(&s, a, &an);
            if (use_after && tp_rand(&s) % 2 && r.n) { /* sometimes a present key */
                const kbuf_t *e = &r.a[tp_rand(&s) % r.n];
                memcpy(a, e->k, e->n);
                an = e->n;
            }
            size_t limit = tp_rand(&s) % 3 == 0 ? SIZE_MAX : (size_t)(tp_rand(&s) % 20);
            size_t got = fx_prefix_index_list(x, p, pn, use_after ? a : NULL, an, limit, coll_cb, &c);
            /* Expected: from lower bound of max(prefix, after+) while prefix matches. */
            size_t i = ref_lower(&r, p, pn), want = 0;
            if (use_after) {
                size_t j = ref_lower(&r, a, an);
                if (j < r.n && kcmp(r.a[j].k, r.a[j].n, a, an) == 0) j++;
                if (j > i) i = j;
            }
            for (; i < r.n && want < limit; i++) {
                if (r.a[i].n < pn || memcmp(r.a[i].k, p, pn) != 0) break;
                cr_assert_lt(want, c.n, "op %d: listing too short", op);
                cr_assert(c.lens[want] == r.a[i].n && memcmp(c.keys[want], r.a[i].k, r.a[i].n) == 0,
                          "op %d: mismatch at %zu", op, want);
                want++;
            }
            cr_assert_eq(got, want, "op %d: got %zu want %zu", op, got, want);
            cr_assert_eq(c.n, want);
            coll_free(&c);
        }
        cr_assert_eq(fx_prefix_index_count(x), r.n);
        if (op % 5000 == 0) cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    }
    cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    cr_log_info("prefix differential: %zu keys at the end", r.n);
    for (size_t i = 0; i < r.n; i++) free((void *)r.a[i].k);
    free(r.a);
    fx_prefix_index_destroy(x);
}

/* Hex page keys at scale: full listing sorted, check passes, paging by 1000. */
Test(prefix_index, hex_keys_scale)
{
    enum { N = 100000 };
    fx_prefix_index_t *x = mk();
    uint64_t s = 3;
    char k[69];
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "%016llx%016llx%016llx%016llx_0_2",
                 (unsigned long long)tp_rand(&s), (unsigned long long)tp_rand(&s),
                 (unsigned long long)tp_rand(&s), (unsigned long long)tp_rand(&s));
        ins(x, k, 68);
    }
    cr_assert_eq(fx_prefix_index_check(x), FLUXON_OK);
    size_t total = 0;
    char last[69];
    bool first = true;
    for (;;) {
        coll_t c = {0};
        size_t r = fx_prefix_index_list(x, NULL, 0, first ? NULL : last, 68, 1000, coll_cb, &c);
        for (size_t i = 0; i < r; i++) {
            cr_assert_eq(c.lens[i], 68);
            if (!first || i) cr_assert(memcmp(i ? c.keys[i - 1] : last, c.keys[i], 68) < 0);
        }
        if (r) memcpy(last, c.keys[r - 1], 68);
        total += r;
        coll_free(&c);
        first = false;
        if (r < 1000) break;
    }
    cr_assert_eq(total, N);
    coll_t c = {0};
    size_t r = fx_prefix_index_list(x, S("ab"), NULL, 0, SIZE_MAX, coll_cb, &c);
    cr_assert(r > N / 256 / 2 && r < N / 256 * 2, "~1/256 of keys start with ab: %zu", r);
    coll_free(&c);
    fx_prefix_index_destroy(x);
}

/* Issue 18: the master builds its index from sorted keys with append: the same tree as
 * inserting them (every invariant, every key listed in order), keys that are prefixes of
 * the next and NUL bytes included; a key not greater than the greatest is refused and
 * changes nothing. */
static int kbuf_cmp(const void *a, const void *b)
{
    const kbuf_t *x = a, *y = b;
    return kcmp(x->k, x->n, y->k, y->n);
}

Test(prefix_index, append_of_sorted_keys_builds_the_same_index_as_insert)
{
    enum { N = 5000 };
    static char store[N][24];
    kbuf_t v[N];
    uint64_t s = 11;
    size_t n = 0;
    for (int i = 0; i < N; i++) {
        uint64_t r = tp_rand(&s);
        size_t len = 1 + r % 6; /* short keys over a tiny alphabet: many prefixes, many duplicates */
        for (size_t j = 0; j < len; j++) store[i][j] = "ab\0c"[(r >> (8 + 2 * j)) & 3];
        v[n++] = (kbuf_t){store[i], len};
    }
    qsort(v, n, sizeof *v, kbuf_cmp);
    size_t u = 0; /* unique */
    for (size_t i = 0; i < n; i++)
        if (u == 0 || kcmp(v[u - 1].k, v[u - 1].n, v[i].k, v[i].n) != 0) v[u++] = v[i];
    fx_prefix_index_t *a = mk();
    cr_assert_eq(fx_prefix_index_append(a, S("")), FLUXON_OK, "the smallest key first");
    for (size_t i = 0; i < u; i++) cr_assert_eq(fx_prefix_index_append(a, v[i].k, v[i].n), FLUXON_OK, "key %zu", i);
    cr_assert_eq(fx_prefix_index_count(a), u + 1);
    cr_assert_eq(fx_prefix_index_check(a), FLUXON_OK);
    /* refused: equal to the greatest, smaller, a proper prefix of the greatest */
    const kbuf_t *last = &v[u - 1];
    cr_assert_eq(fx_prefix_index_append(a, last->k, last->n), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_prefix_index_append(a, v[0].k, v[0].n), FLUXON_ERR_INVALID_ARGUMENT);
    if (last->n > 1) cr_assert_eq(fx_prefix_index_append(a, last->k, last->n - 1), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fx_prefix_index_count(a), u + 1);
    coll_t c = {0};
    cr_assert_eq(fx_prefix_index_list(a, NULL, 0, NULL, 0, SIZE_MAX, coll_cb, &c), u + 1);
    cr_assert_eq(c.lens[0], 0);
    for (size_t i = 0; i < u; i++)
        cr_assert(c.lens[i + 1] == v[i].n && memcmp(c.keys[i + 1], v[i].k, v[i].n) == 0, "key %zu in order", i);
    coll_free(&c);
    /* the appended index keeps working as an ordinary one */
    cr_assert_eq(fx_prefix_index_insert(a, S("ab\0zz")), FLUXON_OK);
    cr_assert_eq(fx_prefix_index_remove(a, v[u / 2].k, v[u / 2].n), FLUXON_OK);
    cr_assert_eq(fx_prefix_index_check(a), FLUXON_OK);
    fx_prefix_index_destroy(a);
}
