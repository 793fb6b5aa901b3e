"""Client: an external client of one owner (fluxon_client_* and the KV / hostless / batch
calls of include/fluxon.h); the plan objects of the hostless API it hands out are in
plans.py.

Threads: a Client may be used from several threads (the C library is thread-safe and
ctypes releases the GIL during calls); a plan, handle or future belongs to the thread
that uses it. Lifetime: close() (or leaving the `with` block) releases every plan,
handle and view the client still has; their views raise ValueError afterwards.
"""
import ctypes
import json
import os
import threading
import weakref
from collections.abc import Mapping

from . import _lib
from ._buf import address_of
from ._lib import lib
from .errors import (FluxonError, InvalidArgument, Status, Busy, check, config_json, error_for, integer, sequence,
                     u64, u64s, utf8)
from .plans import _Keeper, _Plan, PutPlan, ReadPlan, GetHandle, Future  # noqa: F401 -- fluxon.client.* as before

LEASE_TTL_MAX_MS = 86400000  # fluxon_lease_grant's ttl_ms: 1..86400000 (24 h)

_STATUS = {int(s): s for s in Status}

_U64P = ctypes.POINTER(ctypes.c_uint64)


def _key(k, i=None):
    where = "key" if i is None else f"keys[{i}]"
    if not isinstance(k, (str, bytes, bytearray)):
        raise TypeError(f"{where}: a key is str or bytes, not {type(k).__name__}")
    k = utf8(k, where, "surrogateescape")  # list_keys' str of a non-UTF-8 key round-trips
    if not k or len(k) > 1024 or b"\0" in k:
        raise ValueError(f"{where}: a key is 1..1024 bytes without NUL (got {len(k)} bytes)")
    return bytes(k)


def _key_part(v, what):
    """A prefix or a key to list after (str or bytes, may be empty; None: empty) as bytes."""
    if v is None:
        return b""
    v = utf8(v, what, "surrogateescape")  # TypeError for an int: bytes(5) would be five NUL bytes
    if len(v) > 1024 or b"\0" in v:
        raise ValueError(f"{what}: at most 1024 bytes without NUL (got {len(v)} bytes)")
    return bytes(v)


def _cstr(v, what):
    """A str argument (str, or bytes as they are) as UTF-8 bytes for a C string: without NUL
    (ctypes passes "acme\\0x" as "acme")."""
    b = utf8(v, what)
    if b"\0" in b:
        raise ValueError(f"{what}: a NUL byte at index {b.index(0)} (a C string would end there)")
    return b


def _text(v, what):
    """A str member of the client's JSON config (str, or UTF-8 bytes) as a str."""
    b = _cstr(v, what)
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{what}: bytes that are not UTF-8 ({b[e.start]:#04x} at index {e.start})") from None


def _keys(keys, empty_ok=False):
    """(encoded keys, their C array); empty_ok: no keys give ([], None) instead of ValueError."""
    if isinstance(keys, (str, bytes, bytearray)):
        raise TypeError("keys: a sequence of keys, not one key")
    keys = sequence(keys, "keys", "keys")  # an iterator is read once: both paths below need every key
    try:  # the fast path: every key a str, checked in bulk
        enc = [k.encode("utf-8", "surrogateescape") for k in keys]
        ok = enc and 0 < min(map(len, enc)) and max(map(len, enc)) <= 1024 and b"\0" not in b"".join(enc)
    except (AttributeError, TypeError, UnicodeEncodeError):
        ok = False
    if not ok:  # the slow path names the offending key
        enc = [_key(k, i) for i, k in enumerate(keys)]
        if not enc:
            if empty_ok:
                return [], None
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
    g = sequence(groups, "atomic_groups", "group lengths")
    g = [integer(x, f"atomic_groups[{i}]") for i, x in enumerate(g)]  # int() took 1.5 as 1
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
        make_replica_task_mask = sequence(make_replica_task_mask, "make_replica_task_mask", "bools, one per key")
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
        o.lease_id = u64(lease_id, "lease_id")
    if preferred_sub_cluster is not None:
        b = _cstr(preferred_sub_cluster, "preferred_sub_cluster")
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
           log_level=None, config=None): socket a str, bytes or path object; cluster_id,
    cluster_token and log_level str or (UTF-8) bytes; timeout_ms an int (milliseconds);
    config (a dict) adds or overrides any member of the client's JSON config (docs/config.md)."""

    def __init__(self, socket=None, cluster_id="fluxon", cluster_token=None, timeout_ms=None,
                 log_level=None, config=None):
        cfg = {"role": "external"}
        if cluster_id is not None:
            cfg["cluster_id"] = _text(cluster_id, "cluster_id")
        if socket is not None:
            cfg["socket"] = _text(os.fspath(socket) if isinstance(socket, os.PathLike) else socket, "socket")
        if cluster_token is not None:
            cfg["cluster_token"] = _text(cluster_token, "cluster_token")
        if timeout_ms is not None:
            cfg["timeout_ms"] = integer(timeout_ms, "timeout_ms")  # its range: the library's check (ConfigError)
        if log_level is not None:
            cfg["log_level"] = _text(log_level, "log_level")
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config: a dict of config members, not {type(config).__name__}")
        cfg.update(config or {})
        text = config_json(cfg)
        self._c = None
        self._objs = weakref.WeakSet()
        self._objs_lock = threading.Lock()
        self._calls_cv = threading.Condition()  # guards _c and _calls
        self._calls = 0  # C calls in flight on this client (close waits for them)
        self._closing = None  # the C client close() took but has not freed yet
        self._keeper = _Keeper()
        p = ctypes.c_void_p()
        check(lib.fluxon_client_open(text.encode(), ctypes.byref(p)), "client_open",
              f"socket {cfg.get('socket')}")
        self._timeout_s = int(cfg.get("timeout_ms", 30000)) / 1000  # the library took it: an int
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
            raise error_for(Status.ERR_INVALID_ARGUMENT, "client", "closed")
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
        tenant_admin_token) only a client of that tenant may; tenant and admin_token are str
        or bytes, as keys. Raises AuthError, NotFound (a
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
        name = _cstr(tenant, "tenant")
        tok = _cstr(admin_token, "admin_token") if admin_token is not None else None
        check(self._call(lib.fluxon_tenant_set, name, q, g, flags, tok), "tenant_set")

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
        return self.batch_exists([_key(key)]) == 1  # a bad key is named "key", not "keys[0]"

    def prefetch(self, keys):
        """A hint that keys will be read soon: the owner reads back now those its disk tier
        holds and its memory lacks (fluxon_prefetch; one-way, returns at once)."""
        enc, arr = _keys(keys, empty_ok=True)
        if not enc:  # nothing to name: no call
            return
        check(self._call(lib.fluxon_prefetch, arr, len(enc)), "prefetch")

    def lease_grant(self, ttl_ms):
        """A lease of ttl_ms (1..86400000) ms at the master; returns its id."""
        ttl = integer(ttl_ms, "lease_grant ttl_ms")
        if not 1 <= ttl <= LEASE_TTL_MAX_MS:  # the C call's own range (fluxon.h), named here
            raise InvalidArgument(Status.ERR_INVALID_ARGUMENT, "lease_grant ttl_ms",
                                  f"ttl_ms {ttl_ms} is outside 1..{LEASE_TTL_MAX_MS} ms")
        lid = ctypes.c_uint64()
        check(self._call(lib.fluxon_lease_grant, ttl, ctypes.byref(lid)), "lease_grant")
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
        check(self._call(lib.fluxon_list_keys, pb, ab, limit, ctypes.cast(cb, ctypes.c_void_p), None,
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
        buffers = sequence(buffers, "buffers", "buffers")
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
        ptrs, lens = u64s(ptrs, "ptrs"), u64s(lens, "lens")  # ctypes would wrap -1 to 2**64-1
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
        buffers = sequence(buffers, "buffers", "buffers")
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
        ptrs, caps = u64s(ptrs, "ptrs"), u64s(caps, "caps")  # ctypes would wrap -1 to 2**64-1
        if len(ptrs) != n or len(caps) != n:
            raise ValueError(f"{len(ptrs)} ptrs and {len(caps)} caps for {n} keys")
        return self._get_into(enc, arr, (ctypes.c_void_p * n)(*ptrs), (ctypes.c_uint64 * n)(*caps),
                              prefix_best_effort, atomic_groups)
