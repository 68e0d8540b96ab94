// Unit tests of the SPANK plugin's binding plan: GPUs and NUMA nodes read from hwloc XML topologies, the CPUs and GPUs
// each task gets, and what Slurm itself already bound (left to it).
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "admin_config.hpp"
#include "binding.hpp"
#include "slurm_binding.hpp"
#include "topology_source.hpp"

namespace tenax::spank {
namespace {

TEST(Binding, CpuLists) {
  EXPECT_EQ(format_cpulist({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpulist({}), "");
}

// tests/slurm/data/two-numa-four-gpus.xml: NUMA node 0 = CPUs 0-3 with the GPUs at 1a and 3b, NUMA node 1 = CPUs 4-7
// with the GPUs at 86 and af, and a network card.
const std::string kTwoNumaFourGpus = std::string(TENAX_SPANK_TEST_DATA) + "/two-numa-four-gpus.xml";
const std::vector<int> kAllCpus = {0, 1, 2, 3, 4, 5, 6, 7};

class FakeNode : public ::testing::Test {
 protected:
  void SetUp() override { hw_ = load_hardware(kTwoNumaFourGpus); }
  BindingRequest request(int tasks, int slot) const {
    BindingRequest r;
    r.tasks = tasks;
    r.slot = slot;
    r.allowed_cpus = kAllCpus;
    return r;
  }
  NodeHardware hw_;
};

TEST_F(FakeNode, ReadsGpusInBusOrderAndNumaNodesFromHwlocXml) {
  ASSERT_EQ(hw_.gpus.size(), 4u);  // the network card is no GPU
  EXPECT_EQ(hw_.gpus[0].pci_bus_id, "0000:1a:00.0");
  EXPECT_EQ(hw_.gpus[1].pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(hw_.gpus[2].pci_bus_id, "0000:86:00.0");
  EXPECT_EQ(hw_.gpus[0].numa_node, 0);
  EXPECT_EQ(hw_.gpus[1].numa_node, 0);
  EXPECT_EQ(hw_.gpus[2].numa_node, 1);
  EXPECT_EQ(hw_.gpus[3].numa_node, 1);
  EXPECT_EQ(hw_.numa_nodes_with_cpus(), 2);
  EXPECT_EQ(hw_.numa[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(hw_.numa[1], (std::vector<int>{4, 5, 6, 7}));
}

// hwloc's discovery of the machine running the test: at least one NUMA node with CPUs, whatever the machine.
TEST(Topology, DiscoversThisNode) {
  const NodeHardware hw = load_hardware("");
  EXPECT_GE(hw.numa_nodes_with_cpus(), 1);
}

TEST_F(FakeNode, TwoTasksGetTwoGpusAndTheirNumaNode) {
  BindingRequest r = request(2, 1);
  const TaskBinding b = plan_binding(hw_, r);
  EXPECT_EQ(b.cuda_visible_devices, "2,3");
  EXPECT_EQ(b.cpus, (std::vector<int>{4, 5, 6, 7}));
  // Slurm's cgroup allowed only CPUs 2-5: the binding stays inside them.
  r.allowed_cpus = {2, 3, 4, 5};
  EXPECT_EQ(plan_binding(hw_, r).cpus, (std::vector<int>{4, 5}));
  // None of the NUMA node's CPUs allowed: affinity left alone.
  r.allowed_cpus = {0, 1};
  EXPECT_TRUE(plan_binding(hw_, r).cpus.empty());
}

TEST_F(FakeNode, MoreTasksThanGpusShareThem) {
  std::vector<std::string> got;
  for (int slot = 0; slot < 8; ++slot)
    got.push_back(*plan_binding(hw_, request(8, slot)).cuda_visible_devices);
  EXPECT_EQ(got, (std::vector<std::string>{"0", "0", "1", "1", "2", "2", "3", "3"}));
}

TEST_F(FakeNode, JobsOwnGpuListIsRespected) {
  BindingRequest r = request(2, 1);
  r.visible_devices = "2,3";  // no Slurm list: numeric entries are indices in PCI order
  const TaskBinding b = plan_binding(hw_, r);
  EXPECT_EQ(b.cuda_visible_devices, "3");
  EXPECT_EQ(b.cpus, (std::vector<int>{4, 5, 6, 7}));  // GPU 3 sits on NUMA node 1
}

// With ConstrainDevices, Slurm renumbers the step's GPUs 0..n-1 in CUDA_VISIBLE_DEVICES and names the node's own
// indices in SLURM_STEP_GPUS: the entries keep their text, the NUMA node is that of the GPUs Slurm named.
TEST_F(FakeNode, GpusRenumberedBySlurmGetTheirOwnNumaNode) {
  for (const char* list : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    SCOPED_TRACE(list);
    for (int slot = 0; slot < 2; ++slot) {
      BindingRequest r = request(2, slot);
      r.visible_devices = "0,1";
      r.slurm_gpus = "2,3";
      const TaskBinding b = plan_binding(hw_, r);
      EXPECT_EQ(b.cuda_visible_devices, slot == 0 ? "0" : "1");
      EXPECT_EQ(b.cpus, (std::vector<int>{4, 5, 6, 7})) << b.summary;  // GPUs 2 and 3 sit on NUMA node 1
    }
  }
  // One task with both: entry 0 is GPU 2.
  BindingRequest r = request(1, 0);
  r.visible_devices = "0,1";
  r.slurm_gpus = "2,3";
  EXPECT_EQ(plan_binding(hw_, r).cuda_visible_devices, "0,1");
  EXPECT_EQ(plan_binding(hw_, r).cpus, (std::vector<int>{4, 5, 6, 7}));
  // A Slurm list that does not match the visible list entry for entry is not used: numeric entries are PCI indices.
  r.slurm_gpus = "2,3,1";
  EXPECT_EQ(plan_binding(hw_, r).cpus, (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(FakeNode, EntriesWithoutAPhysicalIndexGiveNoNumaHint) {
  // UUIDs and MIG instances are copied as they are; the CPUs then follow the slot (2 tasks: slot 1 -> NUMA node 1).
  BindingRequest r = request(2, 1);
  r.visible_devices = "GPU-1b2c3d4e,MIG-5f6a7b8c";
  TaskBinding b = plan_binding(hw_, r);
  EXPECT_EQ(b.cuda_visible_devices, "MIG-5f6a7b8c");
  EXPECT_EQ(b.cpus, (std::vector<int>{4, 5, 6, 7}));
  // Numeric entries are PCI indices only in PCI order: under CUDA's default order "3" names some other GPU.
  r = request(2, 0);
  r.visible_devices = "2,3";
  r.device_order = "FASTEST_FIRST";
  b = plan_binding(hw_, r);
  EXPECT_EQ(b.cuda_visible_devices, "2");
  EXPECT_EQ(b.cpus, (std::vector<int>{0, 1, 2, 3}));  // by slot, not GPU 2's NUMA node 1
  r.device_order = "PCI_BUS_ID";
  EXPECT_EQ(plan_binding(hw_, r).cpus, (std::vector<int>{4, 5, 6, 7}));
}

TEST_F(FakeNode, GpusSlurmBoundPerTaskStayAndPlaceTheCpus) {
  // --gpus-per-task: Slurm set the task's own list (GPU 3, renumbered 0 in its cgroup); the plugin leaves it and
  // binds the CPUs next to it.
  BindingRequest r = request(2, 0);
  r.visible_devices = "0";
  r.slurm_gpus = "3";
  r.bind_gpus = false;
  r.gpus_bound_by_slurm = true;
  const TaskBinding b = plan_binding(hw_, r);
  EXPECT_FALSE(b.cuda_visible_devices.has_value());
  EXPECT_EQ(b.cpus, (std::vector<int>{4, 5, 6, 7}));
  // No list from Slurm: no hint either (not the node's first GPU), the CPUs follow the slot.
  r = request(2, 1);
  r.bind_gpus = false;
  r.gpus_bound_by_slurm = true;
  EXPECT_EQ(plan_binding(hw_, r).cpus, (std::vector<int>{4, 5, 6, 7}));
  r.slot = 0;
  EXPECT_EQ(plan_binding(hw_, r).cpus, (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(FakeNode, AdminCanTurnBindingOff) {
  BindingRequest r = request(2, 0);
  r.bind_gpus = false;
  r.bind_numa = false;
  const TaskBinding b = plan_binding(hw_, r);
  EXPECT_FALSE(b.cuda_visible_devices.has_value());
  EXPECT_TRUE(b.cpus.empty());
}

// A task's environment as Slurm 22.05's slurmstepd writes it (see slurm_binding.hpp for where each variable comes
// from).
EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(SlurmBinding, NothingBoundByDefault) {
  const SlurmBinding none = slurm_binding(env_of({}), std::nullopt);
  EXPECT_EQ(none.cpus.kind, BindingOwner::Plugin);
  EXPECT_EQ(none.gpus.kind, BindingOwner::Plugin);
  // SLURM_CPU_BIND=verbose alone (srun --cpu-bind=verbose): no binding asked for.
  EXPECT_EQ(slurm_binding(env_of({{"SLURM_CPU_BIND", "verbose"}, {"SLURM_CPU_BIND_TYPE", ""}}), "").cpus.kind,
            BindingOwner::Plugin);
  // task/affinity confining tasks to the step's CPUs without binding ("auto binding off") writes a bare mask_cpu.
  EXPECT_EQ(slurm_binding(env_of({{"SLURM_CPU_BIND_TYPE", "mask_cpu:"}, {"SLURM_CPU_BIND_LIST", "0xFF"}}), std::nullopt)
                .cpus.kind,
            BindingOwner::Plugin);
  // A tres_bind for NICs only says nothing about GPUs.
  EXPECT_EQ(slurm_binding(env_of({{"SLURMD_TRES_BIND", "nic:closest"}}), std::nullopt).gpus.kind, BindingOwner::Plugin);
}

TEST(SlurmBinding, CpuBindingOfTheStepIsLeftToSlurm) {
  // srun --cpu-bind=cores: srun's own SLURM_CPU_BIND_TYPE, and task/affinity's per-task masks in the task's.
  SlurmBinding b = slurm_binding(
      env_of({{"SLURM_CPU_BIND", "quiet,cores,mask_cpu:0x3,0xC"}, {"SLURM_CPU_BIND_TYPE", "cores,mask_cpu:"}}),
      "cores");
  EXPECT_EQ(b.cpus.kind, BindingOwner::Slurm);
  EXPECT_EQ(b.cpus.reason, "cpus: left to Slurm's --cpu-bind=cores");
  EXPECT_EQ(b.gpus.kind, BindingOwner::Plugin);
  // An explicit mask or map, even where task/affinity's own masks look the same.
  b = slurm_binding(env_of({{"SLURM_CPU_BIND_TYPE", "mask_cpu:"}, {"SLURM_CPU_BIND_LIST", "0x3,0xC"}}), "mask_cpu:");
  EXPECT_EQ(b.cpus.reason, "cpus: left to Slurm's --cpu-bind=mask_cpu");
  // SLURM_CPU_BIND is read when SLURM_CPU_BIND_TYPE is missing.
  b = slurm_binding(env_of({{"SLURM_CPU_BIND", "quiet,map_cpu:0,4"}}), std::nullopt);
  EXPECT_EQ(b.cpus.kind, BindingOwner::Slurm);
  EXPECT_EQ(b.cpus.reason, "cpus: left to Slurm's default binding (map_cpu)");
  // A site default (TaskPluginParam=cores, a partition's CpuBind=sockets) that srun did not ask for.
  b = slurm_binding(env_of({{"SLURM_CPU_BIND_TYPE", "sockets,mask_cpu:"}}), std::nullopt);
  EXPECT_EQ(b.cpus.kind, BindingOwner::Slurm);
  EXPECT_EQ(b.cpus.reason, "cpus: left to Slurm's default binding (sockets)");
  EXPECT_EQ(slurm_binding(env_of({{"SLURM_CPU_BIND_TYPE", "rank_ldom"}}), std::nullopt).cpus.kind, BindingOwner::Slurm);
}

TEST(SlurmBinding, CpuBindNoneMeansNoBinding) {
  SlurmBinding b = slurm_binding(env_of({{"SLURM_CPU_BIND_TYPE", "none"}}), "none");
  EXPECT_EQ(b.cpus.kind, BindingOwner::Unbound);
  EXPECT_EQ(b.cpus.reason, "cpus: left alone, as Slurm's --cpu-bind=none asks");
  // On a partly allocated node task/affinity turns none into a mask of the step's CPUs: srun's request still says
  // none.
  b = slurm_binding(env_of({{"SLURM_CPU_BIND_TYPE", "mask_cpu:"}, {"SLURM_CPU_BIND_LIST", "0x3"}}), "none");
  EXPECT_EQ(b.cpus.kind, BindingOwner::Unbound);
  // A site default of none.
  EXPECT_EQ(slurm_binding(env_of({{"SLURM_CPU_BIND_TYPE", "none"}}), std::nullopt).cpus.kind, BindingOwner::Unbound);
}

TEST(SlurmBinding, GpuBindingOfTheStepIsLeftToSlurm) {
  SlurmBinding b = slurm_binding(env_of({{"SLURMD_TRES_BIND", "gpu:closest"}}), std::nullopt);
  EXPECT_EQ(b.gpus.kind, BindingOwner::Slurm);
  EXPECT_EQ(b.gpus.reason, "gpus: left to Slurm's --gpu-bind=closest");
  EXPECT_EQ(b.cpus.kind, BindingOwner::Plugin);
  b = slurm_binding(env_of({{"SLURMD_TRES_BIND", "gpu:per_task:2"}, {"SLURM_GPUS_PER_TASK", "2"}}), std::nullopt);
  EXPECT_EQ(b.gpus.reason, "gpus: left to Slurm's per-task binding (--gpus-per-task=2)");
  b = slurm_binding(env_of({{"SLURMD_TRES_BIND", "gpu:verbose,map_gpu:0,1;nic:closest"}}), std::nullopt);
  EXPECT_EQ(b.gpus.reason, "gpus: left to Slurm's --gpu-bind=map_gpu:0,1");
  EXPECT_EQ(slurm_binding(env_of({{"SLURMD_TRES_BIND", "gpu:single:1"}}), std::nullopt).gpus.kind, BindingOwner::Slurm);
  // Without slurmstepd's SLURMD_TRES_BIND, the job's own request (sbatch --gpu-bind, --gpus-per-task).
  EXPECT_EQ(slurm_binding(env_of({{"SLURM_GPU_BIND", "closest"}}), std::nullopt).gpus.kind, BindingOwner::Slurm);
  EXPECT_EQ(slurm_binding(env_of({{"SLURM_GPUS_PER_TASK", "1"}}), std::nullopt).gpus.kind, BindingOwner::Slurm);
}

TEST(SlurmBinding, GpuBindNoneMeansNoBinding) {
  // srun --gpu-bind=none inside a job submitted with --gpus-per-task: the step's tres_bind wins.
  const SlurmBinding b =
      slurm_binding(env_of({{"SLURMD_TRES_BIND", "gpu:none"}, {"SLURM_GPUS_PER_TASK", "1"}}), std::nullopt);
  EXPECT_EQ(b.gpus.kind, BindingOwner::Unbound);
  EXPECT_EQ(b.gpus.reason, "gpus: left alone, as Slurm's --gpu-bind=none asks");
  EXPECT_EQ(slurm_binding(env_of({{"SLURM_GPU_BIND", "verbose,none"}}), std::nullopt).gpus.kind, BindingOwner::Unbound);
}

TEST(Binding, NodeWithoutGpusSpreadsTasksOverNumaNodes) {
  NodeHardware hw;
  hw.numa = {{0, 1}, {2, 3}};
  BindingRequest request;
  request.tasks = 4;
  request.allowed_cpus = {0, 1, 2, 3};
  std::vector<std::vector<int>> got;
  for (int slot = 0; slot < 4; ++slot) {
    request.slot = slot;
    const TaskBinding b = plan_binding(hw, request);
    EXPECT_FALSE(b.cuda_visible_devices.has_value());
    got.push_back(b.cpus);
  }
  EXPECT_EQ(got, (std::vector<std::vector<int>>{{0, 1}, {0, 1}, {2, 3}, {2, 3}}));
}

TEST(Binding, NothingToBindOnASmallNode) {
  NodeHardware hw;
  hw.numa = {{0, 1}};
  BindingRequest request;
  request.tasks = 2;
  request.allowed_cpus = {0, 1};
  const TaskBinding b = plan_binding(hw, request);
  EXPECT_FALSE(b.cuda_visible_devices.has_value());
  EXPECT_TRUE(b.cpus.empty());
}

}  // namespace
}  // namespace tenax::spank
