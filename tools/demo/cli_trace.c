/* cli_trace.c — the replay's trace reader, page keys, deterministic values and reference
 * prefix-hit simulators (see cli_trace.h). CLI-side: cJSON and xxhash only, no library
 * internals; static helpers are tr_* so the file can share a translation unit. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli_trace.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "fluxon.h"
#include "value_oracle.h"

/* ---------------------------------------------------------------------------------
 * Trace reader
 * ------------------------------------------------------------------------------- */

static void tr_err(char *err, size_t errcap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tr_err(char *err, size_t errcap, const char *fmt, ...)
{
    if (!err || errcap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errcap, fmt, ap);
    va_end(ap);
}

/* An integral JSON number in [0, max]. */
static int tr_get_uint(const cJSON *obj, const char *name, double max, uint64_t *out,
                       const char **why)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v) {
        *why = "is missing";
        return -1;
    }
    if (!cJSON_IsNumber(v)) {
        *why = "is not a number";
        return -1;
    }
    double d = v->valuedouble;
    if (!(d >= 0) || d > max) {
        *why = "is out of range";
        return -1;
    }
    if (d != floor(d)) {
        *why = "is not an integer";
        return -1;
    }
    *out = (uint64_t)d;
    return 0;
}

/* Growable arrays of the trace under construction. */
struct tr_build {
    fx_cli_trace_req *reqs;
    size_t n_reqs, cap_reqs;
    uint64_t *pool;
    size_t n_pool, cap_pool;
};

static int tr_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return -1;
    *p = np;
    *cap = nc;
    return 0;
}

/* Parses one non-blank line; returns 0, -1 malformed (why set), -2 out of memory. */
static int tr_parse_line(const char *line, size_t lineno, struct tr_build *b, const char **why,
                         char *whybuf, size_t whycap)
{
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithOpts(line, &end, 1);
    if (!doc) {
        snprintf(whybuf, whycap, "invalid JSON near byte %td",
                 end && end >= line ? end - line + 1 : (ptrdiff_t)0);
        *why = whybuf;
        return -1;
    }
    int rc = -1;
    uint64_t ts = 0, in = 0, out = 0;
    const char *w = NULL;
    if (!cJSON_IsObject(doc)) {
        *why = "not a JSON object";
        goto done;
    }
    const cJSON *tsv = cJSON_GetObjectItemCaseSensitive(doc, "timestamp");
    if (!tsv || !cJSON_IsNumber(tsv) || !(tsv->valuedouble >= 0) || tsv->valuedouble > 9.0e15) {
        snprintf(whybuf, whycap, "\"timestamp\" %s",
                 !tsv ? "is missing" : !cJSON_IsNumber(tsv) ? "is not a number" : "is out of range");
        *why = whybuf;
        goto done;
    }
    ts = (uint64_t)tsv->valuedouble;
    const char *field = "input_length";
    if (tr_get_uint(doc, field, 4294967295.0, &in, &w) == 0) {
        field = "output_length";
        tr_get_uint(doc, field, 4294967295.0, &out, &w);
    }
    if (w) {
        snprintf(whybuf, whycap, "\"%s\" %s", field, w);
        *why = whybuf;
        goto done;
    }
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(doc, "hash_ids");
    if (!ids || !cJSON_IsArray(ids)) {
        *why = ids ? "\"hash_ids\" is not an array" : "\"hash_ids\" is missing";
        goto done;
    }
    int n = cJSON_GetArraySize(ids);
    if (n > FLUXON_MAX_BATCH_KEYS) { /* a request's get_start is one batch of its pages' keys */
        snprintf(whybuf, whycap, "\"hash_ids\" has %d entries, more than one batch takes (FLUXON_MAX_BATCH_KEYS, %d)",
                 n, FLUXON_MAX_BATCH_KEYS);
        *why = whybuf;
        goto done;
    }
    if (tr_grow((void **)&b->pool, &b->cap_pool, b->n_pool + (size_t)n, sizeof *b->pool) ||
        tr_grow((void **)&b->reqs, &b->cap_reqs, b->n_reqs + 1, sizeof *b->reqs)) {
        rc = -2;
        goto done;
    }
    size_t base = b->n_pool, k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, ids)
    {
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0) || it->valuedouble > 9007199254740992.0 ||
            it->valuedouble != floor(it->valuedouble)) {
            snprintf(whybuf, whycap, "\"hash_ids\"[%zu] is not an integer in 0..2^53", k);
            *why = whybuf;
            goto done;
        }
        b->pool[base + k++] = (uint64_t)it->valuedouble;
    }
    b->n_pool += k;
    /* blocks is fixed up to point into the final pool once it stops moving */
    b->reqs[b->n_reqs++] = (fx_cli_trace_req){.timestamp_ms = ts, .input_length = (uint32_t)in,
                                              .output_length = (uint32_t)out, .n_blocks = (uint32_t)k,
                                              .blocks = (const uint64_t *)(uintptr_t)base, .line = lineno};
    rc = 0;
done:
    cJSON_Delete(doc);
    return rc;
}

int fx_cli_trace_load(const char *path, size_t max_requests, int skip_bad_lines,
                      fx_cli_trace *t, char *err, size_t errcap)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f) {
        tr_err(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct tr_build b = {0};
    char *line = NULL, whybuf[128];
    size_t linecap = 0, lineno = 0, skipped = 0, first_skipped = 0;
    ssize_t len;
    int rc = 0;
    while ((max_requests == 0 || b.n_reqs < max_requests) && (len = getline(&line, &linecap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if ((size_t)len != strlen(line)) { /* first: a NUL at the start is no blank line */
            if (skip_bad_lines) {
                if (!skipped++) first_skipped = lineno;
                continue;
            }
            tr_err(err, errcap, "%s:%zu: malformed line: contains a NUL byte", path, lineno);
            rc = -1;
            break;
        }
        size_t sp = strspn(line, " \t");
        if (line[sp] == 0) continue; /* blank line */
        const char *why = "malformed";
        int prc = tr_parse_line(line, lineno, &b, &why, whybuf, sizeof whybuf);
        if (prc == -2) {
            tr_err(err, errcap, "%s:%zu: out of memory", path, lineno);
            rc = -1;
            break;
        }
        if (prc == -1) {
            if (skip_bad_lines) {
                if (!skipped++) first_skipped = lineno;
                continue;
            }
            tr_err(err, errcap, "%s:%zu: malformed line: %s", path, lineno, why);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) { /* e.g. a directory: EISDIR */
        tr_err(err, errcap, "%s: read error after line %zu: %s", path, lineno, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    if (rc != 0) {
        free(b.reqs);
        free(b.pool);
        return -1;
    }
    size_t maxb = 0;
    for (size_t i = 0; i < b.n_reqs; i++) {
        /* no pool when no request has a block: never offset a NULL pointer (UB) */
        b.reqs[i].blocks = b.pool ? b.pool + (size_t)(uintptr_t)b.reqs[i].blocks : NULL;
        if (b.reqs[i].n_blocks > maxb) maxb = b.reqs[i].n_blocks;
    }
    t->reqs = b.reqs;
    t->n_reqs = b.n_reqs;
    t->pool = b.pool;
    t->n_blocks = b.n_pool;
    t->max_blocks = maxb;
    t->skipped_lines = skipped;
    t->first_skipped_line = first_skipped;
    return 0;
}

void fx_cli_trace_free(fx_cli_trace *t)
{
    if (!t) return;
    free(t->reqs);
    free(t->pool);
    memset(t, 0, sizeof *t);
}

/* ---------------------------------------------------------------------------------
 * Page keys
 * ------------------------------------------------------------------------------- */

static void tr_put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

uint64_t fx_cli_page_hash(uint64_t parent, uint64_t block)
{
    unsigned char buf[16];
    tr_put_le64(buf, parent);
    tr_put_le64(buf + 8, block);
    return XXH3_64bits_withSeed(buf, sizeof buf, 0);
}

void fx_cli_chain_hashes(const uint64_t *blocks, size_t n, uint64_t *out)
{
    uint64_t h = FX_CLI_KEY_ROOT;
    for (size_t i = 0; i < n; i++) out[i] = h = fx_cli_page_hash(h, blocks[i]);
}

/* Decimal digits of v at p; their count. */
static size_t tr_put_uint(char *p, unsigned v)
{
    char d[10];
    size_t n = 0;
    do d[n++] = (char)('0' + v % 10); while ((v /= 10) && n < sizeof d);
    for (size_t i = 0; i < n; i++) p[i] = d[n - 1 - i];
    return n;
}

/* "%s:%016llx_%u_%u" without printf: the demo's workers build every key of every request
 * (snprintf was most of their time outside Fluxon calls and the values, issue 18). */
int fx_cli_page_key(char *buf, size_t cap, const char *key_prefix, uint64_t page_hash,
                    unsigned rank, unsigned tp)
{
    if (!buf || !key_prefix || tp == 0 || rank >= tp) return -1;
    size_t pl = strlen(key_prefix);
    if (cap < pl + 1 + 16 + 2 * 11 + 1) { /* room for the longest key; else the exact check */
        int n = snprintf(buf, cap, "%s:%016llx_%u_%u", key_prefix, (unsigned long long)page_hash, rank, tp);
        return n < 0 || (size_t)n >= cap ? -1 : n;
    }
    char *p = buf;
    memcpy(p, key_prefix, pl);
    p += pl;
    *p++ = ':';
    for (int i = 15; i >= 0; i--) *p++ = "0123456789abcdef"[(page_hash >> (4 * i)) & 15];
    *p++ = '_';
    p += tr_put_uint(p, rank);
    *p++ = '_';
    p += tr_put_uint(p, tp);
    *p = 0;
    return (int)(p - buf);
}

/* ---------------------------------------------------------------------------------
 * Deterministic values
 * ------------------------------------------------------------------------------- */

void fx_cli_value_fill(void *dst, uint64_t len, const char *key, size_t key_len)
{
    unsigned char *p = dst;
    uint64_t seed = XXH3_64bits(key, key_len), n = len / 8;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t w = fx_value_word(seed, j);
        memcpy(p + 8 * j, &w, 8);
    }
    if (len % 8) {
        uint64_t w = fx_value_word(seed, n);
        memcpy(p + 8 * n, &w, len % 8);
    }
}

int64_t fx_cli_value_check(const void *src, uint64_t len, const char *key, size_t key_len)
{
    const unsigned char *p = src;
    uint64_t seed = XXH3_64bits(key, key_len), n = len / 8;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t w = fx_value_word(seed, j), got;
        memcpy(&got, p + 8 * j, 8);
        if (got != w) {
            const unsigned char *a = (const unsigned char *)&got, *e = (const unsigned char *)&w;
            for (int k = 0; k < 8; k++)
                if (a[k] != e[k]) return (int64_t)(8 * j + (uint64_t)k);
        }
    }
    if (len % 8) {
        uint64_t w = fx_value_word(seed, n);
        const unsigned char *e = (const unsigned char *)&w;
        for (uint64_t k = 0; k < len % 8; k++)
            if (p[8 * n + k] != e[k]) return (int64_t)(8 * n + k);
    }
    return -1;
}

/* ---------------------------------------------------------------------------------
 * Reference simulators: an open-addressing map (linear probing, backward-shift
 * deletion) from block to an LRU node; nodes form a doubly linked list, head = MRU.
 * ------------------------------------------------------------------------------- */

#define TR_EMPTY UINT32_MAX

struct fx_cli_sim {
    uint64_t capacity;        /* 0 = unlimited */
    uint64_t *keys;           /* map: block per bucket */
    uint32_t *vals;           /* map: node index per bucket, TR_EMPTY = free bucket */
    size_t mask;              /* buckets - 1 */
    size_t used;              /* entries in the map */
    uint64_t *node_key;       /* LRU nodes (capacity > 0 only) */
    uint32_t *prev, *next;
    uint32_t head, tail, n_nodes;
    fx_cli_sim_result r;
};

static inline size_t tr_home(const fx_cli_sim *s, uint64_t k) { return (size_t)fx_value_mix64(k) & s->mask; }

static int tr_map_alloc(fx_cli_sim *s, size_t buckets)
{
    s->keys = malloc(buckets * sizeof *s->keys);
    s->vals = malloc(buckets * sizeof *s->vals);
    if (!s->keys || !s->vals) return -1;
    memset(s->vals, 0xff, buckets * sizeof *s->vals);
    s->mask = buckets - 1;
    s->used = 0;
    return 0;
}

/* bucket of k, or SIZE_MAX when absent */
static size_t tr_map_find(const fx_cli_sim *s, uint64_t k)
{
    for (size_t i = tr_home(s, k);; i = (i + 1) & s->mask) {
        if (s->vals[i] == TR_EMPTY) return SIZE_MAX;
        if (s->keys[i] == k) return i;
    }
}

static void tr_map_put_new(fx_cli_sim *s, uint64_t k, uint32_t v)
{
    size_t i = tr_home(s, k);
    while (s->vals[i] != TR_EMPTY) i = (i + 1) & s->mask;
    s->keys[i] = k;
    s->vals[i] = v;
    s->used++;
}

static int tr_map_grow(fx_cli_sim *s)
{
    uint64_t *ok = s->keys;
    uint32_t *ov = s->vals;
    size_t ob = s->mask + 1;
    if (tr_map_alloc(s, ob * 2)) {
        free(s->keys);
        free(s->vals);
        s->keys = ok;
        s->vals = ov;
        s->mask = ob - 1;
        return -1;
    }
    size_t used = 0;
    for (size_t i = 0; i < ob; i++)
        if (ov[i] != TR_EMPTY) {
            tr_map_put_new(s, ok[i], ov[i]);
            used++;
        }
    s->used = used;
    free(ok);
    free(ov);
    return 0;
}

static void tr_map_del_at(fx_cli_sim *s, size_t i)
{
    size_t j = i;
    for (;;) {
        j = (j + 1) & s->mask;
        if (s->vals[j] == TR_EMPTY) break;
        size_t h = tr_home(s, s->keys[j]);
        /* entry j may move back to i when its home is not in the cyclic range (i, j] */
        int in_range = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!in_range) {
            s->keys[i] = s->keys[j];
            s->vals[i] = s->vals[j];
            i = j;
        }
    }
    s->vals[i] = TR_EMPTY;
    s->used--;
}

static void tr_lru_unlink(fx_cli_sim *s, uint32_t n)
{
    if (s->prev[n] != TR_EMPTY) s->next[s->prev[n]] = s->next[n];
    else s->head = s->next[n];
    if (s->next[n] != TR_EMPTY) s->prev[s->next[n]] = s->prev[n];
    else s->tail = s->prev[n];
}

static void tr_lru_push_front(fx_cli_sim *s, uint32_t n)
{
    s->prev[n] = TR_EMPTY;
    s->next[n] = s->head;
    if (s->head != TR_EMPTY) s->prev[s->head] = n;
    s->head = n;
    if (s->tail == TR_EMPTY) s->tail = n;
}

fx_cli_sim *fx_cli_sim_new(uint64_t capacity)
{
    if (capacity >= TR_EMPTY / 2) return NULL;
    fx_cli_sim *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->capacity = capacity;
    s->head = s->tail = TR_EMPTY;
    size_t buckets = 1024;
    while (capacity && buckets < capacity * 2) buckets *= 2;
    if (tr_map_alloc(s, buckets)) goto fail;
    if (capacity) {
        s->node_key = malloc(capacity * sizeof *s->node_key);
        s->prev = malloc(capacity * sizeof *s->prev);
        s->next = malloc(capacity * sizeof *s->next);
        if (!s->node_key || !s->prev || !s->next) goto fail;
    }
    return s;
fail:
    fx_cli_sim_free(s);
    return NULL;
}

void fx_cli_sim_free(fx_cli_sim *s)
{
    if (!s) return;
    free(s->keys);
    free(s->vals);
    free(s->node_key);
    free(s->prev);
    free(s->next);
    free(s);
}

/* Inserts (or touches) block k at the MRU end; 0 or -1 out of memory. */
static int tr_sim_insert(fx_cli_sim *s, uint64_t k)
{
    size_t i = tr_map_find(s, k);
    if (s->capacity == 0) {
        if (i != SIZE_MAX) return 0;
        if ((s->used + 1) * 2 > s->mask + 1 && tr_map_grow(s)) return -1;
        tr_map_put_new(s, k, 0);
        s->r.inserted++;
        return 0;
    }
    if (i != SIZE_MAX) {
        uint32_t n = s->vals[i];
        tr_lru_unlink(s, n);
        tr_lru_push_front(s, n);
        return 0;
    }
    uint32_t n;
    if (s->n_nodes < s->capacity) {
        n = s->n_nodes++;
    } else { /* evict the least recently used block */
        n = s->tail;
        tr_lru_unlink(s, n);
        tr_map_del_at(s, tr_map_find(s, s->node_key[n]));
    }
    s->node_key[n] = k;
    tr_lru_push_front(s, n);
    tr_map_put_new(s, k, n);
    s->r.inserted++;
    return 0;
}

int64_t fx_cli_sim_request(fx_cli_sim *s, const uint64_t *blocks, size_t n)
{
    size_t hit = 0;
    while (hit < n && tr_map_find(s, blocks[hit]) != SIZE_MAX) hit++;
    s->r.requests++;
    s->r.lookups += n;
    s->r.prefix_hits += hit;
    for (size_t i = 0; i < n; i++)
        if (tr_sim_insert(s, blocks[i])) return -1;
    return (int64_t)hit;
}

void fx_cli_sim_get(const fx_cli_sim *s, fx_cli_sim_result *out)
{
    *out = s->r;
    out->ratio = s->r.lookups ? (double)s->r.prefix_hits / (double)s->r.lookups : 0.0;
}

int fx_cli_sim_run(const fx_cli_trace *t, size_t n_requests, uint64_t capacity, int chained,
                   fx_cli_sim_result *out)
{
    size_t n = n_requests && n_requests < t->n_reqs ? n_requests : t->n_reqs;
    fx_cli_sim *s = fx_cli_sim_new(capacity);
    uint64_t *h = chained ? malloc((t->max_blocks ? t->max_blocks : 1) * sizeof *h) : NULL;
    int rc = -1;
    if (!s || (chained && !h)) goto out;
    for (size_t i = 0; i < n; i++) {
        const fx_cli_trace_req *q = &t->reqs[i];
        const uint64_t *b = q->blocks;
        if (chained) {
            fx_cli_chain_hashes(q->blocks, q->n_blocks, h);
            b = h;
        }
        if (fx_cli_sim_request(s, b, q->n_blocks) < 0) goto out;
    }
    fx_cli_sim_get(s, out);
    rc = 0;
out:
    free(h);
    fx_cli_sim_free(s);
    return rc;
}

