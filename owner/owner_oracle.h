/* owner_oracle.h — test.value_oracle (test-only, the chaos harness): every value of a key
 * with that prefix is the demo's deterministic value of its key (common/value_oracle.h; the
 * demo's --key-prefix), so the owner checks the
 * first word of each value where it enters or leaves this owner's memory: a put's commit,
 * a copy from another owner, a push placed here, a local hit. A mismatch is logged (ERROR,
 * with the step, the key, the slot and the version) and counted (value_oracle_failures):
 * the first one names the step that put another key's bytes under a key. Off: one branch. */
#ifndef FX_OWNER_ORACLE_H
#define FX_OWNER_ORACLE_H

#include "owner_int.h"
#include "owner_store.h"

FX_INTERNAL void fx_oracle_check_slow(fx_owner_t *o, const char *step, const char *key, uint32_t klen, uint64_t off,
                                      uint64_t value_len, uint64_t put_ms, uint64_t put_ver, const char *more);

/* key's value of value_len bytes at segment offset off; more: what else to log (or NULL) */
static inline void fx_oracle_check(fx_owner_t *o, const char *step, const char *key, uint32_t klen, uint64_t off,
                                   uint64_t value_len, uint64_t put_ms, uint64_t put_ver, const char *more)
{
    if (o->cfg.test_value_oracle[0]) fx_oracle_check_slow(o, step, key, klen, off, value_len, put_ms, put_ver, more);
}

static inline void fx_oracle_entry(fx_owner_t *o, const char *step, const owner_entry_t *en, const char *more)
{
    if (o->cfg.test_value_oracle[0])
        fx_oracle_check_slow(o, step, en->key, en->klen, en->slot.offset, en->value_len, en->put_ms, en->put_ver, more);
}

/* a copy GET_DONE confirmed, with its source (src_id's segment at src_off) */
FX_INTERNAL void fx_oracle_copy_slow(fx_owner_t *o, const owner_entry_t *en, const char *src_id, uint64_t src_gen,
                                     uint64_t src_off);
static inline void fx_oracle_copy(fx_owner_t *o, const owner_entry_t *en, const char *src_id, uint64_t src_gen,
                                  uint64_t src_off)
{
    if (o->cfg.test_value_oracle[0]) fx_oracle_copy_slow(o, en, src_id, src_gen, src_off);
}

#endif
