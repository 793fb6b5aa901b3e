"""fluxon.kvcopy: the fluxon_cuda.h bindings. The CPU reference through a real cluster
(pool pages -> put plan -> another owner's read plan -> pool pages, byte-exact against an
offset model written here from the header's layout table, whole and one layer at a time),
bad input refused, registration without a driver, and the GPU calls against the CPU
reference when torch sees a GPU (skipped otherwise)."""
import os

import numpy as np
import pytest

import fluxon
from fluxon import kvcopy
from conftest import quiet


def chunk_off(kind, page, layer, kv, L, P, c):
    """fluxon_cuda.h: LAYER_FIRST [layer][K|V][page][chunk], PAGE_FIRST [page][layer][K|V][chunk],
    MLA [layer][page][chunk]."""
    if kind == kvcopy.LAYER_FIRST:
        return ((layer * 2 + kv) * P + page) * c
    if kind == kvcopy.PAGE_FIRST:
        return ((page * L + layer) * 2 + kv) * c
    return (layer * P + page) * c


@pytest.mark.parametrize("kind", [kvcopy.LAYER_FIRST, kvcopy.PAGE_FIRST, kvcopy.MLA])
def test_cpu_reference_round_trip_through_the_cluster(cluster, kind):
    L, P, c = 3, 8, 4096
    kvf = 1 if kind == kvcopy.MLA else 2
    lay = kvcopy.layout(kind, L, c, P)
    assert lay.value_len == L * kvf * c and lay.pool_bytes == lay.value_len * P
    pool = np.random.default_rng(kind).integers(0, 256, lay.pool_bytes, dtype=np.uint8)
    a, b = cluster.client(0), cluster.client(1)
    keys = [f"kv{kind}-{i}" for i in range(2)]
    plan = a.put_start(keys, lay.value_len)
    kvcopy.backup_cpu(lay, pool, [3, 5], plan)
    for i, page in enumerate([3, 5]):  # the value is [l0 K][l0 V][l1 K]..., chunk by chunk
        v = np.frombuffer(bytes(plan.view(i)), np.uint8)
        for ly in range(L):
            for kv in range(kvf):
                o = chunk_off(kind, page, ly, kv, L, P, c)
                assert (v[(ly * kvf + kv) * c:(ly * kvf + kv + 1) * c] == pool[o:o + c]).all()
    plan.commit().wait()
    dst = np.zeros_like(pool)
    h = b.get_start(keys)
    rp = h.transfer()
    kvcopy.restore_cpu(lay, dst, np.array([6, 7], np.int64), rp)
    kvcopy.restore_cpu(lay, dst, [0], [rp.value_ptrs[0]], layer=1)  # one layer only
    rp.release()
    for src, to in ((3, 6), (5, 7)):
        for ly in range(L):
            for kv in range(kvf):
                o, t = chunk_off(kind, src, ly, kv, L, P, c), chunk_off(kind, to, ly, kv, L, P, c)
                assert (dst[t:t + c] == pool[o:o + c]).all()
    for ly in range(L):
        for kv in range(kvf):
            t, o = chunk_off(kind, 0, ly, kv, L, P, c), chunk_off(kind, 3, ly, kv, L, P, c)
            assert (dst[t:t + c] == (pool[o:o + c] if ly == 1 else 0)).all()
    quiet(a)
    a.close()
    b.close()


def test_bad_input_is_refused(cluster):
    with pytest.raises(fluxon.InvalidArgument):
        kvcopy.layout(9, 3, 4096, 8)
    with pytest.raises(fluxon.InvalidArgument):
        kvcopy.layout(kvcopy.MLA, 0, 4096, 8)
    lay = kvcopy.layout(kvcopy.MLA, 2, 4096, 4)
    pool = np.zeros(lay.pool_bytes, np.uint8)
    c = cluster.client(0)
    c.batch_put_from(["short"], [b"s" * 4096])  # half a value
    h = c.get_start(["short"])
    rp = h.transfer()
    with pytest.raises(fluxon.InvalidArgument):  # a value shorter than value_len
        kvcopy.restore_cpu(lay, pool, [0], rp)
    with pytest.raises(fluxon.InvalidArgument):  # a page outside the pool
        kvcopy.restore_cpu(lay, pool, [4], [rp.value_ptrs[0]])
    with pytest.raises(fluxon.InvalidArgument):  # a layer outside 0..1
        kvcopy.restore_cpu(lay, pool, [0], [rp.value_ptrs[0]], layer=2)
    rp.release()
    assert not pool.any()
    with pytest.raises(ValueError, match="2 pages but 1 values"):
        kvcopy.backup_cpu(lay, pool, [0, 1], [pool.ctypes.data])
    with pytest.raises(TypeError, match="pool"):
        kvcopy.backup_cpu(lay, "pool", [0], [pool.ctypes.data])
    # negative numbers reached the library wrapped to 2**64-1 (session 39)
    with pytest.raises(fluxon.InvalidArgument, match=r"^chunk_bytes: .*\(-1 is outside"):
        kvcopy.layout(kvcopy.MLA, 2, -1, 4)
    with pytest.raises(TypeError, match=r"^num_layers: an int, not str$"):
        kvcopy.layout(kvcopy.MLA, "2", 4096, 4)
    with pytest.raises(fluxon.InvalidArgument, match=r"^pool: .*\(-1 is outside"):
        kvcopy.backup_cpu(lay, -1, [0], [pool.ctypes.data])
    with pytest.raises(fluxon.InvalidArgument, match=r"^plan\[0\]: .*\(-4096 is outside"):
        kvcopy.backup_cpu(lay, pool, [0], [-4096])
    assert not pool.any()
    quiet(c)
    c.close()


def test_registration_without_a_driver_says_so(cluster):
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("a GPU driver is present: covered by the GPU test")
    c = cluster.client(0)
    with pytest.raises(fluxon.Unavailable):
        kvcopy.register_segments(c)
    kvcopy.unregister_segments(c)  # not registered: nothing to undo
    c.close()


def test_gpu_copies_match_the_cpu_reference(cluster):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    try:
        kvcopy._cuda_lib()
    except ImportError as e:
        pytest.skip(str(e))
    L, P, c = 4, 16, 64 * 1024
    lay = kvcopy.layout(kvcopy.PAGE_FIRST, L, c, P)
    cl = cluster.client(0)
    kvcopy.register_segments(cl)
    pool = torch.randint(0, 256, (lay.pool_bytes,), dtype=torch.uint8, device="cuda")
    pages = torch.tensor([2, 9, 11], dtype=torch.int64, device="cuda")
    keys = [f"g{i}" for i in range(3)]
    plan = cl.put_start(keys, lay.value_len)
    s = torch.cuda.Stream()
    kvcopy.backup(lay, pool, pages, plan, stream=s)
    s.synchronize()
    host = pool.cpu().numpy()
    ref = cl.put_start([f"r{i}" for i in range(3)], lay.value_len)
    kvcopy.backup_cpu(lay, host, [2, 9, 11], ref)
    for i in range(3):
        assert bytes(plan.view(i)) == bytes(ref.view(i))
    ref.abort()
    plan.commit().wait()
    out = torch.zeros_like(pool)
    rp = cl.get_start(keys).transfer()
    kvcopy.restore(lay, out, torch.tensor([0, 1, 2], dtype=torch.int64, device="cuda"), rp, stream=s)
    s.synchronize()
    rp.release()
    back = out.cpu().numpy()
    for i, page in enumerate([2, 9, 11]):
        o, t = page * lay.value_len, i * lay.value_len  # PAGE_FIRST: a page is one contiguous value
        assert (back[t:t + lay.value_len] == host[o:o + lay.value_len]).all()
    kvcopy.unregister_segments(cl)
    cl.close()
