#!/usr/bin/env bash
# Runs every check and test scalevfs has, on a fresh machine (installs what it needs).
#   fmt --check, clippy -D warnings, rustdoc -D warnings, unit/integration/stress tests
#   (the C API's C test program among them), loom models, the Python package's tests.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

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

step "scalability check: the cases listed conflict-free must stay so (valgrind, a few minutes)"
cargo run --release -q -p scalevfs-cli -- commute --check crates/commute/conflict-free.txt \
    --out target/commute

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

step "all checks passed"
