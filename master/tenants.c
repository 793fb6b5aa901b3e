/* tenants.c — quotas pushed to every owner (issue 42; docs/tenants.md). An owner that applied
 * a `tenant set` (it checked who asked: the master trusts its registered owners, which showed
 * the cluster token) sends TENANT_PUSH {tenant, quota_bytes, guaranteed_bytes, fields}; the
 * master keeps the latest of each field per tenant and sends it on to every other registered
 * owner, and the whole table to an owner when it registers (new, restarted or reconnected).
 * The table starts as the master's config "tenants" (fx_tenant_table_parse, the parser of
 * the etcd value too). Without HA it is the master's memory only: a master restart starts
 * again from its config (the owners keep what they applied). With HA it is also kept in etcd
 * (key <ha.key>.tenants, JSON; ha.c stores it after each change and reads it at election and
 * once a second, so a new leader, and an operator's `etcdctl put`, hand it to every owner);
 * etcd's table wins over the config's, which the leader stores when the key is absent. The
 * master knows no tenant list: each owner applies a push for a tenant it lists, within its
 * own checks, over its own config's values. */
#include <cJSON.h>
#include <stdio.h>

#include "log.h"
#include "master_ha.h"
#include "master_int.h"

/* the table's fields travel as TENANT_PUSH's */
_Static_assert(FX_TQ_QUOTA == FX_TENANT_SET_QUOTA && FX_TQ_GUARANTEED == FX_TENANT_SET_GUARANTEED, "fields");

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

/* The table as JSON (fx_malloc'd; NULL when out of memory): fields not set are left out. */
static char *mten_json(const fx_mtenant_t *tab, uint32_t n)
{
    cJSON *d = cJSON_CreateObject();
    for (uint32_t i = 0; d && i < n; i++) {
        cJSON *e = cJSON_AddObjectToObject(d, tab[i].name);
        if (!e) break;
        if (tab[i].fields & FX_TENANT_SET_QUOTA) cJSON_AddNumberToObject(e, "quota_bytes", (double)tab[i].quota);
        if (tab[i].fields & FX_TENANT_SET_GUARANTEED)
            cJSON_AddNumberToObject(e, "guaranteed_bytes", (double)tab[i].guaranteed);
    }
    char *txt = d ? cJSON_PrintUnformatted(d) : NULL, *out = txt ? fx_malloc(strlen(txt) + 1) : NULL;
    if (out) strcpy(out, txt);
    cJSON_free(txt);
    cJSON_Delete(d);
    return out;
}
#define mten_json(m) mten_json((m)->tenants, (m)->n_tenants)

FX_INTERNAL void fx_mtenants_init(fx_master_t *m)
{
    memcpy(m->tenants, m->cfg.tenant_quotas, m->cfg.n_tenant_quotas * sizeof *m->tenants);
    m->n_tenants = m->cfg.n_tenant_quotas;
    if (m->n_tenants)
        FX_INFO("tenants' quota table from the config: %u tenant(s), handed to each owner that registers%s",
                m->n_tenants, m->cfg.ha_etcd[0] ? " (etcd's table, when it holds one, wins)" : "");
}

FX_INTERNAL void fx_mtenants_load(fx_master_t *m, const char *json)
{
    fx_mtenant_t tab[FX_TENANT_TABLE_MAX];
    uint32_t n = 0;
    char at[112] = "", why[320] = "";
    bool absent = !json[0]; /* no key: the config's table is the starting one */
    if (absent) {
        memcpy(tab, m->cfg.tenant_quotas, m->cfg.n_tenant_quotas * sizeof *tab);
        n = m->cfg.n_tenant_quotas;
    } else {
        cJSON *d = cJSON_Parse(json);
        int rc = fx_tenant_table_parse(d, tab, FX_TENANT_TABLE_MAX, &n, at, sizeof at, why, sizeof why);
        cJSON_Delete(d);
        if (rc) {
            m->tenant_table_refused++;
            FX_WARN("tenants' quota table in etcd (%s.tenants): %s%s%s; the table in use is kept", m->cfg.ha_key, at,
                    at[0] ? ": " : "", why);
            return;
        }
    }
    uint32_t sent = 0;
    for (uint32_t i = 0; i < n; i++) { /* each entry that changed goes to every owner */
        const fx_mtenant_t *t = &tab[i], *old = NULL;
        for (uint32_t j = 0; j < m->n_tenants && !old; j++)
            if (!strcmp(m->tenants[j].name, t->name)) old = &m->tenants[j];
        if (!t->fields || (old && old->fields == t->fields && old->quota == t->quota && old->guaranteed == t->guaranteed))
            continue;
        sent++;
        for (size_t k = 0; k < m->n_nodes; k++) {
            master_peer_t *q = m->nodes[k]->peer;
            if (q && m->nodes[k]->alive) mten_send(q, t);
        }
    }
    memcpy(m->tenants, tab, n * sizeof *tab);
    m->n_tenants = n;
    if (absent && n) { /* the leader stores it: the run-time state from now on */
        if (m->ha) fx_mha_tenants_store(m, mten_json(m));
        FX_INFO("no tenants' quota table in etcd (%s.tenants): the config's (%u tenant(s), %u changed, sent to every "
                "owner) is stored there", m->cfg.ha_key, n, sent);
        return;
    }
    if (absent) return; /* none in etcd, none in the config: an empty table, as before */
    m->tenant_table_loads++;
    FX_INFO("tenants' quota table read from etcd (%s.tenants): %u tenant(s), %u changed, sent to every owner",
            m->cfg.ha_key, n, sent);
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
    if (m->ha) fx_mha_tenants_store(m, mten_json(m)); /* NULL (out of memory): the next change stores it */
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
