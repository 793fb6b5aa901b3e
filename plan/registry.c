/* registry.c — the live plans and get handles of one client (see registry.h). */
#include <pthread.h>

#include "registry.h"
#include "hmap.h"

struct fx_plan_reg {
    pthread_mutex_t lock; /* guards objs */
    fx_hmap_t *objs;      /* blob pointer -> fx_plan_obj_t */
};

FX_INTERNAL int fx_plan_reg_create(fx_plan_reg_t **r_p)
{
    fx_plan_reg_t *r = fx_calloc(1, sizeof *r);
    if (!r) return FLUXON_ERR_NOMEM;
    if (fx_hmap_create(64, &r->objs) != FLUXON_OK) {
        fx_free(r);
        return FLUXON_ERR_NOMEM;
    }
    pthread_mutex_init(&r->lock, NULL);
    *r_p = r;
    return FLUXON_OK;
}

static void plan_obj_free(fx_plan_obj_t *o)
{
    if (!o) return;
    fx_free(o->holder_ids);
    fx_free(o->offsets);
    fx_free(o->lens);
    fx_free(o->group_lens);
    fx_free(o->blob);
    fx_free(o);
}

static void plan_obj_free_v(void *v) { plan_obj_free(v); }

FX_INTERNAL void fx_plan_reg_destroy(fx_plan_reg_t *r)
{
    if (!r) return;
    fx_hmap_clear(r->objs, plan_obj_free_v);
    fx_hmap_destroy(r->objs);
    pthread_mutex_destroy(&r->lock);
    fx_free(r);
}

FX_INTERNAL fx_plan_obj_t *fx_plan_obj_new(int kind, size_t blob_bytes)
{
    fx_plan_obj_t *o = fx_calloc(1, sizeof *o);
    if (!o) return NULL;
    o->kind = kind;
    o->blob = fx_calloc(1, blob_bytes ? blob_bytes : 1);
    if (!o->blob) {
        fx_free(o);
        return NULL;
    }
    return o;
}

FX_INTERNAL void fx_plan_reg_retire(fx_plan_reg_t *r, fx_plan_obj_t *o)
{
    (void)r;
    plan_obj_free(o);
}

FX_INTERNAL int fx_plan_reg_add(fx_plan_reg_t *r, fx_plan_obj_t *o)
{
    pthread_mutex_lock(&r->lock);
    int rc = fx_hmap_put(r->objs, &o->blob, sizeof o->blob, o, NULL);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

FX_INTERNAL int fx_plan_reg_take(fx_plan_reg_t *r, const void *blob, int kind, fx_plan_check_fn check,
                                 void *arg, fx_plan_obj_t **o_p)
{
    *o_p = NULL;
    fx_plan_obj_t *dead = NULL;
    pthread_mutex_lock(&r->lock);
    fx_plan_obj_t *o = fx_hmap_get(r->objs, &blob, sizeof blob);
    int rc = o && o->kind == kind ? FLUXON_OK : FLUXON_ERR_WRONG_HANDLE;
    bool discard = false;
    if (rc == FLUXON_OK && check) rc = check(o, arg, &discard);
    if (rc == FLUXON_OK || discard) fx_hmap_del(r->objs, &blob, sizeof blob, NULL);
    if (rc == FLUXON_OK) *o_p = o;
    else if (discard) dead = o;
    pthread_mutex_unlock(&r->lock);
    if (dead) fx_plan_reg_retire(r, dead);
    return rc;
}
