/* kv.c — plain KV calls on top of the request path and the hostless calls: fluxon_put,
 * fluxon_get (+ holders), fluxon_delete, fluxon_batch_exists, fluxon_lease_grant,
 * fluxon_pin, fluxon_list_keys, fluxon_wait_local_segments_ready. */
#include "client.h"
#include "log.h"

struct fluxon_holder {
    fluxon_client *cl;
    uint64_t holder_id;
    const void *data;
    uint64_t len;
};

/* A whole small put in ONE request (PUT_INLINE): the owner stages, places, publishes and
 * answers once published; saves the put_start/commit round trips and the PUBLISHED
 * hand-off of the plan path. Options with atomic groups or a replica mask take the plan
 * path (same validation as the hostless calls). */
#define CKV_PUT_INLINE_MAX (256u * 1024u)

static int ckv_put_inline(fluxon_client *cl, const char *key, const void *value, uint64_t value_len,
                          const fluxon_put_options *opts)
{
    uint64_t flags = FX_PUT_PLACE, lease = 0;
    const char *preferred = NULL;
    uint32_t pin = 0;
    int rc = fx_client_put_scalars(opts, &flags, &lease, &preferred, &pin);
    if (rc != FLUXON_OK) return rc;
    fx_body_put_inline_t b = {fx_str_c(key), {(const char *)value, (uint32_t)value_len}, flags, lease,
                              fx_str_c(preferred), cl->cfg.timeout_ms, pin};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(put_inline, &b, req, len);
    return fx_client_call_decode(cl, FX_MSG_PUT_INLINE, req, len, "put", NULL, NULL);
}

/* Why key (refused by fx_client_key_ok) is refused (fx_client_refuse). */
static int ckv_bad_key(const char *op, const char *key)
{
    return fx_client_refuse("%s: the key must be 1..%u bytes (%s)", op, FLUXON_MAX_KEY_BYTES,
                            !key ? "it is NULL" : !*key ? "it is empty" : "it is longer");
}

int fluxon_put(fluxon_client *cl, const char *key, const void *value, uint64_t value_len,
               const fluxon_put_options *opts)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cl || !fx_client_key_ok(key) || !value || value_len == 0) {
        if (!cl) return FLUXON_ERR_INVALID_ARGUMENT;
        if (!fx_client_key_ok(key)) return ckv_bad_key("put", key);
        return fx_client_refuse("put: %s", !value ? "value is NULL" : "value_len is 0");
    }
    if (value_len <= CKV_PUT_INLINE_MAX &&
        !(opts && (opts->field_mask & (FLUXON_PUT_OPT_ATOMIC_GROUPS | FLUXON_PUT_OPT_REPLICA_MASK)))) {
        int rc = fx_client_ready(cl);
        if (rc == FLUXON_OK) rc = ckv_put_inline(cl, key, value, value_len, opts);
        return rc == FLUXON_ERR_TIMEOUT ? FLUXON_ERR_UNKNOWN_OUTCOME : rc; /* sent: it may apply */
    }
    fluxon_plan *plan = NULL;
    int st = FLUXON_OK;
    int rc = fx_client_put_start(cl, &key, 1, value_len, opts, FX_PUT_PLACE, &plan, &st);
    if (rc != FLUXON_OK) return rc;
    if (st != FLUXON_OK) {
        fluxon_put_abort(cl, plan);
        return st;
    }
    memcpy((void *)(uintptr_t)plan->value_ptrs[0], value, value_len);
    fluxon_future *f = NULL;
    rc = fluxon_local_fast_put_commit(cl, plan, &f);
    if (rc != FLUXON_OK) {
        fluxon_put_abort(cl, plan);
        return rc;
    }
    rc = fluxon_future_wait(f, cl->cfg.timeout_ms);
    if (rc == FLUXON_OK && fluxon_future_key_statuses(f, &st, 1) == FLUXON_OK && st == FLUXON_PIN_REFUSED)
        rc = st; /* stored, not pinned (issue 42) */
    fluxon_future_free(f);
    return rc == FLUXON_ERR_TIMEOUT ? FLUXON_ERR_UNKNOWN_OUTCOME : rc; /* committed: it converges */
}

int fluxon_get(fluxon_client *cl, const char *key, fluxon_holder **holder_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cl || !fx_client_key_ok(key) || !holder_p) {
        if (!cl) return FLUXON_ERR_INVALID_ARGUMENT;
        if (!fx_client_key_ok(key)) return ckv_bad_key("get", key);
        return fx_client_refuse("get: holder_p is NULL");
    }
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    int rc = fluxon_get_start(cl, &key, 1, 1, NULL, 0, &h, &r);
    if (rc != FLUXON_OK) return rc;
    if (r.transferable_len == 0) {
        fluxon_cancel_get_transfer(cl, h);
        return r.miss_status < 0 ? r.miss_status : FLUXON_ERR_NOT_FOUND;
    }
    fx_plan_obj_t *o = NULL;
    fx_plan_reg_take(cl->plans, h, FX_PLAN_HANDLE, NULL, NULL, &o);
    fluxon_holder *hd = fx_calloc(1, sizeof *hd);
    if (!o || !hd) {
        fx_free(hd);
        if (o) {
            fx_client_consume(cl, o->owner_id, 0);
            fx_plan_reg_retire(cl->plans, o);
        }
        return FLUXON_ERR_NOMEM;
    }
    hd->cl = cl;
    hd->holder_id = o->holder_ids[0];
    hd->data = (const uint8_t *)fx_segment_base(cl->seg) + o->offsets[0];
    hd->len = o->lens[0];
    fx_client_consume(cl, o->owner_id, 1);
    fx_plan_reg_retire(cl->plans, o);
    *holder_p = hd;
    return FLUXON_OK;
}

const void *fluxon_holder_data(const fluxon_holder *h) { return h ? h->data : NULL; }
uint64_t fluxon_holder_len(const fluxon_holder *h) { return h ? h->len : 0; }

void fluxon_holder_release(fluxon_holder *h)
{
    if (!h) return;
    if (fx_client_ready(h->cl) == FLUXON_OK) fx_client_release_ids(h->cl, &h->holder_id, 1);
    fx_free(h);
}

int fluxon_delete(fluxon_client *cl, const char *key)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = fx_client_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!fx_client_key_ok(key)) return ckv_bad_key("delete", key);
    fx_body_key_t b = {fx_str_c(key)};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(key, &b, req, len);
    return fx_client_call_decode(cl, FX_MSG_DELETE, req, len, "DELETE", NULL, NULL);
}

static int ckv_decode_count(const uint8_t *body, uint32_t len, void *arg)
{
    fx_body_count_t c;
    fx_arena_t a = {0};
    int rc = fx_body_count_decode(body, len, &c, &a);
    if (rc == FLUXON_OK) *(size_t *)arg = c.count;
    fx_arena_free(&a);
    return rc;
}

int fluxon_prefetch(fluxon_client *cl, const char *const *keys, size_t n)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = fx_client_ready(cl);
    if (rc != FLUXON_OK) return rc;
    fx_str_t stack[FX_CLIENT_STACK_KEYS], *kv;
    if ((rc = fx_client_keys(keys, n, stack, &kv)) != FLUXON_OK) return rc;
    fx_body_keys_t b = {{kv, (uint32_t)n}};
    uint8_t *req;
    uint32_t len;
    /* a key the owner would refuse in the tenant's namespace (its prefix counts): refused here,
     * for nobody answers a one-way request */
    size_t tl = strcmp(cl->cfg.tenant, FX_TENANT_DEFAULT) ? strlen(cl->cfg.tenant) + 2 : 0;
    for (size_t i = 0; tl && i < n; i++)
        if (kv[i].len + tl > FLUXON_MAX_KEY_BYTES) {
            fx_client_keys_done(kv, stack);
            return fx_client_refuse("prefetch: key %zu is %u bytes, over the %zu bytes tenant \"%s\" keys may have "
                                    "(FLUXON_MAX_KEY_BYTES %d less its namespace prefix)", i, kv[i].len,
                                    FLUXON_MAX_KEY_BYTES - tl, cl->cfg.tenant, FLUXON_MAX_KEY_BYTES);
        }
    FX_CLIENT_ENCODE(keys, &b, req, len);
    fx_client_keys_done(kv, stack);
    return fx_client_send_hint(cl, FX_MSG_PREFETCH, req, len); /* takes req; never waits */
}

int fluxon_batch_exists(fluxon_client *cl, const char *const *keys, size_t n, size_t *leading_hits_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = fx_client_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!leading_hits_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_str_t stack[FX_CLIENT_STACK_KEYS], *kv;
    if ((rc = fx_client_keys(keys, n, stack, &kv)) != FLUXON_OK) return rc;
    fx_body_keys_t b = {{kv, (uint32_t)n}};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(keys, &b, req, len);
    fx_client_keys_done(kv, stack);
    return fx_client_call_decode(cl, FX_MSG_EXISTS, req, len, "EXISTS", ckv_decode_count, leading_hits_p);
}

static int ckv_decode_lease(const uint8_t *body, uint32_t len, void *arg)
{
    fx_body_lease_ack_t a;
    fx_arena_t ar = {0};
    int rc = fx_body_lease_ack_decode(body, len, &a, &ar);
    if (rc == FLUXON_OK) *(uint64_t *)arg = a.lease_id;
    fx_arena_free(&ar);
    return rc;
}

int fluxon_lease_grant(fluxon_client *cl, uint64_t ttl_ms, uint64_t *lease_id_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = fx_client_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!lease_id_p || ttl_ms == 0 || ttl_ms > 86400000u) {
        if (lease_id_p) fx_client_last_msg_set("lease_grant: ttl_ms %llu is not in 1..86400000", (unsigned long long)ttl_ms);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    fx_body_lease_t b = {ttl_ms};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(lease, &b, req, len);
    return fx_client_call_decode(cl, FX_MSG_LEASE_GRANT, req, len, "LEASE_GRANT", ckv_decode_lease, lease_id_p);
}

/* ---- pins (issue 42) ---- */
typedef struct ckv_pin_ctx {
    int *statuses;
    size_t n;
} ckv_pin_ctx_t;

static int ckv_decode_pin(const uint8_t *body, uint32_t len, void *arg)
{
    ckv_pin_ctx_t *x = arg;
    fx_body_statuses_t b;
    fx_arena_t a = {0};
    int rc = fx_body_statuses_decode(body, len, &b, &a);
    if (rc == FLUXON_OK && b.statuses.n != x->n) rc = FLUXON_ERR_PROTOCOL;
    for (size_t i = 0; rc == FLUXON_OK && i < x->n; i++) x->statuses[i] = (int)(int64_t)b.statuses.v[i];
    fx_arena_free(&a);
    return rc;
}

int fluxon_pin(fluxon_client *cl, const char *const *keys, size_t n_keys, uint32_t ttl_ms, uint32_t flags,
               int *statuses)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = fx_client_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!statuses || ttl_ms > FLUXON_PIN_TTL_MAX_MS || (flags & ~FLUXON_PIN_REFRESH_ON_HIT)) {
        return fx_client_refuse("pin: %s", !statuses                          ? "statuses is NULL"
                                : ttl_ms > FLUXON_PIN_TTL_MAX_MS ? "ttl_ms is over FLUXON_PIN_TTL_MAX_MS (86400000)"
                                                                 : "flags has bits other than FLUXON_PIN_REFRESH_ON_HIT");
    }
    fx_str_t stack[FX_CLIENT_STACK_KEYS], *kv;
    if ((rc = fx_client_keys(keys, n_keys, stack, &kv)) != FLUXON_OK) return rc;
    fx_body_pin_t b = {{kv, (uint32_t)n_keys}, ttl_ms, flags};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(pin, &b, req, len);
    fx_client_keys_done(kv, stack);
    ckv_pin_ctx_t x = {statuses, n_keys};
    return fx_client_call_decode(cl, FX_MSG_PIN, req, len, "PIN", ckv_decode_pin, &x);
}

/* ---- quotas (issue 42) ---- */
int fluxon_tenant_set(fluxon_client *cl, const char *tenant, uint64_t quota_bytes, uint64_t guaranteed_bytes,
                      uint32_t flags, const char *admin_token)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = fx_client_ready(cl);
    if (rc != FLUXON_OK) return rc;
    uint32_t known = FLUXON_TENANT_SET_QUOTA | FLUXON_TENANT_SET_GUARANTEED;
    if (!tenant || !flags || (flags & ~known)) {
        return fx_client_refuse("tenant_set: %s", !tenant ? "tenant is NULL"
                                                  : !flags ? "flags is 0 (FLUXON_TENANT_SET_QUOTA and/or _GUARANTEED)"
                                                           : "flags has unknown bits");
    }
    if (!fx_tenant_name_ok(tenant, strlen(tenant))) { /* no owner could list it: not a NOT_FOUND */
        return fx_client_refuse("tenant_set: \"%.40s\" is not a tenant name ([A-Za-z0-9_.-], 1..%d bytes)", tenant,
                                FX_TENANT_NAME_MAX - 1);
    }
    _Static_assert(FLUXON_TENANT_SET_QUOTA == FX_TENANT_SET_QUOTA && FLUXON_TENANT_SET_GUARANTEED == FX_TENANT_SET_GUARANTEED,
                   "the wire's bits are the API's");
    fx_body_tenant_set_t b = {fx_str_c(tenant), quota_bytes, guaranteed_bytes, flags, fx_str_c(admin_token ? admin_token : "")};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(tenant_set, &b, req, len);
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    rc = fx_client_call(cl, FX_MSG_TENANT_SET, req, len, NULL, NULL, &resp, &rlen);
    fx_body_error_t e; /* an admin's request: the owner's reason is always shown */
    fx_arena_t a = {0};
    if (rc < 0 && resp && fx_body_error_decode(resp, rlen, &e, &a) == FLUXON_OK && e.message.len) {
        FX_WARN("tenant set %s: %s: %.*s", tenant, fluxon_status_string(rc), (int)e.message.len, e.message.p);
        fx_client_last_msg_set("%.*s", (int)e.message.len, e.message.p); /* fluxon_last_error_message */
    }
    fx_arena_free(&a);
    fx_client_buf_free(resp);
    return rc;
}

typedef struct ckv_list_ctx {
    void (*cb)(void *arg, const char *key);
    void *arg;
    size_t *n_p;
} ckv_list_ctx_t;

static int ckv_decode_list(const uint8_t *body, uint32_t len, void *arg)
{
    ckv_list_ctx_t *x = arg;
    fx_body_keys_t k;
    fx_arena_t a = {0};
    int rc = fx_body_keys_decode(body, len, &k, &a);
    char key[FLUXON_MAX_KEY_BYTES + 1];
    for (uint32_t i = 0; rc == FLUXON_OK && i < k.keys.n; i++) {
        fx_str_copy(k.keys.v[i], key, sizeof key);
        x->cb(x->arg, key);
    }
    if (rc == FLUXON_OK) *x->n_p = k.keys.n;
    fx_arena_free(&a);
    return rc;
}

int fluxon_list_keys(fluxon_client *cl, const char *prefix, const char *after, uint32_t limit,
                     void (*cb)(void *arg, const char *key), void *arg, size_t *n_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    int rc = fx_client_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!cb || !n_p) return fx_client_refuse("list_keys: %s is NULL", !cb ? "cb" : "n_p");
    if (limit == 0 || limit > 10000) return fx_client_refuse("list_keys: limit %u is not in 1..10000", limit);
    if ((prefix && strlen(prefix) > FLUXON_MAX_KEY_BYTES) || (after && strlen(after) > FLUXON_MAX_KEY_BYTES))
        return fx_client_refuse("list_keys: %s is over FLUXON_MAX_KEY_BYTES (%d)",
                                prefix && strlen(prefix) > FLUXON_MAX_KEY_BYTES ? "prefix" : "after",
                                FLUXON_MAX_KEY_BYTES);
    fx_body_list_t b = {fx_str_c(prefix ? prefix : ""), fx_str_c(after ? after : ""), limit};
    uint8_t *req;
    uint32_t len;
    FX_CLIENT_ENCODE(list, &b, req, len);
    ckv_list_ctx_t x = {cb, arg, n_p};
    return fx_client_call_decode(cl, FX_MSG_LIST, req, len, "LIST", ckv_decode_list, &x);
}

int fluxon_wait_local_segments_ready(fluxon_client *cl, uint32_t timeout_ms, fluxon_segment_info *out, size_t cap,
                                     size_t *n_p)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cl || !n_p || (!out && cap)) return FLUXON_ERR_INVALID_ARGUMENT;
    *n_p = 1;
    if (cap < 1) return FLUXON_ERR_INVALID_ARGUMENT;
    if (__atomic_load_n(&cl->owner_lost, __ATOMIC_ACQUIRE)) return FLUXON_ERR_STALE;
    memset(out, 0, sizeof *out);
    fx_strlcpy(out->segment_label, "external_owner:0", sizeof out->segment_label);
    fx_strlcpy(out->node_id, cl->owner_node_id, sizeof out->node_id);
    out->write_ptr = fx_segment_base(cl->seg);
    out->read_ptr = fx_segment_base(cl->seg);
    out->len = fx_segment_len(cl->seg);
    out->generation = fx_segment_generation(cl->seg);
    (void)timeout_ms;
    return FLUXON_OK;
}

#undef CKV_PUT_INLINE_MAX
