#include "metrics/ledger.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/json.hpp"
#include "metrics/run_files.hpp"
#include "tenax/log.hpp"

namespace tenax::metrics::detail {
namespace {

// Goodput tolerates what it cannot use: a member that is absent or of another kind is simply not there.
std::optional<double> number_member(const json::Value& record, std::string_view key) {
  const json::Value* m = record.find(key);
  if (m == nullptr || m->kind() != json::Value::Kind::Number) return std::nullopt;
  try {
    return m->number();
  } catch (const json::Error&) {
    return std::nullopt;  // beyond a double's range
  }
}

std::string string_member(const json::Value& record, std::string_view key) {
  const json::Value* m = record.find(key);
  return m != nullptr && m->kind() == json::Value::Kind::String ? m->string() : std::string();
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
    json::Value record;
    try {
      record = json::Value::parse(line);
    } catch (const json::ParseError& error) {
      TENAX_LOG(Warn, "metrics") << path << " line " << number << " ignored: " << error.what();
      continue;
    }
    if (record.kind() != json::Value::Kind::Object) {
      TENAX_LOG(Warn, "metrics") << path << " line " << number << " ignored: not a JSON object";
      continue;
    }
    const std::string event = string_member(record, "event");
    if (event == "start") {
      if (auto t = number_member(record, "time")) note_time(ledger, *t);
      continue;
    }
    if (event != "attempt") continue;  // "end" and any later record kinds carry nothing goodput needs
    const auto attempt = number_member(record, "attempt");
    const auto start = number_member(record, "start");
    const auto end = number_member(record, "end");
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
    a.productive_s = number_member(record, "productive_s").value_or(0.0);
    a.work_lost_s = number_member(record, "work_lost_s").value_or(0.0);
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
