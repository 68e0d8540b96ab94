#include "tenax/parallel_layout.hpp"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

#include "tenax/error.hpp"

namespace tenax {
namespace {

// tp*pp*dp, overflow-checked ("more than 2^63-1" when even 64 bits do not hold it: three ints can exceed them).
std::string product_text(int tp, int pp, int dp, std::int64_t* value = nullptr) {
  std::int64_t result = 0;
  if (__builtin_mul_overflow(std::int64_t{tp}, std::int64_t{pp}, &result) ||
      __builtin_mul_overflow(result, std::int64_t{dp}, &result)) {
    result = std::numeric_limits<std::int64_t>::max();
    if (value) *value = result;
    return "more than " + std::to_string(result);
  }
  if (value) *value = result;
  return std::to_string(result);
}

// Every rank is an int: a layout whose product does not fit one cannot be placed, and world_size() would wrap.
ParallelLayout checked(const ParallelLayout& layout, std::string_view text) {
  std::int64_t world = 0;
  const std::string shown = product_text(layout.tp, layout.pp, layout.dp, &world);
  if (world > std::numeric_limits<int>::max())
    throw UsageError("layout '" + std::string(text.substr(0, 200)) + "': tp*pp*dp = " + shown +
                     " ranks, more than the " + std::to_string(std::numeric_limits<int>::max()) +
                     " a job can have; lower the degrees");
  return layout;
}

int parse_degree(std::string_view text, std::string_view whole) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1)
    throw UsageError("layout '" + std::string(whole.substr(0, 200)) + "': '" + std::string(text.substr(0, 40)) +
                     "' is not a positive integer; write e.g. tp=2,pp=1,dp=2 or 2x1x2");
  return value;
}

}  // namespace

void ParallelLayout::validate(int world) const {
  if (tp < 1 || pp < 1 || dp < 1) throw UsageError("layout " + to_string() + ": every degree must be at least 1");
  std::int64_t needed = 0;
  const std::string shown = product_text(tp, pp, dp, &needed);
  if (needed != world)
    throw UsageError("layout " + to_string() + " needs tp*pp*dp = " + shown + " ranks but the job has " +
                     std::to_string(world) + "; change the layout or the number of ranks so that they match");
}

std::string ParallelLayout::to_string() const {
  return "tp=" + std::to_string(tp) + ",pp=" + std::to_string(pp) + ",dp=" + std::to_string(dp);
}

ParallelLayout ParallelLayout::parse(std::string_view text) {
  ParallelLayout layout;
  if (text.empty()) throw UsageError("empty layout: write e.g. tp=2,pp=1,dp=2 or 2x1x2");
  if (text.find('=') == std::string_view::npos) {
    // "TPxPPxDP"
    int* degrees[3] = {&layout.tp, &layout.pp, &layout.dp};
    std::size_t start = 0;
    for (int i = 0; i < 3; ++i) {
      const std::size_t x = text.find('x', start);
      if ((i < 2) == (x == std::string_view::npos))
        throw UsageError("layout '" + std::string(text.substr(0, 200)) +
                         "': write tp=N,pp=N[,dp=N] (dp defaults to what the world size leaves) or TPxPPxDP, e.g. "
                         "tp=2,pp=1,dp=2 or 2x1x2");
      *degrees[i] = parse_degree(text.substr(start, (i < 2 ? x : text.size()) - start), text);
      start = x + 1;
    }
    return checked(layout, text);
  }
  bool seen[3] = {false, false, false};
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw UsageError("layout '" + std::string(text) + "': '" + std::string(item) + "' is not key=value");
    const std::string_view key = item.substr(0, eq);
    const int value = parse_degree(item.substr(eq + 1), text);
    int index = key == "tp" ? 0 : key == "pp" ? 1 : key == "dp" ? 2 : -1;
    if (index < 0)
      throw UsageError("layout '" + std::string(text) + "': unknown key '" + std::string(key) +
                       "'; the keys are tp, pp and dp");
    if (seen[index]) throw UsageError("layout '" + std::string(text) + "': '" + std::string(key) + "' given twice");
    seen[index] = true;
    (index == 0 ? layout.tp : index == 1 ? layout.pp : layout.dp) = value;
    start = comma + 1;
  }
  return checked(layout, text);
}

ParallelLayout ParallelLayout::infer(int world, int tp, int pp) {
  if (tp < 1 || pp < 1) throw UsageError("tp and pp must be at least 1");
  const std::int64_t model = std::int64_t{tp} * pp;  // 64 bits: tp*pp wrapping to 0 would divide by zero
  if (world % model != 0)
    throw UsageError("tp*pp = " + std::to_string(model) + " does not divide the " + std::to_string(world) +
                     " ranks of the job; choose tp and pp whose product divides the number of ranks");
  return ParallelLayout{tp, pp, static_cast<int>(world / model)};
}

RankCoords coords_of(const ParallelLayout& layout, int rank) {
  RankCoords c;
  c.tp = rank % layout.tp;
  c.dp = (rank / layout.tp) % layout.dp;
  c.pp = rank / (layout.tp * layout.dp);
  return c;
}

int rank_of(const ParallelLayout& layout, const RankCoords& c) {
  return c.tp + layout.tp * (c.dp + layout.dp * c.pp);
}

}  // namespace tenax
