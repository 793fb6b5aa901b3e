"""FluxonStore: an SGLang HiCache L3 storage backend (HiCacheStorage) over Fluxon.

Load it through SGLang's dynamic backend:

    --enable-hierarchical-cache --hicache-mem-layout page_first \
    --hicache-storage-backend dynamic \
    --hicache-storage-backend-extra-config '{"backend_name": "fluxon",
        "module_path": "fluxon.sglang", "class_name": "FluxonStore",
        "socket": "/run/fluxon/owner.sock", "cluster_id": "prod", "cluster_token": "..."}'

extra_config members (besides the three above): socket (the local owner's unix socket;
else $FLUXON_SOCKET), cluster_id (default "fluxon"), cluster_token, timeout_ms (client
timeout, default 30000), log_level, extra_backend_tag (a key prefix, as Mooncake's).

Keys follow the Mooncake backend's convention so a deployment can switch backends:
[<extra_backend_tag>_][<model name, '/' -> '-'>_]<page hash> then, MHA,
"_<tp_rank>_k" / "_<tp_rank>_v" ("_<tp_rank>_<pp_rank>_k" with pipeline parallelism),
MLA "__k" ("_<pp_rank>_k"). A page's K and V objects are one atomic group: stored
together or not at all, restored together or not at all.

Data path: batch_set_v1 / batch_get_v1 copy straight between the host pool's pages
(get_page_buffer_meta addresses: page_first and page_first_direct, MHA and MLA) and the
owner's shared segment, in C (fluxon_batch_put_from / fluxon_batch_get_into), one
hostless round per call; MLA layer_first (one object spread over the layers' buffers)
goes through a put plan / read plan with one memmove per piece. Keys already stored are
skipped (the hostless put rejects them as KEY_EXISTS: counted as stored).

Failures never raise into SGLang's prefetch/backup threads (they are never restarted):
they become False entries (0 hits); a lost owner is re-attached on a later call.

SGLang is optional: when `sglang` cannot be imported (it needs torch), a minimal
HiCacheStorage base with the same abstract methods, HiCacheStorageConfig and
HiCacheStorageExtraInfo are defined here, so the backend can be tested without it.
"""
import ctypes
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, List, Optional

from .client import Client
from .errors import FluxonError, Status

logger = logging.getLogger(__name__)

try:  # the real base class when SGLang is installed
    from sglang.srt.mem_cache.hicache_storage import (HiCacheStorage, HiCacheStorageConfig,
                                                      HiCacheStorageExtraInfo)
    HAVE_SGLANG = True
except Exception:  # SGLang (or torch) absent: a compatible minimal base
    HAVE_SGLANG = False

    @dataclass
    class HiCacheStorageConfig:
        tp_rank: int = 0
        tp_size: int = 1
        pp_rank: int = 0
        pp_size: int = 1
        attn_cp_rank: int = 0
        attn_cp_size: int = 1
        is_mla_model: bool = False
        enable_storage_metrics: bool = False
        is_page_first_layout: bool = True
        model_name: Optional[str] = None
        dp_rank: int = 0
        dp_size: int = 1
        tp_lcm_size: Optional[int] = None
        should_split_heads: bool = False
        extra_config: Optional[dict] = None

    @dataclass
    class HiCacheStorageExtraInfo:
        prefix_keys: Optional[List[str]] = None
        extra_info: Optional[dict] = None

    class HiCacheStorage(ABC):
        """The subset of sglang.srt.mem_cache.hicache_storage.HiCacheStorage a backend implements."""

        def register_mem_pool_host(self, mem_pool_host):
            self.mem_pool_host = mem_pool_host

        def batch_get_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError()

        def batch_set_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError()

        @abstractmethod
        def get(self, key, target_location=None, target_sizes=None): ...

        @abstractmethod
        def batch_get(self, keys, target_locations=None, target_sizes=None): ...

        @abstractmethod
        def set(self, key, value=None, target_location=None, target_sizes=None): ...

        @abstractmethod
        def batch_set(self, keys, values=None, target_locations=None, target_sizes=None): ...

        @abstractmethod
        def exists(self, key): ...

        def batch_exists(self, keys, extra_info=None):
            for i, k in enumerate(keys):
                if not self.exists(k):
                    return i
            return len(keys)

        def clear(self):
            pass

        def get_stats(self):
            return None

try:
    from sglang.srt.observability.metrics_collector import StorageMetrics
except Exception:
    try:
        from sglang.srt.metrics.collector import StorageMetrics
    except Exception:
        @dataclass
        class StorageMetrics:
            prefetch_pgs: list = field(default_factory=list)
            backup_pgs: list = field(default_factory=list)
            prefetch_bandwidth: list = field(default_factory=list)
            backup_bandwidth: list = field(default_factory=list)


def _tolist(indices):
    return indices.tolist() if hasattr(indices, "tolist") else list(indices)


# a put whose key another writer holds or stored: the page is (being) stored
_STORED = (Status.OK, Status.ERR_KEY_EXISTS, Status.ERR_KEY_BEING_WRITTEN)


class FluxonStore(HiCacheStorage):
    def __init__(self, storage_config: HiCacheStorageConfig = None, kwargs: Any = None):
        sc = storage_config
        extra = dict((getattr(sc, "extra_config", None) or {}))
        self.extra_config = extra
        self.socket = extra.get("socket") or os.environ.get("FLUXON_SOCKET")
        if not self.socket:
            raise ValueError("FluxonStore: extra_config has no \"socket\" (the local owner's unix socket) "
                             "and FLUXON_SOCKET is not set")
        if sc is not None and getattr(sc, "should_split_heads", False):
            raise ValueError("FluxonStore: should_split_heads (tp_lcm_size) is not supported")
        self._client_kw = {"cluster_id": extra.get("cluster_id", "fluxon"),
                           "cluster_token": extra.get("cluster_token"),
                           "timeout_ms": extra.get("timeout_ms"), "log_level": extra.get("log_level")}
        self.local_rank = sc.tp_rank if sc is not None else 0
        self.pp_rank = sc.pp_rank if sc is not None else 0
        self.pp_size = sc.pp_size if sc is not None else 1
        self.is_mla_backend = bool(sc.is_mla_model) if sc is not None else False
        self.enable_storage_metrics = bool(getattr(sc, "enable_storage_metrics", False))
        if self.pp_size > 1:
            self.mha_suffix, self.mla_suffix = f"{self.local_rank}_{self.pp_rank}", f"{self.pp_rank}"
        else:
            self.mha_suffix, self.mla_suffix = f"{self.local_rank}", ""
        parts = []
        if extra.get("extra_backend_tag") is not None:
            parts.append(str(extra["extra_backend_tag"]))
        if sc is not None and sc.model_name:
            parts.append("-".join(sc.model_name.split("/")))
        self.config_prefix = "_".join(parts) if parts else None
        self.mem_pool_host = None
        self.gb_per_page = None
        self.prefetch_pgs, self.backup_pgs, self.prefetch_bandwidth, self.backup_bandwidth = [], [], [], []
        self._lock = threading.Lock()
        self._client = None
        self._closed = False
        self._reconnecting = False
        self._client = self._connect()  # at start-up a missing owner is an error (raised)

    # ---- connection ----
    def _connect(self):
        return Client(self.socket, **self._client_kw)

    def _get_client(self):
        c = self._client
        if c is not None and not c.closed:
            return c
        if self._closed:
            raise FluxonError(Status.ERR_INVALID_ARGUMENT, "FluxonStore", "closed")
        self._start_reconnect()
        raise FluxonError(Status.ERR_UNAVAILABLE, "FluxonStore", f"no owner at {self.socket}; re-attaching "
                          "in the background")

    def _start_reconnect(self):
        """Re-attaches on a daemon thread (backoff 0.5 s .. 10 s): SGLang's threads never wait
        for an owner that is away; their calls answer False / 0 meanwhile."""
        with self._lock:
            if self._reconnecting or self._closed:
                return
            self._reconnecting = True

        def run():
            delay = 0.5
            while not self._closed:
                try:
                    c = self._connect()
                except Exception as e:
                    logger.debug("FluxonStore: re-attach to %s failed: %s", self.socket, e)
                    time.sleep(delay)
                    delay = min(delay * 2, 10.0)
                    continue
                with self._lock:
                    if self._closed:
                        c.close()
                    else:
                        self._client = c
                        logger.info("FluxonStore: re-attached to the owner at %s", self.socket)
                break
            with self._lock:
                self._reconnecting = False

        threading.Thread(target=run, name="fluxon-reattach", daemon=True).start()

    def _failed(self, what, e):
        logger.warning("FluxonStore %s failed: %s", what, e)
        if isinstance(e, FluxonError) and e.status in (Status.ERR_UNAVAILABLE, Status.ERR_STALE):
            with self._lock:
                c, self._client = self._client, None
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass
            self._start_reconnect()

    def close(self):
        with self._lock:
            self._closed = True
            c, self._client = self._client, None
        if c is not None:
            c.close()

    # ---- keys ----
    def _tag_keys(self, keys):
        if self.config_prefix is None:
            return list(keys)
        return [f"{self.config_prefix}_{k}" for k in keys]

    def _object_keys(self, keys):
        """(object keys, objects per page) of tagged page keys."""
        if self.is_mla_backend:
            return [f"{k}_{self.mla_suffix}_k" for k in keys], 1
        out = []
        for k in keys:
            out.append(f"{k}_{self.mha_suffix}_k")
            out.append(f"{k}_{self.mha_suffix}_v")
        return out, 2

    # ---- pool ----
    def register_mem_pool_host(self, mem_pool_host):
        super().register_mem_pool_host(mem_pool_host)
        self.mem_pool_host = mem_pool_host
        try:
            per_token = mem_pool_host.get_ksize_per_token() if hasattr(mem_pool_host, "get_ksize_per_token") else 0
            self.gb_per_page = per_token * mem_pool_host.page_size / (1 << 30) if per_token else None
        except Exception:
            self.gb_per_page = None

    def _meta(self, keys, host_indices):
        """(object keys, per-object lists of (ptr, size) pieces, objects per page)."""
        pool = self.mem_pool_host
        page_size = pool.page_size
        idx = _tolist(host_indices)
        if len(idx) != len(keys) * page_size:
            raise ValueError(f"{len(keys)} keys but {len(idx)} host indices (page_size {page_size})")
        okeys, mult = self._object_keys(self._tag_keys(keys))
        ptrs, sizes = pool.get_page_buffer_meta(host_indices)
        if isinstance(sizes, int):
            sizes = [sizes] * len(ptrs)
        if len(ptrs) == len(okeys):
            return okeys, [[(int(p), int(s))] for p, s in zip(ptrs, sizes)], mult
        if not self.is_mla_backend or len(ptrs) % len(okeys):
            raise ValueError(f"layout {getattr(pool, 'layout', '?')}: {len(ptrs)} buffers for {len(okeys)} objects "
                             "(MHA needs page_first or page_first_direct)")
        per = len(ptrs) // len(okeys)
        pieces = [[(int(ptrs[i * per + j]), int(sizes[i * per + j])) for j in range(per)] for i in range(len(okeys))]
        return okeys, pieces, mult

    # ---- v1 zero-copy batch calls ----
    def batch_set_v1(self, keys: List[str], host_indices, extra_info=None) -> List[bool]:
        n = len(keys)
        if n == 0:
            return []
        try:
            if getattr(self.mem_pool_host, "kv_buffer", True) is None:
                return [True] * n
            okeys, pieces, mult = self._meta(keys, host_indices)
            t0 = time.perf_counter()
            st = self._put_objects(okeys, pieces, mult)
            if self.enable_storage_metrics and self.gb_per_page:
                self.backup_pgs.append(n)
                self.backup_bandwidth.append(n / max(time.perf_counter() - t0, 1e-9) * self.gb_per_page)
            return [all(s in _STORED for s in st[i * mult:(i + 1) * mult]) for i in range(n)]
        except Exception as e:
            self._failed("batch_set_v1", e)
            return [False] * n

    def _put_objects(self, okeys, pieces, mult):
        c = self._get_client()
        groups = [mult] * (len(okeys) // mult) if mult > 1 else None
        if all(len(p) == 1 for p in pieces) and len({p[0][1] for p in pieces}) == 1:
            st = c.batch_put_from_ptrs(okeys, [p[0][0] for p in pieces], [p[0][1] for p in pieces],
                                       atomic_groups=groups)
        else:
            st = self._put_pieces(c, okeys, pieces, groups)
        if groups:  # a group rejected because one member exists (the other was lost): store the rest
            redo = [i for i, s in enumerate(st) if s == Status.ERR_GROUP_REJECTED and
                    any(st[j] == Status.ERR_KEY_EXISTS for j in range(i - i % mult, i - i % mult + mult))]
            if redo:
                st2 = self._put_objects_flat(c, [okeys[i] for i in redo], [pieces[i] for i in redo])
                for i, s in zip(redo, st2):
                    st[i] = s
        return st

    def _put_objects_flat(self, c, okeys, pieces):
        if all(len(p) == 1 for p in pieces) and len({p[0][1] for p in pieces}) == 1:
            return c.batch_put_from_ptrs(okeys, [p[0][0] for p in pieces], [p[0][1] for p in pieces])
        return self._put_pieces(c, okeys, pieces, None)

    @staticmethod
    def _put_pieces(c, okeys, pieces, groups):
        """Objects gathered from several buffers (MLA layer_first): one put plan, memmoves."""
        total = sum(s for _, s in pieces[0])
        if any(sum(s for _, s in p) != total for p in pieces):
            raise ValueError("objects of one batch differ in size")
        plan = c.put_start(okeys, total, atomic_groups=groups)
        try:
            for i, p in enumerate(pieces):
                dst = plan.value_ptrs[i]
                if not dst:
                    continue
                for ptr, size in p:
                    ctypes.memmove(dst, ptr, size)
                    dst += size
        except BaseException:
            plan.abort()
            raise
        st = list(plan.statuses)
        if any(s == Status.OK for s in st):
            try:
                plan.commit().wait()
            except FluxonError as e:
                st = [e.status if s == Status.OK else s for s in st]
        else:
            plan.abort()
        return st

    def batch_get_v1(self, keys: List[str], host_indices, extra_info=None) -> List[bool]:
        n = len(keys)
        if n == 0:
            return []
        try:
            if getattr(self.mem_pool_host, "kv_buffer", True) is None:
                return [True] * n
            okeys, pieces, mult = self._meta(keys, host_indices)
            t0 = time.perf_counter()
            restored = self._get_objects(okeys, pieces, mult)
            if self.enable_storage_metrics and self.gb_per_page:
                self.prefetch_pgs.append(n)
                self.prefetch_bandwidth.append(n / max(time.perf_counter() - t0, 1e-9) * self.gb_per_page)
            pages = restored // mult
            return [i < pages for i in range(n)]
        except Exception as e:
            self._failed("batch_get_v1", e)
            return [False] * n

    def _get_objects(self, okeys, pieces, mult):
        """How many leading objects were restored (whole pages)."""
        c = self._get_client()
        groups = [mult] * (len(okeys) // mult) if mult > 1 else None
        if all(len(p) == 1 for p in pieces):
            try:
                r = c.batch_get_into_ptrs(okeys, [p[0][0] for p in pieces], [p[0][1] for p in pieces],
                                          atomic_groups=groups)
            except FluxonError as e:
                r = getattr(e, "result", None)
                if r is None:
                    raise
                logger.warning("FluxonStore batch_get_v1: %s", e)
            return r.n_restored
        h = c.get_start(okeys, True, groups)
        if h.transferable_len == 0:
            h.cancel()
            return 0
        rp = h.transfer()
        try:
            for i in range(rp.count):
                if rp.value_lens[i] != sum(s for _, s in pieces[i]):
                    return i - i % mult
                src = rp.value_ptrs[i]
                for ptr, size in pieces[i]:
                    ctypes.memmove(ptr, src, size)
                    src += size
            return rp.count
        finally:
            rp.release()

    def batch_exists(self, keys: List[str], extra_info=None) -> int:
        if not keys:
            return 0
        try:
            okeys, mult = self._object_keys(self._tag_keys(keys))
            return self._get_client().batch_exists(okeys) // mult
        except Exception as e:
            self._failed("batch_exists", e)
            return 0

    # ---- the older per-key calls (raw keys, as Mooncake's) ----
    def exists(self, key) -> bool:
        try:
            return self._get_client().exists(key)
        except Exception as e:
            self._failed("exists", e)
            return False

    def set(self, key, value=None, target_location=None, target_sizes=None) -> bool:
        return self.batch_set([key], None if value is None else [value],
                              None if target_location is None else [target_location],
                              None if target_sizes is None else [target_sizes])

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None) -> bool:
        """Stores values (buffers / arrays / tensors) or, zero-copy, target_locations
        (addresses) of target_sizes bytes; True when every key is stored."""
        if not keys:
            return False
        try:
            c = self._get_client()
            if target_locations is not None and target_sizes is not None:
                st = self._put_objects_flat(c, list(keys), [[(int(p), int(s))] for p, s in
                                                            zip(target_locations, target_sizes)])
            elif values is not None:
                st = [s for k, v in zip(keys, values) for s in c.batch_put_from([k], [v])]
            else:
                return False
            return len(st) == len(keys) and all(s in _STORED for s in st)
        except Exception as e:
            self._failed("batch_set", e)
            return False

    def get(self, key, target_location=None, target_sizes=None):
        """With target_location (an address) and target_sizes: copies into it, True/False.
        Without: the value's bytes, or None when absent."""
        try:
            c = self._get_client()
            if target_location is not None and target_sizes is not None:
                return c.batch_get_into_ptrs([key], [int(target_location)], [int(target_sizes)]).n_restored == 1
            return c.get(key)
        except Exception as e:
            if not (isinstance(e, FluxonError) and e.status == Status.ERR_NOT_FOUND):
                self._failed("get", e)
            return False if target_location is not None else None

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        """Zero-copy into target_locations: the number of leading keys restored. Without
        targets: a list of bytes / None per key."""
        if not keys:
            return 0
        try:
            c = self._get_client()
            if target_locations is not None and target_sizes is not None:
                return c.batch_get_into_ptrs(list(keys), [int(p) for p in target_locations],
                                             [int(s) for s in target_sizes]).n_restored
            return [self.get(k) for k in keys]
        except Exception as e:
            self._failed("batch_get", e)
            return 0 if target_locations is not None else [None] * len(keys)

    def clear(self) -> None:
        """Deletes every key of this backend's prefix (extra_backend_tag / model name), or every
        key of the cluster when there is none (as Mooncake's remove_all)."""
        try:
            c = self._get_client()
            prefix = f"{self.config_prefix}_" if self.config_prefix else ""
            for _ in range(100000):
                ks = c.list_keys(prefix, None, 10000)
                if not ks:
                    break
                for k in ks:
                    try:
                        c.delete(k)
                    except FluxonError as e:
                        if e.status != Status.ERR_NOT_FOUND:
                            raise
        except Exception as e:
            self._failed("clear", e)

    def get_stats(self):
        m = StorageMetrics()
        m.prefetch_pgs.extend(self.prefetch_pgs)
        m.backup_pgs.extend(self.backup_pgs)
        m.prefetch_bandwidth.extend(self.prefetch_bandwidth)
        m.backup_bandwidth.extend(self.backup_bandwidth)
        self.prefetch_pgs.clear()
        self.backup_pgs.clear()
        self.prefetch_bandwidth.clear()
        self.backup_bandwidth.clear()
        return m
