#include <gtest/gtest.h>

#include <csignal>

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

TEST(OutputScanner, OrdinaryOutputIsNotAFailure) {
  OutputScanner s;
  for (const char* line : {"step 10 loss 0.25", "rank 1 exited on signal handling test", "srun: job 12 queued",
                           "final parameters checksum: 0123456789abcdef", "Exit code: 5"}) {
    EXPECT_FALSE(s.scan(line)) << line;
  }
}

TEST(OutputScanner, SignalNames) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_from_description("Aborted (core dumped)"), SIGABRT);
  EXPECT_EQ(signal_from_description("something else"), 0);
}

}  // namespace
}  // namespace tenax::launch
