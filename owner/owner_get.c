/* owner_get.c — the owner's KV core, part 2: hostless get_start. A batch is split per key
 * into LocalJoin (visible here: pinned at once), InflightJoin (another batch on this owner
 * is already fetching the key: wait for it) and Leader (G1); all pins are taken before
 * any leader work (G2); the leaders of a batch go to the master as ONE LOOKUP (G8); one
 * fetch per key per owner (G6/G7); results are scattered back to the original indices
 * before the prefix is computed (G4) and everything past transferable_len is released at
 * once (G5). Remote values are pulled over UCX into local slots and registered with the
 * master as durable replicas (GET_DONE). */
#include <stdio.h>

#include "log.h"
#include "owner_kv.h"

typedef struct owner_getb {
    fx_owner_t *o;
    owner_ext_t *ext;
    fx_conn_t *conn;
    uint64_t req_id;
    size_t n, n_groups;
    uint64_t *group_lens;
    uint8_t best_effort;
    int8_t *res; /* 0 pending, 1 hit, < 0 miss (oget_miss_code: the reason) */
    uint64_t *holder_ids, *offsets, *lens;
    size_t pending;
} owner_getb_t;

typedef struct oget_waiter {
    owner_getb_t *b;
    size_t i;
} oget_waiter_t;

typedef struct owner_oget {
    char *key;
    uint32_t klen;
    oget_waiter_t *w;
    size_t nw, capw;
    /* leader fetch */
    uint64_t value_len, put_ms, put_ver, src_off;
    uint32_t src;
    fx_slot_ref_t slot;
    bool have_slot, found;
    uint8_t mode; /* FX_GET_DURABLE / FX_GET_TEMPORARY, as the master decided */
    int why;      /* a miss: why (0 = FLUXON_ERR_NOT_FOUND) */
} owner_oget_t;

/* A miss reason as a res[] code and back: the caller of fluxon_get learns whether the key
 * is absent or could not be copied (no room, no master, transfer failed). */
static const int oget_why_status[] = {0, FLUXON_ERR_NOT_FOUND, FLUXON_ERR_UNAVAILABLE, FLUXON_ERR_NO_SPACE,
                                      FLUXON_ERR_TIMEOUT, FLUXON_ERR_NOMEM, FLUXON_ERR_INTERNAL};

static int8_t oget_miss_code(int why)
{
    if (why == 0 || why == FLUXON_ERR_STALE) return -1; /* STALE: the version went meanwhile */
    for (int8_t c = 1; c < (int8_t)FX_ARRAY_LEN(oget_why_status); c++)
        if (oget_why_status[c] == why) return (int8_t)-c;
    return -6; /* any other failure: internal */
}

typedef struct oget_fetch { /* one LOOKUP batch and what follows it */
    fx_owner_t *o;
    size_t n;
    owner_oget_t **og;
    size_t claims_pending;
    /* copies of the lookup's source table (the arena dies with the callback) */
    size_t n_src;
    char (*src_ids)[FX_ID_MAX];
    uint64_t *src_gens, *src_bases;
    uint8_t **src_addr, **src_rkey;
    uint32_t *src_addr_len, *src_rkey_len;
    size_t xfers_pending;
} oget_fetch_t;

typedef struct oget_xfer {
    bool inject_failure;
    size_t src; /* index into the fetch's source table */
    oget_fetch_t *f;
    size_t n;
    owner_oget_t **og;
    fx_ucx_range_t *ranges;
} oget_xfer_t;

static void oget_batch_finalize(owner_getb_t *b);

/* ---- batches ---- */
static void oget_batch_free(owner_getb_t *b)
{
    fx_conn_unref(b->conn);
    fx_free(b->group_lens);
    fx_free(b->res);
    fx_free(b->holder_ids);
    fx_free(b->offsets);
    fx_free(b->lens);
    fx_free(b);
}

static void oget_set_hit(owner_getb_t *b, size_t i, owner_entry_t *en)
{
    fx_owner_t *o = b->o;
    owner_holder_t *h = fx_conn_is_open(b->conn) ? fx_okv_holder_new(o, b->ext, &en->slot) : NULL;
    if (h) {
        fx_oev_touch(o, en); /* a local hit (inline or joined) warms the hot tier */
        b->res[i] = 1;
        b->holder_ids[i] = h->id;
        b->offsets[i] = en->slot.offset;
        b->lens[i] = en->value_len;
    } else {
        b->res[i] = -1;
    }
}

/* ---- per-key in-flight gets ---- */
static void oget_complete(fx_owner_t *o, owner_oget_t *og, owner_entry_t *en)
{
    owner_kv_t *kv = owner_kv(o);
    fx_hmap_del(kv->gets, og->key, og->klen, NULL);
    for (size_t k = 0; k < og->nw; k++) {
        owner_getb_t *b = og->w[k].b;
        if (en) oget_set_hit(b, og->w[k].i, en);
        else b->res[og->w[k].i] = oget_miss_code(og->why);
        if (--b->pending == 0) oget_batch_finalize(b);
    }
    fx_free(og->w);
    fx_free(og->key);
    fx_free(og);
}

static int oget_add_waiter(owner_oget_t *og, owner_getb_t *b, size_t i)
{
    if (og->nw == og->capw) {
        size_t nc = og->capw ? og->capw * 2 : 4;
        oget_waiter_t *nw = fx_realloc(og->w, nc * sizeof *nw);
        if (!nw) return FLUXON_ERR_NOMEM;
        og->w = nw;
        og->capw = nc;
    }
    og->w[og->nw++] = (oget_waiter_t){b, i};
    b->pending++;
    return FLUXON_OK;
}

static void oget_fetch_free(oget_fetch_t *f)
{
    for (size_t s = 0; s < f->n_src; s++) {
        fx_free(f->src_addr[s]);
        fx_free(f->src_rkey[s]);
    }
    fx_free(f->src_ids);
    fx_free(f->src_gens);
    fx_free(f->src_bases);
    fx_free(f->src_addr);
    fx_free(f->src_rkey);
    fx_free(f->src_addr_len);
    fx_free(f->src_rkey_len);
    fx_free(f->og);
    fx_free(f);
}

static void oget_fetch_done_if_idle(oget_fetch_t *f)
{
    if (f->claims_pending == 0 && f->xfers_pending == 0) oget_fetch_free(f);
}

/* A finished copy waits for the master's word before anyone reads it: GET_DONE is
 * accepted only if the source replica still existed when the copy ended, hence for the
 * whole copy (D1). Meanwhile the per-key get stays registered, so joiners keep joining. */
typedef struct oget_getdone_ctx {
    fx_owner_t *o;
    size_t n;
    owner_oget_t **og;
    owner_entry_t **en;
} oget_getdone_ctx_t;

static void oget_on_get_done(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                             fx_arena_t *arena)
{
    oget_getdone_ctx_t *c = arg;
    fx_owner_t *o = c->o;
    owner_kv_t *kv = owner_kv(o);
    fx_body_statuses_t st = {{NULL, 0}};
    if (status == FLUXON_OK) fx_body_statuses_decode(body, h->body_len, &st, arena);
    for (size_t i = 0; i < c->n; i++) {
        owner_entry_t *en = c->en[i];
        int ks = status != FLUXON_OK ? status : i < st.statuses.n ? (int)(int64_t)st.statuses.v[i] : FLUXON_ERR_PROTOCOL;
        owner_entry_t *cur = fx_hmap_get(kv->index, en->key, en->klen);
        /* NO_SPACE: the copy is intact (the source was checked first) but the key has all
         * the replicas it may have: serve it as a temporary copy */
        if ((ks == FLUXON_OK && c->og[i]->mode == FX_GET_TEMPORARY) || ks == FLUXON_ERR_NO_SPACE) {
            /* the copy is intact (D1) but is not a replica: its readers' holders keep it,
             * the slot frees with the last one */
            kv->temp_copies++;
            oget_complete(o, c->og[i], en);
            fx_okv_entry_retire(o, en);
            continue;
        }
        if (ks == FLUXON_OK && !cur && fx_slot_pool_mark_committed(kv->pool, &en->slot) == FLUXON_OK) {
            en->state = OE_COMMITTED;
            fx_okv_entry_index(o, en);
            fx_oev_admit(o, en); /* a durable replica: in the hot tier from now on */
            kv->remote_hits++;
            oget_complete(o, c->og[i], en);
            continue;
        }
        if (ks != FLUXON_OK) kv->get_done_stale++;
        c->og[i]->why = ks; /* STALE reads as NOT_FOUND; a lost master as itself */
        fx_okv_entry_retire(o, en); /* not published (or a local put overtook it) */
        oget_complete(o, c->og[i], ks == FLUXON_OK ? cur : NULL);
    }
    fx_free(c->og);
    fx_free(c->en);
    fx_free(c);
}

/* Durable fetches that made no copy: one-way GET_DONE (ABANDON) so the master forgets
 * their in-flight records now rather than at the TTL (another owner may then make the
 * durable copy). */
static void oget_abandon(fx_owner_t *o, owner_oget_t *const *ogs, size_t n)
{
    if (o->mstate != OM_READY || !o->mconn || !n) return;
    fx_str_t *keys = fx_calloc(n, sizeof *keys);
    uint64_t *cols = fx_calloc(2 * n, sizeof *cols); /* zeros, then modes */
    size_t m = 0;
    for (size_t i = 0; keys && cols && i < n; i++)
        if (ogs[i] && ogs[i]->found && ogs[i]->mode == FX_GET_DURABLE) {
            keys[m] = (fx_str_t){ogs[i]->key, ogs[i]->klen};
            cols[n + m++] = FX_GET_ABANDON;
        }
    if (m) {
        fx_u64v_t z = {cols, (uint32_t)m};
        fx_body_get_done_t gd = {{keys, (uint32_t)m}, z, z, z, z, fx_str_c(""), 0, z, {cols + n, (uint32_t)m}};
        (void)FX_CONN_SEND(o->mconn, FX_MSG_GET_DONE, 0, 0, 0, get_done, &gd);
    }
    fx_free(keys);
    fx_free(cols);
}

/* A GET_DONE on its way (held back only by the test fault delay_request). */
typedef struct oget_gd {
    fx_timer_t t;
    fx_owner_t *o;
    oget_getdone_ctx_t *c;
    fx_str_t *keys;
    uint64_t *cols; /* 6 columns of n: offsets, put_ms, put_ver, value_lens, src_offsets, modes */
    size_t n;
    char src_id[FX_ID_MAX];
    uint64_t src_gen;
} oget_gd_t;

/* GET_DONE could not be sent: the copies are dropped, their readers miss. */
static void oget_gd_fail(fx_owner_t *o, oget_getdone_ctx_t *c)
{
    for (size_t i = 0; i < c->n; i++) {
        fx_okv_entry_retire(o, c->en[i]);
        c->og[i]->why = FLUXON_ERR_UNAVAILABLE;
        oget_complete(o, c->og[i], NULL);
    }
    fx_free(c->og);
    fx_free(c->en);
    fx_free(c);
}

static void oget_gd_send(oget_gd_t *d)
{
    fx_owner_t *o = d->o;
    uint32_t m = (uint32_t)d->c->n;
    size_t n = d->n;
    uint64_t *cols = d->cols;
    fx_body_get_done_t gd = {{d->keys, m}, {cols, m}, {cols + n, m}, {cols + 2 * n, m}, {cols + 3 * n, m},
                             fx_str_c(d->src_id), d->src_gen, {cols + 4 * n, m}, {cols + 5 * n, m}};
    int rc = o->mconn ? FX_RPC_CALL(o->mconn, GET_DONE, get_done, &gd, o->cfg.master_timeout_ms, oget_on_get_done, d->c)
                      : FLUXON_ERR_UNAVAILABLE;
    if (rc != FLUXON_OK) oget_gd_fail(o, d->c);
    fx_free(d->keys);
    fx_free(d->cols);
    fx_free(d);
}

static void oget_gd_timer(fx_reactor_t *r, fx_timer_t *t)
{
    (void)r;
    oget_gd_send(FX_CONTAINER_OF(t, oget_gd_t, t));
}

static void oget_on_xfer(void *arg, int status)
{
    oget_xfer_t *x = arg;
    oget_fetch_t *f = x->f;
    fx_owner_t *o = f->o;
    if (x->inject_failure && status == FLUXON_OK) status = FLUXON_ERR_INTERNAL;
    owner_kv_t *kv = owner_kv(o);
    size_t n = x->n, m = 0;
    oget_getdone_ctx_t *c = fx_calloc(1, sizeof *c);
    fx_str_t *keys = fx_calloc(n, sizeof *keys);
    uint64_t *cols = fx_calloc(6 * n, sizeof *cols);
    if (c) {
        c->og = fx_calloc(n, sizeof *c->og);
        c->en = fx_calloc(n, sizeof *c->en);
    }
    owner_oget_t **ab = fx_calloc(n, sizeof *ab); /* durable fetches that made no copy */
    size_t n_ab = 0;
    bool ok = status == FLUXON_OK && c && c->og && c->en && keys && cols && ab && o->mstate == OM_READY && o->mconn;
    kv->transfers++;
    if (status != FLUXON_OK) FX_WARN("remote fetch of %zu values failed: %s", n, fluxon_status_string(status));
    if (!ok) oget_abandon(o, x->og, n);
    for (size_t k = 0; k < n; k++) {
        owner_oget_t *og = x->og[k];
        owner_entry_t *cur = fx_hmap_get(kv->index, og->key, og->klen);
        if (!ok || cur) { /* failed, or a local put overtook the fetch: serve that one */
            if (ok) ab[n_ab++] = og;
            og->why = status != FLUXON_OK ? status : FLUXON_ERR_UNAVAILABLE;
            fx_slot_pool_release_prepared(kv->pool, &og->slot);
            oget_complete(o, og, ok ? cur : NULL);
            continue;
        }
        fx_slot_pool_mark_pending(kv->pool, &og->slot);
        owner_entry_t *en = fx_okv_entry_new(o, og->key, og->klen, &og->slot, og->value_len);
        if (!en) {
            fx_slot_pool_release_prepared(kv->pool, &og->slot);
            oget_complete(o, og, NULL);
            continue;
        }
        en->remote = true;
        en->put_ms = og->put_ms;
        en->put_ver = og->put_ver;
        kv->transfer_keys++;
        kv->transfer_bytes += og->value_len;
        keys[m] = (fx_str_t){en->key, en->klen};
        cols[m] = en->slot.offset;
        cols[n + m] = en->put_ms;
        cols[2 * n + m] = en->put_ver;
        cols[3 * n + m] = en->value_len;
        cols[4 * n + m] = og->src_off;
        cols[5 * n + m] = og->mode;
        c->og[m] = og;
        c->en[m++] = en;
    }
    oget_abandon(o, ab, n_ab);
    fx_free(ab);
    if (m) { /* one GET_DONE per transfer batch (G8) */
        c->o = o;
        c->n = m;
        oget_gd_t *d = fx_calloc(1, sizeof *d);
        if (d) {
            *d = (oget_gd_t){.o = o, .c = c, .keys = keys, .cols = cols, .n = n, .src_gen = f->src_gens[x->src]};
            fx_strlcpy(d->src_id, f->src_ids[x->src], sizeof d->src_id);
            keys = NULL;
            cols = NULL;
            c = NULL;
            if (o->cfg.fault_kind == FX_FAULT_DELAY_REQUEST && !strcmp(o->cfg.fault_message, "GET_DONE") &&
                (o->cfg.fault_count == 0 || kv->faults_applied < o->cfg.fault_count)) {
                kv->faults_applied++; /* test-only: the master hears of this copy fault_ms later */
                FX_WARN("test fault: GET_DONE of %zu keys held back %u ms", m, o->cfg.fault_ms);
                fx_timer_init(&d->t);
                fx_timer_arm(o->r, &d->t, o->cfg.fault_ms, oget_gd_timer);
            } else {
                oget_gd_send(d);
            }
        } else {
            oget_gd_fail(o, c);
            c = NULL;
        }
    } else if (c) {
        fx_free(c->og);
        fx_free(c->en);
        fx_free(c);
    }
    fx_free(keys);
    fx_free(cols);
    f->xfers_pending--;
    fx_free(x->og);
    fx_free(x->ranges);
    fx_free(x);
    oget_fetch_done_if_idle(f);
}

/* All claims of a fetch resolved: one UCX transfer batch per source owner. */
static void oget_fetch_transfer(oget_fetch_t *f)
{
    fx_owner_t *o = f->o;
    owner_kv_t *kv = owner_kv(o);
    uint8_t *base = fx_segment_base(o->seg);
    f->xfers_pending++; /* a copy from this owner's own segment completes inline: keep f alive */
    for (size_t s = 0; s < f->n_src; s++) {
        size_t cnt = 0;
        for (size_t k = 0; k < f->n; k++) cnt += f->og[k] && f->og[k]->have_slot && f->og[k]->src == s;
        if (!cnt) continue;
        oget_xfer_t *x = fx_calloc(1, sizeof *x);
        bool self = !strcmp(f->src_ids[s], o->cfg.node_id) && f->src_gens[s] == o->generation;
        fx_ucx_peer_t *peer = self ? NULL : fx_okv_peer(o, (fx_str_t){f->src_ids[s], (uint32_t)strlen(f->src_ids[s])},
                                          f->src_gens[s], (fx_str_t){(const char *)f->src_addr[s], f->src_addr_len[s]},
                                          (fx_str_t){(const char *)f->src_rkey[s], f->src_rkey_len[s]}, f->src_bases[s]);
        if (x) {
            x->og = fx_calloc(cnt, sizeof *x->og);
            x->ranges = fx_calloc(cnt, sizeof *x->ranges);
        }
        int rc = FLUXON_ERR_NOMEM;
        if (x && x->og && x->ranges) {
            x->f = f;
            x->src = s;
            for (size_t k = 0; k < f->n; k++) {
                owner_oget_t *og = f->og[k];
                if (!og || !og->have_slot || og->src != s) continue;
                x->og[x->n] = og;
                x->ranges[x->n] = (fx_ucx_range_t){base + og->slot.offset, og->src_off, og->value_len};
                x->n++;
                f->og[k] = NULL; /* owned by the transfer now */
            }
            if (self) { /* a range of this segment (a placed value): memcpy, then the same GET_DONE */
                for (size_t k = 0; k < x->n; k++) {
                    fx_ucx_range_t *rg = &x->ranges[k];
                    memcpy(rg->local, base + rg->remote_offset, rg->len);
                }
                kv->self_copies += x->n;
                f->xfers_pending++;
                oget_on_xfer(x, FLUXON_OK);
                continue;
            }
            rc = peer ? fx_ucx_transfer(kv->ucx, peer, FX_UCX_GET, x->ranges, x->n, oget_on_xfer, x)
                      : FLUXON_ERR_UNAVAILABLE;
            if (rc == FLUXON_OK && o->cfg.fail_transfers) { /* test-only: fail it afterwards */
                o->cfg.fail_transfers--;
                x->inject_failure = true;
            }
        }
        if (rc == FLUXON_OK) {
            f->xfers_pending++;
        } else if (x && x->og) {
            FX_WARN("cannot fetch %zu values from owner %s: %s", x->n, f->src_ids[s], fluxon_status_string(rc));
            oget_abandon(o, x->og, x->n);
            for (size_t k = 0; k < x->n; k++) {
                x->og[k]->why = rc;
                fx_slot_pool_release_prepared(kv->pool, &x->og[k]->slot);
                oget_complete(o, x->og[k], NULL);
            }
            fx_free(x->og);
            fx_free(x->ranges);
            fx_free(x);
        } else {
            fx_free(x);
        }
    }
    f->xfers_pending--;
    oget_fetch_done_if_idle(f);
}

typedef struct oget_claim_ctx {
    oget_fetch_t *f;
    owner_oget_t *og;
} oget_claim_ctx_t;

static void oget_on_claim(fx_owner_t *o, void *arg, size_t got)
{
    oget_claim_ctx_t *c = arg;
    oget_fetch_t *f = c->f;
    owner_oget_t *og = c->og;
    fx_free(c);
    og->have_slot = got == 1;
    if (!og->have_slot) { /* no room here: a miss for every waiter */
        og->why = FLUXON_ERR_NO_SPACE;
        oget_abandon(o, &og, 1);
        for (size_t k = 0; k < f->n; k++)
            if (f->og[k] == og) f->og[k] = NULL;
        oget_complete(o, og, NULL);
    }
    if (--f->claims_pending == 0) oget_fetch_transfer(f);
}

static void oget_on_lookup(void *arg, int status, const fx_frame_header_t *h, const uint8_t *body,
                           fx_arena_t *arena)
{
    oget_fetch_t *f = arg;
    fx_owner_t *o = f->o;
    fx_body_lookup_ack_t a;
    memset(&a, 0, sizeof a);
    if (status == FLUXON_OK) fx_body_lookup_ack_decode(body, h->body_len, &a, arena);
    size_t ns = a.src_node_ids.n;
    bool shape_ok = status == FLUXON_OK && a.statuses.n == f->n && a.src.n == f->n && a.offsets.n == f->n &&
                    a.value_lens.n == f->n && a.put_ms.n == f->n && a.put_ver.n == f->n &&
                    a.src_generations.n == ns && a.src_addresses.n == ns && a.src_rkeys.n == ns &&
                    a.src_bases.n == ns && (a.modes.n == f->n || a.modes.n == 0);
    if (status == FLUXON_OK && !shape_ok) FX_ERROR("malformed LOOKUP answer from the master");
    if (shape_ok && ns) {
        f->n_src = ns;
        f->src_ids = fx_calloc(ns, sizeof *f->src_ids);
        f->src_gens = fx_calloc(ns, sizeof *f->src_gens);
        f->src_bases = fx_calloc(ns, sizeof *f->src_bases);
        f->src_addr = fx_calloc(ns, sizeof *f->src_addr);
        f->src_rkey = fx_calloc(ns, sizeof *f->src_rkey);
        f->src_addr_len = fx_calloc(ns, sizeof *f->src_addr_len);
        f->src_rkey_len = fx_calloc(ns, sizeof *f->src_rkey_len);
        shape_ok = f->src_ids && f->src_gens && f->src_bases && f->src_addr && f->src_rkey && f->src_addr_len &&
                   f->src_rkey_len;
        for (size_t s = 0; shape_ok && s < ns; s++) {
            fx_str_copy(a.src_node_ids.v[s], f->src_ids[s], FX_ID_MAX);
            f->src_gens[s] = a.src_generations.v[s];
            f->src_bases[s] = a.src_bases.v[s];
            f->src_addr[s] = fx_malloc(a.src_addresses.v[s].len + 1);
            f->src_rkey[s] = fx_malloc(a.src_rkeys.v[s].len + 1);
            if (!f->src_addr[s] || !f->src_rkey[s]) {
                shape_ok = false;
                break;
            }
            memcpy(f->src_addr[s], a.src_addresses.v[s].p, a.src_addresses.v[s].len);
            memcpy(f->src_rkey[s], a.src_rkeys.v[s].p, a.src_rkeys.v[s].len);
            f->src_addr_len[s] = a.src_addresses.v[s].len;
            f->src_rkey_len[s] = a.src_rkeys.v[s].len;
        }
    }
    /* decide every leader first, then claim: a completion may free the fetch otherwise */
    f->claims_pending = 1;
    for (size_t k = 0; k < f->n; k++) {
        owner_oget_t *og = f->og[k];
        bool hit = shape_ok && (int)(int64_t)a.statuses.v[k] == FLUXON_OK && a.src.v[k] < ns &&
                   a.value_lens.v[k] > 0 && fx_slot_size_for(a.value_lens.v[k]) <= o->cfg.grant_bytes;
        unsigned mode = hit && a.modes.n ? (unsigned)a.modes.v[k] : FX_GET_DURABLE;
        if (hit && mode == FX_GET_REUSE) { /* ReuseReplica: a slot of ours holds it already */
            owner_entry_t *en = fx_hmap_get(owner_kv(o)->by_offset, &a.offsets.v[k], sizeof a.offsets.v[k]);
            bool ok = !strcmp(f->src_ids[a.src.v[k]], o->cfg.node_id) && en && !en->retired && !en->evicting &&
                      en->state == OE_COMMITTED && en->put_ms == a.put_ms.v[k] && en->put_ver == a.put_ver.v[k] &&
                      en->value_len == a.value_lens.v[k];
            if (ok && !fx_hmap_get(owner_kv(o)->index, en->key, en->klen)) fx_okv_entry_index(o, en);
            if (ok) owner_kv(o)->reuse_hits++;
            f->og[k] = NULL;
            oget_complete(o, og, ok ? en : NULL);
            continue;
        }
        if (!hit || (mode != FX_GET_DURABLE && mode != FX_GET_TEMPORARY)) {
            f->og[k] = NULL;
            /* no master answer, a malformed one, or the key's own status (NOT_FOUND) */
            og->why = hit ? FLUXON_ERR_PROTOCOL /* a mode this owner does not know */
                      : status != FLUXON_OK ? status : !shape_ok ? FLUXON_ERR_PROTOCOL
                      : (int)(int64_t)a.statuses.v[k] != FLUXON_OK ? (int)(int64_t)a.statuses.v[k]
                                                                   : FLUXON_ERR_NO_SPACE; /* too big for a slot here */
            oget_complete(o, og, NULL);
            continue;
        }
        og->mode = (uint8_t)mode;
        og->found = true;
        og->src = (uint32_t)a.src.v[k];
        og->src_off = a.offsets.v[k];
        og->value_len = a.value_lens.v[k];
        og->put_ms = a.put_ms.v[k];
        og->put_ver = a.put_ver.v[k];
    }
    for (size_t k = 0; k < f->n; k++) {
        owner_oget_t *og = f->og[k];
        if (!og) continue;
        oget_claim_ctx_t *c = fx_malloc(sizeof *c);
        if (!c) {
            f->og[k] = NULL;
            oget_complete(o, og, NULL);
            continue;
        }
        *c = (oget_claim_ctx_t){f, og};
        f->claims_pending++;
        fx_okv_claim(o, og->value_len, 1, &og->slot, oget_on_claim, c);
    }
    if (--f->claims_pending == 0) oget_fetch_transfer(f);
}

/* ---- finalize: prefix, tail release, handle ---- */
static void oget_handle_expired(fx_reactor_t *r, fx_timer_t *t)
{
    owner_handle_t *hd = FX_CONTAINER_OF(t, owner_handle_t, ttl);
    owner_kv(hd->o)->handles_expired++;
    FX_WARN("get handle %llu expired after handle_ttl_ms %u: releasing its %zu values",
            (unsigned long long)hd->id, hd->o->cfg.handle_ttl_ms, hd->n);
    fx_owner_handle_free(hd->o, hd, true);
}

static void oget_batch_finalize(owner_getb_t *b)
{
    fx_owner_t *o = b->o;
    owner_kv_t *kv = owner_kv(o);
    size_t n = b->n, raw = 0;
    while (raw < n && b->res[raw] == 1) raw++;
    bool all_hit = true;
    for (size_t i = 0; i < n; i++) all_hit &= b->res[i] == 1;
    /* round down to a whole atomic group (A1) */
    size_t transferable = 0, groups = 0, start = 0, ng = b->n_groups ? b->n_groups : n;
    int64_t first_miss_group = -1;
    for (size_t g = 0; g < ng; g++) {
        size_t len = b->n_groups ? (size_t)b->group_lens[g] : 1;
        if (start + len <= raw) {
            transferable = start + len;
            groups++;
        } else if (first_miss_group < 0 && raw < n) {
            first_miss_group = (int64_t)g;
        }
        start += len;
    }
    if (!b->best_effort && !all_hit) {
        transferable = 0;
        groups = 0;
    }
    for (size_t i = 0; i < n; i++) kv->misses += b->res[i] != 1;
    bool open = fx_conn_is_open(b->conn) && b->ext;
    /* G5: everything past transferable_len goes now */
    for (size_t i = open ? transferable : 0; i < n; i++)
        if (b->res[i] == 1) fx_okv_holder_release_id(o, b->ext, b->holder_ids[i]);
    if (!open) {
        oget_batch_free(b);
        return;
    }
    uint64_t hid = 0;
    if (transferable) {
        owner_handle_t *hd = fx_calloc(1, sizeof *hd);
        uint64_t *ids = fx_malloc(transferable * sizeof *ids);
        if (hd && ids) {
            hd->id = fx_okv_next_id(kv);
            if (fx_hmap_put(kv->handles, &hd->id, sizeof hd->id, hd, NULL) == FLUXON_OK) {
                memcpy(ids, b->holder_ids, transferable * sizeof *ids);
                hd->holder_ids = ids;
                hd->n = transferable;
                hd->o = o;
                hd->ext = b->ext;
                hd->next = b->ext->handles;
                if (b->ext->handles) b->ext->handles->prev = hd;
                b->ext->handles = hd;
                fx_timer_init(&hd->ttl);
                fx_timer_arm(o->r, &hd->ttl, o->cfg.handle_ttl_ms, oget_handle_expired);
                hid = hd->id;
                kv->handles_opened++;
            }
        }
        if (!hid) {
            fx_free(hd);
            fx_free(ids);
            for (size_t i = 0; i < transferable; i++) fx_okv_holder_release_id(o, b->ext, b->holder_ids[i]);
            fx_frame_header_t q = {FX_FRAME_MAGIC, FX_MSG_GET_START, 0, 0, 0, b->req_id};
            fx_conn_reply_error(b->conn, &q, FLUXON_ERR_NOMEM, "get_start: owner out of memory");
            oget_batch_free(b);
            return;
        }
    }
    int miss = raw < n && b->res[raw] < 0 ? oget_why_status[-b->res[raw]] : 0;
    fx_body_get_start_ack_t ack = {hid, raw, transferable, groups, raw < n ? (int64_t)raw : -1, first_miss_group,
                                   all_hit, {b->offsets, (uint32_t)transferable}, {b->lens, (uint32_t)transferable},
                                   {b->holder_ids, (uint32_t)transferable}, miss};
    FX_CONN_SEND(b->conn, FX_MSG_GET_START, FX_FLAG_RESPONSE, FLUXON_OK, b->req_id, get_start_ack, &ack);
    oget_batch_free(b);
}

FX_INTERNAL void fx_owner_get_start(fx_owner_t *o, owner_ext_t *e, const fx_frame_header_t *h,
                                    const uint8_t *body, fx_arena_t *arena)
{
    owner_kv_t *kv = owner_kv(o);
    fx_body_get_start_t g;
    fx_body_get_start_decode(body, h->body_len, &g, arena);
    size_t n = g.keys.n;
    if (n == 0) {
        fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT, "get_start: n_keys is 0");
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (!fx_okv_key_ok(g.keys.v[i])) {
            fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                                "get_start: key %zu is empty, longer than %d bytes or contains NUL", i,
                                FLUXON_MAX_KEY_BYTES);
            return;
        }
    if (g.group_lens.n) {
        uint64_t sum = 0;
        bool ok = true;
        for (size_t k = 0; k < g.group_lens.n; k++) {
            ok &= g.group_lens.v[k] > 0;
            sum += g.group_lens.v[k];
        }
        if (!ok || sum != n) {
            fx_conn_reply_error(e->conn, h, FLUXON_ERR_INVALID_ARGUMENT,
                                "get_start: atomic_group_lens must be > 0 each and sum to n_keys %zu", n);
            return;
        }
    }
    owner_getb_t *b = fx_calloc(1, sizeof *b);
    if (!b) goto nomem;
    b->o = o;
    b->ext = e;
    b->conn = e->conn;
    fx_conn_ref(e->conn);
    b->req_id = h->req_id;
    b->n = n;
    b->best_effort = g.best_effort;
    b->n_groups = g.group_lens.n;
    b->group_lens = fx_calloc(b->n_groups ? b->n_groups : 1, sizeof *b->group_lens);
    b->res = fx_calloc(n, sizeof *b->res);
    b->holder_ids = fx_calloc(n, sizeof *b->holder_ids);
    b->offsets = fx_calloc(n, sizeof *b->offsets);
    b->lens = fx_calloc(n, sizeof *b->lens);
    oget_fetch_t *f = fx_calloc(1, sizeof *f);
    if (f) f->og = fx_calloc(n, sizeof *f->og);
    if (!b->group_lens || !b->res || !b->holder_ids || !b->offsets || !b->lens || !f || !f->og) {
        if (f) fx_free(f->og);
        fx_free(f);
        oget_batch_free(b);
        goto nomem;
    }
    if (b->n_groups) memcpy(b->group_lens, g.group_lens.v, b->n_groups * sizeof(uint64_t));
    f->o = o;
    kv->get_batches++;
    kv->get_keys += n;
    b->pending = 1; /* held until every key is classified */
    /* G1/G2: classify and pin every key before any leader work starts */
    for (size_t i = 0; i < n; i++) {
        fx_str_t k = g.keys.v[i];
        owner_entry_t *en = fx_hmap_get(kv->index, k.p, k.len);
        if (en) {
            oget_set_hit(b, i, en);
            kv->local_hits += b->res[i] == 1;
            continue;
        }
        owner_oget_t *og = fx_hmap_get(kv->gets, k.p, k.len);
        if (og) {
            if (oget_add_waiter(og, b, i) == FLUXON_OK) kv->joined++;
            else b->res[i] = -1;
            continue;
        }
        og = fx_calloc(1, sizeof *og);
        if (og) og->key = fx_strndup(k.p, k.len);
        if (!og || !og->key || oget_add_waiter(og, b, i) != FLUXON_OK ||
            fx_hmap_put(kv->gets, k.p, k.len, og, NULL) != FLUXON_OK) {
            if (og && og->nw) b->pending--;
            if (og) {
                fx_free(og->w);
                fx_free(og->key);
            }
            fx_free(og);
            b->res[i] = -1;
            continue;
        }
        og->klen = k.len;
        f->og[f->n++] = og;
        kv->leaders++;
    }
    if (f->n == 0) {
        fx_free(f->og);
        fx_free(f);
    } else {
        fx_str_t *lk = fx_calloc(f->n, sizeof *lk);
        int rc = FLUXON_ERR_UNAVAILABLE;
        if (kv->owners_alive == 1 && o->mstate == OM_READY) {
            /* the only live owner: a key missing here is held nowhere, skip the master */
            kv->lookups_skipped++;
            rc = FLUXON_ERR_NOT_FOUND;
        } else if (lk && o->mstate == OM_READY && o->mconn) {
            for (size_t k = 0; k < f->n; k++) lk[k] = (fx_str_t){f->og[k]->key, f->og[k]->klen};
            fx_body_lookup_t lb = {{lk, (uint32_t)f->n}};
            rc = FX_RPC_CALL(o->mconn, LOOKUP, lookup, &lb, o->cfg.master_timeout_ms, oget_on_lookup, f);
            if (rc == FLUXON_OK) kv->lookup_batches++;
        }
        fx_free(lk);
        if (rc != FLUXON_OK) oget_on_lookup(f, rc, NULL, NULL, NULL); /* all leaders miss */
    }
    if (--b->pending == 0) oget_batch_finalize(b);
    return;
nomem:
    fx_conn_reply_error(e->conn, h, FLUXON_ERR_NOMEM, "get_start: owner out of memory");
}

/* ---- handles ---- */
FX_INTERNAL void fx_owner_handle_free(fx_owner_t *o, owner_handle_t *hd, bool release_holders)
{
    owner_kv_t *kv = owner_kv(o);
    fx_hmap_del(kv->handles, &hd->id, sizeof hd->id, NULL);
    fx_timer_disarm(o->r, &hd->ttl);
    if (hd->prev) hd->prev->next = hd->next;
    else hd->ext->handles = hd->next;
    if (hd->next) hd->next->prev = hd->prev;
    if (release_holders)
        for (size_t i = 0; i < hd->n; i++) fx_okv_holder_release_id(o, hd->ext, hd->holder_ids[i]);
    fx_free(hd->holder_ids);
    fx_free(hd);
}

FX_INTERNAL void fx_owner_handle_consume(fx_owner_t *o, owner_ext_t *e, uint64_t handle_id, uint64_t consume)
{
    owner_handle_t *hd = fx_hmap_get(owner_kv(o)->handles, &handle_id, sizeof handle_id);
    if (!hd || hd->ext != e) {
        FX_WARN("%s consumed unknown get handle %llu", fx_conn_desc(e->conn), (unsigned long long)handle_id);
        return;
    }
    for (size_t i = FX_MIN(consume, hd->n); i < hd->n; i++) fx_okv_holder_release_id(o, e, hd->holder_ids[i]);
    hd->n = FX_MIN(consume, hd->n); /* the consumed holders now belong to the read plan */
    fx_owner_handle_free(o, hd, false);
}

FX_INTERNAL void fx_owner_gets_fail_all(fx_owner_t *o)
{
    owner_kv_t *kv = owner_kv(o);
    if (!kv || !kv->gets) return;
    fx_hmap_iter_t it = FX_HMAP_ITER_INIT;
    void *v;
    while (fx_hmap_iter_next(kv->gets, &it, NULL, NULL, &v)) {
        owner_oget_t *og = v;
        fx_hmap_del(kv->gets, og->key, og->klen, NULL);
        fx_free(og->w);
        fx_free(og->key);
        fx_free(og);
    }
}
