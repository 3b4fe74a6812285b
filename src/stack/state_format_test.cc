// The format versions of the state dir's records (util/format_version.h): each is written
// with its version; a file from a newer volstack is refused by name, by readers and writers,
// and stays byte for byte as it was; a file from before versions were written still reads.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "export/loop_bindings.h"
#include "stack/lvm_state.h"
#include "stack/pool_cache.h"
#include "util/file_util.h"
#include "util/state_file.h"

namespace volstack::stack {
namespace {

class StateFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/volstack-format-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(PrepareStateDir(dir_).ok());
    ::mkdir((dir_ + "/lvm").c_str(), 0700);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Plant(const std::string& path, const std::string& text) {
    ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  }
  std::string Read(const std::string& path) { return ReadWholeFile(path).value(); }
  // A refusal that names the file and the version, as the user sees it.
  void ExpectNewerRefused(const Status& s, const std::string& path) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), EOPNOTSUPP) << s.ToString();
    EXPECT_EQ(s.message(), path +
                               ": format version 9 is newer than this volstack reads (1); "
                               "the file is left as it is");
  }

  template <typename T>
  void ExpectNewerRefused(const Result<T>& r, const std::string& path) {
    ASSERT_FALSE(r.ok());
    ExpectNewerRefused(r.status(), path);
  }

  std::string dir_;
};

TEST_F(StateFormatTest, PoolCache) {
  const std::string path = PoolCachePath(dir_);
  ASSERT_TRUE(AddToPoolCache(dir_, {"tank", 7, {"/a"}}).ok());
  EXPECT_NE(Read(path).find("\"version\": 1"), std::string::npos);

  const std::string old = R"({"pools":[{"name":"old","guid":"5","vdevs":["/b"]}]})";
  Plant(path, old);
  auto pools = ReadPoolCache(dir_);
  ASSERT_TRUE(pools.ok()) << pools.status().ToString();
  ASSERT_EQ(pools->size(), 1u);
  EXPECT_EQ((*pools)[0].name, "old");

  const std::string newer = R"({"version":9,"pools":[],"zones":{}})";
  Plant(path, newer);
  ExpectNewerRefused(ReadPoolCache(dir_), path);
  ExpectNewerRefused(AddToPoolCache(dir_, {"tank", 7, {"/a"}}), path);
  ExpectNewerRefused(RemoveFromPoolCache(dir_, "tank"), path);
  EXPECT_EQ(Read(path), newer);

  Plant(path, R"({"version":"one","pools":[]})");
  EXPECT_EQ(ReadPoolCache(dir_).status().message(), path + ": field 'version' is not a number");
}

TEST_F(StateFormatTest, LvmLists) {
  for (const std::string& path : {LvmDevicesPath(dir_), LvmActivePath(dir_)}) {
    ASSERT_TRUE(AddToList(dir_, path, {"vg/lv"}).ok());
    EXPECT_EQ(Read(path), "# volstack list format 1\nvg/lv\n");

    Plant(path, "vg/a\n# a comment\nvg/b\n");  // before versions were written
    auto lines = ReadListFile(path);
    ASSERT_TRUE(lines.ok()) << lines.status().ToString();
    EXPECT_EQ(*lines, (std::vector<std::string>{"vg/a", "vg/b"}));

    const std::string newer = "# volstack list format 9\nvg/a\n";
    Plant(path, newer);
    ExpectNewerRefused(ReadListFile(path), path);
    ExpectNewerRefused(AddToList(dir_, path, {"vg/c"}), path);
    ExpectNewerRefused(RemoveFromList(dir_, path, {"vg/a"}), path);
    ExpectNewerRefused(WriteListFile(dir_, path, {"vg/c"}), path);
    EXPECT_EQ(Read(path), newer);

    Plant(path, "# volstack list format x\n");
    EXPECT_EQ(ReadListFile(path).status().message(),
              path + ": field 'format' is not a number: 'x'");
  }
}

TEST_F(StateFormatTest, LoopBindings) {
  const std::string path = exportfs::LoopBindingsPath(dir_);
  ASSERT_TRUE(exportfs::UpdateLoopBindings(dir_, [](std::vector<exportfs::LoopBinding>& loops) {
                exportfs::LoopBinding b;
                b.device = "/dev/loop3";
                b.file = "/d/vg/lv";
                loops.push_back(b);
                return Status::Ok();
              }).ok());
  EXPECT_NE(Read(path).find("\"version\": 1"), std::string::npos);

  Plant(path, R"({"loops":[{"device":"/dev/loop1","file":"/d/x"}]})");
  auto loops = exportfs::LoadLoopBindings(dir_);
  ASSERT_TRUE(loops.ok()) << loops.status().ToString();
  ASSERT_EQ(loops->size(), 1u);
  EXPECT_EQ((*loops)[0].device, "/dev/loop1");

  const std::string newer = R"({"version":9,"loops":[]})";
  Plant(path, newer);
  ExpectNewerRefused(exportfs::LoadLoopBindings(dir_), path);
  ExpectNewerRefused(exportfs::UpdateLoopBindings(dir_,
                                                  [](std::vector<exportfs::LoopBinding>& loops) {
                                                    loops.clear();
                                                    return Status::Ok();
                                                  }),
                     path);
  EXPECT_EQ(Read(path), newer);
}

}  // namespace
}  // namespace volstack::stack
