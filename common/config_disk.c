/* config_disk.c — the owner's "disk" section (issue 39): the disk tier's directory, its
 * capacity, its segment size, O_DIRECT and which values it admits. */
#include <string.h>

#include "config_int.h"

static const struct cfg_field cfg_disk_fields[] = {{"path", 1u << FX_ROLE_OWNER},
                                                   {"capacity_bytes", 1u << FX_ROLE_OWNER},
                                                   {"segment_bytes", 1u << FX_ROLE_OWNER},
                                                   {"direct_io", 1u << FX_ROLE_OWNER},
                                                   {"admission", 1u << FX_ROLE_OWNER}};

#define CFG_DISK_SEGMENT_MIN (1ull << 20)
#define CFG_DISK_SEGMENT_MAX (1ull << 40)

FX_INTERNAL int fx_cfg_parse_disk(struct cfg_ctx *c, const cJSON *obj, fx_config_t *cfg)
{
    int rc = fx_cfg_want_object(c, "disk", obj);
    if (rc) return rc;
    uint64_t seen = 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = fx_cfg_match(c, it, "disk.", cfg_disk_fields, (int)FX_ARRAY_LEN(cfg_disk_fields), &seen);
        if (k < 0) return FLUXON_ERR_CONFIG;
        switch (k) {
        case 0:
            if ((rc = fx_cfg_want_string(c, "disk.path", it))) return rc;
            if (!it->valuestring[0]) return fx_cfg_bad(c, "disk.path", it, "must not be empty");
            if (it->valuestring[0] != '/')
                return fx_cfg_bad(c, "disk.path", it, "must be an absolute path (the owner's working directory is no anchor)");
            if (strlen(it->valuestring) >= sizeof cfg->disk_path)
                return fx_cfg_bad(c, "disk.path", it, "is longer than %zu bytes", sizeof cfg->disk_path - 1);
            memcpy(cfg->disk_path, it->valuestring, strlen(it->valuestring) + 1);
            break;
        case 1: rc = fx_cfg_get_pages(c, "disk.capacity_bytes", it, &cfg->disk_capacity_bytes); break;
        case 2:
            rc = fx_cfg_get_pages(c, "disk.segment_bytes", it, &cfg->disk_segment_bytes);
            if (!rc && (cfg->disk_segment_bytes < CFG_DISK_SEGMENT_MIN || cfg->disk_segment_bytes > CFG_DISK_SEGMENT_MAX))
                return fx_cfg_bad(c, "disk.segment_bytes", it, "must be 1 MiB .. 1 TiB");
            break;
        case 3: {
            static const char *const modes[] = {"auto", "on", "off"}; /* FX_DISK_DIRECT_* */
            rc = fx_cfg_get_choice(c, "disk.direct_io", it, modes, 3, &cfg->disk_direct_io);
            break;
        }
        default: {
            static const char *const adm[] = {"all", "second_touch"}; /* FX_WB_ADMIT_* */
            rc = fx_cfg_get_choice(c, "disk.admission", it, adm, 2, &cfg->disk_admission);
            break;
        }
        }
        if (rc) return rc;
    }
    if (!(seen & 1u)) return fx_cfg_fail(c, "disk.path", "missing (required when \"disk\" is given)");
    if (!(seen & 2u)) return fx_cfg_fail(c, "disk.capacity_bytes", "missing (required when \"disk\" is given)");
    uint64_t seg = cfg->disk_segment_bytes ? cfg->disk_segment_bytes : 256ull << 20;
    if (cfg->disk_capacity_bytes < 2 * seg)
        return fx_cfg_fail(c, "disk.capacity_bytes", "is %llu bytes: must hold at least 2 segments (2 x disk.segment_bytes "
                           "= %llu)", (unsigned long long)cfg->disk_capacity_bytes, (unsigned long long)(2 * seg));
    return 0;
}
