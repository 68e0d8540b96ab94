// Unit tests of the SPANK plugin's pure parts: admin configuration, option and environment parsing with limits,
// precedence, the step's shape and layout, the ids the job epilog removes copies of (the GPU/NUMA binding plan is in
// spank_binding_test.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "admin_config.hpp"
#include "epilog_job_ids.hpp"
#include "job_request.hpp"
#include "job_settings.hpp"
#include "step_ranks.hpp"
#include "tenax/error.hpp"
#include "topology_source.hpp"

namespace tenax::spank {
namespace {

// Runs `body`, expecting a UsageError whose message contains every one of `parts`.
template <typename Body>
void expect_usage_error(Body&& body, std::initializer_list<std::string_view> parts) {
  try {
    body();
    ADD_FAILURE() << "no UsageError thrown";
  } catch (const UsageError& e) {
    for (auto part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// The environment layer's lookup over `env`, which it reads at each call (a test may change it in between).
EnvLookup lookup_in(const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(AdminConfig, DefaultsWithoutArguments) {
  const AdminConfig config = AdminConfig::parse({});
  EXPECT_EQ(config.ckpt_root, "");
  EXPECT_EQ(config.default_restarts, 3);
  EXPECT_EQ(config.max_restarts, 10);
  EXPECT_EQ(config.placement, PlacementPolicy::Topology);
  EXPECT_TRUE(config.allow_placement_none);
  EXPECT_TRUE(config.bind_gpus);
  EXPECT_EQ(config.hw_topology, "");     // discover
  EXPECT_EQ(config.node_mtbf_hours, 0);  // no site figure: jobs assume TENAX_MTBF's default
}

TEST(AdminConfig, ParsesEveryKey) {
  const AdminConfig config =
      AdminConfig::parse({"ckpt_root=/scratch/ckpt", "ckpt_default=/scratch/ckpt/%u/%j", "default_restarts=2",
                          "max_restarts=4", "max_spares=1", "topology_file=/etc/slurm/topology.conf", "placement=block",
                          "allow_placement_none=no", "bind_gpus=no", "bind_numa=0", "hw_topology=/etc/tenax/node.xml",
                          "data_stage_default=/local/%u", "ckpt_local_default=/dev/shm/%u/%n", "node_mtbf_hours=5000"});
  EXPECT_EQ(config.ckpt_root, "/scratch/ckpt");
  EXPECT_EQ(config.ckpt_default, "/scratch/ckpt/%u/%j");
  EXPECT_EQ(config.default_restarts, 2);
  EXPECT_EQ(config.max_restarts, 4);
  EXPECT_EQ(config.max_spares, 1);
  EXPECT_EQ(config.topology_file, "/etc/slurm/topology.conf");
  EXPECT_EQ(config.placement, PlacementPolicy::Block);
  EXPECT_FALSE(config.allow_placement_none);
  EXPECT_FALSE(config.bind_gpus);
  EXPECT_FALSE(config.bind_numa);
  EXPECT_EQ(config.hw_topology, "/etc/tenax/node.xml");
  EXPECT_EQ(config.data_stage_default, "/local/%u");
  EXPECT_EQ(config.ckpt_local_default, "/dev/shm/%u/%n");
  EXPECT_EQ(config.node_mtbf_hours, 5000);
  EXPECT_EQ(admin_keys().size(), 14u);
  // The /proc and /sys root of earlier releases is gone: a site that still names it hears so.
  expect_usage_error([] { AdminConfig::parse({"hw_root=/host"}); }, {"unknown key 'hw_root'", "hw_topology"});
}

TEST(AdminConfig, RefusesMistakes) {
  expect_usage_error([] { AdminConfig::parse({"max_restart=3"}); },
                     {"unknown key 'max_restart'", "known keys: ckpt_root", "max_restarts"});
  expect_usage_error([] { AdminConfig::parse({"placement"}); }, {"'placement' is not key=value"});
  expect_usage_error([] { AdminConfig::parse({"max_restarts=3", "max_restarts=4"}); }, {"given twice"});
  expect_usage_error([] { AdminConfig::parse({"max_restarts=-1"}); }, {"max_restarts=-1", "from 0 to"});
  expect_usage_error(
      [] {
        AdminConfig::parse({"default_restarts=5", "max_restarts=4"});
      },
      {"default_restarts=5 exceeds max_restarts=4"});
  expect_usage_error([] { AdminConfig::parse({"bind_gpus=maybe"}); }, {"bind_gpus=maybe", "yes or no"});
  // Hours as a whole number: a unit, a fraction or a figure beyond the runtime's longest duration is refused.
  expect_usage_error([] { AdminConfig::parse({"node_mtbf_hours=720h"}); },
                     {"node_mtbf_hours=720h", "whole number from 0 to 1000000", "hours"});
  expect_usage_error([] { AdminConfig::parse({"node_mtbf_hours=0.5"}); }, {"node_mtbf_hours=0.5"});
  expect_usage_error([] { AdminConfig::parse({"node_mtbf_hours=1000001"}); }, {"node_mtbf_hours=1000001"});
  expect_usage_error([] { AdminConfig::parse({"ckpt_root=scratch"}); }, {"absolute path"});
  expect_usage_error([] { AdminConfig::parse({"placement=none", "allow_placement_none=no"}); }, {"contradicts"});
  expect_usage_error(
      [] {
        AdminConfig::parse({"ckpt_root=/scratch", "ckpt_default=/home/%u"});
      },
      {"ckpt_default=/home/%u", "must lie under /scratch"});
}

// The site's topology: a topology_file the admin named must exist (a silent fallback would place every step as if there
// were no switches); without the key, topology.conf beside slurm.conf when present, else one leaf per node.
TEST(AdminConfig, ANamedTopologyFileMustExistTheDefaultOneMayNot) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spank-topology-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string slurm_conf = (dir / "slurm.conf").string();
  std::string note;
  EXPECT_TRUE(load_switch_tree(AdminConfig{}, slurm_conf, &note).switches().empty());
  EXPECT_NE(note.find("no topology file at " + (dir / "topology.conf").string()), std::string::npos) << note;

  std::ofstream(dir / "topology.conf") << "SwitchName=s0 Nodes=n[0-3]\n";
  note.clear();
  EXPECT_EQ(load_switch_tree(AdminConfig{}, slurm_conf, &note).switches().size(), 1u);
  EXPECT_TRUE(note.empty()) << note;

  const AdminConfig named = AdminConfig::parse({"topology_file=" + (dir / "missing.conf").string()});
  try {
    load_switch_tree(named, slurm_conf);
    ADD_FAILURE() << "a missing topology_file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topology_file=" + (dir / "missing.conf").string() + " is missing"),
              std::string::npos)
        << e.what();
  }
  const AdminConfig directory = AdminConfig::parse({"topology_file=" + dir.string()});
  EXPECT_THROW(load_switch_tree(directory, slurm_conf), Error);
  std::filesystem::remove_all(dir);
}

// The log names the policy the admin or user chose, not the arrangement (topology placement may pick block order).
TEST(StepRanks, TheLogNamesThePolicyAndTheArrangement) {
  const ParallelLayout layout{2, 1, 2};
  const Placement block = block_placement({"n0", "n1"}, 2, layout);
  EXPECT_EQ(placement_log_text(PlacementPolicy::Block, &block), "block");
  EXPECT_EQ(placement_log_text(PlacementPolicy::Topology, &block),
            "topology (arrangement block: no other order was cheaper)");
  EXPECT_EQ(placement_log_text(PlacementPolicy::None, nullptr), "none");
  Placement other = block;
  other.strategy = "median,dp-first";
  EXPECT_EQ(placement_log_text(PlacementPolicy::Topology, &other), "topology (arrangement median,dp-first)");
}

TEST(Layout, ParsesBothForms) {
  EXPECT_EQ(parse_layout("x", "tp=2,pp=1,dp=2"), (LayoutRequest{2, 1, 2}));
  EXPECT_EQ(parse_layout("x", "dp=4,tp=2"), (LayoutRequest{2, 1, 4}));
  EXPECT_EQ(parse_layout("x", "tp=8"), (LayoutRequest{8, 1, 0}));
  EXPECT_EQ(parse_layout("x", "2x3x4"), (LayoutRequest{2, 3, 4}));
  EXPECT_EQ(layout_to_string(2, 3, 4), "tp=2,pp=3,dp=4");
}

TEST(Layout, RefusalNamesSourceValueAndForm) {
  expect_usage_error([] { parse_layout("--tenax-layout", "tp=0"); },
                     {"--tenax-layout=tp=0", "'tp=0' is not a degree", "e.g. tp=2,pp=1,dp=2"});
  expect_usage_error([] { parse_layout("TENAX_LAYOUT", "tp=2,ep=2"); }, {"TENAX_LAYOUT=tp=2,ep=2", "unknown key 'ep'"});
  expect_usage_error([] { parse_layout("x", "tp=2,tp=2"); }, {"'tp' given twice"});
  expect_usage_error([] { parse_layout("x", "2x2"); }, {"not three degrees"});
  expect_usage_error([] { parse_layout("x", ""); }, {"empty layout"});
  expect_usage_error([] { parse_layout("x", "tp=99999999"); }, {"not a degree"});
}

TEST(Options, LimitsFromTheAdminWin) {
  const AdminConfig admin = AdminConfig::parse({"max_restarts=5", "max_spares=2", "allow_placement_none=no"});
  EXPECT_EQ(parse_max_restarts("--tenax-max-restarts", "5", admin), 5);
  expect_usage_error([&] { parse_max_restarts("--tenax-max-restarts", "6", admin); },
                     {"--tenax-max-restarts=6", "from 0 to 5", "admin limit max_restarts"});
  expect_usage_error([&] { parse_spares("TENAX_SPARES", "3", admin); }, {"TENAX_SPARES=3", "max_spares"});
  expect_usage_error([&] { parse_spares("--tenax-spares", "two", admin); }, {"--tenax-spares=two"});
  EXPECT_EQ(parse_placement_request("p", "block", admin), PlacementPolicy::Block);
  expect_usage_error([&] { parse_placement_request("--tenax-placement", "none", admin); },
                     {"--tenax-placement=none", "allow_placement_none=no", "use topology or block"});
  expect_usage_error([&] { parse_placement_request("--tenax-placement", "fast", admin); },
                     {"expected topology, block or none"});
}

TEST(CheckpointDir, AbsoluteNormalisedAndUnderTheRoot) {
  const AdminConfig open = AdminConfig::parse({});
  EXPECT_EQ(parse_ckpt_dir("d", "//scratch//x/", open), "/scratch/x");
  expect_usage_error([&] { parse_ckpt_dir("--tenax-ckpt-dir", "ckpt", open); }, {"--tenax-ckpt-dir=ckpt", "absolute"});
  expect_usage_error([&] { parse_ckpt_dir("d", "/a/../b", open); }, {"'..' components are not allowed"});
  expect_usage_error([&] { parse_ckpt_dir("d", "/a/%x", open); }, {"unknown placeholder '%x'"});
  expect_usage_error([&] { parse_ckpt_dir("d", "/a/\nb", open); }, {"control characters"});

  const AdminConfig rooted = AdminConfig::parse({"ckpt_root=/scratch/ckpt/"});
  EXPECT_EQ(parse_ckpt_dir("d", "/scratch/ckpt/%u/run%%1", rooted), "/scratch/ckpt/%u/run%%1");
  EXPECT_EQ(parse_ckpt_dir("d", "/scratch/ckpt", rooted), "/scratch/ckpt");
  // A sibling that merely shares the prefix is outside the root.
  expect_usage_error([&] { parse_ckpt_dir("d", "/scratch/ckpt2/x", rooted); }, {"must lie under /scratch/ckpt "});
  EXPECT_EQ(expand_dir_pattern("checkpoint directory", "/s/%u/%j/100%%", "alice", "42"), "/s/alice/42/100%");
}

TEST(Settings, OptionBeatsEnvironmentBeatsAdminDefault) {
  const AdminConfig admin =
      AdminConfig::parse({"default_restarts=2", "placement=block", "ckpt_root=/c", "ckpt_default=/c/%u"});
  std::map<std::string, std::string> env = {{"TENAX_MAX_RESTARTS", "7"}, {"TENAX_CHECKPOINT_DIR", "/c/env"}};
  const JobRequest from_env = request_from_environment(lookup_in(env), admin);
  JobRequest options;
  options.max_restarts = 4;
  JobSettings settings = resolve_settings(options, from_env, admin);
  EXPECT_EQ(settings.max_restarts, 4);                    // option
  EXPECT_EQ(settings.ckpt_dir, "/c/env");                 // environment
  EXPECT_EQ(settings.placement, PlacementPolicy::Block);  // admin default
  EXPECT_EQ(settings.spares, 0);
  EXPECT_FALSE(settings.layout.has_value());

  settings = resolve_settings(JobRequest{}, JobRequest{}, admin);
  EXPECT_EQ(settings.max_restarts, 2);
  EXPECT_EQ(settings.ckpt_dir, "/c/%u");

  env = {{"TENAX_CHECKPOINT_DIR", "/elsewhere"}};
  expect_usage_error([&] { request_from_environment(lookup_in(env), admin); },
                     {"TENAX_CHECKPOINT_DIR=/elsewhere", "ckpt_root"});
}

TEST(Settings, DataStageDirectoryFromOptionEnvironmentOrSiteDefault) {
  const AdminConfig admin = AdminConfig::parse({"ckpt_root=/c", "data_stage_default=/local/%u/stage"});
  EXPECT_EQ(admin.data_stage_default, "/local/%u/stage");
  std::map<std::string, std::string> env;
  const EnvLookup lookup = lookup_in(env);
  // Not under ckpt_root: that policy is for checkpoints, and staged data lives on node-local disks.
  JobRequest options;
  apply_option(options, TenaxOption::DataStageDir, "/tmp//nvme/%u/%j/", admin);
  EXPECT_TRUE(options.enabled);
  EXPECT_EQ(options.data_stage_dir, "/tmp/nvme/%u/%j");
  env = {{"TENAX_DATA_STAGE_DIR", "/scratch/env"}};
  EXPECT_EQ(resolve_settings(options, request_from_environment(lookup, admin), admin).data_stage_dir,
            "/tmp/nvme/%u/%j");  // option
  EXPECT_EQ(resolve_settings(JobRequest{}, request_from_environment(lookup, admin), admin).data_stage_dir,
            "/scratch/env");  // environment
  env.clear();
  EXPECT_EQ(resolve_settings(JobRequest{}, request_from_environment(lookup, admin), admin).data_stage_dir,
            "/local/%u/stage");                                                                        // site default
  EXPECT_EQ(resolve_settings(JobRequest{}, JobRequest{}, AdminConfig::parse({})).data_stage_dir, "");  // no staging
  EXPECT_EQ(expand_dir_pattern("data stage directory", "/local/%u/%j", "alice", "42"), "/local/alice/42");

  expect_usage_error([&] { apply_option(options, TenaxOption::DataStageDir, "stage", admin); },
                     {"--tenax-data-stage-dir=stage", "absolute"});
  expect_usage_error([&] { apply_option(options, TenaxOption::DataStageDir, "/a/../b", admin); },
                     {"'..' components are not allowed"});
  env = {{"TENAX_DATA_STAGE_DIR", "/a/%q"}};
  expect_usage_error([&] { request_from_environment(lookup, admin); },
                     {"TENAX_DATA_STAGE_DIR=/a/%q", "unknown placeholder '%q'"});
  expect_usage_error([] { AdminConfig::parse({"data_stage_default=local"}); },
                     {"plugstack.conf: data_stage_default=local", "absolute"});
}

TEST(Settings, NodeLocalCheckpointDirectoryFromOptionEnvironmentOrSiteDefault) {
  const AdminConfig admin = AdminConfig::parse({"ckpt_local_default=/dev/shm/tenax-%u"});
  EXPECT_EQ(admin.ckpt_local_default, "/dev/shm/tenax-%u");
  std::map<std::string, std::string> env;
  const EnvLookup lookup = lookup_in(env);
  JobRequest options;
  apply_option(options, TenaxOption::CkptLocalDir, "/local//%u/%j/%n/", admin);
  EXPECT_TRUE(options.enabled);
  EXPECT_EQ(options.ckpt_local_dir, "/local/%u/%j/%n");
  env = {{"TENAX_CKPT_LOCAL_DIR", "/scratch/%n"}};
  EXPECT_EQ(resolve_settings(options, request_from_environment(lookup, admin), admin).ckpt_local_dir,
            "/local/%u/%j/%n");  // option
  EXPECT_EQ(resolve_settings(JobRequest{}, request_from_environment(lookup, admin), admin).ckpt_local_dir,
            "/scratch/%n");                  // environment
  env = {{"TENAX_CKPT_LOCAL_DIR", "none"}};  // a job turns the site's tier off
  EXPECT_EQ(resolve_settings(JobRequest{}, request_from_environment(lookup, admin), admin).ckpt_local_dir, "none");
  env.clear();
  EXPECT_EQ(resolve_settings(JobRequest{}, request_from_environment(lookup, admin), admin).ckpt_local_dir,
            "/dev/shm/tenax-%u");  // site default
  EXPECT_EQ(resolve_settings(JobRequest{}, JobRequest{}, AdminConfig::parse({})).ckpt_local_dir, "");
  // Tasks get %n unexpanded (each rank knows its node); the epilog expands it to its own node.
  EXPECT_EQ(expand_dir_pattern("node-local checkpoint directory", "/l/%u/%j/%n", "alice", "42"), "/l/alice/42/%n");
  EXPECT_EQ(expand_dir_pattern("node-local checkpoint directory", "/l/%u/%j/%n", "alice", "42", "n3"),
            "/l/alice/42/n3");
  EXPECT_EQ(expand_dir_pattern("node-local checkpoint directory", "/l/100%%/%n", "alice", "42", "n3"), "/l/100%/n3");

  expect_usage_error([&] { apply_option(options, TenaxOption::CkptLocalDir, "shm", admin); },
                     {"--tenax-ckpt-local-dir=shm", "absolute"});
  expect_usage_error([&] { apply_option(options, TenaxOption::CkptLocalDir, "/dev/shm/../etc", admin); },
                     {"'..' components are not allowed"});
  env = {{"TENAX_CKPT_LOCAL_DIR", "/a/%h"}};
  expect_usage_error([&] { request_from_environment(lookup, admin); },
                     {"TENAX_CKPT_LOCAL_DIR=/a/%h", "unknown placeholder '%h'", "%n (node name)"});
  // %n is the node-local tier's alone: other directories are the same on every node.
  expect_usage_error([&] { apply_option(options, TenaxOption::DataStageDir, "/a/%n", admin); },
                     {"unknown placeholder '%n'"});
  expect_usage_error([] { AdminConfig::parse({"ckpt_local_default=shm"}); },
                     {"plugstack.conf: ckpt_local_default=shm", "absolute"});
}

TEST(Settings, CheckpointIntervalsFromOptionOrEnvironment) {
  const AdminConfig admin = AdminConfig::parse({});
  std::map<std::string, std::string> env;
  const EnvLookup lookup = lookup_in(env);
  JobRequest options;
  apply_option(options, TenaxOption::CkptEvery, "auto", admin);
  apply_option(options, TenaxOption::CkptLocalEvery, "0005", admin);
  EXPECT_TRUE(options.enabled);
  EXPECT_EQ(options.ckpt_every, "auto");
  EXPECT_EQ(options.ckpt_local_every, "5");
  env = {{"TENAX_CKPT_EVERY", "40"}, {"TENAX_CKPT_LOCAL_EVERY", "auto"}};
  JobSettings s = resolve_settings(options, request_from_environment(lookup, admin), admin);
  EXPECT_EQ(s.ckpt_every, "auto");  // option
  EXPECT_EQ(s.ckpt_local_every, "5");
  s = resolve_settings(JobRequest{}, request_from_environment(lookup, admin), admin);
  EXPECT_EQ(s.ckpt_every, "40");  // environment
  EXPECT_EQ(s.ckpt_local_every, "auto");
  env.clear();
  s = resolve_settings(JobRequest{}, request_from_environment(lookup, admin), admin);
  EXPECT_EQ(s.ckpt_every, "") << "nothing given: the program's own interval";
  EXPECT_EQ(s.ckpt_local_every, "");
  EXPECT_EQ(parse_ckpt_every("--tenax-ckpt-every", "0"), "0");
  EXPECT_EQ(parse_ckpt_every("--tenax-ckpt-every", "1000000000"), "1000000000");

  for (const char* bad : {"", "-1", "ten", "10s", "Auto", "1e3", "1000000001", "99999999999999999999", " 5"})
    expect_usage_error([&] { apply_option(options, TenaxOption::CkptEvery, bad, admin); },
                       {"--tenax-ckpt-every=", "expected auto"});
  EXPECT_EQ(options.ckpt_every, "auto") << "a refused value leaves the earlier one";
  env = {{"TENAX_CKPT_LOCAL_EVERY", "often"}};
  expect_usage_error([&] { request_from_environment(lookup, admin); },
                     {"TENAX_CKPT_LOCAL_EVERY=often", "expected auto"});
}

TEST(Settings, LayoutExportedToATaskIsNotARequestForANestedStep) {
  const AdminConfig admin = AdminConfig::parse({});
  std::map<std::string, std::string> env = {{"TENAX_LAYOUT", "tp=2,pp=1,dp=4"}};
  const EnvLookup lookup = lookup_in(env);
  EXPECT_EQ(request_from_environment(lookup, admin).layout, (LayoutRequest{2, 1, 4}));
  env["TENAX_WORLD_SIZE"] = "8";
  EXPECT_FALSE(request_from_environment(lookup, admin).layout.has_value());
}

TEST(StepShape, ExpandsSlurmTaskCounts) {
  EXPECT_EQ(expand_tasks_per_node("4,2,1(x2)"), (std::vector<int>{4, 2, 1, 1}));
  EXPECT_EQ(expand_tasks_per_node("2(x3)"), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(expand_tasks_per_node("8"), (std::vector<int>{8}));
  expect_usage_error([] { expand_tasks_per_node("2(x"); }, {"SLURM_STEP_TASKS_PER_NODE=2(x"});
  expect_usage_error([] { expand_tasks_per_node("a"); }, {"'a' is not a task count"});
  const StepShape shape = step_shape("n[1-3]", "2(x3)");
  EXPECT_EQ(shape.nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(shape.total_tasks(), 6);
  expect_usage_error([] { step_shape("n[1-3]", "2(x2)"); }, {"does not match"});
}

TEST(StepShape, LayoutAgainstTheTaskCount) {
  const ParallelLayout inferred = resolve_layout(LayoutRequest{2, 2, 0}, 8);
  EXPECT_EQ(inferred.dp, 2);
  EXPECT_EQ(resolve_layout(std::nullopt, 6).dp, 6);
  expect_usage_error(
      [] {
        resolve_layout(LayoutRequest{2, 1, 2}, 8, "TENAX_LAYOUT");
      },
      {"TENAX_LAYOUT=tp=2,pp=1,dp=2", "tp*pp*dp = 4", "8 tasks"});
  expect_usage_error([] { resolve_layout(LayoutRequest{4, 1, 0}, 6); }, {"tp*pp = 4 does not divide", "6 tasks"});
}

TEST(StepShape, PlacementPolicies) {
  const StepShape shape = step_shape("n[1-4]", "2(x4)");
  const ParallelLayout layout{2, 2, 2};
  const SwitchTree tree = SwitchTree::from_topology_conf(
      "SwitchName=s1 Nodes=n[1,3]\nSwitchName=s2 Nodes=n[2,4]\nSwitchName=root Switches=s1,s2\n");
  EXPECT_FALSE(place_step(shape, layout, PlacementPolicy::None, tree).has_value());
  EXPECT_EQ(place_step(shape, layout, PlacementPolicy::Block, tree)->slot_of_rank,
            block_placement(shape.nodes, 2, layout).slot_of_rank);
  EXPECT_EQ(place_step(shape, layout, PlacementPolicy::Topology, tree)->slot_of_rank,
            place_ranks(shape.nodes, tree, 2, layout).slot_of_rank);
  expect_usage_error(
      [&] {
        place_step(step_shape("n[1-2]", "3,1"), ParallelLayout{1, 1, 4}, PlacementPolicy::Block, tree);
      },
      {"--tenax-placement=block", "3,1 tasks", "--ntasks-per-node"});
}

TEST(EpilogJobIds, AComponentOfAHeterogeneousJobAlsoRemovesTheLeadersCopies) {
  using Ids = std::vector<std::string>;
  EXPECT_EQ(epilog_job_ids("1234", nullptr).ids, Ids{"1234"}) << "not a heterogeneous job";
  EXPECT_EQ(epilog_job_ids("1234", "").ids, Ids{"1234"});
  EXPECT_EQ(epilog_job_ids("1235", "1234").ids, (Ids{"1235", "1234"})) << "a component: its own and the leader's";
  EXPECT_EQ(epilog_job_ids("1234", "1234").ids, Ids{"1234"}) << "the leader itself: once";
  EXPECT_EQ(epilog_job_ids("1235", "4294967295").ids, (Ids{"1235", "4294967295"})) << "the largest 32-bit id";
  EXPECT_TRUE(epilog_job_ids("1235", "1234").problem.empty());
}

TEST(EpilogJobIds, ALeaderIdThatIsNotAJobIdIsIgnoredAndNamed) {
  // The value names folders to remove: a pattern, a path or a sign must never widen what goes.
  for (const char* bad : {"12*", "../1234", "-1", "1234 ", "12345678901", "0x10", "1,2"}) {
    const EpilogJobIds named = epilog_job_ids("1235", bad);
    EXPECT_EQ(named.ids, std::vector<std::string>{"1235"}) << bad;
    EXPECT_NE(named.problem.find("SLURM_HET_JOB_ID='"), std::string::npos) << named.problem;
    EXPECT_NE(named.problem.find("only the copies named after job 1235"), std::string::npos) << named.problem;
  }
  // A long value is shown clipped.
  const EpilogJobIds named = epilog_job_ids("1235", std::string(500, 'x').c_str());
  EXPECT_LT(named.problem.size(), 200u) << named.problem;
}

}  // namespace
}  // namespace tenax::spank
