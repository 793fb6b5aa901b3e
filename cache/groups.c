/* groups.c — atomic-group checks and iteration, and the borrowed-key duplicate set. */
#include "groups.h"

#include <stdio.h>
#include <xxhash.h>

/* lens are u64 (width 8) or u32 (width 4): one check for both */
static uint64_t groups_len(const void *lens, int width, size_t g)
{
    return width == 8 ? ((const uint64_t *)lens)[g] : ((const uint32_t *)lens)[g];
}

static bool groups_check(const void *lens, int width, size_t n_groups, size_t n, char *why, size_t cap)
{
    if (n_groups == 0) return true;
    if (!lens || n_groups > n) {
        if (why) snprintf(why, cap, "%zu atomic groups for %zu keys (at most one group per key)", n_groups, n);
        return false;
    }
    uint64_t sum = 0; /* invariant: sum <= n, so n - sum never wraps */
    for (size_t g = 0; g < n_groups; g++) {
        uint64_t len = groups_len(lens, width, g);
        if (len == 0 || len > (uint64_t)n - sum) {
            if (why)
                snprintf(why, cap, "atomic group %zu has length %llu: groups must be > 0 and sum to n_keys %zu", g,
                         (unsigned long long)len, n);
            return false;
        }
        sum += len;
    }
    if (sum != n) {
        if (why) snprintf(why, cap, "atomic groups sum to %llu keys, not to n_keys %zu", (unsigned long long)sum, n);
        return false;
    }
    return true;
}

FX_INTERNAL bool fx_groups_check(const uint64_t *lens, size_t n_groups, size_t n, char *why, size_t cap)
{
    return groups_check(lens, 8, n_groups, n, why, cap);
}

FX_INTERNAL bool fx_groups_check32(const uint32_t *lens, size_t n_groups, size_t n, char *why, size_t cap)
{
    return groups_check(lens, 4, n_groups, n, why, cap);
}

FX_INTERNAL fx_group_iter_t fx_group_iter(const uint64_t *lens, size_t n_groups, size_t n)
{
    fx_group_iter_t it = {lens, n_groups, n, 0, 0, 0, 0};
    return it;
}

FX_INTERNAL bool fx_group_next(fx_group_iter_t *it)
{
    size_t ng = it->n_groups ? it->n_groups : it->n;
    if (it->next >= ng) return false;
    it->start = it->next ? it->start + it->len : 0;
    it->g = it->next++;
    it->len = it->n_groups ? (size_t)it->lens[it->g] : 1;
    return true;
}

FX_INTERNAL size_t fx_groups_reject(const uint64_t *lens, size_t n_groups, size_t n, int *status, int ok,
                                    int rejected, void (*on_reject)(void *arg, size_t i), void *arg)
{
    size_t count = 0;
    if (n_groups == 0) return 0; /* every key its own group: a refused key takes no other with it */
    fx_group_iter_t it = fx_group_iter(lens, n_groups, n);
    while (fx_group_next(&it)) {
        bool bad = false;
        for (size_t i = it.start; i < it.start + it.len; i++) bad |= status[i] != ok;
        if (!bad) continue;
        for (size_t i = it.start; i < it.start + it.len; i++) {
            if (status[i] != ok) continue;
            status[i] = rejected;
            count++;
            if (on_reject) on_reject(arg, i);
        }
    }
    return count;
}

/* Open addressing with linear probing over a power-of-two table at most half full. */
typedef struct keyset_slot {
    const void *key; /* NULL: empty */
    size_t klen;
    uint64_t hash;
} keyset_slot_t;

struct fx_keyset {
    size_t mask, count, limit;
    keyset_slot_t slots[];
};

FX_INTERNAL int fx_keyset_create(size_t expected, fx_keyset_t **s_p)
{
    if (!s_p || expected > ((size_t)1 << 40)) return FLUXON_ERR_INVALID_ARGUMENT;
    size_t cap = 16;
    while (cap < expected * 2) cap <<= 1;
    fx_keyset_t *s = fx_calloc(1, sizeof *s + cap * sizeof(keyset_slot_t));
    if (!s) return FLUXON_ERR_NOMEM;
    s->mask = cap - 1;
    s->limit = expected;
    *s_p = s;
    return FLUXON_OK;
}

FX_INTERNAL int fx_keyset_add(fx_keyset_t *s, const void *key, size_t klen)
{
    static const char empty_key; /* a non-NULL address for the empty key */
    if (!key) key = &empty_key;
    uint64_t h = XXH3_64bits(key, klen);
    for (size_t i = (size_t)h & s->mask;; i = (i + 1) & s->mask) {
        keyset_slot_t *sl = &s->slots[i];
        if (!sl->key) {
            if (s->count >= s->limit) return FLUXON_ERR_INVALID_ARGUMENT;
            sl->key = key;
            sl->klen = klen;
            sl->hash = h;
            s->count++;
            return FLUXON_OK;
        }
        if (sl->hash == h && sl->klen == klen && memcmp(sl->key, key, klen) == 0) return FLUXON_ERR_KEY_EXISTS;
    }
}

FX_INTERNAL void fx_keyset_destroy(fx_keyset_t *s) { fx_free(s); }

/* One "_<digits>" run ending at end: the digits' value in *v and the index of its '_'
 * (SIZE_MAX when there is none, or more than 9 digits). */
static size_t cohort_number(const char *key, size_t end, uint64_t *v)
{
    size_t d = end;
    while (d > 0 && end - d < 10 && key[d - 1] >= '0' && key[d - 1] <= '9') d--;
    if (d == end || end - d > 9 || d == 0 || key[d - 1] != '_') return SIZE_MAX;
    uint64_t x = 0;
    for (size_t i = d; i < end; i++) x = x * 10 + (uint64_t)(key[i] - '0');
    *v = x;
    return d - 1;
}

FX_INTERNAL size_t fx_cohort_len(const char *key, size_t len)
{
    uint64_t rank = 0, size = 0;
    size_t u2 = key ? cohort_number(key, len, &size) : SIZE_MAX;
    size_t u1 = u2 != SIZE_MAX ? cohort_number(key, u2, &rank) : SIZE_MAX;
    if (u1 == SIZE_MAX || u1 == 0 || rank >= size) return len;
    return u1;
}
