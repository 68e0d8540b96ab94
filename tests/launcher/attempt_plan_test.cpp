#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "attempt_plan.hpp"
#include "core/directory_lock.hpp"
#include "slurm.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

Options slurm_options() {
  Options o;
  o.mode = Mode::Slurm;
  o.program = {"/opt/train", "--config", "a.yaml"};
  o.heartbeat_interval = std::chrono::milliseconds(500);
  return o;
}

std::string env_value(const std::vector<std::pair<std::string, std::string>>& env, const std::string& key) {
  for (const auto& [k, v] : env) {
    if (k == key) return v;
  }
  return "<unset>";
}

TEST(AttemptPlan, LocalCommandIsMpirunWithOpenMpiDefaultsTheUserMayOverride) {
  if (may_span_hosts({})) GTEST_SKIP() << "the suite runs where mpirun may spread ranks over hosts (no ob1 default)";
  Options o;
  o.mode = Mode::Local;
  o.ranks = 4;
  o.program = {"./train", "--steps", "10"};
  o.extra_launcher_args = {"--mca", "btl", "self,tcp"};
  AttemptPlan plan = plan_local_attempt(o);
  plan.attempt = 3;
  plan.restart_count = 2;
  Command c = local_command(o, plan, "/runs/r1", "/ckpt/r1");
  EXPECT_EQ(c.argv,
            (std::vector<std::string>{"mpirun", "-n", "4", "--mca", "btl", "self,tcp", "./train", "--steps", "10"}));
  EXPECT_EQ(env_value(c.env, "TENAX_RUN_DIR"), "/runs/r1");
  EXPECT_EQ(env_value(c.env, "TENAX_CHECKPOINT_DIR"), "/ckpt/r1");
  EXPECT_EQ(env_value(c.env, "TENAX_ATTEMPT"), "3");
  EXPECT_EQ(env_value(c.env, "TENAX_RESTART_COUNT"), "2");
  EXPECT_EQ(env_value(c.env, "TENAX_HEARTBEAT_INTERVAL"), "1000ms");
  EXPECT_EQ(env_value(c.env, "TENAX_ORIGINAL_WORLD_SIZE"), "<unset>");
  // The program's checkpointer works under this launcher's lock of the checkpoint directory instead of being refused.
  EXPECT_EQ(env_value(c.env, "TENAX_LAUNCHER"), lock_holder_identity());
  EXPECT_EQ(env_value(c.env_defaults, "OMPI_ALLOW_RUN_AS_ROOT"), "1");
  EXPECT_EQ(env_value(c.env_defaults, "OMPI_MCA_rmaps_base_oversubscribe"), "1");
  EXPECT_EQ(env_value(c.env_defaults, "OMPI_MCA_hwloc_base_binding_policy"), "none");
  EXPECT_EQ(env_value(c.env_defaults, "OMPI_MCA_pml"), "ob1") << "one host: shared memory, no UCX probe";
  EXPECT_EQ(env_value(c.env, "TENAX_RUN_MTBF"), "<unset>") << "no failure yet";
  // After failures: the run's own mean time between them, for the program's automatic checkpoint interval.
  plan.observed_mtbf_s = 12.3456;
  EXPECT_EQ(env_value(local_command(o, plan, "/runs/r1", "/ckpt/r1").env, "TENAX_RUN_MTBF"), "12345ms");
  plan.observed_mtbf_s = 0.0001;
  EXPECT_EQ(env_value(local_command(o, plan, "/runs/r1", "/ckpt/r1").env, "TENAX_RUN_MTBF"), "1ms") << "never 0";
  EXPECT_EQ(env_value(local_command(o, plan, "/runs/r1", "/ckpt/r1").env, "TENAX_RUN_SHARED_MTBF"), "<unset>");
  plan.observed_shared_mtbf_s = 37.0;
  EXPECT_EQ(env_value(local_command(o, plan, "/runs/r1", "/ckpt/r1").env, "TENAX_RUN_SHARED_MTBF"), "37000ms");
}

// The variables that say the ranks may span hosts; the test clears them first (the suite may itself run in a job).
const char* const kSpanVariables[] = {"OMPI_MCA_orte_default_hostfile",
                                      "OMPI_MCA_rmaps_base_default_hostfile",
                                      "PRTE_MCA_prte_default_hostfile",
                                      "PBS_NODEFILE",
                                      "LSB_JOBID",
                                      "LSB_HOSTS",
                                      "PE_HOSTFILE",
                                      "SLURM_JOB_NUM_NODES",
                                      "SLURM_NNODES"};

TEST(AttemptPlan, RanksThatMaySpanHostsKeepOpenMpisOwnChoiceOfTransport) {
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* v : kSpanVariables)
    if (const char* value = std::getenv(v)) saved.emplace_back(v, value), unsetenv(v);
  Options o;
  o.mode = Mode::Local;
  o.ranks = 4;
  o.program = {"./train"};
  const AttemptPlan plan = plan_local_attempt(o);
  auto pml = [&] { return env_value(local_command(o, plan, "/r", "/c").env_defaults, "OMPI_MCA_pml"); };
  EXPECT_EQ(pml(), "ob1");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{"--host", "a,b"},
                                                                                    {"-H", "a:2,b:2"},
                                                                                    {"--hostfile=hosts.txt"},
                                                                                    {"-machinefile", "m"},
                                                                                    {"-rf", "ranks"},
                                                                                    {"--add-host", "c"}}) {
    o.extra_launcher_args = args;
    EXPECT_EQ(pml(), "<unset>") << args[0];
  }
  o.extra_launcher_args = {"--mca", "pml", "ucx"};  // the command line beats the environment in Open MPI
  EXPECT_EQ(pml(), "ob1");
  o.extra_launcher_args = {};
  setenv("SLURM_JOB_NUM_NODES", "1", 1);  // a one-node Slurm job: every rank on this host
  EXPECT_EQ(pml(), "ob1");
  setenv("SLURM_JOB_NUM_NODES", "2", 1);  // mpirun spreads the ranks over the allocation by itself
  EXPECT_EQ(pml(), "<unset>");
  unsetenv("SLURM_JOB_NUM_NODES");
  setenv("PBS_NODEFILE", "/var/spool/pbs/aux/1", 1);
  EXPECT_EQ(pml(), "<unset>");
  unsetenv("PBS_NODEFILE");
  EXPECT_FALSE(may_span_hosts({"--mca", "btl", "self,vader", "--hostname-is-not-an-option"}));
  EXPECT_TRUE(may_span_hosts({"--mca", "rmaps_base_default_hostfile", "/etc/hosts.mpi"}));
  for (const auto& [v, value] : saved)
    setenv(v.c_str(), value.c_str(), 1);
}

TEST(AttemptPlan, SrunCommandOfAFirstAttempt) {
  Options o = slurm_options();
  o.nodes = 2;
  o.tasks_per_node = 4;
  AttemptPlan plan = plan_slurm_attempt(o, {"n1", "n2", "n3"}, {});
  plan.attempt = 1;
  Command c = srun_command(o, plan, "/runs/r", "");
  EXPECT_EQ(c.argv, (std::vector<std::string>{"srun", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4",
                                              "--kill-on-bad-exit=1", "--overlap", "--mpi=pmix",
                                              "--job-name=tenax-attempt-1", "/opt/train", "--config", "a.yaml"}));
  EXPECT_EQ(env_value(c.env, "TENAX_CHECKPOINT_DIR"), "<unset>");
  EXPECT_EQ(env_value(c.env, "TENAX_HEARTBEAT_INTERVAL"), "500ms");
}

TEST(AttemptPlan, AnExcludedNodeIsReplacedByASpare) {
  Options o = slurm_options();
  o.spare_nodes = 1;
  o.tasks_per_node = 2;
  AttemptPlan plan = plan_slurm_attempt(o, {"n1", "n2", "n3", "n4"}, {"n2"});
  plan.attempt = 2;
  EXPECT_EQ(plan.nodes, 3);
  EXPECT_EQ(plan.world_size, 6);
  EXPECT_EQ(plan.original_world_size, 0);
  Command c = srun_command(o, plan, "/r", "/c");
  EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), "--exclude=n2"), c.argv.end());
  EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), "--nodes=3"), c.argv.end());
  EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), "--ntasks=6"), c.argv.end());
}

TEST(AttemptPlan, ExclusionsAreSortedAndOnlyThoseOfTheAllocation) {
  Options o = slurm_options();
  o.nodes = 2;
  AttemptPlan plan = plan_slurm_attempt(o, {"n1", "n2", "n3", "n4", "n5"}, {"n5", "n1", "other-job-node"});
  EXPECT_EQ(plan.exclude, (std::vector<std::string>{"n1", "n5"}));
  Command c = srun_command(o, plan, "/r", "/c");
  EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), "--exclude=n1,n5"), c.argv.end());
}

TEST(AttemptPlan, TooFewHealthyNodesWithoutElasticStopsWithTheFix) {
  Options o = slurm_options();
  o.nodes = 4;
  try {
    plan_slurm_attempt(o, {"n1", "n2", "n3", "n4"}, {"n3"});
    FAIL() << "expected an error";
  } catch (const UsageError&) {
    FAIL() << "a shortage of nodes is not a usage error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("only 3 of the 4"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("--elastic"), std::string::npos) << error.what();
  }
}

TEST(AttemptPlan, ElasticShrinkKeepsWholeReplicasAndTellsTheWorkers) {
  Options o = slurm_options();
  o.nodes = 4;
  o.tasks_per_node = 3;
  o.elastic = true;
  o.model_parallel = 4;  // 12 ranks = 3 replicas of 4
  o.min_nodes = 2;
  AttemptPlan plan = plan_slurm_attempt(o, {"n1", "n2", "n3", "n4"}, {"n2"});
  EXPECT_EQ(plan.nodes, 3);
  EXPECT_EQ(plan.world_size, 8);  // 9 ranks fit, 2 whole replicas of 4
  EXPECT_EQ(plan.original_world_size, 12);
  Command c = srun_command(o, plan, "/r", "/c");
  EXPECT_EQ(env_value(c.env, "TENAX_ORIGINAL_WORLD_SIZE"), "12");
  EXPECT_EQ(std::find(c.argv.begin(), c.argv.end(), "--ntasks-per-node=3"), c.argv.end());
  EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), "--ntasks=8"), c.argv.end());
  EXPECT_THROW(plan_slurm_attempt(o, {"n1", "n2", "n3", "n4"}, {"n1", "n2", "n3"}), Error);  // below --min-nodes
}

TEST(AttemptPlan, OptionsThatCannotFitTheAllocationAreUsageErrors) {
  Options o = slurm_options();
  o.nodes = 3;
  o.spare_nodes = 2;
  EXPECT_THROW(plan_slurm_attempt(o, {"n1", "n2", "n3", "n4"}, {}), UsageError);
  Options ranks = slurm_options();
  ranks.nodes = 2;
  ranks.ranks = 5;
  EXPECT_THROW(plan_slurm_attempt(ranks, {"n1", "n2"}, {}), UsageError);
  EXPECT_THROW(plan_slurm_attempt(slurm_options(), {}, {}), UsageError);
}

TEST(AttemptPlan, RequeueUsesScontrol) {
  Options o = slurm_options();
  o.scontrol = "/usr/bin/scontrol";
  EXPECT_EQ(requeue_command(o, "777"), (std::vector<std::string>{"/usr/bin/scontrol", "requeue", "777"}));
}

}  // namespace
}  // namespace tenax::launch
