"""The engine-independent part of Fluxon's vLLM connector (no vLLM import).

Keys (keys.py). A block is identified by vLLM's own prefix-cache block hash (request.block_hashes,
bytes, chained through the parent block), as MooncakeStoreConnector does. Each TP rank
stores its shard of a block (every layer's K and V) under

    [<key_prefix>]<model>@tp_rank:<R>@cfg:<digest>@<block hash hex>[@part:<i>]

where <digest> (12 hex) covers what makes two engines' bytes incompatible: model, dtype,
block size, KV heads, head size, element size, inner layout (NHD/HND), layer names, TP
size and how a block is cut into objects. A block whose bytes exceed max_object_bytes is
cut into parts (whole layers each); the parts of one rank's block are one atomic group:
stored together or not at all, restored together or not at all.

Scheduler side (SchedulerCore): prefix lookup -> matched tokens, counting a block only when
every TP rank's shard (every part) exists, aligned down to a block and never the whole
prompt (the last token is recomputed); load plans from the blocks vLLM allocated; save
plans of the full blocks each step computed.

Worker side (WorkerCore): loads through the hostless path (get_start -> transfer -> copy
into the paged KV -> release), saves through put_start -> copy -> commit. Every block not
restored byte-complete is recorded as a failed block id (take_load_errors); a load never
raises into the engine.

Nothing raises into vLLM's scheduler or worker at lookup, save or load time: an unexpected
exception there (not a FluxonError: a bug, a request or block shaped unlike vLLM's) becomes a
miss, a skipped save or failed block ids, logged once per place and exception type with its
reason (log_unexpected) and counted in stats["unexpected_errors"].
"""
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import List, Optional

from ..errors import FluxonError, Status
from .holder import ClientHolder
from .keys import KVSpec, block_hash_hex, external_block_hash

__all__ = ["ClientHolder", "KVSpec", "block_hash_hex", "external_block_hash", "LoadRequest", "SaveBlock",
           "SaveRequest", "StepPlan", "LoadResult", "lookup_hit_blocks", "matched_tokens", "log_unexpected",
           "SchedulerCore", "WorkerCore"]

logger = logging.getLogger("fluxon.vllm")

LOOKUP_CHUNK_KEYS = 8192  # keys per batch_exists call (a frame holds ~60k keys of 1 KiB)


def log_unexpected(seen, where, e, outcome):
    """An unexpected exception e at `where` was turned into `outcome` (a miss, a skipped save,
    failed blocks): logged at warning, with its traceback, the first time `where` meets its
    type (seen: a set of the caller's); later ones at debug."""
    key = (where, type(e).__name__)
    if key in seen:
        logger.debug("fluxon vllm: %s: %s: %s; %s", where, type(e).__name__, e, outcome)
        return
    seen.add(key)
    logger.warning("fluxon vllm: %s: unexpected %s: %s; %s (logged once; later ones at debug level)", where,
                   type(e).__name__, e, outcome, exc_info=e)


# ---- plans (picklable: they travel to the workers inside the connector metadata) ----

@dataclass
class LoadRequest:
    req_id: str
    block_ids: List[int]
    hashes: List[str]  # block_hash_hex, parallel to block_ids


@dataclass
class SaveBlock:
    block_id: int
    hash: str
    parent: Optional[str]
    token_ids: List[int]
    lora_id: Optional[int] = None    # the request's LoRA (for the BlockStored event)
    lora_name: Optional[str] = None


@dataclass
class SaveRequest:
    req_id: str
    blocks: List[SaveBlock]


@dataclass
class StepPlan:
    loads: List[LoadRequest] = field(default_factory=list)
    saves: List[SaveRequest] = field(default_factory=list)
    load_async: bool = False


@dataclass
class LoadResult:
    req_id: str
    loaded: List[int]   # block ids restored byte-complete
    failed: List[int]   # block ids not restored (vLLM recomputes them)
    reason: str = ""


def lookup_hit_blocks(client, spec, hashes):
    """Leading blocks of hashes (block_hash_hex) whose every rank's every part exists."""
    per_block = spec.tp_size * spec.parts
    step = max(1, LOOKUP_CHUNK_KEYS // per_block)
    hits = 0
    for i in range(0, len(hashes), step):
        chunk = hashes[i:i + step]
        keys = [k for h in chunk for r in range(spec.tp_size) for k in spec.block_keys(h, r)]
        n = client.batch_exists(keys) // per_block
        hits += n
        if n < len(chunk):
            break
    return hits


def matched_tokens(hit_blocks, num_tokens, block_size):
    """Tokens a prefix of hit_blocks full blocks lets vLLM skip: aligned down to a block and
    never the whole prompt (vLLM must compute at least the last token)."""
    if num_tokens <= 0:
        return 0
    return min(hit_blocks, (num_tokens - 1) // block_size) * block_size


@dataclass
class _Tracker:
    request: object
    block_ids: list
    saved_upto: int  # blocks [0, saved_upto) are stored (or were found stored)


class SchedulerCore:
    """Scheduler-side state. Reads from a request only request_id, block_hashes, num_tokens,
    num_prompt_tokens and all_token_ids (duck-typed: vLLM's Request)."""

    def __init__(self, spec, holder, load=True, save=True, load_async=False, save_decode=False,
                 hash_block_size=None, max_announced=1 << 20):
        self.spec, self.holder = spec, holder
        hbs = spec.block_size if hash_block_size is None else int(hash_block_size)
        if hbs <= 0 or spec.block_size % hbs:
            raise ValueError(f"hash_block_size {hash_block_size} does not divide block_size {spec.block_size}")
        self.hashes_per_block = spec.block_size // hbs
        self.load, self.save, self.load_async, self.save_decode = load, save, load_async, save_decode
        self._hit_blocks = {}   # req_id -> blocks found in the store by the last lookup
        self._load_specs = {}   # req_id -> (locally computed tokens, tokens the store covers)
        self._ready = []        # LoadRequests waiting for the next step's metadata
        self._trackers = {}
        self._announced = OrderedDict()  # low 64 bits (hex) -> hash reported stored (for BlockRemoved)
        self._max_announced = max_announced
        self._removed = []      # hashes (hex) seen missing after being announced
        self._unexpected = set()  # (where, exception type) already logged (log_unexpected)
        self.stats = {"lookups": 0, "lookup_blocks": 0, "hit_blocks": 0, "lookup_errors": 0,
                      "planned_load_blocks": 0, "planned_save_blocks": 0, "unexpected_errors": 0}

    def block_hashes(self, request):
        """One hash per vLLM block: request.block_hashes, or the last hash of each block's
        run when vLLM hashes at a finer hash_block_size (it chains the whole prefix)."""
        h, r = request.block_hashes, self.hashes_per_block
        if r == 1:
            return h
        return [h[(i + 1) * r - 1] for i in range(len(h) // r)]

    # ---- lookup ----
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        """(tokens to load beyond num_computed_tokens, load asynchronously). A failed lookup
        is a miss (0): the engine computes, nothing waits for an owner that is away. It never
        raises: an unexpected exception is a miss too (log_unexpected)."""
        try:
            return self._matched(request, num_computed_tokens)
        except Exception as e:
            self.unexpected("lookup", e, "counted as a miss (0)")
            rid = getattr(request, "request_id", None)
            self._load_specs.pop(rid, None)
            self._hit_blocks.pop(rid, None)
            return 0, False

    def unexpected(self, where, e, outcome):
        self.stats["unexpected_errors"] += 1
        log_unexpected(self._unexpected, where, e, outcome)

    def _matched(self, request, num_computed_tokens):
        rid = request.request_id
        bs = self.spec.block_size
        self._load_specs.pop(rid, None)
        if not self.load:
            return 0, False
        n_tokens = int(request.num_tokens)
        all_hashes = self.block_hashes(request)
        nblk = min(len(all_hashes), n_tokens // bs)
        if nblk == 0:
            self._hit_blocks[rid] = 0
            return 0, False
        hashes = [block_hash_hex(h) for h in all_hashes[:nblk]]
        self.stats["lookups"] += 1
        self.stats["lookup_blocks"] += nblk
        try:
            hit = lookup_hit_blocks(self.holder.get(), self.spec, hashes)
        except FluxonError as e:
            self.stats["lookup_errors"] += 1
            self.holder.failed(e)
            logger.warning("fluxon vllm: lookup of request %s failed, counted as a miss: %s", rid, e)
            hit = 0
        self.stats["hit_blocks"] += hit
        if hit < nblk:
            self._note_missing(hashes[hit])
        self._hit_blocks[rid] = hit
        tokens = matched_tokens(hit, n_tokens, bs)
        if tokens <= num_computed_tokens:
            return 0, False
        self._load_specs[rid] = (int(num_computed_tokens), tokens)
        return tokens - int(num_computed_tokens), self.load_async

    def update_state_after_alloc(self, request, block_ids, num_external_tokens):
        """block_ids: the request's blocks (KV cache group 0) after allocation."""
        rid = request.request_id
        tr = self._trackers.get(rid)
        if tr is None:
            tr = self._trackers[rid] = _Tracker(request, list(block_ids), self._hit_blocks.pop(rid, 0))
        spec = self._load_specs.pop(rid, None)
        if num_external_tokens <= 0:
            return
        if spec is None:  # vLLM would take unloaded blocks for loaded ones: refuse loudly
            raise ValueError(f"request {rid}: {num_external_tokens} external tokens allocated, but no lookup of "
                             "this connector matched any")
        bs = self.spec.block_size
        local, _ = spec
        start, end = local // bs, (local + int(num_external_tokens)) // bs
        if local % bs or (local + int(num_external_tokens)) % bs or end > len(block_ids):
            raise ValueError(f"request {rid}: {num_external_tokens} external tokens after {local} local ones "
                             f"are not whole blocks of {bs} within the {len(block_ids)} allocated blocks")
        hashes = [block_hash_hex(h) for h in self.block_hashes(request)[start:end]]
        self._ready.append(LoadRequest(rid, [int(b) for b in block_ids[start:end]], hashes))
        self.stats["planned_load_blocks"] += end - start

    # ---- per-step plan ----
    def build_step(self, new_reqs, cached_reqs, num_scheduled, finished_ids=(), preempted_ids=()):
        """new_reqs: (req_id, block_ids of group 0, num_computed_tokens) of the requests
        scheduled for the first time; cached_reqs: (req_id, new block_ids or None,
        num_computed_tokens, resumed) of the others; num_scheduled: req_id -> tokens."""
        for rid in finished_ids:
            self._forget(rid)
        for rid in preempted_ids or ():
            tr = self._trackers.get(rid)
            if tr is not None:
                tr.block_ids = []
        plan = StepPlan(loads=self._ready, load_async=self.load_async)
        self._ready = []  # the loads travel whatever happens below (vLLM counts their tokens)
        for rid, block_ids, ncomp in new_reqs:
            tr = self._trackers.get(rid)
            if tr is None:
                continue
            try:
                tr.block_ids = [int(b) for b in block_ids]
                self._plan_save(rid, tr, int(ncomp) + int(num_scheduled.get(rid, 0)), plan.saves)
            except Exception as e:
                self._save_skipped(rid, tr, e)
        for rid, new_ids, ncomp, resumed in cached_reqs:
            tr = self._trackers.get(rid)
            if tr is None:
                continue
            try:
                if resumed:
                    tr.block_ids = [int(b) for b in (new_ids or [])]
                elif new_ids:
                    tr.block_ids.extend(int(b) for b in new_ids)
                self._plan_save(rid, tr, int(ncomp) + int(num_scheduled.get(rid, 0)), plan.saves)
            except Exception as e:
                self._save_skipped(rid, tr, e)
        return plan

    def stop_all_saves(self):
        """A step whose block ids were not all taken in (an unexpected exception building it):
        every tracked request saves nothing more, since a later step's block ids would land
        at the wrong positions and pair a block hash with another block's contents."""
        for tr in self._trackers.values():
            tr.saved_upto = 1 << 62

    def _save_skipped(self, rid, tr, e):
        """An unexpected exception planning rid's saves: this request saves nothing more."""
        self.unexpected("save plan", e, f"the saves of request {rid} are skipped")
        tr.saved_upto = 1 << 62

    def _plan_save(self, rid, tr, computed_after, out):
        if not self.save:
            return
        r, bs = tr.request, self.spec.block_size
        limit = int(r.num_tokens) if self.save_decode else int(getattr(r, "num_prompt_tokens", r.num_tokens))
        hashes = self.block_hashes(r)
        full = min(min(computed_after, limit) // bs, len(hashes), len(tr.block_ids))
        if full <= tr.saved_upto:
            return
        toks = r.all_token_ids
        lora = getattr(r, "lora_request", None)
        lora_id, lora_name = getattr(lora, "lora_int_id", None), getattr(lora, "lora_name", None)
        blocks = []
        prev = block_hash_hex(hashes[tr.saved_upto - 1]) if tr.saved_upto else None
        for i in range(tr.saved_upto, full):
            h = block_hash_hex(hashes[i])
            blocks.append(SaveBlock(tr.block_ids[i], h, prev, [int(t) for t in toks[i * bs:(i + 1) * bs]],
                                    lora_id, lora_name))
            prev = h
        tr.saved_upto = full
        self.stats["planned_save_blocks"] += len(blocks)
        out.append(SaveRequest(rid, blocks))

    def request_finished(self, request):
        self._forget(request.request_id)
        return False, None  # saves are copied in wait_for_save: the blocks may be freed now

    def _forget(self, rid):
        self._trackers.pop(rid, None)
        self._hit_blocks.pop(rid, None)
        self._load_specs.pop(rid, None)

    # ---- events bookkeeping ----
    def note_announced(self, hashes_hex):
        """Remembers blocks reported stored (block_hash_hex, or the 16 hex digits of an int
        ExternalBlockHash), so a lookup that finds one gone reports it removed (take_removed)."""
        for h in hashes_hex:
            k = h[-16:]
            self._announced[k] = h
            self._announced.move_to_end(k)
        while len(self._announced) > self._max_announced:
            self._announced.popitem(last=False)

    def _note_missing(self, hash_hex):
        h = self._announced.pop(hash_hex[-16:], None)
        if h is not None:
            self._removed.append(h)

    def take_removed(self):
        out, self._removed = self._removed, []
        return out


class WorkerCore:
    """Worker-side loads and saves of one TP rank over its paged KV (a PagedKV)."""

    def __init__(self, spec, rank, holder, paged=None, commit_wait_s=30.0):
        if not 0 <= rank < spec.tp_size:
            raise ValueError(f"tp rank {rank} is outside 0..{spec.tp_size - 1}")
        self.spec, self.rank, self.holder, self.paged = spec, rank, holder, None
        self.commit_wait_s = commit_wait_s
        self._load_errors = set()
        self._recving_done = set()
        self._pending = []  # (Future, [SaveBlock], deadline)
        self._unexpected = set()  # (where, exception type) already logged (log_unexpected)
        self.stats = {"loaded_blocks": 0, "failed_blocks": 0, "saved_blocks": 0, "save_existing": 0,
                      "save_failed": 0, "unexpected_errors": 0}
        if paged is not None:
            self.register(paged)

    def register(self, paged):
        if paged.num_layers != self.spec.num_layers:
            raise ValueError(f"{paged.num_layers} layer tensors, the KV spec has {self.spec.num_layers} layers")
        if paged.half * 2 != self.spec.layer_bytes:
            raise ValueError(f"a block of one layer is {paged.half * 2} bytes, the KV spec says "
                             f"{self.spec.layer_bytes}")
        self.paged = paged

    # ---- loads ----
    def load(self, loads, async_ids=False):
        """Restores every LoadRequest; returns the LoadResults. Failed block ids are also kept
        for take_load_errors; with async_ids the request ids for take_finished_recving."""
        return list(self.iter_load(loads, async_ids))

    def iter_load(self, loads, async_ids=False):
        """load() one request at a time (a generator): the caller sees each outcome."""
        for lr in loads:
            try:
                res = self._load_one(lr)
            except Exception as e:  # never into the engine: every block of the request failed
                self.unexpected("load", e, f"the {len(lr.block_ids)} blocks of request {lr.req_id} are reported "
                                "failed (vLLM recomputes them)")
                res = LoadResult(lr.req_id, [], list(lr.block_ids), f"{type(e).__name__}: {e}")
            self._load_errors.update(res.failed)
            self.stats["loaded_blocks"] += len(res.loaded)
            self.stats["failed_blocks"] += len(res.failed)
            if res.failed:
                logger.warning("fluxon vllm: request %s: %d of %d blocks not restored (%s); reported to vLLM",
                               lr.req_id, len(res.failed), len(lr.block_ids), res.reason)
            if async_ids:
                self._recving_done.add(lr.req_id)
            yield res

    def unexpected(self, where, e, outcome):
        self.stats["unexpected_errors"] += 1
        log_unexpected(self._unexpected, where, e, outcome)

    def fail_loads(self, loads, async_ids=False):
        """Reports every block of loads failed (and, with async_ids, the requests received): the
        fallback when a step's loads could not even be attempted."""
        for lr in loads:
            self._load_errors.update(lr.block_ids)
            self.stats["failed_blocks"] += len(lr.block_ids)
            if async_ids:
                self._recving_done.add(lr.req_id)

    def _load_one(self, lr):
        ids = list(lr.block_ids)
        if not ids:
            return LoadResult(lr.req_id, [], [])
        if self.paged is None:
            return LoadResult(lr.req_id, [], ids, "no KV caches registered")
        parts, spec = self.spec.parts, self.spec
        keys = [k for h in lr.hashes for k in spec.block_keys(h, self.rank)]
        try:
            c = self.holder.get()
            h = c.get_start(keys, True, [parts] * len(ids) if parts > 1 else None)
        except FluxonError as e:
            self.holder.failed(e)
            return LoadResult(lr.req_id, [], ids, f"get_start: {e}")
        got = min(h.transferable_len // parts, len(ids))
        reason = "" if got == len(ids) else f"block {got} missing ({getattr(h.miss_status, 'name', h.miss_status)})"
        if got == 0:
            try:
                h.cancel()
            except FluxonError as e:
                logger.debug("fluxon vllm: cancel: %s", e)
            return LoadResult(lr.req_id, [], ids, reason)
        try:
            rp = h.transfer(got * parts)
        except FluxonError as e:
            self.holder.failed(e)
            return LoadResult(lr.req_id, [], ids, f"get_transfer: {e}")
        loaded, failed, good = [], [], []
        try:
            for j in range(got):
                lens = rp.value_lens[j * parts:(j + 1) * parts]
                if any(n != spec.part_bytes for n in lens):
                    failed.append(ids[j])
                    reason = reason or f"block {j}: stored with {lens} bytes, expected {spec.part_bytes}"
                elif not self.paged.valid(ids[j]):
                    failed.append(ids[j])
                    reason = reason or f"block id {ids[j]} is outside the paged KV"
                else:
                    good.append(j)
            lpp = spec.layers_per_part
            for p in range(parts):  # one batch per part: every good block of the request
                self.paged.restore([ids[j] for j in good], [rp.value_ptrs[j * parts + p] for j in good],
                                   p * lpp, (p + 1) * lpp)
            loaded = [ids[j] for j in good]
        except ValueError as e:  # not restored byte-complete: every block of the batch fails
            failed += [ids[j] for j in good]
            reason = reason or str(e)
        finally:
            try:
                rp.release()
            except FluxonError as e:  # the bytes were copied while pinned: the load stands
                self.holder.failed(e)
                logger.debug("fluxon vllm: release_views: %s", e)
        return LoadResult(lr.req_id, loaded, failed + ids[got:], reason)

    def take_load_errors(self):
        out, self._load_errors = self._load_errors, set()
        return out

    def take_finished_recving(self):
        out, self._recving_done = self._recving_done, set()
        return out

    # ---- saves ----
    def save(self, saves):
        """Copies the blocks of the SaveRequests into one put plan and commits it; the commit's
        outcome is collected by poll_saves. Returns the number of blocks accepted (new keys).
        Never raises: an unexpected exception skips the save (log_unexpected)."""
        try:
            return self._save(saves)
        except Exception as e:
            n = sum(len(getattr(sr, "blocks", ())) for sr in saves or ())
            self.stats["save_failed"] += n
            self.unexpected("save", e, f"the save of {n} blocks is skipped")
            return 0

    def _save(self, saves):
        if self.paged is None or not saves:
            return 0
        seen, blocks = set(), []
        for sr in saves:
            for b in sr.blocks:
                if b.hash not in seen:
                    seen.add(b.hash)
                    blocks.append(b)
        if not blocks:
            return 0
        spec, parts = self.spec, self.spec.parts
        keys = [k for b in blocks for k in spec.block_keys(b.hash, self.rank)]
        try:
            c = self.holder.get()
            plan = c.put_start(keys, spec.part_bytes, atomic_groups=[parts] * len(blocks) if parts > 1 else None)
        except FluxonError as e:
            self.holder.failed(e)
            self.stats["save_failed"] += len(blocks)
            logger.warning("fluxon vllm: save of %d blocks failed: %s", len(blocks), e)
            return 0
        accepted = []  # (index in blocks, SaveBlock)
        try:
            for j, b in enumerate(blocks):
                st = plan.statuses[j * parts:(j + 1) * parts]
                if all(s == Status.OK for s in st):
                    accepted.append((j, b))
                elif any(s in (Status.ERR_KEY_EXISTS, Status.ERR_KEY_BEING_WRITTEN) for s in st):
                    self.stats["save_existing"] += 1
                else:
                    self.stats["save_failed"] += 1
            lpp = spec.layers_per_part
            for p in range(parts):  # one batch per part: every accepted block
                self.paged.backup([b.block_id for _, b in accepted],
                                  [plan.value_ptrs[j * parts + p] for j, _ in accepted], p * lpp, (p + 1) * lpp)
        except ValueError as e:  # a block id outside the paged KV: nothing of this plan is stored
            plan.abort()
            self.stats["save_failed"] += len(blocks)
            logger.warning("fluxon vllm: save of %d blocks dropped: %s", len(blocks), e)
            return 0
        except BaseException:
            try:
                plan.abort()
            except Exception as e:
                logger.debug("fluxon vllm: abort: %s", e)
            raise
        if not accepted:
            plan.abort()
            return 0
        fut = None
        for _ in range(2):  # a commit that timed out stays live: retrying learns its outcome
            try:
                fut = plan.commit()
                break
            except FluxonError as e:
                if e.status != Status.ERR_TIMEOUT:
                    self.holder.failed(e)
                    self.stats["save_failed"] += len(accepted)
                    logger.warning("fluxon vllm: commit of %d blocks failed: %s", len(accepted), e)
                    return 0
        if fut is None:
            self.stats["save_failed"] += len(accepted)
            logger.warning("fluxon vllm: commit of %d blocks timed out twice; outcome unknown", len(accepted))
            return 0
        self._pending.append((fut, [b for _, b in accepted], time.monotonic() + self.commit_wait_s))
        return len(accepted)

    def poll_saves(self, wait_s=0.0):
        """SaveBlocks whose commit was published (for BlockStored events). wait_s > 0 waits up
        to that long for the pending ones (shutdown)."""
        stored, keep = [], []
        end = time.monotonic() + wait_s
        for fut, blocks, deadline in self._pending:
            st = fut.status()
            if st == Status.IN_PROGRESS and wait_s > 0:
                try:
                    fut.wait(max(0.0, end - time.monotonic()))
                except FluxonError:
                    pass
                st = fut.status()
            if st == Status.IN_PROGRESS:
                if time.monotonic() < deadline:
                    keep.append((fut, blocks, deadline))
                    continue
                logger.warning("fluxon vllm: %d saved blocks not published within %.0f s", len(blocks),
                               self.commit_wait_s)
                self.stats["save_failed"] += len(blocks)
            elif st == Status.OK:
                stored.extend(blocks)
                self.stats["saved_blocks"] += len(blocks)
            else:
                self.stats["save_failed"] += len(blocks)
                logger.warning("fluxon vllm: %d saved blocks not published: %s", len(blocks),
                               getattr(st, "name", st))
            fut.free()
        self._pending = keep
        return stored

    def close(self, wait_s=5.0):
        stored = self.poll_saves(wait_s) if self._pending else []
        for fut, _, _ in self._pending:
            fut.free()
        self._pending = []
        return stored
