#!/usr/bin/env bash
# Build the browser demo into web/dist: might-web compiled to wasm32 (CPU kernels with simd128,
# and might's wgpu backend for WebGPU), bound with wasm-bindgen, plus the page and the models
# of web/models. Then serve it, e.g.: python3 -m http.server -d web/dist 8000
set -euo pipefail
cd "$(dirname "$0")/.."
WB=0.2.130 # must equal the wasm-bindgen crate version in crates/might-web/Cargo.toml
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WB" ]; then
    cargo install wasm-bindgen-cli --version "$WB"
fi
cargo build -p might-web --features gpu --target wasm32-unknown-unknown --profile web
rm -rf web/dist
mkdir -p web/dist/pkg web/dist/models
wasm-bindgen --target web --no-typescript --out-dir web/dist/pkg \
    target/wasm32-unknown-unknown/web/might_web.wasm
cp web/index.html web/app.js web/dist/
cp web/models/mnist-cnn.safetensors web/models/gpt.safetensors web/dist/models/
wasm=web/dist/pkg/might_web_bg.wasm
echo "web/dist ready: wasm $(stat -c %s $wasm) bytes ($(gzip -9c $wasm | wc -c) gzipped), models $(du -cb web/dist/models/* | tail -1 | cut -f1) bytes"
