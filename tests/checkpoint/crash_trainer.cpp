// A training-like program for the interrupted-save test, run under mpirun by checkpoint_kill_test:
//   crash_trainer save-forever DIR   saves steps 1, 2, 3, ... (each step's values differ) until killed; writes
//                                    DIR/../pids/rank_<r> first so the test can SIGKILL the ranks mid-write
//   crash_trainer verify DIR         loads the newest valid checkpoint, checks every element against its step's values,
//                                    prints "loaded step N" and exits 0; exits 1 on any mismatch or failure
//   crash_trainer save-on-full-disk DIR FREE
//                                    fills DIR's file system but FREE bytes (after the checkpointer's start-up check),
//                                    saves step 1 and waits for it: the I/O error ends the program (tenax::run_main)
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tenax/runtime.hpp"
#include "test_dirs.hpp"
#include "test_model.hpp"

namespace {

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  tenax::Communicator& world = runtime.world();
  if (argc != 3 && argc != 4)
    throw tenax::UsageError("usage: crash_trainer save-forever|verify DIR | save-on-full-disk DIR FREE");
  const std::string mode = argv[1], dir = argv[2];
  const tenax::ParallelLayout layout{1, 1, world.size()};
  // 32 MiB per rank: large enough that a kill lands inside a write most of the time.
  tenax::test::TestModel model =
      tenax::test::make_model(layout, world.rank(), mode == "save-on-full-disk" ? 0 : 8u << 20);
  tenax::CheckpointOptions options;
  options.dir = dir;
  options.keep = 2;
  options.layout = layout;
  tenax::Checkpointer ckpt(world, options, model.shards);
  if (mode == "save-forever") {
    std::ofstream(dir + "/../pids/rank_" + std::to_string(world.rank())) << ::getpid() << "\n";
    for (std::uint64_t step = 1;; ++step) {
      tenax::test::fill(model, step);
      ckpt.save(step);
      while (!ckpt.progress())
        ::usleep(1000);
    }
  }
  if (mode == "save-on-full-disk") {
    world.barrier();
    if (argc != 4) throw tenax::UsageError("save-on-full-disk needs the bytes to leave free");
    if (world.rank() == 0) tenax::test::fill_file_system(dir + "/filler", std::stoull(argv[3]));
    world.barrier();
    tenax::test::fill(model, 1);
    ckpt.save(1);
    ckpt.wait();
    return 0;
  }
  if (mode == "verify") {
    tenax::test::scramble(model);
    tenax::LoadResult r = ckpt.load();
    if (!r.loaded) {
      std::fprintf(stderr, "no checkpoint loaded\n");
      return 1;
    }
    std::string first;
    std::uint64_t bad = tenax::test::mismatches(model, r.step, &first);
    if (bad != 0) {
      std::fprintf(stderr, "rank %d: step %llu: %llu wrong elements, first %s\n", world.rank(),
                   static_cast<unsigned long long>(r.step), static_cast<unsigned long long>(bad), first.c_str());
      return 1;
    }
    if (world.rank() == 0) std::printf("loaded step %llu\n", static_cast<unsigned long long>(r.step));
    return 0;
  }
  throw tenax::UsageError("unknown mode '" + mode + "'");
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
