"""Client: an external client of one owner (fluxon_client_* and the KV / hostless / batch
calls of include/fluxon.h), with the plan objects of the hostless API.

Threads: a Client may be used from several threads (the C library is thread-safe and
ctypes releases the GIL during calls); a plan, handle or future belongs to the thread
that uses it. Lifetime: close() (or leaving the `with` block) releases every plan,
handle and view the client still has; their views raise ValueError afterwards.
"""
import asyncio
import ctypes
import json
import sys
import threading
import weakref

from . import _lib
from ._buf import address_of
from ._lib import lib
from .errors import FluxonError, Status, Busy, WrongHandle, check, error_for, to_status

_STATUS = {int(s): s for s in Status}

_U64P = ctypes.POINTER(ctypes.c_uint64)


def _key(k, i=None):
    where = "key" if i is None else f"keys[{i}]"
    if isinstance(k, str):
        k = k.encode("utf-8", "surrogateescape")  # list_keys' str of a non-UTF-8 key round-trips
    elif not isinstance(k, (bytes, bytearray)):
        raise TypeError(f"{where}: a key is str or bytes, not {type(k).__name__}")
    if not k or len(k) > 1024 or b"\0" in k:
        raise ValueError(f"{where}: a key is 1..1024 bytes without NUL (got {len(k)} bytes)")
    return bytes(k)


def _key_part(v, what):
    """A prefix or a key to list after (str or bytes, may be empty; None: empty) as bytes."""
    if v is None:
        return b""
    if isinstance(v, str):
        v = v.encode("utf-8", "surrogateescape")
    elif not isinstance(v, (bytes, bytearray)):  # bytes(5) would be five NUL bytes
        raise TypeError(f"{what}: str or bytes, not {type(v).__name__}")
    if len(v) > 1024 or b"\0" in v:
        raise ValueError(f"{what}: at most 1024 bytes without NUL (got {len(v)} bytes)")
    return bytes(v)


def _keys(keys):
    if isinstance(keys, (str, bytes)):
        raise TypeError("keys: a sequence of keys, not one key")
    if not isinstance(keys, (list, tuple)):
        keys = list(keys)  # an iterator is read once: both paths below need every key
    try:  # the fast path: every key a str, checked in bulk
        enc = [k.encode("utf-8", "surrogateescape") for k in keys]
        ok = enc and 0 < min(map(len, enc)) and max(map(len, enc)) <= 1024 and b"\0" not in b"".join(enc)
    except (AttributeError, TypeError):
        ok = False
    if not ok:  # the slow path names the offending key
        enc = [_key(k, i) for i, k in enumerate(keys)]
        if not enc:
            raise ValueError("keys: a batch has at least one key")
    return enc, (ctypes.c_char_p * len(enc))(*enc)


def _get_copy(c, k):
    """fluxon_get, a copy of the holder's bytes, its release: one call on client c."""
    h = ctypes.c_void_p()
    check(lib.fluxon_get(c, k, ctypes.byref(h)), "get", f"key {k!r}")
    try:
        return ctypes.string_at(lib.fluxon_holder_data(h), lib.fluxon_holder_len(h))
    finally:
        lib.fluxon_holder_release(h)


def _statuses(arr):
    """A ctypes int array of statuses as a list of Status."""
    v = arr[:]
    if not any(v):
        return [Status.OK] * len(v)
    return [_STATUS.get(s, s) for s in v]


def _groups(groups, n):
    if groups is None:
        return None, 0
    g = [int(x) for x in groups]
    if not g or any(x <= 0 for x in g) or sum(g) != n:
        raise ValueError(f"atomic_groups {g}: lengths > 0 summing to the {n} keys")
    return (ctypes.c_uint32 * len(g))(*g), len(g)


def _options(atomic_groups=None, n=0, write_through=False, lease_id=None, preferred_sub_cluster=None,
             local_first=False, reject_if_exists=False, reject_if_inflight=False, make_replica_task=False,
             make_replica_task_mask=None, pin_ttl_ms=0, pin_refresh_on_hit=False):
    o = _lib.PutOptions()
    keep = []
    if pin_ttl_ms:  # issue 42: pinned on this client's owner once published
        if isinstance(pin_ttl_ms, bool) or not isinstance(pin_ttl_ms, int) or not 0 < pin_ttl_ms <= _lib.PIN_TTL_MAX_MS:
            raise ValueError(f"pin_ttl_ms {pin_ttl_ms!r}: an int in 1..{_lib.PIN_TTL_MAX_MS}")
        o.field_mask |= _lib.OPT_PIN_TTL
        o.pin_ttl_ms = pin_ttl_ms
        if pin_refresh_on_hit:
            o.field_mask |= _lib.OPT_PIN_REFRESH_ON_HIT
            o.pin_refresh_on_hit = 1
    if make_replica_task or make_replica_task_mask is not None:
        o.field_mask |= _lib.OPT_MAKE_REPLICA_TASK
        o.make_replica_task = 1
    if make_replica_task_mask is not None:
        if len(make_replica_task_mask) != n:
            raise ValueError(f"make_replica_task_mask: {len(make_replica_task_mask)} entries for {n} keys")
        m = (ctypes.c_uint8 * n)(*[1 if x else 0 for x in make_replica_task_mask])
        keep.append(m)
        o.field_mask |= _lib.OPT_REPLICA_MASK
        o.make_replica_task_mask = ctypes.cast(m, ctypes.POINTER(ctypes.c_uint8))
    if atomic_groups is not None:
        arr, ng = _groups(atomic_groups, n)
        o.field_mask |= _lib.OPT_ATOMIC_GROUPS
        o.atomic_group_lens = ctypes.cast(arr, ctypes.POINTER(ctypes.c_uint32))
        o.n_atomic_groups = ng
        keep.append(arr)
    if write_through:
        o.field_mask |= _lib.OPT_WRITE_THROUGH
        o.write_through = 1
    if lease_id is not None:
        o.field_mask |= _lib.OPT_LEASE_ID
        o.lease_id = int(lease_id)
    if preferred_sub_cluster is not None:
        b = preferred_sub_cluster.encode()
        keep.append(b)
        o.field_mask |= _lib.OPT_PREFERRED_SUB_CLUSTER
        o.preferred_sub_cluster = b
    if local_first:
        o.field_mask |= _lib.OPT_LOCAL_FIRST
        o.local_first = 1
    if reject_if_exists:
        o.field_mask |= _lib.OPT_REJECT_IF_EXIST
        o.reject_if_exist_same_key = 1
    if reject_if_inflight:
        o.field_mask |= _lib.OPT_REJECT_IF_INFLIGHT
        o.reject_if_inflight_same_key = 1
    return o, keep


class _Keeper:
    """The C client, kept open after close() while numpy arrays or buffers made from its
    plans' views are alive: they point into the owner's segment, which stays mapped, and
    into slots the owner keeps for a connected client. Every such array and buffer holds a
    reference; the last one to go closes the client (any thread, at garbage collection)."""

    __slots__ = ("c",)

    def __init__(self):
        self.c = None

    def __del__(self):
        c, self.c = self.c, None
        if c:
            try:
                lib.fluxon_client_close(c)
            except Exception:
                pass


class _ArrayIface:
    """__array_interface__ over segment bytes; numpy arrays made from it keep the plan and
    the client's keeper."""

    def __init__(self, addr, n, readonly, plan):
        self.__array_interface__ = {"data": (addr, readonly), "shape": (n,), "typestr": "|u1", "version": 3}
        self.plan = plan
        self.keep = plan._keeper


class _Plan:
    """Common part of PutPlan and ReadPlan: value addresses, views, release bookkeeping."""

    _readonly = True

    def __init__(self, client, ptr):
        self._client = client
        self._keeper = client._keeper  # held by the arrays and buffers it hands out
        self._ptr = ptr
        self._live = True
        self._lock = threading.Lock()
        words = ctypes.cast(ptr, _U64P)
        self.count = int(words[1])
        self.value_ptrs = [int(words[2 + i]) for i in range(self.count)]
        lens = client._call(lib.fluxon_plan_value_lens, ptr)
        self.value_lens = [int(lens[i]) for i in range(self.count)] if lens else [0] * self.count
        self._views = {}
        self._carrs = []  # the ctypes arrays the views export (a refcount above ours: a slice)
        self._arrays = []  # weakrefs to numpy arrays handed out
        client._track(self)

    def __len__(self):
        return self.count

    def _index(self, i):
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.count:
            raise IndexError(f"value {i!r} of a plan of {self.count} (0..{self.count - 1})")

    def _check_live(self):
        if not self._live or self._keeper is None:  # consumed, or its client closed
            raise WrongHandle(Status.ERR_WRONG_HANDLE, type(self).__name__, "the plan was consumed (released, "
                              "committed or aborted): its views are invalid")

    def view(self, i):
        """A memoryview of value i (read-only for a read plan); invalid once the plan is consumed."""
        self._check_live()
        self._index(i)
        if self.value_ptrs[i] == 0:
            raise ValueError(f"value {i} was rejected at put_start (status {self.statuses[i].name}): no slot")
        v = self._views.get(i)
        if v is None:
            carr = (ctypes.c_char * self.value_lens[i]).from_address(self.value_ptrs[i])
            carr._fx_keep = self._keeper  # a buffer made from the view keeps the client open ...
            carr._fx_plan = self  # ... and the plan: collected, it would give the slot back under it
            self._carrs.append(carr)
            v = memoryview(carr).cast("B")
            if self._readonly:
                ro = v.toreadonly()
                v.release()
                v = ro
            self._views[i] = v
        return v

    @property
    def views(self):
        """The views of every value (None for a rejected key of a put plan)."""
        return [self.view(i) if self.value_ptrs[i] else None for i in range(self.count)]

    def array(self, i, dtype="uint8", shape=None):
        """A numpy array over value i (zero-copy). A plan with live arrays refuses to be consumed
        (Busy): numpy arrays cannot be invalidated, so drop them first."""
        import numpy as np
        self._check_live()
        self._index(i)
        if self.value_ptrs[i] == 0:
            raise ValueError(f"value {i} was rejected at put_start: no slot")
        a = np.asarray(_ArrayIface(self.value_ptrs[i], self.value_lens[i], self._readonly, self))
        a = a.view(dtype)
        if shape is not None:
            a = a.reshape(shape)
        self._arrays.append(weakref.ref(a))
        return a

    def _invalidate(self, force):
        """Revokes every view before the plan is consumed. What cannot be revoked refuses it
        (Busy) unless force: numpy arrays from array(), and buffers made from a view (a
        slice, memoryview(view), numpy.frombuffer(view)) -- they would outlive the slot."""
        alive = sum(1 for r in self._arrays if r() is not None)
        if alive and not force:  # before any view is released: a refused commit keeps them
            raise Busy(Status.ERR_BUSY, type(self).__name__,
                       f"{alive} numpy array(s) from array() are alive; delete them before consuming it")
        exported = 0
        for i in list(self._views):
            try:
                self._views[i].release()
            except BufferError:  # memoryview(view) or numpy.frombuffer(view) holds it
                exported += 1
                continue
            del self._views[i]  # view(i) makes a new one while the plan lives
        # a slice of a released view keeps its buffer, and so a reference to its array
        keep = [v.obj for v in self._views.values()]  # the arrays of views counted above
        held = [a for a in self._carrs  # references: the list, a, getrefcount's argument
                if not any(a is k for k in keep) and sys.getrefcount(a) > 3]
        exported += len(held)
        self._carrs = keep + held
        if exported and not force:  # the views without exports were released: view(i) makes new ones
            raise Busy(Status.ERR_BUSY, type(self).__name__,
                       f"{exported} buffer(s) made from its views (slices, memoryview(view), numpy.frombuffer) "
                       "are alive; delete them before consuming it (its views are released: take them again "
                       "with view(i))")
        self._views.clear()
        self._carrs.clear()
        self._live = False
        self._keeper = None  # a consumed plan kept by its caller does not keep the client open
        self._client._untrack(self)


class PutPlan(_Plan):
    """A put plan (fluxon_local_fast_put_start): write each accepted value through view(i) or
    array(i), then commit() (a Future) or abort()."""

    _readonly = False

    def __init__(self, client, ptr, keys, statuses):
        self.keys = keys
        self.statuses = statuses
        super().__init__(client, ptr)

    def commit(self):
        """Commits: the values are readable through this owner at once; returns a Future that
        completes when they are published cluster-wide. The plan's views are invalid after."""
        with self._lock:
            self._check_live()
            self._invalidate(False)
            f = ctypes.c_void_p()
            rc = self._client._call(lib.fluxon_local_fast_put_commit, self._ptr, ctypes.byref(f))
            if rc == Status.ERR_TIMEOUT:  # still live: a retry learns the outcome ...
                with self._client._calls_cv:  # ... unless the client closed meanwhile (its slots went)
                    if self._client._c:
                        self._live = True
                        self._keeper = self._client._keeper
                        self._client._track(self)
            check(rc, "put_commit")
            return Future(f.value, self._client)

    def abort(self):
        """Gives every slot back; the plan is consumed."""
        with self._lock:
            self._check_live()
            self._invalidate(False)
            check(self._client._call(lib.fluxon_put_abort, self._ptr), "put_abort")

    def _gc_release(self):
        if self._live:
            self._invalidate(True)
            self._client._call(lib.fluxon_put_abort, self._ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._live:
            self.abort()

    def __del__(self):
        try:
            if self._client._c:
                self._gc_release()
        except Exception:
            pass


class ReadPlan(_Plan):
    """A read plan (fluxon_get_transfer): read-only views of the restored values, valid until
    release(). Context manager: released on exit; also released when garbage-collected."""

    def release(self):
        with self._lock:
            self._check_live()
            self._invalidate(False)
            check(self._client._call(lib.fluxon_release_views, self._ptr), "release_views")

    release_views = release  # the C name

    def _gc_release(self):
        if self._live:
            self._invalidate(True)
            self._client._call(lib.fluxon_release_views, self._ptr)

    def tobytes(self, i):
        """A copy of value i."""
        self._check_live()
        self._index(i)
        return ctypes.string_at(self.value_ptrs[i], self.value_lens[i])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._live:
            self.release()

    def __del__(self):
        try:
            if self._client._c:
                self._gc_release()
        except Exception:
            pass


class GetHandle:
    """The outcome of get_start: prefix figures, then transfer() (a ReadPlan) or cancel()."""

    def __init__(self, client, ptr, res, n):
        self._client = client
        self._ptr = ptr
        self._live = True
        self.n_keys = n
        self.raw_prefix_hit_len = int(res.raw_prefix_hit_len)
        self.transferable_len = int(res.transferable_len)
        self.prefix_hit_groups = int(res.prefix_hit_groups)
        self.first_miss_index = int(res.first_miss_index)
        self.first_miss_group_index = int(res.first_miss_group_index)
        self.all_hit = bool(res.all_hit)
        self.miss_status = to_status(int(res.miss_status))
        client._track(self)

    def _take(self):
        if not self._live:
            raise WrongHandle(Status.ERR_WRONG_HANDLE, "GetHandle", "already transferred or cancelled")

    def transfer(self, consume_prefix_len=0):
        """The read plan of the first consume_prefix_len values (0: all transferable)."""
        self._take()
        if self.transferable_len == 0:
            raise ValueError("nothing transferable (transferable_len is 0): cancel() the handle")
        p = ctypes.c_void_p()
        rc = self._client._call(lib.fluxon_get_transfer, self._ptr, int(consume_prefix_len), ctypes.byref(p))
        if rc != Status.ERR_INVALID_ARGUMENT and rc != Status.ERR_NOMEM:
            self._live = False
            self._client._untrack(self)
        check(rc, "get_transfer")
        return ReadPlan(self._client, p.value)

    get_transfer = transfer  # the C name

    def cancel(self):
        self._take()
        self._live = False
        self._client._untrack(self)
        check(self._client._call(lib.fluxon_cancel_get_transfer, self._ptr), "cancel_get_transfer")

    def _gc_release(self):
        if self._live:
            self._live = False
            self._client._untrack(self)
            self._client._call(lib.fluxon_cancel_get_transfer, self._ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._live:
            self.cancel()

    def __del__(self):
        try:
            if self._client._c:
                self._gc_release()
        except Exception:
            pass


class Future:
    """The outcome of a commit: wait(), done(), result(), fileno(); awaitable in asyncio
    (the loop watches the future's eventfd, no thread)."""

    def __init__(self, ptr, client=None):
        self._f = ptr
        self._client = client  # keeps the library's client alive while the future is

    def _ptr(self):
        if not self._f:
            raise WrongHandle(Status.ERR_WRONG_HANDLE, "Future", "freed")
        return self._f

    def done(self):
        return lib.fluxon_future_poll(self._ptr()) != Status.IN_PROGRESS

    def status(self):
        """Status.IN_PROGRESS until done, then the outcome."""
        return to_status(lib.fluxon_future_poll(self._ptr()))

    def wait(self, timeout=None):
        """Blocks up to timeout seconds (None: forever); raises the outcome's FluxonError
        (Timeout when not done yet: the future stays usable)."""
        forever = timeout is None or (isinstance(timeout, float) and timeout == float("inf"))
        ms = 0xFFFFFFFF if forever else max(0, min(int(timeout * 1000), 0xFFFFFFFE))
        check(lib.fluxon_future_wait(self._ptr(), ms), "future")

    result = wait

    def fileno(self):
        fd = lib.fluxon_future_fd(self._ptr())
        if fd < 0:
            raise OSError("fluxon_future_fd: no file descriptor left")
        return fd

    def __await__(self):
        return self._wait_async().__await__()

    async def _wait_async(self):
        loop = asyncio.get_running_loop()
        if not self.done():
            try:
                fd = self.fileno()
            except OSError:
                await loop.run_in_executor(None, self.wait)
                return
            ready = loop.create_future()

            def on_ready():
                if not ready.done():
                    ready.set_result(None)

            loop.add_reader(fd, on_ready)
            try:
                await ready
            finally:
                loop.remove_reader(fd)
        check(lib.fluxon_future_poll(self._ptr()), "future")

    def free(self):
        if self._f:
            lib.fluxon_future_free(self._f)
            self._f = None

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


class BatchGetResult(tuple):
    """(n_restored, statuses, value_lens) of batch_get_into."""
    __slots__ = ()

    def __new__(cls, n_restored, statuses, value_lens):
        return tuple.__new__(cls, (n_restored, statuses, value_lens))

    n_restored = property(lambda s: s[0])
    statuses = property(lambda s: s[1])
    value_lens = property(lambda s: s[2])


class Client:
    """An external client of the owner whose unix socket `socket` names.

    Client(socket, cluster_id="fluxon", cluster_token=None, timeout_ms=None,
           log_level=None, config=None): config (a dict) adds or overrides any member of
    the client's JSON config (README "Configuration")."""

    def __init__(self, socket=None, cluster_id="fluxon", cluster_token=None, timeout_ms=None,
                 log_level=None, config=None):
        cfg = {"role": "external", "cluster_id": cluster_id}
        if socket is not None:
            cfg["socket"] = str(socket)
        if cluster_token is not None:
            cfg["cluster_token"] = cluster_token
        if timeout_ms is not None:
            cfg["timeout_ms"] = int(timeout_ms)
        if log_level is not None:
            cfg["log_level"] = log_level
        cfg.update(config or {})
        self._c = None
        self._objs = weakref.WeakSet()
        self._objs_lock = threading.Lock()
        self._calls_cv = threading.Condition()  # guards _c and _calls
        self._calls = 0  # C calls in flight on this client (close waits for them)
        self._closing = None  # the C client close() took but has not freed yet
        self._timeout_s = int(cfg.get("timeout_ms", 30000)) / 1000
        self._keeper = _Keeper()
        p = ctypes.c_void_p()
        check(lib.fluxon_client_open(json.dumps(cfg).encode(), ctypes.byref(p)), "client_open",
              f"socket {cfg.get('socket')}")
        self._c = p.value

    # ---- lifetime ----
    def _track(self, o):
        with self._objs_lock:
            self._objs.add(o)

    def _untrack(self, o):
        with self._objs_lock:
            self._objs.discard(o)

    def _handle(self):
        if not self._c:
            raise FluxonError(Status.ERR_INVALID_ARGUMENT, "client", "closed")
        return self._c

    def _call(self, fn, *args):
        """fn(client, *args), counted in flight: close() frees the C client only once no
        call is using it (another thread's call never finds it freed)."""
        with self._calls_cv:
            c = self._handle()
            self._calls += 1
        try:
            return fn(c, *args)
        finally:
            with self._calls_cv:
                self._calls -= 1
                if not self._calls:
                    self._calls_cv.notify_all()

    @property
    def closed(self):
        return not self._c

    def close(self):
        """Closes the client: every plan and handle it still has is released and their views
        invalidated. Numpy arrays from array() and buffers made from views (slices,
        memoryview(view), numpy.frombuffer) cannot be invalidated: while any is alive, the
        connection stays open (the owner keeps those values' slots and its segment stays
        mapped), and the last of them to go closes it. Calls other threads are making finish
        first (each is bounded by the client's timeout_ms); calls made after close() raise.
        Raises Busy if some did not finish within timeout_ms + 5 s (the client is then closed
        by a later close())."""
        with self._calls_cv:
            if not self._c and not self._closing:
                return
            if self._c:
                self._closing, self._c = self._c, None  # new calls are refused from here
            if not self._calls_cv.wait_for(lambda: self._calls == 0, timeout=self._timeout_s + 5):
                raise Busy(Status.ERR_BUSY, "client", f"{self._calls} call(s) of other threads still running")
            c, self._closing = self._closing, None
            if c is None:  # another thread's close() took it meanwhile and closes it
                return
            keeper, self._keeper = self._keeper, None
        with self._objs_lock:
            objs = list(self._objs)
        for o in objs:
            if isinstance(o, _Plan) and o._live:
                o._invalidate(True)
            elif isinstance(o, GetHandle):
                o._live = False
        keeper.c = c
        del keeper  # closes c now, or when the last array or buffer holding it goes

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- introspection ----
    def _json_call(self, fn, what):
        cap = 16384
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = ctypes.c_size_t()
            rc = self._call(fn, buf, cap, ctypes.byref(n))
            if rc == Status.ERR_INVALID_ARGUMENT and n.value >= cap:
                cap = n.value + 1
                continue
            check(rc, what)
            return json.loads(buf.value.decode())

    def stats(self):
        """{"client": {...}, "owner": {...}} (fluxon_client_stats)."""
        return self._json_call(lib.fluxon_client_stats, "client_stats")

    def master_stats(self):
        return self._json_call(lib.fluxon_client_master_stats, "master_stats")

    def cluster_nodes(self):
        return self._json_call(lib.fluxon_client_cluster_nodes, "cluster_nodes")

    def ping(self, to_master=False):
        """Round-trip time in seconds."""
        ns = ctypes.c_uint64()
        check(self._call(lib.fluxon_client_ping, int(bool(to_master)), ctypes.byref(ns)), "ping")
        return ns.value / 1e9

    def segment(self):
        """(node_id, base address, length, generation) of the owner's segment as mapped here."""
        info = _lib.SegmentInfo()
        n = ctypes.c_size_t()
        check(self._call(lib.fluxon_wait_local_segments_ready, 0, ctypes.byref(info), 1, ctypes.byref(n)),
              "segments")
        return info.node_id.decode(), int(info.write_ptr or 0), int(info.len), int(info.generation)

    # ---- plain KV ----
    def put(self, key, value, *, write_through=False, lease_id=None, preferred_sub_cluster=None,
            local_first=False, reject_if_exists=False, reject_if_inflight=False, pin_ttl_ms=0,
            pin_refresh_on_hit=False):
        """Stores a copy of value (bytes-like, numpy array, tensor) and waits until published.
        pin_ttl_ms (1..86400000): keep it in its owner's hot tier that long (a hit restarts
        it with pin_refresh_on_hit). Returns Status.OK, or Status.PIN_REFUSED when the value
        is stored but its tenant's pin budget had no room for the pin."""
        k = _key(key)
        addr, n, keep = address_of(value, False, "value")
        if n == 0:
            raise ValueError("value: a value is at least 1 byte")
        o, okeep = _options(None, 1, write_through, lease_id, preferred_sub_cluster, local_first,
                            reject_if_exists, reject_if_inflight, pin_ttl_ms=pin_ttl_ms,
                            pin_refresh_on_hit=pin_refresh_on_hit)
        rc = self._call(lib.fluxon_put, k, addr, n, ctypes.byref(o))
        del keep, okeep
        if rc == Status.PIN_REFUSED:
            return Status.PIN_REFUSED
        check(rc, "put", f"key {k!r}")
        return Status.OK

    def pin(self, keys, ttl_ms, *, refresh_on_hit=False):
        """Pins the values this client's owner holds under keys for ttl_ms (0 unpins; at most
        86400000), their atomic groups whole (fluxon_pin). Returns the per-key statuses: OK,
        PIN_REFUSED (over the tenant's pin budget), ERR_NOT_FOUND (not held by this owner),
        ERR_KEY_BEING_WRITTEN (not published yet)."""
        enc, arr = _keys(keys)
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 0 <= ttl_ms <= _lib.PIN_TTL_MAX_MS:
            raise ValueError(f"ttl_ms {ttl_ms!r}: an int in 0..{_lib.PIN_TTL_MAX_MS}")
        st = (ctypes.c_int * len(enc))()
        flags = _lib.PIN_REFRESH_ON_HIT if refresh_on_hit else 0
        check(self._call(lib.fluxon_pin, arr, len(enc), ttl_ms, flags, st), "pin")
        return _statuses(st)

    def tenant_set(self, tenant, *, quota_bytes=None, guaranteed_bytes=None, admin_token=None):
        """Sets tenant's quota and/or guaranteed share (bytes of an owner's hot tier; 0 clears)
        on this client's owner, which sends it on to every owner through the master
        (fluxon_tenant_set, docs/tenants.md). Without admin_token (the owners'
        tenant_admin_token) only a client of that tenant may. Raises AuthError, NotFound (a
        tenant the owner does not list), InvalidArgument (a guarantee above the quota, all
        guarantees above the hot tier)."""
        flags, q, g = 0, 0, 0
        for name, v in (("quota_bytes", quota_bytes), ("guaranteed_bytes", guaranteed_bytes)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 64):
                raise ValueError(f"{name} {v!r}: an int in 0..2**64-1")
        if quota_bytes is not None:
            flags, q = flags | _lib.TENANT_SET_QUOTA, quota_bytes
        if guaranteed_bytes is not None:
            flags, g = flags | _lib.TENANT_SET_GUARANTEED, guaranteed_bytes
        if not flags:
            raise ValueError("tenant_set: give quota_bytes, guaranteed_bytes or both")
        tok = admin_token.encode() if admin_token is not None else None
        check(self._call(lib.fluxon_tenant_set, tenant.encode(), q, g, flags, tok), "tenant_set")

    def get(self, key):
        """A copy of the value's bytes; raises NotFound when there is none."""
        return self._call(_get_copy, _key(key))  # the holder's bytes are read inside the call

    def delete(self, key):
        k = _key(key)
        check(self._call(lib.fluxon_delete, k), "delete", f"key {k!r}")

    def batch_exists(self, keys):
        """How many of keys exist counted from the first, up to the first missing one."""
        enc, arr = _keys(keys)
        n = ctypes.c_size_t()
        check(self._call(lib.fluxon_batch_exists, arr, len(enc), ctypes.byref(n)), "batch_exists")
        return n.value

    def exists(self, key):
        return self.batch_exists([key]) == 1

    def prefetch(self, keys):
        """A hint that keys will be read soon: the owner reads back now those its disk tier
        holds and its memory lacks (fluxon_prefetch; one-way, returns at once)."""
        if not keys:
            return
        enc, arr = _keys(keys)
        check(self._call(lib.fluxon_prefetch, arr, len(enc)), "prefetch")

    def lease_grant(self, ttl_ms):
        lid = ctypes.c_uint64()
        check(self._call(lib.fluxon_lease_grant, int(ttl_ms), ctypes.byref(lid)), "lease_grant")
        return lid.value

    def list_keys(self, prefix="", after=None, limit=1000):
        """Keys under prefix (str or bytes), after `after`, at most limit. A key that is not
        UTF-8 comes back as a str with surrogate escapes: given back to any call, it names
        the same bytes."""
        out = []

        @_lib.LIST_CB
        def cb(_arg, k):
            out.append(k.decode("utf-8", "surrogateescape"))  # any bytes: given back, the same key

        n = ctypes.c_size_t()
        pb = _key_part(prefix, "prefix")
        ab = _key_part(after, "after") or None
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit: an int, not {type(limit).__name__}")
        if not 1 <= limit <= 10000:
            raise ValueError(f"limit: {limit} is not in 1..10000 (keys per call; page with `after`)")
        check(self._call(lib.fluxon_list_keys, pb, ab, int(limit), ctypes.cast(cb, ctypes.c_void_p), None,
                         ctypes.byref(n)), "list_keys")
        return out

    # ---- hostless ----
    def put_start(self, keys, value_len, *, atomic_groups=None, write_through=False, lease_id=None,
                  preferred_sub_cluster=None, make_replica_task=False, make_replica_task_mask=None,
                  pin_ttl_ms=0, pin_refresh_on_hit=False):
        """Reserves one slot of value_len bytes per key in this owner: a PutPlan whose
        statuses[i] says whether key i was accepted (rejected keys have no view).
        make_replica_task: after publication each atomic group is copied to a remote_cache
        owner (FLUXON_PUT_OPT_MAKE_REPLICA_TASK); make_replica_task_mask: one bool per key,
        the same within an atomic group, copies only the groups marked
        (FLUXON_PUT_OPT_REPLICA_MASK)."""
        enc, arr = _keys(keys)
        if isinstance(value_len, bool) or not isinstance(value_len, int) or not 0 < value_len < 1 << 63:
            raise ValueError(f"value_len {value_len!r}: an int in 1..2**63-1")
        o, keep = _options(atomic_groups, len(enc), write_through, lease_id, preferred_sub_cluster,
                           make_replica_task=make_replica_task, make_replica_task_mask=make_replica_task_mask,
                           pin_ttl_ms=pin_ttl_ms, pin_refresh_on_hit=pin_refresh_on_hit)
        st = (ctypes.c_int * len(enc))()
        p = ctypes.c_void_p()
        check(self._call(lib.fluxon_local_fast_put_start, arr, len(enc), value_len, ctypes.byref(o),
                                              ctypes.byref(p), st), "put_start")
        del keep
        return PutPlan(self, p.value, [k.decode("utf-8", "surrogateescape") for k in enc], _statuses(st))

    def get_start(self, keys, prefix_best_effort=True, atomic_groups=None):
        """Pins the longest restorable prefix of keys: a GetHandle."""
        enc, arr = _keys(keys)
        garr, ng = _groups(atomic_groups, len(enc))
        h = ctypes.c_void_p()
        res = _lib.GetStartResult()
        check(self._call(lib.fluxon_get_start, arr, len(enc), int(bool(prefix_best_effort)), garr, ng,
                                   ctypes.byref(h), ctypes.byref(res)), "get_start")
        return GetHandle(self, h.value, res, len(enc))

    # ---- batch copy ----
    def batch_put_from(self, keys, buffers, *, atomic_groups=None, write_through=False, lease_id=None,
                       preferred_sub_cluster=None, make_replica_task=False, make_replica_task_mask=None,
                       pin_ttl_ms=0, pin_refresh_on_hit=False):
        """Stores buffers[i] under keys[i] (one put_start, copies in C, commit, publication);
        all buffers of one call have the same length. Returns the per-key statuses (a list
        of Status: OK, ERR_KEY_EXISTS, PIN_REFUSED (stored, not pinned), ...)."""
        enc, arr = _keys(keys)
        if len(buffers) != len(enc):
            raise ValueError(f"buffers: {len(buffers)} buffers for {len(enc)} keys")
        n = len(enc)
        ptrs, lens, keep = (ctypes.c_void_p * n)(), (ctypes.c_uint64 * n)(), []
        for i, b in enumerate(buffers):
            a, ln, kp = address_of(b, False, f"buffers[{i}]")
            ptrs[i], lens[i] = a, ln
            keep.append(kp)
        o, okeep = _options(atomic_groups, n, write_through, lease_id, preferred_sub_cluster,
                            make_replica_task=make_replica_task, make_replica_task_mask=make_replica_task_mask,
                            pin_ttl_ms=pin_ttl_ms, pin_refresh_on_hit=pin_refresh_on_hit)
        st = (ctypes.c_int * n)()
        rc = self._call(lib.fluxon_batch_put_from, arr, n, ptrs, lens, ctypes.byref(o), st)
        del keep, okeep
        check(rc, "batch_put_from")
        return _statuses(st)

    def batch_put_from_ptrs(self, keys, ptrs, lens, *, atomic_groups=None, make_replica_task=False,
                            make_replica_task_mask=None):
        """batch_put_from over raw host addresses (ints) and byte lengths; make_replica_task
        and make_replica_task_mask as put_start."""
        enc, arr = _keys(keys)
        n = len(enc)
        if len(ptrs) != n or len(lens) != n:
            raise ValueError(f"{len(ptrs)} ptrs and {len(lens)} lens for {n} keys")
        o, okeep = _options(atomic_groups, n, make_replica_task=make_replica_task,
                            make_replica_task_mask=make_replica_task_mask)
        st = (ctypes.c_int * n)()
        check(self._call(lib.fluxon_batch_put_from, arr, n, (ctypes.c_void_p * n)(*ptrs),
                                        (ctypes.c_uint64 * n)(*lens), ctypes.byref(o), st), "batch_put_from")
        return _statuses(st)

    def _get_into(self, enc, arr, ptrs, caps, prefix_best_effort, atomic_groups):
        n = len(enc)
        garr, ng = _groups(atomic_groups, n)
        st, vl, nr = (ctypes.c_int * n)(), (ctypes.c_uint64 * n)(), ctypes.c_size_t()
        rc = self._call(lib.fluxon_batch_get_into, arr, n, ptrs, caps, int(bool(prefix_best_effort)), garr, ng,
                                       st, vl, ctypes.byref(nr))
        res = BatchGetResult(nr.value, _statuses(st), vl[:])
        if rc == Status.ERR_INVALID_ARGUMENT and any(s == Status.ERR_INVALID_ARGUMENT for s in res.statuses):
            i = [s for s in res.statuses].index(Status.ERR_INVALID_ARGUMENT)
            e = error_for(rc, "batch_get_into", f"key {i} ({enc[i]!r}) is not exactly the length of its "
                          f"buffer ({caps[i]} bytes); {res.n_restored} leading keys were copied")
            e.result = res
            raise e
        check(rc, "batch_get_into")
        return res

    def batch_get_into(self, keys, buffers, *, prefix_best_effort=True, atomic_groups=None):
        """Restores the longest prefix of keys into buffers (writable): a BatchGetResult
        (n_restored, statuses, value_lens). Each value must be exactly its buffer's length:
        a value of another length (shorter or longer) is not copied and raises
        InvalidArgument (its .result holds what was restored before it)."""
        enc, arr = _keys(keys)
        n = len(enc)
        if len(buffers) != n:
            raise ValueError(f"buffers: {len(buffers)} buffers for {n} keys")
        ptrs, caps, keep = (ctypes.c_void_p * n)(), (ctypes.c_uint64 * n)(), []
        for i, b in enumerate(buffers):
            a, ln, kp = address_of(b, True, f"buffers[{i}]")
            ptrs[i], caps[i] = a, ln
            keep.append(kp)
        try:
            return self._get_into(enc, arr, ptrs, caps, prefix_best_effort, atomic_groups)
        finally:
            del keep

    def batch_get_into_ptrs(self, keys, ptrs, caps, *, prefix_best_effort=True, atomic_groups=None):
        """batch_get_into over raw host addresses (ints) and exact lengths."""
        enc, arr = _keys(keys)
        n = len(enc)
        if len(ptrs) != n or len(caps) != n:
            raise ValueError(f"{len(ptrs)} ptrs and {len(caps)} caps for {n} keys")
        return self._get_into(enc, arr, (ctypes.c_void_p * n)(*ptrs), (ctypes.c_uint64 * n)(*caps),
                              prefix_best_effort, atomic_groups)
