// ParameterBuffers on a real 4-rank data-parallel group: buckets are reduced as soon as they fill during "backward",
// the sums are exact, ZeRO-1 owns disjoint slices and all-gathers the parameters, and the described state covers every
// element exactly once.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "common/mpi_test.hpp"
#include "tenax/data_parallel.hpp"
#include "tenax/optimizer.hpp"

namespace tenax::test {
namespace {

std::vector<ParameterSpec> specs() {
  auto whole = [](const std::string& name, Shape shape) {
    return ParameterSpec{name, shape, Shape(shape.size(), 0), shape, false, ParameterInit::Normal, 0.5f};
  };
  return {whole("out.weight", {16, 8}), whole("out.bias", {16}), whole("mid.weight", {8, 8}),
          whole("in.weight", {5, 8})};
}

// The gradient value every rank r puts at flat element i: exact in fp32, so sums compare exactly.
float grad_value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 97));
}

class DataParallelBuckets : public ::testing::TestWithParam<bool> {};

TEST_P(DataParallelBuckets, ReduceAsBucketsFillAndSumExactly) {
  const bool zero1 = GetParam();
  Communicator& w = world();
  ParameterBuffers buffers(specs(), DType::F32, w, 0, {256, zero1});  // 64-float buckets: one per parameter or so
  const FlatLayout& l = buffers.layout();
  ASSERT_GT(l.buckets.size(), 2u);
  for (int step = 0; step < 2; ++step) {
    buffers.zero_grads();
    for (std::size_t i = 0; i < l.total; ++i)
      buffers.flat_grads()[i] = grad_value(w.rank(), i);
    for (std::size_t p = 0; p < buffers.size(); ++p)
      buffers.mark_grad_ready(p);
    EXPECT_EQ(buffers.buckets_reduced_during_backward(), l.buckets.size()) << "every bucket reduced as it filled";
    buffers.finish_grad_sync();
    float expected_factor = 0;
    for (int r = 0; r < w.size(); ++r)
      expected_factor += static_cast<float>(r + 1);
    for (const FlatRange& r : buffers.owned_ranges())
      for (std::size_t i = r.begin; i < r.begin + r.count; ++i)
        ASSERT_EQ(buffers.flat_grads()[i],
                  expected_factor * 1000 + static_cast<float>(static_cast<int>(i % 97)) * w.size())
            << "element " << i;
  }
}

TEST_P(DataParallelBuckets, OptimizerStateCoversEveryElementOnceAndParametersStayReplicated) {
  const bool zero1 = GetParam();
  Communicator& w = world();
  ParameterBuffers buffers(specs(), DType::BF16, w, 0, {256, zero1});
  buffers.initialize(3);
  OptimizerConfig oc;
  Optimizer opt(buffers, oc);
  // Identical gradients on every rank: after the update every replica must hold the same parameters.
  buffers.zero_grads();
  for (std::size_t p = 0; p < buffers.size(); ++p) {
    const std::size_t n = static_cast<std::size_t>(shape_numel(buffers.spec(p).shape));
    for (std::size_t i = 0; i < n; ++i)
      buffers.grad(p)[i] = 0.01f * static_cast<float>(i % 7) - 0.02f;
    buffers.mark_grad_ready(p);
  }
  buffers.finish_grad_sync();
  opt.step();
  const std::uint64_t sum = global_checksum(buffers.parameter_entries(), w);
  std::vector<StateEntry> params = buffers.parameter_entries();
  for (StateEntry& e : params)
    e.primary = true;  // every replica's own view
  std::unique_ptr<Communicator> self = w.split(w.rank(), 0, "self");
  const std::uint64_t mine = global_checksum(params, *self);
  EXPECT_EQ(mine, sum) << "this replica's parameters differ from the primary ones";

  // Count, over all ranks, how often each element of each tensor is covered by a primary state entry.
  std::int64_t covered = 0;
  for (const StateEntry& e : opt.state_entries())
    if (e.primary) covered += shape_numel(e.shape);
  std::int64_t total_covered = 0;
  std::vector<std::int64_t> all(static_cast<std::size_t>(w.size()));
  w.all_gather(&covered, all.data(), 1, DType::I64);
  for (auto c : all)
    total_covered += c;
  std::int64_t elements = 0;
  for (const ParameterSpec& s : specs())
    elements += shape_numel(s.shape);
  EXPECT_EQ(total_covered, 3 * elements) << "master, m and v: each element exactly once";
}

INSTANTIATE_TEST_SUITE_P(AllReduceAndZeroOne, DataParallelBuckets, ::testing::Values(false, true),
                         [](const auto& param_info) {
                           return param_info.param ? std::string("Zero1") : std::string("AllReduce");
                         });

}  // namespace
}  // namespace tenax::test
