"""The engine's KV pages <-> a plan's values (include/fluxon_cuda.h) from Python: one
value per page holding every layer ([layer 0 K][layer 0 V][layer 1 K]... ; MLA one latent
chunk per layer), the same for every pool layout.

    lay = kvcopy.layout(kvcopy.PAGE_FIRST, num_layers, chunk_bytes, num_pages)
    plan = client.put_start(keys, lay.value_len)
    kvcopy.backup_cpu(lay, pool, pages, plan); plan.commit().wait()        # CPU reference
    h = client.get_start(keys); rp = h.transfer()
    kvcopy.restore_cpu(lay, pool, pages, rp, layer=-1); rp.release()

pool / page_idx: an address (int) or anything with data_ptr() (a torch tensor) or
__array_interface__ (numpy); the CPU calls also take a list of page indices. The GPU calls
(backup / restore: libfluxon_cuda.so from `make cuda`, found through $FLUXON_CUDA_LIB or
next to libfluxon.so) take device addresses — pool and page_idx as CUDA tensors — and a
stream (an int cudaStream_t, or an object with cuda_stream, e.g. torch.cuda.Stream);
register_segments(client) first makes the owner's segment device-mapped.
"""
import ctypes
import os

from ._lib import lib, path as _libpath
from .errors import check

LAYER_FIRST, PAGE_FIRST, MLA = 1, 2, 3


class Layout(ctypes.Structure):
    """struct fluxon_kv_layout (fill it with layout())."""
    _fields_ = [("kind", ctypes.c_uint32), ("num_layers", ctypes.c_uint32), ("chunk_bytes", ctypes.c_uint64),
                ("num_pages", ctypes.c_uint64), ("kv_factor", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("page_stride", ctypes.c_uint64), ("layer_stride", ctypes.c_uint64), ("kv_stride", ctypes.c_uint64),
                ("value_len", ctypes.c_uint64), ("pool_bytes", ctypes.c_uint64)]


_U64P, _I64P, _LP = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(Layout)
for _n, _a in {"fluxon_kv_layout_init": [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, _LP],
               "fluxon_kv_backup_cpu": [_LP, ctypes.c_void_p, _I64P, _U64P, ctypes.c_size_t],
               "fluxon_kv_restore_cpu": [_LP, ctypes.c_void_p, _I64P, _U64P, _U64P, ctypes.c_size_t,
                                         ctypes.c_int32],
               "fluxon_cuda_register_segments": [ctypes.c_void_p, ctypes.c_uint],
               "fluxon_cuda_unregister_segments": [ctypes.c_void_p]}.items():
    getattr(lib, _n).restype, getattr(lib, _n).argtypes = ctypes.c_int, _a


def layout(kind, num_layers, chunk_bytes, num_pages):
    """A Layout for a pool of num_pages pages (fluxon_kv_layout_init; InvalidArgument names
    the bad value in the log)."""
    lay = Layout()
    check(lib.fluxon_kv_layout_init(kind, num_layers, chunk_bytes, num_pages, ctypes.byref(lay)), "kv_layout_init",
          f"kind {kind}, {num_layers} layers, chunk {chunk_bytes} B, {num_pages} pages")
    return lay


def _addr(x, what):
    if isinstance(x, int):
        return x
    if hasattr(x, "data_ptr"):
        return int(x.data_ptr())
    ai = getattr(x, "__array_interface__", None)
    if ai is not None:
        return int(ai["data"][0])
    raise TypeError(f"{what}: an address (int), a tensor (data_ptr()) or an array (__array_interface__), "
                    f"not {type(x).__name__}")


def _values(plan, n_pages):
    """(value addresses, value lengths or None) of a plan (PutPlan / ReadPlan) or a list of addresses."""
    ptrs = plan.value_ptrs if hasattr(plan, "value_ptrs") else list(plan)
    if len(ptrs) != n_pages:
        raise ValueError(f"{n_pages} pages but {len(ptrs)} values")
    lens = getattr(plan, "value_lens", None)
    return (ctypes.c_uint64 * len(ptrs))(*ptrs), (None if lens is None else (ctypes.c_uint64 * len(lens))(*lens))


def _pages(page_idx):
    if isinstance(page_idx, (list, tuple, range)):
        return (ctypes.c_int64 * len(page_idx))(*page_idx), len(page_idx)
    ai = getattr(page_idx, "__array_interface__", None)
    if ai is not None:
        if ai["typestr"][1:] != "i8":
            raise TypeError("page_idx: an int64 array")
        return ctypes.cast(ai["data"][0], _I64P), int(ai["shape"][0])
    raise TypeError("page_idx: a list of ints or an int64 numpy array")


def backup_cpu(lay, pool, page_idx, plan):
    """Copies every layer of pages page_idx of pool into the plan's values (CPU reference)."""
    idx, n = _pages(page_idx)
    ptrs, _ = _values(plan, n)
    check(lib.fluxon_kv_backup_cpu(ctypes.byref(lay), _addr(pool, "pool"), idx, ptrs, n), "kv_backup_cpu")


def restore_cpu(lay, pool, page_idx, plan, layer=-1):
    """Copies the plan's values into pages page_idx of pool: every layer (layer -1) or one."""
    idx, n = _pages(page_idx)
    ptrs, lens = _values(plan, n)
    check(lib.fluxon_kv_restore_cpu(ctypes.byref(lay), _addr(pool, "pool"), idx, ptrs, lens, n, layer),
          "kv_restore_cpu")


def register_segments(client):
    """Pins the client's mapping of the owner's segment for the GPU (once per client)."""
    check(client._call(lib.fluxon_cuda_register_segments, 0), "cuda_register_segments")


def unregister_segments(client):
    check(client._call(lib.fluxon_cuda_unregister_segments), "cuda_unregister_segments")


_cuda = None


def _cuda_lib():
    global _cuda
    if _cuda is None:
        cands = [os.environ["FLUXON_CUDA_LIB"]] if os.environ.get("FLUXON_CUDA_LIB") else \
            [os.path.join(os.path.dirname(_libpath), "libfluxon_cuda.so"), "libfluxon_cuda.so"]
        errors = []
        for p in cands:
            try:
                c = ctypes.CDLL(p)
                break
            except OSError as e:
                errors.append(f"{p}: {e}")
        else:
            raise ImportError("libfluxon_cuda.so not found (build it with `make cuda` or set FLUXON_CUDA_LIB); "
                              "tried: " + "; ".join(errors))
        c.fluxon_cuda_backup.restype = c.fluxon_cuda_restore.restype = ctypes.c_int
        c.fluxon_cuda_backup.argtypes = [_LP, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                         ctypes.c_size_t, ctypes.c_void_p]
        c.fluxon_cuda_restore.argtypes = [_LP, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                          ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p]
        _cuda = c
    return _cuda


def _stream(s):
    if s is None:
        return None
    return int(getattr(s, "cuda_stream", s))


def _plan_ptr(plan):
    plan._check_live()
    return plan._ptr


def backup(lay, pool, page_idx_dev, plan, first=0, n=None, stream=None):
    """GPU: pages page_idx_dev (n device int64) of the device pool -> plan values [first, first+n),
    queued on stream; synchronize it before the plan's commit."""
    n = len(plan.value_ptrs) - first if n is None else n
    check(_cuda_lib().fluxon_cuda_backup(ctypes.byref(lay), _addr(pool, "pool"), _addr(page_idx_dev, "page_idx"),
                                         _plan_ptr(plan), first, n, _stream(stream)), "cuda_backup")


def restore(lay, pool, page_idx_dev, plan, first=0, n=None, layer=-1, stream=None):
    """GPU: read plan values [first, first+n) -> pages page_idx_dev of the device pool (every
    layer, or one: to overlap loading with compute), queued on stream; keep the plan until
    the stream has passed it."""
    n = len(plan.value_ptrs) - first if n is None else n
    check(_cuda_lib().fluxon_cuda_restore(ctypes.byref(lay), _addr(pool, "pool"), _addr(page_idx_dev, "page_idx"),
                                          _plan_ptr(plan), first, n, layer, _stream(stream)), "cuda_restore")
