#!/usr/bin/env python3
"""might against might: the might-side workloads of compare.py run by two builds, alternately.

    bench/ab.sh BASE_REV [--reps N] [--threads 1] [--quick]

For a refactor that must not cost speed (the device seam: "no row more than 3 % slower"):
both binaries run every workload in alternating order, >= 5 times each, and the table gives
medians and the ratio base/candidate for times (candidate/base for throughputs), so > 1 means
the candidate is faster and 0.97 is the 3 % line. Writes bench/AB.md.
"""
import argparse
import datetime
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import alternate, env_for, log, machine, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the reference might binary")
    ap.add_argument("--cand", required=True, help="the candidate might binary")
    ap.add_argument("--base-name", default="base")
    ap.add_argument("--cand-name", default="candidate")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="might-ab-")
    rows = []

    def add(name, t, unit, higher, bs, cs):
        if not bs or not cs:
            log(f"  ! {name}: no samples")
            return
        b, c = statistics.median(bs), statistics.median(cs)
        ratio = c / b if higher else b / c
        rows.append((name, t, b, c, unit, ratio))
        log(f"  {name} [{t}T]: {a.base_name} {b:.4g} vs {a.cand_name} {c:.4g} {unit} -> {ratio:.3f}")

    kt = ["--quick"] if a.quick else []
    limit = ["--limit", "12800"] if a.quick else []
    for t in [int(x) for x in a.threads.split(",")]:
        env = env_for(t)
        log(f"== {t} thread(s)")

        def kernels(binary):
            return run([binary, "bench", "kernels", "--threads", str(t), "--json", *kt], env)[0]
        kb, kc = alternate(a.reps, lambda: kernels(a.base), lambda: kernels(a.cand))
        names = [r["name"] for r in (kb or kc)[0]["results"]] if (kb or kc) else []
        for name in names:
            def col(recs):
                return [x["rate"] for rec in recs for x in rec["results"] if x["name"] == name]
            sg = "x" in name and "@" not in name
            add(f"sgemm {name}" if sg else name, t, "GFLOP/s" if sg else "GB/s", True,
                col(kb), col(kc))

        def train(binary, key, *args):
            j, _ = run([binary, "train", *args, "--threads", str(t),
                        "--out", os.path.join(tmp, "run")], env)
            return (j or {}).get(key)
        jobs = [
            ("MNIST MLP epoch", "s", ("mnist", "--epochs", "1", *limit), "seconds_per_epoch"),
            ("MNIST MLP epoch, bf16 matmuls", "s",
             ("mnist", "--epochs", "1", "--matmul-precision", "medium", *limit),
             "seconds_per_epoch"),
            ("small CNN epoch", "s", ("mnist", "--model", "small-cnn", "--epochs", "1", *limit),
             "seconds_per_epoch"),
            ("MNIST CNN (>= 99 %) epoch of 6400 samples", "s",
             ("mnist", "--model", "cnn", "--epochs", "1", "--limit", "6400"),
             "seconds_per_epoch"),
            ("char-GPT train step", "ms",
             ("gpt", "--steps", "23", "--warmup", "3", "--batch-size", "16",
              "--eval-interval", "1000", "--eval-batches", "1"), "ms_per_step"),
            ("char-GPT train step, bf16 matmuls", "ms",
             ("gpt", "--steps", "23", "--warmup", "3", "--batch-size", "16",
              "--eval-interval", "1000", "--eval-batches", "1", "--matmul-precision", "medium"),
             "ms_per_step"),
        ]
        for name, unit, args, key in jobs:
            bs, cs = alternate(a.reps, lambda: train(a.base, key, *args),
                               lambda: train(a.cand, key, *args))
            add(name, t, unit, False, bs, cs)

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = [f"# might {a.cand_name} against {a.base_name}", "", f"- date: {now}",
          f"- machine: {machine()}",
          f"- {a.reps} alternating repetitions per side; medians. Ratio > 1: {a.cand_name} is "
          "faster; 0.97 is 3 % slower.", "",
          f"| workload | threads | {a.base_name} | {a.cand_name} | unit | ratio |",
          "|---|---|---|---|---|---|"]
    for name, t, b, c, unit, r in rows:
        md.append(f"| {name} | {t} | {b:.4g} | {c:.4g} | {unit} | {r:.3f} |")
    with open(os.path.join(HERE, "AB.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
