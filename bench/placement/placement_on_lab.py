#!/usr/bin/env python3
"""Placement measured on hosts: one training step's traffic, placed by the SPANK plugin three ways, on a Slurm lab whose
nodes are network namespaces behind two switches joined by a shaped link.

The lab (scripts/slurm-lab.sh up --netns --switches interleaved --isl-rate RATE) puts n1 and n3 under switch s1 and n2
and n4 under s2, so Slurm's node order alternates between the switches: a fragmented allocation, as on a cluster
whose node names do not follow the cabling. A job of the 4 nodes runs tenax-bench-layout-traffic as a step with
--tenax-placement=topology, block and none in turn (interleaved, --rounds times), one task per node, layout
tp=1,pp=2,dp=2 by default, with the plugin's default traffic ratios (TP 16 : DP 4 : PP 1) as the step's sizes. For each
policy the table gives the ranks' nodes, the bytes the cost model says leave a switch per step, the time the model
gives those bytes on the shaped link, and the measured step time (median of the rounds' medians); then the gain of
topology over block, measured against predicted.

Needs root (namespaces, Slurm daemons) and a build with the plugin:
    python3 bench/placement/placement_on_lab.py --build build [--isl-rate 100mbit] [--rounds 3]
"""

import argparse
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "slurm"))

from slurm_lab import Lab, LabError, read_text  # noqa: E402

POLICIES = ("topology", "block", "none")


def rate_bits(text):
    match = re.fullmatch(r"([1-9][0-9]*)(bit|kbit|mbit|gbit)", text)
    if not match:
        raise SystemExit(f"--isl-rate '{text}' is not a rate such as 100mbit")
    return int(match.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[match.group(2)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="the CMake build folder")
    parser.add_argument("--isl-rate", default="100mbit", help="rate of the link between the two switches (tc tbf)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each policy, interleaved")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per run")
    parser.add_argument("--layout", default="tp=1,pp=2,dp=2", help="--tenax-layout of the step (4 nodes x 1 task)")
    parser.add_argument("--unit", default="1M", help="bytes of the smallest kind (PP); TP is 16x, DP 4x")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the lab needs root: network namespaces and Slurm's daemons")
    unit = int(float(args.unit[:-1]) * 2**20) if args.unit.endswith("M") else int(args.unit)
    build = os.path.abspath(args.build)
    plugin = os.path.join(build, "spank-plugin", "src", "spank_tenax.so")
    bench = os.path.join(build, "bench", "placement", "tenax-bench-layout-traffic")
    for path in (plugin, bench):
        if not os.path.exists(path):
            raise SystemExit(f"{path} is missing: build the targets spank_tenax and tenax-bench-layout-traffic")
    link_rate = rate_bits(args.isl_rate)

    started = time.monotonic()
    lab = Lab(os.path.join(ROOT, "scripts", "slurm-lab.sh"), plugin=plugin, nodes=4, switches="interleaved",
              netns=True, isl_rate=args.isl_rate)
    with lab:
        topology = lab.path("etc", "topology.conf")
        lab.set_plugstack(lab.plugin_line(f"topology_file={topology}"))
        step = (f"{bench} --topology {topology} --link-rate {link_rate:.0f} --steps {args.steps} "
                f"--tp-bytes {16 * unit} --pp-bytes {unit} --dp-bytes {4 * unit}")
        lines = ["#!/bin/bash", "export OMPI_MCA_btl=self,tcp", "set -e"]
        for _ in range(args.rounds):
            for policy in POLICIES:
                lines.append(f"srun -N4 -n4 --ntasks-per-node=1 --mpi=pmix --tenax-layout={args.layout} "
                             f"--tenax-placement={policy} {step}")
        job = lab.sbatch(["-N4", "--ntasks-per-node=1", "-o", "placement-%j.out"], "\n".join(lines) + "\n")
        try:
            lab.wait_job(job, timeout=60 + args.rounds * len(POLICIES) * (30 + args.steps * 5))
        except LabError as error:
            raise LabError(f"{error}\n{read_text(lab.path(f'placement-{job}.out'))}") from None
        text = read_text(lab.path(f"placement-{job}.out"))
        isl = read_text(os.path.join(lab.dir, "etc", "topology.conf")).strip().replace("\n", "; ")

    runs = [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in text.splitlines()
            if line.startswith("layout-traffic:")]
    if len(runs) != args.rounds * len(POLICIES):
        raise SystemExit(f"expected {args.rounds * len(POLICIES)} results, got {len(runs)}:\n{text}")
    by_policy = {p: [r for r in runs if r["policy"] == p] for p in POLICIES}
    rows = {}
    for policy, results in by_policy.items():
        maps = {r["ranks"] for r in results}
        rows[policy] = {
            "ranks": " / ".join(sorted(maps)),
            "cross_mib": float(results[0]["cross_switch_bytes"]) / 2**20,
            "model_s": float(results[0]["model_cross_switch_s"]),
            "step_s": statistics.median(float(r["step_s"]) for r in results),
            "spread": (min(float(r["step_s"]) for r in results), max(float(r["step_s"]) for r in results)),
        }

    print(f"# placement on the lab of hosts: 4 nodes, switches {isl}, inter-switch link {args.isl_rate} (tc tbf), "
          f"layout {args.layout}, one task per node")
    print(f"# step: TP all-reduce {16 * unit / 2**20:g} MiB, PP swap {unit / 2**20:g} MiB, DP all-reduce "
          f"{4 * unit / 2**20:g} MiB; {args.rounds} runs x {args.steps} steps per policy, interleaved")
    print(f"{'policy':<10} {'ranks 0..3 on':<16} {'model: MiB across':>18} {'model: s on link':>17} "
          f"{'measured step s':>16} {'(min-max of runs)':>18}")
    for policy in POLICIES:
        r = rows[policy]
        print(f"{policy:<10} {r['ranks']:<16} {r['cross_mib']:>18.2f} {r['model_s']:>17.4f} {r['step_s']:>16.4f} "
              f"{r['spread'][0]:>8.4f}-{r['spread'][1]:.4f}")
    topo, block = rows["topology"], rows["block"]
    if topo["cross_mib"] > 0 and block["cross_mib"] > topo["cross_mib"]:
        # Where the link dominates the step, the step times stand as the bytes across it: the model's prediction of
        # the gain needs no link rate. The model's seconds (bytes at the nominal rate, both directions busy) are a
        # floor; how far the measured steps sit above them is what TCP over the shaped link and the collectives'
        # own algorithms add.
        predicted = block["cross_mib"] / topo["cross_mib"]
        measured = block["step_s"] / topo["step_s"]
        print(f"topology over block: step {measured:.2f}x faster, model {predicted:.2f}x (bytes across the link); "
              f"error {100 * (measured / predicted - 1):+.0f} %")
        print(f"measured step / model seconds on the link: topology {topo['step_s'] / topo['model_s']:.2f}, "
              f"block {block['step_s'] / block['model_s']:.2f}")
    else:
        print("the model predicts no gain of topology over block for this layout")
    print(f"# {time.monotonic() - started:.0f} s in all")


if __name__ == "__main__":
    main()
