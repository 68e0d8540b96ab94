// The plugin's parsers under hostile input: every value it reads from the job's environment, the options and the
// site's plugstack.conf arguments is bounded and refused with a message, never a crash, a wrap-around or an
// allocation sized by the input (slurmstepd and srun run this code).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "admin_config.hpp"
#include "binding.hpp"
#include "input_limits.hpp"
#include "job_request.hpp"
#include "job_settings.hpp"
#include "step_ranks.hpp"
#include "tenax/error.hpp"

namespace tenax::spank {
namespace {

// The message of the UsageError that `body` throws ("<no UsageError>" when it throws none).
template <typename Body>
std::string usage_error_of(Body&& body) {
  try {
    body();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

// Expects a UsageError whose message contains every one of `parts`, and is short enough for a terminal and a log.
template <typename Body>
void expect_refused(Body&& body, std::initializer_list<std::string_view> parts) {
  const std::string message = usage_error_of(body);
  for (auto part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in: " << message.substr(0, 400);
  EXPECT_LT(message.size(), 1200u) << message.substr(0, 400);
}

// tp*pp = 2^32 wrapped to 0 in int, and `tasks % 0` killed srun and slurmstepd with SIGFPE.
TEST(HostileLayout, ModelSizeThatWrapsIsRefusedNotDividedBy) {
  expect_refused(
      [] {
        resolve_layout(LayoutRequest{65536, 65536, 0}, 8, "--tenax-layout");
      },
      {"--tenax-layout", "tp*pp = 4294967296", "8 tasks"});
  expect_refused(
      [] {
        resolve_layout(LayoutRequest{65536, 65536, 65536}, 8, "TENAX_LAYOUT");
      },
      {"TENAX_LAYOUT=tp=65536,pp=65536,dp=65536", "281474976710656", "8 tasks"});
}

// The same layouts are refused where they are typed, before a job is queued.
TEST(HostileLayout, LayoutsLargerThanAStepAreRefusedAtTheprompt) {
  expect_refused([] { parse_layout("--tenax-layout", "tp=65536,pp=65536"); },
                 {"--tenax-layout=tp=65536,pp=65536", "tp*pp = 4294967296", "1048576 tasks"});
  expect_refused([] { parse_layout("TENAX_LAYOUT", "1024x1024x2"); },
                 {"TENAX_LAYOUT=1024x1024x2", "tp*pp*dp = 2097152", "1048576 tasks"});
  EXPECT_EQ(parse_layout("x", "1024x1024x1"), (LayoutRequest{1024, 1024, 1}));
  EXPECT_EQ(parse_layout("x", "tp=1024,pp=1024"), (LayoutRequest{1024, 1024, 0}));
}

// The task count a layout is resolved against is itself bounded (srun and slurmstepd read it from Slurm as uint32).
TEST(HostileLayout, TaskCountOutsideAStepsRangeIsRefused) {
  expect_refused([] { resolve_layout(std::nullopt, 0); }, {"0 tasks"});
  expect_refused([] { resolve_layout(std::nullopt, std::int64_t{3000000000}); }, {"3000000000 tasks", "1048576"});
  EXPECT_EQ(resolve_layout(std::nullopt, kMaxStepTasks).dp, kMaxStepTasks);
}

// "1(x2000000000)" once sized an 8 GB vector inside slurmstepd; counts once summed in int.
TEST(HostileStepEnv, TaskCountsAreBoundedBeforeAllocating) {
  expect_refused([] { expand_tasks_per_node("1(x2000000000)"); },
                 {"SLURM_STEP_TASKS_PER_NODE=1(x2000000000)", "2000000000", "1048576", "set by Slurm"});
  expect_refused([] { expand_tasks_per_node("1(x99999999999999999999)"); },
                 {"SLURM_STEP_TASKS_PER_NODE=1(x99999999999999999999)", "'99999999999999999999'"});
  expect_refused([] { expand_tasks_per_node("2147483647,2147483647"); },
                 {"SLURM_STEP_TASKS_PER_NODE=2147483647,2147483647", "'2147483647'", "65533"});
  expect_refused([] { expand_tasks_per_node("65533(x17)"); },
                 {"SLURM_STEP_TASKS_PER_NODE=65533(x17)", "1114061 tasks", "1048576"});
  expect_refused([] { expand_tasks_per_node("1(x1048576),1"); }, {"1048577 nodes", "1048576"});
  for (const char* bad : {"", "0", "1(x0)", "-1", "1(x-1)", "(x2)", "1(x)", "1(x2", "1(x2)(x3)", "1,,2", " 1"})
    expect_refused([&] { expand_tasks_per_node(bad); }, {"SLURM_STEP_TASKS_PER_NODE="});
  EXPECT_EQ(expand_tasks_per_node("65533(x16)").size(), 16u);
  EXPECT_EQ(step_shape("n[1-2]", "65533,1").total_tasks(), 65534);
}

TEST(HostileStepEnv, NodeListLongerThanAStepIsRefusedBeforeExpanding) {
  // 2,002,000 nodes (one range holds at most 65,536: Slurm's limit).
  expect_refused([] { step_shape("n[0-1999]x[0-1000]", "1(x2002000)"); },
                 {"SLURM_STEP_NODELIST", "2002000 nodes", "1048576"});
  expect_refused([] { step_shape("n[0-1]x[0-999999999999999999]", "1"); }, {"SLURM_STEP_NODELIST", "more than"});
}

TEST(HostileStepEnv, MessagesQuoteLongValuesInPart) {
  const std::string value(1 << 20, '7');
  expect_refused([&] { expand_tasks_per_node(value); }, {"SLURM_STEP_TASKS_PER_NODE=777", "1048576 characters"});
  expect_refused([&] { parse_layout("TENAX_LAYOUT", value); }, {"TENAX_LAYOUT=777", "1048576 characters"});
}

// What Slurm reports (spank_get_item, 32-bit unsigned) is compared with the environment without narrowing.
TEST(HostileStepEnv, SlurmsCountsAreComparedWithoutNarrowing) {
  const StepShape shape = step_shape("n[1-3]", "2(x3)");
  EXPECT_NO_THROW(check_step_items(shape, {6, 2, 2}));
  EXPECT_THROW(check_step_items(shape, {6 + (std::uint64_t{1} << 32), 0, 2}), Error);
  EXPECT_THROW(check_step_items(shape, {6, 3, 2}), Error);
  EXPECT_THROW(check_step_items(shape, {6, std::uint64_t{1} << 32, 2}), Error);
  EXPECT_THROW(check_step_items(shape, {6, 0, 2 + (std::uint64_t{1} << 32)}), Error);
}

// srun's check (local context) before any task starts.
TEST(HostileStepEnv, SrunChecksCountsLayoutAndEvenSplit) {
  JobSettings settings;
  settings.layout = LayoutRequest{65536, 65536, 0};
  settings.layout_source = "--tenax-layout";
  expect_refused([&] { check_step_request(settings, 8, 2); }, {"tp*pp = 4294967296"});
  settings.layout.reset();
  expect_refused([&] { check_step_request(settings, 3000000000u, 2); }, {"3000000000 tasks", "1048576"});
  settings.placement = PlacementPolicy::Block;
  expect_refused([&] { check_step_request(settings, 6, 4); }, {"--tenax-placement=block", "6 tasks", "4 nodes"});
  EXPECT_NO_THROW(check_step_request(settings, 8, 4));
  settings.placement = PlacementPolicy::None;
  EXPECT_NO_THROW(check_step_request(settings, 6, 4));
}

TEST(HostileOptions, EveryOptionGoesThroughOneParser) {
  const AdminConfig admin = AdminConfig::parse({"max_restarts=5"});
  JobRequest request;
  apply_option(request, TenaxOption::Enable, "", admin);
  EXPECT_TRUE(request.enabled);
  apply_option(request, TenaxOption::Layout, "tp=2", admin);
  EXPECT_EQ(request.layout, (LayoutRequest{2, 1, 0}));
  apply_option(request, TenaxOption::MaxRestarts, "5", admin);
  EXPECT_EQ(request.max_restarts, 5);
  expect_refused([&] { apply_option(request, TenaxOption::Layout, "tp=65536,pp=65536", admin); },
                 {"--tenax-layout=tp=65536,pp=65536"});
  expect_refused([&] { apply_option(request, TenaxOption::MaxRestarts, "6", admin); }, {"--tenax-max-restarts=6"});
  expect_refused([&] { apply_option(request, TenaxOption::CkptDir, "/" + std::string(5000, 'a'), admin); },
                 {"--tenax-ckpt-dir=/aaa", "5001 characters", "at most 4095"});
  // The node-local directory reaches root's job epilog (through the job control environment): bounded and checked the
  // same way, and a node name that would make it too long is refused there too.
  expect_refused([&] { apply_option(request, TenaxOption::CkptLocalDir, "/" + std::string(5000, 'a'), admin); },
                 {"--tenax-ckpt-local-dir=/aaa", "5001 characters", "at most 4095"});
  expect_refused([&] { apply_option(request, TenaxOption::CkptLocalDir, "/a\n/b", admin); }, {"control characters"});
  const std::string near_limit = parse_ckpt_local_dir("d", "/" + std::string(4090, 'a') + "/%n");
  expect_refused([&] { expand_dir_pattern("node-local checkpoint directory", near_limit, "u", "1", "node-name"); },
                 {"at most 4095"});
}

// A checkpoint directory longer than PATH_MAX can never be created; it once went into the environment as given.
TEST(HostileOptions, CheckpointPathsAreBounded) {
  const AdminConfig open = AdminConfig::parse({});
  EXPECT_EQ(parse_ckpt_dir("d", "/" + std::string(4094, 'a'), open).size(), 4095u);
  expect_refused([&] { parse_ckpt_dir("TENAX_CHECKPOINT_DIR", "/" + std::string(4095, 'a'), open); },
                 {"TENAX_CHECKPOINT_DIR=/aaa", "4096 characters", "at most 4095"});
  std::string many_users = "/c";
  for (int i = 0; i < 200; ++i)
    many_users += "/%u";
  const std::string pattern = parse_ckpt_dir("d", many_users, open);
  expect_refused([&] { expand_dir_pattern("checkpoint directory", pattern, std::string(32, 'u'), "1"); },
                 {"/c/%u/%u", "at most 4095"});
}

TEST(HostileAdminConfig, PathsAreBoundedAndMessagesQuoteInPart) {
  for (const char* key : {"hw_topology", "topology_file", "ckpt_root"}) {
    expect_refused([&] { AdminConfig::parse({std::string(key) + "=/" + std::string(5000, 'a')}); },
                   {std::string("plugstack.conf: ") + key + "=/aaa", "5001 characters", "at most 4095"});
  }
  expect_refused([] { AdminConfig::parse({std::string(1 << 20, 'k') + "=1"}); }, {"unknown key 'kkk"});
  expect_refused([] { AdminConfig::parse({std::string(1 << 20, 'k')}); }, {"is not key=value"});
  expect_refused([] { AdminConfig::parse({"max_spares=" + std::string(1 << 20, '9')}); }, {"max_spares=999"});
}

// The message of the tenax::Error that `body` throws ("<no Error>" when it throws none).
template <typename Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no Error>";
}

// One NUMA node holding the CPUs of `cpuset` (hwloc's bitmap text), os_index `node`.
std::string one_numa_node(const std::string& cpuset, int node = 0) {
  return R"(<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset=")" +
         cpuset + R"(" complete_cpuset=")" + cpuset + R"(" nodeset="0x1" complete_nodeset="0x1" gp_index="1">
    <object type="NUMANode" os_index=")" +
         std::to_string(node) + R"(" cpuset=")" + cpuset + R"(" complete_cpuset=")" + cpuset +
         R"(" nodeset="0x1" complete_nodeset="0x1" gp_index="2" local_memory="1073741824"/>
    <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x1" complete_nodeset="0x1"
            gp_index="3"/>
  </object>
</topology>
)";
}

// hw_topology is the admin's file, and a topology is machine-written text that can be damaged: every malformed or
// oversized input is an Error naming the source (the plugin then binds nothing), never a crash or an unbounded
// allocation.
TEST(HostileTopology, MalformedXmlIsAnError) {
  EXPECT_EQ(hardware_from_xml(one_numa_node("0x00000001"), "t.xml").numa.at(0), std::vector<int>{0});
  for (const std::string& text :
       {std::string("<topology"), std::string("not xml at all"), std::string("<?xml version=\"1.0\"?><topology>"),
        std::string("<?xml version=\"1.0\"?><topology version=\"2.0\"><object type=\"Machine\"></topology>"),
        std::string("<?xml version=\"1.0\"?><topology version=\"2.0\"><object type=\"Bogus\"/></topology>"),
        std::string(100000, '<')}) {
    SCOPED_TRACE(text.substr(0, 60));
    const std::string message = error_of([&] { hardware_from_xml(text, "hw_topology=/etc/node.xml"); });
    EXPECT_NE(message, "<no Error>");
    EXPECT_NE(message.find("hw_topology=/etc/node.xml: "), std::string::npos) << message;
  }
  EXPECT_NE(error_of([] { hardware_from_xml("", "t.xml"); }).find("empty"), std::string::npos);
}

TEST(HostileTopology, CpuAndNumaIdsAreBounded) {
  // CPU 65535 is the last accepted (kMaxCpuId); 65536 needs one more 32-bit word.
  std::string at_limit = "0x80000000";
  for (int word = 0; word < 2047; ++word)
    at_limit += ",0x00000000";
  // hwloc adds the PU (CPU 0) to its parents' sets.
  EXPECT_EQ(hardware_from_xml(one_numa_node(at_limit), "t.xml").numa.at(0), (std::vector<int>{0, 65535}));
  const std::string above = "0x00000001," + at_limit.substr(11) + ",0x00000000";
  EXPECT_NE(error_of([&] { hardware_from_xml(one_numa_node(above), "t.xml"); }).find("beyond index 65535"),
            std::string::npos);
  // An infinite set ("0xf...f" repeated without end in hwloc's notation).
  EXPECT_NE(error_of([] { hardware_from_xml(one_numa_node("0xf...f"), "t.xml"); }), "<no Error>");
  EXPECT_NE(error_of([] { hardware_from_xml(one_numa_node("0x00000001", 5000), "t.xml"); }).find("NUMA node 5000"),
            std::string::npos);
}

TEST(HostileTopology, FilesAreBoundedAndRegular) {
  EXPECT_NE(error_of([] { load_hardware("/nonexistent/node.xml"); }).find("hw_topology=/nonexistent/node.xml: "),
            std::string::npos);
  EXPECT_NE(error_of([] { load_hardware("/"); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(error_of([] { load_hardware("/dev/zero"); }).find("not a regular file"), std::string::npos);
  const std::string huge(kMaxTopologyXmlBytes + 1, ' ');
  EXPECT_NE(error_of([&] { hardware_from_xml(huge, "t.xml"); }).find("more than the 64 MiB"), std::string::npos);
}

// slot * GPUs once overflowed int when 65533 tasks shared the 65532 GPUs of the job's CUDA_VISIBLE_DEVICES (and the
// list was copied whatever its length): such a list is refused now, and the arithmetic is 64-bit.
TEST(HostileBinding, ManyTasksSharingFewerGpusDoNotOverflow) {
  BindingRequest request;
  request.tasks = 65533;
  request.slot = 65532;
  std::string devices;
  for (int i = 0; i < 65532; ++i)
    devices += (i ? "," : "") + std::to_string(i);
  request.visible_devices = devices;
  expect_refused([&] { plan_binding(NodeHardware{}, request); },
                 {"CUDA_VISIBLE_DEVICES=0,1,2", "65532 devices", "4096"});
  request.visible_devices = devices.substr(0, devices.find(",4096,"));                         // 0..4095
  EXPECT_EQ(plan_binding(NodeHardware{}, request).cuda_visible_devices, std::string("4095"));  // 65532*4096/65533
  // Without GPU binding the list is not read at all.
  request.visible_devices = devices;
  request.bind_gpus = false;
  EXPECT_FALSE(plan_binding(NodeHardware{}, request).cuda_visible_devices.has_value());
}

}  // namespace
}  // namespace tenax::spank
