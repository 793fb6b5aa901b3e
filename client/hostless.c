/* hostless.c — the hostless API: put plans (fluxon_local_fast_put_start / commit /
 * put_abort) and reads (fluxon_get_start / get_transfer / cancel / release_views). Plans
 * and handles live in the client's registry (plan/registry.h), so every call can tell a
 * live plan of the right kind from anything else (FLUXON_ERR_WRONG_HANDLE) before
 * touching it. */
#include <stdio.h>

#include "client.h"
#include "groups.h"
#include "log.h"

struct fluxon_get_handle {
    uint64_t magic;
};
#define CHL_HANDLE_MAGIC 0x454c444e41485846ull

/* ---- validation shared by the entry points ---- */
FX_INTERNAL int fx_client_ready(fluxon_client *cl)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's, from here on */
    if (!cl) return FLUXON_ERR_INVALID_ARGUMENT;
    return __atomic_load_n(&cl->owner_lost, __ATOMIC_ACQUIRE) ? FLUXON_ERR_UNAVAILABLE : FLUXON_OK;
}

FX_INTERNAL bool fx_client_key_ok(const char *k)
{
    if (!k) return false;
    size_t n = strnlen(k, FLUXON_MAX_KEY_BYTES + 1);
    return n > 0 && n <= FLUXON_MAX_KEY_BYTES;
}

FX_INTERNAL void fx_client_keys_done(fx_str_t *kv, const fx_str_t *stack)
{
    if (kv != stack) fx_free(kv);
}

FX_INTERNAL int fx_client_keys(const char *const *keys, size_t n, fx_str_t *stack, fx_str_t **out)
{
    if (!keys || n == 0 || n > FLUXON_MAX_BATCH_KEYS) {
        return fx_client_refuse("keys is %s and n_keys is %zu: a batch has 1..%d keys (FLUXON_MAX_BATCH_KEYS)", keys ? "set" : "NULL",
                n, FLUXON_MAX_BATCH_KEYS);
    }
    fx_str_t *v = n <= FX_CLIENT_STACK_KEYS ? stack : fx_malloc(n * sizeof *v);
    if (!v) return FLUXON_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!fx_client_key_ok(keys[i])) {
            fx_client_keys_done(v, stack);
            return fx_client_refuse("key %zu is %s (keys are 1..%d bytes)", i,
                                    !keys[i] ? "NULL" : !keys[i][0] ? "empty" : "too long", FLUXON_MAX_KEY_BYTES);
        }
        v[i] = fx_str_c(keys[i]);
    }
    *out = v;
    return FLUXON_OK;
}

/* The atomic groups as u64 lens (*out NULL when there are none), checked by the one
 * shared validator. */
static int chl_groups(const uint32_t *lens, size_t n_groups, size_t n, uint64_t **out)
{
    *out = NULL;
    if (!lens && n_groups == 0) return FLUXON_OK;
    char why[160];
    if (n_groups == 0) snprintf(why, sizeof why, "atomic_group_lens is set but n_atomic_groups is 0");
    if (n_groups == 0 || !fx_groups_check32(lens, n_groups, n, why, sizeof why)) {
        return fx_client_refuse("%s", why);
    }
    uint64_t *v = fx_malloc(n_groups * sizeof *v);
    if (!v) return FLUXON_ERR_NOMEM;
    for (size_t g = 0; g < n_groups; g++) v[g] = lens[g];
    *out = v;
    return FLUXON_OK;
}

/* A replica mask must say the same for every key of an atomic group. */
static int chl_mask_uniform(const uint8_t *mask, const uint64_t *groups, size_t n_groups, size_t n)
{
    if (!mask) {
        return fx_client_refuse("put_start: FLUXON_PUT_OPT_REPLICA_MASK is set but make_replica_task_mask is NULL");
    }
    if (!groups) return FLUXON_OK;
    fx_group_iter_t it = fx_group_iter(groups, n_groups, n);
    while (fx_group_next(&it))
        for (size_t i = it.start + 1; i < it.start + it.len; i++)
            if ((mask[i] != 0) != (mask[it.start] != 0)) {
                return fx_client_refuse("put_start: make_replica_task_mask differs inside atomic group %zu (key %zu)", it.g, i);
            }
    return FLUXON_OK;
}

static uint8_t *chl_base(fluxon_client *cl) { return fx_segment_base(cl->seg); }

FX_INTERNAL int fx_client_put_scalars(const fluxon_put_options *opts, uint64_t *flags_p, uint64_t *lease_p,
                                      const char **preferred_p, uint32_t *pin_ttl_p)
{
    *pin_ttl_p = 0;
    if (!opts) return FLUXON_OK;
    uint64_t fm = opts->field_mask, flags = *flags_p;
    if (fm & ~((FLUXON_PUT_OPT_PIN_REFRESH_ON_HIT << 1) - 1)) {
        return fx_client_refuse("put: field_mask 0x%llx has bits this library does not know (it knows 0x%llx)",
                (unsigned long long)fm, (unsigned long long)((FLUXON_PUT_OPT_PIN_REFRESH_ON_HIT << 1) - 1));
    }
    uint32_t pin = fm & FLUXON_PUT_OPT_PIN_TTL ? opts->pin_ttl_ms : 0; /* issue 42 */
    if (pin > FLUXON_PIN_TTL_MAX_MS) {
        return fx_client_refuse("put: pin_ttl_ms %u is over FLUXON_PIN_TTL_MAX_MS (%u)", pin, FLUXON_PIN_TTL_MAX_MS);
    }
    if (pin && (fm & FLUXON_PUT_OPT_WRITE_THROUGH) && opts->write_through) {
        return fx_client_refuse("put: pin_ttl_ms pins the copy on this client's owner: not with write_through");
    }
    if (pin && (fm & FLUXON_PUT_OPT_PIN_REFRESH_ON_HIT) && opts->pin_refresh_on_hit) flags |= FX_PUT_PIN_REFRESH;
    if (pin && (flags & FX_PUT_PLACE)) flags = (flags & ~FX_PUT_PLACE) | FX_PUT_LOCAL_FIRST; /* pins are the owner's */
    if ((fm & FLUXON_PUT_OPT_REJECT_IF_INFLIGHT) && opts->reject_if_inflight_same_key) flags |= FX_PUT_REJECT_IF_INFLIGHT;
    if ((fm & FLUXON_PUT_OPT_REJECT_IF_EXIST) && opts->reject_if_exist_same_key) flags |= FX_PUT_REJECT_IF_EXIST;
    if ((fm & FLUXON_PUT_OPT_WRITE_THROUGH) && opts->write_through) flags |= FX_PUT_WRITE_THROUGH;
    if ((fm & FLUXON_PUT_OPT_MAKE_REPLICA_TASK) && opts->make_replica_task) flags |= FX_PUT_MAKE_REPLICA;
    if (fm & FLUXON_PUT_OPT_LEASE_ID) *lease_p = opts->lease_id;
    const char *preferred = fm & FLUXON_PUT_OPT_PREFERRED_SUB_CLUSTER ? opts->preferred_sub_cluster : NULL;
    if ((fm & FLUXON_PUT_OPT_LOCAL_FIRST) && opts->local_first) {
        if (flags & FX_PUT_WRITE_THROUGH) {
            return fx_client_refuse("put: local_first and write_through contradict each other");
        }
        flags = (flags & ~FX_PUT_PLACE) | FX_PUT_LOCAL_FIRST;
    }
    if (preferred && (strlen(preferred) == 0 || strlen(preferred) >= FX_ID_MAX ||
                      strspn(preferred, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
                          strlen(preferred))) {
        return fx_client_refuse("put: preferred_sub_cluster must be 1..%d characters of [A-Za-z0-9._-] (as owners' sub_cluster)",
                FX_ID_MAX - 1);
    }
    *flags_p = flags;
    *preferred_p = preferred;
    *pin_ttl_p = pin;
    return FLUXON_OK;
}

/* ---- put ---- */
/* The put options that need the batch: atomic groups and the replica mask. */
static int chl_put_batch_opts(const fluxon_put_options *opts, size_t n, uint64_t **groups_p, size_t *n_groups_p,
                              const uint8_t **mask_p)
{
    if (!opts) return FLUXON_OK;
    int rc = FLUXON_OK;
    if (opts->field_mask & FLUXON_PUT_OPT_ATOMIC_GROUPS) {
        rc = chl_groups(opts->atomic_group_lens, opts->n_atomic_groups, n, groups_p);
        *n_groups_p = *groups_p ? opts->n_atomic_groups : 0;
    }
    if (rc == FLUXON_OK && (opts->field_mask & FLUXON_PUT_OPT_REPLICA_MASK)) {
        *mask_p = opts->make_replica_task_mask;
        rc = chl_mask_uniform(*mask_p, *groups_p, *n_groups_p, n);
    }
    return rc;
}

/* Gives a put plan's slots back to the owner (a plan the caller will never see). */
static void chl_abort_id(fluxon_client *cl, uint64_t plan_id)
{
    fx_body_plan_ref_t pr = {plan_id};
    uint8_t *q;
    uint32_t ql;
    FX_CLIENT_ENCODE(plan_ref, &pr, q, ql);
    fx_client_call(cl, FX_MSG_PUT_ABORT, q, ql, NULL, NULL, NULL, NULL);
}

/* The plan for a decoded put_start_ack, registered. */
static int chl_put_plan(fluxon_client *cl, const fx_body_put_start_ack_t *ack, size_t n, uint64_t value_len,
                        fluxon_plan **plan_p, int *key_status)
{
    /* value_ptrs[n] then the lengths (fluxon_plan_value_lens) */
    fx_plan_obj_t *o = fx_plan_obj_new(cl->plans, FX_PLAN_PUT, sizeof(fluxon_plan) + 2 * n * sizeof(uint64_t));
    if (!o) return FLUXON_ERR_NOMEM;
    fluxon_plan *plan = o->blob;
    plan->magic = FLUXON_PUT_PLAN_MAGIC;
    plan->count = n;
    for (size_t i = 0; i < n; i++) {
        int ks = (int)(int64_t)ack->statuses.v[i];
        plan->value_ptrs[i] = ks == FLUXON_OK ? (uint64_t)(uintptr_t)(chl_base(cl) + ack->offsets.v[i]) : 0;
        plan->value_ptrs[n + i] = ks == FLUXON_OK ? value_len : 0;
        if (key_status) key_status[i] = ks;
    }
    o->owner_id = ack->plan_id;
    o->generation = cl->owner_generation;
    o->n = n;
    int rc = fx_plan_reg_add(cl->plans, o);
    if (rc != FLUXON_OK) fx_plan_reg_retire(cl->plans, o);
    else *plan_p = plan;
    return rc;
}

FX_INTERNAL int fx_client_put_start(fluxon_client *cl, const char *const *keys, size_t n, uint64_t value_len,
                                    const fluxon_put_options *opts, uint64_t forced_flags, fluxon_plan **plan_p,
                                    int *key_status)
{
    int rc = fx_client_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!plan_p || value_len == 0)
        return fx_client_refuse("put_start: %s", !plan_p ? "plan_p is NULL" : "value_len is 0 (a value is >= 1 byte)");
    fx_str_t stack[FX_CLIENT_STACK_KEYS], *kv = NULL;
    uint64_t *groups = NULL;
    size_t n_groups = 0;
    const uint8_t *mask = NULL;
    uint64_t flags = forced_flags, lease = 0;
    const char *preferred = NULL;
    uint32_t pin = 0;
    if ((rc = fx_client_keys(keys, n, stack, &kv)) != FLUXON_OK) return rc;
    rc = fx_client_put_scalars(opts, &flags, &lease, &preferred, &pin);
    if (rc == FLUXON_OK) rc = chl_put_batch_opts(opts, n, &groups, &n_groups, &mask);
    if (rc != FLUXON_OK) {
        fx_client_keys_done(kv, stack);
        fx_free(groups);
        return rc;
    }
    fx_body_put_start_t b = {{kv, (uint32_t)n}, value_len, flags, {groups, (uint32_t)n_groups},
                             {(const char *)mask, mask ? (uint32_t)n : 0}, lease, fx_str_c(preferred),
                             cl->cfg.timeout_ms, pin};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(put_start, &b, req, len);
    fx_client_keys_done(kv, stack);
    fx_free(groups);
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    rc = fx_client_call(cl, FX_MSG_PUT_START, req, len, NULL, NULL, &resp, &rlen);
    fx_client_log_error("put_start", rc, resp, rlen);
    if (rc != FLUXON_OK) {
        fx_client_buf_free(resp);
        return rc;
    }
    fx_body_put_start_ack_t ack;
    fx_arena_t local, *a = fx_client_arena(&local);
    rc = fx_body_put_start_ack_decode(resp, rlen, &ack, a);
    if (rc == FLUXON_OK && (ack.statuses.n != n || ack.offsets.n != n)) rc = FLUXON_ERR_PROTOCOL;
    if (rc == FLUXON_OK) {
        rc = chl_put_plan(cl, &ack, n, value_len, plan_p, key_status);
        if (rc != FLUXON_OK && ack.plan_id) chl_abort_id(cl, ack.plan_id); /* give the slots back */
    }
    fx_client_arena_done(a);
    fx_client_buf_free(resp);
    return rc;
}

int fluxon_local_fast_put_start(fluxon_client *c, const char *const *keys, size_t n_keys, uint64_t value_len,
                                const fluxon_put_options *opts, fluxon_plan **plan_p, int *key_status)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    return fx_client_put_start(c, keys, n_keys, value_len, opts, FX_PUT_REJECT_IF_INFLIGHT | FX_PUT_REJECT_IF_EXIST,
                               plan_p, key_status);
}

/* reactor side of commit: the future must be armed before PUBLISHED can arrive. A retry
 * of a commit whose answer was lost finds the plan no longer prepared (the owner's
 * WRONG_HANDLE): the first commit went through, so the retry adopts its outcome, the
 * PUBLISHED of the plan's future (the owner numbers a plan's future by its plan id),
 * already here (kept unclaimed) or still to come. */
typedef struct chl_commit_ctx {
    fluxon_future *f;
    uint64_t plan_id;
    bool retry, adopted;
} chl_commit_ctx_t;

static void chl_commit_hook(fluxon_client *cl, void *ctx, int status, const uint8_t *body, uint32_t len)
{
    chl_commit_ctx_t *c = ctx;
    if (status == FLUXON_ERR_WRONG_HANDLE && c->retry) {
        c->adopted = true;
        fx_future_arm(cl, c->f, c->plan_id);
        return;
    }
    if (status != FLUXON_OK) return;
    fx_body_put_commit_ack_t ack;
    fx_arena_t local, *a = fx_client_arena(&local);
    if (fx_body_put_commit_ack_decode(body, len, &ack, a) == FLUXON_OK) fx_future_arm(cl, c->f, ack.future_id);
    fx_client_arena_done(a);
}

int fluxon_local_fast_put_commit(fluxon_client *cl, fluxon_plan *plan, fluxon_future **future_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cl || !plan || !future_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_plan_obj_t *o;
    int rc = fx_plan_reg_take(cl->plans, plan, FX_PLAN_PUT, NULL, NULL, &o);
    if (rc != FLUXON_OK) return rc;
    if (fx_client_ready(cl) != FLUXON_OK) {
        fx_plan_reg_retire(cl->plans, o);
        return FLUXON_ERR_STALE;
    }
    bool any = false;
    for (size_t i = 0; i < o->n; i++) any |= plan->value_ptrs[i] != 0;
    fluxon_future *f = fx_future_new(cl);
    if (f && fx_future_keys(f, plan->value_ptrs, o->n) != FLUXON_OK) {
        fluxon_future_free(f);
        f = NULL;
    }
    if (!f) {
        fx_plan_reg_add(cl->plans, o);
        return FLUXON_ERR_NOMEM;
    }
    if (!any || o->owner_id == 0) { /* nothing accepted: nothing to publish */
        fx_future_complete(f, FLUXON_OK);
        fx_plan_reg_retire(cl->plans, o);
        *future_p = f;
        return FLUXON_OK;
    }
    fx_body_plan_ref_t pr = {o->owner_id};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(plan_ref, &pr, req, len);
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    chl_commit_ctx_t ctx = {f, o->owner_id, (o->sent & FX_PLAN_SENT_COMMIT) != 0, false};
    o->sent |= FX_PLAN_SENT_COMMIT;
    rc = fx_client_call(cl, FX_MSG_PUT_COMMIT, req, len, chl_commit_hook, &ctx, &resp, &rlen);
    if (ctx.adopted) rc = FLUXON_OK; /* the earlier commit's outcome, on f */
    fx_client_log_error("put_commit", rc, resp, rlen);
    fx_client_buf_free(resp);
    if (rc != FLUXON_OK) {
        fluxon_future_free(f);
        if (rc == FLUXON_ERR_TIMEOUT || rc == FLUXON_ERR_NOMEM) fx_plan_reg_add(cl->plans, o); /* plan still usable */
        else fx_plan_reg_retire(cl->plans, o);
        return rc;
    }
    fx_plan_reg_retire(cl->plans, o);
    *future_p = f;
    return FLUXON_OK;
}

int fluxon_put_abort(fluxon_client *cl, fluxon_plan *plan)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cl || !plan) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_plan_obj_t *o;
    int rc = fx_plan_reg_take(cl->plans, plan, FX_PLAN_PUT, NULL, NULL, &o);
    if (rc != FLUXON_OK) return rc;
    if (o->owner_id && fx_client_ready(cl) == FLUXON_OK) {
        fx_body_plan_ref_t pr = {o->owner_id};
        uint8_t *req;
        uint32_t len;
        FX_CLIENT_ENCODE(plan_ref, &pr, req, len);
        bool retry = (o->sent & FX_PLAN_SENT_ABORT) != 0;
        o->sent |= FX_PLAN_SENT_ABORT;
        rc = fx_client_call_decode(cl, FX_MSG_PUT_ABORT, req, len, "put_abort", NULL, NULL);
        /* a retry after a lost answer: the owner no longer has the plan, the first abort
         * went through (unless a commit was sent: then WRONG_HANDLE stands) */
        if (rc == FLUXON_ERR_WRONG_HANDLE && retry && !(o->sent & FX_PLAN_SENT_COMMIT)) rc = FLUXON_OK;
    }
    if (rc == FLUXON_ERR_TIMEOUT || rc == FLUXON_ERR_NOMEM) {
        fx_plan_reg_add(cl->plans, o);
        return rc;
    }
    fx_plan_reg_retire(cl->plans, o);
    return rc == FLUXON_ERR_UNAVAILABLE ? FLUXON_OK : rc; /* owner gone: its slots went with it */
}

/* ---- get ---- */
FX_INTERNAL void fx_client_consume(fluxon_client *cl, uint64_t handle_id, uint64_t consume)
{
    if (!handle_id) return;
    fx_body_handle_consume_t hc = {handle_id, consume};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(handle_consume, &hc, req, len);
    fx_client_send_oneway(cl, FX_MSG_HANDLE_CONSUME, req, len);
}

FX_INTERNAL void fx_client_release_ids(fluxon_client *cl, const uint64_t *ids, size_t n)
{
    if (!n) return;
    fx_body_release_t rel = {{ids, (uint32_t)n}};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(release, &rel, req, len);
    fx_client_send_oneway(cl, FX_MSG_RELEASE, req, len);
}

/* The handle for a decoded get_start_ack, registered; takes *groups_p over. */
static int chl_get_handle(fluxon_client *cl, const fx_body_get_start_ack_t *ack, uint64_t **groups_p, size_t ng,
                          fluxon_get_handle **handle_p)
{
    size_t t = ack->transferable;
    /* the holder ids, offsets and lengths in one allocation (not in the blob: the
     * registry's arena never reuses an address, so each blob byte is a fresh page's) */
    fx_plan_obj_t *o = fx_plan_obj_new(cl->plans, FX_PLAN_HANDLE, sizeof(fluxon_get_handle));
    if (o && (o->holder_ids = fx_malloc((t ? 3 * t : 1) * sizeof(uint64_t)))) {
        o->offsets = o->holder_ids + t;
        o->lens = o->offsets + t;
        o->arrays_one_block = true;
    }
    int rc = FLUXON_ERR_NOMEM;
    if (o && o->holder_ids) {
        memcpy(o->holder_ids, ack->holder_ids.v, t * sizeof(uint64_t));
        memcpy(o->offsets, ack->offsets.v, t * sizeof(uint64_t));
        memcpy(o->lens, ack->value_lens.v, t * sizeof(uint64_t));
        o->owner_id = ack->handle_id;
        /* this client's bound: unconsumed by then, its reactor cancels the handle (the
         * owner never expires a handle itself, so a consume taken before that always holds) */
        o->expires_ms = fx_now_ms() + cl->handle_ttl_ms;
        o->generation = cl->owner_generation;
        o->n = t;
        o->group_lens = *groups_p;
        o->n_groups = ng;
        *groups_p = NULL;
        ((fluxon_get_handle *)o->blob)->magic = CHL_HANDLE_MAGIC;
        rc = fx_plan_reg_add(cl->plans, o);
    }
    if (rc != FLUXON_OK) {
        fx_client_consume(cl, ack->handle_id, 0);
        if (o) fx_plan_reg_retire(cl->plans, o);
    } else {
        *handle_p = o->blob;
    }
    return rc;
}

int fluxon_get_start(fluxon_client *cl, const char *const *keys, size_t n, int prefix_best_effort,
                     const uint32_t *atomic_group_lens, size_t n_atomic_groups, fluxon_get_handle **handle_p,
                     fluxon_get_start_result *result)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = fx_client_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!handle_p || !result) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_str_t stack[FX_CLIENT_STACK_KEYS], *kv = NULL;
    uint64_t *groups = NULL;
    if ((rc = fx_client_keys(keys, n, stack, &kv)) != FLUXON_OK) return rc;
    if ((rc = chl_groups(atomic_group_lens, n_atomic_groups, n, &groups)) != FLUXON_OK) {
        fx_client_keys_done(kv, stack);
        return rc;
    }
    size_t ng = groups ? n_atomic_groups : 0;
    fx_body_get_start_t b = {{kv, (uint32_t)n}, {groups, (uint32_t)ng}, (uint8_t)(prefix_best_effort != 0),
                             cl->cfg.timeout_ms};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(get_start, &b, req, len);
    fx_client_keys_done(kv, stack);
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    rc = fx_client_call(cl, FX_MSG_GET_START, req, len, NULL, NULL, &resp, &rlen);
    fx_client_log_error("get_start", rc, resp, rlen);
    fx_body_get_start_ack_t ack;
    fx_arena_t local, *a = fx_client_arena(&local);
    if (rc == FLUXON_OK) {
        rc = fx_body_get_start_ack_decode(resp, rlen, &ack, a);
        if (rc == FLUXON_OK && (ack.transferable > n || ack.offsets.n != ack.transferable ||
                                ack.holder_ids.n != ack.transferable || ack.value_lens.n != ack.transferable))
            rc = FLUXON_ERR_PROTOCOL;
    }
    if (rc == FLUXON_OK) rc = chl_get_handle(cl, &ack, &groups, ng, handle_p);
    if (rc == FLUXON_OK)
        *result = (fluxon_get_start_result){ack.raw_prefix, ack.transferable, ack.prefix_groups,
                                            ack.first_miss_index, ack.first_miss_group, ack.all_hit,
                                            ack.miss_status};
    fx_free(groups);
    fx_client_arena_done(a);
    fx_client_buf_free(resp);
    return rc;
}

static bool chl_on_boundary(const fx_plan_obj_t *o, uint64_t k)
{
    if (!o->n_groups) return true;
    uint64_t s = 0;
    for (size_t g = 0; g < o->n_groups && s < k; g++) s += o->group_lens[g];
    return s == k;
}

typedef struct chl_transfer_arg {
    fluxon_client *cl;
    uint64_t consume;
} chl_transfer_arg_t;

/* Under the registry lock: may this handle be transferred? */
static int chl_transfer_check(fx_plan_obj_t *o, void *arg, bool *discard)
{
    chl_transfer_arg_t *t = arg;
    if (fx_now_ms() >= o->expires_ms) { /* past handle_ttl_ms: cancelled, like the reactor's sweep does */
        *discard = true;
        return FLUXON_ERR_WRONG_HANDLE;
    }
    if (t->consume == 0) t->consume = o->n;
    else if (t->consume > o->n || !chl_on_boundary(o, t->consume)) /* the handle stays */
        return fx_client_refuse("get_transfer: consume_prefix_len %llu %s", (unsigned long long)t->consume,
                                t->consume > o->n ? "is past the handle's keys" : "cuts an atomic group");
    if (fx_client_ready(t->cl) != FLUXON_OK) {
        *discard = true;
        return FLUXON_ERR_STALE;
    }
    return FLUXON_OK;
}

int fluxon_get_transfer(fluxon_client *cl, fluxon_get_handle *h, uint64_t consume, fluxon_plan **plan_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cl || !h || !plan_p) return FLUXON_ERR_INVALID_ARGUMENT;
    chl_transfer_arg_t t = {cl, consume};
    fx_plan_obj_t *o;
    int rc = fx_plan_reg_take(cl->plans, h, FX_PLAN_HANDLE, chl_transfer_check, &t, &o);
    if (rc != FLUXON_OK) return rc;
    consume = t.consume;
    /* value_ptrs[consume] then the lengths (fluxon_plan_value_lens) */
    fx_plan_obj_t *rp = fx_plan_obj_new(cl->plans, FX_PLAN_READ, sizeof(fluxon_plan) + 2 * consume * sizeof(uint64_t));
    uint64_t *ids = fx_malloc((consume ? consume : 1) * sizeof *ids);
    if (!rp || !ids) {
        if (rp) fx_plan_reg_retire(cl->plans, rp);
        fx_free(ids);
        fx_plan_reg_add(cl->plans, o); /* the handle stays usable */
        return FLUXON_ERR_NOMEM;
    }
    fluxon_plan *plan = rp->blob;
    plan->magic = FLUXON_READ_PLAN_MAGIC;
    plan->count = consume;
    for (uint64_t i = 0; i < consume; i++) {
        plan->value_ptrs[i] = (uint64_t)(uintptr_t)(chl_base(cl) + o->offsets[i]);
        plan->value_ptrs[consume + i] = o->lens[i];
    }
    memcpy(ids, o->holder_ids, consume * sizeof *ids);
    rp->generation = o->generation;
    rp->n = consume;
    rp->holder_ids = ids;
    fx_client_consume(cl, o->owner_id, consume); /* keep [0, consume), release the tail: no round trip */
    fx_plan_reg_retire(cl->plans, o);
    if (fx_plan_reg_add(cl->plans, rp) != FLUXON_OK) {
        fx_client_release_ids(cl, ids, consume);
        fx_plan_reg_retire(cl->plans, rp);
        return FLUXON_ERR_NOMEM;
    }
    *plan_p = plan;
    return FLUXON_OK;
}

int fluxon_cancel_get_transfer(fluxon_client *cl, fluxon_get_handle *h)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cl || !h) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_plan_obj_t *o;
    int rc = fx_plan_reg_take(cl->plans, h, FX_PLAN_HANDLE, NULL, NULL, &o);
    if (rc != FLUXON_OK) return rc;
    if (fx_client_ready(cl) == FLUXON_OK) fx_client_consume(cl, o->owner_id, 0);
    fx_plan_reg_retire(cl->plans, o);
    return FLUXON_OK;
}

int fluxon_release_views(fluxon_client *cl, fluxon_plan *plan)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cl || !plan) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_plan_obj_t *o;
    int rc = fx_plan_reg_take(cl->plans, plan, FX_PLAN_READ, NULL, NULL, &o);
    if (rc != FLUXON_OK) return rc;
    if (fx_client_ready(cl) == FLUXON_OK) fx_client_release_ids(cl, o->holder_ids, o->n);
    fx_plan_reg_retire(cl->plans, o);
    return FLUXON_OK;
}

#undef CHL_HANDLE_MAGIC

FX_INTERNAL void fx_client_handles_expire(fluxon_client *cl)
{
    fx_plan_obj_t *batch[64];
    size_t n;
    uint64_t now = fx_now_ms();
    while ((n = fx_plan_reg_take_expired(cl->plans, FX_PLAN_HANDLE, now, batch, FX_ARRAY_LEN(batch))) > 0) {
        for (size_t i = 0; i < n; i++) {
            FX_DEBUG("get handle %llu unconsumed after handle_ttl_ms %u: cancelled",
                     (unsigned long long)batch[i]->owner_id, cl->handle_ttl_ms);
            if (fx_client_ready(cl) == FLUXON_OK) fx_client_consume(cl, batch[i]->owner_id, 0);
            fx_plan_reg_retire(cl->plans, batch[i]);
        }
        __atomic_add_fetch(&cl->handles_expired, n, __ATOMIC_RELAXED);
        if (n < FX_ARRAY_LEN(batch)) break;
    }
}

const uint64_t *fluxon_plan_value_lens(fluxon_client *cl, const fluxon_plan *plan)
{
    if (!cl || !plan) return NULL;
    int kind = fx_plan_reg_kind(cl->plans, plan);
    if (kind != FX_PLAN_PUT && kind != FX_PLAN_READ) return NULL; /* not a live plan of this client */
    return plan->value_ptrs + plan->count;
}
