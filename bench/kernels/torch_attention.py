#!/usr/bin/env python3
"""PyTorch's causal attention on the CPU, for a side-by-side look at tenax-bench-kernels' "CPU causal attention core"
table (same shapes, forward and backward timed separately, median of many calls). Optional: needs a Python
environment with torch, never a build or CI dependency.

    python3 bench/kernels/torch_attention.py --threads 1
    OPENBLAS_NUM_THREADS=1 build/bench/kernels/tenax-bench-kernels --cpu-only

"matmul + masked softmax" keeps P for the backward like tenax with saved probabilities; scaled_dot_product_attention
(is_causal) is PyTorch's fused CPU kernel, which keeps no T x T matrix and recomputes in the backward like tenax
with recomputed probabilities.
"""
import argparse
import time

import torch
import torch.nn.functional as F


def manual(q, k, v, mask, scale):
    s = (q @ k.transpose(-1, -2)) * scale
    p = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
    return p @ v


def sdpa(q, k, v, mask, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)


def median_ms(values):
    values = sorted(values)
    return values[len(values) // 2] * 1e3


def bench(fn, shape, reps):
    b, h, t, d = shape
    gen = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.rand(b, h, t, d, generator=gen) * 2 - 1 for _ in range(4))
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    fwd, bwd = [], []
    for i in range(reps + 5):  # 5 warm-up calls
        qq, kk, vv = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
        t0 = time.perf_counter()
        out = fn(qq, kk, vv, mask, d ** -0.5)
        t1 = time.perf_counter()
        out.backward(dout)
        t2 = time.perf_counter()
        if i >= 5:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
    return median_ms(fwd), median_ms(bwd), median_ms([a + c for a, c in zip(fwd, bwd)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--reps", type=int, default=101, help="timed calls per case (median reported)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__} causal attention on the CPU ({args.threads} thread(s); median of {args.reps})")
    print(f"{'B x H x T x D':20s} {'path':28s} {'fwd ms':>10s} {'bwd ms':>10s} {'fwd+bwd ms':>12s}")
    for shape in [(4, 4, 128, 32), (1, 12, 1024, 64)]:
        for name, fn in [("matmul + masked softmax", manual), ("sdpa (is_causal)", sdpa)]:
            f, b, total = bench(fn, shape, args.reps)
            print(f"{'x'.join(map(str, shape)):20s} {name:28s} {f:10.3f} {b:10.3f} {total:12.3f}")


if __name__ == "__main__":
    main()
