/* jsonbuf.c — bounded JSON writer (see jsonbuf.h). */
#include "jsonbuf.h"

#include <stdarg.h>
#include <stdio.h>

FX_INTERNAL fx_jbuf_t fx_jbuf(char *buf, size_t cap)
{
    fx_jbuf_t j = {buf, cap, 0, cap == 0};
    if (cap) buf[0] = '\0';
    return j;
}

FX_INTERNAL void fx_jbuf_printf(fx_jbuf_t *j, const char *fmt, ...)
{
    if (j->overflow) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= j->cap - j->len) {
        j->overflow = true;
        j->len = j->cap - 1;
        j->buf[j->len] = '\0';
        return;
    }
    j->len += (size_t)w;
}

FX_INTERNAL void fx_jbuf_str(fx_jbuf_t *j, const char *s, size_t len)
{
    fx_jbuf_printf(j, "\"");
    for (size_t i = 0; i < len && !j->overflow; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fx_jbuf_printf(j, "\\%c", c);
        else if (c < 0x20) fx_jbuf_printf(j, "\\u%04x", c);
        else fx_jbuf_printf(j, "%c", c);
    }
    fx_jbuf_printf(j, "\"");
}
