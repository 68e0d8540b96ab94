#!/usr/bin/env python3
"""tenax vs PyTorch DCP: what an asynchronous checkpoint blocks the training loop for, side by side in one run.

The same state on both sides: 4 float32 tensors per rank, the given bytes in all, in memory already touched, one rank.
For each size, in turn:
  tenax  `tenax-bench-checkpoint --sizes SIZE` (its `direct` row): the blocking part of Checkpointer::save() (copy into
         staging memory with the CRC32C of every block, on the staging threads it prints) and the background write
         to `wait()` (HDF5 files, fsync, commit), next to a single-thread memcpy of the same bytes.
  DCP    `torch.distributed.checkpoint.async_save` to the same file system, timed until it returns (staging: DCP's
         copy of the state dict) and until its future completes (the write), with
           default  no stager given: DCP creates one per call, which allocates fresh staging memory every save;
           reused   one DefaultStager (no pinning, no shared memory, synchronous staging: what a CPU allows) passed to
                    every call, which keeps its staging memory between saves (DCP's fastest CPU configuration);
         and torch's own `copy_` of the state into preallocated tensors, the floor of any staging.
Each size is measured for every --threads value: tenax's staging threads (0: its automatic choice), and torch with as
many (`torch.set_num_threads`), so both copy with the same cores.

    bench/torch/checkpoint_side_by_side.py --tenax build/bench/checkpoint/tenax-bench-checkpoint [--sizes 64M,256M,1G]

Exits 0 with "skipped: torch is not importable" when PyTorch is missing (it is never a dependency of tenax or its
tests); docs/benchmarks.md has the figures and how to install torch in a virtual environment.
"""
import argparse
import os
import platform
import shutil
import subprocess
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tenax", required=True, help="path of tenax-bench-checkpoint")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--sizes", default="64M,256M,1G", help="bytes per rank, K/M/G suffixes, comma-separated")
    p.add_argument("--reps", type=int, default=5, help="repetitions per size and side (median reported)")
    p.add_argument("--dir", default="/tmp/tenax-bench-dcp", help="directory on the file system to measure")
    p.add_argument("--threads", default="1,0",
                   help="staging threads of tenax = torch threads, comma-separated; 0: tenax's automatic choice")
    return p.parse_args()


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def tenax_row(a, size_text, threads):
    """The `direct` row of tenax-bench-checkpoint for one size: memcpy s, staging threads, save s, write s."""
    # --bind-to none: bound to one core (Open MPI's default for one or two ranks) the automatic rows would get 1 thread.
    cmd = [a.mpirun, "-n", "1", "--bind-to", "none", a.tenax, "--sizes", size_text, "--reps", str(a.reps), "--dir", a.dir + "/tenax",
           "--staging-threads", str(threads)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"checkpoint_side_by_side: {' '.join(cmd)} failed ({run.returncode}):\n{run.stderr[-4000:]}")
    out = run.stdout
    for line in out.splitlines():
        if "direct" in line and "|" in line and not line.startswith("#"):
            cells = line.split("|")
            memcpy_s, threads, save_s = cells[1].split()[:3]
            write_gib_s = float(cells[2].split()[0])
            size = parse_size(size_text)
            return {"memcpy": float(memcpy_s), "threads": int(threads), "save": float(save_s),
                    "write": size / (1 << 30) / write_gib_s}
    raise SystemExit(f"checkpoint_side_by_side: no 'direct' row in the output of {' '.join(cmd)}:\n{out}")


def dcp_row(torch, dcp, stager_type, options_type, a, size):
    state = {f"bulk{t}": torch.rand(size // 16) for t in range(4)}  # rand touches every page
    reused = stager_type(options_type(False, False, False, False))
    times = {"default": [], "reused": [], "default_total": [], "reused_total": [], "copy": []}
    targets = {k: torch.empty_like(v) for k, v in state.items()}
    try:
        for rep in range(a.reps + 1):  # the first round warms both up (imports, the reused stager's allocation)
            for kind in ("default", "reused") if rep % 2 == 0 else ("reused", "default"):
                path = os.path.join(a.dir, "dcp", f"{kind}_{rep}")
                state["bulk0"][rep] += 1.0  # every checkpoint differs
                t0 = time.perf_counter()
                future = dcp.async_save(state, checkpoint_id=path, no_dist=True,
                                        async_stager=reused if kind == "reused" else None)
                blocking = time.perf_counter() - t0
                future.result()
                total = time.perf_counter() - t0
                shutil.rmtree(path, ignore_errors=True)
                if rep > 0:
                    times[kind].append(blocking)
                    times[kind + "_total"].append(total)
            t0 = time.perf_counter()
            for k in state:
                targets[k].copy_(state[k])
            if rep > 0:
                times["copy"].append(time.perf_counter() - t0)
    finally:
        reused.close()
    return {k: median(v) for k, v in times.items()}


def main():
    a = parse_args()
    try:
        import torch
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
    except ImportError:
        print("skipped: torch is not importable (install it in a virtual environment; docs/benchmarks.md)")
        return 0
    import warnings
    warnings.filterwarnings("ignore")  # DCP warns that no process group exists: one rank, no_dist, on purpose
    os.makedirs(a.dir, exist_ok=True)
    print(f"# checkpoint_side_by_side: 1 rank, 4 f32 tensors, dir {a.dir}, {a.reps} reps (median)")
    print(f"# machine: {cpu_model()}, {os.cpu_count()} CPUs; load average {load_average()}; torch {torch.__version__}")
    print("# seconds; blocking = until save()/async_save returns; total = until the checkpoint is written")
    print(f"{'size':>8} {'thr':>3} | {'memcpy':>7} {'copy_':>7} | {'tenax':>7} {'DCP dflt':>8} {'DCP reuse':>9} | "
          f"{'tenax/DCP best':>14} | {'tenax tot':>9} {'DCP dflt':>8} {'DCP reuse':>9}")
    worst = 0.0
    for size_text, threads in ((s, int(t)) for s in a.sizes.split(",") for t in a.threads.split(",")):
        size = parse_size(size_text)
        tenax = tenax_row(a, size_text, threads)
        torch.set_num_threads(tenax["threads"])
        d = dcp_row(torch, dcp, DefaultStager, StagingOptions, a, size)
        best = min(d["default"], d["reused"])
        worst = max(worst, tenax["save"] / best)
        print(f"{size_text:>8} {tenax['threads']:>3} | {tenax['memcpy']:7.4f} {d['copy']:7.4f} | {tenax['save']:7.4f} "
              f"{d['default']:8.4f} {d['reused']:9.4f} | {tenax['save'] / best:13.2f}x | "
              f"{tenax['save'] + tenax['write']:9.3f} {d['default_total']:8.3f} {d['reused_total']:9.3f}", flush=True)
    shutil.rmtree(a.dir, ignore_errors=True)
    print(f"# load average at the end: {load_average()}")
    print(f"# target: tenax blocking <= DCP's best configuration at every size: {'met' if worst <= 1.0 else 'MISSED'} "
          f"(worst {worst:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
