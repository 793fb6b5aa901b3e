/* evict_send.c — the EVICT messages of the owner's eviction (owner_evict_int.h): ONE EVICT
 * per round names the victims by exact identity; the master's answer retires them (counted
 * by how they went: demoted, or dropped and why) or restores them; an uncertain outcome is
 * sent again with the same identities, never restored. Reactor thread only. */
#include "log.h"
#include "owner_disk.h"
#include "owner_evict_int.h"
#include "owner_link.h"
#include "owner_tenant.h"

#define OEV_RETRY_MS 100u       /* after the master could not be reached */
#define OEV_RESEND_MAX_MS 1000u /* backoff cap of an uncertain EVICT's resend */
#define OEV_STAGE_SLICE 8u        /* disk copies per reactor loop turn (about 1 us each) */

/* Back into the index (unless a newer local version took the key meanwhile) and into the
 * hot tier as the coldest: it goes first next time. */
static void oev_restore(fx_owner_t *o, owner_entry_t *en)
{
    oev_t *kv = o->ev;
    en->evicting = false;
    fx_oevw_moved(kv, en);
    for (size_t i = 0; i < kv->ndc; i++) kv->dc[i].next = 0; /* evictable again: drains look again */
    if (!fx_ostore_lookup(o, en->key, en->klen)) fx_ostore_index(o, en);
    if (en->q_cause) fx_oevq_settled(o, en, false); /* issue 42 */
    fx_oevq_place(o, en);
    fx_evp_insert_cold(fx_oevq_pol(kv, en), &en->lru, en->slot.slot_size, fx_oev_key_hash(en));
    kv->restored++;
}

FX_INTERNAL void fx_oevs_cohort_free(oev_cohort_t *c)
{
    fx_free(c->kbuf);
    fx_free(c->klens);
    fx_free(c->offsets);
    fx_free(c->put_ms);
    fx_free(c->put_ver);
    fx_free(c->slot_sizes);
    fx_free(c->disk);
    fx_free(c->reused);
    fx_free(c->adm);
    fx_free(c);
}

static void oev_cohort_unlink(oev_t *kv, oev_cohort_t *c)
{
    if (c->prev) c->prev->next = c->next;
    else if (kv->cohorts == c) kv->cohorts = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* An evicted value with write-back on: with its copy (demoted) or without it, and why. */
static void oev_count_cause(oev_t *kv, owner_entry_t *en)
{
    switch (en->ev_cause) {
    case OEV_CAUSE_COPIED: kv->evict_copied++; break;
    case OEV_CAUSE_COPYING: kv->dropped_copying++; break;
    case OEV_CAUSE_FAILED: kv->dropped_failed++; break;
    case OEV_CAUSE_BEHIND: kv->dropped_behind++; break;
    case OEV_CAUSE_NOT_ADMITTED: kv->not_admitted++; break;
    default: break;
    }
}

/* The master answered (st: per key) or could not be asked (status != OK): entries still
 * hidden under their identity retire (evicted) or go back (restored). */
static void oev_finish(fx_owner_t *o, oev_cohort_t *c, int status, const fx_body_statuses_t *stp)
{
    oev_t *kv = o->ev;
    oev_cohort_unlink(kv, c);
    fx_body_statuses_t st = stp ? *stp : (fx_body_statuses_t){{NULL, 0}};
    bool ok = status == FLUXON_OK && st.statuses.n == c->n;
    size_t restored = 0;
    for (size_t i = 0; i < c->n; i++) {
        int ks = ok ? (int)(int64_t)st.statuses.v[i] : (status == FLUXON_OK ? FLUXON_ERR_PROTOCOL : status);
        if (c->disk && c->disk[i]) {
            /* not moved: the record goes, unless it was there before this EVICT (read back
             * from it: its route is the master's, an INVALIDATE kills it if it must go) */
            if (!c->reused[i]) fx_odisk_moved(o, c->disk[i], ks);
            kv->to_disk += ks == FLUXON_OK;
        }
        owner_entry_t *en = fx_ostore_at(o, c->offsets[i]);
        if (!en || !en->evicting || en->put_ms != c->put_ms[i] || en->put_ver != c->put_ver[i])
            continue; /* invalidated meanwhile: already retired */
        if (ks == FLUXON_OK || ks == FLUXON_ERR_STALE) {
            /* the master no longer routes this replica (STALE: the key moved on or is
             * gone, and the old version is ours to drop) */
            kv->evictions++;
            kv->evicted_bytes += en->slot.slot_size;
            if (en->tenant) fx_otenant_at(o, en->tenant - 1)->evictions++; /* issue 42 */
            if (en->q_cause) fx_oevq_settled(o, en, true); /* by cause: its quota or pressure */
            kv->stale += ks == FLUXON_ERR_STALE;
            oev_count_cause(kv, en);
            fx_ostore_retire(o, en);
        } else {
            oev_restore(o, en);
            restored++;
        }
    }
    kv->debt -= FX_MIN(kv->debt, c->bytes);
    if (restored) {
        FX_WARN("eviction of %zu values not confirmed by the master (%s): restored, retry in %u ms", restored,
                fluxon_status_string(ok ? FLUXON_ERR_INTERNAL : status), OEV_RETRY_MS);
        fx_oev_tick_arm(o, OEV_RETRY_MS);
    }
    fx_oevs_cohort_free(c);
    fx_oev_kick(o);
}

static void oev_on_delay(fx_reactor_t *r, fx_timer_t *t);

/* The outcome of c is unknown: keep its entries hidden, send the same identities again. */
static void oev_resend_later(fx_owner_t *o, oev_cohort_t *c, int status)
{
    c->uncertain = true;
    uint32_t ms = FX_MIN(OEV_RETRY_MS << FX_MIN(c->attempts, 4u), OEV_RESEND_MAX_MS);
    c->attempts++;
    o->ev->resends++;
    FX_WARN("eviction of %zu values: outcome unknown (%s); kept hidden, sent again in %u ms", c->n,
            fluxon_status_string(status), ms);
    fx_timer_arm(o->r, &c->delay, ms, oev_on_delay);
}

static void oev_on_evict(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                         fx_arena_t *arena)
{
    oev_cohort_t *c = arg;
    if (!c->o->ev || c->o->ev->closing) { /* shut down meanwhile */
        fx_oevs_cohort_free(c);
        return;
    }
    fx_body_statuses_t st;
    status = fx_olink_statuses(status, h, body, arena, c->n, "EVICT", &st);
    if (status == FLUXON_ERR_TIMEOUT || status == FLUXON_ERR_UNAVAILABLE || status == FLUXON_ERR_PROTOCOL) {
        oev_resend_later(c->o, c, status); /* the master may have dropped them */
        return;
    }
    oev_finish(c->o, c, status, &st);
}

static void oev_transmit(fx_owner_t *o, oev_cohort_t *c)
{
    fx_str_t *keys = fx_calloc(c->n, sizeof *keys);
    int rc = FLUXON_ERR_NOMEM;
    if (keys) {
        size_t off = 0;
        for (size_t i = 0; i < c->n; off += c->klens[i], i++) keys[i] = (fx_str_t){c->kbuf + off, c->klens[i]};
        fx_body_evict_t b = {{keys, (uint32_t)c->n}, {c->offsets, (uint32_t)c->n}, {c->put_ms, (uint32_t)c->n},
                             {c->put_ver, (uint32_t)c->n}, {c->disk, c->disk ? (uint32_t)c->n : 0}};
        fx_conn_t *mc = fx_olink_conn(o);
        rc = mc ? FX_RPC_CALL(mc, EVICT, evict, &b, o->cfg.master_timeout_ms, oev_on_evict, c) : FLUXON_ERR_UNAVAILABLE;
        fx_free(keys);
    }
    if (rc != FLUXON_OK && c->uncertain) {
        oev_resend_later(o, c, rc); /* an earlier send may have been applied: never restore */
    } else if (rc != FLUXON_OK) {
        FX_WARN("cannot send EVICT of %zu values: %s", c->n, fluxon_status_string(rc));
        oev_finish(o, c, rc, NULL); /* never sent: restores them */
    }
}

static void oev_on_delay(fx_reactor_t *r, fx_timer_t *t)
{
    oev_cohort_t *c = FX_CONTAINER_OF(t, oev_cohort_t, delay);
    oev_transmit(c->o, c);
}

/* disk.admission (issue 39), per atomic group: all, or a group one of whose keys was seen
 * twice (the write-back sketch). */
static bool oev_disk_admit(fx_owner_t *o, owner_entry_t *en)
{
    if (o->cfg.disk_admission != FX_WB_ADMIT_SECOND_TOUCH) return true;
    if (!en->group) return en->seen_twice;
    for (uint32_t i = 0; i < en->group->n; i++)
        if (en->group->m[i] && en->group->m[i]->seen_twice) return true;
    return false;
}

/* issue 39: which victims the disk tier admits, decided now (the entries are at hand); their
 * copies are made by the pump, OEV_STAGE_SLICE a loop turn, so a request on the rings waits
 * for a slice at most, never for a whole round's copies (the trace replay: a get_start found
 * the owner busy 22 us on average, 6.5 us without a disk tier). False: no disk tier, or no
 * memory for the plan (the victims are then dropped, not copied). */
static bool oev_disk_plan(fx_owner_t *o, oev_cohort_t *c, owner_entry_t **v, size_t n)
{
    if (!fx_odisk_on(o)) return false;
    c->adm = fx_calloc(n, sizeof *c->adm);
    c->disk = fx_calloc(n, sizeof *c->disk);
    c->reused = fx_calloc(n, sizeof *c->reused);
    if (!c->adm || !c->disk || !c->reused) {
        fx_free(c->adm);
        fx_free(c->disk);
        fx_free(c->reused);
        c->adm = NULL;
        c->disk = NULL;
        c->reused = NULL;
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        owner_entry_t *en = v[i];
        if (!oev_disk_admit(o, en)) {
            o->ev->disk_not_admitted++;
            continue; /* group_size 0: not admitted */
        }
        c->adm[i] = (fx_disk_meta_t){en->value_len, en->put_ms, en->put_ver, en->group ? en->group->n : 1,
                                     en->group ? en->group_idx : 0};
    }
    return true;
}

static void oev_on_held(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    FX_CONTAINER_OF(t, oev_cohort_t, delay)->held = false; /* the pump goes on from the next loop turn */
}

static void oev_send_now(fx_owner_t *o, oev_cohort_t *c)
{
    if (fx_owner_fault_delay(o, "EVICT")) { /* test-only: the master hears of this cohort fault_ms later */
        FX_WARN("test fault: EVICT of %zu values held back %u ms", c->n, o->cfg.fault_ms);
        fx_timer_arm(o->r, &c->delay, o->cfg.fault_ms, oev_on_delay);
        return;
    }
    oev_transmit(o, c);
}

FX_INTERNAL bool fx_oevs_stage_pump(void *arg)
{
    fx_owner_t *o = arg;
    oev_t *kv = o->ev;
    if (!kv || !kv->n_staging || kv->closing) return false;
    oev_cohort_t *c = NULL;
    for (oev_cohort_t *x = kv->cohorts; x; x = x->next) /* new cohorts go first in the list: the last is the oldest */
        if (x->staging && !x->held) c = x;
    if (!c) return false; /* held by a test fault: its timer wakes the loop */
    owner_entry_t *v[OEV_STAGE_SLICE];
    fx_disk_meta_t m[OEV_STAGE_SLICE];
    uint64_t d[OEV_STAGE_SLICE];
    bool reused[OEV_STAGE_SLICE];
    size_t at[OEV_STAGE_SLICE], k = 0;
    while (c->staged < c->n && k < OEV_STAGE_SLICE) {
        size_t i = c->staged++;
        if (!c->adm[i].group_size) continue;
        /* by identity: a victim invalidated meanwhile is retired, its slot maybe reused */
        owner_entry_t *en = fx_ostore_at(o, c->offsets[i]);
        if (!en || !en->evicting || en->put_ms != c->put_ms[i] || en->put_ver != c->put_ver[i]) continue;
        v[k] = en;
        m[k] = c->adm[i];
        at[k++] = i;
    }
    if (k) {
        kv->stage_slices++;
        fx_odisk_demote(o, v, m, k, d, reused);
        for (size_t j = 0; j < k; j++) {
            c->disk[at[j]] = d[j];
            c->reused[at[j]] = reused[j];
        }
    }
    if (c->staged == c->n) {
        c->staging = false;
        kv->n_staging--;
        oev_send_now(o, c);
    }
    return kv->n_staging > 0;
}

/* Sends ONE EVICT for the victims (already hidden); on failure restores them. */
FX_INTERNAL void fx_oevs_send(fx_owner_t *o, owner_entry_t **v, size_t n)
{
    oev_t *kv = o->ev;
    size_t kbytes = 0;
    for (size_t i = 0; i < n; i++) kbytes += v[i]->klen;
    oev_cohort_t *c = fx_calloc(1, sizeof *c);
    if (c) {
        c->offsets = fx_calloc(n, sizeof *c->offsets);
        c->put_ms = fx_calloc(n, sizeof *c->put_ms);
        c->put_ver = fx_calloc(n, sizeof *c->put_ver);
        c->slot_sizes = fx_calloc(n, sizeof *c->slot_sizes);
        c->klens = fx_calloc(n, sizeof *c->klens);
        c->kbuf = fx_malloc(kbytes ? kbytes : 1);
    }
    if (!c || !c->offsets || !c->put_ms || !c->put_ver || !c->slot_sizes || !c->klens || !c->kbuf) {
        if (c) fx_oevs_cohort_free(c);
        for (size_t i = 0; i < n; i++) oev_restore(o, v[i]);
        FX_WARN("eviction of %zu values: out of memory; retry in %u ms", n, OEV_RETRY_MS);
        fx_oev_tick_arm(o, OEV_RETRY_MS);
        return;
    }
    c->o = o;
    c->n = n;
    fx_timer_init(&c->delay);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        owner_entry_t *en = v[i];
        memcpy(c->kbuf + off, en->key, en->klen);
        off += en->klen;
        c->klens[i] = en->klen;
        c->offsets[i] = en->slot.offset;
        c->put_ms[i] = en->put_ms;
        c->put_ver[i] = en->put_ver;
        c->slot_sizes[i] = en->slot.slot_size;
        c->bytes += en->slot.slot_size;
    }
    c->staging = oev_disk_plan(o, c, v, n);
    c->next = kv->cohorts;
    if (kv->cohorts) kv->cohorts->prev = c;
    kv->cohorts = c;
    kv->n_cohorts++;
    kv->selected_bytes += c->bytes;
    kv->debt += c->bytes;
    if (c->staging) {
        kv->n_staging++; /* the pump makes its copies, then sends it */
        if (fx_owner_fault_delay(o, "EVICT")) { /* test-only: before its copies (a DELETE may come meanwhile) */
            FX_WARN("test fault: EVICT of %zu values held back %u ms before their disk copies", n, o->cfg.fault_ms);
            c->held = true;
            fx_timer_arm(o->r, &c->delay, o->cfg.fault_ms, oev_on_held);
        }
        return;
    }
    oev_send_now(o, c);
}

#undef OEV_RETRY_MS
#undef OEV_RESEND_MAX_MS
#undef OEV_STAGE_SLICE
