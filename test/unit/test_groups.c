/* test_groups.c — Criterion suite for the shared batch helpers: atomic-group checks (every
 * edge, u64 overflow), the group iterator and whole-group rejection, the duplicate-key set
 * (against a quadratic reference, and linear cost), the bounded JSON writer, fx_hmap_clear
 * and the monotonic wait helpers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "groups.h"
#include "hmap.h"
#include "jsonbuf.h"

Test(groups, check_accepts_and_refuses_with_the_value_named)
{
    char why[160];
    uint64_t ok[] = {2, 1, 3};
    cr_assert(fx_groups_check(ok, 3, 6, why, sizeof why));
    cr_assert(fx_groups_check(NULL, 0, 6, why, sizeof why), "no groups: every key alone");
    uint64_t zero[] = {2, 0, 4};
    cr_assert_not(fx_groups_check(zero, 3, 6, why, sizeof why));
    cr_assert(strstr(why, "group 1 has length 0"), "%s", why);
    uint64_t shortsum[] = {2, 1};
    cr_assert_not(fx_groups_check(shortsum, 2, 6, why, sizeof why));
    cr_assert(strstr(why, "sum to 3"), "%s", why);
    uint64_t over[] = {UINT64_MAX, 2}; /* wraps to 1 if summed naively */
    cr_assert_not(fx_groups_check(over, 2, 1, why, sizeof why));
    uint64_t wrap[] = {1, UINT64_MAX}; /* 1 + (2^64 - 1) wraps to 0 */
    cr_assert_not(fx_groups_check(wrap, 2, 2, NULL, 0));
    cr_assert_not(fx_groups_check(ok, 7, 6, why, sizeof why), "more groups than keys");
    uint32_t ok32[] = {1, 2};
    cr_assert(fx_groups_check32(ok32, 2, 3, why, sizeof why));
    uint32_t bad32[] = {UINT32_MAX, 1};
    cr_assert_not(fx_groups_check32(bad32, 2, 3, why, sizeof why));
}

static void count_cb(void *arg, size_t i) { ((size_t *)arg)[i]++; }

Test(groups, iterator_and_whole_group_rejection)
{
    uint64_t lens[] = {2, 1, 3};
    fx_group_iter_t it = fx_group_iter(lens, 3, 6);
    size_t starts[3], ls[3], k = 0;
    while (fx_group_next(&it)) {
        cr_assert_eq(it.g, k);
        starts[k] = it.start;
        ls[k++] = it.len;
    }
    cr_assert_eq(k, 3);
    cr_assert(starts[0] == 0 && starts[1] == 2 && starts[2] == 3);
    cr_assert(ls[0] == 2 && ls[1] == 1 && ls[2] == 3);
    it = fx_group_iter(NULL, 0, 4);
    k = 0;
    while (fx_group_next(&it)) cr_assert(it.start == k++ && it.len == 1);
    cr_assert_eq(k, 4);
    int st[6] = {0, 0, 0, 0, 5, 0};
    size_t seen[6] = {0};
    cr_assert_eq(fx_groups_reject(lens, 3, 6, st, 0, 9, count_cb, seen), 2);
    cr_assert(st[0] == 0 && st[1] == 0 && st[2] == 0 && st[3] == 9 && st[4] == 5 && st[5] == 9);
    cr_assert(seen[3] == 1 && seen[5] == 1 && seen[4] == 0);
    /* no groups: each key is its own group, so a refused key takes no other with it */
    int solo[4] = {0, 5, 0, 7};
    size_t seen0[4] = {0};
    cr_assert_eq(fx_groups_reject(NULL, 0, 4, solo, 0, 9, count_cb, seen0), 0);
    cr_assert(solo[0] == 0 && solo[1] == 5 && solo[2] == 0 && solo[3] == 7);
    cr_assert(!seen0[0] && !seen0[1] && !seen0[2] && !seen0[3]);
}

Test(groups, keyset_finds_exactly_the_duplicates)
{
    enum { N = 2000 };
    char keys[N][16];
    size_t lens[N];
    for (int i = 0; i < N; i++) lens[i] = (size_t)snprintf(keys[i], sizeof keys[i], "k%d", (i * 7) % 1500);
    fx_keyset_t *s;
    cr_assert_eq(fx_keyset_create(N, &s), FLUXON_OK);
    for (int i = 0; i < N; i++) {
        bool dup_ref = false;
        for (int j = 0; j < i && !dup_ref; j++) dup_ref = lens[j] == lens[i] && !memcmp(keys[j], keys[i], lens[i]);
        int rc = fx_keyset_add(s, keys[i], lens[i]);
        cr_assert_eq(rc, dup_ref ? FLUXON_ERR_KEY_EXISTS : FLUXON_OK, "key %d", i);
    }
    fx_keyset_destroy(s);
    cr_assert_eq(fx_keyset_create(1, &s), FLUXON_OK);
    cr_assert_eq(fx_keyset_add(s, "", 0), FLUXON_OK, "the empty key is a key");
    cr_assert_eq(fx_keyset_add(s, NULL, 0), FLUXON_ERR_KEY_EXISTS);
    cr_assert_eq(fx_keyset_add(s, "x", 1), FLUXON_ERR_INVALID_ARGUMENT, "more keys than it was sized for");
    fx_keyset_destroy(s);
}

Test(groups, keyset_is_linear)
{
    enum { N = 1 << 16 };
    char (*keys)[24] = malloc((size_t)N * 24);
    cr_assert_not_null(keys);
    for (int i = 0; i < N; i++) snprintf(keys[i], 24, "page-%08d_0_8", i);
    fx_keyset_t *s;
    cr_assert_eq(fx_keyset_create(N, &s), FLUXON_OK);
    uint64_t t0 = fx_now_ns();
    for (int i = 0; i < N; i++) cr_assert_eq(fx_keyset_add(s, keys[i], strlen(keys[i])), FLUXON_OK);
    uint64_t ms = (fx_now_ns() - t0) / 1000000u;
    fx_keyset_destroy(s);
    free(keys);
    /* a quadratic scan of 64k keys is ~2e9 compares (seconds); the set takes a few ms */
    cr_assert_lt(ms, 1000, "64k keys took %llu ms", (unsigned long long)ms);
}

Test(groups, jsonbuf_clamps_and_reports_overflow)
{
    char buf[16];
    fx_jbuf_t j = fx_jbuf(buf, sizeof buf);
    fx_jbuf_printf(&j, "{\"a\":%d", 1);
    fx_jbuf_str(&j, "x\"y", 3);
    cr_assert_not(j.overflow);
    cr_assert_str_eq(buf, "{\"a\":1\"x\\\"y\"");
    fx_jbuf_printf(&j, "%s", "0123456789");
    cr_assert(j.overflow);
    cr_assert_eq(j.len, sizeof buf - 1);
    cr_assert_eq(strlen(buf), sizeof buf - 1);
    fx_jbuf_printf(&j, "more");
    cr_assert_eq(strlen(buf), sizeof buf - 1, "nothing is written once it overflowed");
}

static int freed;
static void count_free(void *v) { freed += *(int *)v; }

Test(groups, hmap_clear_frees_every_value_and_stays_usable)
{
    fx_hmap_t *m;
    cr_assert_eq(fx_hmap_create(0, &m), FLUXON_OK);
    static int one = 1;
    char k[8];
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "%d", i);
        cr_assert_eq(fx_hmap_put(m, k, strlen(k), &one, NULL), FLUXON_OK);
    }
    freed = 0;
    fx_hmap_clear(m, count_free);
    cr_assert_eq(freed, 100);
    cr_assert_eq(fx_hmap_count(m), 0);
    cr_assert_null(fx_hmap_get(m, "5", 1));
    cr_assert_eq(fx_hmap_put(m, "5", 1, &one, NULL), FLUXON_OK);
    cr_assert_eq(fx_hmap_get(m, "5", 1), &one);
    fx_hmap_destroy(m);
}

Test(groups, monotonic_waits)
{
    sem_t s;
    sem_init(&s, 0, 0);
    uint64_t t0 = fx_now_ms();
    cr_assert_not(fx_sem_wait_ms(&s, 50));
    cr_assert_geq(fx_now_ms() - t0, 50);
    sem_post(&s);
    cr_assert(fx_sem_wait_ms(&s, 0), "a posted semaphore is taken even with a zero wait");
    sem_destroy(&s);
    struct timespec a = fx_deadline_ts(1500), b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    cr_assert(a.tv_nsec >= 0 && a.tv_nsec < 1000000000L);
    cr_assert_geq(a.tv_sec, b.tv_sec + 1);
    pthread_cond_t c;
    cr_assert_eq(fx_cond_init_monotonic(&c), 0);
    pthread_cond_destroy(&c);
}

/* The TP cohort grammar of include/fluxon.h, as FluxonStore writes it
 * (python/fluxon/sglang_keys.py: <namespace>_<hash>_<part>_<rank>_<size>). */
Test(groups, cohort_suffix_is_rank_then_size)
{
    struct { const char *key; size_t cut; } c[] = {
        {"m.0123456789ab_deadbeef_k_0_2", 25}, {"m.0123456789ab_deadbeef_k_1_2", 25},
        {"m.0123456789ab_deadbeef_v_1_2", 25}, {"x_kv_0_1", 4}, {"p_k.pp1_3_8", 7},
        {"a_2_2", 5},            /* rank >= size: no cohort, the whole key */
        {"a_1_0", 5}, {"_0_2", 4}, /* nothing before the suffix */
        {"a_k_2", 5}, {"a__2", 4}, {"a_0_", 4}, {"0_2", 3}, {"", 0},
        {"a_0_1234567890", 14},  /* more than 9 digits */
        {"a_12_123456789", 1},   {"hash_7_k", 8}, /* the old "_<rank>_k" keys: no cohort */
    };
    for (size_t i = 0; i < FX_ARRAY_LEN(c); i++)
        cr_assert_eq(fx_cohort_len(c[i].key, strlen(c[i].key)), c[i].cut, "%s: %zu", c[i].key,
                     fx_cohort_len(c[i].key, strlen(c[i].key)));
    cr_assert_eq(fx_cohort_len(NULL, 0), 0);
}
