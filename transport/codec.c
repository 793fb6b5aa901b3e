/* codec.c — encoders and bounds-checked decoders generated from the message catalog in
 * msg.h, plus frame headers and the decode arena. Every read checks the remaining
 * length first; a short, oversized or trailing-garbage body is FLUXON_ERR_PROTOCOL. */
#include "msg.h"

/* ---- arena ---- */
struct fx_arena_chunk {
    struct fx_arena_chunk *next;
    uint8_t data[];
};

FX_INTERNAL void *fx_arena_alloc(fx_arena_t *a, size_t n)
{
    n = FX_ALIGN_UP(n ? n : 1, 16);
    if (a->buf && a->used + n <= a->cap) {
        void *p = a->buf + a->used;
        a->used += n;
        return p;
    }
    if (!a->buf && n <= 4096) {
        a->cap = 16384;
        a->buf = fx_malloc(a->cap);
        if (!a->buf) return NULL;
        a->used = n;
        return a->buf;
    }
    struct fx_arena_chunk *c = fx_malloc(sizeof *c + n);
    if (!c) return NULL;
    c->next = a->chunks;
    a->chunks = c;
    return c->data;
}

FX_INTERNAL void fx_arena_reset(fx_arena_t *a)
{
    a->used = 0;
    a->memo_in = NULL;
    a->memo_body = NULL;
    while (a->chunks) {
        struct fx_arena_chunk *n = a->chunks->next;
        fx_free(a->chunks);
        a->chunks = n;
    }
}

FX_INTERNAL void fx_arena_free(fx_arena_t *a)
{
    fx_arena_reset(a);
    fx_free(a->buf);
    a->buf = NULL;
    a->cap = 0;
}

/* ---- primitive writers/readers (little-endian on every host) ----
 * Fixed-width loads and stores through memcpy: one instruction each on x86-64 and
 * AArch64 at any optimisation level (and with coverage instrumentation, where a byte
 * loop costs a comparison callback per byte). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define CODEC_LE16(x) __builtin_bswap16(x)
#define CODEC_LE32(x) __builtin_bswap32(x)
#define CODEC_LE64(x) __builtin_bswap64(x)
#else
#define CODEC_LE16(x) (x)
#define CODEC_LE32(x) (x)
#define CODEC_LE64(x) (x)
#endif
static inline void codec_put_u64(uint8_t **o, uint64_t v)
{
    v = CODEC_LE64(v);
    memcpy(*o, &v, 8);
    *o += 8;
}
static inline void codec_put_u32(uint8_t **o, uint32_t v)
{
    v = CODEC_LE32(v);
    memcpy(*o, &v, 4);
    *o += 4;
}
static inline void codec_put_u64s(uint8_t **o, const uint64_t *v, uint32_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (uint32_t i = 0; i < n; i++) codec_put_u64(o, v[i]);
#else
    if (n) memcpy(*o, v, (size_t)n * 8);
    *o += (size_t)n * 8;
#endif
}
static inline void codec_put_u16(uint8_t **o, uint16_t v)
{
    (*o)[0] = (uint8_t)v;
    (*o)[1] = (uint8_t)(v >> 8);
    *o += 2;
}
static inline void codec_put_u8(uint8_t **o, uint8_t v) { *(*o)++ = v; }
static inline void codec_put_bytes(uint8_t **o, const void *p, uint32_t n)
{
    codec_put_u32(o, n);
    if (n) memcpy(*o, p, n);
    *o += n;
}

typedef struct codec_cursor {
    const uint8_t *p;
    size_t left;
    int bad;
} codec_cursor_t;

static inline bool codec_need(codec_cursor_t *c, size_t n)
{
    if (c->bad || c->left < n) {
        c->bad = 1;
        return false;
    }
    return true;
}
static inline uint64_t codec_load_le(const uint8_t *p, int bytes)
{
    uint64_t v64;
    uint32_t v32;
    uint16_t v16;
    switch (bytes) {
    case 8: memcpy(&v64, p, 8); return CODEC_LE64(v64);
    case 4: memcpy(&v32, p, 4); return CODEC_LE32(v32);
    case 2: memcpy(&v16, p, 2); return CODEC_LE16(v16);
    default: return p[0];
    }
}
static inline uint64_t codec_get_le(codec_cursor_t *c, int bytes)
{
    if (!codec_need(c, (size_t)bytes)) return 0;
    uint64_t v = codec_load_le(c->p, bytes);
    c->p += bytes;
    c->left -= (size_t)bytes;
    return v;
}
static inline fx_str_t codec_get_str(codec_cursor_t *c)
{
    fx_str_t s = {NULL, 0};
    uint32_t n = (uint32_t)codec_get_le(c, 4);
    if (!codec_need(c, n)) return s;
    s.p = (const char *)c->p;
    s.len = n;
    c->p += n;
    c->left -= n;
    return s;
}
static inline fx_u64v_t codec_get_u64v(codec_cursor_t *c, fx_arena_t *a)
{
    fx_u64v_t v = {NULL, 0};
    uint32_t n = (uint32_t)codec_get_le(c, 4);
    if (c->bad || n > c->left / 8) {
        c->bad = 1;
        return v;
    }
    uint64_t *arr = fx_arena_alloc(a, (size_t)n * 8);
    if (!arr) {
        c->bad = 1;
        return v;
    }
    /* n <= left / 8 was checked: the whole array is there */
    memcpy(arr, c->p, (size_t)n * 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (uint32_t i = 0; i < n; i++) arr[i] = CODEC_LE64(arr[i]);
#endif
    c->p += (size_t)n * 8;
    c->left -= (size_t)n * 8;
    v.v = arr;
    v.n = n;
    return v;
}
static inline fx_strv_t codec_get_strv(codec_cursor_t *c, fx_arena_t *a)
{
    fx_strv_t v = {NULL, 0};
    uint32_t n = (uint32_t)codec_get_le(c, 4);
    if (c->bad || n > c->left / 4) { /* each element needs at least its length word */
        c->bad = 1;
        return v;
    }
    fx_str_t *arr = fx_arena_alloc(a, (size_t)n * sizeof(fx_str_t));
    if (!arr) {
        c->bad = 1;
        return v;
    }
    for (uint32_t i = 0; i < n && !c->bad; i++) arr[i] = codec_get_str(c);
    v.v = arr;
    v.n = n;
    return v;
}

/* ---- generated per-body functions ---- */
#define CODEC_SZ_U8(fld) + 1
#define CODEC_SZ_U16(fld) + 2
#define CODEC_SZ_U32(fld) + 4
#define CODEC_SZ_U64(fld) + 8
#define CODEC_SZ_I32(fld) + 4
#define CODEC_SZ_I64(fld) + 8
#define CODEC_SZ_STR(fld) + 4 + (size_t)b->fld.len
#define CODEC_SZ_U64V(fld) + 4 + (size_t)b->fld.n * 8
#define CODEC_SZ_STRV(fld) + codec_strv_size(b->fld)
#define CODEC_SZ(kind, fld) CODEC_SZ_##kind(fld)

#define CODEC_ENC_U8(fld) codec_put_u8(&o, b->fld);
#define CODEC_ENC_U16(fld) codec_put_u16(&o, b->fld);
#define CODEC_ENC_U32(fld) codec_put_u32(&o, b->fld);
#define CODEC_ENC_U64(fld) codec_put_u64(&o, b->fld);
#define CODEC_ENC_I32(fld) codec_put_u32(&o, (uint32_t)b->fld);
#define CODEC_ENC_I64(fld) codec_put_u64(&o, (uint64_t)b->fld);
#define CODEC_ENC_STR(fld) codec_put_bytes(&o, b->fld.p, b->fld.len);
#define CODEC_ENC_U64V(fld)                                                    \
    codec_put_u32(&o, b->fld.n);                                               \
    codec_put_u64s(&o, b->fld.v, b->fld.n);
#define CODEC_ENC_STRV(fld)                                                    \
    codec_put_u32(&o, b->fld.n);                                               \
    for (uint32_t i_ = 0; i_ < b->fld.n; i_++) codec_put_bytes(&o, b->fld.v[i_].p, b->fld.v[i_].len);
#define CODEC_ENC(kind, fld) CODEC_ENC_##kind(fld)

#define CODEC_DEC_U8(fld) b->fld = (uint8_t)codec_get_le(&c, 1);
#define CODEC_DEC_U16(fld) b->fld = (uint16_t)codec_get_le(&c, 2);
#define CODEC_DEC_U32(fld) b->fld = (uint32_t)codec_get_le(&c, 4);
#define CODEC_DEC_U64(fld) b->fld = codec_get_le(&c, 8);
#define CODEC_DEC_I32(fld) b->fld = (int32_t)(uint32_t)codec_get_le(&c, 4);
#define CODEC_DEC_I64(fld) b->fld = (int64_t)codec_get_le(&c, 8);
#define CODEC_DEC_STR(fld) b->fld = codec_get_str(&c);
#define CODEC_DEC_U64V(fld) b->fld = codec_get_u64v(&c, arena);
#define CODEC_DEC_STRV(fld) b->fld = codec_get_strv(&c, arena);
#define CODEC_DEC(kind, fld) CODEC_DEC_##kind(fld)

static inline size_t codec_strv_size(fx_strv_t v)
{
    size_t s = 4;
    for (uint32_t i = 0; i < v.n; i++) s += 4 + (size_t)v.v[i].len;
    return s;
}

#define CODEC_DEFINE(body)                                                              \
    FX_INTERNAL size_t fx_body_##body##_size(const fx_body_##body##_t *b)              \
    {                                                                                   \
        (void)b;                                                                        \
        return 0 FX_BODY_##body(CODEC_SZ);                                              \
    }                                                                                   \
    FX_INTERNAL void fx_body_##body##_encode(const fx_body_##body##_t *b, uint8_t *out) \
    {                                                                                   \
        uint8_t *o = out;                                                               \
        (void)b;                                                                        \
        (void)o;                                                                        \
        FX_BODY_##body(CODEC_ENC)                                                       \
    }                                                                                   \
    FX_INTERNAL int fx_body_##body##_decode(const uint8_t *in, size_t len,             \
                                            fx_body_##body##_t *b, fx_arena_t *arena)  \
    {                                                                                   \
        codec_cursor_t c = {in, len, 0};                                                \
        if (arena && arena->memo_body && arena->memo_in == in && arena->memo_len == len && \
            arena->memo_kind == FX_BODY_KIND_##body) {                                  \
            memcpy(b, arena->memo_body, sizeof *b); /* validated: decoded once per hop */ \
            return FLUXON_OK;                                                           \
        }                                                                               \
        memset(b, 0, sizeof *b);                                                        \
        FX_BODY_##body(CODEC_DEC)                                                       \
        return (c.bad || c.left != 0) ? FLUXON_ERR_PROTOCOL : FLUXON_OK;                \
    }
FX_BODY_LIST(CODEC_DEFINE)

/* ---- catalog tables ---- */
typedef int (*codec_validate_fn)(const uint8_t *in, size_t len, fx_arena_t *arena);
#define CODEC_VALIDATOR(body)                                                          \
    static int codec_validate_##body(const uint8_t *in, size_t len, fx_arena_t *arena) \
    {                                                                                  \
        fx_body_##body##_t tmp, *b = arena ? fx_arena_alloc(arena, sizeof *b) : NULL;  \
        int rc = fx_body_##body##_decode(in, len, b ? b : &tmp, arena);                \
        if (rc == FLUXON_OK && b) {                                                    \
            arena->memo_in = in;                                                       \
            arena->memo_len = len;                                                     \
            arena->memo_kind = FX_BODY_KIND_##body;                                    \
            arena->memo_body = b;                                                      \
        }                                                                              \
        return rc;                                                                     \
    }
FX_BODY_LIST(CODEC_VALIDATOR)

typedef struct codec_entry {
    const char *name;
    codec_validate_fn req, resp;
} codec_entry_t;

static const codec_entry_t codec_table[FX_MSG_MAX_ID] = {
#define CODEC_ENTRY(nm, id, rq, rs) [id] = {#nm, codec_validate_##rq, codec_validate_##rs},
    FX_MSG_CATALOG(CODEC_ENTRY)
#undef CODEC_ENTRY
};

FX_INTERNAL bool fx_msg_known(unsigned type)
{
    return type > 0 && type < FX_MSG_MAX_ID && codec_table[type].name != NULL;
}

FX_INTERNAL unsigned fx_msg_by_name(const char *name)
{
    for (unsigned t = 1; t < FX_MSG_MAX_ID; t++)
        if (codec_table[t].name && name && strcmp(codec_table[t].name, name) == 0) return t;
    return 0;
}

FX_INTERNAL const char *fx_msg_name(unsigned type)
{
    return fx_msg_known(type) ? codec_table[type].name : NULL;
}

FX_INTERNAL int fx_msg_validate(const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    if (!fx_msg_known(h->type)) return FLUXON_ERR_PROTOCOL;
    const codec_entry_t *e = &codec_table[h->type];
    if (h->flags & FX_FLAG_RESPONSE) {
        if (h->status != FLUXON_OK) return codec_validate_error(body, h->body_len, arena);
        return e->resp(body, h->body_len, arena);
    }
    return e->req(body, h->body_len, arena);
}

FX_INTERNAL void fx_frame_header_encode(const fx_frame_header_t *h, uint8_t out[FX_FRAME_HEADER_BYTES])
{
    uint8_t *o = out;
    codec_put_u32(&o, h->magic);
    codec_put_u16(&o, h->type);
    codec_put_u16(&o, h->flags);
    codec_put_u32(&o, h->body_len);
    codec_put_u32(&o, (uint32_t)h->status);
    codec_put_u64(&o, h->req_id);
}

FX_INTERNAL int fx_frame_header_decode(const uint8_t in[FX_FRAME_HEADER_BYTES], uint64_t max_body,
                                       fx_frame_header_t *h)
{
    codec_cursor_t c = {in, FX_FRAME_HEADER_BYTES, 0};
    h->magic = (uint32_t)codec_get_le(&c, 4);
    h->type = (uint16_t)codec_get_le(&c, 2);
    h->flags = (uint16_t)codec_get_le(&c, 2);
    h->body_len = (uint32_t)codec_get_le(&c, 4);
    h->status = (int32_t)(uint32_t)codec_get_le(&c, 4);
    h->req_id = codec_get_le(&c, 8);
    if (h->magic != FX_FRAME_MAGIC) return FLUXON_ERR_PROTOCOL;
    if (h->body_len > max_body) return FLUXON_ERR_PROTOCOL;
    if (h->flags & ~FX_FLAG_RESPONSE) return FLUXON_ERR_PROTOCOL;
    return FLUXON_OK;
}

FX_INTERNAL bool fx_str_copy(fx_str_t s, char *dst, size_t cap)
{
    if (!cap) return false;
    size_t n = s.len < cap - 1 ? s.len : cap - 1;
    if (n) memcpy(dst, s.p, n);
    dst[n] = 0;
    return n == s.len;
}

FX_INTERNAL bool fx_str_eq(fx_str_t s, const char *cstr)
{
    size_t n = strlen(cstr);
    return s.len == n && (n == 0 || memcmp(s.p, cstr, n) == 0);
}

#undef CODEC_SZ_U8
#undef CODEC_SZ_U16
#undef CODEC_SZ_U32
#undef CODEC_SZ_U64
#undef CODEC_SZ_I32
#undef CODEC_SZ_I64
#undef CODEC_SZ_STR
#undef CODEC_SZ_U64V
#undef CODEC_SZ_STRV
#undef CODEC_SZ
#undef CODEC_ENC_U8
#undef CODEC_ENC_U16
#undef CODEC_ENC_U32
#undef CODEC_ENC_U64
#undef CODEC_ENC_I32
#undef CODEC_ENC_I64
#undef CODEC_ENC_STR
#undef CODEC_ENC_U64V
#undef CODEC_ENC_STRV
#undef CODEC_ENC
#undef CODEC_DEC_U8
#undef CODEC_DEC_U16
#undef CODEC_DEC_U32
#undef CODEC_DEC_U64
#undef CODEC_DEC_I32
#undef CODEC_DEC_I64
#undef CODEC_DEC_STR
#undef CODEC_DEC_U64V
#undef CODEC_DEC_STRV
#undef CODEC_DEC
#undef CODEC_DEFINE
#undef CODEC_VALIDATOR
