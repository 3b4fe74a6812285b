// dm-thin pool metadata as volstack reads it: the superblock thin_restore writes decodes
// (checksum included), btrees are looked up and walked with every node checked, and a
// ThinDevice reads mapped blocks from the data device and zeroes elsewhere, refusing
// metadata that disagrees with the VG or points outside the pool.
#include "lvm/thin_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>

#include "bdev/memory_device.h"
#include "lvm/thin_btree.h"
#include "lvm/thin_format.h"
#include "util/coding.h"

namespace volstack::lvm {
namespace {

constexpr uint64_t kMetaBlocks = 64;
constexpr uint32_t kChunkSectors = 128;  // 64 KiB data blocks
constexpr uint64_t kChunk = kChunkSectors * 512;
constexpr uint64_t kDataBlocks = 32;

// Block 0 of a metadata file thin_restore 0.9.0 wrote (trans 1, 64 KiB blocks, 100 data
// blocks, 1024 metadata blocks): its non-zero bytes.
TEST(ThinFormatTest, DecodesTheSuperblockThinRestoreWrites) {
  std::vector<uint8_t> b(kThinBlockBytes, 0);
  const std::pair<int, uint8_t> bytes[] = {
      {0, 0x89},   {1, 0xc0},   {2, 0x8a},   {3, 0x60},   {32, 0xba},  {33, 0x52},
      {34, 0x9c},  {35, 0x01},  {40, 0x02},  {44, 0x01},  {48, 0x01},  {64, 0x64},
      {72, 0x03},  {80, 0x04},  {88, 0x05},  {193, 0x04}, {200, 0x0c}, {208, 0x01},
      {216, 0x02}, {320, 0x07}, {328, 0x06}, {336, 0x80}, {340, 0x08}, {345, 0x04}};
  for (auto [i, v] : bytes) b[i] = v;
  auto sb = DecodeThinSuperblock(b);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  EXPECT_EQ(sb->trans_id, 1u);
  EXPECT_EQ(sb->time, 1u);
  EXPECT_EQ(sb->data_block_size, 128u);
  EXPECT_EQ(sb->metadata_nr_blocks, 1024u);
  EXPECT_EQ(sb->data_sm.nr_blocks, 100u);
  EXPECT_EQ(sb->data_sm.nr_allocated, 3u);
  EXPECT_EQ(sb->metadata_sm.bitmap_root, 1u);
  EXPECT_EQ(sb->data_mapping_root, 7u);
  EXPECT_EQ(sb->device_details_root, 6u);
  // Encoding gives back the same bytes, checksum included.
  std::vector<uint8_t> again(kThinBlockBytes);
  EncodeThinSuperblock(*sb, again);
  EXPECT_EQ(again, b);
  b[48] = 2;  // another transaction id under the old checksum
  EXPECT_TRUE(DecodeThinSuperblock(b).status().IsCorruption());
  EXPECT_TRUE(DecodeThinSuperblock(std::vector<uint8_t>(kThinBlockBytes, 0)).status().IsNotFound());
}

std::vector<uint8_t> U64s(std::initializer_list<uint64_t> v) {
  std::vector<uint8_t> out(v.size() * 8);
  size_t i = 0;
  for (uint64_t x : v) EncodeLE64(out.data() + 8 * i++, x);
  return out;
}

void PutNode(bdev::BlockDevice& meta, uint64_t at, bool internal, std::vector<uint64_t> keys,
             std::vector<uint8_t> values, uint32_t value_size) {
  std::vector<uint8_t> b(kThinBlockBytes);
  EncodeBtreeNode(b, at, internal, keys, values, value_size);
  ASSERT_TRUE(meta.Write(at * kThinBlockBytes, b).ok());
}

uint64_t Map(uint64_t data, uint32_t time = 0) { return data << kThinTimeBits | time; }

// A pool with thin device 7: virtual blocks 0, 1 and 5 -> data 3, 4 and 9, in a two-level
// tree (an internal node over two leaves); device 8 maps nothing.
struct Pool {
  std::shared_ptr<bdev::MemoryDevice> meta =
      bdev::MemoryDevice::Create(kMetaBlocks * kThinBlockBytes);
  std::shared_ptr<bdev::MemoryDevice> data = bdev::MemoryDevice::Create(kDataBlocks * kChunk);
  ThinSuperblock sb;

  Pool() {
    PutNode(*meta, 10, false, {0, 1}, U64s({Map(3), Map(4, 2)}), 8);
    PutNode(*meta, 11, false, {5}, U64s({Map(9)}), 8);
    PutNode(*meta, 12, true, {0, 5}, U64s({10, 11}), 8);
    PutNode(*meta, 13, false, {}, {}, 8);
    PutNode(*meta, 20, false, {7, 8}, U64s({12, 13}), 8);  // the top tree
    std::vector<uint8_t> details(2 * kThinDeviceDetailsBytes, 0);
    EncodeLE64(details.data(), 3);
    PutNode(*meta, 21, false, {7, 8}, details, kThinDeviceDetailsBytes);
    sb.trans_id = 5;
    sb.data_block_size = kChunkSectors;
    sb.metadata_nr_blocks = kMetaBlocks;
    sb.data_sm.nr_blocks = kDataBlocks;
    sb.data_mapping_root = 20;
    sb.device_details_root = 21;
    WriteSb();
    for (uint64_t b = 0; b < kDataBlocks; b++) {
      // Each block's halves differ, so a read at the wrong offset inside a block shows.
      std::vector<uint8_t> v(kChunk, uint8_t(0x40 + b));
      std::fill(v.begin() + kChunk / 2, v.end(), uint8_t(0x80 + b));
      EXPECT_TRUE(data->Write(b * kChunk, v).ok());
    }
  }
  void WriteSb() {
    std::vector<uint8_t> b(kThinBlockBytes);
    EncodeThinSuperblock(sb, b);
    ASSERT_TRUE(meta->Write(0, b).ok());
  }
  ThinDevice::Config Config(uint64_t id = 7) {
    ThinDevice::Config c;
    c.name = "vg/thin";
    c.size = 16 * kChunk;
    c.meta = meta;
    c.data = data;
    c.device_id = id;
    c.chunk_sectors = kChunkSectors;
    c.transaction_id = 5;
    return c;
  }
};

TEST(ThinBtreeTest, LookupAndWalkThroughAnInternalNode) {
  Pool p;
  ThinBtreeReader t(p.meta, kMetaBlocks);
  auto v = t.Lookup(12, 5, 8);
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ(DecodeLE64((*v)->data()) >> kThinTimeBits, 9u);
  auto v1 = t.Lookup(12, 1, 8);
  ASSERT_TRUE(v1.ok() && v1->has_value());
  EXPECT_EQ(DecodeLE64((*v1)->data()), Map(4, 2));
  for (uint64_t absent : {2, 4, 6, 1000}) {
    auto a = t.Lookup(12, absent, 8);
    ASSERT_TRUE(a.ok());
    EXPECT_FALSE(a->has_value()) << absent;
  }
  std::vector<uint64_t> keys;
  ASSERT_TRUE(t.Walk(12, 8, [&](uint64_t k, std::span<const uint8_t>) {
                 keys.push_back(k);
                 return Status::Ok();
               }).ok());
  EXPECT_EQ(keys, (std::vector<uint64_t>{0, 1, 5}));
}

TEST(ThinBtreeTest, BadNodesAreCorruptionNamingTheBlock) {
  Pool p;
  ThinBtreeReader t(p.meta, kMetaBlocks);
  // A flipped byte: the checksum catches it.
  std::vector<uint8_t> b(kThinBlockBytes);
  ASSERT_TRUE(p.meta->Read(11 * kThinBlockBytes, b).ok());
  b[40] ^= 1;
  ASSERT_TRUE(p.meta->Write(11 * kThinBlockBytes, b).ok());
  auto r = t.Lookup(12, 5, 8);
  EXPECT_TRUE(r.status().IsCorruption());
  EXPECT_NE(r.status().message().find("block 11"), std::string::npos) << r.status().ToString();
  // A node pointing at itself: the depth limit ends the walk.
  PutNode(*p.meta, 30, true, {0}, U64s({30}), 8);
  EXPECT_TRUE(t.Walk(30, 8, [](uint64_t, auto) { return Status::Ok(); }).IsCorruption());
  EXPECT_TRUE(t.Lookup(30, 0, 8).status().IsCorruption());
  // Outside the metadata, or a leaf of the wrong value size.
  EXPECT_TRUE(t.Lookup(kMetaBlocks, 0, 8).status().IsCorruption());
  EXPECT_TRUE(t.Lookup(10, 0, 24).status().IsCorruption());
  // A node stored at another block than it says.
  std::vector<uint8_t> moved(kThinBlockBytes);
  EncodeBtreeNode(moved, 10, false, std::vector<uint64_t>{0}, U64s({Map(1)}), 8);
  ASSERT_TRUE(p.meta->Write(31 * kThinBlockBytes, moved).ok());
  EXPECT_TRUE(t.Lookup(31, 0, 8).status().IsCorruption());
}

TEST(ThinDeviceTest, MappedBlocksReadFromTheDataDeviceAndTheRestAsZeroes) {
  Pool p;
  auto dev = ThinDevice::Open(p.Config());
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_TRUE((*dev)->read_only());
  EXPECT_EQ((*dev)->mapping().size(), 3u);
  std::vector<uint8_t> buf(6 * kChunk);
  ASSERT_TRUE((*dev)->Read(0, buf).ok());
  auto expect = [&](uint64_t vblock, int value) {  // the first half's value
    for (uint64_t i = 0; i < kChunk; i += 4096) {
      const int want = value && i >= kChunk / 2 ? value + 0x40 : value;
      ASSERT_EQ(buf[vblock * kChunk + i], want) << "virtual block " << vblock << " +" << i;
    }
  };
  expect(0, 0x43);
  expect(1, 0x44);
  expect(2, 0);
  expect(4, 0);
  expect(5, 0x49);
  // A read across a block edge, not block-aligned.
  std::vector<uint8_t> edge(1024);
  ASSERT_TRUE((*dev)->Read(kChunk - 512, edge).ok());
  EXPECT_EQ(edge[0], 0x83);
  EXPECT_EQ(edge[600], 0x44);
  auto alloc = (*dev)->QueryAllocation(0, 8 * kChunk);
  ASSERT_TRUE(alloc.ok());
  EXPECT_EQ(*alloc, (std::vector<bdev::AllocationExtent>{{0, 2 * kChunk, true},
                                                         {2 * kChunk, 3 * kChunk, false},
                                                         {5 * kChunk, kChunk, true},
                                                         {6 * kChunk, 2 * kChunk, false}}));
  EXPECT_FALSE((*dev)->Write(0, std::vector<uint8_t>(4096, 1)).ok());
  // Device 8 exists and maps nothing: all zeroes.
  auto empty = ThinDevice::Open(p.Config(8));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  ASSERT_TRUE((*empty)->Read(0, buf).ok());
  EXPECT_EQ(buf, std::vector<uint8_t>(buf.size(), 0));
}

TEST(ThinDeviceTest, RefusesMetadataThatDisagreesWithTheVgOrThePool) {
  {
    Pool p;
    auto c = p.Config();
    c.transaction_id = 4;
    auto r = ThinDevice::Open(c);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption());
    EXPECT_NE(r.status().message().find("transaction_id is 5"), std::string::npos);
  }
  {
    Pool p;
    auto c = p.Config();
    c.chunk_sectors = 256;
    EXPECT_TRUE(ThinDevice::Open(c).status().IsCorruption());
  }
  {
    Pool p;
    EXPECT_TRUE(ThinDevice::Open(p.Config(9)).status().IsCorruption());  // no such device
  }
  {
    Pool p;
    p.sb.flags = 1;  // needs_check
    p.WriteSb();
    EXPECT_TRUE(ThinDevice::Open(p.Config()).status().IsCorruption());
  }
  {
    Pool p;
    p.sb.data_sm.nr_blocks = kDataBlocks + 1;  // more than the data LV holds
    p.WriteSb();
    EXPECT_TRUE(ThinDevice::Open(p.Config()).status().IsCorruption());
  }
  {
    Pool p;
    PutNode(*p.meta, 11, false, {5}, U64s({Map(kDataBlocks)}), 8);  // outside the pool
    auto r = ThinDevice::Open(p.Config());
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption());
    EXPECT_NE(r.status().message().find("outside the pool"), std::string::npos);
  }
  {
    Pool p;
    ASSERT_TRUE(p.meta->Write(0, std::vector<uint8_t>(kThinBlockBytes, 0)).ok());
    EXPECT_EQ(ThinDevice::Open(p.Config()).status().code(), EOPNOTSUPP);
  }
}

}  // namespace
}  // namespace volstack::lvm
