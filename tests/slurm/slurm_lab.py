"""A private Slurm cluster for one test, built on scripts/slurm-lab.sh, and the helpers test cases use on it.

The cluster lives in a fresh temporary folder with ports chosen free at bring-up, so tests can run side by side.
Tear-down is guaranteed three ways: the `with` block's exit (also on assertion errors), SIGTERM/SIGINT/SIGHUP turned
into an exception that unwinds through it, and slurm-lab.sh's watchdog, which stops the cluster when this process is
gone even if it was SIGKILLed (as ctest does on a timeout).

Helpers cover what the end-to-end cases need: submitting (sbatch/srun with the plugin's options), waiting for job
states, requeueing, and killing or restarting a node, so that preemption and node-failure cases are a few lines each.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time


class LabError(AssertionError):
    """A test expectation about the cluster failed (reported with the relevant output)."""


def _raise_on_signal(signum, _frame):
    raise SystemExit(f"terminated by signal {signum}: tearing the Slurm lab down")


class Lab:
    def __init__(self, lab_script, plugin=None, plugin_args="", nodes=4, switches="halves", slurmd_timeout=10,
                 netns=False, isl_rate=None):
        self.lab_script = lab_script
        self.netns = netns  # every node a host of its own (a network namespace): slurm-lab.sh up --netns
        self.isl_rate = isl_rate
        self.plugin = plugin
        self.plugin_args = plugin_args
        self.nodes = nodes
        self.switches = switches
        self.slurmd_timeout = slurmd_timeout
        self.dir = None
        self.env = None

    # --- lifetime -----------------------------------------------------------------------------------------------
    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, _raise_on_signal)
        self.dir = tempfile.mkdtemp(prefix="tenax-slurm-")
        command = [self.lab_script, "up", self.dir, "--nodes", str(self.nodes), "--switches", self.switches,
                   "--slurmd-timeout", str(self.slurmd_timeout), "--owner-pid", str(os.getpid())]
        if self.plugin:
            command += ["--plugin", self.plugin, "--plugin-args", self.plugin_args]
        if self.netns:
            command += ["--netns"] + (["--isl-rate", self.isl_rate] if self.isl_rate else [])
        started = time.monotonic()
        try:
            self._check([*command], what="bring-up")
        except BaseException:
            self._down()
            raise
        self.env = dict(os.environ, SLURM_CONF=os.path.join(self.dir, "etc", "slurm.conf"))
        # A user's TENAX_* settings must not leak into the cases: each case sets what it tests.
        for name in [n for n in self.env if n.startswith("TENAX_")]:
            del self.env[name]
        print(f"lab: {self.nodes} nodes up in {time.monotonic() - started:.1f}s at {self.dir}", flush=True)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._dump_logs()
        self._down()
        if exc_type is None:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            print(f"lab: files kept for inspection in {self.dir}", flush=True)
        return False

    def _down(self):
        started = time.monotonic()
        subprocess.run([self.lab_script, "down", self.dir], check=False)
        print(f"lab: torn down in {time.monotonic() - started:.1f}s", flush=True)

    def _dump_logs(self):
        log_dir = os.path.join(self.dir, "log")
        for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
            with open(os.path.join(log_dir, name), errors="replace") as f:
                lines = f.readlines()[-25:]
            print(f"----- {name} (last {len(lines)} lines)", file=sys.stderr)
            sys.stderr.writelines(lines)

    # --- files and configuration --------------------------------------------------------------------------------
    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def set_plugstack(self, *lines):
        """Rewrites plugstack.conf; sbatch/srun and new steps read it at once (no restart needed)."""
        self._check([self.lab_script, "plugstack", self.dir, *lines], what="plugstack")

    def plugin_line(self, args):
        return f"required {self.plugin} {args}"

    # --- commands -----------------------------------------------------------------------------------------------
    def run(self, command, env=None, timeout=60, input=None):
        """Runs a client command against this cluster; returns the CompletedProcess (text)."""
        full_env = dict(self.env, **(env or {}))
        return subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=timeout, input=input,
                              cwd=self.dir)

    def _check(self, command, what, env=None, timeout=120):
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise LabError(f"{what} failed (exit {result.returncode}): {' '.join(command)}\n"
                           f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result

    def check(self, command, env=None, timeout=60):
        result = self.run(command, env=env, timeout=timeout)
        if result.returncode != 0:
            raise LabError(f"exit {result.returncode}: {' '.join(command)}\nstdout:\n{result.stdout}\n"
                           f"stderr:\n{result.stderr}")
        return result

    def sbatch(self, args, script, env=None):
        """Submits `script` (text) with sbatch `args`; returns the job id."""
        path = self.path(f"job-{time.monotonic_ns()}.sh")
        with open(path, "w") as f:
            f.write(script)
        result = self.check(["sbatch", "--parsable", f"--chdir={self.dir}", *args, path], env=env)
        return int(result.stdout.strip().split(";")[0])

    def job_info(self, job_id):
        """`scontrol show job` as a dict (JobState, Restarts, NodeList, ...)."""
        result = self.run(["scontrol", "show", "job", "-o", str(job_id)])
        if result.returncode != 0:
            return {}
        return dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", result.stdout))

    def wait_job(self, job_id, states=("COMPLETED",), timeout=60):
        """Waits until the job reaches one of `states`; fails early if it ends in another terminal state."""
        terminal = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                    "DEADLINE", "PREEMPTED"}
        deadline = time.monotonic() + timeout
        state = "?"
        while time.monotonic() < deadline:
            state = self.job_info(job_id).get("JobState", "?")
            if state in states:
                return state
            if state in terminal:
                break
            time.sleep(0.2)
        raise LabError(f"job {job_id} is {state}, expected one of {states} within {timeout}s\n"
                       f"{self.run(['scontrol', 'show', 'job', str(job_id)]).stdout}")

    def queued_jobs(self):
        return self.run(["squeue", "-h", "-o", "%i"]).stdout.split()

    def requeue(self, job_id):
        self.check(["scontrol", "requeue", str(job_id)])

    def kill_node(self, node):
        """Simulates a node failure: its slurmd, slurmstepd processes and tasks get SIGKILL."""
        self._check([self.lab_script, "kill-node", self.dir, node], what=f"kill-node {node}")

    def start_node(self, node):
        self._check([self.lab_script, "start-node", self.dir, node], what=f"start-node {node}")

    # Faults of a netns lab: silent and reversible (slurm-lab.sh partition-node, freeze-node, throttle-node).
    def net_fault(self, fault, node, *args):
        self._check([self.lab_script, fault, self.dir, node, *args], what=f"{fault} {node}")

    def wait_idle(self, timeout=30):
        self._check([self.lab_script, "wait-idle", self.dir, str(timeout)], what="wait-idle", timeout=timeout + 10)


def expect(condition, message):
    if not condition:
        raise LabError(message)


def expect_refused(result, *fragments):
    """A command refused by the plugin: non-zero exit and every fragment in its stderr."""
    expect(result.returncode != 0,
           f"expected a refusal, got exit 0\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    for fragment in fragments:
        expect(fragment in result.stderr, f"expected {fragment!r} in stderr:\n{result.stderr}")


# --- training runs under tenax-launch (preemption and node-failure cases) -------------------------------------------
def wait_until(predicate, timeout, what):
    """Polls `predicate` until it returns something true; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise LabError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


def read_text(path):
    """The file's text, or "" when it does not exist (yet)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def build_artifact(tools, *relative):
    """A program of the same build tree as the placement printer (<build>/tests/slurm/tenax-placement-print)."""
    build_root = os.path.dirname(os.path.dirname(os.path.dirname(tools.placement_print)))
    path = os.path.join(build_root, *relative)
    if not os.access(path, os.X_OK):
        raise LabError(f"{path} is missing: build the targets tenax-launch and tenax_launch_test_worker first")
    return path


def training_script(launcher, worker, run_dir, checkpoint_dir, launcher_args, worker_args, exports=()):
    """A batch script whose shell becomes tenax-launch (exec: Slurm's batch signals must reach the launcher itself),
    supervising the deterministic MPI worker over srun --mpi=pmix. Emulated nodes share one host, so Open MPI's
    shared-memory transport would collide between nodes: TCP only (the lab gives each node its own TmpFS).
    `exports`: further NAME=value settings for the job's environment."""
    command = " ".join([launcher, "--mode", "slurm", "--run-dir", run_dir, "--checkpoint-dir", checkpoint_dir,
                        *launcher_args, "--", worker, *worker_args])
    return ("#!/bin/bash\n"
            "export OMPI_MCA_btl=self,tcp\n" +
            "".join(f"export {setting}\n" for setting in exports) +
            "echo \"batch start: restart=${SLURM_RESTART_COUNT-unset} nodes=$SLURM_JOB_NODELIST\"\n"
            f"mkdir -p {checkpoint_dir} {run_dir}\n"
            f"exec {command}\n")


def final_checksums(text):
    """Every "final parameters checksum: <hex>" the worker printed."""
    return re.findall(r"final parameters checksum: ([0-9a-f]{16})", text)
