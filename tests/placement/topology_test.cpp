// Switch trees from topology.conf text and from SLURM_TOPOLOGY_ADDR values.
#include <gtest/gtest.h>

#include <cstdio>
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
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
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
}

TEST(TopologyConf, ReadsFilesAndReportsMissingOnes) {
  const std::string path = ::testing::TempDir() + "tenax_topology_test.conf";
  {
    std::ofstream out(path);
    out << "SwitchName=leaf Nodes=n[1-2]\n";
  }
  EXPECT_EQ(names_of_path(SwitchTree::from_topology_conf_file(path), "n2"), (Names{"leaf"}));
  std::remove(path.c_str());
  EXPECT_THROW(SwitchTree::from_topology_conf_file(path), IoError);
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
