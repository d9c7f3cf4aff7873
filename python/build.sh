#!/usr/bin/env bash
# Builds the `tributary` wheel (abi3, CPython >= 3.10) and runs the Python
# tests in a fresh virtual environment, as issue 40's acceptance asks:
#
#   bash python/build.sh            # debug build (what CI runs)
#   PROFILE=release bash python/build.sh
#
# Cargo's target folder is the workspace's target/ and the wheel lands in
# target/wheels/. A debug build turns on the package's `workspace-build`
# feature, which builds every dependency with the features of a
# whole-workspace build (`hack/`): after `cargo test --workspace` only the
# package itself and pyo3's crates are compiled.
# Environment: PYTHON (default python3), VENV (default: a new temporary
# folder, removed afterwards), PIP_ARGS (extra pip options).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
python="${PYTHON:-python3}"
wheels="$CARGO_TARGET_DIR/wheels"

venv="${VENV:-}"
if [[ -z "$venv" ]]; then
    venv="$(mktemp -d)/venv"
    trap 'rm -rf "$(dirname "$venv")"' EXIT
fi
"$python" -m venv "$venv"
# shellcheck disable=SC2086
"$venv/bin/pip" install --quiet ${PIP_ARGS:-} "maturin>=1.9,<2" pyarrow pytest pandas polars "datafusion>=55,<56" "hudi==0.5.0"

started=$(date +%s)
rm -f "$wheels"/tributary-*.whl
profile=(--features workspace-build)
[[ "${PROFILE:-debug}" == release ]] && profile=(--release)
(cd "$here" && "$venv/bin/maturin" build "${profile[@]}" --out "$wheels")
echo "wheel built in $(( $(date +%s) - started )) s"

"$venv/bin/pip" install --quiet "$wheels"/tributary-*.whl
# From outside the source folder, so the installed package is tested.
cd "$(mktemp -d)"
"$venv/bin/python" -m pytest -q "$here/tests"
