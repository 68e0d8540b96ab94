"""A multi-node job's tasks receive the rank the placement library computes and the plugin's environment.

The lab's switches are interleaved (s1: n1,n3; s2: n2,n4), so Slurm's node order alternates between switches and
topology-aware placement must differ from SLURM_PROCID. Every task reports what it received; the test compares each
rank with tenax-placement-print (the placement functions called directly, with the inputs the test knows), and checks
the job-wide variables and the GPU/NUMA binding on an hwloc XML topology with 4 GPUs and 2 NUMA nodes (hw_topology),
and that a step run with srun --cpu-bind leaves the CPUs to Slurm."""

import subprocess

from slurm_lab import expect

REPORT = ('echo "TASK step=$STEP node=$SLURMD_NODENAME localid=$SLURM_LOCALID procid=$SLURM_PROCID '
          'rank=$TENAX_RANK local=$TENAX_LOCAL_RANK world=$TENAX_WORLD_SIZE layout=$TENAX_LAYOUT '
          'ckpt=$TENAX_CHECKPOINT_DIR restarts=$SLURM_RESTART_COUNT placement=$TENAX_PLACEMENT '
          'gpus=${CUDA_VISIBLE_DEVICES-unset} order=${CUDA_DEVICE_ORDER-unset} '
          'cpus=$(sed -n "s/^Cpus_allowed_list:\\s*//p" /proc/self/status) nodelist=$SLURM_STEP_NODELIST"')

# Steps of one job: name, srun arguments, environment, policy, layout the tasks must report.
STEPS = [
    ("topology", ["--tenax-layout=tp=2,pp=2"], {}, "topology", "tp=2,pp=2,dp=2"),
    ("pipeline", ["--tenax-layout=1x4x2"], {}, "topology", "tp=1,pp=4,dp=2"),
    ("from_env", [], {"TENAX_LAYOUT": "tp=2,pp=1,dp=4"}, "topology", "tp=2,pp=1,dp=4"),
    ("block", ["--tenax-layout=tp=2,pp=2", "--tenax-placement=block"], {}, "block", "tp=2,pp=2,dp=2"),
    ("none", ["--tenax-placement=none"], {}, "none", "tp=1,pp=1,dp=8"),
    # The lab's task/none applies no binding, but the step's SLURM_CPU_BIND_TYPE says what srun asked for: the plugin
    # leaves the CPUs to Slurm and still hands out the GPUs.
    ("cpu_bind", ["--tenax-layout=tp=2,pp=2", "--cpu-bind=cores"], {}, "topology", "tp=2,pp=2,dp=2"),
]
# Steps whose CPUs the plugin must leave as Slurm gave them.
CPUS_LEFT_TO_SLURM = {"cpu_bind"}

PU = ('<object type="Core" os_index="{cpu}" cpuset="{mask}" complete_cpuset="{mask}" nodeset="{node}" '
      'complete_nodeset="{node}"><object type="PU" os_index="{cpu}" cpuset="{mask}" complete_cpuset="{mask}" '
      'nodeset="{node}" complete_nodeset="{node}"/></object>')
GPU = ('<object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[{bus}-{bus}]"><object type="PCIDev" '
       'pci_busid="0000:{bus}:00.0" pci_type="0302 [10de:20b0] [10de:134f] a1" pci_link_speed="0.000000"/></object>')


def write_topology(path):
    """An hwloc XML topology: four GPUs (two per NUMA node) and two NUMA nodes holding CPU 0 and CPU 1."""
    packages = ""
    for node, buses in ((0, ("1a", "3b")), (1, ("86", "af"))):
        mask = f"0x{1 << node:08x}"
        packages += (f'<object type="Package" os_index="{node}" cpuset="{mask}" complete_cpuset="{mask}" '
                     f'nodeset="{mask}" complete_nodeset="{mask}">'
                     f'<object type="NUMANode" os_index="{node}" cpuset="{mask}" complete_cpuset="{mask}" '
                     f'nodeset="{mask}" complete_nodeset="{mask}" local_memory="1073741824"/>'
                     + PU.format(cpu=node, mask=mask, node=mask)
                     + "".join(GPU.format(bus=bus) for bus in buses) + "</object>\n")
    with open(path, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<topology version="2.0">\n'
                '<object type="Machine" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" '
                'nodeset="0x00000003" complete_nodeset="0x00000003">\n' + packages + "</object>\n</topology>\n")


def expected_ranks(tools, lab, nodelist, policy, layout):
    """(node, slot) -> rank from the placement library itself."""
    degrees = dict(item.split("=") for item in layout.split(","))
    result = subprocess.run([tools.placement_print, "--nodes", nodelist, "--slots", "2", "--layout",
                             f"{degrees['tp']}x{degrees['pp']}x{degrees['dp']}", "--policy", policy,
                             "--topology", lab.path("etc", "topology.conf")],
                            capture_output=True, text=True, check=True)
    ranks = {}
    for line in result.stdout.splitlines():
        rank, node, slot = line.split()
        ranks[(node, int(slot))] = int(rank)
    return ranks


def check_step(tools, lab, job, name, policy, layout, tasks, all_cpus):
    expect(len(tasks) == 8, f"step {name}: {len(tasks)} task reports, expected 8:\n{tasks}")
    where = sorted((t["node"], int(t["localid"])) for t in tasks)
    expect(where == [(f"n{n}", s) for n in range(1, 5) for s in range(2)], f"step {name}: tasks ran on {where}")
    ranks = sorted(int(t["rank"]) for t in tasks)
    expect(ranks == list(range(8)), f"step {name}: TENAX_RANK values {ranks} are not a permutation of 0..7")
    if policy == "none":
        wanted = {(t["node"], int(t["localid"])): int(t["procid"]) for t in tasks}
    else:
        wanted = expected_ranks(tools, lab, tasks[0]["nodelist"], policy, layout)
    for t in tasks:
        key = (t["node"], int(t["localid"]))
        expect(int(t["rank"]) == wanted[key], f"step {name}: {key} has TENAX_RANK={t['rank']}, placement says "
                                              f"{wanted[key]}\n{tasks}")
        local = int(t["localid"])
        fixed = {"local": str(local), "world": "8", "layout": layout, "placement": policy, "restarts": "0",
                 "ckpt": lab.path("ckpt", "root", str(job)), "gpus": ["0,1", "2,3"][local],
                 "order": "PCI_BUS_ID",
                 "cpus": all_cpus if name in CPUS_LEFT_TO_SLURM else str(local)}
        for key_name, value in fixed.items():
            expect(t[key_name] == value, f"step {name}, {key}: {key_name}={t[key_name]!r}, expected {value!r}")
    if policy == "topology":
        # Interleaved switches: keeping pipeline/data-parallel neighbours under one switch reorders the nodes.
        moved = [t for t in tasks if t["rank"] != t["procid"]]
        expect(moved, f"step {name}: every TENAX_RANK equals SLURM_PROCID although the nodes alternate switches")


def run(tools):
    with tools.lab(switches="interleaved") as lab:
        write_topology(lab.path("node.xml"))
        lab.set_plugstack(lab.plugin_line(
            f"topology_file={lab.path('etc', 'topology.conf')} ckpt_root={lab.path('ckpt')} "
            f"hw_topology={lab.path('node.xml')}"))
        with open(lab.path("report.sh"), "w") as f:
            f.write("#!/bin/bash\n" + REPORT + "\n")
        script = "#!/bin/bash\nset -e\n"
        for name, args, env, _, _ in STEPS:
            exports = "".join(f"{k}={v} " for k, v in env.items())
            script += f"STEP={name} {exports}srun {' '.join(args)} bash {lab.path('report.sh')}\n"
        job = lab.sbatch(["-N4", "--ntasks-per-node=2", "--tenax", f"--tenax-ckpt-dir={lab.path('ckpt')}/%u/%j",
                          "-o", "placement-%j.out"], script)
        lab.wait_job(job, timeout=60)
        with open(lab.path(f"placement-{job}.out")) as f:
            output = f.read()
        reports = [dict(item.split("=", 1) for item in line.split()[1:])
                   for line in output.splitlines() if line.startswith("TASK ")]
        # The CPUs the lab's tasks may use (task/none binds nothing): what a step left to Slurm reports.
        with open("/proc/self/status") as f:
            all_cpus = next(line.split(":", 1)[1].strip() for line in f if line.startswith("Cpus_allowed_list:"))
        for name, _, _, policy, layout in STEPS:
            check_step(tools, lab, job, name, policy, layout, [r for r in reports if r["step"] == name], all_cpus)
