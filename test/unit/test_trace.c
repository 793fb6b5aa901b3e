/* test_trace.c — the replay's trace reader, page keys, deterministic values and reference
 * prefix-hit simulators (tools/demo/cli_trace.c), checked against the figures of
 * ../shared/data/README.md on the real conversation trace. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_trace.h"
#include "replay.h"

/* Writes text to a fresh temporary file; returns its malloc'ed path. */
static char *tt_write_tmp(const char *text)
{
    char tmpl[] = "/tmp/fluxon-test-trace-XXXXXX";
    int fd = mkstemp(tmpl);
    cr_assert(fd >= 0);
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
    return strdup(tmpl);
}

/* The real trace: $FLUXON_TRACE, else ../shared/data/ from the repo root (make runs the
 * tests there), else from build/test. NULL when absent. */
static const char *tt_trace_path(void)
{
    const char *env = getenv("FLUXON_TRACE");
    if (env && *env) return env;
    static const char *cands[] = {"data/conversation_trace.jsonl", "../shared/data/conversation_trace.jsonl",
                                  "../../shared/data/conversation_trace.jsonl",
                                  "../../../shared/data/conversation_trace.jsonl",
                                  "/work/shared/data/conversation_trace.jsonl"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        if (access(cands[i], R_OK) == 0) return cands[i];
    return NULL;
}

static void tt_load_real(fx_cli_trace *t, size_t max_requests)
{
    const char *path = tt_trace_path();
    if (!path) cr_skip_test("conversation trace not found (set FLUXON_TRACE)");
    char err[512] = "";
    int rc = fx_cli_trace_load(path, max_requests, 0, t, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
}

/* ---- trace reader ---- */

#define TT_GOOD                                                                                   \
    "{\"timestamp\": 0, \"input_length\": 1500, \"output_length\": 10, \"hash_ids\": [0, 1, 2]}\n" \
    "\n"                                                                                          \
    "{\"timestamp\": 27, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [0, 4], "     \
    "\"extra\": \"ignored\"}\r\n"                                                                 \
    "{\"timestamp\": 30, \"input_length\": 0, \"output_length\": 0, \"hash_ids\": []}"

Test(trace_reader, good_file)
{
    char *path = tt_write_tmp(TT_GOOD);
    fx_cli_trace t;
    char err[256] = "";
    cr_assert_eq(fx_cli_trace_load(path, 0, 0, &t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n_reqs, 3);
    cr_assert_eq(t.n_blocks, 5);
    cr_assert_eq(t.max_blocks, 3);
    cr_assert_eq(t.skipped_lines, 0);
    cr_assert_eq(t.reqs[0].timestamp_ms, 0);
    cr_assert_eq(t.reqs[0].input_length, 1500);
    cr_assert_eq(t.reqs[0].output_length, 10);
    cr_assert_eq(t.reqs[0].n_blocks, 3);
    cr_assert_eq(t.reqs[0].blocks[2], 2);
    cr_assert_eq(t.reqs[1].timestamp_ms, 27);
    cr_assert_eq(t.reqs[1].line, 3, "blank lines still count in line numbers");
    cr_assert_eq(t.reqs[1].blocks[0], 0);
    cr_assert_eq(t.reqs[1].blocks[1], 4);
    cr_assert_eq(t.reqs[2].n_blocks, 0);
    fx_cli_trace_free(&t);
    cr_assert_eq(fx_cli_trace_load(path, 2, 0, &t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n_reqs, 2, "max_requests limits the requests read");
    cr_assert_eq(t.n_blocks, 5);
    fx_cli_trace_free(&t);
    fx_cli_trace_free(&t); /* freeing an empty trace is harmless */
    unlink(path);
    free(path);
}

Test(trace_reader, missing_file)
{
    fx_cli_trace t;
    char err[256] = "";
    cr_assert_eq(fx_cli_trace_load("/nonexistent/trace.jsonl", 0, 0, &t, err, sizeof err), -1);
    cr_assert(strstr(err, "/nonexistent/trace.jsonl") && strstr(err, "cannot open"), "%s", err);
    cr_assert_null(t.reqs);
}

static void tt_expect_bad(const char *line2, const char *needle)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n%s\n"
             "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [2]}\n",
             line2);
    char *path = tt_write_tmp(text);
    fx_cli_trace t;
    char err[512] = "", want[600];
    cr_assert_eq(fx_cli_trace_load(path, 0, 0, &t, err, sizeof err), -1, "accepted: %s", line2);
    snprintf(want, sizeof want, "%s:2: malformed line", path);
    cr_assert(strstr(err, want), "error must name the file and line 2: %s", err);
    cr_assert(strstr(err, needle), "error for %s must say '%s': %s", line2, needle, err);
    cr_assert_null(t.reqs);
    cr_assert_eq(t.n_reqs, 0);
    unlink(path);
    free(path);
}

Test(trace_reader, malformed_line_names_its_number)
{
    tt_expect_bad("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1,",
                  "invalid JSON");
    tt_expect_bad("not json at all", "invalid JSON");
    tt_expect_bad("[1, 2, 3]", "not a JSON object");
    tt_expect_bad("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1}", "\"hash_ids\" is missing");
    tt_expect_bad("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": 7}",
                  "\"hash_ids\" is not an array");
    tt_expect_bad("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1, \"x\"]}",
                  "\"hash_ids\"[1]");
    tt_expect_bad("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [-3]}",
                  "\"hash_ids\"[0]");
    tt_expect_bad("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1.5]}",
                  "\"hash_ids\"[0]");
    tt_expect_bad("{\"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}", "\"timestamp\" is missing");
    tt_expect_bad("{\"timestamp\": \"5\", \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}",
                  "\"timestamp\" is not a number");
    tt_expect_bad("{\"timestamp\": 5, \"output_length\": 1, \"hash_ids\": [1]}", "\"input_length\" is missing");
    tt_expect_bad("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1.5, \"hash_ids\": [1]}",
                  "\"output_length\" is not an integer");
    tt_expect_bad("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]} x",
                  "invalid JSON");
}

Test(trace_reader, skip_bad_lines_counts_them)
{
    char *path = tt_write_tmp(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n"
        "garbage\n"
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1, 2]}\n"
        "{\"timestamp\": 2, \"hash_ids\": [1, 2]}\n"
        "{\"timestamp\": 3, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}\n");
    fx_cli_trace t;
    char err[256] = "";
    cr_assert_eq(fx_cli_trace_load(path, 0, 1, &t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n_reqs, 3);
    cr_assert_eq(t.skipped_lines, 2);
    cr_assert_eq(t.first_skipped_line, 2);
    cr_assert_eq(t.reqs[2].n_blocks, 3);
    cr_assert_eq(t.reqs[2].line, 5);
    fx_cli_trace_free(&t);
    /* without skip mode the same file fails at line 2 */
    cr_assert_eq(fx_cli_trace_load(path, 0, 0, &t, err, sizeof err), -1);
    cr_assert(strstr(err, ":2: malformed line"), "%s", err);
    unlink(path);
    free(path);
}

/* A line that starts with a NUL byte is malformed, not blank (it was skipped as blank);
 * a directory given as the trace says so. */
Test(trace_reader, a_leading_nul_is_malformed_and_a_directory_is_named)
{
    char path[] = "/tmp/fluxon-trace-nul-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    static const char body[] = "\0garbage\n";
    cr_assert_eq(write(fd, body, sizeof body - 1), (ssize_t)(sizeof body - 1));
    close(fd);
    fx_cli_trace t;
    char err[256] = "";
    cr_assert_eq(fx_cli_trace_load(path, 0, 0, &t, err, sizeof err), -1);
    cr_assert(strstr(err, ":1: malformed line: contains a NUL byte"), "%s", err);
    cr_assert_eq(fx_cli_trace_load(path, 0, 1, &t, err, sizeof err), 0, "%s", err);
    cr_assert(t.n_reqs == 0 && t.skipped_lines == 1 && t.first_skipped_line == 1);
    fx_cli_trace_free(&t);
    unlink(path);
    cr_assert_eq(fx_cli_trace_load("/tmp", 0, 0, &t, err, sizeof err), -1);
    cr_assert(strstr(err, "Is a directory"), "%s", err);
}

/* Found by fuzz_trace (issue 22): a trace whose requests have no block at all has no pool;
 * the loader offset the NULL pool for each request (undefined behaviour, UBSan stops
 * `make asan` there). Now such requests load with blocks NULL and n_blocks 0. */
Test(trace_reader, requests_without_blocks)
{
    char *path = tt_write_tmp("{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": []}\n"
                              "{\"timestamp\": 7, \"input_length\": 0, \"output_length\": 0, \"hash_ids\": []}\n");
    fx_cli_trace t;
    char err[256] = "";
    cr_assert_eq(fx_cli_trace_load(path, 0, 0, &t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n_reqs, 2);
    cr_assert_eq(t.n_blocks, 0);
    cr_assert_eq(t.max_blocks, 0);
    for (size_t i = 0; i < t.n_reqs; i++) {
        cr_assert_eq(t.reqs[i].n_blocks, 0);
        cr_assert_null(t.reqs[i].blocks);
    }
    cr_assert_eq(t.reqs[1].timestamp_ms, 7);
    fx_cli_sim_result r;
    cr_assert_eq(fx_cli_sim_run(&t, 0, 0, 1, &r), 0);
    cr_assert_eq(r.requests, 2);
    cr_assert_eq(r.lookups, 0);
    fx_cli_trace_free(&t);
    unlink(path);
    free(path);
}

/* ---- page keys ---- */

Test(page_keys, stable_known_values)
{
    /* Frozen: changing the key scheme breaks caches filled by earlier runs. */
    cr_assert_eq(fx_cli_page_hash(0, 0), 0xd0a66a65c7528968ull);
    uint64_t b[3] = {0, 1, 2}, h[3];
    fx_cli_chain_hashes(b, 3, h);
    char k[FX_CLI_KEY_MAX];
    cr_assert_eq(fx_cli_page_key(k, sizeof k, "demo", h[0], 0, 1), 25);
    cr_assert_str_eq(k, "demo:d0a66a65c7528968_0_1");
    fx_cli_page_key(k, sizeof k, "demo", h[1], 0, 1);
    cr_assert_str_eq(k, "demo:6112dc86d4a32f2b_0_1");
    fx_cli_page_key(k, sizeof k, "demo", h[2], 0, 1);
    cr_assert_str_eq(k, "demo:e35a5118c7bccbf8_0_1");
}

Test(page_keys, tp_suffixes)
{
    char k[FX_CLI_KEY_MAX];
    uint64_t h = fx_cli_page_hash(0, 42);
    char want[64];
    for (unsigned r = 0; r < 4; r++) {
        cr_assert_gt(fx_cli_page_key(k, sizeof k, "m", h, r, 4), 0);
        snprintf(want, sizeof want, "m:%016llx_%u_4", (unsigned long long)h, r);
        cr_assert_str_eq(k, want);
    }
    fx_cli_page_key(k, sizeof k, "m", 0x1, 0, 1);
    cr_assert_str_eq(k, "m:0000000000000001_0_1", "16 hex digits, zero-padded; TP=1 keeps _0_1");
    cr_assert_eq(fx_cli_page_key(k, sizeof k, "m", h, 4, 4), -1, "rank must be < tp");
    cr_assert_eq(fx_cli_page_key(k, sizeof k, "m", h, 0, 0), -1, "tp must be > 0");
    cr_assert_eq(fx_cli_page_key(k, 10, "m", h, 0, 1), -1, "too small a buffer is refused");
}

/* Issue 18: keys are built without printf; every length of prefix, hash, rank and TP gives
 * snprintf's bytes and length, and a buffer one byte short is refused. */
Test(page_keys, the_printf_free_key_equals_snprintf)
{
    const char *prefixes[] = {"", "d", "demo", "a-much-longer-key-prefix/with/slashes"};
    const uint64_t hashes[] = {0, 1, 0xabcdefull, 0xffffffffffffffffull, 0x0123456789abcdefull};
    const unsigned tps[][2] = {{0, 1}, {3, 4}, {9, 10}, {10, 11}, {99, 100}, {4294967294u, 4294967295u}};
    char k[FX_CLI_KEY_MAX], want[FX_CLI_KEY_MAX];
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++)
        for (size_t h = 0; h < sizeof hashes / sizeof *hashes; h++)
            for (size_t t = 0; t < sizeof tps / sizeof *tps; t++) {
                int n = snprintf(want, sizeof want, "%s:%016llx_%u_%u", prefixes[p], (unsigned long long)hashes[h],
                                 tps[t][0], tps[t][1]);
                cr_assert_eq(fx_cli_page_key(k, sizeof k, prefixes[p], hashes[h], tps[t][0], tps[t][1]), n);
                cr_assert_str_eq(k, want);
                cr_assert_eq(fx_cli_page_key(k, (size_t)n + 1, prefixes[p], hashes[h], tps[t][0], tps[t][1]), n,
                             "an exact fit");
                cr_assert_str_eq(k, want);
                cr_assert_eq(fx_cli_page_key(k, (size_t)n, prefixes[p], hashes[h], tps[t][0], tps[t][1]), -1);
            }
}

Test(page_keys, chained_over_the_prefix)
{
    uint64_t a[4] = {0, 1, 2, 3}, b[4] = {0, 1, 9, 3}, c[2] = {5, 3}, ha[4], hb[4], hc[2];
    fx_cli_chain_hashes(a, 4, ha);
    fx_cli_chain_hashes(b, 4, hb);
    fx_cli_chain_hashes(c, 2, hc);
    cr_assert_eq(ha[0], hb[0], "same prefix, same keys");
    cr_assert_eq(ha[1], hb[1]);
    cr_assert_neq(ha[2], hb[2]);
    cr_assert_neq(ha[3], hb[3], "same block under a different prefix: a different key");
    cr_assert_neq(ha[3], hc[1]);
    uint64_t again[4];
    fx_cli_chain_hashes(a, 4, again);
    cr_assert_arr_eq(ha, again, sizeof ha, "deterministic");
    cr_assert_eq(ha[1], fx_cli_page_hash(ha[0], 1));
    fx_cli_chain_hashes(a, 0, again); /* n = 0 writes nothing */
}

/* ---- values ---- */

Test(values, fill_is_deterministic_and_check_finds_a_flipped_byte)
{
    const char *key = "demo:d0a66a65c7528968_0_1";
    size_t klen = strlen(key);
    static const uint64_t lens[] = {1, 7, 8, 9, 1001, 4096, 16384};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        uint64_t len = lens[li];
        unsigned char *v = malloc(len), *w = malloc(len);
        fx_cli_value_fill(v, len, key, klen);
        fx_cli_value_fill(w, len, key, klen);
        cr_assert_arr_eq(v, w, len);
        cr_assert_eq(fx_cli_value_check(v, len, key, klen), -1);
        uint64_t offs[] = {0, len / 2, len - 1};
        for (size_t oi = 0; oi < 3; oi++) {
            v[offs[oi]] ^= 0x10;
            cr_assert_eq(fx_cli_value_check(v, len, key, klen), (int64_t)offs[oi],
                         "len %llu: flip at %llu", (unsigned long long)len, (unsigned long long)offs[oi]);
            v[offs[oi]] ^= 0x10;
        }
        const char *other = "demo:d0a66a65c7528968_1_2";
        if (len >= 8)
            cr_assert_neq(fx_cli_value_check(v, len, other, strlen(other)), -1,
                          "another key's bytes differ");
        free(v);
        free(w);
    }
    /* prefix property: a shorter value is a prefix of a longer one for the same key */
    unsigned char a[100], b[37];
    fx_cli_value_fill(a, sizeof a, key, klen);
    fx_cli_value_fill(b, sizeof b, key, klen);
    cr_assert_arr_eq(a, b, sizeof b);
    /* frozen bytes (little-endian words) */
    unsigned char f[16], want[16] = {0x55, 0x3b, 0x98, 0x1a, 0x3a, 0x8d, 0x98, 0x87,
                                     0xdc, 0x20, 0xf9, 0xd0, 0x09, 0xd5, 0x24, 0x78};
    fx_cli_value_fill(f, sizeof f, "demo:k", 6);
    cr_assert_arr_eq(f, want, sizeof f);
}

/* ---- reference simulators ---- */

Test(simulator, small_cases)
{
    fx_cli_sim *s = fx_cli_sim_new(0);
    uint64_t r1[] = {1, 2, 3}, r2[] = {1, 2, 4}, r3[] = {5, 2, 3};
    cr_assert_eq(fx_cli_sim_request(s, r1, 3), 0);
    cr_assert_eq(fx_cli_sim_request(s, r2, 3), 2);
    cr_assert_eq(fx_cli_sim_request(s, r3, 3), 0, "a prefix hit stops at the first miss");
    cr_assert_eq(fx_cli_sim_request(s, r3, 3), 3);
    fx_cli_sim_result r;
    fx_cli_sim_get(s, &r);
    cr_assert_eq(r.requests, 4);
    cr_assert_eq(r.lookups, 12);
    cr_assert_eq(r.prefix_hits, 5);
    cr_assert_eq(r.inserted, 5);
    cr_assert_float_eq(r.ratio, 5.0 / 12, 1e-12);
    fx_cli_sim_free(s);

    /* LRU of 3: the request's blocks are inserted in order, the last one most recent */
    s = fx_cli_sim_new(3);
    uint64_t a[] = {1, 2, 3}, b[] = {4}, c[] = {1}, d[] = {2, 3, 4};
    cr_assert_eq(fx_cli_sim_request(s, a, 3), 0);
    cr_assert_eq(fx_cli_sim_request(s, b, 1), 0); /* evicts 1 */
    cr_assert_eq(fx_cli_sim_request(s, c, 1), 0); /* evicts 2 */
    cr_assert_eq(fx_cli_sim_request(s, d, 3), 0, "2 was evicted");
    /* inserting 2, 3, 4 evicted 3, 4, then 1: the request's own blocks are all present */
    cr_assert_eq(fx_cli_sim_request(s, d, 3), 3);
    fx_cli_sim_free(s);
    fx_cli_sim_free(NULL);

    /* a large LRU exercises the map's deletion under many collisions */
    s = fx_cli_sim_new(1000);
    for (uint64_t i = 0; i < 100000; i++) {
        uint64_t k = i * 1024; /* same low bits */
        cr_assert_eq(fx_cli_sim_request(s, &k, 1), 0);
    }
    for (uint64_t i = 99000; i < 100000; i++) {
        uint64_t k = i * 1024;
        cr_assert_eq(fx_cli_sim_request(s, &k, 1), 1, "block %llu must still be cached", (unsigned long long)i);
    }
    uint64_t old = 98999 * 1024;
    cr_assert_eq(fx_cli_sim_request(s, &old, 1), 0);
    fx_cli_sim_free(s);
}

/* README figures, in percent with two decimals */
static void tt_expect_ratio(const fx_cli_trace *t, uint64_t capacity, int chained, double want_pct)
{
    fx_cli_sim_result r;
    cr_assert_eq(fx_cli_sim_run(t, 0, capacity, chained, &r), 0);
    cr_assert_eq(r.lookups, 288500);
    double pct = 100.0 * r.ratio;
    cr_log_info("whole trace, %s, capacity %llu: %llu/%llu prefix hits = %.4f %% (README %.2f %%)",
                chained ? "chained keys" : "hash_ids", (unsigned long long)capacity,
                (unsigned long long)r.prefix_hits, (unsigned long long)r.lookups, pct, want_pct);
    cr_assert(fabs(pct - want_pct) < 0.005, "capacity %llu: %.4f %% vs README %.2f %%",
              (unsigned long long)capacity, pct, want_pct);
}

Test(simulator, whole_trace_matches_readme, .timeout = 120)
{
    fx_cli_trace t;
    tt_load_real(&t, 0);
    cr_assert_eq(t.n_reqs, 12031);
    cr_assert_eq(t.n_blocks, 288500);
    cr_assert_eq(t.max_blocks, 247);
    fx_cli_sim_result r;
    cr_assert_eq(fx_cli_sim_run(&t, 0, 0, 0, &r), 0);
    cr_assert_eq(r.inserted, 182790, "distinct blocks");
    for (int chained = 0; chained <= 1; chained++) {
        tt_expect_ratio(&t, 0, chained, 36.64);
        tt_expect_ratio(&t, 5000, chained, 11.04);
        tt_expect_ratio(&t, 10000, chained, 21.12);
        tt_expect_ratio(&t, 20000, chained, 28.75);
        tt_expect_ratio(&t, 40000, chained, 35.14);
    }
    fx_cli_trace_free(&t);
}

Test(simulator, first_requests_of_the_trace)
{
    fx_cli_trace t;
    tt_load_real(&t, 3000);
    cr_assert_eq(t.n_reqs, 3000);
    fx_cli_sim_result a, b, c;
    cr_assert_eq(fx_cli_sim_run(&t, 300, 0, 1, &a), 0);
    cr_assert_eq(fx_cli_sim_run(&t, 300, 0, 0, &b), 0);
    cr_assert_eq(a.prefix_hits, b.prefix_hits, "chained keys hit exactly where hash_ids do");
    cr_log_info("first 300 requests, unlimited: %llu/%llu prefix hits = %.4f %%, %llu distinct blocks",
                (unsigned long long)a.prefix_hits, (unsigned long long)a.lookups, 100.0 * a.ratio,
                (unsigned long long)a.inserted);
    cr_assert_eq(fx_cli_sim_run(&t, 0, 0, 1, &c), 0);
    cr_log_info("first 3000 requests, unlimited: %llu/%llu prefix hits = %.4f %%, %llu distinct blocks",
                (unsigned long long)c.prefix_hits, (unsigned long long)c.lookups, 100.0 * c.ratio,
                (unsigned long long)c.inserted);
    cr_assert(fabs(c.ratio - 0.3142) < 0.00005, "issue 6's peer figure for 3000 requests: 0.3142, got %.5f",
              c.ratio);
    fx_cli_trace_free(&t);
}

/* ---- after a checksum failure: whose bytes (tools/demo/replay_whose.c) ---- */

/* The demo names what a wrong read holds: a trace key's value (found by its first bytes),
 * zeros, or nothing of the trace. */
Test(trace, a_wrong_reads_bytes_are_named_by_whose_value_they_are)
{
    static rp_run r; /* zeroed: only the options and the trace are read */
    tt_load_real(&r.trace, 200);
    r.o.key_prefix = "cx";
    r.o.tp = 1;
    uint64_t *h = malloc(r.trace.max_blocks * sizeof *h);
    const fx_cli_trace_req *q = &r.trace.reqs[150];
    cr_assert_geq(q->n_blocks, 4);
    fx_cli_chain_hashes(q->blocks, q->n_blocks, h);
    char key[FX_CLI_KEY_MAX], out[512], want[600];
    int kl = fx_cli_page_key(key, sizeof key, "cx", h[3], 0, 1);
    cr_assert_gt(kl, 0);
    static unsigned char v[4096];
    fx_cli_value_fill(v, sizeof v, key, (size_t)kl);
    rp_whose_bytes(&r, v, sizeof v, out, sizeof out);
    /* the first trace request holding that page names it (a prefix is shared by many) */
    cr_assert(strstr(out, key) && strstr(out, ", whole"), "%s", out);
    v[4095] ^= 1;
    rp_whose_bytes(&r, v, sizeof v, out, sizeof out);
    snprintf(want, sizeof want, "the value of %s", key);
    cr_assert(strstr(out, want) && strstr(out, "its start only"), "%s", out);
    memset(v, 0, sizeof v);
    rp_whose_bytes(&r, v, sizeof v, out, sizeof out);
    cr_assert_str_eq(out, "all 4096 bytes are zeros");
    memset(v, 0x5a, sizeof v);
    rp_whose_bytes(&r, v, sizeof v, out, sizeof out);
    cr_assert(strstr(out, "no value of the trace's keys"), "%s", out);
    free(h);
    fx_cli_trace_free(&r.trace);
}
