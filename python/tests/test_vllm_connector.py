"""fluxon.vllm.connector.FluxonConnector: conformance to the KVConnectorBase_V1 interface of
vLLM 13f4ad0f, NOT a run inside vLLM (vLLM cannot be installed here). The base class comes
from a stub package (tests/vllm_stub) written from that revision's documented interface;
a fixture (vllm_stub/interface-13f4ad0f.txt) lists its methods and signatures, and the
test fails if the stub or the connector drifts from it. Then a miniature engine loop
(vllm_driver.py) drives the real call order of a step against a master and two owner
processes (two TP ranks): saves, prefix hits loaded byte-exact, KV events, and an owner
killed mid-load reported through get_block_ids_with_load_errors in the same pass (sync
loads) or no later than the pass get_finished returns the request (async loads)."""
import importlib
import inspect
import os
import sys

import pytest

from procs import ProcCluster
from vllm_kv import BS, Req, prompt

HERE = os.path.dirname(os.path.abspath(__file__))
STUB = os.path.join(HERE, "vllm_stub")
FIXTURE = os.path.join(STUB, "interface-13f4ad0f.txt")
# the methods issue 41 asks the connector to implement
REQUIRED = ["get_num_new_matched_tokens", "update_state_after_alloc", "build_connector_meta", "request_finished",
            "register_kv_caches", "start_load_kv", "wait_for_layer_load", "save_kv_layer", "wait_for_save",
            "get_finished", "get_block_ids_with_load_errors", "get_kv_connector_kv_cache_events", "take_events"]


def _purge():
    for m in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.") or m.startswith("vllm_driver")
              or m == "fluxon.vllm.connector"]:
        del sys.modules[m]


@pytest.fixture(scope="module")
def stub():
    _purge()
    sys.path.insert(0, STUB)
    try:
        yield importlib.import_module("vllm.distributed.kv_transfer.kv_connector.v1.base")
    finally:
        sys.path.remove(STUB)
        _purge()


@pytest.fixture
def pc():
    c = ProcCluster(owners=2)
    yield c
    c.stop()


def load_connector_class(vllm_config):
    """What vLLM's KVConnectorFactory does for a name it does not know."""
    tc = vllm_config.kv_transfer_config
    return getattr(importlib.import_module(tc.kv_connector_module_path), tc.kv_connector)


def read_fixture():
    out = []
    with open(FIXTURE) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            kind, rest = line.split(" ", 1)
            name, params = rest[:-1].split("(", 1)
            out.append((kind, name, [p.strip() for p in params.split(",")]))
    return out


def _params(fn):
    out = []
    for p in inspect.signature(fn).parameters.values():
        s = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        out.append(s + ("=" if p.default is not p.empty else ""))
    return out


def drift(cls, base, fixture, own_only):
    """Differences between cls and the fixture: a list of messages (empty: conforms)."""
    errors = []
    for kind, name, params in fixture:
        raw = None
        for k in cls.__mro__:
            if name in k.__dict__:
                raw = k.__dict__[name]
                owner = k
                break
        if raw is None:
            errors.append(f"{name}: missing")
            continue
        if own_only and owner is base:
            continue
        if kind == "property":
            if not isinstance(raw, property):
                errors.append(f"{name}: not a property")
                continue
            fn = raw.fget
        elif kind == "classmethod":
            if not isinstance(raw, classmethod):
                errors.append(f"{name}: not a classmethod")
                continue
            fn = raw.__func__
        else:
            fn = raw
        got = _params(fn)
        if got != params:
            errors.append(f"{name}{tuple(got)}: the pinned interface has {tuple(params)}")
        if kind == "abstract" and not own_only and name not in base.__abstractmethods__:
            errors.append(f"{name}: not abstract")
    return errors


def test_the_stub_and_the_connector_conform_to_the_pinned_interface(stub):
    fixture = read_fixture()
    base = stub.KVConnectorBase_V1
    assert drift(base, base, fixture, False) == []
    assert base.__abstractmethods__ == {n for k, n, _ in fixture if k == "abstract"}
    listed = {n for _, n, _ in fixture}
    extra = [n for n in base.__dict__ if not n.startswith("__") and n not in listed and n != "_abc_impl"]
    assert extra == [], f"stub methods the fixture does not list: {extra}"
    from fluxon.vllm.connector import FluxonConnector
    assert issubclass(FluxonConnector, base)
    assert FluxonConnector.__abstractmethods__ == frozenset()
    assert drift(FluxonConnector, base, fixture, True) == []
    assert [n for n in REQUIRED if n not in FluxonConnector.__dict__] == []

    # the check catches a connector whose signature drifts
    class Drifted(FluxonConnector):
        def get_num_new_matched_tokens(self, request, num_computed):
            return 0, False
    assert drift(Drifted, base, fixture, True) == ["get_num_new_matched_tokens('self', 'request', 'num_computed'): the "
                                          "pinned interface has ('self', 'request', 'num_computed_tokens')"]


def make(pc, tp_size=2, **extra):
    import vllm_driver
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    vc, kvc = vllm_driver.configs(pc.socket(0), pc.cluster_id, tp_size=tp_size, **extra)
    cls = load_connector_class(vc)
    sched = cls(vc, KVConnectorRole.SCHEDULER, kvc)
    workers = []
    for r in range(tp_size):
        wvc, wkvc = vllm_driver.configs(pc.socket(r), pc.cluster_id, tp_size=tp_size, tp_rank=r, **extra)
        workers.append(cls(wvc, KVConnectorRole.WORKER, wkvc))
    return vllm_driver.Engine(sched, workers)


def settle(eng, want, steps=300):
    """Runs empty steps until `want` events arrived (saves publish asynchronously); bounded."""
    import time
    end = time.monotonic() + 10
    for _ in range(steps):
        if len(eng.events) >= want or time.monotonic() > end:
            break
        eng.step()
        time.sleep(0.005)
    return eng.events


def test_a_step_saves_then_a_prefix_hit_loads_byte_exact_and_events_flow(stub, pc):
    from vllm.distributed.kv_events import BlockRemoved, BlockStored
    eng = make(pc)
    a = Req("a", prompt(5 * BS + 3, salt=1))
    out = eng.step(new=[a])
    assert out.invalid_block_ids == set()
    evs = settle(eng, 5)
    assert [type(e) for e in evs] == [BlockStored] * 5, evs
    want = [int.from_bytes(h[-8:], "big") for h in a.block_hashes]
    assert [e.block_hashes for e in evs] == [[h] for h in want]
    assert [e.parent_block_hash for e in evs] == [None] + want[:4]
    assert [e.token_ids for e in evs] == [a.all_token_ids[i * BS:(i + 1) * BS] for i in range(5)]
    assert {(e.block_size, e.medium, e.lora_id, e.lora_name) for e in evs} == {(BS, "EXTERNAL", None, None)}
    eng.step(finished=["a"])
    # a request with a LoRA: its events name it (its block hashes differ: vLLM hashes the LoRA in)
    lo = Req("lo", prompt(BS + 1, salt=9))
    lo.lora_request = type("LoRARequest", (), {"lora_name": "sql-adapter", "lora_int_id": 3})()
    eng.step(new=[lo])
    evs = settle(eng, 6)
    assert (evs[5].lora_id, evs[5].lora_name) == (3, "sql-adapter")
    eng.step(finished=["lo"])
    del eng.events[5]
    # b shares a's first 4 blocks: 64 tokens come from Fluxon, loaded before the forward pass
    b = Req("b", a.all_token_ids[:4 * BS] + prompt(2 * BS + 1, salt=2))
    n, is_async = eng.sched.get_num_new_matched_tokens(b, 0)
    assert (n, is_async) == (4 * BS, False)
    out = eng.step(new=[b])
    assert out.invalid_block_ids == set()
    _, ids, _ = eng.running["b"]
    for rank in range(2):
        for i in range(6):  # loaded (0-3) and computed (4-5) blocks: what the model writes
            got, exp = eng.kv_of(rank, ids[i]), eng.expected(rank, b.block_hashes[i])
            assert all((g == e).all() for g, e in zip(got, exp)), f"rank {rank} block {i}"
    evs = settle(eng, 7)
    assert [e.block_hashes[0] for e in evs[5:]] == [int.from_bytes(h[-8:], "big") for h in b.block_hashes[4:6]]
    assert eng.sched.get_num_new_matched_tokens(Req("b2", list(b.all_token_ids)), 0) == (6 * BS, False)
    # rank 1's shard of a's first block goes (evicted, deleted): a lookup now misses that
    # block, which was announced stored -> BlockRemoved
    from fluxon.vllm.core import block_hash_hex
    with pc.client(1) as c:
        c.delete(eng.sched._spec.block_keys(block_hash_hex(a.block_hashes[0]), 1)[0])
    assert eng.sched.get_num_new_matched_tokens(Req("a2", list(a.all_token_ids)), 0) == (0, False)
    eng.step()
    assert eng.events[-1] == BlockRemoved(block_hashes=[want[0]], medium="EXTERNAL")
    for c in [eng.sched] + eng.workers:
        c.shutdown()


@pytest.mark.parametrize("load_async", [False, True])
def test_an_owner_killed_mid_load_is_reported_as_load_errors(stub, pc, load_async):
    eng = make(pc, load_async=load_async)
    a = Req("a", prompt(5 * BS + 3, salt=3))
    eng.step(new=[a])
    settle(eng, 5)
    eng.step(finished=["a"])
    c = Req("c", list(a.all_token_ids))
    assert eng.sched.get_num_new_matched_tokens(c, 0) == (5 * BS, load_async)
    # the scheduler planned the load; rank 1's owner dies before the workers run it
    real_build = eng.sched.build_connector_meta

    def build_then_kill(so):
        meta = real_build(so)
        if meta.plan.loads:
            pc.kill(1)
        return meta
    eng.sched.build_connector_meta = build_then_kill
    out = eng.step(new=[c])
    ids = (eng.waiting_remote.get("c") or eng.running.get("c"))[1]
    assert out.invalid_block_ids == set(ids[:5]), "every block rank 1 could not restore, in this pass"
    if load_async:
        assert out.finished_recving == {"c"}  # still reported finished, with its failed blocks
    # rank 0 restored its shard byte-exact all the same
    for i in range(5):
        assert all((g == e).all() for g, e in zip(eng.kv_of(0, ids[i]), eng.expected(0, a.block_hashes[i])))
    eng.sched.build_connector_meta = real_build
    for x in [eng.sched] + eng.workers:
        x.shutdown()


def test_configuration_errors_are_clear(stub, pc):
    import vllm_driver
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.v1.kv_cache_interface import KVCacheGroupSpec, MLAAttentionSpec
    vc, kvc = vllm_driver.configs(pc.socket(0), pc.cluster_id)
    cls = load_connector_class(vc)
    vc.kv_transfer_config.kv_connector_extra_config.pop("socket")
    os.environ.pop("FLUXON_SOCKET", None)
    with pytest.raises(ValueError, match="socket"):
        cls(vc, KVConnectorRole.SCHEDULER, kvc)
    vc, kvc = vllm_driver.configs(pc.socket(0), pc.cluster_id)
    with pytest.raises(ValueError, match="kv_cache_config"):
        cls(vc, KVConnectorRole.SCHEDULER, None)
    kvc.kv_cache_groups = [KVCacheGroupSpec(["x"], MLAAttentionSpec(BS, 1, 64, "torch.float16"))]
    with pytest.raises(ValueError, match="MLAAttentionSpec"):
        cls(vc, KVConnectorRole.SCHEDULER, kvc)
    vc, kvc = vllm_driver.configs(pc.socket(0), pc.cluster_id)
    vc.parallel_config.pipeline_parallel_size = 2
    with pytest.raises(ValueError, match="pipeline_parallel_size = 2"):
        cls(vc, KVConnectorRole.SCHEDULER, kvc)
    vc, kvc = vllm_driver.configs(pc.socket(0), pc.cluster_id, tp_rank=0)
    w = cls(vc, KVConnectorRole.WORKER, kvc)
    with pytest.raises(ValueError, match="no tensor for layers"):
        w.register_kv_caches({})
    w.shutdown()


def test_a_block_is_announced_once_every_rank_reported_it_even_steps_apart(stub, pc):
    import vllm_driver
    from vllm.distributed.kv_events import BlockStored
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.v1.outputs import KVConnectorOutput
    from fluxon.vllm.connector import FluxonKVEvents
    vc, kvc = vllm_driver.configs(pc.socket(0), pc.cluster_id, tp_size=2)  # the connector attaches at construction
    sched = load_connector_class(vc)(vc, KVConnectorRole.SCHEDULER, kvc)
    e = BlockStored(block_hashes=[7], parent_block_hash=None, token_ids=[1] * BS, block_size=BS, lora_id=None,
                    medium="EXTERNAL", lora_name=None)

    def deliver(*per_rank):
        ev = None
        for rank, events in per_rank:  # combined as vLLM's KVOutputAggregator does
            w = FluxonKVEvents(rank, events)
            if ev is None:
                ev = w
            else:
                ev.add_events(w.get_all_events())
                ev.increment_workers(1)
        sched.update_connector_output(KVConnectorOutput(kv_cache_events=ev))
        return list(sched.take_events())
    e2 = BlockStored(block_hashes=[8], parent_block_hash=7, token_ids=[2] * BS, block_size=BS, lora_id=None,
                     medium="EXTERNAL", lora_name=None)
    assert deliver((0, []), (1, [e2])) == []       # rank 1 alone, twice (its rank survives the combining)
    assert deliver((0, []), (1, [e2])) == []
    assert deliver((0, [e]), (1, [])) == []        # rank 1 has not published its shard yet
    assert deliver((0, [e]), (1, [])) == []        # rank 0 again: still one rank
    assert deliver((0, []), (1, [e])) == [e]       # a step later rank 1 did: announced once
    assert deliver((0, []), (1, [])) == []
    sched.shutdown()


# ---- settings checked at construction (settings.py), nothing raising into vLLM afterwards ----

# (member, value, what the error must say is allowed); each is refused when the connector is
# constructed, in either role, with an error naming the member and the value
BAD_MEMBERS = [
    ("timeout_ms", "abc", "an int in 1..3600000"), ("timeout_ms", -5, "an int in 1..3600000"),
    ("timeout_ms", 0, "an int in 1..3600000"), ("timeout_ms", 3600001, "an int in 1..3600000"),
    ("timeout_ms", 3000.0, "an int in 1..3600000"), ("timeout_ms", True, "an int in 1..3600000"),
    ("load_async", "maybe", "a boolean (true or false, or 1 or 0)"), ("load_async", 2, "a boolean"),
    ("save_decode", "maybe", "a boolean (true or false, or 1 or 0)"), ("save_decode", None, "a boolean"),
    ("max_object_bytes", 1.5, "an int in 1..1073741824"), ("max_object_bytes", "4MiB", "an int in 1..1073741824"),
    ("max_object_bytes", 0, "an int in 1..1073741824"), ("max_object_bytes", 1 << 31, "an int in 1..1073741824"),
    ("hash_block_size", 8.0, "an int >= 1"), ("hash_block_size", 0, "an int >= 1"),
    ("hash_block_size", 3, f"an int in 1..{BS} that divides the block size {BS}"),
    ("hash_block_size", 2 * BS, f"an int in 1..{BS} that divides the block size {BS}"),
    ("tp_rank", -1, "an int >= 0"), ("tp_rank", "0", "an int >= 0"), ("tp_rank", 2, "an int in 0..1"),
    ("kv_inner_layout", "nhd", "one of NHD, HND"), ("log_level", "loud", "one of debug, info, warn, error, off"),
    ("cluster_id", "", "a non-empty string"), ("cluster_id", 5, "a non-empty string"),
    ("cluster_token", 5, "a string (no NUL)"), ("socket", 5, "a non-empty string"),
    ("key_prefix", 5, "a string (no NUL)"), ("key_prefix", "\x01t/", "does not start with"),
    ("key_prefix", "p" * 1000, "keys would be"),
    ("key_prefix", "\ud800", "a lone surrogate"),  # a new user's finding: UnicodeEncodeError, unnamed
]


@pytest.mark.parametrize("member,value,allowed", BAD_MEMBERS, ids=[f"{m}={v!r}"[:40] for m, v, _ in BAD_MEMBERS])
def test_a_bad_extra_config_member_is_refused_at_construction_naming_it(stub, member, value, allowed):
    import re
    import vllm_driver
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    for role in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER):
        # no owner: the settings are checked before the client attaches
        vc, kvc = vllm_driver.configs("/nonexistent/owner.sock", "x", tp_size=2)
        vc.kv_transfer_config.kv_connector_extra_config.update({"tp_rank": 0, member: value})
        with pytest.raises(ValueError, match=re.escape(f"kv_connector_extra_config.{member} = {value!r}: ")) as ei:
            load_connector_class(vc)(vc, role, kvc)
        assert allowed in str(ei.value)


@pytest.mark.parametrize("value", ["kv_bogus", "both", "", 1])
def test_a_kv_role_that_is_not_vllms_is_refused(stub, value):
    import vllm_driver
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    vc, kvc = vllm_driver.configs("/nonexistent/owner.sock", "x")
    vc.kv_transfer_config.kv_role = value
    with pytest.raises(ValueError, match=f"kv_transfer_config.kv_role = {value!r}: one of kv_producer, kv_consumer, "
                                         "kv_both"):
        load_connector_class(vc)(vc, KVConnectorRole.SCHEDULER, kvc)


def test_good_settings_are_taken_as_given(stub, pc):
    import vllm_driver
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    cases = [("kv_producer", {}, (False, True, False, False)), ("kv_consumer", {}, (True, False, False, False)),
             ("kv_both", {"load_async": "true", "save_decode": "False"}, (True, True, True, False)),
             (None, {"load_async": False, "save_decode": True}, (True, True, False, True)),
             ("kv_both", {"load_async": 1, "save_decode": 0, "log_level": "WARN"}, (True, True, True, False))]
    for role, extra, want in cases:
        vc, kvc = vllm_driver.configs(pc.socket(0), pc.cluster_id, max_object_bytes=1024, hash_block_size=BS // 2,
                                      **extra)
        vc.kv_transfer_config.kv_role = role
        c = load_connector_class(vc)(vc, KVConnectorRole.SCHEDULER, kvc)
        s = c._sched
        assert (s.load, s.save, s.load_async, s.save_decode) == want, role
        assert (c._spec.max_object_bytes, s.hashes_per_block) == (1024, 2)
        c.shutdown()


def test_a_wrong_socket_cluster_id_or_token_fails_the_start_naming_them(stub, pc):
    import vllm_driver
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from fluxon.errors import AuthError, Unavailable
    for sock, cid, extra, exc, says in [
            ("/nonexistent/owner.sock", pc.cluster_id, {}, Unavailable,
             "kv_connector_extra_config.socket = '/nonexistent/owner.sock': no owner listens"),
            (pc.socket(0), pc.cluster_id, {"cluster_token": "wrong"}, AuthError, "or the cluster_token"),
            (pc.socket(0), "other", {}, AuthError, "cluster_id = 'other'")]:
        for role in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER):
            vc, kvc = vllm_driver.configs(sock, cid, tp_rank=0, **extra)
            with pytest.raises(exc, match="cannot attach to the owner") as ei:
                load_connector_class(vc)(vc, role, kvc)
            assert says in str(ei.value)


def test_nothing_raises_into_vllm_at_lookup_save_or_load(stub, pc, caplog):
    """Unexpected exceptions (not FluxonErrors) in the lookup, the save plan, the save copy and
    the load copy: a miss, skipped saves, failed block ids; each place logged once."""
    import logging
    caplog.set_level(logging.WARNING, logger="fluxon.vllm")
    eng = make(pc)
    # lookup: a block hash of a type vLLM does not use, twice -> a miss, one warning
    odd = Req("odd", prompt(3 * BS + 1, salt=5))
    odd.block_hashes = [1.5] * 3
    assert eng.sched.get_num_new_matched_tokens(odd, 0) == (0, False)
    assert eng.sched.get_num_new_matched_tokens(odd, 0) == (0, False)
    # a client whose call raises something unexpected -> a miss
    holder = eng.sched._holder
    real_get = holder.get
    holder.get = lambda: (_ for _ in ()).throw(RuntimeError("surprise"))
    assert eng.sched.get_num_new_matched_tokens(Req("x", prompt(3 * BS + 1, salt=6)), 0) == (0, False)
    holder.get = real_get
    # the save copy of rank 1 raises: its save is skipped, rank 0 saves, nothing raises
    w1 = eng.workers[1]._worker
    real_backup = w1.paged.backup
    w1.paged.backup = lambda *a: (_ for _ in ()).throw(RuntimeError("backup broke"))
    a = Req("a", prompt(4 * BS + 3, salt=7))
    eng.step(new=[a])
    w1.paged.backup = real_backup
    assert w1.stats["save_failed"] == 4 and w1.stats["unexpected_errors"] == 1
    settle(eng, 1)
    eng.step(finished=["a"])
    assert eng.sched.get_num_new_matched_tokens(Req("a2", list(a.all_token_ids)), 0) == (0, False)  # rank 1 missing
    # saved whole this time; then the load copy of rank 0 raises: every block is reported failed
    b = Req("b", prompt(4 * BS + 3, salt=8))
    eng.step(new=[b])
    settle(eng, 4)
    eng.step(finished=["b"])
    w0 = eng.workers[0]._worker
    w0.paged.restore = lambda *a: (_ for _ in ()).throw(RuntimeError("restore broke"))
    c = Req("c", list(b.all_token_ids))
    assert eng.sched.get_num_new_matched_tokens(c, 0) == (4 * BS, False)
    out = eng.step(new=[c])
    ids = eng.running["c"][1]
    assert out.invalid_block_ids == set(ids[:4])
    # a scheduler output vLLM would not send: this step's saves are skipped, no exception
    meta = eng.sched.build_connector_meta(object())
    assert meta.plan.loads == [] and meta.plan.saves == []
    # ... and the requests running then save nothing more: that step's new block ids were
    # not taken in, so a later block id would be paired with another block's hash
    running = eng.sched._sched._trackers
    assert running and all(tr.saved_upto >= 1 << 62 for tr in running.values())
    warned = [r.getMessage() for r in caplog.records if "unexpected" in r.getMessage()]
    assert len([m for m in warned if m.startswith("fluxon vllm: lookup: unexpected TypeError")]) == 1, warned
    assert len([m for m in warned if m.startswith("fluxon vllm: lookup: unexpected RuntimeError: surprise")]) == 1
    assert len([m for m in warned if "save: unexpected RuntimeError: backup broke" in m]) == 1
    assert len([m for m in warned if "load: unexpected RuntimeError: restore broke" in m]) == 1
    assert len([m for m in warned if "build_connector_meta: unexpected AttributeError" in m]) == 1
    assert eng.sched._sched.stats["unexpected_errors"] == 4
    for x in [eng.sched] + eng.workers:
        x.shutdown()
