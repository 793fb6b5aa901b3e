#!/usr/bin/env bash
# bench/copy_cost.sh — what one written-back value costs, in CPU of the whole cluster (issue
# 38): the trace replay with a CPU owner, every thread on one CPU (taskset: the CPU a setup
# costs, without the second CPU's spinning and wake-ups), under writeback_admission
# second_touch (the default) and all (about 4.6 x the copies, fewer hits), interleaved. The
# difference in CPU over the difference in values copied is the cost of one copy: its
# memcpy and its bookkeeping (the look-ahead, APPEND_START/DONE at the master, the owners'
# records and messages). The memcpy's own share comes from the GPU owner's peer_map clock
# (the data plane line). Figures, not pass/fail.
# env: RUNS [3], REQUESTS [0 = all], CAP [10000], FLUXON_BIN [./fluxon]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BIN=${FLUXON_BIN:-./fluxon}
RUNS=${RUNS:-3} REQUESTS=${REQUESTS:-0} CAP=${CAP:-10000}
command -v taskset > /dev/null || { echo "== copy cost: taskset missing (util-linux): skipped"; exit 0; }
cpu=$(( $(nproc) - 1 ))
tmp=$(mktemp -d /tmp/fluxon-copycost-XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT
med() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }
field() { awk -v re="$2" '$0 ~ re {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$1"; }
echo "== what one written-back value costs: CPU owner x $CAP, every thread on CPU $cpu, ${RUNS} interleaved runs each, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$RUNS"); do
    for adm in second_touch all; do
        out="$tmp/$adm.$r"
        taskset -c "$cpu" "$BIN" demo --workers 1 --requests "$REQUESTS" --capacity-blocks "$CAP" --cpu-owners 1 \
            --cpu-capacity-blocks "$CAP" --writeback-admission "$adm" > "$out" 2>&1 || echo "  $adm run $r: exit $?"
        field "$out" '^cpu' >> "$tmp/$adm.cpu"
        awk '$1 == "cpu" {for (i = 1; i <= NF; i++) if ($i == "threads") {print $(i + 1); exit}}' "$out" >> "$tmp/$adm.wk"
        awk '$1 == "requests" {print $2; exit}' "$out" >> "$tmp/$adm.req"
        awk '/write-back +tasks/ {for (i = 1; i <= NF; i++) if ($i == "completed") {print $(i + 1); exit}}' "$out" >> "$tmp/$adm.copies"
        awk '/prefix hits/ {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$out" >> "$tmp/$adm.hits"
        awk '/data plane/ {for (i = 1; i <= NF; i++) if ($i == "GB/s") {print $(i - 1); exit}}' "$out" >> "$tmp/$adm.gbs"
    done
done
for adm in second_touch all; do
    printf '  writeback_admission %-12s CPU %7s us/request, %7s values copied, prefix hits %6s %%, mapped copies %s GB/s (runs: %s)\n' \
        "$adm" "$(med < "$tmp/$adm.cpu")" "$(med < "$tmp/$adm.copies")" "$(med < "$tmp/$adm.hits")" \
        "$(med < "$tmp/$adm.gbs")" "$(tr '\n' ' ' < "$tmp/$adm.cpu" | sed 's/ $//')"
done
awk -v c1="$(med < "$tmp/second_touch.cpu")" -v c2="$(med < "$tmp/all.cpu")" -v w1="$(med < "$tmp/second_touch.wk")" \
    -v w2="$(med < "$tmp/all.wk")" -v n1="$(med < "$tmp/second_touch.copies")" \
    -v n2="$(med < "$tmp/all.copies")" -v req="$(med < "$tmp/all.req")" -v gbs="$(med < "$tmp/all.gbs")" 'BEGIN {
    if (n2 <= n1 || req <= 0) { print "  (no more copies under all: no per-copy figure)"; exit }
    per = (c2 - c1) * req / (n2 - n1)
    printf "  one copied value costs %.2f us of CPU (the medians: CPU difference x %d requests / %d more copies)", per, req, n2 - n1
    if (gbs > 0) printf "; of it the 4 KiB memcpy at %.2f GB/s, %.2f us", gbs, 4096 / (gbs * 1000)
    printf "\n  at the default admission: %.1f copies a request, %.1f us of CPU a request\n", n1 / req, per * n1 / req
    # under all the prefix hits are fewer: the workers recompute and put more values (engine
    # work, not the copy), so the figure without the worker threads is the cluster alone
    if (w1 != "" && w2 != "" && w1 != "n/a" && w2 != "n/a")
        printf "  without the worker threads (engine work moves with the hits): %.2f us a copy, %.1f us a request at the default\n", \
            ((c2 - w2) - (c1 - w1)) * req / (n2 - n1), ((c2 - w2) - (c1 - w1)) * req / (n2 - n1) * n1 / req
}'
