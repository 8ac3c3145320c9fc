#!/usr/bin/env bash
# Miri over the CPU kernels' unit tests (backend::cpu): the scalar paths of every kernel with
# `unsafe` (Miri runs no SIMD level, so the dispatch takes the baseline build). Not part of CI:
# it needs a nightly toolchain (rustup toolchain install nightly --component miri rust-src)
# and ~25 minutes on 2 cores. The tests shrink their sizes under cfg(miri); the ULP sweeps of
# vmath (safe code, billions of evaluations) are ignored there.
set -euo pipefail
cd "$(dirname "$0")/.."
# isolation off: the memory budget reads /proc/meminfo
MIRIFLAGS="-Zmiri-disable-isolation" cargo +nightly miri test -p might --lib backend::cpu -- --test-threads 1
