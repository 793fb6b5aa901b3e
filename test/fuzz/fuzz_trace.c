/* fuzz_trace.c — the demo's trace reader (tools/demo/cli_trace.c, the CLI-side source
 * `fluxon demo` is built from), fed a whole JSONL file: the input is written to an
 * in-memory file and loaded through fx_cli_trace_load in strict and skip-bad-lines modes,
 * then the loaded requests go through the page-hash chain, the page keys and both
 * prefix-hit simulators. Checked: no crash; an error has a message and leaves the trace
 * empty; a loaded trace is consistent (its blocks point into its pool, the counts add
 * up, the strict load is a prefix of the skipping one); the simulators' counts add up. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli_trace.h"
#include "fuzz.h"

static int fz_fd = -1;
static char fz_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
    FUZZ_CHECK(fz_fd >= 0, "memfd_create");
    snprintf(fz_path, sizeof fz_path, "/proc/self/fd/%d", fz_fd);
    return 0;
}

static void fz_check_trace(const fx_cli_trace *t)
{
    size_t sum = 0, maxb = 0, prev_line = 0;
    for (size_t i = 0; i < t->n_reqs; i++) {
        const fx_cli_trace_req *r = &t->reqs[i];
        if (r->n_blocks)
            FUZZ_CHECK(t->pool && r->blocks >= t->pool && r->blocks + r->n_blocks <= t->pool + t->n_blocks,
                       "request %zu's blocks lie outside the pool", i);
        FUZZ_CHECK(r->line > prev_line, "line numbers not increasing at request %zu", i);
        prev_line = r->line;
        sum += r->n_blocks;
        if (r->n_blocks > maxb) maxb = r->n_blocks;
        for (uint32_t k = 0; k < r->n_blocks; k++)
            FUZZ_CHECK(r->blocks[k] <= (1ull << 53), "hash id %llu over 2^53", (unsigned long long)r->blocks[k]);
    }
    FUZZ_CHECK(sum == t->n_blocks, "blocks %zu, pool %zu", sum, t->n_blocks);
    FUZZ_CHECK(maxb == t->max_blocks, "max_blocks %zu, seen %zu", t->max_blocks, maxb);
}

static void fz_simulate(const fx_cli_trace *t, uint64_t capacity)
{
    for (int chained = 0; chained < 2; chained++) {
        fx_cli_sim_result r;
        FUZZ_CHECK(fx_cli_sim_run(t, 0, capacity, chained, &r) == 0, "simulator out of memory");
        FUZZ_CHECK(r.requests == t->n_reqs && r.lookups == t->n_blocks && r.prefix_hits <= r.lookups,
                   "simulator counts: %llu requests, %llu lookups, %llu hits", (unsigned long long)r.requests,
                   (unsigned long long)r.lookups, (unsigned long long)r.prefix_hits);
        if (capacity == 0) FUZZ_CHECK(r.inserted + r.prefix_hits <= r.lookups, "inserted + hits > lookups");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    FUZZ_CHECK(ftruncate(fz_fd, 0) == 0 && pwrite(fz_fd, data, size, 0) == (ssize_t)size, "memfd write");
    fx_cli_trace strict, skip;
    char err[256], err2[256];
    err[0] = err2[0] = 0;
    int rs = fx_cli_trace_load(fz_path, 0, 0, &strict, err, sizeof err);
    int rk = fx_cli_trace_load(fz_path, 0, 1, &skip, err2, sizeof err2);
    FUZZ_CHECK(rk == 0, "skip_bad_lines load failed: %s", err2);
    fz_check_trace(&skip);
    if (rs != 0) {
        FUZZ_CHECK(err[0] && strict.n_reqs == 0 && strict.reqs == NULL && strict.pool == NULL,
                   "a failed load leaves a message and an empty trace");
        FUZZ_CHECK(skip.skipped_lines > 0 && skip.first_skipped_line > 0, "strict failed, skip skipped nothing: %s",
                   err);
    } else {
        fz_check_trace(&strict);
        FUZZ_CHECK(strict.n_reqs == skip.n_reqs && skip.skipped_lines == 0, "strict load %zu, skipping load %zu",
                   strict.n_reqs, skip.n_reqs);
        FUZZ_CHECK(strict.n_blocks == skip.n_blocks &&
                       (!strict.n_blocks || !memcmp(strict.pool, skip.pool, strict.n_blocks * 8)),
                   "the two loads differ");
    }
    /* max_requests: the first request only */
    fx_cli_trace one;
    if (fx_cli_trace_load(fz_path, 1, 1, &one, err, sizeof err) == 0) {
        FUZZ_CHECK(one.n_reqs == (skip.n_reqs ? 1u : 0u), "max_requests 1 loaded %zu", one.n_reqs);
        fx_cli_trace_free(&one);
    }
    fz_simulate(&skip, 0);
    fz_simulate(&skip, 1 + (size % 7));
    /* page keys of the first request */
    if (skip.n_reqs) {
        const fx_cli_trace_req *r = &skip.reqs[0];
        uint64_t h[64];
        size_t nb = r->n_blocks < 64 ? r->n_blocks : 64;
        fx_cli_chain_hashes(r->blocks, nb, h);
        char key[FX_CLI_KEY_MAX];
        for (size_t i = 0; i < nb; i++) {
            int kl = fx_cli_page_key(key, sizeof key, "fz", h[i], (unsigned)(i % 3), 3);
            FUZZ_CHECK(kl > 0 && (size_t)kl == strlen(key), "page key length %d", kl);
        }
    }
    fx_cli_trace_free(&strict);
    fx_cli_trace_free(&skip);
    return 0;
}
