"""Python overhead per batch: FluxonStore.batch_set_v1 / batch_get_v1 of PAGES pages (MHA
page_first: 2 objects per page) against the same fluxon_batch_put_from /
fluxon_batch_get_into calls made straight through ctypes with prepared arrays (the C
cost). Usage: PYTHONPATH=python python3 python/bench_overhead.py [pages] [k_bytes] [rounds]"""
import ctypes
import statistics
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/tests")
import fluxon  # noqa: E402
from fluxon._lib import lib  # noqa: E402
from fluxon.sglang import FluxonStore, HiCacheStorageConfig  # noqa: E402
from hostpool import HostPool  # noqa: E402

pages = int(sys.argv[1]) if len(sys.argv) > 1 else 64
kbytes = int(sys.argv[2]) if len(sys.argv) > 2 else 65536
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 30
pool = HostPool(pages=pages * 2, page_size=1, layer_num=1, head_num=1, head_dim=kbytes // 2)
with fluxon.LocalCluster(owners=1, cluster_id="bench", segment_bytes=f"{max(256, 8 * pages * kbytes >> 20)}MiB",
                         grant_bytes="32MiB") as lc:
    st = FluxonStore(HiCacheStorageConfig(model_name="m", extra_config={"socket": lc.socket(0),
                                                                        "cluster_id": "bench"}), {})
    st.register_mem_pool_host(pool)
    c = st._get_client()
    idx = pool.indices(range(pages))
    py_set, py_get, c_set, c_get = [], [], [], []
    cpu = {k: [] for k in ("py_set", "py_get", "c_set", "c_get")}
    for r in range(rounds):
        keys = [f"r{r}-p{i}" for i in range(pages)]
        for order in ((0, 1) if r % 2 else (1, 0)):  # alternate which path runs first
            if order == 0:
                t0, u0 = time.perf_counter(), time.thread_time()
                assert all(st.batch_set_v1(keys, idx))
                t1, u1 = time.perf_counter(), time.thread_time()
                assert all(st.batch_get_v1(keys, pool.indices(range(pages, 2 * pages))))
                t2, u2 = time.perf_counter(), time.thread_time()
                py_set.append(t1 - t0)
                py_get.append(t2 - t1)
                cpu["py_set"].append(u1 - u0)
                cpu["py_get"].append(u2 - u1)
            else:
                # the same two C calls, arrays prepared outside the timing
                okeys = st.object_keys([f"c{r}-p{i}" for i in range(pages)])
                ptrs, sizes = pool.get_page_buffer_meta(idx)
                n = len(okeys)
                karr = (ctypes.c_char_p * n)(*[k.encode() for k in okeys])
                parr, larr = (ctypes.c_void_p * n)(*ptrs), (ctypes.c_uint64 * n)(*sizes)
                groups = (ctypes.c_uint32 * pages)(*([2] * pages))
                opts = fluxon._lib.PutOptions(field_mask=fluxon._lib.OPT_ATOMIC_GROUPS, n_atomic_groups=pages)
                opts.atomic_group_lens = ctypes.cast(groups, ctypes.POINTER(ctypes.c_uint32))
                stat, vl, nr = (ctypes.c_int * n)(), (ctypes.c_uint64 * n)(), ctypes.c_size_t()
                t0, u0 = time.perf_counter(), time.thread_time()
                assert lib.fluxon_batch_put_from(c._c, karr, n, parr, larr, ctypes.byref(opts), stat) == 0
                t1, u1 = time.perf_counter(), time.thread_time()
                assert lib.fluxon_batch_get_into(c._c, karr, n, parr, larr, 1, groups, pages, stat, vl,
                                                 ctypes.byref(nr)) == 0
                t2, u2 = time.perf_counter(), time.thread_time()
                cpu["c_set"].append(u1 - u0)
                cpu["c_get"].append(u2 - u1)
                assert nr.value == n
                c_set.append(t1 - t0)
                c_get.append(t2 - t1)
        for k in okeys + st.object_keys(keys):
            c.delete(k)
    st.close()
med = lambda v: statistics.median(v) * 1e6  # noqa: E731
gb = pages * 2 * kbytes / 1e9
print(f"batch of {pages} pages (MHA, K and V of {kbytes} B each: {pages * 2} objects), {rounds} rounds, medians:")
print(f"  batch_set_v1  python {med(py_set):8.1f} us   C call {med(c_set):8.1f} us   overhead {med(py_set) - med(c_set):7.1f} us"
      f"   ({gb / statistics.median(py_set):.2f} vs {gb / statistics.median(c_set):.2f} GB/s)")
print(f"  batch_get_v1  python {med(py_get):8.1f} us   C call {med(c_get):8.1f} us   overhead {med(py_get) - med(c_get):7.1f} us"
      f"   ({gb / statistics.median(py_get):.2f} vs {gb / statistics.median(c_get):.2f} GB/s)")
print(f"  calling-thread CPU (less sensitive to a loaded machine): set python {med(cpu['py_set']):.1f} us, C "
      f"{med(cpu['c_set']):.1f} us (overhead {med(cpu['py_set']) - med(cpu['c_set']):.1f} us); get python "
      f"{med(cpu['py_get']):.1f} us, C {med(cpu['c_get']):.1f} us (overhead {med(cpu['py_get']) - med(cpu['c_get']):.1f} us)")
