/* config_read.c — the config loader's error messages and typed value readers
 * (config_int.h): "<path>: <value> <rule>" messages, unknown fields with a "did you mean",
 * integers, milliseconds, sizes, pages, host:port, ids, choices among names. */
#include "config_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes "<path>: <formatted rest>" into the caller's buffer; returns FLUXON_ERR_CONFIG. */
FX_INTERNAL int fx_cfg_fail(struct cfg_ctx *c, const char *path,
                                                           const char *fmt, ...)
{
    if (!c->err || c->errcap == 0) return FLUXON_ERR_CONFIG;
    char rest[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errcap, "%s: %s", path, rest);
    return FLUXON_ERR_CONFIG;
}

/* Copies s into buf (quoted when quote), non-printable bytes as '?', cut with "...". */
FX_INTERNAL void fx_cfg_sanitize(const char *s, bool quote, char *buf, size_t cap)
{
    size_t o = 0, lim = cap > 8 ? cap - 6 : 0;
    if (quote && o < lim) buf[o++] = '"';
    for (; *s && o < lim; s++) buf[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    if (*s) for (int i = 0; i < 3 && o + 2 < cap; i++) buf[o++] = '.';
    if (quote && o + 1 < cap) buf[o++] = '"';
    if (cap) buf[o < cap ? o : cap - 1] = 0;
}

/* A short text for a JSON value in an error message: 100, -0.5, "abc", true, {...}. */
FX_INTERNAL const char *fx_cfg_vtext(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsString(v)) {
        fx_cfg_sanitize(v->valuestring, true, buf, cap);
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        snprintf(buf, cap, "%.15g", d);
        if (strtod(buf, NULL) != d) snprintf(buf, cap, "%.17g", d);
    } else {
        snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : cJSON_IsFalse(v) ? "false"
                                 : cJSON_IsNull(v) ? "null" : cJSON_IsArray(v) ? "[...]" : "{...}");
    }
    return buf;
}

/* "<path>: <value> <rule>". */
FX_INTERNAL int fx_cfg_bad(struct cfg_ctx *c, const char *path,
                                                          const cJSON *v, const char *fmt, ...)
{
    char vt[96], rule[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rule, sizeof rule, fmt, ap);
    va_end(ap);
    return fx_cfg_fail(c, path, "%s %s", fx_cfg_vtext(v, vt, sizeof vt), rule);
}

/* Levenshtein distance of a and b, or more than max (stops early; names under 64 bytes). */
static int cfg_distance(const char *a, const char *b, int max)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la >= 64 || lb >= 64 || (la > lb ? la - lb : lb - la) > (size_t)max) return max + 1;
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0], best = row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], v = FX_MIN(FX_MIN(row[j] + 1, row[j - 1] + 1), diag + (a[i - 1] != b[j - 1]));
            diag = up;
            row[j] = v;
            best = FX_MIN(best, v);
        }
        if (best > max) return max + 1;
    }
    return row[lb];
}

/* Matches an object member against a key table: returns its index, or -1 with the
 * error written (unknown for this role, or duplicate; an unknown name within two edits
 * of a field of the role gets "did you mean"). seen: one bit per index. */
FX_INTERNAL int fx_cfg_match(struct cfg_ctx *c, const cJSON *it, const char *prefix,
                     const struct cfg_field *tab, int n, uint64_t *seen)
{
    char path[160], key[72];
    const char *name = it->string ? it->string : "";
    for (int i = 0; i < n; i++) {
        if (strcmp(name, tab[i].name) != 0 || !(tab[i].roles & (1u << c->role))) continue;
        snprintf(path, sizeof path, "%s%s", prefix, name);
        if (*seen & (1ull << i)) return fx_cfg_fail(c, path, "duplicate field"), -1;
        *seen |= 1ull << i;
        return i;
    }
    fx_cfg_sanitize(name, false, key, sizeof key);
    snprintf(path, sizeof path, "%s%s", prefix, key);
    int near = -1, near_d = 3;
    for (int i = 0; i < n; i++) {
        int d = (tab[i].roles & (1u << c->role)) ? cfg_distance(name, tab[i].name, 2) : 3;
        if (d < near_d) near = i, near_d = d;
    }
    if (near >= 0) fx_cfg_fail(c, path, "unknown field for role %s (did you mean %s%s?)", fx_role_name(c->role), prefix,
                            tab[near].name);
    else fx_cfg_fail(c, path, "unknown field for role %s", fx_role_name(c->role));
    return -1;
}

FX_INTERNAL int fx_cfg_want_string(struct cfg_ctx *c, const char *path, const cJSON *v)
{
    return cJSON_IsString(v) ? 0 : fx_cfg_bad(c, path, v, "is not a string");
}

/* v must be one of the n names; *idx receives its index (the enum values follow the names'
 * order). Else "must be one of a, b, c". */
FX_INTERNAL int fx_cfg_get_choice(struct cfg_ctx *c, const char *path, const cJSON *v, const char *const *names, int n,
                          int *idx)
{
    for (int i = 0; cJSON_IsString(v) && i < n; i++)
        if (strcmp(v->valuestring, names[i]) == 0) {
            *idx = i;
            return 0;
        }
    char why[128]; /* a wrong type says what would do too */
    snprintf(why, sizeof why, "%smust be one of ", cJSON_IsString(v) ? "" : "is not a string: ");
    for (int i = 0; i < n; i++) {
        size_t l = strlen(why);
        snprintf(why + l, sizeof why - l, "%s%s", i ? ", " : "", names[i]);
    }
    return fx_cfg_bad(c, path, v, "%s", why);
}

FX_INTERNAL int fx_cfg_want_object(struct cfg_ctx *c, const char *path, const cJSON *v)
{
    return cJSON_IsObject(v) ? 0 : fx_cfg_bad(c, path, v, "is not an object");
}

/* An integral JSON number within [lo, hi]; the message says "must be an integer in". */
FX_INTERNAL int fx_cfg_get_int(struct cfg_ctx *c, const char *path, const cJSON *v, double lo,
                       double hi, int64_t *out)
{
    if (!cJSON_IsNumber(v)) return fx_cfg_bad(c, path, v, "is not an integer (must be an integer in [%.0f, %.0f])", lo, hi);
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi || d != (double)(int64_t)d)
        return fx_cfg_bad(c, path, v, "must be an integer in [%.0f, %.0f]", lo, hi);
    *out = (int64_t)d;
    return 0;
}

FX_INTERNAL int fx_cfg_get_ms(struct cfg_ctx *c, const char *path, const cJSON *v, uint32_t *out)
{
    int64_t x = 0;
    int rc = fx_cfg_get_int(c, path, v, 1, CFG_MS_MAX, &x);
    if (rc == 0) *out = (uint32_t)x;
    return rc;
}

/* A size: an integral non-negative JSON number (exact, < 2^53) or an fx_parse_size
 * string. */
FX_INTERNAL int fx_cfg_get_size(struct cfg_ctx *c, const char *path, const cJSON *v, uint64_t *out)
{
    if (cJSON_IsString(v)) {
        int prc = fx_parse_size(v->valuestring, out);
        if (prc == -2)
            return fx_cfg_fail(c, path, "\"%s\" is too large: a size is at most 18446744073709551615 bytes (2^64 - 1, "
                               "16 EiB - 1)", v->valuestring);
        if (prc != 0) return fx_cfg_bad(c, path, v, CFG_SIZE_HELP);
        return 0;
    }
    if (!cJSON_IsNumber(v)) return fx_cfg_bad(c, path, v, CFG_SIZE_HELP);
    double d = v->valuedouble;
    if (isfinite(d) && d >= 9007199254740992.0) /* a double: the number written may not be the one read */
        return fx_cfg_fail(c, path, "%.0f or so is not a size: a JSON number is exact only below 2^53 "
                           "(9007199254740992); write a size that large as a string like \"8PiB\"", d);
    if (!isfinite(d) || d < 0 || d != (double)(uint64_t)d) return fx_cfg_bad(c, path, v, CFG_SIZE_HELP);
    *out = (uint64_t)d;
    return 0;
}

/* A size that must be > 0 and a multiple of 4096. */
FX_INTERNAL int fx_cfg_get_pages(struct cfg_ctx *c, const char *path, const cJSON *v, uint64_t *out)
{
    int rc = fx_cfg_get_size(c, path, v, out);
    if (rc) return rc;
    if (*out == 0) return fx_cfg_bad(c, path, v, "must be > 0");
    if (*out % CFG_PAGE) return fx_cfg_bad(c, path, v, "is not a multiple of 4096");
    return 0;
}

FX_INTERNAL int fx_cfg_get_hostport(struct cfg_ctx *c, const char *path, const cJSON *v, char *host,
                            size_t hostcap, uint16_t *port)
{
    int rc = fx_cfg_want_string(c, path, v);
    if (rc) return rc;
    if (fx_parse_hostport(v->valuestring, host, hostcap, port) != 0)
        return fx_cfg_bad(c, path, v, "is not host:port (IPv4 or localhost, port 0..65535)");
    return 0;
}

/* 1..63 bytes of [A-Za-z0-9._-], plus ':' when colon. */
static bool cfg_id_ok(const char *s, bool colon)
{
    size_t n = strlen(s);
    if (n == 0 || n >= FX_ID_MAX) return false;
    for (; *s; s++) {
        char ch = *s;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  ch == '.' || ch == '_' || ch == '-' || (colon && ch == ':');
        if (!ok) return false;
    }
    return true;
}

FX_INTERNAL int fx_cfg_get_id(struct cfg_ctx *c, const char *path, const cJSON *v, bool colon, char *out)
{
    int rc = fx_cfg_want_string(c, path, v);
    if (rc) return rc;
    if (!cfg_id_ok(v->valuestring, colon))
        return fx_cfg_bad(c, path, v, "must be 1..63 characters of %s",
                       colon ? "[A-Za-z0-9._:-]" : "[A-Za-z0-9._-]");
    fx_strlcpy(out, v->valuestring, FX_ID_MAX);
    return 0;
}

/* Default node id: this host's name, characters outside [A-Za-z0-9._-] as '_', cut so
 * that suffix still fits in FX_ID_MAX. */
FX_INTERNAL void fx_cfg_default_node_id(char *out, const char *suffix)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) fx_strlcpy(host, "localhost", sizeof host);
    host[sizeof host - 1] = 0;
    for (char *p = host; *p; p++) {
        char s[2] = {*p, 0};
        if (!cfg_id_ok(s, false)) *p = '_';
    }
    size_t slen = strlen(suffix), hlen = FX_MIN(strlen(host), FX_ID_MAX - 1 - slen);
    memcpy(out, host, hlen);
    memcpy(out + hlen, suffix, slen + 1);
}
