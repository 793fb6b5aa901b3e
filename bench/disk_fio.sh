#!/usr/bin/env bash
# bench/disk_fio.sh [DIR [QD]] — the disk tier store's read figures (build/bench_internal disk)
# next to fio's on the same directory with the same block sizes and queue depth: io_uring,
# O_DIRECT, random reads of 4.5 MiB (a 288 MiB file: 64 values) and of 16 KiB (a 16 MiB
# file: 1,024 values), one job, 5 s each. Issue 39's goal: the store >= 0.7x fio.
# Needs fio (scripts/setup installs it) and `make build/bench_internal`; `make bench` runs it.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-build}
QD=${2:-32}
INT=${FLUXON_BENCH_INTERNAL:-build/bench_internal}
[ -x "$INT" ] || { echo "disk_fio: $INT missing (make build/bench_internal)"; exit 2; }
mkdir -p "$DIR"
echo "== fluxon disk store, $DIR, QD $QD"
"$INT" disk "$DIR" "$QD" 2>/dev/null | grep '^disk read' || echo "disk_fio: the store's bench failed"
command -v fio >/dev/null || { echo "== fio: not installed (apt-get install fio): no peer figures"; exit 0; }
tmp=$(mktemp -d "$DIR/fluxon-fio-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
run_fio() { # label bs size
    fio --name="$1" --directory="$tmp" --filename=fio.dat --ioengine=io_uring --direct=1 --rw=randread \
        --bs="$2" --size="$3" --iodepth="$QD" --numjobs=1 --time_based --runtime=5 --ramp_time=1 \
        --group_reporting --output-format=terse --terse-version=3 2>/dev/null |
        awk -F';' -v l="$1" '{ printf "fio       %-26s: %7.3f GB/s %7.3f GiB/s %9.0f IOPS\n", l, $7 * 1024 / 1e9, $7 / 1048576, $8 }'
    rm -f "$tmp/fio.dat"
}
echo "== fio io_uring O_DIRECT randread, same dir, QD $QD"
run_fio "64 x 4608.0 KiB QD $QD" 4608k 288m
run_fio "1024 x 16.0 KiB QD $QD" 16k 16m
