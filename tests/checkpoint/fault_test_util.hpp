// What the checkpoint fault tests share: their checkpointer options and a substring check for messages.
#pragma once

#include <string>

#include "tenax/checkpoint.hpp"

namespace tenax::test {

inline CheckpointOptions options_for(const std::string& dir, const ParallelLayout& layout, int keep = 5) {
  CheckpointOptions o;
  o.dir = dir;
  o.keep = keep;
  o.layout = layout;
  return o;
}

inline bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

}  // namespace tenax::test
