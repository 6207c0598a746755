#!/usr/bin/env bash
# Single-thread instructions per operation of benchmark workloads, counted by callgrind
# (repeatable on a noisy VM, unlike time), for each design and with lockstat compiled in
# (switched off, as by default) and compiled out.
#
#   scripts/callgrind.sh [WORKLOAD...]      default: the primitives' workloads
#
# Each figure is (I(hi) - I(lo)) / (ops(hi) - ops(lo)): the difference of two runs removes
# setup and process start-up. Host designs are skipped: callgrind cannot see kernel work.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(lockref-shared lockref-private seqlock-read seqlock-shared-read hashed-distinct dlist-add-del)
cargo build -q --release -p scalevfs-bench --example one_thread
CARGO_TARGET_DIR=target/no-lockstat cargo build -q --release -p scalevfs-bench --no-default-features --example one_thread
with=target/release/examples/one_thread
without=target/no-lockstat/release/examples/one_thread
LO=${CALLGRIND_LO:-200} HI=${CALLGRIND_HI:-2200}

measure() { # binary workload design calls -> "instructions ops"
    local out ops
    out=$(mktemp)
    ops=$(valgrind --tool=callgrind --callgrind-out-file="$out" "$1" "$2" "$3" "$4" 2>/dev/null)
    echo "$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}') $ops"
    rm -f "$out"
}
per_op() { # binary workload design -> instructions per operation
    local a b
    a=$(measure "$1" "$2" "$3" "$LO") b=$(measure "$1" "$2" "$3" "$HI")
    awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.1f", (y[1] - x[1]) / (y[2] - x[2]) }'
}
printf '| workload | legacy instr/op | scalable instr/op | scalable/legacy | scalable, lockstat compiled out | lockstat-off cost |\n'
printf '|---|--:|--:|--:|--:|--:|\n'
for w in "${workloads[@]}"; do
    l=$(per_op "$with" "$w" legacy) s=$(per_op "$with" "$w" scalable) s0=$(per_op "$without" "$w" scalable)
    awk -v w="$w" -v l="$l" -v s="$s" -v s0="$s0" 'BEGIN {
        printf "| %s | %s | %s | %.3f | %s | %+.1f%% |\n", w, l, s, s / l, s0, (s - s0) / s0 * 100 }'
done
