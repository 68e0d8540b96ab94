// TENAX_PROFILE_OPS=A:B: the engine's op profile (tenax/op_profile.hpp) of steps A to B-1, on the context the model
// computes on. Each rank writes its own table to <run dir>/metrics/op-profile-steps<A>-<B>-rank<R>-attempt<N>.txt;
// rank 0 also prints its table on stderr (stdout carries only what reproduces bit for bit).
#include <cstdio>
#include <filesystem>

#include "core/file_system.hpp"
#include "engine/engine_state.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"
#include "tensor/op_profiler.hpp"

namespace tenax {

void Engine::Impl::op_profile_step_begins() {
  // A range test, not step == first: a run resumed inside the window profiles the rest of it.
  if (op_profile_running || step < op_profile_first || step >= op_profile_end) return;
  ctx->begin_op_profile();
  op_profile_running = true;
  op_profile_started = step;
}

void Engine::Impl::op_profile_discard() noexcept {
  if (op_profile_running) ctx->discard_op_profile();
  op_profile_running = false;
}

void Engine::Impl::op_profile_step_ends() {
  if (!op_profile_running) return;
  // The step's work is done (its loss was read back): its events are complete, and reading them now keeps the pool
  // from filling inside a later step.
  if (step != op_profile_end - 1) {
    if (detail::OpProfiler* p = ctx->op_profiler()) p->collect();
    return;
  }
  op_profile_running = false;
  OpProfile profile;
  try {
    profile = ctx->end_op_profile();
  } catch (const CommError&) {
    throw;  // a peer failed while the profile waited: the run's failure, handled as any other
  } catch (const std::exception& e) {  // a profile is never worth stopping training for
    TENAX_LOG(Warn, "metrics") << "the op profile of steps " << op_profile_started << "-" << step
                               << " was dropped: " << e.what();
    return;
  }
  const std::int64_t first = op_profile_started;
  const std::string table = format_op_profile(profile, step - first + 1);
  const std::string where = "steps " + std::to_string(first) + "-" + std::to_string(step) + ", rank " +
                            std::to_string(world.rank()) + " (" + ctx->describe() + ")";
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
      dir / ("op-profile-steps" + std::to_string(first) + "-" + std::to_string(step + 1) + "-rank" +
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
