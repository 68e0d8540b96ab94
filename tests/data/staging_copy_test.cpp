// The staging copier alone (no communicator): a copy that does not read back as written is abandoned and the job
// falls back to the shared dataset, with the file named; a damaged shared dataset is a SourceError, not a fall-back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

// The dataset given is already where its staged copy belongs (--data names a path a staging log printed, directly or
// through a link): it is read in place; damaged, it is a SourceError naming the shard, and nothing is removed.
TEST(StagingCopy, ADatasetAtItsOwnStagingPlaceIsReadInPlaceAndNeverRemoved) {
  ScratchDir dir("inplace");
  const std::string stage = dir / "stage";
  write_synthetic(dir / "ds", 10000, 1000, 65536, 3000);
  const std::string place = stage + "/" + data::staged_dir_name(data::read_index(dir / "ds").index_crc32c);
  std::filesystem::create_directories(stage);
  std::filesystem::rename(dir / "ds", place);
  std::filesystem::create_directory_symlink(place, dir / "link");

  for (const std::string& given : {place, dir / "link"}) {
    const data::LocalStageResult r = data::stage_on_this_node(given, stage, "n0");
    EXPECT_EQ(r.outcome, StagingOutcome::Reused) << r.reason;
    EXPECT_EQ(r.dir, given);
  }
  flip_byte(place + "/train-00001.tok", 64 + 5);
  for (const std::string& given : {place, dir / "link"}) {
    try {
      data::stage_on_this_node(given, stage, "n0");
      FAIL() << "no error";
    } catch (const data::SourceError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("train-00001.tok"), HasSubstr("is itself at its staging place")));
    }
    EXPECT_TRUE(std::filesystem::exists(place + "/index.json")) << "the only copy of the dataset was removed";
  }
}

// A staged copy of another user (a stage directory shared between users) is left alone, even when it does not verify:
// this user falls back to the shared dataset, told to use a stage directory of its own.
TEST(StagingCopy, AnotherUsersStagedCopyIsLeftAlone) {
  ScratchDir dir("otheruser");
  const std::string stage = dir / "stage";
  write_synthetic(dir / "ds", 10000, 1000, 65536, 3000);
  const data::LocalStageResult first = data::stage_on_this_node(dir / "ds", stage, "n0");
  ASSERT_EQ(first.outcome, StagingOutcome::Copied) << first.reason;
  flip_byte(first.dir + "/train-00002.tok", 64 + 9);
  if (::chown(first.dir.c_str(), 65534, 65534) != 0)
    GTEST_SKIP() << "cannot give the copy to another user here (needs root): " << std::strerror(errno);
  const data::LocalStageResult r = data::stage_on_this_node(dir / "ds", stage, "n0");
  EXPECT_EQ(r.outcome, StagingOutcome::FellBack);
  EXPECT_EQ(r.dir, dir / "ds");
  EXPECT_THAT(r.reason, AllOf(HasSubstr("belongs to another user"), HasSubstr("a stage directory of its own")));
  EXPECT_TRUE(std::filesystem::exists(first.dir + "/train-00002.tok")) << "another user's copy was touched";
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(stage))
    ++entries;
  EXPECT_EQ(entries, 1u) << "nothing may be left beside it";
}

// A FIFO where the index belongs is refused, not waited on for a writer that never comes.
TEST(StagingCopy, AFifoInPlaceOfTheIndexIsRefusedNotWaitedOn) {
  ScratchDir dir("fifo");
  write_synthetic(dir / "ds", 10000, 1000, 65536, 3000);
  std::filesystem::remove(dir / "ds/index.json");
  ASSERT_EQ(::mkfifo((dir / "ds/index.json").c_str(), 0644), 0);
  try {
    data::stage_on_this_node(dir / "ds", dir / "stage", "n0");
    FAIL() << "no error";
  } catch (const data::SourceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a regular file"));
  }
}

}  // namespace
}  // namespace tenax::test
