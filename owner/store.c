/* store.c — the bottom of the owner's KV state: the slot pool, entries, the local index
 * of visible values, by_offset (identity), holders, retire and invalidation. Raises
 * retired / committed / unpinned through the hooks evict.c registers; calls nothing
 * above it. */
#include <stddef.h>
#include <stdio.h>

#include "hmap.h"
#include "log.h"
#include "owner_oracle.h"
#include "owner_store.h"
#include "u64map.h"

typedef struct ostore {
    fx_slot_pool_t *pool;
    fx_hmap_t *index;      /* key -> owner_entry_t (the visible version); intrusive: the entry's key */
    fx_u64map_t by_offset; /* segment offset (never 0: the header page) -> owner_entry_t, every live entry */
    fx_u64map_t holders;   /* id -> owner_holder_t */
    uint64_t next_id, invalidations, malformed;
    uint64_t slot_collisions; /* entries made at an offset another live entry held (never expected) */
    fx_ostore_hooks_t hooks;
    fx_ostore_disk_inv_fn disk_inv; /* issue 39: INVALIDATEs of disk offsets */
} ostore_t;

static void ostore_nop_entry(fx_owner_t *o, owner_entry_t *en) {}
static void ostore_nop(fx_owner_t *o) {}

FX_INTERNAL bool fx_ostore_key_ok(fx_str_t k)
{
    return k.len > 0 && k.len <= FLUXON_MAX_KEY_BYTES && memchr(k.p, 0, k.len) == NULL;
}

FX_INTERNAL int fx_ostore_init(fx_owner_t *o, uint64_t max_grants)
{
    ostore_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    s->hooks = (fx_ostore_hooks_t){ostore_nop_entry, ostore_nop_entry, ostore_nop};
    o->store = s;
    fx_slot_pool_config_t pc;
    fx_slot_pool_config_init(&pc);
    pc.grant_bytes = o->cfg.grant_bytes;
    pc.claim_timeout_ms = o->cfg.claim_timeout_ms;
    if (pc.claim_timeout_ms <= pc.soft_wait_ms) pc.claim_timeout_ms = pc.soft_wait_ms + 1;
    pc.max_grants = 0; /* the pool holds sub-grants carved from at most max_grants master grants (claims.c) */
    int rc = fx_slot_pool_create(&pc, &s->pool);
    if (rc != FLUXON_OK) return rc;
    /* the index stores the entries themselves (each holds its key): no allocation per key */
    if (fx_hmap_create_intrusive(1024, offsetof(owner_entry_t, key), offsetof(owner_entry_t, klen), &s->index) ||
        fx_u64map_reserve(&s->by_offset, 1024) ||
        fx_u64map_reserve(&s->holders, 1024))
        return FLUXON_ERR_NOMEM;
    return FLUXON_OK;
}

FX_INTERNAL void fx_ostore_set_hooks(fx_owner_t *o, const fx_ostore_hooks_t *hooks) { o->store->hooks = *hooks; }
FX_INTERNAL void fx_ostore_set_disk_hook(fx_owner_t *o, fx_ostore_disk_inv_fn fn) { o->store->disk_inv = fn; }
FX_INTERNAL void fx_ostore_kick(fx_owner_t *o)
{
    if (o->store && o->store->hooks.unpinned) o->store->hooks.unpinned(o);
}

static void ostore_entry_free(void *v)
{
    fx_free(v); /* the key lives in the same allocation */
}

/* Shutdown: the bookkeeping goes (the process or node is going away; the segment with it). */
FX_INTERNAL void fx_ostore_fini(fx_owner_t *o)
{
    ostore_t *s = o->store;
    if (!s) return;
    void *v;
    size_t it = 0;
    while (fx_u64map_next(&s->by_offset, &it, NULL, &v)) s->hooks.retired(o, v);
    for (it = 0; fx_u64map_next(&s->by_offset, &it, NULL, &v);) ostore_entry_free(v);
    for (it = 0; fx_u64map_next(&s->holders, &it, NULL, &v);) fx_free(v);
    fx_hmap_destroy(s->index);
    fx_u64map_free(&s->by_offset);
    fx_u64map_free(&s->holders);
    fx_slot_pool_destroy(s->pool);
    fx_free(s);
    o->store = NULL;
}

FX_INTERNAL fx_slot_pool_t *fx_ostore_pool(fx_owner_t *o) { return o->store->pool; }
FX_INTERNAL uint64_t fx_ostore_next_id(fx_owner_t *o) { return ++o->store->next_id; }

/* ---- entries ---- */
FX_INTERNAL owner_entry_t *fx_ostore_entry_new(fx_owner_t *o, const char *key, uint32_t klen, uint64_t khash,
                                               const fx_slot_ref_t *slot, uint64_t value_len)
{
    ostore_t *s = o->store;
    owner_entry_t *en = fx_calloc(1, sizeof *en + (size_t)klen + 1); /* the key after it: one allocation */
    if (!en) return NULL;
    en->key = (char *)(en + 1);
    memcpy(en->key, key, klen);
    en->klen = klen;
    en->khash = khash ? khash : fx_hmap_hash(key, klen);
    en->slot = *slot;
    en->value_len = value_len;
    en->state = OE_PENDING;
    void *was = NULL;
    if (fx_u64map_put(&s->by_offset, slot->offset, en, &was) != FLUXON_OK) {
        ostore_entry_free(en);
        return NULL;
    }
    const owner_entry_t *old = was;
    if (old && old != en) { /* D1: a slot handed out while an entry still lives in it */
        s->slot_collisions++;
        FX_ERROR("slot at %llu (use %llu) given to %.*s while %.*s (use %llu, state %u%s%s%s, put_id %llu.%llu) still "
                 "lives there", (unsigned long long)slot->offset, (unsigned long long)slot->use_seq,
                 (int)FX_MIN(klen, 80u), key, (int)FX_MIN(old->klen, 80u), old->key,
                 (unsigned long long)old->slot.use_seq, old->state, old->retired ? ", retired" : "",
                 old->evicting ? ", evicting" : "", old->indexed ? ", indexed" : "", (unsigned long long)old->put_ms,
                 (unsigned long long)old->put_ver);
    }
    return en;
}

FX_INTERNAL owner_entry_t *fx_ostore_lookup(fx_owner_t *o, const void *key, size_t klen)
{
    return fx_hmap_get(o->store->index, key, klen);
}

FX_INTERNAL owner_entry_t *fx_ostore_lookup_h(fx_owner_t *o, const void *key, size_t klen, uint64_t khash)
{
    return fx_hmap_get_h(o->store->index, key, klen, khash);
}

FX_INTERNAL void fx_ostore_prefetch_key(fx_owner_t *o, uint64_t khash) { fx_hmap_prefetch(o->store->index, khash); }

FX_INTERNAL void fx_ostore_prefetch_offset(fx_owner_t *o, uint64_t offset)
{
    fx_u64map_prefetch(&o->store->by_offset, offset);
}

FX_INTERNAL owner_entry_t *fx_ostore_at(fx_owner_t *o, uint64_t offset)
{
    return fx_u64map_get(&o->store->by_offset, offset);
}

FX_INTERNAL owner_entry_t *fx_ostore_find(fx_owner_t *o, const fx_slot_ref_t *slot)
{
    owner_entry_t *en = fx_ostore_at(o, slot->offset);
    return en && en->slot.use_seq == slot->use_seq ? en : NULL;
}

FX_INTERNAL void fx_ostore_index(fx_owner_t *o, owner_entry_t *en)
{
    void *old = NULL;
    if (fx_hmap_put_h(o->store->index, en->key, en->klen, en->khash, en, &old) != FLUXON_OK) return;
    if (old && old != en) ((owner_entry_t *)old)->indexed = false;
    en->indexed = true;
    /* local readers see it from now on: a put's value (its writer wrote it), a copy's */
    fx_oracle_entry(o, en->remote ? "indexed, a copy from another owner" : "indexed, a put or a disk read-back", en, NULL);
}

FX_INTERNAL void fx_ostore_hide(fx_owner_t *o, owner_entry_t *en)
{
    if (!en->indexed) return;
    fx_hmap_del_h(o->store->index, en->key, en->klen, en->khash, NULL);
    en->indexed = false;
}

FX_INTERNAL int fx_ostore_commit(fx_owner_t *o, owner_entry_t *en, uint64_t put_ms, uint64_t put_ver)
{
    en->put_ms = put_ms;
    en->put_ver = put_ver;
    int rc = fx_slot_pool_mark_committed(o->store->pool, &en->slot);
    if (rc != FLUXON_OK) return rc;
    en->state = OE_COMMITTED;
    o->store->hooks.committed(o, en);
    return FLUXON_OK;
}

FX_INTERNAL void fx_ostore_retire(fx_owner_t *o, owner_entry_t *en)
{
    ostore_t *s = o->store;
    if (en->retired) return;
    en->retired = true;
    s->hooks.retired(o, en); /* out of the hot tier and its group */
    fx_ostore_hide(o, en);
    fx_u64map_del(&s->by_offset, en->slot.offset, NULL);
    /* Reuse at once is safe: the master removed this replica before telling us, and a
     * fetch that copied from it is only served once the master confirms the replica
     * still existed after the copy (GET_DONE, D1). */
    int rc = en->state == OE_COMMITTED ? fx_slot_pool_route_dead(s->pool, &en->slot)
                                       : fx_slot_pool_release_prepared(s->pool, &en->slot);
    if (rc != FLUXON_OK) FX_ERROR("retiring %s: slot release failed: %s", en->key, fluxon_status_string(rc));
    ostore_entry_free(en);
}

FX_INTERNAL size_t fx_ostore_forget_all(fx_owner_t *o)
{
    ostore_t *s = o->store;
    size_t it = 0, n = 0, cap = 64;
    owner_entry_t **v = fx_malloc(cap * sizeof *v), *en;
    uint64_t off;
    while (v && fx_u64map_next(&s->by_offset, &it, &off, (void **)&en)) { /* collected: retiring changes the map */
        if (en->state != OE_COMMITTED) continue;
        if (n == cap) {
            owner_entry_t **nv = fx_realloc(v, 2 * cap * sizeof *v);
            if (!nv) break;
            v = nv;
            cap *= 2;
        }
        v[n++] = en;
    }
    if (!v) FX_ERROR("out of memory forgetting the values held here: they stay (some may be stale)");
    for (size_t i = 0; i < n; i++) fx_ostore_retire(o, v[i]);
    fx_free(v);
    FX_WARN("dropped %zu values: the master forgot this owner", n);
    return n;
}

FX_INTERNAL int fx_ostore_invalidate(fx_owner_t *o, const uint8_t *body, size_t len, fx_arena_t *arena)
{
    int tombs = 0;
    bool tomb_failed = false;
    ostore_t *s = o->store;
    fx_body_invalidate_t b;
    memset(&b, 0, sizeof b);
    int rc = fx_body_invalidate_decode(body, len, &b, arena);
    if (rc == FLUXON_OK && fx_owner_fault(o, FX_FAULT_TRUNCATE, "INVALIDATE")) /* test-only */
        b.put_ms = b.put_ver = (fx_u64v_t){NULL, 0};
    uint32_t n = b.keys.n;
    if (rc != FLUXON_OK || b.offsets.n != n || b.put_ms.n != n || b.put_ver.n != n) {
        s->malformed++;
        FX_ERROR("malformed INVALIDATE from the master (%u keys, %u offsets, %u put_ms, %u put_ver): ignored", n,
                 b.offsets.n, b.put_ms.n, b.put_ver.n);
        return 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (b.offsets.v[i] >> 63) { /* a disk offset (FX_DISK_OFF_BIT): the record goes */
            s->invalidations++;
            int drc = s->disk_inv ? s->disk_inv(o, b.offsets.v[i], b.keys.v[i].p, b.keys.v[i].len, b.put_ms.v[i],
                                                  b.put_ver.v[i])
                                    : FLUXON_ERR_NOT_FOUND;
            tombs += drc == FLUXON_OK;
            tomb_failed |= drc != FLUXON_OK && drc != FLUXON_ERR_NOT_FOUND;
            continue;
        }
        owner_entry_t *en = fx_ostore_at(o, b.offsets.v[i]);
        if (!en || en->klen != b.keys.v[i].len || memcmp(en->key, b.keys.v[i].p, en->klen)) continue;
        if (en->state == OE_COMMITTED && (en->put_ms != b.put_ms.v[i] || en->put_ver != b.put_ver.v[i]))
            continue; /* a different version lives at that offset now */
        s->invalidations++;
        if (en->state == OE_PENDING) { /* its publish or fetch still names it: mark, never free */
            en->invalidated = true;
            fx_ostore_hide(o, en);
            continue;
        }
        fx_ostore_retire(o, en);
    }
    return tomb_failed ? -1 : tombs;
}

/* ---- holders ---- */
FX_INTERNAL owner_holder_t *fx_ostore_holder_new(fx_owner_t *o, owner_ext_t *e, const fx_slot_ref_t *slot)
{
    ostore_t *s = o->store;
    if (fx_slot_pool_holder_ref(s->pool, slot) != FLUXON_OK) return NULL;
    owner_holder_t *h = fx_calloc(1, sizeof *h);
    if (!h) goto err_unref;
    h->id = fx_ostore_next_id(o);
    h->slot = *slot;
    if (fx_u64map_put(&s->holders, h->id, h, NULL) != FLUXON_OK) goto err_free;
    h->ext = e;
    h->since_ms = fx_now_ms();
    if (e) {
        h->next = e->holders;
        if (e->holders) e->holders->prev = h;
        else e->holders_tail = h;
        e->holders = h;
        e->pinned_bytes += slot->slot_size;
    }
    return h;
err_free:
    fx_free(h);
err_unref:
    fx_slot_pool_holder_unref(s->pool, slot);
    return NULL;
}

FX_INTERNAL void fx_ostore_holder_release(fx_owner_t *o, owner_holder_t *h)
{
    ostore_t *s = o->store;
    fx_u64map_del(&s->holders, h->id, NULL);
    if (h->ext) {
        if (h->prev) h->prev->next = h->next;
        else h->ext->holders = h->next;
        if (h->next) h->next->prev = h->prev;
        else h->ext->holders_tail = h->prev;
        h->ext->pinned_bytes -= h->slot.slot_size;
    }
    int rc = fx_slot_pool_holder_unref(s->pool, &h->slot);
    if (rc != FLUXON_OK) FX_ERROR("holder %llu: unref failed: %s", (unsigned long long)h->id, fluxon_status_string(rc));
    fx_free(h);
    s->hooks.unpinned(o); /* a slot may have freed, or a pinned victim became evictable */
}

FX_INTERNAL int fx_ostore_holder_release_id(fx_owner_t *o, owner_ext_t *e, uint64_t id)
{
    owner_holder_t *h = fx_u64map_get(&o->store->holders, id);
    if (!h || h->ext != e) return FLUXON_ERR_NOT_FOUND;
    fx_ostore_holder_release(o, h);
    return FLUXON_OK;
}

FX_INTERNAL void fx_ostore_ext_closed(fx_owner_t *o, owner_ext_t *e)
{
    while (e->holders) fx_ostore_holder_release(o, e->holders);
}

/* ---- stats ---- */
FX_INTERNAL void fx_ostore_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    ostore_t *s = o->store;
    fx_slot_pool_stats_t st;
    fx_slot_pool_stats(s->pool, &st);
    m->index_keys = fx_hmap_count(s->index);
    m->holders = fx_u64map_count(&s->holders);
    m->invalidations = s->invalidations;
    m->invalidations_malformed = s->malformed;
    m->slot_collisions = s->slot_collisions;
    m->slots_free = st.free;
    m->slots_prepared = st.prepared;
    m->slots_pending = st.pending;
    m->slots_committed = st.committed;
    m->slots_draining = st.draining;
    m->slot_holder_refs = st.holder_refs;
    m->grants = st.grants;
    m->granted_bytes = st.granted_bytes;
    m->used_bytes = st.used_bytes;
    uint64_t payload = fx_segment_len(o->seg) - fx_segment_payload_offset(o->seg); /* the header page is no room */
    m->free_bytes = payload > st.used_bytes ? payload - st.used_bytes : 0;
}
