/* cli_util.c — see cli_util.h: helpers the CLI commands share (public API and libc only). */
#include "cli_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CLI_CONFIG_MAX (16u << 20)

char *fx_cli_read_config(const char *who, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: config %s is a directory\n", who, path);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot read config %s: %s\n", who, path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *nb = cap < CLI_CONFIG_MAX ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                fprintf(stderr, "%s: config %s is too large\n", who, path);
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = 0;
    return buf;
}

int fx_cli_json_call(fluxon_client *c, fx_cli_json_fn fn, size_t cap, char **buf_p)
{
    size_t len = 0;
    char *buf = malloc(cap);
    int rc = buf ? fn(c, buf, cap, &len) : FLUXON_ERR_NOMEM;
    if (rc == FLUXON_ERR_INVALID_ARGUMENT && buf && len >= cap) {
        char *nb = realloc(buf, len + 1);
        if (nb) {
            buf = nb;
            rc = fn(c, buf, len + 1, &len);
        }
    }
    if (rc != FLUXON_OK) {
        free(buf);
        buf = NULL;
    }
    *buf_p = buf;
    return rc;
}
