"""The job epilog removes a job's node-local checkpoint copies as the job's user, never as root.

A job of user `nobody` names its node-local directory at submission (--tenax-ckpt-local-dir); while it is held, the
test lays out on its node what a run leaves there, plus what a hostile or careless user could: two tier folders of
the job (nobody's), one of them holding a root-owned directory with a root-owned file and a symbolic link to a
root-owned directory outside; another job's folder. After the job (COMPLETED: the epilog has run) the job's plain
folder is gone; the root-owned file and the link's target are intact, which only a removal without root's rights
leaves (root may remove both), and the folder that could not be removed whole still names its job; slurmd's log
names what failed and why; the other job's folder is untouched. Without the privilege drop the first check fails.

A third folder of the job is held by a living process of nobody's, as a rank's checkpointer holds its folder (a shared
flock on the folder's in-use file), which outlives the job: the epilog leaves the folder whole and says so in slurmd's
log as an error (in a heterogeneous job, another component still running would hold it; that is logged at info).

Then a heterogeneous job: its second component's epilog removes the copies named after the leader's job id as well as
its own (heterogeneous_job below).
"""

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile

from slurm_lab import expect, read_text


def write(path, text, owner=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if owner is not None:
        os.chown(path, owner.pw_uid, owner.pw_gid)


def chown_tree(path, owner):
    for root, dirs, files in os.walk(path):
        os.chown(root, owner.pw_uid, owner.pw_gid)
        for name in files:
            os.chown(os.path.join(root, name), owner.pw_uid, owner.pw_gid)


# Holds a folder as a rank does (a shared flock on its in-use file) until its standard input closes.
HOLDER = """import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_SH)
print("held", flush=True)
sys.stdin.read()
"""


def hold_folder(folder, owner):
    """A process of `owner` holding `folder` (it has taken the lock when this returns)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, os.path.join(folder, "in-use")], user=owner.pw_uid,
                              group=owner.pw_gid, extra_groups=[], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    line = holder.stdout.readline()
    expect(line.strip() == "held", f"the holder of {folder} did not take its lock: {line!r}")
    return holder


def release(holder):
    """Ends a holder (closing its input ends it; killed should it not), never masking an error raised before."""
    holder.stdin.close()
    try:
        holder.wait(timeout=30)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait()


def heterogeneous_job(lab, base, nobody):
    """Each component of a heterogeneous job has a job id of its own (the leader's, then the next ones), and each
    component's epilog runs under its own id; tenax-launch names its ranks' copies after the id its batch script sees,
    the leader's. The epilog of the second component, on n3, must remove the copies named after the leader too (and
    after its own id, which ranks started without tenax-launch write), and still leave another job's alone. A folder
    named after the leader that a process still holds (as the other component's ranks, still running, would) is left,
    and the epilog says so at info level."""
    het_base = os.path.join(base, "het")
    os.makedirs(het_base)
    os.chmod(het_base, 0o755)
    option = f"--tenax-ckpt-local-dir={het_base}/%n"
    leader = int(lab.check(["sbatch", "--parsable", "-H", f"--uid={nobody.pw_uid}", "--chdir=/tmp", "-o",
                            "/dev/null", "-N1", "-w", "n2", option, ":", "-N1", "-w", "n3", option, "--wrap",
                            "true"]).stdout.strip().split(";")[0].split("+")[0])
    # The components' ids as Slurm numbered them (the leader's first).
    id_set = lab.job_info(leader).get("HetJobIdSet", "")
    expect(re.fullmatch(r"\d+[-,]\d+", id_set), f"job {leader} should be a heterogeneous job of two components: "
                                                 f"HetJobIdSet={id_set!r}")
    second = int(re.split(r"[-,]", id_set)[1])
    n3 = os.path.join(het_base, "n3")
    by_leader = os.path.join(n3, "tenax-00000000000000d1")
    by_component = os.path.join(n3, "tenax-00000000000000d2")
    foreign = os.path.join(n3, "tenax-00000000000000d3")
    held = os.path.join(n3, "tenax-00000000000000d4")
    for folder, owner_job in ((by_leader, leader), (by_component, second), (foreign, 999998), (held, leader)):
        write(os.path.join(folder, "rank_1", "step_5", "rank_1.h5"), "x" * 100)
        write(os.path.join(folder, "job-id"), f"{owner_job}\n")
    chown_tree(het_base, nobody)
    holder = hold_folder(held, nobody)
    try:
        lab.check(["scontrol", "release", str(leader)])
        lab.wait_job(leader, timeout=60)
        lab.wait_job(second, timeout=60)
    finally:
        release(holder)
    left = sorted(os.listdir(n3))
    expect(os.path.exists(os.path.join(held, "rank_1", "step_5", "rank_1.h5")),
           f"the second component's epilog removed a folder a process still held: {left}")
    log = read_text(lab.path("log", "slurmd-n3.log"))
    expect(re.search(rf"tenax: job {second} on n3: left the node-local checkpoint folder {re.escape(held)}: a process "
                     r"holds it \(another component of this heterogeneous job", log),
           f"slurmd's log on n3 should say which folder was left to the other component:\n{log[-3000:]}")
    expect(not os.path.exists(by_component), f"the second component's epilog kept a folder of its own id: {left}")
    expect(not os.path.exists(by_leader),
           f"the second component's epilog kept a folder named after the heterogeneous job's leader: {left}")
    expect(os.path.exists(os.path.join(foreign, "rank_1", "step_5", "rank_1.h5")), "another job's folder was touched")
    print(f"heterogeneous job {leader}+{second}: on the second component's node, the folders of either id removed, "
          f"another job's kept, a folder still held left and named", flush=True)


def run(tools):
    nobody = pwd.getpwnam("nobody")
    # Outside the lab's folder (mode 0700): the job's user must be able to reach its directory.
    base = tempfile.mkdtemp(prefix="tenax-local-cleanup-")
    os.chmod(base, 0o755)
    try:
        with tools.lab() as lab:
            job = int(lab.check(["sbatch", "--parsable", "-H", f"--uid={nobody.pw_uid}", "--chdir=/tmp", "-o",
                                 "/dev/null", "-N1", "-w", "n1", f"--tenax-ckpt-local-dir={base}/%n", "--wrap",
                                 "true"]).stdout.strip().split(";")[0])
            node_dir = os.path.join(base, "n1")
            plain = os.path.join(node_dir, "tenax-00000000000000aa")
            guarded = os.path.join(node_dir, "tenax-00000000000000bb")
            foreign = os.path.join(node_dir, "tenax-00000000000000cc")
            outside = os.path.join(base, "outside")
            write(os.path.join(plain, "rank_0", "step_5", "rank_0.h5"), "x" * 1000)
            write(os.path.join(plain, "job-id"), f"{job}\n")
            write(os.path.join(guarded, "rank_0", "step_5", "rank_0.h5"), "x" * 1000)
            write(os.path.join(guarded, "job-id"), f"{job}\n")
            write(os.path.join(foreign, "rank_0", "step_5", "rank_0.h5"), "x")
            write(os.path.join(foreign, "job-id"), "999999\n")
            held = os.path.join(node_dir, "tenax-00000000000000dd")
            write(os.path.join(held, "rank_0", "step_5", "rank_0.h5"), "x" * 1000)
            write(os.path.join(held, "job-id"), f"{job}\n")
            chown_tree(node_dir, nobody)
            holder = hold_folder(held, nobody)
            write(os.path.join(guarded, "rootdir", "secret"), "root's")  # root-owned, mode 0755: nobody cannot unlink
            write(os.path.join(outside, "precious"), "root's")
            os.symlink(outside, os.path.join(guarded, "escape"))
            os.lchown(os.path.join(guarded, "escape"), nobody.pw_uid, nobody.pw_gid)

            try:
                lab.check(["scontrol", "release", str(job)])
                lab.wait_job(job, timeout=60)
            finally:
                release(holder)

            left = sorted(os.listdir(node_dir))
            expect(not os.path.exists(plain), f"the job's folder should be removed: {left}")
            expect(os.path.exists(os.path.join(guarded, "rootdir", "secret")),
                   "a root-owned file in the job's folder was removed: the epilog did not drop to the job's user")
            expect(os.path.exists(os.path.join(outside, "precious")), "the target of a link in the folder was removed")
            expect(read_text(os.path.join(guarded, "job-id")).strip() == str(job),
                   "a folder left in part should still name its job")
            expect(not os.path.exists(os.path.join(guarded, "rank_0")) and not os.path.lexists(
                os.path.join(guarded, "escape")), f"what the job's user may remove should be gone: "
                                                  f"{sorted(os.listdir(guarded))}")
            expect(os.path.exists(os.path.join(foreign, "rank_0", "step_5", "rank_0.h5")),
                   "another job's folder was touched")
            expect(os.path.exists(os.path.join(held, "rank_0", "step_5", "rank_0.h5")),
                   f"a folder of the job that a living process holds was removed: {left}")
            log = read_text(lab.path("log", "slurmd-n1.log"))
            expect(re.search(rf"tenax: job {job} on n1: left the node-local checkpoint folder {re.escape(held)}: a "
                             r"process still holds it after the job ended", log),
                   f"slurmd's log should say which folder was left in use:\n{log[-3000:]}")
            expect(re.search(rf"tenax: job {job} on n1: removed 1 node-local checkpoint folder", log),
                   f"slurmd's log should say what the epilog removed:\n{log[-3000:]}")
            expect(re.search(rf"tenax: job {job} on n1: node-local checkpoint copies: .*secret: unlink failed: "
                             r"Permission denied", log), f"slurmd's log should name what could not be removed:\n"
                                                         f"{log[-3000:]}")
            print(f"job {job} of nobody: its folder removed, the root-owned file and the link's target kept, "
                  f"the failure logged, the folder in use left and named", flush=True)
            heterogeneous_job(lab, base, nobody)
    finally:
        shutil.rmtree(base, ignore_errors=True)
