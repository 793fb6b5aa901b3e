/* stats.c — the owner's OWNER_STATS document: identity, then each module's counters
 * (ext, master_link, store, claims, put, place, get, fetch, evict), then "slot_pool". */
#include "log.h"
#include "owner_claims.h"
#include "owner_evict.h"
#include "owner_ext.h"
#include "owner_fetch.h"
#include "owner_get.h"
#include "owner_link.h"
#include "owner_place.h"
#include "owner_put.h"
#include "owner_republish.h"
#include "owner_stats.h"

FX_INTERNAL size_t fx_ostats_json(fx_owner_t *o, char *buf, size_t cap)
{
    fx_jbuf_t j = fx_jbuf(buf, cap);
    fx_jbuf_printf(&j, "{\"node_id\":");
    fx_jbuf_str(&j, o->cfg.node_id, strlen(o->cfg.node_id));
    fx_jbuf_printf(&j, ",\"generation\":%llu,\"node_role\":\"%s\",\"segment_bytes\":%llu,",
                   (unsigned long long)o->generation, fx_node_role_name(o->cfg.node_role),
                   (unsigned long long)fx_segment_len(o->seg));
    void (*parts[])(fx_owner_t *, fx_jbuf_t *) = {fx_oext_stats_json,   fx_olink_stats_json, fx_ostore_stats_json,
                                                  fx_oclaims_stats_json, fx_oput_stats_json,  fx_oplace_stats_json,
                                                  fx_oget_stats_json,    fx_ofetch_stats_json, fx_oev_stats_json,
                                                  fx_orepub_stats_json};
    for (size_t i = 0; i < FX_ARRAY_LEN(parts); i++) {
        if (i) fx_jbuf_printf(&j, ",");
        parts[i](o, &j);
    }
    /* the slot pool per state and grant, when it fits (a huge pool is left out) */
    static const char key[] = ",\"slot_pool\":";
    size_t pl = 0, kl = sizeof key - 1;
    if (!j.overflow && j.len + kl + 2 < cap &&
        fx_slot_pool_stats_json(fx_ostore_pool(o), buf + j.len + kl, cap - j.len - kl - 2, &pl) == FLUXON_OK) {
        memcpy(buf + j.len, key, kl);
        j.len += kl + pl;
    }
    fx_jbuf_printf(&j, "}");
    if (j.overflow) {
        FX_ERROR("owner stats do not fit in %zu bytes", cap);
        return 0;
    }
    return j.len;
}
