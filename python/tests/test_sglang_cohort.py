"""The TP cohort grammar end to end: two TP ranks of one SGLang deployment, each on its own
owner (gpu_owner), back up the same pages through FluxonStore with replica_task "eager_all"; the
master copies each batch to one of two CPU owners (node_role remote_cache), and every
rank's K and V of a page land on the SAME CPU owner, because FluxonStore's keys end in
include/fluxon.h's "_<tp_rank>_<tp_size>". A control shows the old "<hash>_<rank>_k" keys
scattering a page's ranks over the CPU owners."""
import time

import numpy as np
import pytest

import fluxon
from fluxon.sglang import FluxonStore, HiCacheStorageConfig
from hostpool import HostPool

CPU = ("py2", "py3")


@pytest.fixture
def tp_cluster():
    lc = fluxon.LocalCluster(owners=4, cluster_id="cohort", cluster_token="tok", segment_bytes="64MiB",
                             owner_configs=[{}, {}, {"node_role": "remote_cache"}, {"node_role": "remote_cache"}])
    yield lc
    lc.stop()


def placed(c):
    return {n["node_id"]: n["placed_bytes"] for n in c.cluster_nodes() if n["node_id"] in CPU}


def wait_appended(c, want, timeout=15.0):
    end = time.monotonic() + timeout
    got = None
    while time.monotonic() < end:
        got = c.master_stats().get("append_keys_completed")
        if got == want:
            return
        time.sleep(0.01)
    raise AssertionError(f"master append_keys_completed is {got}, expected {want} within {timeout}s")


def landed(c, before):
    """{cpu owner: bytes placed since before}, the owners that grew only."""
    after = placed(c)
    return {k: after[k] - before[k] for k in CPU if after[k] != before[k]}


def test_a_pages_tp_ranks_land_on_one_cpu_owner(tp_cluster):
    lc = tp_cluster
    pools = [HostPool(), HostPool()]
    ranks = []
    for r in range(2):
        cfg = HiCacheStorageConfig(tp_rank=r, tp_size=2, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                   is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
                                   model_name="org/model-7b",
                                   extra_config={"backend_name": "fluxon", "module_path": "fluxon.sglang",
                                                 "class_name": "FluxonStore", "interface_v1": True,
                                                 "socket": lc.socket(r), "cluster_id": lc.cluster_id,
                                                 "cluster_token": lc.cluster_token, "replica_task": "eager_all"})
        s = FluxonStore(cfg, {})
        s.register_mem_pool_host(pools[r])
        ranks.append(s)
    c = lc.client(0)
    ob = ranks[0].object_bytes
    obj_placed = max(4096, (ob + 4095) // 4096 * 4096)
    targets, done = [], 0
    for i in range(8):  # one page at a time: each replica batch holds one page of one rank
        before = placed(c)
        for r in range(2):
            pools[r].fill_page(i, 10 * r + i)
            assert ranks[r].batch_set_v1([f"page{i}"], pools[r].indices([i])) == [True]
        done += 4
        wait_appended(c, done)
        grew = landed(c, before)
        assert list(grew.values()) == [4 * obj_placed], \
            f"page {i}: rank 0's and rank 1's K and V on one CPU owner, got {grew}"
        targets += list(grew)
    # the control: the old "<hash>_<rank>_k" keys are no cohort, a page's ranks scatter
    buf = np.zeros(ob, np.uint8)
    split = 0
    for i in range(8):
        before = placed(c)
        for r in range(2):
            cr = lc.client(r)
            keys = [f"old{i}_{r}_k", f"old{i}_{r}_v"]
            st = cr.batch_put_from_ptrs(keys, [buf.ctypes.data] * 2, [ob] * 2, atomic_groups=[2],
                                        make_replica_task=True)
            assert st == [fluxon.Status.OK] * 2
            cr.close()
        done += 4
        wait_appended(c, done)
        split += len(landed(c, before)) == 2
    assert split > 0, f"the old keys put at least one page's ranks on two CPU owners ({split} of 8 did)"
    print(f"old keys: {split} of 8 pages split over the CPU owners; new keys: targets {targets}")
    c.close()
    for s in ranks:
        s.close()


def make_rank(lc, r, replica_task):
    cfg = HiCacheStorageConfig(tp_rank=r, tp_size=2, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                               is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
                               model_name="org/model-7b",
                               extra_config={"backend_name": "fluxon", "module_path": "fluxon.sglang",
                                             "class_name": "FluxonStore", "interface_v1": True,
                                             "socket": lc.socket(r), "cluster_id": lc.cluster_id,
                                             "cluster_token": lc.cluster_token, "replica_task": replica_task})
    s = FluxonStore(cfg, {})
    s.register_mem_pool_host(HostPool())
    return s


def test_replica_task_admission_decides_per_backup_call_alike_on_every_rank(tp_cluster):
    from fluxon.sglang import HiCacheStorageExtraInfo as X
    lc = tp_cluster
    c = lc.client(0)
    done = 0

    def backup(ranks, keys, extra_info, copied):
        nonlocal done
        for s in ranks:
            assert s.batch_set_v1(keys, s.mem_pool_host.indices(range(len(keys))), extra_info) == [True] * len(keys)
        done += 2 * 2 * len(keys) if copied else 0  # 2 ranks x K and V
        if copied:
            wait_appended(c, done)
        # nothing else is in flight: a later copy would show in the next wait (exact counts)
        assert c.master_stats().get("append_keys_completed", 0) == done

    off = [make_rank(lc, r, "off") for r in range(2)]
    backup(off, ["o0", "o1"], None, False)
    eager = [make_rank(lc, r, "eager_all") for r in range(2)]
    backup(eager, ["e0", "e1"], None, True)
    pol = {"policy": "prefix_end_depth_ratio", "depth_limit": 4, "admission_ratio": 1.0, "anchor_pages": 1}
    depth = [make_rank(lc, r, pol) for r in range(2)]
    backup(depth, ["d0", "d1", "d2"], None, False)  # no prefix keys: depth unknown, no copy
    backup(depth, ["r0", "r1", "r2"], X(prefix_keys=[]), True)  # a root node ending at depth 3 <= 4
    backup(depth, ["d0", "d1", "d2"], X(prefix_keys=[]), False)  # stored already: no put, no copy
    backup(depth, ["d3", "d4", "d5"], X(prefix_keys=["r0", "r1"]), False)  # ends at depth 5 > 4
    backup(depth, ["d6"], X(prefix_keys=["r0", "r1", "r2"]), True)  # ends at depth 4
    none = [make_rank(lc, r, dict(pol, admission_ratio=0.0)) for r in range(2)]
    backup(none, ["z0"], X(prefix_keys=[]), False)  # ratio 0: no branch admitted
    for bad in ("sometimes", {"policy": "eager_all", "depth": 3}, {"policy": "prefix_end_depth_ratio",
                                                                  "admission_ratio": 2}):
        with pytest.raises(ValueError, match="replica_task"):
            make_rank(lc, 0, bad)
    c.close()
    for s in off + eager + depth + none:
        s.close()
