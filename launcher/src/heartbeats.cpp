#include "heartbeats.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "flat_json.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {

Heartbeat parse_heartbeat(const std::string& text, const std::string& origin) {
  auto json = FlatJson::parse(text, origin);
  Heartbeat h;
  h.rank = static_cast<int>(json.integer("rank", -1));
  h.node = json.string("node");
  h.pid = static_cast<long>(json.integer("pid"));
  h.attempt = static_cast<int>(json.integer("attempt"));
  h.beat = static_cast<std::uint64_t>(json.integer("beat"));
  h.step = json.integer("step", -1);
  h.seq = static_cast<std::uint64_t>(json.integer("seq"));
  h.resumed_step = json.integer("resumed_step", -1);
  h.load_s = json.number("load_s");
  h.productive_s = json.number("productive_s");
  h.steps_done = json.integer("steps_done");
  h.checkpoint_step = json.integer("checkpoint_step", -1);
  h.checkpoint_stall_s = json.number("checkpoint_stall_s");
  h.preempt_signal = static_cast<int>(json.integer("preempt_signal"));
  h.exit_code = static_cast<int>(json.integer("exit", -1));
  if (h.rank < 0) throw IoError("'" + origin + "' has no rank: it is not a tenax heartbeat");
  return h;
}

std::vector<Heartbeat> read_heartbeats(const std::string& run_dir, int attempt) {
  namespace fs = std::filesystem;
  static const std::regex name_pattern(R"(rank-\d+\.json)");
  std::vector<Heartbeat> out;
  std::error_code error;
  fs::directory_iterator it(run_dir + "/heartbeat/attempt-" + std::to_string(attempt), error);
  if (error) return out;  // no rank has started yet
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, name_pattern)) continue;  // temporaries being written
    std::ifstream in(entry.path());
    if (!in) continue;  // replaced between listing and opening: next poll reads the new one
    std::stringstream text;
    text << in.rdbuf();
    Heartbeat h = parse_heartbeat(text.str(), entry.path().string());
    if (h.attempt == attempt) out.push_back(std::move(h));
  }
  return out;
}

void prepare_heartbeats(const std::string& run_dir, int attempt) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(run_dir) / "heartbeat";
  std::error_code error;
  fs::create_directories(root, error);
  if (error) throw IoError("creating '" + root.string() + "' failed: " + error.message());
  for (const auto& entry : fs::directory_iterator(root)) {
    fs::remove_all(entry.path(), error);
    if (error) throw IoError("removing stale heartbeats '" + entry.path().string() + "' failed: " + error.message());
  }
  const fs::path dir = root / ("attempt-" + std::to_string(attempt));
  fs::create_directories(dir, error);
  if (error) throw IoError("creating '" + dir.string() + "' failed: " + error.message());
}

}  // namespace tenax::launch
