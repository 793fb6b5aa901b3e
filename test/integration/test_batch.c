/* test_batch.c — the batch copy API (issue 20): fluxon_batch_put_from and
 * fluxon_batch_get_into. Byte-exact round trips (local and through another owner),
 * every per-key status (stored, exists, duplicate, group rejected; restored, miss,
 * group rejected, cancelled, a destination of another length), prefix and all-or-nothing
 * semantics, atomic groups, and bad input refused with a specific status before
 * anything is reserved. Every test ends with the owner's holders, handles and prepared
 * slots back at zero. */
#include <criterion/criterion.h>

#include "kvfix.h"

TestSuite(batch, .fini = kf_down, .timeout = 90);

#define BN 16
#define BLEN 12288 /* three 4 KiB pages */

typedef struct bt {
    char names[BN][48];
    const char *keys[BN];
    uint8_t *src[BN], *dst[BN];
    const void *srcp[BN];
    void *dstp[BN];
    uint64_t lens[BN], caps[BN], vlens[BN];
    int st[BN];
} bt_t;

static bt_t *bt_new(const char *pfx, uint64_t seed)
{
    bt_t *b = calloc(1, sizeof *b);
    for (int i = 0; i < BN; i++) {
        snprintf(b->names[i], sizeof b->names[i], "%s-%02d", pfx, i);
        b->keys[i] = b->names[i];
        b->src[i] = malloc(BLEN);
        b->dst[i] = calloc(1, BLEN);
        kf_fill(b->src[i], BLEN, seed * 100 + (uint64_t)i);
        b->srcp[i] = b->src[i];
        b->dstp[i] = b->dst[i];
        b->lens[i] = BLEN;
        b->caps[i] = BLEN;
    }
    return b;
}

static void bt_free(bt_t *b)
{
    for (int i = 0; i < BN; i++) {
        free(b->src[i]);
        free(b->dst[i]);
    }
    free(b);
}

static void bt_put_ok(fluxon_client *c, bt_t *b, size_t n)
{
    cr_assert_eq(fluxon_batch_put_from(c, b->keys, n, b->srcp, b->lens, NULL, b->st), FLUXON_OK);
    for (size_t i = 0; i < n; i++) cr_assert_eq(b->st[i], FLUXON_OK, "key %zu: %s", i, fluxon_status_string(b->st[i]));
}

static void quiet(fluxon_client *c)
{
    cr_assert(kf_wait_stat(c, "holders", 0, 5000), "holders back to 0");
    cr_assert(kf_wait_stat(c, "handles_open", 0, 5000), "handles back to 0");
    cr_assert(kf_wait_stat(c, "slots_prepared", 0, 5000), "prepared slots back to 0");
}

Test(batch, round_trip_is_byte_exact_locally_and_through_another_owner)
{
    kf_up(2);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    bt_t *t = bt_new("rt", 1);
    bt_put_ok(a, t, BN);
    size_t nr = 99;
    cr_assert_eq(fluxon_batch_get_into(a, t->keys, BN, t->dstp, t->caps, 1, NULL, 0, t->st, t->vlens, &nr), FLUXON_OK);
    cr_assert_eq(nr, BN);
    for (int i = 0; i < BN; i++) {
        cr_assert_eq(t->st[i], FLUXON_OK);
        cr_assert_eq(t->vlens[i], BLEN);
        cr_assert(kf_check(t->dst[i], BLEN, 100 + (uint64_t)i), "local key %d byte-exact", i);
        memset(t->dst[i], 0, BLEN);
    }
    /* owner B fetches them over UCX first */
    cr_assert_eq(fluxon_batch_get_into(b, t->keys, BN, t->dstp, t->caps, 1, NULL, 0, t->st, NULL, &nr), FLUXON_OK);
    cr_assert_eq(nr, BN);
    for (int i = 0; i < BN; i++) cr_assert(kf_check(t->dst[i], BLEN, 100 + (uint64_t)i), "remote key %d byte-exact", i);
    /* a destination longer than the value (a short value under a page's key): never
     * restored as good, nothing written, the key's status says why */
    uint8_t *big = malloc(BLEN * 2);
    memset(big, 0xAB, BLEN * 2);
    void *bigp[2] = {t->dst[0], big};
    uint64_t len2[2] = {BLEN, BLEN * 2}, vl[2];
    int st1[2];
    cr_assert_eq(fluxon_batch_get_into(a, t->keys, 2, bigp, len2, 1, NULL, 0, st1, vl, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(nr, 1, "the prefix before the short value is restored");
    cr_assert_eq(st1[0], FLUXON_OK);
    cr_assert_eq(st1[1], FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(vl[1], 0);
    cr_assert(kf_check(t->dst[0], BLEN, 100));
    cr_assert_eq(big[0], 0xAB, "the short value is not copied");
    cr_assert_eq(big[BLEN], 0xAB);
    free(big);
    quiet(a);
    quiet(b);
    bt_free(t);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

Test(batch, put_statuses_per_key_exists_duplicate_and_group_rejected)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    bt_t *t = bt_new("ps", 2);
    bt_put_ok(c, t, 2); /* keys 0 and 1 exist now */
    /* keys 0..5 again: 0, 1 exist */
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 6, t->srcp, t->lens, NULL, t->st), FLUXON_OK);
    cr_assert_eq(t->st[0], FLUXON_ERR_KEY_EXISTS);
    cr_assert_eq(t->st[1], FLUXON_ERR_KEY_EXISTS);
    for (int i = 2; i < 6; i++) cr_assert_eq(t->st[i], FLUXON_OK, "key %d", i);
    /* groups {6,7} {0,8}: the second is rejected as a whole (key 0 exists) */
    const char *gk[4] = {t->keys[6], t->keys[7], t->keys[0], t->keys[8]};
    const void *gs[4] = {t->srcp[6], t->srcp[7], t->srcp[0], t->srcp[8]};
    uint32_t groups[2] = {2, 2};
    fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_ATOMIC_GROUPS, .atomic_group_lens = groups, .n_atomic_groups = 2};
    int st[4];
    cr_assert_eq(fluxon_batch_put_from(c, gk, 4, gs, t->lens, &o, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK);
    cr_assert_eq(st[1], FLUXON_OK);
    cr_assert_eq(st[2], FLUXON_ERR_KEY_EXISTS);
    cr_assert_eq(st[3], FLUXON_ERR_GROUP_REJECTED);
    size_t hits = 0;
    cr_assert_eq(fluxon_batch_exists(c, &t->keys[8], 1, &hits), FLUXON_OK);
    cr_assert_eq(hits, 0, "the rejected group member was not stored");
    /* the same key twice in one batch */
    const char *dk[2] = {"dup-x", "dup-x"};
    cr_assert_eq(fluxon_batch_put_from(c, dk, 2, t->srcp, t->lens, NULL, st), FLUXON_OK);
    cr_assert(st[0] == FLUXON_ERR_INVALID_ARGUMENT || st[1] == FLUXON_ERR_INVALID_ARGUMENT);
    /* every key rejected: nothing to commit, still FLUXON_OK with the statuses */
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, t->srcp, t->lens, NULL, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_ERR_KEY_EXISTS);
    cr_assert_eq(st[1], FLUXON_ERR_KEY_EXISTS);
    quiet(c);
    bt_free(t);
    fluxon_client_close(c);
}

Test(batch, get_prefix_stops_at_the_first_miss_with_per_key_reasons)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    bt_t *t = bt_new("gp", 3);
    bt_put_ok(c, t, 5); /* 0..4 exist, 5.. do not */
    size_t nr = 0;
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 8, t->dstp, t->caps, 1, NULL, 0, t->st, t->vlens, &nr), FLUXON_OK);
    cr_assert_eq(nr, 5);
    for (int i = 0; i < 5; i++) cr_assert(kf_check(t->dst[i], BLEN, 300 + (uint64_t)i));
    cr_assert_eq(t->st[5], FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(t->st[6], FLUXON_ERR_CANCELLED);
    cr_assert_eq(t->st[7], FLUXON_ERR_CANCELLED);
    cr_assert_eq(t->vlens[5], 0);
    /* groups {2} {2} {2}: the miss at 5 cuts group [4,6) whole */
    uint32_t g[4] = {2, 2, 2, 2};
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 8, t->dstp, t->caps, 1, g, 4, t->st, NULL, &nr), FLUXON_OK);
    cr_assert_eq(nr, 4);
    cr_assert_eq(t->st[3], FLUXON_OK);
    cr_assert_eq(t->st[4], FLUXON_ERR_GROUP_REJECTED);
    cr_assert_eq(t->st[5], FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(t->st[6], FLUXON_ERR_CANCELLED);
    /* all-or-nothing: nothing copied */
    memset(t->dst[0], 0, BLEN);
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 8, t->dstp, t->caps, 0, NULL, 0, t->st, NULL, &nr), FLUXON_OK);
    cr_assert_eq(nr, 0);
    cr_assert_eq(t->dst[0][0], 0, "all-or-nothing copied nothing");
    for (int i = 0; i < 5; i++) cr_assert_eq(t->st[i], FLUXON_ERR_GROUP_REJECTED, "key %d", i);
    cr_assert_eq(t->st[5], FLUXON_ERR_NOT_FOUND);
    /* all-or-nothing over hits only: everything */
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 5, t->dstp, t->caps, 0, NULL, 0, t->st, NULL, &nr), FLUXON_OK);
    cr_assert_eq(nr, 5);
    /* the first key missing: nothing, the rest cancelled */
    const char *mk[3] = {"gp-absent", t->keys[0], t->keys[1]};
    cr_assert_eq(fluxon_batch_get_into(c, mk, 3, t->dstp, t->caps, 1, NULL, 0, t->st, NULL, &nr), FLUXON_OK);
    cr_assert_eq(nr, 0);
    cr_assert_eq(t->st[0], FLUXON_ERR_NOT_FOUND);
    cr_assert_eq(t->st[1], FLUXON_ERR_CANCELLED);
    quiet(c);
    bt_free(t);
    fluxon_client_close(c);
}

Test(batch, a_destination_of_another_length_names_the_key_and_keeps_the_prefix_before_its_group)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    bt_t *t = bt_new("cap", 4);
    bt_put_ok(c, t, 6);
    t->caps[3] = BLEN - 1;
    size_t nr = 99;
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 6, t->dstp, t->caps, 1, NULL, 0, t->st, t->vlens, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(nr, 3);
    cr_assert(strstr(fluxon_last_error_message(), "key 3 (") && strstr(fluxon_last_error_message(), "dst_lens[3]"),
              "the reason names the key: [%s]", fluxon_last_error_message());
    for (int i = 0; i < 3; i++) cr_assert(kf_check(t->dst[i], BLEN, 400 + (uint64_t)i));
    cr_assert_eq(t->st[3], FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(t->st[4], FLUXON_ERR_CANCELLED);
    cr_assert_eq(t->dst[3][0], 0, "the too-small destination is not written");
    /* with groups {2}{2}{2}: group [2,4) is dropped whole */
    uint32_t g[3] = {2, 2, 2};
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 6, t->dstp, t->caps, 1, g, 3, t->st, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(nr, 2);
    cr_assert_eq(t->st[2], FLUXON_ERR_GROUP_REJECTED);
    cr_assert_eq(t->st[3], FLUXON_ERR_INVALID_ARGUMENT);
    /* all-or-nothing: nothing */
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 6, t->dstp, t->caps, 0, NULL, 0, t->st, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(nr, 0);
    cr_assert_eq(t->st[0], FLUXON_ERR_GROUP_REJECTED);
    quiet(c);
    bt_free(t);
    fluxon_client_close(c);
}

Test(batch, bad_input_is_refused_before_anything_is_reserved)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    bt_t *t = bt_new("bad", 5);
    long long prepared = kf_stat(c, "slots_prepared");
    size_t nr;
    /* put */
    cr_assert_eq(fluxon_batch_put_from(NULL, t->keys, 2, t->srcp, t->lens, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_put_from(c, NULL, 2, t->srcp, t->lens, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 0, t->srcp, t->lens, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, NULL, t->lens, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, t->srcp, NULL, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, t->srcp, t->lens, NULL, NULL), FLUXON_ERR_INVALID_ARGUMENT);
    const void *nullsrc[2] = {t->src[0], NULL};
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, nullsrc, t->lens, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    uint64_t mixed[2] = {BLEN, BLEN - 1}, zero[2] = {BLEN, 0}, huge[2] = {64ull << 20, 64ull << 20};
    cr_assert(strstr(fluxon_last_error_message(), "key 1 has src_ptrs[1] NULL"), "[%s]", fluxon_last_error_message());
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, t->srcp, mixed, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(fluxon_last_error_message(), "lens[1] is 12287 bytes but lens[0] is 12288"), "[%s]",
              fluxon_last_error_message());
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, t->srcp, zero, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(fluxon_last_error_message(), "key 1 has lens[1] 0"), "[%s]", fluxon_last_error_message());
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, t->srcp, huge, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT,
                 "a length over reserve.grant_bytes");
    const char *badk[2] = {t->keys[0], ""};
    cr_assert_eq(fluxon_batch_put_from(c, badk, 2, t->srcp, t->lens, NULL, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(fluxon_last_error_message(), "key 1 is empty (keys are 1..1024 bytes)");
    uint32_t badg[1] = {3};
    fluxon_put_options o = {.field_mask = FLUXON_PUT_OPT_ATOMIC_GROUPS, .atomic_group_lens = badg, .n_atomic_groups = 1};
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, t->srcp, t->lens, &o, t->st), FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(fluxon_last_error_message(), "atomic"), "the groups are named: [%s]", fluxon_last_error_message());
    cr_assert_eq(kf_stat(c, "slots_prepared"), prepared, "nothing reserved");
    size_t hits = 7;
    cr_assert_eq(fluxon_batch_exists(c, t->keys, 2, &hits), FLUXON_OK);
    cr_assert_eq(hits, 0, "nothing stored");
    /* get */
    cr_assert_eq(fluxon_batch_get_into(NULL, t->keys, 2, t->dstp, t->caps, 1, NULL, 0, t->st, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 0, t->dstp, t->caps, 1, NULL, 0, t->st, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 2, NULL, t->caps, 1, NULL, 0, t->st, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 2, t->dstp, NULL, 1, NULL, 0, t->st, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 2, t->dstp, t->caps, 1, NULL, 0, NULL, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 2, t->dstp, t->caps, 1, NULL, 0, t->st, NULL, NULL),
                 FLUXON_ERR_INVALID_ARGUMENT);
    void *nulldst[2] = {t->dst[0], NULL};
    uint64_t zcap[2] = {BLEN, 0};
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 2, nulldst, t->caps, 1, NULL, 0, t->st, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 2, t->dstp, zcap, 1, NULL, 0, t->st, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(fluxon_last_error_message(), "key 1 has dst_lens[1] 0"), "[%s]", fluxon_last_error_message());
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 2, t->dstp, t->caps, 1, badg, 1, t->st, NULL, &nr),
                 FLUXON_ERR_INVALID_ARGUMENT);
    quiet(c);
    bt_free(t);
    fluxon_client_close(c);
}

Test(batch, a_closed_owner_is_unavailable_not_a_crash)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    bt_t *t = bt_new("gone", 6);
    bt_put_ok(c, t, 2);
    fluxon_node_stop(kf_owner[0]);
    kf_owner[0] = NULL;
    size_t nr = 0;
    int rc = FLUXON_OK;
    double end = th_now_s() + 5;
    while (rc == FLUXON_OK && th_now_s() < end) { /* the client learns of the loss asynchronously */
        rc = fluxon_batch_get_into(c, t->keys, 2, t->dstp, t->caps, 1, NULL, 0, t->st, NULL, &nr);
        if (rc == FLUXON_OK) th_sleep_ms(10);
    }
    cr_assert(rc == FLUXON_ERR_UNAVAILABLE || rc == FLUXON_ERR_STALE, "got %s", fluxon_status_string(rc));
    rc = fluxon_batch_put_from(c, &t->keys[2], 2, t->srcp, t->lens, NULL, t->st);
    cr_assert(rc == FLUXON_ERR_UNAVAILABLE || rc == FLUXON_ERR_STALE, "got %s", fluxon_status_string(rc));
    bt_free(t);
    fluxon_client_close(c);
}

Test(batch, a_key_being_written_and_a_full_owner_are_per_key_statuses)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    bt_t *t = bt_new("bw", 7);
    fluxon_plan *plan = NULL;
    cr_assert_eq(fluxon_local_fast_put_start(c, t->keys, 1, BLEN, NULL, &plan, NULL), FLUXON_OK);
    cr_assert_eq(fluxon_batch_put_from(c, t->keys, 2, t->srcp, t->lens, NULL, t->st), FLUXON_OK);
    cr_assert_eq(t->st[0], FLUXON_ERR_KEY_BEING_WRITTEN);
    cr_assert_eq(t->st[1], FLUXON_OK);
    cr_assert_eq(fluxon_put_abort(c, plan), FLUXON_OK);
    /* 12 values of a whole grant (8 MiB) into a 72 MiB segment: the tail does not fit */
    enum { NBIG = 12 };
    uint64_t big = 8ull << 20, blens[NBIG];
    uint8_t *src = malloc(big);
    kf_fill(src, big, 77);
    const void *bsrc[NBIG];
    const char *bkeys[NBIG];
    char bnames[NBIG][32];
    int bst[NBIG];
    for (int i = 0; i < NBIG; i++) {
        snprintf(bnames[i], sizeof bnames[i], "big-%02d", i);
        bkeys[i] = bnames[i];
        bsrc[i] = src;
        blens[i] = big;
    }
    cr_assert_eq(fluxon_batch_put_from(c, bkeys, NBIG, bsrc, blens, NULL, bst), FLUXON_OK);
    int ok = 0, nospace = 0;
    for (int i = 0; i < NBIG; i++) {
        ok += bst[i] == FLUXON_OK;
        nospace += bst[i] == FLUXON_ERR_NO_SPACE;
    }
    cr_assert(ok > 0 && nospace > 0 && ok + nospace == NBIG, "%d stored, %d NO_SPACE", ok, nospace);
    uint8_t *dst = malloc(big);
    void *dp[1] = {dst};
    uint64_t cap[1] = {big};
    size_t nr = 0;
    int first_ok = bst[0] == FLUXON_OK ? 0 : -1;
    cr_assert_eq(first_ok, 0, "the head of the batch is stored");
    cr_assert_eq(fluxon_batch_get_into(c, bkeys, 1, dp, cap, 1, NULL, 0, bst, NULL, &nr), FLUXON_OK);
    cr_assert_eq(nr, 1);
    cr_assert(kf_check(dst, big, 77));
    free(dst);
    free(src);
    quiet(c);
    bt_free(t);
    fluxon_client_close(c);
}

/* R4: a key another owner published first is refused by the master at publish time
 * (KEY_EXISTS); only that key fails: the other keys of the batch were stored and published
 * and say FLUXON_OK (they said KEY_EXISTS too before). The hostless commit's future tells
 * the same per key (fluxon_future_key_statuses). */
Test(batch, a_key_refused_at_publish_fails_only_itself)
{
    kf_up(2);
    fluxon_client *a = kf_client(0), *b = kf_client(1);
    bt_t *t = bt_new("pk", 8);
    bt_put_ok(a, t, 1); /* key 0 is owner 0's: owner 1's put_start does not see it */
    cr_assert_eq(fluxon_batch_put_from(b, t->keys, 4, t->srcp, t->lens, NULL, t->st), FLUXON_OK);
    cr_assert_eq(t->st[0], FLUXON_ERR_KEY_EXISTS, "key 0: %s", fluxon_status_string(t->st[0]));
    for (int i = 1; i < 4; i++) cr_assert_eq(t->st[i], FLUXON_OK, "key %d: %s", i, fluxon_status_string(t->st[i]));
    size_t hits = 0;
    cr_assert_eq(fluxon_batch_exists(a, &t->keys[1], 3, &hits), FLUXON_OK);
    cr_assert_eq(hits, 3, "the fresh keys were published");
    /* the hostless calls: keys 4, 0 (refused at publish), 5, and 4 again (refused at put_start) */
    const char *hk[4] = {t->keys[4], t->keys[0], t->keys[5], t->keys[4]};
    fluxon_plan *plan = NULL;
    int st[4];
    cr_assert_eq(fluxon_local_fast_put_start(b, hk, 4, BLEN, NULL, &plan, st), FLUXON_OK);
    cr_assert_eq(st[3], FLUXON_ERR_INVALID_ARGUMENT, "the same key twice");
    for (int i = 0; i < 3; i++) memcpy((void *)(uintptr_t)plan->value_ptrs[i], t->src[i == 1 ? 0 : i + 3], BLEN);
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(b, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_ERR_KEY_EXISTS, "the batch outcome: the first key's error");
    cr_assert_eq(fluxon_future_key_statuses(f, st, 3), FLUXON_ERR_INVALID_ARGUMENT, "n_keys must be the plan's");
    cr_assert_eq(fluxon_future_key_statuses(f, st, 4), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK);
    cr_assert_eq(st[1], FLUXON_ERR_KEY_EXISTS);
    cr_assert_eq(st[2], FLUXON_OK);
    cr_assert_eq(st[3], FLUXON_ERR_INVALID_ARGUMENT, "a put_start rejection is left as it was");
    fluxon_future_free(f);
    /* every key fine: the future's per-key statuses are all FLUXON_OK */
    const char *ok2[1] = {t->keys[6]};
    cr_assert_eq(fluxon_local_fast_put_start(b, ok2, 1, BLEN, NULL, &plan, st), FLUXON_OK);
    cr_assert_eq(fluxon_local_fast_put_commit(b, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    st[0] = 12345;
    cr_assert_eq(fluxon_future_key_statuses(f, st, 1), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK);
    fluxon_future_free(f);
    quiet(a);
    quiet(b);
    bt_free(t);
    fluxon_client_close(a);
    fluxon_client_close(b);
}

static long long master_stat(fluxon_client *c, const char *name)
{
    static char buf[1 << 16];
    size_t len = 0;
    cr_assert_eq(fluxon_client_master_stats(c, buf, sizeof buf, &len), FLUXON_OK);
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", name);
    char *at = strstr(buf, pat);
    cr_assert(at, "master stats lack %s", name);
    return atoll(at + strlen(pat));
}

/* W9: the master forgets PUT_DONE answers (here after 60 x 10 ms) and refuses a batch id at
 * or below the highest one it forgot. A plan put_started BEFORE a later batch whose answer
 * was forgotten, and committed after, was refused STALE (its values retired) though it was
 * never attempted: the batch id is the commit's, not the put_start's. */
Test(batch, a_commit_made_after_a_later_batch_was_forgotten_is_published)
{
    kf_up_ex(1, ",\"master_timeout_ms\":10", NULL);
    fluxon_client *c = kf_client(0);
    bt_t *t = bt_new("w9", 9);
    fluxon_plan *plan = NULL;
    int st[1];
    cr_assert_eq(fluxon_local_fast_put_start(c, t->keys, 1, BLEN, NULL, &plan, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK);
    memcpy((void *)(uintptr_t)plan->value_ptrs[0], t->src[0], BLEN);
    cr_assert_eq(fluxon_batch_put_from(c, &t->keys[1], 1, &t->srcp[1], t->lens, NULL, st), FLUXON_OK);
    cr_assert_eq(st[0], FLUXON_OK, "a later batch is published");
    double end = th_now_s() + 10;
    while (master_stat(c, "put_dedup_forgotten") < 1 && th_now_s() < end) th_sleep_ms(20);
    cr_assert_geq(master_stat(c, "put_dedup_forgotten"), 1, "the later batch's answer was forgotten within 10 s");
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(c, plan, &f), FLUXON_OK);
    int rc = fluxon_future_wait(f, 10000);
    cr_assert_eq(rc, FLUXON_OK, "the first attempt of a valid commit is published: %s", fluxon_status_string(rc));
    fluxon_future_free(f);
    size_t nr = 0;
    cr_assert_eq(fluxon_batch_get_into(c, t->keys, 1, t->dstp, t->caps, 1, NULL, 0, t->st, NULL, &nr), FLUXON_OK);
    cr_assert_eq(nr, 1);
    cr_assert(kf_check(t->dst[0], BLEN, 900));
    quiet(c);
    bt_free(t);
    fluxon_client_close(c);
}
