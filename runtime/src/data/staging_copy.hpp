// Internal: what one node's copier does for stage_dataset (tenax/data_staging.hpp), without any communication.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tenax/data_staging.hpp"
#include "tenax/error.hpp"

namespace tenax::data {

// The shared dataset itself is unreadable or does not match its index: not something staging can fall back from.
class SourceError : public IoError {
 public:
  using IoError::IoError;
};

struct LocalStageResult {
  StagingOutcome outcome = StagingOutcome::FellBack;
  std::string dir;     // the staged copy, or the shared dataset_dir when falling back
  std::string reason;  // as in StagingResult
  std::uint64_t bytes_copied = 0;
  std::uint64_t bytes_verified = 0;
  std::uint64_t files = 0;
  double seconds = 0;
};

// A test seam: called with the path of each staged file after it was written and fsynced, before it is read back.
using AfterCopyHook = std::function<void(const std::string& staged_file)>;

// Stages `dataset_dir` under `stage_root` as described in tenax/data_staging.hpp. Never throws for local failures
// (they become FellBack with a reason); throws SourceError when the shared copy is unreadable or damaged.
LocalStageResult stage_on_this_node(const std::string& dataset_dir, const std::string& stage_root,
                                    const std::string& node_name, const AfterCopyHook& after_copy = {});

// The name of the staged copy of a dataset whose index checksum is `index_crc32c`: "tenax-data-%08x".
std::string staged_dir_name(std::uint32_t index_crc32c);

// Empty when `dir` holds a valid copy of the dataset whose index text is `index_text`, else the first problem.
// `bytes_read` (when not null) gets the bytes read while checking.
std::string staged_copy_problem(const std::string& dir, const std::string& index_text,
                                std::uint64_t* bytes_read = nullptr);

}  // namespace tenax::data
