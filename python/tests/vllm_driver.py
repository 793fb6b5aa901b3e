"""A miniature of the vLLM engine loop around a KV connector, for tests: one scheduler-role
connector, one worker-role connector per TP rank (each with numpy paged KV), a block
allocator, and a "model" that writes deterministic KV for the tokens it computes (a full
block's bytes derive from its block hash, the rank and the layer, so a loaded block can be
compared with what computing it would have written). The call order of one step follows
vLLM's scheduler and kv_connector_model_runner_mixin (vllm/v1/worker/kv_connector_model_runner_mixin.py at 00f4240e):

  scheduler: get_num_new_matched_tokens -> (allocate) -> update_state_after_alloc ->
             build_connector_meta
  worker:    bind_connector_metadata -> start_load_kv -> per layer (wait_for_layer_load,
             attention writes KV, save_kv_layer) -> wait_for_save -> get_finished ->
             get_block_ids_with_load_errors -> get_kv_connector_kv_cache_events ->
             clear_connector_metadata
  scheduler: update_connector_output -> take_events -> request_finished (finished ones)
"""
import hashlib
from types import SimpleNamespace

import numpy as np

from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import KVConnectorOutput

from vllm_kv import BS, DIM, DTYPE, HEADS, LAYERS

LAYER_NAMES = [f"model.layers.{i}.self_attn.attn" for i in range(LAYERS)]


def configs(socket, cluster_id, tp_size=2, num_blocks=32, **extra):
    kv_cfg = KVCacheConfig(num_blocks=num_blocks, kv_cache_groups=[KVCacheGroupSpec(
        LAYER_NAMES, FullAttentionSpec(block_size=BS, num_kv_heads=HEADS, head_size=DIM, dtype="torch.float16"))])
    tc = SimpleNamespace(kv_connector="FluxonConnector", kv_connector_module_path="fluxon.vllm.connector",
                         kv_role="kv_both", kv_load_failure_policy="recompute",
                         kv_connector_extra_config=dict({"socket": socket, "cluster_id": cluster_id,
                                                         "timeout_ms": 3000, "log_level": "error"}, **extra))
    vc = SimpleNamespace(kv_transfer_config=tc, model_config=SimpleNamespace(model="org/model-7b"),
                         cache_config=SimpleNamespace(block_size=BS),
                         parallel_config=SimpleNamespace(tensor_parallel_size=tp_size))
    return vc, kv_cfg


class Blocks:
    """KVCacheBlocks double: get_block_ids() -> one list per KV cache group."""

    def __init__(self, ids):
        self.ids = list(ids)

    def get_block_ids(self):
        return (list(self.ids),)


def block_content(block_hash, rank, layer):
    """(K, V) a model would write for a full block."""
    seed = int.from_bytes(hashlib.sha256(bytes(block_hash) + bytes([rank, layer])).digest()[:8], "little")
    r = np.random.default_rng(seed)
    return [r.standard_normal((BS, HEADS, DIM)).astype(DTYPE) for _ in range(2)]


class Engine:
    def __init__(self, sched, workers, num_blocks=32):
        self.sched, self.workers = sched, workers
        self.kv = {w: {n: np.zeros((num_blocks, 2, BS, HEADS, DIM), DTYPE) for n in LAYER_NAMES} for w in workers}
        for w in workers:
            w.register_kv_caches(self.kv[w])
        self.free = list(range(num_blocks))
        self.running = {}  # req_id -> (request, block ids, computed tokens)
        self.waiting_remote = {}  # async loads in flight: req_id -> (request, block ids, computed after load)
        self.events, self.invalid, self.finished_recving = [], set(), set()

    def alloc(self, n):
        out, self.free = self.free[:n], self.free[n:]
        return out

    def kv_of(self, rank, block_id):
        w = self.workers[rank]
        return [self.kv[w][n][block_id].copy() for n in LAYER_NAMES]

    def expected(self, rank, block_hash):
        return [np.stack(block_content(block_hash, rank, li)) for li in range(LAYERS)]

    def step(self, new=(), finished=()):
        """One engine step: schedules the new requests (whole prompt, no local prefix cache),
        runs the workers, returns the KVConnectorOutput the scheduler received."""
        sched_new, num_sched = [], {}
        for req in new:
            n, is_async = self.sched.get_num_new_matched_tokens(req, 0)
            assert n is not None
            ids = self.alloc(-(-req.num_tokens // BS))
            self.sched.update_state_after_alloc(req, Blocks(ids), n)
            if is_async:
                self.waiting_remote[req.request_id] = (req, ids, n)
                continue
            sched_new.append(NewRequestData(req.request_id, list(req.all_token_ids), (ids,), n))
            num_sched[req.request_id] = req.num_tokens - n
            self.running[req.request_id] = (req, ids, n)
        for rid in list(self.waiting_remote):
            if rid in self.finished_recving:  # the async load finished: schedule it now
                req, ids, n = self.waiting_remote.pop(rid)
                self.sched.update_state_after_alloc(req, Blocks([]), 0)
                sched_new.append(NewRequestData(rid, list(req.all_token_ids), (ids,), n))
                num_sched[rid] = req.num_tokens - n
                self.running[rid] = (req, ids, n)
        self.finished_recving -= {r.req_id for r in sched_new}
        so = SchedulerOutput(sched_new, CachedRequestData(), num_sched, sum(num_sched.values()),
                             finished_req_ids=set(finished))
        so.kv_connector_metadata = self.sched.build_connector_meta(so)
        outs = [self._run_worker(rank, w, so) for rank, w in enumerate(self.workers)]
        out = KVConnectorOutput(finished_recving=set().union(*[o.finished_recving or set() for o in outs]) or None,
                                invalid_block_ids=set().union(*[o.invalid_block_ids for o in outs]))
        ev = None
        for o in outs:  # as vLLM's KVOutputAggregator combines the workers' events
            if ev is None:
                ev = o.kv_cache_events
            elif o.kv_cache_events:
                ev.add_events(o.kv_cache_events.get_all_events())
                ev.increment_workers(1)
        out.kv_cache_events = ev
        self.sched.update_connector_output(out)
        self.events.extend(self.sched.take_events())
        self.invalid |= out.invalid_block_ids
        self.finished_recving |= out.finished_recving or set()
        for rid in finished:
            req, _, _ = self.running.pop(rid)
            assert self.sched.request_finished(req, []) == (False, None)
        return out

    def _run_worker(self, rank, w, so):
        w.bind_connector_metadata(so.kv_connector_metadata)
        w.start_load_kv(SimpleNamespace())
        for li, name in enumerate(LAYER_NAMES):
            w.wait_for_layer_load(name)
            for nr in so.scheduled_new_reqs:  # attention writes the KV of the computed tokens
                req, ids, _ = self.running[nr.req_id]
                first = nr.num_computed_tokens // BS
                for b in range(first, len(ids)):
                    if b < len(req.block_hashes):
                        k, v = block_content(req.block_hashes[b], rank, li)
                        self.kv[w][name][ids[b], 0], self.kv[w][name][ids[b], 1] = k, v
            w.save_kv_layer(name, self.kv[w][name], None)
        if so.total_num_scheduled_tokens:
            w.wait_for_save()
        _, recving = w.get_finished(set(so.finished_req_ids))
        out = KVConnectorOutput(finished_recving=recving, invalid_block_ids=w.get_block_ids_with_load_errors(),
                                kv_cache_events=w.get_kv_connector_kv_cache_events())
        w.clear_connector_metadata()
        return out
