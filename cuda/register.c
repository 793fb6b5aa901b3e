/* register.c — pins the owner's segment, as this process maps it, for the GPU: the CUDA
 * driver's cuMemHostRegister (PORTABLE | DEVICEMAP) so kernels address plan values
 * directly and device copies run at DMA speed. The driver is loaded with dlopen at the
 * first call: the library never links CUDA, and a machine without a driver gets a
 * status and a message instead of a load failure. */
#include <dlfcn.h>
#include <pthread.h>
#include "fluxon.h"
#include "fluxon_cuda.h"
#include "client.h"
#include "fx.h"
#include "log.h"

#define CU_SUCCESS 0
#define CU_MEMHOSTREGISTER_PORTABLE 0x01u
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02u
#define REG_MAX_SEGMENTS 4

typedef int cu_result;
typedef void *cu_context;
static struct {
    void *so;
    cu_result (*init)(unsigned);
    cu_result (*get_count)(int *);
    cu_result (*device_get)(int *, int);
    cu_result (*ctx_get_current)(cu_context *);
    cu_result (*primary_retain)(cu_context *, int);
    cu_result (*primary_release)(int);
    cu_result (*ctx_push)(cu_context);
    cu_result (*ctx_pop)(cu_context *);
    cu_result (*host_register)(void *, size_t, unsigned);
    cu_result (*host_unregister)(void *);
    cu_result (*error_name)(cu_result, const char **);
} cu;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER; /* cu, and every client's registration */

typedef struct reg_state {
    cu_context ctx;     /* where the segments were registered */
    int primary_dev;    /* -1, or the device whose primary context we retained */
    size_t n;
    void *base[REG_MAX_SEGMENTS];
} reg_state;

static const char *cu_err(cu_result r)
{
    const char *s = NULL;
    if (cu.error_name && cu.error_name(r, &s) == CU_SUCCESS && s) return s;
    return "CUDA_ERROR_UNKNOWN";
}

/* Loads libcuda.so.1 once; FLUXON_ERR_UNAVAILABLE naming what is missing. Under reg_lock. */
static int cu_load(void)
{
    if (cu.so) return FLUXON_OK;
    void *so = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!so) {
        FX_ERROR("cuda: cannot load the CUDA driver libcuda.so.1 (%s): no NVIDIA driver on this machine", dlerror());
        return FLUXON_ERR_UNAVAILABLE;
    }
    struct { void **fn; const char *name, *alt; } syms[] = {
        {(void **)&cu.init, "cuInit", NULL},
        {(void **)&cu.get_count, "cuDeviceGetCount", NULL},
        {(void **)&cu.device_get, "cuDeviceGet", NULL},
        {(void **)&cu.ctx_get_current, "cuCtxGetCurrent", NULL},
        {(void **)&cu.primary_retain, "cuDevicePrimaryCtxRetain", NULL},
        {(void **)&cu.primary_release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
        {(void **)&cu.ctx_push, "cuCtxPushCurrent_v2", "cuCtxPushCurrent"},
        {(void **)&cu.ctx_pop, "cuCtxPopCurrent_v2", "cuCtxPopCurrent"},
        {(void **)&cu.host_register, "cuMemHostRegister_v2", "cuMemHostRegister"},
        {(void **)&cu.host_unregister, "cuMemHostUnregister", NULL},
        {(void **)&cu.error_name, "cuGetErrorName", NULL},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(so, syms[i].name);
        if (!*syms[i].fn && syms[i].alt) *syms[i].fn = dlsym(so, syms[i].alt);
        if (!*syms[i].fn) {
            FX_ERROR("cuda: libcuda.so.1 lacks %s: the driver is too old", syms[i].name);
            dlclose(so);
            return FLUXON_ERR_UNAVAILABLE;
        }
    }
    cu_result r = cu.init(0);
    int count = 0;
    if (r == CU_SUCCESS) r = cu.get_count(&count);
    if (r != CU_SUCCESS || count == 0) {
        FX_ERROR("cuda: the driver found no usable GPU (%s)", r != CU_SUCCESS ? cu_err(r) : "0 devices");
        dlclose(so);
        return FLUXON_ERR_UNAVAILABLE;
    }
    cu.so = so;
    return FLUXON_OK;
}

/* Unregisters and frees st (reg_lock held). */
static int reg_undo(reg_state *st)
{
    int rc = FLUXON_OK;
    if (!st->ctx) {
        fx_free(st);
        return rc;
    }
    if (cu.ctx_push(st->ctx) != CU_SUCCESS) rc = FLUXON_ERR_UNAVAILABLE;
    for (size_t i = 0; i < st->n; i++) {
        cu_result r = cu.host_unregister(st->base[i]);
        if (r != CU_SUCCESS) {
            FX_WARN("cuda: unregistering segment %zu failed: %s", i, cu_err(r));
            rc = FLUXON_ERR_UNAVAILABLE;
        }
    }
    cu_context popped;
    cu.ctx_pop(&popped);
    if (st->primary_dev >= 0) cu.primary_release(st->primary_dev);
    fx_free(st);
    return rc;
}

static void reg_on_close(void *arg)
{
    pthread_mutex_lock(&reg_lock);
    reg_undo(arg);
    pthread_mutex_unlock(&reg_lock);
}

/* The calling thread's context, else device 0's primary one (retained: st->primary_dev). */
static int reg_context(reg_state *st)
{
    cu_result r = cu.ctx_get_current(&st->ctx);
    if (r == CU_SUCCESS && st->ctx) return FLUXON_OK;
    int dev = 0;
    r = cu.device_get(&dev, 0);
    if (r == CU_SUCCESS) r = cu.primary_retain(&st->ctx, dev);
    if (r != CU_SUCCESS) {
        FX_ERROR("cuda: no current context and device 0's primary context failed: %s", cu_err(r));
        return FLUXON_ERR_UNAVAILABLE;
    }
    st->primary_dev = dev;
    return FLUXON_OK;
}

static int reg_segments(fluxon_client *client, reg_state *st)
{
    fluxon_segment_info seg[REG_MAX_SEGMENTS];
    size_t n = 0;
    int rc = fluxon_wait_local_segments_ready(client, 0, seg, REG_MAX_SEGMENTS, &n);
    if (rc != FLUXON_OK) return rc;
    if ((rc = reg_context(st)) != FLUXON_OK) return rc;
    if (cu.ctx_push(st->ctx) != CU_SUCCESS) return FLUXON_ERR_UNAVAILABLE;
    for (size_t i = 0; i < n && rc == FLUXON_OK; i++) {
        cu_result r = cu.host_register(seg[i].write_ptr, seg[i].len,
                                       CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
        if (r != CU_SUCCESS) {
            FX_ERROR("cuda: registering segment %s (%llu bytes) failed: %s", seg[i].segment_label,
                     (unsigned long long)seg[i].len, cu_err(r));
            rc = FLUXON_ERR_UNAVAILABLE;
        } else {
            st->base[st->n++] = seg[i].write_ptr;
        }
    }
    cu_context popped;
    cu.ctx_pop(&popped);
    return rc;
}

int fluxon_cuda_register_segments(fluxon_client *client, unsigned flags)
{
    if (!client) return FLUXON_ERR_INVALID_ARGUMENT;
    if (flags != 0) {
        FX_ERROR("fluxon_cuda_register_segments: flags 0x%x: no flag is defined, pass 0", flags);
        return FLUXON_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&reg_lock);
    int rc = FLUXON_OK;
    if (fx_client_close_hook_arg(client)) goto out; /* already registered */
    if ((rc = cu_load()) != FLUXON_OK) goto out;
    reg_state *st = fx_calloc(1, sizeof *st);
    if (!st) {
        rc = FLUXON_ERR_NOMEM;
        goto out;
    }
    st->primary_dev = -1;
    rc = reg_segments(client, st);
    if (rc != FLUXON_OK) {
        reg_undo(st); /* what was registered, and the retained context */
        goto out;
    }
    fx_client_set_close_hook(client, reg_on_close, st);
out:
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

int fluxon_cuda_unregister_segments(fluxon_client *client)
{
    if (!client) return FLUXON_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&reg_lock);
    reg_state *st = fx_client_close_hook_arg(client);
    int rc = FLUXON_OK;
    if (st) {
        fx_client_set_close_hook(client, NULL, NULL);
        rc = reg_undo(st);
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}
