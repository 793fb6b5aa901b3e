/* ring.h — the shared-memory request/completion rings between an owner and ONE external
 * client (issue 18). After the unix-socket bootstrap (HELLO, the segment's memfd,
 * liveness: all unchanged), the owner creates one region per client (a sealed memfd the
 * client maps; a client can only touch its own) and an eventfd, the client's doorbell:
 *
 *   page 0       fx_ring_hdr_t: layout, the owner's "armed" word, the one-way queue's
 *                head (owner) and tail (client)
 *   slots        n_slots x slot_bytes: fx_ring_slot_t + one frame (the request, then its
 *                reply in place). A caller owns a slot, writes its request, flips state to
 *                REQ, rings the doorbell when the owner is armed, and sleeps on the state
 *                word (futex); the owner copies the request out, serves it, writes the
 *                reply into the slot, flips state to DONE and wakes exactly that caller.
 *   one-way      a byte queue of [u32 len | frame] records (8-aligned, a WRAP marker
 *                when a record does not fit before the end): HANDLE_CONSUME / RELEASE,
 *                which the owner serves before the slots of the same pass (the socket's
 *                FIFO order between a one-way and a later request of the same thread).
 *
 * The owner treats everything in the region as hostile: fx_ring_take_* copy a frame out
 * before anything is checked (no time-of-check/time-of-use), bound every length by the
 * layout the OWNER chose (kept on its side, never re-read from the region), and never
 * follow a pointer. Bad contents are a protocol error (the owner closes that client, as
 * it does for a malformed frame on the socket). */
#ifndef FX_RING_H
#define FX_RING_H

#include "msg.h"

/* "FXLFRNG2": layout 2 added `posted` (a client of layout 1 never raises it, so an owner
 * of layout 2 would never see its requests: each side refuses the other's region and the
 * client stays on the socket) */
#define FX_RING_MAGIC 0x32474e52464c5846ull
/* An external asks for rings with this value in its HELLO's generation field (an
 * external has no generation: 0 there keeps the socket-only bootstrap, one fd). */
#define FX_RING_HELLO_WANT 0x474e4952ull /* "RING" */
#define FX_RING_SLOTS 32u
#define FX_RING_SLOT_BYTES (64u * 1024u)
#define FX_RING_ONEWAY_BYTES (256u * 1024u)
#define FX_RING_HDR_BYTES 4096u
#define FX_RING_SLOT_HDR 64u
#define FX_RING_SLOT_CAP (FX_RING_SLOT_BYTES - FX_RING_SLOT_HDR) /* frame bytes per slot */
#define FX_RING_WRAP 0xffffffffu /* one-way record length: continue at offset 0 */

/* slot states (the futex word) */
/* FREE -> REQ (client) -> TAKEN (owner, then it copies it out) -> DONE (owner) -> FREE (client).
 * A caller that gives up turns REQ back to FREE (never served) or TAKEN into ABANDONED
 * (the owner still answers: the client reaps the late reply). */
enum { FX_RING_FREE = 0, FX_RING_REQ = 1, FX_RING_DONE = 2, FX_RING_ABANDONED = 3, FX_RING_TAKEN = 4 };

typedef struct fx_ring_hdr {
    uint64_t magic;
    uint32_t n_slots, slot_bytes, oneway_bytes, hdr_bytes;
    uint64_t generation;   /* the owner's */
    uint32_t armed;        /* owner: 1 = asleep, ring the doorbell; the client swaps it to 0 */
    uint32_t pad0;
    uint64_t pad1[4];
    uint64_t ow_head;      /* owner: one-way bytes consumed (published after serving) */
    uint64_t pad2[7];
    uint64_t ow_tail;      /* client: one-way bytes written */
    uint64_t posted;       /* client: raised after each slot it turns REQ; the owner looks
                            * at the slots only when it moved (one load per pass, not one
                            * per slot, each on a page of its own) */
} fx_ring_hdr_t;

typedef struct fx_ring_slot {
    uint32_t state;    /* FX_RING_*: the futex word */
    uint32_t waiters;  /* client: 1 while the caller sleeps (the owner wakes only then) */
    uint32_t req_len;  /* client: frame bytes of the request */
    uint32_t resp_len; /* owner: frame bytes of the reply */
    uint64_t post_ns;  /* client: CLOCK_MONOTONIC (fx_now_ns) when it posted the request; 0: not
                        * stamped. The owner's ring_wait histogram (untrusted: a bound only) */
} fx_ring_slot_t;

FX_INTERNAL size_t fx_ring_region_bytes(void);
static inline fx_ring_slot_t *fx_ring_slot(void *base, uint32_t i)
{
    return (fx_ring_slot_t *)((uint8_t *)base + FX_RING_HDR_BYTES + (size_t)i * FX_RING_SLOT_BYTES);
}
static inline uint8_t *fx_ring_slot_data(void *base, uint32_t i) { return (uint8_t *)fx_ring_slot(base, i) + FX_RING_SLOT_HDR; }
static inline uint8_t *fx_ring_oneway(void *base)
{
    return (uint8_t *)base + FX_RING_HDR_BYTES + (size_t)FX_RING_SLOTS * FX_RING_SLOT_BYTES;
}

/* ---- owner side ---- */
/* Creates the region (memfd sealed against shrinking and growing: a client cannot make
 * the owner's mapping fault) mapped at *base_p, and a non-blocking eventfd (the
 * doorbell). FLUXON_OK or an error (nothing left open). */
FX_INTERNAL int fx_ring_create(uint64_t generation, int *memfd_p, int *efd_p, void **base_p);
FX_INTERNAL void fx_ring_unmap(void *base);

/* Takes the request of slot i (state REQ), copies it into buf (FX_RING_SLOT_CAP bytes), checks
 * it is exactly one request frame (no response flag, body within the slot); the slot is
 * marked TAKEN before the copy. Returns its length (> 0), 0 when the slot holds no request
 * (or its caller took it back before it was taken), or FLUXON_ERR_PROTOCOL (< 0) with *why
 * naming what was wrong. */
FX_INTERNAL int64_t fx_ring_take_slot(void *base, uint32_t i, uint8_t *buf, const char **why);
/* Copies the next one-way record past *head (the owner's own counter) into buf
 * (FX_RING_SLOT_CAP bytes): > 0 its frame length (*head advanced past it), 0 nothing
 * more, < 0 bad contents (*why says what). Only HANDLE_CONSUME and RELEASE, req_id 0. */
FX_INTERNAL int64_t fx_ring_take_oneway(void *base, uint64_t *head, uint8_t *buf, const char **why);
/* One pass over the one-way queue: each record queued when the pass began (never more:
 * a client appending meanwhile cannot hold the owner in the loop) is copied into buf and
 * handed to feed (which returns false to stop: the external closed); the region's ow_head
 * follows *head after every record. Returns the records fed (>= 0), or
 * FLUXON_ERR_PROTOCOL (< 0) with *why. */
typedef bool (*fx_ring_feed_fn)(void *arg, const uint8_t *frame, size_t len);
FX_INTERNAL int64_t fx_ring_drain_oneway(void *base, uint64_t *head, uint8_t *buf, fx_ring_feed_fn feed, void *arg,
                                         const char **why);
/* Writes a reply frame (len bytes) into slot i, flips it DONE and wakes its caller.
 * False when it does not fit (nothing written). */
FX_INTERNAL bool fx_ring_complete(void *base, uint32_t i, const uint8_t *frame, size_t len);

/* ---- client side ---- */
/* Maps the region from memfd and checks its layout; FLUXON_OK or PROTOCOL. */
FX_INTERNAL int fx_ring_map(int memfd, uint64_t generation, void **base_p);
/* futex helpers on a shared (not process-private) word */
FX_INTERNAL int fx_ring_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns);
FX_INTERNAL void fx_ring_futex_wake(uint32_t *word, int n);

#endif
