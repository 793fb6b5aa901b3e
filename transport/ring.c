/* ring.c — the shared-memory rings (ring.h): region creation and mapping, the owner's
 * hostile-safe readers, completion, and the futex helpers. */
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

FX_INTERNAL size_t fx_ring_region_bytes(void)
{
    return FX_RING_HDR_BYTES + (size_t)FX_RING_SLOTS * FX_RING_SLOT_BYTES + FX_RING_ONEWAY_BYTES;
}

FX_INTERNAL int fx_ring_create(uint64_t generation, int *memfd_p, int *efd_p, void **base_p)
{
    size_t len = fx_ring_region_bytes();
    int fd = memfd_create("fluxon-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        FX_WARN("ring: memfd_create: %m (the client uses the socket)");
        return FLUXON_ERR_INTERNAL;
    }
    if (ftruncate(fd, (off_t)len) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        FX_WARN("ring: sizing/sealing the region: %m (the client uses the socket)");
        close(fd);
        return FLUXON_ERR_INTERNAL;
    }
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        FX_WARN("ring: mmap: %m (the client uses the socket)");
        close(fd);
        return FLUXON_ERR_NOMEM;
    }
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) {
        FX_WARN("ring: eventfd: %m (the client uses the socket)");
        munmap(base, len);
        close(fd);
        return FLUXON_ERR_INTERNAL;
    }
    fx_ring_hdr_t *h = base;
    h->magic = FX_RING_MAGIC;
    h->n_slots = FX_RING_SLOTS;
    h->slot_bytes = FX_RING_SLOT_BYTES;
    h->oneway_bytes = FX_RING_ONEWAY_BYTES;
    h->hdr_bytes = FX_RING_HDR_BYTES;
    h->generation = generation;
    __atomic_store_n(&h->armed, 1, __ATOMIC_SEQ_CST);
    *memfd_p = fd;
    *efd_p = efd;
    *base_p = base;
    return FLUXON_OK;
}

FX_INTERNAL void fx_ring_unmap(void *base)
{
    if (base) munmap(base, fx_ring_region_bytes());
}

/* The frame in buf (len bytes, already copied out): exactly one request frame. */
static int ring_check_frame(const uint8_t *buf, uint64_t len, const char **why)
{
    fx_frame_header_t h;
    if (len < FX_FRAME_HEADER_BYTES || len > FX_RING_SLOT_CAP) {
        *why = "frame length out of bounds";
        return FLUXON_ERR_PROTOCOL;
    }
    if (fx_frame_header_decode(buf, FX_RING_SLOT_CAP, &h) != FLUXON_OK) {
        *why = "bad frame header";
        return FLUXON_ERR_PROTOCOL;
    }
    if ((uint64_t)h.body_len + FX_FRAME_HEADER_BYTES != len) {
        *why = "frame length does not match its body_len";
        return FLUXON_ERR_PROTOCOL;
    }
    if (h.flags & FX_FLAG_RESPONSE) {
        *why = "a response frame";
        return FLUXON_ERR_PROTOCOL;
    }
    if (h.type == FX_MSG_HELLO) {
        *why = "HELLO";
        return FLUXON_ERR_PROTOCOL;
    }
    return FLUXON_OK;
}

FX_INTERNAL int64_t fx_ring_take_slot(void *base, uint32_t i, uint8_t *buf, const char **why)
{
    if (i >= FX_RING_SLOTS) return 0;
    fx_ring_slot_t *s = fx_ring_slot(base, i);
    /* TAKEN first, then the copy: a caller that gave up turns REQ back to FREE and its
     * slot may carry another caller's request by the time a copy made before the flip
     * would be served (A-B-A); once TAKEN, the request in the slot is the one whose caller
     * waits for it (the client writes a slot only while it is FREE) */
    uint32_t req = FX_RING_REQ;
    /* a load first: a locked compare-and-swap takes the line from the client even when it
     * fails, and most slots of a pass hold no request */
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != FX_RING_REQ ||
        !__atomic_compare_exchange_n(&s->state, &req, FX_RING_TAKEN, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return 0; /* no request, or its caller gave up before it was taken: not served */
    uint32_t len = __atomic_load_n(&s->req_len, __ATOMIC_RELAXED); /* read once */
    if (len < FX_FRAME_HEADER_BYTES || len > FX_RING_SLOT_CAP) {
        *why = "request length out of bounds";
        return FLUXON_ERR_PROTOCOL;
    }
    memcpy(buf, fx_ring_slot_data(base, i), len); /* from here on only the copy is read */
    int rc = ring_check_frame(buf, len, why);
    if (rc != FLUXON_OK) return rc;
    uint16_t type = (uint16_t)(buf[4] | buf[5] << 8);
    if (type == FX_MSG_HANDLE_CONSUME || type == FX_MSG_RELEASE || type == FX_MSG_PUBLISHED || type == FX_MSG_PREFETCH) {
        *why = "a one-way message in a request slot";
        return FLUXON_ERR_PROTOCOL;
    }
    return len;
}

FX_INTERNAL int64_t fx_ring_take_oneway(void *base, uint64_t *head, uint8_t *buf, const char **why)
{
    fx_ring_hdr_t *h = base;
    const uint8_t *q = fx_ring_oneway(base);
    uint64_t pos = *head; /* *head moves only past what was read whole */
    for (int wraps = 0; wraps < 2; wraps++) {
        uint64_t tail = __atomic_load_n(&h->ow_tail, __ATOMIC_ACQUIRE);
        if (tail == pos) {
            *head = pos;
            return 0;
        }
        uint64_t used = tail - pos;
        if (used > FX_RING_ONEWAY_BYTES || (used & 7)) {
            *why = "one-way tail out of bounds";
            return FLUXON_ERR_PROTOCOL;
        }
        uint64_t off = pos % FX_RING_ONEWAY_BYTES, room = FX_RING_ONEWAY_BYTES - off;
        uint32_t len;
        memcpy(&len, q + off, sizeof len); /* read once */
        if (len == FX_RING_WRAP) {
            if (room > used) {
                *why = "one-way wrap marker past the tail";
                return FLUXON_ERR_PROTOCOL;
            }
            pos += room;
            continue;
        }
        uint64_t rec = (8 + (uint64_t)len + 7) & ~7ull;
        if (len < FX_FRAME_HEADER_BYTES || len > FX_RING_SLOT_CAP || rec > room || rec > used) {
            *why = "one-way record length out of bounds";
            return FLUXON_ERR_PROTOCOL;
        }
        memcpy(buf, q + off + 8, len);
        int rc = ring_check_frame(buf, len, why);
        if (rc != FLUXON_OK) return rc;
        uint16_t type = (uint16_t)(buf[4] | buf[5] << 8);
        uint64_t req_id;
        memcpy(&req_id, buf + 16, sizeof req_id);
        if ((type != FX_MSG_HANDLE_CONSUME && type != FX_MSG_RELEASE && type != FX_MSG_PREFETCH) || req_id != 0) {
            *why = "a one-way record that is not HANDLE_CONSUME/RELEASE/PREFETCH with req_id 0";
            return FLUXON_ERR_PROTOCOL;
        }
        *head = pos + rec;
        return len;
    }
    *why = "one-way wrap marker loop";
    return FLUXON_ERR_PROTOCOL;
}

FX_INTERNAL int64_t fx_ring_drain_oneway(void *base, uint64_t *head, uint8_t *buf, fx_ring_feed_fn feed, void *arg,
                                         const char **why)
{
    fx_ring_hdr_t *h = base;
    /* C1: the pass ends at the tail it saw first. Records appended meanwhile are the next
     * pass's (the client rings the doorbell for them once the owner re-arms it): a client
     * that appends as fast as the owner reads cannot keep the reactor in this loop, and a
     * pass reads at most the queue's size */
    uint64_t end = __atomic_load_n(&h->ow_tail, __ATOMIC_ACQUIRE);
    if (end - *head > FX_RING_ONEWAY_BYTES) { /* behind the owner's head, or past the queue */
        *why = "one-way tail out of bounds";
        return FLUXON_ERR_PROTOCOL;
    }
    int64_t fed = 0;
    while ((int64_t)(end - *head) > 0) {
        int64_t n = fx_ring_take_oneway(base, head, buf, why);
        if (n < 0) return n;
        if (n == 0) break;
        fed++;
        __atomic_store_n(&h->ow_head, *head, __ATOMIC_RELEASE); /* room for the client at once */
        if (!feed(arg, buf, (size_t)n)) break;
    }
    return fed;
}

FX_INTERNAL bool fx_ring_complete(void *base, uint32_t i, const uint8_t *frame, size_t len)
{
    if (i >= FX_RING_SLOTS || len > FX_RING_SLOT_CAP) return false;
    fx_ring_slot_t *s = fx_ring_slot(base, i);
    memcpy(fx_ring_slot_data(base, i), frame, len);
    __atomic_store_n(&s->resp_len, (uint32_t)len, __ATOMIC_RELAXED);
    __atomic_store_n(&s->state, FX_RING_DONE, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&s->waiters, __ATOMIC_SEQ_CST)) fx_ring_futex_wake(&s->state, 1);
    return true;
}

FX_INTERNAL int fx_ring_map(int memfd, uint64_t generation, void **base_p)
{
    struct stat st;
    size_t len = fx_ring_region_bytes();
    if (fstat(memfd, &st) != 0 || (uint64_t)st.st_size != len) return FLUXON_ERR_PROTOCOL;
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (base == MAP_FAILED) return FLUXON_ERR_NOMEM;
    fx_ring_hdr_t *h = base;
    if (h->magic != FX_RING_MAGIC || h->n_slots != FX_RING_SLOTS || h->slot_bytes != FX_RING_SLOT_BYTES ||
        h->oneway_bytes != FX_RING_ONEWAY_BYTES || h->hdr_bytes != FX_RING_HDR_BYTES || h->generation != generation) {
        munmap(base, len);
        return FLUXON_ERR_PROTOCOL;
    }
    *base_p = base;
    return FLUXON_OK;
}

FX_INTERNAL int fx_ring_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
    long rc = syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, NULL, 0);
    return rc == 0 ? 0 : errno;
}

FX_INTERNAL void fx_ring_futex_wake(uint32_t *word, int n) { syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0); }
