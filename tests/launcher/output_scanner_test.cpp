#include <gtest/gtest.h>

#include <csignal>
#include <optional>
#include <string>

#include "output_scanner.hpp"

namespace tenax::launch {
namespace {

TEST(OutputScanner, MpirunSignalReport) {
  OutputScanner s;
  auto e = s.scan("mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 9 (Killed).");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, FailureEvent::Kind::Signal);
  EXPECT_EQ(e->rank, 2);
  EXPECT_EQ(e->node, "vm");
  EXPECT_EQ(e->value, SIGKILL);
}

TEST(OutputScanner, MpirunExitCodeReportSpansTwoLines) {
  OutputScanner s;
  EXPECT_FALSE(s.scan("mpirun detected that one or more processes exited with non-zero status, thus causing"));
  EXPECT_FALSE(s.scan("  Process name: [[29268,1],1]"));
  auto e = s.scan("  Exit code:    64");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, FailureEvent::Kind::ExitCode);
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->value, 64);
  EXPECT_FALSE(s.scan("  Exit code:    3")) << "an exit code without a process name is not attributed";
}

TEST(OutputScanner, SrunTaskReports) {
  OutputScanner s;
  auto killed = s.scan("srun: error: n2: task 5: Killed");
  ASSERT_TRUE(killed.has_value());
  EXPECT_EQ(killed->kind, FailureEvent::Kind::Signal);
  EXPECT_EQ(killed->node, "n2");
  EXPECT_EQ(killed->rank, 5);
  EXPECT_EQ(killed->value, SIGKILL);
  auto exited = s.scan("srun: error: n3: tasks 4-7: Exited with exit code 76");
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->kind, FailureEvent::Kind::ExitCode);
  EXPECT_EQ(exited->rank, 4);
  EXPECT_EQ(exited->value, 76);
  auto segv = s.scan("srun: error: n1: task 0: Segmentation fault (core dumped)");
  ASSERT_TRUE(segv.has_value());
  EXPECT_EQ(segv->value, SIGSEGV);
}

TEST(OutputScanner, SrunNodeFailure) {
  OutputScanner s;
  auto e = s.scan("srun: error: Node failure on n4");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, FailureEvent::Kind::NodeLost);
  EXPECT_EQ(e->node, "n4");
}

// The SPANK plugin's refusal of a step, as srun relays it from slurmstepd or prints it itself.
TEST(OutputScanner, PluginRefusalOfTheStep) {
  for (const char* line : {"slurmstepd: error: tenax: --tenax-layout=tp=2,pp=1,dp=8: tp*pp*dp = 16 but the step has 8",
                           "slurmstepd-n1: error: tenax: --tenax-placement=topology needs the same number of tasks",
                           "srun: error: tenax: TENAX_LAYOUT=2x2: not three degrees"}) {
    OutputScanner s;
    auto e = s.scan(line);
    ASSERT_TRUE(e.has_value()) << line;
    EXPECT_EQ(e->kind, FailureEvent::Kind::Refused) << line;
    EXPECT_EQ(e->rank, -1);
    EXPECT_EQ(e->text, line);
  }
  OutputScanner s;
  for (const char* line :
       {"tenax: info: step 10", "slurmstepd: error: tenax: ", "slurmstepd-: error: tenax: x",
        "srun: error: n2: tenax: x", "rank 0: slurmstepd: error: tenax: x", "srun: warning: tenax: x"}) {
    EXPECT_FALSE(s.scan(line)) << line;
  }
}

TEST(OutputScanner, OrdinaryOutputIsNotAFailure) {
  OutputScanner s;
  for (const char* line : {"step 10 loss 0.25", "rank 1 exited on signal handling test", "srun: job 12 queued",
                           "final parameters checksum: 0123456789abcdef", "Exit code: 5"}) {
    EXPECT_FALSE(s.scan(line)) << line;
  }
}

TEST(OutputScanner, ReportFormsKeepTheirExactShape) {
  OutputScanner s;
  // The PID is not read, so any number of digits is fine; the node is the whole token.
  auto e = s.scan(
      "  mpirun noticed that process rank 3 with PID 123456789012345678901234 on node a.b-c_9 exited on signal "
      "11 (Segmentation fault).");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->node, "a.b-c_9");
  EXPECT_EQ(e->value, SIGSEGV);
  // srun's task list after the first task, and a node name holding a colon.
  auto listed = s.scan("srun: error: n:7: tasks 2,4-6: Exited with exit code 3");
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->node, "n:7");
  EXPECT_EQ(listed->rank, 2);
  EXPECT_EQ(listed->value, 3);
  EXPECT_TRUE(s.scan("Process name: [[1,2],7]") == std::nullopt);
  auto tabbed = s.scan("Exit code:\t9");
  ASSERT_TRUE(tabbed.has_value());
  EXPECT_EQ(tabbed->rank, 7);
  EXPECT_EQ(tabbed->value, 9);
  for (const char* line : {"process rank x with PID 0 on node vm exited on signal 9",
                           "process rank 1 with PID 0 on node  exited on signal 9",
                           "process rank 1 with PID 0 on node vm exited on signal x", "srun: error: n1 task 1: Killed",
                           "srun: error: n1: task x: Killed", "srun: error: n1: task 1 Killed",
                           "srun: error: n1: task 1: Exited with exit code x", "srun: error: Node failure on ",
                           "xsrun: error: Node failure on n1", "srun: error: : task 1: Killed"}) {
    EXPECT_FALSE(s.scan(line)) << line;
  }
}

// A number that does not fit an int is no report of a real rank, signal or exit code: it once escaped as
// std::out_of_range from std::stoi and ended tenax-launch.
TEST(OutputScanner, NumbersTooLargeForAnIntAreNotReports) {
  const std::string huge = "99999999999";
  OutputScanner s;
  for (const std::string& line :
       {"mpirun noticed that process rank " + huge + " with PID 0 on node vm exited on signal 9 (Killed).",
        "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal " + huge,
        "srun: error: n1: task " + huge + ": Killed", "srun: error: n1: task 1: Exited with exit code " + huge,
        "Process name: [[1,1]," + huge + "]"}) {
    std::optional<FailureEvent> event;
    EXPECT_NO_THROW(event = s.scan(line)) << line;
    EXPECT_FALSE(event) << line;
  }
  EXPECT_FALSE(s.scan("Exit code: 3")) << "a process name with a rank too large is not remembered";
  EXPECT_FALSE(s.scan("Process name: [[1,1],1]"));
  std::optional<FailureEvent> event;
  EXPECT_NO_THROW(event = s.scan("Exit code: " + huge));
  EXPECT_FALSE(event);
}

// Lines of tens of kilobytes once overflowed the stack inside std::regex. Reports are short: a line longer than
// kMaxScannedLine is not one, and is passed over in time linear in its length.
TEST(OutputScanner, LongLinesAreNoReportsAndCannotCrashTheScanner) {
  const std::string long_token(40000, 'a');
  OutputScanner s;
  for (const std::string& line :
       {"srun: error: " + long_token, "srun: error: n1: task 1: " + long_token + " Killed",
        "srun: error: Node failure on " + long_token,
        "mpirun noticed that process rank 1 with PID 0 on node " + long_token + " exited on signal 9 (Killed).",
        std::string(40000, ' ') + "srun: error: n1: task 1: Killed",
        "Process name: [[1,1]," + std::string(40000, '1')}) {
    std::optional<FailureEvent> event;
    EXPECT_NO_THROW(event = s.scan(line));
    EXPECT_FALSE(event) << line.substr(0, 60);
  }
  // Up to the bound, a report is still a report (a long host name).
  const std::string node(200, 'n');
  auto e = s.scan("srun: error: " + node + ": task 1: Killed");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->node, node);
  std::string longest = "srun: error: Node failure on ";
  longest += std::string(kMaxScannedLine - longest.size(), 'n');
  EXPECT_TRUE(s.scan(longest).has_value());
  EXPECT_FALSE(s.scan(longest + "n").has_value());
}

TEST(OutputScanner, SignalNames) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_from_description("Aborted (core dumped)"), SIGABRT);
  EXPECT_EQ(signal_from_description("something else"), 0);
}

// Every node-failure report is kept, once per node and in order, whatever came before it; at most kMaxLostNodes.
TEST(OutputScanner, KeepsEveryLostNodeOnceAndBoundsTheList) {
  OutputScanner s;
  s.scan("srun: error: n1: task 2: Exited with exit code 76");
  s.scan("srun: error: Node failure on n3");
  s.scan("srun: error: Node failure on n3");
  s.scan("srun: error: Node failure on n5");
  ASSERT_EQ(s.lost_nodes().size(), 2u);
  EXPECT_EQ(s.lost_nodes()[0].node, "n3");
  EXPECT_EQ(s.lost_nodes()[1].node, "n5");
  for (int i = 0; i < 1000; ++i)
    s.scan("srun: error: Node failure on x" + std::to_string(i));
  EXPECT_EQ(s.lost_nodes().size(), OutputScanner::kMaxLostNodes);
}

}  // namespace
}  // namespace tenax::launch
