#!/usr/bin/python3
"""Runs one end-to-end case against a real Slurm cluster (one ctest per case: slurm.<case>).

    run_case.py CASE --plugin spank_tenax.so --placement-print tenax-placement-print --lab-script slurm-lab.sh

A case is a module cases/<CASE>.py with a function run(tools) that brings up its own cluster(s) with
tools.lab(...) (a context manager: the cluster is always torn down) and raises on any failed expectation. To add a case
(preemption, node failure, ...), write cases/<name>.py and add `tenax_add_slurm_test(<name>)` to CMakeLists.txt.
"""

import argparse
import importlib
import os
import shutil
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

from slurm_lab import Lab  # noqa: E402


class Tools:
    """What a case gets: the built artefacts and a factory for labs."""

    def __init__(self, args):
        self.plugin = os.path.abspath(args.plugin)
        self.placement_print = os.path.abspath(args.placement_print)
        self.lab_script = os.path.abspath(args.lab_script)

    def lab(self, plugin_args="", **kwargs):
        return Lab(self.lab_script, plugin=self.plugin, plugin_args=plugin_args, **kwargs)


def missing_prerequisites():
    problems = []
    if os.geteuid() != 0:
        problems.append("must run as root (Slurm's daemons run as root in the lab)")
    for program in ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "ss"):
        if shutil.which(program) is None and not os.path.exists(f"/usr/sbin/{program}"):
            problems.append(f"{program} not found")
    if not os.path.isdir("/sys/fs/cgroup"):
        problems.append("no cgroup file system at /sys/fs/cgroup (slurmd 22.05 refuses to start without one)")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case")
    parser.add_argument("--plugin", required=True)
    parser.add_argument("--placement-print", required=True)
    parser.add_argument("--lab-script", required=True)
    args = parser.parse_args()

    problems = missing_prerequisites()
    if problems:
        print("slurm test cannot run: " + "; ".join(problems) +
              " (install the packages with scripts/install-deps.sh)", file=sys.stderr)
        return 1
    os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    case = importlib.import_module(f"cases.{args.case}")
    started = time.monotonic()
    try:
        case.run(Tools(args))
    except BaseException as e:  # noqa: B902 (SystemExit from a signal counts as a failure too)
        traceback.print_exc()
        print(f"FAILED slurm.{args.case} after {time.monotonic() - started:.1f}s: {e}", file=sys.stderr)
        return 1
    print(f"PASSED slurm.{args.case} in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
