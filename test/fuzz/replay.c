/* replay.c — the `make test` driver of a fuzz target: feeds every file of the target's
 * corpus (FUZZ_CORPUS, or the files and folders named on the command line) to
 * LLVMFuzzerTestOneInput once, with no fuzzing engine, and prints how many it ran.
 * Options starting with "--" (the ones scripts/run-tests passes to suites) are ignored.
 * A crash or a broken invariant aborts, which fails the suite. */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

static int replay_path(const char *path, size_t *count)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s does not exist\n", path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*count)++;
        return replay_file(path);
    }
    struct dirent **ents = NULL;
    int n = scandir(path, &ents, NULL, alphasort), rc = 0;
    if (n < 0) {
        fprintf(stderr, "replay: cannot list %s\n", path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char p[4096];
        if (ents[i]->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", path, ents[i]->d_name);
            if (replay_path(p, count) != 0) rc = -1;
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    size_t count = 0;
    int rc = 0, named = 0;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) == 0) continue;
        named = 1;
        if (replay_path(argv[i], &count) != 0) rc = 1;
    }
#ifdef FUZZ_CORPUS
    if (!named && replay_path(FUZZ_CORPUS, &count) != 0) rc = 1;
#endif
    printf("replayed %zu input(s)%s\n", count, rc ? " (some could not be read)" : "");
    if (!count) rc = 1; /* an empty corpus is a broken test */
    return rc;
}
