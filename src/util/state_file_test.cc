#include "util/state_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "util/file_util.h"

namespace volstack {
namespace {

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/state_file_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/state";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // Appends `line` to `path` as a read-modify-write.
  Status Append(const std::string& path, const std::string& line) {
    return UpdateStateFile(dir_, path, [&](const std::optional<std::string>& old) {
      return Result<std::optional<std::string>>(old.value_or("") + line + "\n");
    });
  }

  std::string root_, dir_;
};

std::set<std::string> Lines(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.insert(l);
  return out;
}

// Eight processes and, in each, two threads append at once: no update is lost.
TEST_F(StateFileTest, ConcurrentUpdatesAreAllKept) {
  const std::string path = dir_ + "/list";
  constexpr int kProcs = 8, kThreads = 2, kEach = 6;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; p++) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      bool ok = true;
      std::vector<std::thread> threads;
      std::atomic<bool> failed{false};
      for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < kEach; i++) {
            const std::string line =
                std::to_string(p) + "." + std::to_string(t) + "." + std::to_string(i);
            if (!Append(path, line).ok()) failed = true;
          }
        });
      }
      for (auto& t : threads) t.join();
      ok = !failed;
      ::_exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto text = ReadWholeFile(path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(Lines(*text).size(), size_t{kProcs * kThreads * kEach});
  // No temporary file is left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    const std::string name = e.path().filename();
    EXPECT_TRUE(name == "list" || name == "lock") << name;
  }
}

// The lock is reentrant within a thread: an update made while holding it does not deadlock.
TEST_F(StateFileTest, LockIsReentrantInOneThread) {
  auto lock = StateDirLock::Take(dir_);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  EXPECT_TRUE(Append(dir_ + "/a", "x").ok());
}

// A symlink planted at the name the writers once used for their temporary file (and at a
// log's name) is never followed: the file it points at stays as it was.
TEST_F(StateFileTest, PlantedSymlinksAreNotFollowed) {
  ASSERT_TRUE(PrepareStateDir(dir_).ok());
  ASSERT_EQ(::mkdir((dir_ + "/lvm").c_str(), 0700), 0);
  const std::string victim = root_ + "/victim";
  ASSERT_TRUE(WriteFileAtomically(victim, "precious\n").ok());
  ASSERT_EQ(::symlink(victim.c_str(), (dir_ + "/lvm/devices.tmp").c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (dir_ + "/daemon.log").c_str()), 0);

  ASSERT_TRUE(Append(dir_ + "/lvm/devices", "/dev/loop0").ok());
  auto fd = OpenStateFile(dir_ + "/daemon.log", O_WRONLY | O_APPEND);
  EXPECT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), ELOOP);

  EXPECT_EQ(*ReadWholeFile(victim), "precious\n");
  EXPECT_EQ(*ReadWholeFile(dir_ + "/lvm/devices"), "/dev/loop0\n");
  struct stat st;
  ASSERT_EQ(::lstat((dir_ + "/lvm/devices.tmp").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

// A state dir others can write to is refused, and nothing is written in it.
TEST_F(StateFileTest, WritableByOthersIsRefused) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  Status st = CheckStateDir(dir_);
  EXPECT_EQ(st.code(), EPERM);
  EXPECT_NE(st.message().find("writable by group or others"), std::string::npos) << st.message();
  EXPECT_EQ(Append(dir_ + "/zpool.cache", "x").code(), EPERM);
  EXPECT_TRUE(std::filesystem::is_empty(dir_));

  ASSERT_EQ(::chmod(dir_.c_str(), 0775), 0);  // group-writable too
  EXPECT_EQ(CheckStateDir(dir_).code(), EPERM);
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  EXPECT_TRUE(CheckStateDir(dir_).ok());
}

// An ancestor writable by others is refused unless it is sticky (as /tmp).
TEST_F(StateFileTest, AncestorsAreChecked) {
  const std::string parent = root_ + "/shared";
  ASSERT_EQ(::mkdir(parent.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(parent.c_str(), 0777), 0);
  EXPECT_EQ(CheckStateDir(parent + "/state").code(), EPERM);
  ASSERT_EQ(::chmod(parent.c_str(), 01777), 0);
  EXPECT_TRUE(CheckStateDir(parent + "/state").ok());
  EXPECT_TRUE(PrepareStateDir(parent + "/state").ok());
}

TEST_F(StateFileTest, OwnedBySomeoneElseIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir_.c_str(), 4242, 4242), 0);
  Status st = CheckStateDir(dir_);
  EXPECT_EQ(st.code(), EPERM);
  EXPECT_NE(st.message().find("owned by uid 4242"), std::string::npos) << st.message();
}

TEST_F(StateFileTest, NotADirectoryIsRefused) {
  ASSERT_TRUE(WriteFileAtomically(dir_, "x").ok());
  EXPECT_EQ(CheckStateDir(dir_).code(), ENOTDIR);
}

// An error from the modifier leaves the file as it was.
TEST_F(StateFileTest, FailedModifyWritesNothing) {
  ASSERT_TRUE(Append(dir_ + "/f", "a").ok());
  Status st = UpdateStateFile(dir_, dir_ + "/f", [](const std::optional<std::string>&) {
    return Result<std::optional<std::string>>(Status::InvalidArgument("no"));
  });
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_EQ(*ReadWholeFile(dir_ + "/f"), "a\n");
}

}  // namespace
}  // namespace volstack
