"""fluxon.vllm.core with a Llama-3-8B-like shard (32 layers, 8 KV heads, head size 128,
bfloat16 stored as 2-byte elements, block 16 tokens: 2 MiB per block per rank) in numpy
paged KV [num_blocks, 2, 16, 8, 128]: the save of BLOCKS blocks (put_start -> copy ->
commit; then the wait until the master published them, apart), the lookup, and the load (get_start -> transfer -> copy
-> release), best of ROUNDS. Host memory only (no GPU).
Usage: PYTHONPATH=python python3 python/bench_vllm.py [blocks] [rounds]"""
import hashlib
import os
import sys
import time

import numpy as np

import fluxon
from fluxon.vllm.core import ClientHolder, KVSpec, SchedulerCore, WorkerCore
from fluxon.vllm.paged import PagedKV

blocks = int(sys.argv[1]) if len(sys.argv) > 1 else 32
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
L, BS, H, D = 32, 16, 8, 128
spec = KVSpec(model="bench/llama-3-8b", block_size=BS, dtype="bfloat16", num_layers=L, kv_heads=H, head_size=D,
              itemsize=2)
rng = np.random.default_rng(1)
src = [rng.integers(0, 1 << 16, (blocks, 2, BS, H, D), dtype=np.uint16) for _ in range(L)]
dst = [np.zeros_like(a) for a in src]


class R:
    def __init__(self, rid, salt):
        self.request_id = rid
        self.block_hashes = [hashlib.sha256(b"%d-%d" % (salt, i)).digest() for i in range(blocks)]
        self.all_token_ids = list(range(blocks * BS + 1))
        self.num_prompt_tokens = len(self.all_token_ids)
        self.num_tokens = len(self.all_token_ids)


seg = f"{max(512, 3 * blocks * spec.part_bytes * rounds >> 20)}MiB"
save_s, pub_s, look_s, load_s = [], [], [], []
with fluxon.LocalCluster(owners=1, cluster_id="vbench", segment_bytes=seg, grant_bytes="64MiB") as lc:
    holder = ClientHolder(lc.socket(0), cluster_id="vbench")
    sched = SchedulerCore(spec, holder)
    w = WorkerCore(spec, 0, holder, PagedKV(src, blocks, BS, H, D, 2))
    loader = WorkerCore(spec, 0, holder, PagedKV(dst, blocks, BS, H, D, 2))
    ids = list(range(blocks))
    for r in range(rounds):
        req = R(f"s{r}", r)
        sched.get_num_new_matched_tokens(req, 0)
        sched.update_state_after_alloc(req, ids, 0)
        plan = sched.build_step([(req.request_id, ids, 0)], [], {req.request_id: req.num_tokens})
        t = time.perf_counter()
        w.save(plan.saves)
        t1 = time.perf_counter()
        assert len(w.poll_saves(wait_s=10)) == blocks
        save_s.append(t1 - t)
        pub_s.append(time.perf_counter() - t1)
        again = R(f"l{r}", r)
        t = time.perf_counter()
        n, _ = sched.get_num_new_matched_tokens(again, 0)
        look_s.append(time.perf_counter() - t)
        assert n == blocks * BS
        sched.update_state_after_alloc(again, ids, n)
        plan = sched.build_step([], [], {})
        t = time.perf_counter()
        (res,) = loader.load(plan.loads)
        load_s.append(time.perf_counter() - t)
        assert res.failed == [] and all((a == b).all() for a, b in zip(src, dst))
        for a in dst:
            a[...] = 0
    w.close()
    loader.close()
    holder.close()
mib = blocks * spec.part_bytes / (1 << 20)
print(f"{blocks} blocks x {spec.part_bytes >> 10} KiB ({mib:.0f} MiB), best of {rounds}: "
      f"save {mib / 1024 / min(save_s):.2f} GiB/s ({min(save_s) * 1e3:.1f} ms; then published in "
      f"{min(pub_s) * 1e3:.1f} ms), "
      f"lookup {min(look_s) * 1e6:.0f} us, load {mib / 1024 / min(load_s):.2f} GiB/s ({min(load_s) * 1e3:.1f} ms); "
      f"load average {os.getloadavg()[0]:.2f}")
