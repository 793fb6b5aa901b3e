"""A numpy test double of SGLang's host KV pools (MHATokenToKVPoolHost /
MLATokenToKVPoolHost): the attributes and methods a storage backend uses — kv_buffer,
layout, page_size, layer_num, dtype, get_size_per_token, get_ksize_per_token,
get_page_buffer_meta(indices) (the v1 path) and get_data_page / get_dummy_flat_data_page /
set_from_flat_data_page (the generic path), following SGLang's formulas per layout:
python/sglang/srt/mem_cache/memory_pool_host.py at SGLang a10a24e9 (read as
noob512/sglang_fluxon@19499d41): MHA init_kv_buffer :148, get_data_page :445,
get_dummy_flat_data_page :459, set_from_flat_data_page :467, get_page_buffer_meta :549;
MLA init_kv_buffer :1012, get_data_page :1280, get_dummy_flat_data_page :1294,
set_from_flat_data_page :1307, get_page_buffer_meta :1334."""
import numpy as np


class HostPool:
    def __init__(self, mla=False, layout="page_first", pages=64, page_size=4, layer_num=3, head_num=2,
                 head_dim=64, kv_cache_dim=96, dtype=np.float16):
        self.is_mla, self.layout, self.page_size = mla, layout, page_size
        self.layer_num, self.head_num, self.head_dim, self.kv_cache_dim = layer_num, head_num, head_dim, kv_cache_dim
        self.dtype = np.dtype(dtype)
        self.page_num = pages
        self.size = pages * page_size
        if mla:
            dims = {"layer_first": (layer_num, self.size, 1, kv_cache_dim),
                    "page_first": (self.size, layer_num, 1, kv_cache_dim),
                    "page_first_direct": (pages, layer_num, page_size, 1, kv_cache_dim)}[layout]
        else:
            dims = {"layer_first": (2, layer_num, self.size, head_num, head_dim),
                    "page_first": (2, self.size, layer_num, head_num, head_dim),
                    "page_first_direct": (2, pages, layer_num, page_size, head_num, head_dim),
                    "page_head": (2, pages, head_num, page_size, layer_num, head_dim)}[layout]
        self.kv_buffer = np.zeros(dims, self.dtype)

    def _row(self):
        return (self.kv_cache_dim if self.is_mla else self.head_num * self.head_dim) * self.dtype.itemsize

    def get_size_per_token(self):
        return self._row() * self.layer_num * (1 if self.is_mla else 2)

    def get_ksize_per_token(self):
        return self._row() * self.layer_num

    def get_page_buffer_meta(self, indices):
        idx = indices.tolist() if hasattr(indices, "tolist") else list(indices)
        assert len(idx) % self.page_size == 0
        base, row, ptrs = self.kv_buffer.ctypes.data, self._row(), []
        if self.layout == "layer_first":
            for i in range(0, len(idx), self.page_size):
                for layer in range(self.layer_num):
                    k = base + idx[i] * row + layer * self.size * row
                    ptrs.append(k)
                    if not self.is_mla:
                        ptrs.append(k + self.size * self.layer_num * row)
            elem = row * self.page_size
        else:
            for i in range(0, len(idx), self.page_size):
                k = base + idx[i] * self.layer_num * row
                ptrs.append(k)
                if not self.is_mla:
                    ptrs.append(k + self.size * self.layer_num * row)
            elem = self.layer_num * row * self.page_size
        return ptrs, [elem] * len(ptrs)

    def get_data_page(self, index, flat=True):
        b, ps = self.kv_buffer, self.page_size
        if self.layout == "layer_first":
            d = b[:, index:index + ps] if self.is_mla else b[:, :, index:index + ps]
        elif self.layout == "page_first":
            d = b[index:index + ps] if self.is_mla else b[:, index:index + ps]
        else:
            d = b[index // ps:index // ps + 1] if self.is_mla else b[:, index // ps:index // ps + 1]
        return np.ascontiguousarray(d).reshape(-1) if flat else d

    def get_dummy_flat_data_page(self):
        shape = (self.layer_num, self.page_size, 1, self.kv_cache_dim) if self.is_mla else \
            (2, self.layer_num, self.page_size, self.head_num, self.head_dim)
        return np.zeros(shape, self.dtype).reshape(-1)

    def set_from_flat_data_page(self, index, data_page):
        d = self.get_data_page(index, flat=False)
        d[...] = np.asarray(data_page).reshape(d.shape)

    # ---- test helpers ----
    def indices(self, pages):
        """Token indices of host pages (page_size tokens each)."""
        return np.array([p * self.page_size + t for p in pages for t in range(self.page_size)], np.int64)

    def page_bytes(self, page):
        """Every byte of one page (K and V, every layer) as the model would see it."""
        b = self.kv_buffer
        t0, t1 = page * self.page_size, (page + 1) * self.page_size
        if self.is_mla:
            if self.layout == "layer_first":
                return b[:, t0:t1].tobytes()
            if self.layout == "page_first":
                return b[t0:t1].tobytes()
            return b[page].tobytes()
        if self.layout == "layer_first":
            return b[:, :, t0:t1].tobytes()
        if self.layout == "page_first":
            return b[:, t0:t1].tobytes()
        return b[:, page].tobytes()  # page_first_direct, page_head

    def fill_page(self, page, seed):
        rng = np.random.default_rng(seed)
        b = self.kv_buffer
        t0, t1 = page * self.page_size, (page + 1) * self.page_size
        if self.is_mla:
            view = b[:, t0:t1] if self.layout == "layer_first" else b[t0:t1] if self.layout == "page_first" else b[page]
        else:
            view = b[:, :, t0:t1] if self.layout == "layer_first" else b[:, t0:t1] if self.layout == "page_first" \
                else b[:, page]
        view[...] = rng.standard_normal(view.shape).astype(self.dtype)

    def zero(self):
        self.kv_buffer[...] = 0
