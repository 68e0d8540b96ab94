// Binding a task to its GPU(s) and NUMA node.
//
// Discovery reads the kernel's own description of the node (no CUDA, no NVML, no hwloc: the plugin runs inside
// slurmstepd and must stay small):
//   GPUs        /proc/driver/nvidia/gpus/<PCI bus id>/  (one folder per NVIDIA GPU; sorted by bus id, which is the
//               order CUDA uses with CUDA_DEVICE_ORDER=PCI_BUS_ID and nvidia-smi's index)
//   GPU NUMA    /sys/bus/pci/devices/<bus id>/numa_node (-1: unknown)
//   NUMA nodes  /sys/devices/system/node/node<N>/cpulist
// A node without GPUs or with a single NUMA node simply gets no binding of that kind; nothing is an error.
//
// Plan for local task `slot` of `tasks` on the node:
//   - GPUs: the usable list is the job's CUDA_VISIBLE_DEVICES when Slurm (gres) already set one, else every GPU found.
//     With G usable GPUs and T tasks, G >= T gives each task G/T consecutive GPUs (slot-major); G < T makes tasks
//     share: task `slot` gets GPU slot*G/T.
//   - CPUs: with two or more NUMA nodes, the task's CPUs become those of its first GPU's NUMA node (or, without a GPU
//     NUMA hint, NUMA node slot*N/T), intersected with the CPUs Slurm allowed the task; an empty intersection leaves
//     the affinity alone rather than pinning the task outside its allocation.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tenax::spank {

struct GpuInfo {
  std::string pci_bus_id;  // "0000:3b:00.0"
  int numa_node = -1;      // -1: unknown
};

struct NodeHardware {
  std::vector<GpuInfo> gpus;           // sorted by PCI bus id (index = CUDA device index in PCI order)
  std::vector<std::vector<int>> numa;  // numa[k]: CPUs of NUMA node k (empty for a node id without CPUs)
  int numa_nodes_with_cpus() const;
};

// Reads the node's GPUs and NUMA nodes under `root` ("/" on a real node). Unreadable parts are treated as absent.
NodeHardware discover_hardware(const std::string& root);

// The largest CPU number accepted in a cpulist: far above any kernel's NR_CPUS (8192 at most), low enough that a
// malformed /sys file (hw_root is the admin's choice) cannot make the plugin allocate much.
inline constexpr int kMaxCpuId = 65535;

// "0-3,8,10-11" <-> {0,1,2,3,8,10,11}. parse_cpulist returns nullopt on malformed text, including numbers above
// kMaxCpuId.
std::optional<std::vector<int>> parse_cpulist(std::string_view text);
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
  std::vector<int> allowed_cpus;               // the task's current affinity
  bool bind_gpus = true;
  bool bind_numa = true;
};

// The most entries accepted in the job's CUDA_VISIBLE_DEVICES (GPUs and MIG instances): far more than a node holds.
inline constexpr std::ptrdiff_t kMaxVisibleDevices = 4096;

// Throws UsageError when request.visible_devices has more than kMaxVisibleDevices entries (and GPUs are bound).
TaskBinding plan_binding(const NodeHardware& hardware, const BindingRequest& request);

}  // namespace tenax::spank
