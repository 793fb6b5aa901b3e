"""fluxon.vllm.core against a real master and owner processes on loopback, with numpy
arrays shaped as vLLM's paged KV: byte-exact save/load round trips (two TP ranks, both
block layouts, blocks cut into parts), a miss is 0, a partial prefix aligns down to a
block and never covers the whole prompt, and an owner killed mid-load yields the failed
block ids (never silently wrong KV)."""
import pytest

from fluxon.vllm.core import (ClientHolder, LoadRequest, SchedulerCore, WorkerCore, block_hash_hex,
                              matched_tokens)
from procs import ProcCluster
from vllm_kv import BS, Req, block_bytes, kv_arrays, paged, prompt, spec


@pytest.fixture
def pc():
    c = ProcCluster(owners=2)
    yield c
    c.stop()


def holder(pc, i):
    return ClientHolder(pc.socket(i), cluster_id=pc.cluster_id, timeout_ms=3000, log_level="error")


def save_all(sched, workers, req, block_ids):
    """Schedules req in full (a miss) and has every worker save its blocks; returns the plan."""
    n, _ = sched.get_num_new_matched_tokens(req, 0)
    assert n == 0
    sched.update_state_after_alloc(req, block_ids, 0)
    plan = sched.build_step([(req.request_id, block_ids, 0)], [], {req.request_id: req.num_tokens})
    for w in workers:
        w.save(plan.saves)
    for w in workers:
        got = w.poll_saves(wait_s=5.0)
        assert [b.block_id for b in got] == [b.block_id for s in plan.saves for b in s.blocks]
    return plan


@pytest.mark.parametrize("max_object_bytes", [4 << 20, 2048])  # one object per block; three parts
def test_round_trip_is_byte_exact_across_ranks_owners_and_layouts(pc, max_object_bytes):
    sp = spec(tp_size=2, max_object_bytes=max_object_bytes)
    assert sp.parts == (1 if max_object_bytes > 4096 else 3)
    src = [kv_arrays(16, "blocks_first", seed=1), kv_arrays(16, "kv_first", seed=2)]
    workers = [WorkerCore(sp, r, holder(pc, r), paged(src[r])) for r in range(2)]
    sched = SchedulerCore(sp, holder(pc, 0))
    req = Req("r1", prompt(5 * BS + 3))
    src_ids = [7, 3, 9, 1, 4, 2]
    plan = save_all(sched, workers, req, src_ids)
    assert [b.block_id for b in plan.saves[0].blocks] == src_ids[:5]  # full blocks only
    assert plan.saves[0].blocks[1].parent == block_hash_hex(req.block_hashes[0])
    assert plan.saves[0].blocks[1].token_ids == req.all_token_ids[BS:2 * BS]

    # the same prompt again: the store covers its 5 full blocks
    again = Req("r2", list(req.all_token_ids))
    n, is_async = sched.get_num_new_matched_tokens(again, 0)
    assert (n, is_async) == (5 * BS, False)
    dst_ids = [10, 11, 12, 13, 14, 15]
    sched.update_state_after_alloc(again, dst_ids, n)
    plan = sched.build_step([("r2", dst_ids, n)], [], {"r2": again.num_tokens - n})
    assert [(lr.req_id, lr.block_ids) for lr in plan.loads] == [("r2", dst_ids[:5])]
    assert plan.saves == []  # loaded blocks are not stored again
    # each rank restores through the OTHER owner (fetched across owners), in the other layout
    dst = [kv_arrays(16, "kv_first"), kv_arrays(16, "blocks_first")]
    loaders = [WorkerCore(sp, r, holder(pc, 1 - r), paged(dst[r])) for r in range(2)]
    for r in range(2):
        res = loaders[r].load(plan.loads)
        assert res[0].loaded == dst_ids[:5] and res[0].failed == []
        assert loaders[r].take_load_errors() == set()
        for s, d in zip(src_ids[:5], dst_ids[:5]):
            assert block_bytes(dst[r], d) == block_bytes(src[r], s), f"rank {r} block {s}->{d}"
        assert block_bytes(dst[r], 15) == bytes(len(block_bytes(dst[r], 15)))  # past the plan: untouched
    for w in workers + loaders:
        w.close()
    sched.holder.close()


def test_a_miss_is_zero_and_a_partial_prefix_aligns_down_to_a_block(pc):
    sp = spec(tp_size=2)
    src = [kv_arrays(16, seed=5), kv_arrays(16, seed=6)]
    workers = [WorkerCore(sp, r, holder(pc, r), paged(src[r])) for r in range(2)]
    sched = SchedulerCore(sp, holder(pc, 0))
    toks = prompt(5 * BS + 5, salt=3)
    assert sched.get_num_new_matched_tokens(Req("miss", toks), 0) == (0, False)
    assert sched.build_step([], [], {}).loads == []
    # store blocks 0..2 on both ranks, block 3 on rank 0 only
    full = Req("a", toks)
    sched.get_num_new_matched_tokens(full, 0)
    sched.update_state_after_alloc(full, list(range(6)), 0)
    plan = sched.build_step([("a", list(range(6)), 0)], [], {"a": 4 * BS})
    assert [b.block_id for b in plan.saves[0].blocks] == [0, 1, 2, 3]
    three = [type(plan.saves[0])("a", plan.saves[0].blocks[:3])]
    workers[0].save(plan.saves)
    workers[1].save(three)
    assert len(workers[0].poll_saves(5.0)) == 4 and len(workers[1].poll_saves(5.0)) == 3
    # block 3 lacks rank 1's shard: 3 blocks count, 48 tokens, aligned down to a block
    assert sched.get_num_new_matched_tokens(Req("b", toks), 0) == (3 * BS, False)
    assert sched.get_num_new_matched_tokens(Req("c", toks), BS) == (2 * BS, False)  # beyond the local hit
    assert sched.get_num_new_matched_tokens(Req("d", toks), 3 * BS) == (0, False)
    assert sched.get_num_new_matched_tokens(Req("e", toks[:3 * BS + 9]), 0) == (3 * BS, False)
    # a prompt the store covers entirely: the last block is left to compute its last token
    exact = toks[:3 * BS]
    assert sched.get_num_new_matched_tokens(Req("f", exact), 0) == (2 * BS, False)
    assert sched.get_num_new_matched_tokens(Req("g", exact + [1]), 0) == (3 * BS, False)
    assert matched_tokens(3, 3 * BS, BS) == 2 * BS and matched_tokens(3, 1, BS) == 0
    for w in workers:
        w.close()
    sched.holder.close()


def test_an_owner_killed_mid_load_yields_the_failed_block_ids(pc):
    sp = spec()
    src = kv_arrays(16, seed=9)
    w0 = WorkerCore(sp, 0, holder(pc, 0), paged(src))
    sched = SchedulerCore(sp, holder(pc, 0))
    reqs = [Req("a", prompt(3 * BS + 1, salt=1)), Req("b", prompt(3 * BS + 1, salt=2))]
    save_all(sched, [w0], reqs[0], [0, 1, 2, 3])
    save_all(sched, [w0], reqs[1], [4, 5, 6, 7])
    for r, ids in zip(reqs, ([8, 9, 10, 11], [12, 13, 14, 15])):
        again = Req(r.request_id + "2", list(r.all_token_ids))
        n, _ = sched.get_num_new_matched_tokens(again, 0)
        assert n == 3 * BS
        sched.update_state_after_alloc(again, ids, n)
    loads = sched.build_step([], [], {}).loads
    assert [lr.block_ids for lr in loads] == [[8, 9, 10], [12, 13, 14]]
    dst = kv_arrays(16)
    loader = WorkerCore(sp, 0, holder(pc, 0), paged(dst))
    it = loader.iter_load(loads)
    first = next(it)
    assert first.loaded == [8, 9, 10] and first.failed == []
    pc.kill(0)  # the loader's own owner dies between the two requests of the step
    second = next(it)
    assert second.loaded == [] and second.failed == [12, 13, 14]
    assert "get_start" in second.reason
    assert loader.take_load_errors() == {12, 13, 14}
    assert loader.take_load_errors() == set()  # drained
    for s, d in zip([0, 1, 2], [8, 9, 10]):
        assert block_bytes(dst, d) == block_bytes(src, s)
    loader.close()
    w0.close()
    sched.holder.close()


def test_blocks_on_an_owner_that_died_after_the_lookup_are_failed_not_hidden(pc):
    sp = spec()
    src = kv_arrays(16, seed=11)
    toks = prompt(4 * BS + 2, salt=4)
    head, tail = Req("h", toks[:2 * BS]), Req("t", toks)
    # blocks 0-1 stored through owner 0, blocks 2-3 through owner 1
    save_all(SchedulerCore(sp, holder(pc, 0)), [WorkerCore(sp, 0, holder(pc, 0), paged(src))], head, [0, 1])
    s1 = SchedulerCore(sp, holder(pc, 1))
    s1.get_num_new_matched_tokens(tail, 0)
    s1.update_state_after_alloc(tail, [0, 1, 2, 3, 4], 0)
    plan = s1.build_step([("t", [0, 1, 2, 3, 4], 0)], [], {"t": tail.num_tokens})
    assert [b.block_id for b in plan.saves[0].blocks] == [2, 3]  # 0-1 were found stored
    w1 = WorkerCore(sp, 0, holder(pc, 1), paged(src))
    w1.save(plan.saves)
    assert len(w1.poll_saves(5.0)) == 2
    sched = SchedulerCore(sp, holder(pc, 0))
    again = Req("t2", toks)
    n, _ = sched.get_num_new_matched_tokens(again, 0)
    assert n == 4 * BS
    sched.update_state_after_alloc(again, [5, 6, 7, 8, 9], n)
    loads = sched.build_step([], [], {}).loads
    pc.kill(1)
    dst = kv_arrays(16)
    loader = WorkerCore(sp, 0, holder(pc, 0), paged(dst))
    (res,) = loader.load(loads)
    assert res.loaded == [5, 6] and res.failed == [7, 8]
    assert loader.take_load_errors() == {7, 8}
    assert block_bytes(dst, 5) == block_bytes(src, 0) and block_bytes(dst, 6) == block_bytes(src, 1)
    assert block_bytes(dst, 7) == bytes(len(block_bytes(dst, 7)))
    for x in (loader, w1):
        x.close()
    s1.holder.close()
    sched.holder.close()


def test_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="max_object_bytes"):
        spec(max_object_bytes=100)
    with pytest.raises(ValueError, match="tp rank 2"):
        spec(tp_size=2).block_keys("ab", 2)
    with pytest.raises(ValueError, match="shape"):
        paged([a[:, :, :8] for a in kv_arrays(4)])
    p = paged(kv_arrays(4))
    with pytest.raises(ValueError, match="block id 4"):
        p.copy_in(4, 0, 1, 0)
    with pytest.raises(ValueError, match="no lookup of this connector matched"):
        SchedulerCore(spec(), None).update_state_after_alloc(Req("n", prompt(40)), [0, 1, 2], 16)
    w = WorkerCore(spec(), 0, None)
    (res,) = w.load([LoadRequest("x", [1, 2], ["aa", "bb"])])
    assert res.failed == [1, 2] and "no KV caches" in res.reason


def test_hashes_finer_than_a_block_key_each_block_by_its_last_hash(pc):
    sp = spec()
    sched = SchedulerCore(sp, holder(pc, 0), hash_block_size=BS // 2)
    w = WorkerCore(sp, 0, holder(pc, 0), paged(kv_arrays(8, seed=3)))
    req = Req("fine", prompt(3 * BS + 1, salt=8))
    req.block_hashes = [bytes([i]) * 32 for i in range(6)]  # two hashes per block
    sched.get_num_new_matched_tokens(req, 0)
    sched.update_state_after_alloc(req, [0, 1, 2, 3], 0)
    plan = sched.build_step([("fine", [0, 1, 2, 3], 0)], [], {"fine": req.num_tokens})
    assert [b.hash for b in plan.saves[0].blocks] == [(bytes([i]) * 32).hex() for i in (1, 3, 5)]
    w.save(plan.saves)
    assert len(w.poll_saves(5.0)) == 3
    again = Req("fine2", list(req.all_token_ids))
    again.block_hashes = list(req.block_hashes)
    assert sched.get_num_new_matched_tokens(again, 0) == (3 * BS, False)
    with pytest.raises(ValueError, match="hash_block_size 5"):
        SchedulerCore(sp, None, hash_block_size=5)
    w.close()
    sched.holder.close()


class FakeTensor:
    """What paged.py reads of a torch tensor (data_ptr, shape, stride in elements,
    element_size, device), over a numpy array."""

    def __init__(self, a, device="cpu"):
        self.a, self.shape = a, a.shape
        self.device = type("Device", (), {"type": device, "__str__": lambda s: f"{device}:0"})()

    def data_ptr(self):
        return self.a.ctypes.data

    def stride(self):
        return tuple(s // self.a.itemsize for s in self.a.strides)

    def element_size(self):
        return self.a.itemsize


def test_cpu_tensors_work_like_arrays_and_device_tensors_are_refused():
    import ctypes
    src = kv_arrays(4, "blocks_first", seed=21)
    dst = kv_arrays(4, "kv_first")
    p_src = paged(src)
    from fluxon.vllm.paged import PagedKV
    p_dst = PagedKV([FakeTensor(a) for a in dst], 4, BS, 2, 8, 2)
    buf = ctypes.create_string_buffer(len(block_bytes(src, 2)))
    p_src.copy_out(2, 0, len(src), ctypes.addressof(buf))
    assert buf.raw == block_bytes(src, 2)
    p_dst.copy_in(1, 0, len(dst), ctypes.addressof(buf))
    assert block_bytes(dst, 1) == block_bytes(src, 2)
    with pytest.raises(ValueError, match="device cuda:0"):
        PagedKV([FakeTensor(a, "cuda") for a in dst], 4, BS, 2, 8, 2)


def test_a_save_with_a_bad_block_id_stores_nothing_and_does_not_raise(pc):
    sp = spec()
    w = WorkerCore(sp, 0, holder(pc, 0), paged(kv_arrays(4, seed=1)))
    from fluxon.vllm.core import SaveBlock, SaveRequest
    bad = [SaveRequest("x", [SaveBlock(1, "aa01", None, []), SaveBlock(9, "aa02", "aa01", [])])]
    assert w.save(bad) == 0
    assert w.stats["save_failed"] == 2 and w.poll_saves(1.0) == []
    with pc.client(0) as c:
        assert c.batch_exists(sp.block_keys("aa01", 0)) == 0  # the plan was aborted whole
        assert c.stats()["owner"]["slots_prepared"] == 0
    w.close()


def test_unexpected_exceptions_are_a_miss_a_skipped_save_or_failed_blocks_never_raised(pc):
    """Not FluxonErrors (a bug, a request shaped unlike vLLM's): core turns each into a miss,
    a skipped save or failed block ids, counts it, and never raises into the engine; a step
    whose save planning breaks still carries its planned loads (vLLM counts their tokens)."""
    sp = spec()
    src = kv_arrays(8, seed=41)
    w, sched = WorkerCore(sp, 0, holder(pc, 0), paged(src)), SchedulerCore(sp, holder(pc, 0))
    req = Req("r", prompt(3 * BS + 1, salt=13))
    save_all(sched, [w], req, [0, 1, 2, 3])
    odd = Req("odd", prompt(2 * BS + 1, salt=14))
    odd.block_hashes = [object(), object()]
    assert sched.get_num_new_matched_tokens(odd, 0) == (0, False)
    # a planned load, then a step whose save planning meets a block hash of an unknown type
    again = Req("again", list(req.all_token_ids))
    assert sched.get_num_new_matched_tokens(again, 0) == (3 * BS, False)
    sched.update_state_after_alloc(again, [4, 5, 6, 7], 3 * BS)
    broken = Req("broken", prompt(2 * BS + 1, salt=15))
    sched.get_num_new_matched_tokens(broken, 0)
    sched.update_state_after_alloc(broken, [0, 1, 2], 0)
    broken.block_hashes = [object(), object()]
    plan = sched.build_step([("broken", [0, 1, 2], 0), ("again", [4, 5, 6, 7], 3 * BS)], [],
                            {"broken": broken.num_tokens, "again": 1})
    assert [(lr.req_id, lr.block_ids) for lr in plan.loads] == [("again", [4, 5, 6])]
    assert plan.saves == []
    assert sched.build_step([("broken", [0, 1, 2], 0)], [], {"broken": 1}).saves == []  # skipped for good
    assert sched.stats["unexpected_errors"] == 2
    # a load whose copy raises: its blocks fail; the next request of the same call still loads
    real_restore = w.paged.restore
    calls = []

    def restore_once_broken(*a):
        calls.append(a)
        if len(calls) == 1:
            raise RuntimeError("restore broke")
        return real_restore(*a)
    w.paged.restore = restore_once_broken
    res = w.load(plan.loads + [LoadRequest("more", [7], [block_hash_hex(req.block_hashes[0])])])
    assert [(r.loaded, r.failed) for r in res] == [([], [4, 5, 6]), ([7], [])]
    assert w.take_load_errors() == {4, 5, 6}
    # a save whose copy raises: skipped, the plan aborted, nothing raised
    from fluxon.vllm.core import SaveBlock, SaveRequest
    w.paged.backup = lambda *a: (_ for _ in ()).throw(RuntimeError("backup broke"))
    assert w.save([SaveRequest("s", [SaveBlock(0, "bb01", None, [])])]) == 0
    with pc.client(0) as c:
        assert c.batch_exists(sp.block_keys("bb01", 0)) == 0
        assert c.stats()["owner"]["slots_prepared"] == 0
    assert w.stats["unexpected_errors"] == 2
    w.close()
    sched.holder.close()


def test_a_restarted_owner_is_attached_again_by_a_later_call(pc):
    import time
    sp = spec()
    src = kv_arrays(8, seed=31)
    h = ClientHolder(pc.socket(0), retry_s=0.05, cluster_id=pc.cluster_id, timeout_ms=3000, log_level="error")
    w, sched = WorkerCore(sp, 0, h, paged(src)), SchedulerCore(sp, h)
    req = Req("r", prompt(2 * BS + 1, salt=12))
    save_all(sched, [w], req, [0, 1, 2])
    pc.kill(0)
    assert sched.get_num_new_matched_tokens(Req("r2", list(req.all_token_ids)), 0) == (0, False)  # a miss
    (res,) = w.load([LoadRequest("r3", [4, 5], [block_hash_hex(x) for x in req.block_hashes])])
    assert res.failed == [4, 5]
    pc.restart(0)
    end = time.monotonic() + 10  # the holder opens a new client at most every retry_s
    while True:  # until a lookup goes through (the new owner is empty: a miss, not an error)
        errors = sched.stats["lookup_errors"]
        assert sched.get_num_new_matched_tokens(Req("r4", list(req.all_token_ids)), 0) == (0, False)
        if sched.stats["lookup_errors"] == errors:
            break
        assert time.monotonic() < end, "attached again within 10 s"
        time.sleep(0.05)
    save_all(sched, [w], Req("r5", list(req.all_token_ids)), [0, 1, 2])  # the new owner starts empty
    assert sched.get_num_new_matched_tokens(Req("r6", list(req.all_token_ids)), 0) == (2 * BS, False)
    w.close()
    h.close()


def test_padded_tensors_copy_through_the_fallback_and_match_the_c_layout_path():
    import ctypes
    import numpy as np
    src = kv_arrays(6, "blocks_first", seed=41)
    padded = [np.zeros((6, 3, BS, 2, 8), np.float16) for _ in src]  # a block stride of 3 halves
    views = [p[:, :2] for p in padded]
    for v, a in zip(views, src):
        v[...] = a
    fast, slow = paged(src), paged(views)
    assert fast._c[0] is not None and slow._c[0] is None  # C layout path vs memmove fallback
    n = len(block_bytes(src, 0))
    bufs = [ctypes.create_string_buffer(n) for _ in range(3)]
    slow.backup([5, 0, 3], [ctypes.addressof(b) for b in bufs], 0, len(src))
    assert [b.raw for b in bufs] == [block_bytes(src, i) for i in (5, 0, 3)]
    dst = [np.zeros((6, 3, BS, 2, 8), np.float16)[:, :2] for _ in src]
    paged(dst).restore([1, 2, 4], [ctypes.addressof(b) for b in bufs], 0, len(src))
    assert [block_bytes(dst, i) for i in (1, 2, 4)] == [block_bytes(src, i) for i in (5, 0, 3)]
    with pytest.raises(ValueError, match="2 block ids for 3 values"):
        fast.restore([1, 2], [0, 0, 0], 0, 1)


def test_after_a_step_whose_block_ids_were_lost_no_block_is_saved_under_another_ones_hash():
    """Chunked prefill: step 1 saves blocks 0-1; step 2's build fails (the connector's
    fallback: stop_all_saves, an empty step), so block 2's id (102) is never taken in; step 3
    hands out 103 for block 3. Without stopping, 103 was saved under block 2's hash."""
    from vllm_kv import spec, Req, chain_hashes, BS
    from fluxon.vllm.core import SchedulerCore

    class Holder:  # save planning only: no client call
        def get(self):
            raise RuntimeError("not used")

    sc = SchedulerCore(spec(), Holder(), load=False, save=True)
    toks = list(range(8 * BS))
    r = Req("r", toks, num_prompt_tokens=len(toks), block_hashes=chain_hashes(toks))
    sc.update_state_after_alloc(r, [100, 101], 0)
    p = sc.build_step([("r", [100, 101], 0)], [], {"r": 2 * BS})
    assert [b.block_id for s in p.saves for b in s.blocks] == [100, 101]
    sc.stop_all_saves()
    sc.build_step([], [], {})
    p = sc.build_step([], [("r", [103], 3 * BS, False)], {"r": BS})
    assert [b.block_id for s in p.saves for b in s.blocks] == []
