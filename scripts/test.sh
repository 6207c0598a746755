#!/usr/bin/env bash
# Runs every check and test scalevfs has, on a fresh machine (installs what it needs).
#   fmt --check, clippy -D warnings, rustdoc -D warnings, unit/integration/stress tests
#   (the C API's C test program among them), the scalability check, loom models, the
#   Python package's tests, a packaging dry run, Miri (undefined behaviour), and
#   ThreadSanitizer (data races) in a build with debug assertions and overflow checks on.
# Each step line says how long the step before it took, in wall-clock time and in CPU time
# (user + system of the processes that ended during it: a background Miri lane counts in
# the step during which it ends).
set -euo pipefail
cd "$(dirname "$0")/.."

cpu_centis() { # CPU time of this shell's waited-for children, in hundredths of a second
    local stat
    stat=$(cat /proc/$$/stat)
    set -- ${stat##*) } # the fields after the command name; cutime and cstime are 14 and 15
    echo $(((${14} + ${15}) * 100 / $(getconf CLK_TCK)))
}
step_start=$SECONDS
step_cpu=$(cpu_centis)
step() { # prints the step, and how long the one before it took
    local cpu
    cpu=$(cpu_centis)
    printf '\n==> %s   (previous step: %ss, %s CPU-s; total %ss, %s CPU-s)\n' "$*" \
        $((SECONDS - step_start)) $(((cpu - step_cpu) / 100)) "$SECONDS" $((cpu / 100))
    step_start=$SECONDS
    step_cpu=$cpu
}

step "rustfmt and clippy components"
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "system packages the tests need"
# fusermount3 (Debian's fuse3) mounts the FUSE test file systems; the FUSE tests need root
# and /dev/fuse too, and say so when they skip.
if ! command -v fusermount3 >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null) \
            || echo "warning: could not install fuse3; the FUSE mount tests will skip"
    else
        echo "warning: fusermount3 missing and cannot install it (need root and apt); FUSE mount tests will skip"
    fi
fi

# valgrind (lackey) traces the memory accesses of `scalevfs commute`, the scalability check.
if ! command -v valgrind >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null) \
            || echo "warning: could not install valgrind; the scalability check will fail"
    else
        echo "warning: valgrind missing and cannot install it (need root and apt); the scalability check will fail"
    fi
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo doc -D warnings (the module docs are the design documentation: no broken links)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q

step "tests (release mode: the stress tests are many-threaded)"
cargo test --workspace --release

step "Miri, started in the background (its reports come after the last step)"
# Miri interprets a test binary on one core, about 7 minutes in all here, so its runs go
# side by side, in three lanes, with the steps below, which mostly build and leave a core
# idle at times; its logs are printed and its exit codes checked at the end. (Tests in the
# steps below must pass on a loaded machine anyway: CI has 2 cores, and the stress tests
# run 16 threads.) The lanes' cargo invocations share one target
# directory: cargo holds its lock while building, not while running tests, so the builds
# queue and the runs overlap.
# Nightly only; the component pair is what `cargo miri` needs (rust-src builds its sysroot).
rustup component add miri rust-src --toolchain nightly >/dev/null 2>&1 \
    || rustup component add miri rust-src --toolchain nightly
mkdir -p target/miri-logs
miri_lanes=()
miri_pids=()
miri_lane() { # NAME MIRIFLAGS ARGS...: `cargo miri test -q ARGS` in the background
    local name=$1 flags=$2
    shift 2
    (
        t0=$SECONDS
        rc=0
        MIRIFLAGS="$flags" CARGO_TARGET_DIR=target/miri cargo +nightly miri test -q "$@" \
            >"target/miri-logs/$name.log" 2>&1 || rc=$?
        echo "(Miri lane $name: exit status $rc after $((SECONDS - t0)) s)" >>"target/miri-logs/$name.log"
        exit $rc
    ) &
    miri_lanes+=("$name")
    miri_pids+=($!)
}
# A failing step ends the script; the lanes, and the cargo and Miri processes under them,
# must not outlive it.
kill_tree() { # PID: the process and its descendants, children first
    local child
    for child in $(pgrep -P "$1" || true); do
        kill_tree "$child"
    done
    kill "$1" 2>/dev/null || true
}
trap 'for pid in "${miri_pids[@]}"; do kill_tree "$pid"; done' EXIT
# Every run: -Zmiri-permissive-provenance, because parking_lot_core and our mount table keep
# pointers as integers (exposed provenance), which Miri supports but warns about at every
# first use.
# primitives: Stacked Borrows, the default and stricter model, with Miri's isolation and
# leak check on. `--skip percpu::`: the `cpu::` filter matches the per-CPU counter too.
miri_lane primitives "-Zmiri-permissive-provenance" -p scalevfs-primitives --lib -- \
    cpu:: dlist:: epoch:: hashed:: lockref:: percpu_count:: percpu_ref:: seqlock:: --skip percpu::
# vfs and scalevfs:
#  -Zmiri-tree-borrows: a dentry's pointer to its dcache fails a Stacked Borrows retag
#    when `VfsCore`'s drop takes `&mut self` (the dcache is a field of it); Tree Borrows
#    accepts it.
#  -Zmiri-ignore-leaks: the epoch's global registry is a static that still holds per-thread
#    records and bags not yet expired at exit, by design. (Our tests count their frees.)
#  -Zmiri-disable-isolation: inodes are stamped with the realtime clock, which isolation
#    hides.
MIRI_EPOCH="-Zmiri-permissive-provenance -Zmiri-tree-borrows -Zmiri-ignore-leaks -Zmiri-disable-isolation"
miri_lane vfs "$MIRI_EPOCH" -p scalevfs-vfs --lib -- erc:: retire:: rcuhash:: dentry:: \
    core::mount_tests:: epoll::tests::teardown_orders_free_everything
# fdtable: its unit and stress tests, and the two of tests/stress.rs that race its
# install/close/dup2 paths.
miri_lane fdtable "$MIRI_EPOCH" -p scalevfs --lib --test stress -- \
    fdtable:: fd_table_concurrent dup2_against_open_and_close

step "scalability check: the cases listed conflict-free must stay so (valgrind, a few minutes)"
# The `scalevfs` binary the tests step built (the CLI's tests run it). `cargo run -p
# scalevfs-cli` would build the whole tree again: a workspace build turns on
# scalevfs-primitives' default feature list (the same code: lockstat), and a different
# feature list is a different artifact to cargo.
target/release/scalevfs commute --check crates/commute/conflict-free.txt --out target/commute

step "loom models (--cfg loom, bounded preemptions)"
LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-2} RUSTFLAGS="--cfg loom" \
    CARGO_TARGET_DIR=target/loom cargo test -p scalevfs-primitives --release --lib -- loom

# The C API's test program (crates/capi/tests/c/test_capi.c) is compiled with cc and run
# by the `cargo test --workspace` step above (crates/capi/tests/capi.rs); it needs a C
# compiler, which rustc's linker already requires.

step "Python package: build the abi3 wheel with maturin, pip install it in a venv, pytest"
./scripts/python-test.sh

step "cargo package: every publishable library crate packages (a dry run: no verify build)"
cargo package --no-verify -q -p scalevfs-primitives -p scalevfs-vfs -p scalevfs-tmpfs \
    -p scalevfs-kernfs -p scalevfs -p scalevfs-fuse -p scalevfs-capi

step "ThreadSanitizer, with debug assertions and overflow checks on: data races and broken invariants"
# One instrumented build serves both checks (std is rebuilt for TSan anyway, and a second
# release build with debug assertions alone cost as much again). Built: every crate with
# unsafe concurrency code (primitives, vfs, tmpfs, kernfs, scalevfs), release mode (TSan
# slows the tests about 10x). Run: their unit tests, the many-threaded integration tests,
# and the argument-edge tests (extreme_args, syscalls, xattr), where overflow checks bite.
# Not run with debug assertions: the other integration tests (each of these crates'
# assertions is reached by the unit tests here), and the FUSE and C API crates, whose
# three assertions (an inode number's width, a directory buffer's sizing, a free handle
# slot's state) no CI run checks.
# A TSan report fails the run (TSan's exit code 66). No suppressions are needed today; a
# false positive from a standalone fence (which TSan does not model) would go in
# scripts/tsan.supp, via TSAN_OPTIONS=suppressions=..., with a comment saying why.
# --skip shuttle: shuttle switches stacks under its own scheduler, which TSan cannot follow.
RUSTFLAGS="-Zsanitizer=thread" CARGO_TARGET_DIR=target/tsan \
    CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
    cargo +nightly test -q -Zbuild-std --target x86_64-unknown-linux-gnu --release \
    -p scalevfs-primitives -p scalevfs-vfs -p scalevfs-tmpfs -p scalevfs-kernfs -p scalevfs \
    --lib --test stress --test concurrency --test nodes --test locks --test umount \
    --test epoll_process --test copy_file_range --test openat2 --test remount \
    --test extreme_args --test syscalls --test xattr -- --skip shuttle

step "Miri: the background lanes' reports"
miri_failed=()
for i in "${!miri_pids[@]}"; do
    if ! wait "${miri_pids[$i]}"; then
        miri_failed+=("${miri_lanes[$i]}")
    fi
    printf -- '--- Miri lane %s ---\n' "${miri_lanes[$i]}"
    cat "target/miri-logs/${miri_lanes[$i]}.log"
done
if [ ${#miri_failed[@]} -gt 0 ]; then
    echo "Miri failed in: ${miri_failed[*]} (logs above)" >&2
    exit 1
fi

step "all checks passed"
