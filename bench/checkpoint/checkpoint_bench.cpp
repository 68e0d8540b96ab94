// tenax-bench-checkpoint: what a checkpoint costs the training loop, next to references measured in the same run.
//
//   mpirun -n 2 tenax-bench-checkpoint --sizes 64M,256M,1G --dir /tmp/tenax-bench-ckpt
//
// Per shard size (bytes per rank, in 4 tensors), median of --reps, once with the default direct I/O and once with
// CheckpointOptions::direct_io off (buffered writes: the reference for what direct I/O buys):
//   save     the blocking time of save() (copy into staging + CRC32C, on --staging-threads threads)  vs  memcpy of the
//            same bytes (pre-touched, one thread: what a program copying its state itself would do)
//   write    background time from save() returning to wait() returning (HDF5 write, fsync, agreement, manifest, VDS,
//            rename, latest, retention) as aggregate GiB/s  vs  write(2)+fsync(2) of the same bytes into a new file
//            per rank, deleting the file --keep generations old as retention deletes the oldest checkpoint
//   load     load() (manifest, hyperslab reads, CRC32C check), page cache hot and, as root, cold  vs  read(2)
//   slowdown mean time of a compute step (single-thread sgemm, --gemm 1024: tens of ms, like a real step; progress()
//            each step) while a checkpoint is in flight, relative to steps just before each save, --reps rounds  vs
//            the same while a plain thread writes the same bytes with the row's store path (O_DIRECT or buffered) and
//            fsyncs them: the floor any checkpointer writing these bytes during training sets on this machine. "lost"
//            is the compute time a checkpoint costs in all (the steps' excess over the baseline, per checkpoint).
// Targets (direct rows): save <= 1.0x memcpy, write >= 0.8x raw, slowdown <= 5%. --check makes the exit code non-zero
// on a miss.
#include <cblas.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cxxopts.hpp>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_timing.hpp"
#include "checkpoint/crc32c.hpp"
#include "checkpoint/staging_pass.hpp"
#include "tenax/checkpoint.hpp"
#include "tenax/runtime.hpp"

namespace {

using tenax::bench::Buffer;
using tenax::bench::Clock;
using tenax::bench::max_over_ranks;
using tenax::bench::median;
using tenax::bench::seconds_since;

std::string size_name(std::uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + " GiB";
  return std::to_string(b >> 20) + " MiB";
}

// The references' writer: write(2) in 8 MiB requests (O_DIRECT for the 4 KiB-aligned bulk where `direct` and the file
// system takes it, as the checkpoint's store path does; buffered otherwise) into a new file, then fsync.
void raw_write_fsync(const std::string& path, const std::uint8_t* data, std::size_t n, bool direct) {
  int fd = direct ? ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644) : -1;
  std::size_t done = 0;
  if (fd >= 0) {
    const std::size_t aligned = n / 4096 * 4096;
    for (; done < aligned;) {
      ssize_t w = ::write(fd, data + done, std::min<std::size_t>(aligned - done, 8u << 20));
      if (w <= 0) throw tenax::IoError("bench: write " + path + ": " + std::strerror(errno));
      done += static_cast<std::size_t>(w);
    }
    ::close(fd);
  }
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | (done == 0 ? O_TRUNC : 0), 0644);
  if (fd < 0) throw tenax::IoError("bench: open " + path + ": " + std::strerror(errno));
  while (done < n) {
    ssize_t w = ::pwrite(fd, data + done, std::min<std::size_t>(n - done, 8u << 20), static_cast<off_t>(done));
    if (w <= 0) throw tenax::IoError("bench: write " + path + ": " + std::strerror(errno));
    done += static_cast<std::size_t>(w);
  }
  ::fsync(fd);
  ::close(fd);
}

double raw_read(const std::string& path, std::uint8_t* data, std::size_t n) {
  auto t0 = Clock::now();
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw tenax::IoError("bench: open " + path + ": " + std::strerror(errno));
  for (std::size_t done = 0; done < n;) {
    ssize_t r = ::read(fd, data + done, std::min<std::size_t>(n - done, 1u << 30));
    if (r <= 0) break;
    done += static_cast<std::size_t>(r);
  }
  ::close(fd);
  return seconds_since(t0);
}

bool drop_page_cache(tenax::Communicator& world) {
  int ok = 1;
  if (world.rank() == 0) {
    ::sync();
    std::ofstream f("/proc/sys/vm/drop_caches");
    f << "1\n";
    f.flush();
    ok = f.good() ? 1 : 0;
  }
  world.broadcast(&ok, 1, tenax::DType::I32, 0);
  world.barrier();
  return ok == 1;
}

struct Compute {
  int n;
  std::vector<float> a, b, c;
  explicit Compute(int size) : n(size), a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f) {}
  void step() {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  }
};

struct Row {
  std::uint64_t bytes;
  double memcpy_s, save_s, write_s, raw_write_s, load_hot_s, read_hot_s, load_cold_s, read_cold_s, step_base_s,
      step_during_s, ref_base_s, ref_during_s;
  int steps_during, ref_steps_during;
  int staging_threads;
  double direct_share;  // of the bytes written, those that went around the page cache (the store path taken)
};

Row measure(tenax::Communicator& world, const std::string& root, std::uint64_t bytes, int tensors, int reps, int keep,
            bool direct_io, int staging_threads, const std::string& staging_kernel, Compute& compute) {
  const int rank = world.rank(), size = world.size();
  const std::string dir = root + "/" + std::to_string(bytes >> 20) + "M";
  const std::uint64_t elems = bytes / 4, per_tensor = elems / static_cast<std::uint64_t>(tensors);
  const std::uint64_t total = per_tensor * static_cast<std::uint64_t>(tensors) * 4;
  Buffer model(total), reference(total);
  std::vector<tenax::TensorShard> shards;
  for (int t = 0; t < tensors; ++t)
    shards.push_back(tenax::TensorShard::flat_range("bulk" + std::to_string(t), tenax::DType::F32, per_tensor * size,
                                                    per_tensor * rank, per_tensor, model.data + t * per_tensor * 4));
  tenax::CheckpointOptions options;
  options.dir = dir;
  options.keep = keep;
  options.layout = tenax::ParallelLayout{1, 1, size};
  options.direct_io = direct_io;
  options.staging_threads = staging_threads;
  options.staging_kernel = staging_kernel;
  Row row{};
  row.bytes = total;
  std::vector<double> copy, save, write, raw, load_hot, read_hot;
  {
    tenax::Checkpointer ckpt(world, options, shards);
    row.staging_threads = ckpt.staging_threads();
    for (int r = 0; r < reps; ++r) {
      world.barrier();
      auto t0 = Clock::now();
      std::memcpy(reference.data, model.data, row.bytes);
      copy.push_back(max_over_ranks(world, seconds_since(t0)));

      model.data[r] ^= 1;  // each checkpoint differs
      // The reference rotates its files like retention does: the file `keep` generations old goes in the timed part.
      auto raw_path = [&](int gen) { return dir + "/raw_" + std::to_string(gen) + "_rank_" + std::to_string(rank); };
      auto timed_raw_write = [&] {
        world.barrier();
        auto start = Clock::now();
        raw_write_fsync(raw_path(r), model.data, row.bytes, false);
        if (r >= keep) ::unlink(raw_path(r - keep).c_str());
        raw.push_back(max_over_ranks(world, seconds_since(start)));
      };
      // Alternate which of the two goes first: the disk's state (writeback of the other's data, discards) drifts.
      if (r % 2 == 1) timed_raw_write();
      world.barrier();
      t0 = Clock::now();
      ckpt.save(static_cast<std::uint64_t>(r + 1));
      double blocking = seconds_since(t0);
      auto t1 = Clock::now();
      ckpt.wait();
      write.push_back(max_over_ranks(world, seconds_since(t1)));
      save.push_back(max_over_ranks(world, blocking));
      if (r % 2 == 0) timed_raw_write();

      world.barrier();
      t0 = Clock::now();
      ckpt.load();
      load_hot.push_back(max_over_ranks(world, seconds_since(t0)));
      char name[32];
      std::snprintf(name, sizeof name, "/rank_%05d.h5", rank);
      const std::string own = dir + "/step_" + std::to_string(r + 1) + name;
      world.barrier();
      read_hot.push_back(max_over_ranks(world, raw_read(own, reference.data, row.bytes)));
    }
    row.memcpy_s = median(copy);
    row.save_s = median(save);
    row.write_s = median(write);
    row.raw_write_s = median(raw);
    row.load_hot_s = median(load_hot);
    row.read_hot_s = median(read_hot);
    row.load_cold_s = row.read_cold_s = -1;
    if (drop_page_cache(world)) {
      auto t0 = Clock::now();
      ckpt.load();
      row.load_cold_s = max_over_ranks(world, seconds_since(t0));
      drop_page_cache(world);
      char name[32];
      std::snprintf(name, sizeof name, "/rank_%05d.h5", rank);
      row.read_cold_s =
          max_over_ranks(world, raw_read(dir + "/step_" + std::to_string(reps) + name, reference.data, row.bytes));
    }

    // Compute steps with no checkpoint in flight and while one is written (progress() each step in both), `reps`
    // rounds; a round's baseline steps run just before its save, after a warm-up, so drift hits both sides alike.
    std::vector<double> base, during;
    for (int s = 0; s < 3; ++s)
      compute.step();
    for (int r = 0; r < reps; ++r) {
      for (int s = 0; s < 10; ++s) {
        auto t0 = Clock::now();
        compute.step();
        ckpt.progress();
        base.push_back(seconds_since(t0));
      }
      world.barrier();
      ckpt.save(static_cast<std::uint64_t>(reps + 1 + r));
      bool busy = true;
      while (busy) {
        auto t0 = Clock::now();
        compute.step();
        busy = !ckpt.progress();
        during.push_back(seconds_since(t0));
      }
      ckpt.wait();
    }
    auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v)
        s += x;
      return s / static_cast<double>(v.size());
    };
    row.step_base_s = max_over_ranks(world, mean(base));
    row.step_during_s = max_over_ranks(world, mean(during));
    row.steps_during = static_cast<int>(during.size());

    // The reference: the same rounds while a plain thread writes the same bytes and fsyncs them (no staging, no
    // HDF5, no commit), each round's file replacing the last as retention would.
    base.clear();
    during.clear();
    for (int r = 0; r < reps; ++r) {
      for (int s = 0; s < 10; ++s) {
        auto t0 = Clock::now();
        compute.step();
        base.push_back(seconds_since(t0));
      }
      world.barrier();
      const std::string path = dir + "/interference_rank_" + std::to_string(rank);
      std::atomic<bool> written{false};
      std::exception_ptr failed;
      std::thread writer([&] {
        try {
          raw_write_fsync(path, model.data, row.bytes, direct_io);
        } catch (...) {
          failed = std::current_exception();
        }
        written = true;
      });
      while (!written) {
        auto t0 = Clock::now();
        compute.step();
        during.push_back(seconds_since(t0));
      }
      writer.join();
      if (failed) std::rethrow_exception(failed);
    }
    ::unlink((dir + "/interference_rank_" + std::to_string(rank)).c_str());
    row.ref_base_s = max_over_ranks(world, mean(base));
    row.ref_during_s = max_over_ranks(world, mean(during));
    row.ref_steps_during = static_cast<int>(during.size());
    // The store path taken, over every rank's files: O_DIRECT where requested and the file system allowed it.
    const tenax::Checkpointer::WriteTotals totals = ckpt.write_totals();
    double written[2] = {static_cast<double>(totals.bytes), static_cast<double>(totals.direct_bytes)};
    world.all_reduce(written, written, 2, tenax::DType::F64, tenax::ReduceOp::Sum);
    row.direct_share = written[0] > 0 ? written[1] / written[0] : 0;
  }
  world.barrier();
  if (rank == 0) std::filesystem::remove_all(dir);
  return row;
}

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  tenax::Communicator& world = runtime.world();
  cxxopts::Options cli("tenax-bench-checkpoint", "Checkpoint cost against memcpy, write+fsync and read references");
  cli.add_options()("sizes", "Bytes per rank (K/M/G suffixes), comma-separated",
                    cxxopts::value<std::string>()->default_value("64M,256M,1G"))(
      "dir", "Directory on the file system to measure",
      cxxopts::value<std::string>()->default_value("/tmp/tenax-bench-ckpt"))(
      "reps", "Repetitions per size (median reported)", cxxopts::value<int>()->default_value("5"))(
      "tensors", "f32 tensors per rank the size is split into (a model has hundreds: per-tensor costs)",
      cxxopts::value<int>()->default_value("4"))(
      "keep", "Checkpoints kept (retention deletes older ones inside the timed commit; raw files rotate alike)",
      cxxopts::value<int>()->default_value("1"))("gemm", "Matrix size of the compute step (single-thread sgemm)",
                                                 cxxopts::value<int>()->default_value("1024"))(
      "staging-threads", "Threads of save()'s copy into staging memory (0: automatic, as TENAX_CKPT_STAGING_THREADS)",
      cxxopts::value<int>()->default_value("0"))(
      "staging-kernel",
      "Copy + CRC32C kernel of that copy, one of those the CPU has (as TENAX_CKPT_STAGING_KERNEL; default: the first)",
      cxxopts::value<std::string>()->default_value(""))("check", "Exit non-zero when a target is missed")(
      "h,help", "Show this help");
  auto args = cli.parse(argc, argv);
  if (args.count("help")) {
    if (world.rank() == 0) std::printf("%s\n", cli.help().c_str());
    return 0;
  }
  const std::vector<std::uint64_t> sizes = tenax::bench::parse_sizes(args["sizes"].as<std::string>());
  const std::string root = args["dir"].as<std::string>();
  const int reps = std::max(1, args["reps"].as<int>());
  const int tensors = std::clamp(args["tensors"].as<int>(), 1, 1 << 20);
  const int staging_threads = std::max(0, args["staging-threads"].as<int>());
  const std::string staging_kernel = args["staging-kernel"].as<std::string>();
  // What save() will use, resolved (and the options checked, on every rank alike) by a checkpointer of the options.
  int pass_threads = 0;
  const tenax::ckpt::Crc32cCopyKernel* kernel = nullptr;
  {
    tenax::CheckpointOptions probe;
    probe.dir = root + "/probe";
    probe.staging_threads = staging_threads;
    probe.staging_kernel = staging_kernel;
    {
      tenax::Checkpointer resolved(world, probe, {});
      pass_threads = resolved.staging_threads();
      kernel = tenax::ckpt::crc32c_find_copy_kernel(resolved.staging_kernel());
    }
    world.barrier();
    if (world.rank() == 0) std::filesystem::remove_all(probe.dir);
  }
  Compute compute(args["gemm"].as<int>());
  if (world.rank() == 0) {
    std::printf("# tenax-bench-checkpoint: %d ranks, dir %s (%s), %d reps (median), %d f32 tensors per rank\n",
                world.size(), root.c_str(), tenax::bench::file_system_of(root).c_str(), reps, tensors);
    std::printf("%s\n", tenax::bench::machine_line().c_str());
    std::printf("# io: the store path asked for, and the share of the bytes written that went around the page cache\n");
    // The staging buffer's blocks are 4 KiB-aligned, so every kernel takes them.
    std::printf("# staging copy + CRC32C kernel: %s (this CPU has: %s)\n", kernel->name,
                tenax::ckpt::crc32c_copy_kernel_names().c_str());
    std::printf("# GiB/s are aggregate over ranks; load/read: page cache hot | cold (cold needs root)\n");
    std::printf("# thr: threads of save()'s copy into staging memory; memcpy: one thread\n");
    std::printf(
        "# slow: steps while a checkpoint is in flight against steps before it; raw: while a plain thread writes\n"
        "#   the same bytes (same store path) and fsyncs; lost ms: compute time lost per checkpoint | per raw write\n");
    std::printf("%10s %13s | %8s %3s %8s %6s | %8s %8s %6s | %13s %13s | %8s %8s %6s %5s %6s %13s\n", "size/rank", "io",
                "memcpy s", "thr", "save s", "ratio", "write", "raw w+fs", "ratio", "load GiB/s", "read GiB/s",
                "step ms", "ckpt ms", "slow", "steps", "raw", "lost ms");
  }
  bool missed = false;
  // The staging pass alone, outside save(): what the fused copy + CRC32C costs against memcpy with nothing else going
  // on (15 alternating repetitions, median), on one thread and on the threads save() uses; every rank runs it at once,
  // as every rank saves at once. It separates its own cost from the in-situ numbers below.
  if (world.rank() == 0)
    std::printf("# staging pass alone (vs memcpy, 15 reps, median; the kernel on 1 thread | staging pass on %d):",
                pass_threads);
  tenax::ckpt::StagingPass pass(pass_threads, *kernel);
  for (std::uint64_t bytes : sizes) {
    Buffer src(bytes), dst_copy(bytes), dst_stage(bytes);
    std::vector<double> plain, fused, spread;
    std::uint32_t crc = 0;
    const std::vector<tenax::ckpt::StagingCopy> whole{{dst_stage.data, src.data, bytes, &crc}};
    for (int r = 0; r < 15; ++r) {
      world.barrier();
      auto t0 = Clock::now();
      std::memcpy(dst_copy.data, src.data, bytes);
      plain.push_back(seconds_since(t0));
      src.data[r] ^= 1;
      world.barrier();
      t0 = Clock::now();
      volatile std::uint32_t single = kernel->copy(dst_stage.data, src.data, bytes, 0);
      (void)single;
      fused.push_back(seconds_since(t0));
      world.barrier();
      t0 = Clock::now();
      pass.run(whole);
      spread.push_back(seconds_since(t0));
    }
    const double ratios[2] = {max_over_ranks(world, median(fused) / median(plain)),
                              max_over_ranks(world, median(spread) / median(plain))};
    if (world.rank() == 0) std::printf("  %s %.2fx | %.2fx", size_name(bytes).c_str(), ratios[0], ratios[1]);
  }
  if (world.rank() == 0) std::printf("\n");
  for (std::uint64_t bytes : sizes)
    for (bool direct : {true, false}) {
      Row r = measure(world, root, bytes, tensors, reps, std::max(1, args["keep"].as<int>()), direct, staging_threads,
                      staging_kernel, compute);
      const double total = static_cast<double>(r.bytes) * world.size() / (1ull << 30);
      const double save_ratio = r.save_s / r.memcpy_s, write_ratio = r.raw_write_s / r.write_s;
      const double slow = r.step_during_s / r.step_base_s - 1.0;
      const double ref_slow = r.ref_during_s / r.ref_base_s - 1.0;
      const double lost_ms = (r.step_during_s - r.step_base_s) * r.steps_during / reps * 1e3;
      const double ref_lost_ms = (r.ref_during_s - r.ref_base_s) * r.ref_steps_during / reps * 1e3;
      // The targets are the default configuration's (direct); the buffered rows show what direct I/O buys.
      if (direct) missed = missed || save_ratio > 1.0 || write_ratio < 0.8 || slow > 0.05;
      if (world.rank() == 0) {
        char cold_load[16] = "-", cold_read[16] = "-";
        if (r.load_cold_s > 0) {
          std::snprintf(cold_load, sizeof cold_load, "%.2f", total / r.load_cold_s);
          std::snprintf(cold_read, sizeof cold_read, "%.2f", total / r.read_cold_s);
        }
        char io[32];
        std::snprintf(io, sizeof io, "%s %3.0f%%", direct ? "direct" : "buffered", r.direct_share * 100);
        std::printf(
            "%10s %13s | %8.4f %3d %8.4f %5.2fx | %8.2f %8.2f %5.2fx | %6.2f|%6s %6.2f|%6s | %8.1f %8.1f %5.1f%% %5d "
            "%5.1f%% %6.1f|%6.1f\n",
            size_name(r.bytes).c_str(), io, r.memcpy_s, r.staging_threads, r.save_s, save_ratio, total / r.write_s,
            total / r.raw_write_s, write_ratio, total / r.load_hot_s, cold_load, total / r.read_hot_s, cold_read,
            r.step_base_s * 1e3, r.step_during_s * 1e3, slow * 100, r.steps_during, ref_slow * 100, lost_ms,
            ref_lost_ms);
        std::fflush(stdout);
      }
    }
  if (world.rank() == 0) {
    std::printf("# load average at the end: %s\n", tenax::bench::load_average().c_str());
    std::printf(
        "# targets (direct rows): save ratio <= 1.0x, write ratio (checkpoint/raw) >= 0.8x, slowdown <= 5%%: %s\n",
        missed ? "MISSED" : "met");
  }
  return args.count("check") && missed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
