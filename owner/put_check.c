/* put_check.c — a put_start request checked before anything is reserved (owner_put.h):
 * keys, value length against the grant, atomic groups, a value or group larger than the
 * hot tier (R3), the replica-task mask. A bad request is answered here, naming the value,
 * the limit and the config field. Reactor thread only. */
#include "groups.h"
#include "owner_evict.h"
#include "owner_put.h"

/* R3: a value (or an atomic group, evicted whole) larger than the hot tier would be
 * evicted as soon as it is committed: refused, naming the hot tier. */
static bool oput_check_hot(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const fx_body_put_start_t *b,
                           uint64_t slot_size)
{
    uint64_t hot = fx_oev_hot_capacity(o), most = 1;
    size_t g_most = 0;
    fx_group_iter_t it = fx_group_iter(b->group_lens.v, b->group_lens.n, b->keys.n);
    while (b->group_lens.n && fx_group_next(&it))
        if (it.len > most) {
            most = it.len;
            g_most = it.g;
        }
    if (!hot || slot_size <= hot / most) return true;
    if (most == 1)
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                            "put_start: value_len %llu (a %llu-byte slot) is larger than owner %s's hot tier of %llu "
                            "bytes (hot_capacity_bytes, else hot_capacity_ratio x the payload capacity): it would "
                            "be evicted as soon as it is stored",
                            (unsigned long long)b->value_len, (unsigned long long)slot_size, o->cfg.node_id,
                            (unsigned long long)hot);
    else
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                            "put_start: atomic group %zu holds %llu values of a %llu-byte slot (%llu bytes), more "
                            "than owner %s's hot tier of %llu bytes (hot_capacity_bytes, else hot_capacity_ratio x "
                            "the payload capacity): it would be evicted whole as soon as it is stored",
                            g_most, (unsigned long long)most, (unsigned long long)slot_size,
                            (unsigned long long)(most * slot_size), o->cfg.node_id, (unsigned long long)hot);
    return false;
}

FX_INTERNAL bool fx_oput_check(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const fx_body_put_start_t *b)
{
    size_t n = b->keys.n;
    char why[160];
    if (n == 0) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "put_start: n_keys is 0");
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (!fx_ostore_key_ok(b->keys.v[i])) {
            fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                                "put_start: key %zu is empty, longer than %d bytes or contains NUL", i,
                                FLUXON_MAX_KEY_BYTES);
            return false;
        }
    uint64_t slot_size = fx_slot_size_for(b->value_len);
    if (b->value_len == 0 || slot_size == 0 || slot_size > o->cfg.grant_bytes) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                            "put_start: value_len %llu must be in 1..%llu (reserve.grant_bytes)",
                            (unsigned long long)b->value_len, (unsigned long long)o->cfg.grant_bytes);
        return false;
    }
    if (!fx_groups_check(b->group_lens.v, b->group_lens.n, n, why, sizeof why)) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "put_start: %s", why);
        return false;
    }
    if (!oput_check_hot(o, e, h, b, slot_size)) return false;
    if (b->pin_ttl_ms > FLUXON_PIN_TTL_MAX_MS) { /* issue 42 */
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "put_start: pin_ttl_ms %u is over %u (FLUXON_PIN_TTL_MAX_MS)",
                            b->pin_ttl_ms, FLUXON_PIN_TTL_MAX_MS);
        return false;
    }
    if (b->replica_mask.len && b->replica_mask.len != n) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                            "put_start: make_replica_task_mask has %u entries, n_keys is %zu", b->replica_mask.len, n);
        return false;
    }
    fx_group_iter_t it = fx_group_iter(b->group_lens.v, b->group_lens.n, n);
    while (b->replica_mask.len && b->group_lens.n && fx_group_next(&it))
        for (size_t i = it.start + 1; i < it.start + it.len; i++)
            if ((b->replica_mask.p[i] != 0) != (b->replica_mask.p[it.start] != 0)) {
                fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                                    "put_start: make_replica_task_mask differs inside atomic group %zu", it.g);
                return false;
            }
    char qerr[512]; /* issue 42 quotas: last, so that bad input moves no counter */
    if (fx_oevq_admit(o, e->tenant, n * slot_size, qerr, sizeof qerr) != FLUXON_OK) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_NO_SPACE, "%s", qerr);
        return false;
    }
    return true;
}
