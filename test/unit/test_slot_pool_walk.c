/* test_slot_pool_walk.c — the slot pool (cache/slot_pool.c) under a 100k-op randomized
 * walk of claims, waits, transitions, releases and expiries, checked against a reference
 * model after every step. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "slotfix.h"

/* ---- randomized walk against a reference model ----------------------------------------- */

#define RW_OPS 100000
#define RW_NCLS 4 /* slot sizes 1..4 pages; the 4-page class never gets a grant */
#define RW_MAXSLOTS 32

typedef struct rw_slot {
    int state, cls;
    bool route, aborted;
    uint32_t holders;
    uint64_t use_seq;
} rw_slot_t;

typedef struct rw_tok {
    int idx, cls, queued; /* queued: 1 while the model expects it in a class queue */
    uint64_t queued_ms, wait_id;
} rw_tok_t;

typedef struct rw_event {
    int tok, status, flat;
    uint64_t use_seq;
} rw_event_t;

static struct rw {
    fx_slot_pool_t *p;
    rw_slot_t s[RW_MAXSLOTS];
    int nslots, grant_first[5], grant_cls[5];
    int freeq[RW_NCLS][RW_MAXSLOTS * 4], fhead[RW_NCLS], ftail[RW_NCLS];
    int *waitq[RW_NCLS], whead[RW_NCLS], wtail[RW_NCLS];
    rw_tok_t *tok;
    int ntok, exp_head;
    uint64_t seq, now;
    rw_event_t want[64], got[64];
    int nwant, ngot;
    fx_slot_ref_t hist[64];
} rw;

static uint64_t rw_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(uint64_t n)
{
    rw_rng ^= rw_rng << 13, rw_rng ^= rw_rng >> 7, rw_rng ^= rw_rng << 17;
    return rw_rng % n;
}

static int rw_flat(const fx_slot_ref_t *r) { return rw.grant_first[r->grant_id] + (int)r->index; }

static void rw_cb(void *arg, int status, const fx_slot_ref_t *slot)
{
    rw_tok_t *t = arg;
    cr_assert_lt(rw.ngot, 64);
    rw.got[rw.ngot++] = (rw_event_t){t->idx, status, slot ? rw_flat(slot) : -1,
                                     slot ? slot->use_seq : 0};
}

static void rw_take(int f)
{
    rw.s[f].state = FX_SLOT_PREPARED;
    rw.s[f].use_seq = ++rw.seq;
}

static void rw_free(int f)
{
    rw_slot_t *m = &rw.s[f];
    *m = (rw_slot_t){.state = FX_SLOT_FREE, .cls = m->cls, .use_seq = m->use_seq};
    int c = m->cls;
    while (rw.whead[c] < rw.wtail[c]) {
        rw_tok_t *t = &rw.tok[rw.waitq[c][rw.whead[c]++]];
        if (!t->queued) continue; /* cancelled or expired: lazily dropped */
        t->queued = 0;
        rw_take(f);
        rw.want[rw.nwant++] = (rw_event_t){t->idx, FLUXON_OK, f, m->use_seq};
        return;
    }
    rw.freeq[c][rw.ftail[c]++ % (RW_MAXSLOTS * 4)] = f;
}

static int rw_pop_free(int c)
{
    if (rw.fhead[c] == rw.ftail[c]) return -1;
    return rw.freeq[c][rw.fhead[c]++ % (RW_MAXSLOTS * 4)];
}

static fx_slot_ref_t rw_ref(int f)
{
    int g = 1;
    while (g < 4 && rw.grant_first[g + 1] <= f) g++;
    uint64_t sz = (uint64_t)(rw.grant_cls[g] + 1) * PG;
    uint32_t idx = (uint32_t)(f - rw.grant_first[g]);
    return (fx_slot_ref_t){.grant_id = (uint64_t)g, .offset = (uint64_t)(g - 1) * 8 * PG + idx * sz,
                           .slot_size = sz, .use_seq = rw.s[f].use_seq, .index = idx};
}

static void rw_verify(void)
{
    cr_assert_eq(rw.ngot, rw.nwant, "deliveries: got %d want %d", rw.ngot, rw.nwant);
    for (int i = 0; i < rw.ngot; i++) {
        cr_assert_eq(rw.got[i].tok, rw.want[i].tok);
        cr_assert_eq(rw.got[i].status, rw.want[i].status);
        cr_assert_eq(rw.got[i].flat, rw.want[i].flat);
        cr_assert_eq(rw.got[i].use_seq, rw.want[i].use_seq);
    }
    rw.ngot = rw.nwant = 0;
    uint64_t n[FX_SLOT_NSTATES] = {0}, holders = 0, draining = 0, waiters = 0;
    for (int f = 0; f < rw.nslots; f++) {
        n[rw.s[f].state]++;
        holders += rw.s[f].holders;
        draining += (rw.s[f].state == FX_SLOT_COMMITTED && !rw.s[f].route) || rw.s[f].aborted;
    }
    for (int i = 0; i < rw.ntok; i++) waiters += rw.tok[i].queued;
    fx_slot_pool_stats_t st = stats(rw.p);
    cr_assert_eq(st.free, n[FX_SLOT_FREE]);
    cr_assert_eq(st.prepared, n[FX_SLOT_PREPARED]);
    cr_assert_eq(st.pending, n[FX_SLOT_PENDING]);
    cr_assert_eq(st.committed, n[FX_SLOT_COMMITTED]);
    cr_assert_eq(st.holder_refs, holders);
    cr_assert_eq(st.draining, draining);
    cr_assert_eq(st.waiters, waiters);
    CHECK(rw.p);
}

static int rw_expected(int op, int f, const fx_slot_ref_t *r)
{
    rw_slot_t *m = &rw.s[f];
    if (r->use_seq != m->use_seq || m->state == FX_SLOT_FREE) return FLUXON_ERR_STALE;
    switch (op) {
    case 0:
        if (m->state != FX_SLOT_PREPARED) return FLUXON_ERR_WRONG_HANDLE;
        m->state = FX_SLOT_PENDING;
        return FLUXON_OK;
    case 1:
        if (m->state != FX_SLOT_PENDING || m->aborted) return FLUXON_ERR_WRONG_HANDLE;
        m->state = FX_SLOT_COMMITTED;
        m->route = true;
        return FLUXON_OK;
    case 2:
        if (m->state != FX_SLOT_COMMITTED || !m->route) return FLUXON_ERR_WRONG_HANDLE;
        m->route = false;
        if (!m->holders) rw_free(f);
        return FLUXON_OK;
    case 3:
        if (m->state == FX_SLOT_PREPARED) {
            rw_free(f);
        } else if (m->state == FX_SLOT_PENDING && !m->aborted) {
            m->aborted = true;
            if (!m->holders) rw_free(f);
        } else {
            return FLUXON_ERR_WRONG_HANDLE;
        }
        return FLUXON_OK;
    case 4:
        if (m->state == FX_SLOT_PREPARED || m->aborted) return FLUXON_ERR_WRONG_HANDLE;
        if (m->state == FX_SLOT_COMMITTED && !m->route) return FLUXON_ERR_STALE;
        m->holders++;
        return FLUXON_OK;
    default:
        if (!m->holders) return FLUXON_ERR_WRONG_HANDLE;
        if (--m->holders == 0 && ((m->state == FX_SLOT_COMMITTED && !m->route) || m->aborted))
            rw_free(f);
        return FLUXON_OK;
    }
}

static int rw_call(int op, const fx_slot_ref_t *r)
{
    switch (op) {
    case 0: return fx_slot_pool_mark_pending(rw.p, r);
    case 1: return fx_slot_pool_mark_committed(rw.p, r);
    case 2: return fx_slot_pool_route_dead(rw.p, r);
    case 3: return fx_slot_pool_release_prepared(rw.p, r);
    case 4: return fx_slot_pool_holder_ref(rw.p, r);
    default: return fx_slot_pool_holder_unref(rw.p, r);
    }
}

static void rw_expire_model(uint64_t now)
{
    for (int i = rw.exp_head; i < rw.ntok; i++) {
        rw_tok_t *t = &rw.tok[i];
        if (!t->queued) {
            if (i == rw.exp_head) rw.exp_head++;
            continue;
        }
        if (t->queued_ms + 100 > now) break;
        t->queued = 0;
        rw.want[rw.nwant++] = (rw_event_t){t->idx, FLUXON_ERR_TIMEOUT, -1, 0};
    }
}

Test(slot_pool, randomized_walk_100k, .timeout = 120)
{
    fx_log_set_level(FX_LOG_ERROR); /* expiries are expected here; keep the output short */
    memset(&rw, 0, sizeof rw);
    rw.p = mk_pool(8 * PG, 0); /* soft 10 ms, timeout 100 ms */
    rw.tok = calloc(RW_OPS, sizeof *rw.tok);
    for (int c = 0; c < RW_NCLS; c++) rw.waitq[c] = calloc(RW_OPS, sizeof(int));
    const int gcls[5] = {0, 0, 0, 1, 2}; /* grants 1,2: 1 page; 3: 2 pages; 4: 3 pages */
    for (int g = 1; g <= 4; g++) {
        int per = 8 / (gcls[g] + 1);
        rw.grant_first[g] = rw.nslots;
        rw.grant_cls[g] = gcls[g];
        for (int i = 0; i < per; i++) {
            rw.s[rw.nslots].cls = gcls[g];
            rw.freeq[gcls[g]][rw.ftail[gcls[g]]++] = rw.nslots;
            rw.nslots++;
        }
        cr_assert_eq(fx_slot_pool_add_grant(rw.p, (uint64_t)g, (uint64_t)(g - 1) * 8 * PG,
                                            (uint64_t)(gcls[g] + 1) * PG), FLUXON_OK);
    }
    rw_verify();
    const uint64_t lens[] = {1, 4096, 4097, 8192, 9000, 12288, 16384};
    uint64_t served = 0, timeouts = 0, stale = 0;
    for (int step = 0; step < RW_OPS; step++) {
        rw.now += rnd(3);
        uint64_t k = rnd(100);
        if (k < 15 || (k < 22 && rw.ntok < RW_OPS)) {
            uint64_t len = lens[rnd(FX_ARRAY_LEN(lens))];
            int c = (int)((fx_slot_size_for(len) / PG) - 1);
            fx_slot_ref_t r = {0};
            uint64_t id = 0;
            int f = rw_pop_free(c), rc;
            if (k < 15) {
                rc = fx_slot_pool_claim(rw.p, len, &r);
                cr_assert_eq(rc, f < 0 ? FLUXON_ERR_NO_SPACE : FLUXON_OK);
            } else {
                rw_tok_t *t = &rw.tok[rw.ntok];
                *t = (rw_tok_t){.idx = rw.ntok, .cls = c};
                rc = fx_slot_pool_wait(rw.p, len, rw.now, rw_cb, t, &r, &id);
                cr_assert_eq(rc, f < 0 ? FLUXON_IN_PROGRESS : FLUXON_OK);
                if (rc == FLUXON_IN_PROGRESS) {
                    *t = (rw_tok_t){rw.ntok, c, 1, rw.now, id};
                    rw.waitq[c][rw.wtail[c]++] = rw.ntok;
                }
                rw.ntok++;
            }
            if (f >= 0) {
                rw_take(f);
                cr_assert_eq(rw_flat(&r), f, "not the oldest free slot of the class");
                cr_assert_eq(r.use_seq, rw.s[f].use_seq);
                rw.hist[rnd(64)] = r;
            }
        } else if (k < 25) {
            if (!rw.ntok) continue;
            rw_tok_t *t = &rw.tok[rw.ntok - 1 - (int)rnd((uint64_t)FX_MIN(rw.ntok, 50))];
            int rc = fx_slot_pool_cancel_wait(rw.p, t->wait_id);
            cr_assert_eq(rc, t->queued ? FLUXON_OK : FLUXON_ERR_NOT_FOUND);
            t->queued = 0;
        } else if (k < 28) {
            rw_expire_model(rw.now);
            timeouts += (uint64_t)rw.nwant;
            cr_assert_eq(fx_slot_pool_expire(rw.p, rw.now), (uint64_t)rw.nwant);
        } else if (k < 30) {
            uint64_t best = UINT64_MAX, sz = 0;
            for (int c = 0; c < RW_NCLS; c++)
                for (int i = rw.whead[c]; i < rw.wtail[c]; i++) {
                    rw_tok_t *t = &rw.tok[rw.waitq[c][i]];
                    if (!t->queued) continue;
                    if (rw.now - t->queued_ms >= 10 && t->queued_ms < best) best = t->queued_ms;
                    break; /* only the class's oldest waiter matters */
                }
            int rc = fx_slot_pool_needs_grant(rw.p, rw.now, &sz);
            cr_assert_eq(rc, best == UINT64_MAX ? FLUXON_ERR_NOT_FOUND : FLUXON_OK);
            if (rc == FLUXON_OK) {
                int c = (int)(sz / PG) - 1, i = rw.whead[c];
                while (!rw.tok[rw.waitq[c][i]].queued) i++;
                cr_assert_eq(rw.tok[rw.waitq[c][i]].queued_ms, best);
            }
        } else {
            fx_slot_ref_t r;
            if (rnd(100) < 85) {
                int f = (int)rnd((uint64_t)rw.nslots);
                if (!rw.s[f].use_seq) continue;
                r = rw_ref(f);
            } else {
                r = rw.hist[rnd(64)];
                if (!r.use_seq) continue;
            }
            static const int weights[6] = {20, 20, 12, 13, 18, 17};
            int op = 0;
            for (int w = (int)rnd(100); w >= weights[op]; op++) w -= weights[op];
            int f = rw_flat(&r);
            int want = rw_expected(op, f, &r);
            int got = rw_call(op, &r);
            cr_assert_eq(got, want, "step %d op %d slot %d: got %d want %d", step, op, f, got,
                         want);
            stale += got == FLUXON_ERR_STALE;
        }
        for (int i = 0; i < rw.nwant; i++) served += rw.want[i].status == FLUXON_OK;
        rw_verify();
    }
    /* R1: with the workload over, everything returns to baseline */
    rw.now += 1000;
    rw_expire_model(rw.now);
    cr_assert_eq(fx_slot_pool_expire(rw.p, rw.now), (uint64_t)rw.nwant);
    rw_verify();
    for (int f = 0; f < rw.nslots; f++) {
        fx_slot_ref_t r = rw_ref(f);
        rw_slot_t *m = &rw.s[f];
        if (m->state == FX_SLOT_PREPARED || (m->state == FX_SLOT_PENDING && !m->aborted))
            cr_assert_eq(rw_call(3, &r), rw_expected(3, f, &r));
        if (m->state == FX_SLOT_COMMITTED && m->route)
            cr_assert_eq(rw_call(2, &r), rw_expected(2, f, &r));
        while (m->holders) cr_assert_eq(rw_call(5, &r), rw_expected(5, f, &r));
        cr_assert_eq(m->state, FX_SLOT_FREE, "slot %d not drained", f);
    }
    rw_verify();
    fx_slot_pool_stats_t st = stats(rw.p);
    cr_assert_eq(st.free, (uint64_t)rw.nslots);
    cr_assert_eq(st.holder_refs + st.draining + st.waiters + st.used_bytes, 0);
    cr_assert_gt(served, 100, "too few waiters served: %lu", (unsigned long)served);
    cr_assert_gt(timeouts, 100, "too few timeouts: %lu", (unsigned long)timeouts);
    cr_assert_gt(stale, 1000, "too few stale refs: %lu", (unsigned long)stale);
    cr_assert_gt(st.frees, 4000, "too few frees: %lu", (unsigned long)st.frees);
    cr_log_info("walk: %lu frees, %lu waiters served, %lu timeouts, %lu stale refs",
                (unsigned long)st.frees, (unsigned long)served, (unsigned long)timeouts,
                (unsigned long)stale);
    fx_slot_pool_destroy(rw.p);
    for (int c = 0; c < RW_NCLS; c++) free(rw.waitq[c]);
    free(rw.tok);
}
