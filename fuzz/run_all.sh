#!/usr/bin/env bash
# Run every fuzz target for SECONDS (default 120) each, one after the other, seeded with the
# fixtures of tests/fixtures/io, and print the executions each survived.
# usage: fuzz/run_all.sh [SECONDS]   (needs `cargo install cargo-fuzz` and a nightly toolchain)
set -uo pipefail
cd "$(dirname "$0")"
secs="${1:-120}"
fx=../tests/fixtures/io
mkdir -p corpus/{safetensors,npy,npz,pt,inspect,idx,cifar,image,checkpoint} logs
cp $fx/*.safetensors corpus/safetensors/; cp $fx/*.npy corpus/npy/; cp $fx/*.npz corpus/npz/
cp $fx/*.pt corpus/pt/; cp $fx/*.{safetensors,npy,npz,pt} corpus/inspect/
# IDX: the head of each shipped MNIST file (gzip) and a raw one; CIFAR: two records;
# images: a tiny png and jpeg; checkpoint: the char-GPT fixture checkpoints
python3 - <<'PY'
import gzip, os, struct, zlib
for f in [f for f in os.listdir("../data/mnist") if f.endswith(".gz")]:
    raw = gzip.open("../data/mnist/" + f).read()
    magic, n = struct.unpack(">II", raw[:8])
    dims = (magic & 0xFF)
    head = raw[:4 + 4 * dims]
    per = 1
    for i in range(1, dims):
        per *= struct.unpack(">I", raw[4 + 4 * i:8 + 4 * i])[0]
    small = raw[:4] + struct.pack(">I", 2) + raw[8:4 + 4 * dims] + raw[4 + 4 * dims:4 + 4 * dims + 2 * per]
    open("corpus/idx/" + f.replace(".gz", ""), "wb").write(small)
    open("corpus/idx/" + f, "wb").write(gzip.compress(small))
open("corpus/cifar/two", "wb").write(bytes([3]) + bytes(range(256)) * 12 + bytes([9]) + bytes(3072))
def png(w, h, rgb):
    row = b"".join(b"\0" + bytes((x * 40 + y) % 256 for x in range(w * (3 if rgb else 1))) for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2 if rgb else 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(row)) + chunk(b"IEND", b"")
open("corpus/image/rgb.png", "wb").write(png(5, 4, True))
open("corpus/image/gray.png", "wb").write(png(3, 3, False))
PY
cp ../tests/fixtures/gpt/*.safetensors corpus/checkpoint/ 2>/dev/null || true
cargo +nightly fuzz build
for t in safetensors npy npz pt inspect idx cifar image checkpoint; do
    cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 >"logs/$t.log" 2>&1
    rc=$?
    done_line=$(grep -E '^#[0-9]+\s+DONE' "logs/$t.log" | tail -1)
    echo "$t: rc=$rc ${done_line:-$(grep -E '^#[0-9]+' "logs/$t.log" | tail -1)}"
done
