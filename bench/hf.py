"""might vs PyTorch on pretrained Hugging Face models, in one run (bench/hf.sh starts it):
all-MiniLM-L6-v2 sentences/s (batches of 32, sentences of up to 128 tokens, tokenisation
included on both sides) and GPT-2 124M greedy generation tokens/s (random weights, batch 1,
KV cache), each at 1 and 2 threads. Writes bench/HF_RESULTS.md and bench/hf_results.json.
"""
import argparse
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def sentences(path, n):
    """n sentences from the Shakespeare slice: runs of lines, 5..60 words each (<= 128
    tokens), a realistic mix of short and long inputs."""
    text = open(os.path.join(HERE, "..", "data", "text", "shakespeare_1mb.txt"), encoding="utf-8").read()
    words = text.split()
    out, i, k = [], 0, 0
    while len(out) < n:
        w = 5 + (k * 37) % 56
        out.append(" ".join(words[i:i + w]))
        i += w
        k += 1
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "an unknown CPU"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--might", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--minilm", required=True)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--sentences", type=int, default=512)
    p.add_argument("--tokens", type=int, default=64)
    a = p.parse_args()
    sfile = os.path.join(HERE, ".hf_sentences.txt")
    sentences(sfile, a.sentences)
    torch_script = os.path.join(HERE, "torch", "hf_models.py")
    rows = []
    for t in [int(x) for x in a.threads.split(",")]:
        env = dict(os.environ, OMP_NUM_THREADS=str(t), MKL_NUM_THREADS=str(t))
        r = {"threads": t}
        r["might_embed"] = run([a.might, "bench", "embed", a.minilm, "--sentences", sfile,
                                "--threads", str(t), "--reps", str(a.reps)])["sentences_per_s"]
        r["torch_embed"] = run([a.python, torch_script, "embed", a.minilm, sfile, "--threads",
                                str(t), "--reps", str(a.reps)], env)["sentences_per_s"]
        r["might_gen"] = run([a.might, "bench", "generate", "--tokens", str(a.tokens),
                              "--threads", str(t), "--reps", str(a.reps)])["tokens_per_s"]
        r["torch_gen"] = run([a.python, torch_script, "generate", "--tokens", str(a.tokens),
                              "--threads", str(t), "--reps", str(a.reps)], env)["tokens_per_s"]
        print(json.dumps(r), flush=True)
        rows.append(r)
    with open(os.path.join(HERE, "hf_results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = [
        "# might vs PyTorch: pretrained Hugging Face models",
        "",
        f"Measured in one run by `bench/hf.sh` ({a.sentences} Shakespeare sentences of 5-60 words,"
        f" batches of 32; GPT-2 124M random weights, 16-token prompt, {a.tokens} greedy tokens;"
        f" median of {a.reps}) on {cpu_name()}, {os.cpu_count()} cores.",
        "",
        "| threads | MiniLM sentences/s: might | PyTorch | ratio | GPT-2 124M tokens/s: might | PyTorch | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['threads']} | {r['might_embed']:.1f} | {r['torch_embed']:.1f} | "
            f"{r['might_embed'] / r['torch_embed']:.2f}x | {r['might_gen']:.1f} | "
            f"{r['torch_gen']:.1f} | {r['might_gen'] / r['torch_gen']:.2f}x |")
    with open(os.path.join(HERE, "HF_RESULTS.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
