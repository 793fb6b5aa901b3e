/* oracle.c — test.value_oracle's check (owner_oracle.h). Reactor thread only. */
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "log.h"
#include "owner_oracle.h"
#include "segment.h"
#include "value_oracle.h"

#define ORACLE_LOGGED 50u /* mismatches logged; the rest only counted */

FX_INTERNAL void fx_oracle_check_slow(fx_owner_t *o, const char *step, const char *key, uint32_t klen, uint64_t off,
                                      uint64_t value_len, uint64_t put_ms, uint64_t put_ver, const char *more)
{
    size_t pl = strlen(o->cfg.test_value_oracle);
    if (klen < pl || memcmp(key, o->cfg.test_value_oracle, pl)) return; /* not one of the demo's keys */
    if (value_len < 8 || off > fx_segment_len(o->seg) || fx_segment_len(o->seg) - off < 8) return;
    uint64_t want = fx_value_word(XXH3_64bits(key, klen), 0), got;
    memcpy(&got, (const uint8_t *)fx_segment_base(o->seg) + off, 8);
    if (got == want) return;
    if (o->oracle_failures++ < ORACLE_LOGGED)
        FX_ERROR("value oracle: %s: key %.*s (value_len %llu, put_id %llu.%llu) at segment offset %llu holds another "
                 "value (first word %016llx, want %016llx%s)%s%s", step, (int)FX_MIN(klen, 200u), key,
                 (unsigned long long)value_len, (unsigned long long)put_ms, (unsigned long long)put_ver,
                 (unsigned long long)off, (unsigned long long)got, (unsigned long long)want,
                 got == 0 ? ": zeros" : "", more ? "; " : "", more ? more : "");
}

FX_INTERNAL void fx_oracle_copy_slow(fx_owner_t *o, const owner_entry_t *en, const char *src_id, uint64_t src_gen,
                                     uint64_t src_off)
{
    char more[160];
    snprintf(more, sizeof more, "copied from %s (generation %llu) at its offset %llu", src_id,
             (unsigned long long)src_gen, (unsigned long long)src_off);
    fx_oracle_check_slow(o, "a copy GET_DONE confirmed", en->key, en->klen, en->slot.offset, en->value_len, en->put_ms,
                         en->put_ver, more);
}
