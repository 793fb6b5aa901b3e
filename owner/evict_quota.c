/* evict_quota.c — quotas and guaranteed shares per tenant on this owner's hot tier (issue 42;
 * docs/tenants.md). Shares owner_evict_int.h with evict.c.
 *
 * A tenant with a quota (tenants.NAME.quota_bytes: the most slot bytes of this owner's hot
 * tier it may hold) or a guarantee (tenants.NAME.guaranteed_bytes: bytes other tenants' puts
 * never evict) is "managed": its COMMITTED unpinned values live in an eviction policy of its
 * own, the other tenants' in the shared one. Its bytes are tenant.c's per-tenant bytes (every
 * committed value, pinned ones too), plus the slot bytes of its put_starts whose plans live
 * (charged at put_start, released when the plan ends), less the bytes of its victims whose
 * EVICT is not settled.
 *
 * - Admission (put_start): a put whose bytes would take its tenant over its quota is admitted
 *   only if the tenant's own evictable values (and its puts in flight, evictable once
 *   published) can make room; else NO_SPACE (its values pinned, or the put alone larger than
 *   the quota), naming the tenant, its bytes, its quota and the field. Then each eviction round first takes, from
 *   each tenant over its quota, its own coldest values (cause "quota").
 * - Pressure (claims waiting, the hot tier over its watermark): victims come from the policy
 *   whose tenant holds the most bytes above its guarantee (the shared policy: all its bytes),
 *   coldest first; a group that would take its tenant under its guarantee is kept, and that
 *   tenant's policy gives nothing more this round (cause "pressure").
 * Victim selection is O(tenants) per round plus O(1) per value; nothing walks the hot tier,
 * except a run-time change that makes a tenant managed: its values move out of the shared
 * policy once (one walk of it, an admin request's cost).
 *
 * Changes at run time: TENANT_SET (fluxon ... tenant set NAME --quota B --guaranteed B),
 * accepted with the owner's tenant_admin_token, or — to lower its own limits only — from a
 * client of that very tenant (which
 * proved the tenant's token at HELLO); applied at once, then sent to the master as a
 * TENANT_PUSH, which sends it on to every other owner (master/tenants.c); a push is applied
 * within this owner's own checks. Reactor thread only. Static helpers are oevq_*. */
#include <stdio.h>

#include "log.h"
#include "owner_evict_int.h"
#include "owner_link.h"

/* ---- state ---- */
static oev_tq_t *oevq_at(oev_t *kv, int k) { return kv->tq && k >= 0 && k < FX_TENANT_SNAP_MAX ? &kv->tq[k] : NULL; }

static uint64_t oevq_tenant_bytes(fx_owner_t *o, uint32_t k)
{
    return o->tenant && k < fx_otenant_count(o) ? fx_otenant_at(o, (int)k)->bytes : 0;
}

/* The bytes k holds for quota and guarantee purposes: committed, plus charged, less chosen. */
static uint64_t oevq_held(fx_owner_t *o, uint32_t k)
{
    const oev_tq_t *t = &o->ev->tq[k];
    uint64_t b = oevq_tenant_bytes(o, k) + t->charged;
    return b - FX_MIN(b, t->selected);
}

/* k's policy gets a ghost of as many keys as its quota (at most the hot tier) holds values,
 * as the shared policy's is sized by the hot tier (evict.c): without one, s3fifo never
 * admits a value evicted from probation straight to main, and a tenant with a quota got
 * fewer hits than the same requests alone in a cache of its quota (fluxon demo --tenants:
 * 1.4 pp on the conversation trace). A new quota gives it a new ghost (the old keys are
 * forgotten). Out of memory: no ghost, logged. */
static void oevq_ghost(fx_owner_t *o, uint32_t k)
{
    oev_t *kv = o->ev;
    oev_tq_t *t = &kv->tq[k];
    if (t->pol.kind != FX_EVICT_S3FIFO) return;
    uint64_t unit = o->cfg.has_expected ? fx_slot_size_for(o->cfg.expected_value_len) : FX_SLOT_PAGE;
    uint64_t bytes = t->quota && t->quota < kv->hot_capacity ? t->quota : kv->hot_capacity;
    uint32_t n = (uint32_t)FX_MIN(bytes / unit, 1u << 22);
    if (t->ghost && n == t->ghost_n) return;
    uint64_t *g = n ? fx_calloc(fx_evp_ghost_words(n), sizeof *g) : NULL;
    if (n && !g) FX_WARN("tenant %u: out of memory for its eviction policy's ghost of %u keys: none", k, n);
    fx_evp_set_ghost(&t->pol, g, g ? n : 0);
    fx_free(t->ghost);
    t->ghost = g;
    t->ghost_n = g ? n : 0;
}

/* k gets its own policy: its values in the shared one move there (coldest first, so its
 * order is kept). */
static void oevq_manage(fx_owner_t *o, uint32_t k)
{
    oev_t *kv = o->ev;
    oev_tq_t *t = &kv->tq[k];
    if (t->managed) return;
    fx_evp_init(&t->pol, kv->hot.kind, t->quota ? t->quota : kv->hot_capacity, NULL, 0); /* sizes s3fifo's small queue */
    oevq_ghost(o, k);
    t->managed = true;
    kv->managed[kv->n_managed++] = (uint8_t)k;
    uint64_t moved = 0;
    for (fx_evp_node_t *n = fx_evp_coldest(&kv->hot); n;) {
        fx_evp_node_t *next = fx_evp_warmer(&kv->hot, n);
        owner_entry_t *en = fx_oev_entry_of(n);
        if (en->tenant == k + 1) {
            fx_oevw_moved(kv, en);
            fx_evp_remove(&kv->hot, &en->lru);
            en->in_tq = true;
            fx_evp_insert(&t->pol, &en->lru, en->slot.slot_size, fx_oev_key_hash(en));
            moved++;
        }
        n = next;
    }
    if (moved) FX_INFO("tenant %u: %llu values moved to its own eviction policy (quota or guarantee set)", k,
                       (unsigned long long)moved);
}

FX_INTERNAL int fx_oevq_init(fx_owner_t *o)
{
    oev_t *kv = o->ev;
    kv->tq = fx_calloc(FX_TENANT_SNAP_MAX, sizeof *kv->tq);
    if (!kv->tq) return FLUXON_ERR_NOMEM;
    uint64_t sum = 0;
    for (uint32_t k = 0; k < o->cfg.n_tenants; k++) sum += o->cfg.tenants[k].guaranteed_bytes;
    if (sum > kv->hot_capacity) { /* the guarantees must fit in the hot tier together */
        char list[512];
        size_t at = 0;
        list[0] = 0;
        for (uint32_t k = 0; k < o->cfg.n_tenants && at < sizeof list; k++)
            if (o->cfg.tenants[k].guaranteed_bytes)
                at += (size_t)snprintf(list + at, sizeof list - at, "%stenants.%s.guaranteed_bytes %llu",
                                       at ? ", " : "", o->cfg.tenants[k].name,
                                       (unsigned long long)o->cfg.tenants[k].guaranteed_bytes);
        FX_ERROR("config: the tenants' guarantees (%s) sum to %llu bytes, more than this owner's hot tier of %llu "
                 "bytes (hot_capacity_bytes, else hot_capacity_ratio x the payload capacity)",
                 list, (unsigned long long)sum, (unsigned long long)kv->hot_capacity);
        return FLUXON_ERR_CONFIG; /* a configuration error: exit status 2 */
    }
    /* the tenant table (tenant.c) lists cfg.tenants first, in order */
    for (uint32_t k = 0; k < o->cfg.n_tenants; k++) {
        kv->tq[k].quota = o->cfg.tenants[k].quota_bytes;
        kv->tq[k].guaranteed = o->cfg.tenants[k].guaranteed_bytes;
        if (kv->tq[k].quota || kv->tq[k].guaranteed) oevq_manage(o, k);
    }
    return FLUXON_OK;
}

FX_INTERNAL void fx_oevq_fini(fx_owner_t *o)
{
    for (uint32_t k = 0; o->ev->tq && k < FX_TENANT_SNAP_MAX; k++) fx_free(o->ev->tq[k].ghost);
    fx_free(o->ev->tq);
    o->ev->tq = NULL;
}

FX_INTERNAL void fx_oevq_place(fx_owner_t *o, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    if (!en->tenant && o->tenant) { /* its tenant's bytes from its commit on (pins.c uncounts them) */
        int k = fx_otenant_of_key(o, en->key, en->klen);
        if (k >= 0) { /* else a tenant this owner does not list (a replica of another owner's) */
            en->tenant = (uint8_t)(k + 1);
            fx_otenant_at(o, k)->bytes += en->slot.slot_size;
        }
    }
    oev_tq_t *t = en->tenant ? oevq_at(kv, en->tenant - 1) : NULL;
    en->in_tq = t && t->managed;
}

FX_INTERNAL uint64_t fx_oevq_bytes(const oev_t *kv)
{
    uint64_t b = kv->hot.bytes;
    for (uint32_t i = 0; i < kv->n_managed; i++) b += kv->tq[kv->managed[i]].pol.bytes;
    return b;
}

FX_INTERNAL uint64_t fx_oevq_count(const oev_t *kv)
{
    uint64_t n = kv->hot.count;
    for (uint32_t i = 0; i < kv->n_managed; i++) n += kv->tq[kv->managed[i]].pol.count;
    return n;
}

FX_INTERNAL uint64_t fx_oevq_over_by(fx_owner_t *o, uint32_t k)
{
    const oev_tq_t *t = &o->ev->tq[k];
    if (!t->managed || !t->quota || !t->pol.count) return 0;
    uint64_t h = oevq_held(o, k);
    return h > t->quota ? h - t->quota : 0;
}

FX_INTERNAL bool fx_oevq_over(fx_owner_t *o)
{
    oev_t *kv = o->ev;
    for (uint32_t i = 0; kv && i < kv->n_managed; i++)
        if (fx_oevq_over_by(o, kv->managed[i])) return true;
    return false;
}

/* ---- victims ---- */
FX_INTERNAL size_t fx_oevq_order(fx_owner_t *o, fx_evp_t **pols, size_t cap)
{
    oev_t *kv = o->ev;
    uint64_t score[FX_TENANT_SNAP_MAX + 1];
    size_t n = 0;
    if (kv->hot.count && n < cap) {
        pols[n] = &kv->hot;
        score[n++] = kv->hot.bytes;
    }
    for (uint32_t i = 0; i < kv->n_managed && n < cap && n < FX_ARRAY_LEN(score); i++) {
        uint32_t k = kv->managed[i];
        oev_tq_t *t = &kv->tq[k];
        uint64_t h = oevq_held(o, k);
        if (!t->pol.count || h <= t->guaranteed) continue; /* at or under its guarantee: kept */
        size_t j = n++;
        for (; j > 0 && score[j - 1] < h - t->guaranteed; j--) { /* insertion: most above its guarantee first */
            pols[j] = pols[j - 1];
            score[j] = score[j - 1];
        }
        pols[j] = &t->pol;
        score[j] = h - t->guaranteed;
    }
    return n;
}

FX_INTERNAL bool fx_oevq_may_take(fx_owner_t *o, const owner_entry_t *en, uint64_t bytes, uint32_t own)
{
    oev_tq_t *t = en->tenant ? oevq_at(o->ev, en->tenant - 1) : NULL;
    if (!t || !t->managed || !t->guaranteed || own == en->tenant) return true;
    uint64_t h = oevq_held(o, en->tenant - 1u);
    return h >= bytes && h - bytes >= t->guaranteed;
}

FX_INTERNAL void fx_oevq_chosen(fx_owner_t *o, owner_entry_t *en, int cause)
{
    oev_tq_t *t = en->tenant ? oevq_at(o->ev, en->tenant - 1) : NULL;
    en->q_cause = (uint8_t)cause;
    if (t) t->selected += en->slot.slot_size;
}

FX_INTERNAL void fx_oevq_settled(fx_owner_t *o, owner_entry_t *en, bool evicted)
{
    oev_t *kv = o->ev;
    oev_tq_t *t = en->tenant ? oevq_at(kv, en->tenant - 1) : NULL;
    if (t) t->selected -= FX_MIN(t->selected, en->slot.slot_size);
    if (evicted) {
        bool quota = en->q_cause == OEV_Q_QUOTA;
        kv->q_ev_quota += quota;
        kv->q_ev_pressure += !quota;
        if (t) {
            t->ev_quota += quota;
            t->ev_pressure += !quota;
        }
    }
    en->q_cause = OEV_Q_NONE;
}

/* ---- admission ---- */
FX_INTERNAL int fx_oevq_admit(fx_owner_t *o, int tenant, uint64_t bytes, char *err, size_t cap)
{
    oev_t *kv = o->ev;
    oev_tq_t *t = oevq_at(kv, tenant);
    if (!t || !t->managed || !t->quota) return FLUXON_OK;
    /* room: its own evictable values, and its puts in flight (evictable once published) */
    uint64_t h = oevq_held(o, (uint32_t)tenant), room = t->pol.bytes + t->charged;
    if (h + bytes <= t->quota) return FLUXON_OK;
    uint64_t over = h + bytes - t->quota;
    if (bytes <= t->quota && over <= room) return FLUXON_OK; /* its own coldest make room */
    t->refused++;
    kv->q_refused++;
    const char *name = fx_otenant_at(o, tenant)->name;
    snprintf(err, cap,
             "put_start: tenant \"%s\" holds %llu bytes on owner %s (with its puts in flight), its quota is %llu bytes "
             "(tenants.%s.quota_bytes) and %s: %llu bytes more do not fit",
             name, (unsigned long long)h, o->cfg.node_id, (unsigned long long)t->quota, name,
             bytes > t->quota ? "the put alone is larger"
                              : "its own evictable values and puts in flight cannot make room (pinned)",
             (unsigned long long)bytes);
    uint64_t now = fx_now_ms();
    if (!kv->q_log_ms || now - kv->q_log_ms >= 1000) { /* a line a second at most */
        kv->q_log_ms = now;
        FX_WARN("%s (%llu puts refused for quotas so far)", err, (unsigned long long)kv->q_refused);
    }
    return FLUXON_ERR_NO_SPACE;
}

FX_INTERNAL void fx_oevq_charge(fx_owner_t *o, int tenant, uint64_t bytes)
{
    oev_tq_t *t = oevq_at(o->ev, tenant);
    if (!t) return;
    t->charged += bytes;
    if (t->managed && t->quota) fx_oev_kick(o); /* over its quota: its own coldest go */
}

FX_INTERNAL void fx_oevq_release(fx_owner_t *o, int tenant, uint64_t bytes)
{
    oev_tq_t *t = o->ev ? oevq_at(o->ev, tenant) : NULL;
    if (t) t->charged -= FX_MIN(t->charged, bytes);
}

FX_INTERNAL void fx_oevq_note(fx_owner_t *o, char *buf, size_t cap)
{
    oev_t *kv = o->ev;
    size_t at = strnlen(buf, cap);
    for (uint32_t i = 0; kv && i < kv->n_managed && at + 1 < cap; i++) {
        uint32_t k = kv->managed[i];
        const oev_tq_t *t = &kv->tq[k];
        uint64_t h = oevq_held(o, k);
        if (!t->guaranteed || h > t->guaranteed) continue;
        const char *name = fx_otenant_at(o, (int)k)->name;
        at += (size_t)snprintf(buf + at, cap - at,
                               "; tenant \"%s\" holds %llu bytes, within its guarantee of %llu bytes "
                               "(tenants.%s.guaranteed_bytes): not evicted for other tenants",
                               name, (unsigned long long)h, (unsigned long long)t->guaranteed, name);
    }
}

/* ---- run-time changes (TENANT_SET, TENANT_PUSH) ---- */
/* Checks b's fields for tenant k and applies them (a first quota or guarantee: its own
 * policy); FLUXON_OK, or INVALID_ARGUMENT and err naming the values (nothing changed). */
static int oevq_apply(fx_owner_t *o, int k, const fx_body_tenant_set_t *b, char *err, size_t cap)
{
    oev_t *kv = o->ev;
    oev_tq_t *t = &kv->tq[k];
    const char *name = fx_otenant_at(o, k)->name;
    uint64_t quota = b->fields & FX_TENANT_SET_QUOTA ? b->quota_bytes : t->quota;
    uint64_t gtd = b->fields & FX_TENANT_SET_GUARANTEED ? b->guaranteed_bytes : t->guaranteed;
    uint64_t sum = gtd;
    for (uint32_t i = 0; i < fx_otenant_count(o) && i < FX_TENANT_SNAP_MAX; i++)
        if ((int)i != k) sum += kv->tq[i].guaranteed;
    const char *bad = !b->fields || (b->fields & ~(FX_TENANT_SET_QUOTA | FX_TENANT_SET_GUARANTEED))
                          ? "give --quota, --guaranteed or both (fields 1, 2)"
                      : quota && gtd > quota ? "the guarantee is above the quota (a guarantee is a share of the quota)"
                      : sum > kv->hot_capacity ? "the guarantees of all tenants would sum above this owner's hot tier"
                                               : NULL;
    if (bad) {
        snprintf(err, cap,
                 "tenant set %s: %s (quota_bytes %llu, guaranteed_bytes %llu, all guarantees %llu, hot tier %llu bytes)",
                 name, bad, (unsigned long long)quota, (unsigned long long)gtd, (unsigned long long)sum,
                 (unsigned long long)kv->hot_capacity);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    t->quota = quota;
    t->guaranteed = gtd;
    if (quota || gtd) oevq_manage(o, (uint32_t)k);
    if (t->managed) t->pol.capacity = quota ? quota : kv->hot_capacity;
    if (t->managed) oevq_ghost(o, (uint32_t)k); /* sized for the new quota */
    fx_oev_kick(o); /* a lower quota: its own coldest go now */
    return FLUXON_OK;
}

FX_INTERNAL void fx_oevq_request(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena)
{
    oev_t *kv = o->ev;
    fx_body_tenant_set_t b;
    if (fx_body_tenant_set_decode(body, h->body_len, &b, arena) != FLUXON_OK) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_PROTOCOL, "tenant set: malformed request");
        return;
    }
    int shown = (int)FX_MIN(b.tenant.len, (uint32_t)FX_TENANT_NAME_MAX);
    bool name_ok = fx_tenant_name_ok(b.tenant.p, b.tenant.len);
    int k = name_ok ? fx_otenant_find(o, b.tenant) : -1;
    if (k < 0) { /* nothing changed, no counter moves (the same below) */
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_NOT_FOUND, "tenant set: %s%.*s%s", name_ok ? "tenant \"" : "",
                            name_ok ? shown : 0, name_ok ? b.tenant.p : "",
                            name_ok ? "\" is not known to this owner (its \"tenants\")"
                                    : "not a tenant name ([A-Za-z0-9_.-], 1..32 bytes)");
        return;
    }
    const char *name = fx_otenant_at(o, k)->name;
    const char *adm = o->cfg.tenant_admin_token;
    bool admin = adm[0] && fx_ct_equal(b.admin_token.p, b.admin_token.len, adm, strlen(adm));
    bool own = e->tenant == k && fx_otenant_has_token(o, k);
    if (!admin && !own) {
        const char *given = !adm[0]           ? " (this owner has none: \"tenant_admin_token\" in its config)"
                            : b.admin_token.len ? " (the one given does not match)"
                                                : "";
        if (e->tenant == k) /* its own client, but the tenant has no token to prove (\"default\" never has) */
            fx_conn_reply_error(e->conn, h, FLUXON_ERR_AUTH,
                                "tenant set: changing tenant \"%s\"'s quota takes the owner's tenant_admin_token%s: "
                                "\"%s\" has no tenant_token, so its own clients cannot change it",
                                name, given, name);
        else
            fx_conn_reply_error(e->conn, h, FLUXON_ERR_AUTH,
                                "tenant set: changing tenant \"%s\"'s quota takes the owner's tenant_admin_token%s, "
                                "or a client of \"%s\" (which proves its tenant_token)",
                                name, given, name);
        return;
    }
    /* a tenant's own client may lower its limits, never raise them: more takes the admin token */
    const oev_tq_t *cur = &kv->tq[k];
    bool raises = ((b.fields & FX_TENANT_SET_QUOTA) && (cur->quota ? !b.quota_bytes || b.quota_bytes > cur->quota
                                                                   : false)) ||
                  ((b.fields & FX_TENANT_SET_GUARANTEED) && b.guaranteed_bytes > cur->guaranteed);
    if (!admin && raises) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_AUTH,
                            "tenant set: a client of \"%s\" may lower its quota_bytes (%llu) or guaranteed_bytes "
                            "(%llu), not raise them: that takes the owner's tenant_admin_token", name,
                            (unsigned long long)cur->quota, (unsigned long long)cur->guaranteed);
        return;
    }
    char err[400];
    int rc = oevq_apply(o, k, &b, err, sizeof err);
    if (rc != FLUXON_OK) {
        fx_conn_reply_error(e->conn, h, rc, "%s", err);
        return;
    }
    kv->q_changes++;
    FX_INFO("tenant \"%s\": quota_bytes %llu, guaranteed_bytes %llu (tenant set, by %s)", name,
            (unsigned long long)kv->tq[k].quota, (unsigned long long)kv->tq[k].guaranteed,
            admin ? "the admin token" : "its own client");
    fx_conn_t *mc = fx_olink_conn(o); /* the master sends it on to every owner (and later ones) */
    if (mc) {
        fx_body_tenant_set_t pb = {b.tenant, b.quota_bytes, b.guaranteed_bytes, b.fields, fx_str_c("")};
        FX_CONN_SEND(mc, FX_MSG_TENANT_PUSH, 0, 0, 0, tenant_set, &pb);
    } else {
        FX_WARN("tenant \"%s\": quota changed on this owner only: no master connection to send it on", name);
    }
    fx_body_empty_t em;
    FX_CONN_REPLY(e->conn, h, empty, &em);
}

/* A change another owner applied, from the master: applied here within this owner's checks
 * (a tenant it does not list, a guarantee its hot tier cannot hold: logged, skipped). */
FX_INTERNAL void fx_oevq_pushed(fx_owner_t *o, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    oev_t *kv = o->ev;
    fx_body_tenant_set_t b;
    char err[400];
    int k = -1, rc = fx_body_tenant_set_decode(body, h->body_len, &b, arena);
    if (rc == FLUXON_OK && fx_tenant_name_ok(b.tenant.p, b.tenant.len)) k = fx_otenant_find(o, b.tenant);
    if (rc != FLUXON_OK) {
        FX_WARN("a malformed quota push from the master: ignored");
        return;
    }
    if (k < 0) {
        bool named = fx_tenant_name_ok(b.tenant.p, b.tenant.len); /* a safe charset: printable as is */
        FX_INFO("a quota pushed by the master for tenant \"%.*s\", which this owner does not list (tenants): ignored",
                named ? (int)b.tenant.len : 0, named ? b.tenant.p : "");
        return;
    }
    const oev_tq_t *t = &kv->tq[k];
    if ((!(b.fields & FX_TENANT_SET_QUOTA) || b.quota_bytes == t->quota) &&
        (!(b.fields & FX_TENANT_SET_GUARANTEED) || b.guaranteed_bytes == t->guaranteed))
        return; /* already so (a register's replay) */
    if ((rc = oevq_apply(o, k, &b, err, sizeof err)) != FLUXON_OK) {
        kv->q_push_refused++;
        FX_WARN("a quota pushed by the master is not applied on this owner: %s", err);
        return;
    }
    kv->q_pushed++;
    FX_INFO("tenant \"%s\": quota_bytes %llu, guaranteed_bytes %llu (pushed by the master)",
            fx_otenant_at(o, k)->name, (unsigned long long)t->quota, (unsigned long long)t->guaranteed);
}

/* ---- stats ---- */
FX_INTERNAL void fx_oevq_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    oev_t *kv = o->ev;
    if (!kv || !kv->tq) return;
    m->quota_refusals = kv->q_refused;
    m->quota_changes = kv->q_changes;
    m->evictions_quota = kv->q_ev_quota;
    m->evictions_pressure = kv->q_ev_pressure;
    m->quota_pushes = kv->q_pushed;
    m->quota_push_refusals = kv->q_push_refused;
    for (uint32_t k = 0; o->tenant && k < fx_otenant_count(o); k++) { /* a few tenants, no values walked */
        fx_tenant_snap_t *s = fx_otenant_at(o, (int)k);
        s->quota_bytes = kv->tq[k].quota;
        s->guaranteed_bytes = kv->tq[k].guaranteed;
        s->quota_refusals = kv->tq[k].refused;
        s->evictions_quota = kv->tq[k].ev_quota;
        s->evictions_pressure = kv->tq[k].ev_pressure;
    }
}
