#!/usr/bin/env bash
# The many-core sweep: every design of the contended and the seed workloads at 1, 2, 4, 8,
# 16, 32 and 64 threads, the host kernel beside them, in one run on one machine, written to one
# archive. Made for a lent 16-core machine, where nothing is installed: build here
# (`cargo build --release -p scalevfs-cli`), copy the binary over, run this there.
#
#   scripts/many-core-sweep.sh [--baseline OLD_BINARY] [--duration S] [--repeats N] OUT_DIR
#
# BIN (default target/release/scalevfs) is the binary under test. With --baseline, an older
# scalevfs binary runs the same sweep right after, so one archive holds before and after
# (each binary runs the workloads it knows: an older one lacks the newer workloads).
# Writes OUT_DIR/sweep.tar.gz with new/report.md, new/results.json (and old/...) and
# machine.txt (CPU model, core count, kernel). Takes about 20 s per workload and binary
# with the defaults (3 designs x 7 thread counts x 3 repeats x 0.25 s, plus setup).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-target/release/scalevfs}
baseline="" duration=0.25 repeats=3
while [ $# -gt 1 ]; do
    case $1 in
        --baseline) baseline=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --repeats) repeats=$2; shift 2 ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || { echo "usage: scripts/many-core-sweep.sh [--baseline OLD] [--duration S] [--repeats N] OUT_DIR" >&2; exit 2; }
out=$1
[ -x "$bin" ] || { echo "many-core-sweep: $bin is not an executable (set BIN)" >&2; exit 2; }
mkdir -p "$out"
workloads=${WORKLOADS:-locks-same,locks-blocking,locks-distinct,epoll-churn-shared,epoll-churn,dcache-distinct,dcache-distinct-anyfd,dcache,dcache-distinct-procs,kernfs-showgids-vfs,inode-churn}
threads=${THREADS:-1,2,4,8,16,32,64}
{
    echo "date: $(date -u +%FT%TZ)"
    echo "cpus: $(nproc)"
    grep -m1 'model name' /proc/cpuinfo
    uname -sr
    echo "binary: $bin ($("$bin" --version))"
    [ -n "$baseline" ] && echo "baseline: $baseline ($("$baseline" --version))"
    echo "workloads: $workloads"
    echo "threads: $threads, duration $duration s, repeats $repeats"
} >"$out/machine.txt"
run() { # NAME BINARY
    local t0=$SECONDS known mine
    known=$("$2" bench --list | awk '{print $1}')
    mine=$(tr , '\n' <<<"$workloads" | grep -Fx -f <(echo "$known") | paste -sd,)
    "$2" bench -w "$mine" --threads "$threads" --duration "$duration" \
        --repeats "$repeats" --out "$out/$1" >"$out/$1.log" 2>&1
    echo "$1: exit $?, $((SECONDS - t0)) s" >>"$out/machine.txt"
}
run new "$bin"
[ -n "$baseline" ] && run old "$baseline"
tar czf "$out/sweep.tar.gz" -C "$out" --exclude sweep.tar.gz .
cat "$out/machine.txt"
