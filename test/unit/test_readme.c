/* test_readme.c — every JSON config block of README.md loads (issue 14 item 9): each
 * ```json block is split into its JSON documents, and each must pass fx_config_parse, the
 * loader of every role. A fragment (a block starting with a member, like the "test"
 * section) is loaded inside a minimal owner config. The README is what a new user copies. */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static char *tr_read_readme(void)
{
    static const char *cands[] = {"README.md", "../README.md", "../../README.md"};
    const char *env = getenv("FLUXON_README");
    for (int i = -1; i < (int)(sizeof cands / sizeof *cands); i++) {
        const char *path = i < 0 ? env : cands[i];
        FILE *f = path ? fopen(path, "rb") : NULL;
        if (!f) continue;
        static char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        if (strstr(buf, "# Fluxon")) return buf;
    }
    return NULL;
}

/* Loads one document; returns 1 if the loader accepts it (err names the field if not). */
static int tr_load(const char *doc, char *err, size_t cap)
{
    fx_config_t cfg;
    return fx_config_parse(doc, &cfg, err, cap) == FLUXON_OK;
}

Test(readme, every_json_config_block_loads)
{
    char *md = tr_read_readme();
    cr_assert_not_null(md, "README.md not found (run from the repository root or set FLUXON_README)");
    int blocks = 0, docs = 0;
    for (char *p = strstr(md, "```json\n"); p && blocks < 100; p = strstr(p, "```json\n")) {
        p += 8;
        char *end = strstr(p, "\n```");
        cr_assert_not_null(end, "unterminated ```json block");
        *end = 0;
        blocks++;
        const char *q = p;
        while (*q == ' ' || *q == '\n') q++;
        char err[512];
        if (*q == '"') { /* a member: inside a minimal owner config */
            char doc[4096];
            snprintf(doc, sizeof doc, "{\"role\":\"owner\",\"cluster_id\":\"c1\",%s}", q);
            cr_assert(tr_load(doc, err, sizeof err), "README block %d (%s): %s", blocks, q, err);
            docs++;
            q += strlen(q);
        }
        for (int guard = 0; *q == '{' && guard < 16; guard++) { /* one or more documents */
            const char *next = NULL;
            cJSON *j = cJSON_ParseWithOpts(q, &next, 0);
            cr_assert_not_null(j, "README block %d is not JSON near: %.60s", blocks, next ? next : q);
            char *one = cJSON_PrintUnformatted(j);
            cJSON_Delete(j);
            cr_assert(tr_load(one, err, sizeof err), "README block %d (%s): %s", blocks, one, err);
            free(one);
            docs++;
            q = next;
            while (*q == ' ' || *q == '\n') q++;
        }
        cr_assert_eq(*q, 0, "README block %d: text after its JSON: %.60s", blocks, q);
        p = end + 4;
    }
    cr_assert_geq(blocks, 4, "only %d ```json blocks found", blocks);
    cr_assert_geq(docs, 4);
}
