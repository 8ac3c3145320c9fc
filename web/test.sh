#!/usr/bin/env bash
# The browser end-to-end test (part of the README's test command): build web/dist, fetch
# puppeteer-core, then web/e2e.mjs drives the system's headless Chromium through the page
# (CPU SIMD128, CPU scalar, WebGPU). Needs chromium-headless-shell (apt) and node.
set -euo pipefail
cd "$(dirname "$0")/.."
bash web/build.sh
(cd web && npm install --no-audit --no-fund --silent)
node web/e2e.mjs
