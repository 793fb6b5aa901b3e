/* test_ring.c — the shared-memory rings between an external and its owner (issue 18): the
 * owner treats the region as hostile (a client that scribbles garbage into its slots or
 * its one-way queue is closed like one that sends a malformed frame, and the owner keeps
 * serving the others), the region cannot be resized under the owner, the ring and the
 * socket serve the same calls, and a client killed in the middle of a request leaves no
 * pin, plan or handle behind. */
#include <criterion/criterion.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "config.h"
#include "hello.h"
#include "kvfix.h"
#include "ring.h"
#include "sockio.h"
#include "unix.h"

TestSuite(ring, .fini = kf_down, .timeout = 120);
static void (*const rg_unused)(int) __attribute__((unused)) = kf_up;
static int (*const rg_unused2)(const uint8_t *, size_t, uint64_t) __attribute__((unused)) = kf_check;

/* An external that speaks the bootstrap itself and asks for rings: the socket, the
 * region mapped, its memfd and doorbell. */
typedef struct rg_raw {
    int sock, memfd, efd;
    void *base;
} rg_raw_t;

static rg_raw_t rg_raw_open(int owner)
{
    char path[512], cfgjson[1024], err[256];
    snprintf(path, sizeof path, "%s/own%c/s.sock", kf_dir, 'A' + owner);
    snprintf(cfgjson, sizeof cfgjson, "{\"role\":\"external\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\","
             "\"socket\":\"%s\"}", path);
    fx_config_t cfg;
    cr_assert_eq(fx_config_parse(cfgjson, &cfg, err, sizeof err), FLUXON_OK, "%s", err);
    rg_raw_t r = {-1, -1, -1, NULL};
    cr_assert_eq(fx_unix_connect(path, 2000, &r.sock), FLUXON_OK);
    fx_body_hello_t hb;
    fx_hello_fill(&cfg, FX_ROLE_EXTERNAL, "raw-ring", FX_RING_HELLO_WANT, &hb);
    uint8_t out[2048];
    size_t bl = fx_body_hello_size(&hb);
    fx_frame_header_t h = {FX_FRAME_MAGIC, FX_MSG_HELLO, 0, (uint32_t)bl, 0, 1};
    fx_frame_header_encode(&h, out);
    fx_body_hello_encode(&hb, out + FX_FRAME_HEADER_BYTES);
    cr_assert_eq(sio_write_all(r.sock, out, FX_FRAME_HEADER_BYTES + bl), 0);
    /* the header with the three fds, then the ack's body */
    struct pollfd pf = {r.sock, POLLIN, 0};
    cr_assert_eq(poll(&pf, 1, 5000), 1, "the HELLO ack arrives");
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct iovec iov = {out, FX_FRAME_HEADER_BYTES};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t n = recvmsg(r.sock, &msg, MSG_CMSG_CLOEXEC);
    cr_assert_gt(n, 0);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cr_assert(cm && cm->cmsg_type == SCM_RIGHTS, "fds came with the ack");
    size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    cr_assert_eq(nfd, 3, "the segment, the rings' memfd and the doorbell (got %zu fds)", nfd);
    int fds[3];
    memcpy(fds, CMSG_DATA(cm), sizeof fds);
    close(fds[0]);
    r.memfd = fds[1];
    r.efd = fds[2];
    if (n < (ssize_t)FX_FRAME_HEADER_BYTES)
        cr_assert_eq(sio_read_all(r.sock, out + n, FX_FRAME_HEADER_BYTES - (size_t)n, 2000), 0);
    fx_frame_header_t rh;
    cr_assert_eq(fx_frame_header_decode(out, sizeof out, &rh), FLUXON_OK);
    cr_assert_eq(rh.status, FLUXON_OK);
    cr_assert_eq(sio_read_all(r.sock, out, rh.body_len, 2000), 0);
    r.base = mmap(NULL, fx_ring_region_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, r.memfd, 0);
    cr_assert_neq(r.base, MAP_FAILED);
    return r;
}

static void rg_raw_close(rg_raw_t *r)
{
    munmap(r->base, fx_ring_region_bytes());
    close(r->memfd);
    close(r->efd);
    close(r->sock);
}

static void rg_ring(rg_raw_t *r)
{
    uint64_t one = 1;
    cr_assert_eq(write(r->efd, &one, sizeof one), (ssize_t)sizeof one);
}

/* 1 when the owner closed r's socket within timeout_ms (EOF), 0 when it stays open. */
static int rg_closed_by_owner(rg_raw_t *r, int timeout_ms)
{
    double end = th_now_s() + timeout_ms / 1000.0;
    while (th_now_s() < end) {
        struct pollfd pf = {r->sock, POLLIN, 0};
        if (poll(&pf, 1, 20) == 1) {
            char b[256];
            ssize_t k = recv(r->sock, b, sizeof b, MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno == ECONNRESET)) return 1;
        }
    }
    return 0;
}

/* A valid PING request frame in slot i (req_len set), not yet flipped to REQ. */
static uint32_t rg_put_ping(rg_raw_t *r, uint32_t i)
{
    fx_body_ping_t b = {0, 42};
    size_t bl = fx_body_ping_size(&b);
    uint8_t *d = fx_ring_slot_data(r->base, i);
    fx_frame_header_t h = {FX_FRAME_MAGIC, FX_MSG_PING, 0, (uint32_t)bl, 0, 7};
    fx_frame_header_encode(&h, d);
    fx_body_ping_encode(&b, d + FX_FRAME_HEADER_BYTES);
    fx_ring_slot(r->base, i)->req_len = (uint32_t)(FX_FRAME_HEADER_BYTES + bl);
    return (uint32_t)(FX_FRAME_HEADER_BYTES + bl);
}

/* Slot i's request posted as a client does (REQ, then `posted` raised), no doorbell. */
static void rg_post(rg_raw_t *r, uint32_t i)
{
    __atomic_store_n(&fx_ring_slot(r->base, i)->state, FX_RING_REQ, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&((fx_ring_hdr_t *)r->base)->posted, 1, __ATOMIC_SEQ_CST);
}

static void rg_submit(rg_raw_t *r, uint32_t i)
{
    rg_post(r, i);
    rg_ring(r);
}

/* Layout 2 (`posted`): a client maps a region of its own layout only; one of layout 1
 * ("FXLFRING") is refused, so a client and an owner of different layouts keep to the
 * socket instead of posting requests the other never looks at. */
Test(ring, a_region_of_another_layout_is_refused)
{
    int memfd = -1, efd = -1;
    void *base = NULL, *mapped = NULL;
    cr_assert_eq(fx_ring_create(77, &memfd, &efd, &base), FLUXON_OK);
    cr_assert_eq(fx_ring_map(memfd, 77, &mapped), FLUXON_OK, "its own layout maps");
    cr_assert_eq(((fx_ring_hdr_t *)mapped)->posted, 0);
    fx_ring_unmap(mapped);
    ((fx_ring_hdr_t *)base)->magic = 0x474e4952464c5846ull; /* "FXLFRING": layout 1 */
    cr_assert_eq(fx_ring_map(memfd, 77, &mapped), FLUXON_ERR_PROTOCOL, "layout 1 is refused");
    fx_ring_unmap(base);
    close(memfd);
    close(efd);
}

/* The well-behaved path first: a raw ring request is answered in its slot. */
Test(ring, a_request_in_a_slot_is_answered_in_place_and_the_region_cannot_be_resized)
{
    kf_up(1);
    rg_raw_t r = rg_raw_open(0);
    cr_assert_neq(ftruncate(r.memfd, 4096), 0, "the region is sealed against shrinking");
    cr_assert_neq(ftruncate(r.memfd, (off_t)fx_ring_region_bytes() * 2), 0, "and growing");
    rg_put_ping(&r, 3);
    rg_submit(&r, 3);
    fx_ring_slot_t *s = fx_ring_slot(r.base, 3);
    double end = th_now_s() + 5;
    while (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != FX_RING_DONE && th_now_s() < end) th_sleep_ms(1);
    cr_assert_eq(s->state, FX_RING_DONE, "the owner answered in the slot");
    fx_frame_header_t rh;
    cr_assert_eq(fx_frame_header_decode(fx_ring_slot_data(r.base, 3), FX_RING_SLOT_CAP, &rh), FLUXON_OK);
    cr_assert_eq(rh.type, FX_MSG_PING);
    cr_assert(rh.flags & FX_FLAG_RESPONSE);
    cr_assert_eq(rh.status, FLUXON_OK);
    cr_assert_eq(s->resp_len, FX_FRAME_HEADER_BYTES + rh.body_len);
    rg_raw_close(&r);
}

enum { RG_LEN_HUGE, RG_LEN_SHORT, RG_BAD_MAGIC, RG_BODY_MISMATCH, RG_RESPONSE, RG_MALFORMED_BODY, RG_ONEWAY_IN_SLOT,
       RG_OW_TAIL, RG_OW_LEN, RG_OW_TYPE, RG_CASES };
static const char *const rg_case_names[RG_CASES] = {
    "req_len past the slot", "req_len below a header", "bad magic", "body_len past req_len", "a response frame",
    "a body that does not decode", "RELEASE in a request slot", "one-way tail past the queue",
    "one-way record length past the queue", "one-way record of a request type"};

/* Writes garbage of one kind into r's region. */
static void rg_scribble(rg_raw_t *r, int kind)
{
    fx_ring_hdr_t *hdr = r->base;
    uint8_t *q = fx_ring_oneway(r->base);
    uint8_t *d = fx_ring_slot_data(r->base, 5);
    fx_ring_slot_t *s = fx_ring_slot(r->base, 5);
    uint32_t len = rg_put_ping(r, 5);
    switch (kind) {
    case RG_LEN_HUGE: s->req_len = 0xfffffff0u; break;
    case RG_LEN_SHORT: s->req_len = 3; break;
    case RG_BAD_MAGIC: d[0] ^= 0xff; break;
    case RG_BODY_MISMATCH: s->req_len = len - 4; break;
    case RG_RESPONSE: d[6] = FX_FLAG_RESPONSE; break;
    case RG_MALFORMED_BODY: {
        fx_frame_header_t h = {FX_FRAME_MAGIC, FX_MSG_GET_START, 0, 9, 0, 7}; /* strv count past the body */
        fx_frame_header_encode(&h, d);
        memset(d + FX_FRAME_HEADER_BYTES, 0xff, 9);
        s->req_len = FX_FRAME_HEADER_BYTES + 9;
        break;
    }
    case RG_ONEWAY_IN_SLOT: d[4] = FX_MSG_RELEASE; break;
    case RG_OW_TAIL: __atomic_store_n(&hdr->ow_tail, 12345677ull, __ATOMIC_RELEASE); break;
    case RG_OW_LEN: {
        uint32_t l = FX_RING_ONEWAY_BYTES;
        memcpy(q, &l, 4);
        __atomic_store_n(&hdr->ow_tail, 64ull, __ATOMIC_RELEASE);
        break;
    }
    case RG_OW_TYPE: { /* a PING with req_id 0 as a one-way record */
        uint32_t l = len;
        memcpy(q, &l, 4);
        memcpy(q + 8, d, len);
        memset(q + 8 + 16, 0, 8);
        __atomic_store_n(&hdr->ow_tail, (8ull + len + 7) & ~7ull, __ATOMIC_RELEASE);
        break;
    }
    }
    if (kind < RG_OW_TAIL) rg_submit(r, 5);
    else rg_ring(r);
}

/* Every kind of garbage closes that client (a protocol error, as on the socket) and
 * nothing else: a well-behaved client of the same owner is served throughout; random
 * bytes over the whole region are refused the same way. */
Test(ring, a_client_scribbling_garbage_is_closed_and_the_others_are_served)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    for (int kind = 0; kind < RG_CASES; kind++) {
        rg_raw_t r = rg_raw_open(0);
        cr_assert(kf_wait_stat(c, "externals", 2, 5000), "%s: both attached", rg_case_names[kind]);
        rg_scribble(&r, kind);
        cr_assert(rg_closed_by_owner(&r, 5000), "%s: the owner closed the scribbler", rg_case_names[kind]);
        cr_assert(kf_wait_stat(c, "externals", 1, 5000), "%s: only the good client is left", rg_case_names[kind]);
        const char *k = "good-key";
        uint8_t v[100];
        kf_fill(v, sizeof v, (uint64_t)kind);
        cr_assert_eq(fluxon_put(c, k, v, sizeof v, NULL), FLUXON_OK, "%s: the good client is served",
                     rg_case_names[kind]);
        fluxon_holder *hd = NULL;
        cr_assert_eq(fluxon_get(c, k, &hd), FLUXON_OK);
        cr_assert(kf_check(fluxon_holder_data(hd), sizeof v, (uint64_t)kind));
        fluxon_holder_release(hd);
        rg_raw_close(&r);
    }
    /* random bytes over the whole region, with every slot flipped to REQ: closed, never a crash */
    for (int round = 0; round < 8; round++) {
        rg_raw_t r = rg_raw_open(0);
        uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(round + 1);
        uint64_t *w = r.base;
        for (size_t i = 0; i < fx_ring_region_bytes() / 8; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w[i] = x;
        }
        for (uint32_t i = 0; i < FX_RING_SLOTS; i++) fx_ring_slot(r.base, i)->state = FX_RING_REQ;
        rg_ring(&r);
        cr_assert(rg_closed_by_owner(&r, 5000), "random round %d: closed", round);
        rg_raw_close(&r);
    }
    cr_assert(kf_wait_stat(c, "externals", 1, 5000));
    cr_assert_eq(kf_stat(c, "holders"), 0);
    fluxon_client_close(c);
}

/* A request the owner copied out is served from its copy: the client scribbling over
 * its slot after submitting changes nothing the owner reads (it answers the PING it
 * took, or refuses garbage; never reads the slot twice). */
Test(ring, scribbling_over_a_submitted_request_does_not_reach_the_owner)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    rg_raw_t r = rg_raw_open(0);
    int answered = 0;
    for (int round = 0; round < 200; round++) {
        uint32_t i = (uint32_t)round % FX_RING_SLOTS;
        fx_ring_slot_t *s = fx_ring_slot(r.base, i);
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == FX_RING_REQ ||
            __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == FX_RING_TAKEN)
            continue;
        rg_put_ping(&r, i);
        rg_submit(&r, i);
        /* scribble the body (never the header or the length) right away */
        memset(fx_ring_slot_data(r.base, i) + FX_FRAME_HEADER_BYTES, round & 0xff, 9);
    }
    double end = th_now_s() + 5;
    while (th_now_s() < end && answered < (int)FX_RING_SLOTS) {
        answered = 0;
        for (uint32_t i = 0; i < FX_RING_SLOTS; i++)
            answered += __atomic_load_n(&fx_ring_slot(r.base, i)->state, __ATOMIC_ACQUIRE) == FX_RING_DONE;
        th_sleep_ms(5);
    }
    cr_assert_eq(answered, (int)FX_RING_SLOTS, "every ping was answered (a ping's body is two u64s: any bytes decode)");
    cr_assert_eq(rg_closed_by_owner(&r, 200), 0, "and the client stays connected");
    rg_raw_close(&r);
    cr_assert(kf_wait_stat(c, "externals", 1, 5000));
    fluxon_client_close(c);
}

/* A client process killed while its get_start is in the owner's hands (held back 800 ms
 * by the test fault delay_request) and while it holds a prepared put plan and an
 * unconsumed get handle: the owner releases all of it when the socket closes, and the
 * request served late finds the client gone (no handle appears). Forks before any
 * thread exists. */
Test(ring, a_client_killed_mid_request_leaves_no_pins_plans_or_handles)
{
    int go[2], ready[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(ready), 0);
    pid_t child = fork();
    if (child == 0) {
        char path[512] = "";
        if (read(go[0], path, sizeof path - 1) <= 0) _exit(1);
        char cfg[700];
        snprintf(cfg, sizeof cfg,
                 "{\"role\":\"external\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"socket\":\"%s\","
                 "\"log_level\":\"error\",\"transport\":\"ring\"}", path);
        fluxon_client *c = NULL;
        if (fluxon_client_open(cfg, &c) != FLUXON_OK) _exit(2);
        const char *k = "kept-key", *p = "prepared-key";
        uint8_t v[64] = {1};
        if (fluxon_put(c, k, v, sizeof v, NULL) != FLUXON_OK) _exit(3);
        fluxon_plan *plan = NULL;
        int st;
        if (fluxon_local_fast_put_start(c, &p, 1, 4096, NULL, &plan, &st) != FLUXON_OK || st) _exit(4);
        fluxon_get_handle *h = NULL;
        fluxon_get_start_result res;
        if (fluxon_get_start(c, &k, 1, 1, NULL, 0, &h, &res) != FLUXON_OK || !res.all_hit) _exit(5);
        char one = 1;
        if (write(ready[1], &one, 1) != 1) _exit(6);
        fluxon_get_start(c, &k, 1, 1, NULL, 0, &h, &res); /* held by the owner: killed in it */
        _exit(7);
    }
    const char *extra[1] = {",\"test\":{\"fault_message\":\"GET_START\",\"fault\":\"delay_request\","
                            "\"fault_ms\":800,\"fault_count\":2}"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *c = kf_client(0);
    long long r0 = kf_stat(c, "requests");
    char path[512];
    snprintf(path, sizeof path, "%s/ownA/s.sock", kf_dir);
    cr_assert_eq(write(go[1], path, strlen(path)), (ssize_t)strlen(path));
    char one;
    struct pollfd pf = {ready[0], POLLIN, 0};
    cr_assert_eq(poll(&pf, 1, 20000), 1, "the child reached its held get_start");
    cr_assert_eq(read(ready[0], &one, 1), 1);
    cr_assert(kf_wait_stat(c, "handles_open", 1, 5000), "the child's first handle is open");
    cr_assert_eq(kf_stat(c, "slots_prepared"), 1, "the child's plan is prepared");
    /* the child's 5 frames (HELLO, put, put_start, 2 get_starts) reached the owner, the
     * last one held 800 ms; every stats call of ours counts one frame too */
    int polls = 2, in_hands = 0;
    for (double end = th_now_s() + 5; !in_hands && th_now_s() < end; th_sleep_ms(2))
        in_hands = kf_stat(c, "requests") - r0 - ++polls >= 5;
    cr_assert(in_hands, "the child's second get_start reached the owner");
    kill(child, SIGKILL);
    int status = 0;
    cr_assert_eq(sio_reap(child, 5000, &status), 0);
    cr_assert(WIFSIGNALED(status), "the child was killed (status %d)", status);
    cr_assert(kf_wait_stat(c, "externals", 1, 5000), "the owner saw the child go");
    cr_assert(kf_wait_stat(c, "handles_open", 0, 5000), "its handle is released");
    cr_assert(kf_wait_stat(c, "slots_prepared", 0, 5000), "its plan is released");
    cr_assert(kf_wait_stat(c, "holders", 0, 5000), "no pin is left");
    th_sleep_ms(1000); /* past the held request: served late, it finds the client gone */
    cr_assert_eq(kf_stat(c, "handles_open"), 0);
    cr_assert_eq(kf_stat(c, "holders"), 0);
    fluxon_holder *hd = NULL;
    cr_assert_eq(fluxon_get(c, "kept-key", &hd), FLUXON_OK, "what the child stored stays");
    fluxon_holder_release(hd);
    fluxon_client_close(c);
}

/* ---- ring polling (owner field ring_poll_us) ---- */
static bool rg_wait_state(fx_ring_slot_t *s, uint32_t want, double seconds)
{
    double end = th_now_s() + seconds;
    while (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != want && th_now_s() < end) th_sleep_ms(1);
    return __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == want;
}

static bool rg_wait_armed(rg_raw_t *r, uint32_t want, double seconds)
{
    fx_ring_hdr_t *h = r->base;
    double end = th_now_s() + seconds;
    while (__atomic_load_n(&h->armed, __ATOMIC_ACQUIRE) != want && th_now_s() < end) th_sleep_ms(1);
    return __atomic_load_n(&h->armed, __ATOMIC_ACQUIRE) == want;
}

/* After a request the owner polls the rings for ring_poll_us: its doorbell is disarmed,
 * a request submitted with no doorbell is served, and once the window passed with no
 * request the doorbell is armed again (a sleeping owner is woken by it as before). */
Test(ring, a_polling_owner_serves_without_the_doorbell_and_arms_it_again_when_idle)
{
    const char *extra[] = {",\"ring_poll_us\":300000"};
    kf_up_ex(1, NULL, extra);
    rg_raw_t r = rg_raw_open(0);
    fx_ring_slot_t *s0 = fx_ring_slot(r.base, 0), *s1 = fx_ring_slot(r.base, 1);
    cr_assert(rg_wait_armed(&r, 1, 5), "a new ring starts armed");
    rg_put_ping(&r, 0);
    rg_submit(&r, 0); /* with the doorbell */
    cr_assert(rg_wait_state(s0, FX_RING_DONE, 5), "answered");
    /* polling starts within the window (an earlier pass may still have been arming it) */
    rg_put_ping(&r, 1);
    rg_post(&r, 1); /* no doorbell */
    cr_assert(rg_wait_state(s1, FX_RING_DONE, 5), "a request with no doorbell is served while the owner polls");
    cr_assert(rg_wait_armed(&r, 1, 5), "the doorbell is armed again once the window passed with no request");
    __atomic_store_n(&s0->state, FX_RING_FREE, __ATOMIC_SEQ_CST);
    rg_put_ping(&r, 0);
    rg_submit(&r, 0);
    cr_assert(rg_wait_state(s0, FX_RING_DONE, 5), "the parked owner is woken by the doorbell");
    rg_raw_close(&r);
}

/* While a ring client holds a put plan (its engine writing the values, the commit on its
 * way) the owner polls for ring_poll_plan_us even when ring_poll_us is shorter: a request
 * with no doorbell is served, and once the plan is gone the doorbell is armed again. */
Test(ring, a_polling_owner_keeps_polling_while_a_put_plan_awaits_its_commit)
{
    const char *extra[] = {",\"ring_poll_us\":1,\"ring_poll_plan_us\":1000000"};
    kf_up_ex(1, NULL, extra);
    char cfg[700];
    snprintf(cfg, sizeof cfg,
             "{\"role\":\"external\",\"cluster_id\":\"kv\",\"cluster_token\":\"tok\",\"socket\":\"%s/ownA/s.sock\","
             "\"log_level\":\"error\",\"transport\":\"ring\"}", kf_dir);
    fluxon_client *c = NULL;
    cr_assert_eq(fluxon_client_open(cfg, &c), FLUXON_OK);
    rg_raw_t r = rg_raw_open(0);
    fx_ring_slot_t *s0 = fx_ring_slot(r.base, 0);
    const char *k = "planned";
    fluxon_plan *plan = NULL;
    int st = -1;
    cr_assert_eq(fluxon_local_fast_put_start(c, &k, 1, 4096, NULL, &plan, &st), FLUXON_OK);
    cr_assert_eq(st, FLUXON_OK);
    rg_put_ping(&r, 0);
    rg_post(&r, 0); /* no doorbell */
    cr_assert(rg_wait_state(s0, FX_RING_DONE, 5),
              "a request with no doorbell is served while a put plan awaits its commit (ring_poll_us is 1)");
    memset((void *)(uintptr_t)plan->value_ptrs[0], 7, 4096);
    fluxon_future *f = NULL;
    cr_assert_eq(fluxon_local_fast_put_commit(c, plan, &f), FLUXON_OK);
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    cr_assert(rg_wait_armed(&r, 1, 5), "the doorbell is armed again once no plan is held");
    rg_raw_close(&r);
    fluxon_client_close(c);
}

/* The caller's next request follows its reply: an owner whose answer waited on the master
 * past the window (here the master's DELETE answer is held back 600 ms, the window is 200
 * ms) polls again from the reply on, so that next request needs no doorbell (before, it
 * had parked meanwhile and the next call paid a doorbell and a wake-up: bench-hostless
 * batch 1 put_start after a delete, 3.6-56 us against 3.0-6.0 us). */
Test(ring, a_polling_owner_polls_again_from_a_late_reply_on)
{
    const char *extra[] = {",\"ring_poll_us\":200000,\"test\":{\"fault_message\":\"DELETE\",\"fault\":\"delay\","
                           "\"fault_ms\":600,\"fault_count\":1}"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *c = kf_client(0);
    rg_raw_t r = rg_raw_open(0); /* the owner's polling covers every ring: this one shows it */
    uint8_t v[64] = {4, 5, 6};
    cr_assert_eq(fluxon_put(c, "late", v, sizeof v, NULL), FLUXON_OK);
    cr_assert(rg_wait_armed(&r, 1, 5), "the window passed after the put: the owner parked");
    double t0 = th_now_s();
    cr_assert_eq(fluxon_delete(c, "late"), FLUXON_OK);
    cr_assert_geq(th_now_s() - t0, 0.5, "the master's answer was held back past the window");
    cr_assert(rg_wait_armed(&r, 0, 0.15), "the owner polls again once it answered (doorbells disarmed)");
    cr_assert(rg_wait_armed(&r, 1, 5), "and parks again when the window passed with no request");
    rg_raw_close(&r);
    fluxon_client_close(c);
}

/* The same for a put's future: its PUBLISHED ends the caller's wait as a reply does (here
 * the PUT_DONE to the master is held back 600 ms, the window is 200 ms): the owner polls
 * again from the notification on. */
Test(ring, a_polling_owner_polls_again_from_a_late_published_on)
{
    const char *extra[] = {",\"ring_poll_us\":200000,\"test\":{\"fault_message\":\"PUT_DONE\","
                           "\"fault\":\"delay_request\",\"fault_ms\":600,\"fault_count\":1}"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *c = kf_client(0);
    rg_raw_t r = rg_raw_open(0);
    const char *key = "late-published";
    fluxon_plan *plan = NULL;
    cr_assert_eq(fluxon_local_fast_put_start(c, &key, 1, 64, NULL, &plan, NULL), FLUXON_OK);
    memset((void *)(uintptr_t)plan->value_ptrs[0], 7, 64);
    fluxon_future *f = NULL;
    double t0 = th_now_s();
    cr_assert_eq(fluxon_local_fast_put_commit(c, plan, &f), FLUXON_OK);
    cr_assert(rg_wait_armed(&r, 1, 5), "the window passed while the PUT_DONE was held back: the owner parked");
    cr_assert_eq(fluxon_future_wait(f, 10000), FLUXON_OK);
    fluxon_future_free(f);
    cr_assert_geq(th_now_s() - t0, 0.5, "the PUBLISHED came after the held-back PUT_DONE");
    cr_assert(rg_wait_armed(&r, 0, 0.15), "the owner polls again from the PUBLISHED on (doorbells disarmed)");
    cr_assert(rg_wait_armed(&r, 1, 5), "and parks again when the window passed with no request");
    rg_raw_close(&r);
    fluxon_client_close(c);
}

/* A window shorter than one loop turn: the owner sees the time of the wake-up only after
 * the window ended, and must not sleep with its doorbell disarmed (found by the bench:
 * every caller after the first waited for its timeout). */
Test(ring, a_poll_window_shorter_than_a_loop_turn_never_strands_a_request)
{
    const char *extra[] = {",\"ring_poll_us\":1"};
    kf_up_ex(1, NULL, extra);
    fluxon_client *c = kf_client(0);
    uint8_t v[64] = {1, 2, 3};
    cr_assert_eq(fluxon_put(c, "polled", v, sizeof v, NULL), FLUXON_OK);
    double t0 = th_now_s();
    for (int i = 0; i < 300 && th_now_s() - t0 < 60; i++) {
        fluxon_holder *h = NULL;
        double t = th_now_s();
        cr_assert_eq(fluxon_get(c, "polled", &h), FLUXON_OK, "get %d", i);
        cr_assert_lt(th_now_s() - t, 2.0, "get %d answered at once (took %.3f s)", i, th_now_s() - t);
        cr_assert_eq(memcmp(fluxon_holder_data(h), v, sizeof v), 0);
        fluxon_holder_release(h);
        if (i % 50 == 0) th_sleep_ms(2); /* let the owner sleep now and then */
    }
    fluxon_client_close(c);
}

Test(ring, ring_poll_us_out_of_range_is_a_config_error)
{
    fx_config_t cfg;
    char err[256];
    cr_assert_eq(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"kv\",\"ring_poll_us\":-1}", &cfg, err, sizeof err),
                 FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "ring_poll_us") && strstr(err, "-1"), "%s", err);
    cr_assert_eq(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"kv\",\"ring_poll_us\":1000001}", &cfg, err,
                                 sizeof err), FLUXON_ERR_CONFIG);
    cr_assert_eq(fx_config_parse("{\"role\":\"external\",\"cluster_id\":\"kv\",\"ring_poll_us\":5}", &cfg, err,
                                 sizeof err), FLUXON_ERR_CONFIG, "an owner field");
    cr_assert_eq(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"kv\",\"ring_poll_us\":0}", &cfg, err, sizeof err),
                 FLUXON_OK, "%s", err);
    cr_assert_eq(cfg.ring_poll_us, 0);
    cr_assert_eq(cfg.ring_poll_plan_us, FX_RING_POLL_PLAN_DEFAULT_US, "a chosen ring_poll_us: the plan window's default");
    cr_assert_eq(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"kv\",\"ring_poll_plan_us\":1000001}", &cfg,
                                 err, sizeof err), FLUXON_ERR_CONFIG);
    cr_assert(strstr(err, "ring_poll_plan_us") && strstr(err, "1000001"), "%s", err);
    cr_assert_eq(fx_config_parse("{\"role\":\"external\",\"cluster_id\":\"kv\",\"ring_poll_plan_us\":5}", &cfg, err,
                                 sizeof err), FLUXON_ERR_CONFIG, "an owner field");
    cr_assert_eq(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"kv\",\"ring_poll_plan_us\":0}", &cfg, err,
                                 sizeof err), FLUXON_OK, "%s", err);
    cr_assert_eq(cfg.ring_poll_plan_us, 0);
    /* the defaults: a short window on every host; the plan window (a core while an engine
     * writes) only on hosts with FX_RING_POLL_MIN_CPUS CPUs, or where ring_poll_us is set */
    const char *owner = "{\"role\":\"owner\",\"cluster_id\":\"kv\"}";
    unsetenv("FLUXON_RING_POLL_US");
    cr_assert_eq(fx_config_parse(owner, &cfg, err, sizeof err), FLUXON_OK, "%s", err);
    cr_assert_eq(cfg.ring_poll_us, FX_RING_POLL_DEFAULT_US);
    bool big = sysconf(_SC_NPROCESSORS_ONLN) >= FX_RING_POLL_MIN_CPUS;
    cr_assert_eq(cfg.ring_poll_plan_us, big ? FX_RING_POLL_PLAN_DEFAULT_US : 0u, "%ld CPUs",
                 sysconf(_SC_NPROCESSORS_ONLN));
    cr_assert_eq(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"kv\",\"ring_poll_us\":300}", &cfg, err,
                                 sizeof err), FLUXON_OK, "%s", err);
    cr_assert_eq(cfg.ring_poll_plan_us, FX_RING_POLL_PLAN_DEFAULT_US, "a chosen window brings the plan window");
    cr_assert_eq(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"kv\",\"ring_poll_us\":300,"
                                 "\"ring_poll_plan_us\":7}", &cfg, err, sizeof err), FLUXON_OK, "%s", err);
    cr_assert_eq(cfg.ring_poll_plan_us, 7);
    cr_assert_eq(setenv("FLUXON_RING_POLL_US", "100", 1), 0);
    cr_assert_eq(fx_config_parse(owner, &cfg, err, sizeof err), FLUXON_OK, "%s", err);
    cr_assert_eq(cfg.ring_poll_us, 100);
    cr_assert_eq(cfg.ring_poll_plan_us, FX_RING_POLL_PLAN_DEFAULT_US, "so does the environment's");
    cr_assert_eq(fx_config_parse("{\"role\":\"owner\",\"cluster_id\":\"kv\",\"ring_poll_us\":300}", &cfg, err,
                                 sizeof err), FLUXON_OK, "%s", err);
    cr_assert_eq(cfg.ring_poll_us, 300, "the field beats the environment");
    cr_assert_eq(setenv("FLUXON_RING_POLL_US", "0", 1), 0);
    cr_assert_eq(fx_config_parse(owner, &cfg, err, sizeof err), FLUXON_OK, "%s", err);
    cr_assert_eq(cfg.ring_poll_us, 0);
    cr_assert_eq(cfg.ring_poll_plan_us, FX_RING_POLL_PLAN_DEFAULT_US, "a chosen 0 too (it has no effect then)");
    /* the environment's default: a clean integer in range, else ignored (warned) */
    cr_assert_eq(setenv("FLUXON_RING_POLL_US", "200", 1), 0);
    cr_assert_eq(fx_config_parse(owner, &cfg, err, sizeof err), FLUXON_OK, "%s", err);
    cr_assert_eq(cfg.ring_poll_us, 200);
    const char *bad[] = {"200x", "", "-1", " 200", "+200", "1000001", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(setenv("FLUXON_RING_POLL_US", bad[i], 1), 0);
        cr_assert_eq(fx_config_parse(owner, &cfg, err, sizeof err), FLUXON_OK, "%s", err);
        cr_assert_eq(cfg.ring_poll_us, FX_RING_POLL_DEFAULT_US, "FLUXON_RING_POLL_US=%s", bad[i]);
        cr_assert_eq(cfg.ring_poll_plan_us, big ? FX_RING_POLL_PLAN_DEFAULT_US : 0u, "FLUXON_RING_POLL_US=%s: as unset",
                     bad[i]);
    }
    unsetenv("FLUXON_RING_POLL_US");
}

/* ---- C2: unknown ids do not flood the owner's log ---- */
/* Sends one frame (req_id 0: one-way) on the raw client's socket. */
static void rg_send(rg_raw_t *r, uint16_t type, const uint8_t *body, size_t bl, uint64_t req_id)
{
    uint8_t *out = malloc(FX_FRAME_HEADER_BYTES + bl);
    fx_frame_header_t h = {FX_FRAME_MAGIC, type, 0, (uint32_t)bl, 0, req_id};
    fx_frame_header_encode(&h, out);
    memcpy(out + FX_FRAME_HEADER_BYTES, body, bl);
    cr_assert_eq(sio_write_all(r->sock, out, FX_FRAME_HEADER_BYTES + bl), 0);
    free(out);
}

/* A PING on the socket and its answer: everything sent before it was served. */
static void rg_ping_sock(rg_raw_t *r)
{
    fx_body_ping_t b = {0, 42};
    uint8_t body[64];
    fx_body_ping_encode(&b, body);
    rg_send(r, FX_MSG_PING, body, fx_body_ping_size(&b), 99);
    uint8_t hb[FX_FRAME_HEADER_BYTES];
    fx_frame_header_t rh;
    for (int i = 0; i < 16; i++) { /* skip notifications, if any */
        cr_assert_eq(sio_read_all(r->sock, hb, sizeof hb, 10000), 0, "the PING answer arrives");
        cr_assert_eq(fx_frame_header_decode(hb, sizeof hb, &rh), FLUXON_OK);
        uint8_t *skip = malloc(rh.body_len + 1);
        cr_assert_eq(sio_read_all(r->sock, skip, rh.body_len, 5000), 0);
        free(skip);
        if (rh.req_id == 99) return;
    }
    cr_assert_fail("no PING answer");
}

static size_t rg_count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[4096];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* A RELEASE of 8,000 holder ids the owner does not know, and 200 consumes of unknown get
 * handles: the owner's log (written on its reactor) gets a line per external and second
 * naming the count, not a line per id (8,200 lines before); the counter says how many. */
Test(ring, unknown_ids_are_counted_and_logged_at_most_once_a_second)
{
    kf_up(1);
    rg_raw_t r = rg_raw_open(0);
    int fl = fcntl(r.sock, F_GETFL);
    cr_assert_eq(fcntl(r.sock, F_SETFL, fl & ~O_NONBLOCK), 0, "blocking writes: the RELEASE is 64 KiB");
    char logp[600];
    snprintf(logp, sizeof logp, "%s/owner-stderr.log", kf_dir);
    int saved = dup(2), lf = open(logp, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    cr_assert(saved >= 0 && lf >= 0);
    fflush(stderr);
    cr_assert_eq(dup2(lf, 2), 2);
    enum { NIDS = 8000, NCONS = 200 };
    uint64_t *ids = malloc(NIDS * sizeof *ids);
    for (int i = 0; i < NIDS; i++) ids[i] = 0x7700000000ull + (uint64_t)i;
    fx_body_release_t rb = {{ids, NIDS}};
    size_t bl = fx_body_release_size(&rb);
    uint8_t *body = malloc(bl);
    fx_body_release_encode(&rb, body);
    rg_send(&r, FX_MSG_RELEASE, body, bl, 0);
    for (int i = 0; i < NCONS; i++) {
        fx_body_handle_consume_t cb = {0x6600000000ull + (uint64_t)i, 1};
        uint8_t cbuf[64];
        fx_body_handle_consume_encode(&cb, cbuf);
        rg_send(&r, FX_MSG_HANDLE_CONSUME, cbuf, fx_body_handle_consume_size(&cb), 0);
    }
    rg_ping_sock(&r);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(lf);
    size_t lines = rg_count_lines(logp, "unknown");
    cr_assert_leq(lines, 2, "%zu log lines for %d unknown ids (at most one a second per external)", lines,
                  NIDS + NCONS);
    cr_assert_geq(lines, 1, "the first is logged");
    fluxon_client *c = kf_client(0);
    cr_assert_eq(kf_stat(c, "ext_unknown_ids"), NIDS + NCONS);
    fluxon_client_close(c);
    free(body);
    free(ids);
    rg_raw_close(&r);
}

/* ring_wait (owner_ring_wait_seconds) counts each request from the client's stamp in its
 * slot (post_ns) to the owner's take; the stamp is the client's word only: one from the
 * future or none (0) is not a wait, and the request is served all the same. */
static void rg_ring_wait(fluxon_client *c, long long *count, long long *sum_ns)
{
    static char buf[1 << 16];
    size_t len;
    cr_assert_eq(fluxon_client_stats(c, buf, sizeof buf, &len), FLUXON_OK);
    cJSON *doc = cJSON_Parse(buf), *h = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "owner"), "ring_wait");
    cr_assert(cJSON_IsObject(h), "ring_wait in the owner's stats");
    *count = (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(h, "count"));
    *sum_ns = (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(h, "sum_ns"));
    cJSON_Delete(doc);
}

static void rg_ping_stamped(rg_raw_t *r, uint32_t i, uint64_t post_ns)
{
    fx_ring_slot_t *s = fx_ring_slot(r->base, i);
    rg_put_ping(r, i);
    s->post_ns = post_ns;
    rg_submit(r, i);
    double end = th_now_s() + 5;
    while (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != FX_RING_DONE && th_now_s() < end) th_sleep_ms(1);
    cr_assert_eq(s->state, FX_RING_DONE, "the owner answered the ping stamped %llu", (unsigned long long)post_ns);
    __atomic_store_n(&s->state, FX_RING_FREE, __ATOMIC_SEQ_CST); /* the slot is the client's again */
}

Test(ring, a_requests_wait_for_the_owner_counts_from_the_clients_stamp_when_it_is_sane)
{
    kf_up(1);
    fluxon_client *c = kf_client(0);
    rg_raw_t r = rg_raw_open(0);
    long long n0, s0, n1, s1;
    rg_ring_wait(c, &n0, &s0);
    rg_ping_stamped(&r, 1, 0);                                   /* not stamped */
    rg_ping_stamped(&r, 2, fx_now_ns() + 3600ull * 1000000000ull); /* an hour ahead */
    rg_ping_stamped(&r, 3, 1);                                   /* ages ago: past any wait */
    rg_ring_wait(c, &n1, &s1);
    cr_assert_eq(n1, n0, "no wait counted for a stamp of 0, from the future or ages old");
    rg_ping_stamped(&r, 4, fx_now_ns() - 2000000ull); /* posted 2 ms ago, as far as the owner can tell */
    rg_ring_wait(c, &n1, &s1);
    cr_assert_eq(n1, n0 + 1, "the sane stamp counts once");
    cr_assert_geq(s1 - s0, 2000000, "from the stamp: at least the 2 ms it claims (%lld ns)", s1 - s0);
    cr_assert_lt(s1 - s0, 5000000000ll);
    rg_raw_close(&r);
    fluxon_client_close(c);
}
