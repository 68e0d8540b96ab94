// The one table of tenax's options on sbatch, salloc and srun, and the callback that parses them.
//
// Each value is validated the moment Slurm hands it over (before the job is submitted in sbatch/salloc, before the
// step is created in srun), against the admin limits too, so a bad value fails at the user's prompt with a message
// naming the option, the value and what is allowed. A callback returning -1 makes sbatch/srun refuse the option.
#include <exception>

#include "plugin_state.hpp"
#include "tenax/error.hpp"

namespace tenax::spank {

PluginState& state() {
  static PluginState instance;
  return instance;
}

namespace {

// Slurm hands the id back to the callback: TenaxOption's values.
constexpr int id_of(TenaxOption option) {
  return static_cast<int>(option);
}

int on_option(int id, const char* optarg, int remote) noexcept;

// Slurm's struct spank_option holds non-const char*; it never writes through them.
// A flag has no argument description (nullptr), so it is listed as a bare --name.
char* text(const char* literal) {
  return const_cast<char*>(literal);
}
char* text(std::nullptr_t) {
  return nullptr;
}
#define TENAX_OPTION(name, arginfo, usage, has_arg, id) \
  { text(name), text(arginfo), text(usage), has_arg, id, on_option }

struct spank_option option_table[] = {
    TENAX_OPTION("tenax", nullptr,
                 "[tenax] Run this job under tenax: each task gets its rank after topology-aware placement, the "
                 "layout, checkpoint directory and restart settings, and its GPU/NUMA binding (implied by any "
                 "--tenax-* option).",
                 0, id_of(TenaxOption::Enable)),
    TENAX_OPTION(
        "tenax-ckpt-dir", "DIR",
        "[tenax] Checkpoint directory (absolute; %u = user, %j = job id). Default: $TENAX_CHECKPOINT_DIR, else "
        "the site default.",
        1, id_of(TenaxOption::CkptDir)),
    TENAX_OPTION("tenax-layout", "tp=N,pp=N[,dp=N]",
                 "[tenax] Parallel layout; dp is inferred from the task count when left out (also TPxPPxDP). "
                 "Default: $TENAX_LAYOUT, else pure data parallelism.",
                 1, id_of(TenaxOption::Layout)),
    TENAX_OPTION("tenax-placement", "topology|block|none",
                 "[tenax] Rank placement: topology (TP groups inside nodes, PP neighbours under one switch), block "
                 "(Slurm's order per node) or none (rank = SLURM_PROCID). Default: $TENAX_PLACEMENT, else the site "
                 "default.",
                 1, id_of(TenaxOption::Placement)),
    TENAX_OPTION("tenax-max-restarts", "N",
                 "[tenax] Most restarts after preemption or failure (site limit applies). Default: "
                 "$TENAX_MAX_RESTARTS, else the site default.",
                 1, id_of(TenaxOption::MaxRestarts)),
    TENAX_OPTION("tenax-spares", "N",
                 "[tenax] Nodes of the allocation held back as spares to replace failed ones. Default: "
                 "$TENAX_SPARES, else 0.",
                 1, id_of(TenaxOption::Spares)),
    TENAX_OPTION("tenax-data-stage-dir", "DIR",
                 "[tenax] Node-local directory each node copies the job's token dataset to before training (absolute; "
                 "%u = user, %j = job id); a checked copy is reused by later jobs, and a node that cannot stage reads "
                 "the shared copy. Default: $TENAX_DATA_STAGE_DIR, else the site default.",
                 1, id_of(TenaxOption::DataStageDir)),
    TENAX_OPTION("tenax-ckpt-local-dir", "DIR|none",
                 "[tenax] Node-local checkpoint tier: each node also keeps its ranks' checkpoints here (/dev/shm or a "
                 "local disk; %u = user, %j = job id, %n = node) and a restart reads them instead of the shared "
                 "directory; removed at the end of the job. Default: $TENAX_CKPT_LOCAL_DIR, else the site default.",
                 1, id_of(TenaxOption::CkptLocalDir)),
    TENAX_OPTION("tenax-ckpt-every", "N|auto",
                 "[tenax] Checkpoint every N steps (0: only at the end and on preemption), or auto: the interval "
                 "that loses the least time, from the measured cost of a save and the run's failure rate. Default "
                 "of the program's --checkpoint-every. Default: $TENAX_CKPT_EVERY, else the program's own.",
                 1, id_of(TenaxOption::CkptEvery)),
    TENAX_OPTION("tenax-ckpt-local-every", "N|auto",
                 "[tenax] Node-local checkpoint copies every N steps between the shared ones, or auto (as "
                 "--tenax-ckpt-every, from the cost of a node-local save). Default: $TENAX_CKPT_LOCAL_EVERY, else "
                 "the program's own.",
                 1, id_of(TenaxOption::CkptLocalEvery)),
};
#undef TENAX_OPTION

int on_option(int id, const char* optarg, int /*remote*/) noexcept {
  try {
    if (id < id_of(TenaxOption::Enable) || id > id_of(TenaxOption::CkptLocalEvery)) {
      report_error("internal error: unknown option id " + std::to_string(id));
      return -1;
    }
    PluginState& s = state();
    apply_option(s.options, static_cast<TenaxOption>(id), optarg ? optarg : "", s.admin);
    return 0;
  } catch (const std::exception& e) {
    report_error(e.what());
  } catch (...) {
    report_error("unexpected non-standard exception while parsing an option");
  }
  return -1;
}

}  // namespace

void register_options(spank_t sp) {
  for (auto& option : option_table) {
    const spank_err_t rc = spank_option_register(sp, &option);
    if (rc != ESPANK_SUCCESS) {
      throw Error(std::string("could not register --") + option.name + ": " + spank_strerror(rc));
    }
  }
}

}  // namespace tenax::spank
