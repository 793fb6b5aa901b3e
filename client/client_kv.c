/* client_kv.c — the external client's KV and hostless API (fluxon_put/get/delete...,
 * fluxon_local_fast_put_*, fluxon_get_start/transfer, futures). Requests are encoded on
 * the caller's thread and carried by the client's reactor; plans and handles live in a
 * registry so every call can tell a live plan of the right type from anything else
 * (FLUXON_ERR_WRONG_HANDLE) before touching it. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "client.h"
#include "hmap.h"
#include "log.h"

enum { CK_PUT_PLAN = 1, CK_READ_PLAN = 2, CK_HANDLE = 3 };

typedef struct ck_obj { /* a live plan or handle */
    int kind;
    uint64_t owner_id; /* plan id / handle id at the owner */
    uint64_t generation;
    size_t n;          /* put plan: keys; read plan: holders; handle: transferable */
    uint64_t *holder_ids, *offsets, *lens;
    uint64_t *group_lens; /* handle: the batch's groups (for boundary checks) */
    size_t n_groups;
    uint64_t expires_ms; /* handle: the owner releases it around then (handle_ttl_ms) */
    void *blob;        /* the fluxon_plan or fluxon_get_handle given out */
} ck_obj_t;

struct fluxon_get_handle {
    uint64_t magic;
};
#define CK_HANDLE_MAGIC 0x454c444e41485846ull

struct fluxon_future {
    int refs;        /* atomic: caller + reactor map */
    int efd;
    int status;      /* atomic; valid once done */
    int done;        /* atomic */
    uint64_t id;
};

struct fluxon_holder {
    fluxon_client *cl;
    uint64_t holder_id;
    const void *data;
    uint64_t len;
};

typedef struct ck_state {
    pthread_mutex_t lock; /* guards objs */
    fx_hmap_t *objs;      /* blob pointer -> ck_obj_t */
    fx_hmap_t *futures;   /* reactor thread only: future id -> fluxon_future */
} ck_state_t;

static ck_state_t *ck(fluxon_client *cl) { return cl->kv; }

/* ---- registry ---- */
static int ck_register(fluxon_client *cl, ck_obj_t *obj)
{
    ck_state_t *s = ck(cl);
    pthread_mutex_lock(&s->lock);
    int rc = fx_hmap_put(s->objs, &obj->blob, sizeof obj->blob, obj, NULL);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* Removes and returns the live object for blob if it has the wanted kind. */
static ck_obj_t *ck_take(fluxon_client *cl, const void *blob, int kind, bool remove)
{
    ck_state_t *s = ck(cl);
    pthread_mutex_lock(&s->lock);
    ck_obj_t *o = fx_hmap_get(s->objs, &blob, sizeof blob);
    if (o && o->kind != kind) o = NULL;
    if (o && remove) fx_hmap_del(s->objs, &blob, sizeof blob, NULL);
    pthread_mutex_unlock(&s->lock);
    return o;
}

static void ck_obj_free(ck_obj_t *o)
{
    if (!o) return;
    fx_free(o->holder_ids);
    fx_free(o->offsets);
    fx_free(o->lens);
    fx_free(o->group_lens);
    fx_free(o->blob);
    fx_free(o);
}

/* ---- requests: encoded and sent by the calling thread, answered via the reactor ---- */
typedef void (*ck_resp_hook)(fluxon_client *cl, void *ctx, int status, const uint8_t *body, uint32_t len);

typedef struct ck_rpc {
    int refs; /* atomic: the caller + the pending map */
    sem_t done;
    int status;
    uint64_t id;
    ck_resp_hook hook; /* runs on the reactor before the caller wakes */
    void *hook_ctx;
    uint8_t *resp;
    uint32_t resp_len;
} ck_rpc_t;

static void ck_rpc_unref(ck_rpc_t *r)
{
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        sem_destroy(&r->done);
        fx_free(r->resp);
        fx_free(r);
    }
}

static ck_rpc_t *ck_pending_take(fluxon_client *cl, uint64_t id)
{
    void *v = NULL;
    pthread_mutex_lock(&cl->pend_lock);
    fx_hmap_del(cl->pending, &id, sizeof id, &v);
    pthread_mutex_unlock(&cl->pend_lock);
    return v;
}

static void ck_rpc_finish(fluxon_client *cl, ck_rpc_t *r, int status)
{
    if (r->hook) r->hook(cl, r->hook_ctx, status, r->resp, r->resp_len);
    r->status = status;
    sem_post(&r->done);
    ck_rpc_unref(r);
}

/* Reactor thread: the response to a request some caller sent directly. */
static void ck_on_response(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    fluxon_client *cl = fx_conn_ud(c);
    ck_rpc_t *r = ck_pending_take(cl, h->req_id);
    if (!r) {
        FX_DEBUG("late response %llu (%s) dropped", (unsigned long long)h->req_id, fx_msg_name(h->type));
        return;
    }
    int status = h->status;
    if (h->body_len) {
        r->resp = fx_malloc(h->body_len);
        if (r->resp) {
            memcpy(r->resp, body, h->body_len);
            r->resp_len = h->body_len;
        } else if (status == FLUXON_OK) {
            status = FLUXON_ERR_NOMEM;
        }
    }
    ck_rpc_finish(cl, r, status);
}

/* Reactor thread: the owner is gone; every waiting caller gets UNAVAILABLE. */
static void ck_fail_pending(fluxon_client *cl)
{
    for (;;) {
        ck_rpc_t *r = NULL;
        pthread_mutex_lock(&cl->pend_lock);
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        const char *k;
        size_t kl;
        void *v;
        if (fx_hmap_iter_next(cl->pending, &it, &k, &kl, &v)) {
            fx_hmap_del(cl->pending, k, kl, NULL);
            r = v;
        }
        pthread_mutex_unlock(&cl->pend_lock);
        if (!r) return;
        ck_rpc_finish(cl, r, FLUXON_ERR_UNAVAILABLE);
    }
}

FX_INTERNAL int fx_client_write(fluxon_client *cl, const fx_frame_header_t *h, const void *body)
{
    uint8_t hb[FX_FRAME_HEADER_BYTES];
    fx_frame_header_encode(h, hb);
    struct iovec iov[2] = {{hb, sizeof hb}, {(void *)body, h->body_len}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = h->body_len ? 2 : 1};
    uint64_t deadline = fx_now_ms() + cl->cfg.timeout_ms;
    int rc = FLUXON_OK;
    pthread_mutex_lock(&cl->io_lock);
    while (msg.msg_iovlen) {
        ssize_t n = sendmsg(cl->sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            uint64_t now = fx_now_ms();
            if (now >= deadline) {
                rc = FLUXON_ERR_TIMEOUT;
                break;
            }
            struct pollfd p = {cl->sock, POLLOUT, 0};
            poll(&p, 1, (int)(deadline - now));
            continue;
        }
        if (n < 0) {
            rc = FLUXON_ERR_UNAVAILABLE;
            break;
        }
        size_t left = (size_t)n; /* advance past what went out */
        while (msg.msg_iovlen && left >= msg.msg_iov[0].iov_len) {
            left -= msg.msg_iov[0].iov_len;
            msg.msg_iov++;
            msg.msg_iovlen--;
        }
        if (msg.msg_iovlen) {
            msg.msg_iov[0].iov_base = (uint8_t *)msg.msg_iov[0].iov_base + left;
            msg.msg_iov[0].iov_len -= left;
        }
    }
    pthread_mutex_unlock(&cl->io_lock);
    return rc;
}

/* One-way frames (release, consume) are handed to the reactor, which writes them in
 * order: the caller pays a queue push instead of a socket write. Only the order among
 * one-way frames matters (consume before release of the same plan), and it holds. */
typedef struct ck_oneway {
    fluxon_client *cl;
    fx_frame_header_t h;
    uint8_t *body;
} ck_oneway_t;

static void ck_oneway_send(void *arg)
{
    ck_oneway_t *w = arg;
    if (!__atomic_load_n(&w->cl->owner_lost, __ATOMIC_ACQUIRE)) fx_client_write(w->cl, &w->h, w->body);
    fx_free(w->body);
    fx_free(w);
}

/* Sends type with an encoded body (taken over) and, unless one-way, waits for the
 * answer. On return resp_p and resp_len_p receive the response body (fx_free), also for
 * an error status (an error body). */
static int ck_call(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t req_len, ck_resp_hook hook,
                   void *hook_ctx, uint8_t **resp_p, uint32_t *resp_len_p, bool oneway)
{
    __atomic_add_fetch(&cl->requests, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&cl->owner_lost, __ATOMIC_ACQUIRE)) {
        fx_free(req);
        __atomic_add_fetch(&cl->errors, 1, __ATOMIC_RELAXED);
        return FLUXON_ERR_UNAVAILABLE;
    }
    if (oneway) { /* fire and forget: the reactor writes it, the caller does not wait */
        ck_oneway_t *w = fx_malloc(sizeof *w);
        if (!w) {
            fx_free(req);
            return FLUXON_ERR_NOMEM;
        }
        *w = (ck_oneway_t){cl, {FX_FRAME_MAGIC, type, 0, req_len, 0, 0}, req};
        if (fx_reactor_post(cl->r, ck_oneway_send, w) != FLUXON_OK) {
            fx_free(req);
            fx_free(w);
            return FLUXON_ERR_NOMEM;
        }
        return FLUXON_OK;
    }
    ck_rpc_t *r = fx_calloc(1, sizeof *r);
    if (!r) {
        fx_free(req);
        return FLUXON_ERR_NOMEM;
    }
    r->refs = 2;
    sem_init(&r->done, 0, 0);
    r->hook = hook;
    r->hook_ctx = hook_ctx;
    r->id = __atomic_add_fetch(&cl->next_req_id, 1, __ATOMIC_RELAXED) | (1ull << 62);
    pthread_mutex_lock(&cl->pend_lock);
    int rc = fx_hmap_put(cl->pending, &r->id, sizeof r->id, r, NULL);
    pthread_mutex_unlock(&cl->pend_lock);
    if (rc != FLUXON_OK) {
        fx_free(req);
        sem_destroy(&r->done);
        fx_free(r);
        return rc;
    }
    fx_frame_header_t h = {FX_FRAME_MAGIC, type, 0, req_len, 0, r->id};
    rc = fx_client_write(cl, &h, req);
    fx_free(req);
    if (rc == FLUXON_OK) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)cl->cfg.timeout_ms * 1000000ull;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        int w;
        while ((w = sem_timedwait(&r->done, &ts)) != 0 && errno == EINTR) {}
        if (w == 0) {
            rc = r->status;
        } else if (ck_pending_take(cl, r->id) == r) {
            rc = FLUXON_ERR_TIMEOUT; /* withdrawn: the reactor will not touch it */
            __atomic_add_fetch(&cl->timeouts, 1, __ATOMIC_RELAXED);
            ck_rpc_unref(r);
        } else {
            while (sem_wait(&r->done) != 0 && errno == EINTR) {} /* being answered right now */
            rc = r->status;
        }
    } else if (ck_pending_take(cl, r->id) == r) {
        ck_rpc_unref(r);
    } else {
        while (sem_wait(&r->done) != 0 && errno == EINTR) {}
    }
    if (resp_p) {
        *resp_p = r->resp;
        *resp_len_p = r->resp_len;
        r->resp = NULL;
    }
    if (rc < 0) __atomic_add_fetch(&cl->errors, 1, __ATOMIC_RELAXED);
    ck_rpc_unref(r);
    return rc;
}

FX_INTERNAL int fx_client_rpc(fluxon_client *cl, uint16_t type, uint8_t *body, uint32_t body_len,
                              uint8_t **resp_p, uint32_t *resp_len_p)
{
    return ck_call(cl, type, body, body_len, NULL, NULL, resp_p, resp_len_p, false);
}

#define CK_ENCODE(bodykind, bp, out_buf, out_len)                        \
    do {                                                                \
        out_len = (uint32_t)fx_body_##bodykind##_size(bp);              \
        out_buf = fx_malloc((size_t)out_len + 8);                       \
        if (out_buf) fx_body_##bodykind##_encode((bp), out_buf);        \
    } while (0)

/* Bad input is reported with the owner's or master's message naming what was wrong;
 * ordinary outcomes (a miss, a busy key) only at debug level. */
static void ck_log_error(const char *what, int rc, const uint8_t *resp, uint32_t len)
{
    if (rc >= 0 || !resp) return;
    fx_body_error_t e;
    fx_arena_t a = {0};
    if (fx_body_error_decode(resp, len, &e, &a) == FLUXON_OK && e.message.len) {
        int lvl = rc == FLUXON_ERR_INVALID_ARGUMENT || rc == FLUXON_ERR_PROTOCOL || rc == FLUXON_ERR_INTERNAL ||
                          rc == FLUXON_ERR_LEASE_EXPIRED
                      ? FX_LOG_WARN
                      : FX_LOG_DEBUG;
        if (fx_log_get_level() <= lvl)
            fx_log(lvl, "%s: %s: %.*s", what, fluxon_status_string(rc), (int)e.message.len, e.message.p);
    }
    fx_arena_free(&a);
}

/* ---- validation shared by the entry points ---- */
static bool ck_key_ok(const char *k)
{
    if (!k) return false;
    size_t n = strnlen(k, FLUXON_MAX_KEY_BYTES + 1);
    return n > 0 && n <= FLUXON_MAX_KEY_BYTES;
}

static int ck_keys(const char *const *keys, size_t n, fx_str_t **out)
{
    if (!keys || n == 0 || n > 1000000) {
        FX_WARN("keys is %s and n_keys is %zu (1..1000000 keys)", keys ? "set" : "NULL", n);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    fx_str_t *v = fx_malloc(n * sizeof *v);
    if (!v) return FLUXON_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!ck_key_ok(keys[i])) {
            FX_WARN("key %zu is %s (keys are 1..%d bytes)", i, !keys[i] ? "NULL" : !keys[i][0] ? "empty" : "too long",
                    FLUXON_MAX_KEY_BYTES);
            fx_free(v);
            return FLUXON_ERR_INVALID_ARGUMENT;
        }
        v[i] = fx_str_c(keys[i]);
    }
    *out = v;
    return FLUXON_OK;
}

static int ck_groups(const uint32_t *lens, size_t n_groups, size_t n, uint64_t **out)
{
    *out = NULL;
    if (!lens && n_groups == 0) return FLUXON_OK;
    if (!lens || n_groups == 0 || n_groups > n) return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t sum = 0;
    for (size_t g = 0; g < n_groups; g++) {
        if (lens[g] == 0) return FLUXON_ERR_INVALID_ARGUMENT;
        sum += lens[g];
    }
    if (sum != n) {
        FX_WARN("atomic_group_lens sum to %llu, n_keys is %zu", (unsigned long long)sum, n);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    uint64_t *v = fx_malloc(n_groups * sizeof *v);
    if (!v) return FLUXON_ERR_NOMEM;
    for (size_t g = 0; g < n_groups; g++) v[g] = lens[g];
    *out = v;
    return FLUXON_OK;
}

static int ck_ready(fluxon_client *cl)
{
    if (!cl) return FLUXON_ERR_INVALID_ARGUMENT;
    return __atomic_load_n(&cl->owner_lost, __ATOMIC_ACQUIRE) ? FLUXON_ERR_UNAVAILABLE : FLUXON_OK;
}

static uint8_t *ck_base(fluxon_client *cl) { return fx_segment_base(cl->seg); }

/* ---- put ---- */
/* The scalar put options (flags, lease, preferred sub-cluster) on top of *flags_p;
 * FLUXON_ERR_INVALID_ARGUMENT (with a warning) for local_first with write_through or a
 * preferred_sub_cluster that is empty or too long. opts may be NULL. */
static int ck_put_scalars(const fluxon_put_options *opts, uint64_t *flags_p, uint64_t *lease_p,
                          const char **preferred_p)
{
    if (!opts) return FLUXON_OK;
    uint64_t fm = opts->field_mask, flags = *flags_p;
    if (fm & ~((FLUXON_PUT_OPT_LOCAL_FIRST << 1) - 1)) {
        FX_WARN("put: field_mask 0x%llx has bits this library does not know (it knows 0x%llx)",
                (unsigned long long)fm, (unsigned long long)((FLUXON_PUT_OPT_LOCAL_FIRST << 1) - 1));
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if ((fm & FLUXON_PUT_OPT_REJECT_IF_INFLIGHT) && opts->reject_if_inflight_same_key) flags |= FX_PUT_REJECT_IF_INFLIGHT;
    if ((fm & FLUXON_PUT_OPT_REJECT_IF_EXIST) && opts->reject_if_exist_same_key) flags |= FX_PUT_REJECT_IF_EXIST;
    if ((fm & FLUXON_PUT_OPT_WRITE_THROUGH) && opts->write_through) flags |= FX_PUT_WRITE_THROUGH;
    if ((fm & FLUXON_PUT_OPT_MAKE_REPLICA_TASK) && opts->make_replica_task) flags |= FX_PUT_MAKE_REPLICA;
    if (fm & FLUXON_PUT_OPT_LEASE_ID) *lease_p = opts->lease_id;
    const char *preferred = fm & FLUXON_PUT_OPT_PREFERRED_SUB_CLUSTER ? opts->preferred_sub_cluster : NULL;
    if ((fm & FLUXON_PUT_OPT_LOCAL_FIRST) && opts->local_first) {
        if (flags & FX_PUT_WRITE_THROUGH) {
            FX_WARN("put: local_first and write_through contradict each other");
            return FLUXON_ERR_INVALID_ARGUMENT;
        }
        flags = (flags & ~FX_PUT_PLACE) | FX_PUT_LOCAL_FIRST;
    }
    if (preferred && (strlen(preferred) == 0 || strlen(preferred) >= FX_ID_MAX ||
                      strspn(preferred, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
                          strlen(preferred))) {
        FX_WARN("put: preferred_sub_cluster must be 1..%d characters of [A-Za-z0-9._-] (as owners' sub_cluster)",
                FX_ID_MAX - 1);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    *flags_p = flags;
    *preferred_p = preferred;
    return FLUXON_OK;
}

static int ck_put_start(fluxon_client *cl, const char *const *keys, size_t n, uint64_t value_len,
                        const fluxon_put_options *opts, uint64_t forced_flags, fluxon_plan **plan_p,
                        int *key_status)
{
    int rc = ck_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!plan_p || value_len == 0) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_str_t *kv = NULL;
    uint64_t *groups = NULL;
    size_t n_groups = 0;
    const uint8_t *mask = NULL;
    uint64_t flags = forced_flags, lease = 0;
    const char *preferred = NULL;
    if ((rc = ck_keys(keys, n, &kv)) != FLUXON_OK) return rc;
    if (opts) {
        uint64_t fm = opts->field_mask;
        rc = ck_put_scalars(opts, &flags, &lease, &preferred);
        if (rc == FLUXON_OK && (fm & FLUXON_PUT_OPT_ATOMIC_GROUPS)) {
            rc = ck_groups(opts->atomic_group_lens, opts->n_atomic_groups, n, &groups);
            n_groups = groups ? opts->n_atomic_groups : 0;
        }
        if (rc == FLUXON_OK && (fm & FLUXON_PUT_OPT_REPLICA_MASK)) {
            mask = opts->make_replica_task_mask;
            if (!mask) {
                FX_WARN("put_start: FLUXON_PUT_OPT_REPLICA_MASK is set but make_replica_task_mask is NULL");
                rc = FLUXON_ERR_INVALID_ARGUMENT;
            }
            size_t s = 0;
            for (size_t g = 0; rc == FLUXON_OK && g < (groups ? n_groups : 0); s += groups[g], g++)
                for (size_t i = s + 1; i < s + groups[g]; i++)
                    if ((mask[i] != 0) != (mask[s] != 0)) rc = FLUXON_ERR_INVALID_ARGUMENT;
        }
    }
    if (rc != FLUXON_OK) {
        fx_free(kv);
        fx_free(groups);
        return rc;
    }
    fx_body_put_start_t b = {{kv, (uint32_t)n}, value_len, flags, {groups, (uint32_t)n_groups},
                             {(const char *)mask, mask ? (uint32_t)n : 0}, lease, fx_str_c(preferred)};
    uint8_t *req;
    uint32_t len;
    CK_ENCODE(put_start, &b, req, len);
    fx_free(kv);
    fx_free(groups);
    if (!req) return FLUXON_ERR_NOMEM;
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    rc = ck_call(cl, FX_MSG_PUT_START, req, len, NULL, NULL, &resp, &rlen, false);
    ck_log_error("put_start", rc, resp, rlen);
    if (rc != FLUXON_OK) {
        fx_free(resp);
        return rc;
    }
    fx_body_put_start_ack_t ack;
    fx_arena_t a = {0};
    rc = fx_body_put_start_ack_decode(resp, rlen, &ack, &a);
    if (rc == FLUXON_OK && (ack.statuses.n != n || ack.offsets.n != n)) rc = FLUXON_ERR_PROTOCOL;
    ck_obj_t *o = NULL;
    fluxon_plan *plan = NULL;
    if (rc == FLUXON_OK) {
        o = fx_calloc(1, sizeof *o);
        plan = fx_calloc(1, sizeof *plan + n * sizeof(uint64_t));
        if (!o || !plan) rc = FLUXON_ERR_NOMEM;
    }
    if (rc == FLUXON_OK) {
        plan->magic = FLUXON_PUT_PLAN_MAGIC;
        plan->count = n;
        for (size_t i = 0; i < n; i++) {
            int ks = (int)(int64_t)ack.statuses.v[i];
            plan->value_ptrs[i] = ks == FLUXON_OK ? (uint64_t)(uintptr_t)(ck_base(cl) + ack.offsets.v[i]) : 0;
            if (key_status) key_status[i] = ks;
        }
        o->kind = CK_PUT_PLAN;
        o->owner_id = ack.plan_id;
        o->generation = cl->owner_generation;
        o->n = n;
        o->blob = plan;
        rc = ck_register(cl, o);
    }
    if (rc != FLUXON_OK) {
        if (ack.plan_id && rc != FLUXON_ERR_PROTOCOL) { /* give the slots back */
            fx_body_plan_ref_t pr = {ack.plan_id};
            uint8_t *q;
            uint32_t ql;
            CK_ENCODE(plan_ref, &pr, q, ql);
            if (q) ck_call(cl, FX_MSG_PUT_ABORT, q, ql, NULL, NULL, NULL, NULL, false);
        }
        fx_free(plan);
        fx_free(o);
    } else {
        *plan_p = plan;
    }
    fx_arena_free(&a);
    fx_free(resp);
    return rc;
}

int fluxon_local_fast_put_start(fluxon_client *c, const char *const *keys, size_t n_keys, uint64_t value_len,
                                const fluxon_put_options *opts, fluxon_plan **plan_p, int *key_status)
{
    return ck_put_start(c, keys, n_keys, value_len, opts, FX_PUT_REJECT_IF_INFLIGHT | FX_PUT_REJECT_IF_EXIST,
                        plan_p, key_status);
}

/* reactor side of commit: the future must be registered before PUBLISHED can arrive */
typedef struct ck_commit_ctx {
    fluxon_future *f;
} ck_commit_ctx_t;

static void ck_commit_hook(fluxon_client *cl, void *ctx, int status, const uint8_t *body, uint32_t len)
{
    ck_commit_ctx_t *c = ctx;
    if (status != FLUXON_OK || !c) return;
    fx_body_put_commit_ack_t ack;
    fx_arena_t a = {0};
    if (fx_body_put_commit_ack_decode(body, len, &ack, &a) == FLUXON_OK) {
        c->f->id = ack.future_id;
        __atomic_add_fetch(&c->f->refs, 1, __ATOMIC_ACQ_REL);
        if (fx_hmap_put(ck(cl)->futures, &c->f->id, sizeof c->f->id, c->f, NULL) != FLUXON_OK) {
            __atomic_sub_fetch(&c->f->refs, 1, __ATOMIC_ACQ_REL);
            __atomic_store_n(&c->f->status, FLUXON_ERR_NOMEM, __ATOMIC_RELEASE);
            __atomic_store_n(&c->f->done, 1, __ATOMIC_RELEASE);
        }
    }
    fx_arena_free(&a);
}

static void ck_future_complete(fluxon_future *f, int status)
{
    __atomic_store_n(&f->status, status, __ATOMIC_RELEASE);
    __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t w = write(f->efd, &one, sizeof one);
    (void)w;
}

int fluxon_future_poll(fluxon_future *f)
{
    if (!f) return FLUXON_ERR_INVALID_ARGUMENT;
    return __atomic_load_n(&f->done, __ATOMIC_ACQUIRE) ? __atomic_load_n(&f->status, __ATOMIC_ACQUIRE)
                                                         : FLUXON_IN_PROGRESS;
}

int fluxon_future_wait(fluxon_future *f, uint32_t timeout_ms)
{
    if (!f) return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t end = fx_now_ms() + timeout_ms;
    for (;;) {
        int st = fluxon_future_poll(f);
        if (st != FLUXON_IN_PROGRESS) return st;
        uint64_t now = fx_now_ms();
        if (now >= end) return FLUXON_ERR_TIMEOUT;
        struct pollfd p = {f->efd, POLLIN, 0};
        poll(&p, 1, (int)FX_MIN(end - now, 1000u));
    }
}

int fluxon_future_fd(const fluxon_future *f) { return f ? f->efd : -1; }

static void ck_future_unref(fluxon_future *f)
{
    if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        close(f->efd);
        fx_free(f);
    }
}

void fluxon_future_free(fluxon_future *f)
{
    if (f) ck_future_unref(f);
}

int fluxon_local_fast_put_commit(fluxon_client *cl, fluxon_plan *plan, fluxon_future **future_p)
{
    if (!cl || !plan || !future_p) return FLUXON_ERR_INVALID_ARGUMENT;
    ck_obj_t *o = ck_take(cl, plan, CK_PUT_PLAN, true);
    if (!o) return FLUXON_ERR_WRONG_HANDLE;
    int rc = ck_ready(cl);
    if (rc != FLUXON_OK) {
        ck_obj_free(o);
        return FLUXON_ERR_STALE;
    }
    bool any = false;
    for (size_t i = 0; i < o->n; i++) any |= plan->value_ptrs[i] != 0;
    fluxon_future *f = fx_calloc(1, sizeof *f);
    if (!f || (f->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        fx_free(f);
        ck_register(cl, o);
        return FLUXON_ERR_NOMEM;
    }
    f->refs = 1;
    if (!any || o->owner_id == 0) { /* nothing accepted: nothing to publish */
        ck_future_complete(f, FLUXON_OK);
        ck_obj_free(o);
        *future_p = f;
        return FLUXON_OK;
    }
    fx_body_plan_ref_t pr = {o->owner_id};
    uint8_t *req;
    uint32_t len;
    CK_ENCODE(plan_ref, &pr, req, len);
    if (!req) {
        fluxon_future_free(f);
        ck_register(cl, o);
        return FLUXON_ERR_NOMEM;
    }
    ck_commit_ctx_t ctx = {f};
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    rc = ck_call(cl, FX_MSG_PUT_COMMIT, req, len, ck_commit_hook, &ctx, &resp, &rlen, false);
    ck_log_error("put_commit", rc, resp, rlen);
    fx_free(resp);
    if (rc != FLUXON_OK) {
        fluxon_future_free(f);
        if (rc == FLUXON_ERR_TIMEOUT || rc == FLUXON_ERR_NOMEM) ck_register(cl, o); /* plan still usable */
        else ck_obj_free(o);
        return rc;
    }
    ck_obj_free(o);
    *future_p = f;
    return FLUXON_OK;
}

int fluxon_put_abort(fluxon_client *cl, fluxon_plan *plan)
{
    if (!cl || !plan) return FLUXON_ERR_INVALID_ARGUMENT;
    ck_obj_t *o = ck_take(cl, plan, CK_PUT_PLAN, true);
    if (!o) return FLUXON_ERR_WRONG_HANDLE;
    int rc = FLUXON_OK;
    if (o->owner_id && ck_ready(cl) == FLUXON_OK) {
        fx_body_plan_ref_t pr = {o->owner_id};
        uint8_t *req;
        uint32_t len;
        CK_ENCODE(plan_ref, &pr, req, len);
        rc = req ? ck_call(cl, FX_MSG_PUT_ABORT, req, len, NULL, NULL, NULL, NULL, false) : FLUXON_ERR_NOMEM;
    }
    if (rc == FLUXON_ERR_TIMEOUT || rc == FLUXON_ERR_NOMEM) {
        ck_register(cl, o);
        return rc;
    }
    ck_obj_free(o);
    return rc == FLUXON_ERR_UNAVAILABLE ? FLUXON_OK : rc; /* owner gone: its slots went with it */
}

/* ---- get ---- */
static void ck_send_oneway(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t len)
{
    if (!req) return;
    ck_call(cl, type, req, len, NULL, NULL, NULL, NULL, true);
}

/* One-way: the owner keeps the handle's first `consume` pins and releases the rest
 * (0 = all: a cancel). */
static void ck_consume(fluxon_client *cl, uint64_t handle_id, uint64_t consume)
{
    if (!handle_id) return;
    fx_body_handle_consume_t hc = {handle_id, consume};
    uint8_t *req;
    uint32_t len;
    CK_ENCODE(handle_consume, &hc, req, len);
    ck_send_oneway(cl, FX_MSG_HANDLE_CONSUME, req, len);
}

/* One-way: the owner drops these holders. */
static void ck_release_ids(fluxon_client *cl, const uint64_t *ids, size_t n)
{
    if (!n) return;
    fx_body_release_t rel = {{ids, (uint32_t)n}};
    uint8_t *req;
    uint32_t len;
    CK_ENCODE(release, &rel, req, len);
    ck_send_oneway(cl, FX_MSG_RELEASE, req, len);
}

int fluxon_get_start(fluxon_client *cl, const char *const *keys, size_t n, int prefix_best_effort,
                     const uint32_t *atomic_group_lens, size_t n_atomic_groups, fluxon_get_handle **handle_p,
                     fluxon_get_start_result *result)
{
    int rc = ck_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!handle_p || !result) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_str_t *kv = NULL;
    uint64_t *groups = NULL;
    if ((rc = ck_keys(keys, n, &kv)) != FLUXON_OK) return rc;
    if ((rc = ck_groups(atomic_group_lens, n_atomic_groups, n, &groups)) != FLUXON_OK) {
        fx_free(kv);
        return rc;
    }
    size_t ng = groups ? n_atomic_groups : 0;
    fx_body_get_start_t b = {{kv, (uint32_t)n}, {groups, (uint32_t)ng}, (uint8_t)(prefix_best_effort != 0)};
    uint8_t *req;
    uint32_t len;
    CK_ENCODE(get_start, &b, req, len);
    fx_free(kv);
    if (!req) {
        fx_free(groups);
        return FLUXON_ERR_NOMEM;
    }
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    rc = ck_call(cl, FX_MSG_GET_START, req, len, NULL, NULL, &resp, &rlen, false);
    ck_log_error("get_start", rc, resp, rlen);
    fx_body_get_start_ack_t ack;
    fx_arena_t a = {0};
    if (rc == FLUXON_OK) {
        rc = fx_body_get_start_ack_decode(resp, rlen, &ack, &a);
        if (rc == FLUXON_OK && (ack.transferable > n || ack.offsets.n != ack.transferable ||
                                ack.holder_ids.n != ack.transferable || ack.value_lens.n != ack.transferable))
            rc = FLUXON_ERR_PROTOCOL;
    }
    ck_obj_t *o = NULL;
    fluxon_get_handle *hd = NULL;
    if (rc == FLUXON_OK) {
        size_t t = ack.transferable;
        o = fx_calloc(1, sizeof *o);
        hd = fx_malloc(sizeof *hd);
        if (o) {
            o->holder_ids = fx_malloc((t ? t : 1) * sizeof(uint64_t));
            o->offsets = fx_malloc((t ? t : 1) * sizeof(uint64_t));
            o->lens = fx_malloc((t ? t : 1) * sizeof(uint64_t));
        }
        if (!o || !hd || !o->holder_ids || !o->offsets || !o->lens) {
            rc = FLUXON_ERR_NOMEM;
        } else {
            memcpy(o->holder_ids, ack.holder_ids.v, t * sizeof(uint64_t));
            memcpy(o->offsets, ack.offsets.v, t * sizeof(uint64_t));
            memcpy(o->lens, ack.value_lens.v, t * sizeof(uint64_t));
            o->kind = CK_HANDLE;
            o->owner_id = ack.handle_id;
            /* the owner's TTL started before the reply left it: keep a safety margin */
            o->expires_ms = fx_now_ms() + cl->handle_ttl_ms - FX_MIN(cl->handle_ttl_ms / 2, 200u);
            o->generation = cl->owner_generation;
            o->n = t;
            o->group_lens = groups;
            o->n_groups = ng;
            groups = NULL;
            hd->magic = CK_HANDLE_MAGIC;
            o->blob = hd;
            rc = ck_register(cl, o);
        }
        if (rc != FLUXON_OK) {
            ck_consume(cl, ack.handle_id, 0);
            if (o) o->blob = NULL;
            ck_obj_free(o);
            fx_free(hd);
        } else {
            *handle_p = hd;
            *result = (fluxon_get_start_result){ack.raw_prefix, ack.transferable, ack.prefix_groups,
                                                ack.first_miss_index, ack.first_miss_group, ack.all_hit,
                                                ack.miss_status};
        }
    }
    fx_free(groups);
    fx_arena_free(&a);
    fx_free(resp);
    return rc;
}

static bool ck_on_boundary(const ck_obj_t *o, uint64_t k)
{
    if (!o->n_groups) return true;
    uint64_t s = 0;
    for (size_t g = 0; g < o->n_groups && s < k; g++) s += o->group_lens[g];
    return s == k;
}

int fluxon_get_transfer(fluxon_client *cl, fluxon_get_handle *h, uint64_t consume, fluxon_plan **plan_p)
{
    if (!cl || !h || !plan_p) return FLUXON_ERR_INVALID_ARGUMENT;
    ck_obj_t *o = ck_take(cl, h, CK_HANDLE, false);
    if (!o) return FLUXON_ERR_WRONG_HANDLE;
    if (fx_now_ms() >= o->expires_ms) { /* expired at the owner: its pins are gone */
        o = ck_take(cl, h, CK_HANDLE, true);
        ck_obj_free(o);
        return FLUXON_ERR_WRONG_HANDLE;
    }
    if (consume == 0) consume = o->n;
    else if (consume > o->n || !ck_on_boundary(o, consume)) return FLUXON_ERR_INVALID_ARGUMENT; /* handle stays */
    if (ck_ready(cl) != FLUXON_OK) {
        o = ck_take(cl, h, CK_HANDLE, true);
        ck_obj_free(o);
        return FLUXON_ERR_STALE;
    }
    ck_obj_t *rp = fx_calloc(1, sizeof *rp);
    fluxon_plan *plan = fx_calloc(1, sizeof *plan + (consume ? consume : 1) * sizeof(uint64_t));
    uint64_t *ids = fx_malloc((consume ? consume : 1) * sizeof *ids);
    if (!rp || !plan || !ids) {
        fx_free(rp);
        fx_free(plan);
        fx_free(ids);
        return FLUXON_ERR_NOMEM;
    }
    o = ck_take(cl, h, CK_HANDLE, true);
    if (!o) { /* consumed by another thread meanwhile */
        fx_free(rp);
        fx_free(plan);
        fx_free(ids);
        return FLUXON_ERR_WRONG_HANDLE;
    }
    plan->magic = FLUXON_READ_PLAN_MAGIC;
    plan->count = consume;
    for (uint64_t i = 0; i < consume; i++) plan->value_ptrs[i] = (uint64_t)(uintptr_t)(ck_base(cl) + o->offsets[i]);
    memcpy(ids, o->holder_ids, consume * sizeof *ids);
    rp->kind = CK_READ_PLAN;
    rp->generation = o->generation;
    rp->n = consume;
    rp->holder_ids = ids;
    rp->blob = plan;
    ck_consume(cl, o->owner_id, consume); /* keep [0, consume), release the tail: no round trip */
    ck_obj_free(o);
    if (ck_register(cl, rp) != FLUXON_OK) {
        ck_release_ids(cl, ids, consume);
        ck_obj_free(rp);
        return FLUXON_ERR_NOMEM;
    }
    *plan_p = plan;
    return FLUXON_OK;
}

int fluxon_cancel_get_transfer(fluxon_client *cl, fluxon_get_handle *h)
{
    if (!cl || !h) return FLUXON_ERR_INVALID_ARGUMENT;
    ck_obj_t *o = ck_take(cl, h, CK_HANDLE, true);
    if (!o) return FLUXON_ERR_WRONG_HANDLE;
    if (ck_ready(cl) == FLUXON_OK) ck_consume(cl, o->owner_id, 0);
    ck_obj_free(o);
    return FLUXON_OK;
}

int fluxon_release_views(fluxon_client *cl, fluxon_plan *plan)
{
    if (!cl || !plan) return FLUXON_ERR_INVALID_ARGUMENT;
    ck_obj_t *o = ck_take(cl, plan, CK_READ_PLAN, true);
    if (!o) return FLUXON_ERR_WRONG_HANDLE;
    if (ck_ready(cl) == FLUXON_OK) ck_release_ids(cl, o->holder_ids, o->n);
    ck_obj_free(o);
    return FLUXON_OK;
}

/* ---- plain KV on top ---- */
/* A whole small put in ONE request (PUT_INLINE): the owner stages, places, publishes and
 * answers once published; saves the put_start/commit round trips and the PUBLISHED
 * hand-off of the plan path. Options with atomic groups or a replica mask take the plan
 * path (same validation as the hostless calls). */
#define CK_PUT_INLINE_MAX (256u * 1024u)

static int ck_put_inline(fluxon_client *cl, const char *key, const void *value, uint64_t value_len,
                         const fluxon_put_options *opts)
{
    uint64_t flags = FX_PUT_PLACE, lease = 0;
    const char *preferred = NULL;
    int rc = ck_put_scalars(opts, &flags, &lease, &preferred);
    if (rc != FLUXON_OK) return rc;
    fx_body_put_inline_t b = {fx_str_c(key), {(const char *)value, (uint32_t)value_len}, flags, lease,
                              fx_str_c(preferred)};
    uint8_t *req;
    uint32_t len;
    CK_ENCODE(put_inline, &b, req, len);
    if (!req) return FLUXON_ERR_NOMEM;
    uint8_t *resp = NULL;
    uint32_t rlen = 0;
    rc = ck_call(cl, FX_MSG_PUT_INLINE, req, len, NULL, NULL, &resp, &rlen, false);
    ck_log_error("put", rc, resp, rlen);
    fx_free(resp);
    return rc;
}

int fluxon_put(fluxon_client *cl, const char *key, const void *value, uint64_t value_len,
               const fluxon_put_options *opts)
{
    if (!cl || !ck_key_ok(key) || !value || value_len == 0) {
        if (cl) FX_WARN("put: %s", !ck_key_ok(key) ? "the key must be 1..1024 bytes" : !value ? "value is NULL"
                                                                                           : "value_len is 0");
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    if (value_len <= CK_PUT_INLINE_MAX &&
        !(opts && (opts->field_mask & (FLUXON_PUT_OPT_ATOMIC_GROUPS | FLUXON_PUT_OPT_REPLICA_MASK)))) {
        int rc = ck_ready(cl);
        return rc != FLUXON_OK ? rc : ck_put_inline(cl, key, value, value_len, opts);
    }
    fluxon_plan *plan = NULL;
    int st = FLUXON_OK;
    int rc = ck_put_start(cl, &key, 1, value_len, opts, FX_PUT_PLACE, &plan, &st);
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
    fluxon_future_free(f);
    return rc;
}

int fluxon_get(fluxon_client *cl, const char *key, fluxon_holder **holder_p)
{
    if (!cl || !ck_key_ok(key) || !holder_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fluxon_get_handle *h = NULL;
    fluxon_get_start_result r;
    int rc = fluxon_get_start(cl, &key, 1, 1, NULL, 0, &h, &r);
    if (rc != FLUXON_OK) return rc;
    if (r.transferable_len == 0) {
        fluxon_cancel_get_transfer(cl, h);
        return r.miss_status < 0 ? r.miss_status : FLUXON_ERR_NOT_FOUND;
    }
    ck_obj_t *o = ck_take(cl, h, CK_HANDLE, true);
    fluxon_holder *hd = fx_calloc(1, sizeof *hd);
    if (!o || !hd) {
        fx_free(hd);
        if (o) {
            ck_consume(cl, o->owner_id, 0);
            ck_obj_free(o);
        }
        return FLUXON_ERR_NOMEM;
    }
    hd->cl = cl;
    hd->holder_id = o->holder_ids[0];
    hd->data = ck_base(cl) + o->offsets[0];
    hd->len = o->lens[0];
    ck_consume(cl, o->owner_id, 1);
    ck_obj_free(o);
    *holder_p = hd;
    return FLUXON_OK;
}

const void *fluxon_holder_data(const fluxon_holder *h) { return h ? h->data : NULL; }
uint64_t fluxon_holder_len(const fluxon_holder *h) { return h ? h->len : 0; }

void fluxon_holder_release(fluxon_holder *h)
{
    if (!h) return;
    if (ck_ready(h->cl) == FLUXON_OK) ck_release_ids(h->cl, &h->holder_id, 1);
    fx_free(h);
}

static int ck_simple(fluxon_client *cl, uint16_t type, uint8_t *req, uint32_t len, uint8_t **resp, uint32_t *rlen)
{
    if (!req) return FLUXON_ERR_NOMEM;
    int rc = ck_call(cl, type, req, len, NULL, NULL, resp, rlen, false);
    ck_log_error(fx_msg_name(type), rc, *resp, *rlen);
    return rc;
}

int fluxon_delete(fluxon_client *cl, const char *key)
{
    int rc = ck_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!ck_key_ok(key)) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_body_key_t b = {fx_str_c(key)};
    uint8_t *req, *resp = NULL;
    uint32_t len, rlen = 0;
    CK_ENCODE(key, &b, req, len);
    rc = ck_simple(cl, FX_MSG_DELETE, req, len, &resp, &rlen);
    fx_free(resp);
    return rc;
}

int fluxon_batch_exists(fluxon_client *cl, const char *const *keys, size_t n, size_t *leading_hits_p)
{
    int rc = ck_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!leading_hits_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_str_t *kv;
    if ((rc = ck_keys(keys, n, &kv)) != FLUXON_OK) return rc;
    fx_body_keys_t b = {{kv, (uint32_t)n}};
    uint8_t *req, *resp = NULL;
    uint32_t len, rlen = 0;
    CK_ENCODE(keys, &b, req, len);
    fx_free(kv);
    rc = ck_simple(cl, FX_MSG_EXISTS, req, len, &resp, &rlen);
    if (rc == FLUXON_OK) {
        fx_body_count_t c;
        fx_arena_t a = {0};
        rc = fx_body_count_decode(resp, rlen, &c, &a);
        if (rc == FLUXON_OK) *leading_hits_p = c.count;
    }
    fx_free(resp);
    return rc;
}

int fluxon_lease_grant(fluxon_client *cl, uint64_t ttl_ms, uint64_t *lease_id_p)
{
    int rc = ck_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!lease_id_p || ttl_ms == 0 || ttl_ms > 86400000u) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_body_lease_t b = {ttl_ms};
    uint8_t *req, *resp = NULL;
    uint32_t len, rlen = 0;
    CK_ENCODE(lease, &b, req, len);
    rc = ck_simple(cl, FX_MSG_LEASE_GRANT, req, len, &resp, &rlen);
    if (rc == FLUXON_OK) {
        fx_body_lease_ack_t a;
        fx_arena_t ar = {0};
        rc = fx_body_lease_ack_decode(resp, rlen, &a, &ar);
        if (rc == FLUXON_OK) *lease_id_p = a.lease_id;
    }
    fx_free(resp);
    return rc;
}

int fluxon_list_keys(fluxon_client *cl, const char *prefix, const char *after, uint32_t limit,
                     void (*cb)(void *arg, const char *key), void *arg, size_t *n_p)
{
    int rc = ck_ready(cl);
    if (rc != FLUXON_OK) return rc;
    if (!cb || !n_p || limit == 0 || limit > 10000 || (prefix && strlen(prefix) > FLUXON_MAX_KEY_BYTES) ||
        (after && strlen(after) > FLUXON_MAX_KEY_BYTES))
        return FLUXON_ERR_INVALID_ARGUMENT;
    fx_body_list_t b = {fx_str_c(prefix ? prefix : ""), fx_str_c(after ? after : ""), limit};
    uint8_t *req, *resp = NULL;
    uint32_t len, rlen = 0;
    CK_ENCODE(list, &b, req, len);
    rc = ck_simple(cl, FX_MSG_LIST, req, len, &resp, &rlen);
    if (rc == FLUXON_OK) {
        fx_body_keys_t k;
        fx_arena_t a = {0};
        rc = fx_body_keys_decode(resp, rlen, &k, &a);
        char key[FLUXON_MAX_KEY_BYTES + 1];
        for (uint32_t i = 0; rc == FLUXON_OK && i < k.keys.n; i++) {
            fx_str_copy(k.keys.v[i], key, sizeof key);
            cb(arg, key);
        }
        if (rc == FLUXON_OK) *n_p = k.keys.n;
        fx_arena_free(&a);
    }
    fx_free(resp);
    return rc;
}

int fluxon_wait_local_segments_ready(fluxon_client *cl, uint32_t timeout_ms, fluxon_segment_info *out, size_t cap,
                                     size_t *n_p)
{
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

/* ---- reactor side ---- */
FX_INTERNAL bool fx_client_kv_notification(fluxon_client *cl, const fx_frame_header_t *h, const uint8_t *body,
                                           fx_arena_t *arena)
{
    if (h->type != FX_MSG_PUBLISHED) return false;
    fx_body_published_t b;
    fx_body_published_decode(body, h->body_len, &b, arena);
    fluxon_future *f = NULL;
    if (fx_hmap_del(ck(cl)->futures, &b.future_id, sizeof b.future_id, (void **)&f) == FLUXON_OK) {
        ck_future_complete(f, b.status);
        ck_future_unref(f);
    }
    return true;
}

FX_INTERNAL void fx_client_kv_owner_lost(fluxon_client *cl)
{
    ck_fail_pending(cl);
    ck_state_t *s = ck(cl);
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(s->futures, &it, &k, &kl, &v)) {
        fx_hmap_del(s->futures, k, kl, NULL);
        ck_future_complete(v, FLUXON_ERR_UNAVAILABLE);
        ck_future_unref(v);
    }
}

FX_INTERNAL void fx_client_kv_on_response(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body,
                                          fx_arena_t *arena)
{
    ck_on_response(c, h, body, arena);
}

FX_INTERNAL int fx_client_kv_init(fluxon_client *cl)
{
    ck_state_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    pthread_mutex_init(&s->lock, NULL);
    if (fx_hmap_create(64, &s->objs) != FLUXON_OK || fx_hmap_create(64, &s->futures) != FLUXON_OK) {
        fx_hmap_destroy(s->objs);
        fx_free(s);
        return FLUXON_ERR_NOMEM;
    }
    cl->kv = s;
    return FLUXON_OK;
}

FX_INTERNAL void fx_client_kv_fini(fluxon_client *cl)
{
    ck_state_t *s = ck(cl);
    if (!s) return;
    fx_client_kv_owner_lost(cl); /* futures still registered complete as UNAVAILABLE */
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(s->objs, &it, &k, &kl, &v)) {
        fx_hmap_del(s->objs, k, kl, NULL);
        ck_obj_free(v);
    }
    fx_hmap_destroy(s->objs);
    fx_hmap_destroy(s->futures);
    pthread_mutex_destroy(&s->lock);
    fx_free(s);
    cl->kv = NULL;
}

#undef CK_HANDLE_MAGIC
#undef CK_ENCODE
