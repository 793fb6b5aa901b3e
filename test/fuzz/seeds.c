/* seeds.c — writes the seed corpora and the frame dictionaries of the fuzz targets
 * (`make fuzz-seeds`; the output is kept in the repository, small):
 *   corpus/codec/   one valid request and one OK response of every catalog type, plus an
 *                   error response (values filled per field kind, so a new message type
 *                   gets its seeds with no change here);
 *   corpus/master/  sessions against fuzz_master.c's in-process master: grants, publish,
 *                   lookups, durable gets, evict/delete/exists/list, leases and their expiry,
 *                   placement (remote target, PUT_DONE of the token, revoke, TTL expiry),
 *                   new owners, an owner restart with a new generation, an external client;
 *   corpus/owner/   sessions against fuzz_owner.c's in-process owner: put/commit/get/consume/
 *                   release, the forwarded commands, abandoned plans and handles, TTLs,
 *                   a remote key, placement, the master link dropping, the handshake;
 *   corpus/disk/    edit lists against fuzz_disk.c's template directory: bit rot in a sealed
 *                   value, a tail's header and value, an index block, a retirement mark and a
 *                   barrier; a torn tail; files deleted, renamed, copied; CONTACT; forged
 *                   records (a newer version, a tombstone, a mark) and a forged index entry;
 *                   the second lives;
 *   corpus/owner_disk/   sessions against fuzz_owner_disk.c's owner with a disk tier: values
 *                   evicted to disk, read back twice, deleted, prefetched, segments retired;
 *                   the owner crashing and coming back over its disk (a second life).
 *   dict/{codec,master,owner,owner_disk}.dict   the magic, every type id, flags, common values.
 * Recorded traffic of the integration suites (FLUXON_RECORD_FRAMES, test/fixtures/mkvfix.h)
 * adds sessions to corpus/master: fuzz_seeds OUTDIR [RECORDED-SESSION...]. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "hello.h"
#include "msg.h"

static const char *out_dir;

/* ---- a growing byte buffer ---- */
typedef struct sb {
    uint8_t *p;
    size_t n, cap;
} sb_t;
static void sb_put(sb_t *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void sb_u8(sb_t *b, uint8_t v) { sb_put(b, &v, 1); }

static void write_file(const char *sub, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", out_dir, sub);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "fuzz_seeds: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* Appends one frame (header + encoded body). */
#define FRAME(sb, type, flags, status, req, body, bp)                                          \
    do {                                                                                       \
        size_t bl_ = fx_body_##body##_size(bp);                                                \
        uint8_t *f_ = malloc(FX_FRAME_HEADER_BYTES + bl_ + 1);                                 \
        fx_frame_header_t h_ = {FX_FRAME_MAGIC, (type), (flags), (uint32_t)bl_, (status), (req)}; \
        fx_frame_header_encode(&h_, f_);                                                       \
        fx_body_##body##_encode((bp), f_ + FX_FRAME_HEADER_BYTES);                             \
        sb_put((sb), f_, FX_FRAME_HEADER_BYTES + bl_);                                         \
        free(f_);                                                                              \
    } while (0)

/* ---- codec: plausible values per field kind ---- */
static const char *const g_keys[3] = {"model/layer0/page:00000001", "model/layer0/page:00000002", "k"};
static fx_str_t g_strv[3];
static const uint64_t g_u64v[3] = {4096, 8192, 1};
#define FILL_U8(f) b->f = 1;
#define FILL_U16(f) b->f = 1;
#define FILL_U32(f) b->f = 1000;
#define FILL_U64(f) b->f = 4096;
#define FILL_I32(f) b->f = 0;
#define FILL_I64(f) b->f = -1;
#define FILL_STR(f) b->f = fx_str_c(g_keys[0]);
#define FILL_U64V(f) b->f = (fx_u64v_t){g_u64v, 2};
#define FILL_STRV(f) b->f = (fx_strv_t){g_strv, 2};
#define FILL(kind, f) FILL_##kind(f)
#define FILL_FN(body) static __attribute__((unused)) void fill_##body(fx_body_##body##_t *b) { (void)b; FX_BODY_##body(FILL) }
FX_BODY_LIST(FILL_FN)

static void codec_seeds(void)
{
#define CODEC_SEED(nm, id, rq, rs)                                                     \
    {                                                                                  \
        sb_t s = {0};                                                                  \
        fx_body_##rq##_t q;                                                            \
        memset(&q, 0, sizeof q);                                                       \
        fill_##rq(&q);                                                                 \
        FRAME(&s, id, 0, 0, 7, rq, &q);                                                \
        write_file("corpus/codec", #nm "-request", s.p, s.n);                          \
        s.n = 0;                                                                       \
        fx_body_##rs##_t r;                                                            \
        memset(&r, 0, sizeof r);                                                       \
        fill_##rs(&r);                                                                 \
        FRAME(&s, id, FX_FLAG_RESPONSE, 0, 7, rs, &r);                                 \
        write_file("corpus/codec", #nm "-response", s.p, s.n);                         \
        free(s.p);                                                                     \
    }
    FX_MSG_CATALOG(CODEC_SEED)
#undef CODEC_SEED
    sb_t s = {0};
    fx_body_error_t e = {fx_str_c("lookup: 3 keys but 2 offsets (lengths must match)")};
    FRAME(&s, FX_MSG_LOOKUP, FX_FLAG_RESPONSE, FLUXON_ERR_INVALID_ARGUMENT, 7, error, &e);
    write_file("corpus/codec", "error-response", s.p, s.n);
    /* two frames in one stream */
    fx_body_heartbeat_t hb = {1};
    FRAME(&s, FX_MSG_HEARTBEAT, 0, 0, 8, heartbeat, &hb);
    write_file("corpus/codec", "two-frames", s.p, s.n);
    free(s.p);
}

/* ---- master sessions: [op][frame] records (fuzz_master.c) ---- */
static fx_config_t g_cfg;
static uint64_t g_req = 100;
#define REQ(sb, peer, type, body, bp)      \
    do {                                   \
        sb_u8((sb), (uint8_t)(peer));      \
        FRAME((sb), (type), 0, 0, g_req++, body, (bp)); \
    } while (0)
#define OP_TIME(shift) (0xE0 | (shift)) /* advance 16 ms << shift, fire due timers */
#define OP_CLOSE(peer) (0xF0 | (peer))  /* close the peer's connection, open a new one */

static fx_strv_t keys_of(fx_str_t *unused, const char *const *k, uint32_t n)
{
    (void)unused;
    fx_str_t *buf = calloc(n, sizeof *buf); /* each batch its own array (a generator: never freed) */
    if (!buf) abort();
    for (uint32_t i = 0; i < n; i++) buf[i] = fx_str_c(k[i]);
    return (fx_strv_t){buf, n};
}
#define U64V(...) ((fx_u64v_t){(const uint64_t[]){__VA_ARGS__}, sizeof((const uint64_t[]){__VA_ARGS__}) / 8})
#define NOV ((fx_u64v_t){NULL, 0})
#define KEYS(buf, ...)                                                                      \
    keys_of((buf), (const char *const[]){__VA_ARGS__},                                      \
            sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static void hello_register(sb_t *s, int peer, const char *id, uint64_t gen, const char *sub, fx_u64v_t gids,
                           fx_u64v_t goffs)
{
    fx_body_hello_t h;
    fx_hello_fill(&g_cfg, FX_ROLE_OWNER, id, gen, &h);
    REQ(s, peer, FX_MSG_HELLO, hello, &h);
    fx_body_register_t r = {fx_str_c(id), gen, FX_NODE_GPU_OWNER, 8ull << 20, 0x7f0000000000ull, fx_str_c("ucx"),
                            fx_str_c("rkey"), 1ull << 20, gids, goffs, fx_str_c(sub)};
    REQ(s, peer, FX_MSG_REGISTER, register, &r);
}

static void master_seeds(void)
{
    fx_str_t kb[8];
    const uint64_t PMS = 1700001000000ull; /* put_ms of the first put (fuzz_master.c's clock) */
    /* A: grants, publish, lookup, durable get, the key commands */
    sb_t s = {0};
    fx_body_grant_t g = {4096, 2};
    REQ(&s, 0, FX_MSG_GRANT, grant, &g);
    fx_body_put_done_t pd = {1, 4096, 0, 0, KEYS(kb, "a/1", "a/2", "a/3"), U64V(4096, 8192, 12288), NOV, 0};
    REQ(&s, 0, FX_MSG_PUT_DONE, put_done, &pd);
    REQ(&s, 0, FX_MSG_PUT_DONE, put_done, &pd); /* a retry: the first answer again */
    fx_body_lookup_t lk = {KEYS(kb, "a/1", "a/2", "zz")};
    REQ(&s, 1, FX_MSG_LOOKUP, lookup, &lk);
    fx_body_get_done_t gd = {KEYS(kb, "a/1"), U64V(4096), U64V(PMS), U64V(0), U64V(4096), fx_str_c("o0"), 1,
                             U64V(4096), U64V(FX_GET_DURABLE), {NULL, 0}};
    REQ(&s, 1, FX_MSG_GET_DONE, get_done, &gd);
    REQ(&s, 1, FX_MSG_LOOKUP, lookup, &lk);
    fx_body_keys_t ex = {KEYS(kb, "a/1", "a/2", "nope")};
    REQ(&s, 1, FX_MSG_EXISTS, keys, &ex);
    fx_body_list_t ls = {fx_str_c("a/"), {NULL, 0}, 10};
    REQ(&s, 1, FX_MSG_LIST, list, &ls);
    fx_body_evict_t ev = {KEYS(kb, "a/1", "a/2"), U64V(4096, 8192), U64V(PMS, PMS), U64V(0, 1)};
    REQ(&s, 0, FX_MSG_EVICT, evict, &ev);
    fx_body_touch_t tc = {KEYS(kb, "a/1", "zz"), U64V(PMS, 0), U64V(0, 0)}; /* issue 38: one-way */
    REQ(&s, 0, FX_MSG_TOUCH, touch, &tc);
    fx_body_touch_t tbad = {KEYS(kb, "a/1", "a/2"), U64V(PMS), U64V(0, 0)}; /* put_ms short: refused */
    REQ(&s, 0, FX_MSG_TOUCH, touch, &tbad);
    fx_body_key_t dk = {fx_str_c("a/3")};
    REQ(&s, 1, FX_MSG_DELETE, key, &dk);
    REQ(&s, 1, FX_MSG_LOOKUP, lookup, &lk);
    write_file("corpus/master", "session-publish-lookup", s.p, s.n);

    /* B: leases and their expiry; atomic groups */
    s.n = 0;
    fx_body_lease_t le = {200};
    REQ(&s, 0, FX_MSG_LEASE_GRANT, lease, &le);
    fx_body_put_done_t pl = {2, 100, 0, 1, KEYS(kb, "l/1", "l/2", "l/3", "l/4"), U64V(4096, 8192, 12288, 16384),
                             U64V(2, 2), 0};
    REQ(&s, 0, FX_MSG_PUT_DONE, put_done, &pl);
    REQ(&s, 1, FX_MSG_LOOKUP, lookup, &lk);
    sb_u8(&s, OP_TIME(4)); /* 256 ms: the lease expired */
    fx_body_lookup_t ll = {KEYS(kb, "l/1", "l/2")};
    REQ(&s, 1, FX_MSG_LOOKUP, lookup, &ll);
    fx_body_put_done_t prej = {3, 100, FX_PUT_REJECT_IF_EXIST, 0, KEYS(kb, "l/1", "a/9"), U64V(4096, 8192), U64V(2), 0};
    REQ(&s, 1, FX_MSG_PUT_DONE, put_done, &prej);
    REQ(&s, 0, FX_MSG_PUT_DONE, put_done, &prej);
    write_file("corpus/master", "session-lease-groups", s.p, s.n);

    /* C: placement on the other owner, PUT_DONE of the token, revoke, TTL expiry */
    s.n = 0;
    fx_body_put_place_t pp = {KEYS(kb, "p/1", "p/2"), 8192, FX_PUT_PLACE, NOV, fx_str_c("b")};
    REQ(&s, 0, FX_MSG_PUT_PLACE, put_place, &pp); /* token 1001 on o1 */
    fx_body_put_done_t ppd = {4, 8192, FX_PUT_PLACE, 0, KEYS(kb, "p/1", "p/2"), U64V(4096, 12288), NOV, 1001};
    REQ(&s, 0, FX_MSG_PUT_DONE, put_done, &ppd);
    fx_body_lookup_t pl2 = {KEYS(kb, "p/1", "p/2")};
    REQ(&s, 0, FX_MSG_LOOKUP, lookup, &pl2);
    fx_body_put_place_t pp3 = {KEYS(kb, "p/3"), 100, FX_PUT_PLACE | FX_PUT_REJECT_IF_INFLIGHT, NOV, fx_str_c("b")};
    REQ(&s, 0, FX_MSG_PUT_PLACE, put_place, &pp3); /* token 1002 */
    REQ(&s, 1, FX_MSG_PUT_PLACE, put_place, &pp3); /* rejected: in flight */
    fx_body_put_revoke_t rv = {1002};
    REQ(&s, 0, FX_MSG_PUT_REVOKE, put_revoke, &rv);
    fx_body_put_place_t pp4 = {KEYS(kb, "p/4"), 4096, FX_PUT_PLACE | FX_PUT_LOCAL_FIRST, NOV, {NULL, 0}};
    REQ(&s, 1, FX_MSG_PUT_PLACE, put_place, &pp4); /* token 1003, local */
    fx_body_put_place_t pp5 = {KEYS(kb, "p/5"), 4096, FX_PUT_PLACE | FX_PUT_WRITE_THROUGH, NOV, {NULL, 0}};
    REQ(&s, 1, FX_MSG_PUT_PLACE, put_place, &pp5); /* token 1004, remote */
    sb_u8(&s, OP_TIME(13)); /* 131 s: past the in-flight TTL */
    REQ(&s, 0, FX_MSG_LOOKUP, lookup, &pl2);
    write_file("corpus/master", "session-place", s.p, s.n);

    /* D: new owners, liveness, cluster queries, an owner restart, an external client */
    s.n = 0;
    hello_register(&s, 2, "o2", 7, "b", U64V(1), U64V(4096));
    fx_body_heartbeat_t hb = {7};
    REQ(&s, 2, FX_MSG_HEARTBEAT, heartbeat, &hb);
    fx_body_ping_t pg = {1, 12345};
    REQ(&s, 2, FX_MSG_PING, ping, &pg);
    fx_body_empty_t em;
    REQ(&s, 2, FX_MSG_CLUSTER_NODES, empty, &em);
    REQ(&s, 2, FX_MSG_MASTER_STATS, empty, &em);
    fx_body_put_done_t p2 = {1, 4096, 0, 0, KEYS(kb, "d/1"), U64V(4096), NOV, 0};
    REQ(&s, 2, FX_MSG_PUT_DONE, put_done, &p2);
    REQ(&s, 0, FX_MSG_PUT_DONE, put_done, &p2);
    fx_body_lookup_t dl = {KEYS(kb, "d/1")};
    REQ(&s, 1, FX_MSG_LOOKUP, lookup, &dl);
    sb_u8(&s, OP_CLOSE(0)); /* o0's connection drops */
    REQ(&s, 1, FX_MSG_LOOKUP, lookup, &dl);
    hello_register(&s, 0, "o0", 5, "a", NOV, NOV); /* o0 restarted: generation 5 */
    REQ(&s, 1, FX_MSG_LOOKUP, lookup, &dl);
    fx_body_hello_t eh;
    fx_hello_fill(&g_cfg, FX_ROLE_EXTERNAL, "ext:1", 0, &eh);
    REQ(&s, 3, FX_MSG_HELLO, hello, &eh);
    REQ(&s, 3, FX_MSG_CLUSTER_NODES, empty, &em);
    REQ(&s, 3, FX_MSG_LOOKUP, lookup, &dl); /* not an owner */
    sb_u8(&s, OP_TIME(8)); /* 4 s: o2's heartbeat is late */
    REQ(&s, 2, FX_MSG_HEARTBEAT, heartbeat, &hb);
    write_file("corpus/master", "session-owners", s.p, s.n);
    free(s.p);
}

/* ---- owner sessions: [op][frame] records (fuzz_owner.c: peers 0 and 1 are externals past
 * HELLO, 2 a new external, 3 the second owner o1 talking to the master; the owner's ids
 * of plans, handles and holders count from 1) ---- */
#define OP_LINK_DROP 0xF8 /* the owner's master connection drops */
#define OP_CRASH 0xFC        /* fuzz_owner_disk.c: the owner crashes, back at the next record but a clock one */
#define OP_CRASH_MASTER 0xFD /* fuzz_owner_disk.c: the owner and the master crash, a fresh master starts */
static void owner_seeds(void)
{
    fx_str_t kb[8];
    sb_t s = {0};
    fx_body_empty_t em;
    /* A: put_start, commit, get_start, consume, release, the forwarded commands */
    fx_body_put_start_t ps = {KEYS(kb, "k/1", "k/2"), 4096, 0, NOV, {NULL, 0}, 0, {NULL, 0}, 1000, 0};
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &ps);
    fx_body_plan_ref_t pr = {1};
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr);
    fx_body_get_start_t gs = {KEYS(kb, "k/1", "k/2", "k/3"), NOV, 1, 1000};
    REQ(&s, 1, FX_MSG_GET_START, get_start, &gs);
    fx_body_handle_consume_t hc = {4, 1}; /* handle 4 pins holders 2 and 3 */
    REQ(&s, 1, FX_MSG_HANDLE_CONSUME, handle_consume, &hc);
    fx_body_release_t rl = {U64V(3, 99)};
    REQ(&s, 1, FX_MSG_RELEASE, release, &rl);
    fx_body_keys_t ex = {KEYS(kb, "k/1", "k/2", "nope")};
    REQ(&s, 1, FX_MSG_EXISTS, keys, &ex);
    fx_body_put_inline_t pi = {fx_str_c("i/1"), fx_str_c("an inline value"), 0, 0, {NULL, 0}, 1000, 0};
    REQ(&s, 0, FX_MSG_PUT_INLINE, put_inline, &pi);
    fx_body_list_t ls = {fx_str_c("k/"), {NULL, 0}, 10};
    REQ(&s, 1, FX_MSG_LIST, list, &ls);
    fx_body_key_t dk = {fx_str_c("k/1")};
    REQ(&s, 1, FX_MSG_DELETE, key, &dk);
    REQ(&s, 1, FX_MSG_GET_START, get_start, &gs);
    fx_body_lease_t le = {200};
    REQ(&s, 0, FX_MSG_LEASE_GRANT, lease, &le);
    fx_body_ping_t pg0 = {0, 1}, pg1 = {1, 2};
    REQ(&s, 0, FX_MSG_PING, ping, &pg0);
    REQ(&s, 0, FX_MSG_PING, ping, &pg1);
    REQ(&s, 0, FX_MSG_CLUSTER_NODES, empty, &em);
    REQ(&s, 0, FX_MSG_MASTER_STATS, empty, &em);
    REQ(&s, 0, FX_MSG_OWNER_STATS, empty, &em);
    write_file("corpus/owner", "session-put-get", s.p, s.n);

    /* B: what externals abandon: a put plan and a handle of a closed external, an abort,
     * plans and handles past their TTL, groups, reject-if-exist */
    s.n = 0;
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &ps); /* plan 1 */
    sb_u8(&s, OP_CLOSE(0));
    fx_body_put_start_t pg = {KEYS(kb, "g/1", "g/2", "g/3"), 8192, FX_PUT_REJECT_IF_EXIST, U64V(2, 1), {NULL, 0}, 0,
                              {NULL, 0}, 1000, 0};
    REQ(&s, 1, FX_MSG_PUT_START, put_start, &pg);
    fx_body_plan_ref_t pr2 = {2};
    REQ(&s, 1, FX_MSG_PUT_ABORT, plan_ref, &pr2);
    REQ(&s, 1, FX_MSG_PUT_START, put_start, &pg);
    fx_body_plan_ref_t pr3 = {3};
    REQ(&s, 1, FX_MSG_PUT_COMMIT, plan_ref, &pr3);
    fx_body_get_start_t gg = {KEYS(kb, "g/1", "g/2", "g/3"), U64V(2, 1), 0, 1000};
    REQ(&s, 1, FX_MSG_GET_START, get_start, &gg);
    REQ(&s, 0, FX_MSG_GET_START, get_start, &gg);
    sb_u8(&s, OP_CLOSE(0));
    REQ(&s, 1, FX_MSG_PUT_START, put_start, &ps);
    sb_u8(&s, OP_TIME(11)); /* 32 s: plan and handle TTLs */
    fx_body_plan_ref_t pr5 = {12}; /* expired */
    REQ(&s, 1, FX_MSG_PUT_COMMIT, plan_ref, &pr5);
    REQ(&s, 1, FX_MSG_GET_START, get_start, &gg);
    write_file("corpus/owner", "session-abandon", s.p, s.n);

    /* C: a key published by o1 (a remote fetch that fails), placement on o1, the master
     * link dropping mid-put, a lease */
    s.n = 0;
    fx_body_put_done_t pd = {1, 4096, 0, 0, KEYS(kb, "r/1"), U64V(4096), NOV, 0};
    REQ(&s, 3, FX_MSG_PUT_DONE, put_done, &pd);
    fx_body_get_start_t gr = {KEYS(kb, "r/1"), NOV, 1, 1000};
    REQ(&s, 0, FX_MSG_GET_START, get_start, &gr);
    fx_body_put_start_t pp = {KEYS(kb, "p/1"), 4096, FX_PUT_PLACE, NOV, {NULL, 0}, 0, fx_str_c("b"), 1000, 0};
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &pp);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr);
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &ps);
    sb_u8(&s, OP_LINK_DROP);
    fx_body_plan_ref_t prp = {2};
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &prp);
    REQ(&s, 1, FX_MSG_EXISTS, keys, &ex);
    sb_u8(&s, OP_TIME(4)); /* 256 ms: the link is back */
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &ps);
    REQ(&s, 0, FX_MSG_LEASE_GRANT, lease, &le);
    fx_body_put_start_t pl = {KEYS(kb, "l/1"), 4096, 0, NOV, {NULL, 0}, 1, {NULL, 0}, 1000, 0};
    REQ(&s, 1, FX_MSG_PUT_START, put_start, &pl);
    sb_u8(&s, OP_TIME(6));
    REQ(&s, 1, FX_MSG_GET_START, get_start, &gr);
    write_file("corpus/owner", "session-remote-link", s.p, s.n);

    /* D: the handshake: a request before HELLO, a HELLO of the wrong role, a good one */
    s.n = 0;
    REQ(&s, 2, FX_MSG_EXISTS, keys, &ex);
    fx_body_hello_t ho;
    fx_hello_fill(&g_cfg, FX_ROLE_OWNER, "x2", 0, &ho);
    REQ(&s, 2, FX_MSG_HELLO, hello, &ho);
    fx_body_hello_t he;
    fx_hello_fill(&g_cfg, FX_ROLE_EXTERNAL, "x2", 0, &he);
    REQ(&s, 2, FX_MSG_HELLO, hello, &he);
    REQ(&s, 2, FX_MSG_PUT_START, put_start, &ps);
    REQ(&s, 2, FX_MSG_HELLO, hello, &he);
    REQ(&s, 2, FX_MSG_GRANT, empty, &em);
    write_file("corpus/owner", "session-handshake", s.p, s.n);
    free(s.p);
}

/* ---- owner sessions with a disk tier (fuzz_owner_disk.c: the same records; a 1 MiB hot
 * tier, 4 disk segments of 1 MiB): values of 256 KiB evict to disk, come back, die ---- */
static void owner_disk_seeds(void)
{
    fx_str_t kb[8];
    sb_t s = {0};
    const uint64_t v = 256u << 10;
    /* A: 4 values fill the hot tier, 4 more evict them to disk (their staging flushed by the
     * clock), read back twice (a temporary copy, then promoted), deleted (a tombstone),
     * prefetched, then the link drops (the disk records re-published) */
    fx_body_put_start_t p1 = {KEYS(kb, "d/1", "d/2", "d/3", "d/4"), v, 0, NOV, {NULL, 0}, 0, {NULL, 0}, 1000, 0};
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p1);
    fx_body_plan_ref_t pr1 = {1}, pr2 = {3}, pr3 = {13}; /* a commit takes an id too */
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr1);
    fx_body_put_start_t p2 = {KEYS(kb, "e/1", "e/2", "e/3", "e/4"), v, 0, NOV, {NULL, 0}, 0, {NULL, 0}, 1000, 0};
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p2);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr2);
    sb_u8(&s, OP_TIME(0)); /* 16 ms: the store's staging flushed */
    fx_body_get_start_t g1 = {KEYS(kb, "d/1", "d/2"), NOV, 1, 1000};
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g1);
    fx_body_release_t rl = {U64V(1, 2, 3, 4, 5, 6)};
    REQ(&s, 1, FX_MSG_RELEASE, release, &rl);
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g1);
    REQ(&s, 1, FX_MSG_RELEASE, release, &rl);
    fx_body_key_t dk = {fx_str_c("d/3")};
    REQ(&s, 1, FX_MSG_DELETE, key, &dk);
    fx_body_keys_t pf = {KEYS(kb, "d/4", "d/3", "e/1")};
    REQ(&s, 1, FX_MSG_PREFETCH, keys, &pf);
    sb_u8(&s, OP_LINK_DROP);
    sb_u8(&s, OP_TIME(4)); /* 256 ms: the link is back */
    fx_body_get_start_t g2 = {KEYS(kb, "d/4", "d/3", "d/2"), NOV, 1, 1000};
    REQ(&s, 0, FX_MSG_GET_START, get_start, &g2);
    fx_body_keys_t ex = {KEYS(kb, "d/1", "d/3", "e/4")};
    REQ(&s, 0, FX_MSG_EXISTS, keys, &ex);
    write_file("corpus/owner_disk", "session-evict-read-delete", s.p, s.n);

    /* B: enough values to fill the 4 disk segments and retire the oldest (route drops),
     * then a get of a retired key and a newer put of a key on disk (an INVALIDATE) */
    s.n = 0;
    static const char *const names[6][4] = {{"a/0", "a/1", "a/2", "a/3"}, {"b/0", "b/1", "b/2", "b/3"},
                                            {"c/0", "c/1", "c/2", "c/3"}, {"f/0", "f/1", "f/2", "f/3"},
                                            {"g/0", "g/1", "g/2", "g/3"}, {"h/0", "h/1", "h/2", "h/3"}};
    for (uint64_t i = 0; i < 6; i++) {
        fx_body_put_start_t p = {keys_of(kb, names[i], 4), v, 0, NOV, {NULL, 0}, 0, {NULL, 0}, 1000, 0};
        REQ(&s, 0, FX_MSG_PUT_START, put_start, &p);
        fx_body_plan_ref_t pr = {2 * i + 1};
        REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr);
        sb_u8(&s, OP_TIME(0));
    }
    fx_body_get_start_t g3 = {KEYS(kb, "a/0", "c/1", "f/2"), NOV, 1, 1000};
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g3);
    fx_body_put_start_t p3 = {KEYS(kb, "c/2"), 4096, 0, NOV, {NULL, 0}, 0, {NULL, 0}, 1000, 0};
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p3);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr3);
    sb_u8(&s, OP_TIME(2));
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g3);
    write_file("corpus/owner_disk", "session-retire", s.p, s.n);

    /* C: a second life. Values evicted to disk, one deleted (its tombstone written before
     * the DELETE's answer), a newer put of another (an INVALIDATE: a tombstone left in the
     * staging buffer), then o0 crashes (the master stays): the next get brings it back over
     * its crash image (re-indexed, re-published; the master's old routes of it dropped);
     * reads, a put, then both crash (a fresh master) and time passes before o0 is back */
    s.n = 0;
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p1);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr1);
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p2);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr2);
    sb_u8(&s, OP_TIME(0));
    fx_body_key_t dk1 = {fx_str_c("d/1")}; /* on disk (e/4, d/4, d/1 were evicted) */
    REQ(&s, 1, FX_MSG_DELETE, key, &dk1);
    fx_body_put_start_t p4 = {KEYS(kb, "d/4"), 4096, 0, NOV, {NULL, 0}, 0, {NULL, 0}, 1000, 0};
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p4);
    fx_body_plan_ref_t pr5 = {5};
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr5);
    sb_u8(&s, OP_CRASH);
    fx_body_get_start_t g4 = {KEYS(kb, "d/1", "d/2", "d/3", "d/4"), NOV, 1, 1000};
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g4);
    REQ(&s, 1, FX_MSG_RELEASE, release, &rl);
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g4);
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p1);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr1);
    sb_u8(&s, OP_CRASH_MASTER);
    sb_u8(&s, OP_TIME(8)); /* 4 s down */
    REQ(&s, 1, FX_MSG_EXISTS, keys, &ex);
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g4);
    write_file("corpus/owner_disk", "session-second-life", s.p, s.n);

    /* D: down longer than the master's dead_owner_grace_ms (10 min): the master forgets o0
     * (it drops its disk, a barrier, at its registration); then with a fresh master the
     * contact recorded in DIR/CONTACT is older than the grace (the records dropped at the
     * first registration, not re-published) */
    s.n = 0;
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p1);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr1);
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p2);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr2);
    sb_u8(&s, OP_TIME(0));
    sb_u8(&s, OP_CRASH);
    sb_u8(&s, OP_TIME(15)); /* 2 x 524 s */
    sb_u8(&s, OP_TIME(15));
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g4);
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p2);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr1);
    sb_u8(&s, OP_TIME(0));
    sb_u8(&s, OP_CRASH_MASTER);
    sb_u8(&s, OP_TIME(15));
    sb_u8(&s, OP_TIME(15));
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g4);
    write_file("corpus/owner_disk", "session-second-life-forgotten", s.p, s.n);

    /* E: kills lost in the crash. d/4 and e/4 are on disk (evicted, flushed); one newer put of
     * both: the master's one-way INVALIDATE of their disk records, whose tombstones wait for
     * the store's 2 ms flush, and o0 crashes before any clock record (the master stays, and
     * remembers them): its next life re-indexes both and must kill them at its registration,
     * not re-publish them. Again once back (the INVALIDATEs sent again, their tombstones
     * staged, lost by a second crash); then time passes and both are read */
    s.n = 0;
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p1);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr1);
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p2);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr2);
    sb_u8(&s, OP_TIME(0));
    fx_body_key_t dk2 = {fx_str_c("e/1")}; /* in memory: room for the new values (no eviction writes the staging) */
    REQ(&s, 1, FX_MSG_DELETE, key, &dk2);
    fx_body_put_start_t p5 = {KEYS(kb, "d/4", "e/4"), 4096, 0, NOV, {NULL, 0}, 0, {NULL, 0}, 1000, 0};
    REQ(&s, 0, FX_MSG_PUT_START, put_start, &p5);
    REQ(&s, 0, FX_MSG_PUT_COMMIT, plan_ref, &pr5);
    sb_u8(&s, OP_CRASH);
    fx_body_get_start_t g5 = {KEYS(kb, "d/4", "e/4", "d/1"), NOV, 1, 1000};
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g5);
    REQ(&s, 1, FX_MSG_RELEASE, release, &rl);
    sb_u8(&s, OP_CRASH);
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g5);
    REQ(&s, 1, FX_MSG_RELEASE, release, &rl);
    sb_u8(&s, OP_TIME(4));
    REQ(&s, 1, FX_MSG_GET_START, get_start, &g5);
    REQ(&s, 1, FX_MSG_EXISTS, keys, &ex);
    write_file("corpus/owner_disk", "session-second-life-lost-invalidate", s.p, s.n);
    free(s.p);
}

/* ---- recorded traffic (FLUXON_RECORD_FRAMES files): HELLOs re-signed (and set to this
 * protocol version) for fuzz_master's
 * cluster ("fz", token "tok"); sessions over 64 KiB (the target's input limit) skipped ---- */
static void import_recorded(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_seeds: cannot read %s\n", path);
        exit(1);
    }
    sb_t in = {0}, out = {0};
    uint8_t buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sb_put(&in, buf, n);
    fclose(f);
    size_t off = 0;
    while (off + 1 + FX_FRAME_HEADER_BYTES <= in.n) {
        uint8_t peer = in.p[off];
        fx_frame_header_t h;
        fx_frame_header_decode(in.p + off + 1, UINT32_MAX, &h);
        size_t total = FX_FRAME_HEADER_BYTES + (size_t)h.body_len;
        if (off + 1 + total > in.n) break;
        const uint8_t *body = in.p + off + 1 + FX_FRAME_HEADER_BYTES;
        fx_body_hello_t hb;
        fx_arena_t a = {0};
        sb_u8(&out, peer);
        if (h.type == FX_MSG_HELLO && fx_body_hello_decode(body, h.body_len, &hb, &a) == FLUXON_OK) {
            hb.proto_version = FX_PROTOCOL_VERSION; /* recordings of an older protocol still pass HELLO */
            hb.cluster_id = fx_str_c(g_cfg.cluster_id);
            hb.auth = fx_str_c(g_cfg.cluster_token);
            FRAME(&out, h.type, h.flags, h.status, h.req_id, hello, &hb);
        } else {
            sb_put(&out, in.p + off + 1, total);
        }
        fx_arena_free(&a);
        off += 1 + total;
    }
    if (out.n && out.n <= 65536) {
        const char *base = strrchr(path, '/');
        char name[256];
        snprintf(name, sizeof name, "recorded-%s", base ? base + 1 : path);
        write_file("corpus/master", name, out.p, out.n);
    }
    free(in.p);
    free(out.p);
}

/* ---- dictionaries ---- */
static void dict_bytes(FILE *f, const char *name, const uint8_t *p, size_t n)
{
    fprintf(f, "%s=\"", name);
    for (size_t i = 0; i < n; i++) fprintf(f, "\\x%02x", p[i]);
    fprintf(f, "\"\n");
}
static void dict_u(FILE *f, const char *name, uint64_t v, int bytes)
{
    uint8_t b[8];
    for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    dict_bytes(f, name, b, (size_t)bytes);
}

static void dicts(void)
{
    static const char *const names[4] = {"codec", "master", "owner", "owner_disk"};
    for (int t = 0; t < 4; t++) {
        char path[512];
        snprintf(path, sizeof path, "%s/dict/%s.dict", out_dir, names[t]);
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
            exit(1);
        }
        fprintf(f, "# %s.dict — written by test/fuzz/seeds.c (make fuzz-seeds) from the catalog\n", names[t]);
        dict_u(f, "magic", FX_FRAME_MAGIC, 4);
        for (unsigned id = 1; id < FX_MSG_MAX_ID; id++) {
            if (!fx_msg_name(id)) continue;
            char n[64];
            snprintf(n, sizeof n, "type_%s", fx_msg_name(id));
            dict_u(f, n, id, 2);
            snprintf(n, sizeof n, "resp_%s", fx_msg_name(id));
            dict_u(f, n, id | (uint32_t)FX_FLAG_RESPONSE << 16, 4);
        }
        dict_u(f, "u32_zero", 0, 4);
        dict_u(f, "u32_one", 1, 4);
        dict_u(f, "u32_max", 0xffffffffu, 4);
        dict_u(f, "u64_page", 4096, 8);
        dict_u(f, "u64_two_pages", 8192, 8);
        dict_u(f, "u64_max", UINT64_MAX, 8);
        dict_u(f, "status_stale", (uint64_t)(int64_t)FLUXON_ERR_STALE, 8);
        for (unsigned fl = 1; fl <= FX_PUT_LOCAL_FIRST; fl <<= 1) {
            char n[32];
            snprintf(n, sizeof n, "put_flag_%u", fl);
            dict_u(f, n, fl, 8);
        }
        if (t == 3) { /* fuzz_owner_disk.c: values that fill its 1 MiB hot tier in a few puts */
            dict_u(f, "u64_256k", 256u << 10, 8);
            dict_u(f, "u64_1m", 1u << 20, 8);
            fprintf(f, "op_crash=\"\\xfc\"\nop_crash_master=\"\\xfd\"\n");
        }
        if (t >= 2) { /* the owner target's (fuzz_owner.c): ids of plans, handles, holders */
            for (unsigned id = 1; id <= 4; id++) {
                char n[32];
                snprintf(n, sizeof n, "id_%u", id);
                dict_u(f, n, id, 8);
            }
            fprintf(f, "op_time=\"\\xe4\"\nop_time_long=\"\\xed\"\nop_close=\"\\xf0\"\nop_link_drop=\"\\xf8\"\n");
            dict_u(f, "proto", FX_PROTOCOL_VERSION, 4);
        }
        if (t == 1) { /* the master target's fixed identities (fuzz_master.c) */
            fprintf(f, "owner0=\"\\x02\\x00\\x00\\x00o0\"\nowner1=\"\\x02\\x00\\x00\\x00o1\"\n");
            fprintf(f, "cluster=\"\\x02\\x00\\x00\\x00fz\"\ntoken=\"\\x03\\x00\\x00\\x00tok\"\n");
            dict_u(f, "token_first", 1001, 8);
            dict_u(f, "token_second", 1002, 8);
            dict_u(f, "gen_o0", 1, 8);
            dict_u(f, "gen_o1", 2, 8);
            dict_u(f, "put_ms_first", 1700001000000ull, 8);
            dict_u(f, "proto", FX_PROTOCOL_VERSION, 4);
            fprintf(f, "op_time=\"\\xe4\"\nop_time_long=\"\\xed\"\nop_close=\"\\xf0\"\n");
        }
        fclose(f);
    }
}

/* ---- disk: [mode][edits] against fuzz_disk.c's template (its comment has the layout) ---- */
static void disk_seed(const char *name, const char *bytes, size_t n) { write_file("corpus/disk", name, bytes, n); }
#define DISK_SEED(name, lit) disk_seed(name, lit, sizeof lit - 1)

static void disk_seeds(void)
{
    DISK_SEED("template", "\x00");
    DISK_SEED("second-life-kill", "\x02");
    DISK_SEED("second-life-barrier", "\x06");
    DISK_SEED("second-life-small-buffers", "\x12");
    /* xor [slot][blk][in u16][x]: c2's value in sealed segment 2 (a miss when read) */
    DISK_SEED("rot-sealed-value", "\x00\x01\x02\x08\x64\x00\xff");
    /* d1's key_len in the tail: a broken header ends the scan (torn); c0's value there: skipped */
    DISK_SEED("rot-tail-header", "\x00\x01\x03\x02\x08\x00\x01");
    DISK_SEED("rot-tail-value", "\x00\x01\x03\x05\x00\x00\x01");
    DISK_SEED("torn-tail", "\x00\x02\x03\x03\x64\x00");
    /* segment 1's footer (its last block): scanned instead */
    DISK_SEED("rot-index-block", "\x00\x01\x01\x80\x14\x00\x01");
    /* segment 2's footer and its retirement mark, then segment 1's footer and its barrier:
     * the retired segment 0 is read again, then its records come back */
    DISK_SEED("rot-retire-mark", "\x00\x01\x02\x80\x14\x00\x01\x01\x02\x02\x3c\x00\x01");
    DISK_SEED("rot-mark-and-barrier", "\x00\x01\x02\x80\x14\x00\x01\x01\x02\x02\x3c\x00\x01"
                                      "\x01\x01\x80\x14\x00\x01\x01\x01\x00\x3c\x00\x01");
    DISK_SEED("delete-segment-1", "\x00\x03\x01");
    DISK_SEED("rename-tail", "\x00\x04\x03\x09");        /* its headers name segment 3 */
    DISK_SEED("copy-segment-1-as-4", "\x00\x05\x04\x01"); /* an earlier life's file */
    DISK_SEED("empty-spare", "\x00\x00\x05\x00\x00\x00\x00"); /* a made, never written segment 5 */
    DISK_SEED("rot-contact", "\x00\x01\x06\x00\x0a\x00\x01");
    /* forge [slot][blk][flags][put_ms][vlen u16][klen][key], in the tail after c0 */
    DISK_SEED("forge-newer-dup", "\x01\x07\x03\x06\x00\xc8\x0a\x00\x03" "dup");
    DISK_SEED("forge-tombstone", "\x01\x07\x03\x06\x01\xff\x00\x00\x02" "d0");
    DISK_SEED("forge-retire-mark", "\x01\x07\x03\x06\x04\x01\x00\x00\x00");
    /* segment 2's index entry of dup (at byte 0xb038) names c2's place (0x7000) */
    DISK_SEED("forge-index-offset", "\x01\x00\x02\x0b\x38\x00\x02\x00\x70");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_seeds OUTDIR [RECORDED-SESSION...]\n");
        return 2;
    }
    out_dir = argv[1];
    mkdir(out_dir, 0755);
    for (int i = 0; i < 3; i++) g_strv[i] = fx_str_c(g_keys[i]);
    char err[256];
    if (fx_config_parse("{\"role\":\"master\",\"cluster_id\":\"fz\",\"cluster_token\":\"tok\"}", &g_cfg, err,
                        sizeof err) != FLUXON_OK) {
        fprintf(stderr, "fuzz_seeds: %s\n", err);
        return 1;
    }
    char d[512];
    snprintf(d, sizeof d, "%s/corpus", out_dir);
    mkdir(d, 0755);
    snprintf(d, sizeof d, "%s/dict", out_dir);
    mkdir(d, 0755);
    codec_seeds();
    master_seeds();
    dicts();
    for (int i = 2; i < argc; i++) import_recorded(argv[i]);
    owner_seeds();
    owner_disk_seeds();
    disk_seeds();
    printf("fuzz_seeds: corpus/{codec,master,owner,owner_disk,disk} and dict/{codec,master,owner,owner_disk}.dict written under %s\n",
           out_dir);
    return 0;
}
