"""Nodes that are hosts: silent network faults under a real training run, on a lab of network namespaces.

Every node of the lab is a network namespace with its own address, joined to its leaf switch's bridge; slurmd, the
steps and the ranks (Open MPI over TCP) run inside it, so a fault is what a real cluster sees: no FIN, no RST, just
silence. Two faults, each on a job of 3 nodes (--no-kill, one spare) running 2 nodes x 2 ranks of the deterministic
MPI worker under tenax-launch, after it has committed a checkpoint:

- partition: the second node of the step leaves its switch (its processes keep running, and here, where the run
  directory is on the one host's disk, even keep beating). The other ranks wait in a collective: the attempt stalls,
  or Slurm declares the node down (SlurmdTimeout=3 s, found within its ping cycle) and kills the step, or Open MPI
  aborts on the unreachable peer, whichever comes first, and the first report names a rank on a healthy node. The
  launcher must probe the nodes, name the one that does not answer, exclude it and resume on the spare from the newest
  checkpoint, within the hang timeout (5 s) and the probe, never waiting for TCP's own timeouts;
- partition-heal: the same partition, healed as soon as the launcher has excluded the node, while the run goes on
  without it: the cut-off ranks wake up (their step was cancelled meanwhile) and must not disturb the new attempt;
- kill: the node dies outright (slurmd, the steps, every process of its namespace): its peers see their connections
  close, the probe finds nothing listening where its slurmd was;
- throttle: the node's link is throttled to 100 kbit/s under all-reduces of 256 KiB: the ranks wait together past the
  hang timeout and the node still answers, but late, behind the stalled traffic; the probe at the hang verdict names
  it as the node with the degraded link;
- freeze: every process of that node is stopped (SIGSTOP), with a SlurmdTimeout of 60 s and a hang timeout of 3 s, so
  the launcher notices before Slurm does: every rank of that node silent while the other node's ranks keep beating is
  a lost node, excluded at once, not a hang that gives a healthy node a strike.

Each must end with the uninterrupted run's checksum, and detection is bounded (checked from the ledger).
"""

import json
import re
import time

from cases.node_failure import step_nodes
from cases.preemption import WORKER_ARGS, checkpoint_steps, reference_checksum, submit_training, wait_mid_run
from slurm_lab import LabError, expect, final_checksums, read_text, wait_until


def attempts(run_dir):
    lines = read_text(f"{run_dir}/ledger.jsonl").splitlines()
    return [r for r in (json.loads(line) for line in lines if line.strip()) if r.get("event") == "attempt"]


def fault_run(tools, lab, reference, name, fault, undo, launcher_args, detect_bound_s, undo_once_excluded=False,
              fault_args=(), undo_args=(), worker_args=WORKER_ARGS):
    """Submits a training job, applies `fault` to the step's second node once a checkpoint is committed, and checks
    that the node is named, excluded and replaced by the spare, and that the run ends with the `reference` checksum
    (the uninterrupted run's).
    `undo` runs when the job has ended, or, with undo_once_excluded, as soon as the launcher has excluded the node (a
    partition that heals while the run goes on elsewhere: what still runs there must not disturb it)."""
    job, output, checkpoint_dir, run_dir = submit_training(
        tools, lab, name, ["-p", "debug", "--no-kill", "--tenax-spares=1", "--tenax-max-restarts=3"], nodes=3,
        launcher_args=["--startup-timeout", "30s", *launcher_args], worker_args=worker_args)
    wait_mid_run(job, lab, checkpoint_dir, output)
    nodes = wait_until(lambda: step_nodes(lab, job), 10, f"the running step of job {job}")
    batch_host = lab.job_info(job).get("BatchHost")
    expect(len(nodes) == 2 and batch_host in nodes, f"the first attempt should use 2 nodes with {batch_host}: {nodes}")
    victim = next(n for n in nodes if n != batch_host)
    at_step = max(checkpoint_steps(checkpoint_dir))
    faulted_at = time.time()
    lab.net_fault(fault, victim, *fault_args)
    print(f"{name}: {' '.join([fault, victim, *fault_args])} after checkpoint step {at_step}", flush=True)
    try:
        if undo_once_excluded:
            wait_until(lambda: re.search(rf"node {victim} excluded", read_text(output)), 60, f"{victim} excluded")
            lab.net_fault(undo, victim, *undo_args)
            print(f"{name}: {undo} {victim} once excluded, {time.time() - faulted_at:.1f}s after the fault", flush=True)
        lab.wait_job(job, timeout=120)
    except LabError as error:
        # What the launcher said is the first thing to read when the job ends otherwise.
        raise LabError(f"{error}\n----- {output}\n{read_text(output)}") from None
    finally:
        if not undo_once_excluded:
            lab.net_fault(undo, victim, *undo_args)

    text = read_text(output)
    expect(re.search(rf"node {victim} excluded", text), f"{name}: the launcher should exclude {victim}:\n{text}")
    records = attempts(run_dir)
    expect(len(records) >= 2, f"{name}: expected a relaunch after the fault:\n{text}")
    first = records[0]
    expect(first.get("outcome") == "node-lost" and first.get("node") == victim,
           f"{name}: the first attempt should be node-lost on {victim}: {first}\n{text}")
    detected = first["failure_noticed"] - faulted_at
    expect(0 <= detected <= detect_bound_s,
           f"{name}: the fault was noticed after {detected:.1f}s (bound {detect_bound_s}s): {first}")
    expect(victim in read_text(f"{run_dir}/bad-nodes.txt"), f"{name}: {victim} is not in {run_dir}/bad-nodes.txt")
    resumed = [int(s) for s in re.findall(r"resumed at step (\d+)", text)]
    expect(resumed and resumed[-1] >= at_step, f"{name}: the last attempt should resume at >= {at_step}: {resumed}")
    sums = final_checksums(text)
    expect(sums == [reference], f"{name}: final checksum {sums}, uninterrupted run {reference}\n{text}")
    print(f"{name}: {victim} noticed after {detected:.1f}s as {first['outcome']} ({first.get('summary')}), "
          f"resumed at step {resumed[-1]}, checksum {sums[0]}", flush=True)
    return victim


def run(tools):
    started = time.monotonic()
    with tools.lab(slurmd_timeout=3, netns=True, isl_rate="200mbit") as lab:
        lab.set_plugstack(lab.plugin_line(f"topology_file={lab.path('etc', 'topology.conf')}"))
        reference = reference_checksum(tools, lab)
        victim = fault_run(tools, lab, reference, "partition", "partition-node", "heal-node", ["--hang-timeout", "5s"],
                           detect_bound_s=15)
        lab.wait_idle(timeout=30)
        print(f"partition: {victim} back after healing", flush=True)
        # Healed while the run goes on without it: the cut-off ranks wake up to a world that has moved on.
        fault_run(tools, lab, reference, "partition-heal", "partition-node", "heal-node", ["--hang-timeout", "5s"],
                  detect_bound_s=15, undo_once_excluded=True)
        lab.wait_idle(timeout=60)
        # A node killed outright (slurmd, steps, every process of its namespace): its peers see the connections
        # close, and the probe finds nothing listening where its slurmd was.
        victim = fault_run(tools, lab, reference, "kill", "kill-node", "start-node", ["--hang-timeout", "5s"],
                           detect_bound_s=15)
        lab.wait_idle(timeout=60)
        print(f"kill: {victim} back after restarting its slurmd", flush=True)
        # A link throttled to a trickle (100 kbit/s both ways) under a run whose all-reduces are 256 KiB: every rank
        # waits in the collective past the hang timeout, none is silent, the node still answers — late, behind the
        # stalled traffic, which the probe at the hang verdict sees.
        heavy = [*WORKER_ARGS[:-1], "65536"]
        heavy_reference = reference_checksum(tools, lab, "reference-heavy", heavy)
        fault_run(tools, lab, heavy_reference, "throttle", "throttle-node", "throttle-node", ["--hang-timeout", "5s"],
                  detect_bound_s=15, fault_args=("100kbit",), undo_args=("off",), worker_args=heavy)
    # Slurm slow to notice (SlurmdTimeout 60 s), the launcher's hang timeout short: the heartbeats decide.
    with tools.lab(slurmd_timeout=60, netns=True) as lab:
        lab.set_plugstack(lab.plugin_line(f"topology_file={lab.path('etc', 'topology.conf')}"))
        reference = reference_checksum(tools, lab)
        fault_run(tools, lab, reference, "freeze", "freeze-node", "thaw-node", ["--hang-timeout", "3s"],
                  detect_bound_s=15)
    print(f"netns faults: {time.monotonic() - started:.1f}s", flush=True)
