"""fluxon.sglang.FluxonStore against a numpy double of SGLang's host pool (hostpool.py):
set then get restores identical pages in every host layout, both of SGLang's paths
(interface_v1's batch_*_v1 and the generic batch_set/batch_get) name the same objects,
keys follow the TP cohort grammar and carry the deployment's digest, a value of another
length is a miss, clear() deletes one deployment only, prefix semantics, two TP ranks,
and failures as False."""
import logging
import time

import numpy as np
import pytest

import fluxon
from fluxon import Status
from fluxon.sglang import FluxonStore, HiCacheStorageConfig
from fluxon.sglang_keys import parse_cohort
from conftest import quiet
from hostpool import HostPool


def make_store(cluster, owner=0, tp_rank=0, tp_size=2, mla=False, model="org/model-7b", metrics=True, **extra):
    cfg = HiCacheStorageConfig(tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1, attn_cp_rank=0,
                               attn_cp_size=1, is_mla_model=mla, enable_storage_metrics=metrics,
                               is_page_first_layout=True, model_name=model,
                               extra_config=dict({"backend_name": "fluxon", "module_path": "fluxon.sglang",
                                                  "class_name": "FluxonStore", "interface_v1": True,
                                                  "socket": cluster.socket(owner),
                                                  "cluster_id": cluster.cluster_id,
                                                  "cluster_token": cluster.cluster_token}, **extra))
    return FluxonStore(cfg, {})


def attach(cluster, pool, **kw):
    st = make_store(cluster, mla=pool.is_mla, **kw)
    st.register_mem_pool_host(pool)
    return st


CASES = [(False, "page_first"), (False, "page_first_direct"), (False, "layer_first"), (False, "page_head"),
         (True, "page_first"), (True, "page_first_direct"), (True, "layer_first")]


@pytest.mark.parametrize("mla,layout", CASES)
def test_set_then_get_restores_identical_pages(cluster, mla, layout):
    pool = HostPool(mla=mla, layout=layout)
    st = attach(cluster, pool)
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
    other = attach(cluster, pool, owner=1)  # another worker on another owner
    assert other.batch_get_v1(keys, pool.indices(dst_pages)) == [True] * 8
    assert [pool.page_bytes(p) for p in dst_pages] == want
    m = st.get_stats()
    assert m.backup_pgs == [8, 4] and len(m.backup_bandwidth) == 2
    assert st.get_stats().backup_pgs == []
    assert other.get_stats().prefetch_pgs == [8]
    quiet(st._get_client())
    st.close()
    other.close()


def test_keys_follow_the_cohort_grammar_and_k_v_are_one_group(cluster):
    pool = HostPool()
    st = attach(cluster, pool, tp_rank=1, extra_backend_tag="tag")
    pool.fill_page(0, 5)
    assert st.batch_set_v1(["abc"], pool.indices([0])) == [True]
    ns = st.keys.namespace
    assert ns.startswith("tag_org-model-7b.") and len(ns) == len("tag_org-model-7b.") + 12
    c = cluster.client(0)
    assert sorted(c.list_keys("tag_")) == [f"{ns}_abc_k_1_2", f"{ns}_abc_v_1_2"]
    # "_<rank>_<size>": the TP cohort of include/fluxon.h; rank 0's K is in the same cohort
    assert parse_cohort(f"{ns}_abc_k_1_2") == (f"{ns}_abc_k", 1, 2)
    assert parse_cohort(make_keys(cluster, pool, 0).object_keys(["abc"])[0]) == (f"{ns}_abc_k", 0, 2)
    mpool = HostPool(mla=True)
    mla = attach(cluster, mpool, model=None)
    assert mla.batch_set_v1(["xyz"], mpool.indices([0])) == [True]
    assert c.exists(f"{mla.keys.namespace}_xyz_kv_0_1")  # MLA: one copy for every rank
    # a page whose V is missing is not restored (K and V come back together or not at all)
    c.delete(f"{ns}_abc_v_1_2")
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


def make_keys(cluster, pool, tp_rank):
    st = attach(cluster, pool, tp_rank=tp_rank, extra_backend_tag="tag")
    st.close()
    return st.keys


@pytest.mark.parametrize("mla", [False, True])
def test_the_generic_path_and_interface_v1_name_the_same_objects(cluster, mla):
    """SGLang without interface_v1 calls batch_set(keys, get_data_page(...)) and
    batch_get(keys, get_dummy_flat_data_page()...): the same objects as batch_*_v1, so either
    path restores what the other stored, and TP ranks never collide."""
    pools = [HostPool(mla=mla), HostPool(mla=mla)]
    ranks = [attach(cluster, p, owner=r, tp_rank=r) for r, p in enumerate(pools)]
    for r, p in enumerate(pools):
        for pg in range(8):
            p.fill_page(pg, 100 * r + pg)
    keys = [f"gen{i}" for i in range(8)]
    want = [[p.page_bytes(i) for i in range(8)] for p in pools]
    ps = pools[0].page_size
    for r, (s, p) in enumerate(zip(ranks, pools)):  # generic set of pages 0..3 (SGLang's _generic_page_set)
        assert s.batch_set(keys[:4], [p.get_data_page(i * ps) for i in range(4)]) is True
    for s, p in zip(ranks, pools):  # v1 set of pages 4..7
        assert s.batch_set_v1(keys[4:], p.indices(range(4, 8))) == [True] * 4
    assert [s.batch_exists(keys) for s in ranks] == [8, 8]
    for p in pools:
        p.zero()
    for r, (s, p) in enumerate(zip(ranks, pools)):
        # v1 restores every page, the generic set ones included, each rank its own bytes
        assert s.batch_get_v1(keys, p.indices(range(20, 28))) == [True] * 8
        assert [p.page_bytes(i) for i in range(20, 28)] == (want[r] if not mla else want[0])
        # the generic get (SGLang's _generic_page_get) restores every page too
        got = s.batch_get(keys + ["absent"], [p.get_dummy_flat_data_page() for _ in range(9)])
        assert got[8] is None and all(g is not None for g in got[:8])
        for i, g in enumerate(got[:8]):
            p.set_from_flat_data_page((30 + i) * ps, g)
        assert [p.page_bytes(30 + i) for i in range(8)] == (want[r] if not mla else want[0])
    # the older per-key calls are page calls under the same keys
    assert ranks[0].exists("gen0") and not ranks[0].exists("nope")
    assert ranks[0].set("one", pools[0].get_data_page(0)) is True and ranks[0].batch_exists(["one"]) == 1
    assert ranks[0].get("one").tobytes() == pools[0].get_data_page(0).tobytes()
    assert ranks[0].get("nope") is None
    # SGLang's generic draft-model calls (CC _draft_page_set_generic / _get_generic, keys
    # "<hash>.draft", pages of the draft pool's size) round-trip; a restore into a page of
    # another size is a miss
    if not mla:
        assert ranks[0].batch_set(["bad"], [np.zeros(15, np.uint8)]) is False  # not K + V
        assert ranks[0].batch_exists(["bad"]) == 0
    draft = np.arange(256, dtype=np.uint8)
    assert ranks[0].batch_set(["gen0.draft"], [draft]) is True
    back = ranks[0].batch_get(["gen0.draft", "gen1.draft"], [np.zeros(256, np.uint8), np.zeros(256, np.uint8)])
    assert back[1] is None and (back[0] == draft).all()
    assert ranks[0].batch_get(["gen0.draft"], [pools[0].get_dummy_flat_data_page()]) == [None]
    quiet(ranks[0]._get_client())
    for s in ranks:
        s.close()


@pytest.mark.parametrize("layout", ["page_first", "layer_first"])
def test_a_value_of_another_length_is_a_miss(cluster, layout):
    """Another deployment's shorter (or longer) value under a page's keys is never restored
    as good: batch_get_v1 says False and leaves the destination untouched."""
    pool = HostPool(layout=layout)
    st = attach(cluster, pool)
    c = cluster.client(0)
    ob = st.object_bytes
    for i, n in enumerate([ob // 2, ob - 1, ob + 4096]):
        k, v = st.object_keys([f"short{i}"])
        c.batch_put_from([k, v], [b"\x11" * n, b"\x22" * n])
        assert st.batch_exists([f"short{i}"]) == 1  # the objects exist...
        pool.fill_page(5, 7)
        before = pool.page_bytes(5)
        assert st.batch_get_v1([f"short{i}"], pool.indices([5])) == [False]  # ...but are not this page
        assert pool.page_bytes(5) == before
        assert st.batch_get([f"short{i}"]) == [None]
    # a good page before it still restores (prefix semantics)
    pool.fill_page(0, 1)
    assert st.batch_set_v1(["good"], pool.indices([0])) == [True]
    want = pool.page_bytes(0)
    assert st.batch_get_v1(["good", "short0"], pool.indices([8, 9])) == [True, False]
    assert pool.page_bytes(8) == want
    quiet(c)
    c.close()
    st.close()


def test_the_digest_keeps_deployments_and_byte_orders_apart(cluster):
    base = HostPool(layout="page_first")
    st = attach(cluster, base)
    base.fill_page(0, 3)
    assert st.batch_set_v1(["d0"], base.indices([0])) == [True]
    # same size, another byte order (page_first_direct), dtype, page size, model or MLA: no hit
    others = [HostPool(layout="page_first_direct"), HostPool(dtype=np.int16), HostPool(page_size=8, head_dim=32),
              HostPool(mla=True, kv_cache_dim=128)]
    assert others[0].page_bytes(0).__len__() == base.page_bytes(0).__len__()
    for p in others:
        o = attach(cluster, p)
        assert o.keys.namespace != st.keys.namespace
        assert o.batch_exists(["d0"]) == 0
        o.close()
    o = attach(cluster, HostPool(), model="org/other")
    assert o.batch_exists(["d0"]) == 0
    o.close()
    # layer_first and page_first_direct lay one object out alike (layer-major): they share pages
    lf, pfd = HostPool(layout="layer_first"), HostPool(layout="page_first_direct")
    a, b = attach(cluster, lf), attach(cluster, pfd)
    assert a.keys.namespace == b.keys.namespace
    lf.fill_page(2, 9)
    assert a.batch_set_v1(["shared"], lf.indices([2])) == [True]
    assert b.batch_get_v1(["shared"], pfd.indices([6])) == [True]
    assert pfd.page_bytes(6) == lf.page_bytes(2)
    for s in (st, a, b):
        s.close()


def test_clear_deletes_this_deployment_only(cluster):
    mine, theirs = HostPool(), HostPool(layout="page_first_direct")
    a, b = attach(cluster, mine), attach(cluster, theirs)
    a2 = attach(cluster, HostPool(), owner=1, tp_rank=1)  # another rank of a's deployment
    for p in (mine, theirs):
        p.fill_page(0, 1)
    assert a.batch_set_v1(["c0", "c1"], mine.indices([0, 0])) == [True] * 2
    assert a2.batch_set_v1(["c0"], mine.indices([0])) == [True]
    assert b.batch_set_v1(["c0"], theirs.indices([0])) == [True]
    c = cluster.client(0)
    c.put("foreign", b"1")
    a.clear()
    assert a.batch_exists(["c0"]) == 0 and a2.batch_exists(["c0"]) == 0
    assert c.list_keys(a.keys.prefix()) == []
    assert b.batch_exists(["c0"]) == 1 and c.exists("foreign")
    c.close()
    for s in (a, a2, b):
        s.close()


@pytest.mark.parametrize("mla,layout", [(False, "page_first"), (True, "layer_first"), (False, "layer_first")])
def test_prefix_stops_at_the_first_miss(cluster, mla, layout):
    pool = HostPool(mla=mla, layout=layout)
    st = attach(cluster, pool)
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
    ranks = [attach(cluster, p, owner=r, tp_rank=r) for r, p in enumerate(pools)]
    for r, p in enumerate(pools):
        for pg in range(10):
            p.fill_page(pg, 1000 * r + pg)
    keys = [f"tp{i}" for i in range(10)]
    assert ranks[0].batch_set_v1(keys[:7], pools[0].indices(range(7))) == [True] * 7
    assert ranks[1].batch_set_v1(keys[:4], pools[1].indices(range(4))) == [True] * 4
    # each rank sees its own objects: SGLang takes the minimum across ranks
    assert [s.batch_exists(keys) for s in ranks] == [7, 4]
    assert ranks[1].batch_set_v1(keys[4:7], pools[1].indices(range(4, 7))) == [True] * 3
    assert [s.batch_exists(keys) for s in ranks] == [7, 7]
    want = [[p.page_bytes(i) for i in range(7)] for p in pools]
    for p in pools:
        p.zero()
    for r in range(2):
        assert ranks[r].batch_get_v1(keys[:7], pools[r].indices(range(20, 27))) == [True] * 7
        assert [pools[r].page_bytes(i) for i in range(20, 27)] == want[r]
    for s in ranks:
        s.close()


def test_a_key_being_written_is_not_stored(cluster):
    pool = HostPool()
    st = attach(cluster, pool)
    c = cluster.client(0)
    k, v = st.object_keys(["busy"])
    plan = c.put_start([k, v], st.object_bytes, atomic_groups=[2])  # another writer holds the page
    assert plan.statuses == [Status.OK, Status.OK]
    assert st.batch_set_v1(["busy"], pool.indices([0])) == [False]
    plan.abort()
    assert st.batch_set_v1(["busy"], pool.indices([0])) == [True]
    quiet(c)
    c.close()
    st.close()


def test_no_kv_buffer_and_disabled_metrics(cluster):
    pool = HostPool()
    st = attach(cluster, pool, metrics=False)
    assert st.batch_set_v1(["m0"], pool.indices([0])) == [True]
    assert st.get_stats() is None  # metrics off: nothing reported
    on = attach(cluster, pool)
    assert on.batch_get_v1(["m0"], pool.indices([1])) == [True]
    assert on.page_bytes == pool.get_size_per_token() * pool.page_size  # K and V bytes
    assert on.get_stats().prefetch_pgs == [1]
    pool.kv_buffer = None  # a hybrid pool's logical anchor: no I/O is not success
    assert on.batch_set_v1(["m1"], range(pool.page_size)) == [False]
    assert on.batch_get_v1(["m0"], range(pool.page_size)) == [False]
    with pytest.raises(ValueError, match="kv_buffer"):  # registering such a pool stops the start, named
        attach(cluster, pool)
    for s in (st, on):
        s.close()


def test_failures_become_false_never_exceptions(cluster):
    pool = HostPool()
    st = attach(cluster, pool, timeout_ms=2000)
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
    assert st.set("x", pool.get_data_page(0)) is False
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


def test_an_owner_back_is_re_attached_once_while_calls_keep_failing(cluster, caplog):
    # a new user's finding (session 39): a call that found no client closed the client the
    # re-attach thread had just set (78 re-attaches a second after a kill -9), and every
    # failed call logged a warning (80,000 lines in 2 s)
    pool = HostPool()
    st = attach(cluster, pool, timeout_ms=2000)
    pool.fill_page(0, 1)
    with caplog.at_level(logging.INFO, logger="fluxon.sglang"):
        cluster.owners[0].stop()
        for _ in range(200):  # the owner is away: all answer, one warning a call kind
            assert st.batch_set_v1(["r0"], pool.indices([0])) == [False]
            assert st.batch_exists(["r0"]) == 0
        warned = [r for r in caplog.records if r.levelno == logging.WARNING and "batch_set_v1 failed" in r.getMessage()]
        assert 1 <= len(warned) <= 2, [r.getMessage() for r in warned]
        cluster.owners[0] = fluxon.Node(cluster.owners[0].config)
        deadline = time.monotonic() + 20
        while st.batch_set_v1(["r1"], pool.indices([0])) != [True]:
            assert time.monotonic() < deadline, "re-attached within 20 s"
        end = time.monotonic() + 1.0  # calls keep coming: the client stays
        while time.monotonic() < end:
            assert st.batch_exists(["r1"]) == 1
    attaches = [r for r in caplog.records if "re-attached" in r.getMessage()]
    assert len(attaches) == 1, [r.getMessage() for r in attaches]
    # keys that are not page hash strings: False, never an exception, never stored as "None"
    assert st.batch_set_v1(None, pool.indices([0])) == []
    assert st.batch_get_v1(None, pool.indices([0])) == []
    assert st.batch_set_v1([None], pool.indices([0])) == [False]
    assert st.batch_set_v1([5], pool.indices([0])) == [False]
    assert st.batch_exists(["None", "5"]) == 0
    st.close()


def test_config_errors_are_clear(cluster, monkeypatch, caplog):
    monkeypatch.delenv("FLUXON_SOCKET", raising=False)
    with pytest.raises(ValueError, match="socket"):
        FluxonStore(HiCacheStorageConfig(extra_config={}), {})
    with pytest.raises(ValueError, match="interface_v1"):
        make_store(cluster, interface_v1="sometimes")
    with pytest.raises(ValueError, match="timeout_ms"):
        make_store(cluster, timeout_ms=0)
    with caplog.at_level(logging.WARNING, logger="fluxon.sglang"):
        st = make_store(cluster, sokcet="/typo")
    assert "sokcet" in caplog.text
    assert st.batch_exists(["x"]) == 0  # no pool registered yet: 0, with a message
    st.close()


def test_batch_exists_tells_the_owner_to_prefetch_the_pages_found(cluster):
    """SGLang asks batch_exists when a request is queued, then reads: the pages found are
    named to the owner (fluxon_prefetch) so its disk tier can read them back meanwhile; with
    extra_config disk_prefetch false, nothing is sent. No disk tier here: the owner counts
    the keys and starts no read."""
    pool = HostPool()
    st = attach(cluster, pool)
    off = attach(cluster, pool, disk_prefetch=False)
    c = cluster.client(0)
    keys = [f"pf{i:02d}" for i in range(4)]
    for i in range(4):
        pool.fill_page(i, seed=i + 1)
    assert st.batch_set_v1(keys, pool.indices([0, 1, 2, 3])) == [True] * 4
    before = c.stats()["owner"]
    assert off.batch_exists(keys) == 4
    assert st.batch_exists(keys + ["missing"]) == 4
    end = time.monotonic() + 5
    while c.stats()["owner"]["prefetch_requests"] == before["prefetch_requests"] and time.monotonic() < end:
        time.sleep(0.01)
    after = c.stats()["owner"]
    assert after["prefetch_requests"] == before["prefetch_requests"] + 1  # one call, from st only
    per_page = st.keys.per_page
    assert after["prefetch_keys"] - before["prefetch_keys"] == 4 * per_page  # the pages found, not "missing"
    assert after["prefetch_reads"] == before["prefetch_reads"]  # no disk tier: nothing to read
    with pytest.raises(ValueError):
        attach(cluster, pool, disk_prefetch="yes")
    c.close()
