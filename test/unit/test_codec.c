/* test_codec.c — the message catalog's encoders and decoders: every body round-trips;
 * truncated, trailing, oversized, unknown-type and random frames are rejected without
 * crashing. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "msg.h"

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Fills a body of any kind with values derived from a seed (strings and arrays point
 * into static storage). */
static char str_pool[8][64];
static uint64_t u64_pool[8][16];
static fx_str_t strv_pool[8][5];
static int pool_i;

#define FILL_U8(fld) b->fld = (uint8_t)rnd();
#define FILL_U16(fld) b->fld = (uint16_t)rnd();
#define FILL_U32(fld) b->fld = (uint32_t)rnd();
#define FILL_U64(fld) b->fld = rnd();
#define FILL_I32(fld) b->fld = (int32_t)rnd();
#define FILL_I64(fld) b->fld = (int64_t)rnd();
#define FILL_STR(fld)                                                    \
    {                                                                  \
        int k_ = pool_i++ % 8;                                         \
        int l_ = (int)(rnd() % 40);                                    \
        for (int i_ = 0; i_ < l_; i_++) str_pool[k_][i_] = (char)rnd(); \
        b->fld.p = str_pool[k_];                                         \
        b->fld.len = (uint32_t)l_;                                       \
    }
#define FILL_U64V(fld)                                                   \
    {                                                                  \
        int k_ = pool_i++ % 8;                                         \
        uint32_t c_ = (uint32_t)(rnd() % 16);                          \
        for (uint32_t i_ = 0; i_ < c_; i_++) u64_pool[k_][i_] = rnd(); \
        b->fld.v = u64_pool[k_];                                         \
        b->fld.n = c_;                                                   \
    }
#define FILL_STRV(fld)                                                   \
    {                                                                  \
        int k_ = pool_i++ % 8;                                         \
        uint32_t c_ = (uint32_t)(rnd() % 5);                           \
        for (uint32_t i_ = 0; i_ < c_; i_++) {                         \
            strv_pool[k_][i_].p = "key-abc";                           \
            strv_pool[k_][i_].len = (uint32_t)(rnd() % 8);             \
        }                                                              \
        b->fld.v = strv_pool[k_];                                        \
        b->fld.n = c_;                                                   \
    }
#define FILL(kind, fld) FILL_##kind(fld)

#define EQ_U8(fld) cr_assert_eq(a->fld, b->fld, #fld);
#define EQ_U16(fld) cr_assert_eq(a->fld, b->fld, #fld);
#define EQ_U32(fld) cr_assert_eq(a->fld, b->fld, #fld);
#define EQ_U64(fld) cr_assert_eq(a->fld, b->fld, #fld);
#define EQ_I32(fld) cr_assert_eq(a->fld, b->fld, #fld);
#define EQ_I64(fld) cr_assert_eq(a->fld, b->fld, #fld);
#define EQ_STR(fld) cr_assert(a->fld.len == b->fld.len && !memcmp(a->fld.p, b->fld.p, a->fld.len), #fld);
#define EQ_U64V(fld)                                                     \
    cr_assert_eq(a->fld.n, b->fld.n, #fld);                                  \
    for (uint32_t i_ = 0; i_ < a->fld.n; i_++) cr_assert_eq(a->fld.v[i_], b->fld.v[i_], #fld);
#define EQ_STRV(fld)                                                     \
    cr_assert_eq(a->fld.n, b->fld.n, #fld);                                  \
    for (uint32_t i_ = 0; i_ < a->fld.n; i_++)                           \
        cr_assert(a->fld.v[i_].len == b->fld.v[i_].len &&                  \
                  !memcmp(a->fld.v[i_].p, b->fld.v[i_].p, a->fld.v[i_].len), #fld);
#define EQ(kind, fld) EQ_##kind(fld)

#define ROUNDTRIP_FNS(body)                                                         \
    static void fill_##body(fx_body_##body##_t *b) { (void)b; FX_BODY_##body(FILL) } \
    static void eq_##body(const fx_body_##body##_t *a, const fx_body_##body##_t *b)   \
    {                                                                               \
        (void)a;                                                                    \
        (void)b;                                                                    \
        FX_BODY_##body(EQ)                                                          \
    }                                                                               \
    static void roundtrip_##body(void)                                              \
    {                                                                               \
        for (int it = 0; it < 200; it++) {                                          \
            fx_body_##body##_t in, out;                                             \
            memset(&in, 0, sizeof in);                                              \
            fill_##body(&in);                                                       \
            size_t n = fx_body_##body##_size(&in);                                  \
            uint8_t *buf = malloc(n + 1);                                           \
            fx_body_##body##_encode(&in, buf);                                      \
            fx_arena_t ar = {0};                                                    \
            cr_assert_eq(fx_body_##body##_decode(buf, n, &out, &ar), FLUXON_OK, #body); \
            eq_##body(&in, &out);                                                   \
            for (size_t cut = 0; cut < n; cut++)                                    \
                cr_assert_eq(fx_body_##body##_decode(buf, cut, &out, &ar),         \
                             FLUXON_ERR_PROTOCOL, #body " truncated at %zu", cut);  \
            buf[n] = 0x5a;                                                          \
            cr_assert_eq(fx_body_##body##_decode(buf, n + 1, &out, &ar),           \
                         FLUXON_ERR_PROTOCOL, #body " with a trailing byte");       \
            fx_arena_free(&ar);                                                     \
            free(buf);                                                              \
        }                                                                           \
    }
FX_BODY_LIST(ROUNDTRIP_FNS)

Test(codec, every_body_roundtrips_and_rejects_truncation)
{
#define CALL_RT(body) roundtrip_##body();
    FX_BODY_LIST(CALL_RT)
#undef CALL_RT
}

Test(codec, catalog_names_and_ids)
{
    cr_assert_str_eq(fx_msg_name(FX_MSG_HELLO), "HELLO");
    cr_assert_str_eq(fx_msg_name(FX_MSG_CLUSTER_NODES), "CLUSTER_NODES");
    cr_assert_null(fx_msg_name(0));
    cr_assert_null(fx_msg_name(FX_MSG_MAX_ID));
    cr_assert_null(fx_msg_name(60000));
    cr_assert(!fx_msg_known(0));
    cr_assert(fx_msg_known(FX_MSG_PING));
}

Test(codec, header_roundtrip_and_checks)
{
    fx_frame_header_t h = {FX_FRAME_MAGIC, FX_MSG_PING, FX_FLAG_RESPONSE, 1234, FLUXON_ERR_TIMEOUT, 0x1122334455667788ull};
    uint8_t buf[FX_FRAME_HEADER_BYTES];
    fx_frame_header_encode(&h, buf);
    cr_assert_eq(memcmp(buf, "FLX1", 4), 0, "magic spells FLX1 on the wire");
    fx_frame_header_t g;
    cr_assert_eq(fx_frame_header_decode(buf, 1 << 20, &g), FLUXON_OK);
    cr_assert(g.type == h.type && g.flags == h.flags && g.body_len == h.body_len && g.status == h.status &&
              g.req_id == h.req_id);
    /* oversized */
    cr_assert_eq(fx_frame_header_decode(buf, 1000, &g), FLUXON_ERR_PROTOCOL);
    /* bad magic */
    buf[0] ^= 1;
    cr_assert_eq(fx_frame_header_decode(buf, 1 << 20, &g), FLUXON_ERR_PROTOCOL);
    buf[0] ^= 1;
    /* unknown flag bits */
    h.flags = 0x8000;
    fx_frame_header_encode(&h, buf);
    cr_assert_eq(fx_frame_header_decode(buf, 1 << 20, &g), FLUXON_ERR_PROTOCOL);
}

Test(codec, validate_unknown_type_and_error_bodies)
{
    fx_arena_t ar = {0};
    uint8_t body[64] = {0};
    fx_frame_header_t h = {FX_FRAME_MAGIC, 999, 0, 0, 0, 1};
    cr_assert_eq(fx_msg_validate(&h, body, &ar), FLUXON_ERR_PROTOCOL, "unknown type");
    h.type = FX_MSG_CLUSTER_NODES; /* empty request body */
    cr_assert_eq(fx_msg_validate(&h, body, &ar), FLUXON_OK);
    h.body_len = 1;
    cr_assert_eq(fx_msg_validate(&h, body, &ar), FLUXON_ERR_PROTOCOL, "empty body with a byte");
    /* an error response carries {message} whatever the type */
    fx_body_error_t e = {fx_str_c("nope")};
    size_t n = fx_body_error_size(&e);
    fx_body_error_encode(&e, body);
    fx_frame_header_t r = {FX_FRAME_MAGIC, FX_MSG_REGISTER, FX_FLAG_RESPONSE, (uint32_t)n, FLUXON_ERR_AUTH, 1};
    cr_assert_eq(fx_msg_validate(&r, body, &ar), FLUXON_OK);
    r.body_len = (uint32_t)n - 1;
    cr_assert_eq(fx_msg_validate(&r, body, &ar), FLUXON_ERR_PROTOCOL);
    fx_arena_free(&ar);
}

Test(codec, huge_array_counts_are_rejected_before_allocating)
{
    /* a u64 array claiming 2^32-1 elements in a 4-byte body */
    uint8_t body[4 + 4 + 4] = {0xff, 0xff, 0xff, 0xff};
    fx_arena_t ar = {0};
    fx_body_nodes_t b;
    cr_assert_eq(fx_body_nodes_decode(body, sizeof body, &b, &ar), FLUXON_ERR_PROTOCOL);
    fx_arena_free(&ar);
}

Test(codec, fuzz_random_frames_never_crash)
{
    fx_arena_t ar = {0};
    uint8_t buf[512];
    int accepted = 0;
    for (int it = 0; it < 200000; it++) {
        size_t n = rnd() % sizeof buf;
        for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rnd();
        if (it % 3 == 0 && n >= FX_FRAME_HEADER_BYTES) { /* plausible header, random body */
            fx_frame_header_t h = {FX_FRAME_MAGIC, (uint16_t)(rnd() % (FX_MSG_MAX_ID + 2)),
                                   (uint16_t)(rnd() & 1), (uint32_t)(n - FX_FRAME_HEADER_BYTES),
                                   (int32_t)(rnd() % 3) - 1, rnd()};
            fx_frame_header_encode(&h, buf);
        }
        fx_frame_header_t h;
        if (n >= FX_FRAME_HEADER_BYTES && fx_frame_header_decode(buf, 1 << 16, &h) == FLUXON_OK &&
            h.body_len <= n - FX_FRAME_HEADER_BYTES) {
            if (fx_msg_validate(&h, buf + FX_FRAME_HEADER_BYTES, &ar) == FLUXON_OK) accepted++;
            fx_arena_reset(&ar);
        }
    }
    fx_arena_free(&ar);
    cr_log_info("random frames accepted as valid: %d of 200000", accepted);
}

Test(codec, a_validated_body_is_decoded_once_and_forgotten_at_reset)
{
    fx_arena_t ar = {0};
    fx_str_t keys[3] = {fx_str_c("a"), fx_str_c("bb"), fx_str_c("ccc")};
    uint64_t lens[2] = {1, 2};
    fx_body_get_start_t g = {{keys, 3}, {lens, 2}, 1, 250};
    uint8_t body[256];
    size_t n = fx_body_get_start_size(&g);
    cr_assert_leq(n, sizeof body);
    fx_body_get_start_encode(&g, body);
    fx_frame_header_t h = {FX_FRAME_MAGIC, FX_MSG_GET_START, 0, (uint32_t)n, 0, 7};
    cr_assert_eq(fx_msg_validate(&h, body, &ar), FLUXON_OK);
    cr_assert_not_null(ar.memo_body, "validation keeps what it decoded");

    fx_body_get_start_t d1, d2;
    cr_assert_eq(fx_body_get_start_decode(body, n, &d1, &ar), FLUXON_OK);
    cr_assert_eq(fx_body_get_start_decode(body, n, &d2, &ar), FLUXON_OK);
    cr_assert_eq(d1.keys.v, d2.keys.v, "both handlers' decodes share the one validated decode");
    cr_assert_eq(d1.keys.n, 3);
    cr_assert_eq(d1.keys.v[2].len, 3);
    cr_assert_eq(memcmp(d1.keys.v[1].p, "bb", 2), 0);
    cr_assert_eq(d1.group_lens.n, 2);
    cr_assert_eq(d1.group_lens.v[1], 2);
    cr_assert_eq(d1.best_effort, 1);
    cr_assert_eq(d1.timeout_ms, 250);

    /* the same bytes read as another body kind, or a shorter length, decode afresh */
    fx_body_json_t j;
    cr_assert_eq(fx_body_json_decode(body, 4, &j, &ar), FLUXON_ERR_PROTOCOL);
    cr_assert_eq(fx_body_get_start_decode(body, n - 1, &d2, &ar), FLUXON_ERR_PROTOCOL);

    /* after the reset (the next frame) new bytes at the same address are decoded */
    fx_arena_reset(&ar);
    cr_assert_null(ar.memo_body);
    g.timeout_ms = 999;
    fx_body_get_start_encode(&g, body);
    cr_assert_eq(fx_body_get_start_decode(body, n, &d2, &ar), FLUXON_OK);
    cr_assert_eq(d2.timeout_ms, 999);

    /* a body that fails validation leaves no memo */
    fx_arena_reset(&ar);
    h.body_len = (uint32_t)n - 1;
    cr_assert_eq(fx_msg_validate(&h, body, &ar), FLUXON_ERR_PROTOCOL);
    cr_assert_null(ar.memo_body);
    fx_arena_free(&ar);
}
