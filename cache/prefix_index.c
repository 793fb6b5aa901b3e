/* prefix_index.c — crit-bit tree of byte-string keys (see prefix_index.h). References are
 * tagged pointers (low bit 1 = leaf); every node keeps its parent so listing walks leaves
 * in order without a stack. Positions past a key's end read as symbol 0, bytes as 0x100|b. */
#include "prefix_index.h"

typedef uintptr_t pi_ref_t; /* 0 = none; low bit set = leaf */

typedef struct pi_inner {
    struct pi_inner *parent;
    pi_ref_t child[2];
    size_t byte;   /* symbol index of the critical bit */
    uint32_t mask; /* the critical bit inside the 9-bit symbol (one bit set) */
} pi_inner_t;

typedef struct pi_leaf {
    pi_inner_t *parent;
    size_t klen;
    char key[]; /* klen bytes + NUL */
} pi_leaf_t;

struct fx_prefix_index {
    pi_ref_t root;
    size_t count;
};

static inline bool pi_is_leaf(pi_ref_t r) { return (r & 1u) != 0; }
static inline pi_leaf_t *pi_as_leaf(pi_ref_t r) { return (pi_leaf_t *)(r - 1u); }
static inline pi_inner_t *pi_as_inner(pi_ref_t r) { return (pi_inner_t *)r; }
static inline pi_ref_t pi_leaf_ref(pi_leaf_t *l) { return (pi_ref_t)l + 1u; }

static inline pi_inner_t *pi_parent(pi_ref_t r)
{
    return pi_is_leaf(r) ? pi_as_leaf(r)->parent : pi_as_inner(r)->parent;
}

static inline void pi_set_parent(pi_ref_t r, pi_inner_t *p)
{
    if (pi_is_leaf(r)) pi_as_leaf(r)->parent = p;
    else pi_as_inner(r)->parent = p;
}

static inline uint32_t pi_sym(const void *key, size_t klen, size_t i)
{
    return i < klen ? 0x100u | ((const unsigned char *)key)[i] : 0u;
}

static inline int pi_dir(const void *key, size_t klen, const pi_inner_t *n)
{
    return (pi_sym(key, klen, n->byte) & n->mask) != 0;
}

/* True when position (b1, m1) comes before (b2, m2) in the key's bit order. */
static inline bool pi_pos_before(size_t b1, uint32_t m1, size_t b2, uint32_t m2)
{
    return b1 < b2 || (b1 == b2 && m1 > m2);
}

/* First position where a and b differ: false when equal, else sets *b_p and *m_p. */
static bool pi_diff(const void *a, size_t alen, const void *b, size_t blen, size_t *b_p,
                    uint32_t *m_p)
{
    const unsigned char *x = a, *y = b;
    size_t n = FX_MIN(alen, blen), i = 0;
    while (i < n && x[i] == y[i]) i++;
    if (i == n && alen == blen) return false;
    uint32_t d = pi_sym(a, alen, i) ^ pi_sym(b, blen, i);
    *b_p = i;
    *m_p = 1u << (31 - __builtin_clz(d));
    return true;
}

/* Leaf reached from r by following key's bits (the best match for key in r's subtree). */
static pi_leaf_t *pi_descend(pi_ref_t r, const void *key, size_t klen)
{
    while (!pi_is_leaf(r)) r = pi_as_inner(r)->child[pi_dir(key, klen, pi_as_inner(r))];
    return pi_as_leaf(r);
}

static pi_leaf_t *pi_edge(pi_ref_t r, int side)
{
    while (!pi_is_leaf(r)) r = pi_as_inner(r)->child[side];
    return pi_as_leaf(r);
}

/* In-order successor of leaf l inside the subtree rooted at top, or NULL. */
static pi_leaf_t *pi_next(pi_leaf_t *l, pi_ref_t top)
{
    pi_ref_t x = pi_leaf_ref(l);
    while (x != top) {
        pi_inner_t *p = pi_parent(x);
        if (p->child[0] == x) return pi_edge(p->child[1], 0);
        x = (pi_ref_t)p;
    }
    return NULL;
}

/* Smallest key in the subtree top that is strictly greater than a, or NULL. */
static pi_leaf_t *pi_first_after(pi_ref_t top, const void *a, size_t alen)
{
    pi_leaf_t *l = pi_descend(top, a, alen);
    size_t b;
    uint32_t m;
    if (!pi_diff(a, alen, l->key, l->klen, &b, &m)) return pi_next(l, top);
    /* Every key of the subtree s below the critical position agrees with l up to and
     * including (b, m); a has the other bit there, so s lies wholly on one side of a. */
    pi_ref_t s = top;
    while (!pi_is_leaf(s) && pi_pos_before(pi_as_inner(s)->byte, pi_as_inner(s)->mask, b, m))
        s = pi_as_inner(s)->child[pi_dir(a, alen, pi_as_inner(s))];
    if ((pi_sym(a, alen, b) & m) == 0) return pi_edge(s, 0);
    return pi_next(pi_edge(s, 1), top);
}

FX_INTERNAL int fx_prefix_index_create(fx_prefix_index_t **idx_p)
{
    if (!idx_p) return FLUXON_ERR_INVALID_ARGUMENT;
    fx_prefix_index_t *idx = fx_calloc(1, sizeof *idx);
    if (!idx) return FLUXON_ERR_NOMEM;
    *idx_p = idx;
    return FLUXON_OK;
}

FX_INTERNAL void fx_prefix_index_destroy(fx_prefix_index_t *idx)
{
    if (!idx) return;
    /* Post-order walk through parent pointers: free children before their parent. */
    pi_ref_t r = idx->root;
    while (r) {
        if (!pi_is_leaf(r)) {
            pi_inner_t *n = pi_as_inner(r);
            if (n->child[0]) { r = n->child[0]; continue; }
            if (n->child[1]) { r = n->child[1]; continue; }
        }
        pi_inner_t *p = pi_parent(r);
        if (p) p->child[p->child[1] == r] = 0;
        fx_free(pi_is_leaf(r) ? (void *)pi_as_leaf(r) : (void *)pi_as_inner(r));
        r = (pi_ref_t)p;
    }
    fx_free(idx);
}

/* A leaf holding a copy of key, or NULL. */
static pi_leaf_t *pi_leaf_new(const void *key, size_t klen)
{
    if (klen > SIZE_MAX - sizeof(pi_leaf_t) - 1) return NULL;
    pi_leaf_t *leaf = fx_malloc(sizeof *leaf + klen + 1);
    if (!leaf) return NULL;
    leaf->klen = klen;
    if (klen) memcpy(leaf->key, key, klen);
    leaf->key[klen] = 0;
    return leaf;
}

/* Hangs leaf into a non-empty index under a new inner node at critical position (b, m),
 * above the first node on key's path whose position follows (b, m); right: follow the
 * right spine (key is greater than every key present) instead of key's bits. */
static int pi_link(fx_prefix_index_t *idx, pi_leaf_t *leaf, size_t b, uint32_t m, bool right)
{
    pi_inner_t *in = fx_malloc(sizeof *in);
    if (!in) {
        fx_free(leaf);
        return FLUXON_ERR_NOMEM;
    }
    pi_ref_t *where = &idx->root;
    pi_inner_t *par = NULL;
    while (!pi_is_leaf(*where)) {
        pi_inner_t *n = pi_as_inner(*where);
        if (!pi_pos_before(n->byte, n->mask, b, m)) break;
        par = n;
        where = &n->child[right ? 1 : pi_dir(leaf->key, leaf->klen, n)];
    }
    int nd = (pi_sym(leaf->key, leaf->klen, b) & m) != 0;
    in->byte = b;
    in->mask = m;
    in->parent = par;
    in->child[nd] = pi_leaf_ref(leaf);
    in->child[!nd] = *where;
    pi_set_parent(*where, in);
    leaf->parent = in;
    *where = (pi_ref_t)in;
    idx->count++;
    return FLUXON_OK;
}

FX_INTERNAL int fx_prefix_index_insert(fx_prefix_index_t *idx, const void *key, size_t klen)
{
    FX_ASSERT(idx && (key || klen == 0));
    size_t b = 0;
    uint32_t m = 0;
    if (idx->root) {
        pi_leaf_t *l = pi_descend(idx->root, key, klen);
        if (!pi_diff(key, klen, l->key, l->klen, &b, &m)) return FLUXON_ERR_KEY_EXISTS;
    }
    pi_leaf_t *leaf = pi_leaf_new(key, klen);
    if (!leaf) return FLUXON_ERR_NOMEM;
    if (!idx->root) {
        leaf->parent = NULL;
        idx->root = pi_leaf_ref(leaf);
        idx->count = 1;
        return FLUXON_OK;
    }
    /* The new node goes above the first node whose critical position follows (b, m). */
    return pi_link(idx, leaf, b, m, false);
}

FX_INTERNAL int fx_prefix_index_append(fx_prefix_index_t *idx, const void *key, size_t klen)
{
    FX_ASSERT(idx && (key || klen == 0));
    if (!idx->root) return fx_prefix_index_insert(idx, key, klen);
    const pi_leaf_t *last = pi_edge(idx->root, 1);
    size_t b;
    uint32_t m;
    if (!pi_diff(key, klen, last->key, last->klen, &b, &m) || !(pi_sym(key, klen, b) & m))
        return FLUXON_ERR_INVALID_ARGUMENT;
    pi_leaf_t *leaf = pi_leaf_new(key, klen);
    if (!leaf) return FLUXON_ERR_NOMEM;
    return pi_link(idx, leaf, b, m, true);
}

FX_INTERNAL int fx_prefix_index_remove(fx_prefix_index_t *idx, const void *key, size_t klen)
{
    FX_ASSERT(idx && (key || klen == 0));
    if (!idx->root) return FLUXON_ERR_NOT_FOUND;
    pi_leaf_t *l = pi_descend(idx->root, key, klen);
    size_t b;
    uint32_t m;
    if (pi_diff(key, klen, l->key, l->klen, &b, &m)) return FLUXON_ERR_NOT_FOUND;
    pi_inner_t *p = l->parent;
    if (!p) {
        idx->root = 0;
    } else {
        pi_ref_t sib = p->child[p->child[0] == pi_leaf_ref(l)];
        pi_inner_t *gp = p->parent;
        pi_set_parent(sib, gp);
        if (gp) gp->child[gp->child[1] == (pi_ref_t)p] = sib;
        else idx->root = sib;
        fx_free(p);
    }
    fx_free(l);
    idx->count--;
    return FLUXON_OK;
}

FX_INTERNAL bool fx_prefix_index_contains(const fx_prefix_index_t *idx, const void *key,
                                          size_t klen)
{
    FX_ASSERT(idx && (key || klen == 0));
    if (!idx->root) return false;
    pi_leaf_t *l = pi_descend(idx->root, key, klen);
    size_t b;
    uint32_t m;
    return !pi_diff(key, klen, l->key, l->klen, &b, &m);
}

FX_INTERNAL size_t fx_prefix_index_count(const fx_prefix_index_t *idx)
{
    return idx ? idx->count : 0;
}

FX_INTERNAL size_t fx_prefix_index_list(const fx_prefix_index_t *idx, const void *prefix,
                                        size_t plen, const void *after, size_t alen,
                                        size_t limit, fx_prefix_index_cb cb, void *arg)
{
    FX_ASSERT(idx && cb && (prefix || plen == 0));
    if (!idx->root || limit == 0) return 0;
    if (!after) alen = 0;
    /* Root of the subtree of keys starting with prefix: below it every critical position
     * lies at or past plen, so all its keys agree on the first plen symbols. */
    pi_ref_t top = idx->root;
    while (!pi_is_leaf(top) && pi_as_inner(top)->byte < plen)
        top = pi_as_inner(top)->child[pi_dir(prefix, plen, pi_as_inner(top))];
    pi_leaf_t *l = pi_edge(top, 0);
    if (l->klen < plen || (plen && memcmp(l->key, prefix, plen) != 0)) return 0;
    if (after) l = pi_first_after(top, after, alen);
    size_t n = 0;
    while (l && n < limit) {
        n++;
        if (cb(arg, l->key, l->klen) != 0) break;
        l = pi_next(l, top);
    }
    return n;
}

/* Three-way order of the header: memcmp, then the shorter key first. */
static int pi_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = FX_MIN(alen, blen);
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

FX_INTERNAL int fx_prefix_index_check(const fx_prefix_index_t *idx)
{
    if (!idx) return FLUXON_ERR_INVALID_ARGUMENT;
    if (!idx->root) return idx->count == 0 ? FLUXON_OK : FLUXON_ERR_INTERNAL;
    if (pi_parent(idx->root) != NULL) return FLUXON_ERR_INTERNAL;
    /* Iterative walk over every node through parent pointers (prev tells the direction). */
    size_t leaves = 0;
    const pi_leaf_t *last = NULL;
    pi_ref_t cur = idx->root, prev = 0;
    while (cur) {
        pi_ref_t up = (pi_ref_t)pi_parent(cur);
        if (pi_is_leaf(cur)) {
            const pi_leaf_t *l = pi_as_leaf(cur);
            if (l->key[l->klen] != 0) return FLUXON_ERR_INTERNAL;
            if (last && pi_cmp(last->key, last->klen, l->key, l->klen) >= 0)
                return FLUXON_ERR_INTERNAL;
            /* Every ancestor must route this key to the side it hangs on. */
            pi_ref_t x = cur;
            for (const pi_inner_t *a = l->parent; a; x = (pi_ref_t)a, a = a->parent)
                if (a->child[pi_dir(l->key, l->klen, a)] != x) return FLUXON_ERR_INTERNAL;
            last = l;
            leaves++;
            prev = cur;
            cur = up;
            continue;
        }
        const pi_inner_t *n = pi_as_inner(cur);
        if (prev == up) { /* first arrival: check the node, go left */
            if (n->mask == 0 || (n->mask & (n->mask - 1)) != 0 || n->mask > 0x100u)
                return FLUXON_ERR_INTERNAL;
            for (int d = 0; d < 2; d++) {
                if (!n->child[d] || pi_parent(n->child[d]) != n) return FLUXON_ERR_INTERNAL;
                if (!pi_is_leaf(n->child[d])) {
                    const pi_inner_t *c = pi_as_inner(n->child[d]);
                    if (!pi_pos_before(n->byte, n->mask, c->byte, c->mask))
                        return FLUXON_ERR_INTERNAL;
                }
            }
            prev = cur;
            cur = n->child[0];
        } else if (prev == n->child[0]) {
            prev = cur;
            cur = n->child[1];
        } else {
            prev = cur;
            cur = up;
        }
    }
    return leaves == idx->count ? FLUXON_OK : FLUXON_ERR_INTERNAL;
}
