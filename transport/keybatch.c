/* keybatch.c — keys queued for one frame (keybatch.h). */
#include <string.h>

#include "keybatch.h"

static bool keybatch_room(fx_keybatch_t *b, uint32_t klen)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        uint32_t *kl = fx_realloc(b->klen, cap * sizeof *kl);
        if (!kl) return false;
        b->klen = kl;
        for (unsigned c = 0; c < FX_KEYBATCH_COLS; c++) {
            uint64_t *v = fx_realloc(b->col[c], cap * sizeof *v);
            if (!v) return false; /* the columns grown so far stay: cap is raised only when all are */
            b->col[c] = v;
        }
        b->cap = cap;
    }
    if (b->kused + klen > b->kcap) {
        size_t cap = FX_MAX(b->kcap * 2, b->kused + klen + 1024);
        char *k = fx_realloc(b->kbuf, cap);
        if (!k) return false;
        b->kbuf = k;
        b->kcap = cap;
    }
    return true;
}

FX_INTERNAL bool fx_keybatch_add(fx_keybatch_t *b, const char *key, uint32_t klen, const uint64_t *v, unsigned ncol)
{
    if (ncol > FX_KEYBATCH_COLS || !keybatch_room(b, klen)) return false;
    memcpy(b->kbuf + b->kused, key, klen);
    b->kused += klen;
    b->klen[b->n] = klen;
    for (unsigned c = 0; c < FX_KEYBATCH_COLS; c++) b->col[c][b->n] = c < ncol ? v[c] : 0;
    b->n++;
    return true;
}

FX_INTERNAL void fx_keybatch_views(const fx_keybatch_t *b, fx_str_t *keys)
{
    size_t off = 0;
    for (size_t i = 0; i < b->n; off += b->klen[i], i++) keys[i] = (fx_str_t){b->kbuf + off, b->klen[i]};
}

FX_INTERNAL void fx_keybatch_clear(fx_keybatch_t *b) { b->n = b->kused = 0; }

FX_INTERNAL void fx_keybatch_free(fx_keybatch_t *b)
{
    fx_free(b->kbuf);
    fx_free(b->klen);
    for (unsigned c = 0; c < FX_KEYBATCH_COLS; c++) fx_free(b->col[c]);
    memset(b, 0, sizeof *b);
}
