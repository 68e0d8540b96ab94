// The Prometheus text exposition format (version 0.0.4), as node_exporter's textfile collector reads it: every family
// has HELP and TYPE lines before its samples, counters end in _total, label values are escaped.
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/json.hpp"
#include "metrics/outputs.hpp"

namespace tenax::metrics::detail {
namespace {

std::string label_value(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

class Family {
 public:
  // `common`: the labels of every series (run and the job's), formatted once.
  Family(std::string& out, const std::string& common, const char* name, const char* type, const char* help)
      : out_(out), common_(common), name_(name) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  // `labels`: extra labels already formatted as `key="value"` pairs separated by commas, or "".
  void sample(double value, const std::string& labels = "") {
    std::string number = json::number(value);
    if (number == "null") number = "NaN";
    out_ += name_ + "{" + common_ + (labels.empty() ? "" : "," + labels) + "} " + number + "\n";
  }

 private:
  std::string& out_;
  const std::string& common_;
  std::string name_;
};

std::string common_labels(const PromSnapshot& s) {
  std::string out = "run=\"" + label_value(s.run) + "\"";
  for (const auto& [name, value] : s.job_labels)
    out += "," + name + "=\"" + label_value(value) + "\"";
  return out;
}

std::string bounded_env(const char* name) {
  constexpr std::size_t kMaxLabelBytes = 256;
  const char* value = std::getenv(name);
  if (value == nullptr) return {};
  std::string text(value, ::strnlen(value, kMaxLabelBytes));
  return text;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> slurm_job_labels() {
  std::vector<std::pair<std::string, std::string>> labels;
  const std::string job = bounded_env("SLURM_JOB_ID");
  if (job.empty()) return labels;
  const std::string array_job = bounded_env("SLURM_ARRAY_JOB_ID"), array_task = bounded_env("SLURM_ARRAY_TASK_ID");
  labels.emplace_back("job", !array_job.empty() && !array_task.empty() ? array_job + "_" + array_task : job);
  if (std::string user = bounded_env("SLURM_JOB_USER"); !user.empty()) labels.emplace_back("user", user);
  if (std::string step = bounded_env("SLURM_STEP_ID"); !step.empty()) labels.emplace_back("step", step);
  return labels;
}

std::string format_prometheus(const PromSnapshot& s) {
  std::string out;
  const std::string run = common_labels(s);
  Family(out, run, "tenax_steps_total", "counter", "Training steps measured in this attempt.")
      .sample(static_cast<double>(s.steps_total));
  Family(out, run, "tenax_last_step", "gauge", "Number of the last step measured.")
      .sample(static_cast<double>(s.last_step));
  Family(out, run, "tenax_attempt", "gauge", "Attempt number of the running job (1 = first start).")
      .sample(s.identity.attempt);
  Family(out, run, "tenax_ranks", "gauge", "Ranks in the job.").sample(s.identity.ranks);
  Family(out, run, "tenax_step_seconds_total", "counter", "Step time summed over steps (mean over ranks).")
      .sample(s.step_seconds_total);
  {
    Family phases(out, run, "tenax_phase_seconds_total", "counter",
                  "Step time per phase summed over steps (mean over ranks).");
    for (int p = 0; p < kPhaseCount; ++p)
      phases.sample(s.phase_seconds_total[static_cast<std::size_t>(p)],
                    "phase=\"" + std::string(phase_name(static_cast<Phase>(p))) + "\"");
  }
  {
    Family step(out, run, "tenax_step_seconds", "gauge",
                "Step time over ranks (min, median, max, mean), averaged over the last window of steps.");
    step.sample(s.window_step.min, "stat=\"min\"");
    step.sample(s.window_step.median, "stat=\"median\"");
    step.sample(s.window_step.max, "stat=\"max\"");
    step.sample(s.window_step.mean, "stat=\"mean\"");
  }
  {
    Family fraction(out, run, "tenax_phase_fraction", "gauge", "Share of step time per phase over the last window.");
    for (int p = 0; p < kPhaseCount; ++p)
      fraction.sample(s.window_phase_fraction[static_cast<std::size_t>(p)],
                      "phase=\"" + std::string(phase_name(static_cast<Phase>(p))) + "\"");
  }
  Family(out, run, "tenax_step_efficiency", "gauge", "Compute time / step time over the last window.")
      .sample(s.window_phase_fraction[static_cast<std::size_t>(index_of(Phase::Compute))]);
  Family(out, run, "tenax_starvation_fraction", "gauge", "Data wait / step time over the last window.")
      .sample(s.window_phase_fraction[static_cast<std::size_t>(index_of(Phase::DataWait))]);
  Family(out, run, "tenax_exposed_comm_fraction", "gauge", "Exposed communication / step time over the last window.")
      .sample(s.window_phase_fraction[static_cast<std::size_t>(index_of(Phase::Comm))]);
  {
    Family busy(out, run, "tenax_rank_busy_seconds", "gauge",
                "Mean busy time per step (step minus exposed communication) of each rank over the last window.");
    for (std::size_t r = 0; r < s.busy_per_rank.size(); ++r)
      busy.sample(s.busy_per_rank[r], "rank=\"" + std::to_string(r) + "\",host=\"" +
                                          label_value(r < s.hosts.size() ? s.hosts[r] : "") + "\"");
  }
  Family(out, run, "tenax_stragglers", "gauge", "Ranks reported as stragglers in the last window.")
      .sample(static_cast<double>(s.stragglers));
  Family(out, run, "tenax_metrics_updated_seconds", "gauge", "Unix time of this update.").sample(s.unix_time);
  return out;
}

}  // namespace tenax::metrics::detail
