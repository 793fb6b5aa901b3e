/* republish.c — the owner's half of a master restart or failover (issue 17): when it
 * registers with a master generation it has not registered with before, it walks its
 * master grants page by page (a cursor kept across reactor turns: nothing blocks the reactor,
 * heartbeats keep flowing) and sends every COMMITTED value it finds in REPUBLISH batches
 * (at most RP_BATCH_KEYS keys or about 1 MiB each, RP_WINDOW in flight) with key,
 * value_len, put_id and atomic-group size, then the placed values it holds in ranges
 * (a snapshot of the PLACED records). The
 * master rebuilds its routes from them; a copy it answers STALE (a newer version is
 * routed) or refuses is retired here (its slot frees once unpinned, S2).
 *
 *  - Values are looked up again by identity when their batch is answered: one evicted,
 *    invalidated or retired meanwhile is left alone; a value published to the new master
 *    meanwhile may be reported too (the master answers that it is routed already).
 *  - A leased value is retired instead (the lease died with the old master).
 *  - An uncertain answer (timeout) sends the same identities again; a lost connection
 *    restarts the whole re-publication at the next registration (reporting a value twice
 *    converges at the master).
 * Reactor thread only. */
#include <stdio.h>

#include "hmap.h"
#include "log.h"
#include "owner_claims.h"
#include "owner_disk.h"
#include "owner_evict.h"
#include "owner_link.h"
#include "owner_oracle.h"
#include "owner_republish.h"
#include "owner_tenant.h"
#include "owner_store.h"
#include "u64map.h"

#define RP_WINDOW 2u
#define RP_BATCH_KEYS 4096u   /* <= FX_REPUBLISH_MAX_KEYS */
#define RP_MAX_BYTES (1u << 20)
#define RP_SCAN_MAX 65536u    /* slots looked at per batch built */

typedef struct rp_id {
    uint64_t offset, use_seq; /* use_seq 0: a placed range (ranges), RP_DISK: a disk record
                               * (offset: its disk offset), else a slot */
    uint64_t put_ms, put_ver; /* a placed range: the version recorded there (R1: a refused
                               * report drops that record only, never a newer one placed at
                               * the same offset meanwhile) */
} rp_id_t;
#define RP_DISK UINT64_MAX

/* A placed value in a range of this segment (the master said so with PLACED). */
typedef struct rp_range {
    uint32_t klen;
    uint64_t value_len, put_ms, put_ver;
    uint32_t group_size; /* disk records (issue 39); 1 for placed values */
    int tenant;          /* a placed range: its tenant's index + 1 (0: one this owner does not list) */
    char key[];          /* NUL-ended: one allocation a record */
} rp_range_t;

typedef struct orepub {
    fx_u64map_t ranges; /* offset + 1 -> rp_range_t (a PLACED and an INVALIDATE a copy: no
                         * allocation but the record's, one cache line a lookup) */
    fx_hmap_t *disk;   /* u64 disk offset -> rp_range_t: the disk records when the walk started (issue 39) */
    uint64_t *grant_offs; /* the master grants held when the walk started (segment offsets) */
    size_t n_grants, g, slot; /* the walk's cursor: grant index, byte offset in it */
    rp_id_t *ids; /* the snapshot of the placed ranges */
    size_t n, cap, next, found;
    uint64_t epoch, started_ms;
    uint32_t in_flight;
    bool active, pending;
    bool verify; /* this round verifies (the same master again): nothing is re-routed */
    uint64_t verify_rounds, verify_dropped;
    uint64_t routed_gone; /* disk records routed by a report answered after they went (rp_routed_gone) */
    uint64_t rounds, batches, keys, stale, refused, leased, resends, last_ms, last_keys, placed_malformed, r1_kept;
    uint64_t placed_bytes; /* bytes of the ranges recorded: what the master placed in this segment */
    struct rp_held *held; /* test fault delay_request "REPUBLISH": a batch held back */
    fx_owner_t *o;
} orepub_t;

typedef struct rp_batch {
    fx_owner_t *o;
    uint64_t epoch;
    bool last;
    size_t n;
    fx_slot_ref_t *pins; /* n_pins slots this batch reports (not verifies): holder-pinned until its
                          * answer, so none is evicted or reused while the report may still
                          * route it (an EVICT that overtook the batch would find no route and
                          * free the slot; the batch would then route the key at a reused slot) */
    size_t n_pins;
    rp_id_t ids[]; /* the identities sent, in order */
} rp_batch_t;

/* Test fault delay_request "REPUBLISH": one batch, built now, reaches the master fault_ms
 * later (a report overtaken by what the master does meanwhile: R1's race, made certain). */
typedef struct rp_held {
    fx_timer_t t;
    fx_owner_t *o;
    rp_batch_t *b;
    char *kbuf;
    uint32_t *klens;
    uint64_t *cols; /* 6 columns of m */
    uint32_t m;
    bool last;
} rp_held_t;

static void rp_held_free(rp_held_t *hd)
{
    fx_free(hd->kbuf);
    fx_free(hd->klens);
    fx_free(hd->cols);
    fx_free(hd);
}

static bool rp_hold(fx_owner_t *o, rp_batch_t *b, const fx_str_t *keys, const uint64_t *cols, size_t n, uint32_t m,
                    bool last);

/* Unpins b's slots (a slot retired meanwhile frees now: no report of it is in flight any
 * more) and frees b. o's store is gone once the owner is torn down (o->repub NULL): then
 * the pool goes with it. */
static void rp_batch_free(fx_owner_t *o, rp_batch_t *b)
{
    if (!b) return;
    for (size_t i = 0; o && o->repub && i < b->n_pins; i++)
        if (fx_slot_pool_holder_unref(fx_ostore_pool(o), &b->pins[i]) != FLUXON_OK)
            FX_ERROR("re-publication: unpinning slot %llu failed", (unsigned long long)b->pins[i].offset);
    if (o && o->repub && b->n_pins) fx_ostore_kick(o); /* a waiting claim's eviction may take them now */
    fx_free(b->pins);
    fx_free(b);
}

FX_INTERNAL int fx_orepub_init(fx_owner_t *o)
{
    orepub_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    o->repub = s;
    s->o = o;
    return fx_hmap_create(256, &s->disk);
}

/* The bytes the master allocated for a placed value (master/inflight.c: whole pages). */
static uint64_t rp_range_bytes(const rp_range_t *g) { return FX_MAX((g->value_len + 4095) & ~4095ull, 4096ull); }

/* A placed range joins (sign 1) or leaves (-1) the bytes recorded, its tenant's too (issue 42). */
static void rp_range_count(fx_owner_t *o, const rp_range_t *g, int sign)
{
    orepub_t *s = o->repub;
    uint64_t b = rp_range_bytes(g);
    uint64_t *t = g->tenant ? &fx_otenant_at(o, g->tenant - 1)->placed_bytes : NULL;
    if (sign > 0) {
        s->placed_bytes += b;
        if (t) *t += b;
        return;
    }
    s->placed_bytes -= FX_MIN(s->placed_bytes, b);
    if (t) *t -= FX_MIN(*t, b);
}

/* A record of key (klen bytes), its other fields zero; NULL without memory. */
static rp_range_t *rp_range_new(const char *key, uint32_t klen)
{
    rp_range_t *g = fx_malloc(sizeof *g + (size_t)klen + 1);
    if (!g) return NULL;
    *g = (rp_range_t){.klen = klen};
    memcpy(g->key, key, klen);
    g->key[klen] = '\0';
    return g;
}

static void rp_range_free(void *v) { fx_free(v); }

/* The placed ranges by offset (u64map keys are never 0: offset + 1; a segment offset is
 * never UINT64_MAX). */
static rp_range_t *rp_ranges_get(orepub_t *s, uint64_t offset) { return fx_u64map_get(&s->ranges, offset + 1); }

static void rp_ranges_clear(orepub_t *s)
{
    size_t it = 0;
    uint64_t k;
    void *v;
    while (fx_u64map_next(&s->ranges, &it, &k, &v)) rp_range_free(v);
    fx_u64map_free(&s->ranges);
}

FX_INTERNAL void fx_orepub_fini(fx_owner_t *o)
{
    orepub_t *s = o->repub;
    if (!s) return;
    if (s->held) { /* test fault: a held batch dies with the owner */
        fx_timer_disarm(o->r, &s->held->t);
        fx_free(s->held->b->pins); /* the pool goes with the owner */
        fx_free(s->held->b);
        rp_held_free(s->held);
    }
    rp_ranges_clear(s);
    if (s->disk) fx_hmap_clear(s->disk, rp_range_free);
    fx_hmap_destroy(s->disk);
    fx_free(s->ids);
    fx_free(s->grant_offs);
    fx_free(s);
    o->repub = NULL;
}

FX_INTERNAL void fx_orepub_forget_all(fx_owner_t *o)
{
    orepub_t *s = o->repub;
    if (s) rp_ranges_clear(s);
    if (s) s->placed_bytes = 0;
    for (uint32_t k = 0; s && k < fx_otenant_count(o); k++) fx_otenant_at(o, k)->placed_bytes = 0;
}

FX_INTERNAL uint64_t fx_orepub_placed_bytes(fx_owner_t *o) { return o->repub ? o->repub->placed_bytes : 0; }

/* ---- placed values in ranges of this segment ---- */
FX_INTERNAL int fx_orepub_placed(fx_owner_t *o, const uint8_t *body, size_t len, fx_arena_t *arena)
{
    orepub_t *s = o->repub;
    fx_body_placed_t b;
    uint32_t n;
    int st = FLUXON_OK;
    if (fx_body_placed_decode(body, len, &b, arena) != FLUXON_OK || (n = b.keys.n, b.offsets.n != n) ||
        b.put_ms.n != n || b.put_ver.n != n) {
        s->placed_malformed++;
        FX_ERROR("malformed PLACED from the master: ignored (those values are not re-published after a restart)");
        return FLUXON_ERR_PROTOCOL;
    }
    if (b.lease_id) return FLUXON_OK; /* bound to a lease: dies with the master that granted it */
    /* a batch (a write-back's APPEND_DONE): the map's slots start loading together (a miss each) */
    for (uint32_t i = 0; i < n; i++) fx_u64map_prefetch(&s->ranges, b.offsets.v[i] + 1);
    for (uint32_t i = 0; i < n; i++) {
        rp_range_t *g = b.offsets.v[i] != UINT64_MAX ? rp_range_new(b.keys.v[i].p, b.keys.v[i].len) : NULL;
        void *old = NULL;
        if (!g || fx_u64map_put(&s->ranges, b.offsets.v[i] + 1, g, &old) != FLUXON_OK) {
            if (g) rp_range_free(g);
            FX_ERROR("PLACED: out of memory (or an offset of UINT64_MAX); %.*s is not re-published after a restart",
                     (int)FX_MIN(b.keys.v[i].len, 80u), b.keys.v[i].p);
            st = FLUXON_ERR_NOMEM;
            continue;
        }
        g->value_len = b.value_len, g->put_ms = b.put_ms.v[i], g->put_ver = b.put_ver.v[i], g->group_size = 1;
        g->tenant = fx_otenant_of_key(o, g->key, g->klen) + 1;
        fx_oracle_check(o, "a push placed here (PLACED)", g->key, g->klen, b.offsets.v[i], b.value_len, g->put_ms,
                        g->put_ver, NULL);
        int64_t over = fx_oclaims_overlap(o, b.offsets.v[i], rp_range_bytes(g));
        if (over >= 0) /* D1: its bytes lie in slots of this owner's: never expected */
            FX_ERROR("PLACED: %.*s at %llu (%llu bytes) lies in grant %lld this owner holds: the master's view of this "
                     "segment differs from this owner's", (int)FX_MIN(g->klen, 80u), g->key,
                     (unsigned long long)b.offsets.v[i], (unsigned long long)rp_range_bytes(g), (long long)over);
        rp_range_count(o, g, 1);
        if (old) { /* the range was freed and placed again */
            rp_range_count(o, old, -1);
            rp_range_free(old);
        }
    }
    return st;
}

FX_INTERNAL void fx_orepub_invalidate(fx_owner_t *o, const uint8_t *body, size_t len, fx_arena_t *arena)
{
    orepub_t *s = o->repub;
    fx_body_invalidate_t b;
    if (!fx_u64map_count(&s->ranges) || fx_body_invalidate_decode(body, len, &b, arena) != FLUXON_OK) return;
    uint32_t n = b.keys.n;
    if (b.offsets.n != n || b.put_ms.n != n || b.put_ver.n != n) return; /* counted by the store */
    /* the batch's misses overlap: the map's slots, then the records they name */
    for (uint32_t i = 0; i < n; i++) fx_u64map_prefetch(&s->ranges, b.offsets.v[i] + 1);
    for (uint32_t i = 0; i < n; i++) {
        rp_range_t *g = rp_ranges_get(s, b.offsets.v[i]);
        if (g) __builtin_prefetch(g);
    }
    for (uint32_t i = 0; i < n; i++) {
        rp_range_t *g = rp_ranges_get(s, b.offsets.v[i]);
        if (!g || g->klen != b.keys.v[i].len || memcmp(g->key, b.keys.v[i].p, g->klen) ||
            g->put_ms != b.put_ms.v[i] || g->put_ver != b.put_ver.v[i])
            continue;
        fx_u64map_del(&s->ranges, b.offsets.v[i] + 1, NULL);
        rp_range_count(o, g, -1);
        rp_range_free(g);
    }
}

/* Drops the record at offset if it is still that version (R1: a value placed at the same
 * offset since — a new master placing there while this owner's report was on its way —
 * is another record, kept). */
static void rp_range_drop(orepub_t *s, uint64_t offset, uint64_t put_ms, uint64_t put_ver)
{
    const rp_range_t *cur = rp_ranges_get(s, offset);
    if (!cur || cur->put_ms != put_ms || cur->put_ver != put_ver) {
        if (cur) s->r1_kept++;
        return;
    }
    void *g = NULL;
    if (fx_u64map_del(&s->ranges, offset + 1, &g) == FLUXON_OK && g) {
        rp_range_count(s->o, g, -1);
        rp_range_free(g);
    }
}

static owner_entry_t *rp_find(fx_owner_t *o, const rp_id_t *id)
{
    fx_slot_ref_t ref = {.offset = id->offset, .use_seq = id->use_seq};
    owner_entry_t *en = fx_ostore_find(o, &ref);
    return en && en->state == OE_COMMITTED && !en->retired && !en->evicting ? en : NULL;
}

static bool rp_id_add(orepub_t *s, uint64_t off, uint64_t use_seq, uint64_t put_ms, uint64_t put_ver)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1024;
        rp_id_t *ni = fx_realloc(s->ids, nc * sizeof *ni);
        if (!ni) return false;
        s->ids = ni;
        s->cap = nc;
    }
    s->ids[s->n++] = (rp_id_t){off, use_seq, put_ms, put_ver};
    return true;
}

static void rp_snap_ranges(orepub_t *s)
{
    size_t it = 0;
    uint64_t k;
    void *v;
    while (fx_u64map_next(&s->ranges, &it, &k, &v)) {
        const rp_range_t *g = v;
        if (!rp_id_add(s, k - 1, 0, g->put_ms, g->put_ver)) return;
    }
}

/* issue 39: the disk records, reported after the memory ones at their disk offsets */
static bool rp_snap_disk_one(void *arg, uint64_t off, const char *key, uint32_t klen, const fx_disk_meta_t *m)
{
    orepub_t *s = arg;
    rp_range_t *g = rp_range_new(key, klen);
    if (!g) return false;
    g->value_len = m->value_len, g->put_ms = m->put_ms, g->put_ver = m->put_ver;
    g->group_size = FX_MAX(m->group_size, 1u);
    void *old = NULL;
    if (fx_hmap_put(s->disk, &off, sizeof off, g, &old) != FLUXON_OK) {
        rp_range_free(g);
        return false;
    }
    if (old) rp_range_free(old);
    return rp_id_add(s, off, RP_DISK, m->put_ms, m->put_ver);
}

static void rp_snap_disk(fx_owner_t *o)
{
    orepub_t *s = o->repub;
    fx_hmap_clear(s->disk, rp_range_free);
    fx_odisk_foreach(o, rp_snap_disk_one, s);
}

static void rp_pump(fx_owner_t *o);

static void rp_retire(fx_owner_t *o, const rp_id_t *id)
{
    if (id->use_seq == RP_DISK) { /* not routed: the record goes */
        (void)fx_odisk_drop(o, id->offset);
        return;
    }
    if (!id->use_seq) {
        rp_range_drop(o->repub, id->offset, id->put_ms, id->put_ver);
        return;
    }
    owner_entry_t *en = rp_find(o, id);
    if (en) fx_ostore_retire(o, en);
}

static void rp_done(fx_owner_t *o)
{
    orepub_t *s = o->repub;
    s->active = s->pending = false;
    uint64_t ms = fx_now_ms() - s->started_ms;
    if (s->verify) {
        FX_INFO("verified %zu values with the master in %llu ms (%llu dropped so far: not routed there)", s->found,
                (unsigned long long)ms, (unsigned long long)s->verify_dropped);
    } else {
        s->last_ms = ms;
        s->last_keys = s->found;
        FX_INFO("re-published %zu values to the master in %llu ms (%llu batches so far; %llu dropped as STALE: older "
                "than the routed version or deleted since, %llu refused, %llu leased values dropped)", s->found, (unsigned long long)s->last_ms,
                (unsigned long long)s->batches, (unsigned long long)s->stale, (unsigned long long)s->refused,
                (unsigned long long)s->leased);
    }
    fx_free(s->ids);
    fx_free(s->grant_offs);
    fx_hmap_clear(s->disk, rp_range_free);
    s->ids = NULL;
    s->grant_offs = NULL;
    s->n = s->cap = s->next = s->n_grants = 0;
}

static void rp_send(fx_owner_t *o, const rp_id_t *ids, size_t n, bool last);

static bool rp_disk_current(fx_owner_t *o, const rp_range_t *g, uint64_t off, uint64_t *cur, fx_disk_meta_t *dm)
{
    return o->disk && fx_odisk_find(o, g->key, g->klen, cur, dm) && *cur == off;
}

/* The master routes id (its answer said OK): a disk record this owner dropped meanwhile (a
 * retired segment, a failed read) while the report was on its way — the route drop it sent
 * may have reached the master first and found no route — is dropped again now, so no route
 * names a record that is gone (a disk offset is never reused: until then a read of it is a
 * miss, never other bytes). Memory slots in a report are pinned until this answer. */
static void rp_routed_gone(fx_owner_t *o, const rp_id_t *id)
{
    orepub_t *s = o->repub;
    if (id->use_seq != RP_DISK) return;
    rp_range_t *g = fx_hmap_get(s->disk, &id->offset, sizeof id->offset);
    uint64_t cur = 0;
    fx_disk_meta_t dm;
    if (!g || rp_disk_current(o, g, id->offset, &cur, &dm)) return;
    s->routed_gone++;
    fx_odisk_forget(o, g->key, g->klen, id->offset, g->put_ms, g->put_ver);
}

/* Stops this attempt; the next registration starts a new one (answers still on their way
 * belong to an old epoch and are ignored). */
static void rp_abandon(orepub_t *s)
{
    s->active = false;
    s->pending = true;
    s->epoch++;
    s->in_flight = 0;
}

static void rp_on_answer(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    rp_batch_t *b = arg;
    fx_owner_t *o = b->o;
    orepub_t *s = o->repub;
    if (!s || b->epoch != s->epoch || !s->active) { /* a re-publication that was abandoned */
        rp_batch_free(o, b);
        return;
    }
    s->in_flight--;
    fx_body_statuses_t a;
    status = fx_olink_statuses(status, h, body, arena, b->n, "REPUBLISH", &a);
    if (status == FLUXON_ERR_TIMEOUT || status == FLUXON_ERR_PROTOCOL) { /* uncertain: the same identities again */
        s->resends++;
        rp_send(o, b->ids, b->n, b->last);
    } else if (status != FLUXON_OK && status != FLUXON_ERR_UNAVAILABLE) { /* refused whole: not routed */
        FX_ERROR("the master refused a re-published batch of %zu values (%s): they are dropped here", b->n,
                 fluxon_status_string(status));
        s->refused += b->n;
        for (size_t i = 0; i < b->n; i++) rp_retire(o, &b->ids[i]);
    } else if (status == FLUXON_OK) {
        for (size_t i = 0; i < b->n; i++) {
            int ks = (int)(int64_t)a.statuses.v[i];
            if (ks == FLUXON_OK) {
                rp_routed_gone(o, &b->ids[i]);
                continue;
            }
            if (s->verify) s->verify_dropped++;
            else if (ks == FLUXON_ERR_STALE) s->stale++;
            else s->refused++;
            rp_retire(o, &b->ids[i]); /* a newer version is routed, or this copy is not */
        }
    }
    rp_batch_free(o, b); /* after a resend took its own pins */
    if (status != FLUXON_ERR_UNAVAILABLE) rp_pump(o); /* UNAVAILABLE: lost; restarts when registered */
}

/* Sends the values among ids[0..n) that still live (leased ones retire). */
static void rp_send(fx_owner_t *o, const rp_id_t *ids, size_t n, bool last)
{
    orepub_t *s = o->repub;
    fx_conn_t *mc = fx_olink_conn(o);
    rp_batch_t *b = fx_malloc(sizeof *b + (n ? n : 1) * sizeof b->ids[0]);
    if (b) {
        b->n_pins = 0;
        b->pins = s->verify ? NULL : fx_malloc((n ? n : 1) * sizeof *b->pins);
    }
    fx_str_t *keys = fx_calloc(n ? n : 1, sizeof *keys);
    uint64_t *cols = fx_calloc(6 * (n ? n : 1), sizeof *cols);
    if (!mc || !b || (!s->verify && !b->pins) || !keys || !cols) {
        if (mc) FX_ERROR("re-publishing %zu values: out of memory; retrying at the next registration", n);
        rp_abandon(s);
        goto out;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i].use_seq == RP_DISK) { /* a disk record, still indexed at that offset */
            rp_range_t *g = fx_hmap_get(s->disk, &ids[i].offset, sizeof ids[i].offset);
            uint64_t cur = 0;
            fx_disk_meta_t dm;
            if (!g || !rp_disk_current(o, g, ids[i].offset, &cur, &dm)) continue;
            b->ids[m] = ids[i];
            keys[m] = (fx_str_t){g->key, g->klen};
            cols[m] = ids[i].offset;
            cols[n + m] = g->value_len;
            cols[2 * n + m] = g->put_ms;
            cols[3 * n + m] = g->put_ver;
            cols[4 * n + m] = g->group_size;
            cols[5 * n + m] = 0;
            m++;
            continue;
        }
        if (!ids[i].use_seq) { /* a placed range, still the version snapshotted */
            rp_range_t *g = rp_ranges_get(s, ids[i].offset);
            if (!g || g->put_ms != ids[i].put_ms || g->put_ver != ids[i].put_ver) continue;
            b->ids[m] = ids[i];
            keys[m] = (fx_str_t){g->key, g->klen};
            cols[m] = ids[i].offset;
            cols[n + m] = g->value_len;
            cols[2 * n + m] = g->put_ms;
            cols[3 * n + m] = g->put_ver;
            cols[4 * n + m] = 1;
            cols[5 * n + m] = FX_MAX(FX_ALIGN_UP(g->value_len, 4096ull), 4096ull);
            m++;
            continue;
        }
        owner_entry_t *en = rp_find(o, &ids[i]);
        if (!en) continue;
        if (en->leased && !s->verify) { /* a verification keeps it: its lease lives at this master */
            s->leased++;
            fx_ostore_retire(o, en);
            continue;
        }
        if (!s->verify) { /* pinned until the answer (rp_batch_t.pins) */
            if (fx_slot_pool_holder_ref(fx_ostore_pool(o), &en->slot) != FLUXON_OK) {
                fx_ostore_retire(o, en); /* never expected (a committed slot takes pins): not
                                          * reported, so not kept unrouted */
                continue;
            }
            b->pins[b->n_pins++] = en->slot;
        }
        b->ids[m] = ids[i];
        keys[m] = (fx_str_t){en->key, en->klen};
        cols[m] = en->slot.offset;
        cols[n + m] = en->value_len;
        cols[2 * n + m] = en->put_ms;
        cols[3 * n + m] = en->put_ver;
        cols[4 * n + m] = fx_oev_group_size(en);
        m++;
    }
    b->o = o;
    b->epoch = s->epoch;
    b->last = last;
    b->n = m;
    uint32_t k = (uint32_t)m;
    fx_body_republish_t body = {{keys, k},         {cols, k},         {cols + n, k},     {cols + 2 * n, k},
                                {cols + 3 * n, k}, {cols + 4 * n, k}, {cols + 5 * n, k}, last, s->verify};
    if (m && !s->held && fx_owner_fault_delay(o, "REPUBLISH") && rp_hold(o, b, keys, cols, n, k, last)) {
        b = NULL; /* test-only: sent later (rp_on_hold), counted in flight now */
        s->in_flight++;
        s->batches++;
        s->keys += m;
    } else if (FX_RPC_CALL(mc, REPUBLISH, republish, &body, o->cfg.master_timeout_ms, rp_on_answer, b) == FLUXON_OK) {
        b = NULL;
        s->in_flight++;
        s->batches++;
        s->keys += m;
    } else { /* the connection is closing: it restarts at the next registration */
        rp_abandon(s);
    }
out:
    rp_batch_free(o, b);
    fx_free(keys);
    fx_free(cols);
}

static bool rp_walk_done(const orepub_t *s) { return s->g >= s->n_grants && s->next >= s->n; }

/* The next batch's identities from the walk (the segment page by page through each master
 * grant held — slots start on 4 KiB pages whatever sub-grant they belong to — then the
 * placed ranges) into ids[RP_BATCH_KEYS]; looks at no more than RP_SCAN_MAX pages. */
static size_t rp_collect(fx_owner_t *o, rp_id_t *ids)
{
    orepub_t *s = o->repub;
    size_t m = 0, bytes = 0, scanned = 0;
    uint64_t gb = o->cfg.grant_bytes;
    while (s->g < s->n_grants && m < RP_BATCH_KEYS && bytes < RP_MAX_BYTES && scanned < RP_SCAN_MAX) {
        if (s->slot >= gb) { /* this grant's pages are walked */
            s->g++;
            s->slot = 0;
            continue;
        }
        owner_entry_t *en = fx_ostore_at(o, s->grant_offs[s->g] + s->slot);
        s->slot += 4096;
        scanned++;
        if (!en || en->state != OE_COMMITTED || en->retired || en->evicting) continue;
        ids[m++] = (rp_id_t){en->slot.offset, en->slot.use_seq, 0, 0};
        bytes += 56 + en->klen;
    }
    while (s->g >= s->n_grants && s->next < s->n && m < RP_BATCH_KEYS && bytes < RP_MAX_BYTES) {
        const rp_range_t *g = s->ids[s->next].use_seq == RP_DISK
                                  ? fx_hmap_get(s->disk, &s->ids[s->next].offset, sizeof s->ids[s->next].offset)
                                  : rp_ranges_get(s, s->ids[s->next].offset);
        bytes += 56 + (g ? g->klen : 0);
        ids[m++] = s->ids[s->next++];
    }
    return m;
}

/* Keeps RP_WINDOW batches in flight until the walk is over and every batch answered. */
static void rp_pump(fx_owner_t *o)
{
    orepub_t *s = o->repub;
    rp_id_t *ids = NULL;
    while (s->active && s->in_flight < RP_WINDOW && !rp_walk_done(s)) {
        if (!ids && !(ids = fx_malloc(RP_BATCH_KEYS * sizeof *ids))) {
            FX_ERROR("re-publishing: out of memory; retrying at the next registration");
            rp_abandon(s);
            break;
        }
        size_t m = rp_collect(o, ids);
        s->found += m;
        if (m || rp_walk_done(s)) rp_send(o, ids, m, rp_walk_done(s));
    }
    fx_free(ids);
    if (s->active && s->in_flight == 0 && rp_walk_done(s)) rp_done(o);
}

/* The round's batches go (its snapshot is taken). */
static void rp_start(fx_owner_t *o)
{
    orepub_t *s = o->repub;
    if (rp_walk_done(s)) {
        /* still tell the master (one empty last batch): it logs the owner as done */
        rp_send(o, NULL, 0, true);
        if (s->active && !s->in_flight) rp_done(o);
        return;
    }
    rp_pump(o);
}

static void rp_on_answer(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena);

static void rp_on_hold(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    rp_held_t *hd = FX_CONTAINER_OF(t, rp_held_t, t);
    fx_owner_t *o = hd->o;
    orepub_t *s = o->repub;
    s->held = NULL;
    fx_conn_t *mc = fx_olink_conn(o);
    fx_str_t *keys = fx_calloc(hd->m ? hd->m : 1, sizeof *keys);
    int rc = FLUXON_ERR_UNAVAILABLE;
    if (keys && mc && hd->b->epoch == s->epoch && s->active) {
        for (uint32_t i = 0, at = 0; i < hd->m; at += hd->klens[i], i++) keys[i] = (fx_str_t){hd->kbuf + at, hd->klens[i]};
        uint64_t *c = hd->cols;
        uint32_t m = hd->m;
        fx_body_republish_t body = {{keys, m}, {c, m}, {c + m, m}, {c + 2 * m, m}, {c + 3 * m, m}, {c + 4 * m, m},
                                    {c + 5 * m, m}, hd->last, s->verify};
        rc = FX_RPC_CALL(mc, REPUBLISH, republish, &body, o->cfg.master_timeout_ms, rp_on_answer, hd->b);
    }
    fx_free(keys);
    if (rc == FLUXON_OK) {
        hd->b = NULL;
    } else if (s->active && hd->b->epoch == s->epoch) {
        s->in_flight--;
        rp_abandon(s);
    }
    rp_batch_free(o, hd->b);
    rp_held_free(hd);
}

/* Holds batch b (its body: keys[0..m), cols with column stride n) back fault_ms. */
static bool rp_hold(fx_owner_t *o, rp_batch_t *b, const fx_str_t *keys, const uint64_t *cols, size_t n, uint32_t m,
                    bool last)
{
    rp_held_t *hd = fx_calloc(1, sizeof *hd);
    size_t kb = 0;
    for (uint32_t i = 0; i < m; i++) kb += keys[i].len;
    if (hd) {
        hd->kbuf = fx_malloc(kb ? kb : 1);
        hd->klens = fx_calloc(m ? m : 1, sizeof *hd->klens);
        hd->cols = fx_calloc(6 * (size_t)(m ? m : 1), sizeof *hd->cols);
    }
    if (!hd || !hd->kbuf || !hd->klens || !hd->cols) {
        if (hd) rp_held_free(hd);
        return false;
    }
    for (uint32_t i = 0, at = 0; i < m; at += (uint32_t)keys[i].len, i++) {
        memcpy(hd->kbuf + at, keys[i].p, keys[i].len);
        hd->klens[i] = (uint32_t)keys[i].len;
        for (int c = 0; c < 6; c++) hd->cols[(size_t)c * m + i] = cols[(size_t)c * n + i];
    }
    hd->o = o;
    hd->b = b;
    hd->m = m;
    hd->last = last;
    o->repub->held = hd;
    fx_timer_init(&hd->t);
    FX_WARN("test fault: a REPUBLISH batch of %u values held back %u ms", m, o->cfg.fault_ms);
    fx_timer_arm(o->r, &hd->t, o->cfg.fault_ms, rp_on_hold);
    return true;
}

FX_INTERNAL void fx_orepub_registered(fx_owner_t *o, bool master_changed, bool again)
{
    orepub_t *s = o->repub;
    if (!master_changed && !s->pending && !again) return;
    /* a re-publication not ended (pending) goes on as one: the master may lack those routes */
    s->verify = !master_changed && !(s->pending && !s->verify) && again;
    s->epoch++; /* answers of an earlier attempt are ignored */
    s->in_flight = 0;
    s->n = s->next = s->found = s->g = s->slot = 0;
    fx_u64v_t gids, goffs;
    fx_oclaims_grants(o, &gids, &goffs);
    fx_free(s->grant_offs);
    s->grant_offs = fx_malloc((goffs.n ? goffs.n : 1) * sizeof *s->grant_offs);
    if (!s->grant_offs) {
        FX_ERROR("re-publishing: out of memory; retrying at the next registration");
        rp_abandon(s);
        return;
    }
    if (goffs.n) memcpy(s->grant_offs, goffs.v, goffs.n * sizeof *s->grant_offs);
    s->n_grants = goffs.n;
    rp_snap_ranges(s);
    size_t n_ranges = s->n;
    rp_snap_disk(o);
    s->active = true;
    s->pending = false;
    s->rounds += !s->verify;
    s->verify_rounds += s->verify;
    s->started_ms = fx_now_ms();
    if (s->verify)
        FX_INFO("registered again with the same master (the connection was lost): verifying what this owner serves "
                "(%zu grants, %zu placed values, %zu values on disk); copies it no longer routes are dropped",
                s->n_grants, n_ranges, s->n - n_ranges);
    else
        FX_INFO("registered with a master that does not hold this owner's values (a new master, or this owner's "
                "first registration with its disk): re-publishing what it holds (%zu grants, %zu placed values, %zu "
                "values on disk)", s->n_grants, n_ranges, s->n - n_ranges);
    rp_start(o);
}

FX_INTERNAL void fx_orepub_lost(fx_owner_t *o)
{
    orepub_t *s = o->repub;
    if (s && s->active) rp_abandon(s);
}

FX_INTERNAL void fx_orepub_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    orepub_t *s = o->repub;
    if (!s) return;
    m->republishing = s->active || s->pending;
    m->republish_rounds = s->rounds;
    m->republish_batches = s->batches;
    m->republish_keys = s->keys;
    m->republish_stale = s->stale;
    m->republish_refused = s->refused;
    m->republish_leased_dropped = s->leased;
    m->republish_resends = s->resends;
    m->republish_last_ms = s->last_ms;
    m->republish_last_keys = s->last_keys;
    m->republish_verify_rounds = s->verify_rounds;
    m->republish_verify_dropped = s->verify_dropped;
    m->republish_routed_gone = s->routed_gone;
    m->placed_ranges_held = fx_u64map_count(&s->ranges);
    m->placed_malformed = s->placed_malformed;
    m->republish_newer_kept = s->r1_kept;
}
