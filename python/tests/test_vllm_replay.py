"""The Mooncake conversation trace replayed through fluxon.vllm.core the way the connector
drives it, one trace block per vLLM block (each hash id stands for a vLLM block hash):
per request, the scheduler's lookup, the load plan after allocation, the worker's load
(every restored block checked byte for byte against the KV its hash id stands for), the
"model" computing the rest, and the save of the new full blocks. Its prefix hits equal
the C demo's (`fluxon demo`, one worker) on the same requests, with 0 checksum failures.
FLUXON_VLLM_REPLAY_REQUESTS sets how many requests (default 1000)."""
import hashlib
import json
import os
import subprocess
import tempfile
import time

import numpy as np

import fluxon
from fluxon.vllm.core import ClientHolder, KVSpec, SchedulerCore, WorkerCore
from fluxon.vllm.paged import PagedKV

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRACE = os.path.join(ROOT, "data", "conversation_trace.jsonl")
REQUESTS = int(os.environ.get("FLUXON_VLLM_REPLAY_REQUESTS", "1000"))
BS, HEADS, DIM = 16, 1, 16  # 1 KiB per block per layer (K and V, float16)


def c_demo(requests):
    fluxon_bin = os.environ.get("FLUXON_BIN", os.path.join(ROOT, "fluxon"))
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([fluxon_bin, "demo", "--trace", TRACE, "--requests", str(requests), "--workers", "1",
                            "--out", out], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
    return s["prefix_hits"], s["lookups"], s["checksum_failures"]


class TraceReq:
    def __init__(self, i, hash_ids):
        self.request_id = f"t{i}"
        self.block_hashes = [hashlib.sha256(b"trace%d" % h).digest() for h in hash_ids]
        self.all_token_ids = [h % 32000 for h in hash_ids for _ in range(BS)]
        self.num_prompt_tokens = len(self.all_token_ids)

    @property
    def num_tokens(self):
        return len(self.all_token_ids)


def content(block_hash):
    """The K and V a model writes for a block: 1 KiB derived from its hash."""
    return np.frombuffer(block_hash * (2 * BS * HEADS * DIM * 2 // 32), np.float16).reshape(2, BS, HEADS, DIM)


def test_trace_replay_through_the_core_gives_the_c_demo_hits():
    reqs = []
    with open(TRACE) as f:
        for line in f:
            reqs.append(json.loads(line)["hash_ids"])
            if len(reqs) == REQUESTS:
                break
    nb = max(len(h) for h in reqs) + 1
    kv = np.zeros((nb, 2, BS, HEADS, DIM), np.float16)
    spec = KVSpec(model="trace", block_size=BS, dtype="float16", num_layers=1, kv_heads=HEADS, head_size=DIM,
                  itemsize=2)
    hits = lookups = loaded = checksum_failures = 0
    t0 = time.monotonic()
    with fluxon.LocalCluster(owners=1, cluster_id="vreplay", segment_bytes="256MiB") as lc:
        holder = ClientHolder(lc.socket(0), cluster_id="vreplay")
        sched = SchedulerCore(spec, holder)
        worker = WorkerCore(spec, 0, holder, PagedKV([kv], nb, BS, HEADS, DIM, 2))
        for i, h in enumerate(reqs):
            r = TraceReq(i, h)
            before = sched.stats["hit_blocks"]
            n, _ = sched.get_num_new_matched_tokens(r, 0)
            hits += sched.stats["hit_blocks"] - before
            lookups += len(h)
            ids = list(range(len(h)))  # the request's blocks (the paged KV is reused per request)
            kv[...] = 0
            sched.update_state_after_alloc(r, ids, n)
            plan = sched.build_step([(r.request_id, ids, n)], [], {r.request_id: r.num_tokens - n})
            for res in worker.load(plan.loads):
                assert res.failed == [], res.reason
                loaded += len(res.loaded)
                for b in res.loaded:
                    checksum_failures += kv[b].tobytes() != content(r.block_hashes[b]).tobytes()
            for b in range(n // BS, len(h)):  # the model computes the rest
                kv[b] = content(r.block_hashes[b])
            worker.save(plan.saves)
            worker.poll_saves(wait_s=5.0)  # published before the next request looks up
            sched.request_finished(r)
        assert worker.stats["save_failed"] == 0 and worker.take_load_errors() == set()
        worker.close()
        holder.close()
    elapsed = time.monotonic() - t0
    c_hits, c_lookups, c_fail = c_demo(REQUESTS)
    print(f"\nvllm core replay: {REQUESTS} requests, {hits}/{lookups} prefix hits ({hits / lookups:.4f}), "
          f"{loaded} blocks loaded, {checksum_failures} checksum failures, {elapsed:.2f} s; "
          f"C demo {c_hits}/{c_lookups}, {c_fail} checksum failures")
    assert lookups == c_lookups
    assert hits == c_hits and hits > 0
    assert checksum_failures == 0 and c_fail == 0
    # every hit is loaded except the last block of a request the store covers entirely
    assert hits - REQUESTS <= loaded <= hits
