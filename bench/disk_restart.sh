#!/usr/bin/env bash
# bench/disk_restart.sh — the disk cache across a kill -9 (issue 39): a master and an owner
# (DRAM of CAP values + a disk tier of DISK_CAP values) as separate processes on loopback;
# the trace replay (`fluxon demo --config`) runs once, then the owner — or, with
# KILL=master, the master — is killed with SIGKILL and started again, and the same replay
# runs a second time: its hits beyond what DRAM alone gives come from the disk. Prints both
# runs' prefix hits and requests/s, the owner's re-index time and its disk counters.
# env: REQUESTS [0 = the whole trace], CAP [10000], DISK_CAP [100000], KILL [owner|master],
#      DISK_PARENT [$TMPDIR or /var/tmp], FLUXON_BIN [./fluxon]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLUXON_BIN:-./fluxon}
REQUESTS=${REQUESTS:-0} CAP=${CAP:-10000} DISK_CAP=${DISK_CAP:-100000} KILL=${KILL:-owner}
parent=${DISK_PARENT:-${TMPDIR:-/var/tmp}}
tmp=$(mktemp -d "$parent/fluxon-disk-restart-XXXXXX") || exit 2
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null' EXIT
port=$((20000 + RANDOM % 10000))
rec=$((4096 + 4096)) # a 4 KiB value's record: header block + value
cat > "$tmp/master.json" <<JSON
{"role":"master","cluster_id":"dr","cluster_token":"tok","listen":"127.0.0.1:$port","log_level":"info"}
JSON
cat > "$tmp/owner.json" <<JSON
{"role":"owner","cluster_id":"dr","cluster_token":"tok","node_id":"o1","master":"127.0.0.1:$port",
 "socket":"$tmp/run/o.sock","segment_bytes":$((CAP * 4096 + 4096 + (64 << 20))),"log_level":"info",
 "hot_capacity_bytes":$((CAP * 4096)),
 "disk":{"path":"$tmp/disk","capacity_bytes":$((DISK_CAP * rec > 128 << 20 ? DISK_CAP * rec : 128 << 20)),
         "segment_bytes":"64MiB"}}
JSON
cat > "$tmp/ext.json" <<JSON
{"role":"external","cluster_id":"dr","cluster_token":"tok","socket":"$tmp/run/o.sock","log_level":"warn"}
JSON
count() { local n; n=$(grep -c "$1" "$2" 2>/dev/null); echo "${n:-0}"; }
start_master() { # a restart on the same port retries while the dead master's port is still taken (bounded)
    for _ in $(seq 40); do
        local n0; n0=$(count "master listening" "$tmp/master.log")
        "$BIN" --role=master --config "$tmp/master.json" >> "$tmp/master.log" 2>&1 & mpid=$!; pids+=("$mpid")
        for _ in $(seq 100); do
            [ "$(count "master listening" "$tmp/master.log")" -gt "$n0" ] && return 0
            kill -0 "$mpid" 2>/dev/null || break
            sleep 0.05
        done
        sleep 0.25
    done
    echo "the master did not start: $tmp/master.log"; tail -5 "$tmp/master.log"; exit 1
}
republished() { count "re-published" "$tmp/owner.log"; }
start_owner() {
    "$BIN" --role=owner --config "$tmp/owner.json" >> "$tmp/owner.log" 2>&1 & opid=$!; pids+=("$opid")
    for _ in $(seq 600); do [ -S "$tmp/run/o.sock" ] && grep -q "registered with master" "$tmp/owner.log" && return 0; sleep 0.1; done
    echo "the owner did not start: $tmp/owner.log"; tail -5 "$tmp/owner.log"; exit 1
}
replay() { "$BIN" demo --workers 1 --requests "$REQUESTS" --config "$tmp/ext.json" --key-prefix dr > "$tmp/$1" 2>&1 || echo "  replay $1: exit $?"; }
hits() { awk '/prefix hits/ {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$tmp/$1"; }
rps() { awk '/^requests/ {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$tmp/$1"; }
stat() { "$BIN" --role=external --config "$tmp/ext.json" stats 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print(d.get('owner',d).get('$1','?'))"; }
echo "== disk cache across a kill -9 of the $KILL: DRAM $CAP values + disk $DISK_CAP values, disk under $parent, load $(cut -d' ' -f1-3 /proc/loadavg)"
start_master
sleep 0.3
start_owner
replay first
echo "first replay:  prefix hits $(hits first) %, $(rps first) req/s; moved to disk $(stat evict_to_disk), disk hits $(stat disk_hits)"
r0=$(republished)
if [ "$KILL" = master ]; then
    kill -9 "$mpid"; wait "$mpid" 2>/dev/null; start_master
else
    kill -9 "$opid"; wait "$opid" 2>/dev/null; rm -f "$tmp/run/o.sock"; start_owner
fi
for _ in $(seq 300); do [ "$(republished)" -gt "$r0" ] && break; sleep 0.1; done
[ "$(republished)" -gt "$r0" ] || echo "  the owner did not re-publish within 30 s: $tmp/owner.log"
grep -h "re-indexed\|re-published" "$tmp/owner.log" | tail -2 | sed 's/^/  owner log: /'
replay second
echo "second replay: prefix hits $(hits second) %, $(rps second) req/s; disk hits $(stat disk_hits), checksum failures $(stat disk_crc_failures)"
grep -h "checksum failures\|baseline" "$tmp/second" | sed 's/^/  second replay: /'
