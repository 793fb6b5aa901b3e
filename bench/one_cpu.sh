#!/usr/bin/env bash
# bench/one_cpu.sh — the trace replay with every thread of `fluxon demo` on one CPU
# (taskset): no wake-ups across CPUs and no spinning for the other one, so requests/s
# measure what a setup costs in CPU alone. On the 2-vCPU VM this is much steadier than two
# CPUs (the DRAM-only replay: 11,600-12,200 requests/s against 6,900-11,500), which makes
# it the figure to compare a change with; the issues' ratios stay those of the default runs.
# usage: bench/one_cpu.sh TITLE "name|label|demo args[|base]" ... (each row's ratio is to the
# setup named base, the first one by default; "@DISK@" in args: a fresh disk directory each run). env: RUNS [3], REQUESTS [0 = all], FLUXON_BIN,
# DISK_PARENT [$TMPDIR or /var/tmp]. Figures, not pass/fail.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLUXON_BIN:-./fluxon}
RUNS=${RUNS:-3} REQUESTS=${REQUESTS:-0}
command -v taskset > /dev/null || { echo "== one CPU: taskset missing (util-linux): skipped"; exit 0; }
cpu=$(( $(nproc) - 1 ))
title=$1
shift
tmp=$(mktemp -d /tmp/fluxon-onecpu-XXXXXX) && disks=$(mktemp -d "${DISK_PARENT:-${TMPDIR:-/var/tmp}}/fluxon-onecpu-disk-XXXXXX") || exit 2
trap 'rm -rf "$tmp" "$disks"' EXIT
med() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }
field() { awk -v re="$2" '$0 ~ re {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$1"; }
echo "== $title, every thread on CPU $cpu (taskset), ${RUNS} interleaved runs each, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$RUNS"); do
    for s in "$@"; do
        IFS='|' read -r name _ args _ <<< "$s"
        rm -rf "$disks/d"
        # shellcheck disable=SC2086
        taskset -c "$cpu" "$BIN" demo --workers 1 --requests "$REQUESTS" ${args//@DISK@/$disks/d} > "$tmp/$name.$r" 2>&1 ||
            echo "  $name run $r: exit $?"
        field "$tmp/$name.$r" '^requests' >> "$tmp/$name.rps"
        field "$tmp/$name.$r" '^cpu' >> "$tmp/$name.cpu"
        awk '/prefix hits/ {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$tmp/$name.$r" >> "$tmp/$name.hits"
    done
done
first=${1%%|*}
for s in "$@"; do
    IFS='|' read -r name label _ base <<< "$s"
    base=${base:-$first}
    rps=$(med < "$tmp/$name.rps") brps=$(med < "$tmp/$base.rps")
    printf '%-44s %9s req/s (%s x %s)  prefix hits %6s %%  CPU %7s us/request  (runs: %s)\n' "$label" "$rps" \
        "$(awk -v a="$rps" -v b="$brps" 'BEGIN {printf("%.2f", (b > 0 ? a / b : 0))}')" "$base" \
        "$(med < "$tmp/$name.hits")" "$(med < "$tmp/$name.cpu")" "$(tr '\n' ' ' < "$tmp/$name.rps" | sed 's/ $//')"
done
