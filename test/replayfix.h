/* replayfix.h — runs `fluxon demo` on the real trace in a temporary directory and parses
 * its summary.json; shared by the replay suites. */
#ifndef FX_TEST_REPLAYFIX_H
#define FX_TEST_REPLAYFIX_H

#include <cJSON.h>

#include "helpers.h"

static char *dir;
static void fini(void)
{
    th_rmtree(dir);
    free(dir);
    dir = NULL;
}

static const char *trace_path(void)
{
    const char *e = getenv("FLUXON_TRACE");
    if (e && *e) return e;
    return access("data/conversation_trace.jsonl", R_OK) == 0 ? "data/conversation_trace.jsonl"
                                                              : "../shared/data/conversation_trace.jsonl";
}

/* Runs `fluxon demo --trace T --out DIR args`; its output lands in out (outcap bytes). */
static cJSON *run_demo(const char *args, char *out, size_t outcap)
{
    dir = th_tmpdir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 300 %s demo --trace %s --out %s %s > %s/out.txt 2>&1", th_fluxon_bin(),
             trace_path(), dir, args, dir);
    int st = system(cmd);
    char path[512];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    FILE *f = fopen(path, "r");
    out[0] = 0;
    if (f) {
        size_t n = fread(out, 1, outcap - 1, f);
        out[n] = 0;
        fclose(f);
    }
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "demo %s failed:\n%s", args, out);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    f = fopen(path, "r");
    cr_assert_not_null(f, "no summary.json:\n%s", out);
    static char js[1 << 16];
    size_t n = fread(js, 1, sizeof js - 1, f);
    js[n] = 0;
    fclose(f);
    cJSON *doc = cJSON_Parse(js);
    cr_assert_not_null(doc);
    return doc;
}

static double num(cJSON *d, const char *k)
{
    cJSON *v = cJSON_GetObjectItem(d, k);
    cr_assert(cJSON_IsNumber(v) || cJSON_IsBool(v), "summary.json lacks %s", k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : v->valuedouble;
}

#endif
