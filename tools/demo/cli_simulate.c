/* cli_simulate.c — the offline policy simulator (see cli_simulate.h). */
#include "cli_simulate.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "evict_policy.h"
#include "freq_sketch.h"

typedef struct ps_block {
    fx_evp_node_t node;
    uint64_t key;
    uint32_t depth; /* its position in its request's chain (the trace's block index) */
} ps_block;

typedef struct ps_map { /* key -> index + 1 (0: empty); open addressing, no tombstones */
    uint64_t *mkeys;
    uint32_t *mvals;
    size_t mask;
} ps_map;

/* The CPU tier (issue 38): a FIFO of the values written back, exclusive (a hit moves the
 * value back to the hot tier); admission by the owner's writeback_admission rule. */
typedef struct ps_cpu {
    uint64_t cap, head, n; /* ring of keys */
    uint64_t *ring;
    uint8_t *live;         /* ring slot still holds its key (not promoted) */
    ps_map map;            /* key -> ring slot + 1 */
    int admission;         /* -1: no CPU tier; FX_WB_ADMIT_* */
    uint32_t max_depth;    /* > 0: and only blocks at chain positions below it (issue 38) */
    fx_freq_sketch_t seen;
} ps_cpu;

typedef struct ps_sim {
    fx_evp_t p;
    ps_block *blocks; /* capacity of them */
    uint32_t *free_list, n_free;
    ps_map map;       /* key -> block index + 1 */
    uint64_t *ghost;
    ps_cpu cpu;
} ps_sim;

static uint64_t ps_mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

static size_t ps_find(const ps_map *s, uint64_t k)
{
    for (size_t i = ps_mix(k) & s->mask;; i = (i + 1) & s->mask) {
        if (!s->mvals[i]) return SIZE_MAX;
        if (s->mkeys[i] == k) return i;
    }
}

static void ps_put(ps_map *s, uint64_t k, uint32_t v)
{
    size_t i = ps_mix(k) & s->mask;
    while (s->mvals[i]) i = (i + 1) & s->mask;
    s->mkeys[i] = k;
    s->mvals[i] = v;
}

static void ps_del_at(ps_map *s, size_t i)
{
    for (size_t j = (i + 1) & s->mask; s->mvals[j]; j = (j + 1) & s->mask) {
        size_t h = ps_mix(s->mkeys[j]) & s->mask;
        if (i <= j ? (h > i && h <= j) : (h > i || h <= j)) continue;
        s->mkeys[i] = s->mkeys[j];
        s->mvals[i] = s->mvals[j];
        i = j;
    }
    s->mvals[i] = 0;
}

static int ps_map_init(ps_map *m, uint64_t capacity)
{
    size_t buckets = 1024;
    while (buckets < capacity * 2) buckets *= 2;
    m->mask = buckets - 1;
    m->mkeys = malloc(buckets * sizeof *m->mkeys);
    m->mvals = calloc(buckets, sizeof *m->mvals);
    return m->mkeys && m->mvals ? 0 : -1;
}

static void ps_map_free(ps_map *m)
{
    free(m->mkeys);
    free(m->mvals);
}

int fx_cli_psim_known(const char *policy)
{
    return !policy || strcmp(policy, "lru") == 0 || strcmp(policy, "s3fifo") == 0 || strcmp(policy, "slru") == 0;
}

static void ps_free(ps_sim *s)
{
    free(s->blocks);
    free(s->free_list);
    ps_map_free(&s->map);
    free(s->ghost);
    free(s->cpu.ring);
    free(s->cpu.live);
    ps_map_free(&s->cpu.map);
    free(s->cpu.seen.c);
}

static int ps_init(ps_sim *s, uint64_t capacity, int kind, uint64_t cpu_capacity, int admission)
{
    memset(s, 0, sizeof *s);
    s->cpu.admission = cpu_capacity ? admission : -1;
    s->blocks = calloc(capacity, sizeof *s->blocks);
    s->free_list = malloc(capacity * sizeof *s->free_list);
    uint32_t ghost_n = (uint32_t)capacity; /* as many ghosts as the capacity holds blocks */
    s->ghost = calloc(fx_evp_ghost_words(ghost_n) + 1, sizeof *s->ghost);
    if (ps_map_init(&s->map, capacity) || !s->blocks || !s->free_list || !s->ghost) return -1;
    if (cpu_capacity) {
        s->cpu.cap = cpu_capacity;
        s->cpu.ring = calloc(cpu_capacity, sizeof *s->cpu.ring);
        s->cpu.live = calloc(cpu_capacity, 1);
        if (ps_map_init(&s->cpu.map, cpu_capacity) || !s->cpu.ring || !s->cpu.live) return -1;
        if (admission == FX_WB_ADMIT_SECOND_TOUCH) {
            uint8_t *counters = malloc(fx_freq_sketch_bytes(capacity));
            if (!counters) return -1;
            fx_freq_sketch_init(&s->cpu.seen, capacity, counters);
        }
    }
    for (uint32_t i = 0; i < capacity; i++) s->free_list[i] = (uint32_t)(capacity - 1 - i);
    s->n_free = (uint32_t)capacity;
    fx_evp_init(&s->p, kind, capacity, s->ghost, ghost_n);
    return 0;
}

/* A victim leaves the hot tier: written back to the CPU tier when admitted. */
static void ps_writeback(ps_sim *s, uint64_t k, fx_cli_psim_result *r, uint32_t depth)
{
    ps_cpu *c = &s->cpu;
    if (c->admission < 0) return;
    if (c->max_depth && depth >= c->max_depth) return; /* prefix depth: only a chain's first blocks */
    if (c->admission == FX_WB_ADMIT_SECOND_TOUCH && fx_freq_sketch_estimate(&c->seen, k) < 2) return;
    r->copies++;
    if (c->n == c->cap) { /* the oldest copy goes */
        if (c->live[c->head]) ps_del_at(&c->map, ps_find(&c->map, c->ring[c->head]));
        c->head = (c->head + 1) % c->cap;
        c->n--;
    }
    uint64_t at = (c->head + c->n++) % c->cap;
    c->ring[at] = k;
    c->live[at] = 1;
    ps_put(&c->map, k, (uint32_t)at + 1);
}

static bool ps_present(const ps_sim *s, uint64_t k)
{
    return ps_find(&s->map, k) != SIZE_MAX || (s->cpu.admission >= 0 && ps_find(&s->cpu.map, k) != SIZE_MAX);
}

/* one block touched or inserted; evicts first when full */
static void ps_access(ps_sim *s, uint64_t k, fx_cli_psim_result *r, int cold, uint32_t depth)
{
    size_t at = ps_find(&s->map, k);
    if (at != SIZE_MAX) {
        fx_evp_touch(&s->p, &s->blocks[s->map.mvals[at] - 1].node);
        fx_freq_sketch_add(&s->cpu.seen, k);
        return;
    }
    if (s->cpu.admission >= 0 && (at = ps_find(&s->cpu.map, k)) != SIZE_MAX) { /* promoted: exclusive */
        s->cpu.live[s->cpu.map.mvals[at] - 1] = 0;
        ps_del_at(&s->cpu.map, at);
        r->cpu_hits++;
    }
    if (!s->n_free) {
        fx_evp_node_t *v = fx_evp_victim(&s->p);
        ps_block *b = (ps_block *)v; /* node is the first member */
        ps_del_at(&s->map, ps_find(&s->map, b->key));
        fx_evp_evicted(&s->p, v);
        s->free_list[s->n_free++] = (uint32_t)(b - s->blocks);
        r->evictions++;
        ps_writeback(s, b->key, r, b->depth);
    }
    uint32_t bi = s->free_list[--s->n_free];
    ps_block *b = &s->blocks[bi];
    b->key = k;
    b->depth = depth;
    if (cold) fx_evp_insert_cold(&s->p, &b->node, 1, k);
    else fx_evp_insert(&s->p, &b->node, 1, k);
    ps_put(&s->map, k, bi + 1);
    fx_freq_sketch_add(&s->cpu.seen, k);
    r->inserted++;
}

/* The requests reqs[0..n) of t in that order (reqs NULL: requests 0..n). */
static int ps_run(const fx_cli_trace *t, const size_t *reqs, size_t n, uint64_t capacity, const char *policy,
                  uint64_t cpu_capacity, int admission, uint32_t max_depth, fx_cli_psim_result *out)
{
    if (!fx_cli_psim_known(policy) || capacity == 0 || capacity >= UINT32_MAX / 4) return -1;
    int kind = !policy ? FX_EVICT_LRU : strcmp(policy, "s3fifo") == 0 ? FX_EVICT_S3FIFO
               : strcmp(policy, "slru") == 0 ? FX_EVICT_SLRU : FX_EVICT_LRU;
    ps_sim s;
    memset(&s, 0, sizeof s); /* ps_free is safe when ps_init did not run */
    uint64_t *h = malloc((t->max_blocks ? t->max_blocks : 1) * sizeof *h);
    int rc = -1;
    memset(out, 0, sizeof *out);
    if (!h || ps_init(&s, capacity, kind, cpu_capacity, admission)) goto done;
    s.cpu.max_depth = max_depth;
    for (size_t i = 0; i < n; i++) {
        if (reqs && reqs[i] >= t->n_reqs) goto done;
        const fx_cli_trace_req *q = &t->reqs[reqs ? reqs[i] : i];
        fx_cli_chain_hashes(q->blocks, q->n_blocks, h);
        size_t hit = 0;
        while (hit < q->n_blocks && ps_present(&s, h[hit])) hit++;
        out->requests++;
        out->lookups += q->n_blocks;
        out->prefix_hits += hit;
        /* beyond lru the owner admits the last group of a put batch of two or more cold (a
         * chain's tail goes first: a request's last page is partial and almost never read
         * again); the batch is the missed suffix */
        for (size_t b = 0; b < q->n_blocks; b++)
            ps_access(&s, h[b], out, kind != FX_EVICT_LRU && b + 1 == q->n_blocks && q->n_blocks - hit >= 2, (uint32_t)b);
    }
    out->ratio = out->lookups ? (double)out->prefix_hits / (double)out->lookups : 0;
    rc = 0;
done:
    free(h);
    ps_free(&s);
    return rc;
}

int fx_cli_psim_run(const fx_cli_trace *t, size_t n_requests, uint64_t capacity, const char *policy,
                    uint64_t cpu_capacity, int admission, uint32_t max_depth, fx_cli_psim_result *out)
{
    size_t n = n_requests && n_requests < t->n_reqs ? n_requests : t->n_reqs;
    return ps_run(t, NULL, n, capacity, policy, cpu_capacity, admission, max_depth, out);
}

int fx_cli_psim_run_reqs(const fx_cli_trace *t, const size_t *reqs, size_t n, uint64_t capacity, const char *policy,
                         fx_cli_psim_result *out)
{
    return ps_run(t, reqs, n, capacity, policy, 0, 0, 0, out);
}
