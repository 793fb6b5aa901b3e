/* fetch_touch.c — TOUCH (issue 38): the keys of first read-backs of copies this owner wrote
 * back. Such a read serves its readers only (fetch.c): no replica is recorded here, so no
 * eviction of one later makes the target's copy young at the master (what a promoted read
 * did, master/append.c fx_mappend_count_evict). The keys wait here and go to the master
 * together, one-way, at most OTOUCH_FLUSH_MS later (a frame per read cost about as much CPU
 * as the read saved). A key whose TOUCH is lost (no master link, no memory) only lets its
 * copy age from where it was: never a wrong byte. Reactor thread only. */
#include <string.h>

#include "log.h"
#include "owner_fetch_int.h"
#include "owner_link.h"

#define OTOUCH_FLUSH_MS 5u       /* a queued key waits at most this long */
#define OTOUCH_FLUSH_KEYS 1024u  /* or until this many are queued */

struct otouch {
    fx_owner_t *o;
    fx_timer_t timer;
    uint32_t *klen;
    uint64_t *put_ms, *put_ver; /* put_ver: put_ms + cap */
    char *kbuf;
    size_t n, cap, kused, kcap;
};

static void otouch_flush(otouch_t *t)
{
    fx_owner_t *o = t->o;
    fx_conn_t *mc = fx_olink_conn(o);
    fx_str_t *keys = t->n && mc ? fx_malloc(t->n * sizeof *keys) : NULL;
    bool sent = false;
    if (keys) {
        for (size_t i = 0, at = 0; i < t->n; at += t->klen[i++]) keys[i] = (fx_str_t){t->kbuf + at, t->klen[i]};
        fx_body_touch_t b = {{keys, (uint32_t)t->n}, {t->put_ms, (uint32_t)t->n}, {t->put_ver, (uint32_t)t->n}};
        sent = FX_CONN_SEND(mc, FX_MSG_TOUCH, 0, 0, 0, touch, &b) == FLUXON_OK;
        fx_free(keys);
    }
    if (sent) o->fetch->wb_touched += t->n;
    else o->fetch->wb_touch_lost += t->n; /* no master link (or memory): the copies age as they were */
    t->n = t->kused = 0;
}

static void otouch_on_timer(fx_reactor_t *r, fx_timer_t *tm)
{
    (void)r;
    otouch_flush(FX_CONTAINER_OF(tm, otouch_t, timer));
}

static bool otouch_room(otouch_t *t, uint32_t klen)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 256;
        uint32_t *kl = fx_realloc(t->klen, nc * sizeof *kl);
        if (kl) t->klen = kl;
        uint64_t *v = kl ? fx_malloc(2 * nc * sizeof *v) : NULL;
        if (!v) return false;
        if (t->n) {
            memcpy(v, t->put_ms, t->n * sizeof *v);
            memcpy(v + nc, t->put_ver, t->n * sizeof *v);
        }
        fx_free(t->put_ms);
        t->put_ms = v;
        t->put_ver = v + nc;
        t->cap = nc;
    }
    if (t->kused + klen > t->kcap) {
        size_t nc = FX_MAX(2 * t->kcap, t->kused + klen + 4096);
        char *kb = fx_realloc(t->kbuf, nc);
        if (!kb) return false;
        t->kbuf = kb;
        t->kcap = nc;
    }
    return true;
}

FX_INTERNAL void fx_otouch_add(fx_owner_t *o, const char *key, uint32_t klen, uint64_t put_ms, uint64_t put_ver)
{
    ofetch_t *s = o->fetch;
    otouch_t *t = s->touch;
    if (!t && (t = s->touch = fx_calloc(1, sizeof *t)) != NULL) {
        t->o = o;
        fx_timer_init(&t->timer);
    }
    if (!t || !otouch_room(t, klen)) {
        s->wb_touch_lost++;
        return;
    }
    memcpy(t->kbuf + t->kused, key, klen);
    t->kused += klen;
    t->klen[t->n] = klen;
    t->put_ms[t->n] = put_ms;
    t->put_ver[t->n] = put_ver;
    if (++t->n >= OTOUCH_FLUSH_KEYS) {
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
    o->fetch->wb_touch_lost += t->n; /* queued, never sent: the owner stops */
    fx_free(t->klen);
    fx_free(t->put_ms);
    fx_free(t->kbuf);
    fx_free(t);
    o->fetch->touch = NULL;
}
