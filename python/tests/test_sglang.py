"""fluxon.sglang.FluxonStore against a numpy double of SGLang's host pool: set then get
restores identical pages (MHA page_first, page_first_direct; MLA page_first, layer_first),
prefix semantics, two TP ranks, Mooncake's key convention, and failures as False."""
import time

import pytest

import fluxon
from fluxon import Status
from fluxon.sglang import FluxonStore, HiCacheStorageConfig
from conftest import quiet
from hostpool import HostPool


def make_store(cluster, owner=0, tp_rank=0, mla=False, model="org/model-7b", **extra):
    cfg = HiCacheStorageConfig(tp_rank=tp_rank, tp_size=2, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                               is_mla_model=mla, enable_storage_metrics=True, is_page_first_layout=True,
                               model_name=model,
                               extra_config=dict({"backend_name": "fluxon", "module_path": "fluxon.sglang",
                                                  "class_name": "FluxonStore", "socket": cluster.socket(owner),
                                                  "cluster_id": cluster.cluster_id,
                                                  "cluster_token": cluster.cluster_token}, **extra))
    return FluxonStore(cfg, {})


CASES = [(False, "page_first"), (False, "page_first_direct"), (True, "page_first"), (True, "page_first_direct"),
         (True, "layer_first")]


@pytest.mark.parametrize("mla,layout", CASES)
def test_set_then_get_restores_identical_pages(cluster, mla, layout):
    pool = HostPool(mla=mla, layout=layout)
    st = make_store(cluster, mla=mla)
    st.register_mem_pool_host(pool)
    keys = [f"hash{i:03d}" for i in range(8)]
    src_pages = [3, 9, 1, 20, 7, 30, 11, 2]  # scattered host pages
    for i, p in enumerate(src_pages):
        pool.fill_page(p, seed=i + 1)
    want = [pool.page_bytes(p) for p in src_pages]
    assert st.batch_exists(keys) == 0
    assert st.batch_set_v1(keys, pool.indices(src_pages)) == [True] * 8
    assert st.batch_exists(keys) == 8
    assert st.batch_set_v1(keys[:4], pool.indices(src_pages[:4])) == [True] * 4  # already there: skipped, True
    pool.zero()
    dst_pages = [40, 41, 42, 43, 50, 51, 52, 53]
    other = make_store(cluster, owner=1, mla=mla)  # another worker on another owner
    other.register_mem_pool_host(pool)
    assert other.batch_get_v1(keys, pool.indices(dst_pages)) == [True] * 8
    assert [pool.page_bytes(p) for p in dst_pages] == want
    m = st.get_stats()
    assert m.backup_pgs == [8, 4] and len(m.backup_bandwidth) == 2
    assert st.get_stats().backup_pgs == []
    assert other.get_stats().prefetch_pgs == [8]
    c = st._get_client()
    quiet(c)
    st.close()
    other.close()


def test_keys_follow_the_mooncake_convention_and_k_v_are_one_group(cluster):
    pool = HostPool()
    st = make_store(cluster, tp_rank=1, extra_backend_tag="tag")
    st.register_mem_pool_host(pool)
    pool.fill_page(0, 5)
    assert st.batch_set_v1(["abc"], pool.indices([0])) == [True]
    c = cluster.client(0)
    assert sorted(c.list_keys("tag_")) == ["tag_org-model-7b_abc_1_k", "tag_org-model-7b_abc_1_v"]
    mla = make_store(cluster, mla=True, model=None)
    mpool = HostPool(mla=True)
    mla.register_mem_pool_host(mpool)
    assert mla.batch_set_v1(["xyz"], mpool.indices([0])) == [True]
    assert c.exists("xyz__k")
    # a page whose V is missing is not restored (K and V come back together or not at all)
    c.delete("tag_org-model-7b_abc_1_v")
    assert st.batch_exists(["abc"]) == 0
    assert st.batch_get_v1(["abc"], pool.indices([1])) == [False]
    # and batch_set_v1 stores the missing half even though the other exists
    assert st.batch_set_v1(["abc"], pool.indices([0])) == [True]
    assert st.batch_get_v1(["abc"], pool.indices([1])) == [True]
    assert pool.page_bytes(1) == pool.page_bytes(0)
    quiet(c)
    c.close()
    st.close()
    mla.close()


@pytest.mark.parametrize("mla,layout", [(False, "page_first"), (True, "layer_first")])
def test_prefix_stops_at_the_first_miss(cluster, mla, layout):
    pool = HostPool(mla=mla, layout=layout)
    st = make_store(cluster, mla=mla)
    st.register_mem_pool_host(pool)
    for p in range(6):
        pool.fill_page(p, p + 100)
    keys = [f"pfx{i}" for i in range(6)]
    assert st.batch_set_v1([keys[i] for i in (0, 1, 2, 4, 5)], pool.indices([0, 1, 2, 4, 5])) == [True] * 5
    assert st.batch_exists(keys) == 3
    want = [pool.page_bytes(p) for p in range(3)]
    res = st.batch_get_v1(keys, pool.indices([10, 11, 12, 13, 14, 15]))
    assert res == [True, True, True, False, False, False]
    assert [pool.page_bytes(p) for p in (10, 11, 12)] == want
    assert pool.page_bytes(14) == bytes(len(pool.page_bytes(14)))  # past the miss: untouched
    assert st.batch_exists(["nothing"] + keys) == 0
    quiet(st._get_client())
    st.close()


def test_two_tp_ranks_see_consistent_leading_hits(cluster):
    pools = [HostPool(), HostPool()]
    ranks = [make_store(cluster, owner=r, tp_rank=r) for r in range(2)]
    for r, (s, p) in enumerate(zip(ranks, pools)):
        s.register_mem_pool_host(p)
        for pg in range(10):
            p.fill_page(pg, 1000 * r + pg)
    keys = [f"tp{i}" for i in range(10)]
    assert ranks[0].batch_set_v1(keys[:7], pools[0].indices(range(7))) == [True] * 7
    assert ranks[1].batch_set_v1(keys[:4], pools[1].indices(range(4))) == [True] * 4
    # each rank sees its own objects: SGLang takes the minimum across ranks
    assert [s.batch_exists(keys) for s in ranks] == [7, 4]
    assert ranks[1].batch_set_v1(keys[4:7], pools[1].indices(range(4, 7))) == [True] * 3
    assert [s.batch_exists(keys) for s in ranks] == [7, 7]
    # rank r restores its own bytes, not the other rank's
    want = [[p.page_bytes(i) for i in range(7)] for p in pools]
    for p in pools:
        p.zero()
    for r in range(2):
        assert ranks[r].batch_get_v1(keys[:7], pools[r].indices(range(20, 27))) == [True] * 7
        assert [pools[r].page_bytes(i) for i in range(20, 27)] == want[r]
    for s in ranks:
        s.close()


def test_failures_become_false_never_exceptions(cluster):
    pool = HostPool()
    st = make_store(cluster, timeout_ms=2000)
    st.register_mem_pool_host(pool)
    pool.fill_page(0, 1)
    assert st.batch_set_v1(["f0"], pool.indices([0])) == [True]
    # wrong shapes: False, no exception
    assert st.batch_set_v1(["a", "b"], pool.indices([0])) == [False, False]
    assert st.batch_get_v1(["a", "b"], pool.indices([0])) == [False, False]
    # the owner goes away: every call answers, nothing raises
    cluster.owners[0].stop()
    assert st.batch_get_v1(["f0"], pool.indices([1])) == [False]
    assert st.batch_set_v1(["f1"], pool.indices([1])) == [False]
    assert st.batch_exists(["f0"]) == 0
    assert st.exists("f0") is False
    assert st.get("f0") is None
    assert st.set("x", b"1") is False
    assert st.batch_get(["f0"]) == [None]
    st.clear()
    # a new owner on the same socket: the backend re-attaches by itself
    cluster.owners[0] = fluxon.Node(cluster.owners[0].config)
    deadline = time.monotonic() + 20
    while st.batch_set_v1(["f2"], pool.indices([0])) != [True]:
        assert time.monotonic() < deadline, "re-attached within 20 s"
        time.sleep(0.05)
    assert st.batch_exists(["f2"]) == 1
    st.close()


def test_the_older_calls_and_clear(cluster):
    st = make_store(cluster, extra_backend_tag="old")
    assert st.set("o1", b"v" * 100) and st.exists("o1")
    assert st.get("o1") == b"v" * 100
    assert st.get("absent") is None
    import ctypes
    buf = ctypes.create_string_buffer(b"w" * 64, 64)
    assert st.batch_set(["o2", "o3"], target_locations=[ctypes.addressof(buf)] * 2, target_sizes=[64, 64])
    out = ctypes.create_string_buffer(64)
    assert st.get("o2", ctypes.addressof(out), 64) is True
    assert out.raw == b"w" * 64
    assert st.batch_get(["o2", "o3", "zz"], [ctypes.addressof(out)] * 3, [64] * 3) == 2
    assert st.batch_exists(["x"]) == 0
    c = cluster.client(0)
    c.put("old_org-model-7b_owned", b"1")  # under this backend's prefix
    c.put("foreign", b"1")
    st.clear()
    assert not c.exists("old_org-model-7b_owned") and c.exists("foreign")
    c.close()
    st.close()


def test_missing_socket_is_a_clear_start_up_error(monkeypatch):
    monkeypatch.delenv("FLUXON_SOCKET", raising=False)
    with pytest.raises(ValueError, match="socket"):
        FluxonStore(HiCacheStorageConfig(extra_config={}), {})
