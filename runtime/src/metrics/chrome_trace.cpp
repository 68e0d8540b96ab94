// The Chrome trace event format (JSON object form), as Perfetto and chrome://tracing read it: one process per rank,
// a "host" thread with the phases as the host saw them and, with CUDA events, a "device" thread with the phases as the
// device executed them; one complete ("X") event per phase interval and per step.
#include <algorithm>
#include <limits>
#include <string>

#include "core/json.hpp"
#include "metrics/outputs.hpp"

namespace tenax::metrics::detail {

void pack(std::span<const TraceInterval> intervals, double steady_to_unix_us, std::vector<double>& out) {
  for (const TraceInterval& i : intervals) {
    out.push_back(static_cast<double>(i.track));
    out.push_back(i.kind);
    out.push_back(static_cast<double>(i.step));
    out.push_back(static_cast<double>(i.start_ns) / 1e3 + steady_to_unix_us);
    out.push_back(static_cast<double>(i.end_ns - i.start_ns) / 1e3);
  }
}

std::string format_chrome_trace(std::span<const std::vector<double>> per_rank, std::span<const std::string> hosts) {
  const int ranks = static_cast<int>(per_rank.size());
  auto count = [&](int rank) { return per_rank[static_cast<std::size_t>(rank)].size() / kFieldsPerInterval; };
  auto at = [&](int rank, std::size_t i) {
    return per_rank[static_cast<std::size_t>(rank)].data() + i * kFieldsPerInterval;
  };
  // Timestamps relative to the earliest event keep the numbers small and the view starting at zero.
  double origin = std::numeric_limits<double>::infinity();
  for (int r = 0; r < ranks; ++r)
    for (std::size_t i = 0; i < count(r); ++i)
      origin = std::min(origin, at(r, i)[3]);
  if (!(origin < std::numeric_limits<double>::infinity())) origin = 0;

  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto event = [&](const std::string& body) {
    out += (first ? "" : ",\n") + body;
    first = false;
  };
  for (int r = 0; r < ranks; ++r) {
    const std::string pid = std::to_string(r);
    event("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid +
          ",\"args\":{\"name\":" + json::quote("rank " + pid + " (" + hosts[static_cast<std::size_t>(r)] + ")") + "}}");
    event("{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + pid + ",\"args\":{\"sort_index\":" + pid + "}}");
    bool has_device = false;
    for (std::size_t i = 0; i < count(r); ++i)
      has_device |= at(r, i)[0] == 1;
    event("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"name\":\"host\"}}");
    if (has_device)
      event("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":1,\"args\":{\"name\":\"device\"}}");
    for (std::size_t i = 0; i < count(r); ++i) {
      const double* f = at(r, i);
      const int kind = static_cast<int>(f[1]);
      const auto step = static_cast<std::int64_t>(f[2]);
      const std::string name =
          kind == kStepKind ? "step " + std::to_string(step) : std::string(phase_name(static_cast<Phase>(kind)));
      event("{\"name\":" + json::quote(name) + ",\"cat\":\"" + (kind == kStepKind ? "step" : "phase") +
            "\",\"ph\":\"X\",\"pid\":" + pid + ",\"tid\":" + std::to_string(static_cast<int>(f[0])) +
            ",\"ts\":" + json::number(f[3] - origin) + ",\"dur\":" + json::number(f[4]) +
            ",\"args\":{\"step\":" + std::to_string(step) + "}}");
    }
  }
  return out + "\n]}\n";
}

}  // namespace tenax::metrics::detail
