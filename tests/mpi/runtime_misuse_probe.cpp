// A program that misuses tenax::Runtime: the job must end by itself with exit 64 (a usage error, never retried) and a
// message naming the mistake, not MPI's abort after MPI_Finalize.
//
//   runtime_misuse_probe second-runtime        a second Runtime while the first lives
//   runtime_misuse_probe runtime-again         a new Runtime after the first one is gone (MPI cannot start twice)
//   runtime_misuse_probe engine-after-runtime  Engine::step() after the Runtime whose world the Engine uses is gone
#include <cstdio>
#include <cstring>
#include <memory>

#include "tenax/engine.hpp"
#include "tenax/error.hpp"
#include "tenax/models.hpp"
#include "tenax/runtime.hpp"
#include "tenax/synthetic_data.hpp"

namespace {

int second_runtime(int argc, char** argv) {
  tenax::Runtime first(argc, argv);
  tenax::Runtime second(argc, argv);
  return 0;
}

int runtime_again(int argc, char** argv) {
  { tenax::Runtime first(argc, argv); }
  tenax::Runtime again(argc, argv);
  return 0;
}

int engine_after_runtime(int argc, char** argv) {
  std::unique_ptr<tenax::Engine> engine;
  {
    tenax::Runtime runtime(argc, argv);
    tenax::EngineConfig config;
    config.global_batch = 4;
    config.micro_batch = 2;
    config.seq_len = 8;
    config.checkpoint.dir = "none";
    engine = std::make_unique<tenax::Engine>(runtime.world(), config,
                                             tenax::models::mlp_lm({.vocab = 16, .hidden = 8, .layers = 1}),
                                             std::make_shared<tenax::MarkovSource>(16, 2, 1));
    engine->step();
  }
  engine->step();  // the Runtime is gone
  std::printf("FAILED: a step ran after the Runtime was gone\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "second-runtime") == 0) return tenax::run_main(second_runtime, argc, argv);
  if (std::strcmp(mode, "runtime-again") == 0) return tenax::run_main(runtime_again, argc, argv);
  if (std::strcmp(mode, "engine-after-runtime") == 0) return tenax::run_main(engine_after_runtime, argc, argv);
  std::fprintf(stderr, "usage: runtime_misuse_probe second-runtime|runtime-again|engine-after-runtime\n");
  return 2;
}
