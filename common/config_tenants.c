/* config_tenants.c — tenants (issue 42): the owner's "tenants" section (every tenant's name
 * and token), an external's "tenant" and the tokens, which are secrets: messages give their
 * type or length, never their text. */
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
            if (!f->string || strcmp(f->string, "token"))
                return fx_cfg_fail(c, fpath, "is not a field of a tenant (known: token, pinned_bytes_max, quota_bytes, "
                                             "guaranteed_bytes)");
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
