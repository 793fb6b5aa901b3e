/* elsewhere.c — the owner's record of the keys it copied to other owners (issue 38,
 * owner_elsewhere.h). With CPU (remote_cache) owners alive, an owner is no longer alone, so
 * every local miss cost a LOOKUP round trip to the master — in the trace replay with one
 * GPU owner, a LOOKUP on nearly every request, for the ~7 % of lookups a CPU owner serves.
 * But when this owner is the only one that takes puts and found no copies on remote_cache
 * owners when it joined (fx_olink_copies_mine), a key can be on one only if this owner
 * copied it there (a write-back or an eager replica task). So every copy is recorded, before
 * its APPEND_START, in a Bloom filter of key hashes; a miss of a key the filter never saw is
 * held nowhere and needs no LOOKUP. A false positive costs a LOOKUP, never a hit.
 *
 * The filter is made at the first copy (an owner that never copies pays nothing), sized at
 * 16 bits a key for 8 x the segment's 4 KiB pages (at most 32 MiB), and stops being used
 * when it holds that many keys (every miss asks the master again; logged once). A placed or
 * write-through put (copies this record cannot name) also stops it.
 *
 * The filter cannot forget a key, but the copies go: a CPU owner drops its oldest for new
 * ones (in the trace replay, 35,000 of 44,000 copies), and a miss of such a key used to cost
 * a LOOKUP that found nothing (about 1,750 keys in 80 gets a replay, 140-240 us each on the
 * 2-vCPU VM: a get waits for it). So the keys whose copy the master dropped and told this
 * owner of (FORGET, wbmap.c) are kept too, by hash, until a copy of the key starts again
 * (fx_oelse_copied) or is recorded (fx_oelse_recorded): a miss of one is held nowhere
 * either. The set holds the newest ODROP_MAX; an older one, forgotten, costs a LOOKUP as
 * before. It goes whole when the record of copies does (another master, a lost link:
 * FORGETs may have been lost; a CPU owner may re-publish a copy the old master dropped).
 * Wrong only where a copy exists that this owner did not learn of (a hash collision, a copy
 * whose APPEND_DONE was accepted while its FORGETs raced it): that is a miss, a lost hit,
 * never a wrong byte. */
#include "bloom.h"
#include "log.h"
#include "owner_elsewhere.h"
#include "owner_link.h"
#include "u64map.h"

#define ODROP_MAX 262144u /* keys whose copy was dropped, kept (16 B each in the map, 8 in the ring) */

typedef struct oelse {
    fx_bloom_t f;
    uint64_t limit; /* keys the filter takes before it is given up */
    bool made, off;
    uint64_t misses_settled; /* misses answered without a LOOKUP thanks to the record */
    /* keys whose copy the master dropped: hash (0 -> 1) -> its number in the FIFO + 1 */
    fx_u64map_t dropped;
    uint64_t *ring;       /* ODROP_MAX hashes, oldest overwritten */
    uint64_t dropped_seq; /* keys entered so far (the next one's number) */
    uint64_t misses_dropped; /* of misses_settled: keys whose copy was dropped */
} oelse_t;

static uint64_t odrop_key(uint64_t khash) { return khash ? khash : 1; }

FX_INTERNAL int fx_oelse_init(fx_owner_t *o)
{
    o->elsewhere = fx_calloc(1, sizeof *o->elsewhere);
    return o->elsewhere ? FLUXON_OK : FLUXON_ERR_NOMEM;
}

FX_INTERNAL void fx_oelse_fini(fx_owner_t *o)
{
    if (!o->elsewhere) return;
    fx_u64map_free(&o->elsewhere->dropped);
    fx_free(o->elsewhere->ring);
    fx_free(o->elsewhere->f.bits);
    fx_free(o->elsewhere);
    o->elsewhere = NULL;
}

FX_INTERNAL void fx_oelse_off(fx_owner_t *o, const char *why)
{
    oelse_t *e = o->elsewhere;
    if (!e || e->off) return;
    e->off = true;
    /* it matters (info) only where misses were being settled here: remote_cache owners alive */
    fx_log(fx_olink_copies_mine(o) && fx_olink_owners_alive(o) > 1 ? FX_LOG_INFO : FX_LOG_DEBUG,
           "copies of this owner's keys elsewhere are no longer tracked (%s): every local miss asks the master", why);
}

FX_INTERNAL void fx_oelse_copied(fx_owner_t *o, uint64_t khash)
{
    oelse_t *e = o->elsewhere;
    if (!e || e->off) return;
    if (!e->made) {
        uint64_t keys = FX_MAX(o->cfg.segment_bytes / 4096, 1u) * 8;
        uint64_t bits = fx_bloom_bits_for(keys);
        uint64_t *words = fx_malloc_aligned(64, bits / 8); /* a block a cache line (bloom.h) */
        if (!words) {
            fx_oelse_off(o, "out of memory for the record");
            return;
        }
        fx_bloom_init(&e->f, words, bits);
        e->limit = bits / 16;
        e->made = true;
    }
    if (e->f.added >= e->limit) {
        fx_oelse_off(o, "the record is full");
        return;
    }
    fx_bloom_add(&e->f, khash);
    if (fx_u64map_count(&e->dropped)) (void)fx_u64map_del(&e->dropped, odrop_key(khash), NULL);
}

FX_INTERNAL void fx_oelse_recorded(fx_owner_t *o, uint64_t khash)
{
    oelse_t *e = o->elsewhere;
    if (e && fx_u64map_count(&e->dropped)) (void)fx_u64map_del(&e->dropped, odrop_key(khash), NULL);
}

FX_INTERNAL void fx_oelse_dropped(fx_owner_t *o, uint64_t khash)
{
    oelse_t *e = o->elsewhere;
    if (!e || e->off || !e->made) return; /* no filter: such a miss is settled already */
    if (!e->ring && !(e->ring = fx_calloc(ODROP_MAX, sizeof *e->ring))) return; /* a LOOKUP, as before */
    uint64_t seq = e->dropped_seq++, k = odrop_key(khash), *slot = &e->ring[seq % ODROP_MAX];
    /* the oldest goes, unless its key entered again since (a later number in the map) */
    if (seq >= ODROP_MAX && fx_u64map_get(&e->dropped, *slot) == (void *)(uintptr_t)(seq - ODROP_MAX + 1))
        (void)fx_u64map_del(&e->dropped, *slot, NULL);
    *slot = k;
    if (fx_u64map_put(&e->dropped, k, (void *)(uintptr_t)(seq + 1), NULL) != FLUXON_OK) *slot = 0;
}

FX_INTERNAL void fx_oelse_prefetch(fx_owner_t *o, uint64_t khash)
{
    oelse_t *e = o->elsewhere;
    if (e && fx_u64map_count(&e->dropped)) fx_u64map_prefetch(&e->dropped, odrop_key(khash));
}

FX_INTERNAL void fx_oelse_dropped_clear(fx_owner_t *o)
{
    oelse_t *e = o->elsewhere;
    if (!e || !e->ring) return;
    fx_u64map_free(&e->dropped);
    memset(e->ring, 0, ODROP_MAX * sizeof *e->ring);
    e->dropped_seq = 0;
}

FX_INTERNAL bool fx_oelse_nowhere(fx_owner_t *o, uint64_t khash)
{
    oelse_t *e = o->elsewhere;
    if (!e || e->off || !fx_olink_copies_mine(o)) return false;
    if (e->made && fx_bloom_may_contain(&e->f, khash)) {
        if (!fx_u64map_count(&e->dropped) || !fx_u64map_get(&e->dropped, odrop_key(khash))) return false;
        e->misses_dropped++;
    }
    e->misses_settled++;
    return true;
}

FX_INTERNAL void fx_oelse_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    oelse_t *e = o->elsewhere;
    if (!e) return;
    m->copies_recorded = e->made ? e->f.added : 0;
    m->misses_settled_locally = e->misses_settled;
    m->misses_settled_dropped = e->misses_dropped;
    m->copies_dropped_known = fx_u64map_count(&e->dropped);
    m->copies_record_on = !e->off && fx_olink_copies_mine(o);
}
