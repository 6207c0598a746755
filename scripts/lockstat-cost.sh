#!/usr/bin/env bash
# Instructions per uncontended spin lock/unlock, with and without lockstat, counted by
# callgrind (repeatable, unlike time on a shared 2-core VM). The fixed start-up cost is
# removed by running each variant at two iteration counts and taking the difference.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "lockstat-cost: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
cargo build -q --release -p scalevfs-primitives --example lockstat_cost
bin=target/release/examples/lockstat_cost
count() { # variant iterations -> total instructions
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" >/dev/null 2>&1
    callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'
    rm -f "$out"
}
lo=100000 hi=1100000
printf '%-10s %s\n' variant instr/op
for v in raw unclassed off on; do
    a=$(count "$v" $lo) b=$(count "$v" $hi)
    awk -v a="$a" -v b="$b" -v v="$v" -v n=$((hi - lo)) 'BEGIN { printf "%-10s %.2f\n", v, (b - a) / n }'
done
