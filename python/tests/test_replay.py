"""A slice of the Mooncake conversation trace replayed through FluxonStore the way SGLang
drives it (per request: batch_get_v1 of its pages, then batch_set_v1 of the pages not
restored) gives the same prefix hit ratio as the C demo (`fluxon demo`, one worker) on
the same slice."""
import json
import os
import subprocess
import tempfile

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
    pool = HostPool(pages=max_pages, page_size=1, layer_num=1, head_num=1, head_dim=1024)
    hits = lookups = 0
    with fluxon.LocalCluster(owners=1, cluster_id="replay", segment_bytes="256MiB") as lc:
        st = FluxonStore(HiCacheStorageConfig(tp_rank=0, tp_size=1, model_name="trace", extra_config={
            "socket": lc.socket(0), "cluster_id": "replay"}), {})
        st.register_mem_pool_host(pool)
        for h in reqs:
            keys = [str(b) for b in h]
            idx = pool.indices(range(len(keys)))
            got = st.batch_get_v1(keys, idx)
            n = got.index(False) if False in got else len(got)
            hits += n
            lookups += len(keys)
            if n < len(keys):
                assert all(st.batch_set_v1(keys[n:], pool.indices(range(n, len(keys)))))
        st.close()
    c_hits, c_lookups = c_demo_ratio()
    assert lookups == c_lookups
    assert hits == c_hits, f"python {hits}/{lookups} = {hits / lookups:.4f}, C demo {c_hits}/{c_lookups}"
    assert hits > 0
