/* value_oracle.h — the demo's deterministic values (tools/demo/cli_trace.c fills and checks
 * them): word j (8 bytes, little-endian) of key K's value is mix64(XXH3_64(K) + (j + 1) x
 * golden ratio), so any value can be checked knowing only its key. An owner started with
 * "test": {"value_oracle": true} (the chaos harness) checks the first word of every value
 * where it enters or leaves this owner's memory (owner/oracle.c): the first check that fails
 * says which step put another value's bytes under a key. Test-only; nothing else uses it. */
#ifndef FX_VALUE_ORACLE_H
#define FX_VALUE_ORACLE_H

#include <stdint.h>
#include <string.h>

#define FX_VALUE_GOLDEN 0x9E3779B97F4A7C15ull

static inline uint64_t fx_value_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Word j of the value whose key hashes (XXH3_64) to seed, as stored (little-endian). */
static inline uint64_t fx_value_word(uint64_t seed, uint64_t j)
{
    uint64_t w = fx_value_mix64(seed + (j + 1) * FX_VALUE_GOLDEN);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

#endif
