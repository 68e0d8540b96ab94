"""The job epilog gives up on a hung node-local directory after its deadline and never fails or drains the node.

A job of user `nobody` names a node-local checkpoint directory on a file system that hangs (hung_fs.py: every lookup
blocks, as on a dead NFS server). When the job ends, the epilog's removal blocks in the kernel; after 30 s the plugin
kills it, logs that it stopped and that the rest is left in place, and returns success: the job completes (an epilog
that failed or ran into Slurm's own epilog time-out would leave it COMPLETING and drain the node), the node stays
available, and a second job runs on it.
"""

import os
import pwd
import re
import shutil
import tempfile
import time

from hung_fs import HungFileSystem
from slurm_lab import expect, read_text


def run(tools):
    nobody = pwd.getpwnam("nobody")
    base = tempfile.mkdtemp(prefix="tenax-epilog-deadline-")
    os.chmod(base, 0o755)
    try:
        with tools.lab() as lab, HungFileSystem(os.path.join(base, "hung")) as hung:
            started = time.monotonic()
            job = int(lab.check(["sbatch", "--parsable", f"--uid={nobody.pw_uid}", "--chdir=/tmp", "-o", "/dev/null",
                                 "-N1", "-w", "n1", f"--tenax-ckpt-local-dir={hung.mountpoint}/%n", "--wrap",
                                 "true"]).stdout.strip().split(";")[0])
            lab.wait_job(job, timeout=100)
            took = time.monotonic() - started
            log = read_text(lab.path("log", "slurmd-n1.log"))
            expect(re.search(rf"tenax: job {job} on n1: removing the node-local checkpoint copies under "
                             rf"{re.escape(hung.mountpoint)}/n1 took longer than 30 s; stopped, the rest is left in "
                             r"place", log), f"slurmd's log should say the removal was stopped:\n{log[-3000:]}")
            expect(took >= 30, f"the job completed {took:.1f} s after submission: the epilog did not wait for the "
                               f"removal")
            node = lab.run(["scontrol", "show", "node", "n1"]).stdout
            expect(not re.search(r"State=\S*(DRAIN|DOWN|FAIL)", node), f"n1 should stay available:\n{node}")
            second = int(lab.check(["sbatch", "--parsable", "--chdir=/tmp", "-o", "/dev/null", "-N1", "-w", "n1",
                                    "--tenax-ckpt-local-dir=none", "--wrap", "true"]).stdout.strip().split(";")[0])
            lab.wait_job(second, timeout=60)
            print(f"job {job}: the epilog stopped the hung removal and the job completed after {took:.1f} s; n1 "
                  f"ran job {second} next", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
