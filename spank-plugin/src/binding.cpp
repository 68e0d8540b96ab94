#include "binding.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "input_limits.hpp"
#include "tenax/error.hpp"

namespace tenax::spank {

namespace fs = std::filesystem;

int NodeHardware::numa_nodes_with_cpus() const {
  return static_cast<int>(std::count_if(numa.begin(), numa.end(), [](const auto& cpus) { return !cpus.empty(); }));
}

namespace {

std::optional<std::string> read_first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<int> to_int(std::string_view text) {
  int value = 0;
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n'))
    text.remove_suffix(1);
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace

std::optional<std::vector<int>> parse_cpulist(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  if (text.empty()) return std::vector<int>{};
  // Marks, not a set of numbers: with every number at most kMaxCpuId, repeated or overlapping ranges cost nothing.
  std::vector<bool> present;
  for (std::string_view item : split_commas(text)) {
    const auto dash = item.find('-');
    const auto lo = to_int(item.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : to_int(item.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi > kMaxCpuId) return std::nullopt;
    if (present.size() <= static_cast<std::size_t>(*hi)) present.resize(static_cast<std::size_t>(*hi) + 1);
    std::fill(present.begin() + *lo, present.begin() + *hi + 1, true);
  }
  std::vector<int> cpus;
  for (std::size_t cpu = 0; cpu < present.size(); ++cpu) {
    if (present[cpu]) cpus.push_back(static_cast<int>(cpu));
  }
  return cpus;
}

std::string format_cpulist(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

NodeHardware discover_hardware(const std::string& root) {
  NodeHardware hardware;
  const fs::path base = root.empty() ? fs::path("/") : fs::path(root);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(base / "proc/driver/nvidia/gpus", ec)) {
    GpuInfo gpu;
    gpu.pci_bus_id = entry.path().filename().string();
    // The PCI tree names devices in lower case; the NVIDIA driver may not.
    std::string sysfs_name = gpu.pci_bus_id;
    std::transform(sysfs_name.begin(), sysfs_name.end(), sysfs_name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (auto line = read_first_line(base / "sys/bus/pci/devices" / sysfs_name / "numa_node")) {
      gpu.numa_node = to_int(*line).value_or(-1);
    }
    hardware.gpus.push_back(gpu);
  }
  std::sort(hardware.gpus.begin(), hardware.gpus.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.pci_bus_id < b.pci_bus_id; });
  for (const auto& entry : fs::directory_iterator(base / "sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("node")) continue;
    const auto id = to_int(std::string_view(name).substr(4));
    if (!id || *id < 0 || *id > 4096) continue;
    const auto line = read_first_line(entry.path() / "cpulist");
    const auto cpus = line ? parse_cpulist(*line) : std::nullopt;
    if (!cpus) continue;
    if (hardware.numa.size() <= static_cast<std::size_t>(*id)) hardware.numa.resize(*id + 1);
    hardware.numa[*id] = *cpus;
  }
  return hardware;
}

TaskBinding plan_binding(const NodeHardware& hardware, const BindingRequest& request) {
  TaskBinding binding;
  const int tasks = std::max(1, request.tasks);
  const int slot = std::clamp(request.slot, 0, tasks - 1);

  // The usable GPUs, each with its NUMA hint: the job's own list when Slurm set one, else every GPU found.
  std::vector<std::string> devices;
  std::vector<int> device_numa;
  if (request.visible_devices && request.bind_gpus) {
    // The job's environment is the user's: a list longer than any node's GPUs is refused before it is copied.
    const auto entries = std::count(request.visible_devices->begin(), request.visible_devices->end(), ',') + 1;
    if (entries > kMaxVisibleDevices) {
      throw UsageError(shown_value("CUDA_VISIBLE_DEVICES", *request.visible_devices) + ": " + std::to_string(entries) +
                       " devices, more than the " + std::to_string(kMaxVisibleDevices) +
                       " a node can hold; unset it or list the node's GPUs");
    }
    for (std::string_view item : split_commas(*request.visible_devices)) {
      if (item.empty()) continue;
      devices.emplace_back(item);
      const auto index = to_int(item);
      const bool known = index && *index >= 0 && static_cast<std::size_t>(*index) < hardware.gpus.size();
      device_numa.push_back(known ? hardware.gpus[*index].numa_node : -1);
    }
  } else {
    for (std::size_t i = 0; i < hardware.gpus.size(); ++i) {
      devices.push_back(std::to_string(i));
      device_numa.push_back(hardware.gpus[i].numa_node);
    }
  }

  int numa_hint = -1;
  const int gpu_count = static_cast<int>(devices.size());
  if (request.bind_gpus && gpu_count > 0) {
    int first = 0, count = 1;
    if (gpu_count >= tasks) {
      count = gpu_count / tasks;
      first = slot * count;
    } else {
      // 64 bits: with up to 65533 tasks on a node, slot * gpu_count overflows int.
      first = static_cast<int>(std::int64_t{slot} * gpu_count / tasks);
    }
    std::string list;
    for (int i = first; i < first + count; ++i)
      list += (list.empty() ? "" : ",") + devices[i];
    binding.cuda_visible_devices = list;
    numa_hint = device_numa[first];
    binding.summary = "gpus=" + list;
  }

  const int numa_count = static_cast<int>(hardware.numa.size());
  if (request.bind_numa && hardware.numa_nodes_with_cpus() >= 2) {
    int target = numa_hint;
    if (target < 0 || target >= numa_count || hardware.numa[target].empty()) {
      // No usable GPU hint: spread the tasks evenly over the NUMA nodes that have CPUs.
      std::vector<int> with_cpus;
      for (int k = 0; k < numa_count; ++k) {
        if (!hardware.numa[k].empty()) with_cpus.push_back(k);
      }
      target =
          with_cpus[static_cast<std::size_t>(std::int64_t{slot} * static_cast<std::int64_t>(with_cpus.size()) / tasks)];
    }
    std::vector<int> allowed = request.allowed_cpus;
    std::sort(allowed.begin(), allowed.end());
    std::set_intersection(hardware.numa[target].begin(), hardware.numa[target].end(), allowed.begin(), allowed.end(),
                          std::back_inserter(binding.cpus));
    binding.summary += (binding.summary.empty() ? "" : " ") + std::string("numa=") + std::to_string(target);
    binding.summary +=
        binding.cpus.empty() ? " (no allowed CPU there: affinity left alone)" : " cpus=" + format_cpulist(binding.cpus);
  }
  if (binding.summary.empty()) binding.summary = "no GPU and a single NUMA node: nothing to bind";
  return binding;
}

}  // namespace tenax::spank
