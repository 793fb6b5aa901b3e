"""The objects of the hostless API a Client hands out: PutPlan and ReadPlan (the values'
addresses, views and numpy arrays over the owner's segment, and their release), GetHandle
(get_start's outcome) and Future (a put's publication). client.py makes them.

Lifetime: a plan's views are revoked when it is consumed; numpy arrays and buffers made from
views cannot be, so while any is alive the plan refuses to be consumed (Busy), the plan itself
stays alive, and after Client.close() the connection stays open (_Keeper) until they go.
"""
import asyncio
import ctypes
import math
import numbers
import sys
import threading
import weakref

from ._lib import lib
from .errors import Status, Busy, WrongHandle, check, to_status, u64

_U64P = ctypes.POINTER(ctypes.c_uint64)


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


class _Consumable:
    """A context manager consumed on exit (_consume) and released when garbage-collected
    (_gc_release) while its client is open: the plans and the get handle."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._live:
            self._consume()

    def __del__(self):
        try:
            if self._client._c:
                self._gc_release()
        except Exception:
            pass


class _Plan(_Consumable):
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
        try:
            dt = np.dtype(dtype)
        except TypeError as e:
            raise TypeError(f"dtype {dtype!r}: {e}") from None
        n = self.value_lens[i]
        if dt.hasobject:
            raise TypeError(f"dtype {dtype!r}: an object dtype holds pointers to Python objects, not bytes")
        if not dt.itemsize or n % dt.itemsize:
            raise ValueError(f"dtype {dtype!r}: value {i} is {n} bytes, not a multiple of its item size "
                             f"({dt.itemsize} bytes)")
        a = np.asarray(_ArrayIface(self.value_ptrs[i], n, self._readonly, self)).view(dt)
        if shape is not None:
            try:
                a = a.reshape(shape)
            except (TypeError, ValueError) as e:  # numpy's message names neither the argument nor the value
                raise type(e)(f"shape {shape!r}: value {i} is {a.size} items of {dt} ({n} bytes): {e}") from None
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

    _consume = abort  # on leaving a `with` block


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

    _consume = release  # on leaving a `with` block


class GetHandle(_Consumable):
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
        rc = self._client._call(lib.fluxon_get_transfer, self._ptr, u64(consume_prefix_len, "transfer consume_prefix_len"), ctypes.byref(p))
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

    _consume = cancel  # on leaving a `with` block


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
        """Blocks up to timeout seconds (None or inf: forever; 0 or less: does not block);
        raises the outcome's FluxonError (Timeout when not done yet: the future stays usable).
        A timeout that is not a number raises TypeError, NaN ValueError."""
        if timeout is None:
            ms = 0xFFFFFFFF
        else:
            if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
                raise TypeError(f"timeout: seconds (a number, or None: forever), not {type(timeout).__name__}")
            try:
                t = float(timeout)
            except OverflowError:  # an int past a float's range: as long as the library waits
                t = 1e300 if timeout > 0 else 0.0
            if math.isnan(t):
                raise ValueError("timeout: nan is not a number of seconds (None or inf: forever)")
            ms = 0xFFFFFFFF if t == math.inf else int(max(0.0, min(t * 1000, 0xFFFFFFFE)))
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
