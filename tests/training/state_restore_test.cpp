// The enumerated state (parameters, master weights, optimizer moments, progress) is the WHOLE training state: copying
// it out after k steps and back into a fresh trainer continues bitwise identically to the uninterrupted run.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "training_test_util.hpp"

namespace tenax::test {
namespace {

struct Saved {
  std::vector<std::vector<unsigned char>> bytes;
  examples::TrainingProgress progress;
};

Saved save(examples::Trainer& t) {
  Saved s;
  for (const StateEntry& e : t.state_entries()) {
    const std::size_t n = static_cast<std::size_t>(shape_numel(e.shape)) * dtype_size(e.dtype);
    const auto* p = static_cast<const unsigned char*>(e.data);
    s.bytes.emplace_back(p, p + n);
  }
  s.progress = t.progress();
  return s;
}

void load(examples::Trainer& t, const Saved& s) {
  const std::vector<StateEntry> entries = t.state_entries();
  ASSERT_EQ(entries.size(), s.bytes.size());
  for (std::size_t i = 0; i < entries.size(); ++i)
    std::memcpy(entries[i].data, s.bytes[i].data(), s.bytes[i].size());
  t.restore(s.progress);
}

void check_resume(examples::TrainConfig c, const char* what) {
  SCOPED_TRACE(what);
  examples::Trainer original(world(), c);
  for (int s = 0; s < 3; ++s)
    original.step();
  const Saved saved = save(original);
  std::vector<double> expected;
  for (int s = 0; s < 3; ++s)
    expected.push_back(original.step().loss);
  const std::uint64_t expected_checksum = original.parameters_checksum();

  examples::Trainer resumed(world(), c);
  load(resumed, saved);
  EXPECT_EQ(resumed.progress().step, 3);
  for (int s = 0; s < 3; ++s)
    EXPECT_EQ(resumed.step().loss, expected[static_cast<std::size_t>(s)]) << "step " << s + 4;
  EXPECT_EQ(resumed.parameters_checksum(), expected_checksum);
}

TEST(StateRestore, ResumesBitwiseFromTheEnumeratedState) {
  check_resume(small_config(2, 2, 1), "fp32 tp2 pp2");
  examples::TrainConfig zero = small_config(1, 1, 4);
  zero.data_parallel.zero1 = true;
  check_resume(zero, "fp32 dp4 zero1");
  examples::TrainConfig bf16 = small_config(2, 1, 2);
  bf16.precision = PrecisionPolicy::parse("bf16");
  bf16.data_parallel.zero1 = true;
  check_resume(bf16, "bf16 tp2 dp2 zero1");
  examples::TrainConfig fp16 = small_config(1, 2, 2);
  fp16.precision = PrecisionPolicy::parse("fp16");
  fp16.loss_scaler.hysteresis = 1;
  fp16.inject_overflow_at = {2};  // the saved scaler state carries a backed-off scale
  check_resume(fp16, "fp16 pp2 dp2 with a skipped step");
}

TEST(StateRestore, EntriesNameEveryTensorAndPrimaryPiecesTileEachGlobalTensorOnce) {
  examples::TrainConfig c = small_config(2, 1, 2);
  c.precision = PrecisionPolicy::parse("bf16");
  c.data_parallel.zero1 = true;
  examples::Trainer t(world(), c);
  std::int64_t primary_elements = 0;
  std::int64_t parameter_elements = 0;
  std::set<std::string> names;
  for (const StateEntry& e : t.state_entries()) {
    if (e.primary) primary_elements += shape_numel(e.shape);
    names.insert(e.name);
    // pp = 1: every rank lists every parameter (tp splits tensors but keeps their names).
    if (e.name.rfind("param/", 0) == 0) parameter_elements += shape_numel(e.global_shape);
    for (std::size_t d = 0; d < e.shape.size(); ++d)
      EXPECT_LE(e.offset[d] + e.shape[d], e.global_shape[d]) << e.name;
  }
  // The primary pieces over all ranks tile the parameters, master weights and both moments exactly once.
  std::vector<std::int64_t> all(static_cast<std::size_t>(world().size()));
  world().all_gather(&primary_elements, all.data(), 1, DType::I64);
  std::int64_t total = 0;
  for (auto v : all)
    total += v;
  EXPECT_EQ(total, 4 * parameter_elements);
  EXPECT_TRUE(names.count("param/embedding.weight"));
  EXPECT_TRUE(names.count("master/blocks.0.fc1.weight"));
  EXPECT_TRUE(names.count("adamw.v/output.weight"));
}

}  // namespace
}  // namespace tenax::test
