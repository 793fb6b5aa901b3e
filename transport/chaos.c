/* chaos.c — which control frames may be dropped, delayed or duplicated, and the seeded
 * draw (chaos.h). */
#include "chaos.h"

#include "log.h"

#define CHAOS_DROP (1u << FX_CHAOS_DROP)
#define CHAOS_DELAY (1u << FX_CHAOS_DELAY)
#define CHAOS_DUP (1u << FX_CHAOS_DUP)

/* Requests whose handler may run twice for one send: the second run finds what the first
 * did by the request's own identity (PUT_DONE's batch_id and dedup record, EVICT's and
 * GET_DONE's exact (key, offset, put_id) identities, GRANT_RETURN's grant ids, REPUBLISH's
 * (key, put_id, offset) reports) or changes nothing (reads; heartbeats set the sender's unsettled
 * pushes, W2: a stale or repeated list only holds a range quarantine longer). The other requests
 * create something per run whose answer the requester never sees (a second GRANT's grants,
 * a second PUT_PLACE's in-flight put and ranges, a second LOOKUP's durable-fetch entry, a
 * second PUT_START's plan, a second GET_START's handle, a second PUT_INLINE's put): TCP
 * never delivers a frame twice, so nothing in the protocol is built to absorb that. */
static bool chaos_dup_safe(unsigned type)
{
    switch (type) {
    case FX_MSG_HEARTBEAT: case FX_MSG_PING: case FX_MSG_CLUSTER_NODES: case FX_MSG_OWNER_STATS:
    case FX_MSG_MASTER_STATS: case FX_MSG_EXISTS: case FX_MSG_LIST: case FX_MSG_PUT_DONE:
    case FX_MSG_GET_DONE: case FX_MSG_EVICT: case FX_MSG_GRANT_RETURN:
        return true;
    default:
        return false;
    }
}

/* The faults frame h may take (bits 1 << FX_CHAOS_*). */
static unsigned chaos_allowed(const fx_frame_header_t *h)
{
    /* HELLO and REGISTER: a lost handshake is survived by closing the connection and
     * connecting again, not by a retry with the same identity; faulting them only measures
     * the reconnect backoff. Never touched. */
    if (h->type == FX_MSG_HELLO || h->type == FX_MSG_REGISTER) return 0;
    /* INVALIDATE, one-way or a request (a DELETE waits for its answer, W6): a lost one
     * leaves a copy the master no longer routes (below); never touched (its answer may be) */
    if (h->type == FX_MSG_INVALIDATE && !(h->flags & FX_FLAG_RESPONSE)) return 0;
    /* One-way frames (req_id 0: INVALIDATE, PLACED, CLUSTER_INFO, PUBLISHED,
     * HANDLE_CONSUME, RELEASE) have no answer, so nobody retries them: a lost INVALIDATE
     * leaves a copy the master no longer routes, a lost PLACED a value never re-published,
     * a lost RELEASE a holder pinned for good; and they rely on arriving in order. TCP loses
     * the connection, never one frame: the roles survive that (close, reconnect,
     * re-register), not a hole in the stream. Never touched. */
    if (h->req_id == 0) return 0;
    /* a response lost, late or twice: the request's timeout, the late-answer drop, the
     * duplicate-answer drop of the rpc table; every requester retries an uncertain outcome
     * with the same identity (T1) or lets a TTL end what it started */
    if (h->flags & FX_FLAG_RESPONSE) return CHAOS_DROP | CHAOS_DELAY | CHAOS_DUP;
    /* a request lost or late: to its sender, the same as its response lost or late */
    return CHAOS_DROP | CHAOS_DELAY | (chaos_dup_safe(h->type) ? CHAOS_DUP : 0u);
}

static uint64_t chaos_next(fx_chaos_t *ch)
{
    uint64_t x = ch->rng; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    ch->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

FX_INTERNAL bool fx_chaos_init(fx_chaos_t *ch, const fx_config_t *cfg, const char *who)
{
    memset(ch, 0, sizeof *ch);
    ch->drop_ppm = cfg->chaos_drop_ppm;
    ch->delay_ppm = cfg->chaos_delay_ppm;
    ch->delay_ms = cfg->chaos_delay_ms;
    ch->dup_ppm = cfg->chaos_dup_ppm;
    uint64_t h = 1469598103934665603ull; /* FNV-1a of who, mixed with the seed */
    for (const char *p = who ? who : ""; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    ch->rng = (cfg->chaos_seed * 0x9E3779B97F4A7C15ull) ^ h;
    if (!ch->rng) ch->rng = 0x9E3779B97F4A7C15ull;
    bool on = ch->drop_ppm || ch->delay_ppm || ch->dup_ppm;
    if (on)
        FX_WARN("test chaos on: control frames dropped %u ppm, delayed %u ppm (up to %u ms), duplicated %u ppm, seed %llu",
                ch->drop_ppm, ch->delay_ppm, ch->delay_ms, ch->dup_ppm, (unsigned long long)cfg->chaos_seed);
    return on;
}

FX_INTERNAL int fx_chaos_pick(fx_chaos_t *ch, const fx_frame_header_t *h, uint32_t *delay_ms_p)
{
    uint64_t x = chaos_next(ch);
    uint32_t u = (uint32_t)((x >> 32) % 1000000u);
    int k = u < ch->drop_ppm                                 ? FX_CHAOS_DROP
            : u < ch->drop_ppm + ch->delay_ppm               ? FX_CHAOS_DELAY
            : u < ch->drop_ppm + ch->delay_ppm + ch->dup_ppm ? FX_CHAOS_DUP
                                                             : FX_CHAOS_PASS;
    if (k == FX_CHAOS_PASS || !(chaos_allowed(h) & (1u << k))) return FX_CHAOS_PASS;
    if (k == FX_CHAOS_DROP) ch->dropped++;
    else if (k == FX_CHAOS_DUP) ch->duplicated++;
    else {
        ch->delayed++;
        *delay_ms_p = 1 + (uint32_t)(x % ch->delay_ms);
    }
    return k;
}
