#!/usr/bin/env python3
"""tenax vs PyTorch: the same GPT, batch and optimizer trained on the same CPU, side by side in one run.

The tenax side is `tenax-bench-training --model gpt` (tenax::models::gpt on the engine): its single-rank reference row
for one thread, its data-parallel row over N ranks for N threads. The PyTorch side is the same architecture written
with torch.nn (pre-LayerNorm blocks, fused QKV, causal attention through scaled_dot_product_attention, tanh GeLU MLP
4x wide, learned positions, final LayerNorm, untied output head without bias), the same initialisation scheme,
AdamW with tenax's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01) and the same gradient accumulation over
micro-batches, on torch.set_num_threads(N). Both sides train on uniformly random tokens (the speed of a step does
not depend on the data); both time `--steps` steps after `--warmup` ones.

    bench/torch/gpt_side_by_side.py --tenax build/bench/training/tenax-bench-training [--threads 1,2] [...]

On a GPU (`--device cuda`, one rank, `--precision bf16` for torch.autocast to bfloat16 against tenax's bf16 policy)
the PyTorch side runs eagerly (no torch.compile) with its default cuDNN/flash SDPA, and the table adds each side's
model FLOP utilisation: tenax's as tenax-bench-training prints it (against the bf16 matmul rate it measures in the
same run), PyTorch's from the same FLOP count and the ratio of step times.

Exits 0 with "skipped: torch is not importable" when PyTorch is missing (it is never a dependency of tenax or its
tests); docs/benchmarks.md has the figures and how to install torch in a virtual environment.
"""
import argparse
import os
import re
import subprocess
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tenax", required=True, help="path of tenax-bench-training")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--threads", default="1,2", help="comma list: threads for PyTorch = ranks for tenax")
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    return p.parse_args()


def torch_gpt(torch, a):
    nn, F = torch.nn, torch.nn.functional
    std = 0.02

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            h = a.hidden
            self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x):
            b, t, h = x.shape
            q, k, v = self.qkv(self.ln_1(x)).view(b, t, 3, a.heads, h // a.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, h))
            return x + self.fc2(F.gelu(self.fc1(self.ln_2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(a.vocab, a.hidden)
            self.wpe = nn.Embedding(a.seq_len, a.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(a.layers))
            self.ln_f = nn.LayerNorm(a.hidden)
            self.head = nn.Linear(a.hidden, a.vocab, bias=False)
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif p.dim() == 2:
                    residual = name.endswith("proj.weight") or name.endswith("fc2.weight")
                    nn.init.normal_(p, 0.0, std / (2 * a.layers) ** 0.5 if residual else std)
            nn.init.normal_(self.wpe.weight, 0.0, std / 2)

        def forward(self, tokens, targets):
            x = self.wte(tokens) + self.wpe.weight[: tokens.shape[1]]
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.reshape(-1, a.vocab), targets.reshape(-1))

    return Gpt()


def torch_ms_per_step(torch, a, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(1234)
    model = torch_gpt(torch, a).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    micro = a.batch // a.micro_batch
    data = torch.randint(0, a.vocab, (a.warmup + a.steps, a.batch, a.seq_len + 1), device=a.device)
    lowp = a.precision == "bf16"

    def step(i):
        opt.zero_grad(set_to_none=True)
        for m in range(micro):
            rows = data[i, m * a.micro_batch:(m + 1) * a.micro_batch]
            with torch.autocast(a.device, dtype=torch.bfloat16, enabled=lowp):
                loss = model(rows[:, :-1], rows[:, 1:]) / micro
            loss.backward()
        opt.step()

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    for i in range(a.warmup):
        step(i)
    sync()
    t0 = time.perf_counter()
    for i in range(a.warmup, a.warmup + a.steps):
        step(i)
    sync()
    return 1e3 * (time.perf_counter() - t0) / a.steps


def tenax_ms_per_step(a, ranks):
    cmd = [a.mpirun, "-n", str(ranks), a.tenax, "--model", "gpt", "--layouts", "reference" if ranks == 1 else "all",
           "--vocab", str(a.vocab), "--hidden", str(a.hidden), "--layers", str(a.layers), "--heads", str(a.heads),
           "--seq-len", str(a.seq_len), "--batch", str(a.batch), "--micro-batch", str(a.micro_batch),
           "--steps", str(a.steps), "--warmup", str(a.warmup), "--lr", str(a.lr), "--device", a.device,
           "--precision", a.precision]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    row = "1 rank (reference)" if ranks == 1 else f"tp=1,pp=1,dp={ranks}"
    for line in out.splitlines():
        if line.startswith(row + " "):
            # Its header's machine and matrix-product lines, which say what the figure was measured with.
            header = [h for h in out.splitlines() if h.startswith(("# machine:", "# CPU matrix products:", "# bf16"))]
            mfu = line.split()[-1] if line.rstrip().endswith("%") else None
            return float(line[len(row):].split()[0]), header, mfu
    raise SystemExit(f"gpt_side_by_side: no '{row}' row in the output of {' '.join(cmd)}:\n{out}")


def main():
    a = parse_args()
    try:
        import torch
    except ImportError:
        print("skipped: torch is not importable (install it in a virtual environment; docs/benchmarks.md)")
        return 0
    if a.batch % a.micro_batch or a.hidden % a.heads:
        raise SystemExit("gpt_side_by_side: --batch must be a multiple of --micro-batch, --hidden of --heads")
    tokens = a.batch * a.seq_len
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpt_side_by_side: --device cuda but torch sees no GPU")
    print(f"# GPT vocab {a.vocab} hidden {a.hidden} layers {a.layers} heads {a.heads} seq {a.seq_len}, "
          f"batch {a.batch} (micro-batch {a.micro_batch}), {a.precision}, AdamW; {a.steps} timed steps after "
          f"{a.warmup}")
    gpu = f", {torch.cuda.get_device_name(0)}" if a.device == "cuda" else ""
    print(f"# torch {torch.__version__}, {os.cpu_count()} CPUs{gpu}")
    print(f"{'threads':>8} {'tenax ms/step':>14} {'torch ms/step':>14} {'tenax tok/s':>12} {'torch tok/s':>12} "
          f"{'tenax/torch':>12}" + (f" {'tenax MFU':>10} {'torch MFU':>10}" if a.device == "cuda" else ""))
    headers = []
    for threads in (int(t) for t in a.threads.split(",")):
        tenax_ms, header, mfu = tenax_ms_per_step(a, threads)
        headers += [h for h in header if h not in headers]
        torch_ms = torch_ms_per_step(torch, a, threads)
        line = (f"{threads:>8} {tenax_ms:>14.2f} {torch_ms:>14.2f} {1e3 * tokens / tenax_ms:>12.0f} "
                f"{1e3 * tokens / torch_ms:>12.0f} {torch_ms / tenax_ms:>11.2f}x")
        if a.device == "cuda" and mfu:
            tenax_mfu = float(mfu.rstrip("%"))
            line += f" {tenax_mfu:>9.1f}% {tenax_mfu * tenax_ms / torch_ms:>9.1f}%"
        print(line, flush=True)
    print("\n".join("# tenax " + h[2:] for h in headers))
    print(f"# torch matrix products: {'MKL' if torch.backends.mkl.is_available() else 'no MKL'}, "
          f"{torch.backends.cpu.get_cpu_capability()} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
