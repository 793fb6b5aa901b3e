/* test_readme.c — every JSON config block of README.md and of each docs/ file loads (issue 14 item
 * 9): each ```json block is split into its JSON documents, and each must pass
 * fx_config_parse, the loader of every role. A fragment (a block starting with a member,
 * like the "test" section) is loaded inside a minimal owner config. The README and the
 * docs are what a new user copies. A block just after an HTML comment saying "not a node
 * config" (or "sglang-extra-config") is another program's config and is skipped. */
#define _GNU_SOURCE /* memmem */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"

/* The repository root as seen from the current directory ("" , "../" or "../../"), found by
 * its README.md; $FLUXON_README names the README itself. NULL when not found. */
static const char *tr_root(void)
{
    static const char *cands[] = {"", "../", "../../"};
    for (size_t i = 0; i < sizeof cands / sizeof *cands; i++) {
        char path[64];
        snprintf(path, sizeof path, "%sREADME.md", cands[i]);
        if (access(path, R_OK) == 0) return cands[i];
    }
    return NULL;
}

/* The text of path (a static buffer, overwritten by the next call), or NULL. */
static char *tr_read(const char *path)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static char *tr_read_readme(void)
{
    const char *env = getenv("FLUXON_README");
    if (env) return tr_read(env);
    const char *root = tr_root();
    char path[64];
    snprintf(path, sizeof path, "%sREADME.md", root ? root : "");
    char *md = root ? tr_read(path) : NULL;
    return md && strstr(md, "# Fluxon") ? md : NULL;
}

/* Loads one document; returns 1 if the loader accepts it (err names the field if not). */
static int tr_load(const char *doc, char *err, size_t cap)
{
    fx_config_t cfg;
    return fx_config_parse(doc, &cfg, err, cap) == FLUXON_OK;
}

/* Loads every ```json block of md (named name in messages); *docs_p counts its documents.
 * Returns the number of blocks. */
static int tr_check_blocks(const char *name, char *md, int *docs_p)
{
    int blocks = 0, docs = 0;
    for (char *p = strstr(md, "```json\n"); p && blocks < 100; p = strstr(p, "```json\n")) {
        /* a block an HTML comment just before marks as another program's config (SGLang's
         * extra config: python/tests/test_sglang_docs.py loads it) is not a node's */
        char *line = p > md ? p - 1 : p;
        while (line > md && (*line == '\n' || *line == ' ')) line--;
        bool foreign = line - md >= 3 && strncmp(line - 2, "-->", 3) == 0;
        if (foreign) {
            char *open = line;
            while (open > md && strncmp(open, "<!--", 4) != 0) open--;
            foreign = (size_t)(line - open) < 400 && (memmem(open, (size_t)(line - open), "not a node config", 17) ||
                                                       memmem(open, (size_t)(line - open), "sglang-extra-config", 19));
        }
        p += 8;
        if (foreign) continue;
        char *end = strstr(p, "\n```");
        cr_assert_not_null(end, "%s: unterminated ```json block", name);
        *end = 0;
        blocks++;
        const char *q = p;
        while (*q == ' ' || *q == '\n') q++;
        char err[512];
        if (*q == '"') { /* a member: inside a minimal owner config */
            char doc[4096];
            snprintf(doc, sizeof doc, "{\"role\":\"owner\",\"cluster_id\":\"c1\",%s}", q);
            cr_assert(tr_load(doc, err, sizeof err), "%s block %d (%s): %s", name, blocks, q, err);
            docs++;
            q += strlen(q);
        }
        for (int guard = 0; *q == '{' && guard < 16; guard++) { /* one or more documents */
            const char *next = NULL;
            cJSON *j = cJSON_ParseWithOpts(q, &next, 0);
            cr_assert_not_null(j, "%s block %d is not JSON near: %.60s", name, blocks, next ? next : q);
            char *one = cJSON_PrintUnformatted(j);
            cJSON_Delete(j);
            cr_assert(tr_load(one, err, sizeof err), "%s block %d (%s): %s", name, blocks, one, err);
            free(one);
            docs++;
            q = next;
            while (*q == ' ' || *q == '\n') q++;
        }
        cr_assert_eq(*q, 0, "%s block %d: text after its JSON: %.60s", name, blocks, q);
        p = end + 4;
    }
    *docs_p += docs;
    return blocks;
}

Test(readme, every_json_config_block_loads)
{
    char *md = tr_read_readme();
    cr_assert_not_null(md, "README.md not found (run from the repository root or set FLUXON_README)");
    int docs = 0;
    int blocks = tr_check_blocks("README", md, &docs);
    cr_assert_geq(blocks, 4, "only %d ```json blocks found", blocks);
    cr_assert_geq(docs, 4);
}

Test(readme, every_json_config_block_of_the_docs_loads)
{
    const char *root = tr_root();
    cr_assert_not_null(root, "README.md not found (run from the repository root)");
    char pat[64];
    snprintf(pat, sizeof pat, "%sdocs/*.md", root);
    glob_t g;
    cr_assert_eq(glob(pat, 0, NULL, &g), 0, "no %s", pat);
    int blocks = 0, docs = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char *md = tr_read(g.gl_pathv[i]);
        cr_assert_not_null(md, "%s", g.gl_pathv[i]);
        blocks += tr_check_blocks(g.gl_pathv[i], md, &docs);
    }
    cr_assert_geq(g.gl_pathc, 5, "docs/ has %zu files", g.gl_pathc);
    globfree(&g);
    cr_assert_geq(blocks, 4, "only %d ```json blocks in docs/", blocks);
}

/* The README's C example (section "Using Fluxon from C") is built the way the README says
 * (pkg-config over build/fluxon.pc) and run with its socket pointing into an empty private
 * directory: it must report FLUXON_ERR_UNAVAILABLE and exit 1, not crash (it called
 * fluxon_put on an uninitialised client when the open failed: a bus error). */
Test(readme, the_c_example_builds_and_fails_cleanly_without_an_owner, .timeout = 120)
{
    const char *root = tr_root();
    cr_assert_not_null(root, "README.md not found (run from the repository root)");
    char pc[64];
    snprintf(pc, sizeof pc, "%sbuild/fluxon.pc", root);
    if (access(pc, R_OK) != 0) cr_skip_test("%s is not built (make builds it; make test does)", pc);
    char *md = tr_read_readme();
    cr_assert_not_null(md);
    const char *sec = strstr(md, "## Using Fluxon from C");
    cr_assert_not_null(sec, "README has no section \"Using Fluxon from C\"");
    const char *b = strstr(sec, "```c\n");
    cr_assert_not_null(b, "no ```c block in \"Using Fluxon from C\"");
    b += 5;
    const char *e = strstr(b, "\n```");
    cr_assert_not_null(e);
    char dir[] = "/tmp/fx-readme-c-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128], sock[128], bin[128];
    snprintf(path, sizeof path, "%s/ex.c", dir);
    snprintf(sock, sizeof sock, "%s/none.sock", dir);
    snprintf(bin, sizeof bin, "%s/ex", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    const char *want = "/tmp/fluxon-c1/host-a.sock", *p = b;
    int swapped = 0;
    for (const char *q; (q = memmem(p, (size_t)(e - p), want, strlen(want))); p = q + strlen(want), swapped++)
        fprintf(f, "%.*s%s", (int)(q - p), p, sock);
    fprintf(f, "%.*s\n", (int)(e - p), p);
    fclose(f);
    cr_assert_eq(swapped, 1, "the example names its socket %d times, expected once", swapped);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd %s && PKG_CONFIG_PATH=%s/%sbuild cc -Wall -Werror -o ex ex.c "
             "$(PKG_CONFIG_PATH=%s/%sbuild pkg-config --cflags --libs fluxon) > cc.log 2>&1",
             dir, getcwd((char[512]){0}, 512), root, getcwd((char[512]){0}, 512), root);
    int rc = system(cmd);
    char log[256];
    snprintf(log, sizeof log, "%s/cc.log", dir);
    cr_assert_eq(rc, 0, "the README's C example does not build: %s", tr_read(log) ? tr_read(log) : "");
    snprintf(cmd, sizeof cmd, "%s > %s/run.log 2>&1", bin, dir);
    rc = system(cmd);
    snprintf(log, sizeof log, "%s/run.log", dir);
    char *out = tr_read(log);
    cr_assert(WIFEXITED(rc), "the example did not exit (a signal: %d): %s", WIFSIGNALED(rc) ? WTERMSIG(rc) : 0,
              out ? out : "");
    cr_assert_eq(WEXITSTATUS(rc), 1, "exit %d, expected 1: %s", WEXITSTATUS(rc), out ? out : "");
    cr_assert(out && strstr(out, "open: FLUXON_ERR_UNAVAILABLE"), "output: %s", out ? out : "");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
