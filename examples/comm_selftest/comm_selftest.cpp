// tenax-comm-selftest: verifies the communicator on this job's ranks, then reports bandwidth.
//
// For every layout that fits the world size (tp, pp, dp ∈ divisors), every group of that layout runs all-reduce,
// all-gather, reduce-scatter, broadcast and a send/recv ring over several dtypes and sizes, each result checked
// exactly against what every rank can compute itself. Rank 0 prints progress and a summary; the exit code is non-zero
// if any check failed on any rank.
#include <cxxopts.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/layout.hpp"
#include "tenax/runtime.hpp"

namespace {

using tenax::Communicator;
using tenax::DType;
using tenax::ReduceOp;

struct Tally {
  long checks = 0;
  long failures = 0;
  double bytes = 0;
  double seconds = 0;
};

// Integers whose sums are exact in every dtype checked: the expected value of any reduction is known on every rank.
std::int32_t value_of(int rank, std::size_t i) {
  return static_cast<std::int32_t>((i * 7 + rank * 3) % 61) - 30;
}

template <class T>
std::vector<T> make(int rank, std::size_t count) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] = static_cast<T>(value_of(rank, i));
  return v;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class T>
void check_group(Communicator& comm, DType dtype, std::size_t count, Tally& tally) {
  const int n = comm.size();
  const int me = comm.rank();
  auto fail = [&](const char* op, std::size_t i) {
    if (tally.failures++ < 10)
      std::fprintf(stderr, "selftest: %s on '%s' (%s, %zu elements) wrong at element %zu on rank %d\n", op,
                   comm.name().c_str(), std::string(tenax::dtype_name(dtype)).c_str(), count, i, me);
  };
  const auto in = make<T>(me, count);

  std::vector<T> out(count);
  double t0 = now();
  comm.all_reduce(in.data(), out.data(), count, dtype, ReduceOp::Sum);
  tally.seconds += now() - t0;
  tally.bytes += static_cast<double>(count * sizeof(T));
  for (std::size_t i = 0; i < count; ++i) {
    long expected = 0;
    for (int r = 0; r < n; ++r)
      expected += value_of(r, i);
    if (static_cast<long>(out[i]) != expected) {
      fail("all_reduce", i);
      break;
    }
  }
  ++tally.checks;

  std::vector<T> gathered(count * n);
  t0 = now();
  comm.all_gather(in.data(), gathered.data(), count, dtype);
  tally.seconds += now() - t0;
  tally.bytes += static_cast<double>(gathered.size() * sizeof(T));
  for (int r = 0; r < n; ++r) {
    const auto expected = make<T>(r, count);
    if (count && std::memcmp(gathered.data() + r * count, expected.data(), count * sizeof(T)) != 0)
      fail("all_gather", r);
  }
  ++tally.checks;

  const auto big = make<T>(me, count * n);
  std::vector<T> block(count);
  t0 = now();
  comm.reduce_scatter(big.data(), block.data(), count, dtype, ReduceOp::Max);
  tally.seconds += now() - t0;
  tally.bytes += static_cast<double>(big.size() * sizeof(T));
  for (std::size_t i = 0; i < count; ++i) {
    std::int32_t expected = value_of(0, me * count + i);
    for (int r = 1; r < n; ++r)
      expected = std::max(expected, value_of(r, me * count + i));
    if (static_cast<std::int32_t>(block[i]) != expected) {
      fail("reduce_scatter", i);
      break;
    }
  }
  ++tally.checks;

  std::vector<T> shared = me == n - 1 ? in : std::vector<T>(count);
  comm.broadcast(shared.data(), count, dtype, n - 1);
  if (shared != make<T>(n - 1, count)) fail("broadcast", 0);
  ++tally.checks;

  std::vector<T> from_prev(count);
  comm.send_recv(in.data(), count, (me + 1) % n, from_prev.data(), count, (me + n - 1) % n, dtype);
  if (from_prev != make<T>((me + n - 1) % n, count)) fail("send_recv", 0);
  ++tally.checks;
}

int selftest(int argc, char** argv) {
  cxxopts::Options options("tenax-comm-selftest", "Checks tenax's communicator on every layout that fits the job");
  options.add_options()("max-count", "largest message in elements",
                        cxxopts::value<std::size_t>()->default_value("1048583"))("h,help", "print this help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  tenax::Runtime runtime(argc, argv);
  Communicator& world = runtime.world();
  const int n = world.size();
  const bool root = world.rank() == 0;
  const std::size_t max_count = args["max-count"].as<std::size_t>();
  const double start = now();
  if (root) std::printf("tenax communicator self-test: %d ranks, messages up to %zu elements\n", n, max_count);

  std::vector<tenax::ParallelLayout> layouts;
  for (int tp = 1; tp <= n; ++tp)
    for (int pp = 1; tp * pp <= n; ++pp)
      if (n % (tp * pp) == 0) layouts.push_back(tenax::ParallelLayout{tp, pp, n / (tp * pp)});

  Tally total;
  const std::size_t counts[] = {1, 37, 4099, max_count};
  for (const auto& layout : layouts) {
    const double layout_start = now();
    Tally tally;
    tenax::ProcessGroups groups = tenax::ProcessGroups::create(world, layout);
    for (Communicator* comm : {groups.tp.get(), groups.pp.get(), groups.dp.get()}) {
      for (std::size_t count : counts) {
        check_group<float>(*comm, DType::F32, count, tally);
        check_group<double>(*comm, DType::F64, count, tally);
        check_group<std::int32_t>(*comm, DType::I32, count, tally);
        check_group<std::int64_t>(*comm, DType::I64, count, tally);
      }
    }
    long failures = tally.failures;
    world.all_reduce(&failures, &failures, 1, DType::I64, ReduceOp::Sum);
    if (root)
      std::printf("  layout %-16s %4ld checks  %s  (%.2f s)\n", layout.to_string().c_str(), tally.checks,
                  failures == 0 ? "ok" : "FAILED", now() - layout_start);
    total.checks += tally.checks;
    total.failures += tally.failures;
    total.bytes += tally.bytes;
    total.seconds += tally.seconds;
  }

  long failures = total.failures;
  world.all_reduce(&failures, &failures, 1, DType::I64, ReduceOp::Sum);
  double slowest = total.seconds;
  world.all_reduce(&slowest, &slowest, 1, DType::F64, ReduceOp::Max);
  if (root) {
    std::printf(
        "summary: %zu layouts, %ld checks per rank, %ld failures, %.1f MB moved per rank at %.2f GB/s, "
        "%.2f s total\n",
        layouts.size(), total.checks, failures, total.bytes / 1e6, total.bytes / slowest / 1e9, now() - start);
    std::printf("%s\n", failures == 0 ? "self-test passed" : "self-test FAILED");
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(selftest, argc, argv);
}
