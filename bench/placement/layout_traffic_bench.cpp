// tenax-bench-layout-traffic: the traffic of one training step of a parallel layout, replayed on the ranks where the
// placement put them, timed, and set beside what the placement cost model says crosses the switches.
//
// Run it as a job step under the SPANK plugin (srun --tenax-layout=... --tenax-placement=...): each task takes the
// rank the plugin placed (TENAX_RANK, through tenax::Runtime) and the layout (TENAX_LAYOUT). One step is, in order,
// as the cost model counts it (tenax/placement.hpp):
//   - an all-reduce of --tp-bytes in every tensor-parallel group,
//   - the pipeline's activations: every stage swaps --pp-bytes / 2 with each neighbouring stage at once (1F1B's steady
//     state, where activations go forward while gradients come back), so --pp-bytes cross between each pair,
//   - an all-reduce of --dp-bytes in every data-parallel group.
// Every step starts at a barrier; a step's time is the slowest rank's. Rank 0 prints one line of key=value pairs: the
// measured step time (median, min over --steps after --warmup), each phase's median, and the model's bytes per step
// leaving nodes and leaf switches for the placement that actually ran (node names from SLURMD_NODENAME, the switch
// tree from --topology). With --link-rate (bits/s of the links between leaf switches, as tc shapes them) it also
// prints the model's time for the bytes that cross switches, both directions of a full-duplex link busy at once.
//
//   srun --tenax-layout=tp=1,pp=2 tenax-bench-layout-traffic --topology topology.conf [--link-rate 50e6]
#include <mpi.h>
#include <unistd.h>

#include <cxxopts.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/layout.hpp"
#include "tenax/placement.hpp"
#include "tenax/runtime.hpp"
#include "tenax/topology.hpp"

namespace {

using tenax::Communicator;
using tenax::DType;
using tenax::ParallelLayout;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The node this task runs on as Slurm names it (an emulated node shares the host name with its neighbours).
std::string node_name() {
  if (const char* slurm = std::getenv("SLURMD_NODENAME"); slurm && *slurm) return slurm;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) throw tenax::IoError("gethostname failed");
  return host;
}

// Every rank's node name, in rank order (a fixed-width all-gather: names are short, at most 255 bytes).
std::vector<std::string> gather_node_names(Communicator& world) {
  constexpr std::size_t kWidth = 256;
  std::string mine = node_name();
  if (mine.size() >= kWidth) throw tenax::UsageError("node name '" + mine.substr(0, 64) + "...' is too long");
  std::vector<char> send(kWidth, '\0'), all(kWidth * static_cast<std::size_t>(world.size()), '\0');
  std::copy(mine.begin(), mine.end(), send.begin());
  world.all_gather(send.data(), all.data(), kWidth, DType::U8).wait();
  std::vector<std::string> names;
  for (int r = 0; r < world.size(); ++r)
    names.emplace_back(all.data() + static_cast<std::size_t>(r) * kWidth);
  return names;
}

// The placement that ran: nodes in order of first appearance, each rank on the next free slot of its node.
tenax::Placement placement_that_ran(const std::vector<std::string>& node_of_rank, const ParallelLayout& layout) {
  tenax::Placement placement;
  placement.layout = layout;
  std::map<std::string, int> index, used;
  for (const std::string& name : node_of_rank) {
    if (!index.count(name)) {
      index[name] = static_cast<int>(placement.nodes.size());
      placement.nodes.push_back(name);
    }
    placement.slot_of_rank.push_back({index[name], used[name]++});
  }
  for (const auto& [name, count] : used)
    placement.slots_per_node = std::max(placement.slots_per_node, count);
  return placement;
}

struct PhaseTimes {
  std::vector<double> tp, pp, dp, step;
};

void swap_with_neighbours(tenax::ProcessGroups& groups, std::vector<float>& out, std::vector<float>& in) {
  Communicator& pp = *groups.pp;
  const int stage = pp.rank();
  const std::size_t half = out.size() / 2;
  std::vector<tenax::PeerTransfer> transfers;
  // Receives before sends on each side, in the same order on both ends of a pair: previous stage first, then next.
  if (stage > 0) {
    transfers.push_back({false, stage - 1, in.data(), half});
    transfers.push_back({true, stage - 1, out.data(), half});
  }
  if (stage + 1 < pp.size()) {
    transfers.push_back({false, stage + 1, in.data() + half, half});
    transfers.push_back({true, stage + 1, out.data() + half, half});
  }
  if (!transfers.empty()) pp.exchange(transfers, DType::F32).wait();
}

int run(int argc, char** argv) {
  cxxopts::Options spec("tenax-bench-layout-traffic", "one training step's traffic of a layout, timed where placed");
  spec.add_options()("topology", "topology.conf of the cluster (the cost model's switch tree)",
                     cxxopts::value<std::string>())("tp-bytes", "bytes all-reduced per TP group and step",
                                                    cxxopts::value<double>()->default_value("4194304"))(
      "pp-bytes", "bytes between neighbouring stages per step (both directions together)",
      cxxopts::value<double>()->default_value("1048576"))("dp-bytes", "bytes all-reduced per DP group and step",
                                                          cxxopts::value<double>()->default_value("2097152"))(
      "steps", "timed steps", cxxopts::value<int>()->default_value("10"))("warmup", "untimed steps first",
                                                                          cxxopts::value<int>()->default_value("2"))(
      "link-rate", "bits/s of a link between leaf switches (0: not known)",
      cxxopts::value<double>()->default_value("0"))("help", "this text");
  cxxopts::ParseResult args;
  try {
    args = spec.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& error) {
    throw tenax::UsageError(std::string(error.what()) + " (see --help)");
  }
  if (args.count("help")) {
    std::printf("%s\n", spec.help().c_str());
    return 0;
  }
  if (!args.count("topology")) throw tenax::UsageError("--topology FILE is required (the cluster's topology.conf)");
  const double tp_bytes = args["tp-bytes"].as<double>(), pp_bytes = args["pp-bytes"].as<double>(),
               dp_bytes = args["dp-bytes"].as<double>(), link_rate = args["link-rate"].as<double>();
  const int steps = args["steps"].as<int>(), warmup = args["warmup"].as<int>();
  for (double bytes : {tp_bytes, pp_bytes, dp_bytes})
    if (!(bytes >= 0 && bytes <= double(1u << 30)))
      throw tenax::UsageError("--tp-bytes, --pp-bytes and --dp-bytes take 0 to 1 GiB");
  if (steps < 1 || warmup < 0) throw tenax::UsageError("--steps must be >= 1 and --warmup >= 0");
  if (!(link_rate >= 0)) throw tenax::UsageError("--link-rate must be >= 0 bits/s");
  const tenax::SwitchTree tree = tenax::SwitchTree::from_topology_conf_file(args["topology"].as<std::string>());

  tenax::Runtime runtime(argc, argv);
  Communicator& world = runtime.world();
  const char* layout_text = std::getenv("TENAX_LAYOUT");
  const ParallelLayout layout =
      layout_text && *layout_text ? ParallelLayout::parse(layout_text) : ParallelLayout::infer(world.size(), 1, 1);
  if (layout.world_size() != world.size())
    throw tenax::UsageError("layout " + std::string(layout_text ? layout_text : "") + " needs " +
                            std::to_string(layout.world_size()) + " ranks, the step has " +
                            std::to_string(world.size()));
  tenax::ProcessGroups groups = tenax::ProcessGroups::create(world, layout);
  const std::vector<std::string> node_of_rank = gather_node_names(world);

  // Whole float32 elements; the PP buffer holds one half per direction.
  std::vector<float> tp_buffer(static_cast<std::size_t>(tp_bytes / 4), 1.0f);
  std::vector<float> dp_buffer(static_cast<std::size_t>(dp_bytes / 4), 1.0f);
  std::vector<float> pp_out(static_cast<std::size_t>(pp_bytes / 8) * 2, 1.0f), pp_in(pp_out.size());

  PhaseTimes times;
  for (int step = 0; step < warmup + steps; ++step) {
    world.barrier();
    const double t0 = now();
    if (layout.tp > 1 && !tp_buffer.empty())
      groups.tp->all_reduce(tp_buffer.data(), tp_buffer.data(), tp_buffer.size(), DType::F32, tenax::ReduceOp::Avg)
          .wait();
    const double t1 = now();
    if (layout.pp > 1 && !pp_out.empty()) swap_with_neighbours(groups, pp_out, pp_in);
    const double t2 = now();
    if (layout.dp > 1 && !dp_buffer.empty())
      groups.dp->all_reduce(dp_buffer.data(), dp_buffer.data(), dp_buffer.size(), DType::F32, tenax::ReduceOp::Avg)
          .wait();
    const double t3 = now();
    // The step lasts as long as its slowest rank; phases likewise.
    double local[4] = {t1 - t0, t2 - t1, t3 - t2, t3 - t0}, slowest[4];
    world.all_reduce(local, slowest, 4, DType::F64, tenax::ReduceOp::Max).wait();
    if (step < warmup) continue;
    times.tp.push_back(slowest[0]);
    times.pp.push_back(slowest[1]);
    times.dp.push_back(slowest[2]);
    times.step.push_back(slowest[3]);
  }
  if (world.rank() != 0) return 0;

  const tenax::Placement placement = placement_that_ran(node_of_rank, layout);
  const tenax::StepTraffic traffic{tp_bytes, pp_bytes, dp_bytes};
  const tenax::TrafficCost cost = tenax::traffic_cost(placement, tree, traffic);
  const tenax::LevelTraffic cross = cost.crossing.size() >= 2 ? cost.crossing[1] : tenax::LevelTraffic{};
  std::string ranks;
  for (std::size_t r = 0; r < node_of_rank.size(); ++r)
    ranks += (r ? "," : "") + node_of_rank[r];
  const char* policy = std::getenv("TENAX_PLACEMENT");
  std::printf(
      "layout-traffic: policy=%s layout=tp=%d,pp=%d,dp=%d ranks=%s steps=%d step_s=%.4f step_min_s=%.4f tp_s=%.4f "
      "pp_s=%.4f dp_s=%.4f inter_node_bytes=%.0f cross_switch_bytes=%.0f cross_tp=%.0f cross_pp=%.0f cross_dp=%.0f",
      policy && *policy ? policy : "unset", layout.tp, layout.pp, layout.dp, ranks.c_str(), steps, median(times.step),
      *std::min_element(times.step.begin(), times.step.end()), median(times.tp), median(times.pp), median(times.dp),
      cost.inter_node_bytes(), cross.total(), cross.tp, cross.pp, cross.dp);
  // Full duplex: the bytes the model counts cross in both directions at once when the traffic is symmetric (rings,
  // and the pipeline's swap above), so the link is busy for half the total at its rate each way.
  if (link_rate > 0) std::printf(" model_cross_switch_s=%.4f", cross.total() * 8.0 / 2.0 / link_rate);
  std::printf("\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(run, argc, argv);
}
