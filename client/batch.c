/* batch.c — the batch copy API (fluxon_batch_put_from / fluxon_batch_get_into), the
 * shape of Mooncake's batch_put_from / batch_get_into: the caller hands buffers, the
 * library copies them into (or out of) the owner's segment. Each call is ONE hostless
 * round: put_start + copy + commit (+ wait for publication), or get_start + transfer +
 * copy + release. Built on the public hostless calls of hostless.c only; what it adds is
 * the validation of the buffers and the per-key statuses. */
#include <stdio.h>

#include "client.h"
#include "log.h"

/* ---- put ---- */
static int cb_put_args(fluxon_client *cl, const char *const *keys, size_t n, const void *const *src,
                       const uint64_t *lens, int *per_key_status)
{
    if (!cl || !keys || !src || !lens || !per_key_status || n == 0) {
        return fx_client_refuse("batch_put_from: %s is %s (every pointer argument is required, n_keys >= 1)",
                !cl ? "client" : !keys ? "keys" : !src ? "src_ptrs" : !lens ? "lens" : !per_key_status ? "per_key_status"
                                                                                                       : "n_keys",
                n == 0 ? "0" : "NULL");
    }
    for (size_t i = 0; i < n; i++) {
        if (!src[i] || lens[i] == 0) {
            return fx_client_refuse("batch_put_from: key %zu has %s[%zu] %s (every key needs a source of >= 1 byte)",
                                    i, lens[i] == 0 ? "lens" : "src_ptrs", i, lens[i] == 0 ? "0" : "NULL");
        }
        if (lens[i] != lens[0]) {
            return fx_client_refuse("batch_put_from: lens[%zu] is %llu bytes but lens[0] is %llu: one batch stores "
                                    "values of one length (one put_start); split the batch by length",
                                    i, (unsigned long long)lens[i], (unsigned long long)lens[0]);
        }
    }
    return FLUXON_OK;
}

/* Commits the plan, retrying with the same plan identity when the answer was late (the
 * retry learns the first commit's outcome, never publishes twice); then waits for the
 * publication. Returns the batch outcome; st (put_start's statuses) then holds each key's
 * own outcome (R4: one key refused at publish fails that key alone). */
static int cb_commit_wait(fluxon_client *cl, fluxon_plan *plan, size_t n, int *st)
{
    fluxon_future *f = NULL;
    int rc = FLUXON_ERR_TIMEOUT;
    for (int attempt = 0; attempt < 3 && rc == FLUXON_ERR_TIMEOUT; attempt++)
        rc = fluxon_local_fast_put_commit(cl, plan, &f);
    if (rc == FLUXON_OK) {
        rc = fluxon_future_wait(f, cl->cfg.timeout_ms);
        bool per_key = rc != FLUXON_ERR_TIMEOUT && fluxon_future_key_statuses(f, st, n) == FLUXON_OK;
        fluxon_future_free(f);
        if (per_key) return rc;
        if (rc == FLUXON_OK) rc = FLUXON_ERR_INTERNAL; /* done, yet no per-key outcome: cannot happen */
    }
    if (rc != FLUXON_OK)
        for (size_t i = 0; i < n; i++)
            if (st[i] == FLUXON_OK) st[i] = rc;
    return rc;
}

int fluxon_batch_put_from(fluxon_client *cl, const char *const *keys, size_t n_keys, const void *const *src_ptrs,
                          const uint64_t *lens, const fluxon_put_options *opts, int *per_key_status)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = cb_put_args(cl, keys, n_keys, src_ptrs, lens, per_key_status);
    if (rc != FLUXON_OK) return rc;
    fluxon_plan *plan = NULL;
    rc = fluxon_local_fast_put_start(cl, keys, n_keys, lens[0], opts, &plan, per_key_status);
    if (rc != FLUXON_OK) {
        for (size_t i = 0; i < n_keys; i++) per_key_status[i] = rc;
        return rc;
    }
    size_t accepted = 0;
    for (size_t i = 0; i < n_keys; i++)
        if (per_key_status[i] == FLUXON_OK) {
            memcpy((void *)(uintptr_t)plan->value_ptrs[i], src_ptrs[i], lens[i]);
            accepted++;
        }
    if (accepted == 0) {
        fluxon_put_abort(cl, plan);
        return FLUXON_OK;
    }
    rc = cb_commit_wait(cl, plan, n_keys, per_key_status);
    /* the batch ran: per-key outcomes say what was stored; a commit that could not be
     * sent at all (the owner gone) is the call's failure too */
    return rc == FLUXON_ERR_STALE || rc == FLUXON_ERR_UNAVAILABLE ? rc : FLUXON_OK;
}

/* ---- get ---- */
static int cb_get_args(fluxon_client *cl, const char *const *keys, size_t n, void *const *dst,
                       const uint64_t *lens, int *per_key_status, size_t *n_restored_p)
{
    if (!cl || !keys || !dst || !lens || !per_key_status || !n_restored_p || n == 0) {
        return fx_client_refuse("batch_get_into: %s is %s (every pointer argument but value_lens is required, n_keys >= 1)",
                !cl ? "client" : !keys ? "keys" : !dst ? "dst_ptrs" : !lens ? "dst_lens"
                : !per_key_status ? "per_key_status" : !n_restored_p ? "n_restored_p" : "n_keys",
                n == 0 ? "0" : "NULL");
    }
    for (size_t i = 0; i < n; i++)
        if (!dst[i] || lens[i] == 0) {
            return fx_client_refuse("batch_get_into: key %zu has %s[%zu] %s (every key needs a destination of >= 1 "
                                    "byte)", i, lens[i] == 0 ? "dst_lens" : "dst_ptrs", i, lens[i] == 0 ? "0" : "NULL");
        }
    return FLUXON_OK;
}

/* The start of the atomic group holding key k (0 without groups: each key its own). */
static size_t cb_group_start(const uint32_t *groups, size_t n_groups, size_t k)
{
    if (!groups) return k;
    size_t s = 0;
    for (size_t g = 0; g < n_groups; g++) {
        if (k < s + groups[g]) return s;
        s += groups[g];
    }
    return s;
}

/* Per-key statuses of keys past the restored prefix [0, cut): the key that stopped it
 * gets why (stop_status), the other keys of its group (and, all-or-nothing, every key
 * before it) GROUP_REJECTED, the keys after it CANCELLED (not restored: past the prefix). */
static void cb_mark_tail(int *st, size_t n, size_t cut, int64_t stop, int stop_status)
{
    for (size_t i = cut; i < n; i++)
        st[i] = stop < 0 ? FLUXON_ERR_GROUP_REJECTED
                : (int64_t)i == stop ? stop_status
                : (int64_t)i < stop  ? FLUXON_ERR_GROUP_REJECTED
                                     : FLUXON_ERR_CANCELLED;
}

int fluxon_batch_get_into(fluxon_client *cl, const char *const *keys, size_t n_keys, void *const *dst_ptrs,
                          const uint64_t *dst_lens, int prefix_best_effort, const uint32_t *atomic_group_lens,
                          size_t n_atomic_groups, int *per_key_status, uint64_t *value_lens, size_t *n_restored_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = cb_get_args(cl, keys, n_keys, dst_ptrs, dst_lens, per_key_status, n_restored_p);
    if (rc != FLUXON_OK) return rc;
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    rc = fluxon_get_start(cl, keys, n_keys, prefix_best_effort, atomic_group_lens, n_atomic_groups, &h, &r);
    if (rc != FLUXON_OK) return rc;
    size_t t = (size_t)r.transferable_len;
    fluxon_plan *plan = NULL;
    if (t == 0) {
        fluxon_cancel_get_transfer(cl, h);
    } else if ((rc = fluxon_get_transfer(cl, h, 0, &plan)) != FLUXON_OK) {
        if (rc == FLUXON_ERR_WRONG_HANDLE) rc = FLUXON_ERR_TIMEOUT; /* expired under us: handle_ttl_ms */
        return rc;
    }
    const uint64_t *vl = plan ? fluxon_plan_value_lens(cl, plan) : NULL;
    if (plan && !vl) { /* the plan we just got is live: cannot happen */
        fluxon_release_views(cl, plan);
        return FLUXON_ERR_INTERNAL;
    }
    /* the restored prefix stops at the first value whose length is not its destination's:
     * a shorter value is never restored as good (the rest of the page would be stale) */
    size_t cut = t;
    int64_t stop = r.first_miss_index;
    int stop_status = r.miss_status;
    uint64_t bad_len = 0; /* the value at stop, when its length is not its destination's */
    for (size_t i = 0; i < t; i++)
        if (vl[i] != dst_lens[i]) {
            bad_len = vl[i];
            FX_WARN("batch_get_into: key %zu (%s) holds %llu bytes but dst_lens[%zu] is %llu (a value must be "
                    "exactly its destination's length): restored the prefix before its atomic group only",
                    i, keys[i], (unsigned long long)vl[i], i, (unsigned long long)dst_lens[i]);
            cut = prefix_best_effort ? cb_group_start(atomic_group_lens, n_atomic_groups, i) : 0;
            stop = (int64_t)i;
            stop_status = FLUXON_ERR_INVALID_ARGUMENT;
            rc = FLUXON_ERR_INVALID_ARGUMENT;
            break;
        }
    for (size_t i = 0; i < cut; i++) {
        memcpy(dst_ptrs[i], (const void *)(uintptr_t)plan->value_ptrs[i], vl[i]);
        per_key_status[i] = FLUXON_OK;
        if (value_lens) value_lens[i] = vl[i];
    }
    if (plan) fluxon_release_views(cl, plan);
    if (bad_len) /* after release_views, which empties it */
        fx_client_last_msg_set("batch_get_into: key %lld (%s) holds %llu bytes but dst_lens[%lld] is %llu (a value "
                               "must be exactly its destination's length)", (long long)stop, keys[stop],
                               (unsigned long long)bad_len, (long long)stop, (unsigned long long)dst_lens[stop]);
    if (!prefix_best_effort && cut < n_keys) stop = stop < 0 ? (int64_t)cut : stop;
    if (stop < 0 && cut < n_keys) stop = r.first_miss_index; /* hits cut by a group: GROUP_REJECTED */
    cb_mark_tail(per_key_status, n_keys, cut, stop, stop_status);
    if (value_lens)
        for (size_t i = cut; i < n_keys; i++) value_lens[i] = 0;
    *n_restored_p = cut;
    return rc;
}
