"""A node dies mid-job: the job (--no-kill) survives on the remaining nodes and its next step is placed on them.

One node's slurmd, slurmstepd and tasks are SIGKILLed while a step runs on three nodes; Slurm marks the node DOWN,
kills that step, and a new two-node step inside the same job gets a fresh placement (world size 4, ranks matching the
placement library for the surviving nodes). The node then comes back (ReturnToService=1). This is the Slurm half of
the node-failure case; the full cases (tenax-launch excluding the node and resuming from the last checkpoint on a spare)
are node_failure.py (test worker), gpt_training.py (the GPT) and netns_faults.py (nodes as hosts).
"""

import os
import time

from cases.placement_env import REPORT, expected_ranks
from slurm_lab import expect


def run(tools):
    with tools.lab(slurmd_timeout=3) as lab:
        lab.set_plugstack(lab.plugin_line(f"topology_file={lab.path('etc', 'topology.conf')}"))
        with open(lab.path("report.sh"), "w") as f:
            f.write("#!/bin/bash\n" + REPORT + "\n")
        runs, marker = lab.path("runs"), lab.path("long-step-started")
        script = (f"#!/bin/bash\n"
                  f"STEP=before srun bash {lab.path('report.sh')} >> {runs}\n"
                  f"srun bash -c 'touch {marker}; exec sleep 300'\n"
                  f"STEP=after srun -N2 -n4 --ntasks-per-node=2 bash {lab.path('report.sh')} >> {runs}\n")
        job = lab.sbatch(["-N3", "--ntasks-per-node=2", "--no-kill", "--tenax-layout=tp=2", "-o", "loss-%j.out"],
                         script)
        deadline = time.monotonic() + 30
        while not os.path.exists(marker):
            expect(time.monotonic() < deadline, f"the long step did not start:\n{lab.job_info(job)}")
            time.sleep(0.2)
        victim = "n3"
        lab.kill_node(victim)
        lab.wait_job(job, timeout=90)
        info = lab.run(["sinfo", "-h", "-N", "-n", victim, "-o", "%T"]).stdout.split()
        expect(info and info[0].startswith("down"), f"{victim} should be down after its slurmd was killed: {info}")

        with open(runs) as f:
            reports = [dict(item.split("=", 1) for item in line.split()[1:]) for line in f if line.startswith("TASK ")]
        before = [r for r in reports if r["step"] == "before"]
        after = [r for r in reports if r["step"] == "after"]
        expect(len(before) == 6 and {r["world"] for r in before} == {"6"}, f"first step: {before}")
        expect(len(after) == 4, f"the step after the node loss should have 4 tasks: {after}")
        expect(victim not in {r["node"] for r in after}, f"a task ran on the dead node {victim}: {after}")
        wanted = expected_ranks(tools, lab, after[0]["nodelist"], "topology", "tp=2,pp=1,dp=2")
        for r in after:
            expect(r["world"] == "4" and r["layout"] == "tp=2,pp=1,dp=2", f"after the node loss: {r}")
            expect(int(r["rank"]) == wanted[(r["node"], int(r["localid"]))], f"rank differs from placement: {after}")

        lab.start_node(victim)
        lab.wait_idle(timeout=30)
