#include "checkpoint_scan.hpp"

#include <charconv>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "tenax/error.hpp"

namespace tenax::launch {

std::int64_t checkpoint_step_of(std::string_view name) {
  constexpr std::string_view prefix = "step_";
  if (name.substr(0, prefix.size()) != prefix) return -1;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return -1;
  std::int64_t step = -1;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size()) return -1;  // too large to be a step
  return step;
}

std::int64_t newest_committed_checkpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error == std::errc::no_such_file_or_directory) return -1;
  if (error) throw IoError("listing the checkpoint directory '" + dir + "' failed: " + error.message());
  std::int64_t newest = -1;
  // Retention may remove an old checkpoint while this lists: an entry gone meanwhile is simply not counted.
  for (; it != fs::directory_iterator(); it.increment(error)) {
    if (error) throw IoError("listing the checkpoint directory '" + dir + "' failed: " + error.message());
    const std::int64_t step = checkpoint_step_of(it->path().filename().string());
    if (step <= newest) continue;
    std::error_code ignored;
    if (fs::is_regular_file(it->path() / "manifest.json", ignored)) newest = step;
  }
  if (error) throw IoError("listing the checkpoint directory '" + dir + "' failed: " + error.message());
  return newest;
}

}  // namespace tenax::launch
