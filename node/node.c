/* node.c — embedded roles (fluxon_node_start/stop): a master or owner reactor on a
 * thread of the calling process. start returns once the role serves or failed; stop
 * shuts the role down on its own thread, drains the reactor and joins. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>

#include "log.h"
#include "master.h"
#include "owner.h"

struct fluxon_node {
    fx_config_t cfg;
    fx_reactor_t *r;
    pthread_t thread;
    sem_t created_sem, ready_sem;
    int created_status, ready_status;
    bool ready_known; /* ready_sem was taken: ready_status is final */
    fx_master_t *master;
    fx_owner_t *owner;
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
    int rc = n->cfg.role == FX_ROLE_MASTER
                 ? fx_master_create(n->r, &n->cfg, node_on_ready, n, &n->master)
                 : fx_owner_create(n->r, &n->cfg, node_on_ready, n, &n->owner);
    n->created_status = rc;
    sem_post(&n->created_sem); /* local setup done (or failed): only the master is waited for now */
    if (rc != FLUXON_OK) {
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

/* Stops the node's reactor and joins its thread; frees everything. */
static void node_join_free(fluxon_node *n)
{
    fx_reactor_post(n->r, node_stop_on_reactor, n);
    pthread_join(n->thread, NULL);
    sem_destroy(&n->created_sem);
    sem_destroy(&n->ready_sem);
    fx_reactor_destroy(n->r);
    fx_free(n);
}

int fluxon_node_launch(const char *config_json, fluxon_node **node_p)
{
    if (!config_json || !node_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fluxon_node *n = fx_calloc(1, sizeof *n);
    if (!n) return FLUXON_ERR_NOMEM;
    char err[512];
    int rc = fx_config_parse(config_json, &n->cfg, err, sizeof err);
    if (rc != FLUXON_OK) {
        FX_ERROR("config rejected: %s", err);
        goto err_free;
    }
    if (n->cfg.role != FX_ROLE_MASTER && n->cfg.role != FX_ROLE_OWNER) {
        FX_ERROR("config rejected: role: \"%s\" cannot run as an embedded node (master or owner)",
                 fx_role_name(n->cfg.role));
        rc = FLUXON_ERR_CONFIG;
        goto err_free;
    }
    fx_log_apply_config_level(n->cfg.log_level);
    rc = fx_reactor_create(&n->r);
    if (rc != FLUXON_OK) goto err_free;
    sem_init(&n->created_sem, 0, 0);
    sem_init(&n->ready_sem, 0, 0);
    n->ready_status = FLUXON_ERR_TIMEOUT;
    if (pthread_create(&n->thread, NULL, node_thread, n) != 0) {
        FX_ERROR("cannot start the node thread: %m");
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
        node_join_free(n);
        return rc;
    }
    *node_p = n;
    return FLUXON_OK;

err_free:
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
    if (!config_json || !node_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fluxon_node *n = NULL;
    int rc = fluxon_node_launch(config_json, &n);
    if (rc != FLUXON_OK) return rc;
    rc = fluxon_node_wait_ready(n, n->cfg.start_timeout_ms);
    if (rc == FLUXON_ERR_TIMEOUT && !n->ready_known) {
        if (n->cfg.role == FX_ROLE_OWNER) {
            FX_ERROR("owner %s did not register with its master %s:%u within start_timeout_ms %u (its own "
                     "setup is not counted)", n->cfg.node_id, n->cfg.master_host, n->cfg.master_port,
                     n->cfg.start_timeout_ms);
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
    if (n) node_join_free(n);
}

/* The master's TCP port (useful when "listen" asked for port 0); 0 for an owner. */
uint16_t fluxon_node_port(const fluxon_node *n)
{
    return n && n->master ? fx_master_port(n->master) : 0;
}
