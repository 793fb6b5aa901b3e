/* fetch_disk.c — fetches from this owner's own disk tier (issue 39; owner_fetch_int.h): a
 * leader whose key the disk index holds is read back without a LOOKUP (the index is as
 * current as the memory one: INVALIDATEs drop its records), into a claimed slot, checked
 * (the store verifies every record), then published by GET_DONE as any fetched copy, this
 * owner's disk replica its source. A record that cannot be read is a miss, and the master
 * is told to stop routing it. Reactor thread only. */
#include <string.h>

#include "owner_claims.h"
#include "owner_disk.h"
#include "owner_fetch_int.h"

/* A read of this owner's disk tier ended (issue 39); the last one ends the transfer. */
static void ofetch_on_disk_read(void *arg, int status)
{
    ofetch_dr_t *dr = arg;
    ofetch_xfer_t *x = dr->x;
    owner_oget_t *og = x->og[dr->k];
    fx_owner_t *o = x->f->o;
    if (status == FLUXON_OK) {
        o->fetch->disk_hits++;
    } else { /* gone or failed its checksum: a miss, and the master stops routing it */
        og->disk_rc = status == FLUXON_ERR_UNAVAILABLE ? status : FLUXON_ERR_NOT_FOUND;
        o->fetch->disk_misses++;
        if (status == FLUXON_ERR_NOT_FOUND)
            fx_odisk_forget(o, og->key, og->klen, og->src_off, og->put_ms, og->put_ver);
    }
    if (--x->disk_pending == 0) ofetch_on_xfer(x, FLUXON_OK);
}

/* This owner's own replicas: a range of its segment (a placed value) is memcpy'd, a disk
 * replica is read (issue 39). Returns true when the transfer ends later (disk reads). */
FX_INTERNAL bool ofetch_self_copy(fx_owner_t *o, ofetch_xfer_t *x, uint8_t *base)
{
    size_t nd = 0;
    for (size_t k = 0; k < x->n; k++) {
        fx_ucx_range_t *rg = &x->ranges[k];
        if (fx_disk_is_off(rg->remote_offset)) nd++;
        else memcpy(rg->local, base + rg->remote_offset, rg->len);
    }
    o->fetch->self_copies += x->n - nd;
    if (!nd) return false;
    x->dr = fx_calloc(nd, sizeof *x->dr);
    x->disk_pending = 1; /* held while the reads are issued */
    for (size_t k = 0, j = 0; k < x->n; k++) {
        fx_ucx_range_t *rg = &x->ranges[k];
        owner_oget_t *og = x->og[k];
        if (!fx_disk_is_off(rg->remote_offset)) continue;
        int rc = FLUXON_ERR_NOMEM;
        if (x->dr) {
            x->dr[j] = (ofetch_dr_t){x, k};
            rc = fx_odisk_read(o, rg->remote_offset, og->key, og->klen, rg->local, rg->len, ofetch_on_disk_read,
                               &x->dr[j]);
            j++;
        }
        if (rc == FLUXON_OK) {
            x->disk_pending++;
        } else {
            og->disk_rc = rc == FLUXON_ERR_NOMEM ? rc : FLUXON_ERR_NOT_FOUND;
            o->fetch->disk_misses++;
            if (rc == FLUXON_ERR_NOT_FOUND) fx_odisk_forget(o, og->key, og->klen, rg->remote_offset, og->put_ms, og->put_ver);
        }
    }
    if (--x->disk_pending) return true;
    return false; /* every read refused at once: the transfer ends now */
}

/* Issue 39: the leaders whose key this owner's disk holds are read from it without a LOOKUP
 * (the disk index is as current as the memory one: INVALIDATEs drop its records); the copy
 * is published by GET_DONE as any fetched one, this owner's disk replica its source. The
 * others stay in ogs[0..return). */
FX_INTERNAL size_t ofetch_start_disk(fx_owner_t *o, owner_oget_t **ogs, size_t n, uint32_t caller_timeout_ms)
{
    size_t first = 0, m = 0;
    while (first < n && !fx_odisk_has(o, ogs[first]->key, ogs[first]->klen)) first++;
    if (first == n) return n; /* none on disk: no batch made */
    size_t nd = n - first; /* at most: each key is looked up once more below */
    ofetch_batch_t *f = fx_calloc(1, sizeof *f);
    owner_oget_t **dk = f ? fx_calloc(nd, sizeof *dk) : NULL;
    if (f) {
        f->src_ids = fx_calloc(1, sizeof *f->src_ids);
        f->src_gens = fx_calloc(1, sizeof *f->src_gens);
        f->src_bases = fx_calloc(1, sizeof *f->src_bases);
        f->src_addr = fx_calloc(1, sizeof *f->src_addr);
        f->src_rkey = fx_calloc(1, sizeof *f->src_rkey);
        f->src_addr_len = fx_calloc(1, sizeof *f->src_addr_len);
        f->src_rkey_len = fx_calloc(1, sizeof *f->src_rkey_len);
    }
    if (!dk || !f->src_ids || !f->src_gens || !f->src_bases || !f->src_addr || !f->src_rkey || !f->src_addr_len ||
        !f->src_rkey_len) { /* out of memory: they go to the master */
        if (f) f->n_src = f->src_addr && f->src_rkey ? 1 : 0;
        if (f) ofetch_batch_free(f);
        fx_free(dk);
        return n;
    }
    f->o = o;
    f->t0_ns = fx_now_ns();
    f->deadline_ms = fx_oclaim_deadline(o, caller_timeout_ms);
    f->n_src = 1;
    fx_strlcpy(f->src_ids[0], o->cfg.node_id, FX_ID_MAX);
    f->src_gens[0] = o->generation;
    f->og = dk;
    m = first; /* ogs[0..first) hold no disk key: they stay */
    for (size_t k = first; k < n; k++) {
        owner_oget_t *og = ogs[k];
        fx_disk_meta_t dm;
        uint64_t off = 0;
        if (f->n == nd || !fx_odisk_find(o, og->key, og->klen, &off, &dm) ||
            fx_slot_size_for(dm.value_len) > o->cfg.grant_bytes) {
            ogs[m++] = og;
            continue;
        }
        if (og->lookups++ == 0) og->deadline_ms = f->deadline_ms;
        else f->deadline_ms = FX_MIN(f->deadline_ms, og->deadline_ms);
        /* promotion on a second read (as Mooncake's promotion_admission_threshold 2): a
         * first read-back is a temporary copy, no master round trip, no eviction later; a
         * prefetched one is kept (its reader comes after the read) */
        og->mode = og->prefetch || fx_odisk_promote(o, off) ? FX_GET_DURABLE : FX_GET_TEMPORARY;
        og->found = true;
        og->own_disk = true;
        og->src = 0;
        og->src_off = off;
        og->src_seq = 0; /* a disk offset is never reused: no replica number needed (W3) */
        og->value_len = dm.value_len;
        og->put_ms = dm.put_ms;
        og->put_ver = dm.put_ver;
        dk[f->n++] = og;
    }
    o->fetch->disk_direct += f->n;
    f->claims_pending = 1;
    ofetch_claim_all(f);
    return m;
}

