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

SGLang's GPU pool is one K and one V tensor per layer (MHATokenToKVPool.k_buffer[l] /
v_buffer[l], [tokens, heads, head_dim]; MLA: kv_buffer[l]): layout LAYER_TENSORS (MLA:
LAYER_TENSORS_MLA) with chunk_bytes = page_size * heads * head_dim * itemsize and
num_pages = tokens // page_size, and the layers_* calls taking the lists of tensors:

    lay = kvcopy.layout(kvcopy.LAYER_TENSORS, layer_num, chunk_bytes, num_pages)
    kvcopy.layers_backup_cpu(lay, pool.k_buffer, pool.v_buffer, pages, plan)
    kvcopy.layers_restore(lay, pool.k_buffer, pool.v_buffer, pages_dev, rp, layer=l, stream=s)

The value is the same bytes as from a PAGE_FIRST pool of the same pages.
"""
import ctypes
import os

from ._lib import lib, path as _libpath
from .errors import check, u64, u64s

LAYER_FIRST, PAGE_FIRST, MLA = 1, 2, 3
LAYER_TENSORS, LAYER_TENSORS_MLA = 4, 5  # one tensor per layer (and per K/V): the layers_* calls


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
               "fluxon_kv_layers_backup_cpu": [_LP, _U64P, _U64P, _I64P, _U64P, ctypes.c_size_t],
               "fluxon_kv_layers_restore_cpu": [_LP, _U64P, _U64P, _I64P, _U64P, _U64P, ctypes.c_size_t,
                                                ctypes.c_int32],
               "fluxon_cuda_register_segments": [ctypes.c_void_p, ctypes.c_uint],
               "fluxon_cuda_unregister_segments": [ctypes.c_void_p]}.items():
    getattr(lib, _n).restype, getattr(lib, _n).argtypes = ctypes.c_int, _a


def layout(kind, num_layers, chunk_bytes, num_pages):
    """A Layout for a pool of num_pages pages (fluxon_kv_layout_init; InvalidArgument names
    the bad value in the log)."""
    lay = Layout()
    kind, num_layers = u64(kind, "kind", 32), u64(num_layers, "num_layers", 32)  # ctypes would wrap -1
    chunk_bytes, num_pages = u64(chunk_bytes, "chunk_bytes"), u64(num_pages, "num_pages")
    check(lib.fluxon_kv_layout_init(kind, num_layers, chunk_bytes, num_pages, ctypes.byref(lay)), "kv_layout_init",
          f"kind {kind}, {num_layers} layers, chunk {chunk_bytes} B, {num_pages} pages")
    return lay


def _addr(x, what):
    if isinstance(x, int):
        return u64(x, what)  # ctypes would wrap -1 to 2**64-1
    if hasattr(x, "data_ptr"):
        return int(x.data_ptr())
    ai = getattr(x, "__array_interface__", None)
    if ai is not None:
        return int(ai["data"][0])
    raise TypeError(f"{what}: an address (int), a tensor (data_ptr()) or an array (__array_interface__), "
                    f"not {type(x).__name__}")


def _values(plan, n_pages):
    """(value addresses, value lengths or None) of a plan (PutPlan / ReadPlan) or a list of addresses."""
    ptrs = plan.value_ptrs if hasattr(plan, "value_ptrs") else u64s(plan, "plan")  # ctypes would wrap -1
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


def _nbytes(x):
    if hasattr(x, "nbytes"):
        return int(x.nbytes)
    if hasattr(x, "numel") and hasattr(x, "element_size"):
        return int(x.numel()) * int(x.element_size())
    return None  # an address: its size is the caller's word


def _tensors(lay, k_layers, v_layers):
    """(K addresses, V addresses or None) of per-layer tensors: lists of num_layers tensors,
    arrays or addresses; a tensor's size, when it has one, must hold num_pages chunks."""
    if lay.kind not in (LAYER_TENSORS, LAYER_TENSORS_MLA):
        raise ValueError(f"layout kind {lay.kind} is one pool: the layers_* calls take LAYER_TENSORS (4) or "
                         f"LAYER_TENSORS_MLA (5); use backup_cpu / restore_cpu")
    need = lay.num_pages * lay.chunk_bytes
    out = []
    for name, ts in (("k_layers", k_layers), ("v_layers", v_layers)):
        if name == "v_layers" and lay.kind == LAYER_TENSORS_MLA:
            out.append(None)
            continue
        if ts is None or len(ts) != lay.num_layers:
            raise ValueError(f"{name}: {0 if ts is None else len(ts)} tensors, the layout has {lay.num_layers} "
                             f"layers")
        for i, t in enumerate(ts):
            nb = _nbytes(t)
            if nb is not None and nb < need:
                raise ValueError(f"{name}[{i}]: {nb} bytes, {lay.num_pages} pages of {lay.chunk_bytes} B need {need}")
            flags = getattr(t, "flags", None)
            contiguous = t.is_contiguous() if hasattr(t, "is_contiguous") else \
                getattr(flags, "c_contiguous", True) if flags is not None else True
            if not contiguous:
                raise ValueError(f"{name}[{i}]: not contiguous; a layer's tensor must be [page][chunk] bytes in order")
        out.append((ctypes.c_uint64 * len(ts))(*[_addr(t, f"{name}[{i}]") for i, t in enumerate(ts)]))
    return out[0], out[1]


def layers_backup_cpu(lay, k_layers, v_layers, page_idx, plan):
    """CPU reference, per-layer pool: every layer of pages page_idx (K tensor l, V tensor l;
    MLA: v_layers None) -> the plan's values."""
    k, v = _tensors(lay, k_layers, v_layers)
    idx, n = _pages(page_idx)
    ptrs, _ = _values(plan, n)
    check(lib.fluxon_kv_layers_backup_cpu(ctypes.byref(lay), k, v, idx, ptrs, n), "kv_layers_backup_cpu")


def layers_restore_cpu(lay, k_layers, v_layers, page_idx, plan, layer=-1):
    """CPU reference, per-layer pool: the plan's values -> pages page_idx, every layer (-1) or one."""
    k, v = _tensors(lay, k_layers, v_layers)
    idx, n = _pages(page_idx)
    ptrs, lens = _values(plan, n)
    check(lib.fluxon_kv_layers_restore_cpu(ctypes.byref(lay), k, v, idx, ptrs, lens, n, layer),
          "kv_layers_restore_cpu")


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
        c.fluxon_cuda_layers_backup.restype = c.fluxon_cuda_layers_restore.restype = ctypes.c_int
        c.fluxon_cuda_layers_backup.argtypes = [_LP, _U64P, _U64P, ctypes.c_void_p, ctypes.c_void_p,
                                                ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
        c.fluxon_cuda_layers_restore.argtypes = [_LP, _U64P, _U64P, ctypes.c_void_p, ctypes.c_void_p,
                                                 ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p]
        c.fluxon_cuda_backup.argtypes = [_LP, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                         ctypes.c_size_t, ctypes.c_void_p]
        c.fluxon_cuda_restore.argtypes = [_LP, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                          ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p]
        _cuda = c
    return _cuda


def _stream(s):
    if s is None:
        return None
    return u64(getattr(s, "cuda_stream", s), "stream")  # int() leaked its own message for "abc"


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


def layers_backup(lay, k_layers, v_layers, page_idx_dev, plan, first=0, n=None, stream=None):
    """GPU, per-layer pool (SGLang's k_buffer / v_buffer lists of CUDA tensors): pages
    page_idx_dev (n device int64) -> plan values [first, first+n), queued on stream;
    synchronize it before the plan's commit."""
    k, v = _tensors(lay, k_layers, v_layers)
    n = len(plan.value_ptrs) - first if n is None else n
    check(_cuda_lib().fluxon_cuda_layers_backup(ctypes.byref(lay), k, v, _addr(page_idx_dev, "page_idx"),
                                                _plan_ptr(plan), first, n, _stream(stream)), "cuda_layers_backup")


def layers_restore(lay, k_layers, v_layers, page_idx_dev, plan, first=0, n=None, layer=-1, stream=None):
    """GPU, per-layer pool: read plan values [first, first+n) -> pages page_idx_dev of every
    layer's tensors, or of one layer (to overlap loading with compute), queued on stream;
    keep the plan until the stream has passed it."""
    k, v = _tensors(lay, k_layers, v_layers)
    n = len(plan.value_ptrs) - first if n is None else n
    check(_cuda_lib().fluxon_cuda_layers_restore(ctypes.byref(lay), k, v, _addr(page_idx_dev, "page_idx"),
                                                 _plan_ptr(plan), first, n, layer, _stream(stream)),
          "cuda_layers_restore")
