#include "job_request.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <vector>

#include "input_limits.hpp"
#include "tenax/error.hpp"

namespace tenax::spank {

namespace {

std::string given(std::string_view source, std::string_view text) {
  return shown_value(source, text);
}

[[noreturn]] void path_too_long(std::string_view shown, std::size_t length) {
  throw UsageError(std::string(shown) + ": the path has " + std::to_string(length) +
                   " characters; paths have at most " + std::to_string(kMaxPathLength) +
                   " (PATH_MAX): choose a shorter directory");
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

bool parse_degree(std::string_view text, int& degree) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, degree);
  return !text.empty() && ec == std::errc{} && ptr == end && degree >= 1 && degree <= kMaxLayoutDegree;
}

// A layout is refused where it is typed when it needs more tasks than any step can have (tp*pp alone when dp is left
// out): the degrees are at most 65536 each, so the product is exact in 64 bits.
LayoutRequest check_step_size(std::string_view source, std::string_view text, const LayoutRequest& layout) {
  const std::int64_t model = std::int64_t{layout.tp} * layout.pp;
  const std::int64_t tasks = model * std::max(layout.dp, 1);
  if (tasks > kMaxStepTasks) {
    throw UsageError(given(source, text) + ": " + (layout.dp == 0 ? "tp*pp = " : "tp*pp*dp = ") +
                     std::to_string(tasks) + " is more than the " + std::to_string(kMaxStepTasks) +
                     " tasks a step may have; lower the degrees");
  }
  return layout;
}

[[noreturn]] void bad_layout(std::string_view source, std::string_view text, std::string_view problem) {
  throw UsageError(given(source, text) + ": " + std::string(problem) +
                   "; expected tp=N,pp=N,dp=N (any order; tp and pp default to 1, dp is inferred from the task "
                   "count when left out) or TPxPPxDP, each degree from 1 to " +
                   std::to_string(kMaxLayoutDegree) + ", e.g. tp=2,pp=1,dp=2");
}

}  // namespace

LayoutRequest parse_layout(std::string_view source, std::string_view text) {
  LayoutRequest layout;
  if (text.empty()) bad_layout(source, text, "empty layout");
  if (text.find('=') == std::string_view::npos) {
    const auto degrees = split(text, 'x');
    if (degrees.size() != 3 || !parse_degree(degrees[0], layout.tp) || !parse_degree(degrees[1], layout.pp) ||
        !parse_degree(degrees[2], layout.dp)) {
      bad_layout(source, text, "not three degrees TPxPPxDP");
    }
    return check_step_size(source, text, layout);
  }
  bool seen_tp = false, seen_pp = false, seen_dp = false;
  for (std::string_view item : split(text, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) bad_layout(source, text, "'" + clipped(item) + "' is not key=value");
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    int* degree = nullptr;
    bool* seen = nullptr;
    if (key == "tp") {
      degree = &layout.tp;
      seen = &seen_tp;
    } else if (key == "pp") {
      degree = &layout.pp;
      seen = &seen_pp;
    } else if (key == "dp") {
      degree = &layout.dp;
      seen = &seen_dp;
    } else {
      bad_layout(source, text, "unknown key '" + clipped(key) + "'");
    }
    if (*seen) bad_layout(source, text, "'" + std::string(key) + "' given twice");
    *seen = true;
    if (!parse_degree(value, *degree)) {
      bad_layout(source, text, "'" + std::string(key) + "=" + std::string(value.substr(0, 40)) + "' is not a degree");
    }
  }
  return check_step_size(source, text, layout);
}

std::string layout_to_string(int tp, int pp, int dp) {
  return "tp=" + std::to_string(tp) + ",pp=" + std::to_string(pp) + ",dp=" + std::to_string(dp);
}

PlacementPolicy parse_placement_request(std::string_view source, std::string_view text, const AdminConfig& admin) {
  const PlacementPolicy policy = parse_placement(source, text);
  if (policy == PlacementPolicy::None && !admin.allow_placement_none) {
    throw UsageError(given(source, text) +
                     ": this cluster does not allow turning placement off (admin setting allow_placement_none=no); "
                     "use topology or block");
  }
  return policy;
}

int parse_max_restarts(std::string_view source, std::string_view text, const AdminConfig& admin) {
  return parse_int_in(source, text, 0, admin.max_restarts, "admin limit max_restarts");
}

int parse_spares(std::string_view source, std::string_view text, const AdminConfig& admin) {
  return parse_int_in(source, text, 0, admin.max_spares, "admin limit max_spares");
}

namespace {

std::string parse_pattern(std::string_view source, std::string_view text, bool allow_node) {
  const std::string shown = given(source, text);
  if (text.size() > kMaxPathLength) path_too_long(shown, text.size());
  if (text.empty() || text.front() != '/') {
    throw UsageError(shown + ": expected an absolute path (starting with /)");
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) throw UsageError(shown + ": control characters are not allowed in a path");
    if (c == '%') {
      const char next = i + 1 < text.size() ? text[i + 1] : '\0';
      if (next != 'u' && next != 'j' && next != '%' && !(allow_node && next == 'n')) {
        throw UsageError(shown + ": unknown placeholder '%" + std::string(next ? 1 : 0, next) +
                         "'; allowed are %u (user name), %j (job id)" + (allow_node ? ", %n (node name)" : "") +
                         " and %% (a literal %)");
      }
      ++i;
    }
  }
  // Lexical normalisation: no "." or ".." components, so that a root test (ckpt_root) cannot be escaped.
  std::string normal;
  for (std::string_view part : split(text.substr(1), '/')) {
    if (part.empty()) continue;
    if (part == "." || part == "..") {
      throw UsageError(shown + ": '.' and '..' components are not allowed; give the directory's plain path");
    }
    normal += "/";
    normal += part;
  }
  if (normal.empty()) normal = "/";
  return normal;
}

}  // namespace

std::string parse_dir_pattern(std::string_view source, std::string_view text) {
  return parse_pattern(source, text, /*allow_node=*/false);
}

std::string parse_ckpt_local_dir(std::string_view source, std::string_view text) {
  if (text == kNoLocalDir) return std::string(kNoLocalDir);
  return parse_pattern(source, text, /*allow_node=*/true);
}

std::string parse_ckpt_every(std::string_view source, std::string_view text) {
  if (text == "auto") return "auto";
  try {
    return std::to_string(parse_int_in(source, text, 0, kMaxCheckpointSteps));
  } catch (const UsageError&) {
    throw UsageError(given(source, text) + ": expected auto (the interval the run measures as best) or whole steps " +
                     "from 0 (only at the end and on preemption) to " + std::to_string(kMaxCheckpointSteps));
  }
}

std::string parse_ckpt_dir(std::string_view source, std::string_view text, const AdminConfig& admin) {
  const std::string shown = given(source, text);
  const std::string normal = parse_dir_pattern(source, text);
  if (!admin.ckpt_root.empty()) {
    std::string root = admin.ckpt_root;
    while (root.size() > 1 && root.back() == '/')
      root.pop_back();
    const bool under = root == "/" || normal == root || (normal.starts_with(root) && normal[root.size()] == '/');
    if (!under) {
      throw UsageError(shown + ": checkpoints must lie under " + root +
                       " on this cluster (admin setting ckpt_root); choose a directory below it");
    }
  }
  return normal;
}

std::string expand_dir_pattern(std::string_view what, std::string_view pattern, std::string_view user,
                               std::string_view job_id, std::optional<std::string_view> node) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 'u') {
        out += user;
      } else if (next == 'j') {
        out += job_id;
      } else if (next == 'n') {
        out += node ? std::string(*node) : std::string("%n");
      } else {
        out += next;
      }
    } else {
      out += pattern[i];
    }
  }
  if (out.size() > kMaxPathLength) {
    throw UsageError(std::string(what) + " " + shown_value("pattern", pattern) + " expands to " +
                     std::to_string(out.size()) + " characters; paths have at most " + std::to_string(kMaxPathLength) +
                     " (PATH_MAX): use fewer %u and %j placeholders");
  }
  return out;
}

void apply_option(JobRequest& request, TenaxOption option, std::string_view value, const AdminConfig& admin) {
  switch (option) {
    case TenaxOption::Enable:
      break;
    case TenaxOption::CkptDir:
      request.ckpt_dir = parse_ckpt_dir("--tenax-ckpt-dir", value, admin);
      break;
    case TenaxOption::Layout:
      request.layout = parse_layout("--tenax-layout", value);
      break;
    case TenaxOption::Placement:
      request.placement = parse_placement_request("--tenax-placement", value, admin);
      break;
    case TenaxOption::MaxRestarts:
      request.max_restarts = parse_max_restarts("--tenax-max-restarts", value, admin);
      break;
    case TenaxOption::Spares:
      request.spares = parse_spares("--tenax-spares", value, admin);
      break;
    case TenaxOption::DataStageDir:
      request.data_stage_dir = parse_dir_pattern("--tenax-data-stage-dir", value);
      break;
    case TenaxOption::CkptLocalDir:
      request.ckpt_local_dir = parse_ckpt_local_dir("--tenax-ckpt-local-dir", value);
      break;
    case TenaxOption::CkptEvery:
      request.ckpt_every = parse_ckpt_every("--tenax-ckpt-every", value);
      break;
    case TenaxOption::CkptLocalEvery:
      request.ckpt_local_every = parse_ckpt_every("--tenax-ckpt-local-every", value);
      break;
  }
  request.enabled = true;
}

}  // namespace tenax::spank
