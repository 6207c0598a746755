#!/usr/bin/env bash
# The FUSE overhead of two scalevfs binaries, compared under the same conditions: each
# binary's `fuse-open-close` and `fuse-locks` at one client thread against host tmpfs in
# its own run (the FUSE/host ratio), the two binaries alternating round by round (old
# first in odd rounds, new first in even ones), so that a quiet or a loaded stretch of a
# shared VM falls on both alike. Prints each run's ratios, the medians, and new/old.
#
#   scripts/fuse-before-after.sh [--rounds R] [--repeats N] [--duration S] [--load] OLD NEW
#
# OLD and NEW are `scalevfs` binaries (an older one may predate the transports: it runs
# with its own default). NEW runs with SCALEVFS_BENCH_FUSE_TRANSPORT=both, so its report
# also has the `/dev/fuse` transport ("legacy") beside io_uring ("scalable"). Needs root
# and /dev/fuse. io_uring needs the fuse module's `enable_uring` switch: with
# ENABLE_URING=1 the script turns it on for the runs and puts the old value back on exit;
# otherwise NEW's "scalable" is whatever `auto` picks. --load runs one busy loop per CPU
# beside the benchmarks (a machine shared with other work). Reports go to
# ${OUT:-/tmp/fuse-before-after}/{old,new}ROUND/. Defaults: 4 rounds of 7 repeats of
# 0.3 s: about 4 minutes.
set -euo pipefail
rounds=4 repeats=7 duration=0.3 load=0
while [ $# -gt 2 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --repeats) repeats=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --load) load=1; shift ;;
        *) break ;;
    esac
done
usage="usage: scripts/fuse-before-after.sh [--rounds R] [--repeats N] [--duration S] [--load] OLD NEW"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
old=$1 new=$2
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "fuse-before-after: $b is not an executable" >&2; exit 2; }
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "fuse-before-after: --rounds needs a positive integer" >&2; exit 2; }
out=${OUT:-/tmp/fuse-before-after}
rm -rf "$out" && mkdir -p "$out"

switch=/sys/module/fuse/parameters/enable_uring
was="" pids=()
cleanup() {
    [ -z "$was" ] || echo "$was" >"$switch"
    [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
}
trap cleanup EXIT
if [ "${ENABLE_URING:-0}" = 1 ] && [ -w "$switch" ]; then
    was=$(cat "$switch")
    echo Y >"$switch"
fi
if [ "$load" = 1 ]; then
    for _ in $(seq "$(nproc)"); do
        sh -c 'while :; do :; done' &
        pids+=($!)
    done
fi

run() { # BINARY DIR
    local env=()
    [ "$1" = "$new" ] && env=(SCALEVFS_BENCH_FUSE_TRANSPORT=both)
    env "${env[@]}" "$1" bench -w fuse-open-close,fuse-locks --threads 1 \
        --repeats "$repeats" --duration "$duration" --out "$2" >"$2.log" 2>&1 \
        || { echo "fuse-before-after: $1 failed; see $2.log" >&2; exit 1; }
}
for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
    for side in $order; do
        if [ "$side" = old ]; then run "$old" "$out/old$r"; else run "$new" "$out/new$r"; fi
    done
done

python3 - "$out" <<'PY'
import glob, json, statistics as st, sys
ratios = {}
for d in sorted(glob.glob(sys.argv[1] + "/*/")):
    side = d.rstrip("/").split("/")[-1]
    res = {(x["workload"], x["design"]): x["ops_per_sec"]
           for x in json.load(open(d + "results.json"))["results"]}
    for w in ("fuse-open-close", "fuse-locks"):
        host, fuse = res[(w, "host")], res[(w, "scalable")]
        dev = res.get((w, "legacy"))
        extra = f"  /dev/fuse {dev / 1e3:7.1f}k ({dev / host:.3f}x)" if dev else ""
        print(f"{side:6} {w:16} FUSE {fuse / 1e3:7.1f}k  host {host / 1e3:7.1f}k"
              f"  FUSE/host {fuse / host:.3f}x{extra}")
        ratios.setdefault((side.rstrip("0123456789"), w), []).append(fuse / host)
for w in ("fuse-open-close", "fuse-locks"):
    o, n = st.median(ratios[("old", w)]), st.median(ratios[("new", w)])
    print(f"{w}: median FUSE/host old {o:.3f}x, new {n:.3f}x: new/old {n / o:.2f}x")
PY
