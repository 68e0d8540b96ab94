#include "checkpoint_scan.hpp"

#include <charconv>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "core/file_system.hpp"
#include "core/json.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {

std::int64_t checkpoint_step_of(std::string_view name) {
  constexpr std::string_view prefix = "step_";
  if (name.substr(0, prefix.size()) != prefix) return -1;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return -1;
  if (digits.size() > 1 && digits.front() == '0') return -1;  // never written so: "step_0030" is no name of 30
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
    if (!fs::is_regular_file(it->path() / "manifest.json", ignored)) continue;
    // A directory copied or renamed under another step's name is no checkpoint of that step (the runtime leaves it
    // out too): counted, it would pass for progress no attempt made, or hide the progress they do make.
    try {
      const json::Value root = json::Value::parse(tenax::fs::read_file((it->path() / "manifest.json").string()));
      if (const json::Value* recorded = root.find("step");
          recorded != nullptr && recorded->u64() != static_cast<std::uint64_t>(step))
        continue;
    } catch (const std::exception&) {
      // unreadable here: counted, as the runtime counts it (loading it fails and falls back)
    }
    newest = step;
  }
  if (error) throw IoError("listing the checkpoint directory '" + dir + "' failed: " + error.message());
  return newest;
}

}  // namespace tenax::launch
