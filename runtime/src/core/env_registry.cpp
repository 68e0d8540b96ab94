// THE registry: every TENAX_* environment variable tenax reads, declared exactly once.
// `tenax-launch --help-env` prints this table; env::validate() checks the environment against it at start-up.
#include "core/env_registry.hpp"

namespace tenax::env {

const std::vector<Var>& registry() {
  using enum Type;
  static const std::vector<Var> vars = {
      // Logging.
      {"TENAX_LOG_LEVEL", Enum, "warn", "Log verbosity.", {"error", "warn", "info", "debug"}},
      {"TENAX_LOG_SUBSYS", String, "", "Comma-separated subsystems shown at info/debug (e.g. comm,ckpt); empty: all."},
      {"TENAX_LOG_FILE", Path, "",
       "Write the log to this file instead of stderr; %h, %p and %r are replaced by host, pid and rank."},

      // Communication.
      {"TENAX_COMM_TIMEOUT", Duration, "10m",
       "Longest any blocking communicator operation may wait before it fails naming the group and operation "
       "(e.g. 90s, 5m; 0 disables)."},
      {"TENAX_NCCL_INIT_TIMEOUT", Duration, "5m", "Longest NCCL communicator initialisation may take."},

      // Kernels.
      {"TENAX_ATTENTION",
       Enum,
       "auto",
       "Attention core on GPUs with bf16/fp16: auto (cuDNN's fused attention where it runs, else the batched core), "
       "fused (required: set-up fails naming why it cannot run), batched (never fused).",
       {"auto", "fused", "batched"}},

      // Tests.
      {"TENAX_TEST_GPU", Bool, "0",
       "Tests that need a GPU fail instead of skipping when none is usable (set on machines that have one)."},

      // The project's scripts (scripts/*.sh). tenax's programs do not read them, but a value set for a script reaches
      // every program the script starts, so they are declared here to be accepted, and checked, there.
      {"TENAX_BUILD_JOBS",
       Int,
       "",
       "Parallel compile jobs of scripts/build.sh and scripts/run-sanitizers.sh; unset: one per CPU.",
       {},
       1,
       4096},
      {"TENAX_TEST_JOBS",
       Int,
       "2",
       "Tests run at once by scripts/run-tests.sh and scripts/run-sanitizers.sh (ctest -j).",
       {},
       1,
       4096},
      {"TENAX_SANITIZERS",
       Enum,
       "1",
       "scripts/run-tests.sh: 1 also runs the sanitizer and fuzzing pass (scripts/run-sanitizers.sh), 0 skips it.",
       {"0", "1"}},
      {"TENAX_FUZZ_SECONDS", Int, "15", "Seconds each fuzzer runs in scripts/run-sanitizers.sh.", {}, 1, 31536000},

      // Worker <-> tenax-launch protocol (docs/worker-protocol.md). The launcher sets these for every rank.
      {"TENAX_RUN_DIR", Path, "",
       "Run directory of tenax-launch: heartbeats go to its heartbeat/ folder; unset: none."},
      {"TENAX_CHECKPOINT_DIR", Path, "", "Checkpoint directory the program resumes from (set by tenax-launch)."},
      {"TENAX_LAUNCHER", String, "",
       "Set by tenax-launch: its host:pid. It holds the lock of its checkpoint directory for the whole run, so the "
       "program's checkpointer takes none there while this launcher holds it (unset: the checkpointer's rank 0 locks "
       "the directory itself)."},
      {"TENAX_ATTEMPT",
       Int,
       "1",
       "Attempt number of this launch, counting across restarts and requeues.",
       {},
       1,
       1000000},
      {"TENAX_RESTART_COUNT", Int, "0", "Relaunches before this attempt (attempt - 1).", {}, 0, 1000000},
      {"TENAX_ORIGINAL_WORLD_SIZE",
       Int,
       "0",
       "Set by tenax-launch after an elastic data-parallel shrink: the world size the run started with (0: none).",
       {},
       0,
       100000000},
      {"TENAX_HEARTBEAT_INTERVAL", Duration, "1s",
       "How often each rank rewrites its heartbeat file under tenax-launch (e.g. 1s, 200ms)."},

      // Step metrics and the data loader (docs/metrics.md). Files go to $TENAX_RUN_DIR/metrics/.
      {"TENAX_METRICS", Bool, "1", "Measure step phases, gather them over ranks and write the metrics outputs."},
      {"TENAX_METRICS_EVERY",
       Int,
       "100",
       "Steps per metrics gather: per-step records, straggler check and Prometheus file update.",
       {},
       1,
       1000000},
      {"TENAX_STRAGGLER_THRESHOLD",
       Double,
       "0.2",
       "A rank is a straggler when its busy time exceeds the median over ranks by more than this fraction.",
       {},
       0,
       0,
       0.001,
       1000},
      {"TENAX_TRACE_STEPS", String, "",
       "A:B writes a Chrome-trace timeline of steps A to B-1 (Perfetto); empty: none."},
      {"TENAX_PROFILE_OPS", String, "",
       "A:B times every kernel call of steps A to B-1 and writes the engine's op profile (time, TFLOP/s, GB/s per "
       "op) to stderr and <run dir>/metrics; empty: none."},
      {"TENAX_METRICS_PROM", Path, "",
       "Prometheus textfile to replace every TENAX_METRICS_EVERY steps (e.g. in node_exporter's textfile directory); "
       "empty: $TENAX_RUN_DIR/metrics/tenax.prom."},
      {"TENAX_LOADER_WORKERS", Int, "2", "Producer threads of the data loader.", {}, 1, 256},
      {"TENAX_LOADER_PREFETCH", Int, "4", "Batches the data loader prepares ahead of the step.", {}, 1, 4096},
      {"TENAX_MEMORY_LIMIT", String, "auto",
       "Host memory a model's tensors and checkpoint staging memory may take while the engine builds it: auto (the "
       "node's ranks together: 7/8 of the memory the node has available, or its memory cgroup leaves), off, or a size "
       "per rank such as 16G or 512M (K, M, G, T: powers of 1024). A model over it is refused, naming the sizes, "
       "instead of the kernel's OOM killer ending the job."},

      // Checkpoints (docs/checkpoint-format.md). The directory is TENAX_CHECKPOINT_DIR above.
      {"TENAX_MTBF", Duration, "24h",
       "Mean time between failures of the job that an automatic checkpoint interval (--checkpoint-every auto) "
       "assumes until the run has seen failures of its own; when not set, TENAX_NODE_MTBF over the run's nodes if "
       "the site gives it, else this default."},
      {"TENAX_NODE_MTBF", Duration, "0",
       "Mean time between failures of one node, a site's figure (the SPANK plugin's node_mtbf_hours exports it): "
       "where TENAX_MTBF is not set, an automatic checkpoint interval assumes this over the number of nodes the run "
       "spans until the run has seen failures of its own (0: none; TENAX_MTBF's default applies)."},
      {"TENAX_RUN_MTBF", Duration, "0",
       "Set by tenax-launch once the run has failed: its wall time so far over its failures, which an automatic "
       "checkpoint interval uses instead of TENAX_MTBF (0: no failure yet)."},
      {"TENAX_RUN_SHARED_MTBF", Duration, "0",
       "Set by tenax-launch with TENAX_RUN_MTBF: the run's wall time so far over the failures whose restart had to "
       "read the shared tier (those not resumed from yet count as such; at least one counted). The shared tier's "
       "automatic interval uses it when a node-local tier saves at least as often (an automatic node-local "
       "interval, or a fixed one no longer than the shared tier's for every failure): that tier and its partner "
       "copies cover the other failures (0: no failure yet)."},
      {"TENAX_CKPT_EVERY", String, "",
       "Checkpoint interval, N steps or auto (Young/Daly), for a program that takes the default of its "
       "--checkpoint-every from CheckpointPolicy::every_default (the examples do); its command line still overrides "
       "it. Set by the SPANK plugin's --tenax-ckpt-every. Empty: the program's own default."},
      {"TENAX_CKPT_LOCAL_EVERY", String, "",
       "The node-local tier's interval in the same way (--checkpoint-local-every; the plugin's "
       "--tenax-ckpt-local-every): N steps or auto. Empty: the program's own default."},
      {"TENAX_CKPT_KEEP",
       Int,
       "3",
       "Complete checkpoints kept in the checkpoint directory (older ones are deleted after each commit; the newest is "
       "never deleted).",
       {},
       1,
       1000000},
      {"TENAX_CKPT_IO_NICE",
       Int,
       "0",
       "Niceness each rank's checkpoint I/O thread adds to the training process's. Above 0 the training thread wins "
       "cores it shares with the "
       "background write, but when training keeps every core busy the write (and the next save, which waits for it) "
       "can stretch many times over; 0 keeps the training priority.",
       {},
       0,
       19},
      {"TENAX_CKPT_DIRECT_IO", Bool, "1",
       "Write checkpoint tensor data with O_DIRECT (around the page cache) where the file system supports it; 0 writes "
       "it through the page cache."},
      {"TENAX_CKPT_STAGING_THREADS",
       Int,
       "0",
       "Threads that copy a checkpoint into staging memory while the training thread waits for save() (the training "
       "thread among them); 0: the CPUs the rank may use, divided among the ranks of its host whose CPU affinity "
       "overlaps its own (all of them when ranks are not bound), at most 8.",
       {},
       0,
       256},
      {"TENAX_CKPT_STAGING_KERNEL",
       Enum,
       "auto",
       "The fused copy + CRC32C kernel of that copy: auto, the first the CPU has in tenax's order of preference; else "
       "one it has (a writing checkpointer refuses one it has not; tenax-bench-checkpoint lists the CPU's). The files "
       "are the same whichever runs.",
       {"auto", "crc32-3x-nt64", "vpclmulqdq-fold-nt32", "crc32-3x-nt32", "crc32-3x-nt8", "tables"}},
      {"TENAX_CKPT_LOCAL_DIR", Path, "",
       "Node-local checkpoint tier: an absolute directory on each node's own storage (/dev/shm, a local SSD) where "
       "every rank also keeps its own copy of each checkpoint, read instead of the shared directory when a restart "
       "finds a valid copy on every rank; empty: none."},
      {"TENAX_CKPT_LOCAL_KEEP", Int, "2", "Node-local copies each rank keeps (the newest first).", {}, 1, 1000},
      {"TENAX_JOB_ID", String, "",
       "The job the node-local copies belong to, written beside them so that the job's end removes exactly its own "
       "(set by tenax-launch: the Slurm job id, or an id of its own outside Slurm); unset: SLURM_JOB_ID."},

      // Slurm SPANK plugin (docs/user-guide.md). Set per job step by spank_tenax.so; users may set the last four
      // instead of the --tenax-* options (an option wins over the variable, site limits win over both).
      {"TENAX_RANK",
       Int,
       "",
       "This task's rank after topology-aware placement (set per task by the plugin).",
       {},
       0,
       100000000},
      {"TENAX_LOCAL_RANK", Int, "", "This task's slot (GPU) on its node (set per task by the plugin).", {}, 0, 100000},
      {"TENAX_WORLD_SIZE", Int, "", "Tasks in the job step (set by the plugin).", {}, 1, 100000000},
      {"TENAX_LAYOUT", String, "", "Parallel layout tp=N,pp=N[,dp=N] (dp inferred when left out), or TPxPPxDP."},
      {"TENAX_PLACEMENT", Enum, "topology", "Rank placement policy of the plugin.", {"topology", "block", "none"}},
      {"TENAX_MAX_RESTARTS",
       Int,
       "3",
       "Restarts the job may use (bounded by the site's max_restarts).",
       {},
       0,
       1000000},
      {"TENAX_SITE_MAX_RESTARTS",
       Int,
       "",
       "The site's limit on restarts (max_restarts in the SPANK plugin's plugstack.conf line, set by the plugin); "
       "tenax-launch refuses a larger --max-restarts.",
       {},
       0,
       1000000},
      {"TENAX_SITE_MAX_SPARES",
       Int,
       "",
       "The site's limit on spare nodes (max_spares in the SPANK plugin's plugstack.conf line, set by the plugin); "
       "tenax-launch refuses a larger --spare-nodes.",
       {},
       0,
       1000000},
      {"TENAX_SPARES", Int, "0", "Nodes of the allocation held back as spares.", {}, 0, 1000000},

      // Token datasets (docs/data-format.md, docs/user-guide.md).
      {"TENAX_DATA_STAGE_DIR", Path, "",
       "Node-local directory that tenax::stage_dataset copies token datasets to at job start (one copier per node, "
       "checksummed, reused while valid); empty: read the dataset where it is."},

      // @@ END OF REGISTRY @@
  };
  return vars;
}

}  // namespace tenax::env
