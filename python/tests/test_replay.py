"""A slice of the Mooncake conversation trace replayed through FluxonStore the way SGLang
drives it — two TP ranks, each on its own owner, with a CPU owner (node_role remote_cache)
taking a copy of every backed-up page (replica_task "eager_all"); per request: batch_exists on
each rank, the minimum over the ranks (SGLang's all_reduce MIN), batch_get_v1 of that
prefix on both ranks, then batch_set_v1 of the rest on both — gives the same prefix hits
as the C demo (`fluxon demo`, one worker) on the same slice."""
import json
import os
import subprocess
import tempfile
import time

import fluxon
from fluxon.sglang import FluxonStore, HiCacheStorageConfig
from hostpool import HostPool

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRACE = os.path.join(ROOT, "data", "conversation_trace.jsonl")
REQUESTS = 300


def c_demo_ratio():
    fluxon_bin = os.environ.get("FLUXON_BIN", os.path.join(ROOT, "fluxon"))
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([fluxon_bin, "demo", "--trace", TRACE, "--requests", str(REQUESTS), "--workers", "1",
                            "--out", out], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
    return s["prefix_hits"], s["lookups"]


def test_python_backend_replay_matches_the_c_demo():
    reqs = []
    with open(TRACE) as f:
        for line in f:
            reqs.append(json.loads(line)["hash_ids"])
            if len(reqs) == REQUESTS:
                break
    max_pages = max(len(h) for h in reqs)
    pools = [HostPool(pages=max_pages, page_size=1, layer_num=1, head_num=1, head_dim=1024) for _ in range(2)]
    hits = lookups = 0
    with fluxon.LocalCluster(owners=3, cluster_id="replay", segment_bytes="256MiB",
                             owner_configs=[{}, {}, {"node_role": "remote_cache"}]) as lc:
        ranks = []
        for r in range(2):
            st = FluxonStore(HiCacheStorageConfig(tp_rank=r, tp_size=2, model_name="trace", extra_config={
                "socket": lc.socket(r), "cluster_id": "replay", "interface_v1": True, "replica_task": "eager_all"}),
                {})
            st.register_mem_pool_host(pools[r])
            ranks.append(st)
        for h in reqs:
            keys = [str(b) for b in h]
            n = min(st.batch_exists(keys) for st in ranks)
            for st, pool in zip(ranks, pools):
                assert all(st.batch_get_v1(keys[:n], pool.indices(range(n))))
            hits += n
            lookups += len(keys)
            if n < len(keys):
                for st, pool in zip(ranks, pools):
                    assert all(st.batch_set_v1(keys[n:], pool.indices(range(n, len(keys)))))
        c = lc.client(0)
        end = time.monotonic() + 60
        while c.master_stats().get("target_replicas_remote_cache", 0) < 4 * len({b for h in reqs for b in h}):
            assert time.monotonic() < end, "every page of both ranks copied to the CPU owner within 60 s"
            time.sleep(0.05)
        c.close()
        for st in ranks:
            st.close()
    c_hits, c_lookups = c_demo_ratio()
    assert lookups == c_lookups
    assert hits == c_hits, f"python {hits}/{lookups} = {hits / lookups:.4f}, C demo {c_hits}/{c_lookups}"
    assert hits > 0
