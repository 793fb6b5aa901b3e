/* fetch_touch.c — TOUCH (issue 38): the keys of first read-backs of copies this owner wrote
 * back. Such a read serves its readers only (fetch.c): no replica is recorded here, so no
 * eviction of one later makes the target's copy young at the master (what a promoted read
 * did, master/append.c fx_mappend_count_evict). The keys wait here and go to the master
 * together, one-way, at most OTOUCH_FLUSH_MS later (a frame per read cost about as much CPU
 * as the read saved). A key whose TOUCH is lost (no master link, no memory) only lets its
 * copy age from where it was: never a wrong byte. Reactor thread only. */
#include "keybatch.h"
#include "log.h"
#include "owner_fetch_int.h"
#include "owner_link.h"

#define OTOUCH_FLUSH_MS 5u       /* a queued key waits at most this long */
#define OTOUCH_FLUSH_KEYS 1024u  /* or until this many are queued */

struct otouch {
    fx_owner_t *o;
    fx_timer_t timer;
    fx_keybatch_t q; /* columns: put_ms, put_ver */
};

static void otouch_flush(otouch_t *t)
{
    fx_owner_t *o = t->o;
    fx_conn_t *mc = fx_olink_conn(o);
    size_t n = t->q.n;
    fx_str_t *keys = n && mc ? fx_malloc(n * sizeof *keys) : NULL;
    bool sent = false;
    if (keys) {
        fx_keybatch_views(&t->q, keys);
        fx_body_touch_t b = {{keys, (uint32_t)n}, {t->q.col[0], (uint32_t)n}, {t->q.col[1], (uint32_t)n}};
        sent = FX_CONN_SEND(mc, FX_MSG_TOUCH, 0, 0, 0, touch, &b) == FLUXON_OK;
        fx_free(keys);
    }
    if (sent) o->fetch->wb_touched += n;
    else o->fetch->wb_touch_lost += n; /* no master link (or memory): the copies age as they were */
    fx_keybatch_clear(&t->q);
}

static void otouch_on_timer(fx_reactor_t *r, fx_timer_t *tm)
{
    (void)r;
    otouch_flush(FX_CONTAINER_OF(tm, otouch_t, timer));
}

FX_INTERNAL void fx_otouch_add(fx_owner_t *o, const char *key, uint32_t klen, uint64_t put_ms, uint64_t put_ver)
{
    ofetch_t *s = o->fetch;
    otouch_t *t = s->touch;
    if (!t && (t = s->touch = fx_calloc(1, sizeof *t)) != NULL) {
        t->o = o;
        fx_timer_init(&t->timer);
    }
    const uint64_t v[2] = {put_ms, put_ver};
    if (!t || !fx_keybatch_add(&t->q, key, klen, v, 2)) {
        s->wb_touch_lost++;
        return;
    }
    if (t->q.n >= OTOUCH_FLUSH_KEYS) {
        fx_timer_disarm(o->r, &t->timer);
        otouch_flush(t);
    } else if (!fx_timer_armed(&t->timer)) {
        fx_timer_arm(o->r, &t->timer, OTOUCH_FLUSH_MS, otouch_on_timer);
    }
}

FX_INTERNAL void fx_otouch_fini(fx_owner_t *o)
{
    otouch_t *t = o->fetch ? o->fetch->touch : NULL;
    if (!t) return;
    fx_timer_disarm(o->r, &t->timer);
    o->fetch->wb_touch_lost += t->q.n; /* queued, never sent: the owner stops */
    fx_keybatch_free(&t->q);
    fx_free(t);
    o->fetch->touch = NULL;
}
