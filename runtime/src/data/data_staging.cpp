// stage_dataset: agree that staging is on, group the ranks by node, let each node's lowest rank stage (on a thread,
// while every rank joins short all-reduce rounds until all copiers are done), tell the node's ranks the outcome, and
// agree on whether the shared dataset was damaged.
#include "tenax/data_staging.hpp"
#include "core/host_name.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <sstream>

#include "comm/agreement.hpp"
#include "core/abandoned_siblings.hpp"
#include "data/staging_copy.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax {
namespace {

constexpr std::size_t kMaxNodeName = 255;

// Ranks with the same node name, ordered by rank in `comm`.
std::unique_ptr<Communicator> split_by_node(Communicator& comm, const std::string& node) {
  const std::vector<std::string> names = all_gather_strings(comm, node);
  int color = comm.rank();
  for (int r = 0; r < comm.size(); ++r)
    if (names[r] == node) {
      color = r;
      break;
    }
  return comm.split(color, comm.rank(), "node[" + std::to_string(color) + "]");
}

// The copier's result as one string for broadcast_string: fields separated by '\n', reason last (it may hold any
// byte but is not split again).
std::string encode(const data::LocalStageResult& r) {
  std::ostringstream o;
  o << static_cast<int>(r.outcome) << '\n'
    << r.bytes_copied << '\n'
    << r.bytes_verified << '\n'
    << r.files << '\n'
    << r.seconds << '\n'
    << r.dir.size() << '\n'
    << r.dir << r.reason;
  return o.str();
}

data::LocalStageResult decode(const std::string& text) {
  std::istringstream in(text);
  data::LocalStageResult r;
  int outcome = 0;
  std::size_t dir_size = 0;
  in >> outcome >> r.bytes_copied >> r.bytes_verified >> r.files >> r.seconds >> dir_size;
  in.get();
  r.outcome = static_cast<StagingOutcome>(outcome);
  const std::string rest = text.substr(static_cast<std::size_t>(in.tellg()));
  r.dir = rest.substr(0, dir_size);
  r.reason = rest.substr(dir_size);
  return r;
}

}  // namespace

std::string_view staging_outcome_name(StagingOutcome outcome) {
  switch (outcome) {
    case StagingOutcome::Off:
      return "off";
    case StagingOutcome::Copied:
      return "copied";
    case StagingOutcome::Reused:
      return "reused";
    case StagingOutcome::FellBack:
      return "fell back";
  }
  return "?";
}

StagingResult stage_dataset(Communicator& comm, const std::string& dataset_dir, const StagingOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string stage_root =
      options.stage_dir.empty() ? env::get_string("TENAX_DATA_STAGE_DIR") : options.stage_dir;
  // Every rank must take the same path through the collectives below.
  std::int32_t requested[2] = {stage_root.empty() ? 0 : 1, stage_root.empty() ? 0 : -1};
  comm.all_reduce(requested, requested, 2, DType::I32, ReduceOp::Max);
  if (requested[0] == 1 && requested[1] == 0)
    throw UsageError(
        "TENAX_DATA_STAGE_DIR (or StagingOptions::stage_dir) is set on some ranks and not on others: "
        "set it for the whole job or for none of it");
  StagingResult result;
  result.dir = dataset_dir;
  if (requested[0] == 0) return result;
  if (comm.rank() == 0)
    env::warn_if_unexpanded(options.stage_dir.empty() ? "TENAX_DATA_STAGE_DIR" : "StagingOptions::stage_dir",
                            stage_root);

  std::string node = options.node_name.empty() ? detail::node_name() : options.node_name;
  std::string usage;
  if (node.size() > kMaxNodeName) usage = "the node name has more than 255 bytes: " + node.substr(0, 64) + "...";
  // Node-local storage is each node's own: a relative path resolves against every rank's working directory (a shared
  // one, often, where every node would then copy into the same place), and blanks are a typing slip.
  if (stage_root.front() != '/')
    usage = "the staging directory '" + stage_root +
            "' is not an absolute path; give one on the node's own storage, e.g. /tmp/tenax-stage-$USER "
            "(TENAX_DATA_STAGE_DIR, StagingOptions::stage_dir), or leave it unset";
  run_agreed(comm, [&] {
    if (!usage.empty()) throw UsageError("stage_dataset: " + usage);
  });
  std::unique_ptr<Communicator> node_comm = split_by_node(comm, node);
  const bool copier = node_comm->rank() == 0;

  std::future<data::LocalStageResult> work;
  if (copier)
    work = std::async(std::launch::async, [&] { return data::stage_on_this_node(dataset_dir, stage_root, node); });
  wait_on_every_rank(comm, [&](std::chrono::milliseconds timeout) {
    return !copier || work.wait_for(timeout) == std::future_status::ready;
  });
  Outcome source_error;
  data::LocalStageResult local;
  if (copier) {
    try {
      local = work.get();
    } catch (const DataError& e) {
      source_error = Outcome{2, e.what()};
    } catch (const std::exception& e) {
      source_error = Outcome{1, e.what()};
    }
  }
  const Outcome agreed = agree(comm, source_error);
  if (agreed.code == 2) throw DataError("staging the dataset " + dataset_dir + ": " + agreed.message);
  if (agreed.code != 0) throw IoError("staging the dataset " + dataset_dir + ": " + agreed.message);
  local = decode(broadcast_string(*node_comm, copier ? encode(local) : std::string(), 0));

  result.dir = local.dir;
  result.outcome = local.outcome;
  result.reason = local.reason;
  result.copier = copier;
  result.node_ranks = node_comm->size();
  result.node_seconds = local.seconds;
  result.bytes_copied = local.bytes_copied;
  result.bytes_verified = local.bytes_verified;
  result.files = local.files;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (copier) {
    const double mb = static_cast<double>(local.bytes_copied + local.bytes_verified) / (1 << 20);
    if (local.outcome == StagingOutcome::FellBack) {
      TENAX_LOG(Warn, "data") << "staging " << dataset_dir << " to " << stage_root << " on node " << node
                              << " failed, reading the shared copy instead: " << local.reason;
    } else {
      if (!local.reason.empty()) TENAX_LOG(Warn, "data") << local.reason;
      TENAX_LOG(Info, "data") << "dataset " << dataset_dir << " " << staging_outcome_name(local.outcome) << " at "
                              << local.dir << " for " << result.node_ranks << " rank(s) in " << local.seconds << " s ("
                              << mb << " MiB copied and checked)";
    }
  }
  return result;
}

}  // namespace tenax
