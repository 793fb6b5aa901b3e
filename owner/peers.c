/* peers.c — the owner's UCX glue: context and worker, the segment mapped for RMA, the
 * worker progressed from the reactor (idle hook, event fd, a 100 ms tick for timeouts),
 * one endpoint per peer owner and generation, and the pushes into other owners' segments
 * that may still land (issue 44 W2: counted per target until UCX retires them). */
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "owner_peers.h"

typedef struct owner_peer {
    char node_id[FX_ID_MAX];
    uint64_t generation;
    fx_ucx_peer_t *peer;
    bool listed; /* the master's last CLUSTER_INFO named it alive (fx_opeers_alive) */
    bool exited; /* its process exited (pidfd): this generation is never connected again */
    fx_segment_t *mapped; /* same host: its segment mapped here (peer_map.c), else NULL */
    fx_prefault_t *pf;    /* faulting `mapped` in */
    int pidfd;            /* with `mapped`: its process, watched for its exit */
    fx_watch_t *exit_watch;
    struct opeer_id *exit_id; /* the watch's argument: the peer by identity */
} owner_peer_t;

typedef struct opeer_id {
    struct opeers *u;
    char node_id[FX_ID_MAX];
    uint64_t generation;
} opeer_id_t;

/* pushes to one target owner not retired by UCX yet */
typedef struct opush_target {
    char node_id[FX_ID_MAX];
    uint64_t n;
} opush_target_t;

typedef struct opush {
    struct opeers *u;
    char target[FX_ID_MAX];
    fx_ucx_done_cb cb;
    void *arg;
    bool failed;           /* reported failed: unsettled a grace past UCX's retirement */
    uint64_t until_ms;     /* then, on u->linger, settled at this time */
    struct opush *next;
} opush_t;

typedef struct opeers {
    fx_reactor_t *r;
    fx_ucx_t *ucx;
    fx_ucx_mem_t *mem;
    void *rkey; /* UCX's */
    size_t rkey_len;
    void *reg_rkey; /* what REGISTER carries: UCX's, then the segment's descriptor (peer_map.c) */
    size_t reg_rkey_len;
    const void *address;
    size_t address_len;
    fx_watch_t *watch;
    fx_timer_t timer;
    fx_timer_t soon; /* fx_opeers_soon: progress on the loop's next turn */
    owner_peer_t *peers;
    size_t n_peers, cap_peers;
    opush_target_t *push_targets; /* those with n > 0 */
    size_t n_push_targets, cap_push_targets;
    fx_str_t *unsettled_view;     /* fx_opeers_unsettled's answer */
    uint64_t pushes_unsettled, pushes_held_after_report;
    uint64_t peers_failed_dead; /* UCX peers failed because the master no longer lists their owner */
    uint64_t peers_mapped;      /* peers whose segment is mapped here (same host) */
    uint64_t peers_mapped_listed; /* peers mapped when the master listed them (not at a transfer) */
    uint64_t peers_exited;      /* mapped peers whose process exited (their pidfd) */
    uint64_t alive_master;      /* the master generation of the last CLUSTER_INFO */
    opush_t *linger; /* failed pushes retired by UCX, unsettled until their until_ms */
} opeers_t;

/* Runs before the reactor sleeps: progress until idle, then arm the worker's event fd; a
 * busy worker (progress did work, or arm refused) keeps the loop from sleeping, and so
 * does a ring reply that progress completed (the ring poller, which ran before this hook,
 * sees its stamp next turn). While the rings are polled the loop does not sleep: progress
 * only (the arm drains the event fd, a system call every 20 us). */
static void opeer_unmap(opeers_t *u, owner_peer_t *p);
static void opeer_unwatch(opeers_t *u, owner_peer_t *p);

static bool opeer_idle(void *arg)
{
    opeers_t *u = arg;
    unsigned done = fx_ucx_progress(u->ucx);
    if (fx_reactor_idle_kept_busy(u->r)) return false;
    if (done) return true;
    return fx_ucx_arm(u->ucx) == 0;
}

static void opeer_event(void *arg)
{
    opeers_t *u = arg;
    fx_ucx_progress(u->ucx);
}

/* A transfer through a mapped peer segment is finished when fx_ucx_transfer returns, but its
 * callback waits for UCX progress, which the loop runs at most once per 20 us while it polls
 * the rings (opeer_idle's gap): a get of values another owner of this host holds waited for
 * that too (the trace replay on 2 vCPUs with a CPU owner: its transfers took 21 us on average
 * for about 16 us of copying). A 0 ms timer runs progress on the loop's next turn instead. */
static void opeer_on_soon(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    fx_ucx_progress(FX_CONTAINER_OF(t, opeers_t, soon)->ucx);
}

FX_INTERNAL void fx_opeers_soon(fx_owner_t *o)
{
    opeers_t *u = o->peers;
    if (u && fx_ucx_completions_queued(u->ucx) && !fx_timer_armed(&u->soon)) fx_timer_arm(u->r, &u->soon, 0, opeer_on_soon);
}

static void opeer_tick(fx_reactor_t *r, fx_timer_t *t)
{
    opeers_t *u = FX_CONTAINER_OF(t, opeers_t, timer);
    fx_ucx_progress(u->ucx); /* transfer timeouts are noticed by progress */
    fx_timer_arm(r, t, 100, opeer_tick);
}

FX_INTERNAL int fx_opeers_init(fx_owner_t *o)
{
    opeers_t *u = fx_calloc(1, sizeof *u);
    if (!u) return FLUXON_ERR_NOMEM;
    fx_timer_init(&u->timer);
    fx_timer_init(&u->soon);
    u->r = o->r;
    o->peers = u;
    int rc = fx_ucx_create(o->cfg.ucx_tls[0] ? o->cfg.ucx_tls : NULL, &u->ucx);
    if (rc != FLUXON_OK) {
        if (o->cfg.ucx_tls[0]) {
            FX_ERROR("the data plane cannot start with ucx_tls \"%s\" (%s; the UCX lines above name the transports "
                     "this host has)", o->cfg.ucx_tls, fluxon_status_string(rc));
            if (rc == FLUXON_ERR_UNAVAILABLE) rc = FLUXON_ERR_CONFIG; /* a transport this host does not have */
        }
        return rc;
    }
    const char *mech = getenv("FLUXON_UCX_MECH"); /* rma | am: override the measured choice */
    if (mech && !strcmp(mech, "rma")) fx_ucx_set_mech(u->ucx, FX_UCX_MECH_RMA);
    if (mech && !strcmp(mech, "am")) fx_ucx_set_mech(u->ucx, FX_UCX_MECH_AM);
    fx_ucx_test_late_gets(u->ucx, o->cfg.test_late_gets, o->cfg.test_late_ms); /* test-only, 0 = off */
    fx_ucx_test_late_puts(u->ucx, o->cfg.test_late_puts, o->cfg.test_late_ms);
    rc = fx_ucx_mem_map(u->ucx, fx_segment_base(o->seg), fx_segment_len(o->seg), &u->mem);
    if (rc != FLUXON_OK) return rc;
    rc = fx_ucx_rkey_pack(u->mem, &u->rkey, &u->rkey_len);
    if (rc != FLUXON_OK) return rc;
    rc = fx_opm_rkey(o, u->rkey, u->rkey_len, &u->reg_rkey, &u->reg_rkey_len);
    if (rc != FLUXON_OK) return rc;
    rc = fx_ucx_worker_address(u->ucx, &u->address, &u->address_len);
    if (rc != FLUXON_OK) return rc;
    rc = fx_reactor_watch_fd(o->r, fx_ucx_efd(u->ucx), opeer_event, u, &u->watch);
    if (rc != FLUXON_OK) return rc;
    rc = fx_reactor_add_idle_hook(o->r, opeer_idle, u, 20000); /* 20 us while the rings are polled */
    if (rc != FLUXON_OK) return rc;
    fx_timer_arm(o->r, &u->timer, 100, opeer_tick);
    return FLUXON_OK;
}

FX_INTERNAL void fx_opeers_shutdown(fx_owner_t *o)
{
    opeers_t *u = o->peers;
    if (!u) return;
    fx_timer_disarm(o->r, &u->timer);
    fx_timer_disarm(o->r, &u->soon);
    fx_reactor_del_idle_hook(o->r, opeer_idle, u);
    for (size_t i = 0; i < u->n_peers; i++) opeer_unwatch(u, &u->peers[i]); /* the reactor drains */
    if (u->watch) fx_reactor_unwatch(o->r, u->watch);
    u->watch = NULL;
}

FX_INTERNAL void fx_opeers_fini(fx_owner_t *o)
{
    opeers_t *u = o->peers;
    if (!u) return;
    fx_opeers_shutdown(o);
    for (size_t i = 0; i < u->n_peers; i++) {
        opeer_unmap(u, &u->peers[i]); /* first: a close may free the UCX peer */
        fx_ucx_peer_close(u->peers[i].peer);
    }
    u->n_peers = 0;
    if (u->rkey) fx_ucx_buf_free(u->rkey);
    u->rkey = NULL;
    fx_free(u->reg_rkey);
    u->reg_rkey = NULL;
    fx_ucx_mem_unmap(u->mem);
    u->mem = NULL;
    fx_ucx_destroy(u->ucx); /* runs the retired callbacks of held pushes (they use u) */
    u->ucx = NULL;
    fx_free(u->peers);
    while (u->linger) {
        opush_t *c = u->linger;
        u->linger = c->next;
        fx_free(c);
    }
    fx_free(u->push_targets);
    fx_free(u->unsettled_view);
    fx_free(u);
    o->peers = NULL;
}

FX_INTERNAL fx_ucx_t *fx_opeers_ucx(fx_owner_t *o) { return o->peers->ucx; }

FX_INTERNAL void fx_opeers_info(fx_owner_t *o, fx_str_t *address, fx_str_t *rkey)
{
    opeers_t *u = o->peers;
    *address = (fx_str_t){(const char *)u->address, (uint32_t)u->address_len};
    *rkey = (fx_str_t){(const char *)u->reg_rkey, (uint32_t)u->reg_rkey_len};
}

/* A peer's mapping goes with its UCX peer (closed, replaced or dead; before fx_ucx_peer_close,
 * which may free the peer): a dead owner's memory is not kept alive here. Transfers through it were copies made at submission: none reads
 * it any more. */
static void opeer_unwatch(opeers_t *u, owner_peer_t *p)
{
    if (p->exit_watch) fx_reactor_unwatch(u->r, p->exit_watch); /* its callback never runs after */
    p->exit_watch = NULL;
    fx_free(p->exit_id);
    p->exit_id = NULL;
}

static void opeer_unmap(opeers_t *u, owner_peer_t *p)
{
    if (!p->mapped) return;
    opeer_unwatch(u, p);
    if (p->pidfd >= 0) close(p->pidfd);
    p->pidfd = -1;
    fx_ucx_peer_set_local(p->peer, NULL, 0);
    if (p->pf) fx_prefault_stop(p->pf);
    fx_free(p->pf);
    p->pf = NULL;
    fx_segment_destroy(p->mapped);
    p->mapped = NULL;
    u->peers_mapped--;
}

/* A mapped peer's process exited (its pidfd is readable): its segment is unmapped at once,
 * not when the master says so (a new master may never list it), and its UCX peer fails,
 * so the next transfer to that owner connects afresh (and maps a restarted one). */
static void opeer_exited(void *arg)
{
    opeer_id_t *id = arg;
    opeers_t *u = id->u;
    for (size_t i = 0; i < u->n_peers; i++) {
        owner_peer_t *p = &u->peers[i];
        if (strcmp(p->node_id, id->node_id) || p->generation != id->generation || !p->mapped) continue;
        FX_INFO("owner %s (generation %llu) exited: its segment is unmapped here", p->node_id,
                (unsigned long long)p->generation);
        u->peers_exited++;
        p->exited = true;
        opeer_unmap(u, p); /* frees id */
        (void)fx_ucx_peer_fail(p->peer);
        return;
    }
}

/* Same host: p's segment is mapped here (p->mapped, its UCX peer made mapped): watch its
 * process, fault the mapping in (peer_map.c). */
static void opeer_mapped(fx_owner_t *o, owner_peer_t *p)
{
    opeers_t *u = o->peers;
    u->peers_mapped++;
    p->exit_id = fx_malloc(sizeof *p->exit_id);
    if (p->exit_id) {
        *p->exit_id = (opeer_id_t){.u = u, .generation = p->generation};
        snprintf(p->exit_id->node_id, sizeof p->exit_id->node_id, "%s", p->node_id);
    }
    if (!p->exit_id || fx_reactor_watch_fd(u->r, p->pidfd, opeer_exited, p->exit_id, &p->exit_watch) != FLUXON_OK) {
        opeer_unmap(u, p); /* no way to see it exit: UCX (its endpoint is made then) */
        return;
    }
    p->pf = fx_calloc(1, sizeof *p->pf);
    if (p->pf) { /* its first accesses from here cost what the segment's own did (prefault.c) */
        p->pf->touch = o->cfg.segment_touch;
        snprintf(p->pf->what, sizeof p->pf->what, "owner %.24s's segment (mapped here)", p->node_id);
        fx_prefault_start(p->pf, fx_segment_base(p->mapped), fx_segment_len(p->mapped),
                          fx_segment_huge(p->mapped) ? FX_SEGMENT_HUGE_BYTES : FX_SEGMENT_PAGE_BYTES, -1, "owner", o->cfg.node_id);
    }
    FX_INFO("owner %s: owner %s (generation %llu) runs on this host: its segment (%llu MiB) is mapped here, "
            "transfers with it are memcpy (peer_segments)", o->cfg.node_id, p->node_id,
            (unsigned long long)p->generation, (unsigned long long)(fx_segment_len(p->mapped) >> 20));
}

FX_INTERNAL bool fx_opeers_live(fx_owner_t *o, const char *node_id, uint64_t generation)
{
    return fx_opeers_find(o, node_id, generation, NULL) != NULL;
}

FX_INTERNAL fx_ucx_peer_t *fx_opeers_find(fx_owner_t *o, const char *node_id, uint64_t generation, bool *mapped)
{
    opeers_t *u = o->peers;
    for (size_t i = 0; u && i < u->n_peers; i++) {
        owner_peer_t *p = &u->peers[i];
        if (strcmp(p->node_id, node_id)) continue;
        if (p->generation != generation || fx_ucx_peer_status(p->peer) != 0) return NULL;
        if (mapped) *mapped = p->mapped != NULL;
        return p->peer;
    }
    return NULL;
}

/* fx_opeers_get; map_only: only a peer whose segment maps here is connected (NULL, no entry
 * and no UCX endpoint made, when it does not: another host, no permission, gone). */
static fx_ucx_peer_t *opeers_get(fx_owner_t *o, fx_str_t node_id, uint64_t generation, fx_str_t address, fx_str_t rkey,
                                 uint64_t base, bool map_only)
{
    opeers_t *u = o->peers;
    for (size_t i = 0; i < u->n_peers; i++) {
        owner_peer_t *p = &u->peers[i];
        if (fx_str_eq(node_id, p->node_id)) {
            if (p->generation == generation && fx_ucx_peer_status(p->peer) == 0) return p->peer;
            /* its process exited: a transfer to this generation cannot reach it (UCX would
             * fail to connect to its shared memory, an error logged per transfer); the master
             * names a restarted owner with a new generation */
            if (p->generation == generation && p->exited) return NULL;
            opeer_unmap(u, p); /* first: a close may free the UCX peer */
            fx_ucx_peer_close(p->peer); /* restarted or failed: reconnect */
            u->peers[i] = u->peers[--u->n_peers];
            break;
        }
    }
    if (u->n_peers == u->cap_peers) {
        size_t nc = u->cap_peers ? u->cap_peers * 2 : 8;
        owner_peer_t *np = fx_realloc(u->peers, nc * sizeof *np);
        if (!np) return NULL;
        u->peers = np;
        u->cap_peers = nc;
    }
    fx_ucx_peer_t *peer = NULL;
    char id[FX_ID_MAX];
    fx_str_copy(node_id, id, sizeof id);
    int pidfd = -1;
    fx_segment_t *seg = fx_opm_attach(o, id, generation, rkey, &pidfd); /* same host: mapped, no UCX endpoint */
    if (!seg && map_only) return NULL;
    int rc = seg ? fx_ucx_peer_connect_mapped(u->ucx, address.p, address.len, rkey.p, fx_opm_ucx_len(rkey), base,
                                              fx_segment_base(seg), fx_segment_len(seg), &peer)
                 : fx_ucx_peer_connect(u->ucx, address.p, address.len, rkey.p, fx_opm_ucx_len(rkey), base, &peer);
    if (rc != FLUXON_OK && seg) {
        fx_segment_destroy(seg);
        close(pidfd);
    }
    if (rc != FLUXON_OK) {
        FX_WARN("cannot connect to owner %.*s over UCX: %s%s%s%s", (int)node_id.len, node_id.p, fluxon_status_string(rc),
                o->cfg.ucx_tls[0] ? " (this owner's ucx_tls is \"" : "", o->cfg.ucx_tls,
                o->cfg.ucx_tls[0] ? "\": every owner must reach the others with the transports it lists)" : "");
        return NULL;
    }
    owner_peer_t *p = &u->peers[u->n_peers++];
    *p = (owner_peer_t){.generation = generation, .peer = peer, .listed = true, .mapped = seg, .pidfd = pidfd};
    /* listed: the master routed a value to it */
    fx_str_copy(node_id, p->node_id, sizeof p->node_id);
    if (seg) opeer_mapped(o, p);
    return peer;
}

FX_INTERNAL fx_ucx_peer_t *fx_opeers_get(fx_owner_t *o, fx_str_t node_id, uint64_t generation, fx_str_t address,
                                         fx_str_t rkey, uint64_t base)
{
    return opeers_get(o, node_id, generation, address, rkey, base, false);
}

/* The listed owners of this host not mapped here yet are mapped now (fx_opeers_alive). */
static void opeers_map_listed(fx_owner_t *o, const fx_olink_owners_t *l)
{
    opeers_t *u = o->peers;
    if (o->cfg.node_role == FX_NODE_REMOTE_CACHE) return; /* it copies nothing: targets push to it */
    for (size_t k = 0; k < l->n; k++) {
        if (fx_str_eq(l->ids[k], o->cfg.node_id)) continue;
        size_t i = 0;
        while (i < u->n_peers && !(fx_str_eq(l->ids[k], u->peers[i].node_id) && u->peers[i].generation == l->generations[k]))
            i++;
        if (i < u->n_peers) continue; /* connected at this generation (a failed one reconnects at its next transfer) */
        if (!fx_opm_here(o, l->generations[k], l->rkeys[k])) continue; /* another host: UCX at its first transfer */
        /* map only: a segment that cannot be mapped (no permission, its process gone) makes
         * no UCX endpoint now; a transfer that needs the owner connects then */
        if (opeers_get(o, l->ids[k], l->generations[k], l->addresses[k], l->rkeys[k], l->bases[k], true))
            u->peers_mapped_listed++;
    }
}

FX_INTERNAL void fx_opeers_alive(fx_owner_t *o, const fx_olink_owners_t *l)
{
    opeers_t *u = o->peers;
    if (!u) return;
    const fx_str_t *ids = l->ids;
    const uint64_t *generations = l->generations;
    size_t n = l->n;
    bool same_master = l->master_generation && l->master_generation == u->alive_master;
    u->alive_master = l->master_generation;
    for (size_t i = 0; i < u->n_peers; i++) {
        owner_peer_t *p = &u->peers[i];
        bool listed = false, replaced = false;
        for (size_t k = 0; k < n && !listed; k++) /* O(peers x owners): a CLUSTER_INFO per membership change */
            if (fx_str_eq(ids[k], p->node_id)) {
                listed = generations[k] == p->generation;
                replaced = !listed;
            }
        bool was_listed = p->listed;
        p->listed = listed;
        bool dead = replaced || (same_master && was_listed && !listed);
        /* whatever UCX can detect: PEER error handling sees a connection close (a process
         * that died), not a process that hangs (stopped, swapped out, a stuck loop), whose
         * connection the kernel keeps answering: a fetch from a stopped CPU owner over TCP
         * waited for its whole bound, ~27 s of an engine's 30 s (session 58) */
        if (!dead || fx_ucx_peer_status(p->peer)) continue;
        size_t inflight = fx_ucx_peer_fail(p->peer);
        u->peers_failed_dead++;
        FX_INFO("owner %s (generation %llu) is %s for the master: its UCX peer fails now (%zu transfers in "
                "flight end, outcome unknown; the next one connects afresh)", p->node_id,
                (unsigned long long)p->generation, replaced ? "replaced by a new process" : "no longer alive",
                inflight);
    }
    opeers_map_listed(o, l);
}

/* ---- pushes that may still land (W2) ---- */
static void opush_name(char dst[FX_ID_MAX], const char *target) /* cut at FX_ID_MAX - 1 bytes */
{
    size_t n = strnlen(target, FX_ID_MAX - 1);
    memcpy(dst, target, n);
    dst[n] = '\0';
}

static void opush_settle(opeers_t *u, const char *target)
{
    for (size_t i = 0; i < u->n_push_targets; i++) {
        opush_target_t *t = &u->push_targets[i];
        if (strcmp(t->node_id, target)) continue;
        if (--t->n == 0) u->push_targets[i] = u->push_targets[--u->n_push_targets];
        break;
    }
    u->pushes_unsettled--;
}

static void opush_retired(void *arg)
{
    opush_t *c = arg;
    if (c->failed) { /* a failed push's bytes may sit unread at the target (tcp: its worker has
                      * not handled the message yet): unsettled a grace longer (the UCX orphan
                      * grace the time bound allowed for) */
        c->until_ms = fx_now_ms() + FX_RANGE_QUARANTINE_GRACE_MS;
        c->next = c->u->linger;
        c->u->linger = c;
        return;
    }
    opush_settle(c->u, c->target);
    fx_free(c);
}

static void opush_done(void *arg, int status)
{
    opush_t *c = arg;
    opeers_t *u = c->u;
    /* reported before UCX retired it (a timeout): its bytes may still land: unsettled until
     * it retires */
    c->failed = status != FLUXON_OK;
    bool held = c->failed && fx_ucx_hold_until_retired(u->ucx, c, opush_retired, c);
    u->pushes_held_after_report += held;
    c->cb(c->arg, status);
    if (!held) opush_retired(c);
}

FX_INTERNAL int fx_opeers_push(fx_owner_t *o, const char *target, fx_ucx_peer_t *peer, const fx_ucx_range_t *ranges,
                               size_t n, fx_ucx_done_cb cb, void *arg)
{
    opeers_t *u = o->peers;
    if (!peer) return FLUXON_ERR_UNAVAILABLE;
    size_t i = 0;
    while (i < u->n_push_targets && strcmp(u->push_targets[i].node_id, target)) i++;
    if (i == u->n_push_targets && u->n_push_targets == u->cap_push_targets) {
        size_t nc = u->cap_push_targets ? u->cap_push_targets * 2 : 8;
        opush_target_t *nt = fx_realloc(u->push_targets, nc * sizeof *nt);
        fx_str_t *nv = fx_realloc(u->unsettled_view, nc * sizeof *nv);
        if (nt) u->push_targets = nt;
        if (nv) u->unsettled_view = nv;
        if (!nt || !nv) return FLUXON_ERR_NOMEM;
        u->cap_push_targets = nc;
    }
    opush_t *c = fx_malloc(sizeof *c);
    if (!c) return FLUXON_ERR_NOMEM;
    *c = (opush_t){u, "", cb, arg, false, 0, NULL};
    opush_name(c->target, target); /* not snprintf: ~1 us a push, 0.4 us a replay's request */
    int rc = fx_ucx_transfer(u->ucx, peer, FX_UCX_PUT, ranges, n, opush_done, c);
    if (rc != FLUXON_OK) {
        fx_free(c);
        return rc;
    }
    if (i == u->n_push_targets) {
        u->push_targets[i] = (opush_target_t){"", 0};
        opush_name(u->push_targets[i].node_id, target);
        u->n_push_targets++;
    }
    u->push_targets[i].n++;
    u->pushes_unsettled++;
    fx_opeers_soon(o);
    return FLUXON_OK;
}

FX_INTERNAL fx_strv_t fx_opeers_unsettled(fx_owner_t *o)
{
    opeers_t *u = o->peers;
    if (!u) return (fx_strv_t){NULL, 0};
    uint64_t now = fx_now_ms();
    for (opush_t **pp = &u->linger; *pp;) { /* failed pushes past their grace settle now */
        opush_t *c = *pp;
        if (now < c->until_ms) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        opush_settle(u, c->target);
        fx_free(c);
    }
    for (size_t i = 0; i < u->n_push_targets; i++) u->unsettled_view[i] = fx_str_c(u->push_targets[i].node_id);
    return (fx_strv_t){u->unsettled_view, (uint32_t)u->n_push_targets};
}

FX_INTERNAL void fx_opeers_metrics(fx_owner_t *o, fx_ometrics_t *m)
{
    opeers_t *u = o->peers;
    if (!u) return;
    m->pushes_unsettled = u->pushes_unsettled;
    m->pushes_held_after_report = u->pushes_held_after_report;
    m->peers_failed_dead = u->peers_failed_dead;
    m->peers_mapped = u->peers_mapped;
    m->peers_mapped_listed = u->peers_mapped_listed;
    m->peers_prefaulting = 0;
    for (size_t i = 0; i < u->n_peers; i++) m->peers_prefaulting += u->peers[i].pf && fx_prefault_running(u->peers[i].pf);
    m->peers_exited = u->peers_exited;
    fx_ucx_local_stats(u->ucx, &m->peer_map_transfers, &m->peer_map_bytes);
    m->peer_map_ns = fx_ucx_local_ns(u->ucx);
}
