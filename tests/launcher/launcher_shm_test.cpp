// tenax-launch and Open MPI's shared-memory files: real mpirun, real ranks of the test worker, a real kill -9.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "launch_harness.hpp"

namespace tenax::test {
namespace {

using std::chrono::seconds;

const std::vector<std::string> kWorker = {"--steps", "30", "--checkpoint-every", "5", "--step-ms", "30"};

// The attempt's folder of Open MPI's shared-memory files, from a rank's environment.
std::string shm_folder_of(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string key = "OMPI_MCA_btl_vader_backing_directory=";
  std::string entry;
  while (std::getline(in, entry, '\0'))
    if (entry.rfind(key, 0) == 0) return entry.substr(key.size());
  return "";
}

// Open MPI's shared-memory transport keeps a file per rank in /dev/shm that a killed rank never removes: each
// attempt's go into a folder of its own, removed once the attempt has ended; a folder a launcher killed outright left
// is removed by the next launcher.
TEST(LauncherFaults, AKilledRanksSharedMemoryFilesGoWithItsAttempt) {
  // A folder of a launcher that no longer runs (a child's pid, reaped), with a file in it, unlocked.
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  const char* slurm_node = std::getenv("SLURMD_NODENAME");
  const std::string node = slurm_node != nullptr && *slurm_node != '\0' ? slurm_node : host;
  const std::string left = "/dev/shm/tenax-launch.mpi-" + node + "-" + std::to_string(gone) + "-0";
  std::filesystem::create_directory(left);
  std::ofstream(left + "/vader_segment.left.0") << "x";

  ScratchDir dir("shm-folders");
  Launch launch(quick_restart_launcher_args(dir, 2), kWorker, dir / "out.txt");
  auto beat = wait_for_step(dir / "run", 1, 1, 3, seconds(40));
  ASSERT_TRUE(beat.has_value()) << launch.output();
  const std::string folder = shm_folder_of(beat->pid);
  ASSERT_EQ(folder.rfind("/dev/shm/tenax-launch.mpi-" + node + "-" + std::to_string(launch.pid()) + "-", 0), 0u)
      << "'" << folder << "'";
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    files += entry.path().filename().string().rfind("vader_segment.", 0) == 0 ? 1 : 0;
  EXPECT_GE(files, 2u) << "the ranks' shared-memory files are not in " << folder;
  ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGKILL), 0);

  ASSERT_EQ(launch.wait(seconds(60)), 0) << launch.output();
  const std::string output = launch.output();
  EXPECT_FALSE(std::filesystem::exists(folder)) << "the first attempt's folder is left: " << output;
  const std::string mine = "tenax-launch.mpi-" + node + "-" + std::to_string(launch.pid()) + "-";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
    EXPECT_NE(entry.path().filename().string().rfind(mine, 0), 0u) << entry.path() << " is left: " << output;
  EXPECT_FALSE(std::filesystem::exists(left)) << output;
  EXPECT_NE(output.find("removed an earlier launcher's shared-memory folder " + left), std::string::npos) << output;
}

}  // namespace
}  // namespace tenax::test
