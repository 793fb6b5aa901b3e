"""The fluxon package: every Client call, Node, misuse raising clear errors, no leaked
holders after garbage collection, the asyncio future."""
import array
import asyncio
import gc
import os
import subprocess
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import fluxon
from fluxon import Status
from conftest import quiet, wait_stat


def test_import_from_the_build_tree_with_one_variable():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    env = {k: v for k, v in os.environ.items() if k != "FLUXON_LIB"}
    env["PYTHONPATH"] = os.path.join(root, "python")
    out = subprocess.run([sys.executable, "-c", "import fluxon; print(fluxon.library_path, fluxon.__version__)"],
                         env=env, cwd="/", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == os.path.join(root, "build", "libfluxon.so")


def test_a_bad_FLUXON_LIB_names_the_path():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    env = dict(os.environ, FLUXON_LIB="/nonexistent/libfluxon.so", PYTHONPATH=os.path.join(root, "python"))
    out = subprocess.run([sys.executable, "-c", "import fluxon"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert "/nonexistent/libfluxon.so" in out.stderr and "FLUXON_LIB" in out.stderr


def test_put_get_delete_exists(client):
    client.put("k1", b"hello")
    assert client.get("k1") == b"hello"
    assert client.exists("k1") and not client.exists("nope")
    client.put(b"k2", bytearray(b"x" * 300000))  # over the inline limit: the plan path
    assert client.get("k2") == b"x" * 300000
    client.put("k3", np.arange(1000, dtype=np.int32))
    assert np.frombuffer(client.get("k3"), np.int32).tolist() == list(range(1000))
    client.put("k4", array.array("d", [1.5, 2.5]))
    assert client.batch_exists(["k1", "k2", "missing", "k3"]) == 2
    client.delete("k1")
    with pytest.raises(fluxon.NotFound) as e:
        client.get("k1")
    assert e.value.name == "FLUXON_ERR_NOT_FOUND" and e.value.status == Status.ERR_NOT_FOUND
    with pytest.raises(fluxon.NotFound):
        client.delete("k1")
    with pytest.raises(fluxon.KeyExists):
        client.put("k2", b"y", reject_if_exists=True)
    assert sorted(client.list_keys("k")) == ["k2", "k3", "k4"]
    lid = client.lease_grant(60000)
    client.put("leased", b"v", lease_id=lid)
    client.put("local", b"v", local_first=True)
    quiet(client)


def test_stats_ping_segment_nodes(client):
    s = client.stats()
    assert "owner" in s and "client" in s
    assert client.ping() > 0 and client.ping(to_master=True) > 0
    node_id, base, length, gen = client.segment()
    assert node_id == "py0" and base % 4096 == 0 and length > 0
    assert {n["node_id"] for n in client.cluster_nodes() if n["role"] != "master"} == {"py0", "py1"}
    assert "puts" in client.master_stats()


def test_hostless_put_plan_views_and_arrays_round_trip(cluster, client):
    plan = client.put_start(["h0", "h1", "h2"], 8192)
    assert plan.statuses == [Status.OK] * 3 and len(plan) == 3
    assert all(p % 4096 == 0 for p in plan.value_ptrs)
    plan.view(0)[:] = b"a" * 8192
    a = plan.array(1, dtype=np.float64, shape=(8, 128))
    a[:] = 3.25
    del a
    v2 = plan.views[2]
    v2[0:4] = b"wxyz"
    fut = plan.commit()
    fut.wait(10)
    assert fut.done() and fut.status() == Status.OK
    with pytest.raises(ValueError):  # the put plan's views die with the commit
        v2[0]
    other = cluster.client(1)
    h = other.get_start(["h0", "h1", "h2", "absent"])
    assert (h.raw_prefix_hit_len, h.transferable_len, h.first_miss_index) == (3, 3, 3)
    assert h.miss_status == Status.ERR_NOT_FOUND and not h.all_hit
    with h.transfer() as rp:
        assert rp.value_lens == [8192] * 3
        assert bytes(rp.view(0)) == b"a" * 8192
        assert (rp.array(1, np.float64) == 3.25).all()
        assert rp.tobytes(2)[:4] == b"wxyz"
        assert rp.view(0).readonly
        with pytest.raises(TypeError):
            rp.view(0)[0] = 1
    gc.collect()
    quiet(other)
    other.close()


def test_released_views_raise_and_double_release_is_wrong_handle(client):
    client.batch_put_from(["r0"], [b"z" * 4096])
    h = client.get_start(["r0"])
    rp = h.transfer()
    v = rp.view(0)
    rp.release()
    with pytest.raises(ValueError, match="released"):
        bytes(v)
    with pytest.raises(fluxon.WrongHandle) as e:
        rp.release()
    assert e.value.name == "FLUXON_ERR_WRONG_HANDLE"
    with pytest.raises(fluxon.WrongHandle):
        rp.view(0)
    with pytest.raises(fluxon.WrongHandle):
        rp.release_views()
    with pytest.raises(fluxon.WrongHandle):
        h.get_transfer()
    with pytest.raises(fluxon.WrongHandle):
        h.cancel()
    # a live numpy array blocks the release: it could not be invalidated
    rp = client.get_start(["r0"]).transfer()
    arr = rp.array(0)
    with pytest.raises(fluxon.Busy, match="numpy"):
        rp.release()
    del arr
    rp.release()
    # so does any buffer made from a view (they would outlive the slot): a slice, a
    # memoryview of the view, numpy.frombuffer; dropped, the plan is consumed as usual
    for make in (lambda v: v[0:8], memoryview, lambda v: np.frombuffer(v, np.uint8)):
        p = client.put_start(["r-derived"], 4096)
        d = make(p.view(0))
        with pytest.raises(fluxon.Busy, match="made from its views"):
            p.commit()
        assert p.view(0)[0] == d[0]  # the plan is still live, its views still work
        del d
        p.abort()
    # put plans: double commit / abort after commit
    p = client.put_start(["r1"], 4096)
    p.commit().wait(5)
    with pytest.raises(fluxon.WrongHandle):
        p.commit()
    with pytest.raises(fluxon.WrongHandle):
        p.abort()
    p = client.put_start(["r2"], 4096)
    p.abort()
    with pytest.raises(fluxon.WrongHandle):
        p.abort()
    assert not client.exists("r2")
    quiet(client)


def test_wrong_types_and_values_raise_clear_errors(client):
    with pytest.raises(TypeError, match="key"):
        client.put(123, b"x")
    with pytest.raises(TypeError, match="not a buffer"):
        client.put("k", 12345)
    with pytest.raises(ValueError, match="1..1024"):
        client.put("", b"x")
    with pytest.raises(ValueError, match="1..1024"):
        client.get("x" * 1025)
    with pytest.raises(TypeError, match="sequence of keys"):
        client.batch_exists("abc")
    with pytest.raises(ValueError, match="at least one key"):
        client.batch_exists([])
    with pytest.raises(ValueError, match="value_len"):
        client.put_start(["a"], 0)
    with pytest.raises(ValueError, match="atomic_groups"):
        client.put_start(["a", "b"], 4096, atomic_groups=[3])
    with pytest.raises(ValueError, match="buffers"):
        client.batch_put_from(["a", "b"], [b"x"])
    with pytest.raises(ValueError, match="read-only"):
        client.batch_get_into(["a"], [b"immutable"])
    with pytest.raises(ValueError, match="C-contiguous"):
        client.batch_put_from(["a"], [np.zeros((8, 8))[:, ::2]])
    with pytest.raises(fluxon.InvalidArgument) as e:  # the C library's check: lengths differ
        client.batch_put_from(["a", "b"], [b"x" * 10, b"y" * 11])
    assert isinstance(e.value, ValueError) and e.value.status == Status.ERR_INVALID_ARGUMENT
    with pytest.raises(fluxon.ConfigError):
        fluxon.Node({"role": "nonsense"})
    with pytest.raises(fluxon.Unavailable):
        fluxon.Client("/nonexistent/dir/s.sock", cluster_id="pytest", timeout_ms=500)
    quiet(client)


def test_bad_arguments_are_refused_naming_the_parameter(cluster, client):
    """A new user's fuzzing (session 39): these leaked UnicodeEncodeError, AttributeError
    ('encode'), "'NoneType' object is not iterable", int()'s message, or reached the library
    as wrapped unsigned numbers; each now raises TypeError or ValueError naming the argument."""
    # a lone surrogate has no UTF-8 form (only list_keys' escapes \udc80..\udcff stand for bytes)
    for call in (lambda: client.put("\ud800", b"x"), lambda: client.get("a\ud800"),
                 lambda: client.delete("\ud800")):
        with pytest.raises(ValueError, match=r"^key: not encodable as UTF-8: '\\ud800' at index \d"):
            call()
    with pytest.raises(ValueError, match=r"^keys\[1\]: not encodable as UTF-8"):
        client.batch_exists(["a", "\ud800"])
    with pytest.raises(ValueError, match=r"^key: not encodable as UTF-8"):
        client.exists("\ud800")
    with pytest.raises(ValueError, match=r"^prefix: not encodable as UTF-8"):
        client.list_keys(prefix="\ud800")
    with pytest.raises(ValueError, match=r"^after: not encodable as UTF-8"):
        client.list_keys(after="\ud800")
    client.put("esc\udcff", b"v")  # an escape still names its byte
    assert client.get(b"esc\xff") == b"v"
    # key sequences: None is no sequence; a numpy array of str is one
    for call in (client.batch_exists, client.prefetch, lambda k: client.pin(k, 0),
                 lambda k: client.put_start(k, 8), client.get_start, lambda k: client.batch_put_from(k, []),
                 lambda k: client.batch_get_into(k, []), lambda k: client.batch_put_from_ptrs(k, [], []),
                 lambda k: client.batch_get_into_ptrs(k, [], [])):
        with pytest.raises(TypeError, match=r"^keys: a sequence of keys, not NoneType$"):
            call(None)
    client.put("np0", b"x")
    client.prefetch(np.array(["np0", "absent"]))  # was numpy's "truth value ... is ambiguous"
    assert client.batch_exists(np.array(["np0", "absent"])) == 1
    with pytest.raises(TypeError, match=r"^buffers: a sequence of buffers, not NoneType$"):
        client.batch_put_from(["a"], None)
    with pytest.raises(TypeError, match=r"^atomic_groups: a sequence of group lengths, not int$"):
        client.put_start(["a", "b"], 8, atomic_groups=2)
    with pytest.raises(TypeError, match=r"^atomic_groups\[0\]: an int, not float$"):  # int() took 1.5 as 1
        client.put_start(["a", "b"], 8, atomic_groups=[1.5, 1])
    with pytest.raises(TypeError, match=r"^make_replica_task_mask: a sequence of bools"):
        client.put_start(["a"], 8, make_replica_task_mask=1)
    # raw addresses and lengths: -1 reached C as 2**64-1
    buf = np.full(8, 5, np.uint8)
    with pytest.raises(fluxon.InvalidArgument, match=r"^ptrs\[0\]: .*\(-1 is outside 0\.\.18446744073709551615\)"):
        client.batch_get_into_ptrs(["np0"], [-1], [8])
    with pytest.raises(fluxon.InvalidArgument, match=r"^caps\[0\]: .*\(-8 is outside"):
        client.batch_get_into_ptrs(["np0"], [buf.ctypes.data], [-8])
    with pytest.raises(fluxon.InvalidArgument, match=r"^lens\[1\]: .*\(-1 is outside"):
        client.batch_put_from_ptrs(["pn0", "pn1"], [buf.ctypes.data] * 2, [8, -1])
    with pytest.raises(TypeError, match=r"^lens\[0\]: an int, not float$"):
        client.batch_put_from_ptrs(["pn0"], [buf.ctypes.data], [8.0])
    with pytest.raises(TypeError, match=r"^ptrs: a sequence of ints, not NoneType$"):
        client.batch_put_from_ptrs(["pn0"], None, [8])
    assert client.batch_exists(["pn0"]) == 0
    assert client.batch_put_from_ptrs(["pn0"], np.array([buf.ctypes.data], np.uint64), [np.int64(8)]) == [Status.OK]
    assert client.get("pn0") == bytes(buf)
    # other str arguments: str or bytes (as keys), no NUL (a C string ends there)
    assert client.put("psc", b"x", preferred_sub_cluster=b"x") == Status.OK and client.get("psc") == b"x"
    with pytest.raises(TypeError, match=r"^preferred_sub_cluster: str or bytes, not int$"):
        client.put("psc2", b"x", preferred_sub_cluster=5)
    with pytest.raises(ValueError, match=r"^preferred_sub_cluster: a NUL byte at index 1"):
        client.put("psc2", b"x", preferred_sub_cluster="a\0b")
    with pytest.raises(TypeError, match=r"^tenant: str or bytes, not int$"):
        client.tenant_set(5, quota_bytes=1)
    with pytest.raises(TypeError, match=r"^tenant: str or bytes, not NoneType$"):
        client.tenant_set(None, quota_bytes=1)
    with pytest.raises(ValueError, match=r"^tenant: not encodable as UTF-8"):
        client.tenant_set("\ud800", quota_bytes=1)
    with pytest.raises(ValueError, match=r"^tenant: a NUL byte"):  # ctypes would have sent "nobody"
        client.tenant_set("nobody\0x", quota_bytes=1)
    with pytest.raises(TypeError, match=r"^admin_token: str or bytes, not int$"):
        client.tenant_set("nobody", quota_bytes=1, admin_token=5)
    with pytest.raises(fluxon.NotFound, match="not known to this owner"):  # bytes reach the owner
        client.tenant_set(b"nobody", quota_bytes=1, admin_token=b"x")
    with pytest.raises(TypeError, match=r"^lease_id: an int, not str$"):  # int() took "7"
        client.put("le", b"x", lease_id="7")
    with pytest.raises(TypeError, match=r"^lease_grant ttl_ms: an int, not str$"):
        client.lease_grant("abc")
    assert not client.exists("psc2") and not client.exists("le")
    # the client's own arguments
    sock = cluster.socket(0)
    with pytest.raises(TypeError, match=r"^timeout_ms: an int, not str$"):  # was int()'s "invalid literal"
        fluxon.Client(sock, cluster_id="pytest", cluster_token="tok", timeout_ms="abc")
    with pytest.raises(TypeError, match=r"^timeout_ms: an int, not float$"):  # int() made it a 1 ms timeout
        fluxon.Client(sock, cluster_id="pytest", cluster_token="tok", timeout_ms=1.5)
    with pytest.raises(ValueError, match=r"^socket: not encodable as UTF-8"):
        fluxon.Client("/tmp/\ud800.sock")
    with pytest.raises(TypeError, match=r"^socket: str or bytes, not int$"):
        fluxon.Client(5)
    with pytest.raises(ValueError, match=r"^cluster_token: a NUL byte at index 1"):
        fluxon.Client(sock, cluster_id="pytest", cluster_token="t\0k")
    with pytest.raises(ValueError, match=r"^cluster_id: bytes that are not UTF-8 \(0xff at index 0\)"):
        fluxon.Client(sock, cluster_id=b"\xff")
    with pytest.raises(TypeError, match=r"^config: a dict of config members, not str$"):
        fluxon.Client(sock, config="tenant")
    with pytest.raises(TypeError, match=r"^config\['tenant'\]: not JSON: Object of type bytes"):
        fluxon.Client(sock, cluster_id="pytest", cluster_token="tok", config={"tenant": b"x"})
    import pathlib  # a path object and bytes name the same socket and token as str (str() made b'...' of bytes)
    for c in (fluxon.Client(pathlib.Path(sock), cluster_id=b"pytest", cluster_token=b"tok"),
              fluxon.Client(sock.encode(), cluster_id="pytest", cluster_token="tok", timeout_ms=np.int64(5000))):
        assert c.get("np0") == b"x"
        c.close()
    quiet(client)


def test_plan_arrays_and_future_waits_check_their_arguments(client):
    p = client.put_start(["pd"], 10)
    with pytest.raises(ValueError, match=r"^dtype 'float64': value 0 is 10 bytes, not a multiple of its item "
                                         r"size \(8 bytes\)$"):  # was numpy's "When changing to a larger dtype"
        p.array(0, dtype="float64")
    with pytest.raises(TypeError, match=r"^dtype 'bogus': "):
        p.array(0, dtype="bogus")
    with pytest.raises(TypeError, match=r"^dtype .*: an object dtype holds pointers"):
        p.array(0, dtype=object)
    with pytest.raises(ValueError, match=r"^shape \(3,\): value 0 is 5 items of uint16 \(10 bytes\)"):
        p.array(0, dtype="<u2", shape=(3,))
    a = p.array(0, dtype="<u2", shape=(5,))  # the refusals left no array behind: the commit is not Busy
    a[:] = 0x0707
    del a
    f = p.commit()
    with pytest.raises(ValueError, match=r"^timeout: nan is not a number of seconds"):  # was int()'s message
        f.wait(float("nan"))
    with pytest.raises(TypeError, match=r"^timeout: seconds \(a number, or None: forever\), not str$"):
        f.wait("1")
    f.wait(10)
    f.wait(-5)  # done: 0 or less polls (as documented), it does not raise
    f.wait(float("inf"))
    f.wait(10 ** 400)  # past a float's range: the longest wait, not OverflowError
    assert client.get("pd") == b"\x07" * 10
    f.free()
    quiet(client)


def test_wrong_token_is_auth(cluster):
    with pytest.raises(fluxon.AuthError):
        fluxon.Client(cluster.socket(0), cluster_id="pytest", cluster_token="wrong")


def test_batch_put_from_and_get_into_with_every_buffer_kind(cluster, client):
    class Tensorish:  # what torch offers: data_ptr(), numel(), element_size(), device
        def __init__(self, a):
            self.a = a
            self.device = "cpu"

        def data_ptr(self):
            return self.a.ctypes.data

        def numel(self):
            return self.a.size

        def element_size(self):
            return self.a.itemsize

        def is_contiguous(self):
            return True

    src = [bytes(range(256)) * 16, bytearray(b"b" * 4096), np.full(1024, 7, np.int32),
           memoryview(bytearray(b"m" * 4096)), Tensorish(np.full(512, 9, np.int64))]
    keys = [f"bk{i}" for i in range(len(src))]
    assert client.batch_put_from(keys, src) == [Status.OK] * 5
    assert client.batch_put_from(keys[:2], src[:2]) == [Status.ERR_KEY_EXISTS] * 2
    dst = [bytearray(4096), np.zeros(4096, np.uint8), np.zeros(1024, np.int32), memoryview(bytearray(4096)),
           Tensorish(np.zeros(512, np.int64))]
    other = cluster.client(1)
    r = other.batch_get_into(keys + ["bk-absent"], dst + [bytearray(4096)])
    assert r.n_restored == 5 and r.value_lens[:5] == [4096] * 5
    assert r.statuses == [Status.OK] * 5 + [Status.ERR_NOT_FOUND]
    assert bytes(dst[0]) == src[0] and bytes(dst[1]) == b"b" * 4096 and (dst[2] == 7).all()
    assert bytes(dst[3]) == b"m" * 4096 and (dst[4].a == 9).all()
    # prefix semantics, groups, all-or-nothing
    r = other.batch_get_into(["bk0", "nope", "bk1"], [bytearray(4096) for _ in range(3)])
    assert r.n_restored == 1 and r.statuses == [Status.OK, Status.ERR_NOT_FOUND, Status.ERR_CANCELLED]
    r = other.batch_get_into(["bk0", "bk1", "bk2", "nope"], [bytearray(4096) for _ in range(4)],
                             atomic_groups=[2, 2])
    assert r.n_restored == 2 and r.statuses[2] == Status.ERR_GROUP_REJECTED
    r = other.batch_get_into(["bk0", "nope"], [bytearray(4096) for _ in range(2)], prefix_best_effort=False)
    assert r.n_restored == 0 and r.statuses == [Status.ERR_GROUP_REJECTED, Status.ERR_NOT_FOUND]
    # too small a destination: InvalidArgument naming the key, with what was restored
    with pytest.raises(fluxon.InvalidArgument, match="key 1") as e:
        other.batch_get_into(["bk0", "bk1"], [bytearray(4096), bytearray(100)])
    assert e.value.result.n_restored == 1
    # too large a destination (a short value under the key): not restored as good either
    big = bytearray(b"\xab" * 8192)
    with pytest.raises(fluxon.InvalidArgument, match="key 1") as e:
        other.batch_get_into(["bk0", "bk1"], [bytearray(4096), big])
    assert e.value.result.n_restored == 1 and e.value.result.statuses[1] == Status.ERR_INVALID_ARGUMENT
    assert big == bytearray(b"\xab" * 8192)
    # atomic groups on put: one member exists, the group is rejected
    st = client.batch_put_from(["g0", "bk0"], [b"x" * 4096, b"y" * 4096], atomic_groups=[2])
    assert st == [Status.ERR_GROUP_REJECTED, Status.ERR_KEY_EXISTS]
    quiet(client)
    quiet(other)
    other.close()


def test_string_and_object_arrays_are_measured_in_bytes_or_refused(client):
    # a new user's finding (session 39): "<U4" was read as 4 bytes an element (it is 16,
    # UCS-4): a put stored a quarter of the array and a get filled a quarter of it, both OK
    a = np.array(["abcd", "efgh"])
    assert a.nbytes == 32
    client.put("u", a)
    assert client.get("u") == a.tobytes()
    dst = np.empty(2, "<U4")
    n, st, lens = client.batch_get_into(["u"], [dst])
    assert n == 1 and lens == [32] and dst.tolist() == ["abcd", "efgh"]
    b = np.array([b"ab", b"cd", b"ef"])  # "|S2": 2 bytes an element
    client.put("s", b)
    assert client.get("s") == b"abcdef"
    with pytest.raises(TypeError, match="object array"):
        client.put("o", np.array([1, "x"], dtype=object))
    assert not client.exists("o")


def test_a_node_refused_names_its_own_reason_not_an_earlier_calls():
    # a new user's finding (session 39): fluxon_node_start kept the thread's last-error
    # message of the call before it, so Node() named a missing socket for a missing cluster_id
    with pytest.raises(fluxon.FluxonError, match="no owner listens"):
        fluxon.Client("/nonexistent-fluxon-dir/x.sock", log_level="off")
    with pytest.raises(fluxon.FluxonError, match="cluster_id") as e:
        fluxon.Node({"role": "owner", "log_level": "off"})
    assert "no owner listens" not in str(e.value)
    with pytest.raises(fluxon.FluxonError, match="listen") as e:
        fluxon.Node({"role": "master", "cluster_id": "c", "listen": "bogus", "log_level": "off"})


def test_a_node_config_that_is_not_a_json_object_says_where():
    # a new user's finding (session 39): Node("{garbage") leaked json's JSONDecodeError,
    # Node("[1]") an AttributeError, a str with a lone surrogate UnicodeEncodeError
    with pytest.raises(fluxon.ConfigError, match=r"node_start: FLUXON_ERR_CONFIG \(config: not JSON: Expecting "
                                                  r"property name .* at line 1 column 2 \(char 1\)\)"):
        fluxon.Node("{garbage")
    with pytest.raises(fluxon.ConfigError, match=r"config: a JSON object, not list"):
        fluxon.Node("[1]")
    with pytest.raises(fluxon.ConfigError, match=r"config: not encodable as UTF-8: '\\ud800' at index 10"):
        fluxon.Node('{"role": "\ud800"}')
    with pytest.raises(TypeError, match=r"^config: a dict or a JSON str, not int$"):
        fluxon.Node(5)
    with pytest.raises(TypeError, match=r"^config\['role'\]: not JSON: Object of type bytes"):
        fluxon.Node({"role": b"master"})
    with pytest.raises(ValueError, match=r"^config\['listen'\]: not JSON: Out of range float"):
        fluxon.Node({"role": "master", "listen": float("nan")})
    n = fluxon.Node('{"role": "master", "cluster_id": "c", "listen": "127.0.0.1:0", "log_level": "off"}')
    assert n.port > 0 and n.config["cluster_id"] == "c"  # a JSON str still starts a node
    n.stop()


def test_integers_past_64_bits_are_refused_not_wrapped(client):
    # a new user's finding (session 39): ctypes wrapped them: lease_grant(2**64 + 60000)
    # granted a 60 s lease, transfer(2**64) meant "all"
    with pytest.raises(fluxon.InvalidArgument, match="lease_grant ttl_ms"):
        client.lease_grant(2**64 + 60000)
    for bad in (-1, 0, 86400001):  # the C call's range, named (not the u64's)
        with pytest.raises(fluxon.InvalidArgument, match=r"lease_grant ttl_ms.*outside 1\.\.86400000 ms"):
            client.lease_grant(bad)
    client.put("w0", b"x")
    h = client.get_start(["w0"])
    with pytest.raises(fluxon.InvalidArgument, match="consume_prefix_len"):
        h.transfer(2**64)
    h.transfer().release()
    with pytest.raises(fluxon.InvalidArgument, match="lease_id"):
        client.put_start(["w1"], 8, lease_id=2**64).abort()


def test_a_client_without_log_level_keeps_the_process_level():
    # a new user's finding (session 39): a client whose config named no log_level set the
    # process-wide level back to info, and the nodes started with "off" logged again
    code = ("import fluxon\n"
            "with fluxon.LocalCluster(owners=1, log_level='off') as lc:\n"
            "    c = fluxon.Client(lc.socket(0), cluster_id=lc.cluster_id)\n"
            "    c.put('k', b'v'); c.close()\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert " INFO " not in r.stderr and " WARN " not in r.stderr, r.stderr[-2000:]


def test_no_holders_leak_after_garbage_collection(client):
    client.batch_put_from([f"gc{i}" for i in range(8)], [b"q" * 4096] * 8)
    for _ in range(3):
        rp = client.get_start([f"gc{i}" for i in range(8)]).transfer()
        views = rp.views
        assert len(views) == 8
        del rp, views  # never released explicitly
        client.get_start(["gc0", "gc1"])  # a handle dropped unconsumed
        client.put_start(["gc-never"], 4096)  # a put plan dropped: aborted
    gc.collect()
    quiet(client)
    assert not client.exists("gc-never")


def test_client_close_invalidates_views_and_later_calls_raise(cluster):
    c = cluster.client(0)
    c.batch_put_from(["cl0"], [b"c" * 4096])
    rp = c.get_start(["cl0"]).transfer()
    v = rp.view(0)
    c.close()
    with pytest.raises(ValueError):
        bytes(v)
    with pytest.raises(fluxon.InvalidArgument, match="closed"):  # the status's subclass (was the base class)
        c.get("cl0")
    c.close()  # twice: a no-op
    c2 = cluster.client(0)
    wait_stat(c2, "holders", 0)
    c2.close()


def test_a_commit_refused_for_a_numpy_array_keeps_the_views(client):
    p = client.put_start(["busy-v"], 4096)
    v = p.view(0)
    a = p.array(0)
    with pytest.raises(fluxon.Busy, match="numpy"):
        p.commit()
    v[0] = 7  # the view the caller holds still works: nothing was released
    assert a[0] == 7
    del a
    p.commit().wait(5)
    with pytest.raises(ValueError, match="released"):
        v[0]
    assert client.get("busy-v")[0] == 7
    quiet(client)


def test_close_with_a_live_array_keeps_the_client_open_until_it_goes(cluster):
    c = cluster.client(0)
    p = c.put_start(["kept"], 4096)
    a = p.array(0)
    sl = p.view(0)[0:8]  # a buffer made from a view holds the client too
    c.close()
    assert c.closed
    with pytest.raises(fluxon.FluxonError, match="closed"):
        c.get("kept")
    a[:4] = 9  # the segment is still mapped and the slot still held: no crash
    assert bytes(a[:4]) == b"\x09" * 4 and sl[0] == 9
    c2 = cluster.client(0)
    wait_stat(c2, "slots_prepared", 1)  # the connection is open: the owner keeps the slot
    del a, p
    gc.collect()
    assert sl.obj._fx_keep.c is not None  # the slice still holds the client open
    del sl
    gc.collect()
    wait_stat(c2, "slots_prepared", 0)  # the last one gone: the client closed, the plan aborted
    assert not c2.exists("kept")
    c2.close()


def test_a_buffer_made_from_a_view_keeps_its_dropped_plan(client):
    """A plan dropped unconsumed gives its slots back when collected: not while a slice of
    one of its views lives (the slice would then write into a slot another put may get)."""
    p = client.put_start(["held-by-slice"], 4096)
    sl = p.view(0)[0:8]
    r = weakref.ref(p)
    del p
    gc.collect()
    assert r() is not None, "the slice keeps the plan"
    sl[0] = 3  # still its own slot
    del sl
    gc.collect()
    assert r() is None
    quiet(client)  # the plan was aborted: its slot went back
    assert not client.exists("held-by-slice")


def test_concurrent_closes_close_once(cluster):
    c = cluster.client(0)
    errs = []

    def closer():
        try:
            c.close()
        except Exception as e:  # noqa: BLE001 -- any exception is the failure
            errs.append(e)
    ts = [threading.Thread(target=closer) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert not errs and c.closed
    c2 = cluster.client(0)
    wait_stat(c2, "externals", 1)  # the first client's connection went: only c2's is left
    c2.close()


def test_list_keys_checks_its_arguments(client):
    with pytest.raises(TypeError, match="prefix"):
        client.list_keys(prefix=5)  # bytes(5) would have been five NUL bytes: every key
    with pytest.raises(ValueError, match="prefix"):
        client.list_keys(prefix="a\0b")
    with pytest.raises(TypeError, match="after"):
        client.list_keys(after=3.5)
    with pytest.raises(ValueError, match="1..10000"):
        client.list_keys(limit=0)
    with pytest.raises(TypeError, match="limit"):
        client.list_keys(limit="10")
    assert client.list_keys(prefix=None) == client.list_keys()


def test_close_waits_for_the_calls_of_other_threads(cluster):
    """close() while other threads use the client: their calls finish or raise "closed",
    never touch a freed client (this crashed the process about 1 round in 20)."""
    import threading
    for rnd in range(20):
        c = cluster.client(0)
        stop, errors = threading.Event(), []

        def loop():
            key = f"cl-race-{threading.get_ident()}"
            try:
                while not stop.is_set():
                    c.put(key, b"x" * 100)
                    c.get(key)
            except fluxon.FluxonError as e:
                if "closed" not in str(e):
                    errors.append(e)

        ts = [threading.Thread(target=loop) for _ in range(3)]
        for t in ts:
            t.start()
        time.sleep(0.02)
        c.close()
        stop.set()
        for t in ts:
            t.join(10)
        assert not any(t.is_alive() for t in ts), f"round {rnd}: a thread is stuck"
        assert not errors, f"round {rnd}: {errors[0]!r}"


def test_a_key_that_is_not_utf8_is_listed_and_round_trips(client):
    client.put(b"bin\xff\xfekey", b"v")
    keys = client.list_keys("bin")
    assert len(keys) == 1, keys
    assert client.get(keys[0]) == b"v"  # the listed str names the same bytes
    client.delete(keys[0])
    assert client.list_keys(b"bin") == [] and client.list_keys(None) is not None


def test_a_get_during_concurrent_overwrites_finds_a_version(client):
    """Three threads overwrite one key (the master places the versions on either owner) and
    read it back: every get finds a whole version. A fetched copy whose version was replaced
    before its GET_DONE used to be reported as a miss (~1 % of the gets)."""
    import threading
    client.put("ow", b"A" * 100)
    stop, got, bad = threading.Event(), [0], []

    def loop(i):
        while not stop.is_set():
            client.put("ow", bytes([65 + i]) * 100)
            try:
                v = client.get("ow")
            except fluxon.FluxonError as e:
                bad.append(repr(e))
                continue
            got[0] += 1
            if len(v) != 100 or len(set(v)) != 1 or v[:1] not in (b"A", b"B", b"C"):
                bad.append(f"a torn value {v[:8]!r}")

    ts = [threading.Thread(target=loop, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    time.sleep(1.5)
    stop.set()
    for t in ts:
        t.join(10)
    assert got[0] > 100 and not bad, (got[0], bad[:3])
    assert client.stats()["owner"]["get_relookups"] >= 0


def test_bad_indices_lengths_and_timeouts_are_refused(client):
    for bad in (True, 2 ** 64 + 4096, 0, -1, 1.5):
        with pytest.raises(ValueError, match="value_len"):
            client.put_start(["bi"], bad)
    client.batch_put_from(["bi"], [b"q" * 4096])
    rp = client.get_start(["bi"]).transfer()
    for bad in (-1, 1, True):
        with pytest.raises(IndexError):
            rp.tobytes(bad)
        with pytest.raises(IndexError):
            rp.view(bad)
    assert rp.tobytes(0) == b"q" * 4096
    rp.release()
    p = client.put_start(["bi2"], 4096)
    with pytest.raises(IndexError):
        p.array(-1)
    p.view(0)[:] = b"w" * 4096
    p.commit().wait(float("inf"))  # inf: no bound, like None
    assert client.get("bi2") == b"w" * 4096


def test_keys_given_as_an_iterator_are_all_used(client):
    p = client.put_start((k for k in ["g1", b"g2", "g3"]), 4096)
    assert p.keys == ["g1", "g2", "g3"], p.keys
    p.abort()
    client.put("it-x", b"v")
    assert client.batch_exists(k for k in ["nokey", b"it-x"]) == client.batch_exists(["nokey", b"it-x"])
    assert client.batch_exists(map(str.encode, ["it-x"])) == 1


def test_future_is_awaitable_in_asyncio(client):
    async def main():
        plans = [client.put_start([f"as{i}"], 4096) for i in range(4)]
        for p in plans:
            p.view(0)[:4] = b"asyn"
        futs = [p.commit() for p in plans]
        await asyncio.wait_for(asyncio.gather(*futs), 10)
        return [f.status() for f in futs]

    assert asyncio.run(main()) == [Status.OK] * 4
    assert client.get("as3")[:4] == b"asyn"
    f = client.put_start(["as-fd"], 4096).commit()
    assert f.fileno() >= 0
    f.wait(5)
    f.free()
    with pytest.raises(fluxon.WrongHandle):
        f.wait(1)


def test_node_roles_and_ports():
    with fluxon.LocalCluster(owners=1, cluster_id="nodes") as lc:
        assert lc.master.port > 0 and lc.owners[0].port == 0
        with lc.client() as c:
            c.put("n", b"1")
    lc.stop()  # twice: harmless


def test_make_install_installs_a_package_that_finds_its_library(tmp_path):
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    r = subprocess.run(["make", "-s", "install", f"DESTDIR={tmp_path}", "PREFIX=/usr"], cwd=root,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ver = "python%d.%d" % sys.version_info[:2]
    site = tmp_path / "usr" / "lib" / ver / "dist-packages"
    assert (site / "fluxon" / "sglang.py").exists()
    assert (site / "fluxon" / "vllm" / "core.py").exists() and (site / "fluxon" / "vllm" / "connector.py").exists()
    env = {k: v for k, v in os.environ.items() if k != "FLUXON_LIB"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", "import fluxon, fluxon.vllm.core; print(fluxon.library_path)"], env=env, cwd="/",
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / "usr" / "lib" / "libfluxon.so.0")


def test_every_c_status_has_a_python_status():
    """fluxon.h's statuses, by their C names, are all in Status (UNKNOWN_OUTCOME included)."""
    import re
    hdr = open(os.path.join(os.path.dirname(__file__), "..", "..", "include", "fluxon.h")).read()
    start = re.search(r"FLUXON_OK\s*=\s*0", hdr).start()
    body = hdr[start:hdr.index("};", start)]
    codes = {n: int(v) for n, v in re.findall(r"(FLUXON_\w+)\s*=\s*(-?\d+)", body)}
    assert len(codes) >= 20 and codes["FLUXON_ERR_UNKNOWN_OUTCOME"] == -19
    for name, v in codes.items():
        assert Status(v).c_name == name
    assert isinstance(fluxon.errors.error_for(-19), fluxon.UnknownOutcome)


def test_replica_task_flag_and_mask():
    """make_replica_task copies every atomic group to the remote_cache owner; a mask only
    the groups it marks; a mask that differs inside a group is refused."""
    with fluxon.LocalCluster(owners=2, cluster_id="repl", owner_configs=[{}, {"node_role": "remote_cache"}]) as lc:
        c = lc.client(0)
        buf = b"r" * 4096

        def appended(want):
            end = time.monotonic() + 10
            while c.master_stats().get("append_keys_completed") != want:
                assert time.monotonic() < end, f"append_keys_completed {want} within 10 s"
                time.sleep(0.01)

        assert c.batch_put_from([f"m{i}" for i in range(4)], [buf] * 4, atomic_groups=[2, 2],
                                make_replica_task_mask=[1, 1, 0, 0]) == [Status.OK] * 4
        appended(2)
        assert c.batch_put_from(["f0", "f1"], [buf] * 2, atomic_groups=[2], make_replica_task=True) == [Status.OK] * 2
        appended(4)
        plan = c.put_start(["p0"], 4096, make_replica_task_mask=[True])
        plan.view(0)[:] = buf
        plan.commit().wait()
        appended(5)
        assert c.batch_put_from(["n0"], [buf]) == [Status.OK]  # no flag: no copy
        with pytest.raises(fluxon.InvalidArgument):
            c.batch_put_from(["x0", "x1"], [buf] * 2, atomic_groups=[2], make_replica_task_mask=[1, 0])
        with pytest.raises(ValueError, match="make_replica_task_mask"):
            c.batch_put_from(["y0"], [buf], make_replica_task_mask=[1, 1])
        assert c.master_stats()["append_keys_completed"] == 5
        quiet(c)
        c.close()


def test_tenant_set_quotas_and_guarantees():
    """Client.tenant_set (issue 42 quotas): by the tenant's own client or the admin token,
    visible in stats; refusals raise with the matching error and change nothing."""
    extra = {"tenant_admin_token": "adm", "hot_capacity_bytes": "1MiB",
             "tenants": {"acme": {"token": "s", "quota_bytes": "512KiB"}, "beta": {"token": "b"}}}
    with fluxon.LocalCluster(owners=1, cluster_id="quota", owner_extra=extra) as lc:
        a = lc.client(0, config={"tenant": "acme", "tenant_token": "s"})
        b = lc.client(0, config={"tenant": "beta", "tenant_token": "b"})
        t = a.stats()["owner"]["tenants"]["acme"]
        assert (t["quota_bytes"], t["guaranteed_bytes"]) == (512 * 1024, 0)
        a.tenant_set("acme", quota_bytes=256 * 1024)  # its own client may lower it
        with pytest.raises(fluxon.AuthError):
            a.tenant_set("acme", guaranteed_bytes=64 * 1024)  # ... not raise its guarantee
        b.tenant_set("acme", guaranteed_bytes=128 * 1024, admin_token="adm")
        t = a.stats()["owner"]["tenants"]["acme"]
        assert (t["quota_bytes"], t["guaranteed_bytes"]) == (256 * 1024, 128 * 1024)
        with pytest.raises(fluxon.AuthError):
            b.tenant_set("acme", quota_bytes=1)
        with pytest.raises(fluxon.NotFound):
            a.tenant_set("gamma", quota_bytes=1, admin_token="adm")
        with pytest.raises(fluxon.InvalidArgument):
            a.tenant_set("acme", guaranteed_bytes=512 * 1024, admin_token="adm")  # above its quota
        with pytest.raises(ValueError, match="give quota_bytes"):
            a.tenant_set("acme")
        with pytest.raises(ValueError, match="quota_bytes"):
            a.tenant_set("acme", quota_bytes=-1)
        assert a.stats()["owner"]["quota_changes"] == 2
        with pytest.raises(fluxon.AuthError):  # bytes, as str: the token is checked, not 'encode' missing
            b.tenant_set(b"acme", quota_bytes=1, admin_token=b"wrong")
        b.tenant_set(b"acme", guaranteed_bytes=64 * 1024, admin_token=b"adm")
        t = a.stats()["owner"]["tenants"]["acme"]
        assert (t["quota_bytes"], t["guaranteed_bytes"]) == (256 * 1024, 64 * 1024)
        a.close()
        b.close()


def test_pins_put_and_pin_with_a_tenant_budget():
    """pin_ttl_ms on put / batch_put_from and Client.pin (issue 42): within the tenant's
    pin budget OK, past it PIN_REFUSED with the value stored; unpin gives the budget back;
    per-tenant numbers in stats."""
    extra = {"tenants": {"acme": {"token": "s", "pinned_bytes_max": "8KiB"}}}
    with fluxon.LocalCluster(owners=1, cluster_id="pins", owner_extra=extra) as lc:
        c = lc.client(0, config={"tenant": "acme", "tenant_token": "s"})
        buf = b"p" * 4096
        assert c.put("a", buf, pin_ttl_ms=60000) == Status.OK
        assert c.batch_put_from(["b", "c"], [buf] * 2, pin_ttl_ms=60000) == [Status.OK, Status.PIN_REFUSED]
        assert c.get("c") == buf  # stored, unpinned
        assert c.put("d", buf, pin_ttl_ms=60000) == Status.PIN_REFUSED
        t = c.stats()["owner"]["tenants"]["acme"]
        assert (t["pinned_bytes"], t["pin_budget"], t["pins_refused"], t["bytes"]) == (8192, 8192, 2, 4 * 4096)
        assert c.pin(["a", "nope"], 0) == [Status.OK, Status.ERR_NOT_FOUND]
        assert c.pin(["c"], 60000, refresh_on_hit=True) == [Status.OK]
        assert c.stats()["owner"]["pinned_values"] == 2
        with pytest.raises(ValueError, match="ttl_ms"):
            c.pin(["a"], -1)
        with pytest.raises(ValueError, match="pin_ttl_ms"):
            c.put("e", buf, pin_ttl_ms=86400001)
        with pytest.raises(ValueError, match="at least one key"):
            c.pin([], 1000)
        c.close()


def test_prefetch_checks_its_keys_and_refusals_carry_the_owners_reason(client):
    client.put("k", b"v")
    client.prefetch(["k", "absent"])  # one-way: returns at once
    client.prefetch([])  # nothing to name: no call
    with pytest.raises(ValueError):  # checked in Python, as every key
        client.prefetch(["x" * 2000])
    from fluxon._lib import lib
    assert lib.fluxon_last_error_message() in (None, b"")  # the last call succeeded: no reason kept
    with pytest.raises(fluxon.InvalidArgument) as e:  # refused by the owner: its reason travels
        client.put("\x01acme/k", b"v")
    assert "reason:" in str(e.value) and "0x01" in str(e.value)


def test_the_python_md_example_runs_as_written():
    """docs/python.md's example is what a new user copies: it runs as written."""
    import re
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")).read()
    m = re.search(r"<!-- python-example:[^>]*-->\s*```python\n(.*?)```", doc, re.S)
    assert m, "docs/python.md has the marked example"
    exec(compile(m.group(1), "docs/python.md", "exec"), {})


def test_refusals_say_why_in_the_exception(cluster, client):
    """A new user saw only "FLUXON_ERR_CONFIG (socket ...)" whatever field was wrong; the
    reason was on stderr. Config refusals at open, a missing owner, an unknown tenant and a
    bad lease TTL now carry it."""
    sock = cluster.socket(0)
    for cfg, field in (({"log_level": "bogus"}, "log_level"), ({"cluster_id": 5}, "cluster_id"),
                       ({"tenant": "bad name!"}, "tenant")):
        with pytest.raises(fluxon.ConfigError, match=field):
            fluxon.Client(sock, config=cfg)
    with pytest.raises(fluxon.Unavailable, match="no owner listens"):
        fluxon.Client(sock + ".none")
    with pytest.raises(fluxon.NotFound, match="not known to this owner"):
        client.tenant_set("nobody", quota_bytes=1 << 20)
    with pytest.raises(fluxon.InvalidArgument, match="ttl_ms 0"):
        client.lease_grant(0)


def test_local_cluster_refuses_a_bad_owner_count():
    # a new user's finding (session 47): owners=0 started a master alone, and lc.client()
    # then failed with a bare IndexError
    for bad in (0, -1, 65):
        with pytest.raises(ValueError, match=r"^LocalCluster owners: -?\d+ is outside 1\.\.64$"):
            fluxon.LocalCluster(owners=bad)
    with pytest.raises(TypeError, match=r"^LocalCluster owners: an int, not str$"):
        fluxon.LocalCluster(owners="2")
    with pytest.raises(ValueError, match=r"owner_configs: 2 configs for 1 owner"):
        fluxon.LocalCluster(owners=1, owner_configs=[{}, {}])
