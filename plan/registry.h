/* registry.h — plan/: the registry of the hostless plans (fluxon_plan) and get handles a
 * client has handed out. Every call checks its plan or handle here before touching it:
 * anything that is not a live object of the wanted kind is FLUXON_ERR_WRONG_HANDLE.
 * Identity, not address: each blob carries a hidden header (magic + a 64-bit sequence
 * number) checked against the registry's record, and a released blob's address is not
 * handed out again for a long time (registry.c), so a stale pointer is WRONG_HANDLE, never
 * another thread's new plan. Thread-safe (one mutex); no I/O. The blob ABI itself is in
 * include/fluxon.h. */
#ifndef FX_PLAN_REGISTRY_H
#define FX_PLAN_REGISTRY_H

#include "fx.h"

enum { FX_PLAN_PUT = 1, FX_PLAN_READ = 2, FX_PLAN_HANDLE = 3 };
enum { FX_PLAN_SENT_COMMIT = 1, FX_PLAN_SENT_ABORT = 2 };

/* The registry's record of one live plan or handle. */
typedef struct fx_plan_obj {
    int kind;            /* FX_PLAN_* */
    uint64_t seq;        /* identity, also in the blob's hidden header */
    size_t blob_bytes;
    uint64_t owner_id;   /* plan id / handle id at the owner */
    uint64_t generation; /* the owner's, when it was made */
    size_t n;            /* put plan: keys; read plan: holders; handle: transferable */
    uint64_t *holder_ids, *offsets, *lens; /* freed with the object */
    bool arrays_one_block; /* offsets and lens point into holder_ids' allocation */
    uint64_t *group_lens; /* handle: the batch's groups (for boundary checks) */
    size_t n_groups;
    uint64_t expires_ms; /* handle: the client cancels it then if still unconsumed */
    uint32_t sent;       /* put plan: FX_PLAN_SENT_* requests already sent for it */
    void *blob;          /* the fluxon_plan / fluxon_get_handle given out */
} fx_plan_obj_t;

typedef struct fx_plan_reg fx_plan_reg_t;

FX_INTERNAL int fx_plan_reg_create(fx_plan_reg_t **r_p);
/* Frees every object still registered (the client is closing). */
FX_INTERNAL void fx_plan_reg_destroy(fx_plan_reg_t *r);

/* A new object of `kind` with a zeroed blob of blob_bytes (16-byte aligned) and a fresh
 * identity; NULL on NOMEM. */
FX_INTERNAL fx_plan_obj_t *fx_plan_obj_new(fx_plan_reg_t *r, int kind, size_t blob_bytes);
/* Frees an object (registered or not: it must not be in the registry any more), its
 * arrays and its blob. */
FX_INTERNAL void fx_plan_reg_retire(fx_plan_reg_t *r, fx_plan_obj_t *o);

/* Registers o (again, after a retryable failure: the same identity). */
FX_INTERNAL int fx_plan_reg_add(fx_plan_reg_t *r, fx_plan_obj_t *o);

/* Under the registry lock: finds the live object of `kind` for blob (else
 * FLUXON_ERR_WRONG_HANDLE) and asks check (may be NULL = take it): check returns
 * FLUXON_OK to take the object out of the registry (*o_p receives it, the caller owns it),
 * or a status to return with the object left registered, or with *discard set, removed
 * and freed. check must not block or call back into the registry. */
typedef int (*fx_plan_check_fn)(fx_plan_obj_t *o, void *arg, bool *discard);
FX_INTERNAL int fx_plan_reg_take(fx_plan_reg_t *r, const void *blob, int kind, fx_plan_check_fn check,
                                 void *arg, fx_plan_obj_t **o_p);

/* The kind of the live object at blob (FX_PLAN_*), or 0 when blob is not one. */
FX_INTERNAL int fx_plan_reg_kind(fx_plan_reg_t *r, const void *blob);

/* Takes out of the registry up to cap objects of `kind` whose expires_ms is set and
 * <= now_ms (each then WRONG_HANDLE for its holder), into out; returns how many. The caller
 * owns them (fx_plan_reg_retire). */
FX_INTERNAL size_t fx_plan_reg_take_expired(fx_plan_reg_t *r, int kind, uint64_t now_ms, fx_plan_obj_t **out,
                                            size_t cap);

#endif
