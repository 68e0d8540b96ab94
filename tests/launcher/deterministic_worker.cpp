// A real, deterministic MPI training program for the launcher's fault tests (it stands in for the training example,
// which the same tests will drive later).
//
// "Training": P float64 parameters replicated on every rank. Each step every rank computes a gradient from the
// parameters, the step number and its rank; the gradients are summed with an all-reduce and applied. The result
// depends only on the starting parameters, the number of steps and the world size, so a run that is killed, hung,
// preempted and resumed from its checkpoints must end with bitwise the same parameters as one that never stopped.
//
// Checkpoints: rank 0 writes the parameters (magic, step, count, parameters, FNV-1a checksum of all that) into
// TENAX_CHECKPOINT_DIR, then every rank passes a barrier before the checkpoint counts as committed. At start rank 0
// loads the newest checkpoint whose checksum verifies and broadcasts it. Nothing committed is ever overwritten. Two
// layouts:
//   files  ckpt-<step>.bin, written as temporary + fsync + rename + fsync of the directory (a program with its own
//          layout: the launcher learns of its commits only from the heartbeats)
//   dirs   tenax's commit protocol (docs/checkpoint-format.md): step_<N>.tmp/params.bin, then manifest.json, fsyncs,
//          rename to step_<N>, fsync of the directory, then `latest` replaced; the launcher sees these commits itself
//
//   deterministic_worker --steps N [--checkpoint-every K] [--step-ms MS] [--params P] [--checkpoint-layout files|dirs]
//                        [--crash-at-step S --crash-rank R]     abort() there on every attempt
//                        [--crash-step-growth G]                ... at step S + G x (attempt - 1) instead
//                        [--hang-at-step S --hang-rank R]       first attempt: never finish step S (no collective)
//                        [--slow-at-step S --slow-step-ms MS]   first attempt: step S takes MS on every rank
//                        [--say-at-step S --say TEXT]           first attempt: rank 0 prints the line TEXT at step S
//                        [--die-in-emergency-checkpoint R]      rank R kills itself (SIGKILL) in the middle of the
//                                                               emergency checkpoint (rank 0: after writing the data,
//                                                               before the manifest or rename; others: before the
//                                                               barrier that commits it)
//                        [--linger-after-preemption 1]          after the exit record 75, every rank stays alive
//                                                               (pause(), signals recorded) as a rank not yet
//                                                               exited while mpirun waits after an exit 75 does
// Prints "final parameters checksum: <16 hex digits>" (rank 0) and exits 0; 75 after a preemption checkpoint;
// 64 for a bad argument.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/runtime.hpp"
#include "tenax/worker.hpp"

namespace {

using tenax::DType;
using Clock = std::chrono::steady_clock;

struct Config {
  long long steps = 0;
  long long checkpoint_every = 5;
  long long step_ms = 20;
  long long params = 64;
  long long crash_at_step = -1;
  long long crash_rank = 0;
  long long crash_step_growth = 0;  // the crash step moves this far with every attempt
  bool checkpoint_dirs = false;     // --checkpoint-layout dirs
  long long hang_at_step = -1;      // first attempt only: the rank stops issuing collectives but stays alive
  long long hang_rank = 0;
  long long slow_at_step = -1;  // first attempt only: this step's compute takes slow_step_ms
  long long slow_step_ms = 0;
  long long die_in_emergency_checkpoint = -1;  // this rank is killed while the emergency checkpoint is written
  long long say_at_step = -1;                  // first attempt only: rank 0 prints `say` as a line of its own
  std::string say;
  bool linger_after_preemption = false;
};

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    if (i + 1 >= argc) throw tenax::UsageError("option " + name + " needs a value");
    std::string value = argv[++i];
    if (name == "--steps") {
      c.steps = tenax::env::parse_int("--steps", value, 1, 100000000);
    } else if (name == "--checkpoint-every") {
      c.checkpoint_every = tenax::env::parse_int("--checkpoint-every", value, 1, 100000000);
    } else if (name == "--step-ms") {
      c.step_ms = tenax::env::parse_int("--step-ms", value, 0, 100000);
    } else if (name == "--params") {
      c.params = tenax::env::parse_int("--params", value, 1, 100000000);
    } else if (name == "--crash-at-step") {
      c.crash_at_step = tenax::env::parse_int("--crash-at-step", value, 1, 100000000);
    } else if (name == "--hang-at-step") {
      c.hang_at_step = tenax::env::parse_int("--hang-at-step", value, 1, 100000000);
    } else if (name == "--slow-at-step") {
      c.slow_at_step = tenax::env::parse_int("--slow-at-step", value, 1, 100000000);
    } else if (name == "--slow-step-ms") {
      c.slow_step_ms = tenax::env::parse_int("--slow-step-ms", value, 0, 100000);
    } else if (name == "--say-at-step") {
      c.say_at_step = tenax::env::parse_int("--say-at-step", value, 1, 100000000);
    } else if (name == "--say") {
      c.say = value;
    } else if (name == "--die-in-emergency-checkpoint") {
      c.die_in_emergency_checkpoint = tenax::env::parse_int("--die-in-emergency-checkpoint", value, 0, 100000);
    } else if (name == "--hang-rank") {
      c.hang_rank = tenax::env::parse_int("--hang-rank", value, 0, 100000);
    } else if (name == "--crash-rank") {
      c.crash_rank = tenax::env::parse_int("--crash-rank", value, 0, 100000);
    } else if (name == "--crash-step-growth") {
      c.crash_step_growth = tenax::env::parse_int("--crash-step-growth", value, 0, 100000000);
    } else if (name == "--linger-after-preemption") {
      c.linger_after_preemption = tenax::env::parse_int("--linger-after-preemption", value, 0, 1) == 1;
    } else if (name == "--checkpoint-layout") {
      if (value != "files" && value != "dirs") {
        throw tenax::UsageError("--checkpoint-layout " + value + ": expected files or dirs");
      }
      c.checkpoint_dirs = value == "dirs";
    } else {
      throw tenax::UsageError("unknown option '" + name + "'");
    }
  }
  if (c.steps == 0) throw tenax::UsageError("--steps is required");
  return c;
}

std::uint64_t fnv1a(const void* data, std::size_t size, std::uint64_t hash = 1469598103934665603ull) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

constexpr char kMagic[8] = {'T', 'N', 'X', 'T', 'E', 'S', 'T', '1'};

std::string checkpoint_name(long long step) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%010lld.bin", step);
  return name;
}

std::vector<unsigned char> encode(long long step, const std::vector<double>& params) {
  std::vector<unsigned char> bytes(sizeof kMagic + 16 + params.size() * sizeof(double) + 8);
  std::memcpy(bytes.data(), kMagic, sizeof kMagic);
  std::uint64_t header[2] = {static_cast<std::uint64_t>(step), params.size()};
  std::memcpy(bytes.data() + sizeof kMagic, header, sizeof header);
  std::memcpy(bytes.data() + sizeof kMagic + sizeof header, params.data(), params.size() * sizeof(double));
  std::uint64_t sum = fnv1a(bytes.data(), bytes.size() - 8);
  std::memcpy(bytes.data() + bytes.size() - 8, &sum, sizeof sum);
  return bytes;
}

void write_file_synced(const std::string& path, const std::string_view bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw tenax::IoError("creating " + path + ": " + std::strerror(errno));
  bool ok = write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) && fsync(fd) == 0;
  ok = (close(fd) == 0) && ok;
  if (!ok) throw tenax::IoError("writing " + path + ": " + std::strerror(errno));
}

void fsync_dir(const std::string& dir) {
  int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || fsync(dir_fd) != 0) throw tenax::IoError("fsync of " + dir + ": " + std::strerror(errno));
  close(dir_fd);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0) {
    throw tenax::IoError("renaming " + from + " to " + to + ": " + std::strerror(errno));
  }
}

std::string_view as_text(const std::vector<unsigned char>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// `die_midway`: the process is killed after the data is written and before the checkpoint is committed, as by an OOM
// kill or a node failure in the middle of a checkpoint.
void die_if(bool die_midway) {
  if (die_midway) raise(SIGKILL);
}

void write_checkpoint_file(const std::string& dir, long long step, const std::vector<double>& params, bool die_midway) {
  const std::string final_path = dir + "/" + checkpoint_name(step);
  write_file_synced(final_path + ".tmp", as_text(encode(step, params)));
  die_if(die_midway);
  rename_or_throw(final_path + ".tmp", final_path);
  fsync_dir(dir);
}

std::string step_dir_name(long long step) {
  return "step_" + std::to_string(step);
}

void write_checkpoint_dir(const std::string& dir, long long step, const std::vector<double>& params, bool die_midway) {
  const std::string final_dir = dir + "/" + step_dir_name(step);
  if (access((final_dir + "/manifest.json").c_str(), F_OK) == 0) return;  // committed before: the same parameters
  const std::string tmp = final_dir + ".tmp";
  std::filesystem::remove_all(tmp);  // a write cut short by a crash
  std::filesystem::create_directories(tmp);
  write_file_synced(tmp + "/params.bin", as_text(encode(step, params)));
  die_if(die_midway);
  // The manifest last: a directory holding it is complete.
  write_file_synced(tmp + "/manifest.json",
                    "{\"format\": \"tenax-deterministic-worker\", \"step\": " + std::to_string(step) + "}\n");
  fsync_dir(tmp);
  rename_or_throw(tmp, final_dir);
  fsync_dir(dir);
  write_file_synced(dir + "/latest.tmp", step_dir_name(step) + "\n");
  rename_or_throw(dir + "/latest.tmp", dir + "/latest");
  fsync_dir(dir);
}

// Parameters from one checkpoint's bytes when its checksum verifies; false for damaged or partial data.
bool decode(const std::vector<unsigned char>& bytes, std::size_t count, long long& step, std::vector<double>& params) {
  const std::size_t expected = sizeof kMagic + 16 + count * sizeof(double) + 8;
  if (bytes.size() != expected || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return false;
  std::uint64_t sum;
  std::memcpy(&sum, bytes.data() + expected - 8, 8);
  if (sum != fnv1a(bytes.data(), expected - 8)) return false;
  std::uint64_t header[2];
  std::memcpy(header, bytes.data() + sizeof kMagic, sizeof header);
  if (header[1] != count) return false;
  step = static_cast<long long>(header[0]);
  params.resize(count);
  std::memcpy(params.data(), bytes.data() + sizeof kMagic + sizeof header, count * sizeof(double));
  return true;
}

std::vector<unsigned char> read_bytes(const std::string& path, std::size_t limit) {
  std::vector<unsigned char> bytes(limit);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  ssize_t n = read(fd, bytes.data(), bytes.size());
  close(fd);
  bytes.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return bytes;
}

// The newest checkpoint whose checksum verifies; damaged or partial ones are skipped, never trusted.
bool read_newest(const std::string& dir, bool dirs, std::size_t count, long long& step, std::vector<double>& params) {
  std::vector<std::pair<long long, std::string>> found;  // step, path of the parameters
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (!dirs && name.rfind("ckpt-", 0) == 0 && name.size() > 9 && name.substr(name.size() - 4) == ".bin" &&
          name.find_first_not_of("0123456789", 5) == name.size() - 4) {
        found.emplace_back(std::stoll(name.substr(5, name.size() - 9)), dir + "/" + name);
      } else if (dirs && name.rfind("step_", 0) == 0 && name.size() > 5 &&
                 name.find_first_not_of("0123456789", 5) == std::string::npos &&
                 access((dir + "/" + name + "/manifest.json").c_str(), F_OK) == 0) {
        found.emplace_back(std::stoll(name.substr(5)), dir + "/" + name + "/params.bin");
      }
    }
    closedir(d);
  }
  std::sort(found.rbegin(), found.rend());
  const std::size_t expected = sizeof kMagic + 16 + count * sizeof(double) + 8;
  for (const auto& [file_step, path] : found) {
    if (decode(read_bytes(path, expected + 1), count, step, params)) return true;
  }
  return false;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int train(tenax::Runtime& runtime, tenax::worker::Worker& worker, const Config& c) {
  tenax::Communicator& world = runtime.world();
  const int rank = world.rank();
  const std::string dir = worker.info().checkpoint_dir;
  if (dir.empty()) throw tenax::UsageError("TENAX_CHECKPOINT_DIR is not set: run under tenax-launch --checkpoint-dir");

  const auto load_start = Clock::now();
  std::vector<double> params(static_cast<std::size_t>(c.params));
  for (std::size_t i = 0; i < params.size(); ++i)
    params[i] = static_cast<double>(i % 7) * 0.125 - 0.25;
  long long step = 0;
  if (rank == 0) read_newest(dir, c.checkpoint_dirs, params.size(), step, params);
  world.broadcast(&step, 1, DType::I64, 0);
  world.broadcast(params.data(), params.size(), DType::F64, 0);
  worker.resumed_from(step, seconds_since(load_start));
  if (rank == 0) std::printf("rank 0: attempt %d resumed at step %lld\n", worker.info().attempt, step);

  std::vector<double> gradient(params.size());
  while (step < c.steps) {
    if (c.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(c.step_ms));  // the "compute"
    if (step + 1 == c.say_at_step && rank == 0 && worker.info().attempt == 1) {
      std::printf("%s\n", c.say.c_str());
      std::fflush(stdout);
    }
    if (step + 1 == c.slow_at_step && worker.info().attempt == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(c.slow_step_ms));  // a long step: no collective meanwhile
    }
    const long long crash_step = c.crash_at_step + c.crash_step_growth * (worker.info().attempt - 1);
    if (c.crash_at_step > 0 && step + 1 == crash_step && rank == c.crash_rank) std::abort();
    if (step + 1 == c.hang_at_step && rank == c.hang_rank && worker.info().attempt == 1) {
      // A livelock outside any collective: the process (and its heartbeat thread) lives, the step never ends.
      while (true)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      gradient[i] = params[i] * 1e-3 * (rank + 1) +
                    static_cast<double>((i * 31 + static_cast<std::size_t>(step) * 17 + rank * 13) % 101) * 1e-4;
    }
    world.all_reduce(gradient.data(), gradient.data(), gradient.size(), DType::F64, tenax::ReduceOp::Sum);
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i] -= 0.01 * gradient[i] / world.size();
    ++step;
    worker.heartbeat(step);

    // Every rank must stop at the same step: agree on "anyone was asked to stop".
    int stop = worker.preemption_requested() ? 1 : 0;
    world.all_reduce(&stop, &stop, 1, DType::I32, tenax::ReduceOp::Max);
    const bool periodic = step % c.checkpoint_every == 0 || step == c.steps;
    if (periodic || stop) {
      const auto stall_start = Clock::now();
      const bool die_midway = stop && rank == c.die_in_emergency_checkpoint;
      if (rank == 0) {
        if (c.checkpoint_dirs) {
          write_checkpoint_dir(dir, step, params, die_midway);
        } else {
          write_checkpoint_file(dir, step, params, die_midway);
        }
      }
      die_if(die_midway);
      world.barrier();  // committed only when every rank knows rank 0's write is durable
      worker.checkpoint_committed(step, seconds_since(stall_start));
    }
    if (stop) {
      if (rank == 0) std::printf("rank 0: preempted, emergency checkpoint at step %lld\n", step);
      std::fflush(stdout);
      return tenax::kExitPreempted;
    }
  }
  if (rank == 0) {
    std::printf("final parameters checksum: %016" PRIx64 "\n", fnv1a(params.data(), params.size() * sizeof(double)));
    std::fflush(stdout);
  }
  return tenax::kExitSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  int code = tenax::kExitCrash;
  try {
    tenax::Runtime runtime(argc, argv);
    tenax::worker::Worker worker(runtime.rank());
    bool linger = false;
    try {
      const Config config = parse(argc, argv);
      linger = config.linger_after_preemption;
      code = train(runtime, worker, config);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "deterministic_worker rank %d: %s\n", runtime.rank(), error.what());
      code = tenax::worker::exit_code_for(error);
    }
    worker.finish(code);
    while (linger && code == tenax::kExitPreempted)
      pause();  // until SIGKILL
  } catch (const std::exception& error) {
    std::fprintf(stderr, "deterministic_worker: %s\n", error.what());
    return tenax::worker::exit_code_for(error);
  }
  return code;
}
