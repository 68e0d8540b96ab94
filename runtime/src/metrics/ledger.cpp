#include "metrics/ledger.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "metrics/json_text.hpp"
#include "metrics/run_files.hpp"
#include "tenax/log.hpp"

namespace tenax::metrics::detail {
namespace {

using Members = std::map<std::string, JsonScalar>;

std::optional<double> number_member(const Members& members, const std::string& key) {
  auto it = members.find(key);
  if (it == members.end() || !std::holds_alternative<double>(it->second)) return std::nullopt;
  return std::get<double>(it->second);
}

std::string string_member(const Members& members, const std::string& key) {
  auto it = members.find(key);
  if (it == members.end() || !std::holds_alternative<std::string>(it->second)) return {};
  return std::get<std::string>(it->second);
}

void note_time(Ledger& ledger, double t) {
  if (t > 0 && (ledger.first_time == 0 || t < ledger.first_time)) ledger.first_time = t;
}

}  // namespace

Ledger read_ledger(const std::string& path) {
  std::istringstream lines(read_if_exists(path));
  Ledger ledger;
  std::map<int, std::size_t> index_of_attempt;
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string problem;
    const auto members = parse_flat_object(line, problem);
    if (!members) {
      TENAX_LOG(Warn, "metrics") << path << " line " << number << " ignored: " << problem;
      continue;
    }
    const std::string event = string_member(*members, "event");
    if (event == "start") {
      if (auto t = number_member(*members, "time")) note_time(ledger, *t);
      continue;
    }
    if (event != "attempt") continue;  // "end" and any later record kinds carry nothing goodput needs
    const auto attempt = number_member(*members, "attempt");
    const auto start = number_member(*members, "start");
    const auto end = number_member(*members, "end");
    if (!attempt || *attempt < 1 || *attempt != std::floor(*attempt) || !start || !end) {
      TENAX_LOG(Warn, "metrics") << path << " line " << number
                                 << " ignored: an attempt record needs an integer \"attempt\" >= 1 and numeric "
                                    "\"start\" and \"end\"";
      continue;
    }
    LedgerAttempt a;
    a.attempt = static_cast<int>(*attempt);
    a.start = *start;
    a.end = *end;
    a.productive_s = number_member(*members, "productive_s").value_or(0.0);
    a.work_lost_s = number_member(*members, "work_lost_s").value_or(0.0);
    note_time(ledger, a.start);
    if (auto it = index_of_attempt.find(a.attempt); it != index_of_attempt.end()) {
      ledger.attempts[it->second] = a;
    } else {
      index_of_attempt[a.attempt] = ledger.attempts.size();
      ledger.attempts.push_back(a);
    }
  }
  return ledger;
}

std::optional<Goodput> compute_goodput(const Ledger& ledger, double this_attempt_productive_s, double now_unix) {
  if (ledger.first_time == 0) return std::nullopt;
  Goodput g;
  g.attempts = static_cast<int>(ledger.attempts.size());
  for (const LedgerAttempt& a : ledger.attempts) {
    g.productive_s += std::max(0.0, a.productive_s - a.work_lost_s);
    g.lost_s += a.work_lost_s;
  }
  g.productive_s += this_attempt_productive_s;
  g.wall_s = now_unix - ledger.first_time;
  g.goodput = g.wall_s > 0 ? std::clamp(g.productive_s / g.wall_s, 0.0, 1.0) : 0.0;
  return g;
}

}  // namespace tenax::metrics::detail
