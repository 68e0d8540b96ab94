"""The GPT example under real Slurm: placed by the plugin, surviving a lost node and a requeue, same final parameters.

The training program is tenax-example-gpt on real text (the licence texts Debian ships in /usr/share/common-licenses,
tokenised by tenax-data with a 512-piece BPE), supervised by tenax-launch as the batch shell, 2 nodes x 2 ranks over
srun --mpi=pmix. Nothing tells the program its layout but the plugin: --tenax-layout=tp=2,pp=2 exports TENAX_LAYOUT,
and each task's rank is the one the placement gives it (TENAX_RANK). Four runs on one cluster:
- reference: uninterrupted, for the checksum of the final parameters (layout-independent, printed by the example),
  saving at the automatic interval with the site's node MTBF (plugstack.conf node_mtbf_hours) over its 2 nodes;
- node failure: a job of 3 nodes (--no-kill, --tenax-spares=1); once a checkpoint is committed, the node of the step
  that is not the batch host loses its slurmd, steps and ranks to SIGKILL, and its node-local checkpoint copies
  (--tenax-ckpt-local-dir=<lab>/node-local/%n, a copy every 5 steps) are deleted. The launcher excludes it and
  resumes on the spare from the node-local tier: the lost ranks' copies are fetched from the partner node that kept
  them. At the job's end the plugin's job epilog removes the job's copies from every node (another job's stay);
- requeue: `scontrol requeue` mid-run: SIGTERM to the launcher and the ranks, the engine's emergency checkpoint, the
  launcher's exit 75, Slurm runs the job again and it resumes from that checkpoint;
- preemption: a job of the high partition (PreemptMode=REQUEUE over low) needs every node; Slurm sends the batch shell
  SIGUSR1 (sbatch --signal=B:USR1, preempt_send_user_signal), the launcher forwards it through srun, the same
  emergency checkpoint, exit 75 and requeue follow.
Every interrupted run must end with the reference checksum. (Slurm's time-limit warning is the same SIGUSR1 path; its
case, time_limit.py, needs a run paced to outlast the limit, which the test worker's step time gives.)
"""

import glob
import os
import re
import shutil
import time

from cases.node_failure import step_nodes
from slurm_lab import (LabError, build_artifact, expect, final_checksums, read_text, training_script,
                       wait_until)

STEPS = 120
CHECKPOINT_EVERY = 10
GPT_ARGS = ["--steps", str(STEPS), "--hidden", "64", "--layers", "2",
            "--heads", "2", "--seq-len", "32", "--batch", "8", "--micro-batch", "2", "--log-every", "20",
            "--validate-every", "60", "--validation-samples", "8", "--sample-tokens", "16"]
LAUNCHER_ARGS = ["--tasks-per-node", "2", "--preempt-grace", "30s", "--startup-timeout", "30s"]


def make_dataset(tools, lab):
    tool = build_artifact(tools, "data", "src", "tenax-data")
    corpus, model, data = "/usr/share/common-licenses", lab.path("tokenizer.model"), lab.path("dataset")
    expect(os.path.isdir(corpus), f"{corpus} is missing (Debian's base-files ships it)")
    for command in ([tool, "train-tokenizer", "--input", corpus, "--vocab", "512", "--output", model],
                    [tool, "encode", "--input", corpus, "--tokenizer", model, "--output", data,
                     "--validation-fraction", "0.1"]):
        lab.check(command, timeout=120)
    return data


def committed_steps(checkpoint_dir):
    names = os.listdir(checkpoint_dir) if os.path.isdir(checkpoint_dir) else []
    steps = [int(m.group(1)) for m in (re.fullmatch(r"step_(\d+)", n) for n in names) if m]
    return sorted(s for s in steps if os.path.exists(os.path.join(checkpoint_dir, f"step_{s}", "manifest.json")))


def partner_copies_since(local, step):
    """The ranks whose partner copy of `step` or later is complete somewhere under the node-local directories."""
    ranks = set()
    for path in glob.glob(os.path.join(local, "*", "tenax-*", "partner", "rank_*", "step_*", "manifest.json")):
        parts = path.split(os.sep)
        committed = re.fullmatch(r"step_(\d+)", parts[-2])  # not step_N.tmp, a copy still being written
        if committed and int(committed.group(1)) >= step:
            ranks.add(parts[-3])
    return ranks


def submit(tools, lab, data, name, sbatch_args, nodes=2, gpt_args=(), exports=(), every=str(CHECKPOINT_EVERY)):
    launcher = build_artifact(tools, "launcher", "src", "tenax-launch")
    gpt = build_artifact(tools, "examples", "gpt", "tenax-example-gpt")
    checkpoint_dir, run_dir, output = lab.path(name, "ckpt"), lab.path(name, "run"), lab.path(f"{name}.out")
    script = training_script(launcher, gpt, run_dir, checkpoint_dir, LAUNCHER_ARGS,
                             ["--data", data, *GPT_ARGS, "--checkpoint-every", every, *gpt_args], exports)
    job = lab.sbatch([f"-N{nodes}", "--ntasks-per-node=2", "--tenax-layout=tp=2,pp=2", f"--job-name={name}",
                      "-o", output, "--open-mode=append", *sbatch_args], script)
    return job, output, checkpoint_dir, run_dir


def wait_for(lab, job, output, timeout):
    try:
        lab.wait_job(job, timeout=timeout)
    except LabError as error:
        raise LabError(f"{error}\n----- {output}\n{read_text(output)}") from None


def wait_mid_run(lab, job, checkpoint_dir, output):
    """Until a checkpoint past step 20 is committed and the job still runs: training, well before its end."""
    wait_until(lambda: any(s >= 20 for s in committed_steps(checkpoint_dir)) or
               lab.job_info(job).get("JobState") not in ("PENDING", "RUNNING"), 90,
               f"job {job} to commit a checkpoint past step 20:\n{read_text(output)}")
    expect(lab.job_info(job).get("JobState") == "RUNNING", f"job {job} ended early:\n{read_text(output)}")
    return max(committed_steps(checkpoint_dir))


def check_final(name, text, reference, at_least):
    resumed = [int(s) for s in re.findall(r"resumed from \S+ at step (\d+)", text)]
    expect(resumed and at_least <= resumed[-1] < STEPS,
           f"{name}: the last attempt should resume from a checkpoint at or after step {at_least}: {resumed}\n{text}")
    sums = final_checksums(text)
    expect(sums == [reference], f"{name}: final checksum {sums}, uninterrupted run {reference}\n{text}")
    return resumed[-1]


def run(tools):
    with tools.lab(slurmd_timeout=3) as lab:
        # A site that gives its nodes' failure rate (1 h: a job of two nodes fails every 30 min).
        lab.set_plugstack(lab.plugin_line(f"topology_file={lab.path('etc', 'topology.conf')} node_mtbf_hours=1"))
        data = make_dataset(tools, lab)

        # The reference saves at the automatic interval (saves do not change the result): its MTBF is the site's
        # per-node figure over the nodes the ranks span, counted by the runtime.
        started = time.monotonic()
        job, output, _, _ = submit(tools, lab, data, "reference", ["-p", "debug"], every="auto")
        wait_for(lab, job, output, 120)
        text = read_text(output)
        expect("layout tp=2,pp=2,dp=1" in text, f"the example should take its layout from the plugin:\n{text}")
        expect(re.search(r"checkpoint interval \(automatic, Young/Daly\): \d+ steps [^\n]* an MTBF of 1800\.0 s "
                         r"from TENAX_NODE_MTBF \(1h\) over 2 nodes", text),
               f"the automatic interval should assume the site's node MTBF over the job's 2 nodes:\n{text}")
        expect(re.search(r"validation loss \d", text) and "sample: " in text,
               f"the example should report a validation loss and a sample:\n{text}")
        sums = final_checksums(text)
        expect(len(sums) == 1, f"the uninterrupted run should print one final checksum:\n{text}")
        reference = sums[0]
        print(f"reference: GPT checksum {reference} in {time.monotonic() - started:.1f}s", flush=True)

        # A node lost mid-run, with its node-local checkpoint copies (one directory per emulated node: %n).
        started = time.monotonic()
        local = lab.path("node-local")
        # Another job's copies on every node: the job epilog must leave them.
        foreign = "tenax-00000000000000ab"
        for node in ("n1", "n2", "n3", "n4"):
            os.makedirs(os.path.join(local, node, foreign, "rank_0"))
            with open(os.path.join(local, node, foreign, "job-id"), "w") as f:
                f.write("999999\n")
        job, output, checkpoint_dir, run_dir = submit(
            tools, lab, data, "node_failure", ["-p", "debug", "--no-kill", "--tenax-spares=1",
                                               "--tenax-max-restarts=3", f"--tenax-ckpt-local-dir={local}/%n"],
            nodes=3, gpt_args=["--checkpoint-local-every", "5"])
        wait_mid_run(lab, job, checkpoint_dir, output)
        nodes = wait_until(lambda: step_nodes(lab, job), 10, f"the running step of job {job}")
        batch_host = lab.job_info(job).get("BatchHost")
        expect(len(nodes) == 2 and batch_host in nodes,
               f"the first attempt should use 2 nodes with {batch_host}: {nodes}")
        victim = next(n for n in nodes if n != batch_host)
        at_step = max(committed_steps(checkpoint_dir))
        # Partner copies travel in the background: lose the node only once every rank's copy of a step at least as new
        # as the shared one has reached its partner (earlier, falling back to the shared tier is the right answer).
        wait_until(lambda: len(partner_copies_since(local, at_step)) == 4, 60,
                   f"partner copies of step {at_step} or later for all 4 ranks under {local}:\n{read_text(output)}")
        lab.kill_node(victim)
        shutil.rmtree(os.path.join(local, victim))  # the node's own storage goes with it
        print(f"node failure: killed {victim} after checkpoint step {at_step}", flush=True)
        wait_for(lab, job, output, 120)
        text = read_text(output)
        expect(re.search(rf"node {victim} excluded", text), f"the launcher should exclude {victim}:\n{text}")
        expect(victim in read_text(f"{run_dir}/bad-nodes.txt"), f"{victim} is not in {run_dir}/bad-nodes.txt")
        resumed = check_final("node failure", text, reference, at_step)
        # The victim's ranks had no copy left on any node of theirs: loading node-locally means their partner's copies
        # were fetched to the spare.
        source = re.findall(r"resumed from (\S+) at step", text)[-1]
        expect(source.startswith(local + "/"), f"node failure: the restart should load the node-local tier (the lost "
                                               f"node's copies from their partners), loaded {source}\n{text}")
        print(f"node failure: resumed at step {resumed} without {victim} from {source}, checksum {reference}, "
              f"{time.monotonic() - started:.1f}s", flush=True)
        check_local_copies_removed(lab, job, local, foreign, batch_host)
        lab.start_node(victim)
        lab.wait_idle(timeout=30)

        # Requeued by the administrator mid-run (SIGTERM to the launcher and the ranks alike), then preempted by a
        # job of the high partition (SIGUSR1 to the batch shell only: the launcher forwards it to the ranks).
        interrupted(tools, lab, data, reference, "requeue", ["-p", "debug", "--requeue"], lab.requeue, "SIGTERM")
        interrupted(tools, lab, data, reference, "preemption", ["-p", "low", "--requeue", "--signal=B:USR1@600"],
                    lambda job: preempt_all_nodes(lab), "SIGUSR1")


def check_local_copies_removed(lab, job, local, foreign, batch_host):
    """After the job (COMPLETED: every node's epilog has run), only the other job's folder is left on each node. The
    batch host's copies are removed by tenax-launch as well; the other nodes' only by the plugin's job epilog."""
    removed_by_epilog = []
    for node in sorted(os.listdir(local)):
        left = sorted(os.listdir(os.path.join(local, node)))
        expect(left == [foreign], f"node-local copies of job {job} left on {node} after its end: {left}")
        log = read_text(lab.path("log", f"slurmd-{node}.log"))
        if re.search(rf"tenax: job {job} on {node}: removed [1-9]\d* node-local checkpoint folder", log):
            removed_by_epilog.append(node)
    others = [n for n in removed_by_epilog if n != batch_host]
    expect(others, f"the job epilog should have removed job {job}'s copies on a node besides {batch_host}: "
                   f"slurmd logs say {removed_by_epilog}")
    print(f"node failure: node-local copies removed at the job's end by the epilog on {', '.join(removed_by_epilog)}",
          flush=True)


def preempt_all_nodes(lab):
    """A job of the high partition (PreemptMode=REQUEUE over low) that needs every node, whole."""
    return lab.sbatch(["-p", "high", "-N4", "--exclusive", "-o", lab.path("high.out")], "#!/bin/bash\nsrun -N4 true\n")


def interrupted(tools, lab, data, reference, name, sbatch_args, interrupt, signal):
    """A run interrupted mid-run by `interrupt(job)`: the engine's emergency checkpoint, the launcher's exit 75 and
    requeue, and the job's second run resuming from that checkpoint with the reference checksum."""
    started = time.monotonic()
    job, output, checkpoint_dir, _ = submit(tools, lab, data, name, sbatch_args)
    wait_mid_run(lab, job, checkpoint_dir, output)
    interrupt(job)
    wait_for(lab, job, output, 120)
    text = read_text(output)
    expect(f"received {signal}: forwarded {signal} to the ranks" in text,
           f"{name}: the launcher should forward {signal} to the ranks:\n{text}")
    emergency = [int(s) for s in re.findall(r"preempted: emergency checkpoint of step (\d+) committed", text)]
    expect(len(emergency) == 1, f"{name}: expected one emergency checkpoint, got {emergency}\n{text}")
    expect(lab.job_info(job).get("Restarts") == "1", f"{name}: the job should have run twice:\n{text}")
    resumed = check_final(name, text, reference, emergency[0])
    expect(resumed == emergency[0], f"{name}: resumed at {resumed}, emergency checkpoint {emergency[0]}")
    print(f"{name}: emergency checkpoint at step {emergency[0]}, resumed there, checksum {reference}, "
          f"{time.monotonic() - started:.1f}s", flush=True)
