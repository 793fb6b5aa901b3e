"""A host index or address outside the host pool's buffers is refused (False), never a
crash: FluxonStore hands get_page_buffer_meta's addresses to C (fluxon_batch_put_from,
fluxon_batch_get_into) and to memmove, so before the check an index past the pool was
a SIGSEGV that ended SGLang's process (a new user's report: batch_set_v1(["h9"],
indices([10**6]))). The calls that would have crashed run in a child process, so a crash
is this test's failure, not the end of the test run."""
import json
import logging
import os
import subprocess
import sys

import numpy as np

import fluxon.sglang as fsg
from fluxon.sglang import FluxonStore, HiCacheStorageConfig
from hostpool import HostPool

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r'''
import json, logging, sys
import numpy as np
import fluxon
from fluxon.sglang import FluxonStore, HiCacheStorageConfig
from hostpool import HostPool

warnings = []
class Grab(logging.Handler):
    def emit(self, r):
        if r.levelno >= logging.WARNING and "outside the host pool" in r.getMessage():
            warnings.append(r.getMessage())
logging.getLogger("fluxon.sglang").addHandler(Grab())
logging.getLogger("fluxon.sglang").setLevel(logging.DEBUG)

CASES = [(False, "page_first"), (False, "page_first_direct"), (False, "layer_first"), (False, "page_head"),
         (True, "page_first"), (True, "page_first_direct"), (True, "layer_first")]
out = []
with fluxon.LocalCluster(owners=1, cluster_id="oob", cluster_token="tok", segment_bytes="64MiB") as lc:
    for mla, layout in CASES:
        pool = HostPool(mla=mla, layout=layout)
        st = FluxonStore(HiCacheStorageConfig(tp_rank=0, tp_size=1, is_mla_model=mla, model_name=layout,
                         extra_config={"socket": lc.socket(0), "cluster_id": "oob", "cluster_token": "tok",
                                       "interface_v1": True}), {})
        st.register_mem_pool_host(pool)
        del warnings[:]
        r = {"case": f"{'mla' if mla else 'mha'} {layout}"}
        last = pool.page_num - 1
        for p in (1, 2, last):
            pool.fill_page(p, seed=p + 7)
        want = [pool.page_bytes(p) for p in (1, 2, last)]
        r["set_far"] = st.batch_set_v1(["h9"], pool.indices([10 ** 6]))  # the report
        r["get_far"] = st.batch_get_v1(["h9"], pool.indices([10 ** 6]))
        r["set_neg"] = st.batch_set_v1(["h8"], pool.indices([-1000]))
        r["set_past_end"] = st.batch_set_v1(["h7"], pool.indices([pool.page_num]))  # one page past the end
        r["set_mixed"] = st.batch_set_v1(["a", "b", "c", "d"], pool.indices([1, 10 ** 6, 2, last]))
        r["exists_refused"] = st.batch_exists(["h9"]) + st.batch_exists(["h8"]) + st.batch_exists(["h7"]) + \
            st.batch_exists(["b"])
        pool.zero()
        r["get_mixed"] = st.batch_get_v1(["a", "c", "d"], pool.indices([5, 6, 10 ** 6]))
        r["restored"] = [pool.page_bytes(5) == want[0], pool.page_bytes(6) == want[1]]
        r["get_last"] = st.batch_get_v1(["d"], pool.indices([last]))  # the last page is inside
        r["last_restored"] = pool.page_bytes(last) == want[2]
        base = pool.kv_buffer.ctypes.data
        nb = st.page_bytes
        r["generic_set_far"] = st.batch_set(["r0"], target_locations=[base + (1 << 40)], target_sizes=[nb])
        r["generic_set_straddle"] = st.batch_set(["r1"], target_locations=[base + pool.kv_buffer.nbytes - nb // 2],
                                                 target_sizes=[nb])
        r["generic_get_far"] = st.batch_get(["a"], [base - (1 << 30)], [nb])
        if mla and layout == "page_first_direct":  # a page here is K.. contiguous: raw addresses inside work
            r["generic_inside"] = [st.batch_set(["r2"], target_locations=[pool.kv_buffer[1].ctypes.data],
                                                target_sizes=[nb]),
                                   st.batch_get(["r2", "r0"], [pool.kv_buffer[9].ctypes.data, base + (1 << 40)],
                                                [nb, nb])]
        r["refusals"] = st.out_of_pool_refusals
        r["warnings"] = list(warnings)
        r["bounds"] = f"[{base:#x}, {base + pool.kv_buffer.nbytes:#x})"
        r["far_index"] = 10 ** 6 * pool.page_size
        out.append(r)
        st.close()
print("RESULT " + json.dumps(out))
'''


def test_out_of_range_host_indices_are_refused_not_a_crash():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), HERE] + ([env["PYTHONPATH"]]
                                                                          if env.get("PYTHONPATH") else []))
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"the child died (rc {p.returncode}; -11 is SIGSEGV):\n{p.stderr[-3000:]}"
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, p.stdout[-2000:] + p.stderr[-2000:]
    results = json.loads(line[0][len("RESULT "):])
    assert len(results) == 7
    for r in results:
        case = r["case"]
        assert r["set_far"] == [False] and r["get_far"] == [False], case
        assert r["set_neg"] == [False] and r["set_past_end"] == [False], case
        assert r["set_mixed"] == [True, False, True, True], case  # per key: the pages inside are stored
        assert r["exists_refused"] == 0, case  # nothing was stored for a refused page
        assert r["get_mixed"] == [True, True, False], case  # the pages before the refused one are restored
        assert r["restored"] == [True, True], case
        assert r["get_last"] == [True] and r["last_restored"], case
        assert r["generic_set_far"] is False and r["generic_set_straddle"] is False, case
        assert r["generic_get_far"] == 0, case
        # pages refused: far (set, get), negative, past the end, mixed set's b, mixed get's 3rd, the
        # generic path's far and straddling sets and far get (and r0 of the raw-address get below)
        assert r["refusals"] == 9 + ("generic_inside" in r), case
        # logged once per store, at warning, naming the index, its buffer and the pool's bounds
        assert len(r["warnings"]) == 1, (case, r["warnings"])
        w = r["warnings"][0]
        assert "batch_set_v1" in w and f"host index {r['far_index']}" in w and r["bounds"] in w, (case, w)
    inside = [r for r in results if "generic_inside" in r]
    assert inside and inside[0]["generic_inside"] == [True, 1]


class _TwoBuffers:
    """A pool whose buffers are two arrays (a list, as some host pools keep per-layer ones)."""

    def __init__(self):
        self.kv_buffer = [np.zeros(4096, np.uint8), np.zeros(8192, np.uint8)]


def _bare_store(pool):
    st = FluxonStore.__new__(FluxonStore)  # no owner needed: only the range check is exercised
    st.mem_pool_host, st._host, st._warned, st.out_of_pool_refusals = pool, (fsg._UNSEEN, (), None, None), set(), 0
    return st


def test_the_range_check_covers_several_buffers_strides_and_no_numpy(monkeypatch):
    pool = _TwoBuffers()
    st = _bare_store(pool)
    a, b = (x.ctypes.data for x in pool.kv_buffer)
    ptrs = [a, a + 4000, a + 4090, b, b + 8191, b + 8192, a - 1, 0, 1 << 64, b + 100]
    sizes = [4096, 96, 16, 8192, 1, 1, 1, 1, 1, -1]
    want = [2, 5, 6, 7, 8, 9]  # past a's end, past b's end, before a, null, past int64, negative size
    if a + 4096 == b:  # adjacent allocations merge into one range: a piece across them is inside
        want.remove(2)
    assert st._outside(ptrs, sizes) == want
    monkeypatch.setattr(fsg, "np", None)  # the plain-Python check gives the same answer
    st2 = _bare_store(pool)
    assert st2._outside(ptrs, sizes) == want
    # a strided view spans from its lowest to its highest byte; device memory has no host range
    base = np.zeros((4, 8), np.uint16)
    assert fsg._host_span(base[:, ::2]) == (base.ctypes.data, base.ctypes.data + base.nbytes - 2)
    assert fsg._host_span(base[::-1]) == (base.ctypes.data, base.ctypes.data + base.nbytes)

    class Cuda:
        device = type("D", (), {"type": "cuda"})()

        def data_ptr(self):
            return 1 << 20
    assert fsg._host_span(Cuda()) is None


def test_a_pool_whose_buffer_is_replaced_is_learnt_again(cluster, caplog):
    pool = HostPool()
    st = FluxonStore(HiCacheStorageConfig(tp_rank=0, tp_size=1, model_name="m", extra_config={
        "socket": cluster.socket(0), "cluster_id": cluster.cluster_id, "cluster_token": cluster.cluster_token,
        "interface_v1": True}), {})
    st.register_mem_pool_host(pool)
    pool.fill_page(3, 11)
    want = pool.page_bytes(3)
    pool.kv_buffer = pool.kv_buffer.copy()  # reallocated after registration (another address)
    assert st.batch_set_v1(["moved"], pool.indices([3])) == [True]
    pool.zero()
    assert st.batch_get_v1(["moved"], pool.indices([4])) == [True]
    assert pool.page_bytes(4) == want
    assert st.out_of_pool_refusals == 0
    # a pool with no host buffer FluxonStore can read: named at registration, the v1 calls answer False
    class Opaque:  # get_page_buffer_meta still works (kv_buffer.ctypes), but no address range is known
        def __init__(self, a):
            self.ctypes, self.a = a.ctypes, a
    pool.kv_buffer = Opaque(pool.kv_buffer)
    with caplog.at_level(logging.WARNING, logger="fluxon.sglang"):
        st.register_mem_pool_host(pool)
    assert "no host address range" in caplog.text
    assert st.batch_set_v1(["x"], range(pool.page_size)) == [False]
    st.close()


def test_the_indexer_and_hybrid_buffers_count_as_the_pool():
    """Pools whose pages lie in the NSA indexer's buffer or the hybrid pool buffer (SGLang's
    DSA/SFA host pools) are not refused wholesale."""
    import numpy as np
    import fluxon.sglang as fsg

    class Pool:
        kv_buffer = None
        index_k_with_scale_buffer = np.zeros(4096, np.uint8)
        _hybrid = np.zeros(8192, np.uint8)

        def get_hybrid_pool_buffer(self):
            return self._hybrid

    p = Pool()
    spans = fsg._pool_ranges(p)
    for buf in (p.index_k_with_scale_buffer, p._hybrid):
        lo = buf.__array_interface__["data"][0]
        assert any(a <= lo and lo + buf.nbytes <= b for a, b in spans), (spans, lo)
