/* cli_kv.c — `fluxon --role=external --config F put KEY FILE|-`, `get KEY [-o FILE]`,
 * `del KEY`, `ls [PREFIX]`, `stats`: the plain KV API from a shell. Public API only.
 * Exit status: 0 ok, 1 runtime error (NOT_FOUND included), 2 usage error. */
#define _GNU_SOURCE
#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_kv.h"
#include "cli_util.h"

static void kv_key_print(FILE *f, const char *key);

/* Prints what failed and why (naming the key when there is one); the exit status. */
static int kv_fail(fluxon_client *c, const char *what, const char *key, int rc)
{
    size_t klen = key ? strlen(key) : 0;
    if (key && klen > FLUXON_MAX_KEY_BYTES) { /* not echoed whole: it is the problem */
        fprintf(stderr, "fluxon: %s: %s (a key of %zu bytes: at most %d)\n", what, fluxon_status_string(rc), klen,
                FLUXON_MAX_KEY_BYTES);
    } else if (key) {
        fprintf(stderr, "fluxon: %s: %s (key ", what, fluxon_status_string(rc));
        kv_key_print(stderr, key);
        fputs(")\n", stderr);
    } else {
        fprintf(stderr, "fluxon: %s: %s\n", what, fluxon_status_string(rc));
    }
    const char *why = fluxon_last_error_message();
    if (why[0]) fprintf(stderr, "fluxon: %s: the owner says: %s\n", what, why);
    if (c) fx_cli_explain_unavailable(c, what, rc);
    if (rc == FLUXON_ERR_NO_SPACE && !strcmp(what, "get"))
        fprintf(stderr, "fluxon: get: the value exists but this owner has no room for a copy: it is larger than the "
                        "owner's reserve.grant_bytes (its log names both sizes), or every slot is held by readers\n");
    if (rc == FLUXON_ERR_UNKNOWN_OUTCOME && !strcmp(what, "del")) {
        fprintf(stderr, "fluxon: del: the outcome is not known yet (the reason is above): the delete may not have "
                        "reached the master, or a copy may remain on an owner that did not confirm dropping it or has "
                        "not re-published to a restarted master yet; run del again to know\n");
        return FX_CLI_EXIT_UNKNOWN;
    }
    if (rc == FLUXON_ERR_UNKNOWN_OUTCOME) {
        fprintf(stderr, "fluxon: %s: the outcome is not known yet: the owner holds the value (readable through "
                        "it) and publishes it when its master answers; read it back to know\n", what);
        return FX_CLI_EXIT_UNKNOWN;
    }
    return rc == FLUXON_ERR_INVALID_ARGUMENT ? 2 : 1;
}

/* Reads all of f (a file or stdin) into a malloc'ed buffer. */
/* Values are at most 512 MiB (ARCHITECTURE §1); reading stops past that. */
#define KV_MAX_VALUE (512 << 20)

static char *kv_slurp(FILE *f, size_t *len_p)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len > KV_MAX_VALUE) {
            free(buf);
            *len_p = len;
            return NULL;
        }
        if (len == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    *len_p = len;
    return buf;
}

static int kv_unreadable(const char *path)
{
    fprintf(stderr, "fluxon: put: cannot read %s: %s\n", path, strerror(errno));
    return 2;
}

/* get -o PATH, before the get: 2 (usage, as put's unreadable file) when PATH cannot be
 * written — a directory, or in a directory that is missing or not writable; PATH itself
 * is neither made nor truncated here (a failed get leaves it as it was). */
static int kv_unwritable(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) errno = EISDIR;
        else if (access(path, W_OK) == 0) return 0;
    } else if (errno == ENOENT) {
        char dir[4096];
        const char *slash = strrchr(path, '/');
        size_t n = slash ? (size_t)(slash - path) : 0;
        if (n >= sizeof dir) n = sizeof dir - 1;
        memcpy(dir, path, n);
        dir[n] = 0;
        const char *d = slash ? (n ? dir : "/") : ".";
        if (stat(d, &sb) == 0 && !S_ISDIR(sb.st_mode)) errno = ENOTDIR;
        else if (access(d, W_OK | X_OK) == 0) return 0;
    }
    fprintf(stderr, "fluxon: get: cannot write %s: %s\n", path, strerror(errno));
    return 2;
}

int fx_cli_put(fluxon_client *c, int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: put KEY FILE|-\n");
        return 2;
    }
    struct stat sb;
    if (strcmp(argv[1], "-") && stat(argv[1], &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "fluxon: put: %s is a directory\n", argv[1]);
        return 2;
    }
    if (strcmp(argv[1], "-") && stat(argv[1], &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > KV_MAX_VALUE) {
        fprintf(stderr, "fluxon: put: %s is %lld bytes, larger than %d MiB, the most `fluxon put` reads (a value "
                        "must also fit the owner's reserve.grant_bytes)\n", argv[1], (long long)sb.st_size,
                KV_MAX_VALUE >> 20);
        return 2;
    }
    if (!c) return strcmp(argv[1], "-") && access(argv[1], R_OK) ? kv_unreadable(argv[1]) : 0; /* stdin: not read twice */
    FILE *f = strcmp(argv[1], "-") ? fopen(argv[1], "rb") : stdin;
    if (!f) return kv_unreadable(argv[1]);
    size_t len = 0;
    char *buf = kv_slurp(f, &len);
    if (f != stdin) fclose(f);
    if (!buf && len > KV_MAX_VALUE) {
        fprintf(stderr, "fluxon: put: the value is larger than %d MiB, the most `fluxon put` reads (a value must "
                        "also fit the owner's reserve.grant_bytes)\n", KV_MAX_VALUE >> 20);
        return 2;
    }
    if (!buf) return kv_fail(NULL, "put", NULL, FLUXON_ERR_NOMEM);
    int rc = len ? fluxon_put(c, argv[0], buf, len, NULL) : FLUXON_ERR_INVALID_ARGUMENT;
    free(buf);
    if (rc) return kv_fail(c, len ? "put" : "put (an empty value cannot be stored)", argv[0], rc);
    fputs("put ", stdout);
    kv_key_print(stdout, argv[0]);
    printf(": %zu bytes\n", len);
    return 0;
}

/* pin TTL_MS KEY...: pins (0: unpins) values the client's owner holds (issue 42); one line
 * per key with its status; exit 1 when a key was not pinned. */
int fx_cli_pin(fluxon_client *c, int argc, char **argv)
{
    char *end = NULL;
    unsigned long long ttl = argc >= 2 ? strtoull(argv[0], &end, 10) : 0;
    int digits = argc >= 2 && argv[0][0] && strspn(argv[0], "0123456789") == strlen(argv[0]); /* "" is no 0 */
    if (argc < 2 || !digits || !end || *end || ttl > FLUXON_PIN_TTL_MAX_MS) {
        if (argc >= 2) fprintf(stderr, "fluxon: pin: TTL_MS %s must be an integer in 0..%u (FLUXON_PIN_TTL_MAX_MS)\n",
                               argv[0], FLUXON_PIN_TTL_MAX_MS);
        fprintf(stderr, "usage: pin TTL_MS KEY... (TTL_MS 0..%u; 0 unpins)\n", FLUXON_PIN_TTL_MAX_MS);
        return 2;
    }
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    size_t n = (size_t)argc - 1;
    int *st = calloc(n, sizeof *st);
    if (!st) return kv_fail(NULL, "pin", NULL, FLUXON_ERR_NOMEM);
    int rc = fluxon_pin(c, (const char *const *)argv + 1, n, (uint32_t)ttl, 0, st);
    if (rc) {
        free(st);
        return kv_fail(c, "pin", NULL, rc);
    }
    int ex = 0;
    for (size_t i = 0; i < n; i++) {
        fputs(st[i] == FLUXON_OK ? (ttl ? "pinned " : "unpinned ") : "not pinned ", stdout);
        kv_key_print(stdout, argv[1 + i]);
        if (st[i] == FLUXON_OK) printf(ttl ? ": %llu ms\n" : "\n", ttl);
        else printf(": %s\n", fluxon_status_string(st[i]));
        ex |= st[i] != FLUXON_OK;
    }
    free(st);
    return ex;
}

int fx_cli_get(fluxon_client *c, int argc, char **argv)
{
    const char *out = NULL;
    if (argc == 3 && !strcmp(argv[1], "-o")) out = argv[2];
    else if (argc != 1) {
        fprintf(stderr, "usage: get KEY [-o FILE]\n");
        return 2;
    }
    if (!c) return out ? kv_unwritable(out) : 0; /* the arguments' check before the client opens (run_external) */
    fluxon_holder *h = NULL;
    int rc = fluxon_get(c, argv[0], &h);
    if (rc) return kv_fail(c, "get", argv[0], rc);
    FILE *f = out ? fopen(out, "wb") : stdout;
    int ex = 0;
    if (!f || fwrite(fluxon_holder_data(h), 1, fluxon_holder_len(h), f) != fluxon_holder_len(h)) {
        fprintf(stderr, "fluxon: get: cannot write %s: %s\n", out ? out : "stdout", strerror(errno));
        ex = 1;
    }
    if (f && f != stdout) fclose(f);
    fluxon_holder_release(h);
    return ex;
}

int fx_cli_del(fluxon_client *c, int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "usage: del KEY\n");
        return 2;
    }
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    int rc = fluxon_delete(c, argv[0]);
    if (rc) return kv_fail(c, "del", argv[0], rc);
    fputs("deleted ", stdout);
    kv_key_print(stdout, argv[0]);
    putchar('\n');
    return 0;
}

typedef struct kv_ls {
    char last[FLUXON_MAX_KEY_BYTES + 1];
    size_t total;
} kv_ls_t;

/* Prints a key with the bytes that would break the line structure (control characters,
 * backslash) as C escapes: every key printed (ls, put, del) is exactly one line. */
static void kv_key_print(FILE *f, const char *key)
{
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (*p == '\\') fputs("\\\\", f);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
        else putc(*p, f);
    }
}

/* One key per line (kv_key_print). */
static void kv_ls_print(void *arg, const char *key)
{
    kv_ls_t *l = arg;
    kv_key_print(stdout, key);
    putchar('\n');
    snprintf(l->last, sizeof l->last, "%s", key);
    l->total++;
}

int fx_cli_ls(fluxon_client *c, int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "usage: ls [PREFIX]\n");
        return 2;
    }
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    kv_ls_t l = {"", 0};
    for (;;) { /* page through the master's prefix index */
        size_t n = 0;
        int rc = fluxon_list_keys(c, argc ? argv[0] : "", l.total ? l.last : NULL, 1000, kv_ls_print, &l, &n);
        if (rc) return kv_fail(c, "ls", NULL, rc);
        if (n < 1000) break;
    }
    return 0;
}

static int cli_json(fluxon_client *c, const char *name, fx_cli_json_fn fn)
{
    char *buf = NULL;
    int rc = fx_cli_json_call(c, fn, 1 << 16, &buf);
    cJSON *doc = rc == FLUXON_OK && isatty(STDOUT_FILENO) ? cJSON_Parse(buf) : NULL;
    char *pretty = doc ? cJSON_Print(doc) : NULL; /* indented for a reader; one line for a pipe */
    if (rc == FLUXON_OK) printf("%s\n", pretty ? pretty : buf);
    free(pretty);
    cJSON_Delete(doc);
    free(buf);
    return rc ? kv_fail(c, name, NULL, rc) : 0;
}

int fx_cli_stats(fluxon_client *c, int argc, char **argv)
{
    (void)argv;
    if (argc) {
        fprintf(stderr, "usage: stats\n");
        return 2;
    }
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    return cli_json(c, "stats", fluxon_client_stats);
}

int fx_cli_master_stats(fluxon_client *c, int argc, char **argv)
{
    (void)argv;
    if (argc) {
        fprintf(stderr, "usage: master-stats\n");
        return 2;
    }
    if (!c) return 0; /* the arguments' check before the client opens (run_external) */
    return cli_json(c, "master-stats", fluxon_client_master_stats);
}
