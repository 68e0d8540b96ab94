"""A requeued job restarts with SLURM_RESTART_COUNT=1 and the same placement as its first run.

The job records its tasks' environment, then waits; the test requeues it (`scontrol requeue`, what preemption with
PreemptMode=REQUEUE does too) and checks the second run. This is the Slurm half of the preemption case; the full cases
(emergency checkpoint, identical final parameters) are preemption.py (test worker) and gpt_training.py (the GPT).
"""

import os
import time

from cases.placement_env import REPORT
from slurm_lab import expect


def run(tools):
    with tools.lab() as lab:
        lab.set_plugstack(lab.plugin_line(f"topology_file={lab.path('etc', 'topology.conf')}"))
        with open(lab.path("report.sh"), "w") as f:
            f.write("#!/bin/bash\n" + REPORT + "\n")
        marker = lab.path("first-run-done")
        script = (f"#!/bin/bash\nSTEP=run$SLURM_RESTART_COUNT srun bash {lab.path('report.sh')} >> {lab.path('runs')}\n"
                  f"if [ \"$SLURM_RESTART_COUNT\" = 0 ]; then touch {marker}; exec sleep 300; fi\n")
        job = lab.sbatch(["-N2", "--ntasks-per-node=2", "--tenax-layout=tp=2", "-o", "requeue-%j.out"], script)
        deadline = time.monotonic() + 30
        while not os.path.exists(marker):
            expect(time.monotonic() < deadline, f"the first run did not finish its step:\n{lab.job_info(job)}")
            time.sleep(0.2)
        lab.requeue(job)
        lab.wait_job(job, timeout=90)
        expect(lab.job_info(job).get("Restarts") == "1", f"job {job} was not restarted once: {lab.job_info(job)}")
        with open(lab.path("runs")) as f:
            reports = [dict(item.split("=", 1) for item in line.split()[1:])
                       for line in f if line.startswith("TASK ")]
        runs = {name: sorted((r["node"], r["localid"], r["rank"], r["restarts"]) for r in reports if r["step"] == name)
                for name in ("run0", "run1")}
        expect(len(runs["run0"]) == 4 and len(runs["run1"]) == 4, f"expected 4 tasks per run: {runs}")
        expect({r[3] for r in runs["run0"]} == {"0"}, f"first run: SLURM_RESTART_COUNT should be 0: {runs['run0']}")
        expect({r[3] for r in runs["run1"]} == {"1"}, f"second run: SLURM_RESTART_COUNT should be 1: {runs['run1']}")
        expect([r[:3] for r in runs["run0"]] == [r[:3] for r in runs["run1"]],
               f"the placement changed across the requeue: {runs}")
