/* fetch.c — remote fetches for get batches: the leaders go to the master as ONE LOOKUP
 * (G8), unless this is the only live owner; each found value gets a local slot (claims),
 * is pulled over UCX from its source owner (one transfer batch per source; a range of this
 * very segment is memcpy'd) and is registered with the master as a durable replica
 * (GET_DONE, fetch_publish.c) before anyone reads it: the master accepts only if the source replica still
 * existed after the copy (D1). Temporary copies and refusals are served to the waiting
 * readers only (their holders keep the slot). Every key ends through the done hook. */
#include <stdio.h>

#include "log.h"
#include "owner_claims.h"
#include "owner_disk.h"
#include "owner_fetch.h"
#include "owner_link.h"
#include "owner_oracle.h"
#include "owner_peers.h"
#include "owner_wbmap.h"

#include "owner_fetch_int.h"

FX_INTERNAL void ofetch_batch_free(ofetch_batch_t *f)
{
    for (size_t s = 0; s < f->n_src; s++) {
        fx_free(f->src_addr[s]);
        fx_free(f->src_rkey[s]);
    }
    fx_free(f->src_ids);
    fx_free(f->src_gens);
    fx_free(f->src_bases);
    fx_free(f->src_addr);
    fx_free(f->src_rkey);
    fx_free(f->src_addr_len);
    fx_free(f->src_rkey_len);
    fx_free(f->og);
    fx_free(f);
}

static void ofetch_batch_done_if_idle(ofetch_batch_t *f)
{
    if (f->claims_pending || f->xfers_pending) return;
    fx_hist_observe(&f->o->fetch->fetch_latency, fx_now_ns() - f->t0_ns);
    ofetch_batch_free(f);
}

/* W4: the destination slots of a failed GET that UCX has not retired yet (reported early,
 * a timeout): UCX may still write them, so they stay PREPARED (no claim can take them)
 * until the transfer retires (fx_ucx_hold_until_retired), then go back to the pool. */
typedef struct ofetch_hold {
    fx_owner_t *o;
    size_t n;
    uint64_t bytes;
    fx_slot_ref_t slot[];
} ofetch_hold_t;

static void ofetch_hold_retired(void *arg)
{
    ofetch_hold_t *h = arg;
    ofetch_t *kv = h->o->fetch;
    for (size_t k = 0; k < h->n; k++) fx_slot_pool_release_prepared(fx_ostore_pool(h->o), &h->slot[k]);
    kv->held_slots -= h->n;
    kv->held_bytes -= h->bytes;
    FX_INFO("%zu slots of a failed fetch freed: UCX retired the transfer", h->n);
    fx_free(h);
}

/* A hold for x's slots when x failed before UCX retired it; NULL: free them at once. Bound:
 * segment_bytes / 8 held at most. In NONE error-handling mode (shared memory only) UCX 1.13
 * may keep an early-reported request until shutdown, so without a bound every such timeout
 * would shrink the hot tier for good; beyond it slots are freed at once, as before W4 (the
 * ep was force-closed: a late write there needs UCX to progress a request of a closed ep),
 * counted in fetch_slots_hold_overflow. */
static ofetch_hold_t *ofetch_hold_new(fx_owner_t *o, ofetch_xfer_t *x, int status)
{
    ofetch_t *kv = o->fetch;
    if (status == FLUXON_OK || !o->peers || !fx_opeers_ucx(o)) return NULL;
    uint64_t bytes = 0;
    for (size_t k = 0; k < x->n; k++) bytes += x->og[k]->slot.slot_size;
    if (kv->held_bytes + bytes > fx_segment_len(o->seg) / 8) {
        if (!kv->hold_overflow) FX_WARN("fetch of %zu values failed before UCX retired it (%s), and %llu bytes are held "
                                        "already: their slots are freed now (fetch_slots_hold_overflow)", x->n,
                                        fluxon_status_string(status), (unsigned long long)kv->held_bytes);
        kv->hold_overflow += x->n;
        return NULL;
    }
    ofetch_hold_t *h = fx_calloc(1, sizeof *h + x->n * sizeof h->slot[0]);
    if (!h) return NULL;
    h->o = o;
    if (!fx_ucx_hold_until_retired(fx_opeers_ucx(o), x, ofetch_hold_retired, h)) { /* retired already */
        fx_free(h);
        return NULL;
    }
    h->bytes = bytes;
    kv->held_bytes += bytes;
    FX_WARN("fetch of %zu values failed before UCX retired it (%s): their slots are kept until it does", x->n,
            fluxon_status_string(status));
    return h;
}

/* test.value_oracle: a copy served before GET_DONE's answer (a copy may race its source's
 * reuse: GET_DONE's answer is what says it did not, so one served without it is checked) */
static void ofetch_oracle(fx_owner_t *o, const ofetch_batch_t *f, const ofetch_xfer_t *x, const owner_oget_t *og,
                          const owner_entry_t *en)
{
    char more[200];
    snprintf(more, sizeof more, "copied from %s (generation %llu) offset %#llx, mode %u, LOOKUP %llu ms before",
             f->src_ids[x->src], (unsigned long long)f->src_gens[x->src], (unsigned long long)og->src_off,
             (unsigned)og->mode, (unsigned long long)((fx_now_ns() - f->t0_ns) / 1000000u));
    fx_oracle_entry(o, "a copy served before GET_DONE's answer", en, more);
}

/* Issue 38: a copy of a ranged replica that ended within its reuse delay (less 1 ms) of
 * f->early_ns, with the same master, holds the version named: read before GET_DONE. */
static bool ofetch_early(fx_owner_t *o, const ofetch_batch_t *f, const owner_oget_t *og, uint64_t now_ns)
{
    return og->reuse_ms && f->master_gen && fx_olink_master_generation(o) == f->master_gen &&
           now_ns - f->early_ns + 1000000ull < og->reuse_ms * 1000000ull;
}

/* A read by the record that cannot be trusted: og is fetched again, through a LOOKUP. */
static void ofetch_ask_master(fx_owner_t *o, owner_oget_t *og)
{
    owner_oget_t **one = fx_malloc(sizeof *one);
    og->have_slot = og->found = og->src_kept = og->src_cpu = og->wb_rec = false;
    og->mode = 0;
    memset(&og->slot, 0, sizeof og->slot);
    if (!one) {
        og->why = FLUXON_ERR_NOMEM;
        o->fetch->done(o, og, NULL);
        return;
    }
    one[0] = og;
    fx_ofetch_start(o, one, 1, 0);
}

FX_INTERNAL void ofetch_on_xfer(void *arg, int status)
{
    ofetch_xfer_t *x = arg;
    ofetch_batch_t *f = x->f;
    fx_owner_t *o = f->o;
    if (x->inject_failure && status == FLUXON_OK) status = FLUXON_ERR_INTERNAL;
    ofetch_t *kv = o->fetch;
    uint64_t now_ns = fx_now_ns();
    fx_hist_observe(&kv->transfer_latency, now_ns - x->t0_ns);
    size_t n = x->n, m = 0;
    ofetch_getdone_ctx_t *c = fx_calloc(1, sizeof *c);
    fx_str_t *keys = fx_calloc(n, sizeof *keys);
    uint64_t *cols = fx_calloc(7 * n, sizeof *cols);
    if (c) {
        c->og = fx_calloc(n, sizeof *c->og);
        c->slot = fx_calloc(n, sizeof *c->slot);
    }
    owner_oget_t **ab = fx_calloc(n, sizeof *ab); /* durable fetches that made no copy */
    size_t n_ab = 0;
    ofetch_hold_t *hold = ofetch_hold_new(o, x, status); /* W4: UCX may still write the slots */
    bool ok = status == FLUXON_OK && c && c->og && c->slot && keys && cols && ab && fx_olink_conn(o);
    kv->transfers++;
    if (status != FLUXON_OK) FX_WARN("remote fetch of %zu values failed: %s", n, fluxon_status_string(status));
    if (!ok) ofetch_abandon(o, x->og, n);
    /* the overtaken ones are abandoned before any is served: done() may free its get */
    for (size_t k = 0; ok && k < n; k++)
        if (x->og[k]->disk_rc || fx_ostore_lookup(o, x->og[k]->key, x->og[k]->klen)) ab[n_ab++] = x->og[k];
    ofetch_abandon(o, ab, n_ab);
    for (size_t k = 0, j = 0; k < n; k++) {
        owner_oget_t *og = x->og[k];
        bool overtaken = j < n_ab && ab[j] == og;
        j += overtaken;
        if (!ok || overtaken) { /* failed, or a local put overtook the fetch: serve that one */
            owner_entry_t *cur = ok ? fx_ostore_lookup(o, og->key, og->klen) : NULL;
            og->why = status != FLUXON_OK ? status : og->disk_rc ? og->disk_rc : FLUXON_ERR_UNAVAILABLE;
            if (hold) hold->slot[hold->n++] = og->slot;
            else fx_slot_pool_release_prepared(fx_ostore_pool(o), &og->slot);
            o->fetch->done(o, og, ok ? cur : NULL);
            continue;
        }
        if (og->wb_rec && !ofetch_early(o, f, og, now_ns)) { /* past the record's rule (wbmap.c): thrown away */
            kv->wb_late++;
            fx_slot_pool_release_prepared(fx_ostore_pool(o), &og->slot);
            ofetch_ask_master(o, og);
            continue;
        }
        fx_slot_pool_mark_pending(fx_ostore_pool(o), &og->slot);
        owner_entry_t *en = fx_ostore_entry_new(o, og->key, og->klen, 0, &og->slot, og->value_len);
        if (!en) {
            fx_slot_pool_release_prepared(fx_ostore_pool(o), &og->slot);
            o->fetch->done(o, og, NULL);
            continue;
        }
        en->remote = true;
        /* the master that said so gets the GET_DONE (a failover to one with "drop" would drop
         * the source's copy at GET_DONE: then the value is written back as any other) */
        en->target_kept = og->src_kept && f->master_gen && fx_olink_master_generation(o) == f->master_gen;
        en->put_ms = og->put_ms;
        en->put_ver = og->put_ver;
        kv->transfer_keys++;
        kv->transfer_bytes += og->value_len;
        if (og->mode == FX_GET_TEMPORARY && fx_disk_is_off(og->src_off)) {
            /* issue 39: a first read-back from this owner's disk (fetch_disk.c): served to
             * its readers only, never published (no GET_DONE, no EVICT later): its slot
             * frees with the last reader. A second read-back promotes it. */
            kv->temp_copies++;
            kv->disk_temp++;
            o->fetch->done(o, og, en);
            fx_ostore_retire(o, en);
            continue;
        }
        if (og->mode == FX_GET_TEMPORARY && og->wb_rec) {
            /* issue 38: a first read-back of a copy this owner wrote back (its record, wbmap.c),
             * within the record's rule: served to its readers only, as a first read-back from
             * disk is; its target's copy is made young at the master (TOUCH, below) as the
             * eviction of a promoted replica would. A second read-back promotes it. */
            if (o->cfg.test_value_oracle[0]) ofetch_oracle(o, f, x, og, en);
            fx_owbm_hit_t h; /* the record marks its first read when one was served (not when
                               * a read failed or was overtaken: then the next one is the first) */
            if (fx_owbm_find(o, og->key, og->klen, og->khash, &h) && h.offset == og->src_off &&
                h.put_ms == og->put_ms && h.put_ver == og->put_ver)
                fx_owbm_note_read(o, &h);
            kv->temp_copies++;
            kv->wb_temp++;
            ofetch_count_hit(kv, og, true);
            fx_otouch_add(o, og->key, og->klen, og->put_ms, og->put_ver);
            o->fetch->done(o, og, en);
            fx_ostore_retire(o, en);
            continue;
        }
        keys[m] = (fx_str_t){en->key, en->klen};
        cols[m] = en->slot.offset;
        cols[n + m] = en->put_ms;
        cols[2 * n + m] = en->put_ver;
        cols[3 * n + m] = en->value_len;
        cols[4 * n + m] = og->src_off;
        cols[5 * n + m] = og->mode;
        cols[6 * n + m] = og->src_seq;
        c->slot[m] = en->slot;
        /* a second read-back of this owner's disk (a promotion): its record was checked (key,
         * checksum) and is this owner's, so no copy can have raced it: served now, as a first
         * read-back is; GET_DONE then publishes the copy with nobody waiting (og NULL). Issue
         * 38: so is a copy of a ranged replica that ended 1 ms or more before its reuse delay
         * from the LOOKUP's sending was over, with the same master: its range was not handed
         * out again meanwhile (the master drops the replica after it answered the LOOKUP). */
        bool disk = fx_disk_is_off(og->src_off);
        bool early = !disk && ofetch_early(o, f, og, now_ns);
        c->og[m++] = disk || early ? NULL : og;
        if (disk || early) {
            if (o->cfg.test_value_oracle[0]) ofetch_oracle(o, f, x, og, en);
            kv->disk_promoted_early += disk;
            kv->read_before_get_done += early && !og->prefetch; /* of the remote hits (a prefetch's copy is none) */
            ofetch_count_hit(kv, og, !disk && !og->prefetch); /* as it was counted once the master answered */
            kv->prefetch_copies += !disk && og->prefetch;
            o->fetch->done(o, og, en);
        }
    }
    fx_free(ab);
    if (hold) {
        kv->held_slots += hold->n;
        kv->held_total += hold->n;
    }
    if (m) { /* one GET_DONE per transfer batch (G8) */
        c->o = o;
        c->n = m;
        ofetch_publish(o, c, keys, cols, n, f->src_ids[x->src], f->src_gens[x->src], f->deadline_ms);
        keys = NULL;
        cols = NULL;
        c = NULL;
    } else if (c) {
        ofetch_gd_ctx_free(c);
    }
    fx_free(keys);
    fx_free(cols);
    f->xfers_pending--;
    fx_free(x->og);
    fx_free(x->ranges);
    fx_free(x->dr);
    fx_free(x);
    ofetch_batch_done_if_idle(f);
}

/* All claims of a fetch resolved: one UCX transfer batch per source owner. */
static void ofetch_batch_transfer(ofetch_batch_t *f)
{
    fx_owner_t *o = f->o;
    uint8_t *base = fx_segment_base(o->seg);
    f->xfers_pending++; /* a copy from this owner's own segment completes inline: keep f alive */
    for (size_t s = 0; s < f->n_src; s++) {
        size_t cnt = 0;
        for (size_t k = 0; k < f->n; k++) cnt += f->og[k] && f->og[k]->have_slot && f->og[k]->src == s;
        if (!cnt) continue;
        ofetch_xfer_t *x = fx_calloc(1, sizeof *x);
        bool self = !strcmp(f->src_ids[s], o->cfg.node_id) && f->src_gens[s] == o->generation;
        fx_ucx_peer_t *peer = self ? NULL : fx_opeers_get(o, (fx_str_t){f->src_ids[s], (uint32_t)strlen(f->src_ids[s])},
                                          f->src_gens[s], (fx_str_t){(const char *)f->src_addr[s], f->src_addr_len[s]},
                                          (fx_str_t){(const char *)f->src_rkey[s], f->src_rkey_len[s]}, f->src_bases[s]);
        if (x) {
            x->og = fx_calloc(cnt, sizeof *x->og);
            x->ranges = fx_calloc(cnt, sizeof *x->ranges);
        }
        int rc = FLUXON_ERR_NOMEM;
        if (x && x->og && x->ranges) {
            x->t0_ns = fx_now_ns();
            x->f = f;
            x->src = s;
            for (size_t k = 0; k < f->n; k++) {
                owner_oget_t *og = f->og[k];
                if (!og || !og->have_slot || og->src != s) continue;
                x->og[x->n] = og;
                x->ranges[x->n] = (fx_ucx_range_t){base + og->slot.offset, og->src_off, og->value_len};
                x->n++;
                f->og[k] = NULL; /* owned by the transfer now */
            }
            if (self) { /* a range of this segment (a placed value), or this owner's disk: then the same GET_DONE */
                f->xfers_pending++;
                if (!ofetch_self_copy(o, x, base)) ofetch_on_xfer(x, FLUXON_OK);
                continue;
            }
            /* a peer of this host whose segment is mapped here: copied now, and completed
             * inline as a copy from this segment is (a get waits for it: not for the loop's
             * next turn, where a write-back's push slice or an eviction round may come first) */
            rc = peer ? fx_ucx_copy_now(fx_opeers_ucx(o), peer, FX_UCX_GET, x->ranges, x->n) : FLUXON_ERR_UNAVAILABLE;
            if (rc != FLUXON_ERR_UNAVAILABLE) {
                if (rc == FLUXON_OK && o->cfg.fail_transfers) { /* test-only: fail it afterwards */
                    o->cfg.fail_transfers--;
                    x->inject_failure = true;
                }
                f->xfers_pending++;
                ofetch_on_xfer(x, rc);
                continue;
            }
            if (peer) { /* the transfer ends by the batch's deadline (at least 1 ms from now) */
                uint64_t now = fx_now_ms();
                uint64_t left = f->deadline_ms > now ? f->deadline_ms - now : 1;
                fx_ucx_set_timeout_ms(fx_opeers_ucx(o), (uint32_t)FX_MIN(left, (uint64_t)FX_UCX_DEFAULT_TIMEOUT_MS));
                rc = fx_ucx_transfer(fx_opeers_ucx(o), peer, FX_UCX_GET, x->ranges, x->n, ofetch_on_xfer, x);
                fx_ucx_set_timeout_ms(fx_opeers_ucx(o), 0);
            } else {
                rc = FLUXON_ERR_UNAVAILABLE;
            }
            if (rc == FLUXON_OK) fx_opeers_soon(o);
            if (rc == FLUXON_OK && o->cfg.fail_transfers) { /* test-only: fail it afterwards */
                o->cfg.fail_transfers--;
                x->inject_failure = true;
            }
        }
        if (rc == FLUXON_OK) {
            f->xfers_pending++;
        } else if (x && x->og) {
            FX_WARN("cannot fetch %zu values from owner %s: %s", x->n, f->src_ids[s], fluxon_status_string(rc));
            ofetch_abandon(o, x->og, x->n);
            for (size_t k = 0; k < x->n; k++) {
                x->og[k]->why = rc;
                fx_slot_pool_release_prepared(fx_ostore_pool(o), &x->og[k]->slot);
                o->fetch->done(o, x->og[k], NULL);
            }
            fx_free(x->og);
            fx_free(x->ranges);
            fx_free(x);
        } else {
            fx_free(x);
        }
    }
    f->xfers_pending--;
    ofetch_batch_done_if_idle(f);
}

typedef struct ofetch_claim_ctx {
    ofetch_batch_t *f;
    owner_oget_t *og;
} ofetch_claim_ctx_t;

/* A value too large for any slot of this owner: the miss (NO_SPACE) is logged with the
 * value's size, the limit and the field that sets it. */
static void ofetch_warn_size(fx_owner_t *o, const owner_oget_t *og, uint64_t value_len)
{
    if (value_len <= o->cfg.grant_bytes) return;
    FX_WARN("get of %.*s: the value is %llu bytes, larger than this owner's reserve.grant_bytes %llu: no slot "
            "here can hold a copy (FLUXON_ERR_NO_SPACE); read it through an owner with larger grants",
            (int)FX_MIN(og->klen, 200u), og->key, (unsigned long long)value_len,
            (unsigned long long)o->cfg.grant_bytes);
}

static void ofetch_on_claim(fx_owner_t *o, void *arg, size_t got)
{
    ofetch_claim_ctx_t *c = arg;
    ofetch_batch_t *f = c->f;
    owner_oget_t *og = c->og;
    if (!got && og->hint_claim) { /* a hint's claim ended short: only eviction had room */
        og->hint_claim = false;
        if (og->nw) { /* a get joined meanwhile: it waits for a slot as its own fetch would */
            fx_oclaim(o, og->value_len, 1, &og->slot, f->deadline_ms, ofetch_on_claim, c);
            return;
        }
        o->fetch->prefetch_no_room++;
    }
    og->hint_claim = false;
    fx_free(c);
    og->have_slot = got == 1;
    if (!og->have_slot) { /* no room here: a miss for every waiter */
        og->why = FLUXON_ERR_NO_SPACE;
        ofetch_abandon(o, &og, 1);
        for (size_t k = 0; k < f->n; k++)
            if (f->og[k] == og) f->og[k] = NULL;
        o->fetch->done(o, og, NULL);
    }
    if (--f->claims_pending == 0) ofetch_batch_transfer(f);
}

static void ofetch_on_lookup(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                           fx_arena_t *arena)
{
    ofetch_batch_t *f = arg;
    fx_owner_t *o = f->o;
    fx_body_lookup_ack_t a;
    memset(&a, 0, sizeof a);
    if (status == FLUXON_OK) fx_body_lookup_ack_decode(body, h->body_len, &a, arena);
    size_t ns = a.src_node_ids.n;
    bool shape_ok = status == FLUXON_OK && a.statuses.n == f->n && a.src.n == f->n && a.offsets.n == f->n &&
                    a.value_lens.n == f->n && a.put_ms.n == f->n && a.put_ver.n == f->n &&
                    a.src_generations.n == ns && a.src_addresses.n == ns && a.src_rkeys.n == ns &&
                    a.src_bases.n == ns && (a.modes.n == f->n || a.modes.n == 0) &&
                    (a.src_seqs.n == f->n || a.src_seqs.n == 0);
    if (status == FLUXON_OK && !shape_ok) FX_ERROR("malformed LOOKUP answer from the master");
    if (shape_ok && ns) {
        f->n_src = ns;
        f->src_ids = fx_calloc(ns, sizeof *f->src_ids);
        f->src_gens = fx_calloc(ns, sizeof *f->src_gens);
        f->src_bases = fx_calloc(ns, sizeof *f->src_bases);
        f->src_addr = fx_calloc(ns, sizeof *f->src_addr);
        f->src_rkey = fx_calloc(ns, sizeof *f->src_rkey);
        f->src_addr_len = fx_calloc(ns, sizeof *f->src_addr_len);
        f->src_rkey_len = fx_calloc(ns, sizeof *f->src_rkey_len);
        shape_ok = f->src_ids && f->src_gens && f->src_bases && f->src_addr && f->src_rkey && f->src_addr_len &&
                   f->src_rkey_len;
        for (size_t s = 0; shape_ok && s < ns; s++) {
            fx_str_copy(a.src_node_ids.v[s], f->src_ids[s], FX_ID_MAX);
            f->src_gens[s] = a.src_generations.v[s];
            f->src_bases[s] = a.src_bases.v[s];
            f->src_addr[s] = fx_malloc(a.src_addresses.v[s].len + 1);
            f->src_rkey[s] = fx_malloc(a.src_rkeys.v[s].len + 1);
            if (!f->src_addr[s] || !f->src_rkey[s]) {
                shape_ok = false;
                break;
            }
            memcpy(f->src_addr[s], a.src_addresses.v[s].p, a.src_addresses.v[s].len);
            memcpy(f->src_rkey[s], a.src_rkeys.v[s].p, a.src_rkeys.v[s].len);
            f->src_addr_len[s] = a.src_addresses.v[s].len;
            f->src_rkey_len[s] = a.src_rkeys.v[s].len;
        }
    }
    /* decide every leader first, then claim: a completion may free the fetch otherwise */
    f->claims_pending = 1;
    for (size_t k = 0; k < f->n; k++) {
        owner_oget_t *og = f->og[k];
        bool hit = shape_ok && (int)(int64_t)a.statuses.v[k] == FLUXON_OK && a.src.v[k] < ns &&
                   a.value_lens.v[k] > 0 && fx_slot_size_for(a.value_lens.v[k]) <= o->cfg.grant_bytes;
        uint64_t mv = hit && a.modes.n ? a.modes.v[k] : FX_GET_DURABLE;
        unsigned mode = (unsigned)(mv & ~(uint64_t)FX_GET_SRC_KEPT); /* GET_DONE echoes it without the flag */
        if (hit && mode == FX_GET_REUSE) { /* ReuseReplica: a slot of ours holds it already */
            owner_entry_t *en = fx_ostore_at(o, a.offsets.v[k]);
            bool ok = !strcmp(f->src_ids[a.src.v[k]], o->cfg.node_id) && en && !en->retired && !en->evicting &&
                      en->state == OE_COMMITTED && en->put_ms == a.put_ms.v[k] && en->put_ver == a.put_ver.v[k] &&
                      en->value_len == a.value_lens.v[k] && en->klen == og->klen &&
                      !memcmp(en->key, og->key, og->klen); /* W8: the slot holds this very key */
            if (ok && !fx_ostore_lookup(o, en->key, en->klen)) fx_ostore_index(o, en);
            if (ok) o->fetch->reuse_hits++;
            f->og[k] = NULL;
            o->fetch->done(o, og, ok ? en : NULL);
            continue;
        }
        if (!hit || (mode != FX_GET_DURABLE && mode != FX_GET_TEMPORARY)) {
            f->og[k] = NULL;
            /* no master answer, a malformed one, or the key's own status (NOT_FOUND) */
            og->why = hit ? FLUXON_ERR_PROTOCOL /* a mode this owner does not know */
                      : status != FLUXON_OK ? status : !shape_ok ? FLUXON_ERR_PROTOCOL
                      : (int)(int64_t)a.statuses.v[k] != FLUXON_OK ? (int)(int64_t)a.statuses.v[k]
                                                                   : FLUXON_ERR_NO_SPACE; /* too big for a slot here */
            if (og->why == FLUXON_ERR_NO_SPACE && shape_ok) ofetch_warn_size(o, og, a.value_lens.v[k]);
            o->fetch->done(o, og, NULL);
            continue;
        }
        if (og->prefetch && og->nw == 0 && mode == FX_GET_TEMPORARY) {
            /* issue 38: a prefetch's copy would be freed with its readers, and it has none */
            f->og[k] = NULL;
            o->fetch->prefetch_temp_skipped++;
            o->fetch->done(o, og, NULL);
            continue;
        }
        og->mode = (uint8_t)mode;
        og->src_kept = mode == FX_GET_DURABLE && (mv & FX_GET_SRC_KEPT);
        og->found = true;
        og->src = (uint32_t)a.src.v[k];
        og->src_cpu = a.src_roles.n == ns && og->src < ns && a.src_roles.v[og->src] == FX_NODE_REMOTE_CACHE;
        og->src_off = a.offsets.v[k];
        og->src_seq = a.src_seqs.n ? a.src_seqs.v[k] : 0;
        og->reuse_ms = a.reuse_ms.n == f->n ? a.reuse_ms.v[k] : 0;
        og->value_len = a.value_lens.v[k];
        og->put_ms = a.put_ms.v[k];
        og->put_ver = a.put_ver.v[k];
    }
    ofetch_claim_all(f);
}

/* Claims a slot for every leader still in f (decided), then transfers. */
FX_INTERNAL void ofetch_claim_all(ofetch_batch_t *f)
{
    fx_owner_t *o = f->o;
    for (size_t k = 0; k < f->n; k++) {
        owner_oget_t *og = f->og[k];
        if (!og) continue;
        ofetch_claim_ctx_t *c = fx_malloc(sizeof *c);
        if (!c) {
            f->og[k] = NULL;
            o->fetch->done(o, og, NULL);
            continue;
        }
        *c = (ofetch_claim_ctx_t){f, og};
        f->claims_pending++;
        ofetch_warn_size(o, og, og->value_len); /* the claim fails: say why, with the numbers */
        if (og->prefetch && og->nw == 0) { /* a hint: never waits where only eviction serves it */
            og->hint_claim = true;
            if (!fx_oclaim_unless_evicting(o, og->value_len, &og->slot, f->deadline_ms, ofetch_on_claim, c))
                ofetch_on_claim(o, c, 0); /* counted there (prefetch_no_room) */
            continue;
        }
        fx_oclaim(o, og->value_len, 1, &og->slot, f->deadline_ms, ofetch_on_claim, c);
    }
    if (--f->claims_pending == 0) ofetch_batch_transfer(f);
}
/* Issue 38: the leaders whose copy this owner wrote back and keeps a record of (wbmap.c) are
 * read from their target without a LOOKUP, in a batch of their own: the read must end within
 * the target's reuse delay (less 1 ms) of the registration of the latest master call whose
 * answer this owner has seen (ofetch_on_xfer checks; a later one is asked of the master), from
 * a target connected at the recorded generation, with the same master. A read starts only
 * with half of that time left: on a link with no recent answer (an idle owner) the key is
 * looked up as before. Returns how many leaders are left (moved to the front of ogs) for the
 * LOOKUP. */
static size_t ofetch_start_recorded(fx_owner_t *o, owner_oget_t **ogs, size_t n, uint32_t caller_timeout_ms)
{
    uint64_t since = fx_rpc_answered_ns(fx_olink_conn(o)), mg = fx_olink_master_generation(o);
    if (!since || !mg || !n) return n;
    uint64_t age_ns = fx_now_ns() - since;
    owner_oget_t **rec = fx_malloc(n * sizeof *rec);
    fx_owbm_hit_t *hit = fx_malloc(n * sizeof *hit);
    ofetch_batch_t *f = fx_calloc(1, sizeof *f);
    size_t m = 0, left = 0;
    /* the records' map slots, then the records, start loading for the whole batch: their
     * cache misses overlap (they were most of this function's time in the trace replay) */
    for (int depth = 0; rec && hit && f && depth < 2; depth++)
        for (size_t k = 0; k < n; k++)
            if (!ogs[k]->wb_tried) fx_owbm_prefetch_key(o, ogs[k]->khash, depth);
    for (size_t k = 0; rec && hit && f && k < n; k++) {
        owner_oget_t *og = ogs[k];
        fx_owbm_hit_t *h = &hit[m];
        /* the read has half the delay left, less 1 ms, to end in: else a LOOKUP (an idle
         * master link: no recent answer) */
        if (!og->wb_tried && fx_owbm_find(o, og->key, og->klen, og->khash, h) && h->value_len &&
            2 * (age_ns + 1000000ull) < (uint64_t)h->reuse_ms * 1000000ull &&
            fx_slot_size_for(h->value_len) <= o->cfg.grant_bytes && fx_opeers_live(o, h->node_id, h->generation)) {
            rec[m++] = og;
        } else {
            ogs[left++] = og;
        }
    }
    if (!m || !(f->src_ids = fx_calloc(m, sizeof *f->src_ids)) || !(f->src_gens = fx_calloc(m, sizeof *f->src_gens)) ||
        !(f->src_bases = fx_calloc(m, sizeof *f->src_bases)) || !(f->src_addr = fx_calloc(m, sizeof *f->src_addr)) ||
        !(f->src_rkey = fx_calloc(m, sizeof *f->src_rkey)) ||
        !(f->src_addr_len = fx_calloc(m, sizeof *f->src_addr_len)) ||
        !(f->src_rkey_len = fx_calloc(m, sizeof *f->src_rkey_len))) {
        for (size_t k = 0; k < m; k++) ogs[left + k] = rec[k]; /* every leader goes to the LOOKUP */
        if (f) ofetch_batch_free(f); /* frees f->og (NULL) and the tables made */
        fx_free(rec);
        fx_free(hit);
        return n;
    }
    f->o = o;
    f->t0_ns = fx_now_ns();
    f->early_ns = since;
    f->master_gen = mg;
    f->og = rec;
    f->n = m;
    f->deadline_ms = fx_oclaim_deadline(o, caller_timeout_ms);
    for (size_t k = 0; k < m; k++) {
        owner_oget_t *og = rec[k];
        const fx_owbm_hit_t *h = &hit[k];
        size_t s = 0;
        while (s < f->n_src && (strcmp(f->src_ids[s], h->node_id) || f->src_gens[s] != h->generation)) s++;
        if (s == f->n_src) {
            fx_strlcpy(f->src_ids[s], h->node_id, FX_ID_MAX);
            f->src_gens[s] = h->generation;
            f->src_bases[s] = h->base;
            f->src_addr[s] = fx_malloc(h->address.len + 1);
            f->src_rkey[s] = fx_malloc(h->rkey.len + 1);
            if (f->src_addr[s]) memcpy(f->src_addr[s], h->address.p, h->address.len);
            if (f->src_rkey[s]) memcpy(f->src_rkey[s], h->rkey.p, h->rkey.len);
            f->src_addr_len[s] = h->address.len;
            f->src_rkey_len[s] = h->rkey.len;
            f->n_src++;
        }
        if (og->lookups++ == 0) og->deadline_ms = f->deadline_ms;
        else f->deadline_ms = FX_MIN(f->deadline_ms, og->deadline_ms);
        og->wb_rec = og->wb_tried = og->found = true;
        /* a first read of a copy the target keeps serves its readers only (ofetch_on_xfer: no
         * GET_DONE, no replica here to evict later; TOUCH keeps the copy young instead); a
         * second read, or a prefetch, promotes it: GET_DONE records it, or answers NO_SPACE:
         * then served as temporary */
        og->mode = h->keeps && !h->read_before && !og->prefetch ? FX_GET_TEMPORARY : FX_GET_DURABLE;
        og->src = (uint32_t)s;
        og->src_cpu = h->cpu;
        og->src_kept = h->keeps;
        og->src_off = h->offset;
        og->src_seq = 0; /* the record has no replica number: the read is trusted only by its timing */
        og->reuse_ms = h->reuse_ms;
        og->value_len = h->value_len;
        og->put_ms = h->put_ms;
        og->put_ver = h->put_ver;
    }
    fx_free(hit);
    o->fetch->wb_reads += m;
    f->claims_pending = 1;
    ofetch_claim_all(f);
    return left;
}

FX_INTERNAL void fx_ofetch_start(fx_owner_t *o, owner_oget_t **ogs, size_t n, uint32_t caller_timeout_ms)
{
    ofetch_t *s = o->fetch;
    if (fx_odisk_on(o) && (n = ofetch_start_disk(o, ogs, n, caller_timeout_ms)) == 0) {
        fx_free(ogs);
        return;
    }
    if (!fx_owbm_empty(o) && (n = ofetch_start_recorded(o, ogs, n, caller_timeout_ms)) == 0) {
        fx_free(ogs);
        return;
    }
    ofetch_batch_t *f = fx_calloc(1, sizeof *f);
    if (!f) {
        for (size_t k = 0; k < n; k++) {
            ogs[k]->why = FLUXON_ERR_NOMEM;
            s->done(o, ogs[k], NULL);
        }
        fx_free(ogs);
        return;
    }
    f->o = o;
    f->t0_ns = f->early_ns = fx_now_ns();
    f->master_gen = fx_olink_master_generation(o);
    f->og = ogs;
    f->n = n;
    f->deadline_ms = fx_oclaim_deadline(o, caller_timeout_ms);
    for (size_t k = 0; k < n; k++) { /* a second look (ofetch_look_again) keeps the first one's deadline */
        owner_oget_t *og = ogs[k];
        if (og->lookups++ == 0) og->deadline_ms = f->deadline_ms;
        else f->deadline_ms = FX_MIN(f->deadline_ms, og->deadline_ms);
    }
    fx_str_t *lk = fx_calloc(n, sizeof *lk);
    fx_conn_t *mc = fx_olink_conn(o);
    int rc = FLUXON_ERR_UNAVAILABLE;
    if (fx_olink_alone(o) && mc) {
        /* the only owner the cluster ever had: a key missing here is held nowhere, skip the
         * master (never once another owner lived: it may have placed values here) */
        s->lookups_skipped++;
        rc = FLUXON_ERR_NOT_FOUND;
    } else if (lk && mc) {
        for (size_t k = 0; k < n; k++) lk[k] = (fx_str_t){ogs[k]->key, ogs[k]->klen};
        fx_body_lookup_t lb = {{lk, (uint32_t)n}};
        rc = FX_RPC_CALL(mc, LOOKUP, lookup, &lb, o->cfg.master_timeout_ms, ofetch_on_lookup, f);
        if (rc == FLUXON_OK) s->lookup_batches++;
    }
    fx_free(lk);
    if (rc != FLUXON_OK) ofetch_on_lookup(f, rc, NULL, NULL, NULL); /* all leaders miss */
}

FX_INTERNAL void fx_ofetch_lookup_skipped(fx_owner_t *o) { o->fetch->lookups_skipped++; }

FX_INTERNAL int fx_ofetch_init(fx_owner_t *o, fx_ofetch_done_fn done)
{
    ofetch_t *s = fx_calloc(1, sizeof *s);
    if (!s) return FLUXON_ERR_NOMEM;
    s->done = done;
    o->fetch = s;
    return FLUXON_OK;
}

/* Shutdown: scheduled GET_DONEs go (their entries and readers go with the store and get). */
FX_INTERNAL void fx_ofetch_fini(fx_owner_t *o)
{
    ofetch_t *s = o->fetch;
    if (!s) return;
    ofetch_publish_fini(o);
    fx_otouch_fini(o);
    fx_free(o->fetch);
    o->fetch = NULL;
}

