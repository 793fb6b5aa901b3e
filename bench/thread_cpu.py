#!/usr/bin/env python3
"""bench/thread_cpu.py — the CPU each thread of one `fluxon demo` run takes, in us a request
(issue 38): which loop a setup's cost lands on. Reads /proc/PID/task/TID/schedstat (ns of
CPU, sampled every 10 ms while the demo runs; a thread's last sample before it exits
counts) and sums threads of one name. By hand; run it under `taskset -c N` to see what each
thread costs when nothing runs beside it (session 56: the GPU owner's loop 31.5 us a request
alone, 39.5 with a CPU owner).

usage: bench/thread_cpu.py FLUXON_BIN demo ARGS...
prints: requests/s, prefix hits, then one line per thread name with us of CPU a request
"""
import collections
import os
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[-2])
    p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    last = {}
    while p.poll() is None:
        try:
            tids = os.listdir(f"/proc/{p.pid}/task")
        except OSError:
            break
        for t in tids:
            try:
                with open(f"/proc/{p.pid}/task/{t}/stat") as f:
                    s = f.read()
                with open(f"/proc/{p.pid}/task/{t}/schedstat") as f:
                    ns = int(f.read().split()[0])
                last[t] = (s[s.index("(") + 1:s.rindex(")")], ns)
            except (OSError, ValueError):
                pass  # the thread exited meanwhile: its last sample stands
        time.sleep(0.01)
    out = p.stdout.read().decode(errors="replace")
    req, rps, hits = 0, 0.0, "?"
    for line in out.splitlines():
        f = line.split()
        if line.startswith("requests") and "=" in f:
            req, rps = int(f[1]), float(f[f.index("=") + 1])
        elif line.startswith("block lookups") and "=" in f:
            hits = f[f.index("=") + 1]
    if not req:
        sys.exit("thread_cpu: the demo printed no requests line:\n" + out[-2000:])
    agg = collections.Counter()
    for name, ns in last.values():
        agg[name] += ns
    print(f"requests/s {rps:.0f}, prefix hits {hits} %, {req} requests")
    for name, ns in agg.most_common():
        if ns / 1e3 / req >= 0.05:
            print(f"  {name:16s} {ns / 1e3 / req:7.1f} us a request")


if __name__ == "__main__":
    main()
