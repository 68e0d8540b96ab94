#!/usr/bin/python3
"""Goodput under failures: the GPT example under tenax-launch, a random rank killed (SIGKILL) every T seconds.

    bench/checkpoint/goodput_under_failures.py --build build [--ranks 4] [--duration 120] [--intervals 10,30,60]
        [--shared-dir DIR]

For each failure interval T and each checkpoint configuration, one run of --duration seconds: tenax-launch (local mode,
mpirun) supervises tenax-example-gpt on the Debian licence texts; every T seconds (from a seeded schedule) one rank of
the running attempt, chosen at random, is killed with SIGKILL; at the end the launcher gets SIGTERM (the emergency
checkpoint, exit 75) and its goodput summary (from the run's ledger) is read. Configurations, side by side in one run:

  shared/20        checkpoints to the shared directory every 20 steps
  shared/auto      the automatic (Young/Daly) interval from the measured save cost and the run's own MTBF
  local/5+shared/50  a node-local copy every 5 steps (TENAX_CKPT_LOCAL_DIR on /dev/shm), shared every 50
  local/auto+shared/auto  both tiers at their automatic intervals (each from its own measured save cost)
  shared/auto@mtbf, local/auto+shared/auto@mtbf
                   the same with TENAX_MTBF set to T: a site that configured its failure rate, so that the first
                   attempt does not run on the 24 h default until the run's own failures give a rate

The table gives goodput, the failures seen, the time lost to rollback (steps redone), the periodic checkpoints' stalls,
the final checkpoints' (the emergency checkpoint of the stop: the ledger's own row) and the mean recovery per failure
(detection + teardown + relaunch + load, from the ledger). "without stop" is the goodput with the stop's checkpoint
left out of the wall time: what the failure schedule and the intervals cost, which a run of any length pays at the
same rate; the stop's checkpoint is paid once per run and weighs more the shorter the run. With ranks on one host
there is no partner node: the node-local rows measure tier 0 alone.

The shared tier is a directory in the scratch area (the machine's own disk) unless --shared-dir names another, such as
a remote mount made by slow_shared_dir.sh beside this script:

    bench/checkpoint/slow_shared_dir.sh --rate 100mbit -- bench/checkpoint/goodput_under_failures.py --build build \
        --shared-dir {}
"""

import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# name: (the example's checkpoint options, whether the node-local tier is on, whether TENAX_MTBF is set to T)
CONFIGS = {
    "shared/20": (["--checkpoint-every", "20"], False, False),
    "shared/auto": (["--checkpoint-every", "auto"], False, False),
    "shared/auto@mtbf": (["--checkpoint-every", "auto"], False, True),
    "local/5+shared/50": (["--checkpoint-every", "50", "--checkpoint-local-every", "5"], True, False),
    "local/auto+shared/auto": (["--checkpoint-every", "auto", "--checkpoint-local-every", "auto"], True, False),
    "local/auto+shared/auto@mtbf": (["--checkpoint-every", "auto", "--checkpoint-local-every", "auto"], True, True),
}


def dataset(build, work):
    data = os.path.join(work, "dataset")
    if os.path.isdir(data):
        return data
    tool = os.path.join(build, "data", "src", "tenax-data")
    model = os.path.join(work, "tokenizer.model")
    subprocess.run([tool, "train-tokenizer", "--input", "/usr/share/common-licenses", "--vocab", "512", "--output",
                    model], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([tool, "encode", "--input", "/usr/share/common-licenses", "--tokenizer", model, "--output", data,
                    "--validation-fraction", "0.1"], check=True, stdout=subprocess.DEVNULL)
    return data


def newest_attempt_pids(run_dir, ranks):
    attempts = sorted(glob.glob(os.path.join(run_dir, "heartbeat", "attempt-*")),
                      key=lambda p: int(p.rsplit("-", 1)[1]))
    if not attempts:
        return None, {}
    pids = {}
    for r in range(ranks):
        try:
            with open(os.path.join(attempts[-1], f"rank-{r}.json")) as f:
                beat = json.load(f)
            if beat.get("step", -1) >= 1:
                pids[r] = int(beat["pid"])
        except (OSError, ValueError):
            pass
    return attempts[-1], pids


def one_run(args, data, name, interval, work, rng):
    gpt_args, local, site_mtbf = CONFIGS[name]
    run_root = tempfile.mkdtemp(prefix="goodput-", dir=work)
    checkpoint_dir = os.path.join(args.shared_dir or run_root, os.path.basename(run_root) + "-ckpt")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("TENAX_MTBF", None)
    env.pop("TENAX_NODE_MTBF", None)
    if site_mtbf:
        env["TENAX_MTBF"] = f"{interval:g}s"
    local_dir = None
    if local:
        local_dir = tempfile.mkdtemp(prefix="tenax-goodput-", dir="/dev/shm")
        env["TENAX_CKPT_LOCAL_DIR"] = local_dir
    command = [os.path.join(args.build, "launcher", "src", "tenax-launch"), "-n", str(args.ranks),
               "--run-dir", os.path.join(run_root, "run"), "--checkpoint-dir", checkpoint_dir,
               "--max-restarts", "100000", "--no-progress-limit", "100000", "--backoff", "100ms",
               "--heartbeat-interval", "100ms", "--kill-grace", "500ms", "--",
               *(["env", "-u", "TENAX_RUN_SHARED_MTBF"] if args.no_shared_mtbf else []),
               os.path.join(args.build, "examples", "gpt", "tenax-example-gpt"), "--data", data,
               "--hidden", "128", "--layers", "4", "--heads", "4", "--seq-len", "64", "--batch", "16",
               "--micro-batch", "4", "--tp", "2", "--steps", "100000000", "--log-every", "100000",
               "--validate-every", "0", "--sample-tokens", "0", *gpt_args]
    output_path = os.path.join(run_root, "out.txt")
    with open(output_path, "w") as out:
        launcher = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    started = time.monotonic()
    next_kill = started + interval * (0.5 + rng.random())
    kills = 0
    while time.monotonic() - started < args.duration and launcher.poll() is None:
        if time.monotonic() >= next_kill:
            _, pids = newest_attempt_pids(os.path.join(run_root, "run"), args.ranks)
            if pids:
                victim = rng.choice(sorted(pids))
                try:
                    os.kill(pids[victim], signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass
                next_kill += interval
        time.sleep(0.05)
    if launcher.poll() is None:
        launcher.send_signal(signal.SIGTERM)
    code = launcher.wait(timeout=300)
    text = open(output_path).read()
    m = re.search(r"goodput ([\d.]+) % \(productive ([\d.]+) s of ([\d.]+) s wall; \d+ invocation\(s\), (\d+) attempt"
                  r"\(s\), (\d+) failure", text)
    rows = dict((k.strip(), float(v)) for k, v in re.findall(r"^  ([a-z ()]+?)\s+([\d.]+) s\s+[\d.]+ %$", text, re.M))
    if local_dir:
        shutil.rmtree(local_dir, ignore_errors=True)
    if not m:
        print(f"# {name} T={interval}: no goodput summary (exit {code}); output in {output_path}", flush=True)
        return None
    failures = int(m.group(5))
    saves = re.search(r"checkpoints committed: (\d+) shared, (\d+) node-local", text)
    recovery = sum(rows.get(k, 0.0) for k in ("failure detection", "teardown", "relaunch", "checkpoint load"))
    if not args.keep:
        # The checkpoints and heartbeats go; the launcher's output and the ledger stay (kilobytes), so that a run whose
        # figures stand out can still be read afterwards.
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
        for bulky in (os.path.join("run", "heartbeat"), os.path.join("run", "metrics")):
            shutil.rmtree(os.path.join(run_root, bulky), ignore_errors=True)
    return {"goodput": float(m.group(1)), "wall": float(m.group(3)), "kills": kills, "failures": failures,
            "lost": rows.get("work lost (rollback)", 0.0), "stall": rows.get("checkpoint stalls", 0.0),
            "final": rows.get("final checkpoints", 0.0), "productive": float(m.group(2)),
            "recovery": recovery / failures if failures else 0.0, "exit": code,
            "shared_saves": int(saves.group(1)) if saves else -1, "local_saves": int(saves.group(2)) if saves else -1}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--duration", type=float, default=120)
    parser.add_argument("--intervals", default="10,30,60")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    parser.add_argument("--no-shared-mtbf", action="store_true",
                        help="run the program without TENAX_RUN_SHARED_MTBF, so that the shared tier's automatic "
                             "interval assumes every failure needs it (the single-level interval, for before/after "
                             "comparisons of the two-level one)")
    parser.add_argument("--shared-dir", default=None,
                        help="where the shared tier's checkpoints go (default: the scratch directory)")
    parser.add_argument("--keep", action="store_true",
                        help="keep each run's whole directory under --work (by default only its output and ledger)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="tenax-goodput-bench-")
    os.makedirs(work, exist_ok=True)
    data = dataset(args.build, work)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"# goodput under failures: {args.ranks} ranks, {args.duration:.0f} s per run, seed {args.seed}; "
          f"CPU {cpu} x {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}"
          f"{'; without TENAX_RUN_SHARED_MTBF' if args.no_shared_mtbf else ''}", flush=True)
    shared = args.shared_dir or work
    fs_type = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", shared], capture_output=True,
                             text=True).stdout.strip()
    print(f"# shared tier: {shared} ({fs_type or '?'}); node-local tier: /dev/shm", flush=True)
    print(f"{'failure every':>13} {'configuration':>27} {'goodput':>8} {'without stop':>12} {'failures':>8} "
          f"{'lost s':>7} {'stalls s':>8} {'final s':>7} {'recovery s':>10} {'shared saves':>12} {'local saves':>11}",
          flush=True)
    for interval in (float(t) for t in args.intervals.split(",")):
        for name in args.configs.split(","):
            rng = random.Random(f"{args.seed}-{interval}")  # the same failure schedule for every configuration
            r = one_run(args, data, name, interval, work, rng)
            if r:
                steady = 100 * r["productive"] / (r["wall"] - r["final"]) if r["wall"] > r["final"] else 0.0
                print(f"{interval:>11.0f} s {name:>27} {r['goodput']:>7.1f}% {steady:>11.1f}% {r['failures']:>8} "
                      f"{r['lost']:>7.2f} {r['stall']:>8.2f} {r['final']:>7.2f} {r['recovery']:>10.3f} "
                      f"{r['shared_saves']:>12} {r['local_saves']:>11}", flush=True)
    print(f"# load average at the end {os.getloadavg()[0]:.2f}; each run's output and ledger: {work}/goodput-*",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
