// The one-writer-per-directory lock (core/directory_lock.hpp). Two DirectoryLock objects in one process stand for two
// writers: each take() opens the file anew, and flock(2) locks conflict between open file descriptions even within one
// process.
#include "core/directory_lock.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "tenax/error.hpp"

namespace tenax {
namespace {

using std::chrono::milliseconds;

const LockUse kRunDir{"--run-dir", "give this one another --run-dir", ""};

class DirectoryLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TENAX_UNIT_TEST_TMP) + "/dirlock-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string lock_path() const { return dir_ + "/" + kLaunchLockFile; }
  std::string lock_text() const {
    std::ifstream in(lock_path());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // The message take() refuses with ("" when it does not).
  std::string refusal(const LockOwner& owner, milliseconds wait = milliseconds(0), const LockUse& use = kRunDir) {
    try {
      DirectoryLock::take(dir_, use, owner, wait);
    } catch (const UsageError& error) {
      return error.what();
    }
    return "";
  }

  std::string dir_;
};

TEST_F(DirectoryLockTest, ASecondLauncherIsRefusedNamingTheFirstUntilTheFirstLetsGo) {
  {
    DirectoryLock first = DirectoryLock::take(dir_, kRunDir, {}, milliseconds(0));
    EXPECT_TRUE(first.held());
    EXPECT_EQ(first.warning(), "");
    EXPECT_EQ(lock_text().rfind("pid=" + std::to_string(getpid()) + " host=", 0), 0u) << lock_text();

    const std::string message = refusal({});
    EXPECT_NE(message.find("--run-dir '" + dir_ + "' is in use by another tenax-launch (pid " +
                           std::to_string(getpid()) + " on host "),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("give this one another --run-dir"), std::string::npos) << message;
    EXPECT_NE(message.find("remove " + lock_path() + " and start again"), std::string::npos) << message;
    // Another Slurm job, and the same run of one Slurm job (two launchers in one batch script), are refused too.
    EXPECT_NE(refusal({"77", 0}), "");
  }
  // Released with its holder; the file stays (removing it would race with a launcher that just opened it).
  EXPECT_TRUE(std::filesystem::exists(lock_path()));
  DirectoryLock second = DirectoryLock::take(dir_, kRunDir, {"77", 0}, milliseconds(0));
  EXPECT_TRUE(second.held());
  EXPECT_NE(lock_text().find(" job=77 restart=0 since="), std::string::npos) << lock_text();
  EXPECT_NE(refusal({"77", 0}), "") << "two launchers of one run of a job";
}

// A directory removed or emptied by hand while a run holds it takes the lock file away, and the lock then kept nobody
// out (a second launcher was admitted and the two moved each other's checkpoints aside): renew() takes it again, and
// refuses once another launcher got there first.
TEST_F(DirectoryLockTest, ALockFileRemovedUnderItsHolderIsTakenAgainBeforeTheNextAttempt) {
  DirectoryLock first = DirectoryLock::take(dir_, kRunDir, {}, milliseconds(0));
  EXPECT_EQ(first.renew({}), "") << "nothing changed";
  std::filesystem::remove_all(dir_);
  const std::string note = first.renew({});
  EXPECT_NE(note.find("its lock file " + lock_path() + " was removed while this run held it"), std::string::npos)
      << note;
  EXPECT_TRUE(first.held());
  EXPECT_NE(refusal({}), "") << "a second launcher is kept out again";
  // Removed again, and another launcher locked the new file before this one looked: this one must stop.
  std::filesystem::remove(lock_path());
  DirectoryLock second = DirectoryLock::take(dir_, kRunDir, {"88", 0}, milliseconds(0));
  try {
    first.renew({});
    ADD_FAILURE() << "the directory is another launcher's now";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("is in use by another tenax-launch"), std::string::npos) << error.what();
  }
}

TEST_F(DirectoryLockTest, TheEarlierRunOfARequeuedJobIsWaitedForThenTakenOver) {
  DirectoryLock earlier = DirectoryLock::take(dir_, kRunDir, {"77", 1}, milliseconds(0));
  struct stat before {};
  ASSERT_EQ(::stat(lock_path().c_str(), &before), 0);

  EXPECT_NE(refusal({"78", 2}), "") << "another job's lock is never taken over";
  EXPECT_NE(refusal({"77", 1}), "") << "nor the same run's";
  EXPECT_NE(refusal({"77", 0}), "") << "nor a later run's";

  const auto t0 = std::chrono::steady_clock::now();
  DirectoryLock requeued = DirectoryLock::take(dir_, kRunDir, {"77", 2}, milliseconds(300));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(300)) << "taken over without waiting";
  EXPECT_TRUE(requeued.held());
  EXPECT_NE(requeued.warning().find("was still locked by another tenax-launch (pid " + std::to_string(getpid()) +
                                    " on host "),
            std::string::npos)
      << requeued.warning();
  struct stat after {};
  ASSERT_EQ(::stat(lock_path().c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino) << "the new holder must lock a new file, not the one still held";
  EXPECT_NE(lock_text().find(" job=77 restart=2 "), std::string::npos) << lock_text();
  // The new holder's lock is a real one: the next launcher is refused by it, not let in.
  EXPECT_NE(refusal({}), "");
}

TEST_F(DirectoryLockTest, RemovingTheLockFileOfALauncherThatIsGoneLetsTheNextOneIn) {
  DirectoryLock stuck = DirectoryLock::take(dir_, kRunDir, {}, milliseconds(0));  // as if its host were lost
  ASSERT_NE(refusal({}), "");
  ASSERT_EQ(::unlink(lock_path().c_str()), 0);  // the way out the refusal names
  DirectoryLock next = DirectoryLock::take(dir_, kRunDir, {}, milliseconds(0));
  EXPECT_TRUE(next.held());
}

TEST_F(DirectoryLockTest, ALockFileThatIsNotAFileIsAUsageErrorNamingIt) {
  std::filesystem::create_symlink("/dev/null", lock_path());
  std::string message = refusal({});
  EXPECT_NE(message.find("its lock file " + lock_path() + " cannot be opened ("), std::string::npos) << message;
  std::filesystem::remove(lock_path());
  std::filesystem::create_directory(lock_path());
  message = refusal({});
  EXPECT_NE(message.find("Make it a regular file this user can write (or remove it)"), std::string::npos) << message;
}

// A training program's checkpointer (rank 0) locks its checkpoint directory as a launcher does: two plain mpirun runs
// saving into one directory removed each other's unfinished saves. Launchers and programs keep each other out, and
// the refusal says which holds the directory; the program's own launcher, which holds the directory for the run, is
// worked under rather than refused by.
TEST_F(DirectoryLockTest, ProgramsAndLaunchersKeepEachOtherOutButAProgramWorksUnderItsOwnLauncher) {
  const LockUse checkpoints{"the checkpoint directory", "give each run a checkpoint directory of its own", ""};
  const LockOwner program{"", 0, LockRole::Program};
  {
    DirectoryLock first = DirectoryLock::take(dir_, checkpoints, program, milliseconds(0));
    EXPECT_TRUE(first.held());
    EXPECT_FALSE(first.admitted());
    EXPECT_NE(lock_text().find(" role=program"), std::string::npos) << lock_text();
    std::string message = refusal(program, milliseconds(0), checkpoints);
    EXPECT_NE(message.find("the checkpoint directory '" + dir_ +
                           "' is in use by another checkpointer (another Engine) of this very program, pid " +
                           std::to_string(getpid()) +
                           ": one checkpointer saves into a directory at a time. Let the other go first (its "
                           "destructor releases the directory), or give each run a checkpoint directory of its own"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("gone for good"), std::string::npos) << message;
    // The holder as another process records itself (the line is what is shown; the lock is the flock).
    std::ofstream(lock_path()) << "pid=4242 host=elsewhere role=program job=9 restart=0 since=2026-11-30T01:00:00Z\n";
    message = refusal({}, milliseconds(0), kRunDir);
    EXPECT_NE(message.find("--run-dir '" + dir_ +
                           "' is in use by a training program (its rank 0: pid 4242 on host elsewhere, Slurm job 9, "
                           "started 2026-11-30T01:00:00Z): two runs saving into one checkpoint directory would remove "
                           "each other's unfinished checkpoints and mix their steps. Wait for that run to end, or give "
                           "this one another --run-dir. If that program is gone for good"),
              std::string::npos)
        << message;
    EXPECT_NE(refusal(program, milliseconds(0), {"the checkpoint directory", "fix", "elsewhere:4242"}), "")
        << "a program holding the directory is never admitted: only a launcher's lock is worked under";
  }
  DirectoryLock launcher = DirectoryLock::take(dir_, kRunDir, {}, milliseconds(0));
  std::string message = refusal(program, milliseconds(0), checkpoints);
  EXPECT_NE(message.find("is in use by another tenax-launch (pid " + std::to_string(getpid())), std::string::npos)
      << message;
  EXPECT_NE(message.find("would remove each other's unfinished checkpoints"), std::string::npos) << message;
  EXPECT_NE(message.find("or give each run a checkpoint directory of its own. If that launcher is gone"),
            std::string::npos)
      << message;
  EXPECT_NE(refusal(program, milliseconds(0), {"the checkpoint directory", "fix", "otherhost:1"}), "")
      << "another launcher's lock is not this program's";

  const std::string identity = lock_holder_identity();
  const std::size_t colon = identity.rfind(':');
  ASSERT_NE(colon, std::string::npos) << identity;
  EXPECT_EQ(identity.substr(colon + 1), std::to_string(getpid()));
  EXPECT_NE(lock_text().find("host=" + identity.substr(0, colon) + " "), std::string::npos) << lock_text();
  DirectoryLock under =
      DirectoryLock::take(dir_, {"the checkpoint directory", "fix", identity}, program, milliseconds(0));
  EXPECT_FALSE(under.held());
  EXPECT_TRUE(under.admitted());
  EXPECT_EQ(under.warning(), "");
  EXPECT_NE(refusal({}), "") << "the launcher still holds it";
}

// Under tenax-launch, a rank 0 of an earlier attempt that still holds the lock (a rank on a lost node may linger past
// the relaunch) is waited for and then taken over, as an earlier run of a requeued job is: refused, the new attempt
// would end the run as a usage error. Only an earlier attempt of the same launcher's run is.
TEST_F(DirectoryLockTest, AnEarlierAttemptOfTheSameLauncherIsWaitedForThenTakenOver) {
  const LockUse checkpoints{"the checkpoint directory", "give each run a checkpoint directory of its own", ""};
  auto program = [](const char* launcher, int attempt) {
    LockOwner owner;
    owner.role = LockRole::Program;
    owner.launcher = launcher;
    owner.attempt = attempt;
    return owner;
  };
  DirectoryLock lingering = DirectoryLock::take(dir_, checkpoints, program("n0:77", 1), milliseconds(0));
  EXPECT_NE(lock_text().find(" launcher=n0:77 attempt=1 "), std::string::npos) << lock_text();
  EXPECT_NE(refusal(program("n0:77", 1), milliseconds(0), checkpoints), "") << "the same attempt";
  EXPECT_NE(refusal(program("n0:78", 2), milliseconds(0), checkpoints), "") << "another launcher's run";
  EXPECT_NE(refusal(program("", 2), milliseconds(0), checkpoints), "") << "a program under no launcher";
  const auto t0 = std::chrono::steady_clock::now();
  DirectoryLock next = DirectoryLock::take(dir_, checkpoints, program("n0:77", 2), milliseconds(300));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(300)) << "taken over without waiting";
  EXPECT_TRUE(next.held());
  EXPECT_NE(next.warning().find("was still locked by another checkpointer (another Engine) of this very program"),
            std::string::npos)
      << next.warning();
  EXPECT_NE(next.warning().find(", an earlier attempt of this run, after a wait of 0.3 s; tenax-launch ended that "
                                "attempt before starting this one"),
            std::string::npos)
      << next.warning();
}

// A tenax-launch older than programs' locks names no role in its lock line and passes no TENAX_LAUNCHER: its own
// program works under it (admit_older_launcher) rather than being refused and ending the run. A line that names a
// role, or no line at all, is not such a launcher.
TEST_F(DirectoryLockTest, AProgramWorksUnderAnOlderLauncherThatNamesNoRole) {
  LockUse under_old{"the checkpoint directory", "fix", ""};
  under_old.admit_older_launcher = true;
  const LockOwner program{"", 0, LockRole::Program};
  DirectoryLock old_launcher = DirectoryLock::take(dir_, kRunDir, {}, milliseconds(0));
  std::ofstream(lock_path()) << "pid=4242 host=elsewhere since=2026-11-01T00:00:00Z\n";
  DirectoryLock under = DirectoryLock::take(dir_, under_old, program, milliseconds(0));
  EXPECT_TRUE(under.admitted());
  EXPECT_NE(refusal(program, milliseconds(0), {"the checkpoint directory", "fix", ""}), "")
      << "a program not run by a launcher is refused by it";
  std::ofstream(lock_path()) << "pid=4242 host=elsewhere role=launcher since=2026-11-01T00:00:00Z\n";
  EXPECT_NE(refusal(program, milliseconds(0), under_old), "") << "a launcher that names itself is not an older one";
  std::ofstream(lock_path(), std::ios::trunc).flush();
  const std::string message = refusal(program, milliseconds(0), under_old);
  EXPECT_NE(message.find("is in use by another run (its lock file does not say which)"), std::string::npos)
      << "a holder that has not written its line yet: " << message;
}

// Writers admitted under their launcher hold no flock of their own; two of them in one program on one directory (two
// Engines) are still kept apart.
TEST_F(DirectoryLockTest, TwoWritersOfOneProgramAdmittedOnOneDirectoryAreKeptApart) {
  DirectoryLock launcher = DirectoryLock::take(dir_, kRunDir, {}, milliseconds(0));
  const LockUse under{"the checkpoint directory", "give each run a checkpoint directory of its own",
                      lock_holder_identity()};
  const LockOwner program{"", 0, LockRole::Program};
  {
    DirectoryLock first = DirectoryLock::take(dir_, under, program, milliseconds(0));
    ASSERT_TRUE(first.admitted());
    const std::string message = refusal(program, milliseconds(0), under);
    EXPECT_NE(message.find("is in use by another checkpointer (another Engine) of this very program: one "
                           "checkpointer saves into a directory at a time"),
              std::string::npos)
        << message;
    DirectoryLock moved = std::move(first);  // the claim goes with the lock
    EXPECT_NE(refusal(program, milliseconds(0), under), "");
  }
  EXPECT_TRUE(DirectoryLock::take(dir_, under, program, milliseconds(0)).admitted()) << "released with its writer";
}

TEST(LockHolder, OnlyPlainShortValuesAreBelievedAndShown) {
  LockOwner owner = parse_lock_holder("pid=12 host=n1 job=345 restart=2 since=2026-11-29T15:00:00Z\n");
  EXPECT_EQ(owner.job_id, "345");
  EXPECT_EQ(owner.restart_count, 2);
  owner = parse_lock_holder("job=$(reboot) restart=-1");
  EXPECT_EQ(owner.job_id, "");
  EXPECT_EQ(owner.restart_count, 0);
  owner = parse_lock_holder("job=12 restart=99999999999999999999 job");
  EXPECT_EQ(owner.job_id, "12");
  EXPECT_EQ(owner.restart_count, 0);
  EXPECT_EQ(parse_lock_holder(std::string(600, 'x')).job_id, "");
  // What a launcher writes is what it reads back.
  owner = parse_lock_holder(lock_holder_line({"4242", 3}));
  EXPECT_EQ(owner.job_id, "4242");
  EXPECT_EQ(owner.restart_count, 3);
  EXPECT_EQ(owner.role, LockRole::Launcher);
  EXPECT_EQ(parse_lock_holder(lock_holder_line({"", 0, LockRole::Program})).role, LockRole::Program);
  // Lines launchers wrote before programs took locks name no role: a launcher's.
  EXPECT_EQ(parse_lock_holder("pid=12 host=n1 role=program\n").role, LockRole::Program);
  EXPECT_EQ(parse_lock_holder("pid=12 host=n1 since=2026-11-29T15:00:00Z\n").role, LockRole::Launcher);
  owner = parse_lock_holder(lock_holder_line({"", 0, LockRole::Program, "n0:77", 3}));
  EXPECT_EQ(owner.launcher, "n0:77");
  EXPECT_EQ(owner.attempt, 3);
  EXPECT_EQ(parse_lock_holder("launcher=n0:77 attempt=-2").attempt, 0);
}

}  // namespace
}  // namespace tenax
