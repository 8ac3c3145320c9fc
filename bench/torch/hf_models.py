"""PyTorch side of bench/hf.py: sentence-transformers all-MiniLM-L6-v2 sentences/s and
GPT-2 124M (random weights) greedy generation tokens/s, one JSON line each.

  python hf_models.py embed MODEL_DIR SENTENCES_FILE --batch-size 32 --threads N --reps R
  python hf_models.py generate --prompt 16 --tokens 64 --threads N --reps R
"""
import argparse
import json
import statistics
import time

import torch


def embed(a):
    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(a.model_dir, device="cpu")
    lines = [l for l in open(a.sentences, encoding="utf-8").read().splitlines() if l.strip()]
    with torch.inference_mode():
        st.encode(lines[:a.batch_size], batch_size=a.batch_size)
        secs = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            st.encode(lines, batch_size=a.batch_size)
            secs.append(time.perf_counter() - t0)
    s = statistics.median(secs)
    print(json.dumps({"bench": "embed", "sentences": len(lines), "batch_size": a.batch_size,
                      "threads": torch.get_num_threads(), "seconds": s,
                      "sentences_per_s": len(lines) / s}))


def generate(a):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config()).eval()
    ids = torch.tensor([[(i * 7919) % 50257 for i in range(a.prompt)]])
    kw = dict(max_new_tokens=a.tokens, min_new_tokens=a.tokens, do_sample=False,
              pad_token_id=50256, attention_mask=torch.ones_like(ids))
    with torch.inference_mode():
        m.generate(ids, **kw)
        rates = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            out = m.generate(ids, **kw)
            n = out.shape[1] - ids.shape[1]
            rates.append(n / (time.perf_counter() - t0))
    print(json.dumps({"bench": "generate", "model": "gpt2-124m", "prompt": a.prompt,
                      "tokens": a.tokens, "threads": torch.get_num_threads(),
                      "tokens_per_s": statistics.median(rates)}))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["embed", "generate"])
    p.add_argument("model_dir", nargs="?")
    p.add_argument("sentences", nargs="?")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    embed(a) if a.what == "embed" else generate(a)
