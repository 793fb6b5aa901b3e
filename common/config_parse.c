/* config_parse.c — the config's value parsers that need no parse context: sizes ("512MiB"),
 * host:port, and the names of roles (config.h). */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

FX_INTERNAL int fx_parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *unit; uint64_t mult; } units[] = {
        {"", 1}, {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
        {"TiB", 1ull << 40}, {"KB", 1000ull}, {"MB", 1000000ull}, {"GB", 1000000000ull},
        {"TB", 1000000000000ull}};
    if (!s || !out || *s < '0' || *s > '9') return -1;
    uint64_t v = 0;
    bool over = false; /* a size, but past 2^64 - 1 bytes: -2 once the unit is known good */
    for (; *s >= '0' && *s <= '9'; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) over = true;
        else v = v * 10 + d;
    }
    for (size_t i = 0; i < FX_ARRAY_LEN(units); i++) {
        if (strcmp(s, units[i].unit) != 0) continue;
        if (over || v > UINT64_MAX / units[i].mult) return -2;
        *out = v * units[i].mult;
        return 0;
    }
    return -1;
}

FX_INTERNAL int fx_parse_hostport(const char *s, char *host, size_t hostcap, uint16_t *port)
{
    if (!s) return -1;
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) return -1;
    size_t hlen = (size_t)(colon - s);
    if (!(hlen == 9 && strncmp(s, "localhost", 9) == 0)) {
        /* dotted quad: four decimal octets 0..255, no leading zeros (as inet_pton) */
        const char *p = s;
        for (int octet = 0; octet < 4; octet++) {
            if (octet > 0 && *p++ != '.') return -1;
            if (*p < '0' || *p > '9') return -1;
            unsigned val = 0;
            int nd = 0;
            for (; *p >= '0' && *p <= '9'; p++, nd++) val = val * 10 + (unsigned)(*p - '0');
            if (nd > 3 || val > 255 || (nd > 1 && p[-nd] == '0')) return -1;
        }
        if (p != colon) return -1;
    }
    const char *q = colon + 1;
    unsigned pv = 0;
    int nd = 0;
    for (; *q >= '0' && *q <= '9'; q++, nd++) pv = pv * 10 + (unsigned)(*q - '0');
    if (nd == 0 || nd > 5 || *q || pv > 65535) return -1;
    if (host) {
        if (hlen >= hostcap) return -1;
        memcpy(host, s, hlen);
        host[hlen] = 0;
    }
    if (port) *port = (uint16_t)pv;
    return 0;
}

FX_INTERNAL const char *fx_role_name(fx_role_t role)
{
    switch (role) {
    case FX_ROLE_MASTER: return "master";
    case FX_ROLE_OWNER: return "owner";
    case FX_ROLE_EXTERNAL: return "external";
    default: return "none";
    }
}

FX_INTERNAL const char *fx_node_role_name(fx_node_role_t r)
{
    switch (r) {
    case FX_NODE_GPU_OWNER: return "gpu_owner";
    case FX_NODE_REMOTE_CACHE: return "remote_cache";
    default: return "?";
    }
}
