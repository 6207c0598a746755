#!/usr/bin/env bash
# Builds the scalevfs Python package (python/: maturin + PyO3, an abi3 wheel), installs it
# in a fresh virtual environment under target/ and runs its pytest suite. Needs python3
# with venv and pip (installs python3-venv when root on Debian/Ubuntu) and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

PY=${PYTHON:-python3}
VENV=target/python-venv

step "python3 with venv and pip"
if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-pip >/dev/null
    else
        echo "error: $PY lacks venv/ensurepip (apt-get install python3-venv)" >&2
        exit 1
    fi
fi
"$PY" --version

step "virtual environment $VENV (maturin, pytest from PyPI)"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q 'maturin>=1.5,<2' pytest

step "maturin build --release (the abi3 wheel)"
rm -rf target/wheels/scalevfs-*.whl
# From python/, whose pyproject.toml names the crate (tool.maturin.manifest-path).
(cd python && "../$VENV/bin/maturin" build --release --out ../target/wheels)
WHEEL=$(ls target/wheels/scalevfs-*.whl)
echo "$WHEEL"

step "pip install the wheel"
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$WHEEL"

step "pytest (from outside python/, so the installed package is what is tested)"
cd target
"../$VENV/bin/python" -m pytest -q -p no:cacheprovider ../python/tests
