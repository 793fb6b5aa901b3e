/* replay_whose.c — after a checksum failure, whose value the bytes read are: all zeros, a key
 * of the trace (found by the first 8 bytes its value starts with: the demo's values are a
 * stream seeded by the key's hash), or none of them. A wrong read is then told apart: a slot
 * read before it was written, a slot holding another key's value (reused while a route still
 * named it: which key says when it was put), or bytes the demo never wrote. Only for the few
 * failures a run logs: it walks the whole trace (about 0.1 s). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

void rp_whose_bytes(const rp_run *r, const unsigned char *v, uint64_t vlen, char *out, size_t cap)
{
    uint64_t zero = 0, n8 = vlen < 8 ? vlen : 8;
    for (uint64_t i = 0; i < vlen && !zero; i++) zero = v[i] != 0;
    if (!zero) {
        snprintf(out, cap, "all %llu bytes are zeros", (unsigned long long)vlen);
        return;
    }
    const rp_opts *o = &r->o;
    uint64_t *hashes = malloc((r->trace.max_blocks ? r->trace.max_blocks : 1) * sizeof *hashes);
    char key[FX_CLI_KEY_MAX];
    unsigned char first[8];
    snprintf(out, cap, "the bytes start with no value of the trace's keys (prefix %s)", o->key_prefix);
    for (size_t q = 0; hashes && q < r->trace.n_reqs; q++) {
        const fx_cli_trace_req *rq = &r->trace.reqs[q];
        fx_cli_chain_hashes(rq->blocks, rq->n_blocks, hashes);
        for (size_t p = 0; p < rq->n_blocks; p++)
            for (unsigned rk = 0; rk < o->tp; rk++) {
                int len = fx_cli_page_key(key, sizeof key, o->key_prefix, hashes[p], rk, o->tp);
                if (len < 0) continue;
                fx_cli_value_fill(first, n8, key, (size_t)len);
                if (!memcmp(first, v, n8)) {
                    snprintf(out, cap, "the bytes are the value of %s (page %zu of trace request %zu)%s", key, p, q,
                             fx_cli_value_check(v, vlen, key, (size_t)len) < 0 ? ", whole" : ", its start only");
                    free(hashes);
                    return;
                }
            }
    }
    free(hashes);
}
