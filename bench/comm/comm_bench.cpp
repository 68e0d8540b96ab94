// tenax-bench-comm: time, algbw and busbw of tenax's all-reduce / all-gather / reduce-scatter beside the raw MPI call
// on the same buffers in the same run, for sizes from -b to -e bytes, plus single-thread memcpy as the machine's
// ceiling. Results are checked (exact integer-valued floats) before timing. On a GPU build, --backend nccl reports
// the NCCL path the same way (device buffers).
//
// busbw follows nccl-tests: all-reduce moves 2(n-1)/n of the buffer per rank, all-gather and reduce-scatter (n-1)/n
// of the total, so busbw is comparable with the link bandwidth regardless of the rank count.
#include <mpi.h>

#include <cxxopts.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tenax/build_config.hpp"
#include "tenax/error.hpp"
#include "tenax/runtime.hpp"

#if TENAX_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace {

using tenax::Communicator;
using tenax::DType;
using tenax::ReduceOp;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::size_t parse_size(const std::string& text) {
  std::size_t pos = 0;
  const double value = std::stod(text, &pos);
  const std::string unit = text.substr(pos);
  double scale = 1;
  if (unit == "K" || unit == "k")
    scale = 1024.0;
  else if (unit == "M" || unit == "m")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    throw tenax::UsageError("size '" + text + "': unknown unit (use K, M or G)");
  return static_cast<std::size_t>(value * scale);
}

std::string human(std::size_t bytes) {
  char out[32];
  if (bytes >= (1u << 30))
    std::snprintf(out, sizeof out, "%zuG", bytes >> 30);
  else if (bytes >= (1u << 20))
    std::snprintf(out, sizeof out, "%zuM", bytes >> 20);
  else if (bytes >= (1u << 10))
    std::snprintf(out, sizeof out, "%zuK", bytes >> 10);
  else
    std::snprintf(out, sizeof out, "%zu", bytes);
  return out;
}

// Median of per-iteration times, with the slowest rank's time for each iteration (a collective is as slow as its
// slowest member).
double time_op(MPI_Comm comm, int warmup, int iters, const std::function<void()>& op) {
  for (int i = 0; i < warmup; ++i)
    op();
  std::vector<double> samples(iters);
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(comm);
    const double t0 = now();
    op();
    samples[i] = now() - t0;
  }
  MPI_Allreduce(MPI_IN_PLACE, samples.data(), iters, MPI_DOUBLE, MPI_MAX, comm);
  std::sort(samples.begin(), samples.end());
  return samples[iters / 2];
}

double memcpy_bandwidth(std::size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);  // touched: the measurement excludes first-touch page faults
  std::vector<double> samples;
  for (int i = 0; i < 7; ++i) {
    const double t0 = now();
    std::memcpy(b.data(), a.data(), bytes);
    samples.push_back(now() - t0);
  }
  std::sort(samples.begin(), samples.end());
  return static_cast<double>(bytes) / samples[3] / 1e9;
}

struct OpSpec {
  std::string name;
  double bus_factor;  // busbw = algbw * factor
};

int bench(int argc, char** argv) {
  cxxopts::Options options("tenax-bench-comm", "tenax collectives vs raw MPI (nccl-tests style)");
  options.add_options()("b,minbytes", "smallest message", cxxopts::value<std::string>()->default_value("8"))(
      "e,maxbytes", "largest message", cxxopts::value<std::string>()->default_value("256M"))(
      "f,stepfactor", "size multiplier between rows", cxxopts::value<int>()->default_value("4"))(
      "n,iters", "timed iterations per size", cxxopts::value<int>()->default_value("20"))(
      "w,warmup", "warm-up iterations per size", cxxopts::value<int>()->default_value("3"))(
      "o,op", "all_reduce, all_gather, reduce_scatter or all", cxxopts::value<std::string>()->default_value("all"))(
      "backend", "mpi or nccl", cxxopts::value<std::string>()->default_value("mpi"))(
      "max-overhead", "exit non-zero if tenax is slower than raw MPI by more than this fraction at >= 1 MiB",
      cxxopts::value<double>()->default_value("-1"))("h,help", "print this help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  tenax::Runtime runtime(argc, argv);
  Communicator& world = runtime.world();
  const int n = world.size();
  const bool root = world.rank() == 0;
  const std::size_t min_bytes = std::max<std::size_t>(parse_size(args["minbytes"].as<std::string>()), 4);
  const std::size_t max_bytes = parse_size(args["maxbytes"].as<std::string>());
  const int factor = args["stepfactor"].as<int>();
  const int iters = args["iters"].as<int>();
  const int warmup = args["warmup"].as<int>();
  const std::string which = args["op"].as<std::string>();
  const std::string backend = args["backend"].as<std::string>();
  const double max_overhead = args["max-overhead"].as<double>();
  if (factor < 2 || iters < 1 || warmup < 0) throw tenax::UsageError("need -f >= 2, -n >= 1, -w >= 0");

  if (backend == "nccl") {
#if TENAX_HAVE_NCCL
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      throw tenax::UsageError("--backend nccl needs a CUDA device; none is usable here");
    auto nccl = tenax::make_nccl_communicator(world, world.rank() % devices, "bench");
    if (root) std::printf("# NCCL backend, %d ranks\n#%11s %10s %10s %10s\n", n, "size", "time(us)", "algbw", "busbw");
    for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
      const std::size_t count = bytes / sizeof(float);
      void* buffer = nullptr;
      if (cudaMalloc(&buffer, count * sizeof(float)) != cudaSuccess) throw tenax::Error("cudaMalloc failed");
      cudaMemset(buffer, 0, count * sizeof(float));
      const double t = time_op(MPI_COMM_WORLD, warmup, iters, [&] {
        nccl->all_reduce(buffer, buffer, count, DType::F32, ReduceOp::Sum);
        nccl->synchronize();
      });
      const double algbw = static_cast<double>(count * sizeof(float)) / t / 1e9;
      if (root)
        std::printf("%12s %10.1f %10.2f %10.2f\n", human(count * sizeof(float)).c_str(), t * 1e6, algbw,
                    algbw * 2.0 * (n - 1) / n);
      cudaFree(buffer);
    }
    return 0;
#else
    throw tenax::UsageError("--backend nccl: this build has no NCCL backend");
#endif
  }
  if (backend != "mpi") throw tenax::UsageError("--backend '" + backend + "': expected mpi or nccl");

  const double ceiling = memcpy_bandwidth(std::min<std::size_t>(max_bytes, 256u << 20));
  if (root) {
    std::printf("# tenax-bench-comm: %d ranks, %d iterations (median of slowest rank), sizes %s..%s, float32\n", n,
                iters, human(min_bytes).c_str(), human(max_bytes).c_str());
    std::printf("# single-thread memcpy (warm): %.2f GB/s\n", ceiling);
  }

  std::vector<OpSpec> ops;
  if (which == "all" || which == "all_reduce") ops.push_back({"all_reduce", 2.0 * (n - 1) / n});
  if (which == "all" || which == "all_gather") ops.push_back({"all_gather", static_cast<double>(n - 1) / n});
  if (which == "all" || which == "reduce_scatter") ops.push_back({"reduce_scatter", static_cast<double>(n - 1) / n});
  if (ops.empty())
    throw tenax::UsageError("-o '" + which + "': expected all_reduce, all_gather, reduce_scatter or all");

  // Buffers sized for the largest row, allocated and touched once, reused by every row and both implementations.
  const std::size_t max_count = max_bytes / sizeof(float);
  std::vector<float> send(max_count * n), recv(max_count * n);
  for (std::size_t i = 0; i < send.size(); ++i)
    send[i] = static_cast<float>((i + world.rank()) % 13);
  std::fill(recv.begin(), recv.end(), 0.0f);

  bool within_target = true;
  for (const OpSpec& op : ops) {
    if (root)
      std::printf("\n# %s\n#%11s %10s | %10s %8s %8s | %10s %8s %8s | %8s %s\n", op.name.c_str(), "size", "count",
                  "tenax(us)", "algbw", "busbw", "MPI(us)", "algbw", "busbw", "tenax/MPI", "check");
    for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
      // Sizes are per rank for all-reduce (nccl-tests convention: the buffer) and total for the gather/scatter pair.
      const std::size_t count =
          op.name == "all_reduce" ? bytes / sizeof(float) : std::max<std::size_t>(bytes / sizeof(float) / n, 1);
      const int icount = static_cast<int>(count);
      std::function<void()> mine, raw;
      bool correct = true;
      if (op.name == "all_reduce") {
        mine = [&] { world.all_reduce(send.data(), recv.data(), count, DType::F32, ReduceOp::Sum); };
        raw = [&] { MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
        mine();
        for (std::size_t i = 0; i < count && correct; i += 97) {
          float expected = 0;
          for (int r = 0; r < n; ++r)
            expected += static_cast<float>((i + r) % 13);
          correct = recv[i] == expected;
        }
      } else if (op.name == "all_gather") {
        mine = [&] { world.all_gather(send.data(), recv.data(), count, DType::F32); };
        raw = [&] { MPI_Allgather(send.data(), icount, MPI_FLOAT, recv.data(), icount, MPI_FLOAT, MPI_COMM_WORLD); };
        mine();
        for (int r = 0; r < n && correct; ++r)
          for (std::size_t i = 0; i < count && correct; i += 97)
            correct = recv[r * count + i] == static_cast<float>((i + r) % 13);
      } else {
        mine = [&] { world.reduce_scatter(send.data(), recv.data(), count, DType::F32, ReduceOp::Sum); };
        raw = [&] { MPI_Reduce_scatter_block(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
        mine();
        for (std::size_t i = 0; i < count && correct; i += 97) {
          float expected = 0;
          for (int r = 0; r < n; ++r)
            expected += static_cast<float>((world.rank() * count + i + r) % 13);
          correct = recv[i] == expected;
        }
      }
      int ok = correct ? 1 : 0;
      MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      // Alternate which implementation goes first so neither always runs on a warmer cache.
      const double t_raw = time_op(MPI_COMM_WORLD, warmup, iters, raw);
      const double t_mine = time_op(MPI_COMM_WORLD, warmup, iters, mine);
      const std::size_t payload = (op.name == "all_reduce" ? count : count * n) * sizeof(float);
      const double alg_mine = static_cast<double>(payload) / t_mine / 1e9;
      const double alg_raw = static_cast<double>(payload) / t_raw / 1e9;
      const double ratio = t_mine / t_raw;
      if (payload >= (1u << 20) && max_overhead >= 0 && ratio > 1.0 + max_overhead) within_target = false;
      if (root)
        std::printf("%12s %10zu | %10.1f %8.3f %8.3f | %10.1f %8.3f %8.3f | %8.3f %s\n", human(payload).c_str(), count,
                    t_mine * 1e6, alg_mine, alg_mine * op.bus_factor, t_raw * 1e6, alg_raw, alg_raw * op.bus_factor,
                    ratio, ok ? "ok" : "WRONG");
      if (!ok) within_target = false;
    }
  }
  if (root && max_overhead >= 0)
    std::printf("\n# target (tenax within %.0f%% of raw MPI at >= 1 MiB, results correct): %s\n", max_overhead * 100,
                within_target ? "met" : "MISSED");
  return within_target ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(bench, argc, argv);
}
