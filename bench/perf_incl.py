#!/usr/bin/env python3
"""perf_incl.py — what a setup adds, thread by thread and function by function.

Reads two `perf script` outputs of `perf record --call-graph dwarf` (a run without and a
run with the change), counts each function once per sample whose stack holds it
(inclusive time), and prints, per thread name, the µs of CPU a request each function took
in both runs and the difference, largest first. Inlined functions count as perf names
them. Figures, not pass/fail (bench/tiers_profile.sh runs it).

usage: perf_incl.py FREQ_HZ REQUESTS BEFORE.txt AFTER.txt [TOP [THREAD...]]
"""
import collections
import re
import sys

OFFSET = re.compile(r"\+0x[0-9a-f]+$")


def stacks(path):
    """Yields (thread name, [functions, innermost first]) for each sample."""
    comm, frames = None, []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if comm is not None:
                    yield comm, frames
                comm, frames = None, []
            elif not line[0].isspace():
                if comm is not None:
                    yield comm, frames
                comm, frames = line.split()[0], []  # "comm pid time: period event:"
            else:
                parts = line.split(None, 1)
                if len(parts) == 2:
                    frames.append(OFFSET.sub("", parts[1].split(" (")[0]))
    if comm is not None:
        yield comm, frames


def count(path):
    total = collections.Counter()
    incl = collections.defaultdict(collections.Counter)
    for comm, frames in stacks(path):
        total[comm] += 1
        for fn in set(frames):
            incl[comm][fn] += 1
    return total, incl


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__)
    hz, reqs = float(argv[1]), float(argv[2])
    top = int(argv[5]) if len(argv) > 5 else 20
    want = set(argv[6:])
    us = lambda n: n / hz / reqs * 1e6
    (t0, i0), (t1, i1) = count(argv[3]), count(argv[4])
    threads = sorted(set(t0) | set(t1), key=lambda c: -(t1[c] - t0[c]))
    print("  thread                    before    after   (us of CPU a request, all its samples)")
    for c in threads:
        if us(t0[c]) >= 0.5 or us(t1[c]) >= 0.5:
            print(f"  {c:22} {us(t0[c]):8.1f} {us(t1[c]):8.1f} {us(t1[c] - t0[c]):+8.1f}")
    for c in threads:
        if (want and c not in want) or (not want and abs(us(t1[c] - t0[c])) < 1.0):
            continue
        print(f"\n  {c}: functions by what the second run added (inclusive: callees counted in)")
        # the roots (thread start, the reactor's loop) hold nearly every sample: not listed
        root = lambda k: i0[c][k] > 0.8 * t0[c] and i1[c][k] > 0.8 * t1[c]
        keys = [k for k in set(i0[c]) | set(i1[c]) if not root(k)]
        for fn in sorted(keys, key=lambda k: -(i1[c][k] - i0[c][k]))[:top]:
            a, b = i0[c][fn], i1[c][fn]
            print(f"    {us(a):6.2f} {us(b):6.2f} {us(b - a):+6.2f}  {fn}")


if __name__ == "__main__":
    main(sys.argv)
