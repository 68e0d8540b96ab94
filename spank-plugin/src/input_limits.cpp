#include "input_limits.hpp"

namespace tenax::spank {

std::string clipped(std::string_view value) {
  constexpr std::size_t kShown = 200;
  if (value.size() <= kShown) return std::string(value);
  return std::string(value.substr(0, kShown)) + "... (" + std::to_string(value.size()) + " characters)";
}

std::string shown_value(std::string_view source, std::string_view value) {
  return std::string(source) + "=" + clipped(value);
}

}  // namespace tenax::spank
