#include "hang_detector.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace tenax::launch {
namespace {

std::string seconds(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f s", s);
  return buffer;
}

}  // namespace

HangDetector::HangDetector(HangSettings settings, int world_size, double start_s)
    : settings_(settings), start_s_(start_s), ranks_(static_cast<std::size_t>(world_size)), last_progress_s_(start_s) {}

double HangDetector::timeout_s() const {
  if (!settings_.enabled) return 0;
  if (settings_.fixed_timeout_s > 0) return settings_.fixed_timeout_s;
  return std::max(settings_.min_timeout_s, settings_.factor * slowest_step_s_);
}

double HangDetector::last_beat_s(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size()) || !ranks_[rank].known) return -1;
  return ranks_[rank].beat_changed_s;
}

void HangDetector::observe(const std::vector<Heartbeat>& beats, double now_s) {
  std::int64_t attempt_max = max_step_;
  bool stepped = false;
  for (const auto& h : beats) {
    if (h.rank < 0 || h.rank >= static_cast<int>(ranks_.size())) continue;
    Seen& seen = ranks_[h.rank];
    if (!seen.known || h.beat != seen.beat) seen.beat_changed_s = now_s;
    if (seen.known && (h.step != seen.step || h.seq != seen.seq)) last_progress_s_ = now_s;
    seen.known = true;
    seen.beat = h.beat;
    seen.step = h.step;
    seen.seq = h.seq;
    seen.exited = h.exit_code >= 0;
    seen.node = h.node;
    resumed_step_ = std::max(resumed_step_, h.resumed_step);
    // A completed step of this attempt: past the step it resumed from.
    if (h.resumed_step >= 0 && h.step > h.resumed_step && h.step > attempt_max) stepped = true;
    attempt_max = std::max(attempt_max, h.step);
  }
  if (stepped) {
    if (last_step_advance_s_ >= 0) slowest_step_s_ = std::max(slowest_step_s_, now_s - last_step_advance_s_);
    last_step_advance_s_ = now_s;
    if (first_step_s_ < 0) first_step_s_ = now_s;
  }
  max_step_ = attempt_max;
  if (first_beat_s_ < 0 && std::all_of(ranks_.begin(), ranks_.end(), [](const Seen& s) { return s.known; })) {
    first_beat_s_ = now_s;
  }
}

std::vector<std::string> HangDetector::wholly_silent_nodes(const std::vector<int>& silent_ranks, double now_s,
                                                           double timeout_s) const {
  // The ranks of a node that died or froze stop within a heartbeat of each other, so the first of them crosses the
  // timeout while the others are a little short of it: on the node of a silent rank, every rank quiet for half the
  // timeout counts. A node with a rank that beat more recently than that is still alive.
  const double quiet_s = timeout_s / 2;
  std::vector<std::string> beating, quiet;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const Seen& s = ranks_[r];
    if (!s.known || s.exited || s.node.empty()) continue;  // a node without a name is no evidence either way
    std::vector<std::string>& into = now_s - s.beat_changed_s > quiet_s ? quiet : beating;
    if (std::find(into.begin(), into.end(), s.node) == into.end()) into.push_back(s.node);
  }
  std::vector<std::string> nodes;
  for (int r : silent_ranks) {
    const std::string& node = ranks_[static_cast<std::size_t>(r)].node;
    if (node.empty() || std::find(beating.begin(), beating.end(), node) != beating.end()) continue;
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  }
  if (beating.empty()) nodes.clear();  // every node silent: no node stands out (e.g. the heartbeat file system)
  return nodes;
}

std::optional<HangVerdict> HangDetector::check(double now_s) const {
  const double timeout = timeout_s();
  HangVerdict silent{HangVerdict::Kind::Silent, {}, {}, {}, {}};
  std::ostringstream silent_text;
  for (std::size_t r = 0; settings_.enabled && r < ranks_.size(); ++r) {
    const Seen& s = ranks_[r];
    if (!s.known || s.exited || now_s - s.beat_changed_s <= timeout) continue;
    silent.ranks.push_back(static_cast<int>(r));
    silent.nodes.push_back(s.node);
    if (silent.ranks.size() > 1) silent_text << "; ";
    silent_text << "rank " << r << " on " << s.node << " silent for " << seconds(now_s - s.beat_changed_s)
                << " (last step " << s.step << ", collective " << s.seq << ")";
  }
  if (!silent.ranks.empty()) {
    silent.silent_nodes = wholly_silent_nodes(silent.ranks, now_s, timeout);
    silent.description = silent_text.str() + ", hang timeout " + seconds(timeout);
    if (!silent.silent_nodes.empty()) {
      silent.description += "; every running rank on " + silent.silent_nodes.front();
      for (std::size_t i = 1; i < silent.silent_nodes.size(); ++i)
        silent.description += (i + 1 == silent.silent_nodes.size() ? " and " : ", ") + silent.silent_nodes[i];
      silent.description += " is silent while other nodes' ranks keep beating";
    }
    return silent;
  }

  if (first_beat_s_ < 0 && now_s - start_s_ > settings_.startup_timeout_s) {
    HangVerdict verdict{HangVerdict::Kind::NotStarted, {}, {}, {}, {}};
    std::ostringstream text;
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].known) continue;
      verdict.ranks.push_back(static_cast<int>(r));
      verdict.nodes.push_back("");
    }
    text << verdict.ranks.size() << " rank(s) wrote no heartbeat within the startup timeout "
         << seconds(settings_.startup_timeout_s) << " (first: rank " << verdict.ranks.front() << ")";
    verdict.description = text.str();
    return verdict;
  }

  const bool before_first_step = first_step_s_ < 0;
  if (!before_first_step && !settings_.enabled) return std::nullopt;
  const double limit = before_first_step ? settings_.startup_timeout_s : timeout;
  const double since = before_first_step ? now_s - start_s_ : now_s - last_progress_s_;
  if (since <= limit || first_beat_s_ < 0) return std::nullopt;

  // Stalled: name the laggards by the lowest collective sequence number, then the lowest step.
  HangVerdict verdict{HangVerdict::Kind::Stalled, {}, {}, {}, {}};
  std::uint64_t min_seq = UINT64_MAX, max_seq = 0;
  std::int64_t min_step = INT64_MAX, max_step = INT64_MIN;
  for (const auto& s : ranks_) {
    if (!s.known || s.exited) continue;
    min_seq = std::min(min_seq, s.seq);
    max_seq = std::max(max_seq, s.seq);
    min_step = std::min(min_step, s.step);
    max_step = std::max(max_step, s.step);
  }
  const bool by_seq = min_seq != max_seq;
  const bool by_step = !by_seq && min_step != max_step;
  std::ostringstream text;
  text << "no progress for " << seconds(since) << " (" << (before_first_step ? "startup timeout " : "hang timeout ")
       << seconds(limit) << ")";
  if (by_seq || by_step) {
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const Seen& s = ranks_[r];
      if (!s.known || s.exited) continue;
      if ((by_seq && s.seq == min_seq) || (by_step && s.step == min_step)) {
        verdict.ranks.push_back(static_cast<int>(r));
        verdict.nodes.push_back(s.node);
      }
    }
    text << ": laggard rank " << verdict.ranks.front() << " on " << verdict.nodes.front();
    if (verdict.ranks.size() > 1) text << " (+" << verdict.ranks.size() - 1 << " more)";
    if (by_seq) {
      text << " at collective " << min_seq << " while others reached " << max_seq;
    } else {
      text << " at step " << min_step << " while others reached " << max_step;
    }
  } else {
    text << ": all ranks stuck together at step " << max_step << ", collective " << max_seq;
  }
  verdict.description = text.str();
  return verdict;
}

}  // namespace tenax::launch
