"""might vs onnxruntime on the exported real models: outputs (parity within 1e-4) and speed at
1 and 2 threads, in one run on one machine. Writes bench/ONNX_RESULTS.md.

Run: bash bench/onnx/run.sh   (exports the models first; needs onnxruntime and numpy)
"""
import glob
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

models_dir, might = sys.argv[1], sys.argv[2]
reps = int(os.environ.get("REPS", "20"))
names = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(models_dir, "*.onnx")))
rows, speed = [], []
for name in names:
    model = os.path.join(models_dir, f"{name}.onnx")
    inputs = {p.split(".in.")[1][:-4]: p for p in glob.glob(os.path.join(models_dir, f"{name}.in.*.npy"))}
    feeds = {k: np.load(v) for k, v in inputs.items()}
    out_dir = os.path.join(models_dir, f"{name}.might")
    times = {}
    for threads in (1, 2):
        cmd = [might, "run", model, "--output", out_dir, "--threads", str(threads), "--reps", str(reps)]
        for k, v in inputs.items():
            cmd += ["--input", f"{k}={v}"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stdout, res.stderr)
            sys.exit(f"might failed on {name}")
        times[("might", threads)] = float(re.search(r"median of \d+ more runs: ([0-9.]+) ms", res.stdout).group(1))
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        sess.run(None, feeds)
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            sess.run(None, feeds)
            ts.append((time.perf_counter() - t) * 1e3)
        times[("ort", threads)] = sorted(ts)[len(ts) // 2]
    worst = 0.0
    for ref in glob.glob(os.path.join(models_dir, f"{name}.ort.*.npy")):
        out = ref.split(".ort.")[1][:-4]
        want = np.load(ref).astype(np.float64)
        got = np.load(os.path.join(out_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", out) + ".npy")).astype(np.float64)
        assert got.shape == want.shape, (name, out, got.shape, want.shape)
        diff = np.abs(got - want).max()
        # relative to the output's scale (a randomly initialised MobileNet's logits are ~1e-9)
        worst = max(worst, diff / max(np.abs(want).max(), 1.0) if np.abs(want).max() >= 1e-3 else diff / np.abs(want).max())
        rows.append((name, out, str(want.shape), diff, np.abs(want).max()))
    ok = worst <= 1e-4
    print(f"{name}: max |might - onnxruntime| / scale = {worst:.2e} ({'ok' if ok else 'OVER 1e-4'}); "
          f"ms at 1 thread: might {times[('might', 1)]:.2f}, ort {times[('ort', 1)]:.2f}; "
          f"2 threads: might {times[('might', 2)]:.2f}, ort {times[('ort', 2)]:.2f}")
    speed.append((name, times))

with open(os.path.join(os.path.dirname(__file__), "..", "ONNX_RESULTS.md"), "w") as f:
    f.write("# might vs onnxruntime on exported models\n\n")
    f.write(f"`bash bench/onnx/run.sh` on this machine ({os.cpu_count()} cores), onnxruntime "
            f"{ort.__version__}, one run; random weights (seeded), batch 1; median of {reps} runs "
            "after one warm-up. `might run` times the graph run (inputs already loaded).\n\n")
    f.write("## Parity (max absolute difference to onnxruntime; relative: divided by max(1, max abs value),\n"
            "or by the max abs value when the outputs are tiny)\n\n"
            "| model | output | shape | max abs diff | max abs value | relative |\n|---|---|---|---|---|---|\n")
    for r in rows:
        rel = r[3] / (max(r[4], 1.0) if r[4] >= 1e-3 else r[4])
        f.write(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2e} | {r[4]:.3g} | {rel:.2e} |\n")
    f.write("\n## Speed (ms per run; ratio > 1: might faster)\n\n| model | might 1T | ort 1T | ratio 1T | might 2T | ort 2T | ratio 2T |\n|---|---|---|---|---|---|---|\n")
    for name, t in speed:
        f.write(f"| {name} | {t[('might', 1)]:.2f} | {t[('ort', 1)]:.2f} | {t[('ort', 1)] / t[('might', 1)]:.2f} | "
                f"{t[('might', 2)]:.2f} | {t[('ort', 2)]:.2f} | {t[('ort', 2)] / t[('might', 2)]:.2f} |\n")
print("wrote bench/ONNX_RESULTS.md")
