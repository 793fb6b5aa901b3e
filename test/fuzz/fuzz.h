/* fuzz.h — shared by the fuzz targets of test/fuzz (issue 22). Each fuzz_X.c defines
 * LLVMFuzzerTestOneInput (and may define fuzz_init, run once before the first input).
 * Built two ways: with clang + libFuzzer (`make fuzz`, coverage-guided runs) and with
 * the project's compiler + replay.c (`make test` replays test/fuzz/corpus/X). An
 * invariant that does not hold is FUZZ_CHECK: it prints what broke and aborts, which
 * both drivers report as a crash of that input. */
#ifndef FX_FUZZ_H
#define FX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...)                                                        \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "FUZZ INVARIANT %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* Encodes one request frame of the catalog's `body` type and feeds it to connection c (the
 * handler targets; the including file has the codec and conn headers). */
#define FZ_SEND(c, type, reqid, body, bp)                                                      \
    do {                                                                                       \
        size_t bl_ = fx_body_##body##_size(bp);                                                \
        uint8_t *f_ = malloc(FX_FRAME_HEADER_BYTES + bl_);                                     \
        fx_frame_header_t h_ = {FX_FRAME_MAGIC, (type), 0, (uint32_t)bl_, 0, (reqid)};         \
        fx_frame_header_encode(&h_, f_);                                                       \
        fx_body_##body##_encode((bp), f_ + FX_FRAME_HEADER_BYTES);                             \
        fx_conn_feed((c), f_, FX_FRAME_HEADER_BYTES + bl_);                                    \
        free(f_);                                                                              \
    } while (0)

#endif
