#include "slurm_binding.hpp"

#include <string_view>

#include "input_limits.hpp"

namespace tenax::spank {

namespace {

// A Slurm CPU binding as SLURM_CPU_BIND_TYPE ("cores,mask_cpu:") or SLURM_CPU_BIND ("quiet,cores,mask_cpu:0x3,0xc")
// write it: the unit and the mode, the list after a "...:" mode ignored.
struct CpuBind {
  std::string unit;  // threads, cores, sockets, ldoms or ""
  std::string mode;  // none, rank, map_cpu, mask_cpu, rank_ldom, map_ldom, mask_ldom or ""
  bool empty() const { return unit.empty() && mode.empty(); }
};

CpuBind parse_cpu_bind(std::string_view text) {
  CpuBind bind;
  std::size_t start = 0;
  while (start < text.size() && bind.mode.empty()) {
    auto end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view token = text.substr(start, end - start);
    start = end + 1;
    if (token == "threads" || token == "cores" || token == "sockets" || token == "ldoms") {
      bind.unit = token;
    } else if (token == "none" || token == "rank" || token == "rank_ldom") {
      bind.mode = token;
    } else {
      for (std::string_view mode : {"map_cpu:", "mask_cpu:", "map_ldom:", "mask_ldom:"}) {
        if (token.starts_with(mode)) bind.mode = mode.substr(0, mode.size() - 1);
      }
    }
  }
  return bind;
}

std::string describe(const CpuBind& bind) {
  if (bind.unit.empty()) return bind.mode;
  if (bind.mode.empty() || bind.mode == "mask_cpu") return bind.unit;  // task/affinity's masks for the unit
  return bind.unit + "," + bind.mode;
}

BindingOwner cpu_owner(const EnvLookup& task_env, const std::optional<std::string>& requested_type) {
  auto text = task_env("SLURM_CPU_BIND_TYPE");
  if (!text) text = task_env("SLURM_CPU_BIND");
  const CpuBind task = text ? parse_cpu_bind(*text) : CpuBind{};
  const CpuBind requested = requested_type ? parse_cpu_bind(*requested_type) : CpuBind{};
  if (task.mode == "none" || requested.mode == "none") {
    return {BindingOwner::Unbound, "cpus: left alone, as Slurm's --cpu-bind=none asks"};
  }
  if (!requested.empty()) {
    return {BindingOwner::Slurm, "cpus: left to Slurm's --cpu-bind=" + clipped(describe(requested))};
  }
  if (task.empty() || (task.unit.empty() && task.mode == "mask_cpu")) return {};
  // Not asked by srun: the site's default (TaskPluginParam, CpuBind) or task/affinity's automatic binding.
  return {BindingOwner::Slurm, "cpus: left to Slurm's default binding (" + clipped(describe(task)) + ")"};
}

// The GPU part of a tres_bind ("gpu:verbose,closest;nic:..." -> "closest"), nullopt without one.
std::optional<std::string> gpu_part(std::string_view tres_bind) {
  std::size_t start = 0;
  while (start <= tres_bind.size()) {
    auto end = tres_bind.find(';', start);
    if (end == std::string_view::npos) end = tres_bind.size();
    std::string_view item = tres_bind.substr(start, end - start);
    start = end + 1;
    if (!item.starts_with("gpu:")) continue;
    item.remove_prefix(4);
    if (item.starts_with("verbose,")) item.remove_prefix(8);
    return std::string(item);
  }
  return std::nullopt;
}

BindingOwner gpu_owner_of(const std::string& bind) {
  // Slurm tells the kinds apart by their first letters (src/common/tres_bind.c): "n..." is none.
  if (!bind.empty() && (bind[0] == 'n' || bind[0] == 'N')) {
    return {BindingOwner::Unbound, "gpus: left alone, as Slurm's --gpu-bind=none asks"};
  }
  if (bind.starts_with("per_task:")) {
    return {BindingOwner::Slurm,
            "gpus: left to Slurm's per-task binding (--gpus-per-task=" + clipped(bind.substr(9)) + ")"};
  }
  if (bind.starts_with("single:")) {
    return {BindingOwner::Slurm, "gpus: left to Slurm's --gpu-bind=" + clipped(bind) + " (--ntasks-per-gpu)"};
  }
  return {BindingOwner::Slurm, "gpus: left to Slurm's --gpu-bind=" + clipped(bind)};
}

BindingOwner gpu_owner(const EnvLookup& task_env) {
  if (const auto tres_bind = task_env("SLURMD_TRES_BIND")) {
    if (const auto bind = gpu_part(*tres_bind)) return gpu_owner_of(*bind);
    return {};
  }
  if (const auto bind = task_env("SLURM_GPU_BIND"); bind && !bind->empty()) {
    std::string_view value = *bind;
    if (value.starts_with("verbose,")) value.remove_prefix(8);
    return gpu_owner_of(std::string(value));
  }
  if (const auto per_task = task_env("SLURM_GPUS_PER_TASK"); per_task && !per_task->empty()) {
    return gpu_owner_of("per_task:" + *per_task);
  }
  return {};
}

}  // namespace

SlurmBinding slurm_binding(const EnvLookup& task_env, const std::optional<std::string>& requested_cpu_bind_type) {
  return {cpu_owner(task_env, requested_cpu_bind_type), gpu_owner(task_env)};
}

}  // namespace tenax::spank
