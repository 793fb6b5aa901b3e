/* registry.c — the live plans and get handles of one client (see registry.h).
 *
 * Identity, not address: every blob is preceded by a hidden header {magic, seq} and the
 * registry checks both against its record before acting. Blob memory comes from the
 * registry's own arena, a large reservation (MAP_NORESERVE: virtual address space, no
 * memory until touched) handed out by a bump pointer: a released blob's address is not
 * handed out again until the pointer has gone round the whole arena (64 GiB: hundreds of
 * millions of plans), so a stale pointer never finds someone else's live object and is
 * FLUXON_ERR_WRONG_HANDLE. Each 4 KiB page counts its live blobs; a page whose blobs are
 * all released goes back to the kernel (MADV_DONTNEED, in runs of PLAN_RELEASE_RUN pages):
 * a long-lived plan keeps only its own pages resident. Fresh pages are faulted in ahead of
 * the pointer, PLAN_POPULATE_RUN at a time (MADV_POPULATE_WRITE): a batch-64 plan once
 * paid a page fault every few calls, and a release a TLB shootdown per page. */
#include <pthread.h>
#include <sys/mman.h>

#include "registry.h"
#include "u64map.h"
#include "log.h"

#define PLAN_MAGIC_LIVE 0x45564c4e414c5058ull /* "XPLANLVE" */
#define PLAN_MAGIC_DEAD 0x44414544414c5058ull
#define PLAN_CHUNK 4096ull /* the unit of live counts and of giving memory back */
/* Dead chunks go back to the kernel in runs of this many (one madvise and one TLB
 * shootdown per 256 KiB, not per page), and fresh ones are faulted in this many at a time
 * (MADV_POPULATE_WRITE, one system call instead of a fault per page). */
#define PLAN_RELEASE_RUN 64u
#define PLAN_POPULATE_RUN 16u

typedef struct plan_hdr { /* hidden, just before every blob */
    uint64_t magic;
    uint64_t seq;
} plan_hdr_t;

struct fx_plan_reg {
    pthread_mutex_t lock; /* guards everything below */
    fx_u64map_t objs;     /* blob address -> fx_plan_obj_t */
    uint64_t next_seq;
    uint8_t *base; /* the arena */
    size_t bytes, top, nchunks;
    uint32_t *live; /* per chunk: blobs not yet released (mapped: pages appear as used) */
    size_t rel_first, rel_n; /* dead chunks [rel_first, +rel_n) not yet given back */
    size_t pop_end;          /* chunks below this were populated ahead of the pointer */
    bool no_populate;        /* the kernel has no MADV_POPULATE_WRITE */
};

FX_INTERNAL int fx_plan_reg_create(fx_plan_reg_t **r_p)
{
    fx_plan_reg_t *r = fx_calloc(1, sizeof *r);
    if (!r) return FLUXON_ERR_NOMEM;
    /* as large as the system lets us reserve (strict overcommit refuses the biggest) */
    for (size_t gib = 64; gib >= 1 && !r->base; gib /= 4) {
        void *p = mmap(NULL, gib << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            r->base = p;
            r->bytes = gib << 30;
        }
    }
    r->nchunks = r->bytes / PLAN_CHUNK;
    void *live = r->base ? mmap(NULL, r->nchunks * sizeof *r->live, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                         : MAP_FAILED;
    r->live = live == MAP_FAILED ? NULL : live;
    if (!r->live || fx_u64map_reserve(&r->objs, 64) != FLUXON_OK) {
        FX_ERROR("plan registry: cannot reserve its arena: %m");
        if (r->base) munmap(r->base, r->bytes);
        if (r->live) munmap(r->live, r->nchunks * sizeof *r->live);
        fx_free(r);
        return FLUXON_ERR_NOMEM;
    }
    pthread_mutex_init(&r->lock, NULL);
    *r_p = r;
    return FLUXON_OK;
}

static size_t arena_size(size_t blob_bytes) { return (sizeof(plan_hdr_t) + blob_bytes + 15) & ~(size_t)15; }

/* Under the lock: gives the pending run of dead chunks back. */
static void arena_release_flush(fx_plan_reg_t *r)
{
    if (!r->rel_n) return;
    madvise(r->base + r->rel_first * PLAN_CHUNK, r->rel_n * PLAN_CHUNK, MADV_DONTNEED);
    r->rel_n = 0;
}

/* Under the lock: may chunk c go back to the kernel? (not the one being filled) It joins
 * the pending run; a run that is long enough, or a chunk that does not extend it, flushes. */
static void arena_maybe_release(fx_plan_reg_t *r, size_t c)
{
    /* c == nchunks: the pointer stood exactly at the arena's end (a blob ended there); no
     * such chunk: its count would be read past `live`, and the page past the arena given back */
    if (c >= r->nchunks || r->live[c] || (c == r->top / PLAN_CHUNK && r->top % PLAN_CHUNK)) return;
    if (r->rel_n && c == r->rel_first + r->rel_n) {
        r->rel_n++;
    } else {
        arena_release_flush(r);
        r->rel_first = c;
        r->rel_n = 1;
    }
    if (r->rel_n >= PLAN_RELEASE_RUN) arena_release_flush(r);
}

/* Under the lock: chunks [first, last] are about to hold a blob. A pending release over
 * them, or over the pages faulted in ahead with them, goes first (it would zero the new
 * blob), then the pages ahead are faulted in. */
static void arena_prepare(fx_plan_reg_t *r, size_t first, size_t last)
{
    size_t end = last + 1; /* [first, end): the chunks touched now */
    bool populate = !r->no_populate && !(last < r->pop_end && first + PLAN_POPULATE_RUN >= r->pop_end);
    if (populate) end = FX_MIN(FX_MAX(first + PLAN_POPULATE_RUN, last + 1), r->nchunks);
    if (r->rel_n && first < r->rel_first + r->rel_n && end > r->rel_first) arena_release_flush(r);
    if (!populate) return;
#ifdef MADV_POPULATE_WRITE
    if (madvise(r->base + first * PLAN_CHUNK, (end - first) * PLAN_CHUNK, MADV_POPULATE_WRITE) != 0)
        r->no_populate = true; /* an older kernel: pages fault in one by one, as before */
    r->pop_end = end;
#else
    r->no_populate = true;
#endif
}

/* Under the lock: a zeroed run of `size` bytes never handed out since the pointer last
 * passed here; NULL when the arena has no such run. Chunks entered fresh must hold no
 * live blob (after a wrap the old ones may). */
static void *arena_alloc(fx_plan_reg_t *r, size_t size)
{
    if (size > r->bytes) return NULL;
    for (size_t tries = 0; tries <= r->nchunks + 1; tries++) {
        size_t pos = r->top + size <= r->bytes ? r->top : 0;
        size_t first = pos / PLAN_CHUNK, last = (pos + size - 1) / PLAN_CHUNK;
        size_t busy = SIZE_MAX;
        for (size_t c = pos % PLAN_CHUNK ? first + 1 : first; c <= last && busy == SIZE_MAX; c++)
            if (r->live[c]) busy = c;
        size_t old = r->top / PLAN_CHUNK;
        if (busy != SIZE_MAX) { /* skip past the live chunk */
            r->top = (busy + 1) * PLAN_CHUNK;
            if (r->top >= r->bytes) r->top = 0;
            if (old != r->top / PLAN_CHUNK) arena_maybe_release(r, old);
            continue;
        }
        arena_prepare(r, first, last);
        for (size_t c = first; c <= last; c++) r->live[c]++;
        r->top = pos + size;
        if (old != first) arena_maybe_release(r, old);
        return r->base + pos;
    }
    return NULL;
}

static void arena_free(fx_plan_reg_t *r, void *p, size_t size)
{
    size_t pos = (size_t)((uint8_t *)p - r->base);
    for (size_t c = pos / PLAN_CHUNK; c <= (pos + size - 1) / PLAN_CHUNK; c++) {
        r->live[c]--;
        arena_maybe_release(r, c);
    }
}

static plan_hdr_t *plan_hdr(const void *blob) { return (plan_hdr_t *)blob - 1; }

/* Under the lock. */
static void plan_obj_free(fx_plan_reg_t *r, fx_plan_obj_t *o)
{
    if (!o) return;
    fx_free(o->holder_ids);
    if (!o->arrays_one_block) {
        fx_free(o->offsets);
        fx_free(o->lens);
    }
    fx_free(o->group_lens);
    if (o->blob) {
        plan_hdr_t *h = plan_hdr(o->blob);
        h->magic = PLAN_MAGIC_DEAD;
        arena_free(r, h, arena_size(o->blob_bytes));
    }
    fx_free(o);
}

FX_INTERNAL void fx_plan_reg_destroy(fx_plan_reg_t *r)
{
    if (!r) return;
    size_t it = 0;
    void *v;
    while (fx_u64map_next(&r->objs, &it, NULL, &v)) plan_obj_free(r, v);
    fx_u64map_free(&r->objs);
    munmap(r->base, r->bytes);
    munmap(r->live, r->nchunks * sizeof *r->live);
    pthread_mutex_destroy(&r->lock);
    fx_free(r);
}

FX_INTERNAL fx_plan_obj_t *fx_plan_obj_new(fx_plan_reg_t *r, int kind, size_t blob_bytes)
{
    fx_plan_obj_t *o = fx_calloc(1, sizeof *o);
    if (!o) return NULL;
    pthread_mutex_lock(&r->lock);
    plan_hdr_t *h = arena_alloc(r, arena_size(blob_bytes));
    if (h) {
        memset(h, 0, arena_size(blob_bytes));
        h->seq = ++r->next_seq;
    }
    pthread_mutex_unlock(&r->lock);
    if (!h) {
        FX_WARN("plan registry: no room for a %zu-byte plan", blob_bytes);
        fx_free(o);
        return NULL;
    }
    o->kind = kind;
    o->seq = h->seq;
    o->blob = h + 1;
    o->blob_bytes = blob_bytes;
    return o;
}

FX_INTERNAL void fx_plan_reg_retire(fx_plan_reg_t *r, fx_plan_obj_t *o)
{
    pthread_mutex_lock(&r->lock);
    plan_obj_free(r, o);
    pthread_mutex_unlock(&r->lock);
}

FX_INTERNAL int fx_plan_reg_add(fx_plan_reg_t *r, fx_plan_obj_t *o)
{
    pthread_mutex_lock(&r->lock);
    plan_hdr(o->blob)->magic = PLAN_MAGIC_LIVE;
    int rc = fx_u64map_put(&r->objs, (uintptr_t)o->blob, o, NULL);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

FX_INTERNAL int fx_plan_reg_take(fx_plan_reg_t *r, const void *blob, int kind, fx_plan_check_fn check,
                                 void *arg, fx_plan_obj_t **o_p)
{
    *o_p = NULL;
    pthread_mutex_lock(&r->lock);
    /* the header is read only for an address the registry knows: never freed memory */
    fx_plan_obj_t *o = fx_u64map_get(&r->objs, (uintptr_t)blob);
    int rc = o && o->kind == kind && plan_hdr(blob)->magic == PLAN_MAGIC_LIVE && plan_hdr(blob)->seq == o->seq
                 ? FLUXON_OK
                 : FLUXON_ERR_WRONG_HANDLE;
    bool discard = false;
    if (rc == FLUXON_OK && check) rc = check(o, arg, &discard);
    if (rc == FLUXON_OK || discard) {
        fx_u64map_del(&r->objs, (uintptr_t)blob, NULL);
        plan_hdr(blob)->magic = PLAN_MAGIC_DEAD; /* taken: no longer a live plan */
    }
    if (rc == FLUXON_OK) *o_p = o;
    else if (discard) plan_obj_free(r, o);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

FX_INTERNAL size_t fx_plan_reg_take_expired(fx_plan_reg_t *r, int kind, uint64_t now_ms, fx_plan_obj_t **out,
                                            size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&r->lock);
    size_t it = 0;
    uint64_t k;
    void *v;
    while (n < cap && fx_u64map_next(&r->objs, &it, &k, &v)) {
        fx_plan_obj_t *o = v;
        if (o->kind != kind || !o->expires_ms || o->expires_ms > now_ms) continue;
        fx_u64map_del(&r->objs, k, NULL);
        it--; /* the deletion may have shifted a later entry into this slot: look again */
        plan_hdr(o->blob)->magic = PLAN_MAGIC_DEAD;
        out[n++] = o;
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}

FX_INTERNAL int fx_plan_reg_kind(fx_plan_reg_t *r, const void *blob)
{
    pthread_mutex_lock(&r->lock);
    fx_plan_obj_t *o = fx_u64map_get(&r->objs, (uintptr_t)blob);
    /* the header is read only for an address the registry knows: never freed memory */
    int kind = o && plan_hdr(blob)->magic == PLAN_MAGIC_LIVE && plan_hdr(blob)->seq == o->seq ? o->kind : 0;
    pthread_mutex_unlock(&r->lock);
    return kind;
}
