/* offset_alloc.c — TLSF offset allocator for owner segments (see offset_alloc.h). The bytes
 * it manages belong to another process, so block headers live in a side pool of nodes and a
 * hash maps each live allocation's start to its node, which makes free-by-offset O(1). */
#include "offset_alloc.h"

#include "log.h"

/* All internal arithmetic is in pages (FX_OFFSET_ALLOC_PAGE bytes). A segment is < 2^64
 * bytes, so < 2^52 pages: first-level index <= 51 - OA_SL_LOG2 + 1 = 47. */
#define OA_PAGE_SHIFT 12
#define OA_SL_LOG2 5
#define OA_SL_COUNT (1u << OA_SL_LOG2)
#define OA_FL_COUNT 48
#define OA_NIL UINT32_MAX
#define OA_EMPTY_KEY UINT64_MAX
#define OA_NODE_CAP_MIN 64u
#define OA_TAB_CAP_MIN 64u

/* One physical block. Blocks tile the range in address order through prev/next; a free
 * block is also on the list of its size class through free_prev/free_next (which, for a
 * recycled node slot, chains the pool's free slots instead). */
typedef struct oa_node {
    uint64_t page;  /* first page, relative to base */
    uint64_t pages; /* length in pages, > 0 */
    uint32_t prev, next;
    uint32_t free_prev, free_next;
    uint32_t is_free;
} oa_node_t;

/* Offset map entry: live allocation start page -> node. Open addressing, linear probing. */
typedef struct oa_slot {
    uint64_t page; /* OA_EMPTY_KEY when empty */
    uint32_t node;
} oa_slot_t;

struct fx_offset_alloc {
    uint64_t base;
    uint64_t total_pages;
    uint64_t used_pages;
    size_t live;

    oa_node_t *nodes;
    uint32_t node_cap;  /* entries allocated */
    uint32_t node_top;  /* entries ever handed out (high-water mark) */
    uint32_t node_spare; /* recycled entries, chained through free_next */

    uint64_t fl_bitmap;
    uint32_t sl_bitmap[OA_FL_COUNT];
    uint32_t heads[OA_FL_COUNT][OA_SL_COUNT];

    oa_slot_t *tab;
    size_t tab_cap; /* power of two */
    unsigned tab_shift;
    size_t tab_count;
};

/* ---- size classes ---- */

static inline unsigned oa_msb(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

/* The class whose range holds `pages`: below OA_SL_COUNT pages every size has its own
 * class; above, each power-of-two range is split into OA_SL_COUNT equal classes. */
static inline void oa_mapping(uint64_t pages, unsigned *fl, unsigned *sl)
{
    if (pages < OA_SL_COUNT) {
        *fl = 0;
        *sl = (unsigned)pages;
    } else {
        unsigned m = oa_msb(pages);
        *fl = m - OA_SL_LOG2 + 1;
        *sl = (unsigned)(pages >> (m - OA_SL_LOG2)) - OA_SL_COUNT;
    }
}

/* Smallest size that maps to class (fl, sl). */
static inline uint64_t oa_class_min(unsigned fl, unsigned sl)
{
    return fl == 0 ? sl : (uint64_t)(OA_SL_COUNT + sl) << (fl - 1);
}

/* ---- free lists ---- */

static void oa_list_insert(fx_offset_alloc_t *a, uint32_t i)
{
    oa_node_t *n = &a->nodes[i];
    unsigned fl, sl;
    oa_mapping(n->pages, &fl, &sl);
    uint32_t h = a->heads[fl][sl];
    n->free_prev = OA_NIL;
    n->free_next = h;
    if (h != OA_NIL) a->nodes[h].free_prev = i;
    a->heads[fl][sl] = i;
    a->sl_bitmap[fl] |= 1u << sl;
    a->fl_bitmap |= 1ull << fl;
    n->is_free = 1;
}

static void oa_list_remove(fx_offset_alloc_t *a, uint32_t i)
{
    oa_node_t *n = &a->nodes[i];
    unsigned fl, sl;
    oa_mapping(n->pages, &fl, &sl);
    if (n->free_prev != OA_NIL) a->nodes[n->free_prev].free_next = n->free_next;
    else a->heads[fl][sl] = n->free_next;
    if (n->free_next != OA_NIL) a->nodes[n->free_next].free_prev = n->free_prev;
    if (a->heads[fl][sl] == OA_NIL) {
        a->sl_bitmap[fl] &= ~(1u << sl);
        if (a->sl_bitmap[fl] == 0) a->fl_bitmap &= ~(1ull << fl);
    }
    n->is_free = 0;
    n->free_prev = n->free_next = OA_NIL;
}

/* Head of the first non-empty list at class (fl, sl) or above, OA_NIL if none. */
static uint32_t oa_find_from(const fx_offset_alloc_t *a, unsigned fl, unsigned sl)
{
    uint32_t slmap = a->sl_bitmap[fl] & (~0u << sl);
    if (slmap == 0) {
        uint64_t flmap = fl + 1 < 64 ? a->fl_bitmap & (~0ull << (fl + 1)) : 0;
        if (flmap == 0) return OA_NIL;
        fl = (unsigned)__builtin_ctzll(flmap);
        slmap = a->sl_bitmap[fl];
    }
    return a->heads[fl][(unsigned)__builtin_ctz(slmap)];
}

/* A free block of at least `pages`, OA_NIL when none exists. Good fit: round the request
 * up to the next class boundary so any block of the class found fits without a walk.
 * That skips the request's own class, which may still hold a block that fits; searching
 * it before failing is what keeps a nearly full segment usable to the last block. */
static uint32_t oa_find(const fx_offset_alloc_t *a, uint64_t pages)
{
    uint64_t rounded = pages;
    if (pages >= OA_SL_COUNT) rounded += (1ull << (oa_msb(pages) - OA_SL_LOG2)) - 1;
    unsigned fl, sl;
    oa_mapping(rounded, &fl, &sl);
    uint32_t i = oa_find_from(a, fl, sl);
    if (i != OA_NIL) return i;
    unsigned ffl, fsl;
    oa_mapping(pages, &ffl, &fsl);
    if (ffl == fl && fsl == sl) return OA_NIL;
    for (i = a->heads[ffl][fsl]; i != OA_NIL; i = a->nodes[i].free_next)
        if (a->nodes[i].pages >= pages) return i;
    return OA_NIL;
}

/* ---- node pool ---- */

/* Makes sure one node can be taken without allocating, so a split never fails midway. */
static int oa_node_reserve(fx_offset_alloc_t *a)
{
    if (a->node_spare != OA_NIL || a->node_top < a->node_cap) return FLUXON_OK;
    if (a->node_cap >= OA_NIL / 2) return FLUXON_ERR_NOMEM;
    uint32_t cap = a->node_cap * 2;
    oa_node_t *n = fx_realloc(a->nodes, (size_t)cap * sizeof *n);
    if (!n) return FLUXON_ERR_NOMEM;
    a->nodes = n;
    a->node_cap = cap;
    return FLUXON_OK;
}

static uint32_t oa_node_take(fx_offset_alloc_t *a)
{
    uint32_t i = a->node_spare;
    if (i != OA_NIL) a->node_spare = a->nodes[i].free_next;
    else i = a->node_top++;
    FX_ASSERT(i < a->node_cap);
    return i;
}

static void oa_node_put(fx_offset_alloc_t *a, uint32_t i)
{
    oa_node_t *n = &a->nodes[i];
    n->pages = 0; /* marks a recycled slot for the check walk */
    n->is_free = 0;
    n->prev = n->next = n->free_prev = OA_NIL;
    n->free_next = a->node_spare;
    a->node_spare = i;
}

/* ---- offset map ---- */

static inline size_t oa_hash(const fx_offset_alloc_t *a, uint64_t page)
{
    /* Fibonacci hashing: starts are multiples of arbitrary sizes, so the top bits of the
     * product spread them where the low bits of the raw page would collide. */
    return (size_t)((page * 0x9E3779B97F4A7C15ull) >> a->tab_shift);
}

static void oa_tab_put(oa_slot_t *tab, size_t mask, size_t h, uint64_t page, uint32_t node)
{
    while (tab[h].page != OA_EMPTY_KEY) h = (h + 1) & mask;
    tab[h].page = page;
    tab[h].node = node;
}

static int oa_tab_resize(fx_offset_alloc_t *a, size_t cap)
{
    oa_slot_t *tab = fx_malloc(cap * sizeof *tab);
    if (!tab) return FLUXON_ERR_NOMEM;
    for (size_t i = 0; i < cap; i++) tab[i].page = OA_EMPTY_KEY;
    unsigned shift = 64u - oa_msb(cap);
    for (size_t i = 0; i < a->tab_cap; i++) {
        if (a->tab[i].page == OA_EMPTY_KEY) continue;
        size_t h = (size_t)((a->tab[i].page * 0x9E3779B97F4A7C15ull) >> shift);
        oa_tab_put(tab, cap - 1, h, a->tab[i].page, a->tab[i].node);
    }
    fx_free(a->tab);
    a->tab = tab;
    a->tab_cap = cap;
    a->tab_shift = shift;
    return FLUXON_OK;
}

/* Keeps the load factor <= 1/2 after one more insert, so probes stay short. */
static int oa_tab_reserve(fx_offset_alloc_t *a)
{
    if ((a->tab_count + 1) * 2 <= a->tab_cap) return FLUXON_OK;
    if (a->tab_cap > SIZE_MAX / 2 / sizeof(oa_slot_t)) return FLUXON_ERR_NOMEM;
    return oa_tab_resize(a, a->tab_cap * 2);
}

/* Slot index holding page, or SIZE_MAX. */
static size_t oa_tab_find(const fx_offset_alloc_t *a, uint64_t page)
{
    size_t mask = a->tab_cap - 1;
    for (size_t h = oa_hash(a, page);; h = (h + 1) & mask) {
        if (a->tab[h].page == page) return h;
        if (a->tab[h].page == OA_EMPTY_KEY) return SIZE_MAX;
    }
}

/* Backward-shift deletion: no tombstones, so lookups never slow down with churn. */
static void oa_tab_delete(fx_offset_alloc_t *a, size_t i)
{
    size_t mask = a->tab_cap - 1;
    for (size_t j = (i + 1) & mask; a->tab[j].page != OA_EMPTY_KEY; j = (j + 1) & mask) {
        size_t home = oa_hash(a, a->tab[j].page);
        /* Entry j may move to the hole at i only if its home is not in (i, j] cyclically. */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        a->tab[i] = a->tab[j];
        i = j;
    }
    a->tab[i].page = OA_EMPTY_KEY;
    a->tab_count--;
}

/* ---- API ---- */

FX_INTERNAL int fx_offset_alloc_create(uint64_t base, uint64_t size, fx_offset_alloc_t **a_p)
{
    if (!a_p || size == 0 || base % FX_OFFSET_ALLOC_PAGE || size % FX_OFFSET_ALLOC_PAGE ||
        size - 1 > UINT64_MAX - base) /* the last byte must be addressable */
        return FLUXON_ERR_INVALID_ARGUMENT;
    fx_offset_alloc_t *a = fx_calloc(1, sizeof *a);
    if (!a) return FLUXON_ERR_NOMEM;
    a->base = base;
    a->total_pages = size >> OA_PAGE_SHIFT;
    a->node_spare = OA_NIL;
    memset(a->heads, 0xff, sizeof a->heads);
    a->nodes = fx_malloc(OA_NODE_CAP_MIN * sizeof *a->nodes);
    if (!a->nodes) goto err_free_a;
    a->node_cap = OA_NODE_CAP_MIN;
    if (oa_tab_resize(a, OA_TAB_CAP_MIN) != FLUXON_OK) goto err_free_nodes;

    /* Node 0 is the block at page 0 for the allocator's whole life: a split keeps the low
     * part in the old node and a merge keeps the lower node, so it is never recycled. */
    uint32_t i = oa_node_take(a);
    a->nodes[i] = (oa_node_t){.page = 0, .pages = a->total_pages, .prev = OA_NIL,
                              .next = OA_NIL};
    oa_list_insert(a, i);
    *a_p = a;
    return FLUXON_OK;

err_free_nodes:
    fx_free(a->nodes);
err_free_a:
    fx_free(a);
    return FLUXON_ERR_NOMEM;
}

FX_INTERNAL void fx_offset_alloc_destroy(fx_offset_alloc_t *a)
{
    if (!a) return;
    fx_free(a->tab);
    fx_free(a->nodes);
    fx_free(a);
}

FX_INTERNAL int fx_offset_alloc_alloc(fx_offset_alloc_t *a, uint64_t len, uint64_t *offset_p)
{
    if (!a || !offset_p || len == 0 || len > a->total_pages << OA_PAGE_SHIFT)
        return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t pages = (len + FX_OFFSET_ALLOC_PAGE - 1) >> OA_PAGE_SHIFT;

    /* Grow the side structures first: after this point nothing can fail, so a NOMEM
     * leaves the allocator exactly as it was. */
    int rc = oa_node_reserve(a);
    if (rc == FLUXON_OK) rc = oa_tab_reserve(a);
    if (rc != FLUXON_OK) return rc;

    uint32_t i = oa_find(a, pages);
    if (i == OA_NIL) return FLUXON_ERR_NO_SPACE;
    oa_list_remove(a, i);
    oa_node_t *b = &a->nodes[i];
    if (b->pages > pages) {
        /* The remainder's neighbours are b (now used) and b's old next, which is used
         * because free blocks never touch; so it needs no merge. */
        uint32_t r = oa_node_take(a);
        b = &a->nodes[i];
        a->nodes[r] = (oa_node_t){.page = b->page + pages, .pages = b->pages - pages,
                                  .prev = i, .next = b->next};
        if (b->next != OA_NIL) a->nodes[b->next].prev = r;
        b->next = r;
        b->pages = pages;
        oa_list_insert(a, r);
    }
    oa_tab_put(a->tab, a->tab_cap - 1, oa_hash(a, b->page), b->page, i);
    a->tab_count++;
    a->used_pages += pages;
    a->live++;
    *offset_p = a->base + (b->page << OA_PAGE_SHIFT);
    return FLUXON_OK;
}

/* Marks [offset, offset+len) allocated when it lies inside one free block: how a new
 * master re-learns the grants an owner already holds. O(blocks) to find the block. */
FX_INTERNAL int fx_offset_alloc_reserve(fx_offset_alloc_t *a, uint64_t offset, uint64_t len)
{
    if (!a || len == 0 || offset < a->base || (offset - a->base) % FX_OFFSET_ALLOC_PAGE)
        return FLUXON_ERR_INVALID_ARGUMENT;
    uint64_t page = (offset - a->base) >> OA_PAGE_SHIFT;
    uint64_t pages = (len + FX_OFFSET_ALLOC_PAGE - 1) >> OA_PAGE_SHIFT;
    if (page >= a->total_pages || pages > a->total_pages - page) return FLUXON_ERR_INVALID_ARGUMENT;
    /* up to two splits: make sure both node takes and the map insert cannot fail */
    int rc = oa_node_reserve(a);
    if (rc != FLUXON_OK) return rc;
    uint32_t spare = oa_node_take(a);
    rc = oa_node_reserve(a);
    if (rc == FLUXON_OK) rc = oa_tab_reserve(a);
    if (rc != FLUXON_OK) {
        oa_node_put(a, spare);
        return rc;
    }
    uint32_t i = 0;
    while (i != OA_NIL && !(a->nodes[i].page <= page && page < a->nodes[i].page + a->nodes[i].pages))
        i = a->nodes[i].next;
    if (i == OA_NIL || !a->nodes[i].is_free || page + pages > a->nodes[i].page + a->nodes[i].pages) {
        oa_node_put(a, spare);
        return FLUXON_ERR_BUSY; /* overlaps an allocation */
    }
    oa_list_remove(a, i);
    oa_node_t *b = &a->nodes[i];
    if (b->page < page) { /* free head stays in i; the reserved part moves to a new node */
        uint32_t r = spare;
        spare = OA_NIL;
        b = &a->nodes[i];
        a->nodes[r] = (oa_node_t){.page = page, .pages = b->page + b->pages - page, .prev = i, .next = b->next};
        if (b->next != OA_NIL) a->nodes[b->next].prev = r;
        b->next = r;
        b->pages = page - b->page;
        oa_list_insert(a, i);
        i = r;
        b = &a->nodes[i];
    }
    if (b->pages > pages) { /* free tail */
        uint32_t r = spare != OA_NIL ? spare : oa_node_take(a);
        spare = OA_NIL;
        b = &a->nodes[i];
        a->nodes[r] = (oa_node_t){.page = b->page + pages, .pages = b->pages - pages, .prev = i, .next = b->next};
        if (b->next != OA_NIL) a->nodes[b->next].prev = r;
        b->next = r;
        b->pages = pages;
        oa_list_insert(a, r);
    }
    if (spare != OA_NIL) oa_node_put(a, spare);
    b->is_free = 0;
    oa_tab_put(a->tab, a->tab_cap - 1, oa_hash(a, b->page), b->page, i);
    a->tab_count++;
    a->used_pages += pages;
    a->live++;
    return FLUXON_OK;
}

/* Slot in the offset map of the live allocation starting at offset, or SIZE_MAX. */
static size_t oa_lookup(const fx_offset_alloc_t *a, uint64_t offset)
{
    if (offset < a->base || (offset - a->base) % FX_OFFSET_ALLOC_PAGE) return SIZE_MAX;
    uint64_t page = (offset - a->base) >> OA_PAGE_SHIFT;
    if (page >= a->total_pages) return SIZE_MAX;
    return oa_tab_find(a, page);
}

FX_INTERNAL int fx_offset_alloc_free(fx_offset_alloc_t *a, uint64_t offset)
{
    if (!a) return FLUXON_ERR_INVALID_ARGUMENT;
    size_t slot = oa_lookup(a, offset);
    if (slot == SIZE_MAX) return FLUXON_ERR_NOT_FOUND;
    uint32_t i = a->tab[slot].node;
    oa_tab_delete(a, slot);
    oa_node_t *b = &a->nodes[i];
    FX_ASSERT(!b->is_free && b->pages > 0);
    a->used_pages -= b->pages;
    a->live--;

    uint32_t p = b->prev, n = b->next;
    if (n != OA_NIL && a->nodes[n].is_free) {
        oa_list_remove(a, n);
        b->pages += a->nodes[n].pages;
        b->next = a->nodes[n].next;
        if (b->next != OA_NIL) a->nodes[b->next].prev = i;
        oa_node_put(a, n);
    }
    if (p != OA_NIL && a->nodes[p].is_free) {
        oa_node_t *pb = &a->nodes[p];
        oa_list_remove(a, p);
        pb->pages += b->pages;
        pb->next = b->next;
        if (pb->next != OA_NIL) a->nodes[pb->next].prev = p;
        oa_node_put(a, i);
        i = p;
    }
    oa_list_insert(a, i);
    return FLUXON_OK;
}

FX_INTERNAL int fx_offset_alloc_size_of(const fx_offset_alloc_t *a, uint64_t offset,
                                        uint64_t *len_p)
{
    if (!a || !len_p) return FLUXON_ERR_INVALID_ARGUMENT;
    size_t slot = oa_lookup(a, offset);
    if (slot == SIZE_MAX) return FLUXON_ERR_NOT_FOUND;
    *len_p = a->nodes[a->tab[slot].node].pages << OA_PAGE_SHIFT;
    return FLUXON_OK;
}

FX_INTERNAL uint64_t fx_offset_alloc_used(const fx_offset_alloc_t *a)
{
    return a->used_pages << OA_PAGE_SHIFT;
}

FX_INTERNAL uint64_t fx_offset_alloc_free_bytes(const fx_offset_alloc_t *a)
{
    return (a->total_pages - a->used_pages) << OA_PAGE_SHIFT;
}

FX_INTERNAL size_t fx_offset_alloc_count(const fx_offset_alloc_t *a) { return a->live; }

FX_INTERNAL uint64_t fx_offset_alloc_largest_free(const fx_offset_alloc_t *a)
{
    if (a->fl_bitmap == 0) return 0;
    unsigned fl = oa_msb(a->fl_bitmap);
    unsigned sl = oa_msb(a->sl_bitmap[fl]);
    uint64_t best = 0;
    for (uint32_t i = a->heads[fl][sl]; i != OA_NIL; i = a->nodes[i].free_next)
        best = FX_MAX(best, a->nodes[i].pages);
    return best << OA_PAGE_SHIFT;
}

/* ---- consistency walk ---- */

#define OA_CHECK(cond, ...)                                                  \
    do {                                                                     \
        if (!(cond)) {                                                       \
            FX_ERROR("offset_alloc check: " __VA_ARGS__);                    \
            return FLUXON_ERR_INTERNAL;                                      \
        }                                                                    \
    } while (0)

FX_INTERNAL int fx_offset_alloc_check(const fx_offset_alloc_t *a)
{
    OA_CHECK(a && a->nodes && a->tab, "missing structures");
    OA_CHECK(a->node_top <= a->node_cap, "node_top %u > cap %u", a->node_top, a->node_cap);

    /* Physical walk from node 0: tiling, links, no adjacent free blocks, counters. */
    uint64_t page = 0, used = 0, free_blocks = 0, blocks = 0;
    size_t live = 0;
    uint32_t prev = OA_NIL;
    bool prev_free = false;
    for (uint32_t i = 0; i != OA_NIL; i = a->nodes[i].next) {
        OA_CHECK(i < a->node_top, "node %u beyond pool top %u", i, a->node_top);
        OA_CHECK(blocks < a->node_top, "physical chain longer than the pool (cycle)");
        const oa_node_t *n = &a->nodes[i];
        OA_CHECK(n->pages > 0, "block %u has 0 pages", i);
        OA_CHECK(n->page == page, "block %u at page %llu, expected %llu", i,
                 (unsigned long long)n->page, (unsigned long long)page);
        OA_CHECK(n->prev == prev, "block %u prev %u, expected %u", i, n->prev, prev);
        OA_CHECK(!(prev_free && n->is_free), "adjacent free blocks %u and %u", prev, i);
        OA_CHECK(n->pages <= a->total_pages - page, "block %u runs past the end", i);
        if (n->is_free) {
            free_blocks++;
        } else {
            used += n->pages;
            live++;
            size_t s = oa_tab_find(a, n->page);
            OA_CHECK(s != SIZE_MAX && a->tab[s].node == i, "live block %u not in offset map", i);
        }
        page += n->pages;
        prev = i;
        prev_free = n->is_free;
        blocks++;
    }
    OA_CHECK(page == a->total_pages, "blocks cover %llu of %llu pages",
             (unsigned long long)page, (unsigned long long)a->total_pages);
    OA_CHECK(used == a->used_pages, "used %llu, counter %llu", (unsigned long long)used,
             (unsigned long long)a->used_pages);
    OA_CHECK(live == a->live && live == a->tab_count, "live %zu, counter %zu, map %zu", live,
             a->live, a->tab_count);

    /* Free lists: every listed block is free, in its own class, doubly linked; together
     * they hold exactly the free blocks of the walk; bitmaps say which lists are non-empty. */
    uint64_t listed = 0;
    for (unsigned fl = 0; fl < OA_FL_COUNT; fl++) {
        OA_CHECK(((a->fl_bitmap >> fl) & 1) == (a->sl_bitmap[fl] != 0),
                 "fl bitmap bit %u disagrees with sl bitmap", fl);
        for (unsigned sl = 0; sl < OA_SL_COUNT; sl++) {
            uint32_t h = a->heads[fl][sl];
            OA_CHECK(((a->sl_bitmap[fl] >> sl) & 1) == (h != OA_NIL),
                     "sl bitmap bit %u/%u disagrees with list", fl, sl);
            uint32_t fprev = OA_NIL;
            for (uint32_t i = h; i != OA_NIL; i = a->nodes[i].free_next) {
                OA_CHECK(i < a->node_top, "listed node %u beyond pool top", i);
                OA_CHECK(listed <= free_blocks, "free lists hold more than the free blocks");
                const oa_node_t *n = &a->nodes[i];
                OA_CHECK(n->is_free && n->pages > 0, "listed node %u is not a free block", i);
                OA_CHECK(n->free_prev == fprev, "node %u free_prev %u, expected %u", i,
                         n->free_prev, fprev);
                unsigned nfl, nsl;
                oa_mapping(n->pages, &nfl, &nsl);
                OA_CHECK(nfl == fl && nsl == sl && n->pages >= oa_class_min(fl, sl),
                         "node %u of %llu pages on list %u/%u", i,
                         (unsigned long long)n->pages, fl, sl);
                fprev = i;
                listed++;
            }
        }
    }
    OA_CHECK(listed == free_blocks, "%llu blocks listed, %llu free", (unsigned long long)listed,
             (unsigned long long)free_blocks);

    /* Offset map: exactly the live blocks (their count matched above, and every entry must
     * point at a live block with its key), so no stale entry can answer a free. */
    size_t entries = 0;
    for (size_t s = 0; s < a->tab_cap; s++) {
        if (a->tab[s].page == OA_EMPTY_KEY) continue;
        uint32_t i = a->tab[s].node;
        OA_CHECK(i < a->node_top && !a->nodes[i].is_free && a->nodes[i].pages > 0 &&
                     a->nodes[i].page == a->tab[s].page,
                 "offset map entry %zu is stale", s);
        entries++;
    }
    OA_CHECK(entries == a->tab_count, "map holds %zu entries, counter %zu", entries,
             a->tab_count);

    /* Pool: every slot below the top is either a block or a recycled spare. */
    uint64_t spares = 0;
    for (uint32_t i = a->node_spare; i != OA_NIL; i = a->nodes[i].free_next) {
        OA_CHECK(i < a->node_top && a->nodes[i].pages == 0, "bad spare node %u", i);
        OA_CHECK(++spares <= a->node_top, "spare chain cycles");
    }
    OA_CHECK(blocks + spares == a->node_top, "%llu blocks + %llu spares != pool top %u",
             (unsigned long long)blocks, (unsigned long long)spares, a->node_top);
    return 0;
}

#undef OA_CHECK
#undef OA_PAGE_SHIFT
#undef OA_SL_LOG2
#undef OA_SL_COUNT
#undef OA_FL_COUNT
#undef OA_NIL
#undef OA_EMPTY_KEY
#undef OA_NODE_CAP_MIN
#undef OA_TAB_CAP_MIN
