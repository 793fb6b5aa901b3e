/* fuzz.h — shared by the fuzz targets of test/fuzz (issue 22). Each fuzz_X.c defines
 * LLVMFuzzerTestOneInput (and may define fuzz_init, run once before the first input).
 * Built two ways: with clang + libFuzzer (`make fuzz`, coverage-guided runs) and with
 * the project's compiler + replay.c (`make test` replays test/fuzz/corpus/X). An
 * invariant that does not hold is FUZZ_CHECK: it prints what broke and aborts, which
 * both drivers report as a crash of that input. */
#ifndef FX_FUZZ_H
#define FX_FUZZ_H

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A fresh private directory named name-XXXXXX under $FLUXON_TEST_TMP, $TMPDIR or /tmp,
 * into buf (the targets that put files on a disk). */
static inline void fuzz_mkdtemp(char *buf, size_t cap, const char *name)
{
    const char *b = getenv("FLUXON_TEST_TMP");
    if (!b || b[0] != '/') b = getenv("TMPDIR");
    if (!b || b[0] != '/' || strlen(b) > 200) b = "/tmp";
    snprintf(buf, cap, "%s/%s-XXXXXX", b, name);
    FUZZ_CHECK(mkdtemp(buf) != NULL, "mkdtemp %s: %s", buf, strerror(errno));
}

/* Removes dir and the files in it (flat: the targets make no subdirectory). */
static inline void fuzz_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    FUZZ_CHECK(d != NULL, "opendir %s", dir);
    struct dirent *de;
    char p[512];
    for (int i = 0; i < 1000 && (de = readdir(d)); i++) {
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]))) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    FUZZ_CHECK(rmdir(dir) == 0, "rmdir %s: %s", dir, strerror(errno));
}

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
