/* ha.c — the master's leader election through etcd (issue 17; see master_ha.h). A thread
 * grants an etcd lease, keeps it alive (every third of its TTL) and campaigns with it
 * through etcd's election API (etcd/v3election: the candidate whose key has the lowest
 * revision leads; a key dies with its lease). The reactor learns "elected" and "deposed"
 * by posts; the request path checks the lease deadline itself, so fencing does not wait
 * for the thread: the deadline is the time a keepalive was SENT plus the TTL etcd
 * renewed, minus a margin — etcd cannot expire the lease (and elect another master)
 * before it.
 *
 * Put ids (W6): they must grow across masters, whatever the hosts' clocks say. The leader
 * keeps a ceiling in etcd (key <ha.key>.put_id_ceiling, outside the election's prefix
 * <ha.key>/ whose keys are candidates), MHA_PUT_AHEAD_MS past its put clock and extended
 * as it goes, and never issues a put id above the ceiling it stored; a new leader reads it
 * before it serves and issues ids above it. */
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>

#include "etcd.h"
#include "log.h"
#include "master_ha.h"
#include "reactor.h"

#define MHA_PUT_AHEAD_MS 60000u /* the put-id ceiling runs this far ahead of the put clock */

typedef struct mha {
    fx_master_t *m;
    fx_mha_hooks_t hooks;
    fx_etcd_t *etcd;
    pthread_t thread;
    bool thread_started, stopping;
    atomic_bool stop;
    atomic_uint_fast64_t deadline_ms; /* leading and the lease surely held until then (fx_boot_ms: CLOCK_BOOTTIME
                                       * goes on through a suspend or VM pause, as etcd's clock does: H2);
                                       * 0 = not leading */
    atomic_uint_fast64_t term;        /* the leader key's create revision while leading */
    atomic_uint_fast64_t put_floor;   /* the previous leaders' put-id ceiling (put_ms), read at election */
    atomic_uint_fast64_t put_ceiling; /* put_ms this leader stored in etcd: no put id above it; 0: none */
    char value[FX_ETCD_VALUE_MAX];    /* the address advertised: listen host:port */
    pthread_mutex_t mu;
    char why[256]; /* the last deposition's reason (mu) */
    /* the tenants' quota table (issue 42), key <ha.key>.tenants (JSON, tenants.c) */
    char *ten_store;  /* (mu) set by the reactor: the table to store; NULL: none pending */
    char *ten_loaded; /* (mu) read from etcd, for the reactor to apply */
    char *ten_known;  /* thread: the key's value as last stored or read ("" absent) */
    uint64_t ten_next_ms; /* thread: the next read of the key (a change made in etcd) */
    /* reactor side */
    bool leading;
    uint64_t leading_term; /* the term the elected post ran for: served only while it is the thread's (H3) */
    uint64_t elections, depositions;
    atomic_uint_fast64_t ten_stores;  /* tenants tables stored in etcd */
    atomic_uint_fast64_t ten_refused; /* values read that no table can be (too long) */
    bool ten_too_long;                /* thread: the last read was such a value (said once) */
} mha_t;

/* ---- reactor side ---- */
static void mha_on_elected(void *arg)
{
    mha_t *h = arg;
    if (h->stopping || h->leading || !atomic_load(&h->deadline_ms)) return; /* lost again before this ran */
    h->leading = true;
    h->leading_term = atomic_load(&h->term);
    h->elections++;
    FX_INFO("master %s is the leader of \"%s\" (etcd key revision %llu): serving", h->value, h->m->cfg.ha_key,
            (unsigned long long)atomic_load(&h->term));
    h->hooks.elected(h->m);
}

/* A tenants table read from etcd: applied (sent on to every owner) whoever leads. */
static void mha_on_tenants(void *arg)
{
    mha_t *h = arg;
    pthread_mutex_lock(&h->mu);
    char *json = h->ten_loaded;
    h->ten_loaded = NULL;
    pthread_mutex_unlock(&h->mu);
    if (json && !h->stopping) fx_mtenants_load(h->m, json);
    fx_free(json);
}

FX_INTERNAL void fx_mha_tenants_store(fx_master_t *m, char *json)
{
    mha_t *h = m->ha;
    if (!h) {
        fx_free(json);
        return;
    }
    pthread_mutex_lock(&h->mu);
    fx_free(h->ten_store);
    h->ten_store = json;
    pthread_mutex_unlock(&h->mu);
    fx_etcd_wakeup(h->etcd);
}

static void mha_on_deposed(void *arg)
{
    mha_t *h = arg;
    if (h->stopping || !h->leading) return;
    h->leading = false;
    h->depositions++;
    char why[256];
    pthread_mutex_lock(&h->mu);
    fx_strlcpy(why, h->why, sizeof why);
    pthread_mutex_unlock(&h->mu);
    h->hooks.deposed(h->m, why);
}

FX_INTERNAL bool fx_mha_serving(fx_master_t *m)
{
    mha_t *h = m->ha;
    /* H3: lost and won again before the deposed post ran: the state is the old term's, not served */
    return !h || (h->leading && h->leading_term == atomic_load(&h->term) && fx_boot_ms() < atomic_load(&h->deadline_ms));
}

FX_INTERNAL const char *fx_mha_why_not(fx_master_t *m, char *buf, size_t cap)
{
    mha_t *h = m->ha;
    if (h && h->leading)
        snprintf(buf, cap, "master %.64s cannot be sure it still holds its etcd lease (leader of \"%.100s\"): not serving",
                 h->value, m->cfg.ha_key);
    else
        snprintf(buf, cap, "master %.64s is a standby, not the leader of \"%.100s\" (ask etcd for the leader)",
                 h ? h->value : "?", m->cfg.ha_key);
    return buf;
}

FX_INTERNAL uint64_t fx_mha_put_floor(fx_master_t *m)
{
    mha_t *h = m->ha;
    return h ? atomic_load(&h->put_floor) : 0;
}

FX_INTERNAL uint64_t fx_mha_put_ceiling(fx_master_t *m)
{
    mha_t *h = m->ha;
    return h ? atomic_load(&h->put_ceiling) : 0;
}

FX_INTERNAL void fx_mha_metrics(fx_master_t *m, fx_mmetrics_t *mm)
{
    mha_t *h = m->ha;
    mm->ha_leader = fx_mha_serving(m);
    mm->ha_elections = h ? h->elections : 0;
    mm->ha_depositions = h ? h->depositions : 0;
    mm->tenant_table_stores = h ? atomic_load(&h->ten_stores) : 0;
    mm->tenant_table_refused += h ? atomic_load(&h->ten_refused) : 0;
}

/* ---- the election thread ---- */
typedef struct mha_run {
    int64_t lease;
    uint64_t lease_deadline, next_ka; /* monotonic ms */
    uint32_t ttl_ms;
    bool campaigning, leader;
    uint64_t warned_ms;
    uint64_t campaign_ms; /* when the campaign request started (boot clock) */
} mha_run_t;

static uint32_t mha_margin(uint32_t ttl_ms) { return FX_MAX(ttl_ms / 4, 100u); }

/* H1: the campaign's long-poll is bounded (then the candidacy starts over with a new lease);
 * the leader check at every keepalive is what notices an election the campaign's answer
 * never brought */
static uint32_t mha_campaign_bound_ms(uint32_t ttl_ms) { return FX_MAX(10 * ttl_ms, 10000u); }

/* Stores a put-id ceiling MHA_PUT_AHEAD_MS past max(the put clock, floor); the reactor
 * may issue ids up to it once stored. */
static int mha_put_ceiling_store(mha_t *h, uint64_t floor, char *err, size_t errcap)
{
    char key[FX_ID_MAX + 300], val[32];
    snprintf(key, sizeof key, "%s.put_id_ceiling", h->m->cfg.ha_key);
    uint64_t c = FX_MAX(fx_master_put_clock_ms(&h->m->cfg), floor) + MHA_PUT_AHEAD_MS;
    snprintf(val, sizeof val, "%llu", (unsigned long long)c);
    int rc = fx_etcd_put(h->etcd, key, val, FX_MAX(h->m->cfg.ha_lease_ttl_ms / 3, 200u), err, errcap);
    if (rc == FLUXON_OK) atomic_store(&h->put_ceiling, c);
    return rc;
}

/* Just elected: the ceiling the previous leaders stored is this leader's floor (every id
 * they issued is at or below it); then its own. False: not safe to serve (etcd failed). */
static bool mha_put_ids_claim(mha_t *h, char *err, size_t errcap)
{
    char key[FX_ID_MAX + 300], val[32];
    snprintf(key, sizeof key, "%s.put_id_ceiling", h->m->cfg.ha_key);
    uint64_t floor = 0;
    int rc = fx_etcd_get(h->etcd, key, FX_MAX(h->m->cfg.ha_lease_ttl_ms / 3, 200u), val, sizeof val, err, errcap);
    if (rc == FLUXON_OK) floor = strtoull(val, NULL, 10);
    else if (rc != FLUXON_ERR_NOT_FOUND) return false;
    atomic_store(&h->put_floor, floor);
    if (mha_put_ceiling_store(h, floor, err, errcap) != FLUXON_OK) return false;
    FX_INFO("master %s: put ids above %llu (the previous leaders' ceiling), up to %llu for now", h->value,
            (unsigned long long)floor, (unsigned long long)atomic_load(&h->put_ceiling));
    return true;
}

/* ---- the tenants' quota table in etcd (issue 42) ---- */
#define MHA_TENANTS_READ_MS 1000u /* a change an operator made in etcd applies within this */

static void mha_ten_key(const mha_t *h, char *key, size_t cap) { snprintf(key, cap, "%s.tenants", h->m->cfg.ha_key); }

/* Reads the key; a value other than the one known is handed to the reactor. False: etcd
 * could not be read (err set). */
static bool mha_ten_read(mha_t *h, char *err, size_t errcap)
{
    char key[FX_ID_MAX + 300];
    mha_ten_key(h, key, sizeof key);
    char *val = fx_malloc(FX_ETCD_PUT_MAX + 1);
    if (!val) {
        snprintf(err, errcap, "out of memory");
        return false;
    }
    int rc = fx_etcd_get(h->etcd, key, FX_MAX(h->m->cfg.ha_lease_ttl_ms / 3, 200u), val, FX_ETCD_PUT_MAX + 1, err,
                         errcap);
    if (rc == FLUXON_ERR_NOT_FOUND) val[0] = 0;
    else if (rc == FLUXON_ERR_PROTOCOL && strstr(err, "longer than")) {
        /* a value no table can be (an operator's): refused, the table in use kept; never a
         * reason to give the leadership up (every master would, for as long as it stands) */
        fx_free(val);
        h->ten_next_ms = fx_boot_ms() + MHA_TENANTS_READ_MS;
        if (!h->ten_too_long) {
            FX_WARN("tenants' quota table in etcd (%s): %s; the table in use is kept", key, err);
            atomic_fetch_add(&h->ten_refused, 1);
        }
        h->ten_too_long = true;
        return true;
    } else if (rc != FLUXON_OK) {
        fx_free(val);
        return false;
    }
    h->ten_too_long = false;
    h->ten_next_ms = fx_boot_ms() + MHA_TENANTS_READ_MS;
    if (h->ten_known && !strcmp(h->ten_known, val)) {
        fx_free(val);
        return true;
    }
    fx_free(h->ten_known);
    h->ten_known = val;
    char *copy = fx_malloc(strlen(val) + 1);
    if (!copy) return true; /* applied at the next change */
    strcpy(copy, val);
    pthread_mutex_lock(&h->mu);
    fx_free(h->ten_loaded);
    h->ten_loaded = copy;
    pthread_mutex_unlock(&h->mu);
    fx_reactor_post(h->m->r, mha_on_tenants, h);
    return true;
}

/* Leading: stores the table the reactor left (the last wins), else reads the key once a
 * second for a change made in etcd. Failures are said (every 5 s) and retried. */
static void mha_ten_sync(mha_t *h, struct mha_run *x);

/* Leading or not, the lease is gone or unsure: stop serving (first the deadline, read by
 * the request path, then the reactor's state), withdraw the candidacy. */
static void mha_lose(mha_t *h, mha_run_t *x, const char *why)
{
    fx_etcd_campaign_cancel(h->etcd);
    x->campaigning = false;
    if (x->leader) {
        atomic_store(&h->deadline_ms, 0);
        atomic_store(&h->term, 0);
        atomic_store(&h->put_ceiling, 0);
        pthread_mutex_lock(&h->mu);
        fx_strlcpy(h->why, why, sizeof h->why);
        pthread_mutex_unlock(&h->mu);
        x->leader = false;
        FX_WARN("master %s lost the leadership of \"%s\": %s", h->value, h->m->cfg.ha_key, why);
        fx_reactor_post(h->m->r, mha_on_deposed, h);
    }
    x->lease = 0;
}

/* etcd cannot be reached: said at once, then every 5 s. */
static void mha_warn(mha_t *h, mha_run_t *x, const char *what, const char *err)
{
    uint64_t now = fx_boot_ms();
    if (x->warned_ms && now - x->warned_ms < 5000) return;
    x->warned_ms = now;
    FX_WARN("master %s: %s: %s; retrying", h->value, what, err);
}

static void mha_grant(mha_t *h, mha_run_t *x)
{
    const fx_config_t *cfg = &h->m->cfg;
    char err[256];
    uint32_t granted = 0;
    uint64_t t0 = fx_boot_ms();
    int rc = fx_etcd_lease_grant(h->etcd, cfg->ha_lease_ttl_ms / 1000, FX_MAX(cfg->ha_lease_ttl_ms / 3, 200u), &x->lease,
                                 &granted, err, sizeof err);
    if (rc == FLUXON_OK) {
        x->ttl_ms = granted * 1000;
        x->lease_deadline = t0 + x->ttl_ms - mha_margin(x->ttl_ms);
        x->next_ka = t0 + x->ttl_ms / 3;
        rc = fx_etcd_campaign_start(h->etcd, cfg->ha_key, x->lease, h->value, mha_campaign_bound_ms(x->ttl_ms));
        if (rc == FLUXON_OK) {
            x->campaigning = true;
            x->campaign_ms = fx_boot_ms();
            x->warned_ms = 0;
            FX_INFO("master %s campaigns for \"%s\" through etcd %s (lease %llx, TTL %u s)", h->value, cfg->ha_key,
                    fx_etcd_endpoint(h->etcd), (unsigned long long)x->lease, granted);
            return;
        }
        snprintf(err, sizeof err, "cannot start the campaign: %s", fluxon_status_string(rc));
        fx_etcd_lease_revoke(h->etcd, x->lease, 500);
        x->lease = 0;
    }
    mha_warn(h, x, "cannot get an etcd lease", err);
    int64_t rev;
    fx_etcd_campaign_poll(h->etcd, 200, &rev, err, sizeof err); /* an interruptible pause */
}

/* Elected (the campaign's answer, or the leader check found the leader key ours): the
 * put ids are claimed first; false when that failed (the candidacy was given up). */
static bool mha_elected(mha_t *h, mha_run_t *x, int64_t rev, const char *how)
{
    char err[256];
    x->campaigning = false;
    if (!mha_put_ids_claim(h, err, sizeof err)) {
        mha_warn(h, x, "elected, but the put-id ceiling could not be read or stored in etcd; campaigning again", err);
        fx_etcd_lease_revoke(h->etcd, x->lease, 500); /* hand the leadership on */
        mha_lose(h, x, err);
        return false;
    }
    fx_free(h->ten_known); /* read again: another leader may have changed it */
    h->ten_known = NULL;
    if (!mha_ten_read(h, err, sizeof err)) {
        mha_warn(h, x, "elected, but the tenants' quota table could not be read from etcd; campaigning again", err);
        fx_etcd_lease_revoke(h->etcd, x->lease, 500);
        mha_lose(h, x, err);
        return false;
    }
    x->leader = true;
    atomic_store(&h->term, (uint64_t)rev);
    atomic_store(&h->deadline_ms, x->lease_deadline);
    if (strcmp(how, "campaign")) FX_WARN("master %s: elected, learnt from %s (the campaign's answer never came)", h->value, how);
    fx_reactor_post(h->m->r, mha_on_elected, h);
    return true;
}

/* H1: who leads, asked at every keepalive. A candidate whose key leads is elected even
 * when its campaign's answer was lost (its connection died silently); a leader whose key no
 * longer leads (deleted, another lease) steps down. Errors change nothing. */
static void mha_check_leader(mha_t *h, mha_run_t *x)
{
    if (!x->campaigning && !x->leader) return;
    char err[256];
    int64_t lease = 0, rev = 0;
    int rc = fx_etcd_leader_lease(h->etcd, h->m->cfg.ha_key, FX_MAX(x->ttl_ms / 4, 100u), &lease, &rev, err, sizeof err);
    if (x->campaigning && rc == FLUXON_OK && lease == x->lease) {
        /* the campaign request is left to end by itself: cancelling it while etcd still
         * waits in it would have etcd resign this very key */
        mha_elected(h, x, rev, "the leader check");
    } else if (x->leader && (rc == FLUXON_ERR_NOT_FOUND || (rc == FLUXON_OK && lease != x->lease))) {
        snprintf(err, sizeof err, "etcd names %s as the leader of \"%s\"",
                 rc == FLUXON_OK ? "another candidate" : "nobody", h->m->cfg.ha_key);
        fx_etcd_lease_revoke(h->etcd, x->lease, 500);
        mha_lose(h, x, err);
    }
}

static void mha_keepalive(mha_t *h, mha_run_t *x)
{
    char err[256];
    uint32_t ttl_s = 0;
    uint64_t t0 = fx_boot_ms();
    int rc = fx_etcd_lease_keepalive(h->etcd, x->lease, FX_MAX(x->ttl_ms / 4, 100u), &ttl_s, err, sizeof err);
    if (rc == FLUXON_OK) {
        x->ttl_ms = ttl_s * 1000;
        x->lease_deadline = t0 + x->ttl_ms - mha_margin(x->ttl_ms);
        x->next_ka = t0 + x->ttl_ms / 3;
        if (x->leader) atomic_store(&h->deadline_ms, x->lease_deadline);
        uint64_t ceil = atomic_load(&h->put_ceiling);
        if (x->leader && ceil < fx_master_put_clock_ms(&h->m->cfg) + MHA_PUT_AHEAD_MS / 2 &&
            mha_put_ceiling_store(h, ceil, err, sizeof err) != FLUXON_OK)
            mha_warn(h, x, "cannot extend the put-id ceiling in etcd (put ids stop at the old one)", err);
        mha_check_leader(h, x);
        return;
    }
    if (rc == FLUXON_ERR_NOT_FOUND) {
        mha_lose(h, x, err);
        return;
    }
    mha_warn(h, x, "cannot renew the etcd lease", err);
    x->next_ka = fx_boot_ms() + 50; /* retried until the deadline passes */
}

static void mha_step(mha_t *h, mha_run_t *x)
{
    char err[256];
    if (x->lease && fx_boot_ms() >= x->lease_deadline) {
        snprintf(err, sizeof err, "the etcd lease could not be renewed within its TTL (%u ms, margin %u ms)", x->ttl_ms,
                 mha_margin(x->ttl_ms));
        mha_lose(h, x, err);
    }
    if (!x->lease) {
        mha_grant(h, x);
        return;
    }
    uint64_t now = fx_boot_ms();
    uint32_t wait = x->next_ka > now ? (uint32_t)FX_MIN(x->next_ka - now, 1000u) : 0;
    int64_t rev = 0;
    int rc = fx_etcd_campaign_poll(h->etcd, wait, &rev, err, sizeof err); /* sleeps when not campaigning */
    if (x->campaigning && rc == FLUXON_OK) {
        if (!mha_elected(h, x, rev, "campaign")) return;
    } else if (x->campaigning && rc != FX_ETCD_WAITING) {
        x->campaigning = false;
        /* a standby's campaign ends at its bound (H1) by design: said at info, not warned */
        if (fx_boot_ms() - x->campaign_ms + 500 >= mha_campaign_bound_ms(x->ttl_ms))
            FX_INFO("master %s: the campaign reached its bound (%u ms) still a standby; campaigning again", h->value,
                    mha_campaign_bound_ms(x->ttl_ms));
        else mha_warn(h, x, "the campaign failed", err);
        fx_etcd_lease_revoke(h->etcd, x->lease, 500); /* start over with a new lease */
        mha_lose(h, x, err);
        return;
    }
    if (!atomic_load(&h->stop) && fx_boot_ms() >= x->next_ka) mha_keepalive(h, x);
    if (!atomic_load(&h->stop) && x->leader) mha_ten_sync(h, x);
}

static void mha_ten_sync(mha_t *h, mha_run_t *x)
{
    char err[256], key[FX_ID_MAX + 300];
    pthread_mutex_lock(&h->mu);
    char *json = h->ten_store;
    h->ten_store = NULL;
    pthread_mutex_unlock(&h->mu);
    if (json) {
        mha_ten_key(h, key, sizeof key);
        int rc = fx_etcd_put(h->etcd, key, json, FX_MAX(h->m->cfg.ha_lease_ttl_ms / 3, 200u), err, sizeof err);
        if (rc == FLUXON_OK) {
            fx_free(h->ten_known);
            h->ten_known = json;
            atomic_fetch_add(&h->ten_stores, 1);
            return;
        }
        mha_warn(h, x, "cannot store the tenants' quota table in etcd (retried)", err);
        pthread_mutex_lock(&h->mu);
        if (!h->ten_store) h->ten_store = json; /* else a newer one is pending */
        else fx_free(json);
        pthread_mutex_unlock(&h->mu);
        h->ten_next_ms = fx_boot_ms() + 200; /* not at once again: the poll would not sleep */
        return;
    }
    if (fx_boot_ms() >= h->ten_next_ms && !mha_ten_read(h, err, sizeof err)) {
        mha_warn(h, x, "cannot read the tenants' quota table from etcd (retried)", err);
        h->ten_next_ms = fx_boot_ms() + 200;
    }
}

static void *mha_thread(void *arg)
{
    mha_t *h = arg;
    fx_log_set_context("master", "ha");
    fx_thread_name(pthread_self(), "master-ha", NULL);
    mha_run_t x = {0};
    while (!atomic_load(&h->stop)) mha_step(h, &x);
    fx_etcd_campaign_cancel(h->etcd);
    if (x.leader) { /* stop serving first, then hand over: revoking deletes the leader key */
        atomic_store(&h->deadline_ms, 0);
        FX_INFO("master %s resigns the leadership of \"%s\"", h->value, h->m->cfg.ha_key);
    }
    if (x.lease) fx_etcd_lease_revoke(h->etcd, x.lease, 500);
    return NULL;
}

FX_INTERNAL int fx_mha_start(fx_master_t *m, const fx_mha_hooks_t *hooks)
{
    if (!m->cfg.ha_etcd[0]) return FLUXON_OK;
    mha_t *h = fx_calloc(1, sizeof *h);
    if (!h) return FLUXON_ERR_NOMEM;
    h->m = m;
    h->hooks = *hooks;
    snprintf(h->value, sizeof h->value, "%s:%u", m->cfg.listen_host, m->port);
    pthread_mutex_init(&h->mu, NULL);
    m->ha = h;
    int rc = fx_etcd_new(m->cfg.ha_etcd, &h->etcd);
    if (rc != FLUXON_OK) return rc;
    if (pthread_create(&h->thread, NULL, mha_thread, h) != 0) return FLUXON_ERR_INTERNAL;
    h->thread_started = true;
    FX_INFO("master %s: standby until elected (etcd %s, election \"%s\", lease TTL %u ms)", h->value,
            m->cfg.ha_etcd, m->cfg.ha_key, m->cfg.ha_lease_ttl_ms);
    return FLUXON_OK;
}

FX_INTERNAL void fx_mha_stop(fx_master_t *m)
{
    mha_t *h = m->ha;
    if (!h) return;
    h->stopping = true;
    h->leading = false;
    if (!h->thread_started) return;
    atomic_store(&h->stop, true);
    fx_etcd_wakeup(h->etcd);
    pthread_join(h->thread, NULL);
    h->thread_started = false;
}

FX_INTERNAL void fx_mha_free(fx_master_t *m)
{
    mha_t *h = m->ha;
    if (!h) return;
    fx_mha_stop(m);
    fx_etcd_free(h->etcd);
    fx_free(h->ten_store);
    fx_free(h->ten_loaded);
    fx_free(h->ten_known);
    pthread_mutex_destroy(&h->mu);
    fx_free(h);
    m->ha = NULL;
}

#undef MHA_PUT_AHEAD_MS
