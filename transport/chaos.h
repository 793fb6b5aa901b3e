/* chaos.h — test-only control-message chaos (issue 17): each control frame a connection
 * receives may be dropped, delayed or duplicated with configured probabilities (the "test"
 * section's drop_ppm, delay_ppm + delay_ms, dup_ppm, seed), drawn from a seeded generator
 * so one seed gives one fault stream. A role owns one fx_chaos_t and hands it to the
 * connections it wants faulted (fx_conn_set_chaos); a connection without one pays one NULL
 * test per frame. Only frames the protocol is built to survive losing, seeing late or
 * twice are touched (fx_chaos_pick says which). Reactor thread only. */
#ifndef FX_CHAOS_H
#define FX_CHAOS_H

#include "config.h"
#include "msg.h"

enum { FX_CHAOS_PASS = 0, FX_CHAOS_DROP = 1, FX_CHAOS_DELAY = 2, FX_CHAOS_DUP = 3 };

typedef struct fx_chaos {
    uint32_t drop_ppm, delay_ppm, delay_ms, dup_ppm;
    uint64_t rng;                          /* xorshift64* state, never 0 */
    uint64_t dropped, delayed, duplicated; /* faults injected (the role's metrics read them) */
} fx_chaos_t;

/* Fills ch from cfg's "test" chaos fields; returns true when any rate is > 0 (then hand ch
 * to the connections), false when chaos is off. The seed is test.seed, or one derived from
 * node_id when 0; who (the node id) is mixed in so owners of one seed differ. */
FX_INTERNAL bool fx_chaos_init(fx_chaos_t *ch, const fx_config_t *cfg, const char *who);
/* The fault for frame h (FX_CHAOS_*), counted; *delay_ms_p set for FX_CHAOS_DELAY. */
FX_INTERNAL int fx_chaos_pick(fx_chaos_t *ch, const fx_frame_header_t *h, uint32_t *delay_ms_p);

#endif
