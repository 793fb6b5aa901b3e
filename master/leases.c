/* leases.c — LEASE_GRANT and the lease timer: a lease is granted with a TTL; while leases
 * exist a timer (~20 ms) collects the expired ones and deletes every route still bound to
 * them (with INVALIDATEs). Routes meeting an expired lease on the way are deleted earlier
 * by routes.c. The table itself is lease_table.c. */
#include "log.h"
#include "mkv.h"

static void lse_on_timer(fx_reactor_t *r, fx_timer_t *t)
{
    mkv_t *s = FX_CONTAINER_OF(t, mkv_t, lease_timer);
    uint64_t bound = 0;
    size_t expired = fx_lease_expire(s->leases, fx_now_ms(), &bound);
    s->c.leases_expired += expired;
    if (bound) { /* delete every route bound to a lease that is gone */
        fx_mkv_inv_t inv = {0};
        size_t dropped = mkv_routes_drop_unleased(s, &inv);
        s->c.lease_routes_expired += dropped;
        FX_INFO("%zu lease(s) expired: %zu routes deleted", expired, dropped);
        mkv_inv_flush(s, &inv);
    }
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
