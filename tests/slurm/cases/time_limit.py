"""A job that would outrun its time limit: Slurm's warning, the emergency checkpoint, the requeue, the same result.

tenax-launch is the batch shell (sbatch --time=1 --signal=B:USR1@20 --requeue) of the deterministic MPI worker, 2 nodes
x 2 ranks over srun --mpi=pmix. The first run is paced to need 100 s of steps, more than its 60 s limit: without the
warning Slurm would end it (TIMEOUT) and the job would be gone. slurmctld checks time limits every 30 s and sends the
warning at the first check within 30 s of "limit - 20 s" (measured on this Slurm: 10-40 s into the job), the kill at the
first check past the limit (60-90 s), so the ranks always have at least 20 s for the emergency checkpoint. The launcher
forwards SIGUSR1, the ranks finish their step and commit the checkpoint, the launcher requeues the job and exits 75.
The requeued run (SLURM_RESTART_COUNT=1) is not paced, so it ends well inside its own limit; it must resume at the
emergency checkpoint and print the uninterrupted run's checksum, and the job must end COMPLETED, never TIMEOUT.
"""

import time

from cases.preemption import STEPS, check_resumed, reference_checksum, submit_training
from slurm_lab import LabError, expect, read_text

TIME_LIMIT_S = 60
WARNING_S = 20
# The first run's pace: STEPS steps of this many ms take longer than the limit; the requeued run goes at full speed.
PACED_STEP_MS = 1250
assert STEPS * PACED_STEP_MS / 1000 > TIME_LIMIT_S + 30, "the first run must be unable to finish within its limit"
PACED_WORKER_ARGS = ["--steps", str(STEPS), "--checkpoint-every", "5", "--params", "256",
                     "--step-ms", f"$((SLURM_RESTART_COUNT>0?0:{PACED_STEP_MS}))"]


def run(tools):
    with tools.lab() as lab:
        reference = reference_checksum(tools, lab)

        started = time.monotonic()
        job, output, checkpoint_dir, _ = submit_training(
            tools, lab, "time_limit", ["-p", "debug", "--requeue", f"--time={TIME_LIMIT_S // 60}",
                                       f"--signal=B:USR1@{WARNING_S}"], worker_args=PACED_WORKER_ARGS)
        try:
            lab.wait_job(job, timeout=TIME_LIMIT_S + 90)
        except LabError as error:
            raise LabError(f"{error}\n----- {output}\n{read_text(output)}") from None
        text = read_text(output)
        expect("DUE TO TIME LIMIT" not in text, f"time limit: the job reached its limit instead of requeueing:\n{text}")
        check_resumed(lab, job, output, checkpoint_dir, reference, "time limit", "SIGUSR1")
        print(f"time limit: warned, requeued and completed with the reference checksum in "
              f"{time.monotonic() - started:.1f}s", flush=True)
