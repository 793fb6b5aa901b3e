/* test_ring_oneway.c — the owner's pass over a client's one-way queue (transport/ring.c,
 * review item C1): a client that appends a record for every record the owner reads (the
 * pacing a hostile client needs to keep the owner's reactor in the loop) no longer holds
 * the pass: one pass reads at most what was queued when it began, and the region's
 * ow_head follows every record read, so a client waiting for room sees it at once. */
#include <criterion/criterion.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fx.h"
#include "msg.h"
#include "ring.h"

TestSuite(ring_oneway, .timeout = 30);

typedef struct ow_client {
    void *base;
    uint64_t tail;
} ow_client_t;

/* Appends one RELEASE record (one holder id) as the client library does: false when full.
 * head: NULL, the region's ow_head (a well-behaved client); else the owner's own counter,
 * which a hostile client can follow (the owner accepts any tail within the queue's size of
 * it), ignoring what the owner published. */
static bool ow_append(ow_client_t *c, uint64_t holder, const uint64_t *owner_head)
{
    fx_ring_hdr_t *h = c->base;
    uint8_t *q = fx_ring_oneway(c->base);
    uint64_t ids[1] = {holder};
    fx_body_release_t b = {{ids, 1}};
    uint32_t blen = (uint32_t)fx_body_release_size(&b);
    uint64_t flen = FX_FRAME_HEADER_BYTES + blen, rec = (8 + flen + 7) & ~7ull;
    uint64_t head = owner_head ? *owner_head : __atomic_load_n(&h->ow_head, __ATOMIC_ACQUIRE), off = c->tail % FX_RING_ONEWAY_BYTES;
    uint64_t room = FX_RING_ONEWAY_BYTES - off, need = rec + (rec > room ? room : 0);
    if (c->tail + need - head > FX_RING_ONEWAY_BYTES) return false;
    if (rec > room) {
        uint32_t wrap = FX_RING_WRAP;
        memcpy(q + off, &wrap, sizeof wrap);
        c->tail += room;
        off = 0;
    }
    uint32_t l32 = (uint32_t)flen;
    memcpy(q + off, &l32, sizeof l32);
    fx_frame_header_t fh = {FX_FRAME_MAGIC, FX_MSG_RELEASE, 0, blen, 0, 0};
    fx_frame_header_encode(&fh, q + off + 8);
    fx_body_release_encode(&b, q + off + 8 + FX_FRAME_HEADER_BYTES);
    c->tail += rec;
    __atomic_store_n(&h->ow_tail, c->tail, __ATOMIC_SEQ_CST);
    return true;
}

typedef struct ow_feed {
    ow_client_t *c;
    uint64_t fed, appended, cap;
    uint64_t *owner_head; /* the owner's private counter */
    bool head_lagged;     /* the region's ow_head was behind a record already fed */
    uint64_t last_head;
} ow_feed_t;

/* The hostile client: one more record for every record the owner reads (up to cap). */
static bool ow_feed_append(void *arg, const uint8_t *frame, size_t len)
{
    ow_feed_t *f = arg;
    fx_frame_header_t h;
    cr_assert_eq(fx_frame_header_decode(frame, len, &h), FLUXON_OK);
    cr_assert_eq(h.type, FX_MSG_RELEASE);
    f->fed++;
    if (f->fed > 1) { /* the record before this one is visible as consumed */
        uint64_t pub = __atomic_load_n(&((fx_ring_hdr_t *)f->c->base)->ow_head, __ATOMIC_ACQUIRE);
        if (pub < f->last_head) f->head_lagged = true;
    }
    f->last_head = *f->owner_head;
    if (f->appended < f->cap && ow_append(f->c, f->appended, f->owner_head)) f->appended++;
    return f->fed < f->cap; /* a test bound: the pass today's code makes never ends */
}

Test(ring_oneway, a_client_appending_while_the_owner_drains_cannot_hold_the_pass)
{
    int memfd, efd;
    void *base;
    cr_assert_eq(fx_ring_create(9, &memfd, &efd, &base), FLUXON_OK);
    ow_client_t c = {base, 0};
    enum { QUEUED = 100 };
    for (int i = 0; i < QUEUED; i++) cr_assert(ow_append(&c, 1000 + (uint64_t)i, NULL));
    uint64_t head = 0;
    uint8_t *buf = malloc(FX_RING_SLOT_CAP);
    ow_feed_t f = {&c, 0, 0, 100000, &head, false, 0};
    const char *why = "";
    int64_t fed = fx_ring_drain_oneway(base, &head, buf, ow_feed_append, &f, &why);
    cr_assert_eq(fed, QUEUED, "one pass reads what was queued when it began (%lld read, %llu appended meanwhile)",
                 (long long)fed, (unsigned long long)f.appended);
    cr_assert_not(f.head_lagged, "ow_head follows each record read");
    cr_assert_eq(__atomic_load_n(&((fx_ring_hdr_t *)base)->ow_head, __ATOMIC_ACQUIRE), head);
    /* the records appended meanwhile are the next pass's, and nothing is lost */
    f.cap = f.appended; /* no more appends */
    uint64_t left = f.appended;
    f.fed = 0;
    f.cap = UINT64_MAX;
    f.appended = UINT64_MAX; /* stop appending */
    fed = fx_ring_drain_oneway(base, &head, buf, ow_feed_append, &f, &why);
    cr_assert_eq((uint64_t)fed, left, "the next pass reads the %llu records appended during the first",
                 (unsigned long long)left);
    cr_assert_eq(fx_ring_drain_oneway(base, &head, buf, ow_feed_append, &f, &why), 0, "then the queue is empty");
    /* a tail moved back behind the owner's head is refused, as one past the queue is */
    __atomic_store_n(&((fx_ring_hdr_t *)base)->ow_tail, head - 8, __ATOMIC_RELEASE);
    cr_assert_eq(fx_ring_drain_oneway(base, &head, buf, ow_feed_append, &f, &why), FLUXON_ERR_PROTOCOL);
    cr_assert(strstr(why, "tail"), "%s", why);
    free(buf);
    fx_ring_unmap(base);
    close(memfd);
    close(efd);
}
