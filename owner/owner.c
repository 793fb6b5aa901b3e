/* owner.c — the owner role, top of owner/: creates the segment, wires the modules (each
 * registers its hooks with the ones below it) in layer order, routes every request from
 * externals and from the master through one dispatch table, and tears it all down in
 * reverse. No other file in owner/ calls into this one. */
#include <stdio.h>
#include <sys/mman.h>

#include "log.h"
#include "owner_claims.h"
#include "owner_evict.h"
#include "owner_ext.h"
#include "owner_get.h"
#include "owner_link.h"
#include "owner_tenant.h"
#include "owner_peers.h"
#include "owner_pins.h"
#include "owner_place.h"
#include "owner_prefault.h"
#include "owner_wbmap.h"
#include "owner_put.h"
#include "owner_disk.h"
#include "owner_elsewhere.h"
#include "owner_replica.h"
#include "owner_republish.h"
#include "owner_stats.h"

/* ---- requests from externals ---- */
typedef void (*owner_handler_fn)(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                                 fx_arena_t *arena);

static void owner_forward(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                          fx_arena_t *arena)
{
    fx_olink_forward(o, e->conn, h, body);
}

static void owner_ping(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                       fx_arena_t *arena)
{
    fx_body_ping_t b;
    fx_body_ping_decode(body, h->body_len, &b, arena);
    if (b.to_master) fx_olink_forward(o, e->conn, h, body);
    else FX_CONN_REPLY(e->conn, h, ping, &b);
}

static void owner_stats(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                        fx_arena_t *arena)
{
    size_t cap = 1 << 20;
    char *buf = fx_malloc(cap);
    size_t n = buf ? fx_ostats_json(o, buf, cap) : 0;
    if (!n) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_NOMEM, "stats: owner out of memory");
    } else {
        fx_body_json_t j = {{buf, (uint32_t)n}};
        FX_CONN_REPLY(e->conn, h, json, &j);
    }
    fx_free(buf);
}

static void owner_release(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                          fx_arena_t *arena)
{
    fx_body_release_t b;
    fx_body_release_decode(body, h->body_len, &b, arena);
    uint64_t unknown = 0, first = 0;
    for (uint32_t i = 0; i < b.holder_ids.n; i++)
        if (fx_ostore_holder_release_id(o, e, b.holder_ids.v[i]) != FLUXON_OK && !unknown++) first = b.holder_ids.v[i];
    fx_oext_unknown(o, e, "holder ids in RELEASE", first, unknown); /* C2: counted, a line a second at most */
}

/* put_start, unless the client holds client_limits.max_plans plans already (issue 44 C3) */
static void owner_put_start(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                            fx_arena_t *arena)
{
    if (!fx_oext_plans_full(o, e, h)) fx_oput_start(o, e, h, body, arena);
}

static const struct {
    uint16_t type;
    owner_handler_fn fn;
} owner_ext_table[] = {
    {FX_MSG_PING, owner_ping},
    {FX_MSG_CLUSTER_NODES, owner_forward},
    {FX_MSG_MASTER_STATS, owner_forward},
    {FX_MSG_OWNER_STATS, owner_stats},
    {FX_MSG_PUT_START, owner_put_start},
    {FX_MSG_PUT_INLINE, fx_oput_inline},
    {FX_MSG_PUT_COMMIT, fx_oput_commit},
    {FX_MSG_PUT_ABORT, fx_oput_abort},
    {FX_MSG_GET_START, fx_oget_start},
    {FX_MSG_HANDLE_CONSUME, fx_oget_consume},
    {FX_MSG_RELEASE, owner_release},
    {FX_MSG_EXISTS, fx_oget_exists},
    {FX_MSG_PREFETCH, fx_oget_prefetch}, /* issue 39 */
    {FX_MSG_DELETE, owner_forward},
    {FX_MSG_LEASE_GRANT, owner_forward},
    {FX_MSG_LIST, owner_forward},
    {FX_MSG_PIN, fx_opin_request}, /* issue 42 */
    {FX_MSG_TENANT_SET, fx_oevq_request}, /* issue 42 quotas */
};

static bool owner_ext_dispatch(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                               fx_arena_t *arena)
{
    for (size_t i = 0; i < FX_ARRAY_LEN(owner_ext_table); i++)
        if (owner_ext_table[i].type == h->type) {
            owner_ext_table[i].fn(o, e, h, body, arena);
            return true;
        }
    return false;
}

/* Test fault delay_request on an external's request (config "test"): the owner reads it
 * fault_ms late, as a stalled reactor would. The request is kept with a reference on its
 * connection and handled then only if that connection is still open. */
typedef struct owner_held {
    fx_timer_t t;
    fx_owner_t *o;
    bool from_master; /* an INVALIDATE from the master (served only on the same link) */
    fx_conn_t *conn;
    fx_frame_header_t h;
    uint8_t *body;
    struct owner_held *prev, *next;
} owner_held_t;

static void owner_held_free(fx_owner_t *o, owner_held_t *x)
{
    if (x->prev) x->prev->next = x->next;
    else o->held = x->next;
    if (x->next) x->next->prev = x->prev;
    fx_conn_unref(x->conn);
    fx_free(x->body);
    fx_free(x);
}

static bool owner_master_apply(fx_owner_t *o, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena);

static void owner_on_held(fx_reactor_t *r, fx_timer_t *t)
{
    owner_held_t *x = FX_CONTAINER_OF(t, owner_held_t, t);
    fx_owner_t *o = x->o;
    if (x->from_master) { /* the link it came on is gone: it was lost with it */
        fx_arena_t arena = {0};
        if (fx_conn_is_open(x->conn) && x->conn == fx_olink_conn(o)) owner_master_apply(o, &x->h, x->body, &arena);
        else FX_WARN("test fault: held %s dropped: the master link it came on is gone", fx_msg_name(x->h.type));
        fx_arena_free(&arena);
        owner_held_free(o, x);
        return;
    }
    owner_ext_t *e = fx_conn_is_open(x->conn) ? fx_conn_ud(x->conn) : NULL;
    if (e) {
        fx_arena_t arena = {0};
        fx_conn_t *prev = fx_oext_reply_conn(e, x->conn); /* its socket or its ring */
        owner_ext_dispatch(o, e, &x->h, x->body, &arena);
        fx_oext_reply_conn(e, prev);
        fx_arena_free(&arena);
    }
    owner_held_free(o, x);
}

static bool owner_ext_request(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h, const uint8_t *body,
                              fx_arena_t *arena)
{
    const char *name = fx_msg_name(h->type);
    owner_held_t *x = name && fx_owner_fault_delay(o, name) ? fx_calloc(1, sizeof *x) : NULL;
    if (x && !(x->body = fx_malloc(h->body_len ? h->body_len : 1))) {
        fx_free(x);
        x = NULL;
    }
    if (x) {
        FX_WARN("test fault: %s from %s held back %u ms", fx_msg_name(h->type), fx_conn_desc(e->conn), o->cfg.fault_ms);
        memcpy(x->body, body, h->body_len);
        x->o = o;
        x->h = *h;
        x->conn = e->conn;
        fx_conn_ref(x->conn);
        x->next = o->held;
        if (x->next) x->next->prev = x;
        o->held = x;
        fx_timer_init(&x->t);
        fx_timer_arm(o->r, &x->t, o->cfg.fault_ms, owner_on_held);
        return true;
    }
    return owner_ext_dispatch(o, e, h, body, arena);
}

static void owner_ext_closed(fx_owner_t *o, owner_ext_t *e)
{
    fx_oput_ext_closed(o, e);
    fx_oget_ext_closed(o, e);
    fx_ostore_ext_closed(o, e);
}

/* ---- the master link's news ---- */
static bool owner_master_request(fx_owner_t *o, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    if (h->type == FX_MSG_TENANT_PUSH) { /* issue 42: another owner's quota change */
        fx_oevq_pushed(o, h, body, arena);
        return true;
    }
    if (h->type == FX_MSG_FORGET) { /* issue 38: copies this owner wrote back are gone */
        fx_owbm_forget(o, body, h->body_len, arena);
        return true;
    }
    if (h->type != FX_MSG_INVALIDATE && h->type != FX_MSG_PLACED) return false;
    owner_held_t *x = fx_owner_fault_delay(o, fx_msg_name(h->type)) ? fx_calloc(1, sizeof *x) : NULL; /* test-only */
    fx_conn_t *mc = fx_olink_conn(o);
    if (x && (!mc || !(x->body = fx_malloc(h->body_len ? h->body_len : 1)))) {
        fx_free(x);
        x = NULL;
    }
    if (x) {
        FX_WARN("test fault: %s from the master held back %u ms", fx_msg_name(h->type), o->cfg.fault_ms);
        memcpy(x->body, body, h->body_len);
        *x = (owner_held_t){.o = o, .from_master = true, .conn = mc, .h = *h, .body = x->body, .next = o->held};
        fx_conn_ref(mc);
        if (x->next) x->next->prev = x;
        o->held = x;
        fx_timer_init(&x->t);
        fx_timer_arm(o->r, &x->t, o->cfg.fault_ms, owner_on_held);
        return true;
    }
    return owner_master_apply(o, h, body, arena);
}

/* An acked INVALIDATE (a DELETE waits for it) that killed disk records is answered once
 * their tombstones are on the file: a kill -9 right after the DELETE's OK finds them at the
 * restart (W6). The answer goes only on the link the request came on. */
typedef struct owner_inv_ack {
    fx_owner_t *o;
    fx_conn_t *conn;
    fx_frame_header_t h;
} owner_inv_ack_t;

static void owner_inv_answer(fx_owner_t *o, fx_conn_t *c, const fx_frame_header_t *h, int status)
{
    if (!h->req_id || !c || !fx_conn_is_open(c) || c != fx_olink_conn(o)) return;
    if (status == FLUXON_OK) {
        fx_body_empty_t em;
        FX_CONN_REPLY(c, h, empty, &em);
    } else if (h->type == FX_MSG_PLACED) {
        fx_conn_reply_error(c, h, status, "owner %s: PLACED not recorded whole (%s): those values are not "
                            "re-published after a master restart", o->cfg.node_id, fluxon_status_string(status));
    } else {
        fx_conn_reply_error(c, h, status, "owner %s: the disk tombstones of this INVALIDATE were not written (%s): a "
                            "restart may find the records again", o->cfg.node_id, fluxon_status_string(status));
    }
}

static void owner_inv_written(void *arg, int status)
{
    owner_inv_ack_t *a = arg;
    owner_inv_answer(a->o, a->conn, &a->h, status);
    fx_conn_unref(a->conn);
    fx_free(a);
}

static bool owner_master_apply(fx_owner_t *o, const fx_frame_header_t *h, const uint8_t *body, fx_arena_t *arena)
{
    if (h->type == FX_MSG_PLACED) { /* a placed put's writer is answered once this is recorded */
        int st = fx_orepub_placed(o, body, h->body_len, arena);
        fx_conn_t *pc = fx_olink_conn(o);
        if (h->req_id && pc) owner_inv_answer(o, pc, h, st);
        return true;
    }
    int tombs = fx_ostore_invalidate(o, body, h->body_len, arena);
    fx_orepub_invalidate(o, body, h->body_len, arena);
    fx_conn_t *mc = fx_olink_conn(o);
    if (!h->req_id || !mc) return true;
    if (tombs < 0) {
        owner_inv_answer(o, mc, h, FLUXON_ERR_UNAVAILABLE);
        return true;
    }
    owner_inv_ack_t *a = tombs ? fx_malloc(sizeof *a) : NULL;
    bool nomem = tombs && !a;
    if (a) {
        *a = (owner_inv_ack_t){o, mc, *h};
        fx_conn_ref(mc);
        if (fx_odisk_when_written(o, owner_inv_written, a, &nomem)) return true;
        fx_conn_unref(mc);
        fx_free(a);
    }
    owner_inv_answer(o, mc, h, nomem ? FLUXON_ERR_NOMEM : FLUXON_OK);
    return true;
}

static void owner_registering(fx_owner_t *o, fx_body_register_t *reg)
{
    fx_opeers_info(o, &reg->ucx_address, &reg->rkey);
    fx_oclaims_grants(o, &reg->grant_ids, &reg->grant_offsets);
    reg->unsettled = fx_opeers_unsettled(o); /* W2 */
    reg->republishing = fx_odisk_will_republish(o); /* a new master's deletes wait for its report */
}

static void owner_registered(fx_owner_t *o, bool master_changed, bool forgotten, bool again)
{
    if (forgotten) { /* L1: nothing held here is routed any more, and some of it is stale */
        fx_ostore_forget_all(o);
        fx_orepub_forget_all(o);
        fx_odisk_forget_all(o); /* the disk's too: deletions it missed were not kept for it */
    }
    /* a new master learns what this owner holds; so does the first one when the disk tier
     * kept values from an earlier run, and one that had forgotten this owner (issue 39: its
     * disk records are offered again, highest put_id winning, as after a restart) */
    bool disk_first = fx_odisk_first_registration(o); /* every registration: DIR/CONTACT noted */
    /* the same master again (a lost connection): an INVALIDATE it sent may have been lost
     * with the old connection, so what this owner serves is verified (nothing re-routed) */
    fx_orepub_registered(o, master_changed || disk_first, again && !forgotten);
    fx_oput_master_ready(o);
    fx_oclaims_master_ready(o);
    fx_oev_kick(o);
}

static void owner_lost(fx_owner_t *o)
{
    fx_owbm_clear(o); /* FORGETs may be lost with the link */
    fx_oclaims_master_lost(o);
    fx_oplace_master_lost(o);
    fx_orepub_lost(o);
}

static void owner_started(fx_owner_t *o, int status)
{
    if (o->ready_sent) return;
    o->ready_sent = true;
    o->ready(o->ready_arg, status);
}

/* ---- lifecycle ---- */
static void owner_fini_modules(fx_owner_t *o)
{
    fx_opeers_shutdown(o);
    fx_oev_shutdown(o);
    fx_oclaims_fail_all(o); /* queued claims fail: their gets miss */
    fx_opeers_fini(o);      /* transfers in flight complete (CANCELLED) while the state exists */
    fx_orepl_fini(o);
    fx_oelse_fini(o);
    fx_orepub_fini(o);
    fx_owbm_fini(o);
    fx_odisk_fini(o);
    fx_oget_fini(o);
    fx_oput_fini(o);
    fx_ostore_fini(o);
    fx_oev_fini(o);
    fx_oclaims_fini(o);
    fx_olink_fini(o);
    fx_oext_fini(o);
    fx_otenant_fini(o);
}

static int owner_init_modules(fx_owner_t *o)
{
    static const fx_olink_hooks_t link_hooks = {owner_registering, owner_registered, owner_lost, owner_started,
                                                owner_master_request, fx_opeers_unsettled, fx_opeers_alive};
    uint64_t max_grants = fx_oclaims_max_grants(&o->cfg, fx_segment_len(o->seg));
    int rc = fx_otenant_init(o); /* first: the disk tier's rebuild counts each tenant's bytes */
    if (rc == FLUXON_OK) rc = fx_ostore_init(o, max_grants);
    if (rc == FLUXON_OK) rc = fx_olink_init(o, &link_hooks);
    if (rc == FLUXON_OK) rc = fx_oclaims_init(o, max_grants);
    if (rc == FLUXON_OK) rc = fx_oelse_init(o);
    if (rc == FLUXON_OK) rc = fx_odisk_init(o);
    if (rc == FLUXON_OK) rc = fx_orepl_init(o);
    if (rc == FLUXON_OK) rc = fx_oev_init(o);
    if (rc == FLUXON_OK) rc = fx_oput_init(o);
    if (rc == FLUXON_OK) rc = fx_oget_init(o);
    if (rc == FLUXON_OK) rc = fx_orepub_init(o);
    if (rc == FLUXON_OK) rc = fx_owbm_init(o);
    if (rc == FLUXON_OK) rc = fx_opeers_init(o);
    if (rc != FLUXON_OK) FX_ERROR("owner KV state could not be set up: %s", fluxon_status_string(rc));
    return rc;
}

FX_INTERNAL int fx_owner_create(fx_reactor_t *r, const fx_config_t *cfg, fx_ready_fn ready, void *ready_arg,
                                fx_owner_t **o_p)
{
    static const fx_oext_hooks_t ext_hooks = {owner_ext_request, owner_ext_closed};
    fx_owner_t *o = fx_calloc(1, sizeof *o);
    if (!o) return FLUXON_ERR_NOMEM;
    o->r = r;
    o->cfg = *cfg;
    o->generation = fx_realtime_ns();
    o->ready = ready;
    o->ready_arg = ready_arg;
    if (cfg->fault_message[0] && !fx_msg_by_name(cfg->fault_message)) {
        FX_ERROR("config rejected: test.fault_message: \"%s\" is not a message name", cfg->fault_message);
        fx_free(o);
        return FLUXON_ERR_CONFIG;
    }
    o->chaos_on = fx_chaos_init(&o->chaos, cfg, cfg->node_id);
    char limit_what[700];
    uint64_t limit = fx_segment_memory_limit(limit_what, sizeof limit_what);
    uint64_t seg_total = cfg->segment_bytes + FX_SEGMENT_HEADER_BYTES; /* the header page on top (segment.h) */
    if (limit && seg_total > limit) { /* faulted in whole, it would end in an OOM kill */
        FX_ERROR("config rejected: segment_bytes %llu plus its %u-byte header page is more than %s, %llu bytes: "
                 "lower segment_bytes", (unsigned long long)cfg->segment_bytes, FX_SEGMENT_HEADER_BYTES, limit_what,
                 (unsigned long long)limit);
        fx_free(o);
        return FLUXON_ERR_CONFIG;
    }
    int rc = fx_segment_create_huge(cfg->segment_bytes, cfg->numa_node, o->generation, cfg->node_id,
                                    cfg->huge_pages, &o->seg);
    if (rc != FLUXON_OK) goto err_free;
    fx_oprefault_start(o);
    rc = owner_init_modules(o);
    if (rc == FLUXON_OK) rc = fx_oext_init(o, &ext_hooks);
    if (rc != FLUXON_OK) goto err_modules;
    FX_INFO("owner %s serving externals on %s (segment %llu bytes: segment_bytes %llu for %llu grants of %llu, "
            "plus the header page%s, generation %llu; rings polled %u us after each request, %u us while a client "
            "holds a put plan)", cfg->node_id, cfg->socket_path, (unsigned long long)fx_segment_len(o->seg),
            (unsigned long long)cfg->segment_bytes, (unsigned long long)fx_oclaims_max(o),
            (unsigned long long)cfg->grant_bytes, fx_segment_huge(o->seg) ? ", on huge pages" : "",
            (unsigned long long)o->generation, cfg->ring_poll_us, cfg->ring_poll_us ? cfg->ring_poll_plan_us : 0);
    *o_p = o;
    fx_olink_start(o); /* ready is signalled once registered */
    return FLUXON_OK;

err_modules:
    owner_fini_modules(o);
    fx_oprefault_stop(o);
    fx_segment_destroy(o->seg);
err_free:
    fx_free(o);
    return rc;
}

FX_INTERNAL void fx_owner_shutdown(fx_owner_t *o)
{
    o->shutting_down = true;
    fx_oext_shutdown(o); /* externals' plans, handles and holders are released */
    fx_olink_shutdown(o);
    fx_opeers_shutdown(o); /* stops watching the UCX fd so the reactor can drain */
}

FX_INTERNAL void fx_owner_destroy(fx_owner_t *o)
{
    if (!o) return;
    while (o->held) {
        fx_timer_disarm(o->r, &o->held->t);
        owner_held_free(o, o->held);
    }
    owner_fini_modules(o);
    fx_oprefault_stop(o);
    fx_segment_destroy(o->seg);
    fx_free(o);
}
