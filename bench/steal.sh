# bench/steal.sh — sourced by the replay benchmarks (tiers.sh, tiers_pairs.sh): steal, the share
# of the VM's CPU time the hypervisor gave to other guests while a run ran (/proc/stat). A run
# with 10-20 % of it lost a third to a half of its requests/s on the 2-vCPU VM (session 57).
# shellcheck shell=bash
cpu_ticks() { head -1 /proc/stat; } # "cpu user nice system idle iowait irq softirq steal ..."
steal_share() { # two cpu_ticks lines -> the steal share of the time between them (0..1)
    awk -v a="$1" -v b="$2" 'BEGIN {split(a, x, " "); split(b, y, " "); t = 0
        for (i = 2; i <= 9; i++) t += y[i] - x[i]
        printf "%.4f\n", (t > 0 ? (y[9] - x[9]) / t : 0)}'
}
