/* claims_return.c — grants back to the master (claims.c's state, claims_int.h): a master
 * grant whose sub-grants are all idle for reserve.idle_grant_return_ms goes back
 * (GRANT_RETURN), never below the prewarmed count (S5); a return without a definite answer
 * is sent again with the same identities (the master frees only grants it knows: a repeat
 * is harmless). A grant being returned still counts as this owner's for the overlap check
 * (fx_oclaims_overlap). Owner reactor only. */
#include "log.h"
#include "claims_int.h"
#include "owner_link.h"
#include "owner_store.h"

/* The grant (held or being returned) that [off, off + len) overlaps, or -1 (D1: a range the
 * master hands out never lies in one this owner holds; the master and this owner disagree
 * otherwise, and two writers would share bytes). */
FX_INTERNAL int64_t fx_oclaims_overlap(fx_owner_t *o, uint64_t off, uint64_t len)
{
    oclaims_t *c = o->claims;
    uint64_t gb = o->cfg.grant_bytes;
    for (size_t i = 0; c && i < c->n_grants; i++)
        if (off < c->grant_offsets[i] + gb && c->grant_offsets[i] < off + len) return (int64_t)c->grant_ids[i];
    for (size_t i = 0; c && i < c->n_ret; i++)
        if (off < c->ret_offs[i] + gb && c->ret_offs[i] < off + len) return (int64_t)c->ret_ids[i];
    return -1;
}

/* ---- idle grants go back to the master ---- */
typedef struct ocl_ret_ctx {
    fx_owner_t *o;
    size_t n;
    uint64_t ids[];
} ocl_ret_ctx_t;

static void ocl_on_return_timer(fx_reactor_t *r, fx_timer_t *t)
{
    fx_ocl_return_send(FX_CONTAINER_OF(t, oclaims_t, return_timer)->owner);
}

static void ocl_ret_drop(oclaims_t *c, const uint64_t *ids, size_t n)
{
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < c->n_ret; i++)
            if (c->ret_ids[i] == ids[k]) {
                c->n_ret--;
                c->ret_ids[i] = c->ret_ids[c->n_ret];
                c->ret_offs[i] = c->ret_offs[c->n_ret];
                break;
            }
}

static void ocl_on_return(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    ocl_ret_ctx_t *x = arg;
    fx_owner_t *o = x->o;
    oclaims_t *c = o->claims;
    if (!c || c->closing) {
        fx_free(x);
        return;
    }
    c->return_inflight = false;
    if (status == FLUXON_OK) {
        c->grants_returned += x->n;
        ocl_ret_drop(c, x->ids, x->n);
    } else if (status == FLUXON_ERR_TIMEOUT || status == FLUXON_ERR_UNAVAILABLE || status == FLUXON_ERR_PROTOCOL) {
        FX_WARN("return of %zu idle grants: outcome unknown (%s); sent again", x->n, fluxon_status_string(status));
        if (!fx_timer_armed(&c->return_timer)) fx_timer_arm(o->r, &c->return_timer, 1000, ocl_on_return_timer);
    } else {
        FX_ERROR("the master refused the return of %zu idle grants: %s", x->n, fluxon_status_string(status));
        ocl_ret_drop(c, x->ids, x->n);
    }
    fx_free(x);
    if (c->n_ret && !fx_timer_armed(&c->return_timer)) fx_ocl_return_send(o);
}

FX_INTERNAL void fx_ocl_return_send(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    fx_conn_t *mc = fx_olink_conn(o);
    if (c->closing || c->return_inflight || !c->n_ret || !mc) return;
    size_t n = FX_MIN(c->n_ret, 64u);
    ocl_ret_ctx_t *x = fx_malloc(sizeof *x + n * sizeof x->ids[0]);
    if (!x) return;
    x->o = o;
    x->n = n;
    memcpy(x->ids, c->ret_ids, n * sizeof x->ids[0]);
    fx_body_grant_ack_t b = {{c->ret_ids, (uint32_t)n}, {c->ret_offs, (uint32_t)n}};
    if (FX_RPC_CALL(mc, GRANT_RETURN, grant_ack, &b, o->cfg.master_timeout_ms, ocl_on_return, x) != FLUXON_OK) {
        fx_free(x);
        if (!fx_timer_armed(&c->return_timer)) fx_timer_arm(o->r, &c->return_timer, 1000, ocl_on_return_timer);
        return;
    }
    c->return_inflight = true;
}

/* A grant out of the pool and the claims' list, onto the list of returns to send. */
static bool ocl_ret_push(fx_owner_t *o, size_t i)
{
    oclaims_t *c = o->claims;
    if (c->n_ret == c->cap_ret) {
        size_t nc = c->cap_ret ? c->cap_ret * 2 : 16;
        uint64_t *ni = fx_realloc(c->ret_ids, nc * sizeof *ni);
        if (ni) c->ret_ids = ni;
        uint64_t *no = fx_realloc(c->ret_offs, nc * sizeof *no);
        if (no) c->ret_offs = no;
        if (!ni || !no) return false;
        c->cap_ret = nc;
    }
    for (unsigned at = 0; at < c->chunks; at++) /* its sub-grants (all idle) leave the pool */
        if ((c->grant_starts[i] & (1u << at)) && !fx_ocl_uncarve(o, i, at)) return false;
    FX_INFO("grant %llu at %llu goes back to the master (idle)", (unsigned long long)c->grant_ids[i],
            (unsigned long long)c->grant_offsets[i]);
    c->ret_ids[c->n_ret] = c->grant_ids[i];
    c->ret_offs[c->n_ret++] = c->grant_offsets[i];
    fx_ocl_grant_forget(c, i);
    return true;
}


/* Grants idle for idle_grant_return_ms while no claim waits go back (never below the
 * prewarmed count); a retiring grant no claim needs any more serves its size again. */
static void ocl_on_idle_timer(fx_reactor_t *r, fx_timer_t *t)
{
    fx_owner_t *o = FX_CONTAINER_OF(t, oclaims_t, idle_timer)->owner;
    oclaims_t *c = o->claims;
    fx_slot_pool_t *pool = fx_ostore_pool(o);
    uint64_t now = fx_now_ms(), keep = o->cfg.has_expected ? c->max_grants : 0;
    bool waiting = c->claims != NULL, conn = fx_olink_conn(o) != NULL;
    for (size_t i = c->n_grants; i-- > 0;) {
        bool idle = true; /* every sub-grant idle (or none carved) */
        for (unsigned at = 0; at < c->chunks; at++) {
            fx_slot_grant_stats_t g;
            uint64_t id = fx_ocl_sub_id(c, i, at);
            if (!(c->grant_starts[i] & (1u << at)) || fx_slot_pool_grant_stats(pool, id, &g) != FLUXON_OK) continue;
            idle &= g.free == g.slots;
            if (g.retiring && !waiting) fx_slot_pool_retire_grant(pool, id, false);
        }
        if (!idle) {
            c->grant_idle_ms[i] = 0;
            continue;
        }
        if (!c->grant_idle_ms[i]) c->grant_idle_ms[i] = now;
        if (waiting || !conn || c->n_grants <= keep || now - c->grant_idle_ms[i] < o->cfg.idle_grant_return_ms)
            continue;
        if (!ocl_ret_push(o, i)) break;
    }
    fx_ocl_return_send(o);
    fx_ocl_idle_arm(o);
}

FX_INTERNAL void fx_ocl_idle_arm(fx_owner_t *o)
{
    oclaims_t *c = o->claims;
    if (c->closing || fx_timer_armed(&c->idle_timer) || !c->n_grants) return;
    fx_timer_arm(o->r, &c->idle_timer, FX_MAX(o->cfg.idle_grant_return_ms / 4, 10u), ocl_on_idle_timer);
}

