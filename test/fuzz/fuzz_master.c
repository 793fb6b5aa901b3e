/* fuzz_master.c — the master's request handlers, driven by frames against an in-process
 * master (no sockets, no reactor loop). The seam is master.c's own dispatch: this file
 * includes master.c, so the frames go through master_on_request exactly as frames from a
 * socket do (conn parse -> validate -> dispatch -> mkv handlers), over socketless conns
 * (fx_conn_new_sink). The state is deterministic (master generation FZ_GEN, so in-flight
 * tokens are FZ_GEN+1, +2, ...) and fresh per input.
 *
 * Peers: 0 and 1 are owners "o0" (generation 1) and "o1" (generation 2), registered by
 * the harness before the input; 2 and 3 are new connections (no HELLO yet).
 * Input: records [op u8][frame]: op < 0xE0 feeds the next frame (its 24-byte header and
 * up to body_len bytes, as many as are left) to peer op % 4; 0xE0..0xEF advances the
 * clock by 16 ms << (op & 15) and fires the timers that came due (lease expiry, in-flight
 * TTL, dedup sweep); op >= 0xF0 closes peer op % 4 (its owner is declared dead) and opens
 * a new connection in its place. The clock is the harness's: fx_now_ms/fx_now_ns/
 * fx_realtime_ns are wrapped at link time (-Wl,--wrap, Makefile FUZZ_LDFLAGS_master), so a run replays
 * exactly.
 * After every record (the walks of every route and allocator: at the end of the input): every frame the master sent decodes and validates against the
 * catalog; no route without a replica (1..MKV_MAX_REPLICAS, each on a known node of its
 * current generation, a placed range still allocated); replica and route counts agree with
 * the table and the prefix index (once a LIST built it); no counter went negative (wrapped); placed bytes stay
 * within the node's allocations. At the end (a reset: every connection closes, every
 * owner is dead): R1, no in-flight put still blocks its keys and no durable get record is
 * left. */
#include "master.c"

#include "fuzz.h"

#define FZ_PEERS 4
#define FZ_GEN 1000ull
#define FZ_SEG (8ull << 20) /* small: the allocator check walks its pages */
#define FZ_GRANT (1ull << 20)

static fx_reactor_t *fz_r;
static uint64_t fz_clock_ns;
uint64_t __wrap_fx_now_ns(void);
uint64_t __wrap_fx_now_ms(void);
uint64_t __wrap_fx_now_ns(void) { return fz_clock_ns; }
uint64_t __wrap_fx_now_ms(void) { return fz_clock_ns / 1000000ull; }
uint64_t __wrap_fx_realtime_ns(void); /* put ids: FZ_EPOCH_NS + the clock */
uint64_t __wrap_fx_realtime_ns(void) { return 1700000000000000000ull + fz_clock_ns; }
/* Every table starts at the minimum capacity (the route table's 1024 initial slots were
 * zeroed, walked by the checks, cleared and freed per input: most of the run's time); it
 * also makes the inputs exercise the tables' growth. */
int __real_fx_hmap_create(size_t initial_cap, fx_hmap_t **m_p);
int __wrap_fx_hmap_create(size_t initial_cap, fx_hmap_t **m_p);
int __wrap_fx_hmap_create(size_t initial_cap, fx_hmap_t **m_p)
{
    (void)initial_cap;
    return __real_fx_hmap_create(0, m_p);
}
/* The allocators' full walk (every free list) runs at the end of an input that used one. */
static bool fz_alloc_used;
static fx_config_t fz_cfg;
static fx_arena_t fz_sink_arena;

/* FUZZ_TRACE=1: prints what the master answers (to write seed sessions by hand). */
static bool fz_trace;
static void fz_trace_frame(const fx_frame_header_t *h, const uint8_t *body)
{
    fx_arena_t a = {0};
    fprintf(stderr, "  <- %s%s req %llu status %d", fx_msg_name(h->type), h->flags ? " response" : "",
            (unsigned long long)h->req_id, h->status);
    if (h->status) {
        fx_body_error_t e;
        if (fx_body_error_decode(body, h->body_len, &e, &a) == FLUXON_OK) fprintf(stderr, ": %.*s", (int)e.message.len, e.message.p);
    } else if (h->type == FX_MSG_PUT_PLACE && h->flags) {
        fx_body_put_place_ack_t b;
        fx_body_put_place_ack_decode(body, h->body_len, &b, &a);
        fprintf(stderr, ": token %llu target %.*s offsets", (unsigned long long)b.put_token, (int)b.target_node_id.len,
                b.target_node_id.p);
        for (uint32_t i = 0; i < b.offsets.n; i++) fprintf(stderr, " %llu/%lld", (unsigned long long)b.offsets.v[i], (long long)b.statuses.v[i]);
    } else if (h->type == FX_MSG_LOOKUP && h->flags) {
        fx_body_lookup_ack_t b;
        fx_body_lookup_ack_decode(body, h->body_len, &b, &a);
        for (uint32_t i = 0; i < b.statuses.n; i++)
            fprintf(stderr, " [%lld src %llu off %llu put %llu.%llu mode %llu]", (long long)b.statuses.v[i],
                    (unsigned long long)b.src.v[i], (unsigned long long)b.offsets.v[i], (unsigned long long)b.put_ms.v[i],
                    (unsigned long long)b.put_ver.v[i], (unsigned long long)(b.modes.n > i ? b.modes.v[i] : 0));
    } else if ((h->type == FX_MSG_PUT_DONE || h->type == FX_MSG_GET_DONE || h->type == FX_MSG_EVICT) && h->flags) {
        fx_body_put_done_ack_t b;
        fx_body_statuses_t st;
        if (h->type == FX_MSG_PUT_DONE && fx_body_put_done_ack_decode(body, h->body_len, &b, &a) == FLUXON_OK) {
            for (uint32_t i = 0; i < b.statuses.n; i++)
                fprintf(stderr, " [%lld put %llu.%llu]", (long long)b.statuses.v[i], (unsigned long long)b.put_ms.v[i],
                        (unsigned long long)b.put_ver.v[i]);
        } else if (fx_body_statuses_decode(body, h->body_len, &st, &a) == FLUXON_OK) {
            for (uint32_t i = 0; i < st.statuses.n; i++) fprintf(stderr, " %lld", (long long)st.statuses.v[i]);
        }
    }
    fputc('\n', stderr);
    fx_arena_free(&a);
}

/* Every frame the master sends must be well-formed. */
static void fz_sink(void *arg, const uint8_t *p, size_t n)
{
    (void)arg;
    size_t off = 0;
    while (off < n) {
        FUZZ_CHECK(n - off >= FX_FRAME_HEADER_BYTES, "a partial header in the master's output");
        fx_frame_header_t h;
        FUZZ_CHECK(fx_frame_header_decode(p + off, 64ull << 20, &h) == FLUXON_OK, "bad header sent");
        FUZZ_CHECK(n - off - FX_FRAME_HEADER_BYTES >= h.body_len, "a partial body in the master's output");
        int rc = fx_msg_validate(&h, p + off + FX_FRAME_HEADER_BYTES, &fz_sink_arena);
        fx_arena_reset(&fz_sink_arena);
        FUZZ_CHECK(rc == FLUXON_OK, "the master sent a malformed %s (flags %x, status %d, %u bytes)",
                   fx_msg_name(h.type) ? fx_msg_name(h.type) : "?", h.flags, h.status, h.body_len);
        if (fz_trace) fz_trace_frame(&h, p + off + FX_FRAME_HEADER_BYTES);
        off += FX_FRAME_HEADER_BYTES + h.body_len;
    }
}

/* The harness holds a reference on each peer's conn (master_on_close frees the peer). */
static fx_conn_t *fz_peer_new(fx_master_t *m)
{
    master_peer_t *p = fx_calloc(1, sizeof *p);
    FUZZ_CHECK(p != NULL, "out of memory");
    p->m = m;
    p->conn = fx_conn_new_sink(m->r, &master_peer_ops, p, m->cfg.max_frame_bytes, "fuzz peer", fz_sink, NULL);
    FUZZ_CHECK(p->conn != NULL, "out of memory");
    p->next = m->peers;
    if (m->peers) m->peers->prev = p;
    m->peers = p;
    fx_conn_ref(p->conn);
    return p->conn;
}


static void fz_register(fx_conn_t *c, const char *id, uint64_t gen, const char *sub)
{
    master_peer_t *p = fx_conn_ud(c);
    fx_body_hello_t hb;
    fx_hello_fill(&fz_cfg, FX_ROLE_OWNER, id, gen, &hb);
    FZ_SEND(p->conn, FX_MSG_HELLO, 1, hello, &hb);
    fx_body_register_t rb = {.node_id = fx_str_c(id), .generation = gen, .node_role = FX_NODE_GPU_OWNER,
                             .segment_bytes = FZ_SEG, .segment_base = 0x7f0000000000ull,
                             .ucx_address = fx_str_c("ucx-address"), .rkey = fx_str_c("rkey"),
                             .grant_bytes = FZ_GRANT, .sub_cluster = fx_str_c(sub)};
    FZ_SEND(p->conn, FX_MSG_REGISTER, 2, register, &rb);
    FUZZ_CHECK(p->node && p->node->alive, "the harness's owner %s did not register", id);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_trace = getenv("FUZZ_TRACE") != NULL;
    fx_log_set_level(fz_trace ? FX_LOG_INFO : FX_LOG_OFF);
    FUZZ_CHECK(fx_reactor_create(&fz_r) == FLUXON_OK, "reactor");
    char err[256];
    FUZZ_CHECK(fx_config_parse("{\"role\":\"master\",\"cluster_id\":\"fz\",\"cluster_token\":\"tok\","
                               "\"max_frame_bytes\":\"1MiB\"}", &fz_cfg, err, sizeof err) == FLUXON_OK,
               "%s", err);
    return 0;
}

static bool fz_known_node(const fx_master_t *m, const master_node_t *n)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i] == n) return true;
    return false;
}

/* full: walk every route and allocator (the end of an input); otherwise only the O(1)
 * checks (after every record: walking a 1024-slot table each time costs most of the run). */
static void fz_check(fx_master_t *m, bool full)
{
    mkv_t *s = m->kv;
#define FZ_CTR(name, kind, family, labels, help)                                                              \
    FUZZ_CHECK(s->c.name < (1ull << 62), "counter " #name " is %llu", (unsigned long long)s->c.name);
    FX_MASTER_KV_COUNTERS(FZ_CTR)
#undef FZ_CTR
    FUZZ_CHECK(s->dedup_acks < (1ull << 62) && s->dedup_bytes < (1ull << 62), "dedup gauges wrapped");
    FUZZ_CHECK(s->replicas < (1ull << 62) && s->replicas >= fx_hmap_count(s->routes),
               "%llu replicas for %zu routes", (unsigned long long)s->replicas, fx_hmap_count(s->routes));
    FUZZ_CHECK(!s->index || fx_hmap_count(s->routes) == fx_prefix_index_count(s->index),
               "%zu routes, %zu keys in the index (built by a LIST)", fx_hmap_count(s->routes),
               fx_prefix_index_count(s->index));
    for (size_t i = 0; i < m->n_nodes; i++) {
        const master_node_t *n = m->nodes[i];
        FUZZ_CHECK(n->placed_bytes <= n->segment_bytes, "%s: placed %llu of a %llu-byte segment", n->node_id,
                   (unsigned long long)n->placed_bytes, (unsigned long long)n->segment_bytes);
        if (n->alloc && fx_offset_alloc_used(n->alloc)) fz_alloc_used = true;
        if (n->alloc)
            FUZZ_CHECK(n->placed_bytes <= fx_offset_alloc_used(n->alloc), "%s: placed %llu > allocated %llu",
                       n->node_id, (unsigned long long)n->placed_bytes,
                       (unsigned long long)fx_offset_alloc_used(n->alloc));
        if (full && n->alloc && fz_alloc_used) FUZZ_CHECK(fx_offset_alloc_check(n->alloc) == 0, "%s: allocator corrupt", n->node_id);
    }
    if (!full && !fz_trace) return;
    uint64_t reps = 0;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    const char *k;
    size_t kl;
    void *v;
    while (fx_hmap_iter_next(s->routes, &it, &k, &kl, &v)) {
        const mkv_route_t *r = v;
        FUZZ_CHECK(r->n_rep >= 1 && r->n_rep <= MKV_MAX_REPLICAS, "route %.*s has %u replicas", (int)FX_MIN(kl, 80u),
                   k, r->n_rep);
        FUZZ_CHECK(kl >= 1 && kl <= MKV_MAX_KEY, "route key of %zu bytes", kl);
        FUZZ_CHECK(!s->index || fx_prefix_index_contains(s->index, k, kl), "route %.*s not in the prefix index",
                   (int)FX_MIN(kl, 80u), k);
        for (uint32_t j = 0; j < r->n_rep; j++) {
            const mkv_replica_t *rp = &r->rep[j];
            FUZZ_CHECK(fz_known_node(m, rp->node), "route %.*s: replica on an unknown node", (int)FX_MIN(kl, 80u), k);
            FUZZ_CHECK(rp->generation == rp->node->generation,
                       "route %.*s: replica of generation %llu on %s (generation %llu)", (int)FX_MIN(kl, 80u), k,
                       (unsigned long long)rp->generation, rp->node->node_id,
                       (unsigned long long)rp->node->generation);
            for (uint32_t j2 = 0; j2 < j; j2++)
                FUZZ_CHECK(!(r->rep[j2].node == rp->node && r->rep[j2].offset == rp->offset),
                           "route %.*s: the same replica twice", (int)FX_MIN(kl, 80u), k);
            if (rp->range_bytes) {
                uint64_t len = 0;
                FUZZ_CHECK(rp->node->alloc && fx_offset_alloc_size_of(rp->node->alloc, rp->offset, &len) == FLUXON_OK,
                           "route %.*s: placed range at %llu on %s is not allocated", (int)FX_MIN(kl, 80u), k,
                           (unsigned long long)rp->offset, rp->node->node_id);
            }
        }
        reps += r->n_rep;
        if (fz_trace) {
            fprintf(stderr, "    route %.*s put %llu.%u:", (int)FX_MIN(kl, 80u), k, (unsigned long long)r->put_ms, r->put_ver);
            for (uint32_t j = 0; j < r->n_rep; j++)
                fprintf(stderr, " %s@%llu%s", r->rep[j].node->node_id, (unsigned long long)r->rep[j].offset,
                        r->rep[j].range_bytes ? "(range)" : "");
            fputc('\n', stderr);
        }
    }
    FUZZ_CHECK(reps == s->replicas, "%llu replicas in routes, counter says %llu", (unsigned long long)reps,
               (unsigned long long)s->replicas);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    fz_clock_ns = 1000000000000ull; /* 1000 s */
    fz_alloc_used = false;
    fx_master_t *m = fx_calloc(1, sizeof *m);
    FUZZ_CHECK(m != NULL, "out of memory");
    m->r = fz_r;
    m->cfg = fz_cfg;
    m->generation = FZ_GEN;
    m->listen_fd = -1;
    FUZZ_CHECK(fx_master_kv_init(m) == FLUXON_OK, "kv init");
    fx_conn_t *peer[FZ_PEERS];
    for (int i = FZ_PEERS - 1; i >= 0; i--) peer[i] = fz_peer_new(m);
    fz_register(peer[0], "o0", 1, "a");
    fz_register(peer[1], "o1", 2, "b");
    fz_check(m, false);

    size_t off = 0;
    while (off < size) {
        uint8_t op = data[off++];
        int pi = op % FZ_PEERS;
        if (op >= 0xE0 && op < 0xF0) {
            fz_clock_ns += (16ull << (op & 15)) * 1000000ull;
            fx_reactor_run_due_timers(fz_r);
        } else if (op >= 0xF0) {
            fx_conn_close(peer[pi], FLUXON_ERR_UNAVAILABLE); /* frees the peer (master_on_close) */
            fx_conn_unref(peer[pi]);
            peer[pi] = fz_peer_new(m);
        } else {
            size_t n = size - off;
            if (n >= FX_FRAME_HEADER_BYTES) {
                const uint8_t *b = data + off + 8;
                uint32_t bl = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
                n = FX_FRAME_HEADER_BYTES + FX_MIN((size_t)bl, n - FX_FRAME_HEADER_BYTES);
            }
            fx_conn_feed(peer[pi], data + off, n);
            if (!fx_conn_is_open(peer[pi])) { /* closed on a protocol error (or HELLO refused) */
                fx_conn_unref(peer[pi]);
                peer[pi] = fz_peer_new(m);
            }
            off += n;
        }
        fz_check(m, false);
    }
    fz_check(m, true);

    /* the reset: every connection closes, every owner is declared dead */
    for (int i = 0; i < FZ_PEERS; i++) {
        fx_conn_close(peer[i], FLUXON_ERR_UNAVAILABLE);
        fx_conn_unref(peer[i]);
    }
    FUZZ_CHECK(m->peers == NULL, "a peer outlived its connection");
    for (size_t i = 0; i < m->n_nodes; i++) FUZZ_CHECK(!m->nodes[i]->alive, "%s alive after the reset", m->nodes[i]->node_id);
    fz_check(m, false);
    fx_mmetrics_t mm = {0};
    fx_master_kv_metrics(m, &mm);
    FUZZ_CHECK(mm.inflight_put_keys == 0, "R1: in-flight puts still block %llu keys after every owner died",
               (unsigned long long)mm.inflight_put_keys);
    FUZZ_CHECK(mm.inflight_gets == 0, "R1: %llu durable gets still recorded after every owner died",
               (unsigned long long)mm.inflight_gets);

    m->shutting_down = true;
    fx_master_kv_fini(m);
    for (size_t i = 0; i < m->n_nodes; i++) {
        fx_master_kv_node_free(m, m->nodes[i]);
        fx_free(m->nodes[i]->ucx_address);
        fx_free(m->nodes[i]->rkey);
        fx_free(m->nodes[i]);
    }
    fx_free(m->nodes);
    fx_free(m);
    return 0;
}
