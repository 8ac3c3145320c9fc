#!/usr/bin/env bash
# might vs onnxruntime on real exported models (resnet18, mobilenet_v3_small, a small BERT, a
# small GPT-2): parity and speed. Needs python3 with torch, torchvision, transformers,
# onnxruntime (PYTHON=... to pick another interpreter). Writes bench/ONNX_RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-target/onnx-models}
if [ ! -f "$OUT/gpt2_small.onnx" ]; then
    "$PYTHON" bench/onnx/export.py "$OUT"
fi
cargo build --release -p might-cli --features onnx
"$PYTHON" bench/onnx/compare.py "$OUT" target/release/might
