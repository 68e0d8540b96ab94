// The staging copier alone (no communicator): a copy that does not read back as written is abandoned and the job
// falls back to the shared dataset, with the file named; a damaged shared dataset is a SourceError, not a fall-back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "data/staging_copy.hpp"
#include "data_test_util.hpp"

namespace tenax::test {
namespace {

using ::testing::HasSubstr;

TEST(StagingCopy, CopyThatDoesNotReadBackFallsBack) {
  ScratchDir dir("readback");
  write_synthetic(dir / "ds", 10000, 1000, 65536, 3000);
  const std::string stage = dir / "stage";
  // Damage each shard on the "local disk" after it was written and fsynced, as a failing disk would.
  const data::LocalStageResult r =
      data::stage_on_this_node(dir / "ds", stage, "n0", [](const std::string& staged_file) {
        if (staged_file.ends_with("train-00002.tok")) flip_byte(staged_file, 64 + 17);
      });
  EXPECT_EQ(r.outcome, StagingOutcome::FellBack);
  EXPECT_EQ(r.dir, dir / "ds");
  EXPECT_THAT(r.reason, AllOf(HasSubstr("train-00002.tok"), HasSubstr("does not read back"),
                              HasSubstr("payload checksum mismatch")));
  // The abandoned copy is gone; no staged copy is left under the key.
  EXPECT_TRUE(std::filesystem::is_empty(stage));
  // Without damage, the next attempt stages.
  const data::LocalStageResult ok = data::stage_on_this_node(dir / "ds", stage, "n0");
  EXPECT_EQ(ok.outcome, StagingOutcome::Copied) << ok.reason;
  EXPECT_EQ(ok.files, 7u);  // index, tokenizer, 4 train shards, 1 validation shard
}

TEST(StagingCopy, DamagedSharedDatasetIsNotAFallBack) {
  ScratchDir dir("source");
  write_synthetic(dir / "ds", 10000, 1000, 65536, 3000);
  flip_byte(dir / "ds/train-00001.tok", 64 + 5);
  try {
    data::stage_on_this_node(dir / "ds", dir / "stage", "n0");
    FAIL() << "no error";
  } catch (const data::SourceError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(dir / "ds/train-00001.tok"), HasSubstr("payload checksum")));
  }
  // The partial copy was removed.
  EXPECT_TRUE(std::filesystem::is_empty(dir / "stage"));
}

}  // namespace
}  // namespace tenax::test
