"""sgemm (GFLOP/s) and elementwise/reduction/softmax (GB/s) throughput, float32, PyTorch side
of `might bench kernels` (same shapes, sizes and byte counts: read + write once each).

usage: python kernels.py --threads T [--reps R] [--min-time S]
"""
import common

SGEMM = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048),
         (64, 784, 128), (4096, 768, 3072)]
SIZES = [1 << 20, 1 << 24]
BYTES = {"add": 12, "sum": 4}


def main():
    def extra(p):
        p.add_argument("--reps", type=int, default=5)
        p.add_argument("--min-time", type=float, default=0.2)
    a = common.parse(extra)
    torch = common.setup_threads(a.threads)
    import torch.nn.functional as F
    torch.manual_seed(0)
    out = []
    for (m, k, n) in SGEMM:
        x, w = torch.randn(m, k), torch.randn(k, n)
        s = common.median_time(lambda: x @ w, a.reps, a.min_time)
        out.append({"kind": "sgemm", "name": f"{m}x{k}x{n}", "seconds": s,
                    "rate": 2.0 * m * k * n / s / 1e9})
    with torch.no_grad():
        for n in SIZES:
            x, y = torch.randn(n), torch.randn(n)
            rows = x.view(n // 1024, 1024)
            ops = [("add", lambda: x + y), ("relu", lambda: torch.relu(x)),
                   ("exp", lambda: torch.exp(x)), ("gelu", lambda: F.gelu(x)),
                   ("sum", lambda: x.sum()), ("softmax", lambda: torch.softmax(rows, -1))]
            for op, fn in ops:
                s = common.median_time(fn, a.reps, a.min_time)
                out.append({"kind": "elementwise", "name": f"{op}@{n >> 20}M", "seconds": s,
                            "rate": BYTES.get(op, 8) * n / s / 1e9})
    common.emit({"bench": "kernels", "lib": "torch", "threads": torch.get_num_threads(),
                 "torch": torch.__version__, "results": out})


if __name__ == "__main__":
    main()
