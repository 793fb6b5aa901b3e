/* msg.h — the ONE message catalog of the control plane (an X-macro list) and the frame
 * format. Names, numeric ids, body structs, encoders and bounds-checked decoders are all
 * generated from it (codec.c), so they cannot drift. Frames are little-endian:
 *   u32 magic 'FLX1' | u16 type | u16 flags | u32 body_len | u32 status | u64 req_id
 * A response carries its request's type and req_id, FX_FLAG_RESPONSE, and a status in
 * the fourth field (the "reserved" word of §4); an error response's body is `error`. */
#ifndef FX_MSG_H
#define FX_MSG_H

#include "fx.h"

#define FX_FRAME_MAGIC 0x31584c46u /* "FLX1" little-endian */
#define FX_FRAME_HEADER_BYTES 24u
#define FX_PROTOCOL_VERSION 1u
#define FX_FLAG_RESPONSE 0x0001u

typedef struct fx_frame_header {
    uint32_t magic;
    uint16_t type;
    uint16_t flags;
    uint32_t body_len;
    int32_t status; /* responses only; 0 in requests */
    uint64_t req_id;
} fx_frame_header_t;

/* A borrowed byte string: a view into a frame (decode) or into caller memory (encode). */
typedef struct fx_str {
    const char *p;
    uint32_t len;
} fx_str_t;

/* An array of u64: on decode it points into the decoder's arena (aligned copy). */
typedef struct fx_u64v {
    const uint64_t *v;
    uint32_t n;
} fx_u64v_t;

/* An array of strings: elements are views into the frame, the array in the arena. */
typedef struct fx_strv {
    const fx_str_t *v;
    uint32_t n;
} fx_strv_t;

/* ---- bodies: F(kind, name); kinds U8 U16 U32 U64 I32 I64 STR U64V STRV ---- */
#define FX_BODY_empty(F)
#define FX_BODY_error(F) F(STR, message)
#define FX_BODY_hello(F)                                                              \
    F(U32, proto_version) F(STR, cluster_id) F(U8, role) F(STR, node_id)                \
    F(U64, generation) F(STR, auth)
#define FX_BODY_hello_ack(F)                                                          \
    F(U32, proto_version) F(STR, node_id) F(U64, generation) F(U64, segment_bytes)      \
    F(STR, ucx_address)
#define FX_BODY_register(F)                                                           \
    F(STR, node_id) F(U64, generation) F(U8, node_role) F(U64, segment_bytes)           \
    F(U64, segment_base) F(STR, ucx_address) F(STR, rkey)
#define FX_BODY_register_ack(F) F(U64, master_generation) F(U32, heartbeat_timeout_ms)
#define FX_BODY_heartbeat(F) F(U64, generation)
#define FX_BODY_ping(F) F(U8, to_master) F(U64, t_ns)
#define FX_BODY_nodes(F)                                                              \
    F(STRV, node_ids) F(U64V, roles) F(U64V, generations) F(U64V, alive)                \
    F(U64V, segment_bytes)
#define FX_BODY_json(F) F(STR, json)

/* ---- catalog: X(NAME, id, request body, response body) ---- */
#define FX_MSG_CATALOG(X)                                                             \
    X(HELLO, 1, hello, hello_ack)            /* first frame on every connection */    \
    X(REGISTER, 2, register, register_ack)   /* owner -> master */                    \
    X(HEARTBEAT, 3, heartbeat, empty)        /* owner -> master, periodic */          \
    X(PING, 4, ping, ping)                   /* external -> owner (-> master) */      \
    X(CLUSTER_NODES, 5, empty, nodes)        /* external -> owner -> master */        \
    X(OWNER_STATS, 6, empty, json)           /* external -> owner */

typedef enum fx_msg_type {
    FX_MSG_NONE = 0,
#define FX_MSG_ENUM(name, id, req, resp) FX_MSG_##name = id,
    FX_MSG_CATALOG(FX_MSG_ENUM)
#undef FX_MSG_ENUM
    FX_MSG_MAX_ID
} fx_msg_type_t;

/* Body structs: fx_body_<name>_t. */
#define FX_FIELD_U8(n) uint8_t n;
#define FX_FIELD_U16(n) uint16_t n;
#define FX_FIELD_U32(n) uint32_t n;
#define FX_FIELD_U64(n) uint64_t n;
#define FX_FIELD_I32(n) int32_t n;
#define FX_FIELD_I64(n) int64_t n;
#define FX_FIELD_STR(n) fx_str_t n;
#define FX_FIELD_U64V(n) fx_u64v_t n;
#define FX_FIELD_STRV(n) fx_strv_t n;
#define FX_FIELD(kind, n) FX_FIELD_##kind(n)
#define FX_BODY_STRUCT(body) typedef struct fx_body_##body { FX_BODY_##body(FX_FIELD) } fx_body_##body##_t;
/* Every body kind, once: generates structs and codec prototypes. */
#define FX_BODY_LIST(B) B(empty) B(error) B(hello) B(hello_ack) B(register) B(register_ack) \
    B(heartbeat) B(ping) B(nodes) B(json)
FX_BODY_LIST(FX_BODY_STRUCT)

/* A bump arena for decoded arrays; freed in one go after the frame is handled. */
typedef struct fx_arena {
    uint8_t *buf;
    size_t cap, used;
    struct fx_arena_chunk *chunks; /* overflow chunks */
} fx_arena_t;
FX_INTERNAL void *fx_arena_alloc(fx_arena_t *a, size_t n);
FX_INTERNAL void fx_arena_reset(fx_arena_t *a);
FX_INTERNAL void fx_arena_free(fx_arena_t *a);

/* Per body: encoded size, encode into out (exactly size bytes), decode (bounds-checked;
 * returns 0 or FLUXON_ERR_PROTOCOL; trailing bytes are an error). */
#define FX_BODY_PROTOS(body)                                                          \
    FX_INTERNAL size_t fx_body_##body##_size(const fx_body_##body##_t *b);             \
    FX_INTERNAL void fx_body_##body##_encode(const fx_body_##body##_t *b, uint8_t *out); \
    FX_INTERNAL int fx_body_##body##_decode(const uint8_t *in, size_t len,            \
                                            fx_body_##body##_t *b, fx_arena_t *arena);
FX_BODY_LIST(FX_BODY_PROTOS)

/* Catalog queries. */
FX_INTERNAL const char *fx_msg_name(unsigned type);   /* "HELLO", or NULL if unknown */
FX_INTERNAL bool fx_msg_known(unsigned type);
/* Validates a whole body against the catalog (request or response body by flags). */
FX_INTERNAL int fx_msg_validate(const fx_frame_header_t *h, const uint8_t *body,
                                fx_arena_t *arena);

/* Header encode/decode. fx_frame_header_decode checks magic and body_len <= max. */
FX_INTERNAL void fx_frame_header_encode(const fx_frame_header_t *h, uint8_t out[FX_FRAME_HEADER_BYTES]);
FX_INTERNAL int fx_frame_header_decode(const uint8_t in[FX_FRAME_HEADER_BYTES], uint64_t max_body,
                                       fx_frame_header_t *h);

static inline fx_str_t fx_str_c(const char *s)
{
    fx_str_t r = {s, s ? (uint32_t)strlen(s) : 0};
    return r;
}
/* Copies a view into a NUL-terminated buffer (truncating); returns false if truncated. */
FX_INTERNAL bool fx_str_copy(fx_str_t s, char *dst, size_t cap);
FX_INTERNAL bool fx_str_eq(fx_str_t s, const char *c);

#endif
