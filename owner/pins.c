/* pins.c — pins with a TTL and the per-tenant bytes of this owner (issue 42; see
 * owner_pins.h). A pin takes its value's whole atomic group off the hot tier's policy
 * (fx_oev_pin_out: never a victim, never demoted) and into a min-heap of deadlines; one
 * timer, armed at the earliest deadline, puts expired groups back (fx_oev_pin_in), so
 * eviction stays O(1) per value and nothing walks the hot tier. A pin is granted only
 * while its tenant's pinned slot bytes stay within its budget (tenants.NAME.pinned_bytes_max,
 * at most pin_budget_ratio x the hot tier, which also bounds every tenant together; x the
 * room the master's placed values leave this owner's grants when less): past it the value
 * stays unpinned and the key says FLUXON_PIN_REFUSED. Pins are this owner's
 * state: a master restart (re-publication) leaves them as they are. Reactor thread only.
 * Static helpers are opin_*. */
#include <stdio.h>

#include "groups.h"
#include "log.h"
#include "owner_claims.h"
#include "owner_evict.h"
#include "owner_pins.h"
#include "owner_replica.h"
#include "owner_republish.h"
#include "owner_tenant.h"

typedef struct opin {
    fx_owner_t *o;
    owner_entry_t **heap; /* min-heap by pin_until_ms; entry i's pin_idx is i */
    uint32_t n, cap;
    fx_timer_t timer;
    uint64_t timer_at_ms;                 /* when the armed timer fires */
    uint64_t pinned_bytes;                /* slot bytes pinned, all tenants */
    uint64_t applied, refused, expired, unpinned, refreshed, written_back;
    uint64_t requests; /* every request to pin or unpin: fluxon_pin calls and pinned puts */
    uint64_t puts;     /* of which puts carrying pin_ttl_ms, once each when published */
    uint64_t refuse_log_ms;
} opin_t;

/* ---- the deadline heap ---- */
static void opin_set(opin_t *s, uint32_t i, owner_entry_t *en)
{
    s->heap[i] = en;
    en->pin_idx = i;
}

static void opin_up(opin_t *s, uint32_t i)
{
    owner_entry_t *en = s->heap[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (s->heap[p]->pin_until_ms <= en->pin_until_ms) break;
        opin_set(s, i, s->heap[p]);
        i = p;
    }
    opin_set(s, i, en);
}

static void opin_down(opin_t *s, uint32_t i)
{
    owner_entry_t *en = s->heap[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= s->n) break;
        if (c + 1 < s->n && s->heap[c + 1]->pin_until_ms < s->heap[c]->pin_until_ms) c++;
        if (s->heap[c]->pin_until_ms >= en->pin_until_ms) break;
        opin_set(s, i, s->heap[c]);
        i = c;
    }
    opin_set(s, i, en);
}

static bool opin_push(opin_t *s, owner_entry_t *en)
{
    if (s->n == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 64;
        owner_entry_t **nh = fx_realloc(s->heap, (size_t)nc * sizeof *nh);
        if (!nh) return false;
        s->heap = nh;
        s->cap = nc;
    }
    opin_set(s, s->n++, en);
    opin_up(s, s->n - 1);
    return true;
}

static void opin_remove(opin_t *s, owner_entry_t *en)
{
    uint32_t i = en->pin_idx;
    FX_ASSERT(i < s->n && s->heap[i] == en);
    owner_entry_t *last = s->heap[--s->n];
    if (i == s->n) return;
    opin_set(s, i, last);
    opin_up(s, i);
    opin_down(s, last->pin_idx);
}

/* ---- pins ---- */
static void opin_on_timer(fx_reactor_t *r, fx_timer_t *t);

static void opin_arm(fx_owner_t *o)
{
    opin_t *s = o->pin;
    if (!s->n) return; /* an armed timer finds nothing and stops */
    uint64_t at = s->heap[0]->pin_until_ms;
    if (fx_timer_armed(&s->timer)) {
        if (s->timer_at_ms <= at) return;
        fx_timer_disarm(o->r, &s->timer);
    }
    uint64_t now = fx_now_ms();
    s->timer_at_ms = FX_MAX(at, now);
    fx_timer_arm(o->r, &s->timer, s->timer_at_ms - now, opin_on_timer);
}

/* The room the master's placed values leave this owner's grants: the whole grants that fit
 * in the segment (less its header page) beside them, at most the grants it may hold. */
static uint64_t opin_room(fx_owner_t *o)
{
    uint64_t g = o->cfg.grant_bytes, len = fx_segment_len(o->seg), placed = fx_orepub_placed_bytes(o);
    uint64_t room = len > 4096 + placed ? (len - 4096 - placed) / g * g : 0;
    return FX_MIN(room, fx_oclaims_max(o) * g);
}

FX_INTERNAL uint64_t fx_opin_budget(fx_owner_t *o)
{
    uint64_t base = FX_MIN(fx_oev_hot_capacity(o), opin_room(o));
    return (uint64_t)(o->cfg.pin_budget_ratio * (double)base);
}

/* Tenant k's pin budget: its pinned_bytes_max (the tenant table lists cfg.tenants first,
 * in order), at most the owner's. */
static uint64_t opin_budget(fx_owner_t *o, int k)
{
    const fx_tenant_cfg_t *c = k >= 0 && (uint32_t)k < o->cfg.n_tenants ? &o->cfg.tenants[k] : NULL;
    uint64_t cap = fx_opin_budget(o);
    return c && c->has_pinned_max ? FX_MIN(c->pinned_bytes_max, cap) : cap;
}

/* ", of the N bytes ... leave" when the master's placed values make the budget smaller */
static const char *opin_room_note(fx_owner_t *o)
{
    static __thread char note[200]; /* the reactor thread's */
    uint64_t room = opin_room(o);
    note[0] = 0;
    if (room < fx_oev_hot_capacity(o))
        snprintf(note, sizeof note, ", here of the %llu bytes that the %llu bytes the master placed in this segment "
                 "for other owners' puts leave its grants", (unsigned long long)room,
                 (unsigned long long)fx_orepub_placed_bytes(o));
    return note;
}

static fx_tenant_snap_t *opin_tenant(fx_owner_t *o, const owner_entry_t *en)
{
    return en->tenant ? fx_otenant_at(o, en->tenant - 1) : NULL;
}

/* en's pin ends: out of the heap, its bytes uncounted; back into the policy when readmit. */
static void opin_unpin(fx_owner_t *o, owner_entry_t *en, bool readmit)
{
    opin_t *s = o->pin;
    opin_remove(s, en);
    en->pin_until_ms = 0;
    en->pin_ttl_ms = 0;
    s->pinned_bytes -= FX_MIN(s->pinned_bytes, en->slot.slot_size);
    fx_tenant_snap_t *t = opin_tenant(o, en);
    if (t) t->pinned_bytes -= FX_MIN(t->pinned_bytes, en->slot.slot_size);
    fx_oev_pin_in(o, en, readmit);
}

static void opin_on_timer(fx_reactor_t *r, fx_timer_t *t)
{
    fx_owner_t *o = FX_CONTAINER_OF(t, opin_t, timer)->o;
    (void)r;
    opin_t *s = o->pin;
    uint64_t now = fx_now_ms();
    while (s->n && s->heap[0]->pin_until_ms <= now) { /* a group's members share the deadline */
        opin_unpin(o, s->heap[0], true);
        s->expired++;
    }
    opin_arm(o);
}

static owner_entry_t *const *opin_members(owner_entry_t *const *one, const owner_entry_t *en, size_t *n_p)
{
    return fx_oev_group_members(one, en, n_p);
}

/* Pins en's whole group until now + ttl_ms (ttl_ms 0: unpins it). FLUXON_OK, or
 * FLUXON_PIN_REFUSED (nothing changed) when the bytes it would add to its tenant's pins
 * pass the tenant's budget or the owner's, or FLUXON_ERR_NOMEM. */
static int opin_group(fx_owner_t *o, owner_entry_t *en, uint32_t ttl_ms, bool refresh)
{
    opin_t *s = o->pin;
    owner_entry_t *one[1] = {en};
    size_t mn;
    owner_entry_t *const *m = opin_members(one, en, &mn);
    if (!ttl_ms) {
        for (size_t i = 0; i < mn; i++)
            if (m[i] && m[i]->pin_until_ms) {
                opin_unpin(o, m[i], true);
                s->unpinned++;
            }
        return FLUXON_OK;
    }
    uint64_t need = 0; /* bytes that would leave the policy */
    for (size_t i = 0; i < mn; i++)
        if (m[i] && !m[i]->pin_until_ms && !m[i]->retired && !m[i]->evicting) need += m[i]->slot.slot_size;
    fx_tenant_snap_t *t = opin_tenant(o, en);
    uint64_t budget = en->tenant ? opin_budget(o, en->tenant - 1) : 0, cap = fx_opin_budget(o);
    if (need && (!t || t->pinned_bytes + need > budget || s->pinned_bytes + need > cap)) {
        s->refused++;
        if (t) t->pins_refused++;
        uint64_t now = fx_now_ms();
        if (!s->refuse_log_ms || now - s->refuse_log_ms >= 1000) { /* one line a second */
            s->refuse_log_ms = now;
            bool own = t && t->pinned_bytes + need > budget; /* the tenant's budget, or all tenants' */
            FX_WARN("pin refused (stored unpinned): %llu bytes more would pass %s%s%s (%llu of %llu bytes pinned; "
                    "%s%s%s%s)", (unsigned long long)need, own ? "tenant \"" : "the owner's pin budget",
                    own ? t->name : "", own ? "\"'s pin budget" : "",
                    (unsigned long long)(own ? t->pinned_bytes : s->pinned_bytes),
                    (unsigned long long)(own ? budget : cap),
                    own ? "tenants." : "pin_budget_ratio of the hot tier", own ? t->name : "",
                    own ? ".pinned_bytes_max, at most pin_budget_ratio of the hot tier" : "", opin_room_note(o));
        }
        return FLUXON_PIN_REFUSED;
    }
    uint64_t until = fx_now_ms() + ttl_ms;
    for (size_t i = 0; i < mn; i++) {
        owner_entry_t *e = m[i];
        if (!e || e->retired || e->evicting) continue;
        if (e->pin_until_ms) { /* pinned already: the newer pin's deadline */
            e->pin_until_ms = until;
            e->pin_ttl_ms = refresh ? ttl_ms : 0;
            opin_up(s, e->pin_idx);
            opin_down(s, e->pin_idx);
            continue;
        }
        if (!fx_oev_pin_out(o, e)) continue; /* not in the policy (not committed yet): nothing to keep */
        e->pin_until_ms = until;
        e->pin_ttl_ms = refresh ? ttl_ms : 0;
        if (!opin_push(s, e)) {
            e->pin_until_ms = 0;
            e->pin_ttl_ms = 0;
            fx_oev_pin_in(o, e, true);
            return FLUXON_ERR_NOMEM; /* members pinned before it stay pinned until their deadline */
        }
        s->pinned_bytes += e->slot.slot_size;
        fx_tenant_snap_t *et = opin_tenant(o, e);
        if (et) et->pinned_bytes += e->slot.slot_size;
    }
    s->applied++;
    opin_arm(o);
    /* issue 42: a pinned value is never evicted, so eviction never writes it back: with
     * write-back on, its group is copied to a replica target now (members copied already or
     * in flight are left out; a newer version pinned again gets its own copy) */
    if (o->cfg.writeback_watermark > 0 && fx_orepl_enqueue(o, m, mn, false)) s->written_back++;
    return FLUXON_OK;
}

/* ---- the hot tier's news (evict.c's pin hooks) ---- */
static void opin_forgotten(fx_owner_t *o, owner_entry_t *en)
{
    if (en->pin_until_ms) opin_unpin(o, en, false);
    fx_tenant_snap_t *t = opin_tenant(o, en);
    if (t) t->bytes -= FX_MIN(t->bytes, en->slot.slot_size);
    en->tenant = 0;
}

/* A hit of a pinned value put with pin_refresh_on_hit: its group's pin restarts. */
static void opin_touched(fx_owner_t *o, owner_entry_t *en)
{
    opin_t *s = o->pin;
    if (!en->pin_ttl_ms) return;
    uint64_t until = fx_now_ms() + en->pin_ttl_ms;
    owner_entry_t *one[1] = {en};
    size_t mn;
    owner_entry_t *const *m = opin_members(one, en, &mn);
    for (size_t i = 0; i < mn; i++)
        if (m[i] && m[i]->pin_until_ms && m[i]->pin_until_ms < until) {
            m[i]->pin_until_ms = until;
            opin_down(s, m[i]->pin_idx); /* later: towards the leaves */
        }
    s->refreshed++;
}

/* ---- lifecycle ---- */
FX_INTERNAL int fx_opin_init(fx_owner_t *o)
{
    opin_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    s->o = o;
    fx_timer_init(&s->timer);
    o->pin = s; /* the tenant table comes later (ext.c's init): budgets are read from the config */
    fx_oev_set_pin_hooks(o, &(fx_oev_pin_hooks_t){NULL, opin_forgotten, opin_touched}); /* the tenant's bytes:
                                                                                         * evict_quota.c */
    return FLUXON_OK;
}

FX_INTERNAL void fx_opin_fini(fx_owner_t *o)
{
    opin_t *s = o->pin;
    if (!s) return;
    if (o->ev) fx_oev_set_pin_hooks(o, &(fx_oev_pin_hooks_t){NULL, NULL, NULL});
    fx_timer_disarm(o->r, &s->timer);
    for (uint32_t i = 0; i < s->n; i++) { /* the entries stay (the store frees them): unmarked */
        s->heap[i]->pin_until_ms = 0;
        s->heap[i]->pin_ttl_ms = 0;
    }
    fx_free(s->heap);
    fx_free(s);
    o->pin = NULL;
}

/* ---- requests ---- */
FX_INTERNAL size_t fx_opin_plan(fx_owner_t *o, const fx_slot_ref_t *slots, size_t n, uint32_t ttl_ms, bool refresh,
                                uint64_t *kst)
{
    size_t refused = 0;
    o->pin->requests++; /* a put's pin is a pin request too (pin_requests, docs/metrics.md) */
    o->pin->puts++;
    for (size_t i = 0; i < n; i++) {
        if ((int)(int64_t)kst[i] != FLUXON_OK) continue;
        owner_entry_t *en = fx_ostore_find(o, &slots[i]); /* by identity: gone when placed elsewhere */
        int st = en && en->state == OE_COMMITTED && !en->retired ? opin_group(o, en, ttl_ms, refresh)
                                                                 : FLUXON_PIN_REFUSED;
        if (st == FLUXON_OK) continue;
        if (!en || en->state != OE_COMMITTED) o->pin->refused++;
        kst[i] = (uint64_t)(int64_t)FLUXON_PIN_REFUSED; /* stored, not pinned */
        refused++;
    }
    return refused;
}

FX_INTERNAL void fx_opin_request(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena)
{
    opin_t *s = o->pin;
    fx_body_pin_t b;
    if (fx_body_pin_decode(body, h->body_len, &b, arena) != FLUXON_OK) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_PROTOCOL, "pin: malformed request");
        return;
    }
    const char *bad = !b.keys.n                           ? "n_keys is 0"
                      : b.ttl_ms > FLUXON_PIN_TTL_MAX_MS  ? "ttl_ms is over FLUXON_PIN_TTL_MAX_MS (86400000)"
                      : b.flags & ~FLUXON_PIN_REFRESH_ON_HIT ? "flags has bits other than FLUXON_PIN_REFRESH_ON_HIT"
                                                          : NULL;
    for (uint32_t i = 0; !bad && i < b.keys.n; i++)
        if (!fx_ostore_key_ok(b.keys.v[i])) bad = "a key is empty, too long or contains NUL";
    if (bad) { /* nothing looked up, nothing changed, no counter moves */
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "pin: %s (ttl_ms %u, %u keys)", bad, b.ttl_ms,
                            b.keys.n);
        return;
    }
    uint64_t *st = fx_arena_alloc(arena, b.keys.n * sizeof *st);
    if (!st) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_NOMEM, "pin: owner out of memory for %u keys", b.keys.n);
        return;
    }
    s->requests++;
    for (uint32_t i = 0; i < b.keys.n; i++) {
        owner_entry_t *en = fx_ostore_lookup(o, b.keys.v[i].p, b.keys.v[i].len);
        int ks = !en                          ? FLUXON_ERR_NOT_FOUND
                 : en->state != OE_COMMITTED  ? FLUXON_ERR_KEY_BEING_WRITTEN
                                              : opin_group(o, en, b.ttl_ms, b.flags & FLUXON_PIN_REFRESH_ON_HIT);
        st[i] = (uint64_t)(int64_t)ks;
    }
    fx_body_statuses_t out = {{st, b.keys.n}};
    FX_CONN_REPLY(e->conn, h, statuses, &out);
}

FX_INTERNAL const char *fx_opin_note(fx_owner_t *o, int status)
{
    static __thread char note[768]; /* the reactor thread's */
    opin_t *s = o->pin;
    note[0] = 0;
    if (status != FLUXON_ERR_NO_SPACE || !s) return note;
    if (s->pinned_bytes)
        snprintf(note, sizeof note, "; %llu bytes of the hot tier are pinned (%u values; the owner's pin budget is %llu "
             "bytes, pin_budget_ratio %.2f%s; tenants.NAME.pinned_bytes_max)",
             (unsigned long long)s->pinned_bytes, s->n, (unsigned long long)fx_opin_budget(o), o->cfg.pin_budget_ratio,
             opin_room_note(o));
    fx_oevq_note(o, note, sizeof note); /* issue 42 quotas: what guarantees keep */
    return note;
}

FX_INTERNAL void fx_opin_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    opin_t *s = o->pin;
    if (!s) return;
    m->pinned_bytes = s->pinned_bytes;
    m->pinned_values = s->n;
    m->pin_budget_bytes = fx_opin_budget(o);
    m->pins_applied = s->applied;
    m->pins_refused = s->refused;
    m->pins_expired = s->expired;
    m->pins_unpinned = s->unpinned;
    m->pins_refreshed = s->refreshed;
    m->pin_requests = s->requests;
    m->pin_puts = s->puts;
    m->pins_written_back = s->written_back;
    for (uint32_t k = 0; o->tenant && k < fx_otenant_count(o); k++) /* a few tenants, no values walked */
        fx_otenant_at(o, (int)k)->pin_budget = opin_budget(o, (int)k);
}
