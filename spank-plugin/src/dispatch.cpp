// Every SPANK entry point of the plugin, and nothing else: each one dispatches on spank_context() to the file of that
// context and is the C boundary where every exception stops (an exception escaping into slurmstepd or sbatch would
// abort it). The linker version script exports exactly these symbols.
#include <exception>
#include <string>
#include <vector>

#include "contexts.hpp"
#include "plugin_state.hpp"
#include "tenax/error.hpp"

// Everything is compiled with -fvisibility=hidden; the symbols Slurm looks up are made visible here (and the version
// script keeps everything else local). SPANK_PLUGIN() defines four constants, which in C++ would get internal linkage
// unless declared extern "C" first: Slurm's loader would not find them.
#pragma GCC visibility push(default)
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(tenax, 1)
}
#pragma GCC visibility pop

// Readable with `strings`: the Slurm release this plugin was built against (spank-plugin/src/CMakeLists.txt).
[[gnu::used]] static const char kBuiltFor[] = "tenax SPANK plugin built for Slurm " TENAX_SLURM_RELEASE;

namespace {

using tenax::spank::report_error;

// Runs one callback: 0 on success; on any exception the message (prefixed "tenax: ") and -1, which makes Slurm refuse
// the command, the step or the task.
template <typename Body>
int guarded(const char* callback, Body&& body) noexcept {
  try {
    return body();
  } catch (const tenax::UsageError& e) {
    report_error(e.what());
  } catch (const std::exception& e) {
    report_error(std::string(callback) + ": " + e.what());
  } catch (...) {
    report_error(std::string(callback) + ": unexpected non-standard exception");
  }
  return -1;
}

bool parses_options(spank_context_t context) {
  return context == S_CTX_ALLOCATOR || context == S_CTX_LOCAL || context == S_CTX_REMOTE;
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  if (spank_context() == S_CTX_JOB_SCRIPT) {
    try {
      tenax::spank::state().admin = tenax::spank::AdminConfig::parse(std::vector<std::string>(av, av + ac));
    } catch (const std::exception& e) {
      tenax::spank::state().admin_error = e.what();
    } catch (...) {
      tenax::spank::state().admin_error = "unexpected non-standard exception while reading plugstack.conf";
    }
    return 0;
  }
  return guarded("init", [&] {
    std::vector<std::string> args(av, av + ac);
    tenax::spank::state().admin = tenax::spank::AdminConfig::parse(args);
    if (parses_options(spank_context())) tenax::spank::register_options(sp);
    return 0;
  });
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  return guarded("init_post_opt", [&] {
    switch (spank_context()) {
      case S_CTX_ALLOCATOR:
      case S_CTX_LOCAL:  // srun checks the environment layer exactly as sbatch does
        return tenax::spank::allocator::init_post_opt(sp);
      default:
        return 0;
    }
  });
}

int slurm_spank_user_init(spank_t sp, int ac, char** av) {
  return guarded("user_init",
                 [&] { return spank_context() == S_CTX_REMOTE ? tenax::spank::remote::user_init(sp) : 0; });
}

int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  return guarded("task_init",
                 [&] { return spank_context() == S_CTX_REMOTE ? tenax::spank::remote::task_init(sp) : 0; });
}

int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  return tenax::spank::job_script::job_epilog(sp);
}

}  // extern "C"
#pragma GCC visibility pop
