#include "commands.hpp"

#include "data/dataset_index.hpp"
#include "data/shard_format.hpp"

namespace tenax::datatool {

std::string version_text() {
  return std::string("tenax-data ") + TENAX_DATA_VERSION + " (shard format " + std::to_string(data::kShardVersion) +
         ", index version " + std::to_string(data::kIndexVersion) + ", SentencePiece " + TENAX_SENTENCEPIECE_VERSION +
         ")";
}

}  // namespace tenax::datatool
