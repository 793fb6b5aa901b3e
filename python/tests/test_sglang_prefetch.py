"""FluxonStore's prefetch bounds (fluxon/sglang_prefetch.py, docs/sglang.md
prefetch_max_pages / prefetch_wait_ms): a burst of prefetches beyond the cap is refused
cleanly (pages reported not restored, nothing pinned for them, within the wait bound)
while another client's puts succeed; a call larger than the free budget restores the
granted prefix; refused pages restore on a later call; bad values are refused by name."""
import threading
import time

import pytest

from fluxon import Status
from fluxon.sglang_prefetch import PrefetchBudget
from conftest import quiet
from hostpool import HostPool
from test_sglang import attach, make_store


def test_a_burst_of_prefetches_beyond_the_cap_is_refused_while_puts_succeed(cluster):
    pool = HostPool()
    writer = attach(cluster, pool)
    keys = [f"burst{i:02d}" for i in range(12)]
    for i in range(12):
        pool.fill_page(i, seed=i + 1)
    want = [pool.page_bytes(i) for i in range(12)]
    assert writer.batch_set_v1(keys, pool.indices(list(range(12)))) == [True] * 12
    reader = attach(cluster, pool, owner=1, prefetch_max_pages=4, prefetch_wait_ms=50)
    entered, release, granted = threading.Event(), threading.Event(), []

    def hold(n):  # the first prefetch holds its grant until the test lets it go
        granted.append(n)
        if len(granted) == 1:
            entered.set()
            assert release.wait(10), "the test never released the held prefetch"

    reader.on_prefetch_granted = hold
    results = {}

    def prefetch(name, ks, pages):
        results[name] = reader.batch_get_v1(ks, pool.indices(pages))

    first = threading.Thread(target=prefetch, args=("first", keys[0:4], [20, 21, 22, 23]))
    first.start()
    try:
        assert entered.wait(10), "the first prefetch was never granted"
        assert reader.prefetch_budget.in_use == 4
        t0 = time.monotonic()
        burst = [threading.Thread(target=prefetch, args=(f"b{j}", keys[4 + 4 * j:8 + 4 * j],
                                                        [30 + 4 * j + i for i in range(4)])) for j in range(2)]
        for t in burst:
            t.start()
        for t in burst:
            t.join(10)
            assert not t.is_alive()
        elapsed = time.monotonic() - t0
        assert results["b0"] == [False] * 4 and results["b1"] == [False] * 4
        assert elapsed < 5.0, f"refusal took {elapsed:.2f} s with prefetch_wait_ms 50"
        assert granted == [4], "nothing was granted (or pinned) past the cap"
        b = reader.prefetch_budget
        assert (b.in_use, b.peak, b.refused, b.refused_calls) == (4, 4, 8, 2)
        # the refused pages were never pinned nor fetched into the reader's owner
        other = cluster.client(1)
        o = other.stats()["owner"]
        assert (o["holders"], o["handles_open"]) == (0, 0), o
        # another client's puts go through while the cap is held
        st = other.batch_put_from([f"other{i}" for i in range(8)], [bytes([i]) * 65536 for i in range(8)])
        assert st == [Status.OK] * 8
        other.close()
    finally:
        release.set()
        first.join(10)
    assert not first.is_alive()
    assert results["first"] == [True] * 4
    assert [pool.page_bytes(p) for p in (20, 21, 22, 23)] == want[0:4]
    assert reader.prefetch_budget.in_use == 0
    # refused pages were deferred, not lost: a later call restores them; a call larger than
    # the cap restores the granted prefix and reports the rest not restored
    assert reader.batch_get_v1(keys[4:10], pool.indices([40, 41, 42, 43, 44, 45])) == [True] * 4 + [False] * 2
    assert [pool.page_bytes(p) for p in (40, 41, 42, 43)] == want[4:8]
    assert reader.batch_get_v1(keys[8:12], pool.indices([46, 47, 48, 49])) == [True] * 4
    assert [pool.page_bytes(p) for p in (46, 47, 48, 49)] == want[8:12]
    assert reader.prefetch_budget.in_use == 0 and reader.prefetch_budget.peak == 4
    quiet(reader._get_client())
    reader.close()
    writer.close()


def test_the_generic_path_is_bounded_too(cluster):
    pool = HostPool()
    st = attach(cluster, pool, prefetch_max_pages=2, prefetch_wait_ms=0)
    keys = ["g0", "g1", "g2"]
    for i in range(3):
        pool.fill_page(i, seed=7 + i)
    assert st.batch_set_v1(keys, pool.indices([0, 1, 2])) == [True] * 3
    got = st.batch_get(keys)
    assert got[2] is None and got[0] is not None and got[1] is not None
    assert st.prefetch_budget.refused == 1 and st.prefetch_budget.in_use == 0
    st.close()


@pytest.mark.parametrize("member,value", [("prefetch_max_pages", 0), ("prefetch_max_pages", "8"),
                                          ("prefetch_wait_ms", -1), ("prefetch_wait_ms", True)])
def test_bad_bounds_are_refused_by_name(cluster, member, value):
    with pytest.raises(ValueError, match=member):
        make_store(cluster, **{member: value})


def test_the_budget_waits_bounded_and_wakes_on_give():
    b = PrefetchBudget(max_pages=3, wait_ms=2000)
    assert b.take(5) == 3 and b.refused == 2
    t = threading.Timer(0.05, b.give, args=(2,))
    t.start()
    t0 = time.monotonic()
    assert b.take(4) == 2  # woken by the give, not by the 2 s bound
    assert time.monotonic() - t0 < 1.5
    t.join()
    b.give(3)
    assert b.in_use == 0 and b.peak == 3
    nowait = PrefetchBudget(max_pages=1, wait_ms=0)
    assert nowait.take(1) == 1 and nowait.take(1) == 0
