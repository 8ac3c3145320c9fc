#!/usr/bin/env bash
# might vs PyTorch, side by side: bench/compare.sh [--quick] [--reps N] [--threads 1,2]
# Uses the venv in $BENCH_VENV (default bench/.venv), creating it with `pip install torch
# numpy` (CPU wheels) when torch is missing; builds `might` in release; runs bench/compare.py,
# which writes bench/results.json and bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${BENCH_VENV:-bench/.venv}"
if ! "$VENV/bin/python" -c "import torch, numpy" 2>/dev/null; then
    echo "creating $VENV with torch and numpy (CPU)..." >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    "$VENV/bin/pip" install --quiet torch numpy --index-url https://download.pytorch.org/whl/cpu \
        || "$VENV/bin/pip" install --quiet torch numpy
fi
cargo build --release -p might-cli >&2
exec "$VENV/bin/python" bench/compare.py --might "${CARGO_TARGET_DIR:-target}/release/might" --python "$VENV/bin/python" "$@"
