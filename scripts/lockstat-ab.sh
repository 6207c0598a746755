#!/usr/bin/env bash
# Timed A/B of lockstat's switched-off cost: the single-thread `one_thread` runner built with
# lockstat compiled in (switched off, as by default) and compiled out, run alternately 7
# times; prints each build's CPU time (user + sys) per operation and the medians.
#
#   scripts/lockstat-ab.sh [WORKLOAD [CALLS]]     default: hashed-distinct 1500000
#
# CPU time, not wall time: on a shared VM a preempted run loses wall time, not CPU time.
set -euo pipefail
cd "$(dirname "$0")/.."
w=${1:-hashed-distinct} calls=${2:-1500000}
cargo build -q --release -p scalevfs-bench --example one_thread
CARGO_TARGET_DIR=target/no-lockstat cargo build -q --release -p scalevfs-bench --no-default-features --example one_thread
bins=(target/release/examples/one_thread target/no-lockstat/release/examples/one_thread)
names=("compiled in, off" "compiled out")
declare -a runs=("" "")
for _ in 1 2 3 4 5 6 7; do
    for i in 0 1; do
        out=$( { /usr/bin/time -f "%U %S" "${bins[$i]}" "$w" scalable "$calls"; } 2>&1 )
        ops=$(head -1 <<<"$out") cpu=$(tail -1 <<<"$out")
        runs[i]+="$(awk -v o="$ops" -v c="$cpu" 'BEGIN { split(c, t, " "); printf "%.3f", (t[1] + t[2]) * 1e9 / o }') "
    done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | sed -n 4p; }
for i in 0 1; do
    printf '%-18s ns/op: %s median %s\n' "${names[$i]}" "${runs[$i]}" "$(median "${runs[$i]}")"
done
awk -v a="$(median "${runs[0]}")" -v b="$(median "${runs[1]}")" 'BEGIN { printf "lockstat-off cost: %+.1f%%\n", (a - b) / b * 100 }'
