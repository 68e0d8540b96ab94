// Binding a task to its GPU(s) and NUMA node.
//
// The node's topology comes from hwloc (the library slurmstepd itself links): its NUMA nodes with their CPUs (OS
// indices) and its NVIDIA GPUs as PCI devices, each with the NUMA node nearest to it. The admin may hand the plugin
// an hwloc XML file instead of discovery (plugstack.conf hw_topology=). A node without GPUs or with a single NUMA node
// simply gets no binding of that kind; a topology that cannot be loaded gets none at all (the caller logs why).
//
// Plan for local task `slot` of `tasks` on the node:
//   - GPUs: the usable list is the entries of the job's CUDA_VISIBLE_DEVICES when Slurm (gres) set one, else every
//     GPU found (as indices in PCI bus order). With G entries and T tasks, G >= T gives each task G/T consecutive
//     entries (slot-major); G < T makes tasks share: task `slot` gets entry slot*G/T. Entries are chosen by position
//     and copied as text: a value is never reinterpreted as a physical index (Slurm's cgroups renumber GPUs, and
//     entries may be UUIDs or MIG instances).
//   - The NUMA hint of an entry at position i: when Slurm gave the step's global GPU indices (SLURM_STEP_GPUS, else
//     SLURM_JOB_GPUS) with as many entries as the visible list, the GPU is the i-th of those (gres_common.c builds
//     both lists in one loop, in the same order); else a numeric entry is an index in PCI bus order (the plugin sets
//     CUDA_DEVICE_ORDER=PCI_BUS_ID when the job has no order of its own); UUIDs and MIG instances give no hint.
//     A global index is taken as the index-th NVIDIA GPU in PCI bus order: the order of Slurm's AutoDetect=nvml and
//     of nvidia-smi, which is what gres.conf lists on the nodes tenax supports.
//   - CPUs: with two or more NUMA nodes, the task's CPUs become those of its first GPU's NUMA node (or, without a GPU
//     NUMA hint, NUMA node slot*N/T), intersected with the CPUs Slurm allowed the task; an empty intersection leaves
//     the affinity alone rather than pinning the task outside its allocation.
// When Slurm binds (slurm_binding.hpp), the caller turns the corresponding kind off; a GPU list Slurm set per task is
// still the task's own and gives the CPUs their NUMA hint.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tenax::spank {

struct GpuInfo {
  std::string pci_bus_id;  // "0000:3b:00.0"
  int numa_node = -1;      // OS index of the nearest NUMA node; -1: unknown or several equally near
};

struct NodeHardware {
  std::vector<GpuInfo> gpus;           // NVIDIA GPUs sorted by PCI bus id (index = nvidia-smi's, CUDA's in PCI order)
  std::vector<std::vector<int>> numa;  // numa[k]: CPUs of the NUMA node with OS index k (empty: none or no CPUs)
  int numa_nodes_with_cpus() const;
};

// The largest CPU OS index accepted from a topology: far above any kernel's NR_CPUS (8192 at most), low enough that a
// malformed topology file cannot make the plugin allocate much.
inline constexpr int kMaxCpuId = 65535;
// The largest NUMA node OS index accepted (the kernel's MAX_NUMNODES is at most 1024).
inline constexpr int kMaxNumaNodeId = 4095;
// The largest topology XML file read (hw_topology=): a node with thousands of PCI devices takes a few MiB.
inline constexpr std::size_t kMaxTopologyXmlBytes = std::size_t{64} << 20;

// The node's topology: hwloc's discovery of this machine when `xml_file` is empty, else the hwloc XML file (at most
// kMaxTopologyXmlBytes). Throws tenax::Error naming the file and the reason when it cannot be read or loaded, or when
// it holds a CPU above kMaxCpuId or a NUMA node above kMaxNumaNodeId.
NodeHardware load_hardware(const std::string& xml_file);
// The same from XML text (`source` names it in messages).
NodeHardware hardware_from_xml(std::string_view xml, std::string_view source);

// {0,1,2,3,8,10,11} -> "0-3,8,10-11" (sorted input).
std::string format_cpulist(const std::vector<int>& cpus);

struct TaskBinding {
  std::optional<std::string> cuda_visible_devices;  // unset: leave the variable alone
  std::vector<int> cpus;                            // empty: leave the CPU affinity alone
  std::string summary;                              // one line for the log, e.g. "gpus=2,3 numa=1 cpus=8-15"
};

struct BindingRequest {
  int slot = 0;                                // the task's local rank
  int tasks = 1;                               // tasks of this step on the node
  std::optional<std::string> visible_devices;  // the job's CUDA_VISIBLE_DEVICES, if set
  std::optional<std::string> slurm_gpus;       // SLURM_STEP_GPUS, else SLURM_JOB_GPUS: the entries' global indices
  std::optional<std::string> device_order;     // the job's CUDA_DEVICE_ORDER, if set
  std::vector<int> allowed_cpus;               // the task's current affinity
  bool bind_gpus = true;
  bool bind_numa = true;
  // Slurm bound GPUs per task: visible_devices is this task's own list, left as it is; its first entry gives the
  // NUMA hint (with bind_gpus false).
  bool gpus_bound_by_slurm = false;
};

// The most entries accepted in the job's CUDA_VISIBLE_DEVICES (GPUs and MIG instances): far more than a node holds.
inline constexpr std::ptrdiff_t kMaxVisibleDevices = 4096;

// Throws UsageError when request.visible_devices has more than kMaxVisibleDevices entries (and is read: GPUs bound
// by the plugin or by Slurm).
TaskBinding plan_binding(const NodeHardware& hardware, const BindingRequest& request);

}  // namespace tenax::spank
