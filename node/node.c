/* node.c — embedded roles (fluxon_node_start/stop): a master or owner reactor on a
 * thread of the calling process. start returns once the role serves or failed; stop
 * shuts the role down on its own thread, drains the reactor and joins. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>

#ifndef FX_GIT_COMMIT
#define FX_GIT_COMMIT "unknown"
#endif

#include "log.h"
#include "master.h"
#include "metrics.h"
#include "owner.h"
#include "prefault.h"
#include "segment.h"

struct fluxon_node {
    fx_config_t cfg;
    fx_reactor_t *r;
    pthread_t thread;
    sem_t created_sem, ready_sem;
    int created_status, ready_status;
    char start_error[512]; /* the node thread's last ERROR line when its start failed */
    bool ready_known; /* ready_sem was taken: ready_status is final */
    fx_master_t *master;
    fx_owner_t *owner;
    fx_prefault_t heap_pf; /* faults the heap reserve in (heap_reserve_mib) */
    /* metrics (node_metrics.c): the reactor copies its numbers into work, then publishes
     * them to snap under mu; readers wait on cv (bounded) for done >= their request */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *snap, *work;
    uint64_t req, done;
    bool snap_valid;
};

static void node_on_ready(void *arg, int status)
{
    fluxon_node *n = arg;
    n->ready_status = status;
    sem_post(&n->ready_sem);
}

static void *node_thread(void *arg)
{
    fluxon_node *n = arg;
    fx_log_set_context(fx_role_name(n->cfg.role), n->cfg.role == FX_ROLE_MASTER && !n->cfg.node_id[0]
                                                       ? "master" : n->cfg.node_id);
    fx_thread_name(pthread_self(), fx_role_name(n->cfg.role), n->cfg.role == FX_ROLE_MASTER ? NULL : n->cfg.node_id);
    fx_log_last_error_clear();
    int rc = n->cfg.role == FX_ROLE_MASTER
                 ? fx_master_create(n->r, &n->cfg, node_on_ready, n, &n->master)
                 : fx_owner_create(n->r, &n->cfg, node_on_ready, n, &n->owner);
    if (rc != FLUXON_OK) fx_strlcpy(n->start_error, fx_log_last_error(), sizeof n->start_error);
    n->created_status = rc;
    sem_post(&n->created_sem); /* local setup done (or failed): only the master is waited for now */
    if (rc != FLUXON_OK) {
        /* what the failed start left in flight (a watch's poll removal) completes and is
         * freed here, not leaked with the ring */
        fx_reactor_drain(n->r, 2000);
        node_on_ready(n, rc);
        return NULL;
    }
    fx_reactor_run(n->r);
    if (n->master) fx_master_shutdown(n->master);
    if (n->owner) fx_owner_shutdown(n->owner);
    fx_reactor_drain(n->r, 2000);
    fx_master_destroy(n->master);
    fx_owner_destroy(n->owner);
    n->master = NULL;
    n->owner = NULL;
    return NULL;
}

static void node_stop_on_reactor(void *arg)
{
    fluxon_node *n = arg;
    fx_reactor_stop(n->r);
}

/* ---- metrics: snapshots published by the reactor, rendered by the caller ---- */
static int node_metrics_init(fluxon_node *n)
{
    size_t sz = n->cfg.role == FX_ROLE_MASTER ? fx_master_snap_size() : fx_owner_snap_size();
    n->snap = fx_calloc(1, sz);
    n->work = fx_calloc(1, sz);
    if (!n->snap || !n->work) return FLUXON_ERR_NOMEM;
    pthread_mutex_init(&n->mu, NULL);
    fx_cond_init_monotonic(&n->cv);
    return FLUXON_OK;
}

static void node_metrics_fini(fluxon_node *n)
{
    if (n->snap && n->work) {
        pthread_cond_destroy(&n->cv);
        pthread_mutex_destroy(&n->mu);
    }
    fx_free(n->snap);
    fx_free(n->work);
}

static void node_snap_on_reactor(void *arg)
{
    fluxon_node *n = arg;
    if (n->master) fx_master_snap(n->master, n->work);
    else if (n->owner) fx_owner_snap(n->owner, n->work);
    else return;
    size_t sz = n->master ? fx_master_snap_size() : fx_owner_snap_size();
    pthread_mutex_lock(&n->mu);
    memcpy(n->snap, n->work, sz);
    n->done = n->req;
    n->snap_valid = true;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

/* node="<id>" with the characters a label value cannot hold plainly replaced */
static void node_label(const fluxon_node *n, char *out, size_t cap)
{
    const char *id = n->cfg.node_id[0] ? n->cfg.node_id : "master";
    char clean[FX_ID_MAX];
    size_t k = 0;
    for (; id[k] && k + 1 < sizeof clean; k++) clean[k] = id[k] == '"' || id[k] == '\\' || id[k] == '\n' ? '_' : id[k];
    clean[k] = 0;
    snprintf(out, cap, "node=\"%s\"", clean);
}

#define NODE_METRICS_MAX 64
#define NODE_METRICS_WAIT_MS 1000

int fluxon_nodes_metrics(fluxon_node *const *nodes, size_t n, char *buf, size_t cap, size_t *len_p)
{
    if (!nodes || !n || n > NODE_METRICS_MAX || !buf || !cap || !len_p) return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t want[NODE_METRICS_MAX];
    for (size_t i = 0; i < n; i++) {
        if (!nodes[i]) return FLUXON_ERR_INVALID_ARGUMENT;
        pthread_mutex_lock(&nodes[i]->mu);
        want[i] = ++nodes[i]->req;
        pthread_mutex_unlock(&nodes[i]->mu);
        fx_reactor_post(nodes[i]->r, node_snap_on_reactor, nodes[i]);
    }
    /* one deadline for all; a reactor that did not answer in time is rendered from its
     * previous snapshot (never waits on it longer) */
    struct timespec dl = fx_deadline_ts(NODE_METRICS_WAIT_MS);
    const void *ms[NODE_METRICS_MAX], *os[NODE_METRICS_MAX];
    char labels[NODE_METRICS_MAX][FX_ID_MAX + 16];
    const char *mx[NODE_METRICS_MAX], *ox[NODE_METRICS_MAX];
    void *copies[NODE_METRICS_MAX] = {0};
    size_t nm = 0, no = 0;
    int rc = FLUXON_OK;
    for (size_t i = 0; i < n && rc == FLUXON_OK; i++) {
        fluxon_node *x = nodes[i];
        bool master = x->cfg.role == FX_ROLE_MASTER;
        size_t sz = master ? fx_master_snap_size() : fx_owner_snap_size();
        pthread_mutex_lock(&x->mu);
        while (x->done < want[i] && pthread_cond_timedwait(&x->cv, &x->mu, &dl) == 0) {}
        copies[i] = x->snap_valid ? fx_malloc(sz) : NULL;
        if (copies[i]) memcpy(copies[i], x->snap, sz);
        else rc = x->snap_valid ? FLUXON_ERR_NOMEM : FLUXON_ERR_TIMEOUT;
        pthread_mutex_unlock(&x->mu);
        node_label(x, labels[i], sizeof labels[i]);
        if (master) {
            ms[nm] = copies[i];
            mx[nm++] = labels[i];
        } else {
            os[no] = copies[i];
            ox[no++] = labels[i];
        }
    }
    if (rc == FLUXON_OK) {
        fx_jbuf_t j = fx_jbuf(buf, cap);
        fx_metrics_prom_head(&j, "build_info", "gauge", "Fluxon build: version and commit (always 1)");
        fx_jbuf_printf(&j, "fluxon_build_info{version=\"%s\",commit=\"%s\"} 1\n", FLUXON_VERSION_STRING,
                       FX_GIT_COMMIT);
        if (nm) fx_master_snap_prom(&j, (const fx_master_snap_t *const *)ms, mx, nm);
        if (no) fx_owner_snap_prom(&j, (const fx_owner_snap_t *const *)os, ox, no);
        /* the node's own thread, not its reactor's: read here (heap_reserve_mib) */
        fx_metrics_prom_head(&j, "heap_prefaulting", "gauge",
                             "1 while a thread faults the node's heap reserve in (heap_reserve_mib)");
        for (size_t i = 0; i < n; i++)
            fx_jbuf_printf(&j, "fluxon_heap_prefaulting{%s} %d\n", labels[i],
                           fx_prefault_running(&nodes[i]->heap_pf) ? 1 : 0);
        *len_p = j.len;
        if (j.overflow) rc = FLUXON_ERR_NO_SPACE;
    }
    for (size_t i = 0; i < n; i++) fx_free(copies[i]);
    return rc;
}

int fluxon_node_metrics(fluxon_node *node, char *buf, size_t cap, size_t *len_p)
{
    return fluxon_nodes_metrics(&node, 1, buf, cap, len_p);
}

/* Stops the node's reactor and joins its thread; frees everything. */
/* The heap reserve (common/heap.c), once per process: before the node's thread starts,
 * so that the segments its heap grows into come from it; faulted in on a thread. */
static void node_heap_reserve(fluxon_node *n)
{
    fx_prefault_t *pf = &n->heap_pf;
    uint64_t bytes = (uint64_t)n->cfg.heap_reserve_mib << 20;
    char what[700];
    uint64_t limit = bytes ? fx_segment_memory_limit(what, sizeof what) : 0;
    uint64_t seg = n->cfg.role == FX_ROLE_OWNER ? n->cfg.segment_bytes : 0;
    uint64_t fit = limit > seg ? (limit - seg) / 4 : 0; /* at most a quarter of what the segment leaves */
    if (limit && seg && seg + FX_SEGMENT_HEADER_BYTES > limit) /* the owner refuses it as it starts, saying why */
        bytes = 0;
    else if (limit && bytes > fit) {
        char segment[64] = "";
        if (seg) snprintf(segment, sizeof segment, "what segment_bytes %llu leaves under ", (unsigned long long)seg);
        FX_WARN("heap_reserve_mib %u lowered to %llu MiB: at most a quarter of %s%s, %llu bytes",
                n->cfg.heap_reserve_mib, (unsigned long long)(fit >> 26 << 6), segment, what,
                (unsigned long long)limit);
        bytes = fit >> 26 << 26; /* whole 64 MiB */
    }
    pf->heap_base = fx_heap_reserve(bytes, &pf->heap_len);
    if (!pf->heap_base) return;
    pf->touch = n->cfg.role == FX_ROLE_OWNER ? n->cfg.segment_touch : FX_TOUCH_AUTO;
    const char *id = n->cfg.role == FX_ROLE_MASTER && !n->cfg.node_id[0] ? "master" : n->cfg.node_id;
    fx_prefault_start(pf, NULL, 0, 4096, -1, fx_role_name(n->cfg.role), id);
}

static void node_join_free(fluxon_node *n)
{
    fx_reactor_post(n->r, node_stop_on_reactor, n);
    pthread_join(n->thread, NULL);
    fx_prefault_stop(&n->heap_pf);
    sem_destroy(&n->created_sem);
    sem_destroy(&n->ready_sem);
    fx_reactor_destroy(n->r);
    node_metrics_fini(n);
    fx_free(n);
}

static void node_last_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void node_last_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fx_last_msg_vset(fmt, ap);
    va_end(ap);
}

int fluxon_node_launch(const char *config_json, fluxon_node **node_p)
{
    if (node_p) *node_p = NULL; /* on every failure */
    fx_last_msg_clear(); /* fluxon_last_error_message: this call's (an earlier call's named a wrong cause) */
    if (!config_json || !node_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fluxon_node *n = fx_calloc(1, sizeof *n);
    if (!n) return FLUXON_ERR_NOMEM;
    char err[512];
    int rc = fx_config_parse(config_json, &n->cfg, err, sizeof err);
    if (rc != FLUXON_OK) {
        FX_ERROR("config rejected: %s", err);
        node_last_msg("config rejected: %s", err);
        goto err_free;
    }
    if (n->cfg.role != FX_ROLE_MASTER && n->cfg.role != FX_ROLE_OWNER) {
        FX_ERROR("config rejected: role: \"%s\" cannot run as an embedded node (master or owner)",
                 fx_role_name(n->cfg.role));
        node_last_msg("config rejected: role: \"%s\" cannot run as an embedded node (master or owner)",
                      fx_role_name(n->cfg.role));
        rc = FLUXON_ERR_CONFIG;
        goto err_free;
    }
    fx_log_apply_config_level(n->cfg.log_level, n->cfg.log_level_given);
    rc = node_metrics_init(n);
    if (rc != FLUXON_OK) goto err_free;
    rc = fx_reactor_create(&n->r);
    if (rc != FLUXON_OK) goto err_free;
    sem_init(&n->created_sem, 0, 0);
    sem_init(&n->ready_sem, 0, 0);
    n->ready_status = FLUXON_ERR_TIMEOUT;
    node_heap_reserve(n);
    if (pthread_create(&n->thread, NULL, node_thread, n) != 0) {
        FX_ERROR("cannot start the node thread: %m");
        fx_prefault_stop(&n->heap_pf);
        sem_destroy(&n->created_sem);
        sem_destroy(&n->ready_sem);
        fx_reactor_destroy(n->r);
        rc = FLUXON_ERR_INTERNAL;
        goto err_free;
    }
    /* Local setup (segment, socket, UCX) is the node's own work and has no deadline; the
     * segment's prefault runs on its own thread and is not waited for. */
    while (sem_wait(&n->created_sem) != 0) {}
    if (n->created_status != FLUXON_OK) {
        rc = n->created_status;
        if (n->start_error[0]) node_last_msg("%s", n->start_error); /* logged too, unless log_level "off" */
        node_join_free(n);
        return rc;
    }
    *node_p = n;
    return FLUXON_OK;

err_free:
    node_metrics_fini(n);
    fx_free(n);
    return rc;
}

int fluxon_node_wait_ready(fluxon_node *n, uint32_t timeout_ms)
{
    if (!n) return FLUXON_ERR_INVALID_ARGUMENT;
    if (!n->ready_known) {
        if (!fx_sem_wait_ms(&n->ready_sem, timeout_ms)) return FLUXON_ERR_TIMEOUT;
        n->ready_known = true;
    }
    return n->ready_status;
}

int fluxon_node_start(const char *config_json, fluxon_node **node_p)
{
    if (node_p) *node_p = NULL; /* on every failure */
    if (!config_json || !node_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fluxon_node *n = NULL;
    int rc = fluxon_node_launch(config_json, &n);
    if (rc != FLUXON_OK) return rc;
    rc = fluxon_node_wait_ready(n, n->cfg.start_timeout_ms);
    if (rc == FLUXON_ERR_TIMEOUT && !n->ready_known) {
        if (n->cfg.role == FX_ROLE_OWNER) {
            char who[FX_PATH_MAX + 8];
            if (n->cfg.master_socket[0]) snprintf(who, sizeof who, "unix:%s", n->cfg.master_socket);
            else snprintf(who, sizeof who, "%s:%u", n->cfg.master_host, n->cfg.master_port);
            FX_ERROR("owner %s did not register with its master %s within start_timeout_ms %u (its own "
                     "setup is not counted)", n->cfg.node_id, who, n->cfg.start_timeout_ms);
            rc = FLUXON_ERR_UNAVAILABLE;
        } else {
            FX_ERROR("%s did not become ready within start_timeout_ms %u", fx_role_name(n->cfg.role),
                     n->cfg.start_timeout_ms);
        }
    }
    if (rc != FLUXON_OK) {
        node_join_free(n);
        return rc;
    }
    *node_p = n;
    return FLUXON_OK;
}

void fluxon_node_stop(fluxon_node *n)
{
    if (!n) return;
    bool master = n->cfg.role == FX_ROLE_MASTER;
    char id[sizeof n->cfg.node_id];
    fx_strlcpy(id, n->cfg.node_id, sizeof id);
    node_join_free(n);
    /* an orderly stop says so: its master only saw a connection close */
    if (master) FX_INFO("master stopped");
    else FX_INFO("owner %s stopped", id);
}

/* The master's TCP port (useful when "listen" asked for port 0); 0 for an owner. */
uint16_t fluxon_node_port(const fluxon_node *n)
{
    return n && n->master ? fx_master_port(n->master) : 0;
}
