#!/usr/bin/env python3
"""Reference rates from PyTorch on the same GPU, beside tenax's own GPU benchmarks (scripts/gpu-run.sh runs it):

- device-to-device copy bandwidth (bytes read + written), the yardstick of tenax-bench-kernels' bandwidth table;
- square matrix products through cuBLAS at 4096 and 8192: bf16 and fp16 (fp32 accumulation, 16-bit output),
  fp32 without and with TF32; tenax-bench-kernels has bf16 (cuBLAS GemmEx and tenax's gemm_lowp) and fp32 only;
- causal attention at tenax-bench-kernels' size (B, H, T, D = 8, 12, 1024, 64): scaled_dot_product_attention
  (flash/efficient kernels) and matmul + masked softmax (what tenax's batched core does), forward and
  forward + backward, bf16.

Each number is the median of timed runs between CUDA events after warm-up, on random data (never zeros), with the
inputs rotated over several buffers where one set would fit in L2. Needs torch with CUDA; exits 1 without a GPU.
"""
import statistics
import sys

import torch
import torch.nn.functional as F


def median_ms(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth():
    n = 1 << 28  # 1 GiB of fp32
    src = torch.rand(n, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), 20)
    print(f"{'device-to-device copy, 1 GiB':44s} {2 * src.nbytes / ms / 1e6:10.1f} GB/s (read + write)")
    assert torch.equal(dst, src), "copy result differs"


def matmuls():
    print(f"\n{'matrix product (cuBLAS via torch.matmul)':44s} {'m=n=k':>6s} {'ms':>9s} {'TFLOP/s':>9s} {'rel err':>9s}")
    cases = [("bf16", torch.bfloat16, False), ("fp16", torch.float16, False), ("fp32, no TF32", torch.float32, False),
             ("fp32 with TF32", torch.float32, True)]
    for size in (4096, 8192):
        for name, dtype, tf32 in cases:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            sets = 3 if size == 4096 else 1  # 4096^2 bf16 operands (32 MiB) fit in L2 with room: rotate three
            a = [torch.randn(size, size, device="cuda", dtype=dtype) for _ in range(sets)]
            b = [torch.randn(size, size, device="cuda", dtype=dtype) for _ in range(sets)]
            i = [0]

            def product():
                j = i[0] % sets
                i[0] += 1
                return a[j] @ b[j]

            ms = median_ms(product, 20)
            # Accuracy of one product against float64 on a corner block (the full float64 product would be slow).
            ref = a[0][:256].double() @ b[0][:, :256].double()
            got = (a[0] @ b[0])[:256, :256].double()
            err = ((got - ref).norm() / ref.norm()).item()
            flops = 2.0 * size**3
            print(f"{name:44s} {size:6d} {ms:9.3f} {flops / ms / 1e9:9.1f} {err:9.1e}")
    torch.backends.cuda.matmul.allow_tf32 = False


def attention():
    b, h, t, d = 8, 12, 1024, 64
    scale = d**-0.5
    print(f"\n{'causal attention, bf16, B=8 H=12 T=1024 D=64':44s} {'fwd ms':>9s} {'fwd+bwd ms':>11s}")
    q, k, v = (torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16)
    mask = torch.ones(t, t, dtype=torch.bool, device="cuda").tril()

    def sdpa():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)

    def manual():
        s = (q @ k.transpose(-1, -2)) * scale
        p = torch.softmax(s.float().masked_fill(~mask, float("-inf")), dim=-1).to(torch.bfloat16)
        return p @ v

    ref = manual().float()
    for name, fn in (("scaled_dot_product_attention (is_causal)", sdpa), ("matmul + masked softmax", manual)):
        with torch.no_grad():
            fwd = median_ms(fn, 20)
            err = ((fn().float() - ref).norm() / ref.norm()).item()

        def both():
            out = fn()
            out.backward(dout)

        fb = median_ms(both, 10)
        print(f"{name:44s} {fwd:9.3f} {fb:11.3f}   (vs matmul+softmax: rel err {err:.1e})")


def main():
    if not torch.cuda.is_available():
        print("torch sees no CUDA device", file=sys.stderr)
        return 1
    p = torch.cuda.get_device_properties(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuBLAS via torch, device {p.name}, "
          f"{p.multi_processor_count} SMs, {p.total_memory / 2**30:.1f} GiB")
    torch.manual_seed(0)
    copy_bandwidth()
    matmuls()
    attention()
    return 0


if __name__ == "__main__":
    sys.exit(main())
