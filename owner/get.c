/* get.c — hostless get_start on the owner. A batch is split per key into LocalJoin
 * (visible here: pinned at once), InflightJoin (another batch on this owner is already
 * fetching the key: wait for it) and Leader (G1); all pins are taken before any leader
 * work (G2); the leaders of a batch are fetched together (fetch.c, ONE LOOKUP, G8); one
 * fetch per key per owner (G6/G7); results are scattered back to the original indices
 * before the prefix is computed (G4) and everything past transferable_len is released at
 * once (G5). The transferable prefix is held by a get handle until the external consumes
 * or cancels it, or goes away. The owner never expires a handle on its own: a consume it
 * reads late (a stalled reactor) would otherwise find the pins gone under a read plan the
 * engine is already reading (B5). handle_ttl_ms is the CLIENT's bound: its library
 * cancels a handle not consumed by then. */
#include <stdio.h>

#include "groups.h"
#include "hmap.h"
#include "log.h"
#include "owner_oracle.h"
#include "owner_tenant.h"
#include "owner_disk.h"
#include "owner_elsewhere.h"
#include "owner_evict.h"
#include "owner_ext.h"
#include "owner_fetch.h"
#include "owner_get.h"
#include "owner_link.h"

typedef struct owner_getb {
    fx_owner_t *o;
    owner_ext_t *ext;
    fx_conn_t *conn;
    uint64_t req_id;
    size_t n, n_groups;
    size_t looked; /* keys [0, looked) were looked up (an owner alone stops at a miss) */
    uint64_t *group_lens;
    uint8_t best_effort;
    int8_t *res; /* 0 pending, 1 hit, < 0 miss (oget_miss_code: the reason) */
    uint64_t *holder_ids, *offsets, *lens;
    size_t pending;
    uint64_t t0_ns; /* get_start arrived (fx_now_ns), for the latency histogram */
    int tenant;     /* its external's tenant (tenant.c's index; -1: none), whose hits and misses it counts */
} owner_getb_t;

typedef struct oget_waiter {
    owner_getb_t *b;
    size_t i;
} oget_waiter_t;

typedef struct owner_handle {
    uint64_t id;
    owner_ext_t *ext;
    struct owner_handle *prev, *next;
    size_t n;
    uint64_t *holder_ids;
    fx_owner_t *o;
} owner_handle_t;

typedef struct oget_state {
    fx_hmap_t *gets;    /* key -> owner_oget_t (one in-flight get per key, G6) */
    fx_hmap_t *handles; /* u64 id -> owner_handle_t */
    uint64_t get_batches, get_keys, local_hits, joined, leaders, misses, handles_opened, keys_past_miss;
    /* issue 39: PREFETCH requests, their keys, the disk reads they started, keys refused
     * (bad key) and gets that joined a prefetch's read in flight */
    uint64_t prefetch_requests, prefetch_keys, prefetch_reads, prefetch_bad_keys, prefetch_joined;
    uint64_t prefetch_lookups; /* issue 38: keys a PREFETCH asked the master about (held elsewhere?) */
    uint64_t prefetch_past_prefix; /* keys after one held nowhere: not fetched (the get stops there) */
    uint64_t joined_hits, leader_hits, prefix_raw_keys, prefix_transferable_keys;
    uint64_t miss_reason[7]; /* by -res[] code - 1 (oget_why_status order) */
    uint64_t limit_pins, limit_handles; /* client_limits refusals (issue 44 C3) */
    uint64_t limit_log_ms;              /* last warning about them (one a second) */
    uint64_t get_value_bytes; /* value bytes of the transferable prefixes answered */
    fx_hist_t get_start_latency;
} oget_state_t;

/* A miss reason as a res[] code and back: the caller of fluxon_get learns whether the key
 * is absent or could not be copied (no room, no master, transfer failed). */
static const int oget_why_status[] = {0, FLUXON_ERR_NOT_FOUND, FLUXON_ERR_UNAVAILABLE, FLUXON_ERR_NO_SPACE,
                                      FLUXON_ERR_TIMEOUT, FLUXON_ERR_NOMEM, FLUXON_ERR_INTERNAL,
                                      FLUXON_ERR_BUSY /* client_limits (issue 44 C3) */};

static int8_t oget_miss_code(int why)
{
    if (why == 0 || why == FLUXON_ERR_STALE) return -1; /* STALE: the version went meanwhile */
    if (why == FLUXON_ERR_BUSY) return -7;
    for (int8_t c = 1; c < (int8_t)FX_ARRAY_LEN(oget_why_status); c++)
        if (oget_why_status[c] == why) return (int8_t)-c;
    return -6; /* any other failure: internal */
}

static void oget_batch_finalize(owner_getb_t *b);

/* ---- batches ---- */
static void oget_batch_free(owner_getb_t *b)
{
    fx_conn_unref(b->conn);
    fx_free(b->group_lens);
    fx_free(b->res);
    fx_free(b->holder_ids);
    fx_free(b->offsets);
    fx_free(b->lens);
    fx_free(b);
}

/* client_limits.max_pinned_bytes (issue 44 C3): 0 means three quarters of the hot tier. */
static uint64_t oget_pin_limit(fx_owner_t *o)
{
    return o->cfg.client_max_pinned_bytes ? o->cfg.client_max_pinned_bytes : fx_oev_hot_capacity(o) / 4 * 3;
}

static void oget_limit_log(fx_owner_t *o, owner_ext_t *e, const char *what, uint64_t held, const char *field,
                           uint64_t limit)
{
    uint64_t now = fx_now_ms();
    if (o->get->limit_log_ms && now - o->get->limit_log_ms < 1000) return; /* one line a second */
    o->get->limit_log_ms = now;
    FX_WARN("client %s holds %llu %s, at its limit (%s %llu): refused with FLUXON_ERR_BUSY until it releases some",
            e->node_id[0] ? e->node_id : fx_conn_desc(e->conn), (unsigned long long)held, what, field,
            (unsigned long long)limit);
}

static void oget_set_hit(owner_getb_t *b, size_t i, owner_entry_t *en)
{
    fx_owner_t *o = b->o;
    if (!fx_conn_is_open(b->conn)) { /* its client went: b->ext is freed (a fetch outlived it) */
        b->res[i] = -1;
        return;
    }
    /* issue 44 C3; a client holding nothing may always pin one value (a value larger than the
     * limit would be unreadable otherwise: R3 admits values up to the hot tier) */
    if (b->ext && b->ext->pinned_bytes && b->ext->pinned_bytes + en->slot.slot_size > oget_pin_limit(o)) {
        o->get->limit_pins++;
        oget_limit_log(o, b->ext, "pinned bytes", b->ext->pinned_bytes, "client_limits.max_pinned_bytes",
                       oget_pin_limit(o));
        b->res[i] = oget_miss_code(FLUXON_ERR_BUSY);
        return;
    }
    owner_holder_t *h = fx_ostore_holder_new(o, b->ext, &en->slot);
    if (h) {
        fx_oracle_entry(o, en->remote ? "local hit on a copy from another owner" : "local hit", en, NULL);
        fx_oev_touch(o, en); /* a local hit (inline or joined) warms the hot tier */
        b->res[i] = 1;
        b->holder_ids[i] = h->id;
        b->offsets[i] = en->slot.offset;
        b->lens[i] = en->value_len;
    } else {
        b->res[i] = -1;
    }
}

/* ---- per-key in-flight gets ---- */
static void oget_og_free(owner_oget_t *og)
{
    fx_free(og->w);
    fx_free(og->key);
    fx_free(og);
}

/* fetch.c's completion: every waiter of the key gets the outcome. */
static void oget_complete(fx_owner_t *o, owner_oget_t *og, owner_entry_t *en)
{
    fx_hmap_del_h(o->get->gets, og->key, og->klen, og->khash, NULL);
    for (size_t k = 0; k < og->nw; k++) {
        owner_getb_t *b = og->w[k].b;
        if (en) oget_set_hit(b, og->w[k].i, en);
        if (en && b->res[og->w[k].i] == 1) /* w[0] led, unless a prefetch did */
            (*(k || og->prefetch ? &o->get->joined_hits : &o->get->leader_hits))++;
        else b->res[og->w[k].i] = oget_miss_code(og->why);
        if (--b->pending == 0) oget_batch_finalize(b);
    }
    oget_og_free(og);
}

static int oget_add_waiter(owner_oget_t *og, owner_getb_t *b, size_t i)
{
    if (og->nw == og->capw) {
        size_t nc = og->capw ? og->capw * 2 : 4;
        oget_waiter_t *nw = fx_realloc(og->w, nc * sizeof *nw);
        if (!nw) return FLUXON_ERR_NOMEM;
        og->w = nw;
        og->capw = nc;
    }
    og->w[og->nw++] = (oget_waiter_t){b, i};
    b->pending++;
    return FLUXON_OK;
}

/* ---- handles ---- */
static void oget_handle_free(fx_owner_t *o, owner_handle_t *hd, bool release_holders)
{
    fx_hmap_del(o->get->handles, &hd->id, sizeof hd->id, NULL);
    if (hd->prev) hd->prev->next = hd->next;
    else hd->ext->handles = hd->next;
    if (hd->next) hd->next->prev = hd->prev;
    hd->ext->n_handles--;
    if (release_holders)
        for (size_t i = 0; i < hd->n; i++) fx_ostore_holder_release_id(o, hd->ext, hd->holder_ids[i]);
    fx_free(hd->holder_ids);
    fx_free(hd);
}

/* A handle over the batch's first n holders; its id, or 0 (no memory). */
static uint64_t oget_handle_new(owner_getb_t *b, size_t n)
{
    fx_owner_t *o = b->o;
    oget_state_t *s = o->get;
    owner_handle_t *hd = fx_calloc(1, sizeof *hd);
    uint64_t *ids = fx_malloc(n * sizeof *ids);
    if (hd && ids) {
        hd->id = fx_ostore_next_id(o);
        if (fx_hmap_put(s->handles, &hd->id, sizeof hd->id, hd, NULL) == FLUXON_OK) {
            memcpy(ids, b->holder_ids, n * sizeof *ids);
            hd->holder_ids = ids;
            hd->n = n;
            hd->o = o;
            hd->ext = b->ext;
            hd->next = b->ext->handles;
            if (b->ext->handles) b->ext->handles->prev = hd;
            b->ext->handles = hd;
            b->ext->n_handles++;
            s->handles_opened++;
            return hd->id;
        }
    }
    fx_free(hd);
    fx_free(ids);
    return 0;
}

/* ---- finalize: prefix, tail release, handle ---- */
typedef struct oget_prefix {
    size_t raw, transferable, groups;
    int64_t first_miss_group;
    bool all_hit;
} oget_prefix_t;

/* The hit prefix rounded down to whole atomic groups (A1); none unless all hit or
 * best_effort. */
static oget_prefix_t oget_prefix(const owner_getb_t *b)
{
    oget_prefix_t x = {0, 0, 0, -1, true};
    size_t n = b->n;
    while (x.raw < n && b->res[x.raw] == 1) x.raw++;
    for (size_t i = 0; i < n; i++) x.all_hit &= b->res[i] == 1;
    fx_group_iter_t it = fx_group_iter(b->group_lens, b->n_groups, n);
    while (fx_group_next(&it)) {
        if (it.start + it.len <= x.raw) {
            x.transferable = it.start + it.len;
            x.groups++;
        } else if (x.first_miss_group < 0 && x.raw < n) {
            x.first_miss_group = (int64_t)it.g;
        }
    }
    if (!b->best_effort && !x.all_hit) x.transferable = x.groups = 0;
    return x;
}

static void oget_batch_finalize(owner_getb_t *b)
{
    fx_owner_t *o = b->o;
    size_t n = b->n;
    oget_prefix_t x = oget_prefix(b);
    o->get->keys_past_miss += n - b->looked;
    fx_tenant_snap_t *t = b->tenant >= 0 ? fx_otenant_at(o, b->tenant) : NULL; /* issue 42 */
    for (size_t i = 0; i < b->looked; i++) {
        if (t) (*(b->res[i] == 1 ? &t->hits : &t->misses))++;
        if (b->res[i] == 1) continue;
        o->get->misses++;
        if (b->res[i] < 0 && -b->res[i] <= 7) o->get->miss_reason[-b->res[i] - 1]++;
    }
    bool open = fx_conn_is_open(b->conn) && b->ext;
    /* G5: everything past transferable_len goes now */
    for (size_t i = open ? x.transferable : 0; i < n; i++)
        if (b->res[i] == 1) fx_ostore_holder_release_id(o, b->ext, b->holder_ids[i]);
    if (!open) {
        oget_batch_free(b);
        return;
    }
    if (x.transferable && b->ext->n_handles >= o->cfg.client_max_handles) { /* issue 44 C3 */
        for (size_t i = 0; i < x.transferable; i++) fx_ostore_holder_release_id(o, b->ext, b->holder_ids[i]);
        o->get->limit_handles++;
        oget_limit_log(o, b->ext, "get handles not consumed", b->ext->n_handles, "client_limits.max_handles",
                       o->cfg.client_max_handles);
        fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_GET_START, 0, 0, 0, b->req_id};
        fx_conn_reply_error(b->conn, &q, FLUXON_ERR_BUSY,
                            "get_start: this client holds %u get handles not consumed (client_limits.max_handles %u)",
                            b->ext->n_handles, o->cfg.client_max_handles);
        oget_batch_free(b);
        return;
    }
    uint64_t hid = x.transferable ? oget_handle_new(b, x.transferable) : 0;
    if (x.transferable && !hid) {
        for (size_t i = 0; i < x.transferable; i++) fx_ostore_holder_release_id(o, b->ext, b->holder_ids[i]);
        fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_GET_START, 0, 0, 0, b->req_id};
        fx_conn_reply_error(b->conn, &q, FLUXON_ERR_NOMEM, "get_start: owner out of memory");
        oget_batch_free(b);
        return;
    }
    size_t raw = x.raw, tl = x.transferable;
    o->get->prefix_raw_keys += raw;
    o->get->prefix_transferable_keys += tl;
    for (size_t i = 0; i < tl; i++) o->get->get_value_bytes += b->lens[i];
    fx_hist_observe(&o->get->get_start_latency, fx_now_ns() - b->t0_ns);
    int miss = raw < n && b->res[raw] < 0 ? oget_why_status[-b->res[raw]] : 0;
    fx_body_get_start_ack_t ack = {hid, raw, tl, x.groups, raw < n ? (int64_t)raw : -1, x.first_miss_group,
                                   x.all_hit, {b->offsets, (uint32_t)tl}, {b->lens, (uint32_t)tl},
                                   {b->holder_ids, (uint32_t)tl}, miss};
    FX_CONN_SEND(b->conn, FX_MSG_GET_START, FX_FLAG_RESPONSE, FLUXON_OK, b->req_id, get_start_ack, &ack);
    oget_batch_free(b);
}

/* ---- get_start ---- */
static owner_getb_t *oget_batch_new(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h,
                                    const fx_body_get_start_t *g)
{
    size_t n = g->keys.n;
    owner_getb_t *b = fx_calloc(1, sizeof *b);
    if (!b) return NULL;
    b->o = o;
    b->ext = e;
    b->tenant = e ? e->tenant : -1;
    b->conn = e->conn;
    fx_conn_ref(e->conn);
    b->req_id = h->req_id;
    b->t0_ns = fx_now_ns();
    b->n = b->looked = n;
    b->best_effort = g->best_effort;
    b->n_groups = g->group_lens.n;
    b->group_lens = fx_calloc(b->n_groups ? b->n_groups : 1, sizeof *b->group_lens);
    b->res = fx_calloc(n, sizeof *b->res);
    b->holder_ids = fx_calloc(n, sizeof *b->holder_ids);
    b->offsets = fx_calloc(n, sizeof *b->offsets);
    b->lens = fx_calloc(n, sizeof *b->lens);
    if (!b->group_lens || !b->res || !b->holder_ids || !b->offsets || !b->lens) {
        oget_batch_free(b);
        return NULL;
    }
    if (b->n_groups) memcpy(b->group_lens, g->group_lens.v, b->n_groups * sizeof(uint64_t));
    return b;
}

/* Key i of b is not visible here: join its in-flight get, or lead a new one (returned). */
static owner_oget_t *oget_join_or_lead(fx_owner_t *o, owner_getb_t *b, size_t i, fx_str_t k, uint64_t kh)
{
    oget_state_t *s = o->get;
    owner_oget_t *og = fx_hmap_get_h(s->gets, k.p, k.len, kh);
    if (og) {
        s->prefetch_joined += og->prefetch && og->nw == 0;
        if (oget_add_waiter(og, b, i) == FLUXON_OK) s->joined++;
        else b->res[i] = -1;
        return NULL;
    }
    og = fx_calloc(1, sizeof *og);
    if (og) og->key = fx_strndup(k.p, k.len);
    if (!og || !og->key || oget_add_waiter(og, b, i) != FLUXON_OK ||
        fx_hmap_put_h(s->gets, k.p, k.len, kh, og, NULL) != FLUXON_OK) {
        if (og && og->nw) b->pending--;
        if (og) oget_og_free(og);
        b->res[i] = -1;
        return NULL;
    }
    og->klen = k.len;
    og->khash = kh;
    s->leaders++;
    return og;
}

FX_INTERNAL void fx_oget_start(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena)
{
    oget_state_t *s = o->get;
    fx_body_get_start_t g;
    fx_body_get_start_decode(body, h->body_len, &g, arena);
    size_t n = g.keys.n;
    char why[160];
    if (n == 0) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "get_start: n_keys is 0");
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (!fx_ostore_key_ok(g.keys.v[i])) {
            fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                                "get_start: key %zu is empty, longer than %d bytes or contains NUL", i,
                                FLUXON_MAX_KEY_BYTES);
            return;
        }
    if (!fx_groups_check(g.group_lens.v, g.group_lens.n, n, why, sizeof why)) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "get_start: %s", why);
        return;
    }
    owner_getb_t *b = oget_batch_new(o, e, h, &g);
    owner_oget_t **leaders = b ? fx_calloc(n, sizeof *leaders) : NULL;
    if (!leaders) {
        if (b) oget_batch_free(b);
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_NOMEM, "get_start: owner out of memory");
        return;
    }
    s->get_batches++;
    s->get_keys += n;
    b->pending = 1; /* held until every key is classified */
    size_t nl = 0;
    /* the only owner the cluster ever had (fetch.c), or a key this owner never copied while
     * every copy on a remote_cache owner is its own (elsewhere.c, issue 38): a key missing
     * here is held nowhere, and the first such miss settles the answer (raw prefix,
     * transferable groups, all_hit): nothing past it is looked up, pinned or fetched */
    bool alone = fx_olink_alone(o) && fx_olink_conn(o);
    /* G1/G2: classify and pin every key before any leader work starts */
    uint64_t kh[64]; /* blocks of 64 keys: hashed and prefetched, then looked up (misses overlap) */
    for (size_t i = 0; i < n; i++) {
        if (i % 64 == 0)
            for (size_t j = i; j < n && j < i + 64; j++) {
                kh[j - i] = fx_hmap_hash(g.keys.v[j].p, g.keys.v[j].len);
                fx_ostore_prefetch_key(o, kh[j - i]);
                fx_odisk_prefetch_key(o, kh[j - i]); /* a miss here asks the disk index (issue 39) */
            }
        owner_entry_t *en = fx_ostore_lookup_h(o, g.keys.v[i].p, g.keys.v[i].len, kh[i % 64]);
        if (en) {
            oget_set_hit(b, i, en);
            s->local_hits += b->res[i] == 1;
        } else if ((alone || fx_oelse_nowhere(o, kh[i % 64])) &&
                   !fx_hmap_get_h(s->gets, g.keys.v[i].p, g.keys.v[i].len, kh[i % 64]) &&
                   !fx_odisk_has_h(o, g.keys.v[i].p, g.keys.v[i].len, kh[i % 64])) { /* issue 39: on disk, the master routes it */
            b->res[i] = oget_miss_code(FLUXON_ERR_NOT_FOUND);
            b->looked = i + 1;
            fx_ofetch_lookup_skipped(o);
            /* nobody reads the keys past it, but they stay as warm as the other path leaves
             * them (a hit past the prefix is pinned, touched and released at once): the
             * eviction order does not depend on being alone */
            for (size_t j = i + 1; j < n; j++) {
                owner_entry_t *past = fx_ostore_lookup(o, g.keys.v[j].p, g.keys.v[j].len);
                if (past) fx_oev_touch(o, past);
            }
            break;
        } else {
            owner_oget_t *og = oget_join_or_lead(o, b, i, g.keys.v[i], kh[i % 64]);
            if (og) leaders[nl++] = og;
        }
    }
    if (nl) fx_ofetch_start(o, leaders, nl, g.timeout_ms); /* takes leaders */
    else fx_free(leaders);
    if (--b->pending == 0) oget_batch_finalize(b);
}

/* Issue 39: PREFETCH (one-way) names keys a get_start will ask for soon (the engine's
 * next request). Each key this owner's memory lacks, with no fetch of it in flight, is
 * fetched now into a claimed slot and kept (published as a durable copy, GET_DONE): from
 * this owner's disk tier when it holds the key, else (issue 38, prefetch_from_owners, when
 * other owners exist) from the owner the master names in ONE LOOKUP for the request's
 * keys — a CPU owner's copy comes over UCX while the engine plays the requests before
 * (off by default: on 2 vCPUs it halves get_start p99 for 4 % more CPU, requests/s level).
 * Keys after the first one known to be held nowhere are skipped: the get_start stops at
 * that miss, so they would be fetched for nobody. The get_start then
 * finds it in memory, or joins the fetch still in flight (InflightJoin), instead of
 * waiting for a LOOKUP, a transfer and a GET_DONE itself. A key the master gives this
 * owner only a temporary copy of (others are making the durable ones) is not fetched for
 * nobody. Nothing is answered; bad keys are counted and skipped. */
#define OGET_PREFETCH_TIMEOUT_MS 2000 /* the reads' claims and transfers end within it */
FX_INTERNAL void fx_oget_prefetch(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                  fx_arena_t *arena)
{
    (void)e;
    oget_state_t *s = o->get;
    fx_body_keys_t g;
    if (fx_body_keys_decode(body, h->body_len, &g, arena) != FLUXON_OK) {
        s->prefetch_bad_keys++;
        return;
    }
    s->prefetch_requests++;
    s->prefetch_keys += g.keys.n;
    owner_oget_t **leaders = g.keys.n ? fx_calloc(g.keys.n, sizeof *leaders) : NULL;
    size_t nl = 0;
    uint64_t khs[64]; /* blocks of 64 keys: hashed and their three tables' slots prefetched, then looked up */
    for (size_t i = 0; leaders && i < g.keys.n; i++) {
        if (i % 64 == 0)
            for (size_t j = i; j < g.keys.n && j < i + 64; j++) {
                khs[j - i] = fx_hmap_hash(g.keys.v[j].p, g.keys.v[j].len);
                fx_ostore_prefetch_key(o, khs[j - i]);
                fx_hmap_prefetch(s->gets, khs[j - i]);
                fx_odisk_prefetch_key(o, khs[j - i]);
            }
        fx_str_t k = g.keys.v[i];
        if (!fx_ostore_key_ok(k)) {
            s->prefetch_bad_keys++;
            continue;
        }
        uint64_t kh = khs[i % 64];
        if (fx_ostore_lookup_h(o, k.p, k.len, kh) || fx_hmap_get_h(s->gets, k.p, k.len, kh)) continue;
        if (fx_odisk_has_h(o, k.p, k.len, kh)) {
            s->prefetch_reads++;
        } else if ((fx_olink_alone(o) && fx_olink_conn(o)) || fx_oelse_nowhere(o, kh)) {
            /* held nowhere (as get_start decides it): the get's prefix ends here, so what
             * follows would be read for nobody */
            s->prefetch_past_prefix += g.keys.n - i - 1;
            break;
        } else if (o->cfg.prefetch_from_owners) {
            s->prefetch_lookups++;
        } else {
            continue; /* maybe held elsewhere: the get asks the master */
        }
        owner_oget_t *og = fx_calloc(1, sizeof *og);
        if (og) og->key = fx_strndup(k.p, k.len);
        if (!og || !og->key || fx_hmap_put_h(s->gets, k.p, k.len, kh, og, NULL) != FLUXON_OK) {
            if (og) oget_og_free(og);
            break; /* out of memory: a hint, dropped */
        }
        og->klen = k.len;
        og->khash = kh;
        og->prefetch = true;
        leaders[nl++] = og;
    }
    if (nl) fx_ofetch_start(o, leaders, nl, OGET_PREFETCH_TIMEOUT_MS); /* takes leaders */
    else fx_free(leaders);
}

/* Keeps the first `consume` pins of handle_id (they now belong to the external's read
 * plan) and releases the rest. The handle is found by its id, and must be e's. */
static void oget_consume(fx_owner_t *o, owner_ext_t *e, uint64_t handle_id, uint64_t consume)
{
    owner_handle_t *hd = fx_hmap_get(o->get->handles, &handle_id, sizeof handle_id);
    if (!hd || hd->ext != e) {
        fx_oext_unknown(o, e, "get handles in HANDLE_CONSUME", handle_id, 1); /* C2: a line a second at most */
        return;
    }
    for (size_t i = FX_MIN(consume, hd->n); i < hd->n; i++) fx_ostore_holder_release_id(o, hd->ext, hd->holder_ids[i]);
    hd->n = FX_MIN(consume, hd->n); /* the consumed holders now belong to the read plan */
    oget_handle_free(o, hd, false);
}

FX_INTERNAL void fx_oget_consume(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena)
{
    fx_body_handle_consume_t b;
    fx_body_handle_consume_decode(body, h->body_len, &b, arena);
    oget_consume(o, e, b.handle_id, b.consume);
}

/* ---- EXISTS: leading keys visible here, then the master for the rest ---- */
typedef struct oget_exists_ctx {
    fx_conn_t *conn;
    uint64_t req_id, local;
} oget_exists_ctx_t;

static void oget_on_exists(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    oget_exists_ctx_t *x = arg;
    fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_EXISTS, 0, 0, 0, x->req_id};
    if (fx_conn_is_open(x->conn)) {
        if (status == FLUXON_OK) {
            fx_body_count_t c;
            fx_body_count_decode(body, h->body_len, &c, arena);
            c.count += x->local;
            FX_CONN_REPLY(x->conn, &q, count, &c);
        } else {
            fx_conn_reply_error(x->conn, &q, status, "exists: master %s", fluxon_status_string(status));
        }
    }
    fx_conn_unref(x->conn);
    fx_free(x);
}

FX_INTERNAL void fx_oget_exists(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena)
{
    fx_body_keys_t b;
    fx_body_keys_decode(body, h->body_len, &b, arena);
    for (uint32_t i = 0; i < b.keys.n; i++)
        if (!fx_ostore_key_ok(b.keys.v[i])) {
            fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "exists: key %u is not a valid key", i);
            return;
        }
    uint32_t l = 0;
    while (l < b.keys.n && fx_ostore_lookup(o, b.keys.v[l].p, b.keys.v[l].len)) l++;
    fx_conn_t *mc = fx_olink_conn(o);
    if (l == b.keys.n || !mc) {
        fx_body_count_t c = {l};
        FX_CONN_REPLY(e->conn, h, count, &c);
        return;
    }
    oget_exists_ctx_t *x = fx_malloc(sizeof *x);
    if (!x) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_NOMEM, "exists: owner out of memory");
        return;
    }
    x->conn = e->conn;
    x->req_id = h->req_id;
    x->local = l;
    fx_conn_ref(e->conn);
    fx_body_keys_t rest = {{b.keys.v + l, b.keys.n - l}};
    if (FX_RPC_CALL(mc, EXISTS, keys, &rest, o->cfg.master_timeout_ms, oget_on_exists, x) != FLUXON_OK)
        oget_on_exists(x, FLUXON_ERR_UNAVAILABLE, NULL, NULL, NULL);
}

/* ---- lifecycle ---- */
FX_INTERNAL void fx_oget_ext_closed(fx_owner_t *o, owner_ext_t *e)
{
    while (e->handles) oget_handle_free(o, e->handles, true);
}

FX_INTERNAL int fx_oget_init(fx_owner_t *o)
{
    oget_state_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    o->get = s;
    if (fx_hmap_create(64, &s->gets) || fx_hmap_create(64, &s->handles)) return FLUXON_ERR_NOMEM;
    return fx_ofetch_init(o, oget_complete);
}

static void oget_og_free_v(void *v) { oget_og_free(v); }

static void oget_handle_free_v(void *v)
{
    owner_handle_t *hd = v;
    fx_free(hd->holder_ids);
    fx_free(hd);
}

/* Shutdown: gets still fetching and handles not consumed go (their externals are gone). */
FX_INTERNAL void fx_oget_fini(fx_owner_t *o)
{
    oget_state_t *s = o->get;
    if (!s) return;
    if (s->gets) fx_hmap_clear(s->gets, oget_og_free_v);
    if (s->handles) fx_hmap_clear(s->handles, oget_handle_free_v);
    fx_hmap_destroy(s->gets);
    fx_hmap_destroy(s->handles);
    fx_free(s);
    o->get = NULL;
    fx_ofetch_fini(o);
}

FX_INTERNAL void fx_oget_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    oget_state_t *s = o->get;
    m->handles_open = fx_hmap_count(s->handles);
    m->gets_inflight = fx_hmap_count(s->gets);
    m->get_batches = s->get_batches;
    m->get_keys = s->get_keys;
    m->local_hits = s->local_hits;
    m->joined_hits = s->joined_hits;
    m->leader_hits = s->leader_hits;
    m->joined = s->joined;
    m->leaders = s->leaders;
    m->misses = s->misses;
    m->keys_past_miss = s->keys_past_miss;
    m->miss_not_found = s->miss_reason[0];
    m->miss_unavailable = s->miss_reason[1];
    m->miss_no_space = s->miss_reason[2];
    m->miss_timeout = s->miss_reason[3];
    m->miss_nomem = s->miss_reason[4];
    m->miss_internal = s->miss_reason[5];
    m->miss_client_limit = s->miss_reason[6];
    m->client_limit_pins = s->limit_pins;
    m->client_limit_handles = s->limit_handles;
    m->prefix_raw_keys = s->prefix_raw_keys;
    m->prefix_transferable_keys = s->prefix_transferable_keys;
    m->handles_opened = s->handles_opened;
    m->get_value_bytes = s->get_value_bytes;
    m->get_start_latency = s->get_start_latency;
    m->prefetch_requests = s->prefetch_requests;
    m->prefetch_keys = s->prefetch_keys;
    m->prefetch_reads = s->prefetch_reads;
    m->prefetch_bad_keys = s->prefetch_bad_keys;
    m->prefetch_joined = s->prefetch_joined;
    m->prefetch_lookups = s->prefetch_lookups;
    m->prefetch_past_prefix = s->prefetch_past_prefix;
}
