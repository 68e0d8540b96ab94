// The output pump's line splitting (LineSplitter) and its bounds against output no process manager would print: an
// endless line without a newline, and a stream that never pauses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <string>

#include "line_splitter.hpp"
#include "output_pump.hpp"

namespace tenax::launch {
namespace {

TEST(LineSplitter, ForwardsWholeLinesAndScansEach) {
  OutputScanner scanner;
  LineSplitter lines;
  std::string forward;
  EXPECT_FALSE(lines.feed(scanner, "step 1\nsrun: error: Node fail", forward));
  EXPECT_EQ(forward, "step 1\n") << "a line is forwarded only once it is complete";
  auto event = lines.feed(scanner, "ure on n4\nstep 2", forward);
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(event->node, "n4");
  EXPECT_EQ(forward, "step 1\nsrun: error: Node failure on n4\n");
  EXPECT_FALSE(lines.finish(scanner, forward));
  EXPECT_EQ(forward, "step 1\nsrun: error: Node failure on n4\nstep 2\n");
}

// A program writing without newlines: held back only up to kMaxHeldLine, then passed through in pieces. The end of
// such a line is a fragment, not the start of a line: once it was scanned as one, and a worker could fake a report.
TEST(LineSplitter, AnEndlessLineHoldsBoundedMemoryAndItsTailIsNoReport) {
  OutputScanner scanner;
  LineSplitter lines;
  std::string forward;
  const std::string chunk(16384, 'x');
  std::size_t fed = 0;
  for (int i = 0; i < 65; ++i) {
    EXPECT_FALSE(lines.feed(scanner, chunk, forward));
    fed += chunk.size();
    EXPECT_LE(lines.held(), LineSplitter::kMaxHeldLine);
  }
  EXPECT_FALSE(lines.feed(scanner, "srun: error: Node failure on n4\n", forward))
      << "the tail of an overlong line was scanned as a line";
  fed += 32;
  EXPECT_EQ(lines.held(), 0u);
  EXPECT_EQ(forward.size(), fed) << "every byte is forwarded exactly once";
  EXPECT_EQ(forward.back(), '\n');
  // The next line is a line again.
  auto event = lines.feed(scanner, "srun: error: Node failure on n5\n", forward);
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(event->node, "n5");
}

TEST(LineSplitter, ALineLongerThanAReportButShorterThanTheHoldLimitIsForwardedWhole) {
  OutputScanner scanner;
  LineSplitter lines;
  std::string forward;
  const std::string line(kMaxScannedLine * 4, 'y');
  EXPECT_FALSE(lines.feed(scanner, line.substr(0, 10000), forward));
  EXPECT_TRUE(forward.empty());
  EXPECT_FALSE(lines.feed(scanner, line.substr(10000) + "\n", forward));
  EXPECT_EQ(forward, line + "\n");
}

// A worker that writes without pause must not keep the launcher inside one pump() call: the watch loop (heartbeats,
// signals, hang detection) has to run between reads.
TEST(OutputPump, OneCallReadsABoundedAmount) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
  const int capacity = fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
  ASSERT_GE(capacity, static_cast<int>(2 * OutputPump::kMaxReadPerCall)) << "cannot enlarge a pipe to 1 MiB";
  const std::string line(1023, 'z');
  std::size_t written = 0;
  while (true) {
    ssize_t n = write(fds[1], (line + "\n").data(), line.size() + 1);
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  ASSERT_GT(written, 2 * OutputPump::kMaxReadPerCall);
  // The pump forwards to this process's stdout: send that to /dev/null for the call.
  const int saved_stdout = dup(STDOUT_FILENO);
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  dup2(null_fd, STDOUT_FILENO);
  int left = 0;
  {
    OutputPump pump(fds[0], -1);
    pump.pump(0);
    ioctl(fds[0], FIONREAD, &left);
    fds[0] = -1;  // closed by the pump
  }
  dup2(saved_stdout, STDOUT_FILENO);
  close(saved_stdout);
  close(null_fd);
  close(fds[1]);
  EXPECT_GE(static_cast<std::size_t>(left), written - OutputPump::kMaxReadPerCall);
  EXPECT_LT(static_cast<std::size_t>(left), written) << "the call read nothing";
}

}  // namespace
}  // namespace tenax::launch
