/* leases.c — LEASE_GRANT and the lease timer: a lease is granted with a TTL; while leases
 * exist a timer (~20 ms) collects the expired ones and deletes every route still bound to
 * them (with INVALIDATEs), found through each lease's own keys (issue 44 P5). Routes meeting an expired lease on the way are deleted earlier
 * by routes.c. The table itself is lease_table.c. */
#include "log.h"
#include "mkv.h"

typedef struct lse_sweep {
    mkv_t *s;
    fx_mkv_inv_t inv;
    size_t dropped;
    bool walk; /* a lease lost some of its keys: walk the route table once */
} lse_sweep_t;

static void lse_expired(void *arg, uint64_t id, const uint8_t *keys, size_t n_keys, bool complete)
{
    lse_sweep_t *w = arg;
    w->dropped += mkv_routes_drop_lease(w->s, id, keys, n_keys, &w->inv);
    w->walk |= !complete;
}

static void lse_on_timer(fx_reactor_t *r, fx_timer_t *t)
{
    mkv_t *s = FX_CONTAINER_OF(t, mkv_t, lease_timer);
    lse_sweep_t w = {.s = s};
    size_t expired = fx_lease_expire(s->leases, fx_now_ms(), lse_expired, &w);
    s->c.leases_expired += expired;
    if (w.walk) w.dropped += mkv_routes_drop_unleased(s, &w.inv); /* keys lost to a failed allocation */
    if (w.dropped || w.walk) { /* delete every route bound to a lease that is gone */
        s->c.lease_routes_expired += w.dropped;
        FX_INFO("%zu lease(s) expired: %zu routes deleted", expired, w.dropped);
    }
    mkv_inv_flush(s, &w.inv);
    if (fx_lease_count(s->leases)) fx_timer_arm(r, t, MKV_LEASE_TICK_MS, lse_on_timer);
}

FX_INTERNAL void fx_mkv_lease_grant(mkv_t *s, master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                    fx_arena_t *arena)
{
    fx_body_lease_t b;
    MKV_DECODE(s, p, h, body, arena, lease, &b);
    if (b.ttl_ms < 1 || b.ttl_ms > MKV_LEASE_TTL_MAX) {
        mkv_fail(s, p, h, FLUXON_ERR_INVALID_ARGUMENT, "lease: ttl_ms %llu must be 1..%llu",
                 (unsigned long long)b.ttl_ms, MKV_LEASE_TTL_MAX);
        return;
    }
    fx_body_lease_ack_t ack = {0};
    if (fx_lease_grant(s->leases, fx_now_ms() + b.ttl_ms, &ack.lease_id) != FLUXON_OK) {
        mkv_fail(s, p, h, FLUXON_ERR_NOMEM, "lease: out of memory");
        return;
    }
    s->c.leases_granted++;
    if (!fx_timer_armed(&s->lease_timer)) fx_timer_arm(s->m->r, &s->lease_timer, MKV_LEASE_TICK_MS, lse_on_timer);
    MKV_REPLY(p, h, lease_ack, &ack);
}

FX_INTERNAL void fx_mkv_leases_stop(mkv_t *s) { fx_timer_disarm(s->m->r, &s->lease_timer); }
