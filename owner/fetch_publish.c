/* fetch_publish.c — a fetched copy's publication (fetch.c's second half; owner_fetch_int.h):
 * one GET_DONE per transfer batch registers the copies with the master before anyone reads
 * them (D1: accepted only if the source replica outlived the copy); an uncertain outcome is
 * sent again with the same identities (backoff), the readers answered at their deadline
 * (L3); the outcome commits, serves as a temporary copy, or looks again (a version replaced
 * meanwhile); copies that end without one tell the master to forget their in-flight record
 * (ABANDON). Reactor thread only. */
#include <stdio.h>

#include "log.h"
#include "owner_disk.h"
#include "owner_fetch.h"
#include "owner_link.h"
#include "owner_oracle.h"
#include "owner_replica.h"

#define OFETCH_RESEND_MS 100u      /* first resend of an uncertain GET_DONE */
#define OFETCH_RESEND_MAX_MS 1000u /* backoff cap */
#define OFETCH_LOOKUPS_MAX 3u      /* LOOKUPs for one get of a key being replaced meanwhile */

#include "owner_fetch_int.h"

FX_INTERNAL void ofetch_gd_ctx_free(ofetch_getdone_ctx_t *c)
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
    og->have_slot = og->found = og->own_disk = og->src_kept = false;
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
        if (en->target_kept) fx_orepl_kept(o, en); /* issue 38: its source keeps a copy */
        /* a hit over UCX (a new user's finding: the demo's local hits went negative with
         * this owner's disk and its prefetches counted here) */
        if (og) ofetch_count_hit(kv, og, !og->prefetch && !fx_disk_is_off(og->src_off));
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
FX_INTERNAL void ofetch_abandon(fx_owner_t *o, owner_oget_t *const *ogs, size_t n)
{
    fx_conn_t *mc = fx_olink_conn(o);
    if (!mc || !n) return;
    fx_str_t *keys = fx_calloc(n, sizeof *keys);
    uint64_t *cols = fx_calloc(2 * n, sizeof *cols); /* zeros, then modes */
    size_t m = 0;
    for (size_t i = 0; keys && cols && i < n; i++)
        if (ogs[i] && ogs[i]->found && ogs[i]->mode == FX_GET_DURABLE && !ogs[i]->own_disk && !ogs[i]->wb_rec) {
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
    fx_body_statuses_t st;
    status = fx_olink_statuses(status, h, body, arena, c->n, "GET_DONE", &st);
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

FX_INTERNAL void ofetch_publish(fx_owner_t *o, ofetch_getdone_ctx_t *c, fx_str_t *keys, uint64_t *cols, size_t n,
                                const char *src_id, uint64_t src_gen, uint64_t deadline_ms)
{
    ofetch_gd_t *d = fx_calloc(1, sizeof *d);
    if (!d) {
        ofetch_gd_fail(o, c);
        fx_free(keys);
        fx_free(cols);
        return;
    }
    *d = (ofetch_gd_t){.o = o, .c = c, .keys = keys, .cols = cols, .n = n, .src_gen = src_gen};
    fx_strlcpy(d->src_id, src_id, sizeof d->src_id);
    fx_timer_init(&d->t);
    fx_timer_init(&d->dl);
    uint64_t now = fx_now_ms(), dl = deadline_ms > now ? deadline_ms - now : 1;
    fx_timer_arm(o->r, &d->dl, (uint32_t)FX_MIN(dl, (uint64_t)UINT32_MAX), ofetch_gd_deadline);
    if (fx_owner_fault_delay(o, "GET_DONE")) { /* test-only: the master hears of this copy fault_ms later */
        FX_WARN("test fault: GET_DONE of %zu keys held back %u ms", c->n, o->cfg.fault_ms);
        ofetch_gd_later(d, o->cfg.fault_ms);
    } else {
        ofetch_gd_send(d);
    }
}

FX_INTERNAL void ofetch_publish_fini(fx_owner_t *o)
{
    ofetch_t *s = o->fetch;
    while (s->waiting) {
        ofetch_gd_t *d = s->waiting;
        s->waiting = d->next;
        fx_timer_disarm(o->r, &d->t);
        ofetch_gd_free(d);
    }
}

#undef OFETCH_RESEND_MS
#undef OFETCH_RESEND_MAX_MS
#undef OFETCH_LOOKUPS_MAX
