// The directory protocol that makes a checkpoint appear atomically (docs/checkpoint-format.md, "Commit"):
//
//   step_<N>.tmp/rank_*.h5     every rank: written and fsynced
//   step_<N>.tmp/checkpoint.h5 rank 0, after every rank reported its file durable
//   step_<N>.tmp/manifest.json rank 0, fsynced, then the directory itself fsynced
//   rename step_<N>.tmp -> step_<N>, fsync <dir>
//   latest.tmp ("step_<N>\n", fsynced) renamed over latest, fsync <dir>
//   retention: older complete checkpoints beyond the newest K renamed to *.deleting, then removed, and superseded
//   copies of a step saved twice (step_<N>.superseded[.k]) once K-1 complete ones remain besides the new one
//
// A crash before the rename leaves only a .tmp directory (never loaded, removed by the next run); a crash after it
// leaves a complete checkpoint. Called on rank 0's I/O thread (and at start-up for the clean-up).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/file_template.hpp"
#include "checkpoint/manifest.hpp"
#include "tenax/checkpoint.hpp"

namespace tenax::ckpt {

std::string step_dir_name(std::uint64_t step);                           // "step_<N>"
std::string temp_dir_path(const std::string& dir, std::uint64_t step);   // "<dir>/step_<N>.tmp"
std::string final_dir_path(const std::string& dir, std::uint64_t step);  // "<dir>/step_<N>"

// Complete checkpoints (step_<N> directories holding a manifest), newest first. A directory whose readable manifest
// records another step (copied or renamed) is left out, with a warning naming it.
std::vector<CheckpointInfo> complete_checkpoints(const std::string& dir);

// The step a checkpoint directory's manifest records; std::nullopt when it cannot be read.
std::optional<std::uint64_t> manifest_step(const std::string& step_dir);

// Writes the VDS file and the manifest (with the VDS file's digest) into the temp directory, renames it into place,
// moves `latest` and applies retention (keep >= 1). A failure before the rename removes the temp directory and raises
// IoError; after the rename the checkpoint is complete and stays whatever happens: a failed fsync of the directory
// raises IoError, a failed move of `latest` is only a warning (loading never reads it). Older checkpoints are never
// touched except by retention. `vds_template`: the VDS file's learned structure, kept by the caller across commits
// (vds_file.hpp).
void commit_checkpoint(const std::string& dir, const Manifest& manifest, int keep,
                       FileTemplate* vds_template = nullptr);

// Removes step_*.tmp and *.deleting directories, start-up probe files and a stray latest.tmp left by an interrupted
// run. Returns how many.
int remove_leftovers(const std::string& dir);

}  // namespace tenax::ckpt
