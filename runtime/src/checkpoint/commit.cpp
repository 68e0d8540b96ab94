#include "checkpoint/commit.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "checkpoint/crc32c.hpp"
#include "checkpoint/dir_probe.hpp"
#include "checkpoint/vds_file.hpp"
#include "core/file_system.hpp"
#include "core/json.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::ckpt {
namespace {

// Parses "step_<digits>" (exactly, as step_dir_name writes it: no leading zero) into its step.
bool parse_step_name(const std::string& name, std::uint64_t& step) {
  constexpr std::string_view prefix = "step_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0 || name.size() > prefix.size() + 19)
    return false;
  if (name[prefix.size()] == '0' && name.size() > prefix.size() + 1) return false;  // "step_0030" is no name of 30
  std::uint64_t v = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(name[i] - '0');
  }
  step = v;
  return true;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `latest` is for people and tools (loading scans for the newest complete directory instead): failing to move it
// costs nothing a restart needs, so it is a warning, and the checkpoint it would have named stays.
void replace_latest(const std::string& dir, std::uint64_t step) {
  const std::string tmp = fs::join(dir, std::string(kLatestName) + ".tmp");
  try {
    fs::remove_tree(tmp);
    fs::write_file_durable(tmp, step_dir_name(step) + "\n");
    fs::rename_path(tmp, fs::join(dir, kLatestName));
    fs::fsync_path(dir);
  } catch (const std::exception& e) {
    TENAX_LOG(Warn, "ckpt") << "could not point " << fs::join(dir, kLatestName) << " at " << step_dir_name(step)
                            << " (the checkpoint itself is committed; loading does not read latest): " << e.what();
    try {
      fs::remove_tree(tmp);
    } catch (const std::exception&) {
    }
  }
}

// "step_<N>.superseded" or "step_<N>.superseded.<k>": an earlier checkpoint of a step saved again.
bool parse_superseded_name(const std::string& name, std::uint64_t& step) {
  constexpr std::string_view marker = ".superseded";
  const std::size_t at = name.find(marker);
  if (at == std::string::npos || !parse_step_name(name.substr(0, at), step)) return false;
  const std::string rest = name.substr(at + marker.size());
  if (rest.empty()) return true;
  if (rest[0] != '.' || rest.size() < 2 || rest.size() > 10) return false;
  return rest.find_first_not_of("0123456789", 1) == std::string::npos;
}

std::vector<CheckpointInfo> superseded_checkpoints(const std::string& dir) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::uint64_t step = 0;
    const std::string name = entry.path().filename().string();
    if (parse_superseded_name(name, step)) out.push_back({step, fs::join(dir, name)});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step > b.step; });
  return out;
}

// checkpoint.h5's size and checksum, for the manifest (the loader verifies them).
FileDigest vds_digest(const std::string& path) {
  const std::string bytes = fs::read_file(path);
  return FileDigest{kVdsName, bytes.size(), crc32c_extend(0, bytes.data(), bytes.size())};
}

// Keeps the checkpoint just committed plus the newest keep-1 others. The one just committed counts first even when an
// older run left higher step numbers behind (a resumed job saving step 150 next to a rejected step_200).
// Superseded copies (which loading never picks) come after every complete checkpoint, so they never displace one
// that a restart could load, and go once keep-1 complete others exist.
void apply_retention(const std::string& dir, std::uint64_t committed, int keep) {
  std::vector<CheckpointInfo> others;
  for (const auto& c : complete_checkpoints(dir))
    if (c.step != committed) others.push_back(c);
  for (const auto& c : superseded_checkpoints(dir))
    others.push_back(c);
  const std::size_t keep_others = static_cast<std::size_t>(std::max(keep, 1) - 1);
  for (std::size_t i = keep_others; i < others.size(); ++i) {
    try {
      // Rename first: a half-removed directory must never look like a complete checkpoint.
      const std::string doomed = others[i].path + ".deleting";
      fs::rename_path(others[i].path, doomed);
      fs::remove_tree(doomed);
      TENAX_LOG(Info, "ckpt") << "retention (keep " << keep << "): removed " << others[i].path;
    } catch (const std::exception& e) {
      // Failing to delete an old checkpoint loses nothing: warn and go on.
      TENAX_LOG(Warn, "ckpt") << "retention could not remove " << others[i].path << ": " << e.what();
    }
  }
}

}  // namespace

std::string step_dir_name(std::uint64_t step) {
  return "step_" + std::to_string(step);
}
std::string temp_dir_path(const std::string& dir, std::uint64_t step) {
  return fs::join(dir, step_dir_name(step) + ".tmp");
}
std::string final_dir_path(const std::string& dir, std::uint64_t step) {
  return fs::join(dir, step_dir_name(step));
}

std::optional<std::uint64_t> manifest_step(const std::string& step_dir) {
  try {
    const json::Value root = json::Value::parse(fs::read_file(fs::join(step_dir, kManifestName)));
    const json::Value* step = root.find("step");
    if (step == nullptr) return std::nullopt;
    return step->u64();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<CheckpointInfo> complete_checkpoints(const std::string& dir) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return out;
  for (const auto& entry : it) {
    std::uint64_t step = 0;
    const std::string name = entry.path().filename().string();
    if (!parse_step_name(name, step)) continue;
    const std::string path = fs::join(dir, name);
    if (!fs::is_directory(path) || !fs::exists(fs::join(path, kManifestName))) continue;
    // A directory copied or renamed under another step's name would pass for that step: the newest for ever,
    // crowding the real ones out of retention and the node-local tier out of restarts. Not counted, and named. (A
    // manifest that cannot be read is counted: loading it fails, falls back and names it.)
    if (const std::optional<std::uint64_t> recorded = manifest_step(path); recorded && *recorded != step) {
      TENAX_LOG(Warn, "ckpt") << path << " holds the checkpoint of step " << *recorded
                              << " (its manifest says so): not taken for step " << step << "; rename it "
                              << step_dir_name(*recorded) << " to use it, or remove it";
      continue;
    }
    out.push_back({step, path});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step > b.step; });
  return out;
}

void commit_checkpoint(const std::string& dir, const Manifest& written, int keep, FileTemplate* vds_template) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  Clock::time_point t_record, t_renamed;
  const std::string tmp = temp_dir_path(dir, written.step);
  const std::string final_dir = final_dir_path(dir, written.step);
  try {
    Manifest manifest = written;
    write_vds_file(fs::join(tmp, kVdsName), manifest, vds_template);
    manifest.vds = vds_digest(fs::join(tmp, kVdsName));
    fs::write_file_durable(fs::join(tmp, kManifestName), manifest.to_json());
    fs::fsync_path(tmp);
    t_record = Clock::now();
    if (fs::exists(final_dir)) {
      // The same step saved again (e.g. after resuming from an older checkpoint): keep the earlier one aside rather
      // than overwrite anything in place; retention removes it later.
      std::string aside = final_dir + ".superseded";
      for (int i = 1; fs::exists(aside); ++i)
        aside = final_dir + ".superseded." + std::to_string(i);
      fs::rename_path(final_dir, aside);
      TENAX_LOG(Warn, "ckpt") << final_dir << " already existed; moved it to " << aside;
    }
    fs::rename_path(tmp, final_dir);
  } catch (...) {
    try {
      fs::remove_tree(tmp);
    } catch (const std::exception& e) {
      TENAX_LOG(Warn, "ckpt") << "could not remove the failed checkpoint: " << e.what();
    }
    throw;
  }
  // From here on the checkpoint is complete (its manifest was fsynced before the rename): nothing below removes it.
  try {
    fs::fsync_path(dir);
  } catch (const std::exception& e) {
    throw IoError(final_dir +
                  " is complete, but making its rename durable failed (after a crash it may be gone, "
                  "and an older checkpoint would be loaded): " +
                  std::string(e.what()));
  }
  replace_latest(dir, written.step);
  t_renamed = Clock::now();
  apply_retention(dir, written.step, keep);
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  TENAX_LOG(Debug, "ckpt") << "commit of step " << written.step << ": VDS + manifest + fsyncs " << ms(t0, t_record)
                           << " ms, rename + latest " << ms(t_record, t_renamed) << " ms, retention "
                           << ms(t_renamed, Clock::now()) << " ms";
}

int remove_leftovers(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  std::vector<std::string> doomed;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::uint64_t step = 0;
    bool tmp_dir = ends_with(name, ".tmp") && parse_step_name(name.substr(0, name.size() - 4), step);
    bool deleting = ends_with(name, ".deleting");
    bool probe = name.rfind(kProbePrefix, 0) == 0;
    if (tmp_dir || deleting || probe || name == std::string(kLatestName) + ".tmp")
      doomed.push_back(fs::join(dir, name));
  }
  for (const auto& path : doomed) {
    fs::remove_tree(path);
    TENAX_LOG(Info, "ckpt") << "removed " << path << " left by an interrupted checkpoint";
    ++removed;
  }
  return removed;
}

}  // namespace tenax::ckpt
