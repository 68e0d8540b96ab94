// TENAX_PROFILE_OPS=A:B: the engine's op profile (tenax/op_profile.hpp) of steps A to B-1, on the context the model
// computes on. Each rank writes its own table to <run dir>/metrics/op-profile-steps<A>-<B>-rank<R>-attempt<N>.txt;
// rank 0 also prints its table on stderr (stdout carries only what reproduces bit for bit).
#include <cstdio>
#include <filesystem>

#include "core/file_system.hpp"
#include "engine/engine_state.hpp"
#include "tenax/env.hpp"
#include "tenax/log.hpp"

namespace tenax {

void Engine::Impl::op_profile_step_begins() {
  if (step == op_profile_first) ctx->begin_op_profile();
}

void Engine::Impl::op_profile_step_ends() {
  if (step != op_profile_end - 1 || ctx->op_profiler() == nullptr) return;
  const OpProfile profile = ctx->end_op_profile();
  const std::string table = format_op_profile(profile, op_profile_end - op_profile_first);
  const std::string where = "steps " + std::to_string(op_profile_first) + "-" + std::to_string(op_profile_end - 1) +
                            ", rank " + std::to_string(world.rank()) + " (" + ctx->describe() + ")";
  if (world.rank() == 0) {
    std::fprintf(stderr, "# tenax op profile of %s\n%s", where.c_str(), table.c_str());
    std::fflush(stderr);
  }
  const std::string run_dir = config.run_dir.empty() ? env::get_string("TENAX_RUN_DIR") : config.run_dir;
  if (run_dir.empty()) return;
  // The attempt keeps a restarted run's profile of the same steps from replacing an earlier attempt's.
  const long long attempt = env::get_int("TENAX_ATTEMPT");
  const std::filesystem::path dir = std::filesystem::path(run_dir) / "metrics";
  const std::filesystem::path path =
      dir / ("op-profile-steps" + std::to_string(op_profile_first) + "-" + std::to_string(op_profile_end) + "-rank" +
             std::to_string(world.rank()) + "-attempt" + std::to_string(attempt) + ".txt");
  // Replaced atomically like every metrics file; one that cannot be written is reported and training goes on.
  try {
    fs::make_dirs(dir.string());
    fs::replace_file_atomically(path.string(), "# tenax op profile of " + where + "\n" + table, fs::Durability::None);
  } catch (const std::exception& e) {
    TENAX_LOG(Warn, "metrics") << "could not write the op profile: " << e.what() << "; it went to rank 0's stderr only";
  }
}

}  // namespace tenax
