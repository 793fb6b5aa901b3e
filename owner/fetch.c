/* fetch.c — remote fetches for get batches: the leaders go to the master as ONE LOOKUP
 * (G8), unless this is the only live owner; each found value gets a local slot (claims),
 * is pulled over UCX from its source owner (one transfer batch per source; a range of this
 * very segment is memcpy'd) and is registered with the master as a durable replica
 * (GET_DONE) before anyone reads it: the master accepts only if the source replica still
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

#define OFETCH_RESEND_MS 100u      /* first resend of an uncertain GET_DONE */
#define OFETCH_RESEND_MAX_MS 1000u /* backoff cap */
#define OFETCH_LOOKUPS_MAX 3u      /* LOOKUPs for one get of a key being replaced meanwhile */

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

/* A finished copy waits for the master's word before anyone reads it: GET_DONE is
 * accepted only if the source replica still existed when the copy ended, hence for the
 * whole copy (D1). Meanwhile the per-key get stays registered, so joiners keep joining. */
typedef struct ofetch_getdone_ctx {
    fx_owner_t *o;
    size_t n;
    owner_oget_t **og;
    fx_slot_ref_t *slot; /* the copies' identities (looked up again when the answer comes) */
} ofetch_getdone_ctx_t;

static void ofetch_gd_ctx_free(ofetch_getdone_ctx_t *c)
{
    fx_free(c->og);
    fx_free(c->slot);
    fx_free(c);
}

/* A copy the master refused as STALE: the version it copied was replaced (or deleted)
 * meanwhile, and the key may well exist in a newer one. Look again, at most
 * OFETCH_LOOKUPS_MAX times in all and within the first fetch's deadline, rather than
 * report a miss for a key that is there (concurrent overwrites). True: og is fetched anew. */
static bool ofetch_look_again(fx_owner_t *o, owner_oget_t *og)
{
    if (o->shutting_down || og->lookups >= OFETCH_LOOKUPS_MAX || fx_now_ms() + 10 >= og->deadline_ms) return false;
    owner_oget_t **one = fx_malloc(sizeof *one);
    if (!one) return false;
    og->have_slot = og->found = og->own_disk = false;
    og->mode = 0;
    og->why = 0;
    og->disk_rc = 0;
    memset(&og->slot, 0, sizeof og->slot);
    one[0] = og;
    o->fetch->relookups++;
    fx_ofetch_start(o, one, 1, 0);
    return true;
}

/* og's readers hear en (NULL: a miss) — unless they were answered at their deadline (og
 * NULL: the copy is settled with nobody waiting, L3). */
static void ofetch_done(fx_owner_t *o, owner_oget_t *og, owner_entry_t *en)
{
    if (og) o->fetch->done(o, og, en);
}

/* The master's word on one copy (mode: FX_GET_*, as asked): ks is its status. */
static void ofetch_get_done_one(fx_owner_t *o, owner_oget_t *og, uint8_t mode, owner_entry_t *en, int ks)
{
    ofetch_t *kv = o->fetch;
    if (!en) { /* cannot happen: a PENDING copy is only retired by its GET_DONE outcome */
        if (og) og->why = FLUXON_ERR_INTERNAL;
        ofetch_done(o, og, NULL);
        return;
    }
    if (en->invalidated && ks == FLUXON_OK) ks = FLUXON_ERR_STALE; /* registered, then deleted or replaced */
    owner_entry_t *cur = fx_ostore_lookup(o, en->key, en->klen);
    /* NO_SPACE: the copy is intact (the source was checked first) but the key has all
     * the replicas it may have: serve it as a temporary copy */
    if ((ks == FLUXON_OK && mode == FX_GET_TEMPORARY) || ks == FLUXON_ERR_NO_SPACE) {
        /* the copy is intact (D1) but is not a replica: its readers' holders keep it,
         * the slot frees with the last one */
        kv->temp_copies++;
        fx_oracle_entry(o, "a temporary copy served after GET_DONE's answer", en, NULL);
        ofetch_done(o, og, en);
        fx_ostore_retire(o, en);
        return;
    }
    /* OK: the master recorded this copy as a replica of ours (a route names this slot), so
     * it is committed even when a local put of the key overtook the fetch: freed silently,
     * its slot would be reused while readers elsewhere still copy from it (and the master
     * accepts their copies, the replica being recorded). It then stays out of the index
     * (the put's entry serves local readers) until the master drops it (INVALIDATE when the
     * put replaces the version) or names it again to a local reader (ReuseReplica). */
    if (ks == FLUXON_OK && fx_ostore_commit(o, en, en->put_ms, en->put_ver) == FLUXON_OK) {
        if (cur) {
            ofetch_done(o, og, cur);
            return;
        }
        fx_ostore_index(o, en); /* a durable replica: in the hot tier from now on */
        /* a hit over UCX (a new user's finding: the demo's local hits went negative with
         * this owner's disk and its prefetches counted here) */
        kv->remote_hits += og != NULL && !og->prefetch && !fx_disk_is_off(og->src_off);
        kv->prefetch_copies += og != NULL && og->prefetch && !fx_disk_is_off(og->src_off);
        ofetch_done(o, og, en);
        return;
    }
    if (ks != FLUXON_OK) kv->get_done_stale++;
    fx_ostore_retire(o, en); /* not published (or a local put overtook it) */
    if (!og) return;
    og->why = ks; /* STALE reads as NOT_FOUND; a lost master as itself */
    if (ks == FLUXON_ERR_STALE && !cur && ofetch_look_again(o, og)) return;
    kv->done(o, og, ks == FLUXON_OK || ks == FLUXON_ERR_STALE ? cur : NULL); /* a local put that overtook: served */
}

/* Durable fetches that made no copy: one-way GET_DONE (ABANDON) so the master forgets
 * their in-flight records now rather than at the TTL (another owner may then make the
 * durable copy). */
static void ofetch_abandon(fx_owner_t *o, owner_oget_t *const *ogs, size_t n)
{
    fx_conn_t *mc = fx_olink_conn(o);
    if (!mc || !n) return;
    fx_str_t *keys = fx_calloc(n, sizeof *keys);
    uint64_t *cols = fx_calloc(2 * n, sizeof *cols); /* zeros, then modes */
    size_t m = 0;
    for (size_t i = 0; keys && cols && i < n; i++)
        if (ogs[i] && ogs[i]->found && ogs[i]->mode == FX_GET_DURABLE && !ogs[i]->own_disk) {
            keys[m] = (fx_str_t){ogs[i]->key, ogs[i]->klen};
            cols[n + m++] = FX_GET_ABANDON;
        }
    if (m) {
        fx_u64v_t z = {cols, (uint32_t)m};
        fx_body_get_done_t gd = {{keys, (uint32_t)m}, z, z, z, z, fx_str_c(""), 0, z, {cols + n, (uint32_t)m}, {NULL, 0}};
        (void)FX_CONN_SEND(mc, FX_MSG_GET_DONE, 0, 0, 0, get_done, &gd);
    }
    fx_free(keys);
    fx_free(cols);
}

/* A GET_DONE on its way (held back only by the test fault delay_request). */
typedef struct ofetch_gd {
    fx_timer_t t;
    fx_timer_t dl; /* L3: the readers' deadline (their answer does not wait for the master's) */
    fx_owner_t *o;
    struct ofetch_gd *prev, *next; /* in ofetch_t.waiting while a (re)send is scheduled */
    ofetch_getdone_ctx_t *c;
    fx_str_t *keys; /* the copies' keys (their PENDING entries live until the outcome) */
    uint64_t *cols; /* 7 columns of n: offsets, put_ms, put_ver, value_lens, src_offsets, modes, src_seqs */
    size_t n;
    char src_id[FX_ID_MAX];
    uint64_t src_gen;
    uint32_t attempts; /* sends so far: after one, the outcome is uncertain until answered */
} ofetch_gd_t;

static void ofetch_gd_free(ofetch_gd_t *d)
{
    fx_timer_disarm(d->o->r, &d->dl);
    if (d->c) ofetch_gd_ctx_free(d->c);
    fx_free(d->keys);
    fx_free(d->cols);
    fx_free(d);
}

/* GET_DONE could not be sent: the copies are dropped, their readers miss. */
static void ofetch_gd_fail(fx_owner_t *o, ofetch_getdone_ctx_t *c)
{
    for (size_t i = 0; i < c->n; i++) {
        owner_entry_t *en = fx_ostore_find(o, &c->slot[i]);
        if (en) fx_ostore_retire(o, en);
        if (!c->og[i]) continue; /* answered at its deadline */
        c->og[i]->why = FLUXON_ERR_UNAVAILABLE;
        o->fetch->done(o, c->og[i], NULL);
    }
    ofetch_gd_ctx_free(c);
}

static void ofetch_gd_timer(fx_reactor_t *r, fx_timer_t *t);

/* Sends d again after ms (the test fault's hold-back, or an uncertain outcome's backoff). */
static void ofetch_gd_later(ofetch_gd_t *d, uint32_t ms)
{
    ofetch_t *s = d->o->fetch;
    d->prev = NULL;
    d->next = s->waiting;
    if (s->waiting) s->waiting->prev = d;
    s->waiting = d;
    fx_timer_arm(d->o->r, &d->t, ms, ofetch_gd_timer);
}

/* The outcome of d is unknown (no answer in time, the connection lost after sending, a
 * malformed answer): the master may have recorded the copies as replicas, so they are
 * neither freed nor served; the same GET_DONE goes again. Readers keep waiting (their
 * per-key gets stay registered). */
static void ofetch_gd_uncertain(ofetch_gd_t *d, int status)
{
    uint32_t ms = FX_MIN(OFETCH_RESEND_MS << FX_MIN(d->attempts - 1, 4u), OFETCH_RESEND_MAX_MS);
    d->o->fetch->get_done_resends++;
    FX_WARN("get_done of %zu copies: outcome unknown (%s); kept hidden, sent again in %u ms", d->c->n,
            fluxon_status_string(status), ms);
    ofetch_gd_later(d, ms);
}

static void ofetch_on_get_done(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena)
{
    ofetch_gd_t *d = arg;
    fx_owner_t *o = d->o;
    ofetch_getdone_ctx_t *c = d->c;
    fx_body_statuses_t st = {{NULL, 0}};
    if (status == FLUXON_OK && fx_body_statuses_decode(body, h->body_len, &st, arena) != FLUXON_OK)
        st.statuses.n = 0;
    if (status == FLUXON_OK && st.statuses.n != c->n) {
        FX_ERROR("malformed GET_DONE answer from the master (%u statuses for %zu copies)", st.statuses.n, c->n);
        status = FLUXON_ERR_PROTOCOL;
    }
    bool uncertain = status == FLUXON_ERR_TIMEOUT || status == FLUXON_ERR_UNAVAILABLE || status == FLUXON_ERR_PROTOCOL;
    if (uncertain && !o->shutting_down) {
        ofetch_gd_uncertain(d, status);
        return;
    }
    for (size_t i = 0; i < c->n; i++) {
        int ks = status != FLUXON_OK ? status : (int)(int64_t)st.statuses.v[i];
        owner_entry_t *en = fx_ostore_find(o, &c->slot[i]);
        if (ks == FLUXON_OK && en) fx_oracle_copy(o, en, d->src_id, d->src_gen, d->cols[4 * d->n + i]);
        ofetch_get_done_one(o, c->og[i], (uint8_t)d->cols[5 * d->n + i], en, ks);
    }
    ofetch_gd_free(d);
}

/* L3: the readers' deadline passed while the master's word on their copies is still
 * unknown (a master that does not answer): they are answered now, as misses
 * (FLUXON_ERR_TIMEOUT), below their own wait; the copies stay hidden and PENDING until the
 * word comes (a copy the master recorded is then indexed; any other retires). */
static void ofetch_gd_deadline(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    ofetch_gd_t *d = FX_CONTAINER_OF(t, ofetch_gd_t, dl);
    size_t n = 0;
    for (size_t i = 0; i < d->c->n; i++) {
        owner_oget_t *og = d->c->og[i];
        if (!og) continue;
        d->c->og[i] = NULL;
        og->why = FLUXON_ERR_TIMEOUT;
        d->o->fetch->done(d->o, og, NULL);
        n++;
    }
    d->o->fetch->get_done_readers_timed_out += n;
    FX_WARN("get_done of %zu copies: no word from the master by their readers' deadline: %zu keys answered as misses "
            "(TIMEOUT); the copies stay hidden until the master answers", d->c->n, n);
}

static void ofetch_gd_send(ofetch_gd_t *d)
{
    fx_owner_t *o = d->o;
    uint32_t m = (uint32_t)d->c->n;
    size_t n = d->n;
    uint64_t *cols = d->cols;
    fx_body_get_done_t gd = {{d->keys, m}, {cols, m}, {cols + n, m}, {cols + 2 * n, m}, {cols + 3 * n, m},
                             fx_str_c(d->src_id), d->src_gen, {cols + 4 * n, m}, {cols + 5 * n, m},
                             {cols + 6 * n, m}};
    fx_conn_t *mc = fx_olink_conn(o);
    int rc = mc ? FX_RPC_CALL(mc, GET_DONE, get_done, &gd, o->cfg.master_timeout_ms, ofetch_on_get_done, d)
                : FLUXON_ERR_UNAVAILABLE;
    if (rc == FLUXON_OK) {
        d->attempts++;
    } else if (d->attempts && !o->shutting_down) {
        ofetch_gd_uncertain(d, rc); /* an earlier send may have been applied: wait for the master */
    } else {
        ofetch_gd_fail(o, d->c); /* never sent: the master knows nothing of these copies */
        d->c = NULL;
        ofetch_gd_free(d);
    }
}

static void ofetch_gd_timer(fx_reactor_t *r, fx_timer_t *t)
{
    ofetch_gd_t *d = FX_CONTAINER_OF(t, ofetch_gd_t, t);
    ofetch_t *s = d->o->fetch;
    if (d->prev) d->prev->next = d->next;
    else s->waiting = d->next;
    if (d->next) d->next->prev = d->prev;
    d->prev = d->next = NULL;
    ofetch_gd_send(d);
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
        fx_slot_pool_mark_pending(fx_ostore_pool(o), &og->slot);
        owner_entry_t *en = fx_ostore_entry_new(o, og->key, og->klen, 0, &og->slot, og->value_len);
        if (!en) {
            fx_slot_pool_release_prepared(fx_ostore_pool(o), &og->slot);
            o->fetch->done(o, og, NULL);
            continue;
        }
        en->remote = true;
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
        bool early = !disk && og->reuse_ms && f->master_gen && fx_olink_master_generation(o) == f->master_gen &&
                     now_ns - f->t0_ns + 1000000ull < og->reuse_ms * 1000000ull;
        c->og[m++] = disk || early ? NULL : og;
        if (disk || early) {
            if (o->cfg.test_value_oracle[0]) ofetch_oracle(o, f, x, og, en);
            kv->disk_promoted_early += disk;
            kv->read_before_get_done += early && !og->prefetch; /* of the remote hits (a prefetch's copy is none) */
            kv->remote_hits += !disk && !og->prefetch; /* as it was counted once the master answered */
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
        ofetch_gd_t *d = fx_calloc(1, sizeof *d);
        if (d) {
            *d = (ofetch_gd_t){.o = o, .c = c, .keys = keys, .cols = cols, .n = n, .src_gen = f->src_gens[x->src]};
            fx_strlcpy(d->src_id, f->src_ids[x->src], sizeof d->src_id);
            keys = NULL;
            cols = NULL;
            c = NULL;
            fx_timer_init(&d->t);
            fx_timer_init(&d->dl);
            uint64_t now = fx_now_ms(), dl = f->deadline_ms > now ? f->deadline_ms - now : 1;
            fx_timer_arm(o->r, &d->dl, (uint32_t)FX_MIN(dl, (uint64_t)UINT32_MAX), ofetch_gd_deadline);
            if (fx_owner_fault_delay(o, "GET_DONE")) { /* test-only: the master hears of this copy fault_ms later */
                FX_WARN("test fault: GET_DONE of %zu keys held back %u ms", m, o->cfg.fault_ms);
                ofetch_gd_later(d, o->cfg.fault_ms);
            } else {
                ofetch_gd_send(d);
            }
        } else {
            ofetch_gd_fail(o, c);
            c = NULL;
        }
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
            if (peer) { /* the transfer ends by the batch's deadline (at least 1 ms from now) */
                uint64_t now = fx_now_ms();
                uint64_t left = f->deadline_ms > now ? f->deadline_ms - now : 1;
                fx_ucx_set_timeout_ms(fx_opeers_ucx(o), (uint32_t)FX_MIN(left, (uint64_t)FX_UCX_DEFAULT_TIMEOUT_MS));
                rc = fx_ucx_transfer(fx_opeers_ucx(o), peer, FX_UCX_GET, x->ranges, x->n, ofetch_on_xfer, x);
                fx_ucx_set_timeout_ms(fx_opeers_ucx(o), 0);
            } else {
                rc = FLUXON_ERR_UNAVAILABLE;
            }
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
        unsigned mode = hit && a.modes.n ? (unsigned)a.modes.v[k] : FX_GET_DURABLE;
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
        og->found = true;
        og->src = (uint32_t)a.src.v[k];
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
FX_INTERNAL void fx_ofetch_start(fx_owner_t *o, owner_oget_t **ogs, size_t n, uint32_t caller_timeout_ms)
{
    ofetch_t *s = o->fetch;
    if (fx_odisk_on(o) && (n = ofetch_start_disk(o, ogs, n, caller_timeout_ms)) == 0) {
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
    f->t0_ns = fx_now_ns();
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
    while (s->waiting) {
        ofetch_gd_t *d = s->waiting;
        s->waiting = d->next;
        fx_timer_disarm(o->r, &d->t);
        ofetch_gd_free(d);
    }
    fx_free(o->fetch);
    o->fetch = NULL;
}

#undef OFETCH_RESEND_MS
#undef OFETCH_RESEND_MAX_MS
