/* fuzz_ring.c — the owner's reader of an external's shared-memory rings (transport/ring.c,
 * issue 18): the region is the client's, so every byte of it is hostile. The input lays
 * out a region (a zeroed one of the real size, in its own allocation so ASan sees any
 * read outside it):
 *   u64 ow_tail | u16 n_oneway_bytes | that many bytes at the start of the one-way queue |
 *   then records [u8 slot][u8 state][u32 req_len][u16 n][n bytes of slot data]
 * and runs what the owner runs on a doorbell: the one-way queue until it is empty or bad,
 * then every slot. Checked per input:
 *  - every frame taken is a copy of the region's bytes at the place it claims (the one-way
 *    record after its length word; the slot's data), exactly one request frame (header
 *    decodes, body_len + 24 == length <= FX_RING_SLOT_CAP), of a one-way type with req_id 0
 *    from the queue and of any other type from a slot (and that slot is then TAKEN);
 *  - the owner's head only moves forward, in 8-byte steps, never past the tail, and the
 *    queue pass ends (bounded by its bytes);
 *  - a refusal always says why; a completion writes only within its slot (a reply over
 *    the slot's capacity is refused). */
#include <string.h>

#include "fuzz.h"
#include "ring.h"

static uint8_t *fz_region;

static uint64_t fz_get(const uint8_t **p, size_t *n, size_t w)
{
    uint64_t v = 0;
    for (size_t i = 0; i < w && *n; i++, (*p)++, (*n)--) v |= (uint64_t)**p << (8 * i);
    return v;
}

static void fz_check_frame(const uint8_t *buf, int64_t len, bool oneway)
{
    FUZZ_CHECK(len >= FX_FRAME_HEADER_BYTES && len <= FX_RING_SLOT_CAP, "frame length %lld", (long long)len);
    fx_frame_header_t h;
    FUZZ_CHECK(fx_frame_header_decode(buf, FX_RING_SLOT_CAP, &h) == FLUXON_OK, "a taken frame's header decodes");
    FUZZ_CHECK(h.body_len + (int64_t)FX_FRAME_HEADER_BYTES == len, "one whole frame");
    FUZZ_CHECK(!(h.flags & FX_FLAG_RESPONSE) && h.type != FX_MSG_HELLO, "a request");
    bool ow = h.type == FX_MSG_HANDLE_CONSUME || h.type == FX_MSG_RELEASE;
    if (oneway) FUZZ_CHECK(ow && h.req_id == 0, "a one-way record is CONSUME/RELEASE with req_id 0");
    else FUZZ_CHECK(!ow && h.type != FX_MSG_PUBLISHED, "a slot holds a request that expects an answer");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t total = fx_ring_region_bytes();
    if (!fz_region) fz_region = malloc(total);
    FUZZ_CHECK(fz_region != NULL, "out of memory");
    memset(fz_region, 0, total);
    fx_ring_hdr_t *hdr = (fx_ring_hdr_t *)fz_region;
    const uint8_t *p = data;
    size_t n = size;
    hdr->ow_tail = fz_get(&p, &n, 8);
    size_t ow_n = (size_t)fz_get(&p, &n, 2);
    ow_n = ow_n < n ? ow_n : n;
    memcpy(fx_ring_oneway(fz_region), p, ow_n);
    p += ow_n;
    n -= ow_n;
    while (n >= 8) {
        uint32_t slot = (uint32_t)fz_get(&p, &n, 1) % FX_RING_SLOTS;
        fx_ring_slot_t *s = fx_ring_slot(fz_region, slot);
        s->state = (uint32_t)fz_get(&p, &n, 1) % 5;
        s->req_len = (uint32_t)fz_get(&p, &n, 4);
        size_t k = (size_t)fz_get(&p, &n, 2);
        k = k < n ? k : n;
        k = k < FX_RING_SLOT_CAP ? k : FX_RING_SLOT_CAP;
        memcpy(fx_ring_slot_data(fz_region, slot), p, k);
        p += k;
        n -= k;
    }
    static uint8_t buf[FX_RING_SLOT_CAP];
    const char *why = NULL;
    /* the one-way queue: bounded by its bytes (every step consumes >= 8 of them) */
    uint64_t head = 0, tail = hdr->ow_tail;
    for (int steps = 0;; steps++) {
        FUZZ_CHECK(steps <= (int)(FX_RING_ONEWAY_BYTES / 8) + 2, "the one-way pass ends");
        uint64_t before = head;
        why = NULL;
        int64_t r = fx_ring_take_oneway(fz_region, &head, buf, &why);
        if (r < 0) {
            FUZZ_CHECK(why && *why, "a refusal says why");
            FUZZ_CHECK(head == before, "a refused record does not move the head");
            break;
        }
        if (r == 0) {
            FUZZ_CHECK(head == tail, "empty means the head reached the tail");
            break;
        }
        FUZZ_CHECK(head > before && head - before <= FX_RING_ONEWAY_BYTES && head <= tail && !(head & 7),
                   "the head moves forward in 8-byte steps within the tail");
        /* the frame is the record's bytes (after a possible wrap to offset 0) */
        uint64_t off = (head - (uint64_t)((8 + r + 7) & ~7ll)) % FX_RING_ONEWAY_BYTES;
        FUZZ_CHECK(memcmp(buf, fx_ring_oneway(fz_region) + off + 8, (size_t)r) == 0, "a copy of the record");
        fz_check_frame(buf, r, true);
    }
    for (uint32_t i = 0; i < FX_RING_SLOTS; i++) {
        fx_ring_slot_t *s = fx_ring_slot(fz_region, i);
        uint32_t state = s->state;
        why = NULL;
        int64_t r = fx_ring_take_slot(fz_region, i, buf, &why);
        if (r < 0) {
            FUZZ_CHECK(why && *why && state == FX_RING_REQ && s->state == FX_RING_TAKEN,
                       "a refusal says why, for a submitted slot (taken: the client is closed)");
            continue;
        }
        if (r == 0) {
            FUZZ_CHECK(state != FX_RING_REQ || s->state == FX_RING_REQ, "an empty slot is left alone");
            continue;
        }
        FUZZ_CHECK(state == FX_RING_REQ && s->state == FX_RING_TAKEN, "a request taken is marked TAKEN");
        FUZZ_CHECK(memcmp(buf, fx_ring_slot_data(fz_region, i), (size_t)r) == 0, "a copy of the slot");
        fz_check_frame(buf, r, false);
        /* its answer: within the slot, or refused */
        size_t rl = (size_t)s->req_len + i * 977u;
        bool ok = fx_ring_complete(fz_region, i, buf, rl <= FX_RING_SLOT_CAP ? rl : (size_t)r);
        FUZZ_CHECK(ok && s->state == FX_RING_DONE, "a reply that fits is written and flipped DONE");
        FUZZ_CHECK(!fx_ring_complete(fz_region, i, buf, FX_RING_SLOT_CAP + 1), "a reply over the slot is refused");
    }
    return 0;
}
