/* tenants.c — quotas pushed to every owner (issue 42; docs/tenants.md). An owner that applied
 * a `tenant set` (it checked who asked: the master trusts its registered owners, which showed
 * the cluster token) sends TENANT_PUSH {tenant, quota_bytes, guaranteed_bytes, fields}; the
 * master keeps the latest of each field per tenant and sends it on to every other registered
 * owner, and the whole table to an owner when it registers (new, restarted or reconnected).
 * The table is the master's memory only: a master restart or a new HA leader starts empty
 * (the owners keep what they applied). The master knows no tenant list: each owner applies a
 * push for a tenant it lists, within its own checks. */
#include "log.h"
#include "master_int.h"

/* The entry for name, created when absent (NULL: the table is full). */
static fx_mtenant_t *mten_entry(fx_master_t *m, fx_str_t name)
{
    for (uint32_t i = 0; i < m->n_tenants; i++)
        if (fx_str_eq(name, m->tenants[i].name)) return &m->tenants[i];
    if (m->n_tenants == FX_ARRAY_LEN(m->tenants)) return NULL;
    fx_mtenant_t *t = &m->tenants[m->n_tenants++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name.p, name.len);
    t->name[name.len] = 0;
    return t;
}

static void mten_send(master_peer_t *p, const fx_mtenant_t *t)
{
    fx_body_tenant_set_t b = {fx_str_c(t->name), t->quota, t->guaranteed, t->fields, fx_str_c("")};
    FX_CONN_SEND(p->conn, FX_MSG_TENANT_PUSH, 0, 0, 0, tenant_set, &b);
}

FX_INTERNAL void fx_mtenants_push(master_peer_t *p, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena)
{
    fx_master_t *m = p->m;
    fx_body_tenant_set_t b;
    uint32_t known = FX_TENANT_SET_QUOTA | FX_TENANT_SET_GUARANTEED;
    if (!p->node || fx_body_tenant_set_decode(body, h->body_len, &b, arena) != FLUXON_OK ||
        !fx_tenant_name_ok(b.tenant.p, b.tenant.len) || !b.fields || (b.fields & ~known)) {
        FX_WARN("TENANT_PUSH from %s: not a registered owner's, or malformed: ignored", fx_conn_desc(p->conn));
        return; /* one-way: nothing to answer */
    }
    fx_mtenant_t *t = mten_entry(m, b.tenant);
    if (!t) {
        FX_WARN("TENANT_PUSH from %s: more than %zu tenants pushed: \"%.*s\" ignored", p->node_id,
                FX_ARRAY_LEN(m->tenants), (int)b.tenant.len, b.tenant.p);
        return;
    }
    if (b.fields & FX_TENANT_SET_QUOTA) t->quota = b.quota_bytes;
    if (b.fields & FX_TENANT_SET_GUARANTEED) t->guaranteed = b.guaranteed_bytes;
    t->fields |= b.fields;
    m->tenant_pushes++;
    FX_INFO("tenant \"%s\": quota_bytes %llu, guaranteed_bytes %llu (from owner %s): sent to every owner", t->name,
            (unsigned long long)t->quota, (unsigned long long)t->guaranteed, p->node_id);
    for (size_t i = 0; i < m->n_nodes; i++) {
        master_peer_t *q = m->nodes[i]->peer;
        if (q && q != p && m->nodes[i]->alive) mten_send(q, t);
    }
}

FX_INTERNAL void fx_mtenants_registered(fx_master_t *m, master_peer_t *p)
{
    for (uint32_t i = 0; i < m->n_tenants; i++) mten_send(p, &m->tenants[i]);
}
