#!/usr/bin/env bash
# bench/ab_cpu.sh — two fluxon binaries compared by the CPU a request of the trace replay,
# every thread on one CPU (taskset), in back-to-back pairs whose order alternates (ABBA):
# steadier than requests/s on a noisy VM for a change that saves CPU (issue 38). By hand.
# usage: bench/ab_cpu.sh PAIRS OLD_BIN NEW_BIN [demo args] (default args: a CPU owner x 10,000)
# env: CAP [10000] (the GPU owner's values)
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 PAIRS OLD_BIN NEW_BIN [demo args]" >&2; exit 2; }
command -v taskset > /dev/null || { echo "ab_cpu: taskset missing (util-linux)" >&2; exit 2; }
pairs=$1 old=$2 new=$3
shift 3
[ $# -gt 0 ] || set -- --cpu-owners 1 --cpu-capacity-blocks 10000
cap=${CAP:-10000}
cpu=$(( $(nproc) - 1 ))
rows=$(mktemp "${TMPDIR:-/tmp}/fluxon-abcpu-XXXXXX") || exit 2
trap 'rm -f "$rows"' EXIT
cpu_of() { # the demo's "cpu ... = X us per request"
    taskset -c "$cpu" "$1" demo --workers 1 --requests 0 --capacity-blocks "$cap" "${@:2}" 2>&1 |
        awk '$1 == "cpu" {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}'
}
echo "== ab_cpu: $pairs ABBA pairs on CPU $cpu, demo $*, load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$pairs"); do
    if [ $((i % 2)) = 1 ]; then a=$(cpu_of "$old" "$@"); b=$(cpu_of "$new" "$@")
    else b=$(cpu_of "$new" "$@"); a=$(cpu_of "$old" "$@"); fi
    [ -n "$a" ] && [ -n "$b" ] && echo "$a $b" >> "$rows"
done
python3 - "$rows" <<'P'
import statistics as st, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
if len(rows) < 2:
    sys.exit("ab_cpu: fewer than 2 pairs ran")
d = sorted(b - a for a, b in rows)
q = st.quantiles(d, n=4)
print(f"  old {st.median(a for a, _ in rows):.1f} new {st.median(b for _, b in rows):.1f} us of CPU a request; "
      f"median pair difference new - old {st.median(d):+.2f} (quartiles {q[0]:+.2f}..{q[2]:+.2f}); "
      f"new cheaper in {sum(x < 0 for x in d)} of {len(d)}")
P
