#include "heartbeats.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "core/json.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

// The heartbeat is written by the rank's program. Every integer is checked against the range tenax::worker::Worker can
// write (steps and times are the program's own numbers, any value goes), so that a damaged or foreign file is reported
// instead of silently narrowed: read as another rank, a negative beat count as a huge one.
class Fields {
 public:
  Fields(const json::Value& record, const std::string& origin) : record_(record), origin_(origin) {}

  std::int64_t integer(std::string_view key, std::int64_t fallback, std::int64_t min, std::int64_t max) const {
    const std::int64_t value = record_.i64_or(key, fallback);
    if (value < min || value > max) {
      refuse(key, std::to_string(value), "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    return value;
  }

 private:
  [[noreturn]] void refuse(std::string_view key, const std::string& value, const std::string& expected) const {
    throw IoError("'" + origin_ + "': \"" + std::string(key) + "\" is " + value + ", expected " + expected +
                  " (the file is not a heartbeat this tenax wrote, or it was damaged)");
  }

  const json::Value& record_;
  const std::string& origin_;
};

// "rank-<digits>.json": a heartbeat; anything else in the folder (the temporaries being written) is not read.
bool is_heartbeat_name(std::string_view name) {
  constexpr std::string_view prefix = "rank-", suffix = ".json";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) {
    return false;
  }
  const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string_view::npos;
}

// The file's text, or nullopt when it vanished (replaced between listing and opening: the next poll reads the new
// one). Opened without blocking (a FIFO would wait for a writer forever) and read only when it is a regular file no
// larger than kMaxHeartbeatBytes. Throws IoError otherwise.
std::optional<std::string> read_heartbeat_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw IoError("cannot open the heartbeat '" + path + "': " + std::strerror(errno));
  }
  struct stat info {};
  std::string problem;
  if (fstat(fd, &info) != 0) {
    problem = std::string("fstat failed: ") + std::strerror(errno);
  } else if (!S_ISREG(info.st_mode)) {
    problem = "it is not a regular file";
  } else if (static_cast<std::uint64_t>(info.st_size) > kMaxHeartbeatBytes) {
    problem = "it is " + std::to_string(info.st_size) + " bytes, more than any heartbeat (" +
              std::to_string(kMaxHeartbeatBytes) + " bytes at most)";
  }
  std::string text;
  if (problem.empty()) {
    // One byte more than the limit: a file that grew since fstat is caught too.
    text.resize(kMaxHeartbeatBytes + 1);
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        problem = std::string("reading failed: ") + std::strerror(errno);
        break;
      }
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    text.resize(done);
    if (problem.empty() && done > kMaxHeartbeatBytes) {
      problem = "it grew past " + std::to_string(kMaxHeartbeatBytes) + " bytes, more than any heartbeat";
    }
  }
  close(fd);
  if (!problem.empty()) {
    throw IoError("cannot read the heartbeat '" + path + "': " + problem +
                  " (only tenax's workers may write rank-<r>.json files there)");
  }
  return text;
}

}  // namespace

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
  constexpr std::int64_t kInt = INT_MAX;
  constexpr std::int64_t kI64 = INT64_MAX;
  Heartbeat h;
  try {
    const Fields f(record, origin);
    if (!record.has("rank") || record.at("rank").is_null()) {
      throw IoError("'" + origin + "' has no rank: it is not a tenax heartbeat");
    }
    h.rank = static_cast<int>(f.integer("rank", -1, 0, kInt));
    h.node = record.string_or("node", "");
    h.pid = static_cast<long>(f.integer("pid", 0, 0, kInt));
    h.attempt = static_cast<int>(f.integer("attempt", 0, 0, kInt));
    h.beat = static_cast<std::uint64_t>(f.integer("beat", 0, 0, kI64));
    h.step = record.i64_or("step", -1);
    h.seq = static_cast<std::uint64_t>(f.integer("seq", 0, 0, kI64));
    h.resumed_step = record.i64_or("resumed_step", -1);
    h.resumed_tier = record.string_or("resumed_tier", "");
    h.load_s = record.number_or("load_s", 0);
    h.productive_s = record.number_or("productive_s", 0);
    h.steps_done = f.integer("steps_done", 0, 0, kI64);
    h.checkpoint_step = record.i64_or("checkpoint_step", -1);
    h.checkpoint_stall_s = record.number_or("checkpoint_stall_s", 0);
    h.final_checkpoint_s = record.number_or("final_checkpoint_s", 0);
    h.shared_saves = f.integer("shared_saves", 0, 0, kI64);
    h.local_saves = f.integer("local_saves", 0, 0, kI64);
    h.preempt_signal = static_cast<int>(f.integer("preempt_signal", 0, 0, kInt));
    h.exit_code = static_cast<int>(f.integer("exit", -1, INT_MIN, kInt));
  } catch (const json::Error& error) {
    throw IoError("'" + origin + "': " + error.what() + " (the file is not a heartbeat this tenax understands)");
  }
  return h;
}

std::vector<Heartbeat> read_heartbeats(const std::string& run_dir, int attempt) {
  namespace fs = std::filesystem;
  std::vector<Heartbeat> out;
  const std::string dir = run_dir + "/heartbeat/attempt-" + std::to_string(attempt);
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error) return out;  // no rank has started yet
  for (; it != fs::directory_iterator(); it.increment(error)) {
    if (error) break;
    const std::string name = it->path().filename().string();
    if (!is_heartbeat_name(name)) continue;
    const std::string path = it->path().string();
    const auto text = read_heartbeat_file(path);
    if (!text) continue;
    Heartbeat h = parse_heartbeat(*text, path);
    if (h.attempt == attempt) out.push_back(std::move(h));
  }
  if (error) throw IoError("listing the heartbeats in '" + dir + "' failed: " + error.message());
  return out;
}

int highest_heartbeat_attempt(const std::string& run_dir) {
  std::error_code error;
  int highest = 0;
  for (auto it = std::filesystem::directory_iterator(run_dir + "/heartbeat", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    const std::string_view digits = std::string_view(name).substr(std::min(name.size(), std::size_t{8}));
    if (!name.starts_with("attempt-") || digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos)
      continue;
    highest = std::max(highest, std::stoi(std::string(digits)));
  }
  return highest;
}

std::vector<std::string> prepare_heartbeats(const std::string& run_dir, int attempt) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(run_dir) / "heartbeat";
  std::error_code error;
  fs::create_directories(root, error);
  if (error) throw IoError("creating '" + root.string() + "' failed: " + error.message());
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(root, error))
    stale.push_back(entry.path());
  if (error) throw IoError("listing '" + root.string() + "' failed: " + error.message());
  std::vector<std::string> warnings;
  int moved = 0;
  for (const fs::path& path : stale) {
    // Ranks of an earlier attempt may still be writing there: those of a node cut off from the network live on and
    // beat into the shared run directory. Moving the folder aside first takes it away from them (their next write
    // finds no folder), so what is removed afterwards no longer changes under the removal.
    fs::path target = path;
    if (path.filename().string().rfind(".stale-", 0) != 0) {
      target = root /
               (".stale-" + path.filename().string() + "-" + std::to_string(getpid()) + "-" + std::to_string(++moved));
      fs::rename(path, target, error);
      if (error) target = path;
    }
    // A file a writer was creating as the folder moved can still appear once: a second pass removes it.
    for (int pass = 0; pass < 3; ++pass) {
      fs::remove_all(target, error);
      if (!error) break;
    }
    if (error) warnings.push_back("stale heartbeats '" + target.string() + "' left behind: " + error.message());
  }
  const fs::path dir = root / ("attempt-" + std::to_string(attempt));
  fs::create_directories(dir, error);
  if (error) throw IoError("creating '" + dir.string() + "' failed: " + error.message());
  return warnings;
}

}  // namespace tenax::launch
