// The GPT example on a token dataset, end to end: tenax-launch over real mpirun ranks of tenax-example-gpt reading
// real token shards. A restart must resume at the exact data position: after a kill -9 the run ends bitwise where an
// uninterrupted run ends, and after a preemption resumed in another layout every later step trains on the same
// samples (its loss equals the uninterrupted run's within the layout tolerance, far below the difference between
// two neighbouring steps' batches, which a sample skipped or seen twice would produce).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "core/json.hpp"
#include "data/dataset_writer.hpp"
#include "launch_harness.hpp"

namespace tenax::test {
namespace {

using std::chrono::seconds;

// A dataset with learnable structure: documents from a random first-order Markov chain over 256 ids (each id has 4
// likely successors), so consecutive batches differ and the loss falls.
std::string write_dataset(const std::string& dir) {
  const std::string path = dir + "/dataset";
  data::DatasetWriter writer(path, 256, 0, 20000);
  std::mt19937_64 rng(11);
  std::vector<std::array<std::int32_t, 4>> next(256);
  for (auto& n : next)
    for (auto& t : n)
      t = static_cast<std::int32_t>(1 + rng() % 255);
  for (int split = 0; split < 2; ++split) {
    const auto id = split ? data::SplitId::Validation : data::SplitId::Train;
    for (int doc = 0; doc < (split ? 4 : 60); ++doc) {
      std::vector<std::int32_t> tokens(1000 + rng() % 500);
      std::int32_t t = static_cast<std::int32_t>(1 + rng() % 255);
      for (auto& out : tokens) {
        out = t;
        t = next[static_cast<std::size_t>(t)][rng() % 4];
      }
      writer.append(id, tokens);
      writer.end_document(id);
    }
  }
  writer.set_tokenizer("no tokenizer: the test samples no text");
  writer.commit();
  return path;
}

std::vector<std::string> gpt_args(const std::string& data, const std::vector<std::string>& more) {
  std::vector<std::string> args = {"--data",
                                   data,
                                   "--hidden",
                                   "64",
                                   "--layers",
                                   "2",
                                   "--heads",
                                   "2",
                                   "--seq-len",
                                   "32",
                                   "--batch",
                                   "16",
                                   "--micro-batch",
                                   "4",
                                   "--steps",
                                   "120",
                                   "--checkpoint-every",
                                   "10",
                                   "--validate-every",
                                   "0",
                                   "--validation-samples",
                                   "8",
                                   "--sample-tokens",
                                   "0",
                                   "--warmup",
                                   "5",
                                   "--log-every",
                                   "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// step -> loss of attempt `attempt` from the run directory's training.jsonl (exact: shortest round-trip numbers).
std::map<long, double> losses_of(const std::string& run_dir, int attempt) {
  std::ifstream in(run_dir + "/metrics/training.jsonl");
  std::map<long, double> out;
  std::string line;
  while (std::getline(in, line)) {
    const json::Value r = json::Value::parse(line);
    if (r.at("attempt").i64() == attempt) out[static_cast<long>(r.at("step").i64())] = r.at("loss").number();
  }
  return out;
}

struct Reference {
  std::string checksum;
  std::map<long, double> losses;
};

Reference uninterrupted(const ScratchDir& dir, int ranks, const std::vector<std::string>& args) {
  Launch launch(quick_restart_launcher_args(dir, ranks), args, dir / "reference.txt");
  EXPECT_EQ(launch.wait(seconds(120)), 0) << launch.output();
  return {final_checksum(launch.output()), losses_of(dir / "run", 1)};
}

// A flipped payload byte of a small dataset read in place is found before training (--verify-data auto); asked not
// to look, the program trains on it (what --verify-data off is for: a dataset too large to read on every rank).
TEST(GptDataCheck, AFlippedPayloadByteIsFoundBeforeTraining) {
  ScratchDir data_dir("gpt-damaged");
  const std::string data = write_dataset(data_dir.path());
  {
    std::fstream shard(data + "/train-00001.tok", std::ios::in | std::ios::out | std::ios::binary);
    shard.seekg(64 + 1001);
    const char byte = static_cast<char>(shard.get() ^ 0x10);
    shard.seekp(64 + 1001);
    shard.put(byte);
  }
  ScratchDir dir("gpt-damaged-run");
  auto args = gpt_args(data, {"--steps", "3", "--checkpoint-dir", "none"});
  // A usage error (64): the launcher stops at once instead of restarting into the same damage until it calls the run
  // a restart loop.
  Launch checked({"-n", "1", "--run-dir", dir / "run"}, args, dir / "checked.txt");
  EXPECT_EQ(checked.wait(seconds(60)), 64) << checked.output();
  EXPECT_NE(checked.output().find("train-00001.tok: payload checksum mismatch"), std::string::npos) << checked.output();
  EXPECT_EQ(checked.output().find("step     1"), std::string::npos) << "trained on damaged data";
  EXPECT_EQ(checked.output().find("attempt 2"), std::string::npos) << "restarted into the same damage";
  args.insert(args.end(), {"--verify-data", "off"});
  Launch unchecked({"-n", "1", "--run-dir", dir / "run2"}, args, dir / "unchecked.txt");
  EXPECT_EQ(unchecked.wait(seconds(60)), 0) << unchecked.output();
  // The tokenizer the sample at the end needs is checked before training too (this dataset's is no model): trained
  // first, the run failed only at its end, and at the end of every restart after it.
  args.insert(args.end(), {"--sample-tokens", "4"});
  Launch sampled({"-n", "1", "--run-dir", dir / "run3"}, args, dir / "sampled.txt");
  EXPECT_EQ(sampled.wait(seconds(60)), 64) << sampled.output();
  EXPECT_NE(sampled.output().find("tokenizer model " + data + "/tokenizer.model"), std::string::npos)
      << sampled.output();
  EXPECT_EQ(sampled.output().find("step     1"), std::string::npos) << "trained before finding the tokenizer unusable";
}

// Mistakes in the command line are usage errors found before anything starts, naming the option or path.
TEST(GptDataCheck, AWrongOptionOrDataPathIsAUsageErrorNamingIt) {
  ScratchDir data_dir("gpt-options");
  const std::string data = write_dataset(data_dir.path());
  ScratchDir dir("gpt-options-run");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {gpt_args(data, {"--log-every", "-1"}), "--log-every must be at least 1, not -1"},
      {gpt_args(data + "/index.json", {}), data + "/index.json is a file, not a dataset directory"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    Launch launch({"-n", "1", "--run-dir", dir / ("run" + std::to_string(i))}, cases[i].first,
                  dir / ("out" + std::to_string(i) + ".txt"));
    EXPECT_EQ(launch.wait(seconds(60)), 64) << launch.output();
    EXPECT_NE(launch.output().find(cases[i].second), std::string::npos) << launch.output();
  }
}

TEST(GptDataResume, KillNineResumesAtTheExactDataPosition) {
  ScratchDir data_dir("gpt-data");
  const std::string data = write_dataset(data_dir.path());
  const auto args = gpt_args(data, {"--tp", "2", "--pp", "2"});
  ScratchDir ref_dir("gpt-reference");
  const Reference ref = uninterrupted(ref_dir, 4, args);
  ASSERT_FALSE(ref.checksum.empty());
  ASSERT_EQ(ref.losses.size(), 120u);
  EXPECT_LT(ref.losses.at(120), ref.losses.at(1) - 0.5) << "the model does not learn the data";

  std::random_device seed_source;
  const unsigned seed = seed_source();
  std::mt19937 rng(seed);
  const int victim = static_cast<int>(rng() % 4);
  const long long at_step = 12 + static_cast<long long>(rng() % 40);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": kill -9 of rank " + std::to_string(victim) + " at step " +
               std::to_string(at_step));
  ScratchDir dir("gpt-kill9");
  Launch launch(quick_restart_launcher_args(dir, 4), args, dir / "out.txt");
  auto beat = wait_for_step(dir / "run", victim, 1, at_step, seconds(60));
  ASSERT_TRUE(beat.has_value()) << launch.output();
  ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGKILL), 0);
  ASSERT_EQ(launch.wait(seconds(120)), 0) << launch.output();
  EXPECT_EQ(final_checksum(launch.output()), ref.checksum) << launch.output();
  // Every step the second attempt trained has the uninterrupted run's loss, bit for bit.
  const auto second = losses_of(dir / "run", 2);
  ASSERT_FALSE(second.empty()) << launch.output();
  EXPECT_EQ(second.rbegin()->first, 120);
  for (const auto& [step, loss] : second)
    EXPECT_EQ(loss, ref.losses.at(step)) << "step " << step;
}

TEST(GptDataResume, PreemptedAndResumedInAnotherLayoutTrainsOnTheSameSamples) {
  ScratchDir data_dir("gpt-data");
  const std::string data = write_dataset(data_dir.path());
  ScratchDir ref_dir("gpt-reference");
  const Reference ref = uninterrupted(ref_dir, 4, gpt_args(data, {"--tp", "2", "--pp", "2"}));
  ASSERT_EQ(ref.losses.size(), 120u);

  ScratchDir dir("gpt-relayout");
  long stop = 0;
  {
    Launch first(quick_restart_launcher_args(dir, 4), gpt_args(data, {"--tp", "2", "--pp", "2"}), dir / "out1.txt");
    auto beat = wait_for_step(dir / "run", 0, 1, 15, seconds(60));
    ASSERT_TRUE(beat.has_value()) << first.output();
    ASSERT_EQ(kill(first.pid(), SIGTERM), 0);
    ASSERT_EQ(first.wait(seconds(60)), 75) << first.output();
    static const std::regex committed(R"(preempted: emergency checkpoint of step (\d+) committed)");
    std::smatch m;
    const std::string output = first.output();
    ASSERT_TRUE(std::regex_search(output, m, committed)) << output;
    stop = std::stol(m[1].str());
    ASSERT_LT(stop, 120) << "the preemption came too late to test a resume";
  }
  // The second invocation: the same global batch in another layout (data parallelism over two replicas, each split
  // over two tensor-parallel ranks), so each replica reads half of every step's samples.
  Launch second(quick_restart_launcher_args(dir, 4), gpt_args(data, {"--tp", "2", "--dp", "2"}), dir / "out2.txt");
  ASSERT_EQ(second.wait(seconds(120)), 0) << second.output();
  EXPECT_NE(second.output().find("at step " + std::to_string(stop) + " (saved with layout tp=2,pp=2,dp=1"),
            std::string::npos)
      << second.output();
  const auto resumed = losses_of(dir / "run", 2);
  ASSERT_EQ(resumed.size(), static_cast<std::size_t>(120 - stop)) << second.output();
  // The layout tolerance: the reduction order changes with the layout (measured below 1e-6 relative; tests/engine
  // resume_test). The same step's loss must agree to it, while neighbouring steps' batches differ by far more: a
  // shifted data position cannot pass.
  constexpr double kLayoutTolerance = 1e-5;
  double largest = 0;                        // measured difference, printed for the record
  std::map<long, double> shifted_deviation;  // data shifted by -1 or +1 step: the largest relative difference it makes
  for (const auto& [step, loss] : resumed) {
    const double want = ref.losses.at(step);
    EXPECT_NEAR(loss, want, kLayoutTolerance * std::abs(want)) << "step " << step;
    largest = std::max(largest, std::abs(loss - want) / std::abs(want));
    for (long shift : {-1L, 1L})
      if (ref.losses.count(step + shift))
        shifted_deviation[shift] =
            std::max(shifted_deviation[shift], std::abs(ref.losses.at(step + shift) - loss) / std::abs(want));
  }
  std::printf(
      "resumed in another layout: largest relative loss difference %.3g; a shift by one step would make "
      "%.3g\n",
      largest, std::min(shifted_deviation[-1], shifted_deviation[1]));
  for (const auto& [shift, deviation] : shifted_deviation)
    EXPECT_GT(deviation, 100 * kLayoutTolerance)
        << "a data position shifted by " << shift << " step would pass this test: the batches are too alike";
}

// The automatic checkpoint interval (--checkpoint-every auto) under tenax-launch: without a failure it assumes
// TENAX_MTBF (24 h) and saves rarely; once a rank has been killed, the launcher hands the run's own mean time between
// failures (seconds here) to the next attempt, which picks a much shorter interval, and says why.
int automatic_interval_steps(const std::string& output, const std::string& source,
                             const std::string& what = "  checkpoint interval") {
  const std::regex note(what + " \\(automatic, Young/Daly\\): (\\d+) steps = [^\\n]* from " + source);
  std::smatch m;
  return std::regex_search(output, m, note) ? std::stoi(m[1]) : -1;
}

TEST(GptAutomaticCheckpointInterval, AFailureShortensIt) {
  ScratchDir data_dir("gpt-data-auto");
  const std::string data = write_dataset(data_dir.path());
  std::vector<std::string> args = gpt_args(data, {});
  const auto every = std::find(args.begin(), args.end(), "--checkpoint-every");
  ASSERT_NE(every, args.end());
  *(every + 1) = "auto";

  ScratchDir quiet_dir("gpt-auto-quiet");
  Launch quiet(quick_restart_launcher_args(quiet_dir, 2), args, quiet_dir / "out.txt");
  ASSERT_EQ(quiet.wait(seconds(120)), 0) << quiet.output();
  const int quiet_steps = automatic_interval_steps(quiet.output(), "TENAX_MTBF");
  EXPECT_EQ(quiet_steps, 120) << "24 h between failures: no save before the end\n" << quiet.output();

  ScratchDir dir("gpt-auto-failure");
  Launch launch(quick_restart_launcher_args(dir, 2), args, dir / "out.txt");
  auto beat = wait_for_step(dir / "run", 1, 1, 20, seconds(60));
  ASSERT_TRUE(beat.has_value()) << launch.output();
  ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGKILL), 0);
  ASSERT_EQ(launch.wait(seconds(120)), 0) << launch.output();
  const int after_failure = automatic_interval_steps(launch.output(), "this run's failures \\(TENAX_RUN_MTBF\\)");
  EXPECT_GE(after_failure, 1) << launch.output();
  EXPECT_LT(after_failure, quiet_steps / 2) << launch.output();
  std::printf("automatic interval: %d steps without a failure, %d after one\n", quiet_steps, after_failure);
  std::smatch line;
  const std::string output = launch.output();
  if (std::regex_search(output, line, std::regex("checkpoint interval \\(automatic[^\\n]*")))
    std::printf("%s\n", line.str().c_str());
  EXPECT_EQ(final_checksum(launch.output()), final_checksum(quiet.output())) << launch.output();
}

// The last automatic choice of a tier in `output`: its steps, MTBF and the MTBF's source (steps -1: none).
struct IntervalChoice {
  int steps = -1;
  double mtbf_s = 0;
  std::string source;
};
IntervalChoice last_interval_choice(const std::string& output, const std::string& what) {
  const std::regex note(what +
                        " \\(automatic, Young/Daly\\): (\\d+) steps = [^\\n]* an MTBF of ([0-9.]+) s from ([^\\n]*)");
  IntervalChoice last;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), note); it != std::sregex_iterator(); ++it)
    last = {std::stoi((*it)[1]), std::stod((*it)[2]), (*it)[3]};
  return last;
}

// The node-local tier's automatic interval: Young/Daly from a node-local save's measured cost and the MTBF (30 s
// configured); after a failure the run's own MTBF (seconds here) shortens it, the restart reads a node-local copy, and
// the result is the uninterrupted run's. After three failures, the shared tier assumes only the failures the
// node-local tier could not cover: the launcher has seen two restarts read node-local copies (the third restart is
// the attempt that chooses), so none needed the shared tier, and at least one is counted: the run's wall time over
// one failure, three times the MTBF over all three that the node-local tier assumes.
TEST(GptAutomaticCheckpointInterval, TheNodeLocalTierGetsItsOwn) {
  ScratchDir data_dir("gpt-data-auto-local");
  const std::string data = write_dataset(data_dir.path());
  std::vector<std::string> args = gpt_args(data, {"--checkpoint-local-every", "auto"});
  *(std::find(args.begin(), args.end(), "--checkpoint-every") + 1) = "auto";
  ScratchDir ref_dir("gpt-auto-local-reference"), ref_local("gpt-auto-local-reference-tier0");
  ::setenv("TENAX_MTBF", "30s", 1);
  ::setenv("TENAX_CKPT_LOCAL_DIR", ref_local.path().c_str(), 1);
  Launch quiet(quick_restart_launcher_args(ref_dir, 2), args, ref_dir / "out.txt");
  ASSERT_EQ(quiet.wait(seconds(120)), 0) << quiet.output();
  const std::string reference = final_checksum(quiet.output());
  ASSERT_FALSE(reference.empty()) << quiet.output();

  ScratchDir dir("gpt-auto-local"), local("gpt-auto-local-tier0");
  ::setenv("TENAX_CKPT_LOCAL_DIR", local.path().c_str(), 1);
  Launch launch(quick_restart_launcher_args(dir, 2), args, dir / "out.txt");
  ::unsetenv("TENAX_CKPT_LOCAL_DIR");
  ::unsetenv("TENAX_MTBF");
  for (const auto& [attempt, at_step] : {std::pair{1, 30LL}, std::pair{2, 40LL}, std::pair{3, 50LL}}) {
    auto beat = wait_for_step(dir / "run", 1, attempt, at_step, seconds(60));
    ASSERT_TRUE(beat.has_value()) << "attempt " << attempt << "\n" << launch.output();
    ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGKILL), 0);
  }
  ASSERT_EQ(launch.wait(seconds(120)), 0) << launch.output();
  const std::string output = launch.output();

  // The first choice after the first failure, against the last one of the run without failures.
  const int before = automatic_interval_steps(quiet.output(), "TENAX_MTBF", "node-local checkpoint interval");
  const int after =
      automatic_interval_steps(output, "this run's failures \\(TENAX_RUN_MTBF\\)", "node-local checkpoint interval");
  ASSERT_GE(before, 1) << quiet.output();
  ASSERT_GE(after, 1) << output;
  EXPECT_LT(after, before) << output;
  std::vector<std::string> sources;
  const std::regex resumed("resumed from (\\S+) at step (\\d+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), resumed); it != std::sregex_iterator(); ++it)
    sources.push_back((*it)[1]);
  ASSERT_EQ(sources.size(), 3u) << output;
  for (const std::string& source : sources)
    EXPECT_EQ(source.rfind(local.path(), 0), 0u) << "each restart should read a node-local copy\n" << output;
  EXPECT_EQ(final_checksum(output), reference) << output;

  // The fourth attempt's choices, both from the same ledger.
  const IntervalChoice local_tier = last_interval_choice(output, "node-local checkpoint interval");
  const IntervalChoice shared_tier = last_interval_choice(output, "  checkpoint interval");
  EXPECT_EQ(local_tier.source, "this run's failures (TENAX_RUN_MTBF)") << output;
  EXPECT_EQ(shared_tier.source, "this run's failures beyond the node-local tier (TENAX_RUN_SHARED_MTBF)") << output;
  // Both in whole milliseconds (the launcher's): W / 1 and 3 (W / 3) of the same W agree to within 0.001 + 3 x 0.001.
  // Counting a node-local restart as needing the shared tier would make the shared figure W / 2, half of it.
  EXPECT_NEAR(shared_tier.mtbf_s, 3 * local_tier.mtbf_s, 0.005) << output;
  std::printf(
      "node-local interval %d steps without a failure, %d after one; after three: node-local %d steps (MTBF %.3f s), "
      "shared %d steps (MTBF %.3f s)\n",
      before, after, local_tier.steps, local_tier.mtbf_s, shared_tier.steps, shared_tier.mtbf_s);
}

// The shared tier assumes fewer failures only when the node-local tier saves at least as often as the shared tier
// would for every failure: a node-local copy every 2 steps does; one every 1000 steps (never, in 120 steps) does not,
// and a failure it "covers" would lose as much work as one it does not.
TEST(GptAutomaticCheckpointInterval, TheSharedTierCountsOnTheNodeLocalTierOnlyWhenItSavesOftenEnough) {
  ScratchDir data_dir("gpt-data-auto-fixed-local");
  const std::string data = write_dataset(data_dir.path());
  for (const char* local_every : {"2", "1000"}) {
    SCOPED_TRACE(std::string("--checkpoint-local-every ") + local_every);
    std::vector<std::string> args = gpt_args(data, {"--checkpoint-local-every", local_every});
    *(std::find(args.begin(), args.end(), "--checkpoint-every") + 1) = "auto";
    ScratchDir dir(std::string("gpt-auto-fixed-local-") + local_every), local("gpt-auto-fixed-local-tier0");
    ::setenv("TENAX_MTBF", "30s", 1);
    ::setenv("TENAX_CKPT_LOCAL_DIR", local.path().c_str(), 1);
    Launch launch(quick_restart_launcher_args(dir, 2), args, dir / "out.txt");
    ::unsetenv("TENAX_CKPT_LOCAL_DIR");
    ::unsetenv("TENAX_MTBF");
    auto beat = wait_for_step(dir / "run", 1, 1, 30, seconds(60));
    ASSERT_TRUE(beat.has_value()) << launch.output();
    ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGKILL), 0);
    ASSERT_EQ(launch.wait(seconds(120)), 0) << launch.output();
    const IntervalChoice shared_tier = last_interval_choice(launch.output(), "  checkpoint interval");
    EXPECT_EQ(shared_tier.source, std::string(local_every) == "2"
                                      ? "this run's failures beyond the node-local tier (TENAX_RUN_SHARED_MTBF)"
                                      : "this run's failures (TENAX_RUN_MTBF)")
        << launch.output();
  }
}

// kill -9 of a rank with a node-local tier: the restart reads every rank's own copy of a step that only the node-local
// tier holds (shared saves every 20 steps, node-local every 5), and ends with the uninterrupted run's parameters.
TEST(GptNodeLocalTier, KillNineRestartsFromTheNodeLocalCopy) {
  ScratchDir data_dir("gpt-data-tier0");
  const std::string data = write_dataset(data_dir.path());
  std::vector<std::string> args = gpt_args(data, {"--tp", "2", "--dp", "2", "--checkpoint-local-every", "5"});
  *(std::find(args.begin(), args.end(), "--checkpoint-every") + 1) = "20";
  // The uninterrupted run keeps node-local copies too (in a directory of its own).
  ScratchDir ref_dir("gpt-tier0-reference"), ref_local("gpt-tier0-reference-local");
  ::setenv("TENAX_CKPT_LOCAL_DIR", ref_local.path().c_str(), 1);
  const Reference ref = uninterrupted(ref_dir, 4, args);
  ::unsetenv("TENAX_CKPT_LOCAL_DIR");
  ASSERT_FALSE(ref.checksum.empty());
  {
    // Its checkpoints, counted per tier by the ranks and added up by tenax-launch: one to the shared directory every
    // 20 of the 120 steps, a node-local copy every 5 (a shared save writes one too).
    std::ifstream file(std::filesystem::path(ref_dir.path()) / "reference.txt");
    const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    std::smatch counts;
    ASSERT_TRUE(std::regex_search(text, counts, std::regex("checkpoints committed: (\\d+) shared, (\\d+) node-local")))
        << text;
    EXPECT_EQ(std::stol(counts[1]), 6) << text;
    EXPECT_EQ(std::stol(counts[2]), 24) << text;
  }

  ScratchDir dir("gpt-tier0-kill9"), local("gpt-tier0-local");
  // Another run's copies on the same node: never read, and left in place when this run ends.
  const std::filesystem::path foreign = std::filesystem::path(local.path()) / "tenax-00000000000000ab";
  std::filesystem::create_directories(foreign / "rank_0");
  std::ofstream(foreign / "job-id") << "local-00000000000000ab\n";
  ::setenv("TENAX_CKPT_LOCAL_DIR", local.path().c_str(), 1);
  Launch launch(quick_restart_launcher_args(dir, 4), args, dir / "out.txt");
  ::unsetenv("TENAX_CKPT_LOCAL_DIR");
  // By step 33 the node-local copy of step 25 is committed on every rank (the save at step 30 waited for it); the
  // newest shared checkpoint is step 20.
  auto beat = wait_for_step(dir / "run", 3, 1, 33, seconds(60));
  ASSERT_TRUE(beat.has_value()) << launch.output();
  // The run's folder names its job (tenax-launch's own id outside Slurm), which removes it at the end.
  std::vector<std::string> job_ids;
  for (const auto& entry : std::filesystem::directory_iterator(local.path())) {
    if (entry.path() == foreign) continue;
    std::ifstream file(entry.path() / "job-id");
    std::string id;
    std::getline(file, id);
    job_ids.push_back(id);
  }
  ASSERT_EQ(job_ids.size(), 1u);
  EXPECT_TRUE(std::regex_match(job_ids[0], std::regex("local-[0-9a-f]{16}"))) << job_ids[0];
  ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGKILL), 0);
  ASSERT_EQ(launch.wait(seconds(120)), 0) << launch.output();
  const std::string output = launch.output();
  std::smatch m;
  EXPECT_NE(output.find("removed this run's node-local checkpoint copies from " + local.path()), std::string::npos)
      << output;
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(local.path()))
    left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"tenax-00000000000000ab"}) << "only the other run's copies stay";
  ASSERT_TRUE(std::regex_search(output, m, std::regex("resumed from (\\S+) at step (\\d+)"))) << output;
  EXPECT_EQ(m[1].str().rfind(local.path(), 0), 0u) << "the restart should read the node-local copy\n" << output;
  EXPECT_GE(std::stol(m[2]), 25) << output;
  EXPECT_EQ(final_checksum(output), ref.checksum) << output;
  std::printf("kill -9 at step %lld: resumed at step %s from %s\n", beat->step, m[2].str().c_str(), m[1].str().c_str());
}

}  // namespace
}  // namespace tenax::test
