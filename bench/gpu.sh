#!/usr/bin/env bash
# GPU benchmarks, might's wgpu backend beside PyTorch CUDA, for a session that has the device
# machine (an NVIDIA GPU; see the GPU issue). One prepared run, well under 8 minutes:
#
#   here:    cargo build --release -p might-cli --features gpu
#   device:  run(command="bash bench/gpu.sh", carry=["target/release/might"], timeout_s=480)
#
# Prints one JSON line per measurement (and keeps them in $OUT/gpu.jsonl when $OUT is set):
# matmul GFLOP/s at n = 1024/4096/8192, the MNIST CNN epoch (data/mnist, batch 64, Adam +
# one-cycle) and the char-GPT step (4 layers, 4 heads, d=128, T=64, B=16, AdamW), might on
# Vulkan and PyTorch on CUDA. Record the table in bench/RESULTS.md.
set -uo pipefail
cd "$(dirname "$0")/.."
M=${MIGHT:-target/release/might}
LOG=${OUT:-/tmp}/gpu.jsonl
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }

nvidia-smi -L 2>&1 | head -3
# wgpu reaches an NVIDIA GPU through its Vulkan driver: a container mounting only the compute
# libraries has no Vulkan ICD, and might then finds no adapter (or only lavapipe)
ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null
export NODEVICE_SELECT=1

echo "== might (wgpu)"
$M bench matmul --device gpu --sizes 1024,4096,8192 --reps 3 | tee -a "$LOG"
$M train mnist --model cnn --device gpu --epochs 1 --out /tmp/might-cnn 2>/dev/null \
    | tail -1 | tee -a "$LOG"
$M train gpt --device gpu --layers 4 --heads 4 --embd 128 --block 64 --batch-size 16 \
    --steps 40 --eval-interval 40 --eval-batches 2 --out /tmp/might-gpt 2>/dev/null \
    | tail -1 | tee -a "$LOG"

echo "== PyTorch (CUDA)"
if ! python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    pip install -q torch numpy >/dev/null 2>&1 || echo "torch: not installable here"
fi
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    python3 - <<'PY' | tee -a "$LOG"
import json, time, torch
for n in (1024, 4096, 8192):
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    reps = max(3, int(2e12 / (2 * n ** 3)))
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    s = (time.perf_counter() - t0) / reps
    print(json.dumps({"bench": "matmul", "lib": "torch", "n": n, "gflops": 2 * n ** 3 / s / 1e9,
                      "device": torch.cuda.get_device_name()}))
PY
    python3 bench/torch/mlp_mnist.py --model cnn --device cuda | tee -a "$LOG"
    python3 bench/torch/gpt_step.py --device cuda --steps 40 | tee -a "$LOG"
else
    say '{"torch":"no CUDA PyTorch on this machine"}'
fi
