/* cli_trace.h — CLI-side helpers of the trace replay (`fluxon demo`): the Mooncake JSONL
 * trace reader, page keys as an inference engine builds them, deterministic values with
 * their check (D1), and reference prefix-hit simulators. No library internals are used. */
#ifndef FX_CLI_TRACE_H
#define FX_CLI_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------
 * Trace reader. One JSON object per line: "timestamp" (ms, number >= 0),
 * "input_length", "output_length" (tokens, integers >= 0) and "hash_ids" (array of
 * integers in 0..2^53, one per 512-token prompt block). Other members are ignored;
 * blank lines are ignored. Lines are numbered from 1.
 * ------------------------------------------------------------------------------- */
typedef struct fx_cli_trace_req {
    uint64_t timestamp_ms;
    uint32_t input_length, output_length;
    uint32_t n_blocks;        /* entries in blocks */
    const uint64_t *blocks;   /* the hash_ids; points into the trace's pool */
    size_t line;              /* line number in the file */
} fx_cli_trace_req;

typedef struct fx_cli_trace {
    fx_cli_trace_req *reqs;   /* n_reqs requests in file order */
    size_t n_reqs;
    uint64_t *pool;           /* every hash id of every request, in order */
    size_t n_blocks;          /* total block lookups (entries in pool) */
    size_t max_blocks;        /* most blocks in one request */
    size_t skipped_lines;     /* malformed lines skipped (skip_bad_lines mode) */
    size_t first_skipped_line;/* line number of the first one, 0 when none */
} fx_cli_trace;

/* Reads the first max_requests requests (0 = all) of the JSONL file at path into *t.
 * A malformed line is an error ("FILE:LINE: reason" in err) unless skip_bad_lines, in
 * which case it is skipped and counted in t->skipped_lines.
 * Returns 0, or -1 with err (errcap bytes, NUL-terminated) set and *t left empty.
 * On success the caller owns *t and frees it with fx_cli_trace_free. */
int fx_cli_trace_load(const char *path, size_t max_requests, int skip_bad_lines,
                      fx_cli_trace *t, char *err, size_t errcap);
void fx_cli_trace_free(fx_cli_trace *t); /* zeroes *t; NULL or empty: no-op */

/* ---------------------------------------------------------------------------------
 * Page keys. A page's hash chains over its prefix, as an engine's radix cache does:
 *   h[0] = XXH3_64bits_withSeed(le64(FX_CLI_KEY_ROOT) || le64(block[0]), 16, 0)
 *   h[i] = XXH3_64bits_withSeed(le64(h[i-1])          || le64(block[i]), 16, 0)
 * so equal blocks under different prefixes get different keys. The storage key of TP
 * rank r (0 <= r < T) is "<key_prefix>:<h as 16 lowercase hex><suffix>" with suffix
 * "_<r>_<T>"; T = 1 keeps the suffix "_0_1" so that every key has the same shape and a
 * TP=1 run never collides with a TP>1 one on the same cluster.
 * ------------------------------------------------------------------------------- */
#define FX_CLI_KEY_ROOT 0ull
#define FX_CLI_KEY_MAX 256 /* bytes of one key including the NUL */

uint64_t fx_cli_page_hash(uint64_t parent, uint64_t block);
/* out[i] = chained hash of blocks[0..i]; n may be 0. */
void fx_cli_chain_hashes(const uint64_t *blocks, size_t n, uint64_t *out);
/* Writes the key into buf (cap bytes); returns its length, or -1 when it does not fit
 * or rank >= tp or tp == 0. */
int fx_cli_page_key(char *buf, size_t cap, const char *key_prefix, uint64_t page_hash,
                    unsigned rank, unsigned tp);

/* ---------------------------------------------------------------------------------
 * Deterministic values (D1). The bytes of a value depend only on its key and length:
 * seed = XXH3_64bits(key), word[j] = mix64(seed + (j + 1) * 0x9E3779B97F4A7C15) written
 * little-endian (mix64 = the SplitMix64 finalizer), a partial last word truncated. One
 * multiply-xorshift round per 8 bytes: filling and checking run near memory bandwidth.
 * ------------------------------------------------------------------------------- */
void fx_cli_value_fill(void *dst, uint64_t len, const char *key, size_t key_len);
/* -1 when src[0..len) are exactly the bytes fx_cli_value_fill writes for key, otherwise
 * the offset of the first byte that differs. */
int64_t fx_cli_value_check(const void *src, uint64_t len, const char *key, size_t key_len);

/* ---------------------------------------------------------------------------------
 * Reference simulators of prefix hits: a block is one value; a request looks up its
 * blocks in order and its prefix hit is the number of leading blocks present; then
 * every block of the request is inserted (LRU: touched in request order, so the last
 * block is the most recent; a full cache evicts its least recently used block).
 * capacity 0 = unlimited.
 * ------------------------------------------------------------------------------- */
typedef struct fx_cli_sim fx_cli_sim;
typedef struct fx_cli_sim_result {
    uint64_t requests, lookups, prefix_hits;
    uint64_t inserted;        /* insertions of absent blocks: unlimited = distinct blocks;
                                 LRU = also re-insertions of evicted ones */
    double ratio;             /* prefix_hits / lookups (0 when no lookups) */
} fx_cli_sim_result;

fx_cli_sim *fx_cli_sim_new(uint64_t capacity); /* NULL on allocation failure */
void fx_cli_sim_free(fx_cli_sim *s);           /* NULL: no-op */
/* Plays one request; returns its prefix hit (leading blocks present), or -1 when out of
 * memory (the simulator is then unusable). */
int64_t fx_cli_sim_request(fx_cli_sim *s, const uint64_t *blocks, size_t n);
void fx_cli_sim_get(const fx_cli_sim *s, fx_cli_sim_result *out);

/* Plays the first n_requests (0 = all) requests of t. chained != 0 simulates over the
 * chained page hashes (the keys the replay stores), 0 over the raw hash_ids (the trace
 * README's figures). Returns 0, or -1 when out of memory. */
int fx_cli_sim_run(const fx_cli_trace *t, size_t n_requests, uint64_t capacity, int chained,
                   fx_cli_sim_result *out);

#endif /* FX_CLI_TRACE_H */
