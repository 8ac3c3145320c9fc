"""Char-GPT training step time: 4 layers, 4 heads, d=128, context T=64, batch B=16, AdamW
(lr 3e-4), vocabulary 65, pre-LayerNorm blocks with a 4x GELU MLP, tied-free LM head.
Random token batches (the step cost does not depend on the text). Reports the median
ms/step over --steps steps after 3 warm-up steps, and peak RSS.

--bf16: the products in bfloat16 through PyTorch's CPU autocast (`torch.autocast("cpu",
dtype=torch.bfloat16)`; the loss in f32), its way of running the matmuls on bf16 operands: the
counterpart of `might --matmul-precision medium`. (`torch.set_float32_matmul_precision
("medium")` does not change CPU matmuls: checked, their results stay f32-exact.)

usage: python gpt_step.py --threads T [--steps N] [--bf16]
"""
import time

import common

V, T, B, D, H, L = 65, 64, 16, 128, 4, 4


def main():
    def extra(p):
        p.add_argument("--steps", type=int, default=20)
        p.add_argument("--bf16", action="store_true")
    a = common.parse(extra)
    torch = common.setup_threads(a.threads)
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.fc, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
            sh = lambda t: t.view(B, T, H, D // H).transpose(1, 2)
            y = F.scaled_dot_product_attention(sh(q), sh(k), sh(v), is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, D))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
            self.blocks = nn.Sequential(*[Block() for _ in range(L)])
            self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
            return self.head(self.ln(self.blocks(x)))

    torch.manual_seed(0)
    dev = torch.device(a.device)
    model = Gpt().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    times = []
    for i in range(a.steps + 3):
        xb = torch.randint(0, V, (B, T), device=dev)
        yb = torch.randint(0, V, (B, T), device=dev)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(xb)
        loss = F.cross_entropy(logits.float().view(-1, V), yb.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        common.sync(torch, dev)
        if i >= 3:
            times.append(time.perf_counter() - t0)
    times.sort()
    common.emit({"bench": "gpt_step", "lib": "torch", "threads": a.threads, "bf16": a.bf16,
                 "ms_per_step": 1e3 * times[len(times) // 2], "peak_rss_mb": common.peak_rss_mb()})


if __name__ == "__main__":
    main()
