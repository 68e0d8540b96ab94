"""Preemption of a real training run: emergency checkpoint, requeue, resume, bitwise the same final parameters.

tenax-launch is the batch shell of each job and supervises the deterministic MPI worker (srun --mpi=pmix, 2 nodes x 2
ranks). The test first runs it uninterrupted for the reference checksum, then interrupts it twice more:
- preemption: a job in `high` (PreemptMode=REQUEUE over `low`) needs every node; Slurm sends the low job's batch shell
  USR1 at once (sbatch --signal=B:USR1, preempt_send_user_signal), the launcher forwards it to the ranks, which finish
  their step, commit an emergency checkpoint and exit 75; the launcher requeues the job;
- `scontrol requeue`: SIGTERM to the launcher and the ranks alike, SIGKILL after KillWait; same checkpoint path;
- `scancel`: the same signals, but the job must stay cancelled (with its emergency checkpoint committed).
Each requeued job must restart once (SLURM_RESTART_COUNT=1), resume at the emergency checkpoint's step and print
the reference checksum.
"""

import json
import os
import re
import time

from slurm_lab import build_artifact, expect, final_checksums, read_text, training_script, wait_until

STEPS = 80
WORKER_ARGS = ["--steps", str(STEPS), "--checkpoint-every", "5", "--step-ms", "50", "--params", "256"]
LAUNCHER_ARGS = ["--tasks-per-node", "2", "--preempt-grace", "30s", "--startup-timeout", "60s"]


def checkpoint_steps(directory):
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return sorted(int(m.group(1)) for m in (re.fullmatch(r"ckpt-(\d+)\.bin", n) for n in names) if m)


def submit_training(tools, lab, name, sbatch_args, nodes=2, launcher_args=(), worker_args=WORKER_ARGS):
    """Submits one supervised training job; returns (job id, output file, checkpoint dir, run dir)."""
    launcher = build_artifact(tools, "launcher", "src", "tenax-launch")
    worker = build_artifact(tools, "tests", "launcher", "deterministic_worker")
    checkpoint_dir, run_dir, output = lab.path(name, "ckpt"), lab.path(name, "run"), lab.path(f"{name}.out")
    script = training_script(launcher, worker, run_dir, checkpoint_dir, [*LAUNCHER_ARGS, *launcher_args], worker_args)
    job = lab.sbatch([f"-N{nodes}", "--ntasks-per-node=2", f"--job-name={name}", "-o", output, "--open-mode=append",
                      *sbatch_args], script)
    return job, output, checkpoint_dir, run_dir


def reference_checksum(tools, lab, name="reference", worker_args=WORKER_ARGS):
    started = time.monotonic()
    job, output, _, _ = submit_training(tools, lab, name, ["-p", "debug"], worker_args=worker_args)
    lab.wait_job(job, timeout=60)
    sums = final_checksums(read_text(output))
    expect(len(sums) == 1, f"the uninterrupted run should print one final checksum:\n{read_text(output)}")
    print(f"{name}: checksum {sums[0]} in {time.monotonic() - started:.1f}s", flush=True)
    return sums[0]


def wait_mid_run(job, lab, checkpoint_dir, output):
    """Until the run has committed a periodic checkpoint past step 5: it is training, well before its end."""
    wait_until(lambda: any(s >= 10 for s in checkpoint_steps(checkpoint_dir)) or
               lab.job_info(job).get("JobState") not in ("PENDING", "RUNNING"), 45,
               f"job {job} to reach step 10:\n{read_text(output)}")
    expect(lab.job_info(job).get("JobState") == "RUNNING", f"job {job} ended early:\n{read_text(output)}")


def check_resumed(lab, job, output, checkpoint_dir, reference, how, signal):
    text = read_text(output)
    expect(f"received {signal}: forwarded {signal} to the ranks" in text and "stopping (exit 75)" in text,
           f"{how}: the launcher should forward {signal} to the ranks and exit 75 (preempted):\n{text}")
    info = lab.job_info(job)
    expect(info.get("Restarts") == "1", f"{how}: job {job} should have restarted once: {info}\n{text}")
    starts = re.findall(r"batch start: restart=(\S+)", text)
    # Slurm leaves SLURM_RESTART_COUNT unset on a job's first run.
    expect(len(starts) == 2 and starts[0] in ("unset", "0") and starts[1] == "1",
           f"{how}: SLURM_RESTART_COUNT of the two runs should be unset (or 0) then 1, got {starts}\n{text}")
    emergency = [int(s) for s in re.findall(r"preempted, emergency checkpoint at step (\d+)", text)]
    expect(len(emergency) == 1 and 0 < emergency[0] < STEPS,
           f"{how}: expected one emergency checkpoint before step {STEPS}, got {emergency}\n{text}")
    expect(emergency[0] in checkpoint_steps(checkpoint_dir),
           f"{how}: no checkpoint file for step {emergency[0]}: {checkpoint_steps(checkpoint_dir)}")
    resumed = [int(s) for s in re.findall(r"resumed at step (\d+)", text)]
    expect(len(resumed) == 2 and resumed == [0, emergency[0]],
           f"{how}: the requeued run should resume at step {emergency[0]}, resumed at {resumed}\n{text}")
    sums = final_checksums(text)
    expect(sums == [reference], f"{how}: final checksum {sums}, uninterrupted run {reference}\n{text}")
    print(f"{how}: emergency checkpoint at step {emergency[0]}, resumed after requeue, checksum {sums[0]}", flush=True)


def run(tools):
    with tools.lab() as lab:
        lab.set_plugstack(lab.plugin_line(f"topology_file={lab.path('etc', 'topology.conf')}"))
        reference = reference_checksum(tools, lab)

        # Preemption by a job in the high partition that needs every node.
        started = time.monotonic()
        job, output, checkpoint_dir, _ = submit_training(
            tools, lab, "preempted", ["-p", "low", "--requeue", "--signal=B:USR1@600"])
        wait_mid_run(job, lab, checkpoint_dir, output)
        # --exclusive: the low job leaves CPUs free on its nodes; only whole nodes force the preemption.
        high = lab.sbatch(["-p", "high", "-N4", "--exclusive", "-o", lab.path("high.out")],
                          "#!/bin/bash\nsrun -N4 true\n")
        lab.wait_job(high, timeout=60)
        lab.wait_job(job, timeout=60)
        check_resumed(lab, job, output, checkpoint_dir, reference, "preemption", "SIGUSR1")
        print(f"preemption: {time.monotonic() - started:.1f}s", flush=True)

        # Requeue by the administrator.
        started = time.monotonic()
        job, output, checkpoint_dir, _ = submit_training(tools, lab, "requeued", ["-p", "debug", "--requeue"])
        wait_mid_run(job, lab, checkpoint_dir, output)
        lab.requeue(job)
        lab.wait_job(job, timeout=60)
        check_resumed(lab, job, output, checkpoint_dir, reference, "scontrol requeue", "SIGTERM")
        print(f"scontrol requeue: {time.monotonic() - started:.1f}s", flush=True)

        # The user's scancel: the same SIGTERM, but a wish that the job end. The emergency checkpoint is taken and the
        # job stays cancelled (requeued, it came back after every scancel until it had trained to its end).
        started = time.monotonic()
        job, output, checkpoint_dir, run_dir = submit_training(tools, lab, "cancelled", ["-p", "debug", "--requeue"])
        wait_mid_run(job, lab, checkpoint_dir, output)
        lab.check(["scancel", str(job)])
        lab.wait_job(job, states=("CANCELLED",), timeout=60)
        text = read_text(output)
        info = lab.job_info(job)
        expect(f"Slurm job {job} was cancelled (scancel): not requeued" in text and "requeued Slurm job" not in text
               and info.get("Restarts") == "0", f"scancel: job {job} should end, not be requeued: {info}\n{text}")
        emergency = [int(s) for s in re.findall(r"preempted, emergency checkpoint at step (\d+)", text)]
        expect(len(emergency) == 1 and emergency[0] in checkpoint_steps(checkpoint_dir),
               f"scancel: expected one committed emergency checkpoint, got {emergency} and "
               f"{checkpoint_steps(checkpoint_dir)}\n{text}")
        # The ledger says so, so that the job submitted again starts with fresh limits and its wait in the queue is
        # not counted as a requeue's.
        ledger = f"{run_dir}/ledger.jsonl"

        def end_records():
            records = []
            for line in read_text(ledger).splitlines():
                try:
                    records.append(json.loads(line))
                except ValueError:  # a line being written
                    pass
            return [r for r in records if r.get("event") == "end"]
        wait_until(lambda: end_records(), 30, f"the cancelled job's end record in {ledger}")
        end = end_records()[-1]
        expect(end.get("cancelled") is True and end.get("exit_code") == 75,
               f"scancel: the ledger's end record should say cancelled, exit 75: {end}")
        print(f"scancel: emergency checkpoint at step {emergency[0]}, job cancelled, "
              f"{time.monotonic() - started:.1f}s", flush=True)
