#include "export/devfs_tree.h"

#include <gtest/gtest.h>

#include "bdev/memory_device.h"

namespace volstack::exportfs {
namespace {

bdev::BlockDevicePtr Mem(uint64_t size = 1 << 20) { return bdev::MemoryDevice::Create(size); }

TEST(DevfsTree, AddCreatesDirectoriesAndFiles) {
  DevfsTree tree;
  auto added = tree.Add("trunk/funk", Mem());
  ASSERT_TRUE(added.ok());
  ASSERT_TRUE(added->has_value());
  EXPECT_EQ((*added)->parent, DevfsTree::kRootIno);
  EXPECT_EQ((*added)->name, "trunk");

  auto dir = tree.Lookup(DevfsTree::kRootIno, "trunk");
  ASSERT_TRUE(dir);
  EXPECT_TRUE(S_ISDIR(dir->st_mode));
  auto file = tree.Lookup(dir->st_ino, "funk");
  ASSERT_TRUE(file);
  EXPECT_TRUE(S_ISREG(file->st_mode));
  EXPECT_EQ(file->st_size, 1 << 20);
  EXPECT_EQ(file->st_blksize, 4096);
  EXPECT_NE(tree.Open(file->st_ino), nullptr);
  EXPECT_EQ(tree.Open(dir->st_ino), nullptr);

  // A second device in the same directory adds only its file.
  auto second = tree.Add("trunk/other", Mem());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->parent, dir->st_ino);
  auto entries = tree.ReadDir(dir->st_ino);
  ASSERT_TRUE(entries);
  ASSERT_EQ(entries->size(), 4u);  // . .. funk other
  EXPECT_EQ((*entries)[2].name, "funk");
}

TEST(DevfsTree, CollisionsLeaveTheTreeUnchanged) {
  DevfsTree tree;
  ASSERT_TRUE(tree.Add("a/b", Mem()).ok());
  EXPECT_EQ(tree.Add("a/b", Mem()).status().code(), EEXIST);
  EXPECT_EQ(tree.Add("a", Mem()).status().code(), EEXIST);      // a is a directory
  EXPECT_EQ(tree.Add("a/b/c", Mem()).status().code(), EEXIST);  // a/b is a file
  EXPECT_EQ(tree.Add("../x", Mem()).status().code(), EINVAL);
  EXPECT_EQ(tree.node_count(), 3u);
}

TEST(DevfsTree, RemovePrunesEmptyDirectoriesAndFreesOnForget) {
  DevfsTree tree;
  ASSERT_TRUE(tree.Add("vg/lv", Mem()).ok());
  ASSERT_TRUE(tree.Add("vg/sub/deep", Mem()).ok());
  auto vg = tree.Lookup(DevfsTree::kRootIno, "vg");
  auto lv = tree.Lookup(vg->st_ino, "lv");
  ASSERT_TRUE(lv);
  auto io = tree.Open(lv->st_ino);

  auto removed = tree.Remove("vg/sub/deep");
  ASSERT_TRUE(removed.ok());
  ASSERT_EQ(removed->size(), 2u);  // deep, then sub; vg still holds lv
  EXPECT_EQ((*removed)[0].name, "deep");
  EXPECT_EQ((*removed)[1].name, "sub");

  removed = tree.Remove("vg/lv");
  ASSERT_TRUE(removed.ok());
  ASSERT_EQ(removed->size(), 2u);
  EXPECT_FALSE(tree.Lookup(DevfsTree::kRootIno, "vg"));
  // The kernel still holds lv and vg: their inodes stay until forgotten; the open file's
  // I/O object stays usable.
  EXPECT_TRUE(tree.GetAttr(lv->st_ino));
  EXPECT_EQ(tree.GetAttr(lv->st_ino)->st_nlink, 0u);
  std::vector<uint8_t> buf(512);
  EXPECT_TRUE(io->io.Read(0, buf).ok());
  tree.Forget(lv->st_ino, 1);
  tree.Forget(vg->st_ino, 1);
  EXPECT_FALSE(tree.GetAttr(lv->st_ino));
  EXPECT_EQ(tree.node_count(), 1u);  // the root
  EXPECT_EQ(tree.Remove("vg/lv").status().code(), ENOENT);
}

TEST(DevfsTree, InodesAreNeverReused) {
  DevfsTree tree;
  ASSERT_TRUE(tree.Add("x", Mem()).ok());
  const auto first = tree.Lookup(DevfsTree::kRootIno, "x")->st_ino;
  tree.Forget(first, 1);
  ASSERT_TRUE(tree.Remove("x").ok());
  ASSERT_TRUE(tree.Add("x", Mem()).ok());
  EXPECT_NE(tree.Lookup(DevfsTree::kRootIno, "x")->st_ino, first);
}

// A removed volume must be destroyable while the kernel still remembers the inode.
TEST(DevfsTree, RemoveReleasesTheDeviceEvenWhileTheKernelHoldsTheInode) {
  DevfsTree tree;
  std::weak_ptr<bdev::BlockDevice> weak;
  {
    auto device = Mem();
    weak = device;
    ASSERT_TRUE(tree.Add("trunk/funk", device).ok());
  }
  const auto dir = tree.Lookup(DevfsTree::kRootIno, "trunk")->st_ino;
  const auto file = tree.Lookup(dir, "funk")->st_ino;
  auto held = tree.Open(file);  // an open file handle
  ASSERT_TRUE(tree.Remove("trunk/funk").ok());
  EXPECT_FALSE(weak.expired());  // the handle still works
  held.reset();
  EXPECT_TRUE(weak.expired());  // the remembered inode does not pin it
  EXPECT_EQ(tree.Open(file), nullptr);
  const auto st = tree.GetAttr(file);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->st_nlink, 0u);
  EXPECT_EQ(st->st_size, 0);
}

}  // namespace
}  // namespace volstack::exportfs
