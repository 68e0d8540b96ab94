#include "output_scanner.hpp"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <regex>

namespace tenax::launch {
namespace {

std::string trim(std::string_view text) {
  auto begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  auto end = text.find_last_not_of(" \t\r");
  return std::string(text.substr(begin, end - begin + 1));
}

}  // namespace

std::string signal_name(int signo) {
  const char* abbreviation = sigabbrev_np(signo);
  return abbreviation != nullptr ? std::string("SIG") + abbreviation : "signal " + std::to_string(signo);
}

int signal_from_description(std::string_view description) {
  struct Known {
    const char* text;
    int signo;
  };
  static const Known known[] = {{"Killed", SIGKILL},
                                {"Segmentation fault", SIGSEGV},
                                {"Aborted", SIGABRT},
                                {"Terminated", SIGTERM},
                                {"Bus error", SIGBUS},
                                {"Floating point", SIGFPE},
                                {"Illegal instruction", SIGILL},
                                {"Hangup", SIGHUP},
                                {"Interrupt", SIGINT}};
  for (const auto& k : known) {
    if (description.find(k.text) != std::string_view::npos) return k.signo;
  }
  return 0;
}

std::optional<FailureEvent> OutputScanner::scan(std::string_view raw) {
  const std::string line = trim(raw);
  static const std::regex mpirun_signal(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+))");
  static const std::regex mpirun_name(R"(^Process name: \[\[\d+,\d+\],(\d+)\])");
  static const std::regex mpirun_exit(R"(^Exit code:\s+(\d+))");
  static const std::regex srun_task(R"(^srun: error: (\S+): tasks? (\d+)(?:[-,][\d,-]*)?: (.*)$)");
  static const std::regex srun_node_failure(R"(^srun: error: Node failure on (\S+))");
  std::smatch m;
  if (std::regex_search(line, m, mpirun_signal)) {
    return FailureEvent{FailureEvent::Kind::Signal, std::stoi(m[1]), m[2], std::stoi(m[3]), line};
  }
  if (std::regex_search(line, m, mpirun_name)) {
    pending_mpirun_rank_ = std::stoi(m[1]);
    return std::nullopt;
  }
  if (pending_mpirun_rank_ >= 0 && std::regex_search(line, m, mpirun_exit)) {
    int rank = pending_mpirun_rank_;
    pending_mpirun_rank_ = -1;
    return FailureEvent{FailureEvent::Kind::ExitCode, rank, "", std::stoi(m[1]), line};
  }
  if (std::regex_search(line, m, srun_node_failure)) {
    return FailureEvent{FailureEvent::Kind::NodeLost, -1, m[1], 0, line};
  }
  if (std::regex_search(line, m, srun_task)) {
    const std::string what = m[3];
    static const std::regex exited(R"(Exited with exit code (\d+))");
    std::smatch code;
    if (std::regex_search(what, code, exited)) {
      return FailureEvent{FailureEvent::Kind::ExitCode, std::stoi(m[2]), m[1], std::stoi(code[1]), line};
    }
    int signo = signal_from_description(what);
    if (signo != 0) return FailureEvent{FailureEvent::Kind::Signal, std::stoi(m[2]), m[1], signo, line};
  }
  return std::nullopt;
}

}  // namespace tenax::launch
