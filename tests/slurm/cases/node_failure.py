"""A node dies under a real training run: tenax-launch excludes it, resumes on the spare node, same final parameters.

The job holds 3 nodes (--no-kill) for 2 nodes x 2 ranks of the deterministic MPI worker; the spare count comes from
the plugin (--tenax-spares=1 exports TENAX_SPARES to the batch shell, where tenax-launch reads it). Once the run has
committed a checkpoint, the second node of the running step (not the batch host, where the launcher lives) loses its
slurmd, slurmstepd and ranks to SIGKILL. The launcher must name and exclude that node, relaunch on the remaining node
and the spare from the newest checkpoint, and print the checksum of an uninterrupted run on 2 nodes (same world size).
"""

import re
import time

from cases.preemption import STEPS, checkpoint_steps, reference_checksum, submit_training, wait_mid_run
from slurm_lab import expect, final_checksums, read_text, wait_until


def step_nodes(lab, job):
    """The nodes of the job's running step (squeue -s), expanded."""
    listed = lab.run(["squeue", "-h", "-s", "-j", str(job), "-o", "%i %N"]).stdout.split()
    pairs = zip(listed[0::2], listed[1::2])
    nodelists = [nodes for step, nodes in pairs if not step.endswith((".batch", ".extern"))]
    if not nodelists:
        return []
    return lab.check(["scontrol", "show", "hostnames", nodelists[0]]).stdout.split()


def run(tools):
    with tools.lab(slurmd_timeout=3) as lab:
        lab.set_plugstack(lab.plugin_line(f"topology_file={lab.path('etc', 'topology.conf')}"))
        reference = reference_checksum(tools, lab)

        started = time.monotonic()
        job, output, checkpoint_dir, run_dir = submit_training(
            tools, lab, "node_failure", ["-p", "debug", "--no-kill", "--tenax-spares=1", "--tenax-max-restarts=3"],
            nodes=3, launcher_args=["--startup-timeout", "20s"])
        wait_mid_run(job, lab, checkpoint_dir, output)
        nodes = wait_until(lambda: step_nodes(lab, job), 10, f"the running step of job {job}")
        batch_host = lab.job_info(job).get("BatchHost")
        expect(len(nodes) == 2 and batch_host in nodes,
               f"the first attempt should use 2 nodes including the batch host {batch_host}: {nodes}")
        victim = next(n for n in nodes if n != batch_host)
        spare = next(n for n in lab.check(["scontrol", "show", "hostnames",
                                           lab.job_info(job)["NodeList"]]).stdout.split() if n not in nodes)
        killed_at = max(checkpoint_steps(checkpoint_dir))
        lab.kill_node(victim)
        print(f"node failure: killed {victim} after checkpoint step {killed_at}, spare {spare}", flush=True)
        lab.wait_job(job, timeout=90)

        text = read_text(output)
        info = lab.job_info(job)
        expect(info.get("Restarts") == "0", f"the job should survive the node loss without a requeue: {info}\n{text}")
        expect(re.search(rf"node {victim} excluded", text),
               f"the launcher should exclude {victim}:\n{text}")
        relaunches = re.findall(r"attempt (\d+): starting 4 ranks(?:, excluding \S+)?: srun (.*)", text)
        expect(len(relaunches) >= 2, f"expected a relaunch after the node loss:\n{text}")
        expect(f"--exclude={victim}" in relaunches[-1][1],
               f"the last attempt should exclude {victim}: {relaunches[-1][1]}")
        expect(f"launch task StepId={job}." in read_text(lab.path("log", f"slurmd-{spare}.log")),
               f"no step of job {job} ran on the spare node {spare}")
        expect(victim in read_text(f"{run_dir}/bad-nodes.txt"), f"{victim} is not in {run_dir}/bad-nodes.txt")
        # Rank 0's output of the attempt that lost the node may die in its stdio buffer: judge the last attempt.
        resumed = [int(s) for s in re.findall(r"resumed at step (\d+)", text)]
        expect(resumed and killed_at <= resumed[-1] < STEPS,
               f"the last attempt should resume from the checkpoint taken before the loss (>= {killed_at}): "
               f"{resumed}\n{text}")
        sums = final_checksums(text)
        expect(sums == [reference], f"final checksum {sums}, uninterrupted run {reference}\n{text}")
        print(f"node failure: {len(relaunches)} attempts, resumed at step {resumed[-1]} on the spare, "
              f"checksum {sums[0]}, {time.monotonic() - started:.1f}s", flush=True)

        lab.start_node(victim)
        lab.wait_idle(timeout=30)
