#!/usr/bin/env python3
"""bench/disk_trace_sim.py — what a disk tier must write and read for a trace (issue 39),
offline: the trace's keys (hash_ids) replayed as `fluxon demo` replays them — each request
hits the longest prefix held in memory or on disk, a hit in memory is touched, one on disk
is read back (and promoted into memory at its N-th read), the rest of the request is put —
with memory an LRU of DRAM values and the disk a FIFO of DISK records that takes the values
memory evicts (those the admission rule admits; a value already on disk is not rewritten).
Prints, per admission rule and per promotion rule, the prefix hits, the records written
and the records read back: the I/O any implementation of that policy has to do.
The demo's own figures differ a little (its memory is S3-FIFO, not LRU; 36.14 % against
36.18 % with `all`, 26.87 % against 27.01 % with second touch).
With --refresh the FIFO is a CPU owner's (issue 38): a promoted value that memory evicts again
moves its record to the FIFO's young end, as the master does at that eviction. Session 55,
`--disk 10000 --refresh`: 28.41 % prefix hits, 44,301 written, 21,034 read back with a CPU
owner's second_touch, promoted at the 1st read (the demo: 28.15 %, 44,138, 20,178); 28.38 %,
44,136, 22,919 promoted at the 2nd (the demo, built so: 27.99-28.08 %).

usage: bench/disk_trace_sim.py [--trace FILE] [--dram N] [--disk N] [--refresh]
"""
import argparse
import collections
import json


def replay(reqs, dram_cap, disk_cap, admit, promote_at, refresh=False):
    dram = collections.OrderedDict()  # LRU: oldest first
    disk = collections.OrderedDict()  # FIFO: oldest first
    evicted, hit_before, seen, reads = set(), collections.Counter(), collections.Counter(), collections.Counter()
    last, depth = {}, {}
    lookups = hits = written = read_back = 0
    for r in reqs:
        n = len(r)
        lookups += n
        p = 0
        while p < n and (r[p] in dram or r[p] in disk):
            p += 1
        hits += p
        for i, k in enumerate(r):
            seen[k] += 1
            last[k] = i == n - 1
            depth[k] = i
            if i < p:
                hit_before[k] += 1
                if k in dram:
                    dram.move_to_end(k)
                    continue
                read_back += 1
                reads[k] += 1
                if reads[k] < promote_at:
                    continue  # a temporary copy: memory unchanged
            dram[k] = None
            dram.move_to_end(k)
            while len(dram) > dram_cap:
                v, _ = dram.popitem(last=False)
                if v in disk and refresh:
                    disk.move_to_end(v)  # a promoted value evicted again: its copy is young again
                elif v not in disk and admit(v, evicted, hit_before, seen, last, depth):
                    disk[v] = None
                    written += 1
                    while len(disk) > disk_cap:
                        disk.popitem(last=False)
                evicted.add(v)
    return 100.0 * hits / lookups, written, read_back


# second_touch as a CPU owner's GPU owner admits (--refresh's promotion rows use it)
CPU_OWNER_RULE = ("evicted or hit before (CPU owner's)", lambda v, e, h, s, l, d: v in e or h[v] > 0)
ADMISSION = [
    ("all", lambda v, e, h, s, l, d: True),
    ("second touch (evicted before)", lambda v, e, h, s, l, d: v in e),
    ("seen in 2 requests", lambda v, e, h, s, l, d: s[v] >= 2),
    ("hit before", lambda v, e, h, s, l, d: h[v] > 0),
    CPU_OWNER_RULE,
    ("a request's first 16 pages", lambda v, e, h, s, l, d: d[v] < 16),
    ("a request's first 32 pages", lambda v, e, h, s, l, d: d[v] < 32),
    ("not a request's last page", lambda v, e, h, s, l, d: not l[v]),
    ("none (memory alone)", lambda v, e, h, s, l, d: False),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default="data/conversation_trace.jsonl")
    ap.add_argument("--dram", type=int, default=10000, help="values in memory (--capacity-blocks)")
    ap.add_argument("--disk", type=int, default=100000, help="records on disk (--disk-capacity-blocks)")
    ap.add_argument("--refresh", action="store_true", help="a CPU owner's FIFO (see above)")
    a = ap.parse_args()
    if a.dram < 1 or a.disk < 0:
        ap.error(f"--dram {a.dram} / --disk {a.disk}: at least 1 / 0 values")
    with open(a.trace) as f:
        reqs = [json.loads(line)["hash_ids"] for line in f if line.strip()]
    print(f"{a.trace}: {len(reqs)} requests; LRU of {a.dram} values in memory, FIFO of {a.disk} records on disk")
    print(f"{'admission (promotion at the 1st read)':40s} {'prefix hits':>11s} {'written':>9s} {'read back':>9s}")
    for name, rule in ADMISSION:
        h, w, rb = replay(reqs, a.dram, a.disk, rule, 1, a.refresh)
        print(f"{name:40s} {h:10.2f} % {w:9d} {rb:9d}")
    rule = CPU_OWNER_RULE if a.refresh else ADMISSION[0]
    print(f"promotion (admission {rule[0]})")
    for n in (1, 2, 3):
        h, w, rb = replay(reqs, a.dram, a.disk, rule[1], n, a.refresh)
        print(f"{'  at read ' + str(n):40s} {h:10.2f} % {w:9d} {rb:9d}")


if __name__ == "__main__":
    main()
