/* config_int.h — what the two files of the config loader share (config.c: the field tables,
 * sections and the per-role checks; config_read.c: the loader's context, its error messages
 * and the typed value readers). Internal to common/config*.c. */
#ifndef FX_CONFIG_INT_H
#define FX_CONFIG_INT_H

#include <cJSON.h>

#include "config.h"

#define CFG_PAGE 4096u
#define CFG_MS_MAX 86400000.0
#define CFG_SIZE_HELP "is not a size (integer bytes, or a string like \"512MiB\")"

struct cfg_field {
    const char *name;
    unsigned roles; /* bit (1 << fx_role_t) for each role that accepts the key */
};

struct cfg_ctx {
    char *err;
    size_t errcap;
    fx_role_t role;
};

__attribute__((format(printf, 3, 4))) FX_INTERNAL int fx_cfg_fail(struct cfg_ctx *c, const char *path,
                                                           const char *fmt, ...);
FX_INTERNAL void fx_cfg_sanitize(const char *s, bool quote, char *buf, size_t cap);
/* A short text for a JSON value in a message: 100, -0.5, "abc", true, {...}. */
FX_INTERNAL const char *fx_cfg_vtext(const cJSON *v, char *buf, size_t cap);
__attribute__((format(printf, 4, 5))) FX_INTERNAL int fx_cfg_bad(struct cfg_ctx *c, const char *path,
                                                          const cJSON *v, const char *fmt, ...);
FX_INTERNAL int fx_cfg_match(struct cfg_ctx *c, const cJSON *it, const char *prefix,
                     const struct cfg_field *tab, int n, uint64_t *seen);
FX_INTERNAL int fx_cfg_want_string(struct cfg_ctx *c, const char *path, const cJSON *v);
FX_INTERNAL int fx_cfg_get_choice(struct cfg_ctx *c, const char *path, const cJSON *v, const char *const *names, int n,
                          int *idx);
FX_INTERNAL int fx_cfg_want_object(struct cfg_ctx *c, const char *path, const cJSON *v);
FX_INTERNAL int fx_cfg_get_int(struct cfg_ctx *c, const char *path, const cJSON *v, double lo,
                       double hi, int64_t *out);
FX_INTERNAL int fx_cfg_get_ms(struct cfg_ctx *c, const char *path, const cJSON *v, uint32_t *out);
/* "disk" (config_disk.c, issue 39) */
FX_INTERNAL int fx_cfg_parse_disk(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg);
/* "tenants" (owner), "tenant" (external), a token (never shown) (config_tenants.c, issue 42) */
FX_INTERNAL int fx_cfg_parse_tenants(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg);
FX_INTERNAL int fx_cfg_parse_tenant(struct cfg_ctx *c, const cJSON *v, fx_config_t *cfg);
/* "tenants" of a master: its quota table (fx_tenant_table_parse) */
FX_INTERNAL int fx_cfg_parse_tenant_quotas(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg);
FX_INTERNAL int fx_cfg_get_token(struct cfg_ctx *c, const char *path, const cJSON *v, char out[FX_TOKEN_MAX]);
FX_INTERNAL int fx_cfg_get_size(struct cfg_ctx *c, const char *path, const cJSON *v, uint64_t *out);
FX_INTERNAL int fx_cfg_get_pages(struct cfg_ctx *c, const char *path, const cJSON *v, uint64_t *out);
FX_INTERNAL int fx_cfg_get_hostport(struct cfg_ctx *c, const char *path, const cJSON *v, char *host,
                            size_t hostcap, uint16_t *port);
FX_INTERNAL int fx_cfg_get_id(struct cfg_ctx *c, const char *path, const cJSON *v, bool colon, char *out);
FX_INTERNAL void fx_cfg_default_node_id(char *out, const char *suffix);

#endif
