"""The plugin's options at the user's prompt: listed by --help, bad values refused at submission (nothing queued) with
the plugin's message, admin limits enforced, precedence option > environment > admin default, and a bad admin
configuration refused when Slurm loads the plugin."""

from slurm_lab import expect, expect_refused

OPTIONS = ["--tenax ", "--tenax-ckpt-dir=DIR", "--tenax-layout=tp=N,pp=N[,dp=N]",
           "--tenax-placement=topology|block|none", "--tenax-max-restarts=N", "--tenax-spares=N",
           "--tenax-data-stage-dir=DIR", "--tenax-ckpt-every=N|auto", "--tenax-ckpt-local-every=N|auto"]


def check_help(lab):
    for command in ("sbatch", "srun", "salloc"):
        text = lab.check([command, "--help"]).stdout
        for option in OPTIONS:
            expect(option in text, f"{command} --help does not list {option!r}:\n{text}")
        expect("[tenax]" in text, f"{command} --help: the plugin's usage text is not prefixed")


def check_refusals(lab, ckpt_root):
    refusals = [
        (["--tenax-layout=tp=0"], {}, ["tenax: --tenax-layout=tp=0: 'tp=0' is not a degree", "e.g. tp=2,pp=1,dp=2"]),
        (["--tenax-layout=tp=2,ep=2"], {}, ["--tenax-layout=tp=2,ep=2: unknown key 'ep'"]),
        (["--tenax-placement=fastest"], {}, ["--tenax-placement=fastest: expected topology, block or none"]),
        (["--tenax-placement=none"], {}, ["allow_placement_none=no"]),
        (["--tenax-max-restarts=6"], {}, ["--tenax-max-restarts=6: expected a whole number from 0 to 5",
                                          "admin limit max_restarts"]),
        (["--tenax-spares=-1"], {}, ["--tenax-spares=-1: expected a whole number from 0 to 2"]),
        (["--tenax-ckpt-dir=relative/dir"], {}, ["--tenax-ckpt-dir=relative/dir: expected an absolute path"]),
        (["--tenax-ckpt-dir=/var/tmp/x"], {}, [f"checkpoints must lie under {ckpt_root}", "ckpt_root"]),
        ([f"--tenax-ckpt-dir={ckpt_root}/../escape"], {}, ["'.' and '..' components are not allowed"]),
        (["--tenax-ckpt-every=10s"], {}, ["--tenax-ckpt-every=10s: expected auto", "or whole steps"]),
        (["--tenax"], {"TENAX_CKPT_LOCAL_EVERY": "often"}, ["TENAX_CKPT_LOCAL_EVERY=often: expected auto"]),
        (["--tenax-data-stage-dir=local/stage"], {}, ["--tenax-data-stage-dir=local/stage: expected an absolute path"]),
        (["--tenax"], {"TENAX_DATA_STAGE_DIR": "/local/%x"}, ["TENAX_DATA_STAGE_DIR=/local/%x: unknown placeholder"]),
        # The environment layer is validated at submission too, and names the variable.
        (["--tenax"], {"TENAX_LAYOUT": "2x2"}, ["TENAX_LAYOUT=2x2: not three degrees"]),
        (["--tenax"], {"TENAX_MAX_RESTARTS": "50"}, ["TENAX_MAX_RESTARTS=50", "admin limit max_restarts"]),
        # A layout larger than any step is refused where it is typed (tp*pp once wrapped to 0 in int).
        (["--tenax-layout=tp=65536,pp=65536"], {},
         ["--tenax-layout=tp=65536,pp=65536: tp*pp = 4294967296 is more than the 1048576 tasks a step may have"]),
    ]
    for args, env, fragments in refusals:
        before = lab.queued_jobs()
        expect_refused(lab.run(["sbatch", *args, "--wrap", "true"], env=env), *fragments)
        expect(lab.queued_jobs() == before, f"sbatch {args} was refused but a job was queued anyway")
    # srun and salloc validate the same way.
    expect_refused(lab.run(["srun", "-N1", "--tenax-layout=tp=x", "true"]), "--tenax-layout=tp=x")
    expect_refused(lab.run(["salloc", "-N1", "--tenax-max-restarts=99", "true"]), "--tenax-max-restarts=99")
    # srun knows the step's size: a layout that does not match it is refused before any task starts.
    expect_refused(lab.run(["srun", "-N2", "-n4", "--tenax-layout=tp=2,pp=1,dp=4", "true"]),
                   "--tenax-layout=tp=2,pp=1,dp=4: tp*pp*dp = 8 but the step has 4 tasks")
    expect_refused(lab.run(["srun", "-N2", "-n6", "--tenax-layout=tp=4", "true"]), "tp*pp = 4 does not divide")
    expect_refused(lab.run(["srun", "-N2", "-n3", "--tenax", "true"]), "cannot be spread evenly over 2 nodes")
    # An uneven split that only slurmstepd can see (4 CPUs per node pack 4,2,1,1) fails the step, not silently.
    expect_refused(lab.run(["srun", "-N4", "-n8", "--tenax", "true"]), "needs the same number of tasks on every node",
                   "--ntasks-per-node")
    # A step over two components of a heterogeneous job is not one run: refused as such (it once blamed the user for
    # setting SLURM_STEP_NODELIST).
    expect_refused(lab.run(["srun", "-N1", "-n2", "--tenax", "true", ":", "-N1", "-n2", "true"]),
                   "this step spans several components of a heterogeneous job", "srun --het-group=N")
    # Inside an allocation the refused step must not hold the job's CPUs: the next srun of the same job runs. (Refused
    # by srun itself, the step was once created and left RUNNING, and every later srun waited for ever.)
    script = ("#!/bin/bash\n"
              "srun -n8 --tenax-layout=tp=2,pp=1,dp=8 true; echo REFUSED_EXIT=$?\n"
              "srun -n8 --tenax true; echo NEXT_EXIT=$?\n")
    job = lab.sbatch(["-N2", "--ntasks-per-node=4", "-t", "2", "-o", "refused-step-%j.out"], script)
    lab.wait_job(job)
    with open(lab.path(f"refused-step-{job}.out")) as f:
        out = f.read()
    expect("tp*pp*dp = 16 but the step has 8 tasks" in out and "NEXT_EXIT=0" in out and "REFUSED_EXIT=0" not in out,
           f"a refused step inside a job: the job's output was\n{out}")
    # Values in the job's environment only (--export), which srun's own check never sees, are bounded by slurmstepd:
    # the step fails with the message. (--export splits on commas, hence the TPxPPxDP form.)
    expect_refused(lab.run(["srun", "-N1", "-n1", "--tenax", "--export=ALL,TENAX_LAYOUT=65536x65536x1", "true"]),
                   "TENAX_LAYOUT=65536x65536x1: tp*pp*dp = 4294967296 is more than the 1048576 tasks")


def check_precedence(lab, ckpt_root):
    """option > environment > admin default, seen from inside the job's batch script."""
    script = "#!/bin/bash\necho CKPT=$TENAX_CHECKPOINT_DIR MAXR=$TENAX_MAX_RESTARTS PLACE=$TENAX_PLACEMENT " \
             "SPARES=$TENAX_SPARES RESTARTS=$SLURM_RESTART_COUNT RANK=${TENAX_RANK-unset} " \
             "STAGE=${TENAX_DATA_STAGE_DIR-unset} EVERY=${TENAX_CKPT_EVERY-unset} " \
             "LOCAL_EVERY=${TENAX_CKPT_LOCAL_EVERY-unset} NODE_MTBF=${TENAX_NODE_MTBF-unset}\n"
    cases = [
        ([], {}, {"CKPT": f"{ckpt_root}/root/%j", "MAXR": "1", "PLACE": "topology", "SPARES": "0",
                  "STAGE": "/var/tmp/stage/root", "EVERY": "unset", "LOCAL_EVERY": "unset", "NODE_MTBF": "5000h"}),
        ([], {"TENAX_MAX_RESTARTS": "4", "TENAX_PLACEMENT": "block"}, {"MAXR": "4", "PLACE": "block"}),
        (["--tenax-max-restarts=2", f"--tenax-ckpt-dir={ckpt_root}/mine"], {"TENAX_MAX_RESTARTS": "4"},
         {"MAXR": "2", "CKPT": f"{ckpt_root}/mine"}),
        (["--tenax-spares=2"], {"TENAX_SPARES": "1"}, {"SPARES": "2"}),
        (["--tenax-data-stage-dir=/var/tmp/mine/%j"], {"TENAX_DATA_STAGE_DIR": "/var/tmp/env"},
         {"STAGE": "/var/tmp/mine/%j"}),
        ([], {"TENAX_DATA_STAGE_DIR": "/var/tmp/env"}, {"STAGE": "/var/tmp/env"}),
        (["--tenax-ckpt-every=auto", "--tenax-ckpt-local-every=05"], {"TENAX_CKPT_EVERY": "40"},
         {"EVERY": "auto", "LOCAL_EVERY": "5"}),
        ([], {"TENAX_CKPT_EVERY": "40"}, {"EVERY": "40", "LOCAL_EVERY": "unset"}),
        # The site's node MTBF is a default: a figure the job brings stays.
        ([], {"TENAX_NODE_MTBF": "100h"}, {"NODE_MTBF": "100h"}),
    ]
    for args, env, wanted in cases:
        job = lab.sbatch(["-N1", "--tenax", "-o", "prec-%j.out", *args], script, env=env)
        lab.wait_job(job)
        with open(lab.path(f"prec-{job}.out")) as f:
            got = dict(item.split("=", 1) for item in f.read().split())
        for key, value in wanted.items():
            value = value.replace("%j", str(job))
            expect(got.get(key) == value, f"sbatch {args} env {env}: {key}={got.get(key)!r}, expected {value!r}")
        # Slurm leaves SLURM_RESTART_COUNT unset on a first run; the plugin exports 0. The batch shell gets no rank.
        expect(got["RESTARTS"] == "0" and got["RANK"] == "unset", f"batch environment: {got}")


def check_admin_config(lab):
    """A bad plugstack.conf is refused when the plugin loads, for every command, naming the key."""
    good = open(lab.path("etc", "plugstack.conf")).read().strip()
    try:
        lab.set_plugstack(good + " max_restart=3")
        expect_refused(lab.run(["sbatch", "--wrap", "true"]), "tenax: plugstack.conf: unknown key 'max_restart'",
                       "known keys: ckpt_root")
        lab.set_plugstack(good + " bind_numa=sometimes")
        expect_refused(lab.run(["srun", "-N1", "true"]), "plugstack.conf: bind_numa=sometimes: expected yes or no")
    finally:
        lab.set_plugstack(good)
    lab.check(["srun", "-N1", "true"])


def run(tools):
    with tools.lab() as lab:
        ckpt_root = lab.path("ckpt")
        lab.set_plugstack(lab.plugin_line(
            f"ckpt_root={ckpt_root} ckpt_default={ckpt_root}/%u/%j default_restarts=1 max_restarts=5 max_spares=2 "
            f"allow_placement_none=no topology_file={lab.path('etc', 'topology.conf')} "
            f"data_stage_default=/var/tmp/stage/%u node_mtbf_hours=5000"))
        check_help(lab)
        check_refusals(lab, ckpt_root)
        check_precedence(lab, ckpt_root)
        check_admin_config(lab)
