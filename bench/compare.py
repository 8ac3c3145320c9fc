"""Side-by-side might vs PyTorch driver (run through bench/compare.sh).

For every workload and thread count (1 and 2) it runs the might binary and the PyTorch script
as separate processes, alternating which goes first, REPS times each, and records the median
of each side. On these 2-core VMs multi-threaded timings flip between a fast and a slow mode
for seconds at a time, so alternation (not back-to-back blocks) keeps the comparison fair.

Ratio column: PyTorch time / might time (for throughputs: might rate / PyTorch rate), so
> 1 means might is faster. Writes bench/results.json and bench/RESULTS.md.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, env=None, timeout=600):
    """Run a process; return (last JSON line or None, wall seconds, stderr tail)."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    last = None
    for line in p.stdout.splitlines()[::-1]:
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            last = json.loads(line)
            break
    if p.returncode != 0 or last is None:
        log(f"  ! {' '.join(cmd)} failed (rc {p.returncode}): {p.stderr.strip()[-300:]}")
        return None, wall
    return last, wall


def env_for(threads):
    e = dict(os.environ)
    for v in ("MIGHT_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        e[v] = str(threads)
    return e


def alternate(reps, might_fn, torch_fn):
    """Call the two measurement functions alternately (order flipped every repetition)."""
    ms, ts = [], []
    for r in range(reps):
        order = [(might_fn, ms), (torch_fn, ts)]
        if r % 2:
            order.reverse()
        for fn, acc in order:
            v = fn()
            if v is not None:
                acc.append(v)
    return ms, ts


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1048576:.1f} GiB RAM"
    except OSError:
        pass
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{cpu}, {os.cpu_count()} logical CPUs, {mem}, {platform.system()} {platform.release()}, {rustc}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--might", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    reps = max(5, a.reps)
    quick = a.quick
    kt = ["--reps", "1", "--min-time", "0.05"] if quick else ["--reps", "3", "--min-time", "0.2"]
    limit = 12800 if quick else 0
    tmp = tempfile.mkdtemp(prefix="might-bench-")
    torch_version = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    rows = []

    def add(workload, t, unit, higher_better, ms, ts, note=""):
        if not ms or not ts:
            rows.append({"workload": workload, "threads": t, "unit": unit, "might": ms,
                         "torch": ts, "note": note or "failed on one side"})
            return
        mm, tm = statistics.median(ms), statistics.median(ts)
        ratio = mm / tm if higher_better else tm / mm
        rows.append({"workload": workload, "threads": t, "unit": unit, "might": ms, "torch": ts,
                     "might_median": mm, "torch_median": tm, "ratio": ratio, "note": note})
        log(f"  {workload:<28} {t}T  might {mm:10.4g}  torch {tm:10.4g} {unit:<8} ratio {ratio:.2f}")

    help_train = subprocess.run([a.might, "train", "--help"], capture_output=True, text=True).stdout
    has_small_cnn = "small-cnn" in help_train
    gpt_probe = subprocess.run([a.might, "train", "gpt", "--help"], capture_output=True, text=True)
    has_gpt = gpt_probe.returncode == 0

    for t in threads:
        env = env_for(t)
        log(f"== {t} thread(s)")
        # 1-2. kernels: one process measures every case; medians over processes.
        km, kt_ = alternate(
            reps,
            lambda: run([a.might, "bench", "kernels", "--threads", str(t), "--json", *kt], env)[0],
            lambda: run([a.python, "bench/torch/kernels.py", "--threads", str(t), *kt], env)[0])
        names = [r["name"] for r in (km or kt_)[0]["results"]] if (km or kt_) else []
        for name in names:
            def col(recs):
                return [x["rate"] for rec in recs for x in rec["results"] if x["name"] == name]
            kind = "sgemm" if "x" in name and "@" not in name else "elementwise"
            add(f"sgemm {name}" if kind == "sgemm" else name, t,
                "GFLOP/s" if kind == "sgemm" else "GB/s", True, col(km), col(kt_))

        # 3. MNIST MLP epoch (+ peak RSS).
        lim_m = ["--limit", str(limit)] if limit else []
        lim_t = ["--limit", str(limit)] if limit else []
        rss = {"might": [], "torch": []}

        def mlp_might(*extra):
            j, _ = run([a.might, "train", "mnist", "--epochs", "1", "--threads", str(t),
                        "--out", os.path.join(tmp, "mlp"), *lim_m, *extra], env)
            if j:
                if not extra:
                    rss["might"].append(j["peak_rss_mb"])
                return j["seconds_per_epoch"]

        def mlp_torch(*extra):
            j, _ = run([a.python, "bench/torch/mlp_mnist.py", "--threads", str(t), *lim_t,
                        *extra], env)
            if j:
                if not extra:
                    rss["torch"].append(j["peak_rss_mb"])
                return j["seconds_per_epoch"]
        ms, ts = alternate(reps, mlp_might, mlp_torch)
        wl = "MNIST MLP epoch" + (f" ({limit} samples)" if limit else "")
        add(wl, t, "s", False, ms, ts)
        add("peak RSS, MNIST MLP run", t, "MB", False, rss["might"], rss["torch"])
        if "--matmul-precision" in help_train:
            ms, ts = alternate(reps, lambda: mlp_might("--matmul-precision", "medium"),
                               lambda: mlp_torch("--bf16"))
            add(wl + ", bf16 matmuls", t, "s", False, ms, ts,
                "might --matmul-precision medium vs torch.autocast(cpu, bfloat16)")

        # 6. process start -> first step (whole process: load data, one step of 64, test eval).
        ms, ts = alternate(
            reps,
            lambda: run([a.might, "train", "mnist", "--epochs", "1", "--limit", "64",
                         "--threads", str(t), "--out", os.path.join(tmp, "first")], env)[1],
            lambda: run([a.python, "bench/torch/mlp_mnist.py", "--threads", str(t),
                         "--first-step"], env)[1])
        add("start -> first step (MLP)", t, "s", False, ms, ts,
            "process wall incl. data load and one test-set evaluation")

        # 4. small CNN epoch.
        if has_small_cnn:
            ms, ts = alternate(
                reps,
                lambda: (run([a.might, "train", "mnist", "--model", "small-cnn", "--epochs", "1",
                              "--threads", str(t), "--out", os.path.join(tmp, "cnn"), *lim_m],
                             env)[0] or {}).get("seconds_per_epoch"),
                lambda: (run([a.python, "bench/torch/mlp_mnist.py", "--model", "small-cnn",
                              "--threads", str(t), *lim_t], env)[0] or {}).get("seconds_per_epoch"))
            add("small CNN epoch" + (f" ({limit} samples)" if limit else ""), t, "s", False, ms, ts)
        else:
            rows.append({"workload": "small CNN epoch", "threads": t, "unit": "s",
                         "note": "TODO: `might train mnist --model small-cnn` not in this build"})

        # 4b. the >= 99 % CNN (conv-BN-ReLU x2, dropout, Adam + one-cycle): ~10x the small
        # CNN's work per sample, so timed on the first 6400 samples (100 steps; the schedule
        # spans them on both sides) to keep the run short; seconds per 100 steps.
        cl = ["--limit", "3200" if quick else "6400"]
        ms, ts = alternate(
            reps,
            lambda: (run([a.might, "train", "mnist", "--model", "cnn", "--epochs", "1",
                          "--threads", str(t), "--out", os.path.join(tmp, "cnn99"), *cl],
                         env)[0] or {}).get("seconds_per_epoch"),
            lambda: (run([a.python, "bench/torch/mlp_mnist.py", "--model", "cnn",
                          "--threads", str(t), *cl], env)[0] or {}).get("seconds_per_epoch"))
        add(f"MNIST CNN (>= 99 %) epoch of {cl[1]} samples", t, "s", False, ms, ts)

        # 5. char-GPT step.
        if has_gpt:
            grss = {"might": [], "torch": []}

            def gpt_might(*extra):
                # the PyTorch script's shape: B=16, T=64; no eval during the timed steps
                j, _ = run([a.might, "train", "gpt", "--steps", "23", "--warmup", "3",
                            "--batch-size", "16", "--eval-interval", "1000",
                            "--eval-batches", "1", "--threads", str(t),
                            "--out", os.path.join(tmp, "gpt"), *extra], env)
                if j and "ms_per_step" in j:
                    if "peak_rss_mb" in j and not extra:
                        grss["might"].append(j["peak_rss_mb"])
                    return j["ms_per_step"]

            def gpt_torch(*extra):
                j, _ = run([a.python, "bench/torch/gpt_step.py", "--threads", str(t), *extra],
                           env)
                if j:
                    if not extra:
                        grss["torch"].append(j["peak_rss_mb"])
                    return j["ms_per_step"]
            ms, ts = alternate(reps, gpt_might, gpt_torch)
            add("char-GPT train step", t, "ms", False, ms, ts)
            add("peak RSS, char-GPT run", t, "MB", False, grss["might"], grss["torch"])
            # 5b. the same step with bf16 operands in the products on both sides
            if "--matmul-precision" in gpt_probe.stdout:
                ms, ts = alternate(reps, lambda: gpt_might("--matmul-precision", "medium"),
                                   lambda: gpt_torch("--bf16"))
                add("char-GPT train step, bf16 matmuls", t, "ms", False, ms, ts,
                    "might --matmul-precision medium vs torch.autocast(cpu, bfloat16)")
        else:
            log("  (skipping char-GPT: `might train gpt` is not in this build)")
            rows.append({"workload": "char-GPT train step", "threads": t, "unit": "ms",
                         "note": "skipped: `might train gpt` not in this build"})

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    desc = machine()
    out = {"date": now, "machine": desc, "torch": torch_version, "quick": quick, "reps": reps,
           "rows": rows}
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump(out, f, indent=1)
    md = [f"# might vs PyTorch, side by side ({'quick' if quick else 'full'} run)", "",
          f"- date: {now}", f"- machine: {desc}", f"- PyTorch {torch_version}",
          f"- {reps} alternating repetitions per side; medians. Ratio = PyTorch time / might "
          "time (throughputs: might / PyTorch), > 1 means might is faster.",
          "- Regenerate: `bench/compare.sh` (or `--quick`). Raw numbers: `bench/results.json`.", "",
          "| workload | threads | might | PyTorch | unit | ratio torch/might | note |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "ratio" in r:
            md.append(f"| {r['workload']} | {r['threads']} | {r['might_median']:.4g} | "
                      f"{r['torch_median']:.4g} | {r['unit']} | {r['ratio']:.2f} | {r['note']} |")
        else:
            md.append(f"| {r['workload']} | {r['threads']} | – | – | {r['unit']} | – | {r['note']} |")
    with open(os.path.join(HERE, "RESULTS.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    log("wrote bench/results.json and bench/RESULTS.md")


if __name__ == "__main__":
    main()
