// tenax-bench-ckpt-plan: what building the checkpoint plan costs at scale (no MPI: the plan is computed from every
// rank's shard description, as each rank does once in the Checkpointer constructor).
//
//   tenax-bench-ckpt-plan --ranks 256,1024,4096,16384 --tensors 20
//
// Each rank holds, per tensor, its ZeRO-1 range of a [4096, 4096] f32 tensor as up to three boxes, plus one tensor
// replicated on every rank. Columns: blocks in the plan, describe (text every rank contributes), plan (parse, replica
// detection, overlap and coverage checks, dataset names), plan time per block, and std::sort of as many (offset,
// shape) keys, the n log n floor of any duplicate/overlap check. Target: the plan scales like a sort, not like pairs:
// its time per block at the largest world is at most 3x that at the smallest (the reference, same run).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "checkpoint/shard_plan.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using tenax::DType;
using tenax::TensorShard;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<TensorShard> rank_shards(int rank, int ranks, int tensors, float* data) {
  const std::uint64_t rows = 4096, cols = 4096, total = rows * cols;
  std::vector<TensorShard> v;
  for (int t = 0; t < tensors; ++t) {
    const std::string name = "optim/t" + std::to_string(t);
    const std::uint64_t per = total / ranks, begin = rank * per, end = rank == ranks - 1 ? total : begin + per;
    std::uint64_t at = begin;
    if (at % cols != 0 && at < end) {
      const std::uint64_t n = std::min(end, (at / cols + 1) * cols) - at;
      v.push_back(TensorShard::block(name, DType::F32, {rows, cols}, {at / cols, at % cols}, {1, n}, data));
      at += n;
    }
    if (end - at >= cols) {
      const std::uint64_t full = (end - at) / cols;
      v.push_back(TensorShard::block(name, DType::F32, {rows, cols}, {at / cols, 0}, {full, cols}, data));
      at += full * cols;
    }
    if (at < end) v.push_back(TensorShard::block(name, DType::F32, {rows, cols}, {at / cols, 0}, {1, end - at}, data));
    v.push_back(TensorShard::whole("replicated/t" + std::to_string(t), DType::F32, {cols}, data));
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options cli("tenax-bench-ckpt-plan", "Checkpoint plan cost at scale against an n log n sort");
  cli.add_options()("ranks", "World sizes, comma-separated",
                    cxxopts::value<std::vector<int>>()->default_value("256,1024,4096,16384"))(
      "tensors", "ZeRO-sharded tensors (plus as many replicated ones)", cxxopts::value<int>()->default_value("20"))(
      "check", "Exit non-zero when the target is missed")("h,help", "Show this help");
  auto args = cli.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", cli.help().c_str());
    return 0;
  }
  const int tensors = args["tensors"].as<int>();
  float data = 0;
  bool missed = false;
  std::printf("%s\n", tenax::bench::machine_line().c_str());
  std::printf("%8s %8s %10s | %10s %10s %9s %10s\n", "ranks", "tensors", "blocks", "describe s", "plan s", "us/block",
              "sort s");
  double first_per_block = 0, last_per_block = 0;
  for (int ranks : args["ranks"].as<std::vector<int>>()) {
    auto t0 = Clock::now();
    std::vector<std::string> per_rank;
    for (int r = 0; r < ranks; ++r) {
      std::vector<TensorShard> shards = rank_shards(r, ranks, tensors, &data);
      tenax::ckpt::normalize_shards(shards);
      per_rank.push_back(tenax::ckpt::describe_shards(shards));
    }
    const double describe_s = since(t0);
    t0 = Clock::now();
    tenax::ckpt::Plan plan = tenax::ckpt::make_plan(per_rank);
    const double plan_s = since(t0);

    std::vector<std::pair<std::vector<std::uint64_t>, std::vector<std::uint64_t>>> keys;
    std::mt19937_64 rng(1);
    for (const auto& b : plan.blocks)
      keys.emplace_back(b.box.offset, b.box.shape);
    std::shuffle(keys.begin(), keys.end(), rng);
    t0 = Clock::now();
    std::sort(keys.begin(), keys.end());
    const double sort_s = since(t0);
    const double per_block = plan_s / static_cast<double>(plan.blocks.size()) * 1e6;
    if (first_per_block == 0) first_per_block = per_block;
    last_per_block = per_block;
    std::printf("%8d %8d %10zu | %10.3f %10.3f %9.2f %10.4f\n", ranks, tensors, plan.blocks.size(), describe_s, plan_s,
                per_block, sort_s);
  }
  missed = last_per_block > 3 * first_per_block;
  std::printf("# target: us/block at the largest world <= 3x the smallest's (%.2f vs %.2f): %s\n", last_per_block,
              first_per_block, missed ? "MISSED" : "met");
  return args.count("check") && missed ? 1 : 0;
}
