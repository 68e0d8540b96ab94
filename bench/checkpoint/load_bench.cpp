// tenax-bench-ckpt-load: what load() costs per block, the same bytes split into more and more tensors.
//
//   mpirun -n 1 tenax-bench-ckpt-load --blocks 4,40,400,4000 --bytes 8M --reps 50
//
// Per block count: one checkpoint of --bytes per rank in that many f32 tensors, saved once, then load()ed --reps times
// with the file in the page cache (median; the slowest rank). Every block costs a dataset open, five attribute reads
// checked against the manifest, a read and a CRC32C check. Reference, same run: read(2) of the rank's own file, hot,
// the floor for reading those bytes at all. "per block" is (load - read) / blocks: the cost a model pays per tensor on
// a restart.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cxxopts.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "tenax/checkpoint.hpp"
#include "tenax/runtime.hpp"

namespace {

using tenax::bench::Clock;
using tenax::bench::max_over_ranks;
using tenax::bench::median;
using tenax::bench::seconds_since;

double read_whole(const std::string& path, std::vector<char>& into) {
  auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw tenax::IoError("bench: open " + path);
  into.resize(static_cast<std::size_t>(std::filesystem::file_size(path)));
  for (std::size_t done = 0; done < into.size();) {
    const ssize_t n = ::read(fd, into.data() + done, into.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return seconds_since(t0);
}

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  tenax::Communicator& world = runtime.world();
  cxxopts::Options cli("tenax-bench-ckpt-load", "load() per block against read(2) of the same file");
  cli.add_options()("blocks", "Tensors per rank the bytes are split into, comma-separated",
                    cxxopts::value<std::string>()->default_value("4,40,400,4000"))(
      "bytes", "Bytes per rank (K/M/G suffixes)", cxxopts::value<std::string>()->default_value("8M"))(
      "reps", "Loads per block count (median reported)", cxxopts::value<int>()->default_value("50"))(
      "dir", "Directory to save into", cxxopts::value<std::string>()->default_value("/tmp/tenax-bench-ckpt-load"))(
      "h,help", "Show this help");
  auto args = cli.parse(argc, argv);
  if (args.count("help")) {
    if (world.rank() == 0) std::printf("%s\n", cli.help().c_str());
    return 0;
  }
  const std::uint64_t bytes = tenax::bench::parse_sizes(args["bytes"].as<std::string>()).at(0);
  const int reps = std::max(1, args["reps"].as<int>());
  const std::string root = args["dir"].as<std::string>();
  const int rank = world.rank(), size = world.size();
  if (rank == 0) {
    std::printf("# tenax-bench-ckpt-load: %d ranks, %s per rank, %d loads per row (median), dir %s (%s)\n", size,
                args["bytes"].as<std::string>().c_str(), reps, root.c_str(),
                tenax::bench::file_system_of(root).c_str());
    std::printf("%s\n", tenax::bench::machine_line().c_str());
    std::printf("%8s | %9s %9s | %9s\n", "blocks", "load ms", "read ms", "per block us");
  }
  for (std::uint64_t blocks : tenax::bench::parse_sizes(args["blocks"].as<std::string>())) {
    const std::uint64_t per = std::max<std::uint64_t>(1, bytes / 4 / blocks);
    std::vector<std::vector<float>> data(blocks, std::vector<float>(per, 1.5f));
    std::vector<tenax::TensorShard> shards;
    for (std::uint64_t t = 0; t < blocks; ++t)
      shards.push_back(tenax::TensorShard::flat_range("t" + std::to_string(t), tenax::DType::F32, per * size,
                                                      per * rank, per, data[t].data()));
    const std::string dir = root + "/" + std::to_string(blocks);
    tenax::CheckpointOptions options;
    options.dir = dir;
    options.layout = tenax::ParallelLayout{1, 1, size};
    options.direct_io = false;  // the file stays in the page cache: the load's own cost, not the disk's
    std::vector<double> load, read;
    {
      tenax::Checkpointer ckpt(world, options, shards);
      ckpt.save(1);
      ckpt.wait();
      char name[32];
      std::snprintf(name, sizeof name, "/step_1/rank_%05d.h5", rank);
      std::vector<char> scratch;
      for (int r = 0; r < reps; ++r) {
        world.barrier();
        auto t0 = Clock::now();
        ckpt.load();
        load.push_back(max_over_ranks(world, seconds_since(t0)));
        world.barrier();
        read.push_back(max_over_ranks(world, read_whole(dir + name, scratch)));
      }
    }
    const double load_s = median(load), read_s = median(read);
    if (rank == 0)
      std::printf("%8llu | %9.2f %9.2f | %9.1f\n", static_cast<unsigned long long>(blocks), load_s * 1e3, read_s * 1e3,
                  (load_s - read_s) / static_cast<double>(blocks) * 1e6);
    world.barrier();
    if (rank == 0) std::filesystem::remove_all(dir);
  }
  if (rank == 0) std::printf("# load average at the end: %s\n", tenax::bench::load_average().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
