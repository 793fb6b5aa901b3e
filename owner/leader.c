/* leader.c — the owner's view of which master leads (issue 17; see owner_leader.h):
 * polls etcd's election API (/v3/election/leader) on its own thread. */
#include <pthread.h>
#include <stdio.h>

#include "etcd.h"
#include "log.h"
#include "owner_leader.h"

struct fx_oleader {
    fx_reactor_t *r;
    void (*changed)(void *arg);
    void *arg;
    char key[128];
    uint32_t poll_ms;
    fx_etcd_t *etcd;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, refresh;            /* mu */
    char value[FX_ETCD_VALUE_MAX]; /* mu: "" = no leader known */
    int64_t rev;                   /* mu */
    bool answered;                 /* mu: etcd answered a lookup (leader or none) */
};

/* Asks etcd once; true when the leader changed. */
static bool ol_query(fx_oleader_t *w, uint64_t *warned_ms)
{
    char value[FX_ETCD_VALUE_MAX] = "", err[256] = "";
    int64_t rev = 0;
    int rc = fx_etcd_leader(w->etcd, w->key, FX_MAX(w->poll_ms, 500u), value, sizeof value, &rev, err, sizeof err);
    if (rc != FLUXON_OK && rc != FLUXON_ERR_NOT_FOUND) {
        uint64_t now = fx_now_ms();
        if (!*warned_ms || now - *warned_ms >= 5000) { /* keep what was known: the master may still serve */
            *warned_ms = now;
            FX_WARN("cannot ask etcd for the leader of \"%s\": %s; retrying", w->key, err);
        }
        return false;
    }
    *warned_ms = 0;
    if (rc == FLUXON_ERR_NOT_FOUND) value[0] = 0, rev = 0;
    pthread_mutex_lock(&w->mu);
    bool changed = strcmp(value, w->value) != 0 || rev != w->rev;
    fx_strlcpy(w->value, value, sizeof w->value);
    w->rev = rev;
    w->answered = true;
    pthread_mutex_unlock(&w->mu);
    if (changed) {
        if (value[0]) FX_INFO("etcd names master %s the leader of \"%s\" (revision %lld)", value, w->key, (long long)rev);
        else FX_WARN("etcd names no leader of \"%s\" now", w->key);
    }
    return changed;
}

static void *ol_thread(void *arg)
{
    fx_oleader_t *w = arg;
    fx_log_set_context("owner", "leader");
    fx_thread_name(pthread_self(), "leader", NULL);
    uint64_t warned_ms = 0;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        w->refresh = false;
        pthread_mutex_unlock(&w->mu);
        if (ol_query(w, &warned_ms)) fx_reactor_post(w->r, w->changed, w->arg);
        pthread_mutex_lock(&w->mu);
        struct timespec dl = fx_deadline_ts(w->poll_ms);
        while (!w->stop && !w->refresh && pthread_cond_timedwait(&w->cv, &w->mu, &dl) == 0) {}
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

FX_INTERNAL int fx_oleader_start(fx_reactor_t *r, const fx_config_t *cfg, void (*changed)(void *arg), void *arg,
                                 fx_oleader_t **w_p)
{
    fx_oleader_t *w = fx_calloc(1, sizeof *w);
    if (!w) return FLUXON_ERR_NOMEM;
    w->r = r;
    w->changed = changed;
    w->arg = arg;
    fx_strlcpy(w->key, cfg->ha_key, sizeof w->key);
    w->poll_ms = FX_MIN(FX_MAX(cfg->ha_lease_ttl_ms / 4, 50u), 1000u);
    pthread_mutex_init(&w->mu, NULL);
    fx_cond_init_monotonic(&w->cv);
    int rc = fx_etcd_new(cfg->ha_etcd, &w->etcd);
    if (rc == FLUXON_OK && pthread_create(&w->thread, NULL, ol_thread, w) != 0) rc = FLUXON_ERR_INTERNAL;
    if (rc != FLUXON_OK) {
        fx_oleader_free(w);
        return rc;
    }
    w->started = true;
    FX_INFO("owner looks its master up in etcd %s (election \"%s\", every %u ms)", cfg->ha_etcd, w->key, w->poll_ms);
    *w_p = w;
    return FLUXON_OK;
}

FX_INTERNAL bool fx_oleader_get(fx_oleader_t *w, char *host, size_t cap, uint16_t *port, int64_t *rev)
{
    char value[FX_ETCD_VALUE_MAX];
    pthread_mutex_lock(&w->mu);
    fx_strlcpy(value, w->value, sizeof value);
    *rev = w->rev;
    pthread_mutex_unlock(&w->mu);
    return value[0] && fx_parse_hostport(value, host, cap, port) == 0 && *port;
}

FX_INTERNAL bool fx_oleader_answered(fx_oleader_t *w)
{
    pthread_mutex_lock(&w->mu);
    bool a = w->answered;
    pthread_mutex_unlock(&w->mu);
    return a;
}

FX_INTERNAL void fx_oleader_refresh(fx_oleader_t *w)
{
    pthread_mutex_lock(&w->mu);
    w->refresh = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

FX_INTERNAL void fx_oleader_stop(fx_oleader_t *w)
{
    if (!w || !w->started) return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->started = false;
}

FX_INTERNAL void fx_oleader_free(fx_oleader_t *w)
{
    if (!w) return;
    fx_oleader_stop(w);
    fx_etcd_free(w->etcd);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    fx_free(w);
}
