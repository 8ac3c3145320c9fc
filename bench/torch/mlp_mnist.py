"""One training epoch of the MNIST MLP with the settings of `might train mnist`: real MNIST
(normalised), Flatten-Linear(784,128)-ReLU-Linear(128,10), batch 64 shuffled (last partial
batch kept), SGD lr 0.01 momentum 0.9, cross-entropy; per step the loss is read back and the
train accuracy counted, as the might CLI does. Reports seconds_per_epoch and peak RSS.

With --first-step: load the data, build the model, take one step on 64 samples, evaluate the
test set and exit (the driver times the whole process: start -> first step, like
`might train mnist --limit 64`).

usage: python mlp_mnist.py --threads T [--data DIR] [--limit N] [--model mlp|small-cnn] [--first-step]
"""
import time

import common


def main():
    def extra(p):
        p.add_argument("--data", default="data/mnist")
        p.add_argument("--first-step", action="store_true")
        p.add_argument("--model", default="mlp", choices=["mlp", "small-cnn"])
        p.add_argument("--limit", type=int, default=0, help="use the first N training samples")
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
    if a.model == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(
            nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(400, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    n, b = x.shape[0], 64
    t0 = time.perf_counter()
    perm = torch.randperm(n)
    tot, right = 0.0, 0
    for i in range(0, n, b):
        idx = perm[i:i + b]
        xb, yb = x[idx], y[idx]
        logits = model(xb)
        loss = lossf(logits, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tot += loss.item() * len(idx)
        right += int((logits.argmax(1) == yb).sum())
    secs = time.perf_counter() - t0
    with torch.no_grad():
        acc = float((model(xt).argmax(1) == yt).float().mean())
    common.emit({"bench": "mnist_" + a.model, "lib": "torch", "threads": a.threads,
                 "seconds_per_epoch": secs, "train_loss": tot / n, "test_accuracy": acc,
                 "peak_rss_mb": common.peak_rss_mb()})


if __name__ == "__main__":
    main()
