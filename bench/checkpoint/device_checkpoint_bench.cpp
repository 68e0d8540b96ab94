// tenax-bench-checkpoint-device: what a checkpoint of device-memory shards costs the stream that trains, against a
// device-to-host copy of the same bytes measured in the same run. One GPU per rank (rank % device count).
//
//   mpirun -n 1 tenax-bench-checkpoint-device --sizes 256M,1G --dir /tmp/tenax-bench-ckpt-device
//
// Per shard size (bytes per rank, in 4 tensors), median of --reps, slowest rank:
//   d2h pinned    cudaMemcpyAsync of the same bytes into pinned host memory on the stream, then synchronize: the floor
//   d2h pageable  cudaMemcpy into ordinary host memory (what a checkpoint without pinned staging would pay)
//   save          save() returning on the host
//   stall         save() and then cudaStreamSynchronize of the producing stream: until the stream that trains is free
//                 of the checkpoint's copies, i.e. what the next step waits for at most
//   commit        save() to wait() returning (CRC32C, HDF5 write, fsync, manifest, rename): in the background
// Target: stall <= 1.2x d2h pinned. --check makes the exit code non-zero on a miss.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cxxopts.hpp>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "tenax/checkpoint.hpp"
#include "tenax/error.hpp"
#include "tenax/runtime.hpp"

namespace {

using tenax::bench::Clock;
using tenax::bench::max_over_ranks;
using tenax::bench::median;
using tenax::bench::seconds_since;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw tenax::DeviceError(std::string("bench: ") + what + ": " + cudaGetErrorString(e));
}

std::uint64_t parse_size(const std::string& s) {
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(s, &used);
  } catch (const std::exception&) {
    throw tenax::UsageError("--sizes: '" + s + "' is not a size such as 256M or 1G");
  }
  const std::string unit = s.substr(used);
  if (unit == "K") return v << 10;
  if (unit == "M") return v << 20;
  if (unit == "G") return v << 30;
  if (unit.empty()) return v;
  throw tenax::UsageError("--sizes: '" + s + "' has an unknown unit (K, M or G)");
}

struct Row {
  std::uint64_t bytes = 0;
  double pinned_s = 0, pageable_s = 0, save_s = 0, stall_s = 0, commit_s = 0;
};

Row measure(tenax::Communicator& world, cudaStream_t stream, const std::string& root, std::uint64_t bytes, int reps) {
  const int rank = world.rank(), size = world.size();
  const std::uint64_t per_tensor = bytes / 4 / 4;  // floats per tensor
  Row row;
  row.bytes = per_tensor * 4 * 4;
  void* device = nullptr;
  check(cudaMalloc(&device, row.bytes), "cudaMalloc");
  void* pinned = nullptr;
  check(cudaMallocHost(&pinned, row.bytes), "cudaMallocHost");
  std::vector<std::uint8_t> pageable(row.bytes);
  // Values that are not zero, on the device before anything is timed.
  for (std::size_t i = 0; i < pageable.size(); ++i)
    pageable[i] = static_cast<std::uint8_t>(i * 131 + 7);
  check(cudaMemcpy(device, pageable.data(), row.bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  std::vector<tenax::TensorShard> shards;
  for (int t = 0; t < 4; ++t) {
    auto* base = static_cast<std::uint8_t*>(device) + t * per_tensor * 4;
    shards.push_back(tenax::TensorShard::flat_range("bulk" + std::to_string(t), tenax::DType::F32, per_tensor * size,
                                                    per_tensor * rank, per_tensor, base));
    shards.back().memory = tenax::MemoryKind::Device;
  }
  tenax::CheckpointOptions options;
  options.dir = root + "/" + std::to_string(row.bytes >> 20) + "M";
  options.keep = 2;
  options.layout = tenax::ParallelLayout{1, 1, size};
  options.cuda_stream = stream;
  std::vector<double> pinned_s, pageable_s, save_s, stall_s, commit_s;
  {
    tenax::Checkpointer ckpt(world, options, shards);
    for (int r = 0; r < reps; ++r) {
      world.barrier();
      auto t0 = Clock::now();
      check(cudaMemcpyAsync(pinned, device, row.bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync D2H");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      pinned_s.push_back(max_over_ranks(world, seconds_since(t0)));

      world.barrier();
      t0 = Clock::now();
      check(cudaMemcpy(pageable.data(), device, row.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
      pageable_s.push_back(max_over_ranks(world, seconds_since(t0)));

      // Each checkpoint differs (one byte changed on the stream, as a training step would).
      check(cudaMemsetAsync(static_cast<std::uint8_t*>(device) + r, r + 1, 1, stream), "cudaMemsetAsync");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      world.barrier();
      t0 = Clock::now();
      ckpt.save(static_cast<std::uint64_t>(r + 1));
      const double returned = seconds_since(t0);
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const double drained = seconds_since(t0);
      ckpt.wait();
      const double committed = seconds_since(t0);
      save_s.push_back(max_over_ranks(world, returned));
      stall_s.push_back(max_over_ranks(world, drained));
      commit_s.push_back(max_over_ranks(world, committed));
    }
  }
  check(cudaFreeHost(pinned), "cudaFreeHost");
  check(cudaFree(device), "cudaFree");
  row.pinned_s = median(pinned_s);
  row.pageable_s = median(pageable_s);
  row.save_s = median(save_s);
  row.stall_s = median(stall_s);
  row.commit_s = median(commit_s);
  return row;
}

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  cxxopts::Options cli("tenax-bench-checkpoint-device",
                       "Checkpoint of device-memory shards against a device-to-host copy of the same bytes");
  // clang-format off
  cli.add_options()
    ("sizes", "bytes per rank, comma-separated (K, M, G)", cxxopts::value<std::string>()->default_value("256M,1G"))
    ("dir", "checkpoint directory (emptied of this benchmark's checkpoints as retention goes)",
     cxxopts::value<std::string>()->default_value("/tmp/tenax-bench-ckpt-device"))
    ("reps", "repetitions per size (median)", cxxopts::value<int>()->default_value("5"))
    ("check", "exit non-zero when the stall exceeds 1.2x the pinned copy")
    ("h,help", "print this help");
  // clang-format on
  cxxopts::ParseResult args;
  try {
    args = cli.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw tenax::UsageError(std::string(e.what()) + " (see --help)");
  }
  tenax::Communicator& world = runtime.world();
  if (args.count("help")) {
    if (world.rank() == 0) std::printf("%s\n", cli.help().c_str());
    return tenax::kExitSuccess;
  }
  const int reps = args["reps"].as<int>();
  if (reps < 1) throw tenax::UsageError("--reps must be at least 1");
  std::vector<std::uint64_t> sizes;
  {
    std::string list = args["sizes"].as<std::string>(), item;
    for (std::size_t at = 0; at <= list.size(); ++at) {
      if (at == list.size() || list[at] == ',') {
        sizes.push_back(parse_size(item));
        if (sizes.back() < 4096) throw tenax::UsageError("--sizes: each size must be at least 4K");
        item.clear();
      } else {
        item += list[at];
      }
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw tenax::UsageError("tenax-bench-checkpoint-device needs a CUDA device, and this node has none");
  check(cudaSetDevice(world.rank() % devices), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  std::vector<Row> rows;
  for (std::uint64_t bytes : sizes)
    rows.push_back(measure(world, stream, args["dir"].as<std::string>(), bytes, reps));
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");

  bool miss = false;
  if (world.rank() == 0) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    std::printf("# %d rank(s), device %s, median of %d, slowest rank; seconds (GiB/s)\n", world.size(), prop.name,
                reps);
    std::printf("%s; dir %s (%s)\n", tenax::bench::machine_line().c_str(), args["dir"].as<std::string>().c_str(),
                tenax::bench::file_system_of(args["dir"].as<std::string>()).c_str());
    std::printf("%10s | %16s %16s | %9s %16s %9s | %9s\n", "size/rank", "d2h pinned", "d2h pageable", "save", "stall",
                "vs pinned", "commit");
  }
  for (const Row& r : rows) {
    const double gib = static_cast<double>(r.bytes) / (1ull << 30);
    const double ratio = r.stall_s / r.pinned_s;
    miss = miss || ratio > 1.2;
    if (world.rank() == 0)
      std::printf("%7.0f MiB | %7.4f (%5.1f) %7.4f (%5.1f) | %9.4f %7.4f (%5.1f) %8.2fx | %9.3f\n",
                  static_cast<double>(r.bytes) / (1 << 20), r.pinned_s, gib / r.pinned_s, r.pageable_s,
                  gib / r.pageable_s, r.save_s, r.stall_s, gib / r.stall_s, ratio, r.commit_s);
  }
  return args.count("check") && miss ? 1 : tenax::kExitSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
