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
# with the defaults (3 designs x 7 thread counts x 3 repeats x 0.25 s, plus setup). The
# rounds of every design and thread count of a workload are interleaved
# (`--interleave-threads`, where the binary has it).
#
# Then the FUSE phase (skipped with FUSE_WORKLOADS=""): the fuse-* workloads (client
# processes by default) at FUSE_THREADS client threads, /dev/fuse ("legacy") and io_uring
# ("scalable") side by side against host tmpfs, into OUT_DIR/fuse/. The server runs
# FUSE_SERVER_THREADS workers (default: one per CPU). FUSE over io_uring needs the fuse
# module's `enable_uring` switch: the script turns it on for this phase only if it may
# (ENABLE_URING=1, meant for a lent machine) and puts the old value back afterwards;
# otherwise the io_uring rows say why they were skipped.
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
workloads=${WORKLOADS:-locks-same,locks-blocking,locks-distinct,epoll-churn-shared,epoll-churn,dcache-distinct,dcache-distinct-anyfd,dcache,dcache-distinct-procs,kernfs-showgids-vfs,inode-churn,dir-create-same,dir-rename-same}
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
    local t0=$SECONDS known mine interleave=()
    known=$("$2" bench --list | awk '{print $1}')
    mine=$(tr , '\n' <<<"$workloads" | grep -Fx -f <(echo "$known") | paste -sd,)
    # Thread counts interleaved round by round where the binary can (an older one cannot),
    # so that a slow spell cannot pass for a collapse at one thread count.
    [[ $("$2" bench --help) == *--interleave-threads* ]] && interleave=(--interleave-threads)
    "$2" bench -w "$mine" --threads "$threads" --duration "$duration" \
        --repeats "$repeats" "${interleave[@]}" --out "$out/$1" >"$out/$1.log" 2>&1
    echo "$1: exit $?, $((SECONDS - t0)) s" >>"$out/machine.txt"
}
run new "$bin"
[ -n "$baseline" ] && run old "$baseline"

fuse_workloads=${FUSE_WORKLOADS-fuse-proc-open-close,fuse-proc-locks,fuse-proc-stat}
if [ -n "$fuse_workloads" ]; then
    t0=$SECONDS switch=/sys/module/fuse/parameters/enable_uring old_switch=""
    if [ "${ENABLE_URING:-0}" = 1 ] && [ -w "$switch" ]; then
        old_switch=$(cat "$switch")
        echo Y >"$switch"
    fi
    echo "fuse: enable_uring $( [ -r "$switch" ] && cat "$switch" || echo absent), /dev/fuse $( [ -c /dev/fuse ] && echo present || echo absent)" >>"$out/machine.txt"
    SCALEVFS_BENCH_FUSE_TRANSPORT=both \
        SCALEVFS_BENCH_FUSE_THREADS=${FUSE_SERVER_THREADS:-$(nproc)} \
        "$bin" bench -w "$fuse_workloads" --threads "${FUSE_THREADS:-1,2,4,8,16,32}" \
        --duration "$duration" --repeats "$repeats" --out "$out/fuse" >"$out/fuse.log" 2>&1
    echo "fuse: exit $?, $((SECONDS - t0)) s" >>"$out/machine.txt"
    [ -n "$old_switch" ] && echo "$old_switch" >"$switch"
fi
tar czf "$out.tar.gz" -C "$out" --exclude sweep.tar.gz . && mv "$out.tar.gz" "$out/sweep.tar.gz"
cat "$out/machine.txt"
