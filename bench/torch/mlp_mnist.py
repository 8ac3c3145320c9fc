"""One training epoch of the MNIST MLP with the settings of `might train mnist`: real MNIST
(normalised), Flatten-Linear(784,128)-ReLU-Linear(128,10), batch 64 shuffled (last partial
batch kept), SGD lr 0.01 momentum 0.9, cross-entropy; per step the loss is read back and the
train accuracy counted, as the might CLI does. Reports seconds_per_epoch and peak RSS.

With --first-step: load the data, build the model, take one step on 64 samples, evaluate the
test set and exit (the driver times the whole process: start -> first step, like
`might train mnist --limit 64`).

usage: python mlp_mnist.py --threads T [--data DIR] [--limit N] [--model mlp|small-cnn|cnn] [--first-step] [--bf16]

--bf16: the model under PyTorch's CPU autocast to bfloat16 (the loss in f32), the counterpart of
`might train mnist --matmul-precision medium` (see gpt_step.py).

--model cnn is `might train mnist --model cnn` (the >= 99 % CNN): [conv3x3 (no bias) -> BatchNorm
-> ReLU -> maxpool 2] at 32 and 64 channels, Dropout(0.25) -> Linear(3136, 128) -> ReLU ->
Dropout(0.25) -> Linear(128, 10); Adam lr 3e-3 with one-cycle (25 % warm-up, div 25, final 1e3).
"""
import time

import common


def main():
    def extra(p):
        p.add_argument("--data", default="data/mnist")
        p.add_argument("--first-step", action="store_true")
        p.add_argument("--model", default="mlp", choices=["mlp", "small-cnn", "cnn"])
        p.add_argument("--limit", type=int, default=0, help="use the first N training samples")
        p.add_argument("--bf16", action="store_true")
    a = common.parse(extra)
    torch = common.setup_threads(a.threads)
    import torch.nn as nn
    x, y = common.load_mnist(a.data, True)
    xt, yt = common.load_mnist(a.data, False)
    if a.first_step:
        x, y = x[:64], y[:64]
    elif a.limit:
        x, y = x[:a.limit], y[:a.limit]
    torch.manual_seed(0)
    n, b = x.shape[0], 64
    sched = None
    if a.model == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    elif a.model == "small-cnn":
        model = nn.Sequential(
            nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(400, 10))
    else:
        def cbr(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
        model = nn.Sequential(
            *cbr(1, 32), nn.MaxPool2d(2), *cbr(32, 64), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
            nn.Dropout(0.25), nn.Linear(128, 10))
    if a.model == "cnn":
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        steps = (n + b - 1) // b
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=3e-3, total_steps=max(steps, 2), pct_start=0.25, div_factor=25.0,
            final_div_factor=1e3)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    dev = torch.device(a.device)
    model.to(dev)
    x, y, xt, yt = x.to(dev), y.to(dev), xt.to(dev), yt.to(dev)
    common.sync(torch, dev)
    t0 = time.perf_counter()
    perm = torch.randperm(n, device=dev)
    tot, right = 0.0, 0
    for i in range(0, n, b):
        idx = perm[i:i + b]
        xb, yb = x[idx], y[idx]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(xb)
        loss = lossf(logits.float(), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        tot += loss.item() * len(idx)
        right += int((logits.argmax(1) == yb).sum())
    common.sync(torch, dev)
    secs = time.perf_counter() - t0
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
        acc = float((model(xt).argmax(1) == yt).float().mean())
    common.emit({"bench": "mnist_" + a.model, "lib": "torch", "threads": a.threads,
                 "seconds_per_epoch": secs, "train_loss": tot / n, "test_accuracy": acc,
                 "peak_rss_mb": common.peak_rss_mb()})


if __name__ == "__main__":
    main()
