"""Prefetch bounds of FluxonStore: a cap on the pages its in-flight prefetches hold, so a
burst of prefetches (SGLang's prefetch thread, batch_get / batch_get_v1) cannot pin the
owner's memory that other writers need.

Every restore is a plan of four steps (FluxonStore._get_objects):
  1. look up: how many leading pages exist (batch_exists: nothing pinned, nothing fetched);
  2. decide: take at most that many pages from the budget (PrefetchBudget.take);
  3. pin: get_start / batch_get_into on the granted pages only (remote values are fetched
     into this owner and pinned here);
  4. move: the copy into the host pool, then the pins and the budget are given back.
Pages the budget cannot grant are refused: the call reports them not restored (False /
fewer hits), SGLang loads that much less and recomputes the rest; nothing is pinned for them.

extra_config members (docs/sglang.md):
  prefetch_max_pages  pages (of this rank: K and V of a page together) held by this store's
                      in-flight prefetches at once; 1..2**31 (default 1024)
  prefetch_wait_ms    how long a prefetch waits for budget when none is free before it is
                      refused; 0..60000 (default 100)
"""
import threading
import time

DEFAULT_MAX_PAGES = 1024
DEFAULT_WAIT_MS = 100


def _int_member(extra, name, default, lo, hi):
    v = extra.get(name, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"FluxonStore: extra_config[{name!r}] is {v!r}: an int in {lo}..{hi}")
    return v


class PrefetchBudget:
    """Pages held by in-flight prefetches, at most max_pages. Thread-safe; every wait bounded
    by wait_ms. Counters: in_use, peak (the most held at once), granted / refused (pages),
    refused_calls (calls that got fewer pages than they found)."""

    def __init__(self, max_pages=DEFAULT_MAX_PAGES, wait_ms=DEFAULT_WAIT_MS):
        self.max_pages, self.wait_ms = max_pages, wait_ms
        self.in_use = self.peak = self.granted = self.refused = self.refused_calls = 0
        self._cv = threading.Condition()

    @classmethod
    def from_extra(cls, extra):
        return cls(_int_member(extra, "prefetch_max_pages", DEFAULT_MAX_PAGES, 1, 1 << 31),
                   _int_member(extra, "prefetch_wait_ms", DEFAULT_WAIT_MS, 0, 60000))

    def take(self, want):
        """Grants min(want, free) pages; with none free waits up to wait_ms for some. Returns
        the pages granted (0: refused); give them back with give()."""
        if want <= 0:
            return 0
        end = time.monotonic() + self.wait_ms / 1000.0
        with self._cv:
            while self.in_use >= self.max_pages:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
            got = max(0, min(want, self.max_pages - self.in_use))
            self.in_use += got
            self.peak = max(self.peak, self.in_use)
            self.granted += got
            if got < want:
                self.refused += want - got
                self.refused_calls += 1
            return got

    def give(self, n):
        if n <= 0:
            return
        with self._cv:
            if n > self.in_use:
                raise AssertionError(f"PrefetchBudget: giving back {n} pages, {self.in_use} are held")
            self.in_use -= n
            self._cv.notify_all()
