// Switch trees from topology.conf text and from SLURM_TOPOLOGY_ADDR values.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/topology.hpp"

namespace tenax {
namespace {

using Names = std::vector<std::string>;

Names names_of_path(const SwitchTree& tree, const std::string& node) {
  Names out;
  for (int s : tree.path_of_node(node))
    out.push_back(tree.switches()[s].name);
  return out;
}

TEST(TopologyConf, ParsesTwoLevelsCommentsContinuationsAndLinkSpeed) {
  const char* text = R"(# The lab's fabric
SwitchName=s0 Nodes=tux[0-3] LinkSpeed=900   # first leaf
switchname=s1 \
    nodes=tux[4-5],gpu07
SwitchName=s2 Nodes=tux[6-7]

SwitchName=top Switches=s[0-2]
)";
  const SwitchTree tree = SwitchTree::from_topology_conf(text);
  ASSERT_EQ(tree.switches().size(), 4u);
  EXPECT_EQ(tree.height(), 2);
  EXPECT_EQ(names_of_path(tree, "tux2"), (Names{"s0", "top"}));
  EXPECT_EQ(names_of_path(tree, "gpu07"), (Names{"s1", "top"}));
  EXPECT_EQ(names_of_path(tree, "tux7"), (Names{"s2", "top"}));
  EXPECT_TRUE(tree.path_of_node("tux8").empty());
  EXPECT_EQ(tree.switch_of_node("tux8"), -1);
  const Switch& top = tree.switches()[tree.switches()[tree.switch_of_node("tux0")].parent];
  EXPECT_EQ(top.name, "top");
  EXPECT_EQ(top.level, 2);
  EXPECT_EQ(top.parent, -1);
  EXPECT_EQ(top.child_switches.size(), 3u);
}

TEST(TopologyConf, UnevenTreeTakesLevelsFromTheHighestChild) {
  // s0 hangs directly from the core; s1 goes through an aggregation switch: core is level 3.
  const SwitchTree tree = SwitchTree::from_topology_conf(
      "SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b[1-2]\nSwitchName=agg Switches=s1\n"
      "SwitchName=core Switches=s0,agg\n");
  EXPECT_EQ(tree.height(), 3);
  EXPECT_EQ(names_of_path(tree, "a1"), (Names{"s0", "core"}));
  EXPECT_EQ(names_of_path(tree, "b2"), (Names{"s1", "agg", "core"}));
  EXPECT_EQ(tree.switches()[tree.switch_of_node("a1")].level, 1);
}

TEST(TopologyConf, SeveralTopSwitchesAreAllowed) {
  const SwitchTree tree = SwitchTree::from_topology_conf("SwitchName=s0 Nodes=a1\nSwitchName=s1 Nodes=b1\n");
  EXPECT_EQ(tree.height(), 1);
  EXPECT_EQ(names_of_path(tree, "b1"), (Names{"s1"}));
}

void expect_conf_error(const std::string& text, const std::string& fragment) {
  try {
    SwitchTree::from_topology_conf(text, "test.conf");
    ADD_FAILURE() << "no error for:\n" << text.substr(0, 300);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << std::string(e.what()).substr(0, 300);
  }
}

TEST(TopologyConf, BadFilesNameTheLineAndTheFix) {
  expect_conf_error("SwitchName=s0 Nodes=a1\nSwitchName=s0 Nodes=a2\n", "test.conf:2: switch \"s0\" is defined twice");
  expect_conf_error("SwitchName=s0 Nodes=a1 Speed=3\n", "test.conf:1: unknown key \"Speed\"");
  expect_conf_error("SwitchName=top Switches=s[0-1]\nSwitchName=s0 Nodes=a1\n", "\"s1\", which has no SwitchName=");
  expect_conf_error("SwitchName=s0 Nodes=a1\nSwitchName=x Switches=s0\nSwitchName=y Switches=s0\n", "two parents");
  expect_conf_error("SwitchName=s0 Switches=s1\nSwitchName=s1 Switches=s0\n", "cycle");
  expect_conf_error("SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=a2\n", "node \"a2\" is attached to both");
  expect_conf_error("Nodes=a1\n", "no SwitchName=");
  expect_conf_error("SwitchName=s0 Nodes=a[1-\n", "test.conf:1: hostlist");
  expect_conf_error("SwitchName=s0 junk\n", "is not key=value");
  expect_conf_error("SwitchName=s0 Nodes=a1 Nodes=a2\n", "given twice");
  expect_conf_error("BlockName=b1 Nodes=a1\n", "topology/block");
  // Control characters are shown escaped: a NUL once cut slurmd's log line where it stood.
  expect_conf_error(std::string("SwitchName=s0 Nodes=a1\n\0SwitchName=s1 Nodes=a2\n", 47),
                    "test.conf:2: unknown key \"\\x00SwitchName\"; topology.conf lines take");
  expect_conf_error("SwitchName=s0 Nodes=a1 Speed\x1b[2J\n", "\"Speed\\x1b[2J\"");
}

// A scratch folder of this test process's own (tests run in parallel).
std::string scratch_dir() {
  const std::string dir = ::testing::TempDir() + "tenax_topology_test." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(TopologyConf, ReadsFilesAndReportsMissingOnes) {
  const std::string path = scratch_dir() + "/topology.conf";
  {
    std::ofstream out(path);
    out << "SwitchName=leaf Nodes=n[1-2]\n";
  }
  EXPECT_EQ(names_of_path(SwitchTree::from_topology_conf_file(path), "n2"), (Names{"leaf"}));
  std::remove(path.c_str());
  EXPECT_THROW(SwitchTree::from_topology_conf_file(path), IoError);
}

// The cap on hosts holds for the whole file, not per Nodes= list: each line below is under it, the two together not.
TEST(TopologyConf, HostCapCoversTheWholeFile) {
  // 2,500,000 names each (one range holds at most 65,536: Slurm's limit).
  expect_conf_error("SwitchName=s0 Nodes=a[0-1999]x[0-1249]\nSwitchName=s1 Nodes=b[0-1999]x[0-1249]\n",
                    "test.conf:2: the file lists more than 4194304 nodes and switches");
  // Nodes= and Switches= of one line count together too.
  expect_conf_error("SwitchName=s0 Nodes=a[0-1999]x[0-1249] Switches=b[0-1999]x[0-1249]\n",
                    "test.conf:1: the file lists more than 4194304 nodes and switches");
}

TEST(TopologyConf, FileSizeIsCapped) {
  std::string text = "SwitchName=s0 Nodes=a1\n";
  text += std::string(kMaxTopologyConfBytes, '#');
  expect_conf_error(text, "larger than 16777216 bytes");
  // The file is read no further than the cap.
  const std::string path = scratch_dir() + "/big.conf";
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  try {
    SwitchTree::from_topology_conf_file(path);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": larger than 16777216 bytes"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// A chain of switches once meant one stack frame per level when levels were computed: 200,000 overflowed the stack.
TEST(TopologyConf, DeepTreesAreRefusedWithoutRecursion) {
  std::string text;
  for (int i = 0; i < 200000; ++i)
    text += "SwitchName=s" + std::to_string(i) + " Switches=s" + std::to_string(i + 1) + "\n";
  text += "SwitchName=s200000 Nodes=n1\n";
  expect_conf_error(text, "more than 64 levels");
  // A cycle is still reported as one, however long.
  std::string cycle;
  for (int i = 0; i < 200000; ++i)
    cycle += "SwitchName=s" + std::to_string(i) + " Switches=s" + std::to_string((i + 1) % 200000) + "\n";
  expect_conf_error(cycle, "cycle");
  // 64 levels are fine.
  std::string deep;
  for (int i = 0; i < 63; ++i)
    deep += "SwitchName=s" + std::to_string(i) + " Switches=s" + std::to_string(i + 1) + "\n";
  deep += "SwitchName=s63 Nodes=n1\n";
  EXPECT_EQ(SwitchTree::from_topology_conf(deep).height(), 64);
}

TEST(TopologyAddr, DeepPatternsAreRefused) {
  std::string pattern, address;
  for (int i = 0; i < 100000; ++i) {
    pattern += "switch.";
    address += "s" + std::to_string(i) + ".";
  }
  try {
    SwitchTree::from_topology_addresses({address + "n1"}, pattern + "node");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 64 levels"), std::string::npos)
        << std::string(e.what()).substr(0, 300);
    EXPECT_LT(std::string(e.what()).size(), 1000u);
  }
}

TEST(TopologyAddr, BuildsTheTreeFromAddresses) {
  const SwitchTree tree =
      SwitchTree::from_topology_addresses({"s1.s3.n7", "s1.s3.n8", "s1.s4.n9", "s1.s3.n7"}, "switch.switch.node");
  EXPECT_EQ(tree.height(), 2);
  EXPECT_EQ(names_of_path(tree, "n7"), (Names{"s3", "s1"}));
  EXPECT_EQ(names_of_path(tree, "n9"), (Names{"s4", "s1"}));
  EXPECT_EQ(tree.switches()[tree.switch_of_node("n8")].nodes, (Names{"n7", "n8"}));
}

TEST(TopologyAddr, NodeOnlyPatternGivesAnEmptyTree) {
  const SwitchTree tree = SwitchTree::from_topology_addresses({"n1", "n2"}, "node");
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.height(), 0);
}

TEST(TopologyAddr, InconsistentAddressesAreRefused) {
  EXPECT_THROW(SwitchTree::from_topology_addresses({"s1.n1"}, "switch.switch.node"), UsageError);
  EXPECT_THROW(SwitchTree::from_topology_addresses({"s1.s2.n1"}, "switch.rack.node"), UsageError);
  EXPECT_THROW(SwitchTree::from_topology_addresses({"s1..n1"}, "switch.switch.node"), UsageError);
  EXPECT_THROW(SwitchTree::from_topology_addresses({"a.x.n1", "b.x.n2"}, "switch.switch.node"), UsageError);
  EXPECT_THROW(SwitchTree::from_topology_addresses({"a.x.n1", "a.y.n1"}, "switch.switch.node"), UsageError);
}

}  // namespace
}  // namespace tenax
