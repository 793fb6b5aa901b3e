"""vLLM's paged KV tensors as byte ranges (no vLLM import, no torch needed).

One tensor per attention layer, in either of vLLM's two block layouts:

  blocks-first  [num_blocks, 2, block_size, heads, dim]   (e.g. FlashInfer; the issue's shape)
  kv-first      [2, num_blocks, block_size, heads, dim]   (e.g. FlashAttention)

("HND" inner order, [..., heads, block_size, dim], is accepted the same way; it is part
of the config digest because it changes the byte order inside K and V.)

A tensor is a numpy array (__array_interface__) or an object with data_ptr() / shape /
stride() / element_size() on the CPU (a torch CPU tensor). Device tensors are refused:
this version copies host memory only (see docs/vllm.md).

The canonical bytes of one block of one layer are [K of the block][V of the block]; an
object holds the canonical bytes of a run of layers, in layer order (the value layout of
fluxon_cuda.h). Both layouts give the same object bytes, so engines with different
attention backends share blocks. Copies go through fluxon_kv_backup_cpu /
fluxon_kv_restore_cpu, one call per layer for a batch of blocks (each layer's tensor is a
one-layer PAGE_FIRST or LAYER_FIRST pool); a tensor with other strides (padding) is
copied with one memmove per block and layer.
"""
import ctypes

from .._lib import lib
from ..errors import check

from ..kvcopy import LAYER_FIRST as KV_LAYER_FIRST, PAGE_FIRST as KV_PAGE_FIRST, Layout as KVLayout

# fluxon.kvcopy binds fluxon_kv_layout_init / backup_cpu / restore_cpu once (ctypes argtypes
# are per process: a second binding with another Structure class would break the first)
_I64P, _U64P = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_uint64)


def _geometry(t, what):
    """(address, shape, strides in bytes, itemsize) of a host tensor."""
    ai = getattr(t, "__array_interface__", None)
    if ai is not None:
        typestr = ai["typestr"]
        item = int(typestr[2:])
        shape = tuple(int(d) for d in ai["shape"])
        strides = ai.get("strides")
        if strides is None:  # C-contiguous
            s, out = item, []
            for d in reversed(shape):
                out.append(s)
                s *= d
            strides = tuple(reversed(out))
        if ai["data"][1]:
            raise ValueError(f"{what}: the array is read-only; a paged KV tensor is written by loads")
        return int(ai["data"][0]), shape, tuple(int(s) for s in strides), item
    if hasattr(t, "data_ptr") and hasattr(t, "stride"):
        dev = getattr(t, "device", None)
        dtype = getattr(dev, "type", None) if dev is not None else "cpu"
        if dtype not in (None, "cpu"):
            raise ValueError(f"{what}: a tensor on device {dev}: this connector copies host memory only "
                             "(the KV cache must be in host memory)")
        item = int(t.element_size())
        shape = tuple(int(d) for d in t.shape)
        return int(t.data_ptr()), shape, tuple(int(s) * item for s in t.stride()), item
    raise TypeError(f"{what}: {type(t).__name__} is neither an array (__array_interface__) nor a tensor "
                    "(data_ptr/stride)")


class PagedKV:
    """The paged KV tensors of one worker (one per layer, in layer order), checked against
    the geometry the keys promise (block_size, heads, head_size, itemsize, inner layout)."""

    def __init__(self, tensors, num_blocks, block_size, kv_heads, head_size, itemsize, inner="NHD"):
        if not tensors:
            raise ValueError("paged KV: no layer tensors")
        if inner not in ("NHD", "HND"):
            raise ValueError(f"paged KV: inner layout {inner!r} is NHD or HND")
        self.num_blocks = int(num_blocks)
        self.half = block_size * kv_heads * head_size * itemsize  # K (or V) of one block, bytes
        inner_shape = (block_size, kv_heads, head_size) if inner == "NHD" else (kv_heads, block_size, head_size)
        self._keep = list(tensors)
        self.layers = []  # (address, block stride, K->V offset) per layer
        self.layouts = []
        self._c = []  # per layer: a one-layer fluxon_kv_layout when its strides are the C layout's, else None
        for i, t in enumerate(tensors):
            addr, shape, strides, item = _geometry(t, f"layer {i}")
            if item != itemsize:
                raise ValueError(f"layer {i}: element size {item}, the KV spec says {itemsize}")
            if len(shape) != 5 or shape[2:] != inner_shape:
                raise ValueError(f"layer {i}: shape {shape}; expected [num_blocks, 2, {', '.join(map(str, inner_shape))}]"
                                 f" or [2, num_blocks, ...] ({inner})")
            want = (inner_shape[1] * inner_shape[2] * item, inner_shape[2] * item, item)
            if strides[2:] != want:
                raise ValueError(f"layer {i}: the inner dims are not contiguous (strides {strides})")
            if shape[:2] == (2, 2):
                raise ValueError(f"layer {i}: shape {shape} with 2 blocks is ambiguous (blocks-first or kv-first)")
            if shape[0] == self.num_blocks and shape[1] == 2:
                layout, bstride, kvoff = "blocks_first", strides[0], strides[1]
            elif shape[0] == 2 and shape[1] == self.num_blocks:
                layout, bstride, kvoff = "kv_first", strides[1], strides[0]
            else:
                raise ValueError(f"layer {i}: shape {shape} does not hold {self.num_blocks} blocks "
                                 "(kv_cache_config.num_blocks) in either layout")
            self.layers.append((addr, bstride, kvoff))
            self.layouts.append(layout)
            self._c.append(self._c_layout(layout, bstride, kvoff))

    def _c_layout(self, layout, bstride, kvoff):
        """One layer's tensor as a one-layer pool of fluxon_kv_layout (blocks-first is
        PAGE_FIRST, kv-first is LAYER_FIRST), so fluxon_kv_backup_cpu / _restore_cpu copy a
        whole batch of blocks in one call; None when the strides say otherwise (padding)."""
        h, nb = self.half, self.num_blocks
        if (layout, bstride, kvoff) == ("blocks_first", 2 * h, h):
            kind = KV_PAGE_FIRST
        elif (layout, bstride, kvoff) == ("kv_first", h, nb * h):
            kind = KV_LAYER_FIRST
        else:
            return None
        lay = KVLayout()
        check(lib.fluxon_kv_layout_init(kind, 1, h, nb, ctypes.byref(lay)), "kv_layout_init", f"{nb} blocks of {h} B")
        return lay

    def restore(self, block_ids, srcs, layer0, layer1):
        """Writes, for each i, the canonical bytes at address srcs[i] (layers layer0..layer1-1)
        into block block_ids[i]."""
        self._copy(block_ids, srcs, layer0, layer1, True)

    def backup(self, block_ids, dsts, layer0, layer1):
        """Writes the canonical bytes of each block block_ids[i] (layers layer0..layer1-1) at
        address dsts[i]."""
        self._copy(block_ids, dsts, layer0, layer1, False)

    def _copy(self, block_ids, addrs, layer0, layer1, to_pool):
        if len(block_ids) != len(addrs):
            raise ValueError(f"{len(block_ids)} block ids for {len(addrs)} values")
        for b in block_ids:
            self._check(b)
        n, h = len(block_ids), self.half
        if n == 0:
            return
        idx = (ctypes.c_int64 * n)(*block_ids)
        for k, li in enumerate(range(layer0, layer1)):
            addr, bstride, kvoff = self.layers[li]
            off = k * 2 * h
            lay = self._c[li]
            if lay is not None:
                ptrs = (ctypes.c_uint64 * n)(*[a + off for a in addrs])
                if to_pool:
                    rc = lib.fluxon_kv_restore_cpu(ctypes.byref(lay), addr, idx, ptrs, None, n, -1)
                else:
                    rc = lib.fluxon_kv_backup_cpu(ctypes.byref(lay), addr, idx, ptrs, n)
                check(rc, "kv_restore_cpu" if to_pool else "kv_backup_cpu", f"layer {li}")
                continue
            for b, a in zip(block_ids, addrs):
                k_addr, v = addr + b * bstride, a + off
                if to_pool:
                    ctypes.memmove(k_addr, v, h)
                    ctypes.memmove(k_addr + kvoff, v + h, h)
                else:
                    ctypes.memmove(v, k_addr, h)
                    ctypes.memmove(v + h, k_addr + kvoff, h)

    @property
    def num_layers(self):
        return len(self.layers)

    def valid(self, block_id):
        return not isinstance(block_id, bool) and isinstance(block_id, int) and 0 <= block_id < self.num_blocks

    def _check(self, block_id):
        if isinstance(block_id, bool) or not isinstance(block_id, int) or not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id!r} is outside 0..{self.num_blocks - 1}")

    def copy_in(self, block_id, layer0, layer1, src):
        """Writes the canonical bytes at address src (layers layer0..layer1-1) into block_id."""
        self.restore([block_id], [src], layer0, layer1)

    def copy_out(self, block_id, layer0, layer1, dst):
        """Writes the canonical bytes of block_id (layers layer0..layer1-1) at address dst."""
        self.backup([block_id], [dst], layer0, layer1)
