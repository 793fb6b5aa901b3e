/* config_tenants.c — tenants (issue 42): the owner's "tenants" section (every tenant's name
 * and token), an external's "tenant" and the tokens, which are secrets: messages give their
 * type or length, never their text; and the tenants' quota table (a master's "tenants", the
 * etcd value master/tenants.c reads: one parser for both). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config_int.h"

FX_INTERNAL bool fx_tenant_name_ok(const char *s, size_t len)
{
    if (len == 0 || len >= FX_TENANT_NAME_MAX) return false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                  ch == '_' || ch == '-';
        if (!ok) return false;
    }
    return true;
}

FX_INTERNAL int fx_cfg_get_token(struct cfg_ctx *c, const char *path, const cJSON *v, char out[FX_TOKEN_MAX])
{
    if (!cJSON_IsString(v)) return fx_cfg_fail(c, path, "(not shown) is not a string");
    size_t n = strlen(v->valuestring);
    if (n >= FX_TOKEN_MAX)
        return fx_cfg_fail(c, path, "(%zu bytes, not shown) is longer than %d bytes", n, FX_TOKEN_MAX - 1);
    memcpy(out, v->valuestring, n + 1);
    return 0;
}

static int cfg_tenant_name(struct cfg_ctx *c, const char *path, const cJSON *v, const char *name)
{
    if (!fx_tenant_name_ok(name, strlen(name)))
        return fx_cfg_bad(c, path, v, "is not a tenant name (1..%d characters of [A-Za-z0-9_.-])",
                          FX_TENANT_NAME_MAX - 1);
    return 0;
}

FX_INTERNAL int fx_cfg_parse_tenant(struct cfg_ctx *c, const cJSON *v, fx_config_t *cfg)
{
    int rc = fx_cfg_want_string(c, "tenant", v);
    if (rc || (rc = cfg_tenant_name(c, "tenant", v, v->valuestring))) return rc;
    memcpy(cfg->tenant, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

/* "tenants": {"NAME": {"token": "...", "pinned_bytes_max": SIZE, "quota_bytes": SIZE,
 * "guaranteed_bytes": SIZE}, ...} (a guarantee at most the quota, when both are given): at most FX_TENANTS_MAX
 * names, each once; a token (1..FX_TOKEN_MAX-1 bytes) is required except for "default". */
FX_INTERNAL int fx_cfg_parse_tenants(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg)
{
    int rc = fx_cfg_want_object(c, "tenants", obj);
    if (rc) return rc;
    cfg->n_tenants = 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        char path[64], shown[64];
        fx_cfg_sanitize(it->string ? it->string : "", true, shown, sizeof shown);
        if (!it->string || !fx_tenant_name_ok(it->string, strlen(it->string)))
            return fx_cfg_fail(c, "tenants", "%s is not a tenant name (1..%d characters of [A-Za-z0-9_.-])", shown,
                               FX_TENANT_NAME_MAX - 1);
        snprintf(path, sizeof path, "tenants.%s", it->string);
        if (cfg->n_tenants == FX_TENANTS_MAX)
            return fx_cfg_fail(c, "tenants", "names more than %d tenants (at %s)", FX_TENANTS_MAX, shown);
        for (uint32_t k = 0; k < cfg->n_tenants; k++)
            if (!strcmp(cfg->tenants[k].name, it->string)) return fx_cfg_fail(c, "tenants", "%s is named twice", shown);
        if ((rc = fx_cfg_want_object(c, path, it))) return rc;
        fx_tenant_cfg_t *t = &cfg->tenants[cfg->n_tenants];
        memset(t, 0, sizeof *t);
        memcpy(t->name, it->string, strlen(it->string) + 1);
        bool is_default = !strcmp(t->name, FX_TENANT_DEFAULT);
        for (const cJSON *f = it->child; f; f = f->next) {
            char fpath[112];
            snprintf(fpath, sizeof fpath, "%s.%s", path, f->string ? f->string : "");
            if (f->string && !strcmp(f->string, "pinned_bytes_max")) { /* its pins' budget */
                if ((rc = fx_cfg_get_size(c, fpath, f, &t->pinned_bytes_max))) return rc;
                t->has_pinned_max = true;
                continue;
            }
            if (f->string && !strcmp(f->string, "quota_bytes")) { /* issue 42: quotas */
                if ((rc = fx_cfg_get_size(c, fpath, f, &t->quota_bytes))) return rc;
                continue;
            }
            if (f->string && !strcmp(f->string, "guaranteed_bytes")) {
                if ((rc = fx_cfg_get_size(c, fpath, f, &t->guaranteed_bytes))) return rc;
                continue;
            }
            if (f->string && !strcmp(f->string, "disk_quota_bytes")) { /* its share of the disk tier */
                if ((rc = fx_cfg_get_size(c, fpath, f, &t->disk_quota_bytes))) return rc;
                continue;
            }
            if (!f->string || strcmp(f->string, "token"))
                return fx_cfg_fail(c, fpath, "is not a field of a tenant (known: token, pinned_bytes_max, quota_bytes, "
                                             "guaranteed_bytes, disk_quota_bytes)");
            if ((rc = fx_cfg_get_token(c, fpath, f, t->token))) return rc;
        }
        if (!t->token[0] && !is_default) {
            char tpath[112];
            snprintf(tpath, sizeof tpath, "%s.token", path);
            return fx_cfg_fail(c, tpath, "missing or empty (required, 1..%d bytes; only \"default\" may have none)",
                               FX_TOKEN_MAX - 1);
        }
        if (t->quota_bytes && t->guaranteed_bytes > t->quota_bytes)
            return fx_cfg_fail(c, path,
                               "guaranteed_bytes (%llu) is above quota_bytes (%llu): a guarantee is a share of the "
                               "quota",
                               (unsigned long long)t->guaranteed_bytes, (unsigned long long)t->quota_bytes);
        cfg->n_tenants++;
    }
    return 0;
}

/* ---- the tenants' quota table (the master's "tenants"; etcd's <ha.key>.tenants) ---- */
static bool tq_size(const cJSON *v, uint64_t *out)
{
    if (cJSON_IsString(v)) return fx_parse_size(v->valuestring, out) == 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!isfinite(d) || d < 0 || d >= 9007199254740992.0 || d != (double)(uint64_t)d) return false;
    *out = (uint64_t)d;
    return true;
}

FX_INTERNAL int fx_tenant_table_parse(const struct cJSON *obj, fx_tenant_quota_t *tab, uint32_t cap, uint32_t *n,
                                      char *at, size_t atcap, char *why, size_t whycap)
{
    char shown[64], vt[96];
    uint32_t k = 0;
    snprintf(at, atcap, "%s", "");
    if (!cJSON_IsObject(obj)) {
        snprintf(why, whycap, "not a JSON object of tenants");
        return -1;
    }
    for (const cJSON *e = obj->child; e; e = e->next, k++) {
        const char *name = e->string ? e->string : "";
        snprintf(at, atcap, "%s", ""); /* a message about the table names no earlier entry's field */
        fx_cfg_sanitize(name, true, shown, sizeof shown);
        if (!fx_tenant_name_ok(name, strlen(name))) {
            snprintf(why, whycap, "%s is not a tenant name (1..%d characters of [A-Za-z0-9_.-])", shown,
                     FX_TENANT_NAME_MAX - 1);
            return -1;
        }
        for (uint32_t j = 0; j < k; j++)
            if (!strcmp(tab[j].name, name)) {
                snprintf(why, whycap, "%s is named twice", shown);
                return -1;
            }
        if (k == cap) {
            snprintf(why, whycap, "names more than %u tenants (at %s)", cap, shown);
            return -1;
        }
        fx_tenant_quota_t *t = &tab[k];
        memset(t, 0, sizeof *t);
        memcpy(t->name, name, strlen(name) + 1);
        if (!cJSON_IsObject(e)) {
            snprintf(at, atcap, "%s", name);
            snprintf(why, whycap, "%s is not an object of quota_bytes, guaranteed_bytes",
                     fx_cfg_vtext(e, vt, sizeof vt));
            return -1;
        }
        for (const cJSON *f = e->child; f; f = f->next) { /* a typo is no silent no-op */
            bool q = f->string && !strcmp(f->string, "quota_bytes");
            fx_cfg_sanitize(f->string ? f->string : "", false, shown, sizeof shown);
            snprintf(at, atcap, "%s.%s", name, shown);
            if (!q && (!f->string || strcmp(f->string, "guaranteed_bytes"))) {
                snprintf(why, whycap, "is not a field of a tenant's quota (known: quota_bytes, guaranteed_bytes; "
                                      "tokens are in each owner's config)");
                return -1;
            }
            if (t->fields & (q ? FX_TQ_QUOTA : FX_TQ_GUARANTEED)) {
                snprintf(why, whycap, "is given twice");
                return -1;
            }
            if (!tq_size(f, q ? &t->quota : &t->guaranteed)) {
                snprintf(why, whycap, "%s %s", fx_cfg_vtext(f, vt, sizeof vt), CFG_SIZE_HELP);
                return -1;
            }
            t->fields |= q ? FX_TQ_QUOTA : FX_TQ_GUARANTEED;
        }
        if ((t->fields & FX_TQ_QUOTA) && (t->fields & FX_TQ_GUARANTEED) && t->quota && t->guaranteed > t->quota) {
            snprintf(at, atcap, "%s", name);
            snprintf(why, whycap,
                     "guaranteed_bytes (%llu) is above quota_bytes (%llu): a guarantee is a share of the quota",
                     (unsigned long long)t->guaranteed, (unsigned long long)t->quota);
            return -1;
        }
    }
    snprintf(at, atcap, "%s", "");
    *n = k;
    return 0;
}

FX_INTERNAL int fx_cfg_parse_tenant_quotas(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg)
{
    char at[112], why[320], path[128];
    int rc = fx_cfg_want_object(c, "tenants", obj);
    if (rc) return rc;
    if (fx_tenant_table_parse(obj, cfg->tenant_quotas, FX_TENANT_TABLE_MAX, &cfg->n_tenant_quotas, at, sizeof at, why,
                              sizeof why)) {
        snprintf(path, sizeof path, "tenants%s%s", at[0] ? "." : "", at);
        return fx_cfg_fail(c, path, "%s", why);
    }
    return 0;
}
