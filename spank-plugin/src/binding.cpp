#include "binding.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "input_limits.hpp"
#include "tenax/error.hpp"

namespace tenax::spank {

namespace {

std::optional<int> to_int(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

// The non-empty items of a comma-separated list.
std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::ptrdiff_t count_items(std::string_view text) {
  return std::count(text.begin(), text.end(), ',') + 1;
}

// The NUMA node of the GPU with index `index` in PCI bus order (-1: no such GPU, or unknown).
int numa_of_gpu(const NodeHardware& hardware, std::optional<int> index) {
  if (!index || *index < 0 || static_cast<std::size_t>(*index) >= hardware.gpus.size()) return -1;
  return hardware.gpus[static_cast<std::size_t>(*index)].numa_node;
}

// The NUMA hint of each entry of the visible list (see binding.hpp): through Slurm's global indices when they match
// the list entry for entry, else numeric entries as PCI-order indices when CUDA numbers devices in that order.
std::vector<int> entry_numa_hints(const NodeHardware& hardware, const std::vector<std::string_view>& entries,
                                  const BindingRequest& request) {
  std::vector<int> hints(entries.size(), -1);
  if (request.slurm_gpus && count_items(*request.slurm_gpus) <= kMaxVisibleDevices) {
    const auto globals = split_commas(*request.slurm_gpus);
    if (globals.size() == entries.size()) {
      for (std::size_t i = 0; i < entries.size(); ++i)
        hints[i] = numa_of_gpu(hardware, to_int(globals[i]));
      return hints;
    }
  }
  const bool pci_order = !request.device_order || *request.device_order == "PCI_BUS_ID";
  if (!pci_order) return hints;
  for (std::size_t i = 0; i < entries.size(); ++i)
    hints[i] = numa_of_gpu(hardware, to_int(entries[i]));
  return hints;
}

}  // namespace

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

TaskBinding plan_binding(const NodeHardware& hardware, const BindingRequest& request) {
  TaskBinding binding;
  const int tasks = std::max(1, request.tasks);
  const int slot = std::clamp(request.slot, 0, tasks - 1);

  // The usable GPUs, each with its NUMA hint: the entries of the job's own list when Slurm set one, else every GPU
  // found, by its index in PCI order.
  const bool read_list = request.visible_devices && (request.bind_gpus || request.gpus_bound_by_slurm);
  std::vector<std::string> devices;
  std::vector<int> device_numa;
  if (read_list) {
    // The job's environment is the user's: a list longer than any node's GPUs is refused before it is copied.
    const auto entries = count_items(*request.visible_devices);
    if (entries > kMaxVisibleDevices) {
      throw UsageError(shown_value("CUDA_VISIBLE_DEVICES", *request.visible_devices) + ": " + std::to_string(entries) +
                       " devices, more than the " + std::to_string(kMaxVisibleDevices) +
                       " a node can hold; unset it or list the node's GPUs");
    }
    const auto items = split_commas(*request.visible_devices);
    devices.assign(items.begin(), items.end());
    device_numa = entry_numa_hints(hardware, items, request);
  } else if (!request.visible_devices && !request.gpus_bound_by_slurm) {
    for (std::size_t i = 0; i < hardware.gpus.size(); ++i) {
      devices.push_back(std::to_string(i));
      device_numa.push_back(hardware.gpus[i].numa_node);
    }
  }

  int numa_hint = -1;
  const int gpu_count = static_cast<int>(devices.size());
  if (request.gpus_bound_by_slurm) {
    // Slurm's per-task list is the task's own: nothing to choose, its first GPU says where the task should run.
    if (gpu_count > 0) numa_hint = device_numa[0];
  } else if (request.bind_gpus && gpu_count > 0) {
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
      list += (list.empty() ? "" : ",") + devices[static_cast<std::size_t>(i)];
    binding.cuda_visible_devices = list;
    numa_hint = device_numa[static_cast<std::size_t>(first)];
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
  if (binding.summary.empty()) {
    binding.summary =
        request.bind_gpus && request.bind_numa ? "no GPU and a single NUMA node: nothing to bind" : "nothing to bind";
  }
  return binding;
}

}  // namespace tenax::spank
