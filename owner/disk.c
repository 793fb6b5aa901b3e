/* disk.c — the owner's disk tier (issue 39; owner_disk.h). The store (disk/) keeps the
 * bytes and the key index; this file decides what goes there and keeps the master's routes
 * true to it:
 *  - a victim of eviction that is admitted is copied into the store (a memcpy into a staging
 *    buffer: the put that needs its slot never waits for the disk) and its EVICT names the
 *    record's disk offset: the master moves the replica there instead of dropping it;
 *  - an EVICT that did not move it (STALE: a newer version; or never sent) drops the record;
 *  - an INVALIDATE naming a disk offset drops the record (a newer put, a DELETE);
 *  - a segment leaving for room: its records leave the index at once (a LOOKUP that still
 *    names one reads NOT_FOUND: a miss, never other bytes — disk offsets are never reused)
 *    and one EVICT per batch drops their routes; reads in flight hold the file;
 *  - a disk replica that cannot be read (checksum, gone) is dropped at the master too.
 * Reactor thread only. */
#include <stdio.h>
#include <string.h>

#include "keybatch.h"
#include "log.h"
#include "owner_disk.h"
#include "owner_link.h"
#include "owner_tenant.h"
#include "stream_copy.h"
#include "u64map.h"

#define ODISK_EVICT_BATCH 4096u
#define ODISK_WRITE_BUFFERS 16u
#define ODISK_RESEND_MS 100u
#define ODISK_RESEND_MAX_MS 2000u
#define ODISK_ATTEMPTS 20u /* an unanswered drop of disk routes is given up after these (logged) */

/* One EVICT of disk replicas (routes of records this owner no longer has). */
typedef struct odisk_drop {
    fx_owner_t *o;
    struct odisk_drop *next;
    fx_keybatch_t q; /* columns: offset, put_ms, put_ver */
    uint32_t attempts;
    fx_timer_t t;
} odisk_drop_t;

/* A segment the store retires, handled on the next reactor turn. */
typedef struct odisk_retiring {
    struct odisk_retiring *next;
    uint64_t seg;
    size_t n, done; /* records unpublished so far */
    uint64_t offs[];  /* their disk offsets (their keys are read from the index: odisk_on_retire) */
} odisk_retiring_t;

/* Issue 42: a tenant's records on disk, oldest first (tenants with disk_quota_bytes only):
 * a ring of disk offsets; records gone otherwise (retired, replaced) stay until met. */
typedef struct odisk_tfifo {
    uint64_t *offs;
    size_t head, n, cap;
    uint64_t live; /* its records indexed now */
} odisk_tfifo_t;

typedef struct odisk {
    fx_owner_t *o;
    odisk_tfifo_t tq[FX_TENANT_SNAP_MAX];
    fx_disk_t *d;
    odisk_retiring_t *retiring;
    fx_timer_t retire_timer;
    odisk_drop_t *filling; /* the batch being filled (sent on the next reactor turn) */
    odisk_drop_t *sending; /* sent, or waiting to be sent again */
    fx_timer_t flush_timer;
    fx_timer_t contact_timer; /* DIR/CONTACT: a master heard from, every ODISK_CONTACT_MS */
    bool registered; /* registered once: recovered records were offered to the master */
    bool announced;  /* REGISTER said it re-publishes (fx_odisk_will_republish) */
    fx_u64map_t read_once; /* disk offsets read back once (fx_odisk_promote) */
    uint64_t segment_bytes; /* the store's (for messages) */
    uint64_t demote_failing, demote_too_big, stale_drops;
    uint64_t move_refused, invalidate_other, demote_busy, demote_reused, reads_ok, reads_missed, forgotten, routes_dropped,
        route_drops_failed, retired_records, retired_segments;
} odisk_t;

FX_INTERNAL bool fx_odisk_on(const fx_owner_t *o) { return o->disk && o->disk->d; }

/* ---- dropping routes of disk records ---- */
static void odisk_drop_free(odisk_drop_t *b)
{
    fx_keybatch_free(&b->q);
    fx_free(b);
}

static void odisk_unlink_sending(odisk_t *s, odisk_drop_t *b)
{
    for (odisk_drop_t **p = &s->sending; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            return;
        }
}

static void odisk_send(odisk_drop_t *b);

static void odisk_on_resend(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    odisk_send(FX_CONTAINER_OF(t, odisk_drop_t, t));
}

static void odisk_retry(odisk_drop_t *b, int status)
{
    odisk_t *s = b->o->disk;
    if (++b->attempts >= ODISK_ATTEMPTS) {
        FX_WARN("disk tier: dropping the routes of %zu records at the master failed %u times (%s): given up; "
                "lookups of them read nothing and miss", b->q.n, b->attempts, fluxon_status_string(status));
        s->route_drops_failed += b->q.n;
        odisk_unlink_sending(s, b);
        odisk_drop_free(b);
        return;
    }
    uint32_t ms = FX_MIN(ODISK_RESEND_MS << FX_MIN(b->attempts, 5u), ODISK_RESEND_MAX_MS);
    fx_timer_arm(b->o->r, &b->t, ms, odisk_on_resend);
}

static void odisk_on_evict(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    (void)h;
    (void)body;
    (void)arena;
    odisk_drop_t *b = arg;
    if (!b->o->disk) { /* shut down meanwhile: fini freed nothing in flight */
        odisk_drop_free(b);
        return;
    }
    if (status == FLUXON_ERR_TIMEOUT || status == FLUXON_ERR_UNAVAILABLE || status == FLUXON_ERR_PROTOCOL) {
        odisk_retry(b, status); /* same identities again: dropping twice is STALE, harmless */
        return;
    }
    /* answered: OK or STALE per key, either way not routed any more */
    b->o->disk->routes_dropped += b->q.n;
    odisk_unlink_sending(b->o->disk, b);
    odisk_drop_free(b);
}

static void odisk_send(odisk_drop_t *b)
{
    fx_owner_t *o = b->o;
    fx_conn_t *mc = fx_olink_conn(o);
    uint32_t n = (uint32_t)b->q.n;
    fx_str_t *keys = fx_calloc(n, sizeof *keys);
    int rc = FLUXON_ERR_NOMEM;
    if (keys && mc) {
        fx_keybatch_views(&b->q, keys);
        fx_body_evict_t eb = {{keys, n}, {b->q.col[0], n}, {b->q.col[1], n}, {b->q.col[2], n}, {NULL, 0}};
        rc = FX_RPC_CALL(mc, EVICT, evict, &eb, o->cfg.master_timeout_ms, odisk_on_evict, b);
    } else if (keys) {
        rc = FLUXON_ERR_UNAVAILABLE;
    }
    fx_free(keys);
    if (rc != FLUXON_OK) odisk_retry(b, rc);
}

static void odisk_on_flush(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    odisk_t *s = FX_CONTAINER_OF(t, odisk_t, flush_timer);
    odisk_drop_t *b = s->filling;
    s->filling = NULL;
    if (!b) return;
    b->next = s->sending;
    s->sending = b;
    odisk_send(b);
}

/* Queues the drop of the route (key, off, version) at the master. */
static void odisk_route_drop(fx_owner_t *o, const char *key, uint32_t klen, uint64_t off, uint64_t pms, uint64_t pv)
{
    odisk_t *s = o->disk;
    if (s->filling && s->filling->q.n >= ODISK_EVICT_BATCH) odisk_on_flush(o->r, &s->flush_timer);
    if (!s->filling) {
        s->filling = fx_calloc(1, sizeof *s->filling);
        if (!s->filling) {
            s->route_drops_failed++;
            return;
        }
        s->filling->o = o;
        fx_timer_init(&s->filling->t);
        fx_timer_arm(o->r, &s->flush_timer, 0, odisk_on_flush);
    }
    const uint64_t v[3] = {off, pms, pv};
    if (!fx_keybatch_add(&s->filling->q, key, klen, v, 3)) s->route_drops_failed++;
}

/* ---- the store's hook: a segment leaves for room ---- */
/* The hook runs inside the store (an append that opened a segment): the segment's records
 * are handled on the next reactor turn, outside it. */
/* Unpublishes the records of the retiring segments, ODISK_RETIRE_SLICE a reactor turn: a
 * 64 MiB segment of 8 KiB records (8,192) held the reactor 2.6 ms at once, and the gets
 * and puts that came meanwhile waited for it; a slice of 512 still held it 150 us (the
 * trace replay: 176 slices), one of 64 about 20 us. */
#define ODISK_RETIRE_SLICE 64u
static void odisk_on_retire(fx_reactor_t *r, fx_timer_t *t)
{
    odisk_t *s = FX_CONTAINER_OF(t, odisk_t, retire_timer);
    fx_owner_t *o = s->o;
    size_t budget = ODISK_RETIRE_SLICE;
    while (s->retiring && budget) {
        odisk_retiring_t *q = s->retiring;
        for (; q->done < q->n && budget; q->done++, budget--) {
            fx_disk_meta_t m;
            const char *key = NULL;
            uint32_t klen = 0;
            uint64_t off = q->offs[q->done];
            /* by its offset (disk offsets are never reused: a record still there is the key's
             * current one; a newer version or a DELETE took it out of the index), not by a
             * hash of its key: one lookup a record instead of two */
            if (!fx_disk_rec_at(s->d, off, &key, &klen, &m)) continue;
            odisk_route_drop(o, key, klen, off, m.put_ms, m.put_ver);
            fx_disk_drop(s->d, off);
            s->retired_records++;
        }
        if (q->done < q->n) break;
        s->retiring = q->next;
        s->retired_segments++;
        fx_disk_segment_free(s->d, q->seg); /* reads in flight hold the file; nothing names it now */
        fx_free(q);
    }
    if (s->retiring) fx_timer_arm(r, &s->retire_timer, 0, odisk_on_retire); /* the rest next turn */
}

/* ---- issue 42: each tenant's bytes on this owner's disk tier, and its disk quota ---- */
static uint64_t odisk_quota(const fx_owner_t *o, int k)
{
    return k >= 0 && (uint32_t)k < o->cfg.n_tenants ? o->cfg.tenants[k].disk_quota_bytes : 0;
}

/* Keeps the ring's live entries only (in order) once it holds many gone ones; out of
 * memory: kept as it is (met and skipped later). */
static void odisk_tfifo_compact(odisk_t *s, odisk_tfifo_t *q)
{
    uint64_t *no = fx_malloc(q->cap * sizeof *no);
    if (!no) return;
    size_t w = 0;
    const char *key;
    uint32_t klen;
    fx_disk_meta_t m;
    for (size_t i = 0; i < q->n; i++) {
        uint64_t off = q->offs[(q->head + i) % q->cap];
        if (fx_disk_rec_at(s->d, off, &key, &klen, &m)) no[w++] = off;
    }
    fx_free(q->offs);
    q->offs = no;
    q->head = 0;
    q->n = w;
}

static void odisk_tfifo_push(odisk_t *s, odisk_tfifo_t *q, uint64_t off)
{
    if (q->n > 2 * q->live + 1024) odisk_tfifo_compact(s, q);
    if (q->n == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 1024;
        uint64_t *no = fx_malloc(nc * sizeof *no);
        if (!no) return; /* this record is not in the ring: the quota cannot take it back */
        for (size_t i = 0; i < q->n; i++) no[i] = q->offs[(q->head + i) % q->cap];
        fx_free(q->offs);
        q->offs = no;
        q->cap = nc;
        q->head = 0;
    }
    q->offs[(q->head + q->n++) % q->cap] = off;
}

static void odisk_record_counted(void *arg, uint64_t off, const char *key, uint32_t klen, uint64_t bytes, bool added)
{
    fx_owner_t *o = arg;
    int k = fx_otenant_of_key(o, key, klen);
    if (k < 0) return; /* a tenant this owner does not list */
    uint64_t *b = &fx_otenant_at(o, k)->disk_bytes;
    *b = added ? *b + bytes : *b - FX_MIN(*b, bytes);
    if (!odisk_quota(o, k) || !o->disk) return;
    odisk_tfifo_t *q = &o->disk->tq[k];
    if (!added) {
        q->live -= q->live > 0;
        return;
    }
    q->live++;
    odisk_tfifo_push(o->disk, q, off);
}

/* A victim of tenant k about to be written to disk (bytes there): its oldest records leave
 * the disk (the index, and their routes at the master; no tombstone: they are not deleted,
 * only out of its share) until it fits its disk quota; false when it cannot (the victim then
 * goes without a disk copy). A record counts from its append on (indexed while staged). */
static bool odisk_quota_admit(fx_owner_t *o, int k, uint64_t bytes)
{
    uint64_t quota = odisk_quota(o, k);
    if (!quota) return true;
    odisk_t *s = o->disk;
    fx_tenant_snap_t *t = fx_otenant_at(o, k);
    odisk_tfifo_t *q = &s->tq[k];
    while (t->disk_bytes + bytes > quota && q->n && bytes <= quota) {
        uint64_t off = q->offs[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
        const char *key;
        uint32_t klen;
        fx_disk_meta_t m;
        if (!fx_disk_rec_at(s->d, off, &key, &klen, &m)) continue; /* gone meanwhile */
        char kc[FLUXON_MAX_KEY_BYTES];
        memcpy(kc, key, klen); /* the drop frees the record's key */
        fx_disk_drop(s->d, off);
        odisk_route_drop(o, kc, klen, off, m.put_ms, m.put_ver);
        t->disk_quota_drops++;
    }
    if (t->disk_bytes + bytes <= quota) return true;
    t->disk_quota_refused++;
    return false;
}

static void odisk_segment_retiring(void *arg, uint64_t seg, const uint64_t *offs, const char *const *keys,
                                   const uint32_t *klens, size_t n)
{
    (void)keys, (void)klens; /* read from the index when each record is unpublished */
    fx_owner_t *o = arg;
    odisk_t *s = o->disk;
    odisk_retiring_t *q = fx_malloc(sizeof *q + n * sizeof q->offs[0]);
    if (!q) { /* its records stay indexed and routed; the store stays past capacity by it */
        FX_ERROR("disk tier: out of memory retiring segment %llu (%zu records)", (unsigned long long)seg, n);
        return;
    }
    q->seg = seg;
    q->n = n;
    q->done = 0;
    memcpy(q->offs, offs, n * sizeof q->offs[0]);
    q->next = NULL; /* last in line: the segments retire in the order they went */
    odisk_retiring_t **tail = &s->retiring;
    while (*tail) tail = &(*tail)->next;
    *tail = q;
    if (!fx_timer_armed(&s->retire_timer)) fx_timer_arm(o->r, &s->retire_timer, 0, odisk_on_retire);
}

/* ---- DIR/CONTACT (W6): a master heard from, and its grace ---- */
#define ODISK_CONTACT_MS 5000u

static void odisk_contact(fx_owner_t *o)
{
    uint32_t grace = fx_olink_dead_grace_ms(o); /* 0: not registered now */
    if (fx_odisk_on(o) && grace) fx_disk_note_contact(o->disk->d, fx_realtime_ns() / 1000000u, grace);
}

static void odisk_on_contact(fx_reactor_t *r, fx_timer_t *t)
{
    odisk_t *s = FX_CONTAINER_OF(t, odisk_t, contact_timer);
    odisk_contact(s->o);
    fx_timer_arm(r, t, ODISK_CONTACT_MS, odisk_on_contact);
}

/* Started again after longer than the master's dead_owner_grace_ms since the last contact
 * (DIR/CONTACT): a master may have forgotten this owner, and the deletions it missed, and
 * then restarted itself (so it cannot say so): the records go rather than come back. */
static void odisk_drop_if_stale(fx_owner_t *o)
{
    odisk_t *s = o->disk;
    uint64_t at, grace, now = fx_realtime_ns() / 1000000u;
    if (!fx_disk_records(s->d) || !fx_disk_last_contact(s->d, &at, &grace) || !grace || now <= at + grace) return;
    FX_WARN("disk: the last contact with a master was %.0f s ago, longer than its dead_owner_grace_ms %llu: it may "
            "have forgotten this owner and the deletions made meanwhile, so the disk's %llu records are dropped, not "
            "re-published", (double)(now - at) / 1000.0, (unsigned long long)grace,
            (unsigned long long)fx_disk_records(s->d));
    s->stale_drops++;
    fx_odisk_forget_all(o);
}

/* ---- lifecycle ---- */
FX_INTERNAL int fx_odisk_init(fx_owner_t *o)
{
    odisk_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    o->disk = s;
    s->o = o;
    fx_timer_init(&s->flush_timer);
    fx_timer_init(&s->retire_timer);
    fx_timer_init(&s->contact_timer);
    if (!o->cfg.disk_path[0]) return FLUXON_OK;
    fx_ostore_set_disk_hook(o, fx_odisk_invalidate);
    fx_disk_cfg_t dc = {.path = o->cfg.disk_path,
                        .owner_id = o->cfg.node_id,
                        .capacity_bytes = o->cfg.disk_capacity_bytes,
                        .segment_bytes = o->cfg.disk_segment_bytes,
                        .direct_io = o->cfg.disk_direct_io,
                        /* 16 MiB of staging: an eviction burst is copied, not dropped, while
                         * the disk catches up (a put never waits for it) */
                        .write_buffers = ODISK_WRITE_BUFFERS};
    fx_disk_hooks_t hooks = {odisk_segment_retiring, odisk_record_counted, o};
    char err[512] = "";
    int rc = fx_disk_open(o->r, &dc, &hooks, &s->d, err, sizeof err);
    if (rc != FLUXON_OK) {
        FX_ERROR("config rejected: disk: %s", err[0] ? err : fluxon_status_string(rc));
        s->d = NULL;
        return FLUXON_ERR_CONFIG;
    }
    s->segment_bytes = o->cfg.disk_segment_bytes ? o->cfg.disk_segment_bytes : FX_DISK_SEGMENT_DEFAULT;
    fx_timer_arm(o->r, &s->contact_timer, ODISK_CONTACT_MS, odisk_on_contact);
    /* a warning unless reserve.expected.value_len says the values are of a size that fits */
    bool expected_fit = o->cfg.has_expected && o->cfg.expected_value_len + 2 * FX_DISK_BLOCK <= s->segment_bytes;
    if (o->cfg.grant_bytes && o->cfg.grant_bytes + 2 * FX_DISK_BLOCK > s->segment_bytes)
        fx_log(expected_fit ? FX_LOG_INFO : FX_LOG_WARN,"disk tier: values up to reserve.grant_bytes %llu may be put, but a disk segment takes at most %llu "
                "bytes of value (disk.segment_bytes %llu less a header block): larger ones never go to disk",
                (unsigned long long)o->cfg.grant_bytes, (unsigned long long)(s->segment_bytes - 2 * FX_DISK_BLOCK),
                (unsigned long long)s->segment_bytes);
    return FLUXON_OK;
}

FX_INTERNAL void fx_odisk_fini(fx_owner_t *o)
{
    odisk_t *s = o->disk;
    if (!s) return;
    fx_timer_disarm(o->r, &s->flush_timer);
    fx_timer_disarm(o->r, &s->retire_timer);
    fx_timer_disarm(o->r, &s->contact_timer);
    while (s->retiring) {
        odisk_retiring_t *q = s->retiring;
        s->retiring = q->next;
        fx_free(q);
    }
    if (s->filling) odisk_drop_free(s->filling);
    while (s->sending) { /* one still waiting for its answer is freed by odisk_on_evict */
        odisk_drop_t *b = s->sending;
        s->sending = b->next;
        if (fx_timer_armed(&b->t)) {
            fx_timer_disarm(o->r, &b->t);
            odisk_drop_free(b);
        }
    }
    fx_disk_close(s->d, 2000);
    fx_u64map_free(&s->read_once);
    for (uint32_t k = 0; k < FX_TENANT_SNAP_MAX; k++) fx_free(s->tq[k].offs);
    fx_free(s);
    o->disk = NULL;
}

/* ---- what the other modules call ---- */
FX_INTERNAL bool fx_odisk_find(fx_owner_t *o, const char *key, uint32_t klen, uint64_t *off, fx_disk_meta_t *m)
{
    return fx_odisk_on(o) && fx_disk_find(o->disk->d, key, klen, off, m) == FLUXON_OK;
}

FX_INTERNAL bool fx_odisk_has(fx_owner_t *o, const char *key, uint32_t klen) { return fx_odisk_has_h(o, key, klen, 0); }

FX_INTERNAL void fx_odisk_prefetch_key(fx_owner_t *o, uint64_t khash)
{
    if (fx_odisk_on(o)) fx_disk_prefetch_key(o->disk->d, khash);
}

FX_INTERNAL bool fx_odisk_has_h(fx_owner_t *o, const char *key, uint32_t klen, uint64_t khash)
{
    uint64_t off;
    fx_disk_meta_t m;
    return fx_odisk_on(o) && fx_disk_find_h(o->disk->d, key, klen, khash, &off, &m) == FLUXON_OK;
}

FX_INTERNAL void fx_odisk_demote(fx_owner_t *o, owner_entry_t *const *v, const fx_disk_meta_t *meta, size_t n,
                                 uint64_t *disk, bool *reused)
{
    memset(disk, 0, n * sizeof *disk);
    memset(reused, 0, n * sizeof *reused);
    if (!fx_odisk_on(o)) return;
    odisk_t *s = o->disk;
    size_t need = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!meta[i].group_size) continue;
        uint64_t off;
        fx_disk_meta_t m;
        /* only a fetched value (read back from this disk, or from another owner) can have its
         * version on disk already: a put's version is new (the lookup, a cache miss a victim,
         * was 15 % of the demotions' time in the trace replay) */
        if (v[i]->remote && fx_disk_find(s->d, v[i]->key, v[i]->klen, &off, &m) == FLUXON_OK &&
            m.put_ms == v[i]->put_ms && m.put_ver == v[i]->put_ver) {
            disk[i] = off; /* read back from disk earlier: that record is this version */
            reused[i] = true;
            s->demote_reused++;
            continue;
        }
        need++;
        bytes += v[i]->klen + v[i]->value_len;
    }
    if (need && !fx_disk_room(s->d, need, bytes)) { /* no staging room: dropped, never a wait */
        if (fx_disk_writes_paused(s->d)) s->demote_failing += need; /* writes paused after a failure */
        else s->demote_busy += need;
        return;
    }
    const uint8_t *base = fx_segment_base(o->seg);
    for (size_t i = 0; i < n && need; i++) {
        owner_entry_t *en = v[i];
        if (!meta[i].group_size || disk[i]) continue;
        int k = o->cfg.n_tenants ? fx_otenant_of_key(o, en->key, en->klen) : -1;
        if (odisk_quota(o, k) && !odisk_quota_admit(o, k, fx_disk_rec_bytes(en->value_len))) continue;
        uint64_t off = 0;
        if (i + 1 < n) /* loads under this value's checksum */
            fx_stream_prefetch_next(base + v[i + 1]->slot.offset, v[i + 1]->value_len);
        int rc = fx_disk_append_h(s->d, en->key, en->klen, en->khash, base + en->slot.offset, &meta[i], &off);
        if (rc == FLUXON_OK) {
            disk[i] = off;
        } else if (rc == FLUXON_ERR_INVALID_ARGUMENT) { /* larger than a segment can take */
            if (!s->demote_too_big++)
                FX_WARN("disk tier: a value of %llu bytes does not fit a segment (disk.segment_bytes %llu, less a 4 KiB "
                        "header block): such values never go to disk (counted disk_demote_too_big)",
                        (unsigned long long)en->value_len, (unsigned long long)s->segment_bytes);
        } else {
            s->demote_busy++;
        }
    }
}

FX_INTERNAL void fx_odisk_moved(fx_owner_t *o, uint64_t disk_off, int st)
{
    if (!fx_odisk_on(o) || !disk_off) return;
    if (st == FLUXON_OK) return; /* counted by eviction: evict_to_disk */
    o->disk->move_refused++;
    (void)fx_disk_kill(o->disk->d, disk_off); /* refused: the key may be deleted or replaced meanwhile */
}

FX_INTERNAL int fx_odisk_drop(fx_owner_t *o, uint64_t disk_off)
{
    if (!fx_odisk_on(o)) return FLUXON_ERR_NOT_FOUND;
    if (fx_owner_fault(o, FX_FAULT_DROP, "INVALIDATE")) { /* test-only: no tombstone, as when none can be staged */
        FX_WARN("test fault: no tombstone for the disk record at %llx", (unsigned long long)disk_off);
        fx_disk_drop(o->disk->d, disk_off);
        return FLUXON_ERR_UNAVAILABLE;
    }
    return fx_disk_kill(o->disk->d, disk_off);
}

/* Only the record the master meant: an INVALIDATE the master held while this owner was
 * away, or sent again after its restart, names an offset that may hold another record by
 * now (its segment retired and written again). */
FX_INTERNAL int fx_odisk_invalidate(fx_owner_t *o, uint64_t disk_off, const char *key, uint32_t klen, uint64_t put_ms,
                                    uint64_t put_ver)
{
    const char *k = NULL;
    uint32_t kl = 0;
    fx_disk_meta_t m;
    if (!fx_odisk_on(o) || !fx_disk_rec_at(o->disk->d, disk_off, &k, &kl, &m)) return FLUXON_ERR_NOT_FOUND;
    if (kl != klen || memcmp(k, key, klen) || m.put_ms != put_ms || m.put_ver != put_ver) {
        o->disk->invalidate_other++;
        return FLUXON_ERR_NOT_FOUND;
    }
    return fx_odisk_drop(o, disk_off);
}

FX_INTERNAL void fx_odisk_forget_all(fx_owner_t *o)
{
    if (!fx_odisk_on(o)) return;
    (void)fx_disk_barrier(o->disk->d);
    fx_u64map_free(&o->disk->read_once);
}

FX_INTERNAL bool fx_odisk_when_written(fx_owner_t *o, fx_disk_written_fn cb, void *arg, bool *nomem)
{
    *nomem = false;
    return fx_odisk_on(o) && fx_disk_when_written(o->disk->d, cb, arg, nomem);
}

FX_INTERNAL int fx_odisk_read(fx_owner_t *o, uint64_t off, const char *key, uint32_t klen, void *dst, uint64_t len,
                              fx_disk_read_fn done, void *arg)
{
    if (!fx_odisk_on(o)) return FLUXON_ERR_NOT_FOUND;
    return fx_disk_read(o->disk->d, off, key, klen, dst, len, done, arg);
}

FX_INTERNAL bool fx_odisk_promote(fx_owner_t *o, uint64_t off)
{
    odisk_t *s = o->disk;
    if (!s) return true;
    if (fx_u64map_del(&s->read_once, off, NULL) == FLUXON_OK) return true;
    /* bounded: the offsets of records read once, forgotten wholesale past twice the index */
    if (s->read_once.count > 2 * fx_disk_records(s->d) + 1024) fx_u64map_free(&s->read_once);
    (void)fx_u64map_put(&s->read_once, off, NULL, NULL); /* out of memory: promoted next time anyway */
    return false;
}

FX_INTERNAL void fx_odisk_forget(fx_owner_t *o, const char *key, uint32_t klen, uint64_t off, uint64_t put_ms,
                                 uint64_t put_ver)
{
    if (!o->disk) return;
    o->disk->forgotten++;
    if (fx_odisk_on(o)) (void)fx_disk_kill(o->disk->d, off);
    odisk_route_drop(o, key, klen, off, put_ms, put_ver);
}

FX_INTERNAL bool fx_odisk_will_republish(fx_owner_t *o)
{
    if (!fx_odisk_on(o)) return false;
    o->disk->announced = !o->disk->registered && fx_disk_records(o->disk->d) > 0;
    return o->disk->announced;
}

FX_INTERNAL bool fx_odisk_first_registration(fx_owner_t *o)
{
    if (!fx_odisk_on(o)) return false;
    bool first = !o->disk->registered;
    o->disk->registered = true;
    if (first) odisk_drop_if_stale(o); /* before anything is re-published */
    odisk_contact(o);                  /* registered: the master's grace is known now */
    /* announced in REGISTER: the master awaits the last batch, even if the drop left none */
    return first && (fx_disk_records(o->disk->d) > 0 || o->disk->announced);
}

FX_INTERNAL void fx_odisk_foreach(fx_owner_t *o, fx_disk_visit_fn cb, void *arg)
{
    if (fx_odisk_on(o)) fx_disk_foreach(o->disk->d, cb, arg);
}

FX_INTERNAL void fx_odisk_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    odisk_t *s = o->disk;
    if (!s) return;
    m->disk_move_refused = s->move_refused;
    m->disk_invalidate_other = s->invalidate_other;
    m->disk_demote_busy = s->demote_busy;
    m->disk_demote_failing = s->demote_failing;
    m->disk_demote_too_big = s->demote_too_big;
    m->disk_demote_reused = s->demote_reused;
    m->disk_forgotten = s->forgotten;
    m->disk_routes_dropped = s->routes_dropped;
    m->disk_route_drops_failed = s->route_drops_failed;
    m->disk_retired_records = s->retired_records;
    if (!s->d) return;
    fx_disk_stats_t st;
    fx_disk_stats(s->d, &st);
    m->disk_on = true;
    m->disk_capacity_bytes = st.capacity_bytes;
    m->disk_used_bytes = st.used_bytes;
    m->disk_records = st.records;
    m->disk_segments = st.segments;
    m->disk_appends = st.appends;
    m->disk_append_bytes = st.append_bytes;
    m->disk_writes = st.writes;
    m->disk_write_bytes = st.write_bytes;
    m->disk_write_errors = st.write_errors;
    m->disk_reads = st.reads;
    m->disk_read_bytes = st.read_bytes;
    m->disk_reads_in_flight = st.reads_in_flight;
    m->disk_read_errors = st.read_errors;
    m->disk_crc_failures = st.crc_failures;
    m->disk_staged_reads = st.staged_reads;
    m->disk_read_ios = st.read_ios;
    m->disk_read_gap_bytes = st.read_gap_bytes;
    m->disk_read_latency = st.read_latency;
    m->disk_segments_freed = st.segments_freed;
    m->disk_segments_recycled = st.segments_recycled;
    m->disk_recovered_recycled = st.recovered_recycled;
    m->disk_recovered_killed = st.recovered_killed;
    m->disk_tombstones = st.tombstones;
    m->disk_barriers = st.barriers;
    m->disk_tomb_failures = st.tomb_failures;
    m->disk_contact_writes = st.contact_writes;
    m->disk_stale_drops = s->stale_drops;
    m->disk_recovered_records = st.recovered_records;
    m->disk_recovered_torn = st.recovered_torn;
    m->disk_recover_ms = st.recover_ms;
    m->disk_direct_io = st.direct_io;
    m->disk_direct_fallbacks = st.direct_fallbacks;
    m->disk_writes_failing = st.writes_failing;
    m->disk_write_stops = st.write_stops;
    m->disk_segment_waits = st.segment_waits;
}
