// Training the example on GPUs against the CPU: the same model, data and seed, with parameters, activations and
// gradients on the device, NCCL groups and the device kernels, must follow the CPU run's loss curve.
//
//   fp32: every step's loss within 1e-4 relative of the single-rank CPU run (the GPU sums in other orders and with
//         atomics, so bitwise equality is not expected; 20 steps of AdamW keep the difference near 1e-6).
//   bf16: the GPU multiplies bf16 inputs (activations and gradients rounded on the fly) where the CPU multiplies fp32
//         values rounded only at layer boundaries, so it follows the CPU bf16 run within 2e-2 relative, and the loss
//         must fall as far as the CPU's does (within the same tolerance).
//
// Runs on 1, 2 and 4 ranks with the layouts that fit; each needs one GPU per rank on this node and skips otherwise
// (NCCL puts at most one rank on a GPU). Without any GPU every test skips, or fails when TENAX_TEST_GPU=1.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/mpi_test.hpp"
#include "device_setup.hpp"
#include "tenax/error.hpp"
#include "tenax/execution.hpp"
#include "training_checkpoint.hpp"
#include "training_test_util.hpp"

namespace tenax::test {
namespace {

constexpr int kSteps = 20;

class GpuTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) {
      if (gpu_required()) FAIL() << "TENAX_TEST_GPU=1 but no usable CUDA device";
      GTEST_SKIP() << "no CUDA device";
    }
    const examples::LocalRank local = examples::node_local_rank(world());
    if (local.size > cuda_device_count())
      GTEST_SKIP() << local.size << " ranks on this node but " << cuda_device_count()
                   << " GPU(s): NCCL needs one GPU per rank";
  }
};

struct Layout {
  int tp, pp, dp;
  bool zero1;
};

// The layouts of `world_size` ranks this test trains (a selection of those tests/training checks on the CPU).
std::vector<Layout> layouts_for(int world_size) {
  switch (world_size) {
    case 1:
      return {{1, 1, 1, false}};
    case 2:
      return {{2, 1, 1, false}, {1, 2, 1, false}, {1, 1, 2, true}};
    case 4:
      return {{2, 2, 1, false}, {2, 1, 2, false}, {1, 2, 2, true}, {1, 1, 4, false}};
    default:  // any other world size: pure data parallelism, so no loop below runs empty
      return {{1, 1, world_size, false}};
  }
}

std::string describe(const Layout& l, Precision p) {
  return "tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp) + " dp " + std::to_string(l.dp) +
         (l.zero1 ? " zero1" : "") + " " + std::string(PrecisionPolicy{p}.name());
}

void expect_close_curves(const RunResult& gpu, const RunResult& cpu, double rel_tol, const std::string& what) {
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (std::size_t s = 0; s < cpu.losses.size(); ++s)
    EXPECT_NEAR(gpu.losses[s], cpu.losses[s], rel_tol * std::fabs(cpu.losses[s]))
        << what << ": step " << s + 1 << " (GPU " << gpu.losses[s] << ", CPU " << cpu.losses[s] << ")";
}

TEST_F(GpuTraining, Fp32FollowsTheSingleRankCpuRunWithin1e4) {
  for (const Layout& l : layouts_for(world().size())) {
    examples::TrainConfig config = small_config(l.tp, l.pp, l.dp);
    config.data_parallel.zero1 = l.zero1;
    const RunResult cpu = single_rank_reference(config, kSteps);
    config.device = Device::Cuda;
    const RunResult gpu = train(world(), config, kSteps);
    expect_close_curves(gpu, cpu, 1e-4, describe(l, Precision::Fp32));
    EXPECT_LT(gpu.losses.back(), gpu.losses.front() - 0.1) << describe(l, Precision::Fp32) << ": the loss must fall";
  }
}

TEST_F(GpuTraining, Bf16FollowsTheCpuBf16RunWithin2e2) {
  for (const Layout& l : layouts_for(world().size())) {
    examples::TrainConfig config = small_config(l.tp, l.pp, l.dp);
    config.data_parallel.zero1 = l.zero1;
    config.precision = PrecisionPolicy{Precision::Bf16};
    const RunResult cpu = single_rank_reference(config, kSteps);
    config.device = Device::Cuda;
    const RunResult gpu = train(world(), config, kSteps);
    expect_close_curves(gpu, cpu, 2e-2, describe(l, Precision::Bf16));
    const double cpu_drop = cpu.losses.front() - cpu.losses.back();
    const double gpu_drop = gpu.losses.front() - gpu.losses.back();
    EXPECT_GT(cpu_drop, 0.1);
    EXPECT_NEAR(gpu_drop, cpu_drop, 2e-2 * cpu.losses.front()) << describe(l, Precision::Bf16);
  }
}

// fp16 on the GPU: the scaler, the unscale kernel's device flag and the overflow agreement across ranks. An injected
// overflow is skipped by every rank and the scale backs off, as on the CPU.
TEST_F(GpuTraining, Fp16SkipsAnInjectedOverflowOnEveryRank) {
  const Layout l = layouts_for(world().size()).back();
  examples::TrainConfig config = small_config(l.tp, l.pp, l.dp);
  config.precision = PrecisionPolicy{Precision::Fp16};
  config.loss_scaler.hysteresis = 1;
  config.inject_overflow_at = {3};
  config.device = Device::Cuda;
  const RunResult gpu = train(world(), config, 6);
  for (int s = 0; s < 6; ++s)
    EXPECT_EQ(gpu.skipped[static_cast<std::size_t>(s)], s == 2) << "step " << s + 1;
  EXPECT_EQ(gpu.scales[3], gpu.scales[2] * 0.5f) << "the scale backs off after the skipped step";
  for (double loss : gpu.losses)
    EXPECT_TRUE(std::isfinite(loss));
}

// Data parallelism on the device reduces buckets while backward runs, and the state round-trips through the host
// copies that checkpoints use.
TEST_F(GpuTraining, BucketsReduceDuringBackwardAndTheStateRoundTripsThroughTheHost) {
  if (world().size() < 2) GTEST_SKIP() << "needs data parallelism (2 or more ranks)";
  examples::TrainConfig config = small_config(1, 1, world().size());
  config.device = Device::Cuda;
  // small_config's 4 KiB buckets give this model several. The last one always completes with the last gradient, so
  // only a count above one shows reductions issued while backward was still running.
  examples::Trainer trainer(world(), config);
  const examples::StepResult first = trainer.step();
  EXPECT_GE(first.buckets_reduced_early, 2u) << "no bucket was reduced before the end of backward";

  // Save the state's host copies, train on, restore them: the next step repeats the saved run's next step.
  std::vector<StateEntry> entries = trainer.state_entries();
  std::vector<std::vector<unsigned char>> saved;
  for (const StateEntry& e : entries) {
    ASSERT_EQ(e.device, Device::Host) << e.name;
    const auto* p = static_cast<const unsigned char*>(e.data);
    saved.emplace_back(p, p + static_cast<std::size_t>(shape_numel(e.shape)) * dtype_size(e.dtype));
  }
  const examples::TrainingProgress progress = trainer.progress();
  const double second = trainer.step().loss;
  (void)trainer.step();
  entries = trainer.state_entries();
  for (std::size_t i = 0; i < entries.size(); ++i)
    std::copy(saved[i].begin(), saved[i].end(), static_cast<unsigned char*>(entries[i].data));
  trainer.restore(progress);
  EXPECT_NEAR(trainer.step().loss, second, 1e-5 * second) << "the restored run repeats its next step";
}

// The host copies of a GPU run's state are the same state the CPU trains with: moved into a CPU trainer of the same
// layout, training goes on as the GPU run does (within the fp32 tolerance).
TEST_F(GpuTraining, StateMovesFromTheGpuToTheCpuAndTrainingGoesOn) {
  const Layout l = layouts_for(world().size()).front();
  examples::TrainConfig config = small_config(l.tp, l.pp, l.dp);
  config.precision = PrecisionPolicy{Precision::Bf16};  // master weights and 16-bit parameters both travel
  examples::TrainConfig gpu_config = config;
  gpu_config.device = Device::Cuda;
  examples::Trainer gpu(world(), gpu_config);
  for (int s = 0; s < 3; ++s)
    (void)gpu.step();
  const std::vector<StateEntry> from = gpu.state_entries();
  examples::Trainer cpu(world(), config);
  const std::vector<StateEntry> to = cpu.state_entries();
  ASSERT_EQ(from.size(), to.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    ASSERT_EQ(from[i].name, to[i].name);
    ASSERT_EQ(from[i].shape, to[i].shape) << from[i].name;
    std::copy_n(static_cast<const unsigned char*>(from[i].data),
                static_cast<std::size_t>(shape_numel(from[i].shape)) * dtype_size(from[i].dtype),
                static_cast<unsigned char*>(to[i].data));
  }
  cpu.restore(gpu.progress());
  for (int s = 0; s < 3; ++s) {
    const double on_gpu = gpu.step().loss, on_cpu = cpu.step().loss;
    EXPECT_NEAR(on_gpu, on_cpu, 2e-2 * on_cpu) << "step " << s + 4 << " (bf16 products differ between the two)";
  }
}

// A GPU run saved through the real checkpointer (host copies of the device state) and resumed by a new GPU trainer
// continues where the saved run would have.
TEST_F(GpuTraining, CheckpointAndResumeOnTheGpu) {
  const Layout l = layouts_for(world().size()).back();
  examples::TrainConfig config = small_config(l.tp, l.pp, l.dp);
  config.data_parallel.zero1 = l.zero1;
  config.device = Device::Cuda;
  // One directory for every rank: rank 0's process id names it.
  std::int64_t id = world().rank() == 0 ? static_cast<std::int64_t>(getpid()) : 0;
  world().broadcast(&id, 1, DType::I64, 0);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tenax-gpu-ckpt-" + std::to_string(id));
  examples::CheckpointSettings settings{dir.string(), 2, 2};

  std::vector<double> expected;
  {
    examples::Trainer original(world(), config);
    examples::TrainingCheckpoint checkpoint(world(), original, settings);
    for (int s = 1; s <= 6; ++s) {
      const double loss = original.step().loss;
      if (s == 4) {
        original.sync_state_to_host();
        checkpoint.finish(4);
      }
      if (s > 4) expected.push_back(loss);
    }
  }
  {
    examples::Trainer resumed(world(), config);
    examples::TrainingCheckpoint checkpoint(world(), resumed, settings);
    const examples::ResumeResult r = checkpoint.resume();
    ASSERT_TRUE(r.resumed);
    EXPECT_EQ(r.step, 4);
    for (double loss : expected)
      EXPECT_NEAR(resumed.step().loss, loss, 1e-4 * loss);
  }
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

// NCCL refuses two ranks on one GPU: more ranks on a node than GPUs is a UsageError on every rank, before NCCL starts.
TEST(GpuPlacement, MoreRanksThanGpusIsAUsageErrorOnEveryRank) {
  if (cuda_device_count() == 0) {
    if (gpu_required()) FAIL() << "TENAX_TEST_GPU=1 but no usable CUDA device";
    GTEST_SKIP() << "no CUDA device";
  }
  const examples::LocalRank local = examples::node_local_rank(world());
  if (local.size <= cuda_device_count()) GTEST_SKIP() << "every rank has its own GPU here";
  try {
    (void)examples::make_cuda_context(world());
    ADD_FAILURE() << "no exception on rank " << world().rank();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("would share one GPU"), std::string::npos) << e.what();
  }
  world().barrier();
}

}  // namespace
}  // namespace tenax::test
