// The node's NUMA nodes and NVIDIA GPUs from hwloc (see binding.hpp).
//
// hwloc is the library slurmstepd itself links for its task plugins, so loading it costs the plugin nothing new. The
// topology is the machine's own (discovery) or an XML file the admin names; either way only three things are read
// from it: each NUMA node's CPUs, each NVIDIA GPU's PCI address and the NUMA node nearest to it. Discovery is kept
// cheap and side-effect free: the components that would load vendor libraries (CUDA, NVML, OpenCL, ROCm, Level Zero)
// or talk to an X server are turned off, since the GPUs are found as plain PCI devices.
#include <hwloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <tuple>

#include "binding.hpp"
#include "input_limits.hpp"
#include "tenax/error.hpp"

namespace tenax::spank {

namespace {

constexpr unsigned short kNvidiaVendorId = 0x10de;
// PCI class and subclass: VGA-compatible controller (older GPUs) and 3D controller (data-centre GPUs).
constexpr unsigned short kPciClassVga = 0x0300;
constexpr unsigned short kPciClass3d = 0x0302;

struct TopologyDeleter {
  void operator()(hwloc_topology_t topology) const { hwloc_topology_destroy(topology); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string hwloc_failure(std::string_view source, const char* call) {
  return std::string(source) + ": " + call + " failed: " + std::strerror(errno);
}

// A topology configured for the plugin's questions, not yet loaded.
Topology new_topology(std::string_view source) {
  // The ABI of hwloc 2.x: a library of another major version lays its objects out differently.
  if ((hwloc_get_api_version() >> 16) != (HWLOC_API_VERSION >> 16)) {
    throw Error(std::string(source) + ": hwloc library version " + std::to_string(hwloc_get_api_version() >> 16) +
                ".x does not match the headers the plugin was built with (" + std::to_string(HWLOC_API_VERSION >> 16) +
                ".x)");
  }
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw Error(hwloc_failure(source, "hwloc_topology_init"));
  Topology topology(raw);
  // The whole node, not only what slurmstepd's cgroup allows: the plan intersects with the task's CPUs itself, and a
  // GPU's NUMA node must be found even when the step may not use its memory.
  if (hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0) {
    throw Error(hwloc_failure(source, "hwloc_topology_set_flags"));
  }
  // PCI devices are off by default; "important" keeps GPUs (display class) and the bridges above them.
  if (hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) {
    throw Error(hwloc_failure(source, "hwloc_topology_set_io_types_filter"));
  }
  for (const char* component : {"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl"}) {
    // A component this hwloc does not have is no error: there is nothing to turn off.
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component);
  }
  return topology;
}

// The OS indices in `set`, refused when the set is infinite or holds an index above `max`.
std::vector<int> bounded_indices(hwloc_const_bitmap_t set, int max, std::string_view source, std::string_view what) {
  std::vector<int> ids;
  if (set == nullptr || hwloc_bitmap_iszero(set)) return ids;
  const int last = hwloc_bitmap_last(set);
  if (hwloc_bitmap_weight(set) < 0 || last < 0 || last > max) {
    throw Error(std::string(source) + ": a " + std::string(what) + " set reaches beyond index " + std::to_string(max) +
                "; the topology is malformed");
  }
  for (int id = hwloc_bitmap_first(set); id != -1; id = hwloc_bitmap_next(set, id))
    ids.push_back(id);
  return ids;
}

// The OS index of the single NUMA node nearest to `device` (-1: unknown, or several share the nearest ancestor).
int nearest_numa_node(hwloc_topology_t topology, hwloc_obj_t device) {
  const hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(topology, device);
  if (ancestor == nullptr || ancestor->nodeset == nullptr || hwloc_bitmap_weight(ancestor->nodeset) != 1) return -1;
  const int node = hwloc_bitmap_first(ancestor->nodeset);
  return node <= kMaxNumaNodeId ? node : -1;
}

NodeHardware read_topology(hwloc_topology_t topology, std::string_view source) {
  NodeHardware hardware;
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, nullptr); node != nullptr;
       node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, node)) {
    if (node->os_index == HWLOC_UNKNOWN_INDEX) continue;
    if (node->os_index > static_cast<unsigned>(kMaxNumaNodeId)) {
      throw Error(std::string(source) + ": NUMA node " + std::to_string(node->os_index) + " is above " +
                  std::to_string(kMaxNumaNodeId) + "; the topology is malformed");
    }
    const std::size_t id = node->os_index;
    if (hardware.numa.size() <= id) hardware.numa.resize(id + 1);
    // A NUMA node's cpuset holds the CPUs local to it; a CPU-less node (memory only, e.g. HBM or CXL) keeps none.
    hardware.numa[id] = bounded_indices(node->cpuset, kMaxCpuId, source, "NUMA node's CPU");
  }

  struct Found {
    unsigned domain;
    unsigned bus, dev, func;
    GpuInfo info;
  };
  std::vector<Found> found;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topology, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topology, pci)) {
    const auto& attr = pci->attr->pcidev;
    if (attr.vendor_id != kNvidiaVendorId || (attr.class_id != kPciClassVga && attr.class_id != kPciClass3d)) continue;
    char bus_id[32];
    std::snprintf(bus_id, sizeof(bus_id), "%04x:%02x:%02x.%01x", static_cast<unsigned>(attr.domain),
                  static_cast<unsigned>(attr.bus), static_cast<unsigned>(attr.dev), static_cast<unsigned>(attr.func));
    found.push_back({attr.domain, attr.bus, attr.dev, attr.func, {bus_id, nearest_numa_node(topology, pci)}});
    if (static_cast<std::ptrdiff_t>(found.size()) > kMaxVisibleDevices) {
      throw Error(std::string(source) + ": more than " + std::to_string(kMaxVisibleDevices) +
                  " NVIDIA GPUs; the topology is malformed");
    }
  }
  // PCI bus order: nvidia-smi's index, CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID, Slurm's AutoDetect=nvml.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return std::tie(a.domain, a.bus, a.dev, a.func) < std::tie(b.domain, b.bus, b.dev, b.func);
  });
  for (auto& gpu : found)
    hardware.gpus.push_back(std::move(gpu.info));
  return hardware;
}

}  // namespace

int NodeHardware::numa_nodes_with_cpus() const {
  return static_cast<int>(std::count_if(numa.begin(), numa.end(), [](const auto& cpus) { return !cpus.empty(); }));
}

NodeHardware hardware_from_xml(std::string_view xml, std::string_view source) {
  if (xml.size() > kMaxTopologyXmlBytes) {
    throw Error(std::string(source) + ": " + std::to_string(xml.size()) + " bytes, more than the " +
                std::to_string(kMaxTopologyXmlBytes >> 20) + " MiB a topology file may have");
  }
  if (xml.empty()) throw Error(std::string(source) + ": empty, not an hwloc XML topology");
  Topology topology = new_topology(source);
  // hwloc wants the length with the terminating NUL.
  const std::string text(xml);
  if (hwloc_topology_set_xmlbuffer(topology.get(), text.c_str(), static_cast<int>(text.size() + 1)) != 0) {
    throw Error(std::string(source) + ": not an hwloc XML topology (" + std::strerror(errno) + ")");
  }
  if (hwloc_topology_load(topology.get()) != 0) {
    throw Error(std::string(source) + ": hwloc could not load it as an XML topology (" + std::strerror(errno) + ")");
  }
  return read_topology(topology.get(), source);
}

NodeHardware load_hardware(const std::string& xml_file) {
  if (xml_file.empty()) {
    const std::string source = "hwloc discovery of this node";
    Topology topology = new_topology(source);
    if (hwloc_topology_load(topology.get()) != 0) throw Error(hwloc_failure(source, "hwloc_topology_load"));
    return read_topology(topology.get(), source);
  }
  const std::string source = "hw_topology=" + clipped(xml_file);
  // A regular file of bounded size: a FIFO or device would block or never end, a huge file would be read whole.
  struct stat info {};
  if (::stat(xml_file.c_str(), &info) != 0) throw Error(source + ": " + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) throw Error(source + ": not a regular file");
  if (static_cast<std::uint64_t>(info.st_size) > kMaxTopologyXmlBytes) {
    throw Error(source + ": " + std::to_string(info.st_size) + " bytes, more than the " +
                std::to_string(kMaxTopologyXmlBytes >> 20) + " MiB a topology file may have");
  }
  std::ifstream in(xml_file, std::ios::binary);
  if (!in) throw Error(source + ": cannot be opened: " + std::strerror(errno));
  std::string text(static_cast<std::size_t>(info.st_size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return hardware_from_xml(text, source);
}

}  // namespace tenax::spank
