#!/usr/bin/env bash
# Run every fuzz target for SECONDS (default 120) each, one after the other, seeded with the
# fixtures of tests/fixtures/io, and print the executions each survived.
# usage: fuzz/run_all.sh [SECONDS]   (needs `cargo install cargo-fuzz` and a nightly toolchain)
set -uo pipefail
cd "$(dirname "$0")"
secs="${1:-120}"
fx=../tests/fixtures/io
mkdir -p corpus/{safetensors,npy,npz,pt,inspect} logs
cp $fx/*.safetensors corpus/safetensors/; cp $fx/*.npy corpus/npy/; cp $fx/*.npz corpus/npz/
cp $fx/*.pt corpus/pt/; cp $fx/*.{safetensors,npy,npz,pt} corpus/inspect/
cargo +nightly fuzz build
for t in safetensors npy npz pt inspect; do
    cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 >"logs/$t.log" 2>&1
    rc=$?
    done_line=$(grep -E '^#[0-9]+\s+DONE' "logs/$t.log" | tail -1)
    echo "$t: rc=$rc ${done_line:-$(grep -E '^#[0-9]+' "logs/$t.log" | tail -1)}"
done
