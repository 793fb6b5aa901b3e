/* replay_collector.c — collects committed futures off the workers' path: polls their fds
 * and records the completion latency; a future pending past RP_FUTURE_TIMEOUT_MS is
 * given up. Its waits are bounded steps on CLOCK_MONOTONIC. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <sys/prctl.h>
#include <stdlib.h>

#include "cli_util.h"
#include "replay.h"

int rp_collector_init(rp_collector *c)
{
    if (pthread_mutex_init(&c->mu, NULL) != 0) goto fail;
    if (fx_cli_cond_init_monotonic(&c->cv_space) != 0) {
        pthread_mutex_destroy(&c->mu);
        goto fail;
    }
    if (fx_cli_cond_init_monotonic(&c->cv_work) != 0) {
        pthread_cond_destroy(&c->cv_space);
        pthread_mutex_destroy(&c->mu);
        goto fail;
    }
    c->inited = 1;
    return 0;
fail:
    fprintf(stderr, "fluxon demo: cannot set up the future collector\n");
    return -1;
}

/* Hands a committed future to the collector; waits (bounded steps) while
 * RP_FUTURES_MAX are in flight. The collector bounds each future's life, so the
 * wait ends. */
void rp_collector_add(rp_collector *c, fluxon_future *f, uint64_t t_commit_ns)
{
    rp_fut *e = malloc(sizeof *e);
    if (!e) { /* no memory to track it: wait for it here, bounded */
        fluxon_future_wait(f, RP_FUTURE_TIMEOUT_MS);
        fluxon_future_free(f);
        return;
    }
    *e = (rp_fut){.f = f, .t_commit_ns = t_commit_ns};
    pthread_mutex_lock(&c->mu);
    while (c->inflight >= RP_FUTURES_MAX) fx_cli_cond_wait_ms(&c->cv_space, &c->mu, 100);
    if (c->tail) c->tail->next = e;
    else c->head = e;
    c->tail = e;
    c->inflight++;
    pthread_cond_signal(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
}

static void rp_collector_done(rp_collector *c, rp_fut *e, int st, uint64_t now)
{
    if (st == FLUXON_OK) {
        c->completed++;
        rp_samples_push(&c->lat, now - e->t_commit_ns);
    } else if (rp_is_capacity_outcome(st)) {
        /* a global conflict found when the master published (another owner put the
         * same key first): a skipped backup, as when put_start refuses it */
        c->refused++;
        c->refused_by[rp_status_index(st)]++;
    } else {
        c->failed++;
        c->fail_by[rp_status_index(st)]++;
    }
    fluxon_future_free(e->f);
    free(e);
}

static void *rp_collector_main(void *arg)
{
    rp_collector *c = arg;
    (void)prctl(PR_SET_NAME, "fx-collector", 0, 0, 0);
    rp_fut *pend[RP_FUTURES_MAX];
    struct pollfd pfd[RP_FUTURES_MAX];
    size_t n = 0;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        if (n == 0 && !c->head && !c->closing) fx_cli_cond_wait_ms(&c->cv_work, &c->mu, 50);
        while (c->head && n < RP_FUTURES_MAX) {
            rp_fut *e = c->head;
            c->head = e->next;
            if (!c->head) c->tail = NULL;
            e->next = NULL;
            pend[n++] = e;
        }
        int closing = c->closing && !c->head;
        pthread_mutex_unlock(&c->mu);
        if (n == 0) {
            if (closing) break;
            continue;
        }
        size_t np = 0, no_fd = 0;
        for (size_t i = 0; i < n; i++) {
            int fd = fluxon_future_fd(pend[i]->f);
            if (fd < 0) {
                no_fd++;
                continue;
            }
            pfd[np++] = (struct pollfd){.fd = fd, .events = POLLIN};
        }
        /* futures without an fd are polled every millisecond */
        if (np) poll(pfd, np, no_fd ? 1 : 20);
        else fx_cli_sleep_ms(1);
        uint64_t now = fx_cli_now_ns();
        size_t removed = 0, k = 0;
        for (size_t i = 0; i < n; i++) {
            int st = fluxon_future_poll(pend[i]->f);
            if (st != FLUXON_IN_PROGRESS) {
                rp_collector_done(c, pend[i], st, now);
                removed++;
            } else if (now - pend[i]->t_commit_ns > (uint64_t)RP_FUTURE_TIMEOUT_MS * 1000000ull) {
                c->timed_out++;
                fluxon_future_free(pend[i]->f);
                free(pend[i]);
                removed++;
            } else {
                pend[k++] = pend[i];
            }
        }
        n = k;
        if (removed) {
            pthread_mutex_lock(&c->mu);
            c->inflight -= removed;
            pthread_cond_broadcast(&c->cv_space);
            pthread_mutex_unlock(&c->mu);
        }
    }
    return NULL;
}

int rp_collector_start(rp_collector *c)
{
    if (pthread_create(&c->thread, NULL, rp_collector_main, c) != 0) {
        fprintf(stderr, "fluxon demo: cannot start the future collector\n");
        return -1;
    }
    c->started = 1;
    return 0;
}

int rp_collector_close(rp_collector *c)
{
    if (!c->started) return 0;
    pthread_mutex_lock(&c->mu);
    c->closing = 1;
    pthread_cond_signal(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
    if (fx_cli_join_ms(c->thread, RP_FUTURE_TIMEOUT_MS + RP_JOIN_MS) != 0) return -1;
    c->started = 0;
    return 0;
}

void rp_collector_fini(rp_collector *c)
{
    if (c->inited) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv_space);
        pthread_cond_destroy(&c->cv_work);
        c->inited = 0;
    }
    free(c->lat.v);
    c->lat.v = NULL;
}
