/* fuzz_codec.c — the frame decoder and every message validator of the catalog (msg.h).
 * The input is a frame: a 24-byte header (its type and flags pick the body kind: a new
 * catalog entry is covered with no change here) and the body. Checked per input:
 *  - fx_frame_header_decode never reads past the header and accepts only what it documents;
 *  - fx_msg_validate agrees with the decoder of the body kind the catalog names, and a body
 *    that decodes re-encodes to exactly the same bytes (the encoding is canonical: no
 *    two byte strings mean the same message, and size() agrees with encode());
 *  - the whole input, fed to a socketless conn as received bytes (in 1..3 pieces), is parsed
 *    without a crash: a stream of frames, partial frames, malformed ones (the conn closes). */
#include <string.h>

#include "conn.h"
#include "fuzz.h"
#include "log.h"

/* decode -> size -> encode -> same bytes */
#define FZ_ROUNDTRIP(body)                                                                     \
    static int fz_rt_##body(const uint8_t *in, size_t len, fx_arena_t *a)                      \
    {                                                                                          \
        fx_body_##body##_t b;                                                                  \
        int rc = fx_body_##body##_decode(in, len, &b, a);                                      \
        if (rc != FLUXON_OK) return rc;                                                        \
        size_t n = fx_body_##body##_size(&b);                                                  \
        FUZZ_CHECK(n == len, #body ": decoded %zu bytes, size() says %zu", len, n);            \
        uint8_t *out = malloc(n + 1);                                                          \
        FUZZ_CHECK(out != NULL, "out of memory");                                              \
        fx_body_##body##_encode(&b, out);                                                      \
        FUZZ_CHECK(memcmp(out, in, n) == 0, #body ": re-encoding differs from the input");     \
        free(out);                                                                             \
        return rc;                                                                             \
    }
FX_BODY_LIST(FZ_ROUNDTRIP)

static int fz_by_catalog(const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *a)
{
    bool resp = h->flags & FX_FLAG_RESPONSE;
    if (!fx_msg_known(h->type)) return FLUXON_ERR_PROTOCOL; /* an unknown type never validates */
    if (resp && h->status != FLUXON_OK) return fz_rt_error(body, h->body_len, a);
    switch (h->type) {
#define FZ_CASE(nm, id, rq, rs) \
    case id: return resp ? fz_rt_##rs(body, h->body_len, a) : fz_rt_##rq(body, h->body_len, a);
        FX_MSG_CATALOG(FZ_CASE)
#undef FZ_CASE
    default: return FLUXON_ERR_PROTOCOL;
    }
}

static void fz_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    (void)c;
    (void)arena;
    FUZZ_CHECK(fx_msg_known(h->type) && !(h->flags & FX_FLAG_RESPONSE), "request %u delivered", h->type);
    if (h->body_len) {
        volatile uint8_t last = body[h->body_len - 1]; /* ASan checks the whole body is readable */
        (void)last;
    }
}
static void fz_on_close(fx_conn_t *c, int status) { (void)c, (void)status; }
static const fx_conn_ops_t fz_ops = {fz_on_request, fz_on_close, NULL};
static fx_reactor_t *fz_reactor;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fx_log_set_level(FX_LOG_OFF);
    FUZZ_CHECK(fx_reactor_create(&fz_reactor) == FLUXON_OK, "reactor");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FX_FRAME_HEADER_BYTES) return 0;
    /* the header as the conn reads it */
    uint8_t hb[FX_FRAME_HEADER_BYTES];
    memcpy(hb, data, sizeof hb);
    fx_frame_header_t h;
    int hrc = fx_frame_header_decode(hb, 1u << 20, &h);
    if (hrc == FLUXON_OK)
        FUZZ_CHECK(h.magic == FX_FRAME_MAGIC && h.body_len <= (1u << 20) && !(h.flags & ~FX_FLAG_RESPONSE),
                   "header accepted with magic %x body_len %u flags %x", h.magic, h.body_len, h.flags);
    /* the body: the rest of the input, whatever body_len says */
    h.body_len = (uint32_t)(size - FX_FRAME_HEADER_BYTES);
    const uint8_t *body = data + FX_FRAME_HEADER_BYTES;
    fx_arena_t a = {0};
    int vrc = fx_msg_validate(&h, body, &a);
    fx_arena_reset(&a);
    int crc = fz_by_catalog(&h, body, &a);
    FUZZ_CHECK(vrc == crc, "type %u flags %x: validate says %d, the catalog's decoder %d", h.type, h.flags, vrc,
               crc);
    fx_arena_free(&a);
    if (vrc == FLUXON_OK) FUZZ_CHECK(fx_msg_name(h.type) != NULL, "valid frame of unnamed type %u", h.type);

    /* the stream path: the input as received bytes, in up to three pieces */
    fx_conn_t *c = fx_conn_new_sink(fz_reactor, &fz_ops, NULL, 1u << 20, "fuzz", NULL, NULL);
    FUZZ_CHECK(c != NULL, "sink conn");
    fx_conn_ref(c); /* a protocol error closes it: it must stay readable here */
    size_t cut1 = size * 7 / 13, cut2 = cut1 + (size - cut1) / 2;
    fx_conn_feed(c, data, cut1);
    fx_conn_feed(c, data + cut1, cut2 - cut1);
    fx_conn_feed(c, data + cut2, size - cut2);
    fx_conn_close(c, FLUXON_ERR_CANCELLED);
    fx_conn_unref(c);
    return 0;
}
