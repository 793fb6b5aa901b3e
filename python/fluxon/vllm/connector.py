"""FluxonConnector: a vLLM KV connector (KVConnectorBase_V1) over a Fluxon cluster; a thin
shell over fluxon.vllm.core. Written against vLLM 13f4ad0f's base.py (docs/vllm.md says
exactly what is and is not shown). Load it with

    --kv-transfer-config '{"kv_connector": "FluxonConnector",
        "kv_connector_module_path": "fluxon.vllm.connector", "kv_role": "kv_both",
        "kv_load_failure_policy": "recompute",
        "kv_connector_extra_config": {"socket": "/run/fluxon/owner.sock", "cluster_id": "prod"}}'

kv_connector_extra_config: socket (the local owner's unix socket; else $FLUXON_SOCKET),
cluster_id ("fluxon"), cluster_token, timeout_ms, log_level, key_prefix (""),
max_object_bytes (4 MiB: a block larger than this is cut into parts, one atomic group),
kv_inner_layout ("NHD" or "HND"), load_async (false), save_decode (false), hash_block_size
(the granularity of request.block_hashes when vLLM hashes finer than block_size; default
block_size), tp_rank (default: vLLM's tensor-parallel rank).

At construction (both roles) every member and kv_role is checked (settings.py: a ValueError
names the member, its value and what is allowed) and the client attaches to the owner, as
fluxon.sglang does: a wrong socket, cluster_id or cluster_token fails the start, naming them.
Afterwards nothing raises into vLLM's scheduler or worker at lookup, save or load time: an
owner that went away, or any unexpected exception, is a miss, a skipped save or failed block
ids (logged; an unexpected exception once per place and type, core.log_unexpected).

Scheduler side: get_num_new_matched_tokens (a TP-complete prefix lookup), update_state_after_alloc,
build_connector_meta (this step's load and save plans), request_finished, take_events.
Worker side: register_kv_caches, start_load_kv (every load of the step, hostless, before
the forward pass), wait_for_layer_load / save_kv_layer (no-ops: loads are complete before
the first layer runs, saves take every layer of a block at once), wait_for_save (the step's
full blocks: put_start -> copy -> commit), get_finished, get_block_ids_with_load_errors
(every block not restored byte-complete, in the pass that loaded it), and
get_kv_connector_kv_cache_events (BlockStored, medium EXTERNAL, once published).
"""
import logging
import os
from collections import OrderedDict

from vllm.distributed.kv_events import BlockRemoved, BlockStored, KVConnectorKVEvents
from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1, KVConnectorMetadata,
                                                                KVConnectorRole)

from ..errors import FluxonError, Status, error_for
from .core import SchedulerCore, WorkerCore
from .holder import ClientHolder
from .keys import KVSpec, external_block_hash
from .paged import PagedKV
from .settings import Settings

logger = logging.getLogger("fluxon.vllm")

MEDIUM = "EXTERNAL"  # a shared pool outside the engine (the name SGLang and Dynamo use)
PINNED_VLLM = "13f4ad0f55b08ca1d37d1459f50ce950feaeb547"


class FluxonConnectorMetadata(KVConnectorMetadata):
    """One step's plan (a core.StepPlan: loads, saves), scheduler -> workers."""

    def __init__(self, plan):
        self.plan = plan


class _RankedEvents(list):
    """get_all_events' list, with the TP rank of each event in .ranks (vLLM's
    KVOutputAggregator hands it straight to the first worker's add_events)."""
    ranks = ()


class FluxonKVEvents(KVConnectorKVEvents):
    """The BlockStored events of the workers, each with the TP rank that stored its shard;
    the scheduler side reports a block once every rank did (FluxonConnector.take_events).
    An event whose rank got lost on the way counts as one more reporting rank."""

    def __init__(self, rank=0, events=()):
        self._ranked = [(rank, e) for e in events]
        self._workers = 1

    def ranked(self):
        return list(self._ranked)

    def add_events(self, events):
        ranks = getattr(events, "ranks", None)
        if ranks is None or len(ranks) != len(events):
            ranks = [None] * len(events)
        self._ranked.extend(zip(ranks, events))

    def aggregate(self):
        return self  # per-rank counting happens in the scheduler (events of one step may lag)

    def increment_workers(self, count=1):
        self._workers += count

    def get_all_events(self):
        out = _RankedEvents(e for _, e in self._ranked)
        out.ranks = [r for r, _ in self._ranked]
        return out

    def get_number_of_workers(self):
        return self._workers

    def clear_events(self):
        self._ranked = []
        self._workers = 1


def kv_spec(vllm_config, kv_cache_config, settings):
    """The KVSpec both roles derive from the same configs (so their keys agree)."""
    if kv_cache_config is None:
        raise ValueError("FluxonConnector needs the kv_cache_config constructor argument (vLLM passes it "
                         f"since the interface of {PINNED_VLLM[:8]})")
    groups = list(kv_cache_config.kv_cache_groups)
    if len(groups) != 1:
        raise ValueError(f"FluxonConnector supports one KV cache group, the model has {len(groups)} (hybrid "
                         "models: run with --disable-hybrid-kv-cache-manager or use another connector)")
    s = groups[0].kv_cache_spec
    if "MLA" in type(s).__name__ or not hasattr(s, "num_kv_heads"):
        raise ValueError(f"FluxonConnector: {type(s).__name__} is not supported (full attention K and V only)")
    per_elem = 2 * s.block_size * s.num_kv_heads * s.head_size
    if s.page_size_bytes % per_elem:
        raise ValueError(f"{type(s).__name__}: page_size_bytes {s.page_size_bytes} is not 2 x block_size x heads"
                         " x head_size elements")
    pc = vllm_config.parallel_config
    for name in ("pipeline_parallel_size", "decode_context_parallel_size", "prefill_context_parallel_size"):
        if int(getattr(pc, name, 1) or 1) > 1:
            raise ValueError(f"FluxonConnector: parallel_config.{name} = {getattr(pc, name)}; keys carry the TP "
                             "rank only, so pipeline and context parallelism are not supported (set it to 1)")
    block_size = int(getattr(vllm_config.cache_config, "block_size", s.block_size))
    if block_size != s.block_size:
        raise ValueError(f"cache_config.block_size {block_size} differs from the KV spec's {s.block_size}")
    return KVSpec(model=str(vllm_config.model_config.model), block_size=int(s.block_size), dtype=str(s.dtype),
                  num_layers=len(groups[0].layer_names), kv_heads=int(s.num_kv_heads), head_size=int(s.head_size),
                  itemsize=s.page_size_bytes // per_elem,
                  tp_size=int(vllm_config.parallel_config.tensor_parallel_size),
                  inner=settings.kv_inner_layout, layer_names=tuple(groups[0].layer_names),
                  max_object_bytes=settings.max_object_bytes, key_prefix=settings.key_prefix)


def attach(holder, settings):
    """Opens the holder's client now (as fluxon.sglang does at start-up): an owner that refuses
    or is absent fails the connector's construction with an error naming the members."""
    try:
        holder.get()
    except FluxonError as e:
        if e.status == Status.ERR_AUTH:
            why = (f"the owner refused kv_connector_extra_config.cluster_id = {settings.cluster_id!r} or the "
                   "cluster_token (they must be the owner's)")
        elif e.status == Status.ERR_UNAVAILABLE:
            why = "no owner listens at this socket (start the owner first, or fix kv_connector_extra_config.socket)"
        else:
            why = "the client's config was refused"
        raise error_for(e.status, "FluxonConnector", f"cannot attach to the owner at kv_connector_extra_config."
                        f"socket = {settings.socket!r}: {why}; {e}") from e


class FluxonConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config, role, kv_cache_config)
        st = self._settings = Settings.from_config(self._kv_transfer_config)
        self._spec = kv_spec(vllm_config, kv_cache_config, st)
        st.check_spec(self._spec)
        self._int_hashes = os.environ.get("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1").lower() not in ("0", "false")
        self._num_blocks = int(kv_cache_config.num_blocks)
        self._inner = self._spec.inner
        self._sched = self._worker = None
        self._holder = ClientHolder(st.socket, **st.client_kw())
        attach(self._holder, st)  # at start-up a wrong socket, cluster_id or cluster_token is an error
        try:
            self._init_role(role, st)
        except BaseException:
            self._holder.close()
            raise

    def _init_role(self, role, st):
        if role == KVConnectorRole.SCHEDULER:
            self._sched = SchedulerCore(self._spec, self._holder, load=st.load, save=st.save,
                                        load_async=st.load_async, save_decode=st.save_decode,
                                        hash_block_size=st.hash_block_size)
            self._stored_ranks = OrderedDict()  # BlockStored -> ranks that reported it
            self._stored_ready = []
        else:
            rank = st.tp_rank
            if rank is None:
                from vllm.distributed.parallel_state import get_tensor_model_parallel_rank
                rank = get_tensor_model_parallel_rank()
            self._worker = WorkerCore(self._spec, int(rank), self._holder)
            self._stored = []

    # ============================== scheduler side ==============================
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return self._sched.get_num_new_matched_tokens(request, num_computed_tokens)  # never raises (core)

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        try:
            ids = blocks.get_block_ids()
            self._sched.update_state_after_alloc(request, list(ids[0]) if ids else [], num_external_tokens)
        except Exception as e:
            if num_external_tokens:  # vLLM counts these tokens as loaded: unplanned, they would be wrong KV
                raise
            self._sched.unexpected("update_state_after_alloc", e, "this request's blocks are not saved")

    def build_connector_meta(self, scheduler_output):
        so = scheduler_output
        try:
            new = [(r.req_id, _group0(r.block_ids), r.num_computed_tokens) for r in so.scheduled_new_reqs]
            cr = so.scheduled_cached_reqs
            resumed = getattr(cr, "resumed_req_ids", None) or set()
            cached = [(rid, _group0(cr.new_block_ids[i]) if cr.new_block_ids[i] is not None else None,
                       cr.num_computed_tokens[i], rid in resumed) for i, rid in enumerate(cr.req_ids)]
            plan = self._sched.build_step(new, cached, so.num_scheduled_tokens, so.finished_req_ids,
                                          getattr(so, "preempted_req_ids", None) or ())
        except Exception as e:  # the planned loads still travel (vLLM counts their tokens); no saves
            self._sched.unexpected("build_connector_meta", e, "the saves of every running request are stopped")
            self._sched.stop_all_saves()  # this step's new block ids were not taken in
            plan = self._sched.build_step([], [], {})
        return FluxonConnectorMetadata(plan)

    def request_finished(self, request, block_ids):
        return self._sched.request_finished(request)

    def update_connector_output(self, connector_output):
        ev = getattr(connector_output, "kv_cache_events", None)
        if not isinstance(ev, FluxonKVEvents):
            return
        try:
            self._count_ranks(ev)
        except Exception as e:
            self._sched.unexpected("update_connector_output", e, "these KV events are dropped")

    def _count_ranks(self, ev):
        for rank, e in ev.ranked():
            ranks = self._stored_ranks.setdefault(e, set())
            ranks.add(rank if rank is not None else object())
            if len(ranks) >= self._spec.tp_size:  # every rank's shard is stored
                del self._stored_ranks[e]
                self._stored_ready.append(e)
        while len(self._stored_ranks) > 100000:
            self._stored_ranks.popitem(last=False)

    def take_events(self):
        """A list (taken at the call, whether or not the caller iterates it)."""
        ready, self._stored_ready = self._stored_ready, []
        try:
            for e in ready:
                self._sched.note_announced([_hex(h) for h in e.block_hashes])
            return ready + [BlockRemoved(block_hashes=[self._ext(h)], medium=MEDIUM)
                            for h in self._sched.take_removed()]
        except Exception as e:
            self._sched.unexpected("take_events", e, "these KV events are dropped")
            return []

    # ============================== worker side ==============================
    def register_kv_caches(self, kv_caches):
        names = list(self._spec.layer_names)
        missing = [n for n in names if n not in kv_caches]
        if missing:
            raise ValueError(f"register_kv_caches: no tensor for layers {missing[:4]} of the KV cache config")
        s = self._spec
        self._worker.register(PagedKV([kv_caches[n] for n in names], self._num_blocks, s.block_size, s.kv_heads,
                                      s.head_size, s.itemsize, self._inner))

    def start_load_kv(self, forward_context, **kwargs):
        meta = self._get_connector_metadata()
        if meta.plan.loads:
            try:
                self._worker.load(meta.plan.loads, async_ids=meta.plan.load_async)  # per request: never raises
            except Exception as e:  # a last resort: every block of the step is reported failed
                self._worker.unexpected("start_load_kv", e, "every block of this step's loads is reported failed")
                self._worker.fail_loads(meta.plan.loads, meta.plan.load_async)

    def wait_for_layer_load(self, layer_name):
        return  # start_load_kv restored every layer before the forward pass

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        return  # a block is saved whole (every layer, one atomic group) in wait_for_save

    def wait_for_save(self):
        meta = self._get_connector_metadata()
        if meta.plan.saves:
            self._worker.save(meta.plan.saves)  # never raises (core)

    def get_finished(self, finished_req_ids):
        self._poll_saves()
        recving = self._worker.take_finished_recving()
        return None, (recving or None)

    def _poll_saves(self):
        try:
            self._stored.extend(self._worker.poll_saves())
        except Exception as e:
            self._worker.unexpected("poll_saves", e, "the BlockStored events of these saves may be missing")

    def get_block_ids_with_load_errors(self):
        return self._worker.take_load_errors()

    def get_kv_connector_kv_cache_events(self):
        self._poll_saves()
        stored, self._stored = self._stored, []
        bs = self._spec.block_size
        try:
            evs = [BlockStored(block_hashes=[self._ext(b.hash)],
                               parent_block_hash=self._ext(b.parent) if b.parent else None,
                               token_ids=list(b.token_ids), block_size=bs, lora_id=b.lora_id, medium=MEDIUM,
                               lora_name=b.lora_name)
                   for b in stored]
        except Exception as e:
            self._worker.unexpected("get_kv_connector_kv_cache_events", e, f"{len(stored)} BlockStored events are "
                                    "dropped")
            evs = []
        return FluxonKVEvents(self._worker.rank, evs)  # also when empty: this rank reported

    def _ext(self, hash_hex):
        return external_block_hash(hash_hex) if self._int_hashes else bytes.fromhex(hash_hex)

    def shutdown(self):
        if self._worker is not None:
            self._stored.extend(self._worker.close())
        self._holder.close()


def _hex(h):
    """An event's block hash (an int ExternalBlockHash or bytes) as hex text."""
    return format(h, "016x") if isinstance(h, int) else bytes(h).hex()


def _group0(block_ids):
    """Block ids of KV cache group 0 (vLLM passes a tuple of per-group lists)."""
    if isinstance(block_ids, tuple):
        return list(block_ids[0]) if block_ids else []
    return list(block_ids)
