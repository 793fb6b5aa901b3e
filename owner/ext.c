/* ext.c — the owner's external clients: accepts them on the unix socket, answers HELLO with
 * the segment's memfd (SCM_RIGHTS), hands every later request to the dispatch hook, and
 * lets the modules release what an external held when it goes. */
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"
#include "owner_ext.h"
#include "owner_plan.h"
#include "owner_ring.h"
#include "owner_tenant.h"
#include "ring.h"

#define OEXT_UNKNOWN_LOG_MS 1000 /* C2: at most one "unknown ids" line a second per external */

typedef struct oext_state {
    fx_oext_hooks_t hooks;
    int listen_fd;
    fx_acceptor_t *acceptor;
    owner_ext_t *exts;
    size_t n_exts;
    uint64_t requests, errors;
    uint64_t unknown_ids; /* holder ids / get handles externals named that no longer exist (C2) */
    fx_reply_counts_t replies; /* every external connection counts its replies here */
    /* ring polling (ring_poll_us > 0, issue 18): after a ring request, reply or PUBLISHED
     * the reactor polls the rings instead of sleeping on their doorbells until poll_ns
     * pass with none, plan_ns while a ring client holds a put plan (its commit is on its
     * way) */
    uint64_t poll_ns, plan_ns, poll_last_ns;
    bool polling, poll_hooked;
    /* client_limits (issue 44 C3) */
    fx_timer_t expire_timer; /* runs while externals are connected: pin_expire_ms */
    uint64_t limit_plans, expired, limit_log_ms;
    fx_owner_t *ext_owner;
    fx_hist_t ring_wait; /* a ring request: posted by the client to taken by this reactor */
} oext_state_t;

static void oext_expire_arm(fx_owner_t *o);

static void oext_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena);
static void oext_on_close(fx_conn_t *c, int status);
static const fx_conn_ops_t oext_ops = {oext_on_request, oext_on_close, NULL};
static void oext_ring_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena);
static void oext_ring_closed(fx_conn_t *c, int status);
static const fx_conn_ops_t oext_ring_ops = {oext_ring_request, oext_ring_closed, NULL};

/* The rings for e (issue 18), whose fds travel with the HELLO ack: memfd_p/efd_p stay -1
 * when there are none (the client then uses the socket). */
static void oext_ring_new(owner_ext_t *e, int *memfd_p, int *efd_p)
{
    *memfd_p = *efd_p = -1;
    e->ring = fx_oring_new(e->o, e->sock, &oext_ring_ops, e, memfd_p, efd_p);
    if (!e->ring) return;
    if (e->o->ext->poll_ns) fx_oring_set_polled(e->ring, &e->o->ext->poll_last_ns);
    fx_oring_set_wait_hist(e->ring, &e->o->ext->ring_wait);
    fx_conn_count_replies(fx_oring_conn(e->ring), &e->o->ext->replies);
}

static void oext_hello(owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    fx_owner_t *o = e->o;
    fx_body_hello_t b;
    fx_body_hello_decode(body, h->body_len, &b, arena);
    char err[256];
    int rc = fx_hello_check(&o->cfg, &b, err, sizeof err);
    if (rc == FLUXON_OK && b.role != FX_ROLE_EXTERNAL) {
        snprintf(err, sizeof err, "role %s may not connect to an owner's socket", fx_role_name((fx_role_t)b.role));
        rc = FLUXON_ERR_AUTH;
    }
    if (rc != FLUXON_OK) fx_otenant_refused(o);
    else rc = fx_otenant_hello(o, e, &b, err, sizeof err); /* issue 42: its tenant and token */
    if (rc != FLUXON_OK) {
        /* one line a second at most: a client retrying in a loop must not flood the log
         * (the refusals are counted: auth_failures) */
        uint64_t now = fx_now_ms();
        if (!o->refuse_log_ms || now - o->refuse_log_ms >= 1000) {
            FX_WARN("refusing a client on %s: %s%s", o->cfg.socket_path, err,
                    o->refuse_quiet ? " (and others since the last such line: see auth_failures)" : "");
            o->refuse_log_ms = now;
            o->refuse_quiet = 0;
        } else {
            o->refuse_quiet++;
        }
        fx_conn_reply_error(e->conn, h, rc, "%s", err);
        fx_conn_close_after_flush(e->conn, rc);
        return;
    }
    e->hello_ok = true;
    fx_str_copy(b.node_id, e->node_id, sizeof e->node_id);
    char desc[96];
    snprintf(desc, sizeof desc, "external %s", e->node_id);
    fx_conn_set_desc(e->conn, desc);
    /* The ack travels with the segment's memfd (SCM_RIGHTS); nothing else has been sent
     * on this connection yet, so a direct sendmsg keeps the stream in order. */
    fx_body_hello_ack_t ack = {FX_PROTOCOL_VERSION, fx_str_c(o->cfg.node_id), o->generation,
                               fx_segment_len(o->seg), {NULL, 0}, o->cfg.handle_ttl_ms};
    size_t bl = fx_body_hello_ack_size(&ack);
    uint8_t frame[512];
    FX_ASSERT(bl + FX_FRAME_HEADER_BYTES <= sizeof frame);
    fx_frame_header_t rh = {FX_FRAME_MAGIC, FX_MSG_HELLO, FX_FLAG_RESPONSE, (uint32_t)bl, 0, h->req_id};
    fx_frame_header_encode(&rh, frame);
    fx_body_hello_ack_encode(&ack, frame + FX_FRAME_HEADER_BYTES);
    /* the segment's memfd, then (issue 18) the rings' memfd and doorbell when there are
     * rings; 0: the reactor never waits (issue 13 item 13); a short send closes the
     * connection */
    int memfd = -1, efd = -1;
    if (b.generation == FX_RING_HELLO_WANT) oext_ring_new(e, &memfd, &efd);
    int fds[3] = {fx_segment_fd(o->seg), memfd, efd};
    rc = fx_unix_send_fds(fx_conn_fd(e->conn), fds, e->ring ? 3 : 1, frame, bl + FX_FRAME_HEADER_BYTES, 0);
    if (memfd >= 0) close(memfd); /* the client has its own; the owner keeps its mapping */
    if (rc == FLUXON_OK && e->ring) fx_oring_start(e->ring);
    if (rc != FLUXON_OK) {
        FX_WARN("cannot pass the segment to %s: %s", desc, fluxon_status_string(rc));
        fx_conn_close(e->conn, rc);
        return;
    }
    FX_DEBUG("external %s attached", e->node_id);
}

/* A request read from e's ring: served like one from the socket, its replies going to the
 * ring's conn (e->conn while it is served). */
static void oext_ring_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    owner_ext_t *e = fx_conn_ud(c);
    fx_conn_t *prev = fx_oext_reply_conn(e, c);
    oext_on_request(c, h, body, arena);
    fx_oext_reply_conn(e, prev);
}

static void oext_close_task(void *arg)
{
    fx_conn_close(arg, FLUXON_ERR_PROTOCOL);
    fx_conn_unref(arg);
}

/* The ring's conn closed: with the external (CANCELLED: nothing to do), or on a protocol
 * error in the ring: then the external goes too, like one that sent a malformed frame on
 * its socket (closed from a post: this runs inside a request being served). */
static void oext_ring_closed(fx_conn_t *c, int status)
{
    owner_ext_t *e = fx_conn_ud(c);
    if (status == FLUXON_ERR_CANCELLED || !fx_conn_is_open(e->sock)) return;
    fx_conn_ref(e->sock);
    if (fx_reactor_post(e->o->r, oext_close_task, e->sock) != FLUXON_OK) fx_conn_unref(e->sock);
}

FX_INTERNAL fx_conn_t *fx_oext_reply_conn(owner_ext_t *e, fx_conn_t *c)
{
    fx_conn_t *prev = e->conn;
    e->conn = c;
    return prev;
}

static void oext_on_request(fx_conn_t *c, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    owner_ext_t *e = fx_conn_ud(c);
    fx_owner_t *o = e->o;
    oext_state_t *x = o->ext;
    x->requests++;
    if (!e->hello_ok) {
        if (h->type != FX_MSG_HELLO) {
            FX_ERROR("protocol error from %s: %s before HELLO; closing the connection", fx_conn_desc(c),
                     fx_msg_name(h->type));
            x->errors++;
            fx_conn_close(c, FLUXON_ERR_PROTOCOL);
            return;
        }
        oext_hello(e, h, body, arena);
        return;
    }
    /* issue 42: the keys in e's tenant's namespace (a LIST is forwarded from there) */
    fx_frame_header_t th = *h;
    if (!fx_otenant_request(o, e, &th, &body, arena)) return;
    h = &th;
    if (x->hooks.request(o, e, h, body, arena)) return;
    x->errors++;
    if (h->req_id)
        fx_conn_reply_error(c, h, FLUXON_ERR_INVALID_ARGUMENT, "%s is not served by an owner", fx_msg_name(h->type));
}

static void oext_on_close(fx_conn_t *c, int status)
{
    owner_ext_t *e = fx_conn_ud(c);
    fx_owner_t *o = e->o;
    oext_state_t *x = o->ext;
    fx_oring_close(e->ring); /* no more requests nor replies through it */
    e->ring = NULL;
    e->conn = e->sock;
    x->hooks.closed(o, e);
    if (e->hello_ok) fx_otenant_closed(o, e);
    if (e->prev) e->prev->next = e->next;
    else x->exts = e->next;
    if (e->next) e->next->prev = e->prev;
    x->n_exts--;
    fx_free(e);
}

static void oext_on_accept(void *arg, int fd)
{
    fx_owner_t *o = arg;
    oext_state_t *x = o->ext;
    if (fd < 0) {
        FX_ERROR("accept on %s failed: %s", o->cfg.socket_path, strerror(-fd));
        return;
    }
    owner_ext_t *e = fx_calloc(1, sizeof *e);
    if (!e) {
        close(fd);
        return;
    }
    e->o = o;
    e->tenant = -1;
    e->conn = e->sock = fx_conn_new(o->r, fd, &oext_ops, e, o->cfg.max_frame_bytes, "new external");
    if (e->conn) fx_conn_count_replies(e->conn, &o->ext->replies);
    if (e->conn) fx_conn_set_chaos(e->conn, fx_owner_chaos(o)); /* test-only message chaos (NULL: off) */
    if (!e->conn) {
        fx_free(e);
        return;
    }
    e->next = x->exts;
    if (x->exts) x->exts->prev = e;
    x->exts = e;
    x->n_exts++;
    oext_expire_arm(o);
}

/* ---- client_limits (issue 44 C3) ---- */

/* client_limits.pin_expire_ms: a client whose oldest pin (a get handle or read plan it never
 * released) is older is disconnected: its plans, handles and pins are all revoked at once, as
 * when it goes away, and its library reports the owner lost. A client that pins the hot tier
 * and never releases cannot starve the others for longer than this. */
static void oext_on_expire(fx_reactor_t *r, fx_timer_t *t)
{
    fx_owner_t *o = FX_CONTAINER_OF(t, oext_state_t, expire_timer)->ext_owner;
    oext_state_t *x = o->ext;
    uint64_t now = fx_now_ms(), limit = o->cfg.client_pin_expire_ms;
    for (owner_ext_t *e = x->exts, *nx; e; e = nx) {
        nx = e->next;
        const owner_holder_t *h = e->holders_tail;
        if (!h || now - h->since_ms < limit) continue;
        x->expired++;
        FX_ERROR("client %s holds a pin for %llu ms, longer than client_limits.pin_expire_ms %llu: disconnected, "
                 "its plans, handles and %llu pinned bytes revoked",
                 e->node_id[0] ? e->node_id : fx_conn_desc(e->sock), (unsigned long long)(now - h->since_ms),
                 (unsigned long long)limit, (unsigned long long)e->pinned_bytes);
        fx_conn_close(e->sock, FLUXON_ERR_LEASE_EXPIRED);
    }
    oext_expire_arm(o);
}

static void oext_expire_arm(fx_owner_t *o)
{
    oext_state_t *x = o->ext;
    if (!x->exts || !x->acceptor || fx_timer_armed(&x->expire_timer)) return;
    uint32_t ms = FX_MIN(FX_MAX(o->cfg.client_pin_expire_ms / 4, 10u), 1000u);
    fx_timer_arm(o->r, &x->expire_timer, ms, oext_on_expire);
}

FX_INTERNAL bool fx_oext_plans_full(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h)
{
    oext_state_t *x = o->ext;
    uint32_t n = 0, cap = o->cfg.client_max_plans;
    for (const owner_plan_t *p = e->plans; p && n < cap; p = p->next) n++; /* at most cap steps */
    if (n < cap) return false;
    x->limit_plans++;
    uint64_t now = fx_now_ms();
    if (!x->limit_log_ms || now - x->limit_log_ms >= 1000) { /* one line a second */
        x->limit_log_ms = now;
        FX_WARN("client %s holds %u put plans not committed, at its limit (client_limits.max_plans %u): refused "
                "with FLUXON_ERR_BUSY until it commits or aborts some",
                e->node_id[0] ? e->node_id : fx_conn_desc(e->conn), n, cap);
    }
    fx_conn_reply_error(e->conn, h, FLUXON_ERR_BUSY,
                        "put_start: this client holds %u put plans not committed (client_limits.max_plans %u)", n,
                        cap);
    return true;
}

/* Does a ring client hold a put plan (put_start answered or being claimed)? */
static bool oext_ring_plans(const oext_state_t *x)
{
    for (const owner_ext_t *e = x->exts; e; e = e->next)
        if (e->ring && e->plans) return true;
    return false;
}

/* One pass over every external's ring: true when a request or reply was handled. */
static bool oext_poll_rings(oext_state_t *x)
{
    bool work = false;
    for (owner_ext_t *e = x->exts, *nx; e; e = nx) {
        nx = e->next; /* a ring pass never frees an external: its close is posted */
        if (e->ring) work |= fx_oring_poll(e->ring);
    }
    return work;
}

/* The reactor's idle hook while ring_poll_us > 0: polls every ring (callers then skip
 * the doorbell) until poll_ns pass with no request, reply or PUBLISHED (plan_ns if
 * longer while a ring client holds a put plan: the engine is writing its values and the
 * commit follows, so the commit finds the owner awake instead of paying its wake-up),
 * then parks them (doorbells armed, a last look) and lets the reactor sleep. A ring
 * request is served by one loop turn's pass, with no eventfd write, wake-up or io_uring
 * completion in between. A pass that found nothing yields the CPU (sched_yield): a thread
 * this poll would keep waiting (the master, another owner, the engine) runs at once on
 * this core, and with none runnable the call returns at once. Issue 38, the trace replay
 * on 2 vCPUs, medians of 5 interleaved runs: one owner 8,204 -> 9,850 requests/s, with a
 * CPU owner 6,163 -> 6,652 (put_start p99 509 -> 450 us). */
static bool oext_poll_idle(void *arg)
{
    fx_owner_t *o = arg;
    oext_state_t *x = o->ext;
    uint64_t now = fx_now_ns();
    bool work = x->polling && oext_poll_rings(x);
    if (work && x->poll_last_ns < now) x->poll_last_ns = now;
    /* a reply written during this pass stamped a time after `now` */
    uint64_t idle = now > x->poll_last_ns ? now - x->poll_last_ns : 0;
    if (idle < x->poll_ns || (idle < x->plan_ns && oext_ring_plans(x))) {
        x->polling = true;
        if (!work && !fx_reactor_idle_kept_busy(o->r)) sched_yield(); /* not while the disk copies go on (issue 39) */
        return true;
    }
    if (!x->polling) return false;
    x->polling = false;
    for (owner_ext_t *e = x->exts, *nx; e; e = nx) {
        nx = e->next;
        if (e->ring && fx_oring_park(e->ring)) {
            x->poll_last_ns = fx_now_ns(); /* a request came as it parked: poll on */
            x->polling = true;
        }
    }
    return x->polling;
}

/* Between two of the reactor's callbacks (fx_reactor_set_between): while the rings are
 * polled, a request already posted is served now instead of after the rest of the pass
 * (a batch of the master's frames, the write-back's timers). */
static void oext_poll_between(void *arg)
{
    fx_owner_t *o = arg;
    oext_state_t *x = o->ext;
    if (x->polling && oext_poll_rings(x)) x->poll_last_ns = fx_now_ns();
}

FX_INTERNAL int fx_oext_init(fx_owner_t *o, const fx_oext_hooks_t *hooks)
{
    oext_state_t *x = fx_calloc(1, sizeof *x);
    if (!x) return FLUXON_ERR_NOMEM;
    x->hooks = *hooks;
    x->listen_fd = -1;
    x->ext_owner = o;
    fx_timer_init(&x->expire_timer);
    x->poll_ns = (uint64_t)o->cfg.ring_poll_us * 1000u;
    x->plan_ns = (uint64_t)o->cfg.ring_poll_plan_us * 1000u;
    o->ext = x;
    if (x->poll_ns) {
        int prc = fx_reactor_add_idle_hook(o->r, oext_poll_idle, o, 0);
        if (prc != FLUXON_OK) return prc;
        x->poll_hooked = true;
        fx_reactor_set_between(o->r, oext_poll_between, o);
    }
    int rc = fx_unix_listen(o->cfg.socket_path, &x->listen_fd);
    if (rc != FLUXON_OK) return rc;
    rc = fx_acceptor_start(o->r, x->listen_fd, oext_on_accept, o, &x->acceptor);
    if (rc != FLUXON_OK) {
        close(x->listen_fd);
        x->listen_fd = -1;
        fx_unix_remove(o->cfg.socket_path);
    }
    return rc;
}

FX_INTERNAL void fx_oext_shutdown(fx_owner_t *o)
{
    oext_state_t *x = o->ext;
    if (!x) return;
    if (x->acceptor) fx_acceptor_stop(o->r, x->acceptor);
    x->acceptor = NULL;
    if (x->poll_hooked) {
        fx_reactor_del_idle_hook(o->r, oext_poll_idle, o);
        fx_reactor_set_between(o->r, NULL, NULL);
    }
    x->poll_hooked = false;
    fx_timer_disarm(o->r, &x->expire_timer);
    while (x->exts) fx_conn_close(x->exts->sock, FLUXON_ERR_CANCELLED);
    if (x->listen_fd >= 0) {
        close(x->listen_fd);
        x->listen_fd = -1;
        fx_unix_remove(o->cfg.socket_path);
    }
}

FX_INTERNAL void fx_oext_fini(fx_owner_t *o)
{
    if (o->ext && o->ext->poll_hooked) {
        fx_reactor_del_idle_hook(o->r, oext_poll_idle, o);
        fx_reactor_set_between(o->r, NULL, NULL);
    }
    fx_free(o->ext);
    o->ext = NULL;
}

FX_INTERNAL void fx_oext_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    oext_state_t *x = o->ext;
    m->externals = x->n_exts;
    m->ring_wait = x->ring_wait;
    m->requests = x->requests;
    m->errors = x->errors;
    m->ext_unknown_ids = x->unknown_ids;
    m->client_limit_plans = x->limit_plans;
    m->clients_expired = x->expired;
}

FX_INTERNAL void fx_oext_unknown(fx_owner_t *o, owner_ext_t *e, const char *what, uint64_t first, uint64_t n)
{
    if (!n) return;
    o->ext->unknown_ids += n;
    e->unknown_unlogged += n;
    uint64_t now = fx_now_ms();
    if (e->unknown_log_ms && now - e->unknown_log_ms < OEXT_UNKNOWN_LOG_MS) return; /* counted, not logged */
    FX_WARN("%s named %llu unknown %s (this one %llu) since the last such line (one line a second per client at "
            "most; the owner stat ext_unknown_ids counts them all)",
            fx_conn_desc(e->sock), (unsigned long long)e->unknown_unlogged, what, (unsigned long long)first);
    e->unknown_log_ms = now ? now : 1;
    e->unknown_unlogged = 0;
}

FX_INTERNAL const fx_reply_counts_t *fx_oext_replies(fx_owner_t *o) { return &o->ext->replies; }

#undef OEXT_UNKNOWN_LOG_MS
