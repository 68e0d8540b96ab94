#include "metrics/aggregate.hpp"

#include <algorithm>
#include <string>

#include "tenax/error.hpp"

namespace tenax::metrics::detail {
namespace {

const double* record(std::span<const double> gathered, int steps, int rank, int step) {
  return gathered.data() +
         (static_cast<std::size_t>(rank) * static_cast<std::size_t>(steps) + static_cast<std::size_t>(step)) *
             kFieldsPerStep;
}

double median_of(std::vector<double> values) {
  const std::size_t n = values.size();
  auto mid = values.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (n % 2 == 1) return *mid;
  const double upper = *mid;
  const double lower = *std::max_element(values.begin(), mid);
  return 0.5 * (lower + upper);
}

}  // namespace

void pack(std::span<const StepTimes> steps, std::vector<double>& out) {
  for (const StepTimes& s : steps) {
    out.push_back(static_cast<double>(s.step));
    out.push_back(s.total);
    out.insert(out.end(), s.seconds.begin(), s.seconds.end());
  }
}

Stat describe(std::span<const double> values) {
  Stat stat;
  stat.min = *std::min_element(values.begin(), values.end());
  stat.max = *std::max_element(values.begin(), values.end());
  double sum = 0;
  for (double v : values)
    sum += v;
  stat.mean = sum / static_cast<double>(values.size());
  stat.median = median_of(std::vector<double>(values.begin(), values.end()));
  return stat;
}

std::vector<StepAggregate> aggregate(std::span<const double> gathered, int ranks, int steps) {
  std::vector<StepAggregate> result(static_cast<std::size_t>(steps));
  std::vector<double> column(static_cast<std::size_t>(ranks));
  for (int j = 0; j < steps; ++j) {
    StepAggregate& agg = result[static_cast<std::size_t>(j)];
    agg.step = static_cast<std::int64_t>(record(gathered, steps, 0, j)[0]);
    agg.ranks = ranks;
    for (int r = 1; r < ranks; ++r) {
      const auto other = static_cast<std::int64_t>(record(gathered, steps, r, j)[0]);
      if (other != agg.step)
        throw UsageError("metrics: ranks measured different steps (rank 0 step " + std::to_string(agg.step) +
                         ", rank " + std::to_string(r) + " step " + std::to_string(other) +
                         "): every rank must call begin_step/end_step for the same steps");
    }
    for (int field = 1; field < kFieldsPerStep; ++field) {
      for (int r = 0; r < ranks; ++r)
        column[static_cast<std::size_t>(r)] = record(gathered, steps, r, j)[field];
      const Stat stat = describe(column);
      if (field == 1) {
        agg.total = stat;
        agg.slowest_rank = static_cast<int>(std::max_element(column.begin(), column.end()) - column.begin());
      } else {
        agg.phase[static_cast<std::size_t>(field - 2)] = stat;
      }
    }
  }
  return result;
}

std::vector<double> busy_per_rank(std::span<const double> gathered, int ranks, int steps) {
  std::vector<double> busy(static_cast<std::size_t>(ranks), 0.0);
  const int comm_field = 2 + index_of(Phase::Comm);
  for (int r = 0; r < ranks; ++r) {
    double sum = 0;
    for (int j = 0; j < steps; ++j) {
      const double* rec = record(gathered, steps, r, j);
      sum += rec[1] - rec[comm_field];
    }
    busy[static_cast<std::size_t>(r)] = steps > 0 ? sum / steps : 0.0;
  }
  return busy;
}

std::vector<Straggler> find_stragglers(std::span<const double> gathered, int ranks, int steps,
                                       std::span<const std::string> hosts, double threshold) {
  std::vector<Straggler> result;
  if (ranks < 2 || steps < 1) return result;
  const std::vector<double> busy = busy_per_rank(gathered, ranks, steps);
  const double median = median_of(busy);
  if (median <= 0) return result;
  for (int r = 0; r < ranks; ++r) {
    const double b = busy[static_cast<std::size_t>(r)];
    if (b > median * (1.0 + threshold) && b - median >= kStragglerMinSeconds)
      result.push_back(Straggler{r, hosts[static_cast<std::size_t>(r)], b, median, b / median - 1.0});
  }
  std::sort(result.begin(), result.end(), [](const Straggler& a, const Straggler& b) { return a.excess > b.excess; });
  return result;
}

}  // namespace tenax::metrics::detail
