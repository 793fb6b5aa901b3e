/* cli_simulate.c — the offline policy simulator (see cli_simulate.h). */
#include "cli_simulate.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "evict_policy.h"

typedef struct ps_block {
    fx_evp_node_t node;
    uint64_t key;
} ps_block;

typedef struct ps_sim {
    fx_evp_t p;
    ps_block *blocks; /* capacity of them */
    uint32_t *free_list, n_free;
    uint64_t *mkeys;  /* map: key -> block index + 1 (0: empty) */
    uint32_t *mvals;
    size_t mask;
    uint64_t *ghost;
} ps_sim;

static uint64_t ps_mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

static size_t ps_find(const ps_sim *s, uint64_t k)
{
    for (size_t i = ps_mix(k) & s->mask;; i = (i + 1) & s->mask) {
        if (!s->mvals[i]) return SIZE_MAX;
        if (s->mkeys[i] == k) return i;
    }
}

static void ps_put(ps_sim *s, uint64_t k, uint32_t v)
{
    size_t i = ps_mix(k) & s->mask;
    while (s->mvals[i]) i = (i + 1) & s->mask;
    s->mkeys[i] = k;
    s->mvals[i] = v;
}

static void ps_del_at(ps_sim *s, size_t i)
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

int fx_cli_psim_known(const char *policy)
{
    return !policy || strcmp(policy, "lru") == 0 || strcmp(policy, "s3fifo") == 0 || strcmp(policy, "slru") == 0;
}

static void ps_free(ps_sim *s)
{
    free(s->blocks);
    free(s->free_list);
    free(s->mkeys);
    free(s->mvals);
    free(s->ghost);
}

static int ps_init(ps_sim *s, uint64_t capacity, int kind)
{
    memset(s, 0, sizeof *s);
    size_t buckets = 1024;
    while (buckets < capacity * 2) buckets *= 2;
    s->mask = buckets - 1;
    s->blocks = calloc(capacity, sizeof *s->blocks);
    s->free_list = malloc(capacity * sizeof *s->free_list);
    s->mkeys = malloc(buckets * sizeof *s->mkeys);
    s->mvals = calloc(buckets, sizeof *s->mvals);
    uint32_t ghost_n = (uint32_t)capacity; /* as many ghosts as the capacity holds blocks */
    s->ghost = calloc(fx_evp_ghost_words(ghost_n) + 1, sizeof *s->ghost);
    if (!s->blocks || !s->free_list || !s->mkeys || !s->mvals || !s->ghost) return -1;
    for (uint32_t i = 0; i < capacity; i++) s->free_list[i] = (uint32_t)(capacity - 1 - i);
    s->n_free = (uint32_t)capacity;
    fx_evp_init(&s->p, kind, capacity, s->ghost, ghost_n);
    return 0;
}

/* one block touched or inserted; evicts first when full */
static void ps_access(ps_sim *s, uint64_t k, fx_cli_psim_result *r, int cold)
{
    size_t at = ps_find(s, k);
    if (at != SIZE_MAX) {
        fx_evp_touch(&s->p, &s->blocks[s->mvals[at] - 1].node);
        return;
    }
    if (!s->n_free) {
        fx_evp_node_t *v = fx_evp_victim(&s->p);
        ps_block *b = (ps_block *)v; /* node is the first member */
        ps_del_at(s, ps_find(s, b->key));
        fx_evp_evicted(&s->p, v);
        s->free_list[s->n_free++] = (uint32_t)(b - s->blocks);
        r->evictions++;
    }
    uint32_t bi = s->free_list[--s->n_free];
    ps_block *b = &s->blocks[bi];
    b->key = k;
    if (cold) fx_evp_insert_cold(&s->p, &b->node, 1, k);
    else fx_evp_insert(&s->p, &b->node, 1, k);
    ps_put(s, k, bi + 1);
    r->inserted++;
}

int fx_cli_psim_run(const fx_cli_trace *t, size_t n_requests, uint64_t capacity, const char *policy,
                    fx_cli_psim_result *out)
{
    if (!fx_cli_psim_known(policy) || capacity == 0 || capacity >= UINT32_MAX / 4) return -1;
    int kind = !policy ? FX_EVICT_LRU : strcmp(policy, "s3fifo") == 0 ? FX_EVICT_S3FIFO
               : strcmp(policy, "slru") == 0 ? FX_EVICT_SLRU : FX_EVICT_LRU;
    size_t n = n_requests && n_requests < t->n_reqs ? n_requests : t->n_reqs;
    ps_sim s;
    uint64_t *h = malloc((t->max_blocks ? t->max_blocks : 1) * sizeof *h);
    int rc = -1;
    memset(out, 0, sizeof *out);
    if (!h || ps_init(&s, capacity, kind)) goto done;
    for (size_t i = 0; i < n; i++) {
        const fx_cli_trace_req *q = &t->reqs[i];
        fx_cli_chain_hashes(q->blocks, q->n_blocks, h);
        size_t hit = 0;
        while (hit < q->n_blocks && ps_find(&s, h[hit]) != SIZE_MAX) hit++;
        out->requests++;
        out->lookups += q->n_blocks;
        out->prefix_hits += hit;
        /* beyond lru the owner admits the last group of a put batch of two or more cold (a
         * chain's tail goes first: a request's last page is partial and almost never read
         * again); the batch is the missed suffix */
        for (size_t b = 0; b < q->n_blocks; b++)
            ps_access(&s, h[b], out, kind != FX_EVICT_LRU && b + 1 == q->n_blocks && q->n_blocks - hit >= 2);
    }
    out->ratio = out->lookups ? (double)out->prefix_hits / (double)out->lookups : 0;
    rc = 0;
done:
    free(h);
    ps_free(&s);
    return rc;
}
