#!/usr/bin/env bash
# The one run to make on a lent many-core machine, where nothing is installed and only a
# few files come back: the whole many-core sweep (every design at 1-64 threads, then the
# FUSE phase over both transports), the lock statistics of locks-blocking, the FUSE
# before/after comparison, and one archive of it all, $OUT/results.tar.gz.
#
# Prepare here, in the repository's root (the folder travels with `carry`):
#   echo /.devbin/ >>.git/info/exclude; mkdir -p .devbin
#   cargo build --release -p scalevfs-cli && strip -o .devbin/scalevfs target/release/scalevfs
#   # optional, for the before/after: the server the FUSE work started from (b7fc21f),
#   # built and stripped the same way, and fusermount3, which that old server mounts with
#   strip -o .devbin/scalevfs-b7fc21f OLD_CHECKOUT/target/release/scalevfs
#   cp "$(command -v fusermount3)" .devbin/
# then run `scripts/lent-machine.sh` there with `.devbin` carried. Try it here first with
# tiny figures: THREADS=1,2 FUSE_THREADS=1 DUR=0.02 FBA_ROUNDS=1 OUT=/tmp/o scripts/lent-machine.sh
# On 16 cores it takes about 300 s (sweep 230 s, FUSE phase 45 s, lock statistics about
# 10 s, before/after 25 s) with the default 5 repeats (REPEATS=3: about 210 s). With 3 repeats of 0.15 s the 1-thread
# medians moved by up to 35% between runs on the lent machine, and every 1-to-N ratio
# with them.
# It turns the fuse module's `enable_uring` on for the FUSE runs and puts it back.
set -uo pipefail
cd "$(dirname "$0")/.."
out=/tmp/lent-machine
rm -rf "$out" && mkdir -p "$out"
bin=.devbin/scalevfs old=.devbin/scalevfs-b7fc21f
[ -x "$bin" ] || { echo "lent-machine: $bin missing (see the comment at the top)" >&2; exit 2; }
{ nproc; lscpu | head -20; uname -a; cat /sys/module/fuse/parameters/enable_uring; ls -l /dev/fuse; } \
    >"$out/lscpu.txt" 2>&1
BIN=$bin THREADS=${THREADS:-1,2,4,8,16,32,64} FUSE_THREADS=${FUSE_THREADS:-1,2,4,8,16,32} ENABLE_URING=1 \
    timeout "${BUDGET:-470}" scripts/many-core-sweep.sh --duration "${DUR:-0.15}" --repeats "${REPEATS:-5}" "$out" \
    >"$out/sweep.out" 2>&1
echo "sweep exit $?" >>"$out/sweep.out"
# Lock statistics of the one shared lock, with the wait steps of its waiters (the
# `flc wait:` events): which regime a 2-thread hand-off is in (docs/results.md, "The 2-core
# figures, latest").
timeout "${LOCKSTAT_BUDGET:-60}" "$bin" bench -w locks-blocking --threads "${LOCKSTAT_THREADS:-1,2,4,16}" \
    --duration "${DUR:-0.15}" --repeats 3 --lockstat --out "$out/lockstat" >"$out/lockstat.out" 2>&1
echo "lockstat exit $?" >>"$out/lockstat.out"
if [ -x "$old" ]; then
    # The FUSE/host ratio at one client of the old server against today's, alternating.
    PATH=$PWD/.devbin:$PATH OUT=$out/fba ENABLE_URING=1 timeout "${FBA_BUDGET:-150}" \
        scripts/fuse-before-after.sh --rounds "${FBA_ROUNDS:-3}" --repeats 5 --duration "${DUR:-0.15}" \
        "$old" "$bin" >"$out/fba.out" 2>&1
    echo "before-after exit $?" >>"$out/fba.out"
fi
mkdir -p "${OUT:-/tmp}" && tar czf "${OUT:-/tmp}/results.tar.gz" -C "$out" --exclude sweep.tar.gz .
cat "$out/machine.txt" "$out/sweep.out"
tail -1 "$out/lockstat.out"
[ -f "$out/fba.out" ] && tail -4 "$out/fba.out"
exit 0
