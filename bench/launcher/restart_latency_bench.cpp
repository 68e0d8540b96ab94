// tenax-bench-restart: how long tenax-launch takes from a failure to the first completed step after the resume.
//
// Each trial starts tenax-launch over the deterministic worker, waits until rank 1 reaches --fail-at-step, injects
// the failure (crash: SIGKILL of rank 1; hang: SIGSTOP of rank 1), lets the launcher restart the run to completion,
// and reads the phases from the run's ledger:
//   detection   failure injected -> launcher noticed it          (injection time from this process, same clock)
//   teardown    noticed -> every process of the attempt reaped
//   relaunch    new attempt started -> every rank wrote its first heartbeat (process + MPI start-up)
//   load        checkpoint load, as the worker measured it
//   first step  end of load -> first completed step
//   total       failure injected -> first completed step after the resume
// Reference, measured in the same trial: the cold start of the first attempt (launch -> first completed step).
// Targets (issue 5): crash detection < 1 s; hang detection <= hang timeout + 1 s; total < 10 s + load.
// Exits 1 when a target is missed or a run does not reach the uninterrupted result.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double json_number(const std::string& line, const std::string& key) {
  std::smatch m;
  std::regex pattern("\"" + key + "\":(-?[0-9.eE+-]+)");
  return std::regex_search(line, m, pattern) ? std::stod(m[1]) : std::nan("");
}

std::vector<std::string> attempt_lines(const std::string& ledger) {
  std::vector<std::string> out;
  std::istringstream lines(read_text(ledger));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("\"event\":\"attempt\"") != std::string::npos) out.push_back(line);
  }
  return out;
}

struct Trial {
  bool ok = false;
  std::string problem;
  double detection = 0, teardown = 0, relaunch = 0, load = 0, first_step = 0, total = 0, cold_start = 0;
};

struct Config {
  int ranks = 2;
  int repeats = 5;
  long long params = 262144;
  int step_ms = 20;
  int fail_at_step = 25;
  double hang_timeout_s = 2.0;
};

pid_t start_launcher(const std::vector<std::string>& argv, const std::string& output) {
  std::fflush(stdout);  // else the child would print the parent's unflushed table a second time
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    FILE* out = std::freopen(output.c_str(), "w", stdout);
    if (out == nullptr || dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(127);
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid, double limit_s) {
  const double deadline = now_unix() + limit_s;
  while (now_unix() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -2;
}

// Rank `rank`'s heartbeat: pid once it reports attempt 1 at or past `step`; 0 on timeout.
long wait_for_rank(const std::string& run_dir, int rank, long long step, double limit_s) {
  const double deadline = now_unix() + limit_s;
  const std::string path = run_dir + "/heartbeat/attempt-1/rank-" + std::to_string(rank) + ".json";
  while (now_unix() < deadline) {
    std::string text = read_text(path);
    if (!text.empty() && json_number(text, "step") >= static_cast<double>(step)) {
      return static_cast<long>(json_number(text, "pid"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return 0;
}

Trial run_trial(const Config& c, bool hang, const std::string& expected_checksum, std::string* checksum_out) {
  Trial t;
  char pattern[] = "/tmp/tenax-bench-restart-XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    t.problem = "mkdtemp failed";
    return t;
  }
  const std::string dir = pattern;
  const std::string run = dir + "/run";
  std::vector<std::string> argv = {TENAX_LAUNCH_BIN,
                                   "-n",
                                   std::to_string(c.ranks),
                                   "--run-dir",
                                   run,
                                   "--checkpoint-dir",
                                   dir + "/ckpt",
                                   "--backoff",
                                   "0",
                                   "--heartbeat-interval",
                                   "100ms",
                                   "--kill-grace",
                                   "500ms",
                                   "--hang-timeout",
                                   std::to_string(static_cast<int>(c.hang_timeout_s * 1000)) + "ms"};
  const bool inject = checksum_out == nullptr;
  argv.insert(argv.end(),
              {"--", TENAX_BENCH_WORKER_BIN, "--steps", std::to_string(c.fail_at_step + 20), "--checkpoint-every", "10",
               "--step-ms", std::to_string(c.step_ms), "--params", std::to_string(c.params)});
  pid_t launcher = start_launcher(argv, dir + "/out.txt");
  double failed_at = 0;
  if (inject) {
    long victim = wait_for_rank(run, 1, c.fail_at_step, 60);
    if (victim <= 0) {
      t.problem = "rank 1 never reached the failure step";
    } else {
      failed_at = now_unix();
      kill(static_cast<pid_t>(victim), hang ? SIGSTOP : SIGKILL);
    }
  }
  const int code = wait_exit(launcher, 120);
  const std::string output = read_text(dir + "/out.txt");
  std::smatch m;
  static const std::regex checksum(R"(final parameters checksum: ([0-9a-f]{16}))");
  const std::string sum = std::regex_search(output, m, checksum) ? m[1].str() : "";
  auto attempts = attempt_lines(run + "/ledger.jsonl");
  if (t.problem.empty() && code != 0) t.problem = "tenax-launch exited " + std::to_string(code);
  if (t.problem.empty() && sum.empty()) t.problem = "no final checksum";
  if (checksum_out != nullptr) {
    *checksum_out = sum;
  } else if (t.problem.empty() && sum != expected_checksum) {
    t.problem = "final parameters differ from the uninterrupted run";
  }
  if (t.problem.empty() && attempts.size() != (inject ? 2u : 1u)) {
    t.problem = std::to_string(attempts.size()) + " attempts in the ledger";
  }
  if (t.problem.empty()) {
    const std::string& a1 = attempts.front();
    t.cold_start = json_number(a1, "first_step") - json_number(a1, "start");
    if (inject) {
      const std::string& a2 = attempts.back();
      const double noticed = json_number(a1, "failure_noticed");
      t.detection = noticed - failed_at;
      t.teardown = json_number(a1, "end") - noticed;
      t.relaunch =
          json_number(a2, "ready") - json_number(a2, "start") + (json_number(a2, "start") - json_number(a1, "end"));
      t.load = json_number(a2, "load_s");
      t.total = json_number(a2, "first_step") - failed_at;
      t.first_step = t.total - t.detection - t.teardown - t.relaunch - t.load;
    }
    t.ok = !std::isnan(t.total + t.cold_start);
    if (!t.ok) t.problem = "ledger fields missing";
  }
  if (!t.ok) std::fprintf(stderr, "trial failed (%s); launcher output:\n%s\n", t.problem.c_str(), output.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? std::nan("") : v[v.size() / 2];
}

double maximum(const std::vector<double>& v) {
  return v.empty() ? std::nan("") : *std::max_element(v.begin(), v.end());
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options parser("tenax-bench-restart",
                          "Restart latency of tenax-launch (failure -> first step after resume)");
  parser.add_options()("ranks", "Ranks per run", cxxopts::value<int>()->default_value("2"))(
      "repeats", "Trials per scenario", cxxopts::value<int>()->default_value("5"))(
      "params", "Parameters (float64) of the worker: sets the checkpoint size",
      cxxopts::value<long long>()->default_value("262144"))("step-ms", "Compute time per step",
                                                            cxxopts::value<int>()->default_value("20"))(
      "hang-timeout", "Hang timeout in seconds for the hang scenario", cxxopts::value<double>()->default_value("2"))(
      "h,help", "Print help");
  Config c;
  try {
    auto parsed = parser.parse(argc, argv);
    if (parsed.count("help")) {
      std::printf("%s\n", parser.help().c_str());
      return 0;
    }
    c.ranks = parsed["ranks"].as<int>();
    c.repeats = parsed["repeats"].as<int>();
    c.params = parsed["params"].as<long long>();
    c.step_ms = parsed["step-ms"].as<int>();
    c.hang_timeout_s = parsed["hang-timeout"].as<double>();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tenax-bench-restart: %s\n", error.what());
    return 64;
  }
  if (c.ranks < 2 || c.repeats < 1 || c.params < 1 || c.step_ms < 0 || c.hang_timeout_s < 0.3) {
    std::fprintf(stderr, "tenax-bench-restart: need --ranks >= 2, --repeats >= 1, --hang-timeout >= 0.3\n");
    return 64;
  }

  std::string expected;
  Trial reference = run_trial(c, false, "", &expected);
  if (!reference.ok) return 1;
  std::printf(
      "# tenax-bench-restart: %d ranks, %lld float64 parameters (%.1f MiB checkpoint), %d ms steps, "
      "heartbeat 100 ms, kill grace 500 ms, backoff 0, %d trials per scenario (median / max)\n",
      c.ranks, c.params, static_cast<double>(c.params) * 8 / 1048576.0, c.step_ms, c.repeats);
  std::printf("# uninterrupted reference run: cold start (launch -> first step) %.3f s\n", reference.cold_start);
  std::printf("%-28s %15s %15s %15s %15s %15s %15s %15s %8s\n", "scenario", "detection s", "teardown s", "relaunch s",
              "load s", "first step s", "total s", "cold start s", "target");
  bool all_ok = true;
  for (bool hang : {false, true}) {
    std::vector<double> detection, teardown, relaunch, load, first_step, total, cold;
    for (int i = 0; i < c.repeats; ++i) {
      Trial t = run_trial(c, hang, expected, nullptr);
      if (!t.ok) {
        all_ok = false;
        continue;
      }
      detection.push_back(t.detection);
      teardown.push_back(t.teardown);
      relaunch.push_back(t.relaunch);
      load.push_back(t.load);
      first_step.push_back(t.first_step);
      total.push_back(t.total);
      cold.push_back(t.cold_start);
    }
    const double detect_target = hang ? c.hang_timeout_s + 1.0 : 1.0;
    const bool ok = !detection.empty() && maximum(detection) < detect_target &&
                    maximum(total) < 10.0 + maximum(load) + (hang ? c.hang_timeout_s : 0.0);
    all_ok = all_ok && ok;
    auto cell = [](const std::vector<double>& v) {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%.3f / %.3f", median(v), maximum(v));
      return std::string(buffer);
    };
    char name[64];
    std::snprintf(name, sizeof name, "%s", hang ? "hang (SIGSTOP of rank 1)" : "crash (SIGKILL of rank 1)");
    std::printf("%-28s %15s %15s %15s %15s %15s %15s %15s %8s\n", name, cell(detection).c_str(), cell(teardown).c_str(),
                cell(relaunch).c_str(), cell(load).c_str(), cell(first_step).c_str(), cell(total).c_str(),
                cell(cold).c_str(), ok ? "met" : "MISSED");
  }
  std::printf(
      "# targets: crash detection < 1 s; hang detection < hang timeout + 1 s; total < 10 s + load "
      "(+ hang timeout for hangs)\n");
  return all_ok ? 0 : 1;
}
