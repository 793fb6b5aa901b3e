#!/usr/bin/env bash
# bench/disk_tier.sh — `make bench-disk`: what the disk tier (issue 39) costs and buys in the
# trace replay (embedded cluster, 1 worker, 4 KiB values), interleaved runs, medians of RUNS:
# a GPU owner of CAP values alone, and with a disk tier of DISK_CAP values (a fresh directory
# each run), the demo's workers prefetching 8 requests ahead (its default with a disk tier)
# and not prefetching. Then the restarts (bench/disk_restart.sh): a replay, a kill -9 of the owner (then
# of the master), the same replay again: its extra hits come from the disk; between them, the
# first two setups with every thread on one CPU (bench/one_cpu.sh). Figures, not pass/fail.
# env: RUNS [3], REQUESTS [0 = the whole trace], CAP [10000], DISK_CAP [100000],
#      DISK_PARENT [a directory on the local disk: $TMPDIR or /var/tmp], FLUXON_BIN [./fluxon]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLUXON_BIN:-./fluxon}
RUNS=${RUNS:-3} REQUESTS=${REQUESTS:-0} CAP=${CAP:-10000} DISK_CAP=${DISK_CAP:-100000}
parent=${DISK_PARENT:-${TMPDIR:-/var/tmp}}
tmp=$(mktemp -d /tmp/fluxon-disk-bench-XXXXXX) && disks=$(mktemp -d "$parent/fluxon-disk-XXXXXX") || exit 2
trap 'rm -rf "$tmp" "$disks"' EXIT
med() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }
field() { awk -v re="$2" '$0 ~ re {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$1"; }
collect() { # output file, setup name
    field "$1" '^requests' >> "$tmp/$2.rps"
    awk '/prefix hits/ {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$1" >> "$tmp/$2.hits"
    field "$1" '^cpu' >> "$tmp/$2.cpu"
    awk '$1 == "put_start" {print $5}' "$1" >> "$tmp/$2.p99"
}
echo "== disk tier: trace replay, 1 worker, 4 KiB values, ${RUNS} interleaved runs each, disk under $parent ($(stat -f -c %T "$parent")), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$RUNS"); do
    "$BIN" demo --workers 1 --requests "$REQUESTS" --capacity-blocks "$CAP" > "$tmp/alone.$r" 2>&1 || echo "  alone run $r: exit $?"
    collect "$tmp/alone.$r" alone
    rm -rf "$disks/d"
    "$BIN" demo --workers 1 --requests "$REQUESTS" --capacity-blocks "$CAP" --disk-dir "$disks/d" \
        --disk-capacity-blocks "$DISK_CAP" > "$tmp/disk.$r" 2>&1 || echo "  disk run $r: exit $?"
    collect "$tmp/disk.$r" disk
    rm -rf "$disks/d"
    "$BIN" demo --workers 1 --requests "$REQUESTS" --capacity-blocks "$CAP" --disk-dir "$disks/d" \
        --disk-capacity-blocks "$DISK_CAP" --prefetch 0 > "$tmp/nopf.$r" 2>&1 || echo "  no-prefetch run $r: exit $?"
    collect "$tmp/nopf.$r" nopf
done
row() {
    local rps hits cpu p99 brps
    rps=$(med < "$tmp/$1.rps") hits=$(med < "$tmp/$1.hits") cpu=$(med < "$tmp/$1.cpu") p99=$(med < "$tmp/$1.p99")
    brps=$(med < "$tmp/alone.rps")
    printf '%-44s %9s req/s (%s x alone)  prefix hits %6s %%  put_start p99 %8s us  CPU %7s us/request\n' "$2" \
        "$rps" "$(awk -v a="$rps" -v b="$brps" 'BEGIN {printf("%.2f", (b > 0 ? a / b : 0))}')" "$hits" "$p99" "$cpu"
}
row alone "1 owner x $CAP values in DRAM"
row disk "+ a disk tier of $DISK_CAP values"
row nopf "  the same without prefetch (--prefetch 0)"
grep -h "^disk tier\|moved to disk\|disk hits" "$tmp/disk.1" | sed 's/^/  (1st run with a disk tier) /'
echo
RUNS=$RUNS REQUESTS=$REQUESTS DISK_PARENT="$parent" FLUXON_BIN="$BIN" bench/one_cpu.sh "disk tier: what it costs in CPU" \
    "alone|1 owner x $CAP values in DRAM|--capacity-blocks $CAP" \
    "disk|+ a disk tier of $DISK_CAP values|--capacity-blocks $CAP --disk-dir @DISK@ --disk-capacity-blocks $DISK_CAP"
echo
REQUESTS=$REQUESTS CAP=$CAP DISK_CAP=$DISK_CAP KILL=owner DISK_PARENT="$parent" FLUXON_BIN="$BIN" bench/disk_restart.sh
echo
REQUESTS=$REQUESTS CAP=$CAP DISK_CAP=$DISK_CAP KILL=master DISK_PARENT="$parent" FLUXON_BIN="$BIN" bench/disk_restart.sh
