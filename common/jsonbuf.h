/* jsonbuf.h — a bounded writer for the JSON documents roles print (stats, cluster nodes):
 * every append is clamped to the buffer, so an over-long document is detected (never
 * written past the end, never silently truncated into invalid JSON). */
#ifndef FX_JSONBUF_H
#define FX_JSONBUF_H

#include "fx.h"

typedef struct fx_jbuf {
    char *buf;     /* caller's buffer, always NUL-terminated when cap > 0 */
    size_t cap;
    size_t len;    /* bytes written (never above cap - 1) */
    bool overflow; /* an append did not fit: the document is incomplete */
} fx_jbuf_t;

FX_INTERNAL fx_jbuf_t fx_jbuf(char *buf, size_t cap);
/* printf-style append; on overflow sets overflow and keeps what fitted */
FX_INTERNAL void fx_jbuf_printf(fx_jbuf_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* appends s[0..len) as a JSON string (quotes included), escaping what JSON requires */
FX_INTERNAL void fx_jbuf_str(fx_jbuf_t *j, const char *s, size_t len);

#endif
