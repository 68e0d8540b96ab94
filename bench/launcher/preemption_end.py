#!/usr/bin/python3
"""How long a preemption takes to end: the GPT example stopped mid-run, locally (mpirun) and under Slurm (srun).

    python3 bench/launcher/preemption_end.py --build build [--trials 10] [--modes local,slurm]

Each trial starts the GPT example (2 layers, hidden 64, tp=2 x pp=2 on 4 ranks, a checkpoint every 10 steps) under
tenax-launch, waits until it has committed a checkpoint past step 20, and asks it to stop: locally SIGTERM to
tenax-launch; under Slurm (a private lab cluster of 4 emulated nodes, scripts/slurm-lab.sh, 2 nodes x 2 ranks,
needs root) alternately SIGUSR1 to the batch shell (Slurm's preemption signal, `scancel --signal=USR1 --batch`) and
`scontrol requeue` (SIGTERM to every process of the job). The ranks take the emergency checkpoint and exit 75. Per
trial, from the run's ledger and heartbeat files:
- "records -> end": from the last rank's exit record (its heartbeat file's modification time) to the attempt's end
  in the ledger: what the process manager (mpirun, srun) and the launcher add once the ranks are done;
- "signal -> end": from the signal to the launcher's end record;
- "final ckpt": the emergency checkpoint's blocking time (the ledger's final_checkpoint_s);
- whether the attempt was a clean preemption ("clean"), whether all four ranks' exit records say 75 ("all-75"), and
  whether rank 0's step-metrics summary reached the output.
"""

import argparse
import glob
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "slurm"))
sys.dont_write_bytecode = True

from slurm_lab import Lab, read_text, training_script, wait_until  # noqa: E402

GPT_ARGS = ["--steps", "100000000", "--hidden", "64", "--layers", "2", "--heads", "2", "--seq-len", "32", "--batch",
            "8", "--micro-batch", "2", "--log-every", "20", "--validate-every", "0", "--sample-tokens", "0",
            "--checkpoint-every", "10"]
LAUNCHER_ARGS = ["--preempt-grace", "30s", "--startup-timeout", "60s"]


def dataset(build, work):
    tool = os.path.join(build, "data", "src", "tenax-data")
    model, data = os.path.join(work, "tokenizer.model"), os.path.join(work, "dataset")
    for command in ([tool, "train-tokenizer", "--input", "/usr/share/common-licenses", "--vocab", "512", "--output",
                     model],
                    [tool, "encode", "--input", "/usr/share/common-licenses", "--tokenizer", model, "--output", data,
                     "--validation-fraction", "0.1"]):
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return data


def committed_steps(checkpoint_dir):
    try:
        names = os.listdir(checkpoint_dir)
    except FileNotFoundError:
        return []
    return [int(n[5:]) for n in names if n.startswith("step_") and n[5:].isdigit() and
            os.path.exists(os.path.join(checkpoint_dir, n, "manifest.json"))]


def measure(run_dir, output, signalled_unix):
    """The trial's figures from its ledger (first attempt, end record) and heartbeat files."""
    with open(os.path.join(run_dir, "ledger.jsonl")) as f:
        records = [json.loads(line) for line in f]
    attempt = next(r for r in records if r.get("event") == "attempt")
    end = next(r for r in records if r.get("event") == "end")
    beats = glob.glob(os.path.join(run_dir, "heartbeat", "attempt-1", "rank-*.json"))
    if not beats:
        raise RuntimeError(f"no heartbeat files of attempt 1 under {run_dir}")
    exits_75 = 0
    for beat in beats:
        with open(beat) as f:
            exits_75 += json.load(f).get("exit") == 75
    last_record = max(os.path.getmtime(b) for b in beats)
    text = read_text(output)
    return {"records_to_end": attempt["end"] - last_record, "signal_to_end": end["time"] - signalled_unix,
            "final": attempt.get("final_checkpoint_s", 0.0), "clean": attempt["outcome"] == "preempted",
            "exits_75": exits_75, "summary": "tenax step metrics" in text}


def local_trial(args, data, work, trial):
    root = tempfile.mkdtemp(prefix=f"local-{trial}-", dir=work)
    run_dir, checkpoint_dir, output = (os.path.join(root, n) for n in ("run", "ckpt", "out.txt"))
    command = [os.path.join(args.build, "launcher", "src", "tenax-launch"), "-n", "4", "--run-dir", run_dir,
               "--checkpoint-dir", checkpoint_dir, *LAUNCHER_ARGS, "--",
               os.path.join(args.build, "examples", "gpt", "tenax-example-gpt"), "--data", data, "--tp", "2",
               "--pp", "2", *GPT_ARGS]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with open(output, "w") as out:
        launcher = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until(lambda: any(s >= 20 for s in committed_steps(checkpoint_dir)) or launcher.poll() is not None, 120,
                   f"a checkpoint past step 20 in {checkpoint_dir}")
        if launcher.poll() is not None:
            raise RuntimeError(f"tenax-launch ended (exit {launcher.returncode}) before it was asked to stop:\n"
                               f"{read_text(output)}")
        signalled = time.time()
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    return measure(run_dir, output, signalled)


def slurm_trial(args, lab, data, trial):
    name = f"trial{trial}"
    run_dir, checkpoint_dir, output = lab.path(name, "run"), lab.path(name, "ckpt"), lab.path(f"{name}.out")
    gpt = os.path.join(args.build, "examples", "gpt", "tenax-example-gpt")
    launcher = os.path.join(args.build, "launcher", "src", "tenax-launch")
    script = training_script(launcher, gpt, run_dir, checkpoint_dir, ["--tasks-per-node", "2", *LAUNCHER_ARGS],
                             ["--data", data, *GPT_ARGS])
    job = lab.sbatch(["-N2", "--ntasks-per-node=2", "--tenax-layout=tp=2,pp=2", f"--job-name={name}", "-o", output,
                      "-p", "debug", "--requeue"], script)
    wait_until(lambda: any(s >= 20 for s in committed_steps(checkpoint_dir)), 120,
               f"job {job} to commit a checkpoint past step 20:\n{read_text(output)}")
    signalled = time.time()
    if trial % 2 == 0:
        lab.check(["scancel", "--signal=USR1", "--batch", str(job)])
    else:
        lab.requeue(job)
    # The launcher's end record (it requeues the job, whose second run would start over): then the job goes.
    wait_until(lambda: '"event":"end"' in read_text(os.path.join(run_dir, "ledger.jsonl")), 120,
               f"job {job}'s launcher to end:\n{read_text(output)}")
    result = measure(run_dir, output, signalled)
    lab.check(["scancel", str(job)])
    lab.wait_idle(timeout=60)
    return result


def report(mode, how, results):
    if not results:
        return

    def stats(key):
        values = [r[key] for r in results]
        return f"{min(values):6.3f} {statistics.median(values):6.3f} {max(values):6.3f}"
    print(f"{mode:>6} {how:<28} {len(results):6d} | {stats('records_to_end')} | {stats('signal_to_end')} | "
          f"{stats('final')} | {sum(r['clean'] for r in results):5d} {sum(r['exits_75'] == 4 for r in results):8d} "
          f"{sum(r['summary'] for r in results):7d}", flush=True)
    each = " ".join(f"{r['records_to_end']:.3f}" for r in results)
    print(f"#        records -> end, each trial: {each}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--trials", type=int, default=10, help="per mode")
    parser.add_argument("--modes", default="local,slurm")
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    modes = args.modes.split(",")
    if "slurm" in modes and os.geteuid() != 0:
        parser.error("the Slurm mode runs a lab cluster, which needs root")
    work = tempfile.mkdtemp(prefix="tenax-preemption-end-")
    data = dataset(args.build, work)
    print(f"# preemption end: GPT 2 layers hidden 64, tp=2 pp=2 on 4 ranks, {args.trials} trials per mode; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("#   mode how                          trials | records -> end s (min med max) | signal -> end s "
          "(min med max) | final ckpt s (min med max) | clean all-75 summary")
    if "local" in modes:
        results = [local_trial(args, data, work, t) for t in range(args.trials)]
        report("local", "SIGTERM to tenax-launch", results)
    if "slurm" in modes:
        plugin = os.path.join(args.build, "spank-plugin", "src", "spank_tenax.so")
        with Lab(os.path.join(ROOT, "scripts", "slurm-lab.sh"), plugin=plugin) as lab:
            lab.set_plugstack(lab.plugin_line(f"topology_file={lab.path('etc', 'topology.conf')}"))
            lab_data = lab.path("dataset")
            subprocess.run(["cp", "-r", data, lab_data], check=True)
            results = [slurm_trial(args, lab, lab_data, t) for t in range(args.trials)]
        report("slurm", "SIGUSR1 to the batch shell", results[0::2])
        report("slurm", "scontrol requeue (SIGTERM)", results[1::2])
    print(f"# load average at the end {os.getloadavg()[0]:.2f}; outputs under {work}")


if __name__ == "__main__":
    main()
