/* cli_tenant.c — `fluxon --role=external --config F tenant set NAME [--quota BYTES]
 * [--guaranteed BYTES] [--admin-token TOKEN]`: a tenant's quota and guaranteed share on this
 * client's owner (which sends it on to the others through the master), at run time (issue 42, fluxon_tenant_set; docs/tenants.md). BYTES: an
 * integer with an optional suffix K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024) or B; 0 clears.
 * Public API only. Exit status: 0 applied, 1 refused or failed, 2 usage error. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_kv.h"

/* "512MiB" -> bytes; false on anything else (no sign, no overflow) */
/* The config's size units (fx_parse_size: KiB..TiB, and KB..TB in powers of 1000: a quota
 * written as in the owner's config means the same here), plus K, M, G and T for KiB..TiB. */
static bool ten_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *sfx;
        uint64_t mul;
    } units[] = {{"", 1},           {"B", 1},           {"K", 1ull << 10},  {"KiB", 1ull << 10},
                 {"M", 1ull << 20}, {"MiB", 1ull << 20}, {"G", 1ull << 30},  {"GiB", 1ull << 30},
                 {"T", 1ull << 40}, {"TiB", 1ull << 40}, {"KB", 1000ull},    {"MB", 1000000ull},
                 {"GB", 1000000000ull}, {"TB", 1000000000000ull}};
    if (!s || *s < '0' || *s > '9') return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end) return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].sfx)) {
            if (v > UINT64_MAX / units[i].mul) return false;
            *out = (uint64_t)v * units[i].mul;
            return true;
        }
    return false;
}

static int ten_usage(const char *why)
{
    fprintf(stderr,
            "fluxon: tenant: %s\nusage: tenant set NAME [--quota BYTES] [--guaranteed BYTES] [--admin-token TOKEN]\n"
            "  (at least one of --quota, --guaranteed; BYTES like 512MiB, 0 clears; docs/tenants.md)\n",
            why);
    return 2;
}

int fx_cli_tenant(fluxon_client *c, int argc, char **argv)
{
    if (argc < 1) return ten_usage("needs a sub-command (set)");
    if (strcmp(argv[0], "set")) return ten_usage("unknown sub-command (set is the one there is)");
    if (argc < 2) return ten_usage("set needs the tenant's NAME");
    const char *name = argv[1], *token = NULL;
    uint64_t quota = 0, gtd = 0;
    uint32_t flags = 0;
    if (name[0] == '-') return ten_usage("NAME comes first");
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quota") || !strcmp(a, "--guaranteed")) {
            bool q = !strcmp(a, "--quota");
            if (!ten_size(v, q ? &quota : &gtd)) {
                fprintf(stderr, "fluxon: tenant set: %s %s is not a size (an integer, optional K/KiB/M/MiB/G/GiB/T/TiB, or KB/MB/GB/TB "
                        "in powers of 1000 as in the config)\n",
                        a, v ? v : "(missing)");
                return 2;
            }
            flags |= q ? FLUXON_TENANT_SET_QUOTA : FLUXON_TENANT_SET_GUARANTEED;
            i++;
        } else if (!strcmp(a, "--admin-token")) {
            if (!v) {
                fprintf(stderr, "fluxon: tenant set: --admin-token needs a value (the owner's admin_token)\n");
                return 2;
            }
            token = v;
            i++;
        } else {
            fprintf(stderr, "fluxon: tenant set: unknown argument %s\n", a);
            return 2;
        }
    }
    if (!flags) return ten_usage("give --quota, --guaranteed or both");
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    int rc = fluxon_tenant_set(c, name, quota, gtd, flags, token);
    if (rc != FLUXON_OK) {
        fprintf(stderr, "fluxon: tenant set %s: %s (the owner's reason is logged above)\n", name,
                fluxon_status_string(rc));
        return rc == FLUXON_ERR_INVALID_ARGUMENT ? 2 : 1;
    }
    printf("tenant %s:", name);
    if (flags & FLUXON_TENANT_SET_QUOTA) printf(" quota_bytes %llu", (unsigned long long)quota);
    if (flags & FLUXON_TENANT_SET_GUARANTEED) printf(" guaranteed_bytes %llu", (unsigned long long)gtd);
    printf(" (applied on this owner, sent on to every owner through the master; fluxon stats shows them)\n");
    return 0;
}
