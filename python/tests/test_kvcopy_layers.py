"""fluxon.kvcopy's per-layer mode (fluxon_kv_layers_* / fluxon_cuda_layers_* of
include/fluxon_cuda.h) on numpy arrays shaped like SGLang's GPU pool: one K and one V
tensor per layer (MHATokenToKVPool.k_buffer[l] / v_buffer[l], [size + page_size, head_num,
head_dim]; MLATokenToKVPool.kv_buffer[l], [size + page_size, 1, kv_lora_rank +
qk_rope_head_dim]; page p = tokens p*page_size .. (p+1)*page_size-1), backed up on one
owner and restored layer by layer on another, byte-exact against a model written here;
the value equals a PAGE_FIRST pool's; bad input refused; the GPU kernels against the CPU
reference when torch sees a GPU (skipped otherwise)."""
import numpy as np
import pytest

import fluxon
from fluxon import kvcopy
from conftest import quiet


def sglang_layers(layers, pages, page_size, heads, head_dim, seed, dtype=np.float16):
    """One tensor per layer, [pages * page_size, heads, head_dim], random bytes."""
    rng = np.random.default_rng(seed)
    n = pages * page_size * heads * head_dim
    return [rng.integers(0, 1 << 16, n, dtype=np.uint16).view(dtype).reshape(pages * page_size, heads, head_dim)
            for _ in range(layers)]


def page_bytes(t, page, page_size):
    return t[page * page_size:(page + 1) * page_size].tobytes()


def model_value(ks, vs, page, page_size):
    """fluxon_cuda.h's value: [l0 K][l0 V][l1 K]... (MLA: [l0][l1]...)."""
    out = b""
    for ly in range(len(ks)):
        out += page_bytes(ks[ly], page, page_size)
        if vs is not None:
            out += page_bytes(vs[ly], page, page_size)
    return out


@pytest.mark.parametrize("mla", [False, True])
def test_per_layer_pool_round_trip_through_the_cluster(cluster, mla):
    L, P, ps = 4, 12, 16
    heads, hd = (1, 576) if mla else (2, 64)
    ks = sglang_layers(L, P, ps, heads, hd, seed=1)
    vs = None if mla else sglang_layers(L, P, ps, heads, hd, seed=2)
    chunk = ps * heads * hd * 2
    lay = kvcopy.layout(kvcopy.LAYER_TENSORS_MLA if mla else kvcopy.LAYER_TENSORS, L, chunk, P)
    assert lay.value_len == L * (1 if mla else 2) * chunk
    a, b = cluster.client(0), cluster.client(1)
    src = [3, 5, 11]
    keys = [f"layers{int(mla)}-{p}" for p in src]
    plan = a.put_start(keys, lay.value_len)
    kvcopy.layers_backup_cpu(lay, ks, vs, np.array(src, np.int64), plan)
    for i, p in enumerate(src):
        assert bytes(plan.view(i)) == model_value(ks, vs, p, ps)
    plan.commit().wait()
    # another engine, another owner: restore layer by layer (as a forward pass would)
    dk = [np.zeros_like(t) for t in ks]
    dv = None if mla else [np.zeros_like(t) for t in vs]
    dst = [1, 2, 9]
    rp = b.get_start(keys).transfer()
    for ly in range(L):
        kvcopy.layers_restore_cpu(lay, dk, dv, dst, rp, layer=ly)
        for i, (s, d) in enumerate(zip(src, dst)):  # layer ly restored, the next ones not yet
            assert page_bytes(dk[ly], d, ps) == page_bytes(ks[ly], s, ps)
            if not mla:
                assert page_bytes(dv[ly], d, ps) == page_bytes(vs[ly], s, ps)
            if ly + 1 < L:
                assert not dk[ly + 1][d * ps:(d + 1) * ps].any()
    # every other page of every tensor untouched
    for ly in range(L):
        for t in [dk[ly]] + ([] if mla else [dv[ly]]):
            mask = np.ones(P * ps, bool)
            for d in dst:
                mask[d * ps:(d + 1) * ps] = False
            assert not t[mask].view(np.uint16).any()
    if not mla:  # the same values restore into a PAGE_FIRST pool: [page][layer][K|V][chunk]
        pf = kvcopy.layout(kvcopy.PAGE_FIRST, L, chunk, P)
        pool = np.zeros(pf.pool_bytes, np.uint8)
        kvcopy.restore_cpu(pf, pool, [0, 4, 7], rp)
        for i, s in enumerate(src):
            t = [0, 4, 7][i]
            assert pool[t * pf.value_len:(t + 1) * pf.value_len].tobytes() == model_value(ks, vs, s, ps)
    rp.release()
    quiet(a)
    quiet(b)
    a.close()
    b.close()


def test_per_layer_bad_input_is_refused(cluster):
    L, P, ps = 2, 4, 4
    ks, vs = sglang_layers(L, P, ps, 2, 8, seed=3), sglang_layers(L, P, ps, 2, 8, seed=4)
    chunk = ps * 2 * 8 * 2
    lay = kvcopy.layout(kvcopy.LAYER_TENSORS, L, chunk, P)
    vals = np.zeros(lay.value_len, np.uint8)
    ptr = [vals.ctypes.data]
    with pytest.raises(ValueError, match="k_layers: 1 tensors, the layout has 2"):
        kvcopy.layers_backup_cpu(lay, ks[:1], vs, [0], ptr)
    with pytest.raises(ValueError, match="v_layers: 0 tensors"):
        kvcopy.layers_backup_cpu(lay, ks, None, [0], ptr)
    with pytest.raises(ValueError, match=r"v_layers\[1\]: .* bytes"):
        kvcopy.layers_backup_cpu(lay, ks, [vs[0], vs[1][:ps]], [0], ptr)
    with pytest.raises(ValueError, match=r"k_layers\[0\]: not contiguous"):
        kvcopy.layers_backup_cpu(lay, [np.asfortranarray(ks[0]), ks[1]], vs, [0], ptr)
    with pytest.raises(fluxon.InvalidArgument):  # a zero address
        kvcopy.layers_backup_cpu(lay, [ks[0].ctypes.data, 0], vs, [0], ptr)
    with pytest.raises(fluxon.InvalidArgument):  # a page outside the tensors
        kvcopy.layers_backup_cpu(lay, ks, vs, [P], ptr)
    with pytest.raises(fluxon.InvalidArgument):  # a layer outside 0..L-1
        kvcopy.layers_restore_cpu(lay, ks, vs, [0], ptr, layer=L)
    with pytest.raises(fluxon.InvalidArgument):  # a per-layer kind given to the one-pool call
        kvcopy.backup_cpu(lay, np.zeros(lay.pool_bytes, np.uint8), [0], ptr)
    with pytest.raises(ValueError, match="one pool"):
        kvcopy.layers_backup_cpu(kvcopy.layout(kvcopy.PAGE_FIRST, L, chunk, P), ks, vs, [0], ptr)
    assert not vals.any()
    with pytest.raises(fluxon.InvalidArgument):
        kvcopy.layout(6, L, chunk, P)


def test_gpu_per_layer_copies_match_the_cpu_reference(cluster):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    try:
        kvcopy._cuda_lib()
    except ImportError as e:
        pytest.skip(str(e))
    L, P, ps, heads, hd = 4, 16, 16, 4, 128
    chunk = ps * heads * hd * 2
    lay = kvcopy.layout(kvcopy.LAYER_TENSORS, L, chunk, P)
    ks = [torch.randn(P * ps, heads, hd, dtype=torch.float16, device="cuda") for _ in range(L)]
    vs = [torch.randn(P * ps, heads, hd, dtype=torch.float16, device="cuda") for _ in range(L)]
    cl = cluster.client(0)
    kvcopy.register_segments(cl)
    src, keys = [2, 9, 11], [f"gl{i}" for i in range(3)]
    plan = cl.put_start(keys, lay.value_len)
    s = torch.cuda.Stream()
    kvcopy.layers_backup(lay, ks, vs, torch.tensor(src, dtype=torch.int64, device="cuda"), plan, stream=s)
    s.synchronize()
    hk, hv = [t.cpu().numpy() for t in ks], [t.cpu().numpy() for t in vs]
    for i, p in enumerate(src):
        assert bytes(plan.view(i)) == model_value(hk, hv, p, ps)
    plan.commit().wait()
    dk, dv = [torch.zeros_like(t) for t in ks], [torch.zeros_like(t) for t in vs]
    rp = cl.get_start(keys).transfer()
    dst = torch.tensor([0, 1, 5], dtype=torch.int64, device="cuda")
    for ly in range(L):
        kvcopy.layers_restore(lay, dk, dv, dst, rp, layer=ly, stream=s)
    s.synchronize()
    rp.release()
    for i, (p, d) in enumerate(zip(src, [0, 1, 5])):
        for ly in range(L):
            assert page_bytes(dk[ly].cpu().numpy(), d, ps) == page_bytes(hk[ly], p, ps)
            assert page_bytes(dv[ly].cpu().numpy(), d, ps) == page_bytes(hv[ly], p, ps)
    kvcopy.unregister_segments(cl)
    cl.close()
