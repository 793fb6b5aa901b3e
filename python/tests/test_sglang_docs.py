"""docs/sglang.md is what a user copies: its extra-config JSON, parsed the way SGLang
a10a24e9 parses --hicache-storage-backend-extra-config @file (hiradix_cache.py:612-705),
starts FluxonStore through the dynamic loader with interface_v1 routing (cache_controller.py
:480-488) and backs up and restores a page; its tables name every extra_config member
FluxonStore knows and every flag of its launch command."""
import json
import os
import re

from fluxon.sglang import FLUXON_MEMBERS, SGLANG_MEMBERS, HiCacheStorageConfig
from hostpool import HostPool
from test_sglang_conformance import create_dynamic_backend

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "sglang.md")


def doc():
    with open(DOC) as f:
        return f.read()


def extra_config_block(text):
    m = re.search(r"<!-- sglang-extra-config:[^>]*-->\s*```json\n(.*?)```", text, re.S)
    assert m, "docs/sglang.md has the marked extra-config block"
    return m.group(1)


def test_the_documented_extra_config_starts_fluxon_store(cluster, tmp_path):
    path = tmp_path / "sglang.json"
    path.write_text(extra_config_block(doc()))
    # hiradix_cache.py:628-634: "@<file>.json" -> json.load; :655-666 pops SGLang's own members
    with open(str(path)) as f:
        extra = json.load(f)
    threshold = extra.pop("prefetch_threshold", 256)
    for k in ("prefetch_timeout_base", "prefetch_timeout_per_ki_token", "prefetch_timeout_max",
              "hicache_storage_pass_prefix_keys"):
        extra.pop(k, None)
    assert isinstance(threshold, int)
    assert bool(extra.get("interface_v1", 0)), "the zero-copy v1 path (cache_controller.py:485)"
    assert extra["module_path"] == "fluxon.sglang" and extra["class_name"] == "FluxonStore"
    # only where this cluster is: the test owner's socket, id and token
    extra.update(socket=cluster.socket(0), cluster_id=cluster.cluster_id, cluster_token=cluster.cluster_token)
    cfg = HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                               is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
                               model_name="llama-3.1-8b", tp_lcm_size=None, should_split_heads=False,
                               extra_config=extra)
    st = create_dynamic_backend(cfg, {})
    pool = HostPool()
    st.register_mem_pool_host(pool)
    pool.fill_page(0, 1)
    assert st.batch_set_v1(["p0"], pool.indices([0])) == [True]
    assert st.batch_get_v1(["p0"], pool.indices([1])) == [True]
    assert pool.page_bytes(1) == pool.page_bytes(0)
    st.close()


def test_the_tables_are_complete():
    text = doc()
    members = set(re.findall(r"^\| `([a-z0-9_]+)` \| (?:SGLang|FluxonStore)", text, re.M))
    assert members == set(SGLANG_MEMBERS + FLUXON_MEMBERS)
    assert set(json.loads(extra_config_block(text))) <= members
    launch = text[text.index("python3 -m sglang.launch_server"):]
    launch = launch[:launch.index("```")]
    used = set(re.findall(r"(--[a-z0-9-]+)", launch))
    table = {f for cell in re.findall(r"^\| (`--[^|]*)\|", text, re.M) for f in re.findall(r"--[a-z0-9-]+", cell)}
    assert used <= table, f"launch flags without a row: {used - table}"
