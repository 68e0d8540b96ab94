#include "launch_harness.hpp"

#include "core/json.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

namespace tenax::test {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ScratchDir::ScratchDir(const std::string& name) {
  std::string pattern = std::string(TENAX_LAUNCH_TEST_TMP) + "/" + name + "-XXXXXX";
  std::filesystem::create_directories(TENAX_LAUNCH_TEST_TMP);
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
  path_ = buffer.data();
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  if (std::getenv("LAUNCH_TEST_KEEP_DIRS") == nullptr) std::filesystem::remove_all(path_, ignored);
}

Launch::Launch(const std::vector<std::string>& launcher_args, const std::vector<std::string>& worker_args,
               const std::string& output_path)
    : output_path_(output_path) {
  std::vector<std::string> argv = {TENAX_LAUNCH_BIN};
  argv.insert(argv.end(), launcher_args.begin(), launcher_args.end());
  argv.push_back("--");
  argv.push_back(TENAX_TEST_WORKER_BIN);
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  int fd = open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + output_path);
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fd);
}

Launch::~Launch() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGTERM);  // the launcher tears its attempt down
    if (wait(std::chrono::seconds(20)) == -1) kill(pid_, SIGKILL);
  }
}

int Launch::wait(std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  return -1;
}

std::string Launch::output() const {
  return read_text(output_path_);
}

std::optional<RankBeat> read_beat(const std::string& run_dir, int attempt, int rank) {
  std::string text =
      read_text(run_dir + "/heartbeat/attempt-" + std::to_string(attempt) + "/rank-" + std::to_string(rank) + ".json");
  if (text.empty()) return std::nullopt;
  RankBeat beat;
  beat.pid = static_cast<long>(json_number(text, "pid"));
  beat.step = static_cast<long long>(json_number(text, "step"));
  beat.attempt = static_cast<int>(json_number(text, "attempt"));
  return beat;
}

std::optional<RankBeat> wait_for_step(const std::string& run_dir, int rank, int attempt, long long step,
                                      std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto beat = read_beat(run_dir, attempt, rank);
    if (beat && beat->attempt == attempt && beat->step >= step) return beat;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

std::string final_checksum(const std::string& output) {
  static const std::regex pattern(R"(final parameters checksum: ([0-9a-f]{16}))");
  std::smatch m;
  return std::regex_search(output, m, pattern) ? m[1].str() : "";
}

std::vector<std::string> quick_restart_launcher_args(const ScratchDir& dir, int ranks) {
  return {"-n",
          std::to_string(ranks),
          "--run-dir",
          dir / "run",
          "--checkpoint-dir",
          dir / "ckpt",
          "--backoff",
          "100ms",
          "--heartbeat-interval",
          "20ms",
          "--kill-grace",
          "500ms"};
}

std::string reference_checksum(int ranks, const std::vector<std::string>& worker_args) {
  static std::map<std::string, std::string> cache;
  std::string key = std::to_string(ranks);
  for (const auto& a : worker_args)
    key += " " + a;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  ScratchDir dir("reference");
  std::vector<std::string> args = worker_args;
  Launch launch({"-n", std::to_string(ranks), "--run-dir", dir / "run", "--checkpoint-dir", dir / "ckpt"}, args,
                dir / "out.txt");
  int code = launch.wait(std::chrono::seconds(60));
  std::string sum = code == 0 ? final_checksum(launch.output()) : "";
  if (sum.empty()) throw std::runtime_error("the uninterrupted reference run failed:\n" + launch.output());
  cache[key] = sum;
  return sum;
}

std::vector<std::string> ledger_lines(const std::string& run_dir, const std::string& event) {
  std::vector<std::string> out;
  std::istringstream lines(read_text(run_dir + "/ledger.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    if (json_string(line, "event") == event) out.push_back(line);
  }
  return out;
}

// Read with tenax's strict JSON parser, the launcher's own: a malformed heartbeat or ledger line fails the test that
// reads it (json::ParseError names the byte) instead of reading as a missing member.
double json_number(const std::string& line, const std::string& key) {
  return json::Value::parse(line).number_or(key, std::nan(""));
}

std::string json_string(const std::string& line, const std::string& key) {
  return json::Value::parse(line).string_or(key, "");
}

}  // namespace tenax::test
