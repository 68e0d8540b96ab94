// Internal: the few file operations the metrics outputs need, with the guarantees their readers rely on.
#pragma once

#include <string>
#include <string_view>

namespace tenax::metrics::detail {

// Creates `path` and its missing parents (like mkdir -p). Throws IoError naming the path.
void make_directories(const std::string& path);

// Whether a write waits for the disk (for a whole-file replacement: fs::replace_file_atomically with
// fs::Durability::None or Contents, for the same reasons). The per-window outputs do not: they are monitoring data,
// rewritten or extended every few seconds, a process crash loses nothing that reached the page cache, and an fsync per
// window costs milliseconds on a network file system, far more than the measurement itself. Once-per-run files do.
enum class Sync { No, Yes };

// Appends `content` (whole lines) with one write(2) on an O_APPEND descriptor: earlier lines are never rewritten.
void append(const std::string& path, std::string_view content, Sync sync);

// The whole file, or "" when it does not exist. Throws IoError on any other failure.
std::string read_if_exists(const std::string& path);

}  // namespace tenax::metrics::detail
