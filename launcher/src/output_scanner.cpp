#include "output_scanner.hpp"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstring>

namespace tenax::launch {
namespace {

// What std::regex's \s is in the C locale: a token (\S+) ends at any of these.
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string_view trim(std::string_view text) {
  auto begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  auto end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

// A forward-only reader over one line. Each step consumes what it matched, or nothing and returns false/empty; no step
// ever goes back, so reading a line is linear in its length.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : rest_(text) {}

  std::string_view rest() const { return rest_; }

  bool literal(std::string_view expected) {
    if (rest_.substr(0, expected.size()) != expected) return false;
    rest_.remove_prefix(expected.size());
    return true;
  }
  bool next_is(char c) const { return !rest_.empty() && rest_.front() == c; }

  // \d+ : the longest run of digits, empty when there is none.
  std::string_view digits() { return take_while(is_digit); }
  // \d+ read as an int; nullopt when there are no digits or the number does not fit.
  std::optional<int> integer() {
    const std::string_view text = digits();
    int value = 0;
    if (text.empty()) return std::nullopt;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
  }
  // \S+ : the longest run of non-space characters, empty when there is none.
  std::string_view token() {
    return take_while([](char c) { return !is_space(c); });
  }
  // \s+
  bool spaces() { return !take_while(is_space).empty(); }

  template <class Predicate>
  std::string_view take_while(Predicate accept) {
    std::size_t n = 0;
    while (n < rest_.size() && accept(rest_[n]))
      ++n;
    const std::string_view taken = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return taken;
  }

 private:
  std::string_view rest_;
};

// Open MPI 4, anywhere in the line:
// "process rank <int> with PID <digits> on node <token> exited on signal <int>"
std::optional<FailureEvent> mpirun_signal(std::string_view line) {
  constexpr std::string_view start = "process rank ";
  for (std::size_t at = line.find(start); at != std::string_view::npos; at = line.find(start, at + 1)) {
    Cursor c(line.substr(at + start.size()));
    const auto rank = c.integer();
    if (!rank || !c.literal(" with PID ") || c.digits().empty() || !c.literal(" on node ")) continue;
    const std::string_view node = c.token();
    if (node.empty() || !c.literal(" exited on signal ")) continue;
    const auto signo = c.integer();
    if (!signo) continue;
    return FailureEvent{FailureEvent::Kind::Signal, *rank, std::string(node), *signo, std::string(line)};
  }
  return std::nullopt;
}

// Open MPI 4, at the start of the line: "Process name: [[<digits>,<digits>],<int>]"
std::optional<int> mpirun_process_name(std::string_view line) {
  Cursor c(line);
  if (!c.literal("Process name: [[") || c.digits().empty() || !c.literal(",") || c.digits().empty() ||
      !c.literal("],")) {
    return std::nullopt;
  }
  const auto rank = c.integer();
  if (!rank || !c.literal("]")) return std::nullopt;
  return rank;
}

// Open MPI 4, at the start of the line: "Exit code:<whitespace><int>"
std::optional<int> mpirun_exit_code(std::string_view line) {
  Cursor c(line);
  if (!c.literal("Exit code:") || !c.spaces()) return std::nullopt;
  return c.integer();
}

// Slurm, at the start of the line: "srun: error: Node failure on <token>"
std::optional<FailureEvent> srun_node_failure(std::string_view line) {
  Cursor c(line);
  if (!c.literal("srun: error: Node failure on ")) return std::nullopt;
  const std::string_view node = c.token();
  if (node.empty()) return std::nullopt;
  return FailureEvent{FailureEvent::Kind::NodeLost, -1, std::string(node), 0, std::string(line)};
}

// Slurm, at the start of the line: "srun: error: <node>: task[s] <int>[<[-,] then digits, commas, dashes>]: <what>",
// where <what> is "Exited with exit code <int>" (somewhere in it) or a signal's description. The node is the first
// token without its final ':' (a host name may hold colons itself).
std::optional<FailureEvent> srun_task(std::string_view line) {
  Cursor c(line);
  if (!c.literal("srun: error: ")) return std::nullopt;
  const std::string_view first = c.token();
  if (first.size() < 2 || first.back() != ':') return std::nullopt;
  const std::string_view node = first.substr(0, first.size() - 1);
  if (!c.literal(" task")) return std::nullopt;
  c.literal("s");
  if (!c.literal(" ")) return std::nullopt;
  const auto rank = c.integer();
  if (!rank) return std::nullopt;
  if (c.next_is('-') || c.next_is(',')) {  // the rest of a task list: "4-7", "2,4-6"
    c.take_while([](char ch) { return is_digit(ch) || ch == ',' || ch == '-'; });
  }
  if (!c.literal(": ")) return std::nullopt;
  const std::string_view what = c.rest();
  constexpr std::string_view exited = "Exited with exit code ";
  for (std::size_t at = what.find(exited); at != std::string_view::npos; at = what.find(exited, at + 1)) {
    Cursor code(what.substr(at + exited.size()));
    if (code.rest().empty() || !is_digit(code.rest().front())) continue;
    const auto value = code.integer();
    if (!value) return std::nullopt;  // an exit code no process has
    return FailureEvent{FailureEvent::Kind::ExitCode, *rank, std::string(node), *value, std::string(line)};
  }
  const int signo = signal_from_description(what);
  if (signo == 0) return std::nullopt;
  return FailureEvent{FailureEvent::Kind::Signal, *rank, std::string(node), signo, std::string(line)};
}

// Slurm, at the start of the line: "<srun: | slurmstepd: | slurmstepd-<node>:> error: tenax: <message>", the SPANK
// plugin's refusal of the step (its messages all start with "tenax: ").
std::optional<FailureEvent> spank_refusal(std::string_view line) {
  Cursor c(line);
  const std::string_view who = c.token();
  const bool from_slurm = who == "srun:" || who == "slurmstepd:" ||
                          (who.starts_with("slurmstepd-") && who.size() > 12 && who.back() == ':');
  if (!from_slurm || !c.literal(" error: tenax: ") || c.rest().empty()) return std::nullopt;
  return FailureEvent{FailureEvent::Kind::Refused, -1, "", 0, std::string(line)};
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
  if (raw.size() > kMaxScannedLine) return std::nullopt;
  const std::string_view line = trim(raw);
  if (auto event = mpirun_signal(line)) return event;
  if (auto rank = mpirun_process_name(line)) {
    pending_mpirun_rank_ = *rank;
    return std::nullopt;
  }
  if (pending_mpirun_rank_ >= 0) {
    if (auto code = mpirun_exit_code(line)) {
      const int rank = pending_mpirun_rank_;
      pending_mpirun_rank_ = -1;
      return FailureEvent{FailureEvent::Kind::ExitCode, rank, "", *code, std::string(line)};
    }
  }
  if (auto event = srun_node_failure(line)) {
    const bool known = std::any_of(lost_nodes_.begin(), lost_nodes_.end(),
                                   [&](const FailureEvent& e) { return e.node == event->node; });
    if (!known && lost_nodes_.size() < kMaxLostNodes) lost_nodes_.push_back(*event);
    return event;
  }
  if (auto event = spank_refusal(line)) return event;
  return srun_task(line);
}

}  // namespace tenax::launch
