#!/usr/bin/env bash
# bench/tiers.sh — `make bench-tiers`: what a CPU (remote_cache) owner costs and buys in the
# trace replay (embedded cluster, 1 worker, 4 KiB values), interleaved runs of each setup,
# medians of RUNS: a GPU owner of CAP values alone; + a CPU owner of CAP values (copies through
# its mapped segment, the default between owners of one host; then over UCX shared memory and
# UCX tcp, as between hosts); 2 GPU owners
# of CAP/2 alone and + a CPU owner. Then write-back bandwidth (the demo's pushes) next to
# ucx_perftest's put bandwidth on the same transport (shared memory, tcp loopback), and the same replay with
# the CPU owner on another "host" (bench/tiers_netns.sh, needs root); before it, the main
# setups with every thread on one CPU (bench/one_cpu.sh: the CPU each costs) and what one
# written-back value costs (bench/copy_cost.sh). Figures, not pass/fail.
# env: RUNS [3], REQUESTS [0 = the whole trace], CAP [10000], FLUXON_BIN [./fluxon]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLUXON_BIN:-./fluxon}
RUNS=${RUNS:-3} REQUESTS=${REQUESTS:-0} CAP=${CAP:-10000}
tmp=$(mktemp -d /tmp/fluxon-tiers-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
med() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }
field() { # file, line regex, the word after "="
    awk -v re="$2" '$0 ~ re {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$1"
}
# shellcheck source=bench/steal.sh
. bench/steal.sh
setups=("alone|--capacity-blocks $CAP"
        "cpu|--capacity-blocks $CAP --cpu-owners 1 --cpu-capacity-blocks $CAP"
        "cpuucx|--capacity-blocks $CAP --cpu-owners 1 --cpu-capacity-blocks $CAP --peer-segments ucx"
        "cputcp|--capacity-blocks $CAP --cpu-owners 1 --cpu-capacity-blocks $CAP --ucx-tls default --peer-segments ucx"
        "alone2|--owners 2 --capacity-blocks $((CAP / 2))"
        "cpu2|--owners 2 --capacity-blocks $((CAP / 2)) --cpu-owners 1 --cpu-capacity-blocks $CAP")
echo "== tiers: trace replay, 1 worker, 4 KiB values, ${RUNS} interleaved runs each, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$RUNS"); do
    for s in "${setups[@]}"; do
        name=${s%%|*} args=${s#*|}
        t0=$(cpu_ticks)
        # shellcheck disable=SC2086
        "$BIN" demo --workers 1 --requests "$REQUESTS" $args > "$tmp/$name.$r" 2>&1 || echo "  $name run $r: exit $?"
        steal_share "$t0" "$(cpu_ticks)" >> "$tmp/steal"
        field "$tmp/$name.$r" '^requests' >> "$tmp/$name.rps"
        awk '/prefix hits/ {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$tmp/$name.$r" >> "$tmp/$name.hits"
        field "$tmp/$name.$r" '^cpu' >> "$tmp/$name.cpu"
        awk '$1 == "put_start" {print $5}' "$tmp/$name.$r" >> "$tmp/$name.p99"
        awk '/pushes/ {for (i = 1; i <= NF; i++) if ($i == "GB/s") print $(i - 1)}' "$tmp/$name.$r" >> "$tmp/$name.gbs"
        awk '/data plane/ {for (i = 1; i <= NF; i++) if ($i == "GB/s") print $(i - 1)}' "$tmp/$name.$r" >> "$tmp/$name.mapgbs"
    done
done
row() { # name label base
    local rps hits cpu p99 brps
    rps=$(med < "$tmp/$1.rps") hits=$(med < "$tmp/$1.hits") cpu=$(med < "$tmp/$1.cpu") p99=$(med < "$tmp/$1.p99")
    brps=$(med < "$tmp/$3.rps")
    printf '%-40s %9s req/s (%s x alone)  prefix hits %6s %%  put_start p99 %8s us  CPU %7s us/request\n' "$2" \
        "$rps" "$(awk -v a="$rps" -v b="$brps" 'BEGIN {printf("%.2f", (b > 0 ? a / b : 0))}')" "$hits" "$p99" "$cpu"
}
row alone "1 GPU owner x $CAP" alone
row cpu "1 GPU owner x $CAP + 1 CPU owner x $CAP" alone
row cpuucx "  the same over UCX shared memory (--peer-segments ucx)" alone
row cputcp "  the same over UCX tcp loopback (--ucx-tls default)" alone
row alone2 "2 GPU owners x $((CAP / 2))" alone2
row cpu2 "2 GPU owners x $((CAP / 2)) + 1 CPU owner" alone2
sort -g "$tmp/steal" | awk '{v[NR] = $1} END {if (NR) printf "steal (the hypervisor'"'"'s share of the CPU time while a run ran): median %.1f %%, max %.1f %% of %d runs; above a few %% a run loses requests/s to other guests: compare again later (bench/tiers_pairs.sh leaves such pairs out)\n", 100 * v[int((NR + 1) / 2)], 100 * v[NR], NR}'
grep -h "eviction        GPU\|at the GPU owners\|pushes\|write-back      tasks" "$tmp/cpu.1" | sed 's/^/  (1st run with a CPU owner) /'
echo
echo "== write-back bandwidth next to ucx_perftest on the same transport"
printf 'fluxon write-back, mapped peer segment (the default)   %s GB/s (summed push time, median of the runs; its copies, pushes and restores, %s GB/s by their own time)\n' \
    "$(med < "$tmp/cpu.gbs")" "$(med < "$tmp/cpu.mapgbs")"
printf 'fluxon write-back, UCX shared memory (--peer-segments ucx)  %s GB/s\n' "$(med < "$tmp/cpuucx.gbs")"
printf 'fluxon write-back, UCX tcp loopback (--ucx-tls default)    %s GB/s\n' "$(med < "$tmp/cputcp.gbs")"
if command -v ucx_perftest >/dev/null; then
    # ucx_perftest puts the same buffer again and again (cache-resident: far above any copy
    # of cold memory on shared memory); tcp is bound by the loopback stack either way
    for tl in sm tcp; do
        for sz in 4096 262144; do
            port=$((20000 + RANDOM % 20000))
            timeout 60 env UCX_TLS=$tl ucx_perftest -t ucp_put_bw -s "$sz" -n 2000 -p "$port" >/dev/null 2>&1 & srv=$!
            sleep 0.5
            bw=$(timeout 60 env UCX_TLS=$tl ucx_perftest 127.0.0.1 -t ucp_put_bw -s "$sz" -n 2000 -p "$port" 2>/dev/null |
                awk '$1 == "Final:" {print $7}')
            wait "$srv" 2>/dev/null
            printf 'ucx_perftest ucp_put_bw %-3s, %7d-byte messages  %s GB/s\n' "$tl" "$sz" \
                "$(awk -v m="${bw:-0}" 'BEGIN {if (m > 0) printf("%.2f", m * 1048576 / 1e9); else printf("n/a")}')"
        done
    done
else
    echo "ucx_perftest not installed (Debian's ucx-utils)"
fi
echo
RUNS=$RUNS REQUESTS=$REQUESTS FLUXON_BIN="$BIN" bench/one_cpu.sh "tiers: what a CPU owner costs in CPU" \
    "alone|1 GPU owner x $CAP|--capacity-blocks $CAP" \
    "cpu|+ 1 CPU owner x $CAP|--capacity-blocks $CAP --cpu-owners 1 --cpu-capacity-blocks $CAP" \
    "alone2|2 GPU owners x $((CAP / 2))|--owners 2 --capacity-blocks $((CAP / 2))|alone2" \
    "cpu2|2 GPU owners x $((CAP / 2)) + 1 CPU owner|--owners 2 --capacity-blocks $((CAP / 2)) --cpu-owners 1 --cpu-capacity-blocks $CAP|alone2"
echo
RUNS=$RUNS REQUESTS=$REQUESTS CAP=$CAP FLUXON_BIN="$BIN" bench/copy_cost.sh
echo
echo "== the CPU owner on another host (TCP between network namespaces)"
REQUESTS=$REQUESTS RUNS=$RUNS CAP=$CAP CPU_CAP=$CAP FLUXON_BIN="$BIN" bench/tiers_netns.sh
