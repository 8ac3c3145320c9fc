"""Helpers shared by the PyTorch side of bench/compare.py.

Each script measures ONE repetition per process and prints one JSON line, so the driver can
alternate might and PyTorch processes. Thread counts are fixed through the environment
before torch is imported (call `setup_threads` first), then with torch.set_num_threads.
"""
import argparse
import gzip
import json
import os
import resource
import struct
import sys
import time


def parse(extra=None):
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda (bench/gpu.sh)")
    if extra:
        extra(p)
    return p.parse_args()


def setup_threads(n):
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[v] = str(n)
    import torch
    torch.set_num_threads(n)
    return torch


def read_idx(path):
    """An IDX file (MNIST format), gzipped or not, as (dims, bytes)."""
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def load_mnist(dir_, train):
    """Normalised float32 images [n, 1, 28, 28] and int64 labels, like `might train mnist`."""
    import numpy as np
    import torch
    pre = "train" if train else "t10k"
    dims, px = read_idx(os.path.join(dir_, f"{pre}-images-idx3-ubyte.gz"))
    _, lab = read_idx(os.path.join(dir_, f"{pre}-labels-idx1-ubyte.gz"))
    x = np.frombuffer(px, dtype=np.uint8).reshape(dims[0], 1, dims[1], dims[2]).astype(np.float32)
    x = (x / 255.0 - 0.1307) / 0.3081
    y = np.frombuffer(lab, dtype=np.uint8).astype(np.int64)
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def emit(rec):
    sys.stdout.write(json.dumps(rec) + "\n")
    sys.stdout.flush()


def median_time(fn, reps, min_time):
    """Median seconds per call over `reps` samples of >= min_time seconds each."""
    fn()
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-9)
    inner = max(1, min(100000, int(min_time / one + 0.999)))
    xs = []
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        xs.append((time.perf_counter() - t0) / inner)
    xs.sort()
    return xs[len(xs) // 2]


def sync(torch, device):
    """Wait for the device's queued work (timings on CUDA measure the work, not the launch)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
