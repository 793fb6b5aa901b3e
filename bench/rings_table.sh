#!/usr/bin/env bash
# bench/rings_table.sh — the issue-18 table (external <-> owner hot path), medians of RUNS
# runs of each figure: ping external->owner p50 (separate master and owner processes),
# bench-hostless batch 64 x 64 KiB (local get_start+transfer, local put_start+commit),
# batch 1 x 4 KiB get_start all-local, the same in steady state against the owner process
# (`fluxon --role=external ... hot`), and the trace replay (3000 requests, 16 KiB, 1 owner).
# FLUXON_CLIENT_TRANSPORT=ring|socket selects the client transport. Figures, not pass/fail.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLUXON_BIN:-./fluxon}
RUNS=${RUNS:-5}
tmp=$(mktemp -d /tmp/fluxon-rt-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
med() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }
port=$(/usr/bin/python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
cat > "$tmp/m.json" <<J
{"role":"master","cluster_id":"rt","listen":"127.0.0.1:$port","log_level":"warn"}
J
cat > "$tmp/o.json" <<J
{"role":"owner","cluster_id":"rt","node_id":"r1","master":"127.0.0.1:$port","socket":"$tmp/run/r1.sock",
 "segment_bytes":"64MiB","reserve":{"grant_bytes":"16MiB"},"log_level":"warn"}
J
cat > "$tmp/e.json" <<J
{"role":"external","cluster_id":"rt","socket":"$tmp/run/r1.sock","log_level":"warn","prefault_segment":false}
J
"$BIN" --role=master --config "$tmp/m.json" 2>>"$tmp/log" & pids+=($!)
sleep 0.3
"$BIN" --role=owner --config "$tmp/o.json" 2>>"$tmp/log" & pids+=($!)
for _ in $(seq 100); do [ -S "$tmp/run/r1.sock" ] && break; sleep 0.1; done
for _ in $(seq "$RUNS"); do
    "$BIN" --role=external --config "$tmp/e.json" ping --count "${PING_COUNT:-20000}" 2>&1 |
        grep -m1 -oE "p50[^0-9]*[0-9.]+" | head -1 | grep -oE "[0-9.]+$" >> "$tmp/ping"
done
for _ in $(seq "$RUNS"); do # steady state against the owner process: `hot`
    "$BIN" --role=external --config "$tmp/e.json" hot --batch 64 --value-len 65536 --iters 1000 > "$tmp/hot64" 2>&1
    grep "get_start+get_transfer" "$tmp/hot64" | awk '{print $4}' >> "$tmp/sg64"
    grep "put_start+commit" "$tmp/hot64" | awk '{print $4}' >> "$tmp/sp64"
    "$BIN" --role=external --config "$tmp/e.json" hot --batch 1 --value-len 4096 --iters 2000 > "$tmp/hot1" 2>&1
    grep "get_start+get_transfer" "$tmp/hot1" | awk '{print $4}' >> "$tmp/sg1"
done
for _ in $(seq "$RUNS"); do
    "$BIN" bench-hostless --batch 64 --value-len 65536 --iters 50 > "$tmp/h64" 2>&1
    grep "local get_start+transfer" "$tmp/h64" | awk '{print $(NF-4)}' >> "$tmp/g64"
    grep "local put_start+commit" "$tmp/h64" | awk '{print $(NF-4)}' >> "$tmp/p64"
    "$BIN" bench-hostless --batch 1 --value-len 4096 --iters 300 > "$tmp/h1" 2>&1
    grep "get_start all-local" "$tmp/h1" | awk '{print $(NF-4)}' >> "$tmp/g1"
    grep -E "^  put_start " "$tmp/h1" | awk '{print $(NF-4)}' >> "$tmp/p1"
    "$BIN" demo --requests 3000 --value-len 16384 --workers 1 > "$tmp/demo" 2>&1
    grep -E "^requests" "$tmp/demo" | grep -oE "= [0-9.]+" | grep -oE "[0-9.]+" >> "$tmp/rep"
    grep -E "^engine work" "$tmp/demo" | awk '{print $3}' >> "$tmp/eng"
done
echo "issue-18 table, transport ${FLUXON_CLIENT_TRANSPORT:-default}, medians of $RUNS runs"
printf "  %-48s %s\n" "ping external->owner p50 (us)" "$(med < "$tmp/ping")  [runs: $(tr '\n' ' ' < "$tmp/ping")]"
printf "  %-48s %s\n" "batch 64x64KiB get_start+transfer p50 (us)" "$(med < "$tmp/g64")  [runs: $(tr '\n' ' ' < "$tmp/g64")]"
printf "  %-48s %s\n" "batch 64x64KiB put_start+commit p50 (us)" "$(med < "$tmp/p64")  [runs: $(tr '\n' ' ' < "$tmp/p64")]"
printf "  %-48s %s\n" "batch 1 get_start all-local p50 (us)" "$(med < "$tmp/g1")  [runs: $(tr '\n' ' ' < "$tmp/g1")]"
printf "  %-48s %s\n" "batch 1 put_start p50 (us)" "$(med < "$tmp/p1")  [runs: $(tr '\n' ' ' < "$tmp/p1")]"
printf "  %-48s %s\n" "hot: batch 64 get_start+transfer p50 (us)" "$(med < "$tmp/sg64")  [runs: $(tr '\n' ' ' < "$tmp/sg64")]"
printf "  %-48s %s\n" "hot: batch 64 put_start+commit p50 (us)" "$(med < "$tmp/sp64")  [runs: $(tr '\n' ' ' < "$tmp/sp64")]"
printf "  %-48s %s\n" "hot: batch 1 get_start+transfer p50 (us)" "$(med < "$tmp/sg1")  [runs: $(tr '\n' ' ' < "$tmp/sg1")]"
printf "  %-48s %s\n" "trace replay 3000 x 16KiB, 1 owner (req/s)" "$(med < "$tmp/rep")  [runs: $(tr '\n' ' ' < "$tmp/rep")]"
# the machine's phase: the replay's own value writes into the segment (the engine's work,
# not Fluxon's); on a noisy VM they alone move the replay's figure by several times
printf "  %-48s %s\n" "replay: engine's value writes (us per request)" "$(med < "$tmp/eng")  [runs: $(tr '\n' ' ' < "$tmp/eng")]"
