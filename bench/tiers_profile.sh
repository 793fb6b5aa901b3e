#!/usr/bin/env bash
# bench/tiers_profile.sh — where a CPU owner's extra CPU goes (issue 38), thread by thread
# and function by function: the trace replay with every thread on one CPU (taskset), once
# alone and once with a CPU owner, each under `perf record --call-graph dwarf`, compared by
# bench/perf_incl.py (inclusive µs of CPU a request, the difference largest first). perf's
# own cost adds about 15 % to every figure, and the setup's threads (fx-prefault-*) are in
# the samples too; the differences are what to read. Not in `make bench-tiers` (it takes a
# minute and ~1 GB of disk under $TMPDIR); figures, not pass/fail.
# usage: bench/tiers_profile.sh [THREAD...] (default: the threads that gained 1 µs or more)
# env: FREQ [4000], TOP [25], REQUESTS [0 = all], CAP [10000], OWNERS [1: GPU owners, each x CAP/OWNERS],
# FLUXON_BIN [./fluxon]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BIN=${FLUXON_BIN:-./fluxon}
FREQ=${FREQ:-4000} TOP=${TOP:-25} REQUESTS=${REQUESTS:-0} CAP=${CAP:-10000} OWNERS=${OWNERS:-1}
command -v perf > /dev/null || { echo "== tiers profile: perf missing (Debian: apt-get install linux-perf): skipped"; exit 0; }
command -v taskset > /dev/null || { echo "== tiers profile: taskset missing (util-linux): skipped"; exit 0; }
cpu=$(( $(nproc) - 1 ))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fluxon-tiersprof-XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
echo "== tiers profile: the replay on CPU $cpu under perf ($FREQ Hz, DWARF call graphs), $OWNERS GPU owner(s), alone and with a CPU owner x $CAP, load $(cut -d' ' -f1-3 /proc/loadavg)"
for s in alone cpu; do
    args="--owners $OWNERS --capacity-blocks $((CAP / OWNERS))"
    [ "$s" = cpu ] && args="$args --cpu-owners 1 --cpu-capacity-blocks $CAP"
    # shellcheck disable=SC2086
    if ! taskset -c "$cpu" perf record -q -F "$FREQ" --call-graph dwarf,8192 -o "$tmp/$s.data" -- \
        "$BIN" demo --workers 1 --requests "$REQUESTS" $args > "$tmp/$s.out" 2>&1; then
        echo "  $s: perf record or the replay failed (perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)):"
        tail -3 "$tmp/$s.out"
        exit 1
    fi
    echo "  $s: $(awk '$1 == "requests" {print; exit}' "$tmp/$s.out")"
    perf script -i "$tmp/$s.data" > "$tmp/$s.txt" 2> /dev/null
done
reqs=$(awk '$1 == "requests" {print $2; exit}' "$tmp/cpu.out")
python3 bench/perf_incl.py "$FREQ" "${reqs:-1}" "$tmp/alone.txt" "$tmp/cpu.txt" "$TOP" "$@"
