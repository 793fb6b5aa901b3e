"""FluxonStore: an SGLang HiCache L3 storage backend (HiCacheStorage) over Fluxon.

SGLang loads it through its dynamic backend; docs/sglang.md is the launch guide (every
flag and every extra_config member). The short form:

    --enable-hierarchical-cache --hicache-mem-layout page_first \\
    --hicache-storage-backend dynamic \\
    --hicache-storage-backend-extra-config '{"backend_name": "fluxon",
        "module_path": "fluxon.sglang", "class_name": "FluxonStore", "interface_v1": true,
        "socket": "/run/fluxon/owner.sock", "cluster_id": "prod", "cluster_token": "..."}'

Both of SGLang's paths work and name the same objects: with "interface_v1" SGLang calls
batch_set_v1 / batch_get_v1 (host page indices: the bytes move in C between the host
pool and the owner's segment, no copy in Python); without it, batch_set(keys, flat pages)
and batch_get(keys, flat destination pages) — one copy more, the same keys, so a page
stored by one path is found and restored by the other.

Keys (fluxon/sglang_keys.py): <namespace>_<page hash>_<part>_<tp_rank>_<tp_size>, the
namespace a digest of the model, dtype, page size, byte order and MLA, so deployments
never read each other's pages; the "_<rank>_<size>" suffix is the TP cohort grammar of
include/fluxon.h. A page's objects (MHA K and V) are one atomic group: stored together or
not at all, restored together or not at all. A stored value that is not exactly the page
object's length is a miss (fluxon_batch_get_into compares lengths).

Prefetches are bounded (fluxon/sglang_prefetch.py): each restore looks its pages up,
takes at most prefetch_max_pages from this store's budget, and pins and moves only those;
pages beyond the cap are reported not restored, so a burst never pins the owner's memory.

Failures never raise into SGLang's prefetch/backup threads (they are never restarted):
they become False entries / 0 hits; a lost owner is re-attached on a later call. Every
host address the backend is handed (get_page_buffer_meta's, or raw target_locations) is
checked against the host pool's buffers before C or memmove touches it: a page outside
them is refused (False), never a crash.
"""
import bisect
import ctypes
import logging
import numbers
import os
import threading
import time
from typing import Any, List

from ._buf import _itemsize, address_of
from ._sglang_compat import (HAVE_SGLANG, HiCacheStorage, HiCacheStorageConfig, HiCacheStorageExtraInfo,
                             StorageMetrics)
from .client import Client
from .errors import FluxonError, Status, error_for
from .sglang_keys import KeySpace
from .sglang_prefetch import PrefetchBudget
from .sglang_replica import ReplicaAdmission

__all__ = ["FluxonStore", "HAVE_SGLANG", "HiCacheStorage", "HiCacheStorageConfig", "HiCacheStorageExtraInfo",
           "StorageMetrics", "SGLANG_MEMBERS", "FLUXON_MEMBERS"]

try:
    import numpy as np
except ImportError:  # SGLang always has numpy; without it the range check is plain Python
    np = None

logger = logging.getLogger(__name__)

# extra_config members: SGLang's dynamic loader's, SGLang's own (popped before the backend
# sees them in the pinned revision, accepted here too), and this backend's.
SGLANG_MEMBERS = ("backend_name", "module_path", "class_name", "interface_v1", "tp_lcm_size",
                  "prefetch_threshold", "prefetch_timeout_base", "prefetch_timeout_per_ki_token",
                  "prefetch_timeout_max", "hicache_storage_pass_prefix_keys")
FLUXON_MEMBERS = ("socket", "cluster_id", "cluster_token", "timeout_ms", "log_level", "extra_backend_tag",
                  "replica_task", "prefetch_max_pages", "prefetch_wait_ms", "disk_prefetch")


def _key_count(keys):
    """len(keys), or None when keys is not a sized sequence (None, an int)."""
    try:
        return len(keys)
    except TypeError:
        return None


def _tolist(indices):
    return indices.tolist() if hasattr(indices, "tolist") else list(indices)


_UNSEEN = object()


def _host_span(buf):
    """[low, high) of the bytes a host array (__array_interface__) or CPU tensor (data_ptr())
    spans, its strides followed; None for device memory, an empty buffer or another kind."""
    try:
        ai = getattr(buf, "__array_interface__", None)
        if ai is not None:
            ptr, shape, item = int(ai["data"][0] or 0), [int(d) for d in ai["shape"]], _itemsize(ai["typestr"])
            strides = ai.get("strides")
            if strides is None:  # C-contiguous
                strides, st = [], item
                for d in reversed(shape):
                    strides.insert(0, st)
                    st *= d
        elif callable(getattr(buf, "data_ptr", None)):
            dev = getattr(buf, "device", None)
            if dev is not None and getattr(dev, "type", str(dev)) != "cpu":
                return None
            ptr, shape, item = int(buf.data_ptr()), [int(d) for d in buf.shape], int(buf.element_size())
            strides = [int(x) * item for x in buf.stride()]
        else:
            return None
    except Exception:
        return None
    if not ptr or any(d <= 0 for d in shape):
        return None
    lo = ptr + sum((d - 1) * int(x) for d, x in zip(shape, strides) if int(x) < 0)
    hi = ptr + sum((d - 1) * int(x) for d, x in zip(shape, strides) if int(x) > 0) + item
    return lo, hi


def _pool_ranges(pool):
    """The host pool's buffers (kv_buffer, and k_buffer / v_buffer, the NSA indexer's
    index_k_with_scale_buffer and get_hybrid_pool_buffer() where a pool has them: a tensor or
    array, or lists of them) as sorted, merged [low, high) address ranges."""
    spans = []
    for name in ("kv_buffer", "k_buffer", "v_buffer", "index_k_with_scale_buffer", "get_hybrid_pool_buffer"):
        try:
            b = getattr(pool, name, None)
            if name == "get_hybrid_pool_buffer" and callable(b):
                b = b()
        except Exception:
            continue
        for x in (b if isinstance(b, (list, tuple)) else [b]):
            sp = None if x is None else _host_span(x)
            if sp:
                spans.append(sp)
    merged = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def _bool(extra, name, default=False):
    v = extra.get(name, default)
    if isinstance(v, bool) or v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "false", "1", "0"):
        return v.lower() in ("true", "1")
    raise ValueError(f"FluxonStore: extra_config[{name!r}] is {v!r}: a boolean (true/false) is expected")


class FluxonStore(HiCacheStorage):
    def __init__(self, storage_config: HiCacheStorageConfig = None, kwargs: Any = None):
        sc = storage_config if storage_config is not None else HiCacheStorageConfig()
        extra = dict(getattr(sc, "extra_config", None) or {})
        self.extra_config = extra
        unknown = sorted(k for k in extra if k not in SGLANG_MEMBERS + FLUXON_MEMBERS)
        if unknown:
            logger.warning("FluxonStore: extra_config members %s are not known and are ignored (known: %s)",
                           unknown, ", ".join(SGLANG_MEMBERS + FLUXON_MEMBERS))
        self.socket = extra.get("socket") or os.environ.get("FLUXON_SOCKET")
        if not self.socket:
            raise ValueError("FluxonStore: extra_config has no \"socket\" (the local owner's unix socket) "
                             "and FLUXON_SOCKET is not set")
        if getattr(sc, "should_split_heads", False):
            raise ValueError("FluxonStore: should_split_heads (extra_config tp_lcm_size with layout page_head) "
                             "is not supported: leave tp_lcm_size out")
        self.interface_v1 = _bool(extra, "interface_v1")
        self.disk_prefetch = _bool(extra, "disk_prefetch", True)
        self.replica = ReplicaAdmission(extra.get("replica_task"))
        self.prefetch_budget = PrefetchBudget.from_extra(extra)  # fluxon/sglang_prefetch.py
        self.on_prefetch_granted = None  # called with the pages granted, before they are pinned (tests)
        timeout_ms = extra.get("timeout_ms")
        if timeout_ms is not None and (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int)
                                       or not 0 < timeout_ms <= 3_600_000):
            raise ValueError(f"FluxonStore: extra_config['timeout_ms'] is {timeout_ms!r}: an int in 1..3600000")
        self._client_kw = {"cluster_id": extra.get("cluster_id", "fluxon"),
                           "cluster_token": extra.get("cluster_token"),
                           "timeout_ms": timeout_ms, "log_level": extra.get("log_level")}
        self.tag = None if extra.get("extra_backend_tag") is None else str(extra["extra_backend_tag"])
        self.model_name = sc.model_name
        self.tp_rank, self.tp_size = int(sc.tp_rank), int(sc.tp_size)
        self.pp_rank, self.pp_size = int(getattr(sc, "pp_rank", 0)), int(getattr(sc, "pp_size", 1))
        self.attn_cp_rank = int(getattr(sc, "attn_cp_rank", 0))
        self.attn_cp_size = int(getattr(sc, "attn_cp_size", 1))
        self.is_mla_backend = bool(sc.is_mla_model)
        self.enable_storage_metrics = bool(getattr(sc, "enable_storage_metrics", False))
        self.keys = None  # the KeySpace, once the host pool is registered (its dtype, layout, sizes)
        self.mem_pool_host = None
        self.object_bytes = None  # one object of one page (MHA: K or V; MLA: the page)
        self.prefetch_pgs, self.backup_pgs, self.prefetch_bandwidth, self.backup_bandwidth = [], [], [], []
        self._warned = set()
        self._host = (_UNSEEN, (), None, None)  # (the buffers seen, their ranges, lows, highs): _host_ranges
        self.out_of_pool_refusals = 0  # pages refused: an address outside the host pool's buffers
        self._lock = threading.Lock()
        self._tls = threading.local()  # the client the calling thread's call uses (_get_client)
        self._fail_log = {}  # call kind -> (time of its last warning, failures not logged since)
        self._client = None
        self._closed = False
        self._reconnecting = False
        self._client = self._connect()  # at start-up a missing owner is an error (raised)

    # ---- connection ----
    def _connect(self):
        return Client(self.socket, **self._client_kw)

    def _get_client(self):
        c = self._client
        # the client this thread's call uses: _failed closes that one only (it closed the
        # current one, which the re-attach thread may just have set: 78 re-attaches a
        # second after an owner's kill -9, a new user's finding, session 39)
        self._tls.client = c if c is not None and not c.closed else None
        if c is not None and not c.closed:
            return c
        if self._closed:
            raise error_for(Status.ERR_INVALID_ARGUMENT, "FluxonStore", "closed")
        self._start_reconnect()
        raise error_for(Status.ERR_UNAVAILABLE, "FluxonStore", f"no owner at {self.socket}; re-attaching "
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
                    keep = not self._closed and (self._client is None or self._client.closed)
                    if keep:
                        self._client = c
                if keep:
                    logger.info("FluxonStore: re-attached to the owner at %s", self.socket)
                else:  # closed meanwhile
                    c.close()
                break
            with self._lock:
                self._reconnecting = False

        threading.Thread(target=run, name="fluxon-reattach", daemon=True).start()

    def _failed(self, what, e):
        self._log_failure(what, e)
        used = getattr(self._tls, "client", None)
        self._tls.client = None
        if isinstance(e, FluxonError) and e.status in (Status.ERR_UNAVAILABLE, Status.ERR_STALE):
            with self._lock:
                c = self._client if used is not None and self._client is used else None
                if c is not None:
                    self._client = None
                lost = self._client is None or self._client.closed
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass
            if lost:  # a client another thread re-attached meanwhile stays
                self._start_reconnect()

    _FAIL_LOG_S = 10.0

    def _log_failure(self, what, e):
        """A warning per call kind at most every 10 s, with how many failed since (an owner
        away made every call log one: 80,000 lines in 2 s)."""
        now = time.monotonic()
        with self._lock:
            last, quiet = self._fail_log.get(what, (None, 0))
            if last is not None and now - last < self._FAIL_LOG_S:
                self._fail_log[what] = (last, quiet + 1)
                return
            self._fail_log[what] = (now, 0)
        more = f" ({quiet} more failed in the last {now - last:.0f} s, not logged)" if quiet else ""
        logger.warning("FluxonStore %s failed: %s%s", what, e, more)

    def _warn_once(self, what, msg):
        if what not in self._warned:
            self._warned.add(what)
            logger.warning("FluxonStore: %s", msg)

    def close(self):
        with self._lock:
            self._closed = True
            c, self._client = self._client, None
        if c is not None:
            c.close()

    # ---- pool and keys ----
    def register_mem_pool_host(self, mem_pool_host):
        if getattr(mem_pool_host, "kv_buffer", True) is None:
            raise ValueError("FluxonStore: the host pool has no kv_buffer (a hybrid model's logical anchor pool: "
                             "Mamba, SWA, DSA); its pages move through the v2 calls, which FluxonStore does not "
                             "implement")
        super().register_mem_pool_host(mem_pool_host)
        self.mem_pool_host = mem_pool_host
        layer_num = int(mem_pool_host.layer_num)
        ksize = int(mem_pool_host.get_ksize_per_token())  # one object, one token, every layer of this rank
        self.object_bytes = ksize * int(mem_pool_host.page_size)
        self.keys = KeySpace(model=self.model_name, dtype=mem_pool_host.dtype, page_size=mem_pool_host.page_size,
                             layout=mem_pool_host.layout, mla=self.is_mla_backend, row_bytes=ksize // layer_num,
                             tp_rank=self.tp_rank, tp_size=self.tp_size, pp_rank=self.pp_rank, pp_size=self.pp_size,
                             attn_cp_rank=self.attn_cp_rank, attn_cp_size=self.attn_cp_size, tag=self.tag)
        logger.info("FluxonStore: rank %d/%d keys %s<page hash>_%s (%d B per object, %s)", self.tp_rank,
                    self.tp_size, self.keys.prefix(), "|".join(self.keys.parts), self.object_bytes, self.keys.fields)
        if not self._host_ranges()[0]:
            logger.warning("FluxonStore: the host pool's kv_buffer (%s) has no host address range FluxonStore "
                           "can read (not a CPU tensor or array): batch_set_v1 / batch_get_v1 will answer False",
                           type(getattr(mem_pool_host, "kv_buffer", None)).__name__)

    def _host_ranges(self):
        """(ranges, lows, highs) of the registered host pool's buffers: learnt at registration,
        learnt again when the pool's kv_buffer, k_buffer or v_buffer is another object (three
        identity tests a call)."""
        pool = self.mem_pool_host
        kvb = (getattr(pool, "kv_buffer", None), getattr(pool, "k_buffer", None), getattr(pool, "v_buffer", None))
        h = self._host
        if h[0] is _UNSEEN or any(x is not y for x, y in zip(h[0], kvb)):
            r = _pool_ranges(pool) if pool is not None else ()
            lows = highs = None
            if np is not None and r:
                lows, highs = np.array([a for a, _ in r], np.int64), np.array([b for _, b in r], np.int64)
            h = self._host = (kvb, r, lows, highs)
        return h[1:]

    def _outside(self, ptrs, sizes):
        """Positions of the (address, length) pieces not wholly inside one buffer of the host
        pool ([] when every one is): vectorized, it runs on every batch."""
        ranges, lows, highs = self._host_ranges()
        if not ranges:
            return list(range(len(ptrs)))
        if len(ranges) == 1 and isinstance(ptrs, (list, tuple)) and isinstance(sizes, (list, tuple)) and ptrs:
            # SGLang's case: lists, one buffer, one size. min/max over a list (C loops) beat
            # converting it to an array: about 2 us for 128 pieces, 13 us for 1024.
            s0 = sizes[0]
            try:
                if s0 >= 0 and sizes.count(s0) == len(sizes) and min(ptrs) >= ranges[0][0] and \
                        max(ptrs) <= ranges[0][1] - s0:
                    return []
            except TypeError:
                pass  # not integers: the checks below decide (and raise: the call answers False)
        if lows is not None:
            try:
                p = np.asarray(ptrs, dtype=np.int64)
                s = np.asarray(sizes, dtype=np.int64)
            except (OverflowError, TypeError, ValueError):  # an address past int64: the exact check below
                pass
            else:
                if len(ranges) == 1:
                    lo, hi = ranges[0]
                    ok = (p >= lo) & (p <= hi) & (s >= 0) & (s <= hi - p)
                else:
                    k = np.searchsorted(lows, p, "right") - 1
                    hk = highs[np.maximum(k, 0)]
                    ok = (k >= 0) & (p <= hk) & (s >= 0) & (s <= hk - p)
                return [] if ok.all() else np.flatnonzero(~ok).tolist()
        starts = [a for a, _ in ranges]
        bad = []
        for i, (p, s) in enumerate(zip(ptrs, sizes)):
            p, s = int(p), int(s)
            k = bisect.bisect_right(starts, p) - 1
            if k < 0 or s < 0 or p + s > ranges[k][1]:
                bad.append(i)
        return bad

    def _refuse(self, what, pages, desc):
        """Logs a refusal of pages outside the host pool (the first one at warning, once)."""
        self.out_of_pool_refusals += len(pages)
        ranges = self._host_ranges()[0]
        bounds = ", ".join(f"[{lo:#x}, {hi:#x}) ({hi - lo} B)" for lo, hi in ranges) or "none known"
        msg = (f"FluxonStore {what}: {desc} is outside the host pool's buffer(s) {bounds}; {len(pages)} "
               f"page(s) of this call refused (False), nothing read or written there (later refusals are "
               f"logged at debug)")
        if "out-of-pool" in self._warned:
            logger.debug("%s", msg)
        else:
            self._warned.add("out-of-pool")
            logger.warning("%s", msg)

    def _keyspace(self):
        if self.keys is None:
            raise ValueError("FluxonStore: no host pool registered yet (register_mem_pool_host names the keys: "
                             "dtype, page size and layout are part of them)")
        return self.keys

    def object_keys(self, page_hashes):
        """The Fluxon keys of pages (what SGLang calls keys: page hashes), page by page."""
        return self._keyspace().object_keys(page_hashes)

    @property
    def page_bytes(self):
        """Bytes of one page on this rank (every object: MHA K and V)."""
        return self.object_bytes * self._keyspace().per_page

    def _meta(self, keys, host_indices, what="batch_*_v1"):
        """(object keys, per-object lists of (ptr, size) pieces, pages refused) of pages at host
        indices; a page is refused when one of its buffers is not inside the host pool's."""
        pool = self.mem_pool_host
        if pool is None:
            self._keyspace()
        if getattr(pool, "kv_buffer", True) is None:
            raise ValueError("the host pool has no kv_buffer (a hybrid pool's logical anchor): its pages are "
                             "moved by the v2 calls, which FluxonStore does not implement")
        page_size = pool.page_size
        idx = _tolist(host_indices)
        if len(idx) != len(keys) * page_size:
            raise ValueError(f"{len(keys)} keys but {len(idx)} host indices (page_size {page_size})")
        bad = next((i for i, k in enumerate(keys) if not isinstance(k, str)), None)
        if bad is not None:  # str(None) would have been stored as the page hash "None"
            raise TypeError(f"key {bad} is {keys[bad]!r} ({type(keys[bad]).__name__}), not a page hash string")
        okeys = self.object_keys(keys)
        m = self.keys.per_page
        ptrs, sizes = pool.get_page_buffer_meta(host_indices)
        if isinstance(sizes, numbers.Integral):
            sizes = [sizes] * len(ptrs)
        per = len(ptrs) // len(keys) if keys else 0
        if per * len(keys) != len(ptrs) or per % m:
            raise ValueError(f"layout {getattr(pool, 'layout', '?')}: {len(ptrs)} buffers for {len(keys)} pages "
                             f"of {m} objects")
        outside = self._outside(ptrs, sizes)
        refused = sorted({i // per for i in outside})
        if refused:
            b, p = outside[0], outside[0] // per
            self._refuse(what, refused, f"page {p} (key {keys[p]!r}, host index {idx[p * page_size]}): buffer "
                                        f"{int(ptrs[b]):#x} of {int(sizes[b])} B")
        # per page: per buffers; object o's pieces are o, o + m, o + 2m, ... (layer_first MHA
        # interleaves K and V layer by layer; page_first has one buffer per object)
        pieces = [[(int(ptrs[p * per + j]), int(sizes[p * per + j])) for j in range(o, per, m)]
                  for p in range(len(keys)) for o in range(m)]
        for i, pc in enumerate(pieces):
            if sum(s for _, s in pc) != self.object_bytes:
                raise ValueError(f"object {okeys[i]}: its buffers hold {sum(s for _, s in pc)} bytes, a page "
                                 f"object is {self.object_bytes}")
        return okeys, pieces, refused

    def _flat_meta(self, keys, pages, writable, what="batch_*"):
        """(object keys, pieces, keepalive, pages refused) of flat pages (SGLang's get_data_page /
        get_dummy_flat_data_page: every object of a page, K then V), or of (address, size)
        pairs. A flat page may have another size than the registered pool's: SGLang's
        generic draft-model calls (keys "<hash>.draft", the draft pool's pages) come here
        too; a restore still needs a value of exactly the destination's object length.
        An (address, size) pair is raw memory: it is refused unless inside the host pool's
        buffers (a tensor or array is its own memory and is used as it is)."""
        okeys = self.object_keys(keys)
        m = self.keys.per_page
        pieces, keep, raw = [], [], []
        for i, pg in enumerate(pages):
            if isinstance(pg, tuple):
                addr, n = int(pg[0]), int(pg[1])
                raw.append(i)
            else:
                addr, n, kp = address_of(pg, writable, f"page {i}")
                keep.append(kp)
            if n == 0 or n % m:
                raise ValueError(f"page {i} ({keys[i]}): {n} bytes is not {m} equal objects (a page on this "
                                 f"rank is {m} objects of {self.object_bytes} bytes)")
            ob = n // m
            pieces.extend([[(addr + o * ob, ob)] for o in range(m)])
        refused = []
        if raw:
            outside = self._outside([pieces[i * m][0][0] for i in raw], [pieces[i * m][0][1] * m for i in raw])
            refused = [raw[j] for j in outside]
            if refused:
                p = refused[0]
                self._refuse(what, refused, f"page {p} (key {keys[p]!r}): address {pieces[p * m][0][0]:#x} of "
                                            f"{pieces[p * m][0][1] * m} B")
        return okeys, pieces, keep, refused

    def _only(self, okeys, pieces, pages):
        """The object keys and pieces of some pages only."""
        m = self.keys.per_page
        sel = [p * m + o for p in pages for o in range(m)]
        return [okeys[i] for i in sel], [pieces[i] for i in sel]

    # ---- storing ----
    def _stored(self, st, n):
        """Per page: True when each of its objects is stored (OK) or was already (KEY_EXISTS).
        KEY_BEING_WRITTEN (another writer's put in flight) is not stored yet."""
        m = self.keys.per_page
        return [all(s in (Status.OK, Status.ERR_KEY_EXISTS) for s in st[i * m:(i + 1) * m]) for i in range(n)]

    def _record(self, kind, n, t0):
        if not self.enable_storage_metrics or not n:
            return
        gb = n * self.page_bytes / (1 << 30)
        bw = gb / max(time.perf_counter() - t0, 1e-9)
        if kind == "backup":
            self.backup_pgs.append(n)
            self.backup_bandwidth.append(bw)
        else:
            self.prefetch_pgs.append(n)
            self.prefetch_bandwidth.append(bw)

    def batch_set_v1(self, keys: List[str], host_indices, extra_info=None) -> List[bool]:
        n = _key_count(keys)
        if n is None:  # nothing raises into SGLang's threads
            self._log_failure("batch_set_v1", TypeError(f"keys must be a list of page hash strings, not {type(keys).__name__}"))
            return []
        if n == 0:
            return []
        try:
            okeys, pieces, refused = self._meta(keys, host_indices, "batch_set_v1")
            replicate = self.replica.admit(self.keys.namespace, keys, extra_info)  # the call's, as every rank's
            if not refused:
                t0 = time.perf_counter()
                ok = self._stored(self._put_objects(okeys, pieces, replicate), n)
                self._record("backup", n, t0)
                return ok
            ok, bad = [False] * n, set(refused)  # the pages inside the pool are stored, the others False
            good = [p for p in range(n) if p not in bad]
            if good:
                t0 = time.perf_counter()
                okeys, pieces = self._only(okeys, pieces, good)
                for p, s in zip(good, self._stored(self._put_objects(okeys, pieces, replicate), len(good))):
                    ok[p] = s
                self._record("backup", len(good), t0)
            return ok
        except Exception as e:
            self._failed("batch_set_v1", e)
            return [False] * n

    def _put_objects(self, okeys, pieces, replicate):
        c = self._get_client()
        m = self.keys.per_page
        groups = [m] * (len(okeys) // m) if m > 1 else None
        st = self._put(c, okeys, pieces, groups, replicate)
        if groups:  # a group rejected because one member exists (the other was lost): store the rest
            redo = [i for i, s in enumerate(st) if s == Status.ERR_GROUP_REJECTED and
                    any(st[j] == Status.ERR_KEY_EXISTS for j in range(i - i % m, i - i % m + m))]
            if redo:
                st2 = self._put(c, [okeys[i] for i in redo], [pieces[i] for i in redo], None, replicate)
                for i, s in zip(redo, st2):
                    st[i] = s
        return st

    def _put(self, c, okeys, pieces, groups, replicate):
        if all(len(p) == 1 for p in pieces):
            return c.batch_put_from_ptrs(okeys, [p[0][0] for p in pieces], [p[0][1] for p in pieces],
                                         atomic_groups=groups, make_replica_task=replicate)
        return self._put_pieces(c, okeys, pieces, groups, replicate)

    def _put_pieces(self, c, okeys, pieces, groups, replicate):
        """Objects gathered from several buffers (layer_first): one put plan, memmoves."""
        plan = c.put_start(okeys, self.object_bytes, atomic_groups=groups, make_replica_task=replicate)
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

    # ---- restoring ----
    def batch_get_v1(self, keys: List[str], host_indices, extra_info=None) -> List[bool]:
        n = _key_count(keys)
        if n is None:  # nothing raises into SGLang's threads
            self._log_failure("batch_get_v1", TypeError(f"keys must be a list of page hash strings, not {type(keys).__name__}"))
            return []
        if n == 0:
            return []
        try:
            okeys, pieces, refused = self._meta(keys, host_indices, "batch_get_v1")
            t0 = time.perf_counter()
            k = refused[0] * self.keys.per_page if refused else len(okeys)  # the pages before a refused one
            pages = self._get_objects(okeys[:k], pieces[:k]) // self.keys.per_page if k else 0
            self._record("prefetch", pages, t0)
            return [i < pages for i in range(n)]
        except Exception as e:
            self._failed("batch_get_v1", e)
            return [False] * n

    def _get_objects(self, okeys, pieces):
        """How many leading objects were restored (whole pages; a value that is not exactly
        an object's length stops the prefix before its page). The plan of
        fluxon/sglang_prefetch.py: look up (nothing pinned), decide (the pages the prefetch
        budget grants), pin and move those only, give the budget back."""
        c = self._get_client()
        m = self.keys.per_page
        found = c.batch_exists(okeys) // m  # 1. look up
        if found == 0:
            return 0
        granted = self.prefetch_budget.take(found)  # 2. decide
        if granted < found:
            logger.info("FluxonStore prefetch: %d of %d pages found refused (prefetch_max_pages %d held by "
                        "in-flight prefetches; %d refused so far)", found - granted, found,
                        self.prefetch_budget.max_pages, self.prefetch_budget.refused)
        if granted == 0:
            return 0
        try:
            if self.on_prefetch_granted is not None:
                self.on_prefetch_granted(granted)
            k = granted * m
            return self._pin_and_move(c, okeys[:k], pieces[:k])  # 3. pin, 4. move
        finally:
            self.prefetch_budget.give(granted)

    def _pin_and_move(self, c, okeys, pieces):
        m = self.keys.per_page
        groups = [m] * (len(okeys) // m) if m > 1 else None
        if all(len(p) == 1 for p in pieces):
            try:
                r = c.batch_get_into_ptrs(okeys, [p[0][0] for p in pieces], [p[0][1] for p in pieces],
                                          atomic_groups=groups)
            except FluxonError as e:
                r = getattr(e, "result", None)
                if r is None:
                    raise
                logger.warning("FluxonStore batch_get: %s", e)
            return r.n_restored - r.n_restored % m
        h = c.get_start(okeys, True, groups)
        if h.transferable_len == 0:
            h.cancel()
            return 0
        rp = h.transfer()
        try:
            good = rp.count - rp.count % m
            for i in range(rp.count):
                if rp.value_lens[i] != self.object_bytes:
                    logger.warning("FluxonStore batch_get: %s holds %d bytes, a page object is %d: a miss",
                                   okeys[i], rp.value_lens[i], self.object_bytes)
                    good = i - i % m
                    break
            for i in range(good):
                src = rp.value_ptrs[i]
                for ptr, size in pieces[i]:
                    ctypes.memmove(ptr, src, size)
                    src += size
            return good
        finally:
            rp.release()

    def batch_exists(self, keys: List[str], extra_info=None) -> int:
        if not keys:
            return 0
        try:
            okeys = self.object_keys(keys)
            client = self._get_client()
            found = client.batch_exists(okeys)
            if found and self.disk_prefetch:  # SGLang reads them soon: disk-resident ones start now
                try:
                    client.prefetch(okeys[:found])
                except FluxonError:  # a hint: dropped (the owner is behind), the answer stands
                    pass
            return found // self.keys.per_page
        except Exception as e:
            self._failed("batch_exists", e)
            return 0

    # ---- the generic path (SGLang without interface_v1): flat pages, the same keys ----
    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None) -> bool:
        """Stores flat pages (SGLang's get_data_page: tensors, arrays, buffers), or pages at
        target_locations (addresses) of target_sizes bytes, under the same objects as
        batch_set_v1. True when every page is stored."""
        if not keys:
            return False
        try:
            if values is not None:
                pages = list(values)
            elif target_locations is not None and target_sizes is not None:
                pages = [(int(p), int(s)) for p, s in zip(target_locations, target_sizes)]
            else:
                return False
            if len(pages) != len(keys):
                raise ValueError(f"{len(keys)} keys but {len(pages)} pages")
            okeys, pieces, keep, refused = self._flat_meta(list(keys), pages, False, "batch_set")
            replicate = self.replica.admit(self.keys.namespace, list(keys), None)
            good = range(len(keys))
            if refused:
                bad = set(refused)
                good = [p for p in good if p not in bad]
                okeys, pieces = self._only(okeys, pieces, good)
            ok = [False]
            if good:
                t0 = time.perf_counter()
                ok = self._stored(self._put_objects(okeys, pieces, replicate), len(good))
                self._record("backup", len(good), t0)
            del keep
            return all(ok) and not refused
        except Exception as e:
            self._failed("batch_set", e)
            return False

    def set(self, key, value=None, target_location=None, target_sizes=None) -> bool:
        return self.batch_set([key], None if value is None else [value],
                              None if target_location is None else [target_location],
                              None if target_sizes is None else [target_sizes])

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        """Restores the leading pages of keys, as batch_get_v1 but into flat pages.
        target_locations of tensors / arrays / buffers (SGLang's get_dummy_flat_data_page)
        or none: a list with each restored page (the destination given, else a new one from
        the pool's get_dummy_flat_data_page or a bytearray) and None past the first miss.
        target_locations of addresses with target_sizes: the number of leading pages."""
        n = len(keys) if keys else 0
        addresses = target_locations is not None and target_sizes is not None and n and \
            isinstance(target_locations[0], numbers.Integral)
        if n == 0:
            return 0 if addresses else []
        try:
            if addresses:
                dst = [(int(p), int(s)) for p, s in zip(target_locations, target_sizes)]
            elif target_locations is not None:
                dst = list(target_locations)
            else:
                mk = getattr(self.mem_pool_host, "get_dummy_flat_data_page", None)
                dst = [mk() if mk else bytearray(self.page_bytes) for _ in range(n)]
            if len(dst) != n:
                raise ValueError(f"{n} keys but {len(dst)} destinations")
            okeys, pieces, keep, refused = self._flat_meta(list(keys), dst, True, "batch_get")
            t0 = time.perf_counter()
            k = refused[0] * self.keys.per_page if refused else len(okeys)  # the pages before a refused one
            pages = self._get_objects(okeys[:k], pieces[:k]) // self.keys.per_page if k else 0
            del keep
            self._record("prefetch", pages, t0)
            return pages if addresses else [dst[i] if i < pages else None for i in range(n)]
        except Exception as e:
            self._failed("batch_get", e)
            return 0 if addresses else [None] * n

    def get(self, key, target_location=None, target_sizes=None):
        if target_location is not None and target_sizes is not None and isinstance(target_location, numbers.Integral):
            return self.batch_get([key], [target_location], [target_sizes]) == 1
        return self.batch_get([key], None if target_location is None else [target_location])[0]

    def exists(self, key) -> bool:
        return self.batch_exists([key]) == 1

    # ---- housekeeping ----
    def clear(self) -> None:
        """Deletes every key of this deployment's namespace (every rank's: SGLang calls it on
        each rank, a key another rank deleted first is skipped), never another's."""
        try:
            c = self._get_client()
            prefix = self._keyspace().prefix()
            after = None
            for _ in range(1_000_000):
                ks = c.list_keys(prefix, after, 10000)
                if not ks:
                    break
                for k in ks:
                    try:
                        c.delete(k)
                    except FluxonError as e:
                        if e.status != Status.ERR_NOT_FOUND:
                            raise
                after = ks[-1]
        except Exception as e:
            self._failed("clear", e)

    def get_stats(self):
        """StorageMetrics of the calls since the last get_stats (pages and GB/s, K and V
        bytes both counted), or None when storage metrics are off."""
        if not self.enable_storage_metrics:
            return None
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
