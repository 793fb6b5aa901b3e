/* scratch.c — the calling thread's scratch (issue 18): one request buffer, one response
 * buffer and one decode arena per thread, kept from call to call, so a call on the ring
 * path makes no heap allocation for its request, its reply or the decoded reply. Each
 * is lent to one user at a time: a nested call (an abort inside a put_start) finds it
 * lent and falls back to the heap. Buffers above CLS_KEEP_MAX come from the heap and go
 * back to it. Freed when the thread exits (a pthread key's destructor): up to ~144 KiB
 * per thread that used a client (two 64 KiB buffers and a 16 KiB arena) until then. */
#include <pthread.h>

#include "client.h"

#define CLS_KEEP_MAX (64u << 10)

typedef struct cls_buf {
    uint8_t *p;
    size_t cap;
    bool lent;
} cls_buf_t;

typedef struct cls {
    cls_buf_t buf[2]; /* FX_CLIENT_REQ, FX_CLIENT_RESP */
    fx_arena_t arena;
    bool arena_lent;
} cls_t;

static __thread cls_t *cls_mine;
static pthread_key_t cls_key;
static pthread_once_t cls_once = PTHREAD_ONCE_INIT;
static bool cls_key_ok;

static void cls_destroy(void *arg)
{
    cls_t *s = arg;
    for (int i = 0; i < 2; i++) fx_free(s->buf[i].p);
    fx_arena_free(&s->arena);
    fx_free(s);
    cls_mine = NULL;
}

static void cls_key_init(void) { cls_key_ok = pthread_key_create(&cls_key, cls_destroy) == 0; }

/* Unloaded (dlclose of libfluxon.so) or exiting: no thread may run cls_destroy, code that
 * is gone, afterwards; the scratch of threads still alive then is left to the process. */
__attribute__((destructor)) static void cls_unload(void)
{
    if (cls_key_ok) pthread_key_delete(cls_key);
    cls_key_ok = false;
}

/* This thread's scratch, made on first use; NULL (the heap is used) when it cannot be. */
static cls_t *cls_get(void)
{
    if (cls_mine) return cls_mine;
    pthread_once(&cls_once, cls_key_init);
    if (!cls_key_ok) return NULL;
    cls_t *s = fx_calloc(1, sizeof *s);
    if (!s) return NULL;
    if (pthread_setspecific(cls_key, s) != 0) {
        fx_free(s);
        return NULL;
    }
    return cls_mine = s;
}

FX_INTERNAL uint8_t *fx_client_buf(int which, size_t n)
{
    if (!n) n = 1; /* a lent buffer is never NULL: NULL means NOMEM and is never given back */
    cls_t *s = n <= CLS_KEEP_MAX ? cls_get() : NULL;
    cls_buf_t *b = s ? &s->buf[which] : NULL;
    if (!b || b->lent) return fx_malloc(n);
    if (b->cap < n) {
        size_t cap = n < 4096 ? 4096 : n;
        uint8_t *p = fx_malloc(cap);
        if (!p) return NULL;
        fx_free(b->p);
        b->p = p;
        b->cap = cap;
    }
    b->lent = true;
    return b->p;
}

static cls_buf_t *cls_lent(const void *p)
{
    cls_t *s = cls_mine;
    if (!p || !s) return NULL;
    for (int i = 0; i < 2; i++)
        if (s->buf[i].lent && s->buf[i].p == p) return &s->buf[i];
    return NULL;
}

FX_INTERNAL void fx_client_buf_free(void *p)
{
    cls_buf_t *b = cls_lent(p);
    if (b) b->lent = false;
    else fx_free(p);
}

FX_INTERNAL uint8_t *fx_client_buf_own(uint8_t *p, size_t n)
{
    if (!cls_lent(p)) return p;
    uint8_t *h = fx_malloc(n ? n : 1);
    if (h) memcpy(h, p, n);
    fx_client_buf_free(p);
    return h;
}

FX_INTERNAL fx_arena_t *fx_client_arena(fx_arena_t *fallback)
{
    cls_t *s = cls_get();
    memset(fallback, 0, sizeof *fallback);
    if (!s || s->arena_lent) return fallback;
    s->arena_lent = true;
    return &s->arena;
}

FX_INTERNAL void fx_client_arena_done(fx_arena_t *a)
{
    cls_t *s = cls_mine;
    if (s && a == &s->arena) {
        fx_arena_reset(a);
        s->arena_lent = false;
    } else {
        fx_arena_free(a);
    }
}

#undef CLS_KEEP_MAX
