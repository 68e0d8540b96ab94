#include "heartbeats.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/json.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {

Heartbeat parse_heartbeat(const std::string& text, const std::string& origin) {
  json::Value record;
  try {
    record = json::Value::parse(text);
  } catch (const json::ParseError& error) {
    throw IoError("cannot read '" + origin + "': " + error.what() +
                  " (the file is not a record tenax wrote, or it was damaged)");
  }
  if (record.kind() != json::Value::Kind::Object) {
    throw IoError("'" + origin + "' holds JSON but not an object: it is not a tenax heartbeat");
  }
  Heartbeat h;
  try {
    h.rank = static_cast<int>(record.i64_or("rank", -1));
    h.node = record.string_or("node", "");
    h.pid = static_cast<long>(record.i64_or("pid", 0));
    h.attempt = static_cast<int>(record.i64_or("attempt", 0));
    h.beat = static_cast<std::uint64_t>(record.i64_or("beat", 0));
    h.step = record.i64_or("step", -1);
    h.seq = static_cast<std::uint64_t>(record.i64_or("seq", 0));
    h.resumed_step = record.i64_or("resumed_step", -1);
    h.load_s = record.number_or("load_s", 0);
    h.productive_s = record.number_or("productive_s", 0);
    h.steps_done = record.i64_or("steps_done", 0);
    h.checkpoint_step = record.i64_or("checkpoint_step", -1);
    h.checkpoint_stall_s = record.number_or("checkpoint_stall_s", 0);
    h.preempt_signal = static_cast<int>(record.i64_or("preempt_signal", 0));
    h.exit_code = static_cast<int>(record.i64_or("exit", -1));
  } catch (const json::Error& error) {
    throw IoError("'" + origin + "': " + error.what() + " (the file is not a heartbeat this tenax understands)");
  }
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
