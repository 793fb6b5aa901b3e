#!/usr/bin/env bash
# bench/tiers_netns.sh — issue 38: the trace replay with a CPU owner on another "host", over
# UCX's TCP transport between network namespaces, next to the same replay without it.
# Hosts (each its own namespace on a bridge the script creates, 10.78.0.0/24): the master,
# the GPU owner (hot tier of CAP values of 4 KiB; the demo's worker runs here) and, in the
# second run, a CPU (remote_cache) owner of CPU_CAP values; the GPU owner writes back with
# its defaults (writeback_watermark 0.95, second_touch admission, lru). Each run: RUNS
# replays of REQUESTS requests, 1 worker; the median requests/s and prefix hits are printed.
# Needs root and `ip netns`; deletes every namespace and process it made. Figures, not
# pass/fail. Usage: bench/tiers_netns.sh  (env: REQUESTS [12031: the whole trace], RUNS [3],
# CAP [10000], CPU_CAP [10000], FLUXON_BIN [./fluxon])
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(readlink -f "${FLUXON_BIN:-./fluxon}")
REQUESTS=${REQUESTS:-0} RUNS=${RUNS:-3} CAP=${CAP:-10000} CPU_CAP=${CPU_CAP:-10000}
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "tiers_netns: needs root and ip netns; skipped"
    exit 0
fi
tmp=$(mktemp -d /tmp/fluxon-tiers-XXXXXX)
ns="fxt$$"
hosts=(m g c)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    for h in "${hosts[@]}"; do ip netns del "$ns-$h" 2>/dev/null; done
    ip netns del "$ns-sw" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$ns-sw" && ip -n "$ns-sw" link add br0 type bridge && ip -n "$ns-sw" link set br0 up || exit 1
i=1
for h in "${hosts[@]}"; do
    ip netns add "$ns-$h" &&
        ip -n "$ns-sw" link add "h$i" type veth peer name fx0 netns "$ns-$h" &&
        ip -n "$ns-sw" link set "h$i" master br0 && ip -n "$ns-sw" link set "h$i" up &&
        ip -n "$ns-$h" addr add "10.78.0.$i/24" dev fx0 && ip -n "$ns-$h" link set fx0 up &&
        ip -n "$ns-$h" link set lo up || exit 1
    i=$((i + 1))
done
seg=$(( (CAP * 4096 * 12 / 10 / 1048576 + 64) ))MiB
cseg=$(( (CPU_CAP * 4096 * 12 / 10 / 1048576 + 64) ))MiB
cat > "$tmp/m.json" <<J
{"role":"master","cluster_id":"tn","listen":"10.78.0.1:7711","log_level":"warn"}
J
cat > "$tmp/c.json" <<J
{"role":"owner","cluster_id":"tn","node_id":"c","master":"10.78.0.1:7711","socket":"$tmp/c.sock",
 "segment_bytes":"$seg","node_role":"remote_cache","hot_capacity_bytes":$((CPU_CAP * 4096)),"log_level":"warn"}
J
cat > "$tmp/e.json" <<J
{"role":"external","cluster_id":"tn","socket":"$tmp/g.sock","timeout_ms":30000,"log_level":"warn"}
J
start() { # host role config
    UCX_TLS=tcp UCX_NET_DEVICES=fx0 ip netns exec "$ns-$1" "$BIN" --role="$2" --config "$3" 2>>"$tmp/$1.log" &
    pids+=($!)
}
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; pids=(); rm -f "$tmp"/*.sock; }
med() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }
run() { # label, with_cpu (0/1)
    local wb=""
    [ "$2" = 1 ] && wb=',"writeback_watermark":0.95'
    cat > "$tmp/g.json" <<J
{"role":"owner","cluster_id":"tn","node_id":"g","master":"10.78.0.1:7711","socket":"$tmp/g.sock",
 "segment_bytes":"$seg","hot_capacity_bytes":$((CAP * 4096)),"log_level":"warn"$wb}
J
    local rps=() hits=() cpu=()
    for r in $(seq "$RUNS"); do
        start m master "$tmp/m.json"
        sleep 0.3
        start g owner "$tmp/g.json"
        [ "$2" = 1 ] && start c owner "$tmp/c.json"
        for _ in $(seq 100); do [ -S "$tmp/g.sock" ] && break; sleep 0.1; done
        sleep 1 # the owners register
        ip netns exec "$ns-g" timeout 600 "$BIN" demo --config "$tmp/e.json" --workers 1 --requests "$REQUESTS" \
            --key-prefix "r$r" > "$tmp/out.txt" 2>&1
        rps+=("$(awk '/^requests/ {for (i = 1; i <= NF; i++) if ($i == "=") print $(i + 1)}' "$tmp/out.txt")")
        hits+=("$(awk '/prefix hits/ {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i + 1); exit}}' "$tmp/out.txt")")
        cpu+=("$(awk '/^cpu/ {for (i = 1; i <= NF; i++) if ($i == "=") print $(i + 1)}' "$tmp/out.txt")")
        grep -qE "checksum failures +0" "$tmp/out.txt" || echo "  run $r: checksum failures or errors: $(grep -E 'checksum|errors' "$tmp/out.txt" | tr '\n' ' ')"
        stop_all
    done
    printf '%-34s requests/s %8s (runs: %s)  prefix hits %s %%  demo-process CPU %s us/request\n' "$1" \
        "$(printf '%s\n' "${rps[@]}" | med)" "${rps[*]}" "$(printf '%s\n' "${hits[@]}" | med)" \
        "$(printf '%s\n' "${cpu[@]}" | med)"
}
echo "tiers over TCP between namespaces: GPU owner $CAP x 4 KiB, CPU owner $CPU_CAP x 4 KiB, 1 worker," \
    "requests ${REQUESTS/#0/all}, load $(cut -d' ' -f1-3 /proc/loadavg)"
run "GPU owner alone" 0
run "+ CPU owner on another host" 1
