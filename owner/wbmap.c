/* wbmap.c — this owner's record of the copies it wrote back (issue 38, owner_wbmap.h).
 *
 * A value this owner evicted after writing it back lives on in a range of a target's segment
 * (a CPU owner). Getting it back used to cost a LOOKUP round trip to the master before the
 * copy (about 45 us of the 100 us a remote hit took in the trace replay on the 2-vCPU VM). The
 * owner knows where it put the copy (APPEND_START's answer, confirmed by APPEND_DONE); what it
 * cannot see is the master dropping that copy and handing the range to another value. Two
 * facts of the master make the record safe to read without asking:
 *  - reuse.c: a range the master frees is handed out again only range_reuse_delay_ms (D)
 *    later;
 *  - forget.c: the master tells the appender of every copy of its it drops (FORGET, one-way,
 *    on this owner's master link) before it handles any later frame.
 * Let S be when this owner registered the latest call to the master whose answer it has seen
 * (fx_rpc_answered_ns: every frame the master sent before that answer has been seen too, and
 * the master handled that call after S). A copy dropped before the master handled that call
 * was FORGOTTEN here before the answer; one dropped later, at T >= S, has its range handed out
 * again at T + D >= S + D at the earliest. So a read of a recorded copy that ENDS before
 * S + D (less 1 ms for clocks and scheduling) holds the recorded version's bytes (fetch.c
 * checks the end; a read that ends later is thrown away and the key looked up as before). The
 * record is of one master link: a lost link (FORGETs lost with it) or another master clears
 * it. A target's process may have changed under its record: fetch.c reads only from a target
 * connected at the recorded generation (a dead process's mapped segment keeps its bytes).
 * As for a value held here, a newer version put through another owner drops the copy with a
 * message (FORGET as INVALIDATE): a get just after that put can still read the older one.
 * Reactor thread only. */
#include <stddef.h>
#include <stdio.h>

#include "hmap.h"
#include "log.h"
#include "owner_elsewhere.h"
#include "owner_wbmap.h"
#include "u64map.h"

#define OWBM_TARGETS 16u
#define OWBM_MAX 1048576u /* records (a copy not recorded is read back through a LOOKUP) */

typedef struct owbm_tgt {
    char node_id[FX_ID_MAX];
    uint64_t generation, base;
    uint8_t *addr, *rkey;
    uint32_t addr_len, rkey_len, reuse_ms;
    uint8_t flags;
    bool used;
} owbm_tgt_t;

typedef struct owbm_ent {
    char *key; /* kbuf: the intrusive map's key */
    uint32_t klen;
    uint32_t tgt : 31;
    uint32_t read : 1; /* read back once already (fx_owbm_note_read): the next read promotes */
    uint64_t h; /* the key's fx_hmap_hash: a FORGET drops the entry without hashing it again */
    uint64_t offset, value_len, put_ms, put_ver;
    char kbuf[];
} owbm_ent_t;

typedef struct owbm {
    fx_hmap_t *by_key;  /* key -> owbm_ent_t (intrusive) */
    fx_u64map_t by_off; /* (target + 1) << 48 | offset -> owbm_ent_t */
    owbm_tgt_t t[OWBM_TARGETS];
    uint64_t added, forgotten, cleared, full, forget_msgs;
} owbm_t;

static uint64_t owbm_off_key(uint32_t tgt, uint64_t offset) { return (uint64_t)(tgt + 1) << 48 | offset; }

FX_INTERNAL int fx_owbm_init(fx_owner_t *o)
{
    owbm_t *s = fx_calloc(1, sizeof *s);
    if (!s || fx_hmap_create_intrusive(0, offsetof(owbm_ent_t, key), offsetof(owbm_ent_t, klen), &s->by_key) !=
                  FLUXON_OK) {
        fx_free(s);
        return FLUXON_ERR_NOMEM;
    }
    o->wbm = s;
    return FLUXON_OK;
}

static void owbm_drop(owbm_t *s, owbm_ent_t *e)
{
    fx_hmap_del_obj(s->by_key, e->h, e);
    fx_u64map_del(&s->by_off, owbm_off_key(e->tgt, e->offset), NULL);
    fx_free(e);
}

/* Drops every record (tgt < 0), or those of target tgt. */
static void owbm_drop_all(owbm_t *s, int tgt)
{
    size_t it = 0;
    uint64_t k;
    void *v;
    size_t n = 0;
    owbm_ent_t **all = fx_malloc((fx_u64map_count(&s->by_off) + 1) * sizeof *all);
    while (all && fx_u64map_next(&s->by_off, &it, &k, &v))
        if (tgt < 0 || ((owbm_ent_t *)v)->tgt == (uint32_t)tgt) all[n++] = v;
    if (!all) { /* no memory to list them: the maps go whole */
        fx_hmap_clear(s->by_key, fx_free);
        fx_u64map_free(&s->by_off);
        return;
    }
    for (size_t i = 0; i < n; i++) owbm_drop(s, all[i]);
    fx_free(all);
}

FX_INTERNAL void fx_owbm_fini(fx_owner_t *o)
{
    owbm_t *s = o->wbm;
    if (!s) return;
    fx_hmap_clear(s->by_key, fx_free);
    fx_hmap_destroy(s->by_key);
    fx_u64map_free(&s->by_off);
    for (uint32_t i = 0; i < OWBM_TARGETS; i++) {
        fx_free(s->t[i].addr);
        fx_free(s->t[i].rkey);
    }
    fx_free(s);
    o->wbm = NULL;
}

FX_INTERNAL int fx_owbm_target(fx_owner_t *o, const fx_body_put_place_ack_t *a)
{
    owbm_t *s = o->wbm;
    if (!s || !a->reuse_ms || !a->target_node_id.len || a->target_node_id.len >= FX_ID_MAX) return -1;
    int free_at = -1;
    for (uint32_t i = 0; i < OWBM_TARGETS; i++) {
        owbm_tgt_t *t = &s->t[i];
        if (!t->used) {
            if (free_at < 0) free_at = (int)i;
            continue;
        }
        if (!fx_str_eq(a->target_node_id, t->node_id)) continue;
        if (t->generation == a->target_generation) {
            t->reuse_ms = a->reuse_ms;
            t->flags = a->target_flags;
            return (int)i;
        }
        owbm_drop_all(s, (int)i); /* a new process: the old one's copies went with it */
        free_at = (int)i;
        break;
    }
    if (free_at < 0) return -1;
    owbm_tgt_t *t = &s->t[free_at];
    fx_free(t->addr);
    fx_free(t->rkey);
    *t = (owbm_tgt_t){.generation = a->target_generation, .base = a->target_base, .reuse_ms = a->reuse_ms,
                      .flags = a->target_flags};
    t->addr = fx_malloc(a->target_address.len + 1);
    t->rkey = fx_malloc(a->target_rkey.len + 1);
    if (!t->addr || !t->rkey) {
        fx_free(t->addr);
        fx_free(t->rkey);
        t->addr = t->rkey = NULL;
        return -1;
    }
    memcpy(t->addr, a->target_address.p, a->target_address.len);
    memcpy(t->rkey, a->target_rkey.p, a->target_rkey.len);
    t->addr_len = a->target_address.len;
    t->rkey_len = a->target_rkey.len;
    fx_str_copy(a->target_node_id, t->node_id, sizeof t->node_id);
    t->used = true;
    return free_at;
}

FX_INTERNAL void fx_owbm_prefetch(fx_owner_t *o, int tgt, const char *key, uint32_t klen, uint64_t offset)
{
    owbm_t *s = o->wbm;
    if (!s || tgt < 0 || (uint32_t)tgt >= OWBM_TARGETS) return;
    uint64_t h = fx_hmap_hash(key, klen);
    fx_hmap_prefetch(s->by_key, h);
    fx_u64map_prefetch(&s->by_off, owbm_off_key((uint32_t)tgt, offset));
    fx_oelse_prefetch(o, h); /* fx_oelse_recorded's slot */
}

FX_INTERNAL void fx_owbm_add(fx_owner_t *o, int tgt, const char *key, uint32_t klen, uint64_t offset,
                             uint64_t value_len, uint64_t put_ms, uint64_t put_ver)
{
    owbm_t *s = o->wbm;
    if (!s || tgt < 0 || (uint32_t)tgt >= OWBM_TARGETS || !s->t[tgt].used || offset >> 48) return;
    uint64_t h = fx_hmap_hash(key, klen);
    owbm_ent_t *old = fx_hmap_get_h(s->by_key, key, klen, h);
    if (old) owbm_drop(s, old); /* an older copy of the key: its FORGET is on its way */
    old = fx_u64map_get(&s->by_off, owbm_off_key((uint32_t)tgt, offset));
    if (old) owbm_drop(s, old); /* cannot happen: a range handed out again was FORGOTTEN first */
    if (fx_u64map_count(&s->by_off) >= OWBM_MAX) {
        s->full++;
        return;
    }
    owbm_ent_t *e = fx_malloc(sizeof *e + klen + 1);
    if (!e) return;
    memcpy(e->kbuf, key, klen);
    e->kbuf[klen] = '\0';
    *e = (owbm_ent_t){e->kbuf, klen, (uint32_t)tgt, 0, h, offset, value_len, put_ms, put_ver};
    if (fx_hmap_put_h(s->by_key, e->key, klen, h, e, NULL) != FLUXON_OK) {
        fx_free(e);
        return;
    }
    if (fx_u64map_put(&s->by_off, owbm_off_key((uint32_t)tgt, offset), e, NULL) != FLUXON_OK) {
        fx_hmap_del_obj(s->by_key, h, e);
        fx_free(e);
        return;
    }
    s->added++;
    fx_oelse_recorded(o, h);
}

FX_INTERNAL void fx_owbm_forget(fx_owner_t *o, const uint8_t *body, size_t len, fx_arena_t *arena)
{
    owbm_t *s = o->wbm;
    fx_body_forget_t b;
    memset(&b, 0, sizeof b);
    if (!s) return;
    s->forget_msgs++;
    if (fx_body_forget_decode(body, len, &b, arena) != FLUXON_OK) {
        FX_ERROR("malformed FORGET from the master: every record of written-back copies dropped");
        fx_owbm_clear(o);
        return;
    }
    if (!b.node_id.len) { /* the master could not name them (no memory): every record */
        fx_owbm_clear(o);
        return;
    }
    for (uint32_t i = 0; i < OWBM_TARGETS; i++) {
        owbm_tgt_t *t = &s->t[i];
        if (!t->used || t->generation != b.generation || !fx_str_eq(b.node_id, t->node_id)) continue;
        /* the batch's misses overlap: the by-offset slots, then the entries' key slots */
        for (uint32_t k = 0; k < b.offsets.n; k++) fx_u64map_prefetch(&s->by_off, owbm_off_key(i, b.offsets.v[k]));
        for (uint32_t k = 0; k < b.offsets.n; k++) {
            owbm_ent_t *e = fx_u64map_get(&s->by_off, owbm_off_key(i, b.offsets.v[k]));
            if (!e) continue;
            fx_hmap_prefetch(s->by_key, e->h);
            fx_oelse_prefetch(o, e->h); /* fx_oelse_dropped's slot */
        }
        for (uint32_t k = 0; k < b.offsets.n; k++) {
            owbm_ent_t *e = fx_u64map_get(&s->by_off, owbm_off_key(i, b.offsets.v[k]));
            if (!e) continue;
            fx_oelse_dropped(o, e->h); /* held nowhere now: its misses need no LOOKUP */
            owbm_drop(s, e);
            s->forgotten++;
        }
    }
}

FX_INTERNAL void fx_owbm_clear(fx_owner_t *o)
{
    owbm_t *s = o->wbm;
    fx_oelse_dropped_clear(o); /* FORGETs may have been lost, or the copies re-published */
    if (!s || !fx_u64map_count(&s->by_off)) return;
    s->cleared += fx_u64map_count(&s->by_off);
    owbm_drop_all(s, -1);
}

FX_INTERNAL bool fx_owbm_empty(const fx_owner_t *o) { return !o->wbm || !fx_u64map_count(&o->wbm->by_off); }

FX_INTERNAL void fx_owbm_prefetch_key(const fx_owner_t *o, uint64_t khash, int depth)
{
    const owbm_t *s = o->wbm;
    if (!s || !fx_u64map_count(&s->by_off)) return;
    if (depth <= 0) fx_hmap_prefetch(s->by_key, khash);
    else fx_hmap_prefetch_deep(s->by_key, khash, 1);
}

FX_INTERNAL bool fx_owbm_find(fx_owner_t *o, const char *key, uint32_t klen, uint64_t khash, fx_owbm_hit_t *h)
{
    owbm_t *s = o->wbm;
    owbm_ent_t *e = s && fx_u64map_count(&s->by_off) ? fx_hmap_get_h(s->by_key, key, klen, khash) : NULL;
    if (!e) return false;
    const owbm_tgt_t *t = &s->t[e->tgt];
    *h = (fx_owbm_hit_t){t->node_id, t->generation, t->base, {(const char *)t->addr, t->addr_len},
                         {(const char *)t->rkey, t->rkey_len}, e->offset, e->value_len, e->put_ms, e->put_ver,
                         t->reuse_ms, (t->flags & FX_TARGET_KEEPS) != 0, (t->flags & FX_TARGET_CPU) != 0,
                         e->read != 0, e};
    return true;
}

FX_INTERNAL void fx_owbm_note_read(fx_owner_t *o, const fx_owbm_hit_t *h)
{
    (void)o;
    ((owbm_ent_t *)h->ent)->read = 1;
}

FX_INTERNAL void fx_owbm_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    owbm_t *s = o->wbm;
    if (!s) return;
    m->wb_records = fx_u64map_count(&s->by_off);
    m->wb_records_added = s->added;
    m->wb_records_forgotten = s->forgotten;
    m->wb_records_cleared = s->cleared;
    m->wb_records_full = s->full;
    m->wb_forget_msgs = s->forget_msgs;
}
