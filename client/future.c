/* future.c — fluxon_future: the outcome of a commit, completed on the client's reactor
 * when the owner's PUBLISHED notification arrives (armed by the committing caller under
 * futures_lock when its answer came through the ring) (or UNAVAILABLE when the owner goes).
 * A future costs no file descriptor: waiters sleep on its condition variable; an eventfd
 * is made only when the caller asks for one (fluxon_future_fd). */
#include <errno.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client.h"
#include "log.h"

struct fluxon_future {
    int refs;   /* atomic: caller + reactor map */
    int status; /* atomic; valid once done */
    int done;   /* atomic */
    uint64_t id;
    pthread_mutex_t lock; /* guards efd and the wake-up */
    pthread_cond_t cond;  /* CLOCK_MONOTONIC */
    int efd;              /* -1 until fluxon_future_fd */
    int *kst;             /* n: each plan key's outcome (CFUT_KEEP: refused at put_start), or NULL */
    size_t n;
};

#define CFUT_KEEP INT32_MIN /* a key refused at put_start: fluxon_future_key_statuses leaves it */

FX_INTERNAL int fx_client_futures_init(fluxon_client *cl)
{
    if (fx_hmap_create(64, &cl->futures) != FLUXON_OK) return FLUXON_ERR_NOMEM;
    pthread_mutex_init(&cl->futures_lock, NULL);
    return FLUXON_OK;
}

static void cfut_unref(fluxon_future *f)
{
    if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        if (f->efd >= 0) close(f->efd);
        fx_free(f->kst);
        pthread_mutex_destroy(&f->lock);
        pthread_cond_destroy(&f->cond);
        fx_free(f);
    }
}

FX_INTERNAL fluxon_future *fx_future_new(fluxon_client *cl)
{
    (void)cl;
    fluxon_future *f = fx_calloc(1, sizeof *f);
    if (!f) return NULL;
    if (fx_cond_init_monotonic(&f->cond) != 0) {
        fx_free(f);
        return NULL;
    }
    pthread_mutex_init(&f->lock, NULL);
    f->efd = -1;
    f->refs = 1;
    return f;
}

/* Under f->lock, once done: the fd (if any) becomes readable and stays so. */
static void cfut_signal_fd(fluxon_future *f)
{
    uint64_t one = 1;
    ssize_t w = write(f->efd, &one, sizeof one);
    (void)w;
}

FX_INTERNAL int fx_future_keys(fluxon_future *f, const uint64_t *accepted, size_t n)
{
    f->kst = fx_malloc((n ? n : 1) * sizeof *f->kst);
    if (!f->kst) return FLUXON_ERR_NOMEM;
    f->n = n;
    for (size_t i = 0; i < n; i++) f->kst[i] = accepted[i] ? FLUXON_IN_PROGRESS : CFUT_KEEP;
    return FLUXON_OK;
}

/* Completes f with the batch status and, when the owner sent them (kst: n entries, one per
 * plan key), each key's: a key accepted at put_start gets its own, else the batch's. */
static void cfut_complete_keys(fluxon_future *f, int status, const uint64_t *kst, size_t n)
{
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; f->kst && i < f->n; i++)
        if (f->kst[i] != CFUT_KEEP) f->kst[i] = kst && n == f->n ? (int)(int64_t)kst[i] : status;
    __atomic_store_n(&f->status, status, __ATOMIC_RELEASE);
    __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&f->cond);
    if (f->efd >= 0) cfut_signal_fd(f);
    pthread_mutex_unlock(&f->lock);
}

FX_INTERNAL void fx_future_complete(fluxon_future *f, int status) { cfut_complete_keys(f, status, NULL, 0); }

FX_INTERNAL void fx_future_arm(fluxon_client *cl, fluxon_future *f, uint64_t future_id)
{
    int done = FLUXON_IN_PROGRESS;
    uint64_t *kst = NULL;
    uint32_t n_kst = 0;
    pthread_mutex_lock(&cl->futures_lock);
    for (unsigned i = 0; i < FX_CLIENT_ORPHANS && done == FLUXON_IN_PROGRESS; i++)
        if (cl->orphans[i].id == future_id) {
            cl->orphans[i].id = 0;
            done = cl->orphans[i].status;
            kst = cl->orphans[i].kst; /* ours now */
            n_kst = cl->orphans[i].n_kst;
            cl->orphans[i].kst = NULL;
        }
    if (done == FLUXON_IN_PROGRESS) {
        f->id = future_id;
        __atomic_add_fetch(&f->refs, 1, __ATOMIC_ACQ_REL);
        if (fx_hmap_put(cl->futures, &f->id, sizeof f->id, f, NULL) != FLUXON_OK) {
            __atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL);
            done = FLUXON_ERR_NOMEM;
        }
    }
    pthread_mutex_unlock(&cl->futures_lock);
    if (done != FLUXON_IN_PROGRESS) cfut_complete_keys(f, done, kst, n_kst);
    fx_free(kst);
}

FX_INTERNAL bool fx_client_futures_notification(fluxon_client *cl, const fx_frame_header_t *h,
                                                const uint8_t *body, fx_arena_t *arena)
{
    if (h->type != FX_MSG_PUBLISHED) return false;
    fx_body_published_t b;
    fx_body_published_decode(body, h->body_len, &b, arena);
    fluxon_future *f = NULL;
    pthread_mutex_lock(&cl->futures_lock);
    if (fx_hmap_del(cl->futures, &b.future_id, sizeof b.future_id, (void **)&f) != FLUXON_OK) {
        f = NULL;
        if (b.future_id) { /* its commit's answer was lost (or not read yet): kept for its commit */
            unsigned i = cl->orphan_next++ % FX_CLIENT_ORPHANS;
            cl->orphans[i].id = b.future_id;
            cl->orphans[i].status = b.status;
            fx_free(cl->orphans[i].kst);
            cl->orphans[i].kst = NULL;
            cl->orphans[i].n_kst = 0;
            if (b.key_statuses.n && (cl->orphans[i].kst = fx_malloc(b.key_statuses.n * sizeof(uint64_t)))) {
                memcpy(cl->orphans[i].kst, b.key_statuses.v, b.key_statuses.n * sizeof(uint64_t));
                cl->orphans[i].n_kst = b.key_statuses.n;
            }
        }
    }
    pthread_mutex_unlock(&cl->futures_lock);
    if (f) {
        cfut_complete_keys(f, b.status, b.key_statuses.n ? b.key_statuses.v : NULL, b.key_statuses.n);
        cfut_unref(f);
    }
    return true;
}

FX_INTERNAL void fx_client_futures_fail_all(fluxon_client *cl)
{
    for (;;) {
        fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
        const char *k;
        size_t kl;
        void *v = NULL;
        pthread_mutex_lock(&cl->futures_lock);
        if (fx_hmap_iter_next(cl->futures, &it, &k, &kl, &v)) fx_hmap_del(cl->futures, k, kl, NULL);
        else v = NULL;
        pthread_mutex_unlock(&cl->futures_lock);
        if (!v) return;
        fx_future_complete(v, FLUXON_ERR_UNAVAILABLE);
        cfut_unref(v);
    }
}

FX_INTERNAL void fx_client_futures_fini(fluxon_client *cl)
{
    if (!cl->futures) return;
    fx_client_futures_fail_all(cl); /* futures still armed complete as UNAVAILABLE */
    fx_hmap_destroy(cl->futures);
    cl->futures = NULL;
    for (unsigned i = 0; i < FX_CLIENT_ORPHANS; i++) {
        fx_free(cl->orphans[i].kst);
        cl->orphans[i].kst = NULL;
    }
    pthread_mutex_destroy(&cl->futures_lock);
}

int fluxon_future_poll(fluxon_future *f)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!f) return FLUXON_ERR_INVALID_ARGUMENT;
    return __atomic_load_n(&f->done, __ATOMIC_ACQUIRE) ? __atomic_load_n(&f->status, __ATOMIC_ACQUIRE)
                                                         : FLUXON_IN_PROGRESS;
}

int fluxon_future_wait(fluxon_future *f, uint32_t timeout_ms)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!f) return FLUXON_ERR_INVALID_ARGUMENT;
    int st = fluxon_future_poll(f);
    if (st != FLUXON_IN_PROGRESS) return st;
    struct timespec end = fx_deadline_ts(timeout_ms);
    pthread_mutex_lock(&f->lock);
    int w = 0;
    while (!__atomic_load_n(&f->done, __ATOMIC_ACQUIRE) && w != ETIMEDOUT)
        w = pthread_cond_timedwait(&f->cond, &f->lock, &end);
    pthread_mutex_unlock(&f->lock);
    st = fluxon_future_poll(f);
    return st == FLUXON_IN_PROGRESS ? FLUXON_ERR_TIMEOUT : st;
}

int fluxon_future_key_statuses(fluxon_future *f, int *key_status, size_t n_keys)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!f || !key_status) return FLUXON_ERR_INVALID_ARGUMENT;
    if (!f->kst || n_keys != f->n)
        return !f->kst ? fx_client_refuse("future_key_statuses: this future has no per-key statuses (not a commit's)")
                       : fx_client_refuse("future_key_statuses: n_keys %zu is not the commit's %zu keys", n_keys,
                                          (size_t)f->n);
    if (!__atomic_load_n(&f->done, __ATOMIC_ACQUIRE)) return FLUXON_IN_PROGRESS;
    for (size_t i = 0; i < n_keys; i++) /* written before done, read after: no lock needed */
        if (f->kst[i] != CFUT_KEEP) key_status[i] = f->kst[i];
    return FLUXON_OK;
}

int fluxon_future_fd(const fluxon_future *cf)
{
    fx_client_last_msg_clear(); /* fluxon_last_error_message: this call's from here on */
    if (!cf) return -1;
    fluxon_future *f = (fluxon_future *)cf; /* futures are never const objects: the fd is made on demand */
    pthread_mutex_lock(&f->lock);
    if (f->efd < 0) {
        f->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (f->efd < 0) FX_WARN("fluxon_future_fd: eventfd: %m");
        else if (__atomic_load_n(&f->done, __ATOMIC_ACQUIRE)) cfut_signal_fd(f);
    }
    int fd = f->efd;
    pthread_mutex_unlock(&f->lock);
    return fd;
}

void fluxon_future_free(fluxon_future *f)
{
    if (f) cfut_unref(f);
}
