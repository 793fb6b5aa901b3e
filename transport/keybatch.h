/* keybatch.h — keys queued for one frame (an EVICT of disk routes, a TOUCH): their bytes in
 * one buffer and up to FX_KEYBATCH_COLS uint64 columns beside them (offsets, versions),
 * growing as keys come. One thread; its owner frees it. */
#ifndef FX_KEYBATCH_H
#define FX_KEYBATCH_H

#include "msg.h"

#define FX_KEYBATCH_COLS 3

typedef struct fx_keybatch {
    char *kbuf;
    size_t kused, kcap;
    uint32_t *klen;
    uint64_t *col[FX_KEYBATCH_COLS]; /* col[c][i]: key i's value c */
    size_t n, cap;
} fx_keybatch_t;

/* Appends key (klen bytes, copied) and its ncol column values v[0..ncol) (ncol at most
 * FX_KEYBATCH_COLS; the other columns are left 0). False, nothing appended: no memory. */
FX_INTERNAL bool fx_keybatch_add(fx_keybatch_t *b, const char *key, uint32_t klen, const uint64_t *v, unsigned ncol);
/* keys[0..n): views of the batch's keys, valid until its next add, clear or free. */
FX_INTERNAL void fx_keybatch_views(const fx_keybatch_t *b, fx_str_t *keys);
/* Empty again, its memory kept for the next keys. */
FX_INTERNAL void fx_keybatch_clear(fx_keybatch_t *b);
FX_INTERNAL void fx_keybatch_free(fx_keybatch_t *b);

#endif
