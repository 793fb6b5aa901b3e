/* prefault.c — faults the owner's whole segment in (transport/prefault.h): first-touch
 * faults of shared memory otherwise land on the hot path of every first put and remote
 * fetch into a fresh slot (they were the largest cost of remote restores in profiles). On a
 * thread of its own, while the owner registers and serves: an 8 GiB segment takes 10-20 s,
 * which must not count against start_timeout_ms nor delay a stop. Best effort.
 * segment_prefaulting (metrics) tells an embedder, such as `fluxon demo` before its replay,
 * when the thread is done. */
#include "owner_prefault.h"

FX_INTERNAL void fx_oprefault_start(fx_owner_t *o)
{
    if (o->cfg.numa_node >= 0) return; /* fx_segment_create placed and touched every page */
    o->prefault.touch = o->cfg.segment_touch;
    fx_prefault_start(&o->prefault, fx_segment_base(o->seg), fx_segment_len(o->seg),
                      fx_segment_huge(o->seg) ? FX_SEGMENT_HUGE_BYTES : FX_SEGMENT_PAGE_BYTES, fx_segment_fd(o->seg),
                      "owner", o->cfg.node_id);
}

FX_INTERNAL void fx_oprefault_stop(fx_owner_t *o) { fx_prefault_stop(&o->prefault); }

FX_INTERNAL void fx_oprefault_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    m->segment_prefaulting = fx_prefault_running(&o->prefault);
}
